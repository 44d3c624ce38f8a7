#!/usr/bin/env bash
# Issue 26 item 3, 2026-11-28 (session 11): CollNet (collnet_stub over strand-socket, its defaults:
# progress on NCCL's proxy thread) against the ring through strand-socket, paired rounds, on 4
# GPUs (one rank each) where the host has them, else on 2: the 4-GPU CollNet table the issue asks
# for, first measured since the stub's lanes x streams and helpers (sessions 9-10). Sizes from 32 KiB
# (CollNet's latency) to 1 GiB. Writes $OUT/collnet12.txt (+ a partial table after every round) and
# $OUT/collnet12.tgz.
set -u
cd "$(dirname "$0")/../../.." || exit 1
OUT=${OUT:-/tmp}
. tests/e2e/runs/paired.sh
export NCCL_NVLS_ENABLE=0
n=$(gpu_count); ((n >= 4)) && n=4 || n=2
D=build-e2e/collnet12; rm -rf "$D"; mkdir -p "$D"
CFGS=("E2E_NAME=ring NCCL_ALGO=allreduce:Ring" "E2E_NAME=collnet @CN@")
{
  paired_banner
  PAIRED_EACH_ROUND='PAIRED_REFS=ring python3 tests/e2e/runs/paired_table.py "$D/n$n" >"$OUT/collnet12-partial.txt" 2>&1' \
    PAIRED_LAUNCHER="tests/e2e/collnet_e2e.sh variants" E2E_SIZES=${CN12_SIZES:-32K,2M,16M,128M,1G} E2E_BUDGET_S=150 \
    paired_rounds "$D/n$n" "$n" 30 "${CN12_BUDGET_S:-200}" "${CFGS[@]}"
  PAIRED_REFS=ring python3 tests/e2e/runs/paired_table.py --closing "$D/n$n" | cut -c1-300 | head -80
} 2>&1 | grep -v 'NCCL INFO' | tee "$OUT/collnet12.txt"
tar czf "$OUT/collnet12.tgz" -C build-e2e collnet12
