#!/usr/bin/env bash
# Session 16: a collComm at 2 ranks forms one comm per stream and direction where every all-reduce
# is one exchange (the default there) instead of two, lane 1 of each stream having carried nothing.
# Pairs the build before (base/, 9f1feb0) with the change, host only, NCCL's window of 8, at NCCL's
# call size and 16 MiB; then the same pair at 4 ranks (two lanes there as before: a control).
# Carry build-hostperf-carry with base/ in it.
set -u
cd "$(dirname "$0")/../../.." || exit 1
. tests/e2e/runs/cnhost_rounds.sh
B=${BIN:-build-hostperf-carry}
for n in 2 4; do
  CNH_NRANKS=$n cnhost_rounds "${CNH_ROUNDS:-6}" "${CNH_SIZES:-1835008,16M}" \
    "@SO=$B/base/libnccl-net-strand-socket.so X=base" "X=one-lane"
done
