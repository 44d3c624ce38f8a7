/* strand-ofi — connection set-up over the fabric itself, and comm lifetime.
 *
 * listen  publishes (the endpoint address of each rail of the device, listen id, nonce) in the
 *         128-byte handle; every rail gets a listen entry with that id and nonce.
 * connect picks a rail k (round robin over the rails both ends have, ofi_rail.c), inserts the
 *         listener's rail-k address into rail k's AV and sends CONNECT (our comm id, our rail-k
 *         address) from rail k; it returns the send comm once ACCEPT (carrying the receiver's
 *         comm id, which every data tag then names) arrives. Each call does a bounded amount of
 *         work. The comm then lives on rail k for good: rails never meet below this file.
 * accept  returns a recv comm built when CONNECT arrived. The listener's side answers CONNECT from
 *         the progress engine, whatever call drives it, so connect never waits for accept()
 *         itself, only for some call on the listening process's device.
 * Anything that does not parse, names an unknown listen id or carries the wrong nonce is dropped
 * (and, when it parses, answered with REJECT) without touching any other connection.
 * Also the comm lifetime the data path relies on (fail, reap, peer loss) and the completion of
 * every control message a comm sends. Calls ofi_rail.c, ofi_progress.c, ofi_dev.c and
 * ofi_config.c only. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sched.h>
#include <sys/random.h>

#include "ofi.h"
#include "strand/clock.h"

static uint64_t random_u64(void) {
  uint64_t v = 0;
  if (getrandom(&v, sizeof v, GRND_NONBLOCK) != (ssize_t)sizeof v)
    v = strand_now_ms() * 0x9e3779b97f4a7c15ULL ^ (uint64_t)(uintptr_t)&v;
  return v ? v : 1;
}

void ofi_comm_fail(ofi_comm_t *c, strand_result_t res, const char *fmt, ...) {
  if (c->failed != STRAND_SUCCESS) {
    if (c->state != OFI_CONN_READY) c->state = OFI_CONN_FAILED;
    return;
  }
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(c->fail_msg, sizeof c->fail_msg, fmt, ap);
  va_end(ap);
  c->failed = res;
  if (c->state != OFI_CONN_READY) c->state = OFI_CONN_FAILED;
  if (!c->closed)
    STRAND_WARN("%s comm to peer %s on %s failed: %s", c->kind == OFI_COMM_SEND ? "send" : "recv",
             c->peer_str, c->dev->name, c->fail_msg);
}

static ofi_comm_t *comm_new(ofi_dev_t *d, ofi_comm_kind_t kind) {
  ofi_comm_t *c = calloc(1, sizeof *c);
  if (!c) return NULL;
  c->kind = kind;
  c->dev = d;
  c->id = ofi_dev_alloc_id(d);
  c->t_start_ms = strand_now_ms();
  c->last_probe_ms = c->t_start_ms;
  if (strand_pool_init(&c->reqs, kind == OFI_COMM_SEND ? "ofi-send-requests" : "ofi-recv-requests",
                       sizeof(ofi_req_t),
                       (uint32_t)(kind == OFI_COMM_SEND ? OFI_SEND_REQS : OFI_RECV_REQS),
                       0) != STRAND_SUCCESS) {
    free(c);
    return NULL;
  }
  c->next = d->comms;
  d->comms = c;
  return c;
}

static void comm_free(ofi_comm_t *c) {
  ofi_dev_t *d = c->dev;
  for (ofi_comm_t **p = &d->comms; *p; p = &(*p)->next)
    if (*p == c) {
      *p = c->next;
      break;
    }
  /* Requests the core never tested again (closed with requests in flight) are simply dropped. */
  uint32_t cursor = 0;
  void *r;
  while ((r = strand_pool_next_used(&c->reqs, &cursor)) != NULL) strand_pool_put(&c->reqs, r);
  strand_pool_destroy(&c->reqs);
  free(c->seqs);
  free(c);
}

void ofi_comm_maybe_reap(ofi_comm_t *c) {
  if (c->closed && c->outstanding <= 0) comm_free(c);
}

/* The provider's connection to `peer` broke: the AV forgets it first (so the next connection gets
 * a fresh one), then every comm that used it fails. */
void ofi_peer_broken(ofi_dev_t *d, fi_addr_t peer, const char *why) {
  ofi_av_forget(d, peer, why);
  for (ofi_comm_t *c = d->comms; c; c = c->next)
    if (c->peer == peer && c->state != OFI_CONN_FAILED)
      ofi_comm_fail(c, STRAND_REMOTE_ERROR, "the provider's connection to the peer broke: %s", why);
}

void ofi_peer_overran(ofi_dev_t *d, fi_addr_t peer, uint32_t recv_id) {
  for (ofi_comm_t *c = d->comms; c; c = c->next)
    if (c->peer == peer && c->kind == OFI_COMM_SEND && !c->closed)
      ofi_comm_fail(c, STRAND_INVALID_USAGE,
                    "a message from this peer overran a receive (comm %u): the two sides disagree "
                    "on sizes, so sends to it stop too",
                    recv_id);
}

void ofi_conn_free_all(ofi_dev_t *d) {
  while (d->comms) comm_free(d->comms);
  while (d->listens) {
    ofi_listen_t *l = d->listens;
    d->listens = l->next;
    free(l);
  }
}

static ofi_listen_t *find_listen(ofi_dev_t *d, uint32_t id) {
  for (ofi_listen_t *l = d->listens; l; l = l->next)
    if (l->id == id) return l;
  return NULL;
}

static void handle_ctrl(ofi_dev_t *d, const ofi_ctrl_msg_t *m, size_t len);

/* ------------------------------------------------------------------------------------------ */

/* Rails: the listen entry handed to NCCL lives on rail 0; rails 1.. each get an entry with the same
 * id and nonce (the id comes from rail 0's allocator, where every listen entry of the device is, so
 * two live listen comms never share an id; on rail k it may equal a comm id, which is harmless:
 * CONNECT looks up listen entries, every other message comms). The handle publishes the address
 * of every rail that opened, in rail order, as many as fit. Each rail under its own lock, one at a
 * time. */
static ofi_listen_t *listen_entry(ofi_dev_t *rail, uint32_t id, uint64_t nonce) {
  ofi_listen_t *l = calloc(1, sizeof *l);
  if (!l) return NULL;
  l->dev = rail;
  l->id = id;
  l->nonce = nonce;
  l->next = rail->listens;
  rail->listens = l;
  return l;
}

strand_result_t ofi_listen(void *ctx, int dev, void *handle, void **listenComm) {
  (void)ctx;
  ofi_dev_t *d = ofi_dev_get(dev);
  if (!d || !handle || !listenComm) {
    STRAND_WARN("listen: invalid argument (dev %d of %d, handle %p, listenComm %p)", dev, ofi_ndevs(),
             handle, (void *)listenComm);
    return STRAND_INVALID_ARGUMENT;
  }
  *listenComm = NULL;
  ofi_handle_t *h = handle;
  memset(h, 0, sizeof *h);
  pthread_mutex_lock(&d->lock);
  strand_result_t r = ofi_rail_open(d, handle_ctrl);
  ofi_listen_t *l = NULL;
  if (r == STRAND_SUCCESS) {
    l = listen_entry(d, ofi_dev_alloc_id(d), random_u64());
    if (!l) r = STRAND_SYSTEM_ERROR;
  }
  if (r != STRAND_SUCCESS) {
    pthread_mutex_unlock(&d->lock);
    return r;
  }
  size_t len = d->ep_name_len;
  memcpy(h->names, d->ep_name, len);
  pthread_mutex_unlock(&d->lock);
  l->rails[0] = l;
  l->nrails = 1;
  int want = d->nrails;
  if ((size_t)want > OFI_HANDLE_NAMES / len) want = (int)(OFI_HANDLE_NAMES / len);
  for (int k = 1; k < want; k++) {
    ofi_dev_t *rk = d->rails[k];
    pthread_mutex_lock(&rk->lock);
    ofi_listen_t *lk = NULL;
    /* A rail that does not open (or, impossibly, has another address size) ends the list: the
     * handle's rails are always 0..nrails-1, and rail 0 alone is today's plugin. */
    if (ofi_rail_open(rk, handle_ctrl) == STRAND_SUCCESS && rk->ep_name_len == len)
      lk = listen_entry(rk, l->id, l->nonce);
    if (lk) memcpy(h->names + (size_t)k * len, rk->ep_name, len);
    pthread_mutex_unlock(&rk->lock);
    if (!lk) break;
    l->rails[k] = lk;
    l->nrails++;
  }
  h->magic = OFI_HANDLE_MAGIC;
  h->listen_id = l->id;
  h->nonce = l->nonce;
  h->nrails = (uint8_t)l->nrails;
  h->name_len = (uint8_t)len;
  *listenComm = l;
  STRAND_INFO(STRAND_SUBSYS_NET, "listen on %s (%s) id %u, %d rail(s)", d->name, d->ep_str, l->id,
              l->nrails);
  return STRAND_SUCCESS;
}

/* A connect still in progress for this handle on this rail (keyed by the listener's rail-0
 * address, listen id and nonce: the same whatever rail the connection went to). */
static ofi_comm_t *find_connecting(ofi_dev_t *d, const ofi_handle_t *h) {
  for (ofi_comm_t *c = d->comms; c; c = c->next)
    if (c->kind == OFI_COMM_SEND && !c->closed && !c->handed_out && c->listen_id == h->listen_id && c->nonce == h->nonce &&
        c->listen_name_len == h->name_len && memcmp(c->listen_name, h->names, h->name_len) == 0)
      return c;
  return NULL;
}

static bool handle_valid(ofi_dev_t *d, const ofi_handle_t *h) {
  if (h->magic == OFI_HANDLE_MAGIC_V1) {
    STRAND_WARN("connect on %s: the handle comes from an older strand-ofi (single-address handle "
                "layout, before rails); every rank must load the same strand-ofi build",
                d->name);
    return false;
  }
  if (h->magic != OFI_HANDLE_MAGIC || h->name_len == 0 || h->name_len > OFI_NAME_MAX ||
      h->nrails == 0 || (size_t)h->nrails * h->name_len > OFI_HANDLE_NAMES || h->listen_id == 0 ||
      h->listen_id > OFI_COMM_ID_MAX) {
    STRAND_WARN("connect on %s: the handle is not a strand-ofi listen handle (magic 0x%08x, %u "
                "address(es) of %u bytes); check both ranks load the same plugin and provider",
                d->name, h->magic, h->nrails, h->name_len);
    return false;
  }
  return true;
}

strand_result_t ofi_connect(void *ctx, int dev, void *handle, void **sendComm,
                            strand_dev_handle_t **sendDevComm) {
  (void)ctx;
  (void)sendDevComm; /* host plugin: the core's pointer stays NULL */
  ofi_dev_t *d = ofi_dev_get(dev);
  if (!d || !handle || !sendComm) {
    STRAND_WARN("connect: invalid argument (dev %d of %d, handle %p, sendComm %p)", dev, ofi_ndevs(),
             handle, (void *)sendComm);
    return STRAND_INVALID_ARGUMENT;
  }
  *sendComm = NULL;
  ofi_handle_t *h = handle;
  if (!handle_valid(d, h)) return STRAND_INVALID_ARGUMENT;
  /* A connect begun by an earlier call lives on the rail it picked: look on each (one lock at a
   * time); the lock of the rail where it is found stays held. */
  ofi_dev_t *rail = NULL;
  ofi_comm_t *c = NULL;
  for (int k = 0; k < d->nrails && !c; k++) {
    rail = d->rails[k];
    pthread_mutex_lock(&rail->lock);
    if (rail->open) c = find_connecting(rail, h);
    if (!c) pthread_mutex_unlock(&rail->lock);
  }
  strand_result_t r = STRAND_SUCCESS;
  if (!c) {
    int k = ofi_rail_pick(d, h->nrails);
    rail = d->rails[k];
    pthread_mutex_lock(&rail->lock);
    r = ofi_rail_open(rail, handle_ctrl);
    if (r != STRAND_SUCCESS && k != 0) {
      /* That rail cannot open here (it warned): rail 0, which every handle carries, instead. */
      pthread_mutex_unlock(&rail->lock);
      k = 0;
      rail = d;
      pthread_mutex_lock(&rail->lock);
      r = ofi_rail_open(rail, handle_ctrl);
    }
    if (r != STRAND_SUCCESS) goto out;
    const uint8_t *name = h->names + (size_t)k * h->name_len;
    fi_addr_t peer;
    r = ofi_av_lookup(rail, name, h->name_len, &peer);
    if (r != STRAND_SUCCESS) goto out;
    c = comm_new(rail, OFI_COMM_SEND);
    if (!c) {
      r = STRAND_SYSTEM_ERROR;
      goto out;
    }
    c->peer = peer;
    c->peer_id = h->listen_id;
    c->nonce = h->nonce;
    c->state = OFI_CONN_SENDING;
    c->listen_id = h->listen_id;
    c->listen_name_len = h->name_len;
    memcpy(c->listen_name, h->names, h->name_len);
    ofi_addr_str(name, h->name_len, c->peer_str, sizeof c->peer_str);
  }
  if (c->state == OFI_CONN_SENDING && strand_now_ms() >= c->retry_at_ms) {
    /* Set first: a send that fails at once reports through ofi_conn_ctrl_sent right away. */
    c->state = OFI_CONN_WAIT_ACCEPT;
    if (ofi_ctrl_send(rail, c->peer, OFI_CTRL_CONNECT, h->listen_id, c->id, c->nonce, 0, c->id,
                      rail->ep_name, rail->ep_name_len, ofi_conn_ctrl_sent) != 0 &&
        c->state == OFI_CONN_WAIT_ACCEPT)
      c->state = OFI_CONN_SENDING; /* every control slot busy: try again on the next call */
  }
  ofi_progress(rail);
  if ((c->state == OFI_CONN_WAIT_ACCEPT || c->state == OFI_CONN_SENDING) &&
      strand_now_ms() - c->t_start_ms > (uint64_t)ofi_params.connect_timeout_ms)
    ofi_comm_fail(c, STRAND_REMOTE_ERROR,
                  "no answer to the connect message within %ld s (STRAND_OFI_CONNECT_TIMEOUT_S); "
                  "is the listening rank alive and polling accept, and can %s reach %s?",
                  ofi_params.connect_timeout_ms / 1000, rail->ep_str, c->peer_str);
  if (c->state == OFI_CONN_READY) {
    c->handed_out = true;
    c->last_probe_ms = strand_now_ms();
    *sendComm = c;
    STRAND_INFO(STRAND_SUBSYS_NET, "connected to %s on %s rail %d: comm %u -> peer comm %u",
                c->peer_str, rail->name, rail->rail, c->id, c->data_id);
  } else if (c->state == OFI_CONN_FAILED) {
    r = c->failed != STRAND_SUCCESS ? c->failed : STRAND_REMOTE_ERROR;
    c->closed = true; /* a CONNECT still in flight refers to it by id, never by pointer */
    comm_free(c);
  }
out:
  pthread_mutex_unlock(&rail->lock);
  return r;
}

/* The connections of every rail's listen entry, one rail (and lock) at a time, starting after the
 * rail that gave the last one. */
strand_result_t ofi_accept(void *listenComm, void **recvComm, strand_dev_handle_t **recvDevComm) {
  (void)recvDevComm;
  ofi_listen_t *l = listenComm;
  if (!l || !recvComm) {
    STRAND_WARN("accept: invalid argument (listenComm %p, recvComm %p)", listenComm, (void *)recvComm);
    return STRAND_INVALID_ARGUMENT;
  }
  *recvComm = NULL;
  for (int i = 0; i < l->nrails && !*recvComm; i++) {
    int k = (l->next_accept + i) % l->nrails;
    ofi_listen_t *lk = l->rails[k];
    ofi_dev_t *d = lk->dev;
    pthread_mutex_lock(&d->lock);
    if (!lk->ready_head) ofi_progress(d);
    ofi_comm_t *c = lk->ready_head;
    if (c) {
      lk->ready_head = c->next_ready;
      if (!lk->ready_head) lk->ready_tail = NULL;
      c->next_ready = NULL;
      c->last_probe_ms = strand_now_ms();
      *recvComm = c;
      l->next_accept = (k + 1) % l->nrails;
      STRAND_INFO(STRAND_SUBSYS_NET, "accepted %s on %s rail %d: comm %u <- peer comm %u",
                  c->peer_str, d->name, d->rail, c->id, c->peer_id);
    }
    pthread_mutex_unlock(&d->lock);
  }
  return STRAND_SUCCESS;
}

/* Cancel every posted receive of a closing comm (lock held); the cancelled slots complete with
 * FI_ECANCELED through the data path's completion. */
static void cancel_posted_recvs(ofi_comm_t *c) {
  if (c->kind != OFI_COMM_RECV) return;
  uint32_t cursor = 0;
  ofi_req_t *r;
  while ((r = strand_pool_next_used(&c->reqs, &cursor)) != NULL) {
    if (r->kind != OFI_REQ_RECV) continue;
    for (int i = 0; i < r->posted; i++)
      if (!r->subs[i].done) fi_cancel(&c->dev->ep->fid, &r->subs[i].op.fi_ctx);
  }
}

/* Close: cancel what can be cancelled, let in-flight operations drain for a bounded time, and if
 * some are still owned by libfabric keep the comm (memory only) until they complete or the device
 * closes: freeing it earlier would hand libfabric a dangling context. */
static strand_result_t comm_close(ofi_comm_t *c) {
  ofi_dev_t *d = c->dev;
  pthread_mutex_lock(&d->lock);
  c->closed = true;
  c->outstanding++; /* our own reference: completions during the drain must not free it */
  cancel_posted_recvs(c);
  uint64_t t0 = strand_now_ms();
  for (;;) {
    ofi_progress(d);
    if (c->outstanding <= 1 || strand_now_ms() - t0 >= (uint64_t)ofi_params.close_drain_ms) break;
    pthread_mutex_unlock(&d->lock);
    sched_yield();
    pthread_mutex_lock(&d->lock);
  }
  c->outstanding--;
  if (c->outstanding > 0)
    STRAND_INFO(STRAND_SUBSYS_NET,
                "comm %u to %s closed with %d operation(s) still owned by %s; kept until they "
                "complete",
                c->id, c->peer_str, c->outstanding, d->name);
  ofi_comm_maybe_reap(c);
  pthread_mutex_unlock(&d->lock);
  return STRAND_SUCCESS;
}

strand_result_t ofi_close_send(void *sendComm) {
  if (!sendComm) return STRAND_INVALID_ARGUMENT;
  return comm_close(sendComm);
}

strand_result_t ofi_close_recv(void *recvComm) {
  if (!recvComm) return STRAND_INVALID_ARGUMENT;
  return comm_close(recvComm);
}

/* Every rail's entry, each under its own lock; rail 0's (the one NCCL holds) goes last. */
strand_result_t ofi_close_listen(void *listenComm) {
  ofi_listen_t *l = listenComm;
  if (!l) return STRAND_INVALID_ARGUMENT;
  for (int k = l->nrails - 1; k >= 0; k--) {
    ofi_listen_t *lk = l->rails[k];
    ofi_dev_t *d = lk->dev;
    pthread_mutex_lock(&d->lock);
    for (ofi_listen_t **p = &d->listens; *p; p = &(*p)->next)
      if (*p == lk) {
        *p = lk->next;
        break;
      }
    /* Connections that arrived but were never accepted. */
    while (lk->ready_head) {
      ofi_comm_t *c = lk->ready_head;
      lk->ready_head = c->next_ready;
      c->closed = true;
      ofi_comm_maybe_reap(c);
    }
    pthread_mutex_unlock(&d->lock);
    if (k > 0) free(lk);
  }
  free(l);
  return STRAND_SUCCESS;
}

/* ------------------------------------------------------------------------------------------ */
/* control messages                                                                             */

/* Whether a comm, or a control send in flight, still uses `peer`. */
static bool peer_in_use(ofi_dev_t *d, fi_addr_t peer) {
  for (ofi_comm_t *c = d->comms; c; c = c->next)
    if (c->peer == peer) return true;
  for (int i = 0; i < OFI_CTRL_SENDS; i++)
    if (d->ctrl_send[i].busy && d->ctrl_send[i].dest == peer) return true;
  return false;
}

/* A reply (REJECT, GONE) went to an address this process may have no comm with: once the
 * provider is done with it, the address leaves the AV again unless something uses it, so a run of
 * connect or probe messages naming ever new addresses (strangers, ranks of an earlier job holding
 * stale handles) cannot grow the AV and its cache without bound. */
static void reply_sent(ofi_dev_t *d, ofi_ctrl_send_t *cs, const ofi_cqe_t *e) {
  fi_addr_t peer = cs->dest;
  ofi_conn_ctrl_sent(d, cs, e);
  if (!peer_in_use(d, peer)) ofi_av_release(d, peer);
}

static void send_reply(ofi_dev_t *d, fi_addr_t peer, uint16_t kind, uint32_t dst, uint32_t src,
                       uint64_t nonce) {
  if (ofi_ctrl_send(d, peer, kind, dst, src, nonce, 0, 0, NULL, 0, reply_sent) != 0 &&
      !peer_in_use(d, peer))
    ofi_av_release(d, peer); /* no free control slot: no reply, and nothing keeps the address */
}

static void on_connect(ofi_dev_t *d, const ofi_ctrl_msg_t *m) {
  char from[64];
  ofi_addr_str(m->name, m->name_len, from, sizeof from);
  fi_addr_t peer;
  if (ofi_av_lookup(d, m->name, m->name_len, &peer) != STRAND_SUCCESS) return;
  ofi_listen_t *l = find_listen(d, m->dst_id);
  if (!l || l->nonce != m->nonce) {
    STRAND_WARN("connect message from %s on %s names %s listen id %u; rejected (stale handle, closed "
             "listen comm, or a handle from another job)",
             from, d->name, l ? "the wrong nonce for" : "unknown", m->dst_id);
    send_reply(d, peer, OFI_CTRL_REJECT, m->src_id, 0, m->nonce);
    return;
  }
  ofi_comm_t *c = comm_new(d, OFI_COMM_RECV);
  if (!c) {
    STRAND_WARN("out of memory accepting %s on %s", from, d->name);
    return;
  }
  c->peer = peer;
  c->peer_id = m->src_id;
  c->data_id = c->id;
  c->nonce = m->nonce;
  c->state = OFI_CONN_READY;
  snprintf(c->peer_str, sizeof c->peer_str, "%s", from);
  if (ofi_ctrl_send(d, peer, OFI_CTRL_ACCEPT, m->src_id, c->id, m->nonce, 0, c->id, NULL, 0,
                    ofi_conn_ctrl_sent) != 0) {
    STRAND_WARN("no free control slot to answer %s on %s; its connect will time out", from, d->name);
    c->closed = true;
    ofi_comm_maybe_reap(c);
    return;
  }
  if (l->ready_tail)
    l->ready_tail->next_ready = c;
  else
    l->ready_head = c;
  l->ready_tail = c;
}

/* A control message arrived (the control channel's on_ctrl handler; lock held). */
static void handle_ctrl(ofi_dev_t *d, const ofi_ctrl_msg_t *m, size_t len) {
  if (len < offsetof(ofi_ctrl_msg_t, name) || m->magic != OFI_CTRL_MAGIC ||
      m->version != OFI_CTRL_VERSION || m->name_len > OFI_NAME_MAX ||
      len < offsetof(ofi_ctrl_msg_t, name) + m->name_len) {
    STRAND_WARN("malformed control message (%zu bytes, magic 0x%08x) on %s dropped", len,
             len >= 4 ? m->magic : 0, d->name);
    return;
  }
  ofi_comm_t *c = (m->kind == OFI_CTRL_CONNECT) ? NULL : ofi_dev_find_comm(d, m->dst_id);
  bool match = c && c->nonce == m->nonce;
  switch (m->kind) {
    case OFI_CTRL_CONNECT:
      if (m->name_len == 0) break;
      on_connect(d, m);
      return;
    case OFI_CTRL_ACCEPT:
      if (match && c->kind == OFI_COMM_SEND && c->state == OFI_CONN_WAIT_ACCEPT) {
        c->data_id = m->src_id;
        c->peer_id = m->src_id;
        c->state = OFI_CONN_READY;
        return;
      }
      break;
    case OFI_CTRL_REJECT:
      if (match && c->kind == OFI_COMM_SEND && c->state != OFI_CONN_READY) {
        ofi_comm_fail(c, STRAND_REMOTE_ERROR,
                      "the listener rejected the connection (its listen comm is closed or the "
                      "handle is stale)");
        return;
      }
      break;
    case OFI_CTRL_PROBE:
      if (!match || c->closed) {
        fi_addr_t peer;
        if (m->name_len && ofi_av_lookup(d, m->name, m->name_len, &peer) == STRAND_SUCCESS)
          send_reply(d, peer, OFI_CTRL_GONE, m->src_id, m->dst_id, m->nonce);
      }
      return;
    case OFI_CTRL_GONE:
      if (match && !c->closed) {
        ofi_comm_fail(c, STRAND_REMOTE_ERROR, "the peer closed its end of this connection");
        return;
      }
      break;
    case OFI_CTRL_TRUNC:
      if (match && c->kind == OFI_COMM_SEND) {
        /* tcp;ofi_rxm does not say by how much an eager message overran (arg 0). */
        char by[48] = "";
        if (m->arg) snprintf(by, sizeof by, " %llu byte(s)", (unsigned long long)m->arg);
        ofi_comm_fail(c, STRAND_INVALID_USAGE,
                      "the receiver got a message%s larger than its posted receive (libfabric "
                      "truncation); sender and receiver disagree on sizes, the message is lost",
                      by);
        return;
      }
      break;
    default:
      STRAND_WARN("control message of unknown kind %u on %s dropped", m->kind, d->name);
      return;
  }
  STRAND_INFO(STRAND_SUBSYS_NET, "control message kind %u for comm %u on %s ignored (no such comm, or out of date)",
           m->kind, m->dst_id, d->name);
}

void ofi_conn_ctrl_sent(ofi_dev_t *d, ofi_ctrl_send_t *cs, const ofi_cqe_t *e) {
  int err = e->err;
  const char *errstr = e->errstr;
  if (!cs->owner_comm) {
    if (err != FI_ECANCELED && cs->msg.kind == OFI_CTRL_TRUNC) {
      /* A truncation can take the provider connection down with it: tcp;ofi_rxm drops its
       * connection between the two endpoints when an eager message overruns the receive. A
       * notice sent meanwhile fails (ECONNRESET / ENOTCONN) until rxm has set up a new one, which
       * takes its progress engine some calls (measured: four resends back to back all failed;
       * one 100 ms later went through) — or, worse, completes without error and is lost when the
       * peer drops that connection for its own truncation (two ranks truncating each other's
       * messages: one notice of two never arrived). So the notice is sent again every
       * OFI_TRUNC_RESEND_MS until one copy has gone through after OFI_TRUNC_SPREAD_MS, and while
       * they fail for as long as a peer may be unreachable; the sender fails its comm on the
       * first copy and ignores the rest. */
      uint64_t age = strand_now_ms() - cs->first_ms;
      bool again = err ? age < (uint64_t)ofi_params.peer_timeout_ms : age < OFI_TRUNC_SPREAD_MS;
      if (again && ofi_ctrl_resend(d, cs->dest, &cs->msg, cs->attempts + 1, cs->first_ms,
                                   OFI_TRUNC_RESEND_MS, ofi_conn_ctrl_sent) == 0)
        return;
      if (err)
        STRAND_WARN("could not tell the sender of a truncated message on %s (%d attempts in %ld "
                    "s): %s; only this side reports the error",
                    d->name, cs->attempts, (long)(age / 1000), errstr ? errstr : "");
      return;
    }
    if (err && err != FI_ECANCELED)
      STRAND_INFO(STRAND_SUBSYS_NET, "control message kind %u on %s not delivered: %s", cs->msg.kind, d->name,
               errstr ? errstr : "");
    return;
  }
  ofi_comm_t *c = ofi_dev_find_comm(d, cs->owner_comm);
  if (!c) return;
  c->outstanding--;
  /* A connect message the provider could not deliver (peer endpoint not reachable yet, provider
   * connection set-up refused or timed out under load) is sent again until the connect bound. */
  if (err && err != FI_ECANCELED && cs->msg.kind == OFI_CTRL_CONNECT &&
      c->state == OFI_CONN_WAIT_ACCEPT &&
      strand_now_ms() - c->t_start_ms < (uint64_t)ofi_params.connect_timeout_ms) {
    STRAND_INFO(STRAND_SUBSYS_NET, "connect message to %s on %s not delivered (%s); retrying",
                c->peer_str, d->name, errstr ? errstr : "");
    c->state = OFI_CONN_SENDING;
    c->retry_at_ms = strand_now_ms() + 100;
    ofi_comm_maybe_reap(c);
    return;
  }
  if (err == 0) {
    if (cs->msg.kind == OFI_CTRL_PROBE) c->probe_sent_ms = 0;
  } else if (err != FI_ECANCELED) {
    if (ofi_errno_is_connection_loss(err) && cs->msg.kind != OFI_CTRL_CONNECT)
      ofi_peer_broken(d, c->peer, errstr ? errstr : "");
    ofi_comm_fail(c, ofi_errno_result(err), "%s message to the peer failed: %s",
                  cs->msg.kind == OFI_CTRL_CONNECT  ? "connect"
                  : cs->msg.kind == OFI_CTRL_PROBE  ? "liveness probe"
                  : cs->msg.kind == OFI_CTRL_ACCEPT ? "accept"
                                                    : "control",
                  errstr ? errstr : "unknown error");
  }
  ofi_comm_maybe_reap(c);
}
