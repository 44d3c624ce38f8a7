#!/usr/bin/env bash
# Issue 26 item 3, 2026-11-28 (session 11), after collnet12.sh (4 x H200, 16 paired rounds: CollNet
# 0.78-0.82x the ring through strand-socket from 16 MiB; per call ~220 us from issue to the
# reduce-scatter posted and ~155 us from the reduction to the all-gather posted, both waits for
# NCCL's next test on its proxy thread): the stub's settings that act on those waits and on the
# 4-rank exchange, paired at 4 ranks: the defaults, the progress thread (STRAND_COLLNET_PROGRESS=thread;
# 64 cores here), two comm sets per peer pair (STRAND_COLLNET_STREAMS=2, auto gives 1 from 4 ranks),
# and both. Writes $OUT/collnet13.txt and $OUT/collnet13.tgz. Needs 4 GPUs.
set -u
cd "$(dirname "$0")/../../.." || exit 1
OUT=${OUT:-/tmp}
. tests/e2e/runs/paired.sh
export NCCL_NVLS_ENABLE=0
[ "$(gpu_count)" -ge 4 ] || { echo "# fewer than 4 GPUs: nothing to do"; exit 0; }
D=build-e2e/collnet13; rm -rf "$D"; mkdir -p "$D"
CFGS=("E2E_NAME=ring NCCL_ALGO=allreduce:Ring" "E2E_NAME=proxy @CN@" "E2E_NAME=thread @CN@ STRAND_COLLNET_PROGRESS=thread"
  "E2E_NAME=s2 @CN@ STRAND_COLLNET_STREAMS=2" "E2E_NAME=s2thread @CN@ STRAND_COLLNET_STREAMS=2 STRAND_COLLNET_PROGRESS=thread")
{
  paired_banner
  PAIRED_LAUNCHER="tests/e2e/collnet_e2e.sh variants" E2E_SIZES=${CN13_SIZES:-2M,16M,128M,1G} E2E_BUDGET_S=150 \
    paired_rounds "$D/n4" 4 30 "${CN13_BUDGET_S:-180}" "${CFGS[@]}"
  PAIRED_REFS=ring python3 tests/e2e/runs/paired_table.py "$D/n4"
  PAIRED_REFS=proxy python3 tests/e2e/runs/paired_table.py "$D/n4"
} 2>&1 | grep -v 'NCCL INFO' | tee "$OUT/collnet13.txt"
tar czf "$OUT/collnet13.tgz" -C build-e2e collnet13
