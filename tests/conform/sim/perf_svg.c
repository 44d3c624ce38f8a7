/* strand-conform perf --svg — the chart of a perf run (svg_chart.c draws it).
 *
 * Every check runs in its own child process, so rank 0's children record their points in a
 * scratch file, one line per point, appended once the table passed:
 *     P <TAB> panel <TAB> color <TAB> dashed <TAB> series name <TAB> x <TAB> y
 *     T <TAB> plugin name
 * panel 'b' = bandwidth against size, 'l' = latency against size, 'd' = bandwidth against depth.
 * Once every check is over, the parent (perf_svg_write) groups the points by panel and series, in
 * the order the series first appeared, and writes the chart. */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "perf.h"
#include "svg_chart.h"

void perf_pts_add(perf_pts_t *b, char panel, int color, bool dashed, const char *series, double x,
                  double y) {
  char line[400];
  int n = snprintf(line, sizeof line, "P\t%c\t%d\t%d\t%s\t%.17g\t%.17g\n", panel, color,
                   dashed ? 1 : 0, series, x, y);
  if (n < 0 || (size_t)n >= sizeof line) return;
  if (b->len + (size_t)n + 1 > b->cap) {
    size_t nc = (b->cap + (size_t)n + 1) * 2;
    char *s = realloc(b->s, nc);
    if (!s) return;
    b->s = s;
    b->cap = nc;
  }
  memcpy(b->s + b->len, line, (size_t)n + 1);
  b->len += (size_t)n;
}

void perf_pts_flush(perf_pts_t *b, const char *parts, const char *plugin) {
  if (!parts[0] || !b->len) return;
  FILE *f = fopen(parts, "a");
  if (!f) return;
  char name[200];
  snprintf(name, sizeof name, "%s", plugin ? plugin : "?");
  for (char *p = name; *p; p++)
    if (*p == '\t' || *p == '\n') *p = ' ';
  fprintf(f, "T\t%s\n", name);
  fwrite(b->s, 1, b->len, f);
  fclose(f);
}

void perf_pts_free(perf_pts_t *b) {
  free(b->s);
  memset(b, 0, sizeof *b);
}

/* ------------------------------------------------------------------ the parent's side */

#define MAX_SERIES 48

typedef struct {
  char panel;
  char name[200];
  int color, dashed;
  double *x, *y;
  size_t n, cap;
} ser_t;

static ser_t *find_series(ser_t *v, int *nv, char panel, const char *name, int color, int dashed) {
  for (int i = 0; i < *nv; i++)
    if (v[i].panel == panel && !strcmp(v[i].name, name)) return &v[i];
  if (*nv >= MAX_SERIES) return NULL;
  ser_t *s = &v[(*nv)++];
  memset(s, 0, sizeof *s);
  s->panel = panel;
  snprintf(s->name, sizeof s->name, "%s", name);
  s->color = color;
  s->dashed = dashed;
  return s;
}

int perf_svg_write(const char *parts, const char *svg_path, const char *date, const char *host) {
  static ser_t ser[MAX_SERIES];
  int nser = 0;
  char plugin[200] = "?";
  FILE *f = fopen(parts, "r");
  if (f) {
    char *line = NULL;
    size_t cap = 0;
    ssize_t len;
    while ((len = getline(&line, &cap, f)) > 0) {
      if (line[len - 1] == '\n') line[--len] = '\0';
      char *fld[7];
      int nf = 0;
      for (char *p = line, *tok; nf < 7 && (tok = strsep(&p, "\t"));) fld[nf++] = tok;
      if (nf == 2 && !strcmp(fld[0], "T")) {
        snprintf(plugin, sizeof plugin, "%s", fld[1]);
        continue;
      }
      if (nf != 7 || strcmp(fld[0], "P")) continue;
      ser_t *s = find_series(ser, &nser, fld[1][0], fld[4], atoi(fld[2]), atoi(fld[3]));
      if (!s) continue;
      if (s->n == s->cap) {
        size_t nc = s->cap ? s->cap * 2 : 16;
        double *nx = realloc(s->x, nc * sizeof *nx);
        if (!nx) continue;
        s->x = nx;
        double *ny = realloc(s->y, nc * sizeof *ny);
        if (!ny) continue;
        s->y = ny;
        s->cap = nc;
      }
      s->x[s->n] = strtod(fld[5], NULL);
      s->y[s->n++] = strtod(fld[6], NULL);
    }
    free(line);
    fclose(f);
  }
  static const struct {
    char panel;
    const char *title, *xlabel, *ylabel;
    svg_xkind_t xkind;
  } kinds[] = {
    {'b', "bandwidth", "message size", "algbw (GB/s)", SVG_X_BYTES},
    {'l', "latency (ping-pong, half round trip, p50)", "message size", "latency (\xc2\xb5s)",
     SVG_X_BYTES},
    {'d', "depth sweep: unidirectional bandwidth against messages in flight",
     "messages in flight (depth)", "algbw (GB/s)", SVG_X_COUNT},
  };
  svg_series_t sv[MAX_SERIES];
  svg_panel_t panels[3];
  size_t np = 0, k = 0;
  for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++) {
    size_t first = k;
    for (int j = 0; j < nser; j++)
      if (ser[j].panel == kinds[i].panel)
        sv[k++] = (svg_series_t){ser[j].name, ser[j].x, ser[j].y, ser[j].n, ser[j].color,
                                 ser[j].dashed};
    if (k == first) continue;
    panels[np++] = (svg_panel_t){kinds[i].title, kinds[i].xlabel, kinds[i].ylabel, kinds[i].xkind,
                                 &sv[first], k - first};
  }
  int rc = 0;
  if (np == 0) {
    fprintf(stderr, "strand-conform perf: no table passed, no chart written to %s\n", svg_path);
    rc = -1;
  } else {
    char title[256], sub[300];
    snprintf(title, sizeof title, "strand-conform perf: %s", plugin);
    int dashed = 0;
    for (int j = 0; j < nser; j++) dashed |= ser[j].dashed;
    snprintf(sub, sizeof sub, "%s, host %s%s", date, host,
             dashed ? "; dashed: the raw-TCP reference (--ref tcp) of the same colour" : "");
    svg_chart_t ch = {title, sub, panels, np};
    if (svg_chart_write_file(svg_path, &ch)) {
      fprintf(stderr, "strand-conform perf: cannot write %s: %s\n", svg_path, strerror(errno));
      rc = -1;
    }
  }
  for (int j = 0; j < nser; j++) {
    free(ser[j].x);
    free(ser[j].y);
  }
  return rc;
}
