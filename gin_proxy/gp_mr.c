/* gin_proxy: symmetric registration.
 *
 * regMrSym is collective: every rank registers the same windows in the same order, so a window's
 * identity across the group is its registration number on the collComm. That number is what a
 * put or get names on the wire; the target finds its own window by it. Numbers are never reused,
 * so a message for a window deregistered meanwhile is refused instead of landing in a new one.
 * Small puts move through the staging slots connect registered (gp_conn.c); host windows large
 * enough for a bulk put are also registered with the net on every peer's bulk comms, so their
 * bytes go to and from the net directly (gp_bulk.c); GPU windows (NCCL_PTR_CUDA) are moved by
 * gp_cuda.c. */
#include <stdlib.h>

#include "gp.h"

gp_mr_t *gp_win(gp_comm_t *c, uint32_t id) {
  return id < c->nwins ? c->wins[id] : NULL;
}

gp_mr_t *gp_mr_get(gp_comm_t *c, void *mhandle) {
  if (!mhandle || !strand_handle_set_contains(&gp_live_mrs, mhandle)) return NULL;
  gp_mr_t *m = mhandle;
  return m->comm == c ? m : NULL;
}

static strand_result_t gp_reg_common(gp_comm_t *c, const char *call, void *data, size_t size, int type,
                                     void **mhandle) {
  if (type != STRAND_PTR_HOST && type != STRAND_PTR_CUDA) {
    STRAND_WARN("gin_proxy %s(rank %d/%d): memory type %d is neither NCCL_PTR_HOST nor NCCL_PTR_CUDA",
                call, c->rank, c->nranks, type);
    return STRAND_INVALID_ARGUMENT;
  }
  if (!data && size > 0) {
    STRAND_WARN("gin_proxy %s(rank %d/%d): NULL buffer of %zu bytes", call, c->rank, c->nranks, size);
    return STRAND_INVALID_ARGUMENT;
  }
  gp_mr_t *m = calloc(1, sizeof *m);
  if (!m) return STRAND_SYSTEM_ERROR;
  pthread_mutex_lock(&c->lock);
  strand_result_t rc = STRAND_SUCCESS;
  if (c->nwins == c->capwins) {
    uint32_t cap = c->capwins ? 2 * c->capwins : 16;
    gp_mr_t **w = realloc(c->wins, cap * sizeof *w);
    if (w) {
      c->wins = w;
      c->capwins = cap;
    } else {
      rc = STRAND_SYSTEM_ERROR;
    }
  }
  if (rc == STRAND_SUCCESS) {
    *m = (gp_mr_t){.magic = GP_MR_MAGIC, .comm = c, .id = c->nwins, .base = data, .size = size};
    if (type == STRAND_PTR_CUDA) rc = gp_cuda_attach(c, m, call);
    if (rc == STRAND_SUCCESS) rc = gp_bulk_reg(c, m);
  }
  if (rc == STRAND_SUCCESS) rc = strand_handle_set_add(&gp_live_mrs, m);
  if (rc == STRAND_SUCCESS) c->wins[c->nwins++] = m;
  pthread_mutex_unlock(&c->lock);
  if (rc != STRAND_SUCCESS) {
    free(m);
    return rc;
  }
  *mhandle = m;
  return STRAND_SUCCESS;
}

strand_result_t gp_reg_mr_sym(void *collComm, void *data, size_t size, int type, uint64_t mrFlags, void **mhandle) {
  (void)mrFlags; /* FORCE_SO: every window is applied in strict order already */
  if (!mhandle) return STRAND_INVALID_ARGUMENT;
  *mhandle = NULL;
  gp_comm_t *c = gp_comm_get(collComm, "regMrSym");
  if (!c) return STRAND_INVALID_ARGUMENT;
  return gp_reg_common(c, "regMrSym", data, size, type, mhandle);
}

/* gin_proxy moves GPU windows through the CUDA driver by address, so the DMA-BUF descriptor adds
 * nothing: a CUDA window given this way is registered as by regMrSym (NCCL only uses this call
 * when ptrSupport has NCCL_PTR_DMABUF, which gin_proxy does not report). */
strand_result_t gp_reg_mr_sym_dmabuf(void *collComm, void *data, size_t size, int type, uint64_t offset,
                                     int fd, uint64_t mrFlags, void **mhandle) {
  (void)offset, (void)fd, (void)mrFlags;
  if (!mhandle) return STRAND_INVALID_ARGUMENT;
  *mhandle = NULL;
  gp_comm_t *c = gp_comm_get(collComm, "regMrSymDmaBuf");
  if (!c) return STRAND_INVALID_ARGUMENT;
  if (type != STRAND_PTR_CUDA) {
    STRAND_WARN("gin_proxy regMrSymDmaBuf(rank %d/%d): memory type %d; a DMA-BUF window must be "
                "NCCL_PTR_CUDA (register host memory with regMrSym)", c->rank, c->nranks, type);
    return STRAND_INVALID_USAGE;
  }
  return gp_reg_common(c, "regMrSymDmaBuf", data, size, type, mhandle);
}

/* Ops still under way whose local bytes lie in window m lose them: a put not fully sent reads
 * them, a get's reply writes them. They fail (ncclInvalidUsage from test) instead of touching
 * memory the caller may free right after deregMrSym. Under c->lock. */
static void gp_mr_cancel(gp_comm_t *c, gp_mr_t *m) {
  int n = 0;
  for (gp_req_t *r = c->all; r; r = r->next_all) {
    if (r->done || !r->local || r->local < m->base || r->local >= m->base + m->size) continue;
    if (r->kind == GP_OP_PUT && r->sent == r->size) continue; /* every byte already left */
    r->local = NULL;
    r->src_win = NULL;
    if (!r->err) r->err = STRAND_INVALID_USAGE;
    n++;
  }
  if (n)
    STRAND_WARN("gin_proxy deregMrSym(rank %d/%d): window %u deregistered with %d put/get(s) still "
                "using it; they fail (complete them with test before deregistering)", c->rank,
                c->nranks, m->id, n);
}

strand_result_t gp_dereg_mr_sym(void *collComm, void *mhandle) {
  gp_comm_t *c = gp_comm_get(collComm, "deregMrSym");
  if (!c) return STRAND_INVALID_ARGUMENT;
  pthread_mutex_lock(&c->lock);
  gp_mr_t *m = gp_mr_get(c, mhandle);
  if (m) {
    gp_mr_cancel(c, m);
    gp_bulk_dereg(c, m);
    strand_handle_set_remove(&gp_live_mrs, m);
    c->wins[m->id] = NULL;
  }
  pthread_mutex_unlock(&c->lock);
  if (!m) {
    STRAND_WARN("gin_proxy deregMrSym(rank %d/%d): %p is not a live window of this collComm "
                "(deregistered twice?)", c->rank, c->nranks, mhandle);
    return STRAND_INVALID_ARGUMENT;
  }
  m->magic = 0;
  free(m);
  return STRAND_SUCCESS;
}

void gp_mr_free_all(gp_comm_t *c) {
  for (uint32_t i = 0; i < c->nwins; i++)
    if (c->wins[i]) {
      strand_handle_set_remove(&gp_live_mrs, c->wins[i]);
      free(c->wins[i]);
    }
  free(c->wins);
  c->wins = NULL;
  c->nwins = c->capwins = 0;
}
