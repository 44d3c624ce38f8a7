#!/usr/bin/env python3
"""Runs a strand-conform command and requires that exactly N checks ran and passed.

  expect_ran.py N -- COMMAND...

A plugin that stops exporting its CollNet would make every collnet.* check SKIP, which the exit
status alone does not show; this insists on "N passed, 0 failed, 0 skipped" as the last line."""
import re
import subprocess
import sys


def main():
    if len(sys.argv) < 4 or sys.argv[2] != "--":
        print(__doc__)
        return 2
    want = int(sys.argv[1])
    cmd = sys.argv[3:]
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=600)
    print("$ " + " ".join(cmd))
    print(p.stdout)
    lines = [l for l in p.stdout.strip().splitlines() if l.strip()]
    m = re.fullmatch(r"(\d+) passed, (\d+) failed, (\d+) skipped", lines[-1] if lines else "")
    if not m:
        print("FAIL: the last line is not 'N passed, N failed, N skipped'")
        return 1
    got = tuple(int(x) for x in m.groups())
    if got != (want, 0, 0) or p.returncode != 0:
        print("FAIL: expected %d passed, 0 failed, 0 skipped (exit 0); got %s (exit %d)"
              % (want, lines[-1], p.returncode))
        return 1
    print("ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
