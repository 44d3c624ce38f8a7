/* strand-socket — the plugin table: init/finalize, devices and properties, registration.
 *
 * Plugin-wide state (devices, configuration, worker pool: sk_dev.c) is created by the first init
 * and released when the last context is finalized with no connection left, or at library unload
 * (strand/lifetime.h). */
#include <stdlib.h>

#include "sk.h"
#include "strand/collnet_stub.h"
#include "strand/gin_proxy.h"
#include "strand/lifetime.h"
#include "strand/log.h"
#include "strand/profiler.h"

/* Properties' latency estimate (µs): half of the 8-byte ping-pong round trip measured over
 * loopback on the CI-class machine (docs/benchmarks/socket.md); a physical NIC adds its own. */
#define SK_LATENCY_US 15.0f

/* Threads must not outlive the code they run: NCCL dlcloses the plugin after the last finalize,
 * and v6..v10 cores never call finalize at all. The helper tears down at unload too, and leaves
 * the state alone at the last finalize while connections are open. */
STRAND_LIFETIME(sk_life, sk_dev_setup, sk_dev_teardown, sk_comm_count);

static strand_result_t sk_init(void **ctx, uint64_t commId, strand_comm_config_t *config,
                               strand_logger_t logger, strand_profiler_cb_t prof) {
  if (ctx == NULL) return STRAND_INVALID_ARGUMENT;
  strand_profiler_set(prof); /* net-plugin events of isend/irecv/test (sk_xfer.c) */
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
  strand_result_t rc = strand_lifetime_acquire(&sk_life);
  if (rc != STRAND_SUCCESS) {
    free(x);
    return rc;
  }
  *ctx = x;
  return STRAND_SUCCESS;
}

static strand_result_t sk_finalize(void *ctx) {
  free(ctx);
  strand_lifetime_release(&sk_life);
  return STRAND_SUCCESS;
}

static strand_result_t sk_devices(int *ndev) {
  if (ndev == NULL) return STRAND_INVALID_ARGUMENT;
  *ndev = sk_device_count();
  return STRAND_SUCCESS;
}

static strand_result_t sk_get_properties(int dev, strand_props_t *p) {
  if (p == NULL) return STRAND_INVALID_ARGUMENT;
  if (dev < 0 || dev >= sk_device_count()) {
    STRAND_WARN("getProperties: device %d does not exist (strand-socket has %d)", dev,
                sk_device_count());
    return STRAND_INVALID_ARGUMENT;
  }
  const sk_dev_t *d = sk_device(dev);
  /* Host-memory defaults (guid dev, HOST pointers, 65536 comms, one device per vDevice, ids
   * derived by the core, ...); what follows is what strand-socket reports differently. */
  strand_props_init_host(p, dev);
  p->name = (char *)d->netif.name;
  p->pciPath = d->pci_path;
  p->speed = d->speed_mbps;
  p->latency = SK_LATENCY_US;
  p->maxRecvs = SK_MAX_RECVS;
  p->maxP2pBytes = SK_MAX_MSG;
  if (sk_unpack_mode()) sk_unpack_props(p);
  return STRAND_SUCCESS;
}


/* listen and connect need a live context: after the last finalize they are refused rather than
 * reopening devices (or dialling peers) that no finalize will close again. */
static strand_result_t sk_listen_live(void *ctx, int dev, void *handle, void **listenComm) {
  if (listenComm) *listenComm = NULL;
  strand_result_t r = strand_lifetime_require(&sk_life, SK_PLUGIN_NAME, "listen");
  return r != STRAND_SUCCESS ? r : sk_listen(ctx, dev, handle, listenComm);
}

static strand_result_t sk_connect_live(void *ctx, int dev, void *handle, void **sendComm,
                                      strand_dev_handle_t **sendDevComm) {
  if (sendComm) *sendComm = NULL;
  strand_result_t r = strand_lifetime_require(&sk_life, SK_PLUGIN_NAME, "connect");
  return r != STRAND_SUCCESS ? r : sk_connect(ctx, dev, handle, sendComm, sendDevComm);
}
static const strand_net_t sk_net = {
    .name = SK_PLUGIN_NAME,
    .init = sk_init,
    .devices = sk_devices,
    .getProperties = sk_get_properties,
    .listen = sk_listen_live,
    .connect = sk_connect_live,
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
    .getDeviceMr = sk_get_device_mr,
    .irecvConsumed = sk_irecv_consumed,
    .makeVDevice = NULL,
    .finalize = sk_finalize,
    .setNetAttr = NULL,
};

STRAND_NET_PLUGIN(sk_net);
/* CollNet on the hosts over this transport (collnet_stub, meson option collnet_stub). */
STRAND_COLLNET_STUB_OPT_IN(sk_net);
STRAND_GIN_PROXY_OPT_IN(sk_net);
