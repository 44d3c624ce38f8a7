#!/usr/bin/env bash
# Issue 26 item 2, 2026-11-28 (session 12), after ofi11-13.sh: at 4 ranks strand-ofi on tcp;ofi_rxm
# stays 0.82-0.93x the built-in at 128 KiB-2 MiB, where libfabric's `net` (no rxm: a message moves
# straight from the user's buffer) is 0.96-1.05x. strand-ofi sets ofi_rxm's eager limit to 512 KiB
# (FI_OFI_RXM_EAGER_LIMIT, decided at 2 ranks), so 128-512 KiB go eagerly, cut into 16 KiB bounce
# buffers and copied at both ends. Paired at 4 ranks: the 64 KiB and 16 KiB (libfabric's own)
# eager limits, which send those sizes by rendezvous instead, against the default and `net`.
# Needs .e2e-carry and 4 GPUs.
set -u
cd "$(dirname "$0")/../../.." || exit 1
. tests/e2e/runs/paired.sh
paired_begin ofi14 4
CFGS=("$B" "E2E_NAME=ofi $O" "E2E_NAME=e64 $O FI_OFI_RXM_EAGER_LIMIT=65536"
      "E2E_NAME=e16 $O FI_OFI_RXM_EAGER_LIMIT=16384" "E2E_NAME=net NCCL_NET_PLUGIN=strand-ofi FI_PROVIDER=net")
E2E_SIZES=${OFI14_SIZES:-128K,512K,2M} paired_rounds "$D/n4" 4 10 "${OFI_BUDGET_S:-170}" "${CFGS[@]}"
python3 tests/e2e/runs/paired_table.py "$D/n4"
tar czf "${OUT:-build-e2e}/ofi14.tgz" -C build-e2e ofi14
