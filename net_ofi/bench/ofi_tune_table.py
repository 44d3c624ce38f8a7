#!/usr/bin/env python3
"""One table from `run_e2e.sh ofi-tune`: median over rounds of each configuration's all-reduce time
per size, and each configuration's ratio to the first one (the built-in Socket default; above 1 =
faster than it). GB/s (busbw) is printed from 1 MiB on, as in docs/benchmarks.

  ofi_tune_table.py DIR NAME [NAME...]

DIR holds one nccl_e2e --perf output per round and configuration, named ROUND.NAME (rank 0's
stdout). A configuration or round that failed simply has fewer numbers; '-' where none."""
import os
import statistics
import sys


def parse(path):
    """{size: (us, busbw)} from nccl_e2e's perf lines: size count time algbw busbw iters."""
    out = {}
    try:
        with open(path) as f:
            for line in f:
                p = line.split()
                if len(p) == 6 and p[0].isdigit():
                    out[int(p[0])] = (float(p[2]), float(p[4]))
    except OSError:
        pass
    return out


def human(b):
    for unit, shift in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if b >= 1 << shift and b % (1 << shift) == 0:
            return f"{b >> shift} {unit}"
    return f"{b} B"


def main():
    d, names = sys.argv[1], sys.argv[2:]
    rounds = sorted({f.split(".", 1)[0] for f in os.listdir(d) if "." in f})
    runs = {n: [parse(os.path.join(d, f"{r}.{n}")) for r in rounds] for n in names}
    sizes = sorted({s for n in names for run in runs[n] for s in run})
    med = {}
    for n in names:
        for s in sizes:
            us = [run[s][0] for run in runs[n] if s in run]
            bw = [run[s][1] for run in runs[n] if s in run]
            if us:
                med[n, s] = (statistics.median(us), statistics.median(bw), min(us), max(us), len(us))
    print(f"median of up to {len(rounds)} rounds; µs per all-reduce below 1 MiB, busbw GB/s from 1 MiB; "
          f"(x) = {names[0]} / config time (above 1 = faster than {names[0]})")
    print("| size | " + " | ".join(names) + " |")
    print("|---:|" + "---:|" * len(names))
    for s in sizes:
        cells = []
        for n in names:
            if (n, s) not in med:
                cells.append("-")
                continue
            us, bw = med[n, s][:2]
            v = f"{bw:.2f}" if s >= 1 << 20 else f"{us:.1f}"
            if n != names[0] and (names[0], s) in med:
                v += f" ({med[names[0], s][0] / us:.2f}x)"
            cells.append(v)
        print(f"| {human(s)} | " + " | ".join(cells) + " |")
    print()
    print("spread (min-max µs, rounds):")
    for n in names:
        parts = [f"{human(s)} {med[n, s][2]:.0f}-{med[n, s][3]:.0f} ({med[n, s][4]})"
                 for s in sizes if (n, s) in med]
        print(f"  {n}: " + ", ".join(parts))
    return 0


if __name__ == "__main__":
    sys.exit(main())
