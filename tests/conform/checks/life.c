/* strand-conform — life.*: many comms, several proxy threads, teardown with requests in flight,
 * listener and connection churn, init/finalize cycles and contexts (spec §1.4, §6.1, §6.9, §6.11),
 * with file-descriptor and RSS accounting for leaks. */
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

extern char **environ;

#include "conform.h"

#define REQ_THR_CAP 1024 /* life.threads' tagged rounds: bytes of each thread's buffers */

/* Plugins may close sockets from helper threads a moment after close returns. */
static int settle_fds(int baseline, int slack) {
  int n = conform_count_fds();
  for (int i = 0; i < 100 && n > baseline + slack; i++) {
    conform_sleep(0.02);
    n = conform_count_fds();
  }
  return n;
}

/* A thread a plugin stops at close may exit a moment after close returns: wait (bounded) for the
 * count to come down to `limit` before reading it. */
static int settle_threads(int limit) {
  int n = conform_count_threads();
  for (int i = 0; i < 50 && n > limit; i++) {
    conform_sleep(0.02);
    n = conform_count_threads();
  }
  return n;
}

static void raise_fd_limit(void) {
  struct rlimit rl;
  if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
    rl.rlim_cur = rl.rlim_max;
    setrlimit(RLIMIT_NOFILE, &rl);
  }
}

static conform_status_t life_many_comms(conform_ctx_t *c) {
  strand_props_v12_t p;
  if (conform_props(c, 0, &p)) return CONFORM_FAIL;
  int n = c->quick ? 64 : 256;
  if (p.maxComms < n) n = p.maxComms;
  raise_fd_limit();
  conform_link_t *l = calloc((size_t)n, sizeof *l);
  int opened = 0;
  for (; opened < n; opened++)
    if (conform_link_open(c, 0, &l[opened])) {
      conform_fail(c, "connection pair %d of %d (maxComms %d) could not be established", opened + 1,
                   n, p.maxComms);
      break;
    }
  for (int i = 0; i < opened && c->status != CONFORM_FAIL; i++)
    if (conform_ping(c, &l[i], 512 + (size_t)i, 70000 + (uint64_t)i))
      conform_fail(c, "(on connection %d of %d alive at once)", i, opened);
  for (int i = 0; i < opened; i++) conform_link_close(c, &l[i]);
  free(l);
  if (c->status != CONFORM_FAIL) conform_note(c, "%d connection pairs alive at once on device 0", n);
  return conform_verdict(c);
}

typedef struct {
  conform_ctx_t ctx; /* a private copy: results and phase per thread */
  conform_link_t *link;
  int id, rounds;
} thr_arg_t;

static void *thread_body(void *p) {
  thr_arg_t *a = p;
  conform_ctx_t *c = &a->ctx;
  for (int i = 0; i < a->rounds && c->status != CONFORM_FAIL; i++)
    conform_ping(c, a->link, (size_t)(i * 7919 % 200000) + 1, 80000 + (uint64_t)(a->id * 100000 + i));
  return NULL;
}

/* life.threads' first phase (below): requests tagged with their thread and comm. */
static void threads_tagged_requests(conform_ctx_t *c, conform_link_t *l, int nt, conform_buf_t *bufs);

static conform_status_t life_threads(conform_ctx_t *c) {
  enum { NT = 4 };
  conform_link_t l[NT];
  conform_buf_t bufs[2 * NT];
  memset(bufs, 0, sizeof bufs);
  int opened = 0;
  for (; opened < NT; opened++)
    if (conform_link_open(c, 0, &l[opened])) goto out;
  if (conform_barrier(c)) {
    conform_fail(c, "%s", c->bs_error);
    goto out;
  }
  /* First the tagged rounds: a request handed to the wrong caller is named as such there, where
   * the pings below would only see its effects (wrong bytes, a test error), or nothing at all when
   * the plugin progresses every comm from any test(). */
  for (int i = 0; i < 2 * NT; i++)
    if (conform_buf_alloc(&bufs[i], REQ_THR_CAP, 0)) {
      conform_fail(c, "out of memory");
      goto out;
    }
  threads_tagged_requests(c, l, NT, bufs);
  if (c->status == CONFORM_FAIL) goto out;
  if (conform_barrier(c)) {
    conform_fail(c, "%s", c->bs_error);
    goto out;
  }
  thr_arg_t args[NT];
  pthread_t th[NT];
  for (int t = 0; t < NT; t++) {
    args[t].ctx = *c;
    args[t].ctx.session = NULL; /* the bootstrap is not thread-safe; threads only see the plugin */
    args[t].ctx.phase = NULL;
    args[t].ctx.msg[0] = args[t].ctx.note[0] = '\0';
    args[t].ctx.status = CONFORM_PASS;
    args[t].link = &l[t];
    args[t].id = t;
    args[t].rounds = c->quick ? 100 : 400;
    pthread_create(&th[t], NULL, thread_body, &args[t]);
  }
  conform_phase(c, "%d threads driving %d comm pairs", NT, NT);
  for (int t = 0; t < NT; t++) pthread_join(th[t], NULL);
  for (int t = 0; t < NT; t++)
    if (args[t].ctx.status == CONFORM_FAIL) conform_fail(c, "thread %d: %s", t, args[t].ctx.msg);
  if (c->status != CONFORM_FAIL)
    conform_note(c, "then %d threads x %d round trips on their own comms", NT, args[0].rounds);
out:
  for (int t = 0; t < opened; t++) conform_link_close(c, &l[t]);
  for (int i = 0; i < 2 * NT; i++) conform_buf_free(&bufs[i]); /* the comms are gone: no writer left */
  return conform_verdict(c);
}

/* Link A: we post receives our peer never matches. Link B: we post sends our peer never
 * receives. Then everything is closed with those requests still in flight. */
static conform_status_t life_close_inflight(conform_ctx_t *c) {
  conform_link_t a, b;
  if (conform_link_open(c, 0, &a)) return CONFORM_FAIL;
  if (conform_link_open(c, 0, &b)) return CONFORM_FAIL;
  size_t len = 1 << 20;
  unsigned char *rbuf = calloc(1, 4 * len), *sbuf = calloc(1, 4 * len);
  void *rmh = NULL, *smh = NULL;
  if (conform_reg(c, a.recv_comm, rbuf, 4 * len, STRAND_PTR_HOST, &rmh) ||
      conform_reg(c, b.send_comm, sbuf, 4 * len, STRAND_PTR_HOST, &smh))
    goto out;
  for (int i = 0; i < 4; i++) {
    void *req, *d = rbuf + (size_t)i * len;
    size_t sz = len;
    int tag = c->prev;
    if (conform_irecv(c, a.recv_comm, 1, &d, &sz, &tag, &rmh, &req)) goto out;
  }
  for (int i = 0; i < 4; i++) {
    void *req = NULL;
    conform_phase(c, "isend #%d that nobody receives", i);
    strand_result_t r = c->net->isend(b.send_comm, sbuf + (size_t)i * len, len, c->rank, smh, NULL, &req);
    if (r != STRAND_SUCCESS) {
      conform_fail(c, "isend returned %s", conform_result_str(r));
      goto out;
    }
    if (req) {
      int done = 0;
      c->net->test(req, &done, NULL); /* one progress call, as the proxy would */
    }
  }
  if (conform_barrier(c)) {
    conform_fail(c, "%s", c->bs_error);
    goto out;
  }
  /* NCCL's teardown order: deregMr, then close (§6.9). Each call must return promptly. */
  double bound = 5.0 * c->timeout_scale;
  struct { void *comm; void *mh; int kind; const char *name; } steps[] = {
    {a.recv_comm, rmh, 0, "deregMr(recv)"}, {b.send_comm, smh, 0, "deregMr(send)"},
    {a.send_comm, NULL, 1, "closeSend(idle)"}, {a.recv_comm, NULL, 2, "closeRecv(receives in flight)"},
    {b.send_comm, NULL, 1, "closeSend(sends in flight)"}, {b.recv_comm, NULL, 2, "closeRecv(idle)"},
  };
  for (size_t s = 0; s < sizeof steps / sizeof steps[0]; s++) {
    conform_phase(c, "%s", steps[s].name);
    double t0 = conform_now();
    strand_result_t r = steps[s].kind == 0 ? c->net->deregMr(steps[s].comm, steps[s].mh)
                        : steps[s].kind == 1 ? c->net->closeSend(steps[s].comm)
                                             : c->net->closeRecv(steps[s].comm);
    double dt = conform_now() - t0;
    if (dt > bound) conform_fail(c, "%s took %.1f s (bound %.0f s)", steps[s].name, dt, bound);
    if (r != STRAND_SUCCESS && steps[s].kind != 0)
      conform_note(c, "%s returned %s", steps[s].name, conform_result_str(r));
  }
  rmh = smh = NULL;
  memset(&a, 0, sizeof a);
  memset(&b, 0, sizeof b);
  conform_barrier(c);
out:
  if (rmh) conform_dereg(c, a.recv_comm, rmh);
  if (smh) conform_dereg(c, b.send_comm, smh);
  if (a.send_comm) conform_link_close(c, &a);
  if (b.send_comm) conform_link_close(c, &b);
  free(rbuf);
  free(sbuf);
  return conform_verdict(c);
}

static conform_status_t life_listen_close(conform_ctx_t *c) {
  int n = c->quick ? 50 : 200;
  for (int warm = 0; warm < 3 + n; warm++) {
    static int baseline;
    if (warm == 3) baseline = settle_fds(0, 1 << 20);
    unsigned char h[CONFORM_LISTEN_BUF];
    void *lc = NULL;
    conform_phase(c, "listen #%d", warm);
    strand_result_t r = c->net->listen(c->net_ctx, 0, h, &lc);
    if (r != STRAND_SUCCESS || !lc) return conform_fail(c, "listen #%d returned %s", warm, conform_result_str(r));
    conform_phase(c, "closeListen #%d", warm);
    r = c->net->closeListen(lc);
    if (r != STRAND_SUCCESS) return conform_fail(c, "closeListen #%d returned %s", warm, conform_result_str(r));
    if (warm == 2 + n) {
      int now = settle_fds(baseline, 2);
      if (now > baseline + 2)
        return conform_fail(c, "%d listen/closeListen cycles without a connection left %d more file "
                            "descriptors open (%d -> %d)", n, now - baseline, baseline, now);
    }
  }
  conform_note(c, "%d listen/closeListen cycles, no descriptor leaked", n);
  return CONFORM_PASS;
}

/* Descriptors are compared from cycle 2 to the end. RSS is judged over a second window of n
 * cycles that follows a first of n: buffer pools that grow in large steps while a plugin warms up
 * (libfabric's ofi_rxm adds a chunk per endpoint, and a multi-rail plugin has one endpoint per
 * rail: strand-ofi with 4 rails grew 69 MiB in the first 15 cycles, then nothing) land in the first
 * window, while a leak grows in both. */
static conform_status_t life_connect_close(conform_ctx_t *c) {
  int n = c->quick ? 15 : 40;
  int baseline = -1;
  long rss0 = -1, rss_mid = -1;
  for (int i = 0; i < 2 * n + 2; i++) {
    if (i == 2) {
      baseline = settle_fds(0, 1 << 20);
      rss0 = conform_rss_kib();
    }
    if (i == n + 2) rss_mid = conform_rss_kib();
    conform_link_t l;
    if (conform_link_open(c, 0, &l)) return conform_fail(c, "(cycle %d)", i);
    if (conform_ping(c, &l, 100000, 90000 + (uint64_t)i)) return conform_fail(c, "(cycle %d)", i);
    conform_link_close(c, &l);
  }
  int fds = settle_fds(baseline, 2);
  long rss = conform_rss_kib();
  if (fds > baseline + 2)
    conform_fail(c, "%d connect/transfer/close cycles left %d more file descriptors open (%d -> %d)",
                 2 * n, fds - baseline, baseline, fds);
  if (rss_mid > 0 && rss - rss_mid > 64 * 1024)
    conform_fail(c, "RSS grew by %ld KiB over %d connect/close cycles after %d warm-up cycles "
                 "(%+ld KiB during those)", rss - rss_mid, n, n, rss_mid - rss0);
  if (c->status != CONFORM_FAIL)
    conform_note(c, "%d cycles: fds %d -> %d, RSS %+ld KiB warming up, then %+ld KiB over %d", 2 * n,
                 baseline, fds, rss_mid - rss0, rss - rss_mid, n);
  return conform_verdict(c);
}

static conform_status_t life_init_finalize(conform_ctx_t *c) {
  enum { EXTRA_COMMS = 3, THREAD_SLACK = 1 };
  int n = c->quick ? 8 : 20;
  int baseline = -1, thr_warm = -1, thr_first = -1;
  for (int i = 0; i < n + 1; i++) {
    void *ctx = NULL;
    strand_result_t r = conform_plugin_init(c, &ctx, 0x1000 + (uint64_t)i);
    if (r != STRAND_SUCCESS) return conform_fail(c, "init #%d returned %s", i + 1, conform_result_str(r));
    c->net_ctx = ctx;
    int nd = 0;
    conform_phase(c, "devices");
    r = c->net->devices(&nd);
    c->ndev = nd;
    if (r != STRAND_SUCCESS || nd <= 0) {
      /* No device to listen on: 0 is a clean "not testable here", an error is load.init's. */
      conform_plugin_finalize(c, ctx);
      c->net_ctx = NULL;
      if (r == STRAND_SUCCESS && nd == 0) return conform_skip(c, CONFORM_ZERO_DEVICES_MSG);
      return conform_skip(c, "not run: devices() returned %s with %d devices (see load.init)",
                          conform_result_str(r), nd);
    }
    conform_link_t l;
    if (conform_link_open(c, 0, &l)) return conform_fail(c, "(after init #%d)", i + 1);
    if (conform_ping(c, &l, 5000, 95000 + (uint64_t)i)) return conform_fail(c, "(after init #%d)", i + 1);
    conform_link_close(c, &l);
    if (i == 0) {
      /* Threads per comm: the count after the first pair may include a pool the plugin keeps;
       * more pairs opened and closed must not add to it (one left running per comm fails). */
      thr_warm = conform_count_threads();
      for (int k = 0; k < EXTRA_COMMS; k++) {
        if (conform_link_open(c, 0, &l)) return conform_fail(c, "(after init #1, pair %d)", k + 2);
        conform_ping(c, &l, 1024, 96000 + (uint64_t)k);
        conform_link_close(c, &l);
      }
      int thr = settle_threads(thr_warm + THREAD_SLACK);
      if (thr > thr_warm + THREAD_SLACK)
        conform_fail(c, "closeSend/closeRecv leave threads running: %d threads after the first comm "
                     "pair was closed, %d after %d more were opened and closed (+%d; a bounded pool "
                     "is fine, a thread per comm is not)", thr_warm, thr, EXTRA_COMMS, thr - thr_warm);
    }
    r = conform_plugin_finalize(c, ctx);
    c->net_ctx = NULL;
    if (r != STRAND_SUCCESS) return conform_fail(c, "finalize #%d returned %s", i + 1, conform_result_str(r));
    if (i == 0) {
      baseline = settle_fds(0, 1 << 20);
      thr_first = conform_count_threads();
    }
  }
  int fds = settle_fds(baseline, 2);
  if (fds > baseline + 2)
    return conform_fail(c, "%d init/finalize cycles left %d more file descriptors open (%d -> %d)",
                        n, fds - baseline, baseline, fds);
  /* Threads per context: counted in /proc/self/task after the first finalize and the last. */
  int thr_last = settle_threads(thr_first + THREAD_SLACK);
  if (thr_last > thr_first + THREAD_SLACK)
    conform_fail(c, "finalize leaves threads running: %d threads after the first finalize, %d after "
                 "%d more init/finalize cycles (+%d)", thr_first, thr_last, n - 1, thr_last - thr_first);
  if (c->status == CONFORM_FAIL) return CONFORM_FAIL;
  conform_note(c, "%d init/connect/finalize cycles, threads %d after the first finalize and %d after "
               "the last%s", n, thr_first, thr_last,
               c->version <= 10 ? " (v6-v10: the core adapter inits the plugin once)" : "");
  return CONFORM_PASS;
}

static conform_status_t life_two_contexts(conform_ctx_t *c) {
  if (c->version < 11) return conform_skip(c, "v%d cores init once and share one context", c->version);
  void *ctx[2] = {NULL, NULL};
  conform_link_t l[2];
  memset(l, 0, sizeof l);
  for (int k = 0; k < 2; k++) {
    strand_result_t r = conform_plugin_init(c, &ctx[k], 0x2000 + (uint64_t)k);
    if (r != STRAND_SUCCESS) {
      conform_fail(c, "init of communicator context #%d (with #1 alive) returned %s", k + 1,
                   conform_result_str(r));
      goto out;
    }
  }
  conform_phase(c, "devices");
  strand_result_t rd = c->net->devices(&c->ndev);
  if (rd != STRAND_SUCCESS || c->ndev <= 0) {
    if (rd == STRAND_SUCCESS && c->ndev == 0) conform_skip(c, CONFORM_ZERO_DEVICES_MSG);
    else conform_skip(c, "not run: devices() returned %s with %d devices (see load.init)",
                      conform_result_str(rd), c->ndev);
    goto out;
  }
  for (int k = 0; k < 2; k++) {
    c->net_ctx = ctx[k];
    if (conform_link_open(c, 0, &l[k])) goto out;
  }
  for (int k = 0; k < 2; k++)
    if (conform_ping(c, &l[k], 3000 + (size_t)k, 96000 + (uint64_t)k)) goto out;
out:
  for (int k = 0; k < 2; k++) {
    if (l[k].send_comm || l[k].recv_comm) conform_link_close(c, &l[k]);
    if (ctx[k]) {
      strand_result_t r = conform_plugin_finalize(c, ctx[k]);
      if (r != STRAND_SUCCESS) conform_fail(c, "finalize of context #%d returned %s", k + 1, conform_result_str(r));
    }
  }
  c->net_ctx = NULL;
  if (c->status == CONFORM_SKIP) return CONFORM_SKIP;
  return conform_verdict(c);
}

static conform_status_t life_set_net_attr(conform_ctx_t *c) {
  if (c->version < 11) return conform_skip(c, "setNetAttr appears in v11");
  if (!c->net->setNetAttr) return conform_skip(c, "setNetAttr is NULL (allowed: no hints)");
  /* What NCCL sends at connect time for a P2P connection (§6.11). */
  strand_net_attr_t a;
  memset(&a, 0xff, sizeof a);
  a.sendCommAttr.minConcurrentPeers = a.recvCommAttr.minConcurrentPeers = 1;
  a.sendCommAttr.minFlowsPerPeer = a.recvCommAttr.minFlowsPerPeer = 1;
  a.sendCommAttr.maxConcurrentPeers = a.recvCommAttr.maxConcurrentPeers = c->nranks;
  a.sendCommAttr.maxFlowsPerPeer = a.recvCommAttr.maxFlowsPerPeer = 2;
  a.op = (1u << STRAND_FUNC_SEND) | (1u << STRAND_FUNC_RECV) | (1u << STRAND_FUNC_ALLTOALL) |
         (1u << STRAND_FUNC_SCATTER) | (1u << STRAND_FUNC_GATHER);
  conform_phase(c, "setNetAttr(connect hints)");
  strand_result_t r = c->net->setNetAttr(c->net_ctx, &a);
  if (r != STRAND_SUCCESS)
    conform_fail(c, "setNetAttr with NCCL's connect-time hints returned %s (NCCL ignores the value, "
                 "but the plugin rejected NCCL's own hint)", conform_result_str(r));
  conform_link_t l;
  if (conform_link_open(c, 0, &l)) return CONFORM_FAIL;
  /* per-transfer update: a ring all-reduce, SIMPLE protocol */
  a.sendCommAttr.minConcurrentPeers = a.sendCommAttr.maxConcurrentPeers = 1;
  a.sendCommAttr.minFlowsPerPeer = a.sendCommAttr.maxFlowsPerPeer = 1;
  a.op = 1u << STRAND_FUNC_ALLREDUCE;
  a.algo = 1u << STRAND_ALGO_RING;
  a.proto = 1u << STRAND_PROTO_SIMPLE;
  conform_phase(c, "setNetAttr(transfer hints)");
  r = c->net->setNetAttr(c->net_ctx, &a);
  if (r != STRAND_SUCCESS)
    conform_fail(c, "setNetAttr with per-transfer hints returned %s", conform_result_str(r));
  conform_ping(c, &l, 10000, 97000);
  conform_link_close(c, &l);
  return conform_verdict(c);
}

/* A copy of environ, sorted, for comparing before and after init. */
static int env_cmp(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }
static char **env_snapshot(int *n) {
  int k = 0;
  while (environ && environ[k]) k++;
  char **v = calloc((size_t)k + 1, sizeof *v);
  for (int i = 0; v && i < k; i++) v[i] = strdup(environ[i]);
  if (v) qsort(v, (size_t)k, sizeof *v, env_cmp);
  *n = v ? k : 0;
  return v;
}
static size_t env_name_len(const char *e) {
  const char *eq = strchr(e, '=');
  return eq ? (size_t)(eq - e) : strlen(e);
}
static const char *env_find(char **v, int n, const char *e) {
  size_t l = env_name_len(e);
  for (int i = 0; i < n; i++)
    if (env_name_len(v[i]) == l && strncmp(v[i], e, l) == 0) return v[i];
  return NULL;
}

/* init must not change the process environment: NCCL reads NCCL_* variables once and other
 * libraries (and the application) share the environment; a plugin that setenv()s its tuning
 * changes NCCL's behaviour behind the user's back, and setenv races getenv in other threads. */
static conform_status_t life_init_env(conform_ctx_t *c) {
  int nb = 0, na = 0;
  char **before = env_snapshot(&nb);
  void *ctx = NULL;
  strand_result_t r = conform_plugin_init(c, &ctx, 0x3000);
  char **after = env_snapshot(&na);
  char list[700] = "";
  int changes = 0;
  for (int i = 0; i < na; i++) {
    const char *o = env_find(before, nb, after[i]);
    if (o && strcmp(o, after[i]) == 0) continue;
    changes++;
    snprintf(list + strlen(list), sizeof list - strlen(list), "%s%s %.*s", strlen(list) ? ", " : "",
             o ? "changed" : "added", (int)env_name_len(after[i]), after[i]);
  }
  for (int i = 0; i < nb; i++)
    if (!env_find(after, na, before[i])) {
      changes++;
      snprintf(list + strlen(list), sizeof list - strlen(list), "%sremoved %.*s",
               strlen(list) ? ", " : "", (int)env_name_len(before[i]), before[i]);
    }
  if (r != STRAND_SUCCESS) conform_fail(c, "init returned %s", conform_result_str(r));
  else if (changes)
    conform_fail(c, "init changed the process environment (%d variable%s): %s", changes,
                 changes == 1 ? "" : "s", list);
  else conform_note(c, "%d environment variables, none changed by init", nb);
  if (r == STRAND_SUCCESS) {
    r = conform_plugin_finalize(c, ctx);
    if (r != STRAND_SUCCESS) conform_fail(c, "finalize returned %s", conform_result_str(r));
  }
  for (int i = 0; i < nb; i++) free(before[i]);
  for (int i = 0; i < na; i++) free(after[i]);
  free(before);
  free(after);
  return conform_verdict(c);
}

/* A plain lifetime (init, connect, register, transfer, deregister, close, finalize) after which the
 * plugin must not report leaks: WARN lines logged during close/finalize that read like a leak
 * report (conform_close_warnings, pattern in conform.h) fail the check, quoted. */
static conform_status_t life_close_clean(conform_ctx_t *c) {
  void *ctx = NULL;
  strand_result_t r = conform_plugin_init(c, &ctx, 0x4000);
  if (r != STRAND_SUCCESS) return conform_fail(c, "init returned %s", conform_result_str(r));
  c->net_ctx = ctx;
  conform_phase(c, "devices");
  c->net->devices(&c->ndev);
  if (c->ndev == 0) {
    /* Nothing to connect (a plugin whose hardware is absent, e.g. strand-ib without a verbs
     * device): the check is not testable, as every other per-device check. */
    conform_plugin_finalize(c, ctx);
    c->net_ctx = NULL;
    return conform_skip(c, CONFORM_ZERO_DEVICES_MSG);
  }
  conform_link_t l;
  if (conform_link_open(c, 0, &l) == 0) {
    conform_ping(c, &l, 4096, 98000);
    conform_link_close(c, &l);
  }
  r = conform_plugin_finalize(c, ctx);
  c->net_ctx = NULL;
  if (r != STRAND_SUCCESS) conform_fail(c, "finalize returned %s", conform_result_str(r));
  const char *first = NULL;
  int n = conform_close_warnings(&first);
  if (n)
    conform_fail(c, "the plugin reported %d leak%s while closing: \"%s\"", n, n == 1 ? "" : "s",
                 first);
  else if (c->status != CONFORM_FAIL)
    conform_note(c, "no leak reported during closeSend/closeRecv/closeListen/finalize");
  return conform_verdict(c);
}

/* ---------------------------------------------------------------- requests crossing threads */

/* Every request a thread gets back from isend/irecv is entered here with its owner (thread, comm,
 * direction) until the owner's test() said done. A request handed to a thread while still pending
 * for another owner means the plugin returned one caller's request to another (a request passed
 * through shared state without a lock): NCCL's proxy threads would then test, and complete, each
 * other's transfers. An entry whose owner is inside test() may have just been completed, freed and
 * reused legitimately: it is marked contested and counts only if that test() then reports the
 * request still pending, i.e. it was not finished when it went to the other caller. Two more
 * findings name the same fault where the timing hides the duplicate (under load, or a sanitizer):
 * a receive that completes with the size of another thread's message while its own buffer does
 * not hold that message (the completion it saw was that thread's), and a test() that fails on a
 * pointer another thread's test() completed while the isend/irecv that returned it ran (the
 * caller was handed that thread's finished request). Every such finding is summarised as
 * "returned to the wrong thread"; what else then fails (tests of requests nobody owns any more,
 * rounds that never complete) is its consequence and is not reported beside it. */
enum { OWN_MAX = 64 };
typedef struct {
  void *req;
  int thread;
  bool send;
  int state; /* 0 free, 1 pending, 2 owner inside test() */
  /* Set when another claim returned req while the owner was inside test(): who, and where. */
  bool contested;
  int by_thread, by_round;
  bool by_send;
  /* Set when, while the isend/irecv that returned req ran, another thread's test() completed the
   * same pointer: that thread and direction. */
  int from_thread;
  bool from_send;
} own_entry_t;

/* A completion (test() said done) of req by `thread`, numbered by the table's sequence. */
enum { DONE_RING = 64 };
typedef struct {
  void *req;
  int thread;
  bool send;
  unsigned long long seq;
} own_done_t;

typedef struct {
  pthread_mutex_t lock;
  own_entry_t e[OWN_MAX];
  int nt, rounds;       /* the phase's threads and rounds: which sizes belong to whom */
  own_done_t done[DONE_RING]; /* the latest completions */
  unsigned long long seq;     /* completions so far */
  int crossed;          /* requests found owned by someone else */
  char first[512];      /* the first such finding */
  volatile int stop;    /* set on the first finding: every thread winds down */
} own_table_t;

typedef struct {
  conform_ctx_t ctx;
  conform_link_t *link;
  own_table_t *own;
  int id, rounds;
  /* The thread's buffers, freed by life.threads only after its comms are closed: a plugin that
   * mixed requests up may still write into them from another thread's test(). */
  conform_buf_t *sb, *rb;
} req_thr_arg_t;

static const char *dir_str(bool send) { return send ? "isend" : "irecv"; }

static own_entry_t *own_find(own_table_t *o, void *req, int thread, bool send) {
  for (int i = 0; i < OWN_MAX; i++)
    if (o->e[i].state && o->e[i].req == req && o->e[i].thread == thread && o->e[i].send == send)
      return &o->e[i];
  return NULL;
}

/* Records one finding of a request crossing threads; the caller holds o->lock. */
static void own_cross(own_table_t *o, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void own_cross(own_table_t *o, const char *fmt, ...) {
  if (!o->crossed) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(o->first, sizeof o->first, fmt, ap);
    va_end(ap);
  }
  o->crossed++;
  o->stop = 1;
}

/* The completion count before an isend/irecv call: own_claim looks for completions after it. */
static unsigned long long own_seq(own_table_t *o) {
  pthread_mutex_lock(&o->lock);
  unsigned long long seq = o->seq;
  pthread_mutex_unlock(&o->lock);
  return seq;
}

static void own_claim(own_table_t *o, req_thr_arg_t *a, void *req, bool send, int round,
                      unsigned long long call_seq) {
  pthread_mutex_lock(&o->lock);
  own_entry_t *slot = NULL;
  for (int i = 0; i < OWN_MAX; i++) {
    own_entry_t *e = &o->e[i];
    if (!e->state) {
      if (!slot) slot = e;
      continue;
    }
    if (e->req == req && e->state == 1)
      own_cross(o, "%s on thread %d's comm (round %d) returned request %p, which was still pending as "
                "thread %d's %s on its own comm: the plugin handed one caller's request to another",
                dir_str(send), a->id, round, req, e->thread, dir_str(e->send));
    else if (e->req == req && e->state == 2 && !e->contested) {
      e->contested = true;
      e->by_thread = a->id;
      e->by_round = round;
      e->by_send = send;
    }
  }
  if (slot) {
    *slot = (own_entry_t){.req = req, .thread = a->id, .send = send, .state = 1, .from_thread = -1};
    for (int i = 0; i < DONE_RING; i++) {
      const own_done_t *d = &o->done[i];
      if (d->req == req && d->seq > call_seq && d->thread != a->id) {
        slot->from_thread = d->thread;
        slot->from_send = d->send;
      }
    }
  }
  pthread_mutex_unlock(&o->lock);
}

/* After the owner's test(): state 0 (done, or failed: NCCL would not touch the request again)
 * frees the entry, 1 keeps it pending. A contested entry that its owner's test() reports still
 * pending was handed to the other caller unfinished; one that test() completed was handed over
 * while being completed, which the other caller's own test() may reveal (own_failed). */
static void own_state(own_table_t *o, void *req, int thread, bool send, int state, bool completed) {
  pthread_mutex_lock(&o->lock);
  own_entry_t *e = own_find(o, req, thread, send);
  if (e && e->contested && state != 2) {
    if (state == 1)
      own_cross(o, "%s on thread %d's comm (round %d) returned request %p while thread %d was "
                "testing it as its %s, and that test() reported it still pending: the plugin "
                "handed one caller's request to another", dir_str(e->by_send), e->by_thread,
                e->by_round, req, thread, dir_str(send));
    else if (completed) {
      own_entry_t *other = own_find(o, req, e->by_thread, e->by_send);
      if (other && other->from_thread < 0) {
        other->from_thread = thread;
        other->from_send = send;
      }
    }
    e->contested = false;
  }
  if (completed) {
    o->seq++;
    o->done[o->seq % DONE_RING] =
        (own_done_t){.req = req, .thread = thread, .send = send, .seq = o->seq};
  }
  if (e) e->state = state;
  pthread_mutex_unlock(&o->lock);
}

/* test() of req failed for its owner: a finished request of another thread, handed over, is the
 * cause the check can name. */
static void own_failed(own_table_t *o, void *req, int thread, bool send, strand_result_t r) {
  pthread_mutex_lock(&o->lock);
  own_entry_t *e = own_find(o, req, thread, send);
  if (e && e->from_thread >= 0)
    own_cross(o, "test() of request %p, returned by %s on thread %d's comm, failed (%s); thread %d's "
              "test() had completed the same pointer as its %s while that %s ran: the plugin "
              "handed one caller's finished request to another", req, dir_str(send), thread,
              conform_result_str(r), e->from_thread, dir_str(e->from_send), dir_str(send));
  pthread_mutex_unlock(&o->lock);
}

/* test() one owned request; 1 done, 0 not yet, -1 error (recorded). */
static int own_test(req_thr_arg_t *a, void *req, bool send, int *size) {
  own_state(a->own, req, a->id, send, 2, false);
  int done = 0;
  strand_result_t r = a->ctx.net->test(req, &done, size);
  if (r != STRAND_SUCCESS) own_failed(a->own, req, a->id, send, r);
  bool completed = r == STRAND_SUCCESS && done;
  own_state(a->own, req, a->id, send, completed || r != STRAND_SUCCESS ? 0 : 1, completed);
  if (r != STRAND_SUCCESS) {
    conform_fail(&a->ctx, "test(%s of thread %d) returned %s", dir_str(send), a->id, conform_result_str(r));
    return -1;
  }
  return done;
}

static size_t req_thr_size(int thread, int round) { return 256 + (size_t)thread * 97 + (size_t)(round % 5) * 31; }

/* A receive of thread a->id (round `round`) completed with `got` bytes, not its own message's
 * size. Sizes tell the threads' messages apart (97 x thread + 31 x (round % 5) never collide), so
 * when `got` is another thread's size, either that thread's message was delivered into this
 * thread's buffer (a comm mix-up: the bytes are here) or the completion this thread saw was that
 * thread's (the bytes are in that thread's buffer): the latter is recorded as a request returned
 * to the wrong thread and 1 returned; 0 leaves the wording to the caller. */
static int other_threads_completion(req_thr_arg_t *a, const void *rbuf, int round, int got) {
  conform_ctx_t *c = &a->ctx;
  own_table_t *o = a->own;
  for (int t = 0; t < o->nt; t++)
    for (int r5 = 0; r5 < 5; r5++) {
      if (t == a->id || (int)req_thr_size(t, r5) != got) continue;
      for (int i = r5; i < o->rounds; i += 5) {
        uint64_t salt = 120000 + (uint64_t)(t * 10000 + i); /* as req_thread_body's */
        if (conform_verify(rbuf, (size_t)got, conform_seed(c->prev, c->rank, salt)) < 0)
          return 0; /* thread t's message is in this thread's buffer: delivered on the wrong comm */
      }
      pthread_mutex_lock(&o->lock);
      own_cross(o, "irecv on thread %d's comm (round %d) completed with %d bytes, the size of thread "
                "%d's messages (rounds %d, %d, ...), which are not in its buffer: the plugin handed "
                "thread %d's request, or its completion, to thread %d", a->id, round, got, t, r5,
                r5 + 5, t, a->id);
      pthread_mutex_unlock(&o->lock);
      return 1;
    }
  return 0;
}

static void *req_thread_body(void *p) {
  req_thr_arg_t *a = p;
  conform_ctx_t *c = &a->ctx;
  own_table_t *o = a->own;
  conform_buf_t sb = *a->sb, rb = *a->rb;
  void *smh = NULL, *rmh = NULL;
  if (conform_reg(c, a->link->send_comm, sb.data, REQ_THR_CAP, STRAND_PTR_HOST, &smh) ||
      conform_reg(c, a->link->recv_comm, rb.data, REQ_THR_CAP, STRAND_PTR_HOST, &rmh))
    goto out;
  double bound = 10.0 * c->timeout_scale;
  for (int i = 0; i < a->rounds && !o->stop && c->status != CONFORM_FAIL; i++) {
    uint64_t salt = 120000 + (uint64_t)(a->id * 10000 + i);
    size_t ssize = req_thr_size(a->id, i);
    conform_fill(sb.data, ssize, conform_seed(c->rank, c->next, salt));
    void *rdata = rb.data, *rreq = NULL, *sreq = NULL;
    size_t rcap = REQ_THR_CAP;
    int tag = c->prev, got = -1;
    unsigned long long seq = own_seq(o);
    if (conform_irecv(c, a->link->recv_comm, 1, &rdata, &rcap, &tag, &rmh, &rreq)) break;
    own_claim(o, a, rreq, false, i, seq);
    double end = conform_now() + bound;
    bool rdone = false, sdone = false;
    while (!(rdone && sdone) && !o->stop) {
      if (!sreq) {
        seq = own_seq(o);
        if (conform_try_isend(c, a->link->send_comm, sb.data, ssize, c->rank, smh, &sreq)) break;
        if (sreq) own_claim(o, a, sreq, true, i, seq);
      }
      if (sreq && !sdone) {
        int d = own_test(a, sreq, true, NULL);
        if (d < 0) break;
        sdone = d;
      }
      if (!rdone) {
        int d = own_test(a, rreq, false, &got);
        if (d < 0) break;
        rdone = d;
      }
      if (conform_now() > end) {
        conform_fail(c, "round %d did not complete within %.0f s", i, bound);
        break;
      }
    }
    if (!(rdone && sdone)) break;
    size_t want = req_thr_size(a->id, i);
    if ((size_t)got != want) {
      if (!other_threads_completion(a, rb.data, i, got))
        conform_fail(c, "its receive (round %d) completed with size %d, its comm's message has %zu "
                     "bytes: completed for another comm's message", i, got, want);
      break;
    }
    long long bad = conform_verify(rb.data, want, conform_seed(c->prev, c->rank, salt));
    if (bad >= 0) {
      conform_fail(c, "its receive (round %d) completed but byte %lld differs: it holds another "
                   "comm's or no message", i, bad);
      break;
    }
  }
out:
  if (smh) conform_dereg(c, a->link->send_comm, smh);
  if (rmh) conform_dereg(c, a->link->recv_comm, rmh);
  return NULL;
}

/* The tagged phase of life.threads on its nt open links, with 2 x nt buffers of REQ_THR_CAP bytes
 * that the caller frees after closing the links: returns with failures recorded in c. */
static void threads_tagged_requests(conform_ctx_t *c, conform_link_t *l, int nt, conform_buf_t *bufs) {
  enum { NT_MAX = 8 };
  own_table_t own;
  memset(&own, 0, sizeof own);
  pthread_mutex_init(&own.lock, NULL);
  own.nt = nt;
  own.rounds = c->quick ? 50 : 300;
  req_thr_arg_t args[NT_MAX];
  pthread_t th[NT_MAX];
  for (int t = 0; t < nt; t++) {
    args[t].ctx = *c;
    args[t].ctx.session = NULL; /* the bootstrap is not thread-safe */
    args[t].ctx.phase = NULL;
    args[t].ctx.msg[0] = args[t].ctx.note[0] = '\0';
    args[t].ctx.status = CONFORM_PASS;
    args[t].link = &l[t];
    args[t].own = &own;
    args[t].id = t;
    args[t].rounds = own.rounds;
    args[t].sb = &bufs[2 * t];
    args[t].rb = &bufs[2 * t + 1];
    pthread_create(&th[t], NULL, req_thread_body, &args[t]);
  }
  conform_phase(c, "%d threads, every request tagged with its owner", nt);
  for (int t = 0; t < nt; t++) pthread_join(th[t], NULL);
  if (own.crossed)
    conform_fail(c, "%d request%s returned to the wrong thread; first: %s", own.crossed,
                 own.crossed == 1 ? "" : "s", own.first);
  for (int t = 0; t < nt; t++)
    if (args[t].ctx.status == CONFORM_FAIL && !own.crossed) conform_fail(c, "thread %d: %s", t, args[t].ctx.msg);
  if (c->status != CONFORM_FAIL)
    conform_note(c, "%d threads x %d rounds, every request owned by the thread and comm it was "
                 "posted on", nt, args[0].rounds);
  pthread_mutex_destroy(&own.lock);
}

const conform_check_t conform_checks_life[] = {
  {"life.many-comms", "§2.6 maxComms, §6.7", "hundreds of comm pairs alive at once, each carries a message",
   life_many_comms, 90, CONFORM_F_SLOW},
  {"life.threads", "§1.4 threads, §6.2", "four threads drive four comm pairs concurrently; every request returns to the thread and comm that posted it",
   life_threads, 60, 0},
  {"life.close-inflight", "§6.9", "dereg/close with unmatched requests in flight return promptly",
   life_close_inflight, 40, 0},
  {"life.listen-close", "§6.1 step 5", "listen/closeListen without connect leaks no descriptor",
   life_listen_close, 30, 0},
  {"life.connect-close-no-leak", "§6.9, §1.4", "connect/transfer/close cycles: fds and RSS back to baseline",
   life_connect_close, 60, 0},
  {"life.init-finalize", "§1.4, §1.5, §6.9", "init/connect/finalize cycles leak no descriptor, no thread per comm or context",
   life_init_finalize, 60, CONFORM_F_NO_INIT},
  {"life.two-contexts", "§1.4", "two init contexts alive at once, each with a connection (v11+)",
   life_two_contexts, 30, CONFORM_F_NO_INIT},
  {"life.init-env-unchanged", "§1.4", "init leaves the process environment (environ) as it found it",
   life_init_env, 20, CONFORM_F_NO_INIT},
  {"life.close-clean", "§6.9, §1.4", "close/finalize after a transfer log no leak warning",
   life_close_clean, 30, CONFORM_F_NO_INIT},
  {"life.set-net-attr", "§6.11", "setNetAttr with NCCL's hints is accepted (v11+)", life_set_net_attr, 30, 0},
  {0},
};
