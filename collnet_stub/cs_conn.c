/* collnet_stub: connect (the group's full mesh of net comms) and closeColl.
 *
 * NCCL calls connect once per collComm with every rank's listen handle in rank order; it is a
 * blocking call (spec §8.2), so the mesh is built here, under a bound, by the SDK's mesh builder
 * (strand/mesh.h; gin_proxy uses the same one): rank r dials every peer's handle with the net's
 * connect and accepts nranks-1 comms on its own listener. */
#include <stdlib.h>
#include <string.h>

#include "cs.h"
#include "strand/mesh.h"
#include "strand/params.h"

cs_comm_t *cs_comm_of(void *collComm) {
  cs_comm_t *c = collComm;
  return c && c->magic == CS_COMM_MAGIC ? c : NULL;
}

static void cs_close_net_comm(const strand_net_t *n, void *comm, void *mh, bool is_send) {
  if (!comm) return;
  if (mh && n->deregMr) n->deregMr(comm, mh);
  if (is_send)
    n->closeSend(comm);
  else
    n->closeRecv(comm);
}

static void cs_comm_free(cs_comm_t *c) {
  const strand_net_t *n = c->net;
  cs_helpers_stop(c); /* before anything they may be touching is freed */
  cs_coll_drop_all(c);
  cs_mr_free_all(c); /* its net registrations live on the comms closed next */
  for (int j = 0; j < c->nranks * CS_LANES; j++) {
    if (c->send) cs_close_net_comm(n, c->send[j], c->send_mh ? c->send_mh[j] : NULL, true);
    if (c->recv) cs_close_net_comm(n, c->recv[j], c->recv_mh ? c->recv_mh[j] : NULL, false);
  }
  cs_coll_free_slots(c);
  free(c->arena);
  free(c->send);
  free(c->recv);
  free(c->send_mh);
  free(c->recv_mh);
  c->magic = 0;
  free(c);
}

static strand_result_t cs_register(cs_comm_t *c, void *comm, void **mh, const char *what, int peer) {
  *mh = NULL;
  if (!c->net->regMr) return STRAND_SUCCESS; /* a net that needs no registration */
  strand_result_t rc = c->net->regMr(comm, c->arena, c->arena_bytes, STRAND_PTR_HOST, mh);
  if (rc != STRAND_SUCCESS)
    STRAND_WARN("collnet_stub connect(rank %d/%d): the net's regMr of the %zu-byte staging arena on "
                "the %s comm %s rank %d returned %d", c->rank, c->nranks, c->arena_bytes, what,
                peer >= 0 ? "to" : "from", peer, (int)rc);
  return rc;
}

static size_t cs_block_bytes(int nranks) {
  int64_t kb = CS_CHUNK_TARGET >> 10;
  if (strand_param_get_int("STRAND_COLLNET_CHUNK_KB", &kb) != STRAND_SUCCESS) kb = CS_CHUNK_TARGET >> 10;
  size_t b = ((size_t)kb << 10) / (size_t)nranks;
  if (b < CS_BLOCK_MIN) b = CS_BLOCK_MIN;
  if (b > CS_BLOCK_MAX) b = CS_BLOCK_MAX;
  return b & ~(size_t)63;
}

/* Builds the mesh with the SDK's builder (strand/mesh.h: one comm per ordered pair), then
 * registers the staging arena on every comm of it. */
static strand_result_t cs_form_group(cs_comm_t *c, cs_listen_t *l, void *handles[]) {
  strand_mesh_spec_t spec = {.net = c->net, .net_ctx = l->ctx->net_ctx, .net_listen = l->net_listen,
                             .dev = l->dev, .nranks = c->nranks, .rank = c->rank, .k = CS_LANES,
                             .timeout_s = CS_CONNECT_TIMEOUT_S, .who = "collnet_stub connect"};
  strand_mesh_t m;
  strand_result_t rc = strand_mesh_form(&spec, handles, &m);
  if (rc != STRAND_SUCCESS) return rc;
  /* the comms now belong to c: cs_comm_free closes them */
  free(c->send);
  free(c->recv);
  c->send = m.send;
  c->recv = m.recv;
  for (int j = 0; j < c->nranks && rc == STRAND_SUCCESS; j++) {
    if (j == c->rank) continue;
    for (int i = j * CS_LANES; i < (j + 1) * CS_LANES && rc == STRAND_SUCCESS; i++) {
      rc = cs_register(c, c->send[i], &c->send_mh[i], "send", j);
      if (rc == STRAND_SUCCESS) rc = cs_register(c, c->recv[i], &c->recv_mh[i], "receive", j);
    }
  }
  return rc;
}

strand_result_t cs_connect(void *handles[], int nranks, int rank, void *listenComm, void **collComm) {
  if (!collComm) return STRAND_INVALID_ARGUMENT;
  *collComm = NULL;
  if (cs_require_live("connect") != STRAND_SUCCESS) return STRAND_INVALID_USAGE;
  cs_listen_t *l = listenComm;
  if (!handles || nranks < 1 || rank < 0 || rank >= nranks || !l || l->magic != CS_LISTEN_MAGIC) {
    STRAND_WARN("collnet_stub connect: invalid arguments (handles %p, nranks %d, rank %d, listenComm %p)",
                (void *)handles, nranks, rank, listenComm);
    return STRAND_INVALID_ARGUMENT;
  }
  for (int j = 0; j < nranks; j++)
    if (j != rank && !handles[j]) {
      STRAND_WARN("collnet_stub connect(rank %d/%d): handle of rank %d is NULL", rank, nranks, j);
      return STRAND_INVALID_ARGUMENT;
    }
  cs_comm_t *c = calloc(1, sizeof *c);
  if (!c) return STRAND_SYSTEM_ERROR;
  c->magic = CS_COMM_MAGIC;
  c->nranks = nranks;
  c->rank = rank;
  c->dev = l->dev;
  c->net = cs_net();
  c->block = cs_block_bytes(nranks);
  int64_t slots = CS_NSLOTS;
  if (strand_param_get_int("STRAND_COLLNET_SLOTS", &slots) != STRAND_SUCCESS) slots = CS_NSLOTS;
  c->nslots = (int)slots;
  c->stride = CS_HDR_BYTES + c->block;
  c->arena_bytes = (size_t)c->nslots * 2 * (size_t)nranks * c->stride;
  c->send = calloc((size_t)nranks * CS_LANES, sizeof(void *));
  c->recv = calloc((size_t)nranks * CS_LANES, sizeof(void *));
  c->send_mh = calloc((size_t)nranks * CS_LANES, sizeof(void *));
  c->recv_mh = calloc((size_t)nranks * CS_LANES, sizeof(void *));
  void *arena = NULL;
  strand_result_t rc = STRAND_SUCCESS;
  if (!c->send || !c->recv || !c->send_mh || !c->recv_mh ||
      posix_memalign(&arena, 4096, c->arena_bytes) != 0) {
    STRAND_WARN("collnet_stub connect(rank %d/%d): out of memory for a %zu-byte staging arena", rank,
                nranks, c->arena_bytes);
    rc = STRAND_SYSTEM_ERROR;
  }
  c->arena = arena;
  if (rc == STRAND_SUCCESS) {
    cs_coll_init_slots(c); /* zeroes the header areas only: the payload areas (most of the 64 MiB
                              of the defaults) stay untouched until a chunk uses them */
    for (int s = 0; s < c->nslots; s++)
      if (!c->slots[s].sreq) rc = STRAND_SYSTEM_ERROR;
  }
  if (rc == STRAND_SUCCESS && nranks > 1) rc = cs_form_group(c, l, handles);
  if (rc == STRAND_SUCCESS) rc = cs_helpers_start(c);
  if (rc != STRAND_SUCCESS) {
    cs_comm_free(c);
    return rc;
  }
  STRAND_INFO(STRAND_SUBSYS_INIT | STRAND_SUBSYS_NET,
              "collnet_stub: rank %d/%d connected over %s dev %d, %zu-byte blocks, %d chunk slots "
              "(STRAND_COLLNET_SLOTS), %d helper threads (STRAND_COLLNET_THREADS)",
              rank, nranks, c->net->name, c->dev, c->block, c->nslots, cs_helpers_count(c));
  *collComm = c;
  return STRAND_SUCCESS;
}

strand_result_t cs_close_coll(void *collComm) {
  cs_comm_t *c = cs_comm_of(collComm);
  if (!c) {
    STRAND_WARN("collnet_stub closeColl: %p is not a collComm of the stub", collComm);
    return STRAND_INVALID_ARGUMENT;
  }
  cs_coll_report_stats(c);
  cs_comm_free(c);
  return STRAND_SUCCESS;
}
