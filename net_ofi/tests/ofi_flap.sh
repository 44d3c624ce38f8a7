#!/bin/sh
# Link flap between two network namespaces joined by a veth pair (issue 14).
#
#   ofi_flap.sh OFI_HOSTILE PLUGIN DOWN_S EXPECT
#
# A receiver in namespace A and a sender in namespace B move verified 64 KiB messages; after 2 s
# the link goes down for DOWN_S seconds, then up again. EXPECT=ride: the transfer must carry on and
# finish with every message intact on both sides. EXPECT=fail: both sides must get a clear error
# from test() within STRAND_OFI_PEER_TIMEOUT_S + 6 s of the link going down.
# Exit 0 passed, 1 failed, 77 (meson skip) when not root or no `ip netns`.
set -u
HOSTILE=$1
PLUGIN=$2
DOWN=$3
EXPECT=$4
TIMEOUT_S=${STRAND_OFI_PEER_TIMEOUT_S:-30}

. "$(dirname "$0")/../../tests/common/netns.sh"
netns_require

WORK=$(mktemp -d "${TMPDIR:-/tmp}/strand-flap.XXXXXX")
PID_R=
PID_S=
cleanup() {
  [ -n "$PID_R" ] && kill "$PID_R" 2>/dev/null
  [ -n "$PID_S" ] && kill "$PID_S" 2>/dev/null
  netns_cleanup
  rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 1' INT TERM HUP

netns_pair sflp sfv 10.214

export STRAND_OFI_DOMAINS=
ip netns exec "$NSA" env STRAND_OFI_DOMAINS="$VA" timeout -k 5 200 "$HOSTILE" "$PLUGIN" flap-recv \
  "$WORK/handle" "$WORK/stop" >"$WORK/recv.out" 2>&1 &
PID_R=$!
ip netns exec "$NSB" env STRAND_OFI_DOMAINS="$VB" timeout -k 5 200 "$HOSTILE" "$PLUGIN" flap-send \
  "$WORK/handle" "$WORK/stop" >"$WORK/send.out" 2>&1 &
PID_S=$!

sleep 2
echo "link down for $DOWN s (peer timeout $TIMEOUT_S s, expect: $EXPECT)"
ip -n "$NSA" link set "$VA" down
T_DOWN=$(date +%s)
sleep "$DOWN"
ip -n "$NSA" link set "$VA" up
echo "link up"
[ "$EXPECT" = ride ] && sleep 3
touch "$WORK/stop"
wait "$PID_R"; RC_R=$?
wait "$PID_S"; RC_S=$?
T_END=$(date +%s)
PID_R= PID_S=
echo "--- receiver (rc $RC_R)"; grep -v "INFO" "$WORK/recv.out" | tail -5
echo "--- sender (rc $RC_S)"; grep -v "INFO" "$WORK/send.out" | tail -5
if [ "$EXPECT" = ride ]; then
  [ "$RC_R" = 0 ] && [ "$RC_S" = 0 ] && { echo "PASS: a $DOWN s flap was ridden through, data intact"; exit 0; }
  echo "FAIL: a $DOWN s flap (peer timeout $TIMEOUT_S s) was not ridden through"
  exit 1
fi
# fail: both sides reported an error from test()/isend/irecv, within the bound after link down
ok=1
for side in recv send; do
  t=$(sed -n 's/^FLAP-ERROR .* at \([0-9.]*\) s$/\1/p' "$WORK/$side.out" | head -1)
  if [ -z "$t" ]; then echo "FAIL: $side side reported no error"; ok=0; fi
done
# The processes started about 2 s before the link went down; their times count from the first
# message, so compare the error time against (2 + timeout + 6).
for side in recv send; do
  t=$(sed -n 's/^FLAP-ERROR .* at \([0-9.]*\) s$/\1/p' "$WORK/$side.out" | head -1)
  [ -n "$t" ] && awk -v t="$t" -v b="$TIMEOUT_S" 'BEGIN { exit !(t <= 2 + b + 6) }' || {
    [ -n "$t" ] && echo "FAIL: $side error at $t s, later than 2 + $TIMEOUT_S + 6 s"; ok=0; }
done
[ $ok = 1 ] && { echo "PASS: a $DOWN s flap gave a clear error within the peer timeout"; exit 0; }
exit 1
