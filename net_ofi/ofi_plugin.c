/* strand-ofi — the plugin table (v12 semantics; the SDK exports ncclNetPlugin_v6..v12 from it),
 * init/finalize and device properties. The top layer: calls every other file, none calls it. */
#include <stdlib.h>

#include "ofi.h"
#include "strand/profiler.h"
#include "strand/collnet_stub.h"
#include "strand/gin_proxy.h"
#include "strand/lifetime.h"

typedef struct {
  uint64_t comm_id;
} ofi_ctx_t;

/* Plugin-wide state from the first init to the last finalize (strand/lifetime.h). Setup discovers
 * the devices (once per process: a later setup finds the same ones, whose endpoints reopen on
 * first use). Teardown closes every endpoint: comms of every context share them, so only the last
 * finalize (or library unload) does it; the core closes all comms before finalize. */
static strand_result_t ofi_setup(void) { return ofi_devs_init(); }

/* One rail: its endpoint, comms, registrations, control channel, domain. */
static void close_device(ofi_dev_t *d) {
  pthread_mutex_lock(&d->lock);
  if (d->open) {
    /* Closing the endpoint discards every operation still posted, so the contexts of draining
     * comms can be freed afterwards; registrations go before the domain. */
    ofi_dev_close_ep(d);
    ofi_conn_free_all(d);
    ofi_mr_cache_clear(d);
    ofi_ctrl_close(d);
    ofi_dev_close(d);
  }
  pthread_mutex_unlock(&d->lock);
}

/* Each rail's progress thread is joined (without the rail's lock, which it takes) before that
 * rail's endpoint and domain close, so no thread outlives the objects it progresses. */
static void ofi_teardown(void) {
  for (int k = 0; k < ofi_ndevs(); k++) {
    ofi_dev_t *d = ofi_dev_get(k);
    for (int r = 0; r < d->nrails; r++) {
      ofi_rail_stop(d->rails[r]);
      close_device(d->rails[r]);
    }
  }
}

STRAND_LIFETIME(ofi_life, ofi_setup, ofi_teardown, NULL);

static strand_result_t ofi_init(void **ctx, uint64_t commId, strand_comm_config_t *config,
                                strand_logger_t logFunction, strand_profiler_cb_t profFunction) {
  (void)config;
  if (!ctx) return STRAND_INVALID_ARGUMENT;
  strand_profiler_set(profFunction); /* net-plugin events of isend/irecv/test (ofi_xfer.c) */
  *ctx = NULL;
  strand_log_init(logFunction);
  strand_log_set_prefix(OFI_PLUGIN_NAME);
  strand_result_t r = strand_lifetime_acquire(&ofi_life);
  if (r != STRAND_SUCCESS) return r;
  ofi_ctx_t *c = calloc(1, sizeof *c);
  if (!c) {
    strand_lifetime_release(&ofi_life);
    return STRAND_SYSTEM_ERROR;
  }
  c->comm_id = commId;
  *ctx = c;
  return STRAND_SUCCESS;
}

static strand_result_t ofi_finalize(void *ctx) {
  if (!ctx) return STRAND_INVALID_ARGUMENT;
  free(ctx);
  strand_lifetime_release(&ofi_life);
  return STRAND_SUCCESS;
}

static strand_result_t ofi_devices(int *ndev) {
  if (!ndev) return STRAND_INVALID_ARGUMENT;
  *ndev = ofi_ndevs();
  return STRAND_SUCCESS;
}

static strand_result_t ofi_get_properties(int dev, strand_props_t *props) {
  ofi_dev_t *d = ofi_dev_get(dev);
  if (!d || !props) {
    STRAND_WARN("getProperties: device %d out of range (%d devices)", dev, ofi_ndevs());
    return STRAND_INVALID_ARGUMENT;
  }
  strand_props_init_host(props, dev); /* the core does not zero it: every field is ours */
  props->name = d->name;
  props->pciPath = d->pci_path;
  props->guid = d->guid;
  if (d->hmem) {
    props->ptrSupport |= STRAND_PTR_CUDA;
#ifdef STRAND_OFI_HAVE_DMABUF
    props->ptrSupport |= STRAND_PTR_DMABUF;
#endif
  }
  /* Registrations belong to the domain, not to a comm; with several rails a comm's domain is its
   * rail's, so a handle is valid only on comms of one rail: no longer global. */
  props->regIsGlobal = d->nrails == 1;
  props->speed = ofi_params.speed_mbps > 0 ? ofi_params.speed_mbps : d->speed_mbps;
  props->maxRecvs = OFI_MAX_RECVS;
  /* test() reports sizes as int: never promise more than INT_MAX per message. */
  size_t max = d->max_msg_size < 0x7fffffffu ? d->max_msg_size : 0x7fffffffu;
  props->maxP2pBytes = max;
  props->maxCollBytes = max < STRAND_MAX_COLLNET_SIZE_V8 ? max : STRAND_MAX_COLLNET_SIZE_V8;
  return STRAND_SUCCESS;
}


/* listen and connect need a live context: after the last finalize they are refused rather than
 * reopening devices (or dialling peers) that no finalize will close again. */
static strand_result_t ofi_listen_live(void *ctx, int dev, void *handle, void **listenComm) {
  if (listenComm) *listenComm = NULL;
  strand_result_t r = strand_lifetime_require(&ofi_life, OFI_PLUGIN_NAME, "listen");
  return r != STRAND_SUCCESS ? r : ofi_listen(ctx, dev, handle, listenComm);
}

static strand_result_t ofi_connect_live(void *ctx, int dev, void *handle, void **sendComm,
                                      strand_dev_handle_t **sendDevComm) {
  if (sendComm) *sendComm = NULL;
  strand_result_t r = strand_lifetime_require(&ofi_life, OFI_PLUGIN_NAME, "connect");
  return r != STRAND_SUCCESS ? r : ofi_connect(ctx, dev, handle, sendComm, sendDevComm);
}
static const strand_net_t ofi_net = {
    .name = OFI_PLUGIN_NAME,
    .init = ofi_init,
    .devices = ofi_devices,
    .getProperties = ofi_get_properties,
    .listen = ofi_listen_live,
    .connect = ofi_connect_live,
    .accept = ofi_accept,
    .regMr = ofi_reg_mr,
#ifdef STRAND_OFI_HAVE_DMABUF
    .regMrDmaBuf = ofi_reg_mr_dmabuf,
#else
    .regMrDmaBuf = NULL, /* libfabric without FI_MR_DMABUF: the core then never uses dmabuf */
#endif
    .deregMr = ofi_dereg_mr,
    .isend = ofi_isend,
    .irecv = ofi_irecv,
    .iflush = ofi_iflush,
    .test = ofi_test,
    .closeSend = ofi_close_send,
    .closeRecv = ofi_close_recv,
    .closeListen = ofi_close_listen,
    .getDeviceMr = NULL,
    .irecvConsumed = NULL,
    .makeVDevice = NULL,
    .finalize = ofi_finalize,
    .setNetAttr = NULL,
};

STRAND_NET_PLUGIN(ofi_net);
/* CollNet on the hosts over this transport (collnet_stub, meson option collnet_stub). */
STRAND_COLLNET_STUB_OPT_IN(ofi_net);
STRAND_GIN_PROXY_OPT_IN(ofi_net);
