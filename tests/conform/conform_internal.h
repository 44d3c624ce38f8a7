/* strand-conform — the tool's internal API: options, loader, upgrade, registry, runner,
 * coordinator/bootstrap, report and subcommands. Check bodies include conform.h only; everything
 * here is for the pieces that run them. */
#ifndef STRAND_CONFORM_INTERNAL_H
#define STRAND_CONFORM_INTERNAL_H

#include "conform.h"

/* ------------------------------------------------------------------------------------------- */
/* Options (options.c parses them into conform_opts, defined in util.c; every process of a run  */
/* sees the same values).                                                                       */

typedef struct {
  const char *plugin;        /* PLUGIN argument (path or name); NULL = NCCL_NET_PLUGIN rules */
  int abi_forced;            /* --abi vN: 6..12, 0 = newest exported */
  int rma_abi_forced;        /* --rma-abi vN: 11..14, 0 = newest one-sided table exported */
  bool all_abis;             /* --all-abis */
  int nranks;                /* --nranks (default 2) */
  int rank;                  /* --rank, multi-host only; -1 = local mode (fork nranks) */
  char coordinator[256];     /* --coordinator HOST:PORT, "" = local mode */
  size_t max_bytes;          /* --max-bytes cap for the largest transfers */
  bool quick;                /* --quick: CI-sized loops and caps */
  double timeout_scale;      /* --timeout-scale: multiplies every check's time bound */
  double call_bound_s;       /* --call-bound: max seconds one non-blocking plugin call may take */
  double stale_bound_s;      /* --stale-bound: how long connect to a dead listener may say NULL */
  double close_bound_s;      /* --close-bound: max seconds one close* or finalize call may take */
  double bootstrap_timeout_s;/* --bootstrap-timeout: ranks joining / coordinator reachability */
  const char *only[64];      /* --only globs (fnmatch), any match selects */
  int n_only;
  const char *skip[64];      /* --skip globs */
  int n_skip;
  bool tap;                  /* --tap on stdout instead of the table */
  const char *json_path;     /* --json FILE */
  const char *junit_path;    /* --junit FILE */
  int progress;              /* --progress / --no-progress; -1 = only when stderr is a TTY */
  int verbose;               /* -v: plugin INFO logs, and every check's captured output */
  bool compact;              /* --compact: the table lists only failures and skips */
  bool plugin_report;        /* --plugin-report: one page for the plugin's author, not the table */
} conform_opts_t;

extern conform_opts_t conform_opts;

/* util.c: parse "4M", "512K", "1G", "8" (binary multiples; "KiB", "MB" accepted). 0, or -1 on a
 * bad value. */
int conform_parse_size(const char *s, size_t *out);

/* ------------------------------------------------------------------------------------------- */
/* Loading the plugin (loader.c + upgrade.c).                                                   */

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
/* The result watcher (harness.c): the log is mapped shared once per rank parent, before the first
 * check child; conform_watch_net returns a copy of `real` whose non-NULL members record results
 * outside 0..ncclNumResults-1 under `check_id` (one watched table per check child). */
void conform_results_log_open(void);
const strand_net_v12_t *conform_watch_net(const strand_net_v12_t *real, const char *check_id);
void conform_upgrade_collnet(conform_plugin_t *p);
/* Build p->rma from p->raw_rma (version p->rma_version) as NCCL's adapters do (upgrade.c). */
void conform_upgrade_rma(conform_plugin_t *p);

/* Re-read p->raw_net / p->raw_collnet into p->net / p->collnet without resetting the adapters'
 * init-once state (after the first successful init: tables filled in by init, §1.3). */
void conform_upgrade_reread(conform_plugin_t *p);
/* Crash attribution (harness.c). conform_signals_snapshot records the SIGSEGV/SIGBUS/SIGABRT
 * dispositions (the rank parent, before dlopen); conform_signals_restore compares the current ones
 * with the snapshot, puts the snapshot back for any that changed, and appends "SIGSEGV handler
 * replaced during WHEN" to `out` (NULL: only restore). Returns how many had been replaced. */
void conform_signals_snapshot(void);
int conform_signals_restore(const char *when, volatile char *out, size_t len);
/* Where a check child writes what conform_signals_restore found after init (shared with the rank
 * parent, which quotes it when the child dies); NULL outside a check child. */
extern volatile char *conform_sig_note;
#define CONFORM_SIG_NOTE_MAX 256
/* The close bound (harness.c): the watcher marks close*() and finalize calls in a page the rank parent
 * shares (mapped by conform_results_log_open); the parent resets it before each check child and
 * asks whether one call has been running longer than `bound` seconds (its name and time then). */
void conform_close_watch_reset(void);
bool conform_close_in_progress(void);
bool conform_close_overdue(double bound, char *call, size_t len, double *took);
/* The adapter's own refusals (size > 1 GiB for v6..v8 isend/irecv, >= 2 GiB regMr for v6/v7)
 * are reported as STRAND_INTERNAL_ERROR just like NCCL's core; this tells whether the last
 * failure came from the adapter rather than from the plugin. */
bool conform_upgrade_last_error_was_adapter(void);

/* ------------------------------------------------------------------------------------------- */
/* Selecting checks.                                                                            */

/* registry.c: every check in report order; lookup by id; selection by --only/--skip globs. */
int conform_all_checks(const conform_check_t ***out);
const conform_check_t *conform_find_check(const char *id);
/* Makes conform_find_check see the checks of the current run first (sim/perf scenarios). */
void conform_set_running_checks(const conform_check_t *const *checks, int n);
bool conform_check_selected(const conform_check_t *chk, const conform_opts_t *o);

/* ------------------------------------------------------------------------------------------- */
/* Runner, bootstrap transport, report.                                                         */

/* One row of the report: a check at one ABI version, merged over ranks. */
typedef struct {
  const conform_check_t *check;
  int version;
  conform_status_t status;
  double seconds;
  char msg[CONFORM_MSG_MAX * 2];
  /* What the check's processes wrote while it ran (the plugin's log lines through the logger the
   * harness hands to init, anything on their stdout/stderr), one line per '\n', each prefixed
   * with "[rank R] " when there are several ranks. malloc'd, NULL when nothing was written. */
  char *log;
} conform_row_t;

/* Output capture of one check child (runner.c): the rank parent reads the child's stderr (and
 * stdout for the suite) from a pipe and keeps at most CONFORM_LOG_CAP bytes: the first half and
 * the last half, with a line "... N bytes cut ..." between them, so that the last lines before a
 * crash or a hang are always kept. */
#define CONFORM_LOG_CAP (64 * 1024)
typedef struct {
  char *head;        /* the first CONFORM_LOG_CAP / 2 bytes */
  size_t head_len;
  char *ring;        /* the last CONFORM_LOG_CAP / 2 bytes after the head */
  size_t ring_total; /* bytes that went into the ring */
} conform_capture_t;
void conform_capture_add(conform_capture_t *cap, const char *data, size_t len);
/* The kept text, malloc'd and NUL-terminated (NULL when nothing was written); resets cap. */
char *conform_capture_take(conform_capture_t *cap);

/* Per-rank result of one check child, as sent to the coordinator (BS_RESULT). The frame's payload
 * is this struct followed by the child's captured output (conform_capture_take), no NUL. */
typedef struct {
  int32_t status;  /* conform_status_t */
  int32_t aborted; /* 1 when this rank only failed because another rank did */
  double seconds;
  char msg[CONFORM_MSG_MAX];
  char note[CONFORM_MSG_MAX];
} conform_rank_result_t;

/* env_refusals.c: failures the test environment caused. open (once per rank parent) points
 * STRAND_ENV_REFUSALS at a file of the rank's own; reset empties it before a check child; apply turns
 * a FAIL into CONFORM_ENV, with the refusals as the reason, when the environment wrote any. */
void conform_env_refusals_open(void);
void conform_env_refusals_reset(void);
int conform_env_refusals_take(char *out, size_t len);
void conform_env_refusals_apply(conform_rank_result_t *res);
void conform_env_refusals_close(void);

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
 * process model described in conform.h, honouring conform_opts (local fork of --nranks ranks,
 * or multi-host), and write the report. Returns the process exit status. sim and perf call this
 * too. */
int conform_run_checks(const conform_check_t *const *checks, int n);
/* runner.c: the rank parent's loop (run every selected check, for each ABI version, in a forked
 * child under a watchdog) and the child entry. Returns the process exit status. */
int conform_rank_main(const char *hostport, int rank, int nranks);
/* runner.c: the `run` subcommand (main.c calls it after parsing the options). */
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

/* The cause of a failure message, as the collapse lines group them (report.c): the first rank's
 * first clause with numbers replaced by '#'; and that first clause as written. */
void conform_report_cause(const char *msg, char *out, size_t len);
void conform_report_first(const char *msg, char *out, size_t len);

/* plugin_report.c: --plugin-report. The extra check run first under that option (prints the
 * devices), and the page written instead of the table. */
extern const conform_check_t conform_report_devices_check;
void conform_plugin_report_write(FILE *o, const conform_run_result_t *run);

/* ------------------------------------------------------------------------------------------- */
/* options.c: parse the options every subcommand shares into conform_opts (sim/perf call it with
 * their argv); returns the index of the first positional argument (the PLUGIN), -1 on error. */
int conform_parse_opts(int argc, char **argv);

/* Other subcommands (sim/sim.c, sim/perf.c). Each gets argv after the subcommand name and returns
 * the exit status. */
int conform_cmd_sim(int argc, char **argv);
int conform_cmd_perf(int argc, char **argv);

#endif
