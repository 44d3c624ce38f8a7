/* strand-ib — isend / irecv / iflush / test: the clear-to-send FIFO, RDMA writes with an
 * immediate, QP striping, and completion processing. One comm is driven by one thread at a time
 * (NCCL's proxy thread); nothing here blocks or allocates. */
#include <arpa/inet.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>

#include "ib.h"
#include "strand/clock.h"
#include "strand/profiler.h"

/* wr_id: kind in the top byte, then two small numbers. */
enum { WR_GROUP = 1, WR_CTS = 2, WR_RECV = 3, WR_FLUSH = 4 };
#define WR_ID(kind, a, b) (((uint64_t)(kind) << 56) | ((uint64_t)(a) << 8) | (uint64_t)(b))
#define WR_KIND(id) ((int)((id) >> 56))
#define WR_A(id) ((int)(((id) >> 8) & 0xffffff))
#define WR_B(id) ((int)((id) & 0xff))

#define CQ_BATCH 16
#define CQ_MAX_BATCHES 8
#define LIVENESS_PERIOD_MS 100

strand_result_t ib_post_imm_recvs(ib_comm_t *c, int q, int count) {
  struct ibv_recv_wr wr[8], *bad = NULL;
  while (count > 0) {
    int k = count < 8 ? count : 8;
    memset(wr, 0, sizeof wr);
    for (int i = 0; i < k; i++) {
      wr[i].wr_id = WR_ID(WR_RECV, 0, q);
      wr[i].num_sge = 0; /* write-with-immediate consumes a receive but places no data in it */
      wr[i].next = i + 1 < k ? &wr[i + 1] : NULL;
    }
    int rc = ibv_post_recv(c->qps[q], wr, &bad);
    if (rc != 0) {
      ib_comm_fail(c, STRAND_SYSTEM_ERROR, "ibv_post_recv on QP %u failed (%s)",
                   c->qps[q]->qp_num, strerror(rc > 0 ? rc : errno));
      return STRAND_SYSTEM_ERROR;
    }
    count -= k;
  }
  return STRAND_SUCCESS;
}

static const char *wc_hint(enum ibv_wc_status s) {
  switch (s) {
  case IBV_WC_RETRY_EXC_ERR:
    return "the peer did not acknowledge: check that it is alive, the fabric (link, switch), "
           "NCCL_IB_GID_INDEX / NCCL_IB_ROCE_VERSION_NUM (both ends must route the same way) and "
           "NCCL_IB_TIMEOUT / NCCL_IB_RETRY_CNT";
  case IBV_WC_RNR_RETRY_EXC_ERR:
    return "the peer had no receive posted for too long: it is stuck or gone";
  case IBV_WC_REM_ACCESS_ERR:
    return "the peer refused the RDMA access (bad rkey or out-of-bounds address): a registration "
           "released while in use on the remote side, or mismatched plugin versions";
  case IBV_WC_REM_INV_REQ_ERR:
  case IBV_WC_REM_OP_ERR:
    return "the peer's QP rejected the request: check that both ends run the same strand-ib";
  case IBV_WC_LOC_PROT_ERR:
  case IBV_WC_LOC_LEN_ERR:
  case IBV_WC_LOC_ACCESS_ERR:
    return "a local buffer is not covered by its registration (regMr range vs. the buffer "
           "passed to isend/irecv)";
  case IBV_WC_WR_FLUSH_ERR:
    return "the QP was already in the error state (see the first error reported)";
  default:
    return "check the fabric and dmesg";
  }
}

static void finish_group(ib_comm_t *c, int slot) {
  ib_group_t *g = &c->groups[slot];
  for (int i = 0; i < g->n; i++) {
    ib_req_t *r = g->reqs[i];
    if (!r || r->kind != IB_REQ_SEND) continue;
    r->result = g->err == IB_SIZES_OK ? STRAND_SUCCESS : STRAND_INVALID_USAGE;
    r->done = true;
  }
  g->active = false;
  g->posted = false;
}

static void finish_recv(ib_comm_t *c, ib_req_t *r, int slot) {
  const ib_cts_t *posted = &c->ctrl->cts_out[slot];
  if (r->imm_inline) {
    r->sizes[0] = (int)r->imm_size;
    r->result = STRAND_SUCCESS;
  } else {
    const ib_sizes_t *s = &c->ctrl->sizes_in[slot];
    if (s->seq != r->seq + 1 || s->n != (uint32_t)r->n) {
      ib_comm_fail(c, STRAND_INTERNAL_ERROR,
                   "receive %llu completed without its sizes record (seq %llu, n %u): protocol "
                   "error, are both ends the same strand-ib?",
                   (unsigned long long)r->seq, (unsigned long long)s->seq, s->n);
      r->result = STRAND_INTERNAL_ERROR;
    } else if (s->err != IB_SIZES_OK) {
      for (int i = 0; i < r->n; i++)
        if (s->sizes[i] > posted->elems[i].size)
          STRAND_WARN("recv from %s: the peer sent %lld bytes (tag %d) into a %lld-byte receive; "
                      "nothing was written: the sender and receiver disagree on the message size",
                      c->peer_str, (long long)s->sizes[i], posted->elems[i].tag,
                      (long long)posted->elems[i].size);
      r->result = STRAND_REMOTE_ERROR;
      for (int i = 0; i < r->n; i++) r->sizes[i] = 0;
    } else {
      for (int i = 0; i < r->n; i++) r->sizes[i] = (int)s->sizes[i];
      r->result = STRAND_SUCCESS;
    }
  }
  r->done = true;
}

static void on_wc(ib_comm_t *c, const struct ibv_wc *wc) {
  int kind = WR_KIND(wc->wr_id);
  if (wc->status != IBV_WC_SUCCESS) {
    if (kind == WR_FLUSH) c->freqs[WR_A(wc->wr_id) % IB_FIFO_SLOTS].done = true;
    ib_comm_fail(c, STRAND_REMOTE_ERROR,
                 "work completion error '%s' (status %d, vendor error %#x) on QP %u: %s",
                 ibv.wc_status_str(wc->status), (int)wc->status, wc->vendor_err, wc->qp_num,
                 wc_hint(wc->status));
    return;
  }
  switch (kind) {
  case WR_GROUP: {
    ib_group_t *g = &c->groups[WR_A(wc->wr_id) % IB_FIFO_SLOTS];
    if (g->active && --g->pending == 0) finish_group(c, WR_A(wc->wr_id) % IB_FIFO_SLOTS);
    break;
  }
  case WR_RECV: {
    int q = WR_B(wc->wr_id);
    uint32_t imm = ntohl(wc->imm_data);
    int slot = (int)IB_IMM_SLOT(imm);
    ib_req_t *r = &c->rreqs[slot];
    if (!(wc->wc_flags & IBV_WC_WITH_IMM) || r->kind != IB_REQ_RECV || r->done) {
      ib_comm_fail(c, STRAND_INTERNAL_ERROR,
                   "write-with-immediate %#x for FIFO slot %d, which has no receive posted: "
                   "protocol error",
                   imm, slot);
      return;
    }
    r->imm_need = (int)IB_IMM_NQPS(imm);
    r->imm_got++;
    if (IB_IMM_INLINE(imm)) {
      r->imm_inline = true;
      r->imm_size = IB_IMM_SIZE(imm);
    }
    if (r->imm_got >= r->imm_need) finish_recv(c, r, slot);
    if (q < c->nqps) ib_post_imm_recvs(c, q, 1);
    break;
  }
  case WR_FLUSH:
    c->freqs[WR_A(wc->wr_id) % IB_FIFO_SLOTS].done = true;
    break;
  default: /* WR_CTS: nothing to do once it is out */
    break;
  }
}

static void progress(ib_comm_t *c) {
  struct ibv_wc wc[CQ_BATCH];
  for (int r = 0; r < c->nrails; r++) {
    for (int b = 0; b < CQ_MAX_BATCHES; b++) {
      int n = ibv_poll_cq(c->rails[r].cq, CQ_BATCH, wc);
      if (n < 0) {
        ib_comm_fail(c, STRAND_SYSTEM_ERROR, "ibv_poll_cq failed (%d)", n);
        return;
      }
      for (int i = 0; i < n; i++) on_wc(c, &wc[i]);
      if (n < CQ_BATCH) break;
    }
  }
}

/* The OOB socket is closed by the peer when its process exits or it closes the comm: with
 * requests still pending, that is an error once the grace period has let in-flight completions
 * arrive. Checked every LIVENESS_PERIOD_MS only (a syscall). */
static void check_liveness(ib_comm_t *c, bool waiting) {
  uint64_t now = strand_now_ms();
  if ((c->outstanding == 0 && !waiting) || now < c->next_liveness_ms || c->fd < 0) return;
  c->next_liveness_ms = now + LIVENESS_PERIOD_MS;
  if (c->peer_closed_ms == 0) {
    char b;
    ssize_t n = recv(c->fd, &b, 1, MSG_PEEK | MSG_DONTWAIT);
    if (n > 0 || (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))) return;
    c->peer_closed_ms = now;
  }
  if (now - c->peer_closed_ms >= (uint64_t)ib_params.peer_grace_ms)
    ib_comm_fail(c, STRAND_REMOTE_ERROR,
                 "the peer closed its connection with %d request(s) pending (its process exited "
                 "or it closed the comm)",
                 c->outstanding + (waiting ? 1 : 0));
}

static void check_ports(ib_comm_t *c) {
  for (int r = 0; r < c->nrails; r++) {
    ib_dev_t *d = c->rails[r].dev;
    if (atomic_load(&d->port_down))
      ib_comm_fail(c, STRAND_REMOTE_ERROR, "port %s is down (async event): check the link", d->name);
    else if (atomic_load(&d->hca->fatal))
      ib_comm_fail(c, STRAND_REMOTE_ERROR, "device %s had a fatal error: check dmesg",
                   d->hca->name);
  }
}

/* ---------------------------------------------------------------------------------------------
 * Send side
 * ------------------------------------------------------------------------------------------- */

static void post_group(ib_comm_t *c, int slot) {
  ib_group_t *g = &c->groups[slot];
  const ib_cts_t *cts = &c->ctrl->fifo[slot];
  size_t total = 0;
  for (int i = 0; i < g->n; i++) total += g->size[i];
  bool err = g->err != IB_SIZES_OK;
  bool inl = g->n == 1 && !err && g->size[0] <= IB_IMM_INLINE_MAX;
  int nused = 1;
  if (!err && c->nqps > 1) {
    size_t want = (total + (size_t)ib_params.split_min - 1) / (size_t)ib_params.split_min;
    nused = want < 1 ? 1 : want > (size_t)c->nqps ? c->nqps : (int)want;
  }
  int start = c->qp_rr;
  c->qp_rr = (start + nused) % c->nqps;
  if (!inl) {
    ib_sizes_t *s = &c->ctrl->sizes_out[slot];
    memset(s, 0, sizeof *s);
    for (int i = 0; i < g->n; i++) s->sizes[i] = (int64_t)g->size[i];
    s->err = g->err;
    s->n = (uint32_t)g->n;
    s->seq = g->seq + 1;
  }
  uint32_t imm = IB_IMM_MAKE(slot, nused, inl ? 1 : 0, inl ? g->size[0] : 0);
  g->pending = nused;
  g->posted = true;
  for (int k = 0; k < nused; k++) {
    int q = (start + k) % c->nqps;
    int rail = c->qp_rail[q];
    int prail = q % c->peer.nrails;
    struct ibv_send_wr wr[IB_MAX_RECVS + 2], *bad = NULL;
    struct ibv_sge sge[IB_MAX_RECVS + 2];
    int nw = 0;
    memset(wr, 0, sizeof wr);
    if (k == 0 && !inl) {
      sge[nw] = (struct ibv_sge){(uint64_t)(uintptr_t)&c->ctrl->sizes_out[slot],
                                 sizeof(ib_sizes_t), c->rails[rail].ctrl_mr->lkey};
      wr[nw].opcode = IBV_WR_RDMA_WRITE;
      wr[nw].wr.rdma.remote_addr = c->peer.ctrl_addr + (uint64_t)slot * sizeof(ib_sizes_t);
      wr[nw].wr.rdma.rkey = c->peer.qps[q].ctrl_rkey;
      nw++;
    }
    for (int i = 0; i < g->n && !err; i++) {
      size_t len = g->size[i];
      size_t chunk = (len + (size_t)nused - 1) / (size_t)nused;
      size_t off = (size_t)k * chunk;
      if (off >= len) continue;
      size_t clen = len - off < chunk ? len - off : chunk;
      sge[nw] = (struct ibv_sge){(uint64_t)(uintptr_t)g->data[i] + off, (uint32_t)clen,
                                 g->mh[i]->e[rail]->mr->lkey};
      wr[nw].opcode = IBV_WR_RDMA_WRITE;
      wr[nw].wr.rdma.remote_addr = cts->elems[i].addr + off;
      wr[nw].wr.rdma.rkey = cts->elems[i].rkey[prail];
      nw++;
    }
    for (int w = 0; w < nw; w++) {
      wr[w].sg_list = &sge[w];
      wr[w].num_sge = 1;
      wr[w].next = w + 1 < nw ? &wr[w + 1] : NULL;
    }
    if (nw == 0) { /* nothing to write on this QP: the immediate alone */
      wr[0].opcode = IBV_WR_RDMA_WRITE;
      wr[0].num_sge = 0;
      wr[0].wr.rdma.remote_addr = c->peer.ctrl_addr;
      wr[0].wr.rdma.rkey = c->peer.qps[q].ctrl_rkey;
      nw = 1;
    }
    struct ibv_send_wr *last = &wr[nw - 1];
    last->opcode = IBV_WR_RDMA_WRITE_WITH_IMM;
    last->imm_data = htonl(imm);
    last->send_flags = IBV_SEND_SIGNALED;
    last->wr_id = WR_ID(WR_GROUP, slot, k);
    int rc = ibv_post_send(c->qps[q], wr, &bad);
    if (rc != 0) {
      ib_comm_fail(c, STRAND_SYSTEM_ERROR, "ibv_post_send on QP %u failed (%s)",
                   c->qps[q]->qp_num, strerror(rc > 0 ? rc : errno));
      return;
    }
  }
}

static ib_req_t *sreq_get(ib_comm_t *c) {
  for (int k = 0; k < IB_SEND_REQS; k++) {
    int i = (c->sreq_cursor + k) % IB_SEND_REQS;
    if (c->sreqs[i].kind == IB_REQ_FREE) {
      c->sreq_cursor = (i + 1) % IB_SEND_REQS;
      return &c->sreqs[i];
    }
  }
  return NULL;
}

/* Profiler START of one message: the IB layout (strand/profiler.h). wr_id/opcode name the work
 * request that carries it; the QP is the connection's first (the group may spread over several). */
static void prof_start(const ib_comm_t *c, void **event, void *parent, uint64_t wr_id, int opcode,
                       size_t length) {
  strand_profiler_ib_descr_v1_t d = {.type = STRAND_PROFILE_QP};
  d.qp.device = c->devidx;
  d.qp.wr_id = wr_id;
  d.qp.opcode = opcode;
  d.qp.qpNum = (int)c->qps[0]->qp_num;
  d.qp.length = length;
  strand_profiler_start(event, parent, STRAND_PROFILER_NET_ID_IB, &d);
}

strand_result_t ib_isend(void *sendComm, void *data, size_t size, int tag, void *mhandle,
                         void *phandle, void **request) {
  ib_comm_t *c = sendComm;
  if (!c || !request || c->kind != IB_COMM_SEND) return STRAND_INVALID_ARGUMENT;
  *request = NULL;
  int failed = atomic_load(&c->failed);
  if (failed) return (strand_result_t)failed;
  if (size > INT_MAX || (size > 0 && !mhandle)) {
    STRAND_WARN("isend to %s: %s", c->peer_str,
                size > INT_MAX ? "size above INT_MAX" : "no memory handle for a non-empty send");
    return STRAND_INVALID_ARGUMENT;
  }
  int slot = (int)(c->cts_seq % IB_FIFO_SLOTS);
  const ib_cts_t *cts = &c->ctrl->fifo[slot];
  ib_group_t *g = &c->groups[slot];
  uint64_t seen = __atomic_load_n(&cts->seq, __ATOMIC_ACQUIRE);
  if (seen != c->cts_seq + 1 || (g->active && g->seq != c->cts_seq)) {
    /* No clear-to-send yet, or its slot still busy: reap completions and retry later. A sender
     * waiting here has no request test() could fail, so a dead receiver is noticed here. */
    progress(c);
    check_ports(c);
    check_liveness(c, true);
    return (strand_result_t)atomic_load(&c->failed);
  }
  if (!g->active) {
    if (cts->n < 1 || cts->n > IB_MAX_RECVS) {
      ib_comm_fail(c, STRAND_INTERNAL_ERROR, "clear-to-send with %u receives: protocol error",
                   cts->n);
      return STRAND_INTERNAL_ERROR;
    }
    memset(g, 0, sizeof *g);
    g->active = true;
    g->seq = c->cts_seq;
    g->n = (int)cts->n;
  }
  int i = -1;
  for (int k = 0; k < g->n && i < 0; k++)
    if (cts->elems[k].tag == tag && !g->reqs[k]) i = k;
  if (i < 0) {
    STRAND_WARN("isend to %s: tag %d matches none of the %d receive(s) the peer posted next "
                "(first tag %d): sender and receiver disagree on the message order",
                c->peer_str, tag, g->n, cts->elems[0].tag);
    return STRAND_INVALID_USAGE;
  }
  ib_req_t *r = sreq_get(c);
  if (!r) return STRAND_SUCCESS;
  memset(r, 0, sizeof *r);
  r->kind = IB_REQ_SEND;
  r->comm = c;
  r->n = 1;
  r->group = slot;
  r->sizes[0] = (int)size;
  g->reqs[i] = r;
  g->data[i] = data;
  g->size[i] = size;
  g->mh[i] = mhandle;
  if ((int64_t)size > cts->elems[i].size) {
    STRAND_WARN("isend to %s: %zu bytes (tag %d) into a %lld-byte receive: the receiver posted "
                "a smaller buffer; nothing is written and both ends report an error",
                c->peer_str, size, tag, (long long)cts->elems[i].size);
    g->err = IB_SIZES_TOO_BIG;
  }
  g->matched++;
  c->outstanding++;
  if (strand_profiler_wanted(phandle))
    prof_start(c, &r->prof[0], phandle, WR_ID(WR_GROUP, slot, 0), IBV_WR_RDMA_WRITE_WITH_IMM, size);
  if (g->matched == g->n) {
    post_group(c, slot);
    c->cts_seq++;
  }
  *request = r;
  return STRAND_SUCCESS;
}

/* ---------------------------------------------------------------------------------------------
 * Receive side
 * ------------------------------------------------------------------------------------------- */

strand_result_t ib_irecv(void *recvComm, int n, void **data, size_t *sizes, int *tags,
                         void **mhandles, void **phandles, void **request) {
  ib_comm_t *c = recvComm;
  if (!c || !request || c->kind != IB_COMM_RECV || n < 1 || n > IB_MAX_RECVS || !data || !sizes ||
      !tags || !mhandles)
    return STRAND_INVALID_ARGUMENT;
  *request = NULL;
  int failed = atomic_load(&c->failed);
  if (failed) return (strand_result_t)failed;
  int slot = (int)(c->recv_seq % IB_FIFO_SLOTS);
  ib_req_t *r = &c->rreqs[slot];
  if (r->kind != IB_REQ_FREE) {
    progress(c);
    return STRAND_SUCCESS;
  }
  ib_cts_t *cts = &c->ctrl->cts_out[slot];
  memset(cts, 0, sizeof *cts);
  for (int i = 0; i < n; i++) {
    ib_mh_t *mh = mhandles[i];
    if (sizes[i] > INT_MAX || (sizes[i] > 0 && !mh)) {
      STRAND_WARN("irecv from %s: element %d: %s", c->peer_str, i,
                  sizes[i] > INT_MAX ? "size above INT_MAX" : "no memory handle");
      return STRAND_INVALID_ARGUMENT;
    }
    cts->elems[i].addr = (uint64_t)(uintptr_t)data[i];
    cts->elems[i].size = (int64_t)sizes[i];
    cts->elems[i].tag = tags[i];
    for (int k = 0; k < c->nrails && mh; k++) cts->elems[i].rkey[k] = mh->e[k]->mr->rkey;
  }
  cts->n = (uint32_t)n;
  cts->seq = c->recv_seq + 1;
  struct ibv_sge sge = {(uint64_t)(uintptr_t)cts, sizeof *cts, c->rails[c->qp_rail[0]].ctrl_mr->lkey};
  struct ibv_send_wr wr, *bad = NULL;
  memset(&wr, 0, sizeof wr);
  wr.wr_id = WR_ID(WR_CTS, slot, 0);
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.opcode = IBV_WR_RDMA_WRITE;
  wr.send_flags = IBV_SEND_SIGNALED;
  wr.wr.rdma.remote_addr = c->peer.ctrl_addr + (uint64_t)slot * sizeof(ib_cts_t);
  wr.wr.rdma.rkey = c->peer.qps[0].ctrl_rkey;
  int rc = ibv_post_send(c->qps[0], &wr, &bad);
  if (rc != 0) {
    ib_comm_fail(c, STRAND_SYSTEM_ERROR, "ibv_post_send (clear-to-send) on QP %u failed (%s)",
                 c->qps[0]->qp_num, strerror(rc > 0 ? rc : errno));
    return STRAND_SYSTEM_ERROR;
  }
  memset(r, 0, sizeof *r);
  r->kind = IB_REQ_RECV;
  r->comm = c;
  r->n = n;
  r->seq = c->recv_seq;
  c->recv_seq++;
  c->outstanding++;
  if (phandles != NULL)
    for (int i = 0; i < n; i++)
      if (strand_profiler_wanted(phandles[i]))
        prof_start(c, &r->prof[i], phandles[i], wr.wr_id, IBV_WR_RDMA_WRITE, sizes[i]);
  *request = r;
  return STRAND_SUCCESS;
}

strand_result_t ib_iflush(void *recvComm, int n, void **data, int *sizes, void **mhandles,
                          void **request) {
  ib_comm_t *c = recvComm;
  if (!c || !request || c->kind != IB_COMM_RECV || n < 0 || n > IB_MAX_RECVS)
    return STRAND_INVALID_ARGUMENT;
  *request = NULL;
  /* Host memory is coherent once the write-with-immediate completed: nothing to flush. GPU memory
   * written by the NIC (GPUDirect) is not, for the GPU, until a read through the same path has
   * pushed the writes out (PCIe orders the read behind them): one RDMA READ of the last buffer
   * into host memory. STRAND_IB_FORCE_FLUSH reads for host buffers too (tests the path). */
  int last = -1;
  for (int i = 0; i < n; i++)
    if (sizes && sizes[i] > 0 && data && data[i] && mhandles && mhandles[i] &&
        (ib_params.force_flush || ((ib_mh_t *)mhandles[i])->gpu))
      last = i;
  if (last < 0) return STRAND_SUCCESS;
  int failed = atomic_load(&c->failed);
  if (failed) return (strand_result_t)failed;
  if (!c->flush_qp && ib_flush_qp_open(c) != STRAND_SUCCESS) {
    ib_comm_fail(c, STRAND_SYSTEM_ERROR, "could not connect the loopback QP that iflush reads "
                                         "through");
    return STRAND_SYSTEM_ERROR;
  }
  int idx = -1;
  for (int k = 0; k < IB_FIFO_SLOTS && idx < 0; k++)
    if (c->freqs[k].kind == IB_REQ_FREE) idx = k;
  if (idx < 0) {
    STRAND_WARN("iflush on %s: more than %d flushes in flight", c->peer_str, IB_FIFO_SLOTS);
    return STRAND_INTERNAL_ERROR;
  }
  ib_mh_t *mh = mhandles[last];
  struct ibv_sge sge = {(uint64_t)(uintptr_t)c->ctrl->flush_buf, 1, c->rails[0].ctrl_mr->lkey};
  struct ibv_send_wr wr, *bad = NULL;
  memset(&wr, 0, sizeof wr);
  wr.wr_id = WR_ID(WR_FLUSH, idx, 0);
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.opcode = IBV_WR_RDMA_READ;
  wr.send_flags = IBV_SEND_SIGNALED;
  wr.wr.rdma.remote_addr = (uint64_t)(uintptr_t)data[last];
  wr.wr.rdma.rkey = mh->e[0]->mr->rkey;
  int rc = ibv_post_send(c->flush_qp, &wr, &bad);
  if (rc != 0) {
    ib_comm_fail(c, STRAND_SYSTEM_ERROR, "ibv_post_send (flush read) failed (%s)",
                 strerror(rc > 0 ? rc : errno));
    return STRAND_SYSTEM_ERROR;
  }
  ib_req_t *r = &c->freqs[idx];
  memset(r, 0, sizeof *r);
  r->kind = IB_REQ_FLUSH;
  r->comm = c;
  r->n = 0;
  c->outstanding++;
  *request = r;
  return STRAND_SUCCESS;
}

strand_result_t ib_test(void *request, int *done, int *sizes) {
  ib_req_t *r = request;
  if (!r || !done) return STRAND_INVALID_ARGUMENT;
  *done = 0;
  if (r->kind == IB_REQ_FREE) {
    if (!r->reported) return STRAND_INVALID_ARGUMENT;
    /* Tested again after done with nothing posted in between: repeat the answer. */
    *done = 1;
    if (sizes)
      for (int i = 0; i < r->n; i++) sizes[i] = r->sizes[i];
    return r->result;
  }
  ib_comm_t *c = r->comm;
  if (!r->done) {
    progress(c);
    if (!r->done) {
      check_ports(c);
      check_liveness(c, false);
      int failed = atomic_load(&c->failed);
      if (!failed) return STRAND_SUCCESS;
      r->result = (strand_result_t)failed;
      for (int i = 0; i < r->n; i++) r->sizes[i] = 0;
      if (r->kind == IB_REQ_SEND && c->groups[r->group].active) {
        /* The group will never complete on a failed comm; forget the request in it. */
        ib_group_t *g = &c->groups[r->group];
        for (int i = 0; i < g->n; i++)
          if (g->reqs[i] == r) g->reqs[i] = NULL;
      }
      r->kind = IB_REQ_FREE;
      r->reported = true;
      c->outstanding--;
      return r->result;
    }
  }
  *done = 1;
  if (sizes)
    for (int i = 0; i < r->n; i++) sizes[i] = r->sizes[i];
  for (int i = 0; i < r->n; i++) strand_profiler_stop(&r->prof[i]);
  r->kind = IB_REQ_FREE;
  r->reported = true;
  c->outstanding--;
  return r->result;
}
