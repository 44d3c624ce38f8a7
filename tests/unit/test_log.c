/* Unit tests of strand/log.h: forwarding to an NCCL-style logger (level, flags, file, line, prefix),
 * the NCCL_DEBUG / NCCL_DEBUG_SUBSYS grammar, the stderr fallback format, truncation and
 * concurrent use. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "strand/log.h"

#define MAX_CAPTURED 16
typedef struct {
  strand_log_level_t level;
  unsigned long flags;
  char file[256];
  int line;
  char msg[4096];
} captured_t;

static captured_t g_cap[MAX_CAPTURED];
static atomic_int g_ncap;

static void capture_logger(strand_log_level_t level, unsigned long flags, const char *file,
                           int line, const char *fmt, ...) {
  int i = atomic_fetch_add(&g_ncap, 1);
  if (i >= MAX_CAPTURED) return;
  g_cap[i].level = level;
  g_cap[i].flags = flags;
  snprintf(g_cap[i].file, sizeof(g_cap[i].file), "%s", file);
  g_cap[i].line = line;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(g_cap[i].msg, sizeof(g_cap[i].msg), fmt, ap);
  va_end(ap);
}

static int setup(void **state) {
  (void)state;
  atomic_store(&g_ncap, 0);
  memset(g_cap, 0, sizeof(g_cap));
  unsetenv("NCCL_DEBUG");
  unsetenv("NCCL_DEBUG_SUBSYS");
  strand_log_reload_env();
  strand_log_set_prefix("strand-test");
  strand_log_init(capture_logger);
  strand_log_set_fallback_stream(NULL);
  return 0;
}

static void test_parse_level(void **state) {
  (void)state;
  bool ok;
  assert_int_equal(strand_log_parse_level("INFO", &ok), STRAND_LOG_INFO);
  assert_true(ok);
  assert_int_equal(strand_log_parse_level("trace", &ok), STRAND_LOG_TRACE);
  assert_int_equal(strand_log_parse_level("Warn", &ok), STRAND_LOG_WARN);
  assert_int_equal(strand_log_parse_level("VERSION", &ok), STRAND_LOG_VERSION);
  assert_int_equal(strand_log_parse_level("NONE", &ok), STRAND_LOG_NONE);
  assert_int_equal(strand_log_parse_level("ABORT", &ok), STRAND_LOG_ABORT);
  assert_true(ok);
  assert_int_equal(strand_log_parse_level("verbose", &ok), STRAND_LOG_WARN);
  assert_false(ok);
  assert_int_equal(strand_log_parse_level(NULL, &ok), STRAND_LOG_WARN);
  assert_true(ok);
  assert_int_equal(strand_log_parse_level("", NULL), STRAND_LOG_WARN);
}

static void test_parse_subsys(void **state) {
  (void)state;
  const unsigned long def = STRAND_SUBSYS_INIT | STRAND_SUBSYS_BOOTSTRAP | STRAND_SUBSYS_ENV;
  assert_int_equal(strand_log_parse_subsys(NULL), def);
  assert_int_equal(strand_log_parse_subsys(""), def);
  assert_int_equal(strand_log_parse_subsys("INIT,NET"), STRAND_SUBSYS_INIT | STRAND_SUBSYS_NET);
  assert_int_equal(strand_log_parse_subsys("init, net"), STRAND_SUBSYS_INIT | STRAND_SUBSYS_NET);
  assert_int_equal(strand_log_parse_subsys("NET,BOGUS"), STRAND_SUBSYS_NET);
  assert_int_equal(strand_log_parse_subsys("^NET"), ~(unsigned long)STRAND_SUBSYS_NET);
  assert_int_equal(strand_log_parse_subsys("^INIT,ENV"),
                   ~(unsigned long)(STRAND_SUBSYS_INIT | STRAND_SUBSYS_ENV));
  assert_int_equal(strand_log_parse_subsys("ALL"), STRAND_SUBSYS_ALL);
  assert_int_equal(strand_log_parse_subsys("ALLOC"), STRAND_SUBSYS_ALLOC); /* not a prefix match */
  assert_int_equal(strand_log_parse_subsys("ALLOC_HOST,RAS"),
                   STRAND_SUBSYS_ALLOC_HOST | STRAND_SUBSYS_RAS);
  assert_int_equal(strand_log_parse_subsys("PROXY,BOOTSTRAP,REG,PROFILE,DESTROY,TUNING,GRAPH"),
                   STRAND_SUBSYS_PROXY | STRAND_SUBSYS_BOOTSTRAP | STRAND_SUBSYS_REG |
                       STRAND_SUBSYS_PROFILE | STRAND_SUBSYS_DESTROY | STRAND_SUBSYS_TUNING |
                       STRAND_SUBSYS_GRAPH);
}

static void test_forward_to_nccl_logger(void **state) {
  (void)state;
  strand_log_set_prefix("strand-socket");
  int line = __LINE__ + 1;
  STRAND_WARN("connect to %s failed: %s", "10.0.0.2:5000", "Connection refused");
  assert_int_equal(atomic_load(&g_ncap), 1);
  assert_int_equal(g_cap[0].level, STRAND_LOG_WARN);
  assert_true(g_cap[0].flags == STRAND_SUBSYS_ALL);
  assert_string_equal(g_cap[0].file, __FILE__);
  assert_int_equal(g_cap[0].line, line);
  assert_string_equal(g_cap[0].msg,
                      "NET/strand-socket : connect to 10.0.0.2:5000 failed: Connection refused");
  assert_true(strand_log_get_logger() == capture_logger);
  char buf[64];
  assert_string_equal(strand_log_get_prefix(buf, sizeof(buf)), "strand-socket");

  /* No prefix: the message alone. */
  strand_log_set_prefix("");
  STRAND_WARN("bare");
  assert_string_equal(g_cap[1].msg, "bare");
  strand_log_set_prefix(NULL);
  STRAND_WARN("bare again");
  assert_string_equal(g_cap[2].msg, "bare again");
}

static void test_filter(void **state) {
  (void)state;
  /* Default (NCCL_DEBUG unset): only WARN. */
  STRAND_INFO(STRAND_SUBSYS_INIT, "hidden");
  STRAND_TRACE(STRAND_SUBSYS_INIT, "hidden");
  assert_int_equal(atomic_load(&g_ncap), 0);

  strand_log_set_filter(STRAND_LOG_INFO, STRAND_SUBSYS_NET);
  STRAND_INFO(STRAND_SUBSYS_NET, "net info %d", 1);
  STRAND_INFO(STRAND_SUBSYS_INIT, "init info");                     /* masked out */
  STRAND_INFO(STRAND_SUBSYS_INIT | STRAND_SUBSYS_NET, "either bit"); /* one bit suffices */
  STRAND_TRACE(STRAND_SUBSYS_NET, "trace");                         /* level too high */
  assert_int_equal(atomic_load(&g_ncap), 2);
  assert_int_equal(g_cap[0].level, STRAND_LOG_INFO);
  assert_int_equal(g_cap[0].flags, STRAND_SUBSYS_NET);
  assert_string_equal(g_cap[0].msg, "NET/strand-test : net info 1");
  assert_string_equal(g_cap[1].msg, "NET/strand-test : either bit");

  strand_log_set_filter(STRAND_LOG_TRACE, STRAND_SUBSYS_ALL);
  STRAND_TRACE(STRAND_SUBSYS_P2P, "now traced");
  assert_int_equal(atomic_load(&g_ncap), 3);
  assert_int_equal(g_cap[2].level, STRAND_LOG_TRACE);

  /* NONE: WARN is still handed to NCCL's logger (NCCL records it for ncclGetLastError). */
  strand_log_set_filter(STRAND_LOG_NONE, 0);
  assert_true(strand_log_enabled(STRAND_LOG_WARN, STRAND_SUBSYS_ALL));
  assert_false(strand_log_enabled(STRAND_LOG_INFO, STRAND_SUBSYS_ALL));
  STRAND_WARN("still forwarded");
  assert_int_equal(atomic_load(&g_ncap), 4);
}

static void test_env_filter(void **state) {
  (void)state;
  setenv("NCCL_DEBUG", "info", 1);
  setenv("NCCL_DEBUG_SUBSYS", "^INIT", 1);
  strand_log_reload_env();
  assert_true(strand_log_enabled(STRAND_LOG_INFO, STRAND_SUBSYS_NET));
  assert_false(strand_log_enabled(STRAND_LOG_INFO, STRAND_SUBSYS_INIT));
  assert_false(strand_log_enabled(STRAND_LOG_TRACE, STRAND_SUBSYS_NET));
  /* init re-reads the environment (NCCL may have loaded nccl.conf into it). */
  setenv("NCCL_DEBUG", "TRACE", 1);
  unsetenv("NCCL_DEBUG_SUBSYS");
  strand_log_init(capture_logger);
  assert_true(strand_log_enabled(STRAND_LOG_TRACE, STRAND_SUBSYS_INIT));
  assert_false(strand_log_enabled(STRAND_LOG_TRACE, STRAND_SUBSYS_NET)); /* default mask */
  /* ... unless the filter is pinned. */
  strand_log_set_filter(STRAND_LOG_WARN, 0);
  strand_log_init(capture_logger);
  assert_false(strand_log_enabled(STRAND_LOG_INFO, STRAND_SUBSYS_INIT));
  strand_log_reload_env();
  assert_true(strand_log_enabled(STRAND_LOG_INFO, STRAND_SUBSYS_INIT));
  unsetenv("NCCL_DEBUG");
  strand_log_reload_env();
}

static char *read_all(FILE *f) {
  fflush(f);
  long n = ftell(f);
  rewind(f);
  char *buf = calloc(1, (size_t)n + 1);
  assert_non_null(buf);
  assert_int_equal(fread(buf, 1, (size_t)n, f), (size_t)n);
  return buf;
}

static void test_fallback_stream(void **state) {
  (void)state;
  FILE *f = tmpfile();
  assert_non_null(f);
  strand_log_init(NULL);
  strand_log_set_fallback_stream(f);
  strand_log_set_prefix("strand-socket");
  strand_log_set_filter(STRAND_LOG_INFO, STRAND_SUBSYS_ALL);
  int line = __LINE__ + 1;
  STRAND_WARN("boom %d", 7);
  STRAND_INFO(STRAND_SUBSYS_NET, "hello");
  STRAND_TRACE(STRAND_SUBSYS_NET, "not at INFO");
  char *out = read_all(f);
  char want[128];
  snprintf(want, sizeof(want), "[strand-socket] WARN test_log.c:%d boom 7\n", line);
  assert_non_null(strstr(out, want));
  assert_non_null(strstr(out, "[strand-socket] INFO hello\n"));
  assert_null(strstr(out, "not at INFO"));
  /* "host:pid:tid [" in front */
  char pid[32];
  snprintf(pid, sizeof(pid), ":%d:", (int)getpid());
  assert_non_null(strstr(out, pid));
  free(out);

  /* A level below WARN silences the fallback completely. */
  rewind(f);
  assert_int_equal(ftruncate(fileno(f), 0), 0);
  strand_log_set_filter(STRAND_LOG_NONE, STRAND_SUBSYS_ALL);
  assert_false(strand_log_enabled(STRAND_LOG_WARN, STRAND_SUBSYS_ALL));
  STRAND_WARN("silenced");
  out = read_all(f);
  assert_string_equal(out, "");
  free(out);
  strand_log_set_fallback_stream(NULL);
  fclose(f);
}

static void test_truncation(void **state) {
  (void)state;
  char big[3000];
  memset(big, 'x', sizeof(big) - 1);
  big[sizeof(big) - 1] = '\0';
  STRAND_WARN("%s", big);
  assert_int_equal(atomic_load(&g_ncap), 1);
  const char *msg = g_cap[0].msg + strlen("NET/strand-test : ");
  assert_int_equal(strlen(msg), STRAND_LOG_MAX_MESSAGE - 1);
  assert_string_equal(msg + strlen(msg) - 3, "...");
  /* Long prefixes are cut, not overflowed. */
  char long_prefix[200];
  memset(long_prefix, 'p', sizeof(long_prefix) - 1);
  long_prefix[sizeof(long_prefix) - 1] = '\0';
  strand_log_set_prefix(long_prefix);
  char buf[256];
  assert_int_equal(strlen(strand_log_get_prefix(buf, sizeof(buf))), STRAND_LOG_MAX_PREFIX - 1);
}

static atomic_int g_bad;
static void check_logger(strand_log_level_t level, unsigned long flags, const char *file,
                         int line, const char *fmt, ...) {
  (void)level, (void)flags, (void)file, (void)line;
  char msg[256];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof(msg), fmt, ap);
  va_end(ap);
  /* The prefix is always one of the two whole values, never a mix. */
  if (strncmp(msg, "NET/alpha : m", 13) != 0 && strncmp(msg, "NET/beta-longer : m", 19) != 0)
    atomic_fetch_add(&g_bad, 1);
  atomic_fetch_add(&g_ncap, 1);
}

static void *log_thread(void *arg) {
  (void)arg;
  for (int i = 0; i < 2000; i++) STRAND_INFO(STRAND_SUBSYS_NET, "m%d", i);
  return NULL;
}

static void *prefix_thread(void *arg) {
  (void)arg;
  for (int i = 0; i < 2000; i++) strand_log_set_prefix(i % 2 ? "alpha" : "beta-longer");
  return NULL;
}

static void test_concurrent(void **state) {
  (void)state;
  strand_log_set_prefix("alpha");
  strand_log_init(check_logger);
  strand_log_set_filter(STRAND_LOG_INFO, STRAND_SUBSYS_NET);
  atomic_store(&g_bad, 0);
  pthread_t th[4];
  for (int i = 0; i < 3; i++) assert_int_equal(pthread_create(&th[i], NULL, log_thread, NULL), 0);
  assert_int_equal(pthread_create(&th[3], NULL, prefix_thread, NULL), 0);
  for (int i = 0; i < 4; i++) pthread_join(th[i], NULL);
  assert_int_equal(atomic_load(&g_ncap), 3 * 2000);
  assert_int_equal(atomic_load(&g_bad), 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup(test_parse_level, setup),
      cmocka_unit_test_setup(test_parse_subsys, setup),
      cmocka_unit_test_setup(test_forward_to_nccl_logger, setup),
      cmocka_unit_test_setup(test_filter, setup),
      cmocka_unit_test_setup(test_env_filter, setup),
      cmocka_unit_test_setup(test_fallback_stream, setup),
      cmocka_unit_test_setup(test_truncation, setup),
      cmocka_unit_test_setup(test_concurrent, setup),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
