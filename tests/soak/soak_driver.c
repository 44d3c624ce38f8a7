/* soak-driver: one plugin, one process, for a while; does the process stay flat?
 *
 *   soak-driver --plugin SO [--mode net|collnet] [--seconds N] [--name LABEL] [--ranks N]
 *               [--interval S] [--max-rss-growth-mib M] [--expect-fail REASON]
 *
 * net mode (the plugin's ncclNetPlugin_v12, one thread, loopback pairs on device 0): epochs that
 * open 1..3 send/recv pairs, register buffers on every comm, run rounds of grouped receives
 * (1..min(maxRecvs, 8) buffers, distinct tags) of mixed sizes (0 B .. 1 MiB) with every byte
 * verified, then deregister and close everything.
 * collnet mode (the plugin's ncclCollNetPlugin_v12, --ranks threads as ranks): epochs where every
 * rank inits, listens, connects the group, runs iallreduce of mixed counts (float32 sum, int32
 * max; results checked against the rank-order reduction) and, when the table has it, iallgather,
 * then closes the collComm and finalizes.
 *
 * Between epochs nothing is open, so the process's resident memory, descriptors and threads are
 * sampled there: the baseline once the warm-up (10 % of the run, 1..30 s) is over, the end after
 * the last epoch. Every --interval seconds a progress line; at the end one `SOAK-RESULT key=value`
 * line (what tests/soak/soak.sh tabulates) and the exit status: 0 when no call failed, no wait hit
 * its 30 s bound, no byte was wrong, descriptors and threads are back to the baseline, and the
 * resident set grew by at most max(--max-rss-growth-mib, 10 % of the baseline). With --expect-fail
 * the status is 0 only when the run FAILS for that reason (how the smoke test proves the verdict
 * on a fixture that leaks a descriptor per closed comm). */
#include <dirent.h>
#include <getopt.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "plugin_test.h"

#define SOAK_WAIT_S 30.0       /* bound on every wait for a request or a connection */
#define SOAK_MAX_GROUP 8       /* receives grouped in one irecv */
#define SOAK_MAX_MSG (1u << 20)
#define SOAK_MAX_PAIRS 3
#define SOAK_MAX_RANKS 8

static struct {
  const char *plugin, *name, *mode, *expect_fail;
  double seconds, interval, max_growth_mib;
  int ranks;
} opt = {NULL, NULL, "net", NULL, 60, 10, 32, 2};

/* What the run did so far (collnet ranks add theirs under the lock). */
static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static unsigned long long g_bytes, g_msgs, g_comms, g_epochs;
static unsigned g_errors;
static char g_first_error[512];

static void soak_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void soak_error(const char *fmt, ...) {
  char msg[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  pthread_mutex_lock(&g_lock);
  if (g_errors++ == 0) snprintf(g_first_error, sizeof g_first_error, "%s", msg);
  pthread_mutex_unlock(&g_lock);
  fprintf(stderr, "soak[%s] ERROR: %s\n", opt.name, msg);
}

static void account(unsigned long long bytes, unsigned long long msgs) {
  pthread_mutex_lock(&g_lock);
  g_bytes += bytes;
  g_msgs += msgs;
  pthread_mutex_unlock(&g_lock);
}

/* ---- process samples ---- */

typedef struct {
  long rss_kib, threads;
  int fds;
} sample_t;

static long status_field(const char *key) {
  FILE *f = fopen("/proc/self/status", "r");
  char line[256];
  long v = -1;
  size_t n = strlen(key);
  while (f && fgets(line, sizeof line, f))
    if (!strncmp(line, key, n) && line[n] == ':') {
      v = strtol(line + n + 1, NULL, 10);
      break;
    }
  if (f) fclose(f);
  return v;
}

static int count_fds(void) {
  DIR *d = opendir("/proc/self/fd");
  int n = 0;
  if (!d) return -1;
  for (struct dirent *e; (e = readdir(d));)
    if (e->d_name[0] != '.') n++;
  closedir(d);
  return n - 1; /* the directory's own descriptor */
}

static sample_t take_sample(void) { return (sample_t){status_field("VmRSS"), status_field("Threads"), count_fds()}; }

/* A closed comm may hand its thread or socket back a moment later: the end sample waits up to 2 s
 * for descriptors and threads to come back to the baseline. */
static sample_t settled_sample(const sample_t *base) {
  sample_t s = take_sample();
  for (double t0 = pt_now_s(); (s.fds > base->fds || s.threads > base->threads) && pt_now_s() - t0 < 2.0;) {
    usleep(50000);
    s = take_sample();
  }
  return s;
}

/* ---- deterministic data ---- */

static uint64_t g_rng = 0x9E3779B97F4A7C15ull;
static uint32_t rnd(void) {
  g_rng ^= g_rng << 13;
  g_rng ^= g_rng >> 7;
  g_rng ^= g_rng << 17;
  return (uint32_t)(g_rng >> 16);
}

static const size_t k_sizes[] = {0, 1, 100, 4096, 65539, 262144, SOAK_MAX_MSG};
#define NSIZES (sizeof k_sizes / sizeof k_sizes[0])

/* ---- net mode ---- */

typedef struct {
  void *send, *recv;
  void *smh, *rmh;
} pair_t;

static const strand_net_v12_t *N;
static char *g_sbuf, *g_rbuf; /* SOAK_MAX_PAIRS x SOAK_MAX_GROUP x SOAK_MAX_MSG, allocated once */

/* One grouped receive of g messages on pair p, round r of the epoch, every byte checked. */
static int net_round(pair_t *pp, int p, int g, unsigned seed) {
  void *sdata[SOAK_MAX_GROUP], *rdata[SOAK_MAX_GROUP], *rmhs[SOAK_MAX_GROUP], *sreq[SOAK_MAX_GROUP], *rreq = NULL;
  size_t sizes[SOAK_MAX_GROUP];
  int tags[SOAK_MAX_GROUP], got[SOAK_MAX_GROUP];
  unsigned long long bytes = 0;
  for (int k = 0; k < g; k++) {
    size_t off = ((size_t)p * SOAK_MAX_GROUP + (size_t)k) * SOAK_MAX_MSG;
    sdata[k] = g_sbuf + off;
    rdata[k] = g_rbuf + off;
    rmhs[k] = pp->rmh;
    sizes[k] = k_sizes[rnd() % NSIZES];
    tags[k] = 100 + k;
    got[k] = -1;
    pt_fill(sdata[k], sizes[k], seed + (unsigned)k);
    bytes += sizes[k];
  }
  double t0 = pt_now_s();
  while (!rreq) {
    strand_result_t rc = N->irecv(pp->recv, g, rdata, sizes, tags, rmhs, NULL, &rreq);
    if (rc != STRAND_SUCCESS) return soak_error("irecv of %d buffers returned %d", g, (int)rc), -1;
    if (!rreq && pt_now_s() - t0 > SOAK_WAIT_S) return soak_error("irecv never accepted"), -1;
  }
  for (int k = 0; k < g; k++) {
    sreq[k] = NULL;
    while (!sreq[k]) {
      strand_result_t rc = N->isend(pp->send, sdata[k], sizes[k], tags[k], pp->smh, NULL, &sreq[k]);
      if (rc != STRAND_SUCCESS) return soak_error("isend of %zu bytes returned %d", sizes[k], (int)rc), -1;
      if (!sreq[k] && pt_now_s() - t0 > SOAK_WAIT_S) return soak_error("isend never accepted"), -1;
    }
  }
  /* Sends and the receive are tested together, as NCCL's proxy does: a send may wait for the
   * receiver to read its control stream (strand-socket announces receives on request). */
  for (bool left = true; left;) {
    left = false;
    for (int k = 0; k <= g; k++) {
      void **req = k < g ? &sreq[k] : &rreq;
      if (*req == NULL) continue;
      int done = 0;
      strand_result_t rc = N->test(*req, &done, k < g ? NULL : got);
      if (rc != STRAND_SUCCESS)
        return soak_error("test(%s) returned %d", k < g ? "isend" : "grouped irecv", (int)rc), -1;
      if (done) *req = NULL;
      else left = true;
    }
    if (left && pt_now_s() - t0 > SOAK_WAIT_S)
      return soak_error("isend or grouped irecv did not complete within %.0f s", SOAK_WAIT_S), -1;
  }
  for (int k = 0; k < g; k++) {
    if (got[k] != (int)sizes[k])
      return soak_error("grouped irecv: buffer %d of %d reports %d bytes, %zu were sent", k, g, got[k], sizes[k]), -1;
    long bad = pt_verify(rdata[k], sizes[k], seed + (unsigned)k);
    if (bad >= 0) return soak_error("grouped irecv: buffer %d of %d (%zu bytes) wrong at byte %ld", k, g, sizes[k], bad), -1;
  }
  account(bytes, (unsigned long long)g);
  return 0;
}

static int net_epoch(void *ctx, int max_group, unsigned epoch) {
  pt_net_t pn = PT_NET(N);
  pair_t pairs[SOAK_MAX_PAIRS];
  int np = 1 + (int)(rnd() % SOAK_MAX_PAIRS), opened = 0, rc = 0;
  size_t span = (size_t)SOAK_MAX_PAIRS * SOAK_MAX_GROUP * SOAK_MAX_MSG;
  memset(pairs, 0, sizeof pairs);
  for (; opened < np && rc == 0; opened++) {
    pair_t *pp = &pairs[opened];
    if (pt_connect_pair(&pn, ctx, 0, &pp->send, &pp->recv, NULL, SOAK_WAIT_S)) {
      soak_error("connecting pair %d of epoch %u failed", opened, epoch);
      rc = -1;
      break;
    }
    if (N->regMr(pp->send, g_sbuf, span, STRAND_PTR_HOST, &pp->smh) != STRAND_SUCCESS ||
        N->regMr(pp->recv, g_rbuf, span, STRAND_PTR_HOST, &pp->rmh) != STRAND_SUCCESS) {
      soak_error("regMr of %zu bytes failed", span);
      rc = -1;
    }
  }
  pthread_mutex_lock(&g_lock);
  g_comms += (unsigned long long)opened * 2;
  pthread_mutex_unlock(&g_lock);
  int rounds = 10 + (int)(rnd() % 30);
  for (int r = 0; r < rounds && rc == 0; r++)
    for (int p = 0; p < np && rc == 0; p++)
      rc = net_round(&pairs[p], p, 1 + (int)(rnd() % (unsigned)max_group), epoch * 7919u + (unsigned)r * 31u + (unsigned)p);
  for (int p = 0; p < opened; p++) {
    pair_t *pp = &pairs[p];
    if (pp->smh && N->deregMr(pp->send, pp->smh) != STRAND_SUCCESS) soak_error("deregMr (send comm) failed");
    if (pp->rmh && N->deregMr(pp->recv, pp->rmh) != STRAND_SUCCESS) soak_error("deregMr (recv comm) failed");
    if (pp->send && N->closeSend(pp->send) != STRAND_SUCCESS) soak_error("closeSend failed");
    if (pp->recv && N->closeRecv(pp->recv) != STRAND_SUCCESS) soak_error("closeRecv failed");
  }
  return rc;
}

/* ---- collnet mode ---- */

static const strand_collnet_v12_t *C;
static pthread_barrier_t g_bar;
static char g_handles[SOAK_MAX_RANKS][STRAND_NET_HANDLE_MAXSIZE];
static volatile int g_stop; /* set by rank 0 between epochs when time is up or a rank failed */

static int val(int rank, size_t i, unsigned salt) { return (int)((rank * 7 + i * 13 + salt * 5) % 9) - 4; }

static int cn_wait(void *req, const char *what, int rank) {
  double t0 = pt_now_s();
  for (;;) {
    int done = 0, size = -1;
    strand_result_t rc = C->test(req, &done, &size);
    if (rc != STRAND_SUCCESS) return soak_error("rank %d: test(%s) returned %d", rank, what, (int)rc), -1;
    if (done) return 0;
    if (pt_now_s() - t0 > SOAK_WAIT_S) return soak_error("rank %d: %s did not complete within %.0f s", rank, what, SOAK_WAIT_S), -1;
  }
}

static int cn_allreduce(void *cc, int rank, int n, char *send, char *recv, void *smh, void *rmh, unsigned salt, uint32_t pick) {
  static const size_t counts[] = {1, 1000, 65543, 262144};
  size_t count = counts[pick % 4];
  bool as_float = (pick >> 2) & 1;
  strand_datatype_t t = as_float ? STRAND_FLOAT32 : STRAND_INT32;
  strand_redop_t op = as_float ? STRAND_SUM : STRAND_MAX;
  for (size_t i = 0; i < count; i++) {
    if (as_float)
      ((float *)send)[i] = (float)val(rank, i, salt);
    else
      ((int32_t *)send)[i] = val(rank, i, salt);
  }
  void *req = NULL;
  double t0 = pt_now_s();
  while (!req) {
    strand_result_t rc = C->iallreduce(cc, send, recv, count, t, op, smh, rmh, &req);
    if (rc != STRAND_SUCCESS) return soak_error("rank %d: iallreduce(%zu) returned %d", rank, count, (int)rc), -1;
    if (!req && pt_now_s() - t0 > SOAK_WAIT_S) return soak_error("rank %d: iallreduce never accepted", rank), -1;
  }
  if (cn_wait(req, "iallreduce", rank)) return -1;
  for (size_t i = 0; i < count; i++) {
    int want = val(0, i, salt);
    for (int r = 1; r < n; r++) want = as_float ? want + val(r, i, salt) : (val(r, i, salt) > want ? val(r, i, salt) : want);
    bool ok = as_float ? ((float *)recv)[i] == (float)want : ((int32_t *)recv)[i] == want;
    if (!ok) return soak_error("rank %d: iallreduce(%zu, %s) wrong at element %zu", rank, count, as_float ? "float32 sum" : "int32 max", i), -1;
  }
  account(count * 4, 1);
  return 0;
}

static int cn_allgather(void *cc, int rank, int n, char *send, char *recv, void *smh, void *rmh, unsigned salt) {
  size_t bpr = 4096 + (size_t)(salt % 7) * 10007, total = bpr * (size_t)n;
  pt_fill(send, bpr, salt * 131u + (unsigned)rank);
  strand_sge_v12_t sge = {rmh, recv, total};
  void *req = NULL;
  double t0 = pt_now_s();
  while (!req) {
    strand_result_t rc = C->iallgather(cc, send, 1, &sge, bpr, 0, total, smh, &req);
    if (rc != STRAND_SUCCESS) return soak_error("rank %d: iallgather returned %d", rank, (int)rc), -1;
    if (!req && pt_now_s() - t0 > SOAK_WAIT_S) return soak_error("rank %d: iallgather never accepted", rank), -1;
  }
  if (cn_wait(req, "iallgather", rank)) return -1;
  for (int r = 0; r < n; r++)
    if (pt_verify(recv + (size_t)r * bpr, bpr, salt * 131u + (unsigned)r) >= 0)
      return soak_error("rank %d: iallgather: rank %d's block is wrong", rank, r), -1;
  account(total, 1);
  return 0;
}

/* One rank: epochs until rank 0 says stop. Every rank draws the same sequence (same seed). */
static void *cn_rank(void *arg) {
  int rank = (int)(intptr_t)arg, n = opt.ranks;
  size_t bytes = (size_t)2 << 20;
  char *send = malloc(bytes), *recv = malloc(bytes);
  uint64_t rng = 0x2545F4914F6CDD1Dull;
  for (unsigned epoch = 0;; epoch++) {
    pthread_barrier_wait(&g_bar);
    if (g_stop) break;
    void *ctx = NULL, *lc = NULL, *cc = NULL, *smh = NULL, *rmh = NULL;
    int failed = 0;
    if (C->init(&ctx, 0x50414bull + epoch, NULL) != STRAND_SUCCESS) failed = (soak_error("rank %d: CollNet init failed", rank), 1);
    char h[STRAND_NET_HANDLE_MAXSIZE] = {0};
    if (!failed && (C->listen(ctx, 0, h, &lc) != STRAND_SUCCESS || !lc))
      failed = (soak_error("rank %d: CollNet listen failed", rank), 1);
    memcpy(g_handles[rank], h, sizeof h);
    pthread_barrier_wait(&g_bar);
    void *hp[SOAK_MAX_RANKS];
    for (int i = 0; i < n; i++) hp[i] = g_handles[i];
    if (!failed && (C->connect(hp, n, rank, lc, &cc) != STRAND_SUCCESS || !cc))
      failed = (soak_error("rank %d: CollNet connect of %d ranks failed", rank, n), 1);
    if (lc) C->closeListen(lc);
    if (!failed && (C->regMr(cc, send, bytes, STRAND_PTR_HOST, &smh) != STRAND_SUCCESS ||
                    C->regMr(cc, recv, bytes, STRAND_PTR_HOST, &rmh) != STRAND_SUCCESS))
      failed = (soak_error("rank %d: CollNet regMr failed", rank), 1);
    if (rank == 0 && !failed) {
      pthread_mutex_lock(&g_lock);
      g_comms++;
      pthread_mutex_unlock(&g_lock);
    }
    for (int k = 0; k < 20 && !failed; k++) {
      rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
      uint32_t pick = (uint32_t)(rng >> 20);
      unsigned salt = epoch * 64u + (unsigned)k;
      if (C->iallgather && (pick & 8))
        failed = cn_allgather(cc, rank, n, send, recv, smh, rmh, salt) != 0;
      else
        failed = cn_allreduce(cc, rank, n, send, recv, smh, rmh, salt, pick) != 0;
    }
    if (smh) C->deregMr(cc, smh);
    if (rmh) C->deregMr(cc, rmh);
    /* a rank that failed stops taking part: the others' next collective would wait for it */
    pthread_barrier_wait(&g_bar);
    if (cc && C->closeColl(cc) != STRAND_SUCCESS) soak_error("rank %d: closeColl failed", rank);
    if (ctx && C->finalize(ctx) != STRAND_SUCCESS) soak_error("rank %d: CollNet finalize failed", rank);
    pthread_barrier_wait(&g_bar); /* torn down: the main thread samples now */
  }
  free(send);
  free(recv);
  return NULL;
}

/* ---- the run ---- */

static void progress(double t, const sample_t *s) {
  pthread_mutex_lock(&g_lock);
  printf("soak[%s] %5.0fs/%.0fs epochs %llu comms %llu msgs %llu moved %.2f GiB | rss %.1f MiB fds %d threads %ld "
         "errors %u\n", opt.name, t, opt.seconds, g_epochs, g_comms, g_msgs, (double)g_bytes / (1 << 30),
         (double)s->rss_kib / 1024, s->fds, s->threads, g_errors);
  pthread_mutex_unlock(&g_lock);
  fflush(stdout);
}

static void usage(void) {
  fprintf(stderr, "usage: soak-driver --plugin SO [--mode net|collnet] [--seconds N] [--name LABEL] [--ranks N]\n"
                  "                   [--interval S] [--max-rss-growth-mib M] [--expect-fail REASON]\n");
}

int main(int argc, char **argv) {
  static const struct option lo[] = {{"plugin", required_argument, 0, 'p'}, {"mode", required_argument, 0, 'm'},
                                     {"seconds", required_argument, 0, 's'}, {"name", required_argument, 0, 'n'},
                                     {"ranks", required_argument, 0, 'r'}, {"interval", required_argument, 0, 'i'},
                                     {"max-rss-growth-mib", required_argument, 0, 'g'},
                                     {"expect-fail", required_argument, 0, 'x'}, {0, 0, 0, 0}};
  for (int c; (c = getopt_long(argc, argv, "", lo, NULL)) != -1;) {
    switch (c) {
    case 'p': opt.plugin = optarg; break;
    case 'm': opt.mode = optarg; break;
    case 's': opt.seconds = atof(optarg); break;
    case 'n': opt.name = optarg; break;
    case 'r': opt.ranks = atoi(optarg); break;
    case 'i': opt.interval = atof(optarg); break;
    case 'g': opt.max_growth_mib = atof(optarg); break;
    case 'x': opt.expect_fail = optarg; break;
    default: usage(); return 2;
    }
  }
  bool collnet = !strcmp(opt.mode, "collnet");
  if (!opt.plugin || (!collnet && strcmp(opt.mode, "net")) || opt.seconds <= 0 || opt.ranks < 2 ||
      opt.ranks > SOAK_MAX_RANKS || opt.interval <= 0) {
    usage();
    return 2;
  }
  if (!opt.name) opt.name = opt.plugin;
  pthread_t th[SOAK_MAX_RANKS];
  void *ctx = NULL;
  int max_group = 1;
  if (collnet) {
    C = pt_load_table(opt.plugin, "ncclCollNetPlugin_v12");
    if (!C) return 2;
    int nd = 0;
    /* NCCL inits before asking for devices; this context stays for the run, the ranks add theirs */
    if (C->init(&ctx, 0x534f414bull, NULL) != STRAND_SUCCESS || C->devices(&nd) != STRAND_SUCCESS || nd < 1) {
      fprintf(stderr, "soak[%s]: CollNet init failed or it has no device (NCCL_COLLNET_ENABLE=1 set?)\n", opt.name);
      return 2;
    }
    pthread_barrier_init(&g_bar, NULL, (unsigned)opt.ranks + 1); /* the ranks and this thread */
  } else {
    N = pt_load_table(opt.plugin, "ncclNetPlugin_v12");
    if (!N) return 2;
    strand_props_v12_t p;
    int nd = 0;
    if (N->init(&ctx, 0x534f414bull, NULL, NULL, NULL) != STRAND_SUCCESS || N->devices(&nd) != STRAND_SUCCESS ||
        nd < 1 || N->getProperties(0, &p) != STRAND_SUCCESS) {
      fprintf(stderr, "soak[%s]: init / devices / getProperties failed (%d devices)\n", opt.name, nd);
      return 2;
    }
    max_group = p.maxRecvs < SOAK_MAX_GROUP ? p.maxRecvs : SOAK_MAX_GROUP;
    if (max_group < 1) max_group = 1;
    size_t span = (size_t)SOAK_MAX_PAIRS * SOAK_MAX_GROUP * SOAK_MAX_MSG;
    g_sbuf = malloc(span);
    g_rbuf = malloc(span);
    if (!g_sbuf || !g_rbuf) return 2;
    memset(g_sbuf, 0, span); /* resident from the start: the buffers are not the growth we look for */
    memset(g_rbuf, 0, span);
  }
  printf("soak[%s] %s mode, %.0f s, plugin %s%s\n", opt.name, opt.mode, opt.seconds, opt.plugin,
         collnet ? "" : (max_group > 1 ? ", grouped receives" : ", maxRecvs 1"));
  double warmup = opt.seconds * 0.1;
  if (warmup < 1) warmup = 1;
  if (warmup > 30) warmup = 30;
  double t0 = pt_now_s(), next_progress = opt.interval;
  sample_t base = {-1, -1, -1}, end = base;
  if (collnet)
    for (int r = 0; r < opt.ranks; r++) pthread_create(&th[r], NULL, cn_rank, (void *)(intptr_t)r);
  for (unsigned epoch = 0;; epoch++) {
    double t = pt_now_s() - t0;
    /* an epoch boundary: nothing is open */
    if (base.rss_kib < 0 && t >= warmup) base = take_sample();
    if (t >= next_progress) {
      sample_t s = take_sample();
      progress(t, &s);
      next_progress += opt.interval;
    }
    if (t >= opt.seconds || g_errors) {
      if (base.rss_kib < 0) base = take_sample(); /* a run shorter than its warm-up: no growth to see */
      end = settled_sample(&base);
      break;
    }
    int rc;
    if (collnet) {
      pthread_barrier_wait(&g_bar); /* the ranks start the epoch */
      pthread_barrier_wait(&g_bar); /* listen done */
      pthread_barrier_wait(&g_bar); /* collectives done */
      pthread_barrier_wait(&g_bar); /* comms closed, contexts finalized */
      rc = 0;
    } else {
      rc = net_epoch(ctx, max_group, epoch);
    }
    pthread_mutex_lock(&g_lock);
    g_epochs++;
    pthread_mutex_unlock(&g_lock);
    if (rc) {
      if (base.rss_kib < 0) base = take_sample();
      end = settled_sample(&base);
      break;
    }
  }
  if (collnet) {
    g_stop = 1;
    pthread_barrier_wait(&g_bar);
    for (int r = 0; r < opt.ranks; r++) pthread_join(th[r], NULL);
    pthread_barrier_destroy(&g_bar);
  }
  double secs = pt_now_s() - t0;
  progress(secs, &end);
  long growth = end.rss_kib - base.rss_kib, bound = (long)(opt.max_growth_mib * 1024);
  if (bound < base.rss_kib / 10) bound = base.rss_kib / 10;
  const char *why = g_errors ? "errors" : end.fds > base.fds ? "descriptors grew" : end.threads > base.threads ? "threads grew"
                    : growth > bound ? "RSS grew past the bound" : NULL;
  printf("SOAK-RESULT name=%s mode=%s seconds=%.0f epochs=%llu comms=%llu msgs=%llu bytes=%llu rss_start_kib=%ld "
         "rss_end_kib=%ld rss_growth_kib=%ld rss_bound_kib=%ld fds_start=%d fds_end=%d threads_start=%ld "
         "threads_end=%ld errors=%u verdict=%s\n", opt.name, opt.mode, secs, g_epochs, g_comms, g_msgs, g_bytes,
         base.rss_kib, end.rss_kib, growth, bound, base.fds, end.fds, base.threads, end.threads, g_errors,
         why ? "FAIL" : "PASS");
  if (why) printf("soak[%s] FAIL: %s%s%s\n", opt.name, why, g_errors ? ": " : "", g_errors ? g_first_error : "");
  if (!collnet && N->finalize) N->finalize(ctx);
  if (collnet && C->finalize) C->finalize(ctx);
  free(g_sbuf);
  free(g_rbuf);
  if (opt.expect_fail) {
    bool as_expected = why && strstr(why, opt.expect_fail);
    printf("soak[%s] %s: expected to fail with \"%s\"\n", opt.name, as_expected ? "ok" : "NOT OK", opt.expect_fail);
    return as_expected ? 0 : 1;
  }
  return why ? 1 : 0;
}
