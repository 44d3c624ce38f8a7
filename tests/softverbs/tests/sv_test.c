/* Helpers of the softverbs tests (sv_test.h). */
#include "sv_test.h"

#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static uint64_t now_ms(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

int svt_open(svt_end_t *e, int cqe, bool channel)
{
  memset(e, 0, sizeof(*e));
  int n = 0;
  struct ibv_device **list = ibv_get_device_list(&n);
  CHECK(list && n >= 1,
        "no device (errno %d): is the libibverbs.so.1 that was loaded softverbs? (build the "
        "tests/softverbs/libibverbs.so.1 link: ninja, not a single target)",
        errno);
  e->ctx = ibv_open_device(list[0]);
  ibv_free_device_list(list);
  CHECK(e->ctx, "ibv_open_device: %s", strerror(errno));
  e->pd = ibv_alloc_pd(e->ctx);
  CHECK(e->pd, "ibv_alloc_pd");
  if (channel) {
    e->ch = ibv_create_comp_channel(e->ctx);
    CHECK(e->ch, "ibv_create_comp_channel");
  }
  e->cq = ibv_create_cq(e->ctx, cqe, NULL, e->ch, 0);
  CHECK(e->cq, "ibv_create_cq");
  return 0;
}

int svt_create_qp(svt_end_t *e, uint32_t max_wr, uint32_t max_inline)
{
  struct ibv_qp_init_attr a = {.send_cq = e->cq, .recv_cq = e->cq, .qp_type = IBV_QPT_RC,
                               .cap = {.max_send_wr = max_wr, .max_recv_wr = max_wr,
                                       .max_send_sge = 4, .max_recv_sge = 4,
                                       .max_inline_data = max_inline}};
  e->qp = ibv_create_qp(e->pd, &a);
  CHECK(e->qp, "ibv_create_qp: %s", strerror(errno));
  return 0;
}

void svt_close(svt_end_t *e)
{
  if (e->qp) ibv_destroy_qp(e->qp);
  if (e->cq) ibv_destroy_cq(e->cq);
  if (e->ch) ibv_destroy_comp_channel(e->ch);
  if (e->pd) ibv_dealloc_pd(e->pd);
  if (e->ctx) ibv_close_device(e->ctx);
  memset(e, 0, sizeof(*e));
}

void svt_local_info(svt_end_t *e, svt_info_t *info)
{
  memset(info, 0, sizeof(*info));
  info->qpn = e->qp->qp_num;
  ibv_query_gid(e->ctx, 1, 0, &info->gid);
}

int svt_connect(svt_end_t *e, const svt_info_t *r, const svt_qp_params_t *p)
{
  struct ibv_qp_attr a = {.qp_state = IBV_QPS_INIT, .pkey_index = 0, .port_num = 1,
                          .qp_access_flags = (unsigned)p->access};
  int rc = ibv_modify_qp(e->qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
                                        IBV_QP_ACCESS_FLAGS);
  CHECK(rc == 0, "to INIT: %d", rc);
  memset(&a, 0, sizeof(a));
  a.qp_state = IBV_QPS_RTR;
  a.path_mtu = IBV_MTU_1024;
  a.dest_qp_num = r->qpn;
  a.rq_psn = 0;
  a.max_dest_rd_atomic = 1;
  a.min_rnr_timer = p->min_rnr_timer;
  a.ah_attr.is_global = 1;
  a.ah_attr.grh.dgid = r->gid;
  a.ah_attr.grh.sgid_index = 0;
  a.ah_attr.grh.hop_limit = 1;
  a.ah_attr.port_num = 1;
  rc = ibv_modify_qp(e->qp, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
                                    IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC |
                                    IBV_QP_MIN_RNR_TIMER);
  CHECK(rc == 0, "to RTR: %d", rc);
  memset(&a, 0, sizeof(a));
  a.qp_state = IBV_QPS_RTS;
  a.timeout = p->timeout;
  a.retry_cnt = p->retry_cnt;
  a.rnr_retry = p->rnr_retry;
  a.sq_psn = 0;
  a.max_rd_atomic = 1;
  rc = ibv_modify_qp(e->qp, &a, IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
                                    IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC);
  CHECK(rc == 0, "to RTS: %d", rc);
  return 0;
}

int svt_poll(struct ibv_cq *cq, struct ibv_wc *wc, int timeout_ms)
{
  uint64_t end = now_ms() + (uint64_t)timeout_ms;
  for (;;) {
    int n = ibv_poll_cq(cq, 1, wc);
    if (n > 0) return 1;
    if (n < 0) return -1;
    if (now_ms() > end) return 0;
    usleep(50);
  }
}

int svt_fork(int *fd)
{
  int sv[2];
  if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) != 0) return -1;
  fflush(NULL);
  int pid = fork();
  if (pid < 0) return -1;
  if (pid == 0) {
    close(sv[0]);
    *fd = sv[1];
    /* the child never outlives a crashed parent */
    alarm(60);
    return 0;
  }
  close(sv[1]);
  *fd = sv[0];
  return pid;
}

static int full_io(int fd, void *buf, size_t len, bool wr)
{
  size_t done = 0;
  while (done < len) {
    ssize_t n = wr ? write(fd, (char *)buf + done, len - done) : read(fd, (char *)buf + done, len - done);
    if (n <= 0) return -1;
    done += (size_t)n;
  }
  return 0;
}

int svt_xchg(int fd, const svt_info_t *mine, svt_info_t *theirs)
{
  CHECK(full_io(fd, (void *)mine, sizeof(*mine), true) == 0, "exchange: write");
  CHECK(full_io(fd, theirs, sizeof(*theirs), false) == 0, "exchange: read");
  return 0;
}

int svt_sync(int fd)
{
  char b = 's';
  CHECK(full_io(fd, &b, 1, true) == 0, "sync: write");
  CHECK(full_io(fd, &b, 1, false) == 0, "sync: read (peer gone?)");
  return 0;
}

int svt_wait_child(int pid, int timeout_ms)
{
  uint64_t end = now_ms() + (uint64_t)timeout_ms;
  for (;;) {
    int st = 0;
    int r = waitpid(pid, &st, WNOHANG);
    if (r == pid) {
      if (WIFEXITED(st)) return WEXITSTATUS(st);
      fprintf(stderr, "child %d died by signal %d\n", pid, WTERMSIG(st));
      return 1;
    }
    if (now_ms() > end) {
      fprintf(stderr, "child %d did not finish within %d ms: killing it\n", pid, timeout_ms);
      kill(pid, SIGKILL);
      waitpid(pid, &st, 0);
      return 1;
    }
    usleep(1000);
  }
}

int svt_post_rdma(struct ibv_qp *qp, enum ibv_wr_opcode op, uint64_t wr_id, void *buf,
                  uint32_t len, uint32_t lkey, uint64_t raddr, uint32_t rkey, uint32_t imm,
                  unsigned flags)
{
  struct ibv_sge sge = {.addr = (uintptr_t)buf, .length = len, .lkey = lkey};
  struct ibv_send_wr wr = {.wr_id = wr_id, .sg_list = &sge, .num_sge = 1, .opcode = op,
                           .send_flags = flags, .imm_data = imm};
  wr.wr.rdma.remote_addr = raddr;
  wr.wr.rdma.rkey = rkey;
  struct ibv_send_wr *bad = NULL;
  return ibv_post_send(qp, &wr, &bad);
}

int svt_post_recv(struct ibv_qp *qp, uint64_t wr_id, void *buf, uint32_t len, uint32_t lkey)
{
  struct ibv_sge sge = {.addr = (uintptr_t)buf, .length = len, .lkey = lkey};
  struct ibv_recv_wr wr = {.wr_id = wr_id, .sg_list = &sge, .num_sge = buf ? 1 : 0};
  struct ibv_recv_wr *bad = NULL;
  return ibv_post_recv(qp, &wr, &bad);
}

int svt_post_atomic(struct ibv_qp *qp, enum ibv_wr_opcode op, uint64_t wr_id, uint64_t *result,
                    uint32_t lkey, uint64_t raddr, uint32_t rkey, uint64_t compare_add,
                    uint64_t swap, unsigned flags)
{
  struct ibv_sge sge = {.addr = (uintptr_t)result, .length = 8, .lkey = lkey};
  struct ibv_send_wr wr = {.wr_id = wr_id, .sg_list = &sge, .num_sge = 1, .opcode = op,
                           .send_flags = flags};
  wr.wr.atomic.remote_addr = raddr;
  wr.wr.atomic.rkey = rkey;
  wr.wr.atomic.compare_add = compare_add;
  wr.wr.atomic.swap = swap;
  struct ibv_send_wr *bad = NULL;
  return ibv_post_send(qp, &wr, &bad);
}
