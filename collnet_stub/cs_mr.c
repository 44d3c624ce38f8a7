/* collnet_stub: registration on a collComm.
 *
 * The stub never hands NCCL's buffers to the net: every byte goes through the collComm's staging
 * arena, which connect registered once with each of the mesh's net comms. So a CollNet
 * registration is bookkeeping: it records the range, accepts the same range any number of times
 * (NCCL registers one shared buffer from both connectors, spec §8.2), and refuses memory the CPU
 * cannot reduce. */
#include <stdlib.h>

#include "cs.h"

static strand_result_t cs_reg_common(cs_comm_t *c, const char *call, void *data, size_t size, int type,
                                     void **mhandle) {
  if (type != STRAND_PTR_HOST) {
    STRAND_WARN("collnet_stub %s(rank %d/%d): memory type %d not supported: the stub reduces on the "
                "CPU and reports ptrSupport=NCCL_PTR_HOST; a core passing GPU memory ignored that",
                call, c->rank, c->nranks, type);
    return STRAND_INTERNAL_ERROR;
  }
  if (!data && size > 0) {
    STRAND_WARN("collnet_stub %s(rank %d/%d): NULL buffer of %zu bytes", call, c->rank, c->nranks, size);
    return STRAND_INVALID_ARGUMENT;
  }
  cs_mr_t *m = calloc(1, sizeof *m);
  if (!m) return STRAND_SYSTEM_ERROR;
  *m = (cs_mr_t){.magic = CS_MR_MAGIC, .base = data, .size = size, .next = c->mrs};
  c->mrs = m;
  *mhandle = m;
  return STRAND_SUCCESS;
}

strand_result_t cs_reg_mr(void *collComm, void *data, size_t size, int type, void **mhandle) {
  if (!mhandle) return STRAND_INVALID_ARGUMENT;
  *mhandle = NULL;
  cs_comm_t *c = cs_comm_of(collComm);
  if (!c) {
    STRAND_WARN("collnet_stub regMr: %p is not a collComm of the stub", collComm);
    return STRAND_INVALID_ARGUMENT;
  }
  return cs_reg_common(c, "regMr", data, size, type, mhandle);
}

/* A DMA-BUF of host memory is the same pages as `data`: the fd is not needed (NCCL closes it right
 * after the call). GPU DMA-BUFs are refused like any GPU memory. */
strand_result_t cs_reg_mr_dmabuf(void *collComm, void *data, size_t size, int type, uint64_t offset,
                                 int fd, void **mhandle) {
  (void)offset;
  (void)fd;
  if (!mhandle) return STRAND_INVALID_ARGUMENT;
  *mhandle = NULL;
  cs_comm_t *c = cs_comm_of(collComm);
  if (!c) {
    STRAND_WARN("collnet_stub regMrDmaBuf: %p is not a collComm of the stub", collComm);
    return STRAND_INVALID_ARGUMENT;
  }
  return cs_reg_common(c, "regMrDmaBuf", data, size, type, mhandle);
}

strand_result_t cs_dereg_mr(void *collComm, void *mhandle) {
  cs_comm_t *c = cs_comm_of(collComm);
  if (!c || !mhandle) {
    STRAND_WARN("collnet_stub deregMr: collComm %p / mhandle %p invalid", collComm, mhandle);
    return STRAND_INVALID_ARGUMENT;
  }
  /* Found by address among the live ones before it is read: a stale handle is refused safely. */
  for (cs_mr_t **pp = &c->mrs; *pp; pp = &(*pp)->next)
    if (*pp == mhandle) {
      cs_mr_t *m = *pp;
      *pp = m->next;
      m->magic = 0;
      free(m);
      return STRAND_SUCCESS;
    }
  STRAND_WARN("collnet_stub deregMr(rank %d/%d): %p is not a live registration (deregistered twice?)",
              c->rank, c->nranks, mhandle);
  return STRAND_INVALID_ARGUMENT;
}

void cs_mr_free_all(cs_comm_t *c) {
  for (cs_mr_t *m = c->mrs, *nx; m; m = nx) {
    nx = m->next;
    m->magic = 0;
    free(m);
  }
  c->mrs = NULL;
}
