#!/usr/bin/env python3
"""Reads the CSTRACE lines of tests/e2e/runs/cnhost11.sh (a log of `strand-conform perf --collnet -v`
with the traced stub) and says, per exchange phase, how an exchange's time (first post accepted ->
every message complete, on one rank) splits into waiting for the last rank to post its side and
what is left after every rank has posted; plus how many exchanges each rank had in flight.

usage: cstrace.py LOG [LOG...]    (skips the first 10 % of calls: warm-up)"""
import re
import statistics as st
import sys

LINE = re.compile(r"CSTRACE (\d+) (\d+) (\d+) (\d+) (\d+) (\d+) (\d+) ([\d.]+) ([\d.]+) ([\d.]+) ([\d.]+) ([\d.]+) ([\d.]+) ([\d.]+)")


def med(xs):
    return st.median(xs) if xs else float("nan")


def pct(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(p * len(xs)))] if xs else float("nan")


def report(path):
    ex = {}  # (lane, turn, phase) -> {rank: record}
    nranks = 0
    for line in open(path, errors="replace"):
        m = LINE.search(line)
        if not m:
            continue
        rank, n, lane, turn, ph, call, chunk = (int(m.group(i)) for i in range(1, 8))
        issued, posted, first, rin, sout, done, red1 = (float(m.group(i)) for i in range(8, 15))
        nranks = n
        ex.setdefault((lane, turn, ph), {})[rank] = dict(call=call, issued=issued, posted=posted, first=first,
                                                          rin=rin, sout=sout, done=done, red1=red1)
    full = {k: v for k, v in ex.items() if len(v) == nranks}
    if not full:
        print(f"{path}: no exchange seen on every rank")
        return
    last_call = max(r["call"] for v in full.values() for r in v.values())
    skip = last_call // 10
    print(f"{path}: {nranks} ranks, {len(full)} exchanges on every rank, calls {skip}..{last_call}")
    for ph, name in ((0, "reduce-scatter"), (1, "all-gather")):
        exs, waits, afters, skews, rins = [], [], [], [], []
        for (lane, turn, p), v in full.items():
            if p != ph or min(r["call"] for r in v.values()) < skip:
                continue
            last_post = max(r["first"] for r in v.values())
            skews.append(last_post - min(r["first"] for r in v.values()))
            for r in v.values():
                exs.append(r["done"] - r["first"])
                waits.append(last_post - r["first"])
                afters.append(r["done"] - last_post)
                rins.append(r["rin"] - last_post)
        if not exs:
            continue
        print(f"  {name}: {len(exs)} rank-sides; median us (p10-p90): exchange {med(exs):.0f} "
              f"({pct(exs, .1):.0f}-{pct(exs, .9):.0f}); waiting for the last rank's post {med(waits):.0f} "
              f"({pct(waits, .1):.0f}-{pct(waits, .9):.0f}); after every rank posted {med(afters):.0f} "
              f"({pct(afters, .1):.0f}-{pct(afters, .9):.0f}), of it to the first payload {med(rins):.0f}; "
              f"first-to-last post across ranks {med(skews):.0f}; mean share waiting "
              f"{100 * sum(waits) / sum(exs):.0f} %")
    # exchanges in flight per rank, sampled at each exchange's start
    for rank in range(nranks):
        spans = sorted((v[rank]["first"], v[rank]["done"]) for v in full.values() if v[rank]["call"] >= skip)
        depth = [sum(1 for a, b in spans if a <= t < b) for t, _ in spans]
        print(f"  rank {rank}: exchanges in flight at an exchange's start: median {med(depth):.0f}, "
              f"max {max(depth)}")


for p in sys.argv[1:]:
    report(p)
