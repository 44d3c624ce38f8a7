/* ib-raw-bench: the raw verbs numbers strand-ib's benchmark is compared with (docs/benchmarks/
 * ib.md). Two processes on one host (fork), one RC QP each, linked against libibverbs like any
 * verbs program (run it over softverbs with LD_LIBRARY_PATH, or on a real HCA):
 *   - latency: 8-byte RDMA write-with-immediate ping-pong, half round trip (p50 over the run);
 *   - bandwidth: RDMA writes of SIZE bytes, DEPTH in flight, the last one with an immediate the
 *     target waits for: the device's one-sided throughput with no protocol on top.
 *   ib-raw-bench [DEVICE] [--max-bytes N] [--time S] [--cts]   (DEVICE default: the first one)
 * --cts precedes every ping-pong message with a 400-byte write, as strand-ib's clear-to-send. 
 * Not a test: it asserts nothing and is not run by meson test. */
#include <arpa/inet.h>
#include <infiniband/verbs.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define DEPTH 8

typedef struct {
  uint32_t qpn, rkey;
  uint64_t addr;
  uint16_t lid;
  uint8_t gid[16];
} info_t;

static double now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static void die(const char *what) {
  perror(what);
  exit(1);
}

static struct ibv_wc poll1(struct ibv_cq *cq) {
  struct ibv_wc wc;
  int n;
  while ((n = ibv_poll_cq(cq, 1, &wc)) == 0) {
  }
  if (n < 0 || wc.status != IBV_WC_SUCCESS) {
    fprintf(stderr, "completion error: %s\n", n < 0 ? "poll" : ibv_wc_status_str(wc.status));
    exit(1);
  }
  return wc;
}

static void post_recv(struct ibv_qp *qp) {
  struct ibv_recv_wr wr = {0}, *bad;
  if (ibv_post_recv(qp, &wr, &bad)) die("ibv_post_recv");
}

static void post_write(struct ibv_qp *qp, void *buf, uint32_t len, uint32_t lkey,
                       const info_t *peer, int imm, int signaled) {
  struct ibv_sge sge = {(uintptr_t)buf, len, lkey};
  struct ibv_send_wr wr = {0}, *bad;
  wr.sg_list = &sge;
  wr.num_sge = len ? 1 : 0;
  wr.opcode = imm ? IBV_WR_RDMA_WRITE_WITH_IMM : IBV_WR_RDMA_WRITE;
  wr.send_flags = signaled ? IBV_SEND_SIGNALED : 0;
  wr.imm_data = htonl((uint32_t)imm);
  wr.wr.rdma.remote_addr = peer->addr;
  wr.wr.rdma.rkey = peer->rkey;
  if (ibv_post_send(qp, &wr, &bad)) die("ibv_post_send");
}

static int cmp(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

/* --cts: each ping-pong message is preceded by a 400-byte RDMA write in the same direction, as
 * strand-ib's clear-to-send entry is: the raw cost of the protocol's extra operation. */
static int with_cts;
#define CTS_BYTES 400

static void run(int rank, int sock, const char *devname, size_t max_bytes, double secs) {
  int n = 0;
  struct ibv_device **list = ibv_get_device_list(&n);
  struct ibv_device *dev = NULL;
  for (int i = 0; i < n && !dev; i++)
    if (!devname || !strcmp(ibv_get_device_name(list[i]), devname)) dev = list[i];
  if (!dev) die("no such verbs device");
  struct ibv_context *ctx = ibv_open_device(dev);
  struct ibv_pd *pd = ctx ? ibv_alloc_pd(ctx) : NULL;
  struct ibv_cq *cq = pd ? ibv_create_cq(ctx, 256, NULL, NULL, 0) : NULL;
  if (max_bytes < 4096) max_bytes = 4096; /* room for the --cts write */
  char *buf = malloc(max_bytes);
  struct ibv_mr *mr = cq && buf ? ibv_reg_mr(pd, buf, max_bytes, IBV_ACCESS_LOCAL_WRITE |
                                                                   IBV_ACCESS_REMOTE_WRITE)
                                : NULL;
  if (!mr) die("verbs set-up");
  memset(buf, rank, max_bytes);
  struct ibv_qp_init_attr ia = {.send_cq = cq, .recv_cq = cq, .qp_type = IBV_QPT_RC,
                                .cap = {.max_send_wr = 64, .max_recv_wr = 64, .max_send_sge = 1,
                                        .max_recv_sge = 1}};
  struct ibv_qp *qp = ibv_create_qp(pd, &ia);
  if (!qp) die("ibv_create_qp");
  struct ibv_port_attr pa;
  ibv_query_port(ctx, 1, &pa);
  info_t me = {qp->qp_num, mr->rkey, (uintptr_t)buf, pa.lid, {0}}, peer;
  union ibv_gid gid;
  int gidx = 0;
  for (; gidx < pa.gid_tbl_len; gidx++) {
    static const uint8_t zero[16];
    if (ibv_query_gid(ctx, 1, gidx, &gid) == 0 && memcmp(gid.raw, zero, 16)) break;
  }
  memcpy(me.gid, gid.raw, 16);
  if (write(sock, &me, sizeof me) != sizeof me || read(sock, &peer, sizeof peer) != sizeof peer)
    die("exchange");
  struct ibv_qp_attr a = {.qp_state = IBV_QPS_INIT, .port_num = 1,
                          .qp_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_LOCAL_WRITE};
  if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS))
    die("INIT");
  memset(&a, 0, sizeof a);
  a.qp_state = IBV_QPS_RTR;
  a.path_mtu = pa.active_mtu;
  a.dest_qp_num = peer.qpn;
  a.max_dest_rd_atomic = 1;
  a.min_rnr_timer = 12;
  a.ah_attr.dlid = peer.lid;
  a.ah_attr.port_num = 1;
  a.ah_attr.is_global = 1;
  a.ah_attr.grh.sgid_index = (uint8_t)gidx;
  a.ah_attr.grh.hop_limit = 255;
  memcpy(a.ah_attr.grh.dgid.raw, peer.gid, 16);
  if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
                                IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER))
    die("RTR");
  memset(&a, 0, sizeof a);
  a.qp_state = IBV_QPS_RTS;
  a.timeout = 14;
  a.retry_cnt = 7;
  a.rnr_retry = 7;
  a.max_rd_atomic = 1;
  if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
                                IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC))
    die("RTS");
  for (int i = 0; i < 32; i++) post_recv(qp);
  char sync = 0;
  if (write(sock, &sync, 1) != 1 || read(sock, &sync, 1) != 1) die("sync");

  /* latency: 8-byte write-with-imm ping-pong */
  int iters = 0, cap = 200000;
  double *lat = malloc(sizeof(double) * (size_t)cap);
  double t_end = now_s() + secs;
  /* The immediate says whether this is the last round trip (2) or not (1): no other
   * synchronisation inside the timed loop. */
  for (int warm = 1; warm >= 0; warm--) {
    int stop = 0;
    for (iters = 0; iters < cap && !stop; iters++) {
      double t0 = now_s();
      if (rank == 0) {
        stop = now_s() > t_end || iters == cap - 1;
        if (with_cts) post_write(qp, buf + 64, CTS_BYTES, mr->lkey, &peer, 0, 1);
        post_write(qp, buf, 8, mr->lkey, &peer, 1 + stop, 1);
        for (int k = 0; k < 2 + with_cts; k++) poll1(cq); /* own writes + the reply */
      } else {
        struct ibv_wc wc;
        do wc = poll1(cq); while (wc.opcode != IBV_WC_RECV_RDMA_WITH_IMM);
        stop = ntohl(wc.imm_data) == 2;
        if (with_cts) post_write(qp, buf + 64, CTS_BYTES, mr->lkey, &peer, 0, 1);
        post_write(qp, buf, 8, mr->lkey, &peer, 1, 1);
        for (int k = 0; k < 1 + with_cts; k++) {
          do wc = poll1(cq); while (wc.opcode == IBV_WC_RECV_RDMA_WITH_IMM);
        }
      }
      post_recv(qp);
      lat[iters] = (now_s() - t0) / 2;
    }
    t_end = now_s() + secs;
  }
  if (rank == 0) {
    qsort(lat, (size_t)iters, sizeof(double), cmp);
    printf("# raw verbs latency: 8-byte write-with-imm ping-pong%s, half round trip\n",
           with_cts ? " after a 400-byte write (--cts)" : "");
    printf("#  size(B)  count  p50(us)  p99(us)\n %8d %6d %8.2f %8.2f\n", 8, iters,
           lat[iters / 2] * 1e6, lat[(int)(iters * 0.99)] * 1e6);
    printf("# raw verbs bandwidth: RDMA write, depth %d, last with immediate\n", DEPTH);
    printf("#      size(B)    count   GB/s\n");
  }
  /* bandwidth: rank 0 writes, rank 1 waits for the immediate of each batch */
  for (size_t size = 8; size <= max_bytes && rank >= 0; size *= 4) {
    long count = 0;
    double t0 = now_s();
    /* The last write of each batch carries 1 (go on) or 2 (last batch) as its immediate, so the
     * timed loop has no other synchronisation. */
    for (;;) {
      int stop = 0;
      if (rank == 0) {
        stop = now_s() - t0 > secs;
        for (int d = 0; d < DEPTH; d++)
          post_write(qp, buf, (uint32_t)size, mr->lkey, &peer, d == DEPTH - 1 ? 1 + stop : 0, 1);
        for (int d = 0; d < DEPTH; d++) poll1(cq);
      } else {
        struct ibv_wc wc = poll1(cq);
        stop = ntohl(wc.imm_data) == 2;
        post_recv(qp);
      }
      count += DEPTH;
      if (stop) break;
    }
    double dt = now_s() - t0;
    if (rank == 0) printf(" %12zu %8ld %6.3f\n", size, count, (double)size * count / dt / 1e9);
  }
  ibv_destroy_qp(qp);
  ibv_dereg_mr(mr);
  ibv_destroy_cq(cq);
  ibv_dealloc_pd(pd);
  ibv_close_device(ctx);
  ibv_free_device_list(list);
  free(lat);
  free(buf);
}

int main(int argc, char **argv) {
  const char *dev = NULL;
  size_t max_bytes = 64u << 20;
  double secs = 0.3;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--max-bytes") && i + 1 < argc) max_bytes = strtoull(argv[++i], NULL, 0);
    else if (!strcmp(argv[i], "--time") && i + 1 < argc) secs = atof(argv[++i]);
    else if (!strcmp(argv[i], "--cts")) with_cts = 1;
    else dev = argv[i];
  }
  int sv[2];
  if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv)) die("socketpair");
  setvbuf(stdout, NULL, _IOLBF, 0);
  pid_t pid = fork();
  if (pid == 0) {
    close(sv[0]);
    run(1, sv[1], dev, max_bytes, secs);
    _exit(0);
  }
  close(sv[1]);
  run(0, sv[0], dev, max_bytes, secs);
  int st = 0;
  waitpid(pid, &st, 0);
  return WIFEXITED(st) && WEXITSTATUS(st) == 0 ? 0 : 1;
}
