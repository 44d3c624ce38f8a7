/* gin_proxy: large puts on the pair's bulk comm.
 *
 * Through the control comm every byte of a put is copied twice (into a 64 KiB slot at the source,
 * out of one at the target) and each 64 KiB costs a message: about 4-5 GB/s on one proxy thread
 * where the same net moves 40 GB/s with one large send. So a put of GP_BULK_MIN bytes or more is
 * cut into GP_BULK_CHUNK pieces; each piece is announced by a control message (GP_F_BULK, no
 * payload) and its bytes travel alone on the bulk comm:
 *   - host window at the source: sent straight from the window (registered with the net on every
 *     peer's bulk comm at regMrSym); GPU window: copied into a pinned bounce buffer first
 *     (asynchronously, polled by a CUDA event), then sent from there;
 *   - host window at the target: received straight into the window (the receive is posted when
 *     the announcement is applied, so in the pair's order); GPU window: received into a bounce
 *     buffer, then copied in asynchronously.
 * GP_BULK_SLOTS pieces are in flight each way per peer, so the copy of one piece overlaps the
 * transfer of the next. The target applies nothing else from the source until the pieces ahead
 * of it are in the window (gp_engine.c holds the message), and signals and acks an op only when
 * its last piece is in: the ordering guarantees are those of the control comm.
 *
 * Both rings post to the net in ring order (a piece whose copy is not done holds back the ones
 * behind it) and retire in ring order, so the bulk comm carries pieces in announcement order. */
#include <stdlib.h>
#include <string.h>

#include "gp.h"
#include "strand/net_layer.h"

/* How long deregMrSym waits for pieces still reading or writing the window. */
#define GP_BULK_DRAIN_S 5.0

bool gp_bulk_op(const gp_req_t *r) { return r->kind == GP_OP_PUT && r->size >= GP_BULK_MIN; }

static gp_bslot_t *gp_ring_at(gp_bslot_t *ring, int head, int i) { return &ring[(head + i) % GP_BULK_SLOTS]; }

/* The slot's bounce buffer, registered on `comm`. */
static strand_result_t gp_bounce(gp_comm_t *c, void *comm, gp_bslot_t *s) {
  if (s->bounce) return STRAND_SUCCESS;
  s->bounce = gp_host_alloc(c, GP_BULK_CHUNK, &s->bounce_pinned);
  strand_result_t rc = s->bounce ? STRAND_SUCCESS : STRAND_SYSTEM_ERROR;
  if (rc == STRAND_SUCCESS && c->net->regMr)
    rc = c->net->regMr(comm, s->bounce, GP_BULK_CHUNK, STRAND_PTR_HOST, &s->bounce_mh);
  if (rc != STRAND_SUCCESS) {
    STRAND_WARN("gin_proxy (rank %d/%d): no %u-byte bounce buffer for a large put (%s returned %d)",
                c->rank, c->nranks, GP_BULK_CHUNK, s->bounce ? "the net's regMr" : "allocation", (int)rc);
    if (s->bounce) gp_host_free(s->bounce, s->bounce_pinned);
    s->bounce = NULL;
    s->bounce_mh = NULL;
  }
  return rc;
}

/* ------------------------------------------------------------------------------- source side */

strand_result_t gp_bulk_send_take(gp_comm_t *c, gp_peer_t *p, gp_req_t *r, gp_hdr_t *h) {
  gp_bslot_t *s = gp_ring_at(p->bs, p->bs_head, p->bs_n);
  size_t len = r->size - r->sent < GP_BULK_CHUNK ? r->size - r->sent : GP_BULK_CHUNK;
  char *src = r->local ? r->local + r->sent : NULL;
  s->len = len;
  if (src && !r->local_cuda) {
    s->ptr = src;
    s->mh = r->src_win->bulk_send_mh ? r->src_win->bulk_send_mh[r->peer] : NULL;
    s->state = GP_BS_WAIT_POST;
  } else {
    strand_result_t rc = gp_bounce(c, p->bsend, s);
    if (rc != STRAND_SUCCESS) return rc;
    s->ptr = s->bounce;
    s->mh = s->bounce_mh;
    if (src) {
      rc = gp_copy_async(c, s->bounce, false, src, true, len, &s->ev);
      if (rc != STRAND_SUCCESS) return rc;
      s->t_copy = strand_now_s();
      s->state = GP_BS_COPY_IN;
    } else { /* source window deregistered under the op (gp_mr_cancel): zeroes keep the framing */
      memset(s->bounce, 0, len);
      s->state = GP_BS_WAIT_POST;
    }
  }
  p->bs_n++;
  h->flags |= GP_F_BULK;
  h->off = r->sent;
  h->len = 0;
  h->bulk = len;
  r->sent += len;
  return STRAND_SUCCESS;
}

/* Whether the control message waiting for the net (spend) announces a piece. */
static bool gp_bulk_announcing(const gp_peer_t *p) {
  if (p->spend < 0) return false;
  const gp_hdr_t *h = (const gp_hdr_t *)(const void *)(p->sbuf + (size_t)p->spend * GP_SLOT_BYTES);
  return h->type == GP_MSG_PUT && (h->flags & GP_F_BULK);
}

static strand_result_t gp_bulk_send_progress(gp_comm_t *c, gp_peer_t *p, const char **what) {
  bool posted_so_far = true; /* every slot ahead of this one is with the net */
  for (int i = 0; i < p->bs_n; i++) {
    gp_bslot_t *s = gp_ring_at(p->bs, p->bs_head, i);
    strand_result_t rc = STRAND_SUCCESS;
    if (s->state == GP_BS_COPY_IN) {
      *what = "a GPU copy of a large put";
      if (!gp_event_done(c, s->ev, s->t_copy, &rc)) {
        posted_so_far = false;
        continue;
      }
      if (rc != STRAND_SUCCESS) return rc;
      s->state = GP_BS_WAIT_POST;
    }
    if (s->state == GP_BS_WAIT_POST) {
      /* not before its announcement is with the net: until the target reads it, it posts no
       * receive, and a net that needs one would only answer "not yet". Only the newest piece can
       * be unannounced (nothing is encoded while a control message waits in `spend`); holding
       * back any earlier one would deadlock: the target waits for its bytes before it takes more
       * control messages, the one waiting in `spend` included. */
      if (!posted_so_far || (i == p->bs_n - 1 && gp_bulk_announcing(p))) continue;
      *what = "the net's isend on the bulk comm";
      rc = c->net->isend(p->bsend, s->ptr, s->len, 0, s->mh, NULL, &s->req);
      if (rc != STRAND_SUCCESS) return rc;
      if (!s->req) { /* the net cannot take it yet */
        posted_so_far = false;
        continue;
      }
      s->state = GP_BS_POSTED;
    }
    if (s->state == GP_BS_POSTED) {
      int done = 0, size = 0;
      *what = "the net's test of a bulk send";
      rc = c->net->test(s->req, &done, &size);
      if (rc != STRAND_SUCCESS) return rc;
      if (done) {
        s->req = NULL;
        s->state = GP_BS_DONE;
      }
    }
  }
  while (p->bs_n > 0 && p->bs[p->bs_head].state == GP_BS_DONE) {
    p->bs[p->bs_head].state = GP_BS_FREE;
    p->bs_head = (p->bs_head + 1) % GP_BULK_SLOTS;
    p->bs_n--;
  }
  return STRAND_SUCCESS;
}

/* ------------------------------------------------------------------------------- target side */

bool gp_bulk_recv_room(const gp_peer_t *p) { return p->br_n < GP_BULK_SLOTS; }

strand_result_t gp_bulk_recv_take(gp_comm_t *c, int j, const gp_hdr_t *h, strand_result_t status) {
  gp_peer_t *p = &c->peers[j];
  if (h->bulk == 0 || h->bulk > GP_BULK_CHUNK) {
    STRAND_WARN("gin_proxy (rank %d/%d): rank %d announced a %llu-byte piece of put #%llu (1 to %u "
                "expected): is it running the same Strand version?", c->rank, c->nranks, j,
                (unsigned long long)h->bulk, (unsigned long long)h->seq, GP_BULK_CHUNK);
    return STRAND_INTERNAL_ERROR;
  }
  gp_bslot_t *s = gp_ring_at(p->br, p->br_head, p->br_n);
  s->len = h->bulk;
  s->seq = h->seq;
  s->last = h->flags & GP_F_LAST;
  s->status = status;
  s->signal = s->last && (h->flags & GP_F_SIGNAL);
  s->sig_win = h->sig_win;
  s->sig_off = h->sig_off;
  s->sig_op = h->sig_op;
  s->sig_val = h->sig_val;
  s->dst = NULL;
  s->dst_cuda = false;
  gp_mr_t *w = status == STRAND_SUCCESS ? gp_win(c, h->win) : NULL;
  if (w && !w->cuda) {
    s->ptr = w->base + h->base + h->off;
    s->mh = w->bulk_recv_mh ? w->bulk_recv_mh[j] : NULL;
  } else { /* a GPU window (copied in after), or a refused op's bytes (dropped) */
    strand_result_t rc = gp_bounce(c, p->brecv, s);
    if (rc != STRAND_SUCCESS) return rc;
    s->ptr = s->bounce;
    s->mh = s->bounce_mh;
    if (w) {
      s->dst = w->base + h->base + h->off;
      s->dst_cuda = true;
    }
  }
  s->state = GP_BS_WAIT_POST;
  p->br_n++;
  return STRAND_SUCCESS;
}

static strand_result_t gp_bulk_recv_progress(gp_comm_t *c, int j, const char **what) {
  gp_peer_t *p = &c->peers[j];
  bool posted_so_far = true;
  for (int i = 0; i < p->br_n; i++) {
    gp_bslot_t *s = gp_ring_at(p->br, p->br_head, i);
    strand_result_t rc = STRAND_SUCCESS;
    if (s->state == GP_BS_WAIT_POST) {
      if (!posted_so_far) continue;
      void *buf = s->ptr;
      size_t sz = s->len;
      int tag = 0;
      *what = "the net's irecv on the bulk comm";
      rc = c->net->irecv(p->brecv, 1, &buf, &sz, &tag, &s->mh, NULL, &s->req);
      if (rc != STRAND_SUCCESS) return rc;
      if (!s->req) {
        posted_so_far = false;
        continue;
      }
      s->state = GP_BS_POSTED;
    }
    if (s->state == GP_BS_POSTED) {
      int done = 0, size = 0;
      *what = "the net's test of a bulk receive";
      rc = c->net->test(s->req, &done, &size);
      if (rc != STRAND_SUCCESS) return rc;
      if (!done) continue;
      s->req = NULL;
      if ((size_t)size != s->len) {
        STRAND_WARN("gin_proxy (rank %d/%d): a piece of put #%llu from rank %d brought %d bytes, %zu "
                    "announced", c->rank, c->nranks, (unsigned long long)s->seq, j, size, s->len);
        *what = "a bulk receive of the wrong size";
        return STRAND_INTERNAL_ERROR;
      }
      if (s->dst) {
        *what = "a GPU copy of a large put";
        rc = gp_copy_async(c, s->dst, true, s->ptr, false, s->len, &s->ev);
        if (rc != STRAND_SUCCESS) return rc;
        s->t_copy = strand_now_s();
        s->state = GP_BS_COPY_OUT;
      } else {
        s->state = GP_BS_DONE;
      }
    }
    if (s->state == GP_BS_COPY_OUT) {
      *what = "a GPU copy of a large put";
      if (!gp_event_done(c, s->ev, s->t_copy, &rc)) continue;
      if (rc != STRAND_SUCCESS) return rc;
      s->state = GP_BS_DONE;
    }
  }
  while (p->br_n > 0 && p->br[p->br_head].state == GP_BS_DONE) {
    gp_bslot_t *s = &p->br[p->br_head];
    s->state = GP_BS_FREE;
    p->br_head = (p->br_head + 1) % GP_BULK_SLOTS;
    p->br_n--;
    if (s->last) gp_bulk_op_done(c, j, s);
  }
  return STRAND_SUCCESS;
}

strand_result_t gp_bulk_progress(gp_comm_t *c, int j, const char **what) {
  gp_peer_t *p = &c->peers[j];
  strand_result_t rc = p->br_n ? gp_bulk_recv_progress(c, j, what) : STRAND_SUCCESS;
  if (rc == STRAND_SUCCESS && p->bs_n) rc = gp_bulk_send_progress(c, p, what);
  return rc;
}

/* ------------------------------------------------------------------------------ registration */

/* Deregisters m from every peer's bulk comms still open. */
static void gp_bulk_unreg(gp_comm_t *c, gp_mr_t *m) {
  for (int j = 0; j < c->nranks && m->bulk_send_mh; j++) {
    gp_peer_t *p = &c->peers[j];
    if (m->bulk_send_mh[j] && p->bsend) c->net->deregMr(p->bsend, m->bulk_send_mh[j]);
    if (m->bulk_recv_mh[j] && p->brecv) c->net->deregMr(p->brecv, m->bulk_recv_mh[j]);
  }
  free(m->bulk_send_mh);
  free(m->bulk_recv_mh);
  m->bulk_send_mh = m->bulk_recv_mh = NULL;
}

strand_result_t gp_bulk_reg(gp_comm_t *c, gp_mr_t *m) {
  if (m->cuda || m->size < GP_BULK_MIN || !c->net->regMr) return STRAND_SUCCESS; /* not sent from */
  m->bulk_send_mh = calloc((size_t)c->nranks, sizeof(void *));
  m->bulk_recv_mh = calloc((size_t)c->nranks, sizeof(void *));
  strand_result_t rc = m->bulk_send_mh && m->bulk_recv_mh ? STRAND_SUCCESS : STRAND_SYSTEM_ERROR;
  for (int j = 0; j < c->nranks && rc == STRAND_SUCCESS; j++) {
    if (j == c->rank) continue;
    gp_peer_t *p = &c->peers[j];
    rc = c->net->regMr(p->bsend, m->base, m->size, STRAND_PTR_HOST, &m->bulk_send_mh[j]);
    if (rc == STRAND_SUCCESS) rc = c->net->regMr(p->brecv, m->base, m->size, STRAND_PTR_HOST, &m->bulk_recv_mh[j]);
    if (rc != STRAND_SUCCESS)
      STRAND_WARN("gin_proxy regMrSym(rank %d/%d): the net's regMr of a %zu-byte window on the bulk "
                  "comms of rank %d returned %d", c->rank, c->nranks, m->size, j, (int)rc);
  }
  if (rc != STRAND_SUCCESS) gp_bulk_unreg(c, m);
  return rc;
}

/* Whether a piece of peer p still reads or writes [base, base+size). */
static bool gp_bulk_uses(const gp_peer_t *p, const gp_mr_t *m) {
  const char *lo = m->base, *hi = m->base + m->size;
  for (int i = 0; i < p->bs_n; i++) {
    const gp_bslot_t *s = &p->bs[(p->bs_head + i) % GP_BULK_SLOTS];
    if (s->state != GP_BS_DONE && s->ptr >= lo && s->ptr < hi) return true;
  }
  for (int i = 0; i < p->br_n; i++) {
    const gp_bslot_t *s = &p->br[(p->br_head + i) % GP_BULK_SLOTS];
    if (s->state == GP_BS_DONE) continue;
    if ((s->ptr >= lo && s->ptr < hi) || (s->dst && s->dst >= lo && s->dst < hi)) return true;
  }
  return false;
}

/* The net may still read or write the window through a piece in flight: wait for those pieces
 * (driving everything), then forget the net's registrations. A peer whose pieces do not finish
 * in time loses its bulk comms (closing them is the only way to stop the net touching memory the
 * caller frees next) and fails. */
void gp_bulk_dereg(gp_comm_t *c, gp_mr_t *m) {
  double end = strand_now_s() + GP_BULK_DRAIN_S;
  for (bool busy = true; busy;) {
    busy = false;
    for (int j = 0; j < c->nranks && !busy; j++)
      busy = j != c->rank && !c->peers[j].dead && !c->peers[j].closed && gp_bulk_uses(&c->peers[j], m);
    if (!busy || strand_now_s() >= end) break;
    gp_progress(c);
  }
  for (int j = 0; j < c->nranks; j++) {
    gp_peer_t *p = &c->peers[j];
    if (j == c->rank || !gp_bulk_uses(p, m)) continue;
    if (!p->dead && !p->closed)
      STRAND_WARN("gin_proxy deregMrSym(rank %d/%d): large puts between us and rank %d still use "
                  "window %u after %.0f s; closing the pair's bulk comms (every op to rank %d fails)",
                  c->rank, c->nranks, j, m->id, GP_BULK_DRAIN_S, j);
    gp_peer_fail(c, j, STRAND_REMOTE_ERROR, "draining large puts at deregMrSym");
    gp_bulk_close_peer(c, j);
  }
  gp_bulk_unreg(c, m);
}

void gp_bulk_close_peer(gp_comm_t *c, int j) {
  gp_peer_t *p = &c->peers[j];
  int k = c->mesh.k;
  for (int i = 0; i < GP_BULK_SLOTS; i++) {
    if (p->bs[i].bounce_mh && p->bsend) c->net->deregMr(p->bsend, p->bs[i].bounce_mh);
    if (p->br[i].bounce_mh && p->brecv) c->net->deregMr(p->brecv, p->br[i].bounce_mh);
    p->bs[i].bounce_mh = p->br[i].bounce_mh = NULL;
    p->bs[i].state = p->br[i].state = GP_BS_FREE;
    p->bs[i].req = p->br[i].req = NULL;
  }
  p->bs_n = p->br_n = 0;
  for (uint32_t w = 0; w < c->nwins; w++) { /* the windows' registrations die with the comms */
    gp_mr_t *m = c->wins[w];
    if (m && m->bulk_send_mh) {
      if (m->bulk_send_mh[j] && p->bsend) c->net->deregMr(p->bsend, m->bulk_send_mh[j]);
      if (m->bulk_recv_mh[j] && p->brecv) c->net->deregMr(p->brecv, m->bulk_recv_mh[j]);
      m->bulk_send_mh[j] = m->bulk_recv_mh[j] = NULL;
    }
  }
  if (p->bsend) c->net->closeSend(p->bsend);
  if (p->brecv) c->net->closeRecv(p->brecv);
  p->bsend = p->brecv = NULL;
  c->mesh.send[j * k + 1] = c->mesh.recv[j * k + 1] = NULL;
}

void gp_bulk_release(gp_comm_t *c) {
  for (uint32_t w = 0; w < c->nwins; w++)
    if (c->wins[w]) gp_bulk_unreg(c, c->wins[w]);
  for (int j = 0; c->peers && j < c->nranks; j++) {
    gp_peer_t *p = &c->peers[j];
    for (int i = 0; i < GP_BULK_SLOTS; i++) {
      if (p->bs[i].bounce_mh && p->bsend) c->net->deregMr(p->bsend, p->bs[i].bounce_mh);
      if (p->br[i].bounce_mh && p->brecv) c->net->deregMr(p->brecv, p->br[i].bounce_mh);
      p->bs[i].bounce_mh = p->br[i].bounce_mh = NULL;
    }
  }
}

void gp_bulk_free(gp_comm_t *c) {
  for (int j = 0; c->peers && j < c->nranks; j++) {
    gp_peer_t *p = &c->peers[j];
    for (int i = 0; i < GP_BULK_SLOTS; i++) {
      gp_bslot_t *ss[2] = {&p->bs[i], &p->br[i]};
      for (int k = 0; k < 2; k++) {
        if (ss[k]->bounce) gp_host_free(ss[k]->bounce, ss[k]->bounce_pinned);
        gp_event_destroy(c, ss[k]->ev);
        ss[k]->bounce = NULL;
        ss[k]->ev = NULL;
      }
    }
  }
}
