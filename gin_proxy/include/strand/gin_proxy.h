/* Strand gin_proxy — one-sided RMA (NCCL's GIN proxy / RMA plugin) on top of any Strand net table.
 *
 * NCCL's device API reaches other nodes through GIN; in proxy mode a CPU thread of NCCL turns the
 * kernels' requests into host calls of an RMA table (ncclRma_v14_t, strand_rma_t): put, put with
 * a remote signal, get, flush into symmetric windows. This library implements that table with
 * nothing but the net table's own two-sided calls: connect builds a mesh of the net's comms, and
 * each one-sided operation travels as messages that the target's progress applies to its window
 * (docs/plugins/gin.md). Host memory only for now.
 *
 * A transport opts in with one line beside its STRAND_NET_PLUGIN:
 *
 *     #include "strand/gin_proxy.h"
 *     STRAND_NET_PLUGIN(my_net);
 *     STRAND_GIN_PROXY_OPT_IN(my_net);
 *
 * and `gin_proxy_dep` in its meson dependencies. The meson option `gin_proxy` (default true)
 * decides whether the opt-in exports the RMA/GIN symbols (STRAND_RMA_PLUGIN) or nothing.
 *
 * Tests bind it at run time instead: strand_gin_proxy_for(&table) returns the RMA table driving
 * `table`. One net table per process (the first binding wins). */
#ifndef STRAND_GIN_PROXY_H
#define STRAND_GIN_PROXY_H

#include "strand/plugin.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The RMA table. Its functions drive the bound net table. */
extern STRAND_INTERNAL_SYMBOL const strand_rma_t strand_gin_proxy;

/* Bound at build time by STRAND_GIN_PROXY(); weak, so NULL when only _for() binds. */
extern STRAND_INTERNAL_SYMBOL const strand_net_t *const strand_gin_proxy_net __attribute__((weak));

/* Binds gin_proxy to `net` (once per process) and returns &strand_gin_proxy; NULL (with a WARN)
 * for a NULL net, a net lacking a member it needs, or a second, different net. */
const strand_rma_t *strand_gin_proxy_for(const strand_net_t *net);

#ifdef __cplusplus
}
#endif

/* Once, at file scope, after STRAND_NET_PLUGIN(net_table): export gin_proxy as this plugin's RMA
 * (ncclRmaPlugin_v14/_v13, ncclGinPlugin_v12/_v11), driving net_table. */
#define STRAND_GIN_PROXY(net_table)                                                                \
  STRAND_INTERNAL_SYMBOL const strand_net_t *const strand_gin_proxy_net = &(net_table);            \
  STRAND_RMA_PLUGIN(strand_gin_proxy)

/* gin_proxy_dep defines STRAND_GIN_PROXY_ENABLED=1 or 0 from the meson option `gin_proxy`. */
#if defined(STRAND_GIN_PROXY_ENABLED) && STRAND_GIN_PROXY_ENABLED
#define STRAND_GIN_PROXY_OPT_IN(net_table) STRAND_GIN_PROXY(net_table)
#else
#define STRAND_GIN_PROXY_OPT_IN(net_table) extern int strand_gin_proxy_not_built
#endif

#endif
