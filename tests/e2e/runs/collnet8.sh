#!/usr/bin/env bash
# Issue 26 item 3, 2026-11-28 (session 9): collnet7.sh showed CollNet's exchanges latency-bound
# (~360 us for 0.9 MB under load, ~500 us for 1.8 MB with 16 channels) while strand-socket alone
# moves a 900 KiB message in 76 us at depth 1 on the same host. Which strand-socket setting under
# the stub moves that: no eager path (a CTS for every receive, no NEED_CTS round trip), twice the
# workers, 256 KiB data chunks, the control hand-off. Paired rounds at 2 ranks, ratios to the ring.
set -u
cd "$(dirname "$0")/../../.." || exit 1
OUT=${OUT:-/tmp}
D=build-e2e/collnet8; rm -rf "$D"; mkdir -p "$D"
C16='NCCL_MIN_NCHANNELS=16 NCCL_MAX_NCHANNELS=16'
CFGS=("E2E_NAME=ring NCCL_ALGO=allreduce:Ring" "E2E_NAME=cn @CN@" "E2E_NAME=cteager0 @CN@ STRAND_SOCKET_EAGER_BYTES=0"
      "E2E_NAME=cthr24 @CN@ STRAND_SOCKET_NTHREADS=24" "E2E_NAME=ctchunk256 @CN@ STRAND_SOCKET_MIN_CHUNK=262144"
      "E2E_NAME=cthand @CN@ STRAND_SOCKET_HANDOFF=1")
REFS=(--ref ring)
. tests/e2e/runs/paired.sh
{
  echo "# $(date -u +%FT%TZ): $(gpu_count) GPUs, $(nproc) CPUs"
  PAIRED_LAUNCHER="tests/e2e/collnet_e2e.sh variants" E2E_SIZES=128M,1G E2E_BUDGET_S=150 \
    paired_rounds "$D/n2" 2 30 "${CN8_BUDGET_S:-200}" "${CFGS[@]}"
  python3 tests/e2e/runs/paired_table.py "$D/n2" "${REFS[@]}" --closing | grep -v "closing: [0-9]* collectives"
  grep -h "coll channels\|collnet channels" build-e2e/log.sweep.rank0 | head -2
} 2>&1 | grep -v 'NCCL INFO' | tee "$OUT/collnet8.txt"
tar czf "$OUT/collnet8.tgz" -C build-e2e collnet8
