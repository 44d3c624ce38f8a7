/* strand-socket smoke test: loads the plugin .so with dlopen, the way NCCL does, and drives it
 * through ncclNetPlugin_v11 (what NCCL 2.28 picks) from one thread, both ends in one process
 * unless a case needs a second process.
 *
 *   socket_smoke PLUGIN.so [case]     cases: props, transfer, group, window, oversize, stranger,
 *                                             peer_death_recv, peer_death_send, all (default)
 *
 * Every wait is bounded (SMOKE_TIMEOUT_S); exit status 0 only if every case passed. */
#include <arpa/inet.h>
#include <errno.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "plugin_test.h"
#include "strand/abi/abi.h"

#define SMOKE_TIMEOUT_S 20

static strand_net_v11_t *net;
static pt_net_t pn; /* the members of net the shared helpers call */
static void *ctx;

static int connect_pair(void **send_comm, void **recv_comm) {
  return pt_connect_pair(&pn, ctx, 0, send_comm, recv_comm, NULL, SMOKE_TIMEOUT_S);
}

/* Waits for one request; returns test()'s result, or PT_TIMEOUT after SMOKE_TIMEOUT_S. */
static int wait_one(void *req, int *sizes) { return pt_wait(&pn, req, sizes, SMOKE_TIMEOUT_S); }

/* Polls test on several requests in turn until all are done (NULL entries are skipped), as a
 * proxy thread would: with nthreads=0 data moves inside test() of either side. */
static int wait_reqs(void **rs, int *sizes, int n) {
  double t0 = pt_now_s();
  int left = 0;
  for (int i = 0; i < n; i++) left += rs[i] != NULL;
  while (left > 0) {
    for (int i = 0; i < n; i++) {
      if (rs[i] == NULL) continue;
      int done = 0;
      strand_result_t rc = net->test(rs[i], &done, sizes ? &sizes[i * 8] : NULL);
      PT_CHECK(rc == STRAND_SUCCESS, "test returned %d", rc);
      if (done) {
        rs[i] = NULL;
        left--;
      }
    }
    PT_CHECK(pt_now_s() - t0 <= SMOKE_TIMEOUT_S, "requests not done in %d s", SMOKE_TIMEOUT_S);
  }
  return 0;
}

/* One test() on each non-NULL request; done ones become NULL. */
static int wait_reqs_once(void **rs, int *sizes, int n) {
  for (int i = 0; i < n; i++) {
    if (rs[i] == NULL) continue;
    int done = 0;
    strand_result_t rc = net->test(rs[i], &done, sizes ? &sizes[i * 8] : NULL);
    PT_CHECK(rc == STRAND_SUCCESS, "test returned %d", rc);
    if (done) rs[i] = NULL;
  }
  return 0;
}

static int post_send(void *sc, void *buf, size_t size, int tag, void *mh, void **req) {
  double t0 = pt_now_s();
  *req = NULL;
  while (*req == NULL) {
    strand_result_t rc = net->isend(sc, buf, size, tag, mh, NULL, req);
    if (rc != STRAND_SUCCESS) return (int)rc;
    if (pt_now_s() - t0 > SMOKE_TIMEOUT_S) return -1;
  }
  return 0;
}

static int case_props(void) {
  int ndev = 0;
  PT_CHECK(net->devices(&ndev) == STRAND_SUCCESS && ndev >= 1, "devices: %d", ndev);
  for (int d = 0; d < ndev; d++) {
    strand_props_v11_t p;
    memset(&p, 0xa5, sizeof p);
    PT_CHECK(net->getProperties(d, &p) == STRAND_SUCCESS, "getProperties(%d)", d);
    PT_CHECK(p.name && p.name[0], "name");
    PT_CHECK(p.ptrSupport == STRAND_PTR_HOST, "ptrSupport %d", p.ptrSupport);
    PT_CHECK(p.speed > 0, "speed %d", p.speed);
    PT_CHECK(p.maxRecvs == 8, "maxRecvs %d", p.maxRecvs);
    PT_CHECK(p.maxComms > 0 && p.guid == (uint64_t)d, "maxComms/guid");
    PT_CHECK(p.maxP2pBytes > 0 && p.maxP2pBytes <= STRAND_MAX_NET_SIZE_BYTES, "maxP2pBytes");
    PT_CHECK(p.vProps.ndevs == 1 && p.vProps.devs[0] == d, "vProps");
    printf("  dev %d: %s speed %d pci %s latency %.1f\n", d, p.name, p.speed,
           p.pciPath ? p.pciPath : "(null)", p.latency);
  }
  strand_props_v11_t p;
  PT_CHECK(net->getProperties(ndev, &p) != STRAND_SUCCESS, "getProperties out of range accepted");
  return 0;
}

static int case_transfer(void) {
  void *sc, *rc_;
  if (connect_pair(&sc, &rc_)) return -1;
  size_t sizes[] = {0, 1, 8, 4096, 16384, 16385, 131072, 1 << 20, (1 << 20) + 3, 8 << 20,
                    33 << 20};
  size_t max = 33 << 20;
  unsigned char *sb = malloc(max), *rb = malloc(max + 64);
  void *smh, *rmh;
  PT_CHECK(net->regMr(sc, sb, max, STRAND_PTR_HOST, &smh) == STRAND_SUCCESS, "regMr send");
  PT_CHECK(net->regMr(rc_, rb, max + 64, STRAND_PTR_HOST, &rmh) == STRAND_SUCCESS, "regMr recv");
  void *bad = NULL;
  PT_CHECK(net->regMr(sc, sb, 64, STRAND_PTR_CUDA, &bad) != STRAND_SUCCESS, "CUDA regMr accepted");
  for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
    size_t n = sizes[k];
    pt_fill(sb, n, (unsigned)k);
    memset(rb, 0xee, max + 64);
    void *reqs[2] = {NULL, NULL};
    void *d = rb;
    size_t posted = n + 64;
    int tag = 3;
    PT_CHECK(net->irecv(rc_, 1, &d, &posted, &tag, &rmh, NULL, &reqs[1]) == STRAND_SUCCESS &&
                 reqs[1], "irecv");
    PT_CHECK(post_send(sc, sb, n, 3, smh, &reqs[0]) == 0, "isend %zu", n);
    int got[16] = {0};
    if (wait_reqs(reqs, got, 2)) return -1;
    PT_CHECK((size_t)got[8] == n, "received size %d, sent %zu", got[8], n);
    long bad_at = pt_verify(rb, n, (unsigned)k);
    PT_CHECK(bad_at < 0, "size %zu: byte %ld differs", n, bad_at);
    PT_CHECK(rb[n] == 0xee, "wrote past the message");
  }
  net->deregMr(sc, smh);
  net->deregMr(rc_, rmh);
  PT_CHECK(net->closeSend(sc) == STRAND_SUCCESS && net->closeRecv(rc_) == STRAND_SUCCESS, "close");
  free(sb);
  free(rb);
  return 0;
}

/* Grouped receive: one irecv of 3 buffers with tags 5,6,7; sends arrive as 7, 5, 6 and must land
 * by tag; then 8 groups in flight at once. */
static int case_group(void) {
  void *sc, *rc_;
  const double t_case = pt_now_s();
  if (connect_pair(&sc, &rc_)) return -1;
  enum { G = 3, ROUNDS = 8, SZ = 300000 };
  unsigned char *sb[G], *rb[ROUNDS][G];
  for (int i = 0; i < G; i++) {
    sb[i] = malloc(SZ);
    for (int r = 0; r < ROUNDS; r++) rb[r][i] = calloc(1, SZ);
  }
  void *rreq[ROUNDS];
  int tags[G] = {5, 6, 7};
  size_t posted[G] = {SZ, SZ, SZ};
  for (int r = 0; r < ROUNDS; r++) {
    void *d[G] = {rb[r][0], rb[r][1], rb[r][2]};
    rreq[r] = NULL;
    PT_CHECK(net->irecv(rc_, G, d, posted, tags, NULL, NULL, &rreq[r]) == STRAND_SUCCESS &&
                 rreq[r], "grouped irecv %d", r);
  }
  void *sreq[ROUNDS * G];
  int order[G] = {2, 0, 1};
  int got[ROUNDS][8] = {{0}};
  for (int r = 0; r < ROUNDS; r++) {
    for (int k = 0; k < G; k++) {
      int i = order[k];
      size_t n = (size_t)(SZ - 1000 * i - r);
      pt_fill(sb[i], n, (unsigned)(i * 100 + r));
      /* Each round needs its own source buffer content: copy into a private buffer, and free
       * it as soon as the send is done (the plugin must not read it after that: zero-copy). */
      unsigned char *copy = malloc(n);
      memcpy(copy, sb[i], n);
      PT_CHECK(post_send(sc, copy, n, tags[i], NULL, &sreq[r * G + k]) == 0, "grouped isend");
      /* Poll this round's receive too, as a proxy thread would: a send may need the receiver
       * to progress before it is done (with nthreads=0 data moves inside test(), and a
       * zero-copy send is done only once the peer's kernel acknowledged its bytes). */
      void *two[2] = {sreq[r * G + k], rreq[r]};
      while (two[0] != NULL) {
        int gs[2 * 8] = {0};
        void *one[1] = {two[0]};
        if (wait_reqs_once(one, NULL, 1)) return -1;
        two[0] = one[0];
        if (two[1] != NULL) {
          void *rr[1] = {two[1]};
          if (wait_reqs_once(rr, gs, 1)) return -1;
          if (rr[0] == NULL) {
            memcpy(got[r], gs, sizeof got[r]);
            rreq[r] = two[1] = NULL;
          }
        }
        PT_CHECK(pt_now_s() - t_case < SMOKE_TIMEOUT_S, "grouped send %d.%d not done in time", r,
                 k);
      }
      free(copy);
    }
  }
  for (int r = 0; r < ROUNDS; r++) {
    if (rreq[r] != NULL) {
      int w = wait_one(rreq[r], got[r]);
      PT_CHECK(w == STRAND_SUCCESS, "grouped receive %d: test returned %d", r, w);
    }
    for (int i = 0; i < G; i++) {
      size_t n = (size_t)(SZ - 1000 * i - r);
      PT_CHECK(got[r][i] == (int)n, "round %d entry %d: size %d, expected %zu", r, i, got[r][i], n);
      PT_CHECK(pt_verify(rb[r][i], n, (unsigned)(i * 100 + r)) < 0, "round %d entry %d data", r, i);
    }
  }
  net->closeSend(sc);
  net->closeRecv(rc_);
  for (int i = 0; i < G; i++) {
    free(sb[i]);
    for (int r = 0; r < ROUNDS; r++) free(rb[r][i]);
  }
  return 0;
}

/* One send buffer, overwritten with the next message the moment test() says its send is done.
 * The receiver is polled only now and then, so the sender's socket stays backed up and bytes of a
 * "done" send would still be queued in the kernel if done came early. With zero-copy
 * (STRAND_SOCKET_ZEROCOPY_THRESHOLD) the kernel reads the user's pages until it releases them, so
 * an early done shows up here as a receive holding the next message's bytes. */
static int case_reuse(void) {
  void *sc, *rc_;
  const double t_case = pt_now_s();
  if (connect_pair(&sc, &rc_)) return -1;
  enum { ROUNDS = 6, SZ = 4 << 20 };
  unsigned char *sb = malloc(SZ), *rb[ROUNDS];
  void *rreq[ROUNDS];
  size_t posted = SZ;
  int tag = 3;
  for (int r = 0; r < ROUNDS; r++) {
    rb[r] = calloc(1, SZ);
    void *d = rb[r];
    rreq[r] = NULL;
    PT_CHECK(net->irecv(rc_, 1, &d, &posted, &tag, NULL, NULL, &rreq[r]) == STRAND_SUCCESS &&
                 rreq[r], "irecv %d", r);
  }
  for (int r = 0; r < ROUNDS; r++) {
    pt_fill(sb, SZ, 1000u + (unsigned)r);
    void *sreq = NULL;
    PT_CHECK(post_send(sc, sb, SZ, tag, NULL, &sreq) == 0, "isend %d", r);
    for (unsigned k = 0; sreq != NULL; k++) {
      void *one[1] = {sreq};
      if (wait_reqs_once(one, NULL, 1)) return -1;
      sreq = one[0];
      if (k % 32 == 31 && wait_reqs_once(rreq, NULL, ROUNDS)) return -1;
      PT_CHECK(pt_now_s() - t_case < SMOKE_TIMEOUT_S, "send %d not done in time", r);
    }
  }
  if (wait_reqs(rreq, NULL, ROUNDS)) return -1;
  for (int r = 0; r < ROUNDS; r++) {
    long bad = pt_verify(rb[r], SZ, 1000u + (unsigned)r);
    PT_CHECK(bad < 0, "message %d: byte %ld differs (the send buffer was read after its send was "
             "reported done)", r, bad);
    free(rb[r]);
  }
  free(sb);
  net->closeSend(sc);
  net->closeRecv(rc_);
  return 0;
}

/* NCCL_NET_MAX_REQUESTS receives in flight, sends issued before any test; completion in any order. */
static int case_window(void) {
  void *sc, *rc_;
  if (connect_pair(&sc, &rc_)) return -1;
  enum { W = STRAND_NET_MAX_REQUESTS };
  size_t sz[W];
  unsigned char *sb[W], *rb[W];
  void *rreq[W], *sreq[W];
  for (int i = 0; i < W; i++) {
    sz[i] = (i % 4 == 0) ? 8 : (size_t)(i * 37000 + 1);
    sb[i] = malloc(sz[i]);
    rb[i] = malloc(sz[i]);
    pt_fill(sb[i], sz[i], (unsigned)i);
    void *d = rb[i];
    int tag = 1;
    rreq[i] = NULL;
    PT_CHECK(net->irecv(rc_, 1, &d, &sz[i], &tag, NULL, NULL, &rreq[i]) == STRAND_SUCCESS &&
                 rreq[i], "irecv %d of %d", i, W);
  }
  void *extra = NULL, *d0 = rb[0];
  int tag = 1;
  PT_CHECK(net->irecv(rc_, 1, &d0, &sz[0], &tag, NULL, NULL, &extra) == STRAND_SUCCESS && !extra,
           "irecv beyond NCCL_NET_MAX_REQUESTS should return a NULL request");
  for (int i = 0; i < W; i++)
    PT_CHECK(post_send(sc, sb[i], sz[i], 1, NULL, &sreq[i]) == 0, "isend");
  /* test both sides, as a proxy thread would: with nthreads=0 data moves inside test() */
  void *all[2 * W];
  for (int i = 0; i < W; i++) {
    all[2 * i] = rreq[i];
    all[2 * i + 1] = sreq[i];
  }
  if (wait_reqs(all, NULL, 2 * W)) return -1;
  for (int i = 0; i < W; i++) {
    PT_CHECK(pt_verify(rb[i], sz[i], (unsigned)i) < 0, "message %d corrupted", i);
    free(sb[i]);
    free(rb[i]);
  }
  net->closeSend(sc);
  net->closeRecv(rc_);
  return 0;
}

static int case_oversize(void) {
  void *sc, *rc_;
  if (connect_pair(&sc, &rc_)) return -1;
  for (int big = 0; big < 2; big++) {
    size_t posted = big ? 1 << 20 : 100, n = posted + 1;
    unsigned char *sb = calloc(1, n), *rb = calloc(1, posted);
    void *rreq = NULL, *d = rb;
    int tag = 0;
    PT_CHECK(net->irecv(rc_, 1, &d, &posted, &tag, NULL, NULL, &rreq) == STRAND_SUCCESS, "irecv");
    void *sreq = NULL;
    int rc = post_send(sc, sb, n, 0, NULL, &sreq);
    PT_CHECK(rc != 0 && rc != -1, "send of %zu bytes into a %zu-byte receive was accepted", n,
             posted);
    int err = wait_one(rreq, NULL);
    PT_CHECK(err != STRAND_SUCCESS && err != PT_TIMEOUT, "receiver did not see the oversize error");
    free(sb);
    free(rb);
    net->closeSend(sc);
    net->closeRecv(rc_);
    if (!big && connect_pair(&sc, &rc_)) return -1;
  }
  return 0;
}

static int raw_connect(const void *handle) {
  /* the handle starts with the magic (8 bytes) then the listen address */
  struct sockaddr_storage ss;
  memset(&ss, 0, sizeof ss);
  memcpy(&ss, (const char *)handle + 8, 28);
  int fd = socket(ss.ss_family, SOCK_STREAM, 0);
  socklen_t len = ss.ss_family == AF_INET ? sizeof(struct sockaddr_in)
                                          : sizeof(struct sockaddr_in6);
  if (fd < 0 || connect(fd, (struct sockaddr *)&ss, len) != 0) return -1;
  return fd;
}

/* Strangers knock first: a port scan (connect + close), garbage bytes, a hello with the wrong
 * nonce, a silent connection. The real connection must still be accepted and work. */
static int case_stranger(void) {
  char handle[STRAND_NET_HANDLE_MAXSIZE];
  void *lc = NULL;
  PT_CHECK(net->listen(ctx, 0, handle, &lc) == STRAND_SUCCESS, "listen");
  int scan = raw_connect(handle);
  PT_CHECK(scan >= 0, "raw connect: %s", strerror(errno));
  close(scan);
  int garbage = raw_connect(handle);
  PT_CHECK(garbage >= 0, "raw connect");
  char junk[200];
  memset(junk, 'x', sizeof junk);
  PT_CHECK(write(garbage, junk, sizeof junk) == (ssize_t)sizeof junk, "write junk");
  int wrong = raw_connect(handle);
  PT_CHECK(wrong >= 0, "raw connect");
  unsigned char hello[64];
  memcpy(hello, handle, 8);       /* right magic */
  memset(hello + 8, 0x42, 56);    /* wrong nonce and payload */
  PT_CHECK(write(wrong, hello, sizeof hello) == (ssize_t)sizeof hello, "write hello");
  int silent = raw_connect(handle);
  PT_CHECK(silent >= 0, "raw connect");
  void *sc = NULL, *rc_ = NULL;
  double t0 = pt_now_s();
  while (!sc || !rc_) {
    if (!sc) PT_CHECK(net->connect(ctx, 0, handle, &sc, NULL) == STRAND_SUCCESS, "connect");
    if (!rc_) PT_CHECK(net->accept(lc, &rc_, NULL) == STRAND_SUCCESS, "accept");
    PT_CHECK(pt_now_s() - t0 < SMOKE_TIMEOUT_S, "real connection not accepted beside strangers");
  }
  unsigned char sb[5000], rb[5000];
  pt_fill(sb, sizeof sb, 9);
  void *reqs[2] = {NULL, NULL}, *d = rb;
  size_t posted = sizeof rb;
  int tag = 0;
  PT_CHECK(net->irecv(rc_, 1, &d, &posted, &tag, NULL, NULL, &reqs[1]) == STRAND_SUCCESS, "irecv");
  PT_CHECK(post_send(sc, sb, sizeof sb, 0, NULL, &reqs[0]) == 0, "isend");
  if (wait_reqs(reqs, NULL, 2)) return -1;
  PT_CHECK(pt_verify(rb, sizeof rb, 9) < 0, "data after strangers");
  close(garbage);
  close(wrong);
  close(silent);
  net->closeListen(lc);
  net->closeSend(sc);
  net->closeRecv(rc_);
  return 0;
}

/* Peer death: a child process connects and dies in the middle of a 64 MiB message. The surviving
 * side must get an error from test (not hang) within SMOKE_TIMEOUT_S. `child_sends` picks which
 * side the child plays. Called before the parent initialises the plugin (fork and threads). */
static int run_child(const char *so, int fd_in, int fd_out, int child_sends) {
  strand_net_v11_t *n = pt_load_table(so, "ncclNetPlugin_v11");
  if (!n) _exit(10);
  void *c = NULL;
  if (n->init(&c, 2, NULL, NULL, NULL) != STRAND_SUCCESS) _exit(11);
  enum { BIG = 64 << 20 };
  unsigned char *buf = malloc(BIG);
  memset(buf, 1, BIG);
  void *comm = NULL;
  double t0 = pt_now_s();
  if (child_sends) {
    char handle[STRAND_NET_HANDLE_MAXSIZE];
    if (read(fd_in, handle, sizeof handle) != (ssize_t)sizeof handle) _exit(12);
    t0 = pt_now_s();
    while (!comm) {
      if (n->connect(c, 0, handle, &comm, NULL) != STRAND_SUCCESS) _exit(13);
      if (pt_now_s() - t0 > SMOKE_TIMEOUT_S) _exit(14);
    }
    void *req = NULL;
    while (!req) {
      if (n->isend(comm, buf, BIG, 0, NULL, NULL, &req) != STRAND_SUCCESS) _exit(15);
      if (pt_now_s() - t0 > SMOKE_TIMEOUT_S) _exit(16);
    }
    /* push a part of the message (a few MiB at most), then die without closing anything */
    int done = 0;
    n->test(req, &done, NULL);
    usleep(2000);
    n->test(req, &done, NULL);
    _exit(done ? 22 : 0);
  } else {
    char handle[STRAND_NET_HANDLE_MAXSIZE];
    void *lc = NULL;
    if (n->listen(c, 0, handle, &lc) != STRAND_SUCCESS) _exit(17);
    if (write(fd_out, handle, sizeof handle) != (ssize_t)sizeof handle) _exit(18);
    while (!comm) {
      if (n->accept(lc, &comm, NULL) != STRAND_SUCCESS) _exit(19);
      if (pt_now_s() - t0 > SMOKE_TIMEOUT_S) _exit(20);
    }
    void *req = NULL, *d = buf;
    size_t sz = BIG;
    int tag = 0;
    if (n->irecv(comm, 1, &d, &sz, &tag, NULL, NULL, &req) != STRAND_SUCCESS) _exit(21);
    for (int i = 0; i < 200; i++) {
      int done;
      n->test(req, &done, NULL);
      usleep(100);
    }
    _exit(0);
  }
}

static pid_t spawn(const char *so, int child_sends, int *to_child, int *from_child) {
  int a[2], b[2];
  if (pipe(a) || pipe(b)) return -1;
  pid_t pid = fork();
  if (pid == 0) {
    close(a[1]);
    close(b[0]);
    run_child(so, a[0], b[1], child_sends);
  }
  close(a[0]);
  close(b[1]);
  *to_child = a[1];
  *from_child = b[0];
  return pid;
}

static int case_peer_death(pid_t pid, int to_child, int from_child, int child_sends) {
  enum { BIG = 64 << 20 };
  unsigned char *buf = malloc(BIG);
  memset(buf, 2, BIG);
  void *comm = NULL;
  double t0 = pt_now_s();
  if (child_sends) {
    char handle[STRAND_NET_HANDLE_MAXSIZE];
    void *lc = NULL;
    PT_CHECK(net->listen(ctx, 0, handle, &lc) == STRAND_SUCCESS, "listen");
    PT_CHECK(write(to_child, handle, sizeof handle) == (ssize_t)sizeof handle, "handle to child");
    while (!comm) {
      PT_CHECK(net->accept(lc, &comm, NULL) == STRAND_SUCCESS, "accept");
      PT_CHECK(pt_now_s() - t0 < SMOKE_TIMEOUT_S, "child never connected");
    }
    net->closeListen(lc);
    void *req = NULL, *d = buf;
    size_t sz = BIG;
    int tag = 0;
    PT_CHECK(net->irecv(comm, 1, &d, &sz, &tag, NULL, NULL, &req) == STRAND_SUCCESS && req,
             "irecv");
    int err = wait_one(req, NULL);
    PT_CHECK(err != STRAND_SUCCESS && err != PT_TIMEOUT,
             "receive from a dead peer completed or timed out instead of failing");
    PT_CHECK(err == STRAND_REMOTE_ERROR || err == STRAND_SYSTEM_ERROR, "error %d", err);
    printf("  receiver saw error %d after %.2f s\n", err, pt_now_s() - t0);
    net->closeRecv(comm);
  } else {
    char handle[STRAND_NET_HANDLE_MAXSIZE];
    PT_CHECK(read(from_child, handle, sizeof handle) == (ssize_t)sizeof handle, "handle");
    while (!comm) {
      PT_CHECK(net->connect(ctx, 0, handle, &comm, NULL) == STRAND_SUCCESS, "connect");
      PT_CHECK(pt_now_s() - t0 < SMOKE_TIMEOUT_S, "could not connect to child");
    }
    strand_result_t err = STRAND_SUCCESS;
    void *req = NULL;
    int r = 0;
    for (int k = 0; k < 64 && r == 0; k++) {
      int rc = post_send(comm, buf, BIG, 0, NULL, &req);
      if (rc != 0) {
        err = rc == -1 ? STRAND_SUCCESS : (strand_result_t)rc;
        r = 1;
        break;
      }
      int w = wait_one(req, NULL);
      PT_CHECK(w != PT_TIMEOUT, "send to the dying peer not done in %d s", SMOKE_TIMEOUT_S);
      if (w != STRAND_SUCCESS) {
        err = (strand_result_t)w;
        r = 1;
      }
    }
    PT_CHECK(r == 1 && (err == STRAND_REMOTE_ERROR || err == STRAND_SYSTEM_ERROR),
             "sending to a dead peer never failed (err %d)", err);
    printf("  sender saw error %d after %.2f s\n", err, pt_now_s() - t0);
    net->closeSend(comm);
  }
  int st;
  waitpid(pid, &st, 0);
  PT_CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "child status %d", st);
  free(buf);
  return 0;
}

int main(int argc, char **argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: %s PLUGIN.so [case]\n", argv[0]);
    return 2;
  }
  const char *which = argc > 2 ? argv[2] : "all";
  signal(SIGPIPE, SIG_IGN);
  bool all = strcmp(which, "all") == 0;
  /* Children first: fork before this process has plugin threads. */
  int to_r = -1, from_r = -1, to_s = -1, from_s = -1;
  pid_t child_recv = -1, child_send = -1;
  if (all || !strcmp(which, "peer_death_recv")) child_send = spawn(argv[1], 1, &to_s, &from_s);
  if (all || !strcmp(which, "peer_death_send")) child_recv = spawn(argv[1], 0, &to_r, &from_r);

  net = pt_load_table(argv[1], "ncclNetPlugin_v11");
  if (!net || strcmp(net->name, "strand-socket") != 0) {
    fprintf(stderr, "ncclNetPlugin_v11 missing or misnamed\n");
    return 1;
  }
  pn = PT_NET(net);
  strand_comm_config_t cfg = {.trafficClass = 0x20};
  if (net->init(&ctx, 1, &cfg, NULL, NULL) != STRAND_SUCCESS) {
    fprintf(stderr, "init failed\n");
    return 1;
  }
  struct {
    const char *name;
    int (*fn)(void);
  } cases[] = {{"props", case_props},       {"transfer", case_transfer},
               {"group", case_group},       {"window", case_window},
               {"reuse", case_reuse},
               {"oversize", case_oversize}, {"stranger", case_stranger}};
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    if (!all && strcmp(which, cases[i].name)) continue;
    double t0 = pt_now_s();
    int r = cases[i].fn();
    printf("%s %s (%.2f s)\n", r == 0 ? "ok" : "FAILED", cases[i].name, pt_now_s() - t0);
  }
  if (child_send > 0) {
    int r = case_peer_death(child_send, to_s, from_s, 1);
    printf("%s peer_death_recv\n", r == 0 ? "ok" : "FAILED");
  }
  if (child_recv > 0) {
    int r = case_peer_death(child_recv, to_r, from_r, 0);
    printf("%s peer_death_send\n", r == 0 ? "ok" : "FAILED");
  }
  if (net->finalize(ctx) != STRAND_SUCCESS) pt_failures++;
  printf("%s\n", pt_failures ? "SOME CASES FAILED" : "all cases passed");
  return pt_failures ? 1 : 0;
}
