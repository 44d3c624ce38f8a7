/* Unit tests of the tuner export layer (plugin_api/src/export_tuner.c) and of the tuner ABI
 * layouts (strand/abi/tuner.h).
 *
 * A mock v6 tuner records its calls and answers whatever the test scripts; each test drives
 * ncclTunerPlugin_vN as a core of that version would. This test defines no net or CollNet table:
 * linking must still work, and no ncclNetPlugin_v* may be pulled in. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "strand/tuner.h"
#include "export_internal.h"

extern strand_net_v12_t ncclNetPlugin_v12 __attribute__((weak));

#define NA STRAND_TUNER_NUM_ALGORITHMS
#define NP STRAND_TUNER_NUM_PROTOCOLS
#define IGN STRAND_ALGO_PROTO_IGNORE

static struct {
  int init_calls, coll_calls, fin_calls, chunk_calls;
  uint64_t commId;
  size_t nRanks, nNodes;
  strand_logger_t logger;
  strand_nvl_domain_info_t *nvl;
  strand_tuner_constants_t *constants;
  strand_tuner_constants_t k_seen; /* the v7 block as init received it */
  void *ctx;
  int func;
  size_t nBytes;
  int numPipeOps, numAlgo, numProto, regBuff;
  float seen[NA][NP]; /* the table as the plugin received it */
} rec;

/* What the mock does inside getCollInfo. */
static struct {
  int set_channels;        /* -1000 = leave *nChannels alone */
  int write_algo, write_proto; /* -1 = write no cost entry */
  float write_value;
  size_t chunk_answer;
} script;

static int ctx_obj, warn_count;
static char last_warn[512];

static void mock_logger(strand_log_level_t level, unsigned long flags, const char *file, int line,
                        const char *fmt, ...) {
  (void)flags; (void)file; (void)line;
  if (level != STRAND_LOG_WARN) return;
  warn_count++;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(last_warn, sizeof last_warn, fmt, ap);
  va_end(ap);
}

static strand_result_t mock_init(void **ctx, uint64_t commId, size_t nRanks, size_t nNodes,
                                 strand_logger_t logger, strand_nvl_domain_info_t *nvl,
                                 strand_tuner_constants_t *k) {
  rec.init_calls++;
  rec.commId = commId; rec.nRanks = nRanks; rec.nNodes = nNodes; rec.logger = logger;
  rec.nvl = nvl; rec.constants = k;
  if (k != NULL) {
    /* Read the block, then change the model as a tuner may: a shared row, a latency, row 4. */
    rec.k_seen = *k;
    k->llMaxBws[3][2] = 77.0;
    k->baseLatencies[1][2] = 9.5;
    k->llMaxBws[4][0] = 55.0;
  }
  *ctx = &ctx_obj;
  return STRAND_SUCCESS;
}
static strand_result_t mock_coll_info(void *ctx, strand_tuner_func_t f, size_t n, int pipe,
                                      float **table, int na, int np, int reg, int *nch) {
  rec.coll_calls++;
  rec.ctx = ctx; rec.func = f; rec.nBytes = n; rec.numPipeOps = pipe; rec.numAlgo = na;
  rec.numProto = np; rec.regBuff = reg;
  if (na == NA && np == NP) memcpy(rec.seen, table, sizeof rec.seen);
  if (script.write_algo >= 0)
    *strand_tuner_cost(table, np, script.write_algo, script.write_proto) = script.write_value;
  if (script.set_channels != -1000) *nch = script.set_channels;
  return STRAND_SUCCESS;
}
static strand_result_t mock_finalize(void *ctx) {
  rec.fin_calls++;
  rec.ctx = ctx;
  return STRAND_SUCCESS;
}
static strand_result_t mock_chunk(void *ctx, strand_tuner_func_t f, size_t n, int algo, int proto,
                                  int nch, size_t *chunk) {
  (void)ctx; (void)f; (void)n; (void)algo; (void)proto; (void)nch;
  rec.chunk_calls++;
  *chunk = script.chunk_answer;
  return STRAND_SUCCESS;
}

static const strand_tuner_t mock_tuner = {
    .name = "mock-tuner",
    .init = mock_init,
    .getCollInfo = mock_coll_info,
    .finalize = mock_finalize,
    .getChunkSize = mock_chunk,
};
STRAND_TUNER_PLUGIN(mock_tuner);

static int setup(void **state) {
  (void)state;
  memset(&rec, 0, sizeof rec);
  script.set_channels = -1000;
  script.write_algo = -1;
  script.write_proto = -1;
  script.write_value = 0;
  script.chunk_answer = 0;
  warn_count = 0;
  last_warn[0] = '\0';
  strand_export_tuner_reset_for_test();
  strand_export_tuner_fill_tables();
  strand_export_set_logger(mock_logger);
  return 0;
}

/* A cost table as NCCL 2.28 builds it for a 2-node ring/tree case: CollNet and NVLS ignored. */
static void core_table(float t[NA][NP]) {
  for (int a = 0; a < NA; a++)
    for (int p = 0; p < NP; p++) t[a][p] = IGN;
  for (int p = 0; p < NP; p++) {
    t[STRAND_ALGO_TREE][p] = 30.0f + (float)p;
    t[STRAND_ALGO_RING][p] = 20.0f + (float)p;
  }
}

static void test_layouts(void **state) {
  (void)state;
  /* The static asserts in the header pin these; repeating the key ones at run time makes a change
   * to the header visible in the test log too. */
  assert_int_equal(sizeof(strand_tuner_v2_t), 32);
  assert_int_equal(sizeof(strand_tuner_v5_t), 32);
  assert_int_equal(sizeof(strand_tuner_v6_t), 40);
  assert_int_equal(offsetof(strand_tuner_v6_t, getChunkSize), 32);
  assert_int_equal(sizeof(strand_tuner_v7_t), 40);
  assert_int_equal(offsetof(strand_tuner_v7_t, getChunkSize), 32);
  assert_int_equal(sizeof(strand_tuner_constants_v7_t), 1272);
  assert_int_equal(offsetof(strand_tuner_constants_v7_t, perChMaxNVLSTreeBws), 1152);
  assert_int_equal(offsetof(strand_tuner_v2_t, destroy), 24);
  assert_int_equal(sizeof(strand_tuner_constants_v5_t), 1152);
  assert_int_equal(sizeof(strand_nvl_domain_info_v5_t), 12);
  assert_true(STRAND_ALGO_PROTO_IGNORE == -1.0f);
  /* Indexing helper: row-major float[numAlgo][numProto]. */
  float t[NA][NP];
  core_table(t);
  assert_true(strand_tuner_cost((float **)(void *)t, NP, STRAND_ALGO_RING, STRAND_PROTO_SIMPLE) ==
              &t[STRAND_ALGO_RING][STRAND_PROTO_SIMPLE]);
}

static void test_names_and_no_net(void **state) {
  (void)state;
  assert_string_equal(ncclTunerPlugin_v2.name, "mock-tuner");
  assert_string_equal(ncclTunerPlugin_v3.name, "mock-tuner");
  assert_string_equal(ncclTunerPlugin_v4.name, "mock-tuner");
  assert_string_equal(ncclTunerPlugin_v5.name, "mock-tuner");
  assert_string_equal(ncclTunerPlugin_v6.name, "mock-tuner");
  assert_string_equal(ncclTunerPlugin_v7.name, "mock-tuner");
  assert_null(&ncclNetPlugin_v12);
  assert_int_equal(strand_core_tuner_abi_version(), 0);
}

/* Every double of a v5 block set to a distinct value (its index + 1). */
static void fill_v5(strand_tuner_constants_v5_t *k) {
  double *d = (double *)(void *)k;
  for (size_t i = 0; i < sizeof *k / sizeof *d; i++) d[i] = (double)i + 1.0;
}

/* The plugin's init saw the core's v5 block as a v7 block: latencies and rows 0..3 equal, row 4
 * zero. */
static void assert_seen_v5(const strand_tuner_constants_v5_t *k) {
  const strand_tuner_constants_v7_t *s = &rec.k_seen;
  assert_memory_equal(s->baseLatencies, k->baseLatencies, sizeof k->baseLatencies);
  assert_memory_equal(s->hwLatencies, k->hwLatencies, sizeof k->hwLatencies);
  for (int c = 0; c < STRAND_TUNER_NUM_COMPCAPS_V7; c++)
    for (int t = 0; t < STRAND_TUNER_NUM_TUNING_SCALES; t++) {
      bool shared = c < STRAND_TUNER_NUM_COMPCAPS;
      assert_true(s->llMaxBws[c][t] == (shared ? k->llMaxBws[c][t] : 0.0));
      assert_true(s->perChMaxRingLL128Bws[c][t] == (shared ? k->perChMaxRingLL128Bws[c][t] : 0.0));
      assert_true(s->perChMaxTreeLL128Bws[c][t] == (shared ? k->perChMaxTreeLL128Bws[c][t] : 0.0));
      assert_true(s->perChMaxTreeBws[c][t] == (shared ? k->perChMaxTreeBws[c][t] : 0.0));
      assert_true(s->perChMaxNVLSTreeBws[c][t] == (shared ? k->perChMaxNVLSTreeBws[c][t] : 0.0));
    }
}

static void test_init_v5_v6_pass_everything(void **state) {
  (void)state;
  strand_nvl_domain_info_v5_t nvl = {1, 4, 4};
  strand_tuner_constants_v5_t k, before;
  fill_v5(&k);
  before = k;
  void *ctx = NULL;
  assert_int_equal(ncclTunerPlugin_v5.init(&ctx, 0xabcdef, 16, 2, mock_logger, &nvl, &k),
                   STRAND_SUCCESS);
  assert_ptr_equal(ctx, &ctx_obj);
  assert_true(rec.commId == 0xabcdef && rec.nRanks == 16 && rec.nNodes == 2);
  assert_ptr_equal(rec.nvl, &nvl);
  assert_non_null(rec.constants);
  assert_seen_v5(&before);
  /* The plugin's changes to the shared part reach the core's block; nothing else moved. */
  assert_true(k.llMaxBws[3][2] == 77.0 && k.baseLatencies[1][2] == 9.5);
  before.llMaxBws[3][2] = 77.0;
  before.baseLatencies[1][2] = 9.5;
  assert_memory_equal(&k, &before, sizeof k);
  assert_int_equal(strand_core_tuner_abi_version(), 5);
  fill_v5(&k);
  before = k;
  assert_int_equal(ncclTunerPlugin_v6.init(&ctx, 7, 8, 1, mock_logger, &nvl, &k), STRAND_SUCCESS);
  assert_int_equal(strand_core_tuner_abi_version(), 6);
  assert_seen_v5(&before);
  assert_true(k.llMaxBws[3][2] == 77.0);
  /* NULL constants stay NULL. */
  assert_int_equal(ncclTunerPlugin_v6.init(&ctx, 7, 8, 1, mock_logger, &nvl, NULL), STRAND_SUCCESS);
  assert_null(rec.constants);
  assert_int_equal(ncclTunerPlugin_v5.finalize(ctx), STRAND_SUCCESS);
  assert_int_equal(rec.fin_calls, 1);
}

/* v7: the core's block goes to the plugin as is (5 rows), and its changes stay there. */
static void test_init_v7(void **state) {
  (void)state;
  assert_string_equal(ncclTunerPlugin_v7.name, "mock-tuner");
  assert_ptr_equal(ncclTunerPlugin_v7.getCollInfo, ncclTunerPlugin_v6.getCollInfo);
  assert_ptr_equal(ncclTunerPlugin_v7.getChunkSize, ncclTunerPlugin_v6.getChunkSize);
  assert_non_null(ncclTunerPlugin_v7.finalize);
  strand_nvl_domain_info_v7_t nvl = {2, 4, 4};
  strand_tuner_constants_v7_t k;
  memset(&k, 0, sizeof k);
  k.llMaxBws[4][1] = 3.25;
  void *ctx = NULL;
  assert_int_equal(ncclTunerPlugin_v7.init(&ctx, 0x77, 8, 2, mock_logger, &nvl, &k),
                   STRAND_SUCCESS);
  assert_ptr_equal(ctx, &ctx_obj);
  assert_ptr_equal(rec.constants, &k);
  assert_ptr_equal(rec.nvl, &nvl);
  assert_true(rec.k_seen.llMaxBws[4][1] == 3.25);
  assert_true(k.llMaxBws[4][0] == 55.0 && k.llMaxBws[3][2] == 77.0);
  assert_int_equal(strand_core_tuner_abi_version(), 7);
  assert_int_equal(ncclTunerPlugin_v7.finalize(ctx), STRAND_SUCCESS);
}

static void test_init_old_cores(void **state) {
  (void)state;
  strand_result_t (*inits[3])(size_t, size_t, strand_logger_t, void **) = {
      ncclTunerPlugin_v2.init, ncclTunerPlugin_v3.init, ncclTunerPlugin_v4.init};
  strand_result_t (*destroys[3])(void *) = {
      ncclTunerPlugin_v2.destroy, ncclTunerPlugin_v3.destroy, ncclTunerPlugin_v4.destroy};
  for (int i = 0; i < 3; i++) {
    void *ctx = NULL;
    rec.commId = 99;
    rec.nvl = (void *)&ctx;
    rec.constants = (void *)&ctx;
    assert_int_equal(inits[i](32, 4, mock_logger, &ctx), STRAND_SUCCESS);
    assert_ptr_equal(ctx, &ctx_obj);
    assert_true(rec.commId == 0 && rec.nRanks == 32 && rec.nNodes == 4);
    assert_null(rec.nvl);
    assert_null(rec.constants);
    assert_int_equal(strand_core_tuner_abi_version(), i + 2);
    assert_int_equal(destroys[i](ctx), STRAND_SUCCESS);
  }
  assert_int_equal(rec.fin_calls, 3);
}

static void test_collinfo_v4_v5_v6(void **state) {
  (void)state;
  strand_result_t (*fns[3])(void *, strand_tuner_func_t, size_t, int, float **, int, int, int,
                            int *) = {ncclTunerPlugin_v4.getCollInfo,
                                      ncclTunerPlugin_v5.getCollInfo,
                                      ncclTunerPlugin_v6.getCollInfo};
  for (int i = 0; i < 3; i++) {
    float t[NA][NP];
    core_table(t);
    int nch = 0;
    script.set_channels = 3;
    script.write_algo = STRAND_ALGO_TREE; /* pick tree/LL: a runnable entry, lowered */
    script.write_proto = STRAND_PROTO_LL;
    script.write_value = 0.0f;
    assert_int_equal(fns[i](&ctx_obj, STRAND_FUNC_ALLGATHER, 65536, 2, (float **)(void *)t, NA, NP,
                            1, &nch),
                     STRAND_SUCCESS);
    assert_int_equal(nch, 3);
    assert_true(t[STRAND_ALGO_TREE][STRAND_PROTO_LL] == 0.0f);
    assert_true(rec.func == STRAND_FUNC_ALLGATHER && rec.nBytes == 65536 && rec.numPipeOps == 2);
    assert_int_equal(rec.regBuff, 1);
    assert_int_equal(rec.numAlgo, NA);
  }
  assert_int_equal(warn_count, 0);
}

static void test_collinfo_v3_regbuff_zero(void **state) {
  (void)state;
  float t[NA][NP];
  core_table(t);
  int nch = 0;
  rec.regBuff = 7;
  script.set_channels = 2;
  /* A 2.22 core: 6 algorithms (no PAT). The table is passed with the core's dimensions. */
  assert_int_equal(ncclTunerPlugin_v3.getCollInfo(&ctx_obj, STRAND_FUNC_ALLREDUCE, 1 << 20, 1,
                                                  (float **)(void *)t, 6, NP, &nch),
                   STRAND_SUCCESS);
  assert_int_equal(rec.regBuff, 0);
  assert_int_equal(rec.numAlgo, 6);
  assert_int_equal(nch, 2);
}

static void test_collinfo_v2_all_ignored(void **state) {
  (void)state;
  int algo = STRAND_ALGO_UNDEF, proto = STRAND_PROTO_UNDEF, nch = 0;
  script.set_channels = 4;
  assert_int_equal(ncclTunerPlugin_v2.getCollInfo(&ctx_obj, STRAND_FUNC_BROADCAST, 4096, 1, 1, 1,
                                                  &algo, &proto, &nch),
                   STRAND_SUCCESS);
  assert_int_equal(rec.numAlgo, NA);
  assert_int_equal(rec.numProto, NP);
  for (int a = 0; a < NA; a++)
    for (int p = 0; p < NP; p++) assert_true(rec.seen[a][p] == IGN);
  assert_int_equal(algo, STRAND_ALGO_UNDEF);
  assert_int_equal(proto, STRAND_PROTO_UNDEF);
  assert_int_equal(nch, 4);

  /* A plugin that "picks" an ignored entry under v2 changes nothing the core sees. */
  script.write_algo = STRAND_ALGO_RING;
  script.write_proto = STRAND_PROTO_SIMPLE;
  assert_int_equal(ncclTunerPlugin_v2.getCollInfo(&ctx_obj, STRAND_FUNC_BROADCAST, 4096, 1, 1, 1,
                                                  &algo, &proto, &nch),
                   STRAND_SUCCESS);
  assert_int_equal(algo, STRAND_ALGO_UNDEF);
  assert_int_equal(proto, STRAND_PROTO_UNDEF);
}

static void test_guard_restores_ignored_entry(void **state) {
  (void)state;
  for (int round = 0; round < 2; round++) {
    float t[NA][NP];
    core_table(t);
    int nch = 0;
    script.write_algo = STRAND_ALGO_NVLS; /* ignored by the core: must come back as IGNORE */
    script.write_proto = STRAND_PROTO_SIMPLE;
    script.write_value = 0.0f;
    assert_int_equal(ncclTunerPlugin_v5.getCollInfo(&ctx_obj, STRAND_FUNC_ALLREDUCE, 1024, 1,
                                                    (float **)(void *)t, NA, NP, 0, &nch),
                     STRAND_SUCCESS);
    assert_true(t[STRAND_ALGO_NVLS][STRAND_PROTO_SIMPLE] == IGN);
    /* Everything else is as the core left it. */
    float want[NA][NP];
    core_table(want);
    assert_memory_equal(t, want, sizeof t);
  }
  assert_int_equal(warn_count, 1); /* once per process, not per collective */
  assert_non_null(strstr(last_warn, "mock-tuner"));
  assert_non_null(strstr(last_warn, "algorithm 4 protocol 2"));
}

static void test_guard_channels_range(void **state) {
  (void)state;
  const int bad[] = {-1, STRAND_TUNER_MAX_CHANNELS + 1, 1000000};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    float t[NA][NP];
    core_table(t);
    int nch = 0;
    script.set_channels = bad[i];
    assert_int_equal(ncclTunerPlugin_v6.getCollInfo(&ctx_obj, STRAND_FUNC_REDUCE, 1024, 1,
                                                    (float **)(void *)t, NA, NP, 0, &nch),
                     STRAND_SUCCESS);
    assert_int_equal(nch, 0);
  }
  assert_int_equal(warn_count, 1);
  assert_non_null(strstr(last_warn, "nChannels"));
  /* The bounds themselves are valid answers. */
  const int good[] = {0, 1, STRAND_TUNER_MAX_CHANNELS};
  for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
    float t[NA][NP];
    core_table(t);
    int nch = 0;
    script.set_channels = good[i];
    assert_int_equal(ncclTunerPlugin_v6.getCollInfo(&ctx_obj, STRAND_FUNC_REDUCE, 1024, 1,
                                                    (float **)(void *)t, NA, NP, 0, &nch),
                     STRAND_SUCCESS);
    assert_int_equal(nch, good[i]);
  }
  int *null_nch = NULL;
  float t[NA][NP];
  core_table(t);
  assert_int_equal(ncclTunerPlugin_v6.getCollInfo(&ctx_obj, STRAND_FUNC_REDUCE, 1024, 1,
                                                  (float **)(void *)t, NA, NP, 0, null_nch),
                   STRAND_INTERNAL_ERROR);
}

static void test_chunk_size(void **state) {
  (void)state;
  assert_non_null(ncclTunerPlugin_v6.getChunkSize);
  size_t chunk = 131072;
  script.chunk_answer = 65536;
  assert_int_equal(ncclTunerPlugin_v6.getChunkSize(&ctx_obj, STRAND_FUNC_ALLREDUCE, 1 << 20,
                                                   STRAND_ALGO_RING, STRAND_PROTO_SIMPLE, 2, &chunk),
                   STRAND_SUCCESS);
  assert_int_equal(chunk, 65536);
  script.chunk_answer = 0; /* NCCL would divide by it: the core's value is kept */
  chunk = 131072;
  assert_int_equal(ncclTunerPlugin_v6.getChunkSize(&ctx_obj, STRAND_FUNC_ALLREDUCE, 1 << 20,
                                                   STRAND_ALGO_RING, STRAND_PROTO_SIMPLE, 2, &chunk),
                   STRAND_SUCCESS);
  assert_int_equal(chunk, 131072);
  assert_int_equal(warn_count, 1);
  assert_int_equal(rec.chunk_calls, 2);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup(test_layouts, setup),
      cmocka_unit_test_setup(test_names_and_no_net, setup),
      cmocka_unit_test_setup(test_init_v5_v6_pass_everything, setup),
      cmocka_unit_test_setup(test_init_v7, setup),
      cmocka_unit_test_setup(test_init_old_cores, setup),
      cmocka_unit_test_setup(test_collinfo_v4_v5_v6, setup),
      cmocka_unit_test_setup(test_collinfo_v3_regbuff_zero, setup),
      cmocka_unit_test_setup(test_collinfo_v2_all_ignored, setup),
      cmocka_unit_test_setup(test_guard_restores_ignored_entry, setup),
      cmocka_unit_test_setup(test_guard_channels_range, setup),
      cmocka_unit_test_setup(test_chunk_size, setup),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
