/* sv_bench: raw RC verbs performance over softverbs, two processes (fork), the reference the
 * strand-ib benchmark compares against. Measures
 *   - RDMA WRITE bandwidth: writes of each size, `depth` in flight per QP, every one signaled; a
 *     write completes only once it is applied at the target, as on a NIC;
 *   - latency: ping-pong of 8-byte RDMA WRITE_WITH_IMM each way (the target answers from its
 *     receive completion), reported as half the round trip.
 * Usage: sv_bench [--min BYTES] [--max BYTES] [--depth N] [--lat-iters N] [--lat-prewrite BYTES]
 *                 [--qps N] [--bidir] [--gpu] [--csv]
 * --lat-prewrite B: each ping/pong is a signaled B-byte RDMA WRITE followed by the 8-byte
 * WRITE_WITH_IMM on the same QP (the shape of a CTS or data-then-notify protocol).
 * --qps N: the writes go round robin over N QPs of one context (softverbs: N TCP streams, still
 * one progress thread per process).
 * --bidir: both processes write to each other at once, as every rank of an all-reduce does (each
 * process then sends and receives through its one progress thread); the GB/s printed is per
 * direction (the initiator's; the target's is in the CSV), comparable with all-reduce busbw.
 * --gpu: the buffers are CUDA device memory (initiator on device 0, target on device 1 when there
 * are two), registered with ibv_reg_mr on the device pointer as nvidia-peermem allows; the CUDA
 * driver is loaded at run time (strand/cuda_driver.h), so this needs a GPU machine.
 * Sizes double from --min (default 8) to --max (default 64M); K/M suffixes accepted. Numbers are
 * for comparison on the same machine only: softverbs moves data through TCP loopback. */
#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <infiniband/verbs.h>

#include "strand/cuda_driver.h"

#define FAIL(...)                                                                                  \
  do {                                                                                             \
    fprintf(stderr, "sv_bench[%d]: ", (int)getpid());                                              \
    fprintf(stderr, __VA_ARGS__);                                                                  \
    fprintf(stderr, "\n");                                                                         \
    return 1;                                                                                      \
  } while (0)

#define MAX_QPS 16

typedef struct {
  uint32_t qpn[MAX_QPS];
  union ibv_gid gid;
  uint64_t addr;
  uint32_t rkey;
} info_t;

typedef struct {
  struct ibv_context *ctx;
  struct ibv_pd *pd;
  struct ibv_cq *scq, *rcq;
  struct ibv_qp *qp[MAX_QPS];
  struct ibv_mr *mr;
  uint8_t *buf;
  size_t len;
  strand_cu_devptr_t gpu; /* --gpu: the device allocation behind buf */
} end_t;

/* The run's shape, the same in both processes (fixed before the fork). */
static int g_prewrite, g_nqps = 1, g_bidir, g_gpu, g_depth = 8;

static double now_s(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static size_t parse_size(const char *s)
{
  char *e = NULL;
  unsigned long long v = strtoull(s, &e, 0);
  if (*e == 'K' || *e == 'k') v <<= 10;
  if (*e == 'M' || *e == 'm') v <<= 20;
  if (*e == 'G' || *e == 'g') v <<= 30;
  return (size_t)v;
}

static int xfer(int fd, void *buf, size_t len, int wr)
{
  size_t done = 0;
  while (done < len) {
    ssize_t n = wr ? write(fd, (char *)buf + done, len - done)
                   : read(fd, (char *)buf + done, len - done);
    if (n <= 0) return -1;
    done += (size_t)n;
  }
  return 0;
}

/* --gpu: len bytes of device memory on CUDA device `ordinal` (its primary context made current
 * for this thread, so softverbs finds the pointer's context), or 1 after saying why. */
static int gpu_alloc(end_t *e, size_t len, int ordinal)
{
  const strand_cuda_t *cu = strand_cuda();
  if (!cu) FAIL("--gpu: no usable CUDA driver (libcuda.so.1)");
  int dev = 0;
  strand_cu_ctx_t ctx = NULL;
  strand_cu_result_t r = cu->deviceGet(&dev, ordinal);
  if (r != 0 && ordinal > 0) r = cu->deviceGet(&dev, ordinal = 0); /* one GPU: both share it */
  if (r == 0) r = cu->devicePrimaryCtxRetain(&ctx, dev);
  if (r == 0) r = cu->ctxSetCurrent(ctx);
  if (r == 0) r = cu->memAlloc(&e->gpu, len);
  if (r != 0) FAIL("--gpu: CUDA device %d: %s", ordinal, strand_cuda_error_name(r));
  e->buf = (uint8_t *)(uintptr_t)e->gpu;
  return 0;
}

static int setup(end_t *e, size_t len, int fd, info_t *peer, int gpu_ordinal)
{
  int n = 0;
  struct ibv_device **list = ibv_get_device_list(&n);
  if (!list || n < 1) FAIL("no verbs device (is LD_LIBRARY_PATH pointing at softverbs?)");
  e->ctx = ibv_open_device(list[0]);
  ibv_free_device_list(list);
  if (!e->ctx) FAIL("ibv_open_device: %s", strerror(errno));
  e->pd = ibv_alloc_pd(e->ctx);
  int cqe = (g_depth * g_nqps) * 2 + 16;
  e->scq = ibv_create_cq(e->ctx, cqe, NULL, NULL, 0);
  e->rcq = ibv_create_cq(e->ctx, cqe, NULL, NULL, 0);
  if (!e->pd || !e->scq || !e->rcq) FAIL("pd/cq");
  info_t me = {0};
  for (int q = 0; q < g_nqps; q++) {
    struct ibv_qp_init_attr qa = {.send_cq = e->scq, .recv_cq = e->rcq, .qp_type = IBV_QPT_RC,
                                  .cap = {.max_send_wr = (uint32_t)g_depth + 16,
                                          .max_recv_wr = (uint32_t)g_depth + 16,
                                          .max_send_sge = 1, .max_recv_sge = 1}};
    e->qp[q] = ibv_create_qp(e->pd, &qa);
    if (!e->qp[q]) FAIL("create_qp: %s", strerror(errno));
    me.qpn[q] = e->qp[q]->qp_num;
  }
  e->len = len;
  if (g_gpu) {
    if (gpu_alloc(e, len, gpu_ordinal)) return 1;
  } else {
    e->buf = aligned_alloc(4096, (len + 4095) & ~(size_t)4095);
    if (!e->buf) FAIL("out of memory for %zu bytes", len);
    memset(e->buf, 0x5a, len);
  }
  e->mr = ibv_reg_mr(e->pd, e->buf, len, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
  if (!e->mr) FAIL("reg_mr%s: %s", g_gpu ? " (GPU memory)" : "", strerror(errno));
  me.addr = (uintptr_t)e->buf;
  me.rkey = e->mr->rkey;
  ibv_query_gid(e->ctx, 1, 0, &me.gid);
  if (xfer(fd, &me, sizeof(me), 1) || xfer(fd, peer, sizeof(*peer), 0)) FAIL("exchange");
  for (int q = 0; q < g_nqps; q++) {
    struct ibv_qp_attr a = {.qp_state = IBV_QPS_INIT, .port_num = 1,
                            .qp_access_flags = IBV_ACCESS_REMOTE_WRITE};
    if (ibv_modify_qp(e->qp[q], &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
                                        IBV_QP_ACCESS_FLAGS))
      FAIL("INIT");
    memset(&a, 0, sizeof(a));
    a.qp_state = IBV_QPS_RTR;
    a.path_mtu = IBV_MTU_4096;
    a.dest_qp_num = peer->qpn[q];
    a.max_dest_rd_atomic = 1;
    a.min_rnr_timer = 12;
    a.ah_attr.is_global = 1;
    a.ah_attr.grh.dgid = peer->gid;
    a.ah_attr.port_num = 1;
    if (ibv_modify_qp(e->qp[q], &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU |
                                        IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                                        IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER))
      FAIL("RTR");
    memset(&a, 0, sizeof(a));
    a.qp_state = IBV_QPS_RTS;
    a.timeout = 18;
    a.retry_cnt = 7;
    a.rnr_retry = 7;
    a.max_rd_atomic = 1;
    if (ibv_modify_qp(e->qp[q], &a, IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
                                        IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN |
                                        IBV_QP_MAX_QP_RD_ATOMIC))
      FAIL("RTS");
  }
  return 0;
}

static void teardown(end_t *e)
{
  for (int q = 0; q < g_nqps; q++) ibv_destroy_qp(e->qp[q]);
  ibv_dereg_mr(e->mr);
  ibv_destroy_cq(e->scq);
  ibv_destroy_cq(e->rcq);
  ibv_dealloc_pd(e->pd);
  ibv_close_device(e->ctx);
  if (g_gpu)
    strand_cuda()->memFree(e->gpu);
  else
    free(e->buf);
}

static int post_write(end_t *e, int q, const info_t *p, size_t len, int imm, uint64_t id)
{
  struct ibv_sge sge = {.addr = (uintptr_t)e->buf, .length = (uint32_t)len, .lkey = e->mr->lkey};
  struct ibv_send_wr wr = {.wr_id = id, .sg_list = &sge, .num_sge = 1,
                           .opcode = imm ? IBV_WR_RDMA_WRITE_WITH_IMM : IBV_WR_RDMA_WRITE,
                           .send_flags = IBV_SEND_SIGNALED, .imm_data = htonl(7)};
  wr.wr.rdma.remote_addr = p->addr;
  wr.wr.rdma.rkey = p->rkey;
  struct ibv_send_wr *bad;
  return ibv_post_send(e->qp[q], &wr, &bad);
}

static int post_recv(end_t *e)
{
  struct ibv_recv_wr wr = {.wr_id = 1, .num_sge = 0}, *bad;
  return ibv_post_recv(e->qp[0], &wr, &bad);
}

/* Polls one completion (its wr_id into *id when id is set); -1 on error or after 30 s. */
static int wait_one_id(struct ibv_cq *cq, uint64_t *id)
{
  struct ibv_wc wc;
  double end = now_s() + 30;
  for (;;) {
    int n = ibv_poll_cq(cq, 1, &wc);
    if (n == 1) {
      if (wc.status != IBV_WC_SUCCESS) {
        fprintf(stderr, "sv_bench: completion error %s\n", ibv_wc_status_str(wc.status));
        return -1;
      }
      if (id) *id = wc.wr_id;
      return 0;
    }
    if (n < 0 || now_s() > end) {
      fprintf(stderr, "sv_bench: no completion within 30 s\n");
      return -1;
    }
  }
}

static int wait_one(struct ibv_cq *cq) { return wait_one_id(cq, NULL); }

/* One ping or pong (on QP 0): the optional plain write, then (posted right behind it) the 8-byte
 * write-with-imm; both signaled. */
static int ping(end_t *e, const info_t *p, uint64_t id)
{
  if (g_prewrite && post_write(e, 0, p, (size_t)g_prewrite, 0, id)) return -1;
  return post_write(e, 0, p, 8, 1, id);
}

/* The send completions of one ping. */
static int ping_done(end_t *e)
{
  if (g_prewrite && wait_one(e->scq)) return -1;
  return wait_one(e->scq);
}

/* `iters` writes of sz bytes, g_depth in flight on every QP (a completed write is replaced on its
 * own QP); the seconds it took, or a negative value on failure. */
static double write_loop(end_t *e, const info_t *peer, size_t sz, size_t iters)
{
  size_t posted = 0, done = 0;
  int inflight[MAX_QPS] = {0};
  double t0 = now_s();
  while (done < iters) {
    for (int q = 0; q < g_nqps; q++) {
      while (posted < iters && inflight[q] < g_depth) {
        if (post_write(e, q, peer, sz, 0, (uint64_t)q)) return -1;
        posted++;
        inflight[q]++;
      }
    }
    uint64_t q = 0;
    if (wait_one_id(e->scq, &q) || q >= (uint64_t)g_nqps) return -1;
    inflight[q]--;
    done++;
  }
  return now_s() - t0;
}

/* One bandwidth round, sent by the initiator: the size and count, or sz 0 = rounds are over. */
typedef struct {
  uint64_t sz, iters;
} round_t;

/* The target: in --bidir mode writes back in every round; answers every ping (a WRITE_WITH_IMM)
 * with a pong. */
static int target(int fd, size_t maxsz, int lat_iters)
{
  end_t e = {0};
  info_t peer;
  if (setup(&e, maxsz, fd, &peer, 1)) return 1;
  for (int i = 0; i < g_depth; i++)
    if (post_recv(&e)) FAIL("post_recv");
  char go = 'r';
  if (xfer(fd, &go, 1, 1)) FAIL("sync");
  for (;;) {
    round_t rd;
    if (xfer(fd, &rd, sizeof(rd), 0)) FAIL("round");
    if (rd.sz == 0) break;
    double dt = 0;
    if (g_bidir && (dt = write_loop(&e, &peer, rd.sz, rd.iters)) < 0)
      FAIL("write of %llu bytes", (unsigned long long)rd.sz);
    if (xfer(fd, &dt, sizeof(dt), 1)) FAIL("round result");
  }
  for (int i = 0; i < lat_iters; i++) {
    if (wait_one(e.rcq) || post_recv(&e) || ping(&e, &peer, 2) || ping_done(&e))
      FAIL("pong %d", i);
  }
  if (xfer(fd, &go, 1, 0)) FAIL("final sync");
  teardown(&e);
  return 0;
}

static int cmp_double(const void *a, const void *b)
{
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

static int initiator(int fd, size_t minsz, size_t maxsz, int lat_iters, int csv)
{
  end_t e = {0};
  info_t peer;
  if (setup(&e, maxsz, fd, &peer, 0)) return 1;
  for (int i = 0; i < g_depth; i++)
    if (post_recv(&e)) FAIL("post_recv");
  char go = 'g';
  if (xfer(fd, &go, 1, 0)) FAIL("sync");
  const char *mem = g_gpu ? "GPU memory" : "host memory";
  if (csv)
    printf("test,size_bytes,iters,depth,seconds,GBps,qps,memory,peer_GBps\n");
  else
    printf("# sv_bench: RC RDMA WRITE bandwidth over softverbs, %s, depth %d per QP, %d QP%s%s\n"
           "%12s %8s %10s%s\n",
           mem, g_depth, g_nqps, g_nqps > 1 ? "s" : "",
           g_bidir ? ", both directions at once (GB/s per direction)" : "", "bytes", "iters",
           "GB/s", g_bidir ? "  peer GB/s" : "");
  for (size_t sz = minsz; sz <= maxsz; sz *= 2) {
    /* about 256 MiB or 4000 writes per size, whichever is fewer, at least 2x what is in flight */
    size_t iters = (256u << 20) / sz;
    size_t least = (size_t)g_depth * (size_t)g_nqps * 2;
    if (iters > 4000) iters = 4000;
    if (iters < least) iters = least;
    round_t rd = {.sz = sz, .iters = iters};
    if (xfer(fd, &rd, sizeof(rd), 1)) FAIL("round");
    double dt = write_loop(&e, &peer, sz, iters), peer_dt = 0;
    if (dt < 0) FAIL("write of %zu bytes", sz);
    if (xfer(fd, &peer_dt, sizeof(peer_dt), 0)) FAIL("round result");
    double gbps = (double)sz * (double)iters / dt / 1e9;
    double peer_gbps = peer_dt > 0 ? (double)sz * (double)iters / peer_dt / 1e9 : 0;
    if (csv)
      printf("%s,%zu,%zu,%d,%.6f,%.4f,%d,%s,%.4f\n", g_bidir ? "write_bw_bidir" : "write_bw", sz,
             iters, g_depth, dt, gbps, g_nqps, g_gpu ? "gpu" : "host", peer_gbps);
    else if (g_bidir)
      printf("%12zu %8zu %10.3f %11.3f\n", sz, iters, gbps, peer_gbps);
    else
      printf("%12zu %8zu %10.3f\n", sz, iters, gbps);
    fflush(stdout);
    if (sz > maxsz / 2) break;
  }
  round_t end = {0};
  if (xfer(fd, &end, sizeof(end), 1)) FAIL("sync");
  double *lat = calloc((size_t)lat_iters, sizeof(double));
  if (!lat) FAIL("calloc");
  for (int i = 0; i < lat_iters; i++) {
    double t0 = now_s();
    if (ping(&e, &peer, 3) || wait_one(e.rcq) || post_recv(&e) || ping_done(&e))
      FAIL("ping %d", i);
    lat[i] = (now_s() - t0) * 1e6 / 2;
  }
  qsort(lat, (size_t)lat_iters, sizeof(double), cmp_double);
  double sum = 0;
  for (int i = 0; i < lat_iters; i++) sum += lat[i];
  double p50 = lat[lat_iters / 2], p99 = lat[(lat_iters * 99) / 100];
  if (csv)
    printf("lat_write_imm,8,%d,1,%.3f,%.3f,%.3f\n", lat_iters, sum / lat_iters, p50, p99);
  else
    printf("# 8-byte WRITE_WITH_IMM ping-pong, one-way latency (half the round trip), %d iters\n"
           "avg %.2f us  p50 %.2f us  p99 %.2f us\n",
           lat_iters, sum / lat_iters, p50, p99);
  free(lat);
  if (xfer(fd, &go, 1, 1)) FAIL("final sync");
  teardown(&e);
  return 0;
}

int main(int argc, char **argv)
{
  size_t minsz = 8, maxsz = 64u << 20;
  int lat_iters = 1000, csv = 0;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--min") && i + 1 < argc) minsz = parse_size(argv[++i]);
    else if (!strcmp(argv[i], "--max") && i + 1 < argc) maxsz = parse_size(argv[++i]);
    else if (!strcmp(argv[i], "--depth") && i + 1 < argc) g_depth = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--lat-iters") && i + 1 < argc) lat_iters = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--lat-prewrite") && i + 1 < argc) g_prewrite = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--qps") && i + 1 < argc) g_nqps = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--bidir")) g_bidir = 1;
    else if (!strcmp(argv[i], "--gpu")) g_gpu = 1;
    else if (!strcmp(argv[i], "--csv")) csv = 1;
    else {
      fprintf(stderr, "usage: sv_bench [--min BYTES] [--max BYTES] [--depth N] [--lat-iters N] "
                      "[--lat-prewrite BYTES] [--qps N] [--bidir] [--gpu] [--csv]\n");
      return 2;
    }
  }
  if (minsz < 1 || maxsz < minsz || maxsz > (1u << 30) || g_depth < 1 || g_depth > 1024 ||
      lat_iters < 1 || g_prewrite < 0 || (size_t)g_prewrite > maxsz || g_nqps < 1 ||
      g_nqps > MAX_QPS) {
    fprintf(stderr, "sv_bench: bad arguments (1 <= min <= max <= 1G, 1 <= depth <= 1024, "
                    "1 <= qps <= %d)\n", MAX_QPS);
    return 2;
  }
  int sv[2];
  if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) != 0) FAIL("socketpair");
  fflush(NULL);
  pid_t pid = fork();
  if (pid < 0) FAIL("fork");
  if (pid == 0) {
    close(sv[0]);
    _exit(target(sv[1], maxsz, lat_iters));
  }
  close(sv[1]);
  int rc = initiator(sv[0], minsz, maxsz, lat_iters, csv);
  close(sv[0]);
  int st = 0;
  waitpid(pid, &st, 0);
  return rc || !WIFEXITED(st) || WEXITSTATUS(st);
}
