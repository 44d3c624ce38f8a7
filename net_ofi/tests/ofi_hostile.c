/* Hostile-traffic and misuse tests of libnccl-net-strand-ofi.so (issue 14): strangers on the
 * provider's listening port, a double deregMr, memory per connect/close pair, and the two halves
 * of the link-flap test (run between two network namespaces by ofi_flap.sh).
 *
 * Usage: ofi_hostile PLUGIN.so MODE [args]   (FI_PROVIDER selects the provider)
 *   dereg-twice       deregMr twice on one handle, and on a pointer never handed out: a clear
 *                     error, no crash; registrations still work afterwards
 *   strangers         60 TCP strangers (silent / random bytes / connect-and-leave) on the address
 *                     in the listen handle; a legitimate connect + accept + transfer must succeed
 *                     within the normal bound while they stay, and descriptors return near the
 *                     baseline after they leave. OFI_HOSTILE_KINDS picks the kinds (cycled over
 *                     the strangers), OFI_HOSTILE_STRANGERS their number; OFI_HOSTILE_IDLE=1 plays
 *                     issue 23's order: a fresh endpoint with no connection yet, the strangers
 *                     all arriving while nobody calls into the plugin, then the legitimate peer
 *   memory            1000 connect/close pairs; RSS growth per pair must stay under a bound
 *   rejects           peer processes (each a new endpoint address) connect with a stale nonce and
 *                     are rejected: every such address must leave the AV again once its REJECT is
 *                     done (no growth with the number of strangers), and a later legitimate connect
 *                     from a new peer still works
 *   collnet-death     a 2-rank CollNet group (the plugin's ncclCollNetPlugin_v12: collnet_stub over
 *                     strand-ofi) all-reduces once, the member process exits without cleanup, and
 *                     the survivor's next all-reduce must fail within STRAND_OFI_PEER_TIMEOUT_S
 *                     (+1 s) — the wait before the liveness probe included
 *   memory-cycle      the cycle of issue 23: listen, a peer process connects and sends one message,
 *                     accept + irecv, closeRecv / closeSend / closeListen; OFI_HOSTILE_CYCLES times
 *                     (1000). RSS growth per cycle after a 10% warm-up must stay under the `memory`
 *                     bound; the one-time growth of the first connection is printed apart
 *   flap-recv HANDLE_FILE STOP_FILE / flap-send HANDLE_FILE STOP_FILE
 *                     the receiver writes its handle, then both move verified 64 KiB messages until
 *                     STOP_FILE exists. Exit 0: everything arrived intact; 3: test() reported an
 *                     error (the code is printed); 1: anything else.
 * Exit 0 = passed. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>

#include "plugin_test.h"
#include "strand/abi/abi.h"

static strand_net_v12_t *net;
static pt_net_t ptn;
static void *ctx;
static const double BOUND_S = 20.0;

/* Plugin log lines (INFO included) that say an address left the AV because nothing used it. */
static int av_released;
static void logger(strand_log_level_t level, unsigned long flags, const char *file, int line,
                   const char *fmt, ...) {
  (void)level, (void)flags, (void)file, (void)line;
  char msg[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  if (strstr(msg, "released from the AV")) __atomic_add_fetch(&av_released, 1, __ATOMIC_RELAXED);
}

static int count_fds(void) {
  DIR *d = opendir("/proc/self/fd");
  if (!d) return -1;
  int n = 0;
  struct dirent *e;
  while ((e = readdir(d)) != NULL)
    if (e->d_name[0] != '.') n++;
  closedir(d);
  return n - 1; /* the directory's own descriptor */
}

static long rss_kib(void) {
  FILE *f = fopen("/proc/self/status", "r");
  if (!f) return -1;
  char line[256];
  long v = -1;
  while (fgets(line, sizeof line, f))
    if (sscanf(line, "VmRSS: %ld kB", &v) == 1) break;
  fclose(f);
  return v;
}

/* One verified message from s to r (both already connected). */
static int transfer(void *s, void *r, size_t size, unsigned seed, double bound) {
  unsigned char *sb = malloc(size), *rb = malloc(size);
  void *smh, *rmh;
  pt_fill(sb, size, seed);
  PT_CHECK(net->regMr(s, sb, size, STRAND_PTR_HOST, &smh) == 0, "regMr send");
  PT_CHECK(net->regMr(r, rb, size, STRAND_PTR_HOST, &rmh) == 0, "regMr recv");
  void *rq = NULL, *sq = NULL, *bufs[1] = {rb};
  size_t sizes[1] = {size};
  int tags[1] = {1};
  double t0 = pt_now_s();
  while (!rq) {
    PT_CHECK(net->irecv(r, 1, bufs, sizes, tags, &rmh, NULL, &rq) == 0, "irecv");
    PT_CHECK(pt_now_s() - t0 < bound, "irecv stays NULL");
  }
  while (!sq) {
    PT_CHECK(net->isend(s, sb, size, 1, smh, NULL, &sq) == 0, "isend");
    PT_CHECK(pt_now_s() - t0 < bound, "isend stays NULL");
  }
  int ds = 0, dr = 0, got[8] = {0};
  while (!ds || !dr) {
    if (!ds) PT_CHECK(net->test(sq, &ds, NULL) == 0, "send test");
    if (!dr) PT_CHECK(net->test(rq, &dr, got) == 0, "recv test");
    PT_CHECK(pt_now_s() - t0 < bound, "transfer not done within %.0f s", bound);
  }
  PT_CHECK((size_t)got[0] == size && pt_verify(rb, size, seed) < 0, "data corrupt");
  net->deregMr(s, smh);
  net->deregMr(r, rmh);
  free(sb);
  free(rb);
  return 0;
}

/* ---- a second process as the legitimate peer ----
 * `ofi_hostile PLUGIN peer IN_FD OUT_FD` reads commands from IN_FD:
 *   'c' + handle: connect (bounded), send one verified 100000-byte message (tag 1, seed 7), answer
 *                 1 byte (0 = ok) + the seconds it took (double), keep the comm
 *   'k' + handle: connect and close at once; answer 1 byte
 *   'x': close the kept comm;  'r': answer the RSS in KiB (long);  'q': finalize and exit. */
static int peer_in = -1, peer_out = -1, peer_pid = -1;

static int read_full(int fd, void *p, size_t n) {
  size_t o = 0;
  while (o < n) {
    ssize_t k = read(fd, (char *)p + o, n - o);
    if (k <= 0) return -1;
    o += (size_t)k;
  }
  return 0;
}

static int peer_main(int in, int out) {
  static unsigned char sb[100000];
  void *kept = NULL, *kept_mh = NULL;
  for (;;) {
    char cmd;
    if (read_full(in, &cmd, 1)) return 0;
    if (cmd == 'q') {
      if (kept) net->closeSend(kept);
      net->finalize(ctx);
      return 0;
    }
    if (cmd == 'r') {
      long v = rss_kib();
      if (write(out, &v, sizeof v) != (ssize_t)sizeof v) return 1;
      continue;
    }
    if (cmd == 'x') {
      if (kept_mh) net->deregMr(kept, kept_mh);
      if (kept) net->closeSend(kept);
      kept = kept_mh = NULL;
      continue;
    }
    char handle[STRAND_NET_HANDLE_MAXSIZE];
    if (read_full(in, handle, sizeof handle)) return 1;
    double t0 = pt_now_s();
    void *s = NULL;
    char ok = 1;
    while (!s && pt_now_s() - t0 < 10.0)
      if (net->connect(ctx, 0, handle, &s, NULL)) break;
    if (s && cmd == 'k') {
      ok = net->closeSend(s) == 0 ? 0 : 1;
    } else if (s) {
      void *mh = NULL, *q = NULL;
      pt_fill(sb, sizeof sb, 7);
      if (net->regMr(s, sb, sizeof sb, STRAND_PTR_HOST, &mh) == 0) {
        while (!q && pt_now_s() - t0 < 10.0)
          if (net->isend(s, sb, sizeof sb, 1, mh, NULL, &q)) break;
        if (q && pt_wait(&ptn, q, NULL, 10.0) == 0) ok = 0;
      }
      kept = s, kept_mh = mh;
    }
    double dt = pt_now_s() - t0;
    if (write(out, &ok, 1) != 1) return 1;
    if (cmd == 'c' && write(out, &dt, sizeof dt) != (ssize_t)sizeof dt) return 1;
  }
}

static int peer_start(const char *plugin) {
  int a[2], b[2];
  PT_CHECK(pipe(a) == 0 && pipe(b) == 0, "pipe");
  fflush(NULL);
  pid_t pid = fork();
  if (pid == 0) {
    char in[16], out[16];
    snprintf(in, sizeof in, "%d", a[0]);
    snprintf(out, sizeof out, "%d", b[1]);
    close(a[1]);
    close(b[0]);
    execl("/proc/self/exe", "ofi_hostile", plugin, "peer", in, out, (char *)NULL);
    _exit(127);
  }
  close(a[0]);
  close(b[1]);
  fcntl(a[1], F_SETFD, FD_CLOEXEC);
  fcntl(b[0], F_SETFD, FD_CLOEXEC);
  peer_in = a[1], peer_out = b[0], peer_pid = pid;
  return 0;
}

static void peer_stop(void) {
  char q = 'q';
  if (write(peer_in, &q, 1) != 1) { /* already gone */ }
  close(peer_in);
  close(peer_out);
  waitpid(peer_pid, NULL, 0);
}

/* Listen, have the peer connect (and for 'c' send one message), accept and check it. */
static int peer_pair(char cmd, void **recv_comm, double bound) {
  char handle[STRAND_NET_HANDLE_MAXSIZE];
  void *l = NULL, *r = NULL;
  PT_CHECK(net->listen(ctx, 0, handle, &l) == 0, "listen");
  PT_CHECK(write(peer_in, &cmd, 1) == 1 && write(peer_in, handle, sizeof handle) == (ssize_t)sizeof handle,
           "command to peer");
  double t0 = pt_now_s();
  while (!r && pt_now_s() - t0 < bound) PT_CHECK(net->accept(l, &r, NULL) == 0, "accept");
  PT_CHECK(r, "accept: no connection from the peer process within %.0f s", bound);
  int rc = 0;
  if (cmd == 'c') {
    static unsigned char rb[100000];
    void *mh = NULL, *q = NULL, *b[1] = {rb};
    size_t sz[1] = {sizeof rb};
    int t[1] = {1}, got[8] = {0};
    PT_CHECK(net->regMr(r, rb, sizeof rb, STRAND_PTR_HOST, &mh) == 0, "regMr");
    while (!q && pt_now_s() - t0 < bound) PT_CHECK(net->irecv(r, 1, b, sz, t, &mh, NULL, &q) == 0, "irecv");
    PT_CHECK(q, "irecv");
    rc = pt_wait(&ptn, q, got, bound);
    PT_CHECK(rc == 0 && got[0] == (int)sizeof rb && pt_verify(rb, sizeof rb, 7) < 0,
             "message from the peer process: result %d, %d bytes", rc, got[0]);
    net->deregMr(r, mh);
  }
  char ok = 1;
  PT_CHECK(read_full(peer_out, &ok, 1) == 0, "peer answer");
  double dt = 0;
  if (cmd == 'c') PT_CHECK(read_full(peer_out, &dt, sizeof dt) == 0, "peer answer");
  PT_CHECK(ok == 0, "the peer process's connect/send failed (%.1f s)", dt);
  net->closeListen(l);
  if (recv_comm)
    *recv_comm = r;
  else
    net->closeRecv(r);
  return 0;
}

static long peer_rss(void) {
  char c = 'r';
  long v = -1;
  if (write(peer_in, &c, 1) != 1 || read_full(peer_out, &v, sizeof v)) return -1;
  return v;
}

/* ---- double deregMr ---- */
static int test_dereg_twice(void) {
  void *s = NULL, *r = NULL;
  if (pt_connect_pair(&ptn, ctx, 0, &s, &r, NULL, BOUND_S)) return -1;
  static char buf[8192];
  void *mh = NULL;
  PT_CHECK(net->regMr(s, buf, sizeof buf, STRAND_PTR_HOST, &mh) == 0 && mh, "regMr");
  PT_CHECK(net->deregMr(s, mh) == STRAND_SUCCESS, "first deregMr");
  /* The handle is freed now: a second deregMr must be refused without reading it. */
  PT_CHECK(net->deregMr(s, mh) == STRAND_INVALID_ARGUMENT, "second deregMr of one handle");
  long junk[16];
  memset(junk, 0x41, sizeof junk);
  PT_CHECK(net->deregMr(s, junk) == STRAND_INVALID_ARGUMENT, "deregMr of a foreign pointer");
  PT_CHECK(net->deregMr(s, NULL) == STRAND_INVALID_ARGUMENT, "deregMr(NULL)");
  /* A shared (cached) registration: two handles of one range, each released once. */
  void *a = NULL, *b = NULL;
  PT_CHECK(net->regMr(s, buf, 100, STRAND_PTR_HOST, &a) == 0, "regMr a");
  PT_CHECK(net->regMr(r, buf + 200, 100, STRAND_PTR_HOST, &b) == 0, "regMr b");
  PT_CHECK(net->deregMr(s, a) == 0 && net->deregMr(r, b) == 0, "deregMr of both references");
  PT_CHECK(net->deregMr(r, b) == STRAND_INVALID_ARGUMENT, "third deregMr of a shared range");
  if (transfer(s, r, 4096, 5, BOUND_S)) return -1;
  net->closeSend(s);
  net->closeRecv(r);
  printf("ok dereg-twice\n");
  return 0;
}

/* ---- strangers on the listening port ---- */
enum { N_STRANGERS_DEFAULT = 60, N_STRANGERS_MAX = 4000 };

static int stranger_connect(const struct sockaddr_in *sa) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  if (connect(fd, (const struct sockaddr *)sa, sizeof *sa) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

static int test_strangers(const char *plugin) {
  char handle[STRAND_NET_HANDLE_MAXSIZE];
  void *l = NULL;
  /* Open the endpoint and let the provider's threads settle before the baseline. */
  PT_CHECK(net->listen(ctx, 0, handle, &l) == 0, "listen");
  /* OFI_HOSTILE_IDLE: no connection before the strangers and no call while they arrive (issue 23,
   * item 1: a legitimate connect failed after 39.4 s behind 40 idle strangers). */
  const bool idle = getenv("OFI_HOSTILE_IDLE") != NULL;
  void *s0 = NULL, *r0 = NULL;
  if (!idle && pt_connect_pair(&ptn, ctx, 0, &s0, &r0, NULL, BOUND_S)) return -1;
  if (!idle && transfer(s0, r0, 1000, 1, BOUND_S)) return -1;
  int base_fds = count_fds();
  /* The handle carries the endpoint address at offset 24 (ofi_wire.h); tcp and sockets use a
   * sockaddr_in there: that is the provider's listening TCP port. */
  struct sockaddr_in sa;
  memcpy(&sa, handle + 24, sizeof sa);
  PT_CHECK(sa.sin_family == AF_INET, "endpoint address family %d is not AF_INET", sa.sin_family);
  char ip[64];
  inet_ntop(AF_INET, &sa.sin_addr, ip, sizeof ip);
  /* OFI_HOSTILE_KINDS: s(ilent) j(unk) l(eave) h(alf a provider handshake), cycled in this order
   * over the strangers. */
  const char *kinds = getenv("OFI_HOSTILE_KINDS");
  if (!kinds || !*kinds || strspn(kinds, "sjlh") != strlen(kinds)) kinds = "sjl";
  const char *n_env = getenv("OFI_HOSTILE_STRANGERS");
  const int n_strangers = n_env && atoi(n_env) > 0 && atoi(n_env) <= N_STRANGERS_MAX
                              ? atoi(n_env) : N_STRANGERS_DEFAULT;
  /* Each stranger costs this process two descriptors (its own socket and the one the provider
   * accepts), plus headroom for the plugin and the peer's connection. */
  struct rlimit rl;
  const rlim_t need = (rlim_t)(2 * n_strangers + 256);
  PT_CHECK(getrlimit(RLIMIT_NOFILE, &rl) == 0, "getrlimit");
  if (rl.rlim_cur < need) {
    rl.rlim_cur = need < rl.rlim_max ? need : rl.rlim_max;
    PT_CHECK(setrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur >= need,
             "%d strangers need %lu descriptors; the limit is %lu", n_strangers,
             (unsigned long)need, (unsigned long)rl.rlim_cur);
  }
  printf("strangers: %d (%s) to %s:%u (baseline %d descriptors)%s\n", n_strangers, kinds, ip,
         ntohs(sa.sin_port), base_fds, idle ? ", idle endpoint" : "");
  static int fds[N_STRANGERS_MAX];
  unsigned seed = 12345;
  const size_t nkinds = strlen(kinds);
  for (int k = 0; k < n_strangers; k++) {
    const char kind = kinds[(size_t)k % nkinds];
    fds[k] = stranger_connect(&sa);
    PT_CHECK(fds[k] >= 0, "stranger %d cannot connect: %s", k, strerror(errno));
    if (kind == 'j') { /* random bytes, then stay */
      unsigned char junk[4096];
      for (size_t i = 0; i < sizeof junk; i++) junk[i] = (unsigned char)((seed = seed * 1103515245u + 12345u) >> 16);
      if (write(fds[k], junk, (size_t)(64 + k * 53) % sizeof junk) < 0) { /* peer may close */ }
    } else if (kind == 'h') {
      /* The first 32 bytes of a tcp-provider connection request (libfabric 1.17's control header:
       * version 3, type 0 = connect request, 16 bytes of data announced), then nothing. By hand
       * only: on tcp;ofi_rxm it wedges the endpoint for as long as it stays (docs/plugins/ofi.md). */
      unsigned char hdr[32] = {3, 0, 0, 16};
      if (write(fds[k], hdr, sizeof hdr) < 0) { /* peer may close */ }
    } else if (kind == 'l') { /* connect and leave at once */
      close(fds[k]);
      fds[k] = -1;
    } /* 's': silent, stays */
    if (k % 10 == 0 && !idle) { /* let the provider see them while they arrive */
      void *rc = NULL;
      net->accept(l, &rc, NULL);
      PT_CHECK(rc == NULL, "accept returned a comm for a stranger");
    }
  }
  printf("  %d strangers connected; descriptors %d\n", n_strangers, count_fds());
  /* A legitimate peer (another process: a new provider connection) connects and sends while the
   * strangers stay. */
  double t0 = pt_now_s();
  if (peer_start(plugin)) return -1;
  void *r = NULL;
  int rc = peer_pair('c', &r, 10.0);
  PT_CHECK(rc == 0, "legitimate connect/accept + transfer with %d strangers failed after %.1f s",
           n_strangers, pt_now_s() - t0);
  if (!idle && transfer(s0, r0, 5000, 8, 10.0)) return -1; /* the old connection is unharmed */
  printf("  legitimate connect + transfer with strangers present: %.2f s\n", pt_now_s() - t0);
  /* The strangers leave; the provider must let go of their descriptors. */
  for (int k = 0; k < n_strangers; k++)
    if (fds[k] >= 0) close(fds[k]);
  int fds_now = 0;
  t0 = pt_now_s();
  do {
    void *x = NULL;
    /* As a caller whose last non-blocking socket call would have blocked (NCCL's proxy thread
     * polls its own sockets): libfabric 1.17's tcp provider takes a stranger's end of stream for
     * "try again" while errno still says EAGAIN, and would keep its descriptor for good. */
    errno = EAGAIN;
    net->accept(l, &x, NULL);
    usleep(20000);
    fds_now = count_fds();
  } while (fds_now > base_fds + 8 && pt_now_s() - t0 < 5.0);
  printf("  descriptors: baseline %d, after strangers left %d\n", base_fds, fds_now);
  PT_CHECK(fds_now <= base_fds + 8, "descriptors after %d strangers left: %d (baseline %d)",
           n_strangers, fds_now, base_fds);
  /* And a second connection still works. */
  void *r2 = NULL;
  if (peer_pair('c', &r2, 10.0)) return -1;
  net->closeRecv(r2);
  net->closeRecv(r);
  peer_stop();
  if (!idle) net->closeSend(s0), net->closeRecv(r0);
  net->closeListen(l);
  printf("ok strangers\n");
  return 0;
}

/* ---- rejected connects do not grow the AV ---- */
static int test_rejects(const char *plugin) {
  enum { PEERS = 6 };
  char handle[STRAND_NET_HANDLE_MAXSIZE];
  void *l = NULL;
  PT_CHECK(net->listen(ctx, 0, handle, &l) == 0, "listen");
  char stale[STRAND_NET_HANDLE_MAXSIZE];
  memcpy(stale, handle, sizeof stale);
  stale[8] ^= 0x5a; /* the nonce (ofi_wire.h: after magic and listen id) */
  for (int i = 0; i < PEERS; i++) {
    if (peer_start(plugin)) return -1;
    char cmd = 'k';
    PT_CHECK(write(peer_in, &cmd, 1) == 1 && write(peer_in, stale, sizeof stale) == (ssize_t)sizeof stale,
             "command to peer");
    /* Progress our side until the peer has its answer (a refused connect). */
    struct pollfd pfd = {.fd = peer_out, .events = POLLIN};
    double t0 = pt_now_s();
    while (poll(&pfd, 1, 0) == 0 && pt_now_s() - t0 < BOUND_S) {
      void *r = NULL;
      PT_CHECK(net->accept(l, &r, NULL) == 0 && r == NULL, "accept took the stale connect");
      usleep(1000);
    }
    char ok = 0;
    PT_CHECK(read_full(peer_out, &ok, 1) == 0, "peer answer");
    PT_CHECK(ok != 0, "peer %d connected with a stale nonce", i);
    peer_stop();
  }
  /* Each REJECT completes (delivered, or failed once its peer is gone); then its address goes. */
  double t0 = pt_now_s();
  while (__atomic_load_n(&av_released, __ATOMIC_RELAXED) < PEERS && pt_now_s() - t0 < BOUND_S) {
    void *r = NULL;
    net->accept(l, &r, NULL);
    usleep(2000);
  }
  int released = __atomic_load_n(&av_released, __ATOMIC_RELAXED);
  printf("rejects: %d stale connects from %d peer processes, %d addresses released from the AV\n",
         PEERS, PEERS, released);
  PT_CHECK(released >= PEERS, "only %d of %d rejected peers' addresses left the AV", released, PEERS);
  net->closeListen(l);
  /* The plugin is unharmed: a new peer connects and sends. */
  if (peer_start(plugin)) return -1;
  void *r = NULL;
  if (peer_pair('c', &r, 10.0)) return -1;
  net->closeRecv(r);
  peer_stop();
  printf("ok rejects\n");
  return 0;
}

/* ---- memory per connect/close pair ---- */
static int test_memory(const char *plugin) {
#if defined(__SANITIZE_ADDRESS__)
  /* AddressSanitizer keeps freed memory in quarantine, so RSS grows by design; LeakSanitizer
   * checks the same plugin for leaks in this build, and the plain build runs the RSS bound. */
  (void)plugin;
  printf("SKIP memory: RSS bounds are meaningless under AddressSanitizer's quarantine\n");
  exit(77);
#endif
  enum { WARM = 100, N = 1000 };
  /* Bound per pair after the warm-up: see the comment in meson.build / docs (what remains is the
   * provider's and the allocator's, not ours). */
  const long bound_bytes_per_pair = 2048;
  long rss0 = 0, prss0 = 0;
  double t0 = pt_now_s();
  if (peer_start(plugin)) return -1;
  for (int k = 0; k < N; k++) {
    if (peer_pair('k', NULL, BOUND_S)) return -1;
    if (k + 1 == WARM) rss0 = rss_kib(), prss0 = peer_rss();
  }
  long rss1 = rss_kib(), prss1 = peer_rss();
  peer_stop();
  long per = (rss1 - rss0) * 1024 / (N - WARM), pper = (prss1 - prss0) * 1024 / (N - WARM);
  printf("  memory: listener RSS %ld -> %ld KiB (%ld bytes per pair), connector %ld -> %ld KiB "
         "(%ld bytes per pair) from pair %d to %d (%.1f s)\n",
         rss0, rss1, per, prss0, prss1, pper, WARM, N, pt_now_s() - t0);
  PT_CHECK(per <= bound_bytes_per_pair && pper <= bound_bytes_per_pair,
           "RSS grows %ld / %ld bytes per connect/close pair (listener / connector; bound %ld)",
           per, pper, bound_bytes_per_pair);
  printf("ok memory\n");
  return 0;
}

/* ---- memory per full cycle (issue 23): listen, connect/accept, one message, close all ---- */
static int test_memory_cycle(const char *plugin) {
#if defined(__SANITIZE_ADDRESS__)
  printf("SKIP memory-cycle: RSS bounds are meaningless under AddressSanitizer's quarantine\n");
  exit(77);
#endif
  int n = getenv("OFI_HOSTILE_CYCLES") ? atoi(getenv("OFI_HOSTILE_CYCLES")) : 1000, warm = n / 10;
  long rss0 = 0, prss0 = 0, rss_first = 0, rss_start = rss_kib();
  double t0 = pt_now_s();
  if (peer_start(plugin)) return -1;
  for (int k = 0; k < n; k++) {
    void *r = NULL;
    if (peer_pair('c', &r, BOUND_S)) return -1;
    if (k == 0) rss_first = rss_kib();
    net->closeRecv(r);
    char x = 'x';
    PT_CHECK(write(peer_in, &x, 1) == 1, "command to peer");
    if (k + 1 == warm) rss0 = rss_kib(), prss0 = peer_rss();
  }
  long rss1 = rss_kib(), prss1 = peer_rss();
  peer_stop();
  long per = (rss1 - rss0) * 1024 / (n - warm), pper = (prss1 - prss0) * 1024 / (n - warm);
  printf("  memory-cycle: listener RSS %ld KiB before the first connection, %ld after it; "
         "listener %ld -> %ld KiB (%ld bytes per cycle), connector %ld -> %ld KiB (%ld bytes per "
         "cycle) from cycle %d to %d (%.1f s)\n",
         rss_start, rss_first, rss0, rss1, per, prss0, prss1, pper, warm, n, pt_now_s() - t0);
  const long bound_bytes_per_cycle = 2048; /* the `memory` bound: a comm's state is ~17 KiB */
  PT_CHECK(per <= bound_bytes_per_cycle && pper <= bound_bytes_per_cycle,
           "RSS grows %ld / %ld bytes per listen/connect/message/close cycle (listener / connector; "
           "bound %ld)", per, pper, bound_bytes_per_cycle);
  printf("ok memory-cycle\n");
  return 0;
}

/* ---- a CollNet member dies (issue 23) ----
 * Two processes form a 2-rank CollNet group through the plugin's ncclCollNetPlugin_v12 (collnet_stub
 * over strand-ofi's comms) and complete one all-reduce; then the member process exits without any
 * cleanup and the survivor's next all-reduce must fail within STRAND_OFI_PEER_TIMEOUT_S (+1 s for
 * scheduling on a loaded host), not hang and not take longer than the net comms' own bound.
 * `ofi_hostile PLUGIN collnet-member IN_FD OUT_FD`: the member (reads rank 0's handle, answers its
 * own, connects, all-reduces once, waits for 'q', then _exit). */
enum { CN_COUNT = 4096 };
static strand_collnet_v12_t *cn;

static int cn_allreduce(void *cc, float *sb, float *rb, void *smh, void *rmh, double bound, int *rc_out) {
  void *rq = NULL;
  double t0 = pt_now_s();
  int rc = 0;
  while (!rq && rc == 0 && pt_now_s() - t0 < bound)
    rc = cn->iallreduce(cc, sb, rb, CN_COUNT, STRAND_FLOAT32, STRAND_SUM, smh, rmh, &rq);
  int done = 0, size = 0;
  while (rc == 0 && rq && !done && pt_now_s() - t0 < bound) rc = cn->test(rq, &done, &size);
  *rc_out = rc;
  return rc == 0 && done ? 0 : -1;
}

static int cn_group(int rank, int in, int out, void **ctx_out, void **cc_out) {
  cn = pt_load_table(getenv("OFI_HOSTILE_PLUGIN"), "ncclCollNetPlugin_v12");
  PT_CHECK(cn, "no ncclCollNetPlugin_v12");
  void *cctx = NULL, *lc = NULL;
  PT_CHECK(cn->init(&cctx, 0x4344, logger) == 0, "collnet init");
  int nd = 0;
  PT_CHECK(cn->devices(&nd) == 0 && nd > 0, "collnet devices: %d", nd);
  char h[2][STRAND_NET_HANDLE_MAXSIZE];
  PT_CHECK(cn->listen(cctx, 0, h[rank], &lc) == 0 && lc, "collnet listen");
  /* rank 0 sends its handle first, rank 1 answers with its own */
  if (rank == 0) {
    PT_CHECK(write(out, h[0], sizeof h[0]) == (ssize_t)sizeof h[0], "handle to member");
    PT_CHECK(read_full(in, h[1], sizeof h[1]) == 0, "handle from member");
  } else {
    PT_CHECK(read_full(in, h[0], sizeof h[0]) == 0, "handle from rank 0");
    PT_CHECK(write(out, h[1], sizeof h[1]) == (ssize_t)sizeof h[1], "handle to rank 0");
  }
  void *handles[2] = {h[0], h[1]}, *cc = NULL;
  PT_CHECK(cn->connect(handles, 2, rank, lc, &cc) == 0 && cc, "collnet connect");
  cn->closeListen(lc);
  *ctx_out = cctx, *cc_out = cc;
  return 0;
}

static int collnet_member(int in, int out) {
  void *cctx, *cc;
  if (cn_group(1, in, out, &cctx, &cc)) return 1;
  static float sb[CN_COUNT], rb[CN_COUNT];
  void *smh = NULL, *rmh = NULL;
  PT_CHECK(cn->regMr(cc, sb, sizeof sb, STRAND_PTR_HOST, &smh) == 0 &&
           cn->regMr(cc, rb, sizeof rb, STRAND_PTR_HOST, &rmh) == 0, "collnet regMr");
  for (int i = 0; i < CN_COUNT; i++) sb[i] = 2.0f;
  int rc = 0;
  PT_CHECK(cn_allreduce(cc, sb, rb, smh, rmh, BOUND_S, &rc) == 0, "member all-reduce: %d", rc);
  char ok = rb[0] == 3.0f ? 0 : 1, q;
  if (write(out, &ok, 1) != 1) return 1;
  read_full(in, &q, 1);
  _exit(0); /* a crash: no close, no finalize; the kernel closes the member's sockets */
}

static int test_collnet_death(const char *plugin) {
  setenv("OFI_HOSTILE_PLUGIN", plugin, 1);
  int a[2], b[2];
  PT_CHECK(pipe(a) == 0 && pipe(b) == 0, "pipe");
  fflush(NULL);
  pid_t pid = fork();
  if (pid == 0) {
    char in[16], out[16];
    snprintf(in, sizeof in, "%d", a[0]);
    snprintf(out, sizeof out, "%d", b[1]);
    execl("/proc/self/exe", "ofi_hostile", plugin, "collnet-member", in, out, (char *)NULL);
    _exit(127);
  }
  close(a[0]);
  close(b[1]);
  void *cctx, *cc;
  if (cn_group(0, b[0], a[1], &cctx, &cc)) return -1;
  static float sb[CN_COUNT], rb[CN_COUNT];
  void *smh = NULL, *rmh = NULL;
  PT_CHECK(cn->regMr(cc, sb, sizeof sb, STRAND_PTR_HOST, &smh) == 0 &&
           cn->regMr(cc, rb, sizeof rb, STRAND_PTR_HOST, &rmh) == 0, "collnet regMr");
  for (int i = 0; i < CN_COUNT; i++) sb[i] = 1.0f;
  int rc = 0;
  PT_CHECK(cn_allreduce(cc, sb, rb, smh, rmh, BOUND_S, &rc) == 0 && rb[0] == 3.0f,
           "all-reduce with both members: result %d, %g", rc, rb[0]);
  char ok = 1, q = 'q';
  PT_CHECK(read_full(b[0], &ok, 1) == 0 && ok == 0, "the member's all-reduce");
  PT_CHECK(write(a[1], &q, 1) == 1, "command to member");
  waitpid(pid, NULL, 0);
  long timeout_ms = 30000;
  if (getenv("STRAND_OFI_PEER_TIMEOUT_S")) timeout_ms = atol(getenv("STRAND_OFI_PEER_TIMEOUT_S")) * 1000;
  double t0 = pt_now_s(), bound = (double)timeout_ms / 1000.0 + 1.0;
  /* Wait a little past the bound so that a late error is told apart from none at all. */
  int r2 = cn_allreduce(cc, sb, rb, smh, rmh, bound + 10.0, &rc);
  double dt = pt_now_s() - t0;
  printf("  collnet-death: the survivor's all-reduce returned %d after %.2f s (STRAND_OFI_PEER_TIMEOUT_S "
         "%ld s)\n", rc, dt, timeout_ms / 1000);
  PT_CHECK(r2 != 0 && rc != 0, "the all-reduce with a dead member did not fail within %.0f s", bound + 10.0);
  PT_CHECK(dt <= bound, "a dead CollNet member was reported after %.2f s, past STRAND_OFI_PEER_TIMEOUT_S "
           "(%ld s) + 1 s", dt, timeout_ms / 1000);
  cn->deregMr(cc, smh);
  cn->deregMr(cc, rmh);
  cn->closeColl(cc);
  cn->finalize(cctx);
  close(a[1]);
  close(b[0]);
  printf("ok collnet-death\n");
  return 0;
}

/* ---- link flap halves ---- */
enum { FLAP_SZ = 65536, FLAP_DEPTH = 4 };

static bool exists(const char *p) { return access(p, F_OK) == 0; }

static int flap_fail(const char *what, int rc, double t) {
  printf("FLAP-ERROR %s: test() returned %d at %.2f s\n", what, rc, t);
  return 3;
}

static int flap(bool sender, const char *hfile, const char *stop) {
  char handle[STRAND_NET_HANDLE_MAXSIZE];
  void *comm = NULL;
  double t0 = pt_now_s();
  if (!sender) {
    void *l = NULL;
    if (net->listen(ctx, 0, handle, &l)) return 1;
    char tmp[512];
    snprintf(tmp, sizeof tmp, "%s.tmp", hfile);
    FILE *f = fopen(tmp, "wb");
    if (!f || fwrite(handle, sizeof handle, 1, f) != 1) return 1;
    fclose(f);
    rename(tmp, hfile);
    while (!comm && pt_now_s() - t0 < 30) net->accept(l, &comm, NULL);
  } else {
    FILE *f = NULL;
    while (!f && pt_now_s() - t0 < 30) {
      f = fopen(hfile, "rb");
      if (!f) usleep(20000);
    }
    if (!f || fread(handle, sizeof handle, 1, f) != 1) return 1;
    fclose(f);
    while (!comm && pt_now_s() - t0 < 30)
      if (net->connect(ctx, 0, handle, &comm, NULL)) return 1;
  }
  if (!comm) {
    printf("flap: no connection\n");
    return 1;
  }
  static unsigned char buf[FLAP_DEPTH][FLAP_SZ];
  void *mh = NULL;
  if (net->regMr(comm, buf, sizeof buf, STRAND_PTR_HOST, &mh)) return 1;
  void *req[FLAP_DEPTH] = {0};
  unsigned posted = 0, done = 0;
  bool ending = false; /* sender: the 1-byte end marker is posted */
  t0 = pt_now_s();
  for (;;) {
    /* post */
    if (!ending && posted - done < FLAP_DEPTH) {
      int slot = (int)(posted % FLAP_DEPTH);
      void *q = NULL;
      int rc;
      if (sender) {
        bool last = exists(stop);
        size_t len = last ? 1 : FLAP_SZ;
        pt_fill(buf[slot], FLAP_SZ, posted);
        rc = net->isend(comm, buf[slot], len, 0, mh, NULL, &q);
        if (q && last) ending = true;
      } else {
        void *b[1] = {buf[slot]};
        size_t sz[1] = {FLAP_SZ};
        int t[1] = {0};
        rc = net->irecv(comm, 1, b, sz, t, &mh, NULL, &q);
      }
      if (rc) return flap_fail(sender ? "isend" : "irecv", rc, pt_now_s() - t0);
      if (q) req[slot] = q, posted++;
    }
    /* complete in order */
    if (done < posted) {
      int slot = (int)(done % FLAP_DEPTH), d = 0, sz[1] = {0};
      int rc = net->test(req[slot], &d, sz);
      if (rc) return flap_fail(sender ? "send" : "recv", rc, pt_now_s() - t0);
      if (d) {
        if (!sender) {
          if (sz[0] == 1) { /* the end marker */
            printf("flap-recv: %u messages intact in %.1f s\n", done, pt_now_s() - t0);
            return 0;
          }
          if (sz[0] != FLAP_SZ || pt_verify(buf[slot], FLAP_SZ, done) >= 0) {
            printf("flap-recv: message %u corrupt (size %d)\n", done, sz[0]);
            return 1;
          }
        }
        done++;
        if (sender && ending && done == posted) {
          printf("flap-send: %u messages sent in %.1f s\n", done, pt_now_s() - t0);
          sleep(1); /* let the receiver read the end marker before our endpoint goes */
          return 0;
        }
      }
    }
    if (pt_now_s() - t0 > 300) {
      printf("flap: no progress and no error for 300 s\n");
      return 1;
    }
  }
}

static int load(const char *path) {
  net = pt_load_table(path, "ncclNetPlugin_v12");
  if (!net) return -1;
  ptn = PT_NET(net);
  return 0;
}

int main(int argc, char **argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: %s PLUGIN.so dereg-twice|strangers|memory|flap-recv|flap-send ...\n",
            argv[0]);
    return 2;
  }
  setvbuf(stdout, NULL, _IONBF, 0);
  if (load(argv[1])) return 1;
  /* `rejects` counts the plugin's NET INFO lines: let them through the plugin's log filter. */
  if (strcmp(argv[2], "rejects") == 0) {
    setenv("NCCL_DEBUG", "INFO", 1);
    setenv("NCCL_DEBUG_SUBSYS", "INIT,NET", 1);
  }
  PT_CHECK(net->init(&ctx, 0x1234, NULL, logger, NULL) == STRAND_SUCCESS, "init");
  const char *mode = argv[2];
  if (strcmp(mode, "peer") == 0 && argc >= 5) return peer_main(atoi(argv[3]), atoi(argv[4]));
  if (strcmp(mode, "collnet-member") == 0 && argc >= 5) {
    setenv("OFI_HOSTILE_PLUGIN", argv[1], 1);
    return collnet_member(atoi(argv[3]), atoi(argv[4]));
  }
  if (strcmp(mode, "flap-recv") == 0 || strcmp(mode, "flap-send") == 0) {
    if (argc < 5) return 2;
    return flap(mode[5] == 's', argv[3], argv[4]);
  }
  if (strcmp(mode, "dereg-twice") == 0)
    test_dereg_twice();
  else if (strcmp(mode, "strangers") == 0)
    test_strangers(argv[1]);
  else if (strcmp(mode, "memory") == 0)
    test_memory(argv[1]);
  else if (strcmp(mode, "rejects") == 0)
    test_rejects(argv[1]);
  else if (strcmp(mode, "collnet-death") == 0)
    test_collnet_death(argv[1]);
  else if (strcmp(mode, "memory-cycle") == 0)
    test_memory_cycle(argv[1]);
  else {
    fprintf(stderr, "unknown mode %s\n", mode);
    return 2;
  }
  PT_CHECK(net->finalize(ctx) == 0, "finalize");
  printf("%s: %d failure(s)\n", pt_failures ? "FAILED" : "PASSED", pt_failures);
  return pt_failures ? 1 : 0;
}
