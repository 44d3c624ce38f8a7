/* Strand's stand-in (see cuda.h here): the PFN_<entry>_v<version> pointer types aws-ofi-nccl
 * resolves through cudaGetDriverEntryPoint, with the driver API's signatures. */
#ifndef STRAND_STUB_CUDATYPEDEFS_H
#define STRAND_STUB_CUDATYPEDEFS_H

#include "cuda.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef CUresult (*PFN_cuDriverGetVersion_v2020)(int *version);
typedef CUresult (*PFN_cuGetErrorString_v6000)(CUresult error, const char **str);
typedef CUresult (*PFN_cuGetErrorName_v6000)(CUresult error, const char **str);
typedef CUresult (*PFN_cuCtxGetDevice_v2000)(CUdevice *device);
typedef CUresult (*PFN_cuCtxSetCurrent_v4000)(CUcontext ctx);
typedef CUresult (*PFN_cuCtxGetCurrent_v4000)(CUcontext *ctx);
typedef CUresult (*PFN_cuDeviceGetAttribute_v2000)(int *value, CUdevice_attribute attrib, CUdevice dev);
typedef CUresult (*PFN_cuPointerGetAttributes_v7000)(unsigned int n, CUpointer_attribute *attrs, void **data,
                                                     CUdeviceptr ptr);
typedef CUresult (*PFN_cuMemAlloc_v3020)(CUdeviceptr *dptr, size_t bytes);
typedef CUresult (*PFN_cuMemFree_v3020)(CUdeviceptr dptr);
typedef CUresult (*PFN_cuMemsetD8_v3020)(CUdeviceptr dst, unsigned char value, size_t n);
typedef CUresult (*PFN_cuMemcpyHtoDAsync_v3020)(CUdeviceptr dst, const void *src, size_t bytes, CUstream stream);
typedef CUresult (*PFN_cuStreamCreate_v2000)(CUstream *stream, unsigned int flags);
typedef CUresult (*PFN_cuStreamSynchronize_v2000)(CUstream stream);
typedef CUresult (*PFN_cuStreamDestroy_v4000)(CUstream stream);
typedef CUresult (*PFN_cuMemHostRegister_v6050)(void *p, size_t bytes, unsigned int flags);
typedef CUresult (*PFN_cuMemHostGetDevicePointer_v3020)(CUdeviceptr *dptr, void *p, unsigned int flags);
typedef CUresult (*PFN_cuMemHostUnregister_v4000)(void *p);
typedef CUresult (*PFN_cuMemCreate_v10020)(CUmemGenericAllocationHandle *handle, size_t size,
                                           const CUmemAllocationProp *prop, unsigned long long flags);
typedef CUresult (*PFN_cuMemRelease_v10020)(CUmemGenericAllocationHandle handle);
typedef CUresult (*PFN_cuMemAddressReserve_v10020)(CUdeviceptr *ptr, size_t size, size_t alignment, CUdeviceptr addr,
                                                   unsigned long long flags);
typedef CUresult (*PFN_cuMemAddressFree_v10020)(CUdeviceptr ptr, size_t size);
typedef CUresult (*PFN_cuMemMap_v10020)(CUdeviceptr ptr, size_t size, size_t offset,
                                        CUmemGenericAllocationHandle handle, unsigned long long flags);
typedef CUresult (*PFN_cuMemUnmap_v10020)(CUdeviceptr ptr, size_t size);
typedef CUresult (*PFN_cuMemSetAccess_v10020)(CUdeviceptr ptr, size_t size, const CUmemAccessDesc *desc, size_t count);
typedef CUresult (*PFN_cuMemGetAllocationGranularity_v10020)(size_t *granularity, const CUmemAllocationProp *prop,
                                                             CUmemAllocationGranularity_flags option);
typedef CUresult (*PFN_cuMemGetAddressRange_v3020)(CUdeviceptr *base, size_t *size, CUdeviceptr dptr);
typedef CUresult (*PFN_cuMemRetainAllocationHandle_v11000)(CUmemGenericAllocationHandle *handle, void *addr);
typedef CUresult (*PFN_cuMemGetAllocationPropertiesFromHandle_v10020)(CUmemAllocationProp *prop,
                                                                      CUmemGenericAllocationHandle handle);
typedef CUresult (*PFN_cuThreadExchangeStreamCaptureMode_v10010)(CUstreamCaptureMode *mode);

#ifdef __cplusplus
}
#endif
#endif
