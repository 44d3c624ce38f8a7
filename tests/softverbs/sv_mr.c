/* softverbs protection domains and memory regions. Keys are (index << 8 | generation): a stale key
 * of a deregistered region does not match its reused slot, as with a NIC's key variant byte. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "sv.h"

SV_EXPORT struct ibv_pd *ibv_alloc_pd(struct ibv_context *context)
{
  sv_pd_t *pd = calloc(1, sizeof(*pd));
  if (!pd) {
    errno = ENOMEM;
    return NULL;
  }
  pd->pd.context = context;
  return &pd->pd;
}

SV_EXPORT int ibv_dealloc_pd(struct ibv_pd *pd)
{
  sv_context_t *c = sv_ctx(pd->context);
  pthread_mutex_lock(&c->lock);
  for (uint32_t i = 0; i < c->nmrs_cap; i++) {
    if (c->mrs[i] && c->mrs[i]->mr.pd == pd) {
      pthread_mutex_unlock(&c->lock);
      return EBUSY; /* as the kernel: regions still use it */
    }
  }
  for (int i = 0; i < c->nlisteners * SV_QPS_PER_LISTENER; i++) {
    if (c->qps[i] && c->qps[i]->qp.pd == pd) {
      pthread_mutex_unlock(&c->lock);
      return EBUSY;
    }
  }
  pthread_mutex_unlock(&c->lock);
  free(pd);
  return 0;
}

static const int sv_known_access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
                                   IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC |
                                   IBV_ACCESS_RELAXED_ORDERING;

SV_EXPORT struct ibv_mr *ibv_reg_mr_iova2(struct ibv_pd *pd, void *addr, size_t length,
                                          uint64_t iova, unsigned int access)
{
  sv_context_t *c = sv_ctx(pd->context);
  /* As the kernel: remote write or atomic access needs local write; unknown bits are refused. */
  if ((access & ~(unsigned)sv_known_access) ||
      ((access & (IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_ATOMIC)) &&
       !(access & IBV_ACCESS_LOCAL_WRITE))) {
    errno = EINVAL;
    return NULL;
  }
  if (iova != (uint64_t)(uintptr_t)addr) {
    sv_report_refusal("ibv_reg_mr_iova: an iova other than the address refused (not emulated)");
    errno = EOPNOTSUPP; /* remote addresses are virtual addresses here */
    return NULL;
  }
  if (length == 0 || length > (1ull << 40) || (uintptr_t)addr + length < (uintptr_t)addr) {
    errno = EINVAL;
    return NULL;
  }
  /* A CUDA pointer registers as nvidia-peermem lets a NIC register it: the region is GPU memory. */
  void *gpu_ctx = sv_gpu_range_ctx((uintptr_t)addr, length);
  sv_mr_t *m = calloc(1, sizeof(*m));
  if (!m) {
    errno = ENOMEM;
    return NULL;
  }
  pthread_mutex_lock(&c->lock);
  uint32_t idx = 0;
  while (idx < c->nmrs_cap && c->mrs[idx]) idx++;
  if (idx == c->nmrs_cap) {
    uint32_t ncap = c->nmrs_cap ? c->nmrs_cap * 2 : 64;
    if (ncap > SV_MAX_MR) ncap = SV_MAX_MR;
    sv_mr_t **n = idx < ncap ? realloc(c->mrs, ncap * sizeof(*n)) : NULL;
    if (!n) {
      pthread_mutex_unlock(&c->lock);
      free(m);
      errno = ENOMEM;
      return NULL;
    }
    memset(n + c->nmrs_cap, 0, (ncap - c->nmrs_cap) * sizeof(*n));
    c->mrs = n;
    c->nmrs_cap = ncap;
  }
  uint32_t key = ((idx + 1) << 8) | (uint32_t)(++c->mr_gen);
  m->index = idx;
  m->access = (int)access;
  m->mr.context = pd->context;
  m->mr.pd = pd;
  m->mr.addr = addr;
  m->mr.length = length;
  m->mr.handle = idx;
  m->mr.lkey = key;
  m->mr.rkey = key;
  m->iova = iova;
  m->gpu_ctx = gpu_ctx;
  if (gpu_ctx) c->ngpu_mrs++;
  c->mrs[idx] = m;
  pthread_mutex_unlock(&c->lock);
  return &m->mr;
}

SV_EXPORT struct ibv_mr *ibv_reg_mr(struct ibv_pd *pd, void *addr, size_t length, int access)
{
  return ibv_reg_mr_iova2(pd, addr, length, (uintptr_t)addr, (unsigned)access);
}

SV_EXPORT struct ibv_mr *ibv_reg_mr_iova(struct ibv_pd *pd, void *addr, size_t length,
                                         uint64_t iova, int access)
{
  return ibv_reg_mr_iova2(pd, addr, length, iova, (unsigned)access);
}

/* A dma-buf of CUDA device memory (cuMemGetHandleForAddressRange), registered as NCCL does: iova
 * is the buffer's device address in this process, and the keys address the region by it. The
 * dma-buf itself cannot be mapped by a user-space library, so softverbs checks that the fd is a
 * dma-buf and that [iova, iova + length) is device memory, then moves the bytes through that
 * address with the CUDA driver. Without a usable CUDA driver there is nothing to register: it
 * fails as a provider without the capability does (EOPNOTSUPP). */
SV_EXPORT struct ibv_mr *ibv_reg_dmabuf_mr(struct ibv_pd *pd, uint64_t offset, size_t length,
                                           uint64_t iova, int fd, int access)
{
  if (!sv_gpu_usable()) {
    /* fd -1 is the support probe NCCL-style plugins make at init: it fails on any provider, so
     * it is no refusal of anything the caller needed. */
    if (fd >= 0)
      sv_report_refusal("ibv_reg_dmabuf_mr refused (no usable CUDA driver: GPU memory needs one)");
    errno = EOPNOTSUPP;
    return NULL;
  }
  if (fd < 0 || !sv_gpu_is_dmabuf(fd)) {
    errno = EBADF; /* what the kernel answers; the probe (fd -1) reads it as "supported" */
    return NULL;
  }
  if (!sv_gpu_range_ctx(iova, length)) {
    sv_log("ibv_reg_dmabuf_mr: iova %#llx + %zu is not CUDA device memory of this process "
           "(softverbs needs the buffer's device address as iova, as NCCL passes it)",
           (unsigned long long)iova, length);
    errno = EINVAL;
    return NULL;
  }
  /* The access rules are those of any region; the region is keyed by its iova. */
  struct ibv_mr *mr = ibv_reg_mr_iova2(pd, (void *)(uintptr_t)iova, length, iova,
                                       (unsigned)access);
  if (mr) mr->addr = (void *)(uintptr_t)offset; /* as rdma-core: the offset into the dma-buf */
  return mr;
}

SV_EXPORT int ibv_dereg_mr(struct ibv_mr *mr)
{
  sv_context_t *c = sv_ctx(mr->context);
  sv_mr_t *m = sv_mr(mr);
  pthread_mutex_lock(&c->lock);
  if (m->index >= c->nmrs_cap || c->mrs[m->index] != m) {
    pthread_mutex_unlock(&c->lock);
    return EINVAL;
  }
  c->mrs[m->index] = NULL;
  if (m->gpu_ctx) c->ngpu_mrs--;
  pthread_mutex_unlock(&c->lock);
  free(m);
  return 0;
}

SV_EXPORT int ibv_rereg_mr(struct ibv_mr *mr, int flags, struct ibv_pd *pd, void *addr,
                           size_t length, int access)
{
  (void)mr, (void)flags, (void)pd, (void)addr, (void)length, (void)access;
  sv_report_refusal("ibv_rereg_mr refused (not emulated)");
  errno = EOPNOTSUPP;
  return IBV_REREG_MR_ERR_INPUT;
}

sv_mr_t *sv_mr_lookup(sv_context_t *c, uint32_t key)
{
  uint32_t idx = (key >> 8);
  if (idx == 0 || idx > c->nmrs_cap) return NULL;
  sv_mr_t *m = c->mrs[idx - 1];
  return m && m->mr.lkey == key ? m : NULL;
}

const char *sv_mr_check(sv_context_t *c, struct ibv_pd *pd, uint32_t key, uint64_t addr,
                        uint64_t len, int access)
{
  sv_mr_t *m = sv_mr_lookup(c, key);
  if (!m) return "unknown key";
  if (m->mr.pd != pd) return "key of another protection domain";
  if ((m->access & access) != access) return "access flags of the region do not allow it";
  uint64_t lo = m->iova;
  if (addr < lo || len > m->mr.length || addr - lo > m->mr.length - len)
    return "outside the region";
  return NULL;
}

void sv_mr_release_all(sv_context_t *c)
{
  for (uint32_t i = 0; i < c->nmrs_cap; i++) free(c->mrs[i]);
  free(c->mrs);
  c->mrs = NULL;
  c->nmrs_cap = 0;
}
