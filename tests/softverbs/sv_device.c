/* softverbs devices: the device list, open/close, device/port/GID queries, async events and the
 * port/device fault timers' effects. */
#include <errno.h>
#include <arpa/inet.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <net/if.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "strand/clock.h"
#include "sv.h"

static sv_device_t g_devs[SV_MAX_DEVS];
static int g_ndevs;
static pthread_once_t g_devs_once = PTHREAD_ONCE_INIT;

static void build_devices(void)
{
  const sv_config_t *cfg = sv_config();
  if (!cfg) return;
  for (int i = 0; i < cfg->ndevs; i++) {
    sv_device_t *d = &g_devs[i];
    d->index = i;
    d->dev.node_type = IBV_NODE_CA;
    d->dev.transport_type = IBV_TRANSPORT_IB;
    snprintf(d->dev.name, sizeof(d->dev.name), "sv%d", i);
    snprintf(d->dev.dev_name, sizeof(d->dev.dev_name), "uverbs%d", i);
    /* No sysfs exists for these devices; the paths name nothing on purpose. */
    snprintf(d->dev.dev_path, sizeof(d->dev.dev_path), "/nonexistent/softverbs/uverbs%d", i);
    snprintf(d->dev.ibdev_path, sizeof(d->dev.ibdev_path), "/nonexistent/softverbs/sv%d", i);
    /* A GUID in the style of an EUI-64 built from the IPv4 address: stable per host and device. */
    uint32_t ip = ntohl(cfg->ip.s_addr);
    d->guid = htobe64(0x02c0ffee00000000ull | ((uint64_t)ip << 8) | (uint64_t)i);
  }
  g_ndevs = cfg->ndevs;
}

SV_EXPORT struct ibv_device **ibv_get_device_list(int *num_devices)
{
  pthread_once(&g_devs_once, build_devices);
  if (!sv_config()) {
    errno = EINVAL;
    if (num_devices) *num_devices = 0;
    return NULL;
  }
  struct ibv_device **list = calloc((size_t)g_ndevs + 1, sizeof(*list));
  if (!list) {
    errno = ENOMEM;
    return NULL;
  }
  for (int i = 0; i < g_ndevs; i++) list[i] = &g_devs[i].dev;
  if (num_devices) *num_devices = g_ndevs;
  return list;
}

SV_EXPORT void ibv_free_device_list(struct ibv_device **list) { free(list); }

SV_EXPORT const char *ibv_get_device_name(struct ibv_device *device)
{
  return device ? device->name : NULL;
}

SV_EXPORT __be64 ibv_get_device_guid(struct ibv_device *device)
{
  return device ? ((sv_device_t *)device)->guid : 0;
}

SV_EXPORT int ibv_get_device_index(struct ibv_device *device)
{
  return device ? ((sv_device_t *)device)->index : -1;
}

/* ops of every context: the header's inline data-path functions call these */
int sv_poll_cq(struct ibv_cq *cq, int n, struct ibv_wc *wc);
int sv_req_notify_cq(struct ibv_cq *cq, int solicited_only);
int sv_post_send(struct ibv_qp *qp, struct ibv_send_wr *wr, struct ibv_send_wr **bad);
int sv_post_recv(struct ibv_qp *qp, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad);

static int sv_post_srq_recv(struct ibv_srq *srq, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad)
{
  (void)srq;
  if (bad) *bad = wr;
  return EOPNOTSUPP;
}

static struct ibv_mw *sv_alloc_mw(struct ibv_pd *pd, enum ibv_mw_type type)
{
  (void)pd, (void)type;
  sv_report_refusal("ibv_alloc_mw refused (memory windows are not emulated)");
  errno = EOPNOTSUPP;
  return NULL;
}

SV_EXPORT struct ibv_context *ibv_open_device(struct ibv_device *device)
{
  const sv_config_t *cfg = sv_config();
  if (!device || !cfg) {
    errno = EINVAL;
    return NULL;
  }
  sv_context_t *c = calloc(1, sizeof(*c));
  if (!c) {
    errno = ENOMEM;
    return NULL;
  }
  c->dev = (sv_device_t *)device;
  c->cfg = cfg;
  c->ctx.device = device;
  c->ctx.cmd_fd = -1;
  c->ctx.num_comp_vectors = 1;
  c->ctx.abi_compat = NULL; /* not a verbs_context: the header's inlines use the exported API */
  c->ctx.ops.poll_cq = sv_poll_cq;
  c->ctx.ops.req_notify_cq = sv_req_notify_cq;
  c->ctx.ops.post_send = sv_post_send;
  c->ctx.ops.post_recv = sv_post_recv;
  c->ctx.ops.post_srq_recv = sv_post_srq_recv;
  c->ctx.ops.alloc_mw = sv_alloc_mw;
  pthread_mutex_init(&c->ctx.mutex, NULL);
  pthread_mutex_init(&c->lock, NULL);
  pthread_mutex_init(&c->async_lock, NULL);
  pthread_cond_init(&c->async_cond, NULL);
  int p[2];
  if (pipe2(p, O_CLOEXEC) != 0) {
    int e = errno;
    free(c);
    errno = e;
    return NULL;
  }
  c->ctx.async_fd = p[0];
  c->async_wr = p[1];
  /* never block the progress thread on a reader that does not read: a full pipe drops (and
   * logs) the event instead */
  fcntl(p[1], F_SETFL, fcntl(p[1], F_GETFL) | O_NONBLOCK);
  for (int i = 1; i <= cfg->nports; i++) c->port_state[i] = IBV_PORT_ACTIVE;
  c->open_ns = sv_now_ns();
  bool faulted = strcmp(cfg->fault_dev, device->name) == 0;
  if (faulted && cfg->port_down_ms) c->port_down_at = c->open_ns + cfg->port_down_ms * 1000000ull;
  if (faulted && cfg->fatal_ms) c->fatal_at = c->open_ns + cfg->fatal_ms * 1000000ull;
  if (sv_transport_start(c) != 0) {
    int e = errno;
    close(p[0]);
    close(p[1]);
    pthread_mutex_destroy(&c->lock);
    free(c);
    errno = e;
    return NULL;
  }
  SV_TRACE("opened %s: %s %s listen port %u", device->name, cfg->ifname, inet_ntoa(cfg->ip),
           c->listen_port[0]);
  return &c->ctx;
}

SV_EXPORT int ibv_close_device(struct ibv_context *context)
{
  sv_context_t *c = sv_ctx(context);
  sv_transport_stop(c);
  sv_mr_release_all(c);
  close(c->ctx.async_fd);
  close(c->async_wr);
  pthread_mutex_destroy(&c->lock);
  pthread_mutex_destroy(&c->async_lock);
  pthread_cond_destroy(&c->async_cond);
  pthread_mutex_destroy(&c->ctx.mutex);
  free(c);
  return 0;
}

SV_EXPORT int ibv_query_device(struct ibv_context *context, struct ibv_device_attr *a)
{
  sv_context_t *c = sv_ctx(context);
  memset(a, 0, sizeof(*a));
  snprintf(a->fw_ver, sizeof(a->fw_ver), "softverbs-1.0");
  a->node_guid = c->dev->guid;
  a->sys_image_guid = c->dev->guid;
  a->max_mr_size = 1ull << 40;
  a->page_size_cap = 0xfffff000;
  a->vendor_id = 0x1234; /* not a real vendor: nobody should key quirks on it */
  a->vendor_part_id = 1;
  a->hw_ver = 1;
  a->max_qp = SV_QPS_PER_CTX;
  a->max_qp_wr = SV_MAX_QP_WR;
  a->device_cap_flags = IBV_DEVICE_RC_RNR_NAK_GEN | IBV_DEVICE_PORT_ACTIVE_EVENT;
  a->max_sge = SV_MAX_SGE;
  a->max_sge_rd = SV_MAX_SGE;
  a->max_cq = 4096;
  a->max_cqe = SV_MAX_CQE;
  a->max_mr = SV_MAX_MR;
  a->max_pd = 4096;
  a->max_qp_rd_atom = SV_MAX_RD_ATOMIC;
  a->max_qp_init_rd_atom = SV_MAX_RD_ATOMIC;
  a->max_res_rd_atom = SV_MAX_RD_ATOMIC * SV_QPS_PER_CTX;
  /* HCA, not GLOB: an atomic is atomic against the other atomics of softverbs (and CPU atomics),
   * not against RDMA WRITEs or plain CPU stores to the same word. */
  a->atomic_cap = IBV_ATOMIC_HCA;
  a->max_pkeys = 1;
  a->local_ca_ack_delay = 16;
  a->phys_port_cnt = (uint8_t)c->cfg->nports;
  return 0;
}

static bool valid_port(sv_context_t *c, unsigned port)
{
  return port >= 1 && port <= (unsigned)c->cfg->nports;
}

/* Exported with the old (compat) signature: rdma-core's inline ibv_query_port() zeroes the whole
 * current struct ibv_port_attr and passes it here when the context is not extended. Only the
 * fields of the compat prefix (up to link_layer) are written, as for an old binary. */
SV_EXPORT int ibv_query_port(struct ibv_context *context, uint8_t port_num,
                             struct _compat_ibv_port_attr *compat)
{
  sv_context_t *c = sv_ctx(context);
  if (!valid_port(c, port_num)) return EINVAL;
  struct ibv_port_attr a;
  memset(&a, 0, sizeof(a));
  pthread_mutex_lock(&c->lock);
  a.state = c->port_state[port_num];
  pthread_mutex_unlock(&c->lock);
  a.max_mtu = IBV_MTU_4096;
  a.active_mtu = c->cfg->active_mtu;
  a.gid_tbl_len = SV_GID_TBL_LEN;
  a.port_cap_flags = 0;
  a.max_msg_sz = 1u << 31;
  a.pkey_tbl_len = 1;
  a.lid = 0; /* RoCE: no LIDs */
  a.max_vl_num = 1;
  a.active_width = c->cfg->active_width;
  a.active_speed = c->cfg->active_speed;
  a.phys_state = a.state == IBV_PORT_ACTIVE ? 5 /* LinkUp */ : 3 /* Disabled */;
  a.link_layer = IBV_LINK_LAYER_ETHERNET;
  memcpy(compat, &a, offsetof(struct ibv_port_attr, link_layer) + sizeof(a.link_layer));
  return 0;
}

static void make_gid(sv_context_t *c, union ibv_gid *gid)
{
  memset(gid, 0, sizeof(*gid));
  gid->raw[10] = 0xff;
  gid->raw[11] = 0xff;
  memcpy(&gid->raw[12], &c->cfg->ip.s_addr, 4);
}

SV_EXPORT int ibv_query_gid(struct ibv_context *context, uint8_t port_num, int index,
                            union ibv_gid *gid)
{
  sv_context_t *c = sv_ctx(context);
  if (!valid_port(c, port_num) || index < 0 || index >= SV_GID_TBL_LEN) {
    errno = EINVAL;
    return -1;
  }
  make_gid(c, gid);
  return 0;
}

SV_EXPORT int _ibv_query_gid_ex(struct ibv_context *context, uint32_t port_num, uint32_t gid_index,
                                struct ibv_gid_entry *entry, uint32_t flags, size_t entry_size)
{
  sv_context_t *c = sv_ctx(context);
  if (flags || entry_size < sizeof(*entry)) return EINVAL;
  if (!valid_port(c, port_num)) return EINVAL;
  if (gid_index >= SV_GID_TBL_LEN) return ENODATA;
  memset(entry, 0, entry_size);
  make_gid(c, &entry->gid);
  entry->gid_index = gid_index;
  entry->port_num = port_num;
  entry->gid_type = IBV_GID_TYPE_ROCE_V2;
  entry->ndev_ifindex = if_nametoindex(c->cfg->ifname);
  return 0;
}

SV_EXPORT ssize_t _ibv_query_gid_table(struct ibv_context *context, struct ibv_gid_entry *entries,
                                       size_t max_entries, uint32_t flags, size_t entry_size)
{
  sv_context_t *c = sv_ctx(context);
  if (flags || entry_size < sizeof(*entries)) return -EINVAL;
  size_t n = 0;
  for (int p = 1; p <= c->cfg->nports; p++) {
    for (uint32_t i = 0; i < SV_GID_TBL_LEN; i++) {
      if (n >= max_entries) return -EINVAL; /* as rdma-core: the table does not fit */
      struct ibv_gid_entry *e = (struct ibv_gid_entry *)((char *)entries + n * entry_size);
      int rc = _ibv_query_gid_ex(context, (uint32_t)p, i, e, 0, entry_size);
      if (rc) return -rc;
      n++;
    }
  }
  return (ssize_t)n;
}

/* rdma-core private (IBVERBS_PRIVATE_34), used by ibv_devinfo to print the GID type: the value is
 * the sysfs enum (0 = IB/RoCE v1, 1 = RoCE v2). */
SV_EXPORT int ibv_query_gid_type(struct ibv_context *context, uint8_t port_num, unsigned int index,
                                 uint32_t *type)
{
  sv_context_t *c = sv_ctx(context);
  if (!valid_port(c, port_num) || index >= SV_GID_TBL_LEN) {
    errno = EINVAL;
    return -1;
  }
  *type = 1;
  return 0;
}

SV_EXPORT int ibv_query_pkey(struct ibv_context *context, uint8_t port_num, int index,
                             __be16 *pkey)
{
  sv_context_t *c = sv_ctx(context);
  if (!valid_port(c, port_num) || index != 0) {
    errno = EINVAL;
    return -1;
  }
  *pkey = htons(0xffff);
  return 0;
}

SV_EXPORT int ibv_get_pkey_index(struct ibv_context *context, uint8_t port_num, __be16 pkey)
{
  sv_context_t *c = sv_ctx(context);
  if (!valid_port(c, port_num) || pkey != htons(0xffff)) {
    errno = EINVAL;
    return -1;
  }
  return 0;
}

/* ---------------------------------------------------------------- async events */
/* Events travel through a pipe as whole records (an ibv_async_event and the serial of the QP/CQ it
 * is about, 0 for port/device events: one atomic write), so async_fd is pollable and honours
 * O_NONBLOCK exactly like the kernel's. */
typedef struct {
  struct ibv_async_event ev;
  uint64_t serial;
} sv_async_rec_t;

enum { EV_OTHER, EV_QP, EV_CQ };

/* What an event type is affiliated with: a QP, a CQ, or neither (a port, the device). */
static int event_kind(enum ibv_event_type type)
{
  switch (type) {
  case IBV_EVENT_QP_FATAL:
  case IBV_EVENT_QP_REQ_ERR:
  case IBV_EVENT_QP_ACCESS_ERR:
  case IBV_EVENT_COMM_EST:
  case IBV_EVENT_SQ_DRAINED:
  case IBV_EVENT_QP_LAST_WQE_REACHED:
  case IBV_EVENT_PATH_MIG:
  case IBV_EVENT_PATH_MIG_ERR:
    return EV_QP;
  case IBV_EVENT_CQ_ERR:
    return EV_CQ;
  default:
    return EV_OTHER;
  }
}

/* The QP or CQ an event is about, or NULL for port and device events. */
static sv_async_obj_t *event_obj(const struct ibv_async_event *ev)
{
  int kind = event_kind(ev->event_type);
  if (kind == EV_QP && ev->element.qp) return &sv_qp(ev->element.qp)->async;
  if (kind == EV_CQ && ev->element.cq) return &sv_cq(ev->element.cq)->async;
  return NULL;
}

void sv_async_obj_register(sv_context_t *c, sv_async_obj_t *o)
{
  static _Atomic uint64_t next_serial = 1;
  o->serial = atomic_fetch_add(&next_serial, 1);
  o->reported = o->acked = 0;
  pthread_mutex_lock(&c->async_lock);
  o->next = c->async_live;
  c->async_live = o;
  pthread_mutex_unlock(&c->async_lock);
}

void sv_async_obj_retire(sv_context_t *c, sv_async_obj_t *o, const char *what)
{
  pthread_mutex_lock(&c->async_lock);
  for (sv_async_obj_t **pp = &c->async_live; *pp; pp = &(*pp)->next) {
    if (*pp == o) {
      *pp = o->next; /* from now on its events still in the pipe are dropped when read */
      break;
    }
  }
  uint64_t t0 = sv_now_ns();
  bool told = false;
  while (o->acked < o->reported) {
    uint64_t waited_ms = (sv_now_ns() - t0) / 1000000u;
    if (waited_ms >= 60000) {
      sv_log("%s: gave up waiting for %u unacknowledged async events after 60 s "
             "(rdma-core would wait forever): freeing it anyway", what, o->reported - o->acked);
      break;
    }
    if (waited_ms >= 5000 && !told) {
      sv_log("%s waits for %u async events to be acknowledged (ibv_ack_async_event)", what,
             o->reported - o->acked);
      told = true;
    }
    struct timespec ts = strand_deadline_in_ns(CLOCK_REALTIME, 100000000);
    pthread_cond_timedwait(&c->async_cond, &c->async_lock, &ts);
  }
  pthread_mutex_unlock(&c->async_lock);
}

void sv_async_event(sv_context_t *c, enum ibv_event_type type, void *obj)
{
  sv_async_rec_t rec;
  memset(&rec, 0, sizeof(rec));
  rec.ev.event_type = type;
  int kind = event_kind(type);
  if (kind == EV_QP) rec.ev.element.qp = obj;
  else if (kind == EV_CQ) rec.ev.element.cq = obj;
  else rec.ev.element.port_num = (int)(intptr_t)obj;
  sv_async_obj_t *o = event_obj(&rec.ev);
  if (o) rec.serial = o->serial;
  SV_TRACE("%s: async event %s", c->dev->dev.name, ibv_event_type_str(type));
  if (write(c->async_wr, &rec, sizeof(rec)) != (ssize_t)sizeof(rec))
    sv_log("async event %d lost: %s", (int)type, strerror(errno));
}

SV_EXPORT int ibv_get_async_event(struct ibv_context *context, struct ibv_async_event *event)
{
  sv_context_t *c = sv_ctx(context);
  for (;;) {
    sv_async_rec_t rec;
    ssize_t n = read(context->async_fd, &rec, sizeof(rec));
    if (n != (ssize_t)sizeof(rec)) {
      if (n >= 0) errno = EIO;
      return -1; /* EAGAIN on a non-blocking fd with nothing left, as from the kernel */
    }
    if (rec.serial != 0) {
      /* An event about a QP/CQ destroyed since it was raised died with the object. */
      bool live = false;
      pthread_mutex_lock(&c->async_lock);
      for (sv_async_obj_t *o = c->async_live; o; o = o->next) {
        if (o->serial == rec.serial) {
          o->reported++;
          live = true;
          break;
        }
      }
      pthread_mutex_unlock(&c->async_lock);
      if (!live) continue;
    }
    *event = rec.ev;
    return 0;
  }
}

/* Lets a destroy of the event's QP/CQ that waits for it go on. */
SV_EXPORT void ibv_ack_async_event(struct ibv_async_event *event)
{
  sv_async_obj_t *o = event ? event_obj(event) : NULL;
  if (!o) return;
  sv_context_t *c = event_kind(event->event_type) == EV_CQ ? sv_ctx(event->element.cq->context)
                                                            : sv_ctx(event->element.qp->context);
  pthread_mutex_lock(&c->async_lock);
  o->acked++;
  pthread_cond_broadcast(&c->async_cond);
  pthread_mutex_unlock(&c->async_lock);
}
