/* gin_proxy: the RMA table, its binding to a net table, and the calls that need no mesh
 * (init/finalize, devices, properties, listen/closeListen, createContext/destroyContext).
 *
 * RMA device d is net device d: listen is the net's listen, so the handle NCCL all-gathers is the
 * net's own listen handle and connect can dial it with the net's connect. */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "gp.h"
#include "strand/params.h"
#include "strand/net_layer.h"

strand_handle_set_t gp_live_comms = STRAND_HANDLE_SET_INIT;
strand_handle_set_t gp_live_rctx = STRAND_HANDLE_SET_INIT;
strand_handle_set_t gp_live_mrs = STRAND_HANDLE_SET_INIT;
strand_handle_set_t gp_live_reqs = STRAND_HANDLE_SET_INIT;
static strand_handle_set_t gp_live_ctx = STRAND_HANDLE_SET_INIT;
static strand_handle_set_t gp_live_listens = STRAND_HANDLE_SET_INIT;

/* The net gin_proxy drives: strand_gin_proxy_for() (run time) wins over STRAND_GIN_PROXY()
 * (build time). */
static strand_net_layer_t gp_layer = STRAND_NET_LAYER_INIT("gin_proxy");

const strand_net_t *gp_net(void) {
  return strand_net_layer_net(&gp_layer, &strand_gin_proxy_net ? strand_gin_proxy_net : NULL);
}

const strand_rma_t *strand_gin_proxy_for(const strand_net_t *net) {
  return strand_net_layer_bind(&gp_layer, net) ? &strand_gin_proxy : NULL;
}

static const strand_net_t *gp_need_net(const char *call) {
  return strand_net_layer_need(&gp_layer, &strand_gin_proxy_net ? strand_gin_proxy_net : NULL, call);
}

static gp_ctx_t *gp_ctx_get(void *ctx, const char *call) {
  if (!ctx || !strand_handle_set_contains(&gp_live_ctx, ctx)) {
    STRAND_WARN("gin_proxy %s: %p is not a live context from init (finalized already?)", call, ctx);
    return NULL;
  }
  return ctx;
}

static const strand_param_def_t gp_params[] = {
    STRAND_PARAM_ENUM("STRAND_GIN_CUDA_CONTEXT", NULL, "auto", STRAND_PARAM_CHOICES("auto", "window", "own"),
                      "the CUDA context GPU windows are moved in: window = the windows' own (fastest); "
                      "own = one of Strand's own on the same GPU, whose streams never queue behind the "
                      "application's kernels (each copy and signal waits for the GPU to switch to it); "
                      "auto = own where CUDA_DEVICE_MAX_CONNECTIONS is below 8, window otherwise"),
};

static strand_result_t gp_init(void **ctx, uint64_t commId, strand_logger_t logFunction) {
  if (!ctx) return STRAND_INVALID_ARGUMENT;
  *ctx = NULL;
  const strand_net_t *n = gp_need_net("init");
  if (!n) return STRAND_INTERNAL_ERROR;
  /* A bad STRAND_GIN_CUDA_CONTEXT fails init (the params' WARN names the value and the choices)
   * rather than the first GPU window later. */
  if (strand_params_register(gp_params, STRAND_PARAM_COUNT(gp_params)) != STRAND_SUCCESS ||
      strand_param_get_enum("STRAND_GIN_CUDA_CONTEXT", NULL, NULL) != STRAND_SUCCESS)
    return STRAND_INVALID_USAGE;
  /* a misspelt STRAND_GIN_* variable would otherwise be ignored without a word; once per process */
  static atomic_flag unknown_checked = ATOMIC_FLAG_INIT;
  if (!atomic_flag_test_and_set(&unknown_checked)) strand_params_check_unknown("STRAND_GIN_");
  gp_ctx_t *c = calloc(1, sizeof *c);
  if (!c) return STRAND_SYSTEM_ERROR;
  /* Our own context of the net: the mesh's comms belong to it, not to NCCL's net context. */
  strand_result_t rc = n->init(&c->net_ctx, commId, NULL, logFunction, NULL);
  if (rc != STRAND_SUCCESS) {
    STRAND_WARN("gin_proxy init: the net's init (%s) returned %d; GIN/RMA stays off", n->name, (int)rc);
    free(c);
    return rc;
  }
  c->magic = GP_CTX_MAGIC;
  if ((rc = strand_handle_set_add(&gp_live_ctx, c)) != STRAND_SUCCESS) {
    if (n->finalize) n->finalize(c->net_ctx);
    free(c);
    return rc;
  }
  *ctx = c;
  return STRAND_SUCCESS;
}

static strand_result_t gp_finalize(void *ctx) {
  /* NCCL 2.28 finalizes a shared GIN state once per communicator sharing it and clears it after the
   * first (gin_host.cc): the second call passes NULL. Nothing was ours: not an error. */
  if (!ctx) {
    STRAND_INFO(STRAND_SUBSYS_NET, "gin_proxy finalize(NULL): no context to finalize (ignored)");
    return STRAND_SUCCESS;
  }
  if (!strand_handle_set_remove(&gp_live_ctx, ctx)) {
    STRAND_WARN("gin_proxy finalize: %p is not a live context from init (finalized twice?)", ctx);
    return STRAND_INVALID_ARGUMENT;
  }
  gp_ctx_t *c = ctx;
  const strand_net_t *n = gp_net();
  strand_result_t rc = n && n->finalize ? n->finalize(c->net_ctx) : STRAND_SUCCESS;
  c->magic = 0;
  free(c);
  return rc;
}

static strand_result_t gp_devices(int *ndev) {
  if (!ndev) return STRAND_INVALID_ARGUMENT;
  *ndev = 0;
  const strand_net_t *n = gp_need_net("devices");
  if (!n) return STRAND_INTERNAL_ERROR;
  return n->devices(ndev);
}

/* The net device's identity (name, pciPath, guid, speed, port, latency, vProps) with what the
 * proxy itself offers: a GIN_PROXY device on host memory. maxRecvs 1: NCCL sizes its per-peer
 * proxy queue as 32 x maxRecvs, and the proxy queues without a cap anyway. */
static strand_result_t gp_get_properties(int dev, strand_props_t *props) {
  if (!props) return STRAND_INVALID_ARGUMENT;
  const strand_net_t *n = gp_need_net("getProperties");
  if (!n) return STRAND_INTERNAL_ERROR;
  strand_props_t p;
  strand_props_init_host(&p, dev);
  strand_result_t rc = n->getProperties(dev, &p);
  if (rc != STRAND_SUCCESS) {
    STRAND_WARN("gin_proxy getProperties(%d): the net's getProperties returned %d", dev, (int)rc);
    return rc;
  }
  /* GPU windows are moved through the CUDA driver when this process has one (gp_cuda.c). */
  p.ptrSupport = STRAND_PTR_HOST | (gp_cuda_available() ? STRAND_PTR_CUDA : 0);
  p.regIsGlobal = 0;
  p.forceFlush = 0;
  p.maxRecvs = 1;
  p.netDeviceType = STRAND_DEV_GIN_PROXY;
  p.netDeviceVersion = STRAND_GIN_PROXY_VERSION;
  p.maxP2pBytes = STRAND_MAX_GIN_SIZE;
  p.maxMultiRequestSize = 1;
  *props = p;
  return STRAND_SUCCESS;
}

static strand_result_t gp_listen(void *ctx, int dev, void *handle, void **listenComm) {
  if (!listenComm) return STRAND_INVALID_ARGUMENT;
  *listenComm = NULL;
  gp_ctx_t *c = gp_ctx_get(ctx, "listen");
  if (!c || !handle) return STRAND_INVALID_ARGUMENT;
  const strand_net_t *n = gp_need_net("listen");
  if (!n) return STRAND_INTERNAL_ERROR;
  gp_listen_t *l = calloc(1, sizeof *l);
  if (!l) return STRAND_SYSTEM_ERROR;
  strand_result_t rc = n->listen(c->net_ctx, dev, handle, &l->net_listen);
  if (rc != STRAND_SUCCESS || !l->net_listen) {
    STRAND_WARN("gin_proxy listen(dev %d): the net's listen returned %d", dev, (int)rc);
    free(l);
    return rc != STRAND_SUCCESS ? rc : STRAND_INTERNAL_ERROR;
  }
  *l = (gp_listen_t){.magic = GP_LISTEN_MAGIC, .ctx = c, .dev = dev, .net_listen = l->net_listen};
  if ((rc = strand_handle_set_add(&gp_live_listens, l)) != STRAND_SUCCESS) {
    n->closeListen(l->net_listen);
    free(l);
    return rc;
  }
  *listenComm = l;
  return STRAND_SUCCESS;
}

/* connect takes its context from here: NCCL 2.30 passes its net context to connect, 2.28 its GIN
 * context, so the ctx argument cannot be trusted. */
gp_listen_t *gp_listen_get(void *listenComm) {
  return listenComm && strand_handle_set_contains(&gp_live_listens, listenComm) ? listenComm : NULL;
}

static strand_result_t gp_close_listen(void *listenComm) {
  if (!listenComm || !strand_handle_set_remove(&gp_live_listens, listenComm)) {
    STRAND_WARN("gin_proxy closeListen: %p is not a live listenComm (closed twice?)", listenComm);
    return STRAND_INVALID_ARGUMENT;
  }
  gp_listen_t *l = listenComm;
  strand_result_t rc = gp_net()->closeListen(l->net_listen);
  l->magic = 0;
  free(l);
  return rc;
}

/* Contexts are ordering domains of one collComm. The proxy orders everything to a peer on one
 * stream, which is stricter than per-context order, so a context is only its index range. */
static strand_result_t gp_create_context(void *collComm, strand_rma_config_t *config, void **rmaCtx) {
  if (!rmaCtx) return STRAND_INVALID_ARGUMENT;
  *rmaCtx = NULL;
  gp_comm_t *c = gp_comm_get(collComm, "createContext");
  if (!c) return STRAND_INVALID_ARGUMENT;
  int nctx = config ? config->nContexts : 1;
  if (nctx < 1) {
    STRAND_WARN("gin_proxy createContext(rank %d/%d): nContexts %d must be >= 1", c->rank, c->nranks, nctx);
    return STRAND_INVALID_ARGUMENT;
  }
  gp_rctx_t *r = calloc(1, sizeof *r);
  if (!r) return STRAND_SYSTEM_ERROR;
  *r = (gp_rctx_t){.magic = GP_RCTX_MAGIC, .comm = c, .ncontexts = nctx};
  strand_result_t rc = strand_handle_set_add(&gp_live_rctx, r);
  if (rc != STRAND_SUCCESS) {
    free(r);
    return rc;
  }
  pthread_mutex_lock(&c->lock);
  r->next = c->rctxs;
  c->rctxs = r;
  pthread_mutex_unlock(&c->lock);
  *rmaCtx = r;
  return STRAND_SUCCESS;
}

static strand_result_t gp_destroy_context(void *rmaCtx) {
  if (!rmaCtx || !strand_handle_set_remove(&gp_live_rctx, rmaCtx)) {
    STRAND_WARN("gin_proxy destroyContext: %p is not a live context (destroyed twice, or its "
                "collComm closed?)", rmaCtx);
    return STRAND_INVALID_ARGUMENT;
  }
  gp_rctx_t *r = rmaCtx;
  gp_comm_t *c = r->comm;
  pthread_mutex_lock(&c->lock);
  for (gp_rctx_t **pp = &c->rctxs; *pp; pp = &(*pp)->next)
    if (*pp == r) {
      *pp = r->next;
      break;
    }
  pthread_mutex_unlock(&c->lock);
  r->magic = 0;
  free(r);
  return STRAND_SUCCESS;
}

void gp_rctx_free_all(gp_comm_t *c) {
  for (gp_rctx_t *r = c->rctxs, *nx; r; r = nx) {
    nx = r->next;
    strand_handle_set_remove(&gp_live_rctx, r);
    r->magic = 0;
    free(r);
  }
  c->rctxs = NULL;
}

gp_rctx_t *gp_rctx_get(void *rmaCtx, const char *call) {
  if (!rmaCtx || !strand_handle_set_contains(&gp_live_rctx, rmaCtx)) {
    STRAND_WARN("gin_proxy %s: %p is not a live context from createContext (destroyed, or its "
                "collComm closed?)", call, rmaCtx);
    return NULL;
  }
  return rmaCtx;
}

const strand_rma_t strand_gin_proxy = {
    .name = "strand-gin-proxy",
    .init = gp_init,
    .devices = gp_devices,
    .getProperties = gp_get_properties,
    .listen = gp_listen,
    .connect = gp_connect,
    .createContext = gp_create_context,
    .regMrSym = gp_reg_mr_sym,
    .regMrSymDmaBuf = gp_reg_mr_sym_dmabuf,
    .deregMrSym = gp_dereg_mr_sym,
    .destroyContext = gp_destroy_context,
    .closeColl = gp_close_coll,
    .closeListen = gp_close_listen,
    .iput = gp_iput,
    .iputSignal = gp_iput_signal,
    .iget = gp_iget,
    .iflush = gp_iflush,
    .test = gp_test,
    .rmaProgress = gp_rma_progress,
    .queryLastError = gp_query_last_error,
    .finalize = gp_finalize,
};
