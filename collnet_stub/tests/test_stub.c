/* collnet_stub unit test over a mock net: ranks are threads of this process, the net is an
 * in-memory FIFO per comm. The mock is deliberately stingy, to reach the stub's corner paths:
 *   - connect returns a NULL comm on its first try (non-blocking connect in progress);
 *   - every comm accepts ONE request at a time: isend/irecv return a NULL request otherwise, so
 *     the stub's retry of a full comm runs all the time;
 *   - isend/irecv check that the mhandle is the registration covering the buffer.
 * Checked against the SDK's CPU reductions in rank order: all-reduce (0, 1, odd, multi-chunk
 * counts; in place; int8 prod, fp8 e4m3 max, float32 sum), windowed all-gather / reduce-scatter
 * with two SGE parts, several collectives in flight tested out of order, group sizes 1, 2, 3, 5,
 * registration rules, bad handles, properties. Mismatched collectives (the ranks of a buggy
 * application disagree on count, datatype, op, kind or window): every rank's call fails with
 * STRAND_INVALID_USAGE and a WARN naming both sides, none reports done, later calls fail too.
 * With a progress thread (forced on for one case in every run): an idle collComm's thread sleeps
 * (its context switches and CPU time read from /proc) and a call after an idle wakes it at once. */
#include <dirent.h>
#include <stdarg.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "strand/collnet_stub.h"
#include "../cs.h" /* cs_progress_wants_thread, CS_PROG_THREAD_MIN_CPUS, cs_auto_streams: auto rules */
#include "strand/log.h"
#include "strand/params.h"
#include "strand/reduce.h"

static int g_fail;
/* The test's own clock (the stub's timings are checked against it). */
static double test_now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}
#define CHECK(cond, ...)                                                                           \
  do {                                                                                             \
    if (!(cond)) {                                                                                 \
      fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__);                                         \
      fprintf(stderr, __VA_ARGS__);                                                                \
      fprintf(stderr, "\n");                                                                       \
      __atomic_store_n(&g_fail, 1, __ATOMIC_RELAXED);                                              \
    }                                                                                              \
  } while (0)

/* ------------------------------------------------------------------------------ the mock net */

static pthread_mutex_t mk_lock = PTHREAD_MUTEX_INITIALIZER;

typedef struct mk_req {
  struct mk_pipe *pipe;
  bool is_send, done;
  char *buf;
  size_t size;
  struct mk_req *next;
} mk_req_t;

typedef struct mk_pipe {
  mk_req_t *sends, *recvs; /* posted, FIFO, not yet matched */
  int refs;
} mk_pipe_t;

typedef struct {
  mk_pipe_t *pipe;
  bool is_send;
  int outstanding;
  bool tried; /* connect: NULL on the first try */
} mk_comm_t;

typedef struct {
  mk_pipe_t *pending[64];
  int npending;
} mk_listen_t;

typedef struct {
  uint32_t magic;
  mk_listen_t *l;
} mk_handle_t;

typedef struct {
  char *base;
  size_t size;
} mk_mr_t;

static strand_result_t mk_init(void **ctx, uint64_t id, strand_comm_config_t *cfg, strand_logger_t lg,
                               strand_profiler_cb_t pf) {
  (void)id, (void)cfg, (void)lg, (void)pf;
  *ctx = malloc(1);
  return STRAND_SUCCESS;
}
static strand_result_t mk_finalize(void *ctx) {
  free(ctx);
  return STRAND_SUCCESS;
}
static strand_result_t mk_devices(int *n) {
  *n = 1;
  return STRAND_SUCCESS;
}
static strand_result_t mk_props(int dev, strand_props_t *p) {
  strand_props_init_host(p, dev);
  p->name = "mock0";
  p->speed = 12345;
  p->ptrSupport = STRAND_PTR_HOST | STRAND_PTR_CUDA; /* the stub must not pass CUDA on */
  return STRAND_SUCCESS;
}
static strand_result_t mk_listen(void *ctx, int dev, void *handle, void **lc) {
  (void)ctx, (void)dev;
  mk_listen_t *l = calloc(1, sizeof *l);
  mk_handle_t h = {0x4d4b4844u, l};
  memcpy(handle, &h, sizeof h);
  *lc = l;
  return STRAND_SUCCESS;
}
/* The disagreeing-parameter cases: once rank 0's connect has read g_chunk_var (its first net
 * connect comes after), the variable changes to g_chunk_other and rank 1 may start its connect. */
static const char *g_chunk_var = "STRAND_COLLNET_CHUNK_KB", *g_chunk_other;
static bool g_chunk_switched;
static pthread_mutex_t g_chunk_lock = PTHREAD_MUTEX_INITIALIZER;
static int g_mk_connects; /* send comms the mock handed out (atomic): the comms a collComm dialled */
static pthread_cond_t g_chunk_cond = PTHREAD_COND_INITIALIZER;
static strand_result_t mk_connect(void *ctx, int dev, void *handle, void **sc, strand_dev_handle_t **dh) {
  (void)ctx, (void)dev, (void)dh;
  mk_handle_t *h = handle;
  *sc = NULL;
  pthread_mutex_lock(&g_chunk_lock);
  if (g_chunk_other && !g_chunk_switched) {
    setenv(g_chunk_var, g_chunk_other, 1);
    strand_params_reread_for_test();
    g_chunk_switched = true;
    pthread_cond_broadcast(&g_chunk_cond);
  }
  pthread_mutex_unlock(&g_chunk_lock);
  if (h->magic != 0x4d4b4844u) return STRAND_INVALID_ARGUMENT;
  /* The first try leaves a mark in the handle (as real nets keep state there) and returns NULL. */
  if (h->magic == 0x4d4b4844u && ((uint32_t *)handle)[31] != 1) {
    ((uint32_t *)handle)[31] = 1;
    return STRAND_SUCCESS;
  }
  __atomic_add_fetch(&g_mk_connects, 1, __ATOMIC_RELAXED);
  mk_pipe_t *p = calloc(1, sizeof *p);
  mk_comm_t *c = calloc(1, sizeof *c);
  p->refs = 2;
  c->pipe = p;
  c->is_send = true;
  pthread_mutex_lock(&mk_lock);
  h->l->pending[h->l->npending++] = p;
  pthread_mutex_unlock(&mk_lock);
  *sc = c;
  return STRAND_SUCCESS;
}
static strand_result_t mk_accept(void *lc, void **rc, strand_dev_handle_t **dh) {
  (void)dh;
  mk_listen_t *l = lc;
  *rc = NULL;
  pthread_mutex_lock(&mk_lock);
  if (l->npending) {
    mk_comm_t *c = calloc(1, sizeof *c);
    c->pipe = l->pending[0];
    memmove(l->pending, l->pending + 1, (size_t)--l->npending * sizeof l->pending[0]);
    *rc = c;
  }
  pthread_mutex_unlock(&mk_lock);
  return STRAND_SUCCESS;
}
static strand_result_t mk_reg(void *comm, void *data, size_t size, int type, void **mh) {
  (void)comm;
  if (type != STRAND_PTR_HOST) return STRAND_INTERNAL_ERROR;
  mk_mr_t *m = malloc(sizeof *m);
  *m = (mk_mr_t){data, size};
  *mh = m;
  return STRAND_SUCCESS;
}
static strand_result_t mk_dereg(void *comm, void *mh) {
  (void)comm;
  free(mh);
  return STRAND_SUCCESS;
}
static void mk_append(mk_req_t **q, mk_req_t *r) {
  while (*q) q = &(*q)->next;
  *q = r;
}
static strand_result_t mk_post(mk_comm_t *c, bool is_send, void *data, size_t size, void *mh, void **req) {
  *req = NULL;
  mk_mr_t *m = mh;
  if (size && (!m || (char *)data < m->base || (char *)data + size > m->base + m->size)) {
    fprintf(stderr, "mock: %s of %zu bytes at %p outside its registration\n", is_send ? "isend" : "irecv",
            size, data);
    return STRAND_INVALID_ARGUMENT;
  }
  pthread_mutex_lock(&mk_lock);
  if (c->outstanding == 0) {
    mk_req_t *r = calloc(1, sizeof *r);
    *r = (mk_req_t){c->pipe, is_send, false, data, size, NULL};
    mk_append(is_send ? &c->pipe->sends : &c->pipe->recvs, r);
    c->outstanding++;
    *req = r;
  }
  pthread_mutex_unlock(&mk_lock);
  return STRAND_SUCCESS;
}
static strand_result_t mk_isend(void *sc, void *data, size_t size, int tag, void *mh, void *ph, void **req) {
  (void)tag, (void)ph;
  return mk_post(sc, true, data, size, mh, req);
}
static strand_result_t mk_irecv(void *rc, int n, void **data, size_t *sizes, int *tags, void **mhs, void **ph,
                                void **req) {
  (void)tags, (void)ph;
  if (n != 1) return STRAND_INVALID_ARGUMENT;
  return mk_post(rc, false, data[0], sizes[0], mhs[0], req);
}
static strand_result_t mk_test(void *req, int *done, int *sizes) {
  mk_req_t *r = req;
  strand_result_t rc = STRAND_SUCCESS;
  pthread_mutex_lock(&mk_lock);
  mk_pipe_t *p = r->pipe;
  while (p->sends && p->recvs) { /* match FIFO heads */
    mk_req_t *s = p->sends, *d = p->recvs;
    if (s->size > d->size) {
      rc = STRAND_INTERNAL_ERROR;
      break;
    }
    if (s->size) memcpy(d->buf, s->buf, s->size);
    d->size = s->size;
    s->done = d->done = true;
    p->sends = s->next;
    p->recvs = d->next;
  }
  *done = r->done;
  if (r->done) {
    if (sizes) *sizes = (int)r->size;
    free(r);
  }
  pthread_mutex_unlock(&mk_lock);
  return rc;
}
static void mk_untrack_comm(mk_comm_t *c);
static void mk_free_done_of(mk_comm_t *c);
/* A comm closed with requests still posted (a failed collective leaves some) takes them with it,
 * as a real net cancels them: the peer must never copy into or out of the closer's freed buffers,
 * and the request tracker must not keep their addresses (a later request at the same address
 * would be counted against this freed comm). Requests already matched but never tested again
 * (a failed comm stops testing) are freed too, as a real net frees its in-flight requests. */
static strand_result_t mk_close(void *comm) {
  mk_comm_t *c = comm;
  pthread_mutex_lock(&mk_lock);
  mk_free_done_of(c);
  mk_req_t **mine = c->is_send ? &c->pipe->sends : &c->pipe->recvs;
  for (mk_req_t *r = *mine, *n; r; r = n) n = r->next, free(r);
  *mine = NULL;
  mk_untrack_comm(c);
  bool last = --c->pipe->refs == 0;
  pthread_mutex_unlock(&mk_lock);
  if (last) {
    for (mk_req_t *r = c->pipe->sends, *n; r; r = n) n = r->next, free(r);
    for (mk_req_t *r = c->pipe->recvs, *n; r; r = n) n = r->next, free(r);
    free(c->pipe);
  }
  free(c);
  return STRAND_SUCCESS;
}
static strand_result_t mk_close_listen(void *lc) {
  free(lc);
  return STRAND_SUCCESS;
}

/* Request -> comm, to release the comm's slot at completion. */
typedef struct {
  void *req;
  mk_comm_t *comm;
} mk_track_t;
static mk_track_t mk_tracks[4096];
static void mk_untrack_comm(mk_comm_t *c) { /* under mk_lock */
  for (int i = 0; i < 4096; i++)
    if (mk_tracks[i].req && mk_tracks[i].comm == c) mk_tracks[i].req = NULL;
}
static void mk_free_done_of(mk_comm_t *c) { /* under mk_lock; matched requests are off the FIFOs */
  for (int i = 0; i < 4096; i++) {
    mk_req_t *r = mk_tracks[i].req;
    if (r && mk_tracks[i].comm == c && r->done) {
      free(r);
      mk_tracks[i].req = NULL;
    }
  }
}
static strand_result_t mk_isend_t(void *sc, void *data, size_t size, int tag, void *mh, void *ph, void **req) {
  strand_result_t rc = mk_isend(sc, data, size, tag, mh, ph, req);
  if (rc == STRAND_SUCCESS && *req) {
    pthread_mutex_lock(&mk_lock);
    for (int i = 0; i < 4096; i++)
      if (!mk_tracks[i].req) {
        mk_tracks[i] = (mk_track_t){*req, sc};
        break;
      }
    pthread_mutex_unlock(&mk_lock);
  }
  return rc;
}
static strand_result_t mk_irecv_t(void *rc_, int n, void **data, size_t *sizes, int *tags, void **mhs, void **ph,
                                  void **req) {
  strand_result_t rc = mk_irecv(rc_, n, data, sizes, tags, mhs, ph, req);
  if (rc == STRAND_SUCCESS && *req) {
    pthread_mutex_lock(&mk_lock);
    for (int i = 0; i < 4096; i++)
      if (!mk_tracks[i].req) {
        mk_tracks[i] = (mk_track_t){*req, rc_};
        break;
      }
    pthread_mutex_unlock(&mk_lock);
  }
  return rc;
}
static strand_result_t mk_test_counted(void *req, int *done, int *sizes) {
  strand_result_t rc = mk_test(req, done, sizes);
  if (rc == STRAND_SUCCESS && *done) {
    pthread_mutex_lock(&mk_lock);
    for (int i = 0; i < 4096; i++)
      if (mk_tracks[i].req == req) {
        mk_tracks[i].comm->outstanding--;
        mk_tracks[i].req = NULL;
        break;
      }
    pthread_mutex_unlock(&mk_lock);
  }
  return rc;
}

static const strand_net_t mock_net = {
    .name = "mock",
    .init = mk_init,
    .devices = mk_devices,
    .getProperties = mk_props,
    .listen = mk_listen,
    .connect = mk_connect,
    .accept = mk_accept,
    .regMr = mk_reg,
    .deregMr = mk_dereg,
    .isend = mk_isend_t,
    .irecv = mk_irecv_t,
    .test = mk_test_counted,
    .closeSend = mk_close,
    .closeRecv = mk_close,
    .closeListen = mk_close_listen,
    .finalize = mk_finalize,
};

/* ------------------------------------------------------------------------------ the ranks */

static const strand_collnet_t *T;
static pthread_barrier_t g_bar;
static char g_handles[8][STRAND_NET_HANDLE_MAXSIZE];
static int g_nranks;

static double val(int rank, size_t i, int salt) { return (double)((int)((rank * 7 + i * 13 + (size_t)salt * 5) % 9) - 4); }

static void gen(strand_datatype_t t, int rank, void *buf, size_t n, int salt) {
  for (size_t i = 0; i < n; i++) strand_datatype_store(t, buf, i, val(rank, i, salt));
}

static void expect(strand_datatype_t t, strand_redop_t op, void *out, size_t n, size_t first, int salt) {
  size_t es = strand_datatype_size(t);
  char *tmp = malloc((first + n) * es + 1);
  char *all = malloc((first + n) * es + 1);
  gen(t, 0, all, first + n, salt);
  for (int r = 1; r < g_nranks; r++) {
    gen(t, r, tmp, first + n, salt);
    strand_reduce(t, op, all, tmp, first + n);
  }
  memcpy(out, all + first * es, n * es);
  free(tmp);
  free(all);
}

static void wait_req(void *req, const char *what, int rank) {
  for (long spins = 0;; spins++) {
    int done = 0, size = -1;
    strand_result_t rc = T->test(req, &done, spins & 1 ? NULL : &size);
    if (rc != STRAND_SUCCESS || done) {
      CHECK(rc == STRAND_SUCCESS, "rank %d: test(%s) returned %d", rank, what, (int)rc);
      return;
    }
    if (spins > 200000000L) {
      CHECK(0, "rank %d: %s never completed", rank, what);
      return;
    }
  }
}

/* Returns the seconds from the first iallreduce try to test() reporting done (0 on failure). */
static double allreduce(void *cc, void *smh, void *rmh, char *send, char *recv, char *exp, int rank,
                        strand_datatype_t t, strand_redop_t op, size_t n, int salt, bool in_place) {
  size_t es = strand_datatype_size(t);
  gen(t, rank, send, n, salt);
  char *dst = in_place ? send : recv;
  if (!in_place) memset(recv, 0xCD, n * es + 1);
  void *req = NULL;
  strand_result_t rc;
  double t0 = test_now_s();
  do rc = T->iallreduce(cc, send, dst, n, t, op, smh, rmh, &req);
  while (rc == STRAND_SUCCESS && !req);
  CHECK(rc == STRAND_SUCCESS, "rank %d: iallreduce returned %d", rank, (int)rc);
  if (rc != STRAND_SUCCESS) return 0;
  wait_req(req, "iallreduce", rank);
  double took = test_now_s() - t0;
  expect(t, op, exp, n, 0, salt);
  CHECK(memcmp(exp, dst, n * es) == 0, "rank %d/%d: iallreduce(%s, %s, %zu%s) differs", rank, g_nranks,
        strand_datatype_name(t), strand_redop_name(op), n, in_place ? ", in place" : "");
  if (!in_place) CHECK((unsigned char)recv[n * es] == 0xCD, "rank %d: iallreduce wrote past the end", rank);
  return took;
}

/* NCCL 2.28's CollNetChain proxy, as the stub sees it (transport/coll_net.cc sendProxyProgress /
 * calcRegionOffset; enqueue.cc chunk size), replayed with the e2e driver's data (issue 12: a
 * 4-node float prod of 262147 elements came back with one rank's contribution stale):
 *   - ONE host region of 2 x NCCL_STEPS slots of nChannels x 512 KiB, registered twice (the send
 *     and the recv connector's handles); call k reads slot k%8 of the send half and writes slot
 *     k%8 of the recv half;
 *   - 2 channels of 64 KiB chunks (the chunk size NCCL picks for ~1 MiB on one GPU per node), one
 *     call per step covering both channels: count = 2 x 64 KiB / 4 always, so the last step
 *     (12 valid bytes) carries stale padding from step 0 of the same slot;
 *   - up to 8 calls in flight, a NULL request retried, the oldest tested; a slot is refilled only
 *     after its call completed (NCCL's credit), the result read back only once test says done.
 * Every (op) result must equal the rank-order reduction of every rank's data bit for bit. */
#define NC_STEPS 8
#define NC_CHANNELS 2
#define NC_CHUNK ((size_t)64 << 10)
#define NC_SLOT ((size_t)NC_CHANNELS * (512u << 10))

static double nc_val(int rank, size_t i, int salt) { return (double)((i * 7 + (size_t)rank * 3 + (size_t)salt) % 4 + 1); }

static void nccl_chain_allreduce(void *cc, int rank, strand_redop_t op, size_t count, int salt) {
  size_t bytes = 2 * NC_STEPS * NC_SLOT, total = count * 4, per_call = NC_CHANNELS * NC_CHUNK;
  size_t ncalls = (total + per_call - 1) / per_call;
  char *region = malloc(bytes);
  float *in = malloc(total), *out = malloc(total), *want = malloc(total);
  void *smh = NULL, *rmh = NULL;
  CHECK(region && in && out && want, "out of memory");
  if (!region || !in || !out || !want) goto out;
  memset(region, 0xFF, bytes); /* stale padding: NaN in every float */
  CHECK(T->regMr(cc, region, bytes, STRAND_PTR_HOST, &smh) == STRAND_SUCCESS &&
        T->regMr(cc, region, bytes, STRAND_PTR_HOST, &rmh) == STRAND_SUCCESS,
        "regMr of NCCL's shared region, twice");
  for (size_t i = 0; i < count; i++) {
    in[i] = (float)nc_val(rank, i, salt);
    double acc = nc_val(0, i, salt);
    for (int r = 1; r < g_nranks; r++) {
      double v = nc_val(r, i, salt);
      acc = op == STRAND_SUM ? acc + v : op == STRAND_PROD ? acc * v : op == STRAND_MAX ? (v > acc ? v : acc) : (v < acc ? v : acc);
    }
    want[i] = (float)acc;
  }
  memset(out, 0xCD, total);
  void *reqs[NC_STEPS] = {0};
  size_t issued = 0, done = 0;
  bool staged = false;
  for (long spins = 0; done < ncalls; spins++) {
    if (issued < ncalls && issued < done + NC_STEPS) {
      size_t k = issued, slot = k % NC_STEPS;
      char *send = region + slot * NC_SLOT, *recv = region + (NC_STEPS + slot) * NC_SLOT;
      if (!staged) { /* the "GPU" writes step k's valid bytes once; the padding stays stale */
        size_t off = k * per_call, len = total - off < per_call ? total - off : per_call;
        memcpy(send, (char *)in + off, len);
        staged = true;
      }
      void *req = NULL;
      strand_result_t rc = T->iallreduce(cc, send, recv, per_call / 4, STRAND_FLOAT32, op, smh, rmh, &req);
      CHECK(rc == STRAND_SUCCESS, "rank %d: iallreduce step %zu returned %d", rank, k, (int)rc);
      if (rc != STRAND_SUCCESS) break;
      if (req) { /* NULL: the collComm is full, the same call is retried later */
        reqs[slot] = req;
        issued++;
        staged = false;
      }
    }
    if (done < issued) {
      size_t slot = done % NC_STEPS;
      int d = 0;
      strand_result_t rc = T->test(reqs[slot], &d, NULL);
      CHECK(rc == STRAND_SUCCESS, "rank %d: test(step %zu) returned %d", rank, done, (int)rc);
      if (rc != STRAND_SUCCESS) break;
      if (d) {
        size_t off = done * per_call, len = total - off < per_call ? total - off : per_call;
        memcpy((char *)out + off, region + (NC_STEPS + slot) * NC_SLOT, len);
        reqs[slot] = NULL;
        done++;
      }
    }
    if (spins > 400000000L) {
      CHECK(0, "rank %d: NCCL-shaped all-reduce stuck at %zu of %zu steps done", rank, done, ncalls);
      break;
    }
  }
  if (done == ncalls) {
    size_t bad = 0, first = 0;
    for (size_t i = 0; i < count; i++)
      if (memcmp(&out[i], &want[i], 4) != 0 && bad++ == 0) first = i;
    CHECK(bad == 0, "rank %d/%d: NCCL-shaped iallreduce(float32, %s, %zu) wrong in %zu elements, first at %zu: "
          "got %g expected %g", rank, g_nranks, strand_redop_name(op), count, bad, first, (double)out[first],
          (double)want[first]);
  }
  if (smh) T->deregMr(cc, smh);
  if (rmh) T->deregMr(cc, rmh);
out:
  free(region);
  free(in);
  free(out);
  free(want);
}

static void *rank_main(void *arg) {
  int rank = (int)(intptr_t)arg, n = g_nranks;
  void *ctx = NULL, *lc = NULL, *cc = NULL;
  CHECK(T->init(&ctx, 77, NULL) == STRAND_SUCCESS, "init");
  char h[STRAND_NET_HANDLE_MAXSIZE] = {0};
  CHECK(T->listen(ctx, 0, h, &lc) == STRAND_SUCCESS, "listen");
  memcpy(g_handles[rank], h, sizeof h);
  pthread_barrier_wait(&g_bar);
  void *hp[8];
  for (int i = 0; i < n; i++) hp[i] = g_handles[i];
  CHECK(T->connect(hp, n, rank, lc, &cc) == STRAND_SUCCESS && cc, "rank %d: connect", rank);
  CHECK(T->closeListen(lc) == STRAND_SUCCESS, "closeListen");
  if (!cc) return NULL;

  size_t big = 700001; /* floats: several chunks per call, an odd tail */
  size_t bytes = big * 8 * (size_t)n + 64;
  char *send = malloc(bytes), *recv = malloc(bytes), *exp = malloc(bytes);
  void *smh = NULL, *rmh = NULL, *dup = NULL, *gpu = (void *)1;
  CHECK(T->regMr(cc, send, bytes, STRAND_PTR_HOST, &smh) == STRAND_SUCCESS, "regMr");
  CHECK(T->regMr(cc, send, bytes, STRAND_PTR_HOST, &dup) == STRAND_SUCCESS, "regMr of the same range again");
  CHECK(T->regMr(cc, recv, bytes, STRAND_PTR_HOST, &rmh) == STRAND_SUCCESS, "regMr");
  CHECK(T->regMr(cc, recv, bytes, STRAND_PTR_CUDA, &gpu) != STRAND_SUCCESS && gpu == NULL,
        "regMr of CUDA memory must be refused (host-only CollNet)");
  CHECK(T->deregMr(cc, dup) == STRAND_SUCCESS, "deregMr");
  CHECK(T->deregMr(cc, dup) != STRAND_SUCCESS, "deregMr of a stale handle must be refused");

  /* The e2e driver's loop: float x {sum, prod, max, min} x {1, 1000, 262147}, salt + 1 each. */
  {
    const strand_redop_t ops[] = {STRAND_SUM, STRAND_PROD, STRAND_MAX, STRAND_MIN};
    const size_t nccl_counts[] = {1, 1000, 262147};
    int nsalt = 0;
    for (int oi = 0; oi < 4; oi++)
      for (int ci = 0; ci < 3; ci++) nccl_chain_allreduce(cc, rank, ops[oi], nccl_counts[ci], ++nsalt);
  }

  int salt = 1;
  const size_t counts[] = {0, 1, 7, 4099, big};
  for (size_t ci = 0; ci < 5; ci++) allreduce(cc, smh, rmh, send, recv, exp, rank, STRAND_FLOAT32, STRAND_SUM, counts[ci], salt++, false);
  allreduce(cc, smh, rmh, send, recv, exp, rank, STRAND_FLOAT32, STRAND_SUM, big, salt++, true);
  /* in place with the send buffer's registration as the receive's too: at 2 ranks the peer's copy
   * must not land on this rank's own before it is sent and reduced (cs_oneshot_landing) */
  allreduce(cc, smh, smh, send, recv, exp, rank, STRAND_FLOAT32, STRAND_SUM, big, salt++, true);
  allreduce(cc, smh, rmh, send, recv, exp, rank, STRAND_INT8, STRAND_PROD, 100003, salt++, false);
  allreduce(cc, smh, rmh, send, recv, exp, rank, STRAND_FLOAT8_E4M3, STRAND_MAX, 65537, salt++, false);
  allreduce(cc, smh, rmh, send, recv, exp, rank, STRAND_BFLOAT16, STRAND_MIN, 333333, salt++, false);
  allreduce(cc, smh, rmh, send, recv, exp, rank, STRAND_FLOAT64, STRAND_SUM, 200001, salt++, false);
  /* Buffers without a registration the net holds go through the arena (staged), either side alone
   * or both; the registered ones above go out of and land in user memory. */
  allreduce(cc, NULL, NULL, send, recv, exp, rank, STRAND_FLOAT32, STRAND_SUM, 300001, salt++, false);
  allreduce(cc, NULL, NULL, send, recv, exp, rank, STRAND_FLOAT32, STRAND_SUM, 300001, salt++, true);
  allreduce(cc, smh, NULL, send, recv, exp, rank, STRAND_FLOAT32, STRAND_SUM, 4099, salt++, false);
  allreduce(cc, NULL, rmh, send, recv, exp, rank, STRAND_INT32, STRAND_MAX, 300001, salt++, false);

  /* Several in flight (disjoint buffers), completed out of order. */
  {
    enum { K = 5 };
    size_t cnt = 50000;
    void *reqs[K];
    int s0 = salt;
    for (int k = 0; k < K; k++) {
      gen(STRAND_INT32, rank, send + (size_t)k * cnt * 4, cnt, salt++);
      reqs[k] = NULL;
      strand_result_t rc;
      do rc = T->iallreduce(cc, send + (size_t)k * cnt * 4, recv + (size_t)k * cnt * 4, cnt, STRAND_INT32,
                            STRAND_SUM, smh, rmh, &reqs[k]);
      while (rc == STRAND_SUCCESS && !reqs[k]);
      CHECK(rc == STRAND_SUCCESS, "iallreduce in flight #%d", k);
    }
    for (int k = K - 1; k >= 0; k--) wait_req(reqs[k], "iallreduce (one of several in flight)", rank);
    for (int k = 0; k < K; k++) {
      expect(STRAND_INT32, STRAND_SUM, exp, cnt, 0, s0 + k);
      CHECK(memcmp(exp, recv + (size_t)k * cnt * 4, cnt * 4) == 0, "rank %d: in-flight allreduce #%d differs", rank, k);
    }
  }

  /* All-gather: bpr bytes per rank, three windows, the receive side in two SGE parts. */
  {
    size_t bpr = 300007, total = bpr * (size_t)n;
    for (size_t i = 0; i < bpr; i++) send[i] = (char)(rank * 31 + i * 7);
    memset(recv, 0xCD, total);
    size_t cuts[4] = {0, total / 3, total / 3 + total / 5 + 1, total};
    for (int w = 0; w < 3; w++) {
      size_t wo = cuts[w], wb = cuts[w + 1] - cuts[w], myoff = bpr * (size_t)rank;
      strand_sge_t parts[2] = {{rmh, recv + wo, wb / 2}, {rmh, recv + wo + wb / 2, wb - wb / 2}};
      char *sd = send + (wo > myoff && wo < myoff + bpr ? wo - myoff : 0);
      void *req = NULL;
      strand_result_t rc;
      do rc = T->iallgather(cc, sd, 2, parts, bpr, wo, wb, smh, &req);
      while (rc == STRAND_SUCCESS && !req);
      CHECK(rc == STRAND_SUCCESS, "iallgather window %d", w);
      if (rc == STRAND_SUCCESS) wait_req(req, "iallgather", rank);
    }
    for (int r = 0; r < n; r++)
      for (size_t i = 0; i < bpr; i++)
        if (recv[(size_t)r * bpr + i] != (char)(r * 31 + i * 7)) {
          CHECK(0, "rank %d: iallgather block of rank %d differs at %zu", rank, r, i);
          break;
        }
  }

  /* Reduce-scatter: float32 sum, windows on element boundaries, the send side in two parts. */
  {
    size_t cpr = 250003, bpr = cpr * 4, total = bpr * (size_t)n, myoff = bpr * (size_t)rank;
    gen(STRAND_FLOAT32, rank, send, cpr * (size_t)n, salt);
    memset(recv, 0xCD, bpr);
    size_t cuts[4] = {0, (total / 3) & ~(size_t)3, (total / 3 + total / 4) & ~(size_t)3, total};
    for (int w = 0; w < 3; w++) {
      size_t wo = cuts[w], wb = cuts[w + 1] - cuts[w];
      size_t half = (wb / 2) & ~(size_t)3;
      strand_sge_t parts[2] = {{smh, send + wo, half}, {smh, send + wo + half, wb - half}};
      char *rd = recv + (wo > myoff && wo < myoff + bpr ? wo - myoff : 0);
      void *req = NULL;
      strand_result_t rc;
      do rc = T->ireducescatter(cc, 2, parts, rd, bpr, wo, wb, STRAND_FLOAT32, STRAND_SUM, rmh, &req);
      while (rc == STRAND_SUCCESS && !req);
      CHECK(rc == STRAND_SUCCESS, "ireducescatter window %d", w);
      if (rc == STRAND_SUCCESS) wait_req(req, "ireducescatter", rank);
    }
    expect(STRAND_FLOAT32, STRAND_SUM, exp, cpr, cpr * (size_t)rank, salt++);
    CHECK(memcmp(exp, recv, bpr) == 0, "rank %d/%d: ireducescatter differs", rank, n);
  }

  /* Bad arguments are refused, never crash. */
  void *req = (void *)1;
  CHECK(T->iallreduce(cc, send, recv, 4, STRAND_FLOAT32, STRAND_AVG, smh, rmh, &req) != STRAND_SUCCESS,
        "avg must be refused (reduceSupport says 0)");
  int d = 0;
  CHECK(T->test(exp, &d, NULL) != STRAND_SUCCESS, "test of a foreign pointer must fail");
  req = (void *)1;
  CHECK(T->iflush(cc, recv, 16, rmh, &req) == STRAND_SUCCESS && req == NULL, "iflush: NULL request");

  CHECK(T->deregMr(cc, smh) == STRAND_SUCCESS && T->deregMr(cc, rmh) == STRAND_SUCCESS, "deregMr");
  pthread_barrier_wait(&g_bar); /* peers may still be draining their last sends */
  CHECK(T->closeColl(cc) == STRAND_SUCCESS, "closeColl");
  CHECK(T->finalize(ctx) == STRAND_SUCCESS, "finalize");
  free(send);
  free(recv);
  free(exp);
  return NULL;
}

/* ------------------------------------------------------------------------- mismatched calls */

/* What the tests read back of the stub's log: its WARNs (a case checks they name both sides), and
 * rank 0's two closing INFO lines in a two-rank group (its stats at closeColl). */
static pthread_mutex_t g_log_lock = PTHREAD_MUTEX_INITIALIZER;
static char g_warns[8192];
static char g_closing[4096];
static void capture_logger(strand_log_level_t level, unsigned long flags, const char *file, int line,
                           const char *fmt, ...) {
  (void)flags, (void)file, (void)line;
  if (level != STRAND_LOG_WARN && level != STRAND_LOG_INFO) return;
  char msg[1200];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  char *into = level == STRAND_LOG_WARN ? g_warns : g_closing;
  size_t room = level == STRAND_LOG_WARN ? sizeof g_warns : sizeof g_closing;
  if (level == STRAND_LOG_INFO && !strstr(msg, "rank 0/2 closing")) return;
  pthread_mutex_lock(&g_log_lock);
  size_t used = strlen(into);
  snprintf(into + used, room - used, "%s\n", msg);
  pthread_mutex_unlock(&g_log_lock);
}

/* One case: the last rank calls something else than the others. Kinds: 0 allreduce, 1 reduce-scatter
 * (count elements per rank), 2 all-gather (count bytes per rank); each over the whole window. */
typedef struct {
  const char *name;
  size_t count[2]; /* [0]: the other ranks, [1]: the last rank */
  strand_datatype_t type[2];
  strand_redop_t op[2];
  int kind[2];
  const char *warn_has[2]; /* what the WARNs must name: both sides */
} mm_case_t;

static const mm_case_t mm_cases[] = {
    {"count 1Mi vs 512Ki floats", {1u << 20, 1u << 19}, {STRAND_FLOAT32, STRAND_FLOAT32}, {STRAND_SUM, STRAND_SUM},
     {0, 0}, {"count 1048576, float32, sum", "count 524288, float32, sum"}},
    {"float32 vs float64", {1u << 20, 1u << 20}, {STRAND_FLOAT32, STRAND_FLOAT64}, {STRAND_SUM, STRAND_SUM},
     {0, 0}, {"float32", "float64"}},
    {"sum vs max", {4099, 4099}, {STRAND_FLOAT32, STRAND_FLOAT32}, {STRAND_SUM, STRAND_MAX}, {0, 0},
     {"float32, sum", "float32, max"}},
    {"count 0 vs 1", {0, 1}, {STRAND_INT32, STRAND_INT32}, {STRAND_SUM, STRAND_SUM}, {0, 0},
     {"count 0,", "count 1,"}},
    {"allreduce vs reducescatter", {3000, 3000}, {STRAND_FLOAT32, STRAND_FLOAT32}, {STRAND_SUM, STRAND_SUM}, {0, 1},
     {"iallreduce(count 3000", "ireducescatter(bytesPerRank"}},
    {"reducescatter sum vs max", {5000, 5000}, {STRAND_FLOAT32, STRAND_FLOAT32}, {STRAND_SUM, STRAND_MAX}, {1, 1},
     {"bytesPerRank 20000, window 0+", "float32, max)"}},
    {"allgather 4096 vs 8192 bytes per rank", {4096, 8192}, {STRAND_UINT8, STRAND_UINT8}, {STRAND_SUM, STRAND_SUM},
     {2, 2}, {"iallgather(bytesPerRank 4096,", "iallgather(bytesPerRank 8192,"}},
};
static int g_case;

static strand_result_t mm_post(void *cc, int kind, char *send, char *recv, size_t count, strand_datatype_t t,
                               strand_redop_t op, void *smh, void *rmh, void **req) {
  if (kind == 0) return T->iallreduce(cc, send, recv, count, t, op, smh, rmh, req);
  size_t bpr = count * strand_datatype_size(t), total = bpr * (size_t)g_nranks;
  if (kind == 2) {
    strand_sge_t part = {rmh, recv, total};
    return T->iallgather(cc, send, 1, &part, bpr, 0, total, smh, req);
  }
  strand_sge_t part = {smh, send, total};
  return T->ireducescatter(cc, 1, &part, recv, bpr, 0, total, t, op, rmh, req);
}

/* After a collective failed on purpose: once every rank is past its checks, the failed comm
 * still deregisters, closes and finalizes cleanly. */
static void close_failed_comm(void *ctx, void *cc, void *smh, void *rmh, char *send, char *recv) {
  pthread_barrier_wait(&g_bar);
  T->deregMr(cc, smh);
  T->deregMr(cc, rmh);
  CHECK(T->closeColl(cc) == STRAND_SUCCESS, "closeColl of a failed comm");
  CHECK(T->finalize(ctx) == STRAND_SUCCESS, "finalize");
  free(send);
  free(recv);
}

static void *mismatch_main(void *arg) {
  int rank = (int)(intptr_t)arg, n = g_nranks, side = rank == n - 1;
  const mm_case_t *mc = &mm_cases[g_case];
  void *ctx = NULL, *lc = NULL, *cc = NULL;
  CHECK(T->init(&ctx, 78, capture_logger) == STRAND_SUCCESS, "init");
  char h[STRAND_NET_HANDLE_MAXSIZE] = {0};
  CHECK(T->listen(ctx, 0, h, &lc) == STRAND_SUCCESS, "listen");
  memcpy(g_handles[rank], h, sizeof h);
  pthread_barrier_wait(&g_bar);
  void *hp[8];
  for (int i = 0; i < n; i++) hp[i] = g_handles[i];
  CHECK(T->connect(hp, n, rank, lc, &cc) == STRAND_SUCCESS && cc, "rank %d: connect", rank);
  T->closeListen(lc);
  if (!cc) return NULL;
  size_t bytes = (size_t)1 << 23; /* 1 Mi float64, the largest case */
  char *send = calloc(1, bytes), *recv = calloc(1, bytes);
  void *smh = NULL, *rmh = NULL;
  CHECK(T->regMr(cc, send, bytes, STRAND_PTR_HOST, &smh) == STRAND_SUCCESS, "regMr");
  CHECK(T->regMr(cc, recv, bytes, STRAND_PTR_HOST, &rmh) == STRAND_SUCCESS, "regMr");
  /* a matching collective first: the mismatch is not the comm's first call */
  void *req = NULL;
  strand_result_t rc;
  do rc = T->iallreduce(cc, send, recv, 100, STRAND_FLOAT32, STRAND_SUM, smh, rmh, &req);
  while (rc == STRAND_SUCCESS && !req);
  if (rc == STRAND_SUCCESS) wait_req(req, "the matching iallreduce before the mismatch", rank);
  req = NULL;
  do rc = mm_post(cc, mc->kind[side], send, recv, mc->count[side], mc->type[side], mc->op[side], smh, rmh, &req);
  while (rc == STRAND_SUCCESS && !req);
  CHECK(rc == STRAND_SUCCESS, "rank %d: %s: posting returned %d", rank, mc->name, (int)rc);
  int done = 0;
  long spins = 0;
  if (rc == STRAND_SUCCESS) /* the bound: far above the few polls detection takes */
    for (; rc == STRAND_SUCCESS && !done && spins < 50000000L; spins++) rc = T->test(req, &done, NULL);
  CHECK(!done, "rank %d/%d: %s: the mismatched collective reported done (wrong data)", rank, n, mc->name);
  CHECK(done || rc == STRAND_INVALID_USAGE, "rank %d/%d: %s: test returned %d after %ld polls (want "
        "STRAND_INVALID_USAGE %d; 0 = never completed: a hang)", rank, n, mc->name, (int)rc, spins,
        (int)STRAND_INVALID_USAGE);
  /* later collectives on the failed comm fail at once, with the same code */
  req = (void *)1;
  rc = T->iallreduce(cc, send, recv, 100, STRAND_FLOAT32, STRAND_SUM, smh, rmh, &req);
  CHECK(rc == STRAND_INVALID_USAGE && req == NULL, "rank %d: %s: a later iallreduce returned %d, request %p",
        rank, mc->name, (int)rc, req);
  close_failed_comm(ctx, cc, smh, rmh, send, recv);
  return NULL;
}

/* Set-up shared by the two-rank mismatch cases: init and listen, swap handles, and rank 1 waits
 * until rank 0's connect has switched the variable under test (mk_connect), so it reads the other value. */
static void mismatch_listen(int rank, int init_arg, void **ctx, void **lc, void *hp[2]) {
  CHECK(T->init(ctx, init_arg, capture_logger) == STRAND_SUCCESS, "init");
  char h[STRAND_NET_HANDLE_MAXSIZE] = {0};
  CHECK(T->listen(*ctx, 0, h, lc) == STRAND_SUCCESS, "listen");
  memcpy(g_handles[rank], h, sizeof h);
  pthread_barrier_wait(&g_bar);
  hp[0] = g_handles[0];
  hp[1] = g_handles[1];
  if (rank == 1) {
    pthread_mutex_lock(&g_chunk_lock);
    while (!g_chunk_switched) pthread_cond_wait(&g_chunk_cond, &g_chunk_lock);
    pthread_mutex_unlock(&g_chunk_lock);
  }
}

/* Ranks that cut chunks differently (STRAND_COLLNET_CHUNK_KB 64 on rank 0, 128 on rank 1): the first
 * all-reduce fails on both, neither reports it done, nothing hangs. */
static void *chunk_main(void *arg) {
  int rank = (int)(intptr_t)arg;
  void *ctx = NULL, *lc = NULL, *cc = NULL, *hp[2];
  mismatch_listen(rank, 78, &ctx, &lc, hp);
  CHECK(T->connect(hp, 2, rank, lc, &cc) == STRAND_SUCCESS && cc, "rank %d: connect", rank);
  T->closeListen(lc);
  if (!cc) return NULL;
  size_t bytes = 1u << 18;
  char *send = calloc(1, bytes), *recv = calloc(1, bytes);
  void *smh = NULL, *rmh = NULL, *req = NULL;
  CHECK(T->regMr(cc, send, bytes, STRAND_PTR_HOST, &smh) == STRAND_SUCCESS, "regMr");
  CHECK(T->regMr(cc, recv, bytes, STRAND_PTR_HOST, &rmh) == STRAND_SUCCESS, "regMr");
  strand_result_t rc;
  do rc = T->iallreduce(cc, send, recv, bytes / 4, STRAND_FLOAT32, STRAND_SUM, smh, rmh, &req);
  while (rc == STRAND_SUCCESS && !req);
  int done = 0;
  long spins = 0;
  for (; rc == STRAND_SUCCESS && !done && spins < 50000000L; spins++) rc = T->test(req, &done, NULL);
  CHECK(!done && rc != STRAND_SUCCESS, "rank %d: %s differs between the ranks: done %d, test returned %d "
        "after %ld polls (want a failure; 0 = a hang)", rank, g_chunk_var, done, (int)rc, spins);
  close_failed_comm(ctx, cc, smh, rmh, send, recv);
  return NULL;
}

/* Ranks that would dial different numbers of comms (STRAND_COLLNET_STREAMS 2 vs 1; or
 * STRAND_COLLNET_ONESHOT_KB, which decides whether a stream has an all-gather lane): connect fails
 * on both, within its bound, with a WARN naming the variable (disagree checks the WARN). */
static void *connect_refused_main(void *arg) {
  int rank = (int)(intptr_t)arg;
  void *ctx = NULL, *lc = NULL, *cc = NULL, *hp[2];
  mismatch_listen(rank, 79, &ctx, &lc, hp);
  strand_result_t rc = T->connect(hp, 2, rank, lc, &cc);
  CHECK(rc == STRAND_INVALID_USAGE && !cc, "rank %d: %s differs: connect returned %d, collComm %p "
        "(want ncclInvalidUsage and none)", rank, g_chunk_var, (int)rc, cc);
  T->closeListen(lc);
  if (cc) T->closeColl(cc);
  T->finalize(ctx);
  return NULL;
}

/* ------------------------------------------------------------ where a call's time goes */

static void run_ranks(int nranks, void *(*fn)(void *));


/* Two ranks' set-up: init with the given logger, listen, swap handles, connect, close the listener.
 * Returns the collComm (NULL after a failed CHECK). */
static void *pair_connect(int rank, int init_arg, strand_logger_t logger, void **ctx) {
  void *lc = NULL, *cc = NULL, *hp[2];
  CHECK(T->init(ctx, init_arg, logger) == STRAND_SUCCESS, "init");
  char h[STRAND_NET_HANDLE_MAXSIZE] = {0};
  CHECK(T->listen(*ctx, 0, h, &lc) == STRAND_SUCCESS, "listen");
  memcpy(g_handles[rank], h, sizeof h);
  pthread_barrier_wait(&g_bar);
  hp[0] = g_handles[0];
  hp[1] = g_handles[1];
  CHECK(T->connect(hp, 2, rank, lc, &cc) == STRAND_SUCCESS && cc, "rank %d: connect", rank);
  T->closeListen(lc);
  return cc;
}

/* Connect and close, nothing else: for counting the comms a collComm dials. */
static void *connect_only_main(void *arg) {
  int rank = (int)(intptr_t)arg;
  void *ctx = NULL, *cc = pair_connect(rank, 81, capture_logger, &ctx);
  if (cc) T->closeColl(cc);
  T->finalize(ctx);
  return NULL;
}

/* The send comms two ranks dial between them with the current settings. */
static int comms_dialled_by_two(void) {
  __atomic_store_n(&g_mk_connects, 0, __ATOMIC_RELAXED);
  run_ranks(2, connect_only_main);
  return __atomic_load_n(&g_mk_connects, __ATOMIC_RELAXED);
}

#define GAP_CALLS 14
static double g_wall_s; /* rank 0's calls, issue to done, as this test sees them (summed) */
/* Only all-reduces on registered buffers, so the first closing line's mean call time (every
 * collective) is the all-reduce calls' and can be checked against the gaps line: 8 one-chunk calls
 * one at a time, 3 in flight at once, 3 of three chunks each. */
static void *gaps_main(void *arg) {
  int rank = (int)(intptr_t)arg;
  void *ctx = NULL, *cc = pair_connect(rank, 80, capture_logger, &ctx);
  if (!cc) return NULL;
  size_t one = 460000, big = 3 * 524288 - 1000; /* floats: one 2 MiB chunk; three */
  size_t bytes = 3 * big * 4;
  char *send = malloc(bytes), *recv = malloc(bytes), *exp = malloc(bytes);
  void *smh = NULL, *rmh = NULL;
  CHECK(T->regMr(cc, send, bytes, STRAND_PTR_HOST, &smh) == STRAND_SUCCESS, "regMr");
  CHECK(T->regMr(cc, recv, bytes, STRAND_PTR_HOST, &rmh) == STRAND_SUCCESS, "regMr");
  int salt = 1;
  double wall = 0, t0[3];
  for (int i = 0; i < 8; i++)
    wall += allreduce(cc, smh, rmh, send, recv, exp, rank, STRAND_FLOAT32, STRAND_SUM, one, salt++, false);
  void *reqs[3];
  for (int k = 0; k < 3; k++) {
    reqs[k] = NULL;
    t0[k] = test_now_s();
    strand_result_t rc;
    do rc = T->iallreduce(cc, send + (size_t)k * one * 4, recv + (size_t)k * one * 4, one, STRAND_FLOAT32,
                          STRAND_SUM, smh, rmh, &reqs[k]);
    while (rc == STRAND_SUCCESS && !reqs[k]);
    CHECK(rc == STRAND_SUCCESS, "iallreduce in flight #%d", k);
  }
  for (int k = 0; k < 3; k++) {
    wait_req(reqs[k], "iallreduce (one of 3 in flight)", rank);
    wall += test_now_s() - t0[k];
  }
  for (int i = 0; i < 3; i++)
    wall += allreduce(cc, smh, rmh, send, recv, exp, rank, STRAND_FLOAT32, STRAND_SUM, big, salt++, false);
  if (rank == 0) g_wall_s = wall;
  T->deregMr(cc, smh);
  T->deregMr(cc, rmh);
  pthread_barrier_wait(&g_bar);
  CHECK(T->closeColl(cc) == STRAND_SUCCESS, "closeColl");
  CHECK(T->finalize(ctx) == STRAND_SUCCESS, "finalize");
  free(send);
  free(recv);
  free(exp);
  return NULL;
}

/* The gaps line is filled, every gap is >= 0, the exchanges' splits lie inside their exchanges,
 * and the chain adds up to the mean call time of the first line, measured on its own clock reads
 * (loose: 5 % + 2 us, for the 0.1 us rounding of the printed numbers). */
/* `oneshot`: the calls run as one exchange per chunk, so the all-gather's gaps must be 0 (the
 * chain then ends reduction -> done). */
static void check_gaps(const char *what, bool oneshot) {
  g_closing[0] = 0;
  strand_logger_t before = strand_log_get_logger();
  strand_log_set_filter(STRAND_LOG_INFO, STRAND_SUBSYS_ALL);
  strand_log_init(capture_logger); /* the mock net's init keeps none: the stub's lines come here */
  run_ranks(2, gaps_main);
  strand_log_init(before);
  strand_log_reload_env();
  const char *l1 = strstr(g_closing, "collectives in flight on average, ");
  const char *l2 = strstr(g_closing, "call gaps: ");
  double call = -1, g[11], sum = -1, every = -1, most = -1, inside = -1;
  unsigned long long calls = 0;
  int got = l2 ? sscanf(l2, "call gaps: %llu all-reduce calls, mean us through each call's last chunk: "
                        "issue->RS posted %lf, RS %lf (first payload in %lf, last send done %lf), "
                        "->reduce start %lf, reduce %lf, ->AG posted %lf, AG %lf (first payload in %lf, "
                        "last send done %lf), ->done %lf; sum %lf; test() every %lf us (max %lf) while "
                        "calls in flight, %lf us inside each", &calls, &g[0], &g[1], &g[2], &g[3], &g[4],
                        &g[5], &g[6], &g[7], &g[8], &g[9], &g[10], &sum, &every, &most, &inside)
                 : 0;
  if (l1) sscanf(l1, "collectives in flight on average, %lf us each", &call);
  CHECK(got == 16 && call > 0, "%s: closing lines not found or not parsed (%d fields, call %.1f us):\n%s",
        what, got, call, g_closing);
  if (got != 16 || call <= 0) return;
  printf("%s, mean call %.1f us (%.1f us seen by the test): %s", what, call, g_wall_s / GAP_CALLS * 1e6, l2);
  CHECK(calls == GAP_CALLS, "%s: %llu all-reduce calls in the gaps line, want %d", what, calls, GAP_CALLS);
  double chain = 0;
  /* the chain: issue->RS, RS, ->reduce, reduce, ->AG, AG, ->done (indexes 0 1 4 5 6 7 10) */
  const int link[] = {0, 1, 4, 5, 6, 7, 10};
  for (int i = 0; i < 11; i++) CHECK(g[i] >= 0, "%s: gap %d is %.1f us (< 0):\n%s", what, i, g[i], g_closing);
  for (int i = 0; i < 7; i++) chain += g[link[i]];
  CHECK(chain > 0.95 * call - 2 && chain < 1.05 * call + 2, "%s: the gaps add up to %.1f us, the mean "
        "call took %.1f us:\n%s", what, chain, call, g_closing);
  /* and against this test's own clock around each call: inside it, and most of it (the test's
   * loop adds a few microseconds per call) */
  double wall = g_wall_s / GAP_CALLS * 1e6;
  CHECK(chain <= wall + 1 && chain > 0.5 * wall, "%s: the gaps add up to %.1f us, the test saw %.1f us "
        "per call from issue to done:\n%s", what, chain, wall, g_closing);
  CHECK(g[1] > 0 && (g[7] > 0) != oneshot && g[5] > 0, "%s: an exchange or the reduction took no time, "
        "or one exchange shows an all-gather:\n%s", what, g_closing);
  CHECK(!oneshot || (g[6] == 0 && g[8] == 0 && g[9] == 0), "%s: one exchange per chunk, yet the "
        "all-gather's gaps are not 0:\n%s", what, g_closing);
  CHECK(g[2] <= g[1] + 0.2 && g[3] <= g[1] + 0.2 && g[8] <= g[7] + 0.2 && g[9] <= g[7] + 0.2,
        "%s: an exchange's first payload / last send lies outside it:\n%s", what, g_closing);
  /* with a progress thread, test() only reads a flag: its time inside rounds to 0.0 us */
  const char *mode = getenv("STRAND_COLLNET_PROGRESS");
  bool threaded = mode && !strcmp(mode, "thread");
  CHECK(every > 0 && most >= every && (inside > 0 || (threaded && inside >= 0)), "%s: test() interval %.1f us (max %.1f), inside %.1f:\n%s",
        what, every, most, inside, g_closing);
  /* who moved the chunks: the progress thread's rounds, or test() calls that can move nothing */
  unsigned long long n1 = 0, n2 = 0;
  const char *mv = strstr(l1, "chunks in flight); ");
  bool parsed = mv && sscanf(mv, threaded ? "chunks in flight); progress thread: %llu rounds, %llu of them moved nothing"
                                          : "chunks in flight); %llu test() calls, %llu of them moved nothing",
                             &n1, &n2) == 2;
  CHECK(parsed && n1 > 0 && n2 <= n1, "%s: the closing line's %s counts are missing or wrong:\n%s", what,
        threaded ? "progress thread" : "test()", g_closing);
}

/* Close with collectives issued and never tested: closeColl returns (a progress thread, if any,
 * stops within its bound while the exchanges are under way) and the queued calls are freed. */
static void *close_inflight_main(void *arg) {
  int rank = (int)(intptr_t)arg;
  void *ctx = NULL, *cc = pair_connect(rank, 81, NULL, &ctx);
  if (!cc) return NULL;
  size_t count = 3 * 524288, bytes = 4 * count * 4; /* 4 calls of 3 chunks each */
  char *send = calloc(1, bytes), *recv = calloc(1, bytes);
  void *smh = NULL, *rmh = NULL;
  CHECK(T->regMr(cc, send, bytes, STRAND_PTR_HOST, &smh) == STRAND_SUCCESS, "regMr");
  CHECK(T->regMr(cc, recv, bytes, STRAND_PTR_HOST, &rmh) == STRAND_SUCCESS, "regMr");
  for (int k = 0; k < 4; k++) {
    void *req = NULL;
    strand_result_t rc;
    do rc = T->iallreduce(cc, send + (size_t)k * count * 4, recv + (size_t)k * count * 4, count,
                          STRAND_FLOAT32, STRAND_SUM, smh, rmh, &req);
    while (rc == STRAND_SUCCESS && !req);
    CHECK(rc == STRAND_SUCCESS, "rank %d: iallreduce #%d before the close", rank, k);
  }
  if (rank == 0) { /* one rank tests a little, so some exchanges are half done */
    void *req = NULL;
    while (T->iallreduce(cc, send, recv, 1, STRAND_FLOAT32, STRAND_SUM, smh, rmh, &req) == STRAND_SUCCESS && !req) {
    }
    int done = 0;
    for (int i = 0; i < 1000 && req && !done; i++) T->test(req, &done, NULL);
  }
  pthread_barrier_wait(&g_bar);
  double t0 = test_now_s();
  CHECK(T->closeColl(cc) == STRAND_SUCCESS, "rank %d: closeColl with collectives in flight", rank);
  double took = test_now_s() - t0;
  CHECK(took < 5.0, "rank %d: closeColl with collectives in flight took %.1f s", rank, took);
  CHECK(T->finalize(ctx) == STRAND_SUCCESS, "finalize");
  free(send);
  free(recv);
  return NULL;
}

/* ------------------------------------------------------- the progress thread when idle */

/* The task ids of this process's collComm progress threads (named strand-cs-prog). */
static int prog_tids(int *tids, int max) {
  int n = 0;
  DIR *d = opendir("/proc/self/task");
  if (!d) return 0;
  for (struct dirent *e; (e = readdir(d)) && n < max;) {
    if (e->d_name[0] == '.') continue;
    char path[300], comm[64] = "";
    snprintf(path, sizeof path, "/proc/self/task/%s/comm", e->d_name);
    FILE *f = fopen(path, "r");
    if (!f) continue; /* a thread that just ended */
    if (fgets(comm, sizeof comm, f) && !strncmp(comm, "strand-cs-prog", 14)) tids[n++] = atoi(e->d_name);
    fclose(f);
  }
  closedir(d);
  return n;
}

/* A task's CPU time (utime + stime, clock ticks) and context switches (voluntary and not: how
 * often it went to sleep or was woken); false when /proc cannot say. */
static bool task_usage(int tid, long *ticks, long *switches) {
  char path[64], line[1024];
  snprintf(path, sizeof path, "/proc/self/task/%d/stat", tid);
  FILE *f = fopen(path, "r");
  if (!f) return false;
  bool ok = fgets(line, sizeof line, f) != NULL;
  fclose(f);
  const char *p = ok ? strrchr(line, ')') : NULL; /* the name may hold spaces */
  unsigned long ut = 0, st = 0;
  if (!p || sscanf(p + 1, " %*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu %lu", &ut, &st) != 2)
    return false;
  *ticks = (long)(ut + st);
  snprintf(path, sizeof path, "/proc/self/task/%d/status", tid);
  if (!(f = fopen(path, "r"))) return false;
  long v = -1, nv = -1;
  while (fgets(line, sizeof line, f)) {
    sscanf(line, "voluntary_ctxt_switches: %ld", &v);
    sscanf(line, "nonvoluntary_ctxt_switches: %ld", &nv);
  }
  fclose(f);
  *switches = v + nv;
  return v >= 0 && nv >= 0;
}

static void sleep_s(double s) {
  struct timespec ts = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};
  while (nanosleep(&ts, &ts) != 0) {
  }
}

#define IDLE_S 0.3
/* Two ranks with a progress thread each (main sets STRAND_COLLNET_PROGRESS=thread), connected and
 * idle for IDLE_S: each thread sleeps instead of napping (a few wake-ups from its bounded wait,
 * next to no CPU), and a call issued after a long idle completes promptly, well inside the
 * sleep's 100 ms bound (so the issuing call woke the thread; 3 times, since a missing wake-up
 * would still be lucky now and then). */
static void *idle_main(void *arg) {
  int rank = (int)(intptr_t)arg;
  void *ctx = NULL, *cc = pair_connect(rank, 82, capture_logger, &ctx);
  if (!cc) return NULL;
  size_t n = 4096;
  char *send = malloc(n * 4), *recv = malloc(n * 4 + 1), *exp = malloc(n * 4);
  void *smh = NULL, *rmh = NULL;
  CHECK(T->regMr(cc, send, n * 4, STRAND_PTR_HOST, &smh) == STRAND_SUCCESS, "regMr");
  CHECK(T->regMr(cc, recv, n * 4 + 1, STRAND_PTR_HOST, &rmh) == STRAND_SUCCESS, "regMr");
  allreduce(cc, smh, rmh, send, recv, exp, rank, STRAND_FLOAT32, STRAND_SUM, n, 1, false);
  pthread_barrier_wait(&g_bar);
  int tids[4], nt = 0;
  long t0[4], s0[4];
  if (rank == 0) {
    nt = prog_tids(tids, 4);
    CHECK(nt == 2, "%d progress threads found (want one per rank's collComm)", nt);
    for (int i = 0; i < nt; i++) CHECK(task_usage(tids[i], &t0[i], &s0[i]), "/proc usage of task %d", tids[i]);
  }
  sleep_s(IDLE_S);
  if (rank == 0) {
    long hz = sysconf(_SC_CLK_TCK);
    for (int i = 0; i < nt; i++) {
      long t1 = 0, s1 = 0;
      CHECK(task_usage(tids[i], &t1, &s1), "/proc usage of task %d", tids[i]);
      double cpu = (double)(t1 - t0[i]) / (double)hz;
      printf("idle progress thread %d: %.3f s CPU, %ld context switches in %.1f s\n", tids[i], cpu,
             s1 - s0[i], IDLE_S);
      /* a napping thread: ~1e5 switches and a good part of a core; a sleeping one: ~IDLE_S / 0.1 */
      CHECK(s1 - s0[i] < 50 && cpu <= 0.03, "idle progress thread %d: %ld context switches and %.3f s "
            "CPU in %.1f s (want it asleep)", tids[i], s1 - s0[i], cpu, IDLE_S);
    }
  }
  /* Without the wake-up every one of these calls waits out the thread's 100 ms bounded sleep
   * (~90 ms late, each time: the test's 110 ms idle restarts the same phase). With it a call takes
   * a few ms, but one call on a loaded machine (the sanitizers, another test on the 2 cores) was
   * seen at 63 ms: so the fastest of three must be under 50 ms, and none may take a whole second. */
  double fastest = 1e9;
  for (int k = 0; k < 3; k++) {
    pthread_barrier_wait(&g_bar);
    sleep_s(0.11); /* past one whole 100 ms bounded sleep */
    double took = allreduce(cc, smh, rmh, send, recv, exp, rank, STRAND_FLOAT32, STRAND_SUM, n, 2 + k, false);
    CHECK(took > 0 && took < 1.0, "rank %d: an all-reduce after 110 ms idle took %.1f ms", rank, took * 1e3);
    if (took < fastest) fastest = took;
    if (rank == 0) printf("all-reduce after 110 ms idle: %.2f ms\n", took * 1e3);
  }
  CHECK(fastest < 0.05, "rank %d: the fastest of three all-reduces after 110 ms idle took %.1f ms (want "
        "< 50: the call wakes the progress thread; without the wake-up each waits ~90 ms)", rank,
        fastest * 1e3);
  T->deregMr(cc, smh);
  T->deregMr(cc, rmh);
  pthread_barrier_wait(&g_bar);
  double c0 = test_now_s();
  CHECK(T->closeColl(cc) == STRAND_SUCCESS, "closeColl");
  double took = test_now_s() - c0;
  CHECK(took < 0.05, "rank %d: closeColl of an idle collComm took %.1f ms (the sleeping thread must be "
        "woken, not waited for)", rank, took * 1e3);
  CHECK(T->finalize(ctx) == STRAND_SUCCESS, "finalize");
  free(send);
  free(recv);
  free(exp);
  return NULL;
}

static void run_ranks(int nranks, void *(*fn)(void *)) {
  g_nranks = nranks;
  pthread_barrier_init(&g_bar, NULL, (unsigned)g_nranks);
  pthread_t th[8];
  for (int r = 0; r < g_nranks; r++) pthread_create(&th[r], NULL, fn, (void *)(intptr_t)r);
  for (int r = 0; r < g_nranks; r++) pthread_join(th[r], NULL);
  pthread_barrier_destroy(&g_bar);
}

/* Two ranks that disagree on `var`: rank 0's connect reads `first` (NULL: unset), rank 1's
 * `second` (mk_connect switches it in between); fn must see both fail, and a WARN must name var. */
static void disagree(const char *var, const char *first, const char *second, void *(*fn)(void *),
                     const char *what) {
  if (first)
    setenv(var, first, 1);
  else
    unsetenv(var);
  strand_params_reread_for_test();
  g_chunk_var = var;
  g_chunk_other = second;
  g_chunk_switched = false;
  g_warns[0] = 0;
  run_ranks(2, fn);
  CHECK(strstr(g_warns, var), "%s: no WARN names %s; WARNs:\n%s", what, var, g_warns);
  g_chunk_other = NULL;
  unsetenv(var);
  strand_params_reread_for_test();
  printf("%s: 2 ranks, %s\n", g_fail ? "FAIL" : "ok", what);
}

int main(void) {
  T = strand_collnet_stub_for(&mock_net);
  CHECK(T != NULL, "strand_collnet_stub_for(mock)");
  if (!T) return 1;
  CHECK(strand_collnet_stub_for(&mock_net) == T, "binding the same net again returns the same table");

  /* The mock supports GPU memory: STRAND_COLLNET_STUB=auto offers no device until CollNet is on. */
  int nd = -1;
  unsetenv("NCCL_COLLNET_ENABLE");
  /* A STRAND_COLLNET_* variable the stub does not know (a typo, or one removed, as
   * STRAND_COLLNET_EARLY_AG) gets a WARN at the first devices() call, not silence. */
  strand_logger_t before = strand_log_get_logger();
  strand_log_init(capture_logger);
  setenv("STRAND_COLLNET_EARLY_AG", "1", 1);
  CHECK(T->devices(&nd) == STRAND_SUCCESS && nd == 0, "auto on a GDR-capable net: 0 devices, got %d", nd);
  CHECK(strstr(g_warns, "STRAND_COLLNET_EARLY_AG is set but is not a known parameter"),
        "no WARN names the unknown STRAND_COLLNET_EARLY_AG; WARNs:\n%s", g_warns);
  unsetenv("STRAND_COLLNET_EARLY_AG");
  g_warns[0] = 0;
  /* A STRAND_COLLNET_PROGRESS that is not proxy or thread fails init, with a WARN naming it. */
  const char *mode = getenv("STRAND_COLLNET_PROGRESS");
  char mode_was[32] = "";
  if (mode) snprintf(mode_was, sizeof mode_was, "%s", mode);
  setenv("STRAND_COLLNET_PROGRESS", "threads", 1);
  strand_params_reread_for_test();
  void *bad_ctx = NULL;
  CHECK(T->init(&bad_ctx, 77, capture_logger) != STRAND_SUCCESS && !bad_ctx,
        "init with STRAND_COLLNET_PROGRESS=threads must fail");
  CHECK(strstr(g_warns, "STRAND_COLLNET_PROGRESS"), "no WARN names STRAND_COLLNET_PROGRESS=threads; WARNs:\n%s",
        g_warns);
  if (mode)
    setenv("STRAND_COLLNET_PROGRESS", mode_was, 1);
  else
    unsetenv("STRAND_COLLNET_PROGRESS");
  strand_params_reread_for_test();
  g_warns[0] = 0;
  /* auto (the default) = a progress thread from CS_PROG_THREAD_MIN_CPUS online CPUs (CI's 2 get none) */
  CHECK(!cs_progress_wants_thread("auto", 2) && !cs_progress_wants_thread("auto", CS_PROG_THREAD_MIN_CPUS - 1) &&
            cs_progress_wants_thread("auto", CS_PROG_THREAD_MIN_CPUS) && cs_progress_wants_thread("auto", 64),
        "auto: proxy below %d CPUs, a thread from there", CS_PROG_THREAD_MIN_CPUS);
  CHECK(cs_progress_wants_thread("thread", 1) && !cs_progress_wants_thread("proxy", 64),
        "thread and proxy are what they say whatever the CPU count");
  printf("%s: progress mode %s; a bad STRAND_COLLNET_PROGRESS fails init; auto picks by CPU count\n",
         g_fail ? "FAIL" : "ok", mode ? mode : "proxy (default)");
  /* STRAND_COLLNET_STREAMS auto: about CS_STREAM_COMMS comms per exchange over n-1 peers, rounded
   * up (2 at 4 ranks was measured faster than the 1 of rounding down), never 0, never above max. */
  CHECK(cs_auto_streams(1) == 1 && cs_auto_streams(2) == 4 && cs_auto_streams(3) == 2 &&
            cs_auto_streams(4) == 2 && cs_auto_streams(5) == 1 && cs_auto_streams(64) == 1,
        "auto streams at 1/2/3/4/5/64 ranks: %d %d %d %d %d %d, want 1 4 2 2 1 1", cs_auto_streams(1),
        cs_auto_streams(2), cs_auto_streams(3), cs_auto_streams(4), cs_auto_streams(5), cs_auto_streams(64));
  strand_log_init(before);
  setenv("NCCL_COLLNET_ENABLE", "1", 1);
  CHECK(T->devices(&nd) == STRAND_SUCCESS && nd == 1, "devices = the net's once NCCL_COLLNET_ENABLE=1");
  strand_props_t p;
  memset(&p, 0xA5, sizeof p);
  CHECK(T->getProperties(0, &p) == STRAND_SUCCESS, "getProperties");
  CHECK(p.name && !strcmp(p.name, "mock0") && p.speed == 12345, "name and speed are the net device's");
  CHECK(p.ptrSupport == STRAND_PTR_HOST, "host memory only, whatever the net supports");
  CHECK(p.maxCollBytes > 0 && p.maxCollBytes <= (1ULL << 40), "maxCollBytes in (0, 2^40]");
  int sup = -1, nsup = 0;
  for (int t = 0; t < STRAND_NUM_TYPES; t++)
    for (int op = 0; op < 4; op++) {
      CHECK(T->reduceSupport((strand_datatype_t)t, (strand_redop_t)op, &sup) == STRAND_SUCCESS, "reduceSupport");
      nsup += sup == 1;
    }
  CHECK(nsup == 48, "48 (type, op) pairs supported, got %d", nsup);

  const int sizes[] = {1, 2, 3, 4, 5};
  for (int si = 0; si < 5; si++) {
    g_nranks = sizes[si];
    pthread_barrier_init(&g_bar, NULL, (unsigned)g_nranks);
    pthread_t th[8];
    for (int r = 0; r < g_nranks; r++) pthread_create(&th[r], NULL, rank_main, (void *)(intptr_t)r);
    for (int r = 0; r < g_nranks; r++) pthread_join(th[r], NULL);
    pthread_barrier_destroy(&g_bar);
    printf("%s: %d rank(s)\n", g_fail ? "FAIL" : "ok", g_nranks);
  }
  /* Again at 3 ranks with 4 helper threads (CI's 2 CPUs get none by default): the reductions of
   * large registered blocks are then cut into parts run by several helpers at once. */
  setenv("STRAND_COLLNET_THREADS", "4", 1);
  strand_params_reread_for_test();
  run_ranks(3, rank_main);
  unsetenv("STRAND_COLLNET_THREADS");
  strand_params_reread_for_test();
  printf("%s: 3 ranks, 4 helper threads (split reductions)\n", g_fail ? "FAIL" : "ok");
  /* The ranks above ran STRAND_COLLNET_ONESHOT_KB's default: one exchange per chunk for every call at
   * 2 ranks, for calls up to 16 KiB above. The other way round: two exchanges at 2 ranks, and one
   * for every call at 3 ranks with 4 helpers (whole chunks reduced in parts; rank 2's in-place
   * reduction accumulating in its receive area). */
  setenv("STRAND_COLLNET_ONESHOT_KB", "0", 1);
  strand_params_reread_for_test();
  run_ranks(2, rank_main);
  printf("%s: 2 ranks, two exchanges per chunk (STRAND_COLLNET_ONESHOT_KB=0)\n", g_fail ? "FAIL" : "ok");
  setenv("STRAND_COLLNET_ONESHOT_KB", "4194304", 1);
  setenv("STRAND_COLLNET_THREADS", "4", 1);
  strand_params_reread_for_test();
  run_ranks(3, rank_main);
  unsetenv("STRAND_COLLNET_THREADS");
  printf("%s: 3 ranks, one exchange for every call, 4 helper threads\n", g_fail ? "FAIL" : "ok");
  unsetenv("STRAND_COLLNET_ONESHOT_KB");
  strand_params_reread_for_test();
  strand_log_init(capture_logger); /* the mock net's init keeps no logger: the stub's WARNs come here */
  for (int nr = 2; nr <= 3; nr++)
    for (g_case = 0; g_case < (int)(sizeof mm_cases / sizeof mm_cases[0]); g_case++) {
      g_warns[0] = 0;
      run_ranks(nr, mismatch_main);
      const mm_case_t *mc = &mm_cases[g_case];
      for (int k = 0; k < 2; k++)
        CHECK(strstr(g_warns, mc->warn_has[k]), "%d ranks, %s: no WARN names \"%s\"; WARNs:\n%s", nr,
              mc->name, mc->warn_has[k], g_warns);
      printf("%s: %d ranks, mismatch %s\n", g_fail ? "FAIL" : "ok", nr, mc->name);
    }
  disagree("STRAND_COLLNET_CHUNK_KB", "64", "128", chunk_main, "chunk sizes 64 vs 128 KiB fail the collective on both");
  /* At 2 ranks every all-reduce is one exchange by default, so a stream has no all-gather lane: one
   * comm per stream and direction; two once some all-reduce takes two exchanges. */
  int streams = cs_auto_streams(2), dialled = comms_dialled_by_two();
  CHECK(dialled == 2 * streams, "2 ranks, defaults: %d send comms dialled, want %d (one per stream and rank)",
        dialled, 2 * streams);
  setenv("STRAND_COLLNET_ONESHOT_KB", "0", 1);
  strand_params_reread_for_test();
  dialled = comms_dialled_by_two();
  CHECK(dialled == 4 * streams, "2 ranks, STRAND_COLLNET_ONESHOT_KB=0: %d send comms dialled, want %d (two per "
        "stream and rank)", dialled, 4 * streams);
  unsetenv("STRAND_COLLNET_ONESHOT_KB");
  strand_params_reread_for_test();
  printf("%s: 2 ranks, comms per stream: one by default, two with two exchanges per all-reduce\n",
         g_fail ? "FAIL" : "ok");
  disagree("STRAND_COLLNET_STREAMS", "2", "1", connect_refused_main, "2 vs 1 streams fail connect on both");
  /* One exchange for every call on rank 0 (auto at 2 ranks: no all-gather lane), two on rank 1:
   * connect fails on both (they would dial different numbers of comms). */
  disagree("STRAND_COLLNET_ONESHOT_KB", NULL, "0", connect_refused_main,
           "one exchange for every call vs two fail connect on both");
  /* One exchange up to 4 MiB on rank 0, never on rank 1 (both with an all-gather lane): connect
   * refuses that too, before any collective could mix a whole chunk into a block. */
  disagree("STRAND_COLLNET_ONESHOT_KB", "4096", "0", connect_refused_main,
           "one exchange up to 4 MiB vs two fail connect on both");
  run_ranks(2, close_inflight_main);
  printf("%s: 2 ranks, closeColl with collectives in flight returns\n", g_fail ? "FAIL" : "ok");
  /* the chain of a call's two exchanges (at 2 ranks by default one: STRAND_COLLNET_ONESHOT_KB) */
  setenv("STRAND_COLLNET_ONESHOT_KB", "0", 1);
  strand_params_reread_for_test();
  check_gaps("no helper threads", false);
  printf("%s: 2 ranks, the gaps of a call (closing line)\n", g_fail ? "FAIL" : "ok");
  setenv("STRAND_COLLNET_THREADS", "2", 1);
  strand_params_reread_for_test();
  check_gaps("2 helper threads", false);
  unsetenv("STRAND_COLLNET_THREADS");
  unsetenv("STRAND_COLLNET_ONESHOT_KB");
  strand_params_reread_for_test();
  printf("%s: 2 ranks, 2 helper threads (split reductions), the gaps of a call\n", g_fail ? "FAIL" : "ok");
  check_gaps("one exchange", true);
  printf("%s: 2 ranks, one exchange per chunk (the default), the gaps of a call\n", g_fail ? "FAIL" : "ok");
  /* The progress thread of an idle collComm sleeps, and wakes for the next call (in both runs). */
  mode = getenv("STRAND_COLLNET_PROGRESS"); /* copied: setenv may free it */
  snprintf(mode_was, sizeof mode_was, "%s", mode ? mode : "");
  setenv("STRAND_COLLNET_PROGRESS", "thread", 1);
  strand_params_reread_for_test();
  g_closing[0] = 0;
  strand_log_set_filter(STRAND_LOG_INFO, STRAND_SUBSYS_ALL);
  strand_log_init(capture_logger);
  run_ranks(2, idle_main);
  strand_log_init(before);
  strand_log_reload_env();
  /* the closing line counts the thread's rounds and its sleeps (>= 3 in the 0.3 s idle alone) */
  unsigned long long rounds = 0, still = 0, sleeps = 0, tests = 0;
  const char *pl = strstr(g_closing, "progress thread: ");
  CHECK(pl && sscanf(pl, "progress thread: %llu rounds, %llu of them moved nothing, %llu sleeps with "
                     "nothing to move; %llu test() calls (report only)", &rounds, &still, &sleeps, &tests) == 4 &&
        rounds > 0 && still <= rounds && sleeps >= 3 && tests > 0,
        "the closing line of a threaded comm: no progress thread counts, or wrong ones:\n%s", g_closing);
  if (pl) printf("closing line of the idle test's rank 0: %.*s\n", (int)strcspn(pl, ";"), pl);
  if (mode)
    setenv("STRAND_COLLNET_PROGRESS", mode_was, 1);
  else
    unsetenv("STRAND_COLLNET_PROGRESS");
  strand_params_reread_for_test();
  printf("%s: 2 ranks, an idle progress thread sleeps and wakes for the next call\n", g_fail ? "FAIL" : "ok");
  return g_fail ? 1 : 0;
}
