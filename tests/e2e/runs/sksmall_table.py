#!/usr/bin/env python3
"""Median table of the rounds of tests/e2e/runs/sksmall.sh: each file is one round holding several
nccl_e2e --perf sections ('# NAME: allreduce, N ranks, ...' then 'size count us algbw busbw iters'
lines). Prints per size the median µs of each configuration, the faster built-in (per round the
faster of builtin-default and builtin-tuned, then the median) and each strand row's ratio to it."""
import re
import statistics
import sys

rounds = []
nranks = "?"
for path in sys.argv[1:]:
    cur, data = None, {}
    for line in open(path, errors="replace"):
        m = re.match(r"# (.+?): allreduce, (\d+) ranks", line)
        if m:
            cur, nranks = m.group(1), m.group(2)
            continue
        p = line.split()
        if cur and len(p) == 6 and p[0].isdigit() and p[1].isdigit() and p[5].isdigit():
            data.setdefault(cur, {})[int(p[0])] = float(p[2])
    rounds.append(data)

names = []
for d in rounds:
    for k in d:
        if k not in names:
            names.append(k)
strand = [n for n in names if not n.startswith("builtin")]
sizes = sorted({s for d in rounds for v in d.values() for s in v})
print(f"# {nranks} ranks, {len(rounds)} rounds, median us; ratio = faster built-in / strand")
print("| size | " + " | ".join(strand) + " | built-in default | built-in tuned | faster built-in | "
      + " | ".join(f"ratio {n}" for n in strand) + " |")
for s in sizes:
    def med(name):
        v = [d[name][s] for d in rounds if name in d and s in d[name]]
        return statistics.median(v) if v else None
    fb = [min(d[b][s] for b in ("builtin-default", "builtin-tuned") if b in d and s in d[b])
          for d in rounds if any(b in d and s in d[b] for b in ("builtin-default", "builtin-tuned"))]
    fbm = statistics.median(fb) if fb else None
    cells = [med(n) for n in strand]
    row = [str(s)] + [f"{c:.1f}" if c else "-" for c in cells]
    row += [f"{med(b):.1f}" if med(b) else "-" for b in ("builtin-default", "builtin-tuned")]
    row += [f"{fbm:.1f}" if fbm else "-"]
    row += [f"{fbm / c:.2f}" if c and fbm else "-" for c in cells]
    spread = [f"{n}: " + "/".join(f"{d[n][s]:.1f}" for d in rounds if n in d and s in d[n])
              for n in names]
    print("| " + " | ".join(row) + " |   rounds " + "; ".join(spread))
