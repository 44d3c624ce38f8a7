#!/usr/bin/env bash
# Issue 26 item 3, 2026-11-28 (session 11), after collnet13.sh (4 x H200, 4 paired rounds: two comm
# sets per peer pair, STRAND_COLLNET_STREAMS=2, 1.05-1.11x the auto layout of one from 4 ranks at
# 16 MiB-1 GiB, the progress thread no gain): how many streams at 4 ranks, paired: auto (1), 2, 3, 4,
# and the ring through strand-socket. Writes $OUT/collnet14.txt and $OUT/collnet14.tgz. Needs 4 GPUs.
set -u
cd "$(dirname "$0")/../../.." || exit 1
OUT=${OUT:-/tmp}
. tests/e2e/runs/paired.sh
export NCCL_NVLS_ENABLE=0
[ "$(gpu_count)" -ge 4 ] || { echo "# fewer than 4 GPUs: nothing to do"; exit 0; }
D=build-e2e/collnet14; rm -rf "$D"; mkdir -p "$D"
CFGS=("E2E_NAME=ring NCCL_ALGO=allreduce:Ring" "E2E_NAME=s1 @CN@" "E2E_NAME=s2 @CN@ STRAND_COLLNET_STREAMS=2"
  "E2E_NAME=s3 @CN@ STRAND_COLLNET_STREAMS=3" "E2E_NAME=s4 @CN@ STRAND_COLLNET_STREAMS=4")
{
  paired_banner
  PAIRED_LAUNCHER="tests/e2e/collnet_e2e.sh variants" E2E_SIZES=${CN14_SIZES:-16M,128M,1G} E2E_BUDGET_S=150 \
    paired_rounds "$D/n4" 4 30 "${CN14_BUDGET_S:-180}" "${CFGS[@]}"
  PAIRED_REFS=ring python3 tests/e2e/runs/paired_table.py "$D/n4"
  PAIRED_REFS=s1 python3 tests/e2e/runs/paired_table.py "$D/n4"
} 2>&1 | grep -v 'NCCL INFO' | tee "$OUT/collnet14.txt"
tar czf "$OUT/collnet14.tgz" -C build-e2e collnet14
