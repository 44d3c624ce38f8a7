#!/usr/bin/env bash
# Issue 26 item 2, 2026-11-28 (session 11), after ofi9.sh (4 x H200, 8 paired rounds): one channel
# below 16 KiB (c1: 16K:1) took 8 KiB from 0.84x to 1.24x the built-in Socket default at 4 ranks
# (NCCL had put Tree LL on 2 of the 8 channels strand-ofi's rails open; the built-in runs Ring LL
# on one), but 32 KiB stays at 0.64-0.70x in every configuration (the 1M:2:simple band forces
# Simple there). Candidates for the 3-node default between 16 and 64 KiB, paired at 4 ranks:
# c1 (16K:1 then today's bands), w1 (one channel up to 64 KiB, NCCL's protocol), w2 (16K:1, then 2
# channels up to 64 KiB with NCCL's protocol), l1 (16K:1, then 1 channel LL up to 64 KiB).
# Needs .e2e-carry and 4 GPUs.
set -u
cd "$(dirname "$0")/../../.." || exit 1
. tests/e2e/runs/paired.sh
paired_begin ofi10 4
big='1M:2:simple,16M:2:simple'
E2E_SIZES=16,8K,16K,32K,64K,128K,256K paired_rounds "$D/n4" 4 12 "${OFI_BUDGET_S:-130}" "$B" "E2E_NAME=ofi $O" \
  "E2E_NAME=c1 $O STRAND_OFI_TUNER_CHANNELS=16K:1,$big" "E2E_NAME=w1 $O STRAND_OFI_TUNER_CHANNELS=64K:1,$big" \
  "E2E_NAME=w2 $O STRAND_OFI_TUNER_CHANNELS=16K:1,64K:2,$big" "E2E_NAME=l1 $O STRAND_OFI_TUNER_CHANNELS=16K:1,64K:1:ll,$big"
python3 tests/e2e/runs/paired_table.py "$D/n4"
tar czf "${OUT:-build-e2e}/ofi10.tgz" -C build-e2e ofi10
