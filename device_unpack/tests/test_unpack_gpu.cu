// device_unpack GPU test: both kernels against unpack_ref (the CPU golden gather) on randomized
// receives — record count 0..2048, lengths 0..64 KiB, source and destination alignment 0..15,
// records shuffled over the arena, zero-length records — with the bounce in host-mapped and in
// device memory, and guard bytes around every destination. Run it under
// `compute-sanitizer --tool memcheck` too (docs/benchmarks/device-unpack.md). Exit 77 without GPU.
#include <string.h>
#include <vector>

#include "gpu_common.h"
#include "strand/unpack.h"
#include "unpack_kernels.h"

#define ARENA (16u << 20)
#define GUARD 256
#define JOBS 12
#define DST_MAX (1u << 20)

int main() {
  skip_without_gpu("test_unpack_gpu");
  uint64_t seed = 0x243f6a8885a308d3ull;
  CUDA_OK(cudaSetDevice(0));
  CUDA_OK(cudaFree(0)); // the primary context becomes current: the arena maps into it
  strand_unpack_arena_t *arena = NULL;
  strand_unpack_ring_t *ring = NULL;
  if (strand_unpack_arena_acquire(ARENA, false, &arena) != STRAND_SUCCESS ||
      !strand_unpack_arena_is_cuda(arena) || strand_unpack_ring_create(arena, &ring) != STRAND_SUCCESS) {
    fprintf(stderr, "FAIL: device_unpack arena/ring not in CUDA-mapped memory (arena %p, cuda %d)\n",
            (void *)arena, arena ? (int)strand_unpack_arena_is_cuda(arena) : -1);
    return 1;
  }
  uint8_t *bounce_h = strand_unpack_arena_host(arena);
  void *bounce_hd = strand_unpack_arena_device(arena);
  strand_unpack_meta_t *ring_meta_h = strand_unpack_ring_meta_host(ring);
  const strand_unpack_meta_t *ring_meta_d = strand_unpack_ring_handle_host(ring)->meta;
  for (size_t i = 0; i < ARENA; i++) bounce_h[i] = (uint8_t)xorshift(&seed);
  uint8_t *bounce_d;
  CUDA_OK(cudaMalloc(&bounce_d, ARENA));
  CUDA_OK(cudaMemcpy(bounce_d, bounce_h, ARENA, cudaMemcpyHostToDevice));

  void *recs_d;
  strand_unpack_load_meta_t *recs_h = (strand_unpack_load_meta_t *)host_mapped(
      (size_t)JOBS * STRAND_UNPACK_MAX_SLICE_PAGES * sizeof(strand_unpack_load_meta_t), &recs_d);
  uint8_t *dst_d;
  const size_t dst_stride = DST_MAX + 2 * GUARD + 16;
  CUDA_OK(cudaMalloc(&dst_d, JOBS * dst_stride));
  std::vector<uint8_t> want(JOBS * dst_stride), got(JOBS * dst_stride);
  void *jobs_d;
  unpack_job_t *jobs_h = (unpack_job_t *)host_mapped(JOBS * sizeof(unpack_job_t), &jobs_d);

  int failures = 0;
  for (int round = 0; round < 24; round++) {
    bool dev_bounce = round % 2;
    bool fast = (round / 2) % 2;
    for (int j = 0; j < JOBS; j++) {
      // host-mapped rounds: records in the ring's slot j; device rounds: in plain mapped memory
      strand_unpack_load_meta_t *r = dev_bounce ? recs_h + (size_t)j * STRAND_UNPACK_MAX_SLICE_PAGES
                                                : ring_meta_h->mem[j];
      uint32_t maxlen = (j % 3 == 0) ? 65536 : (j % 3 == 1) ? 4096 : 64;
      uint32_t want_cnt = (uint32_t)(xorshift(&seed) % (STRAND_UNPACK_MAX_SLICE_PAGES + 1));
      uint32_t dalign = (uint32_t)(xorshift(&seed) % 16); // FIFO slot offset: any alignment
      uint64_t off = dalign;
      uint32_t cnt = 0;
      while (cnt < want_cnt) {
        uint32_t len = (uint32_t)(xorshift(&seed) % (maxlen + 1));
        if (off + len > DST_MAX) break;
        uint32_t src = (uint32_t)(xorshift(&seed) % (ARENA - len - 16 + 1));
        r[cnt++] = {{src, len, off}};
        off += len;
      }
      for (uint32_t i = cnt; i > 1; i--) { // warps take records in any order
        uint32_t k = (uint32_t)(xorshift(&seed) % i);
        strand_unpack_load_meta_t t = r[i - 1];
        r[i - 1] = r[k];
        r[k] = t;
      }
      char why[256];
      if (strand_unpack_validate(r, cnt, ARENA, DST_MAX, why, sizeof why) != 0) {
        fprintf(stderr, "generator bug: %s\n", why);
        return 1;
      }
      uint8_t *w = want.data() + j * dst_stride;
      memset(w, 0xE7, dst_stride);
      strand_unpack_ref(bounce_h, w + GUARD, r, cnt);
      jobs_h[j].bounce = dev_bounce ? bounce_d : (const uint8_t *)bounce_hd;
      jobs_h[j].dst = dst_d + j * dst_stride + GUARD;
      jobs_h[j].recs = dev_bounce ? (const strand_unpack_load_meta_t *)recs_d +
                                        (size_t)j * STRAND_UNPACK_MAX_SLICE_PAGES
                                  : ring_meta_d->mem[j];
      jobs_h[j].cnt = cnt;
      jobs_h[j].bytes = off;
    }
    CUDA_OK(cudaMemset(dst_d, 0xE7, JOBS * dst_stride));
    int threads = (round % 3 == 0) ? 128 : 512;
    CUDA_OK(fast ? unpack_fast_launch((const unpack_job_t *)jobs_d, JOBS, threads, 0)
                 : unpack_compat_launch((const unpack_job_t *)jobs_d, JOBS, threads, 0));
    CUDA_OK(cudaDeviceSynchronize());
    CUDA_OK(cudaMemcpy(got.data(), dst_d, JOBS * dst_stride, cudaMemcpyDeviceToHost));
    for (int j = 0; j < JOBS; j++) {
      const uint8_t *g = got.data() + j * dst_stride, *w = want.data() + j * dst_stride;
      for (size_t b = 0; b < dst_stride; b++) {
        if (g[b] != w[b]) {
          bool guard = b < GUARD || b >= GUARD + DST_MAX;
          fprintf(stderr, "FAIL round %d (%s kernel, %s bounce, %d threads) job %d: byte %zu%s is "
                  "0x%02x, want 0x%02x\n", round, fast ? "fast" : "compat",
                  dev_bounce ? "device" : "host-mapped", threads, j, b,
                  guard ? " (guard: written out of bounds)" : "", g[b], w[b]);
          failures++;
          break;
        }
      }
    }
  }
  CUDA_OK(cudaFree(bounce_d));
  CUDA_OK(cudaFree(dst_d));
  strand_unpack_ring_destroy(ring);
  strand_unpack_arena_release(arena);
  CUDA_OK(cudaFreeHost(recs_h));
  CUDA_OK(cudaFreeHost(jobs_h));
  printf("%s: test_unpack_gpu, %d failing job(s)\n", failures ? "FAIL" : "PASS", failures);
  return failures ? 1 : 0;
}
