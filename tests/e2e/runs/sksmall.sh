#!/usr/bin/env bash
# GPU-RUN of branch s7-sksmall (issue 26 item 1): strand-socket's control hand-off
# (STRAND_SOCKET_HANDOFF, default auto = on with >= 16 CPUs) against the proxy writing itself
# (=0) and NCCL's built-in Socket (default, tuned), all-reduce 8 B .. 8 KiB, 4 and 2 ranks, up to
# 3 alternating rounds, plus one proxy-step profile at 16 B / 4 ranks. < 3 min. Output: one
# tarball under $OUT and a median table on stdout (tests/e2e/runs/sksmall_table.py).
set -u
cd "$(dirname "$0")/../../.."
export NCCL_NVLS_ENABLE=0
D=build-e2e/sksmall; rm -rf "$D"; mkdir -p "$D"
H=STRAND_SOCKET_HANDOFF
S=8,16,32,64,128,1K,8K
one_round() {
  local r=$1
  for n in 4 2; do
    local dev=0,1; [ "$n" = 4 ] && dev=0,1,2,3
    CUDA_VISIBLE_DEVICES=$dev NRANKS=$n E2E_SIZES=$S timeout 60 tests/e2e/run_e2e.sh sweep '' "$H=0" > "$D/n$n-r$r.txt" 2>&1
    CUDA_VISIBLE_DEVICES=$dev NRANKS=$n E2E_SIZES=$S timeout 40 tests/e2e/run_e2e.sh base >> "$D/n$n-r$r.txt" 2>&1
    echo "# round $r, $n ranks done at ${SECONDS}s"
  done
}
one_round 1
# evidence: the plugin's INFO lines (hand-off on/off, writes handed to a worker per connection)
CUDA_VISIBLE_DEVICES=0,1 NRANKS=2 E2E_SIZES=16 timeout 30 tests/e2e/run_e2e.sh sweep 'NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET' > "$D/info-n2.txt" 2>&1
cp build-e2e/log.sweep.rank0 "$D/info-n2.rank0.log" 2>/dev/null
grep -hE "control hand-off|handed to a worker" "$D/info-n2.rank0.log" | head -6
CUDA_VISIBLE_DEVICES=0,1,2,3 NRANKS=4 E2E_SIZES=16 timeout 40 tests/e2e/run_e2e.sh profile '' "$H=0" > "$D/profile-n4.txt" 2>&1
echo "# profile done at ${SECONDS}s"
one_round 2
if (( SECONDS < 125 )); then one_round 3; else echo "# round 3 skipped (${SECONDS}s)"; fi
python3 tests/e2e/runs/sksmall_table.py "$D"/n4-r*.txt
python3 tests/e2e/runs/sksmall_table.py "$D"/n2-r*.txt
echo "# profile, 4 ranks, 16 B (rank 0, median/p90 per phase):"
grep -E '^\s+\[' "$D/profile-n4.txt" | head -60
tar czf "$OUT/sksmall.tgz" -C build-e2e sksmall
echo "# total ${SECONDS}s"
