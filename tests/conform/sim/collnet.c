/* strand-conform sim — CollNet traffic shaped like NCCL's CollNet proxy (spec §8.2, §8.3).
 *
 * What the one-call-at-a-time collnet.* checks cannot show: NCCL's CollNet proxy stages data
 * through ONE shared buffer registered twice on the collComm (by the send and the recv connector),
 * keeps up to NCCL_STEPS collectives in flight, retries a NULL request, tests the oldest, and cuts
 * all-gather / reduce-scatter into windows that straddle the ranks' blocks. Each scenario here
 * does exactly that, on every rank at once, and compares the final buffers bit for bit with the
 * SDK's CPU reduction of every rank's data (generated locally, rank order 0..n-1).
 *
 * Model: shared buffer = send half + recv half, SIM_CN_STEPS slots of SIM_CN_CHUNK bytes each;
 * unit u (a byte range of the all-reduce, or a window) uses slot u mod SIM_CN_STEPS. Staging in
 * = the GPU writing the send slot; staging out = the GPU reading the recv slot after test says
 * done. SIM_CN_CHUNK is not a divisor of the blocks, so windows cross block boundaries. */
#include <stdlib.h>
#include <string.h>

#include "sim.h"

#define SIM_CN_STEPS 8
#define SIM_CN_CHUNK ((size_t)100 * 1024)

static unsigned char *sim_cn_send_slot(sim_cn_t *s, size_t u) { return s->shared + (u % SIM_CN_STEPS) * SIM_CN_CHUNK; }
static unsigned char *sim_cn_recv_slot(sim_cn_t *s, size_t u) {
  return s->shared + (SIM_CN_STEPS + u % SIM_CN_STEPS) * SIM_CN_CHUNK;
}

void sim_cn_close(conform_ctx_t *c, sim_cn_t *s) {
  const strand_collnet_v12_t *t = c->collnet;
  if (s->cc) {
    if (s->mh_send) t->deregMr(s->cc, s->mh_send);
    if (s->mh_recv) t->deregMr(s->cc, s->mh_recv);
    conform_phase(c, "collnet closeColl");
    strand_result_t r = t->closeColl(s->cc);
    if (r != STRAND_SUCCESS) conform_fail(c, "closeColl returned %s", conform_result_str(r));
  }
  if (s->lc) t->closeListen(s->lc);
  if (s->inited && t->finalize) t->finalize(s->ctx);
  free(s->shared);
}

/* init, listen, handles in rank order, connect, closeListen, the shared buffer registered twice. */
int sim_cn_open(conform_ctx_t *c, sim_cn_t *s, size_t bytes) {
  const strand_collnet_v12_t *t = c->collnet;
  memset(s, 0, sizeof *s);
  conform_phase(c, "collnet init");
  strand_result_t r = t->init(&s->ctx, 0x53494d43ULL, conform_logger_fn());
  if (r != STRAND_SUCCESS) return conform_fail(c, "CollNet init returned %s", conform_result_str(r)), -1;
  s->inited = true;
  int ndev = 0;
  if (t->devices(&ndev) != STRAND_SUCCESS || ndev < 1) return conform_fail(c, "CollNet has no device"), -1;
  unsigned char h[STRAND_NET_HANDLE_MAXSIZE] = {0};
  conform_phase(c, "collnet listen");
  r = t->listen(s->ctx, 0, h, &s->lc);
  if (r != STRAND_SUCCESS || !s->lc) return conform_fail(c, "CollNet listen returned %s", conform_result_str(r)), -1;
  unsigned char *all = malloc((size_t)c->nranks * sizeof h);
  void *ptrs[CONFORM_MAX_RANKS];
  if (!all || conform_allgather(c, h, sizeof h, all)) {
    free(all);
    return conform_fail(c, "%s", c->bs_error), -1;
  }
  for (int i = 0; i < c->nranks; i++) ptrs[i] = all + (size_t)i * sizeof h;
  conform_phase(c, "collnet connect(%d ranks)", c->nranks);
  r = t->connect(ptrs, c->nranks, c->rank, s->lc, &s->cc);
  free(all);
  if (r != STRAND_SUCCESS || !s->cc)
    return conform_fail(c, "CollNet connect of %d ranks returned %s", c->nranks, conform_result_str(r)), -1;
  t->closeListen(s->lc);
  s->lc = NULL;
  s->shared = malloc(bytes);
  if (!s->shared) return conform_fail(c, "out of memory for a %zu-byte shared buffer", bytes), -1;
  memset(s->shared, 0, bytes); /* pages faulted in before anything is timed */
  conform_phase(c, "collnet regMr of the shared buffer (send and recv connector)");
  if (t->regMr(s->cc, s->shared, bytes, STRAND_PTR_HOST, &s->mh_send) != STRAND_SUCCESS ||
      t->regMr(s->cc, s->shared, bytes, STRAND_PTR_HOST, &s->mh_recv) != STRAND_SUCCESS)
    return conform_fail(c, "CollNet regMr of the shared staging buffer (twice, as NCCL's two connectors "
                        "do) failed"), -1;
  return 0;
}

void sim_cn_gen(strand_datatype_t t, int rank, void *buf, size_t count, uint64_t salt) {
  for (size_t i = 0; i < count; i++) {
    uint64_t h = sim_hash3((uint64_t)rank, salt, i);
    double v = (double)((int)(h % 7) - 3);
    if (t == STRAND_INT32)
      ((int32_t *)buf)[i] = (int32_t)(h >> 17);
    else
      strand_datatype_store(t, buf, i, v);
  }
}

void sim_cn_expected(strand_datatype_t t, int nranks, void *out, void *tmp, size_t count, uint64_t salt) {
  sim_cn_gen(t, 0, out, count, salt);
  for (int r = 1; r < nranks; r++) {
    sim_cn_gen(t, r, tmp, count, salt);
    strand_reduce(t, STRAND_SUM, out, tmp, count);
  }
}

/* Rank j's block inside the window [wo, wo+wb) of nranks x bpr bytes: (offset in window, length). */
static void sim_cn_part(size_t bpr, size_t wo, size_t wb, int j, size_t *off, size_t *len) {
  size_t b0 = (size_t)j * bpr, b1 = b0 + bpr, w1 = wo + wb;
  size_t lo = b0 > wo ? b0 : wo, hi = b1 < w1 ? b1 : w1;
  *off = lo > wo ? lo - wo : 0;
  *len = hi > lo ? hi - lo : 0;
}

typedef enum { SIM_CN_AR, SIM_CN_AG, SIM_CN_RS } sim_cn_kind_t;

typedef struct {
  sim_cn_kind_t kind;
  strand_datatype_t t;
  size_t esz, bpr, total; /* AG/RS: bytes per rank and the logical nranks x bpr; AR: total bytes */
  unsigned char *in, *out;
} sim_cn_job_t;

static size_t sim_cn_units(const sim_cn_job_t *j) { return div_up(j->total, SIM_CN_CHUNK); }

/* Stages unit u into its send slot and issues the call; *req stays NULL when the plugin is full. */
static strand_result_t sim_cn_issue(conform_ctx_t *c, sim_cn_t *s, const sim_cn_job_t *j, size_t u, void **req) {
  const strand_collnet_v12_t *t = c->collnet;
  size_t wo = u * SIM_CN_CHUNK, wb = j->total - wo < SIM_CN_CHUNK ? j->total - wo : SIM_CN_CHUNK;
  unsigned char *ss = sim_cn_send_slot(s, u), *rs = sim_cn_recv_slot(s, u);
  *req = NULL;
  if (j->kind == SIM_CN_AR) {
    memcpy(ss, j->in + wo, wb);
    return t->iallreduce(s->cc, ss, rs, wb / j->esz, j->t, STRAND_SUM, s->mh_send, s->mh_recv, req);
  }
  if (j->kind == SIM_CN_AG) {
    size_t off, len, myoff = j->bpr * (size_t)c->rank;
    sim_cn_part(j->bpr, wo, wb, c->rank, &off, &len);
    if (len) memcpy(ss, j->in + (wo + off - myoff), len); /* this rank's bytes of the window */
    strand_sge_v12_t sge = {s->mh_recv, rs, wb};
    return t->iallgather(s->cc, ss, 1, &sge, j->bpr, wo, wb, s->mh_send, req);
  }
  memcpy(ss, j->in + wo, wb);
  strand_sge_v12_t sge = {s->mh_send, ss, wb};
  return t->ireducescatter(s->cc, 1, &sge, rs, j->bpr, wo, wb, j->t, STRAND_SUM, s->mh_recv, req);
}

/* Unit u completed: copy its result out of the recv slot. */
static void sim_cn_deliver(conform_ctx_t *c, sim_cn_t *s, const sim_cn_job_t *j, size_t u) {
  size_t wo = u * SIM_CN_CHUNK, wb = j->total - wo < SIM_CN_CHUNK ? j->total - wo : SIM_CN_CHUNK;
  unsigned char *rs = sim_cn_recv_slot(s, u);
  if (j->kind != SIM_CN_RS) {
    memcpy(j->out + wo, rs, wb);
    return;
  }
  size_t off, len, myoff = j->bpr * (size_t)c->rank;
  sim_cn_part(j->bpr, wo, wb, c->rank, &off, &len);
  if (len) memcpy(j->out + (wo + off - myoff), rs, len);
}

static const char *sim_cn_name(sim_cn_kind_t k) {
  return k == SIM_CN_AR ? "iallreduce" : k == SIM_CN_AG ? "iallgather" : "ireducescatter";
}

/* Up to SIM_CN_STEPS units in flight, the oldest tested, NULL requests retried. */
static int sim_cn_pipeline(conform_ctx_t *c, sim_cn_t *s, const sim_cn_job_t *j) {
  size_t n = sim_cn_units(j), next = 0, done = 0;
  void *reqs[SIM_CN_STEPS] = {0};
  unsigned spins = 0;
  while (done < n) {
    while (next < n && next - done < SIM_CN_STEPS) {
      conform_phase(c, "%s unit %zu of %zu", sim_cn_name(j->kind), next, n);
      strand_result_t r = sim_cn_issue(c, s, j, next, &reqs[next % SIM_CN_STEPS]);
      if (r != STRAND_SUCCESS)
        return conform_fail(c, "%s unit %zu returned %s", sim_cn_name(j->kind), next, conform_result_str(r)), -1;
      if (!reqs[next % SIM_CN_STEPS]) break; /* full: retried on a later pass */
      next++;
    }
    if (done < next) {
      int d = 0, size = -1;
      conform_phase(c, "%s test(unit %zu)", sim_cn_name(j->kind), done);
      strand_result_t r = c->collnet->test(reqs[done % SIM_CN_STEPS], &d, &size);
      if (r != STRAND_SUCCESS)
        return conform_fail(c, "%s test(unit %zu) returned %s", sim_cn_name(j->kind), done, conform_result_str(r)), -1;
      if (d) {
        reqs[done % SIM_CN_STEPS] = NULL;
        sim_cn_deliver(c, s, j, done);
        done++;
        continue;
      }
    }
    if ((++spins & 255) == 0) {
      char state[96];
      snprintf(state, sizeof state, "%zu of %zu units done, %zu issued", done, n, next);
      if (sim_bounded(c, sim_cn_name(j->kind), state)) return -1;
    }
  }
  return 0;
}

static conform_status_t sim_cn_run(conform_ctx_t *c, sim_cn_kind_t kind) {
  if (sim_precheck(c)) return conform_verdict(c);
  static const strand_datatype_t reduce_types[] = {STRAND_FLOAT32, STRAND_BFLOAT16, STRAND_INT32};
  static const strand_datatype_t byte_type[] = {STRAND_UINT8};
  const strand_datatype_t *types = kind == SIM_CN_AG ? byte_type : reduce_types;
  int ntypes = kind == SIM_CN_AG ? 1 : kind == SIM_CN_AR ? 3 : 2;
  size_t bytes = round_up(sim_bytes(c), 8 * (size_t)c->nranks);
  sim_cn_t s;
  unsigned char *in = malloc(bytes), *out = malloc(bytes), *exp = malloc(bytes), *tmp = malloc(bytes);
  int colls = 0;
  if (!in || !out || !exp || !tmp) {
    conform_fail(c, "out of memory for %zu-byte buffers", bytes);
    goto out;
  }
  if (sim_cn_open(c, &s, 2 * SIM_CN_STEPS * SIM_CN_CHUNK)) goto close;
  for (int ti = 0; ti < ntypes && c->status != CONFORM_FAIL; ti++) {
    strand_datatype_t t = types[ti];
    int sup = 1;
    if (kind != SIM_CN_AG) c->collnet->reduceSupport(t, STRAND_SUM, &sup);
    if (!sup) continue; /* the same answer on every rank: one plugin */
    for (int it = 0; it < sim_opts.iters && c->status != CONFORM_FAIL; it++) {
      uint64_t salt = ((uint64_t)kind << 40) | ((uint64_t)t << 32) | (uint64_t)it;
      sim_cn_job_t j = {kind, t, strand_datatype_size(t), bytes / (size_t)c->nranks, bytes, in, out};
      size_t myoff = j.bpr * (size_t)c->rank;
      memset(out, 0xCD, bytes);
      if (kind == SIM_CN_AG) {
        conform_fill(in, j.bpr, conform_seed(c->rank, -1, salt));
      } else {
        sim_cn_gen(t, c->rank, in, bytes / j.esz, salt);
      }
      if (sim_cn_pipeline(c, &s, &j)) break;
      colls++;
      if (kind == SIM_CN_AG) {
        for (int r = 0; r < c->nranks; r++) {
          long long bad = conform_verify(out + (size_t)r * j.bpr, j.bpr, conform_seed(r, -1, salt));
          if (bad >= 0) {
            conform_fail(c, "iallgather of %zu bytes per rank: rank %d's block differs at byte %lld "
                         "(windows of %zu bytes, %d in flight)", j.bpr, r, bad, SIM_CN_CHUNK, SIM_CN_STEPS);
            break;
          }
        }
        continue;
      }
      sim_cn_expected(t, c->nranks, exp, tmp, bytes / j.esz, salt);
      const unsigned char *want = kind == SIM_CN_AR ? exp : exp + myoff;
      size_t len = kind == SIM_CN_AR ? bytes : j.bpr;
      if (memcmp(want, out, len) != 0) {
        size_t i = 0;
        while (want[i] == out[i]) i++;
        conform_fail(c, "%s(%s) of %zu bytes: byte %zu differs from the CPU reduction of every rank's "
                     "data (%zu-byte units, %d in flight)", sim_cn_name(kind), strand_datatype_name(t),
                     bytes, i, SIM_CN_CHUNK, SIM_CN_STEPS);
      }
    }
  }
  if (c->status != CONFORM_FAIL)
    conform_note(c, "%d collectives of %zu bytes in %zu-byte units, %d in flight", colls, bytes,
                 SIM_CN_CHUNK, SIM_CN_STEPS);
close:
  if (c->status != CONFORM_FAIL) conform_barrier(c);
  sim_cn_close(c, &s);
out:
  free(in);
  free(out);
  free(exp);
  free(tmp);
  return conform_verdict(c);
}

conform_status_t sim_collnet_allreduce(conform_ctx_t *c) { return sim_cn_run(c, SIM_CN_AR); }
conform_status_t sim_collnet_allgather(conform_ctx_t *c) { return sim_cn_run(c, SIM_CN_AG); }
conform_status_t sim_collnet_reducescatter(conform_ctx_t *c) { return sim_cn_run(c, SIM_CN_RS); }
