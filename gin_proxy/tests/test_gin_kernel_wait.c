/* gin_proxy with a GPU kernel waiting for its signal: the shape of NCCL's device API, without NCCL.
 * Usage: test_gin_kernel_wait <libnccl-net-strand-socket.so> [rounds]     (GPU machines only)
 *
 * Two ranks (processes, fork) over strand-socket on loopback. Rank 1 (the target) registers GPU
 * windows on GPU 0, allocated as NCCL allocates them (cuMemCreate + cuMemMap), and launches on a
 * stream of its own a one-thread kernel that spins until its signal word reaches the round's
 * value (bounded by the GPU's clock: it gives up after 2 s) and, in the "queued" rounds (all but
 * the first), a second launch behind it on the same stream, as an application that enqueues its
 * next kernel does. Rank 0 (host windows, no GPU work) then puts 4 KiB (odd rounds: one staged
 * copy) or 256 KiB (even rounds: the bulk path's copies) with a signal increment. The target keeps
 * calling rmaProgress, which applies the put: copies into the GPU window and the signal's add, on
 * gin_proxy's own stream.
 *
 * Each round passes when the kernel saw the signal before giving up and the data is right. The
 * longest single rmaProgress call is printed too: gin_proxy waits for each small copy and add, so
 * one that cannot start holds the caller's thread for that long.
 *
 * What it shows: the CUDA driver spreads a context's streams over CUDA_DEVICE_MAX_CONNECTIONS
 * hardware queues (8 by default). When gin_proxy's stream shares a queue with the waiting kernel's
 * stream and another launch is queued behind that kernel, the copy waits behind the launch, which
 * waits behind the kernel, which waits for the copy (docs/plugins/gin.md, "A shared hardware
 * queue, and a context of our own"). CUDA_DEVICE_MAX_CONNECTIONS=1 forces the sharing: with
 * STRAND_GIN_CUDA_CONTEXT=window every queued round fails (the broken case the test must catch);
 * by default gin_proxy then moves the windows in a context of its own and every round passes.
 * Exit 0 all rounds passed, 1 one failed, 77 no usable GPU (CI). Run by meson (gin_proxy suite,
 * one queue) and by tests/e2e/gin_e2e.sh (default mode: one queue, the default, the broken case). */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "gpu_wait_ptx.h"
#include "plugin_test.h"
#include "strand/cuda_driver.h"
#include "strand/gin_proxy.h"

#define PUT_BYTES (256u << 10) /* the even rounds' put; the odd rounds' is SMALL_PUT */
#define SMALL_PUT (4u << 10)
/* The kernel's own bound, so that a stuck round ends instead of hanging: 2 s, or TGKW_GIVE_UP_S
 * (longer than gin_proxy's 60 s bound on a GPU wait, to watch that bound fail the comm). */
static uint64_t g_give_up_ns = 2000000000ull;

typedef struct {
  char handles[2][STRAND_NET_HANDLE_MAXSIZE];
  int count, gen;
  int armed; /* the round whose kernels the target has launched */
} shm_t;

static shm_t *g_shm;
static int g_me;
static char g_who[48]; /* "test_gin_kernel_wait rank R", for the barrier's timeout */
static const strand_rma_t *g_rma;
static void *g_rctx;

static void pump(void) {
  if (g_rctx) g_rma->rmaProgress(g_rctx);
}

static int barrier(void) { return pt_proc_barrier(&g_shm->count, &g_shm->gen, 2, pump, 30, g_who); }

typedef struct {
  void *lcomm, *ctx, *comm;
  void *mh_data, *mh_sig, *mh_src;
  char *host_src;                 /* rank 0: the source window (host memory) */
  char *host_data, *host_sig;     /* rank 0: its (unused) data and signal windows */
  strand_cu_devptr_t data, sig, out; /* rank 1: the GPU windows and the kernels' results */
  strand_cu_stream_t stream;      /* rank 1: the application's stream */
  strand_cu_function_t wait_fn;
} rank_t;

static int setup(rank_t *R, const strand_net_t *net) {
  g_rma = strand_gin_proxy_for(net);
  PT_CHECK(g_rma, "strand_gin_proxy_for");
  PT_CHECK(g_rma->init(&R->ctx, 42, NULL) == STRAND_SUCCESS, "init");
  char handle[STRAND_NET_HANDLE_MAXSIZE] = {0};
  PT_CHECK(g_rma->listen(R->ctx, 0, handle, &R->lcomm) == STRAND_SUCCESS, "listen");
  memcpy(g_shm->handles[g_me], handle, sizeof handle);
  if (barrier()) return -1;
  void *hs[2] = {g_shm->handles[0], g_shm->handles[1]};
  PT_CHECK(g_rma->connect(NULL, hs, 2, g_me, R->lcomm, &R->comm) == STRAND_SUCCESS, "connect");
  strand_rma_config_t cfg = {.nContexts = 1, .trafficClass = 0, .rankStride = 1};
  PT_CHECK(g_rma->createContext(R->comm, &cfg, &g_rctx) == STRAND_SUCCESS, "createContext");
  void *data, *sig, *src;
  int type;
  if (g_me == 1) {
    const strand_cuda_t *cu = strand_cuda();
    int dev = -1;
    strand_cu_ctx_t ctx = NULL;
    strand_cu_module_t mod = NULL;
    PT_CHECK(cu && cu->deviceGet(&dev, 0) == 0 && cu->devicePrimaryCtxRetain(&ctx, dev) == 0 &&
                 cu->ctxSetCurrent(ctx) == 0, "GPU 0's context");
    /* the windows as NCCL allocates them (memory of no context); the results in plain memory */
    PT_CHECK(pt_cuda_vmm_alloc(0, PUT_BYTES, &R->data) == 0 && pt_cuda_vmm_alloc(0, 64, &R->sig) == 0 &&
                 cu->memAlloc(&R->out, 64) == 0, "allocating GPU memory");
    char zero[64] = {0};
    PT_CHECK(cu->memcpyHtoDAsync(R->sig, zero, sizeof zero, NULL) == 0 && cu->streamSynchronize(NULL) == 0,
             "zeroing the signal window");
    PT_CHECK(cu->streamCreate(&R->stream, STRAND_CU_STREAM_NON_BLOCKING) == 0, "cuStreamCreate");
    /* loaded now: a first launch that loads its module lazily can wait for the GPU to go idle */
    PT_CHECK(cu->moduleLoadData(&mod, pt_wait_ge_ptx) == 0 &&
                 cu->moduleGetFunction(&R->wait_fn, mod, "pt_wait_ge") == 0, "loading the wait kernel");
    data = (void *)(uintptr_t)R->data, sig = (void *)(uintptr_t)R->sig, src = data;
    type = STRAND_PTR_CUDA;
  } else {
    R->host_src = calloc(1, PUT_BYTES);
    R->host_data = calloc(1, PUT_BYTES);
    R->host_sig = calloc(1, 64);
    PT_CHECK(R->host_src && R->host_data && R->host_sig, "calloc");
    data = R->host_data, sig = R->host_sig, src = R->host_src;
    type = STRAND_PTR_HOST;
  }
  /* the same windows in the same order on both ranks (rank 1's source window is its data window) */
  PT_CHECK(g_rma->regMrSym(R->comm, data, PUT_BYTES, type, 0, &R->mh_data) == 0, "reg data");
  PT_CHECK(g_rma->regMrSym(R->comm, sig, 64, type, STRAND_GIN_MR_FLAG_FORCE_SO, &R->mh_sig) == 0, "reg sig");
  PT_CHECK(g_rma->regMrSym(R->comm, src, PUT_BYTES, type, 0, &R->mh_src) == 0, "reg src");
  return barrier();
}

static int launch_wait(rank_t *R, uint64_t want, uint64_t bound, strand_cu_devptr_t out) {
  void *params[] = {&R->sig, &want, &bound, &out};
  PT_CHECK(strand_cuda()->launchKernel(R->wait_fn, 1, 1, 1, 1, 1, 1, 0, R->stream, params, NULL) == 0,
           "launching the wait kernel");
  return 0;
}

/* The target's round k: kernel(s) launched, then rmaProgress until the stream is idle. */
static int target_round(rank_t *R, int k, bool queued) {
  const strand_cuda_t *cu = strand_cuda();
  if (launch_wait(R, (uint64_t)k, g_give_up_ns, R->out)) return -1;
  if (queued && launch_wait(R, 0, 0, R->out + 16)) return -1;
  __atomic_store_n(&g_shm->armed, k, __ATOMIC_RELEASE);
  double t0 = pt_now_s(), longest = 0, end = t0 + 15 + g_give_up_ns / 1e9;
  strand_cu_result_t q;
  while ((q = cu->streamQuery(R->stream)) == STRAND_CU_ERROR_NOT_READY && pt_now_s() < end) {
    double a = pt_now_s();
    pump();
    double d = pt_now_s() - a;
    if (d > longest) longest = d;
  }
  PT_CHECK(q == STRAND_CU_SUCCESS, "round %d: the stream did not finish within the kernel's bound + 15 s "
           "(CUresult %d)", k, q);
  uint64_t res[2] = {0};
  char *got = malloc(PUT_BYTES);
  PT_CHECK(got, "malloc");
  PT_CHECK(cu->memcpyDtoHAsync(res, R->out, sizeof res, R->stream) == 0 &&
               cu->memcpyDtoHAsync(got, R->data, PUT_BYTES, R->stream) == 0 &&
               cu->streamSynchronize(R->stream) == 0, "reading the results");
  long bad = pt_verify(got, k % 2 ? SMALL_PUT : PUT_BYTES, (unsigned)(100 + k));
  free(got);
  bool seen = res[0] >= (uint64_t)k && res[1] < g_give_up_ns;
  printf("round %d (%s, %s put): %s after %.1f us (signal %llu); longest rmaProgress call %.1f ms\n", k,
         queued ? "a launch queued behind the kernel" : "the kernel alone", k % 2 ? "4 KiB" : "256 KiB",
         seen ? "the kernel saw the signal" : "the kernel GAVE UP waiting", res[1] / 1e3,
         (unsigned long long)res[0], longest * 1e3);
  fflush(stdout);
  PT_CHECK(seen, "round %d: the signal did not reach the waiting kernel within %.0f s", k, g_give_up_ns / 1e9);
  PT_CHECK(bad < 0, "round %d: the put's data is wrong at byte %ld", k, bad);
  return 0;
}

static int source_round(rank_t *R, int k) {
  double end = pt_now_s() + 30;
  while (__atomic_load_n(&g_shm->armed, __ATOMIC_ACQUIRE) != k) {
    pump();
    PT_CHECK(pt_now_s() < end, "round %d: the target never launched", k);
  }
  usleep(50000); /* the kernel is running and the queued launch waits behind it */
  size_t n = k % 2 ? SMALL_PUT : PUT_BYTES;
  pt_fill(R->host_src, n, (unsigned)(100 + k));
  void *req = NULL;
  PT_CHECK(g_rma->iputSignal(g_rctx, 0, 0, R->mh_src, n, 0, R->mh_data, 1, 0, R->mh_sig, 1,
                             STRAND_GIN_SIGNAL_OP_INC, true, &req) == STRAND_SUCCESS && req, "iputSignal");
  end = pt_now_s() + 30 + g_give_up_ns / 1e9;
  for (;;) {
    int done = 0;
    PT_CHECK(g_rma->test(R->comm, req, &done) == STRAND_SUCCESS, "round %d: the put failed", k);
    if (done) break;
    PT_CHECK(pt_now_s() < end, "round %d: the put was not done within 30 s", k);
  }
  return 0;
}

static int run_rank(const char *plugin, int rounds) {
  const strand_net_t *net = pt_load_table(plugin, "ncclNetPlugin_v12");
  PT_CHECK(net, "load %s", plugin);
  rank_t R = {0};
  if (setup(&R, net)) return -1;
  int failed = 0;
  for (int k = 1; k <= rounds; k++) {
    bool queued = k > 1; /* round 1 alone, as the control */
    int rc = g_me == 1 ? target_round(&R, k, queued) : source_round(&R, k);
    if (rc) failed = 1;
    if (barrier()) return -1;
  }
  PT_CHECK(g_rma->closeColl(R.comm) == STRAND_SUCCESS && g_rma->closeListen(R.lcomm) == STRAND_SUCCESS &&
               g_rma->finalize(R.ctx) == STRAND_SUCCESS, "close");
  return failed ? -1 : 0;
}

int main(int argc, char **argv) {
  if (argc < 2 || argc > 3) {
    fprintf(stderr, "usage: %s <libnccl-net-strand-socket.so> [rounds]\n", argv[0]);
    return 2;
  }
  int rounds = argc == 3 ? atoi(argv[2]) : 4;
  if (rounds < 1) return 2;
  if (getenv("TGKW_GIVE_UP_S")) g_give_up_ns = (uint64_t)(atof(getenv("TGKW_GIVE_UP_S")) * 1e9);
  if (!pt_gpu_usable()) {
    printf("SKIP: no usable GPU (libcuda.so.1 and GPU 0)\n");
    return 77;
  }
  const char *conn = getenv("CUDA_DEVICE_MAX_CONNECTIONS");
  const char *mode = getenv("STRAND_GIN_CUDA_CONTEXT");
  printf("# test_gin_kernel_wait: %d rounds, CUDA_DEVICE_MAX_CONNECTIONS=%s, STRAND_GIN_CUDA_CONTEXT=%s\n", rounds,
         conn ? conn : "(unset: 8)", mode ? mode : "(unset: auto)");
  fflush(stdout);
  g_shm = mmap(NULL, sizeof *g_shm, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (g_shm == MAP_FAILED) return 2;
  pid_t pids[2];
  for (int r = 0; r < 2; r++) {
    pids[r] = fork();
    if (pids[r] == 0) {
      g_me = r;
      snprintf(g_who, sizeof g_who, "test_gin_kernel_wait rank %d", r);
      alarm(120 + (unsigned)(g_give_up_ns / 1000000000ull)); /* every wait above is bounded; the backstop */
      int rc = run_rank(argv[1], rounds);
      exit(rc || pt_failures ? 1 : 0);
    }
  }
  int bad = 0;
  for (int r = 0; r < 2; r++) {
    int st = 0;
    waitpid(pids[r], &st, 0);
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
      fprintf(stderr, "rank %d: failed (status 0x%x)\n", r, st);
      bad = 1;
    }
  }
  printf("%s: a kernel waiting for gin_proxy's signal, %d rounds\n", bad ? "FAIL" : "ok", rounds);
  return bad;
}
