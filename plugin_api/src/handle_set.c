/* A thread-safe set of live handles (strand/handle_set.h): open addressing on the pointer value. */
#include "strand/handle_set.h"

#include <stdint.h>
#include <stdlib.h>

static const char tombstone_byte;
#define TOMBSTONE ((const void *)&tombstone_byte)

static size_t hash_ptr(const void *p, size_t cap) {
  uint64_t x = (uint64_t)(uintptr_t)p;
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdULL;
  x ^= x >> 33;
  return (size_t)x & (cap - 1);
}

/* Index of h, or of the slot where it would go (first tombstone or empty) when absent. */
static size_t probe(const strand_handle_set_t *s, const void *h, bool *found) {
  size_t i = hash_ptr(h, s->cap), first_free = SIZE_MAX;
  for (size_t n = 0; n < s->cap; n++, i = (i + 1) & (s->cap - 1)) {
    const void *v = s->slots[i];
    if (v == h) {
      *found = true;
      return i;
    }
    if (v == TOMBSTONE) {
      if (first_free == SIZE_MAX) first_free = i;
    } else if (v == NULL) {
      *found = false;
      return first_free != SIZE_MAX ? first_free : i;
    }
  }
  *found = false;
  return first_free;
}

static bool rehash(strand_handle_set_t *s, size_t cap) {
  const void **slots = calloc(cap, sizeof *slots);
  if (slots == NULL) return false;
  for (size_t i = 0; i < s->cap; i++) {
    const void *v = s->slots[i];
    if (v == NULL || v == TOMBSTONE) continue;
    size_t j = hash_ptr(v, cap);
    while (slots[j] != NULL) j = (j + 1) & (cap - 1);
    slots[j] = v;
  }
  free(s->slots);
  s->slots = slots;
  s->cap = cap;
  s->used = s->live;
  return true;
}

strand_result_t strand_handle_set_add(strand_handle_set_t *s, const void *h) {
  if (h == NULL || h == TOMBSTONE) return STRAND_INVALID_ARGUMENT;
  strand_result_t rc = STRAND_SUCCESS;
  pthread_mutex_lock(&s->lock);
  /* Keep at most half the slots used (live + tombstones) so probes stay short. */
  if ((s->used + 1) * 2 > s->cap) {
    /* After a rehash at most a quarter is used: tombstones are dropped, live ones re-placed. */
    size_t cap = 16;
    while ((s->live + 1) * 4 > cap) cap *= 2;
    if (!rehash(s, cap)) rc = STRAND_SYSTEM_ERROR;
  }
  if (rc == STRAND_SUCCESS) {
    bool found;
    size_t i = probe(s, h, &found);
    if (found) {
      rc = STRAND_INVALID_ARGUMENT;
    } else {
      if (s->slots[i] == NULL) s->used++;
      s->slots[i] = h;
      s->live++;
    }
  }
  pthread_mutex_unlock(&s->lock);
  return rc;
}

bool strand_handle_set_remove(strand_handle_set_t *s, const void *h) {
  bool found = false;
  pthread_mutex_lock(&s->lock);
  if (s->cap > 0 && h != NULL) {
    size_t i = probe(s, h, &found);
    if (found) {
      s->slots[i] = TOMBSTONE;
      s->live--;
    }
  }
  pthread_mutex_unlock(&s->lock);
  return found;
}

bool strand_handle_set_contains(strand_handle_set_t *s, const void *h) {
  bool found = false;
  pthread_mutex_lock(&s->lock);
  if (s->cap > 0 && h != NULL) (void)probe(s, h, &found);
  pthread_mutex_unlock(&s->lock);
  return found;
}

size_t strand_handle_set_count(strand_handle_set_t *s) {
  pthread_mutex_lock(&s->lock);
  size_t n = s->live;
  pthread_mutex_unlock(&s->lock);
  return n;
}

void strand_handle_set_clear(strand_handle_set_t *s) {
  pthread_mutex_lock(&s->lock);
  free(s->slots);
  s->slots = NULL;
  s->cap = s->used = s->live = 0;
  pthread_mutex_unlock(&s->lock);
}
