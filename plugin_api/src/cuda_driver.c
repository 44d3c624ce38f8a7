/* Strand SDK — the CUDA driver loaded at run time (strand/cuda_driver.h says why and for whom). */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "strand/cuda_driver.h"
#include "strand/log.h"

static pthread_once_t once = PTHREAD_ONCE_INIT;
static strand_cuda_t drv;
static bool usable;

/* Resolves `name` into *slot; false when the driver lacks it. */
static bool resolve(void *lib, void *slot, const char *name) {
  void *f = dlsym(lib, name);
  memcpy(slot, &f, sizeof f);
  return f != NULL;
}

static void load(void) {
  void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!lib) return; /* no driver: host memory only, nothing to say */
  bool ok = true;
  ok &= resolve(lib, &drv.init, "cuInit");
  ok &= resolve(lib, &drv.getErrorString, "cuGetErrorName");
  ok &= resolve(lib, &drv.ctxGetCurrent, "cuCtxGetCurrent");
  ok &= resolve(lib, &drv.ctxSetCurrent, "cuCtxSetCurrent");
  ok &= resolve(lib, &drv.ctxGetDevice, "cuCtxGetDevice");
  ok &= resolve(lib, &drv.memHostAlloc, "cuMemHostAlloc");
  ok &= resolve(lib, &drv.memHostGetDevicePointer, "cuMemHostGetDevicePointer_v2");
  ok &= resolve(lib, &drv.memFreeHost, "cuMemFreeHost");
  ok &= resolve(lib, &drv.memHostRegister, "cuMemHostRegister_v2");
  ok &= resolve(lib, &drv.memHostUnregister, "cuMemHostUnregister");
  ok &= resolve(lib, &drv.pointerGetAttribute, "cuPointerGetAttribute");
  ok &= resolve(lib, &drv.memcpyHtoDAsync, "cuMemcpyHtoDAsync_v2");
  ok &= resolve(lib, &drv.memcpyDtoHAsync, "cuMemcpyDtoHAsync_v2");
  ok &= resolve(lib, &drv.memcpyDtoDAsync, "cuMemcpyDtoDAsync_v2");
  ok &= resolve(lib, &drv.streamCreate, "cuStreamCreate");
  ok &= resolve(lib, &drv.streamDestroy, "cuStreamDestroy_v2");
  ok &= resolve(lib, &drv.streamQuery, "cuStreamQuery");
  ok &= resolve(lib, &drv.streamSynchronize, "cuStreamSynchronize");
  ok &= resolve(lib, &drv.eventCreate, "cuEventCreate");
  ok &= resolve(lib, &drv.eventRecord, "cuEventRecord");
  ok &= resolve(lib, &drv.eventQuery, "cuEventQuery");
  ok &= resolve(lib, &drv.eventDestroy, "cuEventDestroy_v2");
  ok &= resolve(lib, &drv.moduleLoadData, "cuModuleLoadData");
  ok &= resolve(lib, &drv.moduleUnload, "cuModuleUnload");
  ok &= resolve(lib, &drv.moduleGetFunction, "cuModuleGetFunction");
  ok &= resolve(lib, &drv.launchKernel, "cuLaunchKernel");
  ok &= resolve(lib, &drv.deviceGet, "cuDeviceGet");
  ok &= resolve(lib, &drv.devicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain");
  ok &= resolve(lib, &drv.devicePrimaryCtxRelease, "cuDevicePrimaryCtxRelease_v2");
  ok &= resolve(lib, &drv.memAlloc, "cuMemAlloc_v2");
  ok &= resolve(lib, &drv.memFree, "cuMemFree_v2");
  (void)resolve(lib, &drv.memGetHandleForAddressRange, "cuMemGetHandleForAddressRange");
  (void)resolve(lib, &drv.deviceGetAttribute, "cuDeviceGetAttribute");
  (void)resolve(lib, &drv.ctxCreate, "cuCtxCreate_v2");
  strand_cu_result_t r = ok ? drv.init(0) : -1;
  usable = ok && r == STRAND_CU_SUCCESS;
  if (!usable)
    STRAND_INFO(STRAND_SUBSYS_INIT, "libcuda.so.1 loaded but unusable (%s); GPU memory stays off",
                ok ? "cuInit failed" : "a driver entry point is missing");
  /* Keep the library loaded either way: libcuda is process-wide and does not like unloading. */
}

const strand_cuda_t *strand_cuda(void) {
  pthread_once(&once, load);
  return usable ? &drv : NULL;
}

const char *strand_cuda_error_name(strand_cu_result_t r) {
  const char *s = NULL;
  const strand_cuda_t *cu = strand_cuda();
  if (cu && cu->getErrorString(r, &s) == STRAND_CU_SUCCESS && s) return s;
  return "unknown CUresult";
}

/* Primary contexts retained by strand_cuda_pointer_context, one per device, kept for the
 * process's life (NCCL's runtime holds them too). */
#define PRIMARY_CTXS 64
static struct {
  pthread_mutex_t lock;
  strand_cu_ctx_t ctx[PRIMARY_CTXS];
} primary = {.lock = PTHREAD_MUTEX_INITIALIZER};

static strand_cu_ctx_t primary_context(const strand_cuda_t *cu, int ordinal) {
  if (ordinal < 0 || ordinal >= PRIMARY_CTXS) return NULL;
  pthread_mutex_lock(&primary.lock);
  strand_cu_ctx_t ctx = primary.ctx[ordinal];
  if (!ctx && cu->devicePrimaryCtxRetain(&ctx, ordinal) == STRAND_CU_SUCCESS) primary.ctx[ordinal] = ctx;
  pthread_mutex_unlock(&primary.lock);
  return ctx;
}

/* Private contexts (strand_cuda_private_context), one per device, kept like the primaries. A
 * failed creation is remembered too: it is not retried at every window. */
static struct {
  pthread_mutex_t lock;
  strand_cu_ctx_t ctx[PRIMARY_CTXS];
  bool failed[PRIMARY_CTXS];
} private_ctx = {.lock = PTHREAD_MUTEX_INITIALIZER};

strand_cu_ctx_t strand_cuda_private_context(int ordinal) {
  const strand_cuda_t *cu = strand_cuda();
  if (!cu || ordinal < 0 || ordinal >= PRIMARY_CTXS) return NULL;
  pthread_mutex_lock(&private_ctx.lock);
  strand_cu_ctx_t ctx = private_ctx.ctx[ordinal];
  if (!ctx && !private_ctx.failed[ordinal]) {
    strand_cu_ctx_t prev = NULL;
    strand_cu_result_t r = cu->ctxCreate ? cu->ctxGetCurrent(&prev) : -1;
    int dev = -1;
    if (r == STRAND_CU_SUCCESS) r = cu->deviceGet(&dev, ordinal);
    if (r == STRAND_CU_SUCCESS) r = cu->ctxCreate(&ctx, 0, dev); /* makes it current: undone below */
    if (r == STRAND_CU_SUCCESS) {
      cu->ctxSetCurrent(prev);
      private_ctx.ctx[ordinal] = ctx;
    } else {
      ctx = NULL;
      private_ctx.failed[ordinal] = true;
      STRAND_WARN("creating a CUDA context of Strand's own on device %d failed: %s", ordinal,
                  cu->ctxCreate ? strand_cuda_error_name(r) : "the driver has no cuCtxCreate_v2");
    }
  }
  pthread_mutex_unlock(&private_ctx.lock);
  return ctx;
}

strand_cu_ctx_t strand_cuda_pointer_context(const void *p) {
  const strand_cuda_t *cu = strand_cuda();
  if (!cu || !p) return NULL;
  unsigned type = 0;
  strand_cu_ctx_t ctx = NULL;
  strand_cu_devptr_t d = (strand_cu_devptr_t)(uintptr_t)p;
  if (cu->pointerGetAttribute(&type, STRAND_CU_POINTER_ATTRIBUTE_MEMORY_TYPE, d) != STRAND_CU_SUCCESS ||
      type != STRAND_CU_MEMORYTYPE_DEVICE)
    return NULL;
  if (cu->pointerGetAttribute(&ctx, STRAND_CU_POINTER_ATTRIBUTE_CONTEXT, d) == STRAND_CU_SUCCESS && ctx)
    return ctx;
  /* cuMemCreate/cuMemMap memory (NCCL's ncclCuMemAlloc) belongs to no context: its device's
   * primary context moves it. */
  int ordinal = -1;
  if (cu->pointerGetAttribute(&ordinal, STRAND_CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, d) != STRAND_CU_SUCCESS)
    return NULL;
  return primary_context(cu, ordinal);
}

/* One thread: a system-scope fence (the data copies queued before are complete when the kernel
 * starts; the fence orders them before the add for every observer), then the atomic add. PTX 6.0
 * for sm_70, the oldest GPU NCCL's device API runs on; the driver JIT-compiles it for the GPU. */
static const char add_u64_ptx[] =
    ".version 6.0\n"
    ".target sm_70\n"
    ".address_size 64\n"
    ".visible .entry strand_add_u64(.param .u64 p_addr, .param .u64 p_val)\n"
    "{\n"
    "  .reg .b64 %rd<3>;\n"
    "  ld.param.u64 %rd1, [p_addr];\n"
    "  ld.param.u64 %rd2, [p_val];\n"
    "  cvta.to.global.u64 %rd1, %rd1;\n"
    "  fence.sc.sys;\n"
    "  red.relaxed.sys.global.add.u64 [%rd1], %rd2;\n"
    "  ret;\n"
    "}\n";

/* The kernel per context (modules are per context). A handful of contexts per process at most. */
#define ADD_KERNEL_CTXS 64
static struct {
  pthread_mutex_t lock;
  int n;
  strand_cu_ctx_t ctx[ADD_KERNEL_CTXS];
  strand_cu_function_t fn[ADD_KERNEL_CTXS];
} kernels = {.lock = PTHREAD_MUTEX_INITIALIZER};

static strand_cu_result_t add_kernel(const strand_cuda_t *cu, strand_cu_function_t *out) {
  strand_cu_ctx_t ctx = NULL;
  strand_cu_result_t r = cu->ctxGetCurrent(&ctx);
  if (r != STRAND_CU_SUCCESS) return r;
  pthread_mutex_lock(&kernels.lock);
  for (int i = 0; i < kernels.n; i++)
    if (kernels.ctx[i] == ctx) {
      *out = kernels.fn[i];
      pthread_mutex_unlock(&kernels.lock);
      return STRAND_CU_SUCCESS;
    }
  strand_cu_module_t m = NULL;
  r = kernels.n < ADD_KERNEL_CTXS ? cu->moduleLoadData(&m, add_u64_ptx) : -1;
  if (r == STRAND_CU_SUCCESS) r = cu->moduleGetFunction(out, m, "strand_add_u64");
  if (r == STRAND_CU_SUCCESS) {
    kernels.ctx[kernels.n] = ctx;
    kernels.fn[kernels.n++] = *out; /* the module lives as long as its context */
  } else {
    STRAND_WARN("loading the signal-add kernel (PTX, sm_70) into the current CUDA context failed: %s",
                strand_cuda_error_name(r));
  }
  pthread_mutex_unlock(&kernels.lock);
  return r;
}

strand_cu_result_t strand_cuda_add_u64_async(strand_cu_devptr_t addr, uint64_t value,
                                             strand_cu_stream_t s) {
  const strand_cuda_t *cu = strand_cuda();
  if (!cu) return -1;
  if (addr & 7) return 1; /* CUDA_ERROR_INVALID_VALUE */
  strand_cu_function_t f = NULL;
  strand_cu_result_t r = add_kernel(cu, &f);
  if (r != STRAND_CU_SUCCESS) return r;
  void *params[] = {&addr, &value};
  return cu->launchKernel(f, 1, 1, 1, 1, 1, 1, 0, s, params, NULL);
}
