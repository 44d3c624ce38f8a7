/* Rails test of libnccl-net-strand-ofi.so (STRAND_OFI_RAILS): two processes, a receiver (this
 * process) and a sender (a forked child), as two NCCL ranks would be.
 *   - K comms between them land on the rails round robin: the sender's "connected ... rail k" and
 *     the receiver's "accepted ... rail k" INFO lines (caught by the logger handed to init) must
 *     agree pair by pair and use every rail both ends have (all rail 0 with one rail);
 *   - data sent on every comm at once arrives intact and in order on each;
 *   - each open rail has its progress thread ("strand-ofi-rN") while comms exist, none with one
 *     rail, and none is left after finalize;
 *   - a handle of the older single-address layout, garbage, and rail counts that cannot be are
 *     refused by connect with an error (and a clear warning for the older layout), not misread.
 * STRAND_OFI_RAIL_THREADS=0 (rails without threads: none may run) and STRAND_OFI_RAIL_QUIET_US
 * (threads that keep off a rail a caller uses) must move the same data intact.
 * STRAND_OFI_RAIL_BLOCK=B (both processes): the rails change every B comms instead of every comm.
 * STRAND_OFI_RAILS sets both processes' rails; OFI_RAILS_SENDER, when set, the sender's alone (rail
 * counts that differ: the connection uses the rails both have).
 * Usage: ofi_rails PLUGIN.so   (FI_PROVIDER selects the provider). Exit 0 = all passed. */
#include <dirent.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "plugin_test.h"
#include "strand/abi/abi.h"

#define MSGS 8                   /* messages per comm, all in flight at once */
#define MAX_MSG (256 * 1024)     /* largest message */
#define MAX_COMMS 16
static const double BOUND_S = 20.0;

static strand_net_v12_t *net;
static pt_net_t ptn;
static void *ctx;

/* ---- what the plugin logs: the rail of each connect / accept, and warnings ---- */
static pthread_mutex_t log_lock = PTHREAD_MUTEX_INITIALIZER;
static int conn_rails[MAX_COMMS], nconn, acc_rails[MAX_COMMS], nacc;
static bool saw_old_handle_warning;

static void record_rail(const char *line, const char *what, int *rails, int *n) {
  const char *p = strstr(line, what);
  if (!p) return;
  p = strstr(p, " rail ");
  if (p && *n < MAX_COMMS) rails[(*n)++] = atoi(p + 6);
}

static void logger(strand_log_level_t level, unsigned long flags, const char *file, int line,
                   const char *fmt, ...) {
  (void)flags, (void)file, (void)line;
  char buf[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  pthread_mutex_lock(&log_lock);
  record_rail(buf, "connected to ", conn_rails, &nconn);
  record_rail(buf, "accepted ", acc_rails, &nacc);
  if (strstr(buf, "older strand-ofi")) saw_old_handle_warning = true;
  pthread_mutex_unlock(&log_lock);
  if (level <= STRAND_LOG_WARN || strstr(buf, " rail ")) fprintf(stderr, "[%d] %s\n", getpid(), buf);
}

static int last_rail(const int *rails, const int *n) {
  pthread_mutex_lock(&log_lock);
  int r = *n > 0 ? rails[*n - 1] : -1;
  pthread_mutex_unlock(&log_lock);
  return r;
}

/* STRAND_OFI_RAIL_THREADS=0: the rails run without progress threads. */
static bool rail_threads_on(void) {
  const char *v = getenv("STRAND_OFI_RAIL_THREADS");
  return !v || strcmp(v, "0") != 0;
}

/* Threads of this process whose name starts with "strand-ofi-r". */
static int rail_threads(void) {
  DIR *d = opendir("/proc/self/task");
  if (!d) return -1;
  int n = 0;
  struct dirent *e;
  while ((e = readdir(d)) != NULL) {
    if (e->d_name[0] == '.') continue;
    char path[300], name[64] = "";
    snprintf(path, sizeof path, "/proc/self/task/%s/comm", e->d_name);
    FILE *f = fopen(path, "r");
    if (!f) continue;
    if (fgets(name, sizeof name, f) && strncmp(name, "strand-ofi-r", 12) == 0) n++;
    fclose(f);
  }
  closedir(d);
  return n;
}

static int env_int(const char *name, int def) {
  const char *v = getenv(name);
  return v && *v ? atoi(v) : def;
}

/* Message j of comm i: its size and pattern seed. Sizes differ between neighbours so that a
 * message landing in the wrong receive (order) shows in the size as well as in the bytes. */
static size_t msg_size(int i, int j) { return (size_t)(((i * 7 + j * 13) % 8) + 1) * 32768 - (size_t)j * 3; }
static unsigned msg_seed(int i, int j) { return (unsigned)(i * 1000 + j + 1); }

static int start(const char *path) {
  net = pt_load_table(path, "ncclNetPlugin_v12");
  if (!net) return -1;
  ptn = PT_NET(net);
  PT_CHECK(net->init(&ctx, 0x7a11, NULL, logger, NULL) == STRAND_SUCCESS, "init");
  int n = 0;
  PT_CHECK(net->devices(&n) == STRAND_SUCCESS && n >= 1, "devices");
  return 0;
}

/* Handles that connect must refuse, built from a real one; no comm, an error, no crash. */
static int bad_handles(const char *good) {
  char h[STRAND_NET_HANDLE_MAXSIZE];
  for (int variant = 0; variant < 4; variant++) {
    memcpy(h, good, sizeof h);
    uint32_t magic = 0x53544f48u; /* "STOH": the single-address layout */
    if (variant == 0) memcpy(h, &magic, sizeof magic);
    if (variant == 1) memset(h, 0xA5, sizeof h);
    if (variant == 2) h[16] = 0;          /* no rail at all */
    if (variant == 3) h[16] = (char)200;  /* more addresses than the handle holds */
    void *s = NULL;
    strand_result_t r = net->connect(ctx, 0, h, &s, NULL);
    PT_CHECK(r != STRAND_SUCCESS && s == NULL, "bad handle %d: connect gave %d, comm %p", variant,
             (int)r, s);
    if (variant == 0)
      PT_CHECK(saw_old_handle_warning, "an older-layout handle is refused without saying so");
  }
  printf("ok bad-handles\n");
  return 0;
}

static int sender(const char *path, int in_fd, int out_fd, int k, int mine, int both) {
  if (start(path)) return -1;
  static char handles[MAX_COMMS][STRAND_NET_HANDLE_MAXSIZE];
  for (int i = 0; i < k; i++)
    PT_CHECK(read(in_fd, handles[i], sizeof handles[i]) == (ssize_t)sizeof handles[i], "handle %d", i);
  if (bad_handles(handles[0])) return -1;
  void *s[MAX_COMMS] = {0};
  int rails[MAX_COMMS];
  for (int i = 0; i < k; i++) {
    double t0 = pt_now_s();
    while (!s[i]) {
      PT_CHECK(net->connect(ctx, 0, handles[i], &s[i], NULL) == STRAND_SUCCESS, "connect %d", i);
      PT_CHECK(pt_now_s() - t0 < BOUND_S, "connect %d not done", i);
    }
    rails[i] = last_rail(conn_rails, &nconn);
  }
  PT_CHECK(write(out_fd, rails, sizeof(int) * (size_t)k) == (ssize_t)(sizeof(int) * (size_t)k),
           "rails to the receiver");
  int threads = rail_threads();
  static unsigned char buf[MAX_COMMS][MSGS][MAX_MSG];
  void *mh[MAX_COMMS], *req[MAX_COMMS][MSGS] = {{0}};
  for (int i = 0; i < k; i++) {
    PT_CHECK(net->regMr(s[i], buf[i], sizeof buf[i], STRAND_PTR_HOST, &mh[i]) == 0, "regMr %d", i);
    for (int j = 0; j < MSGS; j++) pt_fill(buf[i][j], msg_size(i, j), msg_seed(i, j));
  }
  /* Interleaved over the comms, so every rail carries data at once. */
  double t0 = pt_now_s();
  for (int j = 0; j < MSGS; j++)
    for (int i = 0; i < k; i++)
      while (!req[i][j]) {
        PT_CHECK(net->isend(s[i], buf[i][j], msg_size(i, j), 5, mh[i], NULL, &req[i][j]) == 0,
                 "isend %d/%d", i, j);
        PT_CHECK(pt_now_s() - t0 < BOUND_S, "isend %d/%d stays NULL", i, j);
      }
  for (int left = k * MSGS; left > 0;) {
    for (int i = 0; i < k; i++)
      for (int j = 0; j < MSGS; j++) {
        if (!req[i][j]) continue;
        int done = 0;
        PT_CHECK(net->test(req[i][j], &done, NULL) == 0, "send test %d/%d", i, j);
        if (done) req[i][j] = NULL, left--;
      }
    PT_CHECK(pt_now_s() - t0 < BOUND_S, "%d sends not done", left);
  }
  char ok;
  PT_CHECK(read(in_fd, &ok, 1) == 1, "receiver done");
  for (int i = 0; i < k; i++) {
    net->deregMr(s[i], mh[i]);
    PT_CHECK(net->closeSend(s[i]) == 0, "closeSend %d", i);
  }
  PT_CHECK(net->finalize(ctx) == 0, "finalize");
  int after = rail_threads();
  PT_CHECK(threads == (mine > 1 && rail_threads_on() ? both : 0),
           "sender: %d rail thread(s) with %d rail(s) in use", threads, both);
  PT_CHECK(after == 0, "sender: %d rail thread(s) left after finalize", after);
  printf("ok sender (%d comms, %d rail thread(s))\n", k, threads);
  return 0;
}

/* STRAND_OFI_RAIL_BLOCK: consecutive comms per rail before the next (1 = plain round robin). */
static int rail_block = 1;

static int receiver(int to_child, int from_child, int k, int nrails, int both) {
  static char handles[MAX_COMMS][STRAND_NET_HANDLE_MAXSIZE];
  void *l[MAX_COMMS] = {0}, *r[MAX_COMMS] = {0};
  for (int i = 0; i < k; i++)
    PT_CHECK(net->listen(ctx, 0, handles[i], &l[i]) == STRAND_SUCCESS, "listen %d", i);
  for (int i = 0; i < k; i++)
    PT_CHECK(write(to_child, handles[i], sizeof handles[i]) == (ssize_t)sizeof handles[i], "handle");
  int acc[MAX_COMMS], conn[MAX_COMMS];
  for (int i = 0; i < k; i++) {
    double t0 = pt_now_s();
    while (!r[i]) {
      PT_CHECK(net->accept(l[i], &r[i], NULL) == STRAND_SUCCESS, "accept %d", i);
      PT_CHECK(pt_now_s() - t0 < BOUND_S, "accept %d not done", i);
    }
    acc[i] = last_rail(acc_rails, &nacc);
  }
  PT_CHECK(read(from_child, conn, sizeof(int) * (size_t)k) == (ssize_t)(sizeof(int) * (size_t)k),
           "the sender's rails");
  int used = 0;
  for (int i = 0; i < k; i++) {
    PT_CHECK(conn[i] == acc[i], "comm %d: sender on rail %d, receiver on rail %d", i, conn[i], acc[i]);
    int want = (i / rail_block) % both;
    PT_CHECK(conn[i] == want, "comm %d on rail %d, round robin in blocks of %d over %d rail(s) "
             "says %d", i, conn[i], rail_block, both, want);
    used |= 1 << conn[i];
  }
  PT_CHECK(used == (1 << both) - 1, "rails used: mask 0x%x, want all %d", used, both);
  printf("ok rails (%d comms over %d rail(s):", k, both);
  for (int i = 0; i < k; i++) printf(" %d", conn[i]);
  printf(")\n");
  int threads = rail_threads();
  PT_CHECK(threads == (nrails > 1 && rail_threads_on() ? nrails : 0),
           "receiver: %d rail thread(s) with %d rails", threads, nrails);

  static unsigned char buf[MAX_COMMS][MSGS][MAX_MSG];
  void *mh[MAX_COMMS], *req[MAX_COMMS][MSGS] = {{0}};
  int got[MAX_COMMS][MSGS];
  double t0 = pt_now_s();
  for (int i = 0; i < k; i++) {
    PT_CHECK(net->regMr(r[i], buf[i], sizeof buf[i], STRAND_PTR_HOST, &mh[i]) == 0, "regMr %d", i);
    memset(buf[i], 0xEE, sizeof buf[i]);
    for (int j = 0; j < MSGS; j++) {
      void *b[1] = {buf[i][j]};
      size_t sz[1] = {MAX_MSG};
      int tag[1] = {5};
      while (!req[i][j]) {
        PT_CHECK(net->irecv(r[i], 1, b, sz, tag, &mh[i], NULL, &req[i][j]) == 0, "irecv %d/%d", i, j);
        PT_CHECK(pt_now_s() - t0 < BOUND_S, "irecv %d/%d stays NULL", i, j);
      }
    }
  }
  for (int left = k * MSGS; left > 0;) {
    for (int i = 0; i < k; i++)
      for (int j = 0; j < MSGS; j++) {
        if (!req[i][j]) continue;
        int done = 0, sizes[1] = {0};
        PT_CHECK(net->test(req[i][j], &done, sizes) == 0, "recv test %d/%d", i, j);
        if (done) req[i][j] = NULL, got[i][j] = sizes[0], left--;
      }
    PT_CHECK(pt_now_s() - t0 < BOUND_S, "%d receives not done", left);
  }
  for (int i = 0; i < k; i++)
    for (int j = 0; j < MSGS; j++) {
      PT_CHECK((size_t)got[i][j] == msg_size(i, j), "comm %d message %d: %d bytes, sent %zu", i, j,
               got[i][j], msg_size(i, j));
      long bad = pt_verify(buf[i][j], msg_size(i, j), msg_seed(i, j));
      PT_CHECK(bad < 0, "comm %d message %d: byte %ld differs (corrupt or out of order)", i, j, bad);
    }
  printf("ok data (%d comms x %d messages, intact and in order)\n", k, MSGS);
  char ok = 1;
  PT_CHECK(write(to_child, &ok, 1) == 1, "done to the sender");
  for (int i = 0; i < k; i++) {
    net->deregMr(r[i], mh[i]);
    PT_CHECK(net->closeRecv(r[i]) == 0, "closeRecv %d", i);
    PT_CHECK(net->closeListen(l[i]) == 0, "closeListen %d", i);
  }
  return 0;
}

static int finish(void) {
  PT_CHECK(net->finalize(ctx) == 0, "finalize");
  int after = rail_threads();
  PT_CHECK(after == 0, "receiver: %d rail thread(s) left after finalize", after);
  return 0;
}

int main(int argc, char **argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: %s libnccl-net-strand-ofi.so\n", argv[0]);
    return 2;
  }
  setvbuf(stdout, NULL, _IONBF, 0);
  /* The rail of each connection is read from the plugin's INFO lines. */
  setenv("NCCL_DEBUG", "INFO", 1);
  setenv("NCCL_DEBUG_SUBSYS", "NET", 1);
  int nrails = env_int("STRAND_OFI_RAILS", 1);
  int snd_rails = env_int("OFI_RAILS_SENDER", nrails);
  int both = nrails < snd_rails ? nrails : snd_rails;
  rail_block = env_int("STRAND_OFI_RAIL_BLOCK", 1);
  if (rail_block < 1) rail_block = 1;
  int k = 2 * rail_block * (nrails > snd_rails ? nrails : snd_rails);
  if (k < 3) k = 3;
  int to_child[2], from_child[2];
  if (pipe(to_child) || pipe(from_child)) return 2;
  pid_t pid = fork();
  if (pid == 0) {
    close(to_child[1]);
    close(from_child[0]);
    char v[16];
    snprintf(v, sizeof v, "%d", snd_rails);
    setenv("STRAND_OFI_RAILS", v, 1);
    int rc = sender(argv[1], to_child[0], from_child[1], k, snd_rails, both);
    _exit(rc || pt_failures ? 1 : 0);
  }
  close(to_child[0]);
  close(from_child[1]);
  if (start(argv[1]) == 0 && receiver(to_child[1], from_child[0], k, nrails, both) == 0)
    finish();
  close(to_child[1]);
  close(from_child[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    printf("FAIL the sender process (status 0x%x)\n", status);
    pt_failures++;
  }
  printf("%s: %d failure(s)\n", pt_failures ? "FAILED" : "PASSED", pt_failures);
  return pt_failures ? 1 : 0;
}
