/* gp_bench: what NCCL's device API gets from gin_proxy over a net, beside what the same net's
 * send/recv gives, measured in one run (docs/benchmarks/gin.md).
 *
 *   gp-bench <libnccl-net-strand-X.so> [gpu]
 *
 * Two processes (fork; handles through shared memory), one net table, host windows (or GPU windows
 * with "gpu": rank r on GPU r where the machine has two, else both on GPU 0). For each size,
 * median of 3 repetitions:
 *   put bw      rank 0 keeps DEPTH puts in flight to rank 1 (ITER puts), then one put+signal; the
 *               time until rank 1 sees the signal, as bytes/s
 *   send bw     the same bytes with the net's isend/irecv, DEPTH in flight, on a comm of its own
 *   put+signal round trip (8 B): rank 0 put+signals rank 1, which answers with a put+signal as soon
 *               as it sees it; half of the median round trip is the one-way latency
 *   send/recv round trip (8 B): the same ping-pong with isend/irecv
 * Both ranks keep calling the progress function (test / rmaProgress) as NCCL's proxy thread does. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "plugin_test.h"
#include "strand/cuda_driver.h"
#include "strand/gin_proxy.h"

/* A benchmark that goes wrong stops: the numbers after it would mean nothing. */
#define MUST(cond, ...)                                                                            \
  do {                                                                                             \
    if (!(cond)) {                                                                                 \
      pt_fail(__FILE__, __LINE__, #cond, __VA_ARGS__);                                             \
      _exit(1);                                                                                    \
    }                                                                                              \
  } while (0)

#define DEPTH 8
#define REPS 3
#define MAXB (64u << 20)

typedef struct {
  char rma_handles[2][STRAND_NET_HANDLE_MAXSIZE];
  char net_handle[STRAND_NET_HANDLE_MAXSIZE];
  int count, gen;
} shm_t;

static shm_t *g_shm;
static int g_me;
static bool g_gpu;
static const strand_rma_t *g_rma;
static const strand_net_t *g_net;
static void *g_rctx, *g_comm;

static void pump(void) {
  if (g_rctx) g_rma->rmaProgress(g_rctx);
}

/* Both processes at the same point; a peer that never comes ends the run (it would hang otherwise). */
static void barrier(void) {
  if (pt_proc_barrier(&g_shm->count, &g_shm->gen, 2, pump, 120, "gp-bench")) _exit(1);
}

static int cmp_d(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}
static double median3(double v[REPS]) {
  qsort(v, REPS, sizeof v[0], cmp_d);
  return v[REPS / 2];
}

/* ---------------------------------------------------------------------------- one-sided side */

typedef struct {
  char *win;  /* data window (host, or device address in gpu mode) */
  uint64_t *sig_host; /* host copy of the signal word read back in gpu mode */
  char *sig;  /* signal window */
  void *mh_win, *mh_sig;
} gwin_t;

static uint64_t sig_read(gwin_t *w) {
  if (!g_gpu) return __atomic_load_n((uint64_t *)(void *)w->sig, __ATOMIC_ACQUIRE);
  const strand_cuda_t *cu = strand_cuda();
  uint64_t v = 0;
  cu->memcpyDtoHAsync(&v, (strand_cu_devptr_t)(uintptr_t)w->sig, 8, NULL);
  cu->streamSynchronize(NULL);
  return v;
}

static void wait_sig(gwin_t *w, uint64_t want) {
  while (sig_read(w) < want) pump();
}

static void wait_req(void *req) {
  for (int done = 0; !done;) MUST(g_rma->test(g_comm, req, &done) == STRAND_SUCCESS, "test");
}

/* rank 0: n puts of `size` (DEPTH in flight), then a put+signal; rank 1 waits for the signal.
 * Returns seconds (rank 1's view: from the barrier to the signal). */
static double put_bw(gwin_t *w, size_t size, int n, uint64_t *expect) {
  barrier();
  double t0 = pt_now_s();
  if (g_me == 0) {
    void *reqs[DEPTH] = {0};
    for (int i = 0; i < n; i++) {
      void **slot = &reqs[i % DEPTH];
      if (*slot) wait_req(*slot);
      MUST(g_rma->iput(g_rctx, 0, 0, w->mh_win, size, 0, w->mh_win, 1, slot) == 0, "iput");
    }
    void *sreq = NULL;
    MUST(g_rma->iputSignal(g_rctx, 0, 0, NULL, 0, 0, NULL, 1, 0, w->mh_sig, 1, STRAND_GIN_SIGNAL_OP_ADD,
                                    true, &sreq) == 0, "iputSignal");
    for (int i = 0; i < DEPTH; i++)
      if (reqs[i]) wait_req(reqs[i]);
    wait_req(sreq);
  } else {
    wait_sig(w, ++*expect);
  }
  double t = pt_now_s() - t0;
  barrier();
  return t;
}

/* Ping-pong of put+signal (8 B); returns the round trip in seconds (rank 0's view). */
static double put_rtt(gwin_t *w, int n, uint64_t *expect) {
  barrier();
  double t0 = pt_now_s();
  for (int i = 0; i < n; i++) {
    void *req = NULL;
    if (g_me == 1) wait_sig(w, ++*expect);
    MUST(g_rma->iputSignal(g_rctx, 0, 0, w->mh_win, 8, 0, w->mh_win, (uint32_t)(1 - g_me), 0, w->mh_sig,
                                    1, STRAND_GIN_SIGNAL_OP_ADD, true, &req) == 0, "iputSignal");
    if (g_me == 0) wait_sig(w, ++*expect);
    wait_req(req);
  }
  double t = (pt_now_s() - t0) / n;
  barrier();
  return t;
}

/* -------------------------------------------------------------------------- two-sided side */

typedef struct {
  void *send, *recv, *smh, *rmh;
  char *buf;
} tcomm_t;

static void net_wait(void *req) {
  for (int done = 0, sz = 0; !done;) MUST(g_net->test(req, &done, &sz) == STRAND_SUCCESS, "net test");
}

static void *net_irecv(tcomm_t *t, size_t size) {
  void *req = NULL, *data = t->buf;
  int tag = 0;
  while (!req) MUST(g_net->irecv(t->recv, 1, &data, &size, &tag, &t->rmh, NULL, &req) == 0, "irecv");
  return req;
}
static void *net_isend(tcomm_t *t, size_t size) {
  void *req = NULL;
  while (!req) MUST(g_net->isend(t->send, t->buf, size, 0, t->smh, NULL, &req) == 0, "isend");
  return req;
}

static double send_bw(tcomm_t *t, size_t size, int n) {
  barrier();
  double t0 = pt_now_s();
  void *reqs[DEPTH] = {0};
  for (int i = 0; i < n; i++) {
    void **slot = &reqs[i % DEPTH];
    if (*slot) net_wait(*slot);
    *slot = g_me == 0 ? net_isend(t, size) : net_irecv(t, size);
  }
  for (int i = 0; i < DEPTH; i++)
    if (reqs[i]) net_wait(reqs[i]);
  double el = pt_now_s() - t0;
  barrier();
  return el;
}

static double send_rtt(tcomm_t *t, int n) {
  barrier();
  double t0 = pt_now_s();
  for (int i = 0; i < n; i++) {
    if (g_me == 0) {
      net_wait(net_isend(t, 8));
      net_wait(net_irecv(t, 8));
    } else {
      net_wait(net_irecv(t, 8));
      net_wait(net_isend(t, 8));
    }
  }
  double el = (pt_now_s() - t0) / n;
  barrier();
  return el;
}

/* A send comm to the peer and a receive comm from it, on the net's own context. */
static int net_pair(void *nctx, tcomm_t *t) {
  void *listen = NULL;
  strand_dev_handle_t *dh = NULL;
  char h[STRAND_NET_HANDLE_MAXSIZE];
  PT_CHECK(g_net->listen(nctx, 0, h, &listen) == 0, "net listen");
  if (g_me == 1) memcpy(g_shm->net_handle, h, sizeof h);
  barrier();
  /* one direction is enough for bandwidth; ping-pong needs both: rank 0 dials rank 1 and back */
  char peer[STRAND_NET_HANDLE_MAXSIZE];
  memcpy(peer, g_shm->net_handle, sizeof peer);
  barrier();
  if (g_me == 0) memcpy(g_shm->net_handle, h, sizeof h);
  barrier();
  if (g_me == 1) memcpy(peer, g_shm->net_handle, sizeof peer);
  double end = pt_now_s() + 30;
  while ((!t->send || !t->recv) && pt_now_s() < end) {
    if (!t->send) PT_CHECK(g_net->connect(nctx, 0, peer, &t->send, &dh) == 0, "net connect");
    if (!t->recv) PT_CHECK(g_net->accept(listen, &t->recv, &dh) == 0, "net accept");
  }
  PT_CHECK(t->send && t->recv, "net pair not formed in 30 s");
  g_net->closeListen(listen);
  t->buf = malloc(MAXB);
  PT_CHECK(t->buf, "malloc");
  memset(t->buf, 1, MAXB);
  if (g_net->regMr) {
    PT_CHECK(g_net->regMr(t->send, t->buf, MAXB, STRAND_PTR_HOST, &t->smh) == 0, "regMr");
    PT_CHECK(g_net->regMr(t->recv, t->buf, MAXB, STRAND_PTR_HOST, &t->rmh) == 0, "regMr");
  }
  return 0;
}

static int run(const char *plugin) {
  g_net = pt_load_table(plugin, "ncclNetPlugin_v12");
  PT_CHECK(g_net, "load %s", plugin);
  g_rma = strand_gin_proxy_for(g_net);
  PT_CHECK(g_rma, "gin_proxy");
  void *ctx = NULL, *lcomm = NULL, *nctx = NULL;
  PT_CHECK(g_rma->init(&ctx, 1, NULL) == 0, "init");
  PT_CHECK(g_net->init(&nctx, 2, NULL, NULL, NULL) == 0, "net init");
  char h[STRAND_NET_HANDLE_MAXSIZE] = {0};
  PT_CHECK(g_rma->listen(ctx, 0, h, &lcomm) == 0, "listen");
  memcpy(g_shm->rma_handles[g_me], h, sizeof h);
  barrier();
  void *hs[2] = {g_shm->rma_handles[0], g_shm->rma_handles[1]};
  PT_CHECK(g_rma->connect(NULL, hs, 2, g_me, lcomm, &g_comm) == 0, "connect");
  strand_rma_config_t cfg = {.nContexts = 1, .trafficClass = -1, .rankStride = 1};
  PT_CHECK(g_rma->createContext(g_comm, &cfg, &g_rctx) == 0, "createContext");
  gwin_t w = {0};
  int type = STRAND_PTR_HOST;
  if (g_gpu) {
    const strand_cuda_t *cu = strand_cuda();
    int dev = -1;
    strand_cu_ctx_t cctx = NULL;
    strand_cu_devptr_t d = 0, s = 0;
    /* one GPU per rank where there are two (as NCCL runs: two processes time-sharing one GPU
     * pay a context switch on every copy and signal), else both on GPU 0 */
    if (cu && cu->deviceGet(&dev, g_me) != 0) dev = -1;
    PT_CHECK(cu && (dev >= 0 || cu->deviceGet(&dev, 0) == 0) && cu->devicePrimaryCtxRetain(&cctx, dev) == 0 &&
                 cu->ctxSetCurrent(cctx) == 0 && cu->memAlloc(&d, MAXB) == 0 && cu->memAlloc(&s, 4096) == 0,
             "GPU windows");
    uint64_t zero[8] = {0};
    cu->memcpyHtoDAsync(s, zero, sizeof zero, NULL);
    cu->streamSynchronize(NULL);
    w.win = (char *)(uintptr_t)d;
    w.sig = (char *)(uintptr_t)s;
    type = STRAND_PTR_CUDA;
  } else {
    w.win = calloc(1, MAXB);
    w.sig = calloc(1, 4096);
  }
  PT_CHECK(g_rma->regMrSym(g_comm, w.win, MAXB, type, 0, &w.mh_win) == 0, "reg win");
  PT_CHECK(g_rma->regMrSym(g_comm, w.sig, 4096, type, STRAND_GIN_MR_FLAG_FORCE_SO, &w.mh_sig) == 0, "reg sig");
  tcomm_t t = {0};
  if (net_pair(nctx, &t)) return -1;
  uint64_t expect = 0;
  if (g_me == 1)
    printf("# gp-bench: %s, 2 processes, %s windows; median of %d; bandwidth GB/s (1e9 B/s)\n"
           "%10s %12s %12s %8s\n", g_net->name, g_gpu ? "GPU" : "host", REPS, "size", "gin put", "send/recv",
           "ratio");
  for (size_t size = 64u << 10; size <= MAXB; size *= 4) {
    int n = (int)((256u << 20) / size);
    if (n < 8) n = 8;
    double p[REPS], s[REPS];
    for (int r = 0; r < REPS; r++) {
      p[r] = put_bw(&w, size, n, &expect);
      s[r] = send_bw(&t, size, n);
    }
    double pb = (double)size * n / median3(p) / 1e9, sb = (double)size * n / median3(s) / 1e9;
    if (g_me == 1) printf("%10zu %12.2f %12.2f %8.2f\n", size, pb, sb, pb / sb);
    fflush(stdout);
  }
  double pr[REPS], sr[REPS];
  for (int r = 0; r < REPS; r++) {
    pr[r] = put_rtt(&w, 2000, &expect);
    sr[r] = send_rtt(&t, 2000);
  }
  if (g_me == 1) fflush(stdout);
  barrier();
  if (g_me == 0)
    printf("# 8 B round trip (us): gin put+signal %.1f, send/recv %.1f, ratio %.2f\n", median3(pr) * 1e6,
           median3(sr) * 1e6, median3(pr) / median3(sr));
  fflush(stdout);
  return 0;
}

int main(int argc, char **argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: %s <libnccl-net-strand-X.so> [gpu]\n", argv[0]);
    return 2;
  }
  g_gpu = argc > 2 && !strcmp(argv[2], "gpu");
  g_shm = mmap(NULL, sizeof *g_shm, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (g_shm == MAP_FAILED) return 2;
  pid_t pids[2];
  for (int r = 0; r < 2; r++) {
    pids[r] = fork();
    if (pids[r] == 0) {
      g_me = r;
      alarm(300);
      _exit(run(argv[1]) || pt_failures ? 1 : 0);
    }
  }
  int bad = 0;
  for (int r = 0; r < 2; r++) {
    int st = 0;
    waitpid(pids[r], &st, 0);
    if (!WIFEXITED(st) || WEXITSTATUS(st)) bad = 1;
  }
  return bad;
}
