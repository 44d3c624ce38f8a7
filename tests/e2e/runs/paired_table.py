#!/usr/bin/env python3
"""Paired-round table of tests/e2e/runs/sksmall6.sh and later: DIR holds one file per round, each
with several nccl_e2e --perf sections ('# TAG: OP, N ranks, ...' then 'size count us algbw busbw
iters'), all launched by one `run_e2e.sh sweep` (or `collnet_e2e.sh variants`) whose order rotates
between rounds. A tag holding E2E_NAME=NAME (an extra variable nccl_e2e ignores; the run scripts
from sksmall8.sh on label their configurations so) is labelled NAME: other plugins run through the
same sweep (NCCL_NET_PLUGIN=strand-ofi ...) and identical twins (the launch-to-launch control) get
short, distinct names. Otherwise a tag 'strand ' is strand-socket's defaults ("strand"); a tag with
NCCL_NET=Socket is the built-in Socket ("tuned" when it sets NCCL_NSOCKS_PERTHREAD, else
"default"); any other tag is named by its extra variables. Per size: each configuration's median
µs over the rounds, and for each configuration the ratio reference / it taken per round (the faster
of the references in that round), then the median and the range of those ratios (> 1: the
configuration faster; at one size the time ratio is the busbw ratio configuration / reference).

Options (collnet6.sh and later; without them the table is sksmall6.sh's):
  --ref LABEL          LABEL is a reference (repeatable; default: the built-in Socket's two)
  --closing            after the table, each configuration's rank-0 `closing:` lines per round
                       (collnet_e2e.sh variants prints them as '# closing: ...' after a section)
PAIRED_REFS=LABEL,... in the environment stands for --ref options (ofi5.sh: PAIRED_REFS=default,
strand-ofi's target being the built-in default alone)."""
import argparse
import glob
import os
import re
import statistics


def label(tag):
    m = re.search(r"E2E_NAME=(\S+)", tag)
    if m:
        return m.group(1)
    if "NCCL_NET=Socket" in tag:
        return "tuned" if "NSOCKS" in tag else "default"
    extra = tag[len("strand "):] if tag.startswith("strand ") else tag
    return extra.strip() or "strand"


def load(directory):
    rounds, order, ranks, closing = [], [], "?", []
    for path in sorted(glob.glob(directory + "/*-r*.txt")):
        cur, d, cl = None, {}, {}
        for line in open(path, errors="replace"):
            if line.startswith("# closing:"):
                if cur and re.search(r"rank 0/\d+ closing:", line):
                    cl.setdefault(cur, []).append(line[len("# closing:"):].strip())
                continue
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
        closing.append(cl)
    return rounds, order, ranks, closing


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("dir")
    env_refs = [x for x in os.environ.get("PAIRED_REFS", "").split(",") if x]
    ap.add_argument("--ref", action="append", default=env_refs)
    ap.add_argument("--closing", action="store_true")
    a = ap.parse_args()
    rounds, order, ranks, closing = load(a.dir)
    refs = [n for n in (a.ref or ("default", "tuned")) if n in order]
    builtin = not a.ref
    mine = [n for n in order if n not in refs]
    sizes = sorted({s for d in rounds for v in d.values() for s in v})
    what = "faster built-in" if builtin else "fastest reference (" + ", ".join(refs) + ")"
    print(f"# {ranks} ranks, {len(rounds)} rounds; median us; ratio = per round {what} us "
          "/ configuration us, then median (min-max)")
    print("| size | " + " | ".join(mine + [f"built-in {n}" if builtin else n for n in refs]) + " | "
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
    if a.closing:
        for n in order:
            lines = [(i + 1, x) for i, cl in enumerate(closing) for x in cl.get(n, [])]
            if not lines:
                continue
            print(f"## {n}: rank 0's closing lines, per round")
            for i, x in lines:
                print(f"round {i}: {x}")


if __name__ == "__main__":
    main()
