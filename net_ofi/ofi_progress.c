/* strand-ofi — progress: CQ reading and the per-device control channel.
 *
 * Progress is driven from the caller (test/isend/irecv/connect/accept), with a bounded number of
 * CQ reads per call, so providers with FI_PROGRESS_MANUAL work without a thread of ours; with
 * several rails each rail's thread (ofi_rail.c) calls it as well, under the same lock. Every
 * completion goes to the `done` callback its owner put into the operation's ofi_op_t (a control
 * message's sender gets its own `sent` callback), so this file never names the files above it.
 * The control channel: a fixed set of control receives kept posted on the device's endpoint (tag
 * OFI_TAG_CTRL), whose messages go to the on_ctrl handler given to ofi_ctrl_open, and a fixed set
 * of control send slots. Calls only ofi_dev.c and ofi_config.c. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ofi.h"
#include "strand/clock.h"

/* ------------------------------------------------------------------------------------------ */
/* control channel: buffers and receives                                                        */

static size_t ctrl_buf_len(void) {
  return sizeof(ofi_ctrl_recv_t) * OFI_CTRL_RECVS + sizeof(ofi_ctrl_send_t) * OFI_CTRL_SENDS;
}

static void ctrl_recv_done(ofi_dev_t *d, ofi_op_t *op, const ofi_cqe_t *e);

static int post_ctrl_recv(ofi_dev_t *d, int k) {
  ofi_ctrl_recv_t *r = &d->ctrl_recv[k];
  r->op.done = ctrl_recv_done;
  r->op.arg = r;
  ssize_t rc = fi_trecv(d->ep, &r->msg, OFI_CTRL_MSG_SIZE, d->ctrl_desc, FI_ADDR_UNSPEC,
                        OFI_TAG_CTRL, 0, &r->op.fi_ctx);
  d->ctrl_recv_posted[k] = rc == 0;
  if (rc != 0) d->ctrl_recv_short = true;
  return (int)rc;
}

static void ctrl_recv_done(ofi_dev_t *d, ofi_op_t *op, const ofi_cqe_t *e) {
  ofi_ctrl_recv_t *r = op->arg;
  int k = (int)(r - d->ctrl_recv);
  d->ctrl_recv_posted[k] = 0;
  if (e->err == 0) {
    d->on_ctrl(d, &r->msg, e->len);
  } else if (e->err != FI_ECANCELED) {
    STRAND_WARN("control message on %s dropped: %s (a peer sent something that is not a "
             "strand-ofi control message, %zu bytes too long)",
             d->name, e->errstr, e->olen);
  }
  if (d->open) post_ctrl_recv(d, k);
}

/* Control buffers: one allocation, one registration when the domain wants local MRs. */
static strand_result_t ctrl_buffers_open(ofi_dev_t *d) {
  size_t len = ctrl_buf_len();
  void *mem = NULL;
  if (posix_memalign(&mem, 4096, len) != 0) return STRAND_SYSTEM_ERROR;
  memset(mem, 0, len);
  d->ctrl_recv = mem;
  d->ctrl_send = (ofi_ctrl_send_t *)((char *)mem + sizeof(ofi_ctrl_recv_t) * OFI_CTRL_RECVS);
  for (int k = 0; k < OFI_CTRL_SENDS; k++) d->ctrl_send[k].index = k;
  if (!(d->mr_mode & FI_MR_LOCAL)) return STRAND_SUCCESS;
  uint64_t key = (d->mr_mode & FI_MR_PROV_KEY) ? 0 : ++d->next_key;
  const char *what = "fi_mr_reg(control buffers)";
  int rc = fi_mr_reg(d->domain, mem, len, FI_SEND | FI_RECV, 0, key, 0, &d->ctrl_mr, NULL);
  if (rc == 0 && (d->mr_mode & FI_MR_ENDPOINT)) {
    what = "fi_mr_bind(control buffers)";
    rc = fi_mr_bind(d->ctrl_mr, &d->ep->fid, 0);
    if (rc == 0) {
      what = "fi_mr_enable(control buffers)";
      rc = fi_mr_enable(d->ctrl_mr);
    }
  }
  if (rc != 0) {
    STRAND_WARN("%s failed on domain %s (provider %s): %s", what, d->name, ofi_provider_name(),
                fi_strerror(-rc));
    return STRAND_SYSTEM_ERROR;
  }
  d->ctrl_desc = fi_mr_desc(d->ctrl_mr);
  return STRAND_SUCCESS;
}

strand_result_t ofi_ctrl_open(ofi_dev_t *d,
                              void (*on_ctrl)(ofi_dev_t *, const ofi_ctrl_msg_t *, size_t)) {
  if (d->open) return STRAND_SUCCESS;
  if (d->open_failed) return STRAND_SYSTEM_ERROR;
  if (ofi_dev_open(d) != STRAND_SUCCESS) {
    d->open_failed = true;
    return STRAND_SYSTEM_ERROR;
  }
  if (ctrl_buffers_open(d) != STRAND_SUCCESS) {
    ofi_ctrl_close(d);
    ofi_dev_close(d);
    d->open_failed = true;
    return STRAND_SYSTEM_ERROR;
  }
  d->on_ctrl = on_ctrl;
  for (int k = 0; k < OFI_CTRL_RECVS; k++) post_ctrl_recv(d, k);
  d->open = true;
  STRAND_INFO(STRAND_SUBSYS_NET, "device %d (%s) rail %d of %d: endpoint %s ready", d->index,
              d->name, d->rail, ofi_params.rails, d->ep_str);
  return STRAND_SUCCESS;
}

void ofi_ctrl_close(ofi_dev_t *d) {
  if (d->ctrl_mr) fi_close(&d->ctrl_mr->fid);
  free(d->ctrl_recv);
  d->ctrl_mr = NULL, d->ctrl_desc = NULL, d->ctrl_recv = NULL, d->ctrl_send = NULL;
}

/* ------------------------------------------------------------------------------------------ */
/* control messages                                                                             */

/* The slot is free again before the sender hears of the completion: it may send from there. */
static void ctrl_send_done(ofi_dev_t *d, ofi_op_t *op, const ofi_cqe_t *e) {
  ofi_ctrl_send_t *cs = op->arg;
  cs->busy = false;
  cs->posted = false;
  cs->sent(d, cs, e);
}

static void post_ctrl_send(ofi_dev_t *d, ofi_ctrl_send_t *cs) {
  ssize_t rc = fi_tsend(d->ep, &cs->msg, sizeof cs->msg, d->ctrl_desc, cs->dest, OFI_TAG_CTRL,
                        &cs->op.fi_ctx);
  if (rc == 0) {
    cs->posted = true;
  } else if (rc == -FI_EAGAIN) {
    d->ctrl_unposted = true;
  } else {
    char err[160];
    snprintf(err, sizeof err, "fi_tsend: %s", fi_strerror((int)-rc));
    ofi_cqe_t e = {.len = 0, .err = (int)-rc, .olen = 0, .errstr = err};
    ctrl_send_done(d, &cs->op, &e);
  }
}

static ofi_ctrl_send_t *ctrl_slot(ofi_dev_t *d, fi_addr_t dest, ofi_ctrl_sent_fn sent) {
  ofi_ctrl_send_t *cs = NULL;
  for (int k = 0; k < OFI_CTRL_SENDS && !cs; k++)
    if (!d->ctrl_send[k].busy) cs = &d->ctrl_send[k];
  if (!cs) return NULL;
  cs->busy = true;
  cs->posted = false;
  cs->not_before_ms = 0;
  cs->dest = dest;
  cs->op.done = ctrl_send_done;
  cs->op.arg = cs;
  cs->sent = sent;
  return cs;
}

int ofi_ctrl_send(ofi_dev_t *d, fi_addr_t dest, uint16_t kind, uint32_t dst_id, uint32_t src_id,
                  uint64_t nonce, uint64_t arg, uint32_t owner_comm, const uint8_t *name,
                  size_t name_len, ofi_ctrl_sent_fn sent) {
  ofi_ctrl_send_t *cs = ctrl_slot(d, dest, sent);
  if (!cs) return -FI_EAGAIN;
  memset(&cs->msg, 0, sizeof cs->msg);
  cs->owner_comm = owner_comm;
  cs->attempts = 1;
  cs->first_ms = strand_now_ms();
  cs->msg.magic = OFI_CTRL_MAGIC;
  cs->msg.version = OFI_CTRL_VERSION;
  cs->msg.kind = kind;
  cs->msg.dst_id = dst_id;
  cs->msg.src_id = src_id;
  cs->msg.nonce = nonce;
  cs->msg.arg = arg;
  if (name && name_len <= OFI_NAME_MAX) {
    cs->msg.name_len = (uint16_t)name_len;
    memcpy(cs->msg.name, name, name_len);
  }
  if (owner_comm) {
    ofi_comm_t *c = ofi_dev_find_comm(d, owner_comm);
    if (c) c->outstanding++;
  }
  post_ctrl_send(d, cs);
  return 0;
}

int ofi_ctrl_resend(ofi_dev_t *d, fi_addr_t dest, const ofi_ctrl_msg_t *msg, int attempt,
                    uint64_t first_ms, uint64_t delay_ms, ofi_ctrl_sent_fn sent) {
  ofi_ctrl_send_t *cs = ctrl_slot(d, dest, sent);
  if (!cs) return -FI_EAGAIN;
  cs->msg = *msg;
  cs->owner_comm = 0;
  cs->attempts = attempt;
  cs->first_ms = first_ms;
  if (delay_ms) {
    /* The slot waits, filled, until progress finds its time has come (ofi_progress below). */
    cs->not_before_ms = strand_now_ms() + delay_ms;
    d->ctrl_unposted = true;
  } else {
    post_ctrl_send(d, cs);
  }
  return 0;
}

/* ------------------------------------------------------------------------------------------ */
/* progress                                                                                     */

static void complete(ofi_dev_t *d, ofi_op_t *op, const ofi_cqe_t *e) {
  if (op->done)
    op->done(d, op, e);
  else
    STRAND_WARN("completion with an unknown context on %s ignored", d->name);
}

/* STRAND_OFI_SLOW_MS: one fi_cq_read that took that long is the provider itself stalling the
 * thread that progresses it (its progress runs inside the call: sockets, connection manager). */
static void trace_cq_read(const ofi_dev_t *d, uint64_t t0, ssize_t n) {
  uint64_t now = strand_now_ns();
  if (now - t0 >= ofi_params.slow_ms * 1000000u)
    STRAND_INFO(STRAND_SUBSYS_NET, "trace t=%llu ms: fi_cq_read on %s rail %d took %llu us "
                "(returned %zd)", (unsigned long long)(now / 1000000u), d->name, d->rail,
                (unsigned long long)((now - t0) / 1000u), n);
}

int ofi_progress(ofi_dev_t *d) {
  if (!d->open) return 0;
  int handled = 0;
  struct fi_cq_tagged_entry e[OFI_CQ_BATCH];
  for (int b = 0; b < OFI_CQ_MAX_BATCHES; b++) {
    /* libfabric 1.17's tcp provider reads errno after a connection's end of stream and takes a
     * stale EAGAIN (a caller's earlier non-blocking socket call) for "try again": the stranger's
     * descriptor then stays for good (issue 23). Whatever the caller left there is not ours to
     * pass on. */
    errno = 0;
    uint64_t t0 = ofi_params.slow_ms ? strand_now_ns() : 0;
    ssize_t n = fi_cq_read(d->cq, e, OFI_CQ_BATCH);
    if (t0) trace_cq_read(d, t0, n);
    if (n > 0) {
      handled += (int)n;
      for (ssize_t k = 0; k < n; k++) {
        ofi_cqe_t ok = {.len = e[k].len, .err = 0, .olen = 0, .errstr = NULL};
        if (e[k].op_context) complete(d, e[k].op_context, &ok);
      }
      if (n < OFI_CQ_BATCH) break;
    } else if (n == -FI_EAVAIL) {
      struct fi_cq_err_entry ee;
      memset(&ee, 0, sizeof ee);
      if (fi_cq_readerr(d->cq, &ee, 0) != 1) break;
      handled++;
      char buf[256];
      const char *ps = fi_cq_strerror(d->cq, ee.prov_errno, ee.err_data, buf, sizeof buf);
      char errstr[400];
      snprintf(errstr, sizeof errstr, "%s (provider %s: %s)", fi_strerror(ee.err),
               ofi_provider_name(), ps ? ps : "no detail");
      if (ee.op_context) {
        ofi_cqe_t bad = {.len = ee.len, .err = ee.err ? ee.err : FI_EOTHER, .olen = ee.olen,
                         .errstr = errstr};
        complete(d, ee.op_context, &bad);
      } else {
        STRAND_WARN("completion error without context on %s: %s", d->name, errstr);
      }
    } else {
      if (n != -FI_EAGAIN)
        STRAND_WARN("fi_cq_read on %s failed: %s", d->name, fi_strerror((int)-n));
      break;
    }
  }
  if (d->ctrl_unposted) {
    d->ctrl_unposted = false;
    uint64_t now = strand_now_ms();
    for (int k = 0; k < OFI_CTRL_SENDS; k++) {
      ofi_ctrl_send_t *cs = &d->ctrl_send[k];
      if (!cs->busy || cs->posted) continue;
      if (cs->not_before_ms > now) {
        d->ctrl_unposted = true; /* a delayed resend: look again on a later call */
      } else if (cs->not_before_ms && !ofi_av_has(d, cs->dest)) {
        /* Its address left the AV meanwhile (the connection broke): sending to a removed
         * fi_addr_t is undefined (tcp;ofi_rxm crashed in close, 2 runs of 6), so the copy is
         * dropped as if cancelled. */
        ofi_cqe_t e = {.len = 0, .err = FI_ECANCELED, .olen = 0, .errstr = "address removed"};
        ctrl_send_done(d, &cs->op, &e);
      } else {
        post_ctrl_send(d, cs);
      }
    }
  }
  if (d->ctrl_recv_short) {
    d->ctrl_recv_short = false;
    for (int k = 0; k < OFI_CTRL_RECVS; k++)
      if (!d->ctrl_recv_posted[k]) post_ctrl_recv(d, k);
  }
  return handled;
}
