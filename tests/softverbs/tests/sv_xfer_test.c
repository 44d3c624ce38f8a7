/* Two processes over softverbs: SEND/RECV (plain, inline, SGE list), RDMA WRITE (one-sided: the
 * target posts nothing), WRITE_WITH_IMM (consumes a receive, RECV_RDMA_WITH_IMM + imm_data),
 * RDMA READ, unsignaled WRs, completion-channel events, and the data on both sides.
 * With argument "atomics": remote FETCH_AND_ADD and CMP_AND_SWP (below). */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
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

/* ---- remote atomics. Two QPs, each in its own context at both ends (so two progress threads at
 * the target really race), fetch-add 1 to one word AT_N times each; the original values they get
 * back must be exactly 0 .. 2*AT_N-1, each once, and the word must end at 2*AT_N. Then compare-
 * and-swap that matches and one that does not (both return the old value; only the first
 * changes the word), and an atomic behind a 1 MiB WRITE that ends on its word: RC order makes the
 * atomic see the written value. */
#define AT_N 2000
#define AT_DEPTH 16
#define AT_BUF (2u << 20)
#define AT_W1 (AT_BUF - 8) /* the last word of a 1 MiB WRITE to the upper half */
#define AT_SWAP 0xdeadbeefcafef00dull
#define AT_V 0x0123456789abcdefull
#define AT_ACCESS                                                                                  \
  (IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |                     \
   IBV_ACCESS_REMOTE_ATOMIC)

typedef struct {
  svt_end_t e;
  svt_info_t peer;
  uint64_t *loc; /* AT_BUF bytes: the fetched values first, a WRITE source in the upper half */
  struct ibv_mr *mr;
  int rc;
} at_qp_t;

static int at_setup(at_qp_t *q, int fd, uint64_t *target_buf)
{
  memset(q, 0, sizeof(*q));
  if (svt_open(&q->e, 64, false) || svt_create_qp(&q->e, 64, 0)) return 1;
  q->loc = target_buf ? target_buf : aligned_alloc(4096, AT_BUF);
  CHECK(q->loc, "aligned_alloc");
  if (!target_buf) memset(q->loc, 0, AT_BUF);
  q->mr = ibv_reg_mr(q->e.pd, q->loc, AT_BUF, AT_ACCESS);
  CHECK(q->mr, "reg_mr with remote atomic access: %s", strerror(errno));
  svt_info_t me;
  svt_local_info(&q->e, &me);
  me.addr = (uintptr_t)q->loc;
  me.rkey = q->mr->rkey;
  me.len = AT_BUF;
  svt_qp_params_t p = SVT_DEFAULT_PARAMS;
  p.access |= IBV_ACCESS_REMOTE_ATOMIC;
  return svt_xchg(fd, &me, &q->peer) || svt_connect(&q->e, &q->peer, &p);
}

static void at_teardown(at_qp_t *q, bool free_loc)
{
  ibv_dereg_mr(q->mr);
  svt_close(&q->e);
  if (free_loc) free(q->loc);
}

static int at_target(int fd)
{
  uint64_t *word = aligned_alloc(4096, AT_BUF);
  CHECK(word, "aligned_alloc");
  memset(word, 0, AT_BUF);
  at_qp_t q[2];
  if (at_setup(&q[0], fd, word) || at_setup(&q[1], fd, word)) return 1;
  if (svt_sync(fd)) return 1; /* the initiator is done */
  CHECK(word[0] == AT_SWAP, "word 0 is %#llx, want the swapped-in %#llx",
        (unsigned long long)word[0], AT_SWAP);
  CHECK(word[AT_W1 / 8] == AT_V + 5, "the written word plus 5: %#llx",
        (unsigned long long)word[AT_W1 / 8]);
  if (svt_sync(fd)) return 1;
  at_teardown(&q[0], false);
  at_teardown(&q[1], false);
  free(word);
  return 0;
}

/* AT_N fetch-adds of 1 to the peer's word 0, AT_DEPTH in flight; the originals land in loc[i]. */
static int at_add_loop(at_qp_t *q)
{
  int posted = 0, done = 0;
  while (done < AT_N) {
    while (posted < AT_N && posted - done < AT_DEPTH) {
      CHECK(svt_post_atomic(q->e.qp, IBV_WR_ATOMIC_FETCH_AND_ADD, (uint64_t)posted, &q->loc[posted],
                            q->mr->lkey, q->peer.addr, q->peer.rkey, 1, 0,
                            IBV_SEND_SIGNALED) == 0,
            "post fetch-add %d", posted);
      posted++;
    }
    struct ibv_wc wc;
    CHECK(svt_poll(q->e.cq, &wc, 10000) == 1, "fetch-add %d did not complete", done);
    CHECK(wc.status == IBV_WC_SUCCESS && wc.opcode == IBV_WC_FETCH_ADD && wc.byte_len == 8 &&
              wc.wr_id == (uint64_t)done,
          "fetch-add %d: %s opcode %d byte_len %u wr_id %llu", done, ibv_wc_status_str(wc.status),
          wc.opcode, wc.byte_len, (unsigned long long)wc.wr_id);
    done++;
  }
  return 0;
}

static void *at_adder(void *arg)
{
  at_qp_t *q = arg;
  q->rc = at_add_loop(q);
  return NULL;
}

/* One signaled READ or atomic of the peer's word at raddr, then its completion: *got is the 8
 * bytes it brought back. */
static int at_one(at_qp_t *q, enum ibv_wr_opcode op, uint64_t raddr, uint64_t cmp_add,
                  uint64_t swap, uint64_t *got)
{
  uint64_t *res = &q->loc[AT_N];
  *res = 0x5555555555555555ull;
  int rc = op == IBV_WR_RDMA_READ
               ? svt_post_rdma(q->e.qp, op, 77, res, 8, q->mr->lkey, raddr, q->peer.rkey, 0,
                               IBV_SEND_SIGNALED)
               : svt_post_atomic(q->e.qp, op, 77, res, q->mr->lkey, raddr, q->peer.rkey, cmp_add,
                                 swap, IBV_SEND_SIGNALED);
  CHECK(rc == 0, "post op %d", op);
  struct ibv_wc wc;
  enum ibv_wc_opcode want = op == IBV_WR_RDMA_READ              ? IBV_WC_RDMA_READ
                            : op == IBV_WR_ATOMIC_CMP_AND_SWP ? IBV_WC_COMP_SWAP
                                                              : IBV_WC_FETCH_ADD;
  CHECK(svt_poll(q->e.cq, &wc, 10000) == 1, "op %d did not complete", op);
  CHECK(wc.status == IBV_WC_SUCCESS && wc.wr_id == 77 && wc.opcode == want && wc.byte_len == 8,
        "op %d: %s opcode %d (want %d) byte_len %u", op, ibv_wc_status_str(wc.status), wc.opcode,
        want, wc.byte_len);
  *got = *res;
  return 0;
}

static int at_initiator(int fd)
{
  at_qp_t q[2];
  if (at_setup(&q[0], fd, NULL) || at_setup(&q[1], fd, NULL)) return 1;
  pthread_t t[2];
  for (int i = 0; i < 2; i++) CHECK(pthread_create(&t[i], NULL, at_adder, &q[i]) == 0, "thread");
  for (int i = 0; i < 2; i++) pthread_join(t[i], NULL);
  CHECK(q[0].rc == 0 && q[1].rc == 0, "fetch-add loops failed");
  uint8_t *seen = calloc(2 * AT_N, 1);
  CHECK(seen, "calloc");
  for (int i = 0; i < 2; i++) {
    for (int j = 0; j < AT_N; j++) {
      uint64_t v = q[i].loc[j];
      CHECK(v < 2 * AT_N && !seen[v], "QP %d fetch-add %d returned %llu (%s)", i, j,
            (unsigned long long)v, v < 2 * AT_N ? "twice" : "out of range");
      seen[v] = 1;
    }
  }
  free(seen);
  uint64_t got = 0, base = q[0].peer.addr;
  if (at_one(&q[0], IBV_WR_RDMA_READ, base, 0, 0, &got)) return 1;
  CHECK(got == 2 * AT_N, "the word after %d fetch-adds from two QPs: %llu", 2 * AT_N,
        (unsigned long long)got);
  if (at_one(&q[1], IBV_WR_ATOMIC_CMP_AND_SWP, base, 2 * AT_N, AT_SWAP, &got)) return 1;
  CHECK(got == 2 * AT_N, "matching compare-and-swap returned %llu", (unsigned long long)got);
  if (at_one(&q[0], IBV_WR_ATOMIC_CMP_AND_SWP, base, 2 * AT_N, 1, &got)) return 1;
  CHECK(got == AT_SWAP, "failing compare-and-swap returned %#llx", (unsigned long long)got);
  if (at_one(&q[0], IBV_WR_RDMA_READ, base, 0, 0, &got)) return 1;
  CHECK(got == AT_SWAP, "a failing compare-and-swap changed the word: %#llx",
        (unsigned long long)got);
  /* RC order: an atomic executes after the WRITE posted before it (unsignaled, not waited for) */
  uint8_t *src = (uint8_t *)q[0].loc + AT_BUF / 2;
  for (uint32_t i = 0; i < AT_BUF / 2; i++) src[i] = (uint8_t)(i * 7);
  memcpy(src + AT_BUF / 2 - 8, &(uint64_t){AT_V}, 8);
  CHECK(svt_post_rdma(q[0].e.qp, IBV_WR_RDMA_WRITE, 76, src, AT_BUF / 2, q[0].mr->lkey,
                      base + AT_BUF / 2, q[0].peer.rkey, 0, 0) == 0,
        "post the WRITE");
  if (at_one(&q[0], IBV_WR_ATOMIC_FETCH_AND_ADD, base + AT_W1, 5, 0, &got)) return 1;
  CHECK(got == AT_V, "the fetch-add behind a WRITE saw %#llx, want the written %#llx",
        (unsigned long long)got, AT_V);
  if (at_one(&q[0], IBV_WR_RDMA_READ, base + AT_W1, 0, 0, &got)) return 1;
  CHECK(got == AT_V + 5, "READ after the fetch-add: %#llx", (unsigned long long)got);
  if (svt_sync(fd) || svt_sync(fd)) return 1; /* the target checked its words */
  at_teardown(&q[0], true);
  at_teardown(&q[1], true);
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
  bool atomics = argc == 2 && strcmp(argv[1], "atomics") == 0;
  int pid = svt_fork(&fd);
  CHECK(pid >= 0, "fork");
  if (pid == 0) _exit(atomics ? at_target(fd) : target(fd));
  int rc = atomics ? at_initiator(fd) : initiator(fd);
  close(fd);
  int crc = svt_wait_child(pid, 30000);
  if (rc || crc) {
    fprintf(stderr, "FAIL: initiator %d, target %d\n", rc, crc);
    return 1;
  }
  if (atomics) {
    printf("ok: %d fetch-adds from two QPs (each original once, exact sum), compare-and-swap "
           "match and mismatch, atomic ordered behind a WRITE\n", 2 * AT_N);
    return 0;
  }
  printf("ok: send/recv (plain, inline, SGE list), write, write-with-imm, read, unsignaled, "
         "completion channel\n");
  return 0;
}
