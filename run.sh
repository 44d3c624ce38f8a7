#!/usr/bin/env bash
# Strand's main command: installs what is missing (Debian, as root), builds in build/, then runs
# strand-conform against every reference plugin built on this machine and prints the verdicts.
#
#   ./run.sh              install + build + conformance run of every plugin
#   ./run.sh --build-only install + build (test.sh uses this)
#
# Environment: STRAND_BUILD_DIR (default build), STRAND_CONFORM_ARGS (extra strand-conform flags).
set -euo pipefail
cd "$(dirname "$(readlink -f "$0")")"

BUILD_DIR=${STRAND_BUILD_DIR:-build}
# Debian packages the build and the tests need. Optional parts (libfabric, verbs headers) are
# listed too: on a machine where they cannot be installed, meson skips those parts and says so.
# debhelper, dpkg-dev and lintian: the Debian package build test (tests/packaging/debian_packages.sh).
PACKAGES=(gcc pkg-config meson ninja-build python3 libcmocka-dev libfabric-dev libfabric-bin
          libibverbs-dev iproute2 binutils procps debhelper dpkg-dev lintian)

ensure_packages() {
  local missing=()
  for p in "${PACKAGES[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
  done
  [ ${#missing[@]} -eq 0 ] && return 0
  if [ "$(id -u)" -ne 0 ]; then
    echo "run.sh: missing Debian packages. Install them as root with:" >&2
    echo "  apt-get update && apt-get install -y ${missing[*]}" >&2
    exit 1
  fi
  echo "run.sh: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
}

build() {
  local out
  if [ -f "$BUILD_DIR/build.ninja" ]; then
    out=$(meson setup --reconfigure "$BUILD_DIR" 2>&1) || { echo "$out"; exit 1; }
  else
    out=$(meson setup "$BUILD_DIR" 2>&1) || { echo "$out"; exit 1; }
  fi
  # Optional parts whose dependency is missing say so in one line each ("... skipped: install X").
  echo "$out" | sed -n 's/^Message: \(.*skipped.*\)$/run.sh: \1/p'
  ninja -C "$BUILD_DIR" >/dev/null
  echo "run.sh: built in $BUILD_DIR/"
}

# One strand-conform run per reference plugin (and per fabric for net_ofi); returns non-zero when
# any verdict is a failure.
conform_all() {
  local conform="$BUILD_DIR/tests/conform/strand-conform" status=0 ran=0
  if [ ! -x "$conform" ]; then
    echo "run.sh: strand-conform was not built" >&2
    return 1
  fi
  local plugin
  for plugin in "$BUILD_DIR"/net_*/libnccl-net-strand-*.so; do
    [ -e "$plugin" ] || continue
    case "$plugin" in
      *strand-ofi.so)
        for prov in "tcp;ofi_rxm" "sockets"; do
          echo; echo "=== $(basename "$plugin") FI_PROVIDER=$prov ==="
          FI_PROVIDER="$prov" "$conform" ${STRAND_CONFORM_ARGS:-} "$plugin" || status=1
          ran=$((ran + 1))
        done ;;
      *)
        echo; echo "=== $(basename "$plugin") ==="
        "$conform" ${STRAND_CONFORM_ARGS:-} "$plugin" || status=1
        ran=$((ran + 1)) ;;
    esac
  done
  if [ "$ran" -eq 0 ]; then
    echo "run.sh: no reference plugin was built" >&2
    return 1
  fi
  return $status
}

ensure_packages
build
[ "${1:-}" = "--build-only" ] && exit 0
conform_all
