/* strand-conform perf — what perf.c and perf_loop.c share: the transport a measurement loop
 * drives (the plugin or the raw-TCP reference), the send buffer and receive area, and the loops. */
#ifndef STRAND_CONFORM_PERF_H
#define STRAND_CONFORM_PERF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "simperf.h"

#define PERF_AREA_MAX ((size_t)128 << 20) /* receive area: distinct slots while they fit */

/* One transport for both backends, so that the plugin and the reference run the very same loop. */
typedef struct {
  conform_ctx_t *c;
  bool tcp;
  rawtcp_t *rt;
  conform_link_t *link;
  void *smh, *rmh;
} xp_t;

typedef struct {
  conform_ctx_t *c;
  unsigned char *sbuf, *rarea;
  size_t sbuf_len, rarea_len;
  uint64_t seed_mine, seed_peer;
  int peer;
} bufs_t;

int perf_bufs_alloc(conform_ctx_t *c, bufs_t *B, size_t max_size, int slots_wanted);
void perf_bufs_free(bufs_t *B);

/* One bandwidth run (see perf.c for what bw-uni / bw-bi / bw-grouped mean). */
typedef struct {
  bool send, recv; /* this rank's roles */
  bool ack;        /* uni: receiver acknowledges the last message, sender waits for it */
  size_t size;
  int n;           /* messages per irecv */
  int depth;       /* irecvs (and n x isends) in flight */
  long groups;     /* irecvs to complete = isends / n */
} bw_spec_t;
/* *elapsed = seconds from the barrier to the end of this rank's part. 0, or -1 (recorded). */
int perf_bw_run(xp_t *x, bufs_t *B, const bw_spec_t *sp, const char *what, double *elapsed);
/* Ping-pong: rank 0 pings, rank 1 answers. Returns half round trips (seconds) on rank 0. */
int perf_lat_run(xp_t *x, bufs_t *B, size_t size, long iters, const char *what, double *half,
                 double *total);

/* perf --svg (perf_svg.c): a check child collects its points, and appends them to the scratch file
 * `parts` once its table passed; the parent turns that file into the chart. panel: 'b' bandwidth
 * against size, 'l' latency against size, 'd' bandwidth against depth. */
typedef struct {
  char *s;
  size_t len, cap;
} perf_pts_t;
void perf_pts_add(perf_pts_t *b, char panel, int color, bool dashed, const char *series, double x,
                  double y);
void perf_pts_flush(perf_pts_t *b, const char *parts, const char *plugin);
void perf_pts_free(perf_pts_t *b);
/* 0, or -1 (said on stderr) when nothing was recorded or the file could not be written. */
int perf_svg_write(const char *parts, const char *svg_path, const char *date, const char *host);

#endif
