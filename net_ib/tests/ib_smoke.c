/* strand-ib smoke and fault test: loads the plugin .so with dlopen, the way NCCL does, and drives
 * it through ncclNetPlugin_v11 from one thread (both ends in one process unless a case needs a
 * second one). Runs on tests/softverbs (LD_LIBRARY_PATH), or on a real HCA.
 *
 *   ib_smoke PLUGIN.so [case]
 *     data cases (default "all"): props, transfer, group, oversize, regcache, flush, vdevice
 *     fault cases (each run alone, with the softverbs knob meson.build sets):
 *       portdown   SOFTVERBS_PORT_DOWN_MS: a pending receive fails, the WARN names the port
 *       fatal      SOFTVERBS_FATAL_MS: device fatal event; the pending receive fails
 *       qperror    SOFTVERBS_FAIL_QP_AFTER: transfers fail, the WARN names the QP and event
 *       rkey       the receive buffer is deregistered before the data lands: remote access error
 *       peerkill   the sending process is SIGKILLed: the pending receive fails
 *       peerkill-send  the receiving process is SIGKILLed: the sender waiting in isend fails
 *     Each fault must give an error from test() within FAULT_BOUND_S, never a hang.
 *
 *     noverbs    (run with an unloadable libibverbs.so.1 first on LD_LIBRARY_PATH) init succeeds
 *                with 0 devices and the INFO line "no libibverbs: strand-ib offers 0 devices"
 * Exit status 0 only if every case passed; 77 (skip) when the plugin offers no device. */
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "plugin_test.h"
#include "strand/profiler.h"
#include "strand/abi/abi.h"
#include "strand/cuda_driver.h"

#define SMOKE_TIMEOUT_S 20
#define FAULT_BOUND_S 10.0

static strand_net_v11_t *net;
static pt_net_t pn;
static void *ctx;

/* The last WARN the plugin logged (through the NCCL-style logger we hand to init). */
static char last_warn[1024];
static bool saw_no_verbs; /* the INFO line of a host without libibverbs */
static void logger(strand_log_level_t level, unsigned long flags, const char *file, int line,
                   const char *fmt, ...) {
  (void)flags;
  char msg[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  if (level == STRAND_LOG_WARN) snprintf(last_warn, sizeof last_warn, "%s", msg);
  if (strstr(msg, "no libibverbs: strand-ib offers 0 devices")) saw_no_verbs = true;
  fprintf(stderr, "[plugin %s %s:%d] %s\n", level == STRAND_LOG_WARN ? "WARN" : "INFO", file,
          line, msg);
}

static int connect_pair_dev(int dev, void **sc, void **rc) {
  return pt_connect_pair(&pn, ctx, dev, sc, rc, NULL, SMOKE_TIMEOUT_S);
}

static int post_send(void *sc, void *buf, size_t size, int tag, void *mh, void **req) {
  double t0 = pt_now_s();
  *req = NULL;
  while (!*req) {
    strand_result_t rc = net->isend(sc, buf, size, tag, mh, NULL, req);
    if (rc != STRAND_SUCCESS) return (int)rc;
    if (pt_now_s() - t0 > SMOKE_TIMEOUT_S) return -1;
  }
  return 0;
}

/* A connected send/recv comm pair on `dev` with a registered host buffer on each side (send_len /
 * recv_len bytes; 0 = no buffer on that side). Cases take what they need from it and end with
 * pair_close, which deregisters what is still registered (a case that deregisters a handle itself
 * sets it to NULL), frees the buffers and closes both comms. */
typedef struct {
  void *sc, *rc;
  char *sb, *rb;
  void *smh, *rmh;
} ib_pair_t;

static int pair_open(ib_pair_t *p, int dev, size_t send_len, size_t recv_len) {
  memset(p, 0, sizeof *p);
  if (connect_pair_dev(dev, &p->sc, &p->rc)) return -1;
  if (send_len) {
    p->sb = malloc(send_len);
    PT_CHECK(p->sb, "malloc %zu", send_len);
    PT_CHECK(net->regMr(p->sc, p->sb, send_len, STRAND_PTR_HOST, &p->smh) == STRAND_SUCCESS,
             "regMr send");
  }
  if (recv_len) {
    p->rb = malloc(recv_len);
    PT_CHECK(p->rb, "malloc %zu", recv_len);
    PT_CHECK(net->regMr(p->rc, p->rb, recv_len, STRAND_PTR_HOST, &p->rmh) == STRAND_SUCCESS,
             "regMr recv");
  }
  return 0;
}

static int pair_close(ib_pair_t *p) {
  if (p->smh) net->deregMr(p->sc, p->smh);
  if (p->rmh) net->deregMr(p->rc, p->rmh);
  free(p->sb);
  free(p->rb);
  int r = net->closeSend(p->sc) == STRAND_SUCCESS && net->closeRecv(p->rc) == STRAND_SUCCESS;
  memset(p, 0, sizeof *p);
  PT_CHECK(r, "closeSend/closeRecv");
  return 0;
}

static int post_recv(void *rc, int n, void **bufs, size_t *sizes, int *tags, void **mhs,
                     void **req) {
  double t0 = pt_now_s();
  *req = NULL;
  while (!*req) {
    strand_result_t r = net->irecv(rc, n, bufs, sizes, tags, mhs, NULL, req);
    if (r != STRAND_SUCCESS) return (int)r;
    if (pt_now_s() - t0 > SMOKE_TIMEOUT_S) return -1;
  }
  return 0;
}

/* With this set, wait_both returns at the first error of either side (a fault on one QP: the other
 * end may have nothing in flight that could notice it, as with NCCL's own transport). */
static bool stop_on_first_error;

/* test() both until done; returns 0, or the first error (results in *rs / *rr). */
static int wait_both(void *sreq, void *rreq, int *ssize, int *rsizes, int *res_s, int *res_r) {
  double t0 = pt_now_s();
  *res_s = *res_r = 0;
  while (sreq || rreq) {
    int done = 0;
    if (sreq) {
      int r = net->test(sreq, &done, ssize);
      if (r != STRAND_SUCCESS) *res_s = r, done = 1;
      if (done) sreq = NULL;
    }
    if (rreq) {
      done = 0;
      int r = net->test(rreq, &done, rsizes);
      if (r != STRAND_SUCCESS) *res_r = r, done = 1;
      if (done) rreq = NULL;
    }
    if (stop_on_first_error && (*res_s || *res_r)) return 0;
    if (pt_now_s() - t0 > SMOKE_TIMEOUT_S) return PT_TIMEOUT;
  }
  return 0;
}

static int case_props(void) {
  int ndev = 0;
  PT_CHECK(net->devices(&ndev) == STRAND_SUCCESS && ndev > 0, "devices");
  for (int d = 0; d < ndev; d++) {
    strand_props_v11_t p;
    PT_CHECK(net->getProperties(d, &p) == STRAND_SUCCESS, "getProperties(%d)", d);
    PT_CHECK(p.name && strchr(p.name, ':'), "device %d name '%s' is not dev:port", d,
             p.name ? p.name : "(null)");
    /* softverbs without a CUDA driver (CI): its dma-buf probe says EOPNOTSUPP and no device
     * memory exists to register, so GPU memory must not be claimed (ib_gpu.c). */
    PT_CHECK(p.ptrSupport == STRAND_PTR_HOST, "ptrSupport %#x: only HOST on this host",
             p.ptrSupport);
    PT_CHECK(p.maxRecvs == 8, "maxRecvs %d", p.maxRecvs);
    PT_CHECK(p.speed > 0, "speed %d", p.speed);
    printf("  device %d: %s speed %d Mb/s port %d pciPath %s guid %#llx\n", d, p.name, p.speed,
           p.port, p.pciPath ? p.pciPath : "(none)", (unsigned long long)p.guid);
  }
  return 0;
}

/* Sizes crossing the immediate-size limit (2 MiB) and the QP split threshold; byte-exact with the
 * true size, guard bytes after the receive untouched. */
static int transfer_on(int dev) {
  static const size_t sizes[] = {0, 1, 8, 4097, 65536, 1 << 20, (2 << 20) + 3, 8 << 20};
  size_t max = 8 << 20;
  ib_pair_t p;
  if (pair_open(&p, dev, max, max + 64)) return -1;
  void *sc = p.sc, *rc = p.rc, *smh = p.smh, *rmh = p.rmh;
  char *sb = p.sb, *rb = p.rb;
  void *cmh = (void *)1;
  PT_CHECK(net->regMr(rc, rb, 4096, STRAND_PTR_CUDA, &cmh) == STRAND_INVALID_ARGUMENT && !cmh,
           "regMr(NCCL_PTR_CUDA) on a host-only device is refused with a NULL handle");
  for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
    size_t n = sizes[k];
    pt_fill(sb, n, (unsigned)k + 7);
    memset(rb, 0xee, max + 64);
    void *rr, *sr;
    void *bufs[1] = {rb};
    size_t rsz[1] = {max};
    int tags[1] = {5};
    void *mhs[1] = {rmh};
    PT_CHECK(post_recv(rc, 1, bufs, rsz, tags, mhs, &rr) == 0, "irecv");
    PT_CHECK(post_send(sc, sb, n, 5, smh, &sr) == 0, "isend %zu", n);
    int ss = -1, rs[8] = {-1}, es, er;
    PT_CHECK(wait_both(sr, rr, &ss, rs, &es, &er) == 0 && es == 0 && er == 0,
             "%zu bytes: errors %d/%d", n, es, er);
    PT_CHECK(rs[0] == (int)n && ss == (int)n, "%zu bytes: sizes %d/%d", n, rs[0], ss);
    PT_CHECK(pt_verify(rb, n, (unsigned)k + 7) < 0, "%zu bytes: data differs at %ld", n,
             pt_verify(rb, n, (unsigned)k + 7));
    PT_CHECK((unsigned char)rb[n] == 0xee, "%zu bytes: wrote past the message", n);
  }
  return pair_close(&p);
}

static int case_transfer(void) { return transfer_on(0); }

/* A grouped receive of 3 (tags 10, 11, 12; one of size 0) matched by sends posted out of order. */
static int case_group(void) {
  enum { N = 3, SZ = 300000 };
  ib_pair_t p;
  if (pair_open(&p, 0, N * SZ, N * SZ)) return -1;
  void *sc = p.sc, *rc = p.rc, *smh = p.smh, *rmh = p.rmh;
  char *sb = p.sb, *rb = p.rb;
  size_t lens[N] = {SZ - 1, 0, 1234};
  void *bufs[N], *mhs[N];
  size_t rsz[N];
  int tags[N];
  for (int i = 0; i < N; i++) {
    bufs[i] = rb + i * SZ;
    mhs[i] = rmh;
    rsz[i] = SZ;
    tags[i] = 10 + i;
    pt_fill(sb + i * SZ, lens[i], 100u + (unsigned)i);
  }
  void *rr, *sr[N];
  PT_CHECK(post_recv(rc, N, bufs, rsz, tags, mhs, &rr) == 0, "irecv n=3");
  const int order[N] = {2, 0, 1};
  for (int k = 0; k < N; k++) {
    int i = order[k];
    PT_CHECK(post_send(sc, sb + i * SZ, lens[i], 10 + i, smh, &sr[k]) == 0, "isend tag %d", 10 + i);
  }
  int rs[8] = {0}, ss, es, er;
  PT_CHECK(wait_both(sr[0], rr, &ss, rs, &es, &er) == 0 && !es && !er, "group: %d/%d", es, er);
  for (int k = 1; k < N; k++)
    PT_CHECK(wait_both(sr[k], NULL, &ss, NULL, &es, &er) == 0 && !es, "send %d", k);
  for (int i = 0; i < N; i++) {
    PT_CHECK(rs[i] == (int)lens[i], "slot %d size %d, sent %zu", i, rs[i], lens[i]);
    PT_CHECK(pt_verify(rb + i * SZ, lens[i], 100u + (unsigned)i) < 0, "slot %d data", i);
  }
  return pair_close(&p);
}

/* A send larger than the posted receive: an error on both sides, the receive buffer untouched,
 * and the comm still carries the next message. */
static int case_oversize(void) {
  ib_pair_t p;
  if (pair_open(&p, 0, 16384, 16384)) return -1;
  void *sc = p.sc, *rc = p.rc, *smh = p.smh, *rmh = p.rmh;
  char *sb = p.sb, *rb = p.rb;
  memset(rb, 0x5c, 16384);
  pt_fill(sb, 16384, 9);
  void *bufs[1] = {rb}, *mhs[1] = {rmh}, *rr, *sr;
  size_t rsz[1] = {4096};
  int tags[1] = {1};
  PT_CHECK(post_recv(rc, 1, bufs, rsz, tags, mhs, &rr) == 0, "irecv");
  PT_CHECK(post_send(sc, sb, 16384, 1, smh, &sr) == 0, "isend");
  int ss, rs[8], es, er;
  PT_CHECK(wait_both(sr, rr, &ss, rs, &es, &er) == 0, "oversize: hang");
  PT_CHECK(es != 0 && er != 0, "oversize: sender %d receiver %d (both must fail)", es, er);
  for (int i = 0; i < 16384; i++) PT_CHECK((unsigned char)rb[i] == 0x5c, "byte %d written", i);
  rsz[0] = 16384;
  PT_CHECK(post_recv(rc, 1, bufs, rsz, tags, mhs, &rr) == 0, "irecv after");
  PT_CHECK(post_send(sc, sb, 16384, 1, smh, &sr) == 0, "isend after");
  PT_CHECK(wait_both(sr, rr, &ss, rs, &es, &er) == 0 && !es && !er && rs[0] == 16384,
           "comm unusable after the size error");
  PT_CHECK(pt_verify(rb, 16384, 9) < 0, "data after");
  return pair_close(&p);
}

/* The registration cache: many regMr of one range (and of sub-ranges) on two comms, each handle
 * usable, each deregistered once; a second deregMr of a handle is refused. */
static int case_regcache(void) {
  void *sc, *rc;
  if (connect_pair_dev(0, &sc, &rc)) return -1;
  size_t len = 1 << 20;
  char *b = malloc(len), *rb = malloc(len);
  void *mh[16], *rmh;
  double t0 = pt_now_s();
  for (int i = 0; i < 16; i++)
    PT_CHECK(net->regMr(i % 2 ? sc : rc, b + (i % 4) * 4096, len - (size_t)(i % 4) * 4096,
                        STRAND_PTR_HOST, &mh[i]) == STRAND_SUCCESS,
             "regMr %d", i);
  printf("  16 registrations of one range: %.3f ms\n", (pt_now_s() - t0) * 1e3);
  PT_CHECK(net->regMr(rc, rb, len, STRAND_PTR_HOST, &rmh) == STRAND_SUCCESS, "regMr");
  pt_fill(b + 4096, 5000, 3);
  void *bufs[1] = {rb}, *mhs[1] = {rmh}, *rr, *sr;
  size_t rsz[1] = {len};
  int tags[1] = {0};
  PT_CHECK(post_recv(rc, 1, bufs, rsz, tags, mhs, &rr) == 0, "irecv");
  PT_CHECK(post_send(sc, b + 4096, 5000, 0, mh[5], &sr) == 0, "isend");
  int ss, rs[8], es, er;
  PT_CHECK(wait_both(sr, rr, &ss, rs, &es, &er) == 0 && !es && !er, "transfer");
  PT_CHECK(pt_verify(rb, 5000, 3) < 0, "data");
  for (int i = 0; i < 16; i++)
    PT_CHECK(net->deregMr(i % 2 ? sc : rc, mh[i]) == STRAND_SUCCESS, "deregMr %d", i);
  PT_CHECK(net->deregMr(sc, mh[3]) != STRAND_SUCCESS, "second deregMr accepted");
  net->deregMr(rc, rmh);
  free(b);
  free(rb);
  net->closeSend(sc);
  net->closeRecv(rc);
  return 0;
}

/* iflush through the loopback QP's RDMA read (STRAND_IB_FORCE_FLUSH=1; without it the plugin
 * returns "done" at once for host memory, which also passes). */
static int case_flush(void) {
  ib_pair_t p;
  if (pair_open(&p, 0, 65536, 65536)) return -1;
  void *sc = p.sc, *rc = p.rc, *smh = p.smh, *rmh = p.rmh;
  char *sb = p.sb, *rb = p.rb;
  void *bufs[1] = {rb}, *mhs[1] = {rmh}, *rr, *sr;
  size_t rsz[1] = {65536};
  int tags[1] = {0};
  for (int round = 0; round < 3; round++) {
    pt_fill(sb, 65536, 40u + (unsigned)round);
    PT_CHECK(post_recv(rc, 1, bufs, rsz, tags, mhs, &rr) == 0, "irecv");
    PT_CHECK(post_send(sc, sb, 65536, 0, smh, &sr) == 0, "isend");
    int ss, rs[8], es, er;
    PT_CHECK(wait_both(sr, rr, &ss, rs, &es, &er) == 0 && !es && !er, "transfer");
    void *fr = NULL;
    int fsz[1] = {rs[0]};
    PT_CHECK(net->iflush(rc, 1, bufs, fsz, mhs, &fr) == STRAND_SUCCESS, "iflush");
    if (fr) PT_CHECK(pt_wait(&pn, fr, NULL, SMOKE_TIMEOUT_S) == STRAND_SUCCESS, "flush request");
    PT_CHECK(pt_verify(rb, 65536, 40u + (unsigned)round) < 0, "data");
  }
  return pair_close(&p);
}

/* GPUDirect over softverbs with a CUDA driver (CI: the fake libcuda.so.1 of
 * tests/softverbs/tests/fake_cuda, whose device memory the CPU cannot touch): strand-ib claims
 * NCCL_PTR_CUDA and NCCL_PTR_DMABUF, registers a device buffer both ways (regMr of
 * NCCL_PTR_CUDA, regMrDmaBuf), moves data GPU -> GPU and host -> GPU byte-exact, and flushes a
 * receive into GPU memory with a read (a request, not "nothing to flush"). */
static int case_gpu(void) {
  const strand_cuda_t *cu = strand_cuda();
  PT_CHECK(cu, "no usable CUDA driver (this case runs over tests/softverbs/tests/fake_cuda in CI)");
  strand_props_v11_t pr;
  PT_CHECK(net->getProperties(0, &pr) == STRAND_SUCCESS, "getProperties");
  PT_CHECK(pr.ptrSupport == (STRAND_PTR_HOST | STRAND_PTR_CUDA | STRAND_PTR_DMABUF),
           "ptrSupport %#x: softverbs with a CUDA driver reaches GPU memory both ways",
           pr.ptrSupport);
  int dev = -1;
  strand_cu_ctx_t ctx = NULL;
  PT_CHECK(cu->deviceGet(&dev, 0) == 0 && cu->devicePrimaryCtxRetain(&ctx, dev) == 0 &&
               cu->ctxSetCurrent(ctx) == 0, "CUDA context");
  const size_t len = 1 << 20;
  strand_cu_devptr_t gs = 0, gr = 0;
  PT_CHECK(cu->memAlloc(&gs, len) == 0 && cu->memAlloc(&gr, len) == 0, "cuMemAlloc");
  void *sc, *rc;
  if (connect_pair_dev(0, &sc, &rc)) return -1;
  void *smh = NULL, *rmh = NULL, *hmh = NULL;
  PT_CHECK(net->regMr(sc, (void *)(uintptr_t)gs, len, STRAND_PTR_CUDA, &smh) == STRAND_SUCCESS,
           "regMr(NCCL_PTR_CUDA)");
  int fd = -1;
  PT_CHECK(cu->memGetHandleForAddressRange &&
               cu->memGetHandleForAddressRange(&fd, gr, len,
                                               STRAND_CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD, 0) == 0,
           "dma-buf of the receive buffer");
  PT_CHECK(net->regMrDmaBuf(rc, (void *)(uintptr_t)gr, len, STRAND_PTR_CUDA, 0, fd, &rmh) ==
               STRAND_SUCCESS, "regMrDmaBuf");
  close(fd); /* as NCCL: right after the call */
  char *host = malloc(len), *back = malloc(len);
  PT_CHECK(host && back, "malloc");
  PT_CHECK(net->regMr(sc, host, len, STRAND_PTR_HOST, &hmh) == STRAND_SUCCESS, "regMr host");
  for (int round = 0; round < 2; round++) {
    size_t n = len - 5 - (size_t)round;
    pt_fill(host, len, 70u + (unsigned)round);
    /* round 0: GPU -> GPU; round 1: host -> GPU */
    if (round == 0)
      PT_CHECK(cu->memcpyHtoDAsync(gs, host, len, NULL) == 0 && cu->streamSynchronize(NULL) == 0,
               "HtoD");
    void *bufs[1] = {(void *)(uintptr_t)gr}, *mhs[1] = {rmh}, *rr, *sr;
    size_t rsz[1] = {len};
    int tags[1] = {0};
    PT_CHECK(post_recv(rc, 1, bufs, rsz, tags, mhs, &rr) == 0, "irecv into GPU memory");
    PT_CHECK(post_send(sc, round == 0 ? (void *)(uintptr_t)gs : host, n, 0,
                       round == 0 ? smh : hmh, &sr) == 0, "isend");
    int ss, rs[8], es, er;
    PT_CHECK(wait_both(sr, rr, &ss, rs, &es, &er) == 0 && !es && !er && rs[0] == (int)n,
             "transfer round %d (received %d of %zu)", round, rs[0], n);
    void *fr = NULL;
    int fsz[1] = {rs[0]};
    PT_CHECK(net->iflush(rc, 1, bufs, fsz, mhs, &fr) == STRAND_SUCCESS && fr,
             "iflush of a GPU receive must read (a request), got %p", fr);
    PT_CHECK(pt_wait(&pn, fr, NULL, SMOKE_TIMEOUT_S) == STRAND_SUCCESS, "flush request");
    PT_CHECK(cu->memcpyDtoHAsync(back, gr, n, NULL) == 0 && cu->streamSynchronize(NULL) == 0,
             "DtoH");
    PT_CHECK(pt_verify(back, n, 70u + (unsigned)round) < 0, "round %d: GPU data differs", round);
  }
  PT_CHECK(net->deregMr(sc, smh) == STRAND_SUCCESS && net->deregMr(rc, rmh) == STRAND_SUCCESS &&
               net->deregMr(sc, hmh) == STRAND_SUCCESS, "deregMr");
  PT_CHECK(net->closeSend(sc) == STRAND_SUCCESS && net->closeRecv(rc) == STRAND_SUCCESS, "close");
  cu->memFree(gs);
  cu->memFree(gr);
  free(host);
  free(back);
  return 0;
}

/* NIC fusion: devices 0 and 1 fused into one virtual device that carries data over both rails
 * (skipped with fewer than 2 devices). */
static int case_vdevice(void) {
  int ndev = 0;
  net->devices(&ndev);
  if (ndev < 2) {
    printf("  vdevice: skipped (%d device)\n", ndev);
    return 0;
  }
  strand_vprops_v11_t vp = {.ndevs = 2, .devs = {0, 1}};
  int vd = -1;
  PT_CHECK(net->makeVDevice(&vd, &vp) == STRAND_SUCCESS && vd == ndev, "makeVDevice -> %d", vd);
  strand_props_v11_t p;
  PT_CHECK(net->getProperties(vd, &p) == STRAND_SUCCESS && p.vProps.ndevs == 2, "vprops");
  printf("  virtual device %d: %s speed %d\n", vd, p.name, p.speed);
  return transfer_on(vd);
}

/* ---- faults ---- */

/* Posts a receive that no send will match and polls it until test() fails; checks the bound and
 * that the WARN contains `want`. */
static int expect_recv_error(void *rc, void *rmh, void *rb, const char *want, double t0) {
  void *bufs[1] = {rb}, *mhs[1] = {rmh}, *rr;
  size_t rsz[1] = {4096};
  int tags[1] = {0};
  int r = net->irecv(rc, 1, bufs, rsz, tags, mhs, NULL, &rr);
  if (r == STRAND_SUCCESS && rr) r = pt_wait(&pn, rr, NULL, FAULT_BOUND_S + 5);
  double dt = pt_now_s() - t0;
  PT_CHECK(r != STRAND_SUCCESS && r != PT_TIMEOUT, "no error from the receive (result %d)", r);
  PT_CHECK(dt <= FAULT_BOUND_S, "error only after %.1f s (bound %.0f s)", dt, FAULT_BOUND_S);
  PT_CHECK(strstr(last_warn, want) != NULL, "last WARN does not mention '%s': %s", want, last_warn);
  printf("  error %d after %.2f s: %s\n", r, dt, last_warn);
  return 0;
}

static int case_portdown(void) {
  double t0 = pt_now_s(); /* the knob counts from device discovery, at init: close enough */
  ib_pair_t p;
  if (pair_open(&p, 0, 0, 4096)) return -1;
  int r = expect_recv_error(p.rc, p.rmh, p.rb, "sv0:1", t0);
  if (pair_close(&p)) return -1;
  return r;
}

/* SOFTVERBS_FATAL_MS: IBV_EVENT_DEVICE_FATAL; every comm on the device fails, naming it. */
static int case_fatal(void) {
  double t0 = pt_now_s();
  ib_pair_t p;
  if (pair_open(&p, 0, 0, 4096)) return -1;
  int r = expect_recv_error(p.rc, p.rmh, p.rb, "sv0", t0);
  if (pair_close(&p)) return -1;
  return r;
}

static int case_qperror(void) {
  ib_pair_t p;
  if (pair_open(&p, 0, 4096, 4096)) return -1;
  void *sc = p.sc, *rc = p.rc, *smh = p.smh, *rmh = p.rmh;
  char *sb = p.sb, *rb = p.rb;
  double t0 = pt_now_s();
  int es = 0, er = 0;
  stop_on_first_error = true;
  for (int i = 0; i < 1000 && !es && !er; i++) {
    void *bufs[1] = {rb}, *mhs[1] = {rmh}, *rr = NULL, *sr = NULL;
    size_t rsz[1] = {4096};
    int tags[1] = {0}, ss, rs[8];
    if ((er = post_recv(rc, 1, bufs, rsz, tags, mhs, &rr)) != 0) break;
    /* Post the send while watching the receive: a QP failed before the receive's clear-to-send
     * went out leaves the sender nothing to notice, and the receive's error must end the wait. */
    double t1 = pt_now_s();
    while (!sr && !es && !er) {
      es = net->isend(sc, sb, 4096, 0, smh, NULL, &sr);
      int done = 0;
      if (!sr && !es) er = net->test(rr, &done, rs), rr = done || er ? NULL : rr;
      PT_CHECK(pt_now_s() - t1 < FAULT_BOUND_S, "neither side moved for %.0f s", FAULT_BOUND_S);
    }
    if (es || er) break;
    PT_CHECK(wait_both(sr, rr, &ss, rs, &es, &er) == 0, "hang after %d transfers", i);
  }
  double dt = pt_now_s() - t0;
  PT_CHECK(es || er, "1000 transfers without the injected QP error");
  PT_CHECK(dt <= FAULT_BOUND_S, "error only after %.1f s", dt);
  PT_CHECK(strstr(last_warn, "QP") != NULL, "WARN does not name the QP: %s", last_warn);
  printf("  errors %d/%d after %.2f s: %s\n", es, er, dt, last_warn);
  return pair_close(&p);
}

/* The receive buffer's registration is released while the receive is posted: the sender's RDMA
 * write meets a dead rkey, which a NIC answers with a remote access error. */
static int case_rkey(void) {
  ib_pair_t p;
  if (pair_open(&p, 0, 8192, 8192)) return -1;
  void *sc = p.sc, *rc = p.rc, *smh = p.smh, *rmh = p.rmh;
  char *sb = p.sb, *rb = p.rb;
  void *bufs[1] = {rb}, *mhs[1] = {rmh}, *rr, *sr;
  size_t rsz[1] = {8192};
  int tags[1] = {0};
  PT_CHECK(post_recv(rc, 1, bufs, rsz, tags, mhs, &rr) == 0, "irecv");
  PT_CHECK(net->deregMr(rc, rmh) == STRAND_SUCCESS, "deregMr");
  p.rmh = NULL;
  double t0 = pt_now_s();
  PT_CHECK(post_send(sc, sb, 8192, 0, smh, &sr) == 0, "isend");
  int ss, rs[8], es, er;
  int w = wait_both(sr, rr, &ss, rs, &es, &er);
  double dt = pt_now_s() - t0;
  PT_CHECK(w == 0 && es != 0, "the sender saw no error (wait %d, send %d)", w, es);
  PT_CHECK(dt <= FAULT_BOUND_S, "error after %.1f s", dt);
  PT_CHECK(strstr(last_warn, "access") || strstr(last_warn, "QP"), "WARN: %s", last_warn);
  printf("  sender %d receiver %d after %.2f s: %s\n", es, er, dt, last_warn);
  return pair_close(&p);
}

/* Child of peerkill: connect to the handle in argv (hex), say "up", wait to be killed. */
static int peer_child(const char *hex) {
  char handle[STRAND_NET_HANDLE_MAXSIZE];
  for (int i = 0; i < STRAND_NET_HANDLE_MAXSIZE; i++) sscanf(hex + 2 * i, "%2hhx", &handle[i]);
  void *sc = NULL;
  double t0 = pt_now_s();
  while (!sc && pt_now_s() - t0 < SMOKE_TIMEOUT_S)
    if (net->connect(ctx, 0, handle, &sc, NULL) != STRAND_SUCCESS) return 1;
  if (!sc) return 1;
  printf("up\n");
  fflush(stdout);
  sleep(60);
  return 0;
}

/* Child of peerkill-send: listen, print the handle (hex), accept, say "up", wait to be killed. */
static int peer_child_recv(void) {
  char handle[STRAND_NET_HANDLE_MAXSIZE];
  void *lc = NULL, *rc = NULL;
  if (net->listen(ctx, 0, handle, &lc) != STRAND_SUCCESS) return 1;
  for (int i = 0; i < STRAND_NET_HANDLE_MAXSIZE; i++) printf("%02x", (unsigned char)handle[i]);
  printf("\n");
  fflush(stdout);
  double t0 = pt_now_s();
  while (!rc && pt_now_s() - t0 < SMOKE_TIMEOUT_S)
    if (net->accept(lc, &rc, NULL) != STRAND_SUCCESS) return 1;
  if (!rc) return 1;
  printf("up\n");
  fflush(stdout);
  sleep(60);
  return 0;
}

/* The receiving process is SIGKILLed while this side waits in isend for a clear-to-send that will
 * never come (no request exists yet): isend itself must return an error within the bound. */
static int case_peerkill_send(const char *self, const char *plugin) {
  int fds[2];
  PT_CHECK(pipe(fds) == 0, "pipe");
  pid_t pid = fork();
  if (pid == 0) {
    dup2(fds[1], 1);
    close(fds[0]);
    execl(self, self, plugin, "peer_child_recv", (char *)NULL);
    _exit(127);
  }
  close(fds[1]);
  FILE *in = fdopen(fds[0], "r");
  char hex[2 * STRAND_NET_HANDLE_MAXSIZE + 8] = "", up[8] = "";
  PT_CHECK(in && fgets(hex, sizeof hex, in) && strlen(hex) >= 2 * STRAND_NET_HANDLE_MAXSIZE,
           "child handle");
  char handle[STRAND_NET_HANDLE_MAXSIZE];
  for (int i = 0; i < STRAND_NET_HANDLE_MAXSIZE; i++) sscanf(hex + 2 * i, "%2hhx", &handle[i]);
  void *sc = NULL;
  double t0 = pt_now_s();
  while (!sc && pt_now_s() - t0 < SMOKE_TIMEOUT_S)
    PT_CHECK(net->connect(ctx, 0, handle, &sc, NULL) == STRAND_SUCCESS, "connect");
  PT_CHECK(sc && fgets(up, sizeof up, in) && !strncmp(up, "up", 2), "child not up");
  char *sb = malloc(4096);
  void *smh, *sr = NULL;
  PT_CHECK(net->regMr(sc, sb, 4096, STRAND_PTR_HOST, &smh) == STRAND_SUCCESS, "regMr");
  kill(pid, SIGKILL);
  waitpid(pid, NULL, 0);
  t0 = pt_now_s();
  int r = STRAND_SUCCESS;
  while (r == STRAND_SUCCESS && !sr && pt_now_s() - t0 < FAULT_BOUND_S + 5)
    r = net->isend(sc, sb, 4096, 0, smh, NULL, &sr);
  double dt = pt_now_s() - t0;
  PT_CHECK(r != STRAND_SUCCESS && !sr, "isend: result %d request %p after the receiver died", r, sr);
  PT_CHECK(dt <= FAULT_BOUND_S, "error after %.1f s", dt);
  PT_CHECK(strstr(last_warn, "peer"), "WARN: %s", last_warn);
  printf("  isend error %d after %.2f s: %s\n", r, dt, last_warn);
  net->deregMr(sc, smh);
  free(sb);
  net->closeSend(sc);
  fclose(in);
  return 0;
}

static int case_peerkill(const char *self, const char *plugin) {
  char handle[STRAND_NET_HANDLE_MAXSIZE], hex[2 * STRAND_NET_HANDLE_MAXSIZE + 1];
  void *lc = NULL, *rc = NULL;
  PT_CHECK(net->listen(ctx, 0, handle, &lc) == STRAND_SUCCESS, "listen");
  for (int i = 0; i < STRAND_NET_HANDLE_MAXSIZE; i++)
    snprintf(hex + 2 * i, 3, "%02x", (unsigned char)handle[i]);
  int fds[2];
  PT_CHECK(pipe(fds) == 0, "pipe");
  pid_t pid = fork();
  if (pid == 0) {
    dup2(fds[1], 1);
    close(fds[0]);
    execl(self, self, plugin, "peer_child", hex, (char *)NULL);
    _exit(127);
  }
  close(fds[1]);
  double t0 = pt_now_s();
  while (!rc && pt_now_s() - t0 < SMOKE_TIMEOUT_S)
    PT_CHECK(net->accept(lc, &rc, NULL) == STRAND_SUCCESS, "accept");
  PT_CHECK(rc, "child never connected");
  char up[8] = "";
  PT_CHECK(read(fds[0], up, 3) == 3 && !strncmp(up, "up", 2), "child not up");
  char *rb = malloc(4096);
  void *rmh;
  PT_CHECK(net->regMr(rc, rb, 4096, STRAND_PTR_HOST, &rmh) == STRAND_SUCCESS, "regMr");
  kill(pid, SIGKILL);
  waitpid(pid, NULL, 0);
  int r = expect_recv_error(rc, rmh, rb, "peer", pt_now_s());
  net->deregMr(rc, rmh);
  free(rb);
  net->closeRecv(rc);
  net->closeListen(lc);
  close(fds[0]);
  return r;
}

/* Profiler events (tests/common: pt_profiler_case): IB layout (strand/profiler.h). */
static int case_profiler(void) {
  return pt_profiler_case(net, 0, STRAND_PROFILER_NET_ID_IB, SMOKE_TIMEOUT_S);
}

int main(int argc, char **argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: %s PLUGIN.so [case]\n", argv[0]);
    return 2;
  }
  setvbuf(stdout, NULL, _IOLBF, 0);
  net = pt_load_table(argv[1], "ncclNetPlugin_v11");
  if (!net || strcmp(net->name, "strand-ib") != 0) {
    fprintf(stderr, "ncclNetPlugin_v11 missing or misnamed\n");
    return 1;
  }
  pn = PT_NET(net);
  if (net->init(&ctx, 1, NULL, logger, NULL) != STRAND_SUCCESS) {
    fprintf(stderr, "init failed\n");
    return 1;
  }
  const char *which = argc > 2 ? argv[2] : "all";
  if (!strcmp(which, "peer_child")) return argc > 3 ? peer_child(argv[3]) : 2;
  if (!strcmp(which, "peer_child_recv")) return peer_child_recv();
  int ndev = 0;
  net->devices(&ndev);
  if (!strcmp(which, "noverbs")) {
    /* Run with a libibverbs.so.1 that cannot load first on the path: init succeeded (above),
     * 0 devices, and the INFO line says why. */
    printf("noverbs: %d devices, INFO line %s\n", ndev, saw_no_verbs ? "seen" : "missing");
    net->finalize(ctx);
    return ndev == 0 && saw_no_verbs ? 0 : 1;
  }
  if (ndev == 0) {
    printf("SKIP: strand-ib offers 0 devices here (no verbs device; run with "
           "LD_LIBRARY_PATH=<softverbs build dir>)\n");
    return 77;
  }
  struct {
    const char *name;
    int (*fn)(void);
    bool in_all;
  } cases[] = {{"props", case_props, true},     {"transfer", case_transfer, true},
               {"group", case_group, true},     {"oversize", case_oversize, true},
               {"regcache", case_regcache, true}, {"flush", case_flush, true},
               {"vdevice", case_vdevice, true}, {"profiler", case_profiler, true},
               {"portdown", case_portdown, false},
               {"qperror", case_qperror, false}, {"rkey", case_rkey, false},
               {"fatal", case_fatal, false}, {"gpu", case_gpu, false}};
  int ran = 0;
  if (!strcmp(which, "peerkill")) {
    ran = 1;
    printf("case peerkill\n");
    if (case_peerkill(argv[0], argv[1]) != 0) printf("FAIL peerkill\n");
  }
  if (!strcmp(which, "peerkill-send")) {
    ran = 1;
    printf("case peerkill-send\n");
    if (case_peerkill_send(argv[0], argv[1]) != 0) printf("FAIL peerkill-send\n");
  }
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    if (strcmp(which, cases[i].name) && !(cases[i].in_all && !strcmp(which, "all"))) continue;
    ran++;
    printf("case %s\n", cases[i].name);
    double t0 = pt_now_s();
    int r = cases[i].fn();
    printf("%s %s (%.2f s)\n", r == 0 ? "ok" : "FAIL", cases[i].name, pt_now_s() - t0);
  }
  if (!ran) {
    fprintf(stderr, "unknown case %s\n", which);
    return 2;
  }
  net->finalize(ctx);
  return pt_failures ? 1 : 0;
}
