#!/usr/bin/env bash
# Builds the device_unpack GPU test and benchmark with plain nvcc/cc command lines, for GPU machines
# without meson (same sources as the meson build). Run them afterwards:
#   device_unpack/tests/build_gpu_tests.sh [OUTDIR]        (default: build-gpu-tests)
#   OUTDIR/test_unpack_gpu && compute-sanitizer --tool memcheck OUTDIR/test_unpack_gpu
#   OUTDIR/bench_unpack [--mib N] [--frag BYTES] [--threads T] [--align A]
# NVCC_ARCH (default: native, the GPU of this machine; e.g. sm_90 for H100/H200).
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
out=${1:-$root/build-gpu-tests}
cuda=${CUDA_HOME:-/usr/local/cuda}
nvcc=${NVCC:-$cuda/bin/nvcc}
arch=${NVCC_ARCH:-native}
mkdir -p "$out"
inc=(-I"$root/plugin_api/include" -I"$root/plugin_api/src" -I"$root/device_unpack/include"
     -I"$root/device_unpack/kernels" -I"$root/device_unpack/tests")
objs=()
for f in "$root"/plugin_api/src/log.c "$root"/plugin_api/src/params.c "$root"/device_unpack/unpack_*.c; do
  o="$out/$(basename "${f%.c}").o"
  ${CC:-cc} -std=c11 -O2 -g -D_GNU_SOURCE -Wall -Wextra "${inc[@]}" -c "$f" -o "$o"
  objs+=("$o")
done
for t in test_unpack_gpu bench_unpack; do
  "$nvcc" -O2 -lineinfo -std=c++17 -arch="$arch" "${inc[@]}" "$root/device_unpack/tests/$t.cu" \
    "$root"/device_unpack/kernels/unpack_{compat,fast}.cu "${objs[@]}" -ldl -lpthread -o "$out/$t"
done
echo "built $out/test_unpack_gpu $out/bench_unpack"
