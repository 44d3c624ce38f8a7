/* strand-conform — collnet.*: a CollNet table as NCCL's CollNet transport uses it (spec §4, §8):
 * init/devices, properties, reduceSupport for 12 types x 4 ops, the one-shot N-rank connect, and
 * iallreduce / iallgather / ireducescatter results checked against the SDK's CPU reductions, and
 * collectives the ranks call differently (a buggy application) failing on every rank. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "conform.h"
#include "strand/reduce.h"

typedef struct {
  void *ctx;
  int ndev;
  void *lc, *cc;
  bool inited;
} cn_t;

static int cn_init(conform_ctx_t *c, cn_t *x) {
  memset(x, 0, sizeof *x);
  conform_phase(c, "collnet init");
  strand_result_t r = c->collnet->init(&x->ctx, 0x434f4c4cULL, conform_logger_fn());
  if (r != STRAND_SUCCESS) {
    conform_fail(c, "CollNet init returned %s: NCCL disables CollNet", conform_result_str(r));
    return -1;
  }
  x->inited = true;
  conform_phase(c, "collnet devices");
  r = c->collnet->devices(&x->ndev);
  if (r != STRAND_SUCCESS || x->ndev <= 0) {
    conform_fail(c, "CollNet devices() returned %s with %d devices: NCCL disables CollNet",
                 conform_result_str(r), x->ndev);
    return -1;
  }
  return 0;
}

static void cn_fini(conform_ctx_t *c, cn_t *x) {
  if (x->cc) {
    conform_phase(c, "closeColl");
    strand_result_t r = c->collnet->closeColl(x->cc);
    if (r != STRAND_SUCCESS) conform_fail(c, "closeColl returned %s", conform_result_str(r));
  }
  if (x->lc) c->collnet->closeListen(x->lc);
  if (x->inited && c->collnet->finalize) {
    conform_phase(c, "collnet finalize");
    strand_result_t r = c->collnet->finalize(x->ctx);
    if (r != STRAND_SUCCESS) conform_fail(c, "CollNet finalize returned %s", conform_result_str(r));
  }
}

/* Listen, all-gather handles in rank order, one-shot connect, closeListen (§8.2). */
static int cn_connect(conform_ctx_t *c, cn_t *x) {
  unsigned char h[CONFORM_LISTEN_BUF];
  const size_t hs = STRAND_NET_HANDLE_MAXSIZE;
  memset(h, 0, sizeof h);
  conform_phase(c, "collnet listen");
  strand_result_t r = c->collnet->listen(x->ctx, 0, h, &x->lc);
  if (r != STRAND_SUCCESS || !x->lc) {
    conform_fail(c, "CollNet listen returned %s, listenComm %p", conform_result_str(r), x->lc);
    return -1;
  }
  unsigned char *all = malloc((size_t)c->nranks * hs);
  void *ptrs[CONFORM_MAX_RANKS];
  if (conform_allgather(c, h, hs, all)) {
    free(all);
    conform_fail(c, "%s", c->bs_error);
    return -1;
  }
  for (int i = 0; i < c->nranks; i++) ptrs[i] = all + (size_t)i * hs;
  conform_phase(c, "collnet connect(%d ranks)", c->nranks);
  r = c->collnet->connect(ptrs, c->nranks, c->rank, x->lc, &x->cc);
  free(all);
  if (r != STRAND_SUCCESS || !x->cc) {
    conform_fail(c, "CollNet connect of %d ranks returned %s, collComm %p", c->nranks,
                 conform_result_str(r), x->cc);
    return -1;
  }
  conform_phase(c, "collnet closeListen");
  r = c->collnet->closeListen(x->lc);
  x->lc = NULL;
  if (r != STRAND_SUCCESS) {
    conform_fail(c, "closeListen after CollNet connect returned %s", conform_result_str(r));
    return -1;
  }
  return 0;
}

static int cn_wait(conform_ctx_t *c, void *req, const char *what) {
  unsigned spins = 0;
  for (;;) {
    int done = 0, size = -1;
    conform_phase(c, "collnet test(%s)", what);
    strand_result_t r = c->collnet->test(req, &done, &size);
    if (r != STRAND_SUCCESS) {
      conform_fail(c, "CollNet test(%s) returned %s", what, conform_result_str(r));
      return -1;
    }
    if (done) return 0;
    if ((++spins & 127) == 0) {
      if (conform_peer_failed(c)) return conform_fail(c, "%s", c->bs_error), -1;
      if (conform_remaining(c) < 0.5) {
        conform_fail(c, "%s did not complete before the time bound", what);
        return -1;
      }
    }
  }
}

static conform_status_t collnet_init(conform_ctx_t *c) {
  const void *const *raw = c->plugin->raw_collnet;
  int v = c->plugin->collnet_version;
  /* Slots 0..6 are the same in every version; check the unconditional ones by name. */
  static const char *const names[] = {"name", "init", "devices", "getProperties", "listen", "connect",
                                      "reduceSupport"};
  for (int s = 0; s < 7; s++)
    if (!raw[s]) conform_fail(c, "CollNet v%d member %s is NULL", v, names[s]);
  const strand_collnet_v12_t *t = c->collnet;
  if (!t->regMr || !t->deregMr || !t->iallreduce || !t->test || !t->closeColl || !t->closeListen)
    conform_fail(c, "CollNet v%d: one of regMr, deregMr, iallreduce, test, closeColl, closeListen is NULL", v);
  if (v >= 11 && !((const strand_collnet_v11_t *)raw)->finalize)
    conform_fail(c, "CollNet v%d finalize is NULL; NCCL calls it unconditionally", v);
  if (c->status == CONFORM_FAIL) return CONFORM_FAIL;
  cn_t x;
  if (cn_init(c, &x) == 0) conform_note(c, "CollNet v%d, %d device(s)", v, x.ndev);
  cn_fini(c, &x);
  return conform_verdict(c);
}

static conform_status_t collnet_props(conform_ctx_t *c) {
  cn_t x;
  if (cn_init(c, &x)) return CONFORM_FAIL;
  size_t sz = conform_props_size(c->plugin->collnet_version);
  const conform_field_t *f;
  int nf = conform_props_fields(c->plugin->collnet_version, &f);
  unsigned char *buf = malloc(sz + 64);
  for (int dev = 0; dev < x.ndev; dev++) {
    unsigned unwritten = ~0u;
    for (int k = 0; k < 2; k++) {
      unsigned char canary = k ? 0x5A : 0xA5;
      memset(buf, canary, sz + 64);
      conform_phase(c, "collnet getProperties(dev %d)", dev);
      strand_result_t r = conform_raw_get_properties(c->plugin, true, dev, buf, NULL);
      if (r != STRAND_SUCCESS) {
        conform_fail(c, "CollNet getProperties(%d) returned %s", dev, conform_result_str(r));
        goto out;
      }
      unsigned mask = 0;
      for (int i = 0; i < nf; i++) {
        bool same = true;
        for (size_t b = 0; b < f[i].size; b++)
          if (buf[f[i].off + b] != canary) same = false;
        if (same) mask |= 1u << i;
      }
      unwritten &= mask;
    }
    for (int i = 0; i < nf; i++)
      if (unwritten & (1u << i)) conform_fail(c, "CollNet dev %d: field %s left unwritten", dev, f[i].name);
    strand_props_v12_t p;
    memset(&p, 0, sizeof p);
    c->collnet->getProperties(dev, &p);
    if (!p.name || !p.name[0]) conform_fail(c, "CollNet dev %d: name empty", dev);
    if (p.maxCollBytes == 0 || p.maxCollBytes > STRAND_MAX_NET_SIZE_BYTES)
      conform_fail(c, "CollNet dev %d: maxCollBytes %zu outside (0, 2^40]: NCCL's CollNet setup fails",
                   dev, p.maxCollBytes);
  }
out:
  free(buf);
  cn_fini(c, &x);
  return conform_verdict(c);
}

static conform_status_t collnet_reduce_support(conform_ctx_t *c) {
  int n = 0;
  for (int t = 0; t < STRAND_NUM_TYPES; t++)
    for (int op = 0; op < 4; op++) {
      int sup = -7;
      conform_phase(c, "reduceSupport(type %d, op %d)", t, op);
      strand_result_t r = c->collnet->reduceSupport((strand_datatype_t)t, (strand_redop_t)op, &sup);
      if (r != STRAND_SUCCESS)
        conform_fail(c, "reduceSupport(type %d, op %d) returned %s: NCCL queries all 12 types x 4 ops",
                     t, op, conform_result_str(r));
      else if (sup != 0 && sup != 1)
        conform_fail(c, "reduceSupport(type %d, op %d) wrote %d (want 0 or 1)", t, op, sup);
      else
        n += sup;
    }
  if (c->status != CONFORM_FAIL) conform_note(c, "%d of 48 (type, op) pairs supported", n);
  return conform_verdict(c);
}

static conform_status_t collnet_connect(conform_ctx_t *c) {
  cn_t x;
  if (cn_init(c, &x) == 0 && cn_connect(c, &x) == 0) conform_barrier(c);
  cn_fini(c, &x);
  return conform_verdict(c);
}

static conform_status_t collnet_reg_duplicate(conform_ctx_t *c) {
  cn_t x;
  if (cn_init(c, &x) == 0 && cn_connect(c, &x) == 0) {
    size_t len = 1 << 20;
    void *buf = malloc(len), *mh[2] = {NULL, NULL};
    for (int k = 0; k < 2; k++) {
      conform_phase(c, "collnet regMr #%d of one range", k + 1);
      strand_result_t r = c->collnet->regMr(x.cc, buf, len, STRAND_PTR_HOST, &mh[k]);
      if (r != STRAND_SUCCESS)
        conform_fail(c, "CollNet regMr #%d of the same range returned %s (NCCL registers one shared "
                     "buffer from both connectors)", k + 1, conform_result_str(r));
    }
    for (int k = 0; k < 2; k++)
      if (mh[k] && c->collnet->deregMr(x.cc, mh[k]) != STRAND_SUCCESS)
        conform_fail(c, "CollNet deregMr #%d failed", k + 1);
    free(buf);
    conform_barrier(c);
  }
  cn_fini(c, &x);
  return conform_verdict(c);
}

/* Values every type represents exactly, chosen so that one reduction of two of them is exact
 * too; with more ranks fp8 results may depend on the plugin's reduction order. */
static void gen_values(strand_datatype_t t, int rank, void *buf, size_t count, uint64_t salt) {
  for (size_t i = 0; i < count; i++) {
    uint64_t h = conform_seed(rank, 0, salt + i);
    double v = (double)((int)(h % 7) - 3);        /* -3..3 */
    if ((h >> 8) % 3 == 0) v *= 0.5;
    switch (t) {
    case STRAND_INT8: ((int8_t *)buf)[i] = (int8_t)(h >> 16); break;
    case STRAND_UINT8: ((uint8_t *)buf)[i] = (uint8_t)(h >> 16); break;
    case STRAND_INT32: ((int32_t *)buf)[i] = (int32_t)(h >> 16); break;
    case STRAND_UINT32: ((uint32_t *)buf)[i] = (uint32_t)(h >> 16); break;
    case STRAND_INT64: ((int64_t *)buf)[i] = (int64_t)h; break;
    case STRAND_UINT64: ((uint64_t *)buf)[i] = h; break;
    case STRAND_FLOAT16: ((uint16_t *)buf)[i] = strand_double_to_half(v); break;
    case STRAND_FLOAT32: ((float *)buf)[i] = (float)v; break;
    case STRAND_FLOAT64: ((double *)buf)[i] = v; break;
    case STRAND_BFLOAT16: ((uint16_t *)buf)[i] = strand_double_to_bf16(v); break;
    case STRAND_FLOAT8_E4M3: ((uint8_t *)buf)[i] = strand_double_to_e4m3(v); break;
    default: ((uint8_t *)buf)[i] = strand_float_to_e5m2((float)v); break;
    }
  }
}

/* Each rank's contribution for (type, op, salt), regenerated locally for the expected result. */
static void expected_reduce(strand_datatype_t t, strand_redop_t op, int nranks, void *out, void *tmp,
                            size_t count, uint64_t salt) {
  gen_values(t, 0, out, count, salt);
  for (int r = 1; r < nranks; r++) {
    gen_values(t, r, tmp, count, salt);
    strand_reduce(t, op, out, tmp, count);
  }
}

static conform_status_t collnet_iallreduce(conform_ctx_t *c) {
  cn_t x;
  size_t count = c->quick ? 1000 : 100003;
  size_t bytes = count * 8;
  unsigned char *send = malloc(bytes), *recv = malloc(bytes), *exp = malloc(bytes), *tmp = malloc(bytes);
  void *smh = NULL, *rmh = NULL;
  int tested = 0;
  if (cn_init(c, &x) || cn_connect(c, &x)) goto out;
  if (c->collnet->regMr(x.cc, send, bytes, STRAND_PTR_HOST, &smh) != STRAND_SUCCESS ||
      c->collnet->regMr(x.cc, recv, bytes, STRAND_PTR_HOST, &rmh) != STRAND_SUCCESS) {
    conform_fail(c, "CollNet regMr of host buffers failed");
    goto out;
  }
  for (int t = 0; t < STRAND_NUM_TYPES && c->status != CONFORM_FAIL; t++)
    for (int op = 0; op < 4 && c->status != CONFORM_FAIL; op++) {
      int sup = 0;
      c->collnet->reduceSupport((strand_datatype_t)t, (strand_redop_t)op, &sup);
      /* every rank must take part in every call: agree on the pairs */
      int all[CONFORM_MAX_RANKS], agree = 1;
      if (conform_allgather(c, &sup, sizeof sup, all)) {
        conform_fail(c, "%s", c->bs_error);
        goto out;
      }
      for (int r = 0; r < c->nranks; r++) agree &= all[r] == 1;
      if (!agree) continue;
      uint64_t salt = (uint64_t)(t * 16 + op) << 24;
      size_t esz = strand_datatype_size((strand_datatype_t)t);
      gen_values((strand_datatype_t)t, c->rank, send, count, salt);
      memset(recv, 0xCD, count * esz);
      void *req = NULL;
      strand_result_t r;
      do {
        conform_phase(c, "iallreduce(%s, %s)", strand_datatype_name((strand_datatype_t)t),
                      strand_redop_name((strand_redop_t)op));
        r = c->collnet->iallreduce(x.cc, send, recv, count, (strand_datatype_t)t, (strand_redop_t)op,
                                   smh, rmh, &req);
      } while (r == STRAND_SUCCESS && !req && conform_remaining(c) > 1);
      if (r != STRAND_SUCCESS || !req) {
        conform_fail(c, "iallreduce(%s, %s) returned %s", strand_datatype_name((strand_datatype_t)t),
                     strand_redop_name((strand_redop_t)op), conform_result_str(r));
        goto out;
      }
      if (cn_wait(c, req, "iallreduce")) goto out;
      expected_reduce((strand_datatype_t)t, (strand_redop_t)op, c->nranks, exp, tmp, count, salt);
      if (memcmp(exp, recv, count * esz) != 0) {
        size_t i = 0;
        while (i < count * esz && ((unsigned char *)exp)[i] == recv[i]) i++;
        conform_fail(c, "iallreduce(%s, %s) of %zu elements: element %zu differs from the CPU reduction",
                     strand_datatype_name((strand_datatype_t)t), strand_redop_name((strand_redop_t)op),
                     count, i / esz);
      }
      tested++;
    }
  if (c->status != CONFORM_FAIL) conform_note(c, "%d supported (type, op) pairs checked", tested);
out:
  if (smh) c->collnet->deregMr(x.cc, smh);
  if (rmh) c->collnet->deregMr(x.cc, rmh);
  if (c->status != CONFORM_FAIL) conform_barrier(c);
  cn_fini(c, &x);
  free(send);
  free(recv);
  free(exp);
  free(tmp);
  return conform_verdict(c);
}

/* Window semantics (§8.3): the logical result is nranks x bytesPerRank; two calls cover its two
 * halves through one SGE each. */
static conform_status_t collnet_iallgather(conform_ctx_t *c) {
  if (!c->collnet->iallgather) return conform_skip(c, "iallgather is NULL (CollNet AllGather disabled)");
  cn_t x;
  size_t bpr = c->quick ? 4096 : 262144, total = bpr * (size_t)c->nranks;
  unsigned char *send = malloc(bpr), *recv = malloc(total);
  void *smh = NULL, *rmh = NULL;
  if (cn_init(c, &x) || cn_connect(c, &x)) goto out;
  if (c->collnet->regMr(x.cc, send, bpr, STRAND_PTR_HOST, &smh) != STRAND_SUCCESS ||
      c->collnet->regMr(x.cc, recv, total, STRAND_PTR_HOST, &rmh) != STRAND_SUCCESS) {
    conform_fail(c, "CollNet regMr of host buffers failed");
    goto out;
  }
  conform_fill(send, bpr, conform_seed(c->rank, -1, 777));
  memset(recv, 0xCD, total);
  size_t half = total / 2;
  for (int w = 0; w < 2; w++) {
    size_t off = w ? half : 0, len = w ? total - half : half;
    strand_sge_v12_t sge = {rmh, recv + off, len};
    /* sendData advances when the window starts inside this rank's block (§8.3) */
    size_t myoff = bpr * (size_t)c->rank;
    unsigned char *sd = send + (off > myoff && off < myoff + bpr ? off - myoff : 0);
    void *req = NULL;
    strand_result_t r;
    do {
      conform_phase(c, "iallgather(window %zu+%zu)", off, len);
      r = c->collnet->iallgather(x.cc, sd, 1, &sge, bpr, off, len, smh, &req);
    } while (r == STRAND_SUCCESS && !req && conform_remaining(c) > 1);
    if (r != STRAND_SUCCESS || !req) {
      conform_fail(c, "iallgather(window %zu+%zu) returned %s", off, len, conform_result_str(r));
      goto out;
    }
    if (cn_wait(c, req, "iallgather")) goto out;
  }
  for (int r = 0; r < c->nranks; r++) {
    long long bad = conform_verify(recv + (size_t)r * bpr, bpr, conform_seed(r, -1, 777));
    if (bad >= 0) {
      conform_fail(c, "iallgather: rank %d's block differs at byte %lld", r, bad);
      break;
    }
  }
out:
  if (smh) c->collnet->deregMr(x.cc, smh);
  if (rmh) c->collnet->deregMr(x.cc, rmh);
  if (c->status != CONFORM_FAIL) conform_barrier(c);
  cn_fini(c, &x);
  free(send);
  free(recv);
  return conform_verdict(c);
}

static conform_status_t collnet_ireducescatter(conform_ctx_t *c) {
  if (!c->collnet->ireducescatter) return conform_skip(c, "ireducescatter is NULL (CollNet ReduceScatter disabled)");
  strand_datatype_t t = STRAND_FLOAT32;
  strand_redop_t op = STRAND_SUM;
  int sup = 0;
  c->collnet->reduceSupport(t, op, &sup);
  if (!sup) {
    t = STRAND_INT32;
    c->collnet->reduceSupport(t, op, &sup);
  }
  if (!sup) return conform_skip(c, "neither float32 nor int32 sum is supported");
  cn_t x;
  size_t cpr = c->quick ? 1024 : 65536, bpr = cpr * 4, total = bpr * (size_t)c->nranks;
  unsigned char *send = malloc(total), *recv = malloc(bpr), *exp = malloc(total), *tmp = malloc(total);
  void *smh = NULL, *rmh = NULL;
  if (cn_init(c, &x) || cn_connect(c, &x)) goto out;
  if (c->collnet->regMr(x.cc, send, total, STRAND_PTR_HOST, &smh) != STRAND_SUCCESS ||
      c->collnet->regMr(x.cc, recv, bpr, STRAND_PTR_HOST, &rmh) != STRAND_SUCCESS) {
    conform_fail(c, "CollNet regMr of host buffers failed");
    goto out;
  }
  gen_values(t, c->rank, send, cpr * (size_t)c->nranks, 888);
  memset(recv, 0xCD, bpr);
  /* The window is a range of the logical nranks x bytesPerRank input, the same on every rank;
   * two calls cover its halves. recvData is this rank's block, advanced when the window starts
   * inside it (§8.3). */
  size_t myoff = bpr * (size_t)c->rank, half = total / 2;
  for (int w = 0; w < 2; w++) {
    size_t off = w ? half : 0, len = w ? total - half : half;
    strand_sge_v12_t sge = {smh, send + off, len};
    unsigned char *rd = recv + (off > myoff && off < myoff + bpr ? off - myoff : 0);
    void *req = NULL;
    strand_result_t r;
    do {
      conform_phase(c, "ireducescatter(window %zu+%zu)", off, len);
      r = c->collnet->ireducescatter(x.cc, 1, &sge, rd, bpr, off, len, t, op, rmh, &req);
    } while (r == STRAND_SUCCESS && !req && conform_remaining(c) > 1);
    if (r != STRAND_SUCCESS || !req) {
      conform_fail(c, "ireducescatter(window %zu+%zu) returned %s", off, len, conform_result_str(r));
      goto out;
    }
    if (cn_wait(c, req, "ireducescatter")) goto out;
  }
  expected_reduce(t, op, c->nranks, exp, tmp, cpr * (size_t)c->nranks, 888);
  if (memcmp(exp + myoff, recv, bpr) != 0)
    conform_fail(c, "ireducescatter: this rank's block differs from the CPU reduction of every rank's block");
out:
  if (smh) c->collnet->deregMr(x.cc, smh);
  if (rmh) c->collnet->deregMr(x.cc, rmh);
  if (c->status != CONFORM_FAIL) conform_barrier(c);
  cn_fini(c, &x);
  free(send);
  free(recv);
  free(exp);
  free(tmp);
  return conform_verdict(c);
}

/* Mismatched collectives: the last rank calls iallreduce with another count, datatype or op than
 * the others (as a buggy application does). NCCL hangs there, or one rank "completes" with wrong
 * data; a CollNet must fail the call on EVERY rank within a bound (test() or the call itself
 * returns an error), report none of them done, and let a later collective on that comm finish
 * (an error is expected) instead of hanging. Each case runs on a fresh collComm; outcomes are
 * exchanged over the bootstrap, so the message names the rank that hung or reported done. */
typedef struct {
  const char *name;
  size_t count[2]; /* [0]: ranks 0..n-2, [1]: the last rank */
  strand_datatype_t type[2];
  strand_redop_t op[2];
} cn_mismatch_t;

enum { MM_ERROR, MM_DONE, MM_HANG };

/* Posts (retrying a NULL request) and tests until an error, done, or `bound` seconds. */
static int cn_outcome(conform_ctx_t *c, cn_t *x, const char *what, void *send, void *recv, size_t count,
                      strand_datatype_t t, strand_redop_t op, void *smh, void *rmh, double bound,
                      strand_result_t *rc_out) {
  double until = conform_now() + bound;
  void *req = NULL;
  strand_result_t r;
  do {
    conform_phase(c, "%s: iallreduce(%zu, %s, %s)", what, count, strand_datatype_name(t), strand_redop_name(op));
    r = c->collnet->iallreduce(x->cc, send, recv, count, t, op, smh, rmh, &req);
  } while (r == STRAND_SUCCESS && !req && conform_now() < until);
  *rc_out = r;
  if (r != STRAND_SUCCESS) return MM_ERROR;
  if (!req) return MM_HANG;
  for (unsigned spins = 0;; spins++) {
    int done = 0, size = -1;
    conform_phase(c, "%s: test", what);
    r = c->collnet->test(req, &done, &size);
    *rc_out = r;
    if (r != STRAND_SUCCESS) return MM_ERROR;
    if (done) return MM_DONE;
    if ((spins & 127) == 0 && conform_now() > until) return MM_HANG;
  }
}

static conform_status_t collnet_mismatch(conform_ctx_t *c) {
  if (c->nranks < 2) return conform_skip(c, "needs 2 ranks or more");
  static const cn_mismatch_t cases[] = {
      {"count", {1u << 20, 1u << 19}, {STRAND_FLOAT32, STRAND_FLOAT32}, {STRAND_SUM, STRAND_SUM}},
      {"datatype", {1u << 20, 1u << 20}, {STRAND_FLOAT32, STRAND_FLOAT64}, {STRAND_SUM, STRAND_SUM}},
      {"op", {1u << 16, 1u << 16}, {STRAND_FLOAT32, STRAND_FLOAT32}, {STRAND_SUM, STRAND_MAX}},
  };
  /* Detecting takes one exchange once every rank called; 10 s (x --timeout-scale) is far above. */
  double bound = 10.0 * c->timeout_scale;
  size_t bytes = (size_t)8 << 20;
  unsigned char *send = calloc(1, bytes), *recv = calloc(1, bytes);
  cn_t x;
  int ran = 0;
  if (cn_init(c, &x)) goto out;
  for (size_t k = 0; k < sizeof cases / sizeof cases[0] && c->status != CONFORM_FAIL; k++) {
    const cn_mismatch_t *mc = &cases[k];
    int side = c->rank == c->nranks - 1;
    int sup[2] = {0, 0}, all[CONFORM_MAX_RANKS][2], agree = 1;
    for (int s = 0; s < 2; s++) c->collnet->reduceSupport(mc->type[s], mc->op[s], &sup[s]);
    if (conform_allgather(c, sup, sizeof sup, all)) {
      conform_fail(c, "%s", c->bs_error);
      break;
    }
    for (int r = 0; r < c->nranks; r++) agree &= all[r][0] == 1 && all[r][1] == 1;
    if (!agree) continue;
    char sides[2][96];
    for (int s = 0; s < 2; s++)
      snprintf(sides[s], sizeof sides[s], "iallreduce(count %zu, %s, %s)", mc->count[s],
               strand_datatype_name(mc->type[s]), strand_redop_name(mc->op[s]));
    if (cn_connect(c, &x)) break;
    void *smh = NULL, *rmh = NULL;
    if (c->collnet->regMr(x.cc, send, bytes, STRAND_PTR_HOST, &smh) != STRAND_SUCCESS ||
        c->collnet->regMr(x.cc, recv, bytes, STRAND_PTR_HOST, &rmh) != STRAND_SUCCESS) {
      conform_fail(c, "CollNet regMr of host buffers failed");
      break;
    }
    strand_result_t rc, later_rc = STRAND_SUCCESS;
    int mine[2];
    mine[0] = cn_outcome(c, &x, "the mismatched call", send, recv, mc->count[side], mc->type[side],
                         mc->op[side], smh, rmh, bound, &rc);
    /* The comm after the error: a matching collective must finish (an error is expected). */
    mine[1] = mine[0] == MM_ERROR ? cn_outcome(c, &x, "a later call", send, recv, 1024, STRAND_FLOAT32,
                                               STRAND_SUM, smh, rmh, bound, &later_rc)
                                  : MM_ERROR;
    if (conform_allgather(c, mine, sizeof mine, all)) {
      conform_fail(c, "%s", c->bs_error);
      break;
    }
    char msg[1024];
    size_t used = 0;
    for (int r = 0; r < c->nranks; r++) {
      const char *did = all[r][0] == MM_DONE   ? "reported done (with data its peers did not send)"
                        : all[r][0] == MM_HANG ? "never completed (a hang)"
                        : all[r][1] == MM_HANG ? "failed it, but a later iallreduce on that collComm never completed"
                                               : NULL;
      if (did && used < sizeof msg)
        used += (size_t)snprintf(msg + used, sizeof msg - used, "%srank %d %s", used ? "; " : "", r, did);
    }
    if (used)
      conform_fail(c, "ranks disagreeing on the %s (ranks 0..%d: %s, rank %d: %s): %s within %.0f s; every "
                   "rank must get an error from iallreduce or test", mc->name, c->nranks - 2, sides[0],
                   c->nranks - 1, sides[1], msg, bound);
    else
      ran++;
    if (rc == STRAND_SUCCESS) rc = later_rc;
    c->collnet->deregMr(x.cc, smh);
    c->collnet->deregMr(x.cc, rmh);
    conform_phase(c, "closeColl after a mismatch");
    strand_result_t r = c->collnet->closeColl(x.cc);
    x.cc = NULL;
    if (r != STRAND_SUCCESS) conform_fail(c, "closeColl after a mismatched collective returned %s", conform_result_str(r));
    if (!used && k == 0) conform_note(c, "the count mismatch failed with %s on this rank", conform_result_str(rc));
  }
  if (c->status != CONFORM_FAIL) conform_note(c, "%d mismatch case(s) failed on every rank", ran);
out:
  cn_fini(c, &x);
  free(send);
  free(recv);
  return conform_verdict(c);
}

const conform_check_t conform_checks_collnet[] = {
  {"collnet.init", "§1.3 step 5, §4", "CollNet init succeeds, devices >= 1, mandatory members set",
   collnet_init, 30, CONFORM_F_COLLNET},
  {"collnet.props", "§8.2, §2.6", "CollNet properties written, name set, maxCollBytes in (0, 2^40]",
   collnet_props, 30, CONFORM_F_COLLNET},
  {"collnet.reduce-support", "§8.4", "reduceSupport answers 0/1 for 12 types x 4 ops",
   collnet_reduce_support, 30, CONFORM_F_COLLNET},
  {"collnet.connect", "§8.2", "one-shot connect of all ranks with handles in rank order",
   collnet_connect, 30, CONFORM_F_COLLNET},
  {"collnet.reg-duplicate", "§8.2", "one range registered twice on a collComm", collnet_reg_duplicate,
   30, CONFORM_F_COLLNET},
  {"collnet.iallreduce", "§8.3", "supported (type, op) results equal the SDK CPU reduction",
   collnet_iallreduce, 90, CONFORM_F_COLLNET},
  {"collnet.iallgather", "§8.3", "iallgather windows deliver every rank's block", collnet_iallgather,
   30, CONFORM_F_COLLNET},
  {"collnet.ireducescatter", "§8.3", "ireducescatter window equals the CPU reduction",
   collnet_ireducescatter, 30, CONFORM_F_COLLNET},
  {"collnet.mismatch-fails-every-rank", "§8.3", "ranks that call iallreduce with different count, "
   "datatype or op all get an error within a bound; none hangs or reports done", collnet_mismatch, 90,
   CONFORM_F_COLLNET},
  {0},
};
