#!/usr/bin/env bash
# Issue 26 item 2, 2026-11-28 (session 11): strand-ofi's defaults (tuner bands from 3 nodes, Tree up
# to 1 KiB at 2 nodes) against the built-in Socket default at 4 ranks, paired rounds — the 4-rank
# sizes left behind in session 9 (16 B 0.84x, 128 KiB 0.87x, 2 MiB 0.85x, measured before those
# defaults were code). Needs .e2e-carry (libfabric) and 4 GPUs (else nothing to do).
set -u
cd "$(dirname "$0")/../../.." || exit 1
. tests/e2e/runs/paired.sh
paired_begin ofi8 4
E2E_SIZES=${OFI8_SIZES:-16,1K,8K,128K,2M,16M,128M} paired_rounds "$D/n4" 4 12 "${OFI_BUDGET_S:-150}" "$B" "E2E_NAME=ofi $O"
python3 tests/e2e/runs/paired_table.py "$D/n4"
grep -h "WARN" "$D"/n*/*.txt | sort | uniq -c | head -5
tar czf "${OUT:-build-e2e}/ofi8.tgz" -C build-e2e ofi8
