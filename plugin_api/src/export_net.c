/* Strand SDK — the net export layer: ncclNetPlugin_v6 .. ncclNetPlugin_v12, each adapting the
 * plugin's one v12-semantics table (strand_plugin_net) to what a core of that version expects
 * (spec §1.5, §3; docs/plugin-author-guide.md has the per-version table).
 *
 * How the tables are built: they are zero-initialised data, filled by a constructor that runs
 * while the .so is being dlopen'ed, i.e. before NCCL reads `name` or any member. Members whose
 * signature is the same in that version and in v12 are the plugin's own pointers (so the
 * plugin's NULL optional members stay NULL); the others point to the adapters below, and an
 * adapter for an optional member is only installed when the plugin provides that member.
 *
 * Contexts: v11/v12 cores call init per communicator and pass the resulting ctx to listen and
 * connect themselves. v6..v10 cores call init once and have no ctx, so the first init creates one
 * shared plugin context (commId 0, trafficClass undefined) used by every listen/connect. A v10
 * core passes a trafficClass per connect; for each distinct value we create (lazily, bounded)
 * one more plugin context with that trafficClass in its config. Nothing is finalized before v11:
 * those tables have no finalize, and the contexts live until the library is unloaded. */
#include <pthread.h>
#include <string.h>

#include "export_internal.h"

#define PLUGIN strand_plugin_net

/* Referenced by STRAND_NET_PLUGIN() so that linking libstrand-sdk.a pulls this object in. */
const int strand_net_export_anchor = 1;

STRAND_EXPORT_SYMBOL strand_net_v6_t ncclNetPlugin_v6;
STRAND_EXPORT_SYMBOL strand_net_v7_t ncclNetPlugin_v7;
STRAND_EXPORT_SYMBOL strand_net_v8_t ncclNetPlugin_v8;
STRAND_EXPORT_SYMBOL strand_net_v9_t ncclNetPlugin_v9;
STRAND_EXPORT_SYMBOL strand_net_v10_t ncclNetPlugin_v10;
STRAND_EXPORT_SYMBOL strand_net_v11_t ncclNetPlugin_v11;
STRAND_EXPORT_SYMBOL strand_net_v12_t ncclNetPlugin_v12;

/* ---- the shared context of v6..v10 cores ---- */

struct tc_ctx {
  int traffic_class;
  void *ctx;
};

static struct {
  pthread_mutex_t lock;
  int ready; /* the default context exists (the plugin's init succeeded once) */
  void *ctx; /* default context: trafficClass undefined */
  strand_logger_t logger;
  strand_profiler_cb_t prof;
  int ntc;
  struct tc_ctx tc[STRAND_EXPORT_MAX_TC_CTX];
  int tc_overflow_warned;
} shared = {.lock = PTHREAD_MUTEX_INITIALIZER};

/* init of a v6..v10 core: create the shared context the first time, succeed quietly after. */
static strand_result_t shared_init(int version, strand_logger_t logger,
                                   strand_profiler_cb_t prof) {
  strand_export_set_logger(logger);
  strand_export_note_net_version(version);
  strand_result_t rc = STRAND_SUCCESS;
  pthread_mutex_lock(&shared.lock);
  if (!shared.ready) {
    strand_comm_config_t config = {.trafficClass = STRAND_NET_TRAFFIC_CLASS_UNDEF};
    void *ctx = NULL;
    rc = PLUGIN->init(&ctx, 0, &config, logger, prof);
    if (rc == STRAND_SUCCESS) {
      shared.ready = 1;
      shared.ctx = ctx;
      shared.logger = logger;
      shared.prof = prof;
    }
  }
  pthread_mutex_unlock(&shared.lock);
  return rc;
}

static strand_result_t shared_default_ctx(const char *call, void **ctx) {
  pthread_mutex_lock(&shared.lock);
  int ready = shared.ready;
  *ctx = shared.ctx;
  pthread_mutex_unlock(&shared.lock);
  if (!ready) {
    STRAND_EXPORT_WARN("ncclNetPlugin_v%d.%s called before a successful init; the core must "
                       "call init first", strand_core_abi_version(), call);
    return STRAND_INTERNAL_ERROR;
  }
  return STRAND_SUCCESS;
}

/* The context for a v10 connect: the default one unless the communicator asked for a
 * trafficClass, in which case one plugin context per distinct value carries it. */
static strand_result_t shared_tc_ctx(const strand_comm_config_t *config, void **ctx) {
  if (config == NULL || config->trafficClass == STRAND_NET_TRAFFIC_CLASS_UNDEF)
    return shared_default_ctx("connect", ctx);
  const int tc = config->trafficClass;
  strand_result_t rc = STRAND_SUCCESS;
  pthread_mutex_lock(&shared.lock);
  if (!shared.ready) {
    pthread_mutex_unlock(&shared.lock);
    return shared_default_ctx("connect", ctx);
  }
  for (int i = 0; i < shared.ntc; i++) {
    if (shared.tc[i].traffic_class == tc) {
      *ctx = shared.tc[i].ctx;
      pthread_mutex_unlock(&shared.lock);
      return STRAND_SUCCESS;
    }
  }
  if (shared.ntc == STRAND_EXPORT_MAX_TC_CTX) {
    /* More distinct classes than any real deployment uses; keep connecting, but say that this
     * connection runs without the requested class rather than fail the communicator. */
    if (!shared.tc_overflow_warned) {
      shared.tc_overflow_warned = 1;
      STRAND_EXPORT_WARN("ncclNetPlugin_v10.connect: trafficClass %d ignored: already %d "
                         "distinct traffic classes in this process (limit %d); this and later "
                         "new classes use the default context", tc, shared.ntc,
                         STRAND_EXPORT_MAX_TC_CTX);
    }
    *ctx = shared.ctx;
  } else {
    strand_comm_config_t tc_config = {.trafficClass = tc};
    void *tc_ctx = NULL;
    rc = PLUGIN->init(&tc_ctx, 0, &tc_config, shared.logger, shared.prof);
    if (rc == STRAND_SUCCESS) {
      shared.tc[shared.ntc].traffic_class = tc;
      shared.tc[shared.ntc].ctx = tc_ctx;
      shared.ntc++;
      *ctx = tc_ctx;
    } else {
      STRAND_EXPORT_WARN("ncclNetPlugin_v10.connect: the plugin's init for trafficClass %d "
                         "failed (%d); check that the class is valid for this network", tc, rc);
    }
  }
  pthread_mutex_unlock(&shared.lock);
  return rc;
}

void strand_export_net_reset_for_test(void) {
  pthread_mutex_lock(&shared.lock);
  shared.ready = 0;
  shared.ctx = NULL;
  shared.logger = NULL;
  shared.prof = NULL;
  shared.ntc = 0;
  memset(shared.tc, 0, sizeof shared.tc);
  shared.tc_overflow_warned = 0;
  pthread_mutex_unlock(&shared.lock);
  strand_export_note_net_version(0);
}

/* ---- init ---- */

static strand_result_t v6_init(strand_logger_t logger) { return shared_init(6, logger, NULL); }
static strand_result_t v7_init(strand_logger_t logger) { return shared_init(7, logger, NULL); }
static strand_result_t v8_init(strand_logger_t logger) { return shared_init(8, logger, NULL); }
static strand_result_t v9_init(strand_logger_t logger) { return shared_init(9, logger, NULL); }
static strand_result_t v10_init(strand_logger_t logger, strand_profiler_cb_t prof) {
  return shared_init(10, logger, prof);
}
static strand_result_t v11_init(void **ctx, uint64_t commId, strand_comm_config_t *config,
                                strand_logger_t logger, strand_profiler_cb_t prof) {
  strand_export_set_logger(logger);
  strand_export_note_net_version(11);
  return PLUGIN->init(ctx, commId, config, logger, prof);
}
static strand_result_t v12_init(void **ctx, uint64_t commId, strand_comm_config_t *config,
                                strand_logger_t logger, strand_profiler_cb_t prof) {
  strand_export_set_logger(logger);
  strand_export_note_net_version(12);
  return PLUGIN->init(ctx, commId, config, logger, prof);
}

/* ---- getProperties: ask the plugin for v12 properties, write the core's layout ---- */

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
  return strand_export_props_v9(PLUGIN->getProperties, dev, props, "ncclNetPlugin_v9/v10.getProperties");
}
static strand_result_t v11_getProperties(int dev, strand_props_v11_t *props) {
  return strand_export_props_v11(PLUGIN->getProperties, dev, props, "ncclNetPlugin_v11.getProperties");
}

/* ---- listen / connect / accept before v11: the shared context ---- */

static strand_result_t v6_listen(int dev, void *handle, void **listenComm) {
  void *ctx;
  strand_result_t rc = shared_default_ctx("listen", &ctx);
  if (rc != STRAND_SUCCESS) return rc;
  return PLUGIN->listen(ctx, dev, handle, listenComm);
}

/* v6 has no device-handle arguments: the plugin sees NULL, as for any HOST connection. */
static strand_result_t v6_connect(int dev, void *handle, void **sendComm) {
  void *ctx;
  strand_result_t rc = shared_default_ctx("connect", &ctx);
  if (rc != STRAND_SUCCESS) return rc;
  return PLUGIN->connect(ctx, dev, handle, sendComm, NULL);
}
static strand_result_t v6_accept(void *listenComm, void **recvComm) {
  return PLUGIN->accept(listenComm, recvComm, NULL);
}

static strand_result_t v7_connect(int dev, void *handle, void **sendComm,
                                  strand_dev_handle_t **sendDevComm) {
  void *ctx;
  strand_result_t rc = shared_default_ctx("connect", &ctx);
  if (rc != STRAND_SUCCESS) return rc;
  return PLUGIN->connect(ctx, dev, handle, sendComm, sendDevComm);
}

static strand_result_t v10_connect(int dev, strand_comm_config_t *config, void *handle,
                                   void **sendComm, strand_dev_handle_t **sendDevComm) {
  void *ctx;
  strand_result_t rc = shared_tc_ctx(config, &ctx);
  if (rc != STRAND_SUCCESS) return rc;
  return PLUGIN->connect(ctx, dev, handle, sendComm, sendDevComm);
}

/* ---- int sizes of v6..v8 ---- */

static strand_result_t v6_regMr(void *comm, void *data, int size, int type, void **mhandle) {
  size_t len;
  strand_result_t rc = strand_export_int_to_size(size, "regMr (v6/v7 adapter)", "size", &len);
  if (rc != STRAND_SUCCESS) return rc;
  return PLUGIN->regMr(comm, data, len, type, mhandle);
}

static strand_result_t v6_isend(void *sendComm, void *data, int size, int tag, void *mhandle,
                                void **request) {
  size_t len;
  strand_result_t rc = strand_export_int_to_size(size, "isend (v6..v8 adapter)", "size", &len);
  if (rc != STRAND_SUCCESS) return rc;
  return PLUGIN->isend(sendComm, data, len, tag, mhandle, NULL, request);
}

static strand_result_t v6_irecv(void *recvComm, int n, void **data, int *sizes, int *tags,
                                void **mhandles, void **request) {
  size_t lens[STRAND_EXPORT_MAX_RECV_N];
  strand_result_t rc = strand_export_int_sizes(n, sizes, "irecv (v6..v8 adapter)", lens);
  if (rc != STRAND_SUCCESS) return rc;
  /* Cores before v9 never meant the optional-completion sentinel (§6.6): clear it so the plugin
   * always tracks completion for them. */
  if (*request == STRAND_NET_OPTIONAL_RECV_COMPLETION_PTR) *request = NULL;
  return PLUGIN->irecv(recvComm, n, data, lens, tags, mhandles, NULL, request);
}

/* ---- v9: size_t sizes, but no profiler handles ---- */

static strand_result_t v9_isend(void *sendComm, void *data, size_t size, int tag, void *mhandle,
                                void **request) {
  return PLUGIN->isend(sendComm, data, size, tag, mhandle, NULL, request);
}
static strand_result_t v9_irecv(void *recvComm, int n, void **data, size_t *sizes, int *tags,
                                void **mhandles, void **request) {
  return PLUGIN->irecv(recvComm, n, data, sizes, tags, mhandles, NULL, request);
}

/* ---- makeVDevice of v9..v11: 4-entry vProps ---- */

static strand_result_t v9_makeVDevice(int *d, strand_vprops_v9_t *props) {
  strand_vprops_v12_t p12;
  strand_result_t rc = strand_vprops_v11_to_v12(props, &p12, "makeVDevice (v9..v11 adapter)");
  if (rc != STRAND_SUCCESS) return rc;
  return PLUGIN->makeVDevice(d, &p12);
}

/* ---- the tables ----
 *
 * Which function each version's table gets (spec §3.1-§3.7). "=" is the plugin's own v12 member;
 * a name is the adapter above; "-" means the version has no such member:
 *
 *   member          v6          v7          v8          v9          v10         v11         v12
 *   init            v6_init     v7_init     v8_init     v9_init     v10_init    v11_init    v12_init
 *   getProperties   v6_getP..   v7_getP..   v8_getP..   v9_getP..   v9_getP..   v11_getP..  =
 *   listen          v6_listen   v6_listen   v6_listen   v6_listen   v6_listen   =           =
 *   connect         v6_connect  v7_connect  v7_connect  v7_connect  v10_connect =           =
 *   accept          v6_accept   =           =           =           =           =           =
 *   regMr           v6_regMr    v6_regMr    =           =           =           =           =
 *   isend, irecv    v6_*        v6_*        v6_*        v9_*        =           =           =
 *   regMrDmaBuf, deregMr, iflush, test, close*, devices: = in every version
 *   getDeviceMr     -           =           =           =           =           =           =
 *   irecvConsumed   -           =           =           =           =           =           =
 *   makeVDevice     -           -           -           v9_make..   v9_make..   v9_make..   =
 *   finalize        -           -           -           -           -           =           =
 *   setNetAttr      -           -           -           -           -           =           =
 * The v6..v10 inits share one plugin context (those cores call init once per process); v10's
 * connect keeps one context per trafficClass.  * The code below is the authority; this matrix is the map. */

void strand_export_net_fill_tables(void) {
  const strand_net_t *p = PLUGIN;
  strand_result_t (*make_vdevice_v9)(int *, strand_vprops_v9_t *) =
      p->makeVDevice != NULL ? v9_makeVDevice : NULL;

  ncclNetPlugin_v6 = (strand_net_v6_t){
      .name = p->name,
      .init = v6_init,
      .devices = p->devices,
      .getProperties = v6_getProperties,
      .listen = v6_listen,
      .connect = v6_connect,
      .accept = v6_accept,
      .regMr = v6_regMr,
      .regMrDmaBuf = p->regMrDmaBuf,
      .deregMr = p->deregMr,
      .isend = v6_isend,
      .irecv = v6_irecv,
      .iflush = p->iflush,
      .test = p->test,
      .closeSend = p->closeSend,
      .closeRecv = p->closeRecv,
      .closeListen = p->closeListen,
  };
  ncclNetPlugin_v7 = (strand_net_v7_t){
      .name = p->name,
      .init = v7_init,
      .devices = p->devices,
      .getProperties = v7_getProperties,
      .listen = v6_listen,
      .connect = v7_connect,
      .accept = p->accept,
      .regMr = v6_regMr,
      .regMrDmaBuf = p->regMrDmaBuf,
      .deregMr = p->deregMr,
      .isend = v6_isend,
      .irecv = v6_irecv,
      .iflush = p->iflush,
      .test = p->test,
      .closeSend = p->closeSend,
      .closeRecv = p->closeRecv,
      .closeListen = p->closeListen,
      .getDeviceMr = p->getDeviceMr,
      .irecvConsumed = p->irecvConsumed,
  };
  ncclNetPlugin_v8 = (strand_net_v8_t){
      .name = p->name,
      .init = v8_init,
      .devices = p->devices,
      .getProperties = v8_getProperties,
      .listen = v6_listen,
      .connect = v7_connect,
      .accept = p->accept,
      .regMr = p->regMr,
      .regMrDmaBuf = p->regMrDmaBuf,
      .deregMr = p->deregMr,
      .isend = v6_isend,
      .irecv = v6_irecv,
      .iflush = p->iflush,
      .test = p->test,
      .closeSend = p->closeSend,
      .closeRecv = p->closeRecv,
      .closeListen = p->closeListen,
      .getDeviceMr = p->getDeviceMr,
      .irecvConsumed = p->irecvConsumed,
  };
  ncclNetPlugin_v9 = (strand_net_v9_t){
      .name = p->name,
      .init = v9_init,
      .devices = p->devices,
      .getProperties = v9_getProperties,
      .listen = v6_listen,
      .connect = v7_connect,
      .accept = p->accept,
      .regMr = p->regMr,
      .regMrDmaBuf = p->regMrDmaBuf,
      .deregMr = p->deregMr,
      .isend = v9_isend,
      .irecv = v9_irecv,
      .iflush = p->iflush,
      .test = p->test,
      .closeSend = p->closeSend,
      .closeRecv = p->closeRecv,
      .closeListen = p->closeListen,
      .getDeviceMr = p->getDeviceMr,
      .irecvConsumed = p->irecvConsumed,
      .makeVDevice = make_vdevice_v9,
  };
  ncclNetPlugin_v10 = (strand_net_v10_t){
      .name = p->name,
      .init = v10_init,
      .devices = p->devices,
      .getProperties = v9_getProperties,
      .listen = v6_listen,
      .connect = v10_connect,
      .accept = p->accept,
      .regMr = p->regMr,
      .regMrDmaBuf = p->regMrDmaBuf,
      .deregMr = p->deregMr,
      .isend = p->isend,
      .irecv = p->irecv,
      .iflush = p->iflush,
      .test = p->test,
      .closeSend = p->closeSend,
      .closeRecv = p->closeRecv,
      .closeListen = p->closeListen,
      .getDeviceMr = p->getDeviceMr,
      .irecvConsumed = p->irecvConsumed,
      .makeVDevice = make_vdevice_v9,
  };
  ncclNetPlugin_v11 = (strand_net_v11_t){
      .name = p->name,
      .init = v11_init,
      .devices = p->devices,
      .getProperties = v11_getProperties,
      .listen = p->listen,
      .connect = p->connect,
      .accept = p->accept,
      .regMr = p->regMr,
      .regMrDmaBuf = p->regMrDmaBuf,
      .deregMr = p->deregMr,
      .isend = p->isend,
      .irecv = p->irecv,
      .iflush = p->iflush,
      .test = p->test,
      .closeSend = p->closeSend,
      .closeRecv = p->closeRecv,
      .closeListen = p->closeListen,
      .getDeviceMr = p->getDeviceMr,
      .irecvConsumed = p->irecvConsumed,
      .makeVDevice = make_vdevice_v9,
      .finalize = p->finalize,
      .setNetAttr = p->setNetAttr,
  };
  /* v12 is the plugin's own table; only init is ours, to learn the core's version. */
  ncclNetPlugin_v12 = *p;
  ncclNetPlugin_v12.init = v12_init;
}

__attribute__((constructor)) static void strand_export_net_constructor(void) {
  strand_export_net_fill_tables();
}
