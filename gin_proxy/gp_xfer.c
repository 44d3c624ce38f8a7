/* gin_proxy: the data-path calls of the RMA table (iput, iputSignal, iget, iflush, test,
 * rmaProgress, queryLastError): argument checks, operations on our own rank, requests.
 *
 * Every call succeeds with a non-NULL request or fails at once (NCCL 2.30 reads a NULL request as
 * an internal error): remote ops are queued without a cap (gp_engine.c). Local checks (our own
 * windows and offsets) fail the call; the remote range is checked by the target, whose refusal
 * comes back as the request's error from test. Ops to our own rank are done in the call: NCCL
 * issues loopback puts to flush. */
#include <stdlib.h>
#include <string.h>

#include "gp.h"

/* The context, its comm, and a valid context index and rank; NULL after a WARN otherwise. */
static gp_comm_t *gp_enter(void *rmaCtx, int context, uint32_t rank, const char *call) {
  gp_rctx_t *r = gp_rctx_get(rmaCtx, call);
  if (!r) return NULL;
  gp_comm_t *c = r->comm;
  if (context < 0 || context >= r->ncontexts || rank >= (uint32_t)c->nranks) {
    STRAND_WARN("gin_proxy %s(rank %d/%d): context %d (of %d) or target rank %u out of range", call,
                c->rank, c->nranks, context, r->ncontexts, rank);
    return NULL;
  }
  return c;
}

static strand_result_t gp_bad_local(gp_comm_t *c, const char *call, const char *what, uint64_t off,
                                    size_t size, const gp_mr_t *m, void *mh) {
  if (!m)
    STRAND_WARN("gin_proxy %s(rank %d/%d): %s handle %p is not a live window of this collComm", call,
                c->rank, c->nranks, what, mh);
  else
    STRAND_WARN("gin_proxy %s(rank %d/%d): %s range [%llu, +%zu) is outside its %zu-byte window", call,
                c->rank, c->nranks, what, (unsigned long long)off, size, m->size);
  return STRAND_INVALID_ARGUMENT;
}

/* A peer that failed or closed its collComm takes no new op. */
static bool gp_peer_gone(gp_comm_t *c, uint32_t rank, const char *call) {
  gp_peer_t *p = &c->peers[rank];
  if (!p->dead && !p->closed) return false;
  STRAND_WARN("gin_proxy %s(rank %d/%d): rank %u %s", call, c->rank, c->nranks, rank,
              p->dead ? "is unreachable (failed earlier)" : "closed its collComm");
  return true;
}

/* A request already complete with `status` (ops on our own rank). */
static strand_result_t gp_done_req(gp_comm_t *c, int kind, strand_result_t status, void **request) {
  gp_req_t *r = gp_req_new(c, kind, c->rank);
  if (!r) return STRAND_SYSTEM_ERROR;
  gp_req_finish(r, status);
  *request = r;
  return STRAND_SUCCESS;
}

typedef struct {
  uint64_t src_off, dst_off, sig_off, sig_val;
  size_t size;
  void *src_mh, *dst_mh, *sig_mh;
  uint32_t rank, sig_op;
  bool signal;
} gp_put_args_t;

/* A put to our own rank: the target's checks, then the copy and the signal. */
static strand_result_t gp_put_self(gp_comm_t *c, const gp_put_args_t *a, gp_mr_t *src, gp_mr_t *dst,
                                   gp_mr_t *sig, void **request) {
  const char *why = a->size && !gp_in_range(dst, a->dst_off, a->size) ? "destination range out of the window"
                    : a->signal ? gp_signal_bad(sig, a->sig_off, a->sig_op) : NULL;
  if (why) {
    STRAND_WARN("gin_proxy iput(rank %d/%d): put to our own rank refused: %s", c->rank, c->nranks, why);
    c->last_error = STRAND_INVALID_ARGUMENT;
    return gp_done_req(c, GP_OP_PUT, STRAND_INVALID_ARGUMENT, request);
  }
  strand_result_t rc = a->size ? gp_copy(c, dst->base + a->dst_off, dst->cuda, src->base + a->src_off, src->cuda, a->size)
                               : STRAND_SUCCESS;
  if (rc == STRAND_SUCCESS && a->signal) rc = gp_signal(c, sig, a->sig_off, a->sig_op, a->sig_val);
  return gp_done_req(c, GP_OP_PUT, rc, request);
}

static strand_result_t gp_put_locked(gp_comm_t *c, const char *call, const gp_put_args_t *a, void **request) {
  gp_mr_t *src = gp_mr_get(c, a->src_mh), *dst = gp_mr_get(c, a->dst_mh), *sig = NULL;
  /* A 0-byte put (NCCL's signal-only ops, its barriers) reads and writes no window: its handles
   * may be NULL and are not looked at. */
  if (a->size && !gp_in_range(src, a->src_off, a->size))
    return gp_bad_local(c, call, "source", a->src_off, a->size, src, a->src_mh);
  if (a->size && !dst) return gp_bad_local(c, call, "destination", a->dst_off, a->size, dst, a->dst_mh);
  if (a->signal) {
    /* the caller's own mistakes fail the call; the word's range is the target's to check */
    sig = gp_mr_get(c, a->sig_mh);
    const char *why = !sig ? "signal handle is not a live window"
                      : a->sig_off % 8 ? "signal offset not 8-byte aligned"
                      : a->sig_op != STRAND_GIN_SIGNAL_OP_INC && a->sig_op != STRAND_GIN_SIGNAL_OP_ADD
                          ? "unknown signal op" : NULL;
    if (why) {
      STRAND_WARN("gin_proxy %s(rank %d/%d): %s (offset %llu, op %u)", call, c->rank, c->nranks, why,
                  (unsigned long long)a->sig_off, a->sig_op);
      return STRAND_INVALID_ARGUMENT;
    }
  }
  if ((int)a->rank == c->rank) return gp_put_self(c, a, src, dst, sig, request);
  if (gp_peer_gone(c, a->rank, call)) return STRAND_REMOTE_ERROR;
  gp_req_t *r = gp_req_new(c, GP_OP_PUT, (int)a->rank);
  if (!r) return STRAND_SYSTEM_ERROR;
  r->local = a->size ? src->base + a->src_off : NULL;
  r->src_win = a->size ? src : NULL;
  r->local_cuda = a->size && src->cuda;
  r->size = a->size;
  r->win = a->size ? dst->id : GP_NO_WIN;
  r->roff = a->dst_off;
  if (a->signal) {
    r->signal = true;
    r->sig_win = sig->id;
    r->sig_off = a->sig_off;
    r->sig_op = a->sig_op;
    r->sig_val = a->sig_val;
  }
  gp_engine_issue(c, r);
  gp_progress(c);
  *request = r;
  return STRAND_SUCCESS;
}

static strand_result_t gp_put(void *rmaCtx, int context, const gp_put_args_t *a, const char *call, void **request) {
  if (!request) return STRAND_INVALID_ARGUMENT;
  *request = NULL;
  gp_comm_t *c = gp_enter(rmaCtx, context, a->rank, call);
  if (!c) return STRAND_INVALID_ARGUMENT;
  pthread_mutex_lock(&c->lock);
  strand_result_t rc = gp_put_locked(c, call, a, request);
  pthread_mutex_unlock(&c->lock);
  return rc;
}

strand_result_t gp_iput(void *rmaCtx, int context, uint64_t srcOff, void *srcMh, size_t size, uint64_t dstOff,
                        void *dstMh, uint32_t rank, void **request) {
  gp_put_args_t a = {.src_off = srcOff, .dst_off = dstOff, .size = size, .src_mh = srcMh, .dst_mh = dstMh,
                     .rank = rank};
  return gp_put(rmaCtx, context, &a, "iput", request);
}

/* Weak and strong signals are both strong here: the target applies a source's ops in order. */
strand_result_t gp_iput_signal(void *rmaCtx, int context, uint64_t srcOff, void *srcMh, size_t size,
                               uint64_t dstOff, void *dstMh, uint32_t rank, uint64_t signalOff, void *signalMh,
                               uint64_t signalValue, uint32_t signalOp, bool isStrongSignal, void **request) {
  (void)isStrongSignal;
  gp_put_args_t a = {.src_off = srcOff, .dst_off = dstOff, .size = size, .src_mh = srcMh, .dst_mh = dstMh,
                     .rank = rank, .signal = true, .sig_off = signalOff, .sig_mh = signalMh,
                     .sig_val = signalValue, .sig_op = signalOp};
  return gp_put(rmaCtx, context, &a, "iputSignal", request);
}

static strand_result_t gp_get_locked(gp_comm_t *c, uint64_t remoteOff, void *remoteMh, size_t size,
                                     uint64_t localOff, void *localMh, uint32_t rank, void **request) {
  gp_mr_t *local = gp_mr_get(c, localMh), *remote = gp_mr_get(c, remoteMh);
  if (!gp_in_range(local, localOff, size)) return gp_bad_local(c, "iget", "local", localOff, size, local, localMh);
  if (!remote) return gp_bad_local(c, "iget", "remote", remoteOff, size, remote, remoteMh);
  if ((int)rank == c->rank) {
    if (!gp_in_range(remote, remoteOff, size)) {
      STRAND_WARN("gin_proxy iget(rank %d/%d): get from our own rank refused: range out of the window",
                  c->rank, c->nranks);
      c->last_error = STRAND_INVALID_ARGUMENT;
      return gp_done_req(c, GP_OP_GET, STRAND_INVALID_ARGUMENT, request);
    }
    strand_result_t rc = gp_copy(c, local->base + localOff, local->cuda, remote->base + remoteOff, remote->cuda, size);
    return gp_done_req(c, GP_OP_GET, rc, request);
  }
  if (gp_peer_gone(c, rank, "iget")) return STRAND_REMOTE_ERROR;
  gp_req_t *r = gp_req_new(c, GP_OP_GET, (int)rank);
  if (!r) return STRAND_SYSTEM_ERROR;
  r->local = local->base + localOff;
  r->local_cuda = local->cuda;
  r->size = size;
  r->win = remote->id;
  r->roff = remoteOff;
  gp_engine_issue(c, r);
  gp_progress(c);
  *request = r;
  return STRAND_SUCCESS;
}

strand_result_t gp_iget(void *rmaCtx, int context, uint64_t remoteOff, void *remoteMh, size_t size,
                        uint64_t localOff, void *localMh, uint32_t rank, void **request) {
  if (!request) return STRAND_INVALID_ARGUMENT;
  *request = NULL;
  gp_comm_t *c = gp_enter(rmaCtx, context, rank, "iget");
  if (!c) return STRAND_INVALID_ARGUMENT;
  pthread_mutex_lock(&c->lock);
  strand_result_t rc = gp_get_locked(c, remoteOff, remoteMh, size, localOff, localMh, rank, request);
  pthread_mutex_unlock(&c->lock);
  return rc;
}

/* Done once every op issued before it to `rank` is complete: the peer completes ops in order, so
 * that is done_seq reaching the last seq handed out. The proxy orders a peer's ops on one stream,
 * so this covers every context (stricter than per-context, which is legal). */
strand_result_t gp_iflush(void *rmaCtx, int context, void *mhandle, uint32_t rank, void **request) {
  if (!request) return STRAND_INVALID_ARGUMENT;
  *request = NULL;
  gp_comm_t *c = gp_enter(rmaCtx, context, rank, "iflush");
  if (!c) return STRAND_INVALID_ARGUMENT;
  pthread_mutex_lock(&c->lock);
  strand_result_t rc = STRAND_SUCCESS;
  if (mhandle && !gp_mr_get(c, mhandle)) {
    rc = gp_bad_local(c, "iflush", "window", 0, 0, NULL, mhandle);
  } else if ((int)rank == c->rank) {
    rc = gp_done_req(c, GP_OP_FLUSH, STRAND_SUCCESS, request);
  } else {
    gp_req_t *r = gp_req_new(c, GP_OP_FLUSH, (int)rank);
    if (!r) {
      rc = STRAND_SYSTEM_ERROR;
    } else {
      r->seq = c->peers[rank].next_seq;
      *request = r;
      gp_progress(c);
    }
  }
  pthread_mutex_unlock(&c->lock);
  return rc;
}

strand_result_t gp_test(void *collComm, void *request, int *done) {
  if (done) *done = 0;
  gp_comm_t *c = gp_comm_get(collComm, "test");
  if (!c || !done) return STRAND_INVALID_ARGUMENT;
  pthread_mutex_lock(&c->lock);
  gp_req_t *r = request;
  if (!r || !strand_handle_set_contains(&gp_live_reqs, r) || r->comm != c) {
    pthread_mutex_unlock(&c->lock);
    STRAND_WARN("gin_proxy test(rank %d/%d): %p is not a live request of this collComm (tested "
                "again after it completed?)", c->rank, c->nranks, request);
    return STRAND_INVALID_ARGUMENT;
  }
  gp_progress(c);
  if (r->kind == GP_OP_FLUSH && !r->done) {
    gp_peer_t *p = &c->peers[r->peer];
    if (p->dead || p->closed)
      gp_req_finish(r, STRAND_REMOTE_ERROR);
    else if (p->done_seq >= r->seq)
      gp_req_finish(r, STRAND_SUCCESS);
  }
  strand_result_t rc = STRAND_SUCCESS;
  if (r->done) {
    rc = r->status;
    *done = 1;
    gp_req_free(c, r);
  }
  pthread_mutex_unlock(&c->lock);
  return rc;
}

strand_result_t gp_rma_progress(void *rmaCtx) {
  gp_rctx_t *r = gp_rctx_get(rmaCtx, "rmaProgress");
  if (!r) return STRAND_INVALID_ARGUMENT;
  pthread_mutex_lock(&r->comm->lock);
  gp_progress(r->comm);
  pthread_mutex_unlock(&r->comm->lock);
  /* errors reach NCCL through test and queryLastError, which name the failed op or peer */
  return STRAND_SUCCESS;
}

/* Drives progress too: NCCL may poll this without a progress thread. */
strand_result_t gp_query_last_error(void *rmaCtx, bool *hasError) {
  if (!hasError) return STRAND_INVALID_ARGUMENT;
  *hasError = false;
  gp_rctx_t *r = gp_rctx_get(rmaCtx, "queryLastError");
  if (!r) return STRAND_INVALID_ARGUMENT;
  pthread_mutex_lock(&r->comm->lock);
  gp_progress(r->comm);
  *hasError = r->comm->last_error != STRAND_SUCCESS;
  pthread_mutex_unlock(&r->comm->lock);
  return STRAND_SUCCESS;
}
