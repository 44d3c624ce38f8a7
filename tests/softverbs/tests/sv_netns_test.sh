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
if [ "$(id -u)" != 0 ]; then echo "SKIP: network namespaces need root"; exit 77; fi
if ! command -v ip >/dev/null 2>&1; then echo "SKIP: iproute2 (ip) is not installed"; exit 77; fi
TAG=$$
NET=$((TAG % 250 + 1))
NSA="svns${TAG}a"
NSB="svns${TAG}b"
VA="svv${TAG}a"
VB="svv${TAG}b"
A="10.214.${NET}.1"
B="10.214.${NET}.2"
PORT=$((20000 + TAG % 20000))
WORK=$(mktemp -d "${TMPDIR:-/tmp}/sv-netns.XXXXXX")
cleanup() {
  ip netns del "$NSA" 2>/dev/null
  ip netns del "$NSB" 2>/dev/null
  ip link del "$VA" 2>/dev/null
  rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 1' INT TERM HUP
if ! ip netns add "$NSA" 2>"$WORK/err"; then echo "SKIP: ip netns unavailable: $(cat "$WORK/err")"; exit 77; fi
ip netns add "$NSB" || exit 1
ip link add "$VA" type veth peer name "$VB" || { echo "cannot create a veth pair"; exit 1; }
ip link set "$VA" netns "$NSA" && ip link set "$VB" netns "$NSB" || exit 1
ip -n "$NSA" addr add "$A/24" dev "$VA" && ip -n "$NSB" addr add "$B/24" dev "$VB" || exit 1
for ns in "$NSA" "$NSB"; do ip -n "$ns" link set lo up || exit 1; done
ip -n "$NSA" link set "$VA" up && ip -n "$NSB" link set "$VB" up || exit 1
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
