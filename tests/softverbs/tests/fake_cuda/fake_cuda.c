/* A test double of the CUDA driver (libcuda.so.1) for machines without a GPU: just enough of the
 * entry points the SDK's run-time loader resolves (plugin_api/src/cuda_driver.c) to let CI drive
 * softverbs' and strand-ib's GPU-memory paths. It is strict where those paths could go wrong:
 * - "device memory" (cuMemAlloc) is a memfd mapped twice: the address handed out is mapped
 *   PROT_NONE, so any CPU access to it (a copy that bypassed the driver) kills the process with
 *   SIGSEGV; the driver's own copies go through a second, writable mapping;
 * - copies need the allocation's context current on the calling thread (CUDA_ERROR_INVALID_CONTEXT
 *   otherwise) and a stream that was created (or NULL);
 * - cuMemGetHandleForAddressRange gives a file named "dmabuf" (a memfd), as a real export does.
 * Kernels, modules, events and host allocations are not provided (CUDA_ERROR_NOT_SUPPORTED).
 * Never installed: tests put its directory first on LD_LIBRARY_PATH. */
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define EXPORT __attribute__((visibility("default")))
typedef int CUresult;
typedef unsigned long long CUdeviceptr;
enum { OK = 0, INVALID_VALUE = 1, NOT_INITIALIZED = 3, INVALID_CONTEXT = 201,
       INVALID_HANDLE = 400, NOT_SUPPORTED = 801 };

static int the_ctx_obj, the_stream_obj[64];
static void *const the_ctx = &the_ctx_obj;
static int initialised, primary_refs, nstreams;
/* The calling thread's current context. A pthread key, not __thread: LeakSanitizer's scan of the
 * dynamic TLS of dlopen'ed libraries crashes on some glibc versions. */
static pthread_key_t current_key;
static pthread_once_t key_once = PTHREAD_ONCE_INIT;
static void make_key(void) { pthread_key_create(&current_key, NULL); }
static void *current_get(void)
{
  pthread_once(&key_once, make_key);
  return pthread_getspecific(current_key);
}

#define MAX_ALLOCS 256
static struct {
  uintptr_t dev;   /* PROT_NONE mapping: the device address */
  uint8_t *shadow; /* writable mapping of the same pages */
  size_t len;
  int fd;
} allocs[MAX_ALLOCS];
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

/* The allocation holding [p, p + n), or -1. */
static int find(uintptr_t p, size_t n)
{
  for (int i = 0; i < MAX_ALLOCS; i++)
    if (allocs[i].len && p >= allocs[i].dev && n <= allocs[i].len &&
        p - allocs[i].dev <= allocs[i].len - n)
      return i;
  return -1;
}

EXPORT CUresult cuInit(unsigned flags)
{
  (void)flags;
  initialised = 1;
  return OK;
}

EXPORT CUresult cuGetErrorName(CUresult r, const char **s)
{
  switch (r) {
  case OK: *s = "CUDA_SUCCESS"; break;
  case INVALID_VALUE: *s = "CUDA_ERROR_INVALID_VALUE"; break;
  case INVALID_CONTEXT: *s = "CUDA_ERROR_INVALID_CONTEXT"; break;
  case INVALID_HANDLE: *s = "CUDA_ERROR_INVALID_HANDLE"; break;
  case NOT_SUPPORTED: *s = "CUDA_ERROR_NOT_SUPPORTED"; break;
  default: *s = "CUDA_ERROR_UNKNOWN (fake driver)"; break;
  }
  return OK;
}

EXPORT CUresult cuCtxGetCurrent(void **c) { *c = current_get(); return OK; }
EXPORT CUresult cuCtxSetCurrent(void *c)
{
  if (c && c != the_ctx) return INVALID_CONTEXT;
  pthread_once(&key_once, make_key);
  pthread_setspecific(current_key, c);
  return OK;
}
EXPORT CUresult cuCtxGetDevice(int *d)
{
  if (!current_get()) return INVALID_CONTEXT;
  *d = 0;
  return OK;
}
EXPORT CUresult cuDeviceGet(int *d, int ordinal)
{
  if (!initialised) return NOT_INITIALIZED;
  if (ordinal != 0) return INVALID_VALUE;
  *d = 0;
  return OK;
}
EXPORT CUresult cuDevicePrimaryCtxRetain(void **c, int dev)
{
  if (dev != 0) return INVALID_VALUE;
  __atomic_add_fetch(&primary_refs, 1, __ATOMIC_RELAXED);
  *c = the_ctx;
  return OK;
}
EXPORT CUresult cuDevicePrimaryCtxRelease_v2(int dev)
{
  (void)dev;
  __atomic_sub_fetch(&primary_refs, 1, __ATOMIC_RELAXED);
  return OK;
}

EXPORT CUresult cuMemAlloc_v2(CUdeviceptr *d, size_t n)
{
  if (!current_get()) return INVALID_CONTEXT;
  if (!n) return INVALID_VALUE;
  int fd = memfd_create("fake-cuda-device-memory", MFD_CLOEXEC);
  if (fd < 0 || ftruncate(fd, (off_t)n) != 0) return 2; /* CUDA_ERROR_OUT_OF_MEMORY */
  void *dev = mmap(NULL, n, PROT_NONE, MAP_SHARED, fd, 0);
  void *sh = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (dev == MAP_FAILED || sh == MAP_FAILED) return 2;
  pthread_mutex_lock(&lock);
  int i = 0;
  while (i < MAX_ALLOCS && allocs[i].len) i++;
  if (i == MAX_ALLOCS) {
    pthread_mutex_unlock(&lock);
    return 2;
  }
  allocs[i].dev = (uintptr_t)dev;
  allocs[i].shadow = sh;
  allocs[i].len = n;
  allocs[i].fd = fd;
  pthread_mutex_unlock(&lock);
  *d = (CUdeviceptr)(uintptr_t)dev;
  return OK;
}

EXPORT CUresult cuMemFree_v2(CUdeviceptr d)
{
  pthread_mutex_lock(&lock);
  int i = find((uintptr_t)d, 1);
  if (i < 0 || allocs[i].dev != (uintptr_t)d) {
    pthread_mutex_unlock(&lock);
    return INVALID_VALUE;
  }
  munmap((void *)allocs[i].dev, allocs[i].len);
  munmap(allocs[i].shadow, allocs[i].len);
  close(allocs[i].fd);
  memset(&allocs[i], 0, sizeof(allocs[i]));
  pthread_mutex_unlock(&lock);
  return OK;
}

/* CU_POINTER_ATTRIBUTE_CONTEXT 1, MEMORY_TYPE 2 (CU_MEMORYTYPE_DEVICE 2), DEVICE_ORDINAL 9. */
EXPORT CUresult cuPointerGetAttribute(void *data, int attr, CUdeviceptr p)
{
  pthread_mutex_lock(&lock);
  int i = find((uintptr_t)p, 1);
  pthread_mutex_unlock(&lock);
  if (i < 0) return INVALID_VALUE; /* what the driver says of memory it does not know */
  switch (attr) {
  case 1: *(void **)data = the_ctx; return OK;
  case 2: *(unsigned *)data = 2; return OK;
  case 9: *(int *)data = 0; return OK;
  default: return INVALID_VALUE;
  }
}

static int stream_ok(void *s)
{
  if (!s) return 1;
  for (int i = 0; i < nstreams; i++)
    if (s == &the_stream_obj[i]) return 1;
  return 0;
}

/* The shadow of device range [d, d + n) for a copy; NULL when the copy is not allowed. */
static uint8_t *shadow_of(CUdeviceptr d, size_t n, void *s, CUresult *why)
{
  if (current_get() != the_ctx) {
    *why = INVALID_CONTEXT;
    return NULL;
  }
  if (!stream_ok(s)) {
    *why = INVALID_HANDLE;
    return NULL;
  }
  pthread_mutex_lock(&lock);
  int i = find((uintptr_t)d, n);
  uint8_t *sh = i < 0 ? NULL : allocs[i].shadow + ((uintptr_t)d - allocs[i].dev);
  pthread_mutex_unlock(&lock);
  *why = INVALID_VALUE;
  return sh;
}

EXPORT CUresult cuMemcpyHtoDAsync_v2(CUdeviceptr d, const void *h, size_t n, void *s)
{
  CUresult why;
  uint8_t *sh = shadow_of(d, n, s, &why);
  if (!sh) return why;
  memcpy(sh, h, n);
  return OK;
}

EXPORT CUresult cuMemcpyDtoHAsync_v2(void *h, CUdeviceptr d, size_t n, void *s)
{
  CUresult why;
  uint8_t *sh = shadow_of(d, n, s, &why);
  if (!sh) return why;
  memcpy(h, sh, n);
  return OK;
}

EXPORT CUresult cuMemcpyDtoDAsync_v2(CUdeviceptr d, CUdeviceptr src, size_t n, void *s)
{
  CUresult why;
  uint8_t *a = shadow_of(d, n, s, &why), *b = a ? shadow_of(src, n, s, &why) : NULL;
  if (!a || !b) return why;
  memmove(a, b, n);
  return OK;
}

EXPORT CUresult cuStreamCreate(void **s, unsigned flags)
{
  (void)flags;
  if (!current_get()) return INVALID_CONTEXT;
  int i = __atomic_fetch_add(&nstreams, 1, __ATOMIC_RELAXED);
  if (i >= 64) return NOT_SUPPORTED;
  *s = &the_stream_obj[i];
  return OK;
}
EXPORT CUresult cuStreamDestroy_v2(void *s) { return stream_ok(s) ? OK : INVALID_HANDLE; }
EXPORT CUresult cuStreamQuery(void *s) { return stream_ok(s) ? OK : INVALID_HANDLE; }
EXPORT CUresult cuStreamSynchronize(void *s) { return stream_ok(s) ? OK : INVALID_HANDLE; }

/* CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD = 1: a file whose name says dmabuf. */
EXPORT CUresult cuMemGetHandleForAddressRange(void *handle, CUdeviceptr d, size_t n, int type,
                                              unsigned long long flags)
{
  (void)flags;
  pthread_mutex_lock(&lock);
  int i = find((uintptr_t)d, n);
  pthread_mutex_unlock(&lock);
  if (type != 1 || i < 0) return INVALID_VALUE;
  int fd = memfd_create("dmabuf", MFD_CLOEXEC);
  if (fd < 0) return NOT_SUPPORTED;
  *(int *)handle = fd;
  return OK;
}

/* Present (the loader requires them) but not provided. */
#pragma GCC diagnostic ignored "-Wunused-parameter"
#define UNSUPPORTED(name, ...)                                                                     \
  EXPORT CUresult name(__VA_ARGS__) { return NOT_SUPPORTED; }
UNSUPPORTED(cuMemHostAlloc, void **p, size_t n, unsigned f)
UNSUPPORTED(cuMemHostGetDevicePointer_v2, CUdeviceptr *d, void *p, unsigned f)
UNSUPPORTED(cuMemFreeHost, void *p)
UNSUPPORTED(cuMemHostRegister_v2, void *p, size_t n, unsigned f)
UNSUPPORTED(cuMemHostUnregister, void *p)
UNSUPPORTED(cuEventCreate, void **e, unsigned f)
UNSUPPORTED(cuEventRecord, void *e, void *s)
UNSUPPORTED(cuEventQuery, void *e)
UNSUPPORTED(cuEventDestroy_v2, void *e)
UNSUPPORTED(cuModuleLoadData, void **m, const void *image)
UNSUPPORTED(cuModuleUnload, void *m)
UNSUPPORTED(cuModuleGetFunction, void **f, void *m, const char *name)
UNSUPPORTED(cuLaunchKernel, void *f, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
            unsigned by, unsigned bz, unsigned shmem, void *s, void **params, void **extra)
