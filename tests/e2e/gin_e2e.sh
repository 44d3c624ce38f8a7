#!/usr/bin/env bash
# NCCL's device API (GIN) through a Strand plugin's one-sided export, on the GPU machines (not CI).
#
#   tests/e2e/gin_e2e.sh [PLUGIN]        PLUGIN: socket (default), ofi or ib
#   tests/e2e/gin_e2e.sh PLUGIN procs    the same, NCCL's examples as one process per GPU with
#                                        distinct NCCL_HOSTID (MPI=1 against tests/e2e/mini_mpi)
#   tests/e2e/gin_e2e.sh PLUGIN a2a      gin_a2a_bench.cu only: a device-API all-to-all (GIN puts) vs
#                                        ncclAlltoAll through PLUGIN and NCCL's built-in Socket
#   tests/e2e/gin_e2e.sh PLUGIN a2a-procs  the GIN all-to-all as processes (one GPU will do, under MPS)
#                                        with one hardware queue and the default (the mode's comment)
#   tests/e2e/gin_e2e.sh PLUGIN bench    gp-bench only (gin_proxy/bench/gp_bench.c): one-sided put
#                                        bandwidth and put+signal round trip beside the net's own
#                                        send/recv, host windows and GPU windows (docs/benchmarks/gin.md)
#
# 1. builds the plugins with the project's meson build (release, tests off: one build definition);
# 2. builds and runs gin_proxy's own test with every window in GPU memory (test_gin_proxy ... gpu:
#    puts, signals, gets and flushes between processes on GPU 0, the CUDA driver loaded at run time),
#    and test_gin_kernel_wait (a kernel waiting for a signal, one hardware queue or the default);
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
# (checked before the default mode's work starts: the bench and a2a modes do not need the examples)
need_examples() {
  [[ -d $examples/makefiles ]] || { echo "gin_e2e: $examples missing: run tests/e2e/carry_nccl_examples.sh NCCL_GIT_DIR $tag on a machine with NCCL's repository and carry .e2e-carry-nccl" >&2; exit 1; }
}
[[ ${2:-} == bench || ${2:-} == a2a* ]] || need_examples

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
if [[ ${2:-} == a2a* ]]; then
  "$cuda/bin/nvcc" -std=c++17 -O2 -gencode=arch=compute_90,code=sm_90 -I"$nccl_inc" \
    "$root/tests/e2e/gin_a2a_bench.cu" -L"$nccl_lib" -l:libnccl.so.2 -Xlinker -rpath -Xlinker "$nccl_lib" \
    -o "$build/gin-a2a-bench"
  echo "# $(date -u +%FT%TZ) $(hostname): gin_a2a_bench, $(nvidia-smi -L | wc -l) GPUs, $(nproc) cores"
  export NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1
fi
if [[ ${2:-} == a2a ]]; then
  # an all-to-all written with the device API (GIN through this plugin) beside ncclAlltoAll through
  # this plugin and through NCCL's built-in Socket; P2P/SHM off so that every byte crosses the net
  echo "## GIN all-to-all and ncclAlltoAll through strand-$plugin"
  NCCL_NET_PLUGIN="$so" "$build/gin-a2a-bench" both 2>&1 | grep -v ' INFO ' || rc=1
  echo "## ncclAlltoAll through NCCL's built-in Socket"
  NCCL_NET_PLUGIN=none NCCL_NET=Socket "$build/gin-a2a-bench" coll 2>&1 | grep -v ' INFO ' || rc=1
  exit $rc
fi
if [[ ${2:-} == a2a-procs ]]; then
  # the GIN all-to-all with one process per rank (E2E_NRANKS, default 2; one node each by
  # NCCL_HOSTID), on one GPU under CUDA MPS as run_e2e.sh runs ranks, its kernels launched back to
  # back: a kernel waits for its peers' signals while the next is queued behind it. With the
  # driver's hardware queues forced into one, gin_proxy must then move GPU windows in a context of
  # its own (docs/plugins/gin.md, "A shared hardware queue"): the default and one queue must pass,
  # one queue in the windows' context must hang (stopped after E2E_A2A_BOUND_S, default 60 s).
  if (( $(nvidia-smi -L | wc -l) == 1 )); then
    export CUDA_MPS_PIPE_DIRECTORY=$build/mps-pipe CUDA_MPS_LOG_DIRECTORY=$build/mps-log
    mkdir -p "$CUDA_MPS_PIPE_DIRECTORY" "$CUDA_MPS_LOG_DIRECTORY"
    nvidia-cuda-mps-control -d
    trap 'echo quit | nvidia-cuda-mps-control >/dev/null 2>&1 || true' EXIT
  fi
  for cfg in "" "CUDA_DEVICE_MAX_CONNECTIONS=1" "CUDA_DEVICE_MAX_CONNECTIONS=1 STRAND_GIN_CUDA_CONTEXT=window"; do
    want=0 expect="completes"
    [[ $cfg == *window* ]] && want=124 expect="hangs (stopped)"
    echo "## GIN all-to-all, ${E2E_NRANKS:-2} processes: ${cfg:-default hardware queues} (expected: $expect)"
    got=0
    # shellcheck disable=SC2086 # cfg is a list of assignments
    env $cfg A2A_PROCS=${E2E_NRANKS:-2} A2A_MAX_BYTES=${A2A_MAX_BYTES:-1048576} NCCL_NET_PLUGIN="$so" \
      NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET timeout -k 5 "${E2E_A2A_BOUND_S:-60}" \
      "$build/gin-a2a-bench" gin >"$build/log.a2a-procs" 2>&1 || got=$?
    grep -avE ' INFO |^\s*$' "$build/log.a2a-procs" | tail -12 || true
    grep -aE 'GPU windows are moved|GIN/Plugin: Assigned|Loaded gin' "$build/log.a2a-procs" | sed 's/^[^ ]* [^ ]* //' |
      sort | uniq -c | head -4 || true
    if [[ $got != "$want" ]]; then echo "unexpected exit status $got"; rc=1; fi
  done
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

# ---- a kernel waiting for gin_proxy's signal with a launch queued behind it (docs/plugins/gin.md,
# "A shared hardware queue"): must pass with the driver's default queues and with one queue (where
# gin_proxy then moves GPU windows in a context of its own), and must FAIL with one queue shared with
# the windows' context: the test's proof that it catches the hang ----
$cc "${sdk_cflags[@]}" "$root/gin_proxy/tests/test_gin_kernel_wait.c" "${sdk_libs[@]}" -o "$build/test_gin_kernel_wait"
for cfg in "" "CUDA_DEVICE_MAX_CONNECTIONS=1" "CUDA_DEVICE_MAX_CONNECTIONS=1 STRAND_GIN_CUDA_CONTEXT=window"; do
  want=0 expect=ok
  [[ $cfg == *window* ]] && want=1 expect=FAIL
  echo "## gin_proxy and a waiting kernel: ${cfg:-default hardware queues} (expected: $expect)"
  got=0
  # shellcheck disable=SC2086 # cfg is a list of assignments
  env $cfg timeout 90 "$build/test_gin_kernel_wait" "$build/net_socket/libnccl-net-strand-socket.so" 4 \
    >"$build/log.gin_kernel_wait" 2>&1 || got=$?
  grep -E '^round|^FAIL|^ok' "$build/log.gin_kernel_wait" | tail -5 || true
  if [[ $got != "$want" ]]; then echo "unexpected exit status $got"; rc=1; fi
done

# ---- NCCL's own GIN examples ----
home=$build/nccl-home  # the wheel ships libnccl.so.2 only: an include/ + lib/libnccl.so view of it
mkdir -p "$home/lib"
ln -sfn "$nccl_inc" "$home/include"
ln -sf "$(ls "$nccl_lib"/libnccl.so* | head -1)" "$home/lib/libnccl.so"
ln -sf "$(ls "$nccl_lib"/libnccl.so* | head -1)" "$home/lib/libnccl.so.2"
ngpu=${E2E_NGPU:-$(nvidia-smi -L | wc -l)}  # E2E_NGPU=2 on a 4-GPU machine: 2 ranks
mkdir -p "$build/nccl-examples"
rm -rf "$build/nccl-examples/src" && cp -r "$examples" "$build/nccl-examples/src"
# 2.28/2.29: examples/06_device_api/{02_gin_alltoall_pure,03_gin_alltoall_hybrid};
# 2.30: docs/examples/06_device_api/{02_alltoall_gin,03_alltoall_hybrid}/c
mapfile -t exdirs < <(find "$build/nccl-examples/src" -path '*06_device_api/0[23]_*' -name Makefile \
                        -not -path '*/python/*' -printf '%h\n' | sort)
[[ ${#exdirs[@]} -gt 0 ]] || { echo "gin_e2e: no GIN examples under $examples" >&2; exit 1; }
# procs: the examples built with MPI=1 against tests/e2e/mini_mpi (a one-host stand-in for the
# few MPI calls they make), one process per GPU, each with its own NCCL_HOSTID: NCCL sees one node
# per rank, as on a real cluster. threads (default): one process, one thread per GPU, as the
# examples launch themselves without MPI.
launch=threads
if [[ ${2:-} == procs ]]; then
  launch=procs
  mm=$build/mini-mpi
  mkdir -p "$mm/lib" "$mm/bin"
  $cc -std=c11 -O2 -Wall -Wextra -shared -fPIC -I"$root/tests/e2e/mini_mpi" "$root/tests/e2e/mini_mpi/mini_mpi.c" \
    -o "$mm/lib/libmpi.so"
  printf '#!/bin/sh\nexec %s -I%s "$@" -L%s -lmpi -Wl,-rpath,%s\n' "${CXX:-g++}" "$root/tests/e2e/mini_mpi" \
    "$mm/lib" "$mm/lib" >"$mm/bin/mpicxx"
  chmod +x "$mm/bin/mpicxx"
fi

# run_ranks LOG BIN: the example as $launch says; rank 0's output in LOG (others: LOG.rankR).
run_ranks() {
  local log=$1 bin=$2 pids=() r
  # line-buffered, so that a run killed by the timeout still shows how far it got; a run still
  # going after the timeout gets its threads' stacks dumped (gdb, when the machine has it)
  if [[ $launch == threads ]]; then
    NTHREADS=$ngpu NCCL_NET_PLUGIN="$so" NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET \
      stdbuf -oL -eL "$bin" >"$log" 2>&1 &
    pids+=($!)
  else
    # the port: below the ephemeral range (32768+), where no connection's local port can hold it
    local port=$(( 20000 + RANDOM % 12000 ))
    for ((r = ngpu - 1; r >= 0; r--)); do
      local out=$log; (( r )) && out=$log.rank$r
      NCCL_HOSTID="strand-gin-node-$r" MINI_MPI_RANK=$r MINI_MPI_SIZE=$ngpu MINI_MPI_PORT=$port \
        NCCL_NET_PLUGIN="$so" NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET \
        stdbuf -oL -eL "$bin" >"$out" 2>&1 &
      pids+=($!)
    done
  fi
  local t alive
  for ((t = 0; t < ${E2E_TIMEOUT:-120}; t++)); do
    alive=0; for p in "${pids[@]}"; do kill -0 "$p" 2>/dev/null && alive=1; done
    (( alive )) || break
    sleep 1
  done
  if (( alive )); then
    echo "timed out after ${E2E_TIMEOUT:-120} s"
    for p in "${pids[@]}"; do
      kill -0 "$p" 2>/dev/null || continue
      command -v gdb >/dev/null && gdb -p "$p" -batch -ex 'thread apply all bt 12' >"$log.stacks.$p" 2>&1
      kill -9 "$p"
    done
    rc=1
  fi
  for p in "${pids[@]}"; do wait "$p" || { echo "exit status $? (pid $p)"; rc=1; }; done
}

for exdir in "${exdirs[@]}"; do
  ex=$(basename "${exdir%/c}")
  mpi=(); [[ $launch == procs ]] && mpi=(MPI=1 MPICXX="$mm/bin/mpicxx")
  if ! make -s -C "$exdir" NCCL_HOME="$home" CUDA_HOME="$cuda" "${mpi[@]}" \
       NVCC_GENCODE="-gencode=arch=compute_90,code=sm_90" >"$build/make.$ex.log" 2>&1; then
    tail -20 "$build/make.$ex.log"; rc=1; continue
  fi
  bin=$(find "$exdir" -maxdepth 1 -type f -perm -u+x | head -1)
  if [[ $launch == threads ]]; then
    echo "## NCCL $tag $ex through strand-$plugin, $ngpu GPUs (one thread each)"
  else
    echo "## NCCL $tag $ex through strand-$plugin, $ngpu GPUs (one process each, distinct NCCL_HOSTID)"
  fi
  log=$build/log.gin.$launch.$ex
  run_ranks "$log" "$bin"
  grep -aE 'result: |mismatch' "$log" || echo "(no result line)"
  # which plugin NCCL took, how many nodes it saw, and any WARN, over every rank's log
  cat "$log"* 2>/dev/null | grep -aoE 'nNodes [0-9]+' | sort | uniq -c || true
  cat "$log"* 2>/dev/null | grep -aE 'GIN/Plugin: Assigned|RMA/Plugin: (Loaded|Assigned)|NET/Plugin: Loaded (net|gin)|WARN' | \
    sed 's/^[^ ]* [^ ]* //' | sort | uniq -c | sort -rn | head -12 || true
  grep -q 'PASSED' "$log" && ! grep -q 'FAILED' "$log"* || rc=1
done
exit $rc
