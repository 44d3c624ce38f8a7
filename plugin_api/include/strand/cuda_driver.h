/* Strand SDK — the CUDA driver, loaded at run time (dlopen "libcuda.so.1").
 *
 * Plugins must build and load on machines without CUDA, so nothing links libcuda: the first call
 * of strand_cuda() loads the driver once per process and resolves the entry points Strand uses
 * (by their exported ABI names: the _v2 symbols the CUDA headers map the plain names to). Absent
 * or unusable, strand_cuda() returns NULL and every caller keeps to host memory.
 *
 * Users: device_unpack (the mapped pinned bounce arena) and gin_proxy (GPU windows: copies between
 * host staging and GPU memory on a stream, and remote signals added on the GPU in stream order, in
 * the windows' context or in a context of Strand's own, strand_cuda_private_context).
 * Types are the driver's, restated with a strand_cu prefix: handles are opaque pointers, CUresult
 * is an int (0 = success). */
#ifndef STRAND_CUDA_DRIVER_H
#define STRAND_CUDA_DRIVER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef int strand_cu_result_t; /* CUresult */
typedef unsigned long long strand_cu_devptr_t; /* CUdeviceptr */
typedef void *strand_cu_ctx_t;
typedef void *strand_cu_stream_t;
typedef void *strand_cu_event_t;
typedef void *strand_cu_module_t;
typedef void *strand_cu_function_t;

#define STRAND_CU_SUCCESS 0
#define STRAND_CU_ERROR_NOT_READY 600
#define STRAND_CU_MEMHOSTALLOC_PORTABLE 0x01
#define STRAND_CU_MEMHOSTALLOC_DEVICEMAP 0x02
#define STRAND_CU_MEMHOSTREGISTER_PORTABLE 0x01
#define STRAND_CU_STREAM_NON_BLOCKING 0x1
#define STRAND_CU_EVENT_DISABLE_TIMING 0x2
/* CUpointer_attribute values used here. */
#define STRAND_CU_POINTER_ATTRIBUTE_CONTEXT 1
#define STRAND_CU_POINTER_ATTRIBUTE_MEMORY_TYPE 2
#define STRAND_CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL 9
#define STRAND_CU_MEMORYTYPE_HOST 1
#define STRAND_CU_MEMORYTYPE_DEVICE 2
/* CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD */
#define STRAND_CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD 1

typedef struct {
  strand_cu_result_t (*init)(unsigned flags);
  strand_cu_result_t (*getErrorString)(strand_cu_result_t r, const char **str);
  strand_cu_result_t (*ctxGetCurrent)(strand_cu_ctx_t *ctx);
  strand_cu_result_t (*ctxSetCurrent)(strand_cu_ctx_t ctx);
  strand_cu_result_t (*ctxGetDevice)(int *dev);
  strand_cu_result_t (*memHostAlloc)(void **p, size_t bytes, unsigned flags);
  strand_cu_result_t (*memHostGetDevicePointer)(strand_cu_devptr_t *d, void *p, unsigned flags);
  strand_cu_result_t (*memFreeHost)(void *p);
  strand_cu_result_t (*memHostRegister)(void *p, size_t bytes, unsigned flags);
  strand_cu_result_t (*memHostUnregister)(void *p);
  strand_cu_result_t (*pointerGetAttribute)(void *data, int attribute, strand_cu_devptr_t ptr);
  strand_cu_result_t (*memcpyHtoDAsync)(strand_cu_devptr_t dst, const void *src, size_t bytes,
                                        strand_cu_stream_t s);
  strand_cu_result_t (*memcpyDtoHAsync)(void *dst, strand_cu_devptr_t src, size_t bytes,
                                        strand_cu_stream_t s);
  strand_cu_result_t (*memcpyDtoDAsync)(strand_cu_devptr_t dst, strand_cu_devptr_t src,
                                        size_t bytes, strand_cu_stream_t s);
  strand_cu_result_t (*streamCreate)(strand_cu_stream_t *s, unsigned flags);
  strand_cu_result_t (*streamDestroy)(strand_cu_stream_t s);
  strand_cu_result_t (*streamQuery)(strand_cu_stream_t s);
  strand_cu_result_t (*streamSynchronize)(strand_cu_stream_t s);
  strand_cu_result_t (*eventCreate)(strand_cu_event_t *e, unsigned flags);
  strand_cu_result_t (*eventRecord)(strand_cu_event_t e, strand_cu_stream_t s);
  strand_cu_result_t (*eventQuery)(strand_cu_event_t e);
  strand_cu_result_t (*eventDestroy)(strand_cu_event_t e);
  strand_cu_result_t (*moduleLoadData)(strand_cu_module_t *m, const void *image);
  strand_cu_result_t (*moduleUnload)(strand_cu_module_t m);
  strand_cu_result_t (*moduleGetFunction)(strand_cu_function_t *f, strand_cu_module_t m,
                                          const char *name);
  strand_cu_result_t (*launchKernel)(strand_cu_function_t f, unsigned gx, unsigned gy, unsigned gz,
                                     unsigned bx, unsigned by, unsigned bz, unsigned shmem,
                                     strand_cu_stream_t s, void **params, void **extra);
  /* Contexts and device memory of one's own: tests and tools (plugins use NCCL's context, or the
   * one strand_cuda_private_context keeps per device). */
  strand_cu_result_t (*deviceGet)(int *device, int ordinal);
  strand_cu_result_t (*devicePrimaryCtxRetain)(strand_cu_ctx_t *ctx, int device);
  strand_cu_result_t (*devicePrimaryCtxRelease)(int device);
  strand_cu_result_t (*memAlloc)(strand_cu_devptr_t *d, size_t bytes);
  strand_cu_result_t (*memFree)(strand_cu_devptr_t d);
  /* Optional: NULL when the driver lacks it (a stand-in driver may). */
  strand_cu_result_t (*deviceGetAttribute)(int *value, int attribute, int device);
  /* Optional (CUDA >= 11.7): NULL when the driver lacks it. */
  strand_cu_result_t (*memGetHandleForAddressRange)(void *handle, strand_cu_devptr_t ptr,
                                                    size_t bytes, int type,
                                                    unsigned long long flags);
  /* Optional (cuCtxCreate_v2): NULL when the driver lacks it; strand_cuda_private_context's. */
  strand_cu_result_t (*ctxCreate)(strand_cu_ctx_t *ctx, unsigned flags, int device);
} strand_cuda_t;

/* The loaded driver (cuInit done), or NULL when libcuda.so.1 is absent, lacks a required entry
 * point or cuInit fails (said once at INFO). Thread-safe; the library stays loaded for good. */
const strand_cuda_t *strand_cuda(void);

/* The driver's name for r ("CUDA_ERROR_..."), or "unknown CUresult" — for WARNs. */
const char *strand_cuda_error_name(strand_cu_result_t r);

/* The CUDA context to move device pointer p with: the context that allocated it, or for memory
 * of no context (cuMemCreate + cuMemMap, as NCCL allocates) its device's primary context; NULL
 * when p is not device memory (or no CUDA). */
strand_cu_ctx_t strand_cuda_pointer_context(const void *p);

/* A context of Strand's own on device `ordinal`, created at the first call and kept for the
 * process's life (a context costs device memory and its creation takes a while: one per device,
 * shared by every caller). NULL when it cannot be created (said once at WARN). The caller's
 * current context is left as it was. Why one: the driver's hardware queues
 * (CUDA_DEVICE_MAX_CONNECTIONS) are per context, so work on this context's streams never queues
 * behind the application's kernels; it reaches memory of no context (cuMemCreate + cuMemMap, as
 * NCCL allocates), and the GPU switches to it between the contexts' time slices. */
strand_cu_ctx_t strand_cuda_private_context(int ordinal);

/* Adds `value` to the 64-bit word at device address `addr` on stream `s`, after everything
 * already queued on `s` (a one-thread kernel doing a system-scope fence and an atomic add, JIT-
 * loaded from PTX once per context). `addr` must be 8-byte aligned. The calling thread must have
 * the stream's context current. */
strand_cu_result_t strand_cuda_add_u64_async(strand_cu_devptr_t addr, uint64_t value,
                                             strand_cu_stream_t s);

#ifdef __cplusplus
}
#endif

#endif
