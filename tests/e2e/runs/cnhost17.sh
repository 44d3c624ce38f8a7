#!/usr/bin/env bash
# Session 17: at 2 ranks the peer's copy of an all-reduce chunk (one exchange) lands straight in
# the receive buffer and is reduced there in place, instead of landing in an arena block (one pass
# over memory fewer). Pairs main before it (base/) with the change, host only, NCCL's window of 8,
# NCCL's call size and 16 MiB. Carry build-hostperf-carry with base/ in it.
set -u
cd "$(dirname "$0")/../../.." || exit 1
. tests/e2e/runs/cnhost_rounds.sh
B=${BIN:-build-hostperf-carry}
CNH_NRANKS=2 cnhost_rounds "${CNH_ROUNDS:-8}" "${CNH_SIZES:-1835008,16M}" \
  "@SO=$B/base/libnccl-net-strand-socket.so X=base" "X=land"
