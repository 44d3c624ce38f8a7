/* Strand collnet_stub — a software CollNet on top of any Strand net table.
 *
 * NCCL's CollNet algorithms need a ncclCollNet_vN_t; real ones offload the reduction to a switch
 * (SHARP). This library implements the whole CollNet table on the hosts instead: `connect` builds
 * a full mesh of the net table's own point-to-point comms between the group's ranks, and the
 * collectives run over it with the SDK's CPU reductions (strand/reduce.h):
 *   iallreduce      reduce-scatter + all-gather, pipelined in chunks
 *   ireducescatter  the reduce-scatter half on NCCL's window
 *   iallgather      the all-gather half on NCCL's window
 * Every rank reduces its block in rank order 0..n-1, so results are bit-identical on all ranks.
 * docs/plugins/collnet.md says what it supports and its limits.
 *
 * A transport opts in with one line beside its STRAND_NET_PLUGIN:
 *
 *     #include "strand/collnet_stub.h"
 *     STRAND_NET_PLUGIN(my_net);
 *     STRAND_COLLNET_STUB_OPT_IN(my_net);
 *
 * and `collnet_stub_dep` in its meson dependencies. The meson option `collnet_stub` (default true)
 * decides whether the opt-in exports ncclCollNetPlugin_v6..v12 or nothing.
 *
 * A test or a fault-injecting wrapper binds the stub to a table at run time instead:
 * strand_collnet_stub_for(&table) returns the CollNet table driving `table`. One net table per
 * process (the stub keeps one binding; the first one wins). */
#ifndef STRAND_COLLNET_STUB_H
#define STRAND_COLLNET_STUB_H

#include "strand/plugin.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The stub's CollNet table. Its functions drive the bound net table (below). */
extern STRAND_INTERNAL_SYMBOL const strand_collnet_t strand_collnet_stub;

/* Bound at build time by STRAND_COLLNET_STUB(); weak, so NULL when only _for() binds. */
extern STRAND_INTERNAL_SYMBOL const strand_net_t *const strand_collnet_stub_net __attribute__((weak));

/* Binds the stub to `net` (once per process) and returns &strand_collnet_stub; NULL (with a
 * warning) for a NULL net, a net lacking listen/connect/accept/isend/irecv/test/close members, or
 * a second, different net. */
const strand_collnet_t *strand_collnet_stub_for(const strand_net_t *net);

#ifdef __cplusplus
}
#endif

/* Once, at file scope, after STRAND_NET_PLUGIN(net_table): export the stub as this plugin's
 * CollNet (ncclCollNetPlugin_v6..v12), driving net_table. */
#define STRAND_COLLNET_STUB(net_table)                                                             \
  STRAND_INTERNAL_SYMBOL const strand_net_t *const strand_collnet_stub_net = &(net_table);         \
  STRAND_COLLNET_PLUGIN(strand_collnet_stub)

/* The opt-in transports write: STRAND_COLLNET_STUB(net_table) when the build enables the stub
 * (collnet_stub_dep defines STRAND_COLLNET_STUB_ENABLED=1 or 0 from the meson option), else a
 * harmless declaration so that the line stays valid at file scope. */
#if defined(STRAND_COLLNET_STUB_ENABLED) && STRAND_COLLNET_STUB_ENABLED
#define STRAND_COLLNET_STUB_OPT_IN(net_table) STRAND_COLLNET_STUB(net_table)
#else
#define STRAND_COLLNET_STUB_OPT_IN(net_table) extern int strand_collnet_stub_not_built
#endif

#endif
