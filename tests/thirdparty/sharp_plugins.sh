#!/bin/sh
# Build the IB plugin of nccl-rdma-sharp-plugins (github.com/Mellanox/nccl-rdma-sharp-plugins) against
# rdma-core's headers, and run strand-conform on it over softverbs (tests/softverbs). Not in CI: it
# needs a CUDA toolkit (the plugin's configure insists on cuda_runtime.h and libcudart), autotools,
# and about two minutes for the stale-connect measurement.
#
#   tests/thirdparty/sharp_plugins.sh SRC_DIR STRAND_BUILD_DIR [WORK_DIR]
#
# SRC_DIR           a checkout of nccl-rdma-sharp-plugins; it is copied, never modified. Without
#                   GitHub access it was obtained with the session's `fetch` tool, which leaves a bare
#                   mirror under /work/.mirror/Mellanox+nccl-rdma-sharp-plugins/repo:
#                     git clone /work/.mirror/Mellanox+nccl-rdma-sharp-plugins/repo SRC_DIR
#                   (tested at commit 2f5ac02e164336044388b7f1f6242cc0db575fec, 2026-04-02).
# STRAND_BUILD_DIR  a meson build of this tree (strand-conform and softverbs built).
# WORK_DIR          where the copy, the build and the results go (default /tmp/strand-sharp).
# CUDA_HOME         the CUDA toolkit (default /usr/local/cuda); only headers and libcudart are used,
#                   no GPU is needed.
# SYSFS=1           run strand-conform under tests/softverbs/sv-sysfs (root needed): the plugin then
#                   finds /sys/class/infiniband/sv0/device and a PCI path, as on a host with a NIC.
#
# What it adapts, and why (each is said again in the output):
#  - libmlx5.so.1: the plugin links it for one call, mlx5dv_is_supported(); the system's libmlx5 needs
#    private symbols of the real libibverbs that softverbs does not export. A stub answering "not an
#    mlx5 device" (true of softverbs) stands in for it.
#  - One character of p2p_plugin.c: its WARN "Could not find real path of %s" passes a char for %s
#    (*device_path). It is reached on a device without a sysfs entry (softverbs has none) and crashes
#    every init under a logger that formats WARN lines (NCCL with NCCL_DEBUG=WARN, strand-conform).
#    strand-conform reports that crash as it is (SIGSEGV during init) when run with FIX=0; the
#    default fixes it so that the rest of the plugin can be tested.
#
# Then: the suite with --quick (results in WORK_DIR/conform.txt and .json), and the two stale-connect
# checks measured up to 90 s with a 30 s call bound (the plugin's connect sleeps inside the call
# between retries), which show how long its connect really takes to give up.
set -eu
[ $# -ge 2 ] || { sed -n '2,34p' "$0"; exit 2; }
SRC=$(cd "$1" && pwd)
BUILD=$(cd "$2" && pwd)
WORK=${3:-/tmp/strand-sharp}
CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}
FIX=${FIX:-1}
SYSFS=${SYSFS:-0}
SVSYSFS=$(cd "$(dirname "$0")/../softverbs" && pwd)/sv-sysfs
CONFORM=$BUILD/tests/conform/strand-conform
SOFTVERBS=$BUILD/tests/softverbs
[ -x "$CONFORM" ] || { echo "no strand-conform in $BUILD (ninja -C $BUILD)"; exit 2; }
[ -e "$SOFTVERBS/libibverbs.so.1" ] || { echo "no softverbs in $SOFTVERBS (needs libibverbs-dev)"; exit 2; }
[ -e "$CUDA_HOME/include/cuda_runtime.h" ] || { echo "no CUDA toolkit at $CUDA_HOME (set CUDA_HOME)"; exit 2; }
# With SYSFS=1 every strand-conform run goes through sv-sysfs (it checks root and unshare itself).
RUN=
if [ "$SYSFS" = 1 ]; then
  RUN="$SVSYSFS --"
  $RUN true || exit 2
fi

mkdir -p "$WORK"
rm -rf "$WORK/src"
cp -a "$SRC" "$WORK/src"
cd "$WORK/src"
echo "== source: $(git log -1 --format='%H %cd' 2>/dev/null || echo 'not a git checkout')"
if [ "$FIX" = 1 ]; then
  sed -i 's/WARN("Could not find real path of %s", \*device_path);/WARN("Could not find real path of %s", device_path);/' src/p2p_plugin.c
  echo "== fixed p2p_plugin.c's WARN(\"... %s\", *device_path) (FIX=0 to test it as published)"
fi
./autogen.sh > "$WORK/autogen.log" 2>&1
./configure --with-cuda="$CUDA_HOME" --without-ucx --without-sharp > "$WORK/configure.log" 2>&1
make -j"$(nproc)" > "$WORK/make.log" 2>&1
PLUGIN=$WORK/libnccl-net-sharp-ib.so
cp src/.libs/libnccl-net.so "$PLUGIN"
echo "== built $PLUGIN"

# The libmlx5 stand-in: one symbol, at the version the plugin asks for.
mkdir -p "$WORK/mlx5stub"
cat > "$WORK/mlx5stub/mlx5stub.c" <<'STUB'
/* softverbs is no mlx5 device: the one Direct Verbs call the plugin makes says so. */
#include <stdbool.h>
struct ibv_device;
bool mlx5dv_is_supported(struct ibv_device *device) { (void)device; return false; }
STUB
echo 'MLX5_1.8 { global: mlx5dv_is_supported; local: *; };' > "$WORK/mlx5stub/mlx5stub.map"
cc -shared -fPIC -o "$WORK/mlx5stub/libmlx5.so.1" "$WORK/mlx5stub/mlx5stub.c" \
   -Wl,--version-script="$WORK/mlx5stub/mlx5stub.map" -Wl,-soname,libmlx5.so.1

export LD_LIBRARY_PATH="$WORK/mlx5stub:$SOFTVERBS${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
rc=0
[ -z "$RUN" ] || echo "== under sv-sysfs: /sys/class/infiniband/sv0 -> $($RUN readlink -f /sys/class/infiniband/sv0/device)"
echo "== strand-conform --quick (ENV rows: softverbs refused what the check needed)"
$RUN "$CONFORM" --quick --compact --json "$WORK/conform.json" "$PLUGIN" > "$WORK/conform.txt" 2>&1 || rc=$?
grep -v '^ *> ' "$WORK/conform.txt" | grep -E '^(FAIL|ENV|[0-9]+ (passed|check))' | head -80
echo "== stale connects measured up to 90 s (--stale-bound 90 --call-bound 30)"
$RUN "$CONFORM" --quick --stale-bound 90 --call-bound 30 --only=conn.stale-handle,conn.dead-peer "$PLUGIN" \
  > "$WORK/stale.txt" 2>&1 || rc=$?
grep -v '^ *> ' "$WORK/stale.txt"
exit $rc
