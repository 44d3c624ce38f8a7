#!/usr/bin/env bash
# GPU memory through softverbs and strand-ib, on a GPU machine (not CI: there the same test exits
# 77). Uses the binaries tests/e2e/carry_softverbs.sh copied from a build with tests on (the GPU
# machines have no rdma-core headers, so softverbs and strand-ib do not build there):
#   1. sv_gpu_test: softverbs regions in CUDA device memory (one from its dma-buf), every
#      operation checked byte for byte (tests/softverbs/tests/sv_gpu_test.c), then sv_stress_test
#      with its target region in GPU memory (RC order through the GPU staging);
#   2. strand-conform against strand-ib over softverbs, the checks that use CUDA memory:
#      reg.cuda and reg.dmabuf (strand-ib must claim NCCL_PTR_CUDA and NCCL_PTR_DMABUF here),
#      xfer.iflush, rma.cuda-window, and the rest of reg.* beside them.
#   3. with --nccl: real NCCL through strand-ib over softverbs with GPUDirect
#      (tests/e2e/run_e2e.sh ib-check: correct results and `via NET/strand-ib/0/GDRDMA`).
# Exit 0 = all passed; 1 = a failure (printed); 2 = missing pieces.
#   tests/softverbs/gpu_check.sh [--nccl] [CARRY_DIR]   (default .e2e-carry-softverbs)
set -uo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
nccl=0
if [[ ${1:-} == --nccl ]]; then nccl=1; shift; fi
dir=$(cd "${1:-$root/.e2e-carry-softverbs}" 2>/dev/null && pwd) || {
  echo "no carry directory ${1:-$root/.e2e-carry-softverbs} (run tests/e2e/carry_softverbs.sh where it builds)" >&2
  exit 2
}
for f in libibverbs.so.1 libnccl-net-strand-ib.so sv_gpu_test strand-conform; do
  [[ -e $dir/$f ]] || { echo "$dir/$f missing (tests/e2e/carry_softverbs.sh copies it from a build with tests on)" >&2; exit 2; }
done
nvidia-smi -L 2>/dev/null | head -2
orig_ld=${LD_LIBRARY_PATH:-}
export LD_LIBRARY_PATH=$dir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export SOFTVERBS_NDEVS=1 NCCL_IB_HCA=sv STRAND_IB_CONNECT_TIMEOUT_MS=3000
rc=0

echo "== 1. softverbs with GPU memory (sv_gpu_test)"
timeout 120 "$dir/sv_gpu_test"
r=$?
if (( r == 77 )); then echo "FAIL: sv_gpu_test found no usable GPU (this script is for GPU machines)"; rc=1
elif (( r != 0 )); then echo "FAIL: sv_gpu_test exited $r"; rc=1; fi

if [[ -x $dir/sv_stress_test ]]; then
  echo "== 1b. softverbs randomized order check with the target region in GPU memory"
  SV_STRESS_GPU=1 timeout 180 "$dir/sv_stress_test" 3000 || { echo "FAIL: sv_stress_test (SV_STRESS_GPU=1)"; rc=1; }
fi

echo "== 2. strand-conform: strand-ib over softverbs, the CUDA-memory checks"
out=$(timeout 300 "$dir/strand-conform" run --quick --only 'reg.*,xfer.iflush,rma.cuda-window' \
        "$dir/libnccl-net-strand-ib.so" 2>&1)
r=$?
echo "$out"
(( r == 0 )) || { echo "FAIL: strand-conform exited $r"; rc=1; }
row() { grep -E "^[A-Z]+ +v[0-9]+ +$1 " <<<"$out" | awk '{print $1}' | head -1; }
[[ $(row reg.cuda) == PASS ]] || { echo "FAIL: reg.cuda did not pass (strand-ib must claim NCCL_PTR_CUDA over softverbs with a GPU)"; rc=1; }
case $(row reg.dmabuf) in
  PASS) ;;
  SKIP) if grep -A1 -E '^SKIP +v[0-9]+ +reg.dmabuf ' <<<"$out" | grep -q 'cuMemGetHandleForAddressRange'; then
          echo "note: reg.dmabuf skipped: this CUDA driver exports no dma-buf (sv_gpu_test said so too)"
        else
          echo "FAIL: reg.dmabuf skipped for a reason other than the driver's dma-buf support"; rc=1
        fi ;;
  *) echo "FAIL: reg.dmabuf did not pass"; rc=1 ;;
esac
for id in xfer.iflush rma.cuda-window; do
  [[ $(row "$id") == PASS ]] || { echo "FAIL: $id did not pass"; rc=1; }
done
if (( nccl )); then
  echo "== 3. real NCCL through strand-ib over softverbs with GPUDirect (run_e2e.sh ib-check)"
  # run_e2e.sh sets the softverbs variables per launch itself (its reference run must not get them)
  env -u SOFTVERBS_NDEVS -u NCCL_IB_HCA -u STRAND_IB_CONNECT_TIMEOUT_MS LD_LIBRARY_PATH="$orig_ld" \
    E2E_SOFTVERBS_DIR="$dir" "$root/tests/e2e/run_e2e.sh" ib-check || { echo "FAIL: run_e2e.sh ib-check"; rc=1; }
fi
(( rc == 0 )) && echo "PASS: GPU memory through softverbs and strand-ib"
exit $rc
