/* device_unpack kernels (CUDA, tests and benchmarks only: in production NCCL's own kernel gathers).
 *
 * A job is one receive as NCCL's kernel sees it: records in `recs` (GPU-readable; host-mapped
 * memory like the plugin's ring, or device memory), gathered from `bounce` into `dst`. One CTA
 * per job, as NCCL uses one CTA per channel.
 *   unpack_compat  shaped like NCCL's ncclNetDeviceUnpack (spec §3.2): <= 4 records staged per warp
 *                  in shared memory, element width from (src|dst) % 16, ONE 16-byte chunk in flight
 *                  per lane, volatile loads, byte-wise tail. Used to predict what real NCCL does.
 *   unpack_fast    UNPACK_FAST_INFLIGHT independent 16-byte loads per lane, and an aligned
 *                  head / body / tail split: the destination is made 16-byte aligned, and a source
 *                  at another alignment is rebuilt from two aligned loads with funnel shifts instead
 *                  of narrower loads. */
#ifndef STRAND_UNPACK_KERNELS_H
#define STRAND_UNPACK_KERNELS_H

#include <cuda_runtime.h>
#include <stdint.h>

#include "strand/abi/device.h"

#define UNPACK_FAST_INFLIGHT 4

typedef struct {
  const uint8_t *bounce;
  uint8_t *dst;
  const strand_unpack_load_meta_t *recs;
  uint32_t cnt;
  uint64_t bytes; /* receive size: NCCL derives its records-per-warp heuristic from it */
} unpack_job_t;

/* jobs: device-readable array of njobs; one CTA of `threads` (multiple of 32, <= 1024) per job. */
cudaError_t unpack_compat_launch(const unpack_job_t *jobs, int njobs, int threads, cudaStream_t s);
cudaError_t unpack_fast_launch(const unpack_job_t *jobs, int njobs, int threads, cudaStream_t s);

#endif
