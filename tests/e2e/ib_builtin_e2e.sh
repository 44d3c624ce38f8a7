#!/usr/bin/env bash
# NCCL's own IB transport over softverbs, in real NCCL (GPU machines, not CI): two ranks, one per
# GPU, each with its own NCCL_HOSTID (so every byte crosses the network), NCCL_NET=IB on sv0, the
# correctness checks of nccl_e2e.c (--check). Exit 0 when every check passed and NCCL's log shows
# its IB transport on sv0 carrying the channels; 1 otherwise; 2 when it cannot run here.
#
#   sudo tests/e2e/ib_builtin_e2e.sh
#
# Needs root (tests/softverbs/sv-sysfs gives NCCL the /sys/class/infiniband/sv0 entries it reads,
# in a private mount namespace per rank), softverbs' libibverbs.so.1 from
# .e2e-carry-softverbs/ (tests/e2e/carry_softverbs.sh, made where rdma-core's headers exist) or
# E2E_SOFTVERBS_DIR, and two GPUs. The driver is built, and NCCL and CUDA found, by run_e2e.sh
# (`base` at one size: the built-in Socket on 8 bytes, which also shows NCCL works here).
# Host memory: NCCL_NET_GDR_LEVEL=LOC, since softverbs reaches GPU memory only where it emulates
# dma-buf. E2E_IB_ENV adds variables to both ranks (e.g. NCCL_NET_GDR_LEVEL=SYS to try GPUDirect);
# E2E_CHECK_COUNTS replaces the element counts checked; E2E_BUILD as in run_e2e.sh.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
build=${E2E_BUILD:-$root/build-e2e}
sv_dir=${E2E_SOFTVERBS_DIR:-$root/.e2e-carry-softverbs}
svsysfs=$root/tests/softverbs/sv-sysfs

cannot() {
  echo "ib_builtin_e2e: $*" >&2
  exit 2
}
[[ -e $sv_dir/libibverbs.so.1 ]] ||
  cannot "no softverbs libibverbs.so.1 in $sv_dir (tests/e2e/carry_softverbs.sh, then carry it)"
[[ $(id -u) == 0 ]] || cannot "must run as root (sv-sysfs mounts in a private namespace)"
ngpu=$(nvidia-smi -L | wc -l)
((ngpu >= 2)) || cannot "needs two GPUs (one rank per GPU), found $ngpu"

mkdir -p "$build"
echo "# $(date -u +%FT%TZ) $(hostname): building with run_e2e.sh (log: $build/ib-builtin.base.log)"
if ! E2E_SIZES=8 NRANKS=2 E2E_BUILD=$build "$root/tests/e2e/run_e2e.sh" base \
    >"$build/ib-builtin.base.log" 2>&1; then
  tail -20 "$build/ib-builtin.base.log" >&2
  exit 1
fi
grep -m1 '^# NCCL:' "$build/ib-builtin.base.log" || true
"$svsysfs" --ndevs 1 -- sh -c 'echo "# sv0 -> $(readlink -f /sys/class/infiniband/sv0/device)"' ||
  cannot "sv-sysfs failed"

# NCCL_GIN_TYPE=2 (proxy): NCCL 2.28.9 left to choose its GIN type itself dies with SIGSEGV in
# ncclNetInit right after "Initialized NET plugin IB" when no IB device is mlx5 (softverbs has no
# mlx5 provider: "Failed to open mlx5dv symbols"), whether or not NCCL_GIN_ENABLE=0; with the type
# named, NCCL runs (measured on 2 H200s, 2026-11-27). Real mlx5 NICs do not take this path.
envs="NCCL_NET=IB NCCL_NET_PLUGIN=none NCCL_IB_HCA=sv0 NCCL_GIN_TYPE=2 NCCL_NET_GDR_LEVEL=LOC NCCL_NVLS_ENABLE=0
NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET,ENV ${E2E_IB_ENV:-}"
counts=()
[[ -z ${E2E_CHECK_COUNTS:-} ]] || counts=(--check-counts "$E2E_CHECK_COUNTS")
idf=$build/id.ib-builtin.$$
rm -f "$idf"
echo "# NCCL built-in IB over softverbs, 2 ranks (GPU 0 and 1), host memory: ${envs//$'\n'/ }"
pids=()
for r in 1 0; do
  # shellcheck disable=SC2086  # $envs is a list of assignments
  "$svsysfs" --ndevs 1 -- env NCCL_HOSTID="strand-ibb-node-$r" $envs \
    LD_LIBRARY_PATH="$sv_dir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" \
    timeout 540 "$build/nccl_e2e" --rank $r --nranks 2 --id-file "$idf" --tag ib-builtin --check \
    "${counts[@]}" >"$build/log.ib-builtin.rank$r" 2>&1 &
  pids+=($!)
done
rc=0
for p in "${pids[@]}"; do wait "$p" || rc=1; done
rm -f "$idf"

log0=$build/log.ib-builtin.rank0
grep -v 'NCCL INFO' "$log0" || true
grep -E 'rank [0-9]+: .*(PASS|FAIL|WRONG)|failed' "$build/log.ib-builtin.rank1" || true
echo "# NCCL's lines about the transport:"
grep -hE 'NET/IB : Using|Using network|via NET/IB|WARN' "$log0" | head -12 || true
if ! grep -q 'NET/IB : Using \[0\]sv0' "$log0"; then
  echo "FAIL: NCCL's IB transport did not take sv0 (see $log0)"
  rc=1
fi
if ! grep -q 'via NET/IB/0' "$log0"; then
  echo "FAIL: no channel went through NET/IB/0 (see $log0)"
  rc=1
fi
if grep -q 'WRONG' "$log0" "$build/log.ib-builtin.rank1"; then rc=1; fi
if ((rc == 0)); then
  echo "PASS: NCCL built-in IB over softverbs, every check right ($(grep -ho '[0-9]* checks' "$log0" | head -1))"
else
  echo "FAIL: logs in $build/log.ib-builtin.rank0 and .rank1"
fi
exit $rc
