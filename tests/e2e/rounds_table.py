#!/usr/bin/env python3
"""Medians over rounds of `nccl_e2e --perf` runs, for the benchmark tables of docs/benchmarks.

A GPU benchmark runs each configuration a few times ("rounds") because one round on a shared
machine can be off by 2x; the table then shows, per size, the median time (below 1 MiB) or busbw
(from 1 MiB on) of each configuration and its speed ratio to a reference. Two callers use it:

  rounds_table.py DIR NAME [NAME...]
      the table of `run_e2e.sh ofi-tune`: DIR holds one nccl_e2e --perf output per round and
      configuration, named ROUND.NAME; one column per NAME with its ratio to the first NAME, then
      each configuration's spread (min-max µs and how many rounds had the size). A configuration
      or round that failed simply has fewer numbers; '-' where none.
  tests/softverbs/bench_gpu.sh imports it (load / Rounds / human / ratio / widest_spread) for its
      built-in IB against strand-ib table, whose columns are its own.

nccl_e2e's perf lines are `size count time(us) algbw busbw iters`; everything else in a file (NCCL
output, comments) is skipped."""
import os
import statistics
import sys

MIB = 1 << 20


def parse_perf(path):
    """{size: (us, busbw)} from one nccl_e2e --perf output; {} when the file is missing."""
    out = {}
    try:
        with open(path) as f:
            for line in f:
                p = line.split()
                if len(p) != 6 or not (p[0].isdigit() and p[1].isdigit() and p[5].isdigit()):
                    continue
                try:
                    out[int(p[0])] = (float(p[2]), float(p[4]))
                except ValueError:
                    continue
    except OSError:
        pass
    return out


class Rounds:
    """The perf results of several configurations over rounds: {name: [{size: (us, busbw)}, ...]}."""

    def __init__(self, runs):
        self.runs = runs
        self.sizes = sorted({s for rounds in runs.values() for run in rounds for s in run})

    def samples(self, name, size, k):
        """Every round's value of `size` (k = 0: µs, 1: busbw GB/s)."""
        return [run[size][k] for run in self.runs.get(name, []) if size in run]

    def median(self, name, size, k):
        v = self.samples(name, size, k)
        return statistics.median(v) if v else None

    def headline(self, name, size):
        """The value a table shows for `size`: µs below 1 MiB, busbw from 1 MiB on."""
        return self.median(name, size, 1 if size >= MIB else 0)


def load(paths):
    """Rounds from {name: [path of round 1, path of round 2, ...]}."""
    return Rounds({n: [parse_perf(p) for p in ps] for n, ps in paths.items()})


def human(b):
    for unit, shift in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if b >= 1 << shift and b % (1 << shift) == 0:
            return f"{b >> shift} {unit}"
    return f"{b} B"


def ratio(a, b, fmt="%.2f×"):
    """a / b formatted, '–' when either is missing or 0."""
    return "–" if a is None or b is None or a == 0 or b == 0 else fmt % (a / b)


def widest_spread(rounds, names):
    """(max/min, name, size) of the widest spread between rounds of the value a table shows, or
    None when no size ran twice."""
    spread = []
    for n in names:
        for s in rounds.sizes:
            v = rounds.samples(n, s, 1 if s >= MIB else 0)
            if len(v) > 1 and min(v) > 0:
                spread.append((max(v) / min(v), n, s))
    return max(spread) if spread else None


def ofi_tune_table(d, names):
    """The `run_e2e.sh ofi-tune` table (module docstring) as a list of lines."""
    rounds = sorted({f.split(".", 1)[0] for f in os.listdir(d) if "." in f})
    r = load({n: [os.path.join(d, f"{rd}.{n}") for rd in rounds] for n in names})
    ref = names[0]
    lines = [f"median of up to {len(rounds)} rounds; µs per all-reduce below 1 MiB, busbw GB/s from "
             f"1 MiB; (x) = {ref} / config time (above 1 = faster than {ref})",
             "| size | " + " | ".join(names) + " |",
             "|---:|" + "---:|" * len(names)]
    for s in r.sizes:
        cells = []
        for n in names:
            us = r.median(n, s, 0)
            if us is None:
                cells.append("-")
                continue
            v = f"{r.median(n, s, 1):.2f}" if s >= MIB else f"{us:.1f}"
            if n != ref and r.median(ref, s, 0) is not None:
                v += f" ({r.median(ref, s, 0) / us:.2f}x)"
            cells.append(v)
        lines.append(f"| {human(s)} | " + " | ".join(cells) + " |")
    lines += ["", "spread (min-max µs, rounds):"]
    for n in names:
        parts = []
        for s in r.sizes:
            us = r.samples(n, s, 0)
            if us:
                parts.append(f"{human(s)} {min(us):.0f}-{max(us):.0f} ({len(us)})")
        lines.append(f"  {n}: " + ", ".join(parts))
    return lines


def main(argv):
    if len(argv) < 3:
        print(__doc__, file=sys.stderr)
        return 2
    print("\n".join(ofi_tune_table(argv[1], argv[2:])))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
