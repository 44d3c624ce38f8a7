/* strand-ib — can this HCA reach GPU memory? (ptrSupport's NCCL_PTR_CUDA and NCCL_PTR_DMABUF)
 *
 * Advertised only where the registration would really work, decided once per HCA the way NCCL's
 * own IB transport decides (facts from NCCL 2.28, src/transport/net_ib):
 * - DMABUF: ibv_reg_dmabuf_mr with fd -1 fails on every provider, but a provider or kernel
 *   without dma-buf support says EOPNOTSUPP (or EPROTONOSUPPORT), one with it EBADF.
 * - CUDA (ibv_reg_mr of a device pointer): the peer-memory module is loaded (nv_peer_mem or
 *   nvidia-peermem, found in sysfs) — or, where it is not, a real registration of a little device
 *   memory succeeds (providers that reach GPU memory themselves, such as tests/softverbs). The
 *   probe uses the caller's CUDA context (NCCL always has one current), else device 0's primary
 *   context; it never leaves a context behind, and without a CUDA driver nothing is claimed. */
#include <errno.h>
#include <unistd.h>

#include "ib.h"
#include "strand/cuda_driver.h"

static bool peermem_loaded(void) {
  static const char *const paths[] = {"/sys/kernel/mm/memory_peers/nv_mem/version",
                                      "/sys/kernel/mm/memory_peers/nv_mem_nc/version",
                                      "/sys/module/nvidia_peermem/version"};
  for (size_t i = 0; i < sizeof paths / sizeof paths[0]; i++)
    if (access(paths[i], F_OK) == 0) return true;
  return false;
}

static bool dmabuf_probe(ib_hca_t *h) {
  if (!ibv.reg_dmabuf_mr) return false; /* rdma-core < 34 */
  errno = 0;
  struct ibv_mr *mr = ibv.reg_dmabuf_mr(h->pd, 0, 0, 0, -1, 0);
  int err = errno;
  if (mr) { /* no provider registers fd -1; treat one that does as broken */
    ibv.dereg_mr(mr);
    return false;
  }
  return err != EOPNOTSUPP && err != EPROTONOSUPPORT;
}

/* 1: a registration of device memory worked, 0: it failed, -1: could not try (no CUDA driver,
 * no device). */
static int cuda_reg_probe(ib_hca_t *h) {
  const strand_cuda_t *cu = strand_cuda();
  if (!cu) return -1;
  strand_cu_ctx_t cur = NULL, ctx = NULL;
  int dev = -1;
  if (cu->ctxGetCurrent(&cur) != STRAND_CU_SUCCESS) return -1;
  if (!cur) {
    if (cu->deviceGet(&dev, 0) != STRAND_CU_SUCCESS ||
        cu->devicePrimaryCtxRetain(&ctx, dev) != STRAND_CU_SUCCESS)
      return -1;
    if (cu->ctxSetCurrent(ctx) != STRAND_CU_SUCCESS) {
      cu->devicePrimaryCtxRelease(dev);
      return -1;
    }
  }
  int ok = -1;
  strand_cu_devptr_t d = 0;
  size_t len = 1 << 16;
  if (cu->memAlloc(&d, len) == STRAND_CU_SUCCESS) {
    struct ibv_mr *mr = ibv.reg_mr(h->pd, (void *)(uintptr_t)d, len,
                                   IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
                                       IBV_ACCESS_REMOTE_READ);
    ok = mr != NULL;
    if (mr) ibv.dereg_mr(mr);
    cu->memFree(d);
  }
  if (!cur) {
    cu->ctxSetCurrent(NULL);
    cu->devicePrimaryCtxRelease(dev);
  }
  return ok;
}

static pthread_mutex_t probe_lock = PTHREAD_MUTEX_INITIALIZER;

int ib_hca_gpu_ptr_support(ib_hca_t *h) {
  pthread_mutex_lock(&probe_lock);
  if (!h->gpu_probed) {
    int caps = 0;
    if (dmabuf_probe(h)) caps |= STRAND_PTR_DMABUF;
    int reg = peermem_loaded() ? 1 : cuda_reg_probe(h);
    if (reg == 1) caps |= STRAND_PTR_CUDA;
    h->gpu_ptr_support = caps;
    h->gpu_probed = true;
    STRAND_INFO(STRAND_SUBSYS_NET, "%s: GPU memory %s%s%s", h->name,
                caps ? "reachable:" : "not reachable (host memory only)",
                caps & STRAND_PTR_CUDA ? " NCCL_PTR_CUDA" : "",
                caps & STRAND_PTR_DMABUF ? " NCCL_PTR_DMABUF" : "");
  }
  int caps = h->gpu_ptr_support;
  pthread_mutex_unlock(&probe_lock);
  return caps;
}
