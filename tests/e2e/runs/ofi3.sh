#!/usr/bin/env bash
# GPU-RUN of helper ofi8, session 8 (issue 26 item 2: strand-ofi >= the built-in Socket default at
# every all-reduce size, 2 and 4 ranks; the 8 B first-use stall traced). Numbers: docs/benchmarks/ofi.md.
# One command from the repository root, < 3 min on 2 GPUs (needs .e2e-carry for libfabric):
#   tests/e2e/runs/ofi3.sh
# 1. 2 ranks (GPUs 0,1), 3 rounds in turn, all-reduce 8 B .. 1 MiB, then 8 and 32 B once more at
#    the end of the same process (first use of the comm against warm): the built-in Socket default
#    and tuned, strand-ofi's default (4 rails, bands 16K:0,1M:2:simple), and
#      r1    one rail, same speed and bands: the configuration whose first size stalled in every
#            earlier call (69-121 us at 8 B), kept here as the stall's reproducer
#      tree  the default with NCCL_ALGO=Tree: one send per rank per small all-reduce instead of
#            the ring's two (strand-ofi's gap at 32 B is a per-message cost)
#      ring  the default with NCCL_ALGO=Ring (which of the two NCCL picks by itself)
#    Every strand-ofi run traces at STRAND_OFI_SLOW_MS=2 (calls split into lock wait and time
#    inside, slow fi_cq_read, rail threads holding the lock, caller gaps, slow requests) and every
#    launch records the kernel's TCP counters before and after (retransmissions, loss probes,
#    drops) and keeps both ranks' logs (E2E_KEEP_LOGS=1).
# 2. (2 GPUs only) NCCL's proxy-step profile (phase medians, p90 and max) of 8 and 32 B: built-in
#    and strand-ofi with one rail.
# 3. (>= 4 GPUs only) 4 ranks, 2 rounds, 16 B .. 32 MiB: built-in, default, and the tuner bands
#    for 2-16 MiB (Simple on 4 or 2 channels up to 16 MiB).
# Everything lands in $OUT/ofi-gpu3.tgz (+ the printed log $OUT/ofi-gpu3.txt).
set -u
root=$(cd "$(dirname "$0")/../../.." && pwd)
cd "$root"
out=${OUT:-$root/build-e2e/ofi-gpu-out}
work=$out/ofi-gpu3
mkdir -p "$work/n2" "$work/n4"
ngpu=$(nvidia-smi -L 2>/dev/null | wc -l)
budget2=95; [ "$ngpu" -ge 4 ] && budget2=60
{
  echo "# $(date -u +%FT%TZ) tests/e2e/runs/ofi3.sh at $(git -C "$root" rev-parse --short HEAD 2>/dev/null)"
  nvidia-smi -L 2>/dev/null; nproc; uname -r
  CUDA_VISIBLE_DEVICES=0,1 NRANKS=2 E2E_ROUNDS=3 E2E_BUDGET_S=$budget2 E2E_SLOW_MS=2 E2E_TRACE_LINES=0 \
    E2E_OFI_TUNED=1 E2E_KEEP_LOGS=1 E2E_SIZES=8,32,128,1K,8K,64K,128K,256K,512K,1M,8,32 \
    OUT=$work/n2 timeout 130 tests/e2e/run_e2e.sh ofi-tune \
    'r1|STRAND_OFI_RAILS=1 STRAND_OFI_SPEED_MBPS=100000 STRAND_OFI_TUNER_CHANNELS=16K:0,1M:2:simple' \
    'tree|NCCL_ALGO=Tree' \
    'ring|NCCL_ALGO=Ring'
  echo "# rc $? after 2 ranks, $(date -u +%FT%TZ)"
  # Per round and configuration: cold and warm 8/32 B, TCP counter deltas, and the trace of every
  # round whose first sizes were slow (or the first round of each strand-ofi configuration).
  python3 - "$work/n2/ofi-tune" <<'EOF'
import os, re, statistics, sys
d = sys.argv[1]
names = ["builtin", "tuned", "ofi", "r1", "tree", "ring"]
def perf(path):
    rows = []
    try:
        for line in open(path):
            p = line.split()
            if len(p) == 6 and p[0].isdigit() and p[1].isdigit() and p[5].isdigit():
                rows.append((int(p[0]), float(p[2])))
    except OSError:
        pass
    return rows
def label(size, k):
    h = f"{size >> 20} MiB" if size >= 1 << 20 else f"{size >> 10} KiB" if size >= 1024 else f"{size} B"
    return h + (" again" if k else "")
def counters(path):
    c, head = {}, {}
    try:
        for line in open(path):
            p = line.split()
            if not p: continue
            key = p[0]
            if key in head:
                for n, v in zip(head.pop(key), p[1:]):
                    if v.lstrip("-").isdigit(): c[key[:-1] + "." + n] = int(v)
            else:
                head[key] = p[1:]
    except OSError:
        pass
    return c
want = ["Tcp.RetransSegs", "TcpExt.TCPLossProbes", "TcpExt.TCPTimeouts", "TcpExt.TCPBacklogDrop",
        "TcpExt.TCPRcvQDrop", "TcpExt.PruneCalled", "TcpExt.RcvPruned", "TcpExt.TCPOFODrop",
        "TcpExt.TCPSpuriousRTOs", "TcpExt.DelayedACKs", "TcpExt.TCPDelivered" ]
rounds = sorted({f.split(".")[0] for f in os.listdir(d) if f[0].isdigit()})
table = {}  # (name, label) -> [us per round]
for n in names:
    for r in rounds:
        seen = {}
        for size, us in perf(os.path.join(d, f"{r}.{n}")):
            k = seen.get(size, 0); seen[size] = k + 1
            table.setdefault((n, label(size, k)), []).append(us)
labels = []
for n in names:
    for r in rounds:
        seen = {}
        for size, us in perf(os.path.join(d, f"{r}.{n}")):
            k = seen.get(size, 0); seen[size] = k + 1
            if label(size, k) not in labels: labels.append(label(size, k))
    if labels: break
print("\n# medians of the rounds (us), (x) = built-in default / config; [min-max]")
print("| size | " + " | ".join(names) + " |")
for l in labels:
    cells = []
    b = table.get(("builtin", l))
    bm = statistics.median(b) if b else None
    for n in names:
        v = table.get((n, l))
        if not v: cells.append("-"); continue
        m = statistics.median(v)
        rat = f" ({bm / m:.2f}x)" if bm and n != "builtin" else ""
        cells.append(f"{m:.1f}{rat} [{min(v):.0f}-{max(v):.0f}]/{len(v)}")
    print(f"| {l} | " + " | ".join(cells) + " |")
print("\n# per round: 8 B, 32 B (first use), 8 B, 32 B again; TCP counter deltas of the launch")
for r in rounds:
    for n in names:
        rows = perf(os.path.join(d, f"{r}.{n}"))
        if not rows: continue
        small = [f"{us:.1f}" for size, us in rows if size in (8, 32)]
        c0, c1 = counters(os.path.join(d, f"{r}.{n}.net0")), counters(os.path.join(d, f"{r}.{n}.net1"))
        delta = " ".join(f"{k.split('.')[1]}={c1[k] - c0[k]}" for k in want if k in c0 and k in c1)
        print(f"# round {r} {n}: small {' '.join(small)}; {delta}")
print("\n# trace lines (both ranks), every strand-ofi configuration and round")
for n in names[2:]:
    for r in rounds:
        for rank in (0, 1):
            try:
                lines = [l.rstrip() for l in open(os.path.join(d, f"{r}.{n}.log{rank}")) if "trace t=" in l]
            except OSError:
                continue
            first = [l for l in lines if " first " in l]
            other = [l for l in lines if " first " not in l]
            print(f"# [{n} r{r} rank{rank}] {len(other)} trace line(s), {len(first)} first-completion line(s)")
            for l in other[:14]:
                print(f"#   [{n} r{r} rank{rank}] " + re.sub(r"^.*NET/strand-ofi : ", "", l))
            slow_first = [l for l in first if int(re.search(r"took (\d+) ms", l).group(1)) >= 5]
            for l in slow_first[:4]:
                print(f"#   [{n} r{r} rank{rank}] " + re.sub(r"^.*NET/strand-ofi : ", "", l))
EOF
  if [ "$ngpu" -lt 4 ]; then
    E2E_SIZES=8,32 CUDA_VISIBLE_DEVICES=0,1 NRANKS=2 timeout 40 tests/e2e/run_e2e.sh profile \
      "NCCL_NET_PLUGIN=strand-ofi FI_PROVIDER=tcp;ofi_rxm STRAND_OFI_RAILS=1 STRAND_OFI_SPEED_MBPS=100000 STRAND_OFI_TUNER_CHANNELS=16K:0,1M:2:simple"
    echo "# rc $? after the profile, $(date -u +%FT%TZ)"
  else
    NRANKS=4 E2E_ROUNDS=2 E2E_BUDGET_S=50 E2E_SLOW_MS=0 E2E_TRACE_LINES=0 \
      E2E_SIZES=16,32,128K,512K,2M,4M,8M,16M,32M OUT=$work/n4 timeout 65 tests/e2e/run_e2e.sh ofi-tune \
      'b16m4|STRAND_OFI_TUNER_CHANNELS=16K:0,1M:2:simple,16M:4:simple' \
      'b16m2|STRAND_OFI_TUNER_CHANNELS=16K:0,1M:2:simple,16M:2:simple'
    echo "# rc $? after 4 ranks, $(date -u +%FT%TZ)"
  fi
} 2>&1 | tee "$work/ofi-gpu3.txt"
cp "$work/ofi-gpu3.txt" "$out/ofi-gpu3.txt"
tar czf "$out/ofi-gpu3.tgz" -C "$out" ofi-gpu3 && rm -rf "$work"
ls -l "$out"
