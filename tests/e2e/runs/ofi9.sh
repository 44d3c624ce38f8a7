#!/usr/bin/env bash
# Issue 26 item 2, 2026-11-28 (session 11), after ofi8.sh (4 x H200, 12 paired rounds: strand-ofi's
# defaults 0.78x the built-in Socket default at 16 B, 0.71x at 8 KiB, 0.85x at 128 KiB, 0.90x at
# 2 MiB): (1) what NCCL chose for each at 4 ranks (rank 0's TUNING lines, one launch each), (2)
# paired rounds of candidate defaults for 3+ nodes below 16 KiB, where the default bands leave
# NCCL's own channel count: 1 or 2 channels, and Tree up to 16 KiB. Needs .e2e-carry and 4 GPUs.
set -u
cd "$(dirname "$0")/../../.." || exit 1
. tests/e2e/runs/paired.sh
paired_begin ofi9 4
dbg='NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,TUNING'
for c in ofi builtin; do
  e=$O; [ $c = builtin ] && e=$B
  CUDA_VISIBLE_DEVICES=0,1,2,3 NRANKS=4 E2E_SIZES=16,8K,128K,2M timeout 100 tests/e2e/run_e2e.sh sweep "$e $dbg" >"$D/$c.txt" 2>&1
  cp build-e2e/log.sweep.rank0 "$D/$c.log0"
  echo "## $c: what NCCL chose (rank 0)"
  grep -hE 'AllReduce: [0-9]+ Bytes' "$D/$c.log0" | sed 's/.*NCCL INFO //' | sort | uniq -c | head -8
  grep -hiE 'tuner \(ncclTunerPlugin|[0-9]+ coll channels' "$D/$c.log0" | sed 's/.*NCCL INFO //' | sort -u | cut -c1-300 | head -4
done
bands='1M:2:simple,16M:2:simple'
E2E_SIZES=16,1K,8K,32K,128K paired_rounds "$D/n4" 4 12 "${OFI_BUDGET_S:-150}" "$B" "E2E_NAME=ofi $O" \
  "E2E_NAME=c1 $O STRAND_OFI_TUNER_CHANNELS=16K:1,$bands" "E2E_NAME=c2 $O STRAND_OFI_TUNER_CHANNELS=16K:2,$bands" \
  "E2E_NAME=t16k $O STRAND_OFI_TUNER_TREE_BYTES=16384"
python3 tests/e2e/runs/paired_table.py "$D/n4"
tar czf "${OUT:-build-e2e}/ofi9.tgz" -C build-e2e ofi9
