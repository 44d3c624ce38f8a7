/* strand-socket — the NCCL tuner that lives in the plugin's library (NCCL loads it from the NET
 * plugin's .so when it finds no tuner library of its own: spec §11.1).
 *
 * What it does: for a collective that crosses strand-socket (the communicator spans nodes) and for
 * which NCCL's cheapest cost entry is ring, tree or PAT, it answers nChannels from the size bands of
 * STRAND_SOCKET_TUNER_CHANNELS, and for an all-reduce in a band that names a protocol it makes that
 * protocol the cheapest for the algorithm NCCL picked. Why: NCCL sizes its channel count from the
 * link speed the plugin reports, once per communicator, and then uses them all for small
 * collectives too, where each extra channel is another connection's proxy round trip; and for that
 * speed it keeps LL up to 512 KiB, where LL's doubled bytes in small steps lose to Simple over a
 * socket (both measured: docs/benchmarks/socket.md, "The tuner's default").
 *
 * For an all-gather whose size (NCCL's nBytes: the whole output) lies in
 * STRAND_SOCKET_TUNER_ALLGATHER_RING and for which NCCL picked PAT, it makes ring's cheapest runnable
 * entry the cheapest: for the speed strand-socket reports NCCL 2.28 runs such all-gathers as PAT,
 * 1.4-2.4x slower than ring on two nodes there.
 *
 * What it never does: change the algorithm otherwise, raise an entry's cost, touch an entry NCCL marked
 * ignored or negative (so it never picks what NCCL cannot run), change the protocol of anything but
 * all-reduce (the only collective measured), answer for a single-node communicator (strand-socket
 * carries nothing there), answer for CollNet/NVLS (NCCL uses nChannels as given for those, without
 * capping it to what the comm opened), or act when this library's net side was not initialised in
 * the process (then another network carries the traffic). In all those cases it leaves every output
 * as NCCL set it, which always means "NCCL's own choice". The SDK's guard (export_tuner.c) would
 * catch a wild answer anyway; this file does not rely on it.
 *
 * Per-communicator context: the policy copy and whether this comm is one the tuner acts for. */
#include <stdlib.h>

#include "sk.h"
#include "strand/log.h"
#include "strand/tuner.h"

typedef struct {
  bool active;
  sk_tuner_policy_t policy;
} sk_tuner_ctx_t;

static strand_result_t sk_tuner_init(void **ctx, uint64_t commId, size_t nRanks, size_t nNodes,
                                     strand_logger_t logger, strand_nvl_domain_info_t *nvl,
                                     strand_tuner_constants_t *constants) {
  (void)nvl;
  (void)constants;
  if (ctx == NULL) return STRAND_INTERNAL_ERROR;
  *ctx = NULL;
  strand_log_init(logger);
  strand_log_set_prefix(SK_PLUGIN_NAME);

  sk_tuner_ctx_t *t = calloc(1, sizeof *t);
  if (t == NULL) {
    STRAND_WARN("tuner init: out of memory for a %zu-byte context (comm %llx)", sizeof *t,
                (unsigned long long)commId);
    return STRAND_SYSTEM_ERROR;
  }
  bool enabled = true;
  const char *why = NULL;
  if (sk_device_count() > 0) {
    /* The net side read and validated the knobs at its init. */
    enabled = sk_config()->tuner_enabled;
    t->policy = sk_config()->tuner_policy;
  } else {
    /* NCCL loaded the tuner from our library but our net init never ran (another network was
     * chosen): still read the knobs, so a typo is reported, but change nothing. */
    strand_result_t rc = sk_tuner_config_read(&enabled, &t->policy);
    if (rc != STRAND_SUCCESS) {
      free(t);
      return rc;
    }
    why = "strand-socket's network is not in use in this process";
  }
  if (why == NULL && !enabled) why = "disabled by STRAND_SOCKET_TUNER=0";
  if (why == NULL && nNodes <= 1) why = "single-node communicator: no traffic crosses strand-socket";
  if (why == NULL && t->policy.nbands == 0) why = "STRAND_SOCKET_TUNER_CHANNELS has no bands";
  t->active = why == NULL;

  char text[512];
  sk_tuner_policy_format(&t->policy, text, sizeof text);
  if (t->active)
    STRAND_INFO(STRAND_SUBSYS_INIT | STRAND_SUBSYS_TUNING,
                "tuner (ncclTunerPlugin_v%d): comm %llx, %zu ranks on %zu nodes: channels by "
                "size %s (ring/tree/PAT only; a protocol only for all-reduce)",
                strand_core_tuner_abi_version(), (unsigned long long)commId, nRanks, nNodes, text);
  else
    STRAND_INFO(STRAND_SUBSYS_INIT | STRAND_SUBSYS_TUNING,
                "tuner (ncclTunerPlugin_v%d): comm %llx, %zu ranks on %zu nodes: leaves NCCL's "
                "choices unchanged (%s)", strand_core_tuner_abi_version(),
                (unsigned long long)commId, nRanks, nNodes, why);
  *ctx = t;
  return STRAND_SUCCESS;
}

/* An entry NCCL can run: not ignored and not negative (the rule of NCCL's topoGetAlgoInfo). The
 * tuner only ever lowers runnable entries, so its choice is always one NCCL offered. */
static bool runnable(float cost) { return cost != STRAND_ALGO_PROTO_IGNORE && cost >= 0; }

/* The algorithm NCCL will run: its cheapest runnable entry, or STRAND_ALGO_UNDEF when there is
 * none. */
static int ncclPick(float **table, int numAlgo, int numProto) {
  int best = STRAND_ALGO_UNDEF;
  float best_cost = 0;
  for (int a = 0; a < numAlgo; a++) {
    for (int p = 0; p < numProto; p++) {
      float c = *strand_tuner_cost(table, numProto, a, p);
      if (!runnable(c)) continue;
      if (best == STRAND_ALGO_UNDEF || c < best_cost) {
        best = a;
        best_cost = c;
      }
    }
  }
  return best;
}

static strand_result_t sk_tuner_get_coll_info(void *ctx, strand_tuner_func_t func, size_t nBytes,
                                              int numPipeOps, float **table, int numAlgo,
                                              int numProto, int regBuff, int *nChannels) {
  (void)numPipeOps;
  (void)regBuff;
  const sk_tuner_ctx_t *t = ctx;
  if (t == NULL || !t->active || nChannels == NULL || table == NULL) return STRAND_SUCCESS;
  /* The five collectives the bands were measured for; anything else NCCL may add later is not. */
  if (func < STRAND_FUNC_BROADCAST || func > STRAND_FUNC_ALLREDUCE) return STRAND_SUCCESS;
  /* Someone (NCCL, a future core) already answered: do not override. */
  if (*nChannels != 0) return STRAND_SUCCESS;
  int algo = ncclPick(table, numAlgo, numProto);
  if (algo != STRAND_ALGO_RING && algo != STRAND_ALGO_TREE && algo != STRAND_ALGO_PAT)
    return STRAND_SUCCESS;
  if (func == STRAND_FUNC_ALLGATHER && algo == STRAND_ALGO_PAT && t->policy.ag_ring_max != 0 &&
      nBytes >= t->policy.ag_ring_min && nBytes <= t->policy.ag_ring_max &&
      STRAND_ALGO_RING < numAlgo) {
    /* Ring over PAT: lower ring's cheapest runnable entry to 0. Ring comes before PAT in NCCL's
     * table and NCCL takes the first strictly cheaper entry, so ring wins even against a PAT
     * entry of 0; with no runnable ring entry nothing changes and PAT stays. */
    float *best = NULL;
    for (int p = 0; p < numProto; p++) {
      float *c = strand_tuner_cost(table, numProto, STRAND_ALGO_RING, p);
      if (!runnable(*c)) continue;
      if (best == NULL || *c < *best) best = c;
    }
    if (best != NULL) *best = 0.0f;
  }
  const sk_tuner_band_t *band = sk_tuner_policy_band(&t->policy, nBytes);
  if (band == NULL) return STRAND_SUCCESS;
  if (band->channels > 0 && band->channels <= STRAND_TUNER_MAX_CHANNELS) *nChannels = band->channels;
  if (func == STRAND_FUNC_ALLREDUCE && band->proto >= 0 && band->proto < numProto) {
    /* Only ever lower a runnable entry of the algorithm NCCL chose: the choice stays one NCCL
     * offered, and an entry NCCL disabled (LL128 on some GPUs) is left alone. */
    float *c = strand_tuner_cost(table, numProto, algo, band->proto);
    if (runnable(*c)) *c = 0.0f;
  }
  return STRAND_SUCCESS;
}

static strand_result_t sk_tuner_finalize(void *ctx) {
  free(ctx);
  return STRAND_SUCCESS;
}

static const strand_tuner_t sk_tuner = {
    .name = SK_PLUGIN_NAME,
    .init = sk_tuner_init,
    .getCollInfo = sk_tuner_get_coll_info,
    .finalize = sk_tuner_finalize,
    .getChunkSize = NULL,
};

STRAND_TUNER_PLUGIN(sk_tuner);
