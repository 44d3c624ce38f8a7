/* strand-socket — memory registration. TCP needs none: a handle only records the range, and
 * only host memory is accepted (NCCL stages GPU buffers through host memory for this transport). */
#include <stdlib.h>

#include "sk.h"
#include "strand/log.h"

typedef struct {
  void *comm;
  void *data;
  size_t size;
} sk_mr_t;

strand_result_t sk_reg_mr(void *comm, void *data, size_t size, int type, void **mhandle) {
  if (mhandle == NULL) return STRAND_INVALID_ARGUMENT;
  *mhandle = NULL;
  if (type != STRAND_PTR_HOST) {
    STRAND_WARN("regMr: strand-socket only sends from host memory (type %d requested, %zu bytes "
                "at %p); GPU buffers are staged through host memory by NCCL", type, size, data);
    return STRAND_INTERNAL_ERROR;
  }
  sk_mr_t *mr = malloc(sizeof *mr);
  if (mr == NULL) return STRAND_SYSTEM_ERROR;
  *mr = (sk_mr_t){comm, data, size};
  *mhandle = mr;
  return STRAND_SUCCESS;
}

strand_result_t sk_dereg_mr(void *comm, void *mhandle) {
  (void)comm;
  free(mhandle);
  return STRAND_SUCCESS;
}
