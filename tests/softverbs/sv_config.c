/* softverbs configuration: every SOFTVERBS_* variable goes through the SDK's params registry
 * (typed, range-checked, typo warnings). README.md lists the same knobs with their defaults. */
#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <errno.h>
#include <unistd.h>

#include "strand/log.h"
#include "strand/params.h"
#include "sv.h"

static const strand_param_def_t sv_params[] = {
  STRAND_PARAM_INT("SOFTVERBS_NDEVS", NULL, 1, 1, SV_MAX_DEVS, "number of devices (sv0, sv1, ...)"),
  STRAND_PARAM_INT("SOFTVERBS_NPORTS", NULL, 1, 1, SV_MAX_PORTS, "ports per device"),
  STRAND_PARAM_STRING("SOFTVERBS_IFNAME", NULL, NULL,
                      "interface whose IPv4 address is the GID and the listen address "
                      "(default: first UP non-loopback IPv4 interface, else lo)"),
  STRAND_PARAM_ENUM("SOFTVERBS_RATE_GBPS", NULL, "100",
                    STRAND_PARAM_CHOICES("10", "25", "40", "50", "100", "200", "400"),
                    "port rate reported by ibv_query_port (width x speed); no throttling"),
  STRAND_PARAM_ENUM("SOFTVERBS_MTU", NULL, "4096",
                    STRAND_PARAM_CHOICES("256", "512", "1024", "2048", "4096"), "active MTU"),
  STRAND_PARAM_INT("SOFTVERBS_DROP_PPM", NULL, 0, 0, 1000000,
                   "drop this many requests per million; each drop is retransmitted after the "
                   "QP's ACK timeout (capped), or ends in IBV_WC_RETRY_EXC_ERR after retry_cnt"),
  STRAND_PARAM_INT("SOFTVERBS_DELAY_PPM", NULL, 0, 0, 1000000,
                   "delay this many requests per million by SOFTVERBS_DELAY_US"),
  STRAND_PARAM_INT("SOFTVERBS_DELAY_US", NULL, 1000, 0, 10000000, "injected delay"),
  STRAND_PARAM_INT("SOFTVERBS_RETX_CAP_US", NULL, 10000, 1, 10000000,
                   "upper bound of the wait before retransmitting a dropped request"),
  STRAND_PARAM_INT("SOFTVERBS_FAIL_QP_AFTER", NULL, 0, 0, INT64_MAX / 2,
                   "each QP fails (IBV_EVENT_QP_FATAL, IBV_WC_GENERAL_ERR) when it starts its "
                   "(N+1)th send-queue WR; 0 = never"),
  STRAND_PARAM_INT("SOFTVERBS_PORT_DOWN_MS", NULL, 0, 0, 86400000,
                   "take the fault port down this many ms after the context is opened; 0 = never"),
  STRAND_PARAM_INT("SOFTVERBS_PORT_UP_MS", NULL, 0, 0, 86400000,
                   "bring it back up this many ms after it went down; 0 = stays down"),
  STRAND_PARAM_INT("SOFTVERBS_FATAL_MS", NULL, 0, 0, 86400000,
                   "raise IBV_EVENT_DEVICE_FATAL on the fault device this many ms after open"),
  STRAND_PARAM_STRING("SOFTVERBS_FAULT_DEV", NULL, "sv0", "device the port/device faults hit"),
  STRAND_PARAM_INT("SOFTVERBS_FAULT_PORT", NULL, 1, 1, SV_MAX_PORTS, "port the port faults hit"),
  STRAND_PARAM_BOOL("SOFTVERBS_TRACE", NULL, false, "log connections, errors and faults to stderr"),
};

static sv_config_t g_cfg;
static const sv_config_t *g_cfg_ok;
static pthread_once_t g_cfg_once = PTHREAD_ONCE_INIT;

void sv_log(const char *fmt, ...)
{
  char buf[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf, sizeof(buf), fmt, ap);
  va_end(ap);
  fprintf(stderr, "softverbs[%d]: %s\n", (int)getpid(), buf);
}

uint64_t sv_now_ns(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

uint32_t sv_rand_ppm(uint64_t *state)
{
  /* xorshift64*: cheap and good enough for fault injection. The state lives in the caller's
   * object (a QP, under the context lock), not in thread-local storage: this library is often
   * dlopen'ed, and dynamic TLS trips LeakSanitizer's thread scan at exit. */
  uint64_t s = *state;
  if (s == 0) s = sv_now_ns() ^ ((uint64_t)getpid() << 32) ^ (uint64_t)(uintptr_t)state;
  s ^= s >> 12;
  s ^= s << 25;
  s ^= s >> 27;
  *state = s;
  return (uint32_t)(((s * 2685821657736338717ull) >> 32) % 1000000u);
}

static int64_t get_int(const char *name, bool *ok)
{
  int64_t v = 0;
  if (strand_param_get_int(name, &v) != STRAND_SUCCESS) *ok = false;
  return v;
}

/* The interface: SOFTVERBS_IFNAME, else the first UP non-loopback IPv4 one, else lo. */
static bool pick_interface(const char *want, sv_config_t *cfg)
{
  struct ifaddrs *ifs = NULL;
  if (getifaddrs(&ifs) != 0) {
    sv_log("getifaddrs failed: %s", strerror(errno));
    return false;
  }
  bool found = false;
  for (int pass = 0; pass < 2 && !found; pass++) {
    for (struct ifaddrs *i = ifs; i; i = i->ifa_next) {
      if (!i->ifa_addr || i->ifa_addr->sa_family != AF_INET) continue;
      if (want) {
        if (strcmp(i->ifa_name, want) != 0) continue;
      } else {
        bool loop = (i->ifa_flags & IFF_LOOPBACK) != 0;
        if (!(i->ifa_flags & IFF_UP) || loop != (pass == 1)) continue;
      }
      snprintf(cfg->ifname, sizeof(cfg->ifname), "%s", i->ifa_name);
      cfg->ip = ((struct sockaddr_in *)i->ifa_addr)->sin_addr;
      found = true;
      break;
    }
    if (want) break;
  }
  freeifaddrs(ifs);
  if (!found)
    sv_log("SOFTVERBS_IFNAME=%s: no such interface with an IPv4 address (check `ip -4 addr`)",
           want ? want : "(unset)");
  return found;
}

static void load(void)
{
  sv_config_t *cfg = &g_cfg;
  strand_log_set_prefix("softverbs");
  if (strand_params_register(sv_params, STRAND_PARAM_COUNT(sv_params)) != STRAND_SUCCESS) return;
  strand_params_check_unknown("SOFTVERBS_");
  bool ok = true;
  cfg->ndevs = (int)get_int("SOFTVERBS_NDEVS", &ok);
  cfg->nports = (int)get_int("SOFTVERBS_NPORTS", &ok);
  cfg->drop_ppm = (uint32_t)get_int("SOFTVERBS_DROP_PPM", &ok);
  cfg->delay_ppm = (uint32_t)get_int("SOFTVERBS_DELAY_PPM", &ok);
  cfg->delay_us = (uint32_t)get_int("SOFTVERBS_DELAY_US", &ok);
  cfg->retx_cap_us = (uint32_t)get_int("SOFTVERBS_RETX_CAP_US", &ok);
  cfg->fail_qp_after = (uint64_t)get_int("SOFTVERBS_FAIL_QP_AFTER", &ok);
  cfg->port_down_ms = (uint32_t)get_int("SOFTVERBS_PORT_DOWN_MS", &ok);
  cfg->port_up_ms = (uint32_t)get_int("SOFTVERBS_PORT_UP_MS", &ok);
  cfg->fatal_ms = (uint32_t)get_int("SOFTVERBS_FATAL_MS", &ok);
  cfg->fault_port = (int)get_int("SOFTVERBS_FAULT_PORT", &ok);
  if (strand_param_get_bool("SOFTVERBS_TRACE", &cfg->trace) != STRAND_SUCCESS) ok = false;
  const char *s = NULL;
  if (strand_param_get_string("SOFTVERBS_FAULT_DEV", &s) != STRAND_SUCCESS) ok = false;
  snprintf(cfg->fault_dev, sizeof(cfg->fault_dev), "%s", s ? s : "");
  int idx = 0;
  const char *word = NULL;
  if (strand_param_get_enum("SOFTVERBS_RATE_GBPS", &idx, &word) != STRAND_SUCCESS) ok = false;
  /* rate = lanes x per-lane speed, in the IB encodings (width: 1=1x 2=4x; speed: 1=SDR 2.5G,
   * 4=QDR 10G, 32=EDR 25G, 64=HDR 50G, 128=NDR 100G) */
  static const struct { int gbps; uint8_t width, speed; } rates[] = {
    {10, 2, 1}, {25, 1, 32}, {40, 2, 4}, {50, 1, 64}, {100, 2, 32}, {200, 2, 64}, {400, 2, 128}};
  cfg->rate_gbps = rates[idx].gbps;
  cfg->active_width = rates[idx].width;
  cfg->active_speed = rates[idx].speed;
  if (strand_param_get_enum("SOFTVERBS_MTU", &idx, &word) != STRAND_SUCCESS) ok = false;
  cfg->active_mtu = (enum ibv_mtu)(IBV_MTU_256 + idx);
  if (strand_param_get_string("SOFTVERBS_IFNAME", &s) != STRAND_SUCCESS) ok = false;
  if (ok && !pick_interface(s, cfg)) ok = false;
  if (ok) g_cfg_ok = cfg;
}

const sv_config_t *sv_config(void)
{
  pthread_once(&g_cfg_once, load);
  return g_cfg_ok;
}
