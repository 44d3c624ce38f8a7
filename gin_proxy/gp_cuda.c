/* gin_proxy: GPU windows. Every byte the engine moves into or out of a window goes through
 * gp_copy, every signal through gp_signal; both pick the plain CPU path for host windows and the
 * CUDA driver (strand/cuda_driver.h, loaded at run time) for windows in GPU memory.
 *
 * Choices, and why:
 * - One stream per collComm, created in the context of the first GPU window. All of a comm's GPU
 *   work goes on it in the engine's order, so a signal queued after its put's data is applied
 *   after that data: the stream keeps the order the wire gave.
 * - Small copies (one 64 KiB staging slot at most) are waited for before the engine goes on
 *   (cuStreamSynchronize): the slot is free again, an ack means the data is in the window, a
 *   get's bytes are the window's at that point in the order. A wait never depends on a kernel:
 *   the copy engines run beside whatever NCCL's kernels do. Large puts (gp_bulk.c) are not
 *   waited for: their copies go through pinned bounce buffers and are polled by an event, so the
 *   copy of one piece overlaps the network transfer of the next.
 * - A remote signal on GPU memory is added by a one-thread kernel (strand_cuda_add_u64_async), so
 *   it is atomic against the GPU's own accesses and ordered after the data by the stream. It needs
 *   one free thread block slot on the GPU; NCCL's device-API kernels use a few CTAs, not all SMs.
 * - The caller's thread may have another (or no) context current: the window's context is made
 *   current before every driver call (cheap when it already is). */
#include <stdlib.h>
#include <string.h>

#include "gp.h"
#include "strand/cuda_driver.h"

bool gp_cuda_available(void) { return strand_cuda() != NULL; }

static strand_cu_devptr_t dptr(const void *p) { return (strand_cu_devptr_t)(uintptr_t)p; }

static strand_result_t gp_cu_fail(gp_comm_t *c, const char *what, strand_cu_result_t r) {
  STRAND_WARN("gin_proxy (rank %d/%d): %s failed: %s (CUresult %d)", c->rank, c->nranks, what,
              strand_cuda_error_name(r), r);
  c->last_error = STRAND_UNHANDLED_CUDA_ERROR;
  return STRAND_UNHANDLED_CUDA_ERROR;
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
  if (c->cu_stream && ctx != c->cu_ctx) {
    STRAND_WARN("gin_proxy %s(rank %d/%d): GPU windows of two CUDA contexts on one collComm; NCCL "
                "uses one GPU per communicator", call, c->rank, c->nranks);
    return STRAND_INVALID_USAGE;
  }
  m->cuda = true;
  m->cu_ctx = ctx;
  if (c->cu_stream) return STRAND_SUCCESS;
  strand_cu_result_t r = cu->ctxSetCurrent(ctx);
  if (r == STRAND_CU_SUCCESS) r = cu->streamCreate(&c->cu_stream, STRAND_CU_STREAM_NON_BLOCKING);
  if (r != STRAND_CU_SUCCESS) return gp_cu_fail(c, "creating the copy stream", r);
  c->cu_ctx = ctx;
  /* Load the signal kernel now, before NCCL's kernels run: loading a module (lazily, at its first
   * launch, under CUDA_MODULE_LOADING=LAZY) may wait for the GPU to go idle, which never happens
   * while a device-API kernel spins on the very signal we are about to add. Adding 0 to the
   * window's first word is the launch; it changes nothing. */
  if (m->size >= 8 && !((uintptr_t)m->base & 7)) {
    r = strand_cuda_add_u64_async(dptr(m->base), 0, c->cu_stream);
    if (r == STRAND_CU_SUCCESS) r = cu->streamSynchronize(c->cu_stream);
    if (r != STRAND_CU_SUCCESS) return gp_cu_fail(c, "loading the signal-add kernel", r);
  }
  return STRAND_SUCCESS;
}

void gp_cuda_detach(gp_comm_t *c) {
  const strand_cuda_t *cu = strand_cuda();
  if (!cu || !c->cu_stream) return;
  if (cu->ctxSetCurrent(c->cu_ctx) == STRAND_CU_SUCCESS) {
    cu->streamSynchronize(c->cu_stream);
    cu->streamDestroy(c->cu_stream);
  }
  c->cu_stream = NULL;
}

strand_result_t gp_copy(gp_comm_t *c, void *dst, bool dst_cuda, const void *src, bool src_cuda, size_t n) {
  if (n == 0 || dst == src) return STRAND_SUCCESS; /* a loopback flush puts a word onto itself */
  if (!dst_cuda && !src_cuda) {
    memmove(dst, src, n);
    return STRAND_SUCCESS;
  }
  const strand_cuda_t *cu = strand_cuda();
  strand_cu_result_t r = cu->ctxSetCurrent(c->cu_ctx);
  const char *what = "cuCtxSetCurrent";
  if (r == STRAND_CU_SUCCESS) {
    if (dst_cuda && src_cuda) {
      what = "cuMemcpyDtoDAsync";
      r = cu->memcpyDtoDAsync(dptr(dst), dptr(src), n, c->cu_stream);
    } else if (dst_cuda) {
      what = "cuMemcpyHtoDAsync";
      r = cu->memcpyHtoDAsync(dptr(dst), src, n, c->cu_stream);
    } else {
      what = "cuMemcpyDtoHAsync";
      r = cu->memcpyDtoHAsync(dst, dptr(src), n, c->cu_stream);
    }
  }
  if (r == STRAND_CU_SUCCESS) {
    what = "cuStreamSynchronize after a copy";
    r = cu->streamSynchronize(c->cu_stream);
  }
  return r == STRAND_CU_SUCCESS ? STRAND_SUCCESS : gp_cu_fail(c, what, r);
}

strand_result_t gp_copy_async(gp_comm_t *c, void *dst, bool dst_cuda, const void *src, bool src_cuda, size_t n,
                              void **ev) {
  const strand_cuda_t *cu = strand_cuda();
  strand_cu_result_t r = cu->ctxSetCurrent(c->cu_ctx);
  const char *what = "cuCtxSetCurrent";
  if (r == STRAND_CU_SUCCESS && !*ev) {
    what = "cuEventCreate";
    r = cu->eventCreate(ev, STRAND_CU_EVENT_DISABLE_TIMING);
  }
  if (r == STRAND_CU_SUCCESS) {
    if (dst_cuda && src_cuda) {
      what = "cuMemcpyDtoDAsync";
      r = cu->memcpyDtoDAsync(dptr(dst), dptr(src), n, c->cu_stream);
    } else if (dst_cuda) {
      what = "cuMemcpyHtoDAsync";
      r = cu->memcpyHtoDAsync(dptr(dst), src, n, c->cu_stream);
    } else {
      what = "cuMemcpyDtoHAsync";
      r = cu->memcpyDtoHAsync(dst, dptr(src), n, c->cu_stream);
    }
  }
  if (r == STRAND_CU_SUCCESS) {
    what = "cuEventRecord after a copy";
    r = cu->eventRecord(*ev, c->cu_stream);
  }
  return r == STRAND_CU_SUCCESS ? STRAND_SUCCESS : gp_cu_fail(c, what, r);
}

bool gp_event_done(gp_comm_t *c, void *ev, strand_result_t *rc) {
  const strand_cuda_t *cu = strand_cuda();
  *rc = STRAND_SUCCESS;
  strand_cu_result_t r = cu->ctxSetCurrent(c->cu_ctx);
  if (r == STRAND_CU_SUCCESS) r = cu->eventQuery(ev);
  if (r == STRAND_CU_ERROR_NOT_READY) return false;
  if (r != STRAND_CU_SUCCESS) *rc = gp_cu_fail(c, "cuEventQuery of a copy", r);
  return true;
}

void gp_event_destroy(gp_comm_t *c, void *ev) {
  const strand_cuda_t *cu = strand_cuda();
  if (!ev || !cu) return;
  if (cu->ctxSetCurrent(c->cu_ctx) == STRAND_CU_SUCCESS) cu->eventDestroy(ev);
}

/* Pinned memory lets a copy run at the link's rate, asynchronously; plain malloc'd memory makes
 * the driver stage it once more. Without GPU windows no copy touches it. */
void *gp_host_alloc(gp_comm_t *c, size_t n, bool *pinned) {
  const strand_cuda_t *cu = strand_cuda();
  *pinned = false;
  if (c->cu_ctx && cu && cu->ctxSetCurrent(c->cu_ctx) == STRAND_CU_SUCCESS) {
    void *p = NULL;
    if (cu->memHostAlloc(&p, n, STRAND_CU_MEMHOSTALLOC_PORTABLE) == STRAND_CU_SUCCESS) {
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

strand_result_t gp_signal(gp_comm_t *c, gp_mr_t *w, uint64_t off, uint32_t op, uint64_t value) {
  uint64_t add = op == STRAND_GIN_SIGNAL_OP_INC ? 1 : value;
  if (!w->cuda) {
    /* release: the data written before (this put's and every earlier one from the same source)
     * is visible to whoever reads the new signal value with acquire */
    __atomic_fetch_add((uint64_t *)(void *)(w->base + off), add, __ATOMIC_RELEASE);
    return STRAND_SUCCESS;
  }
  const strand_cuda_t *cu = strand_cuda();
  strand_cu_result_t r = cu->ctxSetCurrent(c->cu_ctx);
  if (r == STRAND_CU_SUCCESS) r = strand_cuda_add_u64_async(dptr(w->base + off), add, c->cu_stream);
  if (r == STRAND_CU_SUCCESS) r = cu->streamSynchronize(c->cu_stream);
  return r == STRAND_CU_SUCCESS ? STRAND_SUCCESS : gp_cu_fail(c, "adding a signal on the GPU", r);
}
