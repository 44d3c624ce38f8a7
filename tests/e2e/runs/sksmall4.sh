#!/usr/bin/env bash
# Issue 26 item 1, 2026-11-28 (third session of the day): where do strand-socket's 1-3 us at
# 8-64 B go? Earlier calls ran every strand-socket configuration in the same order, so a
# configuration's place in the round was not ruled out (STRAND_SOCKET_TUNER=0 ran 4th and was
# 1.5-2.5 us faster at 2 ranks). Here the order rotates every round, with 5 rounds:
#   strand-socket defaults | STRAND_SOCKET_TUNER=0 | STRAND_SOCKET_NTHREADS=0 (no workers) |
#   NCCL_MAX_NCHANNELS=2 (as many channels as the built-in Socket opens here) |
#   NCCL's built-in Socket, default and tuned (run_e2e.sh base), first or last in turn;
# all-reduce 8 B .. 1 KiB at 2 ranks (4 as well where 4 GPUs are), then the proxy-step profile at
# 8 and 64 B for the built-in and strand-socket at 2 ranks. < 5 min.
set -u
cd "$(dirname "$0")/../../.."
export NCCL_NVLS_ENABLE=0
D=build-e2e/sksmall4; rm -rf "$D"; mkdir -p "$D"
S=8,16,64,128,1K
NG=$(nvidia-smi -L 2>/dev/null | wc -l)
RANKS="2"; [ "$NG" -ge 4 ] && RANKS="2 4"
echo "# $NG GPUs ($(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)), $(nproc) CPUs: rank counts $RANKS"
CFGS=('' 'STRAND_SOCKET_TUNER=0' 'STRAND_SOCKET_NTHREADS=0' 'NCCL_MAX_NCHANNELS=2')
one_round() {
  local r=$1 n=$2 dev=0,1
  [ "$n" = 4 ] && dev=0,1,2,3
  local k=${#CFGS[@]} rot=() i
  for ((i = 0; i < k; i++)); do rot+=("${CFGS[$(((i + r) % k))]}"); done
  local f="$D/n$n-r$r.txt"; : > "$f"
  if (( r % 2 == 0 )); then CUDA_VISIBLE_DEVICES=$dev NRANKS=$n E2E_SIZES=$S timeout 40 tests/e2e/run_e2e.sh base >> "$f" 2>&1; fi
  CUDA_VISIBLE_DEVICES=$dev NRANKS=$n E2E_SIZES=$S timeout 90 tests/e2e/run_e2e.sh sweep "${rot[@]}" >> "$f" 2>&1
  if (( r % 2 == 1 )); then CUDA_VISIBLE_DEVICES=$dev NRANKS=$n E2E_SIZES=$S timeout 40 tests/e2e/run_e2e.sh base >> "$f" 2>&1; fi
  echo "# round $r, $n ranks, order: $(printf '[%s] ' "${rot[@]}")done at ${SECONDS}s"
}
for r in 1 2 3 4 5; do
  for n in $RANKS; do one_round "$r" "$n"; done
  if (( SECONDS > 230 )); then echo "# stopping after round $r (${SECONDS}s)"; break; fi
done
CUDA_VISIBLE_DEVICES=0,1 NRANKS=2 E2E_SIZES=8,64 timeout 60 tests/e2e/run_e2e.sh profile > "$D/profile-n2.txt" 2>&1
echo "# profile done at ${SECONDS}s"
for n in $RANKS; do python3 tests/e2e/runs/sksmall_table.py "$D"/n$n-r*.txt; done
echo "# profile, 2 ranks (rank 0, median/p90 per phase):"
grep -E '^\s+\[' "$D/profile-n2.txt" | head -60
tar czf "$OUT/sksmall4.tgz" -C build-e2e sksmall4
echo "# total ${SECONDS}s"
