/* device_unpack host tests: arena, ring, validate and the reference gather, without a GPU. Each
 * CHECK failure prints the line and what was expected; the exit status is the failure count. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "strand/unpack.h"

static int failures;
#define CHECK(cond, ...)                                                                           \
  do {                                                                                             \
    if (!(cond)) {                                                                                 \
      failures++;                                                                                  \
      fprintf(stderr, "FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond);                              \
      fprintf(stderr, __VA_ARGS__);                                                                \
      fputc('\n', stderr);                                                                         \
    }                                                                                              \
  } while (0)

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static uint64_t rnd(void) {
  rng ^= rng << 13;
  rng ^= rng >> 7;
  rng ^= rng << 17;
  return rng;
}

/* Arena: runs are disjoint and aligned, exhaustion refuses (back-pressure) without side effects,
 * freeing makes room again, a double free is refused and leaves the count alone. */
static void test_arena(void) {
  strand_unpack_arena_t *a = NULL, *b = NULL;
  CHECK(strand_unpack_arena_acquire(64 * 4096, true, &a) == STRAND_SUCCESS, "acquire");
  if (!a) return;
  CHECK(strand_unpack_arena_acquire(1 << 20, true, &b) == STRAND_SUCCESS && a == b,
        "a second acquire on the same device must share the arena (one bounce base per GPU)");
  CHECK(strand_unpack_arena_size(a) == 64 * 4096, "size %zu", strand_unpack_arena_size(a));
  CHECK(((uintptr_t)strand_unpack_arena_host(a) & 15) == 0, "16-byte aligned base");
  CHECK(!strand_unpack_arena_is_cuda(a), "forced host arena");
  strand_unpack_run_t r[64];
  int n = 0;
  /* 0 bytes still gets a page (a receive of 0 bytes never needs one, but the call must not fail) */
  CHECK(strand_unpack_arena_alloc(a, 0, &r[n]) && r[n].npages == 1, "zero-byte run");
  n++;
  CHECK(strand_unpack_arena_alloc(a, 4097, &r[n]) && r[n].npages == 2, "4097 bytes = 2 pages");
  n++;
  CHECK(strand_unpack_arena_alloc(a, 61 * 4096, &r[n]) && r[n].npages == 61, "61 pages");
  n++;
  CHECK(strand_unpack_arena_free_pages(a) == 0, "full: %zu free", strand_unpack_arena_free_pages(a));
  strand_unpack_run_t x;
  CHECK(!strand_unpack_arena_alloc(a, 1, &x), "a full arena must refuse (back-pressure)");
  CHECK(!strand_unpack_arena_alloc(a, 65 * 4096, &x), "larger than the arena must be refused");
  /* runs are disjoint */
  for (int i = 0; i < n; i++)
    for (int j = i + 1; j < n; j++) {
      uint64_t ai = r[i].off, ae = ai + r[i].npages * 4096ull, bi = r[j].off,
               be = bi + r[j].npages * 4096ull;
      CHECK(ae <= bi || be <= ai, "runs %d and %d overlap", i, j);
    }
  strand_unpack_arena_free(a, r[1]);
  CHECK(strand_unpack_arena_free_pages(a) == 2, "2 pages back");
  CHECK(!strand_unpack_arena_alloc(a, 3 * 4096, &x), "3 pages do not fit in a 2-page hole");
  CHECK(strand_unpack_arena_alloc(a, 2 * 4096, &x) && x.off == r[1].off, "the hole is reused");
  strand_unpack_arena_free(a, x);
  strand_unpack_arena_free(a, x); /* double free: WARN, no change */
  CHECK(strand_unpack_arena_free_pages(a) == 2, "double free must not add pages");
  strand_unpack_arena_free(a, r[0]);
  strand_unpack_arena_free(a, r[2]);
  CHECK(strand_unpack_arena_free_pages(a) == 64, "all free");
  /* fragmentation: alternate pages taken, then a 2-page run is impossible until one is freed */
  strand_unpack_run_t one[64], by_page[64];
  for (int i = 0; i < 64; i++) {
    CHECK(strand_unpack_arena_alloc(a, 1, &one[i]), "page %d", i);
    by_page[one[i].off / 4096] = one[i];
  }
  for (int p = 0; p < 64; p += 2) strand_unpack_arena_free(a, by_page[p]);
  CHECK(!strand_unpack_arena_alloc(a, 8192, &x), "no 2-page run among single holes");
  strand_unpack_arena_free(a, by_page[1]);
  CHECK(strand_unpack_arena_alloc(a, 3 * 4096, &x) && x.off == 0, "pages 0..2 coalesce");
  strand_unpack_arena_free(a, x);
  for (int p = 3; p < 64; p += 2) strand_unpack_arena_free(a, by_page[p]);
  CHECK(strand_unpack_arena_free_pages(a) == 64, "all free again");
  strand_unpack_arena_release(b);
  strand_unpack_arena_release(a);
  CHECK(strand_unpack_arena_acquire(0, true, &a) != STRAND_SUCCESS, "size 0 refused");
  CHECK(strand_unpack_arena_acquire(((size_t)4 << 30) + 1, true, &a) != STRAND_SUCCESS,
        "> 4 GiB refused");
}

/* The ring as NCCL's kernel sees it, stepping head like waitPeer does. */
static void test_ring(void) {
  strand_unpack_arena_t *a = NULL;
  strand_unpack_ring_t *r = NULL;
  CHECK(strand_unpack_arena_acquire(1 << 20, true, &a) == STRAND_SUCCESS, "arena");
  CHECK(a && strand_unpack_ring_create(a, &r) == STRAND_SUCCESS, "ring");
  if (!r) {
    strand_unpack_arena_release(a);
    return;
  }
  const strand_unpack_handle_t *h = strand_unpack_ring_handle_host(r);
  strand_unpack_meta_t *m = strand_unpack_ring_meta_host(r);
  CHECK(h->head == UINT64_MAX, "head starts at UINT64_MAX, got %llu", (unsigned long long)h->head);
  CHECK(h->bounce_buf == strand_unpack_arena_device(a), "bounce base is the arena's");
  CHECK((void *)h->meta == (void *)m, "host mode: meta device pointer is the host one");
  strand_dev_handle_t dh;
  memset(&dh, 0, sizeof dh);
  strand_unpack_ring_fill_dev_handle(r, &dh);
  CHECK(dh.netDeviceType == STRAND_DEV_UNPACK && dh.netDeviceVersion == 7 && dh.size == 24 &&
        dh.needsProxyProgress == 1 && dh.handle == (void *)h, "device handle fields");

  /* Lock-step over 40 receives (wraps the 16 slots twice), every third of them zero-byte, with
   * up to 3 in flight; the "kernel" increments head and reads cnt[head % 16]. */
  uint64_t dev_head = h->head, seqs[40];
  strand_unpack_load_meta_t rec[3];
  int claimed = 0, consumed = 0;
  while (consumed < 40) {
    while (claimed < 40 && claimed - consumed < 3) {
      CHECK(strand_unpack_ring_claim(r, "test", &seqs[claimed]) == STRAND_SUCCESS, "claim");
      CHECK(seqs[claimed] == (uint64_t)claimed, "seq %llu", (unsigned long long)seqs[claimed]);
      claimed++;
    }
    int k = consumed;
    uint32_t n = k % 3 == 0 ? 0 : (uint32_t)(k % 3);
    for (uint32_t i = 0; i < n; i++)
      rec[i] = (strand_unpack_load_meta_t){{.src_off = (uint32_t)(k * 64 + i * 16), .len = 16,
                                             .dst_off = i * 16}};
    CHECK(strand_unpack_ring_publish(r, "test", seqs[k], rec, n) == STRAND_SUCCESS, "publish");
    dev_head++; /* waitPeer */
    unsigned slot = (unsigned)(dev_head % 16);
    CHECK(slot == (unsigned)(k % 16), "slot %u for receive %d", slot, k);
    CHECK(m->cnt[slot] == n, "cnt[%u] = %llu, want %u", slot, (unsigned long long)m->cnt[slot], n);
    for (uint32_t i = 0; i < n && i < m->cnt[slot]; i++)
      CHECK(m->mem[slot][i].src_off == rec[i].src_off && m->mem[slot][i].len == 16 &&
            m->mem[slot][i].dst_off == rec[i].dst_off, "record %u of slot %u", i, slot);
    CHECK(strand_unpack_ring_release(r, "test", seqs[k]) == STRAND_SUCCESS, "release %d", k);
    consumed++;
  }
  CHECK(strand_unpack_ring_head(r) == 40 && strand_unpack_ring_tail(r) == 40, "counters");

  /* Overflow: 16 claims fit, the 17th is an error and changes nothing. */
  uint64_t s[17];
  for (int i = 0; i < 16; i++) CHECK(strand_unpack_ring_claim(r, "test", &s[i]) == STRAND_SUCCESS, "c");
  CHECK(strand_unpack_ring_claim(r, "test", &s[16]) != STRAND_SUCCESS, "17th claim must fail");
  CHECK(strand_unpack_ring_tail(r) == 56, "tail unchanged by the refused claim");
  /* Out of order: publish two, release the second first -> refused, ring unchanged. */
  CHECK(strand_unpack_ring_publish(r, "test", s[0], NULL, 0) == STRAND_SUCCESS, "p0");
  CHECK(strand_unpack_ring_publish(r, "test", s[1], NULL, 0) == STRAND_SUCCESS, "p1");
  CHECK(strand_unpack_ring_publish(r, "test", s[1], NULL, 0) != STRAND_SUCCESS, "double publish");
  CHECK(strand_unpack_ring_release(r, "test", s[1]) != STRAND_SUCCESS, "out-of-order release");
  CHECK(strand_unpack_ring_head(r) == 40, "head unchanged");
  CHECK(strand_unpack_ring_release(r, "test", s[2]) != STRAND_SUCCESS, "unpublished release");
  CHECK(strand_unpack_ring_release(r, "test", s[0]) == STRAND_SUCCESS, "in order");
  CHECK(strand_unpack_ring_release(r, "test", s[1]) == STRAND_SUCCESS, "in order");
  CHECK(strand_unpack_ring_publish(r, "test", s[0], NULL, 0) != STRAND_SUCCESS, "released seq");
  CHECK(strand_unpack_ring_publish(r, "test", 99, NULL, 0) != STRAND_SUCCESS, "unclaimed seq");
  /* > 2048 records refused */
  strand_unpack_load_meta_t *big = calloc(2049, sizeof *big);
  CHECK(big && strand_unpack_ring_publish(r, "test", s[2], big, 2049) != STRAND_SUCCESS,
        "2049 records refused");
  CHECK(big && strand_unpack_ring_publish(r, "test", s[2], big, 2048) == STRAND_SUCCESS,
        "2048 records fine");
  free(big);
  strand_unpack_ring_destroy(r);
  strand_unpack_arena_release(a);
}

static void test_validate(void) {
  char why[256];
  strand_unpack_load_meta_t r[3] = {
      {{.src_off = 0, .len = 100, .dst_off = 0}},
      {{.src_off = 4096, .len = 50, .dst_off = 100}},
      {{.src_off = 8192, .len = 0, .dst_off = 150}},
  };
  CHECK(strand_unpack_validate(r, 3, 16384, 150, why, sizeof why) == 0, "valid: %s", why);
  CHECK(strand_unpack_validate(r, 0, 0, 0, why, sizeof why) == 0, "empty is valid");
  CHECK(strand_unpack_validate(r, 3, 16384, 149, why, sizeof why) != 0, "dst overrun");
  CHECK(strand_unpack_validate(r, 3, 4100, 150, why, sizeof why) != 0, "src overrun");
  r[1].dst_off = 99;
  CHECK(strand_unpack_validate(r, 3, 16384, 1000, why, sizeof why) != 0 && strstr(why, "overlap"),
        "overlap: %s", why);
  r[1].dst_off = 100;
  r[0].dst_off = UINT64_MAX - 10; /* wrap-around must not pass the bounds test */
  CHECK(strand_unpack_validate(r, 3, 16384, 1000, why, sizeof why) != 0, "dst wrap");
  r[0].dst_off = 0;
  CHECK(strand_unpack_validate(r, 2049, 16384, 1000, why, sizeof why) != 0, "2049 records");
  CHECK(strand_unpack_validate(NULL, 1, 16384, 1000, why, sizeof why) != 0, "NULL records");
}

/* Randomized: a receive cut into fragments of random size/alignment, scattered over shuffled
 * arena positions, gathered by unpack_ref into a buffer with guard bytes on both sides. */
static void test_random(void) {
  enum { ARENA = 1 << 22, GUARD = 64 };
  uint8_t *bounce = malloc(ARENA);
  uint8_t *want = malloc(1 << 20), *got = malloc((1 << 20) + 2 * GUARD);
  strand_unpack_load_meta_t *recs = malloc(2048 * sizeof *recs);
  if (!bounce || !want || !got || !recs) {
    CHECK(0, "out of memory");
    goto out;
  }
  for (size_t i = 0; i < ARENA; i++) bounce[i] = (uint8_t)rnd();
  for (int iter = 0; iter < 300; iter++) {
    uint32_t cnt = (uint32_t)(rnd() % 2049);
    uint64_t dst = 0;
    for (uint32_t i = 0; i < cnt; i++) {
      uint32_t len = (uint32_t)(rnd() % (iter % 3 == 0 ? 17 : 513)); /* 0-length included */
      uint32_t src = (uint32_t)(rnd() % (ARENA - len + 1));
      recs[i] = (strand_unpack_load_meta_t){{.src_off = src, .len = len, .dst_off = dst}};
      dst += len + rnd() % 4; /* gaps: bytes no record covers stay as they were */
    }
    /* shuffle record order: the kernel gives records to warps in any order */
    for (uint32_t i = cnt; i > 1; i--) {
      uint32_t j = (uint32_t)(rnd() % i);
      strand_unpack_load_meta_t t = recs[i - 1];
      recs[i - 1] = recs[j];
      recs[j] = t;
    }
    size_t size = (size_t)dst;
    if (size > (1 << 20)) continue;
    char why[256];
    CHECK(strand_unpack_validate(recs, cnt, ARENA, size, why, sizeof why) == 0, "%s", why);
    memset(got, 0xE7, size + 2 * GUARD);
    memset(want, 0xE7, size);
    for (uint32_t i = 0; i < cnt; i++) /* the byte-by-byte model */
      for (uint32_t b = 0; b < recs[i].len; b++) want[recs[i].dst_off + b] = bounce[recs[i].src_off + b];
    strand_unpack_ref(bounce, got + GUARD, recs, cnt);
    CHECK(memcmp(got + GUARD, want, size) == 0, "iteration %d: gather differs", iter);
    for (int g = 0; g < GUARD; g++)
      CHECK(got[g] == 0xE7 && got[GUARD + size + g] == 0xE7, "iteration %d: guard byte %d", iter, g);
  }
out:
  free(bounce);
  free(want);
  free(got);
  free(recs);
}

int main(void) {
  test_arena();
  test_ring();
  test_validate();
  test_random();
  printf("%s: %d failure(s)\n", failures ? "FAIL" : "PASS", failures);
  return failures ? 1 : 0;
}
