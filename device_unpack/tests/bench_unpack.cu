// device_unpack benchmark: the NCCL-shaped and the fast kernel gathering from a host-mapped bounce
// arena (the plugin's memory) into device memory, against cudaMemcpy H2D from pinned memory of the
// same payload in the same run. Records: fragments of --frag bytes (default 64 KiB) at shuffled
// arena positions, records themselves in host-mapped memory like the plugin's ring. Reports payload
// GB/s (median of 10 after 3 warm-ups, CUDA events) and % of the memcpy rate; every kernel result
// is checked byte-exact against unpack_ref first. Exit 77 without a GPU.
//
//   bench_unpack [--mib N] [--frag BYTES] [--threads T] [--align A]
//     --align A: add A bytes to every source offset (A % 16 != 0 exercises the misaligned paths)
#include <algorithm>
#include <string.h>
#include <vector>

#include "gpu_common.h"
#include "strand/unpack.h"
#include "unpack_kernels.h"

static float median(std::vector<float> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

template <typename F>
static float time_ms(F run) {
  cudaEvent_t a, b;
  CUDA_OK(cudaEventCreate(&a));
  CUDA_OK(cudaEventCreate(&b));
  for (int i = 0; i < 3; i++) run();
  CUDA_OK(cudaDeviceSynchronize());
  std::vector<float> t;
  for (int i = 0; i < 10; i++) {
    CUDA_OK(cudaEventRecord(a));
    run();
    CUDA_OK(cudaEventRecord(b));
    CUDA_OK(cudaEventSynchronize(b));
    float ms;
    CUDA_OK(cudaEventElapsedTime(&ms, a, b));
    t.push_back(ms);
  }
  CUDA_OK(cudaEventDestroy(a));
  CUDA_OK(cudaEventDestroy(b));
  return median(t);
}

int main(int argc, char **argv) {
  size_t mib = 128, frag = 65536, align = 0;
  int threads = 512;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!strcmp(argv[i], "--mib")) mib = strtoul(argv[i + 1], NULL, 0);
    else if (!strcmp(argv[i], "--frag")) frag = strtoul(argv[i + 1], NULL, 0);
    else if (!strcmp(argv[i], "--threads")) threads = atoi(argv[i + 1]);
    else if (!strcmp(argv[i], "--align")) align = strtoul(argv[i + 1], NULL, 0) % 16;
    else {
      fprintf(stderr, "usage: %s [--mib N] [--frag BYTES] [--threads T] [--align A]\n", argv[0]);
      return 2;
    }
  }
  skip_without_gpu("bench_unpack");
  int dev;
  cudaDeviceProp prop;
  CUDA_OK(cudaGetDevice(&dev));
  CUDA_OK(cudaGetDeviceProperties(&prop, dev));
  int drv = 0, rt = 0;
  cudaDriverGetVersion(&drv);
  cudaRuntimeGetVersion(&rt);
  size_t payload = mib << 20;
  size_t nrec = payload / frag;
  payload = nrec * frag;
  size_t slot = (frag + align + 15) / 16 * 16;
  size_t arena = 2 * nrec * slot; // half empty: positions are scattered, not packed
  if (arena > ((size_t)4 << 30)) {
    fprintf(stderr, "arena would exceed 4 GiB: lower --mib or raise --frag\n");
    return 2;
  }
  printf("# bench_unpack: %s (SMs %d, PCI %04x:%02x:%02x), driver %d, runtime %d\n", prop.name,
         prop.multiProcessorCount, prop.pciDomainID, prop.pciBusID, prop.pciDeviceID, drv, rt);
  printf("# payload %zu MiB, %zu records of %zu bytes, source misalignment %zu, %d threads/CTA, "
         "bounce + records in host-mapped memory, destination in device memory\n",
         payload >> 20, nrec, frag, align, threads);

  void *bounce_d;
  uint8_t *bounce_h = (uint8_t *)host_mapped(arena, &bounce_d);
  uint64_t seed = 0x13198a2e03707344ull;
  for (size_t i = 0; i < arena; i += 8) {
    uint64_t v = xorshift(&seed);
    memcpy(bounce_h + i, &v, 8);
  }
  void *recs_d;
  strand_unpack_load_meta_t *recs = (strand_unpack_load_meta_t *)host_mapped(
      nrec * sizeof(strand_unpack_load_meta_t), &recs_d);
  std::vector<uint32_t> pos(2 * nrec);
  for (size_t i = 0; i < pos.size(); i++) pos[i] = (uint32_t)i;
  for (size_t i = pos.size(); i > 1; i--) std::swap(pos[i - 1], pos[xorshift(&seed) % i]);
  for (size_t i = 0; i < nrec; i++)
    recs[i] = {{(uint32_t)(pos[i] * slot + align), (uint32_t)frag, (uint64_t)(i * frag)}};

  uint8_t *dst;
  CUDA_OK(cudaMalloc(&dst, payload));
  std::vector<uint8_t> want(payload), got(payload);
  strand_unpack_ref(bounce_h, want.data(), recs, nrec);

  // Reference: the copy engine moving the same payload from pinned host memory.
  uint8_t *pinned;
  CUDA_OK(cudaHostAlloc(&pinned, payload, cudaHostAllocDefault));
  memcpy(pinned, want.data(), payload);
  float ms_ref = time_ms([&] { CUDA_OK(cudaMemcpyAsync(dst, pinned, payload, cudaMemcpyHostToDevice)); });
  double ref = payload / (ms_ref * 1e6);
  printf("\n| kernel | CTAs | GB/s | %% of cudaMemcpy H2D |\n|---|---|---|---|\n");
  printf("| cudaMemcpy H2D (pinned) | - | %.1f | 100 |\n", ref);

  int ctas_list[] = {1, 8, 16, 32, prop.multiProcessorCount};
  void *jobs_d;
  unpack_job_t *jobs = (unpack_job_t *)host_mapped(sizeof(unpack_job_t) * 1024, &jobs_d);
  int bad = 0;
  for (int fast = 0; fast < 2; fast++) {
    for (int ctas : ctas_list) {
      if (ctas > 1024 || (size_t)ctas > nrec) continue;
      for (int j = 0; j < ctas; j++) { // contiguous record ranges, like one channel each
        size_t a = nrec * j / ctas, b = nrec * (j + 1) / ctas;
        jobs[j] = {(const uint8_t *)bounce_d, dst, (const strand_unpack_load_meta_t *)recs_d + a,
                   (uint32_t)(b - a), (b - a) * frag};
      }
      auto run = [&] {
        CUDA_OK(fast ? unpack_fast_launch((const unpack_job_t *)jobs_d, ctas, threads, 0)
                     : unpack_compat_launch((const unpack_job_t *)jobs_d, ctas, threads, 0));
      };
      CUDA_OK(cudaMemset(dst, 0, payload));
      run();
      CUDA_OK(cudaDeviceSynchronize());
      CUDA_OK(cudaMemcpy(got.data(), dst, payload, cudaMemcpyDeviceToHost));
      if (memcmp(got.data(), want.data(), payload) != 0) {
        printf("| %s | %d | WRONG RESULT | - |\n", fast ? "fast" : "NCCL-shaped", ctas);
        bad++;
        continue;
      }
      float ms = time_ms(run);
      double gbs = payload / (ms * 1e6);
      printf("| %s | %d | %.1f | %.0f |\n", fast ? "fast" : "NCCL-shaped", ctas, gbs, 100 * gbs / ref);
    }
  }
  CUDA_OK(cudaFree(dst));
  CUDA_OK(cudaFreeHost(pinned));
  CUDA_OK(cudaFreeHost(bounce_h));
  CUDA_OK(cudaFreeHost(recs));
  CUDA_OK(cudaFreeHost(jobs));
  return bad ? 1 : 0;
}
