/* Strand's stand-in libcudart.so for tests/thirdparty/aws_ofi_nccl.sh: a CUDA runtime with no
 * GPU behind it, so that aws-ofi-nccl's host build loads and its host-memory paths (the net and
 * GIN/RMA tables with NCCL_PTR_HOST buffers) can be driven on a machine without CUDA.
 *
 * The plugin resolves every driver call through cudaGetDriverEntryPoint; here each resolves to a
 * function of this file. Version queries and the thread/context bookkeeping succeed (there is
 * simply no current context); anything that needs a device fails with CUDA_ERROR_NO_DEVICE, so
 * a plugin path that really needs a GPU fails loudly instead of touching fake memory. */
#include <stdint.h>
#include <string.h>

#include "cuda.h"
#include "cuda_runtime_api.h"

#define STUB_VERSION 12000 /* what the runtime and "driver" claim: the plugin's CUDA 12 path */

static CUresult s_driver_version(int *v) {
  if (!v) return CUDA_ERROR_INVALID_VALUE;
  *v = STUB_VERSION;
  return CUDA_SUCCESS;
}

static CUresult s_error_name(CUresult e, const char **s) {
  if (!s) return CUDA_ERROR_INVALID_VALUE;
  *s = e == CUDA_SUCCESS ? "CUDA_SUCCESS" : e == CUDA_ERROR_NO_DEVICE ? "CUDA_ERROR_NO_DEVICE" : "CUDA_ERROR_STUB";
  return CUDA_SUCCESS;
}

static CUresult s_error_string(CUresult e, const char **s) {
  if (!s) return CUDA_ERROR_INVALID_VALUE;
  *s = e == CUDA_SUCCESS ? "no error" : "Strand's stub CUDA runtime: no GPU";
  return CUDA_SUCCESS;
}

static CUresult s_ctx_get_current(CUcontext *ctx) {
  if (!ctx) return CUDA_ERROR_INVALID_VALUE;
  *ctx = NULL;
  return CUDA_SUCCESS;
}

static CUresult s_ctx_set_current(CUcontext ctx) { return ctx ? CUDA_ERROR_INVALID_CONTEXT : CUDA_SUCCESS; }

static CUresult s_exchange_capture_mode(CUstreamCaptureMode *mode) {
  return mode ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

/* Every pointer is plain host memory, not known to CUDA: memory type 0, no device. */
static CUresult s_pointer_attributes(unsigned int n, CUpointer_attribute *attrs, void **data, CUdeviceptr p) {
  (void)p;
  if (!attrs || !data) return CUDA_ERROR_INVALID_VALUE;
  for (unsigned int i = 0; i < n; i++) {
    if (attrs[i] == CU_POINTER_ATTRIBUTE_MEMORY_TYPE) *(unsigned int *)data[i] = 0;
    else if (attrs[i] == CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL) *(int *)data[i] = -1;
    else return CUDA_ERROR_INVALID_VALUE;
  }
  return CUDA_SUCCESS;
}

/* Entry points the plugin resolves but that need a device: each answers CUDA_ERROR_NO_DEVICE,
 * with the driver API's own signature (cudaTypedefs.h here) so that the call through the plugin's
 * typed pointer is well defined. */
#define NO_DEVICE return CUDA_ERROR_NO_DEVICE
static CUresult d_ctx_get_device(CUdevice *d) { (void)d; NO_DEVICE; }
static CUresult d_device_get_attribute(int *v, CUdevice_attribute a, CUdevice d) { (void)v, (void)a, (void)d; NO_DEVICE; }
static CUresult d_mem_alloc(CUdeviceptr *p, size_t n) { (void)p, (void)n; NO_DEVICE; }
static CUresult d_mem_free(CUdeviceptr p) { (void)p; NO_DEVICE; }
static CUresult d_memset_d8(CUdeviceptr p, unsigned char v, size_t n) { (void)p, (void)v, (void)n; NO_DEVICE; }
static CUresult d_memcpy_htod_async(CUdeviceptr d, const void *s, size_t n, CUstream st) {
  (void)d, (void)s, (void)n, (void)st;
  NO_DEVICE;
}
static CUresult d_stream_create(CUstream *s, unsigned int f) { (void)s, (void)f; NO_DEVICE; }
static CUresult d_stream_synchronize(CUstream s) { (void)s; NO_DEVICE; }
static CUresult d_stream_destroy(CUstream s) { (void)s; NO_DEVICE; }
static CUresult d_host_register(void *p, size_t n, unsigned int f) { (void)p, (void)n, (void)f; NO_DEVICE; }
static CUresult d_host_get_device_pointer(CUdeviceptr *d, void *p, unsigned int f) { (void)d, (void)p, (void)f; NO_DEVICE; }
static CUresult d_host_unregister(void *p) { (void)p; NO_DEVICE; }
static CUresult d_mem_create(CUmemGenericAllocationHandle *h, size_t n, const CUmemAllocationProp *p,
                             unsigned long long f) {
  (void)h, (void)n, (void)p, (void)f;
  NO_DEVICE;
}
static CUresult d_mem_release(CUmemGenericAllocationHandle h) { (void)h; NO_DEVICE; }
static CUresult d_address_reserve(CUdeviceptr *p, size_t n, size_t al, CUdeviceptr a, unsigned long long f) {
  (void)p, (void)n, (void)al, (void)a, (void)f;
  NO_DEVICE;
}
static CUresult d_address_free(CUdeviceptr p, size_t n) { (void)p, (void)n; NO_DEVICE; }
static CUresult d_mem_map(CUdeviceptr p, size_t n, size_t o, CUmemGenericAllocationHandle h, unsigned long long f) {
  (void)p, (void)n, (void)o, (void)h, (void)f;
  NO_DEVICE;
}
static CUresult d_mem_unmap(CUdeviceptr p, size_t n) { (void)p, (void)n; NO_DEVICE; }
static CUresult d_set_access(CUdeviceptr p, size_t n, const CUmemAccessDesc *d, size_t c) {
  (void)p, (void)n, (void)d, (void)c;
  NO_DEVICE;
}
static CUresult d_granularity(size_t *g, const CUmemAllocationProp *p, CUmemAllocationGranularity_flags f) {
  (void)g, (void)p, (void)f;
  NO_DEVICE;
}
static CUresult d_address_range(CUdeviceptr *b, size_t *n, CUdeviceptr p) { (void)b, (void)n, (void)p; NO_DEVICE; }
static CUresult d_retain_handle(CUmemGenericAllocationHandle *h, void *a) { (void)h, (void)a; NO_DEVICE; }
static CUresult d_props_from_handle(CUmemAllocationProp *p, CUmemGenericAllocationHandle h) { (void)p, (void)h; NO_DEVICE; }

/* Every entry point the plugin resolves (configure leaves out the GDR-flush and DMA-BUF ones:
 * CUDA_VERSION in cuda.h here is below both). A function pointer is stored as a generic one and
 * converted back by the caller to its own, identical, PFN type. */
typedef void (*any_fn)(void);
static const struct {
  const char *name;
  any_fn fn;
} entries[] = {
    {"cuDriverGetVersion", (any_fn)s_driver_version},
    {"cuGetErrorName", (any_fn)s_error_name},
    {"cuGetErrorString", (any_fn)s_error_string},
    {"cuCtxGetCurrent", (any_fn)s_ctx_get_current},
    {"cuCtxSetCurrent", (any_fn)s_ctx_set_current},
    {"cuThreadExchangeStreamCaptureMode", (any_fn)s_exchange_capture_mode},
    {"cuPointerGetAttributes", (any_fn)s_pointer_attributes},
    {"cuCtxGetDevice", (any_fn)d_ctx_get_device},
    {"cuDeviceGetAttribute", (any_fn)d_device_get_attribute},
    {"cuMemAlloc", (any_fn)d_mem_alloc},
    {"cuMemFree", (any_fn)d_mem_free},
    {"cuMemsetD8", (any_fn)d_memset_d8},
    {"cuMemcpyHtoDAsync", (any_fn)d_memcpy_htod_async},
    {"cuStreamCreate", (any_fn)d_stream_create},
    {"cuStreamSynchronize", (any_fn)d_stream_synchronize},
    {"cuStreamDestroy", (any_fn)d_stream_destroy},
    {"cuMemHostRegister", (any_fn)d_host_register},
    {"cuMemHostGetDevicePointer", (any_fn)d_host_get_device_pointer},
    {"cuMemHostUnregister", (any_fn)d_host_unregister},
    {"cuMemCreate", (any_fn)d_mem_create},
    {"cuMemRelease", (any_fn)d_mem_release},
    {"cuMemAddressReserve", (any_fn)d_address_reserve},
    {"cuMemAddressFree", (any_fn)d_address_free},
    {"cuMemMap", (any_fn)d_mem_map},
    {"cuMemUnmap", (any_fn)d_mem_unmap},
    {"cuMemSetAccess", (any_fn)d_set_access},
    {"cuMemGetAllocationGranularity", (any_fn)d_granularity},
    {"cuMemGetAddressRange", (any_fn)d_address_range},
    {"cuMemRetainAllocationHandle", (any_fn)d_retain_handle},
    {"cuMemGetAllocationPropertiesFromHandle", (any_fn)d_props_from_handle},
};

cudaError_t cudaRuntimeGetVersion(int *version) {
  if (!version) return cudaErrorUnknown;
  *version = STUB_VERSION;
  return cudaSuccess;
}

cudaError_t cudaGetDriverEntryPoint(const char *symbol, void **fn, unsigned long long flags,
                                    enum cudaDriverEntryPointQueryResult *status) {
  (void)flags;
  if (!symbol || !fn) return cudaErrorUnknown;
  *fn = NULL;
  for (size_t i = 0; i < sizeof entries / sizeof entries[0]; i++)
    if (strcmp(symbol, entries[i].name) == 0) *fn = (void *)(uintptr_t)entries[i].fn;
  if (status) *status = *fn ? cudaDriverEntryPointSuccess : cudaDriverEntryPointSymbolNotFound;
  return *fn ? cudaSuccess : cudaErrorUnknown;
}

cudaError_t cudaGetDriverEntryPointByVersion(const char *symbol, void **fn, unsigned int version,
                                             unsigned long long flags,
                                             enum cudaDriverEntryPointQueryResult *status) {
  (void)version;
  return cudaGetDriverEntryPoint(symbol, fn, flags, status);
}

const char *cudaGetErrorString(cudaError_t error) {
  return error == cudaSuccess ? "no error" : "Strand's stub CUDA runtime: no GPU";
}
