#!/usr/bin/env bash
# Issue 26 item 3, 2026-11-29 (session 13): where an exchange of the stub's spends its time beyond
# the net's own, seen from both ranks at once. Host only (`strand-conform perf --collnet`, no GPU),
# so every rank reads the same CLOCK_MONOTONIC and the two sides of one exchange line up. The
# library in build-hostperf-carry/trace/ is main with tests/e2e/runs/cnhost11-trace.patch applied
# (release build, cuda disabled): one stderr line per completed exchange,
#   CSTRACE rank nranks lane turn phase call chunk issued posted first rin sout done red1
# (times in monotonic microseconds; `turn` is the exchange's place in its lane, the same on every
# rank, so (lane, turn) pairs the ranks' sides of one exchange). tests/e2e/runs/cstrace.py reads
# them. Runs 2 ranks at NCCL's 1.75 MB call, then 4, and the untraced library for scale.
set -u
cd "$(dirname "$0")/../../.." || exit 1
BIN=${BIN:-build-hostperf-carry}
OUT=${OUT:-/tmp}
echo "# $(date -u +%FT%TZ) $(nproc) CPUs"
for n in 2 4; do
  for lib in trace/libnccl-net-strand-socket.so libnccl-net-strand-socket.so; do
    echo "## $n ranks, $lib"
    NCCL_DEBUG=INFO timeout 60 "$BIN/strand-conform" perf --collnet --only perf.collnet-allreduce -v \
      --nranks "$n" --collnet-bytes 1835008 --time "${CNH_TIME:-0.5}" "$BIN/$lib" > "$OUT/cn${n}-${lib%%/*}.log" 2>&1
    grep -E "^ +[0-9]+ +[0-9]+ |rank 0/$n closing: call gaps|FAIL" "$OUT/cn${n}-${lib%%/*}.log" \
      | sed 's/.*closing: call gaps: /  gaps: /' | cut -c1-400
    grep -c 'CSTRACE' "$OUT/cn${n}-${lib%%/*}.log"
  done
done
