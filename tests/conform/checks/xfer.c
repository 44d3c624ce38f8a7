/* strand-conform — xfer.*: message sizes, integrity and the isend/irecv/test contract as NCCL's
 * proxy uses it (spec §6.4-§6.8, §6.12). Every rank sends to its ring successor and receives from
 * its predecessor at the same time, so both directions of every connection are exercised. */
#include <stdlib.h>
#include <string.h>

#include "conform.h"
#include "strand/cuda_driver.h"

/* Registered, guarded send and receive buffers reused for many transfers. */
typedef struct {
  conform_buf_t s, r;
  void *smh, *rmh;
  void *scomm, *rcomm;
} bufpair_t;

static int bufpair_open(conform_ctx_t *c, conform_link_t *l, bufpair_t *b, size_t slen, size_t rlen,
                        size_t salign, size_t ralign) {
  memset(b, 0, sizeof *b);
  b->scomm = l->send_comm;
  b->rcomm = l->recv_comm;
  if (conform_buf_alloc(&b->s, slen, salign) || conform_buf_alloc(&b->r, rlen, ralign)) {
    conform_fail(c, "out of memory for %zu/%zu-byte buffers", slen, rlen);
    return -1;
  }
  /* Register the whole records; transfers use pointers inside them (§6.3). */
  if (conform_reg(c, l->send_comm, b->s.data, slen ? slen : 1, STRAND_PTR_HOST, &b->smh)) return -1;
  if (conform_reg(c, l->recv_comm, b->r.data, rlen ? rlen : 1, STRAND_PTR_HOST, &b->rmh)) return -1;
  return 0;
}

static void bufpair_close(conform_ctx_t *c, bufpair_t *b) {
  if (b->smh) conform_dereg(c, b->scomm, b->smh);
  if (b->rmh) conform_dereg(c, b->rcomm, b->rmh);
  conform_buf_free(&b->s);
  conform_buf_free(&b->r);
}

/* One message each way: `size` bytes from s.data+soff, received into r.data+roff with a posted
 * size of `posted`. Verifies the reported size, the payload and the receive guards. */
static int xfer(conform_ctx_t *c, bufpair_t *b, size_t size, size_t soff, size_t posted, size_t roff,
                uint64_t salt) {
  unsigned char *sp = b->s.data + soff, *rp = b->r.data + roff;
  conform_fill(sp, size, conform_seed(c->rank, c->next, salt));
  memset(rp, 0, posted);
  void *sreq, *rreq, *rdata = rp;
  size_t psz = posted;
  int tag = c->prev, got = -1;
  if (conform_irecv(c, b->rcomm, 1, &rdata, &psz, &tag, &b->rmh, &rreq)) return -1;
  if (conform_isend(c, b->scomm, sp, size, c->rank, b->smh, &sreq)) return -1;
  if (conform_wait_pair(c, sreq, rreq, &got)) return -1;
  /* the peer sent the same size to us */
  if (got < 0 || (size_t)got != size) {
    conform_fail(c, "a %zu-byte message (receive posted for %zu) was reported as %d bytes", size,
                 posted, got);
    return -1;
  }
  long long bad = conform_verify(rp, size, conform_seed(c->prev, c->rank, salt));
  if (bad >= 0) {
    conform_fail(c, "a %zu-byte message from rank %d differs at byte %lld", size, c->prev, bad);
    return -1;
  }
  if (!conform_buf_guards_ok(&b->r, &bad)) {
    conform_fail(c, "a %zu-byte receive wrote outside its buffer (offset %lld)", size, bad);
    return -1;
  }
  return 0;
}

static conform_status_t sizes_run(conform_ctx_t *c, const size_t *sizes, int n, size_t maxsz) {
  conform_link_t l;
  if (conform_link_open(c, 0, &l)) return CONFORM_FAIL;
  bufpair_t b;
  if (bufpair_open(c, &l, &b, maxsz, maxsz, 0, 0) == 0) {
    for (int i = 0; i < n; i++) {
      /* receive posted exactly as large as the send, guards right after it */
      b.r.len = sizes[i];
      memset(b.r.data + sizes[i], CONFORM_GUARD_BYTE, maxsz - sizes[i] + CONFORM_GUARD_LEN);
      if (xfer(c, &b, sizes[i], 0, sizes[i], 0, 1000 + (uint64_t)i)) break;
    }
    b.r.len = maxsz;
  }
  bufpair_close(c, &b);
  conform_link_close(c, &l);
  return conform_verdict(c);
}

static conform_status_t xfer_zero_byte(conform_ctx_t *c) {
  size_t s[] = {0, 0, 0};
  return sizes_run(c, s, 3, 64);
}

static conform_status_t xfer_one_byte(conform_ctx_t *c) {
  size_t s[] = {1, 1, 1, 1};
  return sizes_run(c, s, 4, 64);
}

static conform_status_t xfer_pow2_sizes(conform_ctx_t *c) {
  size_t cap = (size_t)64 << 20;
  if (c->max_bytes < cap) cap = c->max_bytes;
  size_t sizes[128];
  int n = 0;
  sizes[n++] = 0;
  for (size_t p = 1; p <= cap; p <<= 1) {
    if (p > 2) sizes[n++] = p - 1;
    sizes[n++] = p;
    if (p + 1 <= cap) sizes[n++] = p + 1;
  }
  conform_status_t st = sizes_run(c, sizes, n, cap + 1);
  if (st == CONFORM_PASS) conform_note(c, "%d sizes up to %zu bytes", n, cap);
  return st;
}

static conform_status_t xfer_max_size(conform_ctx_t *c) {
  strand_props_v12_t p;
  if (conform_props(c, 0, &p)) return CONFORM_FAIL;
  size_t sz = (size_t)1 << 30;
  if (p.maxP2pBytes < sz) sz = p.maxP2pBytes;
  if (c->max_bytes < sz) sz = c->max_bytes;
  conform_status_t st = sizes_run(c, &sz, 1, sz);
  if (st == CONFORM_PASS)
    conform_note(c, "%zu bytes (min of maxP2pBytes %zu, 1 GiB, --max-bytes %zu)", sz, p.maxP2pBytes,
                 c->max_bytes);
  return st;
}

static conform_status_t xfer_unaligned(conform_ctx_t *c) {
  conform_link_t l;
  if (conform_link_open(c, 0, &l)) return CONFORM_FAIL;
  bufpair_t b;
  size_t big = (1 << 20) + 8192;
  static const size_t offs[] = {1, 3, 5, 7, 13, 4095, 4097};
  static const size_t sizes[] = {1, 7, 63, 4093, 65537, 1 << 20};
  if (bufpair_open(c, &l, &b, big, big, 0, 0) == 0) {
    int k = 0;
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0] && c->status != CONFORM_FAIL; i++)
      for (size_t j = 0; j < sizeof offs / sizeof offs[0]; j++, k++) {
        size_t so = offs[j], ro = offs[(j + 3) % (sizeof offs / sizeof offs[0])];
        if (so + sizes[i] > big || ro + sizes[i] > big) continue;
        if (xfer(c, &b, sizes[i], so, sizes[i], ro, 2000 + (uint64_t)k)) {
          conform_fail(c, "(send at offset %zu, receive at offset %zu inside the registration)", so, ro);
          break;
        }
      }
  }
  bufpair_close(c, &b);
  conform_link_close(c, &l);
  return conform_verdict(c);
}

/* Thousands of messages, up to 8 in flight each way (NCCL_STEPS), each with its own pattern. */
static conform_status_t xfer_ordering(conform_ctx_t *c) {
  enum { SLOTS = STRAND_NCCL_STEPS, SLOT = 8192 };
  int n = c->quick ? 1000 : 4000;
  conform_link_t l;
  if (conform_link_open(c, 0, &l)) return CONFORM_FAIL;
  bufpair_t b;
  if (bufpair_open(c, &l, &b, SLOTS * SLOT, SLOTS * SLOT, 0, 0)) goto out;
  void *sreq[SLOTS] = {0}, *rreq[SLOTS] = {0};
  int sent = 0, sdone = 0, posted = 0, rdone = 0;
  while (sdone < n || rdone < n) {
    while (posted < n && posted - rdone < SLOTS) {
      int s = posted % SLOTS;
      void *d = b.r.data + (size_t)s * SLOT;
      size_t psz = SLOT;
      int tag = c->prev;
      if (conform_irecv(c, b.rcomm, 1, &d, &psz, &tag, &b.rmh, &rreq[s])) goto out;
      posted++;
    }
    while (sent < n && sent - sdone < SLOTS) {
      int s = sent % SLOTS;
      size_t sz = (size_t)(sent * 37 % (SLOT - 1)) + 1;
      unsigned char *d = b.s.data + (size_t)s * SLOT;
      conform_fill(d, sz, conform_seed(c->rank, c->next, (uint64_t)sent));
      /* One try per pass, as a proxy thread does: a NULL request must not keep this rank from
       * testing and posting its receives, which the peer's sends may be waiting for (a plugin
       * whose small sends go ahead of the receive within a credit limit, say). Spinning here
       * while the peer spins in its own isend is a deadlock of the test, not of the plugin. */
      if (conform_try_isend(c, b.scomm, d, sz, c->rank, b.smh, &sreq[s])) goto out;
      if (sreq[s] == NULL) break;
      sent++;
    }
    /* proxy-style: test the oldest of each direction, never block on one */
    int done = 0;
    if (sdone < sent) {
      conform_phase(c, "test(isend #%d)", sdone);
      strand_result_t r = c->net->test(sreq[sdone % SLOTS], &done, NULL);
      if (r != STRAND_SUCCESS) {
        conform_fail(c, "test(isend #%d) returned %s", sdone, conform_result_str(r));
        goto out;
      }
      if (done) sdone++;
    }
    if (rdone < posted) {
      int got = -1;
      done = 0;
      conform_phase(c, "test(irecv #%d)", rdone);
      strand_result_t r = c->net->test(rreq[rdone % SLOTS], &done, &got);
      if (r != STRAND_SUCCESS) {
        conform_fail(c, "test(irecv #%d) returned %s", rdone, conform_result_str(r));
        goto out;
      }
      if (done) {
        size_t want = (size_t)(rdone * 37 % (SLOT - 1)) + 1;
        unsigned char *d = b.r.data + (size_t)(rdone % SLOTS) * SLOT;
        if ((size_t)got != want || conform_verify(d, want, conform_seed(c->prev, c->rank, (uint64_t)rdone)) >= 0) {
          /* find which message it was, to say "reordered" rather than "corrupt" */
          int which = -1;
          for (int k = rdone - 16; k < rdone + 16 && which < 0; k++) {
            if (k < 0 || k >= n) continue;
            size_t ks = (size_t)(k * 37 % (SLOT - 1)) + 1;
            if ((size_t)got == ks && conform_verify(d, ks, conform_seed(c->prev, c->rank, (uint64_t)k)) < 0)
              which = k;
          }
          if (which >= 0)
            conform_fail(c, "receive #%d got message #%d: messages on one comm must match receives "
                         "in posting order", rdone, which);
          else
            conform_fail(c, "receive #%d: size %d (expected %zu) or payload wrong", rdone, got, want);
          goto out;
        }
        rdone++;
      }
    }
    if (conform_remaining(c) < 0.5) {
      conform_fail(c, "only %d of %d messages sent and %d received before the time bound", sdone, n,
                   rdone);
      goto out;
    }
    if (conform_peer_failed(c)) {
      conform_fail(c, "%s", c->bs_error);
      goto out;
    }
  }
  conform_note(c, "%d messages each way, in order", n);
out:
  bufpair_close(c, &b);
  conform_link_close(c, &l);
  return conform_verdict(c);
}

static conform_status_t xfer_recv_larger(conform_ctx_t *c) {
  conform_link_t l;
  if (conform_link_open(c, 0, &l)) return CONFORM_FAIL;
  bufpair_t b;
  static const size_t pairs[][2] = {{1000, 4096}, {1, 65536}, {0, 1024}, {70000, 1 << 20}};
  if (bufpair_open(c, &l, &b, 1 << 20, 1 << 20, 0, 0) == 0)
    for (size_t i = 0; i < sizeof pairs / sizeof pairs[0]; i++)
      if (xfer(c, &b, pairs[i][0], 0, pairs[i][1], 0, 3000 + i)) break;
  bufpair_close(c, &b);
  conform_link_close(c, &l);
  return conform_verdict(c);
}

/* After an oversized send the sender reported done while its receiver failed (issue 23): the
 * sender's next operations on that comm must fail within `bound` seconds. NCCL stops a rank on
 * the first error any call gives it, so the receiver stopping is not enough: a sender told
 * "done" goes on, and an operation it starts next must not pretend the comm is healthy. Each rank
 * sends 1-byte messages on its sendComm when `need` (its send completed, its receiver failed);
 * every rank meanwhile keeps a 1-byte receive posted on its recvComm and tests it, so that a
 * plugin whose provider only moves while it is called (manual progress) can deliver its notice:
 * the clause holds while both sides keep calling, as NCCL's proxies do until they see an error.
 * Rounds of 50 ms end with an allgather, so no rank runs longer than the slowest needs.
 * Returns -1 on a bootstrap failure (recorded), else 0 with *learnt: 1 error seen, 0 not within
 * the bound; *later: the later sends reported done before that, *pending_only: no later send
 * was ever accepted or completed (NULL requests or pending tests only). */
static int sender_learns(conform_ctx_t *c, bufpair_t *b, bool need, double bound, int *learnt,
                         int *later, int *pending_only) {
  void *sreq = NULL, *rreq = NULL, *rdata = b->r.data;
  size_t psz = 1;
  int tag = c->prev;
  bool recv_dead = false, moved = false;
  strand_result_t r;
  *learnt = need ? 0 : 1;
  *later = 0;
  const double until = conform_now() + bound;
  for (;;) {
    const double round_end = conform_now() + 0.05;
    while (conform_now() < round_end) {
      if (!*learnt) {
        int done = 0;
        if (!sreq) {
          conform_phase(c, "isend(1 byte) after the oversized send");
          r = c->net->isend(b->scomm, b->s.data, 1, c->rank, b->smh, NULL, &sreq);
          if (r != STRAND_SUCCESS) *learnt = 1;
        } else {
          conform_phase(c, "test(1-byte isend after the oversized send)");
          r = c->net->test(sreq, &done, NULL);
          if (r != STRAND_SUCCESS) *learnt = 1, sreq = NULL;
          else if (done) (*later)++, moved = true, sreq = NULL;
        }
        if (sreq) moved = true;
      }
      if (!recv_dead) {
        int done = 0;
        if (!rreq) {
          conform_phase(c, "irecv(1 byte) after the undersized irecv");
          r = c->net->irecv(b->rcomm, 1, &rdata, &psz, &tag, &b->rmh, NULL, &rreq);
          if (r != STRAND_SUCCESS) recv_dead = true;
        } else {
          conform_phase(c, "test(1-byte irecv after the undersized irecv)");
          r = c->net->test(rreq, &done, NULL);
          if (r != STRAND_SUCCESS || done) rreq = NULL;
          if (r != STRAND_SUCCESS) recv_dead = true;
        }
      }
      if (*learnt && recv_dead) break;
    }
    int32_t mine = *learnt || conform_now() > until, all[CONFORM_MAX_RANKS];
    if (conform_allgather(c, &mine, sizeof mine, all)) {
      conform_fail(c, "%s", c->bs_error);
      return -1;
    }
    int n = 0;
    for (int k = 0; k < c->nranks; k++) n += all[k] != 0;
    if (n == c->nranks) break;
  }
  *pending_only = !moved;
  return 0;
}

/* A send larger than the posted receive: an error on BOTH sides within the bound; never both
 * sides "fine" with a truncated message; never a write past the receive buffer. The sender's
 * error may come from the oversized send's own test, or — where its data left before the receiver
 * could object (eager protocols) — from its next operations on that comm (sender_learns). Only
 * rank 0 sends too much (every other rank sends what its receiver posted): the sender must learn
 * from its receiver, not from an overrun of its own receive. Receives of fitting messages are not
 * judged beyond their guard bytes (a transport may drop the pair's connection on the overrun). */
static conform_status_t xfer_send_larger(conform_ctx_t *c) {
  enum { SEND = 8192, POSTED = 1024 };
  conform_link_t l;
  if (conform_link_open(c, 0, &l)) return CONFORM_FAIL;
  bufpair_t b;
  if (bufpair_open(c, &l, &b, SEND, POSTED, 0, 0)) goto out;
  const int my_size = c->rank == 0 ? SEND : POSTED;
  conform_fill(b.s.data, SEND, conform_seed(c->rank, c->next, 4000));
  void *sreq = NULL, *rreq = NULL, *rdata = b.r.data;
  size_t psz = POSTED;
  int tag = c->prev;
  /* states: 0 pending, 1 done, 2 error */
  struct { int32_t send_state, recv_state, recv_size, guards_ok; } me = {0, 0, -1, 1}, all[CONFORM_MAX_RANKS];
  strand_result_t r;
  conform_phase(c, "irecv(%d bytes posted)", POSTED);
  do r = c->net->irecv(b.rcomm, 1, &rdata, &psz, &tag, &b.rmh, NULL, &rreq);
  while (r == STRAND_SUCCESS && !rreq && conform_remaining(c) > 5);
  if (r != STRAND_SUCCESS) me.recv_state = 2;
  conform_phase(c, "isend(%d bytes)", my_size);
  do r = c->net->isend(b.scomm, b.s.data, (size_t)my_size, c->rank, b.smh, NULL, &sreq);
  while (r == STRAND_SUCCESS && !sreq && conform_remaining(c) > 5);
  if (r != STRAND_SUCCESS) me.send_state = 2;
  const double bound = 5.0 * c->timeout_scale;
  double until = conform_now() + bound;
  if (until > c->deadline - 3) until = c->deadline - 3;
  while ((me.send_state == 0 && sreq) || (me.recv_state == 0 && rreq)) {
    int done = 0;
    if (me.send_state == 0 && sreq) {
      conform_phase(c, "test(oversized isend)");
      r = c->net->test(sreq, &done, NULL);
      if (r != STRAND_SUCCESS) me.send_state = 2;
      else if (done) me.send_state = 1;
    }
    if (me.recv_state == 0 && rreq) {
      int got = -1;
      done = 0;
      conform_phase(c, "test(undersized irecv)");
      r = c->net->test(rreq, &done, &got);
      if (r != STRAND_SUCCESS) me.recv_state = 2;
      else if (done) me.recv_state = 1, me.recv_size = got;
    }
    if (conform_now() > until) break;
  }
  long long bad;
  me.guards_ok = conform_buf_guards_ok(&b.r, &bad);
  if (conform_allgather(c, &me, sizeof me, all)) {
    conform_fail(c, "%s", c->bs_error);
    goto out;
  }
  /* judge the connection prev -> me: its sender is rank prev, its receiver is me */
  static const char *const nm[] = {"still pending", "completed", "failed"};
  int ss = all[c->prev].send_state, rs = me.recv_state;
  if (!me.guards_ok)
    conform_fail(c, "the %d-byte send into a %d-byte receive wrote past the receive buffer "
                 "(offset %lld): memory corruption", SEND, POSTED, bad);
  else if (c->prev != 0)
    ; /* a fitting message: see above */
  else if (ss != 2 && rs != 2)
    conform_fail(c, "a %d-byte send into a %d-byte receive: sender %s, receiver %s%s%d bytes; "
                 "neither side reported an error within %.0f s (a silent short copy or a hang)",
                 SEND, POSTED, nm[ss], nm[rs], rs == 1 ? " reporting " : " after ",
                 rs == 1 ? me.recv_size : 0, bound);
  else if (rs != 2)
    conform_fail(c, "a %d-byte send into a %d-byte receive: the sender failed but the receive %s "
                 "(%d bytes): the receiving side must report the error too", SEND, POSTED,
                 rs == 1 ? "completed" : "stayed pending", rs == 1 ? me.recv_size : 0);
  /* judge the connection me -> next from the sender's side (every rank takes part in the rounds,
   * whatever its verdict so far) */
  {
    bool need = c->rank == 0 && me.send_state == 1 && all[c->next].recv_state == 2;
    int learnt = 1, later = 0, pending_only = 0;
    if (sender_learns(c, &b, need, c->stale_bound, &learnt, &later, &pending_only)) goto out;
    if (c->status == CONFORM_FAIL)
      ;
    else if (!learnt)
      conform_fail(c, "a %d-byte send into a %d-byte receive: the receiver failed, but the sender "
                   "reported the send done and %s within %.0f s (--stale-bound; %d later 1-byte "
                   "send(s) reported done): a sender must learn of it on the send's own test or "
                   "on its next operations on that comm",
                   SEND, POSTED, pending_only ? "its next operations stayed pending without an "
                   "error" : "its next operations on the comm kept succeeding", c->stale_bound, later);
    else if (need)
      conform_note(c, "sender completed, then its comm failed after %d later send(s); receiver "
                   "failed", later);
    else if (c->prev == 0)
      conform_note(c, "sender %s, receiver %s", nm[ss], nm[rs]);
  }
  /* the comms may be broken now: release them without insisting on success */
  b.smh = b.rmh = NULL;
out:
  bufpair_close(c, &b);
  if (c->status != CONFORM_FAIL) conform_barrier(c);
  conform_phase(c, "close after an oversized send");
  c->net->closeSend(l.send_comm);
  c->net->closeRecv(l.recv_comm);
  return conform_verdict(c);
}

static conform_status_t xfer_test_null_sizes(conform_ctx_t *c) {
  conform_link_t l;
  if (conform_link_open(c, 0, &l)) return CONFORM_FAIL;
  bufpair_t b;
  if (bufpair_open(c, &l, &b, 4096, 4096, 0, 0) == 0) {
    conform_fill(b.s.data, 4096, conform_seed(c->rank, c->next, 5000));
    void *sreq, *rreq, *d = b.r.data;
    size_t psz = 4096;
    int tag = c->prev;
    if (!conform_irecv(c, b.rcomm, 1, &d, &psz, &tag, &b.rmh, &rreq) &&
        !conform_isend(c, b.scomm, b.s.data, 4096, c->rank, b.smh, &sreq) &&
        !conform_wait_pair(c, sreq, rreq, NULL) &&
        conform_verify(b.r.data, 4096, conform_seed(c->prev, c->rank, 5000)) >= 0)
      conform_fail(c, "payload wrong");
  }
  bufpair_close(c, &b);
  conform_link_close(c, &l);
  return conform_verdict(c);
}

static conform_status_t xfer_null_phandle(conform_ctx_t *c) {
  if (c->version < 10) return conform_skip(c, "v%d isend/irecv have no profiler handles", c->version);
  conform_link_t l;
  if (conform_link_open(c, 0, &l)) return CONFORM_FAIL;
  bufpair_t b;
  if (bufpair_open(c, &l, &b, 4096, 4096, 0, 0) == 0) {
    conform_fill(b.s.data, 4096, conform_seed(c->rank, c->next, 6000));
    void *sreq = NULL, *rreq = NULL, *d = b.r.data;
    size_t psz = 4096;
    int tag = c->prev, got = -1;
    strand_result_t r;
    conform_phase(c, "irecv with phandles NULL");
    do r = c->net->irecv(b.rcomm, 1, &d, &psz, &tag, &b.rmh, NULL, &rreq);
    while (r == STRAND_SUCCESS && !rreq && conform_remaining(c) > 1);
    if (r != STRAND_SUCCESS) conform_fail(c, "irecv with phandles NULL returned %s", conform_result_str(r));
    conform_phase(c, "isend with phandle NULL");
    do r = c->net->isend(b.scomm, b.s.data, 4096, c->rank, b.smh, NULL, &sreq);
    while (r == STRAND_SUCCESS && !sreq && conform_remaining(c) > 1);
    if (r != STRAND_SUCCESS) conform_fail(c, "isend with phandle NULL returned %s", conform_result_str(r));
    if (c->status != CONFORM_FAIL && !conform_wait_pair(c, sreq, rreq, &got) &&
        (got != 4096 || conform_verify(b.r.data, 4096, conform_seed(c->prev, c->rank, 6000)) >= 0))
      conform_fail(c, "payload or size (%d) wrong", got);
  }
  bufpair_close(c, &b);
  conform_link_close(c, &l);
  return conform_verdict(c);
}

static conform_status_t xfer_optional_recv_completion(conform_ctx_t *c) {
  if (c->version < 9)
    return conform_skip(c, "v%d cores reset the sentinel before the plugin sees it", c->version);
  conform_link_t l;
  if (conform_link_open(c, 0, &l)) return CONFORM_FAIL;
  bufpair_t b;
  if (bufpair_open(c, &l, &b, 4096, 4096, 0, 0) == 0) {
    conform_fill(b.s.data, 1000, conform_seed(c->rank, c->next, 7000));
    void *sreq = NULL, *rreq, *d = b.r.data;
    size_t psz = 4096;
    int tag = c->prev, got = -1;
    strand_result_t r;
    do {
      rreq = STRAND_NET_OPTIONAL_RECV_COMPLETION_PTR; /* NCCL stores it before every attempt */
      conform_phase(c, "irecv with *request = 0x1");
      r = c->net->irecv(b.rcomm, 1, &d, &psz, &tag, &b.rmh, NULL, &rreq);
    } while (r == STRAND_SUCCESS && !rreq && conform_remaining(c) > 1);
    if (r != STRAND_SUCCESS)
      conform_fail(c, "irecv with the sentinel preset returned %s", conform_result_str(r));
    else if (rreq == STRAND_NET_OPTIONAL_RECV_COMPLETION_PTR)
      conform_fail(c, "irecv left NCCL_NET_OPTIONAL_RECV_COMPLETION (0x1) in *request: NCCL would "
                   "call test() on address 0x1");
    else if (!conform_isend(c, b.scomm, b.s.data, 1000, c->rank, b.smh, &sreq) &&
             !conform_wait_pair(c, sreq, rreq, &got) &&
             (got != 1000 || conform_verify(b.r.data, 1000, conform_seed(c->prev, c->rank, 7000)) >= 0))
      conform_fail(c, "payload or size (%d) wrong", got);
  }
  bufpair_close(c, &b);
  conform_link_close(c, &l);
  return conform_verdict(c);
}

static conform_status_t xfer_irecv_consumed(conform_ctx_t *c) {
  if (!c->net->irecvConsumed) return conform_skip(c, "irecvConsumed is NULL");
  conform_link_t l;
  if (conform_link_open(c, 0, &l)) return CONFORM_FAIL;
  bufpair_t b;
  if (bufpair_open(c, &l, &b, 4096, 4096, 0, 0) == 0) {
    for (int i = 0; i < 4 && c->status != CONFORM_FAIL; i++) {
      conform_fill(b.s.data, 4096, conform_seed(c->rank, c->next, 8000 + (uint64_t)i));
      void *sreq, *rreq, *d = b.r.data;
      size_t psz = 4096;
      int tag = c->prev, got = -1;
      if (conform_irecv(c, b.rcomm, 1, &d, &psz, &tag, &b.rmh, &rreq) ||
          conform_isend(c, b.scomm, b.s.data, 4096, c->rank, b.smh, &sreq) ||
          conform_wait_pair(c, sreq, rreq, &got))
        break;
      if (got != 4096 || conform_verify(b.r.data, 4096, conform_seed(c->prev, c->rank, 8000 + (uint64_t)i)) >= 0) {
        conform_fail(c, "message %d wrong", i);
        break;
      }
      /* after test() said done, the GPU consumed the step: NCCL calls irecvConsumed (§6.12) */
      conform_phase(c, "irecvConsumed");
      strand_result_t r = c->net->irecvConsumed(b.rcomm, 1, rreq);
      if (r != STRAND_SUCCESS) conform_fail(c, "irecvConsumed returned %s", conform_result_str(r));
    }
  }
  bufpair_close(c, &b);
  conform_link_close(c, &l);
  return conform_verdict(c);
}

static conform_status_t xfer_concurrent_comms(conform_ctx_t *c) {
  enum { NL = 4, SZ = 50000 };
  conform_link_t l[NL];
  bufpair_t b[NL];
  memset(b, 0, sizeof b);
  int opened = 0, bopen = 0;
  for (; opened < NL; opened++)
    if (conform_link_open(c, 0, &l[opened])) goto out;
  for (; bopen < NL; bopen++)
    if (bufpair_open(c, &l[bopen], &b[bopen], SZ, SZ, 0, 0)) goto out;
  for (int round = 0; round < 3; round++) {
    void *sreq[NL], *rreq[NL];
    for (int k = 0; k < NL; k++) {
      void *d = b[k].r.data;
      size_t psz = SZ;
      int tag = c->prev;
      if (conform_irecv(c, b[k].rcomm, 1, &d, &psz, &tag, &b[k].rmh, &rreq[k])) goto out;
    }
    for (int k = NL - 1; k >= 0; k--) { /* reverse order: cross-talk shows */
      conform_fill(b[k].s.data, SZ - (size_t)k, conform_seed(c->rank, c->next, 9000 + (uint64_t)(round * NL + k)));
      if (conform_isend(c, b[k].scomm, b[k].s.data, SZ - (size_t)k, c->rank, b[k].smh, &sreq[k])) goto out;
    }
    int gots[NL];
    void *all_req[2 * NL];
    int *all_sz[2 * NL];
    for (int k = 0; k < NL; k++) {
      all_req[k] = sreq[k], all_sz[k] = NULL;
      all_req[NL + k] = rreq[k], all_sz[NL + k] = &gots[k];
    }
    if (conform_wait_all(c, 2 * NL, all_req, all_sz, "isend/irecv")) goto out;
    for (int k = 0; k < NL; k++) {
      int got = gots[k];
      if ((size_t)got != SZ - (size_t)k ||
          conform_verify(b[k].r.data, SZ - (size_t)k, conform_seed(c->prev, c->rank, 9000 + (uint64_t)(round * NL + k))) >= 0) {
        conform_fail(c, "connection %d received another connection's message (size %d, expected %d)",
                     k, got, SZ - k);
        goto out;
      }
    }
  }
out:
  for (int k = 0; k < bopen; k++) bufpair_close(c, &b[k]);
  for (int k = 0; k < opened; k++) conform_link_close(c, &l[k]);
  return conform_verdict(c);
}

static conform_status_t xfer_iflush(conform_ctx_t *c) {
  strand_props_v12_t p;
  if (conform_props(c, 0, &p)) return CONFORM_FAIL;
  bool gdr = p.ptrSupport & (STRAND_PTR_CUDA | STRAND_PTR_DMABUF);
  if (!c->net->iflush) {
    if (gdr) return conform_fail(c, "iflush is NULL but ptrSupport 0x%x allows GPU buffers, which "
                                 "NCCL flushes (§6.8)", (unsigned)p.ptrSupport);
    return conform_skip(c, "iflush is NULL; NCCL only flushes GPU buffers and ptrSupport is host-only");
  }
  conform_link_t l;
  if (conform_link_open(c, 0, &l)) return CONFORM_FAIL;
  bufpair_t b;
  if (bufpair_open(c, &l, &b, 65536, 65536, 0, 0) == 0 && conform_ping(c, &l, 100, 9500) == 0) {
    conform_fill(b.s.data, 65536, conform_seed(c->rank, c->next, 9600));
    void *sreq, *rreq, *d = b.r.data;
    size_t psz = 65536;
    int tag = c->prev, got = -1;
    if (!conform_irecv(c, b.rcomm, 1, &d, &psz, &tag, &b.rmh, &rreq) &&
        !conform_isend(c, b.scomm, b.s.data, 65536, c->rank, b.smh, &sreq) &&
        !conform_wait_pair(c, sreq, rreq, &got)) {
      void *freq = NULL;
      int fsz = got;
      conform_phase(c, "iflush");
      strand_result_t r = c->net->iflush(b.rcomm, 1, &d, &fsz, &b.rmh, &freq);
      if (r != STRAND_SUCCESS) {
        if (gdr) conform_fail(c, "iflush returned %s", conform_result_str(r));
        else conform_skip(c, "iflush on host memory returned %s; NCCL never flushes host buffers",
                          conform_result_str(r));
      } else if (freq) {
        conform_wait(c, freq, NULL, "iflush request (sizes NULL)");
      } else {
        conform_note(c, "iflush returned a NULL request (= already complete)");
      }
    }
  }
  bufpair_close(c, &b);
  conform_link_close(c, &l);
  return c->status;
}

/* ------------------------------------------------------------ xfer.flush-gpu (needs a GPU) */

/* NCCL's rule for calling iflush (2.28 src/graph/paths.cc ncclTopoNeedFlush, used by the receive
 * proxy in src/transport/net.cc): after a receive into GPU memory (GDR) completes with more than
 * 0 bytes on the SIMPLE protocol, iflush is called when the plugin says forceFlush = 1, or
 * NCCL_NET_FORCE_FLUSH is set, or the GPU's compute capability is below 9.0 (on 9.0+ also when
 * the NIC is PCIe-near a GPU whose CPU link is C2C, which this check cannot see). The GPU reads
 * the data once test() said done and, where iflush was called, once its request completed. */
enum { FG_SLOT = 600 * 1024, FG_SLOTS = 4, FG_BIG = 512 * 1024 };

typedef struct {
  bool flush;      /* NCCL would call iflush here */
  char why[200];   /* which rule decided it */
} fg_rule_t;

/* The GPU's compute capability through the SDK's driver loader: the major version, or -1 when
 * unknown. */
static int fg_cc_major(int dev, int *minor) {
  enum { CC_MAJOR = 75, CC_MINOR = 76 }; /* CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR/_MINOR */
  const strand_cuda_t *cu = strand_cuda();
  int major = -1;
  if (!cu || !cu->deviceGetAttribute || cu->deviceGetAttribute(&major, CC_MAJOR, dev) != STRAND_CU_SUCCESS ||
      cu->deviceGetAttribute(minor, CC_MINOR, dev) != STRAND_CU_SUCCESS)
    major = -1;
  return major;
}

static fg_rule_t fg_rule(const conform_ctx_t *c, const strand_props_v12_t *p, int dev) {
  fg_rule_t r = {0};
  const char *env = getenv("NCCL_NET_FORCE_FLUSH");
  int minor = 0, major = fg_cc_major(dev, &minor);
  /* before v9 the properties have no forceFlush: the core takes 0 */
  const char *ff0 = c->version < 9 ? "no forceFlush before ABI v9, so NCCL takes 0" : "forceFlush 0";
  if (p->forceFlush == 1) {
    r.flush = true;
    snprintf(r.why, sizeof r.why, "forceFlush 1");
  } else if (env && atoi(env) != 0) {
    r.flush = true;
    snprintf(r.why, sizeof r.why, "NCCL_NET_FORCE_FLUSH=%s", env);
  } else if (major >= 0 && major < 9) {
    r.flush = true;
    snprintf(r.why, sizeof r.why, "%s, a GPU of compute capability %d.%d (< 9.0)", ff0, major, minor);
  } else {
    snprintf(r.why, sizeof r.why, "%s, a GPU of compute capability %s%d.%d: NCCL does not call iflush, the "
             "data must be visible when test() says done", ff0, major < 0 ? "(unknown, taken as) " : "",
             major < 0 ? 9 : major, major < 0 ? 0 : minor);
  }
  return r;
}

typedef struct {
  conform_link_t l;
  conform_buf_t sb;       /* host send slots */
  void *smh, *rmh;
  strand_cu_devptr_t gpu; /* FG_SLOTS receive slots in GPU memory */
  unsigned char *img;     /* host image of the GPU slots: guard bytes in, received bytes out */
} fg_t;

/* One receive of n slots into GPU memory (slot k: sizes[k] bytes, tag 7000 + 3k), filled with
 * guard bytes first; after test() done, and iflush where NCCL calls it, the GPU's copy of every
 * slot must be the sent bytes followed by untouched guard bytes. */
static int fg_round(conform_ctx_t *c, fg_t *f, const fg_rule_t *rule, int n, const size_t *sizes, uint64_t salt) {
  const strand_cuda_t *cu = strand_cuda();
  size_t total = (size_t)FG_SLOT * FG_SLOTS;
  memset(f->img, CONFORM_GUARD_BYTE, total);
  if (cu->memcpyHtoDAsync(f->gpu, f->img, total, NULL) != STRAND_CU_SUCCESS ||
      cu->streamSynchronize(NULL) != STRAND_CU_SUCCESS) {
    conform_fail(c, "strand-conform: cuMemcpyHtoD of guard bytes into the GPU receive buffer failed");
    return -1;
  }
  void *data[FG_SLOTS], *mhs[FG_SLOTS], *reqs[FG_SLOTS + 1];
  size_t psz[FG_SLOTS];
  int tags[FG_SLOTS], *szp[FG_SLOTS + 1];
  for (int k = 0; k < n; k++) {
    data[k] = (void *)(uintptr_t)(f->gpu + (strand_cu_devptr_t)k * FG_SLOT);
    psz[k] = FG_SLOT;
    tags[k] = 7000 + 3 * k;
    mhs[k] = f->rmh;
  }
  if (conform_irecv(c, f->l.recv_comm, n, data, psz, tags, mhs, &reqs[n])) return -1;
  for (int k = 0; k < n; k++) {
    unsigned char *s = f->sb.data + (size_t)k * FG_SLOT;
    conform_fill(s, sizes[k], conform_seed(c->rank, c->next, salt + (uint64_t)k));
    if (conform_isend(c, f->l.send_comm, s, sizes[k], tags[k], f->smh, &reqs[k])) return -1;
    szp[k] = NULL;
  }
  int got[STRAND_PROXY_MAX_SUBS];
  for (int k = 0; k < STRAND_PROXY_MAX_SUBS; k++) got[k] = 0; /* NCCL passes a zeroed int[64] */
  szp[n] = got;
  if (conform_wait_all(c, n + 1, reqs, szp, "isend / irecv into GPU memory")) return -1;
  for (int k = 0; k < n; k++)
    if (got[k] != (int)sizes[k]) {
      conform_fail(c, "a receive into GPU memory (slot %d of %d) reported %d bytes, %zu were sent", k, n, got[k],
                   sizes[k]);
      return -1;
    }
  if (rule->flush) {
    void *freq = NULL;
    conform_phase(c, "iflush of %d receive(s) in GPU memory", n);
    strand_result_t r = c->net->iflush(f->l.recv_comm, n, data, got, mhs, &freq);
    if (r != STRAND_SUCCESS) {
      conform_fail(c, "iflush of a completed receive into GPU memory returned %s (NCCL calls it here: %s)",
                   conform_result_str(r), rule->why);
      return -1;
    }
    if (freq && conform_wait(c, freq, NULL, "iflush request (GPU memory)")) return -1;
  }
  if (cu->memcpyDtoHAsync(f->img, f->gpu, total, NULL) != STRAND_CU_SUCCESS ||
      cu->streamSynchronize(NULL) != STRAND_CU_SUCCESS) {
    conform_fail(c, "strand-conform: cuMemcpyDtoH out of the GPU receive buffer failed");
    return -1;
  }
  for (int k = 0; k < n; k++) {
    const unsigned char *slot = f->img + (size_t)k * FG_SLOT;
    long long bad = conform_verify(slot, sizes[k], conform_seed(c->prev, c->rank, salt + (uint64_t)k));
    size_t at = 0;
    if (bad < 0)
      for (at = sizes[k]; at < FG_SLOT && slot[at] == CONFORM_GUARD_BYTE; at++) {}
    if (bad >= 0 || at < FG_SLOT) {
      size_t stale = 0; /* bytes the GPU still sees as before the receive */
      for (size_t i = 0; i < sizes[k]; i++) stale += slot[i] == CONFORM_GUARD_BYTE;
      const char *what = bad < 0 ? "a byte written past the message" :
                         stale == sizes[k] ? "none of the received bytes (GPU memory as before the receive)" :
                         "wrong bytes";
      conform_fail(c, "%s, the GPU read %s at byte %lld of a %zu-byte receive (slot %d of %d) from rank %d; "
                   "NCCL's kernel reads it then (%s)", rule->flush ?
                   "after test() said the receive was done and its iflush request completed" :
                   "after test() said the receive was done", what, bad >= 0 ? bad : (long long)at, sizes[k], k,
                   n, c->prev, rule->why);
      return -1;
    }
  }
  return 0;
}

static void fg_body(conform_ctx_t *c, fg_t *f, const fg_rule_t *rule, int maxrecvs) {
  const strand_cuda_t *cu = strand_cuda();
  size_t total = (size_t)FG_SLOT * FG_SLOTS;
  if (conform_buf_alloc(&f->sb, total, 0) || !(f->img = malloc(total))) {
    conform_fail(c, "strand-conform: out of host memory");
    return;
  }
  if (cu->memAlloc(&f->gpu, total) != STRAND_CU_SUCCESS) {
    f->gpu = 0;
    conform_fail(c, "strand-conform: cuMemAlloc of %zu bytes failed", total);
    return;
  }
  if (conform_reg(c, f->l.send_comm, f->sb.data, total, STRAND_PTR_HOST, &f->smh)) return;
  conform_phase(c, "regMr(%zu bytes of GPU memory, NCCL_PTR_CUDA) on the receive comm", total);
  strand_result_t r = c->net->regMr(f->l.recv_comm, (void *)(uintptr_t)f->gpu, total, STRAND_PTR_CUDA, &f->rmh);
  if (r != STRAND_SUCCESS) {
    conform_fail(c, "regMr of GPU memory (NCCL_PTR_CUDA, which getProperties claims) on a receive comm "
                 "returned %s", conform_result_str(r));
    return;
  }
  /* One step's worth (NCCL's SIMPLE steps are 512 KiB by default) down to a byte, then a group. */
  const size_t one[3] = {1, 4099, FG_BIG}, group[FG_SLOTS] = {FG_BIG, 3001, 65536, 17};
  uint64_t salt = 9700;
  for (int i = 0; i < 3; i++, salt += 8)
    if (fg_round(c, f, rule, 1, &one[i], salt)) return;
  int n = maxrecvs < FG_SLOTS ? maxrecvs : FG_SLOTS;
  if (n > 1 && fg_round(c, f, rule, n, group, salt)) return;
  conform_note(c, "receives of 1, 4099 and %d B%s into GPU memory (cuMemAlloc) read back by the GPU after "
               "test()%s; %s", FG_BIG, n > 1 ? " and a group of them" : "", rule->flush ? " and iflush" : "",
               rule->why);
}

static conform_status_t xfer_flush_gpu(conform_ctx_t *c) {
  strand_props_v12_t p;
  if (conform_props(c, 0, &p)) return CONFORM_FAIL;
  if (!(p.ptrSupport & STRAND_PTR_CUDA))
    return conform_skip(c, "ptrSupport 0x%x has no NCCL_PTR_CUDA: NCCL never receives into GPU memory through "
                        "this plugin", (unsigned)p.ptrSupport);
  if (p.netDeviceType == STRAND_DEV_UNPACK)
    return conform_skip(c, "device 0 is NCCL_NET_DEVICE_UNPACK: the plugin receives into its bounce buffer and "
                        "NCCL's kernel copies to GPU memory (the unpack.* checks)");
  int dev = -1;
  const char *why = conform_cuda_use_gpu(c, &dev);
  if (why) return conform_skip(c, "%s", why);
  fg_rule_t rule = fg_rule(c, &p, dev);
  if (rule.flush && !c->net->iflush) {
    strand_cuda()->devicePrimaryCtxRelease(dev);
    return conform_fail(c, "iflush is NULL, but NCCL calls it after every receive into GPU memory here (%s)",
                        rule.why);
  }
  fg_t f;
  memset(&f, 0, sizeof f);
  if (conform_link_open(c, 0, &f.l) == 0) {
    if (conform_ping(c, &f.l, 100, 9690) == 0) fg_body(c, &f, &rule, p.maxRecvs);
    if (f.rmh) conform_dereg(c, f.l.recv_comm, f.rmh);
    if (f.smh) conform_dereg(c, f.l.send_comm, f.smh);
    conform_link_close(c, &f.l);
  }
  if (f.gpu) strand_cuda()->memFree(f.gpu);
  free(f.img);
  conform_buf_free(&f.sb);
  strand_cuda()->devicePrimaryCtxRelease(dev);
  return conform_verdict(c);
}

const conform_check_t conform_checks_xfer[] = {
  {"xfer.zero-byte", "§6.4 (size may be 0)", "0-byte messages complete, size 0", xfer_zero_byte, 30, 0},
  {"xfer.one-byte", "§6.4", "1-byte messages arrive byte-exact", xfer_one_byte, 30, 0},
  {"xfer.pow2-sizes", "§6.4, DESIGN nothing lost", "2^k and 2^k+-1 up to 64 MiB byte-exact, true sizes",
   xfer_pow2_sizes, 120, CONFORM_F_SLOW},
  {"xfer.max-size", "§6.4, §2.6 maxP2pBytes, §1.5", "one min(maxP2pBytes, 1 GiB, --max-bytes) transfer",
   xfer_max_size, 180, CONFORM_F_SLOW},
  {"xfer.unaligned", "§6.3", "odd offsets inside one registration arrive byte-exact", xfer_unaligned, 60, 0},
  {"xfer.ordering", "§6.4, §6.2", "thousands of messages, 8 in flight, arrive in posting order",
   xfer_ordering, 60, 0},
  {"xfer.recv-larger-than-send", "§6.4, §6.9", "a larger receive reports the true sent size",
   xfer_recv_larger, 30, 0},
  {"xfer.send-larger-than-recv", "DESIGN nothing lost silently",
   "an oversized send is an error on both sides; no overrun", xfer_send_larger, 40, CONFORM_F_STALE},
  {"xfer.test-null-sizes", "§6.8, §6.10", "test(req, &done, NULL) works on receives", xfer_test_null_sizes, 30, 0},
  {"xfer.null-phandle", "§2.3, §6.10", "isend/irecv with NULL profiler handles (v10+)", xfer_null_phandle, 30, 0},
  {"xfer.optional-recv-completion", "§6.6", "irecv overwrites a preset 0x1 request (v9+)",
   xfer_optional_recv_completion, 30, 0},
  {"xfer.irecv-consumed", "§6.12", "irecvConsumed after done is accepted", xfer_irecv_consumed, 30, 0},
  {"xfer.concurrent-comms", "§6.1", "four connections between the same ranks, no cross-talk",
   xfer_concurrent_comms, 30, 0},
  {"xfer.iflush", "§6.5, §6.8", "iflush returns NULL or a request test() completes", xfer_iflush, 30, 0},
  {"xfer.flush-gpu", "§6.8, §2.6 forceFlush",
   "receives into GPU memory visible to the GPU after test() and iflush where NCCL calls it (needs a GPU)",
   xfer_flush_gpu, 30, 0},
  {0},
};
