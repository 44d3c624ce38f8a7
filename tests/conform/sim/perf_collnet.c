/* strand-conform perf --collnet — CollNet all-reduce throughput, driven the way NCCL 2.28.9's
 * CollNetChain proxy drives a CollNet table, next to the same network bytes moved through the net
 * plugin directly, in the same run and between the same ranks.
 *
 * Why: under real NCCL a CollNet over a net plugin can move far less data than the net plugin
 * alone. With both measured here, host-only and without a GPU, the ratio column says how much of
 * the gap is the CollNet's own (its per-call work and hand-offs), and the CollNet's own statistics
 * (collnet_stub's `closing:` INFO lines, shown with -v) say where a call's time goes.
 *
 * Ranks: 2, or with --nranks N up to 8 (perf.c lets this table alone run at N > 2).
 *
 * CollNet side (sim/collnet.c's set-up, shared through sim.h): one collComm per size row, ONE host
 * buffer [W send slots | W recv slots] of B bytes each registered twice on it (NCCL's send and
 * recv connectors), iallreduce of B bytes of float32 sum, issued until W are in flight (a NULL
 * request is retried later), test() of the oldest only (NCCL's order), reissued when it completes.
 * The send slots hold each rank's data once (the GPU's staging is no proxy cost); after the timed
 * run every recv slot must equal the sum of every rank's data, or the row fails.
 *
 * Reference (perf.c's link and buffers): per call, B/N bytes (rounded down) to and from each of the
 * N-1 peers (reduce-scatter), then, once all of them completed, B/N again each way (all-gather):
 * the bytes an N-rank all-reduce must move (at 2 ranks B/2 each way, twice). Beyond 2 ranks the
 * peers are reached over a mesh of net comms, one send/recv pair per peer (ref_mesh_open: pair d
 * sends to rank+d and receives from rank-d), so that one exchange's time can be set against the
 * CollNet's at the same N on the same cores. W calls in flight, every in-flight request tested.
 * With --collnet-ref ring the reference is the ring all-reduce's bytes instead: per call 2(N-1)
 * steps in turn, each B/N to rank+1 and B/N from rank-1 over perf_open's link alone, a step posted
 * once the previous one's send and receive completed (a ring step forwards what it received). It
 * answers what the mesh cannot: how fast the same net moves the bytes of the algorithm the CollNet
 * competes with (NCCL's ring through the net plugin), on the same cores; at 2 ranks the two
 * patterns are the same.
 * With --collnet-ref-streams S the mesh reference lays its calls over the comms the way
 * collnet_stub does where its all-reduces take two exchanges (above 2 ranks, or with
 * STRAND_COLLNET_ONESHOT_KB=0): S streams of 2 comm pairs per peer, call k on stream k mod S, its
 * first exchange on the stream's first pair and its second on the other (the stub's two lanes), so
 * that what the stub's layout costs the net shows apart from what the stub adds.
 * With --collnet-ref-headers a 64-byte message goes ahead of each payload on the same comms, the
 * shape of collnet_stub's agreement header, so that its cost shows apart. Payloads to one peer all
 * have the same size and the same pattern, so it does not matter which posted receive a message
 * lands in when the ranks interleave their phases differently (receives of one irecv match sends
 * in posting order); each peer's messages land in their own share of the receive area, checked
 * against that peer's pattern.
 *
 * GB/s in both columns = user bytes per rank (B per call) per second of the slowest rank. */
#include <stdlib.h>
#include <string.h>

#include "perf.h"
#include "sim.h"

#define CN_TYPE STRAND_FLOAT32
#define CN_ESZ 4

typedef struct {
  double time_us, gbps;
  long count;
} cn_res_t;

static unsigned char *cn_send_slot(const sim_cn_t *s, size_t b, int w, long k) {
  return s->shared + (size_t)(k % w) * b;
}
static unsigned char *cn_recv_slot(const sim_cn_t *s, size_t b, int w, long k) {
  return s->shared + ((size_t)w + (size_t)(k % w)) * b;
}
static uint64_t cn_salt(size_t b, int slot) { return 0x434e5046ULL << 32 ^ (uint64_t)b << 8 ^ (uint64_t)slot; }

/* ------------------------------------------------------------------ CollNet loop */

/* `calls` iallreduce calls of b bytes, w in flight; *elapsed from the barrier to the last one. */
static int cn_run(conform_ctx_t *c, sim_cn_t *s, size_t b, int w, long calls, const char *what,
                  double *elapsed) {
  const strand_collnet_v12_t *t = c->collnet;
  void *reqs[STRAND_NET_MAX_REQUESTS] = {0};
  long next = 0, done = 0;
  conform_phase(c, "%s", what);
  if (conform_barrier(c)) return conform_fail(c, "bootstrap: %s", c->bs_error), -1;
  double t0 = conform_now();
  for (unsigned long spins = 1; done < calls; spins++) {
    while (next < calls && next - done < w) {
      void *r = NULL;
      strand_result_t rc = t->iallreduce(s->cc, cn_send_slot(s, b, w, next), cn_recv_slot(s, b, w, next),
                                         b / CN_ESZ, CN_TYPE, STRAND_SUM, s->mh_send, s->mh_recv, &r);
      if (rc != STRAND_SUCCESS)
        return conform_fail(c, "%s: iallreduce of call %ld returned %s", what, next, conform_result_str(rc)), -1;
      if (!r) break; /* the CollNet is full: NCCL retries on its next pass */
      reqs[next % w] = r;
      next++;
    }
    if (done < next) {
      int d = 0, size = -1;
      strand_result_t rc = t->test(reqs[done % w], &d, &size);
      if (rc != STRAND_SUCCESS)
        return conform_fail(c, "%s: test(call %ld) returned %s", what, done, conform_result_str(rc)), -1;
      if (d) {
        reqs[done % w] = NULL;
        done++;
        continue;
      }
    }
    if ((spins & 1023) == 0) {
      char state[96];
      snprintf(state, sizeof state, "%ld of %ld calls done, %ld issued", done, calls, next);
      if (sim_bounded(c, what, state)) return -1;
    }
  }
  *elapsed = conform_now() - t0;
  return 0;
}

/* Every recv slot against the sum of every rank's data for its slot. */
static int cn_verify(conform_ctx_t *c, const sim_cn_t *s, size_t b, int w) {
  unsigned char *exp = malloc(b), *tmp = malloc(b);
  int rc = 0;
  if (!exp || !tmp) {
    rc = -1;
    conform_fail(c, "out of memory for %zu-byte buffers", b);
  }
  for (int k = 0; k < w && rc == 0; k++) {
    sim_cn_expected(CN_TYPE, c->nranks, exp, tmp, b / CN_ESZ, cn_salt(b, k));
    const unsigned char *got = cn_recv_slot(s, b, w, k);
    if (memcmp(exp, got, b) != 0) {
      size_t i = 0;
      while (exp[i] == got[i]) i++;
      conform_fail(c, "collnet all-reduce of %zu bytes, %d in flight: recv slot %d differs from the sum "
                   "of every rank's data at byte %zu", b, w, k, i);
      rc = -1;
    }
  }
  free(exp);
  free(tmp);
  return rc;
}

/* One row's CollNet measurement on a fresh collComm (its closing statistics are the row's). */
static int cn_measure(conform_ctx_t *c, size_t b, int w, cn_res_t *res) {
  sim_cn_t s;
  char what[128], szs[32];
  snprintf(what, sizeof what, "perf collnet all-reduce, %s, %d in flight",
           simperf_size_str(b, szs, sizeof szs), w);
  int rc = -1;
  if (sim_cn_open(c, &s, 2 * (size_t)w * b)) goto out;
  for (int k = 0; k < w; k++) sim_cn_gen(CN_TYPE, c->rank, cn_send_slot(&s, b, w, k), b / CN_ESZ, cn_salt(b, k));
  long warm = perf_warm_groups(b, w), iters;
  double t = 0;
  if (cn_run(c, &s, b, w, warm, what, &t) || perf_agree_max(c, &t)) goto out;
  long lo = perf_min_groups(b) > w ? perf_min_groups(b) : w; /* every slot written in the timed run */
  if (perf_agree_iters(c, t, warm, lo, 1000000, &iters)) goto out;
  memset(s.shared + (size_t)w * b, 0xCD, (size_t)w * b); /* a slot left unwritten cannot pass */
  if (cn_run(c, &s, b, w, iters, what, &t) || perf_agree_max(c, &t)) goto out;
  if (cn_verify(c, &s, b, w)) goto out;
  res->count = iters;
  res->time_us = t * 1e6 / (double)iters;
  res->gbps = t > 0 ? (double)b * (double)iters / t / 1e9 : 0;
  rc = 0;
out:
  if (c->status != CONFORM_FAIL) conform_barrier(c); /* no rank closes while its peer still moves data */
  sim_cn_close(c, &s);
  return rc;
}

/* ------------------------------------------------------------------ net reference loop */

/* The reference's mesh: per peer distance d = 1..N-1, K links (K = 1, or 2 per stream with
 * --collnet-ref-streams) that send to rank+d and receive from rank-d, as sim's P2P engine builds
 * them; link (d-1) * K + j. Link 0 is perf_open's ring link (at 2 ranks without streams the only
 * one); the others are opened here, with the same send buffer and receive area registered on their
 * comms. */
typedef struct {
  void *send_comm, *recv_comm, *smh, *rmh;
  int from; /* the rank this link receives from */
} ref_link_t;
#define REF_MAX_LINKS ((PERF_COLLNET_MAX_RANKS - 1) * 2 * PERF_COLLNET_MAX_REF_STREAMS)
typedef struct {
  int peers;   /* peers a call exchanges with: N-1 (mesh), 1 (ring: the next rank) */
  int k;       /* links per peer: 1, or 2 x --collnet-ref-streams */
  int n;       /* links: peers x k */
  int phases;  /* exchanges per call: 2 (mesh), 2(N-1) (ring) */
  ref_link_t l[REF_MAX_LINKS];
  conform_link_t extra[REF_MAX_LINKS]; /* [i] for link i >= 1 */
  void *extra_smh[REF_MAX_LINKS], *extra_rmh[REF_MAX_LINKS];
  bool extra_open[REF_MAX_LINKS];
} ref_mesh_t;

/* 0, or -1 with the failure recorded (ref_mesh_close is due either way). */
static int ref_mesh_open(perf_t *P, ref_mesh_t *M) {
  conform_ctx_t *c = P->c;
  const int R = c->nranks;
  memset(M, 0, sizeof *M);
  M->peers = perf_opts.collnet_ref_ring ? 1 : R - 1;
  M->k = perf_opts.collnet_ref_streams ? 2 * perf_opts.collnet_ref_streams : 1;
  M->n = M->peers * M->k;
  M->phases = perf_opts.collnet_ref_ring ? 2 * (R - 1) : 2;
  M->l[0] = (ref_link_t){P->link.send_comm, P->link.recv_comm, P->px.smh, P->px.rmh, c->prev};
  for (int i = 1; i < M->n; i++) {
    const int d = i / M->k + 1, from = (c->rank - d + R) % R;
    if (conform_link_open_at(c, perf_opts.dev, d, &M->extra[i])) return -1;
    M->extra_open[i] = true;
    conform_link_t *k = &M->extra[i];
    if (conform_reg(c, k->send_comm, P->B.sbuf, P->B.sbuf_len, STRAND_PTR_HOST, &M->extra_smh[i]) ||
        conform_reg(c, k->recv_comm, P->B.rarea, P->B.rarea_len, STRAND_PTR_HOST, &M->extra_rmh[i]))
      return -1;
    M->l[i] = (ref_link_t){k->send_comm, k->recv_comm, M->extra_smh[i], M->extra_rmh[i], from};
  }
  return 0;
}

static void ref_mesh_close(perf_t *P, ref_mesh_t *M) {
  conform_ctx_t *c = P->c;
  for (int i = 1; i < REF_MAX_LINKS; i++) {
    if (!M->extra_open[i]) continue;
    if (M->extra_smh[i]) conform_dereg(c, M->extra[i].send_comm, M->extra_smh[i]);
    if (M->extra_rmh[i]) conform_dereg(c, M->extra[i].recv_comm, M->extra_rmh[i]);
    conform_link_close(c, &M->extra[i]);
  }
  memset(M, 0, sizeof *M);
}

/* Receive slot `local` of the messages from link i: each link has its own share of the area's
 * distinct slots (at 2 ranks: the whole area, slot `local` as before), wrapping within it. */
static unsigned char *ref_slot(const perf_t *P, const ref_mesh_t *M, size_t len, int i, int local,
                               int *per_link) {
  int nslots = 1;
  perf_rslot(&P->B, len, 0, &nslots);
  int s = nslots / M->n > 0 ? nslots / M->n : 1;
  if (per_link) *per_link = s;
  return perf_rslot(&P->B, len, (long)i * s + local % s, NULL);
}

/* What a rank's send buffer holds (perf_bufs_alloc's pattern: its seed names rank 1 for rank 0,
 * rank 0 for every other), so that data from any peer can be checked. */
static uint64_t ref_seed_of(int rank) { return conform_seed(rank, rank == 0 ? 1 : 0, 0x50455246); }

/* One message pair of a reference call's exchange with one peer: its send and receive, posted
 * and done. */
typedef struct {
  void *sreq, *rreq;
  bool sp, rp, sd, rd;
} ref_msg_t;

/* With --collnet-ref-headers an exchange is a header message then the payload on the same comms
 * (collnet_stub's shape); otherwise the payload alone. */
#define REF_HDR_BYTES 64
typedef struct {
  int phase; /* mesh: 0 reduce-scatter, 1 all-gather; ring: the step; M->phases: done */
  /* per link: [0] the header (with --collnet-ref-headers), [1] the payload */
  ref_msg_t msg[PERF_COLLNET_MAX_RANKS - 1][2];
} ref_call_t;

/* Posts what is not posted yet and tests what is not done of one message pair; 0, or -1 (recorded). */
static int ref_msg_step(perf_t *P, const ref_link_t *L, ref_msg_t *m, void *rbuf, size_t len,
                        const char *what) {
  conform_ctx_t *c = P->c;
  int rtag = L->from;
  void *rmh = L->rmh;
  if (!m->rp) {
    size_t sz = len;
    if (simperf_try_irecv(c, L->recv_comm, 1, &rbuf, &sz, &rtag, &rmh, false, &m->rreq)) return -1;
    m->rp = m->rreq != NULL;
  }
  if (!m->sp) {
    if (simperf_try_isend(c, L->send_comm, P->B.sbuf, len, c->rank, L->smh, &m->sreq)) return -1;
    m->sp = m->sreq != NULL;
  }
  if (m->rp && !m->rd) {
    int d = 0, sz = 0;
    if (simperf_try_test(c, m->rreq, &d, &sz, what)) return -1;
    if (d && (size_t)sz != len)
      return conform_fail(c, "%s: a receive from rank %d reported %d bytes, %zu were sent", what, L->from,
                          sz, len), -1;
    m->rd = d;
  }
  if (m->sp && !m->sd) {
    int d = 0, sz = 0;
    if (simperf_try_test(c, m->sreq, &d, &sz, what)) return -1;
    m->sd = d;
  }
  return 0;
}

static int ref_run(perf_t *P, const ref_mesh_t *M, size_t b, int w, long calls, const char *what,
                   double *elapsed) {
  conform_ctx_t *c = P->c;
  size_t h = b / (size_t)c->nranks;
  static ref_call_t v[STRAND_NET_MAX_REQUESTS]; /* too large for a check child's stack at 8 ranks */
  long next = 0, done = 0;
  const bool hdr = perf_opts.collnet_ref_headers;
  conform_phase(c, "%s", what);
  if (conform_barrier(c)) return conform_fail(c, "bootstrap: %s", c->bs_error), -1;
  double t0 = conform_now();
  for (unsigned long spins = 1; done < calls; spins++) {
    while (next < calls && next - done < w) memset(&v[next++ % w], 0, sizeof v[0]);
    for (long k = done; k < next; k++) {
      ref_call_t *x = &v[k % w];
      if (x->phase == M->phases) continue; /* complete, retired once the older ones are */
      /* with streams: the call's stream, its first or second pair, and a link's receive slots in
       * the order of the calls that link carries */
      const int S = M->k / 2, j = M->k == 1 ? 0 : 2 * (int)(k % S) + (x->phase > 0);
      const int slot = M->k == 1 ? M->phases * (int)(k % w) + x->phase : (int)(k / S);
      bool all = true;
      for (int p = 0; p < M->peers; p++) {
        const int i = p * M->k + j;
        ref_msg_t *m = x->msg[p];
        /* headers land beyond the payload slots (ref_measure checks the area holds them) */
        if (hdr && ref_msg_step(P, &M->l[i], &m[0], ref_slot(P, M, h, i, M->phases * w + slot, NULL), REF_HDR_BYTES,
                                what))
          return -1;
        if (ref_msg_step(P, &M->l[i], &m[1], ref_slot(P, M, h, i, slot, NULL), h, what)) return -1;
        bool hdone = !hdr || (m[0].rd && m[0].sd);
        all = all && hdone && m[1].rd && m[1].sd;
      }
      if (all) { /* every peer's exchange of this phase is done: the next phase starts */
        int phase = x->phase + 1;
        memset(x, 0, sizeof *x);
        x->phase = phase;
      }
    }
    while (done < next && v[done % w].phase == M->phases) done++;
    if ((spins & 1023) == 0) {
      char state[96];
      snprintf(state, sizeof state, "%ld of %ld calls done, %ld issued", done, calls, next);
      if (sim_bounded(c, what, state)) return -1;
    }
  }
  *elapsed = conform_now() - t0;
  return 0;
}

static int ref_measure(perf_t *P, const ref_mesh_t *M, size_t b, int w, cn_res_t *res) {
  conform_ctx_t *c = P->c;
  char what[128], szs[32];
  snprintf(what, sizeof what, "perf collnet reference (net plugin), %s, %d in flight",
           simperf_size_str(b, szs, sizeof szs), w);
  size_t h = b / (size_t)c->nranks;
  long warm = perf_warm_groups(b, w), iters;
  double t = 0;
  if (ref_run(P, M, b, w, warm, what, &t) || perf_agree_max(c, &t)) return -1;
  long lo = perf_min_groups(b) > w ? perf_min_groups(b) : w;
  if (perf_agree_iters(c, t, warm, lo, 1000000, &iters)) return -1;
  int per_link = 1;
  ref_slot(P, M, h, 0, 0, &per_link);
  int used = M->phases * w < per_link ? M->phases * w : per_link;
  for (int i = 0; i < M->n; i++)
    for (int m = 0; m < used; m++) memset(ref_slot(P, M, h, i, m, NULL), 0, h);
  if (ref_run(P, M, b, w, iters, what, &t) || perf_agree_max(c, &t)) return -1;
  for (int i = 0; i < M->n; i++)
    for (int m = 0; m < used; m++) {
      long long bad = conform_verify(ref_slot(P, M, h, i, m, NULL), h, ref_seed_of(M->l[i].from));
      if (bad >= 0)
        return conform_fail(c, "%s: data received from rank %d differs at byte %lld of %zu", what,
                            M->l[i].from, bad, h), -1;
    }
  res->count = iters;
  res->time_us = t * 1e6 / (double)iters;
  res->gbps = t > 0 ? (double)b * (double)iters / t / 1e9 : 0;
  return 0;
}

/* ------------------------------------------------------------------ the check */

conform_status_t perf_collnet_allreduce(conform_ctx_t *c) {
  static const char *id = "perf.collnet-allreduce";
  if (!c->collnet) return conform_skip(c, "the library exports no ncclCollNetPlugin_v* symbol");
  int w = perf_opts.collnet_window;
  perf_t P;
  ref_mesh_t M;
  memset(&M, 0, sizeof M);
  const int links = c->nranks - 1;
  /* --collnet-ref-headers: the headers' receive slots follow the payloads' (ref_run); a header
   * carries the first bytes of the same pattern, so one landing on a payload slot of a small area
   * would still verify. */
  if (perf_open(&P, c, id, (perf_opts.collnet_ref_headers ? 3 * w : 2 * w) * links)) {
    perf_close(&P);
    return CONFORM_FAIL;
  }
  conform_status_t st = CONFORM_PASS;
  if (w > P.max_depth) {
    st = conform_fail(c, "--collnet-window %d exceeds the %d requests per comm NCCL allows at ABI v%d "
                      "(the net reference keeps that many in flight)", w, P.max_depth, c->version);
    goto out;
  }
  if (ref_mesh_open(&P, &M)) {
    st = CONFORM_FAIL;
    goto out;
  }
  int sup = 0;
  if (c->collnet->reduceSupport(CN_TYPE, STRAND_SUM, &sup) != STRAND_SUCCESS || !sup) {
    st = conform_skip(c, "the CollNet does not support float32 sum");
    goto out;
  }
  strand_props_v12_t cp;
  memset(&cp, 0, sizeof cp);
  c->collnet->getProperties(0, &cp);
  char title[200];
  snprintf(title, sizeof title, "CollNet all-reduce (float32 sum), %d calls in flight, against the "
           "net plugin", w);
  perf_header(&P, id, title);
  perf_out(&P, "# collnet: device 0 \"%s\", maxCollBytes %zu; per size one collComm, one host buffer "
           "[%d send | %d recv slots] registered twice, test() of the oldest call",
           cp.name ? cp.name : "?", cp.maxCollBytes, w, w);
  const char *hdrs = perf_opts.collnet_ref_headers ? "; a 64-byte header message ahead of each payload "
                                                     "(--collnet-ref-headers)" : "";
  if (c->nranks == 2)
    perf_out(&P, "# reference: the net plugin, per call B/2 sent and received, then B/2 again once both "
             "completed (2-rank reduce-scatter + all-gather), %d calls in flight%s", w, hdrs);
  else if (perf_opts.collnet_ref_ring)
    perf_out(&P, "# reference: the net plugin as a ring (--collnet-ref ring), per call %d steps in turn "
             "of B/%d sent to the next rank and received from the previous (a %d-rank ring all-reduce's "
             "bytes), %d calls in flight", 2 * links, c->nranks, c->nranks, w);
  else
    perf_out(&P, "# reference: the net plugin over a mesh (%s), per call B/%d sent to and received from "
             "each of the %d peers, then again once all completed (%d-rank reduce-scatter + all-gather), "
             "%d calls in flight%s", perf_opts.collnet_ref_streams ? "collnet_stub's comm layout" :
             "one comm pair per peer", c->nranks, links, c->nranks, w, hdrs);
  if (perf_opts.collnet_ref_streams) /* at 2 ranks too, where the line above is not printed */
    perf_out(&P, "# reference laid out as collnet_stub's comms (--collnet-ref-streams %d): that many "
             "streams of 2 comm pairs per peer, call k on stream k mod streams, reduce-scatter on its "
             "first pair, all-gather on its second", perf_opts.collnet_ref_streams);
  perf_out(&P, "# GB/s = user bytes per rank per second (B per call); the CollNet's own statistics "
           "print at each collComm's close (NCCL_DEBUG=INFO, -v)");
  perf_json(&P, ",\"collnet_reference\":\"%s\",",
            perf_opts.collnet_ref_headers ? "net+headers" : perf_opts.collnet_ref_ring ? "net-ring" : "net");
  if (c->nranks > 2) perf_json(&P, "\"ranks\":%d,", c->nranks); /* absent: 2 */
  if (perf_opts.collnet_ref_streams) perf_json(&P, "\"ref_streams\":%d,", perf_opts.collnet_ref_streams);
  perf_json(&P, "\"datatype\":\"float32\",\"op\":\"sum\",\"window\":%d,"
            "\"rows\":[", w);
  perf_out(&P, "# %12s %6s %10s %11s %12s | %10s %12s %15s %7s", "size(B)", "window", "count",
           "time(us)", "algbw(GB/s)", "ref count", "ref time(us)", "ref algbw(GB/s)", "ratio");
  double peak = 0, peak_ref = 0;
  size_t peak_size = 0;
  int rows = 0;
  for (int i = 0; i < perf_opts.n_collnet_bytes; i++) {
    size_t b = perf_opts.collnet_bytes[i];
    if (cp.maxCollBytes && b > cp.maxCollBytes) {
      perf_out(&P, "# %zu bytes: left out, above the CollNet's maxCollBytes %zu (NCCL would cut the call)",
               b, cp.maxCollBytes);
      continue;
    }
    cn_res_t r = {0}, q = {0};
    if (cn_measure(c, b, w, &r) || ref_measure(&P, &M, b, w, &q)) {
      st = CONFORM_FAIL;
      break;
    }
    double ratio = q.gbps > 0 ? r.gbps / q.gbps : 0;
    perf_out(&P, "  %12zu %6d %10ld %11.2f %12.3f | %10ld %12.2f %15.3f %7.2f", b, w, r.count, r.time_us,
             r.gbps, q.count, q.time_us, q.gbps, ratio);
    perf_json(&P, "%s{\"bytes\":%zu,\"window\":%d,\"count\":%ld,\"time_us\":%.3f,\"algbw_gbps\":%.4f,"
              "\"ref_count\":%ld,\"ref_time_us\":%.3f,\"ref_algbw_gbps\":%.4f,\"ratio\":%.4f}",
              rows ? "," : "", b, w, r.count, r.time_us, r.gbps, q.count, q.time_us, q.gbps, ratio);
    rows++;
    if (r.gbps > peak) {
      peak = r.gbps;
      peak_ref = q.gbps;
      peak_size = b;
    }
  }
  perf_json(&P, "]}");
  if (st == CONFORM_PASS && rows == 0)
    st = conform_skip(c, "every --collnet-bytes size is above the CollNet's maxCollBytes %zu", cp.maxCollBytes);
  if (st == CONFORM_PASS) {
    perf_json_flush(&P);
    char szs[32];
    conform_note(c, "peak %.3f GB/s at %s, %d in flight; net reference %.3f GB/s there, ratio %.2f", peak,
                 simperf_size_str(peak_size, szs, sizeof szs), w, peak_ref,
                 peak_ref > 0 ? peak / peak_ref : 0);
  }
out:
  ref_mesh_close(&P, &M);
  perf_close(&P);
  return st == CONFORM_PASS && c->status == CONFORM_FAIL ? CONFORM_FAIL : st;
}
