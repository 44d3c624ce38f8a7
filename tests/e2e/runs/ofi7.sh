#!/usr/bin/env bash
# Issue 26 item 2, 2026-11-28 (session 10), after ofi6.sh: at 2 ranks strand-ofi stays at 0.92-0.94x
# the built-in Socket default at 64 KiB-1 MiB, where its 2-node bands run Simple on 2 channels.
# Paired: the default bands, NCCL's own choices there (1G:0), and Simple on 4 channels.
set -u
cd "$(dirname "$0")/../../.."
. tests/e2e/runs/paired.sh
paired_begin ofi7
E2E_SIZES=64K,256K,1M paired_rounds "$D/n2" 2 16 "${OFI_BUDGET_S:-120}" "$B" "E2E_NAME=ofi $O" \
  "E2E_NAME=nccl $O STRAND_OFI_TUNER_CHANNELS=1G:0" "E2E_NAME=c4 $O STRAND_OFI_TUNER_CHANNELS=16K:0,1M:4:simple"
python3 tests/e2e/runs/paired_table.py "$D/n2"
tar czf "${OUT:-build-e2e}/ofi7.tgz" -C build-e2e ofi7
