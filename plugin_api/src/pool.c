/* Fixed-capacity object pools: a free-index stack plus an in-use byte per element, so that get and
 * put are O(1) and misuse (double put, foreign pointer) is caught before it can corrupt the stack. */
#include "strand/pool.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "strand/log.h"

static void lock(strand_pool_t *p) {
  if (p->flags & STRAND_POOL_THREAD_SAFE) pthread_mutex_lock(&p->lock);
}
static void unlock(strand_pool_t *p) {
  if (p->flags & STRAND_POOL_THREAD_SAFE) pthread_mutex_unlock(&p->lock);
}

strand_result_t strand_pool_init(strand_pool_t *pool, const char *name, size_t elem_size,
                                 uint32_t capacity, unsigned flags) {
  if (pool == NULL) return STRAND_INVALID_ARGUMENT;
  memset(pool, 0, sizeof(*pool));
  snprintf(pool->name, sizeof(pool->name), "%s", name ? name : "pool");
  const unsigned known = STRAND_POOL_THREAD_SAFE | STRAND_POOL_ZERO_ON_GET |
                         STRAND_POOL_CACHELINE_ALIGN;
  if (elem_size == 0 || capacity == 0 || capacity > STRAND_POOL_MAX_CAPACITY ||
      (flags & ~known) != 0 || elem_size > (SIZE_MAX / 2) / capacity) {
    STRAND_WARN("pool %s: invalid init (element size %zu, capacity %u, flags 0x%x); capacity must "
                "be 1..%u and the element size non-zero",
                pool->name, elem_size, capacity, flags, STRAND_POOL_MAX_CAPACITY);
    return STRAND_INVALID_ARGUMENT;
  }
  size_t align = (flags & STRAND_POOL_CACHELINE_ALIGN) ? 64 : 16;
  pool->elem_size = elem_size;
  pool->stride = (elem_size + align - 1) / align * align;
  pool->capacity = capacity;
  pool->flags = flags;
  void *mem = NULL;
  int rc = posix_memalign(&mem, align, pool->stride * capacity);
  pool->base = mem;
  pool->free_stack = malloc(sizeof(uint32_t) * capacity);
  pool->in_use = calloc(capacity, 1);
  if (rc != 0 || pool->base == NULL || pool->free_stack == NULL || pool->in_use == NULL) {
    STRAND_WARN("pool %s: cannot allocate %u elements of %zu bytes: %s", pool->name, capacity,
                pool->stride, strerror(rc ? rc : ENOMEM));
    free(pool->base);
    free(pool->free_stack);
    free(pool->in_use);
    memset(pool, 0, sizeof(*pool));
    return STRAND_SYSTEM_ERROR;
  }
  memset(pool->base, 0, pool->stride * capacity);
  /* Stack top is the end of the array; push in reverse so the first get returns element 0. */
  for (uint32_t i = 0; i < capacity; i++) pool->free_stack[i] = capacity - 1 - i;
  if (flags & STRAND_POOL_THREAD_SAFE) pthread_mutex_init(&pool->lock, NULL);
  pool->initialized = true;
  return STRAND_SUCCESS;
}

static void pool_free(strand_pool_t *pool) {
  if (pool->flags & STRAND_POOL_THREAD_SAFE) pthread_mutex_destroy(&pool->lock);
  free(pool->base);
  free(pool->free_stack);
  free(pool->in_use);
  memset(pool, 0, sizeof(*pool));
}

void strand_pool_destroy(strand_pool_t *pool) {
  if (pool == NULL || !pool->initialized) return;
  if (pool->used != 0)
    STRAND_WARN("pool %s: destroyed with %u of %u elements still in use", pool->name, pool->used,
                pool->capacity);
  pool_free(pool);
}

void strand_pool_destroy_in_flight(strand_pool_t *pool) {
  if (pool == NULL || !pool->initialized) return;
  pool_free(pool);
}

void *strand_pool_get(strand_pool_t *pool) {
  if (pool == NULL || !pool->initialized) return NULL;
  lock(pool);
  void *elem = NULL;
  if (pool->used < pool->capacity) {
    uint32_t idx = pool->free_stack[pool->capacity - pool->used - 1];
    pool->used++;
    pool->in_use[idx] = 1;
    elem = pool->base + (size_t)idx * pool->stride;
  }
  unlock(pool);
  if (elem && (pool->flags & STRAND_POOL_ZERO_ON_GET)) memset(elem, 0, pool->elem_size);
  return elem;
}

int64_t strand_pool_index(const strand_pool_t *pool, const void *elem) {
  if (pool == NULL || !pool->initialized || elem == NULL) return -1;
  uintptr_t p = (uintptr_t)elem, b = (uintptr_t)pool->base;
  if (p < b) return -1;
  uintptr_t off = p - b;
  if (off % pool->stride != 0) return -1;
  uintptr_t idx = off / pool->stride;
  if (idx >= pool->capacity) return -1;
  return (int64_t)idx;
}

strand_result_t strand_pool_put(strand_pool_t *pool, void *elem) {
  if (pool == NULL || !pool->initialized) return STRAND_INTERNAL_ERROR;
  int64_t idx = strand_pool_index(pool, elem);
  if (idx < 0) {
    STRAND_WARN("pool %s: put of %p, which is not an element of this pool (foreign or interior "
                "pointer); ignored",
                pool->name, elem);
    return STRAND_INTERNAL_ERROR;
  }
  lock(pool);
  if (!pool->in_use[idx]) {
    unlock(pool);
    STRAND_WARN("pool %s: put of element %lld, which is not in use (double put?); ignored",
                pool->name, (long long)idx);
    return STRAND_INTERNAL_ERROR;
  }
  pool->in_use[idx] = 0;
  pool->used--;
  pool->free_stack[pool->capacity - pool->used - 1] = (uint32_t)idx;
  unlock(pool);
  return STRAND_SUCCESS;
}

void *strand_pool_at(const strand_pool_t *pool, uint32_t index) {
  if (pool == NULL || !pool->initialized || index >= pool->capacity) return NULL;
  return pool->base + (size_t)index * pool->stride;
}

bool strand_pool_in_use(strand_pool_t *pool, const void *elem) {
  int64_t idx = strand_pool_index(pool, elem);
  if (idx < 0) return false;
  lock(pool);
  bool r = pool->in_use[idx] != 0;
  unlock(pool);
  return r;
}

uint32_t strand_pool_used(strand_pool_t *pool) {
  if (pool == NULL || !pool->initialized) return 0;
  lock(pool);
  uint32_t n = pool->used;
  unlock(pool);
  return n;
}

uint32_t strand_pool_capacity(const strand_pool_t *pool) {
  return (pool && pool->initialized) ? pool->capacity : 0;
}

void *strand_pool_next_used(strand_pool_t *pool, uint32_t *cursor) {
  if (pool == NULL || !pool->initialized || cursor == NULL) return NULL;
  lock(pool);
  void *elem = NULL;
  for (uint32_t i = *cursor; i < pool->capacity; i++) {
    if (pool->in_use[i]) {
      elem = pool->base + (size_t)i * pool->stride;
      *cursor = i + 1;
      break;
    }
  }
  if (elem == NULL) *cursor = pool->capacity;
  unlock(pool);
  return elem;
}

uint32_t strand_pool_foreach(strand_pool_t *pool, void (*fn)(void *elem, void *arg), void *arg) {
  if (pool == NULL || !pool->initialized || fn == NULL) return 0;
  uint32_t visited = 0;
  lock(pool);
  for (uint32_t i = 0; i < pool->capacity; i++) {
    if (!pool->in_use[i]) continue;
    fn(pool->base + (size_t)i * pool->stride, arg);
    visited++;
  }
  unlock(pool);
  return visited;
}
