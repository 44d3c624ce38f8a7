/* strand-socket — the plugin table: init/finalize, devices and properties, registration.
 *
 * One device per interface selected by NCCL_SOCKET_IFNAME / NCCL_SOCKET_FAMILY (SDK helpers).
 * Plugin-wide state (devices, configuration, worker pool) is created by the first init and
 * released when the last context is finalized with no connection left, or at library unload. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "socket_internal.h"
#include "strand/log.h"
#include "strand/topo.h"

/* Properties' latency estimate (µs): half of the 8-byte ping-pong round trip measured over
 * loopback on the CI-class machine (docs/benchmarks/socket.md); a physical NIC adds its own. */
#define SK_LATENCY_US 15.0f
/* Reported when sysfs has no speed (virtual NICs, loopback): such interfaces are as fast as the
 * memory system; 100 Gb/s lets NCCL open enough channels without over-promising (an operator
 * can still correct it with NCCL_TOPO_FILE). */
#define SK_FALLBACK_SPEED_MBPS 100000

static struct {
  pthread_mutex_t lock;
  int refs;
  bool ready;
  int ndev;
  sk_dev_t devs[SK_MAX_DEVS];
  sk_config_t cfg;
  _Atomic int comms;
} g = {.lock = PTHREAD_MUTEX_INITIALIZER};

const sk_config_t *sk_config(void) { return &g.cfg; }
const sk_dev_t *sk_device(int dev) { return &g.devs[dev]; }
int sk_device_count(void) { return g.ndev; }
void sk_comm_count_add(int delta) { atomic_fetch_add(&g.comms, delta); }

static void release_devices(void) {
  for (int i = 0; i < g.ndev; i++) {
    free(g.devs[i].pci_path);
    g.devs[i].pci_path = NULL;
  }
  g.ndev = 0;
}

static strand_result_t global_setup(void) {
  strand_netif_t ifs[SK_MAX_DEVS];
  int n = 0;
  strand_result_t rc = strand_netif_find_from_env(ifs, SK_MAX_DEVS, &n);
  if (rc != STRAND_SUCCESS) return rc;
  int numa = -2, fastest = 0;
  bool any_unknown = false;
  for (int i = 0; i < n; i++) {
    sk_dev_t *d = &g.devs[i];
    strand_netif_topo_t t;
    memset(d, 0, sizeof *d);
    d->netif = ifs[i];
    d->numa_node = -1;
    d->speed_mbps = SK_FALLBACK_SPEED_MBPS;
    if (strand_topo_netif(ifs[i].name, SK_FALLBACK_SPEED_MBPS, &t) == STRAND_SUCCESS) {
      d->pci_path = t.pci_path; /* ownership moves to the device */
      t.pci_path = NULL;
      d->numa_node = t.numa_node;
      d->speed_known = t.speed_known;
      if (t.speed_known) d->speed_mbps = t.speed_mbps;
    }
    strand_topo_netif_free(&t);
    any_unknown |= !d->speed_known;
    if (d->speed_mbps > fastest) fastest = d->speed_mbps;
    numa = (numa == -2 || numa == d->numa_node) ? d->numa_node : -1;
    g.ndev = i + 1;
  }
  /* Unknown speed (virtual NIC, loopback): size threads and streams for a fast link. */
  rc = sk_config_load(&g.cfg, any_unknown ? -1 : fastest, strand_topo_num_cpus());
  if (rc != STRAND_SUCCESS) {
    release_devices();
    return rc;
  }
  int pin_node = (g.cfg.numa_pin && numa >= 0) ? numa : -1;
  rc = sk_workers_start(g.cfg.nthreads, pin_node);
  if (rc != STRAND_SUCCESS) {
    release_devices();
    return rc;
  }
  for (int i = 0; i < g.ndev; i++) {
    char a[STRAND_SOCKADDR_STRLEN];
    sk_dev_t *d = &g.devs[i];
    STRAND_INFO(STRAND_SUBSYS_INIT | STRAND_SUBSYS_NET,
                "NET/strand-socket: dev %d %s %s, speed %d Mb/s%s, NUMA %d, pci %s", i,
                d->netif.name, strand_sockaddr_to_string(&d->netif.addr, a, sizeof a),
                d->speed_mbps, d->speed_known ? "" : " (not in sysfs: assumed)", d->numa_node,
                d->pci_path ? d->pci_path : "none (virtual)");
  }
  char zc[48] = "zero-copy off";
  if (g.cfg.zc_threshold > 0)
    snprintf(zc, sizeof zc, "zero-copy chunks >= %zu B", g.cfg.zc_threshold);
  STRAND_INFO(STRAND_SUBSYS_INIT | STRAND_SUBSYS_NET,
              "NET/strand-socket: using %d worker threads (%s), %d data streams per connection "
              "(%s), inline <= %zu B, chunks >= %zu B, %s, %d CPUs",
              g.cfg.nthreads, g.cfg.nthreads_src, g.cfg.nstreams, g.cfg.nstreams_src,
              g.cfg.inline_max, g.cfg.min_chunk, zc, strand_topo_num_cpus());
  return STRAND_SUCCESS;
}

static void global_teardown(void) {
  sk_workers_stop();
  release_devices();
  g.ready = false;
}

static strand_result_t sk_init(void **ctx, uint64_t commId, strand_comm_config_t *config,
                               strand_logger_t logger, strand_profiler_cb_t prof) {
  (void)prof;
  if (ctx == NULL) return STRAND_INVALID_ARGUMENT;
  *ctx = NULL;
  strand_log_init(logger);
  strand_log_set_prefix(SK_PLUGIN_NAME);
  int tc = config ? config->trafficClass : STRAND_NET_TRAFFIC_CLASS_UNDEF;
  if (tc != STRAND_NET_TRAFFIC_CLASS_UNDEF && (tc < 0 || tc > 255)) {
    STRAND_WARN("init: trafficClass %d is not a valid IP TOS byte (0..255, or -1 for none); "
                "check ncclConfig_t.trafficClass", tc);
    return STRAND_INVALID_USAGE;
  }
  sk_ctx_t *x = calloc(1, sizeof *x);
  if (x == NULL) return STRAND_SYSTEM_ERROR;
  x->comm_id = commId;
  x->traffic_class = tc;
  pthread_mutex_lock(&g.lock);
  strand_result_t rc = STRAND_SUCCESS;
  if (!g.ready) {
    rc = global_setup();
    if (rc == STRAND_SUCCESS) g.ready = true;
  }
  if (rc == STRAND_SUCCESS) g.refs++;
  pthread_mutex_unlock(&g.lock);
  if (rc != STRAND_SUCCESS) {
    free(x);
    return rc;
  }
  *ctx = x;
  return STRAND_SUCCESS;
}

static strand_result_t sk_finalize(void *ctx) {
  free(ctx);
  pthread_mutex_lock(&g.lock);
  if (g.refs > 0 && --g.refs == 0) {
    if (atomic_load(&g.comms) == 0) {
      global_teardown();
    } else {
      STRAND_WARN("finalize: %d connections were not closed; keeping the worker threads until "
                  "the library is unloaded", atomic_load(&g.comms));
    }
  }
  pthread_mutex_unlock(&g.lock);
  return STRAND_SUCCESS;
}

/* Threads must not outlive the code they run: NCCL dlcloses the plugin after the last finalize,
 * and v6..v10 cores never call finalize at all. */
__attribute__((destructor)) static void sk_unload(void) {
  pthread_mutex_lock(&g.lock);
  if (g.ready) global_teardown();
  pthread_mutex_unlock(&g.lock);
}

static strand_result_t sk_devices(int *ndev) {
  if (ndev == NULL) return STRAND_INVALID_ARGUMENT;
  *ndev = g.ndev;
  return STRAND_SUCCESS;
}

static strand_result_t sk_get_properties(int dev, strand_props_t *p) {
  if (p == NULL) return STRAND_INVALID_ARGUMENT;
  if (dev < 0 || dev >= g.ndev) {
    STRAND_WARN("getProperties: device %d does not exist (strand-socket has %d)", dev, g.ndev);
    return STRAND_INVALID_ARGUMENT;
  }
  const sk_dev_t *d = &g.devs[dev];
  memset(p, 0, sizeof *p);
  p->name = (char *)d->netif.name;
  p->pciPath = d->pci_path;
  p->guid = (uint64_t)dev;
  p->ptrSupport = STRAND_PTR_HOST;
  p->regIsGlobal = 0;
  p->forceFlush = 0;
  p->speed = d->speed_mbps;
  p->port = 0;
  p->latency = SK_LATENCY_US;
  p->maxComms = 65536;
  p->maxRecvs = SK_MAX_RECVS;
  p->netDeviceType = STRAND_DEV_HOST;
  p->netDeviceVersion = 0;
  p->vProps.ndevs = 1;
  p->vProps.devs[0] = dev;
  p->maxP2pBytes = SK_MAX_MSG;
  p->maxCollBytes = STRAND_MAX_COLLNET_SIZE_V8;
  p->maxMultiRequestSize = 1;
  p->railId = STRAND_NET_ID_UNDEF;
  p->planeId = STRAND_NET_ID_UNDEF;
  return STRAND_SUCCESS;
}

typedef struct {
  void *comm;
  void *data;
  size_t size;
} sk_mr_t;

static strand_result_t sk_reg_mr(void *comm, void *data, size_t size, int type, void **mhandle) {
  if (mhandle == NULL) return STRAND_INVALID_ARGUMENT;
  *mhandle = NULL;
  if (type != STRAND_PTR_HOST) {
    STRAND_WARN("regMr: strand-socket only sends from host memory (type %d requested, %zu bytes "
                "at %p); GPU buffers are staged through host memory by NCCL", type, size, data);
    return STRAND_INTERNAL_ERROR;
  }
  sk_mr_t *mr = malloc(sizeof *mr);
  if (mr == NULL) return STRAND_SYSTEM_ERROR;
  *mr = (sk_mr_t){comm, data, size};
  *mhandle = mr;
  return STRAND_SUCCESS;
}

static strand_result_t sk_dereg_mr(void *comm, void *mhandle) {
  (void)comm;
  free(mhandle);
  return STRAND_SUCCESS;
}

static const strand_net_t sk_net = {
    .name = SK_PLUGIN_NAME,
    .init = sk_init,
    .devices = sk_devices,
    .getProperties = sk_get_properties,
    .listen = sk_listen,
    .connect = sk_connect,
    .accept = sk_accept,
    .regMr = sk_reg_mr,
    .regMrDmaBuf = NULL,
    .deregMr = sk_dereg_mr,
    .isend = sk_isend,
    .irecv = sk_irecv,
    .iflush = sk_iflush,
    .test = sk_test,
    .closeSend = sk_close_send,
    .closeRecv = sk_close_recv,
    .closeListen = sk_close_listen,
    .getDeviceMr = NULL,
    .irecvConsumed = NULL,
    .makeVDevice = NULL,
    .finalize = sk_finalize,
    .setNetAttr = NULL,
};

STRAND_NET_PLUGIN(sk_net);
