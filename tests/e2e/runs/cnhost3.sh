#!/usr/bin/env bash
# Issue 26 item 3, 2026-11-28 (session 10), after cnhost2.sh (smaller chunks were worse: a cost per
# exchange dominates): host only, strand-socket's settings under the stub and the stub's helpers,
# to find the one thread or stream that bounds the call rate. Same launcher as cnhost1.sh.
set -u
cd "$(dirname "$0")/../../.." || exit 1
. tests/e2e/runs/cnhost_rounds.sh
CFGS=("STRAND_COLLNET_PROGRESS=proxy"
      "STRAND_COLLNET_PROGRESS=proxy STRAND_SOCKET_NSTREAMS=8"
      "STRAND_COLLNET_PROGRESS=proxy STRAND_SOCKET_NTHREADS=16"
      "STRAND_COLLNET_PROGRESS=proxy STRAND_SOCKET_MIN_CHUNK=262144"
      "STRAND_COLLNET_PROGRESS=proxy STRAND_COLLNET_STREAMS=8"
      "STRAND_COLLNET_PROGRESS=proxy STRAND_COLLNET_THREADS=0"
      "STRAND_COLLNET_PROGRESS=proxy STRAND_SOCKET_EAGER_BYTES=0")
cnhost_rounds 3 "${CNH_SIZES:-1835008,8M}" "${CFGS[@]}"
