#!/usr/bin/env bash
# Issue 26 item 3, 2026-11-28 (session 10), after cnhost1.sh: host only, NCCL's call size (1.75
# MiB at 8 channels) in one chunk per call leaves no pipelining inside a call (its all-gather waits
# for its whole reduce-scatter). Smaller chunks (STRAND_COLLNET_CHUNK_KB) and more slots
# (STRAND_COLLNET_SLOTS) put more exchanges in flight under the same window of 8 calls. Same
# launcher as cnhost1.sh; rounds alternate the configurations.
set -u
cd "$(dirname "$0")/../../.." || exit 1
. tests/e2e/runs/cnhost_rounds.sh
CFGS=("STRAND_COLLNET_PROGRESS=proxy"
      "STRAND_COLLNET_PROGRESS=proxy STRAND_COLLNET_CHUNK_KB=512 STRAND_COLLNET_SLOTS=64"
      "STRAND_COLLNET_PROGRESS=proxy STRAND_COLLNET_CHUNK_KB=256 STRAND_COLLNET_SLOTS=64"
      "STRAND_COLLNET_PROGRESS=thread STRAND_COLLNET_CHUNK_KB=512 STRAND_COLLNET_SLOTS=64"
      "STRAND_COLLNET_PROGRESS=proxy STRAND_COLLNET_CHUNK_KB=512 STRAND_COLLNET_SLOTS=64 STRAND_COLLNET_STREAMS=1"
      "STRAND_COLLNET_PROGRESS=proxy STRAND_COLLNET_CHUNK_KB=128 STRAND_COLLNET_SLOTS=64")
cnhost_rounds 3 "${CNH_SIZES:-1835008,8M}" "${CFGS[@]}"
