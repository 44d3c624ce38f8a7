/* softverbs queue pairs: creation, the RC state machine with the attribute masks a real device
 * requires, posting, and completion generation (success, errors, flushes). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "sv.h"

SV_EXPORT struct ibv_qp *ibv_create_qp(struct ibv_pd *pd, struct ibv_qp_init_attr *init)
{
  sv_context_t *c = sv_ctx(pd->context);
  if (init->qp_type != IBV_QPT_RC) {
    sv_report_refusal("ibv_create_qp: QP type %d refused (only RC is emulated)", (int)init->qp_type);
    errno = EOPNOTSUPP; /* only RC is emulated */
    return NULL;
  }
  if (init->srq || !init->send_cq || !init->recv_cq || init->cap.max_send_wr > SV_MAX_QP_WR ||
      init->cap.max_recv_wr > SV_MAX_QP_WR || init->cap.max_send_sge > SV_MAX_SGE ||
      init->cap.max_recv_sge > SV_MAX_SGE || init->cap.max_inline_data > SV_MAX_INLINE) {
    errno = EINVAL;
    return NULL;
  }
  sv_qp_t *qp = calloc(1, sizeof(*qp));
  if (!qp) {
    errno = ENOMEM;
    return NULL;
  }
  qp->cap = init->cap;
  if (qp->cap.max_send_wr == 0) qp->cap.max_send_wr = 1;
  if (qp->cap.max_recv_wr == 0) qp->cap.max_recv_wr = 1;
  if (qp->cap.max_send_sge == 0) qp->cap.max_send_sge = 1;
  if (qp->cap.max_recv_sge == 0) qp->cap.max_recv_sge = 1;
  qp->sq_cap = qp->cap.max_send_wr;
  qp->rq_cap = qp->cap.max_recv_wr;
  qp->sq = calloc(qp->sq_cap, sizeof(*qp->sq));
  qp->rq = calloc(qp->rq_cap, sizeof(*qp->rq));
  if (!qp->sq || !qp->rq) {
    free(qp->sq);
    free(qp->rq);
    free(qp);
    errno = ENOMEM;
    return NULL;
  }
  qp->sctx = c;
  qp->sq_sig_all = init->sq_sig_all != 0;
  qp->qp.context = pd->context;
  qp->qp.qp_context = init->qp_context;
  qp->qp.pd = pd;
  qp->qp.send_cq = init->send_cq;
  qp->qp.recv_cq = init->recv_cq;
  qp->qp.qp_type = IBV_QPT_RC;
  qp->qp.state = IBV_QPS_RESET;
  pthread_mutex_init(&qp->qp.mutex, NULL);
  pthread_cond_init(&qp->qp.cond, NULL);
  pthread_mutex_lock(&c->lock);
  uint32_t idx = 0;
  while (idx < SV_QPS_PER_CTX && c->qps[idx]) idx++;
  /* each listener numbers 256 QPs: open another one when the known blocks are full */
  if (idx < SV_QPS_PER_CTX && idx / SV_QPS_PER_LISTENER >= (uint32_t)c->nlisteners &&
      sv_transport_add_listener(c) != 0)
    idx = SV_QPS_PER_CTX;
  if (idx == SV_QPS_PER_CTX) {
    pthread_mutex_unlock(&c->lock);
    free(qp->sq);
    free(qp->rq);
    free(qp);
    errno = ENOMEM; /* as a device out of QPs */
    return NULL;
  }
  qp->index = idx;
  qp->qp.qp_num = ((uint32_t)c->listen_port[idx / SV_QPS_PER_LISTENER] << 8) |
                  (idx % SV_QPS_PER_LISTENER);
  qp->qp.handle = idx;
  sv_async_obj_register(c, &qp->async); /* before the progress thread can raise an event for it */
  c->qps[idx] = qp;
  pthread_mutex_unlock(&c->lock);
  init->cap = qp->cap;
  return &qp->qp;
}

/* ---------------------------------------------------------------- state machine */
#define M_PATH (IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |                   \
                IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER)
#define M_RTS (IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN |              \
               IBV_QP_MAX_QP_RD_ATOMIC)
#define M_RTS_OPT (IBV_QP_CUR_STATE | IBV_QP_ACCESS_FLAGS | IBV_QP_MIN_RNR_TIMER |                 \
                   IBV_QP_ALT_PATH | IBV_QP_PATH_MIG_STATE)

/* Required and optional attribute masks of an RC transition (IB spec, "QP state transition
 * properties"); false when the transition does not exist. */
static bool transition_masks(enum ibv_qp_state cur, enum ibv_qp_state next, int *req, int *opt)
{
  *req = IBV_QP_STATE;
  *opt = IBV_QP_CUR_STATE;
  if (next == IBV_QPS_RESET || next == IBV_QPS_ERR) return true;
  switch (cur) {
  case IBV_QPS_RESET:
    if (next != IBV_QPS_INIT) return false;
    *req |= IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS;
    *opt = 0;
    return true;
  case IBV_QPS_INIT:
    if (next == IBV_QPS_INIT) {
      *opt |= IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS;
      return true;
    }
    if (next != IBV_QPS_RTR) return false;
    *req |= M_PATH;
    *opt = IBV_QP_ALT_PATH | IBV_QP_ACCESS_FLAGS | IBV_QP_PKEY_INDEX;
    return true;
  case IBV_QPS_RTR:
    if (next != IBV_QPS_RTS) return false;
    *req |= M_RTS;
    *opt = M_RTS_OPT;
    return true;
  case IBV_QPS_RTS:
    if (next != IBV_QPS_RTS) return false;
    *opt = M_RTS_OPT;
    return true;
  default:
    return false; /* SQD/SQE are not emulated; ERR leaves only to RESET */
  }
}

static int check_values(sv_context_t *c, struct ibv_qp_attr *a, int mask)
{
  int nports = c->cfg->nports;
  if ((mask & IBV_QP_PORT) && (a->port_num < 1 || a->port_num > nports)) return EINVAL;
  if ((mask & IBV_QP_PKEY_INDEX) && a->pkey_index != 0) return EINVAL;
  if ((mask & IBV_QP_ACCESS_FLAGS) &&
      (a->qp_access_flags & ~(unsigned)(IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
                                       IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC)))
    return EINVAL;
  if (mask & IBV_QP_AV) {
    const struct ibv_ah_attr *ah = &a->ah_attr;
    /* RoCE: every packet carries a GRH; the destination GID must be an IPv4-mapped one. */
    static const uint8_t v4prefix[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
    if (!ah->is_global || ah->grh.sgid_index >= SV_GID_TBL_LEN ||
        memcmp(ah->grh.dgid.raw, v4prefix, sizeof(v4prefix)) != 0)
      return EINVAL;
    if (ah->port_num && ah->port_num > nports) return EINVAL;
  }
  if ((mask & IBV_QP_PATH_MTU) && (a->path_mtu < IBV_MTU_256 || a->path_mtu > IBV_MTU_4096))
    return EINVAL;
  if ((mask & IBV_QP_DEST_QPN) && a->dest_qp_num >= (1u << 24)) return EINVAL;
  if ((mask & IBV_QP_MAX_DEST_RD_ATOMIC) && a->max_dest_rd_atomic > SV_MAX_RD_ATOMIC)
    return EINVAL;
  if ((mask & IBV_QP_MAX_QP_RD_ATOMIC) && a->max_rd_atomic > SV_MAX_RD_ATOMIC) return EINVAL;
  if ((mask & IBV_QP_MIN_RNR_TIMER) && a->min_rnr_timer > 31) return EINVAL;
  if ((mask & IBV_QP_TIMEOUT) && a->timeout > 31) return EINVAL;
  if ((mask & IBV_QP_RETRY_CNT) && a->retry_cnt > 7) return EINVAL;
  if ((mask & IBV_QP_RNR_RETRY) && a->rnr_retry > 7) return EINVAL;
  if ((mask & IBV_QP_SQ_PSN) && a->sq_psn >= (1u << 24)) return EINVAL;
  if ((mask & IBV_QP_RQ_PSN) && a->rq_psn >= (1u << 24)) return EINVAL;
  return 0;
}

static void copy_attrs(sv_qp_t *qp, const struct ibv_qp_attr *a, int mask)
{
  struct ibv_qp_attr *s = &qp->attr;
  if (mask & IBV_QP_PORT) s->port_num = a->port_num;
  if (mask & IBV_QP_PKEY_INDEX) s->pkey_index = a->pkey_index;
  if (mask & IBV_QP_ACCESS_FLAGS) s->qp_access_flags = a->qp_access_flags;
  if (mask & IBV_QP_AV) s->ah_attr = a->ah_attr;
  if (mask & IBV_QP_PATH_MTU) s->path_mtu = a->path_mtu;
  if (mask & IBV_QP_DEST_QPN) s->dest_qp_num = a->dest_qp_num;
  if (mask & IBV_QP_RQ_PSN) s->rq_psn = a->rq_psn;
  if (mask & IBV_QP_SQ_PSN) s->sq_psn = a->sq_psn;
  if (mask & IBV_QP_MAX_DEST_RD_ATOMIC) s->max_dest_rd_atomic = a->max_dest_rd_atomic;
  if (mask & IBV_QP_MAX_QP_RD_ATOMIC) s->max_rd_atomic = a->max_rd_atomic;
  if (mask & IBV_QP_MIN_RNR_TIMER) s->min_rnr_timer = a->min_rnr_timer;
  if (mask & IBV_QP_TIMEOUT) s->timeout = a->timeout;
  if (mask & IBV_QP_RETRY_CNT) s->retry_cnt = a->retry_cnt;
  if (mask & IBV_QP_RNR_RETRY) s->rnr_retry = a->rnr_retry;
  if (mask & IBV_QP_ALT_PATH) {
    s->alt_ah_attr = a->alt_ah_attr;
    s->alt_pkey_index = a->alt_pkey_index;
    s->alt_port_num = a->alt_port_num;
    s->alt_timeout = a->alt_timeout;
  }
  if (mask & IBV_QP_PATH_MIG_STATE) s->path_mig_state = a->path_mig_state;
}

static void reset_queues(sv_qp_t *qp)
{
  qp->sq_head = qp->sq_tx = qp->sq_tail = 0;
  qp->rq_head = qp->rq_tail = 0;
  qp->tx_retries = qp->rnr_count = 0;
  qp->tx_started = qp->tx_delayed = false;
  qp->ops_done = 0;
}

SV_EXPORT int ibv_modify_qp(struct ibv_qp *ibqp, struct ibv_qp_attr *attr, int mask)
{
  sv_qp_t *qp = sv_qp(ibqp);
  sv_context_t *c = qp->sctx;
  pthread_mutex_lock(&c->lock);
  enum ibv_qp_state cur = ibqp->state;
  if ((mask & IBV_QP_CUR_STATE) && attr->cur_qp_state != cur) {
    pthread_mutex_unlock(&c->lock);
    return EINVAL;
  }
  enum ibv_qp_state next = (mask & IBV_QP_STATE) ? attr->qp_state : cur;
  int req = 0, opt = 0;
  bool exists = transition_masks(cur, next, &req, &opt);
  if (!(mask & IBV_QP_STATE)) req &= ~IBV_QP_STATE; /* attribute-only modify */
  int rc = 0;
  if (!exists || (mask & req) != req || (mask & ~(req | opt | IBV_QP_STATE)) != 0)
    rc = EINVAL;
  if (!rc) rc = check_values(c, attr, mask);
  if (!rc && (mask & IBV_QP_AV) && attr->ah_attr.port_num == 0 && !(mask & IBV_QP_PORT) &&
      qp->attr.port_num == 0)
    rc = EINVAL;
  if (rc) {
    SV_TRACE("modify_qp %#x: %d -> %d with mask %#x refused", ibqp->qp_num, (int)cur, (int)next,
             mask);
    pthread_mutex_unlock(&c->lock);
    return rc;
  }
  copy_attrs(qp, attr, mask);
  if (next != cur || (mask & IBV_QP_STATE)) {
    if (next == IBV_QPS_RESET) {
      sv_transport_qp_close(qp);
      ibqp->state = IBV_QPS_RESET;
      reset_queues(qp);
    } else if (next == IBV_QPS_ERR) {
      sv_qp_set_error(qp, IBV_WC_WR_FLUSH_ERR);
    } else {
      ibqp->state = next;
      if (next == IBV_QPS_RTR) {
        memset(&qp->peer, 0, sizeof(qp->peer));
        qp->peer.sin_family = AF_INET;
        memcpy(&qp->peer.sin_addr.s_addr, &qp->attr.ah_attr.grh.dgid.raw[12], 4);
        qp->peer.sin_port = htons((uint16_t)(qp->attr.dest_qp_num >> 8));
      }
      if (next == IBV_QPS_RTS && cur == IBV_QPS_RTR) sv_transport_qp_rts(qp);
    }
  }
  qp->attr.qp_state = ibqp->state;
  pthread_mutex_unlock(&c->lock);
  return 0;
}

SV_EXPORT int ibv_query_qp(struct ibv_qp *ibqp, struct ibv_qp_attr *attr, int mask,
                           struct ibv_qp_init_attr *init)
{
  sv_qp_t *qp = sv_qp(ibqp);
  (void)mask; /* everything is always filled in */
  pthread_mutex_lock(&qp->sctx->lock);
  *attr = qp->attr;
  attr->qp_state = ibqp->state;
  attr->cur_qp_state = ibqp->state;
  attr->cap = qp->cap;
  if (!attr->path_mtu) attr->path_mtu = IBV_MTU_1024;
  pthread_mutex_unlock(&qp->sctx->lock);
  if (init) {
    memset(init, 0, sizeof(*init));
    init->qp_context = ibqp->qp_context;
    init->send_cq = ibqp->send_cq;
    init->recv_cq = ibqp->recv_cq;
    init->cap = qp->cap;
    init->qp_type = IBV_QPT_RC;
    init->sq_sig_all = qp->sq_sig_all;
  }
  return 0;
}

SV_EXPORT int ibv_destroy_qp(struct ibv_qp *ibqp)
{
  sv_qp_t *qp = sv_qp(ibqp);
  sv_context_t *c = qp->sctx;
  /* As rdma-core: wait until its async events are acknowledged (not under c->lock: the
   * application's event handler may call into the library). */
  sv_async_obj_retire(c, &qp->async, "ibv_destroy_qp");
  pthread_mutex_lock(&c->lock);
  sv_transport_qp_close(qp);
  c->qps[qp->index] = NULL;
  pthread_mutex_unlock(&c->lock);
  pthread_mutex_destroy(&ibqp->mutex);
  pthread_cond_destroy(&ibqp->cond);
  for (uint32_t i = 0; i < qp->sq_cap; i++) sv_gpu_stage_free(qp->sq[i].gpu);
  for (uint32_t i = 0; i < qp->rq_cap; i++) sv_gpu_stage_free(qp->rq[i].gpu);
  free(qp->sq);
  free(qp->rq);
  free(qp);
  return 0;
}

SV_EXPORT struct ibv_qp_ex *ibv_qp_to_qp_ex(struct ibv_qp *qp)
{
  (void)qp;
  sv_report_refusal("ibv_qp_to_qp_ex refused (extended QPs, the ibv_wr_* API, are not emulated)");
  errno = EOPNOTSUPP; /* the ibv_wr_* API needs an extended QP: not emulated */
  return NULL;
}

/* ---------------------------------------------------------------- completions */
static enum ibv_wc_opcode send_wc_opcode(enum ibv_wr_opcode op)
{
  switch (op) {
  case IBV_WR_RDMA_WRITE:
  case IBV_WR_RDMA_WRITE_WITH_IMM:
    return IBV_WC_RDMA_WRITE;
  case IBV_WR_RDMA_READ:
    return IBV_WC_RDMA_READ;
  case IBV_WR_ATOMIC_FETCH_AND_ADD:
    return IBV_WC_FETCH_ADD;
  case IBV_WR_ATOMIC_CMP_AND_SWP:
    return IBV_WC_COMP_SWAP;
  default:
    return IBV_WC_SEND;
  }
}

void sv_qp_complete_send(sv_qp_t *qp, uint64_t seq, enum ibv_wc_status status)
{
  sv_swqe_t *w = &qp->sq[seq % qp->sq_cap];
  if (status != IBV_WC_SUCCESS || w->signaled) {
    struct ibv_wc wc;
    memset(&wc, 0, sizeof(wc));
    wc.wr_id = w->wr_id;
    wc.status = status;
    wc.opcode = send_wc_opcode(w->op);
    wc.qp_num = qp->qp.qp_num;
    if (status == IBV_WC_SUCCESS && (w->op == IBV_WR_RDMA_READ || sv_wr_is_atomic(w->op)))
      wc.byte_len = (uint32_t)w->len; /* an atomic's is 8: the original value it returned */
    sv_cq_push(sv_cq(qp->qp.send_cq), &wc);
  }
  if (w->gpu) sv_gpu_stage_done(w->gpu);
  if (seq == qp->sq_head) qp->sq_head++;
  if (qp->sq_tx < qp->sq_head) {
    qp->sq_tx = qp->sq_head;
    qp->tx_started = qp->tx_delayed = false;
    qp->tx_retries = 0;
  }
}

static void flush_recv(sv_qp_t *qp)
{
  while (qp->rq_head < qp->rq_tail) {
    sv_rwqe_t *r = &qp->rq[qp->rq_head % qp->rq_cap];
    struct ibv_wc wc;
    memset(&wc, 0, sizeof(wc));
    wc.wr_id = r->wr_id;
    wc.status = IBV_WC_WR_FLUSH_ERR;
    wc.opcode = IBV_WC_RECV;
    wc.qp_num = qp->qp.qp_num;
    sv_cq_push(sv_cq(qp->qp.recv_cq), &wc);
    qp->rq_head++;
  }
}

void sv_qp_set_error(sv_qp_t *qp, enum ibv_wc_status head_status)
{
  if (qp->qp.state == IBV_QPS_RESET) return;
  if (qp->qp.state != IBV_QPS_ERR)
    SV_TRACE("QP %#x -> ERR (%s)", qp->qp.qp_num, ibv_wc_status_str(head_status));
  qp->qp.state = IBV_QPS_ERR;
  qp->attr.qp_state = IBV_QPS_ERR;
  sv_transport_qp_close(qp);
  if (qp->sq_head < qp->sq_tail && head_status != IBV_WC_WR_FLUSH_ERR)
    sv_qp_complete_send(qp, qp->sq_head, head_status);
  while (qp->sq_head < qp->sq_tail) sv_qp_complete_send(qp, qp->sq_head, IBV_WC_WR_FLUSH_ERR);
  flush_recv(qp);
}

uint64_t sv_qp_retry_bound_ns(const sv_qp_t *qp)
{
  /* Local ACK timeout = 4.096 us * 2^timeout (0: infinite), tried retry_cnt + 1 times. */
  if (qp->attr.timeout == 0) return UINT64_MAX;
  uint64_t t = 4096ull << qp->attr.timeout;
  return t * (qp->attr.retry_cnt + 1u);
}

/* ---------------------------------------------------------------- posting */
/* Resolves the SGE list of a WR into iovecs; a bad lkey becomes a completion error, as on a NIC
 * (the post itself succeeds). */
static enum ibv_wc_status resolve_sges(sv_context_t *c, struct ibv_pd *pd, const struct ibv_sge *sg,
                                       int n, int access, struct iovec *iov, uint64_t *len)
{
  *len = 0;
  enum ibv_wc_status st = IBV_WC_SUCCESS;
  for (int i = 0; i < n; i++) {
    iov[i].iov_base = (void *)(uintptr_t)sg[i].addr;
    iov[i].iov_len = sg[i].length;
    *len += sg[i].length;
    if (sg[i].length && st == IBV_WC_SUCCESS &&
        sv_mr_check(c, pd, sg[i].lkey, sg[i].addr, sg[i].length, access) != NULL)
      st = IBV_WC_LOC_PROT_ERR;
  }
  return st;
}

/* A send opcode that verbs defines but softverbs does not execute is the environment's limit, not
 * the caller's mistake: say so (STRAND_ENV_REFUSALS). A value verbs does not define is not. */
static void report_unemulated_opcode(enum ibv_wr_opcode op)
{
  switch (op) {
  case IBV_WR_SEND_WITH_INV:
  case IBV_WR_LOCAL_INV:
  case IBV_WR_BIND_MW:
  case IBV_WR_TSO:
  case IBV_WR_DRIVER1:
  case IBV_WR_ATOMIC_WRITE:
    sv_report_refusal("ibv_post_send: opcode %d refused (not emulated)", (int)op);
    break;
  default:
    break;
  }
}

/* An atomic WR: exactly one local SGE of 8 bytes, which receives the original value (so it needs
 * local write), as rxe demands at post time; the remote word's alignment is the responder's check
 * (a NAK, as on a wire). EINVAL for a malformed WR. */
static int prepare_atomic(sv_context_t *c, struct ibv_pd *pd, const struct ibv_send_wr *wr,
                          sv_swqe_t *w)
{
  if (wr->num_sge != 1 || wr->sg_list[0].length != 8) return EINVAL;
  w->raddr = wr->wr.atomic.remote_addr;
  w->rkey = wr->wr.atomic.rkey;
  w->atomic.compare_add = wr->wr.atomic.compare_add;
  w->atomic.swap = wr->opcode == IBV_WR_ATOMIC_CMP_AND_SWP ? wr->wr.atomic.swap : 0;
  w->niov = 1;
  w->local_err = resolve_sges(c, pd, wr->sg_list, 1, IBV_ACCESS_LOCAL_WRITE, w->iov, &w->len);
  return 0;
}

int sv_post_send(struct ibv_qp *ibqp, struct ibv_send_wr *wr, struct ibv_send_wr **bad)
{
  sv_qp_t *qp = sv_qp(ibqp);
  sv_context_t *c = qp->sctx;
  int rc = 0;
  pthread_mutex_lock(&c->lock);
  bool was_idle = qp->sq_tx == qp->sq_tail;
  for (; wr; wr = wr->next) {
    enum ibv_qp_state st = ibqp->state;
    if (st != IBV_QPS_RTS && st != IBV_QPS_ERR) {
      rc = EINVAL;
      break;
    }
    if (wr->opcode != IBV_WR_SEND && wr->opcode != IBV_WR_SEND_WITH_IMM &&
        wr->opcode != IBV_WR_RDMA_WRITE && wr->opcode != IBV_WR_RDMA_WRITE_WITH_IMM &&
        wr->opcode != IBV_WR_RDMA_READ && !sv_wr_is_atomic(wr->opcode)) {
      report_unemulated_opcode(wr->opcode);
      rc = EINVAL;
      break;
    }
    bool inl = (wr->send_flags & IBV_SEND_INLINE) && wr->opcode != IBV_WR_RDMA_READ &&
               !sv_wr_is_atomic(wr->opcode);
    if (wr->num_sge < 0 || (uint32_t)wr->num_sge > qp->cap.max_send_sge) {
      rc = EINVAL;
      break;
    }
    if (qp->sq_tail - qp->sq_head >= qp->sq_cap) {
      rc = ENOMEM;
      break;
    }
    sv_swqe_t *w = &qp->sq[qp->sq_tail % qp->sq_cap];
    w->wr_id = wr->wr_id;
    w->op = wr->opcode;
    w->imm = wr->imm_data;
    w->raddr = wr->wr.rdma.remote_addr;
    w->rkey = wr->wr.rdma.rkey;
    w->signaled = qp->sq_sig_all || (wr->send_flags & IBV_SEND_SIGNALED);
    w->local_err = IBV_WC_SUCCESS;
    if (w->gpu) sv_gpu_stage_reset(w->gpu); /* the slot's bounce buffer stays for reuse */
    if (inl) {
      uint64_t total = 0;
      for (int i = 0; i < wr->num_sge; i++) total += wr->sg_list[i].length;
      if (total > qp->cap.max_inline_data) {
        rc = EINVAL;
        break;
      }
      size_t off = 0;
      for (int i = 0; i < wr->num_sge; i++) {
        const void *src = (const void *)(uintptr_t)wr->sg_list[i].addr;
        if (wr->sg_list[i].length && !c->ngpu_mrs)
          memcpy(w->inline_buf + off, src, wr->sg_list[i].length);
        else if (wr->sg_list[i].length &&
                 sv_gpu_copy_in(c, wr->sg_list[i].lkey, w->inline_buf + off, src,
                                wr->sg_list[i].length) != 0)
          w->local_err = IBV_WC_LOC_PROT_ERR; /* GPU memory that could not be read */
        off += wr->sg_list[i].length;
      }
      w->niov = 1;
      w->iov[0].iov_base = w->inline_buf;
      w->iov[0].iov_len = off;
      w->len = off;
    } else {
      int access = wr->opcode == IBV_WR_RDMA_READ ? IBV_ACCESS_LOCAL_WRITE : 0;
      w->niov = (uint32_t)wr->num_sge;
      w->local_err = resolve_sges(c, ibqp->pd, wr->sg_list, wr->num_sge, access, w->iov, &w->len);
    }
    if (sv_wr_is_atomic(wr->opcode)) { /* its one SGE is where the answer goes: resolved as such */
      rc = prepare_atomic(c, ibqp->pd, wr, w);
      if (rc) break;
    }
    if (w->len > (1ull << 31)) {
      rc = EINVAL;
      break;
    }
    if (c->ngpu_mrs && sv_wr_is_atomic(wr->opcode) && w->local_err == IBV_WC_SUCCESS) {
      /* the original value is written by the CPU: its SGE must be host memory */
      sv_mr_t *m = sv_mr_lookup(c, wr->sg_list[0].lkey);
      if (m && m->gpu_ctx) {
        sv_report_refusal("atomic with its local SGE in GPU memory (atomics are executed on host memory only)");
        w->local_err = IBV_WC_LOC_PROT_ERR;
      }
    } else if (c->ngpu_mrs && !inl && w->local_err == IBV_WC_SUCCESS)
      w->local_err = sv_gpu_stage_wr(c, wr->sg_list, wr->num_sge, w->iov, &w->niov, w->len,
                                     &w->gpu, wr->opcode != IBV_WR_RDMA_READ);
    qp->sq_tail++;
    if (st == IBV_QPS_ERR) sv_qp_complete_send(qp, qp->sq_tail - 1, IBV_WC_WR_FLUSH_ERR);
  }
  if (rc && bad) *bad = wr;
  if (was_idle && qp->sq_tx < qp->sq_tail) {
    qp->req_progress = sv_now_ns(); /* the retry bound counts from when there is work */
  }
  if (qp->sq_tx < qp->sq_tail && ibqp->state == IBV_QPS_RTS) {
    sv_transport_kick(qp);
  }
  pthread_mutex_unlock(&c->lock);
  return rc;
}

int sv_post_recv(struct ibv_qp *ibqp, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad)
{
  sv_qp_t *qp = sv_qp(ibqp);
  sv_context_t *c = qp->sctx;
  int rc = 0;
  pthread_mutex_lock(&c->lock);
  bool was_empty = qp->rq_head == qp->rq_tail;
  for (; wr; wr = wr->next) {
    if (ibqp->state == IBV_QPS_RESET) {
      rc = EINVAL;
      break;
    }
    if (wr->num_sge < 0 || (uint32_t)wr->num_sge > qp->cap.max_recv_sge) {
      rc = EINVAL;
      break;
    }
    if (qp->rq_tail - qp->rq_head >= qp->rq_cap) {
      rc = ENOMEM;
      break;
    }
    sv_rwqe_t *r = &qp->rq[qp->rq_tail % qp->rq_cap];
    r->wr_id = wr->wr_id;
    r->niov = (uint32_t)wr->num_sge;
    r->local_err = resolve_sges(c, ibqp->pd, wr->sg_list, wr->num_sge, IBV_ACCESS_LOCAL_WRITE,
                                r->iov, &r->len);
    if (r->gpu) sv_gpu_stage_reset(r->gpu);
    if (c->ngpu_mrs && r->local_err == IBV_WC_SUCCESS)
      r->local_err = sv_gpu_stage_wr(c, wr->sg_list, wr->num_sge, r->iov, &r->niov, r->len,
                                     &r->gpu, false);
    qp->rq_tail++;
    if (ibqp->state == IBV_QPS_ERR) flush_recv(qp);
  }
  if (rc && bad) *bad = wr;
  if (was_empty && qp->rq_head < qp->rq_tail) sv_transport_recv_posted(qp);
  pthread_mutex_unlock(&c->lock);
  return rc;
}
