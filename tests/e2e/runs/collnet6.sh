#!/usr/bin/env bash
# Issue 26, session 9 (2026-11-28): where a CollNet call's time goes, paired against the ring.
# collnet5.sh left CollNet at 0.5-0.7x the ring at >= 16 MiB on 2 H200s with a host swinging 2x
# between runs; a call (~1.76 MiB, one chunk) takes ~0.95 ms of which its two exchanges ~0.6 ms.
# This tree's collnet_stub prints a second closing line, `closing: call gaps:` (docs/plugins/
# collnet.md), splitting a call from issue to done and timing NCCL's test() polling.
#   1. PAIRED rounds: each round is one `collnet_e2e.sh variants` launcher running every
#      configuration in a rotated order: the ring through strand-socket | CollNet, this tree's
#      defaults | CollNet with STRAND_COLLNET_STREAMS=1; all-reduce 16M,128M,1G; 2 ranks (GPUs
#      0,1), then 4 ranks (GPUs 0-3) where 4 GPUs are; rounds until CN6_BUDGET_S per rank count
#      (default 200, or 170 each when both rank counts run). Table per rank count
#      (paired_table.py): median us, and CollNet / ring busbw per round (= ring us / CollNet us),
#      median (min-max); then rank 0's closing lines (the gaps) per configuration and round.
#   2. Host only, no GPU: `strand-conform perf` between two local processes, 8 messages of 900 KiB
#      in flight on ONE strand-socket comm (perf has no option for several comms: the 2- and
#      8-comm cases are not expressible with it), against raw TCP with 1, 2 and 8 connections
#      (--ref-streams); a depth sweep 1..32 at 900 KiB; and the stub itself over strand-socket
#      without NCCL (`strand-conform sim`, 16 MiB all-reduces, 2 ranks), its closing lines.
# CN6_RANKS=4: the 4-rank rounds only (a second call on a 4-GPU host). About 4-7 minutes.
# Output: $OUT/collnet6.txt (the summary) and $OUT/collnet6.tgz (every round's raw output).
set -u
cd "$(dirname "$0")/../../.." || exit 1
OUT=${OUT:-/tmp}
D=build-e2e/collnet6; rm -rf "$D"; mkdir -p "$D"
NG=$(nvidia-smi -L 2>/dev/null | wc -l)
RANKS=2; [ "$NG" -ge 4 ] && RANKS="2 4"
RANKS=${CN6_RANKS:-$RANKS}
NRC=$(wc -w <<<"$RANKS")
BUDGET=${CN6_BUDGET_S:-$((NRC > 1 ? 170 : 200))}
CFGS=("E2E_NAME=ring NCCL_ALGO=allreduce:Ring" "E2E_NAME=collnet @CN@"
      "E2E_NAME=collnet-1stream @CN@ STRAND_COLLNET_STREAMS=1")
. tests/e2e/runs/paired.sh
{
  echo "# $(date -u +%FT%TZ) $(hostname): $NG GPUs ($(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1)), $(nproc) CPUs; ranks: $RANKS; ${BUDGET} s per rank count"
  echo "# tree: $(git rev-parse --short HEAD 2>/dev/null || echo '?')"
  for n in $RANKS; do
    # the rounds: tests/e2e/runs/paired.sh (the same rotation this script ran with its own loop)
    PAIRED_LAUNCHER="tests/e2e/collnet_e2e.sh variants" E2E_SIZES=16M,128M,1G E2E_BUDGET_S=150 \
      paired_rounds "$D/n$n" "$n" 40 "$BUDGET" "${CFGS[@]}"
    python3 tests/e2e/runs/paired_table.py "$D/n$n" --ref ring --closing
  done
  b=build-e2e
  so=$b/net_socket/libnccl-net-strand-socket.so
  sc=$b/tests/conform/strand-conform
  if [ -x "$sc" ] && [ -f "$so" ]; then
    echo "# host only: strand-conform perf, 8 x 900 KiB in flight on one strand-socket comm vs raw TCP"
    for s in 1 2 8; do
      timeout 60 "$sc" perf --min-bytes 900K --max-bytes 900K --depth 8 --time 0.5 --no-latency \
        --no-bidir --ref tcp --ref-streams "$s" "$so" 2>&1 | grep -E 'reference:|^ +[0-9]|peak|FAIL'
    done
    echo "# host only: depth sweep at 900 KiB, one comm"
    timeout 90 "$sc" perf --min-bytes 900K --max-bytes 900K --depth-sweep --sweep-bytes 900K --time 0.2 \
      --no-latency --no-bidir "$so" 2>&1 | grep -vE '^(strand-conform|      ABI|PASS|[0-9]+ passed)' | head -40
    echo "# host only: the stub over strand-socket without NCCL (sim.collnet-allreduce, 16 MiB, 2 ranks)"
    NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET timeout 90 "$sc" sim -v --only sim.collnet-allreduce \
      --bytes 16M --iters 10 --nranks 2 "$so" 2>&1 | grep -E 'closing:|PASS|FAIL' | sed 's/.*collnet_stub: /# sim: /'
  else
    echo "# no $sc or $so: host-only part skipped"
  fi
  echo "# total ${SECONDS} s"
} 2>&1 | grep -v 'NCCL INFO' | tee "$OUT/collnet6.txt"
tar czf "$OUT/collnet6.tgz" -C build-e2e collnet6
