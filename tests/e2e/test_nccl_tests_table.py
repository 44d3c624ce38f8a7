#!/usr/bin/env python3
"""CI test of nccl_tests_table.py (the table of `run_e2e.sh nccl-tests`) on recorded-format logs in
testdata/nccl-tests: values land in the right row and column, sizes are named, wrong elements are
summed over both placements, a log with wrong elements or without results fails the run."""
import os, subprocess, sys

here = os.path.dirname(os.path.abspath(__file__))
data = os.path.join(here, "testdata", "nccl-tests")
def run(*entries):
    p = subprocess.run([sys.executable, os.path.join(here, "nccl_tests_table.py"), "2.19.6", "mode X"]
                       + ["%s|%s|%s" % (c, o, os.path.join(data, f)) for c, o, f in entries],
                       capture_output=True, text=True)
    return p.returncode, p.stdout

rc, out = run(("builtin", "all_reduce", "log.builtin.all_reduce"),
              ("strand-socket", "all_reduce", "log.strand-socket.all_reduce"))
print(out)
lines = out.splitlines()
assert rc == 0, rc
assert lines[0].startswith("# nccl-tests 2.19.6") and "mode X" in lines[0], lines[0]
assert lines[1].split() == ["op", "size", "builtin", "strand-socket"], lines[1]
assert lines[2].split() == ["all_reduce", "8", "0.00", "0.00"], lines[2]
assert lines[3].split() == ["all_reduce", "1M", "2.62", "5.00"], lines[3]
assert lines[4].split() == ["all_reduce", "avg", "1.31", "1.31"], lines[4]
assert lines[5].split()[-2:] == ["0", "0"], lines[5]

rc, out = run(("builtin", "all_reduce", "log.builtin.all_reduce"),
              ("strand-socket", "sendrecv", "log.strand-socket.sendrecv"),
              ("builtin", "sendrecv", "missing.log"))
print(out)
assert rc == 1, rc
assert any(l.split() == ["sendrecv", "8M", "-", "8.39"] for l in out.splitlines()), out
assert "wrong elements (all ops)" in out and out.split("wrong elements (all ops)")[1].split()[:2] == ["0", "4"], out
assert "FAIL: strand-socket sendrecv: wrong" in out and "FAIL: builtin sendrecv: no output" in out, out
print("ok")
