#!/usr/bin/env bash
# Issue 26 item 1, session 11: STRAND_SOCKET_SEND_WRITE=test. At 4 ranks, 16-64 B all-reduce, NCCL
# runs the same Tree LL for strand-socket and the built-in Socket, but strand-socket's isend held
# the proxy thread 2.9-3.7 us in sendmsg where the built-in's returns at once and writes from
# test() (socket.md, "What NCCL chose at 4 ranks, and where a step's time goes"): 0.90-0.92x the
# built-in there. With =test, isend only queues a small send and the next test()/isend writes it.
# (1) paired rounds on 4 GPUs: strand-socket's default (E2E_NAME=isend), =test, a twin of =test
# (the launch-to-launch control) and the built-in default; (2) the proxy-step profile at 4 ranks,
# 16 and 64 B, for the default and =test (run_e2e.sh profile adds the built-in itself). With 2 or 3
# GPUs the paired rounds run at 2 ranks instead and the profile is left out.
# Writes $OUT/sksmall10.tgz and prints the table (tests/e2e/runs/paired_table.py).
set -u
cd "$(dirname "$0")/../../.." || exit 1
. tests/e2e/runs/paired.sh
export NCCL_NVLS_ENABLE=0 E2E_SIZES=16,64,256,1K,8K,64K
B=$PAIRED_BUILTIN
W=STRAND_SOCKET_SEND_WRITE=test
paired_banner
G=$(gpu_count)
[ "$G" -ge 2 ] || { echo "# fewer than 2 GPUs: nothing to do"; exit 0; }
N=2; [ "$G" -ge 4 ] && N=4
D=build-e2e/sksmall10; rm -rf "$D"; mkdir -p "$D"
paired_rounds "$D/p" "$N" 40 "${SK_BUDGET_S:-200}" 'E2E_NAME=isend' "E2E_NAME=test $W" \
  "E2E_NAME=test2 $W" "$B"
PAIRED_REFS=default python3 tests/e2e/runs/paired_table.py "$D/p"
if [ "$N" -eq 4 ]; then
  echo "## proxy-step profile, 4 ranks: builtin, strand-socket default, $W"
  CUDA_VISIBLE_DEVICES=0,1,2,3 NRANKS=4 E2E_SIZES=16,64 timeout 150 tests/e2e/run_e2e.sh profile \
    '' "$W" >"$D/profile-n4.txt" 2>&1 || echo "# profile: a launch failed (see $D/profile-n4.txt)"
  cat "$D/profile-n4.txt"
fi
tar czf "${OUT:-build-e2e}/sksmall10.tgz" -C build-e2e sksmall10
