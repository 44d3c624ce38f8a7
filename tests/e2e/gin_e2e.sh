#!/usr/bin/env bash
# NCCL's device API (GIN) through a Strand plugin's one-sided export, on the GPU machines (not CI).
#
#   tests/e2e/gin_e2e.sh [PLUGIN]        PLUGIN: socket (default), ofi or ib
#   tests/e2e/gin_e2e.sh PLUGIN a2a      gin_a2a_bench.cu only: a device-API all-to-all (GIN puts) vs
#                                        ncclAlltoAll through PLUGIN and NCCL's built-in Socket
#   tests/e2e/gin_e2e.sh PLUGIN bench    gp-bench only (gin_proxy/bench/gp_bench.c): one-sided put
#                                        bandwidth and put+signal round trip beside the net's own
#                                        send/recv, host windows and GPU windows (docs/benchmarks/gin.md)
#
# 1. builds the plugins with the project's meson build (release, tests off: one build definition);
# 2. builds and runs gin_proxy's own test with every window in GPU memory (test_gin_proxy ... gpu:
#    puts, signals, gets and flushes between processes on GPU 0, the CUDA driver loaded at run time);
# 3. builds NCCL's own GIN examples (examples/06_device_api/02_gin_alltoall_pure and
#    03_gin_alltoall_hybrid, carried with tests/e2e/carry_nccl_examples.sh into .e2e-carry-nccl/TAG;
#    E2E_NCCL_TAG, default: the tag matching the NCCL found) against the NCCL found, and runs each
#    with one thread per GPU (the examples' own launcher; NTHREADS = the GPU count) through the
#    plugin: NCCL_NET_PLUGIN names it, NCCL_DEBUG=INFO lines show which GIN NCCL took, and the
#    example's own verification must print PASSED.
#
# Environment as for run_e2e.sh: NCCL_HOME (include/ + lib/) or pkg-config nccl or the nvidia-nccl
# Python wheel; CUDA_HOME (default /usr/local/cuda); E2E_BUILD (default build-e2e).
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
build=${E2E_BUILD:-$root/build-e2e}
plugin=${1:-socket}
mkdir -p "$build"

# ---- NCCL and CUDA ----
if [[ -n "${NCCL_HOME:-}" ]]; then
  nccl_inc=$NCCL_HOME/include nccl_lib=$NCCL_HOME/lib
elif pkg-config --exists nccl 2>/dev/null; then
  nccl_inc=$(pkg-config --variable=includedir nccl) nccl_lib=$(pkg-config --variable=libdir nccl)
else
  d=$(python3 -c "import nvidia.nccl as m; print(list(m.__path__)[0])")
  nccl_inc=$d/include nccl_lib=$d/lib
fi
cuda=${CUDA_HOME:-/usr/local/cuda}
code=$(grep -m1 'define NCCL_VERSION_CODE' "$nccl_inc/nccl.h" | awk '{print $3}')
echo "# NCCL: $(ls "$nccl_lib"/libnccl.so* | head -1) (version code $code)"
# 22809 -> v2.28.9-1
tag=${E2E_NCCL_TAG:-v$((code / 10000)).$((code / 100 % 100)).$((code % 100))-1}
examples=$root/.e2e-carry-nccl/$tag
[[ -d $examples/makefiles ]] || { echo "gin_e2e: $examples missing: run tests/e2e/carry_nccl_examples.sh NCCL_GIT_DIR $tag on a machine with NCCL's repository and carry .e2e-carry-nccl" >&2; exit 1; }

# ---- plugins (release, tests off) ----
if command -v meson >/dev/null 2>&1; then meson=(meson); else meson=(python3 -m mesonbuild.mesonmain); fi
if [[ ! -f "$build/build.ninja" ]]; then
  "${meson[@]}" setup "$build" "$root" -Dtests=false -Dbuildtype=release >"$build/meson-setup.log" 2>&1 \
    || { cat "$build/meson-setup.log" >&2; exit 1; }
fi
"${meson[@]}" compile -C "$build" >"$build/meson-compile.log" 2>&1 || { tail -40 "$build/meson-compile.log" >&2; exit 1; }
so=$build/net_$plugin/libnccl-net-strand-$plugin.so
[[ -f $so ]] || { echo "gin_e2e: $so was not built (see $build/meson-setup.log)" >&2; exit 1; }
nm -D --defined-only "$so" | grep -q ncclGinPlugin_v11 || { echo "gin_e2e: $so exports no ncclGinPlugin_v11" >&2; exit 1; }
export NCCL_NVLS_ENABLE=0 NCCL_SOCKET_IFNAME=${NCCL_SOCKET_IFNAME:-lo}
rc=0

cc=${CC:-gcc}
sdk_cflags=(-std=c11 -O2 -D_GNU_SOURCE -Wall -Wextra -I"$root/plugin_api/include" -I"$root/gin_proxy/include"
            -I"$root/tests/common")
sdk_libs=("$root/tests/common/plugin_test.c" "$build/gin_proxy/libstrand-gin-proxy.a"
          "$build/plugin_api/libstrand-sdk.a" -ldl -lpthread -lm)
if [[ ${2:-} == bench ]]; then
  $cc "${sdk_cflags[@]}" "$root/gin_proxy/bench/gp_bench.c" "${sdk_libs[@]}" -o "$build/gp-bench"
  echo "# $(date -u +%FT%TZ) $(hostname): gp-bench through $so ($(nproc) cores)"
  "$build/gp-bench" "$so" 2>&1 | grep -v ' INFO '
  "$build/gp-bench" "$so" gpu 2>&1 | grep -v ' INFO '
  exit 0
fi
if [[ ${2:-} == a2a ]]; then
  # an all-to-all written with the device API (GIN through this plugin) beside ncclAlltoAll through
  # this plugin and through NCCL's built-in Socket; P2P/SHM off so that every byte crosses the net
  "$cuda/bin/nvcc" -std=c++17 -O2 -gencode=arch=compute_90,code=sm_90 -I"$nccl_inc" \
    "$root/tests/e2e/gin_a2a_bench.cu" -L"$nccl_lib" -l:libnccl.so.2 -Xlinker -rpath -Xlinker "$nccl_lib" \
    -o "$build/gin-a2a-bench"
  echo "# $(date -u +%FT%TZ) $(hostname): gin_a2a_bench, $(nvidia-smi -L | wc -l) GPUs, $(nproc) cores"
  export NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1
  echo "## GIN all-to-all and ncclAlltoAll through strand-$plugin"
  NCCL_NET_PLUGIN="$so" "$build/gin-a2a-bench" both 2>&1 | grep -v ' INFO ' || rc=1
  echo "## ncclAlltoAll through NCCL's built-in Socket"
  NCCL_NET_PLUGIN=none NCCL_NET=Socket "$build/gin-a2a-bench" coll 2>&1 | grep -v ' INFO ' || rc=1
  exit $rc
fi

# ---- gin_proxy with GPU windows (the meson test needs the tests build; compiled directly here) ----
$cc "${sdk_cflags[@]}" "$root/gin_proxy/tests/test_gin_proxy.c" "${sdk_libs[@]}" -o "$build/test_gin_proxy"
for n in 2 4; do
  echo "## gin_proxy, GPU windows, $n ranks (processes) on GPU 0"
  if ! timeout 120 "$build/test_gin_proxy" "$build/net_socket/libnccl-net-strand-socket.so" $n gpu \
       >"$build/log.gin_proxy.gpu$n" 2>&1; then
    rc=1
    grep -E 'FAIL|CHECK|rank [0-9]' "$build/log.gin_proxy.gpu$n" | head -20
  fi
  tail -1 "$build/log.gin_proxy.gpu$n"
done

# ---- NCCL's own GIN examples ----
home=$build/nccl-home  # the wheel ships libnccl.so.2 only: an include/ + lib/libnccl.so view of it
mkdir -p "$home/lib"
ln -sfn "$nccl_inc" "$home/include"
ln -sf "$(ls "$nccl_lib"/libnccl.so* | head -1)" "$home/lib/libnccl.so"
ln -sf "$(ls "$nccl_lib"/libnccl.so* | head -1)" "$home/lib/libnccl.so.2"
ngpu=$(nvidia-smi -L | wc -l)
mkdir -p "$build/nccl-examples"
rm -rf "$build/nccl-examples/src" && cp -r "$examples" "$build/nccl-examples/src"
# 2.28/2.29: examples/06_device_api/{02_gin_alltoall_pure,03_gin_alltoall_hybrid};
# 2.30: docs/examples/06_device_api/{02_alltoall_gin,03_alltoall_hybrid}/c
mapfile -t exdirs < <(find "$build/nccl-examples/src" -path '*06_device_api/0[23]_*' -name Makefile \
                        -not -path '*/python/*' -printf '%h\n' | sort)
[[ ${#exdirs[@]} -gt 0 ]] || { echo "gin_e2e: no GIN examples under $examples" >&2; exit 1; }
for exdir in "${exdirs[@]}"; do
  ex=$(basename "${exdir%/c}")
  if ! make -s -C "$exdir" NCCL_HOME="$home" CUDA_HOME="$cuda" \
       NVCC_GENCODE="-gencode=arch=compute_90,code=sm_90" >"$build/make.$ex.log" 2>&1; then
    tail -20 "$build/make.$ex.log"; rc=1; continue
  fi
  bin=$(find "$exdir" -maxdepth 1 -type f -perm -u+x | head -1)
  echo "## NCCL $tag $ex through strand-$plugin, $ngpu GPUs (one thread each)"
  log=$build/log.gin.$ex
  # line-buffered, so that a run killed by the timeout still shows how far it got; a run still
  # going after the timeout gets its threads' stacks dumped (gdb, when the machine has it)
  NTHREADS=$ngpu NCCL_NET_PLUGIN="$so" NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET \
    stdbuf -oL -eL "$bin" >"$log" 2>&1 &
  pid=$!
  for ((t = 0; t < ${E2E_TIMEOUT:-120}; t++)); do kill -0 $pid 2>/dev/null || break; sleep 1; done
  if kill -0 $pid 2>/dev/null; then
    echo "timed out after ${E2E_TIMEOUT:-120} s"
    command -v gdb >/dev/null && gdb -p $pid -batch -ex 'thread apply all bt 12' >"$log.stacks" 2>&1
    kill -9 $pid; rc=1
  fi
  wait $pid || { echo "exit status $?"; rc=1; }
  grep -aE 'result: |mismatch' "$log" || echo "(no result line)"
  grep -aE 'GIN/Plugin: Assigned|RMA/Plugin: (Loaded|Assigned)|NET/Plugin: Loaded (net|gin)|WARN' "$log" | \
    sed 's/^[^ ]* [^ ]* //' | sort | uniq -c | sort -rn | head -12
  grep -q 'PASSED' "$log" && ! grep -q 'FAILED' "$log" || rc=1
done
exit $rc
