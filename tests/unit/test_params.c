/* Unit tests of strand/params.h: defaults, primary and alias variables, read-once caching, every
 * parse rule, bad values (clear WARN, failure, never the default), registry errors, dump, unknown
 * variable detection with suggestions, markdown output and concurrent first reads. */
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

#include "strand/log.h"
#include "strand/params.h"

/* ---- log capture ----------------------------------------------------------------------------- */

#define MAX_LINES 64
static char g_lines[MAX_LINES][512];
static strand_log_level_t g_levels[MAX_LINES];
static atomic_int g_nlines;

static void capture_logger(strand_log_level_t level, unsigned long flags, const char *file,
                           int line, const char *fmt, ...) {
  (void)flags, (void)file, (void)line;
  int i = atomic_fetch_add(&g_nlines, 1);
  if (i >= MAX_LINES) return;
  g_levels[i] = level;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(g_lines[i], sizeof(g_lines[i]), fmt, ap);
  va_end(ap);
}

static int count_warns(void) {
  int n = 0, total = atomic_load(&g_nlines);
  for (int i = 0; i < total && i < MAX_LINES; i++) n += g_levels[i] == STRAND_LOG_WARN;
  return n;
}

/* Index of the first captured line containing all of the given words, or -1. */
static int find_line(const char *a, const char *b, const char *c) {
  int total = atomic_load(&g_nlines);
  for (int i = 0; i < total && i < MAX_LINES; i++)
    if (strstr(g_lines[i], a) && (!b || strstr(g_lines[i], b)) && (!c || strstr(g_lines[i], c)))
      return i;
  return -1;
}

/* ---- the parameters under test ----------------------------------------------------------------- */

static const strand_param_def_t k_params[] = {
    STRAND_PARAM_INT("STRAND_TEST_THREADS", "NCCL_TEST_NTHREADS", 2, 0, 16,
                     "helper threads per connection"),
    STRAND_PARAM_INT("STRAND_TEST_CHUNK", NULL, 65536, 1024, 1LL << 40, "bytes | per chunk"),
    STRAND_PARAM_INT("STRAND_TEST_SIGNED", NULL, -1, -10, 10, "a signed knob"),
    STRAND_PARAM_BOOL("STRAND_TEST_ZCOPY", NULL, true, "zero-copy sends"),
    STRAND_PARAM_STRING("STRAND_TEST_IFNAME", "NCCL_TEST_IFNAME", NULL, "interfaces"),
    STRAND_PARAM_STRING("STRAND_TEST_LABEL", NULL, "plain", "a label"),
    STRAND_PARAM_ENUM("STRAND_TEST_FAMILY", NULL, "any",
                      STRAND_PARAM_CHOICES("any", "AF_INET", "AF_INET6"), "address family"),
};

static const char *const k_vars[] = {
    "STRAND_TEST_THREADS", "NCCL_TEST_NTHREADS", "STRAND_TEST_CHUNK",  "STRAND_TEST_SIGNED",
    "STRAND_TEST_ZCOPY",   "STRAND_TEST_IFNAME", "NCCL_TEST_IFNAME",   "STRAND_TEST_LABEL",
    "STRAND_TEST_FAMILY",  "STRAND_TEST_THRAEDS", "STRAND_TEST_ZCOPPY", "STRAND_TEST_OTHER",
};

static int setup(void **state) {
  (void)state;
  for (size_t i = 0; i < sizeof(k_vars) / sizeof(k_vars[0]); i++) unsetenv(k_vars[i]);
  strand_params_reset_for_test();
  atomic_store(&g_nlines, 0);
  strand_log_init(capture_logger);
  strand_log_set_prefix("strand-test");
  strand_log_set_filter(STRAND_LOG_INFO, STRAND_SUBSYS_ALL);
  assert_int_equal(strand_params_register(k_params, STRAND_PARAM_COUNT(k_params)), STRAND_SUCCESS);
  return 0;
}

static void test_defaults(void **state) {
  (void)state;
  int64_t v;
  bool b;
  const char *s;
  int idx;
  strand_param_source_t src;
  const char *var = "x";
  assert_int_equal(strand_param_get_int("STRAND_TEST_THREADS", &v), STRAND_SUCCESS);
  assert_int_equal(v, 2);
  assert_int_equal(strand_param_get_int("STRAND_TEST_SIGNED", &v), STRAND_SUCCESS);
  assert_int_equal(v, -1);
  assert_int_equal(strand_param_get_bool("STRAND_TEST_ZCOPY", &b), STRAND_SUCCESS);
  assert_true(b);
  assert_int_equal(strand_param_get_string("STRAND_TEST_IFNAME", &s), STRAND_SUCCESS);
  assert_null(s);
  assert_int_equal(strand_param_get_string("STRAND_TEST_LABEL", &s), STRAND_SUCCESS);
  assert_string_equal(s, "plain");
  assert_int_equal(strand_param_get_enum("STRAND_TEST_FAMILY", &idx, &s), STRAND_SUCCESS);
  assert_int_equal(idx, 0);
  assert_string_equal(s, "any");
  assert_int_equal(strand_param_get_source("STRAND_TEST_THREADS", &src, &var), STRAND_SUCCESS);
  assert_int_equal(src, STRAND_PARAM_SOURCE_DEFAULT);
  assert_null(var);
  assert_int_equal(count_warns(), 0);
}

static void test_env_alias_and_read_once(void **state) {
  (void)state;
  int64_t v;
  strand_param_source_t src;
  const char *var;
  setenv("NCCL_TEST_NTHREADS", "4", 1);
  assert_int_equal(strand_param_get_int("STRAND_TEST_THREADS", &v), STRAND_SUCCESS);
  assert_int_equal(v, 4);
  assert_int_equal(strand_param_get_source("STRAND_TEST_THREADS", &src, &var), STRAND_SUCCESS);
  assert_int_equal(src, STRAND_PARAM_SOURCE_ALIAS);
  assert_string_equal(var, "NCCL_TEST_NTHREADS");

  /* Read once: a later change of the environment is not seen... */
  setenv("STRAND_TEST_THREADS", "8", 1);
  assert_int_equal(strand_param_get_int("STRAND_TEST_THREADS", &v), STRAND_SUCCESS);
  assert_int_equal(v, 4);
  /* ...until a re-read; the primary name wins over the alias. */
  strand_params_reread_for_test();
  assert_int_equal(strand_param_get_int("STRAND_TEST_THREADS", &v), STRAND_SUCCESS);
  assert_int_equal(v, 8);
  assert_int_equal(strand_param_get_source("STRAND_TEST_THREADS", &src, &var), STRAND_SUCCESS);
  assert_int_equal(src, STRAND_PARAM_SOURCE_ENV);
  assert_string_equal(var, "STRAND_TEST_THREADS");

  /* An empty primary counts as unset: the alias is used. */
  setenv("STRAND_TEST_THREADS", "", 1);
  strand_params_reread_for_test();
  assert_int_equal(strand_param_get_int("STRAND_TEST_THREADS", &v), STRAND_SUCCESS);
  assert_int_equal(v, 4);

  setenv("NCCL_TEST_IFNAME", "^docker,lo", 1);
  const char *s;
  assert_int_equal(strand_param_get_string("STRAND_TEST_IFNAME", &s), STRAND_SUCCESS);
  assert_string_equal(s, "^docker,lo");
  assert_int_equal(count_warns(), 0);
}

static strand_result_t int_from(const char *text, int64_t *v) {
  setenv("STRAND_TEST_CHUNK", text, 1);
  strand_params_reread_for_test();
  return strand_param_get_int("STRAND_TEST_CHUNK", v);
}

static void test_int_parsing(void **state) {
  (void)state;
  int64_t v;
  assert_int_equal(int_from("4096", &v), STRAND_SUCCESS);
  assert_int_equal(v, 4096);
  assert_int_equal(int_from("64K", &v), STRAND_SUCCESS);
  assert_int_equal(v, 65536);
  assert_int_equal(int_from("2m", &v), STRAND_SUCCESS);
  assert_int_equal(v, 2 << 20);
  assert_int_equal(int_from("1G", &v), STRAND_SUCCESS);
  assert_int_equal(v, 1 << 30);
  assert_int_equal(int_from("1T", &v), STRAND_SUCCESS);
  assert_true(v == 1LL << 40);
  assert_int_equal(int_from("0x2000", &v), STRAND_SUCCESS);
  assert_int_equal(v, 8192);
  assert_int_equal(int_from("  5000 ", &v), STRAND_SUCCESS);
  assert_int_equal(v, 5000);
  setenv("STRAND_TEST_SIGNED", "-7", 1);
  strand_params_reread_for_test();
  assert_int_equal(strand_param_get_int("STRAND_TEST_SIGNED", &v), STRAND_SUCCESS);
  assert_int_equal(v, -7);
  assert_int_equal(count_warns(), 0);
}

static void test_bad_values(void **state) {
  (void)state;
  const char *bad_ints[] = {"abc", "12x", "1.5", "64KB", "2T", "100", "-1",
                            "99999999999999999999", "9223372036854775807K"};
  for (size_t i = 0; i < sizeof(bad_ints) / sizeof(bad_ints[0]); i++) {
    int64_t v = 12345;
    atomic_store(&g_nlines, 0);
    assert_int_equal(int_from(bad_ints[i], &v), STRAND_INVALID_USAGE);
    assert_int_equal(v, 12345); /* untouched: never the default */
    assert_int_equal(count_warns(), 1);
    char quoted[64];
    snprintf(quoted, sizeof(quoted), "STRAND_TEST_CHUNK='%s'", bad_ints[i]);
    if (find_line(quoted, "[1024, 1099511627776]", NULL) < 0) {
      print_error("no WARN naming %s and the range; got: %s\n", quoted, g_lines[0]);
      fail();
    }
    /* Asking again fails again, without a second WARN. */
    assert_int_equal(strand_param_get_int("STRAND_TEST_CHUNK", &v), STRAND_INVALID_USAGE);
    assert_int_equal(count_warns(), 1);
  }
  /* Out of range through the alias names both variables. */
  atomic_store(&g_nlines, 0);
  setenv("NCCL_TEST_NTHREADS", "17", 1);
  int64_t v;
  assert_int_equal(strand_param_get_int("STRAND_TEST_THREADS", &v), STRAND_INVALID_USAGE);
  assert_true(find_line("NCCL_TEST_NTHREADS='17'", "STRAND_TEST_THREADS", "[0, 16]") >= 0);

  bool b;
  setenv("STRAND_TEST_ZCOPY", "maybe", 1);
  assert_int_equal(strand_param_get_bool("STRAND_TEST_ZCOPY", &b), STRAND_INVALID_USAGE);
  assert_true(find_line("STRAND_TEST_ZCOPY='maybe'", "true/false", NULL) >= 0);

  int idx;
  setenv("STRAND_TEST_FAMILY", "AF_UNIX", 1);
  assert_int_equal(strand_param_get_enum("STRAND_TEST_FAMILY", &idx, NULL), STRAND_INVALID_USAGE);
  assert_true(find_line("STRAND_TEST_FAMILY='AF_UNIX'", "any, AF_INET, AF_INET6", NULL) >= 0);

  assert_int_equal(strand_params_validate(), STRAND_INVALID_USAGE);
}

static void test_bool_and_enum_words(void **state) {
  (void)state;
  const char *yes[] = {"1", "true", "TRUE", "yes", "On"};
  const char *no[] = {"0", "false", "No", "off", " off "};
  bool b;
  for (int i = 0; i < 5; i++) {
    setenv("STRAND_TEST_ZCOPY", yes[i], 1);
    strand_params_reread_for_test();
    assert_int_equal(strand_param_get_bool("STRAND_TEST_ZCOPY", &b), STRAND_SUCCESS);
    assert_true(b);
    setenv("STRAND_TEST_ZCOPY", no[i], 1);
    strand_params_reread_for_test();
    assert_int_equal(strand_param_get_bool("STRAND_TEST_ZCOPY", &b), STRAND_SUCCESS);
    assert_false(b);
  }
  setenv("STRAND_TEST_FAMILY", "af_inet6", 1);
  strand_params_reread_for_test();
  int idx;
  const char *word;
  assert_int_equal(strand_param_get_enum("STRAND_TEST_FAMILY", &idx, &word), STRAND_SUCCESS);
  assert_int_equal(idx, 2);
  assert_string_equal(word, "AF_INET6"); /* the table's spelling */
  assert_int_equal(strand_param_get_string("STRAND_TEST_FAMILY", &word), STRAND_SUCCESS);
  assert_string_equal(word, "AF_INET6");
  assert_int_equal(strand_params_validate(), STRAND_SUCCESS);
}

static const strand_param_def_t k_bad_default[] = {
    STRAND_PARAM_INT("STRAND_TEST_OTHER", NULL, 50, 0, 10, "default out of range"),
};
static const strand_param_def_t k_bad_enum[] = {
    STRAND_PARAM_ENUM("STRAND_TEST_OTHER", NULL, "c", STRAND_PARAM_CHOICES("a", "b"), "x"),
};
static const strand_param_def_t k_conflict[] = {
    STRAND_PARAM_INT("STRAND_TEST_OTHER", NULL, 1, 0, 10, "fine on its own"),
    STRAND_PARAM_INT("STRAND_TEST_THREADS", NULL, 3, 0, 16, "clashes with the first table"),
};
static const strand_param_def_t k_same_again[] = {
    STRAND_PARAM_INT("STRAND_TEST_THREADS", "NCCL_TEST_NTHREADS", 2, 0, 16,
                     "helper threads per connection"),
};
static const strand_param_def_t k_dup_in_table[] = {
    STRAND_PARAM_BOOL("STRAND_TEST_OTHER", NULL, false, "a"),
    STRAND_PARAM_BOOL("STRAND_TEST_OTHER", NULL, false, "a"),
};

static void test_registry_errors(void **state) {
  (void)state;
  int64_t v;
  bool b;
  assert_int_equal(strand_params_register(k_bad_default, 1), STRAND_INTERNAL_ERROR);
  assert_int_equal(strand_params_register(k_bad_enum, 1), STRAND_INTERNAL_ERROR);
  assert_int_equal(strand_params_register(k_dup_in_table, 2), STRAND_INTERNAL_ERROR);
  assert_int_equal(strand_params_register(k_conflict, 2), STRAND_INTERNAL_ERROR);
  assert_true(find_line("STRAND_TEST_THREADS", "different definition", NULL) >= 0);
  /* Nothing from a refused table was added. */
  assert_int_equal(strand_param_get_int("STRAND_TEST_OTHER", &v), STRAND_INTERNAL_ERROR);
  /* Same table again, or an identical definition elsewhere: accepted. */
  assert_int_equal(strand_params_register(k_params, STRAND_PARAM_COUNT(k_params)), STRAND_SUCCESS);
  assert_int_equal(strand_params_register(k_same_again, 1), STRAND_SUCCESS);
  /* Programming errors: unknown name, wrong getter. */
  assert_int_equal(strand_param_get_int("STRAND_TEST_NOPE", &v), STRAND_INTERNAL_ERROR);
  assert_int_equal(strand_param_get_bool("STRAND_TEST_THREADS", &b), STRAND_INTERNAL_ERROR);
  assert_int_equal(strand_param_get_int("STRAND_TEST_ZCOPY", &v), STRAND_INTERNAL_ERROR);
  assert_int_equal(strand_param_get_enum("STRAND_TEST_LABEL", NULL, NULL), STRAND_INTERNAL_ERROR);
  assert_true(find_line("STRAND_TEST_THREADS", "wrong getter", NULL) >= 0);
}

static void test_dump(void **state) {
  (void)state;
  setenv("STRAND_TEST_CHUNK", "128K", 1);
  setenv("NCCL_TEST_IFNAME", "eth0", 1);
  setenv("STRAND_TEST_SIGNED", "eleven", 1);
  atomic_store(&g_nlines, 0);
  strand_params_dump();
  assert_true(find_line("STRAND_TEST_THREADS=2 (default)", NULL, NULL) >= 0);
  assert_true(find_line("STRAND_TEST_CHUNK=131072 (env)", NULL, NULL) >= 0);
  assert_true(find_line("STRAND_TEST_IFNAME=eth0 (env NCCL_TEST_IFNAME)", NULL, NULL) >= 0);
  assert_true(find_line("STRAND_TEST_ZCOPY=true (default)", NULL, NULL) >= 0);
  assert_true(find_line("STRAND_TEST_FAMILY=any (default)", NULL, NULL) >= 0);
  assert_true(find_line("STRAND_TEST_SIGNED=<invalid: 'eleven'> (env)", NULL, NULL) >= 0);
  int i = find_line("STRAND_TEST_LABEL=plain (default)", NULL, NULL);
  assert_true(i >= 0);
  assert_int_equal(g_levels[i], STRAND_LOG_INFO);
  assert_string_equal(g_lines[i], "NET/strand-test : STRAND_TEST_LABEL=plain (default)");
}

static void test_unknown_variables(void **state) {
  (void)state;
  assert_int_equal(strand_levenshtein("kitten", "sitting"), 3);
  assert_int_equal(strand_levenshtein("", "abc"), 3);
  assert_int_equal(strand_levenshtein("same", "same"), 0);
  assert_int_equal(strand_levenshtein("STRAND_X", ""), 8);

  assert_int_equal(strand_params_check_unknown("STRAND_TEST_"), 0);
  setenv("STRAND_TEST_THREADS", "3", 1); /* known */
  setenv("STRAND_TEST_THRAEDS", "3", 1); /* typo */
  setenv("STRAND_TEST_ZCOPPY", "1", 1);  /* typo */
  atomic_store(&g_nlines, 0);
  assert_int_equal(strand_params_check_unknown("STRAND_TEST_"), 2);
  assert_int_equal(count_warns(), 2);
  assert_true(find_line("STRAND_TEST_THRAEDS", "did you mean STRAND_TEST_THREADS", NULL) >= 0);
  assert_true(find_line("STRAND_TEST_ZCOPPY", "did you mean STRAND_TEST_ZCOPY", NULL) >= 0);
  assert_string_equal(strand_params_closest("STRAND_TEST_FAMLY"), "STRAND_TEST_FAMILY");
  /* A different prefix ignores them. */
  assert_int_equal(strand_params_check_unknown("STRAND_OTHERPLUGIN_"), 0);
  strand_params_reset_for_test();
  assert_null(strand_params_closest("STRAND_TEST_FAMLY"));
}

static void test_markdown(void **state) {
  (void)state;
  char *buf = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&buf, &len);
  assert_non_null(f);
  strand_params_print_markdown(f);
  fclose(f);
  assert_non_null(strstr(buf, "| Variable | Type | Default | Accepted values | Description |\n"));
  assert_non_null(strstr(buf, "| `STRAND_TEST_THREADS` (or `NCCL_TEST_NTHREADS`) | integer | 2 | "
                              "0 .. 16 | helper threads per connection |\n"));
  assert_non_null(strstr(buf, "bytes \\| per chunk")); /* '|' escaped */
  assert_non_null(strstr(buf, "| `STRAND_TEST_FAMILY` | enum | `any` | any, AF_INET, AF_INET6 |"));
  assert_non_null(strstr(buf, "| `STRAND_TEST_IFNAME` (or `NCCL_TEST_IFNAME`) | string | (unset) |"));
  /* One row per parameter plus the two header lines. */
  int rows = 0;
  for (char *p = buf; *p; p++) rows += *p == '\n';
  assert_int_equal(rows, 2 + (int)STRAND_PARAM_COUNT(k_params));
  free(buf);
}

typedef struct {
  strand_result_t res;
  int64_t value;
} reader_t;

static void *reader(void *p) {
  reader_t *r = p;
  r->res = strand_param_get_int("STRAND_TEST_THREADS", &r->value);
  return NULL;
}

static void test_concurrent_first_read(void **state) {
  (void)state;
  pthread_t th[8];
  reader_t r[8];
  for (int round = 0; round < 2; round++) {
    setenv("STRAND_TEST_THREADS", round == 0 ? "5" : "99", 1);
    strand_params_reread_for_test();
    atomic_store(&g_nlines, 0);
    for (int i = 0; i < 8; i++) {
      r[i] = (reader_t){STRAND_INTERNAL_ERROR, -1};
      assert_int_equal(pthread_create(&th[i], NULL, reader, &r[i]), 0);
    }
    for (int i = 0; i < 8; i++) pthread_join(th[i], NULL);
    for (int i = 0; i < 8; i++) {
      if (round == 0) {
        assert_int_equal(r[i].res, STRAND_SUCCESS);
        assert_int_equal(r[i].value, 5);
      } else {
        assert_int_equal(r[i].res, STRAND_INVALID_USAGE);
      }
    }
    assert_int_equal(count_warns(), round == 0 ? 0 : 1); /* one WARN, not one per thread */
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup(test_defaults, setup),
      cmocka_unit_test_setup(test_env_alias_and_read_once, setup),
      cmocka_unit_test_setup(test_int_parsing, setup),
      cmocka_unit_test_setup(test_bad_values, setup),
      cmocka_unit_test_setup(test_bool_and_enum_words, setup),
      cmocka_unit_test_setup(test_registry_errors, setup),
      cmocka_unit_test_setup(test_dump, setup),
      cmocka_unit_test_setup(test_unknown_variables, setup),
      cmocka_unit_test_setup(test_markdown, setup),
      cmocka_unit_test_setup(test_concurrent_first_read, setup),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
