/* strand-conform — limits.*: requests in flight (spec §5 NCCL_NET_MAX_REQUESTS, §6.2): each comm
 * must hold 32 requests (8 for v6) and a sendComm 32 x maxRecvs isends. Receives are posted
 * first, as NCCL's receiver proxy does; a NULL request is retried while the others are tested. */
#include <stdlib.h>
#include <string.h>

#include "conform.h"

enum { SLOT = 4096 };

typedef struct {
  conform_link_t l;
  conform_buf_t sbuf, rbuf;
  void *smh, *rmh;
} lim_t;

static int lim_open(conform_ctx_t *c, lim_t *x, int nsend, int nrecv_slots) {
  memset(x, 0, sizeof *x);
  if (conform_link_open(c, 0, &x->l)) return -1;
  if (conform_buf_alloc(&x->sbuf, (size_t)nsend * SLOT, 0) ||
      conform_buf_alloc(&x->rbuf, (size_t)nrecv_slots * SLOT, 0)) {
    conform_fail(c, "out of memory");
    return -1;
  }
  if (conform_reg(c, x->l.send_comm, x->sbuf.data, x->sbuf.len, STRAND_PTR_HOST, &x->smh)) return -1;
  if (conform_reg(c, x->l.recv_comm, x->rbuf.data, x->rbuf.len, STRAND_PTR_HOST, &x->rmh)) return -1;
  return 0;
}

static void lim_close(conform_ctx_t *c, lim_t *x) {
  if (x->smh) conform_dereg(c, x->l.send_comm, x->smh);
  if (x->rmh) conform_dereg(c, x->l.recv_comm, x->rmh);
  conform_buf_free(&x->sbuf);
  conform_buf_free(&x->rbuf);
  if (x->l.send_comm || x->l.recv_comm) conform_link_close(c, &x->l);
}

static size_t msg_size(int i) { return (size_t)(i * 131 % (SLOT - 1)) + 1; }

/* Post `nrecv` irecvs of `n` slots each (tags tag0..tag0+n-1), all before any send; then `nsend`
 * isends cycling through those tags; every request must be accepted without an error and every
 * message must land in its slot. */
static conform_status_t in_flight(conform_ctx_t *c, int nrecv, int n, int nsend, const char *what) {
  lim_t x;
  void **rreq = calloc((size_t)nrecv, sizeof *rreq), **sreq = calloc((size_t)nsend, sizeof *sreq);
  int *rsizes = calloc((size_t)nrecv * 64, sizeof(int));
  bool *rdone = calloc((size_t)nrecv, 1), *sdone = calloc((size_t)nsend, 1);
  int max_out = 0;
  if (lim_open(c, &x, nsend, nrecv * n)) goto out;
  for (int i = 0; i < nrecv; i++) {
    void *data[8];
    size_t sizes[8];
    int tags[8];
    void *mhs[8];
    for (int k = 0; k < n; k++) {
      data[k] = x.rbuf.data + (size_t)(i * n + k) * SLOT;
      sizes[k] = SLOT;
      tags[k] = 1000 + k;
      mhs[k] = x.rmh;
    }
    strand_result_t r;
    double until = conform_now() + 2.0 * c->timeout_scale;
    do {
      rreq[i] = NULL;
      conform_phase(c, "irecv #%d of %d before any send", i, nrecv);
      r = c->net->irecv(x.l.recv_comm, n, data, sizes, tags, mhs, NULL, &rreq[i]);
    } while (r == STRAND_SUCCESS && !rreq[i] && conform_now() < until);
    if (r != STRAND_SUCCESS) {
      conform_fail(c, "irecv #%d (with %d receives already in flight; the %s limit is %d) returned %s",
                   i + 1, i, what, nrecv, conform_result_str(r));
      goto out;
    }
    if (!rreq[i]) {
      conform_fail(c, "irecv #%d kept returning NULL with %d receives in flight (limit %d)", i + 1, i, nrecv);
      goto out;
    }
  }
  if (conform_barrier(c)) {
    conform_fail(c, "%s", c->bs_error);
    goto out;
  }
  int posted = 0, nsdone = 0, nrdone = 0;
  unsigned spins = 0;
  while (nsdone < nsend || nrdone < nrecv) {
    if (posted < nsend) {
      unsigned char *d = x.sbuf.data + (size_t)posted * SLOT;
      size_t sz = msg_size(posted);
      conform_fill(d, sz, conform_seed(c->rank, c->next, 50000 + (uint64_t)posted));
      void *req = NULL;
      conform_phase(c, "isend #%d", posted);
      strand_result_t r = c->net->isend(x.l.send_comm, d, sz, 1000 + posted % n, x.smh, NULL, &req);
      if (r != STRAND_SUCCESS) {
        conform_fail(c, "isend #%d (with %d sends in flight; a sendComm must take %d) returned %s",
                     posted + 1, posted - nsdone, nsend, conform_result_str(r));
        goto out;
      }
      if (req) {
        sreq[posted++] = req;
        if (posted - nsdone > max_out) max_out = posted - nsdone;
        continue; /* post as many as the plugin takes before testing, like a full FIFO */
      }
    }
    for (int i = 0; i < posted; i++) {
      if (sdone[i]) continue;
      int done = 0;
      conform_phase(c, "test(isend #%d)", i);
      strand_result_t r = c->net->test(sreq[i], &done, NULL);
      if (r != STRAND_SUCCESS) {
        conform_fail(c, "test(isend #%d) returned %s", i, conform_result_str(r));
        goto out;
      }
      if (done) sdone[i] = true, nsdone++;
    }
    for (int i = 0; i < nrecv; i++) {
      if (rdone[i]) continue;
      int done = 0;
      conform_phase(c, "test(irecv #%d)", i);
      strand_result_t r = c->net->test(rreq[i], &done, &rsizes[i * 64]);
      if (r != STRAND_SUCCESS) {
        conform_fail(c, "test(irecv #%d) returned %s", i, conform_result_str(r));
        goto out;
      }
      if (done) rdone[i] = true, nrdone++;
    }
    if ((++spins & 63) == 0) {
      if (conform_peer_failed(c)) {
        conform_fail(c, "%s", c->bs_error);
        goto out;
      }
      if (conform_remaining(c) < 0.5) {
        conform_fail(c, "%d/%d sends and %d/%d receives completed before the time bound", nsdone,
                     nsend, nrdone, nrecv);
        goto out;
      }
    }
  }
  for (int i = 0; i < nrecv; i++)
    for (int k = 0; k < n; k++) {
      int m = i * n + k; /* message m carries tag 1000 + m % n and lands in group m / n */
      size_t want = msg_size(m);
      unsigned char *d = x.rbuf.data + (size_t)m * SLOT;
      if ((size_t)rsizes[i * 64 + k] != want ||
          conform_verify(d, want, conform_seed(c->prev, c->rank, 50000 + (uint64_t)m)) >= 0) {
        conform_fail(c, "message %d (receive %d, slot %d): size %d (expected %zu) or payload wrong", m,
                     i, k, rsizes[i * 64 + k], want);
        goto out;
      }
    }
  conform_note(c, "%d receives x %d slots posted up front; %d sends, up to %d in flight", nrecv, n,
               nsend, max_out);
out:
  lim_close(c, &x);
  free(rreq);
  free(sreq);
  free(rsizes);
  free(rdone);
  free(sdone);
  return c->status == CONFORM_FAIL ? CONFORM_FAIL : CONFORM_PASS;
}

static int max_requests(conform_ctx_t *c) {
  return c->version == 6 ? STRAND_NET_MAX_REQUESTS_V6 : STRAND_NET_MAX_REQUESTS;
}

static conform_status_t limits_recv_in_flight(conform_ctx_t *c) {
  int L = max_requests(c);
  return in_flight(c, L, 1, L, "NCCL_NET_MAX_REQUESTS");
}

static conform_status_t limits_send_in_flight(conform_ctx_t *c) {
  strand_props_v12_t p;
  if (conform_props(c, 0, &p)) return CONFORM_FAIL;
  int m = p.maxRecvs < 1 ? 1 : p.maxRecvs > 8 ? 8 : p.maxRecvs;
  int L = max_requests(c);
  return in_flight(c, L, m, L * m, "NCCL_NET_MAX_REQUESTS x maxRecvs");
}

const conform_check_t conform_checks_limits[] = {
  {"limits.recv-in-flight", "§5 NCCL_NET_MAX_REQUESTS, §6.2",
   "32 (v6: 8) irecvs in flight on one recvComm, all complete in order", limits_recv_in_flight, 30, 0},
  {"limits.send-in-flight", "§6.2", "NCCL_NET_MAX_REQUESTS x maxRecvs isends on one sendComm",
   limits_send_in_flight, 30, 0},
  {0},
};
