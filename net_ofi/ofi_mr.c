/* strand-ofi — memory registration honouring the domain's mr_mode, with a per-device cache.
 *
 * mr_mode bits (fi_mr(3)) and what we do about each:
 *   FI_MR_LOCAL      buffers we send from / receive into need a descriptor: register and pass
 *                    fi_mr_desc(). Without it (and for host memory) nothing needs registering, so
 *                    the cache entry carries no MR at all and costs nothing.
 *   FI_MR_HMEM       device memory must always be registered (iface FI_HMEM_CUDA).
 *   FI_MR_PROV_KEY   the provider picks keys; otherwise we hand out unique keys per domain.
 *   FI_MR_ENDPOINT   MRs are bound to the endpoint and enabled before use.
 *   FI_MR_ALLOCATED  only registered ranges we got from the core (allocated memory) are used.
 *   FI_MR_VIRT_ADDR  concerns RMA addressing only; tagged messages never carry remote addresses.
 * Cache: NCCL registers the same buffers again and again (shared P2P pools on many comms, user
 * buffers per connection). An entry covers a page-aligned range; a request inside an existing
 * entry of the same memory kind only takes a reference. The last deregMr really deregisters:
 * keeping stale registrations would pin pages the application may free and reuse.
 * Calls ofi_dev.c only (the provider name, for messages). */
#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ofi.h"
#include "strand/handle_set.h"

/* Every mhandle given out and not yet released (all devices). */
static strand_handle_set_t live_mhs = STRAND_HANDLE_SET_INIT;

#ifdef STRAND_OFI_HAVE_DMABUF
#define OFI_DMABUF_SUPPORTED 1
#else
#define OFI_DMABUF_SUPPORTED 0
#endif

/* CUDA device ordinal of a pointer, through the driver API when it is loadable (no link-time CUDA
 * dependency). CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL = 9. */
static int cuda_device_of(const void *p) {
  typedef int (*get_attr_fn)(void *, int, unsigned long long);
  static get_attr_fn fn;
  static int tried;
  if (!tried) {
    tried = 1;
    void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (h) fn = (get_attr_fn)(uintptr_t)dlsym(h, "cuPointerGetAttribute");
  }
  int dev = 0;
  if (fn && fn(&dev, 9, (unsigned long long)(uintptr_t)p) != 0) dev = 0;
  return dev;
}

static strand_result_t mr_register(ofi_dev_t *d, ofi_mr_t *m, int dmabuf_fd, uint64_t dmabuf_off) {
  bool need = (d->mr_mode & FI_MR_LOCAL) || m->iface != FI_HMEM_SYSTEM;
  if (!need) return STRAND_SUCCESS;
  struct iovec iov = {.iov_base = (void *)m->base, .iov_len = m->len};
  struct fi_mr_attr attr;
  memset(&attr, 0, sizeof attr);
  attr.mr_iov = &iov;
  attr.iov_count = 1;
  attr.access = FI_SEND | FI_RECV;
  attr.requested_key = (d->mr_mode & FI_MR_PROV_KEY) ? 0 : ++d->next_key;
  attr.iface = m->iface;
  if (m->iface == FI_HMEM_CUDA) attr.device.cuda = cuda_device_of((void *)m->base);
  uint64_t flags = 0;
#if OFI_DMABUF_SUPPORTED
  struct fi_mr_dmabuf dmabuf;
  if (dmabuf_fd >= 0) {
    memset(&dmabuf, 0, sizeof dmabuf);
    dmabuf.fd = dmabuf_fd;
    dmabuf.offset = dmabuf_off;
    dmabuf.len = m->len;
    dmabuf.base_addr = (void *)m->base;
    attr.dmabuf = &dmabuf;
    flags |= FI_MR_DMABUF;
  }
#else
  (void)dmabuf_fd, (void)dmabuf_off;
#endif
  int rc = fi_mr_regattr(d->domain, &attr, flags, &m->mr);
  if (rc == 0 && (d->mr_mode & FI_MR_ENDPOINT)) {
    rc = fi_mr_bind(m->mr, &d->ep->fid, 0);
    if (rc == 0) rc = fi_mr_enable(m->mr);
    if (rc != 0) {
      fi_close(&m->mr->fid);
      m->mr = NULL;
    }
  }
  if (rc != 0) {
    STRAND_WARN("fi_mr_regattr of %p+%zu (%s%s) on %s failed: %s. Check the memory is allocated, "
             "locked-memory limits (ulimit -l) and, for GPU memory, the provider's FI_HMEM support",
             (void *)m->base, m->len, m->iface == FI_HMEM_CUDA ? "CUDA" : "host",
             dmabuf_fd >= 0 ? ", dmabuf" : "", d->name, fi_strerror(-rc));
    m->mr = NULL;
    return STRAND_SYSTEM_ERROR;
  }
  m->desc = fi_mr_desc(m->mr);
  return STRAND_SUCCESS;
}

/* Drops one reference to a cache entry; the last one deregisters (lock held). */
static void mr_release(ofi_dev_t *d, ofi_mr_t *m) {
  if (--m->refs > 0) return;
  for (ofi_mr_t **p = &d->mrs; *p; p = &(*p)->next)
    if (*p == m) {
      *p = m->next;
      break;
    }
  if (m->mr) fi_close(&m->mr->fid);
  free(m);
}

static strand_result_t reg_common(void *comm, void *data, size_t size, int type, int fd,
                                  uint64_t offset, void **mhandle) {
  ofi_comm_t *c = comm;
  if (!c || !mhandle || (!data && size)) {
    STRAND_WARN("regMr: invalid argument (comm %p, data %p, size %zu)", comm, data, size);
    return STRAND_INVALID_ARGUMENT;
  }
  *mhandle = NULL;
  ofi_dev_t *d = c->dev;
  enum fi_hmem_iface iface;
  if (type == STRAND_PTR_HOST) {
    iface = FI_HMEM_SYSTEM;
  } else if (type == STRAND_PTR_CUDA && d->hmem) {
    iface = FI_HMEM_CUDA;
  } else {
    STRAND_WARN("regMr: memory type %d is not supported on %s (provider %s%s)", type, d->name,
             ofi_provider_name(), d->hmem ? "" : " offers no FI_HMEM");
    return STRAND_INVALID_ARGUMENT;
  }
  uintptr_t base = (uintptr_t)data, end = base + size;
  if (iface == FI_HMEM_SYSTEM && fd < 0) {
    uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
    base &= ~(page - 1);
    end = (end + page - 1) & ~(page - 1);
  }
  if (end == base) end = base + 1; /* zero-byte registrations still get a distinct handle */
  pthread_mutex_lock(&d->lock);
  strand_result_t r = STRAND_SUCCESS;
  ofi_mr_t *m = NULL;
  if (fd < 0)
    for (m = d->mrs; m; m = m->next)
      if (m->iface == iface && m->base <= base && m->base + m->len >= end) break;
  ofi_mh_t *h = calloc(1, sizeof *h);
  if (!h) {
    r = STRAND_SYSTEM_ERROR;
    goto out;
  }
  if (m) {
    m->refs++;
  } else {
    m = calloc(1, sizeof *m);
    if (!m) {
      free(h);
      r = STRAND_SYSTEM_ERROR;
      goto out;
    }
    m->dev = d;
    m->base = base;
    m->len = end - base;
    m->iface = iface;
    m->refs = 1;
    r = mr_register(d, m, fd, offset);
    if (r != STRAND_SUCCESS) {
      free(m);
      free(h);
      goto out;
    }
    m->next = d->mrs;
    d->mrs = m;
  }
  h->entry = m;
  r = strand_handle_set_add(&live_mhs, h);
  if (r != STRAND_SUCCESS) {
    STRAND_WARN("regMr on %s: out of memory recording the handle", d->name);
    mr_release(d, m);
    free(h);
    goto out;
  }
  *mhandle = h;
out:
  pthread_mutex_unlock(&d->lock);
  return r;
}

strand_result_t ofi_reg_mr(void *comm, void *data, size_t size, int type, void **mhandle) {
  return reg_common(comm, data, size, type, -1, 0, mhandle);
}

strand_result_t ofi_reg_mr_dmabuf(void *comm, void *data, size_t size, int type, uint64_t offset,
                                  int fd, void **mhandle) {
  if (fd < 0 || !OFI_DMABUF_SUPPORTED) return reg_common(comm, data, size, type, -1, 0, mhandle);
  /* The core closes fd when we return; libfabric imports it during fi_mr_regattr. */
  return reg_common(comm, data, size, type, fd, offset, mhandle);
}

strand_result_t ofi_dereg_mr(void *comm, void *mhandle) {
  /* Nothing is read through mhandle before the set says it is live: a second deregMr of the same
   * handle, or a pointer we never gave out, would otherwise read freed or foreign memory. */
  if (!mhandle || !strand_handle_set_remove(&live_mhs, mhandle)) {
    STRAND_WARN("deregMr(comm %p, mhandle %p): not a live registration of this plugin (released "
                "twice, never returned by regMr, or from another plugin); nothing done. Check the "
                "caller releases each regMr handle exactly once",
                comm, mhandle);
    return STRAND_INVALID_ARGUMENT;
  }
  ofi_mh_t *h = mhandle;
  ofi_mr_t *m = h->entry;
  ofi_dev_t *d = m->dev;
  free(h);
  pthread_mutex_lock(&d->lock);
  mr_release(d, m);
  pthread_mutex_unlock(&d->lock);
  return STRAND_SUCCESS;
}

/* The domain closes: every registration goes. An entry whose handles the core never released is
 * kept (memory only, no MR) so that a late deregMr of such a handle stays safe and frees it. */
void ofi_mr_cache_clear(ofi_dev_t *d) {
  while (d->mrs) {
    ofi_mr_t *m = d->mrs;
    d->mrs = m->next;
    if (m->mr) fi_close(&m->mr->fid);
    m->mr = NULL;
    m->desc = NULL;
    m->next = NULL;
    if (m->refs <= 0) free(m);
  }
}
