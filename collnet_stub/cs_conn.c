/* collnet_stub: connect (the group's full mesh of net comms) and closeColl.
 *
 * NCCL calls connect once per collComm with every rank's listen handle in rank order; it is a
 * blocking call (spec §8.2), so the mesh is built here, under a bound: rank r dials every peer's
 * handle with the net's connect and accepts nranks-1 comms on its own listener, driving both
 * non-blocking state machines together (a net may need the peer's accept before its connect
 * completes). Accepted comms arrive in any order, so each dialled comm first carries its rank. */
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cs.h"

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
  cs_coll_drop_all(c);
  for (int j = 0; j < c->nranks; j++) {
    if (c->send) cs_close_net_comm(n, c->send[j], c->send_mh ? c->send_mh[j] : NULL, true);
    if (c->recv) cs_close_net_comm(n, c->recv[j], c->recv_mh ? c->recv_mh[j] : NULL, false);
  }
  cs_coll_free_slots(c);
  cs_mr_free_all(c);
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

/* Polls one net request; clears *req once it completed. */
static strand_result_t cs_poll(const strand_net_t *n, void **req) {
  if (!*req) return STRAND_SUCCESS;
  int done = 0, size = 0;
  strand_result_t rc = n->test(*req, &done, &size);
  if (rc == STRAND_SUCCESS && done) *req = NULL;
  return rc;
}

static void cs_pause(void) {
  struct timespec ts = {0, 50000}; /* 50 us: the peers are starting too; do not spin a core */
  nanosleep(&ts, NULL);
}

static size_t cs_block_bytes(int nranks) {
  size_t b = CS_CHUNK_TARGET / (size_t)nranks;
  if (b < CS_BLOCK_MIN) b = CS_BLOCK_MIN;
  if (b > CS_BLOCK_MAX) b = CS_BLOCK_MAX;
  return b & ~(size_t)63;
}

/* Dials every peer and accepts every peer. On return the arena is registered on each comm;
 * accepted[] holds the accepted comms (peer unknown yet), in arrival order. */
static strand_result_t cs_dial_and_accept(cs_comm_t *c, cs_listen_t *l, void *handles[], void **accepted,
                                          void **accepted_mh, double deadline) {
  const strand_net_t *n = c->net;
  int nr = c->nranks, need = nr - 1, nsend = 0, nacc = 0;
  char (*hcopy)[STRAND_NET_HANDLE_MAXSIZE] = calloc((size_t)nr, STRAND_NET_HANDLE_MAXSIZE);
  if (!hcopy) return STRAND_SYSTEM_ERROR;
  /* Our copies: a net may keep its connect-in-progress state in the handle buffer. */
  for (int j = 0; j < nr; j++)
    if (j != c->rank) memcpy(hcopy[j], handles[j], STRAND_NET_HANDLE_MAXSIZE);
  strand_result_t rc = STRAND_SUCCESS;
  while (rc == STRAND_SUCCESS && (nsend < need || nacc < need)) {
    bool progress = false;
    for (int j = 0; j < nr && rc == STRAND_SUCCESS; j++) {
      if (j == c->rank || c->send[j]) continue;
      strand_dev_handle_t *devh = NULL;
      rc = n->connect(l->ctx->net_ctx, l->dev, hcopy[j], &c->send[j], &devh);
      if (rc != STRAND_SUCCESS) {
        STRAND_WARN("collnet_stub connect(rank %d/%d): the net's connect to rank %d returned %d; "
                    "check that rank %d is up and its address reachable", c->rank, nr, j, (int)rc, j);
      } else if (c->send[j]) {
        nsend++;
        progress = true;
        rc = cs_register(c, c->send[j], &c->send_mh[j], "send", j);
      }
    }
    if (rc == STRAND_SUCCESS && nacc < need) {
      strand_dev_handle_t *devh = NULL;
      rc = n->accept(l->net_listen, &accepted[nacc], &devh);
      if (rc != STRAND_SUCCESS) {
        STRAND_WARN("collnet_stub connect(rank %d/%d): the net's accept returned %d after %d of %d peers",
                    c->rank, nr, (int)rc, nacc, need);
      } else if (accepted[nacc]) {
        rc = cs_register(c, accepted[nacc], &accepted_mh[nacc], "accepted", -1);
        nacc++;
        progress = true;
      }
    }
    if (rc != STRAND_SUCCESS) break;
    if (cs_now() > deadline) {
      STRAND_WARN("collnet_stub connect(rank %d/%d): after %.0f s connected to %d and accepted %d of %d "
                  "peers; check that every rank of the group calls connect and that the handles are "
                  "the listen handles of this communicator, in rank order",
                  c->rank, nr, CS_CONNECT_TIMEOUT_S, nsend, nacc, need);
      rc = STRAND_REMOTE_ERROR;
    } else if (!progress) {
      cs_pause();
    }
  }
  free(hcopy);
  return rc;
}

/* Each dialled comm carries our rank as its first message; each accepted comm tells its peer's. */
static strand_result_t cs_learn_peers(cs_comm_t *c, void **accepted, void **accepted_mh, double deadline) {
  const strand_net_t *n = c->net;
  int nr = c->nranks, need = nr - 1;
  int32_t *ids = (int32_t *)(c->arena + c->arena_bytes - (size_t)(nr + 1) * sizeof(int32_t));
  ids[nr] = c->rank; /* what we send */
  void **sreq = calloc((size_t)nr, sizeof(void *)), **rreq = calloc((size_t)nr, sizeof(void *));
  bool *sposted = calloc((size_t)nr, sizeof(bool)), *rposted = calloc((size_t)nr, sizeof(bool));
  strand_result_t rc = sreq && rreq && sposted && rposted ? STRAND_SUCCESS : STRAND_SYSTEM_ERROR;
  for (;;) {
    bool all = true;
    for (int j = 0; j < nr && rc == STRAND_SUCCESS; j++) {
      if (j == c->rank) continue;
      if (!sposted[j]) {
        rc = n->isend(c->send[j], &ids[nr], sizeof(int32_t), 0, c->send_mh[j], NULL, &sreq[j]);
        sposted[j] = sreq[j] != NULL;
      }
      if (rc == STRAND_SUCCESS) rc = cs_poll(n, &sreq[j]);
      if (rc != STRAND_SUCCESS)
        STRAND_WARN("collnet_stub connect(rank %d/%d): sending our rank to rank %d failed (%d)", c->rank,
                    nr, j, (int)rc);
      if (!sposted[j] || sreq[j]) all = false;
    }
    for (int k = 0; k < need && rc == STRAND_SUCCESS; k++) {
      if (!rposted[k]) {
        void *buf = &ids[k];
        size_t sz = sizeof(int32_t);
        int tag = 0;
        ids[k] = -1;
        rc = n->irecv(accepted[k], 1, &buf, &sz, &tag, &accepted_mh[k], NULL, &rreq[k]);
        rposted[k] = rreq[k] != NULL;
      }
      if (rc == STRAND_SUCCESS) rc = cs_poll(n, &rreq[k]);
      if (rc != STRAND_SUCCESS)
        STRAND_WARN("collnet_stub connect(rank %d/%d): receiving the rank of accepted comm %d failed (%d)",
                    c->rank, nr, k, (int)rc);
      if (!rposted[k] || rreq[k]) all = false;
    }
    if (rc != STRAND_SUCCESS || all) break;
    if (cs_now() > deadline) {
      STRAND_WARN("collnet_stub connect(rank %d/%d): the rank exchange with the peers did not finish in "
                  "%.0f s; check that every rank of the group calls connect", c->rank, nr,
                  CS_CONNECT_TIMEOUT_S);
      rc = STRAND_REMOTE_ERROR;
      break;
    }
    cs_pause();
  }
  for (int k = 0; k < need && rc == STRAND_SUCCESS; k++) {
    int p = ids[k];
    if (p < 0 || p >= nr || p == c->rank || c->recv[p]) {
      STRAND_WARN("collnet_stub connect(rank %d/%d): an accepted comm says it comes from rank %d; check "
                  "that every rank passed the same handles in the same (rank) order", c->rank, nr, p);
      rc = STRAND_INTERNAL_ERROR;
      break;
    }
    c->recv[p] = accepted[k];
    c->recv_mh[p] = accepted_mh[k];
    accepted[k] = accepted_mh[k] = NULL;
  }
  /* Requests still posted on failure die with their comms in cs_comm_free. */
  free(sreq);
  free(rreq);
  free(sposted);
  free(rposted);
  return rc;
}

strand_result_t cs_connect(void *handles[], int nranks, int rank, void *listenComm, void **collComm) {
  if (!collComm) return STRAND_INVALID_ARGUMENT;
  *collComm = NULL;
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
  size_t ids = ((size_t)(nranks + 1) * sizeof(int32_t) + 63) & ~(size_t)63;
  c->arena_bytes = (size_t)CS_NSLOTS * 2 * (size_t)nranks * c->block + ids;
  c->send = calloc((size_t)nranks, sizeof(void *));
  c->recv = calloc((size_t)nranks, sizeof(void *));
  c->send_mh = calloc((size_t)nranks, sizeof(void *));
  c->recv_mh = calloc((size_t)nranks, sizeof(void *));
  void **accepted = calloc((size_t)nranks, sizeof(void *));
  void **accepted_mh = calloc((size_t)nranks, sizeof(void *));
  void *arena = NULL;
  strand_result_t rc = STRAND_SUCCESS;
  if (!c->send || !c->recv || !c->send_mh || !c->recv_mh || !accepted || !accepted_mh ||
      posix_memalign(&arena, 4096, c->arena_bytes) != 0) {
    STRAND_WARN("collnet_stub connect(rank %d/%d): out of memory for a %zu-byte staging arena", rank,
                nranks, c->arena_bytes);
    rc = STRAND_SYSTEM_ERROR;
  }
  c->arena = arena;
  if (rc == STRAND_SUCCESS) {
    memset(c->arena, 0, c->arena_bytes);
    cs_coll_init_slots(c);
    for (int s = 0; s < CS_NSLOTS; s++)
      if (!c->slots[s].sreq) rc = STRAND_SYSTEM_ERROR;
  }
  double deadline = cs_now() + CS_CONNECT_TIMEOUT_S;
  if (rc == STRAND_SUCCESS && nranks > 1) rc = cs_dial_and_accept(c, l, handles, accepted, accepted_mh, deadline);
  if (rc == STRAND_SUCCESS && nranks > 1) rc = cs_learn_peers(c, accepted, accepted_mh, deadline);
  for (int k = 0; accepted && k < nranks; k++)
    cs_close_net_comm(c->net, accepted[k], accepted_mh ? accepted_mh[k] : NULL, false);
  free(accepted);
  free(accepted_mh);
  if (rc != STRAND_SUCCESS) {
    cs_comm_free(c);
    return rc;
  }
  STRAND_INFO(STRAND_SUBSYS_INIT | STRAND_SUBSYS_NET,
              "collnet_stub: rank %d/%d connected over %s dev %d, %zu-byte blocks, %d chunk slots",
              rank, nranks, c->net->name, c->dev, c->block, CS_NSLOTS);
  *collComm = c;
  return STRAND_SUCCESS;
}

strand_result_t cs_close_coll(void *collComm) {
  cs_comm_t *c = cs_comm_of(collComm);
  if (!c) {
    STRAND_WARN("collnet_stub closeColl: %p is not a collComm of the stub", collComm);
    return STRAND_INVALID_ARGUMENT;
  }
  cs_comm_free(c);
  return STRAND_SUCCESS;
}
