#!/bin/sh
# sv-sysfs (tests/softverbs/sv-sysfs): inside, the entries NCCL's IB transport and its topology
# read for softverbs' devices resolve and hold what softverbs reports (two devices, two ports,
# 200 Gb/s), the real sysfs is still there, and SOFTVERBS_NDEVS matches; outside, nothing changed
# (the mounts on /sys, /sys/class, /sys/devices). Without root, or without unshare, it refuses with a
# message. Skips (77) where it cannot run: not root, or no mount namespace allowed.
#   sv_sysfs_test.sh PATH_TO_SV_SYSFS
set -u
SVS=$1
[ "$(id -u)" = 0 ] || { echo "skip: sv-sysfs needs root"; exit 77; }
command -v unshare >/dev/null 2>&1 || { echo "skip: no unshare"; exit 77; }
unshare -m --propagation private true 2>/dev/null || { echo "skip: no mount namespace here"; exit 77; }

fail=0
check() { # what, got, want
  if [ "$2" != "$3" ]; then
    printf 'FAIL %s:\n--- got\n%s\n--- want\n%s\n' "$1" "$2" "$3"
    fail=1
  fi
}

# the mounts on /sys and below (other tests may add mounts elsewhere meanwhile, e.g. /run/netns)
sys_mounts() { awk '$5 == "/sys" || index($5, "/sys/") == 1 { print $5 }' /proc/self/mountinfo; }
mounts_before=$(sys_mounts)
class_before=$(ls -a /sys/class /sys/class/infiniband 2>&1)
devices_before=$(ls -a /sys/devices)
# a real bus, to see that the host's own PCI tree still resolves inside
real_bus=$(ls /sys/class/pci_bus 2>/dev/null | head -n 1)
real_bus_path=
[ -z "$real_bus" ] || real_bus_path=$(readlink -f "/sys/class/pci_bus/$real_bus")

got=$(SOFTVERBS_RATE_GBPS=200 SOFTVERBS_NPORTS=2 "$SVS" --ndevs 2 --numa 0 -- sh -c '
  ib=/sys/class/infiniband
  ls $ib
  readlink -f $ib/sv0/device $ib/sv1/device
  readlink -f /sys/class/pci_bus/5f00:02/../../5f00:02:00.0
  readlink -f $ib/sv1/device/subsystem
  cat $ib/sv0/device/class $ib/sv0/device/vendor $ib/sv0/device/numa_node
  cat $ib/sv0/device/max_link_speed $ib/sv0/device/../max_link_width
  cat $ib/sv1/ports/1/state $ib/sv1/ports/2/rate $ib/sv1/ports/2/link_layer
  cat $ib/sv1/ports/2/gid_attrs/types/0 $ib/sv0/node_type
  echo "SOFTVERBS_NDEVS=$SOFTVERBS_NDEVS"
  test -e /sys/class/net/lo && echo "real class entries: yes"
  test -r /sys/devices/system/cpu/online && echo "real devices: yes"
  test ! -e /sys/class/.sv-sysfs-real && echo "no staging left"
  [ -z "$1" ] || readlink -f "/sys/class/pci_bus/$1"
' sv-sysfs-test "$real_bus" 2>&1)
want="sv0
sv1
/sys/devices/pci5f00:00/5f00:00:01.0/5f00:01:00.0
/sys/devices/pci5f00:00/5f00:00:02.0/5f00:02:00.0
/sys/devices/pci5f00:00/5f00:00:02.0/5f00:02:00.0
/sys/bus/pci
0x020000
0x1234
0
16.0 GT/s PCIe
16
4: ACTIVE
200 Gb/sec (4X HDR)
Ethernet
RoCE v2
1: CA
SOFTVERBS_NDEVS=2
real class entries: yes
real devices: yes
no staging left${real_bus_path:+
$real_bus_path}"
check "inside the namespace" "$got" "$want"

check "mounts on /sys outside" "$(sys_mounts)" "$mounts_before"
check "/sys/class outside" "$(ls -a /sys/class /sys/class/infiniband 2>&1)" "$class_before"
check "/sys/devices outside" "$(ls -a /sys/devices)" "$devices_before"

# The command's exit status is passed through.
"$SVS" -- sh -c 'exit 7'
check "exit status of the command" "$?" 7

# Refusals, with a message: a bad option value, no root, no unshare.
msg=$("$SVS" --ndevs 9 -- true 2>&1)
check "--ndevs 9" "$?:$msg" "2:sv-sysfs: --ndevs 9: softverbs has 1 to 8 devices"
if command -v setpriv >/dev/null 2>&1; then
  msg=$(setpriv --reuid=65534 --regid=65534 --clear-groups /bin/sh "$SVS" -- true 2>&1)
  check "not root" "$?:$msg" \
    "2:sv-sysfs: must run as root: it mounts over /sys in a private mount namespace"
fi
bin=$(mktemp -d /tmp/sv-sysfs-test.XXXXXX)
for t in id cat ls; do ln -s "$(command -v $t)" "$bin/$t"; done
msg=$(PATH=$bin /bin/sh "$SVS" --numa 0 -- true 2>&1)
check "no unshare" "$?:$msg" "2:sv-sysfs: unshare (util-linux) is missing"
rm -rf "$bin"

[ $fail = 0 ] && echo "ok: sv-sysfs entries inside, nothing changed outside, refusals"
exit $fail
