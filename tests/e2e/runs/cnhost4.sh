#!/usr/bin/env bash
# Issue 26 item 3, 2026-11-28 (session 10), after cnhost1-3.sh: system calls per CollNet call,
# host only (strace -f -c over both ranks; the counts include the run's net reference and its
# warm-ups, so each summary is set beside its run's call counts). Needs strace: the host's, or
# one carried in $BIN/tools.
set -u
cd "$(dirname "$0")/../../.." || exit 1
BIN=${BIN:-build-hostperf-carry}
SO=$BIN/libnccl-net-strand-socket.so
OUT=${OUT:-/tmp}
# no strace on the GPU hosts: the dev VM's (Debian 12) with its libraries, carried in $BIN/tools
[ -x "$BIN/tools/strace" ] && export PATH=$PWD/$BIN/tools:$PATH && strace() { LD_LIBRARY_PATH=$PWD/$BIN/tools command strace "$@"; }
echo "# $(date -u +%FT%TZ) $(nproc) CPUs; strace: $(command -v strace || echo none); perf: $(command -v perf || echo none)"
command -v strace >/dev/null || exit 0
for mode in proxy thread; do
  echo "## collnet $mode: 1.75 MiB calls, 8 in flight"
  STRAND_COLLNET_PROGRESS=$mode NCCL_DEBUG=INFO strace -f -c -o "$OUT/strace-cn-$mode.txt" \
    "$BIN/strand-conform" perf --collnet --only perf.collnet-allreduce -v --collnet-bytes 1835008 --time 0.5 "$SO" 2>&1 \
    | grep -E '^ +[0-9]+ +[0-9]+ |rank 0/2 closing' | cut -c1-400
  head -25 "$OUT/strace-cn-$mode.txt"
done
echo "## strand-socket alone: bw-bi 896 KiB, depth 8"
strace -f -c -o "$OUT/strace-bwbi.txt" "$BIN/strand-conform" perf --only perf.bw-bi --no-latency \
  --min-bytes 917504 --max-bytes 917504 --depth 8 --time 0.5 "$SO" 2>&1 | grep -E '^ +[0-9]+ '
head -25 "$OUT/strace-bwbi.txt"
