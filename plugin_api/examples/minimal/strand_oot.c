/* A minimal out-of-tree Strand plugin: one v12-semantics table and STRAND_NET_PLUGIN().
 * Linking libstrand-sdk turns it into ncclNetPlugin_v6 .. ncclNetPlugin_v12.
 *
 * It is the skeleton shown in docs/plugin-author-guide.md, compiled by the packaging test so the
 * guide's example cannot rot. It has one device and no transport: connection set-up reports
 * STRAND_SYSTEM_ERROR, which is what a real plugin does when its network is unusable. */
#include <stdio.h>
#include <string.h>

#include "strand/plugin.h"

static strand_logger_t oot_log; /* NCCL's logger, kept from init */

static strand_result_t oot_init(void **ctx, uint64_t commId, strand_comm_config_t *config,
                                strand_logger_t logger, strand_profiler_cb_t prof) {
  (void)prof;
  oot_log = logger;
  *ctx = NULL; /* no per-communicator state in this skeleton */
  if (logger)
    logger(STRAND_LOG_INFO, STRAND_SUBSYS_NET | STRAND_SUBSYS_INIT, __FILE__, __LINE__,
           "strand-oot: init for comm %llx (core ABI v%d, trafficClass %d, %d requests per comm)",
           (unsigned long long)commId, strand_core_abi_version(),
           config ? config->trafficClass : STRAND_NET_TRAFFIC_CLASS_UNDEF,
           strand_core_max_requests());
  return STRAND_SUCCESS;
}

static strand_result_t oot_devices(int *ndev) {
  *ndev = 1;
  return STRAND_SUCCESS;
}

static strand_result_t oot_get_properties(int dev, strand_props_t *props) {
  /* NCCL does not zero this struct: write every field. */
  *props = (strand_props_t){
      .name = (char *)"strand-oot0",
      .pciPath = NULL, /* a virtual device has no PCI path */
      .guid = (uint64_t)dev,
      .ptrSupport = STRAND_PTR_HOST,
      .regIsGlobal = 0,
      .forceFlush = 0,
      .speed = 10000, /* Mbps */
      .port = 0,
      .latency = 0,
      .maxComms = 65536,
      .maxRecvs = 1,
      .netDeviceType = STRAND_DEV_HOST,
      .netDeviceVersion = STRAND_NET_DEVICE_INVALID_VERSION,
      .vProps = {.ndevs = 1, .devs = {dev}},
      .maxP2pBytes = STRAND_MAX_NET_SIZE_V8,
      .maxCollBytes = STRAND_MAX_COLLNET_SIZE_V8,
      .maxMultiRequestSize = 1,
      .railId = STRAND_NET_ID_UNDEF,
      .planeId = STRAND_NET_ID_UNDEF,
  };
  return STRAND_SUCCESS;
}

static strand_result_t no_transport(const char *call) {
  if (oot_log)
    oot_log(STRAND_LOG_WARN, STRAND_SUBSYS_NET, __FILE__, __LINE__,
            "strand-oot: %s: this skeleton has no transport; build a real one on the SDK", call);
  return STRAND_SYSTEM_ERROR;
}

static strand_result_t oot_listen(void *ctx, int dev, void *handle, void **listenComm) {
  (void)ctx; (void)dev;
  memset(handle, 0, STRAND_NET_HANDLE_MAXSIZE);
  *listenComm = NULL;
  return no_transport("listen");
}
static strand_result_t oot_connect(void *ctx, int dev, void *handle, void **sendComm,
                                   strand_dev_handle_t **sendDevComm) {
  (void)ctx; (void)dev; (void)handle; (void)sendDevComm; /* sendDevComm may be NULL */
  *sendComm = NULL;
  return no_transport("connect");
}
static strand_result_t oot_accept(void *listenComm, void **recvComm,
                                  strand_dev_handle_t **recvDevComm) {
  (void)listenComm; (void)recvDevComm;
  *recvComm = NULL;
  return no_transport("accept");
}
static strand_result_t oot_reg_mr(void *comm, void *data, size_t size, int type, void **mh) {
  (void)comm; (void)data; (void)size; (void)type;
  *mh = NULL;
  return no_transport("regMr");
}
static strand_result_t oot_dereg_mr(void *comm, void *mh) {
  (void)comm; (void)mh;
  return STRAND_SUCCESS;
}
static strand_result_t oot_isend(void *comm, void *data, size_t size, int tag, void *mh,
                                 void *phandle, void **request) {
  (void)comm; (void)data; (void)size; (void)tag; (void)mh; (void)phandle;
  *request = NULL;
  return no_transport("isend");
}
static strand_result_t oot_irecv(void *comm, int n, void **data, size_t *sizes, int *tags,
                                 void **mhs, void **phandles, void **request) {
  (void)comm; (void)n; (void)data; (void)sizes; (void)tags; (void)mhs; (void)phandles;
  *request = NULL; /* never leave STRAND_NET_OPTIONAL_RECV_COMPLETION in place */
  return no_transport("irecv");
}
static strand_result_t oot_test(void *request, int *done, int *sizes) {
  (void)request; (void)sizes;
  *done = 0;
  return no_transport("test");
}
static strand_result_t oot_close(void *comm) {
  (void)comm;
  return STRAND_SUCCESS;
}
static strand_result_t oot_finalize(void *ctx) {
  (void)ctx;
  return STRAND_SUCCESS;
}

/* Optional members (regMrDmaBuf, iflush, getDeviceMr, irecvConsumed, makeVDevice, setNetAttr)
 * are left NULL; they stay NULL in every exported version. */
static const strand_net_t oot_net = {
    .name = "strand-oot",
    .init = oot_init,
    .devices = oot_devices,
    .getProperties = oot_get_properties,
    .listen = oot_listen,
    .connect = oot_connect,
    .accept = oot_accept,
    .regMr = oot_reg_mr,
    .deregMr = oot_dereg_mr,
    .isend = oot_isend,
    .irecv = oot_irecv,
    .test = oot_test,
    .closeSend = oot_close,
    .closeRecv = oot_close,
    .closeListen = oot_close,
    .finalize = oot_finalize,
};
STRAND_NET_PLUGIN(oot_net);
