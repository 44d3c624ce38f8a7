#!/bin/sh
# strand-socket across a flapping link: two network namespaces joined by a veth pair, a paced
# transfer (socket_smoke flap_recv in namespace A, flap_send in B), and the link taken down in the
# middle of it.
#
#   link_flap.sh SOCKET_SMOKE PLUGIN_PATH
#
#  1. ride-through: default STRAND_SOCKET_PEER_TIMEOUT_S (30); the link is down for 5 s; every
#     message must still arrive intact on both ends.
#  2. give-up: STRAND_SOCKET_PEER_TIMEOUT_S=3; the link goes down for 8 s; both ends must get
#     STRAND_REMOTE_ERROR from test() within 3 + 4 s of the link going down, while it is still down;
#     the same with the deprecated STRAND_SOCKET_TIMEOUT_MS=3000.
# Exit status: 0 both passed, 1 a check failed, 77 (meson "skip") when this cannot run here: not
# root, or `ip netns` unavailable. Everything is removed on exit (trap).
set -u

if [ $# -lt 2 ]; then
  echo "usage: $0 SOCKET_SMOKE PLUGIN_PATH" >&2
  exit 2
fi
SMOKE=$1
PLUGIN=$2

. "$(dirname "$0")/../../tests/common/netns.sh"
netns_require

WORK=$(mktemp -d "${TMPDIR:-/tmp}/strand-flap.XXXXXX")
PID_A=
PID_B=

cleanup() {
  [ -n "$PID_A" ] && kill "$PID_A" 2>/dev/null
  [ -n "$PID_B" ] && kill "$PID_B" 2>/dev/null
  netns_cleanup
  rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 1' INT TERM HUP

# The veth ends are named sfv* : NCCL_SOCKET_IFNAME=sfv below picks them.
netns_pair sflap sfv 10.214

now() { date +%s.%N; }
alive() { kill -0 "$1" 2>/dev/null; }

# run NAME ROUNDS DOWN_S EXPECT_ERROR [env...]: one scenario; sets FAILED on a failed check
FAILED=0
run() {
  name=$1 rounds=$2 down=$3 expect=$4
  shift 4
  dir="$WORK/$name"
  mkdir -p "$dir"
  ip netns exec "$NSA" env NCCL_SOCKET_IFNAME=sfv STRAND_SOCKET_NTHREADS=2 FLAP_EXPECT_ERROR="$expect" "$@" \
    "$SMOKE" "$PLUGIN" flap_recv "$dir" "$rounds" >"$dir/recv.log" 2>&1 &
  PID_A=$!
  ip netns exec "$NSB" env NCCL_SOCKET_IFNAME=sfv STRAND_SOCKET_NTHREADS=0 FLAP_EXPECT_ERROR="$expect" "$@" \
    "$SMOKE" "$PLUGIN" flap_send "$dir" "$rounds" >"$dir/send.log" 2>&1 &
  PID_B=$!
  t=0
  while [ ! -e "$dir/connected" ] && [ $t -lt 200 ]; do sleep 0.1; t=$((t + 1)); done
  if [ ! -e "$dir/connected" ]; then
    echo "FAIL $name: the two ends did not connect"
    FAILED=1
  fi
  sleep 1 # transfer under way
  echo "$name: link down for ${down} s"
  t_down=$(now)
  ip -n "$NSA" link set "$VA" down
  # keep it down for $down seconds, or until both ends gave up (give-up scenario)
  end=$(echo "$t_down $down" | awk '{printf "%.3f", $1 + $2}')
  t_a= t_b=
  while awk -v n="$(now)" -v e="$end" 'BEGIN { exit !(n < e) }'; do
    [ -z "$t_a" ] && ! alive "$PID_A" && t_a=$(now)
    [ -z "$t_b" ] && ! alive "$PID_B" && t_b=$(now)
    [ -n "$t_a" ] && [ -n "$t_b" ] && break
    sleep 0.1
  done
  ip -n "$NSA" link set "$VA" up
  echo "$name: link up after $(echo "$t_down $(now)" | awk '{printf "%.1f", $2 - $1}') s"
  wait "$PID_A"; rc_a=$?
  wait "$PID_B"; rc_b=$?
  [ -z "$t_a" ] && t_a=$(now)
  [ -z "$t_b" ] && t_b=$(now)
  PID_A= PID_B=
  sed "s/^/  recv: /" "$dir/recv.log" | grep -v " INFO " | tail -5
  sed "s/^/  send: /" "$dir/send.log" | grep -v " INFO " | tail -5
  if [ $rc_a -ne 0 ] || [ $rc_b -ne 0 ]; then
    echo "FAIL $name: receiver exit $rc_a, sender exit $rc_b"
    FAILED=1
  fi
  if [ "$expect" = 1 ]; then
    da=$(echo "$t_down $t_a" | awk '{printf "%.1f", $2 - $1}')
    db=$(echo "$t_down $t_b" | awk '{printf "%.1f", $2 - $1}')
    echo "$name: receiver failed $da s, sender $db s after the link went down"
    for d in $da $db; do
      if awk -v d="$d" -v lim="$LIMIT" 'BEGIN { exit !(d > lim) }'; then
        echo "FAIL $name: an end needed $d s (> $LIMIT s) to report the dead link"
        FAILED=1
      fi
    done
  fi
}

run ride-through 60 5 0
LIMIT=7
run give-up 400 8 1 STRAND_SOCKET_PEER_TIMEOUT_S=3
# the deprecated millisecond name still sets the same bound
run give-up-deprecated-ms 400 8 1 STRAND_SOCKET_TIMEOUT_MS=3000

[ $FAILED -eq 0 ] && echo "link flap: all passed"
exit $FAILED
