/* Strand SDK — the tuner export layer: ncclTunerPlugin_v2 .. ncclTunerPlugin_v7 from the plugin's
 * one v7-semantics tuner table (strand_plugin_tuner); spec §11.
 *
 * Same construction as export_net.c: zero-initialised tables filled by a constructor at dlopen
 * time. Unlike the net tables, every getCollInfo goes through a guard (guarded_collinfo): the core
 * trusts the tuner's answer (an un-ignored cost entry or a wild channel count reaches kernel
 * launch), and a tuner is exactly the kind of code that is written quickly from measurements, so
 * the SDK restores what NCCL said it cannot run and drops an impossible nChannels.
 *
 * Contexts: every version's init creates one plugin context per communicator, so no sharing is
 * needed; v2..v4 cores have no comm id (0 is passed), no NVLink info and no constants (NULL).
 * v5/v6 cores hand a v5 constants block (4 compute-capability rows); the plugin gets a v7 copy
 * (row 4 zero) and what it leaves in the shared part is copied back (constants_v5_to_v7 / _v7_to_v5,
 * the conversion NCCL itself does between the two).
 *
 * This object is only linked into a plugin that writes STRAND_TUNER_PLUGIN(); it must not
 * reference the net or CollNet export objects. */
#include <stdatomic.h>
#include <string.h>

#include "export_internal.h"
#include "strand/tuner.h"

#define PLUGIN strand_plugin_tuner

/* Referenced by STRAND_TUNER_PLUGIN() so that linking libstrand-sdk.a pulls this object in. */
const int strand_tuner_export_anchor = 1;

STRAND_EXPORT_SYMBOL strand_tuner_v2_t ncclTunerPlugin_v2;
STRAND_EXPORT_SYMBOL strand_tuner_v3_t ncclTunerPlugin_v3;
STRAND_EXPORT_SYMBOL strand_tuner_v4_t ncclTunerPlugin_v4;
STRAND_EXPORT_SYMBOL strand_tuner_v5_t ncclTunerPlugin_v5;
STRAND_EXPORT_SYMBOL strand_tuner_v6_t ncclTunerPlugin_v6;
STRAND_EXPORT_SYMBOL strand_tuner_v7_t ncclTunerPlugin_v7;

static _Atomic int core_version;
/* One WARN per kind of tuner mistake per process: getCollInfo runs for every collective. */
static atomic_flag warned_ignored = ATOMIC_FLAG_INIT;
static atomic_flag warned_channels = ATOMIC_FLAG_INIT;
static atomic_flag warned_chunk = ATOMIC_FLAG_INIT;

int strand_core_tuner_abi_version(void) { return atomic_load(&core_version); }

void strand_export_tuner_reset_for_test(void) {
  atomic_store(&core_version, 0);
  atomic_flag_clear(&warned_ignored);
  atomic_flag_clear(&warned_channels);
  atomic_flag_clear(&warned_chunk);
}

/* ---- init / finalize ---- */

static strand_result_t init_as(int version, void **ctx, uint64_t commId, size_t nRanks,
                               size_t nNodes, strand_logger_t logger,
                               strand_nvl_domain_info_v7_t *nvl, strand_tuner_constants_v7_t *k) {
  strand_export_set_logger(logger);
  atomic_store(&core_version, version);
  return PLUGIN->init(ctx, commId, nRanks, nNodes, logger, nvl, k);
}

/* v5 <-> v7 constants: the latencies whole, rows 0..3 of every per-compute-capability table. */
#define ROWS_V5 (STRAND_TUNER_NUM_COMPCAPS * STRAND_TUNER_NUM_TUNING_SCALES * sizeof(double))
void strand_export_tuner_constants_v5_to_v7(strand_tuner_constants_v7_t *d,
                                            const strand_tuner_constants_v5_t *s) {
  memset(d, 0, sizeof *d);
  memcpy(d->baseLatencies, s->baseLatencies, sizeof d->baseLatencies);
  memcpy(d->hwLatencies, s->hwLatencies, sizeof d->hwLatencies);
  memcpy(d->llMaxBws, s->llMaxBws, ROWS_V5);
  memcpy(d->perChMaxRingLL128Bws, s->perChMaxRingLL128Bws, ROWS_V5);
  memcpy(d->perChMaxTreeLL128Bws, s->perChMaxTreeLL128Bws, ROWS_V5);
  memcpy(d->perChMaxTreeBws, s->perChMaxTreeBws, ROWS_V5);
  memcpy(d->perChMaxNVLSTreeBws, s->perChMaxNVLSTreeBws, ROWS_V5);
}
void strand_export_tuner_constants_v7_to_v5(strand_tuner_constants_v5_t *d,
                                            const strand_tuner_constants_v7_t *s) {
  memcpy(d->baseLatencies, s->baseLatencies, sizeof d->baseLatencies);
  memcpy(d->hwLatencies, s->hwLatencies, sizeof d->hwLatencies);
  memcpy(d->llMaxBws, s->llMaxBws, ROWS_V5);
  memcpy(d->perChMaxRingLL128Bws, s->perChMaxRingLL128Bws, ROWS_V5);
  memcpy(d->perChMaxTreeLL128Bws, s->perChMaxTreeLL128Bws, ROWS_V5);
  memcpy(d->perChMaxTreeBws, s->perChMaxTreeBws, ROWS_V5);
  memcpy(d->perChMaxNVLSTreeBws, s->perChMaxNVLSTreeBws, ROWS_V5);
}

/* v5/v6 init: the plugin sees a v7 copy of the core's v5 block; its changes go back. */
static strand_result_t init_v5_block(int version, void **ctx, uint64_t commId, size_t nRanks,
                                     size_t nNodes, strand_logger_t logger,
                                     strand_nvl_domain_info_v5_t *nvl,
                                     strand_tuner_constants_v5_t *k) {
  if (k == NULL) return init_as(version, ctx, commId, nRanks, nNodes, logger, nvl, NULL);
  strand_tuner_constants_v7_t k7;
  strand_export_tuner_constants_v5_to_v7(&k7, k);
  strand_result_t rc = init_as(version, ctx, commId, nRanks, nNodes, logger, nvl, &k7);
  strand_export_tuner_constants_v7_to_v5(k, &k7);
  return rc;
}

/* v2..v4: init(nRanks, nNodes, logger, &ctx). */
static strand_result_t v2_init(size_t nRanks, size_t nNodes, strand_logger_t logger, void **ctx) {
  return init_as(2, ctx, 0, nRanks, nNodes, logger, NULL, NULL);
}
static strand_result_t v3_init(size_t nRanks, size_t nNodes, strand_logger_t logger, void **ctx) {
  return init_as(3, ctx, 0, nRanks, nNodes, logger, NULL, NULL);
}
static strand_result_t v4_init(size_t nRanks, size_t nNodes, strand_logger_t logger, void **ctx) {
  return init_as(4, ctx, 0, nRanks, nNodes, logger, NULL, NULL);
}
static strand_result_t v5_init(void **ctx, uint64_t commId, size_t nRanks, size_t nNodes,
                               strand_logger_t logger, strand_nvl_domain_info_v5_t *nvl,
                               strand_tuner_constants_v5_t *k) {
  return init_v5_block(5, ctx, commId, nRanks, nNodes, logger, nvl, k);
}
static strand_result_t v6_init(void **ctx, uint64_t commId, size_t nRanks, size_t nNodes,
                               strand_logger_t logger, strand_nvl_domain_info_v6_t *nvl,
                               strand_tuner_constants_v6_t *k) {
  return init_v5_block(6, ctx, commId, nRanks, nNodes, logger, nvl, k);
}
static strand_result_t v7_init(void **ctx, uint64_t commId, size_t nRanks, size_t nNodes,
                               strand_logger_t logger, strand_nvl_domain_info_v7_t *nvl,
                               strand_tuner_constants_v7_t *k) {
  return init_as(7, ctx, commId, nRanks, nNodes, logger, nvl, k);
}

/* ---- getCollInfo, guarded ---- */

strand_result_t strand_export_tuner_guarded_collinfo(void *ctx, strand_tuner_func_t func,
                                                     size_t nBytes, int numPipeOps, float **table,
                                                     int numAlgo, int numProto, int regBuff,
                                                     int *nChannels) {
  if (nChannels == NULL) {
    STRAND_EXPORT_WARN("ncclTunerPlugin_v%d.getCollInfo called with nChannels NULL; the core "
                       "must pass somewhere to write the answer", strand_core_tuner_abi_version());
    return STRAND_INTERNAL_ERROR;
  }
  /* Remember which entries the core ruled out. The table is tiny (7x3 in every core so far); a
   * larger one than we can copy is passed through unguarded rather than refused. */
  enum { MAX_ENTRIES = 64 };
  unsigned char ignored[MAX_ENTRIES];
  int n = 0;
  float *flat = (float *)(void *)table;
  if (table != NULL && numAlgo > 0 && numProto > 0 && numAlgo * numProto <= MAX_ENTRIES) {
    n = numAlgo * numProto;
    for (int i = 0; i < n; i++) ignored[i] = flat[i] == STRAND_ALGO_PROTO_IGNORE;
  }
  strand_result_t rc = PLUGIN->getCollInfo(ctx, func, nBytes, numPipeOps, table, numAlgo, numProto,
                                           regBuff, nChannels);
  for (int i = 0; i < n; i++) {
    if (!ignored[i] || flat[i] == STRAND_ALGO_PROTO_IGNORE) continue;
    if (!atomic_flag_test_and_set(&warned_ignored))
      STRAND_EXPORT_WARN("tuner '%s' wrote %g into cost entry algorithm %d protocol %d, which the "
                         "core marked as not runnable (-1); restored (this tuner bug is reported "
                         "once)", PLUGIN->name ? PLUGIN->name : "?", (double)flat[i],
                         i / numProto, i % numProto);
    flat[i] = STRAND_ALGO_PROTO_IGNORE;
  }
  if (*nChannels < 0 || *nChannels > STRAND_TUNER_MAX_CHANNELS) {
    if (!atomic_flag_test_and_set(&warned_channels))
      STRAND_EXPORT_WARN("tuner '%s' answered nChannels %d for function %d, %zu bytes; valid are "
                         "0 (NCCL's choice) .. %d; using NCCL's choice (reported once)",
                         PLUGIN->name ? PLUGIN->name : "?", *nChannels, func, nBytes,
                         STRAND_TUNER_MAX_CHANNELS);
    *nChannels = 0;
  }
  return rc;
}

static strand_result_t v3_getCollInfo(void *ctx, strand_tuner_func_t func, size_t nBytes,
                                      int numPipeOps, float **table, int numAlgo, int numProto,
                                      int *nChannels) {
  /* v3 cores do not say whether the buffers are registered: "no" is the answer that assumes less. */
  return strand_export_tuner_guarded_collinfo(ctx, func, nBytes, numPipeOps, table, numAlgo,
                                              numProto, 0, nChannels);
}

/* v2 cores ask before computing costs and take algorithm/protocol answers. The plugin speaks cost
 * tables, so it gets one in which every entry is IGNORE: it cannot pick (nothing is known to be
 * runnable), and only its nChannels answer is passed on. *algorithm / *protocol are left as the
 * core set them (undefined = NCCL decides). */
static strand_result_t v2_getCollInfo(void *ctx, strand_tuner_func_t func, size_t nBytes,
                                      int collNetSupport, int nvlsSupport, int numPipeOps,
                                      int *algorithm, int *protocol, int *nChannels) {
  (void)collNetSupport;
  (void)nvlsSupport;
  (void)algorithm;
  (void)protocol;
  float table[STRAND_TUNER_NUM_ALGORITHMS][STRAND_TUNER_NUM_PROTOCOLS];
  for (int a = 0; a < STRAND_TUNER_NUM_ALGORITHMS; a++)
    for (int p = 0; p < STRAND_TUNER_NUM_PROTOCOLS; p++) table[a][p] = STRAND_ALGO_PROTO_IGNORE;
  return strand_export_tuner_guarded_collinfo(ctx, func, nBytes, numPipeOps, (float **)(void *)table,
                                              STRAND_TUNER_NUM_ALGORITHMS,
                                              STRAND_TUNER_NUM_PROTOCOLS, 0, nChannels);
}

/* v6/v7 getChunkSize: NCCL rounds the answer down to its grain and clamps it from above only, so a
 * zero would leave it with a chunk of nothing; keep NCCL's value instead. */
static strand_result_t v6_getChunkSize(void *ctx, strand_tuner_func_t func, size_t nBytes, int algo,
                                       int proto, int nChannels, size_t *chunkSize) {
  if (chunkSize == NULL) return STRAND_INTERNAL_ERROR;
  size_t core_value = *chunkSize;
  strand_result_t rc = PLUGIN->getChunkSize(ctx, func, nBytes, algo, proto, nChannels, chunkSize);
  if (*chunkSize == 0) {
    if (!atomic_flag_test_and_set(&warned_chunk))
      STRAND_EXPORT_WARN("tuner '%s' answered chunk size 0 for function %d, %zu bytes; using "
                         "NCCL's %zu (reported once)", PLUGIN->name ? PLUGIN->name : "?", func,
                         nBytes, core_value);
    *chunkSize = core_value;
  }
  return rc;
}

/* ---- the tables ---- */

void strand_export_tuner_fill_tables(void) {
  const strand_tuner_t *p = PLUGIN;
  ncclTunerPlugin_v2 = (strand_tuner_v2_t){
      .name = p->name,
      .init = v2_init,
      .getCollInfo = v2_getCollInfo,
      .destroy = p->finalize,
  };
  ncclTunerPlugin_v3 = (strand_tuner_v3_t){
      .name = p->name,
      .init = v3_init,
      .getCollInfo = v3_getCollInfo,
      .destroy = p->finalize,
  };
  ncclTunerPlugin_v4 = (strand_tuner_v4_t){
      .name = p->name,
      .init = v4_init,
      .getCollInfo = strand_export_tuner_guarded_collinfo,
      .destroy = p->finalize,
  };
  ncclTunerPlugin_v5 = (strand_tuner_v5_t){
      .name = p->name,
      .init = v5_init,
      .getCollInfo = strand_export_tuner_guarded_collinfo,
      .finalize = p->finalize,
  };
  ncclTunerPlugin_v6 = (strand_tuner_v6_t){
      .name = p->name,
      .init = v6_init,
      .getCollInfo = strand_export_tuner_guarded_collinfo,
      .finalize = p->finalize,
      .getChunkSize = p->getChunkSize != NULL ? v6_getChunkSize : NULL,
  };
  ncclTunerPlugin_v7 = (strand_tuner_v7_t){
      .name = p->name,
      .init = v7_init,
      .getCollInfo = strand_export_tuner_guarded_collinfo,
      .finalize = p->finalize,
      .getChunkSize = p->getChunkSize != NULL ? v6_getChunkSize : NULL,
  };
}

__attribute__((constructor)) static void strand_export_tuner_constructor(void) {
  strand_export_tuner_fill_tables();
}
