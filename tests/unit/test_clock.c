/* Unit tests of strand/clock.h: the nanosecond carry into seconds, and a deadline on a clock. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <time.h>

#include "strand/clock.h"

static void test_add_without_carry(void **state) {
  (void)state;
  struct timespec t = strand_timespec_add_ns((struct timespec){.tv_sec = 5, .tv_nsec = 100}, 900);
  assert_int_equal(t.tv_sec, 5);
  assert_int_equal(t.tv_nsec, 1000);
}

static void test_add_carries_into_seconds(void **state) {
  (void)state;
  /* 0.9 s + 0.2 s: one second carried, 0.1 s left */
  struct timespec t =
      strand_timespec_add_ns((struct timespec){.tv_sec = 7, .tv_nsec = 900000000}, 200000000);
  assert_int_equal(t.tv_sec, 8);
  assert_int_equal(t.tv_nsec, 100000000);
  /* exactly one second's worth of nanoseconds lands on a whole second */
  t = strand_timespec_add_ns((struct timespec){.tv_sec = 1, .tv_nsec = 999999999}, 1);
  assert_int_equal(t.tv_sec, 2);
  assert_int_equal(t.tv_nsec, 0);
  /* several seconds at once, and the largest tv_nsec plus the largest remainder */
  t = strand_timespec_add_ns((struct timespec){.tv_sec = 0, .tv_nsec = 999999999},
                             3ull * 1000000000ull + 999999999ull);
  assert_int_equal(t.tv_sec, 4);
  assert_int_equal(t.tv_nsec, 999999998);
  t = strand_timespec_add_ns((struct timespec){.tv_sec = 3, .tv_nsec = 0}, 0);
  assert_int_equal(t.tv_sec, 3);
  assert_int_equal(t.tv_nsec, 0);
}

static void test_deadline_is_ahead_of_now(void **state) {
  (void)state;
  struct timespec before, after;
  clock_gettime(CLOCK_MONOTONIC, &before);
  struct timespec d = strand_deadline_in_ns(CLOCK_MONOTONIC, 250000000);
  clock_gettime(CLOCK_MONOTONIC, &after);
  double b = (double)before.tv_sec + (double)before.tv_nsec * 1e-9;
  double a = (double)after.tv_sec + (double)after.tv_nsec * 1e-9;
  double x = (double)d.tv_sec + (double)d.tv_nsec * 1e-9;
  assert_true(x >= b + 0.25 - 1e-9);
  assert_true(x <= a + 0.25 + 1e-9);
  assert_true(d.tv_nsec >= 0 && d.tv_nsec < 1000000000);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_add_without_carry),
      cmocka_unit_test(test_add_carries_into_seconds),
      cmocka_unit_test(test_deadline_is_ahead_of_now),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
