/* softverbs GPU memory: regions in CUDA device memory (ibv_reg_dmabuf_mr on a CUDA dma-buf, or
 * ibv_reg_mr on a CUDA pointer as nvidia-peermem allows) and every byte moved into or out of them.
 *
 * A NIC reads and writes GPU memory over PCIe; this emulation moves bytes through host memory, so
 * a region is marked GPU at registration (its CUDA context kept in the MR) and the transport never
 * touches it with the CPU: a send's GPU source is gathered into a host bounce buffer at post time,
 * a receive or RDMA READ into GPU memory lands in a bounce buffer that is scattered to the GPU
 * before the completion, and the responder stages RDMA WRITE payloads and READ responses the same
 * way. Host-memory WRs never get here (the context counts its GPU regions: with none, nothing is
 * checked per SGE).
 *
 * The CUDA driver is the SDK's run-time loader (strand/cuda_driver.h): no libcuda at build time,
 * and without one every GPU registration fails cleanly (EOPNOTSUPP). Copies are synchronous, on a
 * non-blocking stream per CUDA context: the legacy default stream would wait for kernels on the
 * application's blocking streams, and an NCCL kernel waiting for this very data would then never
 * finish. The caller's current context is restored after each copy (posts run on the
 * application's threads). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "strand/cuda_driver.h"
#include "sv.h"

struct sv_gpu_stage {
  bool active;         /* this WR has a GPU SGE; its iovecs point at buf */
  uint8_t *buf;        /* host bounce buffer, reused by the WR slot */
  size_t cap;
  uint32_t niov;
  struct iovec iov[SV_MAX_SGE]; /* the WR's own SGEs */
  void *ctx[SV_MAX_SGE];        /* their CUDA context; NULL = host memory */
};

bool sv_gpu_usable(void) { return strand_cuda() != NULL; }

void *sv_gpu_range_ctx(uint64_t addr, uint64_t len)
{
  if (!sv_gpu_usable() || len == 0) return NULL;
  strand_cu_ctx_t first = strand_cuda_pointer_context((const void *)(uintptr_t)addr);
  if (!first) return NULL;
  /* The whole range must be device memory: a region that runs past the allocation would fail
   * in the middle of a transfer. */
  strand_cu_ctx_t last = strand_cuda_pointer_context((const void *)(uintptr_t)(addr + len - 1));
  return last ? first : NULL;
}

bool sv_gpu_is_dmabuf(int fd)
{
  /* The kernel names a dma-buf's file "anon_inode:dmabuf" (older kernels) or "/dmabuf:<name>". */
  char link[64], target[128];
  snprintf(link, sizeof(link), "/proc/self/fd/%d", fd);
  ssize_t n = readlink(link, target, sizeof(target) - 1);
  if (n <= 0) return false;
  target[n] = '\0';
  return strstr(target, "dmabuf") != NULL;
}

/* ---------------------------------------------------------------- copies */
#define SV_GPU_STREAMS 64
static struct {
  pthread_mutex_t lock;
  int n;
  strand_cu_ctx_t ctx[SV_GPU_STREAMS];
  strand_cu_stream_t stream[SV_GPU_STREAMS];
} streams = {.lock = PTHREAD_MUTEX_INITIALIZER};

/* The copy stream of ctx, which is current on the calling thread; NULL when none can be made. */
static strand_cu_stream_t ctx_stream(const strand_cuda_t *cu, strand_cu_ctx_t ctx)
{
  strand_cu_stream_t s = NULL;
  pthread_mutex_lock(&streams.lock);
  for (int i = 0; i < streams.n && !s; i++)
    if (streams.ctx[i] == ctx) s = streams.stream[i];
  if (!s && streams.n < SV_GPU_STREAMS &&
      cu->streamCreate(&s, STRAND_CU_STREAM_NON_BLOCKING) == STRAND_CU_SUCCESS) {
    streams.ctx[streams.n] = ctx;
    streams.stream[streams.n++] = s; /* kept for the process's life, like the context */
  }
  pthread_mutex_unlock(&streams.lock);
  return s;
}

/* Moves n bytes between host memory and device memory of context ctx; 0, or -1 (logged). */
static int gpu_copy(void *ctx, void *dst, const void *src, size_t n, bool to_gpu)
{
  const strand_cuda_t *cu = strand_cuda();
  if (!cu || !ctx) return -1;
  strand_cu_ctx_t old = NULL;
  strand_cu_result_t r = cu->ctxGetCurrent(&old);
  if (r == STRAND_CU_SUCCESS && old != ctx) r = cu->ctxSetCurrent(ctx);
  strand_cu_stream_t s = r == STRAND_CU_SUCCESS ? ctx_stream(cu, ctx) : NULL;
  if (r == STRAND_CU_SUCCESS && !s) r = -1;
  if (r == STRAND_CU_SUCCESS)
    r = to_gpu ? cu->memcpyHtoDAsync((strand_cu_devptr_t)(uintptr_t)dst, src, n, s)
               : cu->memcpyDtoHAsync(dst, (strand_cu_devptr_t)(uintptr_t)src, n, s);
  if (r == STRAND_CU_SUCCESS) r = cu->streamSynchronize(s);
  if (old != ctx) cu->ctxSetCurrent(old);
  if (r != STRAND_CU_SUCCESS) {
    sv_log("GPU copy of %zu bytes %s %p failed: %s", n, to_gpu ? "to" : "from",
           to_gpu ? dst : src, r == -1 ? "no copy stream" : strand_cuda_error_name(r));
    return -1;
  }
  return 0;
}

int sv_gpu_to_host(void *ctx, void *dst, const void *gpu_src, size_t n)
{
  return gpu_copy(ctx, dst, gpu_src, n, false);
}

int sv_gpu_to_device(void *ctx, void *gpu_dst, const void *src, size_t n)
{
  return gpu_copy(ctx, gpu_dst, src, n, true);
}

int sv_gpu_copy_in(sv_context_t *c, uint32_t lkey, void *dst, const void *src, size_t n)
{
  /* Inline data needs no lkey, but when it names the region holding the bytes, the region says
   * where they are (cheap); otherwise the driver is asked about the address. */
  uint64_t a = (uint64_t)(uintptr_t)src;
  sv_mr_t *m = sv_mr_lookup(c, lkey);
  void *ctx = m && a >= m->iova && n <= m->mr.length && a - m->iova <= m->mr.length - n
                  ? m->gpu_ctx
                  : sv_gpu_range_ctx(a, n);
  if (!ctx) {
    memcpy(dst, src, n);
    return 0;
  }
  return sv_gpu_to_host(ctx, dst, src, n);
}

void *sv_gpu_bounce(uint8_t **buf, size_t *cap, size_t need)
{
  if (need > *cap) {
    uint8_t *b = realloc(*buf, need);
    if (!b) return NULL;
    *buf = b;
    *cap = need;
  }
  return *buf;
}

/* ---------------------------------------------------------------- spare bounce buffers */
/* A large send's bounce buffer leaves its WR slot when the WR completes (SV_GPU_KEEP). Freeing it
 * gave it back to the kernel (glibc maps allocations that large), so every large GPU send paid
 * for a fresh mapping, its page faults and the zeroing of every page on top of the copies:
 * measured on the fake CUDA driver, about a fifth of the sending thread's time at 4 MiB
 * (docs/benchmarks/ib.md). Such buffers wait here, process-wide and bounded, for the next large
 * send of any QP. */
/* Bounce buffers up to this size stay with their WR slot for the next WR; larger ones leave
 * the slot when their WR completes, so that a send queue of large GPU messages does not keep a
 * large buffer per slot for good (send queues are thousands of WRs deep). */
#define SV_GPU_KEEP (256u << 10)
#define SV_GPU_SPARES 64
#define SV_GPU_SPARE_BYTES (256u << 20)
static struct {
  pthread_mutex_t lock;
  int n;
  size_t bytes;
  uint8_t *buf[SV_GPU_SPARES];
  size_t cap[SV_GPU_SPARES];
} spares = {.lock = PTHREAD_MUTEX_INITIALIZER};

/* Keeps buf (cap bytes) for a later spare_get, or frees it when the spares are full. */
static void spare_put(uint8_t *buf, size_t cap)
{
  if (!buf) return;
  pthread_mutex_lock(&spares.lock);
  bool kept = spares.n < SV_GPU_SPARES && spares.bytes + cap <= SV_GPU_SPARE_BYTES;
  if (kept) {
    spares.buf[spares.n] = buf;
    spares.cap[spares.n++] = cap;
    spares.bytes += cap;
  }
  pthread_mutex_unlock(&spares.lock);
  if (!kept) free(buf);
}

/* The smallest spare of at least `need` bytes (its size in *cap), or NULL. */
static uint8_t *spare_get(size_t need, size_t *cap)
{
  uint8_t *b = NULL;
  pthread_mutex_lock(&spares.lock);
  int best = -1;
  for (int i = 0; i < spares.n; i++)
    if (spares.cap[i] >= need && (best < 0 || spares.cap[i] < spares.cap[best])) best = i;
  if (best >= 0) {
    b = spares.buf[best];
    *cap = spares.cap[best];
    spares.bytes -= *cap;
    spares.buf[best] = spares.buf[--spares.n];
    spares.cap[best] = spares.cap[spares.n];
  }
  pthread_mutex_unlock(&spares.lock);
  return b;
}

/* ---------------------------------------------------------------- WR staging */
enum ibv_wc_status sv_gpu_stage_wr(sv_context_t *c, const struct ibv_sge *sg, int n,
                                   struct iovec *iov, uint32_t *niov, uint64_t len,
                                   sv_gpu_stage_t **sp, bool gather)
{
  sv_gpu_stage_t *s = *sp;
  void *ctx[SV_MAX_SGE];
  bool any = false;
  for (int i = 0; i < n; i++) {
    sv_mr_t *m = sg[i].length ? sv_mr_lookup(c, sg[i].lkey) : NULL;
    ctx[i] = m ? m->gpu_ctx : NULL;
    any |= ctx[i] != NULL;
  }
  if (!any) return IBV_WC_SUCCESS;
  if (!s) {
    s = calloc(1, sizeof(*s));
    if (!s) return IBV_WC_LOC_PROT_ERR;
    *sp = s;
  }
  if (len > SV_GPU_KEEP && len > s->cap) { /* a large send: a spare saves a fresh mapping */
    size_t cap = 0;
    uint8_t *b = spare_get(len, &cap);
    if (b) {
      free(s->buf);
      s->buf = b;
      s->cap = cap;
    }
  }
  if (!sv_gpu_bounce(&s->buf, &s->cap, len ? len : 1)) return IBV_WC_LOC_PROT_ERR;
  s->niov = (uint32_t)n;
  for (int i = 0; i < n; i++) {
    s->iov[i] = iov[i];
    s->ctx[i] = ctx[i];
  }
  if (gather) {
    uint64_t off = 0;
    for (int i = 0; i < n; i++) {
      size_t t = s->iov[i].iov_len;
      if (t && ctx[i] && sv_gpu_to_host(ctx[i], s->buf + off, s->iov[i].iov_base, t) != 0)
        return IBV_WC_LOC_PROT_ERR;
      if (t && !ctx[i]) memcpy(s->buf + off, s->iov[i].iov_base, t);
      off += t;
    }
  }
  iov[0].iov_base = s->buf;
  iov[0].iov_len = len;
  *niov = 1;
  s->active = true;
  return IBV_WC_SUCCESS;
}

int sv_gpu_stage_scatter(const sv_gpu_stage_t *s, uint64_t len)
{
  uint64_t off = 0;
  for (uint32_t i = 0; i < s->niov && off < len; i++) {
    size_t t = s->iov[i].iov_len < len - off ? s->iov[i].iov_len : (size_t)(len - off);
    if (t && s->ctx[i]) {
      if (sv_gpu_to_device(s->ctx[i], s->iov[i].iov_base, s->buf + off, t) != 0) return -1;
    } else if (t) {
      memcpy(s->iov[i].iov_base, s->buf + off, t);
    }
    off += t;
  }
  return 0;
}

bool sv_gpu_stage_active(const sv_gpu_stage_t *s) { return s && s->active; }

void sv_gpu_stage_reset(sv_gpu_stage_t *s) { s->active = false; }

void sv_gpu_stage_done(sv_gpu_stage_t *s)
{
  s->active = false;
  if (s->cap > SV_GPU_KEEP) {
    spare_put(s->buf, s->cap);
    s->buf = NULL;
    s->cap = 0;
  }
}

void sv_gpu_stage_free(sv_gpu_stage_t *s)
{
  if (!s) return;
  free(s->buf);
  free(s);
}
