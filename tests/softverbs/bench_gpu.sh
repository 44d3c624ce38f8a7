#!/usr/bin/env bash
# softverbs on a GPU machine, in one command (not CI): its own raw RDMA-write ceiling, then NCCL's
# built-in IB against strand-ib over that same softverbs in real NCCL, and a markdown table for
# docs/benchmarks/ib.md.
#   1. sv_bench (carried): RC RDMA-write bandwidth 64 KiB .. 64 MiB between two processes, host
#      memory and GPU memory, one direction and both directions at once (each rank of a 2-rank
#      all-reduce sends and receives at once, so the per-direction "both" figure is the ceiling
#      to hold all-reduce busbw against), one QP and 4 QPs;
#   2. all-reduce float sum at E2E_SIZES (default every factor of 4, 8 B .. 1 GiB, with 1 MiB),
#      2 ranks on 2 GPUs with distinct NCCL_HOSTID, through tests/e2e/run_e2e.sh sweep: NCCL's IB
#      transport (`NCCL_NET=IB`, each rank under sv-sysfs) and strand-ib, host memory
#      (NCCL_NET_GDR_LEVEL=LOC) and GPUDirect (SYS + NCCL_NET_FORCE_FLUSH=1), the four alternating
#      in each round, ROUNDS rounds (default 3); the table holds the median of the rounds.
# Every run's log says which transport NCCL used ("via NET/..."); a configuration that did not
# run where it should (say, NCCL fell back to another transport) fails the script.
#
#   tests/e2e/carry_softverbs.sh build          (where softverbs builds; carry .e2e-carry-softverbs)
#   sudo tests/softverbs/bench_gpu.sh [ROUNDS]  (on the GPU machine)
#
# NRANKS (default 2): ranks of the all-reduce, one per GPU (needs that many GPUs); BENCH_RAW=0 leaves
# out part 1 (its ceiling is between two processes; the tables then say "–" for it).
# Needs root (sv-sysfs), two GPUs, .e2e-carry-softverbs (or E2E_SOFTVERBS_DIR) with sv_bench.
# BENCH_BUDGET_S (default 240): no new round starts once this many seconds have passed since the
# start (the table then says how many rounds it holds). Results and logs go to $OUT when set,
# else build-e2e/bench-ib. Exit 0 = every configuration ran and was carried as intended;
# 1 = a failure (printed); 2 = missing pieces.
set -uo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
rounds=${1:-3}
sv_dir=$(cd "${E2E_SOFTVERBS_DIR:-$root/.e2e-carry-softverbs}" 2>/dev/null && pwd) || {
  echo "bench_gpu: no ${E2E_SOFTVERBS_DIR:-$root/.e2e-carry-softverbs} (tests/e2e/carry_softverbs.sh, then carry it)" >&2
  exit 2
}
for f in libibverbs.so.1 libnccl-net-strand-ib.so sv_bench; do
  [[ -e $sv_dir/$f ]] || { echo "bench_gpu: $sv_dir/$f missing (tests/e2e/carry_softverbs.sh copies it)" >&2; exit 2; }
done
[[ $(id -u) == 0 ]] || { echo "bench_gpu: must run as root (sv-sysfs)" >&2; exit 2; }
ngpu=$(nvidia-smi -L 2>/dev/null | wc -l)
nranks=${NRANKS:-2}
((ngpu >= nranks && nranks >= 2)) || { echo "bench_gpu: needs $nranks GPUs (NRANKS >= 2), found $ngpu" >&2; exit 2; }
out=${OUT:-$root/build-e2e/bench-ib}
mkdir -p "$out"
start=$SECONDS
budget=${BENCH_BUDGET_S:-240}
rc=0
echo "# $(date -u +%FT%TZ) $(hostname): $(nproc) cores, $(nvidia-smi -L | head -2 | sed 's/ (UUID.*//' | paste -sd ';'), load $(cut -d' ' -f1-3 /proc/loadavg)"

# ---- 1. softverbs' own ceiling
echo "## 1. softverbs raw RDMA WRITE (sv_bench, depth 8 per QP; GB/s per direction)"
raw=(host-1qp "" host-1qp-bidir "--bidir" host-4qp "--qps 4" host-4qp-bidir "--qps 4 --bidir"
     gpu-1qp "--gpu" gpu-1qp-bidir "--gpu --bidir")
((${BENCH_RAW:-1})) || raw=()
for ((i = 0; i < ${#raw[@]}; i += 2)); do
  # shellcheck disable=SC2086  # the options are a list
  if ! SOFTVERBS_NDEVS=1 LD_LIBRARY_PATH=$sv_dir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} timeout 40 \
      "$sv_dir/sv_bench" --min 64K --max 64M --lat-iters 1000 --csv ${raw[i + 1]} \
      >"$out/raw.${raw[i]}.csv" 2>"$out/raw.${raw[i]}.err"; then
    echo "FAIL: sv_bench ${raw[i + 1]}: $(tail -3 "$out/raw.${raw[i]}.err")"
    rc=1
  fi
done
echo "# sv_bench took $((SECONDS - start)) s"

# ---- 2. the head-to-head sweep
sizes=${E2E_SIZES:-8,32,128,512,2K,8K,32K,128K,512K,1M,4M,16M,64M,256M,1G}
B="NCCL_NET=IB NCCL_NET_PLUGIN=none NCCL_IB_HCA=sv0 NCCL_GIN_TYPE=2 SOFTVERBS_NDEVS=1 LD_LIBRARY_PATH=$sv_dir"
S="NCCL_NET_PLUGIN=strand-ib NCCL_IB_HCA=sv SOFTVERBS_NDEVS=1 LD_LIBRARY_PATH=$sv_dir"
HOST="NCCL_NET_GDR_LEVEL=LOC" GDR="NCCL_NET_GDR_LEVEL=SYS NCCL_NET_FORCE_FLUSH=1"
LOG="NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET"
cfgs=(builtin-host "$B $HOST" strand-host "$S $HOST" builtin-gdr "$B $GDR" strand-gdr "$S $GDR")
# what NCCL must say for each (the transport, and GPUDirect or not)
# (every NET channel of the run must match; NCCL may print the device as 0 or 0(1))
want=(builtin-host '^via NET/IB/[0-9()]+$' strand-host '^via NET/strand-ib/[0-9()]+$'
      builtin-gdr '^via NET/IB/[0-9()]+/GDRDMA$' strand-gdr '^via NET/strand-ib/[0-9()]+/GDRDMA$')
export E2E_RANK_WRAP="$root/tests/softverbs/sv-sysfs --ndevs 1 --" NRANKS=$nranks E2E_SIZES=$sizes
build=${E2E_BUILD:-$root/build-e2e}
echo "## 2. all-reduce over softverbs, $nranks ranks, sizes $sizes, up to $rounds rounds (budget ${budget} s)"
done_rounds=0
for ((r = 1; r <= rounds; r++)); do
  if ((r > 1 && SECONDS - start > budget)); then
    echo "# budget spent after $done_rounds rounds ($((SECONDS - start)) s): no round $r"
    break
  fi
  for ((i = 0; i < ${#cfgs[@]}; i += 2)); do
    name=${cfgs[i]} t0=$SECONDS
    timeout 200 "$root/tests/e2e/run_e2e.sh" sweep "${cfgs[i + 1]} $LOG" >"$out/sweep.$name.r$r.txt" 2>&1 ||
      { echo "FAIL: $name round $r (tail of $out/sweep.$name.r$r.txt:)"; tail -5 "$out/sweep.$name.r$r.txt"; rc=1; }
    cp "$build/log.sweep.rank0" "$out/log.$name.r$r.rank0" 2>/dev/null
    vias=$(grep -oE 'via NET/[A-Za-z0-9_/()-]+' "$out/log.$name.r$r.rank0" 2>/dev/null)
    echo "# round $r $name: $((SECONDS - t0)) s; channels: $(sort <<<"$vias" | uniq -c | paste -sd ' ')"
    pat=${want[i + 1]}
    if [[ -z $vias ]] || grep -vqE "$pat" <<<"$vias"; then
      echo "FAIL: $name round $r: not every NET channel in NCCL's log matches '$pat'"
      rc=1
    fi
  done
  done_rounds=$r
done
echo "# total $((SECONDS - start)) s"

# ---- 3. the tables
python3 - "$out" "$done_rounds" "$root/tests/e2e" "$nranks" <<'PY' | tee "$out/table.md"
# Medians over rounds, sizes and ratios: tests/e2e/rounds_table.py (shared with run_e2e.sh ofi-tune).
import csv, os, sys
out, rounds = sys.argv[1], int(sys.argv[2])
sys.path.insert(0, sys.argv[3])
from rounds_table import MIB, human, load, ratio, widest_spread
def raw(name):
    rows = {}
    try:
        for row in csv.reader(open(os.path.join(out, "raw.%s.csv" % name))):
            if row and row[0].startswith("write_bw"):
                rows[int(row[1])] = float(row[5])
    except OSError:
        pass
    return rows
names = ["host-1qp", "host-1qp-bidir", "host-4qp", "host-4qp-bidir", "gpu-1qp", "gpu-1qp-bidir"]
raws = {n: raw(n) for n in names}
def num(v, f="%.2f"):
    return "–" if v is None else f % v
print("softverbs raw RDMA WRITE, GB/s per direction (sv_bench, depth 8 per QP; "
      "\"both\" = both processes writing at once):\n")
print("| size | host, 1 QP | host, 1 QP, both | host, 4 QPs | host, 4 QPs, both | GPU, 1 QP | GPU, 1 QP, both |")
print("|---:|---:|---:|---:|---:|---:|---:|")
for s in sorted(set().union(*[set(r) for r in raws.values()])):
    print("| %s | %s |" % (human(s), " | ".join(num(raws[n].get(s)) for n in names)))
ceil_host = max(list(raws["host-1qp-bidir"].values()) + list(raws["host-4qp-bidir"].values()) or [0])
ceil_gpu = max(raws["gpu-1qp-bidir"].values() or [0])
print("\nCeiling for a 2-rank all-reduce (best per-direction figure with both directions busy): "
      "host %.2f GB/s, GPU %.2f GB/s\n" % (ceil_host, ceil_gpu))
cfgs = ["builtin-host", "strand-host", "builtin-gdr", "strand-gdr"]
data = load({c: [os.path.join(out, "sweep.%s.r%d.txt" % (c, r)) for r in range(1, rounds + 1)]
             for c in cfgs})
print("All-reduce float sum, %s ranks, median of %d rounds (time in µs below 1 MiB, busbw GB/s from "
      "1 MiB; ratio = strand-ib's speed over the built-in's; \"of raw\" = strand-ib busbw over "
      "softverbs' ceiling above):\n" % (sys.argv[4], rounds))
print("| size | built-in IB, host | **strand-ib, host** | ratio | of raw | built-in IB, GDR | "
      "**strand-ib, GDR** | ratio | of raw |")
print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
for s in data.sizes:
    cells = []
    for mem, ceil in (("host", ceil_host), ("gdr", ceil_gpu)):
        vb, vs = data.headline("builtin-" + mem, s), data.headline("strand-" + mem, s)
        if s < MIB:
            cells += [num(vb, "%.1f"), "**%s**" % num(vs, "%.1f"), ratio(vb, vs), ""]
        else:
            cells += [num(vb), "**%s**" % num(vs), ratio(vs, vb),
                      "–" if vs is None or not ceil else "%.0f %%" % (100 * vs / ceil)]
    print("| %s | %s |" % (human(s), " | ".join(cells)))
w = widest_spread(data, cfgs)
if w:
    print("\nWidest spread between rounds: %.2f× (%s at %s)" % (w[0], w[1], human(w[2])))
PY
((rc == 0)) && echo "PASS: bench_gpu: every configuration ran over the transport intended ($done_rounds rounds)"
echo "# results and logs in $out"
exit $rc
