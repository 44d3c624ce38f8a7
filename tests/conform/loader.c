/* strand-conform — loading a plugin exactly as NCCL 2.30 does (spec §1.1-§1.3):
 * the NCCL_NET_PLUGIN list grammar, the libnccl-net-<S>.so rewrite, newest-first probing of the
 * ncclNetPlugin_vN / ncclCollNetPlugin_vN data symbols, and NCCL_NET matching by name. */
#include <ctype.h>
#include <dlfcn.h>
#include <link.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "conform_internal.h"

#define MAX_EXTERNAL_CANDIDATES (STRAND_NET_MAX_PLUGINS - 2) /* 2 slots kept for IB and Socket */

static void logf_append(conform_plugin_t *p, const char *fmt, ...) {
  size_t used = strlen(p->load_log);
  if (used + 2 >= sizeof p->load_log) return;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(p->load_log + used, sizeof p->load_log - used, fmt, ap);
  va_end(ap);
  used = strlen(p->load_log);
  if (used + 1 < sizeof p->load_log) strcat(p->load_log, "\n");
}

int conform_plugin_candidates(const char *value, char out[][256], int max) {
  if (!value) {
    if (max > 0) snprintf(out[0], 256, "libnccl-net.so");
    return max > 0 ? 1 : 0;
  }
  if (strcasecmp(value, "none") == 0) return 0;
  int n = 0;
  const char *s = value;
  while (*s && n < max && n < MAX_EXTERNAL_CANDIDATES) {
    const char *comma = strchr(s, ',');
    size_t len = comma ? (size_t)(comma - s) : strlen(s);
    /* strtok semantics: empty items vanish; NCCL ignores items that do not fit its 255-byte
     * buffer (longer than 254 characters). */
    if (len > 0 && len <= 254) {
      memcpy(out[n], s, len);
      out[n][len] = '\0';
      n++;
    }
    if (!comma) break;
    s = comma + 1;
  }
  return n;
}

const char *conform_plugin_rewrite(const char *s, char *buf, size_t len) {
  if (strchr(s, '/')) return NULL;
  size_t sl = strlen(s);
  bool lib_so = sl >= 6 && strncmp(s, "lib", 3) == 0 && strcmp(s + sl - 3, ".so") == 0;
  if (lib_so) return NULL;
  snprintf(buf, len, "libnccl-net-%s.so", s);
  return buf;
}

static const char *sym_name(bool collnet, int v, char *buf, size_t len) {
  snprintf(buf, len, "%s_v%d", collnet ? "ncclCollNetPlugin" : "ncclNetPlugin", v);
  return buf;
}

const void *conform_plugin_symbol(const conform_plugin_t *p, bool collnet, int version) {
  char name[64];
  if (!p->dl) return NULL;
  return dlsym(p->dl, sym_name(collnet, version, name, sizeof name));
}

/* dlopen as NCCL's opener does: the string as given, then the rewritten name (§1.1). */
static void *open_candidate(conform_plugin_t *p, const char *s) {
  char rewritten[300];
  void *h = dlopen(s, RTLD_NOW | RTLD_LOCAL);
  if (h) {
    logf_append(p, "dlopen(\"%s\") ok", s);
    return h;
  }
  logf_append(p, "dlopen(\"%s\") failed: %s", s, dlerror());
  const char *rw = conform_plugin_rewrite(s, rewritten, sizeof rewritten);
  if (!rw) return NULL;
  h = dlopen(rw, RTLD_NOW | RTLD_LOCAL);
  if (h) {
    logf_append(p, "dlopen(\"%s\") ok (libnccl-net-<name>.so rewrite)", rw);
    return h;
  }
  logf_append(p, "dlopen(\"%s\") failed: %s", rw, dlerror());
  return NULL;
}

static const char *table_name(const void *table) {
  /* Slot 0 of every net and CollNet table is `const char *name`. */
  return table ? *(const char *const *)table : NULL;
}

/* The one-sided tables, in the order NCCL looks them up (newest core first): 2.30's RMA loader
 * takes ncclRmaPlugin_v14, then ncclRmaPlugin_v13, then ncclGinPlugin_v13 as a v13 RMA; 2.29 and
 * 2.28 take ncclGinPlugin_v12 / _v11 in GIN proxy mode. ncclGinPlugin_v14 is device-side only. */
static const conform_rma_sym_t rma_probe[] = {
  {"ncclRmaPlugin_v14", 14, false, true, NULL}, {"ncclRmaPlugin_v13", 13, false, true, NULL},
  {"ncclGinPlugin_v13", 13, true, true, NULL},  {"ncclGinPlugin_v12", 12, true, true, NULL},
  {"ncclGinPlugin_v11", 11, true, true, NULL},  {"ncclGinPlugin_v14", 14, true, false, NULL},
};

static void probe_rma(conform_plugin_t *p) {
  p->n_rma_found = 0;
  for (size_t i = 0; i < sizeof rma_probe / sizeof rma_probe[0]; i++) {
    const void *t = dlsym(p->dl, rma_probe[i].symbol);
    if (!t) continue;
    p->rma_found[p->n_rma_found] = rma_probe[i];
    p->rma_found[p->n_rma_found++].table = t;
  }
}

/* The host-data-path table to drive: --rma-abi's version, else the first NCCL would take. */
static void select_rma(conform_plugin_t *p) {
  p->rma_version = 0;
  p->rma_symbol = NULL;
  p->raw_rma = NULL;
  for (int i = 0; i < p->n_rma_found; i++) {
    const conform_rma_sym_t *s = &p->rma_found[i];
    if (!s->data_path) continue;
    if (conform_opts.rma_abi_forced && s->version != conform_opts.rma_abi_forced) continue;
    p->rma_version = s->version;
    p->rma_symbol = s->symbol;
    p->raw_rma = s->table;
    break;
  }
  if (p->raw_rma) logf_append(p, "one-sided table under test: %s", p->rma_symbol);
  conform_upgrade_rma(p);
}

int conform_plugin_select(conform_plugin_t *p, int abi, char *err, size_t errlen) {
  int v = 0;
  if (abi) {
    for (int i = 0; i < p->n_net_versions; i++)
      if (p->net_versions[i] == abi) v = abi;
    if (!v) {
      snprintf(err, errlen, "--abi v%d: the library does not export ncclNetPlugin_v%d", abi, abi);
      return -1;
    }
  } else {
    v = p->net_versions[0];
  }
  p->version = v;
  p->raw_net = conform_plugin_symbol(p, false, v);
  /* CollNet is probed independently, newest first (§1.2); the versions are not tied. */
  p->collnet_version = p->n_collnet_versions ? p->collnet_versions[0] : 0;
  p->raw_collnet = p->collnet_version ? conform_plugin_symbol(p, true, p->collnet_version) : NULL;
  conform_upgrade_net(p);
  conform_upgrade_collnet(p);
  if (p->n_rma_found == 0) probe_rma(p);
  select_rma(p);
  return 0;
}

int conform_plugin_load(const char *arg, int abi, conform_plugin_t *p, char *err, size_t errlen) {
  memset(p, 0, sizeof *p);
  char cands[MAX_EXTERNAL_CANDIDATES][256];
  const char *source = arg ? "PLUGIN argument" : "NCCL_NET_PLUGIN";
  const char *value = arg ? arg : getenv("NCCL_NET_PLUGIN");
  int n = conform_plugin_candidates(value, cands, MAX_EXTERNAL_CANDIDATES);
  if (n == 0) {
    snprintf(err, errlen, "%s=\"%s\" names no external plugin (\"none\" or empty list): NCCL would "
             "use only its internal IB/Socket transports", source, value ? value : "");
    return -1;
  }
  const char *want_name = getenv("NCCL_NET");
  for (int i = 0; i < n; i++) {
    void *h = open_candidate(p, cands[i]);
    if (!h) continue;
    p->dl = h;
    char name[64];
    p->n_net_versions = p->n_collnet_versions = 0;
    for (int v = 12; v >= 6; v--) {
      if (dlsym(h, sym_name(false, v, name, sizeof name)))
        p->net_versions[p->n_net_versions++] = v;
      if (dlsym(h, sym_name(true, v, name, sizeof name)))
        p->collnet_versions[p->n_collnet_versions++] = v;
    }
    if (p->n_net_versions == 0) {
      logf_append(p, "%s: no ncclNetPlugin_v6..v12 symbol (NCCL: \"unsupported\"); closed",
                  cands[i]);
      dlclose(h);
      p->dl = NULL;
      continue;
    }
    const char *tname = table_name(conform_plugin_symbol(p, false, p->net_versions[0]));
    if (want_name && (!tname || strcasecmp(want_name, tname) != 0)) {
      /* NCCL skips a loaded plugin whose name does not match NCCL_NET (§1.3 step 2). */
      logf_append(p, "%s: name \"%s\" does not match NCCL_NET=\"%s\"; NCCL would skip it",
                  cands[i], tname ? tname : "(null)", want_name);
      dlclose(h);
      p->dl = NULL;
      continue;
    }
    snprintf(p->candidate, sizeof p->candidate, "%s", cands[i]);
    struct link_map *lm = NULL;
    if (dlinfo(h, RTLD_DI_LINKMAP, &lm) == 0 && lm && lm->l_name && lm->l_name[0])
      snprintf(p->resolved, sizeof p->resolved, "%s", lm->l_name);
    else
      snprintf(p->resolved, sizeof p->resolved, "%s", cands[i]);
    return conform_plugin_select(p, abi, err, errlen);
  }
  snprintf(err, errlen, "no usable plugin among %d candidate(s) from %s:\n%s", n, source,
           p->load_log);
  return -1;
}
