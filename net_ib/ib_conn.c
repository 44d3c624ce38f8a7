/* strand-ib — listen / connect / accept / close. The connector reaches the listener's OOB socket
 * (strand/socket_conn.h: magic, per-listener nonce, bounded retries), both ends exchange
 * ib_conn_info_t (QP numbers, addressing, control-block keys), bring their RC QPs to RTR and RTS,
 * and the connector sends one "ready" byte once its QPs accept writes, so the receiver's first
 * clear-to-send never meets a QP still in INIT. Every step is one non-blocking call; each
 * connection attempt is bounded by STRAND_IB_CONNECT_TIMEOUT_MS. The OOB socket stays open as a
 * liveness signal for the data path. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ib.h"
#include "strand/clock.h"
#include "strand/socket_conn.h"

/* ---------------------------------------------------------------------------------------------
 * Registry of live comms (async events find theirs here) and comm errors
 * ------------------------------------------------------------------------------------------- */

static pthread_mutex_t comms_lock = PTHREAD_MUTEX_INITIALIZER;
static ib_comm_t *comms_head;
static int comms_open;

int ib_open_comms(void) {
  pthread_mutex_lock(&comms_lock);
  int n = comms_open;
  pthread_mutex_unlock(&comms_lock);
  return n;
}

static void registry_add(ib_comm_t *c) {
  pthread_mutex_lock(&comms_lock);
  c->next = comms_head;
  comms_head = c;
  comms_open++;
  pthread_mutex_unlock(&comms_lock);
}

static void registry_remove(ib_comm_t *c) {
  pthread_mutex_lock(&comms_lock);
  for (ib_comm_t **pp = &comms_head; *pp; pp = &(*pp)->next)
    if (*pp == c) {
      *pp = c->next;
      comms_open--;
      break;
    }
  pthread_mutex_unlock(&comms_lock);
}

static pthread_mutex_t fail_lock = PTHREAD_MUTEX_INITIALIZER;

static void comm_fail_v(ib_comm_t *c, strand_result_t res, const char *fmt, va_list ap) {
  pthread_mutex_lock(&fail_lock);
  if (atomic_load(&c->failed) == 0) {
    char what[256];
    vsnprintf(what, sizeof what, fmt, ap);
    ib_dev_t *d = ib_dev_get(c->devidx);
    snprintf(c->fail_msg, sizeof c->fail_msg, "%s comm on %s, peer %s: %s",
             c->kind == IB_COMM_SEND ? "send" : "recv", d ? d->name : "?", c->peer_str, what);
    atomic_store(&c->failed, (int)res);
    STRAND_WARN("%s", c->fail_msg);
  }
  pthread_mutex_unlock(&fail_lock);
}

void ib_comm_fail(ib_comm_t *c, strand_result_t res, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  comm_fail_v(c, res, fmt, ap);
  va_end(ap);
}

static void fail_locked_matching(bool (*match)(ib_comm_t *, const void *, int), const void *key,
                                 int port, const char *what, const char *hint) {
  pthread_mutex_lock(&comms_lock);
  for (ib_comm_t *c = comms_head; c; c = c->next)
    if (match(c, key, port)) ib_comm_fail(c, STRAND_REMOTE_ERROR, "%s; %s", what, hint);
  pthread_mutex_unlock(&comms_lock);
}

static bool match_qp(ib_comm_t *c, const void *qp, int port) {
  (void)port;
  for (int q = 0; q < c->nqps; q++)
    if (c->qps[q] == qp) return true;
  return c->flush_qp == qp;
}
static bool match_port(ib_comm_t *c, const void *hca, int port) {
  for (int r = 0; r < c->nrails; r++)
    if (c->rails[r].dev && c->rails[r].dev->hca == hca && (port < 0 || c->rails[r].dev->port == port))
      return true;
  return false;
}

void ib_comms_fail_qp(struct ibv_qp *qp, const char *what) {
  fail_locked_matching(match_qp, qp, -1, what,
                       "the QP entered the error state: check the peer is alive, the fabric, "
                       "NCCL_IB_TIMEOUT / NCCL_IB_RETRY_CNT and NCCL_IB_GID_INDEX");
}
void ib_comms_fail_port(ib_hca_t *hca, int port, const char *what) {
  fail_locked_matching(match_port, hca, port, what,
                       "the port went down: check the cable/switch port (ibstat, ip link)");
}
void ib_comms_fail_hca(ib_hca_t *hca, const char *what) {
  fail_locked_matching(match_port, hca, -1, what,
                       "the device reported a fatal error: check dmesg and the HCA firmware");
}

/* ---------------------------------------------------------------------------------------------
 * Comm resources: CQs, control block, QPs, RTR/RTS
 * ------------------------------------------------------------------------------------------- */

static void comm_free(ib_comm_t *c) {
  if (!c) return;
  registry_remove(c);
  if (c->flush_qp) ibv.destroy_qp(c->flush_qp);
  for (int q = 0; q < c->nqps; q++)
    if (c->qps[q]) ibv.destroy_qp(c->qps[q]);
  for (int r = 0; r < c->nrails; r++) {
    if (c->rails[r].ctrl_mr) ibv.dereg_mr(c->rails[r].ctrl_mr);
    if (c->rails[r].cq) ibv.destroy_cq(c->rails[r].cq);
  }
  free(c->ctrl);
  if (c->fd >= 0) close(c->fd);
  free(c);
}

static int cq_depth(const ib_dev_t *d) {
  int want = IB_RECV_DEPTH * IB_MAX_QPS + 2 * IB_FIFO_SLOTS + 16;
  int max = d->hca->attr.max_cqe;
  return max > 0 && want > max ? max : want;
}

static strand_result_t comm_create(ib_comm_kind_t kind, int devidx, ib_comm_t **out) {
  *out = NULL;
  ib_dev_t *v = ib_dev_get(devidx);
  if (!v) return STRAND_INVALID_ARGUMENT;
  ib_comm_t *c = calloc(1, sizeof *c);
  if (!c) return STRAND_SYSTEM_ERROR;
  c->kind = kind;
  c->devidx = devidx;
  c->fd = -1;
  snprintf(c->peer_str, sizeof c->peer_str, "(connecting)");
  if (posix_memalign((void **)&c->ctrl, 4096, sizeof(ib_ctrl_t)) != 0) {
    free(c);
    return STRAND_SYSTEM_ERROR;
  }
  memset(c->ctrl, 0, sizeof(ib_ctrl_t));
  c->nrails = v->nrails;
  for (int r = 0; r < c->nrails; r++) {
    ib_dev_t *d = ib_dev_get(v->rails[r]);
    c->rails[r].dev = d;
    if (atomic_load(&d->port_down) || atomic_load(&d->hca->fatal)) {
      STRAND_WARN("%s: port is down or the device failed; no new connection on it", d->name);
      comm_free(c);
      return STRAND_REMOTE_ERROR;
    }
    c->rails[r].cq = ibv.create_cq(d->hca->ctx, cq_depth(d), NULL, NULL, 0);
    c->rails[r].ctrl_mr = c->rails[r].cq ? ibv.reg_mr(d->hca->pd, c->ctrl, sizeof(ib_ctrl_t),
                                                      IBV_ACCESS_LOCAL_WRITE |
                                                          IBV_ACCESS_REMOTE_WRITE |
                                                          IBV_ACCESS_REMOTE_READ)
                                         : NULL;
    if (!c->rails[r].ctrl_mr) {
      STRAND_WARN("%s: %s failed (%s): check `ulimit -l` (locked memory) and the device", d->name,
                  c->rails[r].cq ? "ibv_reg_mr of the control block" : "ibv_create_cq",
                  strerror(errno));
      comm_free(c);
      return STRAND_SYSTEM_ERROR;
    }
  }
  *out = c;
  return STRAND_SUCCESS;
}

static strand_result_t qp_create_init(ib_comm_t *c, ib_dev_t *d, struct ibv_cq *cq,
                                      struct ibv_qp **out) {
  struct ibv_qp_init_attr ia;
  memset(&ia, 0, sizeof ia);
  ia.send_cq = cq;
  ia.recv_cq = cq;
  ia.qp_type = IBV_QPT_RC;
  int max_wr = d->hca->attr.max_qp_wr > 0 ? d->hca->attr.max_qp_wr : 1024;
  /* Send side: a group puts at most a sizes write and one write per element on a QP. */
  int send_wr = c->kind == IB_COMM_SEND ? (IB_MAX_RECVS + 2) * IB_FIFO_SLOTS : 2 * IB_FIFO_SLOTS + 8;
  ia.cap.max_send_wr = (uint32_t)(send_wr < max_wr ? send_wr : max_wr);
  ia.cap.max_recv_wr = (uint32_t)(c->kind == IB_COMM_RECV ? IB_RECV_DEPTH : 1);
  ia.cap.max_send_sge = 1;
  ia.cap.max_recv_sge = 1;
  struct ibv_qp *qp = ibv.create_qp(d->hca->pd, &ia);
  if (!qp) {
    STRAND_WARN("%s: ibv_create_qp failed (%s): check the device's QP limit and `ulimit -l`",
                d->name, strerror(errno));
    return STRAND_SYSTEM_ERROR;
  }
  struct ibv_qp_attr a;
  memset(&a, 0, sizeof a);
  a.qp_state = IBV_QPS_INIT;
  a.pkey_index = (uint16_t)ib_params.pkey;
  a.port_num = (uint8_t)d->port;
  a.qp_access_flags = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
  int rc = ibv.modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS);
  if (rc != 0) {
    STRAND_WARN("%s: ibv_modify_qp to INIT failed (%s): check NCCL_IB_PKEY", d->name,
                strerror(rc > 0 ? rc : errno));
    ibv.destroy_qp(qp);
    return STRAND_SYSTEM_ERROR;
  }
  *out = qp;
  return STRAND_SUCCESS;
}

static strand_result_t qps_create(ib_comm_t *c, int nqps) {
  c->nqps = nqps;
  for (int q = 0; q < nqps; q++) {
    int r = q % c->nrails;
    c->qp_rail[q] = r;
    strand_result_t rc = qp_create_init(c, c->rails[r].dev, c->rails[r].cq, &c->qps[q]);
    if (rc != STRAND_SUCCESS) return rc;
    if (c->kind == IB_COMM_RECV && (rc = ib_post_imm_recvs(c, q, IB_RECV_DEPTH)) != STRAND_SUCCESS)
      return rc;
  }
  return STRAND_SUCCESS;
}

static void rail_wire(const ib_dev_t *d, ib_rail_wire_t *w) {
  memset(w, 0, sizeof *w);
  memcpy(w->gid, d->gid.raw, 16);
  w->lid = d->lid;
  w->link_layer = d->link_layer;
  w->mtu = (uint8_t)d->mtu;
  w->is_global = d->is_global;
}

static void info_fill(const ib_comm_t *c, ib_conn_info_t *in) {
  memset(in, 0, sizeof *in);
  in->magic = IB_INFO_MAGIC;
  in->version = IB_WIRE_VERSION;
  in->nqps = (uint16_t)c->nqps;
  in->nrails = (uint16_t)c->nrails;
  in->max_msg = 0xffffffffu;
  for (int r = 0; r < c->nrails; r++) {
    rail_wire(c->rails[r].dev, &in->rails[r]);
    if (c->rails[r].dev->max_msg < in->max_msg) in->max_msg = c->rails[r].dev->max_msg;
  }
  for (int q = 0; q < c->nqps; q++) {
    in->qps[q].qpn = c->qps[q]->qp_num;
    in->qps[q].ctrl_rkey = c->rails[c->qp_rail[q]].ctrl_mr->rkey;
  }
  in->ctrl_addr = (uint64_t)(uintptr_t)(c->kind == IB_COMM_SEND ? (void *)c->ctrl->fifo
                                                                   : (void *)c->ctrl->sizes_in);
}

static bool info_valid(const ib_conn_info_t *in, char *why, size_t whylen) {
  if (in->magic != IB_INFO_MAGIC || in->version != IB_WIRE_VERSION)
    snprintf(why, whylen, "not strand-ib connection info (magic %#x version %u)", in->magic,
             in->version);
  else if (in->nqps < 1 || in->nqps > IB_MAX_QPS || in->nrails < 1 || in->nrails > IB_MAX_RAILS)
    snprintf(why, whylen, "bad QP/rail counts (%u QPs, %u rails)", in->nqps, in->nrails);
  else
    return true;
  return false;
}

/* Brings QP `qp` on our device `d` to RTR and RTS towards the peer's QP `pq` on its rail `pr`. */
static strand_result_t qp_connect(struct ibv_qp *qp, const ib_dev_t *d, const ib_rail_wire_t *pr,
                                  uint32_t remote_qpn) {
  struct ibv_qp_attr a;
  memset(&a, 0, sizeof a);
  a.qp_state = IBV_QPS_RTR;
  a.path_mtu = d->mtu < (enum ibv_mtu)pr->mtu ? d->mtu : (enum ibv_mtu)pr->mtu;
  a.dest_qp_num = remote_qpn;
  a.rq_psn = 0;
  a.max_dest_rd_atomic = 1;
  a.min_rnr_timer = 12;
  a.ah_attr.dlid = pr->lid;
  a.ah_attr.sl = (uint8_t)ib_params.sl;
  a.ah_attr.port_num = (uint8_t)d->port;
  if (d->is_global || pr->is_global || d->link_layer == IBV_LINK_LAYER_ETHERNET) {
    a.ah_attr.is_global = 1;
    memcpy(a.ah_attr.grh.dgid.raw, pr->gid, 16);
    a.ah_attr.grh.sgid_index = (uint8_t)(d->gid_index >= 0 ? d->gid_index : 0);
    a.ah_attr.grh.hop_limit = 255;
    a.ah_attr.grh.traffic_class = (uint8_t)ib_params.tc;
  }
  int rc = ibv.modify_qp(qp, &a,
                         IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
                             IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER);
  if (rc != 0) {
    STRAND_WARN("%s: ibv_modify_qp to RTR failed (%s): check NCCL_IB_GID_INDEX (both ends need a "
                "GID of the same RoCE version and subnet), NCCL_IB_SL, NCCL_IB_TC",
                d->name, strerror(rc > 0 ? rc : errno));
    return STRAND_SYSTEM_ERROR;
  }
  memset(&a, 0, sizeof a);
  a.qp_state = IBV_QPS_RTS;
  a.timeout = (uint8_t)ib_params.timeout;
  a.retry_cnt = (uint8_t)ib_params.retry_cnt;
  a.rnr_retry = 7;
  a.sq_psn = 0;
  a.max_rd_atomic = 1;
  rc = ibv.modify_qp(qp, &a,
                     IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
                         IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC);
  if (rc != 0) {
    STRAND_WARN("%s: ibv_modify_qp to RTS failed (%s): check NCCL_IB_TIMEOUT and "
                "NCCL_IB_RETRY_CNT",
                d->name, strerror(rc > 0 ? rc : errno));
    return STRAND_SYSTEM_ERROR;
  }
  return STRAND_SUCCESS;
}

static strand_result_t qps_connect(ib_comm_t *c) {
  for (int q = 0; q < c->nqps; q++) {
    const ib_rail_wire_t *pr = &c->peer.rails[q % c->peer.nrails];
    strand_result_t rc =
        qp_connect(c->qps[q], c->rails[c->qp_rail[q]].dev, pr, c->peer.qps[q].qpn);
    if (rc != STRAND_SUCCESS) return rc;
  }
  return STRAND_SUCCESS;
}

strand_result_t ib_flush_qp_open(ib_comm_t *c) {
  ib_dev_t *d = c->rails[0].dev;
  strand_result_t rc = qp_create_init(c, d, c->rails[0].cq, &c->flush_qp);
  if (rc != STRAND_SUCCESS) return rc;
  ib_rail_wire_t self;
  rail_wire(d, &self);
  rc = qp_connect(c->flush_qp, d, &self, c->flush_qp->qp_num);
  if (rc != STRAND_SUCCESS) {
    ibv.destroy_qp(c->flush_qp);
    c->flush_qp = NULL;
  }
  return rc;
}

/* ---------------------------------------------------------------------------------------------
 * listen / connect / accept
 * ------------------------------------------------------------------------------------------- */

#define IB_ACCEPT_PENDING 64

/* ST_DONE: an accepted set-up that finished but waits in its pending slot because ib_accept hands
 * out one comm per call; it must not be stepped again (it would read a second ready byte). */
typedef enum { ST_SOCK = 0, ST_SEND_INFO, ST_RECV_INFO, ST_READY, ST_DONE } ib_stage_t;

/* One connection in set-up, on either side. */
typedef struct ib_setup {
  uint64_t key;              /* connect side: carried by the handle between connect() calls */
  int dev;
  ib_stage_t stage;
  strand_sock_connect_t sc;
  int fd;
  uint64_t deadline_ms;
  ib_comm_t *comm;
  ib_conn_info_t out, in;
  size_t off;
  uint8_t ready;
  struct ib_setup *next;
} ib_setup_t;

typedef struct {
  int dev;
  strand_sock_listener_t l;
  ib_setup_t *pending[IB_ACCEPT_PENDING];
} ib_listen_t;

static pthread_mutex_t connecting_lock = PTHREAD_MUTEX_INITIALIZER;
static ib_setup_t *connecting_head;

static void setup_free(ib_setup_t *s) {
  if (!s) return;
  strand_sock_connect_abort(&s->sc);
  if (s->comm) {
    if (s->comm->fd == s->fd) s->fd = -1;
    comm_free(s->comm);
  }
  if (s->fd >= 0) close(s->fd);
  free(s);
}

static strand_result_t abi_result(strand_result_t rc) {
  if (rc == STRAND_TIMEOUT) return STRAND_REMOTE_ERROR;
  if (rc < STRAND_SUCCESS || rc > STRAND_REMOTE_ERROR) return STRAND_INTERNAL_ERROR;
  return rc;
}

static bool dev_ok(int dev, const char *call) {
  if (ib_dev_get(dev)) return true;
  STRAND_WARN("%s: device %d out of range (%d devices)", call, dev, ib_ndevs());
  return false;
}

static void sock_opts(strand_sock_opts_t *o) {
  strand_sock_opts_default(o);
  o->connect_timeout_ms = (int)ib_params.connect_timeout_ms;
  o->handshake_timeout_ms = (int)ib_params.connect_timeout_ms;
}

strand_result_t ib_listen(void *ctx, int dev, void *handle, void **listenComm) {
  (void)ctx;
  if (!handle || !listenComm) return STRAND_INVALID_ARGUMENT;
  *listenComm = NULL;
  if (!dev_ok(dev, "listen")) return STRAND_INVALID_ARGUMENT;
  ib_listen_t *lc = calloc(1, sizeof *lc);
  if (!lc) return STRAND_SYSTEM_ERROR;
  lc->dev = dev;
  strand_sock_opts_t o;
  sock_opts(&o);
  strand_result_t rc = strand_sock_listen(&lc->l, ib_oob_addr(), IB_MAGIC, &o);
  if (rc != STRAND_SUCCESS) {
    free(lc);
    return abi_result(rc);
  }
  ib_handle_t h;
  memset(&h, 0, sizeof h);
  h.magic = IB_MAGIC;
  h.nonce = lc->l.nonce;
  h.addr = lc->l.addr;
  h.dev = dev;
  memset(handle, 0, STRAND_NET_HANDLE_MAXSIZE);
  memcpy(handle, &h, sizeof h);
  *listenComm = lc;
  return STRAND_SUCCESS;
}

/* The connect state lives in a table keyed by a random number the handle carries after our
 * part (the handle is peer data: it never holds a pointer). */
#define IB_HANDLE_KEY_OFFSET 96
static uint64_t handle_key(const void *handle) {
  uint64_t k;
  memcpy(&k, (const uint8_t *)handle + IB_HANDLE_KEY_OFFSET, sizeof k);
  return k;
}
static void handle_set_key(void *handle, uint64_t k) {
  memcpy((uint8_t *)handle + IB_HANDLE_KEY_OFFSET, &k, sizeof k);
}
STRAND_STATIC_ASSERT(sizeof(ib_handle_t) <= IB_HANDLE_KEY_OFFSET, "key after the handle");

static ib_setup_t *connecting_take(uint64_t key, int dev) {
  if (key == 0) return NULL;
  pthread_mutex_lock(&connecting_lock);
  ib_setup_t *s = NULL;
  for (ib_setup_t **pp = &connecting_head; *pp; pp = &(*pp)->next)
    if ((*pp)->key == key && (*pp)->dev == dev) {
      s = *pp;
      *pp = s->next;
      s->next = NULL;
      break;
    }
  pthread_mutex_unlock(&connecting_lock);
  return s;
}

static void connecting_put(ib_setup_t *s) {
  pthread_mutex_lock(&connecting_lock);
  s->next = connecting_head;
  connecting_head = s;
  pthread_mutex_unlock(&connecting_lock);
}

/* Moves bytes of the current stage; DONE / IN_PROGRESS / ERROR (peer closed counts as error). */
static strand_sock_status_t move(ib_setup_t *s, bool sending, void *buf, size_t len) {
  strand_sock_status_t st = sending ? strand_sock_send_some(s->fd, buf, len, &s->off)
                                    : strand_sock_recv_some(s->fd, buf, len, &s->off);
  if (st == STRAND_SOCK_DONE) s->off = 0;
  return st == STRAND_SOCK_CLOSED ? STRAND_SOCK_ERROR : st;
}

static void peer_name(ib_comm_t *c, int fd) {
  strand_sockaddr_t a;
  socklen_t len = sizeof a;
  if (getpeername(fd, &a.sa, &len) == 0)
    strand_sockaddr_to_string(&a, c->peer_str, sizeof c->peer_str);
}

strand_result_t ib_connect(void *ctx, int dev, void *handle, void **sendComm,
                           strand_dev_handle_t **sendDevComm) {
  (void)ctx, (void)sendDevComm;
  if (!handle || !sendComm) return STRAND_INVALID_ARGUMENT;
  *sendComm = NULL;
  if (!dev_ok(dev, "connect")) return STRAND_INVALID_ARGUMENT;
  ib_handle_t h;
  memcpy(&h, handle, sizeof h);
  if (h.magic != IB_MAGIC) {
    STRAND_WARN("connect: the handle was not produced by strand-ib's listen (magic %#llx); are "
                "both ranks using NCCL_NET_PLUGIN=strand-ib?",
                (unsigned long long)h.magic);
    return STRAND_INVALID_ARGUMENT;
  }
  char a[STRAND_SOCKADDR_STRLEN];
  strand_sockaddr_to_string(&h.addr, a, sizeof a);
  ib_setup_t *s = connecting_take(handle_key(handle), dev);
  if (!s) {
    s = calloc(1, sizeof *s);
    if (!s) return STRAND_SYSTEM_ERROR;
    s->fd = -1;
    s->sc.fd = -1;
    s->dev = dev;
    strand_result_t rc = strand_sock_random_u64(&s->key);
    strand_sock_opts_t o;
    sock_opts(&o);
    if (rc == STRAND_SUCCESS) rc = strand_sock_connect_start(&s->sc, &h.addr, IB_MAGIC, h.nonce, NULL, &o);
    if (rc != STRAND_SUCCESS) {
      setup_free(s);
      return abi_result(rc);
    }
    handle_set_key(handle, s->key);
  }
  strand_result_t res = STRAND_SUCCESS;
  const char *fail = NULL;
  if (s->stage == ST_SOCK) {
    strand_sock_status_t st = strand_sock_connect_progress(&s->sc, &s->fd);
    if (st == STRAND_SOCK_ERROR) {
      res = abi_result(s->sc.result != STRAND_SUCCESS ? s->sc.result : STRAND_SYSTEM_ERROR);
      STRAND_WARN("connect to %s: %s", a,
                  res == STRAND_INVALID_ARGUMENT
                      ? "the listener refused the handle (stale handle, or its listener closed?)"
                      : "the peer did not answer: check that it is alive and that "
                        "NCCL_SOCKET_IFNAME selects an interface it can reach");
      goto failed;
    }
    if (st != STRAND_SOCK_DONE) goto again;
    res = comm_create(IB_COMM_SEND, dev, &s->comm);
    if (res == STRAND_SUCCESS) {
      s->comm->fd = s->fd;
      peer_name(s->comm, s->fd);
      ib_dev_t *v = ib_dev_get(dev);
      int nqps = ib_params.qps_per_conn * v->nrails;
      res = qps_create(s->comm, nqps > IB_MAX_QPS ? IB_MAX_QPS : nqps);
    }
    if (res != STRAND_SUCCESS) {
      fail = "could not create the QPs";
      goto failed;
    }
    info_fill(s->comm, &s->out);
    s->stage = ST_SEND_INFO;
    s->deadline_ms = strand_now_ms() + (uint64_t)ib_params.connect_timeout_ms;
  }
  if (s->stage == ST_SEND_INFO) {
    strand_sock_status_t st = move(s, true, &s->out, sizeof s->out);
    if (st == STRAND_SOCK_ERROR) {
      fail = "sending QP information failed (peer closed?)";
      res = STRAND_REMOTE_ERROR;
      goto failed;
    }
    if (st == STRAND_SOCK_DONE) s->stage = ST_RECV_INFO;
  }
  if (s->stage == ST_RECV_INFO) {
    strand_sock_status_t st = move(s, false, &s->in, sizeof s->in);
    if (st == STRAND_SOCK_ERROR) {
      fail = "the listener closed before answering with its QP information";
      res = STRAND_REMOTE_ERROR;
      goto failed;
    }
    if (st == STRAND_SOCK_DONE) {
      char why[128];
      if (!info_valid(&s->in, why, sizeof why) || s->in.nqps != s->comm->nqps) {
        if (s->in.nqps != s->comm->nqps) snprintf(why, sizeof why, "QP count mismatch");
        STRAND_WARN("connect to %s: %s", a, why);
        res = STRAND_REMOTE_ERROR;
        goto failed;
      }
      s->comm->peer = s->in;
      if ((res = qps_connect(s->comm)) != STRAND_SUCCESS) {
        fail = "could not bring the QPs to RTR/RTS";
        goto failed;
      }
      s->ready = IB_READY_BYTE;
      s->stage = ST_READY;
    }
  }
  if (s->stage == ST_READY) {
    strand_sock_status_t st = move(s, true, &s->ready, 1);
    if (st == STRAND_SOCK_ERROR) {
      fail = "sending the ready byte failed (peer closed?)";
      res = STRAND_REMOTE_ERROR;
      goto failed;
    }
    if (st == STRAND_SOCK_DONE) {
      ib_comm_t *c = s->comm;
      s->comm = NULL;
      s->fd = -1;
      setup_free(s);
      handle_set_key(handle, 0);
      registry_add(c);
      *sendComm = c;
      return STRAND_SUCCESS;
    }
  }
  if (s->stage != ST_SOCK && strand_now_ms() > s->deadline_ms) {
    fail = "QP information exchange timed out (STRAND_IB_CONNECT_TIMEOUT_MS)";
    res = STRAND_REMOTE_ERROR;
    goto failed;
  }
again:
  connecting_put(s);
  return STRAND_SUCCESS;
failed:
  if (fail) STRAND_WARN("connect to %s on %s: %s", a, ib_dev_get(dev)->name, fail);
  handle_set_key(handle, 0);
  setup_free(s);
  return res != STRAND_SUCCESS ? res : STRAND_SYSTEM_ERROR;
}

/* One step of an accepted connection's set-up. Returns DONE with s->comm ready, IN_PROGRESS, or
 * ERROR (logged; the caller drops it). */
static strand_sock_status_t accept_step(ib_listen_t *lc, ib_setup_t *s) {
  const char *fail = NULL;
  char why[128]; /* `fail` may point here: it must outlive the blocks below */
  if (s->stage == ST_DONE) return STRAND_SOCK_DONE;
  if (s->stage == ST_RECV_INFO) {
    strand_sock_status_t st = move(s, false, &s->in, sizeof s->in);
    if (st == STRAND_SOCK_ERROR) {
      fail = "the connector closed before sending its QP information";
      goto failed;
    }
    if (st != STRAND_SOCK_DONE) goto wait;
    if (!info_valid(&s->in, why, sizeof why)) {
      fail = why;
      goto failed;
    }
    if (comm_create(IB_COMM_RECV, lc->dev, &s->comm) != STRAND_SUCCESS) {
      fail = "could not create the comm";
      goto failed;
    }
    s->comm->fd = s->fd;
    peer_name(s->comm, s->fd);
    s->comm->peer = s->in;
    if (qps_create(s->comm, s->in.nqps) != STRAND_SUCCESS ||
        qps_connect(s->comm) != STRAND_SUCCESS) {
      fail = "could not create or connect the QPs";
      goto failed;
    }
    info_fill(s->comm, &s->out);
    s->stage = ST_SEND_INFO;
  }
  if (s->stage == ST_SEND_INFO) {
    strand_sock_status_t st = move(s, true, &s->out, sizeof s->out);
    if (st == STRAND_SOCK_ERROR) {
      fail = "sending QP information failed";
      goto failed;
    }
    if (st != STRAND_SOCK_DONE) goto wait;
    s->stage = ST_READY;
  }
  if (s->stage == ST_READY) {
    strand_sock_status_t st = move(s, false, &s->ready, 1);
    if (st == STRAND_SOCK_ERROR || (st == STRAND_SOCK_DONE && s->ready != IB_READY_BYTE)) {
      fail = "the connector did not confirm its QPs";
      goto failed;
    }
    if (st == STRAND_SOCK_DONE) {
      s->stage = ST_DONE;
      return STRAND_SOCK_DONE;
    }
  }
wait:
  if (strand_now_ms() <= s->deadline_ms) return STRAND_SOCK_IN_PROGRESS;
  fail = "QP information exchange timed out (STRAND_IB_CONNECT_TIMEOUT_MS)";
failed:;
  char a[STRAND_SOCKADDR_STRLEN] = "?";
  strand_sockaddr_t pa;
  socklen_t len = sizeof pa;
  if (getpeername(s->fd, &pa.sa, &len) == 0) strand_sockaddr_to_string(&pa, a, sizeof a);
  STRAND_WARN("accept on %s from %s: %s", ib_dev_get(lc->dev)->name, a, fail);
  return STRAND_SOCK_ERROR;
}

strand_result_t ib_accept(void *listenComm, void **recvComm, strand_dev_handle_t **recvDevComm) {
  (void)recvDevComm;
  if (!listenComm || !recvComm) return STRAND_INVALID_ARGUMENT;
  *recvComm = NULL;
  ib_listen_t *lc = listenComm;
  /* Take every verified OOB connection the listener has (bounded by the free slots). */
  for (int guard = 0; guard < IB_ACCEPT_PENDING; guard++) {
    int slot = -1;
    for (int i = 0; i < IB_ACCEPT_PENDING && slot < 0; i++)
      if (!lc->pending[i]) slot = i;
    if (slot < 0) break;
    int fd = -1;
    strand_sock_status_t st = strand_sock_accept_progress(&lc->l, &fd, NULL, NULL);
    if (st == STRAND_SOCK_ERROR) return abi_result(lc->l.result);
    if (st != STRAND_SOCK_DONE) break;
    ib_setup_t *s = calloc(1, sizeof *s);
    if (!s) {
      close(fd);
      return STRAND_SYSTEM_ERROR;
    }
    s->fd = fd;
    s->sc.fd = -1;
    s->dev = lc->dev;
    s->stage = ST_RECV_INFO;
    s->deadline_ms = strand_now_ms() + (uint64_t)ib_params.connect_timeout_ms;
    lc->pending[slot] = s;
  }
  for (int i = 0; i < IB_ACCEPT_PENDING; i++) {
    ib_setup_t *s = lc->pending[i];
    if (!s) continue;
    strand_sock_status_t st = accept_step(lc, s);
    if (st == STRAND_SOCK_ERROR) {
      lc->pending[i] = NULL;
      setup_free(s);
    } else if (st == STRAND_SOCK_DONE && !*recvComm) {
      lc->pending[i] = NULL;
      ib_comm_t *c = s->comm;
      s->comm = NULL;
      s->fd = -1;
      setup_free(s);
      registry_add(c);
      *recvComm = c;
    }
  }
  return STRAND_SUCCESS;
}

strand_result_t ib_close_listen(void *listenComm) {
  if (!listenComm) return STRAND_INVALID_ARGUMENT;
  ib_listen_t *lc = listenComm;
  for (int i = 0; i < IB_ACCEPT_PENDING; i++) setup_free(lc->pending[i]);
  strand_sock_listener_close(&lc->l);
  free(lc);
  return STRAND_SUCCESS;
}

strand_result_t ib_close_send(void *sendComm) {
  if (!sendComm) return STRAND_INVALID_ARGUMENT;
  comm_free(sendComm);
  return STRAND_SUCCESS;
}

strand_result_t ib_close_recv(void *recvComm) {
  if (!recvComm) return STRAND_INVALID_ARGUMENT;
  comm_free(recvComm);
  return STRAND_SUCCESS;
}

/* Connect states abandoned by the core (a connect never retried) are freed at teardown. */
void ib_conn_teardown(void);
void ib_conn_teardown(void) {
  pthread_mutex_lock(&connecting_lock);
  ib_setup_t *s = connecting_head;
  connecting_head = NULL;
  pthread_mutex_unlock(&connecting_lock);
  while (s) {
    ib_setup_t *n = s->next;
    setup_free(s);
    s = n;
  }
}
