#!/usr/bin/env bash
# Real-NCCL end-to-end runs of strand-socket (not in CI). One process per GPU, each with its own
# NCCL_HOSTID, so NCCL treats the GPUs as separate nodes and all traffic crosses the network.
#
#   tests/e2e/run_e2e.sh check            build, then correctness checks through strand-socket
#                                         (NCCL_DEBUG=INFO lines showing the plugin in use)
#   tests/e2e/run_e2e.sh bench            the three-way all-reduce sweep, 8 B .. 1 GiB, one run:
#                                           1. NCCL built-in Socket, defaults
#                                           2. NCCL built-in Socket, best hand tuning
#                                           3. strand-socket, defaults
#   tests/e2e/run_e2e.sh sweep 'ENV..'... strand-socket all-reduce at a few sizes (E2E_SIZES) for
#                                         each set of extra variables (tuning experiments)
#   tests/e2e/run_e2e.sh base             the built-in Socket (defaults, tuned) at E2E_SIZES
#
# Chart of a sweep (bench, sweep or base; one line per configuration, busbw and time against size):
#   tests/e2e/run_e2e.sh bench | tee bench.txt && tests/e2e/sweep_chart.py -o bench.svg bench.txt
#
# Environment: NCCL_HOME (include/ + lib/) or pkg-config nccl or the nvidia-nccl Python wheel;
# CUDA_HOME (default /usr/local/cuda); NRANKS (default: number of GPUs, at most 8);
# E2E_BUILD (default build-e2e); E2E_MAXBYTES (default 1G).
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
build=${E2E_BUILD:-$root/build-e2e}
mode=${1:-check}
shift || true
mkdir -p "$build"

# ---- locate NCCL and CUDA ----
if [[ -n "${NCCL_HOME:-}" ]]; then
  nccl_inc=$NCCL_HOME/include nccl_lib=$NCCL_HOME/lib
elif pkg-config --exists nccl 2>/dev/null; then
  nccl_inc=$(pkg-config --variable=includedir nccl) nccl_lib=$(pkg-config --variable=libdir nccl)
else
  d=$(python3 -c "import nvidia.nccl as m; print(list(m.__path__)[0])")
  nccl_inc=$d/include nccl_lib=$d/lib
fi
cuda=${CUDA_HOME:-/usr/local/cuda}
cudart_dir=$cuda/lib64
if ! ls "$cudart_dir"/libcudart.so* >/dev/null 2>&1; then
  cudart_dir=$(python3 -c "import nvidia.cuda_runtime as m; print(list(m.__path__)[0])")/lib
fi
cudart=$(ls "$cudart_dir"/libcudart.so* | head -1)
nccl_so=$(ls "$nccl_lib"/libnccl.so* | head -1)
echo "# NCCL: $nccl_so ($(grep -m1 'define NCCL_VERSION_CODE' "$nccl_inc/nccl.h" | awk '{print $3}'))"

# ---- build the plugin and the driver ----
if [[ -z "${CC:-}" ]]; then
  for c in gcc cc clang /usr/bin/gcc-* /usr/local/cuda/bin/nvcc; do
    if command -v "$c" >/dev/null 2>&1; then CC=$c; break; fi
  done
fi
export CC
"$root/tests/e2e/build_on_device.sh" "$build" >/dev/null
$CC -std=c11 -O2 -D_GNU_SOURCE -Wall -Wextra -I"$nccl_inc" -I"$cuda/include" \
  "$root/tests/e2e/nccl_e2e.c" -o "$build/nccl_e2e" \
  "$nccl_so" "$cudart" -Wl,-rpath,"$nccl_lib" -Wl,-rpath,"$cudart_dir"

ngpu=$(nvidia-smi -L | wc -l)
nranks=${NRANKS:-$(( ngpu < 8 ? ngpu : 8 ))}
maxbytes=${E2E_MAXBYTES:-1G}
export NCCL_NVLS_ENABLE=0

# launch TAG "ENV ASSIGNMENTS" DRIVER-ARGS...: all ranks at once; rank 0's output to stdout.
launch() {
  local tag=$1 envs=$2
  shift 2
  local idf="$build/id.$tag.$$"
  rm -f "$idf"
  local pids=()
  for ((r = nranks - 1; r >= 0; r--)); do
    local host=strand-e2e-node-$r
    env NCCL_HOSTID="$host" $envs timeout 540 "$build/nccl_e2e" --rank $r --nranks "$nranks" \
      --id-file "$idf" --tag "$tag" "$@" >"$build/log.$tag.rank$r" 2>&1 &
    pids+=($!)
  done
  local rc=0
  for p in "${pids[@]}"; do wait "$p" || rc=1; done
  grep -v 'NCCL INFO' "$build/log.$tag.rank0" || true
  for ((r = 1; r < nranks; r++)); do
    grep -E 'rank [0-9]+: .*(PASS|FAIL|WRONG)|failed' "$build/log.$tag.rank$r" || true
  done
  return $rc
}

strand_env="NCCL_NET_PLUGIN=strand-socket LD_LIBRARY_PATH=$build:${LD_LIBRARY_PATH:-}"
builtin_env="NCCL_NET=Socket"
tuned_env="NCCL_NET=Socket NCCL_SOCKET_NTHREADS=4 NCCL_NSOCKS_PERTHREAD=4 NCCL_MIN_NCHANNELS=8"

case "$mode" in
  check)
    echo "# $(date -u +%FT%TZ) $(hostname): correctness through strand-socket, $nranks ranks"
    launch strand-check "$strand_env NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET,ENV" --check
    echo "# lines proving the plugin is in use:"
    grep -hE 'NET/strand-socket|Using network|NET/Plugin|via NET' "$build/log.strand-check.rank0" | head -12
    ;;
  bench)
    echo "# $(date -u +%FT%TZ) $(hostname): all-reduce sweep 8 B .. $maxbytes, $nranks ranks"
    launch builtin-default "$builtin_env" --perf allreduce --minbytes 8 --maxbytes "$maxbytes"
    launch builtin-tuned "$tuned_env" --perf allreduce --minbytes 8 --maxbytes "$maxbytes"
    launch strand-socket "$strand_env NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET" \
      --perf allreduce --minbytes 8 --maxbytes "$maxbytes"
    grep -hE 'NET/strand-socket : (dev|using)|Using network' \
      "$build/log.strand-socket.rank0" | head -5
    ;;
  sweep)
    for extra in "$@"; do
      launch "sweep" "$strand_env $extra" --perf allreduce --sizes "${E2E_SIZES:-8K,1M,16M,128M,1G}" \
        --tag "strand $extra"
    done
    ;;
  base)
    launch builtin-default "$builtin_env" --perf allreduce --sizes "${E2E_SIZES:-8K,1M,16M,128M,1G}"
    launch builtin-tuned "$tuned_env" --perf allreduce --sizes "${E2E_SIZES:-8K,1M,16M,128M,1G}"
    ;;
  *)
    echo "usage: $0 check|bench|sweep" >&2
    exit 2
    ;;
esac
