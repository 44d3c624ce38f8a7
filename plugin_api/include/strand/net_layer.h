/* Strand SDK — what a library layered over a transport's net table needs from the SDK: binding to
 * that table, and the check that it has the members such a layer drives. collnet_stub (a CollNet
 * over the net) and gin_proxy (one-sided RMA over the net) are such layers.
 *
 * A layer is bound at build time (a weak pointer the transport's opt-in macro defines) or at run
 * time (strand_net_layer_bind, for tests and fault-injecting wrappers); the run-time binding wins
 * and is made once per process:
 *
 *   static strand_net_layer_t my_layer = STRAND_NET_LAYER_INIT("collnet_stub");
 *   net = strand_net_layer_net(&my_layer, &build_time_net ? build_time_net : NULL);
 *   rc  = strand_net_layer_bind(&my_layer, net);   // false + WARN: unusable or a second table */
#ifndef STRAND_NET_LAYER_H
#define STRAND_NET_LAYER_H

#include <stdbool.h>

#include "strand/plugin.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
  const char *who;            /* for WARNs: the layer's name */
  const strand_net_t *bound;  /* the run-time binding, atomically set once */
} strand_net_layer_t;

#define STRAND_NET_LAYER_INIT(name) {(name), NULL}

/* Whether `net` has what a layer drives: init, devices, getProperties, listen, connect, accept,
 * isend, irecv, test, closeSend, closeRecv, closeListen. */
bool strand_net_layer_usable(const strand_net_t *net);

/* Binds the layer to `net` once per process; false (with a WARN) for an unusable net or a second,
 * different one. Binding the same table again is fine. */
bool strand_net_layer_bind(strand_net_layer_t *layer, const strand_net_t *net);

/* The run-time binding if any, else `build_time` (may be NULL). */
const strand_net_t *strand_net_layer_net(strand_net_layer_t *layer, const strand_net_t *build_time);

/* The same, or NULL with a WARN naming `call` when no usable table is bound. */
const strand_net_t *strand_net_layer_need(strand_net_layer_t *layer, const strand_net_t *build_time,
                                          const char *call);

/* Monotonic seconds, for the layers' bounds (strand_now_ns of strand/clock.h, in seconds). */
double strand_now_s(void);

#ifdef __cplusplus
}
#endif

#endif
