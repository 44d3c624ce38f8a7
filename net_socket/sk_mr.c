/* strand-socket — memory registration. TCP needs none: a handle only records the range, and
 * only host memory is accepted (NCCL stages GPU buffers through host memory for this transport).
 *
 * Every handle given out is recorded in a set of live registrations, and deregMr asks the set
 * before it touches a handle: a second deregMr of the same handle, or a pointer regMr never gave
 * out, is refused with a WARN and STRAND_INVALID_ARGUMENT without being read or freed. */
#include <stdlib.h>

#include "sk.h"
#include "strand/handle_set.h"
#include "strand/log.h"

typedef struct {
  void *comm;
  void *data;
  size_t size;
  int type;
} sk_mr_t;

static strand_handle_set_t live_mrs = STRAND_HANDLE_SET_INIT;

strand_result_t sk_reg_mr(void *comm, void *data, size_t size, int type, void **mhandle) {
  if (mhandle == NULL) return STRAND_INVALID_ARGUMENT;
  *mhandle = NULL;
  /* Unpack mode: NCCL's receive FIFO is GPU memory that the plugin never touches (the kernel
   * gathers into it), so a CUDA registration only records the range. Sends still read host
   * memory: a CUDA send buffer means GPUDirect reads, which TCP cannot do. */
  const sk_comm_t *c = comm;
  if (type == STRAND_PTR_CUDA && c != NULL && c->type == SK_COMM_RECV && sk_unpack_mode()) {
    /* accepted below (a host-mode receive comm refuses it in irecv, where it would be written) */
  } else if (type == STRAND_PTR_CUDA && c != NULL && sk_unpack_mode()) {
    STRAND_WARN("regMr: GPU memory (%zu bytes at %p) on a send connection; in unpack mode only "
                "the receive FIFO may be GPU memory: set NCCL_NET_GDR_READ=0 so that NCCL sends "
                "from host memory", size, data);
    return STRAND_INTERNAL_ERROR;
  } else if (type != STRAND_PTR_HOST) {
    STRAND_WARN("regMr: strand-socket only sends from host memory (type %d requested, %zu bytes "
                "at %p); GPU buffers are staged through host memory by NCCL", type, size, data);
    return STRAND_INTERNAL_ERROR;
  }
  sk_mr_t *mr = malloc(sizeof *mr);
  if (mr == NULL) return STRAND_SYSTEM_ERROR;
  *mr = (sk_mr_t){comm, data, size, type};
  strand_result_t rc = strand_handle_set_add(&live_mrs, mr);
  if (rc != STRAND_SUCCESS) {
    STRAND_WARN("regMr: could not record the registration of %zu bytes at %p (out of memory)",
                size, data);
    free(mr);
    return STRAND_SYSTEM_ERROR;
  }
  *mhandle = mr;
  return STRAND_SUCCESS;
}

strand_result_t sk_dereg_mr(void *comm, void *mhandle) {
  if (mhandle == NULL) return STRAND_SUCCESS; /* nothing registered, nothing to release */
  if (!strand_handle_set_remove(&live_mrs, mhandle)) {
    STRAND_WARN("deregMr(comm %p): mhandle %p is not a live strand-socket registration (already "
                "deregistered, or never returned by regMr); left untouched. Check for a double "
                "deregMr or a handle passed to the wrong plugin", comm, mhandle);
    return STRAND_INVALID_ARGUMENT;
  }
  free(mhandle);
  return STRAND_SUCCESS;
}

int sk_mr_type(void *mhandle) {
  if (mhandle == NULL || !strand_handle_set_contains(&live_mrs, mhandle)) return -1;
  return ((const sk_mr_t *)mhandle)->type;
}
