/* Packaging fixture: the smallest plugin that links the SDK the way every Strand plugin does, so
 * the export check always has at least one .so to look at. Built twice: FIXTURE_COLLNET=1 adds a
 * CollNet table and a tuner (ncclCollNetPlugin_v* and ncclTunerPlugin_v* must appear), without it
 * neither may appear.
 * Every entry point fails politely: this plugin is inspected, never used for traffic. */
#include <stddef.h>

#include "strand/plugin.h"
#include "strand/tuner.h"

#ifndef FIXTURE_NAME
#error "FIXTURE_NAME must be defined by the build"
#endif

static strand_result_t fx_init(void **ctx, uint64_t commId, strand_comm_config_t *config,
                               strand_logger_t logger, strand_profiler_cb_t prof) {
  (void)commId; (void)config; (void)logger; (void)prof;
  *ctx = NULL;
  return STRAND_SUCCESS;
}
static strand_result_t fx_devices(int *ndev) { *ndev = 1; return STRAND_SUCCESS; }
static strand_result_t fx_get_properties(int dev, strand_props_t *props) {
  (void)dev;
  *props = (strand_props_t){.name = (char *)FIXTURE_NAME, .ptrSupport = STRAND_PTR_HOST,
                            .speed = 1000, .maxComms = 1, .maxRecvs = 1,
                            .vProps = {.ndevs = 1, .devs = {0}},
                            .maxP2pBytes = 1 << 20, .maxCollBytes = 1 << 20,
                            .maxMultiRequestSize = 1, .railId = STRAND_NET_ID_UNDEF,
                            .planeId = STRAND_NET_ID_UNDEF};
  return STRAND_SUCCESS;
}
static strand_result_t fx_listen(void *ctx, int dev, void *handle, void **comm) {
  (void)ctx; (void)dev; (void)handle; *comm = NULL; return STRAND_INTERNAL_ERROR;
}
static strand_result_t fx_connect(void *ctx, int dev, void *handle, void **comm,
                                  strand_dev_handle_t **dh) {
  (void)ctx; (void)dev; (void)handle; (void)dh; *comm = NULL; return STRAND_INTERNAL_ERROR;
}
static strand_result_t fx_accept(void *lc, void **comm, strand_dev_handle_t **dh) {
  (void)lc; (void)dh; *comm = NULL; return STRAND_INTERNAL_ERROR;
}
static strand_result_t fx_reg_mr(void *comm, void *data, size_t size, int type, void **mh) {
  (void)comm; (void)data; (void)size; (void)type; *mh = NULL; return STRAND_INTERNAL_ERROR;
}
static strand_result_t fx_dereg_mr(void *comm, void *mh) { (void)comm; (void)mh; return STRAND_SUCCESS; }
static strand_result_t fx_isend(void *comm, void *data, size_t size, int tag, void *mh, void *ph,
                                void **req) {
  (void)comm; (void)data; (void)size; (void)tag; (void)mh; (void)ph; *req = NULL;
  return STRAND_INTERNAL_ERROR;
}
static strand_result_t fx_irecv(void *comm, int n, void **data, size_t *sizes, int *tags,
                                void **mh, void **ph, void **req) {
  (void)comm; (void)n; (void)data; (void)sizes; (void)tags; (void)mh; (void)ph; *req = NULL;
  return STRAND_INTERNAL_ERROR;
}
static strand_result_t fx_test(void *req, int *done, int *sizes) {
  (void)req; (void)sizes; *done = 0; return STRAND_INTERNAL_ERROR;
}
static strand_result_t fx_close(void *comm) { (void)comm; return STRAND_SUCCESS; }
static strand_result_t fx_finalize(void *ctx) { (void)ctx; return STRAND_SUCCESS; }

static const strand_net_t fixture_net = {
    .name = FIXTURE_NAME,
    .init = fx_init,
    .devices = fx_devices,
    .getProperties = fx_get_properties,
    .listen = fx_listen,
    .connect = fx_connect,
    .accept = fx_accept,
    .regMr = fx_reg_mr,
    .deregMr = fx_dereg_mr,
    .isend = fx_isend,
    .irecv = fx_irecv,
    .test = fx_test,
    .closeSend = fx_close,
    .closeRecv = fx_close,
    .closeListen = fx_close,
    .finalize = fx_finalize,
};
STRAND_NET_PLUGIN(fixture_net);

#if FIXTURE_COLLNET
static strand_result_t fxc_init(void **ctx, uint64_t commId, strand_logger_t logger) {
  (void)commId; (void)logger; *ctx = NULL; return STRAND_SUCCESS;
}
static strand_result_t fxc_connect(void *handles[], int nranks, int rank, void *lc, void **cc) {
  (void)handles; (void)nranks; (void)rank; (void)lc; *cc = NULL; return STRAND_INTERNAL_ERROR;
}
static strand_result_t fxc_reduce_support(strand_datatype_t t, strand_redop_t o, int *ok) {
  (void)t; (void)o; *ok = 0; return STRAND_SUCCESS;
}
static strand_result_t fxc_iallreduce(void *cc, void *s, void *r, size_t n, strand_datatype_t t,
                                      strand_redop_t o, void *smh, void *rmh, void **req) {
  (void)cc; (void)s; (void)r; (void)n; (void)t; (void)o; (void)smh; (void)rmh; *req = NULL;
  return STRAND_INTERNAL_ERROR;
}
static const strand_collnet_t fixture_collnet = {
    .name = FIXTURE_NAME,
    .init = fxc_init,
    .devices = fx_devices,
    .getProperties = fx_get_properties,
    .listen = fx_listen,
    .connect = fxc_connect,
    .reduceSupport = fxc_reduce_support,
    .regMr = fx_reg_mr,
    .deregMr = fx_dereg_mr,
    .iallreduce = fxc_iallreduce,
    .test = fx_test,
    .closeColl = fx_close,
    .closeListen = fx_close,
    .finalize = fx_finalize,
};
STRAND_COLLNET_PLUGIN(fixture_collnet);

/* A tuner that asks for 1 channel for everything: visible through the dlopen check. */
static strand_result_t fxt_init(void **ctx, uint64_t commId, size_t nRanks, size_t nNodes,
                                strand_logger_t logger, strand_nvl_domain_info_t *nvl,
                                strand_tuner_constants_t *k) {
  (void)commId; (void)nRanks; (void)nNodes; (void)logger; (void)nvl; (void)k;
  *ctx = NULL;
  return STRAND_SUCCESS;
}
static strand_result_t fxt_coll_info(void *ctx, strand_tuner_func_t f, size_t n, int pipe,
                                     float **table, int na, int np, int reg, int *nch) {
  (void)ctx; (void)f; (void)n; (void)pipe; (void)table; (void)na; (void)np; (void)reg;
  *nch = 1;
  return STRAND_SUCCESS;
}
static strand_result_t fxt_finalize(void *ctx) { (void)ctx; return STRAND_SUCCESS; }
static const strand_tuner_t fixture_tuner = {
    .name = FIXTURE_NAME,
    .init = fxt_init,
    .getCollInfo = fxt_coll_info,
    .finalize = fxt_finalize,
};
STRAND_TUNER_PLUGIN(fixture_tuner);
#endif
