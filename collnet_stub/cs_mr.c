/* collnet_stub: registration on a collComm.
 *
 * A CollNet registration records the range, accepts the same range any number of times (NCCL
 * registers one shared buffer from both connectors, spec §8.2), and refuses memory the CPU cannot
 * reduce. It also registers the range with the net on every comm of the mesh, so that an
 * all-reduce on registered buffers sends its blocks straight from the user's memory and receives
 * the all-gather's straight into it (cs_coll.c): each staging copy skipped is a pass over the data
 * the chunk no longer waits for. Where the net refuses, the range is still a valid registration
 * and the collectives stage it through the arena (which connect registered) as before.
 * Under a progress thread (STRAND_COLLNET_PROGRESS=thread) these calls hold the comm's lock: the
 * thread uses the same net comms. */
#include <stdlib.h>

#include "cs.h"
#include "strand/params.h"

/* Releases what the net holds of m on the mesh's comms (which are still open). */
static void cs_net_dereg(cs_comm_t *c, cs_mr_t *m) {
  if (!m->net_mh) return;
  size_t per = (size_t)c->nranks * (size_t)c->nlanes;
  for (size_t i = 0; i < 2 * per; i++) {
    void *comm = i < per ? c->send[i] : c->recv[i - per];
    if (m->net_mh[i] && comm && c->net->deregMr) c->net->deregMr(comm, m->net_mh[i]);
  }
  free(m->net_mh);
  m->net_mh = NULL;
  m->net_ok = false;
}

/* Registers m's range with the net on every comm of the mesh; on any refusal undoes what was done
 * and leaves m for staging (an INFO, not an error: the collectives still work). */
static void cs_net_reg(cs_comm_t *c, cs_mr_t *m) {
  bool direct = true;
  if (strand_param_get_bool("STRAND_COLLNET_DIRECT", &direct) != STRAND_SUCCESS) direct = true;
  if (!direct) return;
  size_t per = (size_t)c->nranks * (size_t)c->nlanes;
  m->net_mh = calloc(2 * per, sizeof(void *));
  if (!m->net_mh) return;
  for (size_t i = 0; i < 2 * per; i++) {
    void *comm = i < per ? c->send[i] : c->recv[i - per];
    if (!comm || !c->net->regMr || !m->size) continue;
    strand_result_t rc = c->net->regMr(comm, m->base, m->size, STRAND_PTR_HOST, &m->net_mh[i]);
    if (rc != STRAND_SUCCESS) {
      m->net_mh[i] = NULL;
      STRAND_INFO(STRAND_SUBSYS_NET, "collnet_stub regMr(rank %d/%d): the net's regMr of %zu bytes at %p "
                  "returned %d; collectives on this buffer are staged through the arena", c->rank,
                  c->nranks, m->size, m->base, (int)rc);
      cs_net_dereg(c, m);
      return;
    }
  }
  m->net_ok = true;
}

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
  cs_lock(c); /* the net's comms, and the list the issuing calls read */
  *m = (cs_mr_t){.magic = CS_MR_MAGIC, .base = data, .size = size, .next = c->mrs};
  cs_net_reg(c, m);
  c->mrs = m;
  *mhandle = m;
  cs_unlock(c);
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
  cs_lock(c);
  for (cs_mr_t **pp = &c->mrs; *pp; pp = &(*pp)->next)
    if (*pp == mhandle) {
      cs_mr_t *m = *pp;
      *pp = m->next;
      cs_net_dereg(c, m);
      cs_unlock(c);
      m->magic = 0;
      free(m);
      return STRAND_SUCCESS;
    }
  cs_unlock(c);
  STRAND_WARN("collnet_stub deregMr(rank %d/%d): %p is not a live registration (deregistered twice?)",
              c->rank, c->nranks, mhandle);
  return STRAND_INVALID_ARGUMENT;
}

void cs_mr_free_all(cs_comm_t *c) {
  for (cs_mr_t *m = c->mrs, *nx; m; m = nx) {
    nx = m->next;
    cs_net_dereg(c, m);
    m->magic = 0;
    free(m);
  }
  c->mrs = NULL;
}

const cs_mr_t *cs_mr_direct(const cs_comm_t *c, void *mhandle, const void *p, size_t len) {
  if (!mhandle || !p) return NULL;
  for (const cs_mr_t *m = c->mrs; m; m = m->next) /* a stale or foreign handle is never read */
    if (m == mhandle)
      return m->net_ok && (const char *)p >= (const char *)m->base &&
                     (size_t)((const char *)p - (const char *)m->base) + len <= m->size
                 ? m
                 : NULL;
  return NULL;
}
