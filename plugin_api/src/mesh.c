/* Strand SDK — the full mesh of a net table's comms between the ranks of a group (strand/mesh.h).
 *
 * Each rank dials k comms to every peer's listen handle and accepts k*(nranks-1) comms on its own
 * listener. Accepted comms arrive in any order, so every dialled comm first carries two int32s,
 * (our rank, comm index), which place the accepted comm at recv[rank*k+index] on the other side.
 * One loop advances every connect, accept, announcement send and announcement receive together
 * (mesh_pass); the only waits are short sleeps when no step moved, under the caller's bound. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "strand/log.h"
#include "strand/mesh.h"

typedef struct {
  const strand_mesh_spec_t *s;
  strand_mesh_t *m;
  int nconn;                                /* nranks * k: slots of send[] (ours unused) */
  int need;                                 /* comms to accept: (nranks-1) * k */
  char (*hcopy)[STRAND_NET_HANDLE_MAXSIZE]; /* per dial: a net may keep connect state in a handle */
  void **acc;                               /* accepted comms in arrival order */
  void **smh, **amh;                        /* the announcement buffer's registration per comm */
  void **sreq, **rreq;
  bool *sdone, *rdone;
  /* ann[2*a], ann[2*a+1]: (rank, index) heard on accepted comm a, for a < need; then one pair per
   * dial c at ann[2*(need+c)]: (our rank, c % k), what that dial announces */
  int32_t *ann;
  int nacc;
} mesh_form_t;

static double mesh_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void mesh_pause(void) {
  struct timespec ts = {0, 50000}; /* 50 us: the peers are starting too; do not spin a core */
  nanosleep(&ts, NULL);
}

/* Registers the announcement buffer on one comm, when the net wants registrations. */
static strand_result_t mesh_reg(mesh_form_t *f, void *comm, void **mh) {
  *mh = NULL;
  const strand_net_t *n = f->s->net;
  if (!n->regMr) return STRAND_SUCCESS;
  size_t bytes = (size_t)(f->need + f->nconn) * 2 * sizeof(int32_t);
  strand_result_t rc = n->regMr(comm, f->ann, bytes, STRAND_PTR_HOST, mh);
  if (rc != STRAND_SUCCESS)
    STRAND_WARN("%s(rank %d/%d): the net's regMr of %zu bytes returned %d", f->s->who, f->s->rank,
                f->s->nranks, bytes, (int)rc);
  return rc;
}

static void mesh_list_add(char *buf, size_t cap, int r) {
  size_t len = strlen(buf);
  if (len + 12 < cap) snprintf(buf + len, cap - len, " %d", r);
}

/* Names every step still pending, so a timeout says which peer to look at. */
static void mesh_timeout(mesh_form_t *f) {
  const strand_mesh_spec_t *s = f->s;
  char dial[256] = "", ann[256] = "", heard[256] = "";
  for (int c = 0; c < f->nconn; c++) {
    int j = c / s->k;
    if (j == s->rank || (c % s->k) != 0) continue;
    bool dialled = true, announced = true;
    for (int i = 0; i < s->k; i++) {
      dialled = dialled && f->m->send[j * s->k + i];
      announced = announced && f->sdone[j * s->k + i];
    }
    if (!dialled)
      mesh_list_add(dial, sizeof dial, j);
    else if (!announced)
      mesh_list_add(ann, sizeof ann, j);
  }
  int silent = 0;
  for (int a = 0; a < f->nacc; a++) {
    if (!f->rdone[a])
      silent++;
    else if (f->ann[2 * a + 1] == 0)
      mesh_list_add(heard, sizeof heard, f->ann[2 * a]);
  }
  STRAND_WARN("%s(rank %d/%d): group not formed after %.0f s. connect to rank(s)%s not done; our "
              "rank announcement to rank(s)%s not delivered; accepted %d of %d comms, %d still "
              "silent, heard from rank(s)%s. Check that every rank of the group calls connect with "
              "the listen handles of this communicator, in rank order",
              s->who, s->rank, s->nranks, s->timeout_s, dial[0] ? dial : " (none)",
              ann[0] ? ann : " (none)", f->nacc, f->need, silent, heard[0] ? heard : " (none)");
}

/* Tests a posted request; on completion clears it and marks the step done. */
static strand_result_t mesh_test(const strand_net_t *n, void **req, bool *done, bool *progress) {
  int fin = 0, size = 0;
  strand_result_t rc = n->test(*req, &fin, &size);
  if (rc == STRAND_SUCCESS && fin) {
    *req = NULL;
    *done = true;
    *progress = true;
  }
  return rc;
}

/* Our dials and their announcements. */
static strand_result_t mesh_pass_send(mesh_form_t *f, bool *progress, bool *all) {
  const strand_mesh_spec_t *s = f->s;
  const strand_net_t *n = s->net;
  for (int c = 0; c < f->nconn; c++) {
    int j = c / s->k;
    if (j == s->rank || f->sdone[c]) continue;
    strand_result_t rc = STRAND_SUCCESS;
    const char *step = "connect";
    if (!f->m->send[c]) { /* connect again with the same handle until it yields a comm */
      strand_dev_handle_t *devh = NULL;
      rc = n->connect(s->net_ctx, s->dev, f->hcopy[c], &f->m->send[c], &devh);
      if (rc == STRAND_SUCCESS && f->m->send[c]) {
        *progress = true;
        rc = mesh_reg(f, f->m->send[c], &f->smh[c]);
      }
    }
    if (rc == STRAND_SUCCESS && f->m->send[c] && !f->sreq[c]) { /* NULL: the net cannot take it yet */
      step = "isend";
      rc = n->isend(f->m->send[c], &f->ann[2 * (f->need + c)], 2 * sizeof(int32_t), 0, f->smh[c], NULL,
                    &f->sreq[c]);
      if (f->sreq[c]) *progress = true;
    }
    if (rc == STRAND_SUCCESS && f->sreq[c]) {
      step = "test of the isend";
      rc = mesh_test(n, &f->sreq[c], &f->sdone[c], progress);
    }
    if (rc != STRAND_SUCCESS) {
      STRAND_WARN("%s(rank %d/%d): comm %d to rank %d: the net's %s returned %d; check that rank %d "
                  "is up and its address reachable", s->who, s->rank, s->nranks, c % s->k, j, step,
                  (int)rc, j);
      return rc;
    }
    if (!f->sdone[c]) *all = false;
  }
  return STRAND_SUCCESS;
}

/* The peers' dials: accept, then hear who each one is. */
static strand_result_t mesh_pass_recv(mesh_form_t *f, bool *progress, bool *all) {
  const strand_mesh_spec_t *s = f->s;
  const strand_net_t *n = s->net;
  if (f->nacc < f->need) {
    strand_dev_handle_t *devh = NULL;
    strand_result_t rc = n->accept(s->net_listen, &f->acc[f->nacc], &devh);
    if (rc == STRAND_SUCCESS && f->acc[f->nacc]) {
      *progress = true;
      f->nacc++;
      rc = mesh_reg(f, f->acc[f->nacc - 1], &f->amh[f->nacc - 1]);
    }
    if (rc != STRAND_SUCCESS) {
      STRAND_WARN("%s(rank %d/%d): the net's accept returned %d after %d of %d comms", s->who, s->rank,
                  s->nranks, (int)rc, f->nacc, f->need);
      return rc;
    }
    if (f->nacc < f->need) *all = false;
  }
  for (int a = 0; a < f->nacc; a++) {
    if (f->rdone[a]) continue;
    strand_result_t rc = STRAND_SUCCESS;
    if (!f->rreq[a]) {
      void *buf = &f->ann[2 * a];
      size_t sz = 2 * sizeof(int32_t);
      int tag = 0;
      f->ann[2 * a] = f->ann[2 * a + 1] = -1;
      rc = n->irecv(f->acc[a], 1, &buf, &sz, &tag, &f->amh[a], NULL, &f->rreq[a]);
      if (f->rreq[a]) *progress = true;
    }
    if (rc == STRAND_SUCCESS && f->rreq[a]) rc = mesh_test(n, &f->rreq[a], &f->rdone[a], progress);
    if (rc != STRAND_SUCCESS) {
      STRAND_WARN("%s(rank %d/%d): receiving the rank on accepted comm %d (peer not known yet) "
                  "failed: the net returned %d", s->who, s->rank, s->nranks, a, (int)rc);
      return rc;
    }
    if (!f->rdone[a]) *all = false;
  }
  return STRAND_SUCCESS;
}

/* Moves accepted comms to recv[] by their announced (rank, index). */
static strand_result_t mesh_place(mesh_form_t *f) {
  const strand_mesh_spec_t *s = f->s;
  for (int a = 0; a < f->nacc; a++) {
    int p = f->ann[2 * a], i = f->ann[2 * a + 1];
    int slot = p * s->k + i;
    if (p < 0 || p >= s->nranks || p == s->rank || i < 0 || i >= s->k || f->m->recv[slot]) {
      STRAND_WARN("%s(rank %d/%d): an accepted comm says it is comm %d from rank %d; check that every "
                  "rank passed the same handles in the same (rank) order", s->who, s->rank, s->nranks,
                  i, p);
      return STRAND_INTERNAL_ERROR;
    }
    f->m->recv[slot] = f->acc[a];
    f->acc[a] = NULL;
  }
  return STRAND_SUCCESS;
}

/* Drops the announcement buffer's registrations (the comms stay) and the formation state. */
static void mesh_form_free(mesh_form_t *f) {
  const strand_net_t *n = f->s->net;
  for (int c = 0; f->smh && c < f->nconn; c++)
    if (f->smh[c] && n->deregMr) n->deregMr(f->m->send[c], f->smh[c]);
  for (int a = 0; f->amh && a < f->nacc; a++)
    if (f->amh[a] && n->deregMr) n->deregMr(f->acc[a], f->amh[a]);
  free(f->hcopy);
  free(f->smh);
  free(f->sreq);
  free(f->sdone);
  free(f->rreq);
  free(f->rdone);
}

static strand_result_t mesh_loop(mesh_form_t *f) {
  double deadline = mesh_now() + f->s->timeout_s;
  for (;;) {
    bool progress = false, all = true;
    strand_result_t rc = mesh_pass_send(f, &progress, &all);
    if (rc == STRAND_SUCCESS) rc = mesh_pass_recv(f, &progress, &all);
    if (rc != STRAND_SUCCESS) return rc;
    if (all) return STRAND_SUCCESS;
    if (mesh_now() > deadline) {
      mesh_timeout(f);
      return STRAND_REMOTE_ERROR;
    }
    if (!progress) mesh_pause();
  }
}

strand_result_t strand_mesh_form(const strand_mesh_spec_t *s, void *const handles[], strand_mesh_t *m) {
  if (!m) return STRAND_INVALID_ARGUMENT;
  memset(m, 0, sizeof *m);
  if (!s || !s->net || !handles || s->nranks < 1 || s->rank < 0 || s->rank >= s->nranks || s->k < 1)
    return STRAND_INVALID_ARGUMENT;
  *m = (strand_mesh_t){.net = s->net, .nranks = s->nranks, .rank = s->rank, .k = s->k};
  mesh_form_t f = {.s = s, .m = m, .nconn = s->nranks * s->k, .need = (s->nranks - 1) * s->k};
  size_t nc = (size_t)f.nconn;
  m->send = calloc(nc, sizeof(void *));
  m->recv = calloc(nc, sizeof(void *));
  f.hcopy = calloc(nc, STRAND_NET_HANDLE_MAXSIZE);
  f.smh = calloc(nc, sizeof(void *));
  f.sreq = calloc(nc, sizeof(void *));
  f.sdone = calloc(nc, sizeof(bool));
  /* the accepted side needs only `need` entries; nconn > need keeps the sizes simple */
  f.acc = calloc(nc, sizeof(void *));
  f.amh = calloc(nc, sizeof(void *));
  f.rreq = calloc(nc, sizeof(void *));
  f.rdone = calloc(nc, sizeof(bool));
  void *ann = NULL;
  if (posix_memalign(&ann, 4096, (size_t)(f.need + f.nconn) * 2 * sizeof(int32_t)) != 0) ann = NULL;
  f.ann = ann;
  strand_result_t rc = STRAND_SUCCESS;
  if (!m->send || !m->recv || !f.hcopy || !f.smh || !f.sreq || !f.sdone || !f.acc || !f.amh ||
      !f.rreq || !f.rdone || !f.ann) {
    STRAND_WARN("%s(rank %d/%d): out of memory forming the mesh", s->who, s->rank, s->nranks);
    rc = STRAND_SYSTEM_ERROR;
  }
  if (rc == STRAND_SUCCESS && f.need > 0) {
    for (int c = 0; c < f.nconn; c++) {
      f.ann[2 * (f.need + c)] = s->rank;
      f.ann[2 * (f.need + c) + 1] = c % s->k;
      if (c / s->k != s->rank) memcpy(f.hcopy[c], handles[c / s->k], STRAND_NET_HANDLE_MAXSIZE);
    }
    rc = mesh_loop(&f);
  }
  /* Requests still posted on failure die with their comms. */
  mesh_form_free(&f);
  if (rc == STRAND_SUCCESS) rc = mesh_place(&f);
  for (int a = 0; f.acc && a < f.nacc; a++)
    if (f.acc[a]) s->net->closeRecv(f.acc[a]);
  free(f.acc);
  free(f.amh);
  free(f.ann);
  if (rc != STRAND_SUCCESS) strand_mesh_close(m);
  return rc;
}

void strand_mesh_close(strand_mesh_t *m) {
  if (!m) return;
  for (int c = 0; m->net && c < m->nranks * m->k; c++) {
    if (m->send && m->send[c]) m->net->closeSend(m->send[c]);
    if (m->recv && m->recv[c]) m->net->closeRecv(m->recv[c]);
  }
  free(m->send);
  free(m->recv);
  memset(m, 0, sizeof *m);
}
