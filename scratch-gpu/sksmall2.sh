#!/usr/bin/env bash
# Second GPU-RUN of branch s7-sksmall (issue 26 item 1). Round 1 (01:31Z, old spin loop: a pass
# over every data stream and an epoll_wait(0) per 16 looks) showed the hand-off slower than the
# proxy writing itself: send.network 5.45 us (pickup ~2 us), and isend p90 6.45 us (worker asleep
# after 50 us: direct write + eventfd kick). Now: the worker spins on its control rings only
# (tight loop), and a longer window is tried. Default is off (''), so the configurations are:
#   '' (off)  |  HANDOFF=1 (spin 50 us)  |  HANDOFF=1 SPIN_US=1000
# against NCCL's built-in Socket (default, tuned), all-reduce 8 B .. 16 MiB, 4 and 2 ranks, up to
# 3 alternating rounds, plus the proxy-step profile at 16 B / 4 ranks for the three. < 3 min.
set -u
cd "$(dirname "$0")/.."
export NCCL_NVLS_ENABLE=0
D=build-e2e/sksmall2; rm -rf "$D"; mkdir -p "$D"
H=STRAND_SOCKET_HANDOFF
S=8,16,64,128,1K,8K,64K,1M,16M
one_round() {
  local r=$1
  for n in 4 2; do
    local dev=0,1; [ "$n" = 4 ] && dev=0,1,2,3
    CUDA_VISIBLE_DEVICES=$dev NRANKS=$n E2E_SIZES=$S timeout 70 tests/e2e/run_e2e.sh sweep '' "$H=1" "$H=1 ${H}_SPIN_US=1000" > "$D/n$n-r$r.txt" 2>&1
    CUDA_VISIBLE_DEVICES=$dev NRANKS=$n E2E_SIZES=$S timeout 40 tests/e2e/run_e2e.sh base >> "$D/n$n-r$r.txt" 2>&1
    echo "# round $r, $n ranks done at ${SECONDS}s"
  done
}
one_round 1
CUDA_VISIBLE_DEVICES=0,1,2,3 NRANKS=4 E2E_SIZES=16 timeout 50 tests/e2e/run_e2e.sh profile '' "$H=1" "$H=1 ${H}_SPIN_US=1000" > "$D/profile-n4.txt" 2>&1
echo "# profile done at ${SECONDS}s"
one_round 2
if (( SECONDS < 130 )); then one_round 3; else echo "# round 3 skipped (${SECONDS}s)"; fi
python3 scratch-gpu/sksmall_table.py "$D"/n4-r*.txt
python3 scratch-gpu/sksmall_table.py "$D"/n2-r*.txt
echo "# profile, 4 ranks, 16 B (rank 0, median/p90 per phase):"
grep -E '^\s+\[' "$D/profile-n4.txt" | grep -E 'phase=(send|recv)\.(isend|irecv|network)|phase=send.gpu' | head -40
tar czf "$OUT/sksmall2.tgz" -C build-e2e sksmall2
echo "# total ${SECONDS}s"
