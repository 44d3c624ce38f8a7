#!/usr/bin/env bash
# Issue 26 item 3, 2026-11-29 (session 14), the next step cnhost11/12 named: serve the oldest call
# first (cs_progress visits the busy slots oldest chunk first, the helpers' queue is ordered by
# chunk age instead of arrival: the scratch patch cnhost13-oldest.patch). Pairs main (base/, built
# from d86a1f4) with main plus the patch in one call, host only, NCCL's window of 8, at 2 and 4
# ranks; the gaps line's "-> done" is the time a finished call waits for an older one. Carry
# build-hostperf-carry with base/ in it.
set -u
cd "$(dirname "$0")/../../.." || exit 1
. tests/e2e/runs/cnhost_rounds.sh
B=${BIN:-build-hostperf-carry}
for n in 2 4; do
  CNH_NRANKS=$n cnhost_rounds "${CNH_ROUNDS:-4}" "${CNH_SIZES:-1835008,16M}" "@SO=$B/base/libnccl-net-strand-socket.so X=base" \
    "X=oldest-first"
done
