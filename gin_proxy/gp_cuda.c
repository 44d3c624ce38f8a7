/* gin_proxy: GPU windows. Every byte the engine moves into or out of a window goes through
 * gp_copy, every signal through gp_signal; both pick the plain CPU path for host windows and the
 * CUDA driver (strand/cuda_driver.h, loaded at run time) for windows in GPU memory.
 *
 * Choices, and why:
 * - One stream per collComm, created at the first GPU window. All of a comm's GPU work goes on it
 *   in the engine's order, so a signal queued after its put's data is applied after that data:
 *   the stream keeps the order the wire gave.
 * - Which context that stream lives in (STRAND_GIN_CUDA_CONTEXT): the windows' own (NCCL's primary
 *   context, the default) or a context of Strand's own on the same GPU. The driver spreads a
 *   context's streams over CUDA_DEVICE_MAX_CONNECTIONS hardware queues; when ours shares one with
 *   the stream of a device-API kernel that waits for our signal, and the application has queued
 *   another launch behind that kernel, our copy waits behind that launch forever (measured with
 *   gin_proxy/tests/test_gin_kernel_wait.c: with the variable at 1, every such round). A context
 *   of our own has queues of its own; the price is that the GPU must switch to it (about 1 ms on
 *   an H200 while a kernel of the other context runs, against ~40 us; without MPS a device-API
 *   all-to-all took 13-22 ms instead of under 0.5: time slices), so it is chosen by default
 *   only where the job lowered CUDA_DEVICE_MAX_CONNECTIONS below the driver's 8 (Megatron-LM sets
 *   1), which makes the sharing likely. It reaches NCCL's windows (cuMemCreate + cuMemMap memory);
 *   a cuMemAlloc window's copies go through that window's context's queues whatever the stream.
 * - Small copies (one 64 KiB staging slot at most) are waited for before the engine goes on: the
 *   slot is free again, an ack means the data is in the window, a get's bytes are the window's at
 *   that point in the order. The wait is bounded (gp_stream_wait): after 5 s it says what may hold
 *   it, after 60 s the comm fails instead of hanging NCCL's proxy thread. Large puts (gp_bulk.c)
 *   are not waited for: their copies go through pinned bounce buffers and are polled by an event,
 *   so the copy of one piece overlaps the network transfer of the next.
 * - A remote signal on GPU memory is added by a one-thread kernel (strand_cuda_add_u64_async), so
 *   it is atomic against the GPU's own accesses and ordered after the data by the stream. It needs
 *   one free thread block slot on the GPU; NCCL's device-API kernels use a few CTAs, not all SMs.
 * - The caller's thread may have another (or no) context current: the comm's context is made
 *   current around every run of driver calls and the caller's put back after (gp_cu_enter/leave). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gp.h"
#include "strand/cuda_driver.h"
#include "strand/net_layer.h"
#include "strand/params.h"

#define GP_GPU_WAIT_WARN_S 5.0   /* a small copy or signal add normally takes microseconds */
#define GP_GPU_WAIT_BOUND_S 60.0 /* then the comm fails rather than hang NCCL's proxy thread */

bool gp_cuda_available(void) { return strand_cuda() != NULL; }

static strand_cu_devptr_t dptr(const void *p) { return (strand_cu_devptr_t)(uintptr_t)p; }

static strand_result_t gp_cu_fail(gp_comm_t *c, const char *what, strand_cu_result_t r) {
  STRAND_WARN("gin_proxy (rank %d/%d): %s failed: %s (CUresult %d)", c->rank, c->nranks, what,
              strand_cuda_error_name(r), r);
  c->last_error = STRAND_UNHANDLED_CUDA_ERROR;
  return STRAND_UNHANDLED_CUDA_ERROR;
}

/* CUDA_DEVICE_MAX_CONNECTIONS as the driver reads it: 0 when unset or not a number (then the
 * driver's default of 8 applies). */
static long gp_max_connections(void) {
  const char *v = getenv("CUDA_DEVICE_MAX_CONNECTIONS");
  char *end = NULL;
  long n = v && *v ? strtol(v, &end, 10) : 0;
  return end && *end == '\0' && n > 0 ? n : 0;
}

/* Whether the comm's GPU work goes on a context of Strand's own (the top of this file says why). */
static bool gp_want_own_context(void) {
  const char *word = "auto";
  (void)strand_param_get_enum("STRAND_GIN_CUDA_CONTEXT", NULL, &word); /* validated at init */
  if (!strcmp(word, "own")) return true;
  if (!strcmp(word, "window")) return false;
  long n = gp_max_connections();
  return n > 0 && n < 8;
}

/* The comm's context current for a run of driver calls, the caller's in *prev for gp_cu_leave. */
static strand_cu_result_t gp_cu_enter(gp_comm_t *c, strand_cu_ctx_t *prev) {
  const strand_cuda_t *cu = strand_cuda();
  strand_cu_result_t r = cu->ctxGetCurrent(prev);
  if (r == STRAND_CU_SUCCESS && *prev != c->cu_ctx) r = cu->ctxSetCurrent(c->cu_ctx);
  return r;
}

/* Puts the caller's context back where it was not the comm's: a context of our own must never be
 * left current on NCCL's thread, whose next runtime call would run in it. */
static void gp_cu_leave(gp_comm_t *c, strand_cu_ctx_t prev) {
  if (prev != c->cu_ctx) strand_cuda()->ctxSetCurrent(prev);
}

/* A GPU wait of `waited` seconds so far: says once per comm, after GP_GPU_WAIT_WARN_S, what can
 * hold it; true once it is past GP_GPU_WAIT_BOUND_S (said too), when the caller fails the comm. */
static bool gp_gpu_wait_over(gp_comm_t *c, const char *what, double waited) {
  if (waited > GP_GPU_WAIT_BOUND_S) {
    STRAND_WARN("gin_proxy (rank %d/%d): %s did not finish within %.0f s; the comm fails", c->rank, c->nranks,
                what, GP_GPU_WAIT_BOUND_S);
    return true;
  }
  if (!c->cu_warned && waited > GP_GPU_WAIT_WARN_S) {
    c->cu_warned = true;
    long n = gp_max_connections();
    char conn[32];
    snprintf(conn, sizeof conn, n ? "%ld" : "unset: 8", n);
    STRAND_WARN("gin_proxy (rank %d/%d): %s has waited %.0f s on gin_proxy's CUDA stream (in %s). A "
                "device-API kernel waiting for a signal holds it when the two streams share one of the "
                "driver's hardware queues (CUDA_DEVICE_MAX_CONNECTIONS=%s) and another launch is queued "
                "behind the kernel: STRAND_GIN_CUDA_CONTEXT=own gives gin_proxy queues of its own "
                "(docs/plugins/gin.md). Waiting up to %.0f s.",
                c->rank, c->nranks, what, GP_GPU_WAIT_WARN_S,
                c->cu_ctx != c->cu_win_ctx ? "a context of its own" : "the windows' context", conn,
                GP_GPU_WAIT_BOUND_S);
  }
  return false;
}

/* Waits for everything queued on the comm's stream, bounded (the top of this file says why). */
static strand_cu_result_t gp_stream_wait(gp_comm_t *c, const char *what) {
  const strand_cuda_t *cu = strand_cuda();
  double start = 0;
  for (unsigned i = 0;; i++) {
    strand_cu_result_t r = cu->streamQuery(c->cu_stream);
    if (r != STRAND_CU_ERROR_NOT_READY) return r;
    if (i % 256) continue;
    double now = strand_now_s();
    if (i == 0) start = now;
    if (gp_gpu_wait_over(c, what, now - start)) return STRAND_CU_ERROR_NOT_READY;
  }
}

strand_result_t gp_cuda_attach(gp_comm_t *c, gp_mr_t *m, const char *call) {
  const strand_cuda_t *cu = strand_cuda();
  if (!cu) {
    STRAND_WARN("gin_proxy %s(rank %d/%d): a GPU window, but no usable CUDA driver (libcuda.so.1) in "
                "this process", call, c->rank, c->nranks);
    return STRAND_INVALID_USAGE;
  }
  strand_cu_ctx_t ctx = strand_cuda_pointer_context(m->base);
  if (!ctx) {
    STRAND_WARN("gin_proxy %s(rank %d/%d): %p (%zu bytes) was registered as GPU memory but is not "
                "device memory of any CUDA context", call, c->rank, c->nranks, (void *)m->base, m->size);
    return STRAND_INVALID_ARGUMENT;
  }
  if (c->cu_stream && ctx != c->cu_win_ctx) {
    STRAND_WARN("gin_proxy %s(rank %d/%d): GPU windows of two CUDA contexts on one collComm; NCCL "
                "uses one GPU per communicator", call, c->rank, c->nranks);
    return STRAND_INVALID_USAGE;
  }
  m->cuda = true;
  m->cu_ctx = ctx;
  if (c->cu_stream) return STRAND_SUCCESS;
  strand_cu_ctx_t work = ctx;
  int ordinal = -1;
  bool own = gp_want_own_context();
  if (own) {
    if (cu->pointerGetAttribute(&ordinal, STRAND_CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL,
                                (strand_cu_devptr_t)(uintptr_t)m->base) == STRAND_CU_SUCCESS)
      work = strand_cuda_private_context(ordinal);
    if (!work || work == ctx) {
      STRAND_WARN("gin_proxy %s(rank %d/%d): no CUDA context of its own on the windows' GPU; GPU windows "
                  "are moved in their own context", call, c->rank, c->nranks);
      work = ctx;
      own = false;
    }
  }
  c->cu_win_ctx = ctx;
  c->cu_ctx = work;
  strand_cu_ctx_t prev = NULL;
  strand_cu_result_t r = gp_cu_enter(c, &prev);
  if (r == STRAND_CU_SUCCESS) r = cu->streamCreate(&c->cu_stream, STRAND_CU_STREAM_NON_BLOCKING);
  if (r != STRAND_CU_SUCCESS) {
    gp_cu_leave(c, prev);
    return gp_cu_fail(c, "creating the copy stream", r);
  }
  /* Load the signal kernel now, before NCCL's kernels run: loading a module (lazily, at its first
   * launch, under CUDA_MODULE_LOADING=LAZY) may wait for the GPU to go idle, which never happens
   * while a device-API kernel spins on the very signal we are about to add. Adding 0 to the
   * window's first word is the launch; it changes nothing. */
  if (m->size >= 8 && !((uintptr_t)m->base & 7)) {
    r = strand_cuda_add_u64_async(dptr(m->base), 0, c->cu_stream);
    if (r == STRAND_CU_SUCCESS) r = gp_stream_wait(c, "loading the signal-add kernel");
  }
  gp_cu_leave(c, prev);
  if (r != STRAND_CU_SUCCESS) return gp_cu_fail(c, "loading the signal-add kernel", r);
  long n = gp_max_connections();
  STRAND_INFO(STRAND_SUBSYS_INIT | STRAND_SUBSYS_NET,
              "gin_proxy (rank %d/%d): GPU windows are moved on a stream of %s (STRAND_GIN_CUDA_CONTEXT; "
              "CUDA_DEVICE_MAX_CONNECTIONS %ld%s)", c->rank, c->nranks,
              own ? "a CUDA context of its own" : "the windows' CUDA context", n ? n : 8, n ? "" : ", the default");
  return STRAND_SUCCESS;
}

void gp_cuda_detach(gp_comm_t *c) {
  const strand_cuda_t *cu = strand_cuda();
  if (!cu || !c->cu_stream) return;
  strand_cu_ctx_t prev = NULL;
  if (gp_cu_enter(c, &prev) == STRAND_CU_SUCCESS) {
    gp_stream_wait(c, "the GPU work left at closeColl");
    cu->streamDestroy(c->cu_stream);
  }
  gp_cu_leave(c, prev);
  c->cu_stream = NULL;
}

/* Queues a copy in the direction the two sides' kinds say. */
static strand_cu_result_t gp_queue_copy(gp_comm_t *c, void *dst, bool dst_cuda, const void *src, bool src_cuda,
                                        size_t n, const char **what) {
  const strand_cuda_t *cu = strand_cuda();
  if (dst_cuda && src_cuda) {
    *what = "cuMemcpyDtoDAsync";
    return cu->memcpyDtoDAsync(dptr(dst), dptr(src), n, c->cu_stream);
  }
  if (dst_cuda) {
    *what = "cuMemcpyHtoDAsync";
    return cu->memcpyHtoDAsync(dptr(dst), src, n, c->cu_stream);
  }
  *what = "cuMemcpyDtoHAsync";
  return cu->memcpyDtoHAsync(dst, dptr(src), n, c->cu_stream);
}

strand_result_t gp_copy(gp_comm_t *c, void *dst, bool dst_cuda, const void *src, bool src_cuda, size_t n) {
  if (n == 0 || dst == src) return STRAND_SUCCESS; /* a loopback flush puts a word onto itself */
  if (!dst_cuda && !src_cuda) {
    memmove(dst, src, n);
    return STRAND_SUCCESS;
  }
  strand_cu_ctx_t prev = NULL;
  const char *what = "cuCtxSetCurrent";
  strand_cu_result_t r = gp_cu_enter(c, &prev);
  if (r == STRAND_CU_SUCCESS) r = gp_queue_copy(c, dst, dst_cuda, src, src_cuda, n, &what);
  if (r == STRAND_CU_SUCCESS) {
    what = dst_cuda ? "a copy into a GPU window" : "a copy out of a GPU window";
    r = gp_stream_wait(c, what);
  }
  gp_cu_leave(c, prev);
  return r == STRAND_CU_SUCCESS ? STRAND_SUCCESS : gp_cu_fail(c, what, r);
}

strand_result_t gp_copy_async(gp_comm_t *c, void *dst, bool dst_cuda, const void *src, bool src_cuda, size_t n,
                              void **ev) {
  const strand_cuda_t *cu = strand_cuda();
  strand_cu_ctx_t prev = NULL;
  const char *what = "cuCtxSetCurrent";
  strand_cu_result_t r = gp_cu_enter(c, &prev);
  if (r == STRAND_CU_SUCCESS && !*ev) {
    what = "cuEventCreate";
    r = cu->eventCreate(ev, STRAND_CU_EVENT_DISABLE_TIMING);
  }
  if (r == STRAND_CU_SUCCESS) r = gp_queue_copy(c, dst, dst_cuda, src, src_cuda, n, &what);
  if (r == STRAND_CU_SUCCESS) {
    what = "cuEventRecord after a copy";
    r = cu->eventRecord(*ev, c->cu_stream);
  }
  gp_cu_leave(c, prev);
  return r == STRAND_CU_SUCCESS ? STRAND_SUCCESS : gp_cu_fail(c, what, r);
}

bool gp_event_done(gp_comm_t *c, void *ev, double since, strand_result_t *rc) {
  const strand_cuda_t *cu = strand_cuda();
  *rc = STRAND_SUCCESS;
  strand_cu_ctx_t prev = NULL;
  strand_cu_result_t r = gp_cu_enter(c, &prev);
  if (r == STRAND_CU_SUCCESS) r = cu->eventQuery(ev);
  gp_cu_leave(c, prev);
  if (r == STRAND_CU_ERROR_NOT_READY) {
    if (!gp_gpu_wait_over(c, "a GPU copy of a large put", strand_now_s() - since)) return false;
    *rc = gp_cu_fail(c, "a GPU copy of a large put (bounded wait)", r);
    return true;
  }
  if (r != STRAND_CU_SUCCESS) *rc = gp_cu_fail(c, "cuEventQuery of a copy", r);
  return true;
}

void gp_event_destroy(gp_comm_t *c, void *ev) {
  const strand_cuda_t *cu = strand_cuda();
  if (!ev || !cu) return;
  strand_cu_ctx_t prev = NULL;
  if (gp_cu_enter(c, &prev) == STRAND_CU_SUCCESS) cu->eventDestroy(ev);
  gp_cu_leave(c, prev);
}

/* Pinned memory lets a copy run at the link's rate, asynchronously; plain malloc'd memory makes
 * the driver stage it once more. Without GPU windows no copy touches it. Portable: pinned for
 * every context, the windows' and ours. */
void *gp_host_alloc(gp_comm_t *c, size_t n, bool *pinned) {
  const strand_cuda_t *cu = strand_cuda();
  *pinned = false;
  strand_cu_ctx_t prev = NULL;
  if (c->cu_ctx && cu && gp_cu_enter(c, &prev) == STRAND_CU_SUCCESS) {
    void *p = NULL;
    bool ok = cu->memHostAlloc(&p, n, STRAND_CU_MEMHOSTALLOC_PORTABLE) == STRAND_CU_SUCCESS;
    gp_cu_leave(c, prev);
    if (ok) {
      *pinned = true;
      return p;
    }
  }
  void *p = NULL;
  return posix_memalign(&p, 4096, n) == 0 ? p : NULL;
}

void gp_host_free(void *p, bool pinned) {
  if (pinned)
    strand_cuda()->memFreeHost(p);
  else
    free(p);
}

static uint64_t gp_signal_add(uint32_t op, uint64_t value) { return op == STRAND_GIN_SIGNAL_OP_INC ? 1 : value; }

/* Queues the signal's add on the comm's stream (its context current). */
static strand_cu_result_t gp_queue_signal(gp_comm_t *c, gp_mr_t *w, uint64_t off, uint32_t op, uint64_t value) {
  return strand_cuda_add_u64_async(dptr(w->base + off), gp_signal_add(op, value), c->cu_stream);
}

strand_result_t gp_signal(gp_comm_t *c, gp_mr_t *w, uint64_t off, uint32_t op, uint64_t value) {
  uint64_t add = gp_signal_add(op, value);
  if (!w->cuda) {
    /* release: the data written before (this put's and every earlier one from the same source)
     * is visible to whoever reads the new signal value with acquire */
    __atomic_fetch_add((uint64_t *)(void *)(w->base + off), add, __ATOMIC_RELEASE);
    return STRAND_SUCCESS;
  }
  strand_cu_ctx_t prev = NULL;
  strand_cu_result_t r = gp_cu_enter(c, &prev);
  if (r == STRAND_CU_SUCCESS) r = gp_queue_signal(c, w, off, op, value);
  if (r == STRAND_CU_SUCCESS) r = gp_stream_wait(c, "a signal's add on the GPU");
  gp_cu_leave(c, prev);
  return r == STRAND_CU_SUCCESS ? STRAND_SUCCESS : gp_cu_fail(c, "adding a signal on the GPU", r);
}

strand_result_t gp_put_signal(gp_comm_t *c, gp_mr_t *w, uint64_t off, const void *src, size_t n, gp_mr_t *sw,
                              uint64_t sig_off, uint32_t op, uint64_t value) {
  if (n == 0 || !sw || !sw->cuda || !w->cuda || w->base + off == src) { /* one GPU operation at most */
    strand_result_t rc = n ? gp_copy(c, w->base + off, w->cuda, src, false, n) : STRAND_SUCCESS;
    return rc == STRAND_SUCCESS && sw ? gp_signal(c, sw, sig_off, op, value) : rc;
  }
  strand_cu_ctx_t prev = NULL;
  const char *what = "cuCtxSetCurrent";
  strand_cu_result_t r = gp_cu_enter(c, &prev);
  if (r == STRAND_CU_SUCCESS) r = gp_queue_copy(c, w->base + off, true, src, false, n, &what);
  if (r == STRAND_CU_SUCCESS) {
    what = "adding a signal on the GPU";
    r = gp_queue_signal(c, sw, sig_off, op, value);
  }
  if (r == STRAND_CU_SUCCESS) {
    what = "a put and its signal into GPU windows";
    r = gp_stream_wait(c, what);
  }
  gp_cu_leave(c, prev);
  return r == STRAND_CU_SUCCESS ? STRAND_SUCCESS : gp_cu_fail(c, what, r);
}
