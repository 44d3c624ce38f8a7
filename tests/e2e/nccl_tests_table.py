#!/usr/bin/env python3
"""The comparison table of `run_e2e.sh nccl-tests` (tests/e2e/nccl_tests.sh): reads nccl-tests
logs (rank 0's output) and prints, per operation and message size, the out-of-place bus bandwidth
of every configuration, each operation's average, and the wrong elements; exit status 1 and a FAIL
line for any log without results or with "Out of bounds values" not 0.

    nccl_tests_table.py VERSION DESCRIPTION NAME|OP|LOG ...
"""
import re, sys
version, desc, entries = sys.argv[1], sys.argv[2], sys.argv[3:]
configs, ops, data, avg, wrong, status = [], [], {}, {}, {}, {}
for e in entries:
    name, op, path = e.split("|", 2)
    if name not in configs: configs.append(name)
    if op not in ops: ops.append(op)
    try:
        text = open(path, errors="replace").read()
    except OSError:
        text = ""
    rows = 0
    bus_i, wrong_i = 7, [8, 12]  # columns of the default layout; the header line says for sure
    for line in text.splitlines():
        t = line.split()
        if line.startswith("#") and "#wrong" in t and "size" in t:
            h = line.lstrip("#").split()
            bus_i = h.index("busbw")
            wrong_i = [i for i, x in enumerate(h) if x == "#wrong"]
            continue
        if len(t) > max(wrong_i) and t[0].isdigit() and not line.lstrip().startswith("#"):
            try:
                busbw = float(t[bus_i])
            except ValueError:
                continue
            data[(op, int(t[0]), name)] = busbw
            for i in wrong_i:
                if t[i].isdigit(): wrong[(name, op)] = wrong.get((name, op), 0) + int(t[i])
            rows += 1
        m = re.match(r"#\s*Avg bus bandwidth\s*:\s*([\d.]+)", line)
        if m: avg[(op, name)] = float(m.group(1))
    status[(name, op)] = "ok" if rows and "Out of bounds values : 0 OK" in text else (
        "wrong" if rows else "no output")

def human(n):
    for unit, k in (("G", 1 << 30), ("M", 1 << 20), ("K", 1 << 10)):
        if n >= k and n % k == 0: return "%d%s" % (n // k, unit)
    return str(n)

print("# nccl-tests %s: bus bandwidth (GB/s, out-of-place) per configuration; %s" % (version, desc))
w = max(12, max((len(c) for c in configs), default=0) + 2)
print("%-15s %8s" % ("op", "size") + "".join("%*s" % (w, c) for c in configs))
for op in ops:
    sizes = sorted({s for (o, s, _) in data if o == op})
    for s in sizes:
        cells = ["%*s" % (w, "%.2f" % data[(op, s, c)] if (op, s, c) in data else "-") for c in configs]
        print("%-15s %8s" % (op, human(s)) + "".join(cells))
    print("%-15s %8s" % (op, "avg") + "".join("%*s" % (w, "%.2f" % avg[(op, c)] if (op, c) in avg else "-") for c in configs))
print("%-24s" % "wrong elements (all ops)" + "".join("%*s" % (w, str(sum(wrong.get((c, o), 0) for o in ops))) for c in configs))
bad = [(c, o, status[(c, o)]) for c in configs for o in ops if (c, o) in status and status[(c, o)] != "ok"]
for c, o, st in bad:
    print("FAIL: %s %s: %s" % (c, o, st))
sys.exit(1 if bad else 0)
