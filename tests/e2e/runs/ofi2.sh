#!/usr/bin/env bash
# Second GPU-RUN of helper ofi, session 7 (issue 26 item 2).
# One command from the repository root, < 3 min (needs .e2e-carry for libfabric):
#   tests/e2e/runs/ofi2.sh
# strand-ofi's default is now bands 16K:0,1M:2:simple (round 1: Simple on 2 channels brought
# 128-256 KiB to 1.03-1.13x) and no fi_tinject (neutral in round 1). 2 ranks (GPUs 0,1), 2 rounds:
#   b1m1s   Simple on 2 channels to 256 KiB, Simple on 1 channel to 1 MiB (round 1: one channel
#           was 1.13-1.15x at 512 KiB-1 MiB, one round)
#   b1m1    the same with NCCL's protocol on 1 channel at 512 KiB-1 MiB
#   blk2    the default with channels 0-1 on rail 0, 2-3 on rail 1, ... (round 1: 1 GiB 1.47x)
#   inj     the default with fi_tinject for sends up to 64 B (round 1: neutral at 8-32 B)
# then, when the machine has 4 GPUs, 4 ranks, 2 rounds at 8 B .. 1 GiB with 2 and 16 MiB:
# built-in, default, blk2.
# Everything lands in $OUT/ofi-gpu2.tgz (+ the printed log $OUT/ofi-gpu2.txt).
set -u
root=$(cd "$(dirname "$0")/../../.." && pwd)
cd "$root"
out=${OUT:-$root/build-e2e/ofi-gpu-out}
work=$out/ofi-gpu2
mkdir -p "$work/n2" "$work/n4"
{
  echo "# $(date -u +%FT%TZ) tests/e2e/runs/ofi2.sh at $(git -C "$root" rev-parse --short HEAD 2>/dev/null)"
  nvidia-smi -L 2>/dev/null; nproc
  CUDA_VISIBLE_DEVICES=0,1 NRANKS=2 E2E_ROUNDS=2 E2E_BUDGET_S=68 E2E_SLOW_MS=0 E2E_TRACE_LINES=0 \
    E2E_SIZES=8,32,128K,256K,512K,1M,16M,1G OUT=$work/n2 timeout 110 tests/e2e/run_e2e.sh ofi-tune \
    'b1m1s|STRAND_OFI_TUNER_CHANNELS=16K:0,256K:2:simple,1M:1:simple' \
    'b1m1|STRAND_OFI_TUNER_CHANNELS=16K:0,256K:2:simple,1M:1' \
    'blk2|STRAND_OFI_RAIL_BLOCK=2' \
    'inj|STRAND_OFI_INJECT=1'
  echo "# rc $? after 2 ranks, $(date -u +%FT%TZ)"
  if [ "$(nvidia-smi -L 2>/dev/null | wc -l)" -ge 4 ]; then
    NRANKS=4 E2E_ROUNDS=2 E2E_BUDGET_S=38 E2E_SLOW_MS=0 E2E_TRACE_LINES=0 \
      E2E_SIZES=8,32,128K,512K,2M,16M,128M,1G OUT=$work/n4 timeout 60 tests/e2e/run_e2e.sh ofi-tune \
      'blk2|STRAND_OFI_RAIL_BLOCK=2'
    echo "# rc $? after 4 ranks, $(date -u +%FT%TZ)"
  else
    echo "# fewer than 4 GPUs: no 4-rank run"
  fi
} 2>&1 | tee "$work/ofi-gpu2.txt"
cp "$work/ofi-gpu2.txt" "$out/ofi-gpu2.txt"
tar czf "$out/ofi-gpu2.tgz" -C "$out" ofi-gpu2 && rm -rf "$work"
ls -l "$out"
