#!/usr/bin/env bash
# Issue 26 item 2, 2026-11-28 (session 12), after ofi8-10.sh (4 x H200: strand-ofi at 16 B 0.76x
# the built-in Socket default, 4.6 us of a 16-byte send inside isend, through ofi_rxm to tcp;
# 128 KiB-2 MiB 0.84-0.93x): libfabric 1.17's `net` provider, a native TCP RDM endpoint without the
# ofi_rxm layer (protocol FI_PROTO_XNET; libfabric 1.18 ships it as `tcp`), against tcp;ofi_rxm
# and the built-in, paired at 4 ranks and then at 2. Host only on the dev VM it had 8-byte
# latency 5.3 us against rxm's 5.9 (`strand-conform perf`). Needs .e2e-carry; 2 GPUs at least.
set -u
cd "$(dirname "$0")/../../.." || exit 1
. tests/e2e/runs/paired.sh
paired_begin ofi11 2
N="NCCL_NET_PLUGIN=strand-ofi FI_PROVIDER=net"
# Correctness first: NCCL's --check suite through strand-ofi on `net` (the first rank count only).
CUDA_VISIBLE_DEVICES=$(seq -s, 0 $(($(gpu_count) >= 4 ? 3 : 1))) NRANKS=$(($(gpu_count) >= 4 ? 4 : 2)) \
  E2E_FI_PROVIDER=net timeout 150 tests/e2e/run_e2e.sh ofi-check 2>&1 | grep -E 'no wrong|FAIL|WRONG|using libfabric|correctness' | head -8
if [ "$(gpu_count)" -ge 4 ]; then
  E2E_SIZES=${OFI11_SIZES4:-16,1K,8K,64K,128K,2M,16M,128M} paired_rounds "$D/n4" 4 8 "${OFI_BUDGET4_S:-200}" \
    "$B" "E2E_NAME=ofi $O" "E2E_NAME=net $N"
  python3 tests/e2e/runs/paired_table.py "$D/n4"
fi
E2E_SIZES=${OFI11_SIZES2:-8,128,64K,256K,1M,16M,128M} paired_rounds "$D/n2" 2 8 "${OFI_BUDGET2_S:-120}" \
  "$B" "E2E_NAME=ofi $O" "E2E_NAME=net $N"
python3 tests/e2e/runs/paired_table.py "$D/n2"
grep -h 'using libfabric' build-e2e/log.sweep.rank0 2>/dev/null | sed 's/.*NCCL INFO //' | sort -u | head -3
tar czf "${OUT:-build-e2e}/ofi11.tgz" -C build-e2e ofi11
