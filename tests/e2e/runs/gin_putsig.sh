#!/usr/bin/env bash
# One GPU wait per put+signal into GPU windows instead of two (gin_putsig.patch: the change), paired
# against the tree without it. One GPU: correctness first (gin_proxy's GPU-window test at 2 and 4
# ranks, test_gin_kernel_wait by queue count), then rounds of gp-bench's 8-byte put+signal round
# trip (no MPS) and the GIN all-to-all through NCCL (gin_a2a_bench, 2 processes under MPS, default
# queues and one queue), both builds in each round in an order that alternates. Writes $OUT/putsig.txt.
#   GPS_BUDGET_S (default 330): no new round starts after it.
set -u
root=$(cd "$(dirname "$0")/../../.." && pwd)
OUT=${OUT:-/tmp}
log=$OUT/putsig.txt
budget=${GPS_BUDGET_S:-330}
say() { echo "$*" | tee -a "$log"; }
if command -v meson >/dev/null 2>&1; then meson=(meson); else meson=(python3 -m mesonbuild.mesonmain); fi

# ---- the two trees: this one (new) and a copy with the change taken out (base) ----
base_src=/tmp/gps-base-src
rm -rf "$base_src" && mkdir -p "$base_src"
(cd "$root" && tar --exclude='./build*' --exclude=./.git --exclude='./.e2e-carry*' -cf - .) | tar -C "$base_src" -xf -
(cd "$base_src" && patch -s -R -p1 <"$root/tests/e2e/runs/gin_putsig.patch") || { say "base: patch -R failed"; exit 1; }
cflags=(-std=c11 -O2 -D_GNU_SOURCE -Wall -Wextra)
for v in base new; do
  src=$root; [ $v = base ] && src=$base_src
  b=/tmp/gps-build-$v
  "${meson[@]}" setup "$b" "$src" -Dtests=false -Dbuildtype=release >/dev/null || exit 1
  "${meson[@]}" compile -C "$b" >/dev/null || exit 1
  inc=(-I"$src/plugin_api/include" -I"$src/gin_proxy/include" -I"$src/tests/common")
  libs=("$src/tests/common/plugin_test.c" "$b/gin_proxy/libstrand-gin-proxy.a" "$b/plugin_api/libstrand-sdk.a"
        -ldl -lpthread -lm)
  for t in gin_proxy/tests/test_gin_proxy gin_proxy/tests/test_gin_kernel_wait gin_proxy/bench/gp_bench; do
    gcc "${cflags[@]}" "${inc[@]}" "$src/$t.c" "${libs[@]}" -o "$b/$(basename $t)" || exit 1
  done
done
d=$(python3 -c "import nvidia.nccl as m; print(list(m.__path__)[0])")
/usr/local/cuda/bin/nvcc -std=c++17 -O2 -gencode=arch=compute_90,code=sm_90 -I"$d/include" \
  "$root/tests/e2e/gin_a2a_bench.cu" -L"$d/lib" -l:libnccl.so.2 -Xlinker -rpath -Xlinker "$d/lib" \
  -o /tmp/gin-a2a-bench || exit 1
so() { echo "/tmp/gps-build-$1/net_socket/libnccl-net-strand-socket.so"; }
say "# $(date -u +%FT%TZ) $(hostname), $(nvidia-smi -L | head -1), $(nproc) cores"

# ---- correctness of the new build ----
for n in 2 4; do
  for m in window own; do
    STRAND_GIN_CUDA_CONTEXT=$m timeout 120 /tmp/gps-build-new/test_gin_proxy "$(so new)" $n gpu >/tmp/tgp.log 2>&1
    say "test_gin_proxy gpu $n ranks, context $m: rc $? ($(tail -1 /tmp/tgp.log))"
  done
done
for mc in - 1; do
  e=(); [ $mc != - ] && e=(CUDA_DEVICE_MAX_CONNECTIONS=$mc)
  env "${e[@]}" timeout 90 /tmp/gps-build-new/test_gin_kernel_wait "$(so new)" 4 >/tmp/tgkw.log 2>&1
  say "test_gin_kernel_wait ${e[*]:-default queues}: rc $?"
  grep -aE '^(round|ok|FAIL)' /tmp/tgkw.log | tee -a "$log"
done

# ---- paired rounds ----
a2a() { # build, extra env...
  local v=$1; shift
  env "$@" A2A_PROCS=2 A2A_MAX_BYTES=1048576 NCCL_NET_PLUGIN="$(so $v)" NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1 \
    NCCL_NVLS_ENABLE=0 NCCL_SOCKET_IFNAME=lo timeout -k 5 90 /tmp/gin-a2a-bench gin 2>&1 | grep -avE ' INFO |^\s*$' |
    awk -v tag="$v ${*:-default}" '/^ *[0-9]+ /{printf "a2a %s %s %s\n", tag, $1, $2}' | tee -a "$log"
}
t0=$SECONDS
for ((r = 1; ; r++)); do
  if ((r > 1 && SECONDS - t0 + (SECONDS - t0) / (r - 1) > budget)); then break; fi
  order="base new"; ((r % 2 == 0)) && order="new base"
  say "## round $r ($order)"
  for v in $order; do
    rt=$(STRAND_GIN_CUDA_CONTEXT=window timeout 150 /tmp/gps-build-$v/gp_bench "$(so $v)" gpu 2>&1 | grep -a '8 B round trip')
    say "gp-bench $v: $rt"
  done
  export CUDA_MPS_PIPE_DIRECTORY=/tmp/gps-mps CUDA_MPS_LOG_DIRECTORY=/tmp/gps-mps-log
  mkdir -p $CUDA_MPS_PIPE_DIRECTORY $CUDA_MPS_LOG_DIRECTORY
  nvidia-cuda-mps-control -d
  for v in $order; do a2a $v; a2a $v CUDA_DEVICE_MAX_CONNECTIONS=1; done
  echo quit | nvidia-cuda-mps-control; sleep 1
  unset CUDA_MPS_PIPE_DIRECTORY CUDA_MPS_LOG_DIRECTORY
done
say "# done $(date -u +%FT%TZ)"
