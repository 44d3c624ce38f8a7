#!/usr/bin/env bash
# Issue 26 item 2, 2026-11-28 (session 9): strand-ofi's open choices, measured paired
# (tests/e2e/runs/paired.sh; ratios to the built-in Socket default within each round).
# ofi4.sh left three decisions on unrotated rounds: (1) FI_OFI_RXM_MSG_RX_SIZE=64 (strand-ofi's
# default since the first-use stall was traced) against libfabric's 128 (rx128); (2) all-reduce on
# Tree up to 1 KiB (t1k: 1.09-1.43x at 2 ranks, 0.45-0.72x at 4); (3) at 4 ranks Simple on 2
# channels up to 16 MiB (t16m2: 2-16 MiB 0.91-1.00x from 0.55-0.64x).
# 2 ranks (GPUs 0,1) then, with 4 GPUs, 4 ranks; ~200 s each. Needs .e2e-carry (libfabric).
set -u
cd "$(dirname "$0")/../../.."
. tests/e2e/runs/paired.sh
export NCCL_NVLS_ENABLE=0 PAIRED_REFS=default
B=$PAIRED_BUILTIN
O=$PAIRED_OFI
paired_banner
D=build-e2e/ofi5; rm -rf "$D"
E2E_SIZES=8,128,1K,8K,64K,128K,256K,1M,16M,128M paired_rounds "$D/n2" 2 12 "${OFI_BUDGET_S:-200}" \
  "$B" "E2E_NAME=ofi $O" "E2E_NAME=rx128 $O FI_OFI_RXM_MSG_RX_SIZE=128" \
  "E2E_NAME=t1k $O STRAND_OFI_TUNER_TREE_BYTES=1024"
python3 tests/e2e/runs/paired_table.py "$D/n2"
if [ "$(gpu_count)" -ge 4 ]; then
  E2E_SIZES=16,1K,128K,2M,16M,64M,128M paired_rounds "$D/n4" 4 12 "${OFI_BUDGET_S:-200}" \
    "$B" "E2E_NAME=ofi $O" "E2E_NAME=t16m2 $O STRAND_OFI_TUNER_CHANNELS=16K:0,1M:2:simple,16M:2:simple" \
    "E2E_NAME=t1k $O STRAND_OFI_TUNER_TREE_BYTES=1024"
  python3 tests/e2e/runs/paired_table.py "$D/n4"
fi
grep -h "WARN" "$D"/n*/*.txt | sort | uniq -c | head -5
tar czf "${OUT:-build-e2e}/ofi5.tgz" -C build-e2e ofi5
