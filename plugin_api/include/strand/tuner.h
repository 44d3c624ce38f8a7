/* Strand SDK — an optional NCCL tuner beside the net plugin.
 *
 * NCCL (2.21+) looks for a tuner in the NET plugin's own library when it finds no tuner library
 * (NCCL_TUNER_PLUGIN unset or not loadable, no libnccl-tuner.so),
 * so a transport that knows which channel counts suit it can say so without a second library. A
 * plugin implements ONE tuner table with the newest (v7) semantics and names it, once, at file
 * scope:
 *
 *   STRAND_TUNER_PLUGIN(my_tuner);
 *
 * The SDK then exports ncclTunerPlugin_v2 .. ncclTunerPlugin_v7, each adapting the table to what
 * that version's core expects (spec §11.6). A plugin that does not write STRAND_TUNER_PLUGIN exports
 * no tuner symbol at all, and NCCL keeps its own tuning.
 *
 * The contract the plugin's functions follow (v7 semantics, whatever core loaded us):
 *  - init(&ctx, commId, nRanks, nNodes, logger, nvlDomainInfo, constants): once per communicator.
 *    commId is 0, and nvlDomainInfo / constants are NULL, under cores older than v5 (2.28).
 *    `constants` is the v7 block (5 compute-capability rows per bandwidth table). Under a v5/v6
 *    core (2.28-2.30) the SDK passes a copy: rows 0..3 of each table and the latencies are the
 *    core's, row 4 is 0 (that core has no such platform), and what init leaves in rows 0..3 and
 *    the latencies is copied back to the core (row 4 is dropped), as NCCL converts v7 <-> v5.
 *    A failing init makes NCCL fail the communicator: return STRAND_SUCCESS with a context that
 *    changes nothing rather than fail on a condition you merely do not handle.
 *  - getCollInfo(ctx, func, nBytes, numPipeOps, table, numAlgo, numProto, regBuff, &nChannels):
 *    `table` is float[numAlgo][numProto] (use strand_tuner_cost()); each entry is the core's cost
 *    estimate in µs, or STRAND_ALGO_PROTO_IGNORE for a combination the core cannot run. The core
 *    runs the cheapest entry that is >= 0, so a tuner picks one by lowering it (e.g. to 0) and
 *    drops one by raising it; it must never write an IGNORE entry. *nChannels arrives as 0 (keep
 *    NCCL's count); a tuner may set 1..STRAND_TUNER_MAX_CHANNELS. NCCL caps it at the channels the
 *    communicator has for ring/tree/PAT, but uses it as given for CollNet, so stay at or below
 *    what the comm opened. Leaving everything untouched is always correct. A non-success return
 *    makes NCCL fail the launch (2.28 does not fall back): return STRAND_SUCCESS when unsure.
 *    Under a v2 core (2.21) the adapter passes a table whose entries are all IGNORE (that core
 *    computes costs only after asking), so only nChannels can be answered there.
 *  - finalize(ctx): once per context.
 *  - getChunkSize: optional (NULL = NCCL's chunk size); only v6 and v7 cores call it.
 *
 * The export layer guards every call: an IGNORE entry the plugin overwrote is restored and an
 * nChannels outside 0..STRAND_TUNER_MAX_CHANNELS is reset to 0, each with a WARN (once per kind),
 * so that a buggy tuner degrades to NCCL's own choice instead of a crash in the core. */
#ifndef STRAND_TUNER_H
#define STRAND_TUNER_H

#include "strand/abi/tuner.h"
#include "strand/plugin.h"

typedef strand_tuner_v7_t strand_tuner_t;
typedef strand_tuner_constants_v7_t strand_tuner_constants_t;
typedef strand_nvl_domain_info_v7_t strand_nvl_domain_info_t;

#ifdef __cplusplus
extern "C" {
#endif

/* Set by STRAND_TUNER_PLUGIN; read by the export layer (export_tuner.c). */
extern STRAND_INTERNAL_SYMBOL const strand_tuner_t *const strand_plugin_tuner;
/* Pulls export_tuner.o out of libstrand-sdk.a only for plugins that have a tuner. */
extern STRAND_INTERNAL_SYMBOL const int strand_tuner_export_anchor;

/* The ncclTunerPlugin_vN the core loaded (2..7), learnt from the init it called; 0 before. */
int strand_core_tuner_abi_version(void);

#ifdef __cplusplus
}
#endif

/* The cost entry of algorithm `algo` and protocol `proto` in the table getCollInfo receives. The
 * core passes a float[numAlgo][numProto] array cast to float**: it is indexed as one flat array. */
static inline float *strand_tuner_cost(float **table, int numProto, int algo, int proto) {
  return (float *)(void *)table + (size_t)algo * (size_t)numProto + (size_t)proto;
}

/* Use once, at file scope, in one source file of the plugin: STRAND_TUNER_PLUGIN(my_tuner); */
#define STRAND_TUNER_PLUGIN(table)                                                                 \
  STRAND_INTERNAL_SYMBOL const strand_tuner_t *const strand_plugin_tuner = &(table);               \
  STRAND_INTERNAL_SYMBOL __attribute__((used)) const int *const strand_tuner_export_ref =          \
      &strand_tuner_export_anchor

#endif
