# tests/common/netns.sh — two "hosts" on one machine: two network namespaces joined by a veth pair.
# Sourced (POSIX sh) by every test that needs traffic to cross a real link rather than loopback:
# tests/conform/netns_two_hosts.sh, net_socket/tests/link_flap.sh, net_ofi/tests/ofi_flap.sh and
# tests/softverbs/tests/sv_netns_test.sh.
#
#   netns_require
#       exits 77 (meson's "skip") with the reason unless this runs as root with iproute2's `ip`.
#   netns_pair NS_PREFIX VETH_PREFIX SUBNET
#       creates namespaces ${NS_PREFIX}<pid>a and ...b, a veth pair ${VETH_PREFIX}<pid>a (moved into
#       A) / ...b (into B), addresses SUBNET.<n>.1/24 on A's end and SUBNET.<n>.2/24 on B's (n from
#       the PID, so parallel tests differ), and brings lo and both ends up. Sets NSA NSB VA VB
#       ADDR_A ADDR_B. Exits 77 when `ip netns` itself does not work here (a container without the
#       privilege), 1 when a later step fails. Interface names stay within the kernel's 15 bytes
#       for prefixes of up to 6 characters.
#   netns_cleanup
#       deletes both namespaces (the veth ends go with them) and a veth end still in the root
#       namespace; safe to call more than once or before netns_pair. Call it from the script's EXIT
#       trap after stopping the processes the script started inside the namespaces.

netns_require() {
  if [ "$(id -u)" != 0 ]; then
    echo "SKIP: network namespaces need root (running as uid $(id -u))"
    exit 77
  fi
  if ! command -v ip >/dev/null 2>&1; then
    echo "SKIP: the 'ip' command (iproute2) is not installed"
    exit 77
  fi
}

NSA='' NSB='' VA='' VB='' ADDR_A='' ADDR_B=''

netns_pair() {
  _tag=$$
  _net=$((_tag % 250 + 1))
  NSA="$1${_tag}a"
  NSB="$1${_tag}b"
  VA="$2${_tag}a"
  VB="$2${_tag}b"
  ADDR_A="$3.${_net}.1"
  ADDR_B="$3.${_net}.2"
  if ! _err=$(ip netns add "$NSA" 2>&1); then
    NSA=
    echo "SKIP: ip netns is unavailable here: $_err"
    exit 77
  fi
  ip netns add "$NSB" || exit 1
  ip link add "$VA" type veth peer name "$VB" || { echo "cannot create a veth pair"; exit 1; }
  ip link set "$VA" netns "$NSA" && ip link set "$VB" netns "$NSB" || exit 1
  ip -n "$NSA" addr add "$ADDR_A/24" dev "$VA" && ip -n "$NSB" addr add "$ADDR_B/24" dev "$VB" ||
    exit 1
  for _ns in "$NSA" "$NSB"; do ip -n "$_ns" link set lo up || exit 1; done
  ip -n "$NSA" link set "$VA" up && ip -n "$NSB" link set "$VB" up || exit 1
}

netns_cleanup() {
  [ -n "$NSA" ] && ip netns del "$NSA" 2>/dev/null
  [ -n "$NSB" ] && ip netns del "$NSB" 2>/dev/null
  [ -n "$VA" ] && ip link del "$VA" 2>/dev/null
  return 0
}
