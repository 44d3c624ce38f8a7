/* strand-conform — rma.*: the one-sided tables NCCL's device API reaches the network through
 * (docs/spec/gin-rma.md; /work/shared/reference/gin-rma.md): ncclRmaPlugin_v14/_v13 (NCCL 2.30+,
 * its GIN proxy over RMA), ncclGinPlugin_v13, and ncclGinPlugin_v12/_v11 in GIN_PROXY mode
 * (2.29/2.28), driven through upgrade.c's v14-shaped adapters; ncclGinPlugin_v14 (device-side
 * only) gets the table check. Host memory windows only.
 *
 * How a check runs: every rank inits the table, listens on device 0, all-gathers the handles in
 * rank order and connects collectively (NCCL's bootstrap does the same), creates one context and
 * registers its windows symmetrically (same sizes, same order on every rank). Rank r writes into
 * rank next's window; what arrives is checked where it lands, by polling the target's own memory
 * while calling the progress function. Every wait is bounded: a request that never completes or
 * data that never arrives fails the check, it does not hang it. Before anything is torn down the
 * ranks meet in a barrier during which a thread keeps calling the progress function, so that a
 * plugin whose peers need this rank's progress (gets, acknowledgements) is never starved. */
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>

#include "conform.h"
#include "strand/cuda_driver.h"

#define RMA_WAIT_S 5.0          /* bound on one request or one arrival, x --timeout-scale */
#define RMA_COMPLETE_S 2.0      /* rma.completion-bound's bound on a small put */
#define RMA_SIG_WORDS 8         /* 64-bit signal words per signal window */
#define RMA_MAX_REGIONS 24
#define RMA_MAX_WINS 4          /* windows one check registers (rma.reg-sym: 4) */

/* A foreign, non-NULL pointer: NCCL 2.30 hands RMA connect its NET context, not the context the
 * RMA init returned, so a plugin must not look at connect's ctx. */
static struct { char bytes[256]; } g_foreign_ctx = {{"strand-conform: not your context"}};

typedef struct {
  unsigned char *base;
  size_t len;
  void *mh;
} rwin_t;

typedef struct {
  void *ctx, *lc, *cc, *rctx;
  int ndev;
  bool inited;
  strand_props_v12_t props;
  rwin_t win[RMA_MAX_WINS]; /* the windows of rs_add_win, torn down by rs_run */
  int nwin;
} rs_t;

typedef struct {
  uint64_t off;
  size_t len;
  uint64_t seed;
} rregion_t;

static const char *rma_sym(const conform_ctx_t *c) {
  return c->plugin->rma_symbol ? c->plugin->rma_symbol : "the one-sided table";
}

static double wait_bound(const conform_ctx_t *c, double s) {
  double until = conform_now() + s * c->timeout_scale;
  return until < c->deadline - 0.5 ? until : c->deadline - 0.5;
}

/* Init and devices; 0, 1 when the body must stop (skip or fail recorded). */
static int rs_init(conform_ctx_t *c, rs_t *x) {
  memset(x, 0, sizeof *x);
  conform_phase(c, "%s init", rma_sym(c));
  strand_result_t r = c->rma->init(&x->ctx, 0x524d41434f4e46ULL, conform_logger_fn());
  if (r != STRAND_SUCCESS) {
    const char *why = conform_upgrade_rma_refusal();
    conform_fail(c, "%s init returned %s%s%s: NCCL reports GIN as not supported", rma_sym(c),
                 conform_result_str(r), why[0] ? ": " : "", why);
    return 1;
  }
  x->inited = true;
  conform_phase(c, "%s devices", rma_sym(c));
  r = c->rma->devices(&x->ndev);
  if (r != STRAND_SUCCESS || x->ndev < 0) {
    conform_fail(c, "%s devices() returned %s with %d devices", rma_sym(c), conform_result_str(r), x->ndev);
    return 1;
  }
  if (x->ndev == 0) {
    conform_skip(c, CONFORM_ZERO_DEVICES_MSG);
    return 1;
  }
  memset(&x->props, 0, sizeof x->props);
  conform_phase(c, "%s getProperties(0)", rma_sym(c));
  r = c->rma->getProperties(0, &x->props);
  if (r != STRAND_SUCCESS) {
    conform_fail(c, "%s getProperties(0) returned %s", rma_sym(c), conform_result_str(r));
    return 1;
  }
  return 0;
}

/* Progress in a thread while this rank waits in the bootstrap (see the top of the file). */
typedef struct {
  const conform_ctx_t *c;
  void *rctx;
  volatile int stop;
} rprog_t;

static void *rprog_main(void *arg) {
  rprog_t *p = arg;
  while (!p->stop) {
    p->c->rma->rmaProgress(p->rctx);
    sched_yield();
  }
  return NULL;
}

static int rs_barrier(conform_ctx_t *c, rs_t *x) {
  rprog_t p = {c, x->rctx, 0};
  pthread_t th;
  bool started = x->rctx && c->rma->rmaProgress && pthread_create(&th, NULL, rprog_main, &p) == 0;
  conform_phase(c, "barrier (progress thread running)");
  int rc = conform_barrier(c);
  if (started) {
    p.stop = 1;
    pthread_join(th, NULL);
  }
  if (rc) conform_fail(c, "%s", c->bs_error);
  return rc;
}

/* Listen, all-gather the handles in rank order, one collective connect (conn_ctx: the ctx given
 * to connect), closeListen, one context. */
static int rs_connect(conform_ctx_t *c, rs_t *x, void *conn_ctx) {
  unsigned char h[CONFORM_LISTEN_BUF];
  const size_t hs = STRAND_GIN_HANDLE_MAXSIZE;
  memset(h, 0, sizeof h);
  conform_phase(c, "%s listen(dev 0)", rma_sym(c));
  strand_result_t r = c->rma->listen(x->ctx, 0, h, &x->lc);
  if (r != STRAND_SUCCESS || !x->lc) {
    conform_fail(c, "%s listen(dev 0) returned %s, listenComm %p", rma_sym(c), conform_result_str(r), x->lc);
    return -1;
  }
  unsigned char *all = malloc((size_t)c->nranks * hs);
  void *ptrs[CONFORM_MAX_RANKS];
  if (!all || conform_allgather(c, h, hs, all)) {
    free(all);
    conform_fail(c, "%s", c->bs_error);
    return -1;
  }
  for (int i = 0; i < c->nranks; i++) ptrs[i] = all + (size_t)i * hs;
  conform_phase(c, "%s connect(%d ranks)", rma_sym(c), c->nranks);
  r = c->rma->connect(conn_ctx, ptrs, c->nranks, c->rank, x->lc, &x->cc);
  free(all);
  if (r != STRAND_SUCCESS || !x->cc) {
    conform_fail(c, "%s connect of %d ranks%s returned %s, collComm %p", rma_sym(c), c->nranks,
                 conn_ctx == x->ctx ? "" : " (ctx: a pointer that is not the plugin's, as NCCL 2.30 passes)",
                 conform_result_str(r), x->cc);
    return -1;
  }
  conform_phase(c, "%s closeListen", rma_sym(c));
  r = c->rma->closeListen(x->lc);
  x->lc = NULL;
  if (r != STRAND_SUCCESS) {
    conform_fail(c, "closeListen after connect returned %s", conform_result_str(r));
    return -1;
  }
  strand_rma_config_v14_t cfg = {1, 0, 1};
  conform_phase(c, "%s createContext", rma_sym(c));
  r = c->rma->createContext(x->cc, &cfg, &x->rctx);
  if (r != STRAND_SUCCESS || !x->rctx) {
    conform_fail(c, "%s createContext(nContexts 1) returned %s, context %p", rma_sym(c),
                 conform_result_str(r), x->rctx);
    x->rctx = NULL;
    return -1;
  }
  return 0;
}

static int rs_win(conform_ctx_t *c, rs_t *x, rwin_t *w, size_t len, uint64_t flags) {
  memset(w, 0, sizeof *w);
  size_t alloc = (len + 4095) & ~(size_t)4095;
  w->base = aligned_alloc(4096, alloc ? alloc : 4096);
  if (!w->base) {
    conform_fail(c, "out of memory for a %zu-byte window", len);
    return -1;
  }
  w->len = len;
  memset(w->base, CONFORM_GUARD_BYTE, len);
  conform_phase(c, "%s regMrSym(%zu bytes)", rma_sym(c), len);
  strand_result_t r = c->rma->regMrSym(x->cc, w->base, len, STRAND_PTR_HOST, flags, &w->mh);
  if (r != STRAND_SUCCESS || !w->mh) {
    conform_fail(c, "%s regMrSym of a %zu-byte host window returned %s, handle %p", rma_sym(c), len,
                 conform_result_str(r), w->mh);
    w->mh = NULL;
    return -1;
  }
  return 0;
}

static void rs_unwin(conform_ctx_t *c, rs_t *x, rwin_t *w) {
  if (w->mh) {
    conform_phase(c, "%s deregMrSym", rma_sym(c));
    strand_result_t r = c->rma->deregMrSym(x->cc, w->mh);
    if (r != STRAND_SUCCESS) conform_fail(c, "deregMrSym returned %s", conform_result_str(r));
  }
  free(w->base);
  memset(w, 0, sizeof *w);
}

static void rs_fini(conform_ctx_t *c, rs_t *x) {
  if (x->rctx) {
    conform_phase(c, "%s destroyContext", rma_sym(c));
    strand_result_t r = c->rma->destroyContext(x->rctx);
    if (r != STRAND_SUCCESS) conform_fail(c, "destroyContext returned %s", conform_result_str(r));
  }
  if (x->cc) {
    conform_phase(c, "%s closeColl", rma_sym(c));
    strand_result_t r = c->rma->closeColl(x->cc);
    if (r != STRAND_SUCCESS) conform_fail(c, "closeColl returned %s", conform_result_str(r));
  }
  if (x->lc) c->rma->closeListen(x->lc);
  if (x->inited) {
    conform_phase(c, "%s finalize", rma_sym(c));
    strand_result_t r = c->rma->finalize(x->ctx);
    if (r != STRAND_SUCCESS) conform_fail(c, "finalize returned %s", conform_result_str(r));
  }
  memset(x, 0, sizeof *x);
}

/* A window the frame deregisters and frees after the body, in reverse order of registration;
 * NULL after a failure (recorded). */
static rwin_t *rs_add_win(conform_ctx_t *c, rs_t *x, size_t len, uint64_t flags) {
  if (x->nwin == RMA_MAX_WINS) {
    conform_fail(c, "strand-conform: a check asked for more than %d windows", RMA_MAX_WINS);
    return NULL;
  }
  rwin_t *w = &x->win[x->nwin++];
  return rs_win(c, x, w, len, flags) == 0 ? w : NULL;
}

/* A signal window: RMA_SIG_WORDS zeroed words, strictly ordered as NCCL registers its signals. */
static rwin_t *rs_add_sig(conform_ctx_t *c, rs_t *x) {
  rwin_t *w = rs_add_win(c, x, RMA_SIG_WORDS * 8, STRAND_GIN_MR_FLAG_FORCE_SO);
  if (w) memset(w->base, 0, w->len);
  return w;
}

/* The windows deregistered (newest first), then everything rs_init/rs_connect opened. */
static void rs_down(conform_ctx_t *c, rs_t *x) {
  while (x->nwin > 0) rs_unwin(c, x, &x->win[--x->nwin]);
  rs_fini(c, x);
}

/* A check's own part: registers its windows with rs_add_win/rs_add_sig, records failures and
 * returns; the frame cleans up. */
typedef void (*rs_body_t)(conform_ctx_t *c, rs_t *x);

/* The frame of a data-path check: init, connect (conn_ctx: the ctx connect gets, NULL = the one
 * init returned), one context; the body; then a barrier with progress (no rank tears down while a
 * peer may still need it), the body's windows deregistered, everything closed, the verdict. */
static conform_status_t rs_run(conform_ctx_t *c, void *conn_ctx, rs_body_t body) {
  rs_t x;
  if (rs_init(c, &x) == 0 && rs_connect(c, &x, conn_ctx ? conn_ctx : x.ctx) == 0) {
    body(c, &x);
    rs_barrier(c, &x);
  }
  rs_down(c, &x);
  return conform_verdict(c);
}

static int req_issued(conform_ctx_t *c, strand_result_t r, void *req, const char *what) {
  if (r != STRAND_SUCCESS) {
    conform_fail(c, "%s returned %s", what, conform_result_str(r));
    return -1;
  }
  if (!req) {
    conform_fail(c, "%s returned ncclSuccess with *request NULL: NCCL 2.30's proxy treats that as an "
                 "internal error", what);
    return -1;
  }
  return 0;
}

static int rs_put(conform_ctx_t *c, rs_t *x, rwin_t *src, uint64_t soff, size_t len, rwin_t *dst,
                  uint64_t doff, int rank, void **req) {
  char what[160];
  snprintf(what, sizeof what, "iput(%zu bytes, src+%llu -> rank %d +%llu)", len, (unsigned long long)soff,
           rank, (unsigned long long)doff);
  conform_phase(c, "%s", what);
  *req = NULL;
  strand_result_t r = c->rma->iput(x->rctx, 0, soff, src->mh, len, doff, dst->mh, (uint32_t)rank, req);
  return req_issued(c, r, *req, what);
}

static int rs_put_signal(conform_ctx_t *c, rs_t *x, rwin_t *src, uint64_t soff, size_t len, rwin_t *dst,
                         uint64_t doff, int rank, rwin_t *sig, int word, uint64_t value, uint32_t op,
                         bool strong, void **req) {
  char what[200];
  snprintf(what, sizeof what, "iputSignal(%zu bytes -> rank %d +%llu, signal word %d %s %llu%s)", len, rank,
           (unsigned long long)doff, word, op == STRAND_GIN_SIGNAL_OP_INC ? "INC" : "ADD",
           (unsigned long long)value, strong ? ", strong" : "");
  conform_phase(c, "%s", what);
  *req = NULL;
  strand_result_t r = c->rma->iputSignal(x->rctx, 0, soff, src->mh, len, doff, dst->mh, (uint32_t)rank,
                                         (uint64_t)word * 8, sig->mh, value, op, strong, req);
  return req_issued(c, r, *req, what);
}

/* One test() of a pending request (NULL = already done); -1 after an error. */
static int rs_test(conform_ctx_t *c, rs_t *x, void **req, const char *what) {
  if (!*req) return 0;
  int done = 0;
  conform_phase(c, "test(%s)", what);
  strand_result_t r = c->rma->test(x->cc, *req, &done);
  if (r != STRAND_SUCCESS) {
    conform_fail(c, "test(%s) returned %s", what, conform_result_str(r));
    return -1;
  }
  if (done) *req = NULL;
  return 0;
}

static int rs_progress(conform_ctx_t *c, rs_t *x) {
  if (!c->rma->rmaProgress) return 0;
  strand_result_t r = c->rma->rmaProgress(x->rctx);
  if (r != STRAND_SUCCESS) {
    conform_fail(c, "the progress function returned %s", conform_result_str(r));
    return -1;
  }
  return 0;
}

/* Wait for n requests, progressing; bounded. */
static int rs_wait_all(conform_ctx_t *c, rs_t *x, void **reqs, int n, double bound_s, const char *what) {
  double until = wait_bound(c, bound_s);
  for (unsigned spins = 0;; spins++) {
    int left = 0;
    for (int i = 0; i < n; i++) {
      if (rs_test(c, x, &reqs[i], what)) return -1;
      left += reqs[i] != NULL;
    }
    if (!left) return 0;
    if (rs_progress(c, x)) return -1;
    if ((spins & 63) == 63) {
      if (conform_peer_failed(c)) return conform_fail(c, "%s", c->bs_error), -1;
      if (conform_now() > until) {
        conform_fail(c, "%d of %d %s request(s) did not complete within %.1f s (test() never said done)",
                     left, n, what, bound_s * c->timeout_scale);
        return -1;
      }
    }
  }
}

static uint64_t sig_load(const rwin_t *sig, int word) {
  return __atomic_load_n((const uint64_t *)sig->base + word, __ATOMIC_ACQUIRE);
}

/* First bad byte of a window holding `n` regions (pattern) and guard bytes elsewhere; -1 = good.
 * *which gets the region index (-1: outside every region). */
static long long win_check(const rwin_t *w, const rregion_t *reg, int n, int *which) {
  uint64_t pos = 0;
  *which = -1;
  for (int k = 0; k <= n; k++) {
    uint64_t end = k < n ? reg[k].off : w->len;
    for (uint64_t i = pos; i < end; i++)
      if (w->base[i] != CONFORM_GUARD_BYTE) return (long long)i;
    if (k == n) break;
    long long bad = conform_verify(w->base + reg[k].off, reg[k].len, reg[k].seed);
    if (bad >= 0) {
      *which = k;
      return (long long)reg[k].off + bad;
    }
    pos = reg[k].off + reg[k].len;
  }
  return -1;
}

/* Regions of random sizes and offsets (the same on every rank: layout seeded by `salt` only),
 * one per slot of `slot` bytes; seeds per (src, dst, k). */
static void make_regions(rregion_t *reg, int n, const size_t *sizes, size_t slot, uint64_t salt, int src,
                         int dst) {
  uint64_t s = salt * 0x9e3779b97f4a7c15ULL + 1;
  for (int k = 0; k < n; k++) {
    s ^= s << 13, s ^= s >> 7, s ^= s << 17;
    reg[k].off = (uint64_t)k * slot + (s % 61);
    reg[k].len = sizes[k];
    reg[k].seed = conform_seed(src, dst, salt * 64 + (uint64_t)k);
  }
}

static size_t rma_max_put(const conform_ctx_t *c, const rs_t *x) {
  size_t m = c->quick ? ((size_t)2 << 20) : ((size_t)4 << 20);
  if (m > c->max_bytes) m = c->max_bytes;
  if (x->props.maxP2pBytes > 0 && m > x->props.maxP2pBytes) m = x->props.maxP2pBytes;
  return m;
}

/* ------------------------------------------------------------------ the checks */

static const char *const slots_gin11[] = {"name", "init", "devices", "getProperties", "listen", "connect",
  "createContext", "regMrSym", "regMrSymDmaBuf", "deregMrSym", "destroyContext", "closeColl", "closeListen",
  "iput", "iputSignal", "test", "ginProgress", "queryLastError", "finalize"};
static const char *const slots_13[] = {"name", "init", "devices", "getProperties", "listen", "connect",
  "createContext", "regMrSym", "regMrSymDmaBuf", "deregMrSym", "destroyContext", "closeColl", "closeListen",
  "iput", "iputSignal", "iget", "iflush", "test", "progress", "queryLastError", "finalize"};
static const char *const slots_gin14[] = {"name", "init", "devices", "getGinProperties", "getProperties",
  "listen", "connect", "createContext", "regMrSym", "regMrSymDmaBuf", "deregMrSym", "destroyContext",
  "closeColl", "closeListen", "ginProgress", "queryLastError", "finalize"};

static conform_status_t rma_table_complete(conform_ctx_t *c) {
  if (!c->plugin_loaded) return conform_skip(c, "the plugin did not load");
  const conform_plugin_t *p = c->plugin;
  if (p->n_rma_found == 0)
    return conform_skip(c, "the library exports no ncclRmaPlugin_v14/_v13 or ncclGinPlugin_v14.._v11 symbol");
  char list[256] = "";
  for (int i = 0; i < p->n_rma_found; i++) {
    const conform_rma_sym_t *s = &p->rma_found[i];
    const void *const *slot = s->table;
    const char *const *names;
    int n, optional1 = -1, optional2 = -1, optional3 = -1;
    if (s->gin && s->version <= 12) {
      /* GIN_PROXY mode: NCCL's proxy never creates a context (2.28/2.29) */
      names = slots_gin11, n = 19, optional1 = 6, optional2 = 8, optional3 = 10;
    } else if (s->gin && s->version == 14) {
      names = slots_gin14, n = 17, optional1 = 9;
    } else {
      names = slots_13, n = 21, optional1 = 8;
    }
    snprintf(list + strlen(list), sizeof list - strlen(list), "%s%s", i ? ", " : "", s->symbol);
    const char *name = slot[0];
    if (!name || !name[0]) conform_fail(c, "%s: name is %s", s->symbol, name ? "empty" : "NULL");
    for (int k = 1; k < n; k++) {
      if (k == optional1 || k == optional2 || k == optional3) continue;
      /* A host-data-path table's queryLastError is never called by NCCL's proxy in 2.28/2.29 (it
       * keeps its own error flag) and only after a NULL test in 2.30 (gin_host_proxy.cc): NULL is
       * legal there, but NCCL then learns of a dead peer only from a failing test(). The
       * device-side GIN v14 table has it called unconditionally (gin_host.cc). */
      if (!slot[k] && strcmp(names[k], "queryLastError") == 0 && !(s->gin && s->version == 14)) {
        conform_warn(c, "%s: queryLastError is NULL: NCCL's GIN proxy tolerates it, but then notices a "
                     "broken peer only when a test() fails", s->symbol);
        continue;
      }
      if (!slot[k]) conform_fail(c, "%s: member %s is NULL; NCCL calls it unconditionally", s->symbol, names[k]);
    }
  }
  if (c->status != CONFORM_FAIL) conform_note(c, "%s; under test: %s", list, p->rma_symbol ? p->rma_symbol : "none");
  return conform_verdict(c);
}

static conform_status_t rma_init(conform_ctx_t *c) {
  rs_t x;
  if (rs_init(c, &x) == 0) {
    for (int d = 0; d < x.ndev; d++) {
      strand_props_v12_t p;
      memset(&p, 0, sizeof p);
      conform_phase(c, "%s getProperties(%d)", rma_sym(c), d);
      strand_result_t r = c->rma->getProperties(d, &p);
      if (r != STRAND_SUCCESS) {
        conform_fail(c, "getProperties(%d) returned %s", d, conform_result_str(r));
        continue;
      }
      if (!p.name || strnlen(p.name, 256) == 0 || strnlen(p.name, 256) == 256)
        conform_fail(c, "device %d: name %s", d, !p.name ? "NULL" : p.name[0] ? "not NUL-terminated within 256 bytes" : "empty");
      if (p.netDeviceType != STRAND_DEV_GIN_PROXY)
        conform_fail(c, "device %d reports netDeviceType %d: a host-data-path (proxy) table must report "
                     "GIN_PROXY (2); NCCL 2.30 refuses a v13 table otherwise and picks a device backend for "
                     "others", d, (int)p.netDeviceType);
      if (p.maxP2pBytes == 0) conform_fail(c, "device %d: maxP2pBytes 0", d);
    }
    if (c->status != CONFORM_FAIL)
      conform_note(c, "%s: %d device(s), GIN_PROXY, name \"%s\"", rma_sym(c), x.ndev, x.props.name ? x.props.name : "");
  }
  rs_fini(c, &x);
  return conform_verdict(c);
}

static void connect_body(conform_ctx_t *c, rs_t *x) {
  (void)x;
  conform_note(c, "%d ranks connected through %s", c->nranks, rma_sym(c));
}
static conform_status_t rma_connect(conform_ctx_t *c) { return rs_run(c, NULL, connect_body); }

static void connect_foreign_ctx_body(conform_ctx_t *c, rs_t *x) {
  rwin_t *w, *s;
  void *req = NULL;
  /* and the comm it made works: one put to the next rank, seen there */
  if (!(w = rs_add_win(c, x, 4096, 0)) || !(s = rs_add_win(c, x, 4096, 0))) return;
  conform_fill(s->base, 512, conform_seed(c->rank, c->next, 1));
  if (rs_put(c, x, s, 0, 512, w, 0, c->next, &req) || rs_wait_all(c, x, &req, 1, RMA_WAIT_S, "iput")) return;
  double until = wait_bound(c, RMA_WAIT_S);
  while (conform_verify(w->base, 512, conform_seed(c->prev, c->rank, 1)) >= 0 && conform_now() < until)
    if (rs_progress(c, x)) break;
  if (c->status != CONFORM_FAIL && conform_verify(w->base, 512, conform_seed(c->prev, c->rank, 1)) >= 0)
    conform_fail(c, "a 512-byte put from rank %d never arrived on a comm connected with a foreign ctx", c->prev);
}
/* The data of rma.connect-foreign-ctx: connect must not use its ctx argument. */
static conform_status_t rma_connect_foreign_ctx(conform_ctx_t *c) {
  return rs_run(c, &g_foreign_ctx, connect_foreign_ctx_body);
}

/* Puts of `n` regions from this rank's src window into next's dst window (same offsets), then
 * the arrival of prev's regions polled in this rank's dst window. The signal variant adds one
 * strong signal after the puts (rma.strong-order). */
static int ring_puts(conform_ctx_t *c, rs_t *x, rwin_t *src, rwin_t *dst, const size_t *sizes, int n, size_t slot,
                     uint64_t salt, const char *what) {
  rregion_t out[RMA_MAX_REGIONS], in[RMA_MAX_REGIONS];
  make_regions(out, n, sizes, slot, salt, c->rank, c->next);
  make_regions(in, n, sizes, slot, salt, c->prev, c->rank);
  for (int k = 0; k < n; k++) conform_fill(src->base + out[k].off, out[k].len, out[k].seed);
  void *reqs[RMA_MAX_REGIONS] = {0};
  for (int k = 0; k < n; k++)
    if (rs_put(c, x, src, out[k].off, out[k].len, dst, out[k].off, c->next, &reqs[k])) return -1;
  if (rs_wait_all(c, x, reqs, n, RMA_WAIT_S, what)) return -1;
  double until = wait_bound(c, RMA_WAIT_S);
  long long bad = 0;
  int which = -1;
  for (unsigned spins = 0;; spins++) {
    bad = win_check(dst, in, n, &which);
    if (bad < 0) return 0;
    if (rs_progress(c, x)) return -1;
    if (conform_now() > until) break;
    if ((spins & 15) == 15 && conform_peer_failed(c)) return conform_fail(c, "%s", c->bs_error), -1;
  }
  if (which >= 0)
    conform_fail(c, "%s: %.1f s after rank %d's puts completed, region %d (%zu bytes at +%llu) still differs at "
                 "byte %lld of the window", what, RMA_WAIT_S * c->timeout_scale, c->prev, which, in[which].len,
                 (unsigned long long)in[which].off, bad);
  else
    conform_fail(c, "%s: byte %lld of the window, outside every region put there, was written (a put to a "
                 "wrong offset, or longer than asked)", what, bad);
  return -1;
}

static void put_body(conform_ctx_t *c, rs_t *x) {
  size_t maxp = rma_max_put(c, x);
  size_t sizes[8] = {0, 1, 7, 4096, 65537, maxp, 0, 0};
  uint64_t s = 0x2545F4914F6CDD1DULL;
  for (int k = 6; k < 8; k++) {
    s ^= s << 13, s ^= s >> 7, s ^= s << 17;
    sizes[k] = (size_t)(s % (maxp + 1));
  }
  size_t slot = maxp + 128;
  rwin_t *src, *dst;
  if ((src = rs_add_win(c, x, slot * 8, 0)) && (dst = rs_add_win(c, x, slot * 8, 0)) &&
      ring_puts(c, x, src, dst, sizes, 8, slot, 3, "put") == 0)
    conform_note(c, "8 puts of 0 B .. %zu B at random offsets verified at the target", maxp);
}
static conform_status_t rma_put(conform_ctx_t *c) { return rs_run(c, NULL, put_body); }

static void reg_sym_body(conform_ctx_t *c, rs_t *x) {
  const size_t lens[3] = {4096, ((size_t)1 << 20) + 3, 65536};
  rwin_t *src = rs_add_win(c, x, 4096, 0), *w[3] = {NULL, NULL, NULL};
  for (int i = 0; src && i < 3 && c->status != CONFORM_FAIL; i++) w[i] = rs_add_win(c, x, lens[i], 0);
  if (!src || c->status == CONFORM_FAIL) return;
  void *reqs[3] = {0};
  for (int i = 0; i < 3; i++) conform_fill(src->base + i * 64, 64, conform_seed(c->rank, c->next, 40 + (uint64_t)i));
  for (int i = 0; i < 3 && c->status != CONFORM_FAIL; i++)
    rs_put(c, x, src, (uint64_t)i * 64, 64, w[i], lens[i] - 64, c->next, &reqs[i]);
  if (c->status == CONFORM_FAIL || rs_wait_all(c, x, reqs, 3, RMA_WAIT_S, "iput")) return;
  double until = wait_bound(c, RMA_WAIT_S);
  int i = 0;
  while (i < 3 && conform_now() < until) {
    if (conform_verify(w[i]->base + lens[i] - 64, 64, conform_seed(c->prev, c->rank, 40 + (uint64_t)i)) < 0) i++;
    else if (rs_progress(c, x)) break;
  }
  if (i < 3 && c->status != CONFORM_FAIL)
    conform_fail(c, "the put into the last 64 bytes of rank %d's window #%d (%zu bytes; windows registered "
                 "in the same order on every rank) never arrived there", c->rank, i + 1, lens[i]);
}
/* Three windows of different sizes registered in the same order on every rank: a put into the
 * last bytes of each lands in the peer's matching window. */
static conform_status_t rma_reg_sym(conform_ctx_t *c) { return rs_run(c, NULL, reg_sym_body); }

static void signal_after_data_body(conform_ctx_t *c, rs_t *x) {
  enum { ROUNDS = 8 };
  size_t len = rma_max_put(c, x) / 2;
  if (len < 4096) len = 4096;
  size_t slot = len + 128, sizes[ROUNDS];
  for (int k = 0; k < ROUNDS; k++) sizes[k] = len - (size_t)k * 13;
  rregion_t out[ROUNDS], in[ROUNDS];
  make_regions(out, ROUNDS, sizes, slot, 5, c->rank, c->next);
  make_regions(in, ROUNDS, sizes, slot, 5, c->prev, c->rank);
  rwin_t *src, *dst, *sig;
  if (!(src = rs_add_win(c, x, slot * ROUNDS, 0)) || !(dst = rs_add_win(c, x, slot * ROUNDS, 0)) ||
      !(sig = rs_add_sig(c, x)) || rs_barrier(c, x))
    return;
  void *reqs[ROUNDS] = {0};
  for (int k = 0; k < ROUNDS; k++) conform_fill(src->base + out[k].off, out[k].len, out[k].seed);
  for (int k = 0; k < ROUNDS && c->status != CONFORM_FAIL; k++)
    rs_put_signal(c, x, src, out[k].off, out[k].len, dst, out[k].off, c->next, sig, 0, 1, STRAND_GIN_SIGNAL_OP_ADD,
                  false, &reqs[k]);
  double until = wait_bound(c, RMA_WAIT_S);
  uint64_t seen = 0;
  for (unsigned spins = 0; c->status != CONFORM_FAIL; spins++) {
    uint64_t v = sig_load(sig, 0);
    if (v > ROUNDS) {
      conform_fail(c, "the signal word reached %llu after %d ADD-1 signals", (unsigned long long)v, ROUNDS);
      break;
    }
    for (; seen < v; seen++) {
      long long bad = conform_verify(dst->base + in[seen].off, in[seen].len, in[seen].seed);
      if (bad >= 0) {
        conform_fail(c, "the signal showed %llu while the data of put+signal #%llu (%zu bytes) still differed "
                     "at byte %lld: a signal must never be visible before the data it guards",
                     (unsigned long long)v, (unsigned long long)seen + 1, in[seen].len, bad);
        break;
      }
    }
    int left = 0;
    for (int k = 0; k < ROUNDS; k++) {
      if (rs_test(c, x, &reqs[k], "iputSignal")) break;
      left += reqs[k] != NULL;
    }
    if (c->status == CONFORM_FAIL || (seen == ROUNDS && !left)) break;
    if (rs_progress(c, x)) break;
    if (conform_now() > until) {
      conform_fail(c, "after %.1f s: signal at %llu of %d, %d iputSignal request(s) not complete",
                   RMA_WAIT_S * c->timeout_scale, (unsigned long long)seen, ROUNDS, left);
      break;
    }
    if ((spins & 63) == 63 && conform_peer_failed(c)) {
      conform_fail(c, "%s", c->bs_error);
      break;
    }
  }
  if (c->status != CONFORM_FAIL) conform_note(c, "%d put+signal rounds of %zu bytes: data always before signal", ROUNDS, len);
}
/* Put+signal rounds: the target polls the signal word and checks every guarded region the moment
 * the signal shows it. */
static conform_status_t rma_signal_after_data(conform_ctx_t *c) { return rs_run(c, NULL, signal_after_data_body); }

/* Wait until signal word `word` == want, progressing and testing reqs; -1 after a failure. */
static int wait_signal(conform_ctx_t *c, rs_t *x, rwin_t *sig, int word, uint64_t want, void **reqs, int n,
                       const char *what) {
  double until = wait_bound(c, RMA_WAIT_S);
  for (unsigned spins = 0;; spins++) {
    int left = 0;
    for (int k = 0; k < n; k++) {
      if (rs_test(c, x, &reqs[k], what)) return -1;
      left += reqs[k] != NULL;
    }
    if (sig_load(sig, word) == want && !left) return 0;
    if (rs_progress(c, x)) return -1;
    if (conform_now() > until) {
      conform_fail(c, "%s: after %.1f s signal word %d is %llu, expected %llu (%d request(s) not complete)", what,
                   RMA_WAIT_S * c->timeout_scale, word, (unsigned long long)sig_load(sig, word),
                   (unsigned long long)want, left);
      return -1;
    }
    if ((spins & 63) == 63 && conform_peer_failed(c)) return conform_fail(c, "%s", c->bs_error), -1;
  }
}

static void signal_ops_body(conform_ctx_t *c, rs_t *x) {
  rwin_t *data, *sig;
  if (!(data = rs_add_win(c, x, 4096, 0)) || !(sig = rs_add_sig(c, x)) || rs_barrier(c, x)) return;
  void *reqs[4] = {0};
  const uint64_t big = (1ULL << 40) + 3;
  /* INC ignores its value: +1 each; ADD adds it, in 64 bits. */
  if (rs_put_signal(c, x, data, 0, 0, data, 0, c->next, sig, 1, 7, STRAND_GIN_SIGNAL_OP_INC, true, &reqs[0]) ||
      rs_put_signal(c, x, data, 0, 0, data, 0, c->next, sig, 2, 5, STRAND_GIN_SIGNAL_OP_ADD, true, &reqs[1]) ||
      rs_put_signal(c, x, data, 0, 0, data, 0, c->next, sig, 2, big, STRAND_GIN_SIGNAL_OP_ADD, true, &reqs[2]) ||
      rs_put_signal(c, x, data, 0, 0, data, 0, c->next, sig, 1, 0, STRAND_GIN_SIGNAL_OP_INC, true, &reqs[3]) ||
      wait_signal(c, x, sig, 2, 5 + big, reqs, 4, "ADD 5, ADD 2^40+3") ||
      wait_signal(c, x, sig, 1, 2, reqs, 4, "INC (value 7), INC (value 0)"))
    return;
  for (int w = 0; w < RMA_SIG_WORDS; w++)
    if (w != 1 && w != 2 && sig_load(sig, w) != 0)
      conform_fail(c, "signal word %d, never signalled, reads %llu", w, (unsigned long long)sig_load(sig, w));
  if (c->status != CONFORM_FAIL) conform_note(c, "INC adds 1 whatever its value; ADD adds 64-bit values");
}
static conform_status_t rma_signal_ops(conform_ctx_t *c) { return rs_run(c, NULL, signal_ops_body); }

static void strong_order_body(conform_ctx_t *c, rs_t *x) {
  enum { N = 16 };
  size_t maxp = rma_max_put(c, x) / 8, slot, sizes[N];
  if (maxp < 4096) maxp = 4096;
  slot = maxp + 128;
  for (int k = 0; k < N; k++) sizes[k] = k % 4 == 0 ? maxp : (size_t)(k * 997 + 1) % maxp;
  rregion_t out[N], in[N];
  make_regions(out, N, sizes, slot, 7, c->rank, c->next);
  make_regions(in, N, sizes, slot, 7, c->prev, c->rank);
  rwin_t *src, *dst, *sig;
  if (!(src = rs_add_win(c, x, slot * N, 0)) || !(dst = rs_add_win(c, x, slot * N, 0)) || !(sig = rs_add_sig(c, x)) ||
      rs_barrier(c, x))
    return;
  void *reqs[N + 1] = {0};
  for (int k = 0; k < N; k++) conform_fill(src->base + out[k].off, out[k].len, out[k].seed);
  for (int k = 0; k < N && c->status != CONFORM_FAIL; k++)
    rs_put(c, x, src, out[k].off, out[k].len, dst, out[k].off, c->next, &reqs[k]);
  if (c->status != CONFORM_FAIL)
    rs_put_signal(c, x, src, 0, 0, dst, 0, c->next, sig, 3, 1, STRAND_GIN_SIGNAL_OP_ADD, true, &reqs[N]);
  double until = wait_bound(c, RMA_WAIT_S);
  bool checked = false;
  for (unsigned spins = 0; c->status != CONFORM_FAIL; spins++) {
    if (!checked && sig_load(sig, 3) >= 1) {
      checked = true;
      int which;
      long long bad = win_check(dst, in, N, &which);
      if (bad >= 0)
        conform_fail(c, "the strong signal after %d puts was visible while %s differed at byte %lld: every earlier "
                     "put must be visible first%s", N, which >= 0 ? "a put's region" : "the window", bad,
                     c->rma_version <= 13 ? " (every v13 and older signal is strong)" : "");
    }
    int left = 0;
    for (int k = 0; k <= N; k++) {
      if (rs_test(c, x, &reqs[k], "iput")) break;
      left += reqs[k] != NULL;
    }
    if (c->status == CONFORM_FAIL || (checked && !left)) break;
    if (rs_progress(c, x)) break;
    if (conform_now() > until) {
      conform_fail(c, "after %.1f s: strong signal %s, %d request(s) not complete", RMA_WAIT_S * c->timeout_scale,
                   checked ? "seen" : "never seen", left);
      break;
    }
    if ((spins & 63) == 63 && conform_peer_failed(c)) {
      conform_fail(c, "%s", c->bs_error);
      break;
    }
  }
  if (c->status != CONFORM_FAIL) conform_note(c, "%d puts then a strong signal: all visible with it", N);
}
static conform_status_t rma_strong_order(conform_ctx_t *c) { return rs_run(c, NULL, strong_order_body); }

/* Gets from next's window (filled by next before a barrier); done => the data is here. */
static int ring_gets(conform_ctx_t *c, rs_t *x, rwin_t *remote, rwin_t *local, const size_t *sizes, int n,
                     size_t slot, uint64_t salt) {
  rregion_t mine[RMA_MAX_REGIONS], theirs[RMA_MAX_REGIONS];
  make_regions(mine, n, sizes, slot, salt, c->rank, 0);
  make_regions(theirs, n, sizes, slot, salt, c->next, 0);
  for (int k = 0; k < n; k++) conform_fill(remote->base + mine[k].off, mine[k].len, mine[k].seed);
  if (rs_barrier(c, x)) return -1;
  void *reqs[RMA_MAX_REGIONS] = {0};
  for (int k = 0; k < n; k++) {
    char what[128];
    snprintf(what, sizeof what, "iget(%zu bytes from rank %d +%llu)", theirs[k].len, c->next,
             (unsigned long long)theirs[k].off);
    conform_phase(c, "%s", what);
    strand_result_t r = c->rma->iget(x->rctx, 0, theirs[k].off, remote->mh, theirs[k].len, theirs[k].off, local->mh,
                                     (uint32_t)c->next, &reqs[k]);
    if (req_issued(c, r, reqs[k], what)) return -1;
  }
  if (rs_wait_all(c, x, reqs, n, RMA_WAIT_S, "iget")) return -1;
  int which;
  long long bad = win_check(local, theirs, n, &which);
  if (bad >= 0) {
    conform_fail(c, "after every iget from rank %d completed, %s differs at byte %lld of the local window (stale or "
                 "misplaced data)", c->next, which >= 0 ? "a fetched region" : "a byte outside the fetched regions", bad);
    return -1;
  }
  return 0;
}

static void get_body(conform_ctx_t *c, rs_t *x) {
  size_t maxp = rma_max_put(c, x), slot = maxp + 128;
  size_t sizes[6] = {1, 8, 4093, 65536, maxp / 3, maxp};
  rwin_t *remote, *local;
  if ((remote = rs_add_win(c, x, slot * 6, 0)) && (local = rs_add_win(c, x, slot * 6, 0)) &&
      ring_gets(c, x, remote, local, sizes, 6, slot, 11) == 0)
    conform_note(c, "6 gets of 1 B .. %zu B verified", maxp);
}
static conform_status_t rma_get(conform_ctx_t *c) {
  if (!c->rma->iget) return conform_skip(c, "GIN v%d has no iget (NCCL's proxy only puts)", c->rma_version);
  return rs_run(c, NULL, get_body);
}

static void flush_body(conform_ctx_t *c, rs_t *x) {
  size_t sizes[2] = {4096, 65536}, slot = 65536 + 128;
  rwin_t *remote, *local;
  if (!(remote = rs_add_win(c, x, slot * 2, 0)) || !(local = rs_add_win(c, x, slot * 2, 0)) ||
      ring_gets(c, x, remote, local, sizes, 2, slot, 13))
    return;
  void *req = NULL;
  conform_phase(c, "iflush(local window, rank %d)", c->next);
  strand_result_t r = c->rma->iflush(x->rctx, 0, local->mh, (uint32_t)c->next, &req);
  if (req_issued(c, r, req, "iflush of a registered window after gets") == 0 &&
      rs_wait_all(c, x, &req, 1, RMA_WAIT_S, "iflush") == 0)
    conform_note(c, "iflush after gets completed");
}
static conform_status_t rma_flush(conform_ctx_t *c) {
  if (!c->rma->iflush) return conform_skip(c, "GIN v%d has no iflush", c->rma_version);
  return rs_run(c, NULL, flush_body);
}

static void self_put_body(conform_ctx_t *c, rs_t *x) {
  rwin_t *src, *dst, *sig;
  if (!(src = rs_add_win(c, x, 65536, 0)) || !(dst = rs_add_win(c, x, 65536, 0)) || !(sig = rs_add_sig(c, x))) return;
  uint64_t seed = conform_seed(c->rank, c->rank, 17);
  conform_fill(src->base + 100, 30000, seed);
  void *req = NULL;
  if (rs_put_signal(c, x, src, 100, 30000, dst, 200, c->rank, sig, 4, 1, STRAND_GIN_SIGNAL_OP_ADD, true, &req) ||
      wait_signal(c, x, sig, 4, 1, &req, 1, "put+signal to this rank itself"))
    return;
  long long bad = conform_verify(dst->base + 200, 30000, seed);
  if (bad >= 0) conform_fail(c, "put to this rank itself: byte %lld differs after its signal", bad);
  else conform_note(c, "put+signal with rank == own rank");
}
static conform_status_t rma_self_put(conform_ctx_t *c) { return rs_run(c, NULL, self_put_body); }

static void request_non_null_body(conform_ctx_t *c, rs_t *x) {
  rwin_t *w, *sig;
  if (!(w = rs_add_win(c, x, 8192, 0)) || !(sig = rs_add_sig(c, x)) || rs_barrier(c, x)) return;
  void *reqs[5] = {0};
  int n = 0;
  if (rs_put(c, x, w, 0, 0, w, 4096, c->next, &reqs[n++]) == 0 && rs_put(c, x, w, 0, 8, w, 4096, c->next, &reqs[n++]) == 0 &&
      rs_put_signal(c, x, w, 0, 0, w, 4096, c->next, sig, 5, 1, STRAND_GIN_SIGNAL_OP_INC, true, &reqs[n++]) == 0 &&
      rs_wait_all(c, x, reqs, n, RMA_WAIT_S, "iput/iputSignal") == 0 && c->rma->iget) {
    conform_phase(c, "iget(8 bytes)");
    strand_result_t r = c->rma->iget(x->rctx, 0, 4096, w->mh, 8, 0, w->mh, (uint32_t)c->next, &reqs[0]);
    if (req_issued(c, r, reqs[0], "iget(8 bytes)") == 0) rs_wait_all(c, x, reqs, 1, RMA_WAIT_S, "iget");
  }
  if (c->status != CONFORM_FAIL)
    conform_note(c, "iput 0 B / 8 B, iputSignal 0 B%s: requests non-NULL", c->rma->iget ? ", iget" : "");
}
/* Every data-path call that succeeds hands out a request, including the trivial ones. */
static conform_status_t rma_request_non_null(conform_ctx_t *c) { return rs_run(c, NULL, request_non_null_body); }

static void completion_bound_body(conform_ctx_t *c, rs_t *x) {
  rwin_t *w;
  if (!(w = rs_add_win(c, x, 65536, 0)) || rs_barrier(c, x)) return;
  void *reqs[3] = {0};
  if (rs_put(c, x, w, 0, 1, w, 0, c->next, &reqs[0]) == 0 && rs_put(c, x, w, 0, 4096, w, 4096, c->next, &reqs[1]) == 0 &&
      rs_put(c, x, w, 0, 32768, w, 8192, c->next, &reqs[2]) == 0 &&
      rs_wait_all(c, x, reqs, 3, RMA_COMPLETE_S, "small iput") == 0)
    conform_note(c, "3 small puts completed within %.1f s", RMA_COMPLETE_S * c->timeout_scale);
}
static conform_status_t rma_completion_bound(conform_ctx_t *c) { return rs_run(c, NULL, completion_bound_body); }

static void dereg_misuse_body(conform_ctx_t *c, rs_t *x) {
  size_t len = 8192;
  void *buf = aligned_alloc(4096, len), *mh = NULL;
  conform_phase(c, "regMrSym");
  strand_result_t r = c->rma->regMrSym(x->cc, buf, len, STRAND_PTR_HOST, 0, &mh);
  if (r != STRAND_SUCCESS || !mh) {
    conform_fail(c, "regMrSym returned %s, handle %p", conform_result_str(r), mh);
  } else {
    conform_phase(c, "deregMrSym");
    r = c->rma->deregMrSym(x->cc, mh);
    if (r != STRAND_SUCCESS) conform_fail(c, "deregMrSym of a live registration returned %s", conform_result_str(r));
    conform_phase(c, "deregMrSym of the same handle again");
    r = c->rma->deregMrSym(x->cc, mh);
    if (r == STRAND_SUCCESS)
      conform_fail(c, "a second deregMrSym of the same handle returned ncclSuccess (must be an error: the handle is "
                   "no live registration)");
  }
  static uint64_t garbage[32];
  for (int i = 0; i < 32; i++) garbage[i] = 0x5A5A5A5A5A5A5A5AULL;
  conform_phase(c, "deregMrSym of a pointer that is no handle");
  r = c->rma->deregMrSym(x->cc, garbage);
  if (r == STRAND_SUCCESS) conform_fail(c, "deregMrSym of a pointer that is no registration returned ncclSuccess");
  free(buf);
}
static conform_status_t rma_dereg_misuse(conform_ctx_t *c) { return rs_run(c, NULL, dereg_misuse_body); }

/* The odd ranks die (no cleanup: the kernel closes their sockets like a crash); rank 0's puts to
 * them, test() or queryLastError must report an error within the bound. */
static conform_status_t rma_dead_peer(conform_ctx_t *c) {
  if (c->nranks < 2) return conform_skip(c, "needs 2 ranks");
  rs_t x;
  rwin_t *w = NULL;
  if (rs_init(c, &x) || rs_connect(c, &x, x.ctx) || !(w = rs_add_win(c, &x, 65536, 0)) || rs_barrier(c, &x)) {
    rs_down(c, &x);
    return conform_verdict(c);
  }
  if (c->rank % 2 == 1) {
    conform_note(c, "rank %d played the dead peer", c->rank);
    c->exit_without_cleanup = true;
    return CONFORM_PASS;
  }
  if (c->next % 2 == 0) {
    c->exit_without_cleanup = true; /* odd nranks: not next to a dead rank; its peers are gone too */
    return CONFORM_PASS;
  }
  char dummy;
  (void)conform_recv(c, c->next, &dummy, 1); /* returns once the peer left the check */
  conform_sleep(0.3);
  double until = wait_bound(c, 10.0);
  const char *how = NULL;
  void *req = NULL;
  int puts = 0;
  char detail[200] = "";
  while (!how && conform_now() < until) {
    if (!req) {
      conform_phase(c, "iput to the dead rank %d", c->next);
      strand_result_t r = c->rma->iput(x.rctx, 0, 0, w->mh, 4096, 0, w->mh, (uint32_t)c->next, &req);
      puts++;
      if (r != STRAND_SUCCESS) {
        how = "iput";
        snprintf(detail, sizeof detail, "%s", conform_result_str(r));
        req = NULL;
        break;
      }
    } else {
      int done = 0;
      conform_phase(c, "test(iput to the dead rank)");
      strand_result_t r = c->rma->test(x.cc, req, &done);
      if (r != STRAND_SUCCESS) {
        how = "test";
        snprintf(detail, sizeof detail, "%s", conform_result_str(r));
        break;
      }
      if (done) req = NULL;
    }
    c->rma->rmaProgress(x.rctx);
    bool err = false;
    conform_phase(c, "queryLastError");
    if (c->rma->queryLastError && c->rma->queryLastError(x.rctx, &err) == STRAND_SUCCESS && err) {
      how = "queryLastError";
      snprintf(detail, sizeof detail, "hasError true");
    }
    conform_sleep(0.002);
  }
  if (!how)
    conform_fail(c, "rank %d died; %d puts to it later, neither iput, test nor queryLastError reported an error within "
                 "%.1f s (NCCL polls queryLastError to abort a communicator whose peer is gone)", c->next, puts,
                 10.0 * c->timeout_scale);
  else
    conform_note(c, "the dead peer was reported by %s (%s) after %d put(s)", how, detail, puts);
  /* A teardown towards a dead peer is not what this check measures: leave like the dead one. */
  c->exit_without_cleanup = true;
  free(w->base);
  return conform_verdict(c);
}

static conform_status_t rma_after_finalize(conform_ctx_t *c) {
  rs_t x;
  if (rs_init(c, &x)) {
    rs_fini(c, &x);
    return conform_verdict(c);
  }
  void *ctx = x.ctx;
  conform_phase(c, "%s finalize (the last)", rma_sym(c));
  strand_result_t r = c->rma->finalize(ctx);
  x.inited = false;
  if (r != STRAND_SUCCESS) return conform_fail(c, "finalize returned %s", conform_result_str(r));
  unsigned char h[CONFORM_LISTEN_BUF];
  void *lc = NULL;
  memset(h, 0, sizeof h);
  conform_phase(c, "listen on the finalized context");
  r = c->rma->listen(ctx, 0, h, &lc);
  if (r == STRAND_SUCCESS) {
    conform_fail(c, "listen on a context after its (the last) finalize returned ncclSuccess: calls after the last "
                 "finalize must be refused");
    if (lc) c->rma->closeListen(lc);
  } else {
    conform_note(c, "listen after the last finalize: %s", conform_result_str(r));
  }
  return conform_verdict(c);
}

/* ------------------------------------------------------------ rma.cuda-window (needs a GPU) */

/* A window in GPU memory: `dev` is the device address; `host` a host image of it (staging the
 * pattern in, checking the result out). */
typedef struct {
  strand_cu_devptr_t dev;
  rwin_t host;
  void *mh;
} cwin_t;

static int cwin_up(conform_ctx_t *c, rs_t *x, cwin_t *w, size_t len, uint64_t flags, unsigned char fill) {
  const strand_cuda_t *cu = strand_cuda();
  w->host.len = len;
  w->host.base = malloc(len);
  if (!w->host.base || cu->memAlloc(&w->dev, len) != STRAND_CU_SUCCESS) {
    conform_fail(c, "strand-conform: no %zu bytes of host or GPU memory", len);
    return -1;
  }
  memset(w->host.base, fill, len);
  if (cu->memcpyHtoDAsync(w->dev, w->host.base, len, NULL) != STRAND_CU_SUCCESS ||
      cu->streamSynchronize(NULL) != STRAND_CU_SUCCESS) {
    conform_fail(c, "strand-conform: cuMemcpyHtoD into a new GPU window failed");
    return -1;
  }
  conform_phase(c, "%s regMrSym(%zu bytes of GPU memory, NCCL_PTR_CUDA)", rma_sym(c), len);
  strand_result_t r = c->rma->regMrSym(x->cc, (void *)(uintptr_t)w->dev, len, STRAND_PTR_CUDA, flags, &w->mh);
  if (r != STRAND_SUCCESS || !w->mh) {
    conform_fail(c, "regMrSym of GPU memory (NCCL_PTR_CUDA, which getProperties claims) returned %s%s",
                 conform_result_str(r), r == STRAND_SUCCESS ? " with a NULL handle" : "");
    return -1;
  }
  return 0;
}

static void cwin_down(conform_ctx_t *c, rs_t *x, cwin_t *w) {
  if (w->mh) {
    conform_phase(c, "%s deregMrSym (GPU window)", rma_sym(c));
    strand_result_t r = c->rma->deregMrSym(x->cc, w->mh);
    if (r != STRAND_SUCCESS) conform_fail(c, "deregMrSym of a GPU window returned %s", conform_result_str(r));
  }
  if (w->dev) strand_cuda()->memFree(w->dev);
  free(w->host.base);
  memset(w, 0, sizeof *w);
}

/* The GPU window's bytes into its host image. */
static int cwin_read(conform_ctx_t *c, cwin_t *w, size_t len) {
  const strand_cuda_t *cu = strand_cuda();
  if (cu->memcpyDtoHAsync(w->host.base, w->dev, len, NULL) != STRAND_CU_SUCCESS ||
      cu->streamSynchronize(NULL) != STRAND_CU_SUCCESS) {
    conform_fail(c, "strand-conform: cuMemcpyDtoH out of a GPU window failed");
    return -1;
  }
  return 0;
}

/* What NCCL does with the device API: windows and the signal array in GPU memory. Each rank puts
 * a small and a large region (one staging slot, and several MiB where a proxy may take another
 * path) from its GPU window into next's, then a put+signal on next's GPU signal word; when the
 * signal shows, both regions must be there, and every byte outside them untouched. */
static void cuda_window_body(conform_ctx_t *c, rs_t *x) {
  enum { N = 2 };
  size_t sizes[N] = {1000, rma_max_put(c, x) - 77};
  size_t slot = sizes[1] + 128, len = slot * N;
  rregion_t out[N], in[N];
  make_regions(out, N, sizes, slot, 11, c->rank, c->next);
  make_regions(in, N, sizes, slot, 11, c->prev, c->rank);
  cwin_t src = {0}, dst = {0}, sig = {0};
  void *reqs[N + 1] = {0};
  if (cwin_up(c, x, &src, len, 0, 0) || cwin_up(c, x, &dst, len, 0, CONFORM_GUARD_BYTE) ||
      cwin_up(c, x, &sig, RMA_SIG_WORDS * 8, STRAND_GIN_MR_FLAG_FORCE_SO, 0) || rs_barrier(c, x))
    goto out;
  for (int k = 0; k < N; k++) conform_fill(src.host.base + out[k].off, out[k].len, out[k].seed);
  const strand_cuda_t *cu = strand_cuda();
  if (cu->memcpyHtoDAsync(src.dev, src.host.base, len, NULL) != STRAND_CU_SUCCESS ||
      cu->streamSynchronize(NULL) != STRAND_CU_SUCCESS) {
    conform_fail(c, "strand-conform: cuMemcpyHtoD of the source pattern failed");
    goto out;
  }
  rwin_t s = {.mh = src.mh}, d = {.mh = dst.mh}, g = {.mh = sig.mh};
  for (int k = 0; k < N; k++)
    if (rs_put(c, x, &s, out[k].off, out[k].len, &d, out[k].off, c->next, &reqs[k])) goto out;
  if (rs_put_signal(c, x, &s, 0, 0, &d, 0, c->next, &g, 0, 5, STRAND_GIN_SIGNAL_OP_ADD, true, &reqs[N])) goto out;
  double until = wait_bound(c, RMA_WAIT_S);
  for (unsigned spins = 0;; spins++) {
    if (cwin_read(c, &sig, 8)) goto out;
    if (sig_load(&sig.host, 0) >= 5) break;
    if (rs_progress(c, x)) goto out;
    for (int k = 0; k <= N; k++)
      if (rs_test(c, x, &reqs[k], "iput to a GPU window")) goto out;
    if (conform_now() > until) {
      conform_fail(c, "after %.1f s the put+signal from rank %d never showed in the GPU signal word (reads %llu)",
                   RMA_WAIT_S * c->timeout_scale, c->prev, (unsigned long long)sig_load(&sig.host, 0));
      goto out;
    }
    if ((spins & 63) == 63 && conform_peer_failed(c)) {
      conform_fail(c, "%s", c->bs_error);
      goto out;
    }
  }
  if (cwin_read(c, &dst, len)) goto out;
  int which;
  long long bad = win_check(&dst.host, in, N, &which);
  if (bad >= 0) {
    conform_fail(c, "the signal from rank %d showed in GPU memory while %s differed at byte %lld of the GPU "
                 "window", c->prev, which >= 0 ? "its put's region" : "a byte outside every put", bad);
    goto out;
  }
  if (rs_wait_all(c, x, reqs, N + 1, RMA_WAIT_S, "puts between GPU windows")) goto out;
  conform_note(c, "GPU windows (cuMemAlloc): puts of %zu and %zu B and a put+signal on a GPU signal word, "
               "verified on the GPU", sizes[0], sizes[1]);
out:
  for (int k = 0; k <= N; k++)
    if (reqs[k]) rs_wait_all(c, x, &reqs[k], 1, RMA_WAIT_S, "a put left over"); /* never dereg under one */
  rs_barrier(c, x); /* no rank deregisters while a peer may still put into its windows */
  cwin_down(c, x, &sig);
  cwin_down(c, x, &dst);
  cwin_down(c, x, &src);
}

static conform_status_t rma_cuda_window(conform_ctx_t *c) {
  int dev = -1;
  const char *why = conform_cuda_use_gpu(c, &dev);
  if (why) return conform_skip(c, "%s", why);
  rs_t x;
  if (rs_init(c, &x) == 0) {
    if (!(x.props.ptrSupport & STRAND_PTR_CUDA)) {
      rs_fini(c, &x);
      strand_cuda()->devicePrimaryCtxRelease(dev);
      return conform_skip(c, "the plugin does not claim NCCL_PTR_CUDA (ptrSupport 0x%x): NCCL gives it no GPU "
                          "windows", x.props.ptrSupport);
    }
    if (rs_connect(c, &x, x.ctx) == 0) {
      cuda_window_body(c, &x);
      rs_barrier(c, &x);
    }
  }
  rs_down(c, &x);
  strand_cuda()->devicePrimaryCtxRelease(dev);
  return conform_verdict(c);
}

/* The harness inits the net table first (not CONFORM_F_NO_INIT): NCCL inits its net plugin when a
 * communicator starts, before GIN/RMA (2.30.7 src/init.cc: ncclNetInit, ncclRmaInit, ncclGinInit),
 * and plugins rely on it: aws-ofi-nccl's GIN/RMA init refuses to run without its net initialized. */
#define RF (CONFORM_F_ABI_INDEPENDENT | CONFORM_F_RMA)
const conform_check_t conform_checks_rma[] = {
  {"rma.table-complete", "gin-rma §2, §3",
   "every one-sided table exported: name set, members NCCL calls non-NULL", rma_table_complete, 10,
   CONFORM_F_NO_INIT | CONFORM_F_ABI_INDEPENDENT},
  {"rma.init", "gin-rma §2, §1 (GIN_PROXY)",
   "init succeeds, devices > 0, every device GIN_PROXY with a NUL-terminated name", rma_init, 15, RF},
  {"rma.connect", "gin-rma §3 connect",
   "listen + all-gathered handles + one collective connect of every rank, createContext", rma_connect, 20, RF},
  {"rma.connect-foreign-ctx", "gin-rma §4 contexts passed to connect",
   "connect works when its ctx is not the RMA init's context", rma_connect_foreign_ctx, 20, RF},
  {"rma.reg-sym", "gin-rma §4 symmetric windows",
   "windows registered in the same order on every rank match across ranks", rma_reg_sym, 20, RF},
  {"rma.put", "gin-rma §4 put", "puts of 0 B .. MiB at random offsets land exactly, nothing else written",
   rma_put, 30, RF},
  {"rma.signal-after-data", "gin-rma §4 signal",
   "a polled put+signal's signal never shows before its data", rma_signal_after_data, 30, RF},
  {"rma.signal-ops", "gin-rma §4 signal (INC, ADD)", "INC adds 1 whatever its value; ADD adds 64-bit values",
   rma_signal_ops, 20, RF},
  {"rma.strong-order", "gin-rma §4 signal (strong)", "n puts then a strong signal: all n visible with the signal",
   rma_strong_order, 30, RF},
  {"rma.get", "gin-rma §4 get", "gets of 1 B .. MiB return the peer's data once complete", rma_get, 30, RF},
  {"rma.flush", "gin-rma §4 flush", "iflush of a registered window completes", rma_flush, 20, RF},
  {"rma.self-put", "gin-rma §4 put (own rank)", "put+signal to this rank itself", rma_self_put, 20, RF},
  {"rma.request-non-null", "gin-rma §4 requests",
   "every successful iput/iputSignal/iget hands out a request", rma_request_non_null, 20, RF},
  {"rma.completion-bound", "gin-rma §4 requests", "small puts complete within a bound",
   rma_completion_bound, 15, RF},
  {"rma.dereg-misuse", "gin-rma §5 (stale handles refused)", "double dereg and a garbage handle are errors, no crash",
   rma_dereg_misuse, 15, RF},
  {"rma.dead-peer", "gin-rma §4 progress and errors", "a dead peer shows as an error of iput/test/queryLastError",
   rma_dead_peer, 30, RF},
  {"rma.after-finalize", "gin-rma §2 (init/finalize)", "calls after the last finalize are refused", rma_after_finalize,
   15, RF},
  {"rma.cuda-window", "gin-rma §4 memory", "CUDA device windows (needs a GPU)", rma_cuda_window, 10, RF},
  {0},
};
