#!/usr/bin/env bash
# Issue 26 item 1, 2026-11-28: strand-socket against NCCL's built-in Socket at 8 B .. 1 MiB,
# 2 ranks, paired within rounds. sksmall4.sh and sksmall5.sh (5 rotated rounds each, two 2 x H200
# hosts) disagreed on the sign of a 1-3 us difference at 8-128 B (strand 0.88-0.92x the faster
# built-in in one call, 0.98-1.06x in the next) and on whether capping NCCL's channels helps, so
# here: 10 rounds, every configuration launched by the same `run_e2e.sh sweep` (the built-in with
# the plugin off), the order rotating every round, and the ratio taken per round (strand-socket
# against the faster built-in of the same round) before the median. Configurations:
#   strand-socket defaults | strand-socket STRAND_SOCKET_HANDOFF=1 (keep or remove the hand-off) |
#   built-in Socket default | built-in Socket tuned (4 threads x 4 sockets, 8 channels).
# < 3 min.
set -u
cd "$(dirname "$0")/../../.."
export NCCL_NVLS_ENABLE=0
D=build-e2e/sksmall6; rm -rf "$D"; mkdir -p "$D"
S=8,16,32,64,128,1K,8K,64K,1M
B='NCCL_NET_PLUGIN=none NCCL_NET=Socket'
echo "# $(nvidia-smi -L | wc -l) GPUs ($(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)), $(nproc) CPUs, $(date -u +%FT%TZ)"
CFGS=('' 'STRAND_SOCKET_HANDOFF=1' "$B" "$B NCCL_SOCKET_NTHREADS=4 NCCL_NSOCKS_PERTHREAD=4 NCCL_MIN_NCHANNELS=8")
k=${#CFGS[@]}
for r in $(seq 1 10); do
  rot=(); for ((i = 0; i < k; i++)); do rot+=("${CFGS[$(((i + r) % k))]}"); done
  CUDA_VISIBLE_DEVICES=0,1 NRANKS=2 E2E_SIZES=$S timeout 100 tests/e2e/run_e2e.sh sweep "${rot[@]}" > "$D/n2-r$r.txt" 2>&1
  echo "# round $r done at ${SECONDS}s"
  if (( SECONDS > 150 )); then echo "# stopping after round $r"; break; fi
done
# (The call ran this table from an inline copy of what is now paired_table.py: same numbers.)
python3 tests/e2e/runs/paired_table.py "$D"
tar czf "$OUT/sksmall6.tgz" -C build-e2e sksmall6
echo "# total ${SECONDS}s"
