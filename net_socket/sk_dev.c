/* strand-socket — global set-up: one device per interface selected by NCCL_SOCKET_IFNAME /
 * NCCL_SOCKET_FAMILY (SDK helpers), its speed and NUMA node from sysfs, the configuration sized
 * for them, and the worker pool; and the reverse. The plugin lifetime (sk_plugin.c) runs these on
 * the first init and after the last finalize or at library unload; the results are kept in
 * sk_config.c, where the data path reads them. */
#include <stdio.h>
#include <string.h>

#include "sk.h"
#include "strand/log.h"
#include "strand/topo.h"

/* Reported when sysfs has no speed (virtual NICs, loopback): such interfaces are as fast as the
 * memory system; 100 Gb/s lets NCCL open enough channels without over-promising (an operator
 * can still correct it with NCCL_TOPO_FILE). */
#define SK_FALLBACK_SPEED_MBPS 100000

/* Fills d from the interface and what sysfs knows about it. */
static void probe_device(sk_dev_t *d, const strand_netif_t *netif) {
  strand_netif_topo_t t;
  memset(d, 0, sizeof *d);
  d->netif = *netif;
  d->numa_node = -1;
  d->speed_mbps = SK_FALLBACK_SPEED_MBPS;
  if (strand_topo_netif(netif->name, SK_FALLBACK_SPEED_MBPS, &t) == STRAND_SUCCESS) {
    d->pci_path = t.pci_path; /* ownership moves to the device */
    t.pci_path = NULL;
    d->numa_node = t.numa_node;
    d->speed_known = t.speed_known;
    if (t.speed_known) d->speed_mbps = t.speed_mbps;
  }
  strand_topo_netif_free(&t);
}

static void log_setup(void) {
  const sk_config_t *cfg = sk_config();
  for (int i = 0; i < sk_device_count(); i++) {
    char a[STRAND_SOCKADDR_STRLEN];
    const sk_dev_t *d = sk_device(i);
    STRAND_INFO(STRAND_SUBSYS_INIT | STRAND_SUBSYS_NET,
                "dev %d %s %s, speed %d Mb/s%s, NUMA %d, pci %s", i,
                d->netif.name, strand_sockaddr_to_string(&d->netif.addr, a, sizeof a),
                d->speed_mbps, d->speed_known ? "" : " (not in sysfs: assumed)", d->numa_node,
                d->pci_path ? d->pci_path : "none (virtual)");
  }
  char zc[48] = "zero-copy off";
  if (cfg->zc_threshold > 0)
    snprintf(zc, sizeof zc, "zero-copy chunks >= %zu B", cfg->zc_threshold);
  STRAND_INFO(STRAND_SUBSYS_INIT | STRAND_SUBSYS_NET,
              "using %d worker threads (%s), %d data streams per connection "
              "(%s), inline <= %zu B, eager <= %zu B, chunks >= %zu B, %s, control hand-off "
              "%s (%s, spin %d us, writes >= %zu B), %d CPUs",
              cfg->nthreads, cfg->nthreads_src, cfg->nstreams, cfg->nstreams_src,
              cfg->inline_max, cfg->eager_max, cfg->min_chunk, zc, cfg->handoff ? "on" : "off",
              cfg->handoff_src, cfg->handoff_spin_us, cfg->handoff_min, strand_topo_num_cpus());
}

strand_result_t sk_dev_setup(void) {
  strand_netif_t ifs[SK_MAX_DEVS];
  sk_dev_t devs[SK_MAX_DEVS];
  int n = 0;
  strand_result_t rc = strand_netif_find_from_env(ifs, SK_MAX_DEVS, &n);
  if (rc != STRAND_SUCCESS) return rc;
  int numa = -2, fastest = 0;
  bool any_unknown = false;
  for (int i = 0; i < n; i++) {
    sk_dev_t *d = &devs[i];
    probe_device(d, &ifs[i]);
    any_unknown |= !d->speed_known;
    if (d->speed_mbps > fastest) fastest = d->speed_mbps;
    numa = (numa == -2 || numa == d->numa_node) ? d->numa_node : -1;
  }
  sk_devices_set(devs, n);
  /* Unknown speed (virtual NIC, loopback): size threads and streams for a fast link. */
  rc = sk_config_load(any_unknown ? -1 : fastest, strand_topo_num_cpus());
  if (rc != STRAND_SUCCESS) {
    sk_devices_release();
    return rc;
  }
  const sk_config_t *cfg = sk_config();
  int pin_node = (cfg->numa_pin && numa >= 0) ? numa : -1;
  rc = sk_workers_start(cfg->nthreads, pin_node);
  if (rc != STRAND_SUCCESS) {
    sk_devices_release();
    return rc;
  }
  log_setup();
  return STRAND_SUCCESS;
}

void sk_dev_teardown(void) {
  sk_conn_teardown();
  sk_workers_stop();
  sk_devices_release();
}
