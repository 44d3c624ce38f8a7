#!/usr/bin/env bash
# Issue 26 item 3, 2026-11-28 (session 10): collnet_stub's helpers watch their queue for 200 us
# after a job before sleeping (cs_cpu.c), where they slept at once and took 45-60 us to start the
# next reduction (cnhost1-3's "->reduce start"). Host only, the two builds paired in one call:
# $BIN/libnccl-net-strand-socket.so (before) and $BIN/new/libnccl-net-strand-socket.so (after).
set -u
cd "$(dirname "$0")/../../.." || exit 1
. tests/e2e/runs/cnhost_rounds.sh
B=${BIN:-build-hostperf-carry}
CFGS=("STRAND_COLLNET_PROGRESS=proxy" "@SO=$B/new/libnccl-net-strand-socket.so STRAND_COLLNET_PROGRESS=proxy")
cnhost_rounds 5 "${CNH_SIZES:-1M,1835008}" "${CFGS[@]}"
