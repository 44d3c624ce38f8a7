/* strand-conform --plugin-report: one page about a plugin for its author — the versions it exports,
 * its devices as NCCL's topology reads them, and every failure of the run grouped by cause, with
 * the spec clause (docs/spec/nccl-net-abi.md) and what NCCL would do about it.
 *
 * The devices come from one extra check child (report.devices, run first and only under
 * --plugin-report): the coordinator never loads the plugin, so a child inits it and prints one
 * line per device, marked so that the page finds them among the plugin's own log lines. */
#include <fnmatch.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "conform_internal.h"

#define DEV_MARK "@strand-device "

static const char *ptr_str(int s, char *buf, size_t len) {
  snprintf(buf, len, "%s%s%s%s", s & STRAND_PTR_HOST ? "HOST" : "",
           s & STRAND_PTR_CUDA ? (s & STRAND_PTR_HOST ? "|CUDA" : "CUDA") : "",
           s & STRAND_PTR_DMABUF ? (s & (STRAND_PTR_HOST | STRAND_PTR_CUDA) ? "|DMABUF" : "DMABUF") : "",
           s ? "" : "none");
  return buf;
}

static const char *type_str(int t) {
  return t == STRAND_DEV_HOST ? "HOST" : t == STRAND_DEV_UNPACK ? "UNPACK" : "other";
}

/* Rank 0 prints every device as getProperties gives it (through the adapted table: what NCCL's
 * core holds after its own conversion of an older layout). Names are printed with %.255s and
 * escaped: a name without a NUL must not take the page with it. */
static conform_status_t report_devices(conform_ctx_t *c) {
  if (c->rank != 0) return CONFORM_PASS;
  for (int dev = 0; dev < c->ndev; dev++) {
    strand_props_v12_t p;
    if (conform_props(c, dev, &p)) {
      printf(DEV_MARK "dev %d: getProperties failed: %s\n", dev, c->msg);
      continue;
    }
    char name[256 * 4 + 1] = "(null)", ptr[32];
    if (p.name) {
      size_t o = 0;
      for (size_t i = 0; i < 255 && p.name[i]; i++) {
        unsigned char ch = (unsigned char)p.name[i];
        o += (size_t)snprintf(name + o, sizeof name - o, ch >= 0x20 && ch < 0x7f ? "%c" : "\\x%02x", ch);
      }
      name[o] = '\0';
    }
    char vp[64] = "";
    for (int i = 0; i < p.vProps.ndevs && i < STRAND_NET_MAX_DEVS_PER_NIC_V12; i++)
      snprintf(vp + strlen(vp), sizeof vp - strlen(vp), "%s%d", i ? "," : "", p.vProps.devs[i]);
    printf(DEV_MARK "dev %d  name \"%s\"  pciPath %s  guid 0x%llx  speed %d Mbps  port %d  latency %g us\n",
           dev, name, p.pciPath ? p.pciPath : "(null: virtual)", (unsigned long long)p.guid, p.speed,
           p.port, (double)p.latency);
    printf(DEV_MARK "       ptrSupport %s  regIsGlobal %d  forceFlush %d  maxComms %d  maxRecvs %d  "
           "type %s/0x%x\n", ptr_str(p.ptrSupport, ptr, sizeof ptr), p.regIsGlobal, p.forceFlush,
           p.maxComms, p.maxRecvs, type_str(p.netDeviceType), (unsigned)p.netDeviceVersion);
    printf(DEV_MARK "       maxP2pBytes %zu  maxCollBytes %zu  maxMultiRequestSize %d  vProps {%s}  "
           "railId %d  planeId %d\n", p.maxP2pBytes, p.maxCollBytes, p.maxMultiRequestSize, vp,
           p.railId, p.planeId);
  }
  if (c->ndev == 0) printf(DEV_MARK "no device: devices() returned 0 (the plugin's hardware is absent)\n");
  fflush(stdout);
  return CONFORM_PASS;
}

const conform_check_t conform_report_devices_check = {
  "report.devices", "§2.6", "the plugin's devices as NCCL reads them (--plugin-report only)",
  report_devices, 20, 0,
};

/* What NCCL does when a check of this kind fails: the most specific pattern first. */
static const struct { const char *glob, *consequence; } nccl_does[] = {
  {"*.bad-device", "NCCL never asks for a device out of range itself; a plugin that accepts one indexes its tables out of bounds, so a core or tool bug corrupts memory instead of getting an error"},
  {"load.*", "NCCL skips the library (or this version of its table) and falls back to its internal IB or Socket net"},
  {"props.name*", "NCCL's topology keys NICs by name: one NIC seen as several, or several merged into one; rings and trees are built on the wrong NICs"},
  {"props.fields-written", "NCCL reads whatever the stack held in the field it does not zero: topology and tuning from garbage"},
  {"props.*", "NCCL builds its topology and tuning from the wrong value (wrong NIC choice, speed or limits), or refuses the device at proxy setup"},
  {"conn.stale-handle", "NCCL's proxy polls connect until it returns: a job whose peer died hangs instead of failing"},
  {"conn.dead-peer", "NCCL's proxy polls connect until it returns: a job whose peer died hangs instead of failing"},
  {"conn.*", "communicator init fails or hangs (ncclCommInitRank never returns)"},
  {"handle.*", "the handle NCCL ships through its bootstrap is cut or mixed up: connects fail or reach the wrong listener"},
  {"reg.*", "registration fails (NCCL aborts the communicator) or data lands in the wrong buffer"},
  {"xfer.*", "collectives return wrong data or hang"},
  {"limits.*", "NCCL keeps more in flight than the plugin takes: hangs or errors under load"},
  {"group.*", "grouped receives (PXN, p2p aggregation) deliver wrong data or hang"},
  {"life.init-finalize", "each communicator leaves descriptors or threads behind: a long job (many communicators) runs out of them"},
  {"life.threads", "NCCL's proxy threads test each other's transfers: wrong data, lost completions, hangs under multiple communicators"},
  {"life.*", "long jobs leak resources, or multi-communicator jobs break"},
  {"collnet.*", "CollNet collectives give wrong results or NCCL disables CollNet"},
  {"unpack.*", "NCCL's device unpack kernel reads wrong data or spins"},
  {"hostile.*", "a malformed input from the network or the core crashes or hangs the job instead of failing it"},
  {"tuner.*", "NCCL picks an algorithm/protocol the tuner did not mean, or fails communicator init"},
  {"rma.*", "one-sided (GIN/RMA) operations give wrong data or hang"},
  {"*", "see the clause in docs/spec/nccl-net-abi.md"},
};

static const char *consequence(const char *id) {
  for (size_t i = 0; i < sizeof nccl_does / sizeof nccl_does[0]; i++)
    if (fnmatch(nccl_does[i].glob, id, 0) == 0) return nccl_does[i].consequence;
  return "";
}

static const char *row_id(const conform_row_t *r) { return r->check ? r->check->id : "?"; }

/* One group per cause (conform_report_cause of the message), in report order. */
static void print_groups(FILE *o, const conform_run_result_t *run, conform_status_t which) {
  int n = run->n_rows;
  bool *done = calloc((size_t)n + 1, sizeof *done);
  int group = 0;
  for (int i = 0; i < n; i++) {
    const conform_row_t *r = &run->rows[i];
    if (done[i] || r->status != which || !r->check || !strcmp(row_id(r), "report.devices")) continue;
    char key[CONFORM_MSG_MAX], k2[CONFORM_MSG_MAX], first[CONFORM_MSG_MAX];
    conform_report_cause(r->msg, key, sizeof key);
    conform_report_first(r->msg, first, sizeof first);
    fprintf(o, "  %d. %s\n", ++group, first);
    fprintf(o, "     checks:");
    int count = 0;
    for (int j = i; j < n; j++) {
      const conform_row_t *q = &run->rows[j];
      if (done[j] || q->status != which || !q->check) continue;
      conform_report_cause(q->msg, k2, sizeof k2);
      if (strcmp(k2, key)) continue;
      done[j] = true;
      fprintf(o, "%s %s (v%d)", count++ ? "," : "", row_id(q), q->version);
    }
    fprintf(o, "\n");
    /* Clauses and consequences of the checks in the group, each said once. */
    char seen[4096] = "";
    for (int j = i; j < n; j++) {
      const conform_row_t *q = &run->rows[j];
      if (q->status != which || !q->check || !done[j]) continue;
      conform_report_cause(q->msg, k2, sizeof k2);
      if (strcmp(k2, key)) continue;
      const char *what = which == CONFORM_ENV ? "" : consequence(row_id(q));
      char line[1024];
      snprintf(line, sizeof line, "     spec %s: %s\n", q->check->clause, q->check->description);
      if (!strstr(seen, line)) {
        fputs(line, o);
        snprintf(seen + strlen(seen), sizeof seen - strlen(seen), "%s", line);
      }
      if (what[0]) {
        snprintf(line, sizeof line, "     NCCL would: %s\n", what);
        if (!strstr(seen, line)) {
          fputs(line, o);
          snprintf(seen + strlen(seen), sizeof seen - strlen(seen), "%s", line);
        }
      }
    }
  }
  if (!group) fprintf(o, "  none\n");
  free(done);
}

void conform_plugin_report_write(FILE *o, const conform_run_result_t *run) {
  char field[CONFORM_PATH_MAX];
  fprintf(o, "strand-conform plugin report\n");
  fprintf(o, "plugin: %s\n", run->plugin_desc);
  /* Versions: the part of the description the loader wrote ("ncclNetPlugin: v12,v11; ..."). */
  const char *v = strstr(run->plugin_desc, "ncclNetPlugin: ");
  if (v) {
    const char *e = strstr(v, "; testing");
    snprintf(field, sizeof field, "%.*s", e ? (int)(e - v) : (int)strlen(v), v);
    fprintf(o, "\nversions exported: %s\n", field);
  }
  fprintf(o, "\ndevices, as NCCL reads them (getProperties through the core's adapter):\n");
  bool any = false;
  for (int i = 0; i < run->n_rows; i++) {
    const conform_row_t *r = &run->rows[i];
    if (!r->check || strcmp(row_id(r), "report.devices") || !r->log) continue;
    for (const char *l = r->log; *l;) {
      const char *e = strchr(l, '\n');
      int len = e ? (int)(e - l) : (int)strlen(l);
      const char *m = strstr(l, DEV_MARK);
      if (m && m < l + len) {
        int skip = (int)(m - l) + (int)strlen(DEV_MARK);
        fprintf(o, "  %.*s\n", len - skip, m + strlen(DEV_MARK));
        any = true;
      }
      l += len + (e ? 1 : 0);
    }
    if (r->status == CONFORM_FAIL) fprintf(o, "  (could not read them: %s)\n", r->msg), any = true;
    break; /* once, at the version under test */
  }
  if (!any) fprintf(o, "  (not read: the plugin did not load or init)\n");
  int fails = 0, envs = 0;
  for (int i = 0; i < run->n_rows; i++) {
    fails += run->rows[i].status == CONFORM_FAIL;
    envs += run->rows[i].status == CONFORM_ENV;
  }
  fprintf(o, "\nfailures, grouped by cause (%d failed row%s):\n", fails, fails == 1 ? "" : "s");
  print_groups(o, run, CONFORM_FAIL);
  if (envs) {
    fprintf(o, "\nnot judged: the test environment refused what these checks needed (ENV, not "
            "counted against the plugin):\n");
    print_groups(o, run, CONFORM_ENV);
  }
  if (run->fatal[0]) fprintf(o, "\nrun stopped: %s\n", run->fatal);
  fprintf(o, "\n");
}
