/* Can a second CUDA context's stream reach memory a kernel of the first context waits on, while
 * that kernel spins and another launch is queued behind it (one GPU, no NCCL)? The question behind
 * gin_proxy's shared-queue risk (docs/plugins/gin.md): the driver's hardware queues
 * (CUDA_DEVICE_MAX_CONNECTIONS) are per context, so a context of gin_proxy's own would never share
 * one with the application's streams, if its copies and signal adds can reach the window.
 *
 * Built and run by tests/e2e/runs/gin_queue.sh (no nvcc: the driver is loaded through the SDK's
 * loader, the kernels are PTX), with CUDA_DEVICE_MAX_CONNECTIONS unset, 1 and 32.
 *
 * For each window (cuMemAlloc in the primary context; cuMemCreate + cuMemMap, as NCCL allocates
 * windows) and each way of writing it (a host-to-device copy; the SDK's signal-add kernel), from
 * (a) a second stream of the primary context and (b) a stream of a context created for it: the
 * primary context launches a kernel that spins until the word is 1 (giving up after 1 s) and a
 * second launch behind it on the same stream, then the writer writes 1. Printed: the writer's call
 * status, when its stream finished, and whether the kernel saw the word. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gpu_wait_ptx.h"
#include "plugin_test.h"
#include "strand/cuda_driver.h"

static const strand_cuda_t *cu;
static strand_cu_ctx_t prim, own;
static strand_cu_stream_t s_app, s_prim2, s_own;
static strand_cu_function_t wait_fn;
static strand_cu_devptr_t out;

static int launch_wait(strand_cu_devptr_t sig, uint64_t want, uint64_t bound, strand_cu_devptr_t o) {
  void *params[] = {&sig, &want, &bound, &o};
  return cu->launchKernel(wait_fn, 1, 1, 1, 1, 1, 1, 0, s_app, params, NULL);
}

static void probe(const char *win, strand_cu_devptr_t w, const char *how, bool use_add, bool own_ctx) {
  static const uint64_t one = 1, zero = 0;
  cu->ctxSetCurrent(prim);
  cu->memcpyHtoDAsync(w, &zero, 8, s_app);
  cu->streamSynchronize(s_app);
  int l1 = launch_wait(w, 1, 1000000000ull, out);
  int l2 = launch_wait(w, 0, 0, out + 16);
  usleep(20000);
  cu->ctxSetCurrent(own_ctx ? own : prim);
  strand_cu_stream_t s = own_ctx ? s_own : s_prim2;
  double t0 = pt_now_s();
  int rc = use_add ? strand_cuda_add_u64_async(w, one, s) : cu->memcpyHtoDAsync(w, &one, 8, s);
  int q = STRAND_CU_ERROR_NOT_READY;
  while (rc == 0 && (q = cu->streamQuery(s)) == STRAND_CU_ERROR_NOT_READY && pt_now_s() - t0 < 2.0) {
  }
  double writer_us = (pt_now_s() - t0) * 1e6;
  cu->ctxSetCurrent(prim);
  int sync = cu->streamSynchronize(s_app);
  uint64_t res[2] = {0};
  cu->memcpyDtoHAsync(res, out, sizeof res, s_app);
  cu->streamSynchronize(s_app);
  printf("%-10s %-5s from %-22s launch %d/%d, write call %d (%s), writer's stream %s after %.0f us; kernel %s "
         "(word %llu, %.0f us); app stream %d\n",
         win, how, own_ctx ? "a context of its own" : "the primary context", l1, l2, rc, strand_cuda_error_name(rc),
         q == 0 ? "done" : q == STRAND_CU_ERROR_NOT_READY ? "NOT done" : "failed", writer_us,
         res[0] >= 1 && res[1] < 1000000000ull ? "saw it" : "GAVE UP", (unsigned long long)res[0], res[1] / 1e3,
         sync);
  fflush(stdout);
}

int main(void) {
  cu = strand_cuda();
  if (!cu) {
    printf("no CUDA driver\n");
    return 77;
  }
  if (!cu->ctxCreate) {
    printf("driver lacks cuCtxCreate_v2\n");
    return 1;
  }
  const char *mc = getenv("CUDA_DEVICE_MAX_CONNECTIONS");
  printf("# ctx_probe: CUDA_DEVICE_MAX_CONNECTIONS=%s\n", mc ? mc : "(unset: 8)");
  int dev = -1;
  strand_cu_module_t mod = NULL;
  if (cu->deviceGet(&dev, 0) || cu->devicePrimaryCtxRetain(&prim, dev) || cu->ctxSetCurrent(prim) ||
      cu->moduleLoadData(&mod, pt_wait_ge_ptx) || cu->moduleGetFunction(&wait_fn, mod, "pt_wait_ge") ||
      cu->streamCreate(&s_app, STRAND_CU_STREAM_NON_BLOCKING) ||
      cu->streamCreate(&s_prim2, STRAND_CU_STREAM_NON_BLOCKING) || cu->memAlloc(&out, 64)) {
    printf("primary context set-up failed\n");
    return 1;
  }
  strand_cu_devptr_t w_alloc = 0, w_vmm = 0;
  if (cu->memAlloc(&w_alloc, 4096)) return 1;
  int r = pt_cuda_vmm_alloc(0, 4096, &w_vmm);
  if (r) {
    printf("VMM allocation failed: %d\n", r);
    return 1;
  }
  /* the signal-add kernel loaded in the primary context before any spinning kernel runs */
  strand_cuda_add_u64_async(out + 32, 0, s_prim2);
  cu->streamSynchronize(s_prim2);
  r = cu->ctxCreate(&own, 0, dev);
  if (!r) r = cu->streamCreate(&s_own, STRAND_CU_STREAM_NON_BLOCKING);
  strand_cu_devptr_t own_word = 0; /* the add kernel loaded in that context, on memory of its own */
  if (!r) r = cu->memAlloc(&own_word, 64);
  if (!r) r = strand_cuda_add_u64_async(own_word, 0, s_own);
  if (!r) r = cu->streamSynchronize(s_own);
  printf("# second context: created %s (loading the add kernel there: %d)\n", r ? "with an error" : "fine", r);
  cu->ctxSetCurrent(prim);
  for (int own_ctx = 0; own_ctx < 2; own_ctx++) {
    probe("VMM", w_vmm, "copy", false, own_ctx);
    probe("cuMemAlloc", w_alloc, "copy", false, own_ctx);
    probe("VMM", w_vmm, "add", true, own_ctx);
    probe("cuMemAlloc", w_alloc, "add", true, own_ctx);
  }
  return 0;
}
