#!/usr/bin/env bash
# Issue 26 item 2, 2026-11-28 (session 12), after ofi11.sh (4 x H200, 8 paired rounds): libfabric's
# `net` provider (native TCP RDM, no ofi_rxm) beat tcp;ofi_rxm at every size to 16 MiB (4 ranks:
# 16 B 0.91x vs 0.80x the built-in, 128 KiB 1.05x vs 0.86x) but lost at 128 MiB (0.85x vs 1.40x).
# What holds `net` back at 128 MiB: its own auto-progress thread beside strand-ofi's rail threads
# (FI_NET_DISABLE_AUTO_PROGRESS=1), its 4 saved unexpected messages per connection before it stops
# reading the socket (FI_NET_MAX_SAVED=64), strand-ofi's 4 rails (STRAND_OFI_RAILS=1), paired at 4
# ranks, then the large sizes at 2. Needs .e2e-carry and 4 GPUs.
set -u
cd "$(dirname "$0")/../../.." || exit 1
. tests/e2e/runs/paired.sh
paired_begin ofi12 4
N="NCCL_NET_PLUGIN=strand-ofi FI_PROVIDER=net"
CFGS=("$B" "E2E_NAME=ofi $O" "E2E_NAME=net $N" "E2E_NAME=nap $N FI_NET_DISABLE_AUTO_PROGRESS=1"
      "E2E_NAME=sav $N FI_NET_MAX_SAVED=64" "E2E_NAME=r1 $N STRAND_OFI_RAILS=1")
E2E_SIZES=${OFI12_SIZES4:-16,128K,2M,16M,128M} paired_rounds "$D/n4" 4 8 "${OFI_BUDGET4_S:-200}" "${CFGS[@]}"
python3 tests/e2e/runs/paired_table.py "$D/n4"
E2E_SIZES=${OFI12_SIZES2:-1M,128M} paired_rounds "$D/n2" 2 8 "${OFI_BUDGET2_S:-90}" "${CFGS[@]}"
python3 tests/e2e/runs/paired_table.py "$D/n2"
tar czf "${OUT:-build-e2e}/ofi12.tgz" -C build-e2e ofi12
