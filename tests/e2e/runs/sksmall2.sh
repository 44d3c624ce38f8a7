#!/usr/bin/env bash
# Second GPU-RUN of branch s7-sksmall (issue 26 item 1). Round 1 (01:31Z, old spin loop: a pass
# over every data stream and an epoll_wait(0) per 16 looks) showed the hand-off slower than the
# proxy writing itself: send.network 5.45 us (pickup ~2 us), and isend p90 6.45 us (worker asleep
# after 50 us: direct write + eventfd kick). Now: the worker spins on its control rings only
# (tight loop), and a longer window is tried. Default is off (''), so the configurations are:
#   '' (off)  |  HANDOFF=1 (spin 50 us)  |  HANDOFF=1 SPIN_US=1000  |  TUNER=0 (off; is the tuner
#   library's per-collective call part of the 2-4 us left at 8-64 B?)
# against NCCL's built-in Socket (default, tuned), all-reduce 8 B .. 16 MiB, 4 and 2 ranks, up to
# 3 alternating rounds, plus the proxy-step profile at 16 B / 4 ranks for the three (2 ranks
# and 2-rank rounds only when fewer than 4 GPUs are lent). < 3 min.
set -u
cd "$(dirname "$0")/../../.."
export NCCL_NVLS_ENABLE=0
D=build-e2e/sksmall2; rm -rf "$D"; mkdir -p "$D"
H=STRAND_SOCKET_HANDOFF
S=8,16,64,128,1K,8K,64K,1M,16M
# 4-GPU machines may not be lent: the 4-rank parts run only where 4 GPUs are.
NG=$(nvidia-smi -L 2>/dev/null | wc -l)
RANKS="2"; PN=2; PDEV=0,1
if [ "$NG" -ge 4 ]; then RANKS="4 2"; PN=4; PDEV=0,1,2,3; fi
echo "# $NG GPUs: rank counts $RANKS, profile at $PN ranks"
one_round() {
  local r=$1
  for n in $RANKS; do
    local dev=0,1; [ "$n" = 4 ] && dev=0,1,2,3
    CUDA_VISIBLE_DEVICES=$dev NRANKS=$n E2E_SIZES=$S timeout 80 tests/e2e/run_e2e.sh sweep '' "$H=1" "$H=1 ${H}_SPIN_US=1000" 'STRAND_SOCKET_TUNER=0' > "$D/n$n-r$r.txt" 2>&1
    CUDA_VISIBLE_DEVICES=$dev NRANKS=$n E2E_SIZES=$S timeout 40 tests/e2e/run_e2e.sh base >> "$D/n$n-r$r.txt" 2>&1
    echo "# round $r, $n ranks done at ${SECONDS}s"
  done
}
one_round 1
CUDA_VISIBLE_DEVICES=$PDEV NRANKS=$PN E2E_SIZES=16 timeout 50 tests/e2e/run_e2e.sh profile '' "$H=1" "$H=1 ${H}_SPIN_US=1000" > "$D/profile-n$PN.txt" 2>&1
echo "# profile done at ${SECONDS}s"
one_round 2
if (( SECONDS < 120 )); then one_round 3; else echo "# round 3 skipped (${SECONDS}s)"; fi
for n in $RANKS; do python3 tests/e2e/runs/sksmall_table.py "$D"/n$n-r*.txt; done
echo "# profile, $PN ranks, 16 B (rank 0, median/p90 per phase):"
grep -E '^\s+\[' "$D/profile-n$PN.txt" | grep -E 'phase=' | head -40
tar czf "$OUT/sksmall2.tgz" -C build-e2e sksmall2
echo "# total ${SECONDS}s"
