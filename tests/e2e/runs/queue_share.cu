// Does a copy on one CUDA stream wait behind a kernel on another stream that waits for it?
// (docs/benchmarks/device-unpack.md, "A GPU copy of the arena"). Kernel K1 on stream S spins until
// a flag in GPU memory becomes 1; optionally K2 is queued behind it on S; stream C, created as the
// k-th stream after S, copies 1 into the flag from pinned memory. Prints "ok" when the copy lands,
// "STUCK" when it has not after 3 s (then exits without waiting: the driver ends the spinning
// kernel with the process). Run with several CUDA_DEVICE_MAX_CONNECTIONS values, one process each.
// PRELOAD=1 launches K2's kernel once before the test (so that lazy loading has loaded it);
// PRIO=1 creates C with the greatest stream priority.
// Usage: queue_share K WITH_K2
#include <cstdio>
#include <cstdlib>
#include <unistd.h>
#include <chrono>
#include <cuda_runtime.h>

__global__ void spin(volatile int *flag) {
  while (*flag == 0) {}
}
__global__ void nop() {}

static const char *env_or(const char *name, const char *dflt) { return getenv(name) ? getenv(name) : dflt; }

// One line per run: the configuration and whether the copy landed.
static void verdict(int k, int with_k2, const char *what) {
  printf("PRIO=%s MAX_CONNECTIONS=%s LOADING=%s PRELOAD=%s stream %d after S, K2 %d: %s\n", env_or("PRIO", "0"),
         env_or("CUDA_DEVICE_MAX_CONNECTIONS", "default"), env_or("CUDA_MODULE_LOADING", "default"),
         env_or("PRELOAD", "0"), k, with_k2, what);
  fflush(stdout);
}

int main(int argc, char **argv) {
  int k = argc > 1 ? atoi(argv[1]) : 1, with_k2 = argc > 2 ? atoi(argv[2]) : 1;
  int *flag, *one;
  cudaMalloc(&flag, sizeof(int));
  cudaMemset(flag, 0, sizeof(int));
  cudaMallocHost(&one, sizeof(int));
  *one = 1;
  if (getenv("PRELOAD") && atoi(getenv("PRELOAD"))) nop<<<1, 1>>>();
  cudaDeviceSynchronize();
  cudaStream_t s, c, extra[64];
  cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
  for (int i = 0; i < k - 1; i++) cudaStreamCreateWithFlags(&extra[i], cudaStreamNonBlocking);
  int least = 0, greatest = 0; // the greatest priority is the numerically lowest value
  cudaDeviceGetStreamPriorityRange(&least, &greatest);
  if (getenv("PRIO") && atoi(getenv("PRIO"))) cudaStreamCreateWithPriority(&c, cudaStreamNonBlocking, greatest);
  else cudaStreamCreateWithFlags(&c, cudaStreamNonBlocking);
  spin<<<1, 1, 0, s>>>(flag);
  if (with_k2) nop<<<1, 1, 0, s>>>();
  usleep(100000);  // K1 is running
  cudaMemcpyAsync(flag, one, sizeof(int), cudaMemcpyHostToDevice, c);
  auto t0 = std::chrono::steady_clock::now();
  while (cudaStreamQuery(c) == cudaErrorNotReady) {
    if (std::chrono::steady_clock::now() - t0 > std::chrono::seconds(3)) {
      verdict(k, with_k2, "STUCK");
      _exit(0);
    }
  }
  cudaStreamSynchronize(s);
  verdict(k, with_k2, "ok");
  return 0;
}
