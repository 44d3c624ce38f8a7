#!/usr/bin/env bash
# Issue 26 item 2, 2026-11-28 (session 12), after ofi12.sh: on libfabric's `net` provider 128 MiB
# stays at 0.83-0.87x the built-in at 4 ranks whatever its own knobs (auto progress, saved
# messages), 0.99x with one rail. The hypothesis: `net` sends a large message eagerly down the one
# TCP connection a pair of endpoints shares, so a message whose receive is not posted yet holds
# back every channel behind it on that rail (ofi_rxm sends a rendezvous request and moves the data
# only once the receive is posted). 8 rails give each of NCCL's 8 channels its own connection:
# net with STRAND_OFI_RAILS=8 (n8), and with 64 saved messages (n8s), against tcp;ofi_rxm and
# the built-in, at 4 ranks and at 2. Needs .e2e-carry and 4 GPUs.
set -u
cd "$(dirname "$0")/../../.." || exit 1
. tests/e2e/runs/paired.sh
paired_begin ofi13 4
N="NCCL_NET_PLUGIN=strand-ofi FI_PROVIDER=net"
CFGS=("$B" "E2E_NAME=ofi $O" "E2E_NAME=net $N" "E2E_NAME=n8 $N STRAND_OFI_RAILS=8"
      "E2E_NAME=n8s $N STRAND_OFI_RAILS=8 FI_NET_MAX_SAVED=64")
E2E_SIZES=${OFI13_SIZES4:-16,2M,16M,128M} paired_rounds "$D/n4" 4 8 "${OFI_BUDGET4_S:-170}" "${CFGS[@]}"
python3 tests/e2e/runs/paired_table.py "$D/n4"
E2E_SIZES=${OFI13_SIZES2:-1M,128M} paired_rounds "$D/n2" 2 8 "${OFI_BUDGET2_S:-70}" "${CFGS[@]}"
python3 tests/e2e/runs/paired_table.py "$D/n2"
tar czf "${OUT:-build-e2e}/ofi13.tgz" -C build-e2e ofi13
