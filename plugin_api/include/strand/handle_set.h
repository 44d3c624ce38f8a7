/* Strand SDK — a thread-safe set of live handles, to refuse stale or foreign ones without reading
 * them.
 *
 * NCCL (and frameworks that reuse a plugin) sometimes hands a plugin a handle it already released:
 * deregMr twice on the same mhandle, a request tested after it was reported done. Checking a magic
 * number inside the handle reads freed memory; instead a plugin records every handle it gives out
 * and asks the set before it touches one:
 *
 *   static strand_handle_set_t live_mrs = STRAND_HANDLE_SET_INIT;
 *   regMr:   strand_handle_set_add(&live_mrs, mr)            (STRAND_SYSTEM_ERROR without memory)
 *   deregMr: if (!strand_handle_set_remove(&live_mrs, mh)) -> WARN + STRAND_INVALID_ARGUMENT
 *
 * Lookups compare pointer values only. Open addressing, grows by doubling; add/remove/contains
 * are O(1) on average under one mutex (registration is not on the data path). */
#ifndef STRAND_HANDLE_SET_H
#define STRAND_HANDLE_SET_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>

#include "strand/abi/types.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
  pthread_mutex_t lock;
  const void **slots; /* NULL = empty, STRAND_HANDLE_SET_TOMBSTONE = removed */
  size_t cap;         /* power of two, 0 before the first add */
  size_t used;        /* live + tombstones */
  size_t live;
} strand_handle_set_t;

#define STRAND_HANDLE_SET_INIT {PTHREAD_MUTEX_INITIALIZER, NULL, 0, 0, 0}

/* Records h (non-NULL). STRAND_SUCCESS, STRAND_SYSTEM_ERROR when out of memory, or
 * STRAND_INVALID_ARGUMENT when h is NULL or already in the set. */
strand_result_t strand_handle_set_add(strand_handle_set_t *s, const void *h);
/* Removes h; false when h was not in the set (already removed, or never given out). */
bool strand_handle_set_remove(strand_handle_set_t *s, const void *h);
bool strand_handle_set_contains(strand_handle_set_t *s, const void *h);
size_t strand_handle_set_count(strand_handle_set_t *s);
/* Frees the table (handles themselves are the caller's); the set is empty and usable again. */
void strand_handle_set_clear(strand_handle_set_t *s);

#ifdef __cplusplus
}
#endif

#endif
