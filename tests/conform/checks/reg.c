/* strand-conform — reg.*: memory registration as NCCL's proxy does it (spec §6.3, §8.2):
 * staging buffers right after connect/accept, whole registration records with pointers inside,
 * one shared pool registered on many comms. CUDA/dmabuf need a GPU: compiled only with the meson
 * `cuda` option, and skipped with the reason when no GPU is visible. */
#include <dlfcn.h>
#include <stdio.h>
#include <unistd.h>
#include <stdlib.h>
#include <string.h>

#include "conform.h"

static conform_status_t reg_host(conform_ctx_t *c) {
  conform_link_t l;
  if (conform_link_open(c, 0, &l)) return CONFORM_FAIL;
  size_t len = (size_t)4 << 20;
  void *buf = aligned_alloc(4096, len);
  void *comms[2] = {l.send_comm, l.recv_comm};
  for (int k = 0; k < 2; k++) {
    void *mh = NULL;
    if (conform_reg(c, comms[k], buf, len, STRAND_PTR_HOST, &mh)) break;
    if (!mh) conform_fail(c, "regMr on the %s comm succeeded with a NULL handle (a later isend/irecv "
                          "cannot tell it from 'not registered')", k ? "recv" : "send");
    else conform_dereg(c, comms[k], mh);
  }
  free(buf);
  conform_link_close(c, &l);
  return conform_verdict(c);
}

static conform_status_t reg_ptr_support_consistent(conform_ctx_t *c) {
  strand_props_v12_t p;
  if (conform_props(c, 0, &p)) return CONFORM_FAIL;
  if ((p.ptrSupport & STRAND_PTR_DMABUF) && !c->net->regMrDmaBuf)
    conform_fail(c, "ptrSupport advertises NCCL_PTR_DMABUF but regMrDmaBuf is NULL");
  conform_link_t l;
  if (conform_link_open(c, 0, &l)) return CONFORM_FAIL;
  char *buf = malloc(65536);
  void *mh = NULL;
  if (p.ptrSupport & STRAND_PTR_HOST) {
    if (conform_reg(c, l.send_comm, buf, 65536, STRAND_PTR_HOST, &mh) == 0)
      conform_dereg(c, l.send_comm, mh);
    else
      conform_fail(c, "ptrSupport has NCCL_PTR_HOST but regMr(NCCL_PTR_HOST) failed");
  }
  free(buf);
  conform_link_close(c, &l);
  return conform_verdict(c);
}

static conform_status_t reg_odd_sizes(conform_ctx_t *c) {
  conform_link_t l;
  if (conform_link_open(c, 0, &l)) return CONFORM_FAIL;
  static const size_t sizes[] = {1, 3, 7, 100, 4095, 4097, 65537, (1 << 20) + 1};
  static const size_t offs[] = {0, 1, 3, 7, 4095};
  unsigned char *buf = malloc((1 << 20) + 8192);
  for (size_t i = 0; i < sizeof sizes / sizeof sizes[0] && c->status != CONFORM_FAIL; i++)
    for (size_t j = 0; j < sizeof offs / sizeof offs[0]; j++) {
      void *mh = NULL;
      void *comm = (i + j) % 2 ? l.recv_comm : l.send_comm;
      if (conform_reg(c, comm, buf + offs[j], sizes[i], STRAND_PTR_HOST, &mh)) {
        conform_fail(c, "(size %zu at address offset %zu)", sizes[i], offs[j]);
        break;
      }
      if (conform_dereg(c, comm, mh)) break;
    }
  free(buf);
  conform_link_close(c, &l);
  return conform_verdict(c);
}

static conform_status_t reg_many(conform_ctx_t *c) {
  conform_link_t l;
  if (conform_link_open(c, 0, &l)) return CONFORM_FAIL;
  int n = c->quick ? 256 : 1024;
  size_t each = 8192;
  unsigned char *buf = malloc((size_t)n * each);
  void **mh = calloc((size_t)n, sizeof *mh);
  int done = 0;
  for (; done < n; done++)
    if (conform_reg(c, l.recv_comm, buf + (size_t)done * each, each, STRAND_PTR_HOST, &mh[done])) {
      conform_fail(c, "registration #%d of %d simultaneous ones failed", done + 1, n);
      break;
    }
  for (int i = 0; i < done; i++) conform_dereg(c, l.recv_comm, mh[i]);
  free(mh);
  free(buf);
  conform_link_close(c, &l);
  if (c->status != CONFORM_FAIL) conform_note(c, "%d registrations alive at once", n);
  return conform_verdict(c);
}

/* One pool registered on several comms (NCCL's shared P2P pool) and twice on one comm (CollNet
 * registers one buffer from both connectors); every handle must work for a transfer. */
static conform_status_t reg_shared_range(conform_ctx_t *c) {
  enum { NL = 4 };
  conform_link_t l[NL];
  int opened = 0;
  for (; opened < NL; opened++)
    if (conform_link_open(c, 0, &l[opened])) return CONFORM_FAIL;
  size_t len = 1 << 20;
  unsigned char *spool = malloc(len), *rpool = malloc(len);
  void *smh[NL] = {0}, *rmh[NL] = {0}, *dup = NULL;
  for (int k = 0; k < NL; k++) {
    if (conform_reg(c, l[k].send_comm, spool, len, STRAND_PTR_HOST, &smh[k])) goto out;
    if (conform_reg(c, l[k].recv_comm, rpool, len, STRAND_PTR_HOST, &rmh[k])) goto out;
  }
  if (conform_reg(c, l[0].recv_comm, rpool, len, STRAND_PTR_HOST, &dup)) {
    conform_fail(c, "(the same range registered a second time on one comm)");
    goto out;
  }
  for (int k = 0; k < NL; k++) {
    size_t off = (size_t)k * 4096, sz = 3000 + (size_t)k;
    conform_fill(spool + off, sz, conform_seed(c->rank, c->next, 100 + (uint64_t)k));
    void *rreq, *sreq, *rdata = rpool + off;
    size_t rsz = sz;
    int tag = c->prev, got = -1;
    void *use_rmh = k == 0 ? dup : rmh[k];
    if (conform_irecv(c, l[k].recv_comm, 1, &rdata, &rsz, &tag, &use_rmh, &rreq)) goto out;
    if (conform_isend(c, l[k].send_comm, spool + off, sz, c->rank, smh[k], &sreq)) goto out;
    if (conform_wait_pair(c, sreq, rreq, &got)) goto out;
    if ((size_t)got != sz || conform_verify(rpool + off, sz, conform_seed(c->prev, c->rank, 100 + (uint64_t)k)) >= 0) {
      conform_fail(c, "transfer on comm %d with a shared registration arrived wrong (size %d)", k, got);
      goto out;
    }
  }
out:
  if (dup) conform_dereg(c, l[0].recv_comm, dup);
  for (int k = 0; k < NL; k++) {
    if (smh[k]) conform_dereg(c, l[k].send_comm, smh[k]);
    if (rmh[k]) conform_dereg(c, l[k].recv_comm, rmh[k]);
  }
  for (int k = 0; k < opened; k++) conform_link_close(c, &l[k]);
  free(spool);
  free(rpool);
  return conform_verdict(c);
}

#ifdef CONFORM_HAVE_CUDA
#include <cuda_runtime_api.h>

static int gpu_present(conform_ctx_t *c, char *why, size_t len) {
  int n = 0;
  cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess || n == 0) {
    snprintf(why, len, "no GPU visible (cudaGetDeviceCount: %s)",
             e != cudaSuccess ? cudaGetErrorString(e) : "0 devices");
    return 0;
  }
  (void)c;
  return n;
}

static conform_status_t reg_cuda(conform_ctx_t *c) {
  char why[256];
  if (!gpu_present(c, why, sizeof why)) return conform_skip(c, "%s", why);
  strand_props_v12_t p;
  if (conform_props(c, 0, &p)) return CONFORM_FAIL;
  if (!(p.ptrSupport & STRAND_PTR_CUDA)) return conform_skip(c, "ptrSupport has no NCCL_PTR_CUDA");
  conform_link_t l;
  if (conform_link_open(c, 0, &l)) return CONFORM_FAIL;
  void *d = NULL;
  size_t len = 2 << 20;
  if (cudaMalloc(&d, len) != cudaSuccess) {
    conform_link_close(c, &l);
    return conform_skip(c, "cudaMalloc of 2 MiB failed");
  }
  void *mh = NULL;
  if (conform_reg(c, l.recv_comm, d, len, STRAND_PTR_CUDA, &mh) == 0) conform_dereg(c, l.recv_comm, mh);
  cudaFree(d);
  conform_link_close(c, &l);
  return conform_verdict(c);
}

static conform_status_t reg_dmabuf(conform_ctx_t *c) {
  char why[256];
  if (!gpu_present(c, why, sizeof why)) return conform_skip(c, "%s", why);
  strand_props_v12_t p;
  if (conform_props(c, 0, &p)) return CONFORM_FAIL;
  if (!(p.ptrSupport & STRAND_PTR_DMABUF) || !c->net->regMrDmaBuf)
    return conform_skip(c, "ptrSupport has no NCCL_PTR_DMABUF or regMrDmaBuf is NULL");
  /* cuMemGetHandleForAddressRange comes from the driver library, loaded at run time. */
  void *drv = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  typedef int (*get_handle_fn)(void *, unsigned long long, size_t, int, unsigned long long);
  get_handle_fn gh = drv ? (get_handle_fn)dlsym(drv, "cuMemGetHandleForAddressRange") : NULL;
  if (!gh) return conform_skip(c, "the CUDA driver has no cuMemGetHandleForAddressRange");
  conform_link_t l;
  if (conform_link_open(c, 0, &l)) return CONFORM_FAIL;
  void *d = NULL;
  size_t len = 2 << 20;
  if (cudaMalloc(&d, len) != cudaSuccess) {
    conform_link_close(c, &l);
    return conform_skip(c, "cudaMalloc of 2 MiB failed");
  }
  int fd = -1;
  if (gh(&fd, (unsigned long long)(uintptr_t)d, len, 1 /* DMA_BUF_FD */, 0) != 0 || fd < 0) {
    cudaFree(d);
    conform_link_close(c, &l);
    return conform_skip(c, "cuMemGetHandleForAddressRange failed (no dmabuf support)");
  }
  void *mh = NULL;
  conform_phase(c, "regMrDmaBuf");
  strand_result_t r = c->net->regMrDmaBuf(l.recv_comm, d, len, STRAND_PTR_CUDA, 0, fd, &mh);
  close(fd); /* NCCL closes the fd right after the call (§6.3) */
  if (r != STRAND_SUCCESS) conform_fail(c, "regMrDmaBuf returned %s", conform_result_str(r));
  else conform_dereg(c, l.recv_comm, mh);
  cudaFree(d);
  conform_link_close(c, &l);
  return conform_verdict(c);
}
#else
static conform_status_t reg_cuda(conform_ctx_t *c) {
  return conform_skip(c, "built without CUDA (meson -Dcuda=enabled and a GPU are needed)");
}
static conform_status_t reg_dmabuf(conform_ctx_t *c) {
  return conform_skip(c, "built without CUDA (meson -Dcuda=enabled and a GPU are needed)");
}
#endif

const conform_check_t conform_checks_reg[] = {
  {"reg.host", "§6.3", "regMr(NCCL_PTR_HOST) on send and recv comms gives a handle; deregMr",
   reg_host, 30, 0},
  {"reg.ptr-support-consistent", "§2.6 ptrSupport, §3.8", "HOST regMr works; DMABUF advertised => regMrDmaBuf set",
   reg_ptr_support_consistent, 30, 0},
  {"reg.odd-sizes", "§6.3", "odd sizes at odd alignments register and deregister", reg_odd_sizes, 30, 0},
  {"reg.many", "§6.3", "hundreds of simultaneous registrations on one comm", reg_many, 30, 0},
  {"reg.shared-range", "§6.3, §8.2", "one range on many comms and twice on one; all handles usable",
   reg_shared_range, 30, 0},
  {"reg.cuda", "§6.3", "regMr(NCCL_PTR_CUDA) of device memory", reg_cuda, 30, 0},
  {"reg.dmabuf", "§6.3", "regMrDmaBuf of device memory", reg_dmabuf, 30, 0},
  {0},
};
