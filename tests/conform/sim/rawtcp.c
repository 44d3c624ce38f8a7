/* strand-conform — raw-TCP reference for `perf --ref tcp`.
 *
 * What it is for: a socket plugin's overhead is only meaningful against what plain TCP reaches
 * between the same two processes over the same interface, with the same message sizes, the same
 * number of messages in flight and the same number of TCP streams. This file is that floor: no
 * message header (both sides know the sizes), no copies, no matching, just the bytes.
 *
 * Each direction has `streams` connections. A message of S bytes is cut into
 * min(streams, S / 64 KiB) chunks (at least one), chunk j of message k going to stream
 * (k + j) % streams so that small messages still spread over the streams. Every stream moves its
 * chunks in message order with non-blocking send/recv, driven by whoever holds the stream's lock:
 * the caller inside post/test (trylock, so a small message leaves at once, no thread wake-up on
 * the path) or the stream's worker thread (which sleeps in poll() while the socket is not ready),
 * so large multi-stream messages get one core per stream like a threaded transport.
 * Latency uses rawtcp_send_now/recv_now instead: send/recv on one connection in the calling
 * thread, polled without sleeping (as a proxy's test() loop polls). */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <unistd.h>

#include "simperf.h"
#include "strand/clock.h"

#define RT_MAGIC 0x5354524e54435052ULL /* "STRNTCPR" */
#define RT_IO_SLICE_S 0.2              /* blocking calls wake up this often to check for stop */

typedef struct {
  void *buf;
  size_t size;
  atomic_int remaining; /* chunks not yet moved */
  int group_n;          /* request: messages covered, starting at this one */
  bool busy;            /* caller only: posted and not yet tested done */
} rt_msg_t;

typedef struct rt_dir rt_dir_t;

typedef struct {
  rt_dir_t *dir;
  int idx;
  int fd;
  pthread_t th;
  bool started;
  /* Progress state of the stream, owned by whoever holds `lk`: its worker, or the caller inside
   * post/test (trylock), so that small messages move at once without waking a thread. */
  pthread_mutex_t lk;
  uint64_t k;  /* next message this stream has to look at */
  size_t off;  /* bytes of its chunk of message k already moved */
} rt_stream_t;

struct rt_dir {
  rawtcp_t *t;
  bool sending;
  int peer;
  rt_stream_t streams[RAWTCP_MAX_STREAMS];
  rt_msg_t ring[RAWTCP_RING];
  atomic_uint_least64_t posted; /* messages published to the workers */
  uint64_t next_post;           /* caller only */
  pthread_mutex_t mu;
  pthread_cond_t cv;
  atomic_int waiters;
  atomic_int error;
  char errmsg[256];
};

struct rawtcp {
  int nstreams;
  atomic_int stop;
  rt_dir_t tx, rx;
};

/* ------------------------------------------------------------------ addresses */

static socklen_t ss_len(const struct sockaddr_storage *ss) {
  return ss->ss_family == AF_INET6 ? sizeof(struct sockaddr_in6) : sizeof(struct sockaddr_in);
}

static void ss_str(const struct sockaddr_storage *ss, char *out, size_t len) {
  char host[INET6_ADDRSTRLEN] = "?";
  int port = 0;
  if (ss->ss_family == AF_INET) {
    const struct sockaddr_in *a = (const void *)ss;
    inet_ntop(AF_INET, &a->sin_addr, host, sizeof host);
    port = ntohs(a->sin_port);
  } else if (ss->ss_family == AF_INET6) {
    const struct sockaddr_in6 *a = (const void *)ss;
    inet_ntop(AF_INET6, &a->sin6_addr, host, sizeof host);
    port = ntohs(a->sin6_port);
  }
  if (port) snprintf(out, len, ss->ss_family == AF_INET6 ? "[%s]:%d" : "%s:%d", host, port);
  else snprintf(out, len, "%s", host);
}

static bool if_addr(const char *name, struct sockaddr_storage *ss) {
  struct ifaddrs *ifs = NULL;
  if (getifaddrs(&ifs) != 0) return false;
  bool found = false;
  for (int fam = 0; fam < 2 && !found; fam++) { /* IPv4 first: no scope ids to carry across */
    int want = fam == 0 ? AF_INET : AF_INET6;
    for (struct ifaddrs *i = ifs; i; i = i->ifa_next) {
      if (!i->ifa_addr || i->ifa_addr->sa_family != want || strcmp(i->ifa_name, name) != 0) continue;
      memset(ss, 0, sizeof *ss);
      memcpy(ss, i->ifa_addr, want == AF_INET ? sizeof(struct sockaddr_in) : sizeof(struct sockaddr_in6));
      found = true;
      break;
    }
  }
  freeifaddrs(ifs);
  return found;
}

int rawtcp_local_addr(const char *ref_addr, const char *ifname, struct sockaddr_storage *ss,
                      char *desc, size_t desclen, char *why, size_t whylen) {
  memset(ss, 0, sizeof *ss);
  if (ref_addr && ref_addr[0]) {
    struct addrinfo hints = {.ai_socktype = SOCK_STREAM}, *res = NULL;
    int rc = getaddrinfo(ref_addr, NULL, &hints, &res);
    if (rc != 0 || !res) {
      snprintf(why, whylen, "--ref-addr \"%s\": %s", ref_addr, gai_strerror(rc));
      return -1;
    }
    memcpy(ss, res->ai_addr, res->ai_addrlen);
    freeaddrinfo(res);
    char a[80];
    ss_str(ss, a, sizeof a);
    snprintf(desc, desclen, "%s (--ref-addr)", a);
    return 0;
  }
  if (ifname && ifname[0]) {
    /* The device name of a socket plugin is its interface name; a fused or decorated name
     * ("eth0+eth1", "eth0:1") is tried as given, then up to its first separator. */
    char base[IF_NAMESIZE + 1];
    snprintf(base, sizeof base, "%s", ifname);
    base[strcspn(base, "+,:; ")] = '\0';
    const char *tries[2] = {ifname, base};
    for (int k = 0; k < 2; k++) {
      if (if_addr(tries[k], ss)) {
        char a[80];
        ss_str(ss, a, sizeof a);
        snprintf(desc, desclen, "%s on %s", a, tries[k]);
        return 0;
      }
    }
    snprintf(why, whylen, "the plugin's device name \"%s\" is not an interface with an IP address "
             "(getifaddrs); give the address with --ref-addr", ifname);
    return -1;
  }
  snprintf(why, whylen, "the plugin's device has no name; give the address with --ref-addr");
  return -1;
}

/* ------------------------------------------------------------------ workers */

static void set_io_timeouts(int fd) {
  struct timeval tv = {0, (suseconds_t)(RT_IO_SLICE_S * 1e6)};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
}

static void dir_error(rt_dir_t *d, const char *fmt, const char *what, int err) {
  int expected = 0;
  if (atomic_compare_exchange_strong(&d->error, &expected, 1))
    snprintf(d->errmsg, sizeof d->errmsg, fmt, what, err ? strerror(err) : "peer closed");
}

static int rt_nchunks(size_t size, int streams) {
  size_t n = size / RAWTCP_MIN_CHUNK;
  if (n < 1) n = 1;
  if (n > (size_t)streams) n = (size_t)streams;
  return (int)n;
}

/* Moves whatever the socket takes now for the stream's posted messages, in order. Called with
 * s->lk held. Returns 1 when something moved, 0 when it would block or has nothing to do, -1 on
 * an error (recorded in the direction). */
static int stream_progress(rt_stream_t *s) {
  rt_dir_t *d = s->dir;
  rawtcp_t *t = d->t;
  int ns = t->nstreams, moved = 0;
  uint64_t posted = atomic_load(&d->posted);
  while (s->k < posted) {
    rt_msg_t *m = &d->ring[s->k % RAWTCP_RING];
    int nch = rt_nchunks(m->size, ns);
    int j = (int)(((uint64_t)s->idx + (uint64_t)ns - s->k % (uint64_t)ns) % (uint64_t)ns);
    if (j < nch) {
      size_t per = m->size / (size_t)nch;
      size_t lo = per * (size_t)j, hi = j == nch - 1 ? m->size : lo + per;
      while (s->off < hi - lo) {
        unsigned char *p = (unsigned char *)m->buf + lo + s->off;
        size_t len = hi - lo - s->off;
        ssize_t n = d->sending ? send(s->fd, p, len, MSG_NOSIGNAL | MSG_DONTWAIT)
                               : recv(s->fd, p, len, MSG_DONTWAIT);
        if (n > 0) {
          s->off += (size_t)n;
          moved = 1;
          continue;
        }
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) return moved;
        if (!atomic_load(&t->stop))
          dir_error(d, "raw TCP %s failed: %s", d->sending ? "send" : "recv", n == 0 ? 0 : errno);
        return -1;
      }
      atomic_fetch_sub(&m->remaining, 1);
      moved = 1;
    }
    s->k++;
    s->off = 0;
  }
  return moved;
}

/* The caller's share: every stream nobody else is progressing right now. */
static void dir_progress_inline(rt_dir_t *d) {
  for (int i = 0; i < d->t->nstreams; i++) {
    rt_stream_t *s = &d->streams[i];
    if (pthread_mutex_trylock(&s->lk) != 0) continue;
    stream_progress(s);
    pthread_mutex_unlock(&s->lk);
  }
}

/* Worker: progresses its stream while work is posted, sleeping in poll() when the socket is not
 * ready and on the condition variable when nothing is posted. Gives the large multi-stream
 * messages their parallelism; the caller usually moves small ones itself first. */
static void *stream_main(void *arg) {
  rt_stream_t *s = arg;
  rt_dir_t *d = s->dir;
  rawtcp_t *t = d->t;
  for (;;) {
    if (atomic_load(&t->stop) || atomic_load(&d->error)) return NULL;
    pthread_mutex_lock(&s->lk);
    int r = stream_progress(s);
    uint64_t k = s->k;
    pthread_mutex_unlock(&s->lk);
    if (r < 0) return NULL;
    if (r > 0) continue;
    if (k < atomic_load(&d->posted)) {
      struct pollfd p = {s->fd, d->sending ? POLLOUT : POLLIN, 0};
      poll(&p, 1, 10);
      continue;
    }
    pthread_mutex_lock(&d->mu);
    atomic_fetch_add(&d->waiters, 1);
    while (atomic_load(&d->posted) <= k && !atomic_load(&t->stop)) {
      struct timespec ts = strand_deadline_in_ns(CLOCK_REALTIME, 100 * 1000 * 1000);
      pthread_cond_timedwait(&d->cv, &d->mu, &ts);
    }
    atomic_fetch_sub(&d->waiters, 1);
    pthread_mutex_unlock(&d->mu);
  }
}

/* ------------------------------------------------------------------ set-up */

typedef struct {
  uint64_t magic;
  int32_t rank, stream;
} rt_hello_t;

static int wait_fd(int fd, short ev, double deadline) {
  for (;;) {
    double left = deadline - conform_now();
    if (left <= 0) return -1;
    struct pollfd p = {fd, ev, 0};
    int ms = left > 0.2 ? 200 : (int)(left * 1000) + 1;
    int r = poll(&p, 1, ms);
    if (r > 0) return 0;
    if (r < 0 && errno != EINTR) return -1;
  }
}

static int connect_one(conform_ctx_t *c, const struct sockaddr_storage *local,
                       const struct sockaddr_storage *peer, int stream, double deadline) {
  int fd = socket(peer->ss_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) return -1;
  struct sockaddr_storage src = *local;
  if (src.ss_family == AF_INET) ((struct sockaddr_in *)&src)->sin_port = 0;
  else ((struct sockaddr_in6 *)&src)->sin6_port = 0;
  /* Same interface as the plugin: bind the source address too. */
  if (bind(fd, (struct sockaddr *)&src, ss_len(&src)) != 0) goto fail;
  if (connect(fd, (const struct sockaddr *)peer, ss_len(peer)) != 0) {
    if (errno != EINPROGRESS) goto fail;
    if (wait_fd(fd, POLLOUT, deadline) != 0) {
      errno = ETIMEDOUT;
      goto fail;
    }
    int soerr = 0;
    socklen_t sl = sizeof soerr;
    getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &sl);
    if (soerr) {
      errno = soerr;
      goto fail;
    }
  }
  /* Workers use blocking I/O with SO_RCVTIMEO/SO_SNDTIMEO slices (they check for stop). */
  int fl = fcntl(fd, F_GETFL);
  fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);
  return fd;
fail: {
  int e = errno;
  char a[80];
  ss_str(peer, a, sizeof a);
  conform_fail(c, "raw TCP reference: connect stream %d to rank %d at %s: %s", stream, c->next, a,
               strerror(e));
  close(fd);
  return -1;
}
}

static int send_hello(int fd, int rank, int stream) {
  rt_hello_t h = {RT_MAGIC, rank, stream};
  set_io_timeouts(fd);
  for (int tries = 0; tries < 50; tries++) { /* 16 bytes into an empty socket: never waits long */
    ssize_t n = send(fd, &h, sizeof h, MSG_NOSIGNAL);
    if (n == (ssize_t)sizeof h) return 0;
    if (n >= 0 || (errno != EAGAIN && errno != EINTR)) return -1;
  }
  return -1;
}

static void dir_init(rawtcp_t *t, rt_dir_t *d, bool sending, int peer) {
  d->t = t;
  d->sending = sending;
  d->peer = peer;
  pthread_mutex_init(&d->mu, NULL);
  pthread_cond_init(&d->cv, NULL);
  atomic_init(&d->posted, 0);
  atomic_init(&d->waiters, 0);
  atomic_init(&d->error, 0);
  for (int i = 0; i < RAWTCP_MAX_STREAMS; i++) {
    d->streams[i].fd = -1;
    d->streams[i].dir = d;
    d->streams[i].idx = i;
    pthread_mutex_init(&d->streams[i].lk, NULL);
  }
  for (int i = 0; i < RAWTCP_RING; i++) atomic_init(&d->ring[i].remaining, 0);
}

rawtcp_t *rawtcp_open(conform_ctx_t *c, const struct sockaddr_storage *local, int streams) {
  if (streams < 1 || streams > RAWTCP_MAX_STREAMS) {
    conform_fail(c, "raw TCP reference: --ref-streams must be 1..%d", RAWTCP_MAX_STREAMS);
    return NULL;
  }
  rawtcp_t *t = calloc(1, sizeof *t);
  if (!t) {
    conform_fail(c, "raw TCP reference: out of memory");
    return NULL;
  }
  t->nstreams = streams;
  atomic_init(&t->stop, 0);
  dir_init(t, &t->tx, true, c->next);
  dir_init(t, &t->rx, false, c->prev);
  double deadline = conform_now() + (conform_remaining(c) < 30 ? conform_remaining(c) : 30);

  struct sockaddr_storage me = *local;
  int lfd = socket(me.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  int one = 1;
  if (lfd >= 0) setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (me.ss_family == AF_INET) ((struct sockaddr_in *)&me)->sin_port = 0;
  else ((struct sockaddr_in6 *)&me)->sin6_port = 0;
  socklen_t sl = sizeof me;
  if (lfd < 0 || bind(lfd, (struct sockaddr *)&me, ss_len(&me)) != 0 || listen(lfd, 256) != 0 ||
      getsockname(lfd, (struct sockaddr *)&me, &sl) != 0) {
    char a[80];
    ss_str(local, a, sizeof a);
    conform_fail(c, "raw TCP reference: cannot listen on %s: %s", a, strerror(errno));
    if (lfd >= 0) close(lfd);
    free(t);
    return NULL;
  }
  struct sockaddr_storage *all = calloc((size_t)c->nranks, sizeof *all);
  if (!all || conform_allgather(c, &me, sizeof me, all) != 0) {
    conform_fail(c, "raw TCP reference: bootstrap: %s", c->bs_error);
    free(all);
    close(lfd);
    free(t);
    return NULL;
  }
  struct sockaddr_storage peer = all[c->next];
  free(all);

  /* Connect every outgoing stream first (the listener's backlog completes the handshakes), then
   * accept the incoming ones: no rank waits for another's accept. */
  int ok = 1;
  for (int s = 0; s < streams && ok; s++) {
    int fd = connect_one(c, local, &peer, s, deadline);
    if (fd < 0 || send_hello(fd, c->rank, s) != 0) {
      if (fd >= 0) {
        conform_fail(c, "raw TCP reference: hello on stream %d to rank %d: %s", s, c->next,
                     strerror(errno));
        close(fd);
      }
      ok = 0;
      break;
    }
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    t->tx.streams[s].fd = fd;
  }
  for (int got = 0; got < streams && ok;) {
    if (wait_fd(lfd, POLLIN, deadline) != 0) {
      conform_fail(c, "raw TCP reference: only %d of %d streams from rank %d connected in time", got,
                   streams, c->prev);
      ok = 0;
      break;
    }
    int fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
    if (fd < 0) continue;
    set_io_timeouts(fd);
    rt_hello_t h;
    size_t have = 0;
    while (have < sizeof h && conform_now() < deadline) {
      ssize_t n = recv(fd, (char *)&h + have, sizeof h - have, 0);
      if (n > 0) have += (size_t)n;
      else if (n == 0 || (errno != EAGAIN && errno != EINTR)) break;
    }
    if (have != sizeof h || h.magic != RT_MAGIC || h.rank != c->prev || h.stream < 0 ||
        h.stream >= streams || t->rx.streams[h.stream].fd >= 0) {
      close(fd); /* not ours (a stray connection); keep waiting for the real ones */
      continue;
    }
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    t->rx.streams[h.stream].fd = fd;
    got++;
  }
  close(lfd);
  if (!ok) {
    rawtcp_close(t);
    return NULL;
  }
  for (int s = 0; s < streams; s++) {
    rt_stream_t *a = &t->tx.streams[s], *b = &t->rx.streams[s];
    if (pthread_create(&a->th, NULL, stream_main, a) == 0) a->started = true;
    if (pthread_create(&b->th, NULL, stream_main, b) == 0) b->started = true;
    if (!a->started || !b->started) {
      conform_fail(c, "raw TCP reference: cannot start stream threads");
      rawtcp_close(t);
      return NULL;
    }
  }
  return t;
}

void rawtcp_close(rawtcp_t *t) {
  if (!t) return;
  atomic_store(&t->stop, 1);
  rt_dir_t *dirs[2] = {&t->tx, &t->rx};
  for (int k = 0; k < 2; k++) {
    pthread_mutex_lock(&dirs[k]->mu);
    pthread_cond_broadcast(&dirs[k]->cv);
    pthread_mutex_unlock(&dirs[k]->mu);
    for (int s = 0; s < RAWTCP_MAX_STREAMS; s++)
      if (dirs[k]->streams[s].fd >= 0) shutdown(dirs[k]->streams[s].fd, SHUT_RDWR);
  }
  for (int k = 0; k < 2; k++)
    for (int s = 0; s < RAWTCP_MAX_STREAMS; s++) {
      rt_stream_t *st = &dirs[k]->streams[s];
      if (st->started) pthread_join(st->th, NULL);
      if (st->fd >= 0) close(st->fd);
    }
  for (int k = 0; k < 2; k++) {
    pthread_mutex_destroy(&dirs[k]->mu);
    pthread_cond_destroy(&dirs[k]->cv);
    for (int i = 0; i < RAWTCP_MAX_STREAMS; i++) pthread_mutex_destroy(&dirs[k]->streams[i].lk);
  }
  free(t);
}

/* ------------------------------------------------------------------ requests */

static int post(conform_ctx_t *c, rawtcp_t *t, rt_dir_t *d, int n, void **bufs,
                const size_t *sizes, void **req) {
  *req = NULL;
  if (atomic_load(&d->error)) {
    conform_fail(c, "%s (rank %d)", d->errmsg, d->peer);
    return -1;
  }
  if (n < 1 || n > 64) {
    conform_fail(c, "raw TCP reference: %d messages in one request", n);
    return -1;
  }
  for (int i = 0; i < n; i++)
    if (d->ring[(d->next_post + (uint64_t)i) % RAWTCP_RING].busy) return 0; /* full: retry */
  rt_msg_t *first = &d->ring[d->next_post % RAWTCP_RING];
  for (int i = 0; i < n; i++) {
    rt_msg_t *m = &d->ring[(d->next_post + (uint64_t)i) % RAWTCP_RING];
    m->buf = bufs[i];
    m->size = sizes[i];
    m->group_n = i == 0 ? n : 0;
    m->busy = true;
    atomic_store(&m->remaining, rt_nchunks(sizes[i], t->nstreams));
  }
  first->group_n = n;
  d->next_post += (uint64_t)n;
  atomic_store(&d->posted, d->next_post); /* publishes the descriptors (seq_cst) */
  if (atomic_load(&d->waiters) > 0) {
    pthread_mutex_lock(&d->mu);
    pthread_cond_broadcast(&d->cv);
    pthread_mutex_unlock(&d->mu);
  }
  *req = first;
  dir_progress_inline(d); /* small messages leave (or are read) right here */
  return 0;
}

int rawtcp_isend(conform_ctx_t *c, rawtcp_t *t, void *buf, size_t size, void **req) {
  return post(c, t, &t->tx, 1, &buf, &size, req);
}

int rawtcp_irecv(conform_ctx_t *c, rawtcp_t *t, int n, void **bufs, const size_t *sizes, void **req) {
  return post(c, t, &t->rx, n, bufs, sizes, req);
}

int rawtcp_test(conform_ctx_t *c, rawtcp_t *t, void *req, int *done) {
  *done = 0;
  rt_msg_t *m = req;
  rt_dir_t *d = (m >= t->tx.ring && m < t->tx.ring + RAWTCP_RING) ? &t->tx : &t->rx;
  if (atomic_load(&d->error)) {
    conform_fail(c, "%s (rank %d)", d->errmsg, d->peer);
    return -1;
  }
  size_t first = (size_t)(m - d->ring);
  int n = m->group_n;
  for (int pass = 0; pass < 2; pass++) {
    bool all = true;
    for (int i = 0; i < n && all; i++)
      all = atomic_load(&d->ring[(first + (size_t)i) % RAWTCP_RING].remaining) == 0;
    if (all) break;
    if (pass == 1) return 0;
    dir_progress_inline(d);
    if (atomic_load(&d->error)) {
      conform_fail(c, "%s (rank %d)", d->errmsg, d->peer);
      return -1;
    }
  }
  for (int i = 0; i < n; i++) d->ring[(first + (size_t)i) % RAWTCP_RING].busy = false;
  *done = 1;
  return 0;
}

static int now_io(conform_ctx_t *c, rt_dir_t *d, unsigned char *p, size_t len) {
  int fd = d->streams[0].fd;
  unsigned spins = 0;
  while (len > 0) {
    /* Polled, never asleep in the kernel: a plugin's test() loop spins the same way, and a
     * wake-up from a blocking recv would cost the reference several microseconds. */
    ssize_t n = d->sending ? send(fd, p, len, MSG_NOSIGNAL | MSG_DONTWAIT)
                           : recv(fd, p, len, MSG_DONTWAIT);
    if (n > 0) {
      p += n;
      len -= (size_t)n;
      continue;
    }
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) {
      if ((++spins & 4095) == 0 && (conform_peer_failed(c) || conform_remaining(c) < 0.5)) {
        conform_fail(c, "raw TCP reference: %s with rank %d did not finish before the bound%s%s",
                     d->sending ? "send" : "recv", d->peer, c->bs_error[0] ? ": " : "", c->bs_error);
        return -1;
      }
      continue;
    }
    conform_fail(c, "raw TCP reference: %s with rank %d failed: %s", d->sending ? "send" : "recv",
                 d->peer, n == 0 ? "peer closed" : strerror(errno));
    return -1;
  }
  return 0;
}

int rawtcp_send_now(conform_ctx_t *c, rawtcp_t *t, const void *buf, size_t size) {
  return now_io(c, &t->tx, (unsigned char *)buf, size);
}

int rawtcp_recv_now(conform_ctx_t *c, rawtcp_t *t, void *buf, size_t size) {
  return now_io(c, &t->rx, buf, size);
}
