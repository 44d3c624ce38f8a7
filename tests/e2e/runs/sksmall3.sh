#!/usr/bin/env bash
# Next measurement of branch s7-sksmall (not run this session): the control hand-off with a size
# rule, STRAND_SOCKET_HANDOFF=1 STRAND_SOCKET_HANDOFF_MIN_BYTES=4096 (only writes of >= 4 KiB go to
# the worker; the second run had the hand-off of every write lose at 8 B-1 KiB and gain at 64 KiB-
# 16 MiB), against off ('', the default), the hand-off of every write, and NCCL's built-in Socket;
# all-reduce 8 B .. 16 MiB, 4 and 2 ranks (4 only where 4 GPUs are), up to 3 rounds, plus the
# 16 B profile. < 3 min. Output: one tarball under $OUT and median tables on stdout.
set -u
cd "$(dirname "$0")/../../.."
export NCCL_NVLS_ENABLE=0
D=build-e2e/sksmall3; rm -rf "$D"; mkdir -p "$D"
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
    CUDA_VISIBLE_DEVICES=$dev NRANKS=$n E2E_SIZES=$S timeout 80 tests/e2e/run_e2e.sh sweep '' "$H=1 ${H}_MIN_BYTES=4096" "$H=1" > "$D/n$n-r$r.txt" 2>&1
    CUDA_VISIBLE_DEVICES=$dev NRANKS=$n E2E_SIZES=$S timeout 40 tests/e2e/run_e2e.sh base >> "$D/n$n-r$r.txt" 2>&1
    echo "# round $r, $n ranks done at ${SECONDS}s"
  done
}
one_round 1
CUDA_VISIBLE_DEVICES=$PDEV NRANKS=$PN E2E_SIZES=16 timeout 50 tests/e2e/run_e2e.sh profile '' "$H=1 ${H}_MIN_BYTES=4096" > "$D/profile-n$PN.txt" 2>&1
echo "# profile done at ${SECONDS}s"
one_round 2
if (( SECONDS < 120 )); then one_round 3; else echo "# round 3 skipped (${SECONDS}s)"; fi
for n in $RANKS; do python3 tests/e2e/runs/sksmall_table.py "$D"/n$n-r*.txt; done
echo "# profile, $PN ranks, 16 B (rank 0, median/p90 per phase):"
grep -E '^\s+\[' "$D/profile-n$PN.txt" | grep -E 'phase=' | head -40
tar czf "$OUT/sksmall3.tgz" -C build-e2e sksmall3
echo "# total ${SECONDS}s"
