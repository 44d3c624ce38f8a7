#!/usr/bin/env bash
# Issue 26 item 3, 2026-11-28 (session 10): what collnet_stub's header message ahead of every
# payload costs: the net reference of `perf --collnet` with and without --collnet-ref-headers
# (a 64-byte message before each payload on the same comms, as the stub sends), host only.
set -u
cd "$(dirname "$0")/../../.." || exit 1
. tests/e2e/runs/cnhost_rounds.sh
CFGS=("STRAND_COLLNET_PROGRESS=proxy" "@ARG=--collnet-ref-headers STRAND_COLLNET_PROGRESS=proxy")
cnhost_rounds 4 "${CNH_SIZES:-1M,1835008}" "${CFGS[@]}"
