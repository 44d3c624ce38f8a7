#!/usr/bin/env bash
# Issue 26 item 3, 2026-11-28 (session 10): CollNet host only, no GPU used, on a GPU host's cores:
# `strand-conform perf --collnet` (collnet_stub over strand-socket, NCCL's CollNetChain window of
# 8 calls, test of the oldest) against the same bytes through strand-socket directly, per
# progress mode and stream count, rounds alternating; then strand-socket alone, bidirectional, at
# the exchange's message size. BIN = a directory with strand-conform and
# libnccl-net-strand-socket.so (built with -Dcuda=disabled so that nothing needs CUDA).
set -u
cd "$(dirname "$0")/../../.." || exit 1
. tests/e2e/runs/cnhost_rounds.sh
CFGS=("STRAND_COLLNET_PROGRESS=proxy" "STRAND_COLLNET_PROGRESS=thread"
      "STRAND_COLLNET_PROGRESS=thread STRAND_COLLNET_STREAMS=1"
      "STRAND_COLLNET_PROGRESS=thread STRAND_COLLNET_STREAMS=8")
cnhost_rounds 3 "${CNH_SIZES:-1M,1835008,4M}" "${CFGS[@]}"
BIN=${BIN:-build-hostperf-carry}
SO=$BIN/libnccl-net-strand-socket.so
echo "## strand-socket alone, bidirectional, depth 4/8/16 at 512 KiB and 1 MiB"
for d in 4 8 16; do
  timeout 60 "$BIN/strand-conform" perf --only perf.bw-bi --no-latency --min-bytes 512K --max-bytes 1M \
    --depth $d --time 0.5 --ref tcp --ref-streams 8 "$SO" 2>&1 | grep -E '^ +[0-9]+ ' | sed "s/^/depth $d: /"
done
