#!/usr/bin/env bash
# gin_proxy and a kernel waiting for its signal (one GPU, no NCCL): test_gin_kernel_wait (through
# gin_proxy) and ctx_probe.c (can a context of its own reach the window), with the driver's
# hardware queues at their default (8), forced into one, and at 32 (GQ_CONFIGS below). Writes
# $OUT/gin_queue.txt line by line. On a GPU machine: tests/e2e/runs/gin_queue.sh
set -u
root=$(cd "$(dirname "$0")/../../.." && pwd)
OUT=${OUT:-/tmp}
build=${E2E_BUILD:-$root/build-e2e}
log=$OUT/gin_queue.txt
if command -v meson >/dev/null 2>&1; then meson=(meson); else meson=(python3 -m mesonbuild.mesonmain); fi
[ -f "$build/build.ninja" ] || "${meson[@]}" setup "$build" "$root" -Dtests=false -Dbuildtype=release >/dev/null || exit 1
"${meson[@]}" compile -C "$build" >/dev/null || exit 1
cflags=(-std=c11 -O2 -D_GNU_SOURCE -Wall -Wextra -I"$root/plugin_api/include" -I"$root/gin_proxy/include"
        -I"$root/tests/common")
gcc "${cflags[@]}" "$root/gin_proxy/tests/test_gin_kernel_wait.c" "$root/tests/common/plugin_test.c" \
  "$build/gin_proxy/libstrand-gin-proxy.a" "$build/plugin_api/libstrand-sdk.a" -ldl -lpthread -lm \
  -o "$build/test_gin_kernel_wait" || exit 1
gcc "${cflags[@]}" "$root/tests/e2e/runs/ctx_probe.c" "$root/tests/common/plugin_test.c" \
  "$build/plugin_api/libstrand-sdk.a" -ldl -lpthread -o "$build/ctx_probe" || exit 1
so=$build/net_socket/libnccl-net-strand-socket.so
echo "# $(date -u +%FT%TZ) $(hostname), $(nvidia-smi -L | head -1)" >>"$log"
# GQ_PROBE=0: the test only. GQ_CONFIGS: configurations separated by ';', each
# "CUDA_DEVICE_MAX_CONNECTIONS STRAND_GIN_CUDA_CONTEXT" ('-' = unset). The default set: the
# driver's default, forced sharing with gin_proxy's default (auto: a context of its own), forced
# sharing in the windows' context (the broken case: must fail), and 32 queues.
IFS=';' read -r -a configs <<<"${GQ_CONFIGS:-- -;1 -;1 window;32 -}"
for cfg in "${configs[@]}"; do
  read -r mc mode <<<"$cfg"
  e=()
  [ "$mc" != - ] && e+=(CUDA_DEVICE_MAX_CONNECTIONS=$mc)
  [ "$mode" != - ] && e+=(STRAND_GIN_CUDA_CONTEXT=$mode)
  if [ "${GQ_PROBE:-1}" = 1 ] && [ "$mode" = - ]; then
    env "${e[@]}" timeout 40 stdbuf -oL "$build/ctx_probe" >>"$log" 2>&1 || echo "ctx_probe ${e[*]}: rc $?" >>"$log"
  fi
  env "${e[@]}" NCCL_DEBUG=INFO timeout 90 stdbuf -oL "$build/test_gin_kernel_wait" "$so" ${GQ_ROUNDS:-4} >>"$log" 2>&1 \
    || echo "test_gin_kernel_wait ${e[*]}: rc $?" >>"$log"
done
# GQ_BENCH=1: then gin_proxy's GPU-window test (2 and 4 ranks) and gp-bench with GPU windows, in the
# windows' context and in one of gin_proxy's own ($OUT/regress.txt, $OUT/bench.txt)
[ "${GQ_BENCH:-0}" = 1 ] || exit 0
libs=("$root/tests/common/plugin_test.c" "$build/gin_proxy/libstrand-gin-proxy.a" "$build/plugin_api/libstrand-sdk.a"
      -ldl -lpthread -lm)
gcc "${cflags[@]}" "$root/gin_proxy/tests/test_gin_proxy.c" "${libs[@]}" -o "$build/test_gin_proxy" || exit 1
gcc "${cflags[@]}" "$root/gin_proxy/bench/gp_bench.c" "${libs[@]}" -o "$build/gp-bench" || exit 1
for m in window own; do
  for n in 2 4; do
    echo "## test_gin_proxy gpu $n ranks, STRAND_GIN_CUDA_CONTEXT=$m" >>"$OUT/regress.txt"
    STRAND_GIN_CUDA_CONTEXT=$m timeout 120 "$build/test_gin_proxy" "$so" $n gpu >"$OUT/tgp.$m.$n.log" 2>&1
    echo "rc $?" >>"$OUT/regress.txt"
    tail -1 "$OUT/tgp.$m.$n.log" >>"$OUT/regress.txt"
  done
done
for m in window own; do
  echo "## gp-bench gpu, STRAND_GIN_CUDA_CONTEXT=$m" >>"$OUT/bench.txt"
  STRAND_GIN_CUDA_CONTEXT=$m timeout 150 stdbuf -oL "$build/gp-bench" "$so" gpu 2>&1 | stdbuf -oL grep -v ' INFO ' >>"$OUT/bench.txt"
done
