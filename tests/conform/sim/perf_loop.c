/* strand-conform perf — the measurement loops: the transport calls (one attempt each, through
 * the plugin or the raw-TCP reference), the receive slots, the bandwidth loop (`depth` requests in
 * flight, grouped receives, the 1-byte acknowledgement that ends a uni-directional run) and the
 * ping-pong loop, each bounded by the check's deadline and verifying the data it received. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "perf.h"

/* ------------------------------------------------------------------ transport abstraction */

static int xp_isend(xp_t *x, void *buf, size_t size, int tag, void **req) {
  if (x->tcp) return rawtcp_isend(x->c, x->rt, buf, size, req);
  return simperf_try_isend(x->c, x->link->send_comm, buf, size, tag, x->smh, req);
}

static int xp_irecv(xp_t *x, int n, void **bufs, size_t *sizes, int *tags, void **req) {
  if (x->tcp) return rawtcp_irecv(x->c, x->rt, n, bufs, sizes, req);
  void *mhs[STRAND_PROXY_MAX_SUBS];
  for (int i = 0; i < n; i++) mhs[i] = x->rmh;
  return simperf_try_irecv(x->c, x->link->recv_comm, n, bufs, sizes, tags, mhs, false, req);
}

/* `sizes` gets the received sizes (the posted ones for TCP, which has no header). */
static int xp_test(xp_t *x, void *req, int *done, int *sizes, int n, size_t posted) {
  if (x->tcp) {
    if (rawtcp_test(x->c, x->rt, req, done)) return -1;
    if (*done && sizes)
      for (int i = 0; i < n; i++) sizes[i] = (int)posted;
    return 0;
  }
  return simperf_try_test(x->c, req, done, sizes, "perf");
}

/* ------------------------------------------------------------------ buffers */

int perf_bufs_alloc(conform_ctx_t *c, bufs_t *B, size_t max_size, int slots_wanted) {
  memset(B, 0, sizeof *B);
  B->c = c;
  B->peer = c->rank == 0 ? 1 : 0;
  B->sbuf_len = max_size ? max_size : 1;
  size_t want = (size_t)slots_wanted * B->sbuf_len;
  /* One area's worth per peer: at N ranks (perf --collnet) each of the N-1 peers gets its share. */
  size_t cap = (PERF_AREA_MAX > B->sbuf_len ? PERF_AREA_MAX : B->sbuf_len) *
               (size_t)(c->nranks > 2 ? c->nranks - 1 : 1);
  B->rarea_len = want < cap ? want : cap;
  B->rarea_len = (B->rarea_len + 4095) & ~(size_t)4095;
  if (posix_memalign((void **)&B->sbuf, 4096, B->sbuf_len) ||
      posix_memalign((void **)&B->rarea, 4096, B->rarea_len)) {
    conform_fail(c, "out of memory for %zu + %zu byte buffers", B->sbuf_len, B->rarea_len);
    return -1;
  }
  B->seed_mine = conform_seed(c->rank, B->peer, 0x50455246);
  B->seed_peer = conform_seed(B->peer, c->rank, 0x50455246);
  conform_fill(B->sbuf, B->sbuf_len, B->seed_mine);
  memset(B->rarea, 0, B->rarea_len); /* fault the pages in before anything is timed */
  return 0;
}

void perf_bufs_free(bufs_t *B) {
  free(B->sbuf);
  free(B->rarea);
  B->sbuf = B->rarea = NULL;
}

/* Receive slot for message m of a given size: distinct slots while they fit in the area. */
unsigned char *perf_rslot(const bufs_t *B, size_t size, long m, int *nslots) {
  size_t stride = (size + 4095) & ~(size_t)4095;
  if (!stride) stride = 4096;
  size_t n = B->rarea_len / stride;
  if (n < 1) n = 1;
  if (nslots) *nslots = (int)(n > 1024 ? 1024 : n);
  return B->rarea + (size_t)(m % (long)n) * stride;
}

/* ------------------------------------------------------------------ measurement loops */

static int bounded(conform_ctx_t *c, const char *what, long sd, long st, long rd, long rt) {
  if (conform_peer_failed(c)) {
    conform_fail(c, "%s: %s", what, c->bs_error);
    return -1;
  }
  if (conform_remaining(c) < 1.5) {
    conform_fail(c, "%s did not finish before the time bound (sends %ld/%ld, receives %ld/%ld): "
                 "raise --timeout-scale or lower --max-bytes for a slow transport", what, sd, st,
                 rd, rt);
    return -1;
  }
  return 0;
}

/* One bandwidth run; *elapsed = seconds from the barrier to the end of this rank's part. */
int perf_bw_run(xp_t *x, bufs_t *B, const bw_spec_t *sp, const char *what, double *elapsed) {
  conform_ctx_t *c = x->c;
  long S = sp->send ? sp->groups * sp->n : 0, G = sp->recv ? sp->groups : 0;
  long W = (long)sp->depth * sp->n;
  void **sreq = calloc((size_t)W, sizeof *sreq);
  void **rreq = calloc((size_t)sp->depth, sizeof *rreq);
  int nslots = 1;
  perf_rslot(B, sp->size, 0, &nslots);
  int rc = -1;
  long s_posted = 0, s_done = 0, r_posted = 0, r_done = 0;
  void *ack_req = NULL;
  if (!sreq || !rreq) {
    conform_fail(c, "out of memory");
    goto out;
  }
  conform_phase(c, "%s", what);
  /* Receives are posted before the start line, as NCCL's proxy posts them ahead of the data. */
  if (sp->ack && sp->send) {
    size_t one = 1;
    int tag = x->tcp ? 0 : B->peer;
    /* The acknowledgement lands in the registered receive area (unused by the sender in a
     * unidirectional run), so providers that require registered buffers accept it. */
    void *ab = B->rarea;
    for (unsigned spins = 0; !ack_req; spins++) {
      if (xp_irecv(x, 1, &ab, &one, &tag, &ack_req)) goto out;
      if (!ack_req && (spins & 255) == 255 && bounded(c, what, 0, S, 0, G)) goto out;
    }
  }
  int tags[STRAND_PROXY_MAX_SUBS];
  for (int i = 0; i < sp->n; i++) tags[i] = sp->n == 1 ? B->peer : i;
  while (r_posted < G && r_posted < sp->depth) {
    void *bufs[STRAND_PROXY_MAX_SUBS];
    size_t sizes[STRAND_PROXY_MAX_SUBS];
    for (int i = 0; i < sp->n; i++) {
      bufs[i] = perf_rslot(B, sp->size, r_posted * sp->n + i, NULL);
      sizes[i] = sp->size;
    }
    void *r = NULL;
    if (xp_irecv(x, sp->n, bufs, sizes, tags, &r)) goto out;
    if (!r) break;
    rreq[r_posted % sp->depth] = r;
    r_posted++;
  }
  if (conform_barrier(c)) {
    conform_fail(c, "bootstrap: %s", c->bs_error);
    goto out;
  }
  double t0 = conform_now();
  for (unsigned long it = 0; s_done < S || r_done < G; it++) {
    while (s_posted < S && s_posted - s_done < W) {
      void *r = NULL;
      int tag = sp->n == 1 ? c->rank : (int)(s_posted % sp->n);
      if (xp_isend(x, B->sbuf, sp->size, tag, &r)) goto out;
      if (!r) break;
      sreq[s_posted % W] = r;
      s_posted++;
    }
    while (r_posted < G && r_posted - r_done < sp->depth) {
      void *bufs[STRAND_PROXY_MAX_SUBS];
      size_t sizes[STRAND_PROXY_MAX_SUBS];
      for (int i = 0; i < sp->n; i++) {
        bufs[i] = perf_rslot(B, sp->size, r_posted * sp->n + i, NULL);
        sizes[i] = sp->size;
      }
      void *r = NULL;
      if (xp_irecv(x, sp->n, bufs, sizes, tags, &r)) goto out;
      if (!r) break;
      rreq[r_posted % sp->depth] = r;
      r_posted++;
    }
    while (s_done < s_posted) {
      int done = 0, sz = 0;
      if (xp_test(x, sreq[s_done % W], &done, &sz, 1, sp->size)) goto out;
      if (!done) break;
      s_done++;
    }
    while (r_done < r_posted) {
      int done = 0, sizes[STRAND_PROXY_MAX_SUBS] = {0};
      if (xp_test(x, rreq[r_done % sp->depth], &done, sizes, sp->n, sp->size)) goto out;
      if (!done) break;
      for (int i = 0; i < sp->n; i++)
        if ((size_t)sizes[i] != sp->size) {
          conform_fail(c, "%s: receive %ld slot %d reported %d bytes, %zu were sent", what, r_done,
                       i, sizes[i], sp->size);
          goto out;
        }
      r_done++;
    }
    if ((it & 1023) == 1023 && bounded(c, what, s_done, S, r_done, G)) goto out;
  }
  if (sp->ack && sp->recv) {
    void *r = NULL;
    for (unsigned spins = 0; !r; spins++) {
      /* Sent from the registered send buffer, unused by the receiver in a unidirectional run. */
      if (xp_isend(x, B->sbuf, 1, c->rank, &r)) goto out;
      if (!r && (spins & 255) == 255 && bounded(c, what, S, S, G, G)) goto out;
    }
    for (unsigned long it = 0;; it++) {
      int done = 0, sz = 0;
      if (xp_test(x, r, &done, &sz, 1, 1)) goto out;
      if (done) break;
      if ((it & 1023) == 1023 && bounded(c, what, S, S, G, G)) goto out;
    }
  }
  if (ack_req) {
    for (unsigned long it = 0;; it++) {
      int done = 0, sz[1] = {0};
      if (xp_test(x, ack_req, &done, sz, 1, 1)) goto out;
      if (done) break;
      if ((it & 1023) == 1023 && bounded(c, what, S, S, G, G)) goto out;
    }
    ack_req = NULL;
  }
  *elapsed = conform_now() - t0;
  /* Outside the timed part: the last slots hold intact data (every message carries the same
   * pattern, so any slot that received one must match). */
  if (G > 0) {
    long used = G * sp->n < nslots ? G * sp->n : nslots;
    for (long m = 0; m < used; m++) {
      long long bad = conform_verify(perf_rslot(B, sp->size, m, NULL), sp->size, B->seed_peer);
      if (bad >= 0) {
        conform_fail(c, "%s: received data differs at byte %lld of %zu", what, bad, sp->size);
        goto out;
      }
    }
  }
  rc = 0;
out:
  free(sreq);
  free(rreq);
  return rc;
}

/* Ping-pong: rank 0 pings, rank 1 answers. Returns half round trips (seconds) on rank 0. */
int perf_lat_run(xp_t *x, bufs_t *B, size_t size, long iters, const char *what, double *half,
                   double *total) {
  conform_ctx_t *c = x->c;
  bool pinger = c->rank == 0;
  int tag = B->peer;
  conform_phase(c, "%s", what);
  if (conform_barrier(c)) {
    conform_fail(c, "bootstrap: %s", c->bs_error);
    return -1;
  }
  double t_start = conform_now();
  if (x->tcp) {
    for (long i = 0; i < iters; i++) {
      unsigned char *rb = perf_rslot(B, size, i & 1, NULL);
      double t = conform_now();
      if (pinger) {
        if (rawtcp_send_now(c, x->rt, B->sbuf, size) || rawtcp_recv_now(c, x->rt, rb, size)) return -1;
        if (half) half[i] = (conform_now() - t) / 2;
      } else {
        if (rawtcp_recv_now(c, x->rt, rb, size) || rawtcp_send_now(c, x->rt, B->sbuf, size)) return -1;
      }
    }
  } else {
    void *rreq = NULL;
    long posted_for = -1;
    for (long i = 0; i < iters; i++) {
      if (posted_for < i) { /* the receive for this round is posted before anything is sent */
        void *buf = perf_rslot(B, size, i & 1, NULL);
        size_t sz = size;
        for (unsigned spins = 0; !rreq; spins++) {
          if (xp_irecv(x, 1, &buf, &sz, &tag, &rreq)) return -1;
          if (!rreq && (spins & 255) == 255 && bounded(c, what, i, iters, i, iters)) return -1;
        }
        posted_for = i;
      }
      double t = conform_now();
      void *sreq = NULL;
      bool s_done = false, r_done = false;
      if (pinger) {
        for (unsigned spins = 0; !sreq; spins++) {
          if (xp_isend(x, B->sbuf, size, c->rank, &sreq)) return -1;
          if (!sreq && (spins & 255) == 255 && bounded(c, what, i, iters, i, iters)) return -1;
        }
      }
      for (unsigned long it = 0; !(s_done && r_done); it++) {
        if (!r_done) {
          int done = 0, sz[1] = {0};
          if (xp_test(x, rreq, &done, sz, 1, size)) return -1;
          if (done) {
            if ((size_t)sz[0] != size) {
              conform_fail(c, "%s: reply reported %d bytes, %zu were sent", what, sz[0], size);
              return -1;
            }
            r_done = true;
            rreq = NULL;
            if (!pinger) {
              /* Pre-post the next round's receive, then answer. */
              if (i + 1 < iters) {
                void *buf = perf_rslot(B, size, (i + 1) & 1, NULL);
                size_t s2 = size;
                for (unsigned spins = 0; !rreq; spins++) {
                  if (xp_irecv(x, 1, &buf, &s2, &tag, &rreq)) return -1;
                  if (!rreq && (spins & 255) == 255 && bounded(c, what, i, iters, i, iters)) return -1;
                }
                posted_for = i + 1;
              }
              for (unsigned spins = 0; !sreq; spins++) {
                if (xp_isend(x, B->sbuf, size, c->rank, &sreq)) return -1;
                if (!sreq && (spins & 255) == 255 && bounded(c, what, i, iters, i, iters)) return -1;
              }
            }
          }
        }
        if (!s_done && sreq) {
          int done = 0, sz = 0;
          if (xp_test(x, sreq, &done, &sz, 1, size)) return -1;
          if (done) s_done = true;
        }
        if ((it & 4095) == 4095 && bounded(c, what, i, iters, i, iters)) return -1;
      }
      if (pinger && half) half[i] = (conform_now() - t) / 2;
    }
  }
  if (total) *total = conform_now() - t_start;
  long long bad = conform_verify(perf_rslot(B, size, (iters - 1) & 1, NULL), size, B->seed_peer);
  if (bad >= 0) {
    conform_fail(c, "%s: received data differs at byte %lld of %zu", what, bad, size);
    return -1;
  }
  return 0;
}
