#!/usr/bin/env python3
"""CI test of rounds_table.py (the median-of-rounds tables of `run_e2e.sh ofi-tune` and
tests/softverbs/bench_gpu.sh) on perf outputs written here: only nccl_e2e's perf lines count, the
median of the rounds lands in the right row and column (µs below 1 MiB, busbw from 1 MiB), the ratio
is to the first configuration, a size or round missing gives '-' or fewer rounds, and the widest
spread is found."""
import os, subprocess, sys, tempfile

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, here)
import rounds_table as rt

MIB = 1 << 20


def perf(path, rows):
    """One nccl_e2e --perf output with NCCL noise around it; rows = [(size, us, busbw)]."""
    with open(path, "w") as f:
        f.write("# nccl_e2e: allreduce\n#      size(B)        count   time(us) algbw(GB/s) busbw(GB/s) iters\n")
        f.write("NCCL INFO Channel 00/02 : 0 1 2 3 4\n")  # 6 fields, not a perf line
        for size, us, bw in rows:
            f.write("  %12d %12d %10.1f %10.2f %10.2f %6d\n" % (size, size // 4, us, bw / 2, bw, 20))


with tempfile.TemporaryDirectory() as d:
    # base: 3 rounds; fast: twice as fast (busbw 1.0 in round 2), size 8 missing in round 2;
    # late: round 3 only.
    for r, k in ((1, 1.0), (2, 3.0), (3, 2.0)):
        perf(os.path.join(d, "%d.base" % r), [(8, 10 * k, 0.0), (4 * MIB, 1000 * k, 4.0 / k)])
        perf(os.path.join(d, "%d.fast" % r),
             [(s, us, bw) for s, us, bw in [(8, 5 * k, 0.0), (4 * MIB, 500 * k, 1.0 if r == 2 else 8.0 / k)]
              if not (r == 2 and s == 8)])
    perf(os.path.join(d, "3.late"), [(4 * MIB, 4000.0, 1.0)])

    assert rt.parse_perf(os.path.join(d, "1.base")) == {8: (10.0, 0.0), 4 * MIB: (1000.0, 4.0)}
    assert rt.parse_perf(os.path.join(d, "missing")) == {}

    p = subprocess.run([sys.executable, os.path.join(here, "rounds_table.py"), d, "base", "fast", "late"],
                       capture_output=True, text=True)
    print(p.stdout, p.stderr)
    assert p.returncode == 0, p.returncode
    lines = p.stdout.splitlines()
    assert lines[0].startswith("median of up to 3 rounds") and "(x) = base / config time" in lines[0], lines[0]
    assert lines[1] == "| size | base | fast | late |", lines[1]
    # 8 B: base median 20 µs; fast rounds 1 and 3 only (5, 10) -> 7.5 µs, 20/7.5 = 2.67x; late none.
    assert lines[3] == "| 8 B | 20.0 | 7.5 (2.67x) | - |", lines[3]
    # 4 MiB: busbw medians 2.00 / 4.00 / 1.00; ratios of the median times (2000 / 1000 / 4000).
    assert lines[4] == "| 4 MiB | 2.00 | 4.00 (2.00x) | 1.00 (0.50x) |", lines[4]
    assert "  fast: 8 B 5-10 (2), 4 MiB 500-1500 (3)" in lines, lines
    assert "  late: 4 MiB 4000-4000 (1)" in lines, lines

    r = rt.load({n: [os.path.join(d, "%d.%s" % (i, n)) for i in (1, 2, 3)] for n in ("base", "fast")})
    assert r.sizes == [8, 4 * MIB]
    assert r.headline("base", 8) == 20.0 and r.headline("fast", 4 * MIB) == 4.0
    assert r.headline("late", 8) is None
    # From 1 MiB by busbw: fast 1 .. 8 (8x) beats base's 1.33 .. 4 (3x); below by time: 2x, 3x.
    w = rt.widest_spread(r, ["base", "fast"])
    assert w == (8.0, "fast", 4 * MIB), w
    assert rt.widest_spread(rt.load({"one": [os.path.join(d, "3.late")]}), ["one"]) is None

assert rt.human(8) == "8 B" and rt.human(64 << 10) == "64 KiB" and rt.human(3 << 30) == "3 GiB"
assert rt.human(1000) == "1000 B"
assert rt.ratio(3.0, 2.0) == "1.50×" and rt.ratio(None, 1.0) == "–" and rt.ratio(1.0, 0) == "–"
print("ok")
