// device_unpack GPU test/bench helpers: skip without a GPU, fail loudly on any CUDA error.
#ifndef STRAND_UNPACK_GPU_COMMON_H
#define STRAND_UNPACK_GPU_COMMON_H

#include <cuda_runtime.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#define CUDA_OK(call)                                                                              \
  do {                                                                                             \
    cudaError_t e_ = (call);                                                                       \
    if (e_ != cudaSuccess) {                                                                       \
      fprintf(stderr, "%s:%d: %s failed: %s\n", __FILE__, __LINE__, #call, cudaGetErrorString(e_)); \
      exit(1);                                                                                     \
    }                                                                                              \
  } while (0)

// Exit 77 (meson: skipped) with the reason when no GPU can be used here.
static inline void skip_without_gpu(const char *prog) {
  int n = 0;
  cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess || n == 0) {
    printf("%s: skipped: no usable GPU (%s)\n", prog,
           e != cudaSuccess ? cudaGetErrorString(e) : "0 devices");
    exit(77);
  }
}

static inline void *host_mapped(size_t bytes, void **dev) {
  void *h = NULL;
  CUDA_OK(cudaHostAlloc(&h, bytes, cudaHostAllocMapped | cudaHostAllocPortable));
  CUDA_OK(cudaHostGetDevicePointer(dev, h, 0));
  return h;
}

static inline uint64_t xorshift(uint64_t *s) {
  *s ^= *s << 13;
  *s ^= *s >> 7;
  *s ^= *s << 17;
  return *s;
}

#endif
