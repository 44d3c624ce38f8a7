/* strand-ofi — the plugin table (v12 semantics; the SDK exports ncclNetPlugin_v6..v12 from it),
 * init/finalize and device properties. */
#include <stdlib.h>
#include <string.h>

#include "ofi.h"

typedef struct {
  uint64_t comm_id;
} ofi_ctx_t;

static pthread_mutex_t ctx_lock = PTHREAD_MUTEX_INITIALIZER;
static int live_ctx;

static strand_result_t ofi_init(void **ctx, uint64_t commId, strand_comm_config_t *config,
                                strand_logger_t logFunction, strand_profiler_cb_t profFunction) {
  (void)config, (void)profFunction;
  if (!ctx) return STRAND_INVALID_ARGUMENT;
  *ctx = NULL;
  strand_log_init(logFunction);
  strand_log_set_prefix(OFI_PLUGIN_NAME);
  strand_result_t r = ofi_fabric_init();
  if (r != STRAND_SUCCESS) return r;
  ofi_ctx_t *c = calloc(1, sizeof *c);
  if (!c) return STRAND_SYSTEM_ERROR;
  c->comm_id = commId;
  pthread_mutex_lock(&ctx_lock);
  live_ctx++;
  pthread_mutex_unlock(&ctx_lock);
  *ctx = c;
  return STRAND_SUCCESS;
}

static strand_result_t ofi_finalize(void *ctx) {
  if (!ctx) return STRAND_INVALID_ARGUMENT;
  free(ctx);
  pthread_mutex_lock(&ctx_lock);
  /* Endpoints stay open while other contexts live: comms of every context share them. The last
   * finalize closes them (the core closes all comms before finalize). */
  bool last = --live_ctx == 0;
  pthread_mutex_unlock(&ctx_lock);
  if (last) ofi_devs_close_all();
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
  memset(props, 0, sizeof *props); /* the core does not zero it: every field is ours to set */
  props->name = d->name;
  props->pciPath = d->pci_path;
  props->guid = d->guid;
  props->ptrSupport = STRAND_PTR_HOST;
  if (d->hmem) {
    props->ptrSupport |= STRAND_PTR_CUDA;
#ifdef STRAND_OFI_HAVE_DMABUF
    props->ptrSupport |= STRAND_PTR_DMABUF;
#endif
  }
  props->regIsGlobal = 1; /* registrations belong to the domain, not to a comm */
  props->forceFlush = 0;
  props->speed = d->speed_mbps;
  props->port = 0;
  props->latency = 0;
  props->maxComms = 65536;
  props->maxRecvs = OFI_MAX_RECVS;
  props->netDeviceType = STRAND_DEV_HOST;
  props->netDeviceVersion = STRAND_NET_DEVICE_INVALID_VERSION;
  props->vProps.ndevs = 1;
  props->vProps.devs[0] = dev;
  /* test() reports sizes as int: never promise more than INT_MAX per message. */
  size_t max = d->max_msg_size < 0x7fffffffu ? d->max_msg_size : 0x7fffffffu;
  props->maxP2pBytes = max;
  props->maxCollBytes = max < STRAND_MAX_COLLNET_SIZE_V8 ? max : STRAND_MAX_COLLNET_SIZE_V8;
  props->maxMultiRequestSize = 1;
  props->railId = STRAND_NET_ID_UNDEF;
  props->planeId = STRAND_NET_ID_UNDEF;
  return STRAND_SUCCESS;
}

static const strand_net_t ofi_net = {
    .name = OFI_PLUGIN_NAME,
    .init = ofi_init,
    .devices = ofi_devices,
    .getProperties = ofi_get_properties,
    .listen = ofi_listen,
    .connect = ofi_connect,
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
