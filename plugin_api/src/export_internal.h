/* Strand SDK — internals shared by the export layer (export_common.c, export_net.c,
 * export_collnet.c, export_tuner.c, export_rma.c, export_gin.c). Not installed: plugins only see
 * strand/plugin.h and strand/tuner.h.
 *
 * The unit tests include this header too: the *_fill_tables() and *_reset_for_test() hooks let
 * them swap members of the mock plugin table and start from a fresh "just loaded" state. */
#ifndef STRAND_EXPORT_INTERNAL_H
#define STRAND_EXPORT_INTERNAL_H

#include <stddef.h>
#include <stdint.h>
#include "strand/plugin.h"
#include "strand/tuner.h"

/* Largest `n` an irecv may carry (NCCL_PROXY_MAX_SUBS): bounds the on-stack size_t arrays that
 * v6..v8 irecv adapters build from the core's int arrays. */
#define STRAND_EXPORT_MAX_RECV_N STRAND_PROXY_MAX_SUBS
/* Largest number of scatter-gather entries a v8 CollNet core may hand to iallgather or
 * ireducescatter through our adapter (cores send 1; the bound only sizes a stack array). */
#define STRAND_EXPORT_MAX_SGE 64
/* Distinct trafficClass values for which a v10 adapter keeps its own plugin context. */
#define STRAND_EXPORT_MAX_TC_CTX 16

/* ---- the exported tables: the only symbols a plugin .so exports (plugin.map) ---- */
#define STRAND_EXPORT_SYMBOL __attribute__((visibility("default")))
/* Defined in export_net.c, filled from the plugin's table on first use. */
extern STRAND_EXPORT_SYMBOL strand_net_v6_t ncclNetPlugin_v6;
extern STRAND_EXPORT_SYMBOL strand_net_v7_t ncclNetPlugin_v7;
extern STRAND_EXPORT_SYMBOL strand_net_v8_t ncclNetPlugin_v8;
extern STRAND_EXPORT_SYMBOL strand_net_v9_t ncclNetPlugin_v9;
extern STRAND_EXPORT_SYMBOL strand_net_v10_t ncclNetPlugin_v10;
extern STRAND_EXPORT_SYMBOL strand_net_v11_t ncclNetPlugin_v11;
extern STRAND_EXPORT_SYMBOL strand_net_v12_t ncclNetPlugin_v12;
/* Defined in export_collnet.c, linked in only when the plugin has a CollNet table. */
extern STRAND_EXPORT_SYMBOL strand_collnet_v6_t ncclCollNetPlugin_v6;
extern STRAND_EXPORT_SYMBOL strand_collnet_v7_t ncclCollNetPlugin_v7;
extern STRAND_EXPORT_SYMBOL strand_collnet_v8_t ncclCollNetPlugin_v8;
extern STRAND_EXPORT_SYMBOL strand_collnet_v9_t ncclCollNetPlugin_v9;
extern STRAND_EXPORT_SYMBOL strand_collnet_v10_t ncclCollNetPlugin_v10;
extern STRAND_EXPORT_SYMBOL strand_collnet_v11_t ncclCollNetPlugin_v11;
extern STRAND_EXPORT_SYMBOL strand_collnet_v12_t ncclCollNetPlugin_v12;
/* Defined in export_tuner.c, linked in only when the plugin has a tuner (STRAND_TUNER_PLUGIN). */
extern STRAND_EXPORT_SYMBOL strand_tuner_v2_t ncclTunerPlugin_v2;
extern STRAND_EXPORT_SYMBOL strand_tuner_v3_t ncclTunerPlugin_v3;
extern STRAND_EXPORT_SYMBOL strand_tuner_v4_t ncclTunerPlugin_v4;
extern STRAND_EXPORT_SYMBOL strand_tuner_v5_t ncclTunerPlugin_v5;
extern STRAND_EXPORT_SYMBOL strand_tuner_v6_t ncclTunerPlugin_v6;
/* Defined in export_rma.c / export_gin.c, linked in only with STRAND_RMA_PLUGIN. */
extern STRAND_EXPORT_SYMBOL strand_rma_v13_t ncclRmaPlugin_v13;
extern STRAND_EXPORT_SYMBOL strand_rma_v14_t ncclRmaPlugin_v14;
extern STRAND_EXPORT_SYMBOL strand_gin_v11_t ncclGinPlugin_v11;
extern STRAND_EXPORT_SYMBOL strand_gin_v12_t ncclGinPlugin_v12;

/* ---- logging: the export layer's own WARN/INFO, through the logger the core gave to init ---- */
void strand_export_set_logger(strand_logger_t logger);
void strand_export_log(strand_log_level_t level, int line, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
#define STRAND_EXPORT_WARN(...) strand_export_log(STRAND_LOG_WARN, __LINE__, __VA_ARGS__)
#define STRAND_EXPORT_INFO(...) strand_export_log(STRAND_LOG_INFO, __LINE__, __VA_ARGS__)

/* ---- which table the core picked (learnt from the init it called) ---- */
void strand_export_note_net_version(int version);
void strand_export_note_collnet_version(int version);
void strand_export_note_rma_version(int version);

/* ---- what export_gin.c borrows from export_rma.c ---- */
/* init of any one-sided version: logger bridge, version note, the plugin's init. */
strand_result_t strand_export_rma_init(int version, void **ctx, uint64_t commId,
                                       strand_logger_t logger);
/* regMrSym / regMrSymDmaBuf of v11..v13 cores: the plugin's, with the ginHandle = the mhandle. */
strand_result_t strand_export_rma_regmr(void *collComm, void *data, size_t size, int type,
                                        uint64_t mrFlags, void **mhandle, void **ginHandle);
strand_result_t strand_export_rma_regmr_dmabuf(void *collComm, void *data, size_t size, int type,
                                               uint64_t offset, int fd, uint64_t mrFlags,
                                               void **mhandle, void **ginHandle);

/* ---- argument narrowing / widening ---- */
/* An int size/count from a v6..v8 core as size_t; negative → STRAND_INTERNAL_ERROR + WARN. */
strand_result_t strand_export_int_to_size(int value, const char *call, const char *what,
                                          size_t *out);
/* irecv's int sizes[n] → size_t out[n]; n must be in 1..STRAND_EXPORT_MAX_RECV_N. */
strand_result_t strand_export_int_sizes(int n, const int *sizes, const char *call, size_t *out);

/* ---- properties: v12 (what the plugin fills) → every older layout, every field written ---- */
void strand_props_v12_to_v6(const strand_props_v12_t *in, strand_props_v6_t *out);
void strand_props_v12_to_v7(const strand_props_v12_t *in, strand_props_v7_t *out);
void strand_props_v12_to_v8(const strand_props_v12_t *in, strand_props_v8_t *out);
/* v9..v11 carry a 4-entry vProps: a v12 vNIC with more than 4 members cannot be represented and
 * is reported as STRAND_INTERNAL_ERROR (with a WARN naming `call` and the device). */
strand_result_t strand_props_v12_to_v9(const strand_props_v12_t *in, strand_props_v9_t *out,
                                       const char *call, int dev);
strand_result_t strand_props_v12_to_v11(const strand_props_v12_t *in, strand_props_v11_t *out,
                                        const char *call, int dev);
/* getProperties for an older core: ask the plugin (net or CollNet table) for the v12 struct, zeroed
 * first so that a field the plugin forgets is 0 in every layout rather than stack garbage, then
 * write the core's layout with the converters above. */
typedef strand_result_t (*strand_export_getprops_fn)(int dev, strand_props_v12_t *props);
strand_result_t strand_export_props_v6(strand_export_getprops_fn get, int dev, strand_props_v6_t *out);
strand_result_t strand_export_props_v7(strand_export_getprops_fn get, int dev, strand_props_v7_t *out);
strand_result_t strand_export_props_v8(strand_export_getprops_fn get, int dev, strand_props_v8_t *out);
strand_result_t strand_export_props_v9(strand_export_getprops_fn get, int dev, strand_props_v9_t *out,
                                       const char *call);
strand_result_t strand_export_props_v11(strand_export_getprops_fn get, int dev,
                                        strand_props_v11_t *out, const char *call);

/* A v9..v11 vNIC request (≤ 4 members) as the v12 struct the plugin takes. */
strand_result_t strand_vprops_v11_to_v12(const strand_vprops_v11_t *in, strand_vprops_v12_t *out,
                                         const char *call);

/* ---- hooks for the export objects and their unit tests ---- */
void strand_export_net_fill_tables(void);     /* re-derive ncclNetPlugin_v* from strand_plugin_net */
void strand_export_net_reset_for_test(void);  /* forget contexts and the noted version */
void strand_export_collnet_fill_tables(void);
void strand_export_collnet_reset_for_test(void);
void strand_export_tuner_fill_tables(void);
void strand_export_rma_fill_tables(void);     /* ncclRmaPlugin_v13/_v14 from strand_plugin_rma */
void strand_export_gin_fill_tables(void);     /* ncclGinPlugin_v11/_v12 from strand_plugin_rma */
void strand_export_rma_reset_for_test(void);  /* forget the noted version */
void strand_export_tuner_reset_for_test(void);  /* forget the noted version and the once-WARNs */
/* The v4..v6 getCollInfo: the plugin's, with ignored cost entries restored and nChannels kept in
 * 0..STRAND_TUNER_MAX_CHANNELS afterwards (a WARN once per kind of mistake). */
strand_result_t strand_export_tuner_guarded_collinfo(void *ctx, strand_tuner_func_t func,
                                                     size_t nBytes, int numPipeOps, float **table,
                                                     int numAlgo, int numProto, int regBuff,
                                                     int *nChannels);

#endif
