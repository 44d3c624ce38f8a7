#!/usr/bin/env bash
# Builds libnccl-net-strand-socket.so with a plain compiler command line, for machines without
# meson (the GPU machines). Same sources, flags and version script as the meson build.
#   tests/e2e/build_on_device.sh [OUTDIR]      (default: build-e2e)
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
out=${1:-$root/build-e2e}
mkdir -p "$out"
CC=${CC:-gcc}
# Every SDK source, every net_socket source and the collnet_stub sources, so a file added to any
# of them is picked up without editing this script. strand-socket links collnet_stub (a software
# CollNet, docs/plugins/collnet.md) and so exports ncclCollNetPlugin_v6..v12 as in the meson build
# with -Dcollnet_stub=true (the default); STRAND_COLLNET_STUB=0 builds it without.
collnet=${STRAND_COLLNET_STUB:-1}
sdk_srcs=()
for f in "$root"/plugin_api/src/*.c; do
  [[ $collnet == 1 || $f != */export_collnet.c ]] && sdk_srcs+=("$f")
done
stub_srcs=()
[[ $collnet == 1 ]] && stub_srcs=("$root"/collnet_stub/cs_*.c)
$CC -std=c11 -O2 -g -fPIC -shared -D_GNU_SOURCE -Wall -Wextra -fvisibility=hidden \
  -DSTRAND_COLLNET_STUB_ENABLED="$collnet" \
  -I"$root/plugin_api/include" -I"$root/plugin_api/src" -I"$root/collnet_stub/include" \
  "${sdk_srcs[@]}" "$root"/net_socket/sk_*.c "${stub_srcs[@]}" \
  -Wl,--version-script="$root/plugin_api/src/plugin.map" -Wl,--no-undefined \
  -lpthread -ldl -lm -o "$out/libnccl-net-strand-socket.so"
echo "built $out/libnccl-net-strand-socket.so"
