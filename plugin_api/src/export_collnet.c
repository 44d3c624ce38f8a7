/* Strand SDK — the CollNet export layer: ncclCollNetPlugin_v6 .. ncclCollNetPlugin_v12 from the
 * plugin's one v12-semantics CollNet table (strand_plugin_collnet); spec §1.5, §4.
 *
 * Same construction as export_net.c: zero-initialised tables filled by a constructor at dlopen
 * time; members with the v12 signature are the plugin's own pointers, the others adapters, and
 * optional members (regMrDmaBuf, iallgather, ireducescatter, iflush, makeVDevice) stay NULL when
 * the plugin leaves them NULL.
 *
 * Contexts: v11/v12 cores call init(&ctx, commId, logger) per communicator and pass ctx to
 * listen. v6..v10 cores call init(logger) once and listen without a ctx: the first init creates
 * one shared plugin context (commId 0) for all of them; there is no finalize before v11.
 *
 * This object is only linked into a plugin that writes STRAND_COLLNET_PLUGIN(); it must not
 * reference the net export object. */
#include <pthread.h>
#include <string.h>

#include "export_internal.h"

#define PLUGIN strand_plugin_collnet

/* Referenced by STRAND_COLLNET_PLUGIN() so that linking libstrand-sdk.a pulls this object in. */
const int strand_collnet_export_anchor = 1;

STRAND_EXPORT_SYMBOL strand_collnet_v6_t ncclCollNetPlugin_v6;
STRAND_EXPORT_SYMBOL strand_collnet_v7_t ncclCollNetPlugin_v7;
STRAND_EXPORT_SYMBOL strand_collnet_v8_t ncclCollNetPlugin_v8;
STRAND_EXPORT_SYMBOL strand_collnet_v9_t ncclCollNetPlugin_v9;
STRAND_EXPORT_SYMBOL strand_collnet_v10_t ncclCollNetPlugin_v10;
STRAND_EXPORT_SYMBOL strand_collnet_v11_t ncclCollNetPlugin_v11;
STRAND_EXPORT_SYMBOL strand_collnet_v12_t ncclCollNetPlugin_v12;

/* ---- the shared context of v6..v10 cores ---- */

static struct {
  pthread_mutex_t lock;
  int ready;
  void *ctx;
} shared = {.lock = PTHREAD_MUTEX_INITIALIZER};

static strand_result_t shared_init(int version, strand_logger_t logger) {
  strand_export_set_logger(logger);
  strand_export_note_collnet_version(version);
  strand_result_t rc = STRAND_SUCCESS;
  pthread_mutex_lock(&shared.lock);
  if (!shared.ready) {
    void *ctx = NULL;
    rc = PLUGIN->init(&ctx, 0, logger);
    if (rc == STRAND_SUCCESS) {
      shared.ready = 1;
      shared.ctx = ctx;
    }
  }
  pthread_mutex_unlock(&shared.lock);
  return rc;
}

void strand_export_collnet_reset_for_test(void) {
  pthread_mutex_lock(&shared.lock);
  shared.ready = 0;
  shared.ctx = NULL;
  pthread_mutex_unlock(&shared.lock);
  strand_export_note_collnet_version(0);
}

static strand_result_t v6_init(strand_logger_t logger) { return shared_init(6, logger); }
static strand_result_t v7_init(strand_logger_t logger) { return shared_init(7, logger); }
static strand_result_t v8_init(strand_logger_t logger) { return shared_init(8, logger); }
static strand_result_t v9_init(strand_logger_t logger) { return shared_init(9, logger); }
static strand_result_t v10_init(strand_logger_t logger) { return shared_init(10, logger); }
static strand_result_t v11_init(void **ctx, uint64_t commId, strand_logger_t logger) {
  strand_export_set_logger(logger);
  strand_export_note_collnet_version(11);
  return PLUGIN->init(ctx, commId, logger);
}
static strand_result_t v12_init(void **ctx, uint64_t commId, strand_logger_t logger) {
  strand_export_set_logger(logger);
  strand_export_note_collnet_version(12);
  return PLUGIN->init(ctx, commId, logger);
}

static strand_result_t v6_listen(int dev, void *handle, void **listenComm) {
  pthread_mutex_lock(&shared.lock);
  int ready = shared.ready;
  void *ctx = shared.ctx;
  pthread_mutex_unlock(&shared.lock);
  if (!ready) {
    STRAND_EXPORT_WARN("ncclCollNetPlugin_v%d.listen called before a successful init; the core "
                       "must call init first", strand_core_collnet_abi_version());
    return STRAND_INTERNAL_ERROR;
  }
  return PLUGIN->listen(ctx, dev, handle, listenComm);
}

/* ---- getProperties ---- */

/* Each core's layout, from the plugin's v12 properties (export_common.c). */
static strand_result_t v6_getProperties(int dev, strand_props_v6_t *props) {
  return strand_export_props_v6(PLUGIN->getProperties, dev, props);
}
static strand_result_t v7_getProperties(int dev, strand_props_v7_t *props) {
  return strand_export_props_v7(PLUGIN->getProperties, dev, props);
}
static strand_result_t v8_getProperties(int dev, strand_props_v8_t *props) {
  return strand_export_props_v8(PLUGIN->getProperties, dev, props);
}
/* v9 and v10 share one properties layout. */
static strand_result_t v9_getProperties(int dev, strand_props_v9_t *props) {
  return strand_export_props_v9(PLUGIN->getProperties, dev, props, "ncclCollNetPlugin_v9/v10.getProperties");
}
static strand_result_t v11_getProperties(int dev, strand_props_v11_t *props) {
  return strand_export_props_v11(PLUGIN->getProperties, dev, props, "ncclCollNetPlugin_v11.getProperties");
}

/* ---- int sizes and counts of v6..v8 ---- */

static strand_result_t v6_regMr(void *collComm, void *data, int size, int type, void **mhandle) {
  size_t len;
  strand_result_t rc =
      strand_export_int_to_size(size, "CollNet regMr (v6/v7 adapter)", "size", &len);
  if (rc != STRAND_SUCCESS) return rc;
  return PLUGIN->regMr(collComm, data, len, type, mhandle);
}

static strand_result_t v6_iallreduce(void *collComm, void *sendData, void *recvData, int count,
                                     strand_datatype_t dataType, strand_redop_t redOp,
                                     void *sendMhandle, void *recvMhandle, void **request) {
  size_t n;
  strand_result_t rc =
      strand_export_int_to_size(count, "CollNet iallreduce (v6..v8 adapter)", "count", &n);
  if (rc != STRAND_SUCCESS) return rc;
  return PLUGIN->iallreduce(collComm, sendData, recvData, n, dataType, redOp, sendMhandle,
                            recvMhandle, request);
}

/* v8 scatter-gather entries carry a uint32_t size; the plugin takes the size_t layout. */
static strand_result_t sge_v8_to_v12(int nparts, const strand_sge_v8_t *in, strand_sge_v12_t *out,
                                     const char *call) {
  if (nparts < 1 || nparts > STRAND_EXPORT_MAX_SGE || in == NULL) {
    STRAND_EXPORT_WARN("%s: %d scatter-gather entries (array %p); expected 1..%d", call, nparts,
                       (const void *)in, STRAND_EXPORT_MAX_SGE);
    return STRAND_INTERNAL_ERROR;
  }
  for (int i = 0; i < nparts; i++) {
    out[i].mhandle = in[i].mhandle;
    out[i].address = in[i].address;
    out[i].size = in[i].size;
  }
  return STRAND_SUCCESS;
}

static strand_result_t v8_iallgather(void *collComm, void *sendData, int nRecvParts,
                                     strand_sge_v8_t *recvParts, size_t bytesPerRank,
                                     size_t windowOffset, size_t windowBytes, void *sendMhandle,
                                     void **request) {
  strand_sge_v12_t parts[STRAND_EXPORT_MAX_SGE];
  strand_result_t rc =
      sge_v8_to_v12(nRecvParts, recvParts, parts, "CollNet iallgather (v8 adapter)");
  if (rc != STRAND_SUCCESS) return rc;
  return PLUGIN->iallgather(collComm, sendData, nRecvParts, parts, bytesPerRank, windowOffset,
                            windowBytes, sendMhandle, request);
}

static strand_result_t v8_ireducescatter(void *collComm, int nSendParts,
                                         strand_sge_v8_t *sendParts, void *recvData,
                                         size_t bytesPerRank, size_t windowOffset,
                                         size_t windowBytes, strand_datatype_t dataType,
                                         strand_redop_t redOp, void *recvMhandle,
                                         void **request) {
  strand_sge_v12_t parts[STRAND_EXPORT_MAX_SGE];
  strand_result_t rc =
      sge_v8_to_v12(nSendParts, sendParts, parts, "CollNet ireducescatter (v8 adapter)");
  if (rc != STRAND_SUCCESS) return rc;
  return PLUGIN->ireducescatter(collComm, nSendParts, parts, recvData, bytesPerRank,
                                windowOffset, windowBytes, dataType, redOp, recvMhandle, request);
}

static strand_result_t v9_makeVDevice(int *d, strand_vprops_v9_t *props) {
  strand_vprops_v12_t p12;
  strand_result_t rc =
      strand_vprops_v11_to_v12(props, &p12, "CollNet makeVDevice (v9..v11 adapter)");
  if (rc != STRAND_SUCCESS) return rc;
  return PLUGIN->makeVDevice(d, &p12);
}

/* ---- the tables ---- */

void strand_export_collnet_fill_tables(void) {
  const strand_collnet_t *p = PLUGIN;
  strand_result_t (*make_vdevice_v9)(int *, strand_vprops_v9_t *) =
      p->makeVDevice != NULL ? v9_makeVDevice : NULL;

  ncclCollNetPlugin_v6 = (strand_collnet_v6_t){
      .name = p->name,
      .init = v6_init,
      .devices = p->devices,
      .getProperties = v6_getProperties,
      .listen = v6_listen,
      .connect = p->connect,
      .reduceSupport = p->reduceSupport,
      .regMr = v6_regMr,
      .regMrDmaBuf = p->regMrDmaBuf,
      .deregMr = p->deregMr,
      .iallreduce = v6_iallreduce,
      .iflush = p->iflush,
      .test = p->test,
      .closeColl = p->closeColl,
      .closeListen = p->closeListen,
  };
  ncclCollNetPlugin_v7 = (strand_collnet_v7_t){
      .name = p->name,
      .init = v7_init,
      .devices = p->devices,
      .getProperties = v7_getProperties,
      .listen = v6_listen,
      .connect = p->connect,
      .reduceSupport = p->reduceSupport,
      .regMr = v6_regMr,
      .regMrDmaBuf = p->regMrDmaBuf,
      .deregMr = p->deregMr,
      .iallreduce = v6_iallreduce,
      .iflush = p->iflush,
      .test = p->test,
      .closeColl = p->closeColl,
      .closeListen = p->closeListen,
  };
  ncclCollNetPlugin_v8 = (strand_collnet_v8_t){
      .name = p->name,
      .init = v8_init,
      .devices = p->devices,
      .getProperties = v8_getProperties,
      .listen = v6_listen,
      .connect = p->connect,
      .reduceSupport = p->reduceSupport,
      .regMr = p->regMr,
      .regMrDmaBuf = p->regMrDmaBuf,
      .deregMr = p->deregMr,
      .iallreduce = v6_iallreduce,
      .iallgather = p->iallgather != NULL ? v8_iallgather : NULL,
      .ireducescatter = p->ireducescatter != NULL ? v8_ireducescatter : NULL,
      .iflush = p->iflush,
      .test = p->test,
      .closeColl = p->closeColl,
      .closeListen = p->closeListen,
  };
  ncclCollNetPlugin_v9 = (strand_collnet_v9_t){
      .name = p->name,
      .init = v9_init,
      .devices = p->devices,
      .getProperties = v9_getProperties,
      .listen = v6_listen,
      .connect = p->connect,
      .reduceSupport = p->reduceSupport,
      .regMr = p->regMr,
      .regMrDmaBuf = p->regMrDmaBuf,
      .deregMr = p->deregMr,
      .iallreduce = p->iallreduce,
      .iallgather = p->iallgather,
      .ireducescatter = p->ireducescatter,
      .iflush = p->iflush,
      .test = p->test,
      .closeColl = p->closeColl,
      .closeListen = p->closeListen,
      .makeVDevice = make_vdevice_v9,
  };
  ncclCollNetPlugin_v10 = (strand_collnet_v10_t){
      .name = p->name,
      .init = v10_init,
      .devices = p->devices,
      .getProperties = v9_getProperties,
      .listen = v6_listen,
      .connect = p->connect,
      .reduceSupport = p->reduceSupport,
      .regMr = p->regMr,
      .regMrDmaBuf = p->regMrDmaBuf,
      .deregMr = p->deregMr,
      .iallreduce = p->iallreduce,
      .iallgather = p->iallgather,
      .ireducescatter = p->ireducescatter,
      .iflush = p->iflush,
      .test = p->test,
      .closeColl = p->closeColl,
      .closeListen = p->closeListen,
      .makeVDevice = make_vdevice_v9,
  };
  ncclCollNetPlugin_v11 = (strand_collnet_v11_t){
      .name = p->name,
      .init = v11_init,
      .devices = p->devices,
      .getProperties = v11_getProperties,
      .listen = p->listen,
      .connect = p->connect,
      .reduceSupport = p->reduceSupport,
      .regMr = p->regMr,
      .regMrDmaBuf = p->regMrDmaBuf,
      .deregMr = p->deregMr,
      .iallreduce = p->iallreduce,
      .iallgather = p->iallgather,
      .ireducescatter = p->ireducescatter,
      .iflush = p->iflush,
      .test = p->test,
      .closeColl = p->closeColl,
      .closeListen = p->closeListen,
      .makeVDevice = make_vdevice_v9,
      .finalize = p->finalize,
  };
  ncclCollNetPlugin_v12 = *p;
  ncclCollNetPlugin_v12.init = v12_init;
}

__attribute__((constructor)) static void strand_export_collnet_constructor(void) {
  strand_export_collnet_fill_tables();
}
