#!/usr/bin/env bash
# GPU-RUN of helper ofi, session 7 (issue 26 item 2: strand-ofi >= the built-in Socket default at
# every all-reduce size, 2 and 4 ranks). The numbers are in docs/benchmarks/ofi.md.
# One command from the repository root, < 3 min on 4 x H200 (needs .e2e-carry for libfabric):
#   tests/e2e/runs/ofi.sh
# 2 ranks (GPUs 0,1), 2 rounds, against the built-in Socket default and strand-ofi's default
# (4 rails, 8 channels, bands 16K:0,1M:2, eager 512 KiB, now with fi_tinject for small sends):
#   noinj   the default without fi_tinject (strand-ofi before this branch)
#   blk2    the default with channels 0-1 on rail 0, 2-3 on rail 1, ... (mid sizes on one rail)
#   r1      one rail, same speed and bands (is it the rails that cost 128-256 KiB?)
#   simple  the default with Simple forced up to 1 MiB (the 100 Gb/s speed keeps NCCL on LL there)
#   ch1     the default with one channel up to 1 MiB
# then 4 ranks (GPUs 0-3), 2 rounds: built-in, default, blk2, r1.
# Everything lands in $OUT/ofi-gpu.tgz (+ the printed log $OUT/ofi-gpu.txt).
set -u
root=$(cd "$(dirname "$0")/../../.." && pwd)
cd "$root"
out=${OUT:-$root/build-e2e/ofi-gpu-out}
work=$out/ofi-gpu
mkdir -p "$work/n2" "$work/n4"
sizes=8,32,128K,256K,512K,1M,16M,1G
{
  echo "# $(date -u +%FT%TZ) tests/e2e/runs/ofi.sh at $(git -C "$root" rev-parse --short HEAD 2>/dev/null)"
  nvidia-smi -L 2>/dev/null; nproc
  CUDA_VISIBLE_DEVICES=0,1 NRANKS=2 E2E_ROUNDS=2 E2E_BUDGET_S=75 E2E_SLOW_MS=0 E2E_TRACE_LINES=0 \
    E2E_SIZES=$sizes OUT=$work/n2 timeout 120 tests/e2e/run_e2e.sh ofi-tune \
    'noinj|STRAND_OFI_INJECT=0' \
    'blk2|STRAND_OFI_RAIL_BLOCK=2' \
    'r1|STRAND_OFI_RAILS=1 STRAND_OFI_SPEED_MBPS=100000 STRAND_OFI_TUNER_CHANNELS=16K:0,1M:2' \
    'simple|STRAND_OFI_TUNER_CHANNELS=16K:0,1M:2:simple' \
    'ch1|STRAND_OFI_TUNER_CHANNELS=16K:0,1M:1'
  echo "# rc $? after 2 ranks, $(date -u +%FT%TZ)"
  NRANKS=4 E2E_ROUNDS=2 E2E_BUDGET_S=35 E2E_SLOW_MS=0 E2E_TRACE_LINES=0 \
    E2E_SIZES=$sizes OUT=$work/n4 timeout 55 tests/e2e/run_e2e.sh ofi-tune \
    'blk2|STRAND_OFI_RAIL_BLOCK=2' \
    'r1|STRAND_OFI_RAILS=1 STRAND_OFI_SPEED_MBPS=100000 STRAND_OFI_TUNER_CHANNELS=16K:0,1M:2'
  echo "# rc $? after 4 ranks, $(date -u +%FT%TZ)"
} 2>&1 | tee "$work/ofi-gpu.txt"
cp "$work/ofi-gpu.txt" "$out/ofi-gpu.txt"
tar czf "$out/ofi-gpu.tgz" -C "$out" ofi-gpu && rm -rf "$work"
ls -l "$out"
