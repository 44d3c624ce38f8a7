#!/usr/bin/env bash
# Issue 26 item 2, 2026-11-28 (session 10): strand-ofi's tuner defaults of session 9 (Tree up to
# 1 KiB on 2-node communicators, bands from 3 nodes, chosen when the variables are unset) run
# through NCCL as code for the first time (ofi5.sh measured their environment equivalents): the
# tuner's INFO line from one launch (each value's source), then paired rounds against the built-in
# Socket default at 2 ranks. Needs .e2e-carry (libfabric) and 2 GPUs.
set -u
cd "$(dirname "$0")/../../.."
. tests/e2e/runs/paired.sh
paired_begin ofi6
CUDA_VISIBLE_DEVICES=0,1 NRANKS=2 E2E_SIZES=8,1K timeout 100 tests/e2e/run_e2e.sh sweep \
  "$O NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,TUNING" >"$D/info.txt" 2>&1
cp build-e2e/log.sweep.rank0 "$D/info.log0" 2>/dev/null
grep -h 'tuner (ncclTunerPlugin' "$D/info.log0" | sed 's/.*NCCL INFO //' | sort -u | cut -c1-400
grep -hE 'AllReduce: (8|1024) Bytes' "$D/info.log0" | sed 's/.*NCCL INFO //' | sort | uniq -c | head -4
E2E_SIZES=8,128,1K,8K,64K,1M,16M,128M paired_rounds "$D/n2" 2 12 "${OFI_BUDGET_S:-150}" "$B" "E2E_NAME=ofi $O"
python3 tests/e2e/runs/paired_table.py "$D/n2"
grep -h "WARN" "$D"/n*/*.txt | sort | uniq -c | head -5
tar czf "${OUT:-build-e2e}/ofi6.tgz" -C build-e2e ofi6
