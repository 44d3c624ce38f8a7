/* collnet_stub: connect (the group's full mesh of net comms) and closeColl.
 *
 * NCCL calls connect once per collComm with every rank's listen handle in rank order; it is a
 * blocking call (spec §8.2), so the mesh is built here, under a bound: rank r dials every peer's
 * handle with the net's connect and accepts nranks-1 comms on its own listener. Accepted comms
 * arrive in any order, so each dialled comm first carries its rank. Every one of those
 * non-blocking steps, for every peer, is advanced in one loop (cs_form_group): a net may need the
 * peer's accept before its connect completes, or the peer's receive before a send does. */
#include <sched.h>
#include <stdio.h>
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

/* Group formation state: one entry per step of every peer, advanced together by cs_form_group. */
typedef struct {
  char (*hcopy)[STRAND_NET_HANDLE_MAXSIZE]; /* our copies: a net may keep connect state in a handle */
  void **accepted, **accepted_mh;           /* accepted comms in arrival order (peer unknown yet) */
  void **sreq, **rreq;                      /* rank announcement: isend per peer, irecv per accepted */
  bool *sdone, *rdone;
  int32_t *ids; /* ids[k]: rank heard on accepted comm k; ids[nranks]: our rank, what we send */
  int nacc;
} cs_form_t;

/* Appends " r" to a list of ranks for a timeout message, staying inside the buffer. */
static void cs_list_add(char *buf, size_t cap, int r) {
  size_t len = strlen(buf);
  if (len + 12 < cap) snprintf(buf + len, cap - len, " %d", r);
}

/* Names every step still pending, so a timeout says which peer to look at. */
static void cs_form_timeout(cs_comm_t *c, cs_form_t *f) {
  char dial[256] = "", ann[256] = "", heard[256] = "";
  for (int j = 0; j < c->nranks; j++) {
    if (j == c->rank) continue;
    if (!c->send[j])
      cs_list_add(dial, sizeof dial, j);
    else if (!f->sdone[j])
      cs_list_add(ann, sizeof ann, j);
  }
  int pending_recv = 0;
  for (int k = 0; k < f->nacc; k++) {
    if (f->rdone[k])
      cs_list_add(heard, sizeof heard, f->ids[k]);
    else
      pending_recv++;
  }
  STRAND_WARN("collnet_stub connect(rank %d/%d): group not formed after %.0f s. connect to rank(s)%s "
              "not done; our rank announcement to rank(s)%s not delivered; accepted %d of %d peers, "
              "%d accepted comm(s) still silent, heard from rank(s)%s. Check that every rank of the "
              "group calls connect with the listen handles of this communicator, in rank order",
              c->rank, c->nranks, CS_CONNECT_TIMEOUT_S, dial[0] ? dial : " (none)",
              ann[0] ? ann : " (none)", f->nacc, c->nranks - 1, pending_recv,
              heard[0] ? heard : " (none)");
}

/* One pass over every pending step; never waits on any single one. *progress tells whether any
 * step moved, *done whether the whole group is formed. */
static strand_result_t cs_form_pass(cs_comm_t *c, cs_listen_t *l, cs_form_t *f, bool *progress, bool *done) {
  const strand_net_t *n = c->net;
  int nr = c->nranks, need = nr - 1;
  bool all = true;
  for (int j = 0; j < nr; j++) {
    if (j == c->rank) continue;
    if (!c->send[j]) { /* connect again with the same handle until it yields a comm */
      strand_dev_handle_t *devh = NULL;
      strand_result_t rc = n->connect(l->ctx->net_ctx, l->dev, f->hcopy[j], &c->send[j], &devh);
      if (rc != STRAND_SUCCESS) {
        STRAND_WARN("collnet_stub connect(rank %d/%d): the net's connect to rank %d returned %d; "
                    "check that rank %d is up and its address reachable", c->rank, nr, j, (int)rc, j);
        return rc;
      }
      if (!c->send[j]) {
        all = false;
        continue;
      }
      *progress = true;
      if ((rc = cs_register(c, c->send[j], &c->send_mh[j], "send", j)) != STRAND_SUCCESS) return rc;
    }
    if (f->sdone[j]) continue;
    strand_result_t rc = STRAND_SUCCESS;
    const char *step = "isend";
    if (!f->sreq[j]) { /* NULL request: the net cannot take it yet (e.g. no clear-to-send) */
      rc = n->isend(c->send[j], &f->ids[nr], sizeof(int32_t), 0, c->send_mh[j], NULL, &f->sreq[j]);
      if (f->sreq[j]) *progress = true;
    }
    if (rc == STRAND_SUCCESS && f->sreq[j]) {
      int fin = 0, size = 0;
      step = "test of the isend";
      rc = n->test(f->sreq[j], &fin, &size);
      if (rc == STRAND_SUCCESS && fin) {
        f->sreq[j] = NULL;
        f->sdone[j] = true;
        *progress = true;
      }
    }
    if (rc != STRAND_SUCCESS) {
      STRAND_WARN("collnet_stub connect(rank %d/%d): sending our rank to rank %d failed: the net's %s "
                  "returned %d", c->rank, nr, j, step, (int)rc);
      return rc;
    }
    if (!f->sdone[j]) all = false;
  }
  if (f->nacc < need) {
    strand_dev_handle_t *devh = NULL;
    void **slot = &f->accepted[f->nacc];
    strand_result_t rc = n->accept(l->net_listen, slot, &devh);
    if (rc != STRAND_SUCCESS) {
      STRAND_WARN("collnet_stub connect(rank %d/%d): the net's accept returned %d after %d of %d peers",
                  c->rank, nr, (int)rc, f->nacc, need);
      return rc;
    }
    if (*slot) {
      *progress = true;
      rc = cs_register(c, *slot, &f->accepted_mh[f->nacc], "accepted", -1);
      f->nacc++;
      if (rc != STRAND_SUCCESS) return rc;
    }
    if (f->nacc < need) all = false;
  }
  for (int k = 0; k < f->nacc; k++) {
    if (f->rdone[k]) continue;
    strand_result_t rc = STRAND_SUCCESS;
    const char *step = "irecv";
    if (!f->rreq[k]) {
      void *buf = &f->ids[k];
      size_t sz = sizeof(int32_t);
      int tag = 0;
      f->ids[k] = -1;
      rc = n->irecv(f->accepted[k], 1, &buf, &sz, &tag, &f->accepted_mh[k], NULL, &f->rreq[k]);
      if (f->rreq[k]) *progress = true;
    }
    if (rc == STRAND_SUCCESS && f->rreq[k]) {
      int fin = 0, size = 0;
      step = "test of the irecv";
      rc = n->test(f->rreq[k], &fin, &size);
      if (rc == STRAND_SUCCESS && fin) {
        f->rreq[k] = NULL;
        f->rdone[k] = true;
        *progress = true;
      }
    }
    if (rc != STRAND_SUCCESS) {
      STRAND_WARN("collnet_stub connect(rank %d/%d): receiving the rank of accepted comm %d (peer not "
                  "known yet) failed: the net's %s returned %d", c->rank, nr, k, step, (int)rc);
      return rc;
    }
    if (!f->rdone[k]) all = false;
  }
  *done = all;
  return STRAND_SUCCESS;
}

/* Forms the group in ONE progress loop: every outgoing connect, every accept, every rank
 * announcement (isend + test) and a posted receive on every accepted comm advance together each
 * pass. A receiver-driven net (a send completes only once the peer posted its receive, a connect
 * may need the peer's accept running at the same time, spec §8.2) then cannot deadlock on the
 * order in which the ranks reach each step. Accepted comms land in c->recv by announced rank. */
static strand_result_t cs_form_group(cs_comm_t *c, cs_listen_t *l, void *handles[], void **accepted,
                                     void **accepted_mh, double deadline) {
  int nr = c->nranks;
  cs_form_t f = {0};
  f.accepted = accepted;
  f.accepted_mh = accepted_mh;
  f.ids = (int32_t *)(c->arena + c->arena_bytes - (size_t)(nr + 1) * sizeof(int32_t));
  f.ids[nr] = c->rank;
  f.hcopy = calloc((size_t)nr, STRAND_NET_HANDLE_MAXSIZE);
  f.sreq = calloc((size_t)nr, sizeof(void *));
  f.rreq = calloc((size_t)nr, sizeof(void *));
  f.sdone = calloc((size_t)nr, sizeof(bool));
  f.rdone = calloc((size_t)nr, sizeof(bool));
  strand_result_t rc = f.hcopy && f.sreq && f.rreq && f.sdone && f.rdone ? STRAND_SUCCESS : STRAND_SYSTEM_ERROR;
  for (int j = 0; rc == STRAND_SUCCESS && j < nr; j++)
    if (j != c->rank) memcpy(f.hcopy[j], handles[j], STRAND_NET_HANDLE_MAXSIZE);
  while (rc == STRAND_SUCCESS) {
    bool progress = false, done = false;
    rc = cs_form_pass(c, l, &f, &progress, &done);
    if (rc != STRAND_SUCCESS || done) break;
    if (cs_now() > deadline) {
      cs_form_timeout(c, &f);
      rc = STRAND_REMOTE_ERROR;
    } else if (!progress) {
      cs_pause();
    }
  }
  for (int k = 0; k < f.nacc && rc == STRAND_SUCCESS; k++) {
    int p = f.ids[k];
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
  /* Requests still posted on failure die with their comms (cs_comm_free, or the caller's close of
   * the accepted comms). */
  free(f.hcopy);
  free(f.sreq);
  free(f.rreq);
  free(f.sdone);
  free(f.rdone);
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
  if (rc == STRAND_SUCCESS && nranks > 1) rc = cs_form_group(c, l, handles, accepted, accepted_mh, deadline);
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
