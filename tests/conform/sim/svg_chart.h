/* svg_chart — a self-contained SVG line chart for benchmark sweeps (strand-conform perf --svg).
 *
 * A chart is a title, a subtitle and one or more panels stacked vertically. Each panel has a log2
 * x axis (message sizes labelled 8B, 1K, 1M ..., or plain counts such as depths 1, 2, 4 ...), a
 * log10 y axis with decade ticks, one <polyline> per series (in order, with a data-series
 * attribute naming it) and a legend. Points whose x or y is zero, negative or not finite are
 * skipped, never plotted: a series with no valid point still gets its (empty) polyline and legend
 * entry, so "one polyline per series" always holds. */
#ifndef STRAND_CONFORM_SVG_CHART_H
#define STRAND_CONFORM_SVG_CHART_H

#include <stddef.h>
#include <stdio.h>

typedef struct {
  const char *name;       /* legend text */
  const double *x, *y;    /* n points, in the order given (sweeps give x ascending) */
  size_t n;
  int color;              /* palette index (taken modulo the palette size) */
  int dashed;             /* nonzero: dashed line (a reference beside its measurement) */
} svg_series_t;

typedef enum {
  SVG_X_BYTES, /* tick labels 1B, 8B, 1K, 64K, 1M, 1G */
  SVG_X_COUNT, /* tick labels 1, 2, 4, ... */
} svg_xkind_t;

typedef struct {
  const char *title;  /* above the panel, e.g. "bandwidth" */
  const char *xlabel; /* e.g. "message size" */
  const char *ylabel; /* e.g. "GB/s" */
  svg_xkind_t xkind;
  const svg_series_t *series;
  size_t nseries;
} svg_panel_t;

typedef struct {
  const char *title;    /* e.g. "strand-conform perf: strand-socket" */
  const char *subtitle; /* e.g. "2026-11-23T20:00:00Z, host vm" (may be NULL) */
  const svg_panel_t *panels;
  size_t npanels;
} svg_chart_t;

/* Writes the whole SVG document. 0, or -1 when writing failed. */
int svg_chart_write(FILE *f, const svg_chart_t *ch);
/* Same, to a file path (created or truncated). 0, or -1 with errno set. */
int svg_chart_write_file(const char *path, const svg_chart_t *ch);

#endif
