/* Writes a known chart for svg_check.py (`svg_check.py unit`): the checker parses it as XML and
 * compares it with the series below. Usage: test_svg_chart OUT.svg */
#include <math.h>
#include <stdio.h>

#include "svg_chart.h"

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: %s OUT.svg\n", argv[0]);
    return 2;
  }
  /* "bw": 8 B .. 1 MiB, 18 points, every one valid. */
  double x[18], bw[18], lat[18];
  for (int i = 0; i < 18; i++) {
    x[i] = 8.0 * (double)(1 << i);
    bw[i] = x[i] / (5e3 + x[i] / 4.0); /* GB/s: 0.0016 .. 3.98 */
    lat[i] = 5.0 + x[i] / 4000.0;      /* us */
  }
  /* "gaps": six points, three of them not plottable (zero, negative, NaN). */
  double gx[6] = {64, 128, 256, 512, 1024, 2048};
  double gy[6] = {0.5, 1.0, 0.0, 2.0, -1.0, NAN};
  /* "empty": nothing plottable at all. */
  double ey[3] = {0, 0, -3};
  svg_series_t bws[] = {
    {"plugin <uni> & co", x, bw, 18, 0, 0},
    {"gaps", gx, gy, 6, 1, 1},
    {"empty", gx, ey, 3, 2, 0},
  };
  svg_series_t lats[] = {
    {"plugin p50", x, lat, 18, 0, 0},
    {"reference p50", x, lat, 5, 0, 1},
  };
  double dx[6] = {1, 2, 4, 8, 16, 32}, dy[6] = {0.2, 0.4, 0.8, 1.5, 2.5, 3.1};
  svg_series_t deps[] = {{"depth sweep", dx, dy, 6, 3, 0}};
  svg_panel_t panels[] = {
    {"bandwidth", "message size", "bandwidth (GB/s)", SVG_X_BYTES, bws, 3},
    {"latency", "message size", "latency (\xc2\xb5s)", SVG_X_BYTES, lats, 2},
    {"depth", "messages in flight", "bandwidth (GB/s)", SVG_X_COUNT, deps, 1},
  };
  svg_chart_t ch = {"svg_chart unit test", "fixed data", panels, 3};
  if (svg_chart_write_file(argv[1], &ch)) {
    perror(argv[1]);
    return 1;
  }
  return 0;
}
