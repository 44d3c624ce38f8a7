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
#   tests/e2e/run_e2e.sh ofi-check        correctness checks through strand-ofi (tcp;ofi_rxm, or the
#                                         provider E2E_FI_PROVIDER names; also for bench and ofi-tune)
#   tests/e2e/run_e2e.sh fi-pingpong      libfabric's own fi_pingpong on tcp;ofi_rxm (the ceiling)
# `bench` adds strand-ofi on tcp;ofi_rxm as a fourth configuration when it was built.
#   tests/e2e/run_e2e.sh ofi-tune ['NAME|ENV..'...]  strand-ofi's rails, threads, reported speed and
#                                         tuner against the built-in Socket default: all-reduce at
#                                         E2E_SIZES (default 8 B .. 1 GiB, 9 sizes), E2E_ROUNDS rounds
#                                         (default 3) of every configuration in turn, then one table
#                                         of medians and ratios (tests/e2e/rounds_table.py),
#                                         the channels NCCL opened and strand-ofi's first-use trace
#                                         (STRAND_OFI_SLOW_MS); stops starting launches after
#                                         E2E_BUDGET_S (default 250) s. Arguments replace the
#                                         candidate configurations (built-in and ofi default stay;
#                                         E2E_OFI_TUNED=1 adds the built-in tuned; E2E_KEEP_LOGS=1
#                                         keeps every round's rank logs and TCP counters)
#   tests/e2e/run_e2e.sh unpack           correctness through strand-socket's device-unpack mode
#                                         (STRAND_SOCKET_UNPACK=1 + the NCCL settings it needs,
#                                         docs/plugins/socket.md); fails unless NCCL_DEBUG=INFO shows
#                                         NCCL using the unpack interface. Counts: E2E_CHECK_COUNTS
#                                         (default 0,1,1000,262147,4M,64M; add 256M for 1 GiB floats)
#   tests/e2e/run_e2e.sh unpack-bench     all-reduce 8 B .. E2E_MAXBYTES, the same NCCL settings for
#                                         all three: unpack mode, strand-socket host mode, built-in
#                                         Socket (docs/benchmarks/device-unpack.md)
#   tests/e2e/run_e2e.sh profile ['ENV..'...]  where the time of a small collective goes: for each
#                                         size of E2E_SIZES (default 8,64,1K) and for strand-socket
#                                         (with each set of extra variables) and the built-in Socket,
#                                         one run under NCCL's profiler with proxy_profiler.c: median
#                                         and p90 of every phase of the proxy's send and receive steps
#   tests/e2e/run_e2e.sh ib-check         correctness through strand-ib over tests/softverbs with
#                                         GPUDirect (softverbs moves GPU memory with the CUDA
#                                         driver; strand-ib claims NCCL_PTR_CUDA|DMABUF): fails
#                                         unless NCCL logs `via NET/strand-ib/0/GDRDMA`. Needs
#                                         .e2e-carry-softverbs (carry_softverbs.sh) or
#                                         E2E_SOFTVERBS_DIR; E2E_IB_GDR=0 runs host memory instead
#   tests/e2e/run_e2e.sh nccl-tests       NVIDIA's nccl-tests (all_reduce, all_gather, reduce_scatter,
#                                         alltoall, sendrecv) built from NCCL_TESTS_SRC (default
#                                         .e2e-carry-nccl-tests, carry_nccl_tests.sh) through the
#                                         built-in Socket and every Strand plugin built or carried
#                                         (strand-ib over softverbs: carry_softverbs.sh), one table;
#                                         tests/e2e/nccl_tests.sh has the modes and variables
#
# Chart of a sweep (bench, sweep or base; one line per configuration, busbw and time against size):
#   tests/e2e/run_e2e.sh bench | tee bench.txt && tests/e2e/sweep_chart.py -o bench.svg bench.txt
#
# Environment: NCCL_HOME (include/ + lib/) or pkg-config nccl or the nvidia-nccl Python wheel;
# CUDA_HOME (default /usr/local/cuda); NRANKS (default: number of GPUs, at most 8; 2 on a machine
# with one GPU); E2E_BUILD (default build-e2e); E2E_MAXBYTES (default 1G); E2E_SIZES (comma-separated
# sizes for sweep/base, e.g. 8K,64K,1M); E2E_OP (sweep/base: allreduce, allgather, sendrecv, ...).
#
# One GPU: all ranks share it. Without CUDA MPS two processes on one GPU time-slice and every
# collective takes >= 4.5 ms, which hides the plugin entirely, so on a one-GPU machine the script
# starts an MPS control daemon of its own (pipe and log directories under the build directory) and
# stops it on exit. With several GPUs each rank has its own GPU and MPS is not used.
#
# The plugins are built with the project's meson build (meson and ninja may be Python packages:
# `python3 -m mesonbuild.mesonmain` is used when no `meson` command is on PATH), configured with
# tests off, so there is one build definition.
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

# ---- libfabric carried from a Debian machine (tests/e2e/carry_libfabric.sh), if any ----
carry=$root/.e2e-carry
if [[ -d $carry/lib ]]; then
  export PKG_CONFIG_PATH=$carry/lib/pkgconfig${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}
  export LD_LIBRARY_PATH=$carry/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
  echo "# libfabric from $carry (tests/e2e/carry_libfabric.sh)"
fi

# ---- build the plugin and the driver ----
if [[ -z "${CC:-}" ]]; then
  for c in gcc cc clang /usr/bin/gcc-* /usr/local/cuda/bin/nvcc; do
    if command -v "$c" >/dev/null 2>&1; then CC=$c; break; fi
  done
fi
export CC
if command -v meson >/dev/null 2>&1; then meson=(meson); else meson=(python3 -m mesonbuild.mesonmain); fi
if [[ ! -f "$build/build.ninja" ]]; then
  "${meson[@]}" setup "$build" "$root" -Dtests=false -Dbuildtype=release >"$build/meson-setup.log" 2>&1 \
    || { cat "$build/meson-setup.log" >&2; exit 1; }
fi
"${meson[@]}" compile -C "$build" >"$build/meson-compile.log" 2>&1 \
  || { tail -40 "$build/meson-compile.log" >&2; exit 1; }
plugin_dirs=$build/net_socket
for d in net_ofi net_ib; do [[ -d $build/$d ]] && plugin_dirs=$plugin_dirs:$build/$d; done
$CC -std=c11 -O2 -D_GNU_SOURCE -Wall -Wextra -I"$nccl_inc" -I"$cuda/include" \
  "$root/tests/e2e/nccl_e2e.c" -o "$build/nccl_e2e" \
  "$nccl_so" "$cudart" -Wl,-rpath,"$nccl_lib" -Wl,-rpath,"$cudart_dir"
# The proxy-step profiler (NCCL profiler plugin; needs no NCCL header). CI builds and tests it with
# meson (tests/meson.build, test proxy-profiler); the meson build here has tests off.
$CC -std=c11 -O2 -Wall -Wextra -shared -fPIC -fvisibility=hidden -pthread \
  "$root/tests/e2e/proxy_profiler.c" -o "$build/libnccl-profiler-strand-steps.so"

ngpu=$(nvidia-smi -L | wc -l)
if (( ngpu == 1 )); then nranks=${NRANKS:-2}; else nranks=${NRANKS:-$(( ngpu < 8 ? ngpu : 8 ))}; fi
if (( ngpu == 1 && nranks > 1 )); then
  export CUDA_MPS_PIPE_DIRECTORY=$build/mps-pipe CUDA_MPS_LOG_DIRECTORY=$build/mps-log
  mkdir -p "$CUDA_MPS_PIPE_DIRECTORY" "$CUDA_MPS_LOG_DIRECTORY"
  nvidia-cuda-mps-control -d
  trap 'echo quit | nvidia-cuda-mps-control >/dev/null 2>&1 || true' EXIT
  echo "# one GPU: $nranks ranks share it under CUDA MPS (daemon started by this script)"
fi
maxbytes=${E2E_MAXBYTES:-1G}
# E2E_RANK_WRAP: a command every rank runs under, e.g. "tests/softverbs/sv-sysfs --ndevs 1 --" so
# that NCCL's own IB transport finds softverbs' device in sysfs (docs/benchmarks/ib.md).
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
    # shellcheck disable=SC2086  # E2E_RANK_WRAP is a command prefix, split on purpose
    ${E2E_RANK_WRAP:-} env NCCL_HOSTID="$host" $envs timeout 540 "$build/nccl_e2e" --rank $r --nranks "$nranks" \
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

# attribute TAG REFTAG: a wrong result counts against the plugin only when NCCL's built-in Socket,
# run with the same settings and checks (REFTAG), got that check right. E2E_REF_ENV adds variables
# to the reference run only (for settings the built-in Socket cannot honour, such as a forced
# CollNet algorithm). (The "allgather float count 262147 wrong with every transport" once blamed
# on NCCL here was the driver's own race, fixed in issue 12: inputs staged on the legacy stream,
# read by a collective on a non-blocking stream.)
attribute() {
  local mine ref
  mine=$(grep -ho 'WRONG [^:]*' "$build/log.$1.rank0" | sort -u || true)
  ref=$(grep -ho 'WRONG [^:]*' "$build/log.$2.rank0" | sort -u || true)
  [[ -n $ref ]] && echo "# wrong with the built-in Socket too (not the plugin): ${ref//$'\n'/; }"
  local own
  own=$(comm -23 <(echo "$mine") <(echo "$ref") | grep . || true)
  if [[ -n $own ]]; then
    echo "FAIL: wrong only through the plugin: ${own//$'\n'/; }"
    return 1
  fi
  echo "# no wrong result caused by the plugin ($(grep -ho '[0-9]* checks' "$build/log.$1.rank0" | head -1))"
}

strand_env="NCCL_NET_PLUGIN=strand-socket LD_LIBRARY_PATH=$plugin_dirs:${LD_LIBRARY_PATH:-}"
ofi_env="NCCL_NET_PLUGIN=strand-ofi FI_PROVIDER=${E2E_FI_PROVIDER:-tcp;ofi_rxm} LD_LIBRARY_PATH=$plugin_dirs:${LD_LIBRARY_PATH:-}"
have_ofi=0; [[ -f $build/net_ofi/libnccl-net-strand-ofi.so ]] && have_ofi=1
builtin_env="NCCL_NET=Socket"
tuned_env="NCCL_NET=Socket NCCL_SOCKET_NTHREADS=4 NCCL_NSOCKS_PERTHREAD=4 NCCL_MIN_NCHANNELS=8"
# What the device-unpack mode needs from NCCL: $unpack_nccl_env (the file says why).
. "$root/tests/e2e/unpack_nccl_env.sh"
unpack_env="$strand_env STRAND_SOCKET_UNPACK=1 $unpack_nccl_env"

case "$mode" in
  check)
    echo "# $(date -u +%FT%TZ) $(hostname): correctness through strand-socket, $nranks ranks"
    launch strand-check "$strand_env NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET,ENV" --check || true
    launch builtin-check "$builtin_env ${E2E_REF_ENV:-}" --check >/dev/null || true
    echo "# lines proving the plugin is in use:"
    grep -hE 'NET/strand-socket|Using network|NET/Plugin|via NET' "$build/log.strand-check.rank0" | head -12 || true
    attribute strand-check builtin-check
    ;;
  bench)
    echo "# $(date -u +%FT%TZ) $(hostname): all-reduce sweep 8 B .. $maxbytes, $nranks ranks"
    launch builtin-default "$builtin_env" --perf allreduce --minbytes 8 --maxbytes "$maxbytes"
    launch builtin-tuned "$tuned_env" --perf allreduce --minbytes 8 --maxbytes "$maxbytes"
    launch strand-socket "$strand_env NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET" \
      --perf allreduce --minbytes 8 --maxbytes "$maxbytes"
    grep -hE 'NET/strand-socket : (dev|using)|Using network' \
      "$build/log.strand-socket.rank0" | head -5
    if (( have_ofi )); then
      launch strand-ofi "$ofi_env NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET" \
        --perf allreduce --minbytes 8 --maxbytes "$maxbytes"
      grep -hE 'NET/strand-ofi : |Using network' "$build/log.strand-ofi.rank0" | head -5
    else
      echo "# strand-ofi not built (no libfabric: run tests/e2e/carry_libfabric.sh and carry .e2e-carry)"
    fi
    ;;
  ofi-tune)
    (( have_ofi )) || { echo "strand-ofi not built: no libfabric (tests/e2e/README.md)" >&2; exit 1; }
    t0=$SECONDS
    dbg="NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET"
    o="$ofi_env STRAND_OFI_SLOW_MS=${E2E_SLOW_MS:-5}"
    fast="STRAND_OFI_SPEED_MBPS=100000 STRAND_OFI_TUNER_CHANNELS=${E2E_OFI_BANDS:-16K:0,1M:2:simple}"
    configs=("builtin|$builtin_env" "ofi|$o")
    # E2E_OFI_TUNED=1: the built-in Socket's hand tuning as a third fixed column
    [[ -n ${E2E_OFI_TUNED:-} ]] && configs=("builtin|$builtin_env" "tuned|$tuned_env" "ofi|$o")
    if (( $# == 0 )); then
      configs+=("spd|$o $fast"
        "r4-thr|$o $fast STRAND_OFI_RAILS=4"
        "r4-quiet|$o $fast STRAND_OFI_RAILS=4 STRAND_OFI_RAIL_QUIET_US=10"
        "r4-nothr|$o $fast STRAND_OFI_RAILS=4 STRAND_OFI_RAIL_THREADS=0"
        "r8-thr|$o $fast STRAND_OFI_RAILS=8")
    fi
    for extra in "$@"; do configs+=("${extra%%|*}|$o ${extra#*|}"); done
    sizes=${E2E_SIZES:-8,32,1K,8K,128K,1M,16M,128M,1G}
    res=$build/ofi-tune.$$; mkdir -p "$res"
    echo "# $(date -u +%FT%TZ) $(hostname): ofi-tune, all-reduce at $sizes, $nranks ranks, ${E2E_ROUNDS:-3} rounds"
    names=()
    for cfg in "${configs[@]}"; do
      names+=("${cfg%%|*}")
      echo "#   ${cfg%%|*}: ${cfg#*|}" | sed "s|LD_LIBRARY_PATH=[^ ]* ||"
    done
    for ((round = 1; round <= ${E2E_ROUNDS:-3}; round++)); do
      for cfg in "${configs[@]}"; do
        name=${cfg%%|*}
        if (( SECONDS - t0 > ${E2E_BUDGET_S:-250} )); then
          echo "# budget of ${E2E_BUDGET_S:-250} s spent: round $round of $name and later not run"; break 2
        fi
        ts=$SECONDS
        # E2E_KEEP_LOGS=1: every round's logs of every rank and the kernel's TCP counters around
        # the launch (/proc/net/snmp, netstat: retransmissions, loss probes, drops), for tracing
        # a round that stalled; they go to $OUT/ofi-tune with the rest
        [[ -n ${E2E_KEEP_LOGS:-} ]] && cat /proc/net/snmp /proc/net/netstat >"$res/$round.$name.net0" 2>/dev/null || true
        launch "tune-$name" "${cfg#*|} $dbg" --perf allreduce --sizes "$sizes" --tag "$name" \
          >"$res/$round.$name" 2>&1 || echo "# round $round of $name failed (see $build/log.tune-$name.rank0)"
        if [[ -n ${E2E_KEEP_LOGS:-} ]]; then
          cat /proc/net/snmp /proc/net/netstat >"$res/$round.$name.net1" 2>/dev/null || true
          for ((r = 0; r < nranks; r++)); do cp "$build/log.tune-$name.rank$r" "$res/$round.$name.log$r" || true; done
        fi
        echo "# round $round $name: $((SECONDS - ts)) s"
        if (( round == 1 )); then
          # The channels NCCL opened through the network, and strand-ofi's trace of slow and first
          # completions (the first-use stall), from this configuration's first round.
          nch=$(grep -oE 'Channel [0-9]+/[0-9]+ : [^ ]+ -> [^ ]+ \[send\] via NET' "$build/log.tune-$name.rank0" | sort -u | wc -l || true)
          echo "#   $name: $nch send channel(s) via NET; $(grep -m1 -oE 'tuner \(ncclTunerPlugin_v[0-9]+\): .*' "$build/log.tune-$name.rank0" | grep -v '^$' || echo 'no strand-ofi tuner line')"
          grep -hoE 'trace t=.*first .*' "$build/log.tune-$name.rank0" | head -4 | sed "s/^/#   [$name] /" || true
          grep -hoE 'trace t=.*' "$build/log.tune-$name.rank0" | grep -v ' first ' \
            | head -${E2E_TRACE_LINES:-12} | sed "s/^/#   [$name] /" || true
          grep -h 'WARN' "$build/log.tune-$name.rank0" | head -3 | sed "s/^/#   [$name] /" || true
        fi
      done
    done
    python3 "$root/tests/e2e/rounds_table.py" "$res" "${names[@]}"
    echo "# ofi-tune took $((SECONDS - t0)) s; raw outputs in $res"
    [[ -n ${OUT:-} ]] && cp -r "$res" "$OUT/ofi-tune" && cp "$build"/log.tune-*.rank0 "$OUT/ofi-tune/" 2>/dev/null
    true
    ;;
  ofi-check)
    (( have_ofi )) || { echo "strand-ofi not built: no libfabric (tests/e2e/README.md)" >&2; exit 1; }
    echo "# $(date -u +%FT%TZ) $(hostname): correctness through strand-ofi (${E2E_FI_PROVIDER:-tcp;ofi_rxm}), $nranks ranks"
    launch ofi-check "$ofi_env NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET,ENV" --check || true
    launch builtin-check "$builtin_env ${E2E_REF_ENV:-}" --check >/dev/null || true
    grep -hE 'NET/strand-ofi|Using network|NET/Plugin' "$build/log.ofi-check.rank0" | head -12 || true
    attribute ofi-check builtin-check
    ;;
  fi-pingpong)
    # The provider's own ceiling on this machine: fi_pingpong over tcp;ofi_rxm on loopback.
    pp=$(command -v fi_pingpong || echo "$carry/bin/fi_pingpong")
    [[ -x $pp ]] || { echo "no fi_pingpong (tests/e2e/README.md)" >&2; exit 1; }
    for sz in ${E2E_PP_SIZES:-8 65536 1048576 16777216}; do
      "$pp" -p "tcp;ofi_rxm" -e rdm -S "$sz" -I 200 >"$build/pp.server.$sz" 2>&1 &
      sleep 1
      "$pp" -p "tcp;ofi_rxm" -e rdm -S "$sz" -I 200 127.0.0.1 2>&1 | tail -1
      wait || true
    done
    ;;
  sweep)
    for extra in "$@"; do
      launch "sweep" "$strand_env $extra" --perf "${E2E_OP:-allreduce}" --sizes "${E2E_SIZES:-8K,1M,16M,128M,1G}" \
        --tag "strand $extra"
    done
    ;;
  base)
    launch builtin-default "$builtin_env" --perf "${E2E_OP:-allreduce}" --sizes "${E2E_SIZES:-8K,1M,16M,128M,1G}"
    launch builtin-tuned "$tuned_env" --perf "${E2E_OP:-allreduce}" --sizes "${E2E_SIZES:-8K,1M,16M,128M,1G}"
    ;;
  unpack)
    echo "# $(date -u +%FT%TZ) $(hostname): correctness through strand-socket unpack mode, $nranks ranks"
    rc=0
    launch strand-unpack "$unpack_env NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET,ENV" --check \
      --check-counts "${E2E_CHECK_COUNTS:-0,1,1000,262147,4M,64M}" || true
    launch unpack-builtin-check "$builtin_env $unpack_nccl_env" --check \
      --check-counts "${E2E_CHECK_COUNTS:-0,1,1000,262147,4M,64M}" >/dev/null || true
    attribute strand-unpack unpack-builtin-check || rc=1
    echo "# lines proving the unpack interface is in use:"
    # NCCL's own line ("Using NCCL_NET_DEVICE_UNPACK net plugin version 7" in 2.19-2.30), not
    # the plugin's lines (its parameter dump and arena line also say "unpack").
    if ! grep -h 'NCCL INFO Using NCCL_NET_DEVICE_UNPACK' "$build/log.strand-unpack.rank0" \
        | head -2 | grep .; then
      echo "FAIL: no NCCL INFO line mentions the unpack interface" >&2
      rc=1
    fi
    if ! grep -h 'device_unpack: bounce arena.*mapped pinned' "$build/log.strand-unpack.rank0"; then
      echo "FAIL: the plugin did not set up a GPU-mapped bounce arena (no CUDA context?)" >&2
      rc=1
    fi
    grep -hE 'WARN' "$build/log.strand-unpack.rank0" | head -5 || true
    exit $rc
    ;;
  unpack-bench)
    echo "# $(date -u +%FT%TZ) $(hostname): all-reduce 8 B .. $maxbytes, $nranks ranks, unpack settings for all"
    launch unpack "$unpack_env NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET" \
      --perf allreduce --minbytes 8 --maxbytes "$maxbytes" --tag "strand-socket unpack"
    launch unpack-host "$strand_env $unpack_nccl_env" \
      --perf allreduce --minbytes 8 --maxbytes "$maxbytes" --tag "strand-socket host"
    launch unpack-builtin "$builtin_env $unpack_nccl_env" \
      --perf allreduce --minbytes 8 --maxbytes "$maxbytes" --tag "built-in Socket"
    grep -hE 'NCCL_NET_DEVICE_UNPACK|bounce arena' "$build/log.unpack.rank0" | head -3
    ;;
  profile)
    # One launch per size, so that each summary holds that size's steps (plus the warm-ups and the
    # one-int all-reduce that picks the iteration count, both of the same small kind).
    prof_env="NCCL_PROFILER_PLUGIN=strand-steps LD_LIBRARY_PATH=$build:$plugin_dirs:${LD_LIBRARY_PATH:-}"
    configs=("builtin|$builtin_env")
    if (( $# == 0 )); then configs+=("strand|$strand_env"); fi
    for extra in "$@"; do configs+=("strand $extra|$strand_env $extra"); done
    IFS=, read -r -a sizes <<<"${E2E_SIZES:-8,64,1K}"
    for sz in "${sizes[@]}"; do
      for cfg in "${configs[@]}"; do
        name=${cfg%%|*} envs=${cfg#*|}
        out=$build/profile.out
        rm -f "$out".rank*
        # launch gives every rank the same environment: STRAND_PROFILE_OUT names rank 0's file;
        # the other ranks append to it as well, and only rank 0's lines are printed.
        launch profile "$envs $prof_env STRAND_PROFILE_OUT=$out.rank0" \
          --perf "${E2E_OP:-allreduce}" --sizes "$sz" --tag "profile $name $sz" | grep -v '^#  ' || true
        grep -h ' rank=0/' "$out".rank0 2>/dev/null | sed "s/^/  [$name $sz] /" || true
      done
    done
    ;;
  ib-check)
    # softverbs devices have no PCI path, so NCCL places them at the CPU and its default GDR level
    # (PXB) would keep GPUDirect off whatever the plugin claims: NCCL_NET_GDR_LEVEL=SYS lets it on.
    sv_dir=${E2E_SOFTVERBS_DIR:-$root/.e2e-carry-softverbs}
    [[ -f $sv_dir/libibverbs.so.1 ]] || { echo "no softverbs libibverbs.so.1 in $sv_dir (tests/e2e/carry_softverbs.sh)" >&2; exit 1; }
    ib_dir=$sv_dir; [[ -f $build/net_ib/libnccl-net-strand-ib.so ]] && ib_dir=$build/net_ib
    # NCCL skips the flush of GPU receives on Hopper and later (compute capability >= 9.0):
    # NCCL_NET_FORCE_FLUSH=1 makes it call strand-ib's iflush (an RDMA read of GPU memory) anyway.
    gdr=${E2E_IB_GDR:-1}
    gdr_env="NCCL_NET_GDR_LEVEL=SYS NCCL_NET_FORCE_FLUSH=1"; (( gdr )) || gdr_env="NCCL_NET_GDR_LEVEL=LOC"
    ib_env="NCCL_NET_PLUGIN=strand-ib NCCL_IB_HCA=sv SOFTVERBS_NDEVS=1 $gdr_env LD_LIBRARY_PATH=$sv_dir:$ib_dir:${LD_LIBRARY_PATH:-}"
    echo "# $(date -u +%FT%TZ) $(hostname): correctness through strand-ib over softverbs ($gdr_env), $nranks ranks"
    rc=0
    launch ib-check "$ib_env NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET,ENV,P2P" --check || true
    for ((r = 0; r < nranks; r++)); do  # a rank that died never printed its count of checks
      grep -q ' checks, ' "$build/log.ib-check.rank$r" \
        || { echo "FAIL: rank $r did not finish its checks ($build/log.ib-check.rank$r)" >&2; rc=1; }
    done
    launch builtin-check "$builtin_env ${E2E_REF_ENV:-}" --check >/dev/null || true
    echo "# lines proving the plugin and the memory path in use:"
    grep -hE 'NET/strand-ib|Using network|NET/Plugin|GPU Direct RDMA|DMA-BUF|via NET' \
      "$build/log.ib-check.rank0" | sort -u | head -16 || true
    attribute ib-check builtin-check || rc=1
    if (( gdr )) && ! grep -q 'via NET/strand-ib/[0-9]*/GDRDMA' "$build/log.ib-check.rank0"; then
      echo "FAIL: NCCL did not use GPUDirect through strand-ib (no 'via NET/strand-ib/0/GDRDMA')" >&2
      rc=1
    fi
    exit $rc
    ;;
  nccl-tests)
    # shellcheck source=tests/e2e/nccl_tests.sh
    source "$root/tests/e2e/nccl_tests.sh"
    ;;
  *)
    echo "usage: $0 check|bench|sweep|base|ofi-check|ofi-tune|fi-pingpong|unpack|unpack-bench|profile|ib-check|nccl-tests" >&2
    exit 2
    ;;
esac
