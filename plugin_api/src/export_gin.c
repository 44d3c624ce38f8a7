/* Strand SDK — the one-sided export layer, GIN side: ncclGinPlugin_v11 (NCCL 2.28.7-2.28.9) and
 * ncclGinPlugin_v12 (2.29) from the plugin's one RMA-v14-semantics table; docs/spec/gin-rma.md.
 *
 * Those cores run GIN in proxy mode (the plugin reports netDeviceType GIN_PROXY): NCCL's proxy
 * thread turns the kernels' requests into iput / iputSignal on the *collComm* and polls test and
 * ginProgress; it never calls createContext. The RMA table works on contexts instead, so connect
 * here forms the plugin's collComm and then one RMA context on it (v12: one context per
 * connection, connectionId selecting it), and hands the core a small wrapper holding both.
 * Signals of these cores are strong (NCCL registers its signal array FORCE_SO for that).
 * Wrappers are validated through handle sets before they are read, so a stale or foreign pointer
 * from the core is refused with a WARN instead of being dereferenced.
 *
 * Filled by export_rma.c's constructor: this object is linked only with STRAND_RMA_PLUGIN(). */
#include <stdlib.h>
#include <string.h>

#include "export_internal.h"
#include "strand/handle_set.h"

#define PLUGIN strand_plugin_rma

STRAND_EXPORT_SYMBOL strand_gin_v11_t ncclGinPlugin_v11;
STRAND_EXPORT_SYMBOL strand_gin_v12_t ncclGinPlugin_v12;

/* What a v11/v12 core holds as its collComm. */
typedef struct {
  void *coll;    /* the plugin's collComm */
  void *ctx;     /* the plugin's RMA context on it */
  int ncontexts; /* v12: nConnections; connectionId picks the context */
} gin_coll_t;

/* What createContext hands out (the core does not use it in proxy mode; queryLastError takes it). */
typedef struct {
  gin_coll_t *coll;
} gin_ctx_t;

static strand_handle_set_t live_colls = STRAND_HANDLE_SET_INIT;
static strand_handle_set_t live_ctxs = STRAND_HANDLE_SET_INIT;

static gin_coll_t *gin_coll(void *collComm, const char *call) {
  if (collComm && strand_handle_set_contains(&live_colls, collComm)) return collComm;
  STRAND_EXPORT_WARN("ncclGinPlugin_v%d.%s: %p is not a live collComm of this plugin (closed "
                     "already, or never returned by connect)", strand_core_rma_abi_version(), call,
                     collComm);
  return NULL;
}

static strand_result_t v11_init(void **ctx, uint64_t commId, strand_logger_t logger) {
  return strand_export_rma_init(11, ctx, commId, logger);
}
static strand_result_t v12_init(void **ctx, uint64_t commId, strand_logger_t logger) {
  return strand_export_rma_init(12, ctx, commId, logger);
}

static strand_result_t v11_getProperties(int dev, strand_props_v11_t *props) {
  return strand_export_props_v11(PLUGIN->getProperties, dev, props,
                                 "ncclGinPlugin_v11/v12.getProperties");
}

/* The plugin's collective connect, then its context(s); the wrapper owns both. */
static strand_result_t gin_connect(void *ctx, void *handles[], int nranks, int rank,
                                   int nconnections, void *listenComm, void **collComm) {
  if (!collComm) return STRAND_INVALID_ARGUMENT;
  *collComm = NULL;
  if (nconnections < 1) {
    STRAND_EXPORT_WARN("ncclGinPlugin_v12.connect: nConnections %d; at least 1 is needed",
                       nconnections);
    return STRAND_INVALID_ARGUMENT;
  }
  gin_coll_t *w = calloc(1, sizeof *w);
  if (!w) return STRAND_SYSTEM_ERROR;
  w->ncontexts = nconnections;
  strand_result_t rc = PLUGIN->connect(ctx, handles, nranks, rank, listenComm, &w->coll);
  if (rc == STRAND_SUCCESS && !w->coll) rc = STRAND_INTERNAL_ERROR;
  if (rc != STRAND_SUCCESS) {
    free(w);
    return rc;
  }
  strand_rma_config_t cfg = {.nContexts = nconnections,
                             .trafficClass = STRAND_NET_TRAFFIC_CLASS_UNDEF,
                             .rankStride = 1};
  rc = PLUGIN->createContext(w->coll, &cfg, &w->ctx);
  if (rc == STRAND_SUCCESS) rc = strand_handle_set_add(&live_colls, w);
  if (rc != STRAND_SUCCESS) {
    STRAND_EXPORT_WARN("ncclGinPlugin_v%d.connect (rank %d/%d): creating the RMA context of the "
                       "new collComm returned %d", strand_core_rma_abi_version(), rank, nranks, (int)rc);
    if (w->ctx) PLUGIN->destroyContext(w->ctx);
    PLUGIN->closeColl(w->coll);
    free(w);
    return rc;
  }
  *collComm = w;
  return STRAND_SUCCESS;
}

static strand_result_t v11_connect(void *ctx, void *handles[], int nranks, int rank,
                                   void *listenComm, void **collComm) {
  return gin_connect(ctx, handles, nranks, rank, 1, listenComm, collComm);
}
static strand_result_t v12_connect(void *ctx, void *handles[], int nranks, int rank,
                                   int nConnections, int queueDepth, void *listenComm,
                                   void **collComm) {
  (void)queueDepth; /* the plugin queues without a fixed depth */
  return gin_connect(ctx, handles, nranks, rank, nConnections, listenComm, collComm);
}

static strand_result_t gin_create_context(void *collComm, void **ginCtx,
                                          strand_dev_handle_v11_t **devHandle) {
  if (devHandle) *devHandle = NULL; /* proxy mode: no device-side handle */
  if (!ginCtx) return STRAND_INVALID_ARGUMENT;
  *ginCtx = NULL;
  gin_coll_t *w = gin_coll(collComm, "createContext");
  if (!w) return STRAND_INVALID_ARGUMENT;
  gin_ctx_t *g = calloc(1, sizeof *g);
  if (!g) return STRAND_SYSTEM_ERROR;
  g->coll = w;
  strand_result_t rc = strand_handle_set_add(&live_ctxs, g);
  if (rc != STRAND_SUCCESS) {
    free(g);
    return rc;
  }
  *ginCtx = g;
  return STRAND_SUCCESS;
}

static strand_result_t v11_createContext(void *collComm, int nSignals, int nCounters, void **ginCtx,
                                         strand_dev_handle_v11_t **devHandle) {
  (void)nSignals; (void)nCounters; /* signals and counters live in NCCL's proxy */
  return gin_create_context(collComm, ginCtx, devHandle);
}
static strand_result_t v12_createContext(void *collComm, int nSignals, int nCounters,
                                         int nContexts, void **ginCtx,
                                         strand_dev_handle_v11_t **devHandle) {
  (void)nSignals; (void)nCounters; (void)nContexts;
  return gin_create_context(collComm, ginCtx, devHandle);
}

static strand_result_t gin_destroyContext(void *ginCtx) {
  if (!ginCtx || !strand_handle_set_remove(&live_ctxs, ginCtx)) {
    STRAND_EXPORT_WARN("ncclGinPlugin_v%d.destroyContext: %p is not a live context of this plugin",
                       strand_core_rma_abi_version(), ginCtx);
    return STRAND_INVALID_ARGUMENT;
  }
  free(ginCtx);
  return STRAND_SUCCESS;
}

static strand_result_t gin_queryLastError(void *ginCtx, bool *hasError) {
  if (!hasError) return STRAND_INVALID_ARGUMENT;
  if (!ginCtx || !strand_handle_set_contains(&live_ctxs, ginCtx)) {
    STRAND_EXPORT_WARN("ncclGinPlugin_v%d.queryLastError: %p is not a live context of this plugin",
                       strand_core_rma_abi_version(), ginCtx);
    return STRAND_INVALID_ARGUMENT;
  }
  gin_coll_t *w = gin_coll(((gin_ctx_t *)ginCtx)->coll, "queryLastError");
  if (!w) return STRAND_INVALID_ARGUMENT;
  return PLUGIN->queryLastError(w->ctx, hasError);
}

static strand_result_t gin_regMrSym(void *collComm, void *data, size_t size, int type,
                                    uint64_t mrFlags, void **mhandle, void **ginHandle) {
  gin_coll_t *w = gin_coll(collComm, "regMrSym");
  if (!w) return STRAND_INVALID_ARGUMENT;
  return strand_export_rma_regmr(w->coll, data, size, type, mrFlags, mhandle, ginHandle);
}

static strand_result_t gin_regMrSymDmaBuf(void *collComm, void *data, size_t size, int type,
                                          uint64_t offset, int fd, uint64_t mrFlags, void **mhandle,
                                          void **ginHandle) {
  gin_coll_t *w = gin_coll(collComm, "regMrSymDmaBuf");
  if (!w) return STRAND_INVALID_ARGUMENT;
  return strand_export_rma_regmr_dmabuf(w->coll, data, size, type, offset, fd, mrFlags, mhandle,
                                        ginHandle);
}

static strand_result_t gin_deregMrSym(void *collComm, void *mhandle) {
  gin_coll_t *w = gin_coll(collComm, "deregMrSym");
  if (!w) return STRAND_INVALID_ARGUMENT;
  return PLUGIN->deregMrSym(w->coll, mhandle);
}

static strand_result_t gin_closeColl(void *collComm) {
  if (!collComm || !strand_handle_set_remove(&live_colls, collComm)) {
    STRAND_EXPORT_WARN("ncclGinPlugin_v%d.closeColl: %p is not a live collComm of this plugin",
                       strand_core_rma_abi_version(), collComm);
    return STRAND_INVALID_ARGUMENT;
  }
  gin_coll_t *w = collComm;
  strand_result_t rc = PLUGIN->destroyContext(w->ctx);
  strand_result_t rc2 = PLUGIN->closeColl(w->coll);
  free(w);
  return rc != STRAND_SUCCESS ? rc : rc2;
}

/* The context of a v12 connectionId (v11: always context 0). */
static strand_result_t gin_context(gin_coll_t *w, int connectionId, const char *call) {
  if (connectionId >= 0 && connectionId < w->ncontexts) return STRAND_SUCCESS;
  STRAND_EXPORT_WARN("ncclGinPlugin_v12.%s: connectionId %d outside 0..%d (connect was called with "
                     "nConnections %d)", call, connectionId, w->ncontexts - 1, w->ncontexts);
  return STRAND_INVALID_ARGUMENT;
}

static strand_result_t gin_iput(void *collComm, uint64_t srcOff, void *srcMhandle, size_t size,
                                uint64_t dstOff, void *dstMhandle, uint32_t rank, int connectionId,
                                void **request) {
  gin_coll_t *w = gin_coll(collComm, "iput");
  if (!w) return STRAND_INVALID_ARGUMENT;
  strand_result_t rc = gin_context(w, connectionId, "iput");
  if (rc != STRAND_SUCCESS) return rc;
  return PLUGIN->iput(w->ctx, connectionId, srcOff, srcMhandle, size, dstOff, dstMhandle, rank,
                      request);
}

static strand_result_t gin_iputSignal(void *collComm, uint64_t srcOff, void *srcMhandle,
                                      size_t size, uint64_t dstOff, void *dstMhandle, uint32_t rank,
                                      uint64_t signalOff, void *signalMhandle, uint64_t signalValue,
                                      uint32_t signalOp, int connectionId, void **request) {
  gin_coll_t *w = gin_coll(collComm, "iputSignal");
  if (!w) return STRAND_INVALID_ARGUMENT;
  strand_result_t rc = gin_context(w, connectionId, "iputSignal");
  if (rc != STRAND_SUCCESS) return rc;
  return PLUGIN->iputSignal(w->ctx, connectionId, srcOff, srcMhandle, size, dstOff, dstMhandle,
                            rank, signalOff, signalMhandle, signalValue, signalOp, true, request);
}

static strand_result_t v11_iput(void *collComm, uint64_t srcOff, void *srcMhandle, size_t size,
                                uint64_t dstOff, void *dstMhandle, uint32_t rank, void **request) {
  return gin_iput(collComm, srcOff, srcMhandle, size, dstOff, dstMhandle, rank, 0, request);
}
static strand_result_t v11_iputSignal(void *collComm, uint64_t srcOff, void *srcMhandle,
                                      size_t size, uint64_t dstOff, void *dstMhandle, uint32_t rank,
                                      uint64_t signalOff, void *signalMhandle, uint64_t signalValue,
                                      uint32_t signalOp, void **request) {
  return gin_iputSignal(collComm, srcOff, srcMhandle, size, dstOff, dstMhandle, rank, signalOff,
                        signalMhandle, signalValue, signalOp, 0, request);
}

static strand_result_t gin_test(void *collComm, void *request, int *done) {
  gin_coll_t *w = gin_coll(collComm, "test");
  if (!w) return STRAND_INVALID_ARGUMENT;
  return PLUGIN->test(w->coll, request, done);
}

static strand_result_t gin_progress(void *collComm) {
  gin_coll_t *w = gin_coll(collComm, "ginProgress");
  if (!w) return STRAND_INVALID_ARGUMENT;
  return PLUGIN->rmaProgress(w->ctx);
}

/* v11/v12 x member (P = plugin pointer, A = adapter over the wrapper):
 *   init A, devices P, getProperties A (v11 layout), listen P, connect A, createContext A,
 *   regMrSym(DmaBuf) A, deregMrSym A, destroyContext A, closeColl A, closeListen P, iput A,
 *   iputSignal A (strong), test A, ginProgress A, queryLastError A, finalize P. */
void strand_export_gin_fill_tables(void) {
  const strand_rma_t *p = PLUGIN;
  strand_result_t (*progress)(void *) = p->rmaProgress ? gin_progress : NULL;
  strand_result_t (*dmabuf11)(void *, void *, size_t, int, uint64_t, int, uint64_t, void **,
                              void **) = p->regMrSymDmaBuf ? gin_regMrSymDmaBuf : NULL;
  ncclGinPlugin_v11 = (strand_gin_v11_t){
      .name = p->name,
      .init = v11_init,
      .devices = p->devices,
      .getProperties = v11_getProperties,
      .listen = p->listen,
      .connect = v11_connect,
      .createContext = v11_createContext,
      .regMrSym = gin_regMrSym,
      .regMrSymDmaBuf = dmabuf11,
      .deregMrSym = gin_deregMrSym,
      .destroyContext = gin_destroyContext,
      .closeColl = gin_closeColl,
      .closeListen = p->closeListen,
      .iput = v11_iput,
      .iputSignal = v11_iputSignal,
      .test = gin_test,
      .ginProgress = progress,
      .queryLastError = gin_queryLastError,
      .finalize = p->finalize,
  };
  ncclGinPlugin_v12 = (strand_gin_v12_t){
      .name = p->name,
      .init = v12_init,
      .devices = p->devices,
      .getProperties = v11_getProperties,
      .listen = p->listen,
      .connect = v12_connect,
      .createContext = v12_createContext,
      .regMrSym = gin_regMrSym,
      .regMrSymDmaBuf = dmabuf11,
      .deregMrSym = gin_deregMrSym,
      .destroyContext = gin_destroyContext,
      .closeColl = gin_closeColl,
      .closeListen = p->closeListen,
      .iput = gin_iput,
      .iputSignal = gin_iputSignal,
      .test = gin_test,
      .ginProgress = progress,
      .queryLastError = gin_queryLastError,
      .finalize = p->finalize,
  };
}
