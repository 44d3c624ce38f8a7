/* Strand SDK — the one-sided export layer, RMA side: ncclRmaPlugin_v14 and ncclRmaPlugin_v13 from
 * the plugin's one RMA-v14-semantics table (strand_plugin_rma); docs/spec/gin-rma.md.
 *
 * Which core uses what (NCCL's src/plugin/rma.cc, gin.cc):
 *   2.30+   ncclRmaPlugin_v14, else ncclRmaPlugin_v13 (also looked up as ncclGinPlugin_v13); its own
 *           GIN proxy drives the host data path. An external GIN that reports GIN_PROXY is skipped,
 *           so a proxy offering is exported as RMA, never as ncclGinPlugin_v13/_v14.
 *   2.28/29 ncclGinPlugin_v11/_v12 with the data path inside GIN (export_gin.c).
 *
 * v14 members are the plugin's own pointers, except init (which notes the core's version) and
 * the checks on arguments the plugin cannot see (a v13 core's config pointer). v13 differs in:
 * createContext takes ncclGinConfig_v13_t and hands back a device handle (none for a proxy),
 * regMrSym returns a ginHandle (the mhandle itself: NCCL passes it back to iput), iputSignal has
 * no isStrongSignal (every v13 signal is strong), the progress slot is named ginProgress.
 *
 * This object is only linked into a plugin that writes STRAND_RMA_PLUGIN(); its constructor also
 * fills export_gin.c's tables, which pulls that object in with it. */
#include <stdatomic.h>
#include <string.h>

#include "export_internal.h"

#define PLUGIN strand_plugin_rma

/* Referenced by STRAND_RMA_PLUGIN() so that linking libstrand-sdk.a pulls this object in. */
const int strand_rma_export_anchor = 1;

STRAND_EXPORT_SYMBOL strand_rma_v13_t ncclRmaPlugin_v13;
STRAND_EXPORT_SYMBOL strand_rma_v14_t ncclRmaPlugin_v14;

static atomic_int rma_version;

void strand_export_note_rma_version(int version) { atomic_store(&rma_version, version); }
int strand_core_rma_abi_version(void) { return atomic_load(&rma_version); }

void strand_export_rma_reset_for_test(void) { strand_export_note_rma_version(0); }

strand_result_t strand_export_rma_init(int version, void **ctx, uint64_t commId,
                                       strand_logger_t logger) {
  strand_export_set_logger(logger);
  strand_export_note_rma_version(version);
  return PLUGIN->init(ctx, commId, logger);
}

static strand_result_t v14_init(void **ctx, uint64_t commId, strand_logger_t logger) {
  return strand_export_rma_init(14, ctx, commId, logger);
}
static strand_result_t v13_init(void **ctx, uint64_t commId, strand_logger_t logger) {
  return strand_export_rma_init(13, ctx, commId, logger);
}

static strand_result_t v13_createContext(void *collComm, strand_gin_config_v13_t *config,
                                         void **ginCtx, strand_dev_handle_v11_t **devHandle) {
  if (devHandle) *devHandle = NULL; /* a proxy offering has no device-side handle */
  if (!config) {
    STRAND_EXPORT_WARN("ncclRmaPlugin_v13.createContext: NULL config; the core must pass its "
                       "ncclGinConfig_v13_t");
    return STRAND_INVALID_ARGUMENT;
  }
  strand_rma_config_v14_t c = {.nContexts = config->nContexts,
                               .trafficClass = config->trafficClass,
                               .rankStride = 1};
  return PLUGIN->createContext(collComm, &c, ginCtx);
}

strand_result_t strand_export_rma_regmr(void *collComm, void *data, size_t size, int type,
                                        uint64_t mrFlags, void **mhandle, void **ginHandle) {
  strand_result_t rc = PLUGIN->regMrSym(collComm, data, size, type, mrFlags, mhandle);
  /* NCCL hands the ginHandle back as the window of iput/iputSignal: make it the mhandle. */
  if (ginHandle) *ginHandle = rc == STRAND_SUCCESS ? *mhandle : NULL;
  return rc;
}

strand_result_t strand_export_rma_regmr_dmabuf(void *collComm, void *data, size_t size, int type,
                                               uint64_t offset, int fd, uint64_t mrFlags,
                                               void **mhandle, void **ginHandle) {
  strand_result_t rc = PLUGIN->regMrSymDmaBuf(collComm, data, size, type, offset, fd, mrFlags, mhandle);
  if (ginHandle) *ginHandle = rc == STRAND_SUCCESS ? *mhandle : NULL;
  return rc;
}

static strand_result_t v13_iputSignal(void *ginCtx, int context, uint64_t srcOff, void *srcMhandle,
                                      size_t size, uint64_t dstOff, void *dstMhandle, uint32_t rank,
                                      uint64_t signalOff, void *signalMhandle, uint64_t signalValue,
                                      uint32_t signalOp, void **request) {
  return PLUGIN->iputSignal(ginCtx, context, srcOff, srcMhandle, size, dstOff, dstMhandle, rank,
                            signalOff, signalMhandle, signalValue, signalOp, true, request);
}

/* v14 (current) x member: P = the plugin's pointer, A = adapter, - = absent.
 *          init getProps listen connect createCtx regMrSym(DmaBuf) iput iputSignal iget iflush test progress
 *   v14    A    P        P      P       P         P               P    P          P    P      P    P
 *   v13    A    P        P      P       A         A               P    A          P    P      P    P  */
void strand_export_rma_fill_tables(void) {
  const strand_rma_t *p = PLUGIN;
  ncclRmaPlugin_v14 = *p;
  ncclRmaPlugin_v14.init = v14_init;
  ncclRmaPlugin_v13 = (strand_rma_v13_t){
      .name = p->name,
      .init = v13_init,
      .devices = p->devices,
      .getProperties = p->getProperties,
      .listen = p->listen,
      .connect = p->connect,
      .createContext = v13_createContext,
      .regMrSym = strand_export_rma_regmr,
      .regMrSymDmaBuf = p->regMrSymDmaBuf ? strand_export_rma_regmr_dmabuf : NULL,
      .deregMrSym = p->deregMrSym,
      .destroyContext = p->destroyContext,
      .closeColl = p->closeColl,
      .closeListen = p->closeListen,
      .iput = p->iput,
      .iputSignal = v13_iputSignal,
      .iget = p->iget,
      .iflush = p->iflush,
      .test = p->test,
      .ginProgress = p->rmaProgress,
      .queryLastError = p->queryLastError,
      .finalize = p->finalize,
  };
}

__attribute__((constructor)) static void strand_export_rma_constructor(void) {
  strand_export_rma_fill_tables();
  strand_export_gin_fill_tables();
}
