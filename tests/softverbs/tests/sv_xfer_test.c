/* Two processes over softverbs: SEND/RECV (plain, inline, SGE list), RDMA WRITE (one-sided: the
 * target posts nothing), WRITE_WITH_IMM (consumes a receive, RECV_RDMA_WITH_IMM + imm_data),
 * RDMA READ, unsignaled WRs, completion-channel events, and the data on both sides. */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <string.h>
#include <unistd.h>

#include "sv_test.h"

#define BUF (8u << 20)
#define WR_LEN (4u << 20)
#define IMM_OFF (WR_LEN)
#define RD_OFF (6u << 20)
#define RD_LEN (1u << 20)
#define IMM 0x1234abcdu

static uint8_t pat(unsigned seed, size_t off) { return (uint8_t)(seed * 31u + off * 7u + (off >> 9)); }

static void fill(uint8_t *b, size_t len, unsigned seed)
{
  for (size_t i = 0; i < len; i++) b[i] = pat(seed, i);
}

static int target(int fd)
{
  svt_end_t e;
  if (svt_open(&e, 64, false) || svt_create_qp(&e, 32, 64)) return 1;
  uint8_t *buf = malloc(BUF), *rbuf = malloc(4096);
  CHECK(buf && rbuf, "malloc");
  fill(buf, BUF, 2);
  memset(rbuf, 0, 4096);
  struct ibv_mr *mr = ibv_reg_mr(e.pd, buf, BUF, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
                                                    IBV_ACCESS_REMOTE_READ);
  struct ibv_mr *rmr = ibv_reg_mr(e.pd, rbuf, 4096, IBV_ACCESS_LOCAL_WRITE);
  CHECK(mr && rmr, "reg_mr");
  svt_info_t me, peer;
  svt_local_info(&e, &me);
  me.addr = (uintptr_t)buf;
  me.rkey = mr->rkey;
  me.len = BUF;
  svt_qp_params_t p = SVT_DEFAULT_PARAMS;
  if (svt_xchg(fd, &me, &peer) || svt_connect(&e, &peer, &p)) return 1;
  /* four receives: SEND, inline SEND, SGE-list SEND, WRITE_WITH_IMM (no buffer needed) */
  CHECK(svt_post_recv(e.qp, 1, rbuf, 1024, rmr->lkey) == 0, "post_recv");
  CHECK(svt_post_recv(e.qp, 2, rbuf + 1024, 1024, rmr->lkey) == 0, "post_recv");
  CHECK(svt_post_recv(e.qp, 3, rbuf + 2048, 1024, rmr->lkey) == 0, "post_recv");
  CHECK(svt_post_recv(e.qp, 4, NULL, 0, 0) == 0, "post_recv");
  if (svt_sync(fd)) return 1;
  struct ibv_wc wc;
  static const uint32_t lens[] = {1000, 64, 300};
  for (int i = 0; i < 3; i++) {
    CHECK(svt_poll(e.cq, &wc, 10000) == 1, "receive %d did not complete", i + 1);
    CHECK(wc.status == IBV_WC_SUCCESS && wc.opcode == IBV_WC_RECV && wc.wr_id == (uint64_t)i + 1,
          "recv %d: status %s opcode %d wr_id %llu", i + 1, ibv_wc_status_str(wc.status),
          wc.opcode, (unsigned long long)wc.wr_id);
    CHECK(wc.byte_len == lens[i], "recv %d: byte_len %u, want %u", i + 1, wc.byte_len, lens[i]);
    CHECK(!(wc.wc_flags & IBV_WC_WITH_IMM), "plain send carries no imm");
    for (uint32_t j = 0; j < lens[i]; j++)
      CHECK(rbuf[i * 1024 + j] == pat(10u + (unsigned)i, j), "recv %d byte %u wrong", i + 1, j);
  }
  CHECK(svt_poll(e.cq, &wc, 10000) == 1, "WRITE_WITH_IMM consumed no receive");
  CHECK(wc.status == IBV_WC_SUCCESS && wc.opcode == IBV_WC_RECV_RDMA_WITH_IMM && wc.wr_id == 4,
        "imm: status %s opcode %d wr_id %llu", ibv_wc_status_str(wc.status), wc.opcode,
        (unsigned long long)wc.wr_id);
  CHECK((wc.wc_flags & IBV_WC_WITH_IMM) && wc.imm_data == htonl(IMM), "imm_data %#x",
        ntohl(wc.imm_data));
  CHECK(wc.byte_len == 16, "imm byte_len %u", wc.byte_len);
  /* RC order: the plain WRITE before it is applied too */
  for (size_t j = 0; j < WR_LEN; j++) CHECK(buf[j] == pat(1, j), "written byte %zu wrong", j);
  for (size_t j = 0; j < 16; j++) CHECK(buf[IMM_OFF + j] == pat(5, j), "imm data byte %zu", j);
  CHECK(ibv_poll_cq(e.cq, 1, &wc) == 0, "no further completion on the target");
  if (svt_sync(fd)) return 1; /* the initiator finished its READ */
  ibv_dereg_mr(mr);
  ibv_dereg_mr(rmr);
  svt_close(&e);
  free(buf);
  free(rbuf);
  return 0;
}

static int initiator(int fd)
{
  svt_end_t e;
  if (svt_open(&e, 64, true) || svt_create_qp(&e, 32, 64)) return 1;
  uint8_t *buf = malloc(BUF);
  CHECK(buf, "malloc");
  fill(buf, WR_LEN, 1);
  fill(buf + WR_LEN, 1024, 10);
  fill(buf + WR_LEN + 1024, 64, 11);
  fill(buf + WR_LEN + 2048, 300, 12);
  fill(buf + WR_LEN + 4096, 16, 5);
  memset(buf + RD_OFF, 0, RD_LEN);
  struct ibv_mr *mr = ibv_reg_mr(e.pd, buf, BUF, IBV_ACCESS_LOCAL_WRITE);
  CHECK(mr, "reg_mr");
  svt_info_t me, peer;
  svt_local_info(&e, &me);
  svt_qp_params_t p = SVT_DEFAULT_PARAMS;
  if (svt_xchg(fd, &me, &peer) || svt_connect(&e, &peer, &p)) return 1;
  if (svt_sync(fd)) return 1; /* receives are posted */
  uint8_t *s = buf + WR_LEN;
  CHECK(svt_post_rdma(e.qp, IBV_WR_SEND, 1, s, 1000, mr->lkey, 0, 0, 0, IBV_SEND_SIGNALED) == 0,
        "post SEND");
  /* inline: the buffer may change right after the post */
  CHECK(svt_post_rdma(e.qp, IBV_WR_SEND, 2, s + 1024, 64, 0, 0, 0, 0,
                      IBV_SEND_SIGNALED | IBV_SEND_INLINE) == 0,
        "post inline SEND");
  memset(s + 1024, 0xee, 64);
  struct ibv_sge sg[2] = {{(uintptr_t)(s + 2048), 100, mr->lkey},
                          {(uintptr_t)(s + 2148), 200, mr->lkey}};
  struct ibv_send_wr wr = {.wr_id = 3, .sg_list = sg, .num_sge = 2, .opcode = IBV_WR_SEND,
                           .send_flags = IBV_SEND_SIGNALED};
  struct ibv_send_wr *bad = NULL;
  CHECK(ibv_post_send(e.qp, &wr, &bad) == 0, "post SGE-list SEND");
  CHECK(svt_post_rdma(e.qp, IBV_WR_RDMA_WRITE, 4, buf, WR_LEN, mr->lkey, peer.addr, peer.rkey, 0,
                      0) == 0,
        "post unsignaled WRITE");
  CHECK(svt_post_rdma(e.qp, IBV_WR_RDMA_WRITE_WITH_IMM, 5, s + 4096, 16, mr->lkey,
                      peer.addr + IMM_OFF, peer.rkey, htonl(IMM), IBV_SEND_SIGNALED) == 0,
        "post WRITE_WITH_IMM");
  CHECK(ibv_req_notify_cq(e.cq, 0) == 0, "req_notify_cq");
  CHECK(svt_post_rdma(e.qp, IBV_WR_RDMA_READ, 6, buf + RD_OFF, RD_LEN, mr->lkey,
                      peer.addr + RD_OFF, peer.rkey, 0, IBV_SEND_SIGNALED) == 0,
        "post READ");
  /* the completion channel fires for the armed CQ */
  struct ibv_cq *ev_cq = NULL;
  void *ev_ctx = NULL;
  CHECK(ibv_get_cq_event(e.ch, &ev_cq, &ev_ctx) == 0 && ev_cq == e.cq, "get_cq_event");
  ibv_ack_cq_events(ev_cq, 1);
  static const struct { uint64_t id; enum ibv_wc_opcode op; } want[] = {
    {1, IBV_WC_SEND}, {2, IBV_WC_SEND}, {3, IBV_WC_SEND}, {5, IBV_WC_RDMA_WRITE},
    {6, IBV_WC_RDMA_READ}};
  for (int i = 0; i < 5; i++) {
    struct ibv_wc wc;
    CHECK(svt_poll(e.cq, &wc, 10000) == 1, "completion %d missing", i);
    CHECK(wc.status == IBV_WC_SUCCESS, "wr %llu: %s", (unsigned long long)wc.wr_id,
          ibv_wc_status_str(wc.status));
    CHECK(wc.wr_id == want[i].id && wc.opcode == want[i].op,
          "completion %d: wr_id %llu opcode %d, want %llu/%d (the unsignaled WRITE has none)", i,
          (unsigned long long)wc.wr_id, wc.opcode, (unsigned long long)want[i].id, want[i].op);
    if (wc.opcode == IBV_WC_RDMA_READ) CHECK(wc.byte_len == RD_LEN, "read byte_len %u", wc.byte_len);
  }
  for (size_t j = 0; j < RD_LEN; j++)
    CHECK(buf[RD_OFF + j] == pat(2, RD_OFF + j), "read byte %zu wrong", j);
  struct ibv_qp_attr qa;
  struct ibv_qp_init_attr qi;
  CHECK(ibv_query_qp(e.qp, &qa, IBV_QP_STATE, &qi) == 0 && qa.qp_state == IBV_QPS_RTS,
        "QP still in RTS");
  if (svt_sync(fd)) return 1;
  ibv_dereg_mr(mr);
  svt_close(&e);
  free(buf);
  return 0;
}

/* Across hosts (network namespaces): the out-of-band exchange runs over TCP instead of a
 * socketpair. --listen PORT runs the target, --connect IP:PORT the initiator. */
static int oob_socket(const char *mode, const char *arg)
{
  if (strcmp(mode, "--listen") == 0) {
    int l = socket(AF_INET, SOCK_STREAM, 0);
    int one = 1;
    setsockopt(l, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)atoi(arg))};
    if (l < 0 || bind(l, (struct sockaddr *)&a, sizeof(a)) || listen(l, 1)) return -1;
    int fd = accept(l, NULL, NULL);
    close(l);
    return fd;
  }
  char host[64];
  snprintf(host, sizeof(host), "%s", arg);
  char *colon = strchr(host, ':');
  if (!colon) return -1;
  *colon = 0;
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)atoi(colon + 1))};
  if (inet_pton(AF_INET, host, &a.sin_addr) != 1) return -1;
  for (int i = 0; i < 100; i++) { /* the target may not listen yet */
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd >= 0 && connect(fd, (struct sockaddr *)&a, sizeof(a)) == 0) return fd;
    if (fd >= 0) close(fd);
    usleep(100000);
  }
  return -1;
}

int main(int argc, char **argv)
{
  int fd = -1;
  if (argc == 3) {
    fd = oob_socket(argv[1], argv[2]);
    CHECK(fd >= 0, "out-of-band socket %s %s: %s", argv[1], argv[2], strerror(errno));
    int rc = strcmp(argv[1], "--listen") == 0 ? target(fd) : initiator(fd);
    close(fd);
    if (rc == 0) printf("ok (%s side)\n", strcmp(argv[1], "--listen") == 0 ? "target" : "initiator");
    return rc;
  }
  int pid = svt_fork(&fd);
  CHECK(pid >= 0, "fork");
  if (pid == 0) _exit(target(fd));
  int rc = initiator(fd);
  close(fd);
  int crc = svt_wait_child(pid, 30000);
  if (rc || crc) {
    fprintf(stderr, "FAIL: initiator %d, target %d\n", rc, crc);
    return 1;
  }
  printf("ok: send/recv (plain, inline, SGE list), write, write-with-imm, read, unsignaled, "
         "completion channel\n");
  return 0;
}
