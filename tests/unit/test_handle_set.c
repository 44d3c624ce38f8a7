/* Unit tests of strand/handle_set.h: add/remove/contains, double add and double remove refused,
 * growth past many handles with tombstones, clear, and concurrent use. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <pthread.h>
#include <stdlib.h>

#include "strand/handle_set.h"

static void test_add_remove_contains(void **state) {
  (void)state;
  strand_handle_set_t s = STRAND_HANDLE_SET_INIT;
  int a = 0, b = 0;
  assert_false(strand_handle_set_contains(&s, &a));
  assert_false(strand_handle_set_remove(&s, &a)); /* empty set: nothing to remove */
  assert_int_equal(strand_handle_set_add(&s, &a), STRAND_SUCCESS);
  assert_int_equal(strand_handle_set_add(&s, &b), STRAND_SUCCESS);
  assert_true(strand_handle_set_contains(&s, &a));
  assert_int_equal(strand_handle_set_count(&s), 2);
  assert_true(strand_handle_set_remove(&s, &a));
  assert_false(strand_handle_set_contains(&s, &a));
  assert_false(strand_handle_set_remove(&s, &a)); /* the double deregistration */
  assert_true(strand_handle_set_contains(&s, &b));
  assert_int_equal(strand_handle_set_count(&s), 1);
  strand_handle_set_clear(&s);
}

static void test_refuses_null_and_duplicates(void **state) {
  (void)state;
  strand_handle_set_t s = STRAND_HANDLE_SET_INIT;
  int a = 0;
  assert_int_equal(strand_handle_set_add(&s, NULL), STRAND_INVALID_ARGUMENT);
  assert_int_equal(strand_handle_set_add(&s, &a), STRAND_SUCCESS);
  assert_int_equal(strand_handle_set_add(&s, &a), STRAND_INVALID_ARGUMENT);
  assert_int_equal(strand_handle_set_count(&s), 1);
  assert_false(strand_handle_set_contains(&s, NULL));
  assert_false(strand_handle_set_remove(&s, NULL));
  strand_handle_set_clear(&s);
}

static void test_growth_and_churn(void **state) {
  (void)state;
  enum { N = 5000 };
  strand_handle_set_t s = STRAND_HANDLE_SET_INIT;
  char *mem = malloc(N);
  assert_non_null(mem);
  for (int round = 0; round < 3; round++) {
    for (int i = 0; i < N; i++) assert_int_equal(strand_handle_set_add(&s, mem + i), STRAND_SUCCESS);
    assert_int_equal(strand_handle_set_count(&s), N);
    for (int i = 0; i < N; i += 2) assert_true(strand_handle_set_remove(&s, mem + i));
    for (int i = 0; i < N; i++) assert_int_equal(strand_handle_set_contains(&s, mem + i), i % 2 == 1);
    for (int i = 1; i < N; i += 2) assert_true(strand_handle_set_remove(&s, mem + i));
    assert_int_equal(strand_handle_set_count(&s), 0);
  }
  /* Many add/remove pairs on a small live set: tombstones must neither fill the table (every add
   * still succeeds) nor make it grow past what the peak number of live handles needed. */
  size_t peak_cap = s.cap;
  for (int i = 0; i < 100000; i++) {
    assert_int_equal(strand_handle_set_add(&s, mem + (i % N)), STRAND_SUCCESS);
    assert_true(strand_handle_set_remove(&s, mem + (i % N)));
  }
  assert_true(s.cap <= peak_cap);
  strand_handle_set_clear(&s);
  assert_int_equal(strand_handle_set_count(&s), 0);
  assert_int_equal(strand_handle_set_add(&s, mem), STRAND_SUCCESS); /* usable after clear */
  strand_handle_set_clear(&s);
  free(mem);
}

static strand_handle_set_t g_set = STRAND_HANDLE_SET_INIT;
static void *worker(void *arg) {
  char *base = arg;
  for (int r = 0; r < 200; r++) {
    for (int i = 0; i < 64; i++)
      if (strand_handle_set_add(&g_set, base + i) != STRAND_SUCCESS) return (void *)1;
    for (int i = 0; i < 64; i++)
      if (!strand_handle_set_remove(&g_set, base + i)) return (void *)1;
  }
  return NULL;
}

static void test_threads(void **state) {
  (void)state;
  static char mem[8][64];
  pthread_t t[8];
  for (int i = 0; i < 8; i++) assert_int_equal(pthread_create(&t[i], NULL, worker, mem[i]), 0);
  for (int i = 0; i < 8; i++) {
    void *r;
    pthread_join(t[i], &r);
    assert_null(r);
  }
  assert_int_equal(strand_handle_set_count(&g_set), 0);
  strand_handle_set_clear(&g_set);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_add_remove_contains),
      cmocka_unit_test(test_refuses_null_and_duplicates),
      cmocka_unit_test(test_growth_and_churn),
      cmocka_unit_test(test_threads),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
