#!/bin/bash
# `meson install` gives a NIC vendor everything to build a plugin out of tree: headers,
# libstrand-sdk.a, strand-sdk.pc and plugin.map, and every Strand plugin lands in libdir. Then the
# out-of-tree plugin in plugin_api/examples/minimal/ is built with nothing but `pkg-config --cflags --libs strand-sdk`
# and loaded the way NCCL loads it.
#
# The install is staged with --destdir into a temporary directory; pkg-config is pointed at it
# with PKG_CONFIG_PATH and --define-variable=prefix=<stage><prefix> (the standard way to use a
# staged tree, and a check that every path in strand-sdk.pc derives from ${prefix}).
#
# usage: install_oot.sh BUILD_ROOT OOT_DIR DLOPEN_CHECK SANITIZE MESON...
set -u
build_root=$1 oot_dir=$2 dlopen_check=$3 sanitize=$4
shift 4
meson_cmd=("$@")

tmp=$(mktemp -d "${TMPDIR:-/tmp}/strand-packaging.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT
stage=$tmp/stage
failures=0
fail() { echo "FAIL $*"; failures=$((failures + 1)); }

if ! "${meson_cmd[@]}" install -C "$build_root" --no-rebuild --quiet --destdir "$stage" \
     >"$tmp/install.log" 2>&1; then
  cat "$tmp/install.log"
  echo "FAIL meson install --destdir failed (every target with install: true must have built;"
  echo "     a compile error anywhere in the tree shows up here as a missing file)"
  exit 1
fi

pc=$(find "$stage" -path '*/pkgconfig/strand-sdk.pc' | head -n 1)
if [ -z "$pc" ]; then
  echo "FAIL strand-sdk.pc not installed; installed files:"
  (cd "$stage" && find . -type f | sort)
  exit 1
fi
export PKG_CONFIG_PATH=${pc%/*}
prefix=$(pkg-config --variable=prefix strand-sdk)
pkgconfig="pkg-config --define-variable=prefix=$stage$prefix"
libdir=$($pkgconfig --variable=libdir strand-sdk)
includedir=$($pkgconfig --variable=includedir strand-sdk)
datadir=$($pkgconfig --variable=datadir strand-sdk)
echo "staged prefix $prefix: libdir $libdir"
case "$libdir$includedir$datadir" in
  *"$stage"*) ;;
  *) fail "strand-sdk.pc paths do not derive from \${prefix}: $libdir $includedir $datadir" ;;
esac

for f in "$libdir/libstrand-sdk.a" "$libdir/pkgconfig/strand-sdk.pc" "$datadir/strand/plugin.map" \
         "$includedir/strand/plugin.h" "$includedir/strand/abi/abi.h" \
         "$includedir/strand/abi/types.h" "$includedir/strand/abi/device.h" \
         "$includedir/strand/abi/props.h" "$includedir/strand/abi/net.h" \
         "$includedir/strand/abi/collnet.h"; do
  [ -f "$f" ] || fail "not installed: ${f#"$stage"}"
done
[ -e "$includedir/strand/export_internal.h" ] && fail "private header export_internal.h installed"

# Every plugin the build produced (test-only ones under tests/ aside) is installed into libdir,
# where NCCL_NET_PLUGIN=strand-<transport> finds it through the loader path.
while IFS= read -r so; do
  [ -f "$libdir/${so##*/}" ] || fail "plugin ${so##*/} built but not installed in libdir"
done < <(find "$build_root" -path "$build_root/tests" -prune -o -path "$build_root/meson-*" -prune \
              -o -type f -name 'libnccl-net-strand-*.so' -print)

# The out-of-tree build. A sanitized SDK needs the sanitizer runtime at link time too.
san_flags=""
[ "$sanitize" != "none" ] && [ -n "$sanitize" ] && san_flags="-fsanitize=$sanitize"
mkdir -p "$tmp/oot"
if ! make -s -f "$oot_dir/Makefile" SRC_DIR="$oot_dir/" OUT="$tmp/oot" PKG_CONFIG="$pkgconfig" \
     CFLAGS="-O1 -g $san_flags" LDFLAGS="$san_flags" >"$tmp/make.log" 2>&1; then
  cat "$tmp/make.log"
  fail "out-of-tree plugin did not build with pkg-config --cflags --libs strand-sdk"
else
  so=$tmp/oot/libnccl-net-strand-oot.so
  extra=$(nm -D --defined-only "$so" | awk '$NF !~ /^ncclNetPlugin_v[0-9]+$/ {print $NF}')
  [ -z "$extra" ] || fail "out-of-tree plugin exports more than ncclNetPlugin_v*: $(echo $extra)"
  "$dlopen_check" "$so" strand-oot nocollnet || fail "out-of-tree plugin did not load as expected"
fi

echo "$failures failure(s)"
[ "$failures" -eq 0 ]
