/* Unit tests of strand/clock.h: the nanosecond carry into seconds, a deadline on a clock, and the
 * monotonic clock read (strand_now_ns, and strand_now_s of strand/net_layer.h). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <time.h>

#include "strand/clock.h"
#include "strand/net_layer.h"

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

/* strand_now_ns is CLOCK_MONOTONIC in nanoseconds (bracketed by clock_gettime), never goes back,
 * and strand_now_s is the same clock in seconds. */
static void test_now_is_the_monotonic_clock(void **state) {
  (void)state;
  struct timespec before, after;
  clock_gettime(CLOCK_MONOTONIC, &before);
  uint64_t t = strand_now_ns();
  double s = strand_now_s();
  clock_gettime(CLOCK_MONOTONIC, &after);
  uint64_t b = (uint64_t)before.tv_sec * 1000000000ull + (uint64_t)before.tv_nsec;
  uint64_t a = (uint64_t)after.tv_sec * 1000000000ull + (uint64_t)after.tv_nsec;
  assert_true(t >= b && t <= a);
  assert_true(s >= (double)b * 1e-9 - 1e-6 && s <= (double)a * 1e-9 + 1e-6);
  uint64_t prev = strand_now_ns();
  for (int i = 0; i < 100000; i++) {
    uint64_t now = strand_now_ns();
    assert_true(now >= prev);
    prev = now;
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_add_without_carry),
      cmocka_unit_test(test_add_carries_into_seconds),
      cmocka_unit_test(test_deadline_is_ahead_of_now),
      cmocka_unit_test(test_now_is_the_monotonic_clock),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
