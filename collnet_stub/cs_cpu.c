/* collnet_stub: helper threads for a collComm's CPU work.
 *
 * Why: NCCL drives every CollNet channel of a communicator through ONE collComm from its one
 * CollNet proxy thread. Measured through real NCCL on 2 H200s (docs/benchmarks/collnet.md,
 * 2026-11-27), that thread spent 46 % of the busy time in staging copies and 23 % in reductions,
 * and the stub was flat at 2.0 GB/s: the CPU work of all chunks ran one after another on one core.
 * Helpers take each chunk's copies and reduction (cs_coll_run_job), so the chunks in the slots run
 * them in parallel while the proxy thread keeps posting and polling the net.
 *
 * Per collComm: started at connect, joined at closeColl (so no thread outlives its comm, and a
 * plugin user counting threads after close sees none). Hand-off: a mutex-protected FIFO of work
 * items (a slot's job, or one part of a split reduction) and a condition variable; the helper that
 * finishes a slot's last part publishes the end of the job with a release store of
 * sl->cpu = CS_CPU_DONE, which the proxy thread reads with acquire in test(). Nothing else of the
 * slot is touched by the proxy thread while it is BUSY. */
#include <pthread.h>
#include <stdlib.h>

#include "cs.h"
#include "strand/params.h"
#include "strand/topo.h"

/* Default helper count: none on small machines (the helpers would compete with NCCL's own threads
 * and the net's for 2-4 cores), else enough for the slots' chunks to overlap. */
#define CS_HELPERS_AUTO 4
#define CS_HELPERS_MIN_CPUS 5

struct cs_helpers {
  pthread_mutex_t lock;
  pthread_cond_t wake;
  cs_work_t *head, *tail;
  bool stop;
  int n;
  pthread_t threads[];
};

static void *cs_helper_main(void *arg) {
  cs_comm_t *c = arg;
  struct cs_helpers *h = c->helpers;
  pthread_mutex_lock(&h->lock);
  for (;;) {
    while (!h->head && !h->stop) pthread_cond_wait(&h->wake, &h->lock);
    if (h->stop) break;
    cs_work_t *w = h->head;
    h->head = w->qnext;
    if (!h->head) h->tail = NULL;
    pthread_mutex_unlock(&h->lock);
    cs_slot_t *sl = w->sl;
    if (sl->nparts > 1)
      cs_coll_run_part(c, sl, w->part);
    else
      cs_coll_run_job(c, sl);
    /* the last part to finish hands the slot back (acq_rel: it sees the other parts' writes) */
    if (atomic_fetch_sub_explicit(&sl->parts_left, 1, memory_order_acq_rel) == 1)
      atomic_store_explicit(&sl->cpu, CS_CPU_DONE, memory_order_release);
    pthread_mutex_lock(&h->lock);
  }
  pthread_mutex_unlock(&h->lock);
  return NULL;
}

strand_result_t cs_helpers_start(cs_comm_t *c) {
  int64_t want = -1;
  if (strand_param_get_int("STRAND_COLLNET_THREADS", &want) != STRAND_SUCCESS) want = -1;
  int n = want >= 0 ? (int)want : strand_topo_num_cpus() >= CS_HELPERS_MIN_CPUS ? CS_HELPERS_AUTO : 0;
  if (n > c->nslots) n = c->nslots; /* a slot is the unit of work: more helpers would idle */
  c->helpers = NULL;
  if (n == 0) return STRAND_SUCCESS;
  struct cs_helpers *h = calloc(1, sizeof *h + (size_t)n * sizeof(pthread_t));
  if (!h) return STRAND_SYSTEM_ERROR;
  pthread_mutex_init(&h->lock, NULL);
  pthread_cond_init(&h->wake, NULL);
  c->helpers = h;
  for (int i = 0; i < n; i++) {
    int err = pthread_create(&h->threads[i], NULL, cs_helper_main, c);
    if (err) {
      STRAND_WARN("collnet_stub connect(rank %d/%d): cannot start helper thread %d of %d (error %d); "
                  "set STRAND_COLLNET_THREADS=0 to do the CPU work on NCCL's proxy thread",
                  c->rank, c->nranks, i + 1, n, err);
      cs_helpers_stop(c);
      return STRAND_SYSTEM_ERROR;
    }
    pthread_setname_np(h->threads[i], "strand-cs-cpu");
    h->n = i + 1;
  }
  return STRAND_SUCCESS;
}

void cs_helpers_stop(cs_comm_t *c) {
  struct cs_helpers *h = c->helpers;
  if (!h) return;
  pthread_mutex_lock(&h->lock);
  h->stop = true;
  pthread_cond_broadcast(&h->wake);
  pthread_mutex_unlock(&h->lock);
  for (int i = 0; i < h->n; i++) pthread_join(h->threads[i], NULL);
  pthread_cond_destroy(&h->wake);
  pthread_mutex_destroy(&h->lock);
  free(h);
  c->helpers = NULL;
}

int cs_helpers_count(const cs_comm_t *c) { return c->helpers ? c->helpers->n : 0; }

bool cs_helpers_submit(cs_comm_t *c, cs_slot_t *sl) {
  struct cs_helpers *h = c->helpers;
  if (!h) return false;
  int parts = sl->nparts > 1 ? sl->nparts : 1;
  atomic_store_explicit(&sl->cpu, CS_CPU_BUSY, memory_order_relaxed);
  atomic_store_explicit(&sl->parts_left, parts, memory_order_relaxed);
  pthread_mutex_lock(&h->lock);
  for (int p = 0; p < parts; p++) {
    cs_work_t *w = &sl->work[p];
    w->sl = sl;
    w->part = p;
    w->qnext = NULL;
    if (h->tail)
      h->tail->qnext = w;
    else
      h->head = w;
    h->tail = w;
  }
  if (parts > 1)
    pthread_cond_broadcast(&h->wake);
  else
    pthread_cond_signal(&h->wake);
  pthread_mutex_unlock(&h->lock);
  return true;
}
