/* strand-ib — the plugin table (v12 semantics; the SDK exports ncclNetPlugin_v6..v12 from it),
 * init/finalize, devices, getProperties and makeVDevice. The top layer: calls every other file,
 * none calls it. */
#include <stdlib.h>

#include "ib.h"
#include "strand/profiler.h"
#include "strand/collnet_stub.h"
#include "strand/gin_proxy.h"
#include "strand/lifetime.h"

void ib_conn_teardown(void); /* ib_conn.c */

typedef struct {
  uint64_t comm_id;
} ib_ctx_t;

/* Devices are found once per process (the list is what NCCL indexes); the async-event threads
 * run from the first init to the last finalize, or to library unload for cores that never call
 * finalize (v6..v10). */
static strand_result_t ib_setup(void) {
  strand_result_t r = ib_devs_init();
  if (r != STRAND_SUCCESS) return r;
  ib_async_start();
  return STRAND_SUCCESS;
}

static void ib_teardown(void) {
  ib_conn_teardown();
  ib_async_stop();
}

STRAND_LIFETIME(ib_life, ib_setup, ib_teardown, ib_open_comms);

static strand_result_t ib_init(void **ctx, uint64_t commId, strand_comm_config_t *config,
                               strand_logger_t logFunction, strand_profiler_cb_t profFunction) {
  (void)config;
  strand_profiler_set(profFunction); /* net-plugin events of isend/irecv/test (ib_xfer.c) */
  if (!ctx) return STRAND_INVALID_ARGUMENT;
  *ctx = NULL;
  strand_log_init(logFunction);
  strand_log_set_prefix(IB_PLUGIN_NAME);
  strand_result_t r = strand_lifetime_acquire(&ib_life);
  if (r != STRAND_SUCCESS) return r;
  ib_ctx_t *c = calloc(1, sizeof *c);
  if (!c) {
    strand_lifetime_release(&ib_life);
    return STRAND_SYSTEM_ERROR;
  }
  c->comm_id = commId;
  *ctx = c;
  return STRAND_SUCCESS;
}

static strand_result_t ib_finalize(void *ctx) {
  if (!ctx) return STRAND_INVALID_ARGUMENT;
  free(ctx);
  strand_lifetime_release(&ib_life);
  return STRAND_SUCCESS;
}

static strand_result_t ib_devices(int *ndev) {
  if (!ndev) return STRAND_INVALID_ARGUMENT;
  *ndev = ib_ndevs();
  return STRAND_SUCCESS;
}

static strand_result_t ib_get_properties(int dev, strand_props_t *props) {
  ib_dev_t *d = ib_dev_get(dev);
  if (!d || !props) {
    STRAND_WARN("getProperties: device %d out of range (%d devices)", dev, ib_ndevs());
    return STRAND_INVALID_ARGUMENT;
  }
  strand_props_init_host(props, dev); /* the core does not zero it: every field is ours */
  ib_dev_t *first = ib_dev_get(d->rails[0]);
  props->name = d->name;
  props->pciPath = first->hca->pci_path;
  props->guid = d->guid;
  /* GPU memory (CUDA, DMABUF) only where every rail's HCA can really register it (ib_gpu.c:
   * nvidia-peermem or a working registration, a dma-buf-capable provider); host memory always. */
  int gpu = STRAND_PTR_CUDA | STRAND_PTR_DMABUF;
  for (int i = 0; i < d->nrails; i++) gpu &= ib_hca_gpu_ptr_support(ib_dev_get(d->rails[i])->hca);
  props->ptrSupport = STRAND_PTR_HOST | gpu;
  /* Registrations belong to the HCAs of the comm they were made on (a virtual device spans
   * several): the core must register per comm. */
  props->regIsGlobal = 0;
  props->speed = d->speed_mbps > 0 ? d->speed_mbps : 10000;
  props->port = d->is_virtual ? first->port : d->port;
  props->maxRecvs = IB_MAX_RECVS;
  props->vProps.ndevs = d->nrails;
  for (int i = 0; i < d->nrails; i++) props->vProps.devs[i] = d->rails[i];
  size_t max = d->max_msg < 0x7fffffffu ? d->max_msg : 0x7fffffffu;
  if (max < props->maxP2pBytes) props->maxP2pBytes = max;
  if (max < props->maxCollBytes) props->maxCollBytes = max;
  return STRAND_SUCCESS;
}

static strand_result_t ib_make_vdevice(int *d, strand_vprops_t *props) {
  if (!d || !props) return STRAND_INVALID_ARGUMENT;
  return ib_dev_add_virtual(props->devs, props->ndevs, d);
}


/* listen and connect need a live context: after the last finalize they are refused rather than
 * reopening devices (or dialling peers) that no finalize will close again. */
static strand_result_t ib_listen_live(void *ctx, int dev, void *handle, void **listenComm) {
  if (listenComm) *listenComm = NULL;
  strand_result_t r = strand_lifetime_require(&ib_life, IB_PLUGIN_NAME, "listen");
  return r != STRAND_SUCCESS ? r : ib_listen(ctx, dev, handle, listenComm);
}

static strand_result_t ib_connect_live(void *ctx, int dev, void *handle, void **sendComm,
                                      strand_dev_handle_t **sendDevComm) {
  if (sendComm) *sendComm = NULL;
  strand_result_t r = strand_lifetime_require(&ib_life, IB_PLUGIN_NAME, "connect");
  return r != STRAND_SUCCESS ? r : ib_connect(ctx, dev, handle, sendComm, sendDevComm);
}
static const strand_net_t ib_net = {
    .name = IB_PLUGIN_NAME,
    .init = ib_init,
    .devices = ib_devices,
    .getProperties = ib_get_properties,
    .listen = ib_listen_live,
    .connect = ib_connect_live,
    .accept = ib_accept,
    .regMr = ib_reg_mr,
    .regMrDmaBuf = ib_reg_mr_dmabuf,
    .deregMr = ib_dereg_mr,
    .isend = ib_isend,
    .irecv = ib_irecv,
    .iflush = ib_iflush,
    .test = ib_test,
    .closeSend = ib_close_send,
    .closeRecv = ib_close_recv,
    .closeListen = ib_close_listen,
    .getDeviceMr = NULL,
    .irecvConsumed = NULL,
    .makeVDevice = ib_make_vdevice,
    .finalize = ib_finalize,
    .setNetAttr = NULL,
};

STRAND_NET_PLUGIN(ib_net);
/* CollNet on the hosts over this transport (collnet_stub, meson option collnet_stub). On a net
 * that supports GPU memory the stub stays dormant unless NCCL_COLLNET_ENABLE=1, so that its
 * host-only CollNet device does not switch GPUDirect off for the net (docs/plugins/collnet.md). */
STRAND_COLLNET_STUB_OPT_IN(ib_net);
STRAND_GIN_PROXY_OPT_IN(ib_net);
