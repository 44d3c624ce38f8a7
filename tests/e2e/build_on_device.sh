#!/usr/bin/env bash
# Builds libnccl-net-strand-socket.so with a plain compiler command line, for machines without
# meson (the GPU machines). Same sources, flags and version script as the meson build.
#   tests/e2e/build_on_device.sh [OUTDIR]      (default: build-e2e)
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
out=${1:-$root/build-e2e}
mkdir -p "$out"
CC=${CC:-gcc}
# Every SDK source and every net_socket source, so a file added to either is picked up without
# editing this script; except the CollNet export object, which the meson build's static library
# only pulls in for plugins that define a CollNet table (strand-socket has none).
sdk_srcs=()
for f in "$root"/plugin_api/src/*.c; do
  [[ $f == */export_collnet.c ]] || sdk_srcs+=("$f")
done
$CC -std=c11 -O2 -g -fPIC -shared -D_GNU_SOURCE -Wall -Wextra -fvisibility=hidden \
  -I"$root/plugin_api/include" -I"$root/plugin_api/src" \
  "${sdk_srcs[@]}" "$root"/net_socket/sk_*.c \
  -Wl,--version-script="$root/plugin_api/src/plugin.map" -Wl,--no-undefined \
  -lpthread -ldl -lm -o "$out/libnccl-net-strand-socket.so"
echo "built $out/libnccl-net-strand-socket.so"
