/* Strand SDK — sysfs topology of network interfaces and NUMA helpers.
 *
 * NCCL places a network device in its topology graph from the properties the plugin reports
 * (spec §2.6): pciPath (the PCI device in sysfs; NULL for virtual devices), speed in Mbps (<= 0 is
 * read by core as 10000), and the plugin itself wants the NIC's NUMA node to place its threads and
 * buffers. This module reads those facts from sysfs for an interface name.
 *
 * Every path is read below a sysfs root that tests can redirect to a fake tree
 * (strand_topo_set_root). Paths returned to callers are always expressed as on the real system
 * ("/sys/devices/..."), with the fake root stripped.
 *
 * The two cpu_set_t functions are declared only when <sched.h> provides cpu_set_t, i.e. when
 * _GNU_SOURCE is defined before the first system header (Strand builds with it globally); the
 * rest of this header needs no feature macro. */
#ifndef STRAND_TOPO_H
#define STRAND_TOPO_H

#include <sched.h>
#include <stdbool.h>

#include "strand/abi/types.h"

#ifdef __cplusplus
extern "C" {
#endif

/* What NCCL's Socket transport reports when the link speed is unknown, and what core assumes for a
 * speed <= 0: 10 Gb/s. */
#define STRAND_TOPO_DEFAULT_SPEED_MBPS 10000

/* Redirects every sysfs read to `root` (a directory that contains "sys/..."), e.g. a temp dir that
 * a test filled with a fake tree. NULL or "" restores the real root "/". Not thread-safe against
 * concurrent topology reads: call it before them (tests only). STRAND_INVALID_ARGUMENT if the
 * path is too long (>= PATH_MAX). */
strand_result_t strand_topo_set_root(const char *root);

/* The root currently in use ("" for the real one). */
const char *strand_topo_root(void);

/* Topology of one network interface. */
typedef struct {
  /* Real-system path of the PCI function behind the interface, e.g.
   * "/sys/devices/pci0000:00/0000:00:03.0": realpath of /sys/class/net/<if>/device, trimmed to the
   * nearest ancestor that is a PCI function when the link points below one (virtio: ".../virtio2"),
   * so that NCCL can read the bus id from its last component. NULL when the interface has no
   * device link (lo, veth, bridges) or it is not under a PCI function (/sys/devices/virtual/...,
   * platform devices). Owned by this struct: free with strand_topo_netif_free. */
  char *pci_path;
  bool is_virtual;  /* no PCI function found (pci_path == NULL) */
  int numa_node;    /* from <pci>/numa_node; -1 unknown (virtual, single-node hosts report -1) */
  int speed_mbps;   /* /sys/class/net/<if>/speed when > 0, else the caller's default */
  bool speed_known; /* speed_mbps came from sysfs */
  int vendor_id;    /* PCI vendor id (e.g. 0x1d0f AWS ENA, 0x1ae0 Google gVNIC); -1 if not PCI */
  int device_id;    /* PCI device id; -1 if not PCI */
} strand_netif_topo_t;

/* Reads the topology of interface `ifname`. `default_speed_mbps` is used when sysfs has no speed,
 * reports it as <= 0 (-1 = unknown, link down reads fail) or the device is virtual; a value <= 0
 * there selects STRAND_TOPO_DEFAULT_SPEED_MBPS. Missing files are not errors (fields fall back
 * to unknown). Returns STRAND_INVALID_ARGUMENT for NULL/empty/too-long names or a name containing
 * '/'; STRAND_INVALID_USAGE (WARN) if /sys/class/net/<if> does not exist; STRAND_SYSTEM_ERROR if
 * out of memory. On error *topo is still initialised (all unknown, pci_path NULL). */
strand_result_t strand_topo_netif(const char *ifname, int default_speed_mbps,
                                  strand_netif_topo_t *topo);

/* Frees topo->pci_path and resets it to NULL. Safe on an already-freed or zeroed struct. */
void strand_topo_netif_free(strand_netif_topo_t *topo);

/* Number of online CPUs (sysconf), at least 1. */
int strand_topo_num_cpus(void);

#ifdef CPU_SETSIZE
/* Parses a Linux cpulist ("0-3,8,10-11", blanks and a trailing newline allowed; "" = empty set)
 * into `set` (cleared first). STRAND_INVALID_ARGUMENT for malformed text, reversed ranges or CPUs
 * >= CPU_SETSIZE. */
strand_result_t strand_topo_parse_cpulist(const char *text, cpu_set_t *set);

/* CPUs of NUMA node `node` from <root>/sys/devices/system/node/node<N>/cpulist.
 * STRAND_INVALID_ARGUMENT for node < 0, STRAND_SYSTEM_ERROR if the file cannot be read, or
 * the parse error. */
strand_result_t strand_topo_numa_cpus(int node, cpu_set_t *set);
#endif

/* Restricts the calling thread to the CPUs of NUMA node `node` that it is currently allowed to run
 * on. A no-op returning STRAND_SUCCESS when node < 0, the node's cpulist cannot be read, or the
 * intersection is empty (an INFO-worthy situation, not an error: placement is an optimisation).
 * STRAND_SYSTEM_ERROR (WARN) only if the affinity calls themselves fail. `*pinned` (may be NULL)
 * tells whether the affinity was changed. */
strand_result_t strand_topo_pin_thread_to_numa(int node, bool *pinned);

#ifdef __cplusplus
}
#endif

#endif
