/* strand-ofi — the NCCL tuner in the plugin's library (NCCL loads it from the NET plugin's .so when
 * it has no tuner library of its own: spec §11.1): channels per size band, and optionally the
 * all-reduce protocol of a band.
 *
 * Why: NCCL sizes a communicator's channels once, from the speed the plugin reports, and then
 * splits every collective over all of them. Rails only pay when NCCL opens many comms per peer
 * (docs/benchmarks/ofi.md, "Rails": 8 channels and 8 rails moved 128 MiB 1.65x faster), but the
 * same 8 channels split an 8 B or 64 KiB all-reduce 8 ways (0.05-0.6x). STRAND_OFI_TUNER_CHANNELS
 * gives a collective of each size band its channel count, so the comms can be opened for the large
 * sizes (STRAND_OFI_SPEED_MBPS or NCCL_MIN_NCHANNELS) and small ones still run on one or two.
 *
 * A band may also name a protocol (`:ll`, `:ll128`, `:simple`): for an all-reduce in that band the
 * tuner makes that protocol the cheapest of the algorithm NCCL picked, when NCCL can run it. Why:
 * the speed that opens enough channels for the rails also makes NCCL keep LL up to 512 KiB, which
 * over a socket lost to Simple for strand-socket (docs/benchmarks/socket.md, "The tuner's default").
 *
 * Defaults by node count (only where the user left the variable unset; a user value wins at every
 * node count), from paired rounds on 4 H200s (docs/benchmarks/ofi.md, "Paired rounds: the defaults
 * decided"):
 *   - 2 nodes: all-reduce on Tree up to 1 KiB (1.03-1.36x the built-in Socket at 8 B-1 KiB where
 *     the defaults were 0.81-1.17x); the channel bands stay what the net side set (the rails
 *     profile's, or none): the 16M band was not measured paired there.
 *   - 3 nodes or more: bands 16K:1,64K:1:ll,1M:2:simple,16M:2:simple (2 and 16 MiB at 4 ranks
 *     went from 0.56/0.70x to 0.85/0.96x with the two upper bands; one channel up to 64 KiB, LL
 *     above 16 KiB, took 8-64 KiB from 0.66-0.84x to 1.09-1.68x: NCCL had spread 8 KiB over 2 of
 *     the 8 channels the rails open and the 1M:2:simple band forced Simple at 32-64 KiB; "Four
 *     GPUs again" in ofi.md); no Tree (neutral at 4 ranks in the paired call, 0.45-0.72x in an
 *     earlier unpaired one).
 *
 * It answers only nChannels (and a band's protocol), only for ring/tree/PAT (NCCL caps the answer at what the comm opened;
 * CollNet/NVLS take it as given), only for a communicator spanning nodes, only when this library's
 * net side was initialised in the process, and never over an answer already made. Everything else
 * stays NCCL's choice. The grammar and that rule are the SDK's (strand/tuner_bands.h, shared with
 * strand-socket); this file keeps strand-ofi's variable and conditions. A malformed
 * STRAND_OFI_TUNER_CHANNELS fails init (the net side's, and the tuner's when it reads it first).
 * Calls ofi_config.c (the parsed parameters) only. */
#include <pthread.h>
#include <stdlib.h>

#include "ofi.h"
#include "strand/tuner.h"
#include "strand/tuner_bands.h"

/* The defaults by node count (see the top of the file). */
#define OFI_TUNER_AUTO_TREE_BYTES_2NODES 1024u
#define OFI_TUNER_AUTO_BANDS_3NODES "16K:1,64K:1:ll,1M:2:simple,16M:2:simple"

/* The 3-node default is a constant: parsed once per process (the first tuner init that needs it),
 * not at every communicator's init. A parse error (a bad edit of the constant) is kept and
 * reported by every init that needs the bands, as before. */
static pthread_once_t auto_bands_once = PTHREAD_ONCE_INIT;
static strand_tuner_bands_t auto_bands_3nodes;
static strand_result_t auto_bands_rc;
static char auto_bands_err[256];

static void auto_bands_parse(void) {
  auto_bands_rc = strand_tuner_bands_parse(OFI_TUNER_AUTO_BANDS_3NODES, &auto_bands_3nodes,
                                           auto_bands_err, sizeof auto_bands_err);
}

typedef struct {
  bool active;
  strand_tuner_bands_t bands;
  uint64_t tree_bytes; /* STRAND_OFI_TUNER_TREE_BYTES (0 when inactive) */
} ofi_tuner_ctx_t;

/* STRAND_OFI_TUNER_TREE_BYTES: a small all-reduce for which NCCL picked Ring runs on Tree, with the
 * protocol NCCL finds cheapest for Tree, by lowering that one runnable entry to 0. Why: over
 * tcp;ofi_rxm every message costs NCCL's proxy thread a provider send or receive of several
 * system calls (docs/benchmarks/ofi.md), and a ring all-reduce sends 2(n-1) messages per rank
 * where a tree sends one up and one down. Never touches an ignored or negative entry, nor a choice
 * of CollNet, NVLS or PAT. */
static void prefer_tree(float **table, int numAlgo, int numProto) {
  if (numAlgo <= STRAND_ALGO_RING) return;
  if (strand_tuner_nccl_algo(table, numAlgo, numProto) != STRAND_ALGO_RING) return;
  int best = -1;
  for (int p = 0; p < numProto; p++) {
    float c = *strand_tuner_cost(table, numProto, STRAND_ALGO_TREE, p);
    if (c >= 0.0f && (best < 0 || c < *strand_tuner_cost(table, numProto, STRAND_ALGO_TREE, best)))
      best = p;
  }
  if (best >= 0) *strand_tuner_cost(table, numProto, STRAND_ALGO_TREE, best) = 0.0f;
}

static strand_result_t ofi_tuner_init(void **ctx, uint64_t commId, size_t nRanks, size_t nNodes,
                                      strand_logger_t logger, strand_nvl_domain_info_t *nvl,
                                      strand_tuner_constants_t *constants) {
  (void)nvl, (void)constants;
  if (ctx == NULL) return STRAND_INTERNAL_ERROR;
  *ctx = NULL;
  strand_log_init(logger);
  strand_log_set_prefix(OFI_PLUGIN_NAME);
  ofi_tuner_ctx_t *t = calloc(1, sizeof *t);
  if (t == NULL) {
    STRAND_WARN("tuner init: out of memory for a %zu-byte context", sizeof *t);
    return STRAND_SYSTEM_ERROR;
  }
  const char *why = NULL;
  if (ofi_ndevs() > 0) {
    t->bands = ofi_params.tuner_bands; /* read and validated by the net side's init */
  } else {
    /* NCCL loaded the tuner from our library but our net side is not in use: still read the knob,
     * so that a typo is reported (and fails, as it would have failed the net init), but change
     * nothing. */
    strand_result_t rc = ofi_tuner_bands_read(&t->bands);
    if (rc != STRAND_SUCCESS) {
      free(t);
      return rc;
    }
    why = "strand-ofi's network is not in use in this process";
  }
  if (why == NULL && nNodes <= 1) why = "single-node communicator: no traffic crosses strand-ofi";
  /* Where each value comes from, for the INFO line: the user's variable, or the default for this
   * node count (the rails profile's bands at 2 nodes are the net side's default). */
  const char *bands_from = ofi_params.tuner_channels_set ? "STRAND_OFI_TUNER_CHANNELS"
                           : t->bands.nbands              ? "automatic: the rails profile"
                                                          : "automatic";
  const char *tree_from = "STRAND_OFI_TUNER_TREE_BYTES";
  if (why == NULL) {
    if (!ofi_params.tuner_tree_bytes_set) {
      t->tree_bytes = nNodes == 2 ? OFI_TUNER_AUTO_TREE_BYTES_2NODES : 0;
      tree_from = nNodes == 2 ? "automatic: 2 nodes" : "automatic: 0 at 3 nodes or more";
    } else {
      t->tree_bytes = ofi_params.tuner_tree_bytes;
    }
    if (!ofi_params.tuner_channels_set && nNodes >= 3) {
      pthread_once(&auto_bands_once, auto_bands_parse);
      if (auto_bands_rc != STRAND_SUCCESS) {
        STRAND_WARN("tuner init: the built-in bands '%s' do not parse: %s",
                    OFI_TUNER_AUTO_BANDS_3NODES, auto_bands_err);
        free(t);
        return STRAND_INTERNAL_ERROR;
      }
      t->bands = auto_bands_3nodes;
      bands_from = "automatic: 3 nodes or more";
    }
    if (t->bands.nbands == 0 && t->tree_bytes == 0)
      why = "no channel bands, and STRAND_OFI_TUNER_TREE_BYTES=0";
  }
  t->active = why == NULL;
  if (t->active) {
    char text[512];
    strand_tuner_bands_format(&t->bands, text, sizeof text);
    STRAND_INFO(STRAND_SUBSYS_INIT | STRAND_SUBSYS_TUNING,
                "tuner (ncclTunerPlugin_v%d): comm %llx, %zu ranks on %zu nodes: channels by size "
                "%s (%s; ring/tree/PAT); all-reduce on Tree up to %llu bytes where NCCL picked "
                "Ring (%s)",
                strand_core_tuner_abi_version(), (unsigned long long)commId, nRanks, nNodes,
                t->bands.nbands ? text : "NCCL's", bands_from, (unsigned long long)t->tree_bytes,
                tree_from);
  } else {
    STRAND_INFO(STRAND_SUBSYS_INIT | STRAND_SUBSYS_TUNING,
                "tuner (ncclTunerPlugin_v%d): comm %llx, %zu ranks on %zu nodes: leaves NCCL's "
                "choices unchanged (%s)",
                strand_core_tuner_abi_version(), (unsigned long long)commId, nRanks, nNodes, why);
  }
  *ctx = t;
  return STRAND_SUCCESS;
}

static strand_result_t ofi_tuner_get_coll_info(void *ctx, strand_tuner_func_t func, size_t nBytes,
                                               int numPipeOps, float **table, int numAlgo,
                                               int numProto, int regBuff, int *nChannels) {
  (void)numPipeOps, (void)regBuff;
  const ofi_tuner_ctx_t *t = ctx;
  if (t == NULL || !t->active || nChannels == NULL || table == NULL) return STRAND_SUCCESS;
  if (func == STRAND_FUNC_ALLREDUCE && nBytes <= t->tree_bytes && *nChannels == 0)
    prefer_tree(table, numAlgo, numProto);
  strand_tuner_bands_apply(&t->bands, func, nBytes, strand_tuner_nccl_algo(table, numAlgo, numProto),
                           table, numProto, nChannels);
  return STRAND_SUCCESS;
}

static strand_result_t ofi_tuner_finalize(void *ctx) {
  free(ctx);
  return STRAND_SUCCESS;
}

static const strand_tuner_t ofi_tuner = {
    .name = OFI_PLUGIN_NAME,
    .init = ofi_tuner_init,
    .getCollInfo = ofi_tuner_get_coll_info,
    .finalize = ofi_tuner_finalize,
    .getChunkSize = NULL,
};

STRAND_TUNER_PLUGIN(ofi_tuner);
