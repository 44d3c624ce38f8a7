/* strand-conform — finalize.*: what a plugin does with calls that arrive after the last finalize
 * (spec §1.4). After it the plugin's state is gone or held only for comms left open: a listen or
 * connect that still succeeds reopens devices (endpoints, threads, sockets) that no finalize will
 * close again, or builds a comm on a freed context. Such calls must be refused with an error.
 * v6..v10 cores never call finalize, so these checks start at v11. */
#include <string.h>

#include "conform.h"

/* Repeats connect while it answers "in progress" (success, NULL comm) for at most `secs`: a
 * refusal is an error result; a comm, or no answer within the bound, is not. */
static strand_result_t connect_after(conform_ctx_t *c, void *ctx, void *handle, void **comm,
                                     double secs) {
  double until = conform_now() + secs;
  strand_result_t r;
  do {
    *comm = NULL;
    conform_phase(c, "connect after the last finalize");
    /* a device-handle pointer as NCCL passes it: a NULL one is conn.null-devcomm's subject */
    strand_dev_handle_t *dh = NULL;
    r = c->net->connect(ctx, 0, handle, comm, &dh);
  } while (r == STRAND_SUCCESS && !*comm && conform_now() < until);
  return r;
}

static conform_status_t finalize_listen_connect(conform_ctx_t *c) {
  if (c->version < 11) return conform_skip(c, "v%d cores never call finalize", c->version);
  void *ctx = NULL;
  strand_result_t r = conform_plugin_init(c, &ctx, 0x46494e31ULL);
  if (r != STRAND_SUCCESS) return conform_skip(c, "not run: init returned %s (see load.init)", conform_result_str(r));
  int nd = 0;
  conform_phase(c, "devices");
  r = c->net->devices(&nd);
  if (r != STRAND_SUCCESS || nd <= 0) {
    conform_plugin_finalize(c, ctx);
    if (r == STRAND_SUCCESS && nd == 0) return conform_skip(c, CONFORM_ZERO_DEVICES_MSG);
    return conform_skip(c, "not run: devices() returned %s with %d devices", conform_result_str(r), nd);
  }
  /* A handle from a listen while the context lives: the connect after finalize dials it. */
  unsigned char h[CONFORM_LISTEN_BUF], h2[CONFORM_LISTEN_BUF];
  memset(h, 0, sizeof h);
  void *lc = NULL;
  conform_phase(c, "listen before finalize");
  r = c->net->listen(ctx, 0, h, &lc);
  if (r != STRAND_SUCCESS || !lc) {
    conform_plugin_finalize(c, ctx);
    return conform_skip(c, "not run: listen with a live context returned %s (conn.* checks listen)",
                        conform_result_str(r));
  }
  conform_phase(c, "closeListen");
  c->net->closeListen(lc);
  r = conform_plugin_finalize(c, ctx);
  if (r != STRAND_SUCCESS) return conform_fail(c, "finalize returned %s", conform_result_str(r));
  /* The context pointer is stale now, as a buggy core would pass it; the plugin must not use it. */
  memset(h2, 0, sizeof h2);
  lc = NULL;
  conform_phase(c, "listen after the last finalize");
  r = c->net->listen(ctx, 0, h2, &lc);
  if (r == STRAND_SUCCESS)
    conform_fail(c, "listen after the last finalize returned ncclSuccess (listenComm %p): it must be "
                 "refused with an error", lc);
  if (lc) c->net->closeListen(lc);
  void *sc = NULL;
  r = connect_after(c, ctx, h, &sc, 2.0 * c->timeout_scale);
  if (r == STRAND_SUCCESS)
    conform_fail(c, "connect after the last finalize %s: it must be refused with an error",
                 sc ? "returned a send comm" : "kept answering \"in progress\" for 2 s");
  if (sc) c->net->closeSend(sc);
  if (c->status != CONFORM_FAIL) conform_note(c, "listen and connect after the last finalize refused");
  return conform_verdict(c);
}

static conform_status_t finalize_collnet_connect(conform_ctx_t *c) {
  if (c->version < 11) return conform_skip(c, "v%d cores never call finalize", c->version);
  if (!c->collnet->finalize) return conform_skip(c, "the CollNet table has no finalize");
  void *ctx = NULL;
  conform_phase(c, "collnet init");
  strand_result_t r = c->collnet->init(&ctx, 0x46494e32ULL, conform_logger_fn());
  if (r != STRAND_SUCCESS) return conform_skip(c, "not run: CollNet init returned %s (collnet.init)", conform_result_str(r));
  int nd = 0;
  conform_phase(c, "collnet devices");
  r = c->collnet->devices(&nd);
  if (r != STRAND_SUCCESS || nd <= 0) {
    c->collnet->finalize(ctx);
    return conform_skip(c, "not run: CollNet devices() returned %s with %d devices", conform_result_str(r), nd);
  }
  unsigned char h[CONFORM_LISTEN_BUF];
  memset(h, 0, sizeof h);
  void *lc = NULL;
  conform_phase(c, "collnet listen");
  r = c->collnet->listen(ctx, 0, h, &lc);
  if (r != STRAND_SUCCESS || !lc) {
    c->collnet->finalize(ctx);
    return conform_skip(c, "not run: CollNet listen with a live context returned %s (collnet.connect)",
                        conform_result_str(r));
  }
  conform_phase(c, "collnet finalize");
  r = c->collnet->finalize(ctx);
  if (r != STRAND_SUCCESS) return conform_fail(c, "CollNet finalize returned %s", conform_result_str(r));
  /* A one-rank group (no peer to dial) on the listenComm from before finalize: whatever the
   * listenComm still holds, the context behind it is gone. The listenComm is not closed
   * afterwards: after finalize it may name freed state, and this process exits anyway. */
  void *handles[1] = {h}, *cc = NULL;
  conform_phase(c, "collnet connect after the last finalize");
  r = c->collnet->connect(handles, 1, 0, lc, &cc);
  if (r == STRAND_SUCCESS)
    return conform_fail(c, "CollNet connect after the last finalize returned ncclSuccess (collComm %p): "
                        "it must be refused with an error", cc);
  conform_note(c, "CollNet connect after the last finalize refused with %s", conform_result_str(r));
  return CONFORM_PASS;
}

const conform_check_t conform_checks_finalize[] = {
  {"finalize.listen-connect", "§1.4", "listen and connect after the last finalize are refused",
   finalize_listen_connect, 20, CONFORM_F_NO_INIT},
  {"finalize.collnet-connect", "§1.4, §8.2", "CollNet connect after the last finalize is refused",
   finalize_collnet_connect, 20, CONFORM_F_NO_INIT | CONFORM_F_COLLNET},
  {0},
};
