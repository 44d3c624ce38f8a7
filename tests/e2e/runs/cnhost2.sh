#!/usr/bin/env bash
# Issue 26 item 3, 2026-11-28 (session 10), after cnhost1.sh: host only, NCCL's call size (1.75
# MiB at 8 channels) in one chunk per call leaves no pipelining inside a call (its all-gather waits
# for its whole reduce-scatter). Smaller chunks (STRAND_COLLNET_CHUNK_KB) and more slots
# (STRAND_COLLNET_SLOTS) put more exchanges in flight under the same window of 8 calls. Same
# launcher as cnhost1.sh; rounds alternate the configurations.
set -u
cd "$(dirname "$0")/../../.." || exit 1
BIN=${BIN:-build-hostperf-carry}
SO=$BIN/libnccl-net-strand-socket.so
echo "# $(date -u +%FT%TZ) $(nproc) CPUs $(git rev-parse --short HEAD 2>/dev/null)"
CFGS=("STRAND_COLLNET_PROGRESS=proxy"
      "STRAND_COLLNET_PROGRESS=proxy STRAND_COLLNET_CHUNK_KB=512 STRAND_COLLNET_SLOTS=64"
      "STRAND_COLLNET_PROGRESS=proxy STRAND_COLLNET_CHUNK_KB=256 STRAND_COLLNET_SLOTS=64"
      "STRAND_COLLNET_PROGRESS=thread STRAND_COLLNET_CHUNK_KB=512 STRAND_COLLNET_SLOTS=64"
      "STRAND_COLLNET_PROGRESS=proxy STRAND_COLLNET_CHUNK_KB=512 STRAND_COLLNET_SLOTS=64 STRAND_COLLNET_STREAMS=1"
      "STRAND_COLLNET_PROGRESS=proxy STRAND_COLLNET_CHUNK_KB=128 STRAND_COLLNET_SLOTS=64")
for r in 1 2 3; do
  for cfg in "${CFGS[@]}"; do
    echo "## round $r: $cfg"
    # shellcheck disable=SC2086  # the configuration is a list of assignments
    env $cfg NCCL_DEBUG=INFO timeout 60 "$BIN/strand-conform" perf --collnet --only perf.collnet-allreduce -v \
      --collnet-bytes "${CNH_SIZES:-1835008,8M}" --time "${CNH_TIME:-0.5}" "$SO" 2>&1 \
      | grep -E '^ +[0-9]+ +[0-9]+ |rank 0/2 closing: call gaps|FAIL' | sed 's/.*closing: call gaps: /  gaps: /' | cut -c1-330
  done
done
