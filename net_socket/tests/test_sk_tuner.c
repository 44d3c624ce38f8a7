/* strand-socket tuner (sk_tuner.c): its knobs as sk_config.c reads them, and the tuner itself driven
 * through the exported ncclTunerPlugin_v5 / _v3 tables the way NCCL 2.28 / 2.22 call them. Linked
 * from the plugin's own sources (sk_tuner.c, sk_config.c) plus the SDK, so the SDK's export layer,
 * guard and size bands (strand/tuner_bands.h; their grammar is tested in tests/unit) are the real
 * ones.
 *
 * The property that matters most: the tuner never writes a cost-table entry NCCL marked ignored or
 * negative, writes at most one entry (to 0, for an all-reduce in a band that names a protocol, in
 * the row of the algorithm NCCL picked) and only ever answers nChannels 0 or 1..64 — checked over
 * every table shape below and over a few thousand generated ones. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "sk.h"
#include "strand/log.h"
#include "strand/params.h"
#include "strand/tuner.h"

#define NA STRAND_TUNER_NUM_ALGORITHMS
#define NP STRAND_TUNER_NUM_PROTOCOLS
#define IGN STRAND_ALGO_PROTO_IGNORE

extern strand_tuner_v5_t ncclTunerPlugin_v5;
extern strand_tuner_v3_t ncclTunerPlugin_v3;

static int warn_count;
static char last_warn[1024];
static char last_info[1024];

static void test_logger(strand_log_level_t level, unsigned long flags, const char *file, int line,
                        const char *fmt, ...) {
  (void)flags; (void)file; (void)line;
  va_list ap;
  va_start(ap, fmt);
  if (level == STRAND_LOG_WARN) {
    warn_count++;
    vsnprintf(last_warn, sizeof last_warn, fmt, ap);
  } else if (level == STRAND_LOG_INFO) {
    char msg[1024];
    vsnprintf(msg, sizeof msg, fmt, ap);
    /* The SDK's logger bridge hands over "%s" + message; keep the tuner's line. */
    if (strstr(msg, "tuner") != NULL) snprintf(last_info, sizeof last_info, "%s", msg);
  }
  va_end(ap);
}

/* ---- the tuner ---- */

static sk_dev_t fake_dev;

/* Configure as the net side's init would: knobs read from the environment, one device. */
static strand_result_t configure(const char *enabled, const char *channels, bool net_in_use) {
  if (enabled) setenv("STRAND_SOCKET_TUNER", enabled, 1);
  else unsetenv("STRAND_SOCKET_TUNER");
  if (channels) setenv("STRAND_SOCKET_TUNER_CHANNELS", channels, 1);
  else unsetenv("STRAND_SOCKET_TUNER_CHANNELS");
  strand_params_reread_for_test();
  sk_devices_set(&fake_dev, net_in_use ? 1 : 0);
  return net_in_use ? sk_config_load(-1, 8) : STRAND_SUCCESS;
}

static int setup(void **state) {
  (void)state;
  warn_count = 0;
  last_warn[0] = last_info[0] = '\0';
  return 0;
}

/* A cost table like NCCL 2.28's for a 2-node comm: CollNet and NVLS ignored, ring cheapest. */
static void ring_table(float t[NA][NP]) {
  for (int a = 0; a < NA; a++)
    for (int p = 0; p < NP; p++) t[a][p] = IGN;
  for (int p = 0; p < NP; p++) {
    t[STRAND_ALGO_TREE][p] = 40.0f + (float)p;
    t[STRAND_ALGO_RING][p] = 10.0f + (float)p;
    t[STRAND_ALGO_PAT][p] = IGN;
  }
}

/* One getCollInfo through the v5 table; asserts the table came back bit for bit unchanged. */
static int ask(void *ctx, int func, size_t bytes, float t[NA][NP], int preset) {
  float before[NA][NP];
  memcpy(before, t, sizeof before);
  int nch = preset;
  assert_int_equal(ncclTunerPlugin_v5.getCollInfo(ctx, func, bytes, 1, (float **)(void *)t, NA, NP,
                                                  0, &nch),
                   STRAND_SUCCESS);
  assert_memory_equal(before, t, sizeof before);
  assert_true(nch == preset || (nch >= 1 && nch <= STRAND_TUNER_MAX_CHANNELS));
  return nch;
}

/* One getCollInfo that may prefer a protocol: the table comes back unchanged except for at most
 * one entry, lowered to 0; returns that entry's index (algo * NP + proto), or -1 for none. */
static int ask_proto(void *ctx, int func, size_t bytes, float t[NA][NP], int *nch) {
  float before[NA][NP];
  memcpy(before, t, sizeof before);
  *nch = 0;
  assert_int_equal(ncclTunerPlugin_v5.getCollInfo(ctx, func, bytes, 1, (float **)(void *)t, NA, NP,
                                                  0, nch),
                   STRAND_SUCCESS);
  int changed = -1;
  for (int a = 0; a < NA; a++) {
    for (int p = 0; p < NP; p++) {
      if (memcmp(&before[a][p], &t[a][p], sizeof t[a][p]) == 0) continue;
      assert_int_equal(changed, -1); /* at most one entry */
      assert_true(before[a][p] != IGN && before[a][p] >= 0 && t[a][p] == 0.0f);
      changed = a * NP + p;
    }
  }
  return changed;
}

static void *init_v5(size_t nranks, size_t nnodes) {
  void *ctx = NULL;
  assert_int_equal(ncclTunerPlugin_v5.init(&ctx, 0x1234, nranks, nnodes, test_logger, NULL, NULL),
                   STRAND_SUCCESS);
  assert_non_null(ctx);
  return ctx;
}

static void test_default_policy_multi_node(void **state) {
  (void)state;
  assert_int_equal(configure(NULL, NULL, true), STRAND_SUCCESS);
  void *ctx = init_v5(2, 2);
  assert_non_null(strstr(last_info, "<=8K:NCCL <=16K:1 <=32K:2:ll128 <=4M:2:simple above:NCCL"));
  float t[NA][NP];
  int nch = 0;
  ring_table(t);
  /* Up to 8 KiB NCCL's own choices stand; one channel to 16 KiB. */
  assert_int_equal(ask(ctx, STRAND_FUNC_ALLREDUCE, 8 << 10, t, 0), 0);
  assert_int_equal(ask(ctx, STRAND_FUNC_ALLREDUCE, (8 << 10) + 1, t, 0), 1);
  assert_int_equal(ask(ctx, STRAND_FUNC_ALLREDUCE, 16 << 10, t, 0), 1);
  /* All-reduce, 64 KiB: 2 channels and Simple for the ring NCCL picked. */
  assert_int_equal(ask_proto(ctx, STRAND_FUNC_ALLREDUCE, 64 << 10, t, &nch),
                   STRAND_ALGO_RING * NP + STRAND_PROTO_SIMPLE);
  assert_int_equal(nch, 2);
  ring_table(t);
  assert_int_equal(ask_proto(ctx, STRAND_FUNC_ALLREDUCE, 32 << 10, t, &nch),
                   STRAND_ALGO_RING * NP + STRAND_PROTO_LL128);
  assert_int_equal(nch, 2);
  /* Other collectives: channels only, the table untouched. */
  ring_table(t);
  assert_int_equal(ask(ctx, STRAND_FUNC_ALLGATHER, 2 << 20, t, 0), 2);
  assert_int_equal(ask(ctx, STRAND_FUNC_ALLREDUCE, (4 << 20) + 1, t, 0), 0);
  assert_int_equal(ask(ctx, STRAND_FUNC_ALLREDUCE, 128 << 20, t, 0), 0);
  /* Tree cheapest: also ring/tree-class, capped by NCCL. */
  t[STRAND_ALGO_TREE][STRAND_PROTO_LL] = 1.0f;
  assert_int_equal(ask(ctx, STRAND_FUNC_REDUCESCATTER, 20 << 10, t, 0), 2);
  /* ...and an all-reduce then gets Simple in the tree's row, never another algorithm. */
  assert_int_equal(ask_proto(ctx, STRAND_FUNC_ALLREDUCE, 1 << 20, t, &nch),
                   STRAND_ALGO_TREE * NP + STRAND_PROTO_SIMPLE);
  assert_int_equal(ncclTunerPlugin_v5.finalize(ctx), STRAND_SUCCESS);
  assert_int_equal(warn_count, 0);
}

/* A cost table in which NCCL would pick PAT (as 2.28 does for an all-gather on strand-socket). */
static void pat_table(float t[NA][NP]) {
  ring_table(t);
  t[STRAND_ALGO_PAT][STRAND_PROTO_SIMPLE] = 2.0f;
}

static void test_allgather_ring_over_pat(void **state) {
  (void)state;
  assert_int_equal(configure(NULL, NULL, true), STRAND_SUCCESS);
  void *ctx = init_v5(2, 2);
  assert_non_null(strstr(last_info, "all-gather 1..8K, 512K..4M: ring over PAT"));
  float t[NA][NP];
  int nch = 0;
  /* Inside the range: ring's cheapest runnable entry (LL, cost 10) becomes the cheapest. */
  pat_table(t);
  assert_int_equal(ask_proto(ctx, STRAND_FUNC_ALLGATHER, 512 << 10, t, &nch),
                   STRAND_ALGO_RING * NP + STRAND_PROTO_LL);
  assert_int_equal(nch, 2);
  /* ...the cheapest one even when LL is disabled. */
  pat_table(t);
  t[STRAND_ALGO_RING][STRAND_PROTO_LL] = IGN;
  assert_int_equal(ask_proto(ctx, STRAND_FUNC_ALLGATHER, 4 << 20, t, &nch),
                   STRAND_ALGO_RING * NP + STRAND_PROTO_LL128);
  /* The small range too. */
  pat_table(t);
  assert_int_equal(ask_proto(ctx, STRAND_FUNC_ALLGATHER, 8 << 10, t, &nch),
                   STRAND_ALGO_RING * NP + STRAND_PROTO_LL);
  /* Outside the ranges, or no runnable ring entry, or not an all-gather: PAT stays. */
  pat_table(t);
  assert_int_equal(ask_proto(ctx, STRAND_FUNC_ALLGATHER, (8 << 10) + 1, t, &nch), -1);
  pat_table(t);
  assert_int_equal(ask_proto(ctx, STRAND_FUNC_ALLGATHER, 256 << 10, t, &nch), -1);
  assert_int_equal(ask_proto(ctx, STRAND_FUNC_ALLGATHER, (4 << 20) + 1, t, &nch), -1);
  assert_int_equal(ask_proto(ctx, STRAND_FUNC_REDUCESCATTER, 1 << 20, t, &nch), -1);
  for (int p = 0; p < NP; p++) t[STRAND_ALGO_RING][p] = p == 0 ? -1.0f : IGN;
  assert_int_equal(ask_proto(ctx, STRAND_FUNC_ALLGATHER, 1 << 20, t, &nch), -1);
  assert_int_equal(ncclTunerPlugin_v5.finalize(ctx), STRAND_SUCCESS);

  /* Off, and a custom range beyond the channel bands. */
  assert_int_equal(setenv("STRAND_SOCKET_TUNER_ALLGATHER_RING", "off", 1), 0);
  assert_int_equal(configure(NULL, NULL, true), STRAND_SUCCESS);
  ctx = init_v5(2, 2);
  assert_null(strstr(last_info, "ring over PAT"));
  pat_table(t);
  assert_int_equal(ask_proto(ctx, STRAND_FUNC_ALLGATHER, 1 << 20, t, &nch), -1);
  assert_int_equal(ncclTunerPlugin_v5.finalize(ctx), STRAND_SUCCESS);
  assert_int_equal(setenv("STRAND_SOCKET_TUNER_ALLGATHER_RING", "1M-1G", 1), 0);
  assert_int_equal(configure(NULL, "64K:2", true), STRAND_SUCCESS);
  ctx = init_v5(2, 2);
  pat_table(t);
  assert_int_equal(ask_proto(ctx, STRAND_FUNC_ALLGATHER, 512 << 20, t, &nch),
                   STRAND_ALGO_RING * NP + STRAND_PROTO_LL);
  assert_int_equal(nch, 0); /* above the bands: NCCL's channel count */
  assert_int_equal(ncclTunerPlugin_v5.finalize(ctx), STRAND_SUCCESS);

  /* Bad values fail init with a WARN naming the knob. */
  static const char *bad[] = {"4M", "4M-1M", "1M-", "x-2M", "0-0", "1M-2M,3M", "1M-2M,2M-4M",
                              "4M-8M,1M-2M", "off,1M-2M", "1M-2M,", "1-1K,2K-3K,4K-5K,6K-7K,8K-9K"};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    assert_int_equal(setenv("STRAND_SOCKET_TUNER_ALLGATHER_RING", bad[i], 1), 0);
    assert_int_equal(configure(NULL, NULL, true), STRAND_INVALID_USAGE);
    assert_non_null(strstr(last_warn, "STRAND_SOCKET_TUNER_ALLGATHER_RING"));
  }
  unsetenv("STRAND_SOCKET_TUNER_ALLGATHER_RING");
  strand_params_reread_for_test();
}

static void test_leaves_nccl_alone_when_unsure(void **state) {
  (void)state;
  assert_int_equal(configure(NULL, "1G:2", true), STRAND_SUCCESS);
  void *ctx = init_v5(16, 2);
  float t[NA][NP];
  /* CollNet Direct cheapest: NCCL would use nChannels as given, uncapped — no answer. */
  ring_table(t);
  t[STRAND_ALGO_COLLNET_DIRECT][STRAND_PROTO_SIMPLE] = 1.0f;
  assert_int_equal(ask(ctx, STRAND_FUNC_ALLREDUCE, 4096, t, 0), 0);
  /* NVLS cheapest. */
  ring_table(t);
  t[STRAND_ALGO_NVLS][STRAND_PROTO_SIMPLE] = 0.5f;
  assert_int_equal(ask(ctx, STRAND_FUNC_ALLREDUCE, 4096, t, 0), 0);
  /* Nothing runnable at all. */
  for (int a = 0; a < NA; a++)
    for (int p = 0; p < NP; p++) t[a][p] = IGN;
  assert_int_equal(ask(ctx, STRAND_FUNC_ALLREDUCE, 4096, t, 0), 0);
  /* A function the bands were not measured for (send/recv and later additions). */
  ring_table(t);
  assert_int_equal(ask(ctx, STRAND_FUNC_SENDRECV, 4096, t, 0), 0);
  assert_int_equal(ask(ctx, 11, 4096, t, 0), 0);
  assert_int_equal(ask(ctx, -1, 4096, t, 0), 0);
  /* An answer already there is not overridden. */
  assert_int_equal(ask(ctx, STRAND_FUNC_ALLREDUCE, 4096, t, 5), 5);
  assert_int_equal(ncclTunerPlugin_v5.finalize(ctx), STRAND_SUCCESS);

  /* Single node: strand-socket carries nothing. */
  ctx = init_v5(8, 1);
  assert_non_null(strstr(last_info, "single-node"));
  ring_table(t);
  assert_int_equal(ask(ctx, STRAND_FUNC_ALLREDUCE, 4096, t, 0), 0);
  assert_int_equal(ncclTunerPlugin_v5.finalize(ctx), STRAND_SUCCESS);
  assert_int_equal(warn_count, 0);
}

static void test_disabled_and_empty(void **state) {
  (void)state;
  float t[NA][NP];
  assert_int_equal(configure("0", "1G:2", true), STRAND_SUCCESS);
  void *ctx = init_v5(4, 4);
  assert_non_null(strstr(last_info, "STRAND_SOCKET_TUNER=0"));
  ring_table(t);
  assert_int_equal(ask(ctx, STRAND_FUNC_ALLREDUCE, 4096, t, 0), 0);
  assert_int_equal(ncclTunerPlugin_v5.finalize(ctx), STRAND_SUCCESS);

  /* An empty value counts as unset (as in NCCL): the default policy applies. */
  assert_int_equal(configure("1", "", true), STRAND_SUCCESS);
  ctx = init_v5(4, 4);
  assert_non_null(strstr(last_info, "<=4M:2:simple above:NCCL"));
  assert_int_equal(ask(ctx, STRAND_FUNC_REDUCESCATTER, 1 << 20, t, 0), 2);
  assert_int_equal(ncclTunerPlugin_v5.finalize(ctx), STRAND_SUCCESS);

  /* Bands that all say 0 leave every size to NCCL. */
  assert_int_equal(configure("1", "1G:0", true), STRAND_SUCCESS);
  ctx = init_v5(4, 4);
  assert_int_equal(ask(ctx, STRAND_FUNC_ALLREDUCE, 4096, t, 0), 0);
  assert_int_equal(ncclTunerPlugin_v5.finalize(ctx), STRAND_SUCCESS);
}

/* A protocol NCCL disabled (ignored or negative entry) is never chosen: channels still apply. */
static void test_proto_never_picks_disabled(void **state) {
  (void)state;
  assert_int_equal(configure(NULL, "1M:2:ll128,2M:3:simple", true), STRAND_SUCCESS);
  void *ctx = init_v5(2, 2);
  float t[NA][NP];
  int nch = 0;
  ring_table(t);
  t[STRAND_ALGO_RING][STRAND_PROTO_LL128] = IGN;
  assert_int_equal(ask_proto(ctx, STRAND_FUNC_ALLREDUCE, 4096, t, &nch), -1);
  assert_int_equal(nch, 2);
  ring_table(t);
  t[STRAND_ALGO_RING][STRAND_PROTO_LL128] = -3.0f;
  assert_int_equal(ask_proto(ctx, STRAND_FUNC_ALLREDUCE, 4096, t, &nch), -1);
  ring_table(t);
  t[STRAND_ALGO_RING][STRAND_PROTO_SIMPLE] = IGN;
  assert_int_equal(ask_proto(ctx, STRAND_FUNC_ALLREDUCE, 2 << 20, t, &nch), -1);
  assert_int_equal(nch, 3);
  assert_int_equal(ncclTunerPlugin_v5.finalize(ctx), STRAND_SUCCESS);
  assert_int_equal(warn_count, 0);
}

static void test_net_not_in_use(void **state) {
  (void)state;
  assert_int_equal(configure(NULL, "1G:2", false), STRAND_SUCCESS);
  void *ctx = init_v5(4, 2);
  assert_non_null(strstr(last_info, "not in use"));
  float t[NA][NP];
  ring_table(t);
  assert_int_equal(ask(ctx, STRAND_FUNC_ALLREDUCE, 4096, t, 0), 0);
  assert_int_equal(ncclTunerPlugin_v5.finalize(ctx), STRAND_SUCCESS);
}

static void test_bad_knob_fails_init(void **state) {
  (void)state;
  /* The net side's init fails on it like on any bad knob... */
  assert_int_equal(configure(NULL, "2M:2,64K:4", true), STRAND_INVALID_USAGE);
  assert_non_null(strstr(last_warn, "STRAND_SOCKET_TUNER_CHANNELS='2M:2,64K:4' is invalid"));
  /* ...and so does the tuner's when it is the first to read it. */
  warn_count = 0;
  assert_int_equal(configure(NULL, "64K:999", false), STRAND_SUCCESS);
  void *ctx = (void *)&ctx;
  assert_int_equal(ncclTunerPlugin_v5.init(&ctx, 1, 4, 2, test_logger, NULL, NULL),
                   STRAND_INVALID_USAGE);
  assert_null(ctx);
  assert_true(warn_count >= 1);
  assert_non_null(strstr(last_warn, "0..64"));
  assert_int_equal(configure("maybe", NULL, false), STRAND_SUCCESS);
  assert_int_equal(ncclTunerPlugin_v5.init(&ctx, 1, 4, 2, test_logger, NULL, NULL),
                   STRAND_INVALID_USAGE);
}

static void test_old_core_v3(void **state) {
  (void)state;
  assert_int_equal(configure(NULL, "64K:3", true), STRAND_SUCCESS);
  void *ctx = NULL;
  assert_int_equal(ncclTunerPlugin_v3.init(4, 2, test_logger, &ctx), STRAND_SUCCESS);
  /* A 2.22 table: 6 algorithms. */
  float t[6][NP];
  for (int a = 0; a < 6; a++)
    for (int p = 0; p < NP; p++) t[a][p] = a == STRAND_ALGO_RING ? 5.0f : IGN;
  int nch = 0;
  assert_int_equal(ncclTunerPlugin_v3.getCollInfo(ctx, STRAND_FUNC_ALLREDUCE, 1024, 1,
                                                  (float **)(void *)t, 6, NP, &nch),
                   STRAND_SUCCESS);
  assert_int_equal(nch, 3);
  assert_int_equal(ncclTunerPlugin_v3.destroy(ctx), STRAND_SUCCESS);
}

/* Generated tables: any mix of ignored, negative, equal and ordinary costs, any size, any function.
 * The table comes back unchanged except, for an all-reduce, one runnable entry lowered to 0 in the
 * row NCCL would pick; the answer is always 0 or a valid channel count, and non-zero only when
 * NCCL's pick is ring, tree or PAT. */
static void test_never_writes_table_fuzz(void **state) {
  (void)state;
  assert_int_equal(configure(NULL, "4K:1:ll,64K:2,1M:4:simple,16M:8:ll128", true), STRAND_SUCCESS);
  void *ctx = init_v5(8, 2);
  uint32_t seed = 12345;
  for (int iter = 0; iter < 5000; iter++) {
    float t[NA][NP];
    for (int a = 0; a < NA; a++) {
      for (int p = 0; p < NP; p++) {
        seed = seed * 1103515245u + 12345u;
        uint32_t r = (seed >> 16) % 8;
        t[a][p] = r < 3 ? IGN : r == 3 ? -2.0f : r == 4 ? 0.0f : (float)(seed % 1000);
      }
    }
    seed = seed * 1103515245u + 12345u;
    int func = (int)((seed >> 8) % 8);
    size_t bytes = (size_t)1 << ((seed >> 4) % 30);
    int best = -1;
    float bc = 0;
    for (int a = 0; a < NA; a++)
      for (int p = 0; p < NP; p++)
        if (t[a][p] != IGN && t[a][p] >= 0 && (best < 0 || t[a][p] < bc)) { best = a; bc = t[a][p]; }
    int nch = 0;
    int changed = ask_proto(ctx, func, bytes, t, &nch);
    assert_true(nch == 0 || (nch >= 1 && nch <= STRAND_TUNER_MAX_CHANNELS));
    if (changed >= 0 && func == STRAND_FUNC_ALLGATHER) {
      /* the one algorithm change: PAT -> ring, inside the all-gather ranges only */
      assert_int_equal(best, STRAND_ALGO_PAT);
      assert_int_equal(changed / NP, STRAND_ALGO_RING);
      assert_true((bytes >= 1 && bytes <= (8 << 10)) || (bytes >= (512 << 10) && bytes <= (4 << 20)));
    } else if (changed >= 0) {
      assert_int_equal(func, STRAND_FUNC_ALLREDUCE);
      assert_int_equal(changed / NP, best); /* the algorithm stays NCCL's */
    }
    if (nch != 0 || changed >= 0) {
      assert_true(best == STRAND_ALGO_RING || best == STRAND_ALGO_TREE || best == STRAND_ALGO_PAT);
      assert_true(func >= STRAND_FUNC_BROADCAST && func <= STRAND_FUNC_ALLREDUCE);
    }
  }
  assert_int_equal(ncclTunerPlugin_v5.finalize(ctx), STRAND_SUCCESS);
  assert_int_equal(warn_count, 0); /* the SDK guard never had to step in */
}

int main(void) {
  /* The tuner's INFO line is part of what is tested: let it through whatever NCCL_DEBUG says. */
  strand_log_init(test_logger);
  strand_log_set_filter(STRAND_LOG_INFO, STRAND_SUBSYS_ALL);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup(test_default_policy_multi_node, setup),
      cmocka_unit_test_setup(test_allgather_ring_over_pat, setup),
      cmocka_unit_test_setup(test_leaves_nccl_alone_when_unsure, setup),
      cmocka_unit_test_setup(test_disabled_and_empty, setup),
      cmocka_unit_test_setup(test_proto_never_picks_disabled, setup),
      cmocka_unit_test_setup(test_net_not_in_use, setup),
      cmocka_unit_test_setup(test_bad_knob_fails_init, setup),
      cmocka_unit_test_setup(test_old_core_v3, setup),
      cmocka_unit_test_setup(test_never_writes_table_fuzz, setup),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
