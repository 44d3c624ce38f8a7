/* Socket addresses, the NCCL_SOCKET_IFNAME / NCCL_SOCKET_FAMILY grammar and interface selection.
 * See strand/socket_addr.h for the contract; the policy mirrors NCCL's Socket transport (spec
 * §9.2) so that operators' existing settings keep their meaning. */
#include "strand/socket_addr.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <ifaddrs.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "strand/log.h"

/* ------------------------------------------------------------------------------------------ */
/* Addresses                                                                                   */

socklen_t strand_sockaddr_len(const strand_sockaddr_t *addr) {
  if (addr == NULL) return 0;
  switch (addr->sa.sa_family) {
  case AF_INET: return sizeof(struct sockaddr_in);
  case AF_INET6: return sizeof(struct sockaddr_in6);
  default: return 0;
  }
}

int strand_sockaddr_port(const strand_sockaddr_t *addr) {
  if (addr == NULL) return -1;
  switch (addr->sa.sa_family) {
  case AF_INET: return ntohs(addr->sin.sin_port);
  case AF_INET6: return ntohs(addr->sin6.sin6_port);
  default: return -1;
  }
}

void strand_sockaddr_set_port(strand_sockaddr_t *addr, uint16_t port) {
  if (addr == NULL) return;
  if (addr->sa.sa_family == AF_INET) addr->sin.sin_port = htons(port);
  else if (addr->sa.sa_family == AF_INET6) addr->sin6.sin6_port = htons(port);
}

const char *strand_sockaddr_to_string(const strand_sockaddr_t *addr, char *buf, size_t len) {
  if (buf == NULL || len == 0) return buf;
  char host[INET6_ADDRSTRLEN];
  if (addr == NULL || addr->sa.sa_family == AF_UNSPEC) {
    snprintf(buf, len, "<unspec>");
  } else if (addr->sa.sa_family == AF_INET) {
    if (inet_ntop(AF_INET, &addr->sin.sin_addr, host, sizeof(host)) == NULL) host[0] = '\0';
    snprintf(buf, len, "%s:%u", host, (unsigned)ntohs(addr->sin.sin_port));
  } else if (addr->sa.sa_family == AF_INET6) {
    if (inet_ntop(AF_INET6, &addr->sin6.sin6_addr, host, sizeof(host)) == NULL) host[0] = '\0';
    if (addr->sin6.sin6_scope_id != 0)
      snprintf(buf, len, "[%s%%%u]:%u", host, (unsigned)addr->sin6.sin6_scope_id,
               (unsigned)ntohs(addr->sin6.sin6_port));
    else
      snprintf(buf, len, "[%s]:%u", host, (unsigned)ntohs(addr->sin6.sin6_port));
  } else {
    snprintf(buf, len, "<family %d>", (int)addr->sa.sa_family);
  }
  return buf;
}

/* "1234" -> 1234; only plain decimal 0..65535 (no sign, no blanks). */
static bool parse_port(const char *s, uint16_t *port) {
  if (*s == '\0' || strlen(s) > 5) return false;
  unsigned v = 0;
  for (const char *p = s; *p; p++) {
    if (*p < '0' || *p > '9') return false;
    v = v * 10 + (unsigned)(*p - '0');
  }
  if (v > 65535) return false;
  *port = (uint16_t)v;
  return true;
}

/* Scope: an interface index ("2") or name ("eth0"). */
static bool parse_scope(const char *s, uint32_t *scope) {
  if (*s == '\0') return false;
  bool numeric = true;
  for (const char *p = s; *p; p++)
    if (*p < '0' || *p > '9') numeric = false;
  if (numeric) {
    if (strlen(s) > 10) return false;
    unsigned long v = strtoul(s, NULL, 10);
    if (v > UINT32_MAX) return false;
    *scope = (uint32_t)v;
    return true;
  }
  unsigned idx = if_nametoindex(s);
  if (idx == 0) return false;
  *scope = idx;
  return true;
}

/* IPv6 text with an optional "%scope", no brackets, no port. */
static bool parse_ipv6_host(const char *s, strand_sockaddr_t *out) {
  char host[INET6_ADDRSTRLEN + IF_NAMESIZE + 2];
  if (strlen(s) >= sizeof(host)) return false;
  strcpy(host, s);
  uint32_t scope = 0;
  char *pct = strchr(host, '%');
  if (pct != NULL) {
    *pct = '\0';
    if (!parse_scope(pct + 1, &scope)) return false;
  }
  struct in6_addr a6;
  if (inet_pton(AF_INET6, host, &a6) != 1) return false;
  out->sin6.sin6_family = AF_INET6;
  out->sin6.sin6_addr = a6;
  out->sin6.sin6_scope_id = scope;
  return true;
}

strand_result_t strand_sockaddr_from_string(const char *text, strand_sockaddr_t *out) {
  if (out == NULL) return STRAND_INVALID_ARGUMENT;
  memset(out, 0, sizeof(*out));
  if (text == NULL) return STRAND_INVALID_ARGUMENT;
  strand_sockaddr_t a;
  memset(&a, 0, sizeof(a));
  uint16_t port = 0;
  char tmp[STRAND_SOCKADDR_STRLEN];
  if (strlen(text) >= sizeof(tmp)) return STRAND_INVALID_ARGUMENT;
  strcpy(tmp, text);

  if (tmp[0] == '[') {
    char *close = strchr(tmp, ']');
    if (close == NULL) return STRAND_INVALID_ARGUMENT;
    *close = '\0';
    const char *rest = close + 1;
    if (*rest == ':') {
      if (!parse_port(rest + 1, &port)) return STRAND_INVALID_ARGUMENT;
    } else if (*rest != '\0') {
      return STRAND_INVALID_ARGUMENT;
    }
    if (!parse_ipv6_host(tmp + 1, &a)) return STRAND_INVALID_ARGUMENT;
  } else if (strchr(tmp, ':') != NULL && strchr(tmp, ':') != strrchr(tmp, ':')) {
    /* Two or more colons: bare IPv6, which cannot carry a port without brackets. */
    if (!parse_ipv6_host(tmp, &a)) return STRAND_INVALID_ARGUMENT;
  } else {
    char *colon = strchr(tmp, ':');
    if (colon != NULL) {
      *colon = '\0';
      if (!parse_port(colon + 1, &port)) return STRAND_INVALID_ARGUMENT;
    }
    struct in_addr a4;
    if (inet_pton(AF_INET, tmp, &a4) != 1) return STRAND_INVALID_ARGUMENT;
    a.sin.sin_family = AF_INET;
    a.sin.sin_addr = a4;
  }
  strand_sockaddr_set_port(&a, port);
  *out = a;
  return STRAND_SUCCESS;
}

static int cmp_int(long a, long b) { return (a > b) - (a < b); }

int strand_sockaddr_compare(const strand_sockaddr_t *a, const strand_sockaddr_t *b) {
  if (a == NULL || b == NULL) return cmp_int(a != NULL, b != NULL);
  int c = cmp_int(a->sa.sa_family, b->sa.sa_family);
  if (c != 0) return c;
  if (a->sa.sa_family == AF_INET) {
    c = memcmp(&a->sin.sin_addr, &b->sin.sin_addr, sizeof(a->sin.sin_addr));
    if (c != 0) return c;
    return cmp_int(ntohs(a->sin.sin_port), ntohs(b->sin.sin_port));
  }
  if (a->sa.sa_family == AF_INET6) {
    c = memcmp(&a->sin6.sin6_addr, &b->sin6.sin6_addr, sizeof(a->sin6.sin6_addr));
    if (c != 0) return c;
    c = cmp_int(ntohs(a->sin6.sin6_port), ntohs(b->sin6.sin6_port));
    if (c != 0) return c;
    return cmp_int(a->sin6.sin6_scope_id, b->sin6.sin6_scope_id);
  }
  return 0; /* same unknown family: nothing meaningful to compare */
}

bool strand_sockaddr_same_host(const strand_sockaddr_t *a, const strand_sockaddr_t *b) {
  if (a == NULL || b == NULL || a->sa.sa_family != b->sa.sa_family) return false;
  if (a->sa.sa_family == AF_INET)
    return memcmp(&a->sin.sin_addr, &b->sin.sin_addr, sizeof(a->sin.sin_addr)) == 0;
  if (a->sa.sa_family == AF_INET6)
    return memcmp(&a->sin6.sin6_addr, &b->sin6.sin6_addr, sizeof(a->sin6.sin6_addr)) == 0 &&
           a->sin6.sin6_scope_id == b->sin6.sin6_scope_id;
  return false;
}

bool strand_sockaddr_is_loopback(const strand_sockaddr_t *addr) {
  if (addr == NULL) return false;
  if (addr->sa.sa_family == AF_INET) return (ntohl(addr->sin.sin_addr.s_addr) >> 24) == 127;
  if (addr->sa.sa_family == AF_INET6) {
    const struct in6_addr *a6 = &addr->sin6.sin6_addr;
    if (IN6_IS_ADDR_LOOPBACK(a6)) return true;
    return IN6_IS_ADDR_V4MAPPED(a6) && a6->s6_addr[12] == 127;
  }
  return false;
}

bool strand_sockaddr_is_ipv6_link_local(const strand_sockaddr_t *addr) {
  return addr != NULL && addr->sa.sa_family == AF_INET6 &&
         IN6_IS_ADDR_LINKLOCAL(&addr->sin6.sin6_addr);
}

/* ------------------------------------------------------------------------------------------ */
/* NCCL_SOCKET_FAMILY                                                                          */

/* Copies `text` without leading/trailing blanks into buf; false if it does not fit. */
static bool trim_copy(const char *text, char *buf, size_t size) {
  while (*text == ' ' || *text == '\t' || *text == '\n' || *text == '\r') text++;
  size_t n = strlen(text);
  while (n > 0 && (text[n - 1] == ' ' || text[n - 1] == '\t' || text[n - 1] == '\n' ||
                   text[n - 1] == '\r'))
    n--;
  if (n >= size) return false;
  memcpy(buf, text, n);
  buf[n] = '\0';
  return true;
}

strand_result_t strand_socket_family_parse(const char *text, int *family) {
  if (family == NULL) return STRAND_INVALID_ARGUMENT;
  if (text == NULL) {
    *family = AF_UNSPEC;
    return STRAND_SUCCESS;
  }
  char word[16];
  bool fits = trim_copy(text, word, sizeof(word));
  if (fits && word[0] == '\0') {
    *family = AF_UNSPEC;
    return STRAND_SUCCESS;
  }
  if (fits && strcasecmp(word, "AF_INET") == 0) {
    *family = AF_INET;
    return STRAND_SUCCESS;
  }
  if (fits && strcasecmp(word, "AF_INET6") == 0) {
    *family = AF_INET6;
    return STRAND_SUCCESS;
  }
  STRAND_WARN("NCCL_SOCKET_FAMILY='%s' is not a socket family: use AF_INET (IPv4) or AF_INET6 "
              "(IPv6), or leave it unset to allow both",
              text);
  return STRAND_INVALID_USAGE;
}

/* ------------------------------------------------------------------------------------------ */
/* NCCL_SOCKET_IFNAME                                                                          */

static bool is_blank(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

/* Characters Linux refuses in interface names, plus the grammar's own markers. ':' stays legal:
 * getifaddrs reports IPv4 alias labels such as "eth0:1". */
static bool is_forbidden_in_item(char c) {
  return is_blank(c) || c == '/' || c == ',' || c == '^' || c == '=' ||
         iscntrl((unsigned char)c);
}

strand_result_t strand_if_filter_parse(const char *spec, strand_if_filter_t *filter) {
  if (filter == NULL) return STRAND_INVALID_ARGUMENT;
  memset(filter, 0, sizeof(*filter));
  filter->automatic = true;
  if (spec == NULL) return STRAND_SUCCESS;

  const char *p = spec;
  while (is_blank(*p)) p++;
  if (*p == '\0') return STRAND_SUCCESS;

  strand_if_filter_t f;
  memset(&f, 0, sizeof(f));
  if (*p == '^') {
    f.exclude = true;
    p++;
  }
  if (*p == '=') {
    f.exact = true;
    p++;
  }

  while (*p != '\0') {
    const char *end = strchr(p, ',');
    if (end == NULL) end = p + strlen(p);
    const char *b = p, *e = end;
    while (b < e && is_blank(*b)) b++;
    while (e > b && is_blank(e[-1])) e--;
    size_t n = (size_t)(e - b);
    if (n > 0) {
      if (n >= IF_NAMESIZE) {
        STRAND_WARN("NCCL_SOCKET_IFNAME='%s': item '%.*s' is longer than an interface name can be "
                    "(%d characters at most)",
                    spec, (int)n, b, IF_NAMESIZE - 1);
        return STRAND_INVALID_USAGE;
      }
      for (const char *c = b; c < e; c++) {
        if (is_forbidden_in_item(*c)) {
          STRAND_WARN("NCCL_SOCKET_IFNAME='%s': item '%.*s' contains '%c', which cannot be part "
                      "of an interface name; expected [^][=]name[,name...] (e.g. 'eth', "
                      "'^docker,lo', '=eth0,eth1')",
                      spec, (int)n, b, isprint((unsigned char)*c) ? *c : '?');
          return STRAND_INVALID_USAGE;
        }
      }
      if (f.count == STRAND_IF_FILTER_MAX_ITEMS) {
        STRAND_WARN("NCCL_SOCKET_IFNAME='%s' lists more than %d interfaces", spec,
                    STRAND_IF_FILTER_MAX_ITEMS);
        return STRAND_INVALID_USAGE;
      }
      memcpy(f.items[f.count], b, n);
      f.items[f.count][n] = '\0';
      f.count++;
    }
    p = (*end == ',') ? end + 1 : end;
  }

  if (f.count == 0) {
    STRAND_WARN("NCCL_SOCKET_IFNAME='%s' names no interface; expected [^][=]name[,name...] "
                "(e.g. 'eth', '^docker,lo', '=eth0,eth1'), or leave it unset for automatic choice",
                spec);
    return STRAND_INVALID_USAGE;
  }
  *filter = f;
  return STRAND_SUCCESS;
}

static bool item_matches(const strand_if_filter_t *f, const char *item, const char *ifname) {
  if (f->exact) return strcmp(item, ifname) == 0;
  return strncmp(item, ifname, strlen(item)) == 0;
}

bool strand_if_filter_match(const strand_if_filter_t *filter, const char *ifname) {
  if (ifname == NULL) return false;
  if (filter == NULL || filter->automatic) return true;
  bool any = false;
  for (int i = 0; i < filter->count && !any; i++) any = item_matches(filter, filter->items[i], ifname);
  return filter->exclude ? !any : any;
}

/* ------------------------------------------------------------------------------------------ */
/* Interface selection                                                                         */

int strand_netif_auto_rank(const char *ifname) {
  if (ifname == NULL) return 1;
  if (strncmp(ifname, "ib", 2) == 0) return 0;
  if (strncmp(ifname, "docker", 6) == 0) return 2;
  if (strncmp(ifname, "lo", 2) == 0) return 3;
  if (strncmp(ifname, "virbr", 5) == 0) return 4;
  return 1;
}

/* Preference of an address on one interface: lower is better. */
enum { ADDR_IPV4 = 0, ADDR_IPV6_GLOBAL = 1, ADDR_IPV6_LOCAL_ONLY = 2 };

static int addr_class(const strand_sockaddr_t *a) {
  if (a->sa.sa_family == AF_INET) return ADDR_IPV4;
  if (strand_sockaddr_is_ipv6_link_local(a) || IN6_IS_ADDR_LOOPBACK(&a->sin6.sin6_addr))
    return ADDR_IPV6_LOCAL_ONLY;
  return ADDR_IPV6_GLOBAL;
}

int strand_netif_select(const strand_netif_t *candidates, int n_candidates,
                        const strand_if_filter_t *filter, int family, strand_netif_t *out,
                        int max) {
  if (out == NULL || max <= 0 || candidates == NULL || n_candidates <= 0) return 0;
  if (max > STRAND_NETIF_MAX) max = STRAND_NETIF_MAX;
  bool automatic = (filter == NULL || filter->automatic);

  /* Steps 1-2: one best address per interface name, in first-seen name order. The working list
   * is bounded by the candidates, not by STRAND_NETIF_MAX: truncation happens last so that a
   * crowd of unusable interfaces cannot hide a good one. */
  strand_netif_t *best = calloc((size_t)n_candidates, sizeof(*best));
  int *cls = calloc((size_t)n_candidates, sizeof(*cls));
  if (best == NULL || cls == NULL) {
    free(best);
    free(cls);
    return 0;
  }
  int nbest = 0;
  for (int i = 0; i < n_candidates; i++) {
    const strand_netif_t *c = &candidates[i];
    const unsigned need = IFF_UP | IFF_RUNNING;
    if ((c->flags & need) != need) continue;
    int fam = c->addr.sa.sa_family;
    if (fam != AF_INET && fam != AF_INET6) continue;
    if (family != AF_UNSPEC && fam != family) continue;
    if (memchr(c->name, '\0', sizeof(c->name)) == NULL || c->name[0] == '\0') continue;
    if (!strand_if_filter_match(filter, c->name)) continue;
    int k = addr_class(&c->addr);
    int j;
    for (j = 0; j < nbest; j++)
      if (strcmp(best[j].name, c->name) == 0) break;
    if (j == nbest) {
      best[nbest] = *c;
      cls[nbest] = k;
      nbest++;
    } else if (k < cls[j]) {
      best[j] = *c;
      cls[j] = k;
    }
  }

  /* Step 3: link-local-only interfaces only when nothing better exists anywhere. */
  bool have_better = false;
  for (int j = 0; j < nbest; j++)
    if (cls[j] != ADDR_IPV6_LOCAL_ONLY) have_better = true;

  /* Step 4: automatic order keeps only the best non-empty rank group. */
  int keep_rank = -1;
  if (automatic) {
    for (int j = 0; j < nbest; j++) {
      if (have_better && cls[j] == ADDR_IPV6_LOCAL_ONLY) continue;
      int r = strand_netif_auto_rank(best[j].name);
      if (keep_rank < 0 || r < keep_rank) keep_rank = r;
    }
  }

  int n = 0;
  for (int j = 0; j < nbest && n < max; j++) {
    if (have_better && cls[j] == ADDR_IPV6_LOCAL_ONLY) continue;
    if (automatic && strand_netif_auto_rank(best[j].name) != keep_rank) continue;
    out[n++] = best[j];
  }
  free(best);
  free(cls);
  return n;
}

strand_result_t strand_netif_find(const strand_if_filter_t *filter, int family,
                                  strand_netif_t *out, int max, int *count) {
  if (out == NULL || count == NULL) return STRAND_INVALID_ARGUMENT;
  *count = 0;
  struct ifaddrs *list = NULL;
  if (getifaddrs(&list) != 0) {
    int err = errno;
    STRAND_WARN("getifaddrs failed: %s; cannot list network interfaces", strerror(err));
    return STRAND_SYSTEM_ERROR;
  }
  int total = 0;
  for (struct ifaddrs *ifa = list; ifa != NULL; ifa = ifa->ifa_next) total++;
  strand_netif_t *cands = calloc(total > 0 ? (size_t)total : 1, sizeof(*cands));
  if (cands == NULL) {
    freeifaddrs(list);
    STRAND_WARN("out of memory listing %d interface addresses", total);
    return STRAND_SYSTEM_ERROR;
  }
  int n = 0;
  for (struct ifaddrs *ifa = list; ifa != NULL; ifa = ifa->ifa_next) {
    if (ifa->ifa_addr == NULL || ifa->ifa_name == NULL) continue;
    int fam = ifa->ifa_addr->sa_family;
    if (fam != AF_INET && fam != AF_INET6) continue;
    if (strlen(ifa->ifa_name) >= IF_NAMESIZE) continue;
    strand_netif_t *c = &cands[n];
    strcpy(c->name, ifa->ifa_name);
    if (fam == AF_INET) memcpy(&c->addr.sin, ifa->ifa_addr, sizeof(c->addr.sin));
    else memcpy(&c->addr.sin6, ifa->ifa_addr, sizeof(c->addr.sin6));
    strand_sockaddr_set_port(&c->addr, 0);
    /* "eth0:1" is an alias label of eth0; the index belongs to the base name. */
    char base[IF_NAMESIZE];
    strcpy(base, c->name);
    char *colon = strchr(base, ':');
    if (colon != NULL) *colon = '\0';
    c->ifindex = (int)if_nametoindex(base);
    if (fam == AF_INET6 && strand_sockaddr_is_ipv6_link_local(&c->addr) &&
        c->addr.sin6.sin6_scope_id == 0)
      c->addr.sin6.sin6_scope_id = (uint32_t)c->ifindex;
    c->flags = ifa->ifa_flags;
    n++;
  }
  freeifaddrs(list);
  *count = strand_netif_select(cands, n, filter, family, out, max);
  free(cands);
  return STRAND_SUCCESS;
}

strand_result_t strand_netif_find_from_env(strand_netif_t *out, int max, int *count) {
  if (out == NULL || count == NULL) return STRAND_INVALID_ARGUMENT;
  *count = 0;
  const char *ifname_env = getenv("NCCL_SOCKET_IFNAME");
  const char *family_env = getenv("NCCL_SOCKET_FAMILY");
  strand_if_filter_t filter;
  int family = AF_UNSPEC;
  strand_result_t r = strand_if_filter_parse(ifname_env, &filter);
  if (r != STRAND_SUCCESS) return r;
  r = strand_socket_family_parse(family_env, &family);
  if (r != STRAND_SUCCESS) return r;
  r = strand_netif_find(&filter, family, out, max, count);
  if (r != STRAND_SUCCESS) return r;
  if (*count == 0) {
    STRAND_WARN("no usable network interface: NCCL_SOCKET_IFNAME=%s%s%s NCCL_SOCKET_FAMILY=%s; "
                "only interfaces that are UP and RUNNING with an IPv4/IPv6 address count. Check "
                "'ip addr' and the two variables",
                ifname_env ? "'" : "", ifname_env ? ifname_env : "(unset)", ifname_env ? "'" : "",
                family_env ? family_env : "(unset)");
    return STRAND_SYSTEM_ERROR;
  }
  return STRAND_SUCCESS;
}
