/* gin_proxy: symmetric registration.
 *
 * regMrSym is collective: every rank registers the same windows in the same order, so a window's
 * identity across the group is its registration number on the collComm. That number is what a
 * put or get names on the wire; the target finds its own window by it. Numbers are never reused,
 * so a message for a window deregistered meanwhile is refused instead of landing in a new one.
 * Windows are not registered with the net: bytes move through the staging slots that connect
 * registered (gp_conn.c). */
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
  if (type != STRAND_PTR_HOST) {
    STRAND_WARN("gin_proxy %s(rank %d/%d): memory type %d not supported: GPU memory is not supported "
                "yet (gin_proxy reports ptrSupport=NCCL_PTR_HOST)", call, c->rank, c->nranks, type);
    return STRAND_INVALID_USAGE;
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
    rc = strand_handle_set_add(&gp_live_mrs, m);
  }
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

strand_result_t gp_reg_mr_sym_dmabuf(void *collComm, void *data, size_t size, int type, uint64_t offset,
                                     int fd, uint64_t mrFlags, void **mhandle) {
  (void)data, (void)size, (void)type, (void)offset, (void)fd, (void)mrFlags;
  if (!mhandle) return STRAND_INVALID_ARGUMENT;
  *mhandle = NULL;
  gp_comm_t *c = gp_comm_get(collComm, "regMrSymDmaBuf");
  if (!c) return STRAND_INVALID_ARGUMENT;
  /* DMA-BUF windows are GPU memory in practice: refused until the CUDA path exists. */
  STRAND_WARN("gin_proxy regMrSymDmaBuf(rank %d/%d): DMA-BUF windows (GPU memory) are not supported "
              "yet; register host memory with regMrSym", c->rank, c->nranks);
  return STRAND_INVALID_USAGE;
}

strand_result_t gp_dereg_mr_sym(void *collComm, void *mhandle) {
  gp_comm_t *c = gp_comm_get(collComm, "deregMrSym");
  if (!c) return STRAND_INVALID_ARGUMENT;
  pthread_mutex_lock(&c->lock);
  gp_mr_t *m = gp_mr_get(c, mhandle);
  if (m) {
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
