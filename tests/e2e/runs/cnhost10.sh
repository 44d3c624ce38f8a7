#!/usr/bin/env bash
# Issue 26 item 3, 2026-11-28 (session 12), after cnhost9.sh (4 ranks host only: the stub 0.72-0.83x
# strand-socket's own mesh at NCCL's 1.75 MB call, 0.92-0.99x at 16 MiB; the mesh at the host's
# loopback TCP limit). The target weighs CollNet against NCCL's ring, not against the mesh: the
# same stub runs against both references in turn, the mesh (B/4 to and from each peer, twice) and
# the ring's bytes (`--collnet-ref ring`: 6 steps of B/4 to the next rank), at 4 ranks, then 2
# (where the two are the same pattern) for scale. Host only on the GPU host's cores.
set -u
cd "$(dirname "$0")/../../.." || exit 1
. tests/e2e/runs/cnhost_rounds.sh
CNH_NRANKS=4 cnhost_rounds "${CNH_ROUNDS:-3}" "${CNH_SIZES:-1835008,16M}" "STRAND_COLLNET_PROGRESS=proxy" \
  "@ARG=--collnet-ref=ring STRAND_COLLNET_PROGRESS=proxy"
CNH_NRANKS=3 cnhost_rounds 2 "${CNH_SIZES:-1835008,16M}" "STRAND_COLLNET_PROGRESS=proxy" \
  "@ARG=--collnet-ref=ring STRAND_COLLNET_PROGRESS=proxy"
