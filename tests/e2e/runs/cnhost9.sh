#!/usr/bin/env bash
# Issue 26 item 3, 2026-11-28 (session 12), after collnet12-14.sh (4 x H200: CollNet 0.80-0.89x the
# ring at 16 MiB-1 GiB, each exchange of a ~2 MB call 530-720 us with ~7 calls in flight): the
# host-only split at 4 ranks that session 10 made at 2. `strand-conform perf --collnet --nranks 4`
# on the GPU host's cores (no GPU): the stub under NCCL's window of 8 calls against the same bytes
# through strand-socket as a mesh (B/4 to and from each of the 3 peers, twice), with the stub's
# defaults (2 streams at 4 ranks), one stream, and the progress thread; then 2 ranks for reference.
set -u
cd "$(dirname "$0")/../../.." || exit 1
. tests/e2e/runs/cnhost_rounds.sh
CFGS=("STRAND_COLLNET_PROGRESS=proxy" "STRAND_COLLNET_PROGRESS=proxy STRAND_COLLNET_STREAMS=1"
      "STRAND_COLLNET_PROGRESS=thread")
CNH_NRANKS=4 cnhost_rounds "${CNH_ROUNDS:-3}" "${CNH_SIZES:-1835008,16M}" "${CFGS[@]}"
CNH_NRANKS=2 cnhost_rounds 2 "${CNH_SIZES:-1835008,16M}" "STRAND_COLLNET_PROGRESS=proxy"
