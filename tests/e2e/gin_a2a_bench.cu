// gin_a2a_bench: an all-to-all written with NCCL's device API (GIN puts with a signal per peer)
// beside NCCL's own ncclAlltoAll, on the same communicator, in one process with one thread per
// GPU (docs/benchmarks/gin.md).
//
//   gin_a2a_bench [gin|coll|both]     sizes: 4 KiB .. 64 MiB per peer (A2A_MAX_BYTES: less)
//
// With A2A_PROCS=N the ranks are N processes (fork) instead, rank r on GPU r mod the GPU count,
// each with NCCL_HOSTID strand-a2a-node-r so that NCCL sees one node per rank: N ranks on one GPU
// (under CUDA MPS), as run_e2e.sh runs them, for tests/e2e/gin_e2e.sh's a2a-procs mode.
//
// Each thread owns one GPU and one rank. Per size: 2 warm-up runs, then median of 3 timings of
// ITER back-to-back runs (CUDA events on the rank's stream); after the timings the receive
// buffer is checked byte for byte against what every peer sent (a wrong byte stops the run).
// "gin" needs a net plugin with GIN (NCCL 2.28+); without it the GIN column is skipped.
// Run with NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1 so that ncclAlltoAll also goes over the net.
#include <cuda_runtime.h>
#include <nccl.h>
#include <nccl_device.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <vector>

#define MAXB (64u << 20)
#define REPS 3

#define CK(call, what)                                                                           \
  do {                                                                                           \
    if (!(call)) {                                                                               \
      fprintf(stderr, "gin_a2a_bench rank %d: %s failed (%s:%d)\n", rank, what, __FILE__, __LINE__); \
      exit(1);                                                                                   \
    }                                                                                            \
  } while (0)
#define CUDA(x) CK((x) == cudaSuccess, #x)
#define NCCL(x) CK((x) == ncclSuccess, #x)

// One all-to-all: a barrier over the network (every peer is past its previous run, so its
// receive buffer may be overwritten), one put per peer carrying an increment of signal 0, then
// wait until every peer's put has landed here (the signal reached base + nRanks).
__global__ void gin_alltoall(ncclWindow_t sendwin, ncclWindow_t recvwin, size_t bytes, ncclDevComm dc) {
  ncclGin gin{dc, 0};
  uint64_t base = gin.readSignal(0);
  ncclGinBarrierSession<ncclCoopCta> bar{ncclCoopCta(), gin, ncclTeamWorld(dc), dc.railGinBarrier, blockIdx.x};
  bar.sync(ncclCoopCta(), cuda::memory_order_relaxed, ncclGinFenceLevel::Relaxed);
  for (int peer = threadIdx.x; peer < dc.nRanks; peer += blockDim.x)
    gin.put(ncclTeamWorld(dc), peer, recvwin, (size_t)dc.rank * bytes, sendwin, (size_t)peer * bytes, bytes,
            ncclGin_SignalInc{0});
  gin.waitSignal(ncclCoopCta(), 0, base + dc.nRanks);
  gin.flush(ncclCoopCta());
}

// The byte rank `from` sends to rank `to` at index i of its block.
static __host__ __device__ unsigned char pattern(int from, int to, size_t i) {
  return (unsigned char)(from * 37 + to * 11 + i * 7 + (i >> 12));
}

__global__ void fill(unsigned char *p, int me, int n, size_t bytes) {
  size_t total = (size_t)n * bytes;
  for (size_t k = blockIdx.x * (size_t)blockDim.x + threadIdx.x; k < total; k += (size_t)gridDim.x * blockDim.x)
    p[k] = pattern(me, (int)(k / bytes), k % bytes);
}

static int nranks;
static bool want_gin = true, want_coll = true;
static size_t max_bytes = MAXB;
// What the ranks share: threads in one process, or processes (A2A_PROCS) through a shared mapping.
struct shared_t {
  ncclUniqueId uid;
  int uid_ready;
  pthread_barrier_t bar;
  double results[2][32]; // [gin|coll][size index], rank 0's median seconds per run
  bool gin_ok;
};
static shared_t *sh;

static int iters(size_t bytes) { return bytes >= (1u << 20) ? 10 : 40; }

static void check(int rank, const unsigned char *dev, size_t bytes, const char *what) {
  std::vector<unsigned char> h((size_t)nranks * bytes);
  CUDA(cudaMemcpy(h.data(), dev, h.size(), cudaMemcpyDeviceToHost));
  for (int from = 0; from < nranks; from++)
    for (size_t i = 0; i < bytes; i++)
      if (h[(size_t)from * bytes + i] != pattern(from, rank, i)) {
        fprintf(stderr, "gin_a2a_bench rank %d: %s, %zu B per peer: byte %zu from rank %d is %u, want %u\n", rank,
                what, bytes, i, from, h[(size_t)from * bytes + i], pattern(from, rank, i));
        exit(1);
      }
}

static void *rank_main(void *arg) {
  int rank = (int)(long)arg, ngpu = 0;
  CUDA(cudaGetDeviceCount(&ngpu));
  CUDA(cudaSetDevice(rank % ngpu));
  ncclComm_t comm;
  NCCL(ncclCommInitRank(&comm, nranks, sh->uid, rank));
  cudaStream_t s;
  CUDA(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  void *sbuf, *rbuf;
  size_t total = (size_t)nranks * MAXB;
  NCCL(ncclMemAlloc(&sbuf, total));
  NCCL(ncclMemAlloc(&rbuf, total));
  ncclWindow_t swin, rwin;
  NCCL(ncclCommWindowRegister(comm, sbuf, total, &swin, NCCL_WIN_COLL_SYMMETRIC));
  NCCL(ncclCommWindowRegister(comm, rbuf, total, &rwin, NCCL_WIN_COLL_SYMMETRIC));
  ncclDevComm dc;
  ncclDevCommRequirements req;
  memset(&req, 0, sizeof req);
  req.railGinBarrierCount = 1;
  req.ginSignalCount = 1;
  req.ginForceEnable = true; // GIN even where every peer is reachable by load/store
  bool gin = want_gin && ncclDevCommCreate(comm, &req, &dc) == ncclSuccess;
  if (want_gin && !gin && rank == 0) fprintf(stderr, "# no GIN on this communicator: the gin column is skipped\n");
  pthread_barrier_wait(&sh->bar);
  if (!gin) sh->gin_ok = false;
  cudaEvent_t e0, e1;
  CUDA(cudaEventCreate(&e0));
  CUDA(cudaEventCreate(&e1));
  int si = 0;
  for (size_t bytes = 4096; bytes <= max_bytes; bytes *= 4, si++) {
    fill<<<256, 256, 0, s>>>((unsigned char *)sbuf, rank, nranks, bytes);
    for (int kind = 0; kind < 2; kind++) {
      if (kind == 0 ? !(sh->gin_ok && want_gin) : !want_coll) continue;
      CUDA(cudaMemsetAsync(rbuf, 0, (size_t)nranks * bytes, s));
      auto run = [&]() {
        if (kind == 0)
          gin_alltoall<<<1, 512, 0, s>>>(swin, rwin, bytes, dc);
        else
          NCCL(ncclAlltoAll(sbuf, rbuf, bytes, ncclUint8, comm, s));
      };
      for (int w = 0; w < 2; w++) run();
      double t[REPS];
      for (int r = 0; r < REPS; r++) {
        CUDA(cudaStreamSynchronize(s));
        pthread_barrier_wait(&sh->bar);
        CUDA(cudaEventRecord(e0, s));
        for (int i = 0; i < iters(bytes); i++) run();
        CUDA(cudaEventRecord(e1, s));
        CUDA(cudaEventSynchronize(e1));
        float ms = 0;
        CUDA(cudaEventElapsedTime(&ms, e0, e1));
        t[r] = ms * 1e-3 / iters(bytes);
      }
      std::sort(t, t + REPS);
      if (rank == 0) sh->results[kind][si] = t[REPS / 2];
      check(rank, (const unsigned char *)rbuf, bytes, kind == 0 ? "GIN all-to-all" : "ncclAlltoAll");
    }
  }
  pthread_barrier_wait(&sh->bar);
  if (gin) NCCL(ncclDevCommDestroy(comm, &dc));
  NCCL(ncclCommWindowDeregister(comm, swin));
  NCCL(ncclCommWindowDeregister(comm, rwin));
  NCCL(ncclMemFree(sbuf));
  NCCL(ncclMemFree(rbuf));
  NCCL(ncclCommFinalize(comm));
  NCCL(ncclCommDestroy(comm));
  return NULL;
}

static void print_results(void) {
  printf("# gin_a2a_bench: %d ranks (%s), all-to-all, median of %d; time per all-to-all (us) and "
         "bytes each rank sends to the others per second (GB/s)\n", nranks,
         getenv("A2A_PROCS") ? "one process each" : "one GPU each", REPS);
  printf("%12s %12s %10s %12s %10s %8s\n", "bytes/peer", "gin us", "gin GB/s", "a2a us", "a2a GB/s", "gin/a2a");
  int si = 0;
  for (size_t bytes = 4096; bytes <= max_bytes; bytes *= 4, si++) {
    double g = sh->results[0][si], c = sh->results[1][si], moved = (double)(nranks - 1) * bytes;
    printf("%12zu", bytes);
    if (g > 0) printf(" %12.1f %10.2f", g * 1e6, moved / g / 1e9); else printf(" %12s %10s", "-", "-");
    if (c > 0) printf(" %12.1f %10.2f", c * 1e6, moved / c / 1e9); else printf(" %12s %10s", "-", "-");
    if (g > 0 && c > 0) printf(" %8.2f\n", c / g); else printf(" %8s\n", "-");
  }
}

int main(int argc, char **argv) {
  int rank = -1;
  const char *mode = argc > 1 ? argv[1] : "both";
  want_gin = strcmp(mode, "coll") != 0;
  want_coll = strcmp(mode, "gin") != 0;
  if (getenv("A2A_MAX_BYTES")) max_bytes = std::min((size_t)strtoull(getenv("A2A_MAX_BYTES"), NULL, 0), (size_t)MAXB);
  sh = (shared_t *)mmap(NULL, sizeof *sh, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  CK(sh != MAP_FAILED, "mmap");
  sh->gin_ok = true;
  const char *procs = getenv("A2A_PROCS");
  if (procs) {
    // processes: CUDA and NCCL start in the children only (neither survives a fork); rank 0 makes
    // the unique id and hands it over through the mapping
    nranks = atoi(procs);
    CK(nranks >= 2, "A2A_PROCS of two or more");
    pthread_barrierattr_t a;
    pthread_barrierattr_init(&a);
    pthread_barrierattr_setpshared(&a, PTHREAD_PROCESS_SHARED);
    pthread_barrier_init(&sh->bar, &a, (unsigned)nranks);
    std::vector<pid_t> pids(nranks);
    for (int r = 0; r < nranks; r++) {
      pids[r] = fork();
      CK(pids[r] >= 0, "fork");
      if (pids[r] == 0) {
        rank = r;
        char host[64];
        snprintf(host, sizeof host, "strand-a2a-node-%d", r);
        setenv("NCCL_HOSTID", host, 1);
        if (r == 0) {
          NCCL(ncclGetUniqueId(&sh->uid));
          __atomic_store_n(&sh->uid_ready, 1, __ATOMIC_RELEASE);
        }
        while (!__atomic_load_n(&sh->uid_ready, __ATOMIC_ACQUIRE)) usleep(1000);
        rank_main((void *)(long)r);
        if (r == 0) print_results();
        fflush(stdout);
        _exit(0);
      }
    }
    int bad = 0;
    for (int r = 0; r < nranks; r++) {
      int st = 0;
      waitpid(pids[r], &st, 0);
      if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
        fprintf(stderr, "gin_a2a_bench: rank %d ended with status 0x%x\n", r, st);
        bad = 1;
      }
    }
    return bad;
  }
  CUDA(cudaGetDeviceCount(&nranks));
  CK(nranks >= 2, "two GPUs or more");
  NCCL(ncclGetUniqueId(&sh->uid));
  pthread_barrier_init(&sh->bar, NULL, (unsigned)nranks);
  std::vector<pthread_t> th(nranks);
  for (long r = 0; r < nranks; r++) CK(pthread_create(&th[r], NULL, rank_main, (void *)r) == 0, "pthread_create");
  for (int r = 0; r < nranks; r++) pthread_join(th[r], NULL);
  print_results();
  return 0;
}
