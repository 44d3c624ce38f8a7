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
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sk.h"
#include "strand/log.h"
#include "strand/tuner.h"
#include "strand/tuner_bands.h"

typedef struct {
  bool active;
  sk_tuner_policy_t policy;
} sk_tuner_ctx_t;

/* "<=64K:2 <=2M:4 above:NCCL; all-gather 1..8K, 512K..4M: ring over PAT" for the INFO line. */
static void policy_format(const sk_tuner_policy_t *policy, char *buf, size_t len) {
  strand_tuner_bands_format(&policy->bands, buf, len);
  size_t used = strlen(buf);
  for (int i = 0; i < policy->nag_ring && used + 1 < len; i++) {
    char lo[32], hi[32];
    strand_tuner_size_format(policy->ag_ring[i].min, lo, sizeof lo);
    strand_tuner_size_format(policy->ag_ring[i].max, hi, sizeof hi);
    int n = snprintf(buf + used, len - used, "%s %s..%s", i == 0 ? "; all-gather" : ",", lo, hi);
    if (n < 0) return;
    used += (size_t)n;
  }
  if (policy->nag_ring > 0 && used + 1 < len)
    snprintf(buf + used, len - used, ": ring over PAT");
}

static bool ag_ring_wanted(const sk_tuner_policy_t *policy, size_t nbytes) {
  for (int i = 0; i < policy->nag_ring; i++)
    if (nbytes >= policy->ag_ring[i].min && nbytes <= policy->ag_ring[i].max) return true;
  return false;
}

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
  if (why == NULL && t->policy.bands.nbands == 0) why = "STRAND_SOCKET_TUNER_CHANNELS has no bands";
  t->active = why == NULL;

  char text[512];
  policy_format(&t->policy, text, sizeof text);
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
  int algo = strand_tuner_nccl_algo(table, numAlgo, numProto);
  if (func == STRAND_FUNC_ALLGATHER && algo == STRAND_ALGO_PAT && ag_ring_wanted(&t->policy, nBytes)) {
    /* Ring over PAT: lower ring's cheapest runnable entry to 0. Ring comes before PAT in NCCL's
     * table and NCCL takes the first strictly cheaper entry, so ring wins even against a PAT
     * entry of 0; with no runnable ring entry nothing changes and PAT stays. */
    (void)strand_tuner_prefer_algo(table, numAlgo, numProto, STRAND_ALGO_RING);
  }
  /* Channels from the bands, and an all-reduce's protocol, for the algorithm NCCL picked (the
   * SDK's rule: ring/tree/PAT only, runnable entries only). */
  strand_tuner_bands_apply(&t->policy.bands, func, nBytes, algo, table, numProto, nChannels);
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
