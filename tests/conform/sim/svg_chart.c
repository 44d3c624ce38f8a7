/* svg_chart — see svg_chart.h. Plain stdio; every coordinate printed with one decimal in the C
 * locale's format (the process never calls setlocale). */
#include "svg_chart.h"

#include <errno.h>
#include <math.h>
#include <string.h>

/* Layout, in SVG user units. */
#define CH_W 980.0
#define CH_TOP 62.0    /* title and subtitle */
#define PANEL_H 370.0
#define PLOT_X0 84.0
#define PLOT_X1 674.0
#define PLOT_DY0 34.0  /* panel top -> plot top (panel title above) */
#define PLOT_DY1 304.0 /* panel top -> plot bottom (tick labels and axis label below) */
#define LEGEND_X 694.0
#define MIN_XLABEL_GAP 34.0 /* "256K" is about 28 units wide */

static const char *const palette[] = {
  "#1f5fbf", "#d9480f", "#2b8a3e", "#862e9c", "#c2255c", "#0b7285", "#e67700", "#495057",
  "#5c940d", "#a61e4d",
};
#define NPALETTE (sizeof palette / sizeof palette[0])

static int valid(double x, double y) { return isfinite(x) && isfinite(y) && x > 0 && y > 0; }

static void put_escaped(FILE *f, const char *s) {
  for (; s && *s; s++) {
    switch (*s) {
    case '&': fputs("&amp;", f); break;
    case '<': fputs("&lt;", f); break;
    case '>': fputs("&gt;", f); break;
    case '"': fputs("&quot;", f); break;
    case '\'': fputs("&apos;", f); break;
    default:
      /* XML 1.0 allows no control characters but tab, newline and carriage return. */
      if ((unsigned char)*s < 0x20 && *s != '\t' && *s != '\n' && *s != '\r') fputc(' ', f);
      else fputc(*s, f);
    }
  }
}

/* 2^e as a size label: 8B, 512B, 1K, 64K, 1M, 1G, 1T. */
static void bytes_label(int e, char *buf, size_t len) {
  static const char units[] = "BKMGTPE";
  if (e < 0) {
    snprintf(buf, len, "%g", ldexp(1.0, e));
    return;
  }
  int u = e / 10;
  if (u > 6) u = 6;
  snprintf(buf, len, "%.0f%c", ldexp(1.0, e - 10 * u), units[u]);
}

/* 10^e as a decade label: 0.001, 0.1, 1, 10, 1000, 1e+07. */
static void decade_label(int e, char *buf, size_t len) {
  if (e >= 0 && e <= 6) snprintf(buf, len, "%.0f", pow(10.0, e));
  else if (e < 0 && e >= -4) snprintf(buf, len, "%.*f", -e, pow(10.0, e));
  else snprintf(buf, len, "1e%+d", e);
}

typedef struct {
  int xlo, xhi; /* log2 range */
  int ylo, yhi; /* log10 range */
  double y0, y1; /* plot top, bottom */
} frame_t;

static double map_x(const frame_t *fr, double x) {
  return PLOT_X0 + (log2(x) - fr->xlo) / (fr->xhi - fr->xlo) * (PLOT_X1 - PLOT_X0);
}

static double map_y(const frame_t *fr, double y) {
  return fr->y1 - (log10(y) - fr->ylo) / (fr->yhi - fr->ylo) * (fr->y1 - fr->y0);
}

/* The range of the valid points' x (or y) over the panels of one x kind (all panels: kind < 0). */
static void data_range(const svg_panel_t *p, size_t np, int kind, int want_y, double *lo, double *hi) {
  *lo = INFINITY;
  *hi = -INFINITY;
  for (size_t k = 0; k < np; k++) {
    if (kind >= 0 && (int)p[k].xkind != kind) continue;
    for (size_t s = 0; s < p[k].nseries; s++)
      for (size_t i = 0; i < p[k].series[s].n; i++) {
        double x = p[k].series[s].x[i], y = p[k].series[s].y[i];
        if (!valid(x, y)) continue;
        *lo = fmin(*lo, want_y ? y : x);
        *hi = fmax(*hi, want_y ? y : x);
      }
  }
}

/* xmin/xmax: the x range shared by every panel of this x kind, so that their sizes line up. */
static void panel_write(FILE *f, const svg_panel_t *p, double top, double xmin, double xmax) {
  frame_t fr = {.y0 = top + PLOT_DY0, .y1 = top + PLOT_DY1};
  double ymin, ymax;
  data_range(p, 1, -1, 1, &ymin, &ymax);
  int have = ymin <= ymax;
  if (!have) ymin = ymax = 1;
  if (!(xmin <= xmax)) xmin = xmax = 1;
  fr.xlo = (int)floor(log2(xmin));
  fr.xhi = (int)ceil(log2(xmax));
  if (fr.xhi <= fr.xlo) fr.xhi = fr.xlo + 1;
  fr.ylo = (int)floor(log10(ymin));
  fr.yhi = (int)ceil(log10(ymax));
  if (fr.yhi <= fr.ylo) fr.yhi = fr.ylo + 1;

  fprintf(f, "<g class=\"panel\" data-title=\"");
  put_escaped(f, p->title);
  fprintf(f, "\">\n<text class=\"panel-title\" x=\"%.1f\" y=\"%.1f\" font-size=\"15\" "
          "font-weight=\"bold\">", PLOT_X0, top + 20);
  put_escaped(f, p->title);
  fprintf(f, "</text>\n");
  fprintf(f, "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"#ffffff\" "
          "stroke=\"#868e96\"/>\n", PLOT_X0, fr.y0, PLOT_X1 - PLOT_X0, fr.y1 - fr.y0);

  /* y: decade grid lines and labels, faint minor ticks at 2..9. */
  for (int e = fr.ylo; e <= fr.yhi; e++) {
    double y = map_y(&fr, pow(10.0, e));
    char lab[32];
    decade_label(e, lab, sizeof lab);
    fprintf(f, "<line class=\"grid\" x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" "
            "stroke=\"#dee2e6\"/>\n", PLOT_X0, y, PLOT_X1, y);
    fprintf(f, "<text class=\"ytick\" x=\"%.1f\" y=\"%.1f\" text-anchor=\"end\">%s</text>\n",
            PLOT_X0 - 6, y + 4, lab);
    if (e == fr.yhi) break;
    for (int m = 2; m <= 9; m++) {
      double ym = map_y(&fr, m * pow(10.0, e));
      fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#adb5bd\"/>\n",
              PLOT_X0, ym, PLOT_X0 + 4, ym);
      /* A single decade gets 2 and 5 labelled too, or the axis would read only "1 .. 10". */
      if (fr.yhi - fr.ylo == 1 && (m == 2 || m == 5))
        fprintf(f, "<line class=\"grid\" x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" "
                "stroke=\"#f1f3f5\"/>\n<text class=\"ytick\" x=\"%.1f\" y=\"%.1f\" "
                "text-anchor=\"end\">%g</text>\n", PLOT_X0, ym, PLOT_X1, ym, PLOT_X0 - 6, ym + 4,
                m * pow(10.0, e));
    }
  }
  /* x: a tick at every power of two; a label and grid line at every multiple of k, the smallest
   * of 1, 2, 5, 10, 20 that leaves MIN_XLABEL_GAP between labels (so 2^10, 2^20 are labelled). */
  static const int steps[] = {1, 2, 5, 10, 20};
  double per = (PLOT_X1 - PLOT_X0) / (fr.xhi - fr.xlo);
  int k = 20;
  for (size_t i = 0; i < sizeof steps / sizeof steps[0]; i++)
    if (per * steps[i] >= MIN_XLABEL_GAP) {
      k = steps[i];
      break;
    }
  for (int e = fr.xlo; e <= fr.xhi; e++) {
    double x = map_x(&fr, ldexp(1.0, e));
    int labelled = ((e % k) + k) % k == 0;
    if (!labelled) {
      fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#adb5bd\"/>\n", x,
              fr.y1, x, fr.y1 - 4);
      continue;
    }
    char lab[32];
    if (p->xkind == SVG_X_BYTES) bytes_label(e, lab, sizeof lab);
    else snprintf(lab, sizeof lab, "%.0f", ldexp(1.0, e));
    fprintf(f, "<line class=\"grid\" x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" "
            "stroke=\"#dee2e6\"/>\n", x, fr.y0, x, fr.y1);
    fprintf(f, "<text class=\"xtick\" x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">%s</text>\n", x,
            fr.y1 + 16, lab);
  }
  fprintf(f, "<text class=\"xlabel\" x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">",
          (PLOT_X0 + PLOT_X1) / 2, fr.y1 + 36);
  put_escaped(f, p->xlabel);
  fprintf(f, "</text>\n<text class=\"ylabel\" x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\" "
          "transform=\"rotate(-90 %.1f %.1f)\">", 24.0, (fr.y0 + fr.y1) / 2, 24.0,
          (fr.y0 + fr.y1) / 2);
  put_escaped(f, p->ylabel);
  fprintf(f, "</text>\n");
  if (!have)
    fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\" fill=\"#868e96\">no data"
            "</text>\n", (PLOT_X0 + PLOT_X1) / 2, (fr.y0 + fr.y1) / 2);

  /* Series: one polyline each, markers beside it, then the legend entry. */
  for (size_t s = 0; s < p->nseries; s++) {
    const svg_series_t *se = &p->series[s];
    const char *col = palette[(size_t)(se->color < 0 ? -se->color : se->color) % NPALETTE];
    fprintf(f, "<polyline class=\"series\" data-series=\"");
    put_escaped(f, se->name);
    fprintf(f, "\" fill=\"none\" stroke=\"%s\" stroke-width=\"2\"%s points=\"", col,
            se->dashed ? " stroke-dasharray=\"6 4\"" : "");
    int first = 1;
    for (size_t i = 0; i < se->n; i++) {
      if (!valid(se->x[i], se->y[i])) continue;
      fprintf(f, "%s%.1f,%.1f", first ? "" : " ", map_x(&fr, se->x[i]), map_y(&fr, se->y[i]));
      first = 0;
    }
    fprintf(f, "\"/>\n<g class=\"markers\" fill=\"%s\">", col);
    for (size_t i = 0; i < se->n; i++)
      if (valid(se->x[i], se->y[i]))
        fprintf(f, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"2.5\"/>", map_x(&fr, se->x[i]),
                map_y(&fr, se->y[i]));
    fprintf(f, "</g>\n");
    double ly = fr.y0 + 12 + 18.0 * (double)s;
    fprintf(f, "<g class=\"legend\"><line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" "
            "stroke=\"%s\" stroke-width=\"2\"%s/><text x=\"%.1f\" y=\"%.1f\">", LEGEND_X, ly,
            LEGEND_X + 26, ly, col, se->dashed ? " stroke-dasharray=\"6 4\"" : "", LEGEND_X + 32,
            ly + 4);
    put_escaped(f, se->name);
    fprintf(f, "</text></g>\n");
  }
  fprintf(f, "</g>\n");
}

int svg_chart_write(FILE *f, const svg_chart_t *ch) {
  double h = CH_TOP + PANEL_H * (double)ch->npanels + 10;
  fprintf(f, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
          "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" "
          "viewBox=\"0 0 %.0f %.0f\" font-family=\"sans-serif\" font-size=\"12\">\n",
          CH_W, h, CH_W, h);
  fprintf(f, "<title>");
  put_escaped(f, ch->title);
  fprintf(f, "</title>\n<rect width=\"100%%\" height=\"100%%\" fill=\"#f8f9fa\"/>\n"
          "<text class=\"title\" x=\"%.1f\" y=\"26\" font-size=\"17\" font-weight=\"bold\">",
          PLOT_X0 - 60);
  put_escaped(f, ch->title);
  fprintf(f, "</text>\n");
  if (ch->subtitle) {
    fprintf(f, "<text class=\"subtitle\" x=\"%.1f\" y=\"46\" fill=\"#495057\">", PLOT_X0 - 60);
    put_escaped(f, ch->subtitle);
    fprintf(f, "</text>\n");
  }
  for (size_t i = 0; i < ch->npanels; i++) {
    double xlo, xhi;
    data_range(ch->panels, ch->npanels, (int)ch->panels[i].xkind, 0, &xlo, &xhi);
    panel_write(f, &ch->panels[i], CH_TOP + PANEL_H * (double)i, xlo, xhi);
  }
  fprintf(f, "</svg>\n");
  fflush(f);
  return ferror(f) ? -1 : 0;
}

int svg_chart_write_file(const char *path, const svg_chart_t *ch) {
  FILE *f = fopen(path, "w");
  if (!f) return -1;
  int rc = svg_chart_write(f, ch);
  int e = errno;
  if (fclose(f) != 0 && rc == 0) return -1;
  errno = e;
  return rc;
}
