#!/usr/bin/env bash
# Issue 26 item 3, 2026-11-28 (session 10), after cnhost5.sh (helpers spinning for work made the
# exchanges ~1.8x slower: the socket workers lose cores to any other busy thread): fewer socket
# workers than the auto count (6 per rank on 16 cores, two ranks on one host), host only.
set -u
cd "$(dirname "$0")/../../.." || exit 1
. tests/e2e/runs/cnhost_rounds.sh
CFGS=("STRAND_COLLNET_PROGRESS=proxy" "STRAND_COLLNET_PROGRESS=proxy STRAND_SOCKET_NTHREADS=2"
      "STRAND_COLLNET_PROGRESS=proxy STRAND_SOCKET_NTHREADS=3" "STRAND_COLLNET_PROGRESS=proxy STRAND_SOCKET_NTHREADS=4"
      "STRAND_COLLNET_PROGRESS=proxy STRAND_COLLNET_THREADS=2")
cnhost_rounds 3 "${CNH_SIZES:-1835008}" "${CFGS[@]}"
