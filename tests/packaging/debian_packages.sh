#!/bin/bash
# The Debian packages (debian/) build, are lintian-clean and work once installed:
#   1. copy the source tree (what git tracks plus untracked, non-ignored files; never a build
#      directory) into a temporary directory and run `dpkg-buildpackage -us -uc -b` there;
#   2. run lintian on the .changes: any E: line fails the test (overrides in debian/ are honoured);
#   3. unpack every binary .deb with `dpkg-deb -x` into a scratch root (the host's dpkg database
#      and /usr are never touched) and check each package holds its files where they belong;
#   4. run the installed strand-conform against the installed plugins BY THEIR NCCL NAMES
#      (strand-socket, strand-ofi, strand-ib) with LD_LIBRARY_PATH at the scratch multiarch libdir,
#      the way NCCL_NET_PLUGIN=strand-socket resolves to libnccl-net-strand-socket.so; strand-ib
#      moves data over tests/softverbs when its build directory is given (SOFTVERBS_DIR);
#   5. build the example plugin shipped in libstrand-sdk-dev against the unpacked strand-sdk.pc
#      (pkg-config --define-variable=prefix=<root>/usr) and load it by name too.
# Skips (77) only when the Debian packaging tools or the build dependencies are not installed
# (run.sh installs them).
#
# usage: debian_packages.sh SOURCE_ROOT [SOFTVERBS_DIR]
set -u
src=$(cd "$1" && pwd) || exit 1
softverbs_dir=${2:-}

missing=()
for tool in dpkg-buildpackage dpkg-deb dpkg-architecture dpkg-checkbuilddeps dh lintian \
            pkg-config make cc nm; do
  command -v "$tool" >/dev/null 2>&1 || missing+=("$tool")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "SKIP Debian packaging tools missing: ${missing[*]}"
  echo "     (apt-get install debhelper dpkg-dev lintian pkgconf make gcc binutils; run.sh does)"
  exit 77
fi

tmp=$(mktemp -d "${TMPDIR:-/tmp}/strand-deb.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT
failures=0
fail() { echo "FAIL $*"; failures=$((failures + 1)); }
start=$SECONDS

# 1. A clean copy of the tree. The package build writes debian/ files and obj-*/ in its tree and
#    the .debs next to it: all of that stays under $tmp.
copy=$tmp/strand
mkdir -p "$copy"
if git -C "$src" rev-parse --is-inside-work-tree >/dev/null 2>&1; then
  (cd "$src" && git ls-files -z --cached --others --exclude-standard |
     tar --null --ignore-failed-read -T - -cf - 2>/dev/null) | tar -xf - -C "$copy" || exit 1
else
  (cd "$src" && tar --exclude='./build*' --exclude='./obj-*' --exclude=./.git -cf - .) |
    tar -xf - -C "$copy" || exit 1
fi
[ -f "$copy/debian/control" ] || { echo "FAIL no debian/control in $src"; exit 1; }

if ! unmet=$(cd "$copy" && dpkg-checkbuilddeps 2>&1); then
  echo "SKIP build dependencies of the Debian packages missing:"
  echo "     $unmet"
  echo "     (run.sh installs them)"
  exit 77
fi

# No test suites inside the package build (debian/rules configures -Dtests=false; nocheck skips
# dh_auto_test): the tests are what runs this script.
echo "building the packages in $copy"
if ! (cd "$copy" && env -u MAKEFLAGS -u MFLAGS DEB_BUILD_OPTIONS="nocheck parallel=2" \
        dpkg-buildpackage -us -uc -b) >"$tmp/build.log" 2>&1; then
  tail -n 80 "$tmp/build.log"
  echo "FAIL dpkg-buildpackage -us -uc -b failed (last 80 lines above)"
  exit 1
fi
grep -E '^dpkg-deb: building package' "$tmp/build.log"
echo "built in $((SECONDS - start)) s"

# 2. lintian over everything the build produced (.changes lists the .debs and .buildinfo).
changes=$(ls "$tmp"/*.changes 2>/dev/null | head -n 1)
[ -n "$changes" ] || { echo "FAIL no .changes file"; exit 1; }
lintian --tag-display-limit 0 "$changes" >"$tmp/lintian.log" 2>&1
grep -v '^running with root privileges' "$tmp/lintian.log"
if grep -q '^E: ' "$tmp/lintian.log"; then
  fail "lintian reports errors (E: lines above)"
fi
echo "lintian: $(grep -c '^E: ' "$tmp/lintian.log") error(s), $(grep -c '^W: ' "$tmp/lintian.log") warning(s)"

# 3. Unpack into a scratch root, and check each package's files.
ma=$(dpkg-architecture -qDEB_HOST_MULTIARCH)
root=$tmp/root
libdir=$root/usr/lib/$ma
mkdir -p "$root"
declare -A expect=(
  [libnccl-net-strand-socket]="usr/lib/$ma/libnccl-net-strand-socket.so"
  [libnccl-net-strand-ofi]="usr/lib/$ma/libnccl-net-strand-ofi.so"
  [libnccl-net-strand-ib]="usr/lib/$ma/libnccl-net-strand-ib.so"
  [strand-conform]="usr/bin/strand-conform usr/share/man/man1/strand-conform.1.gz"
  [libstrand-sdk-dev]="usr/lib/$ma/libstrand-sdk.a usr/lib/$ma/pkgconfig/strand-sdk.pc
    usr/share/strand/plugin.map usr/include/strand/plugin.h usr/include/strand/abi/abi.h
    usr/share/doc/libstrand-sdk-dev/examples/minimal/Makefile
    usr/share/doc/libstrand-sdk-dev/examples/minimal/strand_oot.c"
)
for p in "${!expect[@]}"; do
  deb=$(ls "$tmp/${p}_"*.deb 2>/dev/null | head -n 1)
  if [ -z "$deb" ]; then
    fail "package $p was not built"
    continue
  fi
  dpkg-deb -x "$deb" "$root" || fail "dpkg-deb -x $deb"
  contents=$(dpkg-deb -c "$deb" | awk '{print $6}')
  for f in ${expect[$p]}; do
    grep -qxF "./$f" <<<"$contents" || fail "$p does not contain /$f"
  done
done
[ -e "$root/usr/include/strand/export_internal.h" ] && fail "private header export_internal.h packaged"

# 4. strand-conform from the package, plugins from the packages, found by name through the
#    loader path only (NCCL_NET_PLUGIN / NCCL_NET from the caller's environment are dropped).
conform=$root/usr/bin/strand-conform
run_conform() { # log-name plugin-name extra-env... -- strand-conform args...
  local log=$tmp/$1.log name=$2; shift 2
  local envs=()
  while [ "$1" != "--" ]; do envs+=("$1"); shift; done
  shift
  env -u NCCL_NET_PLUGIN -u NCCL_NET "${envs[@]}" "$conform" run --quick --no-progress "$@" "$name" \
    >"$log" 2>&1
  local rc=$?
  cat "$log"
  [ $rc -eq 0 ] || fail "strand-conform $* $name exited $rc"
}
check_from() { # log-name expected-path: the header names the file dlopen() found
  local line
  line=$(grep -m 1 '^strand-conform: plugin ' "$tmp/$1.log")
  case "$line" in
    *" from $2;"*) ;;
    *) fail "strand-conform did not load $2: ${line:-no 'strand-conform: plugin' line}" ;;
  esac
}

if [ -x "$conform" ]; then
  run_conform socket strand-socket "LD_LIBRARY_PATH=$libdir" -- --only 'load.*,props.*,xfer.*'
  check_from socket "$libdir/libnccl-net-strand-socket.so"
  # The libfabric plugin loads with the dependencies its package declares (shlibs): init and
  # device discovery over the tcp provider, as run.sh uses it.
  run_conform ofi strand-ofi "LD_LIBRARY_PATH=$libdir" "FI_PROVIDER=tcp;ofi_rxm" -- --only 'load.*'
  check_from ofi "$libdir/libnccl-net-strand-ofi.so"
  # The verbs plugin dlopen()s libibverbs.so.1: over the softverbs stand-in it moves data; with
  # the host's libibverbs and no RDMA device it must still load and offer 0 devices.
  if [ -n "$softverbs_dir" ]; then
    run_conform ib strand-ib "LD_LIBRARY_PATH=$libdir:$softverbs_dir" -- --only 'load.*,props.*,xfer.*'
  else
    run_conform ib strand-ib "LD_LIBRARY_PATH=$libdir" -- --only 'load.*'
  fi
  check_from ib "$libdir/libnccl-net-strand-ib.so"
else
  fail "strand-conform not unpacked"
fi

# 5. The example plugin of libstrand-sdk-dev, built with nothing but the packaged strand-sdk.pc.
export PKG_CONFIG_PATH=$libdir/pkgconfig
unset PKG_CONFIG_LIBDIR PKG_CONFIG_SYSROOT_DIR
pc_prefix=$(pkg-config --variable=prefix strand-sdk)
[ "$pc_prefix" = /usr ] || fail "strand-sdk.pc prefix is '$pc_prefix', expected /usr"
pkgconfig="pkg-config --define-variable=prefix=$root$pc_prefix"
for v in libdir includedir datadir; do
  val=$($pkgconfig --variable=$v strand-sdk)
  case "$val" in
    "$root"/*) ;;
    *) fail "strand-sdk.pc $v '$val' does not derive from \${prefix}" ;;
  esac
done
example=$root/usr/share/doc/libstrand-sdk-dev/examples/minimal
mkdir -p "$tmp/oot"
if ! make -s -f "$example/Makefile" OUT="$tmp/oot" PKG_CONFIG="$pkgconfig" >"$tmp/make.log" 2>&1; then
  cat "$tmp/make.log"
  fail "the packaged example did not build against the packaged strand-sdk.pc"
else
  so=$tmp/oot/libnccl-net-strand-oot.so
  extra=$(nm -D --defined-only "$so" | awk '$NF !~ /^ncclNetPlugin_v[0-9]+$/ {print $NF}')
  [ -z "$extra" ] || fail "example plugin exports more than ncclNetPlugin_v*: $(echo $extra)"
  if [ -x "$conform" ]; then
    run_conform oot strand-oot "LD_LIBRARY_PATH=$tmp/oot:$libdir" -- --only 'load.*'
    check_from oot "$so"
  fi
fi

echo "$failures failure(s) in $((SECONDS - start)) s"
[ "$failures" -eq 0 ]
