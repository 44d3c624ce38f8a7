/* Unit test of the SDK's run-time CUDA loader (plugin_api/src/cuda_driver.c).
 *
 * Without a GPU (CI): strand_cuda() is NULL and every helper fails cleanly. With one (the GPU
 * machines): the signal-add kernel adds in stream order after a copy, on device memory and on
 * mapped host memory, and refuses a misaligned address; the private context is one per device. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "strand/cuda_driver.h"

static void test_without_gpu_or_with(void **state) {
  (void)state;
  const strand_cuda_t *cu = strand_cuda();
  assert_ptr_equal(cu, strand_cuda()); /* loaded once */
  int x = 0;
  if (!cu) {
    assert_null(strand_cuda_pointer_context(&x));
    assert_null(strand_cuda_private_context(0));
    assert_int_not_equal(strand_cuda_add_u64_async(8, 1, NULL), STRAND_CU_SUCCESS);
    assert_string_equal(strand_cuda_error_name(0), "unknown CUresult");
    skip(); /* the GPU half runs on the GPU machines */
  }
  int dev = -1;
  strand_cu_ctx_t ctx = NULL;
  assert_int_equal(cu->deviceGet(&dev, 0), 0);
  assert_int_equal(cu->devicePrimaryCtxRetain(&ctx, dev), 0);
  assert_int_equal(cu->ctxSetCurrent(ctx), 0);
  assert_null(strand_cuda_pointer_context(&x)); /* host memory is not device memory */
  strand_cu_devptr_t d = 0;
  assert_int_equal(cu->memAlloc(&d, 4096), 0);
  assert_ptr_equal(strand_cuda_pointer_context((void *)(uintptr_t)d), ctx);
  strand_cu_stream_t s = NULL;
  assert_int_equal(cu->streamCreate(&s, STRAND_CU_STREAM_NON_BLOCKING), 0);
  uint64_t *h = NULL;
  assert_int_equal(cu->memHostAlloc((void **)&h, 4096, STRAND_CU_MEMHOSTALLOC_PORTABLE), 0);
  h[0] = 40;
  h[1] = 0;
  /* copy 40 in, then add 2 in stream order: 42 only if the add ran after the copy */
  assert_int_equal(cu->memcpyHtoDAsync(d, h, 16, s), 0);
  assert_int_equal(strand_cuda_add_u64_async(d, 2, s), 0);
  assert_int_equal(strand_cuda_add_u64_async(d + 8, UINT64_C(1) << 40, s), 0);
  assert_int_not_equal(strand_cuda_add_u64_async(d + 4, 1, s), 0);
  assert_int_equal(cu->memcpyDtoHAsync(h, d, 16, s), 0);
  assert_int_equal(cu->streamSynchronize(s), 0);
  assert_int_equal(h[0], 42);
  assert_int_equal(h[1], UINT64_C(1) << 40);
  assert_string_equal(strand_cuda_error_name(1), "CUDA_ERROR_INVALID_VALUE");
  /* a context of Strand's own: not the primary, the same at every call, the caller's context left
   * current (gin_proxy/tests/test_gin_kernel_wait.c moves GPU windows in it) */
  strand_cu_ctx_t mine = strand_cuda_private_context(dev), cur = NULL;
  assert_non_null(mine);
  assert_ptr_not_equal(mine, ctx);
  assert_ptr_equal(strand_cuda_private_context(dev), mine);
  assert_int_equal(cu->ctxGetCurrent(&cur), 0);
  assert_ptr_equal(cur, ctx);
  assert_null(strand_cuda_private_context(-1));
  cu->memFreeHost(h);
  cu->streamDestroy(s);
  cu->memFree(d);
  cu->devicePrimaryCtxRelease(dev);
}

int main(void) {
  const struct CMUnitTest tests[] = {cmocka_unit_test(test_without_gpu_or_with)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
