/* strand-ofi — the bottom layer over libfabric: provider choice, device discovery, the per-device
 * fabric/domain/CQ/AV/endpoint, the address vector and error mapping. Calls only ofi_config.c.
 *
 * Provider: FI_PROVIDER (applied by libfabric itself) and/or STRAND_OFI_PROVIDER (our hint); with
 * neither, the first RDM+tagged provider fi_getinfo lists (libfabric orders by preference) that is
 * not loopback-only (shm, sm2) — a loopback-only one only when nothing else exists.
 * Devices: one per domain of that provider; the loopback interface only when it is all there is
 * or STRAND_OFI_DOMAINS names it. */
#include <dlfcn.h>
#include <stddef.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <netinet/in.h>

#include "ofi.h"
#include "strand/clock.h"
#include "strand/topo.h"

/* ------------------------------------------------------------------------------------------ */
/* error mapping                                                                                */

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
    case EPIPE:
    /* What the providers say about a peer that went away: sockets fails fi_tsend with -FI_ENOENT
     * once it cannot reconnect to the peer, and completes its receives with FI_EIO when the
     * peer's connection drops. The docs promise ncclRemoteError for a dead peer. */
    case FI_ENOENT:
    case FI_EIO:
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

/* Rails 1..STRAND_OFI_RAILS-1 of a device: further ofi_dev_t opened from the same fi_info, so
 * the same domain (NIC) with its own endpoint, CQ and AV. They share info and pci_path with rail
 * 0, which owns both; each has its own lock and opens lazily like rail 0. */
static strand_result_t add_rails(ofi_dev_t *d) {
  d->rails[0] = d;
  d->nrails = ofi_params.rails;
  for (int k = 1; k < d->nrails; k++) {
    ofi_dev_t *r = calloc(1, sizeof *r);
    if (!r) return STRAND_SYSTEM_ERROR;
    r->index = d->index;
    r->rail = k;
    snprintf(r->name, sizeof r->name, "%s", d->name);
    r->pci_path = d->pci_path;
    r->guid = d->guid;
    r->speed_mbps = d->speed_mbps;
    r->hmem = d->hmem;
    r->mr_mode = d->mr_mode;
    r->max_msg_size = d->max_msg_size;
    r->inject_size = d->inject_size;
    r->info = d->info;
    pthread_mutex_init(&r->lock, NULL);
    d->rails[k] = r;
  }
  return STRAND_SUCCESS;
}

/* libfabric has no call for a provider's settings: it reads them with getenv, some in the process's
 * first fi_getinfo, others at every fi_endpoint. strand-ofi gives a few of them its own default by
 * putting the value into the environment for exactly that call, only when the user has not set the
 * variable (the user's value always wins), and removing it right after, so the environment is as it
 * was (strand-conform's life.init-env-unchanged). setenv appends the variable at the end and
 * unsetenv removes it from there, so no other entry moves under a concurrent getenv, and glibc
 * grows its copy of the array only when another variable was added meanwhile. env_lock keeps our
 * own set/call/unset sequences apart (several rails may open endpoints at once). */
typedef struct {
  const char *var;
  bool set_here;
} env_default_t;

static pthread_mutex_t env_lock = PTHREAD_MUTEX_INITIALIZER;

static void env_default_push(env_default_t *e, const char *var, const char *value) {
  pthread_mutex_lock(&env_lock);
  e->var = var;
  e->set_here = !getenv(var) && setenv(var, value, 0) == 0;
}

static void env_default_pop(env_default_t *e) {
  if (e->set_here) unsetenv(e->var);
  pthread_mutex_unlock(&env_lock);
}

/* A further default for the same call, under the lock a push took; undone (before that push's
 * pop, in reverse order) by env_default_undo. */
static void env_default_also(env_default_t *e, const char *var, const char *value) {
  e->var = var;
  e->set_here = !getenv(var) && setenv(var, value, 0) == 0;
}

static void env_default_undo(env_default_t *e) {
  if (e->set_here) unsetenv(e->var);
}

/* ofi_rxm runs its connection manager from the data progress path at most once per
 * FI_OFI_RXM_CM_PROGRESS_INTERVAL microseconds (libfabric's default: 10000), and the tcp provider
 * (1.17) takes one queued TCP connection off its listening socket per such pass. So every
 * connection queued ahead of a legitimate peer's (silent strangers, scanners that already left)
 * costs that peer 10 ms of the listener's calls: 800 strangers that arrived while nobody called
 * kept a peer out for > 8 s, past the connect bound (issue 23). At 100 us the queue drains up to
 * 100 times faster (measured: those 800 in 1.0 s) for a pass per 100 us of polling. Read in the
 * process's first fi_getinfo. */
static const char RXM_CM_INTERVAL_VAR[] = "FI_OFI_RXM_CM_PROGRESS_INTERVAL";
static const char RXM_CM_INTERVAL_US[] = "100";

/* Over tcp, ofi_rxm sends every tagged message above its eager limit (16 KiB unless set) by
 * rendezvous: header, the receiver's read request, the data, "read done" — three one-way trips
 * where eager has one, two of them waiting for the other side's next progress call (its SAR
 * protocol is off whenever the core provider offers dynamic receive buffers, as tcp does). NCCL's
 * steps are up to 512 KiB (NCCL_BUFFSIZE / NCCL_STEPS), so all its mid-size and large transfers
 * paid it (docs/benchmarks/ofi.md, "ofi_rxm's protocol by message size"). FI_OFI_RXM_EAGER_LIMIT
 * raises the eager limit without enlarging ofi_rxm's buffer pools (FI_OFI_RXM_BUFFER_SIZE would);
 * ofi_rxm honours it only with direct send and dynamic receive buffers (tcp), and reads it in
 * fi_endpoint. */
static const char RXM_EAGER_VAR[] = "FI_OFI_RXM_EAGER_LIMIT";
static const char RXM_EAGER_BYTES[] = "524288";

/* ofi_rxm posts FI_OFI_RXM_MSG_RX_SIZE receive buffers (libfabric's default 128, each
 * FI_OFI_RXM_BUFFER_SIZE = 16 KiB plus a header) on every tcp connection, from a pool that grows by
 * about 17 MB at a time and zeroes each new chunk. With 128 a process's first connections outgrow
 * the chunks made at fi_enable, and the next chunk is made and zeroed inside the fi_cq_read that
 * accepts a connection during the first collectives: 8-11 ms inside one call (measured through
 * NCCL on an H200 host with STRAND_OFI_SLOW_MS, 0 context switches; an LD_PRELOADed memset on the
 * dev VM shows the 17,138,000-byte memset under ofi_test -> fi_cq_read), the "first-use stall"
 * of docs/benchmarks/ofi.md. With 64 the chunks made at fi_enable hold every connection of the
 * 1- and 4-rail runs measured, so no chunk is zeroed on the data path (and 4 rails zero 32 fewer
 * chunks at init). With dynamic receive buffers (tcp) tagged data goes straight into the posted
 * receive, so these buffers only take headers and unexpected small messages; NCCL keeps at most
 * 8 steps per channel in flight. Read in the process's first fi_getinfo. */
static const char RXM_MSG_RX_VAR[] = "FI_OFI_RXM_MSG_RX_SIZE";
static const char RXM_MSG_RX_BUFS[] = "64";

static bool provider_is_rxm(void) { return strstr(chosen_provider, "ofi_rxm") != NULL; }

static strand_result_t discover(void) {
  char user_value[32] = "";
  const char *env = getenv(RXM_CM_INTERVAL_VAR);
  if (env) snprintf(user_value, sizeof user_value, "%s", env);
  const char *user_interval = env ? user_value : NULL;
  env_default_t cm, msg_rx;
  env_default_push(&cm, RXM_CM_INTERVAL_VAR, RXM_CM_INTERVAL_US);
  env_default_also(&msg_rx, RXM_MSG_RX_VAR, RXM_MSG_RX_BUFS);
  struct fi_info *hints = make_hints(false);
  int rc = hints ? fi_getinfo(FI_VERSION(FI_MAJOR_VERSION, FI_MINOR_VERSION), NULL, NULL, 0,
                              hints, &all_infos)
                 : -FI_ENOMEM;
  env_default_undo(&msg_rx);
  env_default_pop(&cm);
  if (!hints) return STRAND_SYSTEM_ERROR;
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
  if (provider_is_rxm() && (user_interval || cm.set_here))
    STRAND_INFO(STRAND_SUBSYS_INIT | STRAND_SUBSYS_NET,
                "ofi_rxm connection manager pass at most every %s us (%s)",
                user_interval ? user_interval : RXM_CM_INTERVAL_US,
                user_interval ? "the user's FI_OFI_RXM_CM_PROGRESS_INTERVAL"
                              : "strand-ofi's default; libfabric initialised earlier in this "
                                "process keeps its own");
  if (provider_is_rxm()) {
    const char *user_rx = getenv(RXM_MSG_RX_VAR);
    STRAND_INFO(STRAND_SUBSYS_INIT | STRAND_SUBSYS_NET,
                "ofi_rxm receive buffers per connection: %s (%s)", user_rx ? user_rx : RXM_MSG_RX_BUFS,
                user_rx ? "the user's FI_OFI_RXM_MSG_RX_SIZE"
                        : msg_rx.set_here ? "strand-ofi's default; libfabric initialised earlier in "
                                            "this process keeps its own"
                                          : "libfabric's");
    const char *eager = getenv(RXM_EAGER_VAR);
    STRAND_INFO(STRAND_SUBSYS_INIT | STRAND_SUBSYS_NET,
                "ofi_rxm eager limit %s bytes (%s)", eager ? eager : RXM_EAGER_BYTES,
                eager ? "the user's FI_OFI_RXM_EAGER_LIMIT"
                      : "strand-ofi's default, set for its fi_endpoint calls only; "
                        "honoured over tcp");
  }

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
    d->inject_size = d->info->tx_attr ? d->info->tx_attr->inject_size : 0;
    pthread_mutex_init(&d->lock, NULL);
    describe_device(d, d->info);
    if (add_rails(d) != STRAND_SUCCESS) return STRAND_SYSTEM_ERROR;
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
  if (ofi_params.rails > 1)
    STRAND_INFO(STRAND_SUBSYS_INIT | STRAND_SUBSYS_NET,
                "%d rails per device, %s, threads off a rail a caller used in the last %llu us; "
                "speed reported %s; tuner bands %s (STRAND_OFI_RAILS, docs/plugins/ofi.md)",
                ofi_params.rails, ofi_params.rail_threads ? "a progress thread each" : "no threads",
                (unsigned long long)(ofi_params.rail_quiet_ns / 1000u),
                ofi_params.speed_mbps ? "from STRAND_OFI_SPEED_MBPS or the rails profile" : "as discovered",
                ofi_params.tuner_channels[0] ? ofi_params.tuner_channels : "none");
  for (int k = 0; k < ndevs; k++)
    STRAND_INFO(STRAND_SUBSYS_NET,
                "device %d: domain %s pciPath %s speed %d Mbps mr_mode 0x%llx%s, %d rail(s)", k,
                devs[k].name, devs[k].pci_path ? devs[k].pci_path : "(none)", devs[k].speed_mbps,
                (unsigned long long)devs[k].mr_mode, devs[k].hmem ? " FI_HMEM" : "",
                devs[k].nrails);
  return STRAND_SUCCESS;
}

/* Idempotent: discovery runs once per process; later calls (a new init after the last finalize
 * closed the endpoints) find the same devices, which reopen lazily. */
strand_result_t ofi_devs_init(void) {
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
  struct fi_cq_attr cq_attr = {.format = FI_CQ_FORMAT_TAGGED, .wait_obj = FI_WAIT_NONE};
  struct fi_av_attr av_attr = {.type = d->info->domain_attr->av_type};
  OFI_CHECK(fi_fabric(d->info->fabric_attr, &d->fabric, NULL), "fi_fabric");
  OFI_CHECK(fi_domain(d->fabric, d->info, &d->domain, NULL), "fi_domain");
  OFI_CHECK(fi_cq_open(d->domain, &cq_attr, &d->cq, NULL), "fi_cq_open");
  OFI_CHECK(fi_av_open(d->domain, &av_attr, &d->av, NULL), "fi_av_open");
  const bool rxm = provider_is_rxm();
  env_default_t eager = {0};
  if (rxm) env_default_push(&eager, RXM_EAGER_VAR, RXM_EAGER_BYTES);
  int ep_rc = fi_endpoint(d->domain, d->info, &d->ep, NULL);
  if (rxm) env_default_pop(&eager);
  OFI_CHECK(ep_rc, "fi_endpoint");
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
  d->next_id = (uint32_t)(strand_now_ms() & 0xffff) + 1; /* ids differ across restarts */
  return STRAND_SUCCESS;
fail:
  ofi_dev_close(d);
  return STRAND_SYSTEM_ERROR;
}

void ofi_dev_close_ep(ofi_dev_t *d) {
  if (d->ep) fi_close(&d->ep->fid);
  d->ep = NULL;
}

void ofi_dev_close(ofi_dev_t *d) {
  ofi_dev_close_ep(d);
  if (d->av) fi_close(&d->av->fid);
  if (d->cq) fi_close(&d->cq->fid);
  if (d->domain) fi_close(&d->domain->fid);
  if (d->fabric) fi_close(&d->fabric->fid);
  while (d->av_cache) {
    ofi_av_entry_t *e = d->av_cache;
    d->av_cache = e->next;
    free(e);
  }
  d->av = NULL, d->cq = NULL, d->domain = NULL, d->fabric = NULL;
  d->open = false;
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

/* Takes peer out of the cache (writing its printable address to s); false if it was not there. */
static bool av_cache_drop(ofi_dev_t *d, fi_addr_t peer, char *s, size_t len) {
  for (ofi_av_entry_t **p = &d->av_cache; *p; p = &(*p)->next) {
    ofi_av_entry_t *e = *p;
    if (e->addr != peer) continue;
    *p = e->next;
    ofi_addr_str(e->name, e->len, s, len);
    free(e);
    return true;
  }
  return false;
}

bool ofi_av_has(const ofi_dev_t *d, fi_addr_t peer) {
  for (const ofi_av_entry_t *e = d->av_cache; e; e = e->next)
    if (e->addr == peer) return true;
  return false;
}

void ofi_av_forget(ofi_dev_t *d, fi_addr_t peer, const char *why) {
  char s[64];
  if (av_cache_drop(d, peer, s, sizeof s))
    STRAND_INFO(STRAND_SUBSYS_NET, "connection to %s on %s lost (%s); address dropped from the AV",
                s, d->name, why);
  fi_av_remove(d->av, &peer, 1, 0);
}

void ofi_av_release(ofi_dev_t *d, fi_addr_t peer) {
  char s[64];
  if (!av_cache_drop(d, peer, s, sizeof s)) return;
  if (d->av) fi_av_remove(d->av, &peer, 1, 0);
  STRAND_INFO(STRAND_SUBSYS_NET, "address %s released from the AV of %s: no comm uses it", s,
              d->name);
}
