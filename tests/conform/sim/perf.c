/* strand-conform perf — bandwidth and latency of a plugin against message size, in-flight depth and
 * grouped receives, optionally side by side with a raw-TCP reference (rawtcp.c) in the same run.
 *
 * A benchmark, not a test: rows pass when the measurement ran and the data arrived intact; no
 * timing is ever asserted. Measurements run between ranks 0 and 1 (--nranks 2) through the same
 * loader, bootstrap and link helpers as the suite, so `--coordinator/--rank` measures two hosts.
 *
 * What is measured (both backends run the very same loop, so the ratio is the plugin's overhead):
 *   bw-uni     rank 0 keeps `depth` isends in flight to rank 1, which keeps `depth` irecvs posted;
 *              time = from a barrier to rank 1's 1-byte acknowledgement of the last message.
 *              time(us) = time / messages, algbw = bytes / time(us).
 *   bw-bi      both ranks send and receive at once; algbw counts both directions.
 *   bw-grouped like bw-uni, but every irecv takes `--group n` messages (tags 0..n-1, §6.7).
 *   latency    ping-pong; half the round trip, median and 99th percentile. The reference polls
 *              send/recv on one connection in the calling thread.
 *   depth-sweep  bw-uni at one size for depth 1, 2, 4, ... 32 (v6: 8).
 *   collnet-allreduce  (--collnet) CollNet all-reduce calls in flight, NCCL's CollNet proxy
 *              shape, against the same bytes through the net plugin (perf_collnet.c).
 *
 * This file: options, the per-check context and its table / JSON output, the checks and
 * `strand-conform perf`. The loops themselves are in perf_loop.c (perf.h), the CollNet table
 * (perf.collnet-allreduce, --collnet) in perf_collnet.c. */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

#include "perf.h"

perf_opts_t perf_opts = {
  .min_bytes = 8, .max_bytes = (size_t)64 << 20, .factor = 2, .depth = 8,
  .sweep_bytes = (size_t)1 << 20, .group = 1, .ref_streams = 1, .time_per_size = 0.1,
  .collnet_window = 8, .n_collnet_bytes = 3,
  .collnet_bytes = {(size_t)256 << 10, (size_t)1 << 20, (size_t)2 << 20},
};

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

/* ------------------------------------------------------------------ per-check context (perf.h) */

void perf_out(perf_t *P, const char *fmt, ...) {
  if (!P->out) return;
  char line[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(line, sizeof line, fmt, ap);
  va_end(ap);
  /* Under --tap the table rides along as TAP comments. */
  fprintf(P->out, "%s%s\n", conform_opts.tap && line[0] != '#' ? "# " : "", line);
  fflush(P->out);
}

void perf_json(perf_t *P, const char *fmt, ...) {
  if (!P->out || !perf_opts.json_parts[0]) return;
  va_list ap;
  for (;;) {
    va_start(ap, fmt);
    int need = vsnprintf(P->json ? P->json + P->json_len : NULL,
                         P->json ? P->json_cap - P->json_len : 0, fmt, ap);
    va_end(ap);
    if (need < 0) return;
    if (P->json && P->json_len + (size_t)need < P->json_cap) {
      P->json_len += (size_t)need;
      return;
    }
    size_t nc = (P->json_cap + (size_t)need + 1) * 2;
    char *j = realloc(P->json, nc);
    if (!j) return;
    P->json = j;
    P->json_cap = nc;
  }
}

/* One point of --svg's chart; the series name is a printf format. */
static void svg_pt(perf_t *P, char panel, int color, bool ref, double x, double y, const char *fmt,
                   ...) __attribute__((format(printf, 7, 8)));
static void svg_pt(perf_t *P, char panel, int color, bool ref, double x, double y, const char *fmt,
                   ...) {
  if (!P->out || !perf_opts.svg_parts[0]) return;
  char name[200];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(name, sizeof name, fmt, ap);
  va_end(ap);
  perf_pts_add(&P->pts, panel, color, ref, name, x, y);
}

static const char *plugin_name(perf_t *P) { return P->c->net->name ? P->c->net->name : "plugin"; }

static const char *ref_streams_str(void) {
  static char s[32];
  snprintf(s, sizeof s, "%d stream%s", perf_opts.ref_streams, perf_opts.ref_streams == 1 ? "" : "s");
  return s;
}

/* The table passed: its JSON and its chart points go to the parent's scratch files. */
void perf_json_flush(perf_t *P) {
  if (P->out && perf_opts.svg_parts[0]) perf_pts_flush(&P->pts, perf_opts.svg_parts, P->c->net->name);
  if (!P->out || !perf_opts.json_parts[0] || !P->json) return;
  int fd = open(perf_opts.json_parts, O_WRONLY | O_APPEND | O_CREAT, 0600);
  if (fd >= 0) {
    size_t off = 0;
    while (off < P->json_len) {
      ssize_t w = write(fd, P->json + off, P->json_len - off);
      if (w <= 0) break;
      off += (size_t)w;
    }
    if (write(fd, "\n", 1) != 1) { /* one table per line */
    }
    close(fd);
  }
}

void perf_json_str(perf_t *P, const char *s) {
  perf_json(P, "\"");
  for (; s && *s; s++) {
    if (*s == '"' || *s == '\\') perf_json(P, "\\%c", *s);
    else if ((unsigned char)*s < 0x20) perf_json(P, "\\u%04x", (unsigned char)*s);
    else perf_json(P, "%c", *s);
  }
  perf_json(P, "\"");
}

int perf_open(perf_t *P, conform_ctx_t *c, const char *id, int slots) {
  memset(P, 0, sizeof *P);
  P->c = c;
  P->out = c->rank == 0 ? stdout : NULL;
  bool collnet = !strcmp(id, "perf.collnet-allreduce");
  if (c->nranks != 2 && !collnet) return conform_fail(c, "perf measures between exactly 2 ranks (--nranks 2)"), -1;
  if (perf_opts.dev >= c->ndev)
    return conform_fail(c, "--dev %d but the plugin has %d devices", perf_opts.dev, c->ndev), -1;
  if (conform_props(c, perf_opts.dev, &P->props)) return -1;
  P->max_depth = c->version >= 7 ? STRAND_NET_MAX_REQUESTS : STRAND_NET_MAX_REQUESTS_V6;
  if (conform_link_open(c, perf_opts.dev, &P->link)) return -1;
  P->link_open = true;
  size_t maxsz = perf_opts.max_bytes;
  if (!strcmp(id, "perf.depth-sweep")) maxsz = perf_opts.sweep_bytes;
  if (collnet) { /* the net reference moves half a call per message (perf_collnet.c) */
    maxsz = 0;
    for (int i = 0; i < perf_opts.n_collnet_bytes; i++)
      if (perf_opts.collnet_bytes[i] / 2 > maxsz) maxsz = perf_opts.collnet_bytes[i] / 2;
  }
  if (perf_bufs_alloc(c, &P->B, maxsz, slots)) return -1;
  if (conform_reg(c, P->link.send_comm, P->B.sbuf, P->B.sbuf_len, STRAND_PTR_HOST, &P->px.smh) ||
      conform_reg(c, P->link.recv_comm, P->B.rarea, P->B.rarea_len, STRAND_PTR_HOST, &P->px.rmh))
    return -1;
  P->px.c = c;
  P->px.link = &P->link;
  if (perf_opts.ref_tcp && !collnet) { /* its reference is the net plugin itself */
    struct sockaddr_storage ss;
    char why[300] = "";
    int ok = rawtcp_local_addr(perf_opts.ref_addr, P->props.name, &ss, P->ref_desc,
                               sizeof P->ref_desc, why, sizeof why) == 0;
    if (!ok && !conform_opts.coordinator[0] &&
        rawtcp_local_addr("127.0.0.1", NULL, &ss, P->ref_desc, sizeof P->ref_desc, why,
                          sizeof why) == 0) {
      /* Local run: both ranks are on this host, so loopback is the path they share. */
      snprintf(P->ref_desc, sizeof P->ref_desc, "127.0.0.1 (local run; device name \"%.60s\" is "
               "no interface)", P->props.name ? P->props.name : "");
      ok = 1;
    }
    /* Every rank must agree before the collective set-up. */
    int mine = ok, all[2] = {0, 0};
    if (conform_allgather(c, &mine, sizeof mine, all)) {
      conform_fail(c, "bootstrap: %s", c->bs_error);
      return -1;
    }
    if (all[0] && all[1]) {
      P->tx.c = c;
      P->tx.tcp = true;
      P->tx.rt = rawtcp_open(c, &ss, perf_opts.ref_streams);
      if (!P->tx.rt) return -1;
      P->have_ref = true;
    } else {
      snprintf(P->ref_skip, sizeof P->ref_skip, "no raw-TCP reference: %s",
               ok ? "the other rank found no address (see its --ref-addr)" : why);
    }
  }
  return 0;
}

void perf_close(perf_t *P) {
  conform_ctx_t *c = P->c;
  if (P->tx.rt) rawtcp_close(P->tx.rt);
  if (P->link_open) {
    if (P->px.smh) conform_dereg(c, P->link.send_comm, P->px.smh);
    if (P->px.rmh) conform_dereg(c, P->link.recv_comm, P->px.rmh);
    conform_link_close(c, &P->link);
  }
  perf_bufs_free(&P->B);
  free(P->json);
  perf_pts_free(&P->pts);
}

void perf_header(perf_t *P, const char *id, const char *title) {
  perf_out(P, "#");
  perf_out(P, "# %s: %s", id, title);
  char between[64] = "rank 0 <-> rank 1"; /* more ranks: perf --collnet only */
  if (P->c->nranks > 2) snprintf(between, sizeof between, "ranks 0..%d", P->c->nranks - 1);
  perf_out(P, "# plugin \"%s\" (ncclNetPlugin_v%d) device %d \"%s\" (speed %d Mbps, maxRecvs %d), "
           "%s", P->c->net->name ? P->c->net->name : "?", P->c->version,
           perf_opts.dev, P->props.name ? P->props.name : "?", P->props.speed, P->props.maxRecvs, between);
  if (P->have_ref)
    perf_out(P, "# reference: raw TCP, %d stream(s) per direction, %s (same sizes and depth)",
             perf_opts.ref_streams, P->ref_desc);
  else if (P->ref_skip[0])
    perf_out(P, "# %s", P->ref_skip);
  perf_json(P, "{\"id\":");
  perf_json_str(P, id);
  perf_json(P, ",\"title\":");
  perf_json_str(P, title);
  perf_json(P, ",\"plugin\":");
  perf_json_str(P, P->c->net->name);
  perf_json(P, ",\"abi\":%d,\"device\":%d,\"device_name\":", P->c->version, perf_opts.dev);
  perf_json_str(P, P->props.name);
  perf_json(P, ",\"reference\":");
  if (P->have_ref) {
    perf_json(P, "{\"kind\":\"tcp\",\"streams\":%d,\"address\":", perf_opts.ref_streams);
    perf_json_str(P, P->ref_desc);
    perf_json(P, "}");
  } else {
    perf_json(P, "null");
  }
}

/* Sizes of the sweep: min, min x factor, ... and max itself when the grid misses it. */
static int size_list(size_t *v, int cap, size_t lo, size_t hi) {
  int n = 0;
  size_t s = lo ? lo : 1;
  while (s <= hi && n < cap) {
    v[n++] = s;
    if (s > hi / (size_t)perf_opts.factor) break;
    s *= (size_t)perf_opts.factor;
  }
  if (n < cap && (n == 0 || v[n - 1] < hi)) v[n++] = hi;
  return n;
}

/* Messages for the warm-up: the pipeline filled twice, and for small messages enough of them
 * (4 MiB, at most 2000) that the start-line skew between the ranks does not dominate the pace
 * estimate; at most ~64 MiB for large ones. */
long perf_warm_groups(size_t size, int depth) {
  long w = 2L * depth;
  if (w < 4) w = 4;
  long small = size ? (long)(((size_t)4 << 20) / size) : 2000;
  if (small > 2000) small = 2000;
  if (small > w) w = small;
  while (w > 2 && (size_t)w * size > ((size_t)64 << 20)) w /= 2;
  return w;
}

/* Fewest timed messages: 16 MiB worth, between 5 and 2000. */
long perf_min_groups(size_t size) {
  long m = size ? (long)(((size_t)16 << 20) / size) : 2000;
  return m < 5 ? 5 : m > 2000 ? 2000 : m;
}

/* Rank 0 picks how many iterations fill --time at the warm-up's pace; everyone uses its value. */
int perf_agree_iters(conform_ctx_t *c, double warm_s, long warm_n, long lo, long hi, long *iters) {
  long mine = lo;
  if (warm_s > 0 && warm_n > 0) {
    double per = warm_s / (double)warm_n;
    double want = perf_opts.time_per_size / per;
    mine = want > (double)hi ? hi : want < (double)lo ? lo : (long)want;
  }
  long all[PERF_COLLNET_MAX_RANKS] = {0}; /* perf runs at 2..8 ranks (conform_cmd_perf) */
  if (c->nranks > PERF_COLLNET_MAX_RANKS)
    return conform_fail(c, "perf runs at most %d ranks", PERF_COLLNET_MAX_RANKS), -1;
  if (conform_allgather(c, &mine, sizeof mine, all)) {
    conform_fail(c, "bootstrap: %s", c->bs_error);
    return -1;
  }
  *iters = all[0];
  return 0;
}

int perf_agree_max(conform_ctx_t *c, double *v) {
  double all[PERF_COLLNET_MAX_RANKS];
  if (c->nranks > PERF_COLLNET_MAX_RANKS)
    return conform_fail(c, "perf runs at most %d ranks", PERF_COLLNET_MAX_RANKS), -1;
  if (conform_allgather(c, v, sizeof *v, all)) {
    conform_fail(c, "bootstrap: %s", c->bs_error);
    return -1;
  }
  *v = all[0];
  for (int r = 1; r < c->nranks; r++)
    if (all[r] > *v) *v = all[r];
  return 0;
}

typedef struct { double time_us, gbps; long count; } bw_res_t;

/* Warm-up, then a timed run sized to --time; result from rank 0's clock (uni: sender with the
 * acknowledgement; bi: the slower of both ranks). */
static int bw_measure(perf_t *P, xp_t *x, bool bidir, size_t size, int n, int depth, bw_res_t *res) {
  conform_ctx_t *c = P->c;
  bw_spec_t sp = {
    .send = bidir || c->rank == 0, .recv = bidir || c->rank == 1, .ack = !bidir,
    .size = size, .n = n, .depth = depth,
  };
  char what[160], szs[32];
  snprintf(what, sizeof what, "perf %s bandwidth, %s, depth %d, n %d, %s", bidir ? "bi" : "uni",
           simperf_size_str(size, szs, sizeof szs), depth, n, x->tcp ? "raw TCP" : "plugin");
  sp.groups = perf_warm_groups(size * (size_t)n, depth);
  double t = 0;
  if (perf_bw_run(x, &P->B, &sp, what, &t)) return -1;
  if (bidir && perf_agree_max(c, &t)) return -1;
  long iters;
  if (perf_agree_iters(c, t, sp.groups, perf_min_groups(size * (size_t)n), 1000000, &iters)) return -1;
  sp.groups = iters;
  if (perf_bw_run(x, &P->B, &sp, what, &t)) return -1;
  if (bidir && perf_agree_max(c, &t)) return -1;
  long msgs = iters * n;
  res->count = msgs;
  res->time_us = t * 1e6 / (double)msgs;
  double bytes = (double)size * (double)msgs * (bidir ? 2.0 : 1.0);
  res->gbps = t > 0 ? bytes / t / 1e9 : 0;
  return 0;
}

/* max_us > PERF_OUTLIER_FACTOR x p50_us marks a row as having latency outliers. */
#define PERF_OUTLIER_FACTOR 10.0
typedef struct { double p50_us, p99_us, max_us; long count; } lat_res_t;
static bool lat_outlier(const lat_res_t *r) { return r->p50_us > 0 && r->max_us > PERF_OUTLIER_FACTOR * r->p50_us; }

static int lat_measure(perf_t *P, xp_t *x, size_t size, lat_res_t *res) {
  conform_ctx_t *c = P->c;
  char what[128], szs[32];
  snprintf(what, sizeof what, "perf latency, %s, %s", simperf_size_str(size, szs, sizeof szs),
           x->tcp ? "raw TCP" : "plugin");
  long warm = size > ((size_t)4 << 20) ? 3 : 20;
  double total = 0;
  if (perf_lat_run(x, &P->B, size, warm, what, NULL, &total)) return -1;
  long iters;
  if (perf_agree_iters(c, total, warm, 5, 200000, &iters)) return -1;
  double *half = calloc((size_t)iters, sizeof *half);
  if (!half) return conform_fail(c, "out of memory"), -1;
  if (perf_lat_run(x, &P->B, size, iters, what, half, NULL)) {
    free(half);
    return -1;
  }
  if (c->rank == 0) {
    qsort(half, (size_t)iters, sizeof *half, cmp_double);
    res->p50_us = half[(iters - 1) / 2] * 1e6;
    long i99 = (long)ceil(0.99 * (double)iters) - 1;
    if (i99 < 0) i99 = 0;
    res->p99_us = half[i99] * 1e6;
    res->max_us = half[iters - 1] * 1e6;
  }
  res->count = iters;
  free(half);
  return 0;
}

/* ------------------------------------------------------------------ checks */

static conform_status_t perf_bw_table(conform_ctx_t *c, const char *id, bool bidir, int n) {
  perf_t P;
  int depth = perf_opts.depth;
  if (perf_open(&P, c, id, depth * n)) {
    perf_close(&P);
    return CONFORM_FAIL;
  }
  conform_status_t st = CONFORM_PASS;
  if (depth > P.max_depth) {
    st = conform_fail(c, "--depth %d exceeds the %d requests per comm NCCL allows at ABI v%d", depth,
                      P.max_depth, c->version);
    goto out;
  }
  if (n > 1 && P.props.maxRecvs < n) {
    st = conform_skip(c, "--group %d but device %d has maxRecvs %d", n, perf_opts.dev, P.props.maxRecvs);
    goto out;
  }
  char title[200];
  snprintf(title, sizeof title, "%s bandwidth, depth %d%s%s", bidir ? "bidirectional" : "unidirectional",
           depth, n > 1 ? ", grouped receives n = " : "", "");
  if (n > 1) snprintf(title + strlen(title), sizeof title - strlen(title), "%d", n);
  perf_header(&P, id, title);
  perf_json(&P, ",\"direction\":\"%s\",\"depth\":%d,\"group\":%d,\"rows\":[", bidir ? "bi" : "uni",
           depth, n);
  if (P.have_ref)
    perf_out(&P, "# %12s %10s %11s %12s | %12s %15s %7s", "size(B)", "count", "time(us)",
             "algbw(GB/s)", "ref time(us)", "ref algbw(GB/s)", "ratio");
  else
    perf_out(&P, "# %12s %10s %11s %12s", "size(B)", "count", "time(us)", "algbw(GB/s)");
  size_t sizes[64];
  int ns = size_list(sizes, 64, perf_opts.min_bytes, perf_opts.max_bytes);
  double peak = 0, peak_ref = 0;
  size_t peak_size = 0;
  for (int i = 0; i < ns; i++) {
    bw_res_t r = {0}, q = {0};
    if (bw_measure(&P, &P.px, bidir, sizes[i], n, depth, &r)) {
      st = CONFORM_FAIL;
      break;
    }
    if (P.have_ref && bw_measure(&P, &P.tx, bidir, sizes[i], n, depth, &q)) {
      st = CONFORM_FAIL;
      break;
    }
    double ratio = q.gbps > 0 ? r.gbps / q.gbps : 0;
    if (P.have_ref)
      perf_out(&P, "  %12zu %10ld %11.2f %12.3f | %12.2f %15.3f %7.2f", sizes[i], r.count,
               r.time_us, r.gbps, q.time_us, q.gbps, ratio);
    else
      perf_out(&P, "  %12zu %10ld %11.2f %12.3f", sizes[i], r.count, r.time_us, r.gbps);
    /* Chart: one line per table and transport; uni blue, bi orange, grouped green. */
    const char *kind = n > 1 ? "grouped" : bidir ? "bi" : "uni";
    int color = n > 1 ? 2 : bidir ? 1 : 0;
    char gs[16] = "";
    if (n > 1) snprintf(gs, sizeof gs, " n=%d", n);
    svg_pt(&P, 'b', color, false, (double)sizes[i], r.gbps, "%s %s%s d%d", plugin_name(&P), kind,
           gs, depth);
    if (P.have_ref)
      svg_pt(&P, 'b', color, true, (double)sizes[i], q.gbps, "raw TCP %s%s d%d (%s)", kind, gs,
             depth, ref_streams_str());
    perf_json(&P, "%s{\"bytes\":%zu,\"count\":%ld,\"time_us\":%.3f,\"algbw_gbps\":%.4f", i ? "," : "",
             sizes[i], r.count, r.time_us, r.gbps);
    if (P.have_ref)
      perf_json(&P, ",\"ref_count\":%ld,\"ref_time_us\":%.3f,\"ref_algbw_gbps\":%.4f,\"ratio\":%.4f",
               q.count, q.time_us, q.gbps, ratio);
    perf_json(&P, "}");
    if (r.gbps > peak) {
      peak = r.gbps;
      peak_size = sizes[i];
      peak_ref = q.gbps;
    }
  }
  perf_json(&P, "]}");
  if (st == CONFORM_PASS) {
    perf_json_flush(&P);
    char szs[32];
    conform_note(c, "peak %.3f GB/s at %s", peak, simperf_size_str(peak_size, szs, sizeof szs));
    if (P.have_ref)
      conform_note(c, "raw TCP %.3f GB/s there, ratio %.2f", peak_ref,
                   peak_ref > 0 ? peak / peak_ref : 0);
  }
out:
  perf_close(&P);
  return st == CONFORM_PASS && c->status == CONFORM_FAIL ? CONFORM_FAIL : st;
}

static conform_status_t perf_bw_uni(conform_ctx_t *c) { return perf_bw_table(c, "perf.bw-uni", false, 1); }
static conform_status_t perf_bw_bi(conform_ctx_t *c) { return perf_bw_table(c, "perf.bw-bi", true, 1); }
static conform_status_t perf_bw_grouped(conform_ctx_t *c) {
  return perf_bw_table(c, "perf.bw-grouped", false, perf_opts.group);
}

static conform_status_t perf_latency(conform_ctx_t *c) {
  perf_t P;
  if (perf_open(&P, c, "perf.latency", 2)) {
    perf_close(&P);
    return CONFORM_FAIL;
  }
  conform_status_t st = CONFORM_PASS;
  perf_header(&P, "perf.latency", "ping-pong latency, half round trip");
  perf_json(&P, ",\"rows\":[");
  if (P.have_ref)
    perf_out(&P, "# %12s %10s %10s %10s %10s | %11s %11s %11s %7s", "size(B)", "count", "p50(us)",
             "p99(us)", "max(us)", "ref p50(us)", "ref p99(us)", "ref max(us)", "ratio");
  else
    perf_out(&P, "# %12s %10s %10s %10s %10s", "size(B)", "count", "p50(us)", "p99(us)", "max(us)");
  size_t sizes[64];
  int ns = size_list(sizes, 64, perf_opts.min_bytes, perf_opts.max_bytes);
  lat_res_t first = {0}, first_ref = {0};
  int outliers = 0;
  for (int i = 0; i < ns; i++) {
    lat_res_t r = {0}, q = {0};
    if (lat_measure(&P, &P.px, sizes[i], &r)) {
      st = CONFORM_FAIL;
      break;
    }
    if (P.have_ref && lat_measure(&P, &P.tx, sizes[i], &q)) {
      st = CONFORM_FAIL;
      break;
    }
    if (i == 0) {
      first = r;
      first_ref = q;
    }
    double ratio = q.p50_us > 0 ? r.p50_us / q.p50_us : 0;
    /* A row whose max is over PERF_OUTLIER_FACTOR x its p50 ends with "!" (plugin) or "!ref". */
    char mark[16] = "";
    if (lat_outlier(&r)) strcat(mark, "  !");
    if (lat_outlier(&q)) strcat(mark, "  !ref");
    if (lat_outlier(&r)) outliers++;
    if (P.have_ref)
      perf_out(&P, "  %12zu %10ld %10.2f %10.2f %10.2f | %11.2f %11.2f %11.2f %7.2f%s", sizes[i], r.count,
               r.p50_us, r.p99_us, r.max_us, q.p50_us, q.p99_us, q.max_us, ratio, mark);
    else
      perf_out(&P, "  %12zu %10ld %10.2f %10.2f %10.2f%s", sizes[i], r.count, r.p50_us, r.p99_us,
               r.max_us, mark);
    svg_pt(&P, 'l', 0, false, (double)sizes[i], r.p50_us, "%s p50", plugin_name(&P));
    if (P.have_ref)
      svg_pt(&P, 'l', 0, true, (double)sizes[i], q.p50_us, "raw TCP p50 (%s)", ref_streams_str());
    perf_json(&P, "%s{\"bytes\":%zu,\"count\":%ld,\"p50_us\":%.3f,\"p99_us\":%.3f,\"max_us\":%.3f,"
             "\"outlier\":%s", i ? "," : "", sizes[i], r.count, r.p50_us, r.p99_us, r.max_us,
             lat_outlier(&r) ? "true" : "false");
    if (P.have_ref)
      perf_json(&P, ",\"ref_count\":%ld,\"ref_p50_us\":%.3f,\"ref_p99_us\":%.3f,\"ref_max_us\":%.3f,"
               "\"ref_outlier\":%s,\"ratio\":%.4f", q.count, q.p50_us, q.p99_us, q.max_us,
               lat_outlier(&q) ? "true" : "false", ratio);
    perf_json(&P, "}");
  }
  perf_json(&P, "]}");
  if (st == CONFORM_PASS && ns > 0) {
    perf_json_flush(&P);
    conform_note(c, "%zu B: p50 %.2f us, p99 %.2f us (half round trip)", sizes[0], first.p50_us,
                 first.p99_us);
    if (P.have_ref)
      conform_note(c, "raw TCP p50 %.2f us, p99 %.2f us", first_ref.p50_us, first_ref.p99_us);
    if (outliers)
      conform_note(c, "%d size(s) with latency outliers (max > %.0fx p50, marked !)", outliers,
                   PERF_OUTLIER_FACTOR);
  }
  perf_close(&P);
  return st == CONFORM_PASS && c->status == CONFORM_FAIL ? CONFORM_FAIL : st;
}

static conform_status_t perf_depth_sweep(conform_ctx_t *c) {
  perf_t P;
  if (perf_open(&P, c, "perf.depth-sweep", 32)) {
    perf_close(&P);
    return CONFORM_FAIL;
  }
  conform_status_t st = CONFORM_PASS;
  char title[160], szs[32];
  size_t size = perf_opts.sweep_bytes;
  snprintf(title, sizeof title, "unidirectional bandwidth against in-flight depth at %s",
           simperf_size_str(size, szs, sizeof szs));
  perf_header(&P, "perf.depth-sweep", title);
  perf_json(&P, ",\"direction\":\"uni\",\"bytes\":%zu,\"rows\":[", size);
  if (P.have_ref)
    perf_out(&P, "# %6s %12s %10s %11s %12s | %12s %15s %7s", "depth", "size(B)", "count",
             "time(us)", "algbw(GB/s)", "ref time(us)", "ref algbw(GB/s)", "ratio");
  else
    perf_out(&P, "# %6s %12s %10s %11s %12s", "depth", "size(B)", "count", "time(us)", "algbw(GB/s)");
  int first = 1;
  for (int d = 1; d <= P.max_depth; d *= 2) {
    bw_res_t r = {0}, q = {0};
    if (bw_measure(&P, &P.px, false, size, 1, d, &r) ||
        (P.have_ref && bw_measure(&P, &P.tx, false, size, 1, d, &q))) {
      st = CONFORM_FAIL;
      break;
    }
    double ratio = q.gbps > 0 ? r.gbps / q.gbps : 0;
    if (P.have_ref)
      perf_out(&P, "  %6d %12zu %10ld %11.2f %12.3f | %12.2f %15.3f %7.2f", d, size, r.count, r.time_us,
               r.gbps, q.time_us, q.gbps, ratio);
    else
      perf_out(&P, "  %6d %12zu %10ld %11.2f %12.3f", d, size, r.count, r.time_us, r.gbps);
    svg_pt(&P, 'd', 3, false, d, r.gbps, "%s uni %s", plugin_name(&P), szs);
    if (P.have_ref)
      svg_pt(&P, 'd', 3, true, d, q.gbps, "raw TCP uni %s (%s)", szs, ref_streams_str());
    perf_json(&P, "%s{\"depth\":%d,\"bytes\":%zu,\"count\":%ld,\"time_us\":%.3f,\"algbw_gbps\":%.4f",
             first ? "" : ",", d, size, r.count, r.time_us, r.gbps);
    if (P.have_ref)
      perf_json(&P, ",\"ref_time_us\":%.3f,\"ref_algbw_gbps\":%.4f,\"ratio\":%.4f", q.time_us, q.gbps,
               ratio);
    perf_json(&P, "}");
    first = 0;
  }
  perf_json(&P, "]}");
  if (st == CONFORM_PASS) perf_json_flush(&P);
  perf_close(&P);
  return st == CONFORM_PASS && c->status == CONFORM_FAIL ? CONFORM_FAIL : st;
}

/* ------------------------------------------------------------------ command */

static conform_check_t perf_checks[] = {
  {"perf.latency", "benchmark", "ping-pong half round trip against size (median, p99)", perf_latency, 0, 0},
  {"perf.bw-uni", "benchmark", "unidirectional bandwidth against size at --depth", perf_bw_uni, 0, 0},
  {"perf.bw-bi", "benchmark", "bidirectional bandwidth against size at --depth", perf_bw_bi, 0, 0},
  {"perf.bw-grouped", "benchmark", "unidirectional bandwidth with grouped receives (--group n)",
   perf_bw_grouped, 0, 0},
  {"perf.depth-sweep", "benchmark", "unidirectional bandwidth against in-flight depth (--depth-sweep)",
   perf_depth_sweep, 0, 0},
  {"perf.collnet-allreduce", "benchmark", "CollNet all-reduce throughput against the net plugin (--collnet)",
   perf_collnet_allreduce, 0, CONFORM_F_COLLNET},
  {NULL, NULL, NULL, NULL, 0, 0},
};

enum {
  PO_MIN = 1, PO_MAX, PO_FACTOR, PO_DEPTH, PO_SWEEP, PO_SWEEP_BYTES, PO_GROUP, PO_REF, PO_STREAMS,
  PO_ADDR, PO_JSON, PO_TIME, PO_DEV, PO_NO_LAT, PO_NO_BI, PO_SVG, PO_CN, PO_CN_WINDOW, PO_CN_BYTES,
  PO_CN_REF_HDR, PO_CN_REF, PO_CN_REF_STREAMS,
};

static const simperf_opt_t perf_optlist[] = {
  {"min-bytes", false, PO_MIN},      {"max-bytes", false, PO_MAX},
  {"step-factor", false, PO_FACTOR}, {"depth", false, PO_DEPTH},
  {"depth-sweep", true, PO_SWEEP},   {"sweep-bytes", false, PO_SWEEP_BYTES},
  {"group", false, PO_GROUP},        {"ref", false, PO_REF},
  {"ref-streams", false, PO_STREAMS}, {"ref-addr", false, PO_ADDR},
  {"json", false, PO_JSON},          {"time", false, PO_TIME},
  {"dev", false, PO_DEV},            {"no-latency", true, PO_NO_LAT},
  {"no-bidir", true, PO_NO_BI},      {"svg", false, PO_SVG},
  {"collnet", true, PO_CN},          {"collnet-window", false, PO_CN_WINDOW},
  {"collnet-bytes", false, PO_CN_BYTES}, {"collnet-ref-headers", true, PO_CN_REF_HDR},
  {"collnet-ref", false, PO_CN_REF}, {"collnet-ref-streams", false, PO_CN_REF_STREAMS},
  {NULL, false, 0},
};

/* --collnet-bytes LIST: comma-separated sizes, each a multiple of 8 (whole floats, halves for the
 * net reference) between 8 and 256M. */
static int collnet_bytes_opt(const char *v) {
  char buf[512];
  if (strlen(v) >= sizeof buf) return -1;
  strcpy(buf, v);
  int n = 0;
  for (char *save = NULL, *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
    size_t b = 0;
    if (n == PERF_COLLNET_SIZES || conform_parse_size(tok, &b) || b < 8 || b % 8 || b > ((size_t)256 << 20)) {
      fprintf(stderr, "strand-conform perf: --collnet-bytes: \"%s\" is not a size that is a multiple of 8 "
              "between 8 and 256M (at most %d sizes)\n", tok, PERF_COLLNET_SIZES);
      return -1;
    }
    perf_opts.collnet_bytes[n++] = b;
  }
  if (n == 0) return -1;
  perf_opts.n_collnet_bytes = n;
  return 0;
}

static int perf_opt(int id, const char *v, void *arg) {
  (void)arg;
  char *end = NULL;
  long l;
  switch (id) {
  case PO_MIN: return conform_parse_size(v, &perf_opts.min_bytes);
  case PO_MAX: return conform_parse_size(v, &perf_opts.max_bytes) || perf_opts.max_bytes == 0 ? -1 : 0;
  case PO_SWEEP_BYTES:
    return conform_parse_size(v, &perf_opts.sweep_bytes) || perf_opts.sweep_bytes == 0 ? -1 : 0;
  case PO_FACTOR:
    l = strtol(v, &end, 10);
    if (*end || l < 2 || l > 16) return -1;
    perf_opts.factor = (int)l;
    return 0;
  case PO_DEPTH:
    l = strtol(v, &end, 10);
    if (*end || l < 1 || l > STRAND_NET_MAX_REQUESTS) return -1;
    perf_opts.depth = (int)l;
    return 0;
  case PO_SWEEP: perf_opts.depth_sweep = true; return 0;
  case PO_GROUP:
    l = strtol(v, &end, 10);
    if (*end || l < 1 || l > 8) return -1;
    perf_opts.group = (int)l;
    return 0;
  case PO_REF:
    if (!strcmp(v, "tcp")) perf_opts.ref_tcp = true;
    else if (!strcmp(v, "none")) perf_opts.ref_tcp = false;
    else return -1;
    return 0;
  case PO_STREAMS:
    l = strtol(v, &end, 10);
    if (*end || l < 1 || l > RAWTCP_MAX_STREAMS) return -1;
    perf_opts.ref_streams = (int)l;
    return 0;
  case PO_ADDR: perf_opts.ref_addr = v; return 0;
  case PO_JSON: perf_opts.json_path = v; return 0;
  case PO_SVG: perf_opts.svg_path = v; return 0;
  case PO_TIME:
    perf_opts.time_per_size = strtod(v, &end);
    return (*end || perf_opts.time_per_size <= 0 || perf_opts.time_per_size > 60) ? -1 : 0;
  case PO_DEV:
    l = strtol(v, &end, 10);
    if (*end || l < 0) return -1;
    perf_opts.dev = (int)l;
    return 0;
  case PO_NO_LAT: perf_opts.no_lat = true; return 0;
  case PO_NO_BI: perf_opts.no_bi = true; return 0;
  case PO_CN: perf_opts.collnet = true; return 0;
  case PO_CN_WINDOW:
    l = strtol(v, &end, 10);
    if (*end || l < 1 || l > STRAND_NET_MAX_REQUESTS) return -1;
    perf_opts.collnet_window = (int)l;
    return 0;
  case PO_CN_BYTES: return collnet_bytes_opt(v);
  case PO_CN_REF_HDR: perf_opts.collnet_ref_headers = true; return 0;
  case PO_CN_REF:
    if (strcmp(v, "mesh") != 0 && strcmp(v, "ring") != 0) return -1;
    perf_opts.collnet_ref_ring = strcmp(v, "ring") == 0;
    return 0;
  case PO_CN_REF_STREAMS:
    l = strtol(v, &end, 10);
    if (*end || l < 1 || l > PERF_COLLNET_MAX_REF_STREAMS) return -1;
    perf_opts.collnet_ref_streams = (int)l;
    return 0;
  default: return -1;
  }
}

static void perf_usage(void) {
  fprintf(stderr,
    "usage: strand-conform perf [perf options] [common options] [PLUGIN]\n"
    "  --min-bytes SIZE     smallest message (default 8)\n"
    "  --max-bytes SIZE     largest message (default 64M)\n"
    "  --step-factor F      size multiplier between rows (default 2; 4 for a shorter table)\n"
    "  --depth D            messages in flight per direction (default 8, at most 32; v6: 8)\n"
    "  --depth-sweep        also measure depth 1, 2, 4, ... 32 at --sweep-bytes (default 1M)\n"
    "  --group N            also measure grouped receives: irecv with n = N (needs maxRecvs >= N)\n"
    "  --ref tcp            raw-TCP reference in the same run: plugin, TCP and ratio columns\n"
    "  --ref-streams N      TCP connections per direction for the reference (default 1; match the\n"
    "                       plugin's streams, e.g. NCCL_NSOCKS_PERTHREAD x NCCL_SOCKET_NTHREADS)\n"
    "  --ref-addr ADDR      this rank's address for the reference (default: the address of the\n"
    "                       interface named like the plugin's device)\n"
    "  --time S             target seconds per measurement after the warm-up (default 0.1)\n"
    "  --no-latency, --no-bidir   leave those tables out\n"
    "  --json FILE          every table as JSON\n"
    "  --svg FILE           an SVG chart: bandwidth and latency against size (log axes), one line\n"
    "                       per table and transport (plugin solid, raw-TCP reference dashed), and\n"
    "                       bandwidth against depth with --depth-sweep; title: plugin, date, host\n"
    "  --collnet            also measure CollNet all-reduce (perf.collnet-allreduce; needs the\n"
    "                       library's ncclCollNetPlugin_v* table): float32 sum, calls in flight\n"
    "                       like NCCL's CollNetChain proxy, next to the same bytes through the net\n"
    "                       plugin (per call B/N to and from each of the N-1 peers, twice);\n"
    "                       also at --nranks 3..8 (then only this table runs); NCCL_DEBUG=INFO with -v\n"
    "                       shows the CollNet's own log (collnet_stub: its closing: lines)\n"
    "  --collnet-window W   all-reduce calls in flight (default 8 = NCCL_STEPS, at most 32)\n"
    "  --collnet-bytes LIST bytes per call, comma-separated, multiples of 8 (default 256K,1M,2M)\n"
    "  --collnet-ref-headers  the net reference sends a 64-byte message ahead of each payload, as\n"
    "                       collnet_stub does (its cost, measured apart)\n"
    "  --collnet-ref KIND   the net reference's pattern: mesh (default: B/N to and from every peer,\n"
    "                       twice, a reduce-scatter + all-gather as the CollNet moves it) or ring\n"
    "                       (B/N to the next rank and from the previous, 2(N-1) steps in turn, the\n"
    "                       bytes of NCCL's ring all-reduce; the same as mesh at 2 ranks)\n"
    "  --collnet-ref-streams S  the mesh reference on collnet_stub's comm layout: S streams (1..4)\n"
    "                       of 2 comm pairs per peer, call k on stream k mod S, its reduce-scatter\n"
    "                       on the first pair and its all-gather on the second (default: every\n"
    "                       call on one comm pair per peer)\n"
    "  --dev D              plugin device (default 0)\n"
    "Runs between 2 ranks (local fork, or --coordinator/--rank/--nranks 2 across hosts); perf\n"
    "--collnet also between 3..8 ranks (--nranks N), its table alone.\n"
    "A benchmark: rows fail only when a measurement could not run or data arrived corrupted.\n");
}

static void write_json(int rc, const char *date, const struct utsname *u) {
  FILE *f = fopen(perf_opts.json_path, "w");
  if (!f) {
    fprintf(stderr, "strand-conform perf: cannot write %s: %s\n", perf_opts.json_path, strerror(errno));
    return;
  }
  fprintf(f, "{\"tool\":\"strand-conform perf\",\"date\":\"%s\",\"host\":\"%s\",\"kernel\":\"%s %s\","
          "\"exit_status\":%d,\"command\":\"", date, u->nodename, u->sysname, u->release, rc);
  for (const char *s = perf_opts.cmdline; *s; s++) {
    if (*s == '"' || *s == '\\') fputc('\\', f);
    fputc((unsigned char)*s < 0x20 ? ' ' : *s, f);
  }
  fprintf(f, "\",\"tables\":[");
  FILE *parts = fopen(perf_opts.json_parts, "r");
  int n = 0;
  if (parts) {
    char *line = NULL;
    size_t cap = 0;
    ssize_t len;
    while ((len = getline(&line, &cap, parts)) > 0) {
      if (line[len - 1] == '\n') line[--len] = '\0';
      if (!len) continue;
      fprintf(f, "%s\n%s", n++ ? "," : "", line);
    }
    free(line);
    fclose(parts);
  }
  fprintf(f, "]}\n");
  fclose(f);
}

static int scratch_file(char *path, size_t len) {
  snprintf(path, len, "/tmp/strand-perf-XXXXXX");
  int fd = mkstemp(path);
  if (fd < 0) {
    fprintf(stderr, "strand-conform perf: cannot create a scratch file: %s\n", strerror(errno));
    path[0] = '\0';
    return -1;
  }
  close(fd);
  return 0;
}

int conform_cmd_perf(int argc, char **argv) {
  for (int i = 1; i < argc; i++)
    if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
      perf_usage();
      return 0;
    }
  size_t u = 0;
  for (int i = 0; i < argc && u + 2 < sizeof perf_opts.cmdline; i++) {
    int w = snprintf(perf_opts.cmdline + u, sizeof perf_opts.cmdline - u, "%s%s", i ? " " : "",
                     i == 0 ? "strand-conform perf" : argv[i]);
    if (w < 0) break;
    u += (size_t)w;
    if (u >= sizeof perf_opts.cmdline) u = sizeof perf_opts.cmdline - 1;
  }
  argc = simperf_take_opts(argc, argv, perf_optlist, perf_opt, NULL, "perf");
  if (argc < 0) return 2;
  int first = conform_parse_opts(argc, argv);
  if (first < 0) return 2;
  if (first < argc) conform_opts.plugin = argv[first];
  if (first + 1 < argc) {
    fprintf(stderr, "strand-conform perf: one PLUGIN argument expected\n");
    return 2;
  }
  /* The point-to-point tables are between 2 ranks; the CollNet table and its net reference (a mesh
   * of net comms) run at N ranks too, as NCCL's CollNet does. */
  if (conform_opts.nranks != 2 &&
      (!perf_opts.collnet || conform_opts.nranks < 2 || conform_opts.nranks > PERF_COLLNET_MAX_RANKS)) {
    fprintf(stderr, "strand-conform perf: --nranks %d: perf measures between 2 ranks; only perf "
            "--collnet also runs at 3..%d ranks\n", conform_opts.nranks, PERF_COLLNET_MAX_RANKS);
    return 2;
  }
  if (perf_opts.collnet_ref_ring && perf_opts.collnet_ref_streams) {
    fprintf(stderr, "strand-conform perf: --collnet-ref-streams lays out the mesh reference as "
            "collnet_stub does; it does not combine with --collnet-ref ring\n");
    return 2;
  }
  if (perf_opts.collnet_ref_ring && perf_opts.collnet_ref_headers) {
    fprintf(stderr, "strand-conform perf: --collnet-ref-headers prices the CollNet's headers on the mesh "
            "reference; it does not combine with --collnet-ref ring\n");
    return 2;
  }
  if (perf_opts.min_bytes > perf_opts.max_bytes) {
    fprintf(stderr, "strand-conform perf: --min-bytes is larger than --max-bytes\n");
    return 2;
  }
  if (perf_opts.max_bytes > ((size_t)1 << 30)) {
    fprintf(stderr, "strand-conform perf: --max-bytes is at most 1G (test() reports int sizes)\n");
    return 2;
  }
  /* The run header states the largest transfer: perf's own --max-bytes, not the suite's. */
  conform_opts.max_bytes = perf_opts.max_bytes;
  if (perf_opts.depth_sweep && perf_opts.sweep_bytes > conform_opts.max_bytes)
    conform_opts.max_bytes = perf_opts.sweep_bytes;
  for (int i = 0; perf_opts.collnet && i < perf_opts.n_collnet_bytes; i++) {
    size_t b = perf_opts.collnet_bytes[i];
    if (b * (size_t)perf_opts.collnet_window > ((size_t)1 << 30)) {
      fprintf(stderr, "strand-conform perf: --collnet-bytes %zu x --collnet-window %d is over 1G of "
              "shared buffer\n", b, perf_opts.collnet_window);
      return 2;
    }
    if (b > conform_opts.max_bytes) conform_opts.max_bytes = b;
  }
  conform_opts.quick = false;
  /* Rank 0's check children append their tables to a scratch file; the JSON is assembled here
   * once the run is over (only this process outlives every check). */
  bool json_here = perf_opts.json_path && conform_opts.rank <= 0;
  bool svg_here = perf_opts.svg_path && conform_opts.rank <= 0;
  if (json_here && scratch_file(perf_opts.json_parts, sizeof perf_opts.json_parts)) return 2;
  if (svg_here && scratch_file(perf_opts.svg_parts, sizeof perf_opts.svg_parts)) {
    if (json_here) unlink(perf_opts.json_parts);
    return 2;
  }
  /* Time bound: generous per row; a transport too slow for the sweep fails with a message saying
   * which measurement ran out of time (use --timeout-scale or a smaller --max-bytes). */
  size_t sizes[64];
  int ns = size_list(sizes, 64, perf_opts.min_bytes, perf_opts.max_bytes);
  double per_row = (perf_opts.time_per_size * 2 + 1.5) * (perf_opts.ref_tcp ? 2 : 1);
  unsigned bound = 60 + (unsigned)(per_row * ns * 2);
  const conform_check_t *sel[8];
  int n = 0;
  for (conform_check_t *k = perf_checks; k->id; k++) {
    if (!strcmp(k->id, "perf.bw-grouped") && perf_opts.group < 2) continue;
    if (!strcmp(k->id, "perf.depth-sweep") && !perf_opts.depth_sweep) continue;
    if (!strcmp(k->id, "perf.latency") && perf_opts.no_lat) continue;
    if (!strcmp(k->id, "perf.bw-bi") && perf_opts.no_bi) continue;
    if (!strcmp(k->id, "perf.collnet-allreduce") && !perf_opts.collnet) continue;
    if (strcmp(k->id, "perf.collnet-allreduce") && conform_opts.nranks != 2) continue;
    k->timeout_s = !strcmp(k->id, "perf.latency") ? bound * 2 : bound;
    if (!strcmp(k->id, "perf.collnet-allreduce")) /* two measurements a row, a collComm set-up each */
      k->timeout_s = 60 + (unsigned)((perf_opts.time_per_size * 2 + 2.5) * 2 * perf_opts.n_collnet_bytes * 2) +
                     30 * (unsigned)(conform_opts.nranks - 2); /* each further rank: a mesh link, a CollNet peer */
    if (conform_check_selected(k, &conform_opts)) sel[n++] = k;
  }
  if (n == 0) {
    fprintf(stderr, "strand-conform perf: nothing selected\n");
    return 2;
  }
  int rc = conform_run_checks(sel, n);
  char date[64];
  time_t now = time(NULL);
  strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%SZ", gmtime(&now));
  struct utsname uts;
  uname(&uts);
  if (json_here) {
    write_json(rc, date, &uts);
    unlink(perf_opts.json_parts);
  }
  if (svg_here) {
    if (perf_svg_write(perf_opts.svg_parts, perf_opts.svg_path, date, uts.nodename) && rc == 0) rc = 1;
    unlink(perf_opts.svg_parts);
  }
  return rc;
}

