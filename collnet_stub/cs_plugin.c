/* collnet_stub: the CollNet table, its binding to a net table, and the calls that need no mesh
 * (init/finalize, devices, properties, reduceSupport, listen/closeListen).
 *
 * CollNet device d is net device d: listen on it is the net's listen, so the handle NCCL
 * all-gathers is the net's own listen handle and connect can dial it with the net's connect. */
#include <stdlib.h>
#include <string.h>

#include "cs.h"
#include "strand/lifetime.h"
#include "strand/net_layer.h"
#include "strand/params.h"
#include "strand/reduce.h"

/* Whether the stub offers devices at all. NCCL imports CollNet devices into its topology BEFORE
 * the net devices and merges a pair with the same name into one node whose `gdr` is the CollNet's
 * (topo.cc, docs/plugins/collnet.md), and it does so whenever CollNet init succeeds with devices,
 * even with NCCL_COLLNET_ENABLE unset. A host-only CollNet over a GPUDirect-capable net would then
 * switch GDR off for ALL of that net's traffic. So by default (auto) the stub stays dormant
 * (0 devices) on such nets unless the user asked for CollNet. */
static const strand_param_def_t cs_params[] = {
    STRAND_PARAM_ENUM("STRAND_COLLNET_STUB", NULL, "auto", STRAND_PARAM_CHOICES("auto", "on", "off"),
                      "software CollNet devices: auto = on unless the net has GPU memory support "
                      "and NCCL_COLLNET_ENABLE is not 1; on; off = 0 devices (no CollNet)"),
    STRAND_PARAM_INT("STRAND_COLLNET_THREADS", NULL, -1, -1, 8,
                     "helper threads per collComm for staging copies and reductions (-1 = auto: 4 "
                     "on machines with 5 or more CPUs, else 0; 0 = all on NCCL's CollNet proxy "
                     "thread)"),
    STRAND_PARAM_INT("STRAND_COLLNET_SLOTS", NULL, CS_NSLOTS, 1, CS_MAX_SLOTS,
                     "chunks in flight per collComm (each holds 2 x nranks blocks of arena)"),
    STRAND_PARAM_INT("STRAND_COLLNET_CHUNK_KB", NULL, CS_CHUNK_TARGET >> 10, 64, 16384,
                     "user data per chunk in KiB; each peer's block is this / nranks, 4 KiB .. "
                     "4 MiB"),
    STRAND_PARAM_INT("STRAND_COLLNET_ONESHOT_KB", NULL, -1, -1, 4194304,
                     "all-reduce calls of at most this many KiB run as one exchange per chunk (every "
                     "rank sends its whole chunk to every peer and reduces all copies) instead of a "
                     "reduce-scatter and an all-gather; -1 = auto: every call at 2 ranks (the same "
                     "bytes), 16 KiB above; 0 = never; must be the same on every rank"),
    STRAND_PARAM_BOOL("STRAND_COLLNET_DIRECT", NULL, true,
                      "all-reduce on registered buffers sends from and receives into them without "
                      "staging copies (the buffers are registered with the net too); 0 = stage every "
                      "byte through the collComm's arena"),
    STRAND_PARAM_INT("STRAND_COLLNET_STREAMS", NULL, -1, -1, CS_MAX_STREAMS,
                     "sets of net comms per peer pair; chunks take them in turn, so several chunks' "
                     "exchanges move at once (-1 or 0 = auto: 4 at 2 ranks, 2 at 3 and 4, 1 from 5; "
                     "must be the same on every rank)"),
    STRAND_PARAM_ENUM("STRAND_COLLNET_PROGRESS", NULL, "proxy",
                      STRAND_PARAM_CHOICES("auto", "proxy", "thread"),
                      "where a collComm's collectives progress: proxy = inside test() on NCCL's proxy "
                      "thread; thread = on a thread of the collComm's own, spinning while calls are "
                      "in flight and asleep otherwise; auto = thread from 5 online CPUs, proxy below"),
};

/* The net this CollNet drives: strand_collnet_stub_for() (run time) wins over STRAND_COLLNET_STUB()
 * (build time). */
static strand_net_layer_t cs_layer = STRAND_NET_LAYER_INIT("collnet_stub");

const strand_net_t *cs_net(void) {
  return strand_net_layer_net(&cs_layer, &strand_collnet_stub_net ? strand_collnet_stub_net : NULL);
}

const strand_collnet_t *strand_collnet_stub_for(const strand_net_t *net) {
  return strand_net_layer_bind(&cs_layer, net) ? &strand_collnet_stub : NULL;
}

/* Fetches the bound net or says why there is none. */
static const strand_net_t *cs_need_net(const char *call) {
  return strand_net_layer_need(&cs_layer, &strand_collnet_stub_net ? strand_collnet_stub_net : NULL, call);
}

/* Counts the CollNet contexts from init not finalized yet (no state of its own to set up):
 * connect needs one (cs_require_live). */
STRAND_LIFETIME(cs_life, NULL, NULL, NULL);

strand_result_t cs_require_live(const char *call) {
  return strand_lifetime_require(&cs_life, "collnet_stub", call);
}

static strand_result_t cs_init(void **ctx, uint64_t commId, strand_logger_t logFunction) {
  if (!ctx) return STRAND_INVALID_ARGUMENT;
  *ctx = NULL;
  const strand_net_t *n = cs_need_net("init");
  if (!n) return STRAND_INTERNAL_ERROR;
  /* A bad STRAND_COLLNET_PROGRESS fails init (the params' WARN names the value and the choices)
   * rather than a connect later. */
  if (strand_params_register(cs_params, STRAND_PARAM_COUNT(cs_params)) != STRAND_SUCCESS ||
      strand_param_get_enum("STRAND_COLLNET_PROGRESS", NULL, NULL) != STRAND_SUCCESS)
    return STRAND_INVALID_USAGE;
  cs_ctx_t *c = calloc(1, sizeof *c);
  if (!c) return STRAND_SYSTEM_ERROR;
  /* Our own context of the net: the mesh's comms belong to it, not to NCCL's net context. */
  strand_result_t rc = n->init(&c->net_ctx, commId, NULL, logFunction, NULL);
  if (rc != STRAND_SUCCESS) {
    STRAND_WARN("collnet_stub init: the net's init (%s) returned %d; CollNet stays off", n->name, (int)rc);
    free(c);
    return rc;
  }
  c->magic = CS_CTX_MAGIC;
  c->comm_id = commId;
  *ctx = c;
  strand_lifetime_acquire(&cs_life); /* no setup: cannot fail */
  return STRAND_SUCCESS;
}

static strand_result_t cs_finalize(void *ctx) {
  cs_ctx_t *c = ctx;
  if (!c || c->magic != CS_CTX_MAGIC) {
    STRAND_WARN("collnet_stub finalize: %p is not a context from init", ctx);
    return STRAND_INVALID_ARGUMENT;
  }
  const strand_net_t *n = cs_net();
  strand_result_t rc = n && n->finalize ? n->finalize(c->net_ctx) : STRAND_SUCCESS;
  c->magic = 0;
  free(c);
  strand_lifetime_release(&cs_life);
  return rc;
}

/* True when a net device can move GPU memory (NCCL would use GPUDirect on it). */
static bool cs_net_has_gdr(const strand_net_t *n, int ndev) {
  for (int d = 0; d < ndev; d++) {
    strand_props_t p;
    strand_props_init_host(&p, d);
    if (n->getProperties(d, &p) == STRAND_SUCCESS && (p.ptrSupport & (STRAND_PTR_CUDA | STRAND_PTR_DMABUF)))
      return true;
  }
  return false;
}

static strand_result_t cs_devices(int *ndev) {
  if (!ndev) return STRAND_INVALID_ARGUMENT;
  *ndev = 0;
  const strand_net_t *n = cs_need_net("devices");
  if (!n) return STRAND_INTERNAL_ERROR;
  const char *mode = "auto";
  if (strand_params_register(cs_params, STRAND_PARAM_COUNT(cs_params)) != STRAND_SUCCESS ||
      strand_param_get_enum("STRAND_COLLNET_STUB", NULL, &mode) != STRAND_SUCCESS)
    return STRAND_INVALID_USAGE; /* the WARN naming the bad value is out */
  /* A misspelt or retired STRAND_COLLNET_* variable (STRAND_COLLNET_EARLY_AG, removed) would
   * otherwise be ignored without a word; once per process, as NCCL asks for devices per init. */
  static atomic_flag unknown_checked = ATOMIC_FLAG_INIT;
  if (!atomic_flag_test_and_set(&unknown_checked)) strand_params_check_unknown("STRAND_COLLNET_");
  if (!strcmp(mode, "off")) {
    STRAND_INFO(STRAND_SUBSYS_INIT, "collnet_stub: STRAND_COLLNET_STUB=off: no CollNet devices");
    return STRAND_SUCCESS;
  }
  int nd = 0;
  strand_result_t rc = n->devices(&nd);
  if (rc != STRAND_SUCCESS) return rc;
  if (!strcmp(mode, "auto") && cs_net_has_gdr(n, nd)) {
    const char *en = getenv("NCCL_COLLNET_ENABLE");
    if (!en || strcmp(en, "1") != 0) {
      STRAND_INFO(STRAND_SUBSYS_INIT | STRAND_SUBSYS_NET,
                  "collnet_stub: no CollNet devices: %s supports GPU memory and NCCL_COLLNET_ENABLE "
                  "is not 1 (a host-memory CollNet would turn GPUDirect off for the net's traffic; "
                  "STRAND_COLLNET_STUB=on forces it)", n->name);
      return STRAND_SUCCESS;
    }
  }
  *ndev = nd;
  return STRAND_SUCCESS;
}

/* The net device's identity (name, pciPath, guid, speed, port, latency, maxComms, vProps), with
 * what the stub itself can do: host memory only (the CPU reduces, so buffers must be host
 * pointers; NCCL then stages through host memory), no global registration, no device offload. */
static strand_result_t cs_get_properties(int dev, strand_props_t *props) {
  if (!props) return STRAND_INVALID_ARGUMENT;
  const strand_net_t *n = cs_need_net("getProperties");
  if (!n) return STRAND_INTERNAL_ERROR;
  strand_props_t p;
  strand_props_init_host(&p, dev);
  strand_result_t rc = n->getProperties(dev, &p);
  if (rc != STRAND_SUCCESS) {
    STRAND_WARN("collnet_stub getProperties(%d): the net's getProperties returned %d", dev, (int)rc);
    return rc;
  }
  p.ptrSupport = STRAND_PTR_HOST;
  p.regIsGlobal = 0;
  p.forceFlush = 0;
  p.maxRecvs = 1;
  p.netDeviceType = STRAND_DEV_HOST;
  p.netDeviceVersion = STRAND_NET_DEVICE_INVALID_VERSION;
  p.maxCollBytes = CS_MAX_COLL_BYTES;
  p.maxMultiRequestSize = 1;
  *props = p;
  return STRAND_SUCCESS;
}

/* Every (type, op) the SDK reduces: all 12 types (fp16, bf16, fp8 included) x sum/prod/max/min. */
static strand_result_t cs_reduce_support(strand_datatype_t dataType, strand_redop_t redOp, int *supported) {
  if (!supported) return STRAND_INVALID_ARGUMENT;
  *supported = strand_reduce_supported(dataType, redOp) ? 1 : 0;
  return STRAND_SUCCESS;
}

static strand_result_t cs_listen(void *ctx, int dev, void *handle, void **listenComm) {
  if (!listenComm) return STRAND_INVALID_ARGUMENT;
  *listenComm = NULL;
  cs_ctx_t *c = ctx;
  if (!c || c->magic != CS_CTX_MAGIC || !handle) {
    STRAND_WARN("collnet_stub listen(dev %d): bad context %p or NULL handle", dev, ctx);
    return STRAND_INVALID_ARGUMENT;
  }
  const strand_net_t *n = cs_need_net("listen");
  if (!n) return STRAND_INTERNAL_ERROR;
  cs_listen_t *l = calloc(1, sizeof *l);
  if (!l) return STRAND_SYSTEM_ERROR;
  strand_result_t rc = n->listen(c->net_ctx, dev, handle, &l->net_listen);
  if (rc != STRAND_SUCCESS || !l->net_listen) {
    STRAND_WARN("collnet_stub listen(dev %d): the net's listen returned %d", dev, (int)rc);
    free(l);
    return rc != STRAND_SUCCESS ? rc : STRAND_INTERNAL_ERROR;
  }
  l->magic = CS_LISTEN_MAGIC;
  l->ctx = c;
  l->dev = dev;
  *listenComm = l;
  return STRAND_SUCCESS;
}

static strand_result_t cs_close_listen(void *listenComm) {
  cs_listen_t *l = listenComm;
  if (!l || l->magic != CS_LISTEN_MAGIC) {
    STRAND_WARN("collnet_stub closeListen: %p is not a listenComm of the stub", listenComm);
    return STRAND_INVALID_ARGUMENT;
  }
  const strand_net_t *n = cs_net();
  strand_result_t rc = n->closeListen(l->net_listen);
  l->magic = 0;
  free(l);
  return rc;
}

const strand_collnet_t strand_collnet_stub = {
    .name = "strand-collnet-stub",
    .init = cs_init,
    .devices = cs_devices,
    .getProperties = cs_get_properties,
    .listen = cs_listen,
    .connect = cs_connect,
    .reduceSupport = cs_reduce_support,
    .regMr = cs_reg_mr,
    .regMrDmaBuf = cs_reg_mr_dmabuf,
    .deregMr = cs_dereg_mr,
    .iallreduce = cs_iallreduce,
    .iallgather = cs_iallgather,
    .ireducescatter = cs_ireducescatter,
    .iflush = cs_iflush,
    .test = cs_test,
    .closeColl = cs_close_coll,
    .closeListen = cs_close_listen,
    .makeVDevice = NULL,
    .finalize = cs_finalize,
};
