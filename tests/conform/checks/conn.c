/* strand-conform — conn.*: connection set-up as NCCL's proxy drives it (spec §6.1): listen on the
 * receiver, handle shipped through the bootstrap, connect / accept polled from the proxy thread
 * until both sides are up, closeListen right after accept. */
#include <stdlib.h>
#include <string.h>

#include "conform.h"

/* Listen on `dev` and all-gather the handles; `peer_handle` gets the next rank's. */
static int listen_and_exchange(conform_ctx_t *c, int dev, void **lc, unsigned char *peer_handle) {
  unsigned char h[CONFORM_LISTEN_BUF];
  const size_t hs = STRAND_NET_HANDLE_MAXSIZE;
  memset(h, 0, sizeof h);
  *lc = NULL;
  conform_phase(c, "listen(dev %d)", dev);
  strand_result_t r = c->net->listen(c->net_ctx, dev, h, lc);
  if (r != STRAND_SUCCESS || !*lc) {
    conform_fail(c, "listen(dev %d) returned %s, listenComm %p", dev, conform_result_str(r), *lc);
    return -1;
  }
  unsigned char *all = malloc((size_t)c->nranks * hs);
  if (conform_allgather(c, h, hs, all)) {
    free(all);
    conform_fail(c, "%s", c->bs_error);
    return -1;
  }
  memcpy(peer_handle, all + (size_t)c->next * hs, hs);
  free(all);
  return 0;
}

/* Only conn.connect-nonblocking / conn.accept-nonblocking judge how long one call takes; the
 * other checks just need the connection, so one broken clause fails one check. */
static bool g_enforce_call_bound;

/* One connect / accept call, timed against the non-blocking bound. */
static int do_connect(conform_ctx_t *c, int dev, unsigned char *handle, void **sc, bool null_dev) {
  strand_dev_handle_t *dh = NULL;
  conform_phase(c, "connect(dev %d)", dev);
  double t0 = conform_now();
  strand_result_t r = c->net->connect(c->net_ctx, dev, handle, sc, null_dev ? NULL : &dh);
  double dt = conform_now() - t0;
  if (g_enforce_call_bound && dt > conform_call_bound()) {
    conform_fail(c, "connect blocked for %.2f s (bound %.2f s): NCCL polls it from the proxy thread",
                 dt, conform_call_bound());
    return -1;
  }
  if (r != STRAND_SUCCESS) {
    conform_fail(c, "connect(dev %d) to rank %d returned %s", dev, c->next, conform_result_str(r));
    return -1;
  }
  return 0;
}

static int do_accept(conform_ctx_t *c, void *lc, void **rc, bool null_dev) {
  strand_dev_handle_t *dh = NULL;
  conform_phase(c, "accept");
  double t0 = conform_now();
  strand_result_t r = c->net->accept(lc, rc, null_dev ? NULL : &dh);
  double dt = conform_now() - t0;
  if (g_enforce_call_bound && dt > conform_call_bound()) {
    conform_fail(c, "accept blocked for %.2f s (bound %.2f s): it must return NULL until a "
                 "connection is there", dt, conform_call_bound());
    return -1;
  }
  if (r != STRAND_SUCCESS) {
    conform_fail(c, "accept from rank %d returned %s", c->prev, conform_result_str(r));
    return -1;
  }
  return 0;
}

/* Drive connect and accept until both are up. `lc` is closed right after accept (NCCL does). */
static int drive_until_up(conform_ctx_t *c, conform_link_t *l, unsigned char *peer_handle,
                          bool null_dev, int *calls) {
  int n = 0;
  while (!l->send_comm || !l->recv_comm) {
    if (!l->send_comm && do_connect(c, l->dev, peer_handle, &l->send_comm, null_dev)) return -1;
    if (!l->recv_comm) {
      if (do_accept(c, l->listen_comm, &l->recv_comm, null_dev)) return -1;
      if (l->recv_comm) {
        conform_phase(c, "closeListen after accept");
        strand_result_t r = c->net->closeListen(l->listen_comm);
        l->listen_comm = NULL;
        if (r != STRAND_SUCCESS) {
          conform_fail(c, "closeListen after accept returned %s", conform_result_str(r));
          return -1;
        }
      }
    }
    n++;
    if ((n & 63) == 0) {
      if (conform_peer_failed(c)) return conform_fail(c, "%s", c->bs_error), -1;
      if (conform_remaining(c) < 1.0) {
        conform_fail(c, "not connected before the time bound after %d connect/accept rounds "
                     "(sendComm %s, recvComm %s)", n, l->send_comm ? "up" : "NULL",
                     l->recv_comm ? "up" : "NULL");
        return -1;
      }
    }
    if (!l->send_comm || !l->recv_comm) conform_sleep(0.0005);
  }
  if (calls) *calls = n;
  return 0;
}

/* accept() before the peer connected: must return at once with NULL. */
static conform_status_t conn_accept_nonblocking(conform_ctx_t *c) {
  g_enforce_call_bound = true;
  conform_link_t l = {.dev = 0};
  unsigned char ph[STRAND_NET_HANDLE_MAXSIZE];
  if (listen_and_exchange(c, 0, &l.listen_comm, ph)) return CONFORM_FAIL;
  double until = conform_now() + 0.2;
  while (conform_now() < until) {
    if (do_accept(c, l.listen_comm, &l.recv_comm, false)) return CONFORM_FAIL;
    if (l.recv_comm)
      return conform_fail(c, "accept returned a recvComm before any rank called connect");
    conform_sleep(0.002);
  }
  if (conform_barrier(c)) return conform_fail(c, "%s", c->bs_error);
  if (drive_until_up(c, &l, ph, false, NULL)) return CONFORM_FAIL;
  if (conform_ping(c, &l, 4096, 1)) return CONFORM_FAIL;
  conform_link_close(c, &l);
  return conform_verdict(c);
}

/* connect() while the peer does not accept yet: every call returns at once. */
static conform_status_t conn_connect_nonblocking(conform_ctx_t *c) {
  g_enforce_call_bound = true;
  conform_link_t l = {.dev = 0};
  unsigned char ph[STRAND_NET_HANDLE_MAXSIZE];
  if (listen_and_exchange(c, 0, &l.listen_comm, ph)) return CONFORM_FAIL;
  double until = conform_now() + 0.3;
  int calls = 0;
  while (conform_now() < until && !l.send_comm) {
    if (do_connect(c, 0, ph, &l.send_comm, false)) return CONFORM_FAIL;
    calls++;
    conform_sleep(0.002);
  }
  if (conform_barrier(c)) return conform_fail(c, "%s", c->bs_error);
  if (drive_until_up(c, &l, ph, false, NULL)) return CONFORM_FAIL;
  if (conform_ping(c, &l, 4096, 2)) return CONFORM_FAIL;
  conform_note(c, "%d connect call(s) before the peer accepted%s", calls,
               l.send_comm ? "" : "");
  conform_link_close(c, &l);
  return conform_verdict(c);
}

static conform_status_t conn_establish(conform_ctx_t *c) {
  conform_link_t l = {.dev = 0};
  unsigned char ph[STRAND_NET_HANDLE_MAXSIZE];
  if (listen_and_exchange(c, 0, &l.listen_comm, ph)) return CONFORM_FAIL;
  int rounds = 0;
  if (drive_until_up(c, &l, ph, false, &rounds)) return CONFORM_FAIL;
  if (conform_ping(c, &l, 1, 3) || conform_ping(c, &l, 65536, 4)) return CONFORM_FAIL;
  conform_note(c, "up after %d connect/accept round(s)", rounds);
  conform_link_close(c, &l);
  return conform_verdict(c);
}

static conform_status_t conn_close_listen_after_accept(conform_ctx_t *c) {
  conform_link_t l;
  if (conform_link_open(c, 0, &l)) return CONFORM_FAIL; /* closes the listener after accept */
  /* several messages after the listener is gone, in both directions of the ring */
  for (int i = 0; i < 4; i++)
    if (conform_ping(c, &l, (size_t)1 << (10 + 3 * i), 10 + (uint64_t)i)) return CONFORM_FAIL;
  conform_link_close(c, &l);
  return conform_verdict(c);
}

static conform_status_t conn_null_devcomm(conform_ctx_t *c) {
  if (c->version < 7) return conform_skip(c, "v6 connect/accept have no device-handle argument");
  conform_link_t l = {.dev = 0};
  unsigned char ph[STRAND_NET_HANDLE_MAXSIZE];
  if (listen_and_exchange(c, 0, &l.listen_comm, ph)) return CONFORM_FAIL;
  if (drive_until_up(c, &l, ph, true, NULL)) return CONFORM_FAIL;
  if (conform_ping(c, &l, 4096, 5)) return CONFORM_FAIL;
  conform_link_close(c, &l);
  return conform_verdict(c);
}

/* Two listeners on one device: a connection made with handle B must land on listener B. */
static conform_status_t conn_listener_routing(conform_ctx_t *c) {
  unsigned char h[2][STRAND_NET_HANDLE_MAXSIZE];
  void *lc[2] = {NULL, NULL};
  for (int k = 0; k < 2; k++) {
    unsigned char lb[CONFORM_LISTEN_BUF];
    memset(lb, 0, sizeof lb);
    conform_phase(c, "listen #%d", k);
    strand_result_t r = c->net->listen(c->net_ctx, 0, lb, &lc[k]);
    memcpy(h[k], lb, sizeof h[k]);
    if (r != STRAND_SUCCESS || !lc[k])
      return conform_fail(c, "listen #%d returned %s", k, conform_result_str(r));
  }
  unsigned char *all = malloc((size_t)c->nranks * sizeof h);
  if (conform_allgather(c, h, sizeof h, all)) {
    free(all);
    return conform_fail(c, "%s", c->bs_error);
  }
  unsigned char ph[2][STRAND_NET_HANDLE_MAXSIZE];
  memcpy(ph, all + (size_t)c->next * sizeof h, sizeof h);
  free(all);
  /* connect to the SECOND listener first, so a plugin that routes by device picks the wrong one */
  conform_link_t l[2];
  memset(l, 0, sizeof l);
  for (int k = 0; k < 2; k++) l[k].listen_comm = lc[k];
  for (int k = 1; k >= 0; k--)
    if (drive_until_up(c, &l[k], ph[k], false, NULL)) return CONFORM_FAIL;
  for (int k = 0; k < 2; k++)
    if (conform_ping(c, &l[k], 1000 + (size_t)k, 20 + (uint64_t)k)) {
      conform_fail(c, "the connection made with listener #%d's handle did not deliver to that "
                   "listener's recvComm", k);
      return CONFORM_FAIL;
    }
  for (int k = 0; k < 2; k++) conform_link_close(c, &l[k]);
  return conform_verdict(c);
}

static conform_status_t conn_every_device(conform_ctx_t *c) {
  int n = c->ndev < 8 ? c->ndev : 8;
  for (int dev = 0; dev < n; dev++) {
    conform_link_t l;
    if (conform_link_open(c, dev, &l)) return conform_fail(c, "on device %d", dev);
    if (conform_ping(c, &l, 70000, 30 + (uint64_t)dev)) return conform_fail(c, "on device %d", dev);
    conform_link_close(c, &l);
  }
  conform_note(c, "%d device(s)", n);
  return conform_verdict(c);
}

/* Connecting to a listener that is gone must end in an error within the stale bound. A plugin
 * whose connect returns a comm anyway must then fail the first sends. NULL past the bound is a
 * FAIL whose message states the bound used and NCCL's own (conform_stale_text): NCCL's proxy polls
 * a plugin's connect until it returns, so only the plugin can bound it. */
static conform_status_t expect_connect_error(conform_ctx_t *c, unsigned char *handle, const char *what) {
  double bound = c->stale_bound;
  double t0 = conform_now(), until = t0 + bound;
  if (until > c->deadline - 1) until = c->deadline - 1;
  void *sc = NULL;
  strand_dev_handle_t *dh = NULL;
  while (!sc) {
    conform_phase(c, "connect to %s", what);
    double c0 = conform_now();
    strand_result_t r = c->net->connect(c->net_ctx, 0, handle, &sc, &dh);
    if (conform_now() - c0 > conform_call_bound())
      return conform_fail(c, "connect to %s blocked for %.2f s", what, conform_now() - c0);
    if (r != STRAND_SUCCESS) {
      conform_note(c, "connect to %s returned %s after %.2f s: NCCL's proxy fails the connection "
                   "setup with it (NCCL's own socket connect gives up after ~60 s)", what,
                   conform_result_str(r), conform_now() - t0);
      if (sc) c->net->closeSend(sc);
      return CONFORM_PASS;
    }
    if (!sc && conform_now() > until) {
      char why[600];
      conform_stale_text(c, conform_now() - t0, why, sizeof why);
      return conform_fail(c, "connect to %s returned NULL without an error: it %s", what, why);
    }
    if (!sc) conform_sleep(0.002);
  }
  /* Lazily connected plugin: sends must fail, not vanish. */
  unsigned char *buf = calloc(1, 65536);
  void *mh = NULL;
  if (c->net->regMr(sc, buf, 65536, STRAND_PTR_HOST, &mh) != STRAND_SUCCESS) {
    free(buf);
    conform_note(c, "connect to %s returned a comm, regMr on it failed", what);
    return CONFORM_PASS;
  }
  for (;;) {
    void *req = NULL;
    conform_phase(c, "isend on a comm to %s", what);
    strand_result_t r = c->net->isend(sc, buf, 65536, c->rank, mh, NULL, &req);
    if (r == STRAND_SUCCESS && req) {
      int done = 0;
      while (r == STRAND_SUCCESS && !done && conform_now() < until) r = c->net->test(req, &done, NULL);
    }
    if (r != STRAND_SUCCESS) {
      conform_note(c, "connect to %s returned a comm; sends failed with %s after %.2f s", what,
                   conform_result_str(r), conform_now() - t0);
      break;
    }
    if (conform_now() > until) {
      conform_fail(c, "connect to %s returned a comm whose sends kept succeeding (or pending) for "
                   "%.1f s: data to a dead peer is lost silently", what, conform_now() - t0);
      break;
    }
  }
  free(buf);
  /* the comm is broken; closing it must still not crash, but do not insist on success */
  return c->status == CONFORM_FAIL ? CONFORM_FAIL : CONFORM_PASS;
}

static conform_status_t conn_stale_handle(conform_ctx_t *c) {
  void *lc;
  unsigned char ph[STRAND_NET_HANDLE_MAXSIZE];
  if (listen_and_exchange(c, 0, &lc, ph)) return CONFORM_FAIL;
  conform_phase(c, "closeListen");
  strand_result_t r = c->net->closeListen(lc);
  if (r != STRAND_SUCCESS) return conform_fail(c, "closeListen returned %s", conform_result_str(r));
  if (conform_barrier(c)) return conform_fail(c, "%s", c->bs_error);
  conform_status_t st = expect_connect_error(c, ph, "a closed listener");
  conform_barrier(c);
  return st;
}

/* Odd ranks play a process that dies after publishing its handle; even ranks connect to it. */
static conform_status_t conn_dead_peer(conform_ctx_t *c) {
  if (c->nranks < 2) return conform_skip(c, "needs 2 ranks");
  void *lc;
  unsigned char ph[STRAND_NET_HANDLE_MAXSIZE];
  if (listen_and_exchange(c, 0, &lc, ph)) return CONFORM_FAIL;
  if (conform_barrier(c)) return conform_fail(c, "%s", c->bs_error);
  if (c->rank % 2 == 1) {
    conform_note(c, "rank %d played the dead peer", c->rank);
    c->exit_without_cleanup = true;
    return CONFORM_PASS;
  }
  if (c->next % 2 == 0) return CONFORM_PASS; /* odd nranks: the last even rank's next is rank 0 */
  char dummy;
  /* Returns an error once the peer left the check: that is the moment it died. */
  (void)conform_recv(c, c->next, &dummy, 1);
  conform_sleep(0.3); /* its process exits right after reporting */
  c->net->closeListen(lc);
  return expect_connect_error(c, ph, "a dead process");
}

/* listen and connect on device -1 and on device ndev must return an error (§2.1): NCCL never asks
 * for them, but a plugin that "succeeds" there indexes its device table out of bounds. connect gets
 * a real handle (from listen on device 0 of this rank) so that only the device index is wrong. */
static conform_status_t conn_bad_device(conform_ctx_t *c) {
  int bad[2] = {-1, c->ndev};
  for (int i = 0; i < 2; i++) {
    unsigned char h[CONFORM_LISTEN_BUF];
    void *lc = NULL;
    memset(h, 0, sizeof h);
    conform_phase(c, "listen(dev %d) out of range", bad[i]);
    strand_result_t r = c->net->listen(c->net_ctx, bad[i], h, &lc);
    if (r == STRAND_SUCCESS) {
      conform_fail(c, "listen(%d) with %d devices returned ncclSuccess", bad[i], c->ndev);
      if (lc) {
        conform_phase(c, "closeListen(dev %d)", bad[i]);
        c->net->closeListen(lc);
      }
    }
  }
  unsigned char h[CONFORM_LISTEN_BUF];
  void *lc = NULL;
  memset(h, 0, sizeof h);
  conform_phase(c, "listen(dev 0)");
  strand_result_t r = c->net->listen(c->net_ctx, 0, h, &lc);
  if (r != STRAND_SUCCESS || !lc)
    return conform_fail(c, "listen(dev 0) returned %s, listenComm %p", conform_result_str(r), lc);
  for (int i = 0; i < 2; i++) {
    /* A fresh copy per device: connect may keep its progress in the handle buffer. */
    unsigned char hc[CONFORM_LISTEN_BUF];
    memcpy(hc, h, sizeof hc);
    void *sc = NULL;
    strand_dev_handle_t *dh = NULL;
    double t0 = conform_now(), end = t0 + conform_call_bound();
    do {
      conform_phase(c, "connect(dev %d) out of range", bad[i]);
      r = c->net->connect(c->net_ctx, bad[i], hc, &sc, &dh);
      if (r != STRAND_SUCCESS || sc) break;
      conform_sleep(0.001);
    } while (conform_now() < end);
    /* A NULL sendComm with ncclSuccess means "not yet": the message states how long the suite
     * retried and that NCCL itself would not stop, as the stale-connect checks do. */
    if (r == STRAND_SUCCESS && sc)
      conform_fail(c, "connect(%d) with %d devices returned ncclSuccess and a sendComm", bad[i], c->ndev);
    else if (r == STRAND_SUCCESS)
      conform_fail(c, "connect(%d) with %d devices returned ncclSuccess with a NULL sendComm on every "
                   "call for %.2f s (the suite's bound: --call-bound %g s x --timeout-scale %g): NCCL "
                   "never connects on an out-of-range device, but a core that did would poll this "
                   "connect until it returns a comm or an error, with no bound of its own, and hang "
                   "instead of failing", bad[i], c->ndev, conform_now() - t0,
                   conform_call_bound() / c->timeout_scale, c->timeout_scale);
    if (sc) {
      conform_phase(c, "closeSend(dev %d)", bad[i]);
      c->net->closeSend(sc);
    }
  }
  conform_phase(c, "closeListen");
  c->net->closeListen(lc);
  return conform_verdict(c);
}

const conform_check_t conform_checks_conn[] = {
  {"conn.accept-nonblocking", "§6.1 step 5", "accept returns at once, NULL before the peer connects",
   conn_accept_nonblocking, 30, 0},
  {"conn.connect-nonblocking", "§6.1 step 4", "connect returns at once, also before the peer accepts",
   conn_connect_nonblocking, 30, 0},
  {"conn.establish", "§6.1 steps 4-5", "connect/accept retried bring both comms up; messages flow",
   conn_establish, 30, 0},
  {"conn.close-listen-after-accept", "§6.1 step 5", "closeListen right after accept leaves the recvComm working",
   conn_close_listen_after_accept, 30, 0},
  {"conn.null-devcomm", "§6.1, §5.1 item 11", "connect/accept accept NULL device-handle pointers",
   conn_null_devcomm, 30, 0},
  {"conn.listener-routing", "§6.1", "with two listeners each handle reaches its own listener",
   conn_listener_routing, 30, 0},
  {"conn.every-device", "§6.1", "listen/connect/accept and a message on every device (first 8)",
   conn_every_device, 60, 0},
  {"conn.stale-handle", "§6.1, DESIGN bounded waits", "connect to a closed listener errors within --stale-bound",
   conn_stale_handle, 40, CONFORM_F_ABI_INDEPENDENT | CONFORM_F_STALE},
  {"conn.dead-peer", "§6.1, DESIGN bounded waits", "connect to a dead process errors within --stale-bound",
   conn_dead_peer, 40, CONFORM_F_ABI_INDEPENDENT | CONFORM_F_STALE},
  {"conn.bad-device", "§2.1", "listen(-1/ndev) and connect(-1/ndev) return an error",
   conn_bad_device, 20, 0},
  {0},
};
