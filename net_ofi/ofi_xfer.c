/* strand-ofi — the data path: isend / irecv / test / iflush on tagged RDM messages.
 *
 * Ordering and grouped receives. NCCL's contract: messages on one comm match receives in posting
 * order; within a grouped irecv (n slots, tags[i] = remote sender rank) the NCCL tag only selects
 * which slot a send lands in. Each sender rank sends in order, and every group contains at most
 * one slot per tag. So "the k-th send carrying NCCL tag t" must land in "the k-th receive slot
 * posted with tag t" — nothing else is ordered. Both sides therefore keep one counter per NCCL tag
 * (ofi_seq_t): a send with tag t uses seq = sent[t]++, a receive slot with tag t expects
 * seq = expected[t]++, and the libfabric tag is (receiver comm id, seq, t). The sender never needs
 * to know how the receiver grouped its slots, and each posted fi_trecv has a unique tag, so the
 * order in which libfabric matches them is irrelevant.
 * Sizes travel only in the message: the receiver posts its maximum; a larger message completes
 * with FI_ETRUNC, the receive fails, and the receiver tells the sender (TRUNC, resent until the
 * provider delivers it: ofi_conn.c) so the sender's comm fails too. An eager send has usually
 * completed locally by then, so the sender learns of it a round trip later: a send the caller has
 * not yet been told is done reports the comm's failure instead (the truncated one among them),
 * and so does every later operation on the comm. The receiving process's own sends to that peer
 * fail at once too (ofi_peer_overran: tcp;ofi_rxm wedges the pair when both sides overrun). A send already reported done stays done: asking
 * the receiver before reporting any send done would cost every message a round trip.
 * -FI_EAGAIN: a send, or a receive whose first slot cannot be posted, returns request == NULL so
 * the core retries the same call; a group that got part-way keeps its reserved sequence numbers
 * and posts the rest from test().
 * Peer loss: a request waiting longer than STRAND_OFI_PROBE_MS makes the comm send a small probe to
 * the peer's endpoint; a probe the provider fails (connection refused/reset) or that is not taken
 * within STRAND_OFI_PEER_TIMEOUT_S fails the comm, and test() reports it.
 * Calls ofi_conn.c (comm failure and reaping, control-message completions), ofi_progress.c,
 * ofi_dev.c and ofi_config.c. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "ofi.h"
#include "strand/clock.h"
#include "strand/profiler.h"

static void sub_done(ofi_dev_t *d, ofi_op_t *op, const ofi_cqe_t *e);

static ofi_req_t *req_get(ofi_comm_t *c, ofi_req_kind_t kind, int n) {
  ofi_req_t *r = strand_pool_get(&c->reqs);
  if (!r) return NULL;
  memset(r, 0, sizeof *r);
  r->kind = kind;
  r->comm = c;
  r->n = n;
  r->result = STRAND_SUCCESS;
  r->t_post_ms = strand_now_ms();
  for (int i = 0; i < n; i++) {
    r->subs[i].op.done = sub_done;
    r->subs[i].op.arg = &r->subs[i];
    r->subs[i].req = r;
    r->subs[i].slot = i;
  }
  return r;
}

static void req_put(ofi_req_t *r) {
  r->kind = OFI_REQ_FREE;
  strand_pool_put(&r->comm->reqs, r);
}

/* ---- per-tag sequence numbers ---- */

static uint32_t *seq_slot(ofi_comm_t *c, int tag) {
  for (int k = 0; k < c->nseqs; k++)
    if (c->seqs[k].tag == tag) return &c->seqs[k].next;
  if (c->nseqs == c->capseqs) {
    int cap = c->capseqs ? 2 * c->capseqs : 8;
    ofi_seq_t *s = realloc(c->seqs, (size_t)cap * sizeof *s);
    if (!s) return NULL;
    c->seqs = s;
    c->capseqs = cap;
  }
  c->seqs[c->nseqs].tag = tag;
  c->seqs[c->nseqs].next = 0;
  return &c->seqs[c->nseqs++].next;
}

/* NCCL tags are ranks; ranks below 2^24 map to themselves. Larger or negative values are folded,
 * which could only confuse two such tags used concurrently on one comm. */
static uint64_t make_tag(uint32_t comm_id, uint32_t seq, int nccl_tag) {
  uint32_t t = (uint32_t)nccl_tag;
  t = (t ^ (t >> OFI_TAG_NCCL_BITS)) & OFI_NCCL_TAG_MASK;
  return ((uint64_t)comm_id << OFI_TAG_COMM_SHIFT) | ((uint64_t)(seq & OFI_SEQ_MASK) << OFI_TAG_SEQ_SHIFT) |
         t;
}

/* ---- argument checks shared by isend/irecv ---- */

static strand_result_t buffer_desc(ofi_comm_t *c, const char *call, void *data, size_t size,
                                   void *mhandle, void **desc) {
  ofi_dev_t *d = c->dev;
  ofi_mr_t *mr = mhandle ? ((ofi_mh_t *)mhandle)->entry : NULL;
  *desc = NULL;
  if (size > d->max_msg_size) {
    STRAND_WARN("%s of %zu bytes to %s exceeds the provider's max_msg_size %zu on %s", call, size,
             c->peer_str, d->max_msg_size, d->name);
    return STRAND_INVALID_ARGUMENT;
  }
  if (!mr) {
    if (size > 0 && (d->mr_mode & FI_MR_LOCAL)) {
      STRAND_WARN("%s to %s without a memory handle, but %s needs registered buffers (FI_MR_LOCAL)",
               call, c->peer_str, d->name);
      return STRAND_INVALID_ARGUMENT;
    }
    return STRAND_SUCCESS;
  }
  if (mr->dev != d) {
    /* Each rail is its own domain: a registration is only valid on comms of the rail it was made
     * on (NCCL registers per comm, so only a caller reusing handles across comms gets here). */
    STRAND_WARN("%s: memory handle was registered on %s rail %d, comm is on %s rail %d; register "
                "the buffer with this comm",
                call, mr->dev->name, mr->dev->rail, d->name, d->rail);
    return STRAND_INVALID_ARGUMENT;
  }
  if (size > 0 && ((uintptr_t)data < mr->base || (uintptr_t)data + size > mr->base + mr->len)) {
    /* A caller bug (the core only passes pointers inside the registration). Fatal where the
     * provider needs the descriptor to cover the buffer; harmless for host memory otherwise. */
    if ((d->mr_mode & FI_MR_LOCAL) || mr->iface != FI_HMEM_SYSTEM) {
      STRAND_WARN("%s: buffer %p+%zu lies outside its registration %p+%zu", call, data, size,
                  (void *)mr->base, mr->len);
      return STRAND_INVALID_ARGUMENT;
    }
    STRAND_INFO(STRAND_SUBSYS_NET, "%s: buffer %p+%zu lies outside its registration %p+%zu; "
                "%s needs no registration for host memory, so it is sent without one",
                call, data, size, (void *)mr->base, mr->len, d->name);
    return STRAND_SUCCESS;
  }
  *desc = mr->desc;
  return STRAND_SUCCESS;
}

/* ---- liveness ---- */

/* Something of comm c has waited since `since_ms` (a posted request, or a send the provider keeps
 * refusing with -FI_EAGAIN). */
static void maybe_probe(ofi_comm_t *c, uint64_t since_ms) {
  uint64_t now = strand_now_ms();
  if (c->failed != STRAND_SUCCESS || c->state != OFI_CONN_READY) return;
  /* The whole detection (the wait before the probe, then the probe's own grace) stays within
   * STRAND_OFI_PEER_TIMEOUT_S of the moment a request began waiting on a peer that is gone: a
   * probe sent after waiting P ms gets T - P ms, not T (a dead CollNet member took P + T = 31 s
   * with the defaults). A probe period as long as the timeout would leave no grace: then the
   * probe goes after half of it. */
  uint64_t timeout = (uint64_t)ofi_params.peer_timeout_ms;
  uint64_t wait = (uint64_t)ofi_params.probe_ms < timeout ? (uint64_t)ofi_params.probe_ms : timeout / 2;
  if (c->probe_sent_ms) {
    /* A probe travels behind the data already queued to the peer: with hundreds of sends in
     * flight on a busy provider (`sockets` on a loaded host) it can take longer than its grace
     * while the peer is alive and taking data all along. A data operation of this comm completing
     * after the probe went out is that evidence, so the grace counts from the later of the two:
     * only a comm on which nothing at all has moved for the whole grace is declared dead. */
    uint64_t quiet_since = c->last_alive_ms > c->probe_sent_ms ? c->last_alive_ms : c->probe_sent_ms;
    if (now - quiet_since > timeout - wait)
      ofi_comm_fail(c, STRAND_REMOTE_ERROR,
                    "the peer's endpoint has not taken a liveness probe, and no operation with it "
                    "has completed, within %ld s of a request waiting on it "
                    "(STRAND_OFI_PEER_TIMEOUT_S): the peer process, host or network is gone",
                    ofi_params.peer_timeout_ms / 1000);
    return;
  }
  if (now - since_ms < wait || now - c->last_probe_ms < wait) return;
  ofi_dev_t *d = c->dev;
  if (ofi_ctrl_send(d, c->peer, OFI_CTRL_PROBE, c->peer_id, c->id, c->nonce, 0, c->id, d->ep_name,
                    d->ep_name_len, ofi_conn_ctrl_sent) == 0) {
    c->probe_sent_ms = now;
    c->last_probe_ms = now;
  }
}

/* ---- STRAND_OFI_SLOW_MS tracing (docs/benchmarks/ofi.md, "The first-use stall") ----
 * Three questions about a stall: did a call into the plugin take long (trace_leave: the time from
 * entering the call, lock wait included, to leaving it), did the caller stay away from the plugin
 * while operations were in flight (trace_enter: NCCL's proxy thread was busy elsewhere), or did
 * the provider take long to complete an operation (trace_done, below). Lock held for both. */
static int in_flight(const ofi_dev_t *d) {
  int n = 0;
  for (const ofi_comm_t *c = d->comms; c; c = c->next) n += c->outstanding;
  return n;
}

/* Involuntary context switches of the calling thread (the kernel took its core away): read at
 * every traced call's end, so that a slow call can say whether the thread was preempted since
 * its previous call rather than kept by the provider or the lock. Tracing only. */
static _Thread_local long trace_nivcsw;

static void trace_enter(ofi_dev_t *d, uint64_t t_in) {
  uint64_t slow = ofi_params.slow_ms * 1000000u;
  if (d->trace_last_ns && t_in - d->trace_last_ns >= slow) {
    int n = in_flight(d);
    struct rusage ru;
    long sw = getrusage(RUSAGE_THREAD, &ru) == 0 ? ru.ru_nivcsw - trace_nivcsw : -1;
    if (n > 0)
      STRAND_INFO(STRAND_SUBSYS_NET, "trace t=%llu ms: no isend/irecv/test on %s rail %d for %llu "
                  "ms while %d operation(s) were in flight (the caller was elsewhere; this thread "
                  "had %ld involuntary context switch(es) since its previous call)",
                  (unsigned long long)(t_in / 1000000u), d->name, d->rail,
                  (unsigned long long)((t_in - d->trace_last_ns) / 1000000u), n, sw);
  }
}

/* t_locked: when the call got the rail's lock. The two parts say who kept the caller: another
 * thread holding the lock (a rail thread, connect/accept/regMr in NCCL's service thread), or the
 * provider inside this call (ofi_progress names a slow fi_cq_read itself). */
static void trace_leave(ofi_dev_t *d, const char *call, uint64_t t_in, uint64_t t_locked) {
  uint64_t now = strand_now_ns();
  d->trace_last_ns = now;
  struct rusage ru;
  long before = trace_nivcsw;
  if (getrusage(RUSAGE_THREAD, &ru) == 0) trace_nivcsw = ru.ru_nivcsw;
  if (now - t_in >= ofi_params.slow_ms * 1000000u)
    STRAND_INFO(STRAND_SUBSYS_NET, "trace t=%llu ms: %s on %s rail %d took %llu us: %llu us "
                "waiting for the rail's lock, %llu us inside; %ld involuntary context switch(es) "
                "of this thread since its previous call",
                (unsigned long long)(now / 1000000u), call, d->name, d->rail,
                (unsigned long long)((now - t_in) / 1000u),
                (unsigned long long)((t_locked - t_in) / 1000u),
                (unsigned long long)((now - t_locked) / 1000u), trace_nivcsw - before);
}

/* ---- send ---- */

/* Profiler START of one message: the socket layout (strand/profiler.h), fd -1 (no descriptor). */
static void prof_start(void **event, void *parent, int op, size_t length) {
  strand_profiler_sock_descr_v1_t d = {.type = STRAND_PROFILE_SOCKET};
  d.sock.fd = -1;
  d.sock.op = op;
  d.sock.length = length;
  strand_profiler_start(event, parent, STRAND_PROFILER_NET_ID_SOCK, &d);
}

/* STRAND_OFI_INJECT: a send of at most the provider's inject_size from host memory goes by
 * fi_tinject. Why: through tcp;ofi_rxm a small fi_tsend costs the provider a transmit buffer and a
 * completion that the next progress call must write and test() must read; an inject is copied at
 * once and never completes, which NCCL's contract allows (a send is done when its buffer may be
 * reused, not when the peer has it). fi_tinject takes no descriptor, so the provider reads the
 * buffer as host memory: GPU memory (FI_HMEM) always goes by fi_tsend. A delivery failure after
 * the inject still fails the comm (the peer's TRUNC notice, the liveness probe): only the request
 * that was already done does not carry it. */
static bool send_can_inject(const ofi_dev_t *d, size_t size, void *mhandle) {
  if (!ofi_params.inject || size > d->inject_size) return false;
  const ofi_mr_t *mr = mhandle ? ((ofi_mh_t *)mhandle)->entry : NULL;
  return mr == NULL || mr->iface == FI_HMEM_SYSTEM;
}

static ssize_t send_post(ofi_dev_t *d, ofi_comm_t *c, ofi_req_t *r, bool inject) {
  if (inject) return fi_tinject(d->ep, r->bufs[0], r->lens[0], c->peer, r->tags[0]);
  return fi_tsend(d->ep, r->bufs[0], r->lens[0], r->descs[0], c->peer, r->tags[0],
                  &r->subs[0].op.fi_ctx);
}

strand_result_t ofi_isend(void *sendComm, void *data, size_t size, int tag, void *mhandle,
                          void *phandle, void **request) {
  ofi_comm_t *c = sendComm;
  if (!c || !request || c->kind != OFI_COMM_SEND) {
    STRAND_WARN("isend: invalid argument (comm %p, request %p)", sendComm, (void *)request);
    return STRAND_INVALID_ARGUMENT;
  }
  *request = NULL;
  ofi_dev_t *d = c->dev;
  uint64_t t_in = ofi_params.slow_ms ? strand_now_ns() : 0;
  pthread_mutex_lock(&d->lock);
  uint64_t t_locked = t_in ? strand_now_ns() : 0;
  ofi_rail_touch(d);
  if (t_in) trace_enter(d, t_in);
  strand_result_t res = c->failed;
  if (res != STRAND_SUCCESS) {
    STRAND_WARN("isend to %s on %s: the comm already failed: %s", c->peer_str, d->name, c->fail_msg);
    goto out;
  }
  void *desc;
  res = buffer_desc(c, "isend", data, size, mhandle, &desc);
  if (res != STRAND_SUCCESS) goto out;
  uint32_t *seq = seq_slot(c, tag);
  ofi_req_t *r = seq ? req_get(c, OFI_REQ_SEND, 1) : NULL;
  if (!r) goto out; /* all requests in flight: the core retries */
  r->bufs[0] = data;
  r->lens[0] = size;
  r->descs[0] = desc;
  r->tags[0] = make_tag(c->data_id, *seq, tag);
  bool inject = send_can_inject(d, size, mhandle);
  ssize_t rc = send_post(d, c, r, inject);
  if (rc == -FI_EAGAIN) {
    ofi_progress(d);
    rc = send_post(d, c, r, inject);
  }
  if (inject && rc != 0 && rc != -FI_EAGAIN) {
    inject = false; /* the provider refused the inject itself: the plain send says what is wrong */
    rc = send_post(d, c, r, false);
  }
  if (rc == 0) {
    (*seq)++;
    if (strand_profiler_wanted(phandle))
      prof_start(&r->prof[0], phandle, STRAND_PROFILE_SOCK_SEND, size);
    r->posted = 1;
    if (inject) {
      /* The provider copied the message and will not report it: it is done now. */
      r->injected = true;
      r->subs[0].done = true;
      r->completed = 1;
    } else {
      c->outstanding++;
    }
    c->eagain_since_ms = 0;
    *request = r;
  } else {
    req_put(r);
    if (rc == -FI_EAGAIN) {
      /* tcp;ofi_rxm answers -FI_EAGAIN for as long as its connection to a dead peer is being
       * re-established, so a core retrying the send would never learn of it: a send refused for
       * STRAND_OFI_PROBE_MS probes the peer like a waiting request does, and fails the comm once
       * the probe is not taken within STRAND_OFI_PEER_TIMEOUT_S. */
      if (!c->eagain_since_ms) c->eagain_since_ms = strand_now_ms();
      maybe_probe(c, c->eagain_since_ms);
      res = c->failed;
    } else {
      res = ofi_errno_result((int)-rc);
      STRAND_WARN("fi_tsend of %zu bytes to %s on %s failed: %s", size, c->peer_str, d->name,
               fi_strerror((int)-rc));
    }
  }
out:
  if (t_in) trace_leave(d, "isend", t_in, t_locked);
  pthread_mutex_unlock(&d->lock);
  return res;
}

/* ---- receive ---- */

/* Post slots [r->posted, r->n). Returns 0, -FI_EAGAIN, or another negative libfabric error. */
static int post_recv_slots(ofi_req_t *r) {
  ofi_comm_t *c = r->comm;
  ofi_dev_t *d = c->dev;
  while (r->posted < r->n) {
    int i = r->posted;
    ssize_t rc = fi_trecv(d->ep, r->bufs[i], r->lens[i], r->descs[i], FI_ADDR_UNSPEC, r->tags[i], 0,
                          &r->subs[i].op.fi_ctx);
    if (rc == -FI_EAGAIN) {
      ofi_progress(d);
      rc = fi_trecv(d->ep, r->bufs[i], r->lens[i], r->descs[i], FI_ADDR_UNSPEC, r->tags[i], 0,
                    &r->subs[i].op.fi_ctx);
    }
    if (rc != 0) return (int)rc;
    r->posted++;
    c->outstanding++;
  }
  return 0;
}

strand_result_t ofi_irecv(void *recvComm, int n, void **data, size_t *sizes, int *tags,
                          void **mhandles, void **phandles, void **request) {
  ofi_comm_t *c = recvComm;
  if (!c || !request || c->kind != OFI_COMM_RECV || n < 1 || n > OFI_MAX_RECVS || !data ||
      !sizes || !tags) {
    STRAND_WARN("irecv: invalid argument (comm %p, n %d (max %d), request %p)", recvComm, n,
             OFI_MAX_RECVS, (void *)request);
    return STRAND_INVALID_ARGUMENT;
  }
  /* The core may have stored NCCL_NET_OPTIONAL_RECV_COMPLETION here; we always overwrite it. */
  *request = NULL;
  ofi_dev_t *d = c->dev;
  uint64_t t_in = ofi_params.slow_ms ? strand_now_ns() : 0;
  pthread_mutex_lock(&d->lock);
  uint64_t t_locked = t_in ? strand_now_ns() : 0;
  ofi_rail_touch(d);
  if (t_in) trace_enter(d, t_in);
  strand_result_t res = c->failed;
  if (res != STRAND_SUCCESS) {
    STRAND_WARN("irecv from %s on %s: the comm already failed: %s", c->peer_str, d->name,
             c->fail_msg);
    goto out;
  }
  void *descs[OFI_MAX_RECVS];
  for (int i = 0; i < n; i++) {
    res = buffer_desc(c, "irecv", data[i], sizes[i], mhandles ? mhandles[i] : NULL, &descs[i]);
    if (res != STRAND_SUCCESS) goto out;
  }
  ofi_req_t *r = req_get(c, OFI_REQ_RECV, n);
  if (!r) goto out;
  /* Reserve every slot's sequence number now, so a later irecv can never take one of them. */
  for (int i = 0; i < n; i++) {
    uint32_t *seq = seq_slot(c, tags[i]);
    if (!seq) {
      for (int k = i - 1; k >= 0; k--) (*seq_slot(c, tags[k]))--;
      req_put(r);
      res = STRAND_SYSTEM_ERROR;
      goto out;
    }
    r->bufs[i] = data[i];
    r->lens[i] = sizes[i];
    r->descs[i] = descs[i];
    r->tags[i] = make_tag(c->data_id, (*seq)++, tags[i]);
  }
  int rc = post_recv_slots(r);
  if (rc != 0 && r->posted == 0) {
    for (int k = n - 1; k >= 0; k--) (*seq_slot(c, tags[k]))--;
    req_put(r);
    if (rc != -FI_EAGAIN) {
      res = ofi_errno_result(rc);
      STRAND_WARN("fi_trecv on %s failed: %s", d->name, fi_strerror(-rc));
    }
    goto out;
  }
  if (rc != 0 && rc != -FI_EAGAIN) {
    r->result = ofi_errno_result(rc);
    STRAND_WARN("fi_trecv on %s failed for slot %d of %d: %s", d->name, r->posted, n,
             fi_strerror(-rc));
    r->n = r->posted; /* what was posted still completes; test() reports the error */
  }
  if (phandles != NULL)
    for (int i = 0; i < r->n; i++)
      if (strand_profiler_wanted(phandles[i]))
        prof_start(&r->prof[i], phandles[i], STRAND_PROFILE_SOCK_RECV, sizes[i]);
  *request = r;
out:
  if (t_in) trace_leave(d, "irecv", t_in, t_locked);
  pthread_mutex_unlock(&d->lock);
  return res;
}

strand_result_t ofi_iflush(void *recvComm, int n, void **data, int *sizes, void **mhandles,
                           void **request) {
  (void)n, (void)data, (void)sizes, (void)mhandles;
  if (!recvComm || !request) return STRAND_INVALID_ARGUMENT;
  /* Data reaches memory through the provider (a CPU copy for tcp/sockets, a cudaMemcpy for their
   * FI_HMEM path) before the receive completes, so there is nothing to flush: NULL = done. */
  *request = NULL;
  return STRAND_SUCCESS;
}

/* ---- completion ---- */

/* A data operation completed (the `done` of every slot; lock held). */
static void sub_done(ofi_dev_t *d, ofi_op_t *op, const ofi_cqe_t *e) {
  ofi_sub_t *sub = op->arg;
  size_t len = e->len, olen = e->olen;
  int err = e->err;
  const char *errstr = e->errstr;
  ofi_req_t *r = sub->req;
  ofi_comm_t *c = r->comm;
  int i = sub->slot;
  sub->done = true;
  r->completed++;
  c->outstanding--;
  if (err == 0) {
    r->sizes[i] = (int)len;
    if (c->probe_sent_ms) c->last_alive_ms = strand_now_ms(); /* only read while a probe waits */
  } else if (err == FI_ECANCELED && c->closed) {
    /* receive cancelled by close */
  } else if (err == FI_ETRUNC && r->kind == OFI_REQ_RECV) {
    if (r->result == STRAND_SUCCESS) r->result = STRAND_INVALID_USAGE;
    if (!c->closed) {
      char over[48] = "";
      if (olen) snprintf(over, sizeof over, " by %zu byte(s)", olen);
      STRAND_WARN("message from %s on %s is larger than the posted receive of %zu bytes%s (slot %d "
                  "of %d): %s. Sender and receiver disagree on sizes; the receive failed",
                  c->peer_str, d->name, r->lens[i], over, i, r->n, errstr ? errstr : "FI_ETRUNC");
      ofi_ctrl_send(d, c->peer, OFI_CTRL_TRUNC, c->peer_id, c->id, c->nonce, olen, 0, NULL, 0,
                    ofi_conn_ctrl_sent);
      /* When both sides overrun each other's receives at once (a size mismatch usually goes both
       * ways), tcp;ofi_rxm drops the connection in both directions and then refuses every send
       * between the two endpoints (-FI_EAGAIN) until the liveness bound: neither notice gets
       * through (measured: 2 runs of 8 learnt only after STRAND_OFI_PEER_TIMEOUT_S). This
       * side's sends to that peer fail now instead: the comms between the two are done for. */
      ofi_peer_overran(d, c->peer, c->id);
    }
  } else {
    strand_result_t res = ofi_errno_result(err);
    if (r->result == STRAND_SUCCESS) r->result = res;
    ofi_comm_fail(c, res, "%s of %zu bytes failed: %s", r->kind == OFI_REQ_SEND ? "send" : "receive",
                  r->lens[i], errstr ? errstr : fi_strerror(err));
    if (ofi_errno_is_connection_loss(err)) ofi_peer_broken(d, c->peer, errstr ? errstr : fi_strerror(err));
  }
  if (r->abandoned && r->completed >= r->posted) req_put(r);
  ofi_comm_maybe_reap(c);
}

/* STRAND_OFI_SLOW_MS: where a one-time stall sits (docs/benchmarks/ofi.md, "first-use stall"):
 * every request slower than the bound, and each comm's first completed request with the time
 * since the comm began connecting, at INFO with a millisecond clock. */
static void trace_done(const ofi_req_t *r) {
  ofi_comm_t *c = r->comm;
  uint64_t now = strand_now_ms(), took = now - r->t_post_ms;
  bool first = !c->first_done_traced;
  c->first_done_traced = true;
  if (!first && took < ofi_params.slow_ms) return;
  STRAND_INFO(STRAND_SUBSYS_NET, "trace t=%llu ms: %s%s request of %zu bytes (%d slot(s)) %s %s on "
              "%s rail %d, comm %u, took %llu ms from post to completion (comm began connecting "
              "%llu ms ago)",
              (unsigned long long)now, first ? "first " : "slow ",
              r->kind == OFI_REQ_SEND ? "send" : "receive", r->lens[0], r->n,
              r->kind == OFI_REQ_SEND ? "to" : "from", c->peer_str, c->dev->name, c->dev->rail,
              c->id, (unsigned long long)took, (unsigned long long)(now - c->t_start_ms));
}

strand_result_t ofi_test(void *request, int *done, int *sizes) {
  ofi_req_t *r = request;
  if (!r || !done || r->kind == OFI_REQ_FREE) {
    STRAND_WARN("test: invalid request %p", request);
    return STRAND_INVALID_ARGUMENT;
  }
  *done = 0;
  ofi_comm_t *c = r->comm;
  ofi_dev_t *d = c->dev;
  uint64_t t_in = ofi_params.slow_ms ? strand_now_ns() : 0;
  pthread_mutex_lock(&d->lock);
  uint64_t t_locked = t_in ? strand_now_ns() : 0;
  ofi_rail_touch(d);
  if (t_in) trace_enter(d, t_in);
  strand_result_t res = STRAND_SUCCESS;
  if (r->posted < r->n && r->result == STRAND_SUCCESS) {
    int rc = post_recv_slots(r);
    if (rc != 0 && rc != -FI_EAGAIN) {
      r->result = ofi_errno_result(rc);
      STRAND_WARN("fi_trecv on %s failed for slot %d of %d: %s", d->name, r->posted, r->n,
               fi_strerror(-rc));
      r->n = r->posted;
    }
  }
  /* An injected send is done, but its bytes may still sit in the provider's queue (a full socket
   * buffer): progressing here keeps them moving when no other request of the rail is tested. */
  if (r->completed < r->n || r->injected) ofi_progress(d);
  if (r->completed < r->n && r->result == STRAND_SUCCESS && c->failed == STRAND_SUCCESS)
    maybe_probe(c, r->t_post_ms);
  /* A send whose data left but which the caller has not yet been told is done fails with its
   * comm: the failure may be this very message overrunning the receive (TRUNC), and a sender
   * told "done" would never hear of it (issue 23). A receive that completed holds its data. */
  if (r->result == STRAND_SUCCESS && c->failed != STRAND_SUCCESS &&
      (r->completed < r->n || r->kind == OFI_REQ_SEND))
    r->result = c->failed;
  if (r->result != STRAND_SUCCESS) {
    res = r->result;
    STRAND_WARN("%s request %s peer %s on %s failed: %s", r->kind == OFI_REQ_SEND ? "send" : "receive",
             r->kind == OFI_REQ_SEND ? "to" : "from", c->peer_str, d->name,
             c->fail_msg[0] ? c->fail_msg : "see the previous warning");
    r->abandoned = true;
    if (r->completed >= r->posted) req_put(r);
  } else if (r->completed >= r->n) {
    *done = 1;
    if (ofi_params.slow_ms) trace_done(r);
    if (sizes) {
      if (r->kind == OFI_REQ_SEND)
        sizes[0] = (int)r->lens[0];
      else
        for (int i = 0; i < r->n; i++) sizes[i] = r->sizes[i];
    }
    for (int i = 0; i < r->n; i++) strand_profiler_stop(&r->prof[i]);
    req_put(r);
  }
  if (t_in) trace_leave(d, "test", t_in, t_locked);
  pthread_mutex_unlock(&d->lock);
  return res;
}
