#!/bin/bash
# Every Strand plugin .so in the build tree exports ncclNetPlugin_v* / ncclCollNetPlugin_v* /
# ncclTunerPlugin_v* / ncclGinPlugin_v* / ncclRmaPlugin_v* and nothing else (DESIGN.md: several
# plugins must live in one process), as data symbols, with complete sets (net and CollNet v6..v12,
# tuner v2..v6, one-sided: ncclGinPlugin_v11/_v12 with ncclRmaPlugin_v13/_v14). Plugins are found by
# name (libnccl-net-strand-*.so) outside tests/, plus the two packaging fixtures given on the
# command line, which are also dlopen'ed and inspected.
#
# usage: check_exports.sh BUILD_ROOT FIXTURE_WITH_COLLNET.so FIXTURE_NET_ONLY.so DLOPEN_CHECK
set -u
build_root=$1 fixture_both=$2 fixture_net=$3 dlopen_check=$4

failures=0
fail() { echo "FAIL $*"; failures=$((failures + 1)); }

check_one() { # $1 = .so path
  local so=$1 syms bad missing v
  # "VALUE TYPE NAME" lines; undefined symbols are excluded by --defined-only.
  if ! syms=$(nm -D --defined-only "$so" 2>&1); then
    fail "$so: nm failed: $syms"
    return
  fi
  bad=$(awk '$NF !~ /^(ncclNetPlugin_v[0-9]+|ncclCollNetPlugin_v[0-9]+|ncclTunerPlugin_v[0-9]+|ncclGinPlugin_v[0-9]+|ncclRmaPlugin_v[0-9]+)$/ {print $NF}' <<<"$syms")
  [ -z "$bad" ] || fail "$so exports symbols besides NCCL's plugin tables: $(echo $bad)"
  # NCCL looks the tables up as data: a function (type T/t) of that name would be read as a table.
  bad=$(awk 'NF >= 3 && $2 !~ /^[BbDdRrGgSs]$/ {print $NF "(" $2 ")"}' <<<"$syms")
  [ -z "$bad" ] || fail "$so: these plugin symbols are not data objects: $(echo $bad)"
  missing=""
  for v in 6 7 8 9 10 11 12; do
    grep -qw "ncclNetPlugin_v$v" <<<"$syms" || missing="$missing ncclNetPlugin_v$v"
  done
  if grep -q ncclCollNetPlugin_v <<<"$syms"; then
    for v in 6 7 8 9 10 11 12; do
      grep -qw "ncclCollNetPlugin_v$v" <<<"$syms" || missing="$missing ncclCollNetPlugin_v$v"
    done
  fi
  if grep -q ncclTunerPlugin_v <<<"$syms"; then
    for v in 2 3 4 5 6; do
      grep -qw "ncclTunerPlugin_v$v" <<<"$syms" || missing="$missing ncclTunerPlugin_v$v"
    done
  fi
  if grep -qE 'ncclGinPlugin_v|ncclRmaPlugin_v' <<<"$syms"; then
    for t in ncclGinPlugin_v11 ncclGinPlugin_v12 ncclRmaPlugin_v13 ncclRmaPlugin_v14; do
      grep -qw "$t" <<<"$syms" || missing="$missing $t"
    done
    # A proxy offering must not go out as device-side GIN: NCCL 2.30 skips it there.
    grep -qwE 'ncclGinPlugin_v1[34]' <<<"$syms" && fail "$so exports ncclGinPlugin_v13/_v14 (proxy GIN goes out as RMA)"
  fi
  [ -z "$missing" ] || fail "$so: missing$missing"
  echo "checked $so: $(awk '{print $NF}' <<<"$syms" | sort -V | tr '\n' ' ')"
}

# Test-only plugins under tests/ (broken fixtures, dummies) are excluded on purpose: some break
# the contract by design. Our own packaging fixtures are passed explicitly below.
mapfile -t plugins < <(find "$build_root" -path "$build_root/tests" -prune -o \
                            -path "$build_root/meson-*" -prune -o \
                            -type f -name 'libnccl-net-strand-*.so' -print | sort)
plugins+=("$fixture_both" "$fixture_net")
for so in "${plugins[@]}"; do check_one "$so"; done

# The net-only fixture must not drag the CollNet export object in, and both must load and be named.
nm -D --defined-only "$fixture_net" | grep -q ncclCollNetPlugin_v && \
  fail "$fixture_net: CollNet symbols exported without a CollNet table"
nm -D --defined-only "$fixture_net" | grep -q ncclTunerPlugin_v && \
  fail "$fixture_net: tuner symbols exported without a tuner"
nm -D --defined-only "$fixture_net" | grep -qE 'ncclGinPlugin_v|ncclRmaPlugin_v' && \
  fail "$fixture_net: GIN/RMA symbols exported without an RMA table"
nm -D --defined-only "$fixture_both" | grep -q ncclTunerPlugin_v6 || \
  fail "$fixture_both: no tuner symbols although it has a tuner"
"$dlopen_check" "$fixture_both" strand-pkgboth collnet || fail "dlopen check of $fixture_both"
"$dlopen_check" "$fixture_net" strand-pkgnet nocollnet || fail "dlopen check of $fixture_net"

echo "${#plugins[@]} plugin(s) checked, $failures failure(s)"
[ "$failures" -eq 0 ]
