#!/usr/bin/env bash
# Session 17: how much of collnet_stub's gap to the net is its CPU reduction? A scratch build
# (cnhost16-reduce.patch applied to main, in build-hostperf-carry/scratch/) where
# CS_SCRATCH_REDUCE=none skips the reduction and =copy replaces it by a copy of this rank's own
# block (perf --collnet then skips its result check); host only, NCCL's window of 8, 2 ranks (one
# exchange per call) and 4 (two). Carry build-hostperf-carry.
set -u
cd "$(dirname "$0")/../../.." || exit 1
. tests/e2e/runs/cnhost_rounds.sh
export BIN=${BIN:-build-hostperf-carry/scratch}
for n in 2 4; do
  CNH_NRANKS=$n cnhost_rounds "${CNH_ROUNDS:-5}" "${CNH_SIZES:-1835008,16M}" \
    "X=reduce" "CS_SCRATCH_REDUCE=none" "CS_SCRATCH_REDUCE=copy"
done
