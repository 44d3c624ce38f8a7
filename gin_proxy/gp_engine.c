/* gin_proxy: the wire engine (gp_wire.h describes the messages).
 *
 * Per peer j, with everything under the collComm's lock and nothing ever waiting:
 *   - GP_RECV_SLOTS receives stay posted on the comm from j. They match in posting order, so the
 *     oldest one (rhead) always holds the next message; it is applied, then posted again. While
 *     pieces of large puts are still coming on the bulk comm (gp_bulk.c), the next message waits
 *     in its slot unless it announces another piece: nothing overtakes the bytes ahead of it.
 *   - Two outgoing queues: our own ops (fragments still to send, issue order) and the acks and get
 *     replies we owe j (the order we applied j's ops). Each is kept in order; they alternate.
 *     A message is encoded into a free send slot and handed to isend; if the net returns a NULL
 *     request (it cannot take it yet) the slot is retried first on the next pass.
 *   - Our ops wait in the `ops` FIFO until j acks them (puts) or replies (gets), in seq order.
 *   - A success ack rides on the next message to j (the `ack` field) when nothing is queued ahead
 *     of it; it goes on its own only after GP_ACK_DELAY_S. A put+signal answered by a put+signal
 *     (a ping-pong, a barrier) so costs one message each way instead of two.
 * A net error on any comm of j makes j dead: every op to it fails with STRAND_REMOTE_ERROR and the
 * collComm's sticky error is set, which queryLastError reports. */
#include <stdlib.h>
#include <string.h>

#include "gp.h"
#include "strand/net_layer.h"

/* ------------------------------------------------------------------------ requests and checks */

gp_req_t *gp_req_new(gp_comm_t *c, int kind, int peer) {
  gp_req_t *r = calloc(1, sizeof *r);
  if (!r) return NULL;
  *r = (gp_req_t){.magic = GP_REQ_MAGIC, .comm = c, .kind = kind, .peer = peer, .next_all = c->all};
  if (strand_handle_set_add(&gp_live_reqs, r) != STRAND_SUCCESS) {
    free(r);
    return NULL;
  }
  if (c->all) c->all->prev_all = r;
  c->all = r;
  return r;
}

void gp_req_free(gp_comm_t *c, gp_req_t *r) {
  if (r->prev_all)
    r->prev_all->next_all = r->next_all;
  else
    c->all = r->next_all;
  if (r->next_all) r->next_all->prev_all = r->prev_all;
  strand_handle_set_remove(&gp_live_reqs, r);
  r->magic = 0;
  free(r);
}

void gp_req_finish(gp_req_t *r, strand_result_t status) {
  if (r->done) return;
  r->done = true;
  r->status = status;
}

bool gp_in_range(const gp_mr_t *w, uint64_t off, uint64_t len) {
  return w && off <= w->size && len <= w->size - off;
}

const char *gp_signal_bad(const gp_mr_t *w, uint64_t off, uint32_t op) {
  if (!w) return "signal window not registered";
  if (op != STRAND_GIN_SIGNAL_OP_INC && op != STRAND_GIN_SIGNAL_OP_ADD) return "unknown signal op";
  if (off % 8) return "signal offset not 8-byte aligned";
  if (!gp_in_range(w, off, 8)) return "signal offset out of the window";
  return NULL;
}

/* -------------------------------------------------------------------------------- peer state */

static void gp_items_free(gp_peer_t *p) {
  for (gp_item_t *it = p->item_head, *nx; it; it = nx) {
    nx = it->next;
    free(it->data);
    free(it);
  }
  p->item_head = p->item_tail = NULL;
}

/* Everything to and from j fails from now on; the peer is gone or the stream is out of step. */
void gp_peer_fail(gp_comm_t *c, int j, strand_result_t rc, const char *what) {
  gp_peer_t *p = &c->peers[j];
  if (p->dead) return;
  p->dead = STRAND_REMOTE_ERROR;
  c->last_error = STRAND_REMOTE_ERROR;
  STRAND_WARN("gin_proxy (rank %d/%d): rank %d is unreachable: %s returned %d; every put/get to it "
              "fails from now on (check that rank %d is alive and the network between us)",
              c->rank, c->nranks, j, what, (int)rc, j);
  for (gp_req_t *r = p->ops_head; r; r = r->next_op) gp_req_finish(r, STRAND_REMOTE_ERROR);
  p->ops_head = p->ops_tail = NULL;
  p->out_head = p->out_tail = NULL;
  p->ack_owed = 0;
  gp_items_free(p);
}

/* The peer closed its collComm: not an error, but whatever we still expected from it never comes. */
static void gp_peer_closed(gp_comm_t *c, int j) {
  gp_peer_t *p = &c->peers[j];
  p->closed = true;
  STRAND_INFO(STRAND_SUBSYS_NET, "gin_proxy (rank %d/%d): rank %d closed its collComm", c->rank, c->nranks, j);
  for (gp_req_t *r = p->ops_head; r; r = r->next_op) gp_req_finish(r, STRAND_REMOTE_ERROR);
  p->ops_head = p->ops_tail = NULL;
  p->out_head = p->out_tail = NULL;
  /* the items stay: our own BYE to it may still be queued (gp_say_bye) */
}

void gp_xfer_free_all(gp_comm_t *c) {
  while (c->all) gp_req_free(c, c->all);
  for (int j = 0; c->peers && j < c->nranks; j++) gp_items_free(&c->peers[j]);
}

void gp_engine_issue(gp_comm_t *c, gp_req_t *r) {
  gp_peer_t *p = &c->peers[r->peer];
  r->seq = ++p->next_seq;
  if (p->ops_tail)
    p->ops_tail->next_op = r;
  else
    p->ops_head = r;
  p->ops_tail = r;
  if (p->out_tail)
    p->out_tail->next_out = r;
  else
    p->out_head = r;
  p->out_tail = r;
}

static void gp_item_push(gp_peer_t *p, gp_item_t *it) {
  if (p->item_tail)
    p->item_tail->next = it;
  else
    p->item_head = it;
  p->item_tail = it;
}

static void gp_push_ack(gp_comm_t *c, int j, uint64_t seq, strand_result_t status) {
  gp_item_t *it = calloc(1, sizeof *it);
  if (!it) {
    gp_peer_fail(c, j, STRAND_SYSTEM_ERROR, "allocating an ack");
    return;
  }
  *it = (gp_item_t){.type = GP_MSG_ACK, .seq = seq, .status = (uint32_t)status};
  gp_item_push(&c->peers[j], it);
}

/* An ack of seq (acks are cumulative). A success merges into an unsent success ACK at the tail of
 * the queue, or waits to ride on the next message (ack_owed); an error goes out as its own ACK,
 * after the success owed before it. */
static void gp_queue_ack(gp_comm_t *c, int j, uint64_t seq, strand_result_t status) {
  gp_peer_t *p = &c->peers[j];
  gp_item_t *t = p->item_tail;
  if (status == STRAND_SUCCESS) {
    if (t && t->type == GP_MSG_ACK && t->status == 0) {
      t->seq = seq;
    } else {
      if (!p->ack_owed) p->ack_owed_since = strand_now_s();
      p->ack_owed = seq;
    }
    return;
  }
  if (p->ack_owed) gp_push_ack(c, j, p->ack_owed, STRAND_SUCCESS);
  p->ack_owed = 0;
  gp_push_ack(c, j, seq, status);
}

/* The owed success ack goes on its own once it waited GP_ACK_DELAY_S for a message to ride on. */
static void gp_ack_flush_due(gp_comm_t *c, int j) {
  gp_peer_t *p = &c->peers[j];
  if (!p->ack_owed || strand_now_s() - p->ack_owed_since < GP_ACK_DELAY_S) return;
  gp_push_ack(c, j, p->ack_owed, STRAND_SUCCESS);
  p->ack_owed = 0;
}

/* ------------------------------------------------------------------------- target: apply ops */

/* Why a PUT fragment cannot be applied, or NULL. Checked on every fragment with the whole op's
 * range and the signal, so a bad op writes nothing (its first fragment is already refused). */
static const char *gp_put_bad(gp_comm_t *c, const gp_hdr_t *h) {
  if (h->total == 0) /* a signal-only op names no window */
    return h->flags & GP_F_SIGNAL ? gp_signal_bad(gp_win(c, h->sig_win), h->sig_off, h->sig_op) : NULL;
  gp_mr_t *w = gp_win(c, h->win);
  if (!w) return "destination window not registered here";
  if (!gp_in_range(w, h->base, h->total)) return "destination range out of the window";
  uint64_t flen = h->len + h->bulk;
  if (h->off > h->total || flen > h->total - h->off) return "fragment outside its put";
  if (h->flags & GP_F_SIGNAL) return gp_signal_bad(gp_win(c, h->sig_win), h->sig_off, h->sig_op);
  return NULL;
}

static strand_result_t gp_apply_put(gp_comm_t *c, int j, const gp_hdr_t *h, const char *payload) {
  gp_peer_t *p = &c->peers[j];
  bool bulk = h->flags & GP_F_BULK;
  if (p->rx_bad_seq != h->seq) {
    const char *why = gp_put_bad(c, h);
    if (why) {
      STRAND_WARN("gin_proxy (rank %d/%d): put #%llu from rank %d refused: %s (window %u, offset "
                  "%llu, %llu bytes); the source's test reports it", c->rank, c->nranks,
                  (unsigned long long)h->seq, j, why, h->win, (unsigned long long)h->base,
                  (unsigned long long)h->total);
      p->rx_bad_seq = h->seq;
      p->rx_bad = STRAND_INVALID_ARGUMENT;
      c->last_error = STRAND_INVALID_ARGUMENT;
    } else if (!bulk) {
      bool signal = (h->flags & GP_F_LAST) && (h->flags & GP_F_SIGNAL);
      strand_result_t rc = gp_put_signal(c, gp_win(c, h->win), h->base + h->off, payload, h->len,
                                         signal ? gp_win(c, h->sig_win) : NULL, h->sig_off, h->sig_op, h->sig_val);
      if (rc != STRAND_SUCCESS) { /* the source's test reports it (gp_copy WARNed) */
        p->rx_bad_seq = h->seq;
        p->rx_bad = rc;
      }
    }
  }
  if (bulk) { /* its bytes follow on the bulk comm; gp_bulk_op_done signals and acks */
    strand_result_t st = p->rx_bad_seq == h->seq ? p->rx_bad : STRAND_SUCCESS;
    if ((h->flags & GP_F_LAST) && p->rx_bad_seq == h->seq) p->rx_bad_seq = 0;
    return gp_bulk_recv_take(c, j, h, st);
  }
  if (!(h->flags & GP_F_LAST)) return STRAND_SUCCESS;
  if (p->rx_bad_seq == h->seq) {
    gp_queue_ack(c, j, h->seq, p->rx_bad);
    p->rx_bad_seq = 0;
  } else {
    gp_queue_ack(c, j, h->seq, STRAND_SUCCESS);
  }
  return STRAND_SUCCESS;
}

void gp_bulk_op_done(gp_comm_t *c, int j, const gp_bslot_t *s) {
  strand_result_t st = s->status;
  if (st == STRAND_SUCCESS && s->signal) {
    gp_mr_t *w = gp_win(c, s->sig_win);
    const char *why = gp_signal_bad(w, s->sig_off, s->sig_op); /* deregistered while the bytes came */
    if (why) {
      STRAND_WARN("gin_proxy (rank %d/%d): the signal of put #%llu from rank %d refused: %s",
                  c->rank, c->nranks, (unsigned long long)s->seq, j, why);
      c->last_error = st = STRAND_INVALID_ARGUMENT;
    } else {
      st = gp_signal(c, w, s->sig_off, s->sig_op, s->sig_val);
    }
  }
  gp_queue_ack(c, j, s->seq, st);
}

/* The reply's bytes are copied now, in op order: a later put from the same source must not show
 * in this get. */
static void gp_apply_get(gp_comm_t *c, int j, const gp_hdr_t *h) {
  gp_mr_t *w = gp_win(c, h->win);
  if (!gp_in_range(w, h->base, h->total)) {
    STRAND_WARN("gin_proxy (rank %d/%d): get #%llu from rank %d refused: %s (window %u, offset %llu, "
                "%llu bytes); the source's test reports it", c->rank, c->nranks,
                (unsigned long long)h->seq, j, w ? "range out of the window" : "window not registered here",
                h->win, (unsigned long long)h->base, (unsigned long long)h->total);
    c->last_error = STRAND_INVALID_ARGUMENT;
    gp_queue_ack(c, j, h->seq, STRAND_INVALID_ARGUMENT);
    return;
  }
  gp_item_t *it = calloc(1, sizeof *it);
  char *data = h->total ? malloc(h->total) : NULL;
  if (!it || (h->total && !data)) {
    free(it);
    free(data);
    gp_queue_ack(c, j, h->seq, STRAND_SYSTEM_ERROR);
    return;
  }
  strand_result_t rc = gp_copy(c, data, false, w->base + h->base, w->cuda, h->total);
  if (rc != STRAND_SUCCESS) {
    free(it);
    free(data);
    gp_queue_ack(c, j, h->seq, rc);
    return;
  }
  *it = (gp_item_t){.type = GP_MSG_REPLY, .seq = h->seq, .data = data, .total = h->total};
  gp_item_push(&c->peers[j], it);
}

/* ------------------------------------------------------------------ source: acks and replies */

/* Completes our ops to j up to seq (acks and replies are cumulative: j applies in order). */
static void gp_complete_through(gp_peer_t *p, uint64_t seq, strand_result_t status) {
  while (p->ops_head && p->ops_head->seq <= seq) {
    gp_req_t *r = p->ops_head;
    p->ops_head = r->next_op;
    if (!p->ops_head) p->ops_tail = NULL;
    r->next_op = NULL;
    gp_req_finish(r, r->seq == seq && status ? status : r->err);
  }
  if (seq > p->done_seq) p->done_seq = seq;
}

static strand_result_t gp_apply_reply(gp_comm_t *c, int j, const gp_hdr_t *h, const char *payload) {
  gp_peer_t *p = &c->peers[j];
  gp_req_t *r = p->ops_head;
  while (r && r->seq < h->seq) r = r->next_op;
  if (!r || r->seq != h->seq || r->kind != GP_OP_GET || h->off > r->size || h->len > r->size - h->off) {
    STRAND_WARN("gin_proxy (rank %d/%d): a get reply from rank %d does not match get #%llu "
                "(offset %llu, %llu bytes)", c->rank, c->nranks, j, (unsigned long long)h->seq,
                (unsigned long long)h->off, (unsigned long long)h->len);
    return STRAND_INTERNAL_ERROR;
  }
  /* local NULL: its window was deregistered meanwhile (gp_mr_cancel); the bytes have nowhere to go */
  strand_result_t rc = r->local ? gp_copy(c, r->local + h->off, r->local_cuda, payload, false, h->len)
                                : STRAND_SUCCESS;
  if (rc != STRAND_SUCCESS) r->err = rc; /* the get fails; the stream goes on */
  if (h->flags & GP_F_LAST) gp_complete_through(p, h->seq, r->err);
  return STRAND_SUCCESS;
}

static strand_result_t gp_apply_msg(gp_comm_t *c, int j, const gp_hdr_t *h, const char *payload);

/* One received message from j, `size` bytes. */
static strand_result_t gp_apply(gp_comm_t *c, int j, const char *buf, size_t size) {
  const gp_hdr_t *h = (const gp_hdr_t *)(const void *)buf;
  if (size < sizeof *h || h->magic != GP_WIRE_MAGIC || h->version != GP_WIRE_VERSION ||
      h->len != size - sizeof *h) {
    STRAND_WARN("gin_proxy (rank %d/%d): malformed message from rank %d (%zu bytes, magic 0x%x, "
                "version %u): is it running the same Strand version?", c->rank, c->nranks, j, size,
                size >= sizeof *h ? h->magic : 0, size >= sizeof *h ? h->version : 0);
    return STRAND_INTERNAL_ERROR;
  }
  const char *payload = buf + sizeof *h;
  strand_result_t rc = gp_apply_msg(c, j, h, payload);
  /* a riding ack covers ops j applied before it sent this message: after the content, so a get
   * answered by this very reply gets its bytes first */
  if (rc == STRAND_SUCCESS && h->ack && !c->peers[j].dead) gp_complete_through(&c->peers[j], h->ack, STRAND_SUCCESS);
  return rc;
}

static strand_result_t gp_apply_msg(gp_comm_t *c, int j, const gp_hdr_t *h, const char *payload) {
  switch (h->type) {
  case GP_MSG_PUT: return gp_apply_put(c, j, h, payload);
  case GP_MSG_GET: gp_apply_get(c, j, h); return STRAND_SUCCESS;
  case GP_MSG_REPLY: return gp_apply_reply(c, j, h, payload);
  case GP_MSG_ACK:
    if (h->status)
      STRAND_WARN("gin_proxy (rank %d/%d): rank %d failed our op #%llu with error %u (its WARN says why: %s)",
                  c->rank, c->nranks, j, (unsigned long long)h->seq, h->status,
                  h->status == STRAND_UNHANDLED_CUDA_ERROR ? "moving it into or out of GPU memory there failed"
                                                           : "a window or range it does not have");
    gp_complete_through(&c->peers[j], h->seq, (strand_result_t)h->status);
    return STRAND_SUCCESS;
  case GP_MSG_BYE: gp_peer_closed(c, j); return STRAND_SUCCESS;
  default:
    STRAND_WARN("gin_proxy (rank %d/%d): message of unknown type %u from rank %d", c->rank, c->nranks,
                h->type, j);
    return STRAND_INTERNAL_ERROR;
  }
}

/* ------------------------------------------------------------------------------- receiving */

static strand_result_t gp_post_peer(gp_comm_t *c, int j) {
  gp_peer_t *p = &c->peers[j];
  while (p->nposted < GP_RECV_SLOTS) {
    int s = (p->rhead + p->nposted) % GP_RECV_SLOTS;
    void *buf = p->rbuf + (size_t)s * GP_SLOT_BYTES;
    size_t sz = GP_SLOT_BYTES;
    int tag = 0;
    strand_result_t rc = c->net->irecv(p->recv, 1, &buf, &sz, &tag, &p->recv_mh, NULL, &p->rreq[s]);
    if (rc != STRAND_SUCCESS) return rc;
    if (!p->rreq[s]) break; /* the net cannot take more now: next pass */
    p->nposted++;
  }
  return STRAND_SUCCESS;
}

void gp_post_recvs(gp_comm_t *c) {
  for (int j = 0; j < c->nranks; j++) {
    if (j == c->rank) continue;
    c->peers[j].spend = -1;
    strand_result_t rc = gp_post_peer(c, j);
    if (rc != STRAND_SUCCESS) gp_peer_fail(c, j, rc, "the net's irecv");
  }
}

/* Whether the received message in slot s must wait for the bulk pieces ahead of it. */
static bool gp_held_back(const gp_peer_t *p, int s, int size) {
  if (p->br_n == 0) return false;
  const gp_hdr_t *h = (const gp_hdr_t *)(const void *)(p->rbuf + (size_t)s * GP_SLOT_BYTES);
  bool piece = (size_t)size >= sizeof *h && h->type == GP_MSG_PUT && (h->flags & GP_F_BULK);
  return !piece || !gp_bulk_recv_room(p);
}

static strand_result_t gp_recv_progress(gp_comm_t *c, int j, const char **what) {
  gp_peer_t *p = &c->peers[j];
  while (p->nposted > 0) {
    int s = p->rhead, done = 0, size = 0;
    if (!p->rheld) {
      *what = "the net's test of a receive";
      strand_result_t rc = c->net->test(p->rreq[s], &done, &size);
      if (rc != STRAND_SUCCESS) return rc;
      if (!done) break;
      p->rheld = true;
      p->rheld_size = size;
    }
    size = p->rheld_size;
    if (gp_held_back(p, s, size)) break;
    p->rheld = false;
    p->rreq[s] = NULL;
    p->rhead = (s + 1) % GP_RECV_SLOTS;
    p->nposted--;
    *what = "applying a message";
    strand_result_t rc = gp_apply(c, j, p->rbuf + (size_t)s * GP_SLOT_BYTES, (size_t)size);
    /* after a BYE nothing more comes: the receives still posted end with the peer's close */
    if (rc != STRAND_SUCCESS || p->dead || p->closed) return rc;
  }
  *what = "the net's irecv";
  return gp_post_peer(c, j);
}

/* --------------------------------------------------------------------------------- sending */

/* Encodes the next fragment of our op r into h + payload (a large put's piece goes on the bulk
 * comm instead); dequeues r after its last one. */
static strand_result_t gp_encode_op(gp_comm_t *c, gp_peer_t *p, gp_req_t *r, gp_hdr_t *h, char *payload) {
  h->seq = r->seq;
  h->win = r->win;
  h->base = r->roff;
  h->total = r->size;
  bool last = true;
  if (r->kind == GP_OP_PUT && gp_bulk_op(r)) {
    h->type = GP_MSG_PUT;
    strand_result_t rc = gp_bulk_send_take(c, p, r, h);
    if (rc != STRAND_SUCCESS) return rc;
    last = r->sent == r->size;
  } else if (r->kind == GP_OP_PUT) {
    h->type = GP_MSG_PUT;
    h->off = r->sent;
    h->len = r->size - r->sent < GP_PAYLOAD_MAX ? r->size - r->sent : GP_PAYLOAD_MAX;
    /* local NULL: the source window was deregistered under the op (gp_mr_cancel): the fragment
     * keeps the stream's framing but carries zeroes, and the op fails without its signal */
    strand_result_t rc = STRAND_SUCCESS;
    if (r->local)
      rc = gp_copy(c, payload, false, r->local + r->sent, r->local_cuda, h->len);
    else if (h->len)
      memset(payload, 0, h->len);
    if (rc != STRAND_SUCCESS && !r->err) r->err = rc; /* reported when acked; no signal for it */
    r->sent += h->len;
    last = r->sent == r->size;
  } else {
    h->type = GP_MSG_GET;
  }
  /* a put's last fragment carries its signal, unless the op already failed locally */
  if (last && r->kind == GP_OP_PUT && r->signal && !r->err) {
    h->flags |= GP_F_SIGNAL;
    h->sig_win = r->sig_win;
    h->sig_off = r->sig_off;
    h->sig_op = r->sig_op;
    h->sig_val = r->sig_val;
  }
  if (last) {
    h->flags |= GP_F_LAST;
    p->out_head = r->next_out;
    if (!p->out_head) p->out_tail = NULL;
    r->next_out = NULL;
  }
  return STRAND_SUCCESS;
}

static void gp_encode_item(gp_peer_t *p, gp_hdr_t *h, char *payload) {
  gp_item_t *it = p->item_head;
  h->type = (uint8_t)it->type;
  h->seq = it->seq;
  h->status = it->status;
  bool last = true;
  if (it->type == GP_MSG_REPLY) {
    h->off = it->off;
    h->len = it->total - it->off < GP_PAYLOAD_MAX ? it->total - it->off : GP_PAYLOAD_MAX;
    if (h->len) memcpy(payload, it->data + it->off, h->len);
    it->off += h->len;
    last = it->off == it->total;
    if (last) h->flags |= GP_F_LAST;
  }
  if (last) {
    p->item_head = it->next;
    if (!p->item_head) p->item_tail = NULL;
    free(it->data);
    free(it);
  }
}

static strand_result_t gp_post_send(gp_comm_t *c, gp_peer_t *p, int s, size_t len) {
  strand_result_t rc = c->net->isend(p->send, p->sbuf + (size_t)s * GP_SLOT_BYTES, len, 0, p->send_mh,
                                     NULL, &p->sreq[s]);
  if (rc != STRAND_SUCCESS) return rc;
  if (p->sreq[s]) {
    p->spend = -1;
  } else { /* the net cannot take it yet: this slot goes first next pass */
    p->spend = s;
    p->spend_len = len;
  }
  return STRAND_SUCCESS;
}

static strand_result_t gp_send_progress(gp_comm_t *c, int j, const char **what) {
  gp_peer_t *p = &c->peers[j];
  *what = "the net's test of a send";
  for (int s = 0; s < GP_SEND_SLOTS; s++) {
    if (!p->sreq[s]) continue;
    int done = 0, size = 0;
    strand_result_t rc = c->net->test(p->sreq[s], &done, &size);
    if (rc != STRAND_SUCCESS) return rc;
    if (done) p->sreq[s] = NULL;
  }
  *what = "the net's isend";
  if (p->spend >= 0) {
    strand_result_t rc = gp_post_send(c, p, p->spend, p->spend_len);
    if (rc != STRAND_SUCCESS || p->spend >= 0) return rc;
  }
  gp_ack_flush_due(c, j);
  for (int s = 0; s < GP_SEND_SLOTS; s++) {
    /* a large put's next piece needs a free bulk slot too */
    bool op_ready = p->out_head && (!gp_bulk_op(p->out_head) || p->bs_n < GP_BULK_SLOTS);
    if (!op_ready && !p->item_head) break;
    if (p->sreq[s]) continue;
    gp_hdr_t *h = (gp_hdr_t *)(void *)(p->sbuf + (size_t)s * GP_SLOT_BYTES);
    memset(h, 0, sizeof *h);
    h->magic = GP_WIRE_MAGIC;
    h->version = GP_WIRE_VERSION;
    bool item = p->item_head && (p->item_turn || !op_ready);
    p->item_turn = !item;
    strand_result_t rc = STRAND_SUCCESS;
    if (item)
      gp_encode_item(p, h, (char *)(h + 1));
    else
      rc = gp_encode_op(c, p, p->out_head, h, (char *)(h + 1));
    if (rc != STRAND_SUCCESS) {
      *what = "staging a large put";
      return rc;
    }
    if (p->ack_owed && !p->item_head) { /* nothing queued that it could overtake: ride */
      h->ack = p->ack_owed;
      p->ack_owed = 0;
    }
    *what = "the net's isend";
    rc = gp_post_send(c, p, s, sizeof *h + h->len);
    if (rc != STRAND_SUCCESS || p->spend >= 0) return rc;
  }
  return STRAND_SUCCESS;
}

/* One pass over peer j: pieces in flight, then messages in, then messages and pieces out. */
static strand_result_t gp_peer_progress(gp_comm_t *c, int j, const char **what) {
  gp_peer_t *p = &c->peers[j];
  strand_result_t rc = gp_bulk_progress(c, j, what);
  if (rc == STRAND_SUCCESS && !p->dead && !p->closed) rc = gp_recv_progress(c, j, what);
  if (rc == STRAND_SUCCESS && !p->dead && !p->closed) rc = gp_send_progress(c, j, what);
  if (rc == STRAND_SUCCESS && !p->dead && !p->closed && (p->bs_n || p->br_n)) rc = gp_bulk_progress(c, j, what);
  return rc;
}

void gp_progress(gp_comm_t *c) {
  for (int j = 0; j < c->nranks; j++) {
    if (j == c->rank || c->peers[j].dead || c->peers[j].closed) continue;
    const char *what = "";
    strand_result_t rc = gp_peer_progress(c, j, &what);
    if (rc != STRAND_SUCCESS) gp_peer_fail(c, j, rc, what);
  }
}

/* Bound on the goodbye. Both sides of a pair wait for each other's BYE, so neither closes a comm
 * the other still drives (a TCP-like net resets a connection closed with unread bytes, which
 * could overtake the BYE and look like a dead peer). A peer that is not closing within the bound
 * does not hold closeColl up. */
#define GP_BYE_BOUND_S 0.5

/* Whether j still needs driving for the goodbye: its BYE not heard, or ours not sent. */
static bool gp_bye_pending(gp_comm_t *c, int j) {
  gp_peer_t *p = &c->peers[j];
  const char *what = "";
  if (!p->closed && gp_bulk_progress(c, j, &what) != STRAND_SUCCESS) p->dead = STRAND_REMOTE_ERROR;
  if (!p->closed && !p->dead && gp_recv_progress(c, j, &what) != STRAND_SUCCESS) p->dead = STRAND_REMOTE_ERROR;
  if (!p->dead && gp_send_progress(c, j, &what) != STRAND_SUCCESS) p->dead = STRAND_REMOTE_ERROR;
  if (p->dead) return false; /* closing anyway: no WARN */
  bool busy = !p->closed || p->item_head || p->spend >= 0 || p->bs_n > 0;
  for (int s = 0; s < GP_SEND_SLOTS && !busy; s++) busy = p->sreq[s] != NULL;
  return busy;
}

/* Queues one BYE to every live peer (our own ops still queued are dropped: NCCL closes only
 * after its ops completed) and drives the goodbye for a bounded time. */
void gp_say_bye(gp_comm_t *c) {
  for (int j = 0; j < c->nranks; j++) {
    gp_peer_t *p = &c->peers[j];
    if (j == c->rank || p->dead) continue;
    p->out_head = p->out_tail = NULL;
    gp_item_t *it = calloc(1, sizeof *it);
    if (!it) continue;
    it->type = GP_MSG_BYE;
    gp_item_push(p, it);
  }
  double end = strand_now_s() + GP_BYE_BOUND_S;
  for (bool pending = true; pending && strand_now_s() < end;) {
    pending = false;
    for (int j = 0; j < c->nranks; j++)
      if (j != c->rank && !c->peers[j].dead && gp_bye_pending(c, j)) pending = true;
  }
}
