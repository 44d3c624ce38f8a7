#!/usr/bin/env bash
# Issue 26 item 3, 2026-11-28 (session 9): collnet_stub's progress on its own thread
# (STRAND_COLLNET_PROGRESS=thread) against NCCL's proxy thread driving it inside test() (the
# default), paired rounds at 2 ranks, ratios to the ring through strand-socket. collnet6.sh
# measured four hand-offs per call waiting for NCCL's next test() (46-133 us each). The table so
# far is rewritten under $OUT after every round (a call cut short by its budget keeps it).
set -u
cd "$(dirname "$0")/../../.." || exit 1
OUT=${OUT:-/tmp}
D=build-e2e/collnet10; rm -rf "$D"; mkdir -p "$D"
CFGS=("E2E_NAME=ring NCCL_ALGO=allreduce:Ring" "E2E_NAME=cn @CN@" "E2E_NAME=cnthread @CN@ STRAND_COLLNET_PROGRESS=thread")
REFS=(--ref ring)
. tests/e2e/runs/paired.sh
{
  echo "# $(date -u +%FT%TZ): $(gpu_count) GPUs, $(nproc) CPUs"
  PAIRED_EACH_ROUND='python3 tests/e2e/runs/paired_table.py "$D/n2" "${REFS[@]}" >"$OUT/collnet10-partial.txt" 2>&1' \
    PAIRED_LAUNCHER="tests/e2e/collnet_e2e.sh variants" E2E_SIZES=16M,128M,1G E2E_BUDGET_S=150 \
    paired_rounds "$D/n2" 2 30 "${CN10_BUDGET_S:-200}" "${CFGS[@]}"
  python3 tests/e2e/runs/paired_table.py "$D/n2" "${REFS[@]}" --closing | grep -v "closing: [0-9]* collectives" | cut -c1-400
} 2>&1 | grep -v 'NCCL INFO' | tee "$OUT/collnet10.txt"
tar czf "$OUT/collnet10.tgz" -C build-e2e collnet10
