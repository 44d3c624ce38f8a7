/* What one small-message call costs in the caller's thread: strand-ofi's isend of 8 bytes and a
 * test() that finds nothing, beside the same two on a plain TCP socket (send() with TCP_NODELAY,
 * a non-blocking recv() that finds nothing: what NCCL's built-in Socket transport does for them).
 * NCCL's proxy thread pays these for every step of a small collective, so their difference is a
 * floor under strand-ofi's 8-32 B all-reduce gap (docs/benchmarks/ofi.md, "ofi_rxm's protocol by
 * message size"). A benchmark, not a test: nothing is asserted, every wait is bounded.
 *
 * Build (from the repository root, after the meson build in build/):
 *   cc -O2 -std=c11 -D_GNU_SOURCE -Itests/common -Iplugin_api/include net_ofi/bench/ofi_call_cost.c \
 *      tests/common/plugin_test.c -o build/ofi-call-cost -ldl -lpthread
 * Run: FI_PROVIDER='tcp;ofi_rxm' build/ofi-call-cost build/net_ofi/libnccl-net-strand-ofi.so [ADDR]
 *   ADDR: the IPv4 address the plain-TCP pair uses (default 127.0.0.1; give the plugin's
 *   interface address to compare the same path). Prints p50 and p90 of each over 20000 rounds. */
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "plugin_test.h"
#include "strand/abi/abi.h"

enum { ROUNDS = 20000, IDLE_TESTS = 10, MSG = 8 };
static const double BOUND_S = 20.0;

static double now_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec * 1e9 + (double)t.tv_nsec;
}

static int by_value(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

static void report(const char *what, double *v) {
  qsort(v, ROUNDS, sizeof *v, by_value);
  printf("  %-40s p50 %6.0f ns  p90 %6.0f ns\n", what, v[ROUNDS / 2], v[ROUNDS * 9 / 10]);
}

static int plugin_costs(const char *path, double *send_ns, double *idle_ns) {
  strand_net_v12_t *net = pt_load_table(path, "ncclNetPlugin_v12");
  if (!net) return -1;
  pt_net_t ptn = PT_NET(net);
  void *ctx = NULL, *s = NULL, *r = NULL, *smh = NULL, *rmh = NULL;
  static char sbuf[64], rbuf[64];
  if (net->init(&ctx, 1, NULL, NULL, NULL) != 0) return -1;
  if (pt_connect_pair(&ptn, ctx, 0, &s, &r, NULL, BOUND_S) != 0) return -1;
  if (net->regMr(s, sbuf, sizeof sbuf, STRAND_PTR_HOST, &smh) != 0 ||
      net->regMr(r, rbuf, sizeof rbuf, STRAND_PTR_HOST, &rmh) != 0)
    return -1;
  for (int i = 0; i < ROUNDS; i++) {
    void *rq = NULL, *sq = NULL, *bufs[1] = {rbuf};
    size_t sizes[1] = {sizeof rbuf};
    int tags[1] = {1}, done = 0;
    double t0 = now_ns();
    while (!rq && now_ns() - t0 < BOUND_S * 1e9) net->irecv(r, 1, bufs, sizes, tags, &rmh, NULL, &rq);
    if (!rq) return -1;
    t0 = now_ns(); /* nothing sent yet: each test() finds nothing */
    for (int k = 0; k < IDLE_TESTS; k++) net->test(rq, &done, NULL);
    idle_ns[i] = (now_ns() - t0) / IDLE_TESTS;
    t0 = now_ns();
    while (!sq && now_ns() - t0 < BOUND_S * 1e9) net->isend(s, sbuf, MSG, 1, smh, NULL, &sq);
    send_ns[i] = now_ns() - t0;
    if (!sq || pt_wait(&ptn, sq, NULL, BOUND_S) != 0 || pt_wait(&ptn, rq, NULL, BOUND_S) != 0)
      return -1;
  }
  net->deregMr(s, smh);
  net->deregMr(r, rmh);
  net->closeSend(s);
  net->closeRecv(r);
  net->finalize(ctx);
  return 0;
}

static int tcp_costs(const char *addr, double *send_ns, double *idle_ns) {
  struct sockaddr_in a = {.sin_family = AF_INET};
  socklen_t alen = sizeof a;
  if (inet_pton(AF_INET, addr, &a.sin_addr) != 1) return -1;
  int l = socket(AF_INET, SOCK_STREAM, 0), c = socket(AF_INET, SOCK_STREAM, 0), one = 1;
  if (l < 0 || c < 0 || bind(l, (struct sockaddr *)&a, sizeof a) != 0 ||
      getsockname(l, (struct sockaddr *)&a, &alen) != 0 || listen(l, 1) != 0 ||
      connect(c, (struct sockaddr *)&a, sizeof a) != 0)
    return -1;
  int sv = accept(l, NULL, NULL);
  if (sv < 0) return -1;
  setsockopt(c, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  fcntl(sv, F_SETFL, O_NONBLOCK);
  char buf[MSG] = {0};
  for (int i = 0; i < ROUNDS; i++) {
    double t0 = now_ns();
    for (int k = 0; k < IDLE_TESTS; k++) (void)recv(sv, buf, MSG, 0);
    idle_ns[i] = (now_ns() - t0) / IDLE_TESTS;
    t0 = now_ns();
    if (send(c, buf, MSG, 0) != MSG) return -1;
    send_ns[i] = now_ns() - t0;
    int got = 0;
    t0 = now_ns();
    while (got < MSG && now_ns() - t0 < BOUND_S * 1e9) {
      ssize_t n = recv(sv, buf, (size_t)(MSG - got), 0);
      if (n > 0) got += (int)n;
    }
    if (got < MSG) return -1;
  }
  close(sv);
  close(c);
  close(l);
  return 0;
}

int main(int argc, char **argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: %s PLUGIN.so [ADDR]\n", argv[0]);
    return 2;
  }
  static double send_ns[ROUNDS], idle_ns[ROUNDS];
  if (plugin_costs(argv[1], send_ns, idle_ns) != 0) {
    fprintf(stderr, "plugin part failed (see the plugin's warnings above)\n");
    return 1;
  }
  printf("%s (FI_PROVIDER=%s):\n", argv[1], getenv("FI_PROVIDER") ? getenv("FI_PROVIDER") : "");
  report("isend of 8 B", send_ns);
  report("test() that finds nothing", idle_ns);
  const char *addr = argc > 2 ? argv[2] : "127.0.0.1";
  if (tcp_costs(addr, send_ns, idle_ns) != 0) {
    fprintf(stderr, "plain TCP part failed on %s\n", addr);
    return 1;
  }
  printf("plain TCP socket pair on %s:\n", addr);
  report("send() of 8 B", send_ns);
  report("non-blocking recv() that finds nothing", idle_ns);
  return 0;
}
