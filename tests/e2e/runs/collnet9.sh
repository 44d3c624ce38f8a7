#!/usr/bin/env bash
# Issue 26 item 3, 2026-11-28 (session 9): strand-socket's test() of a receive whose headers are
# known and whose payload is landing skips the control stream's recv() (SK_EXP_SKIP_POLL=0: the
# old behaviour, in the same build, for this paired measurement only). collnet_stub tests every
# posted receive on each pass, on NCCL's proxy thread (~10 us per pass). Paired rounds at 2 ranks:
# ring and CollNet, each with and without the skip.
# Ran on a scratch tree (main 0602652 + that patch to net_socket/sk_xfer.c test_recv, with the
# SK_EXP_SKIP_POLL toggle); the patch was NOT landed (no gain: docs/benchmarks/collnet.md), so on
# main both pairs of configurations are the same code.
set -u
cd "$(dirname "$0")/../../.." || exit 1
OUT=${OUT:-/tmp}
D=build-e2e/collnet9; rm -rf "$D"; mkdir -p "$D"
CFGS=("E2E_NAME=ring NCCL_ALGO=allreduce:Ring" "E2E_NAME=ringold NCCL_ALGO=allreduce:Ring SK_EXP_SKIP_POLL=0"
      "E2E_NAME=cn @CN@" "E2E_NAME=cnold @CN@ SK_EXP_SKIP_POLL=0")
REFS=(--ref ringold)
. tests/e2e/runs/paired.sh
{
  echo "# $(date -u +%FT%TZ): $(gpu_count) GPUs, $(nproc) CPUs"
  PAIRED_LAUNCHER="tests/e2e/collnet_e2e.sh variants" E2E_SIZES=16M,128M,1G E2E_BUDGET_S=150 \
    paired_rounds "$D/n2" 2 30 "${CN9_BUDGET_S:-200}" "${CFGS[@]}"
  python3 tests/e2e/runs/paired_table.py "$D/n2" "${REFS[@]}" --closing | grep -v "closing: [0-9]* collectives" | cut -c1-400
} 2>&1 | grep -v 'NCCL INFO' | tee "$OUT/collnet9.txt"
tar czf "$OUT/collnet9.tgz" -C build-e2e collnet9
