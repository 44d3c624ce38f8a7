/* Strand SDK — fixed-capacity object pools (requests, flush slots, small per-comm objects).
 *
 * All memory is allocated by strand_pool_init; get and put are O(1) and never allocate. Elements
 * are handed out LIFO (the most recently freed one first, while it is still warm in the cache).
 *
 *   strand_pool_t reqs;
 *   if (strand_pool_init(&reqs, "socket-requests", sizeof(struct sreq),
 *                        STRAND_NET_MAX_REQUESTS * 8, 0) != STRAND_SUCCESS) ...
 *   struct sreq *r = strand_pool_get(&reqs);          // NULL when all are in use
 *   ...
 *   strand_pool_put(&reqs, r);
 *   strand_pool_destroy(&reqs);
 *
 * Misuse is detected, reported (WARN naming the pool) and refused, never allowed to corrupt the
 * pool: putting an element that is not in use (double put), or a pointer that is not the start of
 * one of this pool's elements (foreign or interior pointer), returns STRAND_INTERNAL_ERROR and
 * leaves the pool unchanged.
 *
 * Threads: with STRAND_POOL_THREAD_SAFE every call takes the pool's mutex. Without it the pool has
 * no locking at all; the caller serialises (the usual case: one comm, one proxy thread). */
#ifndef STRAND_POOL_H
#define STRAND_POOL_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "strand/abi/types.h"

#ifdef __cplusplus
extern "C" {
#endif

enum {
  STRAND_POOL_THREAD_SAFE = 0x1,     /* guard every call with a mutex */
  STRAND_POOL_ZERO_ON_GET = 0x2,     /* memset elements to 0 when handed out */
  STRAND_POOL_CACHELINE_ALIGN = 0x4  /* 64-byte element stride/alignment (no false sharing) */
};

#define STRAND_POOL_MAX_CAPACITY (1u << 24)
#define STRAND_POOL_NAME_MAX 32

/* Treat the fields as private; they are visible only so a pool can be embedded by value. */
typedef struct {
  unsigned char *base;   /* capacity * stride bytes of element storage */
  size_t elem_size;      /* as given to init */
  size_t stride;         /* elem_size rounded up to the alignment */
  uint32_t capacity;
  uint32_t used;
  uint32_t *free_stack;  /* indices of free elements; free_stack[0..capacity-used) */
  uint8_t *in_use;       /* one byte per element: 1 while handed out */
  unsigned flags;
  bool initialized;
  pthread_mutex_t lock;  /* only with STRAND_POOL_THREAD_SAFE */
  char name[STRAND_POOL_NAME_MAX];
} strand_pool_t;

/* Allocate storage for `capacity` elements of `elem_size` bytes (both > 0, capacity at most
 * STRAND_POOL_MAX_CAPACITY). Elements are aligned to 16 bytes (64 with CACHELINE_ALIGN). `name`
 * (may be NULL) appears in WARN messages. Returns STRAND_SUCCESS, STRAND_INVALID_ARGUMENT for bad
 * arguments, STRAND_SYSTEM_ERROR when memory cannot be allocated. */
strand_result_t strand_pool_init(strand_pool_t *pool, const char *name, size_t elem_size,
                                 uint32_t capacity, unsigned flags);

/* Free the storage. Elements still in use are reported in one WARN (count) and freed anyway.
 * Destroying a zeroed or already destroyed pool is a no-op. */
void strand_pool_destroy(strand_pool_t *pool);
/* The same, for an owner whose elements may legitimately still be in use: a comm closed with
 * requests in flight, which NCCL may do (spec §6.9). They are freed with the pool, without a WARN. */
void strand_pool_destroy_in_flight(strand_pool_t *pool);

/* An unused element, or NULL when all `capacity` are in use (no WARN: callers decide whether
 * exhaustion is an error). Its bytes are what the last user left (zeroed on first use), unless
 * the pool has STRAND_POOL_ZERO_ON_GET. */
void *strand_pool_get(strand_pool_t *pool);

/* Return an element. STRAND_SUCCESS, or STRAND_INTERNAL_ERROR (with a WARN) when `elem` is NULL,
 * not an element of this pool, or not in use. */
strand_result_t strand_pool_put(strand_pool_t *pool, void *elem);

/* Index (0..capacity-1) of an element of this pool, in use or not; -1 for anything else. Handy as
 * a compact request id on the wire. Lock-free: the storage never moves. */
int64_t strand_pool_index(const strand_pool_t *pool, const void *elem);

/* The element at `index` (in use or not), or NULL when index >= capacity. Lock-free. */
void *strand_pool_at(const strand_pool_t *pool, uint32_t index);

/* Whether `elem` is an element of this pool that is currently handed out. */
bool strand_pool_in_use(strand_pool_t *pool, const void *elem);

uint32_t strand_pool_used(strand_pool_t *pool);
uint32_t strand_pool_capacity(const strand_pool_t *pool);

/* Iterate over the elements in use, in index order:
 *   uint32_t cursor = 0; void *e;
 *   while ((e = strand_pool_next_used(&pool, &cursor)) != NULL) { ... }
 * Set *cursor to 0 to start; it is advanced past the element returned. Putting the returned element
 * during the walk is allowed. With a thread-safe pool each step is locked but the walk as a whole is
 * not: use strand_pool_foreach for a consistent view. */
void *strand_pool_next_used(strand_pool_t *pool, uint32_t *cursor);

/* Call fn(elem, arg) for every element in use, in index order, under the pool's lock (thread-safe
 * pools). fn must not call other functions on the same pool. Returns how many elements were
 * visited. */
uint32_t strand_pool_foreach(strand_pool_t *pool, void (*fn)(void *elem, void *arg), void *arg);

#ifdef __cplusplus
}
#endif

#endif
