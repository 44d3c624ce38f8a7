/* Strand SDK — the full mesh of a net table's point-to-point comms between the ranks of a group.
 *
 * Libraries that build a group abstraction on top of any net table (collnet_stub's CollNet,
 * gin_proxy's one-sided RMA) need the same thing from their blocking, collective `connect`: every
 * rank dials every peer's listen handle and accepts the peers' dials on its own listener, k comms
 * per ordered pair. Accepted comms arrive in any order, so each dialled comm first carries
 * (rank, index) on the wire. Every non-blocking step of every peer is advanced in one loop, so a
 * receiver-driven net (a connect that needs the peer's accept running, a send that needs the
 * peer's receive) cannot deadlock on the order in which the ranks reach each step. Bounded: after
 * timeout_s a WARN names the ranks that are missing.
 *
 *   strand_mesh_spec_t s = {.net = n, .net_ctx = ctx, .net_listen = l, .dev = d, .nranks = N,
 *                           .rank = r, .k = 2, .timeout_s = 60, .who = "gin_proxy connect"};
 *   strand_mesh_t m;
 *   rc = strand_mesh_form(&s, handles, &m);      // m.send[j*k+i], m.recv[j*k+i]; NULL at j == r
 *   ...
 *   strand_mesh_close(&m);                         // closes every comm (deregister yours first)
 */
#ifndef STRAND_MESH_H
#define STRAND_MESH_H

#include "strand/plugin.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
  const strand_net_t *net;
  void *net_ctx;    /* the net context the dialled comms belong to */
  void *net_listen; /* our listen comm (in net_ctx): the peers dial its handle */
  int dev, nranks, rank;
  int k;            /* comms per ordered pair, >= 1 */
  double timeout_s; /* bound on the whole formation */
  const char *who;  /* names the caller in WARNs, e.g. "collnet_stub connect" */
} strand_mesh_spec_t;

typedef struct {
  const strand_net_t *net;
  int nranks, rank, k;
  void **send; /* send[j*k+i]: comm i to rank j (we dialled it); NULL for j == rank */
  void **recv; /* recv[j*k+i]: comm i from rank j (we accepted it); NULL for j == rank */
} strand_mesh_t;

/* Blocking and collective: every rank of the group calls it with every rank's listen handle in
 * rank order (handles[rank] is not read). On success *mesh holds nranks*k send and recv comms;
 * on failure it holds nothing (all comms closed) and a WARN says which step and peer failed.
 * STRAND_REMOTE_ERROR after timeout_s. */
strand_result_t strand_mesh_form(const strand_mesh_spec_t *spec, void *const handles[], strand_mesh_t *mesh);

/* Closes every comm still in the mesh and frees its arrays; a zeroed mesh is a no-op. */
void strand_mesh_close(strand_mesh_t *mesh);

#ifdef __cplusplus
}
#endif

#endif
