/* Real-NCCL end-to-end driver (not in CI): one process per GPU, in the style of nccl-tests.
 *
 *   nccl_e2e --rank R --nranks N --id-file PATH [--check] [--check-counts C,C,..] [--perf OP]
 *            [--minbytes B] [--maxbytes B] [--factor F] [--sizes B,B,..] [--tag TEXT]
 *
 * The launcher (run_e2e.sh) gives every process its own NCCL_HOSTID, so NCCL sees N nodes and
 * every byte between the ranks crosses the network plugin. Rank 0 writes the ncclUniqueId to
 * --id-file (atomically, by rename); the others poll for it (bounded).
 *
 * --check   verifies results: all-reduce sum/prod/max/min over float, half, bfloat16, int32,
 *           int64; all-gather; reduce-scatter; broadcast from every root; send/recv around the
 *           ring; all-to-all (grouped send/recv). Inputs are small integers so every result is
 *           exact in every type. Exit status 1 on any wrong element. --check-counts replaces the
 *           element counts checked (default 1,1000,262147,4M; 0 is allowed: a zero-byte
 *           operation; 256M floats = 1 GiB).
 * --perf OP sweeps sizes (allreduce | allgather | reducescatter | broadcast | sendrecv |
 *           alltoall), float, printing time and algorithm/bus bandwidth like nccl-tests. */
#include <cuda_runtime.h>
#include <nccl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define CUDA(x)                                                                                    \
  do {                                                                                             \
    cudaError_t e_ = (x);                                                                          \
    if (e_ != cudaSuccess) {                                                                       \
      fprintf(stderr, "rank %d: %s failed: %s\n", g_rank, #x, cudaGetErrorString(e_));             \
      exit(2);                                                                                     \
    }                                                                                              \
  } while (0)
#define NCCL(x)                                                                                    \
  do {                                                                                             \
    ncclResult_t r_ = (x);                                                                         \
    if (r_ != ncclSuccess) {                                                                       \
      fprintf(stderr, "rank %d: %s failed: %s (%s)\n", g_rank, #x, ncclGetErrorString(r_),        \
              ncclGetLastError(NULL));                                                             \
      exit(2);                                                                                     \
    }                                                                                              \
  } while (0)

static int g_rank, g_nranks;
static ncclComm_t g_comm;
static cudaStream_t g_stream;
static long g_wrong, g_checks;

static double now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* ---- host-side element conversion (all values are small integers: exact everywhere) ---- */
static uint16_t f2h(float f) { /* float -> IEEE half, exact for small integers */
  if (f == 0) return 0;
  uint32_t x;
  memcpy(&x, &f, 4);
  uint32_t sign = (x >> 16) & 0x8000;
  int exp = (int)((x >> 23) & 0xff) - 127 + 15;
  uint32_t mant = (x >> 13) & 0x3ff;
  return (uint16_t)(sign | ((uint32_t)exp << 10) | mant);
}
static float h2f(uint16_t h) {
  if ((h & 0x7fff) == 0) return 0;
  uint32_t sign = (uint32_t)(h & 0x8000) << 16;
  uint32_t exp = (uint32_t)(((h >> 10) & 0x1f) - 15 + 127);
  uint32_t mant = (uint32_t)(h & 0x3ff) << 13;
  uint32_t x = sign | (exp << 23) | mant;
  float f;
  memcpy(&f, &x, 4);
  return f;
}
static uint16_t f2bf(float f) {
  uint32_t x;
  memcpy(&x, &f, 4);
  return (uint16_t)(x >> 16);
}
static float bf2f(uint16_t b) {
  uint32_t x = (uint32_t)b << 16;
  float f;
  memcpy(&f, &x, 4);
  return f;
}

static size_t type_size(ncclDataType_t t) {
  switch (t) {
    case ncclHalf: case ncclBfloat16: return 2;
    case ncclInt64: return 8;
    default: return 4;
  }
}
static const char *type_name(ncclDataType_t t) {
  switch (t) {
    case ncclFloat: return "float";
    case ncclHalf: return "half";
    case ncclBfloat16: return "bfloat16";
    case ncclInt32: return "int32";
    case ncclInt64: return "int64";
    default: return "?";
  }
}
static const char *op_name(ncclRedOp_t o) {
  return o == ncclSum ? "sum" : o == ncclProd ? "prod" : o == ncclMax ? "max" : "min";
}
static void put(void *buf, ncclDataType_t t, size_t i, double v) {
  switch (t) {
    case ncclFloat: ((float *)buf)[i] = (float)v; break;
    case ncclHalf: ((uint16_t *)buf)[i] = f2h((float)v); break;
    case ncclBfloat16: ((uint16_t *)buf)[i] = f2bf((float)v); break;
    case ncclInt32: ((int32_t *)buf)[i] = (int32_t)v; break;
    case ncclInt64: ((int64_t *)buf)[i] = (int64_t)v; break;
    default: break;
  }
}
static double get(const void *buf, ncclDataType_t t, size_t i) {
  switch (t) {
    case ncclFloat: return ((const float *)buf)[i];
    case ncclHalf: return h2f(((const uint16_t *)buf)[i]);
    case ncclBfloat16: return bf2f(((const uint16_t *)buf)[i]);
    case ncclInt32: return ((const int32_t *)buf)[i];
    case ncclInt64: return (double)((const int64_t *)buf)[i];
    default: return 0;
  }
}

/* Input element i of rank r for test `salt`: 1..4, so a product over 2 ranks stays <= 16 and a
 * sum over up to 8 ranks <= 32 (exact in bfloat16's 8-bit mantissa). */
static double val(int r, size_t i, int salt) { return (double)((i * 7 + (size_t)r * 3 + (size_t)salt) % 4 + 1); }

static void check_vals(const char *what, const void *host, ncclDataType_t t, size_t n,
                       double (*expect)(size_t, void *), void *arg) {
  long bad = 0;
  size_t first = 0;
  for (size_t i = 0; i < n; i++) {
    if (get(host, t, i) != expect(i, arg)) {
      if (bad++ == 0) first = i;
    }
  }
  g_checks++;
  if (bad) {
    g_wrong += bad;
    printf("rank %d: WRONG %s: %ld of %zu elements, first at %zu: got %g expected %g\n", g_rank,
           what, bad, n, first, get(host, t, first), expect(first, arg));
    /* The first few values from the first wrong one, to tell a shift or stale data from noise. */
    printf("rank %d:   got     ", g_rank);
    for (size_t i = first; i < n && i < first + 12; i++) printf(" %g", get(host, t, i));
    printf("\nrank %d:   expected", g_rank);
    for (size_t i = first; i < n && i < first + 12; i++) printf(" %g", expect(i, arg));
    printf("\n");
  }
}

struct red_arg { ncclRedOp_t op; int salt; size_t base; };
static double expect_red(size_t i, void *a_) {
  struct red_arg *a = a_;
  double acc = val(0, a->base + i, a->salt);
  for (int r = 1; r < g_nranks; r++) {
    double v = val(r, a->base + i, a->salt);
    switch (a->op) {
      case ncclSum: acc += v; break;
      case ncclProd: acc *= v; break;
      case ncclMax: acc = v > acc ? v : acc; break;
      default: acc = v < acc ? v : acc; break;
    }
  }
  return acc;
}
struct gather_arg { size_t per; int salt; };
static double expect_gather(size_t i, void *a_) {
  struct gather_arg *a = a_;
  return val((int)(i / a->per), i % a->per, a->salt);
}
struct one_arg { int rank; int salt; size_t base; };
static double expect_one(size_t i, void *a_) {
  struct one_arg *a = a_;
  return val(a->rank, a->base + i, a->salt);
}

static void *dev_alloc(size_t bytes) {
  void *p = NULL;
  CUDA(cudaMalloc(&p, bytes ? bytes : 1));
  return p;
}

/* Input staging for the checks, ordered on g_stream (issue 12). cudaMemcpy from pageable memory
 * returns once the bytes are staged, before the DMA to the device lands, and cudaMemset is
 * asynchronous; both run on the legacy stream, which a cudaStreamNonBlocking stream such as
 * g_stream does not wait for. The collective could then read the previous test's input (seen
 * under MPS as one rank's contribution from test salt-1 in every element). */
static void to_device(void *dst, const void *src, size_t bytes) {
  CUDA(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, g_stream));
  CUDA(cudaStreamSynchronize(g_stream));
}

static size_t g_check_counts[16] = {1, 1000, 262147, 4 << 20};
static size_t g_ncheck_counts = 4;

static void run_checks(void) {
  const size_t *counts = g_check_counts;
  const ncclDataType_t types[] = {ncclFloat, ncclHalf, ncclBfloat16, ncclInt32, ncclInt64};
  const ncclRedOp_t ops[] = {ncclSum, ncclProd, ncclMax, ncclMin};
  size_t maxc = 1;
  for (size_t ci = 0; ci < g_ncheck_counts; ci++) maxc = counts[ci] > maxc ? counts[ci] : maxc;
  const size_t maxbytes = maxc * 8 * (size_t)g_nranks;
  void *dsend = dev_alloc(maxbytes), *drecv = dev_alloc(maxbytes);
  void *hin = malloc(maxbytes), *hout = malloc(maxbytes);
  char what[160];
  int salt = 0;
  /* all-reduce: every type x op x count */
  for (size_t ti = 0; ti < 5; ti++) {
    for (size_t oi = 0; oi < 4; oi++) {
      for (size_t ci = 0; ci < g_ncheck_counts; ci++) {
        ncclDataType_t t = types[ti];
        size_t n = counts[ci], es = type_size(t);
        salt++;
        for (size_t i = 0; i < n; i++) put(hin, t, i, val(g_rank, i, salt));
        to_device(dsend, hin, n * es);
        CUDA(cudaMemsetAsync(drecv, 0xff, n * es, g_stream));
        NCCL(ncclAllReduce(dsend, drecv, n, t, ops[oi], g_comm, g_stream));
        CUDA(cudaStreamSynchronize(g_stream));
        CUDA(cudaMemcpy(hout, drecv, n * es, cudaMemcpyDeviceToHost));
        struct red_arg a = {ops[oi], salt, 0};
        snprintf(what, sizeof what, "allreduce %s %s count %zu", type_name(t), op_name(ops[oi]), n);
        check_vals(what, hout, t, n, expect_red, &a);
      }
    }
  }
  for (size_t ci = 0; ci < g_ncheck_counts; ci++) {
    size_t n = counts[ci];
    ncclDataType_t t = ncclFloat;
    /* all-gather: n elements per rank */
    salt++;
    for (size_t i = 0; i < n; i++) put(hin, t, i, val(g_rank, i, salt));
    to_device(dsend, hin, n * 4);
    NCCL(ncclAllGather(dsend, drecv, n, t, g_comm, g_stream));
    CUDA(cudaStreamSynchronize(g_stream));
    CUDA(cudaMemcpy(hout, drecv, n * 4 * (size_t)g_nranks, cudaMemcpyDeviceToHost));
    struct gather_arg ga = {n, salt};
    snprintf(what, sizeof what, "allgather float count %zu", n);
    check_vals(what, hout, t, n * (size_t)g_nranks, expect_gather, &ga);
    /* reduce-scatter: n elements out per rank, sum */
    salt++;
    for (size_t i = 0; i < n * (size_t)g_nranks; i++) put(hin, t, i, val(g_rank, i, salt));
    to_device(dsend, hin, n * 4 * (size_t)g_nranks);
    NCCL(ncclReduceScatter(dsend, drecv, n, t, ncclSum, g_comm, g_stream));
    CUDA(cudaStreamSynchronize(g_stream));
    CUDA(cudaMemcpy(hout, drecv, n * 4, cudaMemcpyDeviceToHost));
    struct red_arg ra = {ncclSum, salt, n * (size_t)g_rank};
    snprintf(what, sizeof what, "reducescatter float sum count %zu", n);
    check_vals(what, hout, t, n, expect_red, &ra);
    /* broadcast from every root */
    for (int root = 0; root < g_nranks; root++) {
      salt++;
      for (size_t i = 0; i < n; i++) put(hin, t, i, val(g_rank, i, salt));
      to_device(dsend, hin, n * 4);
      NCCL(ncclBroadcast(dsend, drecv, n, t, root, g_comm, g_stream));
      CUDA(cudaStreamSynchronize(g_stream));
      CUDA(cudaMemcpy(hout, drecv, n * 4, cudaMemcpyDeviceToHost));
      struct one_arg oa = {root, salt, 0};
      snprintf(what, sizeof what, "broadcast root %d float count %zu", root, n);
      check_vals(what, hout, t, n, expect_one, &oa);
    }
    /* send/recv around the ring */
    salt++;
    for (size_t i = 0; i < n; i++) put(hin, t, i, val(g_rank, i, salt));
    to_device(dsend, hin, n * 4);
    int to = (g_rank + 1) % g_nranks, from = (g_rank + g_nranks - 1) % g_nranks;
    NCCL(ncclGroupStart());
    NCCL(ncclSend(dsend, n, t, to, g_comm, g_stream));
    NCCL(ncclRecv(drecv, n, t, from, g_comm, g_stream));
    NCCL(ncclGroupEnd());
    CUDA(cudaStreamSynchronize(g_stream));
    CUDA(cudaMemcpy(hout, drecv, n * 4, cudaMemcpyDeviceToHost));
    struct one_arg sa = {from, salt, 0};
    snprintf(what, sizeof what, "sendrecv float count %zu", n);
    check_vals(what, hout, t, n, expect_one, &sa);
    /* all-to-all: block j of my input goes to rank j */
    salt++;
    for (size_t i = 0; i < n * (size_t)g_nranks; i++) put(hin, t, i, val(g_rank, i, salt));
    to_device(dsend, hin, n * 4 * (size_t)g_nranks);
    NCCL(ncclGroupStart());
    for (int r = 0; r < g_nranks; r++) {
      NCCL(ncclSend((char *)dsend + (size_t)r * n * 4, n, t, r, g_comm, g_stream));
      NCCL(ncclRecv((char *)drecv + (size_t)r * n * 4, n, t, r, g_comm, g_stream));
    }
    NCCL(ncclGroupEnd());
    CUDA(cudaStreamSynchronize(g_stream));
    CUDA(cudaMemcpy(hout, drecv, n * 4 * (size_t)g_nranks, cudaMemcpyDeviceToHost));
    for (int r = 0; r < g_nranks; r++) {
      struct one_arg aa = {r, salt, n * (size_t)g_rank};
      snprintf(what, sizeof what, "alltoall float count %zu block from %d", n, r);
      check_vals(what, (float *)hout + (size_t)r * n, t, n, expect_one, &aa);
    }
  }
  printf("rank %d: %ld checks, %ld wrong elements -> %s\n", g_rank, g_checks, g_wrong,
         g_wrong ? "FAIL" : "PASS");
  fflush(stdout);
  CUDA(cudaFree(dsend));
  CUDA(cudaFree(drecv));
  free(hin);
  free(hout);
}

/* ---- performance sweep ---- */
static void run_op(const char *op, void *s, void *r, size_t count) {
  if (!strcmp(op, "allreduce")) {
    NCCL(ncclAllReduce(s, r, count, ncclFloat, ncclSum, g_comm, g_stream));
  } else if (!strcmp(op, "allgather")) {
    NCCL(ncclAllGather(s, r, count / (size_t)g_nranks, ncclFloat, g_comm, g_stream));
  } else if (!strcmp(op, "reducescatter")) {
    NCCL(ncclReduceScatter(s, r, count / (size_t)g_nranks, ncclFloat, ncclSum, g_comm, g_stream));
  } else if (!strcmp(op, "broadcast")) {
    NCCL(ncclBroadcast(s, r, count, ncclFloat, 0, g_comm, g_stream));
  } else if (!strcmp(op, "sendrecv")) {
    NCCL(ncclGroupStart());
    NCCL(ncclSend(s, count, ncclFloat, (g_rank + 1) % g_nranks, g_comm, g_stream));
    NCCL(ncclRecv(r, count, ncclFloat, (g_rank + g_nranks - 1) % g_nranks, g_comm, g_stream));
    NCCL(ncclGroupEnd());
  } else { /* alltoall */
    size_t per = count / (size_t)g_nranks;
    NCCL(ncclGroupStart());
    for (int p = 0; p < g_nranks; p++) {
      NCCL(ncclSend((float *)s + (size_t)p * per, per, ncclFloat, p, g_comm, g_stream));
      NCCL(ncclRecv((float *)r + (size_t)p * per, per, ncclFloat, p, g_comm, g_stream));
    }
    NCCL(ncclGroupEnd());
  }
}

static double bus_factor(const char *op) {
  double n = g_nranks;
  if (!strcmp(op, "allreduce")) return 2 * (n - 1) / n;
  if (!strcmp(op, "allgather") || !strcmp(op, "reducescatter") || !strcmp(op, "alltoall"))
    return (n - 1) / n;
  return 1;
}

static size_t g_sizes[64];
static int g_nsizes;

static void run_perf(const char *op, size_t minb, size_t maxb, int factor, const char *tag) {
  if (g_nsizes == 0)
    for (size_t b = minb; b <= maxb && g_nsizes < 64; b *= (size_t)factor) g_sizes[g_nsizes++] = b;
  maxb = 0;
  for (int k = 0; k < g_nsizes; k++) maxb = g_sizes[k] > maxb ? g_sizes[k] : maxb;
  void *s = dev_alloc(maxb), *r = dev_alloc(maxb);
  CUDA(cudaMemset(s, 0, maxb));
  cudaEvent_t e0, e1;
  CUDA(cudaEventCreate(&e0));
  CUDA(cudaEventCreate(&e1));
  if (g_rank == 0) {
    printf("# %s: %s, %d ranks, float, sum\n", tag, op, g_nranks);
    printf("# %12s %12s %10s %10s %10s %6s\n", "size(B)", "count", "time(us)", "algbw(GB/s)",
           "busbw(GB/s)", "iters");
  }
  for (int k = 0; k < g_nsizes; k++) {
    size_t bytes = g_sizes[k];
    size_t count = bytes / 4;
    if (count < (size_t)g_nranks) count = (size_t)g_nranks;
    count -= count % (size_t)g_nranks;
    /* Untimed warm-ups first: the first collective of a size (and of the communicator) pays for
     * NCCL's lazy connection set-up and buffer registration, so timing it to pick the iteration
     * count gave the first size 2 iterations and a number mostly made of noise. */
    for (int w = 0; w < 3; w++) run_op(op, s, r, count);
    CUDA(cudaStreamSynchronize(g_stream));
    /* then one timed op picks an iteration count of about 0.2 s (5..200) */
    CUDA(cudaEventRecord(e0, g_stream));
    run_op(op, s, r, count);
    CUDA(cudaEventRecord(e1, g_stream));
    CUDA(cudaEventSynchronize(e1));
    float ms = 0;
    CUDA(cudaEventElapsedTime(&ms, e0, e1));
    int iters = ms > 0 ? (int)(200.0 / ms) : 200;
    if (iters < 5) iters = 5;
    if (iters > 200) iters = 200;
    /* every rank must run the same count: take rank 0's by an all-reduce of the max */
    int *d_it = dev_alloc(sizeof(int));
    /* staged on the collective's own stream (to_device): a legacy-stream cudaMemcpy from pageable
     * memory may return before its DMA lands, and g_stream does not wait for the legacy stream */
    to_device(d_it, &iters, sizeof iters);
    NCCL(ncclAllReduce(d_it, d_it, 1, ncclInt32, ncclMax, g_comm, g_stream));
    CUDA(cudaMemcpyAsync(&iters, d_it, sizeof iters, cudaMemcpyDeviceToHost, g_stream));
    CUDA(cudaStreamSynchronize(g_stream));
    CUDA(cudaFree(d_it));
    for (int w = 0; w < (bytes < (1 << 20) ? 5 : 1); w++) run_op(op, s, r, count);
    CUDA(cudaEventRecord(e0, g_stream));
    for (int i = 0; i < iters; i++) run_op(op, s, r, count);
    CUDA(cudaEventRecord(e1, g_stream));
    CUDA(cudaEventSynchronize(e1));
    CUDA(cudaEventElapsedTime(&ms, e0, e1));
    double us = 1000.0 * ms / iters;
    double algbw = (double)count * 4 / (us * 1e3);
    if (g_rank == 0) {
      printf("  %12zu %12zu %10.1f %10.2f %10.2f %6d\n", count * 4, count, us, algbw,
             algbw * bus_factor(op), iters);
      fflush(stdout);
    }
  }
  CUDA(cudaFree(s));
  CUDA(cudaFree(r));
}

static size_t parse_size(const char *s) {
  char *end;
  double v = strtod(s, &end);
  if (*end == 'K' || *end == 'k') v *= 1024;
  if (*end == 'M' || *end == 'm') v *= 1024 * 1024;
  if (*end == 'G' || *end == 'g') v *= 1024.0 * 1024 * 1024;
  return (size_t)v;
}

int main(int argc, char **argv) {
  const char *id_file = NULL, *perf = NULL, *tag = "run";
  int check = 0, factor = 2;
  size_t minb = 8, maxb = 1 << 30;
  g_nranks = 1;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--rank") && i + 1 < argc) g_rank = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--nranks") && i + 1 < argc) g_nranks = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--id-file") && i + 1 < argc) id_file = argv[++i];
    else if (!strcmp(argv[i], "--check")) check = 1;
    else if (!strcmp(argv[i], "--check-counts") && i + 1 < argc) {
      g_ncheck_counts = 0;
      for (char *tok = strtok(argv[++i], ","); tok && g_ncheck_counts < 16; tok = strtok(NULL, ","))
        g_check_counts[g_ncheck_counts++] = parse_size(tok);
    }
    else if (!strcmp(argv[i], "--perf") && i + 1 < argc) perf = argv[++i];
    else if (!strcmp(argv[i], "--minbytes") && i + 1 < argc) minb = parse_size(argv[++i]);
    else if (!strcmp(argv[i], "--maxbytes") && i + 1 < argc) maxb = parse_size(argv[++i]);
    else if (!strcmp(argv[i], "--factor") && i + 1 < argc) factor = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--tag") && i + 1 < argc) tag = argv[++i];
    else if (!strcmp(argv[i], "--sizes") && i + 1 < argc) {
      for (char *tok = strtok(argv[++i], ","); tok && g_nsizes < 64; tok = strtok(NULL, ","))
        g_sizes[g_nsizes++] = parse_size(tok);
    }
    else {
      fprintf(stderr, "unknown argument %s\n", argv[i]);
      return 2;
    }
  }
  if (!id_file) {
    fprintf(stderr, "--id-file is required\n");
    return 2;
  }
  int ndev = 0;
  CUDA(cudaGetDeviceCount(&ndev));
  CUDA(cudaSetDevice(g_rank % ndev));
  ncclUniqueId id;
  if (g_rank == 0) {
    NCCL(ncclGetUniqueId(&id));
    char tmp[4096];
    snprintf(tmp, sizeof tmp, "%s.tmp", id_file);
    FILE *f = fopen(tmp, "wb");
    if (!f || fwrite(&id, sizeof id, 1, f) != 1 || fclose(f) != 0 || rename(tmp, id_file) != 0) {
      perror("writing the unique id");
      return 2;
    }
  } else {
    double t0 = now_s();
    for (;;) {
      FILE *f = fopen(id_file, "rb");
      if (f) {
        size_t got = fread(&id, sizeof id, 1, f);
        fclose(f);
        if (got == 1) break;
      }
      if (now_s() - t0 > 120) {
        fprintf(stderr, "rank %d: no unique id in %s after 120 s\n", g_rank, id_file);
        return 2;
      }
      usleep(10000);
    }
  }
  CUDA(cudaStreamCreateWithFlags(&g_stream, cudaStreamNonBlocking));
  double t0 = now_s();
  NCCL(ncclCommInitRank(&g_comm, g_nranks, id, g_rank));
  if (g_rank == 0) printf("# %s: communicator of %d ranks ready in %.2f s\n", tag, g_nranks, now_s() - t0);
  if (check) run_checks();
  if (perf) run_perf(perf, minb, maxb, factor, tag);
  NCCL(ncclCommDestroy(g_comm));
  if (g_rank == 0) unlink(id_file);
  return g_wrong ? 1 : 0;
}
