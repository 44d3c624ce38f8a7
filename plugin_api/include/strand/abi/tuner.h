/* Strand — NCCL plugin ABI: the tuner tables ncclTuner_v2_t .. ncclTuner_v7_t (spec §11),
 * exported as ncclTunerPlugin_v2 .. ncclTunerPlugin_v7.
 *
 * NCCL looks the tuner up in the NET plugin's own library when it finds no tuner library, newest
 * symbol first (2.28: v5, v4, v3, v2; 2.30: v6 first; cores after 2.30.7: v7 first). v7 is in
 * NCCL's repository after the v2.30.7 tag (src/include/plugin/tuner/tuner_v7.h, commit 2449986). The values, sizes and offsets below are
 * NCCL's; the static asserts pin them. */
#ifndef STRAND_ABI_TUNER_H
#define STRAND_ABI_TUNER_H

#include <stddef.h>
#include <stdint.h>
#include "strand/abi/types.h"

/* Algorithm and protocol indices are the STRAND_ALGO_* / STRAND_PROTO_* of types.h: they are the
 * row and column of the cost table. The table a v3+ core hands over is float[numAlgo][numProto]
 * laid out row by row; numAlgo is 7 from NCCL 2.23 on (6 in 2.22, before PAT), numProto is 3. */
#define STRAND_ALGO_UNDEF (-1)
#define STRAND_PROTO_UNDEF (-1)
#define STRAND_TUNER_NUM_ALGORITHMS 7
#define STRAND_TUNER_NUM_PROTOCOLS 3
/* A cost entry the core will not consider (unsupported or disabled algorithm/protocol). */
#define STRAND_ALGO_PROTO_IGNORE (-1.0f)
/* Channels per communicator in NCCL (MAXCHANNELS): the upper bound of any nChannels answer. */
#define STRAND_TUNER_MAX_CHANNELS 64

/* Dimensions of the v5/v6 constants block. */
#define STRAND_TUNER_NUM_HW_LINKS 3     /* NVLINK 0, PCI 1, NET 2 */
#define STRAND_TUNER_NUM_COMPCAPS 4     /* v5/v6: Volta 0, Ampere 1, Hopper 2, Blackwell 3 */
#define STRAND_TUNER_NUM_COMPCAPS_V7 5  /* v7: the same four, plus row 4 for a newer platform */
#define STRAND_TUNER_NUM_TUNING_SCALES 3 /* 1 node 0, 2 nodes 1, 4 nodes 2 */
enum { STRAND_HW_NVLINK = 0, STRAND_HW_PCI = 1, STRAND_HW_NET = 2 };

/* ncclNvlDomainInfo_v5_t (v6 reuses it): what NCCL knows about the NVLink domains of the comm. */
typedef struct {
  int nNvlDomains;
  int minRanksPerNvlDomain;
  int maxRanksPerNvlDomain;
} strand_nvl_domain_info_v5_t;
STRAND_STATIC_ASSERT(sizeof(strand_nvl_domain_info_v5_t) == 12, "ncclNvlDomainInfo_v5_t size");
STRAND_STATIC_ASSERT(offsetof(strand_nvl_domain_info_v5_t, maxRanksPerNvlDomain) == 8, "");
typedef strand_nvl_domain_info_v5_t strand_nvl_domain_info_v6_t;

/* ncclTunerConstants_v5_t (v6 reuses it): the core's latency/bandwidth model inputs, filled by the
 * core before tuner init, which may change them (in/out). */
typedef struct {
  double baseLatencies[STRAND_TUNER_NUM_ALGORITHMS][STRAND_TUNER_NUM_PROTOCOLS];
  double hwLatencies[STRAND_TUNER_NUM_HW_LINKS][STRAND_TUNER_NUM_ALGORITHMS]
                    [STRAND_TUNER_NUM_PROTOCOLS];
  double llMaxBws[STRAND_TUNER_NUM_COMPCAPS][STRAND_TUNER_NUM_TUNING_SCALES];
  double perChMaxRingLL128Bws[STRAND_TUNER_NUM_COMPCAPS][STRAND_TUNER_NUM_TUNING_SCALES];
  double perChMaxTreeLL128Bws[STRAND_TUNER_NUM_COMPCAPS][STRAND_TUNER_NUM_TUNING_SCALES];
  double perChMaxTreeBws[STRAND_TUNER_NUM_COMPCAPS][STRAND_TUNER_NUM_TUNING_SCALES];
  double perChMaxNVLSTreeBws[STRAND_TUNER_NUM_COMPCAPS][STRAND_TUNER_NUM_TUNING_SCALES];
} strand_tuner_constants_v5_t;
STRAND_STATIC_ASSERT(sizeof(strand_tuner_constants_v5_t) == 1152, "ncclTunerConstants_v5_t size");
STRAND_STATIC_ASSERT(offsetof(strand_tuner_constants_v5_t, hwLatencies) == 168, "");
STRAND_STATIC_ASSERT(offsetof(strand_tuner_constants_v5_t, llMaxBws) == 672, "");
STRAND_STATIC_ASSERT(offsetof(strand_tuner_constants_v5_t, perChMaxRingLL128Bws) == 768, "");
STRAND_STATIC_ASSERT(offsetof(strand_tuner_constants_v5_t, perChMaxTreeLL128Bws) == 864, "");
STRAND_STATIC_ASSERT(offsetof(strand_tuner_constants_v5_t, perChMaxTreeBws) == 960, "");
STRAND_STATIC_ASSERT(offsetof(strand_tuner_constants_v5_t, perChMaxNVLSTreeBws) == 1056, "");
typedef strand_tuner_constants_v5_t strand_tuner_constants_v6_t;

/* ncclTunerConstants_v7_t: v5's block with every per-compute-capability table one row longer
 * (STRAND_TUNER_NUM_COMPCAPS_V7); the latencies are unchanged. NCCL converts between the two by
 * copying rows 0..3 of each table. */
typedef struct {
  double baseLatencies[STRAND_TUNER_NUM_ALGORITHMS][STRAND_TUNER_NUM_PROTOCOLS];
  double hwLatencies[STRAND_TUNER_NUM_HW_LINKS][STRAND_TUNER_NUM_ALGORITHMS]
                    [STRAND_TUNER_NUM_PROTOCOLS];
  double llMaxBws[STRAND_TUNER_NUM_COMPCAPS_V7][STRAND_TUNER_NUM_TUNING_SCALES];
  double perChMaxRingLL128Bws[STRAND_TUNER_NUM_COMPCAPS_V7][STRAND_TUNER_NUM_TUNING_SCALES];
  double perChMaxTreeLL128Bws[STRAND_TUNER_NUM_COMPCAPS_V7][STRAND_TUNER_NUM_TUNING_SCALES];
  double perChMaxTreeBws[STRAND_TUNER_NUM_COMPCAPS_V7][STRAND_TUNER_NUM_TUNING_SCALES];
  double perChMaxNVLSTreeBws[STRAND_TUNER_NUM_COMPCAPS_V7][STRAND_TUNER_NUM_TUNING_SCALES];
} strand_tuner_constants_v7_t;
STRAND_STATIC_ASSERT(sizeof(strand_tuner_constants_v7_t) == 1272, "ncclTunerConstants_v7_t size");
STRAND_STATIC_ASSERT(offsetof(strand_tuner_constants_v7_t, hwLatencies) == 168, "");
STRAND_STATIC_ASSERT(offsetof(strand_tuner_constants_v7_t, llMaxBws) == 672, "");
STRAND_STATIC_ASSERT(offsetof(strand_tuner_constants_v7_t, perChMaxRingLL128Bws) == 792, "");
STRAND_STATIC_ASSERT(offsetof(strand_tuner_constants_v7_t, perChMaxTreeLL128Bws) == 912, "");
STRAND_STATIC_ASSERT(offsetof(strand_tuner_constants_v7_t, perChMaxTreeBws) == 1032, "");
STRAND_STATIC_ASSERT(offsetof(strand_tuner_constants_v7_t, perChMaxNVLSTreeBws) == 1152, "");
/* v7 reuses v5's NVLink domain info. */
typedef strand_nvl_domain_info_v5_t strand_nvl_domain_info_v7_t;

/* ncclFunc_t as the tuner receives it (a 4-byte enum passed by value): STRAND_FUNC_* of types.h.
 * Only the five collectives 0..4 (broadcast, reduce, allgather, reducescatter, allreduce) reach
 * getCollInfo. */
typedef int strand_tuner_func_t;

/* ncclTuner_v2_t (NCCL 2.21 semantics): 4 slots. The tuner answers algorithm/protocol
 * directly; the core had computed no costs yet. */
typedef struct {
  const char *name;
  strand_result_t (*init)(size_t nRanks, size_t nNodes, strand_logger_t logFunction, void **context);
  strand_result_t (*getCollInfo)(void *context, strand_tuner_func_t collType, size_t nBytes,
                                 int collNetSupport, int nvlsSupport, int numPipeOps,
                                 int *algorithm, int *protocol, int *nChannels);
  strand_result_t (*destroy)(void *context);
} strand_tuner_v2_t;

/* ncclTuner_v3_t (2.22-2.23): 4 slots. getCollInfo gets the core's cost table (in/out). */
typedef struct {
  const char *name;
  strand_result_t (*init)(size_t nRanks, size_t nNodes, strand_logger_t logFunction, void **context);
  strand_result_t (*getCollInfo)(void *context, strand_tuner_func_t collType, size_t nBytes,
                                 int numPipeOps, float **collCostTable, int numAlgo, int numProto,
                                 int *nChannels);
  strand_result_t (*destroy)(void *context);
} strand_tuner_v3_t;

/* ncclTuner_v4_t (2.24-2.27): v3 plus regBuff (the user buffers can be registered). */
typedef struct {
  const char *name;
  strand_result_t (*init)(size_t nRanks, size_t nNodes, strand_logger_t logFunction, void **context);
  strand_result_t (*getCollInfo)(void *context, strand_tuner_func_t collType, size_t nBytes,
                                 int numPipeOps, float **collCostTable, int numAlgo, int numProto,
                                 int regBuff, int *nChannels);
  strand_result_t (*destroy)(void *context);
} strand_tuner_v4_t;

/* ncclTuner_v5_t (2.28-2.29): init takes the context first, a comm id, the NVLink domain info and
 * the in/out constants; the last slot is called finalize. */
typedef struct {
  const char *name;
  strand_result_t (*init)(void **context, uint64_t commId, size_t nRanks, size_t nNodes,
                          strand_logger_t logFunction, strand_nvl_domain_info_v5_t *nvlDomainInfo,
                          strand_tuner_constants_v5_t *constants);
  strand_result_t (*getCollInfo)(void *context, strand_tuner_func_t collType, size_t nBytes,
                                 int numPipeOps, float **collCostTable, int numAlgo, int numProto,
                                 int regBuff, int *nChannels);
  strand_result_t (*finalize)(void *context);
} strand_tuner_v5_t;

/* ncclTuner_v6_t (2.30): v5 plus an optional getChunkSize (NULL = keep NCCL's chunk size). */
typedef struct {
  const char *name;
  strand_result_t (*init)(void **context, uint64_t commId, size_t nRanks, size_t nNodes,
                          strand_logger_t logFunction, strand_nvl_domain_info_v6_t *nvlDomainInfo,
                          strand_tuner_constants_v6_t *constants);
  strand_result_t (*getCollInfo)(void *context, strand_tuner_func_t collType, size_t nBytes,
                                 int numPipeOps, float **collCostTable, int numAlgo, int numProto,
                                 int regBuff, int *nChannels);
  strand_result_t (*finalize)(void *context);
  strand_result_t (*getChunkSize)(void *context, strand_tuner_func_t collType, size_t nBytes,
                                  int algo, int proto, int nChannels, size_t *chunkSize);
} strand_tuner_v6_t;

/* ncclTuner_v7_t: v6's slots and signatures, with the v7 constants block. */
typedef struct {
  const char *name;
  strand_result_t (*init)(void **context, uint64_t commId, size_t nRanks, size_t nNodes,
                          strand_logger_t logFunction, strand_nvl_domain_info_v7_t *nvlDomainInfo,
                          strand_tuner_constants_v7_t *constants);
  strand_result_t (*getCollInfo)(void *context, strand_tuner_func_t collType, size_t nBytes,
                                 int numPipeOps, float **collCostTable, int numAlgo, int numProto,
                                 int regBuff, int *nChannels);
  strand_result_t (*finalize)(void *context);
  strand_result_t (*getChunkSize)(void *context, strand_tuner_func_t collType, size_t nBytes,
                                  int algo, int proto, int nChannels, size_t *chunkSize);
} strand_tuner_v7_t;

STRAND_STATIC_ASSERT(sizeof(strand_tuner_v2_t) == 32, "ncclTuner_v2_t size");
STRAND_STATIC_ASSERT(sizeof(strand_tuner_v3_t) == 32, "ncclTuner_v3_t size");
STRAND_STATIC_ASSERT(sizeof(strand_tuner_v4_t) == 32, "ncclTuner_v4_t size");
STRAND_STATIC_ASSERT(sizeof(strand_tuner_v5_t) == 32, "ncclTuner_v5_t size");
STRAND_STATIC_ASSERT(sizeof(strand_tuner_v6_t) == 40, "ncclTuner_v6_t size");
STRAND_STATIC_ASSERT(offsetof(strand_tuner_v2_t, init) == 8, "");
STRAND_STATIC_ASSERT(offsetof(strand_tuner_v2_t, getCollInfo) == 16, "");
STRAND_STATIC_ASSERT(offsetof(strand_tuner_v2_t, destroy) == 24, "");
STRAND_STATIC_ASSERT(offsetof(strand_tuner_v3_t, getCollInfo) == 16, "");
STRAND_STATIC_ASSERT(offsetof(strand_tuner_v3_t, destroy) == 24, "");
STRAND_STATIC_ASSERT(offsetof(strand_tuner_v4_t, getCollInfo) == 16, "");
STRAND_STATIC_ASSERT(offsetof(strand_tuner_v4_t, destroy) == 24, "");
STRAND_STATIC_ASSERT(offsetof(strand_tuner_v5_t, init) == 8, "");
STRAND_STATIC_ASSERT(offsetof(strand_tuner_v5_t, getCollInfo) == 16, "");
STRAND_STATIC_ASSERT(offsetof(strand_tuner_v5_t, finalize) == 24, "");
STRAND_STATIC_ASSERT(offsetof(strand_tuner_v6_t, finalize) == 24, "");
STRAND_STATIC_ASSERT(offsetof(strand_tuner_v6_t, getChunkSize) == 32, "");
STRAND_STATIC_ASSERT(sizeof(strand_tuner_v7_t) == 40, "ncclTuner_v7_t size");
STRAND_STATIC_ASSERT(offsetof(strand_tuner_v7_t, init) == 8, "");
STRAND_STATIC_ASSERT(offsetof(strand_tuner_v7_t, getCollInfo) == 16, "");
STRAND_STATIC_ASSERT(offsetof(strand_tuner_v7_t, finalize) == 24, "");
STRAND_STATIC_ASSERT(offsetof(strand_tuner_v7_t, getChunkSize) == 32, "");

#endif
