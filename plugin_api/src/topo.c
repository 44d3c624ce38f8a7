/* sysfs topology of network interfaces (PCI path, NUMA node, speed, PCI ids) and NUMA CPU sets.
 * Contract: strand/topo.h. Every read goes through sysfs_path() so tests can swap in a fake tree;
 * nothing here is an error merely because a file is missing: sysfs contents vary by kernel,
 * driver and virtualisation, and an unknown fact falls back to "unknown". */
#include "strand/topo.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <net/if.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "strand/log.h"

/* "" = the real root; otherwise an absolute or relative directory without a trailing '/'. */
static char g_root[PATH_MAX];

strand_result_t strand_topo_set_root(const char *root) {
  if (root == NULL || root[0] == '\0') {
    g_root[0] = '\0';
    return STRAND_SUCCESS;
  }
  size_t n = strlen(root);
  if (n >= sizeof(g_root)) return STRAND_INVALID_ARGUMENT;
  while (n > 1 && root[n - 1] == '/') n--;
  if (n == 1 && root[0] == '/') n = 0; /* "/" is the real root */
  memcpy(g_root, root, n);
  g_root[n] = '\0';
  return STRAND_SUCCESS;
}

const char *strand_topo_root(void) { return g_root; }

/* Builds root + formatted path ("/sys/..."); false if it does not fit. */
__attribute__((format(printf, 3, 4))) static bool sysfs_path(char *buf, size_t size,
                                                             const char *fmt, ...) {
  int n = snprintf(buf, size, "%s", g_root);
  if (n < 0 || (size_t)n >= size) return false;
  va_list ap;
  va_start(ap, fmt);
  int m = vsnprintf(buf + n, size - (size_t)n, fmt, ap);
  va_end(ap);
  return m >= 0 && (size_t)m < size - (size_t)n;
}

/* Reads a small sysfs file into buf (NUL-terminated, trailing newline removed). */
static bool read_small_file(const char *path, char *buf, size_t size) {
  FILE *f = fopen(path, "re");
  if (f == NULL) return false;
  size_t n = fread(buf, 1, size - 1, f);
  bool ok = !ferror(f);
  fclose(f);
  if (!ok) return false; /* e.g. EINVAL reading the speed of a link that is down */
  buf[n] = '\0';
  while (n > 0 && isspace((unsigned char)buf[n - 1])) buf[--n] = '\0';
  return true;
}

/* Parses a whole decimal or 0x-hex integer; false on junk. */
static bool parse_long(const char *s, int base, long *out) {
  if (s[0] == '\0') return false;
  char *end = NULL;
  errno = 0;
  long v = strtol(s, &end, base);
  if (errno != 0 || end == s || *end != '\0') return false;
  *out = v;
  return true;
}

/* "0000:00:03.0": domain (4+ hex digits), bus (2), device (2), function (1, octal digit). */
static bool is_pci_function_name(const char *name, size_t len) {
  size_t i = 0, d = 0;
  while (i < len && isxdigit((unsigned char)name[i])) i++, d++;
  if (d < 4 || i >= len || name[i] != ':') return false;
  i++;
  for (int k = 0; k < 2; k++, i++)
    if (i >= len || !isxdigit((unsigned char)name[i])) return false;
  if (i >= len || name[i] != ':') return false;
  i++;
  for (int k = 0; k < 2; k++, i++)
    if (i >= len || !isxdigit((unsigned char)name[i])) return false;
  if (i >= len || name[i] != '.') return false;
  i++;
  if (i >= len || name[i] < '0' || name[i] > '7') return false;
  return i + 1 == len;
}

/* Cuts `path` after its deepest PCI-function component; false if it has none or lies under
 * /sys/devices/virtual. */
static bool trim_to_pci_function(char *path) {
  if (strstr(path, "/devices/virtual/") != NULL) return false;
  size_t best_end = 0;
  const char *p = path;
  while (*p != '\0') {
    while (*p == '/') p++;
    const char *start = p;
    while (*p != '\0' && *p != '/') p++;
    if (p > start && is_pci_function_name(start, (size_t)(p - start))) best_end = (size_t)(p - path);
  }
  if (best_end == 0) return false;
  path[best_end] = '\0';
  return true;
}

static void topo_init_unknown(strand_netif_topo_t *t) {
  memset(t, 0, sizeof(*t));
  t->pci_path = NULL;
  t->is_virtual = true;
  t->numa_node = -1;
  t->speed_mbps = STRAND_TOPO_DEFAULT_SPEED_MBPS;
  t->speed_known = false;
  t->vendor_id = -1;
  t->device_id = -1;
}

/* realpath of root + rel, expressed without the root; NULL if it cannot be resolved. */
static char *resolve_without_root(const char *full) {
  char *resolved = realpath(full, NULL);
  if (resolved == NULL) return NULL;
  if (g_root[0] == '\0') return resolved;
  char *root_real = realpath(g_root, NULL);
  if (root_real == NULL) return resolved;
  size_t rn = strlen(root_real);
  if (strncmp(resolved, root_real, rn) == 0 && (resolved[rn] == '/' || resolved[rn] == '\0')) {
    memmove(resolved, resolved + rn, strlen(resolved + rn) + 1);
    if (resolved[0] == '\0') strcpy(resolved, "/");
  }
  free(root_real);
  return resolved;
}

static int read_int_file(const char *path, int base, int fallback) {
  char buf[64];
  long v;
  if (!read_small_file(path, buf, sizeof(buf)) || !parse_long(buf, base, &v)) return fallback;
  if (v < INT_MIN || v > INT_MAX) return fallback;
  return (int)v;
}

strand_result_t strand_topo_netif(const char *ifname, int default_speed_mbps,
                                  strand_netif_topo_t *topo) {
  if (topo == NULL) return STRAND_INVALID_ARGUMENT;
  topo_init_unknown(topo);
  int fallback_speed = default_speed_mbps > 0 ? default_speed_mbps : STRAND_TOPO_DEFAULT_SPEED_MBPS;
  topo->speed_mbps = fallback_speed;
  if (ifname == NULL || ifname[0] == '\0' || strlen(ifname) >= IF_NAMESIZE ||
      strchr(ifname, '/') != NULL || strcmp(ifname, ".") == 0 || strcmp(ifname, "..") == 0)
    return STRAND_INVALID_ARGUMENT;

  char path[PATH_MAX];
  struct stat st;
  if (!sysfs_path(path, sizeof(path), "/sys/class/net/%s", ifname)) return STRAND_INVALID_ARGUMENT;
  if (stat(path, &st) != 0) {
    STRAND_WARN("network interface '%s' not found (%s: %s); check NCCL_SOCKET_IFNAME and "
                "'ip link'",
                ifname, path, strerror(errno));
    return STRAND_INVALID_USAGE;
  }

  /* Speed: absent, unreadable (link down: EINVAL), or <= 0 (-1 = unknown) -> caller default. */
  if (sysfs_path(path, sizeof(path), "/sys/class/net/%s/speed", ifname)) {
    int speed = read_int_file(path, 10, -1);
    if (speed > 0) {
      topo->speed_mbps = speed;
      topo->speed_known = true;
    }
  }

  /* PCI function behind the interface, if any. */
  if (!sysfs_path(path, sizeof(path), "/sys/class/net/%s/device", ifname)) return STRAND_SUCCESS;
  char *dev = resolve_without_root(path);
  if (dev == NULL) {
    if (errno == ENOMEM) return STRAND_SYSTEM_ERROR;
    return STRAND_SUCCESS; /* lo, veth, bridges: no device link */
  }
  if (!trim_to_pci_function(dev)) {
    free(dev);
    return STRAND_SUCCESS;
  }
  topo->pci_path = dev;
  topo->is_virtual = false;
  if (sysfs_path(path, sizeof(path), "%s/numa_node", dev)) {
    int node = read_int_file(path, 10, -1);
    topo->numa_node = node >= 0 ? node : -1;
  }
  if (sysfs_path(path, sizeof(path), "%s/vendor", dev)) topo->vendor_id = read_int_file(path, 16, -1);
  if (sysfs_path(path, sizeof(path), "%s/device", dev)) topo->device_id = read_int_file(path, 16, -1);
  return STRAND_SUCCESS;
}

void strand_topo_netif_free(strand_netif_topo_t *topo) {
  if (topo == NULL) return;
  free(topo->pci_path);
  topo->pci_path = NULL;
}

int strand_topo_num_cpus(void) {
  long n = sysconf(_SC_NPROCESSORS_ONLN);
  return n >= 1 && n <= INT_MAX ? (int)n : 1;
}

/* Reads a CPU number at *p; false if there is none or it is out of range. */
static bool parse_cpu(const char **p, long *cpu) {
  if (!isdigit((unsigned char)**p)) return false;
  char *end = NULL;
  errno = 0;
  long v = strtol(*p, &end, 10);
  if (errno != 0 || v < 0 || v >= CPU_SETSIZE) return false;
  *p = end;
  *cpu = v;
  return true;
}

strand_result_t strand_topo_parse_cpulist(const char *text, cpu_set_t *set) {
  if (text == NULL || set == NULL) return STRAND_INVALID_ARGUMENT;
  CPU_ZERO(set);
  const char *p = text;
  while (isspace((unsigned char)*p)) p++;
  if (*p == '\0') return STRAND_SUCCESS;
  for (;;) {
    long lo, hi;
    if (!parse_cpu(&p, &lo)) goto bad;
    hi = lo;
    if (*p == '-') {
      p++;
      if (!parse_cpu(&p, &hi) || hi < lo) goto bad;
    }
    for (long c = lo; c <= hi; c++) CPU_SET((int)c, set);
    while (*p == ' ' || *p == '\t') p++;
    if (*p == ',') {
      p++;
      while (*p == ' ' || *p == '\t') p++;
      continue;
    }
    while (isspace((unsigned char)*p)) p++;
    if (*p == '\0') return STRAND_SUCCESS;
    goto bad;
  }
bad:
  CPU_ZERO(set);
  return STRAND_INVALID_ARGUMENT;
}

strand_result_t strand_topo_numa_cpus(int node, cpu_set_t *set) {
  if (set == NULL || node < 0) return STRAND_INVALID_ARGUMENT;
  CPU_ZERO(set);
  char path[PATH_MAX], buf[4096];
  if (!sysfs_path(path, sizeof(path), "/sys/devices/system/node/node%d/cpulist", node))
    return STRAND_INVALID_ARGUMENT;
  if (!read_small_file(path, buf, sizeof(buf))) return STRAND_SYSTEM_ERROR;
  return strand_topo_parse_cpulist(buf, set);
}

strand_result_t strand_topo_pin_thread_to_numa(int node, bool *pinned) {
  if (pinned != NULL) *pinned = false;
  if (node < 0) return STRAND_SUCCESS;
  cpu_set_t want, allowed, both;
  if (strand_topo_numa_cpus(node, &want) != STRAND_SUCCESS) {
    STRAND_INFO(STRAND_SUBSYS_INIT | STRAND_SUBSYS_NET,
                "NUMA node %d: cpulist unreadable, thread placement left unchanged", node);
    return STRAND_SUCCESS;
  }
  int rc = pthread_getaffinity_np(pthread_self(), sizeof(allowed), &allowed);
  if (rc != 0) {
    STRAND_WARN("pthread_getaffinity_np failed: %s; thread not pinned to NUMA node %d",
                strerror(rc), node);
    return STRAND_SYSTEM_ERROR;
  }
  CPU_AND(&both, &want, &allowed);
  if (CPU_COUNT(&both) == 0) {
    STRAND_INFO(STRAND_SUBSYS_INIT | STRAND_SUBSYS_NET,
                "NUMA node %d: none of its CPUs is allowed for this thread, placement left "
                "unchanged",
                node);
    return STRAND_SUCCESS;
  }
  rc = pthread_setaffinity_np(pthread_self(), sizeof(both), &both);
  if (rc != 0) {
    STRAND_WARN("pthread_setaffinity_np to the %d CPUs of NUMA node %d failed: %s", CPU_COUNT(&both),
                node, strerror(rc));
    return STRAND_SYSTEM_ERROR;
  }
  if (pinned != NULL) *pinned = true;
  return STRAND_SUCCESS;
}
