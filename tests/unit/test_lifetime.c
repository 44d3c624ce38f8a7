/* Unit tests of strand/lifetime.h: setup on the first acquire only, teardown on the last release,
 * teardown deferred (with a WARN) while connections are open, a failed setup counted as nothing
 * and retried, unload, stray releases, many threads acquiring and releasing at once, and the
 * refusal of connection-making calls without a live context. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "strand/lifetime.h"
#include "strand/log.h"

static int g_setups, g_teardowns, g_open, g_warns;
static strand_result_t g_setup_rc;
static char g_last_warn[512];

static strand_result_t fake_setup(void) {
  if (g_setup_rc == STRAND_SUCCESS) g_setups++;
  return g_setup_rc;
}
static void fake_teardown(void) { g_teardowns++; }
static int fake_open_comms(void) { return g_open; }

static void capture_logger(strand_log_level_t level, unsigned long flags, const char *file,
                           int line, const char *fmt, ...) {
  (void)flags, (void)file, (void)line;
  if (level != STRAND_LOG_WARN) return;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(g_last_warn, sizeof g_last_warn, fmt, ap);
  va_end(ap);
  g_warns++;
}

static int reset(void **state) {
  (void)state;
  g_setups = g_teardowns = g_open = g_warns = 0;
  g_setup_rc = STRAND_SUCCESS;
  g_last_warn[0] = '\0';
  strand_log_init(capture_logger);
  return 0;
}

#define FRESH() {PTHREAD_MUTEX_INITIALIZER, 0, false, fake_setup, fake_teardown, fake_open_comms}

static void test_first_acquire_sets_up_last_release_tears_down(void **state) {
  (void)state;
  strand_lifetime_t lt = FRESH();
  assert_int_equal(strand_lifetime_acquire(&lt), STRAND_SUCCESS);
  assert_int_equal(strand_lifetime_acquire(&lt), STRAND_SUCCESS);
  assert_int_equal(strand_lifetime_acquire(&lt), STRAND_SUCCESS);
  assert_int_equal(g_setups, 1);
  assert_int_equal(strand_lifetime_contexts(&lt), 3);
  strand_lifetime_release(&lt);
  strand_lifetime_release(&lt);
  assert_int_equal(g_teardowns, 0);
  strand_lifetime_release(&lt);
  assert_int_equal(g_teardowns, 1);
  assert_int_equal(strand_lifetime_contexts(&lt), 0);
  /* A new first init after the last finalize sets up again. */
  assert_int_equal(strand_lifetime_acquire(&lt), STRAND_SUCCESS);
  assert_int_equal(g_setups, 2);
  strand_lifetime_release(&lt);
  assert_int_equal(g_teardowns, 2);
  assert_int_equal(g_warns, 0);
}

static void test_open_comms_defer_teardown_to_unload(void **state) {
  (void)state;
  strand_lifetime_t lt = FRESH();
  assert_int_equal(strand_lifetime_acquire(&lt), STRAND_SUCCESS);
  g_open = 3;
  strand_lifetime_release(&lt);
  assert_int_equal(g_teardowns, 0);
  assert_int_equal(g_warns, 1);
  assert_non_null(strstr(g_last_warn, "3 connections"));
  /* The next init reuses the state that was kept: no second setup. */
  assert_int_equal(strand_lifetime_acquire(&lt), STRAND_SUCCESS);
  assert_int_equal(g_setups, 1);
  strand_lifetime_release(&lt);
  assert_int_equal(g_teardowns, 0);
  strand_lifetime_unload(&lt);
  assert_int_equal(g_teardowns, 1);
  strand_lifetime_unload(&lt); /* twice (explicit + destructor) tears down once */
  assert_int_equal(g_teardowns, 1);
}

static void test_failed_setup_counts_nothing_and_is_retried(void **state) {
  (void)state;
  strand_lifetime_t lt = FRESH();
  g_setup_rc = STRAND_SYSTEM_ERROR;
  assert_int_equal(strand_lifetime_acquire(&lt), STRAND_SYSTEM_ERROR);
  assert_int_equal(strand_lifetime_contexts(&lt), 0);
  strand_lifetime_release(&lt); /* the failed init's finalize, if a caller makes one: ignored */
  strand_lifetime_unload(&lt);
  assert_int_equal(g_teardowns, 0);
  g_setup_rc = STRAND_SUCCESS;
  assert_int_equal(strand_lifetime_acquire(&lt), STRAND_SUCCESS);
  assert_int_equal(g_setups, 1);
  strand_lifetime_release(&lt);
  assert_int_equal(g_teardowns, 1);
}

static void test_stray_release_is_ignored(void **state) {
  (void)state;
  strand_lifetime_t lt = FRESH();
  strand_lifetime_release(&lt);
  assert_int_equal(strand_lifetime_contexts(&lt), 0);
  assert_int_equal(strand_lifetime_acquire(&lt), STRAND_SUCCESS);
  strand_lifetime_release(&lt);
  strand_lifetime_release(&lt);
  assert_int_equal(g_setups, 1);
  assert_int_equal(g_teardowns, 1);
}

static void test_no_callbacks(void **state) {
  (void)state;
  strand_lifetime_t lt = {PTHREAD_MUTEX_INITIALIZER, 0, false, NULL, NULL, NULL};
  assert_int_equal(strand_lifetime_acquire(&lt), STRAND_SUCCESS);
  strand_lifetime_release(&lt);
  assert_int_equal(strand_lifetime_contexts(&lt), 0);
}

static strand_lifetime_t g_shared = FRESH();
static void *churn(void *arg) {
  (void)arg;
  for (int i = 0; i < 2000; i++) {
    if (strand_lifetime_acquire(&g_shared) != STRAND_SUCCESS) return (void *)1;
    strand_lifetime_release(&g_shared);
  }
  return NULL;
}

static void test_threads_balance(void **state) {
  (void)state;
  pthread_t t[8];
  for (int i = 0; i < 8; i++) assert_int_equal(pthread_create(&t[i], NULL, churn, NULL), 0);
  for (int i = 0; i < 8; i++) {
    void *r;
    pthread_join(t[i], &r);
    assert_null(r);
  }
  assert_int_equal(strand_lifetime_contexts(&g_shared), 0);
  assert_true(g_setups >= 1);
  assert_int_equal(g_setups, g_teardowns); /* every setup was undone exactly once */
}

/* The macro form, as plugins use it: its destructor runs at exit (nothing to observe there). */
STRAND_LIFETIME(g_macro_life, fake_setup, fake_teardown, NULL);
static void test_macro_defines_a_usable_lifetime(void **state) {
  (void)state;
  assert_int_equal(strand_lifetime_acquire(&g_macro_life), STRAND_SUCCESS);
  assert_int_equal(strand_lifetime_contexts(&g_macro_life), 1);
  strand_lifetime_release(&g_macro_life);
  assert_int_equal(g_teardowns, 1);
}

/* Connection-making calls are refused (WARN + ncclInvalidUsage) before the first init and after
 * the last finalize, and allowed while any context is live. */
static void test_require_refuses_without_a_live_context(void **state) {
  (void)state;
  strand_lifetime_t lt = FRESH();
  assert_int_equal(strand_lifetime_require(&lt, "p", "listen"), STRAND_INVALID_USAGE);
  assert_int_equal(g_warns, 1);
  assert_non_null(strstr(g_last_warn, "listen"));
  assert_int_equal(strand_lifetime_acquire(&lt), STRAND_SUCCESS);
  assert_int_equal(strand_lifetime_acquire(&lt), STRAND_SUCCESS);
  strand_lifetime_release(&lt);
  assert_int_equal(strand_lifetime_require(&lt, "p", "connect"), STRAND_SUCCESS);
  strand_lifetime_release(&lt);
  assert_int_equal(strand_lifetime_require(&lt, "p", "connect"), STRAND_INVALID_USAGE);
  assert_int_equal(g_warns, 2);
  assert_non_null(strstr(g_last_warn, "after the last finalize"));
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup(test_first_acquire_sets_up_last_release_tears_down, reset),
      cmocka_unit_test_setup(test_open_comms_defer_teardown_to_unload, reset),
      cmocka_unit_test_setup(test_failed_setup_counts_nothing_and_is_retried, reset),
      cmocka_unit_test_setup(test_stray_release_is_ignored, reset),
      cmocka_unit_test_setup(test_no_callbacks, reset),
      cmocka_unit_test_setup(test_threads_balance, reset),
      cmocka_unit_test_setup(test_macro_defines_a_usable_lifetime, reset),
      cmocka_unit_test_setup(test_require_refuses_without_a_live_context, reset),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
