#!/usr/bin/env bash
# Collects what building and running strand-ofi needs on a machine without libfabric (the GPU
# machines): libfabric's headers, libfabric.so.1 and the shared libraries it needs that are not part
# of glibc, and a pkg-config file pointing at them. Run it on a Debian machine with libfabric-dev
# installed; the directory then travels with the `device` tool's carry list (it is git-ignored),
# and tests/e2e/run_e2e.sh uses it when it exists.
#   tests/e2e/carry_libfabric.sh [DIR]      (default: .e2e-carry in the repository root)
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
out=${1:-$root/.e2e-carry}
src_so=$(pkg-config --variable=libdir libfabric)/libfabric.so.1
rm -rf "$out"
mkdir -p "$out/include" "$out/lib/pkgconfig" "$out/bin"
cp -r "$(pkg-config --variable=includedir libfabric)/rdma" "$out/include/"
cp -L "$src_so" "$out/lib/libfabric.so.1"
ln -s libfabric.so.1 "$out/lib/libfabric.so"
# The provider's own ping-pong, to report its ceiling on the target machine beside strand-ofi.
if command -v fi_pingpong >/dev/null 2>&1; then cp "$(command -v fi_pingpong)" "$out/bin/"; fi
# Every dependency resolved by the loader except the C library and the loader itself, which the
# target machine has in a newer version.
ldd "$src_so" | awk '$3 ~ /^\// {print $1, $3}' | while read -r name path; do
  case $name in libc.so.*|libm.so.*|libpthread.so.*|libdl.so.*|ld-linux*) continue ;; esac
  cp -L "$path" "$out/lib/$name"
done
cat >"$out/lib/pkgconfig/libfabric.pc" <<PC
prefix=\${pcfiledir}/../..
libdir=\${prefix}/lib
includedir=\${prefix}/include
Name: libfabric
Description: libfabric carried for the GPU machines (tests/e2e/carry_libfabric.sh)
Version: $(pkg-config --modversion libfabric)
Cflags: -I\${includedir}
Libs: -L\${libdir} -lfabric
PC
du -sh "$out" | awk '{print "carried libfabric in " $2 ": " $1}'
