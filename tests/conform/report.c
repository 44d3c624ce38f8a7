/* strand-conform — reporting: readable table (default) or TAP on stdout, JSON and JUnit XML
 * files for CI, a progress line on stderr for long runs, and always the same last line
 * "N passed, N failed, N skipped" so that scripts can grep the verdict. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "conform_internal.h"

static const char *status_str(conform_status_t s) {
  return s == CONFORM_PASS ? "PASS" : s == CONFORM_FAIL ? "FAIL" : s == CONFORM_ENV ? "ENV" : "SKIP";
}

/* A pass whose note carries a warning (conform_warn): shown as WARN, counted as passed. */
static bool row_warned(const conform_row_t *r) {
  return r->status == CONFORM_PASS && strstr(r->msg, CONFORM_WARNING_PREFIX) != NULL;
}

/* A skip because devices() returned 0: the plugin's hardware is not on this host. */
static bool row_no_devices(const conform_row_t *r) {
  return r->status == CONFORM_SKIP &&
         strncmp(r->msg, CONFORM_ZERO_DEVICES_MSG, strlen(CONFORM_ZERO_DEVICES_MSG)) == 0;
}

void conform_report_list(FILE *out) {
  const conform_check_t **all;
  int n = conform_all_checks(&all);
  int w = 0;
  for (int i = 0; i < n; i++)
    if ((int)strlen(all[i]->id) > w) w = (int)strlen(all[i]->id);
  for (int i = 0; i < n; i++)
    fprintf(out, "%-*s  %-34s  %s\n", w, all[i]->id, all[i]->clause, all[i]->description);
  fprintf(out, "%d checks\n", n);
}

static bool progress_enabled(void) {
  if (conform_opts.progress >= 0) return conform_opts.progress == 1;
  return isatty(STDERR_FILENO);
}

void conform_report_progress(int done, int total, const conform_row_t *last) {
  if (!progress_enabled()) return;
  fprintf(stderr, "\r\033[K[%d/%d] %s %s", done, total, last ? status_str(last->status) : "",
          last && last->check ? last->check->id : "");
  if (done == total) fprintf(stderr, "\r\033[K");
  fflush(stderr);
}

void conform_report_counts(const conform_run_result_t *run, int *pass, int *fail, int *skip) {
  *pass = *fail = *skip = 0;
  for (int i = 0; i < run->n_rows; i++) {
    switch (run->rows[i].status) {
    case CONFORM_PASS: (*pass)++; break;
    case CONFORM_FAIL: (*fail)++; break;
    default: (*skip)++; /* SKIP, and ENV: the plugin was not judged */
    }
  }
}

static const char *row_id(const conform_row_t *r) { return r->check ? r->check->id : "?"; }

static void json_str(FILE *f, const char *s) {
  fputc('"', f);
  for (; s && *s; s++) {
    unsigned char ch = (unsigned char)*s;
    if (ch == '"' || ch == '\\') fprintf(f, "\\%c", ch);
    else if (ch == '\n') fputs("\\n", f);
    else if (ch < 0x20) fprintf(f, "\\u%04x", ch);
    else fputc(ch, f);
  }
  fputc('"', f);
}

static void xml_str(FILE *f, const char *s) {
  for (; s && *s; s++) {
    unsigned char ch = (unsigned char)*s;
    switch (ch) {
    case '&': fputs("&amp;", f); break;
    case '<': fputs("&lt;", f); break;
    case '>': fputs("&gt;", f); break;
    case '"': fputs("&quot;", f); break;
    default:
      if (ch < 0x20 && ch != '\n' && ch != '\t') fputc(' ', f);
      else fputc(ch, f);
    }
  }
}

/* The number of lines of a captured log. */
static int log_lines(const char *log) {
  int n = 0;
  for (const char *l = log; l && *l; n++) {
    const char *e = strchr(l, '\n');
    if (!e) return n + 1;
    l = e + 1;
  }
  return n;
}

/* Prints the lines of `log` from line `from` on, each after `prefix`. */
static void print_log(FILE *o, const char *prefix, const char *log, int from) {
  int i = 0;
  for (const char *l = log; l && *l; i++) {
    const char *e = strchr(l, '\n');
    int len = e ? (int)(e - l) : (int)strlen(l);
    if (i >= from) fprintf(o, "%s%.*s\n", prefix, len, l);
    l += len + (e ? 1 : 0);
  }
}

/* The log under a row: every line with -v; for a failure without -v, the last lines (the
 * explanation of a crash or a hang is usually there). */
#define FAIL_TAIL_LINES 5
static void row_log(FILE *o, const char *prefix, const conform_row_t *r) {
  int n = log_lines(r->log);
  if (!n) return;
  if (conform_opts.verbose > 0) {
    print_log(o, prefix, r->log, 0);
  } else if (r->status == CONFORM_FAIL || r->status == CONFORM_ENV) {
    int from = n > FAIL_TAIL_LINES ? n - FAIL_TAIL_LINES : 0;
    if (from) fprintf(o, "%slast %d of %d lines of output (-v or --json: all):\n", prefix, n - from, n);
    else fprintf(o, "%soutput of the check:\n", prefix);
    print_log(o, prefix, r->log, from);
  }
}

/* The plugin's name and library out of the run description ("plugin \"NAME\" from PATH; ..."). */
static void desc_field(const char *desc, const char *start, const char *end, char *out, size_t len) {
  out[0] = '\0';
  const char *a = strstr(desc, start);
  if (!a) return;
  a += strlen(start);
  const char *b = strstr(a, end);
  snprintf(out, len, "%.*s", b ? (int)(b - a) : (int)strlen(a), a);
}

/* The environment variables that pick a plugin, a provider or a device: the verdict table of
 * run.sh (and any reader of several results) tells runs apart by them. */
static const char *const env_keys[] = {"NCCL_NET", "NCCL_NET_PLUGIN", "FI_PROVIDER",
                                       "NCCL_SOCKET_IFNAME", "NCCL_IB_HCA", NULL};

/* Identical failures: one root cause (listen unimplemented, a broken init path) fails many checks
 * with the same first message. The groups are keyed by that message normalized: the first rank's
 * text ("[rank R] " dropped, cut at " | " and "; "), every run of digits (sizes, counts, devices,
 * addresses, "0x..." included) replaced by "#", and a "CALL returned CODE" message cut after CODE. */
#define COLLAPSE_MIN 3   /* a group this large is announced at the top */
#define COLLAPSE_SHOWN 3 /* at most this many groups are announced */
static void first_msg(const char *msg, char *out, size_t len) {
  const char *m = msg;
  if (strncmp(m, "[rank ", 6) == 0) {
    const char *e = strstr(m, "] ");
    if (e) m = e + 2;
  }
  size_t n = strlen(m);
  const char *a = strstr(m, " | "), *b = strstr(m, "; ");
  if (a && (size_t)(a - m) < n) n = (size_t)(a - m);
  if (b && (size_t)(b - m) < n) n = (size_t)(b - m);
  snprintf(out, len, "%.*s", (int)n, m);
}
static bool is_hex(char ch) {
  return (ch >= '0' && ch <= '9') || (ch >= 'a' && ch <= 'f') || (ch >= 'A' && ch <= 'F');
}
static void normalize_msg(const char *msg, char *out, size_t len) {
  char first[CONFORM_MSG_MAX];
  first_msg(msg, first, sizeof first);
  size_t o = 0;
  for (const char *p = first; *p && o + 2 < len;) {
    if (p[0] == '0' && p[1] == 'x' && is_hex(p[2])) {
      for (p += 2; is_hex(*p); p++) {}
      out[o++] = '#';
    } else if (*p >= '0' && *p <= '9') {
      while ((*p >= '0' && *p <= '9') || *p == '.') p++;
      out[o++] = '#';
    } else {
      out[o++] = *p++;
    }
  }
  out[o] = '\0';
  /* "CALL(...) returned CODE<anything>": the call and its result are the cause, what follows
   * (", listenComm (nil)", "with N devices") is how each check words it. */
  char *r = strstr(out, " returned ");
  if (r) {
    r += strlen(" returned ");
    while ((*r >= 'a' && *r <= 'z') || (*r >= 'A' && *r <= 'Z') || *r == '#' || *r == '_') r++;
    *r = '\0';
  }
}

void conform_report_cause(const char *msg, char *out, size_t len) { normalize_msg(msg, out, len); }
void conform_report_first(const char *msg, char *out, size_t len) { first_msg(msg, out, len); }

/* ENV rows (counted among the skipped in the last line): the environment, not the plugin. */
static int count_env(const conform_run_result_t *run) {
  int n = 0;
  for (int i = 0; i < run->n_rows; i++) n += run->rows[i].status == CONFORM_ENV;
  return n;
}

typedef struct { int count, first_row; } collapse_t;
/* The groups of COLLAPSE_MIN or more failed rows, largest first; returns how many (<= max). */
static int collapse_groups(const conform_run_result_t *run, collapse_t *g, int max) {
  int ng = 0;
  char *keys = calloc((size_t)run->n_rows + 1, CONFORM_MSG_MAX);
  int *cnt = calloc((size_t)run->n_rows + 1, sizeof *cnt), *first = calloc((size_t)run->n_rows + 1, sizeof *first);
  int nk = 0;
  if (!keys || !cnt || !first) goto out;
  for (int i = 0; i < run->n_rows; i++) {
    if (run->rows[i].status != CONFORM_FAIL || !run->rows[i].msg[0]) continue;
    char k[CONFORM_MSG_MAX];
    normalize_msg(run->rows[i].msg, k, sizeof k);
    int j = 0;
    while (j < nk && strcmp(keys + (size_t)j * CONFORM_MSG_MAX, k) != 0) j++;
    if (j == nk) {
      snprintf(keys + (size_t)nk * CONFORM_MSG_MAX, CONFORM_MSG_MAX, "%s", k);
      first[nk++] = i;
    }
    cnt[j]++;
  }
  for (int j = 0; j < nk; j++) {
    if (cnt[j] < COLLAPSE_MIN) continue;
    int at = ng < max ? ng++ : max;
    if (at == max) { /* full: replace the smallest when this one is larger */
      if (cnt[j] <= g[max - 1].count) continue;
      at = max - 1;
    }
    g[at].count = cnt[j];
    g[at].first_row = first[j];
    for (; at > 0 && g[at].count > g[at - 1].count; at--) {
      collapse_t t = g[at]; g[at] = g[at - 1]; g[at - 1] = t;
    }
  }
out:
  free(keys);
  free(cnt);
  free(first);
  return ng;
}

/* "N checks failed with: MESSAGE — fix this first", one line per large group. */
static void print_collapse(FILE *o, const char *prefix, const conform_run_result_t *run) {
  collapse_t g[COLLAPSE_SHOWN];
  int ng = collapse_groups(run, g, COLLAPSE_SHOWN);
  for (int i = 0; i < ng; i++) {
    char m[CONFORM_MSG_MAX];
    first_msg(run->rows[g[i].first_row].msg, m, sizeof m);
    fprintf(o, "%s%d checks failed with: %s \u2014 %s\n", prefix, g[i].count, m,
            i == 0 ? "fix this first" : "one cause");
  }
}

static int write_json(const conform_run_result_t *run, const char *path) {
  FILE *f = fopen(path, "w");
  if (!f) {
    perror(path);
    return -1;
  }
  int p, fl, s;
  conform_report_counts(run, &p, &fl, &s);
  fprintf(f, "{\n  \"tool\": \"strand-conform\",\n  \"plugin\": ");
  json_str(f, run->plugin_desc);
  char field[CONFORM_PATH_MAX];
  desc_field(run->plugin_desc, "plugin \"", "\" from ", field, sizeof field);
  fprintf(f, ",\n  \"plugin_name\": ");
  json_str(f, field);
  desc_field(run->plugin_desc, "\" from ", "; ncclNetPlugin: ", field, sizeof field);
  fprintf(f, ",\n  \"library\": ");
  json_str(f, field);
  fprintf(f, ",\n  \"env\": {");
  for (int i = 0, n = 0; env_keys[i]; i++) {
    const char *v = getenv(env_keys[i]);
    if (!v) continue;
    fprintf(f, "%s\"%s\": ", n++ ? ", " : "", env_keys[i]);
    json_str(f, v);
  }
  fprintf(f, "}");
  fprintf(f, ",\n  \"nranks\": %d,\n  \"max_bytes\": %zu,\n  \"quick\": %s,\n  \"fatal\": ",
          conform_opts.nranks, conform_opts.quick && conform_opts.max_bytes > ((size_t)16 << 20)
                                   ? ((size_t)16 << 20) : conform_opts.max_bytes,
          conform_opts.quick ? "true" : "false");
  json_str(f, run->fatal);
  fprintf(f, ",\n  \"passed\": %d,\n  \"failed\": %d,\n  \"skipped\": %d,\n  \"environment\": %d,\n"
          "  \"collapsed\": [", p, fl, s, count_env(run));
  collapse_t g[COLLAPSE_SHOWN];
  int ng = collapse_groups(run, g, COLLAPSE_SHOWN);
  for (int i = 0; i < ng; i++) {
    char m[CONFORM_MSG_MAX];
    first_msg(run->rows[g[i].first_row].msg, m, sizeof m);
    fprintf(f, "%s{\"count\": %d, \"message\": ", i ? ", " : "", g[i].count);
    json_str(f, m);
    fprintf(f, "}");
  }
  fprintf(f, "],\n  \"checks\": [\n");
  for (int i = 0; i < run->n_rows; i++) {
    const conform_row_t *r = &run->rows[i];
    fprintf(f, "    {\"id\": ");
    json_str(f, row_id(r));
    fprintf(f, ", \"abi\": %d, \"warning\": %s, \"clause\": ", r->version,
            row_warned(r) ? "true" : "false");
    json_str(f, r->check ? r->check->clause : "");
    fprintf(f, ", \"status\": \"%s\", \"seconds\": %.3f, \"message\": ", status_str(r->status) ,
            r->seconds);
    json_str(f, r->msg);
    fprintf(f, ", \"log\": [");
    for (const char *l = r->log, *sep = ""; l && *l; sep = ", ") {
      const char *e = strchr(l, '\n');
      size_t len = e ? (size_t)(e - l) : strlen(l);
      char *line = strndup(l, len);
      fputs(sep, f);
      json_str(f, line ? line : "");
      free(line);
      l += len + (e ? 1 : 0);
    }
    fprintf(f, "]}%s\n", i + 1 < run->n_rows ? "," : "");
  }
  fprintf(f, "  ]\n}\n");
  return fclose(f);
}

static int write_junit(const conform_run_result_t *run, const char *path) {
  FILE *f = fopen(path, "w");
  if (!f) {
    perror(path);
    return -1;
  }
  int p, fl, s;
  conform_report_counts(run, &p, &fl, &s);
  double total = 0;
  for (int i = 0; i < run->n_rows; i++) total += run->rows[i].seconds;
  fprintf(f, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
  fprintf(f, "<testsuites tests=\"%d\" failures=\"%d\" skipped=\"%d\" time=\"%.3f\">\n",
          run->n_rows, fl, s, total);
  fprintf(f, "  <testsuite name=\"strand-conform\" tests=\"%d\" failures=\"%d\" errors=\"0\" "
          "skipped=\"%d\" time=\"%.3f\">\n", run->n_rows, fl, s, total);
  fprintf(f, "    <properties><property name=\"plugin\" value=\"");
  xml_str(f, run->plugin_desc);
  fprintf(f, "\"/></properties>\n");
  for (int i = 0; i < run->n_rows; i++) {
    const conform_row_t *r = &run->rows[i];
    const char *id = row_id(r);
    const char *dot = strchr(id, '.');
    fprintf(f, "    <testcase classname=\"strand-conform.v%d.%.*s\" name=\"%s\" time=\"%.3f\">",
            r->version, dot ? (int)(dot - id) : (int)strlen(id), id, id, r->seconds);
    if (r->status == CONFORM_FAIL) {
      fprintf(f, "<failure message=\"");
      xml_str(f, r->msg);
      fprintf(f, "\">");
      xml_str(f, r->check ? r->check->clause : "");
      fprintf(f, "</failure>");
    } else if (r->status == CONFORM_SKIP || r->status == CONFORM_ENV) {
      fprintf(f, "<skipped message=\"");
      if (r->status == CONFORM_ENV) fprintf(f, "ENV: ");
      xml_str(f, r->msg);
      fprintf(f, "\"/>");
    }
    if (r->log && r->log[0]) {
      fprintf(f, "<system-out>");
      xml_str(f, r->log);
      fprintf(f, "</system-out>");
    }
    fprintf(f, "</testcase>\n");
  }
  fprintf(f, "  </testsuite>\n</testsuites>\n");
  return fclose(f);
}

/* --compact: the skips, one line per distinct reason, most frequent first:
 *   SKIP  6  v12  unpack.{handle,lockstep,zero-byte}: not applicable: ...
 * (count, the ABI versions, the check ids: consecutive ids of one family share their prefix). */
/* Appends at most what fits, keeping buf NUL-terminated. It checks *len < cap itself instead of
 * trusting its callers to keep it: the earlier guard `*len + n + 1 > cap` let a *len at or past cap
 * through to `buf[*len] = '\0'` (and, where the sum wraps, to the memcpy), a path gcc 12 at -O3
 * (meson's release build) cannot rule out once the loops above are inlined: -Wstringop-overflow
 * under -Werror. The room is computed only after that check, so nothing can wrap. */
static void append(char *buf, size_t cap, size_t *len, const char *text, size_t n) {
  if (*len >= cap) return;
  size_t room = cap - *len - 1;
  if (n > room) n = room;
  memcpy(buf + *len, text, n);
  *len += n;
  buf[*len] = '\0';
}

static void print_skip_groups(FILE *o, const conform_run_result_t *run) {
  int n = run->n_rows;
  int *group = malloc((size_t)(n > 0 ? n : 1) * sizeof *group); /* row -> its group's first row */
  int *firsts = malloc((size_t)(n > 0 ? n : 1) * sizeof *firsts);
  int *counts = malloc((size_t)(n > 0 ? n : 1) * sizeof *counts);
  if (!group || !firsts || !counts) {
    free(group), free(firsts), free(counts);
    return;
  }
  int ng = 0;
  for (int i = 0; i < n; i++) {
    group[i] = -1;
    if (run->rows[i].status != CONFORM_SKIP) continue;
    for (int g = 0; g < ng && group[i] < 0; g++)
      if (strcmp(run->rows[firsts[g]].msg, run->rows[i].msg) == 0) {
        group[i] = firsts[g];
        counts[g]++;
      }
    if (group[i] < 0) {
      group[i] = i;
      firsts[ng] = i;
      counts[ng++] = 1;
    }
  }
  /* Most frequent reason first; ties keep the order of the checks. */
  for (int a = 1; a < ng; a++)
    for (int b = a; b > 0 && counts[b] > counts[b - 1]; b--) {
      int t = counts[b]; counts[b] = counts[b - 1]; counts[b - 1] = t;
      t = firsts[b]; firsts[b] = firsts[b - 1]; firsts[b - 1] = t;
    }
  for (int g = 0; g < ng; g++) {
    /* The versions, newest first, and the distinct ids in check order. */
    char vers[64] = "", ids[1024] = "";
    size_t vl = 0, il = 0;
    for (int v = 64; v >= 0; v--) {
      bool has = false;
      for (int i = 0; i < n && !has; i++) has = group[i] == firsts[g] && run->rows[i].version == v;
      if (!has) continue;
      char t[16];
      snprintf(t, sizeof t, "%sv%d", vl ? "," : "", v);
      append(vers, sizeof vers, &vl, t, strlen(t));
    }
    const char *prev_family = NULL;
    size_t prev_family_len = 0;
    bool open_brace = false;
    for (int i = 0; i < n; i++) {
      if (group[i] != firsts[g]) continue;
      const char *id = row_id(&run->rows[i]);
      bool seen = false;
      for (int j = 0; j < i && !seen; j++)
        seen = group[j] == firsts[g] && strcmp(row_id(&run->rows[j]), id) == 0;
      if (seen) continue;
      const char *dot = strchr(id, '.');
      size_t fl = dot ? (size_t)(dot - id) : 0;
      /* Does the next distinct id of this group share the family? Then open a brace. */
      bool same = prev_family && fl && fl == prev_family_len && !strncmp(id, prev_family, fl);
      if (same) {
        append(ids, sizeof ids, &il, ",", 1);
        append(ids, sizeof ids, &il, id + fl + 1, strlen(id + fl + 1));
        continue;
      }
      if (open_brace) append(ids, sizeof ids, &il, "}", 1);
      open_brace = false;
      if (il) append(ids, sizeof ids, &il, ", ", 2);
      bool next_same = false;
      for (int j = i + 1; j < n && fl; j++) {
        if (group[j] != firsts[g]) continue;
        const char *nid = row_id(&run->rows[j]);
        if (strcmp(nid, id) == 0) continue;
        next_same = strncmp(nid, id, fl + 1) == 0;
        break;
      }
      if (next_same) {
        append(ids, sizeof ids, &il, id, fl + 1);
        append(ids, sizeof ids, &il, "{", 1);
        append(ids, sizeof ids, &il, id + fl + 1, strlen(id + fl + 1));
        open_brace = true;
      } else {
        append(ids, sizeof ids, &il, id, strlen(id));
      }
      prev_family = id;
      prev_family_len = next_same ? fl : 0;
    }
    if (open_brace) append(ids, sizeof ids, &il, "}", 1);
    fprintf(o, "SKIP  %2d  %s  %s: %s\n", counts[g], vers, ids, run->rows[firsts[g]].msg);
  }
  free(group), free(firsts), free(counts);
}

int conform_report_write(const conform_run_result_t *run) {
  int p, fl, s, warned = 0, no_dev = 0;
  conform_report_counts(run, &p, &fl, &s);
  for (int i = 0; i < run->n_rows; i++) {
    warned += row_warned(&run->rows[i]);
    no_dev += row_no_devices(&run->rows[i]);
  }
  FILE *o = stdout;
  if (conform_opts.plugin_report) {
    conform_plugin_report_write(o, run);
  } else if (conform_opts.tap) {
    fprintf(o, "TAP version 13\n");
    fprintf(o, "# %s\n", run->plugin_desc);
    fprintf(o, "1..%d\n", run->n_rows);
    print_collapse(o, "# ", run);
    for (int i = 0; i < run->n_rows; i++) {
      const conform_row_t *r = &run->rows[i];
      if (r->status == CONFORM_SKIP || r->status == CONFORM_ENV)
        fprintf(o, "ok %d - v%d %s # SKIP %s%s\n", i + 1, r->version, row_id(r),
                r->status == CONFORM_ENV ? "ENV: " : "", r->msg);
      else
        fprintf(o, "%sok %d - v%d %s\n", r->status == CONFORM_FAIL ? "not " : "", i + 1,
                r->version, row_id(r));
      if (r->status == CONFORM_FAIL)
        fprintf(o, "# %s: %s\n", r->check ? r->check->clause : "", r->msg);
      row_log(o, "#   ", r);
    }
  } else {
    fprintf(o, "strand-conform: %s\n", run->plugin_desc);
    print_collapse(o, "", run);
    int w = 10;
    for (int i = 0; i < run->n_rows; i++)
      if ((int)strlen(row_id(&run->rows[i])) > w) w = (int)strlen(row_id(&run->rows[i]));
    /* --compact: failures in full, then the skips grouped by reason (print_skip_groups), passes
     * only in the count line. */
    if (!conform_opts.compact)
      fprintf(o, "%-4s  %-4s  %-*s  %7s  %s\n", "", "ABI", w, "check", "time", "clause / details");
    int shown_no_dev = 0;
    char indent[300];
    snprintf(indent, sizeof indent, "%*s", 4 + 2 + 4 + 2 + w + 11, "");
    for (int i = 0; i < run->n_rows; i++) {
      const conform_row_t *r = &run->rows[i];
      if (conform_opts.compact && r->status == CONFORM_PASS && !(conform_opts.verbose > 0 && r->log))
        continue;
      /* 0 devices: said once (the first such row, and the line before the counts). */
      if (row_no_devices(r) && shown_no_dev++) continue;
      if (conform_opts.compact && r->status == CONFORM_SKIP) continue;
      fprintf(o, "%-4s  v%-3d  %-*s  %6.2fs  %s\n", row_warned(r) ? "WARN" : status_str(r->status), r->version, w,
              row_id(r), r->seconds, r->check ? r->check->clause : "");
      if (r->msg[0]) fprintf(o, "%s%s\n", indent, r->msg);
      snprintf(indent + strlen(indent), sizeof indent - strlen(indent), "> ");
      row_log(o, indent, r);
      indent[strlen(indent) - 2] = '\0';
    }
    if (conform_opts.compact) print_skip_groups(o, run);
  }
  if (run->fatal[0]) fprintf(o, "%srun stopped: %s\n", conform_opts.tap ? "# " : "", run->fatal);
  const char *pre = conform_opts.tap ? "# " : "";
  if (warned) fprintf(o, "%s%d passed with a warning (WARN: tolerated by NCCL, see the details)\n", pre, warned);
  int env = count_env(run);
  if (env)
    fprintf(o, "%s%d check(s) not judged (ENV: the test environment refused what they needed; counted "
            "as skipped, not failed)\n", pre, env);
  /* devices() = 0 and nothing failed: neither a pass nor a failure (exit status 3). */
  bool zero_devices = no_dev > 0 && fl == 0 && !run->fatal[0];
  if (zero_devices)
    fprintf(o, "%sstrand-conform: %s (devices() returned 0 on this host: the plugin's hardware is "
            "absent; %d check(s) skipped)\n", pre, CONFORM_ZERO_DEVICES_MSG, no_dev);
  if (conform_opts.json_path) write_json(run, conform_opts.json_path);
  if (conform_opts.junit_path) write_junit(run, conform_opts.junit_path);
  /* In TAP the verdict line is a comment, so TAP consumers (meson) read it without complaint. */
  fprintf(o, "%s%d passed, %d failed, %d skipped\n", conform_opts.tap ? "# " : "", p, fl, s);
  fflush(o);
  /* A library that does not load never gives a green run, whatever --only selected. */
  bool not_loaded = strncmp(run->plugin_desc, "plugin did not load", 19) == 0;
  if (fl > 0 || run->fatal[0] || not_loaded) return 1;
  return zero_devices ? CONFORM_EXIT_NO_DEVICES : 0;
}
