#!/usr/bin/env bash
# Issue 26 item 1, 2026-11-28 (session 9): why strand-socket is 0.90-0.92x the built-in Socket at
# 16-64 B at 4 ranks (sksmall8.sh, 16 paired rounds, twin control agreeing) while level at 2 ranks
# and 1.3x ahead from 256 B. (1) What NCCL chose for each: one launch each with NCCL's TUNING
# lines (algorithm, protocol, channels per all-reduce size) and the speed/latency each net
# reported (NET INFO lines); (2) paired rounds at 4 ranks: strand-socket defaults, with
# NCCL_ALGO=Ring, with NCCL_ALGO=Tree, and the built-in default and with NCCL_ALGO=Tree.
# (2) needs 4 GPUs; with fewer, (1) runs alone with the 4 ranks sharing GPU 0 under CUDA MPS
# (run_e2e.sh starts the daemon): NCCL's choices depend on the topology each fake node sees (one
# GPU, one NET), not on timing. Writes $OUT/sksmall9.tgz and prints the table.
set -u
cd "$(dirname "$0")/../../.."
. tests/e2e/runs/paired.sh
export NCCL_NVLS_ENABLE=0 E2E_SIZES=16,64,256,1K
B=$PAIRED_BUILTIN
paired_banner
D=build-e2e/sksmall9; rm -rf "$D"; mkdir -p "$D"
dbg='NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET,TUNING,GRAPH'
for c in strand builtin; do
  e=""; [ $c = builtin ] && e=$B
  CUDA_VISIBLE_DEVICES=0,1,2,3 NRANKS=4 timeout 100 tests/e2e/run_e2e.sh sweep "$e $dbg" >"$D/$c.txt" 2>&1
  cp build-e2e/log.sweep.rank0 "$D/$c.log0"
  echo "## $c: what NCCL chose (rank 0)"
  grep -hE 'AllReduce: [0-9]+ Bytes' "$D/$c.log0" | sed 's/.*NCCL INFO //' | sort | uniq -c | head -12
  grep -hiE 'NET/.*(speed|latency)|Using network|Channel 00/|nChannels|Pattern|Trees|[0-9]+ coll channels' "$D/$c.log0" \
    | sed 's/.*NCCL INFO //' | sort -u | head -14
done
if [ "$(gpu_count)" -lt 4 ]; then
  echo "# fewer than 4 GPUs: the choices above only (4 ranks shared one GPU), no paired rounds"
  tar czf "${OUT:-build-e2e}/sksmall9.tgz" -C build-e2e sksmall9
  exit 0
fi
paired_rounds "$D/p" 4 30 "${SK_BUDGET_S:-170}" 'E2E_NAME=strand' 'E2E_NAME=ring NCCL_ALGO=Ring' \
  'E2E_NAME=tree NCCL_ALGO=Tree' "$B" "$B NCCL_ALGO=Tree E2E_NAME=btree"
PAIRED_REFS=default python3 tests/e2e/runs/paired_table.py "$D/p"
tar czf "${OUT:-build-e2e}/sksmall9.tgz" -C build-e2e sksmall9
