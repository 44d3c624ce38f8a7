/* Strand SDK — binding a layer (collnet_stub, gin_proxy) to a transport's net table
 * (strand/net_layer.h). */

#include "strand/clock.h"
#include "strand/log.h"
#include "strand/net_layer.h"

bool strand_net_layer_usable(const strand_net_t *n) {
  return n && n->init && n->devices && n->getProperties && n->listen && n->connect && n->accept &&
         n->isend && n->irecv && n->test && n->closeSend && n->closeRecv && n->closeListen;
}

bool strand_net_layer_bind(strand_net_layer_t *layer, const strand_net_t *net) {
  if (!strand_net_layer_usable(net)) {
    STRAND_WARN("%s: net table %s lacks a member it needs (init, devices, getProperties, listen, "
                "connect, accept, isend, irecv, test, close*)", layer->who,
                net && net->name ? net->name : "(null)");
    return false;
  }
  const strand_net_t *expected = NULL;
  if (!__atomic_compare_exchange_n(&layer->bound, &expected, net, false, __ATOMIC_ACQ_REL,
                                   __ATOMIC_ACQUIRE) &&
      expected != net) {
    STRAND_WARN("%s: already bound to net %s; one net table per process", layer->who, expected->name);
    return false;
  }
  return true;
}

const strand_net_t *strand_net_layer_net(strand_net_layer_t *layer, const strand_net_t *build_time) {
  const strand_net_t *n = __atomic_load_n(&layer->bound, __ATOMIC_ACQUIRE);
  return n ? n : build_time;
}

const strand_net_t *strand_net_layer_need(strand_net_layer_t *layer, const strand_net_t *build_time,
                                          const char *call) {
  const strand_net_t *n = strand_net_layer_net(layer, build_time);
  if (!strand_net_layer_usable(n)) {
    STRAND_WARN("%s %s: no usable net table bound (the transport's opt-in macro or the layer's "
                "_for(&table) must name one)", layer->who, call);
    return NULL;
  }
  return n;
}

double strand_now_s(void) { return (double)strand_now_ns() * 1e-9; }
