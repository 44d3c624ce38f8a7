/* One process over softverbs: device list and queries (port, GID as RoCE v2 ::ffff:IPv4, GID
 * table), PD/MR rules (access-flag checks, bounds, distinct keys, dma-buf refused, PD in use),
 * the RC state machine with its attribute masks (a wrong mask is EINVAL, like a real device),
 * posting in the wrong state, local key errors as completions, and a loopback QP pair inside one
 * context, and which refusals are reported as the environment's (STRAND_ENV_REFUSALS). With
 * argument "multi" (SOFTVERBS_NDEVS=2 SOFTVERBS_NPORTS=2): two devices, two ports.
 * With "badenv" (an invalid SOFTVERBS_* value in the environment): no device at all. */
#include <arpa/inet.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sv_test.h"

static int check_device(struct ibv_context *ctx, int nports)
{
  struct ibv_device_attr da;
  CHECK(ibv_query_device(ctx, &da) == 0, "query_device");
  CHECK(da.phys_port_cnt == nports, "phys_port_cnt %d, want %d", da.phys_port_cnt, nports);
  CHECK(da.max_qp_wr > 0 && da.max_sge >= 4 && da.max_cqe > 0, "device limits");
  CHECK(da.atomic_cap == IBV_ATOMIC_HCA && da.max_qp_rd_atom > 0,
        "remote atomics, atomic among the device's own operations (atomic_cap %d)", da.atomic_cap);
  struct ibv_device_attr_ex dx;
  CHECK(ibv_query_device_ex(ctx, NULL, &dx) == 0 && dx.orig_attr.phys_port_cnt == nports,
        "query_device_ex falls back to query_device");
  for (int p = 1; p <= nports; p++) {
    struct ibv_port_attr pa;
    CHECK(ibv_query_port(ctx, (uint8_t)p, &pa) == 0, "query_port %d", p);
    CHECK(pa.state == IBV_PORT_ACTIVE, "port %d state %d", p, pa.state);
    CHECK(pa.link_layer == IBV_LINK_LAYER_ETHERNET, "RoCE: link layer Ethernet");
    CHECK(pa.active_width == 2 && pa.active_speed == 32, "100 Gb/s = 4x EDR (width %d speed %d)",
          pa.active_width, pa.active_speed);
    CHECK(pa.gid_tbl_len >= 1 && pa.active_mtu == IBV_MTU_4096, "gid table and mtu");
    union ibv_gid gid;
    CHECK(ibv_query_gid(ctx, (uint8_t)p, 0, &gid) == 0, "query_gid");
    static const uint8_t v4[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
    CHECK(memcmp(gid.raw, v4, 12) == 0, "GID 0 is IPv4-mapped");
    struct ibv_gid_entry ge;
    CHECK(ibv_query_gid_ex(ctx, (uint32_t)p, 0, &ge, 0) == 0, "query_gid_ex");
    CHECK(ge.gid_type == IBV_GID_TYPE_ROCE_V2 && memcmp(&ge.gid, &gid, 16) == 0,
          "gid type RoCE v2 (%u)", ge.gid_type);
    CHECK(ibv_query_gid_ex(ctx, (uint32_t)p, 5, &ge, 0) == ENODATA, "no GID at index 5");
  }
  struct ibv_port_attr pa;
  CHECK(ibv_query_port(ctx, (uint8_t)(nports + 1), &pa) == EINVAL, "port %d does not exist",
        nports + 1);
  struct ibv_gid_entry tbl[8];
  CHECK(ibv_query_gid_table(ctx, tbl, 8, 0) == nports, "gid table: one entry per port");
  return 0;
}

static int check_mr(svt_end_t *e)
{
  static uint8_t buf[8192];
  struct ibv_mr *a = ibv_reg_mr(e->pd, buf, 4096, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
  struct ibv_mr *b = ibv_reg_mr(e->pd, buf + 4096, 4096, IBV_ACCESS_LOCAL_WRITE);
  CHECK(a && b, "reg_mr");
  CHECK(a->lkey && a->rkey && a->lkey != b->lkey && a->rkey != b->rkey, "distinct keys");
  CHECK(a->addr == buf && a->length == 4096, "addr/length");
  errno = 0;
  CHECK(!ibv_reg_mr(e->pd, buf, 4096, IBV_ACCESS_REMOTE_WRITE) && errno == EINVAL,
        "remote write needs local write");
  errno = 0;
  CHECK(!ibv_reg_mr(e->pd, buf, 4096, IBV_ACCESS_REMOTE_ATOMIC) && errno == EINVAL,
        "remote atomic needs local write");
  struct ibv_mr *c = ibv_reg_mr(e->pd, buf, 4096, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_ATOMIC);
  CHECK(c, "remote atomic access is accepted: %s", strerror(errno));
  CHECK(ibv_dereg_mr(c) == 0, "dereg");
  errno = 0;
  CHECK(!ibv_reg_mr(e->pd, buf, 0, IBV_ACCESS_LOCAL_WRITE) && errno == EINVAL, "zero length");
  errno = 0;
  CHECK(!ibv_reg_mr(e->pd, buf, 4096, 1 << 30) && errno == EINVAL, "unknown access bit");
  /* dma-buf regions need CUDA (sv_gpu.c). Without a usable driver (CI) both the real call and
   * the support probe plugins make at init (fd -1, NCCL-style: EOPNOTSUPP = unsupported) fail
   * with EOPNOTSUPP; with one, a file that is no dma-buf is EBADF.
   * The refusal of a real call is reported through STRAND_ENV_REFUSALS; the probe's is not. */
  char refusals[] = "/tmp/sv-verbs-refusals-XXXXXX";
  int rfd = mkstemp(refusals);
  CHECK(rfd >= 0, "mkstemp");
  setenv("STRAND_ENV_REFUSALS", refusals, 1);
  errno = 0;
  CHECK(!ibv_reg_dmabuf_mr(e->pd, 0, 0, 0, -1, 0), "the dma-buf probe (fd -1) fails");
  int probe_err = errno;
  bool cuda = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD) != NULL;
  CHECK(probe_err == EOPNOTSUPP || (cuda && probe_err == EBADF),
        "the dma-buf probe says %s, not unsupported, without CUDA", strerror(probe_err));
  CHECK(lseek(rfd, 0, SEEK_END) == 0, "the probe (fd -1) was reported as a refusal");
  errno = 0;
  CHECK(!ibv_reg_dmabuf_mr(e->pd, 0, 4096, 0, 3, IBV_ACCESS_LOCAL_WRITE) &&
            (errno == EOPNOTSUPP || (cuda && errno == EBADF)),
        "dma-buf registration is refused cleanly");
  if (errno == EOPNOTSUPP) {
    char line[256] = {0};
    CHECK(pread(rfd, line, sizeof line - 1, 0) > 0 && strstr(line, "ibv_reg_dmabuf_mr refused"),
          "the refused dma-buf registration is reported in STRAND_ENV_REFUSALS ('%s')", line);
  }
  unsetenv("STRAND_ENV_REFUSALS");
  close(rfd);
  unlink(refusals);
  CHECK(ibv_dealloc_pd(e->pd) == EBUSY, "a PD with regions is busy");
  CHECK(ibv_dereg_mr(a) == 0 && ibv_dereg_mr(b) == 0, "dereg");
  return 0;
}

#define M_INIT (IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS)
#define M_RTR (IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |      \
               IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER)
#define M_RTS (IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |               \
               IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC)

static int check_state_machine(svt_end_t *e)
{
  struct ibv_qp *qp = e->qp;
  struct ibv_qp_attr a;
  memset(&a, 0, sizeof(a));
  a.qp_state = IBV_QPS_RTR;
  CHECK(ibv_modify_qp(qp, &a, M_RTR) == EINVAL, "RESET -> RTR does not exist");
  a.qp_state = IBV_QPS_INIT;
  a.port_num = 1;
  a.qp_access_flags = IBV_ACCESS_REMOTE_WRITE;
  CHECK(ibv_modify_qp(qp, &a, M_INIT & ~IBV_QP_PORT) == EINVAL, "INIT needs the port");
  CHECK(ibv_modify_qp(qp, &a, M_INIT | IBV_QP_TIMEOUT) == EINVAL, "INIT takes no timeout");
  a.port_num = 9;
  CHECK(ibv_modify_qp(qp, &a, M_INIT) == EINVAL, "port 9 does not exist");
  a.port_num = 1;
  CHECK(ibv_modify_qp(qp, &a, M_INIT) == 0, "RESET -> INIT");
  /* posting receives is allowed from INIT, sends are not */
  static uint8_t buf[256];
  struct ibv_mr *mr = ibv_reg_mr(e->pd, buf, sizeof(buf), IBV_ACCESS_LOCAL_WRITE);
  CHECK(mr, "reg_mr");
  CHECK(svt_post_rdma(qp, IBV_WR_SEND, 1, buf, 8, mr->lkey, 0, 0, 0, 0) == EINVAL,
        "post_send in INIT");
  CHECK(svt_post_recv(qp, 1, buf, 8, mr->lkey) == 0, "post_recv in INIT");
  memset(&a, 0, sizeof(a));
  a.qp_state = IBV_QPS_RTR;
  a.path_mtu = IBV_MTU_1024;
  a.dest_qp_num = qp->qp_num;
  a.max_dest_rd_atomic = 1;
  a.min_rnr_timer = 12;
  a.ah_attr.port_num = 1;
  CHECK(ibv_modify_qp(qp, &a, M_RTR & ~IBV_QP_MIN_RNR_TIMER) == EINVAL, "RTR needs min_rnr_timer");
  CHECK(ibv_modify_qp(qp, &a, M_RTR) == EINVAL, "RoCE needs a GRH (is_global)");
  a.ah_attr.is_global = 1;
  ibv_query_gid(e->ctx, 1, 0, &a.ah_attr.grh.dgid);
  CHECK(ibv_modify_qp(qp, &a, M_RTR | IBV_QP_SQ_PSN) == EINVAL, "RTR takes no sq_psn");
  CHECK(ibv_modify_qp(qp, &a, M_RTR) == 0, "INIT -> RTR");
  memset(&a, 0, sizeof(a));
  a.qp_state = IBV_QPS_RTS;
  a.timeout = 14;
  a.retry_cnt = 7;
  a.rnr_retry = 7;
  a.max_rd_atomic = 1;
  CHECK(ibv_modify_qp(qp, &a, M_RTS & ~IBV_QP_SQ_PSN) == EINVAL, "RTS needs sq_psn");
  a.retry_cnt = 8;
  CHECK(ibv_modify_qp(qp, &a, M_RTS) == EINVAL, "retry_cnt 8 is out of range");
  a.retry_cnt = 7;
  CHECK(ibv_modify_qp(qp, &a, M_RTS) == 0, "RTR -> RTS");
  struct ibv_qp_attr q;
  struct ibv_qp_init_attr qi;
  CHECK(ibv_query_qp(qp, &q, IBV_QP_STATE | IBV_QP_TIMEOUT, &qi) == 0 && q.qp_state == IBV_QPS_RTS &&
            q.timeout == 14 && q.dest_qp_num == qp->qp_num,
        "query_qp reports what was set");
  /* attribute-only modify in RTS */
  a.min_rnr_timer = 3;
  CHECK(ibv_modify_qp(qp, &a, IBV_QP_MIN_RNR_TIMER) == 0, "RTS -> RTS min_rnr_timer");
  CHECK(ibv_modify_qp(qp, &a, IBV_QP_TIMEOUT) == EINVAL, "timeout only changes on RTR -> RTS");
  /* a bad lkey is a completion error, not a post error; the QP then errors and flushes */
  CHECK(svt_post_rdma(qp, IBV_WR_SEND, 7, buf, 8, mr->lkey + 0x100000, 0, 0, 0,
                      IBV_SEND_SIGNALED) == 0, "post with a bad lkey");
  struct ibv_wc wc;
  for (int got = 0; got < 2;) {
    CHECK(svt_poll(e->cq, &wc, 5000) == 1, "completions after a bad lkey");
    if (wc.wr_id == 7) {
      CHECK(wc.status == IBV_WC_LOC_PROT_ERR, "bad lkey: %s", ibv_wc_status_str(wc.status));
    } else {
      CHECK(wc.wr_id == 1 && wc.status == IBV_WC_WR_FLUSH_ERR && wc.opcode == IBV_WC_RECV,
            "the posted receive is flushed: wr %llu %s", (unsigned long long)wc.wr_id,
            ibv_wc_status_str(wc.status));
    }
    got++;
  }
  CHECK(ibv_query_qp(qp, &q, IBV_QP_STATE, &qi) == 0 && q.qp_state == IBV_QPS_ERR, "QP in ERR");
  memset(&a, 0, sizeof(a));
  a.qp_state = IBV_QPS_RTS;
  CHECK(ibv_modify_qp(qp, &a, IBV_QP_STATE) == EINVAL, "ERR leaves only to RESET");
  a.qp_state = IBV_QPS_RESET;
  CHECK(ibv_modify_qp(qp, &a, IBV_QP_STATE) == 0, "ERR -> RESET");
  CHECK(svt_post_recv(qp, 2, buf, 8, mr->lkey) == EINVAL, "post_recv in RESET");
  CHECK(ibv_dereg_mr(mr) == 0, "dereg");
  return 0;
}

/* Two QPs of one context connected to each other (the progress thread serves both ends). */
static int check_loopback(svt_end_t *e)
{
  svt_end_t b = *e;
  b.qp = NULL;
  if (svt_create_qp(&b, 16, 0)) return 1;
  svt_info_t ia, ib;
  svt_local_info(e, &ia);
  svt_local_info(&b, &ib);
  svt_qp_params_t p = SVT_DEFAULT_PARAMS;
  if (svt_connect(e, &ib, &p) || svt_connect(&b, &ia, &p)) return 1;
  static uint8_t src[4096], dst[4096];
  for (int i = 0; i < 4096; i++) src[i] = (uint8_t)(i * 13);
  struct ibv_mr *ms = ibv_reg_mr(e->pd, src, sizeof(src), IBV_ACCESS_LOCAL_WRITE);
  struct ibv_mr *md = ibv_reg_mr(e->pd, dst, sizeof(dst),
                                 IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
  CHECK(ms && md, "reg");
  CHECK(svt_post_rdma(e->qp, IBV_WR_RDMA_WRITE, 11, src, 4096, ms->lkey, (uintptr_t)dst, md->rkey,
                      0, IBV_SEND_SIGNALED) == 0, "post write");
  struct ibv_wc wc;
  CHECK(svt_poll(e->cq, &wc, 5000) == 1 && wc.wr_id == 11 && wc.status == IBV_WC_SUCCESS,
        "loopback write: %s", ibv_wc_status_str(wc.status));
  CHECK(memcmp(src, dst, sizeof(src)) == 0, "loopback data");
  /* an atomic takes exactly one local SGE of 8 bytes: anything else is refused at post time */
  struct ibv_sge sg[2] = {{(uintptr_t)src, 8, ms->lkey}, {(uintptr_t)src + 8, 8, ms->lkey}};
  struct ibv_send_wr wr = {.wr_id = 12, .sg_list = sg, .num_sge = 2,
                           .opcode = IBV_WR_ATOMIC_FETCH_AND_ADD, .send_flags = IBV_SEND_SIGNALED};
  wr.wr.atomic.remote_addr = (uintptr_t)dst;
  wr.wr.atomic.rkey = md->rkey;
  struct ibv_send_wr *bad = NULL;
  CHECK(ibv_post_send(e->qp, &wr, &bad) == EINVAL && bad == &wr, "an atomic with two SGEs");
  wr.num_sge = 1;
  sg[0].length = 4;
  CHECK(ibv_post_send(e->qp, &wr, &bad) == EINVAL, "an atomic with a 4-byte SGE");
  ibv_destroy_qp(b.qp);
  ibv_dereg_mr(ms);
  ibv_dereg_mr(md);
  return 0;
}

/* More QPs than one listener numbers (256): the context opens another listener, QPNs stay unique
 * and a QP of the second block talks to one of the first. */
static int check_many_qps(svt_end_t *e)
{
  enum { N = 300 };
  static struct ibv_qp *qps[N];
  struct ibv_qp_init_attr a = {.send_cq = e->cq, .recv_cq = e->cq, .qp_type = IBV_QPT_RC,
                               .cap = {.max_send_wr = 2, .max_recv_wr = 2, .max_send_sge = 1,
                                       .max_recv_sge = 1}};
  for (int i = 0; i < N; i++) {
    qps[i] = ibv_create_qp(e->pd, &a);
    CHECK(qps[i], "QP %d: %s", i, strerror(errno));
    for (int j = 0; j < i; j++) CHECK(qps[j]->qp_num != qps[i]->qp_num, "QPN reused");
  }
  svt_end_t x = *e, y = *e;
  x.qp = qps[0];
  y.qp = qps[N - 1];
  svt_info_t ix, iy;
  svt_local_info(&x, &ix);
  svt_local_info(&y, &iy);
  svt_qp_params_t p = SVT_DEFAULT_PARAMS;
  if (svt_connect(&x, &iy, &p) || svt_connect(&y, &ix, &p)) return 1;
  static uint64_t src = 0x1122334455667788ull, dst;
  struct ibv_mr *ms = ibv_reg_mr(e->pd, &src, 8, IBV_ACCESS_LOCAL_WRITE);
  struct ibv_mr *md = ibv_reg_mr(e->pd, &dst, 8, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
  CHECK(ms && md, "reg");
  CHECK(svt_post_rdma(y.qp, IBV_WR_RDMA_WRITE, 21, &src, 8, ms->lkey, (uintptr_t)&dst, md->rkey, 0,
                      IBV_SEND_SIGNALED) == 0, "post");
  struct ibv_wc wc;
  CHECK(svt_poll(e->cq, &wc, 5000) == 1 && wc.wr_id == 21 && wc.status == IBV_WC_SUCCESS,
        "write from QP %#x to QP %#x: %s", y.qp->qp_num, x.qp->qp_num, ibv_wc_status_str(wc.status));
  CHECK(dst == src, "data");
  for (int i = 0; i < N; i++) ibv_destroy_qp(qps[i]);
  ibv_dereg_mr(ms);
  ibv_dereg_mr(md);
  return 0;
}

/* What softverbs refuses because it does not emulate it (not because the caller is wrong) is
 * reported to the file STRAND_ENV_REFUSALS names, one line each, so that strand-conform judges
 * the failure it causes as the environment's (ENV); what it does emulate, or what is the caller's
 * mistake, is not reported. */
static int check_refusals(svt_end_t *e)
{
  char path[] = "/tmp/sv-verbs-refusals.XXXXXX";
  int fd = mkstemp(path);
  CHECK(fd >= 0, "mkstemp");
  setenv("STRAND_ENV_REFUSALS", path, 1);
  static uint8_t buf[4096];
  struct ibv_mr *mr = ibv_reg_mr(e->pd, buf, sizeof(buf),
                                 IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_ATOMIC);
  CHECK(mr, "remote atomic access: no refusal");
  CHECK(!ibv_reg_mr(e->pd, buf, sizeof(buf), IBV_ACCESS_REMOTE_WRITE), "the caller's mistake");
  CHECK(!ibv_reg_mr_iova(e->pd, buf, sizeof(buf), 0x1000, IBV_ACCESS_LOCAL_WRITE), "iova");
  struct ibv_srq_init_attr sa = {.attr = {.max_wr = 4, .max_sge = 1}};
  CHECK(!ibv_create_srq(e->pd, &sa), "srq");
  struct ibv_qp_init_attr qa = {.send_cq = e->cq, .recv_cq = e->cq, .qp_type = IBV_QPT_UD,
                                .cap = {.max_send_wr = 1, .max_recv_wr = 1, .max_send_sge = 1,
                                        .max_recv_sge = 1}};
  CHECK(!ibv_create_qp(e->pd, &qa), "a UD QP");
  struct ibv_sge sg = {(uintptr_t)buf, 8, mr->lkey};
  struct ibv_send_wr wr = {.wr_id = 1, .sg_list = &sg, .num_sge = 1,
                           .opcode = IBV_WR_SEND_WITH_INV};
  struct ibv_send_wr *bad = NULL;
  CHECK(ibv_post_send(e->qp, &wr, &bad) == EINVAL, "SEND_WITH_INV");
  wr.opcode = (enum ibv_wr_opcode)99;
  CHECK(ibv_post_send(e->qp, &wr, &bad) == EINVAL, "an opcode verbs does not define");
  CHECK(ibv_resize_cq(e->cq, 128) == EOPNOTSUPP, "resize_cq");
  unsetenv("STRAND_ENV_REFUSALS");
  ibv_dereg_mr(mr);
  char text[2048] = {0};
  ssize_t n = read(fd, text, sizeof(text) - 1);
  close(fd);
  unlink(path);
  CHECK(n > 0, "no refusal was reported");
  static const char *const want[] = {"ibv_reg_mr_iova", "ibv_create_srq", "QP type",
                                     "opcode 9 refused", "ibv_resize_cq"};
  int lines = 0;
  for (char *p = text; *p; p++) lines += *p == '\n';
  CHECK(lines == 5, "%d refusal lines, want 5:\n%s", lines, text);
  for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++)
    CHECK(strstr(text, want[i]), "no refusal line with \"%s\":\n%s", want[i], text);
  CHECK(!strstr(text, "atomic"), "remote atomic access was reported as refused:\n%s", text);
  return 0;
}

static int check_channel(svt_end_t *e)
{
  int fl = fcntl(e->ch->fd, F_GETFL);
  CHECK(fcntl(e->ch->fd, F_SETFL, fl | O_NONBLOCK) == 0, "nonblocking channel");
  struct ibv_cq *cq;
  void *ctx;
  errno = 0;
  CHECK(ibv_get_cq_event(e->ch, &cq, &ctx) == -1 && errno == EAGAIN,
        "no event yet on a non-blocking channel");
  CHECK(ibv_destroy_comp_channel(e->ch) == EBUSY, "a channel with CQs is busy");
  return 0;
}

int main(int argc, char **argv)
{
  if (argc > 1 && strcmp(argv[1], "badenv") == 0) {
    /* an invalid knob (the environment of the test sets one) is refused, never defaulted */
    int n = -1;
    errno = 0;
    struct ibv_device **l = ibv_get_device_list(&n);
    CHECK(!l && n == 0 && errno == EINVAL, "an invalid SOFTVERBS_* value must give no device");
    printf("ok: invalid configuration refused\n");
    return 0;
  }
  bool multi = argc > 1 && strcmp(argv[1], "multi") == 0;
  int n = 0;
  struct ibv_device **list = ibv_get_device_list(&n);
  CHECK(list && n == (multi ? 2 : 1), "%d devices", n);
  CHECK(strcmp(ibv_get_device_name(list[0]), "sv0") == 0, "first device is sv0");
  if (multi) CHECK(strcmp(ibv_get_device_name(list[1]), "sv1") == 0, "second device is sv1");
  for (int i = 0; i < n; i++) {
    struct ibv_context *ctx = ibv_open_device(list[i]);
    CHECK(ctx, "open %s", ibv_get_device_name(list[i]));
    if (check_device(ctx, multi ? 2 : 1)) return 1;
    ibv_close_device(ctx);
  }
  ibv_free_device_list(list);
  if (multi) {
    printf("ok: two devices with two ports each\n");
    return 0;
  }
  svt_end_t e;
  if (svt_open(&e, 64, true) || check_mr(&e) || check_channel(&e) || svt_create_qp(&e, 16, 0) ||
      check_state_machine(&e))
    return 1;
  ibv_destroy_qp(e.qp);
  e.qp = NULL;
  if (svt_create_qp(&e, 16, 0) || check_loopback(&e) || check_many_qps(&e) ||
      check_refusals(&e))
    return 1;
  svt_close(&e);
  printf("ok: device/port/GID queries, MR rules, QP state machine, local errors, loopback, 300 QPs, "
         "refusals reported\n");
  return 0;
}
