#!/bin/sh
# softverbs between two "hosts": two network namespaces joined by a veth pair (as
# tests/conform/netns_two_hosts.sh does). Each side's GID is the IPv4 address of its veth end (the
# first UP non-loopback IPv4 interface), so (GID, QPN) from the out-of-band exchange reaches the
# peer across the link. Runs sv_xfer_test (send/recv, write, write-with-imm, read) and, when
# ibverbs-utils is installed, ibv_rc_pingpong -g 0 -c unmodified.
#   sv_netns_test.sh <softverbs build dir> <sv_xfer_test>
# Exit 77 (skip) when not root or `ip netns` is unavailable.
set -u
DIR=$1
XFER=$2
. "$(dirname "$0")/../../common/netns.sh"
netns_require
TAG=$$
PORT=$((20000 + TAG % 20000))
WORK=$(mktemp -d "${TMPDIR:-/tmp}/sv-netns.XXXXXX")
cleanup() {
  netns_cleanup
  rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 1' INT TERM HUP
netns_pair svns svv 10.214
A=$ADDR_A
B=$ADDR_B
export LD_LIBRARY_PATH=$DIR
# Under -Db_sanitize the stand-in carries the sanitizer runtimes and the Debian tools do not: the
# runtimes must then be loaded first. Leak checking stays off for those foreign programs.
san=$(ldd "$DIR/libibverbs.so.1" 2>/dev/null | awk '/libasan|libubsan/ {print $3}' | tr '\n' ' ')
if [ -n "$san" ]; then
  export LD_PRELOAD="$san"
  export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0"
fi
fail() { echo "FAIL: $*"; for f in "$WORK"/*.out; do echo "--- $f"; cat "$f"; done; exit 1; }

ip netns exec "$NSA" timeout 60 "$XFER" --listen "$PORT" >"$WORK/xa.out" 2>&1 &
PA=$!
ip netns exec "$NSB" timeout 60 "$XFER" --connect "$A:$PORT" >"$WORK/xb.out" 2>&1
RB=$?
wait $PA
RA=$?
[ $RA -eq 0 ] && [ $RB -eq 0 ] || fail "sv_xfer_test across namespaces: target $RA, initiator $RB"
echo "ok: sv_xfer_test across namespaces ($A <-> $B)"

if command -v ibv_rc_pingpong >/dev/null 2>&1; then
  P2=$((PORT + 1))
  ip netns exec "$NSA" timeout 60 ibv_rc_pingpong -g 0 -c -n 50 -s 65536 -p $P2 >"$WORK/pa.out" 2>&1 &
  PA=$!
  i=0
  while [ $i -lt 50 ]; do
    ip netns exec "$NSB" timeout 60 ibv_rc_pingpong -g 0 -c -n 50 -s 65536 -p $P2 "$A" >"$WORK/pb.out" 2>&1 && break
    grep -q "Couldn't connect" "$WORK/pb.out" || break
    i=$((i + 1))
    sleep 0.1
  done
  wait $PA
  RA=$?
  grep -q 'iters in' "$WORK/pb.out" && [ $RA -eq 0 ] || fail "ibv_rc_pingpong across namespaces"
  grep -q "GID ::ffff:$A" "$WORK/pa.out" || fail "server GID is not its veth address $A"
  if grep -q 'invalid data' "$WORK/pa.out" "$WORK/pb.out"; then fail "rc_pingpong -c: invalid data"; fi
  echo "ok: ibv_rc_pingpong -g 0 -c across namespaces"
else
  echo "(ibv_rc_pingpong not installed: ibverbs-utils part skipped)"
fi
exit 0
