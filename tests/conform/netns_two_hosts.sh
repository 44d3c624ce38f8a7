#!/bin/sh
# strand-conform multi-host mode between two "hosts": two network namespaces joined by a veth pair.
#
#   netns_two_hosts.sh STRAND_CONFORM_PATH PLUGIN_PATH [extra strand-conform args]
#
# Rank 0 runs in namespace A (10.213.N.1) and hosts the coordinator; rank 1 runs in namespace B
# (10.213.N.2) and reaches it across the veth link, exactly as on two machines:
#   strand-conform run --coordinator 10.213.N.1:PORT --rank R --nranks 2 [extra] PLUGIN
# Everything is removed on exit (trap). Exit status: 0 both ranks passed, 1 a rank failed, 77 (meson
# "skip") only when this cannot run here: not root, or `ip netns` unavailable.
set -u

if [ $# -lt 2 ]; then
  echo "usage: $0 STRAND_CONFORM_PATH PLUGIN_PATH [extra strand-conform args]" >&2
  exit 2
fi
CONFORM=$1
PLUGIN=$2
shift 2

. "$(dirname "$0")/../common/netns.sh"
netns_require

TAG=$$
PORT=$((20000 + TAG % 20000))
WORK=$(mktemp -d "${TMPDIR:-/tmp}/strand-netns.XXXXXX")
PID_A=
PID_B=

cleanup() {
  # ranks first (never leave processes behind), then the namespaces (their veth ends go with them)
  [ -n "$PID_A" ] && kill "$PID_A" 2>/dev/null
  [ -n "$PID_B" ] && kill "$PID_B" 2>/dev/null
  netns_cleanup
  rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 1' INT TERM HUP

netns_pair sconf scv 10.213

# No reachability probe needed: rank 1 retries the coordinator for --bootstrap-timeout seconds
# while the veth link comes up.
echo "host A: namespace $NSA, $VA $ADDR_A (rank 0, coordinator $ADDR_A:$PORT)"
echo "host B: namespace $NSB, $VB $ADDR_B (rank 1)"

# Each rank is bounded by `timeout`: a hang can never outlive the test.
LIMIT=${STRAND_NETNS_TIMEOUT:-540}
ip netns exec "$NSA" timeout -k 5 "$LIMIT" "$CONFORM" run --coordinator "$ADDR_A:$PORT" --rank 0 \
  --nranks 2 "$@" "$PLUGIN" >"$WORK/rank0.out" 2>"$WORK/rank0.err" &
PID_A=$!
ip netns exec "$NSB" timeout -k 5 "$LIMIT" "$CONFORM" run --coordinator "$ADDR_A:$PORT" --rank 1 \
  --nranks 2 "$@" "$PLUGIN" >"$WORK/rank1.out" 2>"$WORK/rank1.err" &
PID_B=$!
wait "$PID_A"
RC_A=$?
PID_A=
wait "$PID_B"
RC_B=$?
PID_B=

echo "---- rank 1 (host B) stderr"
tail -n 40 "$WORK/rank1.err"
echo "---- rank 1 (host B) stdout"
cat "$WORK/rank1.out"
echo "---- rank 0 (host A) stderr"
tail -n 40 "$WORK/rank0.err"
echo "---- rank 0 (host A): the report"
cat "$WORK/rank0.out"
echo "rank 0 exit $RC_A, rank 1 exit $RC_B"
[ "$RC_A" = 0 ] && [ "$RC_B" = 0 ]
