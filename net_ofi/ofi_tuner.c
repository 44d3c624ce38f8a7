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
 * It answers only nChannels (and a band's protocol), only for ring/tree/PAT (NCCL caps the answer at what the comm opened;
 * CollNet/NVLS take it as given), only for a communicator spanning nodes, only when this library's
 * net side was initialised in the process, and never over an answer already made. Everything else
 * stays NCCL's choice. Calls ofi_config.c (the parsed parameters) only. */
#include <ctype.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "ofi.h"
#include "strand/tuner.h"

#define OFI_TUNER_MAX_BANDS 8

typedef struct {
  size_t max_bytes; /* this band covers sizes up to and including this */
  int channels;     /* 0: NCCL's count */
  int proto;        /* STRAND_PROTO_* made cheapest for an all-reduce; STRAND_PROTO_UNDEF: NCCL's */
} ofi_band_t;

typedef struct {
  bool active;
  int nbands;
  ofi_band_t bands[OFI_TUNER_MAX_BANDS];
} ofi_tuner_ctx_t;

/* "SIZE:N[:PROTO][,...]", SIZE with an optional K/M/G suffix (binary), strictly increasing, N in
 * 0..STRAND_TUNER_MAX_CHANNELS, PROTO one of ll, ll128, simple. Returns false (and says why) on
 * anything else. */
static bool parse_bands(const char *text, ofi_tuner_ctx_t *t) {
  const char *p = text, *band = text;
  t->nbands = 0;
  while (*p) {
    band = p;
    char *end;
    unsigned long long v = strtoull(p, &end, 10);
    if (end == p) goto bad;
    int shift = 0;
    switch (toupper((unsigned char)*end)) {
    case 'K': shift = 10, end++; break;
    case 'M': shift = 20, end++; break;
    case 'G': shift = 30, end++; break;
    default: break;
    }
    if (*end != ':') goto bad;
    p = end + 1;
    long ch = strtol(p, &end, 10);
    if (end == p || ch < 0 || ch > STRAND_TUNER_MAX_CHANNELS) goto bad;
    int proto = STRAND_PROTO_UNDEF;
    if (*end == ':') {
      static const struct { const char *name; int proto; } protos[] = {
          {"ll128", STRAND_PROTO_LL128}, {"ll", STRAND_PROTO_LL}, {"simple", STRAND_PROTO_SIMPLE}};
      for (size_t k = 0; k < sizeof protos / sizeof protos[0] && proto == STRAND_PROTO_UNDEF; k++) {
        size_t len = strlen(protos[k].name);
        if (strncasecmp(end + 1, protos[k].name, len) == 0 &&
            (end[1 + len] == ',' || end[1 + len] == '\0')) {
          proto = protos[k].proto;
          end += 1 + len;
        }
      }
      if (proto == STRAND_PROTO_UNDEF) goto bad;
    }
    size_t max = (size_t)v << shift;
    if (t->nbands == OFI_TUNER_MAX_BANDS || (t->nbands && max <= t->bands[t->nbands - 1].max_bytes))
      goto bad;
    t->bands[t->nbands++] = (ofi_band_t){.max_bytes = max, .channels = (int)ch, .proto = proto};
    p = end;
    if (*p == ',') p++;
    else if (*p) goto bad;
  }
  return true;
bad:
  STRAND_WARN("STRAND_OFI_TUNER_CHANNELS=\"%s\" not understood at \"%s\": expected "
              "SIZE:N[:ll|ll128|simple][,...] with increasing sizes (K/M/G suffixes) and N in 0..%d, at most %d bands; the tuner "
              "leaves NCCL's channel counts unchanged",
              text, band, STRAND_TUNER_MAX_CHANNELS, OFI_TUNER_MAX_BANDS);
  t->nbands = 0;
  return false;
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
  if (ofi_ndevs() <= 0) why = "strand-ofi's network is not in use in this process";
  else if (nNodes <= 1) why = "single-node communicator: no traffic crosses strand-ofi";
  else if (ofi_params.tuner_channels[0] == '\0') why = "STRAND_OFI_TUNER_CHANNELS is not set";
  else if (!parse_bands(ofi_params.tuner_channels, t) || t->nbands == 0)
    why = "STRAND_OFI_TUNER_CHANNELS has no usable bands";
  t->active = why == NULL;
  if (t->active)
    STRAND_INFO(STRAND_SUBSYS_INIT | STRAND_SUBSYS_TUNING,
                "tuner (ncclTunerPlugin_v%d): comm %llx, %zu ranks on %zu nodes: channels by size "
                "%s (ring/tree/PAT)",
                strand_core_tuner_abi_version(), (unsigned long long)commId, nRanks, nNodes,
                ofi_params.tuner_channels);
  else
    STRAND_INFO(STRAND_SUBSYS_INIT | STRAND_SUBSYS_TUNING,
                "tuner (ncclTunerPlugin_v%d): comm %llx, %zu ranks on %zu nodes: leaves NCCL's "
                "choices unchanged (%s)",
                strand_core_tuner_abi_version(), (unsigned long long)commId, nRanks, nNodes, why);
  *ctx = t;
  return STRAND_SUCCESS;
}

/* The algorithm NCCL will run: its cheapest entry that is neither ignored nor negative. */
static int nccl_pick(float **table, int numAlgo, int numProto) {
  int best = STRAND_ALGO_UNDEF;
  float best_cost = 0;
  for (int a = 0; a < numAlgo; a++)
    for (int p = 0; p < numProto; p++) {
      float c = *strand_tuner_cost(table, numProto, a, p);
      if (c == STRAND_ALGO_PROTO_IGNORE || c < 0) continue;
      if (best == STRAND_ALGO_UNDEF || c < best_cost) best = a, best_cost = c;
    }
  return best;
}

static strand_result_t ofi_tuner_get_coll_info(void *ctx, strand_tuner_func_t func, size_t nBytes,
                                               int numPipeOps, float **table, int numAlgo,
                                               int numProto, int regBuff, int *nChannels) {
  (void)numPipeOps, (void)regBuff;
  const ofi_tuner_ctx_t *t = ctx;
  if (t == NULL || !t->active || nChannels == NULL || table == NULL || *nChannels != 0)
    return STRAND_SUCCESS;
  int algo = nccl_pick(table, numAlgo, numProto);
  if (algo != STRAND_ALGO_RING && algo != STRAND_ALGO_TREE && algo != STRAND_ALGO_PAT)
    return STRAND_SUCCESS;
  for (int b = 0; b < t->nbands; b++)
    if (nBytes <= t->bands[b].max_bytes) {
      if (t->bands[b].channels > 0) *nChannels = t->bands[b].channels;
      /* A protocol only for all-reduce, and only by lowering a runnable entry of the algorithm
       * NCCL chose: the choice stays one NCCL offered (an LL128 it disabled stays disabled). */
      int proto = t->bands[b].proto;
      if (func == STRAND_FUNC_ALLREDUCE && proto != STRAND_PROTO_UNDEF && proto < numProto) {
        float *c = strand_tuner_cost(table, numProto, algo, proto);
        if (*c != STRAND_ALGO_PROTO_IGNORE && *c >= 0) *c = 0.0f;
      }
      break;
    }
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
