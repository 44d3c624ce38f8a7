#!/bin/sh
# rdma-core's own tools, unmodified, over softverbs: ibv_devices, ibv_devinfo and ibv_rc_pingpong
# (server + client, RoCE GID index 0, several sizes, polling and event modes).
# Usage: sv_utils_test.sh <softverbs build dir>
#
# About `ibv_rc_pingpong -c` (rdma-core 44): the client sets the first byte of every page of its
# buffer to 0 before sending, and the receiving side checks the first byte of every page and
# prints "invalid data in page N" on stderr when it is not 0 (the exit code stays 0). The buffer
# starts filled with 0x7b, so a message that never landed, or landed short, shows up there; this
# script fails on that line. Byte-exact data checks are in sv_xfer_test.
set -u
dir=$1
for t in ibv_devices ibv_devinfo ibv_rc_pingpong; do
  if ! command -v $t >/dev/null 2>&1; then
    echo "SKIP: $t not found: install ibverbs-utils (apt-get install ibverbs-utils)"
    exit 77
  fi
done
export LD_LIBRARY_PATH=$dir
# Under -Db_sanitize the stand-in carries the sanitizer runtimes and the Debian tools do not: the
# runtimes must then be loaded first. Leak checking stays off for those foreign programs.
san=$(ldd "$dir/libibverbs.so.1" 2>/dev/null | awk '/libasan|libubsan/ {print $3}' | tr '\n' ' ')
if [ -n "$san" ]; then
  export LD_PRELOAD="$san"
  export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0"
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; for f in "$tmp"/*; do echo "--- $f"; cat "$f"; done; exit 1; }

ibv_devices >"$tmp/devices" 2>&1 || fail "ibv_devices exited $?"
grep -q '^ *sv0 ' "$tmp/devices" || fail "ibv_devices does not list sv0"
ibv_devinfo -v >"$tmp/devinfo" 2>&1 || fail "ibv_devinfo exited $?"
grep -q 'state:.*PORT_ACTIVE' "$tmp/devinfo" || fail "port not ACTIVE in ibv_devinfo"
grep -q 'link_layer:.*Ethernet' "$tmp/devinfo" || fail "link layer not Ethernet"
grep -q 'GID\[ *0\]:.*::ffff:[0-9.]*, RoCE v2' "$tmp/devinfo" || fail "GID 0 is not an IPv4 RoCE v2 GID"
echo "ok: ibv_devices, ibv_devinfo"

# A TCP port for rc_pingpong's own out-of-band exchange: the server is retried on another port if
# the first is taken.
base=$(( 20000 + $$ % 20000 ))
n=0
for mode in "-s 1" "-s 4096" "-s 65536" "-s 1048576 -n 20" "-s 4096 -e"; do
  n=$((n + 1))
  ok=0
  for try in 1 2 3; do
    port=$((base + n * 7 + try))
    rm -f "$tmp/server" "$tmp/client"
    timeout 60 ibv_rc_pingpong -g 0 -c -n 100 -p $port $mode >"$tmp/server" 2>&1 &
    spid=$!
    # the client retries its TCP connect until the server listens
    i=0
    while [ $i -lt 50 ]; do
      timeout 60 ibv_rc_pingpong -g 0 -c -n 100 -p $port $mode 127.0.0.1 >"$tmp/client" 2>&1 && break
      grep -q "Couldn't connect" "$tmp/client" || break
      i=$((i + 1))
      sleep 0.1
    done
    wait $spid
    src=$?
    if grep -q "Couldn't listen\|Address already in use" "$tmp/server"; then continue; fi
    [ $src -eq 0 ] || fail "rc_pingpong server ($mode) exited $src"
    grep -q 'iters in' "$tmp/client" || fail "rc_pingpong client ($mode) did not finish"
    grep -q 'iters in' "$tmp/server" || fail "rc_pingpong server ($mode) did not finish"
    if grep -q 'invalid data' "$tmp/server" "$tmp/client"; then fail "rc_pingpong -c ($mode): invalid data"; fi
    ok=1
    break
  done
  [ $ok -eq 1 ] || fail "rc_pingpong ($mode): no free port"
  echo "ok: ibv_rc_pingpong -g 0 -c $mode: $(grep 'iters in' "$tmp/client")"
done
exit 0
