/* gin_proxy: the RMA table, its binding to a net table, and the calls that need no mesh
 * (init/finalize, devices, properties, listen/closeListen, createContext/destroyContext).
 *
 * RMA device d is net device d: listen is the net's listen, so the handle NCCL all-gathers is the
 * net's own listen handle and connect can dial it with the net's connect. */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "gp.h"

strand_handle_set_t gp_live_comms = STRAND_HANDLE_SET_INIT;
strand_handle_set_t gp_live_rctx = STRAND_HANDLE_SET_INIT;
strand_handle_set_t gp_live_mrs = STRAND_HANDLE_SET_INIT;
strand_handle_set_t gp_live_reqs = STRAND_HANDLE_SET_INIT;
static strand_handle_set_t gp_live_ctx = STRAND_HANDLE_SET_INIT;
static strand_handle_set_t gp_live_listens = STRAND_HANDLE_SET_INIT;

static const strand_net_t *g_bound; /* strand_gin_proxy_for(); wins over the build-time binding */

const strand_net_t *gp_net(void) {
  const strand_net_t *n = __atomic_load_n(&g_bound, __ATOMIC_ACQUIRE);
  if (n) return n;
  return &strand_gin_proxy_net ? strand_gin_proxy_net : NULL;
}

static bool gp_net_usable(const strand_net_t *n) {
  return n && n->init && n->devices && n->getProperties && n->listen && n->connect && n->accept &&
         n->isend && n->irecv && n->test && n->closeSend && n->closeRecv && n->closeListen;
}

const strand_rma_t *strand_gin_proxy_for(const strand_net_t *net) {
  if (!gp_net_usable(net)) {
    STRAND_WARN("gin_proxy: net table %s lacks a member gin_proxy needs (init, devices, "
                "getProperties, listen, connect, accept, isend, irecv, test, close*)",
                net && net->name ? net->name : "(null)");
    return NULL;
  }
  const strand_net_t *expected = NULL;
  if (!__atomic_compare_exchange_n(&g_bound, &expected, net, false, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE) &&
      expected != net) {
    STRAND_WARN("gin_proxy: already bound to net %s; one net table per process", expected->name);
    return NULL;
  }
  return &strand_gin_proxy;
}

double gp_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static const strand_net_t *gp_need_net(const char *call) {
  const strand_net_t *n = gp_net();
  if (!gp_net_usable(n)) {
    STRAND_WARN("gin_proxy %s: no usable net table bound (STRAND_GIN_PROXY(table) or "
                "strand_gin_proxy_for(&table) must name one)", call);
    return NULL;
  }
  return n;
}

static gp_ctx_t *gp_ctx_get(void *ctx, const char *call) {
  if (!ctx || !strand_handle_set_contains(&gp_live_ctx, ctx)) {
    STRAND_WARN("gin_proxy %s: %p is not a live context from init (finalized already?)", call, ctx);
    return NULL;
  }
  return ctx;
}

static strand_result_t gp_init(void **ctx, uint64_t commId, strand_logger_t logFunction) {
  if (!ctx) return STRAND_INVALID_ARGUMENT;
  *ctx = NULL;
  const strand_net_t *n = gp_need_net("init");
  if (!n) return STRAND_INTERNAL_ERROR;
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
  if (!ctx || !strand_handle_set_remove(&gp_live_ctx, ctx)) {
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
  p.ptrSupport = STRAND_PTR_HOST;
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
