// device_unpack — a kernel shaped like NCCL's ncclNetDeviceUnpack (spec §3.2), written from the
// description there, to predict the rate real NCCL reaches on our bounce arena. Its shape is the
// point; do not "optimise" it (unpack_fast.cu is the optimised one).
#include "unpack_kernels.h"

#define WARP 32
#define STAGE 4 // records staged per warp per round (NCCL's WARP_SHM_PAGE_CNT)

// Volatile global loads (NCCL reads the bounce buffer with ld.volatile.global: no L1 caching of
// data the NIC / CPU wrote behind the GPU's back).
__device__ __forceinline__ uint64_t ldv64(const uint8_t *p) {
  uint64_t v;
  asm volatile("ld.volatile.global.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
  return v;
}
__device__ __forceinline__ uint32_t ldv32(const uint8_t *p) {
  uint32_t v;
  asm volatile("ld.volatile.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
}
__device__ __forceinline__ uint16_t ldv16(const uint8_t *p) {
  uint16_t v;
  asm volatile("ld.volatile.global.u16 %0, [%1];" : "=h"(v) : "l"(p) : "memory");
  return v;
}
__device__ __forceinline__ uint16_t ldv8(const uint8_t *p) {
  uint16_t v;
  asm volatile("ld.volatile.global.u8 %0, [%1];" : "=h"(v) : "l"(p) : "memory");
  return v;
}

// One 16-byte chunk with elements of W bytes: all loads first, then the stores (the "memory"
// clobbers keep exactly this one chunk in flight per lane, as in NCCL).
template <int W>
__device__ __forceinline__ void copy16(uint8_t *d, const uint8_t *s) {
  if (W == 16) {
    uint64_t a = ldv64(s), b = ldv64(s + 8);
    reinterpret_cast<ulonglong2 *>(d)[0] = make_ulonglong2(a, b);
  } else if (W == 8) {
    uint64_t v[2];
    for (int i = 0; i < 2; i++) v[i] = ldv64(s + 8 * i);
    for (int i = 0; i < 2; i++) reinterpret_cast<uint64_t *>(d)[i] = v[i];
  } else if (W == 4) {
    uint32_t v[4];
    for (int i = 0; i < 4; i++) v[i] = ldv32(s + 4 * i);
    for (int i = 0; i < 4; i++) reinterpret_cast<uint32_t *>(d)[i] = v[i];
  } else if (W == 2) {
    uint16_t v[8];
    for (int i = 0; i < 8; i++) v[i] = ldv16(s + 2 * i);
    for (int i = 0; i < 8; i++) reinterpret_cast<uint16_t *>(d)[i] = v[i];
  } else {
    uint16_t v[16];
    for (int i = 0; i < 16; i++) v[i] = ldv8(s + i);
    for (int i = 0; i < 16; i++) d[i] = (uint8_t)v[i];
  }
}

template <int W>
__device__ __forceinline__ void copy_body(uint8_t *d, const uint8_t *s, uint32_t len16, int lane) {
  for (uint32_t o = (uint32_t)lane * 16; o < len16; o += WARP * 16) copy16<W>(d + o, s + o);
}

// The whole warp copies one record.
__device__ __forceinline__ void copy_record(const uint8_t *bounce, uint8_t *dst,
                                            const strand_unpack_load_meta_t &m, int lane) {
  const uint8_t *s = bounce + m.src_off;
  uint8_t *d = dst + m.dst_off;
  uint32_t len = m.len, len16 = len & ~15u;
  if (len16) {
    uint32_t mis = (uint32_t)(((uintptr_t)s | (uintptr_t)d) % 16);
    uint32_t low = mis & (0u - mis); // lowest set bit: the widest element both sides allow
    if (mis == 0) copy_body<16>(d, s, len16, lane);
    else if (low == 8) copy_body<8>(d, s, len16, lane);
    else if (low == 4) copy_body<4>(d, s, len16, lane);
    else if (low == 2) copy_body<2>(d, s, len16, lane);
    else copy_body<1>(d, s, len16, lane);
  }
  uint32_t tail = len - len16;
  if ((uint32_t)lane < tail) d[len16 + lane] = (uint8_t)ldv8(s + len16 + lane);
}

__global__ void unpack_compat_kernel(const unpack_job_t *jobs) {
  extern __shared__ strand_unpack_load_meta_t stage[]; // STAGE per warp
  const unpack_job_t job = jobs[blockIdx.x];
  const int lane = threadIdx.x % WARP, warp = threadIdx.x / WARP, nw = blockDim.x / WARP;
  strand_unpack_load_meta_t *mine = stage + warp * STAGE;
  // Records per warp per round, from the receive size as NCCL does (there in elements; here in
  // bytes: it is only a work-split heuristic): ceil(pages / warps), halved until <= STAGE.
  uint64_t pages = (job.bytes + 4095) / 4096;
  uint32_t ppw = (uint32_t)((pages + nw - 1) / nw);
  while (ppw > STAGE) ppw /= 2;
  if (ppw == 0) ppw = 1; // NCCL would spin forever here with records present; we never do
  for (uint32_t base = (uint32_t)warp * ppw; base < job.cnt; base += (uint32_t)nw * ppw) {
    uint32_t n = job.cnt - base < ppw ? job.cnt - base : ppw;
    if ((uint32_t)lane < n) {
      const uint8_t *r = reinterpret_cast<const uint8_t *>(job.recs + base + lane);
      uint64_t a = ldv64(r), b = ldv64(r + 8);
      mine[lane].r64[0] = a;
      mine[lane].r64[1] = b;
    }
    __syncwarp();
    for (uint32_t i = 0; i < n; i++) copy_record(job.bounce, job.dst, mine[i], lane);
    __syncwarp();
  }
}

cudaError_t unpack_compat_launch(const unpack_job_t *jobs, int njobs, int threads, cudaStream_t s) {
  if (njobs <= 0) return cudaSuccess;
  size_t shm = (size_t)(threads / WARP) * STAGE * sizeof(strand_unpack_load_meta_t);
  unpack_compat_kernel<<<njobs, threads, shm, s>>>(jobs);
  return cudaGetLastError();
}
