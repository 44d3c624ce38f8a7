#!/usr/bin/env bash
# Session 17, after cnhost17.sh: above 2 ranks the reduce-scatter's first peer in rank order lands
# in the result too, and is reduced there in place. Pairs main before any landing (base/, 26fbcb5)
# with the change at 4 and 3 ranks, host only, NCCL's window of 8; 16 MiB calls (above the landing
# limit) are the control. Carry build-hostperf-carry with base/ in it.
set -u
cd "$(dirname "$0")/../../.." || exit 1
. tests/e2e/runs/cnhost_rounds.sh
B=${BIN:-build-hostperf-carry}
for n in ${CNH18_NRANKS:-4 3}; do
  CNH_NRANKS=$n cnhost_rounds "${CNH_ROUNDS:-6}" "${CNH_SIZES:-1835008,8M,16M}" \
    "@SO=$B/base/libnccl-net-strand-socket.so X=base" "X=land"
done
