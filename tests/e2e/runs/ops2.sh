#!/usr/bin/env bash
# Issue 26 item 1, 2026-11-28: all-gather and send/recv at 8 KiB, 1 MiB and 128 MiB, 2 ranks,
# paired within rounds as in sksmall6.sh (strand-socket defaults, the built-in Socket default and
# tuned, all in one `run_e2e.sh sweep` whose order rotates; per-round ratios). The earlier table
# (socket.md "Four GPUs, and two again") had send/recv 1 MiB at 0.84x in one round and 0.95x as a
# median of three, with the built-in launched separately. Up to 6 rounds, < 2.5 min.
set -u
cd "$(dirname "$0")/../../.."
export NCCL_NVLS_ENABLE=0
D=build-e2e/ops2; rm -rf "$D"; mkdir -p "$D"
B='NCCL_NET_PLUGIN=none NCCL_NET=Socket'
echo "# $(nvidia-smi -L | wc -l) GPUs ($(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)), $(nproc) CPUs, $(date -u +%FT%TZ)"
CFGS=('' "$B" "$B NCCL_SOCKET_NTHREADS=4 NCCL_NSOCKS_PERTHREAD=4 NCCL_MIN_NCHANNELS=8")
k=${#CFGS[@]}
for r in 1 2 3 4 5 6; do
  rot=(); for ((i = 0; i < k; i++)); do rot+=("${CFGS[$(((i + r) % k))]}"); done
  for op in allgather sendrecv; do
    mkdir -p "$D/$op"
    CUDA_VISIBLE_DEVICES=0,1 NRANKS=2 E2E_OP=$op E2E_SIZES=8K,1M,128M timeout 60 tests/e2e/run_e2e.sh sweep "${rot[@]}" > "$D/$op/$op-r$r.txt" 2>&1
  done
  echo "# round $r done at ${SECONDS}s"
  if (( SECONDS > 120 )); then echo "# stopping after round $r"; break; fi
done
for op in allgather sendrecv; do echo "## $op"; python3 tests/e2e/runs/paired_table.py "$D/$op"; done
tar czf "$OUT/ops2.tgz" -C build-e2e ops2
echo "# total ${SECONDS}s"
