#!/usr/bin/env bash
# Issue 26 item 3, 2026-11-28 (session 10), after cnhost7.sh (headers cost nothing): does spreading
# the exchanges over comms cost? The stub at 2 ranks uses 4 streams x 2 lanes of comms per peer
# (auto), the net reference one comm pair: STRAND_COLLNET_STREAMS=1 (2 comms) against the default,
# NCCL's progress on the caller's thread, host only.
set -u
cd "$(dirname "$0")/../../.." || exit 1
. tests/e2e/runs/cnhost_rounds.sh
CFGS=("STRAND_COLLNET_PROGRESS=proxy" "STRAND_COLLNET_PROGRESS=proxy STRAND_COLLNET_STREAMS=1"
      "STRAND_COLLNET_PROGRESS=proxy STRAND_COLLNET_STREAMS=2")
cnhost_rounds 4 "${CNH_SIZES:-1M,1835008}" "${CFGS[@]}"
