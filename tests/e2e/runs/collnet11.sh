#!/usr/bin/env bash
# Issue 26 item 3, 2026-11-28 (session 10): collnet10.sh (one H200, two fake nodes under MPS)
# again on two GPUs, now that STRAND_COLLNET_PROGRESS defaults to auto (a progress thread from 5
# CPUs): the default against proxy named explicitly, paired rounds, ratios to the ring through
# strand-socket. The table so far is rewritten under $OUT after every round. (Run once at 36291b5,
# where auto was the default; the default is proxy again since: collnet.md says why. Rerun with
# STRAND_COLLNET_PROGRESS=auto added to the auto configuration.)
set -u
cd "$(dirname "$0")/../../.." || exit 1
OUT=${OUT:-/tmp}
D=build-e2e/collnet11; rm -rf "$D"; mkdir -p "$D"
CFGS=("E2E_NAME=ring NCCL_ALGO=allreduce:Ring" "E2E_NAME=proxy @CN@ STRAND_COLLNET_PROGRESS=proxy" "E2E_NAME=auto @CN@ STRAND_COLLNET_PROGRESS=auto")
. tests/e2e/runs/paired.sh
{
  echo "# $(date -u +%FT%TZ): $(gpu_count) GPUs, $(nproc) CPUs, $(git rev-parse --short HEAD 2>/dev/null)"
  PAIRED_EACH_ROUND='PAIRED_REFS=ring python3 tests/e2e/runs/paired_table.py "$D/n2" >"$OUT/collnet11-partial.txt" 2>&1' \
    PAIRED_LAUNCHER="tests/e2e/collnet_e2e.sh variants" E2E_SIZES=16M,128M,1G E2E_BUDGET_S=150 \
    paired_rounds "$D/n2" 2 30 "${CN11_BUDGET_S:-200}" "${CFGS[@]}"
  PAIRED_REFS=ring python3 tests/e2e/runs/paired_table.py "$D/n2"
  PAIRED_REFS=proxy python3 tests/e2e/runs/paired_table.py "$D/n2"
  grep -ho 'progress on [a-zA-Z'"'"' ]*(STRAND' build-e2e/log.*rank0 | sort | uniq -c
} 2>&1 | grep -v 'NCCL INFO' | tee "$OUT/collnet11.txt"
tar czf "$OUT/collnet11.tgz" -C build-e2e collnet11
