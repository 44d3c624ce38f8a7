/* strand-conform perf — what perf.c and perf_loop.c share: the transport a measurement loop
 * drives (the plugin or the raw-TCP reference), the send buffer and receive area, and the loops. */
#ifndef STRAND_CONFORM_PERF_H
#define STRAND_CONFORM_PERF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

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

/* ------------------------------------------------------------------ what the checks share (perf.c) */

#define PERF_COLLNET_SIZES 16
#define PERF_COLLNET_MAX_RANKS 8 /* perf --collnet --nranks N: N in 2..8 */
#define PERF_COLLNET_MAX_REF_STREAMS 4 /* --collnet-ref-streams S: S in 1..4 (collnet_stub's auto: 1..4) */

/* perf's options (perf.c parses them). */
typedef struct {
  size_t min_bytes, max_bytes;
  int factor;
  int depth;
  bool depth_sweep;
  size_t sweep_bytes;
  int group;
  bool ref_tcp;
  int ref_streams;
  const char *ref_addr;
  const char *json_path;
  const char *svg_path;
  double time_per_size;
  int dev;
  bool no_lat, no_bi;
  char json_parts[256]; /* rank 0's check children append their tables here */
  char svg_parts[256];  /* ... and the points of --svg's chart here (perf_svg.c) */
  char cmdline[1024];
  /* perf --collnet (perf_collnet.c): the CollNet all-reduce table and its net reference. */
  bool collnet;
  int collnet_window;                       /* iallreduce calls in flight (NCCL_STEPS = 8) */
  size_t collnet_bytes[PERF_COLLNET_SIZES]; /* bytes per call, one row each */
  int n_collnet_bytes;
  bool collnet_ref_headers; /* the reference sends a small header message ahead of each payload */
  bool collnet_ref_ring;    /* --collnet-ref ring: the reference moves a ring all-reduce's bytes */
  int collnet_ref_streams;  /* --collnet-ref-streams S: the mesh reference on collnet_stub's comm
                               layout (S streams of 2 comm pairs per peer); 0: one pair per peer */
} perf_opts_t;
extern perf_opts_t perf_opts;

/* One table's context: the plugin link and its buffers, the optional raw-TCP reference, rank 0's
 * output and JSON rows. */
typedef struct {
  conform_ctx_t *c;
  strand_props_v12_t props;
  conform_link_t link;
  bool link_open;
  bufs_t B;
  xp_t px, tx; /* plugin, raw TCP */
  bool have_ref;
  char ref_desc[160];
  char ref_skip[300];
  FILE *out;     /* rank 0 prints; NULL elsewhere */
  char *json;    /* this table's JSON rows (rank 0) */
  size_t json_len, json_cap;
  perf_pts_t pts; /* this table's chart points (rank 0, --svg) */
  int max_depth;
} perf_t;

/* Link, buffers (`slots` receive slots) and reference for check `id`; -1 with the failure
 * recorded (perf_close is still due). */
int perf_open(perf_t *P, conform_ctx_t *c, const char *id, int slots);
void perf_close(perf_t *P);
/* A table line on rank 0 (a TAP comment under --tap). */
void perf_out(perf_t *P, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* This table's JSON text (rank 0, with --json); perf_json_str adds a quoted, escaped string. */
void perf_json(perf_t *P, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void perf_json_str(perf_t *P, const char *s);
/* The table passed: its JSON and chart points go to the parent's scratch files. */
void perf_json_flush(perf_t *P);
/* The table's title lines and the JSON fields every table starts with. */
void perf_header(perf_t *P, const char *id, const char *title);
/* Warm-up and fewest timed iterations for a size; the iteration count that fills --time at the
 * warm-up's pace (rank 0's choice, agreed by all); the largest of every rank's values. */
long perf_warm_groups(size_t size, int depth);
long perf_min_groups(size_t size);
int perf_agree_iters(conform_ctx_t *c, double warm_s, long warm_n, long lo, long hi, long *iters);
int perf_agree_max(conform_ctx_t *c, double *v);

/* perf_loop.c: receive slot m of messages of `size` bytes (distinct while they fit in the area);
 * *nslots, when given, gets how many distinct slots there are. */
unsigned char *perf_rslot(const bufs_t *B, size_t size, long m, int *nslots);

/* perf_collnet.c: the perf.collnet-allreduce check (perf --collnet). */
conform_status_t perf_collnet_allreduce(conform_ctx_t *c);

#endif
