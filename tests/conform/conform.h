/* strand-conform — what a check body sees: conform_ctx_t, the check registration type, and the
 * helpers a body calls (results, time, patterns, bootstrap, plugin driving). The rest of the tool
 * (options, loader, upgrade, runner, coordinator, report) is declared in conform_internal.h.
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
 * Check bodies only see conform_ctx_t: the adapted v12-shaped table, the bootstrap, helpers.
 * A new check goes into checks/<area>.c, where <area> is its id's prefix. */
#ifndef STRAND_CONFORM_H
#define STRAND_CONFORM_H

#include <stdarg.h>
#include <stdio.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "strand/abi/abi.h"

/* Largest result a plugin may return (spec §2.1: ncclSuccess..ncclRemoteError, the codes of the
 * plugin ABI's err.h). ncclInProgress (7) and ncclTimeout (8) are the core's own; a plugin that
 * returns them hands the core a state it never expects from a net call. */
#define CONFORM_PLUGIN_RESULT_MAX STRAND_REMOTE_ERROR

#define CONFORM_MAX_RANKS 64
#define CONFORM_MAX_VERSIONS 7          /* v6..v12 */
#define CONFORM_MSG_MAX 1024            /* one result message */
#define CONFORM_PATH_MAX 4096
/* listen() gets a buffer this large although only NCCL_NET_HANDLE_MAXSIZE (128) bytes are shipped:
 * a plugin that writes past 128 bytes fails handle.size-limit instead of smashing the stack of
 * every other check. */
#define CONFORM_LISTEN_BUF 512

/* ------------------------------------------------------------------------------------------- */
/* The loaded plugin, as c->plugin shows it (loader.c + upgrade.c fill it).                      */

/* One exported one-sided symbol (loader.c). */
#define CONFORM_MAX_RMA_SYMS 6
typedef struct {
  const char *symbol;  /* "ncclRmaPlugin_v14", ... */
  int version;         /* 11..14 */
  bool gin;            /* an ncclGin_vN_t table (else ncclRma_vN_t) */
  bool data_path;      /* host data path (everything but ncclGinPlugin_v14) */
  const void *table;
} conform_rma_sym_t;

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

  /* One-sided tables (GIN/RMA, checks/rma.c), probed as NCCL does: every exported symbol of
   * ncclRmaPlugin_v14, ncclRmaPlugin_v13, ncclGinPlugin_v13, ncclGinPlugin_v12, ncclGinPlugin_v11
   * (host data path: NCCL's GIN proxy drives them) and ncclGinPlugin_v14 (device-side GIN only:
   * table checks only). */
  conform_rma_sym_t rma_found[CONFORM_MAX_RMA_SYMS];
  int n_rma_found;
  /* The host-data-path table under test (--rma-abi, default the first found above): its version
   * (11..14; 0 = none), symbol and raw table, and what checks call: a v14-shaped table, the plugin's
   * own for ncclRmaPlugin_v14, upgrade.c's adapters for the others (NCCL's: v13 signals all strong,
   * regMrSym's ginHandle given to the data path, v11/v12 context-free calls on the collComm). */
  int rma_version;
  const char *rma_symbol;
  const void *raw_rma;
  strand_rma_v14_t rma;
  bool has_rma;
} conform_plugin_t;

/* Raw getProperties of the version under test into a caller buffer (canary checks, §5.1/10). */
strand_result_t conform_raw_get_properties(const conform_plugin_t *p, bool collnet, int dev,
                                           void *props, size_t *props_size);
/* Field map of strand_props_vN_t for the canary check: name, offset, size. */
typedef struct { const char *name; size_t off, size; } conform_field_t;
int conform_props_fields(int version, const conform_field_t **fields);
/* Size of strand_props_vN_t. */
size_t conform_props_size(int version);
/* ------------------------------------------------------------------------------------------- */
/* Results and check registration.                                                              */

/* CONFORM_ENV: the check failed while the test environment refused something it does not support
 * (env_refusals.c): the plugin could not be judged here. Not counted as a failure; a body never
 * returns it, the rank parent decides it. */
typedef enum { CONFORM_PASS = 0, CONFORM_FAIL = 1, CONFORM_SKIP = 2, CONFORM_ENV = 3 } conform_status_t;

typedef struct conform_ctx conform_ctx_t;

enum {
  CONFORM_F_NO_INIT = 1u << 0,   /* the harness does not init the plugin; the body manages it */
  CONFORM_F_COLLNET = 1u << 1,   /* skipped (with reason) when the library has no CollNet */
  CONFORM_F_SLOW = 1u << 2,      /* reduced under --quick */
  CONFORM_F_NO_PLUGIN = 1u << 3, /* runs even when the plugin failed to load (load.*) */
  /* The verdict cannot depend on the ABI version: the check looks at the library itself, or
   * drives only listen/connect/accept/close*, which every core adapter passes through unchanged,
   * to test the plugin's own connection machinery (timeouts, strangers, forged handles). With
   * --all-abis it runs once, at the newest version; the other versions report it as a skip that
   * says so. When unsure, a check stays per-ABI. */
  CONFORM_F_ABI_INDEPENDENT = 1u << 4,
  /* skipped (with reason) when the library exports no host-data-path GIN/RMA table */
  CONFORM_F_RMA = 1u << 5,
  /* The body waits up to c->stale_bound for a connect to give up: the check's time bound is raised
   * to the stale bound + 10 s when --stale-bound asks for more than timeout_s allows. */
  CONFORM_F_STALE = 1u << 6,
};

typedef struct {
  const char *id;          /* stable: "area.what", e.g. "xfer.recv-larger-than-send" */
  const char *clause;      /* spec clause, e.g. "§6.4 irecv sizes are maxima" */
  const char *description; /* one line: what a pass means */
  conform_status_t (*fn)(conform_ctx_t *c);
  unsigned timeout_s;      /* time bound of the whole check (all ranks), before --timeout-scale */
  unsigned flags;          /* CONFORM_F_* */
} conform_check_t;

/* Each checks/<area>.c defines one NULL-id-terminated table; registry.c lists them in order. */
extern const conform_check_t conform_checks_load[];
extern const conform_check_t conform_checks_props[];
extern const conform_check_t conform_checks_handle[];
extern const conform_check_t conform_checks_conn[];
extern const conform_check_t conform_checks_reg[];
extern const conform_check_t conform_checks_xfer[];
extern const conform_check_t conform_checks_limits[];
extern const conform_check_t conform_checks_group[];
extern const conform_check_t conform_checks_life[];
extern const conform_check_t conform_checks_collnet[];
extern const conform_check_t conform_checks_unpack[];
extern const conform_check_t conform_checks_hostile[];
extern const conform_check_t conform_checks_tuner[];
extern const conform_check_t conform_checks_rma[];
extern const conform_check_t conform_checks_finalize[];

/* ------------------------------------------------------------------------------------------- */
/* What a check body sees.                                                                      */

struct conform_ctx {
  const conform_check_t *check;
  const conform_plugin_t *plugin;
  const strand_net_v12_t *net;         /* == &plugin->net */
  const strand_collnet_v12_t *collnet; /* NULL when the library has no CollNet */
  const strand_rma_v14_t *rma;         /* v14-shaped one-sided table; NULL when none (rma.*) */
  int rma_version;                     /* GIN/RMA version under test (11..14), 0 = none */
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
  double timeout_scale;                /* --timeout-scale: multiplies a body's own time bounds */
  double stale_bound;                  /* --stale-bound x --timeout-scale, in seconds */

  /* What the rank parent learnt while loading (load.*): with plugin_loaded false, plugin holds
   * no table and load_error says why. */
  bool plugin_loaded;
  const char *load_error;

  /* The bootstrap session, opaque (bootstrap.c). It is not thread-safe: a body that copies the
   * context for another thread sets the copy's session to NULL. */
  struct conform_session *session;
  char bs_error[512];                  /* why the last bootstrap call failed */

  /* The result being built. */
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
/* A pass with a warning: something NCCL tolerates but a plugin author should know about. The text
 * goes into the note after CONFORM_WARNING_PREFIX; the report shows such a row as WARN (table) and
 * "warning": true (JSON), and counts it as passed. */
void conform_warn(conform_ctx_t *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
#define CONFORM_WARNING_PREFIX "WARNING: "
/* devices() returned 0 (success): the plugin's hardware is not on this host. Every check that
 * needs a device skips with exactly this message, and the run exits with CONFORM_EXIT_NO_DEVICES
 * instead of passing or failing (docs/conformance.md). */
#define CONFORM_ZERO_DEVICES_MSG "not testable here: 0 devices"
#define CONFORM_EXIT_NO_DEVICES 3
/* Names the plugin call in progress; the rank parent quotes it when the child crashes or hangs. */
void conform_phase(conform_ctx_t *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
const char *conform_result_str(strand_result_t r);
/* The end of a body that records failures and goes on: FAIL when anything failed, else PASS. */
conform_status_t conform_verdict(const conform_ctx_t *c);

/* What a connect that returned neither a comm nor an error for `waited` seconds means for NCCL,
 * stating the bound the suite used (--stale-bound x --timeout-scale) and NCCL's own (~60 s in its
 * socket connect): the tail of a stale-connect failure message. */
void conform_stale_text(const conform_ctx_t *c, double waited, char *out, size_t len);
/* The time bound of a check in seconds, --timeout-scale and CONFORM_F_STALE applied. */
double conform_check_bound(const conform_check_t *chk);

/* Time (util.c; conform_remaining in harness.c). */
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
/* The same between rank+d (send) and rank-d (receive), d in 1..nranks-1 (d = 1: the ring link):
 * one link of a full mesh, as sim's P2P engine and perf --collnet's reference build it. Every rank
 * must call it with the same d at the same point. c->next / c->prev are left as they were. */
int conform_link_open_at(conform_ctx_t *c, int dev, int d, conform_link_t *l);
/* The same for a plugin reporting NCCL_NET_DEVICE_UNPACK: accept gets a pointer to *dh, zeroed
 * and pre-filled with UNPACK / 0x7 the way NCCL's core hands it over (spec device-unpack §2.1). */
int conform_link_open_unpack(conform_ctx_t *c, int dev, conform_link_t *l, strand_dev_handle_t *dh);
/* Barrier (so that no rank tears down while its peer still transfers), then close. */
void conform_link_close(conform_ctx_t *c, conform_link_t *l);
int conform_reg(conform_ctx_t *c, void *comm, void *data, size_t size, int type, void **mh);
int conform_dereg(conform_ctx_t *c, void *comm, void *mh);
/* isend until it hands out a request (NULL = "cannot post now", retried; fails at the deadline). */
int conform_isend(conform_ctx_t *c, void *comm, void *data, size_t size, int tag, void *mh,
                  void **req);
/* One isend, as a proxy thread makes it: 0 with *req possibly NULL (try again later, after
 * progressing other requests), -1 after an error (failed). For loops that also drive receives
 * the peer's sends may wait on: spinning in conform_isend there can deadlock two ranks. */
int conform_try_isend(conform_ctx_t *c, void *comm, void *data, size_t size, int tag, void *mh,
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
/* NCCL's logger as the harness passes it to init (CollNet init takes it too). */
strand_logger_t conform_logger_fn(void);
/* Init / finalize through the adapted table with NCCL's arguments (commId, config, logger). */
strand_result_t conform_plugin_init(conform_ctx_t *c, void **ctx, uint64_t comm_id);
strand_result_t conform_plugin_finalize(conform_ctx_t *c, void *ctx);
/* Properties through the adapted table. */
int conform_props(conform_ctx_t *c, int dev, strand_props_v12_t *p);
/* GPU memory for checks that need it (rma.cuda-window, xfer.flush-gpu), through the SDK's dlopen'd
 * driver (strand/cuda_driver.h): rank r uses GPU r where there are enough, else GPU 0, with its
 * primary context current for the check's allocations and copies. NULL on success (*dev set; give
 * the context back with strand_cuda()->devicePrimaryCtxRelease(*dev)), else why not, for a SKIP. */
const char *conform_cuda_use_gpu(const conform_ctx_t *c, int *dev);
/* Every net-table call a check body makes goes through a watcher (harness.c) that records results
 * outside ncclResult_t's range (§2.1) in a log the rank shares with all later check children of
 * the run; hostile.result-codes (the last check) reports what it holds. */
typedef struct {
  char check[64]; /* id of the check that saw it */
  char call[24];  /* the net-table member */
  int code;
} conform_result_seen_t;
int conform_results_seen(const conform_result_seen_t **seen);
/* WARN lines the plugin logged (through the harness's logger) while a closeSend/closeRecv/
 * closeListen/finalize was in progress in this check process and that read like a leak report
 * (case-insensitive: "leak", "not freed", "not released", "not been freed", "still allocated",
 * "still registered", "still in use", "still open", "outstanding"). *first gets the first one. */
int conform_close_warnings(const char **first);
/* Why upgrade.c's v13 one-sided adapter refused the last init, as NCCL 2.30's does when device 0
 * is not GIN_PROXY; "" when it did not (rma.*). */
const char *conform_upgrade_rma_refusal(void);
/* Resource probes for leak checks. */
int conform_count_fds(void);
long conform_rss_kib(void);
/* Threads of this process (entries of /proc/self/task). */
int conform_count_threads(void);

#endif
