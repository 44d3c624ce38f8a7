/* Helpers of the softverbs tests: open a device, build and connect RC QPs, wait for completions
 * with a bound, and run two processes (fork) that exchange QP addresses over a socketpair the way
 * applications exchange them out of band. */
#ifndef SV_TEST_H
#define SV_TEST_H

#include <infiniband/verbs.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#define CHECK(cond, ...)                                                                           \
  do {                                                                                             \
    if (!(cond)) {                                                                                 \
      fprintf(stderr, "[%d] %s:%d: CHECK(%s) failed: ", (int)getpid(), __FILE__, __LINE__, #cond); \
      fprintf(stderr, __VA_ARGS__);                                                                \
      fprintf(stderr, "\n");                                                                       \
      return 1;                                                                                    \
    }                                                                                              \
  } while (0)

typedef struct {
  struct ibv_context *ctx;
  struct ibv_pd *pd;
  struct ibv_comp_channel *ch;
  struct ibv_cq *cq;
  struct ibv_qp *qp;
} svt_end_t;

/* What one side tells the other: its QP address and one memory region. */
typedef struct {
  uint32_t qpn;
  union ibv_gid gid;
  uint64_t addr;
  uint32_t rkey;
  uint64_t len;
} svt_info_t;

typedef struct {
  uint8_t timeout, retry_cnt, rnr_retry, min_rnr_timer;
  int access;
} svt_qp_params_t;

#define SVT_DEFAULT_PARAMS                                                                         \
  ((svt_qp_params_t){.timeout = 16, .retry_cnt = 7, .rnr_retry = 7, .min_rnr_timer = 12,           \
                     .access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |                  \
                               IBV_ACCESS_REMOTE_READ})

int svt_open(svt_end_t *e, int cqe, bool channel);
int svt_create_qp(svt_end_t *e, uint32_t max_wr, uint32_t max_inline);
void svt_close(svt_end_t *e);
void svt_local_info(svt_end_t *e, svt_info_t *info);
int svt_connect(svt_end_t *e, const svt_info_t *remote, const svt_qp_params_t *p);
/* Polls e->cq until one completion arrives or timeout_ms passes; 1 got one, 0 timeout. */
int svt_poll(struct ibv_cq *cq, struct ibv_wc *wc, int timeout_ms);

/* Two processes: returns the child's pid in the parent and 0 in the child; *fd is the parent's or
 * child's end of a socketpair. */
int svt_fork(int *fd);
int svt_xchg(int fd, const svt_info_t *mine, svt_info_t *theirs);
int svt_sync(int fd);
/* Parent: waits for the child (bounded) and returns its exit status (nonzero on failure). */
int svt_wait_child(int pid, int timeout_ms);

int svt_post_rdma(struct ibv_qp *qp, enum ibv_wr_opcode op, uint64_t wr_id, void *buf,
                  uint32_t len, uint32_t lkey, uint64_t raddr, uint32_t rkey, uint32_t imm,
                  unsigned flags);
int svt_post_recv(struct ibv_qp *qp, uint64_t wr_id, void *buf, uint32_t len, uint32_t lkey);
/* A FETCH_AND_ADD (compare_add = the addend) or CMP_AND_SWP: the original value of the remote word
 * lands in *result (8 bytes of a region with local write, key lkey). */
int svt_post_atomic(struct ibv_qp *qp, enum ibv_wr_opcode op, uint64_t wr_id, uint64_t *result,
                    uint32_t lkey, uint64_t raddr, uint32_t rkey, uint64_t compare_add,
                    uint64_t swap, unsigned flags);

#endif
