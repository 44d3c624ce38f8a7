/* strand-conform — internal API shared by the host-core simulator's pieces.
 *
 * Process model (why it looks like this):
 *   coordinator  one per run (the main process on rank 0's host). It relays the bootstrap traffic
 *                of every check (allgather, barrier, point-to-point blobs), merges the per-rank
 *                results and writes the report. It never loads the plugin, so a plugin that
 *                crashes or hangs cannot take the report down with it.
 *   rank parent  one per rank. Loads the plugin (dlopen + symbol probing + upward adaptation, never
 *                init) and, for every check, forks a CHECK CHILD and watches it with a deadline.
 *   check child  inits the plugin, runs one check body, reports pass/fail/skip and exits. A crash
 *                or a hang is attributed to that check only; the next check starts from a clean
 *                process again.
 * Check bodies only see conform_ctx_t: the adapted v12-shaped table, the bootstrap, helpers. */
#ifndef STRAND_CONFORM_H
#define STRAND_CONFORM_H

#include <stdarg.h>
#include <stdio.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "strand/abi/abi.h"

#define CONFORM_MAX_RANKS 64
#define CONFORM_MAX_VERSIONS 7          /* v6..v12 */
#define CONFORM_MSG_MAX 1024            /* one result message */
#define CONFORM_PATH_MAX 4096
/* listen() gets a buffer this large although only NCCL_NET_HANDLE_MAXSIZE (128) bytes are shipped:
 * a plugin that writes past 128 bytes fails handle.size-limit instead of smashing the stack of
 * every other check. */
#define CONFORM_LISTEN_BUF 512

/* ------------------------------------------------------------------------------------------- */
/* Options (main.c parses them; every process of a run sees the same values).                  */

typedef struct {
  const char *plugin;        /* PLUGIN argument (path or name); NULL = NCCL_NET_PLUGIN rules */
  int abi_forced;            /* --abi vN: 6..12, 0 = newest exported */
  bool all_abis;             /* --all-abis */
  int nranks;                /* --nranks (default 2) */
  int rank;                  /* --rank, multi-host only; -1 = local mode (fork nranks) */
  char coordinator[256];     /* --coordinator HOST:PORT, "" = local mode */
  size_t max_bytes;          /* --max-bytes cap for the largest transfers */
  bool quick;                /* --quick: CI-sized loops and caps */
  double timeout_scale;      /* --timeout-scale: multiplies every check's time bound */
  double call_bound_s;       /* --call-bound: max seconds one non-blocking plugin call may take */
  double stale_bound_s;      /* --stale-bound: how long connect to a dead listener may say NULL */
  double bootstrap_timeout_s;/* --bootstrap-timeout: ranks joining / coordinator reachability */
  const char *only[64];      /* --only globs (fnmatch), any match selects */
  int n_only;
  const char *skip[64];      /* --skip globs */
  int n_skip;
  bool tap;                  /* --tap on stdout instead of the table */
  const char *json_path;     /* --json FILE */
  const char *junit_path;    /* --junit FILE */
  int progress;              /* --progress / --no-progress; -1 = only when stderr is a TTY */
  int verbose;               /* -v: plugin INFO logs and per-rank details */
} conform_opts_t;

extern conform_opts_t conform_opts;

/* ------------------------------------------------------------------------------------------- */
/* Loaded plugin (loader.c + upgrade.c).                                                        */

typedef struct {
  char candidate[CONFORM_PATH_MAX];     /* the candidate string that loaded (§1.1) */
  char resolved[CONFORM_PATH_MAX];      /* path of the library actually opened (dlinfo) */
  void *dl;                             /* dlopen handle */
  char load_log[4096];                  /* what the loader tried, one line each */

  int net_versions[CONFORM_MAX_VERSIONS];     /* every exported ncclNetPlugin_vN, newest first */
  int n_net_versions;
  int collnet_versions[CONFORM_MAX_VERSIONS]; /* every exported ncclCollNetPlugin_vN */
  int n_collnet_versions;

  /* The version under test and the raw table the library exports for it. */
  int version;
  const void *raw_net;                  /* strand_net_vN_t* for `version` */
  int collnet_version;                  /* 0 = no CollNet symbol */
  const void *raw_collnet;              /* strand_collnet_vN_t* */

  /* What checks call: v12-shaped tables; for v12 the plugin's own pointers, for v6..v11 the
   * core-style adapters of upgrade.c (init-once refcount, int narrowing, props conversion, ...). */
  strand_net_v12_t net;
  strand_collnet_v12_t collnet;
  bool has_collnet;
} conform_plugin_t;

/* loader.c */
/* Split a NCCL_NET_PLUGIN-style value into candidates per §1.1: comma list, empty items skipped,
 * at most 14 kept, items > 254 chars ignored, "none" (any case) = empty list. NULL value = the
 * single candidate "libnccl-net.so". Returns the count. */
int conform_plugin_candidates(const char *value, char out[][256], int max);
/* The file name dlopen is retried with when `s` fails as given (§1.1 step 2), or NULL when the
 * rule does not apply (s contains '/', or s is already lib*.so). Writes into buf. */
const char *conform_plugin_rewrite(const char *s, char *buf, size_t len);
/* Load the plugin: candidates from `arg` (path or name, same grammar as NCCL_NET_PLUGIN) or, if
 * NULL, from the NCCL_NET_PLUGIN environment variable; probe every ncclNetPlugin_vN and
 * ncclCollNetPlugin_vN; honour NCCL_NET (case-insensitive match against the table's name).
 * Picks the newest version unless `abi` (6..12) forces one. 0 on success, -1 with err set. */
int conform_plugin_load(const char *arg, int abi, conform_plugin_t *p, char *err, size_t errlen);
/* Switch an already loaded plugin to another exported version (for --all-abis). */
int conform_plugin_select(conform_plugin_t *p, int abi, char *err, size_t errlen);
const void *conform_plugin_symbol(const conform_plugin_t *p, bool collnet, int version);

/* upgrade.c: build p->net / p->collnet from p->raw_* as NCCL's core adapters do (§1.5). */
void conform_upgrade_net(conform_plugin_t *p);
void conform_upgrade_collnet(conform_plugin_t *p);
/* Raw getProperties of the version under test into a caller buffer (canary checks, §5.1/10). */
strand_result_t conform_raw_get_properties(const conform_plugin_t *p, bool collnet, int dev,
                                           void *props, size_t *props_size);
/* Field map of strand_props_vN_t for the canary check: name, offset, size. */
typedef struct { const char *name; size_t off, size; } conform_field_t;
int conform_props_fields(int version, const conform_field_t **fields);
/* Size of strand_props_vN_t. */
size_t conform_props_size(int version);
/* The adapter's own refusals (size > 1 GiB for v6..v8 isend/irecv, >= 2 GiB regMr for v6/v7)
 * are reported as STRAND_INTERNAL_ERROR just like NCCL's core; this tells whether the last
 * failure came from the adapter rather than from the plugin. */
bool conform_upgrade_last_error_was_adapter(void);

/* ------------------------------------------------------------------------------------------- */
/* Results and checks.                                                                          */

typedef enum { CONFORM_PASS = 0, CONFORM_FAIL = 1, CONFORM_SKIP = 2 } conform_status_t;

typedef struct conform_ctx conform_ctx_t;

enum {
  CONFORM_F_NO_INIT = 1u << 0,   /* the harness does not init the plugin; the body manages it */
  CONFORM_F_COLLNET = 1u << 1,   /* skipped (with reason) when the library has no CollNet */
  CONFORM_F_SLOW = 1u << 2,      /* reduced under --quick */
  CONFORM_F_NO_PLUGIN = 1u << 3, /* runs even when the plugin failed to load (load.*) */
};

typedef struct {
  const char *id;          /* stable: "area.what", e.g. "xfer.recv-larger-than-send" */
  const char *clause;      /* spec clause, e.g. "§6.4 irecv sizes are maxima" */
  const char *description; /* one line: what a pass means */
  conform_status_t (*fn)(conform_ctx_t *c);
  unsigned timeout_s;      /* time bound of the whole check (all ranks), before --timeout-scale */
  unsigned flags;          /* CONFORM_F_* */
} conform_check_t;

/* Each checks_<area>.c defines one NULL-id-terminated table; registry.c lists them in order. */
extern const conform_check_t conform_checks_load[];
extern const conform_check_t conform_checks_props[];
extern const conform_check_t conform_checks_handle[];
extern const conform_check_t conform_checks_conn[];
extern const conform_check_t conform_checks_reg[];
extern const conform_check_t conform_checks_xfer[];
extern const conform_check_t conform_checks_limits[];
extern const conform_check_t conform_checks_group[];
extern const conform_check_t conform_checks_lifecycle[];
extern const conform_check_t conform_checks_collnet[];

/* registry.c: every check in report order; lookup by id; selection by --only/--skip globs. */
int conform_all_checks(const conform_check_t ***out);
const conform_check_t *conform_find_check(const char *id);
/* Makes conform_find_check see the checks of the current run first (sim/perf scenarios). */
void conform_set_running_checks(const conform_check_t *const *checks, int n);
bool conform_check_selected(const conform_check_t *chk, const conform_opts_t *o);

/* ------------------------------------------------------------------------------------------- */
/* What a check body sees.                                                                      */

struct conform_ctx {
  const conform_check_t *check;
  const conform_plugin_t *plugin;
  const strand_net_v12_t *net;         /* == &plugin->net */
  const strand_collnet_v12_t *collnet; /* NULL when the library has no CollNet */
  int version;                         /* ABI version under test (6..12) */
  int rank, nranks;
  int next, prev;                      /* ring neighbours: we send to next, receive from prev */

  void *net_ctx;                       /* from init (NULL for v6..v9 like NCCL's adapters) */
  int ndev;                            /* devices() after init */
  bool inited;
  /* Set by a body that plays a dead process: the harness reports, then exits at once without
   * finalize or closing anything (the kernel tears the sockets down like a crash would). */
  bool exit_without_cleanup;

  double deadline;                     /* conform_now() value when the check's bound runs out */
  size_t max_bytes;                    /* effective transfer cap (--max-bytes / --quick) */
  bool quick;

  /* Internal: bootstrap session and the result being built. */
  int bs_fd;
  void *bs_state;
  char bs_error[512];                  /* why the last bootstrap call failed */
  conform_status_t status;
  char msg[CONFORM_MSG_MAX];
  char note[CONFORM_MSG_MAX];          /* informational text shown with a pass */
  volatile char *phase;                /* shared with the rank parent: what the child is doing */
};

/* Recording results. conform_fail/skip store the first message (later ones are appended while
 * room lasts) and return the status so a body can `return conform_fail(c, ...)`. */
conform_status_t conform_fail(conform_ctx_t *c, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
conform_status_t conform_skip(conform_ctx_t *c, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
void conform_note(conform_ctx_t *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Names the plugin call in progress; the rank parent quotes it when the child crashes or hangs. */
void conform_phase(conform_ctx_t *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
const char *conform_result_str(strand_result_t r);

/* Time. */
double conform_now(void);                                /* monotonic seconds */
double conform_remaining(const conform_ctx_t *c);        /* seconds left before the deadline */
double conform_call_bound(void);                         /* per-call non-blocking bound */
void conform_sleep(double seconds);

/* Patterns: per-message deterministic bytes from (seed, offset); verify reports the first bad
 * byte. Guard bytes: a known filler around a buffer to detect over-writes. */
void conform_fill(void *buf, size_t len, uint64_t seed);
/* Returns -1 when all bytes match, else the offset of the first mismatch. */
long long conform_verify(const void *buf, size_t len, uint64_t seed);
uint64_t conform_seed(int src_rank, int dst_rank, uint64_t msg_index);
#define CONFORM_GUARD_BYTE 0xE7
#define CONFORM_GUARD_LEN 4096
/* A buffer with CONFORM_GUARD_LEN guard bytes on each side and `align_off` bytes of
 * misalignment after the leading guard. */
typedef struct { unsigned char *base, *data; size_t len, total; } conform_buf_t;
int conform_buf_alloc(conform_buf_t *b, size_t len, size_t align_off);
bool conform_buf_guards_ok(const conform_buf_t *b, long long *bad_off);
void conform_buf_free(conform_buf_t *b);

/* Bootstrap (bootstrap.c) as seen from a check child. All calls are bounded by the check's
 * deadline; they return 0, or -1 with c->bs_error set (peer failed, crashed, timed out). */
int conform_allgather(conform_ctx_t *c, const void *mine, size_t len, void *all);
int conform_barrier(conform_ctx_t *c);
int conform_send(conform_ctx_t *c, int peer, const void *buf, size_t len);
int conform_recv(conform_ctx_t *c, int peer, void *buf, size_t len);
/* Non-blocking: true when another rank failed this check (c->bs_error says who and why).
 * Progress loops call it so that a dead peer ends the wait at once. */
bool conform_peer_failed(conform_ctx_t *c);

/* Plugin driving helpers (harness.c), shaped like NCCL's proxy: one thread per comm at a time,
 * NULL requests retried, test() polled. All bounded by the deadline; on error they record a
 * failure in c and return -1. */
typedef struct {
  int dev;
  void *listen_comm;
  void *send_comm;  /* to c->next */
  void *recv_comm;  /* from c->prev */
} conform_link_t;
/* Ring link on `dev`: listen, allgather handles, then connect to next / accept from prev,
 * retrying both until up, closeListen right after accept (§6.1). */
int conform_link_open(conform_ctx_t *c, int dev, conform_link_t *l);
/* Barrier (so that no rank tears down while its peer still transfers), then close. */
void conform_link_close(conform_ctx_t *c, conform_link_t *l);
int conform_reg(conform_ctx_t *c, void *comm, void *data, size_t size, int type, void **mh);
int conform_dereg(conform_ctx_t *c, void *comm, void *mh);
int conform_isend(conform_ctx_t *c, void *comm, void *data, size_t size, int tag, void *mh,
                  void **req);
int conform_irecv(conform_ctx_t *c, void *comm, int n, void **data, size_t *sizes, int *tags,
                  void **mhs, void **req);
/* Poll test() until done; sizes may be NULL; `what` names the request in messages. */
int conform_wait(conform_ctx_t *c, void *req, int *sizes, const char *what);
/* Poll a send and a receive request together, as the proxy's progress loop does (a plugin may
 * progress receives only from test() on them, so waiting on the send alone could deadlock).
 * rsize may be NULL: the receive is then tested with sizes NULL. */
int conform_wait_pair(conform_ctx_t *c, void *sreq, void *rreq, int *rsize);
/* The same for n requests; sizes[i] may be NULL. */
int conform_wait_all(conform_ctx_t *c, int n, void **reqs, int **sizes, const char *what);
/* One message each way on the ring with verification: the smallest end-to-end proof a link works. */
int conform_ping(conform_ctx_t *c, conform_link_t *l, size_t bytes, uint64_t salt);
/* Init / finalize through the adapted table with NCCL's arguments (commId, config, logger). */
strand_result_t conform_plugin_init(conform_ctx_t *c, void **ctx, uint64_t comm_id);
strand_result_t conform_plugin_finalize(conform_ctx_t *c, void *ctx);
/* Properties through the adapted table. */
int conform_props(conform_ctx_t *c, int dev, strand_props_v12_t *p);
/* Resource probes for leak checks. */
int conform_count_fds(void);
long conform_rss_kib(void);

/* ------------------------------------------------------------------------------------------- */
/* Runner, bootstrap transport, report.                                                         */

/* One row of the report: a check at one ABI version, merged over ranks. */
typedef struct {
  const conform_check_t *check;
  int version;
  conform_status_t status;
  double seconds;
  char msg[CONFORM_MSG_MAX * 2];
} conform_row_t;

/* Per-rank result of one check child, as sent to the coordinator. */
typedef struct {
  int32_t status;  /* conform_status_t */
  int32_t aborted; /* 1 when this rank only failed because another rank did */
  double seconds;
  char msg[CONFORM_MSG_MAX];
  char note[CONFORM_MSG_MAX];
} conform_rank_result_t;

/* bootstrap.c — coordinator and rank sides. */
typedef struct conform_coord conform_coord_t;
/* Bind the coordinator (local: 127.0.0.1:0; multi-host: HOST:PORT). */
conform_coord_t *conform_coord_create(const char *hostport, int nranks, char *err, size_t errlen);
int conform_coord_port(const conform_coord_t *co);
/* Serve until every rank said goodbye or died; fills rows (allocated). Returns 0, or -1 when the
 * run itself broke (a rank process died, a rank never joined): rows then say why. */
typedef struct {
  char plugin_desc[1024];  /* from rank 0's hello: library, versions, name */
  int n_rows;
  conform_row_t *rows;
  char fatal[512];         /* run-level error (not attributable to one check) */
} conform_run_result_t;
int conform_coord_serve(conform_coord_t *co, conform_run_result_t *out);
void conform_coord_destroy(conform_coord_t *co);

/* Rank side: connect the control channel (retried until --bootstrap-timeout). */
int conform_rank_connect(const char *hostport, int rank, int nranks, char *err, size_t errlen);

/* runner.c: run `checks` (any check-shaped bodies: the suite, sim scenarios, perf sweeps) with the
 * process model above, honouring conform_opts (local fork of --nranks ranks, or multi-host),
 * and write the report. Returns the process exit status. sim.c / perf.c call this too. */
int conform_run_checks(const conform_check_t *const *checks, int n);
/* runner.c: the rank parent's loop (run every selected check, for each ABI version, in a forked
 * child under a watchdog) and the child entry. Returns the process exit status. */
int conform_rank_main(const char *hostport, int rank, int nranks);
/* main.c-level entry of `run`. */
int conform_cmd_run(void);

/* report.c */
/* --list: every check id with its clause and description. */
void conform_report_list(FILE *out);
/* Live progress (stderr, only on a TTY or with --progress). */
void conform_report_progress(int done, int total, const conform_row_t *last);
/* Table (or TAP with --tap) on stdout, then --json / --junit files, then the LAST line
 * exactly "N passed, N failed, N skipped". Returns the exit status (1 if anything failed). */
int conform_report_write(const conform_run_result_t *run);
void conform_report_counts(const conform_run_result_t *run, int *pass, int *fail, int *skip);

/* ------------------------------------------------------------------------------------------- */
/* main.c: parse the options every subcommand shares into conform_opts (sim/perf call it with
 * their argv); returns the index of the first positional argument (the PLUGIN), -1 on error. */
int conform_parse_opts(int argc, char **argv);

/* Other subcommands. sim.c / perf.c are written separately; until they land, stubs.c answers
 * "not built". Each gets argv after the subcommand name and returns the exit status. */
int conform_cmd_sim(int argc, char **argv);
int conform_cmd_perf(int argc, char **argv);

#endif
