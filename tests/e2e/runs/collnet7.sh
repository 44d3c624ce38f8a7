#!/usr/bin/env bash
# Issue 26 item 3, 2026-11-28 (session 9): is CollNet bound by NCCL's window (one iallreduce per
# step for all channels, at most NCCL_STEPS = 8 in flight: ~7 calls of ~1.76 MiB measured) rather
# than by the network? collnet6.sh measured a call at ~1.2 ms, two thirds of it in exchanges that
# move ~0.9 MB in ~400 us while strand-socket moves 37-44 GB/s with 8 x 900 KiB in flight on one
# comm on the same host. Doubling NCCL's channels (16) doubles the bytes of each call, so the
# window: if the exchanges are latency-bound, CollNet's rate rises. Paired rounds (one
# `collnet_e2e.sh variants` per round, rotating order) at 2 ranks: ring and CollNet, each with
# NCCL's channel count and with 16, and CollNet with 32 slots. Ratios to the ring's default.
set -u
cd "$(dirname "$0")/../../.." || exit 1
OUT=${OUT:-/tmp}
D=build-e2e/collnet7; rm -rf "$D"; mkdir -p "$D"
C16='NCCL_MIN_NCHANNELS=16 NCCL_MAX_NCHANNELS=16'
CFGS=("E2E_NAME=ring NCCL_ALGO=allreduce:Ring" "E2E_NAME=ring16 NCCL_ALGO=allreduce:Ring $C16"
      "E2E_NAME=cn @CN@" "E2E_NAME=cn16 @CN@ $C16" "E2E_NAME=cn16s32 @CN@ $C16 STRAND_COLLNET_SLOTS=32")
REFS=(--ref ring)
. tests/e2e/runs/paired.sh
{
  echo "# $(date -u +%FT%TZ): $(gpu_count) GPUs, $(nproc) CPUs"
  PAIRED_LAUNCHER="tests/e2e/collnet_e2e.sh variants" E2E_SIZES=16M,128M,1G E2E_BUDGET_S=150 \
    paired_rounds "$D/n2" 2 30 "${CN7_BUDGET_S:-200}" "${CFGS[@]}"
  python3 tests/e2e/runs/paired_table.py "$D/n2" "${REFS[@]}" --closing | grep -v "closing: [0-9]* collectives"
  grep -h "coll channels\|collnet channels" build-e2e/log.sweep.rank0 | head -2
} 2>&1 | grep -v 'NCCL INFO' | tee "$OUT/collnet7.txt"
tar czf "$OUT/collnet7.tgz" -C build-e2e collnet7
