/* strand-socket — listen / connect / accept / close.
 *
 * The SDK's socket_conn state machines do the non-blocking TCP work and the magic + nonce
 * handshake (strangers are dropped there, with a WARN, without disturbing pending connections).
 * This file groups the 1 + nstreams sockets of one connection by the connection id carried in
 * each hello, and builds the communicators. The connecting side chooses nstreams; the accepting
 * side takes whatever count the hello announces (bounded by SK_MAX_STREAMS). */
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "sk.h"
#include "strand/clock.h"
#include "strand/log.h"

#define SK_ACCEPT_GROUPS 8
#define SK_GROUP_TIMEOUT_NS (60ULL * 1000000000ULL)

typedef struct {
  uint64_t conn_id;
  int total, got;
  uint64_t started_ns;
  strand_sockaddr_t peer;
  int fds[1 + SK_MAX_STREAMS];
} sk_group_t;

typedef struct {
  int dev;
  int traffic_class;
  strand_sock_listener_t l;
  sk_group_t groups[SK_ACCEPT_GROUPS];
} sk_listen_t;

typedef struct sk_connecting {
  uint64_t key; /* what the handle carries between connect() calls */
  int dev;
  int traffic_class;
  int total;
  strand_sock_connect_t c[1 + SK_MAX_STREAMS];
  int fds[1 + SK_MAX_STREAMS];
  strand_sockaddr_t addr;  /* the listener's, for the log line if the state is abandoned */
  uint64_t touched_ns;     /* the last connect() call that progressed it */
  struct sk_connecting *next;
} sk_connecting_t;

/* Live connect states, found by the random key the handle carries: the handle is peer data, so
 * it never holds a pointer. A key nobody registered (forged, stale, copied from another rank)
 * finds nothing and the call starts a fresh connect. */
static pthread_mutex_t connecting_lock = PTHREAD_MUTEX_INITIALIZER;
static sk_connecting_t *connecting_head;

static void connecting_register(sk_connecting_t *st) {
  st->touched_ns = strand_now_ns();
  pthread_mutex_lock(&connecting_lock);
  st->next = connecting_head;
  connecting_head = st;
  pthread_mutex_unlock(&connecting_lock);
}

/* Takes the state with this key out of the table (the caller owns it until it registers it
 * again), or NULL. */
static sk_connecting_t *connecting_take(uint64_t key, int dev) {
  if (key == 0) return NULL;
  pthread_mutex_lock(&connecting_lock);
  sk_connecting_t **pp = &connecting_head, *st = NULL;
  for (; *pp != NULL; pp = &(*pp)->next) {
    if ((*pp)->key == key && (*pp)->dev == dev) {
      st = *pp;
      *pp = st->next;
      st->next = NULL;
      break;
    }
  }
  pthread_mutex_unlock(&connecting_lock);
  return st;
}

/* Only codes a plugin may return (spec §2.1: 0..6): the SDK's STRAND_TIMEOUT means the peer never
 * answered, i.e. a dead or unreachable peer. */
static strand_result_t abi_result(strand_result_t rc) {
  if (rc == STRAND_TIMEOUT) return STRAND_REMOTE_ERROR;
  if (rc < STRAND_SUCCESS || rc > STRAND_REMOTE_ERROR) return STRAND_INTERNAL_ERROR;
  return rc;
}

/* trafficClass -> IP_TOS / IPV6_TCLASS (the whole byte: DSCP + ECN as the user gave it) and
 * SO_PRIORITY (its top three bits, the IP precedence, which is what Linux's default
 * TOS-to-priority map uses as well). */
static void sock_opts(int traffic_class, strand_sock_opts_t *o) {
  const sk_config_t *cfg = sk_config();
  strand_sock_opts_default(o);
  o->nodelay = true;
  o->sndbuf = cfg->sndbuf;
  o->rcvbuf = cfg->rcvbuf;
  o->connect_timeout_ms = cfg->connect_timeout_ms;
  if (traffic_class >= 0) {
    o->tos = traffic_class & 0xff;
    o->priority = (traffic_class >> 5) & 0x7;
  }
}

/* Bounds how long a silent peer (host death, cable pulled: no FIN, no RST) can hang a transfer:
 * unacknowledged data fails after TCP_USER_TIMEOUT, an idle connection after the keepalive probes. */
static void tune_established(int fd) {
  const sk_config_t *cfg = sk_config();
  int one = 1;
  unsigned int uto = (unsigned int)cfg->timeout_ms;
  int idle = cfg->timeout_ms / 2000 > 0 ? cfg->timeout_ms / 2000 : 1;
  int intvl = idle / 4 > 0 ? idle / 4 : 1, cnt = 4;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  setsockopt(fd, IPPROTO_TCP, TCP_USER_TIMEOUT, &uto, sizeof uto);
  setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof one);
  setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof idle);
  setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &intvl, sizeof intvl);
  setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &cnt, sizeof cnt);
}

static strand_result_t build_comm(int type, int dev, const int *fds, int total,
                                  const strand_sockaddr_t *peer, sk_comm_t **out) {
  sk_comm_t *c = calloc(1, sizeof *c);
  if (c == NULL) return STRAND_SYSTEM_ERROR;
  c->type = type;
  c->dev = dev;
  c->ctrl_fd = fds[0];
  c->nstreams = total - 1;
  strand_sockaddr_to_string(peer, c->peer, sizeof c->peer);
  snprintf(c->dev_name, sizeof c->dev_name, "%s", sk_device(dev)->netif.name);
  tune_established(fds[0]);
  for (int i = 0; i < c->nstreams; i++) {
    sk_stream_t *s = calloc(1, sizeof *s);
    if (s == NULL) {
      for (int j = i + 1; j < total; j++) close(fds[j]);
      c->nstreams = i;
      sk_comm_free(c);
      return STRAND_SYSTEM_ERROR;
    }
    s->fd = fds[i + 1];
    s->index = i;
    s->comm = c;
    s->is_send = type == SK_COMM_SEND;
    tune_established(s->fd);
    if (s->is_send) sk_stream_zc_enable(s, sk_config()->zc_threshold);
    c->streams[i] = s;
  }
  strand_result_t rc = sk_comm_init_data(c);
  if (rc == STRAND_SUCCESS && sk_workers_count() > 0) rc = sk_workers_attach(c);
  if (rc != STRAND_SUCCESS) {
    STRAND_WARN("could not set up the %s connection with %s: error %d",
                type == SK_COMM_SEND ? "send" : "receive", c->peer, rc);
    sk_workers_detach(c);
    sk_comm_free(c);
    return rc;
  }
  sk_comm_count_add(1);
  STRAND_INFO(STRAND_SUBSYS_NET, "%s connection with %s on %s: 1 control + %d data streams, %s",
              type == SK_COMM_SEND ? "send" : "receive", c->peer, c->dev_name, c->nstreams,
              c->use_workers ? "worker threads" : "moved by the proxy thread");
  *out = c;
  return STRAND_SUCCESS;
}

static bool dev_ok(int dev, const char *call) {
  if (dev >= 0 && dev < sk_device_count()) return true;
  STRAND_WARN("%s: device %d does not exist (strand-socket has %d devices)", call, dev,
              sk_device_count());
  return false;
}

strand_result_t sk_listen(void *ctx, int dev, void *handle, void **listenComm) {
  if (handle == NULL || listenComm == NULL) return STRAND_INVALID_ARGUMENT;
  *listenComm = NULL;
  if (!dev_ok(dev, "listen")) return STRAND_INVALID_ARGUMENT;
  sk_ctx_t *x = ctx;
  sk_listen_t *lc = calloc(1, sizeof *lc);
  if (lc == NULL) return STRAND_SYSTEM_ERROR;
  lc->dev = dev;
  lc->traffic_class = x ? x->traffic_class : STRAND_NET_TRAFFIC_CLASS_UNDEF;
  for (int g = 0; g < SK_ACCEPT_GROUPS; g++) lc->groups[g].conn_id = 0;
  strand_sock_opts_t o;
  sock_opts(lc->traffic_class, &o);
  strand_sockaddr_t addr = sk_device(dev)->netif.addr;
  strand_sockaddr_set_port(&addr, 0);
  strand_result_t rc = strand_sock_listen(&lc->l, &addr, SK_MAGIC, &o);
  if (rc != STRAND_SUCCESS) {
    free(lc);
    return abi_result(rc);
  }
  sk_handle_t h;
  memset(&h, 0, sizeof h);
  h.magic = SK_MAGIC;
  h.addr = lc->l.addr;
  h.nonce = lc->l.nonce;
  memset(handle, 0, STRAND_NET_HANDLE_MAXSIZE);
  memcpy(handle, &h, sizeof h);
  *listenComm = lc;
  return STRAND_SUCCESS;
}

static void connecting_free(sk_connecting_t *st) {
  for (int i = 0; i < st->total; i++) {
    if (st->fds[i] >= 0) close(st->fds[i]);
    strand_sock_connect_abort(&st->c[i]);
  }
  free(st);
}

/* Connect states nobody has called connect() for in twice the connect timeout are abandoned (the
 * caller gave up, or dropped the handle): a connect that is still being polled finishes or fails
 * within one timeout. They would otherwise hold their streams' descriptors and memory for the life
 * of the process. Reaping one is safe: a late connect() with its handle finds no state and starts
 * a fresh connect. all = true (teardown) frees every state. */
static void connecting_reap(bool all) {
  int64_t limit_ms = 2 * (int64_t)sk_config()->connect_timeout_ms;
  if (limit_ms < 2000) limit_ms = 2000;
  uint64_t now = strand_now_ns();
  sk_connecting_t *stale = NULL;
  pthread_mutex_lock(&connecting_lock);
  for (sk_connecting_t **pp = &connecting_head; *pp != NULL;) {
    sk_connecting_t *st = *pp;
    /* touched_ns may be a little after `now`: registered by another thread meanwhile */
    if (all || (st->touched_ns < now && now - st->touched_ns > (uint64_t)limit_ms * 1000000ULL)) {
      *pp = st->next;
      st->next = stale;
      stale = st;
    } else {
      pp = &st->next;
    }
  }
  pthread_mutex_unlock(&connecting_lock);
  while (stale != NULL) {
    sk_connecting_t *st = stale;
    stale = st->next;
    char a[STRAND_SOCKADDR_STRLEN];
    STRAND_INFO(STRAND_SUBSYS_NET, "connect to %s abandoned (no connect() call for %.1f s%s): "
                "its %d streams are closed", strand_sockaddr_to_string(&st->addr, a, sizeof a),
                st->touched_ns < now ? (double)(now - st->touched_ns) / 1e9 : 0.0,
                all ? ", plugin shutting down" : "",
                st->total);
    connecting_free(st);
  }
}

void sk_conn_teardown(void) { connecting_reap(true); }

strand_result_t sk_connect(void *ctx, int dev, void *handle, void **sendComm,
                           strand_dev_handle_t **sendDevComm) {
  (void)sendDevComm; /* host plugin: the core's pointer stays NULL */
  connecting_reap(false);
  if (handle == NULL || sendComm == NULL) return STRAND_INVALID_ARGUMENT;
  *sendComm = NULL;
  if (!dev_ok(dev, "connect")) return STRAND_INVALID_ARGUMENT;
  sk_handle_t h;
  memcpy(&h, handle, sizeof h);
  if (h.magic != SK_MAGIC) {
    STRAND_WARN("connect: the handle was not produced by strand-socket's listen (magic %#llx); "
                "are both ranks using NCCL_NET_PLUGIN=strand-socket?",
                (unsigned long long)h.magic);
    return STRAND_INVALID_ARGUMENT;
  }
  sk_connecting_t *st = connecting_take(h.conn_key, dev);
  if (st == NULL) {
    sk_ctx_t *x = ctx;
    st = calloc(1, sizeof *st);
    if (st == NULL) return STRAND_SYSTEM_ERROR;
    st->dev = dev;
    st->addr = h.addr;
    st->traffic_class = x ? x->traffic_class : STRAND_NET_TRAFFIC_CLASS_UNDEF;
    st->total = 1 + sk_config()->nstreams;
    uint64_t conn_id = 0;
    strand_result_t rc = strand_sock_random_u64(&conn_id);
    if (rc == STRAND_SUCCESS) rc = strand_sock_random_u64(&st->key);
    if (rc != STRAND_SUCCESS) {
      free(st);
      return abi_result(rc);
    }
    strand_sock_opts_t o;
    sock_opts(st->traffic_class, &o);
    for (int i = 0; i < st->total; i++) {
      st->fds[i] = -1;
      st->c[i].fd = -1;
    }
    for (int i = 0; i < st->total; i++) {
      strand_sock_payload_t p;
      memset(&p, 0, sizeof p);
      p.conn_id = conn_id;
      p.stream_index = (uint32_t)i;
      p.stream_type = (uint32_t)st->total;
      rc = strand_sock_connect_start(&st->c[i], &h.addr, SK_MAGIC, h.nonce, &p, &o);
      if (rc != STRAND_SUCCESS) {
        connecting_free(st);
        return abi_result(rc);
      }
    }
    h.conn_key = st->key;
    memcpy(handle, &h, sizeof h);
  }
  int done = 0;
  for (int i = 0; i < st->total; i++) {
    if (st->fds[i] < 0) {
      strand_sock_status_t ss = strand_sock_connect_progress(&st->c[i], &st->fds[i]);
      if (ss == STRAND_SOCK_ERROR) {
        strand_result_t rc = abi_result(st->c[i].result != STRAND_SUCCESS ? st->c[i].result
                                                                          : STRAND_SYSTEM_ERROR);
        char a[STRAND_SOCKADDR_STRLEN];
        STRAND_WARN("connect to %s: stream %d of %d failed (%s); %s",
                    strand_sockaddr_to_string(&h.addr, a, sizeof a), i, st->total,
                    rc == STRAND_INVALID_ARGUMENT ? "the listener refused the handle"
                                                  : "the peer did not answer",
                    rc == STRAND_INVALID_ARGUMENT
                        ? "check that the handle reached this rank unchanged and that its "
                          "listener is still open (a stale handle from an earlier listener?)"
                        : "check that the peer is alive and that NCCL_SOCKET_IFNAME selects an "
                          "interface it can reach");
        h.conn_key = 0;
        memcpy(handle, &h, sizeof h);
        connecting_free(st);
        return rc;
      }
      if (ss != STRAND_SOCK_DONE) st->fds[i] = -1;
    }
    if (st->fds[i] >= 0) done++;
  }
  if (done < st->total) {
    connecting_register(st);
    return STRAND_SUCCESS;
  }
  h.conn_key = 0;
  memcpy(handle, &h, sizeof h);
  sk_comm_t *c = NULL;
  strand_result_t rc = build_comm(SK_COMM_SEND, st->dev, st->fds, st->total, &h.addr, &c);
  for (int i = 0; i < st->total; i++) st->fds[i] = -1; /* owned by the comm (or closed) now */
  connecting_free(st);
  if (rc != STRAND_SUCCESS) return abi_result(rc);
  *sendComm = c;
  return STRAND_SUCCESS;
}

static void close_comm(sk_comm_t *c);

static void group_drop(sk_group_t *g) {
  for (int i = 0; i < g->total; i++)
    if (g->fds[i] >= 0) close(g->fds[i]);
  memset(g, 0, sizeof *g);
}

strand_result_t sk_accept(void *listenComm, void **recvComm, strand_dev_handle_t **recvDevComm) {
  if (listenComm == NULL || recvComm == NULL) return STRAND_INVALID_ARGUMENT;
  *recvComm = NULL;
  sk_listen_t *lc = listenComm;
  for (;;) {
    int fd = -1;
    strand_sock_payload_t p;
    strand_sockaddr_t peer;
    strand_sock_status_t ss = strand_sock_accept_progress(&lc->l, &fd, &p, &peer);
    if (ss == STRAND_SOCK_IN_PROGRESS) break;
    if (ss == STRAND_SOCK_ERROR)
      return abi_result(lc->l.result != STRAND_SUCCESS ? lc->l.result : STRAND_SYSTEM_ERROR);
    char a[STRAND_SOCKADDR_STRLEN];
    strand_sockaddr_to_string(&peer, a, sizeof a);
    if (p.stream_type < 2 || p.stream_type > 1 + SK_MAX_STREAMS || p.stream_index >= p.stream_type ||
        p.conn_id == 0) {
      STRAND_WARN("accept on %s: dropped connection from %s announcing stream %u of %u (valid "
                  "handshake but not a strand-socket stream layout)",
                  sk_device(lc->dev)->netif.name, a, p.stream_index, p.stream_type);
      close(fd);
      continue;
    }
    sk_group_t *g = NULL, *free_g = NULL;
    uint64_t now = strand_now_ns();
    for (int i = 0; i < SK_ACCEPT_GROUPS; i++) {
      sk_group_t *x = &lc->groups[i];
      if (x->conn_id != 0 && now - x->started_ns > SK_GROUP_TIMEOUT_NS) {
        char b[STRAND_SOCKADDR_STRLEN];
        STRAND_WARN("accept: connection from %s never completed (%d of %d streams arrived in "
                    "60 s); dropped", strand_sockaddr_to_string(&x->peer, b, sizeof b), x->got,
                    x->total);
        group_drop(x);
      }
      if (x->conn_id == p.conn_id) g = x;
      else if (x->conn_id == 0 && free_g == NULL) free_g = x;
    }
    if (g == NULL) {
      if (free_g == NULL) {
        STRAND_WARN("accept: too many half-open connections; dropped a stream from %s", a);
        close(fd);
        continue;
      }
      g = free_g;
      g->conn_id = p.conn_id;
      g->total = (int)p.stream_type;
      g->got = 0;
      g->started_ns = now;
      g->peer = peer;
      for (int i = 0; i <= SK_MAX_STREAMS; i++) g->fds[i] = -1;
    }
    if ((int)p.stream_type != g->total || g->fds[p.stream_index] >= 0) {
      STRAND_WARN("accept: inconsistent stream %u/%u from %s for a connection of %d streams; "
                  "dropped", p.stream_index, p.stream_type, a, g->total);
      close(fd);
      continue;
    }
    g->fds[p.stream_index] = fd;
    if (++g->got < g->total) continue;
    /* The control stream's peer address names the connection in every later message. */
    sk_comm_t *c = NULL;
    strand_result_t rc = build_comm(SK_COMM_RECV, lc->dev, g->fds, g->total, &g->peer, &c);
    memset(g, 0, sizeof *g);
    if (rc != STRAND_SUCCESS) return abi_result(rc);
    rc = sk_unpack_accept(c, recvDevComm);
    if (rc != STRAND_SUCCESS) {
      close_comm(c);
      return abi_result(rc);
    }
    *recvComm = c;
    return STRAND_SUCCESS;
  }
  return STRAND_SUCCESS;
}

static void close_comm(sk_comm_t *c) {
  sk_workers_detach(c);
  /* Requests reported done may still have control bytes queued (inline payloads, headers):
   * deliver them before the socket goes. */
  sk_comm_flush_ctrl(c, 2000);
  /* Drain what the peer sent us (e.g. CTS of receives we will never match) so that close()
   * sends FIN, not RST: an RST could destroy data the peer has not read yet. */
  char sink[4096];
  for (int k = 0; k < 256; k++) {
    ssize_t n = recv(c->ctrl_fd, sink, sizeof sink, MSG_DONTWAIT);
    if (n <= 0) break;
  }
  shutdown(c->ctrl_fd, SHUT_WR);
  for (int i = 0; i < c->nstreams; i++) shutdown(c->streams[i]->fd, SHUT_WR);
  sk_unpack_close(c);
  sk_comm_free(c);
  sk_comm_count_add(-1);
}

strand_result_t sk_close_send(void *sendComm) {
  sk_comm_t *c = sendComm;
  if (c == NULL) return STRAND_SUCCESS;
  if (c->type != SK_COMM_SEND) return STRAND_INVALID_ARGUMENT;
  close_comm(c);
  return STRAND_SUCCESS;
}

strand_result_t sk_close_recv(void *recvComm) {
  sk_comm_t *c = recvComm;
  if (c == NULL) return STRAND_SUCCESS;
  if (c->type != SK_COMM_RECV) return STRAND_INVALID_ARGUMENT;
  close_comm(c);
  return STRAND_SUCCESS;
}

strand_result_t sk_close_listen(void *listenComm) {
  sk_listen_t *lc = listenComm;
  if (lc == NULL) return STRAND_SUCCESS;
  strand_sock_listener_close(&lc->l);
  for (int i = 0; i < SK_ACCEPT_GROUPS; i++)
    if (lc->groups[i].conn_id != 0) group_drop(&lc->groups[i]);
  free(lc);
  return STRAND_SUCCESS;
}
