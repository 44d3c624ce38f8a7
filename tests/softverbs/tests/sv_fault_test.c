/* Two processes over softverbs, error paths: a wrong or stale rkey and an out-of-bounds access end
 * in IBV_WC_REM_ACCESS_ERR at the requester (later WRs flushed) and an access error on the target
 * QP; a missing receive ends in RNR retries (recovered when one is posted in time, else
 * IBV_WC_RNR_RETRY_EXC_ERR); a killed peer ends in IBV_WC_RETRY_EXC_ERR within the bound
 * timeout/retry_cnt give; the fault knobs (drop, fail-after, port down, device fatal) behave as
 * README.md says; an async event dies with its QP if unread, and destroying the QP waits for the
 * acknowledgement of one handed out (as rdma-core); a refused atomic fails the way a NIC's
 * responder fails it (misaligned: IBV_WC_REM_INV_REQ_ERR and QP_REQ_ERR at the target; no atomic
 * access on the region or the QP: IBV_WC_REM_ACCESS_ERR and QP_ACCESS_ERR) and leaves the target
 * word alone. Usage: sv_fault_test <case>. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "sv_test.h"

#define LEN 65536

static uint64_t now_ms(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* Waits up to timeout_ms for an async event of `type`; 0 when it came. */
static int wait_async(struct ibv_context *ctx, enum ibv_event_type type, int timeout_ms)
{
  uint64_t end = now_ms() + (uint64_t)timeout_ms;
  for (;;) {
    int left = (int)(end - now_ms());
    if (left <= 0) break;
    struct pollfd p = {.fd = ctx->async_fd, .events = POLLIN};
    if (poll(&p, 1, left) != 1) break;
    struct ibv_async_event ev;
    CHECK(ibv_get_async_event(ctx, &ev) == 0, "get_async_event");
    enum ibv_event_type got = ev.event_type;
    ibv_ack_async_event(&ev);
    if (got == type) return 0;
    fprintf(stderr, "(async event %s while waiting for %s)\n", ibv_event_type_str(got),
            ibv_event_type_str(type));
  }
  fprintf(stderr, "no async event %s within %d ms\n", ibv_event_type_str(type), timeout_ms);
  return 1;
}

typedef struct {
  const char *name;
  svt_qp_params_t init_p, targ_p; /* QP parameters of each side */
  int targ_access;                /* MR access of the target's region */
  int (*initiator)(svt_end_t *e, struct ibv_mr *mr, uint8_t *buf, const svt_info_t *peer, int fd,
                   int child);
  int (*target)(svt_end_t *e, struct ibv_mr *mr, uint8_t *buf, int fd);
} fault_case_t;

static int expect_wc(struct ibv_cq *cq, uint64_t id, enum ibv_wc_status st, int timeout_ms)
{
  struct ibv_wc wc;
  CHECK(svt_poll(cq, &wc, timeout_ms) == 1, "no completion for wr %llu within %d ms",
        (unsigned long long)id, timeout_ms);
  CHECK(wc.wr_id == id && wc.status == st, "wr %llu: %s, want wr %llu: %s",
        (unsigned long long)wc.wr_id, ibv_wc_status_str(wc.status), (unsigned long long)id,
        ibv_wc_status_str(st));
  return 0;
}

static int qp_state(struct ibv_qp *qp)
{
  struct ibv_qp_attr a;
  struct ibv_qp_init_attr i;
  ibv_query_qp(qp, &a, IBV_QP_STATE, &i);
  return a.qp_state;
}

/* ---- wrong rkey / stale rkey / out of bounds / no remote read / refused atomics */
/* After WR 1 (posted by the caller) that the target refuses: WR 1 fails with `st`, the two WRs
 * behind it are flushed, the QP is in ERR, and a WR posted then is flushed too. */
static int fails_then_flushes(svt_end_t *e, struct ibv_mr *mr, uint8_t *buf, uint64_t raddr,
                              uint32_t rkey, enum ibv_wc_status st, int fd)
{
  CHECK(svt_post_rdma(e->qp, IBV_WR_RDMA_WRITE, 2, buf, 8, mr->lkey, raddr, rkey, 0,
                      IBV_SEND_SIGNALED) == 0, "post");
  CHECK(svt_post_rdma(e->qp, IBV_WR_SEND, 3, buf, 8, mr->lkey, 0, 0, 0, 0) == 0, "post");
  if (expect_wc(e->cq, 1, st, 5000)) return 1;
  if (expect_wc(e->cq, 2, IBV_WC_WR_FLUSH_ERR, 5000)) return 1;
  if (expect_wc(e->cq, 3, IBV_WC_WR_FLUSH_ERR, 5000)) return 1; /* unsignaled, flushed anyway */
  CHECK(qp_state(e->qp) == IBV_QPS_ERR, "requester QP in ERR");
  /* posting to a QP in ERR completes with a flush */
  CHECK(svt_post_rdma(e->qp, IBV_WR_RDMA_WRITE, 4, buf, 8, mr->lkey, raddr, rkey, 0,
                      IBV_SEND_SIGNALED) == 0, "post in ERR");
  if (expect_wc(e->cq, 4, IBV_WC_WR_FLUSH_ERR, 1000)) return 1;
  return svt_sync(fd); /* the target stays until the initiator has seen everything */
}

static int post_bad_then_more(svt_end_t *e, struct ibv_mr *mr, uint8_t *buf, uint64_t raddr,
                              uint32_t rkey, uint32_t len, enum ibv_wr_opcode op, int fd)
{
  CHECK(svt_post_rdma(e->qp, op, 1, buf, len, mr->lkey, raddr, rkey, 0, IBV_SEND_SIGNALED) == 0,
        "post");
  return fails_then_flushes(e, mr, buf, raddr, rkey, IBV_WC_REM_ACCESS_ERR, fd);
}

/* A fetch-add the target refuses: an address off the 8-byte grid is an invalid request (a NAK of
 * that kind on a wire); a region or QP without remote atomic access is an access error. */
static int atomic_refused(svt_end_t *e, struct ibv_mr *mr, uint8_t *buf, uint64_t raddr,
                          uint32_t rkey, enum ibv_wc_status st, int fd)
{
  CHECK(svt_post_atomic(e->qp, IBV_WR_ATOMIC_FETCH_AND_ADD, 1, (uint64_t *)(buf + 1024),
                        mr->lkey, raddr, rkey, 1, 0, IBV_SEND_SIGNALED) == 0,
        "post fetch-add");
  return fails_then_flushes(e, mr, buf, raddr, rkey, st, fd);
}

static int init_atomic_misaligned(svt_end_t *e, struct ibv_mr *mr, uint8_t *buf,
                                  const svt_info_t *p, int fd, int child)
{
  (void)child;
  return atomic_refused(e, mr, buf, p->addr + 4, p->rkey, IBV_WC_REM_INV_REQ_ERR, fd);
}

static int init_atomic_denied(svt_end_t *e, struct ibv_mr *mr, uint8_t *buf, const svt_info_t *p,
                              int fd, int child)
{
  (void)child;
  return atomic_refused(e, mr, buf, p->addr + 8, p->rkey, IBV_WC_REM_ACCESS_ERR, fd);
}

static int init_wrong_rkey(svt_end_t *e, struct ibv_mr *mr, uint8_t *buf, const svt_info_t *p,
                           int fd, int child)
{
  (void)child;
  return post_bad_then_more(e, mr, buf, p->addr, p->rkey ^ 0x5500, 64, IBV_WR_RDMA_WRITE, fd);
}

static int init_bounds(svt_end_t *e, struct ibv_mr *mr, uint8_t *buf, const svt_info_t *p, int fd,
                       int child)
{
  (void)child;
  return post_bad_then_more(e, mr, buf, p->addr + p->len - 8, p->rkey, 64, IBV_WR_RDMA_WRITE, fd);
}

static int init_no_read(svt_end_t *e, struct ibv_mr *mr, uint8_t *buf, const svt_info_t *p, int fd,
                        int child)
{
  (void)child;
  return post_bad_then_more(e, mr, buf, p->addr, p->rkey, 64, IBV_WR_RDMA_READ, fd);
}

static int init_stale(svt_end_t *e, struct ibv_mr *mr, uint8_t *buf, const svt_info_t *p, int fd,
                      int child)
{
  (void)child;
  /* first a good write, then the target deregisters and re-registers the same buffer */
  CHECK(svt_post_rdma(e->qp, IBV_WR_RDMA_WRITE, 9, buf, 64, mr->lkey, p->addr, p->rkey, 0,
                      IBV_SEND_SIGNALED) == 0, "post");
  if (expect_wc(e->cq, 9, IBV_WC_SUCCESS, 5000)) return 1;
  if (svt_sync(fd) || svt_sync(fd)) return 1; /* the good write landed / the target re-registered */
  return post_bad_then_more(e, mr, buf, p->addr, p->rkey, 64, IBV_WR_RDMA_WRITE, fd);
}

static int targ_access_err(svt_end_t *e, struct ibv_mr *mr, uint8_t *buf, int fd)
{
  (void)mr, (void)buf;
  /* the responder QP goes to error with the affiliated access event, as on a NIC */
  if (wait_async(e->ctx, IBV_EVENT_QP_ACCESS_ERR, 5000)) return 1;
  CHECK(qp_state(e->qp) == IBV_QPS_ERR, "target QP in ERR");
  return svt_sync(fd);
}

/* The target of a refused atomic: its QP fails with the event of the error's kind, and the word
 * (nor anything behind it) was not touched. */
static int targ_atomic_refused(svt_end_t *e, uint8_t *buf, enum ibv_event_type ev, int fd)
{
  if (wait_async(e->ctx, ev, 5000)) return 1;
  CHECK(qp_state(e->qp) == IBV_QPS_ERR, "target QP in ERR");
  for (int i = 0; i < 64; i++) CHECK(buf[i] == 0, "byte %d of the target changed", i);
  return svt_sync(fd);
}

static int targ_atomic_inv_req(svt_end_t *e, struct ibv_mr *mr, uint8_t *buf, int fd)
{
  (void)mr;
  return targ_atomic_refused(e, buf, IBV_EVENT_QP_REQ_ERR, fd);
}

static int targ_atomic_access(svt_end_t *e, struct ibv_mr *mr, uint8_t *buf, int fd)
{
  (void)mr;
  return targ_atomic_refused(e, buf, IBV_EVENT_QP_ACCESS_ERR, fd);
}

/* rdma-core's promise about affiliated async events (ibv_get_async_event(3)), which a plugin's
 * event thread relies on when it reads ev.element.qp: an event not yet read dies with its QP... */
static int targ_event_dies(svt_end_t *e, struct ibv_mr *mr, uint8_t *buf, int fd)
{
  (void)mr, (void)buf;
  struct pollfd p = {.fd = e->ctx->async_fd, .events = POLLIN};
  CHECK(poll(&p, 1, 5000) == 1, "no access-error event pending within 5 s");
  CHECK(ibv_destroy_qp(e->qp) == 0, "destroy_qp with an event pending");
  e->qp = NULL;
  int fl = fcntl(e->ctx->async_fd, F_GETFL);
  CHECK(fcntl(e->ctx->async_fd, F_SETFL, fl | O_NONBLOCK) == 0, "O_NONBLOCK");
  struct ibv_async_event ev;
  errno = 0;
  CHECK(ibv_get_async_event(e->ctx, &ev) == -1 && errno == EAGAIN,
        "an event of a destroyed QP was still handed out (type %s)",
        ibv_event_type_str(ev.event_type));
  return svt_sync(fd);
}

/* ...and destroying a QP waits until the events handed out for it are acknowledged. */
static struct ibv_qp *g_destroy_qp;
static atomic_int g_destroyed;
static void *destroy_main(void *arg)
{
  (void)arg;
  if (ibv_destroy_qp(g_destroy_qp) == 0) atomic_store(&g_destroyed, 1);
  else atomic_store(&g_destroyed, -1);
  return NULL;
}

static int targ_destroy_waits(svt_end_t *e, struct ibv_mr *mr, uint8_t *buf, int fd)
{
  (void)mr, (void)buf;
  struct ibv_async_event ev;
  CHECK(ibv_get_async_event(e->ctx, &ev) == 0 && ev.event_type == IBV_EVENT_QP_ACCESS_ERR,
        "access-error event");
  CHECK(ev.element.qp == e->qp, "the event names the target QP");
  g_destroy_qp = e->qp;
  e->qp = NULL;
  pthread_t t;
  CHECK(pthread_create(&t, NULL, destroy_main, NULL) == 0, "pthread_create");
  usleep(300000);
  int early = atomic_load(&g_destroyed);
  uint32_t qpn = ev.element.qp->qp_num; /* still valid: not acknowledged yet */
  ibv_ack_async_event(&ev);
  pthread_join(t, NULL);
  CHECK(early == 0, "ibv_destroy_qp returned (%d) before the event was acknowledged", early);
  CHECK(atomic_load(&g_destroyed) == 1, "ibv_destroy_qp failed after the acknowledgement");
  CHECK(qpn != 0, "qp_num");
  return svt_sync(fd);
}

static int targ_stale(svt_end_t *e, struct ibv_mr *mr, uint8_t *buf, int fd)
{
  if (svt_sync(fd)) return 1; /* the initiator's good write is done */
  CHECK(ibv_dereg_mr(mr) == 0, "dereg");
  struct ibv_mr *again = ibv_reg_mr(e->pd, buf, LEN, IBV_ACCESS_LOCAL_WRITE |
                                                        IBV_ACCESS_REMOTE_WRITE);
  CHECK(again, "register again");
  if (svt_sync(fd)) return 3; /* only now may the initiator use the old key */
  int rc = targ_access_err(e, again, buf, fd);
  ibv_dereg_mr(again);
  return rc ? 3 : 2; /* 2/3: success/failure, the MR was already deregistered */
}

/* ---- receiver not ready */
static int init_rnr_exceeded(svt_end_t *e, struct ibv_mr *mr, uint8_t *buf, const svt_info_t *p,
                             int fd, int child)
{
  (void)p, (void)fd, (void)child;
  CHECK(svt_post_rdma(e->qp, IBV_WR_SEND, 1, buf, 100, mr->lkey, 0, 0, 0, IBV_SEND_SIGNALED) == 0,
        "post");
  return expect_wc(e->cq, 1, IBV_WC_RNR_RETRY_EXC_ERR, 5000);
}

static int init_rnr_recovered(svt_end_t *e, struct ibv_mr *mr, uint8_t *buf, const svt_info_t *p,
                              int fd, int child)
{
  (void)p, (void)child;
  memset(buf, 0x42, 100);
  CHECK(svt_post_rdma(e->qp, IBV_WR_SEND, 1, buf, 100, mr->lkey, 0, 0, 0, IBV_SEND_SIGNALED) == 0,
        "post");
  /* zero-length: no rkey is checked */
  CHECK(svt_post_rdma(e->qp, IBV_WR_RDMA_WRITE_WITH_IMM, 2, buf, 0, mr->lkey, 0, 0, 7,
                      IBV_SEND_SIGNALED) == 0, "post");
  if (svt_sync(fd)) return 1; /* the target posts its receives only now */
  if (expect_wc(e->cq, 1, IBV_WC_SUCCESS, 5000)) return 1;
  return expect_wc(e->cq, 2, IBV_WC_SUCCESS, 5000);
}

static int targ_rnr_recovered(svt_end_t *e, struct ibv_mr *mr, uint8_t *buf, int fd)
{
  if (svt_sync(fd)) return 1;
  usleep(200000); /* several RNR NAK rounds */
  CHECK(svt_post_recv(e->qp, 7, buf, 1000, mr->lkey) == 0, "post_recv");
  CHECK(svt_post_recv(e->qp, 8, NULL, 0, 0) == 0, "post_recv");
  struct ibv_wc wc;
  CHECK(svt_poll(e->cq, &wc, 5000) == 1 && wc.wr_id == 7 && wc.status == IBV_WC_SUCCESS &&
            wc.byte_len == 100 && buf[99] == 0x42,
        "the delayed send arrived");
  CHECK(svt_poll(e->cq, &wc, 5000) == 1 && wc.wr_id == 8 &&
            wc.opcode == IBV_WC_RECV_RDMA_WITH_IMM && wc.imm_data == 7,
        "the write-with-imm behind it arrived");
  return 0;
}

/* ---- a receive buffer too small for the SEND */
static int init_recv_too_small(svt_end_t *e, struct ibv_mr *mr, uint8_t *buf, const svt_info_t *p,
                               int fd, int child)
{
  (void)p, (void)child;
  CHECK(svt_post_rdma(e->qp, IBV_WR_SEND, 1, buf, 100, mr->lkey, 0, 0, 0, IBV_SEND_SIGNALED) == 0,
        "post");
  if (expect_wc(e->cq, 1, IBV_WC_REM_INV_REQ_ERR, 5000)) return 1;
  return svt_sync(fd);
}

static int targ_recv_too_small(svt_end_t *e, struct ibv_mr *mr, uint8_t *buf, int fd)
{
  CHECK(svt_post_recv(e->qp, 5, buf, 16, mr->lkey) == 0, "post_recv");
  struct ibv_wc wc;
  CHECK(svt_poll(e->cq, &wc, 5000) == 1 && wc.wr_id == 5 && wc.status == IBV_WC_LOC_LEN_ERR,
        "the 16-byte receive completes with a local length error (%s)",
        ibv_wc_status_str(wc.status));
  if (wait_async(e->ctx, IBV_EVENT_QP_REQ_ERR, 5000)) return 1;
  CHECK(qp_state(e->qp) == IBV_QPS_ERR, "target QP in ERR");
  return svt_sync(fd);
}

/* ---- completion order on one CQ: a ping-pong of (400-byte WRITE + 8-byte WRITE_WITH_IMM) each
 * way. On a NIC the peer's ACK of my pong travels before its next ping, so my two send
 * completions are polled before the next receive completion; loops that poll one CQ rely on it. */
#define PINGS 3000
/* Spins (no sleep between polls, as a latency loop does) for up to timeout_ms. */
static int spin_poll(struct ibv_cq *cq, struct ibv_wc *wc, int timeout_ms)
{
  uint64_t end = now_ms() + (uint64_t)timeout_ms;
  for (;;) {
    int n = ibv_poll_cq(cq, 1, wc);
    if (n != 0) return n;
    if (now_ms() > end) return 0;
  }
}

static int pingpong(svt_end_t *e, struct ibv_mr *mr, uint8_t *buf, const svt_info_t *p, bool first)
{
  for (int i = 0; i < PINGS; i++) {
    struct ibv_wc wc;
    if (!first || i > 0) {
      CHECK(spin_poll(e->cq, &wc, 5000) == 1 && wc.status == IBV_WC_SUCCESS &&
                wc.opcode == IBV_WC_RECV_RDMA_WITH_IMM,
            "round %d: expected the peer's imm, got opcode %d (%s)", i, wc.opcode,
            ibv_wc_status_str(wc.status));
      CHECK(svt_post_recv(e->qp, 0, NULL, 0, 0) == 0, "repost");
    }
    if (!first && i == PINGS - 1) break;
    CHECK(svt_post_rdma(e->qp, IBV_WR_RDMA_WRITE, 1, buf, 400, mr->lkey, p->addr, p->rkey, 0,
                        IBV_SEND_SIGNALED) == 0, "post");
    CHECK(svt_post_rdma(e->qp, IBV_WR_RDMA_WRITE_WITH_IMM, 2, buf, 8, mr->lkey, p->addr + 512,
                        p->rkey, (uint32_t)i, IBV_SEND_SIGNALED) == 0, "post");
    for (uint64_t id = 1; id <= 2; id++) {
      CHECK(spin_poll(e->cq, &wc, 5000) == 1 && wc.status == IBV_WC_SUCCESS && wc.wr_id == id &&
                wc.opcode == IBV_WC_RDMA_WRITE,
            "round %d: send completion %llu expected before the reply, got opcode %d wr %llu", i,
            (unsigned long long)id, wc.opcode, (unsigned long long)wc.wr_id);
    }
  }
  return 0;
}

static int init_cq_order(svt_end_t *e, struct ibv_mr *mr, uint8_t *buf, const svt_info_t *p,
                         int fd, int child)
{
  (void)child;
  for (int i = 0; i < 8; i++) CHECK(svt_post_recv(e->qp, 0, NULL, 0, 0) == 0, "post_recv");
  svt_info_t mine = {.addr = (uintptr_t)buf, .rkey = mr->rkey, .len = LEN};
  CHECK(write(fd, &mine, sizeof(mine)) == (ssize_t)sizeof(mine), "send region");
  if (svt_sync(fd) || pingpong(e, mr, buf, p, true)) return 1;
  struct ibv_wc wc;
  CHECK(svt_poll(e->cq, &wc, 5000) == 1 && wc.opcode == IBV_WC_RECV_RDMA_WITH_IMM, "last reply");
  return svt_sync(fd);
}

static int targ_cq_order(svt_end_t *e, struct ibv_mr *mr, uint8_t *buf, int fd)
{
  for (int i = 0; i < 8; i++) CHECK(svt_post_recv(e->qp, 0, NULL, 0, 0) == 0, "post_recv");
  svt_info_t p;
  CHECK(read(fd, &p, sizeof(p)) == (ssize_t)sizeof(p), "peer region");
  if (svt_sync(fd) || pingpong(e, mr, buf, &p, false)) return 1;
  /* the last pong */
  CHECK(svt_post_rdma(e->qp, IBV_WR_RDMA_WRITE_WITH_IMM, 2, buf, 8, mr->lkey, p.addr + 512,
                      p.rkey, 0, IBV_SEND_SIGNALED) == 0, "post");
  return svt_sync(fd);
}

/* ---- peer death */
static int init_peer_killed(svt_end_t *e, struct ibv_mr *mr, uint8_t *buf, const svt_info_t *p,
                            int fd, int child)
{
  (void)fd;
  CHECK(svt_post_rdma(e->qp, IBV_WR_RDMA_WRITE, 1, buf, 64, mr->lkey, p->addr, p->rkey, 0,
                      IBV_SEND_SIGNALED) == 0, "post");
  if (expect_wc(e->cq, 1, IBV_WC_SUCCESS, 5000)) return 1;
  kill(child, SIGKILL);
  waitpid(child, NULL, 0);
  usleep(100000); /* the stream is gone before the next post: reconnects are refused until the
                   * retry bound runs out */
  /* timeout 14 = 67 ms per try, retry_cnt 3: 4 tries = 268 ms */
  uint64_t t0 = now_ms();
  CHECK(svt_post_rdma(e->qp, IBV_WR_RDMA_WRITE, 2, buf, LEN, mr->lkey, p->addr, p->rkey, 0,
                      IBV_SEND_SIGNALED) == 0, "post");
  if (expect_wc(e->cq, 2, IBV_WC_RETRY_EXC_ERR, 3000)) return 1;
  uint64_t dt = now_ms() - t0;
  /* a loaded CI host may wake the timer late: allow slack, but never a hang */
  CHECK(dt < 268 + 2000, "reported after %llu ms: the bound is 268 ms", (unsigned long long)dt);
  printf("peer death reported after %llu ms (bound 268 ms)\n", (unsigned long long)dt);
  return 0;
}

static int targ_sleep(svt_end_t *e, struct ibv_mr *mr, uint8_t *buf, int fd)
{
  (void)e, (void)mr, (void)buf, (void)fd;
  pause(); /* killed by the initiator */
  return 0;
}

/* ---- fault knobs (the environment of the test sets them) */
static int init_drops(svt_end_t *e, struct ibv_mr *mr, uint8_t *buf, const svt_info_t *p, int fd,
                      int child)
{
  (void)child;
  /* 200 writes of distinct data; every one must land despite the drops */
  for (int i = 0; i < 200; i++) {
    memset(buf + i * 256, i + 1, 256);
    CHECK(svt_post_rdma(e->qp, IBV_WR_RDMA_WRITE, (uint64_t)i, buf + i * 256, 256, mr->lkey,
                        p->addr + (uint64_t)i * 256, p->rkey, 0, IBV_SEND_SIGNALED) == 0,
          "post %d", i);
    if (i % 32 == 31 || i == 199) {
      for (int j = i - (i % 32); j <= i; j++)
        if (expect_wc(e->cq, (uint64_t)j, IBV_WC_SUCCESS, 10000)) return 1;
    }
  }
  return svt_sync(fd);
}

static int targ_drops(svt_end_t *e, struct ibv_mr *mr, uint8_t *buf, int fd)
{
  (void)e, (void)mr;
  if (svt_sync(fd)) return 1;
  for (int i = 0; i < 200; i++)
    for (int j = 0; j < 256; j++)
      CHECK(buf[i * 256 + j] == (uint8_t)(i + 1), "write %d byte %d lost", i, j);
  return 0;
}

static int init_drop_all(svt_end_t *e, struct ibv_mr *mr, uint8_t *buf, const svt_info_t *p,
                         int fd, int child)
{
  (void)fd, (void)child;
  CHECK(svt_post_rdma(e->qp, IBV_WR_RDMA_WRITE, 1, buf, 64, mr->lkey, p->addr, p->rkey, 0,
                      IBV_SEND_SIGNALED) == 0, "post");
  CHECK(svt_post_rdma(e->qp, IBV_WR_RDMA_WRITE, 2, buf, 64, mr->lkey, p->addr, p->rkey, 0,
                      IBV_SEND_SIGNALED) == 0, "post");
  if (expect_wc(e->cq, 1, IBV_WC_RETRY_EXC_ERR, 5000)) return 1;
  return expect_wc(e->cq, 2, IBV_WC_WR_FLUSH_ERR, 5000);
}

static int init_fail_after(svt_end_t *e, struct ibv_mr *mr, uint8_t *buf, const svt_info_t *p,
                           int fd, int child)
{
  (void)fd, (void)child;
  for (uint64_t i = 0; i < 4; i++)
    CHECK(svt_post_rdma(e->qp, IBV_WR_RDMA_WRITE, i, buf, 64, mr->lkey, p->addr, p->rkey, 0,
                        IBV_SEND_SIGNALED) == 0, "post");
  for (uint64_t i = 0; i < 3; i++)
    if (expect_wc(e->cq, i, IBV_WC_SUCCESS, 5000)) return 1;
  if (expect_wc(e->cq, 3, IBV_WC_GENERAL_ERR, 5000)) return 1;
  return wait_async(e->ctx, IBV_EVENT_QP_FATAL, 2000);
}

static int init_port_down(svt_end_t *e, struct ibv_mr *mr, uint8_t *buf, const svt_info_t *p,
                          int fd, int child)
{
  (void)fd, (void)child;
  struct ibv_port_attr pa;
  CHECK(ibv_query_port(e->ctx, 1, &pa) == 0 && pa.state == IBV_PORT_ACTIVE, "port active first");
  CHECK(svt_post_rdma(e->qp, IBV_WR_RDMA_WRITE, 1, buf, 64, mr->lkey, p->addr, p->rkey, 0,
                      IBV_SEND_SIGNALED) == 0, "post");
  if (expect_wc(e->cq, 1, IBV_WC_SUCCESS, 5000)) return 1;
  if (wait_async(e->ctx, IBV_EVENT_PORT_ERR, 5000)) return 1;
  CHECK(ibv_query_port(e->ctx, 1, &pa) == 0 && pa.state == IBV_PORT_DOWN, "port down: %d",
        pa.state);
  CHECK(svt_post_rdma(e->qp, IBV_WR_RDMA_WRITE, 2, buf, 64, mr->lkey, p->addr, p->rkey, 0,
                      IBV_SEND_SIGNALED) == 0, "post");
  if (expect_wc(e->cq, 2, IBV_WC_RETRY_EXC_ERR, 5000)) return 1;
  /* SOFTVERBS_PORT_UP_MS brings it back */
  if (wait_async(e->ctx, IBV_EVENT_PORT_ACTIVE, 5000)) return 1;
  CHECK(ibv_query_port(e->ctx, 1, &pa) == 0 && pa.state == IBV_PORT_ACTIVE, "port back up");
  return 0;
}

static int init_fatal(svt_end_t *e, struct ibv_mr *mr, uint8_t *buf, const svt_info_t *p, int fd,
                      int child)
{
  (void)mr, (void)buf, (void)p, (void)fd, (void)child;
  if (wait_async(e->ctx, IBV_EVENT_DEVICE_FATAL, 5000)) return 1;
  CHECK(qp_state(e->qp) == IBV_QPS_ERR, "QPs in ERR after a fatal device error");
  return 0;
}

static int targ_idle(svt_end_t *e, struct ibv_mr *mr, uint8_t *buf, int fd)
{
  (void)e, (void)mr, (void)buf;
  char b;
  (void)!read(fd, &b, 1); /* until the initiator closes */
  return 0;
}

#define RW (IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ)
#define P(t, r, rr, mrt)                                                                           \
  ((svt_qp_params_t){.timeout = (t), .retry_cnt = (r), .rnr_retry = (rr), .min_rnr_timer = (mrt),  \
                     .access = RW})
#define RWA (RW | IBV_ACCESS_REMOTE_ATOMIC)
#define PA ((svt_qp_params_t){.timeout = 16, .retry_cnt = 7, .rnr_retry = 7, .min_rnr_timer = 12,   \
                              .access = RWA})
static const fault_case_t cases[] = {
  {"wrong-rkey", P(16, 7, 7, 12), P(16, 7, 7, 12), RW, init_wrong_rkey, targ_access_err},
  {"stale-rkey", P(16, 7, 7, 12), P(16, 7, 7, 12), RW, init_stale, targ_stale},
  {"event-dies-with-qp", P(16, 7, 7, 12), P(16, 7, 7, 12), RW, init_wrong_rkey, targ_event_dies},
  {"destroy-waits-ack", P(16, 7, 7, 12), P(16, 7, 7, 12), RW, init_wrong_rkey, targ_destroy_waits},
  {"out-of-bounds", P(16, 7, 7, 12), P(16, 7, 7, 12), RW, init_bounds, targ_access_err},
  {"no-remote-read", P(16, 7, 7, 12), P(16, 7, 7, 12),
   IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE, init_no_read, targ_access_err},
  {"recv-too-small", P(16, 7, 7, 12), P(16, 7, 7, 12), RW, init_recv_too_small,
   targ_recv_too_small},
  {"atomic-misaligned", PA, PA, RWA, init_atomic_misaligned, targ_atomic_inv_req},
  {"atomic-no-access", PA, PA, RW, init_atomic_denied, targ_atomic_access},
  {"atomic-qp-no-access", PA, P(16, 7, 7, 12), RWA, init_atomic_denied, targ_atomic_access},
  {"cq-order", P(16, 7, 7, 12), P(16, 7, 7, 12), RW, init_cq_order, targ_cq_order},
  {"rnr-exceeded", P(16, 7, 2, 1), P(16, 7, 7, 1), RW, init_rnr_exceeded, targ_idle},
  {"rnr-recovered", P(16, 7, 7, 12), P(16, 7, 7, 12), RW, init_rnr_recovered, targ_rnr_recovered},
  {"peer-killed", P(14, 3, 7, 12), P(14, 3, 7, 12), RW, init_peer_killed, targ_sleep},
  {"drops", P(16, 7, 7, 12), P(16, 7, 7, 12), RW, init_drops, targ_drops},
  {"delays", P(16, 7, 7, 12), P(16, 7, 7, 12), RW, init_drops, targ_drops},
  {"drop-all", P(10, 2, 7, 12), P(10, 2, 7, 12), RW, init_drop_all, targ_idle},
  {"fail-after", P(16, 7, 7, 12), P(16, 7, 7, 12), RW, init_fail_after, targ_idle},
  {"port-down", P(16, 7, 7, 12), P(16, 7, 7, 12), RW, init_port_down, targ_idle},
  {"device-fatal", P(16, 7, 7, 12), P(16, 7, 7, 12), RW, init_fatal, targ_idle},
};

static int side(const fault_case_t *c, int fd, bool is_target, int child)
{
  svt_end_t e;
  if (svt_open(&e, 256, false) || svt_create_qp(&e, 256, 0)) return 1;
  uint8_t *buf = calloc(1, LEN);
  CHECK(buf, "calloc");
  struct ibv_mr *mr = ibv_reg_mr(e.pd, buf, LEN, is_target ? c->targ_access : RW);
  CHECK(mr, "reg_mr");
  svt_info_t me, peer;
  svt_local_info(&e, &me);
  me.addr = (uintptr_t)buf;
  me.rkey = mr->rkey;
  me.len = LEN;
  if (svt_xchg(fd, &me, &peer) || svt_connect(&e, &peer, is_target ? &c->targ_p : &c->init_p) ||
      svt_sync(fd))
    return 1;
  int rc = is_target ? c->target(&e, mr, buf, fd) : c->initiator(&e, mr, buf, &peer, fd, child);
  if (rc != 2 && rc != 3) ibv_dereg_mr(mr);
  svt_close(&e);
  free(buf);
  return rc == 2 ? 0 : rc == 3 ? 1 : rc;
}

int main(int argc, char **argv)
{
  const fault_case_t *c = NULL;
  for (size_t i = 0; argc == 2 && i < sizeof(cases) / sizeof(cases[0]); i++)
    if (strcmp(argv[1], cases[i].name) == 0) c = &cases[i];
  if (!c) {
    fprintf(stderr, "usage: sv_fault_test <case>; cases:");
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
      fprintf(stderr, " %s", cases[i].name);
    fprintf(stderr, "\n");
    return 2;
  }
  int fd = -1;
  int pid = svt_fork(&fd);
  CHECK(pid >= 0, "fork");
  if (pid == 0) _exit(side(c, fd, true, 0));
  int rc = side(c, fd, false, pid);
  close(fd);
  int crc = strcmp(c->name, "peer-killed") == 0 ? 0 : svt_wait_child(pid, 20000);
  if (rc || crc) {
    fprintf(stderr, "FAIL %s: initiator %d, target %d\n", c->name, rc, crc);
    return 1;
  }
  printf("ok %s\n", c->name);
  return 0;
}
