/* Unit tests of strand/tuner_bands.h: the SIZE:CHANNELS[:PROTO] grammar (what it accepts, and that
 * every malformed value is refused with an error naming the item), looking sizes up, the INFO text,
 * the MIN-MAX range grammar, and the rule by which bands answer NCCL (never an entry NCCL cannot
 * run, never another algorithm than NCCL's, never over an answer already made). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "strand/tuner.h"
#include "strand/tuner_bands.h"

#define NA STRAND_TUNER_NUM_ALGORITHMS
#define NP STRAND_TUNER_NUM_PROTOCOLS
#define IGN STRAND_ALGO_PROTO_IGNORE

/* ---- the grammar ---- */

static void test_parse_valid(void **state) {
  (void)state;
  strand_tuner_bands_t p;
  char err[256];
  assert_int_equal(strand_tuner_bands_parse("64K:2,2M:4", &p, err, sizeof err), STRAND_SUCCESS);
  assert_int_equal(p.nbands, 2);
  assert_true(p.bands[0].max_bytes == 65536 && p.bands[0].channels == 2);
  assert_true(p.bands[1].max_bytes == (2u << 20) && p.bands[1].channels == 4);

  assert_int_equal(strand_tuner_bands_parse("  32KiB : 1 , 1MB:2, 1G:0 ", &p, err, sizeof err),
                   STRAND_SUCCESS);
  assert_int_equal(p.nbands, 3);
  assert_true(p.bands[0].max_bytes == 32768 && p.bands[0].channels == 1);
  assert_true(p.bands[1].max_bytes == (1u << 20));
  assert_true(p.bands[2].max_bytes == (1u << 30) && p.bands[2].channels == 0);

  assert_int_equal(strand_tuner_bands_parse("4096:64", &p, err, sizeof err), STRAND_SUCCESS);
  assert_true(p.nbands == 1 && p.bands[0].max_bytes == 4096 && p.bands[0].channels == 64);
  assert_int_equal(p.bands[0].proto, STRAND_PROTO_UNDEF);

  assert_int_equal(strand_tuner_bands_parse("16K:0,32K:2:LL128, 4M:2 : simple,8M:0:ll", &p, err,
                                         sizeof err), STRAND_SUCCESS);
  assert_int_equal(p.nbands, 4);
  assert_true(p.bands[0].proto == STRAND_PROTO_UNDEF && p.bands[1].proto == STRAND_PROTO_LL128);
  assert_true(p.bands[2].proto == STRAND_PROTO_SIMPLE && p.bands[2].channels == 2);
  assert_true(p.bands[3].proto == STRAND_PROTO_LL && p.bands[3].channels == 0);

  assert_int_equal(strand_tuner_bands_parse("", &p, err, sizeof err), STRAND_SUCCESS);
  assert_int_equal(p.nbands, 0);
  assert_int_equal(strand_tuner_bands_parse(NULL, &p, err, sizeof err), STRAND_SUCCESS);
  assert_int_equal(p.nbands, 0);
}

static void expect_parse_error(const char *text, const char *needle) {
  strand_tuner_bands_t p = {.nbands = 5};
  char err[256];
  assert_int_equal(strand_tuner_bands_parse(text, &p, err, sizeof err), STRAND_INVALID_USAGE);
  assert_int_equal(p.nbands, 5); /* untouched on error */
  if (strstr(err, needle) == NULL) fail_msg("'%s': error '%s' lacks '%s'", text, err, needle);
}

static void test_parse_errors(void **state) {
  (void)state;
  expect_parse_error("64K", "item 1 ('64K'): expected SIZE:CHANNELS");
  expect_parse_error("64K:", "item 1");
  expect_parse_error("64K:2,2M", "item 2 ('2M')");
  expect_parse_error("64K:65", "0..64");
  expect_parse_error("64K:-1", "0..64");
  expect_parse_error("64K:2x", "CHANNELS");
  expect_parse_error("2M:2,64K:4", "increase");
  expect_parse_error("64K:2,64K:4", "increase");
  expect_parse_error("abc:2", "SIZE like");
  expect_parse_error("64X:2", "item 1");
  expect_parse_error("64K:2,,2M:4", "item 2");
  expect_parse_error("64K:2:fast", "item 1 ('64K:2:fast'): PROTO");
  expect_parse_error("64K:2:", "PROTO");
  expect_parse_error("64K:2:llx", "PROTO");
  expect_parse_error("64K:2:simple:3", "PROTO");
  expect_parse_error("99999999999999999999:2", "item 1");
  expect_parse_error("99999999999G:2", "item 1"); /* overflows 64 bits once scaled */
  char many[512] = "";
  for (int i = 1; i <= STRAND_TUNER_MAX_BANDS + 1; i++) {
    char item[32];
    snprintf(item, sizeof item, "%s%dK:1", i > 1 ? "," : "", i);
    strcat(many, item);
  }
  expect_parse_error(many, "more than 16");
}

static void test_lookup_and_format(void **state) {
  (void)state;
  strand_tuner_bands_t p;
  assert_int_equal(strand_tuner_bands_parse("64K:2,2M:4:simple,8M:0,64M:6", &p, NULL, 0),
                   STRAND_SUCCESS);
  assert_int_equal(strand_tuner_bands_channels(&p, 0), 2);
  assert_int_equal(strand_tuner_bands_channels(&p, 65536), 2);
  assert_int_equal(strand_tuner_bands_channels(&p, 65537), 4);
  assert_int_equal(strand_tuner_bands_channels(&p, 2u << 20), 4);
  assert_int_equal(strand_tuner_bands_channels(&p, (2u << 20) + 1), 0);
  assert_int_equal(strand_tuner_bands_channels(&p, 64u << 20), 6);
  assert_int_equal(strand_tuner_bands_channels(&p, (64u << 20) + 1), 0);
  char buf[256];
  strand_tuner_bands_format(&p, buf, sizeof buf);
  assert_string_equal(buf, "<=64K:2 <=2M:4:simple <=8M:NCCL <=64M:6 above:NCCL");
  assert_null(strand_tuner_bands_find(&p, (64u << 20) + 1));
  assert_int_equal(strand_tuner_bands_find(&p, 1u << 20)->proto, STRAND_PROTO_SIMPLE);
  strand_tuner_bands_t empty = {0};
  assert_int_equal(strand_tuner_bands_channels(&empty, 1), 0);
  strand_tuner_bands_format(&empty, buf, sizeof buf);
  assert_string_equal(buf, "above:NCCL");
  strand_tuner_bands_format(&p, buf, 8); /* truncation is safe */
  assert_true(strlen(buf) < 8);
}

static void test_size_range(void **state) {
  (void)state;
  uint64_t lo = 7, hi = 7;
  char err[256];
  assert_int_equal(strand_tuner_size_range_parse("512K-4M", &lo, &hi, err, sizeof err),
                   STRAND_SUCCESS);
  assert_true(lo == (512u << 10) && hi == (4u << 20));
  for (const char *off = "off\0" "0\0" "\0"; ; off += strlen(off) + 1) {
    lo = hi = 7;
    assert_int_equal(strand_tuner_size_range_parse(off, &lo, &hi, err, sizeof err), STRAND_SUCCESS);
    assert_true(lo == 0 && hi == 0);
    if (*off == '\0') break;
  }
  lo = hi = 7;
  assert_int_equal(strand_tuner_size_range_parse("4M-512K", &lo, &hi, err, sizeof err),
                   STRAND_INVALID_USAGE);
  assert_non_null(strstr(err, "MIN must not exceed MAX"));
  assert_int_equal(strand_tuner_size_range_parse("512K", &lo, &hi, err, sizeof err),
                   STRAND_INVALID_USAGE);
  assert_non_null(strstr(err, "MIN-MAX"));
  assert_true(lo == 7 && hi == 7); /* untouched on error */
  char buf[32];
  strand_tuner_size_format(3u << 30, buf, sizeof buf);
  assert_string_equal(buf, "3G");
  strand_tuner_size_format(1000, buf, sizeof buf);
  assert_string_equal(buf, "1000");
}

/* ---- the rule ---- */

/* Every entry 100 + a*NP + p (distinct, runnable), then the overrides the test gives. */
static void table_init(float t[NA][NP]) {
  for (int a = 0; a < NA; a++)
    for (int p = 0; p < NP; p++) t[a][p] = 100.0f + (float)(a * NP + p);
}

static void test_nccl_algo_and_prefer(void **state) {
  (void)state;
  float t[NA][NP];
  table_init(t);
  t[STRAND_ALGO_PAT][STRAND_PROTO_SIMPLE] = 3.0f;
  t[STRAND_ALGO_TREE][STRAND_PROTO_LL] = IGN;     /* ignored: never NCCL's pick */
  t[STRAND_ALGO_NVLS][STRAND_PROTO_LL] = -5.0f;   /* negative: not runnable either */
  assert_int_equal(strand_tuner_nccl_algo((float **)(void *)t, NA, NP), STRAND_ALGO_PAT);
  /* Ring's cheapest runnable entry becomes 0; an ignored ring entry stays ignored. */
  t[STRAND_ALGO_RING][STRAND_PROTO_LL] = IGN;
  assert_int_equal(strand_tuner_prefer_algo((float **)(void *)t, NA, NP, STRAND_ALGO_RING), 0);
  assert_true(t[STRAND_ALGO_RING][STRAND_PROTO_LL] == IGN);
  assert_true(t[STRAND_ALGO_RING][STRAND_PROTO_LL128] == 0.0f);
  assert_true(t[STRAND_ALGO_RING][STRAND_PROTO_SIMPLE] > 0.0f);
  assert_int_equal(strand_tuner_nccl_algo((float **)(void *)t, NA, NP), STRAND_ALGO_RING);
  /* No runnable entry of the algorithm, or one the table does not have: nothing is written. */
  float before[NA][NP];
  for (int p = 0; p < NP; p++) t[STRAND_ALGO_TREE][p] = IGN;
  memcpy(before, t, sizeof t);
  assert_int_equal(strand_tuner_prefer_algo((float **)(void *)t, NA, NP, STRAND_ALGO_TREE), -1);
  assert_int_equal(strand_tuner_prefer_algo((float **)(void *)t, 2, NP, STRAND_ALGO_PAT), -1);
  assert_memory_equal(before, t, sizeof t);
  for (int a = 0; a < NA; a++)
    for (int p = 0; p < NP; p++) t[a][p] = IGN;
  assert_int_equal(strand_tuner_nccl_algo((float **)(void *)t, NA, NP), STRAND_ALGO_UNDEF);
}

/* Ask the bands for func/nBytes with `algo`'s LL entry the cheapest; returns nChannels and the flat
 * index of the one entry written (-1 for none). */
static int ask(const strand_tuner_bands_t *b, int func, uint64_t nBytes, int algo, int preset,
               int *written) {
  float t[NA][NP], before[NA][NP];
  table_init(t);
  t[algo][STRAND_PROTO_LL] = 1.0f;
  t[STRAND_ALGO_TREE][STRAND_PROTO_LL128] = IGN;
  memcpy(before, t, sizeof t);
  int n = preset;
  strand_tuner_bands_apply(b, func, nBytes, strand_tuner_nccl_algo((float **)(void *)t, NA, NP),
                           (float **)(void *)t, NP, &n);
  *written = -1;
  for (int i = 0; i < NA * NP; i++)
    if (((float *)t)[i] != ((float *)before)[i]) {
      assert_int_equal(*written, -1); /* at most one entry */
      assert_true(((float *)t)[i] == 0.0f && ((float *)before)[i] >= 0);
      *written = i;
    }
  return n;
}

static void test_apply(void **state) {
  (void)state;
  strand_tuner_bands_t b;
  assert_int_equal(strand_tuner_bands_parse("1K:1,1M:2:simple,8M:0:ll128", &b, NULL, 0),
                   STRAND_SUCCESS);
  int w;
  assert_int_equal(ask(&b, STRAND_FUNC_ALLREDUCE, 8, STRAND_ALGO_RING, 0, &w), 1);
  assert_int_equal(w, -1);
  /* The band's protocol, in the row of the algorithm NCCL picked, for all-reduce only. */
  assert_int_equal(ask(&b, STRAND_FUNC_ALLREDUCE, 4096, STRAND_ALGO_PAT, 0, &w), 2);
  assert_int_equal(w, STRAND_ALGO_PAT * NP + STRAND_PROTO_SIMPLE);
  assert_int_equal(ask(&b, STRAND_FUNC_ALLGATHER, 4096, STRAND_ALGO_RING, 0, &w), 2);
  assert_int_equal(w, -1);
  /* A protocol NCCL ignored stays ignored; the channel count still applies (0 = NCCL's). */
  assert_int_equal(ask(&b, STRAND_FUNC_ALLREDUCE, 4u << 20, STRAND_ALGO_TREE, 0, &w), 0);
  assert_int_equal(w, -1);
  assert_int_equal(ask(&b, STRAND_FUNC_ALLREDUCE, 4u << 20, STRAND_ALGO_RING, 0, &w), 0);
  assert_int_equal(w, STRAND_ALGO_RING * NP + STRAND_PROTO_LL128);
  /* Above the last band, for CollNet/NVLS, and over an answer already made: nothing. */
  assert_int_equal(ask(&b, STRAND_FUNC_ALLREDUCE, (8u << 20) + 1, STRAND_ALGO_RING, 0, &w), 0);
  assert_int_equal(w, -1);
  assert_int_equal(ask(&b, STRAND_FUNC_ALLREDUCE, 8, STRAND_ALGO_COLLNET_DIRECT, 0, &w), 0);
  assert_int_equal(w, -1);
  assert_int_equal(ask(&b, STRAND_FUNC_ALLREDUCE, 8, STRAND_ALGO_NVLS, 0, &w), 0);
  assert_int_equal(ask(&b, STRAND_FUNC_ALLREDUCE, 4096, STRAND_ALGO_RING, 5, &w), 5);
  assert_int_equal(w, -1);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_parse_valid),
      cmocka_unit_test(test_parse_errors),
      cmocka_unit_test(test_lookup_and_format),
      cmocka_unit_test(test_size_range),
      cmocka_unit_test(test_nccl_algo_and_prefer),
      cmocka_unit_test(test_apply),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
