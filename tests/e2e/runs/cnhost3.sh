#!/usr/bin/env bash
# Issue 26 item 3, 2026-11-28 (session 10), after cnhost2.sh (smaller chunks were worse: a cost per
# exchange dominates): host only, strand-socket's settings under the stub and the stub's helpers,
# to find the one thread or stream that bounds the call rate. Same launcher as cnhost1.sh.
set -u
cd "$(dirname "$0")/../../.." || exit 1
BIN=${BIN:-build-hostperf-carry}
SO=$BIN/libnccl-net-strand-socket.so
echo "# $(date -u +%FT%TZ) $(nproc) CPUs $(git rev-parse --short HEAD 2>/dev/null)"
CFGS=("STRAND_COLLNET_PROGRESS=proxy"
      "STRAND_COLLNET_PROGRESS=proxy STRAND_SOCKET_NSTREAMS=8"
      "STRAND_COLLNET_PROGRESS=proxy STRAND_SOCKET_NTHREADS=16"
      "STRAND_COLLNET_PROGRESS=proxy STRAND_SOCKET_MIN_CHUNK=262144"
      "STRAND_COLLNET_PROGRESS=proxy STRAND_COLLNET_STREAMS=8"
      "STRAND_COLLNET_PROGRESS=proxy STRAND_COLLNET_THREADS=0"
      "STRAND_COLLNET_PROGRESS=proxy STRAND_SOCKET_EAGER_BYTES=0")
for r in 1 2 3; do
  for cfg in "${CFGS[@]}"; do
    echo "## round $r: $cfg"
    # shellcheck disable=SC2086  # the configuration is a list of assignments
    env $cfg NCCL_DEBUG=INFO timeout 60 "$BIN/strand-conform" perf --collnet --only perf.collnet-allreduce -v \
      --collnet-bytes "${CNH_SIZES:-1835008,8M}" --time "${CNH_TIME:-0.5}" "$SO" 2>&1 \
      | grep -E '^ +[0-9]+ +[0-9]+ |rank 0/2 closing: call gaps|FAIL' | sed 's/.*closing: call gaps: /  gaps: /' | cut -c1-330
  done
done
