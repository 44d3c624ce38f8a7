/* strand-ib — regMr / regMrDmaBuf / deregMr with a per-HCA registration cache: NCCL registers the
 * same buffers again and again (one regMr per comm and per channel), and ibv_reg_mr pins pages,
 * which is slow. A range already registered on the HCA (page-aligned, same or larger) is shared
 * with a reference count; the registration goes when its last handle is deregistered. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ib.h"
#include "strand/handle_set.h"

static strand_handle_set_t live_mhs = STRAND_HANDLE_SET_INIT;

bool ib_mh_live(const void *mhandle) { return strand_handle_set_contains(&live_mhs, mhandle); }

#define IB_MR_ACCESS (IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ)

static void entry_put(ib_mr_entry_t *e) {
  ib_hca_t *h = e->hca;
  pthread_mutex_lock(&h->mr_lock);
  if (--e->refs == 0) {
    for (ib_mr_entry_t **pp = &h->mrs; *pp; pp = &(*pp)->next)
      if (*pp == e) {
        *pp = e->next;
        break;
      }
    ibv.dereg_mr(e->mr);
    free(e);
  }
  pthread_mutex_unlock(&h->mr_lock);
}

static ib_mr_entry_t *entry_get(ib_hca_t *h, void *data, size_t size, int dmabuf_fd,
                                uint64_t offset, bool gpu) {
  uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
  uintptr_t base = (uintptr_t)data & ~(page - 1);
  uintptr_t end = ((uintptr_t)data + (size ? size : 1) + page - 1) & ~(page - 1);
  pthread_mutex_lock(&h->mr_lock);
  if (dmabuf_fd < 0) {
    for (ib_mr_entry_t *e = h->mrs; e; e = e->next)
      if (!e->dmabuf && e->gpu == gpu && e->base <= base && end <= e->base + e->len) {
        e->refs++;
        pthread_mutex_unlock(&h->mr_lock);
        return e;
      }
  }
  ib_mr_entry_t *e = calloc(1, sizeof *e);
  if (!e) {
    pthread_mutex_unlock(&h->mr_lock);
    return NULL;
  }
  e->hca = h;
  e->refs = 1;
  e->gpu = gpu;
  if (dmabuf_fd >= 0) {
    e->dmabuf = true;
    e->base = (uintptr_t)data;
    e->len = size;
    e->mr = ibv.reg_dmabuf_mr ? ibv.reg_dmabuf_mr(h->pd, offset, size, (uint64_t)(uintptr_t)data,
                                                  dmabuf_fd, IB_MR_ACCESS)
                              : NULL;
    if (!e->mr && !ibv.reg_dmabuf_mr) errno = ENOSYS;
  } else {
    e->base = base;
    e->len = end - base;
    e->mr = ibv.reg_mr(h->pd, (void *)base, e->len, IB_MR_ACCESS);
  }
  if (!e->mr) {
    int err = errno;
    free(e);
    pthread_mutex_unlock(&h->mr_lock);
    errno = err;
    return NULL;
  }
  e->next = h->mrs;
  h->mrs = e;
  pthread_mutex_unlock(&h->mr_lock);
  return e;
}

static strand_result_t reg(ib_comm_t *c, void *data, size_t size, int fd, uint64_t offset,
                           bool gpu, void **mhandle) {
  ib_mh_t *mh = calloc(1, sizeof *mh);
  if (!mh) return STRAND_SYSTEM_ERROR;
  mh->gpu = gpu;
  for (int r = 0; r < c->nrails; r++) {
    ib_hca_t *h = c->rails[r].dev->hca;
    mh->e[r] = entry_get(h, data, size, fd, offset, gpu);
    if (!mh->e[r]) {
      int err = errno;
      if (fd >= 0)
        STRAND_WARN("regMrDmaBuf of %zu bytes on %s failed (%s)%s", size, h->name, strerror(err),
                    ibv.reg_dmabuf_mr ? ": the device or kernel cannot map this dmabuf"
                                      : ": libibverbs has no ibv_reg_dmabuf_mr (rdma-core < 34)");
      else
        STRAND_WARN("regMr of %zu bytes of %s memory at %p on %s failed (%s): %s", size,
                    gpu ? "GPU" : "host", data, h->name, strerror(err),
                    gpu ? "is nvidia-peermem loaded, and is the buffer CUDA device memory?"
                        : "check `ulimit -l` (locked memory) and that the buffer is mapped");
      for (int k = 0; k < r; k++) entry_put(mh->e[k]);
      free(mh);
      return STRAND_SYSTEM_ERROR;
    }
    mh->nrails = r + 1;
  }
  if (strand_handle_set_add(&live_mhs, mh) != STRAND_SUCCESS) {
    for (int k = 0; k < mh->nrails; k++) entry_put(mh->e[k]);
    free(mh);
    return STRAND_SYSTEM_ERROR;
  }
  *mhandle = mh;
  return STRAND_SUCCESS;
}

strand_result_t ib_reg_mr(void *comm, void *data, size_t size, int type, void **mhandle) {
  if (!comm || !mhandle) return STRAND_INVALID_ARGUMENT;
  *mhandle = NULL;
  ib_comm_t *c = comm;
  bool cuda_ok = type == STRAND_PTR_CUDA && c->nrails > 0;
  for (int r = 0; cuda_ok && r < c->nrails; r++)
    cuda_ok = ib_hca_gpu_ptr_support(c->rails[r].dev->hca) & STRAND_PTR_CUDA;
  if (type != STRAND_PTR_HOST && !cuda_ok) {
    STRAND_WARN("regMr: pointer type %d not supported here (getProperties' ptrSupport says which "
                "memory this device can register: NCCL_PTR_CUDA needs nvidia-peermem or a "
                "provider that reaches GPU memory)",
                type);
    return STRAND_INVALID_ARGUMENT;
  }
  if (!data && size > 0) return STRAND_INVALID_ARGUMENT;
  return reg(comm, data, size, -1, 0, type == STRAND_PTR_CUDA, mhandle);
}

strand_result_t ib_reg_mr_dmabuf(void *comm, void *data, size_t size, int type, uint64_t offset,
                                 int fd, void **mhandle) {
  (void)type; /* a dma-buf is device memory whatever the core calls it */
  if (!comm || !mhandle || fd < 0) return STRAND_INVALID_ARGUMENT;
  *mhandle = NULL;
  return reg(comm, data, size, fd, offset, true, mhandle);
}

strand_result_t ib_dereg_mr(void *comm, void *mhandle) {
  (void)comm;
  if (!mhandle || !strand_handle_set_remove(&live_mhs, mhandle)) {
    STRAND_WARN("deregMr: %p is not a live memory handle of strand-ib (deregistered twice?)",
                mhandle);
    return STRAND_INVALID_ARGUMENT;
  }
  ib_mh_t *mh = mhandle;
  for (int k = 0; k < mh->nrails; k++) entry_put(mh->e[k]);
  free(mh);
  return STRAND_SUCCESS;
}

void ib_mr_cache_clear(ib_hca_t *hca) {
  /* Handles still live (the core may deregister them after a later init): their entries must
   * stay valid, so nothing is freed; the HCA's protection domain outlives them anyway. */
  if (strand_handle_set_count(&live_mhs) > 0) return;
  pthread_mutex_lock(&hca->mr_lock);
  int n = 0;
  while (hca->mrs) {
    ib_mr_entry_t *e = hca->mrs;
    hca->mrs = e->next;
    ibv.dereg_mr(e->mr);
    free(e);
    n++;
  }
  pthread_mutex_unlock(&hca->mr_lock);
  if (n) STRAND_INFO(STRAND_SUBSYS_NET, "%s: %d registration(s) the core never deregistered "
                                       "dropped at teardown", hca->name, n);
}
