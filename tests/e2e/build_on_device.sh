#!/usr/bin/env bash
# Builds libnccl-net-strand-socket.so with a plain compiler command line, for machines without
# meson (the GPU machines). Same sources, flags and version script as the meson build.
#   tests/e2e/build_on_device.sh [OUTDIR]      (default: build-e2e)
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
out=${1:-$root/build-e2e}
mkdir -p "$out"
CC=${CC:-gcc}
sdk_srcs=()
for f in export_common export_net log params pool socket_addr socket_conn topo; do
  sdk_srcs+=("$root/plugin_api/src/$f.c")
done
$CC -std=c11 -O2 -g -fPIC -shared -D_GNU_SOURCE -Wall -Wextra -fvisibility=hidden \
  -I"$root/plugin_api/include" -I"$root/plugin_api/src" \
  "${sdk_srcs[@]}" "$root"/net_socket/socket_*.c \
  -Wl,--version-script="$root/plugin_api/src/plugin.map" -Wl,--no-undefined \
  -lpthread -ldl -lm -o "$out/libnccl-net-strand-socket.so"
echo "built $out/libnccl-net-strand-socket.so"
