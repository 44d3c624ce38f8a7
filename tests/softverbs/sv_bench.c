/* sv_bench: raw RC verbs performance over softverbs, two processes (fork), the reference the
 * strand-ib benchmark compares against. Measures
 *   - RDMA WRITE bandwidth: writes of each size, `depth` in flight, every one signaled; a write
 *     completes only once it is applied at the target, as on a NIC;
 *   - latency: ping-pong of 8-byte RDMA WRITE_WITH_IMM each way (the target answers from its
 *     receive completion), reported as half the round trip.
 * Usage: sv_bench [--min BYTES] [--max BYTES] [--depth N] [--lat-iters N] [--lat-prewrite BYTES]
 *                 [--csv]
 * --lat-prewrite B: each ping/pong is a signaled B-byte RDMA WRITE followed by the 8-byte
 * WRITE_WITH_IMM on the same QP (the shape of a CTS or data-then-notify protocol).
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

#define FAIL(...)                                                                                  \
  do {                                                                                             \
    fprintf(stderr, "sv_bench[%d]: ", (int)getpid());                                              \
    fprintf(stderr, __VA_ARGS__);                                                                  \
    fprintf(stderr, "\n");                                                                         \
    return 1;                                                                                      \
  } while (0)

typedef struct {
  uint32_t qpn;
  union ibv_gid gid;
  uint64_t addr;
  uint32_t rkey;
} info_t;

typedef struct {
  struct ibv_context *ctx;
  struct ibv_pd *pd;
  struct ibv_cq *scq, *rcq;
  struct ibv_qp *qp;
  struct ibv_mr *mr;
  uint8_t *buf;
  size_t len;
} end_t;

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

static int setup(end_t *e, size_t len, int fd, info_t *peer, int depth)
{
  int n = 0;
  struct ibv_device **list = ibv_get_device_list(&n);
  if (!list || n < 1) FAIL("no verbs device (is LD_LIBRARY_PATH pointing at softverbs?)");
  e->ctx = ibv_open_device(list[0]);
  ibv_free_device_list(list);
  if (!e->ctx) FAIL("ibv_open_device: %s", strerror(errno));
  e->pd = ibv_alloc_pd(e->ctx);
  e->scq = ibv_create_cq(e->ctx, depth * 2 + 16, NULL, NULL, 0);
  e->rcq = ibv_create_cq(e->ctx, depth * 2 + 16, NULL, NULL, 0);
  if (!e->pd || !e->scq || !e->rcq) FAIL("pd/cq");
  struct ibv_qp_init_attr qa = {.send_cq = e->scq, .recv_cq = e->rcq, .qp_type = IBV_QPT_RC,
                                .cap = {.max_send_wr = (uint32_t)depth + 16,
                                        .max_recv_wr = (uint32_t)depth + 16, .max_send_sge = 1,
                                        .max_recv_sge = 1}};
  e->qp = ibv_create_qp(e->pd, &qa);
  if (!e->qp) FAIL("create_qp: %s", strerror(errno));
  e->len = len;
  e->buf = aligned_alloc(4096, (len + 4095) & ~(size_t)4095);
  if (!e->buf) FAIL("out of memory for %zu bytes", len);
  memset(e->buf, 0x5a, len);
  e->mr = ibv_reg_mr(e->pd, e->buf, len, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
  if (!e->mr) FAIL("reg_mr: %s", strerror(errno));
  info_t me = {.qpn = e->qp->qp_num, .addr = (uintptr_t)e->buf, .rkey = e->mr->rkey};
  ibv_query_gid(e->ctx, 1, 0, &me.gid);
  if (xfer(fd, &me, sizeof(me), 1) || xfer(fd, peer, sizeof(*peer), 0)) FAIL("exchange");
  struct ibv_qp_attr a = {.qp_state = IBV_QPS_INIT, .port_num = 1,
                          .qp_access_flags = IBV_ACCESS_REMOTE_WRITE};
  if (ibv_modify_qp(e->qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
                                   IBV_QP_ACCESS_FLAGS))
    FAIL("INIT");
  memset(&a, 0, sizeof(a));
  a.qp_state = IBV_QPS_RTR;
  a.path_mtu = IBV_MTU_4096;
  a.dest_qp_num = peer->qpn;
  a.max_dest_rd_atomic = 1;
  a.min_rnr_timer = 12;
  a.ah_attr.is_global = 1;
  a.ah_attr.grh.dgid = peer->gid;
  a.ah_attr.port_num = 1;
  if (ibv_modify_qp(e->qp, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
                                   IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC |
                                   IBV_QP_MIN_RNR_TIMER))
    FAIL("RTR");
  memset(&a, 0, sizeof(a));
  a.qp_state = IBV_QPS_RTS;
  a.timeout = 18;
  a.retry_cnt = 7;
  a.rnr_retry = 7;
  a.max_rd_atomic = 1;
  if (ibv_modify_qp(e->qp, &a, IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
                                   IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC))
    FAIL("RTS");
  return 0;
}

static int post_write(end_t *e, const info_t *p, size_t len, int imm, uint64_t id)
{
  struct ibv_sge sge = {.addr = (uintptr_t)e->buf, .length = (uint32_t)len, .lkey = e->mr->lkey};
  struct ibv_send_wr wr = {.wr_id = id, .sg_list = &sge, .num_sge = 1,
                           .opcode = imm ? IBV_WR_RDMA_WRITE_WITH_IMM : IBV_WR_RDMA_WRITE,
                           .send_flags = IBV_SEND_SIGNALED, .imm_data = htonl(7)};
  wr.wr.rdma.remote_addr = p->addr;
  wr.wr.rdma.rkey = p->rkey;
  struct ibv_send_wr *bad;
  return ibv_post_send(e->qp, &wr, &bad);
}

static int post_recv(end_t *e)
{
  struct ibv_recv_wr wr = {.wr_id = 1, .num_sge = 0}, *bad;
  return ibv_post_recv(e->qp, &wr, &bad);
}

/* Polls one completion; -1 on error or after 30 s. */
static int wait_one(struct ibv_cq *cq)
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
      return 0;
    }
    if (n < 0 || now_s() > end) {
      fprintf(stderr, "sv_bench: no completion within 30 s\n");
      return -1;
    }
  }
}

/* The target: answers every ping (a WRITE_WITH_IMM) with a pong; the bandwidth phase needs
 * nothing from it. Ends on the parent's 'q'. */
static int g_prewrite;

/* One ping or pong: the optional plain write, then (posted right behind it) the 8-byte
 * write-with-imm; both signaled. */
static int ping(end_t *e, const info_t *p, uint64_t id)
{
  if (g_prewrite && post_write(e, p, (size_t)g_prewrite, 0, id)) return -1;
  return post_write(e, p, 8, 1, id);
}

/* The send completions of one ping. */
static int ping_done(end_t *e)
{
  if (g_prewrite && wait_one(e->scq)) return -1;
  return wait_one(e->scq);
}

static int target(int fd, size_t maxsz, int depth, int lat_iters)
{
  end_t e = {0};
  info_t peer;
  if (setup(&e, maxsz, fd, &peer, depth)) return 1;
  for (int i = 0; i < depth; i++)
    if (post_recv(&e)) FAIL("post_recv");
  char go;
  if (xfer(fd, &go, 1, 1) || xfer(fd, &go, 1, 0)) FAIL("sync"); /* ready / bandwidth done */
  for (int i = 0; i < lat_iters; i++) {
    if (wait_one(e.rcq) || post_recv(&e) || ping(&e, &peer, 2) || ping_done(&e))
      FAIL("pong %d", i);
  }
  if (xfer(fd, &go, 1, 0)) FAIL("final sync");
  ibv_destroy_qp(e.qp);
  ibv_dereg_mr(e.mr);
  ibv_destroy_cq(e.scq);
  ibv_destroy_cq(e.rcq);
  ibv_dealloc_pd(e.pd);
  ibv_close_device(e.ctx);
  free(e.buf);
  return 0;
}

static int cmp_double(const void *a, const void *b)
{
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

static int initiator(int fd, size_t minsz, size_t maxsz, int depth, int lat_iters, int csv)
{
  end_t e = {0};
  info_t peer;
  if (setup(&e, maxsz, fd, &peer, depth)) return 1;
  for (int i = 0; i < depth; i++)
    if (post_recv(&e)) FAIL("post_recv");
  char go = 'g';
  if (xfer(fd, &go, 1, 0)) FAIL("sync");
  if (csv)
    printf("test,size_bytes,iters,depth,seconds,GBps\n");
  else
    printf("# sv_bench: RC RDMA WRITE bandwidth over softverbs, depth %d\n%12s %8s %10s\n", depth,
           "bytes", "iters", "GB/s");
  for (size_t sz = minsz; sz <= maxsz; sz *= 2) {
    /* about 256 MiB or 4000 writes per size, whichever is fewer, at least 2x depth */
    size_t iters = (256u << 20) / sz;
    if (iters > 4000) iters = 4000;
    if (iters < (size_t)depth * 2) iters = (size_t)depth * 2;
    double t0 = now_s();
    size_t posted = 0, done = 0;
    while (done < iters) {
      while (posted < iters && posted - done < (size_t)depth) {
        if (post_write(&e, &peer, sz, 0, posted)) FAIL("post_write");
        posted++;
      }
      if (wait_one(e.scq)) FAIL("write of %zu bytes", sz);
      done++;
    }
    double dt = now_s() - t0;
    double gbps = (double)sz * (double)iters / dt / 1e9;
    if (csv)
      printf("write_bw,%zu,%zu,%d,%.6f,%.4f\n", sz, iters, depth, dt, gbps);
    else
      printf("%12zu %8zu %10.3f\n", sz, iters, gbps);
    fflush(stdout);
    if (sz > maxsz / 2) break;
  }
  if (xfer(fd, &go, 1, 1)) FAIL("sync");
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
  ibv_destroy_qp(e.qp);
  ibv_dereg_mr(e.mr);
  ibv_destroy_cq(e.scq);
  ibv_destroy_cq(e.rcq);
  ibv_dealloc_pd(e.pd);
  ibv_close_device(e.ctx);
  free(e.buf);
  return 0;
}

int main(int argc, char **argv)
{
  size_t minsz = 8, maxsz = 64u << 20;
  int depth = 8, lat_iters = 1000, csv = 0;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--min") && i + 1 < argc) minsz = parse_size(argv[++i]);
    else if (!strcmp(argv[i], "--max") && i + 1 < argc) maxsz = parse_size(argv[++i]);
    else if (!strcmp(argv[i], "--depth") && i + 1 < argc) depth = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--lat-iters") && i + 1 < argc) lat_iters = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--lat-prewrite") && i + 1 < argc) g_prewrite = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--csv")) csv = 1;
    else {
      fprintf(stderr, "usage: sv_bench [--min BYTES] [--max BYTES] [--depth N] [--lat-iters N] "
                      "[--lat-prewrite BYTES] [--csv]\n");
      return 2;
    }
  }
  if (minsz < 1 || maxsz < minsz || maxsz > (1u << 30) || depth < 1 || depth > 1024 ||
      lat_iters < 1 || g_prewrite < 0 || (size_t)g_prewrite > maxsz) {
    fprintf(stderr, "sv_bench: bad arguments (1 <= min <= max <= 1G, 1 <= depth <= 1024)\n");
    return 2;
  }
  int sv[2];
  if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) != 0) FAIL("socketpair");
  fflush(NULL);
  pid_t pid = fork();
  if (pid < 0) FAIL("fork");
  if (pid == 0) {
    close(sv[0]);
    _exit(target(sv[1], maxsz, depth, lat_iters));
  }
  close(sv[1]);
  int rc = initiator(sv[0], minsz, maxsz, depth, lat_iters, csv);
  close(sv[0]);
  int st = 0;
  waitpid(pid, &st, 0);
  return rc || !WIFEXITED(st) || WEXITSTATUS(st);
}
