// device_unpack — the fast gather: several independent 16-byte loads in flight per lane, and an
// aligned head / body / tail split so that misaligned records still move in 16-byte units.
// Latency, not bandwidth, bounds a copy from host-mapped memory over PCIe (spec §3.3-3.4): with
// one chunk in flight per lane a CTA keeps ~8 KiB outstanding, so the remedy is more loads in
// flight, not wider ones.
#include "unpack_kernels.h"

#define WARP 32
#define U UNPACK_FAST_INFLIGHT

__device__ __forceinline__ uint4 ld16(const uint8_t *p) { // p 16-byte aligned
  uint4 v;
  asm volatile("ld.volatile.global.v4.u32 {%0,%1,%2,%3}, [%4];"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(p));
  return v;
}
__device__ __forceinline__ uint8_t ld8(const uint8_t *p) {
  uint16_t v;
  asm volatile("ld.volatile.global.u8 %0, [%1];" : "=h"(v) : "l"(p));
  return (uint8_t)v;
}

// Bytes [sh, sh + 16) of the 32-byte concatenation a:b (sh in 1..15), by 32-bit funnel shifts.
__device__ __forceinline__ uint4 shift_pair(uint4 a, uint4 b, uint32_t sh) {
  uint32_t w[8] = {a.x, a.y, a.z, a.w, b.x, b.y, b.z, b.w};
  uint32_t wo = sh / 4, bs = (sh % 4) * 8;
  uint32_t o[4];
#pragma unroll
  for (int i = 0; i < 4; i++) {
    uint32_t lo = w[wo + i], hi = w[wo + i + 1]; // wo + i + 1 <= 7
    o[i] = __funnelshift_r(lo, hi, bs);           // bs == 0 gives lo
  }
  return make_uint4(o[0], o[1], o[2], o[3]);
}

// The whole warp copies one record.
__device__ void copy_record(const uint8_t *bounce, uint8_t *dst, strand_unpack_load_meta_t m,
                            int lane) {
  const uint8_t *s = bounce + m.src_off;
  uint8_t *d = dst + m.dst_off;
  uint32_t len = m.len;
  // head: up to 15 bytes until the destination is 16-byte aligned
  uint32_t head = (uint32_t)((16 - ((uintptr_t)d % 16)) % 16);
  if (head > len) head = len;
  if ((uint32_t)lane < head) d[lane] = ld8(s + lane);
  s += head;
  d += head;
  len -= head;
  uint32_t chunks = len / 16, tail = len % 16;
  uint32_t sh = (uint32_t)((uintptr_t)s % 16);
  uint4 *d16 = reinterpret_cast<uint4 *>(d);
  if (sh == 0) {
    for (uint32_t c = (uint32_t)lane; c < chunks; c += WARP * U) {
      uint4 v[U];
#pragma unroll
      for (int k = 0; k < U; k++)
        if (c + k * WARP < chunks) v[k] = ld16(s + 16 * (c + k * WARP));
#pragma unroll
      for (int k = 0; k < U; k++)
        if (c + k * WARP < chunks) d16[c + k * WARP] = v[k];
    }
  } else {
    // Chunk c's 16 source bytes start at s + 16c = base + 16c + sh: they straddle the aligned
    // blocks c and c + 1 of base. Block c + 1 holds at least one byte the record owns, so both
    // loads stay inside 16-byte blocks the record touches.
    const uint8_t *base = s - sh;
    for (uint32_t c = (uint32_t)lane; c < chunks; c += WARP * U) {
      uint4 a[U], b[U];
#pragma unroll
      for (int k = 0; k < U; k++)
        if (c + k * WARP < chunks) {
          a[k] = ld16(base + 16 * (c + k * WARP));
          b[k] = ld16(base + 16 * (c + k * WARP) + 16);
        }
#pragma unroll
      for (int k = 0; k < U; k++)
        if (c + k * WARP < chunks) d16[c + k * WARP] = shift_pair(a[k], b[k], sh);
    }
  }
  uint32_t t0 = chunks * 16;
  if ((uint32_t)lane < tail) d[t0 + lane] = ld8(s + t0 + lane);
}

__global__ void unpack_fast_kernel(const unpack_job_t *jobs) {
  const unpack_job_t job = jobs[blockIdx.x];
  const int lane = threadIdx.x % WARP, warp = threadIdx.x / WARP, nw = blockDim.x / WARP;
  // Warp w copies records w, w + nw, w + 2nw, ... (so a receive of a few large records still
  // spreads over every warp). They are fetched a warp-width at a time, one record per lane, and
  // handed out by shuffle: records in host memory cost one PCIe round trip per 32 records
  // instead of one per 4.
  for (uint32_t first = (uint32_t)warp; first < job.cnt; first += (uint32_t)nw * WARP) {
    uint32_t left = (job.cnt - first + (uint32_t)nw - 1) / (uint32_t)nw;
    uint32_t n = left < WARP ? left : WARP;
    uint64_t r0 = 0, r1 = 0;
    if ((uint32_t)lane < n) {
      uint4 v = ld16(reinterpret_cast<const uint8_t *>(job.recs + first + (uint32_t)lane * nw));
      r0 = (uint64_t)v.x | ((uint64_t)v.y << 32);
      r1 = (uint64_t)v.z | ((uint64_t)v.w << 32);
    }
    for (uint32_t i = 0; i < n; i++) {
      strand_unpack_load_meta_t m;
      m.r64[0] = __shfl_sync(0xffffffffu, r0, (int)i);
      m.r64[1] = __shfl_sync(0xffffffffu, r1, (int)i);
      copy_record(job.bounce, job.dst, m, lane);
    }
  }
}

cudaError_t unpack_fast_launch(const unpack_job_t *jobs, int njobs, int threads, cudaStream_t s) {
  if (njobs <= 0) return cudaSuccess;
  unpack_fast_kernel<<<njobs, threads, 0, s>>>(jobs);
  return cudaGetLastError();
}
