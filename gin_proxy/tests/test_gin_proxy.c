/* gin_proxy over strand-socket's net table on loopback: ranks are processes (fork), the handles
 * and barriers go through shared memory. Usage: test_gin_proxy <libnccl-net-strand-socket.so> N
 *
 * With a third argument "stingy" the net is wrapped so that every third isend/irecv returns a
 * NULL request (the net cannot take it yet), which drives gin_proxy's retry paths all the time.
 * With "gpu" every window is GPU memory (cuMemAlloc on GPU 0, registered NCCL_PTR_CUDA): the same
 * phases, with host copies of the windows filled and checked through the CUDA driver; without a
 * usable GPU the test is skipped (exit 77).
 *
 * Phases, each ending in a barrier (waiters keep calling rmaProgress: peers need our progress):
 *   1 puts     every rank puts spans of 0 B, 1 B, small, over one slot, a few MiB at random offsets
 *              to every rank (itself included), then ONE signal-only INC (0 bytes, NULL window
 *              handles, as NCCL's barriers); the target waits for the signal only and then checks
 *              every span: strong ordering (data before signal).
 *   2 add      every rank put+signals ADD (src+1)*1000 (weak) to a shared word on every rank.
 *   3 get      every rank gets a region each peer filled itself; then a flush.
 *   4 refusals bad handles, local range, unaligned signal, GPU memory, double test; a remote
 *              out-of-range put/get fails the SOURCE's test and the target's queryLastError.
 *   5 death    the last rank is SIGKILLed; the survivors' ops to it fail within 5 s.
 *   6 close    everything closed; calls on the closed collComm / context are refused. */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "plugin_test.h"
#include "strand/cuda_driver.h"
#include "strand/gin_proxy.h"

#define MAXR 8
#define SEG (4u << 20)        /* bytes of a target's window each source owns */
#define GETB (3u << 20) + 777 /* bytes each rank gets from each peer */
#define SIGW 16               /* signal words per rank: [src] INC, [MAXR] ADD */

typedef struct {
  char handles[MAXR][STRAND_NET_HANDLE_MAXSIZE];
  int count, gen;
} shm_t;

static shm_t *g_shm;
static int g_n, g_me;
static bool g_gpu; /* windows in GPU memory */
static char g_who[48]; /* "test_gin_proxy rank R", for the barrier's timeout */
static const strand_rma_t *g_rma;
static void *g_rctx;

static void pump(void) {
  if (g_rctx) g_rma->rmaProgress(g_rctx);
}

static int barrier(int n) { return pt_proc_barrier(&g_shm->count, &g_shm->gen, n, pump, 30, g_who); }

/* test() until done; returns test's status, or PT_TIMEOUT. */
static int wait_req(void *comm, void *req, double bound) {
  double end = pt_now_s() + bound;
  for (;;) {
    int done = 0;
    strand_result_t rc = g_rma->test(comm, req, &done);
    if (rc != STRAND_SUCCESS) return rc;
    if (done) return STRAND_SUCCESS;
    if (pt_now_s() > end) return PT_TIMEOUT;
  }
}

/* Span i of the puts from src to dst: deterministic, so the target recomputes them. */
static unsigned rng(unsigned *s) {
  *s = *s * 1103515245u + 12345u;
  return (*s >> 8) & 0xffffff;
}
#define NSPAN 12
static void spans(int src, int dst, size_t off[NSPAN], size_t len[NSPAN]) {
  static const size_t sizes[NSPAN] = {0, 1, 13, 4096, 8000, 65536, 65536 + 1, 200000, 7, 0, 300, (3u << 20) + 333};
  unsigned s = (unsigned)(src * 131 + dst * 7 + 1);
  size_t pos = 0;
  for (int i = 0; i < NSPAN; i++) {
    pos += rng(&s) % 4096;
    off[i] = (size_t)src * SEG + pos;
    len[i] = sizes[i];
    pos += sizes[i];
  }
}

typedef struct {
  void *comm, *lcomm, *ctx;
  char *data, *src, *sig, *scratch; /* the windows, or their host copies in gpu mode */
  strand_cu_devptr_t d[4];          /* gpu mode: the windows (data, src, sig, scratch) */
  void *mh_data, *mh_src, *mh_sig, *mh_scratch;
  size_t data_bytes;
} rank_t;

/* gpu mode: the device address of host copy `h` + off, and moving bytes between the two. */
static strand_cu_devptr_t dev_of(rank_t *R, const char *h) {
  const char *hs[4] = {R->data, R->src, R->sig, R->scratch};
  for (int i = 0; i < 4; i++)
    if (h == hs[i]) return R->d[i];
  return 0;
}
static int win_up(rank_t *R, char *h, size_t off, size_t len) {
  if (!g_gpu || !len) return 0;
  const strand_cuda_t *cu = strand_cuda();
  PT_CHECK(cu->memcpyHtoDAsync(dev_of(R, h) + off, h + off, len, NULL) == 0 && cu->streamSynchronize(NULL) == 0,
           "rank %d: host -> GPU window copy", g_me);
  return 0;
}
static int win_down(rank_t *R, char *h, size_t off, size_t len) {
  if (!g_gpu || !len) return 0;
  const strand_cuda_t *cu = strand_cuda();
  PT_CHECK(cu->memcpyDtoHAsync(h + off, dev_of(R, h) + off, len, NULL) == 0 && cu->streamSynchronize(NULL) == 0,
           "rank %d: GPU window -> host copy", g_me);
  return 0;
}
/* The pointer a window is registered with, and its type. */
static void *win_ptr(rank_t *R, char *h) { return g_gpu ? (void *)(uintptr_t)dev_of(R, h) : h; }
#define WIN_TYPE (g_gpu ? STRAND_PTR_CUDA : STRAND_PTR_HOST)

/* gpu mode: GPU 0's primary context and the four windows, zeroed. */
static int gpu_setup(rank_t *R) {
  const strand_cuda_t *cu = strand_cuda();
  int dev = -1;
  strand_cu_ctx_t ctx = NULL;
  PT_CHECK(cu && cu->deviceGet(&dev, 0) == 0 && cu->devicePrimaryCtxRetain(&ctx, dev) == 0 &&
               cu->ctxSetCurrent(ctx) == 0, "rank %d: GPU 0's context", g_me);
  size_t sizes[4] = {R->data_bytes, R->data_bytes, SIGW * 8, (size_t)g_n * (GETB)};
  char *hs[4] = {R->data, R->src, R->sig, R->scratch};
  for (int i = 0; i < 4; i++) {
    PT_CHECK(cu->memAlloc(&R->d[i], sizes[i]) == 0, "rank %d: cuMemAlloc of %zu bytes", g_me, sizes[i]);
    if (win_up(R, hs[i], 0, sizes[i])) return -1; /* the host copies are calloc'ed: zeroes */
  }
  return 0;
}

static int setup(rank_t *R, const strand_net_t *net) {
  g_rma = strand_gin_proxy_for(net);
  PT_CHECK(g_rma, "strand_gin_proxy_for");
  PT_CHECK(g_rma->init(&R->ctx, 42, NULL) == STRAND_SUCCESS, "init");
  int nd = 0;
  PT_CHECK(g_rma->devices(&nd) == STRAND_SUCCESS && nd >= 1, "devices: %d", nd);
  strand_props_t p;
  PT_CHECK(g_rma->getProperties(0, &p) == STRAND_SUCCESS, "getProperties");
  int ptr = STRAND_PTR_HOST | (strand_cuda() ? STRAND_PTR_CUDA : 0);
  PT_CHECK(p.netDeviceType == STRAND_DEV_GIN_PROXY && p.netDeviceVersion == STRAND_GIN_PROXY_VERSION &&
               p.ptrSupport == ptr && p.maxRecvs == 1 && p.maxP2pBytes == STRAND_MAX_GIN_SIZE,
           "properties: type %d version %d ptr %d", (int)p.netDeviceType, p.netDeviceVersion, p.ptrSupport);
  char handle[STRAND_NET_HANDLE_MAXSIZE] = {0};
  PT_CHECK(g_rma->listen(R->ctx, 0, handle, &R->lcomm) == STRAND_SUCCESS, "listen");
  memcpy(g_shm->handles[g_me], handle, sizeof handle);
  if (barrier(g_n)) return -1;
  void *hs[MAXR];
  for (int j = 0; j < g_n; j++) hs[j] = g_shm->handles[j];
  /* ctx argument deliberately bogus: NCCL passes its net or GIN context there */
  PT_CHECK(g_rma->connect((void *)0x1, hs, g_n, g_me, R->lcomm, &R->comm) == STRAND_SUCCESS, "connect");
  strand_rma_config_t cfg = {.nContexts = 2, .trafficClass = 0, .rankStride = 1};
  PT_CHECK(g_rma->createContext(R->comm, &cfg, &g_rctx) == STRAND_SUCCESS, "createContext");
  R->data_bytes = (size_t)g_n * SEG;
  R->data = calloc(1, R->data_bytes);
  R->src = calloc(1, R->data_bytes);
  R->sig = calloc(SIGW, 8);
  R->scratch = calloc(1, (size_t)g_n * (GETB));
  PT_CHECK(R->data && R->src && R->sig && R->scratch, "calloc");
  if (g_gpu && gpu_setup(R)) return -1;
  /* every rank registers the same windows in the same order (symmetric) */
  PT_CHECK(g_rma->regMrSym(R->comm, win_ptr(R, R->data), R->data_bytes, WIN_TYPE, 0, &R->mh_data) == 0, "reg data");
  PT_CHECK(g_rma->regMrSym(R->comm, win_ptr(R, R->src), R->data_bytes, WIN_TYPE, 0, &R->mh_src) == 0, "reg src");
  PT_CHECK(g_rma->regMrSym(R->comm, win_ptr(R, R->sig), SIGW * 8, WIN_TYPE, STRAND_GIN_MR_FLAG_FORCE_SO,
                           &R->mh_sig) == 0, "reg sig");
  PT_CHECK(g_rma->regMrSym(R->comm, win_ptr(R, R->scratch), (size_t)g_n * (GETB), WIN_TYPE, 0,
                           &R->mh_scratch) == 0, "reg scratch");
  return barrier(g_n);
}

static uint64_t sig_load(rank_t *R, int i) {
  if (g_gpu && win_down(R, R->sig, 8 * (size_t)i, 8)) return UINT64_MAX;
  return __atomic_load_n((uint64_t *)(void *)(R->sig + 8 * i), __ATOMIC_ACQUIRE);
}

static int wait_sig(rank_t *R, int i, uint64_t want) {
  double end = pt_now_s() + 10;
  while (sig_load(R, i) != want) {
    pump();
    PT_CHECK(pt_now_s() < end, "rank %d: signal %d is %llu, want %llu", g_me, i,
             (unsigned long long)sig_load(R, i), (unsigned long long)want);
  }
  return 0;
}

/* NCCL registers windows from another thread than its proxy's: this one registers and
 * deregisters windows (the same sequence on every rank) while the main thread puts and applies. */
static void *reg_thread(void *arg) {
  rank_t *R = arg;
  static char buf[4096];
  for (int i = 0; i < 200; i++) {
    void *mh = NULL;
    if (g_rma->regMrSym(R->comm, buf, sizeof buf, STRAND_PTR_HOST, 0, &mh) != STRAND_SUCCESS ||
        g_rma->deregMrSym(R->comm, mh) != STRAND_SUCCESS)
      return (void *)1;
  }
  return NULL;
}

static int phase_puts(rank_t *R) {
  void *reqs[MAXR * (NSPAN + 1)];
  int nreq = 0;
  pthread_t th;
  PT_CHECK(pthread_create(&th, NULL, reg_thread, R) == 0, "pthread_create");
  for (int t = 0; t < g_n; t++) {
    size_t off[NSPAN], len[NSPAN];
    spans(g_me, t, off, len);
    for (int i = 0; i < NSPAN; i++) {
      /* the source bytes live at a different offset than the destination */
      size_t soff = (size_t)t * SEG + (off[i] - (size_t)g_me * SEG);
      pt_fill(R->src + soff, len[i], (unsigned)(g_me * 1000 + t * 50 + i));
      if (win_up(R, R->src, soff, len[i])) return -1;
      PT_CHECK(g_rma->iput(g_rctx, i % 2, soff, R->mh_src, len[i], off[i], R->mh_data, (uint32_t)t,
                           &reqs[nreq]) == STRAND_SUCCESS && reqs[nreq], "iput %d -> %d span %d", g_me, t, i);
      nreq++;
    }
    /* signal only, no window handles: what NCCL's barriers issue */
    PT_CHECK(g_rma->iputSignal(g_rctx, 1, 0, NULL, 0, 0, NULL, (uint32_t)t, 8 * (size_t)g_me,
                               R->mh_sig, 777, STRAND_GIN_SIGNAL_OP_INC, true, &reqs[nreq]) == 0 && reqs[nreq],
             "iputSignal INC %d -> %d (0 bytes, NULL window handles)", g_me, t);
    nreq++;
  }
  /* the target side: wait for each source's signal alone, then every span must be there */
  for (int s = 0; s < g_n; s++) {
    if (wait_sig(R, s, 1)) return -1;
    size_t off[NSPAN], len[NSPAN];
    spans(s, g_me, off, len);
    for (int i = 0; i < NSPAN; i++) {
      if (win_down(R, R->data, off[i], len[i])) return -1;
      long bad = pt_verify(R->data + off[i], len[i], (unsigned)(s * 1000 + g_me * 50 + i));
      PT_CHECK(bad < 0, "rank %d: span %d (%zu B) from rank %d wrong at byte %ld when its signal was seen",
               g_me, i, len[i], s, bad);
    }
  }
  for (int k = 0; k < nreq; k++) PT_CHECK(wait_req(R->comm, reqs[k], 10) == STRAND_SUCCESS, "put request %d", k);
  void *th_rc = NULL;
  pthread_join(th, &th_rc);
  PT_CHECK(th_rc == NULL, "rank %d: registration from a second thread failed", g_me);
  return barrier(g_n);
}

static int phase_add(rank_t *R) {
  void *reqs[MAXR];
  for (int t = 0; t < g_n; t++)
    PT_CHECK(g_rma->iputSignal(g_rctx, 0, 0, R->mh_src, 16, (size_t)g_me * SEG, R->mh_data, (uint32_t)t,
                               8 * MAXR, R->mh_sig, (uint64_t)(g_me + 1) * 1000, STRAND_GIN_SIGNAL_OP_ADD,
                               false, &reqs[t]) == 0, "iputSignal ADD");
  uint64_t want = 0;
  for (int s = 0; s < g_n; s++) want += (uint64_t)(s + 1) * 1000;
  if (wait_sig(R, MAXR, want)) return -1;
  for (int t = 0; t < g_n; t++) PT_CHECK(wait_req(R->comm, reqs[t], 10) == STRAND_SUCCESS, "ADD request");
  return barrier(g_n);
}

static int phase_get(rank_t *R) {
  /* our own region for the peers to read: source window, segment 0, seeded by our rank */
  pt_fill(R->src, GETB, (unsigned)(5000 + g_me));
  if (win_up(R, R->src, 0, GETB) || barrier(g_n)) return -1;
  void *reqs[MAXR];
  for (int t = 0; t < g_n; t++)
    PT_CHECK(g_rma->iget(g_rctx, 0, 0, R->mh_src, GETB, (size_t)t * (GETB), R->mh_scratch, (uint32_t)t,
                         &reqs[t]) == STRAND_SUCCESS && reqs[t], "iget from %d", t);
  for (int t = 0; t < g_n; t++) {
    PT_CHECK(wait_req(R->comm, reqs[t], 10) == STRAND_SUCCESS, "get request from %d", t);
    if (win_down(R, R->scratch, (size_t)t * (GETB), GETB)) return -1;
    long bad = pt_verify(R->scratch + (size_t)t * (GETB), GETB, (unsigned)(5000 + t));
    PT_CHECK(bad < 0, "rank %d: get from rank %d wrong at byte %ld", g_me, t, bad);
  }
  /* a window deregistered while a get into it is under way: the get fails (or had completed), and
   * nothing is written into the memory after deregMrSym (the caller may free it) */
  if (!g_gpu) {
    char *tmp = calloc(1, GETB);
    void *mh_tmp = NULL, *greq = NULL;
    PT_CHECK(tmp && g_rma->regMrSym(R->comm, tmp, GETB, STRAND_PTR_HOST, 0, &mh_tmp) == 0, "reg tmp");
    int t = (g_me + 1) % g_n;
    PT_CHECK(g_rma->iget(g_rctx, 0, 0, R->mh_src, GETB, 0, mh_tmp, (uint32_t)t, &greq) == 0 && greq, "iget tmp");
    PT_CHECK(g_rma->deregMrSym(R->comm, mh_tmp) == 0, "dereg tmp with a get in flight");
    memset(tmp, 0x5a, GETB);
    int grc = wait_req(R->comm, greq, 10);
    PT_CHECK(grc == STRAND_INVALID_USAGE || (t == g_me && grc == STRAND_SUCCESS),
             "get into a window deregistered under it: %d", grc);
    for (size_t i = 0; i < GETB; i++)
      PT_CHECK(tmp[i] == 0x5a, "rank %d: byte %zu written after deregMrSym", g_me, i);
    free(tmp);
    if (barrier(g_n)) return -1;
  }
  /* a put then a flush: the flush completes once the put did */
  for (int t = 0; t < g_n; t++) {
    void *put = NULL, *fl = NULL;
    PT_CHECK(g_rma->iput(g_rctx, 0, 0, R->mh_src, 100000, (size_t)g_me * SEG, R->mh_data, (uint32_t)t, &put) == 0,
             "iput before flush");
    PT_CHECK(g_rma->iflush(g_rctx, 0, R->mh_data, (uint32_t)t, &fl) == 0 && fl, "iflush");
    PT_CHECK(wait_req(R->comm, fl, 10) == STRAND_SUCCESS, "flush to %d", t);
    int done = 0;
    PT_CHECK(g_rma->test(R->comm, put, &done) == STRAND_SUCCESS && done, "put done once its flush is");
  }
  return barrier(g_n);
}

static int phase_refusals(rank_t *R) {
  void *req = NULL;
  int t = (g_me + 1) % g_n;
  PT_CHECK(g_rma->iput(g_rctx, 0, 0, R->mh_src, 8, 0, (void *)0x1234, (uint32_t)t, &req) ==
               STRAND_INVALID_ARGUMENT, "bad destination handle");
  PT_CHECK(g_rma->iput(g_rctx, 0, R->data_bytes - 4, R->mh_src, 8, 0, R->mh_data, (uint32_t)t, &req) ==
               STRAND_INVALID_ARGUMENT, "local source out of range");
  PT_CHECK(g_rma->iput(g_rctx, 2, 0, R->mh_src, 8, 0, R->mh_data, (uint32_t)t, &req) == STRAND_INVALID_ARGUMENT,
           "context index out of range");
  PT_CHECK(g_rma->iputSignal(g_rctx, 0, 0, R->mh_src, 8, 0, R->mh_data, (uint32_t)t, 4, R->mh_sig, 1,
                             STRAND_GIN_SIGNAL_OP_INC, true, &req) == STRAND_INVALID_ARGUMENT, "unaligned signal");
  PT_CHECK(g_rma->deregMrSym(R->comm, (void *)0x5678) == STRAND_INVALID_ARGUMENT, "dereg of a bogus handle");
  void *mh = NULL;
  /* host memory registered as GPU memory: no CUDA driver here (INVALID_USAGE), or not device
   * memory (INVALID_ARGUMENT) */
  strand_result_t rc = g_rma->regMrSym(R->comm, R->data, 64, STRAND_PTR_CUDA, 0, &mh);
  PT_CHECK(rc == (strand_cuda() ? STRAND_INVALID_ARGUMENT : STRAND_INVALID_USAGE), "host memory as a CUDA window: %d", rc);
  PT_CHECK(g_rma->regMrSymDmaBuf(R->comm, R->data, 64, STRAND_PTR_DMABUF, 0, -1, 0, &mh) == STRAND_INVALID_USAGE,
           "DMA-BUF window");
  /* a request tested after completion */
  PT_CHECK(g_rma->iput(g_rctx, 0, 0, R->mh_src, 8, (size_t)g_me * SEG, R->mh_data, (uint32_t)t, &req) == 0, "iput");
  PT_CHECK(wait_req(R->comm, req, 10) == STRAND_SUCCESS, "iput");
  int done = 0;
  PT_CHECK(g_rma->test(R->comm, req, &done) == STRAND_INVALID_ARGUMENT && !done, "second test of a request");
  if (barrier(g_n)) return -1;
  /* rank 0 puts and gets out of rank 1's range: rank 0's test fails, rank 1's queryLastError */
  if (g_me == 0) {
    PT_CHECK(g_rma->iput(g_rctx, 0, 0, R->mh_src, 100, R->data_bytes - 10, R->mh_data, 1, &req) == 0, "oob iput");
    PT_CHECK(wait_req(R->comm, req, 10) == STRAND_INVALID_ARGUMENT, "remote out-of-range put fails at the source");
    PT_CHECK(g_rma->iget(g_rctx, 0, R->data_bytes, R->mh_data, 1, 0, R->mh_scratch, 1, &req) == 0, "oob iget");
    PT_CHECK(wait_req(R->comm, req, 10) == STRAND_INVALID_ARGUMENT, "remote out-of-range get fails at the source");
    PT_CHECK(g_rma->iput(g_rctx, 0, 0, R->mh_src, 8, 0, R->mh_data, 1, &req) == 0, "iput after a refused one");
    PT_CHECK(wait_req(R->comm, req, 10) == STRAND_SUCCESS, "the stream goes on after a refused op");
    /* a large put (its bytes on the bulk comm) refused at the target: its bytes are dropped there
     * and the pair's stream stays in step for the next large put */
    PT_CHECK(g_rma->iput(g_rctx, 0, 0, R->mh_src, 3u << 20, R->data_bytes - (1u << 20), R->mh_data, 1, &req) == 0,
             "oob large iput");
    PT_CHECK(wait_req(R->comm, req, 10) == STRAND_INVALID_ARGUMENT, "remote out-of-range large put fails");
    PT_CHECK(g_rma->iput(g_rctx, 0, 0, R->mh_src, 3u << 20, 0, R->mh_data, 1, &req) == 0, "large iput after");
    PT_CHECK(wait_req(R->comm, req, 10) == STRAND_SUCCESS, "a large put after a refused one");
  }
  if (barrier(g_n)) return -1;
  if (g_me == 1) {
    bool err = false;
    PT_CHECK(g_rma->queryLastError(g_rctx, &err) == STRAND_SUCCESS && err, "target's queryLastError");
  }
  return barrier(g_n);
}

/* The last rank dies; every survivor's op to it must fail within 5 s. */
static int phase_death(rank_t *R) {
  int victim = g_n - 1;
  if (g_me == victim) kill(getpid(), SIGKILL);
  double t0 = pt_now_s();
  strand_result_t rc = STRAND_SUCCESS;
  while (rc == STRAND_SUCCESS && pt_now_s() - t0 < 5) {
    void *req = NULL;
    rc = g_rma->iput(g_rctx, 0, 0, R->mh_src, 1000, (size_t)g_me * SEG, R->mh_data, (uint32_t)victim, &req);
    if (rc == STRAND_SUCCESS) rc = wait_req(R->comm, req, 5);
  }
  PT_CHECK(rc == STRAND_REMOTE_ERROR, "rank %d: ops to dead rank %d: %d after %.1f s", g_me, victim, rc,
           pt_now_s() - t0);
  bool err = false;
  PT_CHECK(g_rma->queryLastError(g_rctx, &err) == STRAND_SUCCESS && err, "queryLastError after a death");
  /* the survivors still reach each other */
  if (g_n > 2) {
    void *req = NULL;
    int t = (g_me + 1) % (g_n - 1);
    PT_CHECK(g_rma->iput(g_rctx, 0, 0, R->mh_src, 70000, (size_t)g_me * SEG, R->mh_data, (uint32_t)t, &req) == 0 &&
                 wait_req(R->comm, req, 10) == STRAND_SUCCESS, "survivors still connected");
  }
  return barrier(g_n - 1);
}

static int phase_close(rank_t *R) {
  PT_CHECK(g_rma->deregMrSym(R->comm, R->mh_data) == 0, "dereg");
  PT_CHECK(g_rma->deregMrSym(R->comm, R->mh_data) == STRAND_INVALID_ARGUMENT, "dereg twice");
  PT_CHECK(g_rma->deregMrSym(R->comm, R->mh_src) == 0, "dereg");
  /* mh_sig and mh_scratch and the context are left for closeColl to free */
  void *rctx = g_rctx;
  PT_CHECK(g_rma->closeColl(R->comm) == STRAND_SUCCESS, "closeColl");
  g_rctx = NULL;
  void *req = NULL;
  int done = 0;
  bool err;
  PT_CHECK(g_rma->iput(rctx, 0, 0, R->mh_sig, 8, 0, R->mh_sig, 0, &req) == STRAND_INVALID_ARGUMENT, "iput after close");
  PT_CHECK(g_rma->test(R->comm, (void *)0x99, &done) == STRAND_INVALID_ARGUMENT, "test after close");
  PT_CHECK(g_rma->rmaProgress(rctx) == STRAND_INVALID_ARGUMENT, "progress after close");
  PT_CHECK(g_rma->queryLastError(rctx, &err) == STRAND_INVALID_ARGUMENT, "queryLastError after close");
  PT_CHECK(g_rma->regMrSym(R->comm, R->data, 8, STRAND_PTR_HOST, 0, &req) == STRAND_INVALID_ARGUMENT,
           "regMrSym after close");
  PT_CHECK(g_rma->closeColl(R->comm) == STRAND_INVALID_ARGUMENT, "closeColl twice");
  PT_CHECK(g_rma->closeListen(R->lcomm) == STRAND_SUCCESS, "closeListen");
  PT_CHECK(g_rma->finalize(R->ctx) == STRAND_SUCCESS, "finalize");
  PT_CHECK(g_rma->finalize(R->ctx) == STRAND_INVALID_ARGUMENT, "finalize twice");
  char handle[STRAND_NET_HANDLE_MAXSIZE];
  void *l = NULL;
  PT_CHECK(g_rma->listen(R->ctx, 0, handle, &l) == STRAND_INVALID_ARGUMENT, "listen after finalize");
  free(R->data);
  free(R->src);
  free(R->sig);
  free(R->scratch);
  for (int i = 0; g_gpu && i < 4; i++) strand_cuda()->memFree(R->d[i]);
  return 0;
}

/* ------------------------------------------------------------------------ the stingy wrapper */

static const strand_net_t *g_real;
static strand_net_t g_stingy;
static unsigned g_calls;

static strand_result_t stingy_isend(void *comm, void *data, size_t size, int tag, void *mh, void *ph, void **req) {
  if (++g_calls % 3 == 0) {
    *req = NULL;
    return STRAND_SUCCESS;
  }
  return g_real->isend(comm, data, size, tag, mh, ph, req);
}

static strand_result_t stingy_irecv(void *comm, int n, void **data, size_t *sizes, int *tags, void **mhs,
                                    void **phs, void **req) {
  if (++g_calls % 3 == 0) {
    *req = NULL;
    return STRAND_SUCCESS;
  }
  return g_real->irecv(comm, n, data, sizes, tags, mhs, phs, req);
}

static int run_rank(const char *plugin, bool stingy) {
  const strand_net_t *net = pt_load_table(plugin, "ncclNetPlugin_v12");
  PT_CHECK(net, "load %s", plugin);
  if (stingy) {
    g_real = net;
    g_stingy = *net;
    g_stingy.isend = stingy_isend;
    g_stingy.irecv = stingy_irecv;
    net = &g_stingy;
  }
  rank_t R = {0};
  if (setup(&R, net) || phase_puts(&R) || phase_add(&R) || phase_get(&R) || phase_refusals(&R) ||
      phase_death(&R) || phase_close(&R))
    return -1;
  return 0;
}

int main(int argc, char **argv) {
  const char *mode = argc == 4 ? argv[3] : "";
  if (argc != 3 && !(argc == 4 && (!strcmp(mode, "stingy") || !strcmp(mode, "gpu")))) {
    fprintf(stderr, "usage: %s <libnccl-net-strand-socket.so> <nranks> [stingy|gpu]\n", argv[0]);
    return 2;
  }
  g_n = atoi(argv[2]);
  if (g_n < 2 || g_n > MAXR) return 2;
  g_gpu = !strcmp(mode, "gpu");
  if (g_gpu && !pt_gpu_usable()) {
    printf("SKIP: no usable GPU (libcuda.so.1 and GPU 0) for GPU windows\n");
    return 77;
  }
  g_shm = mmap(NULL, sizeof *g_shm, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (g_shm == MAP_FAILED) return 2;
  pid_t pids[MAXR];
  for (int r = 0; r < g_n; r++) {
    pids[r] = fork();
    if (pids[r] == 0) {
      g_me = r;
      snprintf(g_who, sizeof g_who, "test_gin_proxy rank %d", r);
      alarm(60); /* a hung rank must not hang the suite */
      int rc = run_rank(argv[1], !strcmp(mode, "stingy"));
      if (rc) fprintf(stderr, "rank %d FAILED\n", r);
      exit(rc || pt_failures ? 1 : 0);
    }
  }
  int bad = 0;
  for (int r = 0; r < g_n; r++) {
    int st = 0;
    waitpid(pids[r], &st, 0);
    bool want_kill = r == g_n - 1;
    bool ok = want_kill ? WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL : WIFEXITED(st) && WEXITSTATUS(st) == 0;
    if (!ok) {
      fprintf(stderr, "rank %d: unexpected end (status 0x%x)\n", r, st);
      bad = 1;
    }
  }
  printf("%s: %d ranks%s\n", bad ? "FAIL" : "ok", g_n, *mode ? (g_gpu ? " (GPU windows)" : " (stingy net)") : "");
  return bad;
}
