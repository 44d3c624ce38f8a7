/* gin_proxy: connect (the group's mesh of net comms, two per ordered pair: the control comm with
 * the staging slots registered on it, and the bulk comm of large puts) and closeColl.
 *
 * connect is collective and blocking (NCCL calls it once per communicator with every rank's
 * listen handle); the mesh is built by the SDK's builder (strand/mesh.h) under a 60 s bound. Its
 * ctx argument is ignored: NCCL 2.30 passes its net context there and 2.28 its GIN context, so
 * the context is the one the listenComm was opened with. */
#include <stdlib.h>
#include <string.h>

#include "gp.h"

gp_comm_t *gp_comm_get(void *collComm, const char *call) {
  if (!collComm || !strand_handle_set_contains(&gp_live_comms, collComm)) {
    STRAND_WARN("gin_proxy %s: %p is not a live collComm (closed already?)", call, collComm);
    return NULL;
  }
  return collComm;
}

static void gp_comm_free(gp_comm_t *c) {
  const strand_net_t *n = c->net;
  gp_rctx_free_all(c);
  gp_xfer_free_all(c);
  if (c->peers) gp_bulk_release(c);
  for (int j = 0; c->peers && j < c->nranks; j++) {
    gp_peer_t *p = &c->peers[j];
    if (n->deregMr && p->send_mh) n->deregMr(p->send, p->send_mh);
    if (n->deregMr && p->recv_mh) n->deregMr(p->recv, p->recv_mh);
    free(p->sbuf);
    free(p->rbuf);
  }
  /* requests still posted on the net die with their comms */
  strand_mesh_close(&c->mesh);
  gp_cuda_detach(c);
  gp_mr_free_all(c);
  gp_bulk_free(c);
  free(c->peers);
  pthread_mutex_destroy(&c->lock);
  c->magic = 0;
  free(c);
}

/* Staging slots of one peer, registered on its two comms. */
static strand_result_t gp_peer_setup(gp_comm_t *c, int j) {
  gp_peer_t *p = &c->peers[j];
  const strand_net_t *n = c->net;
  p->send = c->mesh.send[j * GP_COMMS_PER_PAIR];
  p->recv = c->mesh.recv[j * GP_COMMS_PER_PAIR];
  p->bsend = c->mesh.send[j * GP_COMMS_PER_PAIR + 1];
  p->brecv = c->mesh.recv[j * GP_COMMS_PER_PAIR + 1];
  void *sb = NULL, *rb = NULL;
  if (posix_memalign(&sb, 4096, (size_t)GP_SEND_SLOTS * GP_SLOT_BYTES) != 0) sb = NULL;
  if (posix_memalign(&rb, 4096, (size_t)GP_RECV_SLOTS * GP_SLOT_BYTES) != 0) rb = NULL;
  p->sbuf = sb;
  p->rbuf = rb;
  if (!sb || !rb) {
    STRAND_WARN("gin_proxy connect(rank %d/%d): out of memory for the staging slots of rank %d",
                c->rank, c->nranks, j);
    return STRAND_SYSTEM_ERROR;
  }
  if (!n->regMr) return STRAND_SUCCESS;
  strand_result_t rc = n->regMr(p->send, sb, (size_t)GP_SEND_SLOTS * GP_SLOT_BYTES, STRAND_PTR_HOST, &p->send_mh);
  if (rc == STRAND_SUCCESS)
    rc = n->regMr(p->recv, rb, (size_t)GP_RECV_SLOTS * GP_SLOT_BYTES, STRAND_PTR_HOST, &p->recv_mh);
  if (rc != STRAND_SUCCESS)
    STRAND_WARN("gin_proxy connect(rank %d/%d): the net's regMr of the staging slots for rank %d "
                "returned %d", c->rank, c->nranks, j, (int)rc);
  return rc;
}

static strand_result_t gp_connect_args(void *handles[], int nranks, int rank, void *listenComm) {
  if (!handles || nranks < 1 || rank < 0 || rank >= nranks || !gp_listen_get(listenComm)) {
    STRAND_WARN("gin_proxy connect: invalid arguments (handles %p, nranks %d, rank %d, listenComm %p)",
                (void *)handles, nranks, rank, listenComm);
    return STRAND_INVALID_ARGUMENT;
  }
  for (int j = 0; j < nranks; j++)
    if (j != rank && !handles[j]) {
      STRAND_WARN("gin_proxy connect(rank %d/%d): handle of rank %d is NULL", rank, nranks, j);
      return STRAND_INVALID_ARGUMENT;
    }
  return STRAND_SUCCESS;
}

strand_result_t gp_connect(void *ctx, void *handles[], int nranks, int rank, void *listenComm, void **collComm) {
  (void)ctx; /* see the top of this file */
  if (!collComm) return STRAND_INVALID_ARGUMENT;
  *collComm = NULL;
  strand_result_t rc = gp_connect_args(handles, nranks, rank, listenComm);
  if (rc != STRAND_SUCCESS) return rc;
  gp_listen_t *l = listenComm;
  gp_comm_t *c = calloc(1, sizeof *c);
  if (!c) return STRAND_SYSTEM_ERROR;
  c->magic = GP_COMM_MAGIC;
  pthread_mutex_init(&c->lock, NULL);
  c->nranks = nranks;
  c->rank = rank;
  c->dev = l->dev;
  c->net = gp_net();
  c->peers = calloc((size_t)nranks, sizeof *c->peers);
  if (!c->peers) rc = STRAND_SYSTEM_ERROR;
  strand_mesh_spec_t spec = {.net = c->net, .net_ctx = l->ctx->net_ctx, .net_listen = l->net_listen,
                             .dev = l->dev, .nranks = nranks, .rank = rank, .k = GP_COMMS_PER_PAIR,
                             .timeout_s = GP_CONNECT_TIMEOUT_S, .who = "gin_proxy connect"};
  if (rc == STRAND_SUCCESS) rc = strand_mesh_form(&spec, handles, &c->mesh);
  for (int j = 0; j < nranks && rc == STRAND_SUCCESS; j++)
    if (j != rank) rc = gp_peer_setup(c, j);
  if (rc == STRAND_SUCCESS) rc = strand_handle_set_add(&gp_live_comms, c);
  if (rc != STRAND_SUCCESS) {
    gp_comm_free(c);
    return rc;
  }
  pthread_mutex_lock(&c->lock);
  gp_post_recvs(c);
  pthread_mutex_unlock(&c->lock);
  STRAND_INFO(STRAND_SUBSYS_INIT | STRAND_SUBSYS_NET,
              "gin_proxy: rank %d/%d connected over %s dev %d (%u-byte slots, %d receives per peer)",
              rank, nranks, c->net->name, c->dev, GP_SLOT_BYTES, GP_RECV_SLOTS);
  *collComm = c;
  return STRAND_SUCCESS;
}

strand_result_t gp_close_coll(void *collComm) {
  if (!collComm || !strand_handle_set_remove(&gp_live_comms, collComm)) {
    STRAND_WARN("gin_proxy closeColl: %p is not a live collComm (closed twice?)", collComm);
    return STRAND_INVALID_ARGUMENT;
  }
  gp_comm_t *c = collComm;
  pthread_mutex_lock(&c->lock);
  gp_say_bye(c);
  pthread_mutex_unlock(&c->lock);
  gp_comm_free(c);
  return STRAND_SUCCESS;
}
