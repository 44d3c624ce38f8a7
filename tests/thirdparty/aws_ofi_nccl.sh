#!/usr/bin/env bash
# Build aws-ofi-nccl (github.com/aws/aws-ofi-nccl, Apache-2.0) from a source tree on a machine
# without CUDA, and run strand-conform on it with libfabric's tcp provider on loopback: the whole
# net suite (--quick) and, where the build exports a one-sided table, the one-sided checks (rma.*).
# Results: docs/conformance.md, "Third-party: aws-ofi-nccl GIN/RMA" and "... net suite".
#
#   tests/thirdparty/aws_ofi_nccl.sh SRC_DIR [SCRATCH_DIR [TAG]]
#
# SRC_DIR: an aws-ofi-nccl source tree, e.g.
#     git clone https://github.com/aws/aws-ofi-nccl && git -C aws-ofi-nccl checkout v1.21.1
#   It is copied, never written to. Without a .git directory or a .release_version file the
#   version is taken from AWS_OFI_NCCL_VERSION (default "unknown").
#   With TAG, SRC_DIR is a git repository (a bare mirror will do) and the tag's tree is exported
#   from it with git archive; the version is the tag and the commit is recorded in
#   results/environment.txt. Any release that builds against the installed libfabric works: the
#   one-sided runs need v1.21.0 or newer (older releases export no ncclGinPlugin/ncclRmaPlugin
#   table, and those runs are then left out).
# SCRATCH_DIR: where everything is built (default: a new mktemp -d); left in place for reading:
#   obj/src/.libs/libnccl-net-ofi.so, results/*.txt and *.json, build logs.
#
# Needs (Debian): autoconf automake libtool make g++ libfabric-dev libhwloc-dev libfabric-bin,
# and a built strand-conform (STRAND_CONFORM, default build/tests/conform/strand-conform).
#
# CUDA: aws-ofi-nccl cannot be configured without a CUDA runtime. tests/thirdparty/
# aws_ofi_nccl_cuda_stub/ is Strand's own stand-in: headers with only the names the plugin's host
# build uses and a libcudart.so whose driver entry points succeed for version and context queries
# and fail with CUDA_ERROR_NO_DEVICE for anything that needs a GPU. strand-conform drives host
# memory only, so no checked path needs a GPU.
#
# Environment passed to the plugin (override to try another provider): FI_PROVIDER (tcp),
# FI_TCP_IFACE (lo), NCCL_DEBUG (INFO, captured by strand-conform with each check).
# Exit status: 0 when the build succeeded and every strand-conform run ended (the verdicts are
# in results/, they do not set the exit status), 1 on a build or usage error.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
src=${1:?usage: $0 SRC_DIR [SCRATCH_DIR [TAG]]}
scratch=${2:-$(mktemp -d /tmp/aws-ofi-nccl.XXXXXX)}
tag=${3:-}
conform=${STRAND_CONFORM:-$root/build/tests/conform/strand-conform}
jobs=${JOBS:-2}

if [ -n "$tag" ]; then
  git -C "$src" rev-parse --verify -q "$tag^{commit}" >/dev/null ||
    { echo "$src is not a git repository with tag $tag" >&2; exit 1; }
  git -C "$src" cat-file -e "$tag:configure.ac" 2>/dev/null ||
    { echo "$tag in $src has no configure.ac: not an aws-ofi-nccl tree" >&2; exit 1; }
else
  [ -f "$src/configure.ac" ] && grep -q aws-ofi-nccl "$src/configure.ac" ||
    { echo "$src is not an aws-ofi-nccl source tree" >&2; exit 1; }
fi
[ -x "$conform" ] || { echo "no strand-conform at $conform (build Strand first, or set STRAND_CONFORM)" >&2; exit 1; }
for tool in autoreconf make g++ gcc; do
  command -v "$tool" >/dev/null || { echo "missing $tool (apt-get install autoconf automake libtool make g++)" >&2; exit 1; }
done
[ -f /usr/include/rdma/fabric.h ] || { echo "missing libfabric headers (apt-get install libfabric-dev)" >&2; exit 1; }
[ -f /usr/include/hwloc.h ] || { echo "missing hwloc headers (apt-get install libhwloc-dev)" >&2; exit 1; }

mkdir -p "$scratch"/{cuda/include,cuda/lib64,results}
echo "scratch: $scratch"

# --- the source, copied so that autoreconf and the version file never touch the caller's tree
rm -rf "$scratch/src"
if [ -n "$tag" ]; then
  mkdir -p "$scratch/src"
  git -C "$src" archive "$tag" | tar -x -C "$scratch/src"
  echo "$tag" >"$scratch/src/.release_version"
  source_commit=$(git -C "$src" rev-parse "$tag^{commit}")
else
  cp -a "$src" "$scratch/src"
  source_commit=$(git -C "$src" rev-parse HEAD 2>/dev/null || echo "unknown (not a git tree)")
fi
if [ ! -f "$scratch/src/.release_version" ]; then
  if git -C "$src" rev-parse --git-dir >/dev/null 2>&1; then
    git -C "$src" describe --tags --always >"$scratch/src/.release_version"
  else
    echo "${AWS_OFI_NCCL_VERSION:-unknown}" >"$scratch/src/.release_version"
  fi
fi
echo "aws-ofi-nccl version: $(cat "$scratch/src/.release_version") (commit $source_commit)"

# --- the stub CUDA runtime (ours; see the top of this file)
cp "$here"/aws_ofi_nccl_cuda_stub/*.h "$scratch/cuda/include/"
gcc -std=c11 -O2 -Wall -Wextra -Werror -shared -fPIC -I"$here/aws_ofi_nccl_cuda_stub" \
  -o "$scratch/cuda/lib64/libcudart.so" "$here/aws_ofi_nccl_cuda_stub/cudart_stub.c"

# --- configure and build the plugin only (its tests need MPI and a GPU)
(cd "$scratch/src" && autoreconf -ivf) >"$scratch/autoreconf.log" 2>&1 ||
  { tail -20 "$scratch/autoreconf.log"; exit 1; }
mkdir -p "$scratch/obj"
# No --with-libfabric: pointing it at /usr adds -isystem /usr/include, which breaks libstdc++'s
# #include_next; the default search finds Debian's libfabric.
(cd "$scratch/obj" && ../src/configure --with-cuda="$scratch/cuda" --enable-cudart-dynamic --disable-tests) \
  >"$scratch/configure.log" 2>&1 || { tail -30 "$scratch/configure.log"; exit 1; }
make -C "$scratch/obj/src" -j"$jobs" >"$scratch/make.log" 2>&1 || { grep -m20 -B2 -A5 "error" "$scratch/make.log"; exit 1; }
plugin="$scratch/obj/src/.libs/libnccl-net-ofi.so"
echo "built: $plugin"
echo "exported plugin tables:"
nm -D --defined-only "$plugin" | awk '/ncclNetPlugin|ncclCollNetPlugin|ncclGinPlugin|ncclRmaPlugin/ {print "  " $3}' |
  tee "$scratch/results/symbols.txt"

# --- the runs
export LD_LIBRARY_PATH="$scratch/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export FI_PROVIDER=${FI_PROVIDER:-tcp} FI_TCP_IFACE=${FI_TCP_IFACE:-lo} NCCL_DEBUG=${NCCL_DEBUG:-INFO}
# aws-ofi-nccl drops tcp domains named in OFI_NCCL_EXCLUDE_TCP_IF, "lo,docker0" by default: with
# FI_TCP_IFACE=lo that is every domain tcp offers, and init fails with "Unable to find a protocol
# that worked" although fi_getinfo found them. Keep loopback; a caller's own value wins.
export OFI_NCCL_EXCLUDE_TCP_IF=${OFI_NCCL_EXCLUDE_TCP_IF:-docker0}
{ echo "aws-ofi-nccl $(cat "$scratch/src/.release_version") commit $source_commit"
  echo "FI_PROVIDER=$FI_PROVIDER FI_TCP_IFACE=$FI_TCP_IFACE OFI_NCCL_EXCLUDE_TCP_IF=$OFI_NCCL_EXCLUDE_TCP_IF"
  fi_info --version 2>/dev/null | head -2 || true
  echo "providers offering FI_MSG|FI_RMA|FI_HMEM on RDM endpoints (what the rdma protocol asks for;"
  echo "without one, init falls back to the sendrecv protocol, which asks for FI_TAGGED|FI_MSG):"
  fi_info -p "$FI_PROVIDER" -t FI_EP_RDM -c 'FI_MSG|FI_RMA|FI_HMEM' 2>&1 | grep provider: || echo "  none"
} | tee "$scratch/results/environment.txt"

run() { # NAME ARGS...: one strand-conform run; its table on stdout and in results/NAME.txt
  local name=$1
  shift
  echo "== strand-conform run $* ($name)"
  "$conform" run --quick -v --json "$scratch/results/$name.json" "$@" "$plugin" \
    >"$scratch/results/$name.txt" 2>&1 || true
  grep -E '^(PASS|FAIL|SKIP|WARN|ENV) |passed,|not judged' "$scratch/results/$name.txt" || tail -5 "$scratch/results/$name.txt"
}
# rma.*: the newest one-sided table NCCL would take (ncclRmaPlugin_v14), then the 2.28 one; only
# for releases that export one (v1.21.0 and newer).
if grep -q 'ncclRmaPlugin\|ncclGinPlugin' "$scratch/results/symbols.txt"; then
  run rma --only 'rma.*'
  run rma-v11 --only 'rma.*' --rma-abi v11
else
  echo "== no one-sided table exported: rma.* left out"
fi
# The whole net suite (--quick; about 3 minutes on 2 cores, most of it the stale-connect bounds).
# NET_ONLY=CHECKS narrows it, e.g. NET_ONLY='load.*,props.*,conn.establish' for a quick look.
run net ${NET_ONLY:+--only "$NET_ONLY"} --skip 'rma.*'
echo "results: $scratch/results"
