/* strand-socket — the worker threads that move data streams.
 *
 * One pool per process, shared by every connection: a connection's streams are spread over the
 * workers from a rotating start, so many channels share a few busy threads instead of each owning
 * idle ones. A worker sleeps in epoll_wait (edge-triggered) when it has nothing to move; the proxy
 * wakes it through an eventfd only when it has announced that it is going to sleep, so a busy
 * worker costs the proxy no syscall per chunk. Streams are attached and detached by command: the
 * proxy service thread posts one and waits (bounded) until the worker applied it, after which the
 * worker never touches those streams again.
 *
 * Control hand-off (STRAND_SOCKET_HANDOFF, sk_handoff.c): up to SK_HANDOFF_WORKERS workers also
 * write the control rings of connections. Such a worker does not sleep right after its last
 * control write: it spins for STRAND_SOCKET_HANDOFF_SPIN_US first, announcing that it does
 * (idle_spin), and only then does the proxy hand it control writes; when it sleeps, the proxy
 * writes them itself and asks it to spin (want_spin) for the next ones. So a core is busy only
 * while small messages flow, and never longer than the window after the last one. */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>
#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

#include "sk.h"
#include "strand/clock.h"
#include "strand/log.h"
#include "strand/topo.h"

#define SK_CMD_ATTACH 1
#define SK_CMD_DETACH 2
#define SK_CMD_WAIT_MS 10000
#define SK_SPIN_TIGHT 32 /* control-ring looks between two data-stream passes while spinning */

typedef struct sk_worker {
  pthread_t thread;
  int index;
  int epfd, evfd;
  int numa_node;
  _Atomic int sleeping;
  _Atomic bool stop;
  _Atomic bool idle_spin;  /* awake, no data to move, watching its control rings */
  _Atomic bool want_spin;  /* the proxy wrote a control message itself: spin for the next ones */
  /* one command at a time (callers serialise on pool.cmd_serial) */
  pthread_mutex_t cmd_lock;
  pthread_cond_t cmd_cond;
  _Atomic int cmd_pending;
  int cmd_op;
  sk_comm_t *cmd_comm;
  uint64_t cmd_seq, cmd_done;
  /* worker thread only */
  sk_stream_t **streams;
  int nstreams, cap;
  sk_comm_t **ctrls; /* connections whose control ring this worker writes */
  int nctrls, ctrl_cap;
} sk_worker_t;

static struct {
  sk_worker_t *w;
  int n;
  atomic_uint rr;
  pthread_mutex_t cmd_serial;
} pool = {.cmd_serial = PTHREAD_MUTEX_INITIALIZER};

int sk_workers_count(void) { return pool.n; }

void sk_worker_kick(sk_worker_t *w) {
  if (atomic_load(&w->sleeping)) {
    uint64_t one = 1;
    ssize_t r = write(w->evfd, &one, sizeof one);
    (void)r; /* EAGAIN: the counter is already non-zero, the worker will wake anyway */
  }
}

bool sk_worker_idle_spinning(sk_worker_t *w) {
  return atomic_load_explicit(&w->idle_spin, memory_order_relaxed);
}

void sk_worker_handoff_queued(sk_worker_t *w) {
  atomic_thread_fence(memory_order_seq_cst); /* pairs with the worker's sleep announcement */
  sk_worker_kick(w);
}

void sk_worker_want_spin(sk_worker_t *w) {
  if (atomic_load_explicit(&w->want_spin, memory_order_relaxed)) return;
  atomic_store_explicit(&w->want_spin, true, memory_order_relaxed);
  atomic_thread_fence(memory_order_seq_cst);
  sk_worker_kick(w);
}

static void cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
  _mm_pause();
#elif defined(__aarch64__)
  __asm__ __volatile__("yield");
#endif
}

static void ctrl_attach(sk_worker_t *w, sk_comm_t *c) {
  if (w->nctrls == w->ctrl_cap) {
    int cap = w->ctrl_cap ? 2 * w->ctrl_cap : 16;
    sk_comm_t **nc = realloc(w->ctrls, (size_t)cap * sizeof *nc);
    if (nc == NULL) {
      sk_comm_set_error(c, STRAND_SYSTEM_ERROR, "out of memory attaching the control stream");
      return;
    }
    w->ctrls = nc;
    w->ctrl_cap = cap;
  }
  w->ctrls[w->nctrls++] = c;
}

static void ctrl_detach(sk_worker_t *w, sk_comm_t *c) {
  int k = 0;
  for (int i = 0; i < w->nctrls; i++)
    if (w->ctrls[i] != c) w->ctrls[k++] = w->ctrls[i];
  w->nctrls = k;
}

/* Writes the control rings. Returns true when bytes moved; *stuck: some ring holds bytes its
 * socket would not take (the peer is not reading), so the worker must come back later. */
static bool ctrl_pass(sk_worker_t *w, bool *stuck) {
  bool any = false;
  *stuck = false;
  for (int i = 0; i < w->nctrls; i++) {
    sk_comm_t *c = w->ctrls[i];
    bool blocked = false;
    any |= sk_handoff_write(c, &blocked);
    if (blocked) *stuck = true;
  }
  return any;
}

static bool ctrl_work(sk_worker_t *w) {
  for (int i = 0; i < w->nctrls; i++)
    if (!w->ctrls[i]->handoff->failed && sk_handoff_pending(w->ctrls[i]->handoff))
      return true;
  return false;
}

static void apply_command(sk_worker_t *w) {
  pthread_mutex_lock(&w->cmd_lock);
  if (atomic_load(&w->cmd_pending)) {
    sk_comm_t *c = w->cmd_comm;
    if (w->cmd_op == SK_CMD_ATTACH && c->handoff != NULL && c->ctrl_worker == w)
      ctrl_attach(w, c);
    else if (w->cmd_op == SK_CMD_DETACH)
      ctrl_detach(w, c);
    if (w->cmd_op == SK_CMD_ATTACH) {
      for (int i = 0; i < c->nstreams; i++) {
        sk_stream_t *s = c->streams[i];
        if (s->worker != w) continue;
        if (w->nstreams == w->cap) {
          int cap = w->cap ? 2 * w->cap : 16;
          sk_stream_t **ns = realloc(w->streams, (size_t)cap * sizeof *ns);
          if (ns == NULL) {
            sk_comm_set_error(c, STRAND_SYSTEM_ERROR, "out of memory attaching stream %d", i);
            continue;
          }
          w->streams = ns;
          w->cap = cap;
        }
        struct epoll_event ev = {.events = EPOLLIN | EPOLLOUT | EPOLLRDHUP | EPOLLET,
                                 .data.ptr = s};
        if (epoll_ctl(w->epfd, EPOLL_CTL_ADD, s->fd, &ev) != 0) {
          sk_comm_set_error(c, STRAND_SYSTEM_ERROR, "epoll_ctl(ADD) of stream %d failed: %s", i,
                            strerror(errno));
          continue;
        }
        s->readable = s->writable = true;
        w->streams[w->nstreams++] = s;
      }
    } else {
      int k = 0;
      for (int i = 0; i < w->nstreams; i++) {
        sk_stream_t *s = w->streams[i];
        if (s->comm == c) {
          epoll_ctl(w->epfd, EPOLL_CTL_DEL, s->fd, NULL);
        } else {
          w->streams[k++] = s;
        }
      }
      w->nstreams = k;
    }
    w->cmd_done = w->cmd_seq;
    atomic_store(&w->cmd_pending, 0);
    pthread_cond_broadcast(&w->cmd_cond);
  }
  pthread_mutex_unlock(&w->cmd_lock);
}

/* Returns true when some stream has work it could do right now. */
static bool pass(sk_worker_t *w, bool *ready_left) {
  bool any = false;
  *ready_left = false;
  for (int i = 0; i < w->nstreams; i++) {
    sk_stream_t *s = w->streams[i];
    if (atomic_load_explicit(&s->comm->error, memory_order_relaxed) != 0) continue;
    bool progress = false, blocked = false;
    if (s->is_send) {
      if (s->zc_errq) { /* completions of zero-copy sends arrived (EPOLLERR) */
        s->zc_errq = false;
        if (!sk_stream_zc_reap(s)) continue;
      }
      if (!s->writable) continue;
      if (atomic_load_explicit(&s->head, memory_order_acquire) ==
          atomic_load_explicit(&s->tail, memory_order_relaxed))
        continue;
      sk_stream_send(s, &progress, &blocked);
      if (blocked) s->writable = false;
    } else {
      if (!s->readable || atomic_load_explicit(&s->eof, memory_order_relaxed)) continue;
      sk_stream_recv(s, &progress, &blocked);
      if (blocked) s->readable = false;
    }
    any |= progress;
    if (!blocked) *ready_left = true; /* stopped by its round limit: more to do */
  }
  return any;
}

static bool has_send_work(sk_worker_t *w) {
  for (int i = 0; i < w->nstreams; i++) {
    sk_stream_t *s = w->streams[i];
    if (s->is_send && s->writable &&
        atomic_load_explicit(&s->head, memory_order_acquire) !=
            atomic_load_explicit(&s->tail, memory_order_relaxed))
      return true;
  }
  return false;
}

static void *worker_main(void *arg) {
  sk_worker_t *w = arg;
  char name[16];
  snprintf(name, sizeof name, "strand-sk-%d", w->index);
  pthread_setname_np(pthread_self(), name);
  if (w->numa_node >= 0) {
    bool pinned = false;
    strand_topo_pin_thread_to_numa(w->numa_node, &pinned);
    if (w->index == 0 && pinned)
      STRAND_INFO(STRAND_SUBSYS_INIT | STRAND_SUBSYS_NET, "workers pinned to NUMA node %d",
                  w->numa_node);
  }
  struct epoll_event evs[64];
  const uint64_t spin_ns = (uint64_t)sk_config()->handoff_spin_us * 1000u;
  uint64_t last_ctrl = 0; /* when this worker last wrote control bytes or was asked to spin */
  while (!atomic_load(&w->stop)) {
    if (atomic_load(&w->cmd_pending)) apply_command(w);
    bool ready_left = false, stuck = false, spin = false;
    bool any = pass(w, &ready_left);
    if (w->nctrls > 0) {
      bool wrote = ctrl_pass(w, &stuck);
      bool asked = atomic_load_explicit(&w->want_spin, memory_order_relaxed);
      if (asked) atomic_store_explicit(&w->want_spin, false, memory_order_relaxed);
      uint64_t now = strand_now_ns();
      if (wrote || asked) last_ctrl = now;
      spin = now - last_ctrl < spin_ns;
    }
    int timeout = (any || ready_left) ? 0 : -1;
    if (timeout < 0 && spin) {
      /* Spin window after control work: stay awake and say so, so that the proxy hands over its
       * next control write instead of making the system call itself. The tight loop writes the
       * control rings only (a pass over the data streams costs about 10 ns per stream, and this
       * worker may have dozens); the data streams get a pass and an epoll_wait(0) in between. */
      if (!atomic_load_explicit(&w->idle_spin, memory_order_relaxed))
        atomic_store_explicit(&w->idle_spin, true, memory_order_relaxed);
      for (int k = 0; k < SK_SPIN_TIGHT; k++) {
        bool blocked = false;
        if (ctrl_pass(w, &blocked)) last_ctrl = strand_now_ns();
        else cpu_relax();
        if (atomic_load_explicit(&w->cmd_pending, memory_order_relaxed) ||
            atomic_load_explicit(&w->stop, memory_order_relaxed))
          break;
      }
      timeout = 0;
    } else if (atomic_load_explicit(&w->idle_spin, memory_order_relaxed)) {
      atomic_store_explicit(&w->idle_spin, false, memory_order_relaxed);
    }
    if (timeout < 0) {
      /* Announce sleep, then look again: a chunk or control write queued after our pass either
       * sees sleeping == 1 and writes the eventfd, or is seen by this second look. A control ring
       * whose socket is full is retried every millisecond (its fd is not in this epoll set). */
      atomic_store(&w->sleeping, 1);
      atomic_thread_fence(memory_order_seq_cst);
      if (has_send_work(w) || atomic_load(&w->cmd_pending) || atomic_load(&w->stop) ||
          atomic_load(&w->want_spin) || (!stuck && ctrl_work(w)))
        timeout = 0;
      else if (stuck)
        timeout = 1;
    }
    int n = epoll_wait(w->epfd, evs, 64, timeout);
    atomic_store(&w->sleeping, 0);
    for (int i = 0; i < n; i++) {
      sk_stream_t *s = evs[i].data.ptr;
      if (s == NULL) {
        uint64_t v;
        ssize_t r = read(w->evfd, &v, sizeof v);
        (void)r;
        continue;
      }
      if (evs[i].events & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR)) s->readable = true;
      if (evs[i].events & (EPOLLOUT | EPOLLHUP | EPOLLERR)) s->writable = true;
      /* EPOLLERR cannot be masked: it also means "the error queue is not empty", which is how
       * zero-copy completions announce themselves. */
      if ((evs[i].events & EPOLLERR) && s->is_send) s->zc_errq = true;
    }
  }
  return NULL;
}

strand_result_t sk_workers_start(int nthreads, int numa_node) {
  if (nthreads <= 0 || pool.n > 0) return STRAND_SUCCESS;
  pool.w = calloc((size_t)nthreads, sizeof *pool.w);
  if (pool.w == NULL) return STRAND_SYSTEM_ERROR;
  for (int i = 0; i < nthreads; i++) {
    sk_worker_t *w = &pool.w[i];
    w->index = i;
    w->numa_node = numa_node;
    w->epfd = epoll_create1(EPOLL_CLOEXEC);
    w->evfd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    pthread_mutex_init(&w->cmd_lock, NULL);
    pthread_cond_init(&w->cmd_cond, NULL);
    struct epoll_event ev = {.events = EPOLLIN, .data.ptr = NULL};
    int err = 0;
    if (w->epfd < 0 || w->evfd < 0 || epoll_ctl(w->epfd, EPOLL_CTL_ADD, w->evfd, &ev) != 0)
      err = errno;
    else
      err = pthread_create(&w->thread, NULL, worker_main, w);
    if (err != 0) {
      STRAND_WARN("could not start worker thread %d of %d: %s; lower STRAND_SOCKET_NTHREADS or "
                  "set it to 0", i, nthreads, strerror(err));
      if (w->epfd >= 0) close(w->epfd);
      if (w->evfd >= 0) close(w->evfd);
      pool.n = i;
      sk_workers_stop();
      return STRAND_SYSTEM_ERROR;
    }
    pool.n = i + 1;
  }
  return STRAND_SUCCESS;
}

void sk_workers_stop(void) {
  for (int i = 0; i < pool.n; i++) {
    sk_worker_t *w = &pool.w[i];
    atomic_store(&w->stop, true);
    uint64_t one = 1;
    ssize_t r = write(w->evfd, &one, sizeof one);
    (void)r;
    pthread_join(w->thread, NULL);
    close(w->epfd);
    close(w->evfd);
    free(w->streams);
    free(w->ctrls);
    pthread_mutex_destroy(&w->cmd_lock);
    pthread_cond_destroy(&w->cmd_cond);
  }
  free(pool.w);
  pool.w = NULL;
  pool.n = 0;
}

static strand_result_t command(sk_worker_t *w, int op, sk_comm_t *c) {
  pthread_mutex_lock(&w->cmd_lock);
  w->cmd_op = op;
  w->cmd_comm = c;
  uint64_t seq = ++w->cmd_seq;
  atomic_store(&w->cmd_pending, 1);
  uint64_t one = 1;
  ssize_t r = write(w->evfd, &one, sizeof one);
  (void)r;
  struct timespec deadline;
  clock_gettime(CLOCK_REALTIME, &deadline);
  deadline.tv_sec += SK_CMD_WAIT_MS / 1000;
  int rc = 0;
  while (w->cmd_done < seq && rc == 0) rc = pthread_cond_timedwait(&w->cmd_cond, &w->cmd_lock,
                                                                    &deadline);
  bool ok = w->cmd_done >= seq;
  pthread_mutex_unlock(&w->cmd_lock);
  if (!ok) {
    STRAND_WARN("worker thread %d did not answer within %d ms (connection to %s); this is a "
                "plugin bug, please report it", w->index, SK_CMD_WAIT_MS, c->peer);
    return STRAND_INTERNAL_ERROR;
  }
  return STRAND_SUCCESS;
}

/* Whether w drives any of c's streams or its control ring. */
static bool worker_serves(const sk_worker_t *w, const sk_comm_t *c) {
  if (c->handoff != NULL && c->ctrl_worker == w) return true;
  for (int i = 0; i < c->nstreams; i++)
    if (c->streams[i]->worker == w) return true;
  return false;
}

strand_result_t sk_workers_attach(sk_comm_t *c) {
  if (pool.n == 0) return STRAND_INTERNAL_ERROR;
  unsigned start = atomic_fetch_add(&pool.rr, (unsigned)c->nstreams);
  for (int i = 0; i < c->nstreams; i++)
    c->streams[i]->worker = &pool.w[(start + (unsigned)i) % (unsigned)pool.n];
  /* Control rings go to the first SK_HANDOFF_WORKERS workers in turn: few spinning threads. */
  if (c->handoff != NULL) {
    static atomic_uint ctrl_rr;
    unsigned nctrl = pool.n < SK_HANDOFF_WORKERS ? (unsigned)pool.n : SK_HANDOFF_WORKERS;
    c->ctrl_worker = &pool.w[atomic_fetch_add(&ctrl_rr, 1u) % nctrl];
  }
  strand_result_t rc = STRAND_SUCCESS;
  pthread_mutex_lock(&pool.cmd_serial);
  for (int k = 0; k < pool.n; k++) {
    if (!worker_serves(&pool.w[k], c)) continue;
    strand_result_t r = command(&pool.w[k], SK_CMD_ATTACH, c);
    if (r != STRAND_SUCCESS) rc = r;
  }
  pthread_mutex_unlock(&pool.cmd_serial);
  c->use_workers = true;
  return rc;
}

void sk_workers_detach(sk_comm_t *c) {
  if (!c->use_workers || pool.n == 0) return;
  pthread_mutex_lock(&pool.cmd_serial);
  for (int k = 0; k < pool.n; k++)
    if (worker_serves(&pool.w[k], c)) command(&pool.w[k], SK_CMD_DETACH, c);
  pthread_mutex_unlock(&pool.cmd_serial);
  c->use_workers = false;
}
