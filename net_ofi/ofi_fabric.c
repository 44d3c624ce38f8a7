/* strand-ofi — provider choice, device discovery, per-device libfabric objects and progress.
 *
 * Provider: FI_PROVIDER (applied by libfabric itself) and/or STRAND_OFI_PROVIDER (our hint); with
 * neither, the first RDM+tagged provider fi_getinfo lists (libfabric orders by preference) that is
 * not loopback-only (shm, sm2) — a loopback-only one only when nothing else exists.
 * Devices: one per domain of that provider; the loopback interface only when it is all there is
 * or STRAND_OFI_DOMAINS names it.
 * Progress: everything is driven from the caller (test/isend/irecv/connect/accept), with a bounded
 * number of CQ reads per call, so providers with FI_PROGRESS_MANUAL work without a thread of ours. */
#include <dlfcn.h>
#include <stddef.h>
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <netinet/in.h>

#include "ofi.h"
#include "strand/topo.h"

/* ------------------------------------------------------------------------------------------ */
/* knobs                                                                                        */

ofi_params_t ofi_params;

static const strand_param_def_t ofi_param_defs[] = {
    STRAND_PARAM_STRING("STRAND_OFI_PROVIDER", NULL, NULL,
                        "libfabric provider to use, e.g. \"tcp;ofi_rxm\", sockets, efa, cxi, "
                        "psm3, verbs;ofi_rxm (unset: FI_PROVIDER, else the best RDM provider)"),
    STRAND_PARAM_STRING("STRAND_OFI_DOMAINS", NULL, NULL,
                        "comma-separated libfabric domain names to use as devices (unset: every "
                        "domain of the provider except loopback)"),
    STRAND_PARAM_BOOL("STRAND_OFI_HMEM", NULL, true,
                      "use FI_HMEM (GPU memory registration, NCCL_PTR_CUDA) when the provider "
                      "offers it and libcuda is present"),
    STRAND_PARAM_INT("STRAND_OFI_PROBE_MS", NULL, 1000, 10, 3600000,
                     "a request waiting this long makes its comm probe the peer's endpoint"),
    STRAND_PARAM_INT("STRAND_OFI_PEER_TIMEOUT_S", NULL, 10, 1, 86400,
                     "connect answers and liveness probes not taken within this fail the comm"),
    STRAND_PARAM_INT("STRAND_OFI_CLOSE_DRAIN_MS", NULL, 500, 0, 60000,
                     "how long close waits for in-flight operations before leaving them to drain"),
};

static strand_result_t copy_string_param(const char *name, char *out, size_t outlen) {
  const char *v = NULL;
  strand_result_t r = strand_param_get_string(name, &v);
  if (r != STRAND_SUCCESS) return r;
  out[0] = '\0';
  if (!v) return STRAND_SUCCESS;
  if (strlen(v) >= outlen) {
    STRAND_WARN("%s is longer than %zu characters", name, outlen - 1);
    return STRAND_INVALID_USAGE;
  }
  snprintf(out, outlen, "%s", v);
  return STRAND_SUCCESS;
}

strand_result_t ofi_params_load(void) {
  strand_result_t r = strand_params_register(ofi_param_defs, STRAND_PARAM_COUNT(ofi_param_defs));
  if (r != STRAND_SUCCESS) return r;
  strand_params_check_unknown("STRAND_OFI_");
  r = strand_params_validate();
  if (r != STRAND_SUCCESS) return r;
  bool hmem = true;
  int64_t probe = 0, timeout = 0, drain = 0;
  if ((r = copy_string_param("STRAND_OFI_PROVIDER", ofi_params.provider,
                             sizeof ofi_params.provider)) != STRAND_SUCCESS ||
      (r = copy_string_param("STRAND_OFI_DOMAINS", ofi_params.domains,
                             sizeof ofi_params.domains)) != STRAND_SUCCESS ||
      (r = strand_param_get_bool("STRAND_OFI_HMEM", &hmem)) != STRAND_SUCCESS ||
      (r = strand_param_get_int("STRAND_OFI_PROBE_MS", &probe)) != STRAND_SUCCESS ||
      (r = strand_param_get_int("STRAND_OFI_PEER_TIMEOUT_S", &timeout)) != STRAND_SUCCESS ||
      (r = strand_param_get_int("STRAND_OFI_CLOSE_DRAIN_MS", &drain)) != STRAND_SUCCESS)
    return r;
  ofi_params.hmem = hmem;
  ofi_params.probe_ms = (long)probe;
  ofi_params.peer_timeout_ms = (long)timeout * 1000;
  ofi_params.close_drain_ms = (long)drain;
  strand_params_dump();
  return STRAND_SUCCESS;
}

uint64_t ofi_now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

strand_result_t ofi_errno_result(int err) {
  if (err < 0) err = -err;
  switch (err) {
    case FI_ETRUNC:
    case FI_EMSGSIZE:
      return STRAND_INVALID_USAGE;
    case FI_ECONNREFUSED:
    case FI_ECONNRESET:
    case FI_ECONNABORTED:
    case FI_ENOTCONN:
    case FI_ESHUTDOWN:
    case FI_EHOSTUNREACH:
    case FI_ETIMEDOUT:
    case FI_EREMOTEIO:
    case FI_EADDRNOTAVAIL:
      return STRAND_REMOTE_ERROR;
    default:
      return STRAND_SYSTEM_ERROR;
  }
}

/* ------------------------------------------------------------------------------------------ */
/* discovery                                                                                    */

static pthread_mutex_t fabric_lock = PTHREAD_MUTEX_INITIALIZER;
static bool fabric_ready;
static ofi_dev_t *devs;
static int ndevs;
static char chosen_provider[128];
static struct fi_info *all_infos, *hmem_infos;

const char *ofi_provider_name(void) { return chosen_provider; }
int ofi_ndevs(void) { return ndevs; }
ofi_dev_t *ofi_dev_get(int dev) { return (dev >= 0 && dev < ndevs) ? &devs[dev] : NULL; }

/* Providers that only reach processes on the same host. */
static bool provider_is_loopback_only(const char *prov) {
  return strcmp(prov, "shm") == 0 || strcmp(prov, "sm2") == 0 || strncmp(prov, "shm;", 4) == 0 ||
         strncmp(prov, "sm2;", 4) == 0;
}

static bool domain_is_loopback(const char *name) { return strcmp(name, "lo") == 0; }

/* STRAND_OFI_DOMAINS: comma-separated domain names; empty accepts everything. */
static bool domain_selected(const char *name) {
  if (!ofi_params.domains[0]) return true;
  char buf[sizeof ofi_params.domains];
  snprintf(buf, sizeof buf, "%s", ofi_params.domains);
  char *save = NULL;
  for (char *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save))
    if (strcmp(t, name) == 0) return true;
  return false;
}

static struct fi_info *make_hints(bool hmem) {
  struct fi_info *h = fi_allocinfo();
  if (!h) return NULL;
  h->caps = FI_TAGGED | FI_SEND | FI_RECV | (hmem ? FI_HMEM : 0);
  h->ep_attr->type = FI_EP_RDM;
  h->mode = FI_CONTEXT | FI_CONTEXT2;
  /* Every mr_mode bit we know how to honour: a provider that needs any of them still matches. */
  h->domain_attr->mr_mode = FI_MR_LOCAL | FI_MR_VIRT_ADDR | FI_MR_ALLOCATED | FI_MR_PROV_KEY |
                            FI_MR_ENDPOINT | (hmem ? FI_MR_HMEM : 0);
  h->domain_attr->threading = FI_THREAD_DOMAIN; /* the device mutex serialises every call */
  h->domain_attr->resource_mgmt = FI_RM_ENABLED;
  if (ofi_params.provider[0]) h->fabric_attr->prov_name = strdup(ofi_params.provider);
  return h;
}

static uint64_t fnv1a(const char *s) {
  uint64_t h = 1469598103934665603ULL;
  for (; *s; s++) {
    h ^= (uint8_t)*s;
    h *= 1099511628211ULL;
  }
  return h;
}

static char *sysfs_realpath(const char *path) {
  char buf[PATH_MAX];
  if (!realpath(path, buf)) return NULL;
  return strdup(buf);
}

/* pciPath, speed, guid of one device from fi_info->nic, falling back to the SDK's sysfs topology
 * by domain name (tcp and sockets name their domains after the network interface). */
static void describe_device(ofi_dev_t *d, const struct fi_info *info) {
  char path[PATH_MAX];
  const struct fid_nic *nic = info->nic;
  if (nic && nic->bus_attr && nic->bus_attr->bus_type == FI_BUS_PCI) {
    const struct fi_pci_attr *p = &nic->bus_attr->attr.pci;
    snprintf(path, sizeof path, "/sys/bus/pci/devices/%04x:%02x:%02x.%x", p->domain_id, p->bus_id,
             p->device_id, p->function_id);
    d->pci_path = sysfs_realpath(path);
  }
  if (nic && nic->link_attr && nic->link_attr->speed)
    d->speed_mbps = (int)(nic->link_attr->speed / 1000000u);
  snprintf(path, sizeof path, "/sys/class/net/%s", d->name);
  if (!strchr(d->name, '/') && access(path, F_OK) == 0) {
    strand_netif_topo_t t;
    if (strand_topo_netif(d->name, STRAND_TOPO_DEFAULT_SPEED_MBPS, &t) == STRAND_SUCCESS) {
      if (!d->pci_path && t.pci_path) d->pci_path = strdup(t.pci_path);
      if (d->speed_mbps <= 0) d->speed_mbps = t.speed_mbps;
    }
    strand_topo_netif_free(&t);
  }
  if (d->speed_mbps <= 0) d->speed_mbps = STRAND_TOPO_DEFAULT_SPEED_MBPS;
  char key[PATH_MAX + 256];
  snprintf(key, sizeof key, "%s|%s", chosen_provider, d->pci_path ? d->pci_path : d->name);
  d->guid = fnv1a(key);
}

static bool cuda_present(void) {
  void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL | RTLD_NOLOAD);
  if (!h) h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!h) return false;
  dlclose(h);
  return true;
}

static const struct fi_info *find_domain(const struct fi_info *list, const char *prov,
                                         const char *domain) {
  for (const struct fi_info *i = list; i; i = i->next)
    if (strcmp(i->fabric_attr->prov_name, prov) == 0 && strcmp(i->domain_attr->name, domain) == 0)
      return i;
  return NULL;
}

static strand_result_t discover(void) {
  struct fi_info *hints = make_hints(false);
  if (!hints) return STRAND_SYSTEM_ERROR;
  int rc = fi_getinfo(FI_VERSION(FI_MAJOR_VERSION, FI_MINOR_VERSION), NULL, NULL, 0, hints,
                      &all_infos);
  fi_freeinfo(hints);
  const char *fi_prov = getenv("FI_PROVIDER");
  if (rc != 0 || !all_infos) {
    STRAND_WARN("fi_getinfo found no RDM endpoint with tagged messages (FI_PROVIDER=\"%s\", "
             "STRAND_OFI_PROVIDER=\"%s\"): %s. Check `fi_info -t FI_EP_RDM -c FI_TAGGED` lists "
             "the provider, and that both variables agree when both are set",
             fi_prov ? fi_prov : "", ofi_params.provider, fi_strerror(-rc));
    return STRAND_SYSTEM_ERROR;
  }
  const struct fi_info *pick = NULL;
  for (const struct fi_info *i = all_infos; i && !pick; i = i->next)
    if (!provider_is_loopback_only(i->fabric_attr->prov_name)) pick = i;
  if (!pick) pick = all_infos;
  snprintf(chosen_provider, sizeof chosen_provider, "%s", pick->fabric_attr->prov_name);

  bool want_hmem = ofi_params.hmem && cuda_present();
  if (want_hmem) {
    struct fi_info *h = make_hints(true);
    if (h) {
      free(h->fabric_attr->prov_name);
      h->fabric_attr->prov_name = strdup(chosen_provider);
      if (fi_getinfo(FI_VERSION(FI_MAJOR_VERSION, FI_MINOR_VERSION), NULL, NULL, 0, h,
                     &hmem_infos) != 0)
        hmem_infos = NULL;
      fi_freeinfo(h);
    }
  }

  /* One device per domain; loopback only if nothing else (or asked for by name). */
  int cap = 0, nonloop = 0;
  for (const struct fi_info *i = all_infos; i; i = i->next) {
    if (strcmp(i->fabric_attr->prov_name, chosen_provider) != 0) continue;
    cap++;
    if (!domain_is_loopback(i->domain_attr->name) && domain_selected(i->domain_attr->name))
      nonloop++;
  }
  devs = calloc((size_t)cap + 1, sizeof *devs);
  if (!devs) return STRAND_SYSTEM_ERROR;
  for (const struct fi_info *i = all_infos; i; i = i->next) {
    const char *dom = i->domain_attr->name;
    if (strcmp(i->fabric_attr->prov_name, chosen_provider) != 0) continue;
    if (!domain_selected(dom)) continue;
    if (domain_is_loopback(dom) && nonloop > 0 && !ofi_params.domains[0]) continue;
    if (find_domain(all_infos, chosen_provider, dom) != i) continue; /* first entry per domain */
    ofi_dev_t *d = &devs[ndevs];
    d->index = ndevs;
    snprintf(d->name, sizeof d->name, "%s", dom);
    const struct fi_info *hi = hmem_infos ? find_domain(hmem_infos, chosen_provider, dom) : NULL;
    d->hmem = hi != NULL;
    d->info = fi_dupinfo(hi ? hi : i);
    if (!d->info) return STRAND_SYSTEM_ERROR;
    d->mr_mode = d->info->domain_attr->mr_mode;
    d->max_msg_size = d->info->ep_attr->max_msg_size;
    pthread_mutex_init(&d->lock, NULL);
    describe_device(d, d->info);
    ndevs++;
  }
  if (ndevs == 0) {
    STRAND_WARN("provider %s offers no domain matching STRAND_OFI_DOMAINS=\"%s\"; `fi_info -p '%s'` "
             "lists its domains",
             chosen_provider, ofi_params.domains, chosen_provider);
    return STRAND_SYSTEM_ERROR;
  }
  STRAND_INFO(STRAND_SUBSYS_INIT | STRAND_SUBSYS_NET, "using libfabric %u.%u provider %s (%s), %d device(s)",
           FI_MAJOR(fi_version()), FI_MINOR(fi_version()), chosen_provider,
           (fi_prov || ofi_params.provider[0]) ? "requested" : "best RDM provider offered", ndevs);
  for (int k = 0; k < ndevs; k++)
    STRAND_INFO(STRAND_SUBSYS_NET, "device %d: domain %s pciPath %s speed %d Mbps mr_mode 0x%llx%s", k, devs[k].name,
             devs[k].pci_path ? devs[k].pci_path : "(none)", devs[k].speed_mbps,
             (unsigned long long)devs[k].mr_mode, devs[k].hmem ? " FI_HMEM" : "");
  return STRAND_SUCCESS;
}

strand_result_t ofi_fabric_init(void) {
  pthread_mutex_lock(&fabric_lock);
  strand_result_t r = STRAND_SUCCESS;
  if (!fabric_ready) {
    r = ofi_params_load();
    if (r == STRAND_SUCCESS) r = discover();
    if (r == STRAND_SUCCESS) {
      fabric_ready = true;
    } else {
      free(devs);
      devs = NULL;
      ndevs = 0;
      if (all_infos) fi_freeinfo(all_infos);
      if (hmem_infos) fi_freeinfo(hmem_infos);
      all_infos = hmem_infos = NULL;
    }
  }
  pthread_mutex_unlock(&fabric_lock);
  return r;
}

/* ------------------------------------------------------------------------------------------ */
/* per-device objects                                                                           */

void ofi_addr_str(const uint8_t *name, size_t len, char *out, size_t outlen) {
  char ip[INET6_ADDRSTRLEN];
  /* Endpoint names are byte strings with no alignment promise (they come from handles and wire
   * messages): copy into real sockaddr structs before reading any field. */
  sa_family_t family = AF_UNSPEC;
  if (len >= sizeof family) memcpy(&family, name + offsetof(struct sockaddr, sa_family), sizeof family);
  if (len >= sizeof(struct sockaddr_in) && family == AF_INET) {
    struct sockaddr_in s;
    memcpy(&s, name, sizeof s);
    inet_ntop(AF_INET, &s.sin_addr, ip, sizeof ip);
    snprintf(out, outlen, "%s:%u", ip, ntohs(s.sin_port));
  } else if (len >= sizeof(struct sockaddr_in6) && family == AF_INET6) {
    struct sockaddr_in6 s;
    memcpy(&s, name, sizeof s);
    inet_ntop(AF_INET6, &s.sin6_addr, ip, sizeof ip);
    snprintf(out, outlen, "[%s]:%u", ip, ntohs(s.sin6_port));
  } else {
    size_t o = 0;
    out[0] = '\0';
    for (size_t k = 0; k < len && o + 3 < outlen; k++) o += (size_t)snprintf(out + o, outlen - o, "%02x", name[k]);
  }
}

static void *ctrl_buf_base(ofi_dev_t *d, size_t *len) {
  *len = sizeof(ofi_ctrl_recv_t) * OFI_CTRL_RECVS + sizeof(ofi_ctrl_send_t) * OFI_CTRL_SENDS;
  return d->ctrl_recv;
}

static int post_ctrl_recv(ofi_dev_t *d, int k) {
  ofi_ctrl_recv_t *r = &d->ctrl_recv[k];
  r->op.kind = OFI_OP_CTRL_RECV;
  ssize_t rc = fi_trecv(d->ep, &r->msg, OFI_CTRL_MSG_SIZE, d->ctrl_desc, FI_ADDR_UNSPEC,
                        OFI_TAG_CTRL, 0, &r->op.fi_ctx);
  d->ctrl_recv_posted[k] = rc == 0;
  if (rc != 0) d->ctrl_recv_short = true;
  return (int)rc;
}

#define OFI_CHECK(call, what)                                                                      \
  do {                                                                                             \
    int rc_ = (int)(call);                                                                         \
    if (rc_ != 0) {                                                                                \
      STRAND_WARN("%s failed on domain %s (provider %s): %s", what, d->name, chosen_provider,         \
               fi_strerror(-rc_));                                                                 \
      goto fail;                                                                                   \
    }                                                                                              \
  } while (0)

strand_result_t ofi_dev_open(ofi_dev_t *d) {
  if (d->open) return STRAND_SUCCESS;
  if (d->open_failed) return STRAND_SYSTEM_ERROR;
  struct fi_cq_attr cq_attr = {.format = FI_CQ_FORMAT_TAGGED, .wait_obj = FI_WAIT_NONE};
  struct fi_av_attr av_attr = {.type = d->info->domain_attr->av_type};
  OFI_CHECK(fi_fabric(d->info->fabric_attr, &d->fabric, NULL), "fi_fabric");
  OFI_CHECK(fi_domain(d->fabric, d->info, &d->domain, NULL), "fi_domain");
  OFI_CHECK(fi_cq_open(d->domain, &cq_attr, &d->cq, NULL), "fi_cq_open");
  OFI_CHECK(fi_av_open(d->domain, &av_attr, &d->av, NULL), "fi_av_open");
  OFI_CHECK(fi_endpoint(d->domain, d->info, &d->ep, NULL), "fi_endpoint");
  OFI_CHECK(fi_ep_bind(d->ep, &d->av->fid, 0), "fi_ep_bind(av)");
  OFI_CHECK(fi_ep_bind(d->ep, &d->cq->fid, FI_TRANSMIT | FI_RECV), "fi_ep_bind(cq)");
  OFI_CHECK(fi_enable(d->ep), "fi_enable");
  d->ep_name_len = sizeof d->ep_name;
  OFI_CHECK(fi_getname(&d->ep->fid, d->ep_name, &d->ep_name_len), "fi_getname");
  if (d->ep_name_len > OFI_NAME_MAX) {
    STRAND_WARN("endpoint address of %s is %zu bytes, more than the %d a handle carries", d->name,
             d->ep_name_len, OFI_NAME_MAX);
    goto fail;
  }
  ofi_addr_str(d->ep_name, d->ep_name_len, d->ep_str, sizeof d->ep_str);

  /* Control buffers: one allocation, one registration when the domain wants local MRs. */
  size_t len = sizeof(ofi_ctrl_recv_t) * OFI_CTRL_RECVS + sizeof(ofi_ctrl_send_t) * OFI_CTRL_SENDS;
  void *mem = NULL;
  if (posix_memalign(&mem, 4096, len) != 0) goto fail;
  memset(mem, 0, len);
  d->ctrl_recv = mem;
  d->ctrl_send = (ofi_ctrl_send_t *)((char *)mem + sizeof(ofi_ctrl_recv_t) * OFI_CTRL_RECVS);
  for (int k = 0; k < OFI_CTRL_SENDS; k++) {
    d->ctrl_send[k].index = k;
    d->ctrl_send[k].op.kind = OFI_OP_CTRL_SEND;
  }
  if (d->mr_mode & FI_MR_LOCAL) {
    size_t blen;
    void *base = ctrl_buf_base(d, &blen);
    uint64_t key = (d->mr_mode & FI_MR_PROV_KEY) ? 0 : ++d->next_key;
    OFI_CHECK(fi_mr_reg(d->domain, base, blen, FI_SEND | FI_RECV, 0, key, 0, &d->ctrl_mr, NULL),
              "fi_mr_reg(control buffers)");
    if (d->mr_mode & FI_MR_ENDPOINT) {
      OFI_CHECK(fi_mr_bind(d->ctrl_mr, &d->ep->fid, 0), "fi_mr_bind(control buffers)");
      OFI_CHECK(fi_mr_enable(d->ctrl_mr), "fi_mr_enable(control buffers)");
    }
    d->ctrl_desc = fi_mr_desc(d->ctrl_mr);
  }
  d->next_id = (uint32_t)(ofi_now_ms() & 0xffff) + 1; /* ids differ across restarts */
  for (int k = 0; k < OFI_CTRL_RECVS; k++) post_ctrl_recv(d, k);
  d->open = true;
  STRAND_INFO(STRAND_SUBSYS_NET, "device %d (%s) endpoint %s ready", d->index, d->name, d->ep_str);
  return STRAND_SUCCESS;
fail:
  if (d->ctrl_mr) fi_close(&d->ctrl_mr->fid);
  if (d->ep) fi_close(&d->ep->fid);
  if (d->av) fi_close(&d->av->fid);
  if (d->cq) fi_close(&d->cq->fid);
  if (d->domain) fi_close(&d->domain->fid);
  if (d->fabric) fi_close(&d->fabric->fid);
  free(d->ctrl_recv);
  d->ctrl_mr = NULL, d->ep = NULL, d->av = NULL, d->cq = NULL, d->domain = NULL, d->fabric = NULL;
  d->ctrl_recv = NULL, d->ctrl_send = NULL;
  d->open_failed = true;
  return STRAND_SYSTEM_ERROR;
}

static void dev_close(ofi_dev_t *d) {
  pthread_mutex_lock(&d->lock);
  if (d->open) {
    /* Closing the endpoint discards every operation still posted, so the contexts of draining
     * comms can be freed afterwards. */
    fi_close(&d->ep->fid);
    while (d->comms) ofi_comm_free(d->comms);
    while (d->listens) {
      ofi_listen_t *l = d->listens;
      d->listens = l->next;
      free(l);
    }
    ofi_mr_cache_clear(d);
    if (d->ctrl_mr) fi_close(&d->ctrl_mr->fid);
    fi_close(&d->av->fid);
    fi_close(&d->cq->fid);
    fi_close(&d->domain->fid);
    fi_close(&d->fabric->fid);
    free(d->ctrl_recv);
    while (d->av_cache) {
      ofi_av_entry_t *e = d->av_cache;
      d->av_cache = e->next;
      free(e);
    }
    d->ctrl_mr = NULL, d->ep = NULL, d->av = NULL, d->cq = NULL, d->domain = NULL;
    d->fabric = NULL, d->ctrl_recv = NULL, d->ctrl_send = NULL;
    d->open = false;
  }
  pthread_mutex_unlock(&d->lock);
}

void ofi_devs_close_all(void) {
  pthread_mutex_lock(&fabric_lock);
  for (int k = 0; k < ndevs; k++) dev_close(&devs[k]);
  pthread_mutex_unlock(&fabric_lock);
}

uint32_t ofi_dev_alloc_id(ofi_dev_t *d) {
  for (;;) {
    uint32_t id = d->next_id++;
    if (d->next_id > OFI_COMM_ID_MAX) d->next_id = 1;
    if (id == 0 || id > OFI_COMM_ID_MAX) continue;
    bool used = ofi_dev_find_comm(d, id) != NULL;
    for (ofi_listen_t *l = d->listens; l && !used; l = l->next) used = l->id == id;
    if (!used) return id;
  }
}

ofi_comm_t *ofi_dev_find_comm(ofi_dev_t *d, uint32_t id) {
  for (ofi_comm_t *c = d->comms; c; c = c->next)
    if (c->id == id) return c;
  return NULL;
}

strand_result_t ofi_av_lookup(ofi_dev_t *d, const uint8_t *name, size_t len, fi_addr_t *out) {
  for (ofi_av_entry_t *e = d->av_cache; e; e = e->next)
    if (e->len == len && memcmp(e->name, name, len) == 0) {
      *out = e->addr;
      return STRAND_SUCCESS;
    }
  ofi_av_entry_t *e = calloc(1, sizeof *e);
  if (!e) return STRAND_SYSTEM_ERROR;
  int rc = fi_av_insert(d->av, name, 1, &e->addr, 0, NULL);
  if (rc != 1) {
    char s[64];
    ofi_addr_str(name, len, s, sizeof s);
    STRAND_WARN("fi_av_insert of peer %s on %s failed (%d): %s; the handle may be corrupt or the "
             "peer uses another provider/address format",
             s, d->name, rc, fi_strerror(rc < 0 ? -rc : FI_EINVAL));
    free(e);
    return STRAND_SYSTEM_ERROR;
  }
  e->len = len;
  memcpy(e->name, name, len);
  e->next = d->av_cache;
  d->av_cache = e;
  *out = e->addr;
  return STRAND_SUCCESS;
}

bool ofi_errno_is_connection_loss(int err) {
  if (err < 0) err = -err;
  return err == FI_ECONNRESET || err == FI_ENOTCONN || err == FI_ECONNREFUSED ||
         err == FI_ECONNABORTED || err == FI_ESHUTDOWN || err == EPIPE || err == FI_EHOSTUNREACH;
}

void ofi_peer_broken(ofi_dev_t *d, fi_addr_t peer, const char *why) {
  for (ofi_av_entry_t **p = &d->av_cache; *p; p = &(*p)->next) {
    ofi_av_entry_t *e = *p;
    if (e->addr != peer) continue;
    *p = e->next;
    char s[64];
    ofi_addr_str(e->name, e->len, s, sizeof s);
    STRAND_INFO(STRAND_SUBSYS_NET, "connection to %s on %s lost (%s); address dropped from the AV",
                s, d->name, why);
    free(e);
    break;
  }
  for (ofi_comm_t *c = d->comms; c; c = c->next)
    if (c->peer == peer && c->state != OFI_CONN_FAILED)
      ofi_comm_fail(c, STRAND_REMOTE_ERROR, "the provider's connection to the peer broke: %s", why);
  fi_av_remove(d->av, &peer, 1, 0);
}

/* ------------------------------------------------------------------------------------------ */
/* control messages                                                                             */

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
    cs->busy = false;
    ofi_conn_ctrl_sent(d, cs, (int)-rc, err);
  }
}

int ofi_ctrl_send(ofi_dev_t *d, fi_addr_t dest, uint16_t kind, uint32_t dst_id, uint32_t src_id,
                  uint64_t nonce, uint64_t arg, uint32_t owner_comm, const uint8_t *name,
                  size_t name_len) {
  ofi_ctrl_send_t *cs = NULL;
  for (int k = 0; k < OFI_CTRL_SENDS && !cs; k++)
    if (!d->ctrl_send[k].busy) cs = &d->ctrl_send[k];
  if (!cs) return -FI_EAGAIN;
  memset(&cs->msg, 0, sizeof cs->msg);
  cs->busy = true;
  cs->posted = false;
  cs->dest = dest;
  cs->owner_comm = owner_comm;
  cs->attempts = 1;
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

int ofi_ctrl_resend(ofi_dev_t *d, fi_addr_t dest, const ofi_ctrl_msg_t *msg, int attempt) {
  ofi_ctrl_send_t *cs = NULL;
  for (int k = 0; k < OFI_CTRL_SENDS && !cs; k++)
    if (!d->ctrl_send[k].busy) cs = &d->ctrl_send[k];
  if (!cs) return -FI_EAGAIN;
  cs->msg = *msg;
  cs->busy = true;
  cs->posted = false;
  cs->dest = dest;
  cs->owner_comm = 0;
  cs->attempts = attempt;
  post_ctrl_send(d, cs);
  return 0;
}

/* ------------------------------------------------------------------------------------------ */
/* progress                                                                                     */

static void dispatch(ofi_dev_t *d, ofi_op_t *op, size_t len, int err, size_t olen,
                     const char *errstr) {
  switch (op->kind) {
    case OFI_OP_DATA:
      ofi_xfer_complete(d, (ofi_sub_t *)op, len, err, olen, errstr);
      break;
    case OFI_OP_CTRL_RECV: {
      ofi_ctrl_recv_t *r = (ofi_ctrl_recv_t *)op;
      int k = (int)(r - d->ctrl_recv);
      d->ctrl_recv_posted[k] = 0;
      if (err == 0) {
        ofi_conn_handle_ctrl(d, &r->msg, len);
      } else if (err != FI_ECANCELED) {
        STRAND_WARN("control message on %s dropped: %s (a peer sent something that is not a "
                 "strand-ofi control message, %zu bytes too long)",
                 d->name, errstr, olen);
      }
      if (d->open) post_ctrl_recv(d, k);
      break;
    }
    case OFI_OP_CTRL_SEND: {
      ofi_ctrl_send_t *cs = (ofi_ctrl_send_t *)op;
      cs->busy = false;
      cs->posted = false;
      ofi_conn_ctrl_sent(d, cs, err, errstr);
      break;
    }
    default:
      STRAND_WARN("completion with an unknown context on %s ignored", d->name);
  }
}

void ofi_progress(ofi_dev_t *d) {
  if (!d->open) return;
  struct fi_cq_tagged_entry e[OFI_CQ_BATCH];
  for (int b = 0; b < OFI_CQ_MAX_BATCHES; b++) {
    ssize_t n = fi_cq_read(d->cq, e, OFI_CQ_BATCH);
    if (n > 0) {
      for (ssize_t k = 0; k < n; k++)
        if (e[k].op_context) dispatch(d, e[k].op_context, e[k].len, 0, 0, NULL);
      if (n < OFI_CQ_BATCH) break;
    } else if (n == -FI_EAVAIL) {
      struct fi_cq_err_entry ee;
      memset(&ee, 0, sizeof ee);
      if (fi_cq_readerr(d->cq, &ee, 0) != 1) break;
      char buf[256];
      const char *ps = fi_cq_strerror(d->cq, ee.prov_errno, ee.err_data, buf, sizeof buf);
      char errstr[400];
      snprintf(errstr, sizeof errstr, "%s (provider %s: %s)", fi_strerror(ee.err), chosen_provider,
               ps ? ps : "no detail");
      if (ee.op_context) {
        dispatch(d, ee.op_context, ee.len, ee.err ? ee.err : FI_EOTHER, ee.olen, errstr);
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
    for (int k = 0; k < OFI_CTRL_SENDS; k++)
      if (d->ctrl_send[k].busy && !d->ctrl_send[k].posted) post_ctrl_send(d, &d->ctrl_send[k]);
  }
  if (d->ctrl_recv_short) {
    d->ctrl_recv_short = false;
    for (int k = 0; k < OFI_CTRL_RECVS; k++)
      if (!d->ctrl_recv_posted[k]) post_ctrl_recv(d, k);
  }
}
