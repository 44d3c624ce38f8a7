/* device_unpack — unpack_validate(): what NCCL's kernel assumes but never checks; unpack_ref(): the
 * CPU golden gather every kernel and every CPU stand-in of the kernel is compared with. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "strand/unpack.h"

typedef struct {
  uint64_t lo, hi;
  uint64_t idx;
} range_t;

static int by_lo(const void *a, const void *b) {
  const range_t *x = a, *y = b;
  return x->lo < y->lo ? -1 : x->lo > y->lo;
}

int strand_unpack_validate(const strand_unpack_load_meta_t *recs, uint64_t cnt,
                           uint64_t arena_size, uint64_t dst_size, char *why, size_t why_len) {
  char dummy[1];
  if (why == NULL || why_len == 0) {
    why = dummy;
    why_len = sizeof dummy;
  }
  why[0] = '\0';
  if (cnt > STRAND_UNPACK_MAX_SLICE_PAGES) {
    snprintf(why, why_len, "%llu records, more than the kernel's limit of %d",
             (unsigned long long)cnt, STRAND_UNPACK_MAX_SLICE_PAGES);
    return -1;
  }
  if (cnt == 0) return 0;
  if (recs == NULL) {
    snprintf(why, why_len, "%llu records but no record array", (unsigned long long)cnt);
    return -1;
  }
  range_t ranges[STRAND_UNPACK_MAX_SLICE_PAGES];
  uint64_t nr = 0;
  for (uint64_t i = 0; i < cnt; i++) {
    uint64_t src = recs[i].src_off, len = recs[i].len, dst = recs[i].dst_off;
    if (src + len > arena_size || src + len > ((uint64_t)1 << 32)) {
      snprintf(why, why_len, "record %llu: source [%llu, +%llu) leaves the %llu-byte bounce arena",
               (unsigned long long)i, (unsigned long long)src, (unsigned long long)len,
               (unsigned long long)arena_size);
      return -1;
    }
    if (dst > dst_size || len > dst_size - dst) {
      snprintf(why, why_len, "record %llu: destination [%llu, +%llu) leaves the %llu-byte receive "
               "buffer", (unsigned long long)i, (unsigned long long)dst, (unsigned long long)len,
               (unsigned long long)dst_size);
      return -1;
    }
    if (len > 0) ranges[nr++] = (range_t){dst, dst + len, i};
  }
  qsort(ranges, (size_t)nr, sizeof ranges[0], by_lo);
  for (uint64_t i = 1; i < nr; i++) {
    if (ranges[i].lo < ranges[i - 1].hi) {
      snprintf(why, why_len, "records %llu and %llu overlap in the destination at byte %llu "
               "(warps copy records concurrently)", (unsigned long long)ranges[i - 1].idx,
               (unsigned long long)ranges[i].idx, (unsigned long long)ranges[i].lo);
      return -1;
    }
  }
  return 0;
}

void strand_unpack_ref(const void *bounce, void *dst, const strand_unpack_load_meta_t *recs,
                       uint64_t cnt) {
  for (uint64_t i = 0; i < cnt; i++)
    if (recs[i].len > 0)
      memcpy((char *)dst + recs[i].dst_off, (const char *)bounce + recs[i].src_off, recs[i].len);
}

uint64_t strand_unpack_bytes(const strand_unpack_load_meta_t *recs, uint64_t cnt) {
  uint64_t n = 0;
  for (uint64_t i = 0; i < cnt; i++) n += recs[i].len;
  return n;
}
