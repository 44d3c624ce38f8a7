/* Strand's stand-in (see cuda.h here): the runtime calls aws-ofi-nccl loads from libcudart. */
#ifndef STRAND_STUB_CUDA_RUNTIME_API_H
#define STRAND_STUB_CUDA_RUNTIME_API_H

#define CUDART_VERSION 12000

#ifdef __cplusplus
extern "C" {
#endif

typedef enum cudaError { cudaSuccess = 0, cudaErrorNoDevice = 100, cudaErrorUnknown = 999 } cudaError_t;
enum cudaDriverEntryPointQueryResult {
  cudaDriverEntryPointSuccess = 0,
  cudaDriverEntryPointSymbolNotFound = 1,
  cudaDriverEntryPointVersionNotSufficent = 2
};
#define cudaEnableDefault 0x0ULL

cudaError_t cudaRuntimeGetVersion(int *version);
cudaError_t cudaGetDriverEntryPoint(const char *symbol, void **fn, unsigned long long flags,
                                    enum cudaDriverEntryPointQueryResult *status);
cudaError_t cudaGetDriverEntryPointByVersion(const char *symbol, void **fn, unsigned int version,
                                             unsigned long long flags,
                                             enum cudaDriverEntryPointQueryResult *status);
const char *cudaGetErrorString(cudaError_t error);

#ifdef __cplusplus
}
#endif
#endif
