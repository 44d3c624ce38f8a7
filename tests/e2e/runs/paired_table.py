#!/usr/bin/env python3
"""Paired-round table of tests/e2e/runs/sksmall6.sh and later: DIR holds one file per round, each
with several nccl_e2e --perf sections ('# TAG: OP, N ranks, ...' then 'size count us algbw busbw
iters'), all launched by one `run_e2e.sh sweep` whose order rotates between rounds. A tag
'strand ' is strand-socket's defaults ("strand"); a tag with NCCL_NET=Socket is the built-in Socket
("tuned" when it sets NCCL_NSOCKS_PERTHREAD, else "default"); any other tag is named by its extra
variables. Per size: each configuration's median µs over the rounds, and for each strand-socket
configuration the ratio faster built-in / it taken per round (the faster of default and tuned in
that round), then the median and the range of those ratios (> 1: strand-socket faster).

A tag holding E2E_NAME=NAME (an extra variable nccl_e2e ignores) is labelled NAME: other plugins
run through the same sweep (NCCL_NET_PLUGIN=strand-ofi ...) and identical twins (a control of the
launch-to-launch spread) get short, distinct names. PAIRED_REFS=default,tuned (the default) names
the reference labels whose per-round faster one each ratio is taken against; PAIRED_REFS=default
compares with the built-in default alone (strand-ofi's target)."""
import glob
import os
import re
import statistics
import sys


def label(tag):
    m = re.search(r"E2E_NAME=(\S+)", tag)
    if m:
        return m.group(1)
    if "NCCL_NET=Socket" in tag:
        return "tuned" if "NSOCKS" in tag else "default"
    extra = tag[len("strand "):] if tag.startswith("strand ") else tag
    return extra.strip() or "strand"


def load(directory):
    rounds, order, ranks = [], [], "?"
    for path in sorted(glob.glob(directory + "/*-r*.txt")):
        cur, d = None, {}
        for line in open(path, errors="replace"):
            m = re.match(r"# (.+?): \w+, (\d+) ranks", line)
            if m:
                cur, ranks = label(m.group(1)), m.group(2)
                if cur not in order:
                    order.append(cur)
                continue
            p = line.split()
            if cur and len(p) == 6 and p[0].isdigit() and p[1].isdigit() and p[5].isdigit():
                d.setdefault(cur, {})[int(p[0])] = float(p[2])
        rounds.append(d)
    return rounds, order, ranks


def main():
    rounds, order, ranks = load(sys.argv[1])
    wanted = os.environ.get("PAIRED_REFS", "default,tuned").split(",")
    refs = [n for n in wanted if n in order]
    mine = [n for n in order if n not in refs]
    sizes = sorted({s for d in rounds for v in d.values() for s in v})
    print(f"# {ranks} ranks, {len(rounds)} rounds; median us; ratio = per round faster built-in "
          "/ configuration, then median (min-max)")
    print("| size | " + " | ".join(mine + [f"built-in {n}" for n in refs]) + " | "
          + " | ".join(f"ratio {n}" for n in mine) + " |")
    for s in sizes:
        cells = []
        for n in mine + refs:
            v = [d[n][s] for d in rounds if n in d and s in d[n]]
            cells.append(f"{statistics.median(v):.1f}" if v else "-")
        for n in mine:
            r = [min(d[b][s] for b in refs if b in d and s in d[b]) / d[n][s] for d in rounds
                 if n in d and s in d[n] and any(b in d and s in d[b] for b in refs)]
            cells.append(f"{statistics.median(r):.2f} ({min(r):.2f}-{max(r):.2f})" if r else "-")
        print(f"| {s} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
