/* Unit tests of strand/pool.h: capacity, O(1) get/put order, index/at, iteration, misuse detection
 * (double put, foreign and interior pointers leave the pool intact), flags, and the thread-safe
 * variant under concurrent get/put. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "strand/log.h"
#include "strand/pool.h"

typedef struct {
  int id;
  char payload[20];
} req_t;

/* Capture WARNs so the tests can check misuse is reported (and keep the output clean). */
static int g_warns;
static char g_last_warn[512];
static void capture_logger(strand_log_level_t level, unsigned long flags, const char *file,
                           int line, const char *fmt, ...) {
  (void)flags, (void)file, (void)line;
  if (level != STRAND_LOG_WARN) return;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(g_last_warn, sizeof(g_last_warn), fmt, ap);
  va_end(ap);
  g_warns++;
}

static int setup(void **state) {
  (void)state;
  g_warns = 0;
  g_last_warn[0] = '\0';
  strand_log_init(capture_logger);
  return 0;
}

static void test_capacity_and_exhaustion(void **state) {
  (void)state;
  strand_pool_t pool;
  assert_int_equal(strand_pool_init(&pool, "reqs", sizeof(req_t), 32 * 8, 0), STRAND_SUCCESS);
  assert_int_equal(strand_pool_capacity(&pool), 256);
  assert_int_equal(strand_pool_used(&pool), 0);
  void *elems[256];
  for (int i = 0; i < 256; i++) {
    elems[i] = strand_pool_get(&pool);
    assert_non_null(elems[i]);
    assert_int_equal(((uintptr_t)elems[i]) % 16, 0);
    /* Fresh pool: elements come out in index order. */
    assert_int_equal(strand_pool_index(&pool, elems[i]), i);
    assert_ptr_equal(strand_pool_at(&pool, (uint32_t)i), elems[i]);
    memset(elems[i], 0xAB, sizeof(req_t)); /* the whole element is usable */
  }
  assert_int_equal(strand_pool_used(&pool), 256);
  assert_null(strand_pool_get(&pool));
  assert_int_equal(g_warns, 0); /* exhaustion is not a WARN */
  /* All distinct. */
  for (int i = 1; i < 256; i++) assert_true(elems[i] != elems[i - 1]);
  /* LIFO reuse: the last element put is the next one handed out. */
  assert_int_equal(strand_pool_put(&pool, elems[100]), STRAND_SUCCESS);
  assert_int_equal(strand_pool_put(&pool, elems[7]), STRAND_SUCCESS);
  assert_ptr_equal(strand_pool_get(&pool), elems[7]);
  assert_ptr_equal(strand_pool_get(&pool), elems[100]);
  for (int i = 0; i < 256; i++) assert_int_equal(strand_pool_put(&pool, elems[i]), STRAND_SUCCESS);
  assert_int_equal(strand_pool_used(&pool), 0);
  strand_pool_destroy(&pool);
  assert_int_equal(g_warns, 0);
}

static void test_misuse_is_refused(void **state) {
  (void)state;
  strand_pool_t pool, other;
  assert_int_equal(strand_pool_init(&pool, "reqs", sizeof(req_t), 8, 0), STRAND_SUCCESS);
  assert_int_equal(strand_pool_init(&other, "other", sizeof(req_t), 8, 0), STRAND_SUCCESS);
  req_t *a = strand_pool_get(&pool), *b = strand_pool_get(&pool);
  req_t *o = strand_pool_get(&other);
  req_t stack_req;

  assert_int_equal(strand_pool_put(&pool, a), STRAND_SUCCESS);
  /* double put */
  assert_int_equal(strand_pool_put(&pool, a), STRAND_INTERNAL_ERROR);
  assert_int_equal(g_warns, 1);
  assert_non_null(strstr(g_last_warn, "reqs"));
  assert_non_null(strstr(g_last_warn, "not in use"));
  /* foreign pointers: another pool's element, a stack object, an interior pointer, NULL, and
   * one past the end */
  assert_int_equal(strand_pool_put(&pool, o), STRAND_INTERNAL_ERROR);
  assert_int_equal(strand_pool_put(&pool, &stack_req), STRAND_INTERNAL_ERROR);
  assert_int_equal(strand_pool_put(&pool, (char *)b + 4), STRAND_INTERNAL_ERROR);
  assert_int_equal(strand_pool_put(&pool, NULL), STRAND_INTERNAL_ERROR);
  assert_int_equal(strand_pool_put(&pool, (char *)strand_pool_at(&pool, 7) + pool.stride),
                   STRAND_INTERNAL_ERROR);
  assert_int_equal(g_warns, 6);
  assert_non_null(strstr(g_last_warn, "not an element"));
  assert_int_equal(strand_pool_index(&pool, o), -1);
  assert_int_equal(strand_pool_index(&pool, (char *)b + 4), -1);
  assert_false(strand_pool_in_use(&pool, o));
  assert_false(strand_pool_in_use(&pool, a));
  assert_true(strand_pool_in_use(&pool, b));

  /* The pool is intact: exactly 7 more gets succeed, all distinct and different from b. */
  assert_int_equal(strand_pool_used(&pool), 1);
  void *got[8];
  for (int i = 0; i < 7; i++) {
    got[i] = strand_pool_get(&pool);
    assert_non_null(got[i]);
    assert_true(got[i] != b);
    for (int j = 0; j < i; j++) assert_true(got[i] != got[j]);
  }
  assert_null(strand_pool_get(&pool));
  strand_pool_destroy(&pool);
  assert_int_equal(g_warns, 7); /* destroyed with elements in use */
  assert_non_null(strstr(g_last_warn, "still in use"));
  /* an owner closing with requests in flight frees them silently */
  assert_int_equal(strand_pool_used(&other), 1);
  strand_pool_destroy_in_flight(&other);
  assert_int_equal(g_warns, 7);
  assert_null(strand_pool_get(&other)); /* destroyed */
  strand_pool_destroy(&other); /* second destroy is a no-op */
  strand_pool_destroy_in_flight(&other);
  (void)o;
}

static void test_bad_init(void **state) {
  (void)state;
  strand_pool_t pool;
  assert_int_equal(strand_pool_init(&pool, "x", 0, 8, 0), STRAND_INVALID_ARGUMENT);
  assert_int_equal(strand_pool_init(&pool, "x", 8, 0, 0), STRAND_INVALID_ARGUMENT);
  assert_int_equal(strand_pool_init(&pool, "x", 8, STRAND_POOL_MAX_CAPACITY + 1, 0),
                   STRAND_INVALID_ARGUMENT);
  assert_int_equal(strand_pool_init(&pool, "x", 8, 8, 0x100), STRAND_INVALID_ARGUMENT);
  assert_int_equal(strand_pool_init(NULL, "x", 8, 8, 0), STRAND_INVALID_ARGUMENT);
  /* A pool whose init failed is inert. */
  assert_null(strand_pool_get(&pool));
  assert_int_equal(strand_pool_put(&pool, &pool), STRAND_INTERNAL_ERROR);
  assert_int_equal(strand_pool_capacity(&pool), 0);
  strand_pool_destroy(&pool);
}

static void test_flags(void **state) {
  (void)state;
  strand_pool_t pool;
  assert_int_equal(strand_pool_init(&pool, "zero", 24, 4,
                                    STRAND_POOL_ZERO_ON_GET | STRAND_POOL_CACHELINE_ALIGN),
                   STRAND_SUCCESS);
  unsigned char *e = strand_pool_get(&pool);
  assert_int_equal((uintptr_t)e % 64, 0);
  assert_int_equal(pool.stride, 64);
  memset(e, 0xFF, 24);
  assert_int_equal(strand_pool_put(&pool, e), STRAND_SUCCESS);
  e = strand_pool_get(&pool);
  for (int i = 0; i < 24; i++) assert_int_equal(e[i], 0);
  unsigned char *f = strand_pool_get(&pool);
  assert_int_equal((uintptr_t)f % 64, 0);
  strand_pool_destroy(&pool);

  /* Without ZERO_ON_GET the contents survive a put/get (documented: no clearing). */
  assert_int_equal(strand_pool_init(&pool, "keep", 8, 1, 0), STRAND_SUCCESS);
  uint64_t *v = strand_pool_get(&pool);
  *v = 42;
  strand_pool_put(&pool, v);
  v = strand_pool_get(&pool);
  assert_int_equal(*v, 42);
  strand_pool_put(&pool, v);
  strand_pool_destroy(&pool);
}

static void count_cb(void *elem, void *arg) {
  int *sum = arg;
  *sum += ((req_t *)elem)->id;
}

static void test_iteration(void **state) {
  (void)state;
  strand_pool_t pool;
  assert_int_equal(strand_pool_init(&pool, "iter", sizeof(req_t), 16, STRAND_POOL_THREAD_SAFE),
                   STRAND_SUCCESS);
  req_t *r[16];
  for (int i = 0; i < 16; i++) {
    r[i] = strand_pool_get(&pool);
    r[i]->id = i;
  }
  for (int i = 0; i < 16; i += 3) strand_pool_put(&pool, r[i]); /* frees 0,3,6,9,12,15 */
  uint32_t cursor = 0;
  void *e;
  int seen = 0, last = -1;
  while ((e = strand_pool_next_used(&pool, &cursor)) != NULL) {
    int id = ((req_t *)e)->id;
    assert_true(id % 3 != 0);
    assert_true(id > last); /* index order */
    last = id;
    seen++;
    if (id == 4) strand_pool_put(&pool, e); /* putting during the walk is allowed */
  }
  assert_int_equal(seen, 10);
  assert_int_equal(strand_pool_used(&pool), 9);
  int sum = 0;
  assert_int_equal(strand_pool_foreach(&pool, count_cb, &sum), 9);
  assert_int_equal(sum, 1 + 2 + 5 + 7 + 8 + 10 + 11 + 13 + 14);
  /* Empty pool: the walk ends at once. */
  cursor = 0;
  for (int i = 0; i < 16; i++)
    if (strand_pool_in_use(&pool, r[i])) strand_pool_put(&pool, r[i]);
  assert_null(strand_pool_next_used(&pool, &cursor));
  strand_pool_destroy(&pool);
  assert_int_equal(g_warns, 0);
}

typedef struct {
  strand_pool_t *pool;
  int rounds;
  int errors;
} worker_arg_t;

static void *worker(void *p) {
  worker_arg_t *w = p;
  for (int r = 0; r < w->rounds; r++) {
    req_t *mine[4];
    int n = 0;
    for (int k = 0; k < 4; k++) {
      mine[n] = strand_pool_get(w->pool);
      if (mine[n]) {
        /* Nobody else may hold this element: stamp it and check the stamp below. */
        mine[n]->id = (int)(intptr_t)pthread_self() ^ r ^ n;
        n++;
      }
    }
    for (int k = 0; k < n; k++) {
      if (mine[k]->id != ((int)(intptr_t)pthread_self() ^ r ^ k)) w->errors++;
      if (strand_pool_put(w->pool, mine[k]) != STRAND_SUCCESS) w->errors++;
    }
  }
  return NULL;
}

static void test_thread_safe_concurrency(void **state) {
  (void)state;
  strand_pool_t pool;
  /* Fewer elements than 4 threads x 4 wanted, so exhaustion happens too. */
  assert_int_equal(strand_pool_init(&pool, "mt", sizeof(req_t), 12, STRAND_POOL_THREAD_SAFE),
                   STRAND_SUCCESS);
  pthread_t th[4];
  worker_arg_t args[4];
  for (int i = 0; i < 4; i++) {
    args[i] = (worker_arg_t){&pool, 20000, 0};
    assert_int_equal(pthread_create(&th[i], NULL, worker, &args[i]), 0);
  }
  for (int i = 0; i < 4; i++) {
    pthread_join(th[i], NULL);
    assert_int_equal(args[i].errors, 0);
  }
  assert_int_equal(strand_pool_used(&pool), 0);
  /* Every element is free exactly once: 12 gets succeed, the 13th does not. */
  for (int i = 0; i < 12; i++) assert_non_null(strand_pool_get(&pool));
  assert_null(strand_pool_get(&pool));
  strand_pool_destroy(&pool);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup(test_capacity_and_exhaustion, setup),
      cmocka_unit_test_setup(test_misuse_is_refused, setup),
      cmocka_unit_test_setup(test_bad_init, setup),
      cmocka_unit_test_setup(test_flags, setup),
      cmocka_unit_test_setup(test_iteration, setup),
      cmocka_unit_test_setup(test_thread_safe_concurrency, setup),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
