/* strand-socket — isend / irecv / test: the control stream and the chunk scheduler.
 *
 * Everything here runs on the proxy progress thread of the comm. The matching rule: the sender's
 * messages, in the order they were sent, each take the oldest posted receive that has an
 * unmatched entry for the message's tag (any entry when n == 1).
 *
 * CTS path: receives are announced to the sender with a CTS on the control stream; a send matches
 * a receive it knows, then sends a header naming it on the control stream (the payload too when it
 * is small) and cuts the rest into chunks, each handed to the data stream with the fewest bytes
 * queued — a slow stream gets less, never stalls the message.
 *
 * Eager path (STRAND_SOCKET_EAGER_BYTES): a small message that matches no receive the sender
 * knows goes out at once, header and payload in one write, and the receiver applies the rule
 * itself — to a posted receive, or later to the next receive posted, keeping it in a buffer
 * meanwhile. The receiver grants SK_EAGER_CREDITS such buffers and returns credits in batches.
 * After a few small messages in a row the receiver stops writing a CTS per receive (the cost that
 * made strand-socket slower than NCCL's built-in Socket at 8-64 B: two loopback writes per message
 * instead of one, docs/benchmarks/socket.md); a send that needs a receive it does not know (a large
 * message, or no credit left) asks for them with NEED_CTS, which turns CTSs back on.
 *
 * Both ends agree on every match because the sender replays the rule: a CTS carries which
 * entries eager messages had taken when it was written, and the CREDIT written with it how many
 * sender messages had been read by then; the sender applies its eager messages sent after that
 * point to the receives it learns of, in order (sender_replay). */
#include <errno.h>
#include <poll.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "sk.h"
#include "strand/log.h"
#include "strand/profiler.h"

/* ---- errors -------------------------------------------------------------------------------- */

static strand_result_t report(sk_comm_t *c, const char *call) {
  int e = atomic_load_explicit(&c->error, memory_order_acquire);
  if (e <= 0) return STRAND_SUCCESS;
  if (!c->error_reported) {
    c->error_reported = true;
    STRAND_WARN("%s on %s connection with %s (dev %s): %s", call,
                c->type == SK_COMM_SEND ? "send" : "receive", c->peer, c->dev_name, c->errmsg);
  }
  return (strand_result_t)e;
}

/* ---- control stream ------------------------------------------------------------------------ */

static bool tx_reserve(sk_comm_t *c, size_t more) {
  if (c->tx_off > 0 && c->tx_len + more > c->tx_cap) {
    memmove(c->tx, c->tx + c->tx_off, c->tx_len - c->tx_off);
    c->tx_len -= c->tx_off;
    c->tx_off = 0;
  }
  if (c->tx_len + more <= c->tx_cap) return true;
  size_t cap = c->tx_cap ? c->tx_cap : 4096;
  while (cap < c->tx_len + more) cap *= 2;
  uint8_t *p = realloc(c->tx, cap);
  if (p == NULL) {
    sk_comm_set_error(c, STRAND_SYSTEM_ERROR, "out of memory queueing %zu control bytes", more);
    return false;
  }
  c->tx = p;
  c->tx_cap = cap;
  return true;
}

static void ctrl_write_failed(sk_comm_t *c, int err) {
  sk_comm_set_error(c, sk_errno_result(err),
                    "send on the control stream failed: %s (peer process gone?)%s", strerror(err),
                    sk_errno_hint(err));
}

/* Control bytes handed to the kernel so far: by the proxy itself and by a worker (hand-off ring).
 * Bytes leave in the order they were accepted, so a request whose bytes end at ctrl_end is
 * written once this reaches ctrl_end. */
static uint64_t ctrl_written(sk_comm_t *c) {
  uint64_t w = c->tx_written;
  if (c->handoff != NULL) w += atomic_load_explicit(&c->handoff->tail, memory_order_acquire);
  return w;
}

/* Whether a worker writes this comm's control ring now (attached; after detach the proxy does). */
static bool handoff_live(const sk_comm_t *c) {
  return c->handoff != NULL && c->use_workers && c->ctrl_worker != NULL;
}

/* STRAND_SOCKET_SEND_WRITE=test, and no worker writes this comm's control stream: the hand-off
 * keeps its own behaviour (its ring takes bytes only while the proxy's queue is empty). */
static bool ctrl_defer(const sk_comm_t *c) { return c->defer_sends && !handoff_live(c); }

/* Writes the proxy's queue. Bytes in the hand-off ring were accepted before everything in the
 * queue (the ring takes bytes only while the queue is empty), so the queue waits until a worker
 * has written the ring; after detach the proxy writes the ring itself first. */
static bool ctrl_flush(sk_comm_t *c) {
  if (sk_handoff_pending(c->handoff)) {
    if (handoff_live(c)) return true;
    bool blocked = false;
    while (sk_handoff_pending(c->handoff) && !blocked) {
      sk_handoff_write(c, &blocked);
      if (c->handoff->failed) return false;
    }
    if (blocked) return true;
  }
  while (c->tx_off < c->tx_len) {
    ssize_t n = send(c->ctrl_fd, c->tx + c->tx_off, c->tx_len - c->tx_off,
                     MSG_DONTWAIT | MSG_NOSIGNAL);
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) return true;
      ctrl_write_failed(c, errno);
      return false;
    }
    c->tx_off += (size_t)n;
    c->tx_written += (uint64_t)n;
  }
  c->tx_off = c->tx_len = 0;
  return true;
}

/* Whether a control write of this size is one to hand over (STRAND_SOCKET_HANDOFF_MIN_BYTES up
 * to SK_HANDOFF_MAX): a size rule because handing over the smallest messages cost time while the
 * KiB-sized eager messages of larger all-reduces looked like they might gain, which later rounds
 * did not confirm; the measurements are in docs/benchmarks/socket.md, "Handing small control
 * writes to a spinning worker". */
static bool handoff_size(const sk_comm_t *c, size_t len) {
  return len >= c->handoff_min && len <= SK_HANDOFF_MAX;
}

/* Hand-off (sk_handoff.c): a write goes to the ring when a worker is spinning idle and its size is
 * one to hand over, or whenever the ring still holds bytes (order: nothing may overtake them).
 * Returns true when queued there. */
static bool ctrl_handoff(sk_comm_t *c, const void *hdr, size_t hl, const void *payload,
                         size_t pl) {
  if (!handoff_live(c) || c->tx_len != c->tx_off) return false;
  if (!sk_handoff_pending(c->handoff) &&
      (!handoff_size(c, hl + pl) || !sk_worker_idle_spinning(c->ctrl_worker)))
    return false;
  if (!sk_handoff_put(c->handoff, hdr, hl, payload, pl)) return false;
  c->tx_accepted += hl + pl;
  sk_worker_handoff_queued(c->ctrl_worker);
  return true;
}

/* Accepts header + payload of which the socket took the first `sent` bytes: the rest joins the
 * proxy's queue (copied, so the caller's buffers are free once this returns true). */
static bool ctrl_queue(sk_comm_t *c, const void *hdr, size_t hl, const void *payload, size_t pl,
                       size_t sent) {
  c->tx_accepted += hl + pl;
  if (sent == hl + pl) return true;
  if (!tx_reserve(c, hl + pl - sent)) return false;
  if (sent < hl) {
    memcpy(c->tx + c->tx_len, (const char *)hdr + sent, hl - sent);
    c->tx_len += hl - sent;
    sent = 0;
  } else {
    sent -= hl;
  }
  if (pl > sent) { /* a header-only message has payload NULL: memcpy from NULL is undefined */
    memcpy(c->tx + c->tx_len, (const char *)payload + sent, pl - sent);
    c->tx_len += pl - sent;
  }
  return true;
}

/* Sends header + payload now if nothing is queued ahead; queues what the socket did not take.
 * Once this returns true the caller's payload buffer is no longer needed. */
static bool ctrl_send(sk_comm_t *c, const void *hdr, size_t hl, const void *payload, size_t pl) {
  if (ctrl_handoff(c, hdr, hl, payload, pl)) return true;
  /* Deferred sends may be what is queued ahead; this message is not one of them (NEED_CTS, ERR,
   * a large send's header), so it and the queue go out now rather than at the next test(). */
  const bool write_queue = ctrl_defer(c) && c->tx_len != c->tx_off;
  size_t sent = 0;
  if (c->tx_len == c->tx_off && !sk_handoff_pending(c->handoff)) {
    struct iovec iov[2] = {{(void *)hdr, hl}, {(void *)payload, pl}};
    struct msghdr mh = {.msg_iov = iov, .msg_iovlen = pl ? 2 : 1};
    for (;;) {
      ssize_t n = sendmsg(c->ctrl_fd, &mh, MSG_DONTWAIT | MSG_NOSIGNAL);
      if (n >= 0) {
        sent = (size_t)n;
        break;
      }
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) break;
      ctrl_write_failed(c, errno);
      return false;
    }
    /* The worker slept: ask it to spin, so that the next small write is handed over. */
    if (handoff_live(c) && handoff_size(c, hl + pl)) sk_worker_want_spin(c->ctrl_worker);
  }
  c->tx_written += sent;
  if (!ctrl_queue(c, hdr, hl, payload, pl, sent)) return false;
  return write_queue ? ctrl_flush(c) : true;
}

/* The control bytes of a small send started in isend or test() (eager, or header + inline
 * payload). With STRAND_SOCKET_SEND_WRITE=test they only join the queue, and the next ctrl_flush
 * writes them (test() of a request on this comm, or the next isend, which writes its own with
 * them: consecutive small sends in one system call). The proxy thread then returns from isend
 * without waiting in the kernel's sendmsg, and can post or poll its next operation first
 * (docs/benchmarks/socket.md, the 4-rank section: isend held it 2.9-3.7 us). The request is done
 * only once the bytes were written (send_complete), so nothing is reported early. Once this
 * returns true the caller's payload buffer is no longer needed (it was copied). */
static bool ctrl_send_small(sk_comm_t *c, const void *hdr, size_t hl, const void *payload,
                            size_t pl) {
  if (ctrl_defer(c)) return ctrl_queue(c, hdr, hl, payload, pl, 0);
  return ctrl_send(c, hdr, hl, payload, pl);
}

static void protocol_error(sk_comm_t *c, const char *what) {
  sk_comm_set_error(c, STRAND_REMOTE_ERROR,
                    "protocol error on the control stream: %s; is the peer running the same "
                    "strand-socket version?", what);
}

/* Entry of a receive (n entries, tags) that a message with `tag` takes under the matching rule,
 * given which entries are taken; -1: none. */
static int rule_entry(int n, const int32_t *tags, const bool *taken, int32_t tag) {
  for (int j = 0; j < n; j++)
    if (!taken[j] && (n == 1 || tags[j] == tag)) return j;
  return -1;
}

static bool on_cts(sk_comm_t *c, const sk_cts_hdr_t *h, const sk_cts_entry_t *ent) {
  if (c->cts_tail - c->cts_head >= SK_RECV_SLOTS || h->n == 0 || h->n > SK_MAX_RECVS) {
    protocol_error(c, "too many posted receives or bad group size");
    return false;
  }
  c->need_cts_sent = false;
  __typeof__(c->cts[0]) *e = &c->cts[c->cts_tail % SK_RECV_SLOTS];
  e->seq = h->seq;
  e->slot = h->slot;
  e->n = h->n;
  e->nmatched = 0;
  bool taken[SK_MAX_RECVS];
  int32_t tags[SK_MAX_RECVS];
  for (int i = 0; i < h->n; i++) {
    taken[i] = (h->taken >> i) & 1;
    e->matched[i] = taken[i];
    e->nmatched += taken[i];
    e->size[i] = ent[i].size;
    e->tag[i] = tags[i] = ent[i].tag;
  }
  /* sender_replay: eager messages this side sent after the receiver's read point (the CREDIT
   * before this CTS) matched no receive known then; the receiver gives them the oldest receive
   * with room, and every receive known before this one had none. So they take this one's entries
   * in the order they were sent, exactly as the receiver does. */
  for (int k = 0; k < c->nunplaced && e->nmatched < e->n;) {
    int j = rule_entry(e->n, tags, taken, c->unplaced[k].tag);
    if (j < 0) {
      k++;
      continue;
    }
    taken[j] = true;
    e->matched[j] = 1;
    e->nmatched++;
    memmove(&c->unplaced[k], &c->unplaced[k + 1],
            (size_t)(c->nunplaced - k - 1) * sizeof c->unplaced[0]);
    c->nunplaced--;
  }
  if (e->nmatched < e->n) c->cts_tail++; /* a receive with nothing left to match is not kept */
  return true;
}

static bool on_credit(sk_comm_t *c, const sk_credit_msg_t *m) {
  if ((uint32_t)(m->credits - c->eager_sent) > SK_EAGER_CREDITS ||
      (uint32_t)(c->msg_count - m->msgs_read) > (uint32_t)INT32_MAX) {
    protocol_error(c, "credit message out of range");
    return false;
  }
  c->credits = m->credits;
  c->peer_eager_max = m->eager_max;
  /* Eager messages the receiver had read have found their receive there (or wait in its buffer
   * for one): a CTS written from now on says which entries they took. */
  int k = 0;
  while (k < c->nunplaced && (int32_t)(c->unplaced[k].index - m->msgs_read) < 0) k++;
  memmove(&c->unplaced[0], &c->unplaced[k], (size_t)(c->nunplaced - k) * sizeof c->unplaced[0]);
  c->nunplaced -= k;
  return true;
}

static bool on_eager_err(sk_comm_t *c, const sk_eager_err_msg_t *m) {
  sk_comm_set_error(c, STRAND_INVALID_USAGE,
                    "a %llu-byte message (tag %d) sent ahead of its receive was larger than the "
                    "receive it matched (%llu bytes); the sender and receiver disagree on sizes",
                    (unsigned long long)m->size, m->tag, (unsigned long long)m->posted);
  return true;
}

static sk_recv_slot_t *slot_for(sk_comm_t *c, uint8_t slot, uint32_t seq, uint8_t idx) {
  sk_recv_slot_t *s = slot < SK_RECV_SLOTS ? strand_pool_at(&c->slots, slot) : NULL;
  if (s == NULL || atomic_load_explicit(&s->active_seq, memory_order_relaxed) != seq + 1 ||
      idx >= s->n)
    return NULL;
  return s;
}

/* ---- eager path, receive side ---------------------------------------------------------------- */

static size_t eager_limit(const sk_comm_t *c) {
  return c->eager_max < c->peer_eager_max ? c->eager_max : c->peer_eager_max;
}

/* An entry of s was matched: a receive with nothing left to match leaves the open list. */
static void take_entry(sk_comm_t *c, sk_recv_slot_t *s, int idx) {
  s->e[idx].taken = true;
  if (++s->ntaken < s->n) return;
  uint8_t slot = (uint8_t)strand_pool_index(&c->slots, s);
  for (int k = 0; k < c->nopen; k++) {
    if (c->open_order[k] != slot) continue;
    memmove(&c->open_order[k], &c->open_order[k + 1], (size_t)(c->nopen - k - 1));
    c->nopen--;
    break;
  }
}

static int slot_rule_entry(const sk_recv_slot_t *s, int32_t tag) {
  bool taken[SK_MAX_RECVS];
  int32_t tags[SK_MAX_RECVS];
  for (int j = 0; j < s->n; j++) {
    taken[j] = s->e[j].taken;
    tags[j] = s->e[j].tag;
  }
  return rule_entry(s->n, tags, taken, tag);
}

/* An eager message lands in entry idx of s. Larger than the entry: an error here, and the sender
 * is told (it could not check: it did not know the receive). */
static void eager_deliver(sk_comm_t *c, sk_recv_slot_t *s, int idx, int32_t tag, uint64_t size,
                          const uint8_t *payload) {
  sk_recv_entry_t *e = &s->e[idx];
  take_entry(c, s, idx);
  c->eager_consumed++;
  if (size > e->posted) {
    s->failed = 1;
    sk_comm_set_error(c, STRAND_INVALID_USAGE,
                      "the peer sent a %llu-byte message to receive %u (entry %d, tag %d) that "
                      "only has room for %zu bytes; the sender and receiver disagree on sizes",
                      (unsigned long long)size, s->seq, idx, tag, e->posted);
    sk_eager_err_msg_t m = {.type = SK_MSG_EAGER_ERR, .tag = tag, .size = size,
                            .posted = e->posted};
    ctrl_send(c, &m, sizeof m, NULL, 0);
    return;
  }
  if (size) memcpy(e->data, payload, size);
  e->size = size;
  e->size_known = true;
  atomic_store_explicit(&e->bytes_done, size, memory_order_relaxed);
}

/* The receiver counts small messages in a row; after a few it stops announcing receives, and a
 * large one (or the sender's NEED_CTS) turns announcing back on. */
static void note_size(sk_comm_t *c, uint64_t size) {
  size_t lim = eager_limit(c);
  if (lim == 0 || size > lim) {
    c->small_run = 0;
    c->announce = true;
  } else if (++c->small_run >= SK_EAGER_QUIET_AFTER) {
    c->announce = false;
  }
}

static bool on_eager(sk_comm_t *c, const sk_eager_hdr_t *h, const uint8_t *payload) {
  c->msg_count++;
  c->eager_total++;
  note_size(c, h->size);
  for (int k = 0; k < c->nopen; k++) {
    sk_recv_slot_t *s = strand_pool_at(&c->slots, c->open_order[k]);
    int j = slot_rule_entry(s, h->tag);
    if (j >= 0) {
      eager_deliver(c, s, j, h->tag, h->size, payload);
      return true;
    }
  }
  /* No receive for it yet: keep a copy until one is posted (the credits bound how many). */
  if (c->nunexp >= SK_EAGER_CREDITS) {
    protocol_error(c, "more eager messages than credits granted");
    return false;
  }
  uint8_t *copy = NULL;
  if (h->size > 0 && (copy = malloc(h->size)) == NULL) {
    sk_comm_set_error(c, STRAND_SYSTEM_ERROR, "out of memory keeping a %llu-byte eager message",
                      (unsigned long long)h->size);
    return false;
  }
  if (h->size) memcpy(copy, payload, h->size);
  c->unexp[c->nunexp].tag = h->tag;
  c->unexp[c->nunexp].size = h->size;
  c->unexp[c->nunexp].data = copy;
  c->nunexp++;
  c->eager_early++;
  return true;
}

/* A receive was posted: it takes the kept eager messages the rule gives it, oldest first. */
static void match_unexpected(sk_comm_t *c, sk_recv_slot_t *s) {
  for (int k = 0; k < c->nunexp && s->ntaken < s->n;) {
    int j = slot_rule_entry(s, c->unexp[k].tag);
    if (j < 0) {
      k++;
      continue;
    }
    eager_deliver(c, s, j, c->unexp[k].tag, c->unexp[k].size, c->unexp[k].data);
    free(c->unexp[k].data);
    memmove(&c->unexp[k], &c->unexp[k + 1], (size_t)(c->nunexp - k - 1) * sizeof c->unexp[0]);
    c->nunexp--;
  }
}

/* One write: a CREDIT (read point, credits), then a CTS for every open receive not announced yet
 * (all = false: only credits). */
static bool write_credit_cts(sk_comm_t *c, bool cts) {
  uint8_t buf[sizeof(sk_credit_msg_t) +
              SK_RECV_SLOTS * (sizeof(sk_cts_hdr_t) + SK_MAX_RECVS * sizeof(sk_cts_entry_t))];
  size_t len = 0;
  if (c->eager_max > 0) {
    c->credits_granted = SK_EAGER_CREDITS + c->eager_consumed;
    sk_credit_msg_t m = {.type = SK_MSG_CREDIT, .msgs_read = c->msg_count,
                         .credits = c->credits_granted, .eager_max = (uint32_t)c->eager_max};
    memcpy(buf, &m, sizeof m);
    len = sizeof m;
  }
  for (int k = 0; cts && k < c->nopen; k++) {
    sk_recv_slot_t *s = strand_pool_at(&c->slots, c->open_order[k]);
    if (s->announced) continue;
    s->announced = true;
    c->cts_written++;
    sk_cts_hdr_t h = {.type = SK_MSG_CTS, .n = (uint8_t)s->n, .slot = c->open_order[k],
                      .seq = s->seq};
    for (int i = 0; i < s->n; i++) h.taken |= (uint8_t)(s->e[i].taken << i);
    memcpy(buf + len, &h, sizeof h);
    len += sizeof h;
    for (int i = 0; i < s->n; i++) {
      sk_cts_entry_t e = {.size = s->e[i].posted, .tag = s->e[i].tag};
      memcpy(buf + len, &e, sizeof e);
      len += sizeof e;
    }
  }
  return len == 0 || ctrl_send(c, buf, len, NULL, 0);
}

/* After reading the control stream: announce receives if the sender asked, return credits once
 * half of them are used. */
static bool recv_after_parse(sk_comm_t *c) {
  if (c->announce_now) {
    c->announce_now = false;
    return write_credit_cts(c, true);
  }
  if (c->eager_max > 0 &&
      SK_EAGER_CREDITS + c->eager_consumed - c->credits_granted >= SK_EAGER_CREDITS / 2)
    return write_credit_cts(c, false);
  return true;
}

static bool on_send(sk_comm_t *c, const sk_send_hdr_t *h, const uint8_t *payload) {
  sk_recv_slot_t *s = slot_for(c, h->slot, h->seq, h->idx);
  if (s == NULL || s->e[h->idx].taken) {
    protocol_error(c, "message header for a receive that is not posted");
    return false;
  }
  c->msg_count++;
  note_size(c, h->size);
  take_entry(c, s, h->idx);
  sk_recv_entry_t *e = &s->e[h->idx];
  if (h->size > e->posted) { /* the sender checks this; never copy past the buffer */
    protocol_error(c, "message larger than the posted receive");
    return false;
  }
  e->size = h->size;
  e->size_known = true;
  if (h->is_inline) {
    if (h->size) memcpy(e->data, payload, h->size);
    atomic_store_explicit(&e->bytes_done, h->size, memory_order_relaxed);
  }
  return true;
}

static bool on_err(sk_comm_t *c, const sk_err_msg_t *m) {
  sk_recv_slot_t *s = slot_for(c, m->slot, m->seq, m->idx);
  if (s == NULL || s->e[m->idx].taken) {
    protocol_error(c, "error report for a receive that is not posted");
    return false;
  }
  c->msg_count++;
  take_entry(c, s, m->idx);
  s->failed = 1;
  sk_comm_set_error(c, STRAND_INVALID_USAGE,
                    "the peer sent a %llu-byte message to receive %u (entry %u, tag %d) that "
                    "only has room for %llu bytes; the sender and receiver disagree on sizes",
                    (unsigned long long)m->size, m->seq, m->idx, s->e[m->idx].tag,
                    (unsigned long long)m->posted);
  return true;
}

static bool ctrl_parse(sk_comm_t *c) {
  size_t off = 0;
  bool ok = true;
  while (ok && off < c->rx_len) {
    const uint8_t *p = c->rx + off;
    size_t avail = c->rx_len - off, need;
    uint8_t type = p[0];
    if (type == SK_MSG_CTS && c->type == SK_COMM_SEND) {
      if (avail < sizeof(sk_cts_hdr_t)) break;
      sk_cts_hdr_t h;
      memcpy(&h, p, sizeof h);
      need = sizeof h + (size_t)h.n * sizeof(sk_cts_entry_t);
      if (h.n > SK_MAX_RECVS) { protocol_error(c, "bad receive group size"); return false; }
      if (avail < need) break;
      sk_cts_entry_t ent[SK_MAX_RECVS];
      memcpy(ent, p + sizeof h, (size_t)h.n * sizeof ent[0]);
      ok = on_cts(c, &h, ent);
    } else if (type == SK_MSG_SEND && c->type == SK_COMM_RECV) {
      if (avail < sizeof(sk_send_hdr_t)) break;
      sk_send_hdr_t h;
      memcpy(&h, p, sizeof h);
      need = sizeof h + (h.is_inline ? h.size : 0);
      if (h.is_inline && h.size + sizeof h > c->rx_cap) {
        protocol_error(c, "inline message larger than the control buffer");
        return false;
      }
      if (avail < need) break;
      ok = on_send(c, &h, p + sizeof h);
    } else if (type == SK_MSG_ERR && c->type == SK_COMM_RECV) {
      need = sizeof(sk_err_msg_t);
      if (avail < need) break;
      sk_err_msg_t m;
      memcpy(&m, p, sizeof m);
      ok = on_err(c, &m);
    } else if (type == SK_MSG_EAGER && c->type == SK_COMM_RECV) {
      if (avail < sizeof(sk_eager_hdr_t)) break;
      sk_eager_hdr_t h;
      memcpy(&h, p, sizeof h);
      if (h.size > c->eager_max || h.size > eager_limit(c)) {
        protocol_error(c, "eager message larger than the receiver allows");
        return false;
      }
      need = sizeof h + h.size;
      if (avail < need) break;
      ok = on_eager(c, &h, p + sizeof h);
    } else if (type == SK_MSG_HELLO && c->type == SK_COMM_RECV) {
      need = sizeof(sk_hello_msg_t);
      if (avail < need) break;
      sk_hello_msg_t m;
      memcpy(&m, p, sizeof m);
      c->peer_eager_max = m.eager_max;
    } else if (type == SK_MSG_NEED_CTS && c->type == SK_COMM_RECV) {
      need = sizeof(sk_need_cts_msg_t);
      if (avail < need) break;
      c->announce = true;
      c->small_run = 0;
      c->announce_now = true;
      c->cts_asked++;
    } else if (type == SK_MSG_CREDIT && c->type == SK_COMM_SEND) {
      need = sizeof(sk_credit_msg_t);
      if (avail < need) break;
      sk_credit_msg_t m;
      memcpy(&m, p, sizeof m);
      ok = on_credit(c, &m);
    } else if (type == SK_MSG_EAGER_ERR && c->type == SK_COMM_SEND) {
      need = sizeof(sk_eager_err_msg_t);
      if (avail < need) break;
      sk_eager_err_msg_t m;
      memcpy(&m, p, sizeof m);
      ok = on_eager_err(c, &m);
    } else {
      protocol_error(c, "unknown message type");
      return false;
    }
    off += need;
  }
  if (off > 0) {
    memmove(c->rx, c->rx + off, c->rx_len - off);
    c->rx_len -= off;
  }
  if (ok && c->type == SK_COMM_RECV) ok = recv_after_parse(c);
  return ok;
}

/* Reads whatever the control stream holds and acts on it. */
static bool ctrl_poll(sk_comm_t *c) {
  if (c->peer_closed) return true;
  for (;;) {
    ssize_t n = recv(c->ctrl_fd, c->rx + c->rx_len, c->rx_cap - c->rx_len, MSG_DONTWAIT);
    if (n == 0) {
      c->peer_closed = true;
      return ctrl_parse(c);
    }
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) return true;
      int err = errno;
      sk_comm_set_error(c, sk_errno_result(err),
                        "receive on the control stream failed: %s (peer process gone or "
                        "network down?)%s", strerror(err), sk_errno_hint(err));
      return false;
    }
    size_t space = c->rx_cap - c->rx_len;
    c->rx_len += (size_t)n;
    if (!ctrl_parse(c)) return false;
    if ((size_t)n < space) return true;
  }
}

void sk_comm_flush_ctrl(sk_comm_t *c, int timeout_ms) {
  struct timespec t0, t;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  while ((c->tx_len > c->tx_off || sk_handoff_pending(c->handoff)) &&
         atomic_load(&c->error) == 0) {
    if (!ctrl_flush(c)) return;
    if (c->tx_len == c->tx_off && !sk_handoff_pending(c->handoff)) return;
    clock_gettime(CLOCK_MONOTONIC, &t);
    long ms = (t.tv_sec - t0.tv_sec) * 1000 + (t.tv_nsec - t0.tv_nsec) / 1000000;
    if (ms >= timeout_ms) {
      uint64_t left = c->tx_accepted - ctrl_written(c);
      STRAND_WARN("close of connection with %s: %llu control bytes could not be delivered "
                  "within %d ms (peer not reading?)", c->peer, (unsigned long long)left,
                  timeout_ms);
      return;
    }
    if (handoff_live(c) && sk_handoff_pending(c->handoff)) {
      /* a worker is writing the ring: give it a moment */
      struct timespec pause = {0, 20000};
      nanosleep(&pause, NULL);
      continue;
    }
    struct pollfd pfd = {.fd = c->ctrl_fd, .events = POLLOUT};
    poll(&pfd, 1, 10);
  }
}

/* ---- data streams moved by the proxy thread (nthreads == 0) --------------------------------- */

static void proxy_move(sk_comm_t *c) {
  for (int i = 0; i < c->nstreams; i++) {
    sk_stream_t *s = c->streams[i];
    bool progress, blocked;
    if (c->type == SK_COMM_SEND) {
      /* NCCL polls test() anyway: look for zero-copy completions while some are out. */
      if (sk_stream_zc_pending(s) && !sk_stream_zc_reap(s)) continue;
      if (atomic_load_explicit(&s->head, memory_order_relaxed) !=
          atomic_load_explicit(&s->tail, memory_order_relaxed))
        sk_stream_send(s, &progress, &blocked);
    } else if (c->large_posted > 0 && !atomic_load_explicit(&s->eof, memory_order_relaxed)) {
      /* Only receives larger than inline_max can get data-stream chunks: small-message
       * latency pays no recv() per data stream. */
      sk_stream_recv(s, &progress, &blocked);
    }
  }
}

/* ---- chunk scheduler ----------------------------------------------------------------------- */

static size_t chunk_size(const sk_comm_t *c, size_t msg) {
  size_t per = (msg + (size_t)c->nstreams - 1) / (size_t)c->nstreams;
  per = (per + 4095) & ~(size_t)4095;
  if (per < c->min_chunk) per = c->min_chunk;
  if (per > SK_MAX_CHUNK) per = SK_MAX_CHUNK;
  return per;
}

/* Cuts pending sends into chunks while some stream has queue room. */
static void pump(sk_comm_t *c) {
  struct sk_worker *kick[SK_MAX_STREAMS];
  int nkick = 0;
  while (c->pend_head != NULL) {
    sk_send_req_t *r = c->pend_head;
    size_t csize = chunk_size(c, r->size);
    while (r->next_off < r->size) {
      sk_stream_t *best = NULL;
      uint64_t best_q = UINT64_MAX;
      for (int i = 0; i < c->nstreams; i++) {
        sk_stream_t *s = c->streams[i];
        uint32_t head = atomic_load_explicit(&s->head, memory_order_relaxed);
        /* A slot is free once released: zero-copy chunks hold theirs until the kernel let go. */
        if (head - atomic_load_explicit(&s->released, memory_order_acquire) >= SK_RING) continue;
        uint64_t q = atomic_load_explicit(&s->queued, memory_order_relaxed);
        if (q < best_q) {
          best_q = q;
          best = s;
        }
      }
      if (best == NULL) goto out;
      size_t len = r->size - r->next_off;
      if (len > csize) len = csize;
      uint32_t head = atomic_load_explicit(&best->head, memory_order_relaxed);
      sk_chunk_t *ch = &best->ring[head % SK_RING];
      ch->req = r;
      ch->data = r->data + r->next_off;
      ch->len = (uint32_t)len;
      ch->hdr = (sk_chunk_hdr_t){.seq = r->seq, .slot = r->slot, .idx = r->idx,
                                 .offset = (uint32_t)r->next_off, .len = (uint32_t)len};
      atomic_fetch_add_explicit(&best->queued, len, memory_order_relaxed);
      atomic_store_explicit(&best->head, head + 1, memory_order_release);
      r->next_off += len;
      if (best->worker != NULL) {
        int k = 0;
        while (k < nkick && kick[k] != best->worker) k++;
        if (k == nkick) kick[nkick++] = best->worker;
      }
    }
    c->pend_head = r->next_pending;
    if (c->pend_head == NULL) c->pend_tail = NULL;
  }
out:
  if (nkick > 0) {
    atomic_thread_fence(memory_order_seq_cst); /* pairs with the worker's sleep announcement */
    for (int k = 0; k < nkick; k++) sk_worker_kick(kick[k]);
  }
}

/* ---- comm set-up / teardown of the data-path state ------------------------------------------ */

strand_result_t sk_comm_init_data(sk_comm_t *c) {
  const sk_config_t *cfg = sk_config();
  c->inline_max = cfg->inline_max;
  c->min_chunk = cfg->min_chunk;
  c->rx_cap = c->type == SK_COMM_RECV ? 2 * (cfg->inline_max + 64) : 8192;
  if (c->rx_cap < 65536) c->rx_cap = 65536;
  c->rx = malloc(c->rx_cap);
  if (c->rx == NULL) return STRAND_SYSTEM_ERROR;
  strand_result_t rc =
      c->type == SK_COMM_SEND
          ? strand_pool_init(&c->reqs, "strand-socket send requests", sizeof(sk_send_req_t),
                             SK_SEND_REQS, 0)
          : strand_pool_init(&c->slots, "strand-socket receives", sizeof(sk_recv_slot_t),
                             SK_RECV_SLOTS, STRAND_POOL_CACHELINE_ALIGN);
  if (rc != STRAND_SUCCESS) return rc;
  if (c->type == SK_COMM_RECV) {
    for (uint32_t i = 0; i < SK_RECV_SLOTS; i++) {
      sk_recv_slot_t *s = strand_pool_at(&c->slots, i);
      memset(s, 0, sizeof *s);
      s->kind = SK_REQ_RECV;
      s->comm = c;
    }
  }
  /* Eager set-up, the first bytes either side writes: the sender says how large an eager message
   * it would send, the receiver grants its credits (it grants none when its limit is 0). Until
   * the receiver has seen small messages, it announces every receive (CTS path). */
  c->eager_max = cfg->eager_max;
  c->announce = true;
  c->defer_sends = c->type == SK_COMM_SEND && cfg->send_write_test;
  /* The hand-off ring; a worker writes it only once sk_workers_attach named one (ctrl_worker). */
  if (cfg->handoff && cfg->nthreads > 0) {
    c->handoff = aligned_alloc(64, sizeof *c->handoff);
    if (c->handoff == NULL) return STRAND_SYSTEM_ERROR;
    atomic_init(&c->handoff->head, 0);
    atomic_init(&c->handoff->tail, 0);
    c->handoff->msgs = 0;
    c->handoff->failed = false;
    c->handoff_min = cfg->handoff_min;
  }
  bool ok = true;
  if (c->type == SK_COMM_SEND) {
    sk_hello_msg_t m = {.type = SK_MSG_HELLO, .eager_max = (uint32_t)c->eager_max};
    ok = ctrl_send(c, &m, sizeof m, NULL, 0);
  } else if (c->eager_max > 0) {
    ok = write_credit_cts(c, false);
  }
  return ok ? STRAND_SUCCESS : report(c, "connection set-up");
}

void sk_comm_free(sk_comm_t *c) {
  if (c == NULL) return;
  for (int i = 0; i < c->nstreams; i++) {
    if (c->streams[i] == NULL) continue;
    if (c->streams[i]->fd >= 0) close(c->streams[i]->fd);
    free(c->streams[i]);
  }
  if (c->ctrl_fd >= 0) close(c->ctrl_fd);
  /* NCCL may close a comm with requests in flight (gin_proxy always has receives posted). */
  strand_pool_destroy_in_flight(c->type == SK_COMM_SEND ? &c->reqs : &c->slots);
  if (c->type == SK_COMM_RECV && c->eager_total > 0)
    STRAND_INFO(STRAND_SUBSYS_NET, "receive connection with %s closed: %llu eager messages, %llu "
                "of them before their receive was posted; %u messages in all, %llu CTS written, "
                "%llu asked for", c->peer, (unsigned long long)c->eager_total,
                (unsigned long long)c->eager_early, c->msg_count,
                (unsigned long long)c->cts_written, (unsigned long long)c->cts_asked);
  if (c->handoff != NULL && c->handoff->msgs > 0)
    STRAND_INFO(STRAND_SUBSYS_NET, "%s connection with %s closed: %llu control writes handed to a "
                "worker", c->type == SK_COMM_SEND ? "send" : "receive", c->peer,
                (unsigned long long)c->handoff->msgs);
  free(c->handoff);
  for (int k = 0; k < c->nunexp; k++) free(c->unexp[k].data); /* never matched: closed early */
  free(c->tx);
  free(c->rx);
  free(c);
}

/* ---- isend ---------------------------------------------------------------------------------- */

static bool match_cts(sk_comm_t *c, int tag, uint32_t *pos, int *idx) {
  for (uint32_t i = c->cts_head; i != c->cts_tail; i++) {
    __typeof__(c->cts[0]) *e = &c->cts[i % SK_RECV_SLOTS];
    if (e->nmatched == e->n) continue;
    for (int j = 0; j < e->n; j++) {
      if (!e->matched[j] && (e->n == 1 || e->tag[j] == tag)) {
        *pos = i;
        *idx = j;
        return true;
      }
    }
  }
  return false;
}

static void consume_cts(sk_comm_t *c, uint32_t pos, int idx) {
  __typeof__(c->cts[0]) *e = &c->cts[pos % SK_RECV_SLOTS];
  e->matched[idx] = 1;
  e->nmatched++;
  while (c->cts_head != c->cts_tail &&
         c->cts[c->cts_head % SK_RECV_SLOTS].nmatched == c->cts[c->cts_head % SK_RECV_SLOTS].n)
    c->cts_head++;
}

/* Profiler START of one message (strand/profiler.h: socket layout, fd = the control socket). */
static void prof_start(const sk_comm_t *c, void **event, void *parent, int op, size_t length) {
  strand_profiler_sock_descr_v1_t d = {.type = STRAND_PROFILE_SOCKET};
  d.sock.fd = c->ctrl_fd;
  d.sock.op = op;
  d.sock.length = length;
  strand_profiler_start(event, parent, STRAND_PROFILER_NET_ID_SOCK, &d);
}

/* Whether a message of this size may go without a receive known: small enough for both ends,
 * and a credit left (nunplaced stays below the credits; the check only keeps the log in bounds). */
static bool can_eager(const sk_comm_t *c, size_t size) {
  return size <= eager_limit(c) && c->credits != c->eager_sent &&
         c->nunplaced < SK_EAGER_CREDITS;
}

/* A small message that matches no receive this side knows: header and payload in one write, no
 * CTS waited for; the receiver matches it. It may match a receive the sender learns of later
 * (sender_replay in on_cts keeps both ends' view of the entries the same). */
static bool send_eager(sk_comm_t *c, sk_send_req_t *r) {
  sk_eager_hdr_t h = {.type = SK_MSG_EAGER, .tag = r->tag, .size = r->size};
  if (!ctrl_send_small(c, &h, sizeof h, r->data, r->size)) return false;
  c->unplaced[c->nunplaced].index = c->msg_count++;
  c->unplaced[c->nunplaced].tag = r->tag;
  c->nunplaced++;
  c->eager_sent++;
  r->ctrl_end = c->tx_accepted;
  r->next_off = r->size;
  atomic_store_explicit(&r->bytes_done, r->size, memory_order_relaxed);
  return true;
}

/* The CTS path: r goes to entry idx of the known receive at pos. */
static bool send_matched(sk_comm_t *c, sk_send_req_t *r, uint32_t pos, int idx) {
  __typeof__(c->cts[0]) *e = &c->cts[pos % SK_RECV_SLOTS];
  r->seq = e->seq;
  r->slot = e->slot;
  r->idx = (uint8_t)idx;
  const bool inl = r->size <= c->inline_max;
  sk_send_hdr_t h = {.type = SK_MSG_SEND, .slot = e->slot, .idx = (uint8_t)idx,
                     .is_inline = inl, .seq = e->seq, .size = r->size};
  consume_cts(c, pos, idx);
  c->msg_count++;
  /* A large message's header is written at once: its chunks are on their way already. */
  if (!(inl ? ctrl_send_small(c, &h, sizeof h, r->data, r->size)
            : ctrl_send(c, &h, sizeof h, NULL, 0)))
    return false;
  /* A request is reported done only once its header (and inline payload) left our queue: after
   * the last test() of a collective nobody may call into this comm again to flush it. */
  r->ctrl_end = c->tx_accepted;
  if (inl) {
    r->next_off = r->size;
    atomic_store_explicit(&r->bytes_done, r->size, memory_order_relaxed);
  } else {
    r->next_off = 0;
    atomic_store_explicit(&r->bytes_done, 0, memory_order_relaxed);
    if (c->pend_tail) c->pend_tail->next_pending = r;
    else c->pend_head = r;
    c->pend_tail = r;
    pump(c);
    if (!c->use_workers) proxy_move(c);
  }
  return true;
}

enum { SEND_STARTED, SEND_WAIT, SEND_FAILED, SEND_OVERSIZE };

/* Starts r if it can go now: to a receive this side knows (CTS path), else eagerly. SEND_WAIT:
 * neither (no receive known, too large or no credit for eager). SEND_OVERSIZE: it matched a
 * receive too small for it; that entry is used up and the receiver told. */
static int send_try_start(sk_comm_t *c, sk_send_req_t *r) {
  uint32_t pos;
  int idx;
  if (match_cts(c, r->tag, &pos, &idx)) {
    __typeof__(c->cts[0]) *e = &c->cts[pos % SK_RECV_SLOTS];
    if (r->size > e->size[idx]) {
      sk_err_msg_t m = {.type = SK_MSG_ERR, .slot = e->slot, .idx = (uint8_t)idx, .seq = e->seq,
                        .size = r->size, .posted = e->size[idx]};
      STRAND_WARN("isend to %s (dev %s): message of %zu bytes (tag %d) is larger than the "
                  "receive it matched (%llu bytes posted); nothing was sent, the receiver is told "
                  "too", c->peer, c->dev_name, r->size, r->tag, (unsigned long long)e->size[idx]);
      consume_cts(c, pos, idx);
      c->msg_count++; /* the ERR takes the entry at the receiver, as a message would */
      if (ctrl_send(c, &m, sizeof m, NULL, 0)) sk_comm_flush_ctrl(c, 1000);
      return SEND_OVERSIZE;
    }
    c->need_cts_sent = false;
    return send_matched(c, r, pos, idx) ? SEND_STARTED : SEND_FAILED;
  }
  if (can_eager(c, r->size)) {
    c->need_cts_sent = false;
    return send_eager(c, r) ? SEND_STARTED : SEND_FAILED;
  }
  return SEND_WAIT;
}

/* Sends that could not start when isend accepted them wait here, in order (the matching rule
 * numbers messages in send order, so nothing may overtake them). A waiting send asks the receiver
 * once to announce its receives (NEED_CTS); it is started from a later isend or test(). Accepting
 * it instead of returning a NULL request means the caller goes on to test() its receives, which
 * is where the peer's own NEED_CTS gets read (two ranks each spinning on an isend would otherwise
 * wait for each other's announcements for ever). */
static bool send_progress_waiting(sk_comm_t *c) {
  while (c->wait_head != NULL) {
    sk_send_req_t *r = c->wait_head;
    int st = send_try_start(c, r);
    if (st == SEND_WAIT) {
      if (c->peer_closed) {
        sk_comm_set_error(c, STRAND_REMOTE_ERROR,
                          "the peer closed the connection before posting a receive for a message "
                          "(tag %d, %zu bytes)", r->tag, r->size);
        return false;
      }
      if (!c->need_cts_sent) {
        sk_need_cts_msg_t m = {.type = SK_MSG_NEED_CTS};
        if (!ctrl_send(c, &m, sizeof m, NULL, 0)) return false;
        c->need_cts_sent = true;
      }
      return true;
    }
    if (st == SEND_OVERSIZE)
      sk_comm_set_error(c, STRAND_INVALID_USAGE, "a %zu-byte message (tag %d) matched a smaller "
                        "receive; the sender and receiver disagree on sizes", r->size, r->tag);
    if (st != SEND_STARTED) return false;
    r->waiting = false;
    c->wait_head = r->next_waiting;
    if (c->wait_head == NULL) c->wait_tail = NULL;
    r->next_waiting = NULL;
  }
  return true;
}

strand_result_t sk_isend(void *sendComm, void *data, size_t size, int tag, void *mhandle,
                         void *phandle, void **request) {
  (void)mhandle;
  if (request == NULL) return STRAND_INVALID_ARGUMENT;
  *request = NULL;
  sk_comm_t *c = sendComm;
  if (c == NULL || c->type != SK_COMM_SEND) {
    STRAND_WARN("isend: %p is not a strand-socket send communicator", sendComm);
    return STRAND_INVALID_ARGUMENT;
  }
  strand_result_t rc = report(c, "isend");
  if (rc != STRAND_SUCCESS) return rc;
  if (size > SK_MAX_MSG || (data == NULL && size > 0)) {
    STRAND_WARN("isend to %s: bad message (%zu bytes at %p); at most %zu bytes per message",
                c->peer, size, data, (size_t)SK_MAX_MSG);
    return STRAND_INVALID_ARGUMENT;
  }
  /* Deferred sends (STRAND_SOCKET_SEND_WRITE=test): what earlier isends or test() queued goes
   * out with this one's bytes, in one write at the end of this call. A write failure there is
   * recorded in the comm and reported by the next call on it. */
  const bool defer = ctrl_defer(c);
  if (!defer && !ctrl_flush(c)) return report(c, "isend");
  if (!c->use_workers) proxy_move(c);
  if (c->wait_head != NULL && !send_progress_waiting(c)) return report(c, "isend");
  const bool flush_after = defer && c->tx_len != c->tx_off;
  sk_send_req_t *r = strand_pool_get(&c->reqs);
  if (r == NULL) { /* all SK_SEND_REQS in flight: retry */
    if (flush_after) ctrl_flush(c);
    return STRAND_SUCCESS;
  }
  r->kind = SK_REQ_SEND;
  r->comm = c;
  r->data = data;
  r->size = size;
  r->tag = tag;
  r->waiting = false;
  r->seq = 0;
  r->slot = r->idx = 0;
  r->next_off = 0;
  atomic_store_explicit(&r->bytes_done, 0, memory_order_relaxed);
  r->next_pending = r->next_waiting = NULL;
  r->prof = NULL;
  if (strand_profiler_wanted(phandle))
    prof_start(c, &r->prof, phandle, STRAND_PROFILE_SOCK_SEND, size);
  int st = SEND_WAIT;
  if (c->wait_head == NULL) {
    /* The control stream is read only when no receive already known matches and the message
     * cannot go eagerly: NCCL's receiver posts several steps ahead, so most isends match a CTS
     * read earlier or go eager, and an empty recv() on the proxy thread is a system call on
     * every step (issue 13: the proxy-step profile showed isend taking 5-9 us where the built-in
     * Socket takes 0.1). */
    st = send_try_start(c, r);
    if (st == SEND_WAIT) {
      if (ctrl_poll(c)) st = send_try_start(c, r);
      else st = SEND_FAILED;
    }
  }
  if (st == SEND_WAIT) {
    r->waiting = true;
    if (c->wait_tail) c->wait_tail->next_waiting = r;
    else c->wait_head = r;
    c->wait_tail = r;
    if (!send_progress_waiting(c)) st = SEND_FAILED;
  }
  if (st == SEND_FAILED || st == SEND_OVERSIZE) {
    if (r->waiting) { /* still queued (the comm failed): r is the last one */
      sk_send_req_t **pp = &c->wait_head, *prev = NULL;
      while (*pp != r) {
        prev = *pp;
        pp = &(*pp)->next_waiting;
      }
      *pp = NULL;
      c->wait_tail = prev;
    }
    strand_profiler_stop(&r->prof);
    strand_pool_put(&c->reqs, r);
    return st == SEND_OVERSIZE ? STRAND_INVALID_USAGE : report(c, "isend");
  }
  if (flush_after) ctrl_flush(c);
  *request = r;
  return STRAND_SUCCESS;
}

/* ---- irecv ---------------------------------------------------------------------------------- */

strand_result_t sk_irecv(void *recvComm, int n, void **data, size_t *sizes, int *tags,
                         void **mhandles, void **phandles, void **request) {
  if (request == NULL) return STRAND_INVALID_ARGUMENT;
  /* A v9+ core may pre-store NCCL_NET_OPTIONAL_RECV_COMPLETION here (LL/LL128, n == 1): the GPU
   * polls flags in the data itself. TCP still has to land every byte, and the receive slot must
   * not be reused before that, so the request is tracked like any other; the marker is only
   * ever overwritten, never returned. */
  *request = NULL;
  sk_comm_t *c = recvComm;
  if (c == NULL || c->type != SK_COMM_RECV) {
    STRAND_WARN("irecv: %p is not a strand-socket receive communicator", recvComm);
    return STRAND_INVALID_ARGUMENT;
  }
  strand_result_t rc = report(c, "irecv");
  if (rc != STRAND_SUCCESS) return rc;
  if (n < 1 || n > SK_MAX_RECVS || data == NULL || sizes == NULL) {
    STRAND_WARN("irecv from %s: %d receives in one call (this plugin reports maxRecvs %d)",
                c->peer, n, SK_MAX_RECVS);
    return STRAND_INVALID_ARGUMENT;
  }
  for (int i = 0; i < n; i++) {
    if (sizes[i] > 0 && data[i] == NULL) {
      STRAND_WARN("irecv from %s: entry %d has %zu bytes at NULL", c->peer, i, sizes[i]);
      return STRAND_INVALID_ARGUMENT;
    }
  }
  /* Unpack mode accepts GPU registrations on receive comms; one without a device handle (host
   * mode) would have the CPU write into GPU memory. */
  if (c->unpack == NULL && sk_config()->unpack && mhandles != NULL) {
    for (int i = 0; i < n; i++) {
      if (sk_mr_type(mhandles[i]) == STRAND_PTR_CUDA) {
        STRAND_WARN("irecv from %s: GPU-memory receive on a connection accepted without an unpack "
                    "device handle; only unpack connections can receive into GPU memory", c->peer);
        return STRAND_INVALID_USAGE;
      }
    }
  }
  /* Posting needs no read of the control stream (test() reads it): one system call fewer per
   * step on the proxy thread. Queued control bytes go out first, so CTSs stay in order. */
  if (!ctrl_flush(c)) return report(c, "irecv");
  sk_recv_slot_t *s = strand_pool_get(&c->slots);
  if (s == NULL) return STRAND_SUCCESS; /* SK_RECV_SLOTS posted: retry later */
  char *landing = NULL; /* unpack mode: the bounce-arena run the payload goes to instead */
  if (c->unpack != NULL) {
    bool retry = false;
    rc = sk_unpack_post(c, s, n, sizes, mhandles, &landing, &retry);
    if (rc != STRAND_SUCCESS || retry) {
      strand_pool_put(&c->slots, s);
      return rc;
    }
  }
  int64_t slot = strand_pool_index(&c->slots, s);
  s->seq = c->next_seq++;
  s->n = n;
  s->failed = 0;
  s->ntaken = 0;
  s->announced = false;
  s->nlarge = 0;
  for (int i = 0; i < n; i++) {
    sk_recv_entry_t *e = &s->e[i];
    s->nlarge += sizes[i] > c->inline_max;
    e->data = landing != NULL ? landing : data[i];
    e->posted = sizes[i];
    e->size = 0;
    e->size_known = false;
    e->taken = false;
    e->tag = tags ? tags[i] : 0;
    atomic_store_explicit(&e->bytes_done, 0, memory_order_relaxed);
    s->prof[i] = NULL;
    if (phandles != NULL && strand_profiler_wanted(phandles[i]))
      prof_start(c, &s->prof[i], phandles[i], STRAND_PROFILE_SOCK_RECV, sizes[i]);
  }
  /* Publish the slot before the sender can learn of it: workers check active_seq (acquire). */
  atomic_store_explicit(&s->active_seq, s->seq + 1, memory_order_release);
  c->large_posted += s->nlarge;
  /* Eager messages that came before this receive take their entries now; what is left is open
   * to later messages, and announced to the sender only while the CTS path is on. */
  match_unexpected(c, s);
  if (s->ntaken < s->n) c->open_order[c->nopen++] = (uint8_t)slot;
  if (c->announce && !write_credit_cts(c, true)) {
    if (s->ntaken < s->n) c->nopen--;
    c->large_posted -= s->nlarge;
    atomic_store_explicit(&s->active_seq, 0, memory_order_relaxed);
    for (int i = 0; i < n; i++) strand_profiler_stop(&s->prof[i]);
    strand_pool_put(&c->slots, s);
    return report(c, "irecv");
  }
  *request = s;
  return STRAND_SUCCESS;
}

strand_result_t sk_iflush(void *recvComm, int n, void **data, int *sizes, void **mhandles,
                          void **request) {
  (void)recvComm;
  (void)n;
  (void)data;
  (void)sizes;
  (void)mhandles;
  /* Host memory only (ptrSupport = HOST): received bytes are visible once test() says done. */
  if (request) *request = NULL;
  return STRAND_SUCCESS;
}

/* ---- test ----------------------------------------------------------------------------------- */

static bool send_complete(const sk_send_req_t *r) {
  return !r->waiting && r->next_off == r->size && ctrl_written(r->comm) >= r->ctrl_end &&
         atomic_load_explicit(&r->bytes_done, memory_order_acquire) == r->size;
}

/* All that is left of r is in the hand-off ring, which a worker is writing: nothing the proxy
 * could do here would bring it closer, so test() answers "not yet" without a system call. */
static bool send_left_to_worker(const sk_send_req_t *r) {
  sk_comm_t *c = r->comm;
  return !r->waiting && r->next_off == r->size && c->tx_len == c->tx_off && handoff_live(c) &&
         atomic_load_explicit(&r->bytes_done, memory_order_acquire) == r->size;
}

static strand_result_t test_send(sk_send_req_t *r, int *done, int *sizes) {
  sk_comm_t *c = r->comm;
  /* Sends queued by isend (STRAND_SOCKET_SEND_WRITE=test) are written first, so a small send
   * whose bytes the socket takes completes in this same call, without reading the control
   * stream. */
  if (ctrl_defer(c) && c->tx_len != c->tx_off && !ctrl_flush(c)) return report(c, "test");
  /* A send whose header (and inline payload, or every chunk) has left is done: no system call.
   * Small messages are complete when isend returns (unless deferred), so their first test()
   * costs nothing. */
  if (send_complete(r)) {
    *done = 1;
    if (sizes) sizes[0] = (int)r->size;
    strand_profiler_stop(&r->prof);
    strand_pool_put(&c->reqs, r);
    return STRAND_SUCCESS;
  }
  if (send_left_to_worker(r)) return report(c, "test");
  if (!ctrl_flush(c) || !ctrl_poll(c)) return report(c, "test");
  if (c->wait_head != NULL && !send_progress_waiting(c)) return report(c, "test");
  /* Waiting sends just started are written now, not at the next test(). */
  if (ctrl_defer(c) && c->tx_len != c->tx_off && !ctrl_flush(c)) return report(c, "test");
  if (c->pend_head) pump(c);
  if (!c->use_workers) proxy_move(c);
  strand_result_t rc = report(c, "test");
  if (rc != STRAND_SUCCESS) return rc;
  if (send_complete(r)) {
    *done = 1;
    if (sizes) sizes[0] = (int)r->size;
    strand_profiler_stop(&r->prof);
    strand_pool_put(&c->reqs, r);
  }
  return STRAND_SUCCESS;
}

static bool all_streams_eof(sk_comm_t *c) {
  for (int i = 0; i < c->nstreams; i++)
    if (!atomic_load_explicit(&c->streams[i]->eof, memory_order_acquire)) return false;
  return true;
}

static strand_result_t test_recv(sk_recv_slot_t *s, int *done, int *sizes) {
  sk_comm_t *c = s->comm;
  if (atomic_load_explicit(&s->active_seq, memory_order_relaxed) == 0) {
    STRAND_WARN("test: receive request %p from %s is not in flight (already completed?)",
                (void *)s, c->peer);
    return STRAND_INTERNAL_ERROR;
  }
  bool complete = false, header_missing = false;
  /* A receive an earlier read already filled (eager messages often arrive several at a time, or
   * before the receive was posted) completes without a system call. */
  for (int pass = 0; pass < 2 && !complete; pass++) {
    if (pass == 1) {
      if (!ctrl_flush(c) || !ctrl_poll(c)) return report(c, "test");
      if (!c->use_workers) proxy_move(c);
    }
    strand_result_t rc = report(c, "test");
    if (rc != STRAND_SUCCESS) return rc;
    complete = true;
    header_missing = false;
    for (int i = 0; i < s->n; i++) {
      sk_recv_entry_t *e = &s->e[i];
      if (!e->size_known) {
        complete = false;
        header_missing = true;
      } else if (atomic_load_explicit(&e->bytes_done, memory_order_acquire) != e->size) {
        complete = false;
      }
    }
  }
  strand_result_t rc;
  if (!complete) {
    /* Everything the peer sent before closing has been parsed: a missing header never comes;
     * missing payload never comes once every data stream saw EOF too. */
    if (c->peer_closed && (header_missing || all_streams_eof(c))) {
      sk_comm_set_error(c, STRAND_REMOTE_ERROR,
                        "the peer closed the connection with receive %u incomplete (peer "
                        "process died or closed its send communicator early)", s->seq);
      return report(c, "test");
    }
    return STRAND_SUCCESS;
  }
  /* Unpack mode: the records and their count are visible before done is (ring publication). */
  if (c->unpack != NULL && (rc = sk_unpack_complete(c, s, s->e[0].size)) != STRAND_SUCCESS)
    return rc;
  *done = 1;
  if (sizes)
    for (int i = 0; i < s->n; i++) sizes[i] = (int)s->e[i].size;
  c->large_posted -= s->nlarge;
  for (int i = 0; i < s->n; i++) strand_profiler_stop(&s->prof[i]);
  atomic_store_explicit(&s->active_seq, 0, memory_order_release);
  strand_pool_put(&c->slots, s);
  return STRAND_SUCCESS;
}

strand_result_t sk_test(void *request, int *done, int *sizes) {
  if (request == NULL || done == NULL) return STRAND_INVALID_ARGUMENT;
  *done = 0;
  uint32_t kind;
  memcpy(&kind, request, sizeof kind);
  strand_result_t rc;
  if (kind == SK_REQ_SEND) rc = test_send(request, done, sizes);
  else if (kind == SK_REQ_RECV) rc = test_recv(request, done, sizes);
  else {
    STRAND_WARN("test: %p is not a strand-socket request", request);
    return STRAND_INVALID_ARGUMENT;
  }
  /* The core polls test() in a tight loop. When the proxy thread itself moves the data (small
   * machines, nthreads 0) and the answer is "not yet", give the CPU away for a moment: with more
   * runnable threads than cores this lets the peer process, or whoever else holds the core, run
   * instead of burning the time slice (measured: 8-byte ping-pong 1.2 ms -> 14 us on a loaded
   * 2-core box). With worker threads on a large host the yield only delays the proxy's next
   * pass over its other requests, so it is off there. */
  if (rc == STRAND_SUCCESS && !*done && sk_config()->yield) sched_yield();
  return rc;
}
