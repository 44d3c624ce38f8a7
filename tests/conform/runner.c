/* strand-conform — the runner: local launch (fork --nranks ranks around an in-process
 * coordinator) or multi-host launch, and each rank's loop that runs every check in a forked child
 * under a watchdog. Why a child per check: a plugin that crashes (SIGSEGV) or hangs must fail
 * only the check that triggered it, and every check must start from a freshly initialised plugin,
 * as a new NCCL communicator would. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bootstrap.h"

typedef struct {
  volatile int valid;
  conform_rank_result_t res;
  volatile char phase[128];
  volatile double started_at; /* conform_now() when every rank had joined the check */
  volatile char sig_note[CONFORM_SIG_NOTE_MAX]; /* signal handlers the plugin replaced in init */
} child_shm_t;

typedef struct {
  const conform_check_t *check;
  int version; /* 0 when the plugin did not load */
} run_item_t;

/* The suite captures the check child's stdout too; sim and perf do not (perf prints its tables
 * from rank 0's check child as they are measured). */
static bool capture_stdout;

static size_t effective_max_bytes(void) {
  size_t m = conform_opts.max_bytes;
  if (conform_opts.quick && m > ((size_t)16 << 20)) m = (size_t)16 << 20;
  return m;
}

/* ------------------------------------------------------------------ check child */

/* What the rank parent learnt while loading; every check child sees it through conform_ctx_t
 * (c->plugin, c->plugin_loaded, c->load_error: the load.* checks report it). */
static conform_plugin_t conform_loaded_plugin;
static bool conform_plugin_loaded;
static char conform_load_error[2048];
/* Signal handlers the plugin (or a library it pulled in) installed while being dlopen'ed; the rank
 * parent puts the suite's own back before any check child is forked. */
static char conform_dlopen_sig_note[CONFORM_SIG_NOTE_MAX];

static void run_child(const conform_plugin_t *p, const run_item_t *it, int item, int rank,
                      int nranks, const char *hostport, child_shm_t *shm) {
  conform_ctx_t c;
  memset(&c, 0, sizeof c);
  c.check = it->check;
  c.plugin = p;
  /* A NULL-table (plugin not loaded) stays as it is; otherwise calls go through the watcher. */
  c.net = conform_plugin_loaded ? conform_watch_net(&p->net, it->check->id) : &p->net;
  c.collnet = p->has_collnet ? &p->collnet : NULL;
  c.rma = p->has_rma ? &p->rma : NULL;
  c.rma_version = p->has_rma ? p->rma_version : 0;
  c.version = it->version;
  c.rank = rank;
  c.nranks = nranks;
  c.next = (rank + 1) % nranks;
  c.prev = (rank + nranks - 1) % nranks;
  c.max_bytes = effective_max_bytes();
  c.quick = conform_opts.quick;
  c.timeout_scale = conform_opts.timeout_scale;
  c.stale_bound = conform_opts.stale_bound_s * conform_opts.timeout_scale;
  c.plugin_loaded = conform_plugin_loaded;
  c.load_error = conform_load_error;
  c.phase = shm->phase;
  conform_sig_note = shm->sig_note;
  c.session = NULL; /* until conform_session_open */
  double t0 = conform_now();
  /* The time bound starts when every rank is in the check: a rank that finished the previous
   * check early must not spend its bound waiting for a slower peer. */
  c.deadline = t0 + 900;

  if (conform_session_open(&c, hostport, item) != 0) {
    conform_fail(&c, "bootstrap: %s", c.bs_error);
  } else if (conform_phase(&c, "waiting for the other ranks"), conform_barrier(&c) != 0) {
    conform_fail(&c, "bootstrap: %s", c.bs_error);
  } else {
    t0 = conform_now();
    c.deadline = t0 + conform_check_bound(it->check);
    shm->started_at = t0;
    conform_status_t st = CONFORM_PASS;
    if (!(it->check->flags & CONFORM_F_NO_INIT)) {
      strand_result_t r = conform_plugin_init(&c, &c.net_ctx, 0x5354524e00000000ULL + (uint64_t)item);
      /* A broken init is load.init's finding; other checks cannot run and say so (skip) instead
       * of repeating the same failure under every id. */
      if (r != STRAND_SUCCESS) {
        st = conform_skip(&c, "not run: init returned %s (see load.init)", conform_result_str(r));
      } else {
        c.inited = true;
        conform_phase(&c, "devices");
        r = c.net->devices(&c.ndev);
        if (r == STRAND_SUCCESS && c.ndev == 0)
          st = conform_skip(&c, CONFORM_ZERO_DEVICES_MSG); /* no hardware here: not a failure */
        else if (r != STRAND_SUCCESS || c.ndev <= 0)
          st = conform_skip(&c, "not run: devices() returned %s with %d devices (see load.init)",
                            conform_result_str(r), c.ndev);
      }
    }
    if (st == CONFORM_PASS) {
      conform_phase(&c, "check body");
      st = it->check->fn(&c);
      if (st == CONFORM_FAIL && c.status != CONFORM_FAIL) conform_fail(&c, "failed");
      if (st == CONFORM_SKIP && c.status != CONFORM_SKIP && c.status != CONFORM_FAIL)
        conform_skip(&c, "skipped");
    }
    if (c.inited && !c.exit_without_cleanup) {
      strand_result_t r = conform_plugin_finalize(&c, c.net_ctx);
      if (r != STRAND_SUCCESS) conform_fail(&c, "finalize returned %s", conform_result_str(r));
    }
  }
  shm->res.status = c.status;
  shm->res.seconds = conform_now() - t0;
  snprintf(shm->res.msg, sizeof shm->res.msg, "%s", c.msg);
  snprintf(shm->res.note, sizeof shm->res.note, "%s", c.note);
  /* "aborted" marks failures that only mirror another rank's failure. */
  shm->res.aborted = c.status == CONFORM_FAIL && strstr(c.msg, "aborted because") == c.msg;
  __sync_synchronize();
  shm->valid = 1;
  conform_session_done(&c);
  fflush(NULL);
  _exit(0);
}

/* ------------------------------------------------------------------ output capture */

#define CAP_HALF (CONFORM_LOG_CAP / 2)

void conform_capture_add(conform_capture_t *cap, const char *data, size_t len) {
  if (len && !cap->head && !(cap->head = malloc(CAP_HALF))) return;
  size_t h = len < CAP_HALF - cap->head_len ? len : CAP_HALF - cap->head_len;
  memcpy(cap->head + cap->head_len, data, h);
  cap->head_len += h;
  data += h;
  len -= h;
  if (!len) return;
  if (!cap->ring && !(cap->ring = malloc(CAP_HALF))) return;
  if (len > CAP_HALF) { /* only the last CAP_HALF bytes of this chunk can survive */
    cap->ring_total += len - CAP_HALF;
    data += len - CAP_HALF;
    len = CAP_HALF;
  }
  size_t pos = cap->ring_total % CAP_HALF, first = len < CAP_HALF - pos ? len : CAP_HALF - pos;
  memcpy(cap->ring + pos, data, first);
  memcpy(cap->ring, data + first, len - first);
  cap->ring_total += len;
}

char *conform_capture_take(conform_capture_t *cap) {
  char *out = NULL;
  size_t kept = cap->ring_total < CAP_HALF ? cap->ring_total : CAP_HALF;
  if (cap->head_len + kept > 0 && (out = malloc(cap->head_len + kept + 96))) {
    size_t n = 0;
    if (cap->head_len > 0) memcpy(out, cap->head, cap->head_len); /* head is NULL when empty */
    n = cap->head_len;
    if (cap->ring_total > CAP_HALF) {
      /* The ring wrapped: start the kept tail at a line boundary and say how much is missing. */
      size_t start = cap->ring_total % CAP_HALF, skip = 0;
      while (skip < kept && cap->ring[(start + skip) % CAP_HALF] != '\n') skip++;
      if (skip < kept) skip++;
      if (n && out[n - 1] != '\n') out[n++] = '\n';
      n += (size_t)sprintf(out + n, "... %zu bytes cut ...\n",
                           cap->ring_total - kept + skip);
      for (size_t i = skip; i < kept; i++) out[n++] = cap->ring[(start + i) % CAP_HALF];
    } else if (kept > 0) { /* ring is NULL when nothing went past the head */
      memcpy(out + n, cap->ring, kept);
      n += kept;
    }
    out[n] = '\0';
  }
  free(cap->head);
  free(cap->ring);
  memset(cap, 0, sizeof *cap);
  return out;
}

/* Reads what is in the pipe now; closes it (*fd = -1) at end of file. */
static void capture_drain(int *fd, conform_capture_t *cap) {
  char buf[8192];
  while (*fd >= 0) {
    ssize_t n = read(*fd, buf, sizeof buf);
    if (n > 0) conform_capture_add(cap, buf, (size_t)n);
    else if (n < 0 && errno == EINTR) continue;
    else {
      if (n == 0 || errno != EAGAIN) close(*fd), *fd = -1;
      return;
    }
  }
}

/* ------------------------------------------------------------------ rank parent */

static int pidfd_open_compat(pid_t pid) {
#ifdef SYS_pidfd_open
  return (int)syscall(SYS_pidfd_open, pid, 0);
#else
  (void)pid;
  return -1;
#endif
}

static const char *signame(int sig) {
  switch (sig) {
  case SIGSEGV: return "SIGSEGV";
  case SIGBUS: return "SIGBUS";
  case SIGABRT: return "SIGABRT";
  case SIGFPE: return "SIGFPE";
  case SIGILL: return "SIGILL";
  case SIGPIPE: return "SIGPIPE";
  case SIGKILL: return "SIGKILL";
  case SIGTERM: return "SIGTERM";
  default: return "signal";
  }
}

/* Run one item in a child and fill `res`. Returns -1 when the run must stop (FINAL received). */
/* The child's output (stderr, and stdout for the suite) goes into a pipe that this rank parent
 * reads while it watches: what the plugin logs during a check belongs to that check's result
 * (*log, malloc'd), never to the terminal between rows. */
static int run_item(const conform_plugin_t *p, const run_item_t *it, int item, int rank,
                    int nranks, const char *hostport, int ctl, child_shm_t *shm,
                    conform_rank_result_t *res, int *final_seen, char **log) {
  memset(res, 0, sizeof *res);
  memset((void *)shm, 0, sizeof *shm);
  conform_close_watch_reset();
  *log = NULL;
  conform_capture_t cap = {0};
  int lp[2] = {-1, -1};
  if (pipe2(lp, O_CLOEXEC) != 0) lp[0] = lp[1] = -1; /* no capture: output goes through */
  fflush(NULL);
  double t0 = conform_now();
  pid_t pid = fork();
  if (pid < 0) {
    res->status = CONFORM_FAIL;
    snprintf(res->msg, sizeof res->msg, "fork failed: %s", strerror(errno));
    if (lp[0] >= 0) close(lp[0]), close(lp[1]);
    return 0;
  }
  if (pid == 0) {
    close(ctl);
    setpgid(0, 0); /* the watchdog kills the whole group, plugin helpers included */
    if (lp[1] >= 0) {
      dup2(lp[1], STDERR_FILENO);
      if (capture_stdout) dup2(lp[1], STDOUT_FILENO);
      close(lp[0]);
      close(lp[1]);
      setvbuf(stdout, NULL, _IOLBF, 0); /* a crash must not eat buffered lines */
    }
    run_child(p, it, item, rank, nranks, hostport, shm);
  }
  setpgid(pid, pid);
  int logfd = lp[0];
  if (lp[1] >= 0) {
    close(lp[1]);
    fcntl(logfd, F_SETFL, fcntl(logfd, F_GETFL) | O_NONBLOCK);
  }
  double bound = conform_check_bound(it->check);
  double kill_at = t0 + 900 + bound; /* until every rank joined; then the check's own bound */
  bool started = false;
  char kill_reason[600] = "";
  bool aborted = false;
  int pfd = pidfd_open_compat(pid);
  int status = 0;
  bool exited = false;
  while (!exited) {
    /* pidfd last: without one, poll the other two */
    struct pollfd fds[3] = {{ctl, POLLIN, 0}, {logfd, POLLIN, 0}, {pfd, POLLIN, 0}};
    double left = kill_at - conform_now();
    int ms = left <= 0 ? 0 : (int)(left * 1000) + 1;
    if (pfd < 0 && ms > 10) ms = 10;
    if (!started && ms > 20) ms = 20; /* notice the start to arm the real bound */
    if (conform_close_in_progress() && ms > 50) ms = 50; /* the close bound */
    int pr = poll(fds, pfd >= 0 ? 3 : 2, ms);
    if (pr < 0 && errno != EINTR) break;
    if (pr > 0 && fds[1].revents) capture_drain(&logfd, &cap);
    if (!started && shm->started_at > 0) {
      started = true;
      t0 = shm->started_at;
      double k = t0 + bound + 2.0; /* the child's own deadline + time to report */
      if (k < kill_at) kill_at = k;
    }
    pid_t w = waitpid(pid, &status, WNOHANG);
    if (w == pid) {
      exited = true;
      break;
    }
    if (pr > 0 && (fds[0].revents & (POLLIN | POLLHUP | POLLERR))) {
      bs_hdr_t h;
      void *payload = NULL;
      if (bs_read_frame(ctl, &h, &payload, conform_now() + 5) != 0) {
        snprintf(kill_reason, sizeof kill_reason, "lost the connection to the coordinator");
        *final_seen = 1;
        kill_at = conform_now();
      } else if (h.type == BS_ABORT_ITEM && h.a == item && !aborted) {
        aborted = true;
        snprintf(kill_reason, sizeof kill_reason, "aborted because %s",
                 payload ? (char *)payload : "another rank failed");
        /* Give the child a moment to notice (it polls its session) and report by itself. */
        double grace = conform_now() + 3.0;
        if (grace < kill_at) kill_at = grace;
      } else if (h.type == BS_FINAL) {
        *final_seen = 1;
        snprintf(kill_reason, sizeof kill_reason, "the run was stopped: %s",
                 payload && h.len > strlen(payload) + 1 ? (char *)payload + strlen(payload) + 1 : "");
        kill_at = conform_now();
      }
      free(payload);
    }
    char close_call[24];
    double close_took;
    if (!kill_reason[0] && conform_close_overdue(conform_opts.close_bound_s * conform_opts.timeout_scale,
                                                 close_call, sizeof close_call, &close_took)) {
      snprintf(kill_reason, sizeof kill_reason, "%s did not return within %.1f s (--close-bound %g s x "
               "--timeout-scale %g): NCCL's teardown blocks on it", close_call, close_took,
               conform_opts.close_bound_s, conform_opts.timeout_scale);
      kill_at = conform_now();
    }
    if (conform_now() >= kill_at) {
      kill(-pid, SIGKILL);
      kill(pid, SIGKILL);
      waitpid(pid, &status, 0);
      if (!kill_reason[0])
        snprintf(kill_reason, sizeof kill_reason, "timed out after %.0f s (during %s)", bound,
                 shm->phase[0] ? (const char *)shm->phase : "start-up");
      else if (!aborted && shm->phase[0]) {
        size_t u = strlen(kill_reason);
        snprintf(kill_reason + u, sizeof kill_reason - u, " (during %s)", (const char *)shm->phase);
      }
      res->status = CONFORM_FAIL;
      res->aborted = aborted;
      snprintf(res->msg, sizeof res->msg, "%s", kill_reason);
      res->seconds = conform_now() - t0;
      if (pfd >= 0) close(pfd);
      kill(-pid, SIGKILL); /* stragglers of the group */
      capture_drain(&logfd, &cap); /* the last lines before a hang often explain it */
      if (logfd >= 0) close(logfd);
      *log = conform_capture_take(&cap);
      return *final_seen ? -1 : 0;
    }
  }
  if (pfd >= 0) close(pfd);
  kill(-pid, SIGKILL); /* threads die with the child; forked helpers must too */
  capture_drain(&logfd, &cap); /* everything the child wrote is in the pipe by now */
  if (logfd >= 0) close(logfd);
  *log = conform_capture_take(&cap);
  res->seconds = conform_now() - t0;
  /* Handlers the plugin replaced (restored by the suite, so a crash still shows as the signal). */
  char replaced[2 * CONFORM_SIG_NOTE_MAX + 8];
  snprintf(replaced, sizeof replaced, "%s%s%.*s", conform_dlopen_sig_note,
           conform_dlopen_sig_note[0] && shm->sig_note[0] ? "; " : "", CONFORM_SIG_NOTE_MAX - 1,
           (const char *)shm->sig_note);
  if (WIFSIGNALED(status)) {
    res->status = CONFORM_FAIL;
    snprintf(res->msg, sizeof res->msg, "crashed with %s (signal %d) during %s%s%s%s",
             signame(WTERMSIG(status)), WTERMSIG(status),
             shm->phase[0] ? (const char *)shm->phase : "start-up",
             replaced[0] ? " (the plugin or a library it loaded had replaced the handler: " : "",
             replaced, replaced[0] ? "; strand-conform restored its own so the crash shows as "
                                     "the signal)" : "");
  } else if (!shm->valid && replaced[0] && WEXITSTATUS(status) != 0) {
    res->status = CONFORM_FAIL;
    snprintf(res->msg, sizeof res->msg, "the check process exited (status %d) without a result "
             "during %s: the plugin (or a library it loaded: %s) replaced the crash signal "
             "handler and exited — likely a crash", WEXITSTATUS(status),
             shm->phase[0] ? (const char *)shm->phase : "start-up", replaced);
  } else if (!shm->valid) {
    res->status = CONFORM_FAIL;
    snprintf(res->msg, sizeof res->msg, "the check process exited (status %d) without a result "
             "during %s: the plugin called exit()?", WEXITSTATUS(status),
             shm->phase[0] ? (const char *)shm->phase : "start-up");
  } else {
    *res = shm->res;
    res->seconds = conform_now() - t0;
  }
  return *final_seen ? -1 : 0;
}

static void describe_plugin(const conform_plugin_t *p, bool loaded, const char *err, char *out,
                            size_t len) {
  if (!loaded) {
    snprintf(out, len, "plugin did not load: %.1900s", err);
    for (char *q = out; *q; q++)
      if (*q == '\n') *q = ' ';
    return;
  }
  char nv[64] = "", cv[64] = "";
  for (int i = 0; i < p->n_net_versions; i++)
    snprintf(nv + strlen(nv), sizeof nv - strlen(nv), "%sv%d", i ? "," : "", p->net_versions[i]);
  for (int i = 0; i < p->n_collnet_versions; i++)
    snprintf(cv + strlen(cv), sizeof cv - strlen(cv), "%sv%d", i ? "," : "", p->collnet_versions[i]);
  snprintf(out, len, "plugin \"%.200s\" from %.1000s; ncclNetPlugin: %s; ncclCollNetPlugin: %s; testing v%d%s;"
           " %d ranks; largest transfer %zu bytes%s",
           p->net.name ? p->net.name : "(null)", p->resolved, nv, cv[0] ? cv : "none", p->version,
           conform_opts.all_abis ? " (and every other exported version: --all-abis)" : "",
           conform_opts.nranks, effective_max_bytes(),
           conform_opts.quick ? " (--quick)" : "");
  if (p->has_rma)
    snprintf(out + strlen(out), len - strlen(out), "; one-sided: %s (rma.*)", p->rma_symbol);
}

static int rank_main(const char *hostport, int rank, int nranks,
                     const conform_check_t *const *checks, int n_checks) {
  conform_plugin_t *p = &conform_loaded_plugin;
  conform_signals_snapshot();
  conform_plugin_loaded = conform_plugin_load(conform_opts.plugin, conform_opts.abi_forced, p,
                                              conform_load_error, sizeof conform_load_error) == 0;
  conform_signals_restore("dlopen", conform_dlopen_sig_note, sizeof conform_dlopen_sig_note);
  int versions[CONFORM_MAX_VERSIONS], nv = 0;
  if (!conform_plugin_loaded) versions[nv++] = 0;
  else if (conform_opts.all_abis)
    for (int i = 0; i < p->n_net_versions; i++) versions[nv++] = p->net_versions[i];
  else versions[nv++] = p->version;

  int n_items = nv * n_checks;
  run_item_t *items = calloc((size_t)n_items + 1, sizeof *items);
  size_t hl = 4096 + (size_t)n_items * 80;
  char *hello = malloc(hl);
  describe_plugin(p, conform_plugin_loaded, conform_load_error, hello, 2048);
  strcat(hello, "\n");
  for (int v = 0, k = 0; v < nv; v++)
    for (int i = 0; i < n_checks; i++, k++) {
      items[k].check = checks[i];
      items[k].version = versions[v];
      snprintf(hello + strlen(hello), hl - strlen(hello), "v%d %s\n", versions[v], checks[i]->id);
    }

  char err[512];
  int ctl = conform_rank_connect(hostport, rank, nranks, err, sizeof err);
  if (ctl < 0) {
    fprintf(stderr, "strand-conform rank %d: %s\n", rank, err);
    return 2;
  }
  if (bs_write_frame(ctl, BS_HELLO, rank, nranks, hello, (uint32_t)strlen(hello) + 1)) {
    fprintf(stderr, "strand-conform rank %d: lost the coordinator while joining\n", rank);
    return 2;
  }
  free(hello);
  bs_hdr_t h;
  void *payload = NULL;
  if (bs_read_frame(ctl, &h, &payload, conform_now() + conform_opts.bootstrap_timeout_s + 5) ||
      h.type != BS_WELCOME) {
    fprintf(stderr, "strand-conform rank %d: the run did not start (%s)\n", rank,
            h.type == BS_FINAL && payload && h.len > strlen(payload) + 1
                ? (char *)payload + strlen(payload) + 1 : "no welcome from the coordinator");
    free(payload);
    close(ctl);
    return 2;
  }
  free(payload);

  conform_results_log_open();
  conform_env_refusals_open();
  child_shm_t *shm = mmap(NULL, sizeof *shm, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS,
                          -1, 0);
  int final_seen = 0;
  int cur_version = conform_plugin_loaded ? p->version : 0;
  for (int k = 0; k < n_items && !final_seen; k++) {
    run_item_t *it = &items[k];
    conform_rank_result_t res;
    memset(&res, 0, sizeof res);
    char *log = NULL;
    if (!conform_plugin_loaded && !(it->check->flags & CONFORM_F_NO_PLUGIN)) {
      /* load.symbols names the cause; the run's exit status is non-zero anyway (report.c). */
      res.status = CONFORM_SKIP;
      snprintf(res.msg, sizeof res.msg, "not run: the plugin did not load (see load.symbols)");
    } else if ((it->check->flags & CONFORM_F_ABI_INDEPENDENT) && conform_plugin_loaded &&
               it->version != versions[0]) {
      /* --all-abis: versions[0] is the newest; an ABI-independent check runs there only. */
      res.status = CONFORM_SKIP;
      snprintf(res.msg, sizeof res.msg, "ABI-independent: run once, at v%d (--all-abis)", versions[0]);
    } else if ((it->check->flags & CONFORM_F_COLLNET) && conform_plugin_loaded && !p->has_collnet) {
      res.status = CONFORM_SKIP;
      snprintf(res.msg, sizeof res.msg, "the library exports no ncclCollNetPlugin_v* symbol");
    } else if ((it->check->flags & CONFORM_F_RMA) && conform_plugin_loaded && !p->has_rma) {
      res.status = CONFORM_SKIP;
      if (conform_opts.rma_abi_forced)
        snprintf(res.msg, sizeof res.msg, "--rma-abi v%d: the library exports no one-sided table of "
                 "that version", conform_opts.rma_abi_forced);
      else
        snprintf(res.msg, sizeof res.msg, "the library exports no ncclRmaPlugin_v14/_v13 or "
                 "ncclGinPlugin_v13/_v12/_v11 symbol (no GIN proxy data path)");
    } else {
      if (conform_plugin_loaded && it->version != cur_version) {
        char e[256];
        if (conform_plugin_select(p, it->version, e, sizeof e) == 0) cur_version = it->version;
      }
      conform_env_refusals_reset();
      if (run_item(p, it, k, rank, nranks, hostport, ctl, shm, &res, &final_seen, &log) < 0) {
        /* fall through: report this one, then stop */
      }
      conform_env_refusals_apply(&res);
    }
    /* The result, then the captured output (its length is the frame's rest). */
    size_t loglen = log ? strlen(log) : 0;
    char *frame = malloc(sizeof res + loglen);
    if (frame) {
      memcpy(frame, &res, sizeof res);
      if (loglen) memcpy(frame + sizeof res, log, loglen);
    }
    int wr = frame ? bs_write_frame(ctl, BS_RESULT, k, rank, frame, (uint32_t)(sizeof res + loglen))
                   : bs_write_frame(ctl, BS_RESULT, k, rank, &res, sizeof res);
    free(frame);
    free(log);
    if (wr) {
      fprintf(stderr, "strand-conform rank %d: lost the coordinator\n", rank);
      final_seen = 1;
      break;
    }
  }
  /* Wait for the verdict. */
  int rc = 0;
  double until = conform_now() + 120;
  for (;;) {
    if (bs_read_frame(ctl, &h, &payload, until)) {
      fprintf(stderr, "strand-conform rank %d: no verdict from the coordinator\n", rank);
      rc = 2;
      break;
    }
    if (h.type == BS_FINAL) {
      int skipped = payload ? atoi(payload) : 0;
      const char *fatal = payload && h.len > strlen(payload) + 1 ? (char *)payload + strlen(payload) + 1 : "";
      if (conform_opts.coordinator[0]) {
        if (rank != 0) {
          if (fatal[0]) printf("rank %d: run stopped: %s\n", rank, fatal);
          printf("rank %d: verdict from the coordinator (rank 0 prints the table)\n", rank);
          printf("%d passed, %d failed, %d skipped\n", h.a, h.b, skipped);
        }
      }
      rc = (h.b > 0 || fatal[0]) ? 1 : 0;
      free(payload);
      break;
    }
    free(payload);
  }
  close(ctl);
  munmap(shm, sizeof *shm);
  free(items);
  conform_env_refusals_close();
  fflush(stdout);
  return rc;
}

int conform_rank_main(const char *hostport, int rank, int nranks) {
  const conform_check_t **all;
  int n = conform_all_checks((const conform_check_t ***)&all);
  const conform_check_t **sel = calloc((size_t)n + 2, sizeof *sel);
  int m = 0;
  if (conform_opts.plugin_report) sel[m++] = &conform_report_devices_check; /* as conform_cmd_run */
  for (int i = 0; i < n; i++)
    if (conform_check_selected(all[i], &conform_opts)) sel[m++] = all[i];
  int rc = rank_main(hostport, rank, nranks, sel, m);
  free(sel);
  return rc;
}

int conform_run_checks(const conform_check_t *const *checks, int n) {
  conform_set_running_checks(checks, n);
  signal(SIGPIPE, SIG_IGN); /* coordinator and rank parents: sockets to dead peers must not kill us */
  int nranks = conform_opts.nranks;
  if (nranks < 1 || nranks > CONFORM_MAX_RANKS) {
    fprintf(stderr, "strand-conform: --nranks must be 1..%d\n", CONFORM_MAX_RANKS);
    return 2;
  }
  bool multi = conform_opts.coordinator[0] != '\0';
  if (multi && conform_opts.rank < 0) {
    fprintf(stderr, "strand-conform: --coordinator needs --rank R and --nranks N\n");
    return 2;
  }
  if (multi && conform_opts.rank > 0) {
    int rc = rank_main(conform_opts.coordinator, conform_opts.rank, nranks, checks, n);
    return rc;
  }
  char err[512];
  conform_coord_t *co = conform_coord_create(multi ? conform_opts.coordinator : "127.0.0.1:0",
                                             nranks, err, sizeof err);
  if (!co) {
    fprintf(stderr, "strand-conform: coordinator: %s\n", err);
    return 2;
  }
  char hostport[300];
  if (multi) snprintf(hostport, sizeof hostport, "%s", conform_opts.coordinator);
  else snprintf(hostport, sizeof hostport, "127.0.0.1:%d", conform_coord_port(co));
  int first = 0, last = multi ? 0 : nranks - 1;
  pid_t pids[CONFORM_MAX_RANKS];
  fflush(NULL);
  for (int r = first; r <= last; r++) {
    pids[r] = fork();
    if (pids[r] == 0) {
      conform_coord_destroy(co);
      int rc = rank_main(hostport, r, nranks, checks, n);
      fflush(NULL);
      _exit(rc);
    }
  }
  conform_run_result_t run;
  conform_coord_serve(co, &run);
  int rc = conform_report_write(&run);
  /* Ranks exit right after FINAL; do not wait forever for one that does not. */
  double until = conform_now() + 10;
  for (int r = first; r <= last; r++) {
    int st;
    while (waitpid(pids[r], &st, WNOHANG) == 0) {
      if (conform_now() > until) {
        kill(pids[r], SIGKILL);
        waitpid(pids[r], &st, 0);
        break;
      }
      conform_sleep(0.01);
    }
  }
  conform_coord_destroy(co);
  for (int i = 0; i < run.n_rows; i++) free(run.rows[i].log);
  free(run.rows);
  return rc;
}

int conform_cmd_run(void) {
  const conform_check_t **all;
  int n = conform_all_checks((const conform_check_t ***)&all);
  const conform_check_t **sel = calloc((size_t)n + 2, sizeof *sel);
  int m = 0;
  /* --plugin-report: the devices first, whatever --only selected. */
  if (conform_opts.plugin_report) sel[m++] = &conform_report_devices_check;
  for (int i = 0; i < n; i++)
    if (conform_check_selected(all[i], &conform_opts)) sel[m++] = all[i];
  if (m == (conform_opts.plugin_report ? 1 : 0)) {
    fprintf(stderr, "strand-conform: --only/--skip selected no check (see --list)\n");
    free(sel);
    return 2;
  }
  capture_stdout = true;
  int rc = conform_run_checks(sel, m);
  free(sel);
  return rc;
}
