#!/usr/bin/env bash
# Issue 26 item 3, 2026-11-29 (session 14): an all-reduce call as ONE exchange per chunk (every rank
# sends its whole chunk to every peer and reduces all copies; STRAND_COLLNET_ONESHOT_KB) against
# the reduce-scatter + all-gather pair (=0, main's only way before). At 2 ranks both send the same
# bytes; above, one exchange sends n/2 times as many but saves a round trip and the wait between
# the two. Host only, NCCL's window of 8, every configuration once per round; base/ is main before
# the change (d86a1f4) as a check that =0 is that. Carry build-hostperf-carry.
set -u
cd "$(dirname "$0")/../../.." || exit 1
. tests/e2e/runs/cnhost_rounds.sh
B=${BIN:-build-hostperf-carry}
S=${CNH_SIZES:-4096,32768,262144,1835008}
[[ ${CNH14_FINE:-0} == 1 || ${CNH14_BIG:-0} == 1 || ${CNH14_CHUNK:-0} == 1 ]] || CNH_NRANKS=2 cnhost_rounds "${CNH_ROUNDS:-4}" "$S" "@SO=$B/base/libnccl-net-strand-socket.so X=base" \
  "STRAND_COLLNET_ONESHOT_KB=0" "X=auto"
[[ ${CNH14_FINE:-0} == 1 || ${CNH14_BIG:-0} == 1 || ${CNH14_CHUNK:-0} == 1 ]] || CNH_NRANKS=4 cnhost_rounds "${CNH_ROUNDS:-4}" "$S" "STRAND_COLLNET_ONESHOT_KB=0" "X=auto" \
  "STRAND_COLLNET_ONESHOT_KB=4096"
# Then the crossover, finer (CNH14_FINE=1): 2 ranks 256 KiB-1 MiB, 4 ranks 4-16 KiB, 3 ranks
# 4-64 KiB, one exchange for every call against none.
if [[ ${CNH14_FINE:-0} == 1 ]]; then
  CNH_NRANKS=2 cnhost_rounds "${CNH_ROUNDS:-4}" 262144,524288,1048576 "STRAND_COLLNET_ONESHOT_KB=0" \
    "STRAND_COLLNET_ONESHOT_KB=4096"
  CNH_NRANKS=4 cnhost_rounds "${CNH_ROUNDS:-4}" 4096,8192,16384 "STRAND_COLLNET_ONESHOT_KB=0" \
    "STRAND_COLLNET_ONESHOT_KB=4096"
  CNH_NRANKS=3 cnhost_rounds "${CNH_ROUNDS:-4}" 4096,16384,65536 "STRAND_COLLNET_ONESHOT_KB=0" \
    "STRAND_COLLNET_ONESHOT_KB=4096"
  # NCCL's 1.75 MiB call: is one exchange slower for using half the comms (lane 0 of each stream)?
  CNH_NRANKS=2 cnhost_rounds "${CNH_ROUNDS:-4}" 1835008 "STRAND_COLLNET_ONESHOT_KB=0" \
    "STRAND_COLLNET_ONESHOT_KB=4096" "STRAND_COLLNET_ONESHOT_KB=4096 STRAND_COLLNET_STREAMS=8"
fi
# Last (CNH14_BIG=1): NCCL's 1.75 MiB call and 16 MiB at 2 ranks, the two ways, more rounds.
if [[ ${CNH14_BIG:-0} == 1 ]]; then
  CNH_NRANKS=2 cnhost_rounds "${CNH_ROUNDS:-6}" 1835008,16777216 "STRAND_COLLNET_ONESHOT_KB=0" "X=auto"
fi
# And (CNH14_CHUNK=1): one exchange at 2 ranks with other chunk sizes (one chunk per NCCL call at
# 4096 KiB, four at 1024) and more slots.
if [[ ${CNH14_CHUNK:-0} == 1 ]]; then
  CNH_NRANKS=2 cnhost_rounds "${CNH_ROUNDS:-4}" 1835008,16777216 "X=auto" "STRAND_COLLNET_CHUNK_KB=4096" \
    "STRAND_COLLNET_CHUNK_KB=1024" "STRAND_COLLNET_CHUNK_KB=1024 STRAND_COLLNET_SLOTS=32"
fi
