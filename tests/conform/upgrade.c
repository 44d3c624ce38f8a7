/* strand-conform — adapting an older plugin table upward to the v12 shape, the way NCCL 2.30's
 * core adapters do (spec §1.5), so that check bodies are written once against v12 and still see
 * exactly what each version's plugin sees from a real core:
 *   - v6..v10 init is called once per load (refcount); finalize is a core stub,
 *   - v10 gets a per-comm config copy as connect's 2nd argument,
 *   - v6..v8 sizes are narrowed to int; > 1 GiB is refused with ncclInternalError like the core,
 *   - v6..v8 irecv gets the optional-completion sentinel reset to NULL,
 *   - v6/v7 regMr refuses sizes >= 2^31,
 *   - properties are converted with the core's defaults (maxP2pBytes 1 GiB, ...),
 *   - members a version lacks are NULL, as the core leaves them.
 * One plugin per process: the wrappers reach the raw table through file-scope pointers. */
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "conform_internal.h"

static const void *g_raw;      /* raw net table of the version under test */
static int g_ver;
static const void *g_craw;     /* raw CollNet table */
static int g_cver;
static _Thread_local bool g_adapter_refused;

static int g_init_refs, g_init_done;   /* net init-once for v6..v10 */
static int g_cinit_refs, g_cinit_done; /* CollNet init-once for v6..v10 */

bool conform_upgrade_last_error_was_adapter(void) { return g_adapter_refused; }

#define NV(N) ((const strand_net_v##N##_t *)g_raw)
#define CV(N) ((const strand_collnet_v##N##_t *)g_craw)
#define MAX_NET_SIZE ((size_t)1 << 30)
#define MAX_COLLNET_SIZE ((size_t)1 << 29)

/* ------------------------------------------------------------------ properties */

static void props_defaults(strand_props_v12_t *o, int dev) {
  o->regIsGlobal = 0;
  o->forceFlush = 0;
  o->netDeviceType = STRAND_DEV_HOST;
  o->netDeviceVersion = 0;
  memset(&o->vProps, 0, sizeof o->vProps);
  o->vProps.ndevs = 1;
  o->vProps.devs[0] = dev;
  o->maxP2pBytes = MAX_NET_SIZE;
  o->maxCollBytes = MAX_COLLNET_SIZE;
  o->maxMultiRequestSize = 1;
  o->railId = STRAND_NET_ID_UNDEF;
  o->planeId = STRAND_NET_ID_UNDEF;
}

#define COPY_COMMON(o, in)                                                                         \
  do {                                                                                             \
    (o)->name = (in)->name;                                                                        \
    (o)->pciPath = (in)->pciPath;                                                                  \
    (o)->guid = (in)->guid;                                                                        \
    (o)->ptrSupport = (in)->ptrSupport;                                                            \
    (o)->speed = (in)->speed;                                                                      \
    (o)->port = (in)->port;                                                                        \
    (o)->latency = (in)->latency;                                                                  \
    (o)->maxComms = (in)->maxComms;                                                                \
    (o)->maxRecvs = (in)->maxRecvs;                                                                \
  } while (0)

typedef strand_result_t (*raw_getprops_fn)(int, void *);

/* Slot 3 of every net and CollNet table is getProperties(int dev, Props_vN *). */
static raw_getprops_fn raw_getprops(const void *table) {
  raw_getprops_fn f;
  memcpy(&f, (const char *)table + 3 * sizeof(void *), sizeof f);
  return f;
}

size_t conform_props_size(int v) {
  switch (v) {
  case 6: return sizeof(strand_props_v6_t);
  case 7: return sizeof(strand_props_v7_t);
  case 8: return sizeof(strand_props_v8_t);
  case 9: case 10: return sizeof(strand_props_v9_t);
  case 11: return sizeof(strand_props_v11_t);
  default: return sizeof(strand_props_v12_t);
  }
}

/* Convert a version-v properties struct to v12 with the core's defaults (§1.5). */
static void props_to_v12(int v, int dev, const void *in, strand_props_v12_t *o) {
  memset(o, 0, sizeof *o);
  props_defaults(o, dev);
  switch (v) {
  case 6: {
    const strand_props_v6_t *p = in;
    COPY_COMMON(o, p);
    break;
  }
  case 7: {
    const strand_props_v7_t *p = in;
    COPY_COMMON(o, p);
    o->netDeviceType = p->netDeviceType;
    o->netDeviceVersion = p->netDeviceVersion;
    break;
  }
  case 8: {
    const strand_props_v8_t *p = in;
    COPY_COMMON(o, p);
    o->regIsGlobal = p->regIsGlobal;
    o->netDeviceType = p->netDeviceType;
    o->netDeviceVersion = p->netDeviceVersion;
    break;
  }
  case 9: case 10: case 11: {
    const strand_props_v9_t *p = in; /* v11 starts with the v9/v10 layout */
    COPY_COMMON(o, p);
    o->regIsGlobal = p->regIsGlobal;
    o->forceFlush = p->forceFlush;
    o->netDeviceType = p->netDeviceType;
    o->netDeviceVersion = p->netDeviceVersion;
    o->vProps.ndevs = p->vProps.ndevs;
    for (int i = 0; i < STRAND_NET_MAX_DEVS_PER_NIC_V11; i++) o->vProps.devs[i] = p->vProps.devs[i];
    o->maxP2pBytes = p->maxP2pBytes;
    o->maxCollBytes = p->maxCollBytes;
    if (v == 11) o->maxMultiRequestSize = ((const strand_props_v11_t *)in)->maxMultiRequestSize;
    break;
  }
  default:
    memcpy(o, in, sizeof *o);
  }
}

strand_result_t conform_raw_get_properties(const conform_plugin_t *p, bool collnet, int dev,
                                           void *props, size_t *props_size) {
  const void *t = collnet ? p->raw_collnet : p->raw_net;
  int v = collnet ? p->collnet_version : p->version;
  if (props_size) *props_size = conform_props_size(v);
  return raw_getprops(t)(dev, props);
}

#define FIELD(T, f) {#f, offsetof(T, f), sizeof(((T *)0)->f)}
static const conform_field_t f_v6[] = {
  FIELD(strand_props_v6_t, name), FIELD(strand_props_v6_t, pciPath),
  FIELD(strand_props_v6_t, guid), FIELD(strand_props_v6_t, ptrSupport),
  FIELD(strand_props_v6_t, speed), FIELD(strand_props_v6_t, port),
  FIELD(strand_props_v6_t, latency), FIELD(strand_props_v6_t, maxComms),
  FIELD(strand_props_v6_t, maxRecvs)};
static const conform_field_t f_v7[] = {
  FIELD(strand_props_v7_t, name), FIELD(strand_props_v7_t, pciPath),
  FIELD(strand_props_v7_t, guid), FIELD(strand_props_v7_t, ptrSupport),
  FIELD(strand_props_v7_t, speed), FIELD(strand_props_v7_t, port),
  FIELD(strand_props_v7_t, latency), FIELD(strand_props_v7_t, maxComms),
  FIELD(strand_props_v7_t, maxRecvs), FIELD(strand_props_v7_t, netDeviceType),
  FIELD(strand_props_v7_t, netDeviceVersion)};
static const conform_field_t f_v8[] = {
  FIELD(strand_props_v8_t, name), FIELD(strand_props_v8_t, pciPath),
  FIELD(strand_props_v8_t, guid), FIELD(strand_props_v8_t, ptrSupport),
  FIELD(strand_props_v8_t, regIsGlobal), FIELD(strand_props_v8_t, speed),
  FIELD(strand_props_v8_t, port), FIELD(strand_props_v8_t, latency),
  FIELD(strand_props_v8_t, maxComms), FIELD(strand_props_v8_t, maxRecvs),
  FIELD(strand_props_v8_t, netDeviceType), FIELD(strand_props_v8_t, netDeviceVersion)};
/* vProps.devs entries beyond ndevs need not be written, so only ndevs is pinned. */
static const conform_field_t f_v9[] = {
  FIELD(strand_props_v9_t, name), FIELD(strand_props_v9_t, pciPath),
  FIELD(strand_props_v9_t, guid), FIELD(strand_props_v9_t, ptrSupport),
  FIELD(strand_props_v9_t, regIsGlobal), FIELD(strand_props_v9_t, forceFlush),
  FIELD(strand_props_v9_t, speed), FIELD(strand_props_v9_t, port),
  FIELD(strand_props_v9_t, latency), FIELD(strand_props_v9_t, maxComms),
  FIELD(strand_props_v9_t, maxRecvs), FIELD(strand_props_v9_t, netDeviceType),
  FIELD(strand_props_v9_t, netDeviceVersion), FIELD(strand_props_v9_t, vProps.ndevs),
  FIELD(strand_props_v9_t, maxP2pBytes), FIELD(strand_props_v9_t, maxCollBytes)};
static const conform_field_t f_v11[] = {
  FIELD(strand_props_v11_t, name), FIELD(strand_props_v11_t, pciPath),
  FIELD(strand_props_v11_t, guid), FIELD(strand_props_v11_t, ptrSupport),
  FIELD(strand_props_v11_t, regIsGlobal), FIELD(strand_props_v11_t, forceFlush),
  FIELD(strand_props_v11_t, speed), FIELD(strand_props_v11_t, port),
  FIELD(strand_props_v11_t, latency), FIELD(strand_props_v11_t, maxComms),
  FIELD(strand_props_v11_t, maxRecvs), FIELD(strand_props_v11_t, netDeviceType),
  FIELD(strand_props_v11_t, netDeviceVersion), FIELD(strand_props_v11_t, vProps.ndevs),
  FIELD(strand_props_v11_t, maxP2pBytes), FIELD(strand_props_v11_t, maxCollBytes),
  FIELD(strand_props_v11_t, maxMultiRequestSize)};
static const conform_field_t f_v12[] = {
  FIELD(strand_props_v12_t, name), FIELD(strand_props_v12_t, pciPath),
  FIELD(strand_props_v12_t, guid), FIELD(strand_props_v12_t, ptrSupport),
  FIELD(strand_props_v12_t, regIsGlobal), FIELD(strand_props_v12_t, forceFlush),
  FIELD(strand_props_v12_t, speed), FIELD(strand_props_v12_t, port),
  FIELD(strand_props_v12_t, latency), FIELD(strand_props_v12_t, maxComms),
  FIELD(strand_props_v12_t, maxRecvs), FIELD(strand_props_v12_t, netDeviceType),
  FIELD(strand_props_v12_t, netDeviceVersion), FIELD(strand_props_v12_t, vProps.ndevs),
  FIELD(strand_props_v12_t, maxP2pBytes), FIELD(strand_props_v12_t, maxCollBytes),
  FIELD(strand_props_v12_t, maxMultiRequestSize), FIELD(strand_props_v12_t, railId),
  FIELD(strand_props_v12_t, planeId)};

int conform_props_fields(int v, const conform_field_t **fields) {
#define RET(a) do { *fields = a; return (int)(sizeof a / sizeof a[0]); } while (0)
  switch (v) {
  case 6: RET(f_v6);
  case 7: RET(f_v7);
  case 8: RET(f_v8);
  case 9: case 10: RET(f_v9);
  case 11: RET(f_v11);
  default: RET(f_v12);
  }
#undef RET
}

/* ------------------------------------------------------------------ net wrappers */

static strand_result_t w_init(void **ctx, uint64_t comm_id, strand_comm_config_t *cfg,
                              strand_logger_t log, strand_profiler_cb_t prof) {
  (void)comm_id;
  if (!g_init_done) {
    strand_result_t r = g_ver == 10 ? NV(10)->init(log, prof) : NV(6)->init(log);
    if (r != STRAND_SUCCESS) return r;
    g_init_done = 1;
  }
  g_init_refs++;
  if (g_ver == 10) {
    /* The v10 core keeps a per-communicator copy of the config and hands it to connect. */
    strand_comm_config_t *c = malloc(sizeof *c);
    if (!c) return STRAND_SYSTEM_ERROR;
    c->trafficClass = cfg ? cfg->trafficClass : STRAND_NET_TRAFFIC_CLASS_UNDEF;
    *ctx = c;
  }
  /* v6..v9: *ctx is not written, the comm's ctx stays NULL (§10 item 9). */
  return STRAND_SUCCESS;
}

static strand_result_t w_finalize(void *ctx) {
  if (g_ver == 10) free(ctx);
  if (g_init_refs > 0) g_init_refs--;
  return STRAND_SUCCESS;
}

/* Where a plugin's getProperties writes: large enough for any version's struct, plus slack so a
 * plugin that writes past its struct corrupts this landing area instead of the suite's stack.
 * props.fields-written reports such overruns; every other check just gets the converted copy. */
typedef struct {
  union {
    strand_props_v6_t v6; strand_props_v7_t v7; strand_props_v8_t v8;
    strand_props_v9_t v9; strand_props_v11_t v11; strand_props_v12_t v12;
  } in;
  unsigned char slack[4096];
} props_landing_t;

static strand_result_t w_getprops(int dev, strand_props_v12_t *out) {
  props_landing_t land;
  memset(&land, 0, sizeof land);
  strand_result_t r = raw_getprops(g_raw)(dev, &land.in);
  if (r != STRAND_SUCCESS) return r;
  props_to_v12(g_ver, dev, &land.in, out);
  return STRAND_SUCCESS;
}

static strand_result_t w_listen(void *ctx, int dev, void *handle, void **lc) {
  (void)ctx;
  return NV(6)->listen(dev, handle, lc); /* same slot and signature in v6..v10 */
}

static strand_result_t w_connect(void *ctx, int dev, void *handle, void **sc,
                                 strand_dev_handle_t **dh) {
  switch (g_ver) {
  case 6: return NV(6)->connect(dev, handle, sc);
  case 10: return NV(10)->connect(dev, (strand_comm_config_t *)ctx, handle, sc, dh);
  default: return NV(7)->connect(dev, handle, sc, dh);
  }
}

static strand_result_t w_accept(void *lc, void **rc, strand_dev_handle_t **dh) {
  (void)dh;
  return NV(6)->accept(lc, rc);
}

static strand_result_t w_regmr_int(void *comm, void *data, size_t size, int type, void **mh) {
  g_adapter_refused = false;
  if (size >= ((size_t)1 << 31)) {
    g_adapter_refused = true;
    return STRAND_INTERNAL_ERROR;
  }
  return NV(6)->regMr(comm, data, (int)size, type, mh);
}

static strand_result_t w_isend_int(void *sc, void *data, size_t size, int tag, void *mh,
                                   void *ph, void **req) {
  (void)ph;
  g_adapter_refused = false;
  if (size > MAX_NET_SIZE) {
    g_adapter_refused = true;
    return STRAND_INTERNAL_ERROR;
  }
  return NV(6)->isend(sc, data, (int)size, tag, mh, req);
}

static strand_result_t w_irecv_int(void *rc, int n, void **data, size_t *sizes, int *tags,
                                   void **mhs, void **ph, void **req) {
  (void)ph;
  g_adapter_refused = false;
  int isz[STRAND_PROXY_MAX_SUBS];
  if (n < 0 || n > STRAND_PROXY_MAX_SUBS) return STRAND_INTERNAL_ERROR;
  for (int i = 0; i < n; i++) {
    if (sizes[i] > MAX_NET_SIZE) {
      g_adapter_refused = true;
      return STRAND_INTERNAL_ERROR;
    }
    isz[i] = (int)sizes[i];
  }
  /* Older plugins never see the optional-completion sentinel (§6.6). */
  if (*req == STRAND_NET_OPTIONAL_RECV_COMPLETION_PTR) *req = NULL;
  return NV(6)->irecv(rc, n, data, isz, tags, mhs, req);
}

static strand_result_t w_isend_v9(void *sc, void *data, size_t size, int tag, void *mh, void *ph,
                                  void **req) {
  (void)ph;
  return NV(9)->isend(sc, data, size, tag, mh, req);
}

static strand_result_t w_irecv_v9(void *rc, int n, void **data, size_t *sizes, int *tags,
                                  void **mhs, void **ph, void **req) {
  (void)ph;
  return NV(9)->irecv(rc, n, data, sizes, tags, mhs, req);
}

static strand_result_t w_makevdev_v11(int *d, strand_vprops_v12_t *props) {
  strand_vprops_v11_t v;
  /* NCCL limits vNIC size to 4 for ncclNetVer < 12. */
  if (props->ndevs > STRAND_NET_MAX_DEVS_PER_NIC_V11) return STRAND_INVALID_USAGE;
  memset(&v, 0, sizeof v);
  v.ndevs = props->ndevs;
  for (int i = 0; i < props->ndevs; i++) v.devs[i] = props->devs[i];
  return g_ver == 11 ? NV(11)->makeVDevice(d, &v) : NV(9)->makeVDevice(d, &v);
}

static strand_result_t w_getprops_v11(int dev, strand_props_v12_t *out) { return w_getprops(dev, out); }

/* Copies the raw table's members into p->net (adapters where the version needs them). Called at
 * load, and again after the first successful init: a plugin may fill its table during init. */
static void fill_net(conform_plugin_t *p) {
  g_raw = p->raw_net;
  g_ver = p->version;
  strand_net_v12_t *o = &p->net;
  memset(o, 0, sizeof *o);
  if (!g_raw) return;
  if (g_ver >= 12) {
    memcpy(o, g_raw, sizeof *o);
    /* NCCL calls a v12 table directly; the suite still routes getProperties through the landing
     * area so that one plugin writing past its struct fails one check, not the suite's stack. */
    if (o->getProperties) o->getProperties = w_getprops;
    return;
  }
  o->name = NV(6)->name;
  o->devices = NV(6)->devices;
  o->getProperties = w_getprops;
  if (g_ver == 11) {
    /* Same member list as v12; only getProperties/makeVDevice see different structs. */
    const strand_net_v11_t *t = NV(11);
    o->init = t->init;
    o->listen = t->listen;
    o->connect = t->connect;
    o->accept = t->accept;
    o->regMr = t->regMr;
    o->regMrDmaBuf = t->regMrDmaBuf;
    o->deregMr = t->deregMr;
    o->isend = t->isend;
    o->irecv = t->irecv;
    o->iflush = t->iflush;
    o->test = t->test;
    o->closeSend = t->closeSend;
    o->closeRecv = t->closeRecv;
    o->closeListen = t->closeListen;
    o->getDeviceMr = t->getDeviceMr;
    o->irecvConsumed = t->irecvConsumed;
    o->makeVDevice = t->makeVDevice ? w_makevdev_v11 : NULL;
    o->finalize = t->finalize;
    o->setNetAttr = t->setNetAttr;
    o->getProperties = w_getprops_v11;
    return;
  }
  /* v6..v10 */
  o->init = w_init;
  o->finalize = w_finalize;
  o->listen = w_listen;
  o->connect = w_connect;
  o->accept = g_ver == 6 ? w_accept : NV(7)->accept;
  o->regMr = g_ver <= 7 ? w_regmr_int : NV(8)->regMr;
  o->regMrDmaBuf = NV(6)->regMrDmaBuf;
  o->deregMr = NV(6)->deregMr;
  o->iflush = NV(6)->iflush;
  o->test = NV(6)->test;
  o->closeSend = NV(6)->closeSend;
  o->closeRecv = NV(6)->closeRecv;
  o->closeListen = NV(6)->closeListen;
  if (g_ver <= 8) {
    o->isend = w_isend_int;
    o->irecv = w_irecv_int;
  } else if (g_ver == 9) {
    o->isend = w_isend_v9;
    o->irecv = w_irecv_v9;
  } else {
    o->isend = NV(10)->isend;
    o->irecv = NV(10)->irecv;
  }
  if (g_ver >= 7) {
    o->getDeviceMr = NV(7)->getDeviceMr;
    o->irecvConsumed = NV(7)->irecvConsumed;
  }
  if (g_ver >= 9) o->makeVDevice = NV(9)->makeVDevice ? w_makevdev_v11 : NULL;
  o->setNetAttr = NULL;
}

void conform_upgrade_net(conform_plugin_t *p) {
  g_init_refs = g_init_done = 0;
  fill_net(p);
}

/* ------------------------------------------------------------------ CollNet wrappers */

static strand_result_t cw_init(void **ctx, uint64_t comm_id, strand_logger_t log) {
  (void)ctx; (void)comm_id;
  if (!g_cinit_done) {
    strand_result_t r = CV(6)->init(log);
    if (r != STRAND_SUCCESS) return r;
    g_cinit_done = 1;
  }
  g_cinit_refs++;
  return STRAND_SUCCESS;
}

static strand_result_t cw_finalize(void *ctx) {
  (void)ctx;
  if (g_cinit_refs > 0) g_cinit_refs--;
  return STRAND_SUCCESS;
}

static strand_result_t cw_getprops(int dev, strand_props_v12_t *out) {
  props_landing_t land;
  memset(&land, 0, sizeof land);
  strand_result_t r = raw_getprops(g_craw)(dev, &land.in);
  if (r != STRAND_SUCCESS) return r;
  props_to_v12(g_cver, dev, &land.in, out);
  if (g_cver <= 8) { /* v6..v8 CollNet devices are forced to HOST/0 */
    out->netDeviceType = STRAND_DEV_HOST;
    out->netDeviceVersion = 0;
  }
  return STRAND_SUCCESS;
}

static strand_result_t cw_listen(void *ctx, int dev, void *handle, void **lc) {
  (void)ctx;
  return CV(6)->listen(dev, handle, lc);
}

static strand_result_t cw_regmr_int(void *cc, void *data, size_t size, int type, void **mh) {
  g_adapter_refused = false;
  if (size >= ((size_t)1 << 31)) {
    g_adapter_refused = true;
    return STRAND_INTERNAL_ERROR;
  }
  return CV(6)->regMr(cc, data, (int)size, type, mh);
}

static strand_result_t cw_iallreduce_int(void *cc, void *s, void *r, size_t count,
                                         strand_datatype_t dt, strand_redop_t op, void *smh,
                                         void *rmh, void **req) {
  g_adapter_refused = false;
  if (count > ((size_t)1 << 30)) {
    g_adapter_refused = true;
    return STRAND_INTERNAL_ERROR;
  }
  return CV(6)->iallreduce(cc, s, r, (int)count, dt, op, smh, rmh, req);
}

static strand_result_t cw_iallgather_v8(void *cc, void *send, int nparts, strand_sge_v12_t *parts,
                                        size_t bpr, size_t woff, size_t wbytes, void *smh,
                                        void **req) {
  g_adapter_refused = false;
  if (nparts != 1 || parts[0].size > MAX_COLLNET_SIZE) {
    g_adapter_refused = true;
    return STRAND_INTERNAL_ERROR;
  }
  strand_sge_v8_t s = {parts[0].mhandle, parts[0].address, (uint32_t)parts[0].size};
  return CV(8)->iallgather(cc, send, 1, &s, bpr, woff, wbytes, smh, req);
}

static strand_result_t cw_ireducescatter_v8(void *cc, int nparts, strand_sge_v12_t *parts,
                                            void *recv, size_t bpr, size_t woff, size_t wbytes,
                                            strand_datatype_t dt, strand_redop_t op, void *rmh,
                                            void **req) {
  g_adapter_refused = false;
  if (nparts != 1 || parts[0].size > MAX_COLLNET_SIZE) {
    g_adapter_refused = true;
    return STRAND_INTERNAL_ERROR;
  }
  strand_sge_v8_t s = {parts[0].mhandle, parts[0].address, (uint32_t)parts[0].size};
  return CV(8)->ireducescatter(cc, 1, &s, recv, bpr, woff, wbytes, dt, op, rmh, req);
}

static strand_result_t cw_makevdev(int *d, strand_vprops_v12_t *props) {
  strand_vprops_v11_t v;
  if (props->ndevs > STRAND_NET_MAX_DEVS_PER_NIC_V11) return STRAND_INVALID_USAGE;
  memset(&v, 0, sizeof v);
  v.ndevs = props->ndevs;
  for (int i = 0; i < props->ndevs; i++) v.devs[i] = props->devs[i];
  return g_cver == 11 ? CV(11)->makeVDevice(d, &v) : CV(9)->makeVDevice(d, &v);
}

static void fill_collnet(conform_plugin_t *p) {
  g_craw = p->raw_collnet;
  g_cver = p->collnet_version;
  strand_collnet_v12_t *o = &p->collnet;
  memset(o, 0, sizeof *o);
  p->has_collnet = g_craw != NULL;
  if (!g_craw) return;
  if (g_cver >= 12) {
    memcpy(o, g_craw, sizeof *o);
    return;
  }
  o->name = CV(6)->name;
  o->devices = CV(6)->devices;
  o->getProperties = cw_getprops;
  o->connect = CV(6)->connect;
  o->reduceSupport = CV(6)->reduceSupport;
  o->regMrDmaBuf = CV(6)->regMrDmaBuf;
  o->deregMr = CV(6)->deregMr;
  if (g_cver == 11) {
    const strand_collnet_v11_t *t = CV(11);
    o->init = t->init;
    o->listen = t->listen;
    o->regMr = t->regMr;
    o->iallreduce = t->iallreduce;
    o->iallgather = t->iallgather;
    o->ireducescatter = t->ireducescatter;
    o->iflush = t->iflush;
    o->test = t->test;
    o->closeColl = t->closeColl;
    o->closeListen = t->closeListen;
    o->makeVDevice = t->makeVDevice ? cw_makevdev : NULL;
    o->finalize = t->finalize;
    return;
  }
  o->init = cw_init;
  o->finalize = cw_finalize;
  o->listen = cw_listen;
  if (g_cver <= 7) {
    o->regMr = cw_regmr_int;
    o->iallreduce = cw_iallreduce_int;
    o->iflush = CV(6)->iflush;
    o->test = CV(6)->test;
    o->closeColl = CV(6)->closeColl;
    o->closeListen = CV(6)->closeListen;
    return; /* iallgather / ireducescatter stay NULL */
  }
  if (g_cver == 8) {
    o->regMr = CV(8)->regMr;
    o->iallreduce = cw_iallreduce_int;
    o->iallgather = CV(8)->iallgather ? cw_iallgather_v8 : NULL;
    o->ireducescatter = CV(8)->ireducescatter ? cw_ireducescatter_v8 : NULL;
    o->iflush = CV(8)->iflush;
    o->test = CV(8)->test;
    o->closeColl = CV(8)->closeColl;
    o->closeListen = CV(8)->closeListen;
    return;
  }
  /* v9, v10: same member list as v12 minus ctx/finalize. */
  o->regMr = CV(9)->regMr;
  o->iallreduce = CV(9)->iallreduce;
  o->iallgather = CV(9)->iallgather;
  o->ireducescatter = CV(9)->ireducescatter;
  o->iflush = CV(9)->iflush;
  o->test = CV(9)->test;
  o->closeColl = CV(9)->closeColl;
  o->closeListen = CV(9)->closeListen;
  o->makeVDevice = CV(9)->makeVDevice ? cw_makevdev : NULL;
}

void conform_upgrade_collnet(conform_plugin_t *p) {
  g_cinit_refs = g_cinit_done = 0;
  fill_collnet(p);
}

/* NCCL's core reads a table's members only after init returned (§1.3): a plugin may export a table
 * holding just name and init and fill the rest during init. The check child re-reads the raw
 * tables after its first successful init, keeping the init-once state of the v6..v10 adapters. */
void conform_upgrade_reread(conform_plugin_t *p) {
  fill_net(p);
  fill_collnet(p);
}

/* ------------------------------------------------------------------ one-sided (GIN / RMA) */
/* Every older one-sided table adapted to the v14 RMA shape the way NCCL's adapters do:
 *   v13 (ncclRmaPlugin_v13 or ncclGinPlugin_v13): 2.30's adapter refuses a table whose device 0
 *       is not GIN_PROXY; createContext gets {nContexts, trafficClass} and a device-handle
 *       out-pointer; regMrSym's ginHandle is what the data path gets; iputSignal drops
 *       isStrongSignal (every v13 signal is strong).
 *   v12/v11 (ncclGinPlugin_v12/_v11, GIN proxy mode of 2.29/2.28): no contexts: the "context" is
 *       the collComm, createContext/destroyContext are the adapter's; iput/iputSignal/test take
 *       the collComm (v12: a connectionId = the context index, connect(nConnections 1, queue
 *       depth)); no iget/iflush; properties are ncclNetProperties_v11. */

static const void *g_rraw;
static int g_rver;
static char g_rma_refusal[256];
#define RG(N) ((const strand_gin_v##N##_t *)g_rraw)
#define RMA_QUEUE_DEPTH 1024 /* what the suite's adapter asks of connect/createContext */

const char *conform_upgrade_rma_refusal(void) { return g_rma_refusal; }

/* Registrations of the v11..v13 adapters: {mhandle, ginHandle}. Never freed: a deregistered one
 * stays (dead) so that a second dereg hands the plugin the same mhandle again, as a core with
 * that bug would. A handle that is none of these reaches the plugin unchanged (garbage tests). */
#define RMA_MAX_REGS 4096
#define RMA_REG_MAGIC 0x524d4152u
typedef struct {
  uint32_t magic;
  bool live;
  void *mh, *gh;
} rma_reg_t;
static rma_reg_t g_rregs[RMA_MAX_REGS];
static int g_nrregs;

static rma_reg_t *rreg_of(void *h) {
  rma_reg_t *r = h;
  if (r >= g_rregs && r < g_rregs + RMA_MAX_REGS && r->magic == RMA_REG_MAGIC) return r;
  return NULL;
}
static void *rreg_mh(void *h) {
  rma_reg_t *r = rreg_of(h);
  return r ? r->mh : h;
}
static void *rreg_gh(void *h) {
  rma_reg_t *r = rreg_of(h);
  return r ? r->gh : h;
}
static strand_result_t rreg_new(void *mh, void *gh, void **out) {
  if (g_nrregs >= RMA_MAX_REGS) return STRAND_INTERNAL_ERROR;
  rma_reg_t *r = &g_rregs[g_nrregs++];
  *r = (rma_reg_t){RMA_REG_MAGIC, true, mh, gh};
  *out = r;
  return STRAND_SUCCESS;
}

/* Slots 0..5 and 9..12 have the same shape in v11..v13; regMrSym is slot 7 in all of them. */
typedef strand_result_t (*rreg_fn)(void *, void *, size_t, int, uint64_t, void **, void **);
typedef strand_result_t (*rregdb_fn)(void *, void *, size_t, int, uint64_t, int, uint64_t, void **, void **);
typedef strand_result_t (*rdereg_fn)(void *, void *);
static rreg_fn rraw_reg(void) { return g_rver == 11 ? RG(11)->regMrSym : g_rver == 12 ? RG(12)->regMrSym : RG(13)->regMrSym; }
static rregdb_fn rraw_regdb(void) { return g_rver == 11 ? RG(11)->regMrSymDmaBuf : g_rver == 12 ? RG(12)->regMrSymDmaBuf : RG(13)->regMrSymDmaBuf; }
static rdereg_fn rraw_dereg(void) { return g_rver == 11 ? RG(11)->deregMrSym : g_rver == 12 ? RG(12)->deregMrSym : RG(13)->deregMrSym; }

static strand_result_t rw_reg(void *cc, void *data, size_t size, int type, uint64_t flags, void **mh) {
  void *m = NULL, *g = NULL;
  if (mh) *mh = NULL;
  strand_result_t r = rraw_reg()(cc, data, size, type, flags, &m, &g);
  if (r != STRAND_SUCCESS || !mh) return r;
  return rreg_new(m, g, mh);
}
static strand_result_t rw_regdb(void *cc, void *data, size_t size, int type, uint64_t off, int fd,
                                uint64_t flags, void **mh) {
  void *m = NULL, *g = NULL;
  if (mh) *mh = NULL;
  strand_result_t r = rraw_regdb()(cc, data, size, type, off, fd, flags, &m, &g);
  if (r != STRAND_SUCCESS || !mh) return r;
  return rreg_new(m, g, mh);
}
static strand_result_t rw_dereg(void *cc, void *mh) {
  rma_reg_t *r = rreg_of(mh);
  if (r) r->live = false;
  return rraw_dereg()(cc, rreg_mh(mh));
}

/* v13 */
static strand_result_t rw13_init(void **ctx, uint64_t comm_id, strand_logger_t log) {
  g_rma_refusal[0] = '\0';
  strand_result_t r = RG(13)->init(ctx, comm_id, log);
  if (r != STRAND_SUCCESS) return r;
  /* 2.30's v13 adapter: a v13 table is a GIN proxy, or NCCL does not use it. */
  int n = 0;
  strand_props_v12_t p;
  memset(&p, 0, sizeof p);
  if (RG(13)->devices(&n) == STRAND_SUCCESS && n > 0 && RG(13)->getProperties(0, &p) == STRAND_SUCCESS &&
      p.netDeviceType != STRAND_DEV_GIN_PROXY) {
    snprintf(g_rma_refusal, sizeof g_rma_refusal, "NCCL 2.30's v13 adapter refuses the table: device 0 "
             "reports netDeviceType %d, not GIN_PROXY (2)", (int)p.netDeviceType);
    if (RG(13)->finalize) RG(13)->finalize(*ctx);
    *ctx = NULL;
    return STRAND_INTERNAL_ERROR;
  }
  return STRAND_SUCCESS;
}
static strand_result_t rw13_create(void *cc, strand_rma_config_v14_t *cfg, void **rctx) {
  strand_gin_config_v13_t c13 = {0, 0, cfg ? cfg->nContexts : 1, RMA_QUEUE_DEPTH, cfg ? cfg->trafficClass : 0};
  strand_dev_handle_v11_t *dh = NULL;
  return RG(13)->createContext(cc, &c13, rctx, &dh);
}
static strand_result_t rw13_iput(void *rctx, int context, uint64_t so, void *smh, size_t size, uint64_t doff,
                                 void *dmh, uint32_t rank, void **req) {
  return RG(13)->iput(rctx, context, so, rreg_gh(smh), size, doff, rreg_gh(dmh), rank, req);
}
static strand_result_t rw13_iputs(void *rctx, int context, uint64_t so, void *smh, size_t size, uint64_t doff,
                                  void *dmh, uint32_t rank, uint64_t sigoff, void *sigmh, uint64_t val,
                                  uint32_t op, bool strong, void **req) {
  (void)strong; /* every v13 signal is strong */
  return RG(13)->iputSignal(rctx, context, so, rreg_gh(smh), size, doff, rreg_gh(dmh), rank, sigoff,
                            rreg_gh(sigmh), val, op, req);
}
static strand_result_t rw13_iget(void *rctx, int context, uint64_t ro, void *rmh, size_t size, uint64_t lo,
                                 void *lmh, uint32_t rank, void **req) {
  return RG(13)->iget(rctx, context, ro, rreg_gh(rmh), size, lo, rreg_gh(lmh), rank, req);
}
static strand_result_t rw13_iflush(void *rctx, int context, void *mh, uint32_t rank, void **req) {
  return RG(13)->iflush(rctx, context, rreg_gh(mh), rank, req);
}

/* v11 / v12 */
static strand_result_t rw11_getprops(int dev, strand_props_v12_t *out) {
  strand_props_v11_t p;
  memset(&p, 0, sizeof p);
  strand_result_t r = (g_rver == 11 ? RG(11)->getProperties : RG(12)->getProperties)(dev, &p);
  if (r == STRAND_SUCCESS) props_to_v12(11, dev, &p, out);
  return r;
}
static strand_result_t rw12_connect(void *ctx, void *handles[], int nranks, int rank, void *lc, void **cc) {
  return RG(12)->connect(ctx, handles, nranks, rank, 1, RMA_QUEUE_DEPTH, lc, cc);
}
/* GIN_PROXY mode has no contexts: the adapter's context is the collComm. */
static strand_result_t rw11_create(void *cc, strand_rma_config_v14_t *cfg, void **rctx) {
  (void)cfg;
  if (!rctx) return STRAND_INVALID_ARGUMENT;
  *rctx = cc;
  return cc ? STRAND_SUCCESS : STRAND_INVALID_ARGUMENT;
}
static strand_result_t rw11_destroy(void *rctx) { return rctx ? STRAND_SUCCESS : STRAND_INVALID_ARGUMENT; }
static strand_result_t rw11_iput(void *cc, int context, uint64_t so, void *smh, size_t size, uint64_t doff,
                                 void *dmh, uint32_t rank, void **req) {
  if (g_rver == 11) return RG(11)->iput(cc, so, rreg_gh(smh), size, doff, rreg_gh(dmh), rank, req);
  return RG(12)->iput(cc, so, rreg_gh(smh), size, doff, rreg_gh(dmh), rank, context, req);
}
static strand_result_t rw11_iputs(void *cc, int context, uint64_t so, void *smh, size_t size, uint64_t doff,
                                  void *dmh, uint32_t rank, uint64_t sigoff, void *sigmh, uint64_t val,
                                  uint32_t op, bool strong, void **req) {
  (void)strong;
  if (g_rver == 11)
    return RG(11)->iputSignal(cc, so, rreg_gh(smh), size, doff, rreg_gh(dmh), rank, sigoff, rreg_gh(sigmh),
                              val, op, req);
  return RG(12)->iputSignal(cc, so, rreg_gh(smh), size, doff, rreg_gh(dmh), rank, sigoff, rreg_gh(sigmh), val,
                            op, context, req);
}

void conform_upgrade_rma(conform_plugin_t *p) {
  g_rraw = p->raw_rma;
  g_rver = p->rma_version;
  memset(&p->rma, 0, sizeof p->rma);
  p->has_rma = g_rraw != NULL;
  if (!g_rraw) return;
  strand_rma_v14_t *o = &p->rma;
  switch (g_rver) {
  case 14:
    *o = *(const strand_rma_v14_t *)g_rraw;
    break;
  case 13: {
    const strand_gin_v13_t *t = RG(13);
    o->name = t->name;
    o->init = t->init ? rw13_init : NULL;
    o->devices = t->devices;
    o->getProperties = t->getProperties;
    o->listen = t->listen;
    o->connect = t->connect;
    o->createContext = t->createContext ? rw13_create : NULL;
    o->regMrSym = t->regMrSym ? rw_reg : NULL;
    o->regMrSymDmaBuf = t->regMrSymDmaBuf ? rw_regdb : NULL;
    o->deregMrSym = t->deregMrSym ? rw_dereg : NULL;
    o->destroyContext = t->destroyContext;
    o->closeColl = t->closeColl;
    o->closeListen = t->closeListen;
    o->iput = t->iput ? rw13_iput : NULL;
    o->iputSignal = t->iputSignal ? rw13_iputs : NULL;
    o->iget = t->iget ? rw13_iget : NULL;
    o->iflush = t->iflush ? rw13_iflush : NULL;
    o->test = t->test;
    o->rmaProgress = t->ginProgress;
    o->queryLastError = t->queryLastError;
    o->finalize = t->finalize;
    break;
  }
  default: { /* 11, 12: the members up to closeListen and from test on share their slots */
    const strand_gin_v11_t *t = RG(11);
    o->name = t->name;
    o->init = t->init;
    o->devices = t->devices;
    o->getProperties = t->getProperties ? rw11_getprops : NULL;
    o->listen = t->listen;
    o->connect = g_rver == 12 ? (RG(12)->connect ? rw12_connect : NULL) : t->connect;
    o->createContext = rw11_create;
    o->regMrSym = t->regMrSym ? rw_reg : NULL;
    o->regMrSymDmaBuf = t->regMrSymDmaBuf ? rw_regdb : NULL;
    o->deregMrSym = t->deregMrSym ? rw_dereg : NULL;
    o->destroyContext = rw11_destroy;
    o->closeColl = t->closeColl;
    o->closeListen = t->closeListen;
    o->iput = t->iput ? rw11_iput : NULL;
    o->iputSignal = t->iputSignal ? rw11_iputs : NULL;
    o->iget = NULL;
    o->iflush = NULL;
    o->test = t->test;
    o->rmaProgress = t->ginProgress;
    o->queryLastError = t->queryLastError;
    o->finalize = t->finalize;
    break;
  }
  }
}
