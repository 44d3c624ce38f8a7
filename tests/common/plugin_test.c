/* Helpers shared by the standalone plugin tests (plugin_test.h). */
#include "plugin_test.h"

#include <dlfcn.h>
#include <stdarg.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

int pt_failures;

void pt_fail(const char *file, int line, const char *cond, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fprintf(stderr, "FAIL %s:%d: %s: ", file, line, cond);
  vfprintf(stderr, fmt, ap);
  fprintf(stderr, "\n");
  va_end(ap);
  pt_failures++;
}

double pt_now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

void *pt_load_table(const char *path, const char *symbol) {
  void *dl = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (dl == NULL) {
    fprintf(stderr, "cannot load %s: %s\n", path, dlerror());
    return NULL;
  }
  void *table = dlsym(dl, symbol);
  if (table == NULL) fprintf(stderr, "%s does not export %s\n", path, symbol);
  return table;
}

int pt_proc_barrier(int *count, int *gen, int n, void (*pump)(void), double bound_s, const char *who) {
  int g = __atomic_load_n(gen, __ATOMIC_ACQUIRE);
  if (__atomic_add_fetch(count, 1, __ATOMIC_ACQ_REL) == n) {
    __atomic_store_n(count, 0, __ATOMIC_RELAXED);
    __atomic_store_n(gen, g + 1, __ATOMIC_RELEASE);
    return 0;
  }
  double end = pt_now_s() + bound_s;
  while (__atomic_load_n(gen, __ATOMIC_ACQUIRE) == g) {
    if (pump) pump();
    PT_CHECK(pt_now_s() < end, "%s: barrier of %d processes timed out after %.0f s", who, n, bound_s);
  }
  return 0;
}

bool pt_gpu_usable(void) {
  pid_t pid = fork();
  if (pid == 0) {
    void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    int (*init)(unsigned) = NULL, (*device_get)(int *, int) = NULL;
    if (lib) {
      *(void **)&init = dlsym(lib, "cuInit");
      *(void **)&device_get = dlsym(lib, "cuDeviceGet");
    }
    int dev = -1;
    _exit(init && device_get && init(0) == 0 && device_get(&dev, 0) == 0 ? 0 : 1);
  }
  int st = 0;
  return pid > 0 && waitpid(pid, &st, 0) == pid && WIFEXITED(st) && WEXITSTATUS(st) == 0;
}

/* The driver's structs for cuMemCreate and cuMemSetAccess, restated (no CUDA headers here). */
typedef struct {
  int type, id; /* CUmemLocation: type 1 = device */
} pt_mem_location_t;
typedef struct {
  int type, requested_handle_types; /* CUmemAllocationProp: type 1 = pinned */
  pt_mem_location_t location;
  void *win32_meta;
  unsigned char compression, gdr_capable;
  unsigned short usage;
  unsigned char reserved[4];
} pt_alloc_prop_t;
typedef struct {
  pt_mem_location_t location;
  int flags; /* 3 = read and write */
} pt_access_desc_t;

int pt_cuda_vmm_alloc(int ordinal, size_t bytes, unsigned long long *d) {
  void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
  int (*device_get)(int *, int) = NULL;
  int (*granularity)(size_t *, const pt_alloc_prop_t *, int) = NULL;
  int (*reserve)(unsigned long long *, size_t, size_t, unsigned long long, unsigned long long) = NULL;
  int (*create)(unsigned long long *, size_t, const pt_alloc_prop_t *, unsigned long long) = NULL;
  int (*map)(unsigned long long, size_t, size_t, unsigned long long, unsigned long long) = NULL;
  int (*set_access)(unsigned long long, size_t, const pt_access_desc_t *, size_t) = NULL;
  if (lib) {
    *(void **)&device_get = dlsym(lib, "cuDeviceGet");
    *(void **)&granularity = dlsym(lib, "cuMemGetAllocationGranularity");
    *(void **)&reserve = dlsym(lib, "cuMemAddressReserve");
    *(void **)&create = dlsym(lib, "cuMemCreate");
    *(void **)&map = dlsym(lib, "cuMemMap");
    *(void **)&set_access = dlsym(lib, "cuMemSetAccess");
  }
  if (!device_get || !granularity || !reserve || !create || !map || !set_access) return -1;
  int dev = -1;
  int r = device_get(&dev, ordinal);
  pt_alloc_prop_t prop = {.type = 1, .location = {.type = 1, .id = dev}};
  pt_access_desc_t acc = {.location = {.type = 1, .id = dev}, .flags = 3};
  size_t gran = 0;
  unsigned long long handle = 0, va = 0;
  if (!r) r = granularity(&gran, &prop, 0);
  size_t size = gran ? (bytes + gran - 1) / gran * gran : bytes;
  if (!r) r = reserve(&va, size, 0, 0, 0);
  if (!r) r = create(&handle, size, &prop, 0);
  if (!r) r = map(va, size, 0, handle, 0);
  if (!r) r = set_access(va, size, &acc, 1);
  if (!r) *d = va;
  return r;
}

static unsigned char pattern(size_t i, unsigned seed) {
  return (unsigned char)(seed * 131 + i * 7 + (i >> 8) + (i >> 12));
}

void pt_fill(void *buf, size_t n, unsigned seed) {
  unsigned char *p = buf;
  for (size_t i = 0; i < n; i++) p[i] = pattern(i, seed);
}

long pt_verify(const void *buf, size_t n, unsigned seed) {
  const unsigned char *p = buf;
  for (size_t i = 0; i < n; i++)
    if (p[i] != pattern(i, seed)) return (long)i;
  return -1;
}

int pt_connect_pair(const pt_net_t *net, void *ctx, int dev, void **send_comm, void **recv_comm,
                    void **listen_out, double bound_s) {
  char handle[STRAND_NET_HANDLE_MAXSIZE];
  void *lc = NULL;
  *send_comm = *recv_comm = NULL;
  PT_CHECK(net->listen(ctx, dev, handle, &lc) == STRAND_SUCCESS && lc != NULL, "listen on dev %d",
           dev);
  double t0 = pt_now_s();
  while (*send_comm == NULL || *recv_comm == NULL) {
    double c0 = pt_now_s();
    if (*send_comm == NULL)
      PT_CHECK(net->connect(ctx, dev, handle, send_comm, NULL) == STRAND_SUCCESS, "connect");
    if (*recv_comm == NULL)
      PT_CHECK(net->accept(lc, recv_comm, NULL) == STRAND_SUCCESS, "accept");
    PT_CHECK(pt_now_s() - c0 < 1.0, "connect/accept call blocked for %.2f s", pt_now_s() - c0);
    PT_CHECK(pt_now_s() - t0 < bound_s, "connection not established within %.0f s", bound_s);
  }
  if (listen_out != NULL) {
    *listen_out = lc;
  } else {
    PT_CHECK(net->closeListen(lc) == STRAND_SUCCESS, "closeListen");
  }
  return 0;
}

int pt_wait(const pt_net_t *net, void *req, int *sizes, double bound_s) {
  double t0 = pt_now_s();
  for (;;) {
    int done = 0;
    strand_result_t rc = net->test(req, &done, sizes);
    if (rc != STRAND_SUCCESS) return (int)rc;
    if (done) return STRAND_SUCCESS;
    if (pt_now_s() - t0 > bound_s) return PT_TIMEOUT;
  }
}

/* ---- profiler events (pt_profiler_case) ---------------------------------------------------- */

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "strand/profiler.h"

#define PROF_MAX_EVENTS 64
static struct prof_event {
  void *parent;
  int64_t id;
  uint8_t type;
  int op;         /* socket layout: op; IB layout: opcode */
  size_t length;
  int stops;
  int updates;
} prof_ev[PROF_MAX_EVENTS];
static int prof_nev, prof_bad_calls;
static pthread_mutex_t prof_lock = PTHREAD_MUTEX_INITIALIZER;

static strand_result_t prof_record(void **handle, int type, void *parent, int64_t id, void *data) {
  pthread_mutex_lock(&prof_lock);
  if (type == STRAND_PROFILER_NET_EVENT_START) {
    if (handle == NULL || parent == NULL || data == NULL || prof_nev == PROF_MAX_EVENTS) {
      prof_bad_calls++;
    } else {
      struct prof_event *e = &prof_ev[prof_nev++];
      memset(e, 0, sizeof *e);
      e->parent = parent;
      e->id = id;
      e->type = *(const uint8_t *)data;
      if ((id & ~(int64_t)0xffff) == STRAND_PROFILER_NET_TYPE_IB) {
        const strand_profiler_ib_descr_v1_t *d = data;
        e->op = d->qp.opcode;
        e->length = d->qp.length;
      } else {
        const strand_profiler_sock_descr_v1_t *d = data;
        e->op = d->sock.op;
        e->length = d->sock.length;
      }
      *handle = e;
    }
  } else {
    struct prof_event *e = handle ? *handle : NULL;
    if (e < prof_ev || e >= prof_ev + prof_nev) {
      prof_bad_calls++; /* a handle START never returned */
    } else if (type == STRAND_PROFILER_NET_EVENT_STOP) {
      e->stops++;
    } else {
      e->updates++;
      if (type == STRAND_PROFILER_NET_EVENT_UPDATE_AND_STOP) e->stops++;
    }
  }
  pthread_mutex_unlock(&prof_lock);
  return STRAND_SUCCESS;
}

static struct prof_event *prof_find(void *parent, int *count) {
  struct prof_event *found = NULL;
  *count = 0;
  pthread_mutex_lock(&prof_lock);
  for (int i = 0; i < prof_nev; i++)
    if (prof_ev[i].parent == parent) {
      found = &prof_ev[i];
      (*count)++;
    }
  pthread_mutex_unlock(&prof_lock);
  return found;
}

typedef struct {
  const strand_net_v11_t *net;
  void *sc, *rc;
  double bound_s;
  char *sbuf, *rbuf;
  void *smh, *rmh;
} prof_pair_t;

/* One grouped receive of n messages (tags 10+i, sizes[i], parents rpar[i] or NULL) and the n
 * sends (parents spar[i] or NULL); both sides polled until done. After each post, the event of
 * a parent must exist and be open; when test() reports done, it must be stopped. */
static int prof_round(prof_pair_t *p, int n, const size_t *sizes, void **spar, void **rpar,
                      bool expect_events) {
  const strand_net_v11_t *net = p->net;
  void *data[2], *mhs[2] = {p->rmh, p->rmh}, *rreq = NULL, *sreq[2] = {NULL, NULL};
  int tags[2];
  size_t sz[2];
  size_t off = 0;
  for (int i = 0; i < n; i++) {
    data[i] = p->rbuf + off;
    off += sizes[i];
    tags[i] = 10 + i;
    sz[i] = sizes[i];
  }
  double t0 = pt_now_s();
  while (rreq == NULL) {
    PT_CHECK(net->irecv(p->rc, n, data, sz, tags, mhs, rpar, &rreq) == STRAND_SUCCESS, "irecv");
    PT_CHECK(pt_now_s() - t0 < p->bound_s, "irecv not accepted within %.0f s", p->bound_s);
  }
  off = 0;
  for (int i = 0; i < n; i++) {
    while (sreq[i] == NULL) {
      PT_CHECK(net->isend(p->sc, p->sbuf + off, sizes[i], tags[i], p->smh, spar ? spar[i] : NULL,
                          &sreq[i]) == STRAND_SUCCESS, "isend");
      int done = 0, rsz[2];
      if (sreq[i] == NULL) /* progress the receiver (clear-to-send) */
        PT_CHECK(net->test(rreq, &done, rsz) == STRAND_SUCCESS && !done, "test(recv) early");
      PT_CHECK(pt_now_s() - t0 < p->bound_s, "isend not accepted within %.0f s", p->bound_s);
    }
    off += sizes[i];
  }
  for (int i = 0; i < n && expect_events; i++) {
    int cnt;
    struct prof_event *e = spar ? prof_find(spar[i], &cnt) : NULL;
    PT_CHECK(spar == NULL || (e != NULL && cnt == 1 && e->stops == 0),
             "send %d: want one open event after isend, have %d (stops %d)", i, spar ? cnt : 0,
             e ? e->stops : -1);
    e = rpar ? prof_find(rpar[i], &cnt) : NULL;
    PT_CHECK(rpar == NULL || (e != NULL && cnt == 1 && e->stops == 0),
             "receive %d: want one open event after irecv, have %d", i, rpar ? cnt : 0);
  }
  bool rdone = false, sdone[2] = {n < 1, n < 2};
  while (!rdone || !sdone[0] || !sdone[1]) {
    int done = 0, rsz[2] = {-1, -1};
    for (int i = 0; i < n; i++) {
      if (sdone[i]) continue;
      PT_CHECK(net->test(sreq[i], &done, rsz) == STRAND_SUCCESS, "test(send %d)", i);
      if (done) {
        sdone[i] = true;
        int cnt;
        struct prof_event *e = spar ? prof_find(spar[i], &cnt) : NULL;
        PT_CHECK(!expect_events || spar == NULL || (e && e->stops == 1),
                 "send %d done but its event has %d stop(s)", i, e ? e->stops : -1);
      }
    }
    if (!rdone) {
      done = 0;
      PT_CHECK(net->test(rreq, &done, rsz) == STRAND_SUCCESS, "test(recv)");
      if (done) {
        rdone = true;
        for (int i = 0; i < n; i++) {
          PT_CHECK(rsz[i] == (int)sizes[i], "receive %d: size %d, want %zu", i, rsz[i], sizes[i]);
          int cnt;
          struct prof_event *e = rpar ? prof_find(rpar[i], &cnt) : NULL;
          PT_CHECK(!expect_events || rpar == NULL || (e && e->stops == 1),
                   "receive %d done but its event has %d stop(s)", i, e ? e->stops : -1);
        }
      }
    }
    PT_CHECK(pt_now_s() - t0 < p->bound_s, "round not done within %.0f s", p->bound_s);
  }
  return 0;
}

/* The recorded event of `parent`: exactly one, with the plugin id, type, direction and length. */
static int prof_expect(void *parent, int64_t want_id, bool send, size_t length) {
  int cnt;
  struct prof_event *e = prof_find(parent, &cnt);
  PT_CHECK(e != NULL && cnt == 1, "%s of %zu bytes: %d events with its parent, want 1",
           send ? "send" : "receive", length, cnt);
  PT_CHECK(e->id == want_id, "plugin_id 0x%llx, want 0x%llx", (unsigned long long)e->id,
           (unsigned long long)want_id);
  PT_CHECK(e->type == 1, "descriptor type %u, want 1 (ncclProfileSocket / ncclProfileQp)", e->type);
  PT_CHECK(e->length == length, "%s: descriptor length %zu, want %zu", send ? "send" : "receive",
           e->length, length);
  PT_CHECK(e->stops == 1, "%s of %zu bytes: %d stops, want 1", send ? "send" : "receive", length,
           e->stops);
  return 0;
}

int pt_profiler_case(const strand_net_v11_t *net, int dev, int64_t want_id, double bound_s) {
  enum { NSINGLE = 3 };
  static int sparent[NSINGLE + 2], rparent[NSINGLE + 2]; /* addresses only */
  const size_t single[NSINGLE] = {8, 5000, 1 << 20};
  strand_props_v11_t props;
  PT_CHECK(net->getProperties(dev, &props) == STRAND_SUCCESS, "getProperties(%d)", dev);
  pthread_mutex_lock(&prof_lock);
  prof_nev = prof_bad_calls = 0;
  pthread_mutex_unlock(&prof_lock);
  void *ctx = NULL;
  PT_CHECK(net->init(&ctx, 7, NULL, NULL, prof_record) == STRAND_SUCCESS, "init with a profiler");
  pt_net_t pn = PT_NET(net);
  prof_pair_t p = {.net = net, .bound_s = bound_s};
  if (pt_connect_pair(&pn, ctx, dev, &p.sc, &p.rc, NULL, bound_s) != 0) return -1;
  size_t cap = 2u << 20;
  p.sbuf = calloc(1, cap);
  p.rbuf = calloc(1, cap);
  PT_CHECK(p.sbuf && p.rbuf, "calloc");
  PT_CHECK(net->regMr(p.sc, p.sbuf, cap, STRAND_PTR_HOST, &p.smh) == STRAND_SUCCESS, "regMr send");
  PT_CHECK(net->regMr(p.rc, p.rbuf, cap, STRAND_PTR_HOST, &p.rmh) == STRAND_SUCCESS, "regMr recv");
  for (int k = 0; k < NSINGLE; k++) {
    void *sp = &sparent[k], *rp = &rparent[k];
    if (prof_round(&p, 1, &single[k], &sp, &rp, true) != 0) return -1;
    if (prof_expect(sp, want_id, true, single[k]) != 0) return -1;
    if (prof_expect(rp, want_id, false, single[k]) != 0) return -1;
  }
  /* No parent handle: nothing may be reported. */
  int before = prof_nev;
  if (prof_round(&p, 1, &single[1], NULL, NULL, false) != 0) return -1;
  PT_CHECK(prof_nev == before, "%d event(s) for a message without parent handles",
           prof_nev - before);
  /* Grouped receive: one event per receive, each with its own parent. */
  if (props.maxRecvs >= 2) {
    const size_t grp[2] = {3000, 70000};
    void *sp[2] = {&sparent[NSINGLE], &sparent[NSINGLE + 1]};
    void *rp[2] = {&rparent[NSINGLE], &rparent[NSINGLE + 1]};
    if (prof_round(&p, 2, grp, sp, rp, true) != 0) return -1;
    for (int i = 0; i < 2; i++) {
      if (prof_expect(sp[i], want_id, true, grp[i]) != 0) return -1;
      if (prof_expect(rp[i], want_id, false, grp[i]) != 0) return -1;
    }
  }
  /* Direction: every send event carries one value, every receive event another. */
  int sop = -1, rop = -1;
  for (int i = 0; i < prof_nev; i++) {
    bool is_send = prof_ev[i].parent >= (void *)sparent &&
                   prof_ev[i].parent < (void *)(sparent + NSINGLE + 2);
    int *slot = is_send ? &sop : &rop;
    if (*slot < 0) *slot = prof_ev[i].op;
    PT_CHECK(prof_ev[i].op == *slot, "event %d: op/opcode %d, other %s events have %d", i,
             prof_ev[i].op, is_send ? "send" : "receive", *slot);
  }
  PT_CHECK(sop != rop, "send and receive events both carry op/opcode %d", sop);
  if ((want_id & ~(int64_t)0xffff) == STRAND_PROFILER_NET_TYPE_SOCK)
    PT_CHECK(sop == STRAND_PROFILE_SOCK_SEND && rop == STRAND_PROFILE_SOCK_RECV,
             "socket layout: op %d / %d, want 0 (send) / 1 (receive)", sop, rop);
  PT_CHECK(prof_bad_calls == 0, "%d malformed profiler call(s) (unknown handle, NULL descriptor)",
           prof_bad_calls);
  /* A later init without a callback (what collnet_stub and gin_proxy do for their own contexts of
   * the net) must not switch the core's events off: the next messages are still reported. */
  void *ctx2 = NULL;
  PT_CHECK(net->init(&ctx2, 8, NULL, NULL, NULL) == STRAND_SUCCESS, "init without a profiler");
  before = prof_nev;
  void *sp = &sparent[0], *rp = &rparent[0];
  if (prof_round(&p, 1, &single[0], &sp, &rp, false) != 0) return -1;
  PT_CHECK(prof_nev >= before + 2, "%d event(s) for a send and a receive after another init without "
           "a profiler callback: that init switched the core's callback off", prof_nev - before);
  net->deregMr(p.sc, p.smh);
  net->deregMr(p.rc, p.rmh);
  PT_CHECK(net->closeSend(p.sc) == STRAND_SUCCESS && net->closeRecv(p.rc) == STRAND_SUCCESS,
           "close");
  free(p.sbuf);
  free(p.rbuf);
  PT_CHECK(net->finalize(ctx2) == STRAND_SUCCESS && net->finalize(ctx) == STRAND_SUCCESS,
           "finalize");
  return 0;
}
