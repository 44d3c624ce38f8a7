/* Strand SDK — what a plugin author writes against.
 *
 * A plugin implements ONE net table with v12 semantics (strand_net_t) and, optionally, one CollNet
 * table (strand_collnet_t), then names them with STRAND_NET_PLUGIN / STRAND_COLLNET_PLUGIN in one
 * of its source files. Linking libstrand-sdk then gives the shared object the data symbols
 * ncclNetPlugin_v6 .. ncclNetPlugin_v12 (and ncclCollNetPlugin_v6 .. _v12), each adapting the
 * plugin's table to what that version's core expects (docs/plugin-author-guide.md). */
#ifndef STRAND_PLUGIN_H
#define STRAND_PLUGIN_H

#include "strand/abi/abi.h"

typedef strand_net_v12_t strand_net_t;
typedef strand_collnet_v12_t strand_collnet_t;
typedef strand_props_v12_t strand_props_t;
typedef strand_vprops_v12_t strand_vprops_t;
typedef strand_sge_v12_t strand_sge_t;
/* The one GIN/RMA table a plugin implements: RMA v14 semantics (strand/abi/rma.h). */
typedef strand_rma_v14_t strand_rma_t;
typedef strand_rma_config_v14_t strand_rma_config_t;

#ifdef __cplusplus
extern "C" {
#endif

/* Hidden: these link the plugin to the SDK inside one .so and must never be exported, even by a
 * plugin linked without the SDK's version script. */
#define STRAND_INTERNAL_SYMBOL __attribute__((visibility("hidden")))

/* Set by STRAND_NET_PLUGIN / STRAND_COLLNET_PLUGIN; read by the export layer. */
extern STRAND_INTERNAL_SYMBOL const strand_net_t *const strand_plugin_net;
extern STRAND_INTERNAL_SYMBOL const strand_collnet_t *const strand_plugin_collnet;
extern STRAND_INTERNAL_SYMBOL const strand_rma_t *const strand_plugin_rma;

/* The anchors pull the export objects out of libstrand-sdk.a: a plugin without a CollNet table
 * never references strand_collnet_export_anchor, so it exports no ncclCollNetPlugin_v* symbol. */
extern STRAND_INTERNAL_SYMBOL const int strand_net_export_anchor;
extern STRAND_INTERNAL_SYMBOL const int strand_collnet_export_anchor;
extern STRAND_INTERNAL_SYMBOL const int strand_rma_export_anchor;

/* What the export layer learnt about the core that loaded us; useful for logging and sizing.
 * strand_core_abi_version(): the ncclNetPlugin_vN table the core picked (6..12), learnt from the
 *   init it called; 0 before any init.
 * strand_core_collnet_abi_version(): the same for ncclCollNetPlugin_vN; 0 before CollNet init.
 * strand_core_max_requests(): requests per comm the core may have in flight and the plugin must
 *   accept: 8 for a v6 core (NCCL_NET_MAX_REQUESTS_V6), 32 otherwise (also before init, since
 *   sizing for the larger bound is always safe).
 * All three are safe to call from any thread, including from inside the plugin's own init. */
int strand_core_abi_version(void);
int strand_core_collnet_abi_version(void);
int strand_core_max_requests(void);
/* strand_core_rma_abi_version(): how the core reached the plugin's RMA table: 11 or 12 for
 * ncclGinPlugin_v11/_v12 (NCCL 2.28/2.29, GIN in proxy mode), 13 or 14 for ncclRmaPlugin_v13/_v14
 * (NCCL 2.30+); 0 before any init. */
int strand_core_rma_abi_version(void);

/* Fills *props with the defaults of a host-memory device `dev`, so that getProperties only sets
 * what is specific to its device. Every field is written (the core does not zero the struct):
 *   name NULL, pciPath NULL, guid dev, ptrSupport HOST, regIsGlobal 0, forceFlush 0, speed 0,
 *   port 0, latency 0, maxComms 65536, maxRecvs 1, netDeviceType HOST,
 *   netDeviceVersion STRAND_NET_DEVICE_INVALID_VERSION, vProps {1 device: dev},
 *   maxP2pBytes STRAND_MAX_NET_SIZE_V8 (1 GiB, what every core accepts),
 *   maxCollBytes STRAND_MAX_COLLNET_SIZE_V8, maxMultiRequestSize 1, railId and planeId
 *   STRAND_NET_ID_UNDEF (the core derives them).
 * A plugin then sets at least name and speed, and whatever its transport supports beyond these. */
void strand_props_init_host(strand_props_t *props, int dev);

#ifdef __cplusplus
}
#endif

/* Use once, at file scope, in one source file of the plugin: STRAND_NET_PLUGIN(my_net_table); */
#define STRAND_NET_PLUGIN(table)                                                                   \
  STRAND_INTERNAL_SYMBOL const strand_net_t *const strand_plugin_net = &(table);                   \
  STRAND_INTERNAL_SYMBOL __attribute__((used)) const int *const strand_net_export_ref =            \
      &strand_net_export_anchor

/* Optional, once, at file scope: STRAND_COLLNET_PLUGIN(my_collnet_table); */
#define STRAND_COLLNET_PLUGIN(table)                                                               \
  STRAND_INTERNAL_SYMBOL const strand_collnet_t *const strand_plugin_collnet = &(table);           \
  STRAND_INTERNAL_SYMBOL __attribute__((used)) const int *const strand_collnet_export_ref =        \
      &strand_collnet_export_anchor

/* Optional, once, at file scope: STRAND_RMA_PLUGIN(my_rma_table); exports the one-sided table as
 * ncclRmaPlugin_v14/_v13 (NCCL 2.30+) and ncclGinPlugin_v12/_v11 (NCCL 2.29/2.28, GIN proxy mode);
 * docs/plugin-author-guide.md. The table's getProperties must report netDeviceType GIN_PROXY. */
#define STRAND_RMA_PLUGIN(table)                                                                   \
  STRAND_INTERNAL_SYMBOL const strand_rma_t *const strand_plugin_rma = &(table);                   \
  STRAND_INTERNAL_SYMBOL __attribute__((used)) const int *const strand_rma_export_ref =            \
      &strand_rma_export_anchor

#endif
