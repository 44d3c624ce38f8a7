#!/usr/bin/env bash
# Issue 26 item 3, 2026-11-28 (session 10): CollNet host only, no GPU used, on a GPU host's cores:
# `strand-conform perf --collnet` (collnet_stub over strand-socket, NCCL's CollNetChain window of
# 8 calls, test of the oldest) against the same bytes through strand-socket directly, per
# progress mode and stream count, rounds alternating; then strand-socket alone, bidirectional, at
# the exchange's message size. BIN = a directory with strand-conform and
# libnccl-net-strand-socket.so (built with -Dcuda=disabled so that nothing needs CUDA).
set -u
cd "$(dirname "$0")/../../.." || exit 1
BIN=${BIN:-build-hostperf-carry}
OUT=${OUT:-/tmp}
SO=$BIN/libnccl-net-strand-socket.so
SIZES=${CNH_SIZES:-1M,1835008,4M}
echo "# $(date -u +%FT%TZ) $(nproc) CPUs $(git rev-parse --short HEAD 2>/dev/null)"
CFGS=("STRAND_COLLNET_PROGRESS=proxy" "STRAND_COLLNET_PROGRESS=thread"
      "STRAND_COLLNET_PROGRESS=thread STRAND_COLLNET_STREAMS=1"
      "STRAND_COLLNET_PROGRESS=thread STRAND_COLLNET_STREAMS=8")
for r in 1 2 3; do
  for cfg in "${CFGS[@]}"; do
    echo "## round $r: $cfg"
    # shellcheck disable=SC2086  # the configuration is a list of assignments
    env $cfg NCCL_DEBUG=INFO timeout 60 "$BIN/strand-conform" perf --collnet --only perf.collnet-allreduce -v \
      --collnet-bytes "$SIZES" --time "${CNH_TIME:-0.5}" "$SO" 2>&1 \
      | grep -E '^ +[0-9]+ +[0-9]+ |rank 0/2 closing: call gaps|FAIL' | sed 's/.*closing: call gaps: /  gaps: /' | cut -c1-330
  done
done
echo "## strand-socket alone, bidirectional, depth 4/8/16 at 512 KiB and 1 MiB"
for d in 4 8 16; do
  timeout 60 "$BIN/strand-conform" perf --only perf.bw-bi --no-latency --min-bytes 512K --max-bytes 1M \
    --depth $d --time 0.5 --ref tcp --ref-streams 8 "$SO" 2>&1 | grep -E '^ +[0-9]+ ' | sed "s/^/depth $d: /"
done
