/* Non-blocking TCP connect/accept state machines with a magic + nonce hello, and byte-moving
 * helpers. Contract: strand/socket_conn.h. The design goal is that no call made from an NCCL
 * proxy thread can block, and that no wait (for a listener to appear, for a hello to arrive) is
 * unbounded. */
#include "strand/socket_conn.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <netinet/ip.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <unistd.h>

#include "strand/clock.h"
#include "strand/log.h"

#define NS_PER_MS 1000000ULL

static uint64_t ms_to_ns(int ms) { return ms > 0 ? (uint64_t)ms * NS_PER_MS : 0; }

/* ------------------------------------------------------------------------------------------ */
/* Options                                                                                     */

void strand_sock_opts_default(strand_sock_opts_t *opts) {
  if (opts == NULL) return;
  memset(opts, 0, sizeof(*opts));
  opts->connect_timeout_ms = 30000;
  opts->retry_initial_ms = 20;
  opts->retry_max_ms = 1000;
  opts->handshake_timeout_ms = 10000;
  opts->accept_timeout_ms = 0;
  opts->sndbuf = -1;
  opts->rcvbuf = -1;
  opts->tos = -1;
  opts->priority = -1;
  opts->nodelay = true;
}

static strand_result_t set_int_opt(int fd, int level, int name, int value, const char *what) {
  if (setsockopt(fd, level, name, &value, sizeof(value)) == 0) return STRAND_SUCCESS;
  int err = errno;
  STRAND_WARN("setsockopt(%s=%d) on socket %d failed: %s; check the value (and CAP_NET_ADMIN for "
              "SO_PRIORITY > 6)",
              what, value, fd, strerror(err));
  errno = err;
  return STRAND_SYSTEM_ERROR;
}

strand_result_t strand_sock_apply_opts(int fd, int family, const strand_sock_opts_t *opts) {
  strand_sock_opts_t def;
  if (opts == NULL) {
    strand_sock_opts_default(&def);
    opts = &def;
  }
  strand_result_t r = STRAND_SUCCESS;
  /* Keep going after a failure: one refused option should not leave the others unset. */
  if (opts->nodelay && set_int_opt(fd, IPPROTO_TCP, TCP_NODELAY, 1, "TCP_NODELAY") != 0)
    r = STRAND_SYSTEM_ERROR;
  if (opts->sndbuf > 0 && set_int_opt(fd, SOL_SOCKET, SO_SNDBUF, opts->sndbuf, "SO_SNDBUF") != 0)
    r = STRAND_SYSTEM_ERROR;
  if (opts->rcvbuf > 0 && set_int_opt(fd, SOL_SOCKET, SO_RCVBUF, opts->rcvbuf, "SO_RCVBUF") != 0)
    r = STRAND_SYSTEM_ERROR;
  if (opts->tos >= 0) {
    strand_result_t t = (family == AF_INET6)
                            ? set_int_opt(fd, IPPROTO_IPV6, IPV6_TCLASS, opts->tos, "IPV6_TCLASS")
                            : set_int_opt(fd, IPPROTO_IP, IP_TOS, opts->tos, "IP_TOS");
    if (t != STRAND_SUCCESS) r = t;
  }
  if (opts->priority >= 0 &&
      set_int_opt(fd, SOL_SOCKET, SO_PRIORITY, opts->priority, "SO_PRIORITY") != 0)
    r = STRAND_SYSTEM_ERROR;
  return r;
}

strand_result_t strand_sock_set_nonblocking(int fd, bool nonblocking) {
  int fl = fcntl(fd, F_GETFL);
  if (fl < 0) return STRAND_SYSTEM_ERROR;
  fl = nonblocking ? (fl | O_NONBLOCK) : (fl & ~O_NONBLOCK);
  if (fcntl(fd, F_SETFL, fl) < 0) return STRAND_SYSTEM_ERROR;
  return STRAND_SUCCESS;
}

/* ------------------------------------------------------------------------------------------ */
/* Hello encoding (little-endian, independent of host byte order)                             */

static void put_u64(uint8_t *p, uint64_t v) {
  for (int i = 0; i < 8; i++) p[i] = (uint8_t)(v >> (8 * i));
}
static void put_u32(uint8_t *p, uint32_t v) {
  for (int i = 0; i < 4; i++) p[i] = (uint8_t)(v >> (8 * i));
}
static uint64_t get_u64(const uint8_t *p) {
  uint64_t v = 0;
  for (int i = 0; i < 8; i++) v |= (uint64_t)p[i] << (8 * i);
  return v;
}
static uint32_t get_u32(const uint8_t *p) {
  uint32_t v = 0;
  for (int i = 0; i < 4; i++) v |= (uint32_t)p[i] << (8 * i);
  return v;
}

enum { HELLO_MAGIC = 0, HELLO_NONCE = 8, HELLO_CONN_ID = 16, HELLO_INDEX = 24, HELLO_TYPE = 28,
       HELLO_USER = 32 };
_Static_assert(HELLO_USER + STRAND_SOCK_PAYLOAD_USER_BYTES == STRAND_SOCK_HELLO_BYTES,
               "hello layout");

static void hello_encode(uint8_t *h, uint64_t magic, uint64_t nonce,
                         const strand_sock_payload_t *pl) {
  memset(h, 0, STRAND_SOCK_HELLO_BYTES);
  put_u64(h + HELLO_MAGIC, magic);
  put_u64(h + HELLO_NONCE, nonce);
  if (pl != NULL) {
    put_u64(h + HELLO_CONN_ID, pl->conn_id);
    put_u32(h + HELLO_INDEX, pl->stream_index);
    put_u32(h + HELLO_TYPE, pl->stream_type);
    memcpy(h + HELLO_USER, pl->user, STRAND_SOCK_PAYLOAD_USER_BYTES);
  }
}

static void hello_decode_payload(const uint8_t *h, strand_sock_payload_t *pl) {
  pl->conn_id = get_u64(h + HELLO_CONN_ID);
  pl->stream_index = get_u32(h + HELLO_INDEX);
  pl->stream_type = get_u32(h + HELLO_TYPE);
  memcpy(pl->user, h + HELLO_USER, STRAND_SOCK_PAYLOAD_USER_BYTES);
}

/* ------------------------------------------------------------------------------------------ */
/* Random                                                                                      */

static void verdict_encode(uint8_t *v, uint32_t code) {
  put_u32(v, STRAND_SOCK_VERDICT_TAG);
  put_u32(v + 4, code);
}

strand_result_t strand_sock_random_u64(uint64_t *out) {
  if (out == NULL) return STRAND_INVALID_ARGUMENT;
  for (int tries = 0; tries < 16; tries++) {
    uint64_t v = 0;
    ssize_t n = getrandom(&v, sizeof(v), GRND_NONBLOCK);
    if (n < 0 && errno == EINTR) continue;
    if (n != (ssize_t)sizeof(v)) {
      /* Entropy pool not initialised yet (early boot) or no getrandom: /dev/urandom never
       * blocks and is good enough for a nonce that only has to be unguessable by strangers. */
      int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
      if (fd < 0) break;
      n = read(fd, &v, sizeof(v));
      close(fd);
      if (n != (ssize_t)sizeof(v)) break;
    }
    if (v != 0) {
      *out = v;
      return STRAND_SUCCESS;
    }
  }
  STRAND_WARN("cannot draw a random nonce: getrandom() and /dev/urandom both failed (%s)",
              strerror(errno));
  return STRAND_SYSTEM_ERROR;
}

/* ------------------------------------------------------------------------------------------ */
/* Moving bytes                                                                                */

strand_sock_status_t strand_sock_send_some(int fd, const void *buf, size_t len, size_t *offset) {
  while (*offset < len) {
    ssize_t n = send(fd, (const char *)buf + *offset, len - *offset, MSG_DONTWAIT | MSG_NOSIGNAL);
    if (n > 0) {
      *offset += (size_t)n;
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return STRAND_SOCK_IN_PROGRESS;
    if (n == 0) errno = EPIPE; /* send never returns 0 for len > 0 on TCP; be defensive */
    return STRAND_SOCK_ERROR;
  }
  return STRAND_SOCK_DONE;
}

strand_sock_status_t strand_sock_recv_some(int fd, void *buf, size_t len, size_t *offset) {
  while (*offset < len) {
    ssize_t n = recv(fd, (char *)buf + *offset, len - *offset, MSG_DONTWAIT);
    if (n > 0) {
      *offset += (size_t)n;
      continue;
    }
    if (n == 0) return STRAND_SOCK_CLOSED;
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) return STRAND_SOCK_IN_PROGRESS;
    return STRAND_SOCK_ERROR;
  }
  return STRAND_SOCK_DONE;
}

/* Milliseconds left until deadline (0 if passed); deadline 0 = unbounded -> -1 for poll. */
static int remaining_ms(uint64_t deadline) {
  if (deadline == 0) return -1;
  uint64_t now = strand_now_ns();
  if (now >= deadline) return 0;
  uint64_t ms = (deadline - now + NS_PER_MS - 1) / NS_PER_MS;
  return ms > 1000000 ? 1000000 : (int)ms;
}

static strand_result_t move_all(int fd, void *buf, size_t len, int timeout_ms, bool sending) {
  uint64_t deadline = timeout_ms >= 0 ? strand_now_ns() + ms_to_ns(timeout_ms) : 0;
  if (timeout_ms == 0) deadline = strand_now_ns(); /* 0 = no waiting at all, still try once */
  size_t off = 0;
  for (;;) {
    strand_sock_status_t s = sending ? strand_sock_send_some(fd, buf, len, &off)
                                     : strand_sock_recv_some(fd, buf, len, &off);
    if (s == STRAND_SOCK_DONE) return STRAND_SUCCESS;
    if (s == STRAND_SOCK_CLOSED) {
      errno = ECONNRESET;
      return STRAND_REMOTE_ERROR;
    }
    if (s == STRAND_SOCK_ERROR) {
      int err = errno;
      errno = err;
      return (err == EPIPE || err == ECONNRESET) ? STRAND_REMOTE_ERROR : STRAND_SYSTEM_ERROR;
    }
    int wait = remaining_ms(deadline);
    if (wait == 0) {
      errno = ETIMEDOUT;
      return STRAND_TIMEOUT;
    }
    struct pollfd p = {.fd = fd, .events = sending ? POLLOUT : POLLIN};
    if (poll(&p, 1, wait) < 0 && errno != EINTR) return STRAND_SYSTEM_ERROR;
  }
}

strand_result_t strand_sock_send_all(int fd, const void *buf, size_t len, int timeout_ms) {
  if (buf == NULL && len > 0) return STRAND_INVALID_ARGUMENT;
  return move_all(fd, (void *)buf, len, timeout_ms, true);
}

strand_result_t strand_sock_recv_all(int fd, void *buf, size_t len, int timeout_ms) {
  if (buf == NULL && len > 0) return STRAND_INVALID_ARGUMENT;
  return move_all(fd, buf, len, timeout_ms, false);
}

/* ------------------------------------------------------------------------------------------ */
/* Listener / accept                                                                           */

static void pending_reset(strand_sock_pending_t *p) {
  if (p->fd >= 0) close(p->fd);
  memset(p, 0, sizeof(*p));
  p->fd = -1;
}

strand_result_t strand_sock_listen(strand_sock_listener_t *l, const strand_sockaddr_t *addr,
                                   uint64_t magic, const strand_sock_opts_t *opts) {
  if (l == NULL) return STRAND_INVALID_ARGUMENT;
  memset(l, 0, sizeof(*l));
  l->fd = -1;
  for (int i = 0; i < STRAND_SOCK_MAX_PENDING; i++) l->pending[i].fd = -1;
  if (opts != NULL) l->opts = *opts;
  else strand_sock_opts_default(&l->opts);
  l->magic = magic != 0 ? magic : STRAND_SOCK_MAGIC_DEFAULT;

  char text[STRAND_SOCKADDR_STRLEN];
  socklen_t alen = strand_sockaddr_len(addr);
  if (alen == 0) {
    STRAND_WARN("listen: address %s is neither IPv4 nor IPv6",
                strand_sockaddr_to_string(addr, text, sizeof(text)));
    return STRAND_INVALID_ARGUMENT;
  }
  strand_sockaddr_to_string(addr, text, sizeof(text));
  strand_result_t r = strand_sock_random_u64(&l->nonce);
  if (r != STRAND_SUCCESS) return r;

  int fd = socket(addr->sa.sa_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    STRAND_WARN("listen on %s: socket() failed: %s", text, strerror(errno));
    return STRAND_SYSTEM_ERROR;
  }
  int one = 1;
  (void)setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  /* Buffer sizes must be set before listen() to size the TCP window scale of accepted sockets. */
  (void)strand_sock_apply_opts(fd, addr->sa.sa_family, &l->opts);
  if (bind(fd, &addr->sa, alen) != 0) {
    int err = errno;
    STRAND_WARN("listen: bind to %s failed: %s; check that the address belongs to this host "
                "(NCCL_SOCKET_IFNAME) and the port is free",
                text, strerror(err));
    close(fd);
    return STRAND_SYSTEM_ERROR;
  }
  if (listen(fd, SOMAXCONN) != 0) {
    int err = errno;
    STRAND_WARN("listen on %s failed: %s", text, strerror(err));
    close(fd);
    return STRAND_SYSTEM_ERROR;
  }
  strand_sockaddr_t bound;
  memset(&bound, 0, sizeof(bound));
  socklen_t blen = sizeof(bound);
  if (getsockname(fd, &bound.sa, &blen) != 0) {
    int err = errno;
    STRAND_WARN("listen on %s: getsockname failed: %s", text, strerror(err));
    close(fd);
    return STRAND_SYSTEM_ERROR;
  }
  l->fd = fd;
  l->addr = bound;
  l->idle_since_ns = strand_now_ns();
  l->result = STRAND_SUCCESS;
  return STRAND_SUCCESS;
}

static void reject(strand_sock_listener_t *l, strand_sock_pending_t *p, const char *reason) {
  char me[STRAND_SOCKADDR_STRLEN], peer[STRAND_SOCKADDR_STRLEN];
  STRAND_WARN("listener %s: dropped incoming connection from %s: %s. If that peer is a Strand "
              "rank, check that both sides run the same plugin and that the connect handle "
              "reached it unchanged; otherwise something else is probing this port",
              strand_sockaddr_to_string(&l->addr, me, sizeof(me)),
              strand_sockaddr_to_string(&p->peer, peer, sizeof(peer)), reason);
  l->rejected++;
  pending_reset(p);
}

/* Reads more hello bytes from one pending connection and rejects it if it is not ours; once the
 * hello is complete and valid, writes the "accepted" verdict. */
static void pending_progress(strand_sock_listener_t *l, strand_sock_pending_t *p, uint64_t now) {
  char reason[200];
  if (p->got == STRAND_SOCK_HELLO_BYTES) goto verdict;
  if (p->got < STRAND_SOCK_HELLO_BYTES) {
    strand_sock_status_t s =
        strand_sock_recv_some(p->fd, p->hello, STRAND_SOCK_HELLO_BYTES, &p->got);
    if (s == STRAND_SOCK_CLOSED || s == STRAND_SOCK_ERROR) {
      if (s == STRAND_SOCK_CLOSED)
        snprintf(reason, sizeof(reason), "peer closed after %zu of %d hello bytes", p->got,
                 STRAND_SOCK_HELLO_BYTES);
      else
        snprintf(reason, sizeof(reason), "receive failed after %zu of %d hello bytes: %s",
                 p->got, STRAND_SOCK_HELLO_BYTES, strerror(errno));
      reject(l, p, reason);
      return;
    }
  }
  /* Check what has arrived as early as possible: garbage is rejected on its first 8 bytes. */
  if (p->got >= HELLO_MAGIC + 8) {
    uint64_t magic = get_u64(p->hello + HELLO_MAGIC);
    if (magic != l->magic) {
      snprintf(reason, sizeof(reason), "wrong magic 0x%016" PRIx64 " (expected 0x%016" PRIx64 ")",
               magic, l->magic);
      reject(l, p, reason);
      return;
    }
  }
  if (p->got >= HELLO_NONCE + 8) {
    uint64_t nonce = get_u64(p->hello + HELLO_NONCE);
    if (nonce != l->nonce) {
      /* Our protocol with a stale or forged handle: tell the connector, so that its connect
       * fails at once instead of retrying (best effort: a fresh socket has room for 8 bytes). */
      uint8_t v[STRAND_SOCK_VERDICT_BYTES];
      verdict_encode(v, STRAND_SOCK_VERDICT_WRONG_NONCE);
      size_t off = 0;
      (void)strand_sock_send_some(p->fd, v, sizeof(v), &off);
      snprintf(reason, sizeof(reason),
               "wrong nonce 0x%016" PRIx64 " (a connection meant for another or an earlier "
               "listener)",
               nonce);
      reject(l, p, reason);
      return;
    }
  }
  if (p->got < STRAND_SOCK_HELLO_BYTES) {
    if (now >= p->deadline_ns) {
      snprintf(reason, sizeof(reason), "sent only %zu of %d hello bytes within %d ms", p->got,
               STRAND_SOCK_HELLO_BYTES, l->opts.handshake_timeout_ms);
      reject(l, p, reason);
    }
    return;
  }
verdict:
  if (p->verdict_sent < STRAND_SOCK_VERDICT_BYTES) {
    uint8_t v[STRAND_SOCK_VERDICT_BYTES];
    verdict_encode(v, STRAND_SOCK_VERDICT_ACCEPTED);
    strand_sock_status_t s = strand_sock_send_some(p->fd, v, sizeof(v), &p->verdict_sent);
    if (s == STRAND_SOCK_ERROR) {
      snprintf(reason, sizeof(reason), "sending the verdict failed: %s (the peer left)",
               strerror(errno));
      reject(l, p, reason);
    } else if (s != STRAND_SOCK_DONE && now >= p->deadline_ns) {
      snprintf(reason, sizeof(reason), "the verdict could not be sent within %d ms",
               l->opts.handshake_timeout_ms);
      reject(l, p, reason);
    }
  }
}

/* The unverified pending connection that arrived first (NULL if every one is verified). */
static strand_sock_pending_t *oldest_unverified(strand_sock_listener_t *l) {
  strand_sock_pending_t *o = NULL;
  for (int i = 0; i < STRAND_SOCK_MAX_PENDING; i++) {
    strand_sock_pending_t *p = &l->pending[i];
    if (p->fd < 0 || p->got == STRAND_SOCK_HELLO_BYTES) continue;
    if (o == NULL || p->arrived_ns < o->arrived_ns) o = p;
  }
  return o;
}

/* How long a connection may sit without its complete hello before a newcomer may take its slot:
 * a tenth of the handshake timeout (1 s by default). Why not at once: in a burst of real peers
 * (collnet_stub over strand-socket at 4 ranks and 4 streams opens several hundred sockets to one
 * listener within milliseconds) the table fills with peers whose hello is a few microseconds
 * behind their SYN; dropping the youngest of them to make room for the next one failed whole
 * communicators (docs/benchmarks/collnet.md, "Four GPUs", 2026-11-28). A connection that has had
 * this long is a stranger or a stalled peer. */
static uint64_t evict_age_ns(const strand_sock_listener_t *l) {
  return ms_to_ns(l->opts.handshake_timeout_ms) / 10;
}

/* A slot for the next connection the kernel has queued: a free one, else the oldest unverified
 * connection once it has had evict_age_ns. NULL: the newcomer stays in the kernel's backlog
 * (listen(SOMAXCONN)) until a slot frees up; its connector waits for the verdict meanwhile, so a
 * burst of real peers is served in turn, never dropped. */
static strand_sock_pending_t *pending_slot(strand_sock_listener_t *l, uint64_t now) {
  for (int i = 0; i < STRAND_SOCK_MAX_PENDING; i++)
    if (l->pending[i].fd < 0) return &l->pending[i];
  strand_sock_pending_t *o = oldest_unverified(l);
  if (o == NULL || now - o->arrived_ns < evict_age_ns(l)) return NULL;
  /* Only for a newcomer that is really there: a slow peer is not dropped for nothing. */
  struct pollfd q = {.fd = l->fd, .events = POLLIN};
  if (poll(&q, 1, 0) <= 0 || !(q.revents & POLLIN)) return NULL;
  char reason[200];
  snprintf(reason, sizeof(reason),
           "the listener holds %d connections in handshake and this one sent no complete hello "
           "within %d ms; it makes room for the next",
           STRAND_SOCK_MAX_PENDING, l->opts.handshake_timeout_ms / 10);
  l->evicted++;
  reject(l, o, reason);
  return o;
}

strand_sock_status_t strand_sock_accept_progress(strand_sock_listener_t *l, int *fd_out,
                                                 strand_sock_payload_t *payload_out,
                                                 strand_sockaddr_t *peer_out) {
  if (l == NULL || fd_out == NULL) return STRAND_SOCK_ERROR;
  *fd_out = -1;
  char me[STRAND_SOCKADDR_STRLEN];
  if (l->fd < 0) {
    if (l->result == STRAND_SUCCESS) l->result = STRAND_INTERNAL_ERROR;
    return STRAND_SOCK_ERROR;
  }
  uint64_t now = strand_now_ns();

  /* 1. Take what the kernel has queued (a bounded number per call, so a flood cannot make one
   *    call long, and only while a slot is free: see pending_slot), reading each newcomer's hello
   *    at once: a real peer sends it right behind its SYN, so it is mostly verified in the call
   *    that accepts it, whatever else waits on the port. */
  bool fresh[STRAND_SOCK_MAX_PENDING];
  memset(fresh, 0, sizeof(fresh));
  for (int n = 0; n < STRAND_SOCK_MAX_PENDING; n++) {
    /* The slot first: with none, what the kernel queued stays there (see pending_slot). */
    strand_sock_pending_t *p = pending_slot(l, now);
    if (p == NULL) break;
    strand_sockaddr_t peer;
    memset(&peer, 0, sizeof(peer));
    socklen_t plen = sizeof(peer);
    int fd = accept4(l->fd, &peer.sa, &plen, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      int err = errno;
      if (err == EAGAIN || err == EWOULDBLOCK) break;
      /* A connection that died in the queue, or a signal: not the listener's fault. */
      if (err == EINTR || err == ECONNABORTED || err == EPROTO || err == ENETDOWN ||
          err == ENOPROTOOPT || err == EHOSTDOWN || err == ENONET || err == EHOSTUNREACH ||
          err == EOPNOTSUPP || err == ENETUNREACH || err == ETIMEDOUT)
        continue;
      /* Out of descriptors: strangers must not turn that into a dead listener. Drop the oldest
       * unverified connection and try again later; fail only when none is ours to drop. */
      if ((err == EMFILE || err == ENFILE || err == ENOBUFS || err == ENOMEM) &&
          oldest_unverified(l) != NULL) {
        char reason[160];
        snprintf(reason, sizeof(reason), "accept() ran out of resources (%s); the oldest "
                 "unverified connection makes room", strerror(err));
        l->evicted++;
        reject(l, oldest_unverified(l), reason);
        break;
      }
      STRAND_WARN("listener %s: accept() failed: %s; check the process file-descriptor limit "
                  "(ulimit -n) and memory",
                  strand_sockaddr_to_string(&l->addr, me, sizeof(me)), strerror(err));
      l->result = STRAND_SYSTEM_ERROR;
      return STRAND_SOCK_ERROR;
    }
    p->fd = fd;
    p->peer = peer;
    p->got = 0;
    p->verdict_sent = 0;
    p->arrived_ns = now;
    p->deadline_ns = now + ms_to_ns(l->opts.handshake_timeout_ms);
    pending_progress(l, p, now);
    fresh[p - l->pending] = true;
  }

  /* 2. Advance every other pending hello; strangers are dropped one by one, each on its own
   *    deadline, without delaying anyone else. */
  for (int i = 0; i < STRAND_SOCK_MAX_PENDING; i++)
    if (l->pending[i].fd >= 0 && !fresh[i]) pending_progress(l, &l->pending[i], now);

  /* 3. Hand out one validated connection. */
  for (int i = 0; i < STRAND_SOCK_MAX_PENDING; i++) {
    strand_sock_pending_t *p = &l->pending[i];
    if (p->fd < 0 || p->verdict_sent < STRAND_SOCK_VERDICT_BYTES) continue;
    (void)strand_sock_apply_opts(p->fd, p->peer.sa.sa_family, &l->opts);
    *fd_out = p->fd;
    if (payload_out != NULL) hello_decode_payload(p->hello, payload_out);
    if (peer_out != NULL) *peer_out = p->peer;
    p->fd = -1; /* ownership passed to the caller */
    pending_reset(p);
    l->idle_since_ns = now;
    return STRAND_SOCK_DONE;
  }

  if (l->opts.accept_timeout_ms > 0 &&
      now - l->idle_since_ns >= ms_to_ns(l->opts.accept_timeout_ms)) {
    STRAND_WARN("listener %s: no valid connection within %d ms (%d strangers dropped); check "
                "that the peer received the handle and can reach this address",
                strand_sockaddr_to_string(&l->addr, me, sizeof(me)), l->opts.accept_timeout_ms,
                l->rejected);
    l->result = STRAND_TIMEOUT;
    return STRAND_SOCK_ERROR;
  }
  return STRAND_SOCK_IN_PROGRESS;
}

strand_result_t strand_sock_accept_wait(strand_sock_listener_t *l, int timeout_ms, int *fd_out,
                                        strand_sock_payload_t *payload_out,
                                        strand_sockaddr_t *peer_out) {
  if (l == NULL || fd_out == NULL) return STRAND_INVALID_ARGUMENT;
  uint64_t deadline = strand_now_ns() + ms_to_ns(timeout_ms);
  for (;;) {
    strand_sock_status_t s = strand_sock_accept_progress(l, fd_out, payload_out, peer_out);
    if (s == STRAND_SOCK_DONE) return STRAND_SUCCESS;
    if (s == STRAND_SOCK_ERROR) return l->result;
    int wait = remaining_ms(deadline);
    if (wait == 0) {
      char me[STRAND_SOCKADDR_STRLEN];
      STRAND_WARN("listener %s: no valid connection within %d ms; check that the peer received "
                  "the handle and can reach this address",
                  strand_sockaddr_to_string(&l->addr, me, sizeof(me)), timeout_ms);
      return STRAND_TIMEOUT;
    }
    /* Sleep until the listener or a pending hello has something, but wake at least every 50 ms
     * to enforce handshake deadlines. */
    struct pollfd pfd[1 + STRAND_SOCK_MAX_PENDING];
    int n = 0;
    pfd[n++] = (struct pollfd){.fd = l->fd, .events = POLLIN};
    for (int i = 0; i < STRAND_SOCK_MAX_PENDING; i++)
      if (l->pending[i].fd >= 0) pfd[n++] = (struct pollfd){.fd = l->pending[i].fd, .events = POLLIN};
    (void)poll(pfd, (nfds_t)n, wait < 50 ? wait : 50);
  }
}

void strand_sock_listener_close(strand_sock_listener_t *l) {
  if (l == NULL) return;
  for (int i = 0; i < STRAND_SOCK_MAX_PENDING; i++)
    if (l->pending[i].fd >= 0) pending_reset(&l->pending[i]);
  if (l->fd >= 0) close(l->fd);
  l->fd = -1;
}

/* ------------------------------------------------------------------------------------------ */
/* Connect                                                                                     */

enum { C_IDLE = 0, C_CONNECTING, C_BACKOFF, C_HELLO, C_VERDICT, C_DONE, C_ERROR };

strand_result_t strand_sock_connect_start(strand_sock_connect_t *c, const strand_sockaddr_t *peer,
                                          uint64_t magic, uint64_t nonce,
                                          const strand_sock_payload_t *payload,
                                          const strand_sock_opts_t *opts) {
  if (c == NULL) return STRAND_INVALID_ARGUMENT;
  memset(c, 0, sizeof(*c));
  c->fd = -1;
  c->state = C_ERROR;
  c->result = STRAND_INVALID_ARGUMENT;
  char text[STRAND_SOCKADDR_STRLEN];
  if (strand_sockaddr_len(peer) == 0 || strand_sockaddr_port(peer) <= 0) {
    STRAND_WARN("connect: peer address %s is not an IPv4/IPv6 address with a port; the connect "
                "handle is probably corrupt",
                strand_sockaddr_to_string(peer, text, sizeof(text)));
    return STRAND_INVALID_ARGUMENT;
  }
  if (nonce == 0) {
    STRAND_WARN("connect to %s: the handle carries no nonce (listeners never draw 0); the "
                "connect handle is probably zeroed or truncated",
                strand_sockaddr_to_string(peer, text, sizeof(text)));
    return STRAND_INVALID_ARGUMENT;
  }
  if (opts != NULL) c->opts = *opts;
  else strand_sock_opts_default(&c->opts);
  c->peer = *peer;
  hello_encode(c->hello, magic != 0 ? magic : STRAND_SOCK_MAGIC_DEFAULT, nonce, payload);
  c->start_ns = strand_now_ns();
  c->deadline_ns = c->start_ns + ms_to_ns(c->opts.connect_timeout_ms);
  c->backoff_ms = c->opts.retry_initial_ms > 0 ? c->opts.retry_initial_ms : 1;
  c->state = C_IDLE;
  c->result = STRAND_SUCCESS;
  return STRAND_SUCCESS;
}

static bool retryable(int err) {
  return err == ECONNREFUSED || err == ETIMEDOUT || err == ECONNRESET || err == EHOSTUNREACH ||
         err == ENETUNREACH || err == EADDRNOTAVAIL || err == EAGAIN || err == EPIPE;
}

static strand_sock_status_t connect_fail(strand_sock_connect_t *c, strand_result_t result,
                                         int err, const char *why) {
  char text[STRAND_SOCKADDR_STRLEN];
  uint64_t elapsed_ms = (strand_now_ns() - c->start_ns) / NS_PER_MS;
  STRAND_WARN("connect to %s failed: %s after %d attempt(s) in %llu ms (last error: %s); check "
              "that the peer is listening on that address, that it is reachable from this host "
              "(NCCL_SOCKET_IFNAME / NCCL_SOCKET_FAMILY on both sides) and no firewall drops it",
              strand_sockaddr_to_string(&c->peer, text, sizeof(text)), why, c->attempts,
              (unsigned long long)elapsed_ms, err != 0 ? strerror(err) : "none");
  if (c->fd >= 0) close(c->fd);
  c->fd = -1;
  c->last_errno = err;
  c->result = result;
  c->state = C_ERROR;
  return STRAND_SOCK_ERROR;
}

/* A failed attempt: close, and either schedule another one or give up at the deadline. */
static strand_sock_status_t connect_retry(strand_sock_connect_t *c, int err, uint64_t now) {
  if (c->fd >= 0) close(c->fd);
  c->fd = -1;
  c->last_errno = err;
  if (now >= c->deadline_ns)
    return connect_fail(c, STRAND_TIMEOUT, err, "connect timeout reached");
  uint64_t at = now + ms_to_ns(c->backoff_ms);
  c->retry_at_ns = at < c->deadline_ns ? at : c->deadline_ns;
  int max = c->opts.retry_max_ms > 0 ? c->opts.retry_max_ms : 1000;
  c->backoff_ms = c->backoff_ms * 2 > max ? max : c->backoff_ms * 2;
  c->state = C_BACKOFF;
  return STRAND_SOCK_IN_PROGRESS;
}

static strand_sock_status_t connect_attempt(strand_sock_connect_t *c, uint64_t now) {
  c->attempts++;
  int fam = c->peer.sa.sa_family;
  int fd = socket(fam, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    int err = errno;
    return connect_fail(c, STRAND_SYSTEM_ERROR, err, "socket() failed");
  }
  c->fd = fd;
  /* Before connect(): buffer sizes decide the window scale negotiated in the SYN. */
  (void)strand_sock_apply_opts(fd, fam, &c->opts);
  /* EINTR from a non-blocking connect() means the connection continues asynchronously. */
  int rc = connect(fd, &c->peer.sa, strand_sockaddr_len(&c->peer));
  if (rc == 0) {
    c->state = C_HELLO;
    c->handshake_deadline_ns = now + ms_to_ns(c->opts.handshake_timeout_ms);
    return STRAND_SOCK_IN_PROGRESS;
  }
  int err = errno;
  if (err == EINPROGRESS || err == EINTR || err == EALREADY) {
    c->state = C_CONNECTING;
    return STRAND_SOCK_IN_PROGRESS;
  }
  if (retryable(err)) return connect_retry(c, err, now);
  return connect_fail(c, STRAND_SYSTEM_ERROR, err, "connect() failed");
}

/* Reads the listener's verdict on the hello. EOF or a reset before it is retried (the listener may
 * have dropped us to make room, or be restarting); a refusal fails at once. The wait is bounded by
 * the connect deadline, and at least by the handshake timeout after the hello went out. */
static strand_sock_status_t connect_verdict(strand_sock_connect_t *c, int *fd_out, uint64_t now) {
  strand_sock_status_t s =
      strand_sock_recv_some(c->fd, c->verdict, STRAND_SOCK_VERDICT_BYTES, &c->verdict_got);
  if (s == STRAND_SOCK_CLOSED || s == STRAND_SOCK_ERROR) {
    int err = s == STRAND_SOCK_CLOSED ? ECONNRESET : errno;
    c->sent = 0;
    if (retryable(err)) return connect_retry(c, err, now);
    return connect_fail(c, STRAND_SYSTEM_ERROR, err, "reading the listener's verdict failed");
  }
  if (s == STRAND_SOCK_DONE) {
    uint32_t tag = get_u32(c->verdict), code = get_u32(c->verdict + 4);
    if (tag == STRAND_SOCK_VERDICT_TAG && code == STRAND_SOCK_VERDICT_ACCEPTED) {
      c->state = C_DONE;
      *fd_out = c->fd;
      return STRAND_SOCK_DONE;
    }
    if (tag == STRAND_SOCK_VERDICT_TAG && code == STRAND_SOCK_VERDICT_WRONG_NONCE)
      return connect_fail(c, STRAND_INVALID_ARGUMENT, 0,
                          "the listener refused the nonce: the connect handle is stale (the "
                          "listener was closed and its port reused) or forged");
    return connect_fail(c, STRAND_INVALID_ARGUMENT, 0,
                        "the listener answered with something that is not a Strand verdict; "
                        "the connect handle points at another service or another Strand version");
  }
  uint64_t limit = c->deadline_ns > c->handshake_deadline_ns ? c->deadline_ns
                                                             : c->handshake_deadline_ns;
  if (now >= limit)
    return connect_fail(c, STRAND_TIMEOUT, ETIMEDOUT,
                        "the listener accepted the TCP connection but gave no verdict on the "
                        "hello in time (is its process polling accept?)");
  return STRAND_SOCK_IN_PROGRESS;
}

strand_sock_status_t strand_sock_connect_progress(strand_sock_connect_t *c, int *fd_out) {
  if (c == NULL || fd_out == NULL) return STRAND_SOCK_ERROR;
  *fd_out = -1;
  uint64_t now = strand_now_ns();
  switch (c->state) {
  case C_DONE:
    *fd_out = c->fd;
    return STRAND_SOCK_DONE;
  case C_ERROR:
    return STRAND_SOCK_ERROR;
  case C_BACKOFF:
    if (now < c->retry_at_ns) return STRAND_SOCK_IN_PROGRESS;
    if (now >= c->deadline_ns)
      return connect_fail(c, STRAND_TIMEOUT, c->last_errno, "connect timeout reached");
    /* fall through */
  case C_IDLE: {
    strand_sock_status_t s = connect_attempt(c, now);
    if (c->state != C_HELLO) return s;
    break; /* connected at once: go on to send the hello in this call */
  }
  case C_CONNECTING: {
    struct pollfd p = {.fd = c->fd, .events = POLLOUT};
    int rc = poll(&p, 1, 0);
    if (rc == 0) {
      if (now >= c->deadline_ns)
        return connect_fail(c, STRAND_TIMEOUT, ETIMEDOUT, "connect timeout reached");
      return STRAND_SOCK_IN_PROGRESS;
    }
    if (rc < 0) {
      if (errno == EINTR) return STRAND_SOCK_IN_PROGRESS;
      return connect_fail(c, STRAND_SYSTEM_ERROR, errno, "poll() failed");
    }
    int err = 0;
    socklen_t elen = sizeof(err);
    if (getsockopt(c->fd, SOL_SOCKET, SO_ERROR, &err, &elen) != 0) err = errno;
    if (err != 0) {
      if (retryable(err)) return connect_retry(c, err, now);
      return connect_fail(c, STRAND_SYSTEM_ERROR, err, "connect() failed");
    }
    c->state = C_HELLO;
    c->handshake_deadline_ns = now + ms_to_ns(c->opts.handshake_timeout_ms);
    break;
  }
  case C_HELLO:
    break;
  case C_VERDICT:
    return connect_verdict(c, fd_out, now);
  default:
    return STRAND_SOCK_ERROR;
  }

  /* C_HELLO */
  strand_sock_status_t s = strand_sock_send_some(c->fd, c->hello, STRAND_SOCK_HELLO_BYTES, &c->sent);
  if (s == STRAND_SOCK_DONE) {
    c->state = C_VERDICT;
    c->verdict_got = 0;
    return connect_verdict(c, fd_out, now);
  }
  if (s == STRAND_SOCK_ERROR) {
    int err = errno;
    /* A retry starts a fresh connection and hello: the acceptor drops partial ones. */
    c->sent = 0;
    if (retryable(err)) return connect_retry(c, err, now);
    return connect_fail(c, STRAND_SYSTEM_ERROR, err, "sending the hello failed");
  }
  if (now >= c->handshake_deadline_ns)
    return connect_fail(c, STRAND_TIMEOUT, ETIMEDOUT,
                        "the hello could not be sent within the handshake timeout");
  return STRAND_SOCK_IN_PROGRESS;
}

strand_result_t strand_sock_connect_wait(strand_sock_connect_t *c, int *fd_out) {
  if (c == NULL || fd_out == NULL) return STRAND_INVALID_ARGUMENT;
  for (;;) {
    strand_sock_status_t s = strand_sock_connect_progress(c, fd_out);
    if (s == STRAND_SOCK_DONE) return STRAND_SUCCESS;
    if (s == STRAND_SOCK_ERROR) return c->result;
    /* The state machine enforces the deadlines; sleep briefly in poll() between steps. */
    if (c->state == C_BACKOFF) {
      int wait = remaining_ms(c->retry_at_ns);
      (void)poll(NULL, 0, wait < 1 ? 1 : (wait > 50 ? 50 : wait));
    } else if (c->fd >= 0) {
      struct pollfd p = {.fd = c->fd, .events = c->state == C_VERDICT ? POLLIN : POLLOUT};
      (void)poll(&p, 1, 50);
    }
  }
}

void strand_sock_connect_abort(strand_sock_connect_t *c) {
  if (c == NULL) return;
  if (c->state != C_DONE && c->fd >= 0) close(c->fd);
  c->fd = -1;
  if (c->state != C_DONE) c->state = C_ERROR;
  if (c->result == STRAND_SUCCESS && c->state == C_ERROR) c->result = STRAND_INTERNAL_ERROR;
}
