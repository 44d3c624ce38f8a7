#!/usr/bin/env bash
# Second GPU-RUN of helper ofi8, session 8 (issue 26 item 2). Numbers: docs/benchmarks/ofi.md.
# One command from the repository root, < 2 min on 4 GPUs (needs .e2e-carry for libfabric):
#   tests/e2e/runs/ofi4.sh
# Round 1 (ofi3.sh): NCCL picks Ring for strand-ofi's small all-reduces (8 B-1 KiB 0.80-1.08x the
# built-in Socket) and NCCL_ALGO=Tree gave 1.01-1.35x there (8 KiB 0.42x); at 4 ranks Simple on 2
# channels up to 16 MiB took 2-16 MiB from 0.58-0.73x to 0.85-0.98x. Here:
# 1. 2 ranks (GPUs 0,1), 3 rounds, 8 B .. 256 KiB: built-in, strand-ofi's default (now with
#    FI_OFI_RXM_MSG_RX_SIZE=64: the first-use stall's fix), the tuner running all-reduces on Tree
#    up to 1 KiB (t1k, STRAND_OFI_TUNER_TREE_BYTES), the default with libfabric's 128 receive
#    buffers (rx128, strand-ofi before the fix), and one rail (the stall's reproducer) with 64 and
#    128 (r1, r1rx128); trace at 2 ms, every round's logs kept, slow fi_cq_read calls counted.
# 2. (>= 4 GPUs) 4 ranks, 2 rounds, 16 B .. 64 MiB: built-in, default, Tree up to 1 KiB with Simple
#    on 2 channels up to 16 MiB (t1k16m2).
# Everything lands in $OUT/ofi-gpu4.tgz (+ the printed log $OUT/ofi-gpu4.txt).
set -u
root=$(cd "$(dirname "$0")/../../.." && pwd)
cd "$root"
out=${OUT:-$root/build-e2e/ofi-gpu-out}
work=$out/ofi-gpu4
mkdir -p "$work/n2" "$work/n4"
{
  echo "# $(date -u +%FT%TZ) tests/e2e/runs/ofi4.sh at $(git -C "$root" rev-parse --short HEAD 2>/dev/null)"
  nvidia-smi -L 2>/dev/null; nproc
  CUDA_VISIBLE_DEVICES=0,1 NRANKS=2 E2E_ROUNDS=3 E2E_BUDGET_S=48 E2E_SLOW_MS=2 E2E_TRACE_LINES=0 \
    E2E_KEEP_LOGS=1 E2E_SIZES=8,32,128,1K,4K,8K,64K,128K,256K OUT=$work/n2 timeout 70 \
    tests/e2e/run_e2e.sh ofi-tune \
    't1k|STRAND_OFI_TUNER_TREE_BYTES=1024' \
    'rx128|FI_OFI_RXM_MSG_RX_SIZE=128' \
    'r1|STRAND_OFI_RAILS=1 STRAND_OFI_SPEED_MBPS=100000 STRAND_OFI_TUNER_CHANNELS=16K:0,1M:2:simple' \
    'r1rx128|STRAND_OFI_RAILS=1 STRAND_OFI_SPEED_MBPS=100000 STRAND_OFI_TUNER_CHANNELS=16K:0,1M:2:simple FI_OFI_RXM_MSG_RX_SIZE=128'
  echo "# rc $? after 2 ranks, $(date -u +%FT%TZ)"
  # the stall's signature per launch: single fi_cq_read calls of >= 2 ms (both ranks), and 8 B
  for f in "$work"/n2/ofi-tune/[0-9].*.log0; do
    b=${f%.log0}
    echo "# $(basename "$b"): $(cat "$b".log0 "$b".log1 2>/dev/null | grep -c 'fi_cq_read on') slow fi_cq_read; 8 B $(awk '$1 == 8 {print $3; exit}' "$b")"
  done
  if [ "$(nvidia-smi -L 2>/dev/null | wc -l)" -ge 4 ]; then
    NRANKS=4 E2E_ROUNDS=2 E2E_BUDGET_S=30 E2E_SLOW_MS=0 E2E_TRACE_LINES=0 \
      E2E_SIZES=16,32,1K,128K,2M,16M,32M,64M OUT=$work/n4 timeout 45 tests/e2e/run_e2e.sh ofi-tune \
      't1k16m2|STRAND_OFI_TUNER_TREE_BYTES=1024 STRAND_OFI_TUNER_CHANNELS=16K:0,1M:2:simple,16M:2:simple'
    echo "# rc $? after 4 ranks, $(date -u +%FT%TZ)"
  else
    echo "# fewer than 4 GPUs: no 4-rank run"
  fi
} 2>&1 | tee "$work/ofi-gpu4.txt"
cp "$work/ofi-gpu4.txt" "$out/ofi-gpu4.txt"
tar czf "$out/ofi-gpu4.tgz" -C "$out" ofi-gpu4 && rm -rf "$work"
ls -l "$out"
