#!/usr/bin/env bash
# strand-ib on a GPU machine without an RDMA NIC runs over tests/softverbs, a user-space
# libibverbs.so.1 (as in CI). The GPU machines have no rdma-core headers, so neither softverbs nor
# strand-ib build there: this copies both from a build of this repository made where they do build
# (./run.sh's build, or any meson build with tests on) into the git-ignored .e2e-carry-softverbs/.
# Name .e2e-carry-softverbs in the `device` tool's carry list; `run_e2e.sh nccl-tests` then adds a
# strand-ib column (strand-ib from the GPU machine's own build when it has one, else this copy).
# Both need only the C library (glibc 2.34 or newer). tests/softverbs/gpu_check.sh uses the same
# directory (the GPU test and strand-conform are copied too when built).
#   tests/e2e/carry_softverbs.sh [BUILD_DIR]     (default: build)
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
b=${1:-$root/build}
sv=$b/tests/softverbs/libstrand-softverbs.so
ib=$b/net_ib/libnccl-net-strand-ib.so
for f in "$sv" "$ib"; do
  [ -f "$f" ] || { echo "$f not built (meson setup $b && ninja -C $b tests/softverbs/libibverbs.so.1 net_ib/libnccl-net-strand-ib.so)" >&2; exit 1; }
done
out=$root/.e2e-carry-softverbs
rm -rf "$out"
mkdir -p "$out"
cp -L "$sv" "$out/libstrand-softverbs.so"
# The names a loader looks for (NCCL and strand-ib dlopen libibverbs.so.1; some try libibverbs.so).
cp "$out/libstrand-softverbs.so" "$out/libibverbs.so.1"  # copies, not links: the carry may drop links
cp "$out/libstrand-softverbs.so" "$out/libibverbs.so"
cp -L "$ib" "$out/"
# softverbs' raw verbs benchmark (tests/softverbs/bench_gpu.sh: the RDMA-write ceiling there)
[[ -f $b/tests/softverbs/sv_bench ]] && cp -L "$b/tests/softverbs/sv_bench" "$out/"
# For tests/softverbs/gpu_check.sh (GPU memory through softverbs and strand-ib), when built: the
# softverbs GPU and stress tests, strand-conform, and the CUDA runtime strand-conform was linked
# with.
gpu_test=$b/tests/softverbs/tests/sv_gpu_test conform=$b/tests/conform/strand-conform
if [[ -f $gpu_test && -f $conform ]]; then
  cp -L "$gpu_test" "$conform" "$out/"
  stress=$b/tests/softverbs/tests/sv_stress_test
  [[ -f $stress ]] && cp -L "$stress" "$out/"
  cudart=$(ldd "$conform" | awk '/libcudart/ {print $3}')
  [[ -n $cudart ]] && cp -L "$cudart" "$out/"
else
  echo "note: $gpu_test or $conform not built (meson tests on): tests/softverbs/gpu_check.sh will lack them" >&2
fi
echo "carried softverbs and strand-ib to $out ($(du -sh "$out" | cut -f1))"
