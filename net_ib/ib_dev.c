/* strand-ib — HCA discovery: the NCCL_IB_HCA grammar, one device per active port, GID choice for
 * RoCE (NCCL_IB_GID_INDEX / _ROCE_VERSION_NUM / _ADDR_FAMILY / _ADDR_RANGE), port speed, sysfs
 * PCI paths, virtual (fused) devices, and the per-HCA thread that turns asynchronous events into
 * comm errors. */
#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ib.h"

/* ---------------------------------------------------------------------------------------------
 * Pure helpers (unit-tested in tests/ib_unit.c)
 * ------------------------------------------------------------------------------------------- */

strand_result_t ib_hca_filter_parse(const char *spec, ib_hca_filter_t *f) {
  memset(f, 0, sizeof *f);
  f->any = true;
  if (!spec) return STRAND_SUCCESS;
  const char *p = spec;
  while (isspace((unsigned char)*p)) p++;
  if (!*p) return STRAND_SUCCESS;
  /* NCCL reads '^' then '=' (either may be absent). */
  if (*p == '^') f->exclude = true, p++;
  if (*p == '=') f->exact = true, p++;
  ib_hca_filter_t out = *f;
  out.any = false;
  while (*p) {
    const char *end = strchr(p, ',');
    size_t len = end ? (size_t)(end - p) : strlen(p);
    while (len && isspace((unsigned char)*p)) p++, len--;
    while (len && isspace((unsigned char)p[len - 1])) len--;
    if (len) {
      if (out.count == IB_HCA_FILTER_MAX) {
        STRAND_WARN("NCCL_IB_HCA='%s': more than %d items", spec, IB_HCA_FILTER_MAX);
        return STRAND_INVALID_USAGE;
      }
      char item[80];
      if (len >= sizeof item) {
        STRAND_WARN("NCCL_IB_HCA='%s': item '%.*s' is too long", spec, (int)len, p);
        return STRAND_INVALID_USAGE;
      }
      memcpy(item, p, len);
      item[len] = '\0';
      int port = -1;
      char *colon = strchr(item, ':');
      if (colon) {
        char *e = NULL;
        long v = strtol(colon + 1, &e, 10);
        if (colon[1] == '\0' || *e != '\0' || v < 1 || v > 255) {
          STRAND_WARN("NCCL_IB_HCA='%s': '%s' has a bad port (expected name:N, N >= 1)", spec,
                      item);
          return STRAND_INVALID_USAGE;
        }
        port = (int)v;
        *colon = '\0';
      }
      if (!item[0] || strlen(item) >= sizeof out.items[0].name || strpbrk(item, "^= \t")) {
        STRAND_WARN("NCCL_IB_HCA='%s': '%s' is not a device name", spec, item);
        return STRAND_INVALID_USAGE;
      }
      snprintf(out.items[out.count].name, sizeof out.items[0].name, "%s", item);
      out.items[out.count].port = port;
      out.count++;
    }
    if (!end) break;
    p = end + 1;
  }
  if (out.count == 0) {
    STRAND_WARN("NCCL_IB_HCA='%s' names no device", spec);
    return STRAND_INVALID_USAGE;
  }
  *f = out;
  return STRAND_SUCCESS;
}

bool ib_hca_filter_match(const ib_hca_filter_t *f, const char *dev, int port) {
  if (f->any) return true;
  bool hit = false;
  for (int i = 0; i < f->count && !hit; i++) {
    const char *n = f->items[i].name;
    bool name_ok = f->exact ? strcmp(dev, n) == 0 : strncmp(dev, n, strlen(n)) == 0;
    hit = name_ok && (f->items[i].port < 0 || f->items[i].port == port);
  }
  return f->exclude ? !hit : hit;
}

int ib_port_speed_mbps(uint8_t active_width, uint8_t active_speed) {
  /* active_width: 1=1x 2=4x 4=8x 8=12x 16=2x; active_speed: one bit per generation. */
  int lanes = 0;
  switch (active_width) {
  case 1: lanes = 1; break;
  case 2: lanes = 4; break;
  case 4: lanes = 8; break;
  case 8: lanes = 12; break;
  case 16: lanes = 2; break;
  default: return 0;
  }
  static const int lane_mbps[] = {2500, 5000, 10000, 10000, 14000, 25000, 50000, 100000, 200000};
  for (int b = 0; b < (int)(sizeof lane_mbps / sizeof lane_mbps[0]); b++)
    if (active_speed == (1u << b)) return lanes * lane_mbps[b];
  return 0;
}

int ib_gid_family(const uint8_t gid[16]) {
  static const uint8_t mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
  return memcmp(gid, mapped, sizeof mapped) == 0 ? AF_INET : AF_INET6;
}

strand_result_t ib_addr_range_parse(const char *text, ib_addr_range_t *r) {
  memset(r, 0, sizeof *r);
  if (!text || !*text) return STRAND_SUCCESS;
  char buf[128];
  snprintf(buf, sizeof buf, "%s", text);
  char *slash = strchr(buf, '/');
  if (!slash) goto bad;
  *slash = '\0';
  char *e = NULL;
  long pfx = strtol(slash + 1, &e, 10);
  if (slash[1] == '\0' || *e != '\0') goto bad;
  if (inet_pton(AF_INET, buf, r->addr) == 1 && pfx >= 0 && pfx <= 32) {
    r->family = AF_INET;
  } else if (inet_pton(AF_INET6, buf, r->addr) == 1 && pfx >= 0 && pfx <= 128) {
    r->family = AF_INET6;
  } else {
    goto bad;
  }
  r->prefix = (int)pfx;
  return STRAND_SUCCESS;
bad:
  memset(r, 0, sizeof *r);
  STRAND_WARN("NCCL_IB_ADDR_RANGE='%s' is not a CIDR range (a.b.c.d/n or ipv6/n)", text);
  return STRAND_INVALID_USAGE;
}

bool ib_gid_in_range(const uint8_t gid[16], int family, const ib_addr_range_t *r) {
  if (r->family == 0) return true;
  if (r->family != family) return false;
  const uint8_t *a = family == AF_INET ? gid + 12 : gid;
  int full = r->prefix / 8, rest = r->prefix % 8;
  if (memcmp(a, r->addr, (size_t)full) != 0) return false;
  if (rest == 0) return true;
  uint8_t mask = (uint8_t)(0xff << (8 - rest));
  return (a[full] & mask) == (r->addr[full] & mask);
}

/* ---------------------------------------------------------------------------------------------
 * Discovery
 * ------------------------------------------------------------------------------------------- */

static ib_hca_t hcas[IB_MAX_HCAS];
static int nhcas;
static ib_dev_t devs[IB_MAX_DEVS];
static int ndevs;
static pthread_mutex_t devs_lock = PTHREAD_MUTEX_INITIALIZER; /* ndevs grows with makeVDevice */
static pthread_once_t devs_once = PTHREAD_ONCE_INIT;
static strand_result_t devs_result;
static strand_sockaddr_t oob_addr;

int ib_ndevs(void) {
  pthread_mutex_lock(&devs_lock);
  int n = ndevs;
  pthread_mutex_unlock(&devs_lock);
  return n;
}

ib_dev_t *ib_dev_get(int dev) {
  if (dev < 0 || dev >= ib_ndevs()) return NULL;
  return &devs[dev];
}

const strand_sockaddr_t *ib_oob_addr(void) { return &oob_addr; }

static char *sysfs_pci_path(const char *hca) {
  char p[PATH_MAX], real[PATH_MAX];
  snprintf(p, sizeof p, "/sys/class/infiniband/%s/device", hca);
  if (!realpath(p, real)) return NULL;
  return strdup(real);
}

/* The RoCE type of a GID: 1 or 2, 0 when unknown. ibv_query_gid_ex when the library has it,
 * sysfs gid_attrs otherwise (a stand-in library without sysfs answers through the former). */
static int gid_roce_version(ib_hca_t *h, int port, int idx) {
  if (ibv.query_gid_ex) {
    struct ibv_gid_entry e;
    memset(&e, 0, sizeof e);
    if (ibv.query_gid_ex(h->ctx, (uint32_t)port, (uint32_t)idx, &e, 0, sizeof e) == 0)
      return e.gid_type == IBV_GID_TYPE_ROCE_V2 ? 2 : e.gid_type == IBV_GID_TYPE_ROCE_V1 ? 1 : 0;
  }
  char p[PATH_MAX], t[64] = "";
  snprintf(p, sizeof p, "/sys/class/infiniband/%s/ports/%d/gid_attrs/types/%d", h->name, port,
           idx);
  FILE *f = fopen(p, "r");
  if (!f) return 0;
  if (!fgets(t, sizeof t, f)) t[0] = '\0';
  fclose(f);
  if (strstr(t, "v2")) return 2;
  if (strstr(t, "v1") || strstr(t, "IB/RoCE")) return 1;
  return 0;
}

/* Picks the port's GID: NCCL_IB_GID_INDEX when set; on RoCE otherwise the first non-zero GID of
 * the configured RoCE version, family and range (a GID of unknown type is taken only when no
 * typed one matches). */
static bool pick_gid(ib_dev_t *d, const struct ibv_port_attr *pa, const ib_addr_range_t *range) {
  ib_hca_t *h = d->hca;
  if (ib_params.gid_index >= 0) {
    if (ib_params.gid_index >= pa->gid_tbl_len ||
        ibv.query_gid(h->ctx, (uint8_t)d->port, ib_params.gid_index, &d->gid) != 0) {
      STRAND_WARN("%s: NCCL_IB_GID_INDEX=%d is not in the port's GID table (%d entries); port "
                  "skipped",
                  d->name, ib_params.gid_index, pa->gid_tbl_len);
      return false;
    }
    d->gid_index = ib_params.gid_index;
    d->is_global = true;
    return true;
  }
  if (d->link_layer == IBV_LINK_LAYER_INFINIBAND) {
    /* LID routing: the GID is sent along for information only. */
    d->gid_index = 0;
    d->is_global = false;
    if (ibv.query_gid(h->ctx, (uint8_t)d->port, 0, &d->gid) != 0) memset(&d->gid, 0, 16);
    return true;
  }
  int fallback = -1;
  union ibv_gid fallback_gid;
  static const uint8_t zero[16];
  for (int i = 0; i < pa->gid_tbl_len && i < 1024; i++) {
    union ibv_gid g;
    if (ibv.query_gid(h->ctx, (uint8_t)d->port, i, &g) != 0) continue;
    if (memcmp(g.raw, zero, 16) == 0) continue;
    int fam = ib_gid_family(g.raw);
    if (fam != ib_params.addr_family || !ib_gid_in_range(g.raw, fam, range)) continue;
    int v = gid_roce_version(h, d->port, i);
    if (v == ib_params.roce_version) {
      d->gid_index = i;
      d->gid = g;
      d->is_global = true;
      return true;
    }
    if (v == 0 && fallback < 0) fallback = i, fallback_gid = g;
  }
  if (fallback >= 0) {
    d->gid_index = fallback;
    d->gid = fallback_gid;
    d->is_global = true;
    STRAND_INFO(STRAND_SUBSYS_INIT | STRAND_SUBSYS_NET,
                "%s: GID types unknown (no query_gid_ex, no sysfs gid_attrs); using GID index %d",
                d->name, fallback);
    return true;
  }
  STRAND_WARN("%s: no GID of RoCE v%d, family %s%s%s; port skipped (set NCCL_IB_GID_INDEX, "
              "NCCL_IB_ROCE_VERSION_NUM or NCCL_IB_ADDR_FAMILY)",
              d->name, ib_params.roce_version,
              ib_params.addr_family == AF_INET ? "AF_INET" : "AF_INET6",
              ib_params.addr_range[0] ? " in " : "", ib_params.addr_range);
  return false;
}

static void add_ports(ib_hca_t *h, const ib_hca_filter_t *filt, const ib_addr_range_t *range) {
  for (int port = 1; port <= h->attr.phys_port_cnt && ndevs < IB_MAX_DEVS; port++) {
    if (!ib_hca_filter_match(filt, h->name, port)) continue;
    struct ibv_port_attr pa;
    memset(&pa, 0, sizeof pa);
    if (ibv.query_port(h->ctx, (uint8_t)port, &pa) != 0) {
      STRAND_WARN("%s:%d: ibv_query_port failed (%s); port skipped", h->name, port,
                  strerror(errno));
      continue;
    }
    if (pa.state != IBV_PORT_ACTIVE) {
      STRAND_INFO(STRAND_SUBSYS_INIT | STRAND_SUBSYS_NET, "%s:%d: port not active (state %d)",
                  h->name, port, (int)pa.state);
      continue;
    }
    if (pa.link_layer != IBV_LINK_LAYER_INFINIBAND && pa.link_layer != IBV_LINK_LAYER_ETHERNET) {
      STRAND_INFO(STRAND_SUBSYS_INIT | STRAND_SUBSYS_NET, "%s:%d: link layer %d not supported",
                  h->name, port, (int)pa.link_layer);
      continue;
    }
    ib_dev_t *d = &devs[ndevs];
    memset(d, 0, sizeof *d);
    snprintf(d->name, sizeof d->name, "%s:%d", h->name, port);
    d->hca = h;
    d->port = port;
    d->link_layer = pa.link_layer;
    d->lid = pa.lid;
    d->mtu = pa.active_mtu;
    d->max_msg = pa.max_msg_sz ? pa.max_msg_sz : 0x40000000u;
    d->speed_mbps = ib_port_speed_mbps(pa.active_width, pa.active_speed);
    d->guid = h->attr.node_guid;
    if (!pick_gid(d, &pa, range)) continue;
    if (d->link_layer == IBV_LINK_LAYER_INFINIBAND && !d->is_global && d->lid == 0) {
      STRAND_WARN("%s: InfiniBand port without a LID (no subnet manager?); port skipped",
                  d->name);
      continue;
    }
    d->nrails = 1;
    d->rails[0] = ndevs;
    STRAND_INFO(STRAND_SUBSYS_INIT | STRAND_SUBSYS_NET,
                "device %d %s: %s, %d Mb/s, lid %u, gid index %d (%s routing), mtu %d", ndevs,
                d->name, d->link_layer == IBV_LINK_LAYER_INFINIBAND ? "InfiniBand" : "RoCE",
                d->speed_mbps, d->lid, d->gid_index, d->is_global ? "GID" : "LID",
                128 << d->mtu);
    ndevs++;
  }
}

static void close_hca(ib_hca_t *h) {
  if (h->pd) ibv.dealloc_pd(h->pd);
  if (h->ctx) ibv.close_device(h->ctx);
  free(h->pci_path);
  pthread_mutex_destroy(&h->mr_lock);
  memset(h, 0, sizeof *h);
}

static void discover(void) {
  devs_result = ib_params_load();
  if (devs_result != STRAND_SUCCESS) return;
  /* The OOB socket of every listener: the interface NCCL's bootstrap would pick. */
  strand_netif_t ifs[1];
  int nif = 0;
  devs_result = strand_netif_find_from_env(ifs, 1, &nif);
  if (devs_result != STRAND_SUCCESS) return;
  oob_addr = ifs[0].addr;
  strand_sockaddr_set_port(&oob_addr, 0);

  if (ib_params.disable) {
    STRAND_INFO(STRAND_SUBSYS_INIT | STRAND_SUBSYS_NET,
                "NCCL_IB_DISABLE=1: strand-ib offers 0 devices");
    return;
  }
  char why[256] = "";
  if (!ib_verbs_load(why, sizeof why)) {
    STRAND_INFO(STRAND_SUBSYS_INIT | STRAND_SUBSYS_NET,
                "no libibverbs: strand-ib offers 0 devices (%s)", why);
    return;
  }
  ib_hca_filter_t filt;
  ib_addr_range_t range;
  if ((devs_result = ib_hca_filter_parse(ib_params.hca, &filt)) != STRAND_SUCCESS ||
      (devs_result = ib_addr_range_parse(ib_params.addr_range, &range)) != STRAND_SUCCESS)
    return;
  int n = 0;
  struct ibv_device **list = ibv.get_device_list(&n);
  if (!list) {
    STRAND_INFO(STRAND_SUBSYS_INIT | STRAND_SUBSYS_NET,
                "ibv_get_device_list failed (%s): strand-ib offers 0 devices", strerror(errno));
    return;
  }
  for (int i = 0; i < n && nhcas < IB_MAX_HCAS; i++) {
    const char *name = ibv.get_device_name(list[i]);
    if (!name) continue;
    /* Open only HCAs that have a port the filter can accept. */
    bool maybe = false;
    for (int port = 1; port <= 255 && !maybe; port++) maybe = ib_hca_filter_match(&filt, name, port);
    if (!maybe) continue;
    ib_hca_t *h = &hcas[nhcas];
    memset(h, 0, sizeof *h);
    pthread_mutex_init(&h->mr_lock, NULL);
    h->index = nhcas;
    snprintf(h->name, sizeof h->name, "%s", name);
    h->ctx = ibv.open_device(list[i]);
    if (!h->ctx) {
      STRAND_WARN("%s: ibv_open_device failed (%s); HCA skipped", name, strerror(errno));
      close_hca(h);
      continue;
    }
    if (ibv.query_device(h->ctx, &h->attr) != 0 || !(h->pd = ibv.alloc_pd(h->ctx))) {
      STRAND_WARN("%s: ibv_query_device / ibv_alloc_pd failed (%s); HCA skipped", name,
                  strerror(errno));
      close_hca(h);
      continue;
    }
    h->pci_path = sysfs_pci_path(name);
    if (!h->pci_path)
      STRAND_INFO(STRAND_SUBSYS_INIT | STRAND_SUBSYS_NET,
                  "%s: no /sys/class/infiniband/%s/device: pciPath NULL (NCCL then cannot place "
                  "the NIC in the PCI topology)",
                  name, name);
    int before = ndevs;
    add_ports(h, &filt, &range);
    if (ndevs == before) {
      close_hca(h);
      continue;
    }
    nhcas++;
  }
  ibv.free_device_list(list);
  STRAND_INFO(STRAND_SUBSYS_INIT | STRAND_SUBSYS_NET, "strand-ib offers %d device(s)%s%s", ndevs,
              ib_params.hca[0] ? " with NCCL_IB_HCA=" : "", ib_params.hca);
}

strand_result_t ib_devs_init(void) {
  pthread_once(&devs_once, discover);
  return devs_result;
}

strand_result_t ib_dev_add_virtual(const int *members, int n, int *out) {
  if (!members || !out || n < 1 || n > IB_MAX_RAILS) {
    STRAND_WARN("makeVDevice: %d devices asked, 1..%d supported", n, IB_MAX_RAILS);
    return STRAND_INVALID_ARGUMENT;
  }
  pthread_mutex_lock(&devs_lock);
  strand_result_t r = STRAND_SUCCESS;
  if (ndevs >= IB_MAX_DEVS) {
    STRAND_WARN("makeVDevice: device table full (%d)", IB_MAX_DEVS);
    r = STRAND_INTERNAL_ERROR;
    goto out;
  }
  ib_dev_t *v = &devs[ndevs];
  memset(v, 0, sizeof *v);
  v->is_virtual = true;
  char name[sizeof v->name] = ""; /* built aside: the members' names live in the same array */
  size_t len = 0;
  for (int i = 0; i < n; i++) {
    int m = members[i];
    if (m < 0 || m >= ndevs || devs[m].is_virtual) {
      STRAND_WARN("makeVDevice: member %d is not a physical device (0..%d)", m, ndevs - 1);
      r = STRAND_INVALID_ARGUMENT;
      goto out;
    }
    for (int j = 0; j < i; j++)
      if (members[j] == m) {
        STRAND_WARN("makeVDevice: device %d listed twice", m);
        r = STRAND_INVALID_ARGUMENT;
        goto out;
      }
    v->rails[i] = m;
    v->speed_mbps += devs[m].speed_mbps;
    len += (size_t)snprintf(name + len, sizeof name - len, "%s%s", i ? "+" : "", devs[m].name);
    if (len >= sizeof name) len = sizeof name - 1;
  }
  memcpy(v->name, name, sizeof name);
  v->nrails = n;
  v->guid = devs[members[0]].guid;
  v->max_msg = devs[members[0]].max_msg;
  for (int i = 1; i < n; i++)
    if (devs[members[i]].max_msg < v->max_msg) v->max_msg = devs[members[i]].max_msg;
  *out = ndevs++;
  STRAND_INFO(STRAND_SUBSYS_INIT | STRAND_SUBSYS_NET, "virtual device %d %s: %d rails, %d Mb/s",
              *out, v->name, n, v->speed_mbps);
out:
  pthread_mutex_unlock(&devs_lock);
  return r;
}

/* ---------------------------------------------------------------------------------------------
 * Asynchronous events
 * ------------------------------------------------------------------------------------------- */

static void *async_main(void *arg) {
  ib_hca_t *h = arg;
  struct pollfd pfd = {.fd = h->ctx->async_fd, .events = POLLIN};
  /* Non-blocking so that a spurious wake-up never blocks the thread past a stop request. */
  int fl = fcntl(pfd.fd, F_GETFL);
  if (fl >= 0) fcntl(pfd.fd, F_SETFL, fl | O_NONBLOCK);
  while (!atomic_load(&h->async_stop)) {
    int rc = poll(&pfd, 1, (int)ib_params.async_poll_ms);
    if (rc <= 0) continue;
    struct ibv_async_event ev;
    if (ibv.get_async_event(h->ctx, &ev) != 0) continue;
    const char *what = ibv.event_type_str(ev.event_type);
    char msg[160];
    switch (ev.event_type) {
    case IBV_EVENT_PORT_ERR:
    case IBV_EVENT_PORT_ACTIVE: {
      int port = ev.element.port_num;
      for (int i = 0; i < ib_ndevs(); i++) {
        ib_dev_t *d = &devs[i];
        if (d->is_virtual || d->hca != h || d->port != port) continue;
        atomic_store(&d->port_down, ev.event_type == IBV_EVENT_PORT_ERR);
      }
      if (ev.event_type == IBV_EVENT_PORT_ERR) {
        snprintf(msg, sizeof msg, "async event %s on %s:%d", what, h->name, port);
        ib_comms_fail_port(h, port, msg);
      } else {
        STRAND_INFO(STRAND_SUBSYS_NET, "%s:%d: port active again (%s)", h->name, port, what);
      }
      break;
    }
    case IBV_EVENT_QP_FATAL:
    case IBV_EVENT_QP_REQ_ERR:
    case IBV_EVENT_QP_ACCESS_ERR:
    case IBV_EVENT_PATH_MIG_ERR:
      snprintf(msg, sizeof msg, "async event %s on QP %u of %s", what, ev.element.qp->qp_num,
               h->name);
      ib_comms_fail_qp(ev.element.qp, msg);
      break;
    case IBV_EVENT_CQ_ERR:
    case IBV_EVENT_DEVICE_FATAL:
      snprintf(msg, sizeof msg, "async event %s on %s", what, h->name);
      if (ev.event_type == IBV_EVENT_DEVICE_FATAL) atomic_store(&h->fatal, 1);
      ib_comms_fail_hca(h, msg);
      break;
    default:
      STRAND_INFO(STRAND_SUBSYS_NET, "%s: async event %s", h->name, what);
      break;
    }
    ibv.ack_async_event(&ev);
  }
  return NULL;
}

void ib_async_start(void) {
  for (int i = 0; i < nhcas; i++) {
    ib_hca_t *h = &hcas[i];
    if (h->async_running) continue;
    atomic_store(&h->async_stop, false);
    if (pthread_create(&h->async_thread, NULL, async_main, h) == 0)
      h->async_running = true;
    else
      STRAND_WARN("%s: cannot start the async-event thread: port and QP errors will only show "
                  "as failed completions", h->name);
  }
}

void ib_async_stop(void) {
  for (int i = 0; i < nhcas; i++) {
    ib_hca_t *h = &hcas[i];
    if (!h->async_running) continue;
    atomic_store(&h->async_stop, true);
    pthread_join(h->async_thread, NULL); /* bounded: the thread wakes every async_poll_ms */
    h->async_running = false;
    ib_mr_cache_clear(h);
  }
}
