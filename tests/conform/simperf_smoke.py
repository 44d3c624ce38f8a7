#!/usr/bin/env python3
"""meson tests of `strand-conform sim` and `strand-conform perf` (suite 'conform').

  simperf_smoke.py --conform EXE sim PLUGIN [--expect-fail ID,ID] [-- EXTRA ARGS]
      sim must pass every scenario on PLUGIN, or, with --expect-fail, fail exactly those scenario
      ids (the others selected with --only in EXTRA ARGS must pass): proof that sim can fail.
  simperf_smoke.py --conform EXE perf PLUGIN
      perf with tiny sizes runs, prints a sane table and writes sane JSON. No timing is asserted:
      perf is a benchmark, the test only checks that it works.
  simperf_smoke.py --conform EXE perf-collnet PLUGIN [--expect-fail perf.collnet-allreduce] [-- --nranks N]
      perf --collnet at one size prints a sane row and JSON, with the CollNet's progress on NCCL's
      thread and on its own (STRAND_COLLNET_PROGRESS=thread, with --collnet-ref-headers and
      --collnet-ref-streams 2: the reference says both in its JSON), and with the reference as a
      ring (--collnet-ref ring, JSON "net-ring"); with --expect-fail, the table must fail on
      corrupted all-reduce data (a benchmark's only way to fail besides not running).
      With --nranks N (N > 2) the JSON table must say "ranks": N.
"""
import argparse
import json
import math
import os
import re
import subprocess
import sys
import tempfile

SKIP = 77


def run(cmd, timeout):
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                       timeout=timeout)
    print("$ " + " ".join(cmd))
    print(p.stdout)
    return p.returncode, p.stdout


def last_line_ok(out):
    lines = [l for l in out.strip().splitlines() if l.strip()]
    return bool(lines) and re.fullmatch(r"\d+ passed, \d+ failed, \d+ skipped", lines[-1]) is not None


def report_rows(path):
    with open(path) as f:
        rows = json.load(f)["checks"]
    if rows and all(r["id"] == "?" for r in rows):
        # The report names rows through the suite's registry; until it also knows the sim/perf
        # tables it prints "?", and nothing here can be checked by id.
        print("SKIP: the report cannot name sim/perf rows yet (conform_find_check)")
        sys.exit(SKIP)
    return {r["id"]: r for r in rows}


def cmd_sim(a, extra):
    with tempfile.TemporaryDirectory() as d:
        js = os.path.join(d, "report.json")
        rc, out = run([a.conform, "sim", "--json", js] + extra + [a.plugin], 240)
        if not last_line_ok(out):
            return fail("the last line is not 'N passed, N failed, N skipped'")
        rows = report_rows(js)
        want_fail = set(x for x in (a.expect_fail or "").split(",") if x)
        failed = {i for i, r in rows.items() if r["status"] == "FAIL"}
        if want_fail:
            if failed != want_fail:
                return fail("expected exactly %s to fail, got %s" % (sorted(want_fail), sorted(failed)))
            if rc == 0:
                return fail("exit status 0 although scenarios failed")
            for i in want_fail:
                if not rows[i]["message"]:
                    return fail("%s failed without a message" % i)
        else:
            if rc != 0 or failed:
                return fail("sim failed on a correct plugin: %s" % sorted(failed))
            if not any(r["status"] == "PASS" for r in rows.values()):
                return fail("nothing passed")
    print("ok")
    return 0


def num(s):
    v = float(s)
    if not math.isfinite(v) or v < 0:
        raise ValueError(s)
    return v


def cmd_perf(a, extra):
    sizes_expected = [8, 64, 512, 4096, 32768]
    with tempfile.TemporaryDirectory() as d:
        js = os.path.join(d, "perf.json")
        cmd = [a.conform, "perf", "--min-bytes", "8", "--max-bytes", "32K", "--step-factor", "8",
               "--time", "0.01", "--ref", "tcp", "--group", "2", "--depth-sweep", "--sweep-bytes",
               "16K", "--json", js] + extra + [a.plugin]
        rc, out = run(cmd, 240)
        if rc != 0:
            return fail("perf exited with %d" % rc)
        if not last_line_ok(out):
            return fail("the last line is not 'N passed, N failed, N skipped'")
        # Table: every data row of the size tables has the plugin and reference columns.
        tables = re.findall(r"^# (perf\.[a-z-]+): ", out, re.M)
        for t in ("perf.latency", "perf.bw-uni", "perf.bw-bi"):
            if t not in tables:
                return fail("no %s table in the output" % t)
        row_re = re.compile(r"^\s+\d+(\s+[\d.]+)+(\s+\|(\s+[\d.]+)+)?(\s+!(ref)?)*\s*$")
        rows = [[x for x in l.split() if not x.startswith("!")] for l in out.splitlines()
                if row_re.match(l)]
        # The latency table: p50, p99 and max for the plugin and the reference.
        if not re.search(r"^#\s+size\(B\)\s+count\s+p50\(us\)\s+p99\(us\)\s+max\(us\)\s+\|"
                         r"\s+ref p50\(us\)\s+ref p99\(us\)\s+ref max\(us\)\s+ratio", out, re.M):
            return fail("the latency table lacks the p50/p99/max columns")
        # The header states the largest transfer perf makes (--max-bytes 32K), not the suite's.
        m = re.search(r"largest transfer (\d+) bytes", out)
        if not m or int(m.group(1)) != 32768:
            return fail("the header does not state the largest transfer as 32768 bytes: %s"
                        % (m.group(0) if m else "no 'largest transfer'"))
        if not rows:
            return fail("no table rows")
        for r in rows:
            if "|" not in r:
                return fail("row without reference columns: %s" % " ".join(r))
            try:
                [num(x) for x in r if x != "|"]
            except ValueError as e:
                return fail("not a number in a row: %s" % e)
        with open(js) as f:
            doc = json.load(f)
        ids = [t["id"] for t in doc["tables"]]
        for t in ("perf.latency", "perf.bw-uni", "perf.bw-bi", "perf.depth-sweep"):
            if t not in ids:
                return fail("JSON lacks table %s (has %s)" % (t, ids))
        for t in doc["tables"]:
            if t["id"] == "perf.depth-sweep":
                continue
            if t["id"] == "perf.bw-grouped" and not t["rows"]:
                continue
            got = [r["bytes"] for r in t["rows"]]
            if got != sizes_expected:
                return fail("%s sizes %s, expected %s" % (t["id"], got, sizes_expected))
            for r in t["rows"]:
                if r["count"] <= 0 or any(not math.isfinite(v) or v < 0 for k, v in r.items()
                                          if isinstance(v, float)):
                    return fail("bad values in %s: %s" % (t["id"], r))
                if t["reference"] and "ratio" not in r:
                    return fail("%s: reference columns missing" % t["id"])
                if t["id"] == "perf.latency":
                    for k in ("p50_us", "p99_us", "max_us"):
                        if k not in r or (t["reference"] and "ref_" + k not in r):
                            return fail("perf.latency row lacks %s: %s" % (k, r))
                    if not r["p50_us"] <= r["p99_us"] <= r["max_us"]:
                        return fail("perf.latency row with p50 > p99 or p99 > max: %s" % r)
                    if not isinstance(r.get("outlier"), bool) or r["outlier"] != (
                            r["max_us"] > 10 * r["p50_us"] > 0):
                        return fail("perf.latency row: outlier flag wrong: %s" % r)
    print("ok")
    return 0


def cmd_perf_collnet(a, extra):
    cid = "perf.collnet-allreduce"
    nranks = int(extra[extra.index("--nranks") + 1]) if "--nranks" in extra else 2
    # the second run also puts a header message ahead of each reference payload and lays the
    # reference out on the stub's comms (the stub's shape), the third measures the reference as a
    # ring (--collnet-ref ring)
    runs = [(None, False, False)] if a.expect_fail else [(None, False, False), ("thread", True, False),
                                                          (None, False, True)]
    for progress, headers, ring in runs:
        env = dict(os.environ)
        env.pop("STRAND_COLLNET_PROGRESS", None)
        if progress:
            env["STRAND_COLLNET_PROGRESS"] = progress
        with tempfile.TemporaryDirectory() as d:
            js = os.path.join(d, "perf.json")
            cmd = [a.conform, "perf", "--collnet", "--only", cid, "--collnet-bytes", "256K",
                   "--time", "0.05", "--json", js] \
                + (["--collnet-ref-headers", "--collnet-ref-streams", "2"] if headers else []) \
                + (["--collnet-ref", "ring"] if ring else []) \
                + extra + [a.plugin]
            print("STRAND_COLLNET_PROGRESS=%s" % (progress or "(unset)"))
            p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                               timeout=120, env=env)
            print("$ " + " ".join(cmd))
            print(p.stdout)
            rc, out = p.returncode, p.stdout
            if not last_line_ok(out):
                return fail("the last line is not 'N passed, N failed, N skipped'")
            status = re.search(r"^(PASS|FAIL|SKIP)\s+v\d+\s+" + re.escape(cid) + r"\s", out, re.M)
            if not status:
                return fail("no %s row in the report" % cid)
            if a.expect_fail:
                if status.group(1) != "FAIL" or rc == 0:
                    return fail("corrupted all-reduce data did not fail %s (row %s, exit %d)"
                                % (cid, status.group(1), rc))
                if "differs from the sum of every rank's data" not in out:
                    return fail("the failure does not say that the data differs")
                continue
            if rc != 0 or status.group(1) != "PASS":
                return fail("perf --collnet exited with %d, row %s" % (rc, status.group(1)))
            rows = re.findall(r"^\s+262144\s+8(\s+[\d.]+){3}\s+\|(\s+[\d.]+){4}\s*$", out, re.M)
            if len(rows) != 1:
                return fail("expected one table row of 262144 bytes, window 8, with reference columns")
            with open(js) as f:
                doc = json.load(f)
            t = [t for t in doc["tables"] if t["id"] == cid]
            if len(t) != 1 or [r["bytes"] for r in t[0]["rows"]] != [262144]:
                return fail("JSON lacks the %s table with one 262144-byte row" % cid)
            want_ref = "net+headers" if headers else "net-ring" if ring else "net"
            if t[0].get("collnet_reference") != want_ref:
                return fail("JSON collnet_reference is %r, expected %r" % (t[0].get("collnet_reference"), want_ref))
            if t[0].get("ref_streams") != (2 if headers else None):
                return fail("JSON ref_streams is %r, expected %r" % (t[0].get("ref_streams"), 2 if headers else None))
            if t[0].get("ranks", 2) != nranks:
                return fail("JSON ranks is %r, expected %d" % (t[0].get("ranks"), nranks))
            r = t[0]["rows"][0]
            for k in ("window", "count", "time_us", "algbw_gbps", "ref_count", "ref_time_us",
                      "ref_algbw_gbps", "ratio"):
                if k not in r or not math.isfinite(r[k]) or r[k] <= 0:
                    return fail("JSON row: %s missing or not positive: %s" % (k, r))
    print("ok")
    return 0


def fail(msg):
    print("FAIL: " + msg)
    return 1


def main():
    argv = sys.argv[1:]
    extra = []
    if "--" in argv:
        i = argv.index("--")
        argv, extra = argv[:i], argv[i + 1:]
    ap = argparse.ArgumentParser()
    ap.add_argument("--conform", required=True)
    ap.add_argument("--expect-fail")
    ap.add_argument("mode", choices=["sim", "perf", "perf-collnet"])
    ap.add_argument("plugin")
    a = ap.parse_args(argv)
    if a.mode == "perf-collnet":
        return cmd_perf_collnet(a, extra)
    return cmd_sim(a, extra) if a.mode == "sim" else cmd_perf(a, extra)


if __name__ == "__main__":
    sys.exit(main())
