/* collnet_stub: connect (the group's full mesh of net comms) and closeColl.
 *
 * NCCL calls connect once per collComm with every rank's listen handle in rank order; it is a
 * blocking call (spec §8.2), so the mesh is built here, under a bound, by the SDK's mesh builder
 * (strand/mesh.h; gin_proxy uses the same one): rank r dials every peer's handle with the net's
 * connect and accepts nranks-1 comms on its own listener. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cs.h"
#include "strand/mesh.h"
#include "strand/net_layer.h"
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
  cs_progress_stop(c); /* first: it uses the net's comms and hands work to the helpers */
  cs_helpers_stop(c); /* before anything they may be touching is freed */
  cs_coll_drop_all(c);
  cs_mr_free_all(c); /* its net registrations live on the comms closed next */
  for (int j = 0; j < c->nranks * c->nlanes; j++) {
    if (c->send) cs_close_net_comm(n, c->send[j], c->send_mh ? c->send_mh[j] : NULL, true);
    if (c->recv) cs_close_net_comm(n, c->recv[j], c->recv_mh ? c->recv_mh[j] : NULL, false);
  }
  cs_coll_free_slots(c);
  free(c->arena);
  free(c->send);
  free(c->recv);
  free(c->send_mh);
  free(c->recv_mh);
  pthread_mutex_destroy(&c->lock);
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

/* The largest all-reduce call run as one exchange (cs_coll.c, "One exchange"): -1 (auto) = every
 * call at 2 ranks, where one exchange sends the same bytes as two, and calls of at most
 * CS_ONESHOT_AUTO_KB above, where it sends n/2 times as many but saves a round trip; 0 = none. */
static size_t cs_oneshot_max(int nranks) {
  int64_t kb = -1;
  if (strand_param_get_int("STRAND_COLLNET_ONESHOT_KB", &kb) != STRAND_SUCCESS) kb = -1;
  if (kb < 0) return nranks == 2 ? SIZE_MAX : (size_t)CS_ONESHOT_AUTO_KB << 10;
  return (size_t)kb << 10;
}

/* Forms one mesh of k comms per ordered pair (the SDK's builder, strand/mesh.h) and places them
 * at lanes [first, first + k) of every peer, registering the staging arena on each. */
static strand_result_t cs_form_lanes(cs_comm_t *c, cs_listen_t *l, void *handles[], int first, int k) {
  strand_mesh_spec_t spec = {.net = c->net, .net_ctx = l->ctx->net_ctx, .net_listen = l->net_listen,
                             .dev = l->dev, .nranks = c->nranks, .rank = c->rank, .k = k,
                             .timeout_s = CS_CONNECT_TIMEOUT_S, .who = "collnet_stub connect"};
  strand_mesh_t m;
  strand_result_t rc = strand_mesh_form(&spec, handles, &m);
  if (rc != STRAND_SUCCESS) return rc;
  /* the comms now belong to c: cs_comm_free closes them */
  for (int j = 0; j < c->nranks; j++)
    for (int i = 0; i < k; i++) {
      c->send[j * c->nlanes + first + i] = m.send[j * k + i];
      c->recv[j * c->nlanes + first + i] = m.recv[j * k + i];
    }
  free(m.send);
  free(m.recv);
  for (int j = 0; j < c->nranks && rc == STRAND_SUCCESS; j++) {
    if (j == c->rank) continue;
    for (int i = j * c->nlanes + first; i < j * c->nlanes + first + k && rc == STRAND_SUCCESS; i++) {
      rc = cs_register(c, c->send[i], &c->send_mh[i], "send", j);
      if (rc == STRAND_SUCCESS) rc = cs_register(c, c->recv[i], &c->recv_mh[i], "receive", j);
    }
  }
  return rc;
}

/* What every rank must agree on before the other comms are dialled: ranks with different stream
 * counts, or different one-exchange settings (which decide the lanes per stream), would dial
 * different numbers of comms, and the mesh builder would then wait out its timeout or refuse an
 * unknown comm index without naming the cause. */
#define CS_HELLO_MAGIC 0x4353484du
typedef struct {
  uint32_t magic, rank;
  uint32_t streams;
  uint64_t oneshot_max; /* bytes; UINT64_MAX = every size (which also gives the lanes per stream) */
} cs_hello_t;

static void cs_oneshot_words(size_t max, char *out, size_t outlen) {
  if (max == SIZE_MAX)
    snprintf(out, outlen, "any size");
  else
    snprintf(out, outlen, "%zu KiB", max >> 10);
}

/* One message each way on lane 0 of every peer, before any collective (lane 0's first turn, so
 * its order stays paired), through the first slot's header areas of the registered arena, by the
 * collectives' own posting and polling (cs_coll_hello). Bounded by CS_CONNECT_TIMEOUT_S. */
static strand_result_t cs_hello(cs_comm_t *c) {
  int nr = c->nranks;
  cs_slot_t *sl = &c->slots[0];
  cs_hello_t me = {.magic = CS_HELLO_MAGIC, .rank = (uint32_t)c->rank, .streams = (uint32_t)c->nstreams,
                   .oneshot_max = c->oneshot_max == SIZE_MAX ? UINT64_MAX : (uint64_t)c->oneshot_max};
  for (int j = 0; j < nr; j++) memcpy(sl->send + (size_t)j * c->stride, &me, sizeof me);
  bool timed_out;
  strand_result_t rc = cs_coll_hello(c, sizeof me, strand_now_s() + CS_CONNECT_TIMEOUT_S, &timed_out);
  if (timed_out)
    STRAND_WARN("collnet_stub connect(rank %d/%d): the layout check with the peers did not "
                "complete within %.0f s", c->rank, nr, CS_CONNECT_TIMEOUT_S);
  for (int j = 0; j < nr && rc == STRAND_SUCCESS; j++) {
    if (j == c->rank) continue;
    cs_hello_t peer;
    memcpy(&peer, sl->recv + (size_t)j * c->stride, sizeof peer);
    if (peer.magic != CS_HELLO_MAGIC || peer.rank != (uint32_t)j) {
      STRAND_WARN("collnet_stub connect(rank %d/%d): rank %d's first message is not the stub's "
                  "layout check (a peer of another build?)", c->rank, nr, j);
      rc = STRAND_REMOTE_ERROR;
    } else if (peer.streams != (uint32_t)c->nstreams) {
      STRAND_WARN("collnet_stub connect(rank %d/%d): rank %d runs %u streams, this rank %d "
                  "(STRAND_COLLNET_STREAMS must be the same on every rank); connect fails",
                  c->rank, nr, j, peer.streams, c->nstreams);
      rc = STRAND_INVALID_USAGE;
    } else if (peer.oneshot_max != me.oneshot_max) {
      char theirs[32], mine[32];
      cs_oneshot_words(peer.oneshot_max == UINT64_MAX ? SIZE_MAX : (size_t)peer.oneshot_max, theirs, sizeof theirs);
      cs_oneshot_words(c->oneshot_max, mine, sizeof mine);
      STRAND_WARN("collnet_stub connect(rank %d/%d): rank %d runs all-reduce calls up to %s as one exchange, "
                  "this rank up to %s (STRAND_COLLNET_ONESHOT_KB must be the same on every rank); connect "
                  "fails", c->rank, nr, j, theirs, mine);
      rc = STRAND_INVALID_USAGE;
    }
  }
  for (int j = 0; j < 2 * nr; j++) memset(c->arena + (size_t)j * c->stride, 0, CS_HDR_BYTES);
  return rc;
}

int cs_auto_streams(int nranks) {
  if (nranks < 2) return 1;
  int s = (CS_STREAM_COMMS + nranks - 2) / (nranks - 1); /* rounded up */
  return s < 1 ? 1 : s > CS_MAX_STREAMS ? CS_MAX_STREAMS : s;
}

/* Lane 0 of stream 0, the layout check over it, then every other lane. */
static strand_result_t cs_form_group(cs_comm_t *c, cs_listen_t *l, void *handles[]) {
  strand_result_t rc = cs_form_lanes(c, l, handles, 0, 1);
  if (rc == STRAND_SUCCESS) rc = cs_hello(c);
  if (rc == STRAND_SUCCESS && c->nlanes > 1) rc = cs_form_lanes(c, l, handles, 1, c->nlanes - 1);
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
  pthread_mutex_init(&c->lock, NULL); /* used only once a progress thread runs */
  c->nranks = nranks;
  c->rank = rank;
  c->dev = l->dev;
  c->net = cs_net();
  c->block = cs_block_bytes(nranks);
  int64_t slots = CS_NSLOTS;
  if (strand_param_get_int("STRAND_COLLNET_SLOTS", &slots) != STRAND_SUCCESS) slots = CS_NSLOTS;
  c->nslots = (int)slots;
  int64_t streams = -1;
  if (strand_param_get_int("STRAND_COLLNET_STREAMS", &streams) != STRAND_SUCCESS || streams < 1)
    streams = cs_auto_streams(nranks);
  if (streams > CS_MAX_STREAMS) streams = CS_MAX_STREAMS;
  c->nstreams = (int)streams;
  c->oneshot_max = cs_oneshot_max(nranks);
  c->lanes = c->oneshot_max == SIZE_MAX ? 1 : CS_LANES; /* no all-gather lane where none runs */
  c->nlanes = c->lanes * c->nstreams;
  c->stride = CS_HDR_BYTES + c->block;
  c->arena_bytes = (size_t)c->nslots * 2 * (size_t)nranks * c->stride;
  c->send = calloc((size_t)nranks * (size_t)c->nlanes, sizeof(void *));
  c->recv = calloc((size_t)nranks * (size_t)c->nlanes, sizeof(void *));
  c->send_mh = calloc((size_t)nranks * (size_t)c->nlanes, sizeof(void *));
  c->recv_mh = calloc((size_t)nranks * (size_t)c->nlanes, sizeof(void *));
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
  if (rc == STRAND_SUCCESS) rc = cs_progress_start(c); /* last: the mesh and helpers are ready */
  if (rc != STRAND_SUCCESS) {
    cs_comm_free(c);
    return rc;
  }
  char oneshot[32];
  cs_oneshot_words(c->oneshot_max, oneshot, sizeof oneshot);
  STRAND_INFO(STRAND_SUBSYS_INIT | STRAND_SUBSYS_NET,
              "collnet_stub: rank %d/%d connected over %s dev %d, %zu-byte blocks, %d chunk slots "
              "(STRAND_COLLNET_SLOTS), %d helper threads (STRAND_COLLNET_THREADS), %d streams of %d comm%s "
              "per peer and direction (STRAND_COLLNET_STREAMS), progress on %s (STRAND_COLLNET_PROGRESS), "
              "one exchange for all-reduce calls up to %s (STRAND_COLLNET_ONESHOT_KB)",
              rank, nranks, c->net->name, c->dev, c->block, c->nslots, cs_helpers_count(c), c->nstreams,
              c->lanes, c->lanes == 1 ? "" : "s", c->prog_on ? "its own thread" : "NCCL's proxy thread", oneshot);
  *collComm = c;
  return STRAND_SUCCESS;
}

strand_result_t cs_close_coll(void *collComm) {
  cs_comm_t *c = cs_comm_of(collComm);
  if (!c) {
    STRAND_WARN("collnet_stub closeColl: %p is not a collComm of the stub", collComm);
    return STRAND_INVALID_ARGUMENT;
  }
  cs_progress_stop(c); /* the stats are final once it stopped */
  cs_coll_report_stats(c);
  cs_comm_free(c);
  return STRAND_SUCCESS;
}
