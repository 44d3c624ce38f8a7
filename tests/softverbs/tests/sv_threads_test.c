/* Threads over one softverbs context: 4 loopback QP pairs, each driven by its own thread that
 * posts WRITEs and READs on its own CQ and polls it, while the others do the same. Every thread's
 * reads must return its own writes (in order), and nothing may deadlock: posts, polls (which lend
 * the thread to the transport) and the progress thread all share the context lock. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sv_test.h"

#define NPAIR 4
#define LEN (256u << 10)
#define ROUNDS 300

typedef struct {
  svt_end_t a, b;
  int rc;
  unsigned seed;
} pair_t;

static int run_pair(pair_t *p)
{
  uint8_t *src = malloc(LEN), *dst = calloc(1, LEN), *back = malloc(LEN);
  if (!src || !dst || !back) return 1;
  struct ibv_mr *ms = ibv_reg_mr(p->a.pd, src, LEN, IBV_ACCESS_LOCAL_WRITE);
  struct ibv_mr *mb = ibv_reg_mr(p->a.pd, back, LEN, IBV_ACCESS_LOCAL_WRITE);
  struct ibv_mr *md = ibv_reg_mr(p->b.pd, dst, LEN, IBV_ACCESS_LOCAL_WRITE |
                                                     IBV_ACCESS_REMOTE_WRITE |
                                                     IBV_ACCESS_REMOTE_READ);
  CHECK(ms && mb && md, "reg");
  for (int r = 0; r < ROUNDS; r++) {
    uint32_t len = 1 + (uint32_t)(rand_r(&p->seed) % LEN);
    uint32_t off = (uint32_t)(rand_r(&p->seed) % (LEN - len + 1));
    memset(src, (int)(r * 7 + p->seed % 251), len);
    CHECK(svt_post_rdma(p->a.qp, IBV_WR_RDMA_WRITE, 1, src, len, ms->lkey, (uintptr_t)dst + off,
                        md->rkey, 0, 0) == 0, "post write");
    CHECK(svt_post_rdma(p->a.qp, IBV_WR_RDMA_READ, 2, back, len, mb->lkey, (uintptr_t)dst + off,
                        md->rkey, 0, IBV_SEND_SIGNALED) == 0, "post read");
    struct ibv_wc wc;
    CHECK(svt_poll(p->a.cq, &wc, 20000) == 1 && wc.wr_id == 2 && wc.status == IBV_WC_SUCCESS,
          "round %d: %s", r, ibv_wc_status_str(wc.status));
    CHECK(memcmp(back, src, len) == 0, "round %d: read does not return the write before it", r);
  }
  ibv_dereg_mr(ms);
  ibv_dereg_mr(mb);
  ibv_dereg_mr(md);
  free(src);
  free(dst);
  free(back);
  return 0;
}

static void *thread_main(void *arg)
{
  pair_t *p = arg;
  p->rc = run_pair(p);
  return NULL;
}

int main(void)
{
  svt_end_t base;
  if (svt_open(&base, 16, false)) return 1;
  static pair_t pairs[NPAIR];
  svt_qp_params_t prm = SVT_DEFAULT_PARAMS;
  for (int i = 0; i < NPAIR; i++) {
    pair_t *p = &pairs[i];
    p->seed = 1234u + (unsigned)i;
    p->a = base;
    p->b = base;
    p->a.cq = ibv_create_cq(base.ctx, 64, NULL, NULL, 0);
    p->b.cq = ibv_create_cq(base.ctx, 64, NULL, NULL, 0);
    CHECK(p->a.cq && p->b.cq, "cq");
    if (svt_create_qp(&p->a, 16, 0) || svt_create_qp(&p->b, 16, 0)) return 1;
    svt_info_t ia, ib;
    svt_local_info(&p->a, &ia);
    svt_local_info(&p->b, &ib);
    if (svt_connect(&p->a, &ib, &prm) || svt_connect(&p->b, &ia, &prm)) return 1;
  }
  pthread_t t[NPAIR];
  for (int i = 0; i < NPAIR; i++)
    CHECK(pthread_create(&t[i], NULL, thread_main, &pairs[i]) == 0, "pthread_create");
  int rc = 0;
  for (int i = 0; i < NPAIR; i++) {
    pthread_join(t[i], NULL);
    if (pairs[i].rc) {
      fprintf(stderr, "pair %d failed\n", i);
      rc = 1;
    }
  }
  for (int i = 0; i < NPAIR; i++) {
    ibv_destroy_qp(pairs[i].a.qp);
    ibv_destroy_qp(pairs[i].b.qp);
    ibv_destroy_cq(pairs[i].a.cq);
    ibv_destroy_cq(pairs[i].b.cq);
  }
  svt_close(&base);
  if (!rc) printf("ok: %d threads x %d write+read rounds on one context\n", NPAIR, ROUNDS);
  return rc;
}
