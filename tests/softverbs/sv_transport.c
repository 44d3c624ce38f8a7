/* softverbs transport: the per-context progress thread, the listener, and the requester and
 * responder halves of every QP's TCP stream (see sv.h for the design, sv_wire.h for the format).
 * Everything here runs under the context lock; sockets are non-blocking and every partial read or
 * write is resumed from saved state, so one slow peer never stalls the others. */
#include <errno.h>
#include <fcntl.h>
#include <arpa/inet.h>
#include <netinet/tcp.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sched.h>
#include <unistd.h>

#include "sv.h"

typedef struct sv_resp {
  struct sv_resp *next;
  sv_hdr_t hdr;
  void *data; /* READ_RESP payload (registered memory of this process) */
  bool owned;   /* data is a copy of GPU memory, freed with the response */
  uint64_t off; /* bytes of header + payload written */
} sv_resp_t;

enum sv_role { SV_PENDING, SV_REQUESTER, SV_RESPONDER };
enum sv_action { A_NONE, A_WRITE, A_WRITE_IMM, A_SEND, A_NAK, A_ATOMIC };

typedef struct sv_conn {
  struct sv_conn *next;
  int fd;
  enum sv_role role;
  sv_qp_t *qp;
  bool dead;
  uint32_t events;
  /* rx: a header, then maybe a payload into iov (or into the scratch sink when discarding) */
  sv_hdr_t hdr;
  size_t hdr_got;
  bool in_payload, discard;
  uint64_t left;
  struct iovec iov[SV_MAX_SGE];
  int niov, iov_i;
  uint8_t *rxbuf; /* staging buffer, SV_RXBUF bytes; [rpos, rend) not yet parsed */
  uint32_t rpos, rend;
  enum sv_action action;
  enum ibv_wc_status nak_status;
  sv_atomic_args_t atomic_args; /* the operands of the atomic request being received */
  /* responder */
  bool parked, nakked;
  uint32_t reads_out; /* READ responses queued, not yet fully sent: requests behind a READ wait */
  uint64_t park_deadline;
  sv_resp_t *txq, *txq_tail;
  /* responder: an RDMA WRITE into GPU memory lands in gpu_buf, then goes to gpu_dst (sv_gpu.c) */
  void *gpu_ctx; /* CUDA context of the WRITE in progress; NULL when it targets host memory */
  uint64_t gpu_dst;
  uint8_t *gpu_buf;
  size_t gpu_cap;
} sv_conn_t;

/* IB min_rnr_timer encodings, in microseconds x 100 (0 means 655.36 ms). */
static const uint32_t rnr_us100[32] = {
  65536, 1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64, 96, 128, 192, 256, 384, 512, 768, 1024,
  1536, 2048, 3072, 4096, 6144, 8192, 12288, 16384, 24576, 32768, 49152};

static uint64_t rnr_ns(uint8_t code) { return (uint64_t)rnr_us100[code & 31] * 10000ull; }

/* ---------------------------------------------------------------- connections */
static void conn_events(sv_context_t *c, sv_conn_t *k, uint32_t ev)
{
  if (k->dead || k->events == ev) return;
  struct epoll_event e = {.events = ev, .data.ptr = k};
  epoll_ctl(c->epfd, EPOLL_CTL_MOD, k->fd, &e);
  k->events = ev;
}

static sv_conn_t *conn_new(sv_context_t *c, int fd, enum sv_role role, uint32_t ev)
{
  sv_conn_t *k = calloc(1, sizeof(*k));
  if (!k) return NULL;
  k->fd = fd;
  k->role = role;
  k->events = ev;
  struct epoll_event e = {.events = ev, .data.ptr = k};
  if (epoll_ctl(c->epfd, EPOLL_CTL_ADD, fd, &e) != 0) {
    free(k);
    return NULL;
  }
  return k;
}

static void conn_close(sv_context_t *c, sv_conn_t *k)
{
  if (!k || k->dead) return;
  k->dead = true;
  epoll_ctl(c->epfd, EPOLL_CTL_DEL, k->fd, NULL);
  /* Closing with unread bytes makes TCP send a reset, which can destroy what the peer has not
   * read yet (a NAK, the last ACKs): read what already arrived first (bounded). */
  for (int i = 0; i < 64 && recv(k->fd, c->scratch, sizeof(c->scratch), MSG_DONTWAIT) > 0; i++) {
  }
  close(k->fd);
  k->fd = -1;
  while (k->txq) {
    sv_resp_t *r = k->txq;
    k->txq = r->next;
    if (r->owned) free(r->data);
    free(r);
  }
  if (k->qp) {
    if (k->qp->req == k) k->qp->req = NULL;
    if (k->qp->resp == k) k->qp->resp = NULL;
    k->qp = NULL;
  }
  for (sv_conn_t **list = &c->pending; list; list = list == &c->pending ? &c->orphans : NULL) {
    for (sv_conn_t **p = list; *p; p = &(*p)->next) {
      if (*p == k) {
        *p = k->next;
        break;
      }
    }
  }
  k->next = c->grave;
  c->grave = k;
}

static void tune_socket(int fd)
{
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

/* Small control messages go straight out when the socket is idle (they nearly always fit).
 * Returns the queued response, or NULL when none was added. */
static sv_resp_t *resp_queue(sv_context_t *c, sv_conn_t *k, const sv_hdr_t *h, void *data)
{
  if (k->dead) return NULL;
  /* cumulative ACKs: a newer one replaces one that has not started going out */
  if (h->op == SV_OP_ACK && k->txq_tail && k->txq_tail->hdr.op == SV_OP_ACK &&
      k->txq_tail->off == 0) {
    k->txq_tail->hdr.psn = h->psn;
    return NULL;
  }
  sv_resp_t *r = calloc(1, sizeof(*r));
  if (!r) {
    sv_log("out of memory queueing a response: closing the connection of QP %#x",
           k->qp ? k->qp->qp.qp_num : 0);
    conn_close(c, k);
    return NULL;
  }
  r->hdr = *h;
  r->data = data;
  if (h->op == SV_OP_READ_RESP) k->reads_out++;
  if (k->txq_tail)
    k->txq_tail->next = r;
  else
    k->txq = r;
  k->txq_tail = r;
  return r;
}

static void resp_tx(sv_context_t *c, sv_conn_t *k)
{
  while (!k->dead && k->txq) {
    sv_resp_t *r = k->txq;
    uint64_t dlen = r->hdr.op == SV_OP_READ_RESP ? r->hdr.len : 0;
    struct iovec v[2];
    int n = 0;
    if (r->off < sizeof(sv_hdr_t)) {
      v[n].iov_base = (char *)&r->hdr + r->off;
      v[n++].iov_len = sizeof(sv_hdr_t) - r->off;
      if (dlen) {
        v[n].iov_base = r->data;
        v[n++].iov_len = dlen;
      }
    } else {
      v[n].iov_base = (char *)r->data + (r->off - sizeof(sv_hdr_t));
      v[n++].iov_len = dlen - (r->off - sizeof(sv_hdr_t));
    }
    struct msghdr m = {.msg_iov = v, .msg_iovlen = (size_t)n};
    ssize_t w = sendmsg(k->fd, &m, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (w < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) {
        conn_events(c, k, (k->parked || k->reads_out ? 0 : EPOLLIN) | EPOLLOUT);
        return;
      }
      conn_close(c, k);
      return;
    }
    r->off += (uint64_t)w;
    if (r->off == sizeof(sv_hdr_t) + dlen) {
      if (r->hdr.op == SV_OP_READ_RESP) k->reads_out--;
      k->txq = r->next;
      if (!k->txq) k->txq_tail = NULL;
      if (r->owned) free(r->data);
      free(r);
    }
  }
  if (k->dead) return;
  conn_events(c, k, k->parked ? 0 : EPOLLIN);
}

/* Receive side: small messages are read through a per-connection staging buffer (one recv()
 * usually brings several whole requests or responses); a large payload with nothing staged goes
 * straight from the socket into its destination (registered memory) without a staging copy. */
#define SV_RXBUF (64u << 10)
#define SV_DIRECT_MIN (16u << 10)

/* Refills the staging buffer: >0 bytes, 0 would block, -1 EOF/error. */
static int rx_fill(sv_conn_t *k)
{
  if (!k->rxbuf) {
    k->rxbuf = malloc(SV_RXBUF);
    if (!k->rxbuf) return -1;
  }
  if (k->rpos == k->rend) k->rpos = k->rend = 0;
  for (;;) {
    ssize_t r = recv(k->fd, k->rxbuf + k->rend, SV_RXBUF - k->rend, 0);
    if (r > 0) {
      k->rend += (uint32_t)r;
      return 1;
    }
    if (r < 0 && errno == EINTR) continue;
    if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return 0;
    return -1;
  }
}

/* Reads the header (returns true when complete), false on would-block; *eof on EOF/error. */
static bool rx_header(sv_conn_t *k, bool *eof)
{
  while (k->hdr_got < sizeof(sv_hdr_t)) {
    uint32_t avail = k->rend - k->rpos;
    if (avail) {
      uint32_t t = (uint32_t)(sizeof(sv_hdr_t) - k->hdr_got);
      if (t > avail) t = avail;
      memcpy((char *)&k->hdr + k->hdr_got, k->rxbuf + k->rpos, t);
      k->rpos += t;
      k->hdr_got += t;
      continue;
    }
    int r = rx_fill(k);
    if (r == 0) return false;
    if (r < 0) {
      *eof = true;
      return false;
    }
  }
  return true;
}

/* Moves n bytes of payload into the destination iovecs (or drops them when discarding). */
static void rx_consume(sv_conn_t *k, const uint8_t *src, size_t n)
{
  k->left -= n;
  if (k->discard) return;
  while (n > 0 && k->iov_i < k->niov) {
    struct iovec *x = &k->iov[k->iov_i];
    size_t t = n < x->iov_len ? n : x->iov_len;
    if (src) memcpy(x->iov_base, src, t);
    src = src ? src + t : NULL;
    x->iov_base = (char *)x->iov_base + t;
    x->iov_len -= t;
    n -= t;
    if (x->iov_len == 0) k->iov_i++;
  }
}

/* Receives the payload into its destination; 1 done, 0 would block, -1 EOF/error. */
static int rx_payload(sv_context_t *c, sv_conn_t *k)
{
  while (k->left > 0) {
    uint32_t avail = k->rend - k->rpos;
    if (avail) {
      size_t t = k->left < avail ? (size_t)k->left : avail;
      rx_consume(k, k->rxbuf + k->rpos, t);
      k->rpos += (uint32_t)t;
      continue;
    }
    if (k->left < SV_DIRECT_MIN) {
      int r = rx_fill(k);
      if (r <= 0) return r;
      continue;
    }
    struct iovec v[SV_MAX_SGE];
    int n = 0;
    if (k->discard) {
      v[0].iov_base = c->scratch;
      v[0].iov_len = k->left < sizeof(c->scratch) ? k->left : sizeof(c->scratch);
      n = 1;
    } else {
      for (int i = k->iov_i; i < k->niov; i++) v[n++] = k->iov[i];
    }
    ssize_t r = readv(k->fd, v, n);
    if (r == 0) return -1;
    if (r < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) return 0;
      return -1;
    }
    rx_consume(k, NULL, (size_t)r);
    if (k->qp) k->qp->req_progress = sv_now_ns();
  }
  return 1;
}

/* Points k->iov at `src` truncated to len bytes. */
static void set_iov(sv_conn_t *k, const struct iovec *src, uint32_t nsrc, uint64_t len)
{
  k->niov = 0;
  k->iov_i = 0;
  uint64_t rest = len;
  for (uint32_t i = 0; i < nsrc && rest > 0; i++) {
    size_t t = src[i].iov_len < rest ? src[i].iov_len : (size_t)rest;
    if (t == 0) continue;
    k->iov[k->niov].iov_base = src[i].iov_base;
    k->iov[k->niov++].iov_len = t;
    rest -= t;
  }
  k->left = len;
  k->discard = false;
}

/* ---------------------------------------------------------------- requester */
static uint64_t seq_of(sv_qp_t *qp, uint32_t psn)
{
  return qp->sq_head + (uint32_t)(psn - (uint32_t)qp->sq_head);
}

static void req_backoff(sv_context_t *c, sv_qp_t *qp)
{
  conn_close(c, qp->req);
  qp->req_state = SV_REQ_BACKOFF;
  if (qp->backoff_ms < 1) qp->backoff_ms = 1;
  qp->req_deadline = sv_now_ns() + qp->backoff_ms * 1000000ull;
  if (qp->backoff_ms < 64) qp->backoff_ms *= 2;
  qp->tx_started = false; /* the new stream starts over at sq_head (nothing was executed) */
  qp->sq_tx = qp->sq_head;
  qp->tx_retries = 0;
}

static bool port_up(sv_context_t *c, sv_qp_t *qp)
{
  int p = qp->attr.port_num ? qp->attr.port_num : 1;
  return !c->fatal && c->port_state[p] == IBV_PORT_ACTIVE;
}

static void req_connect(sv_context_t *c, sv_qp_t *qp)
{
  if (!port_up(c, qp)) {
    if (qp->sq_head < qp->sq_tail) sv_qp_set_error(qp, IBV_WC_RETRY_EXC_ERR);
    return;
  }
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    sv_log("QP %#x: socket: %s", qp->qp.qp_num, strerror(errno));
    req_backoff(c, qp);
    return;
  }
  tune_socket(fd);
  struct sockaddr_in me = {.sin_family = AF_INET, .sin_addr = c->cfg->ip};
  if (bind(fd, (struct sockaddr *)&me, sizeof(me)) != 0) { /* source address = our GID */
    sv_log("QP %#x: bind %s: %s", qp->qp.qp_num, inet_ntoa(c->cfg->ip), strerror(errno));
  }
  int rc = connect(fd, (struct sockaddr *)&qp->peer, sizeof(qp->peer));
  if (rc != 0 && errno != EINPROGRESS) {
    SV_TRACE("QP %#x: connect %s:%u: %s (retrying)", qp->qp.qp_num, inet_ntoa(qp->peer.sin_addr),
             ntohs(qp->peer.sin_port), strerror(errno));
    close(fd);
    qp->req_state = SV_REQ_BACKOFF;
    req_backoff(c, qp);
    return;
  }
  sv_conn_t *k = conn_new(c, fd, SV_REQUESTER, EPOLLOUT);
  if (!k) {
    close(fd);
    req_backoff(c, qp);
    return;
  }
  k->qp = qp;
  qp->req = k;
  qp->req_state = SV_REQ_CONNECTING;
}

static void req_connected(sv_context_t *c, sv_qp_t *qp)
{
  sv_conn_t *k = qp->req;
  int err = 0;
  socklen_t len = sizeof(err);
  getsockopt(k->fd, SOL_SOCKET, SO_ERROR, &err, &len);
  if (err) {
    SV_TRACE("QP %#x: connect %s:%u: %s (retrying)", qp->qp.qp_num, inet_ntoa(qp->peer.sin_addr),
             ntohs(qp->peer.sin_port), strerror(err));
    req_backoff(c, qp);
    return;
  }
  sv_hdr_t h = {.op = SV_OP_HELLO, .imm = SV_HELLO_MAGIC, .psn = qp->qp.qp_num,
                .rkey = qp->attr.dest_qp_num};
  if (send(k->fd, &h, sizeof(h), MSG_NOSIGNAL) != (ssize_t)sizeof(h)) {
    req_backoff(c, qp);
    return;
  }
  qp->req_state = SV_REQ_HELLO;
  conn_events(c, k, EPOLLIN);
}

/* The WR at sq_tx cannot be transmitted and fails the QP; completions stay in order, so this
 * waits until every earlier WR has completed. Returns true when the QP failed. */
static bool fail_at_head(sv_qp_t *qp, enum ibv_wc_status st)
{
  if (qp->sq_tx != qp->sq_head) return false;
  sv_qp_set_error(qp, st);
  return true;
}

/* Payload bytes of one request on the wire: none for a READ request, the two operands for an
 * atomic (its local SGE is where the answer goes), the data otherwise. */
static uint64_t wr_payload(const sv_swqe_t *w)
{
  if (sv_wr_is_atomic(w->op)) return sizeof(sv_atomic_args_t);
  return w->op == IBV_WR_RDMA_READ ? 0 : w->len;
}

/* Bytes of one request on the wire: header, then the payload. */
static uint64_t wr_bytes(const sv_swqe_t *w)
{
  return sizeof(sv_hdr_t) + wr_payload(w);
}

static void build_hdr(sv_swqe_t *w, uint64_t seq)
{
  static const uint8_t ops[] = {[IBV_WR_RDMA_WRITE] = SV_OP_WRITE,
                                [IBV_WR_RDMA_WRITE_WITH_IMM] = SV_OP_WRITE_IMM,
                                [IBV_WR_SEND] = SV_OP_SEND,
                                [IBV_WR_SEND_WITH_IMM] = SV_OP_SEND_IMM,
                                [IBV_WR_RDMA_READ] = SV_OP_READ_REQ,
                                [IBV_WR_ATOMIC_FETCH_AND_ADD] = SV_OP_FETCH_ADD,
                                [IBV_WR_ATOMIC_CMP_AND_SWP] = SV_OP_CMP_SWP};
  memset(&w->hdr, 0, sizeof(w->hdr));
  w->hdr.op = ops[w->op];
  w->hdr.imm = w->imm;
  w->hdr.psn = (uint32_t)seq;
  w->hdr.rkey = w->rkey;
  w->hdr.raddr = w->raddr;
  /* an atomic's len is its operands' (the word is 8 bytes); a READ's is the length asked for */
  w->hdr.len = sv_wr_is_atomic(w->op) ? sizeof(sv_atomic_args_t) : w->len;
}

/* Appends the iovecs of request w from byte `skip` on to v[n..]; returns the new count. */
static int wr_iov(sv_swqe_t *w, uint64_t skip, struct iovec *v, int n)
{
  uint64_t plen = wr_payload(w);
  if (skip < sizeof(sv_hdr_t)) {
    v[n].iov_base = (char *)&w->hdr + skip;
    v[n++].iov_len = sizeof(sv_hdr_t) - skip;
    skip = 0;
  } else {
    skip -= sizeof(sv_hdr_t);
  }
  if (sv_wr_is_atomic(w->op)) { /* the operands; the SGE is the destination of the answer */
    v[n].iov_base = (char *)&w->atomic + skip;
    v[n++].iov_len = plen - skip;
    return n;
  }
  for (uint32_t i = 0; plen && i < w->niov; i++) {
    if (skip >= w->iov[i].iov_len) {
      skip -= w->iov[i].iov_len;
      continue;
    }
    v[n].iov_base = (char *)w->iov[i].iov_base + skip;
    v[n++].iov_len = w->iov[i].iov_len - skip;
    skip = 0;
  }
  return n;
}

#define SV_TX_IOV 64
#define SV_TX_BATCH (256u << 10)

static void req_tx(sv_context_t *c, sv_qp_t *qp)
{
  const sv_config_t *cfg = c->cfg;
  while (qp->qp.state == IBV_QPS_RTS && qp->req_state == SV_REQ_UP && qp->req &&
         qp->sq_tx < qp->sq_tail) {
    sv_conn_t *k = qp->req;
    if (k->events & EPOLLOUT) return; /* socket full: wait for writable */
    sv_swqe_t *w = &qp->sq[qp->sq_tx % qp->sq_cap];
    uint64_t now = sv_now_ns();
    if (!qp->tx_started) {
      if (qp->tx_wait_until > now) return;
      if (w->local_err != IBV_WC_SUCCESS) {
        fail_at_head(qp, w->local_err);
        return;
      }
      if (cfg->fail_qp_after && qp->ops_done >= cfg->fail_qp_after) {
        if (fail_at_head(qp, IBV_WC_GENERAL_ERR)) {
          sv_log("QP %#x failed by SOFTVERBS_FAIL_QP_AFTER=%llu", qp->qp.qp_num,
                 (unsigned long long)cfg->fail_qp_after);
          sv_async_event(c, IBV_EVENT_QP_FATAL, &qp->qp);
        }
        return;
      }
      if (cfg->drop_ppm && sv_rand_ppm(&qp->rng) < cfg->drop_ppm) {
        /* The request is lost on the wire: the requester notices after its ACK timeout and
         * retransmits, up to retry_cnt times. */
        qp->tx_retries++;
        SV_TRACE("QP %#x: request %llu dropped (retry %u of %u)", qp->qp.qp_num,
                 (unsigned long long)qp->sq_tx, qp->tx_retries, qp->attr.retry_cnt);
        if (qp->tx_retries > qp->attr.retry_cnt) {
          if (!fail_at_head(qp, IBV_WC_RETRY_EXC_ERR)) qp->tx_retries--; /* decide at the head */
          return;
        }
        uint64_t wait = qp->attr.timeout ? (4096ull << qp->attr.timeout) : UINT64_MAX;
        uint64_t cap = (uint64_t)cfg->retx_cap_us * 1000ull;
        qp->tx_wait_until = now + (wait < cap ? wait : cap);
        qp->req_progress = now;
        return;
      }
      if (!qp->tx_delayed && cfg->delay_ppm && sv_rand_ppm(&qp->rng) < cfg->delay_ppm) {
        qp->tx_delayed = true;
        qp->tx_wait_until = now + (uint64_t)cfg->delay_us * 1000ull;
        return;
      }
      build_hdr(w, qp->sq_tx);
      qp->tx_off = 0;
      qp->tx_started = true;
    }
    /* One sendmsg carries the rest of this WR and, when no per-request fault can apply, the
     * WRs queued behind it (many small requests per system call). */
    struct iovec v[SV_TX_IOV];
    int n = wr_iov(w, qp->tx_off, v, 0);
    uint64_t bytes = wr_bytes(w) - qp->tx_off;
    bool batch = !cfg->drop_ppm && !cfg->delay_ppm && !cfg->fail_qp_after;
    for (uint64_t s = qp->sq_tx + 1; batch && s < qp->sq_tail && bytes < SV_TX_BATCH; s++) {
      sv_swqe_t *x = &qp->sq[s % qp->sq_cap];
      if (x->local_err != IBV_WC_SUCCESS || n + 1 + (int)x->niov > SV_TX_IOV) break;
      build_hdr(x, s);
      n = wr_iov(x, 0, v, n);
      bytes += wr_bytes(x);
    }
    struct msghdr m = {.msg_iov = v, .msg_iovlen = (size_t)n};
    ssize_t r = sendmsg(k->fd, &m, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (r < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) {
        conn_events(c, k, EPOLLIN | EPOLLOUT);
        return;
      }
      SV_TRACE("QP %#x: send to peer: %s", qp->qp.qp_num, strerror(errno));
      sv_qp_set_error(qp, IBV_WC_RETRY_EXC_ERR);
      return;
    }
    qp->req_progress = now;
    /* advance over the WRs the bytes covered; the last one may be partly written */
    uint64_t sent = (uint64_t)r;
    while (sent > 0) {
      sv_swqe_t *x = &qp->sq[qp->sq_tx % qp->sq_cap];
      uint64_t rest = wr_bytes(x) - qp->tx_off;
      if (sent < rest) {
        qp->tx_off += sent;
        qp->tx_started = true;
        break;
      }
      sent -= rest;
      qp->sq_tx++;
      qp->ops_done++;
      qp->tx_off = 0;
      qp->tx_started = qp->tx_delayed = false;
      qp->tx_retries = 0;
    }
  }
}

/* Completes every transmitted WR before `seq` (they were executed: a later response implies it). */
static void ack_before(sv_qp_t *qp, uint64_t seq)
{
  while (qp->sq_head < seq && qp->sq_head < qp->sq_tx)
    sv_qp_complete_send(qp, qp->sq_head, IBV_WC_SUCCESS);
}

/* The answer to atomic `seq`: like a READ response, it completes the WRs before it, then the
 * atomic itself, whose local SGE (8 bytes, checked at post time) receives the original value.
 * False when the response does not match the request (the QP has failed). */
static bool atomic_resp(sv_qp_t *qp, const sv_hdr_t *h, uint64_t seq)
{
  ack_before(qp, seq);
  sv_swqe_t *w = &qp->sq[seq % qp->sq_cap];
  if (qp->sq_head != seq || !sv_wr_is_atomic(w->op) || w->niov != 1 || w->iov[0].iov_len != 8) {
    sv_qp_set_error(qp, IBV_WC_BAD_RESP_ERR);
    return false;
  }
  qp->rnr_count = 0;
  uint64_t original = h->raddr;
  memcpy(w->iov[0].iov_base, &original, sizeof(original));
  sv_qp_complete_send(qp, seq, IBV_WC_SUCCESS);
  return true;
}

static void req_rx(sv_context_t *c, sv_qp_t *qp)
{
  sv_conn_t *k = qp->req;
  while (k && !k->dead && qp->req == k) {
    bool eof = false;
    if (k->in_payload) {
      int r = rx_payload(c, k);
      if (r == 0) return;
      if (r < 0) {
        eof = true;
      } else {
        k->in_payload = false;
        sv_swqe_t *w = &qp->sq[qp->sq_head % qp->sq_cap];
        if (sv_gpu_stage_active(w->gpu) && sv_gpu_stage_scatter(w->gpu, w->len) != 0) {
          sv_qp_set_error(qp, IBV_WC_LOC_PROT_ERR); /* the READ's GPU memory was not written */
          return;
        }
        sv_qp_complete_send(qp, qp->sq_head, IBV_WC_SUCCESS); /* the READ */
        continue;
      }
    } else if (rx_header(k, &eof)) {
      k->hdr_got = 0;
      sv_hdr_t h = k->hdr;
      qp->req_progress = sv_now_ns();
      if (h.op == SV_OP_HELLO_ACK) {
        if (h.status != 0) {
          SV_TRACE("QP %#x: peer QP %#x not ready (retrying)", qp->qp.qp_num,
                   qp->attr.dest_qp_num);
          req_backoff(c, qp);
          return;
        }
        qp->req_state = SV_REQ_UP;
        qp->backoff_ms = 0;
        SV_TRACE("QP %#x: connected to %s QP %#x", qp->qp.qp_num, inet_ntoa(qp->peer.sin_addr),
                 qp->attr.dest_qp_num);
        req_tx(c, qp);
        continue;
      }
      uint64_t seq = seq_of(qp, h.psn);
      if (seq >= qp->sq_tx) {
        sv_log("QP %#x: response for a request not sent (psn %u): closing", qp->qp.qp_num, h.psn);
        sv_qp_set_error(qp, IBV_WC_BAD_RESP_ERR);
        return;
      }
      switch (h.op) {
      case SV_OP_ACK:
        qp->rnr_count = 0;
        ack_before(qp, seq + 1);
        break;
      case SV_OP_READ_RESP: {
        ack_before(qp, seq);
        sv_swqe_t *w = &qp->sq[seq % qp->sq_cap];
        if (qp->sq_head != seq || w->op != IBV_WR_RDMA_READ || h.len != w->len) {
          sv_qp_set_error(qp, IBV_WC_BAD_RESP_ERR);
          return;
        }
        qp->rnr_count = 0;
        set_iov(k, w->iov, w->niov, h.len);
        if (h.len == 0) {
          sv_qp_complete_send(qp, seq, IBV_WC_SUCCESS);
        } else {
          k->in_payload = true;
        }
        break;
      }
      case SV_OP_ATOMIC_RESP:
        if (!atomic_resp(qp, &h, seq)) return;
        break;
      case SV_OP_NAK:
        ack_before(qp, seq);
        SV_TRACE("QP %#x: NAK %s for request %u", qp->qp.qp_num,
                 ibv_wc_status_str((enum ibv_wc_status)h.status), h.psn);
        sv_qp_set_error(qp, (enum ibv_wc_status)h.status);
        return;
      case SV_OP_RNR_NAK:
        ack_before(qp, seq);
        qp->rnr_count++;
        if (qp->attr.rnr_retry != 7 && qp->rnr_count > qp->attr.rnr_retry) {
          sv_qp_set_error(qp, IBV_WC_RNR_RETRY_EXC_ERR);
          return;
        }
        break;
      default:
        sv_qp_set_error(qp, IBV_WC_BAD_RESP_ERR);
        return;
      }
      if (qp->req == k) req_tx(c, qp);
      continue;
    }
    if (!eof) return;
    /* The peer went away (process died, QP destroyed, port down). With work outstanding this is
     * the transport retry failure a NIC reports; otherwise reconnect when work comes. */
    SV_TRACE("QP %#x: connection to peer lost", qp->qp.qp_num);
    if (qp->sq_head < qp->sq_tail) {
      sv_qp_set_error(qp, IBV_WC_RETRY_EXC_ERR);
    } else {
      req_backoff(c, qp);
    }
    return;
  }
}

/* ---------------------------------------------------------------- responder */
static void send_nak(sv_context_t *c, sv_conn_t *k, uint32_t psn, enum ibv_wc_status st)
{
  sv_hdr_t h = {.op = SV_OP_NAK, .status = (uint8_t)st, .psn = psn};
  resp_queue(c, k, &h, NULL);
}

/* A responder-side error: NAK the requester, then the responder QP goes to error with the
 * affiliated event a NIC raises (access violations) and the stream closes after the NAK. */
static void resp_fail(sv_context_t *c, sv_conn_t *k, enum ibv_wc_status nak,
                      enum ibv_event_type ev)
{
  sv_qp_t *qp = k->qp;
  k->nakked = true;
  send_nak(c, k, k->hdr.psn, nak);
  if (qp) {
    /* The stream stays open, discarding, until the requester closes it: closing here with its
     * later requests unread would send a TCP RST that can destroy the NAK in flight. */
    qp->resp = NULL;
    k->qp = NULL;
    k->next = c->orphans;
    c->orphans = k;
    sv_qp_set_error(qp, IBV_WC_WR_FLUSH_ERR);
    sv_async_event(c, ev, &qp->qp);
  }
  resp_tx(c, k);
}

static void push_recv_wc(sv_qp_t *qp, enum ibv_wc_status st, enum ibv_wc_opcode op, uint64_t len,
                         const sv_hdr_t *h, bool imm)
{
  sv_rwqe_t *r = &qp->rq[qp->rq_head % qp->rq_cap];
  struct ibv_wc wc;
  memset(&wc, 0, sizeof(wc));
  wc.wr_id = r->wr_id;
  wc.status = st;
  wc.opcode = op;
  wc.byte_len = (uint32_t)len;
  wc.qp_num = qp->qp.qp_num;
  wc.src_qp = qp->attr.dest_qp_num;
  if (imm) {
    wc.wc_flags = IBV_WC_WITH_IMM;
    wc.imm_data = h->imm;
  }
  qp->rq_head++;
  sv_cq_push(sv_cq(qp->qp.recv_cq), &wc);
}

/* An atomic request's header: checks the target word, then receives the operands into
 * k->atomic_args (executed in atomic_execute once they are in). A refusal still reads the operands
 * off the stream, then NAKs, as a refused WRITE does. */
static void atomic_dispatch(sv_context_t *c, sv_conn_t *k)
{
  sv_qp_t *qp = k->qp;
  const sv_hdr_t *h = &k->hdr;
  const char *why = NULL;
  enum ibv_wc_status st = IBV_WC_REM_ACCESS_ERR;
  if (h->len != sizeof(sv_atomic_args_t)) {
    why = "malformed (operands of the wrong size)";
    st = IBV_WC_REM_INV_REQ_ERR;
  } else if (h->raddr % 8 != 0) {
    /* IB: an atomic's address is 8-byte aligned, else the responder NAKs "invalid request" */
    why = "the address is not 8-byte aligned";
    st = IBV_WC_REM_INV_REQ_ERR;
  } else if (!(qp->attr.qp_access_flags & IBV_ACCESS_REMOTE_ATOMIC)) {
    why = "the QP does not allow remote atomics";
  } else {
    why = sv_mr_check(c, qp->qp.pd, h->rkey, h->raddr, 8, IBV_ACCESS_REMOTE_ATOMIC);
    sv_mr_t *m = why ? NULL : sv_mr_lookup(c, h->rkey);
    if (m && m->gpu_ctx) { /* a CPU atomic on a device address would crash the progress thread */
      why = "the word is in GPU memory (softverbs executes atomics on host memory only)";
      sv_report_refusal("remote atomic on a GPU region (atomics are executed on host memory only)");
    }
  }
  if (why) {
    SV_TRACE("QP %#x: atomic %#llx rkey %#x refused: %s", qp->qp.qp_num,
             (unsigned long long)h->raddr, h->rkey, why);
    k->action = A_NAK;
    k->nak_status = st;
    k->discard = true;
    k->left = h->len;
    return;
  }
  struct iovec t = {.iov_base = &k->atomic_args, .iov_len = sizeof(k->atomic_args)};
  set_iov(k, &t, 1, sizeof(k->atomic_args));
  k->action = A_ATOMIC;
}

/* Executes the atomic whose operands have arrived, and queues the original value as its response.
 * Requests run in stream order, so the atomic sees every earlier WRITE of the QP, and the value is
 * taken now, so later requests need not wait for the response to go out. The operation itself is
 * a CPU atomic: several contexts (each with its own progress thread) may target one word. */
static void atomic_execute(sv_context_t *c, sv_conn_t *k)
{
  const sv_hdr_t *h = &k->hdr;
  uint64_t *word = (uint64_t *)(uintptr_t)h->raddr;
  uint64_t original;
  if (h->op == SV_OP_FETCH_ADD) {
    original = __atomic_fetch_add(word, k->atomic_args.compare_add, __ATOMIC_SEQ_CST);
  } else {
    original = k->atomic_args.compare_add; /* on a mismatch it becomes the word's value */
    __atomic_compare_exchange_n(word, &original, k->atomic_args.swap, false, __ATOMIC_SEQ_CST,
                                __ATOMIC_SEQ_CST);
  }
  sv_hdr_t rh = {.op = SV_OP_ATOMIC_RESP, .psn = h->psn, .raddr = original};
  resp_queue(c, k, &rh, NULL);
}

static void park(sv_context_t *c, sv_conn_t *k)
{
  k->parked = true;
  k->park_deadline = sv_now_ns() + rnr_ns(k->qp->attr.min_rnr_timer);
  conn_events(c, k, k->txq ? EPOLLOUT : 0);
}

/* ---- GPU regions (sv_gpu.c): the responder's copies into and out of GPU memory */
/* An RDMA WRITE into a GPU region lands in the connection's bounce buffer (*t is pointed at it)
 * and goes to the GPU when complete (gpu_deliver). False: no memory for the bounce buffer. */
static bool gpu_write_target(sv_context_t *c, sv_conn_t *k, struct iovec *t)
{
  sv_mr_t *m = sv_mr_lookup(c, k->hdr.rkey);
  if (!m || !m->gpu_ctx) return true;
  if (!sv_gpu_bounce(&k->gpu_buf, &k->gpu_cap, t->iov_len)) {
    sv_log("QP %#x: no memory to stage an RDMA WRITE of %zu bytes into GPU memory",
           k->qp->qp.qp_num, t->iov_len);
    return false;
  }
  k->gpu_ctx = m->gpu_ctx;
  k->gpu_dst = (uint64_t)(uintptr_t)t->iov_base;
  t->iov_base = k->gpu_buf;
  return true;
}

/* An RDMA READ of a GPU region is answered from a host copy taken now, when RC order says the
 * READ executes (later WRITEs cannot change it). False: the copy failed. */
static bool gpu_read_source(sv_context_t *c, const sv_hdr_t *h, void **src, bool *owned)
{
  sv_mr_t *m = sv_mr_lookup(c, h->rkey);
  if (!m || !m->gpu_ctx) return true;
  void *copy = malloc(h->len);
  if (!copy || sv_gpu_to_host(m->gpu_ctx, copy, *src, h->len) != 0) {
    free(copy);
    return false;
  }
  *src = copy;
  *owned = true;
  return true;
}

/* A staged WRITE or SEND payload has arrived: move it to its GPU memory before the request is
 * acknowledged (and before a receive completion says it is there). False: the copy failed, the
 * requester got a NAK and the QP is in error. */
static bool gpu_deliver(sv_context_t *c, sv_conn_t *k)
{
  sv_qp_t *qp = k->qp;
  int rc;
  if (k->gpu_ctx) {
    rc = sv_gpu_to_device(k->gpu_ctx, (void *)(uintptr_t)k->gpu_dst, k->gpu_buf, k->hdr.len);
    k->gpu_ctx = NULL;
  } else {
    rc = sv_gpu_stage_scatter(qp->rq[qp->rq_head % qp->rq_cap].gpu, k->hdr.len);
    if (rc != 0) push_recv_wc(qp, IBV_WC_LOC_PROT_ERR, IBV_WC_RECV, 0, &k->hdr, false);
  }
  if (rc == 0) return true;
  resp_fail(c, k, IBV_WC_REM_OP_ERR, IBV_EVENT_QP_FATAL);
  return false;
}

/* Executes the request whose header is in k->hdr; returns false when parked. */
static bool resp_dispatch(sv_context_t *c, sv_conn_t *k)
{
  sv_qp_t *qp = k->qp;
  const sv_hdr_t *h = &k->hdr;
  const char *why = NULL;
  k->action = A_NONE;
  k->left = 0;
  k->gpu_ctx = NULL;
  switch (h->op) {
  case SV_OP_WRITE:
  case SV_OP_WRITE_IMM:
    if (h->len) {
      if (!(qp->attr.qp_access_flags & IBV_ACCESS_REMOTE_WRITE))
        why = "the QP does not allow remote write";
      else
        why = sv_mr_check(c, qp->qp.pd, h->rkey, h->raddr, h->len, IBV_ACCESS_REMOTE_WRITE);
    }
    if (why) {
      SV_TRACE("QP %#x: RDMA WRITE %#llx+%llu rkey %#x refused: %s", qp->qp.qp_num,
               (unsigned long long)h->raddr, (unsigned long long)h->len, h->rkey, why);
      k->action = A_NAK;
      k->nak_status = IBV_WC_REM_ACCESS_ERR;
      k->discard = true;
      k->left = h->len;
      break;
    }
    if (h->op == SV_OP_WRITE_IMM && qp->rq_head == qp->rq_tail) {
      park(c, k);
      return false;
    }
    {
      struct iovec t = {.iov_base = (void *)(uintptr_t)h->raddr, .iov_len = h->len};
      if (c->ngpu_mrs && h->len && !gpu_write_target(c, k, &t)) {
        k->action = A_NAK;
        k->nak_status = IBV_WC_REM_OP_ERR;
        k->discard = true;
        k->left = h->len;
        break;
      }
      set_iov(k, &t, 1, h->len);
    }
    k->action = h->op == SV_OP_WRITE ? A_WRITE : A_WRITE_IMM;
    break;
  case SV_OP_SEND:
  case SV_OP_SEND_IMM: {
    if (qp->rq_head == qp->rq_tail) {
      park(c, k);
      return false;
    }
    sv_rwqe_t *r = &qp->rq[qp->rq_head % qp->rq_cap];
    if (r->local_err != IBV_WC_SUCCESS || h->len > r->len) {
      enum ibv_wc_status st = r->local_err != IBV_WC_SUCCESS ? r->local_err : IBV_WC_LOC_LEN_ERR;
      push_recv_wc(qp, st, IBV_WC_RECV, 0, h, false);
      k->action = A_NAK;
      k->nak_status = st == IBV_WC_LOC_LEN_ERR ? IBV_WC_REM_INV_REQ_ERR : IBV_WC_REM_OP_ERR;
      k->discard = true;
      k->left = h->len;
      break;
    }
    set_iov(k, r->iov, r->niov, h->len);
    k->action = A_SEND;
    break;
  }
  case SV_OP_READ_REQ:
    if (h->len) {
      if (!(qp->attr.qp_access_flags & IBV_ACCESS_REMOTE_READ))
        why = "the QP does not allow remote read";
      else
        why = sv_mr_check(c, qp->qp.pd, h->rkey, h->raddr, h->len, IBV_ACCESS_REMOTE_READ);
    }
    if (why) {
      SV_TRACE("QP %#x: RDMA READ %#llx+%llu rkey %#x refused: %s", qp->qp.qp_num,
               (unsigned long long)h->raddr, (unsigned long long)h->len, h->rkey, why);
      resp_fail(c, k, IBV_WC_REM_ACCESS_ERR, IBV_EVENT_QP_ACCESS_ERR);
      return true;
    }
    {
      sv_hdr_t rh = {.op = SV_OP_READ_RESP, .psn = h->psn, .len = h->len};
      void *src = (void *)(uintptr_t)h->raddr;
      bool owned = false;
      if (c->ngpu_mrs && h->len && !gpu_read_source(c, h, &src, &owned)) {
        resp_fail(c, k, IBV_WC_REM_OP_ERR, IBV_EVENT_QP_FATAL);
        return true;
      }
      sv_resp_t *r = resp_queue(c, k, &rh, src);
      if (r) r->owned = owned;
      else if (owned) free(src);
    }
    return true;
  case SV_OP_FETCH_ADD:
  case SV_OP_CMP_SWP:
    atomic_dispatch(c, k);
    break;
  default:
    sv_log("QP %#x: unknown request op %u from the peer: closing", qp->qp.qp_num, h->op);
    conn_close(c, k);
    return true;
  }
  k->in_payload = true;
  return true;
}

static void resp_finish(sv_context_t *c, sv_conn_t *k)
{
  sv_qp_t *qp = k->qp;
  const sv_hdr_t *h = &k->hdr;
  sv_hdr_t ack = {.op = SV_OP_ACK, .psn = h->psn};
  if ((k->action == A_WRITE_IMM || k->action == A_SEND) && qp->req &&
      qp->req_state == SV_REQ_UP) {
    /* On a wire the peer's ACKs and its next request travel in one direction, in order; here they
     * use two TCP streams. Take in the responses that already arrived before this request makes a
     * receive completion, so that "my send completed" is seen before "the reply arrived", as with
     * a NIC (ping-pong loops rely on it). */
    req_rx(c, qp);
    if (k->dead || k->qp != qp || qp->qp.state == IBV_QPS_ERR) return;
  }
  if ((k->gpu_ctx || (k->action == A_SEND &&
                       sv_gpu_stage_active(qp->rq[qp->rq_head % qp->rq_cap].gpu))) &&
      !gpu_deliver(c, k))
    return;
  switch (k->action) {
  case A_WRITE:
    resp_queue(c, k, &ack, NULL);
    break;
  case A_WRITE_IMM:
    push_recv_wc(qp, IBV_WC_SUCCESS, IBV_WC_RECV_RDMA_WITH_IMM, h->len, h, true);
    resp_queue(c, k, &ack, NULL);
    break;
  case A_SEND:
    push_recv_wc(qp, IBV_WC_SUCCESS, IBV_WC_RECV, h->len, h, h->op == SV_OP_SEND_IMM);
    resp_queue(c, k, &ack, NULL);
    break;
  case A_ATOMIC:
    atomic_execute(c, k);
    break;
  case A_NAK:
    resp_fail(c, k, k->nak_status,
              k->nak_status == IBV_WC_REM_ACCESS_ERR ? IBV_EVENT_QP_ACCESS_ERR
                                                     : IBV_EVENT_QP_REQ_ERR);
    break;
  default:
    break;
  }
}

static void resp_rx(sv_context_t *c, sv_conn_t *k)
{
  while (!k->dead && !k->parked) {
    /* A READ response is sent from the registered memory itself, so the requests behind the READ
     * (a WRITE to the same bytes, say) must wait until it is out: RC executes in order. */
    if (k->reads_out) {
      resp_tx(c, k);
      if (k->dead || k->reads_out) return;
    }
    bool eof = false;
    if (k->in_payload) {
      int r = rx_payload(c, k);
      if (r == 0) break;
      if (r < 0) {
        eof = true;
      } else {
        k->in_payload = false;
        k->hdr_got = 0;
        if (k->nakked) continue;
        resp_finish(c, k);
        continue;
      }
    } else if (rx_header(k, &eof)) {
      if (k->nakked || !k->qp) { /* after a NAK: drop everything until the requester closes */
        k->discard = true;
        k->left = (k->hdr.op == SV_OP_READ_REQ) ? 0 : k->hdr.len;
        k->in_payload = true;
        continue;
      }
      if (!resp_dispatch(c, k)) break; /* parked: the header stays for the retry */
      if (!k->in_payload) k->hdr_got = 0;
      continue;
    }
    if (eof) {
      conn_close(c, k);
      return;
    }
    break;
  }
  if (!k->dead) resp_tx(c, k);
}

static void resp_unpark(sv_context_t *c, sv_conn_t *k)
{
  if (!k->parked || !k->qp || k->qp->rq_head == k->qp->rq_tail) return;
  k->parked = false;
  conn_events(c, k, EPOLLIN | (k->txq ? EPOLLOUT : 0));
  if (resp_dispatch(c, k) && !k->in_payload) k->hdr_got = 0;
  resp_rx(c, k);
}

/* ---------------------------------------------------------------- listener and hello */
static void pending_rx(sv_context_t *c, sv_conn_t *k)
{
  bool eof = false;
  if (!rx_header(k, &eof)) {
    if (eof) conn_close(c, k);
    return;
  }
  k->hdr_got = 0;
  const sv_hdr_t *h = &k->hdr;
  uint8_t status = 1;
  sv_qp_t *qp = NULL;
  int li = -1;
  for (int i = 0; i < c->nlisteners; i++)
    if (c->listen_port[i] == (h->rkey >> 8)) li = i;
  if (h->op == SV_OP_HELLO && h->imm == SV_HELLO_MAGIC && li >= 0) {
    qp = c->qps[li * SV_QPS_PER_LISTENER + (h->rkey & 0xff)];
    if (qp && (qp->qp.state == IBV_QPS_RTR || qp->qp.state == IBV_QPS_RTS) &&
        qp->attr.dest_qp_num == h->psn && port_up(c, qp))
      status = 0;
  }
  sv_hdr_t ack = {.op = SV_OP_HELLO_ACK, .status = status};
  if (status != 0) {
    SV_TRACE("refused a stream from QP %#x to QP %#x (missing, not ready or another peer)", h->psn,
             h->rkey);
    (void)!send(k->fd, &ack, sizeof(ack), MSG_NOSIGNAL | MSG_DONTWAIT);
    conn_close(c, k);
    return;
  }
  for (sv_conn_t **p = &c->pending; *p; p = &(*p)->next) {
    if (*p == k) {
      *p = k->next;
      break;
    }
  }
  k->next = NULL;
  if (qp->resp) conn_close(c, qp->resp); /* the requester reconnected: the old stream is dead */
  k->role = SV_RESPONDER;
  k->qp = qp;
  qp->resp = k;
  resp_queue(c, k, &ack, NULL);
  resp_rx(c, k);
}

static void accept_all(sv_context_t *c, int lfd)
{
  for (;;) {
    int fd = accept4(lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) return;
    tune_socket(fd);
    sv_conn_t *k = conn_new(c, fd, SV_PENDING, EPOLLIN);
    if (!k) {
      close(fd);
      continue;
    }
    k->next = c->pending;
    c->pending = k;
  }
}

/* ---------------------------------------------------------------- timers and faults */
static void port_fault(sv_context_t *c, int port, bool down)
{
  c->port_state[port] = down ? IBV_PORT_DOWN : IBV_PORT_ACTIVE;
  sv_log("%s port %d %s (fault injection)", c->dev->dev.name, port, down ? "DOWN" : "ACTIVE");
  sv_async_event(c, down ? IBV_EVENT_PORT_ERR : IBV_EVENT_PORT_ACTIVE, (void *)(intptr_t)port);
  if (!down) return;
  for (int i = 0; i < c->nlisteners * SV_QPS_PER_LISTENER; i++) {
    sv_qp_t *qp = c->qps[i];
    if (!qp || (qp->attr.port_num ? qp->attr.port_num : 1) != port) continue;
    if (qp->qp.state != IBV_QPS_RTR && qp->qp.state != IBV_QPS_RTS) continue;
    /* The link is gone: streams break both ways; work in flight fails as it would after its
     * retries on a dead link. */
    if (qp->sq_head < qp->sq_tail) {
      sv_qp_set_error(qp, IBV_WC_RETRY_EXC_ERR);
    } else {
      sv_transport_qp_close(qp);
    }
  }
}

static uint64_t timers(sv_context_t *c)
{
  uint64_t now = sv_now_ns();
  uint64_t next = now + 100000000ull;
  int fp = c->cfg->fault_port <= c->cfg->nports ? c->cfg->fault_port : 1;
  if (c->port_down_at && now >= c->port_down_at) {
    c->port_down_at = 0;
    port_fault(c, fp, true);
    if (c->cfg->port_up_ms) c->port_up_at = now + c->cfg->port_up_ms * 1000000ull;
  }
  if (c->port_up_at && now >= c->port_up_at) {
    c->port_up_at = 0;
    port_fault(c, fp, false);
  }
  if (c->fatal_at && now >= c->fatal_at) {
    c->fatal_at = 0;
    c->fatal = true;
    sv_log("%s: device fatal error (fault injection)", c->dev->dev.name);
    sv_async_event(c, IBV_EVENT_DEVICE_FATAL, NULL);
    for (int i = 0; i < c->nlisteners * SV_QPS_PER_LISTENER; i++)
      if (c->qps[i]) sv_qp_set_error(c->qps[i], IBV_WC_GENERAL_ERR);
  }
  uint64_t at[] = {c->port_down_at, c->port_up_at, c->fatal_at};
  for (size_t i = 0; i < 3; i++)
    if (at[i] && at[i] < next) next = at[i];
  for (int i = 0; i < c->nlisteners * SV_QPS_PER_LISTENER; i++) {
    sv_qp_t *qp = c->qps[i];
    if (!qp) continue;
    if (qp->qp.state == IBV_QPS_RTS) {
      if (qp->req_state == SV_REQ_IDLE) req_connect(c, qp);
      if (qp->req_state == SV_REQ_BACKOFF) {
        if (now >= qp->req_deadline)
          req_connect(c, qp);
        else if (qp->req_deadline < next)
          next = qp->req_deadline;
      }
      if (qp->tx_wait_until) {
        if (now >= qp->tx_wait_until) {
          qp->tx_wait_until = 0;
          req_tx(c, qp);
        } else if (qp->tx_wait_until < next) {
          next = qp->tx_wait_until;
        }
      }
      uint64_t bound = sv_qp_retry_bound_ns(qp);
      if (qp->qp.state == IBV_QPS_RTS && qp->sq_head < qp->sq_tail && bound != UINT64_MAX) {
        if (qp->req_progress < now && now - qp->req_progress > bound) {
          sv_log("QP %#x: no progress from peer %s QP %#x for %llu ms (timeout %u, retry_cnt %u):"
                 " retry exceeded",
                 qp->qp.qp_num, inet_ntoa(qp->peer.sin_addr), qp->attr.dest_qp_num,
                 (unsigned long long)((now - qp->req_progress) / 1000000ull), qp->attr.timeout,
                 qp->attr.retry_cnt);
          sv_qp_set_error(qp, IBV_WC_RETRY_EXC_ERR);
        } else if (qp->req_progress + bound + 1 < next) {
          next = qp->req_progress + bound + 1;
        }
      }
    }
    sv_conn_t *k = qp->resp;
    if (k && k->parked) {
      if (qp->rq_head < qp->rq_tail) {
        resp_unpark(c, k);
      } else if (now >= k->park_deadline) {
        sv_hdr_t rnr = {.op = SV_OP_RNR_NAK, .psn = k->hdr.psn};
        resp_queue(c, k, &rnr, NULL);
        resp_tx(c, k);
        k->park_deadline = now + rnr_ns(qp->attr.min_rnr_timer);
      }
      if (!k->dead && k->parked && k->park_deadline < next) next = k->park_deadline;
    }
    if (c->qps[i] == qp && qp->qp.state == IBV_QPS_RTS) req_tx(c, qp);
  }
  return next;
}

/* ---------------------------------------------------------------- the progress thread */
static void handle(sv_context_t *c, sv_conn_t *k, uint32_t ev)
{
  if (k->dead) return;
  switch (k->role) {
  case SV_PENDING:
    pending_rx(c, k);
    break;
  case SV_REQUESTER: {
    sv_qp_t *qp = k->qp;
    if (!qp) return;
    if (qp->req_state == SV_REQ_CONNECTING) {
      req_connected(c, qp);
      return;
    }
    if (ev & EPOLLOUT) conn_events(c, k, EPOLLIN);
    if (ev & (EPOLLIN | EPOLLERR | EPOLLHUP)) req_rx(c, qp);
    if (qp->req == k) req_tx(c, qp);
    break;
  }
  case SV_RESPONDER:
    if (ev & EPOLLOUT) resp_tx(c, k);
    /* also after EPOLLOUT alone: requests staged behind a finished READ response go on now */
    if (!k->dead) resp_rx(c, k);
    break;
  }
}

/* Handles one batch of ready sockets; under c->lock. */
static void dispatch(sv_context_t *c, struct epoll_event *evs, int n)
{
  for (int i = 0; i < n; i++) {
    void *p = evs[i].data.ptr;
    if (p == NULL) {
      uint64_t v;
      (void)!read(c->wakefd, &v, sizeof(v));
    } else if ((uintptr_t)p >= (uintptr_t)c->listen_fd &&
               (uintptr_t)p < (uintptr_t)(c->listen_fd + SV_MAX_LISTENERS)) {
      accept_all(c, *(int *)p);
    } else {
      handle(c, p, evs[i].events);
    }
  }
}

static void *progress(void *arg)
{
  sv_context_t *c = arg;
  struct epoll_event evs[64];
  pthread_mutex_lock(&c->lock);
  while (!c->stop) {
    /* Closed connections are freed only here, before this thread asks for new events: a batch
     * being handled (here or in sv_transport_poll) may still point at them. */
    while (c->grave) {
      sv_conn_t *k = c->grave;
      c->grave = k->next;
      free(k->rxbuf);
      free(k->gpu_buf);
      free(k);
    }
    uint64_t next = timers(c);
    uint64_t now = sv_now_ns();
    int ms = next <= now ? 0 : (int)((next - now + 999999ull) / 1000000ull);
    pthread_mutex_unlock(&c->lock);
    int n = epoll_wait(c->epfd, evs, 64, ms);
    pthread_mutex_lock(&c->lock);
    dispatch(c, evs, n);
  }
  pthread_mutex_unlock(&c->lock);
  return NULL;
}

/* An application polling an empty CQ lends its thread to the transport: on a busy host a
 * spinning poller would otherwise starve the progress thread (a NIC needs no host CPU; this
 * emulation does). Never blocks: skipped when the progress thread holds the lock. */
void sv_transport_poll(sv_context_t *c)
{
  if (pthread_mutex_trylock(&c->lock) != 0) return;
  struct epoll_event evs[16];
  int n = c->stop ? 0 : epoll_wait(c->epfd, evs, 16, 0);
  if (n > 0) dispatch(c, evs, n);
  pthread_mutex_unlock(&c->lock);
  /* Nothing to do here: give the CPU to whoever moves the data (the peer, the progress thread).
   * Free on an idle host, and it keeps two spinning pollers from starving both transports. */
  if (n <= 0) sched_yield();
}

void sv_transport_kick(sv_qp_t *qp)
{
  if (qp->req_state == SV_REQ_UP && qp->req && !(qp->req->events & EPOLLOUT))
    req_tx(qp->sctx, qp);
  if (qp->sq_tx < qp->sq_tail) sv_transport_wake(qp->sctx);
}

int sv_transport_add_listener(sv_context_t *c)
{
  if (c->nlisteners == SV_MAX_LISTENERS) {
    errno = ENOMEM;
    return -1;
  }
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr = c->cfg->ip};
  socklen_t len = sizeof(a);
  int i = c->nlisteners;
  struct epoll_event e = {.events = EPOLLIN, .data.ptr = &c->listen_fd[i]};
  if (bind(fd, (struct sockaddr *)&a, sizeof(a)) != 0 || listen(fd, 128) != 0 ||
      getsockname(fd, (struct sockaddr *)&a, &len) != 0 ||
      epoll_ctl(c->epfd, EPOLL_CTL_ADD, fd, &e) != 0) {
    int err = errno;
    sv_log("cannot listen on %s (%s): %s; set SOFTVERBS_IFNAME", inet_ntoa(c->cfg->ip),
           c->cfg->ifname, strerror(err));
    close(fd);
    errno = err;
    return -1;
  }
  c->listen_fd[i] = fd;
  c->listen_port[i] = ntohs(a.sin_port);
  c->nlisteners++;
  return 0;
}

int sv_transport_start(sv_context_t *c)
{
  c->epfd = epoll_create1(EPOLL_CLOEXEC);
  c->wakefd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  struct epoll_event e1 = {.events = EPOLLIN, .data.ptr = NULL};
  if (c->epfd < 0 || c->wakefd < 0 || epoll_ctl(c->epfd, EPOLL_CTL_ADD, c->wakefd, &e1) != 0 ||
      sv_transport_add_listener(c) != 0 || pthread_create(&c->thread, NULL, progress, c) != 0) {
    int e = errno;
    if (c->epfd >= 0) close(c->epfd);
    if (c->wakefd >= 0) close(c->wakefd);
    if (c->nlisteners) close(c->listen_fd[0]);
    c->nlisteners = 0;
    errno = e;
    return -1;
  }
  c->thread_started = true;
  return 0;
}

void sv_transport_stop(sv_context_t *c)
{
  pthread_mutex_lock(&c->lock);
  c->stop = true;
  sv_transport_wake(c);
  pthread_mutex_unlock(&c->lock);
  if (c->thread_started) pthread_join(c->thread, NULL);
  pthread_mutex_lock(&c->lock);
  for (int i = 0; i < c->nlisteners * SV_QPS_PER_LISTENER; i++)
    if (c->qps[i]) sv_transport_qp_close(c->qps[i]);
  while (c->pending) conn_close(c, c->pending);
  while (c->orphans) conn_close(c, c->orphans);
  while (c->grave) {
    sv_conn_t *k = c->grave;
    c->grave = k->next;
    free(k->rxbuf);
    free(k->gpu_buf);
    free(k);
  }
  pthread_mutex_unlock(&c->lock);
  for (int i = 0; i < c->nlisteners; i++) close(c->listen_fd[i]);
  close(c->epfd);
  close(c->wakefd);
}

void sv_transport_wake(sv_context_t *c)
{
  uint64_t one = 1;
  (void)!write(c->wakefd, &one, sizeof(one));
}

void sv_transport_qp_rts(sv_qp_t *qp)
{
  qp->req_state = SV_REQ_IDLE;
  qp->backoff_ms = 0;
  sv_transport_wake(qp->sctx);
}

void sv_transport_qp_close(sv_qp_t *qp)
{
  sv_context_t *c = qp->sctx;
  conn_close(c, qp->req);
  conn_close(c, qp->resp);
  qp->req = NULL;
  qp->resp = NULL;
  qp->req_state = SV_REQ_IDLE;
  qp->tx_started = false;
  qp->tx_wait_until = 0;
}

void sv_transport_recv_posted(sv_qp_t *qp)
{
  if (qp->resp && qp->resp->parked) resp_unpark(qp->sctx, qp->resp);
}
