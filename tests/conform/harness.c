/* strand-conform — what check bodies call: result recording, time, patterns, guarded buffers and
 * proxy-shaped helpers that drive the (adapted, v12-shaped) plugin table the way NCCL's core
 * does: one thread per comm, NULL requests retried, test() polled, every wait bounded. */
#include <dirent.h>
#include <sys/mman.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "conform_internal.h"
#include "strand/cuda_driver.h"

/* ---------------------------------------------------------------- results */

static void append_msg(char *dst, size_t cap, const char *fmt, va_list ap) {
  size_t used = strlen(dst);
  if (used + 4 >= cap) return;
  if (used) {
    strncat(dst, "; ", cap - used - 1);
    used = strlen(dst);
  }
  vsnprintf(dst + used, cap - used, fmt, ap);
}

conform_status_t conform_fail(conform_ctx_t *c, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  if (c->status != CONFORM_FAIL) c->msg[0] = '\0'; /* a failure replaces a skip reason */
  append_msg(c->msg, sizeof c->msg, fmt, ap);
  va_end(ap);
  c->status = CONFORM_FAIL;
  return CONFORM_FAIL;
}

conform_status_t conform_skip(conform_ctx_t *c, const char *fmt, ...) {
  if (c->status == CONFORM_FAIL) return CONFORM_FAIL;
  va_list ap;
  va_start(ap, fmt);
  c->msg[0] = '\0';
  append_msg(c->msg, sizeof c->msg, fmt, ap);
  va_end(ap);
  c->status = CONFORM_SKIP;
  return CONFORM_SKIP;
}

void conform_note(conform_ctx_t *c, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  append_msg(c->note, sizeof c->note, fmt, ap);
  va_end(ap);
}

void conform_warn(conform_ctx_t *c, const char *fmt, ...) {
  char tmp[CONFORM_MSG_MAX];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(tmp, sizeof tmp, fmt, ap);
  va_end(ap);
  conform_note(c, "%s%s", CONFORM_WARNING_PREFIX, tmp);
}

void conform_phase(conform_ctx_t *c, const char *fmt, ...) {
  if (!c->phase) return;
  char tmp[128];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(tmp, sizeof tmp, fmt, ap);
  va_end(ap);
  /* The rank parent reads this after a crash; write it as plain bytes. */
  for (size_t i = 0; i < sizeof tmp; i++) {
    c->phase[i] = tmp[i];
    if (!tmp[i]) break;
  }
}

const char *conform_result_str(strand_result_t r) {
  switch (r) {
  case STRAND_SUCCESS: return "ncclSuccess";
  case STRAND_UNHANDLED_CUDA_ERROR: return "ncclUnhandledCudaError";
  case STRAND_SYSTEM_ERROR: return "ncclSystemError";
  case STRAND_INTERNAL_ERROR: return "ncclInternalError";
  case STRAND_INVALID_ARGUMENT: return "ncclInvalidArgument";
  case STRAND_INVALID_USAGE: return "ncclInvalidUsage";
  case STRAND_REMOTE_ERROR: return "ncclRemoteError";
  case STRAND_IN_PROGRESS: return "ncclInProgress";
  case STRAND_TIMEOUT: return "ncclTimeout";
  default: return "unknown ncclResult_t";
  }
}

conform_status_t conform_verdict(const conform_ctx_t *c) {
  return c->status == CONFORM_FAIL ? CONFORM_FAIL : CONFORM_PASS;
}

/* ---------------------------------------------------------------- time */

double conform_remaining(const conform_ctx_t *c) { return c->deadline - conform_now(); }

/* ---------------------------------------------------------------- patterns */

static inline uint64_t mix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

uint64_t conform_seed(int src_rank, int dst_rank, uint64_t msg_index) {
  return mix64(((uint64_t)(uint32_t)src_rank << 48) ^ ((uint64_t)(uint32_t)dst_rank << 32) ^
               msg_index ^ 0x5354524e44ULL);
}

/* Byte at offset i of a pattern = byte (i % 8) of word(seed, i / 8). Words are produced by a
 * cheap counter hash so that every message and every offset differs (a shifted, duplicated or
 * foreign payload never verifies). */
static inline uint64_t pattern_word(uint64_t seed, uint64_t wi) {
  uint64_t x = seed ^ (wi * 0xd6e8feb86659fd93ULL);
  x ^= x >> 32;
  x *= 0xd6e8feb86659fd93ULL;
  x ^= x >> 32;
  return x;
}

void conform_fill(void *buf, size_t len, uint64_t seed) {
  unsigned char *p = buf;
  size_t words = len / 8;
  for (size_t w = 0; w < words; w++) {
    uint64_t v = pattern_word(seed, w);
    memcpy(p + w * 8, &v, 8);
  }
  if (len % 8) {
    uint64_t v = pattern_word(seed, words);
    memcpy(p + words * 8, &v, len % 8);
  }
}

long long conform_verify(const void *buf, size_t len, uint64_t seed) {
  const unsigned char *p = buf;
  size_t words = len / 8;
  for (size_t w = 0; w < words; w++) {
    uint64_t v = pattern_word(seed, w), got;
    memcpy(&got, p + w * 8, 8);
    if (got != v) {
      for (size_t b = 0; b < 8; b++)
        if (p[w * 8 + b] != ((unsigned char *)&v)[b]) return (long long)(w * 8 + b);
    }
  }
  if (len % 8) {
    uint64_t v = pattern_word(seed, words);
    for (size_t b = 0; b < len % 8; b++)
      if (p[words * 8 + b] != ((unsigned char *)&v)[b]) return (long long)(words * 8 + b);
  }
  return -1;
}

int conform_buf_alloc(conform_buf_t *b, size_t len, size_t align_off) {
  memset(b, 0, sizeof *b);
  b->total = len + align_off + 2 * CONFORM_GUARD_LEN;
  if (posix_memalign((void **)&b->base, 4096, b->total) != 0) {
    b->base = NULL;
    return -1;
  }
  b->data = b->base + CONFORM_GUARD_LEN + align_off;
  b->len = len;
  memset(b->base, CONFORM_GUARD_BYTE, (size_t)(b->data - b->base));
  memset(b->data + len, CONFORM_GUARD_BYTE, CONFORM_GUARD_LEN);
  return 0;
}

bool conform_buf_guards_ok(const conform_buf_t *b, long long *bad_off) {
  for (unsigned char *p = b->base; p < b->data; p++)
    if (*p != CONFORM_GUARD_BYTE) {
      if (bad_off) *bad_off = (long long)(p - b->data);
      return false;
    }
  for (size_t i = 0; i < CONFORM_GUARD_LEN; i++)
    if (b->data[b->len + i] != CONFORM_GUARD_BYTE) {
      if (bad_off) *bad_off = (long long)(b->len + i);
      return false;
    }
  return true;
}

void conform_buf_free(conform_buf_t *b) {
  free(b->base);
  memset(b, 0, sizeof *b);
}

/* ---------------------------------------------------------------- resources */

int conform_count_fds(void) {
  DIR *d = opendir("/proc/self/fd");
  if (!d) return -1;
  int n = 0;
  struct dirent *e;
  while ((e = readdir(d)) != NULL)
    if (e->d_name[0] != '.') n++;
  closedir(d);
  return n - 1; /* the directory stream itself */
}

int conform_count_threads(void) {
  DIR *d = opendir("/proc/self/task");
  if (!d) return -1;
  int n = 0;
  struct dirent *e;
  while ((e = readdir(d)) != NULL)
    if (e->d_name[0] != '.') n++;
  closedir(d);
  return n;
}

long conform_rss_kib(void) {
  FILE *f = fopen("/proc/self/status", "r");
  if (!f) return -1;
  char line[256];
  long kib = -1;
  while (fgets(line, sizeof line, f))
    if (sscanf(line, "VmRSS: %ld kB", &kib) == 1) break;
  fclose(f);
  return kib;
}

/* ---------------------------------------------------------------- plugin driving */

/* NCCL's logger: the plugin's WARN lines (INFO too with -v, everything with -vv) go to stderr,
 * which in a check child is captured by the rank parent: they become part of the check's result
 * (shown under its row with -v, always in --json/--junit), tagged with the rank there. */
static void close_warn_seen(const char *msg);
static void conform_logger(strand_log_level_t level, unsigned long flags, const char *file,
                           int line, const char *fmt, ...) {
  (void)flags;
  if (level == STRAND_LOG_WARN) {
    char buf[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    close_warn_seen(buf);
  }
  if (level == STRAND_LOG_WARN || conform_opts.verbose > 0) {
    if (level != STRAND_LOG_WARN && level != STRAND_LOG_INFO && conform_opts.verbose < 2) return;
    char buf[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    fprintf(stderr, "[plugin %s %s:%d] %s\n",
            level == STRAND_LOG_WARN ? "WARN" : "INFO", file ? file : "?", line, buf);
  }
}

/* ncclProfilerCallback with the profiler disabled: no event handle, success. */
static strand_result_t conform_profiler(void **event_handle, int type, void *parent_handle,
                                        int64_t plugin_id, void *ext_data) {
  (void)type; (void)parent_handle; (void)plugin_id; (void)ext_data;
  if (event_handle) *event_handle = NULL;
  return STRAND_SUCCESS;
}

strand_logger_t conform_logger_fn(void) { return conform_logger; }

strand_result_t conform_plugin_init(conform_ctx_t *c, void **ctx, uint64_t comm_id) {
  strand_comm_config_t cfg = {.trafficClass = STRAND_NET_TRAFFIC_CLASS_UNDEF};
  *ctx = NULL; /* v6..v9 adapters leave it untouched, exactly like NCCL's */
  conform_phase(c, "init");
  strand_result_t r = c->net->init(ctx, comm_id, &cfg, conform_logger, conform_profiler);
  /* A library the plugin pulls in (libfabric, ...) may install its own SIGSEGV handler that prints
   * and exit()s: put the suite's dispositions back so that a crash is reported as the signal, and
   * record the replacement for the rank parent's message. */
  conform_signals_restore("init", conform_sig_note, CONFORM_SIG_NOTE_MAX);
  static bool reread;
  if (r == STRAND_SUCCESS && !reread && c->plugin_loaded) {
    /* NCCL reads the members after init returned (§1.3): re-read the tables, once per process. */
    reread = true;
    conform_upgrade_reread((conform_plugin_t *)c->plugin);
    if (c->net != &c->plugin->net) conform_watch_net(&c->plugin->net, c->check->id);
  }
  return r;
}

/* ------------------------------------------------------------------ crash attribution */

static const int g_watched_sigs[] = {SIGSEGV, SIGBUS, SIGABRT};
#define N_WATCHED_SIGS (int)(sizeof g_watched_sigs / sizeof g_watched_sigs[0])
static struct sigaction g_sig_snapshot[N_WATCHED_SIGS];
static bool g_sig_snapshot_taken;
volatile char *conform_sig_note;

void conform_signals_snapshot(void) {
  for (int i = 0; i < N_WATCHED_SIGS; i++) sigaction(g_watched_sigs[i], NULL, &g_sig_snapshot[i]);
  g_sig_snapshot_taken = true;
}

int conform_signals_restore(const char *when, volatile char *out, size_t len) {
  if (!g_sig_snapshot_taken) return 0;
  int n = 0;
  for (int i = 0; i < N_WATCHED_SIGS; i++) {
    struct sigaction now;
    if (sigaction(g_watched_sigs[i], NULL, &now) != 0) continue;
    bool is_info = now.sa_flags & SA_SIGINFO, was_info = g_sig_snapshot[i].sa_flags & SA_SIGINFO;
    void *h_now = is_info ? (void *)now.sa_sigaction : (void *)now.sa_handler;
    void *h_was = was_info ? (void *)g_sig_snapshot[i].sa_sigaction : (void *)g_sig_snapshot[i].sa_handler;
    if (h_now == h_was && is_info == was_info) continue;
    sigaction(g_watched_sigs[i], &g_sig_snapshot[i], NULL);
    n++;
    if (!out) continue;
    char line[96];
    const char *name = g_watched_sigs[i] == SIGSEGV ? "SIGSEGV" : g_watched_sigs[i] == SIGBUS ? "SIGBUS" : "SIGABRT";
    snprintf(line, sizeof line, "%s handler replaced during %s", name, when);
    size_t used = 0;
    while (used < len && out[used]) used++;
    /* plain byte writes: the rank parent reads this after the child died */
    const char *sep = used ? "; " : "";
    for (const char *q = sep; *q && used + 1 < len; q++) out[used++] = *q;
    for (const char *q = line; *q && used + 1 < len; q++) out[used++] = *q;
    if (used < len) out[used] = '\0';
  }
  return n;
}

strand_result_t conform_plugin_finalize(conform_ctx_t *c, void *ctx) {
  conform_phase(c, "finalize");
  return c->net->finalize ? c->net->finalize(ctx) : STRAND_SUCCESS;
}

int conform_props(conform_ctx_t *c, int dev, strand_props_v12_t *p) {
  memset(p, 0, sizeof *p);
  conform_phase(c, "getProperties(dev %d)", dev);
  strand_result_t r = c->net->getProperties(dev, p);
  if (r != STRAND_SUCCESS) {
    conform_fail(c, "getProperties(dev %d) returned %s", dev, conform_result_str(r));
    return -1;
  }
  return 0;
}

/* Opaque profiler handles NCCL would pass (never dereferenced by a correct plugin except through
 * the profiler callback, which ignores them). */
static char g_phandle_dummy[64];

int conform_reg(conform_ctx_t *c, void *comm, void *data, size_t size, int type, void **mh) {
  *mh = NULL;
  conform_phase(c, "regMr(size %zu, type %d)", size, type);
  strand_result_t r = c->net->regMr(comm, data, size, type, mh);
  if (r != STRAND_SUCCESS) {
    conform_fail(c, "regMr(%p, %zu bytes, type %d) returned %s", data, size, type,
                 conform_result_str(r));
    return -1;
  }
  return 0;
}

int conform_dereg(conform_ctx_t *c, void *comm, void *mh) {
  conform_phase(c, "deregMr");
  strand_result_t r = c->net->deregMr(comm, mh);
  if (r != STRAND_SUCCESS) {
    conform_fail(c, "deregMr returned %s", conform_result_str(r));
    return -1;
  }
  return 0;
}

static int check_abort(conform_ctx_t *c) {
  if (conform_peer_failed(c)) {
    conform_fail(c, "%s", c->bs_error);
    return -1;
  }
  return 0;
}

int conform_try_isend(conform_ctx_t *c, void *comm, void *data, size_t size, int tag, void *mh,
                      void **req) {
  *req = NULL;
  conform_phase(c, "isend(%zu bytes, tag %d)", size, tag);
  strand_result_t r = c->net->isend(comm, data, size, tag, mh, g_phandle_dummy, req);
  if (r != STRAND_SUCCESS) {
    conform_fail(c, "isend(%zu bytes, tag %d) returned %s%s", size, tag, conform_result_str(r),
                 conform_upgrade_last_error_was_adapter() ? " (refused by the core adapter)" : "");
    return -1;
  }
  return 0;
}

int conform_isend(conform_ctx_t *c, void *comm, void *data, size_t size, int tag, void *mh,
                  void **req) {
  unsigned spins = 0;
  for (;;) {
    if (conform_try_isend(c, comm, data, size, tag, mh, req)) return -1;
    if (*req) return 0;
    /* NULL = "cannot post now": NCCL re-issues the identical call later (§6.5). */
    if ((++spins & 255) == 0 && (check_abort(c) || conform_remaining(c) < 0.5)) {
      if (c->status != CONFORM_FAIL)
        conform_fail(c, "isend(%zu bytes, tag %d) kept returning a NULL request until the deadline",
                     size, tag);
      return -1;
    }
  }
}

int conform_irecv(conform_ctx_t *c, void *comm, int n, void **data, size_t *sizes, int *tags,
                  void **mhs, void **req) {
  void *ph[STRAND_PROXY_MAX_SUBS];
  for (int i = 0; i < n && i < STRAND_PROXY_MAX_SUBS; i++) ph[i] = g_phandle_dummy;
  unsigned spins = 0;
  for (;;) {
    *req = NULL;
    conform_phase(c, "irecv(n %d, %zu bytes)", n, sizes[0]);
    strand_result_t r = c->net->irecv(comm, n, data, sizes, tags, mhs, ph, req);
    if (r != STRAND_SUCCESS) {
      conform_fail(c, "irecv(n %d, size[0] %zu) returned %s%s", n, sizes[0],
                   conform_result_str(r),
                   conform_upgrade_last_error_was_adapter() ? " (refused by the core adapter)" : "");
      return -1;
    }
    if (*req) return 0;
    if ((++spins & 255) == 0 && (check_abort(c) || conform_remaining(c) < 0.5)) {
      if (c->status != CONFORM_FAIL)
        conform_fail(c, "irecv(n %d) kept returning a NULL request until the deadline", n);
      return -1;
    }
  }
}

int conform_wait(conform_ctx_t *c, void *req, int *sizes, const char *what) {
  unsigned spins = 0;
  for (;;) {
    int done = 0;
    conform_phase(c, "test(%s)", what);
    strand_result_t r = c->net->test(req, &done, sizes);
    if (r != STRAND_SUCCESS) {
      conform_fail(c, "test(%s) returned %s", what, conform_result_str(r));
      return -1;
    }
    if (done) return 0;
    if ((++spins & 127) == 0) {
      if (check_abort(c)) return -1;
      if (conform_remaining(c) < 0.5) {
        conform_fail(c, "%s did not complete before the check's time bound", what);
        return -1;
      }
    }
  }
}

int conform_wait_all(conform_ctx_t *c, int n, void **reqs, int **sizes, const char *what) {
  bool done_[64] = {false};
  int left = n;
  unsigned spins = 0;
  while (left > 0) {
    for (int i = 0; i < n; i++) {
      if (done_[i]) continue;
      int done = 0;
      conform_phase(c, "test(%s #%d)", what, i);
      strand_result_t r = c->net->test(reqs[i], &done, sizes ? sizes[i] : NULL);
      if (r != STRAND_SUCCESS) {
        conform_fail(c, "test(%s #%d) returned %s", what, i, conform_result_str(r));
        return -1;
      }
      if (done) {
        done_[i] = true;
        left--;
      }
    }
    if ((++spins & 127) == 0 && left > 0) {
      if (check_abort(c)) return -1;
      if (conform_remaining(c) < 0.5) {
        conform_fail(c, "%d of %d %s requests did not complete before the check's time bound", left,
                     n, what);
        return -1;
      }
    }
  }
  return 0;
}

int conform_wait_pair(conform_ctx_t *c, void *sreq, void *rreq, int *rsize) {
  void *reqs[2] = {sreq, rreq};
  int *sizes[2] = {NULL, rsize};
  bool done_[2] = {false, false};
  unsigned spins = 0;
  static const char *const nm[2] = {"isend", "irecv"};
  while (!done_[0] || !done_[1]) {
    for (int i = 0; i < 2; i++) {
      if (done_[i]) continue;
      int done = 0;
      conform_phase(c, "test(%s)", nm[i]);
      strand_result_t r = c->net->test(reqs[i], &done, sizes[i]);
      if (r != STRAND_SUCCESS) {
        conform_fail(c, "test(%s) returned %s", nm[i], conform_result_str(r));
        return -1;
      }
      if (done) done_[i] = true;
    }
    if ((++spins & 127) == 0 && (!done_[0] || !done_[1])) {
      if (check_abort(c)) return -1;
      if (conform_remaining(c) < 0.5) {
        conform_fail(c, "%s did not complete before the check's time bound",
                     !done_[0] && !done_[1] ? "isend and irecv" : !done_[0] ? "isend" : "irecv");
        return -1;
      }
    }
  }
  return 0;
}

/* Calls one of connect/accept and fails when it blocks past the call bound. */
__attribute__((unused)) static int timed_call(conform_ctx_t *c, const char *what, double t0) {
  double dt = conform_now() - t0;
  if (dt > conform_call_bound()) {
    conform_fail(c, "%s blocked for %.2f s (bound %.2f s; NCCL calls it from its proxy thread and "
                 "expects it to return at once)", what, dt, conform_call_bound());
    return -1;
  }
  return 0;
}

/* recv_dev: what accept gets to fill (NULL: a pointer to NULL, as for a HOST plugin). */
static int link_open(conform_ctx_t *c, int dev, conform_link_t *l, strand_dev_handle_t *recv_dev_in);

int conform_link_open(conform_ctx_t *c, int dev, conform_link_t *l) {
  return link_open(c, dev, l, NULL);
}

int conform_link_open_at(conform_ctx_t *c, int dev, int d, conform_link_t *l) {
  /* link_open pairs c->next with c->prev; the distance is theirs for the duration of the call. */
  const int R = c->nranks, saved_next = c->next, saved_prev = c->prev;
  c->next = (c->rank + d) % R;
  c->prev = (c->rank - d % R + R) % R;
  int rc = link_open(c, dev, l, NULL);
  c->next = saved_next;
  c->prev = saved_prev;
  return rc;
}

int conform_link_open_unpack(conform_ctx_t *c, int dev, conform_link_t *l, strand_dev_handle_t *dh) {
  /* As NCCL does for an UNPACK plugin: a zeroed handle, pre-filled with type and version. */
  memset(dh, 0, sizeof *dh);
  dh->netDeviceType = STRAND_DEV_UNPACK;
  dh->netDeviceVersion = STRAND_NET_DEVICE_UNPACK_VERSION;
  return link_open(c, dev, l, dh);
}

static int link_open(conform_ctx_t *c, int dev, conform_link_t *l, strand_dev_handle_t *recv_dev_in) {
  memset(l, 0, sizeof *l);
  l->dev = dev;
  unsigned char handle[CONFORM_LISTEN_BUF];
  memset(handle, 0, sizeof handle);
  const size_t hs = STRAND_NET_HANDLE_MAXSIZE;
  conform_phase(c, "listen(dev %d)", dev);
  strand_result_t r = c->net->listen(c->net_ctx, dev, handle, &l->listen_comm);
  if (r != STRAND_SUCCESS || !l->listen_comm) {
    conform_fail(c, "listen(dev %d) returned %s with listenComm %p", dev, conform_result_str(r),
                 l->listen_comm);
    return -1;
  }
  unsigned char *all = calloc((size_t)c->nranks, hs);
  if (!all || conform_allgather(c, handle, hs, all) != 0) {
    free(all);
    conform_fail(c, "bootstrap: %s", c->bs_error);
    return -1;
  }
  /* NCCL hands the same buffer to every connect retry (§6.1 step 4). */
  unsigned char peer_handle[STRAND_NET_HANDLE_MAXSIZE];
  memcpy(peer_handle, all + (size_t)c->next * hs, hs);
  free(all);
  strand_dev_handle_t *send_dev = NULL, *recv_dev = recv_dev_in;
  unsigned spins = 0;
  while (!l->send_comm || !l->recv_comm) {
    if (!l->send_comm) {
      conform_phase(c, "connect(dev %d)", dev);
      double t0 = conform_now();
      r = c->net->connect(c->net_ctx, dev, peer_handle, &l->send_comm, &send_dev);
      (void)t0; /* blocking is conn.connect-nonblocking's finding; here only the deadline counts */
      if (r != STRAND_SUCCESS) {
        conform_fail(c, "connect(dev %d) to rank %d returned %s", dev, c->next,
                     conform_result_str(r));
        return -1;
      }
    }
    if (!l->recv_comm) {
      conform_phase(c, "accept(dev %d)", dev);
      double t0 = conform_now();
      r = c->net->accept(l->listen_comm, &l->recv_comm, &recv_dev);
      (void)t0; /* blocking is conn.accept-nonblocking's finding */
      if (r != STRAND_SUCCESS) {
        conform_fail(c, "accept(dev %d) from rank %d returned %s", dev, c->prev,
                     conform_result_str(r));
        return -1;
      }
      if (l->recv_comm) {
        /* NCCL closes the listener as soon as accept produced a comm (§6.1 step 5). */
        conform_phase(c, "closeListen");
        r = c->net->closeListen(l->listen_comm);
        l->listen_comm = NULL;
        if (r != STRAND_SUCCESS) {
          conform_fail(c, "closeListen after accept returned %s", conform_result_str(r));
          return -1;
        }
      }
    }
    if ((++spins & 63) == 0) {
      if (check_abort(c)) return -1;
      if (conform_remaining(c) < 0.5) {
        conform_fail(c, "connection on dev %d not established before the time bound (sendComm %s, "
                     "recvComm %s)", dev, l->send_comm ? "up" : "NULL",
                     l->recv_comm ? "up" : "NULL");
        return -1;
      }
    }
    if (!l->send_comm || !l->recv_comm) conform_sleep(0.0002);
  }
  return 0;
}

void conform_link_close(conform_ctx_t *c, conform_link_t *l) {
  /* Keep the peer's comms alive until everyone is done transferring. Best effort: when the peer
   * already failed the barrier fails and we close anyway. */
  if (c->status != CONFORM_FAIL) conform_barrier(c);
  strand_result_t r;
  if (l->send_comm) {
    conform_phase(c, "closeSend");
    r = c->net->closeSend(l->send_comm);
    if (r != STRAND_SUCCESS) conform_fail(c, "closeSend returned %s", conform_result_str(r));
  }
  if (l->recv_comm) {
    conform_phase(c, "closeRecv");
    r = c->net->closeRecv(l->recv_comm);
    if (r != STRAND_SUCCESS) conform_fail(c, "closeRecv returned %s", conform_result_str(r));
  }
  if (l->listen_comm) {
    conform_phase(c, "closeListen");
    r = c->net->closeListen(l->listen_comm);
    if (r != STRAND_SUCCESS) conform_fail(c, "closeListen returned %s", conform_result_str(r));
  }
  memset(l, 0, sizeof *l);
}

const char *conform_cuda_use_gpu(const conform_ctx_t *c, int *dev) {
  const strand_cuda_t *cu = strand_cuda();
  if (!cu) return "no usable CUDA driver in this process (libcuda.so.1): GPU memory needs a GPU machine";
  strand_cu_ctx_t ctx = NULL;
  if (cu->deviceGet(dev, c->rank) != STRAND_CU_SUCCESS && cu->deviceGet(dev, 0) != STRAND_CU_SUCCESS)
    return "the CUDA driver loads but sees no GPU";
  if (cu->devicePrimaryCtxRetain(&ctx, *dev) != STRAND_CU_SUCCESS || cu->ctxSetCurrent(ctx) != STRAND_CU_SUCCESS)
    return "no CUDA context on the GPU";
  return NULL;
}

int conform_ping(conform_ctx_t *c, conform_link_t *l, size_t bytes, uint64_t salt) {
  conform_buf_t sb, rb;
  if (conform_buf_alloc(&sb, bytes, 0) || conform_buf_alloc(&rb, bytes, 0)) {
    conform_fail(c, "out of memory for %zu-byte buffers", bytes);
    return -1;
  }
  int rc = -1;
  void *smh = NULL, *rmh = NULL, *sreq = NULL, *rreq = NULL;
  conform_fill(sb.data, bytes, conform_seed(c->rank, c->next, salt));
  memset(rb.data, 0, bytes);
  if (conform_reg(c, l->send_comm, sb.data, bytes ? bytes : 1, STRAND_PTR_HOST, &smh)) goto out;
  if (conform_reg(c, l->recv_comm, rb.data, bytes ? bytes : 1, STRAND_PTR_HOST, &rmh)) goto out;
  size_t rsize = bytes;
  int tag = c->prev;
  void *rdata = rb.data;
  if (conform_irecv(c, l->recv_comm, 1, &rdata, &rsize, &tag, &rmh, &rreq)) goto out;
  if (conform_isend(c, l->send_comm, sb.data, bytes, c->rank, smh, &sreq)) goto out;
  int got = -1;
  if (conform_wait_pair(c, sreq, rreq, &got)) goto out;
  if ((size_t)got != bytes) {
    conform_fail(c, "receive of a %zu-byte message reported size %d", bytes, got);
    goto out;
  }
  long long bad = conform_verify(rb.data, bytes, conform_seed(c->prev, c->rank, salt));
  if (bad >= 0) {
    conform_fail(c, "payload from rank %d differs at byte %lld of %zu", c->prev, bad, bytes);
    goto out;
  }
  if (!conform_buf_guards_ok(&rb, &bad)) {
    conform_fail(c, "receive wrote outside its buffer (offset %lld)", bad);
    goto out;
  }
  rc = 0;
out:
  if (smh) conform_dereg(c, l->send_comm, smh);
  if (rmh) conform_dereg(c, l->recv_comm, rmh);
  conform_buf_free(&sb);
  conform_buf_free(&rb);
  return rc;
}

/* ---------------------------------------------------------------- result watcher */

enum { RESULTS_SEEN_MAX = 64 };
typedef struct {
  int n; /* entries claimed (may exceed RESULTS_SEEN_MAX: the rest are counted, not kept) */
  conform_result_seen_t e[RESULTS_SEEN_MAX];
} results_log_t;

static results_log_t *g_results_log;   /* MAP_SHARED: inherited by every check child */
typedef struct {
  int depth;              /* close/finalize calls in progress (several threads may close) */
  double started;         /* conform_now() when depth went from 0 to 1 */
  char call[24];          /* that call */
} close_watch_t;
static close_watch_t *g_close_watch;   /* MAP_SHARED too: the close bound (below) */
static strand_net_v12_t g_real_net, g_watched_net;
static const char *g_watch_check = "";

void conform_results_log_open(void) {
  if (g_results_log) return;
  void *m = mmap(NULL, sizeof *g_results_log, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (m != MAP_FAILED) g_results_log = m;
  m = mmap(NULL, sizeof *g_close_watch, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (m != MAP_FAILED) g_close_watch = m;
}

int conform_results_seen(const conform_result_seen_t **seen) {
  if (!g_results_log) {
    *seen = NULL;
    return 0;
  }
  __sync_synchronize();
  *seen = g_results_log->e;
  int n = __atomic_load_n(&g_results_log->n, __ATOMIC_ACQUIRE);
  return n < RESULTS_SEEN_MAX ? n : RESULTS_SEEN_MAX;
}

/* Close bound and leak warnings. The watcher marks every closeSend/closeRecv/closeListen/finalize
 * in a page shared with the rank parent, which kills the check child when one of them has not
 * returned within --close-bound x --timeout-scale (runner.c). The WARN lines the plugin logs while
 * one is in progress are matched against the leak pattern (conform_close_warnings). */
static int g_close_warns;
static char g_close_warn_first[256];

/* Case-insensitive fragments that make a WARN during close/finalize a leak report. */
static const char *const leak_words[] = {"leak", "not freed", "not released", "not been freed",
                                         "still allocated", "still registered", "still in use",
                                         "still open", "outstanding", NULL};

static void close_warn_seen(const char *msg) {
  if (!g_close_watch || __atomic_load_n(&g_close_watch->depth, __ATOMIC_ACQUIRE) <= 0) return;
  char low[1024];
  size_t n = 0;
  for (; msg[n] && n + 1 < sizeof low; n++) low[n] = (char)((msg[n] >= 'A' && msg[n] <= 'Z') ? msg[n] + 32 : msg[n]);
  low[n] = '\0';
  for (int i = 0; leak_words[i]; i++)
    if (strstr(low, leak_words[i])) {
      if (__atomic_fetch_add(&g_close_warns, 1, __ATOMIC_ACQ_REL) == 0)
        snprintf(g_close_warn_first, sizeof g_close_warn_first, "%.255s", msg);
      return;
    }
}

int conform_close_warnings(const char **first) {
  if (first) *first = g_close_warn_first;
  return __atomic_load_n(&g_close_warns, __ATOMIC_ACQUIRE);
}

void conform_close_watch_reset(void) {
  if (g_close_watch) memset(g_close_watch, 0, sizeof *g_close_watch);
}

bool conform_close_overdue(double bound, char *call, size_t len, double *took) {
  if (!g_close_watch || __atomic_load_n(&g_close_watch->depth, __ATOMIC_ACQUIRE) <= 0) return false;
  double t = conform_now() - g_close_watch->started;
  if (g_close_watch->started <= 0 || t <= bound) return false;
  snprintf(call, len, "%s", g_close_watch->call);
  *took = t;
  return true;
}

bool conform_close_in_progress(void) {
  return g_close_watch && __atomic_load_n(&g_close_watch->depth, __ATOMIC_ACQUIRE) > 0;
}

static void close_begin(const char *call) {
  if (!g_close_watch) return;
  if (__atomic_fetch_add(&g_close_watch->depth, 1, __ATOMIC_ACQ_REL) == 0) {
    snprintf(g_close_watch->call, sizeof g_close_watch->call, "%s", call);
    g_close_watch->started = conform_now();
  }
}

static void close_end(void) {
  if (!g_close_watch) return;
  if (__atomic_sub_fetch(&g_close_watch->depth, 1, __ATOMIC_ACQ_REL) == 0) g_close_watch->started = 0;
}

static strand_result_t watch(const char *call, strand_result_t r) {
  if (((int)r < 0 || (int)r > CONFORM_PLUGIN_RESULT_MAX) && g_results_log) {
    int i = __atomic_fetch_add(&g_results_log->n, 1, __ATOMIC_ACQ_REL);
    if (i < RESULTS_SEEN_MAX) {
      conform_result_seen_t *e = &g_results_log->e[i];
      snprintf(e->check, sizeof e->check, "%s", g_watch_check);
      snprintf(e->call, sizeof e->call, "%s", call);
      e->code = (int)r;
    }
  }
  return r;
}

#define W(name, params, args) \
  static strand_result_t w_##name params { return watch(#name, g_real_net.name args); }
W(init, (void **ctx, uint64_t id, strand_comm_config_t *cfg, strand_logger_t lg, strand_profiler_cb_t pf),
  (ctx, id, cfg, lg, pf))
W(devices, (int *ndev), (ndev))
W(getProperties, (int dev, strand_props_v12_t *p), (dev, p))
W(listen, (void *ctx, int dev, void *h, void **lc), (ctx, dev, h, lc))
W(connect, (void *ctx, int dev, void *h, void **sc, strand_dev_handle_t **dh), (ctx, dev, h, sc, dh))
W(accept, (void *lc, void **rc, strand_dev_handle_t **dh), (lc, rc, dh))
W(regMr, (void *comm, void *data, size_t size, int type, void **mh), (comm, data, size, type, mh))
W(regMrDmaBuf, (void *comm, void *data, size_t size, int type, uint64_t off, int fd, void **mh),
  (comm, data, size, type, off, fd, mh))
W(deregMr, (void *comm, void *mh), (comm, mh))
W(isend, (void *sc, void *data, size_t size, int tag, void *mh, void *ph, void **req),
  (sc, data, size, tag, mh, ph, req))
W(irecv, (void *rc, int n, void **data, size_t *sizes, int *tags, void **mhs, void **phs, void **req),
  (rc, n, data, sizes, tags, mhs, phs, req))
W(iflush, (void *rc, int n, void **data, int *sizes, void **mhs, void **req), (rc, n, data, sizes, mhs, req))
W(test, (void *req, int *done, int *sizes), (req, done, sizes))
#define WC(name, params, args)                                                          \
  static strand_result_t w_##name params {                                              \
    close_begin(#name);                                                                 \
    strand_result_t r = g_real_net.name args;                                           \
    close_end();                                                                        \
    return watch(#name, r);                                                             \
  }
WC(closeSend, (void *sc), (sc))
WC(closeRecv, (void *rc), (rc))
WC(closeListen, (void *lc), (lc))
WC(finalize, (void *ctx), (ctx))
#undef WC
W(getDeviceMr, (void *comm, void *mh, void **dmh), (comm, mh, dmh))
W(irecvConsumed, (void *rc, int n, void *req), (rc, n, req))
W(makeVDevice, (int *d, strand_vprops_v12_t *p), (d, p))
W(setNetAttr, (void *ctx, strand_net_attr_t *a), (ctx, a))
#undef W

const strand_net_v12_t *conform_watch_net(const strand_net_v12_t *real, const char *check_id) {
  g_real_net = *real;
  g_watched_net = *real;
  g_watch_check = check_id;
#define S(name) if (real->name) g_watched_net.name = w_##name
  S(init); S(devices); S(getProperties); S(listen); S(connect); S(accept); S(regMr); S(regMrDmaBuf);
  S(deregMr); S(isend); S(irecv); S(iflush); S(test); S(closeSend); S(closeRecv); S(closeListen);
  S(getDeviceMr); S(irecvConsumed); S(makeVDevice); S(finalize); S(setNetAttr);
#undef S
  return &g_watched_net;
}

/* NCCL's own socket connect retries a refused or timed-out connection with growing sleeps and gives
 * up after about 60 s (spec §9.2); the proxy polls a plugin's connect until it returns a comm or an
 * error, with no bound of its own. */
#define NCCL_SOCKET_CONNECT_BOUND_S 60.0

void conform_stale_text(const conform_ctx_t *c, double waited, char *out, size_t len) {
  if (c->stale_bound < NCCL_SOCKET_CONNECT_BOUND_S)
    snprintf(out, len, "did not return within %.1f s (the suite's bound: --stale-bound %g s x "
             "--timeout-scale %g; NCCL's own socket connect gives up after ~60 s, and NCCL's proxy "
             "polls a plugin's connect until it returns; run with --stale-bound 90 to tell a slower "
             "bound from none)", waited, conform_opts.stale_bound_s, conform_opts.timeout_scale);
  else
    snprintf(out, len, "did not return within %.1f s (--stale-bound %g s x --timeout-scale %g, past "
             "the ~60 s after which NCCL's own socket connect gives up): NCCL's proxy would keep "
             "polling it and the job would hang instead of failing", waited,
             conform_opts.stale_bound_s, conform_opts.timeout_scale);
}

double conform_check_bound(const conform_check_t *chk) {
  double b = chk->timeout_s * conform_opts.timeout_scale;
  if (chk->flags & CONFORM_F_STALE) {
    double need = conform_opts.stale_bound_s * conform_opts.timeout_scale + 10.0;
    if (need > b) b = need;
  }
  return b;
}
