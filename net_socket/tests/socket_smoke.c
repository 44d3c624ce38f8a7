/* strand-socket smoke test: loads the plugin .so with dlopen, the way NCCL does, and drives it
 * through ncclNetPlugin_v11 (what NCCL 2.28 picks) from one thread, both ends in one process
 * unless a case needs a second process.
 *
 *   socket_smoke PLUGIN.so [case]     cases: props, transfer, group, window, oversize, eager,
 *                                             stranger,
 *                                             peer_death_recv, peer_death_send, all (default);
 *                                             hostile = strangers_flood, forged_handle,
 *                                             closed_listener, dereg_misuse (issue 14);
 *   socket_smoke PLUGIN.so flap_recv|flap_send DIR ROUNDS   one end of link_flap.sh
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
#include "strand/profiler.h"
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

/* post_send that tests the receive *rreq between tries, as a proxy thread would: a send may wait
 * for the receiver to read the control stream (eager path: the receiver announces receives only
 * when asked). A receive that completes meanwhile becomes NULL, its sizes in got. */
static int post_send_poll(void *sc, void *buf, size_t size, int tag, void *mh, void **req,
                          void **rreq, int *got) {
  double t0 = pt_now_s();
  *req = NULL;
  for (;;) {
    strand_result_t rc = net->isend(sc, buf, size, tag, mh, NULL, req);
    if (rc != STRAND_SUCCESS) return (int)rc;
    if (*req != NULL) return 0;
    if (*rreq != NULL) {
      int done = 0;
      rc = net->test(*rreq, &done, got);
      if (rc != STRAND_SUCCESS) return (int)rc;
      if (done) *rreq = NULL;
    }
    if (pt_now_s() - t0 > SMOKE_TIMEOUT_S) return -1;
  }
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
    int got[16] = {0};
    PT_CHECK(post_send_poll(sc, sb, n, 3, smh, &reqs[0], &reqs[1], &got[8]) == 0, "isend %zu", n);
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

/* Profiler events (tests/common: pt_profiler_case): socket layout, fd = the control socket. */
static int case_profiler(void) {
  return pt_profiler_case(net, 0, STRAND_PROFILER_NET_ID_SOCK, SMOKE_TIMEOUT_S);
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
    if (rc == 0) {
      /* Accepted: the receive's CTS had not been read yet (with the control hand-off a worker
       * writes it, a moment after irecv returned), so the message went eagerly or waits for the
       * CTS. The sender then learns of the error in test() (CTS path) or in its next calls (the
       * receiver reports an eager one); keep calling as a proxy would, bounded. */
      void *q[64];
      int nq = 0;
      q[nq++] = sreq;
      rc = STRAND_SUCCESS;
      for (double t0 = pt_now_s(); rc == STRAND_SUCCESS && pt_now_s() - t0 < SMOKE_TIMEOUT_S;) {
        for (int k = 0; k < nq && rc == STRAND_SUCCESS; k++) {
          int done = 0;
          rc = net->test(q[k], &done, NULL);
          if (done) q[k--] = q[--nq];
        }
        void *again = NULL;
        if (rc == STRAND_SUCCESS && nq < 64) rc = net->isend(sc, sb, 0, 1, NULL, NULL, &again);
        if (again != NULL) q[nq++] = again;
      }
    }
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

/* Eager path (STRAND_SOCKET_EAGER_BYTES, sk_xfer.c): both ends must apply the same matching rule
 * (each message, in send order, takes the oldest posted receive with a free entry for its tag;
 * any entry when n == 1) whether a message went eagerly, through a CTS, before or after its
 * receive was posted, and whatever mix of small and large messages makes the receiver switch
 * between announcing receives and not. Seeded random scenarios: grouped and single receives,
 * sizes on both sides of the eager and inline limits, and a random interleaving of posting
 * receives, posting the next send (one try: a NULL request leaves it for later) and testing
 * requests. Every entry must hold exactly the message the rule gives it. */
enum { EI_RECVS = 10, EI_MSGS = EI_RECVS * 3, EI_POSTED = 70000 };
typedef struct {
  int n, tags[3];
  int want[3]; /* message index the rule gives each entry */
} ei_recv_t;

static unsigned ei_rand(unsigned *st) {
  *st = *st * 1103515245u + 12345u;
  return (*st >> 16) & 0x7fff;
}

/* The rule over the whole sequences (every receive posted before any message): the reference. */
static bool ei_reference(ei_recv_t *rv, int nr, const int *mtag, int nm) {
  int taken[EI_RECVS][3];
  memset(taken, 0, sizeof taken);
  for (int m = 0; m < nm; m++) {
    bool placed = false;
    for (int r = 0; r < nr && !placed; r++)
      for (int j = 0; j < rv[r].n && !placed; j++)
        if (!taken[r][j] && (rv[r].n == 1 || rv[r].tags[j] == mtag[m])) {
          taken[r][j] = 1;
          rv[r].want[j] = m;
          placed = true;
        }
    if (!placed) return false;
  }
  for (int r = 0; r < nr; r++)
    for (int j = 0; j < rv[r].n; j++)
      if (!taken[r][j]) return false;
  return true;
}

/* Runs one scenario: receives rv, messages (tags, sizes) in send order. The schedule says what
 * comes next: 0 post the next receive, 1 try the next send once, 2 test one pending request of
 * each side; NULL = random. After the schedule, only tests until everything is done. */
static int ei_run(void *sc, void *rc_, unsigned seed, ei_recv_t *rv, int nr, const int *mtag,
                  const size_t *msize, int nm, const uint8_t *sched, int nsched, unsigned *st) {
  unsigned char *sbuf[EI_MSGS], *rbuf[EI_RECVS][3];
  for (int m = 0; m < nm; m++) {
    sbuf[m] = malloc(msize[m] + 1);
    pt_fill(sbuf[m], msize[m], seed * 64u + (unsigned)m);
  }
  void *rreq[EI_RECVS] = {0}, *sreq[EI_MSGS] = {0};
  bool rdone[EI_RECVS] = {0}, sdone[EI_MSGS] = {0};
  int got[EI_RECVS][8];
  int nr_posted = 0, ns_posted = 0, left = nr + nm, step = 0;
  const double t0 = pt_now_s();
  while (left > 0) {
    PT_CHECK(pt_now_s() - t0 < SMOKE_TIMEOUT_S, "seed %u: %d requests not done (%d receives, %d "
             "sends posted)", seed, left, nr_posted, ns_posted);
    unsigned op = sched == NULL       ? ei_rand(st) % 4
                  : step < nsched     ? sched[step]
                  : nr_posted < nr    ? 0
                  : ns_posted < nm    ? 1 + (unsigned)(step & 1)
                                      : 2;
    step++;
    if (op == 0 && nr_posted < nr) {
      ei_recv_t *r = &rv[nr_posted];
      void *d[3];
      size_t posted[3];
      for (int j = 0; j < r->n; j++) {
        rbuf[nr_posted][j] = calloc(1, EI_POSTED);
        d[j] = rbuf[nr_posted][j];
        posted[j] = EI_POSTED;
      }
      strand_result_t rc = net->irecv(rc_, r->n, d, posted, r->tags, NULL, NULL, &rreq[nr_posted]);
      PT_CHECK(rc == STRAND_SUCCESS && rreq[nr_posted], "seed %u: irecv %d: %d", seed, nr_posted,
               rc);
      nr_posted++;
    } else if (op == 1 && ns_posted < nm) {
      strand_result_t rc = net->isend(sc, sbuf[ns_posted], msize[ns_posted], mtag[ns_posted],
                                      NULL, NULL, &sreq[ns_posted]);
      PT_CHECK(rc == STRAND_SUCCESS, "seed %u: isend %d: %d", seed, ns_posted, rc);
      if (sreq[ns_posted]) ns_posted++;
    } else if (op >= 2) {
      /* test one pending request of each side (a proxy thread polls both) */
      for (int side = 0; side < 2; side++) {
        int lim = side ? ns_posted : nr_posted, pick = -1;
        for (int k = 0; k < lim; k++) {
          int i = (int)((k + ei_rand(st)) % (unsigned)lim);
          if (!(side ? sdone[i] : rdone[i])) {
            pick = i;
            break;
          }
        }
        if (pick < 0) continue;
        int done = 0;
        strand_result_t rc = net->test(side ? sreq[pick] : rreq[pick], &done,
                                       side ? NULL : got[pick]);
        PT_CHECK(rc == STRAND_SUCCESS, "seed %u: test %s %d: %d", seed, side ? "send" : "recv",
                 pick, rc);
        if (done) {
          (side ? sdone : rdone)[pick] = true;
          left--;
        }
      }
    }
  }
  for (int r = 0; r < nr; r++) {
    for (int j = 0; j < rv[r].n; j++) {
      int m = rv[r].want[j];
      PT_CHECK((size_t)got[r][j] == msize[m], "seed %u: receive %d entry %d (tag %d) got %d "
               "bytes, the rule gives it message %d of %zu bytes", seed, r, j, rv[r].tags[j],
               got[r][j], m, msize[m]);
      PT_CHECK(pt_verify(rbuf[r][j], msize[m], seed * 64u + (unsigned)m) < 0,
               "seed %u: receive %d entry %d does not hold message %d", seed, r, j, m);
      free(rbuf[r][j]);
    }
  }
  for (int m = 0; m < nm; m++) free(sbuf[m]);
  return 0;
}

static int ei_scenario(void *sc, void *rc_, unsigned seed) {
  /* both sides of the inline limit (16 KiB) and of the largest eager limit (32 KiB, the default) */
  static const size_t kinds[] = {0, 8, 100, 16385, 32768, 32769, 65536};
  ei_recv_t rv[EI_RECVS];
  int mtag[EI_MSGS], nm = 0;
  unsigned st = seed;
  /* Receives, then messages whose tags fill them, shuffled until the rule places them all. */
  for (int tries = 0;; tries++) {
    nm = 0;
    for (int r = 0; r < EI_RECVS; r++) {
      rv[r].n = 1 + (int)(ei_rand(&st) % 3);
      for (int j = 0; j < rv[r].n; j++) {
        rv[r].tags[j] = rv[r].n == 1 ? 0 : 1 + (int)(ei_rand(&st) % 3);
        mtag[nm++] = rv[r].n == 1 ? 1 + (int)(ei_rand(&st) % 3) : rv[r].tags[j];
      }
    }
    for (int i = nm - 1; i > 0; i--) {
      int k = (int)(ei_rand(&st) % (unsigned)(i + 1)), t = mtag[i];
      mtag[i] = mtag[k];
      mtag[k] = t;
    }
    if (ei_reference(rv, EI_RECVS, mtag, nm)) break;
    PT_CHECK(tries < 1000, "seed %u: no complete scenario", seed);
  }
  size_t msize[EI_MSGS];
  for (int m = 0; m < nm; m++) /* runs of one kind: streaks of small and of large messages */
    msize[m] = (m > 0 && ei_rand(&st) % 3) ? msize[m - 1] : kinds[ei_rand(&st) % 7];
  return ei_run(sc, rc_, seed, rv, EI_RECVS, mtag, msize, nm, NULL, 0, &st);
}

/* Every interleaving of posting 3 receives ({any}, {tag 1, tag 2}, {any}) and 4 sends (tags
 * 2, 1, 1, 2), with every mix of small (8 B, eager) and large (40000 B: above any eager limit,
 * CTS path) messages: 35 orders x 16 size mixes, each followed by tests until done. */
static int ei_exhaustive(void *sc, void *rc_) {
  ei_recv_t base[3] = {{1, {0}, {0}}, {2, {1, 2}, {0}}, {1, {0}, {0}}};
  const int mtag[4] = {2, 1, 1, 2};
  unsigned st = 7, seed = 1000;
  for (unsigned mix = 0; mix < 16; mix++) {
    size_t msize[4];
    for (int m = 0; m < 4; m++) msize[m] = (mix >> m) & 1 ? 40000 : 8;
    for (unsigned bits = 0; bits < 128; bits++) {
      if (__builtin_popcount(bits) != 3) continue; /* which of the 7 steps post a receive */
      uint8_t sched[7];
      for (int k = 0; k < 7; k++) sched[k] = (bits >> k) & 1 ? 0 : 1;
      ei_recv_t rv[3];
      memcpy(rv, base, sizeof rv);
      PT_CHECK(ei_reference(rv, 3, mtag, 4), "exhaustive scenario incomplete");
      if (ei_run(sc, rc_, seed++, rv, 3, mtag, msize, 4, sched, 7, &st)) return -1;
    }
  }
  return 0;
}

static int case_eager(void) {
  void *sc, *rc_;
  if (connect_pair(&sc, &rc_)) return -1;
  /* One connection for every scenario: credits, the receiver's mode and the sender's view carry
   * over from one to the next, as they do in a long NCCL job. */
  for (unsigned seed = 1; seed <= 60; seed++)
    if (ei_scenario(sc, rc_, seed)) return -1;
  if (ei_exhaustive(sc, rc_)) return -1;
  /* Oversize sent eagerly (no receive known): an error on the receiver, then the sender. */
  unsigned char big[200], small[100] = {0};
  memset(big, 0x5a, sizeof big);
  void *sreq = NULL, *rreq = NULL, *d = small;
  size_t posted = sizeof small;
  int tag = 9;
  PT_CHECK(net->isend(sc, big, sizeof big, tag, NULL, NULL, &sreq) == STRAND_SUCCESS,
           "eager isend of 200 bytes");
  PT_CHECK(net->irecv(rc_, 1, &d, &posted, &tag, NULL, NULL, &rreq) == STRAND_SUCCESS && rreq,
           "irecv after an eager oversize message");
  /* Sent eagerly: done on the sender once written, which with STRAND_SOCKET_SEND_WRITE=test is in
   * its first test(); the sender tests it, as NCCL's proxy does. */
  if (sreq != NULL) PT_CHECK(wait_one(sreq, NULL) == STRAND_SUCCESS, "eager oversize send");
  /* Not sent eagerly (no credit at hand): it goes through the CTS and fails on the sender. */
  else PT_CHECK(post_send(sc, big, sizeof big, tag, NULL, &sreq) > 0, "oversize send");
  int err = wait_one(rreq, NULL);
  PT_CHECK(err != STRAND_SUCCESS && err != PT_TIMEOUT, "receiver did not see the oversize error");
  PT_CHECK(small[0] == 0, "oversize message copied into the receive");
  net->closeSend(sc);
  net->closeRecv(rc_);
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

/* ---- hostile traffic and misuse (issue 14); run with STRAND_SOCKET_CONNECT_TIMEOUT_MS short ---- */

/* Offsets in the handle strand-socket's listen writes (sk_wire.h): magic, address, nonce. */
enum { H_MAGIC = 0, H_ADDR = 8, H_NONCE = 40, H_AFTER_NONCE = 48 };

static bool abi_result(int r) { return r >= STRAND_SUCCESS && r <= STRAND_REMOTE_ERROR; }

static int count_fds(void) {
  int n = 0;
  char path[64];
  for (int fd = 0; fd < 4096; fd++) {
    snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
    if (access(path, F_OK) == 0) n++;
  }
  return n;
}

/* Connects to listener lc (handle h) and accepts, within 10 s, then moves one message of `len`
 * bytes (at most 4096) and checks it. Returns the seconds the connect/accept took, or -1. */
static double connect_accept_verify(void *lc, void *h, size_t len, int seed, const char *what) {
  void *sc = NULL, *rc_ = NULL;
  double t0 = pt_now_s();
  while (!sc || !rc_) {
    if (!sc) PT_CHECK(net->connect(ctx, 0, h, &sc, NULL) == STRAND_SUCCESS, "connect (%s)", what);
    if (!rc_) PT_CHECK(net->accept(lc, &rc_, NULL) == STRAND_SUCCESS, "accept (%s)", what);
    PT_CHECK(pt_now_s() - t0 < 10, "no connection in 10 s (%s)", what);
  }
  double took = pt_now_s() - t0;
  unsigned char sb[4096], rb[4096];
  PT_CHECK(len <= sizeof sb, "message too large for the helper");
  pt_fill(sb, len, seed);
  void *reqs[2] = {NULL, NULL}, *d = rb;
  size_t posted = len;
  int tag = 0;
  PT_CHECK(net->irecv(rc_, 1, &d, &posted, &tag, NULL, NULL, &reqs[1]) == STRAND_SUCCESS, "irecv");
  PT_CHECK(post_send(sc, sb, len, 0, NULL, &reqs[0]) == 0, "isend");
  if (wait_reqs(reqs, NULL, 2)) return -1;
  PT_CHECK(pt_verify(rb, len, seed) < 0, "data (%s)", what);
  net->closeSend(sc);
  net->closeRecv(rc_);
  return took;
}

/* 100 silent strangers and 20 sending garbage on the listen port: a real connect/accept still
 * completes in < 2 s, and once they leave the listener holds no descriptor for them. */
static int case_strangers_flood(void) {
  char handle[STRAND_NET_HANDLE_MAXSIZE];
  void *lc = NULL;
  PT_CHECK(net->listen(ctx, 0, handle, &lc) == STRAND_SUCCESS, "listen");
  int baseline = count_fds();
  enum { SILENT = 100, GARBAGE = 20 };
  int s[SILENT + GARBAGE];
  for (int i = 0; i < SILENT + GARBAGE; i++) {
    s[i] = raw_connect(handle);
    PT_CHECK(s[i] >= 0, "raw connect %d: %s", i, strerror(errno));
    if (i >= SILENT) PT_CHECK(write(s[i], "\x17garbage\x03\x01\x00", 11) == 11, "write");
  }
  for (int k = 0; k < 20; k++) { /* the listener meets them before the real peer comes */
    void *none = NULL;
    PT_CHECK(net->accept(lc, &none, NULL) == STRAND_SUCCESS && none == NULL, "accept");
    usleep(2000);
  }
  double took = connect_accept_verify(lc, handle, 3000, 5, "beside strangers");
  if (took < 0) return -1;
  printf("  real connect/accept beside %d strangers: %.3f s\n", SILENT + GARBAGE, took);
  PT_CHECK(took < 2.0, "real connect/accept took %.2f s beside strangers", took);
  /* the connection's own descriptors are gone; now the strangers leave */
  for (int i = 0; i < SILENT + GARBAGE; i++) close(s[i]);
  int n = count_fds();
  double t0 = pt_now_s();
  while (n != baseline && pt_now_s() - t0 < 5) {
    void *none = NULL;
    PT_CHECK(net->accept(lc, &none, NULL) == STRAND_SUCCESS && none == NULL, "accept");
    usleep(5000);
    n = count_fds();
  }
  printf("  descriptors: %d before the strangers, %d after they left\n", baseline, n);
  PT_CHECK(n == baseline, "listener still holds %d descriptors after the strangers left",
           n - baseline);
  PT_CHECK(net->closeListen(lc) == STRAND_SUCCESS, "closeListen");
  return 0;
}

/* connect with `handle` until it errs; it must never hand out a comm, never take longer than
 * bound_s, and return a code the ABI defines. Returns the code, or -1 after a failed check. */
static int connect_must_fail(void *handle, double bound_s, const char *what) {
  double t0 = pt_now_s();
  for (;;) {
    void *sc = NULL;
    double c0 = pt_now_s();
    strand_result_t r = net->connect(ctx, 0, handle, &sc, NULL);
    PT_CHECK(pt_now_s() - c0 < 1.0, "%s: connect blocked %.2f s", what, pt_now_s() - c0);
    if (r != STRAND_SUCCESS) {
      PT_CHECK(sc == NULL, "%s: connect failed but handed out a comm", what);
      PT_CHECK(abi_result(r), "%s: connect returned %d, not an ncclResult_t a plugin returns",
               what, r);
      printf("  %s: connect returned %d after %.2f s\n", what, r, pt_now_s() - t0);
      return (int)r;
    }
    if (sc != NULL) {
      net->closeSend(sc);
      PT_CHECK(false, "%s: connect succeeded", what);
    }
    PT_CHECK(pt_now_s() - t0 < bound_s, "%s: connect neither failed nor succeeded in %.0f s", what,
             bound_s);
    usleep(1000);
  }
}

/* Forged, zeroed, truncated and wrong-nonce handles: connect fails (never crashes, never succeeds)
 * while the real listener keeps polling accept, within the connect bound. */
static int case_forged_handle(void) {
  char good[STRAND_NET_HANDLE_MAXSIZE];
  void *lc = NULL;
  PT_CHECK(net->listen(ctx, 0, good, &lc) == STRAND_SUCCESS, "listen");
  char h[STRAND_NET_HANDLE_MAXSIZE];
  srand(1234);
  for (size_t i = 0; i < sizeof h; i++) h[i] = (char)rand();
  PT_CHECK(connect_must_fail(h, 5, "random bytes") >= 0, "random");
  memset(h, 0, sizeof h);
  PT_CHECK(connect_must_fail(h, 5, "zeroed handle") >= 0, "zeroed");
  memcpy(h, good, sizeof h); /* truncated: magic and address survive, the rest is gone */
  memset(h + H_NONCE, 0, sizeof h - H_NONCE);
  PT_CHECK(connect_must_fail(h, 5, "truncated handle") >= 0, "truncated");
  memcpy(h, good, sizeof h); /* the old guard: a pointer with its XOR check, pointing nowhere */
  uint64_t fake = 0x10, key = 0x9e3779b97f4a7c15ULL, check = fake ^ key;
  memcpy(h + H_AFTER_NONCE, &fake, 8);
  memcpy(h + H_AFTER_NONCE + 8, &check, 8);
  uint64_t bad_nonce;
  memcpy(&bad_nonce, good + H_NONCE, 8);
  bad_nonce ^= 0x5a5a;
  memcpy(h + H_NONCE, &bad_nonce, 8);
  /* wrong nonce on a live listener: only the listener can tell, so poll it meanwhile */
  double t0 = pt_now_s();
  int r = -1;
  for (;;) {
    void *sc = NULL, *rc_ = NULL;
    strand_result_t cr = net->connect(ctx, 0, h, &sc, NULL);
    PT_CHECK(net->accept(lc, &rc_, NULL) == STRAND_SUCCESS && rc_ == NULL,
             "accept handed out a comm for a forged handle");
    PT_CHECK(sc == NULL, "forged handle (wrong nonce, forged pointer): connect succeeded");
    if (cr != STRAND_SUCCESS) {
      r = (int)cr;
      break;
    }
    PT_CHECK(pt_now_s() - t0 < 5, "wrong nonce: connect neither failed nor succeeded in 5 s");
    usleep(1000);
  }
  printf("  wrong nonce + forged pointer: connect returned %d after %.2f s\n", r, pt_now_s() - t0);
  PT_CHECK(abi_result(r), "wrong nonce: connect returned %d", r);
  /* the listener still works for the real handle */
  void *sc = NULL, *rc_ = NULL;
  t0 = pt_now_s();
  while (!sc || !rc_) {
    if (!sc) PT_CHECK(net->connect(ctx, 0, good, &sc, NULL) == STRAND_SUCCESS, "connect");
    if (!rc_) PT_CHECK(net->accept(lc, &rc_, NULL) == STRAND_SUCCESS, "accept");
    PT_CHECK(pt_now_s() - t0 < SMOKE_TIMEOUT_S, "real connection after forged handles");
  }
  net->closeSend(sc);
  net->closeRecv(rc_);
  net->closeListen(lc);
  return 0;
}

/* A listener that is gone: connect ends, within the connect timeout (+ slack), with
 * STRAND_REMOTE_ERROR, a code the ABI defines. */
static int case_closed_listener(void) {
  char h[STRAND_NET_HANDLE_MAXSIZE];
  void *lc = NULL;
  PT_CHECK(net->listen(ctx, 0, h, &lc) == STRAND_SUCCESS, "listen");
  PT_CHECK(net->closeListen(lc) == STRAND_SUCCESS, "closeListen");
  const char *env = getenv("STRAND_SOCKET_CONNECT_TIMEOUT_MS");
  double bound = (env ? atof(env) / 1000.0 : 10.0) + 3.0;
  int r = connect_must_fail(h, bound, "closed listener");
  PT_CHECK(r == STRAND_REMOTE_ERROR, "connect to a closed listener returned %d, want %d "
           "(STRAND_REMOTE_ERROR)", r, STRAND_REMOTE_ERROR);
  return 0;
}

/* A connect the caller stops calling (it gave up, or lost the handle) must not hold its streams'
 * descriptors for the life of the process: once it has not been called for twice the connect
 * timeout, the next connect() of any comm closes them. A late call with the old handle then starts
 * a fresh connect, which completes. */
static int case_abandoned_connect(void) {
  char h[STRAND_NET_HANDLE_MAXSIZE], garbage[STRAND_NET_HANDLE_MAXSIZE];
  void *lc = NULL, *sc = NULL;
  PT_CHECK(net->listen(ctx, 0, h, &lc) == STRAND_SUCCESS, "listen");
  int baseline = count_fds();
  /* One call: the streams start connecting; the listener is never asked to accept, so it stays
   * in progress. */
  PT_CHECK(net->connect(ctx, 0, h, &sc, NULL) == STRAND_SUCCESS && sc == NULL, "first connect");
  int started = count_fds();
  PT_CHECK(started > baseline, "connect in progress holds no descriptor (%d -> %d)", baseline,
           started);
  const char *env = getenv("STRAND_SOCKET_CONNECT_TIMEOUT_MS");
  double limit = 2.0 * (env ? atof(env) / 1000.0 : 10.0);
  if (limit < 2.0) limit = 2.0;
  usleep((useconds_t)((limit + 0.5) * 1e6));
  /* Any later connect() reaps it, even one that is refused for its garbage handle. */
  memset(garbage, 0x5a, sizeof garbage);
  PT_CHECK(net->connect(ctx, 0, garbage, &sc, NULL) == STRAND_INVALID_ARGUMENT && sc == NULL,
           "connect with a garbage handle");
  int after = count_fds();
  printf("  descriptors: %d with the listener, %d while connecting, %d after %.1f s idle\n",
         baseline, started, after, limit);
  PT_CHECK(after == baseline, "abandoned connect still holds %d descriptors", after - baseline);
  /* The old handle still works: a fresh connect. */
  if (connect_accept_verify(lc, h, 100, 9, "after the abandoned attempt") < 0) return -1;
  PT_CHECK(net->closeListen(lc) == STRAND_SUCCESS, "closeListen");
  return 0;
}

/* deregMr twice, and deregMr of pointers regMr never gave out: refused, never a crash. */
static int case_dereg_misuse(void) {
  void *sc, *rc_;
  if (connect_pair(&sc, &rc_)) return -1;
  static unsigned char buf[4096];
  void *mh = NULL;
  PT_CHECK(net->regMr(sc, buf, sizeof buf, STRAND_PTR_HOST, &mh) == STRAND_SUCCESS && mh, "regMr");
  PT_CHECK(net->deregMr(sc, mh) == STRAND_SUCCESS, "first deregMr");
  int r = net->deregMr(sc, mh);
  PT_CHECK(r == STRAND_INVALID_ARGUMENT, "second deregMr returned %d, want %d", r,
           STRAND_INVALID_ARGUMENT);
  uint64_t junk[4] = {0xdeadbeef, 1, 2, 3};
  r = net->deregMr(sc, junk);
  PT_CHECK(r == STRAND_INVALID_ARGUMENT, "deregMr of a foreign pointer returned %d", r);
  r = net->deregMr(sc, (void *)(uintptr_t)0x10);
  PT_CHECK(r == STRAND_INVALID_ARGUMENT, "deregMr of a garbage pointer returned %d", r);
  /* a live registration is still fine afterwards */
  PT_CHECK(net->regMr(rc_, buf, sizeof buf, STRAND_PTR_HOST, &mh) == STRAND_SUCCESS, "regMr");
  PT_CHECK(net->deregMr(rc_, mh) == STRAND_SUCCESS, "deregMr");
  net->closeSend(sc);
  net->closeRecv(rc_);
  return 0;
}

/* ---- link flap across two network namespaces (driven by link_flap.sh) -------------------------
 *   socket_smoke PLUGIN flap_recv DIR ROUNDS   listens, publishes the handle in DIR/handle,
 *                                              accepts, receives ROUNDS messages
 *   socket_smoke PLUGIN flap_send DIR ROUNDS   reads DIR/handle, connects, sends ROUNDS messages
 * One 1 MiB message per round (data streams, not inline), 50 ms apart, each verified by content.
 * With FLAP_EXPECT_ERROR=1 the run passes only if test() fails with STRAND_REMOTE_ERROR (the link
 * stayed down longer than STRAND_SOCKET_PEER_TIMEOUT_S); otherwise every round must arrive intact.
 * DIR/connected appears once the comm is up, for the script to time the flap. */
enum { FLAP_MSG = 1 << 20 };

static int flap_run(bool sender, const char *dir, int rounds) {
  char path[512], tmp[512];
  unsigned char handle[STRAND_NET_HANDLE_MAXSIZE];
  void *lc = NULL, *comm = NULL;
  bool expect_error = getenv("FLAP_EXPECT_ERROR") && atoi(getenv("FLAP_EXPECT_ERROR")) == 1;
  snprintf(path, sizeof path, "%s/handle", dir);
  double t0 = pt_now_s();
  if (!sender) {
    PT_CHECK(net->listen(ctx, 0, handle, &lc) == STRAND_SUCCESS, "listen");
    snprintf(tmp, sizeof tmp, "%s/handle.tmp", dir);
    FILE *f = fopen(tmp, "wb");
    PT_CHECK(f && fwrite(handle, sizeof handle, 1, f) == 1 && fclose(f) == 0, "write handle");
    PT_CHECK(rename(tmp, path) == 0, "rename handle");
    while (!comm) {
      PT_CHECK(net->accept(lc, &comm, NULL) == STRAND_SUCCESS, "accept");
      PT_CHECK(pt_now_s() - t0 < SMOKE_TIMEOUT_S, "no connection in %d s", SMOKE_TIMEOUT_S);
      if (!comm) usleep(1000);
    }
  } else {
    FILE *f = NULL;
    while (!(f = fopen(path, "rb"))) {
      PT_CHECK(pt_now_s() - t0 < SMOKE_TIMEOUT_S, "no handle in %d s", SMOKE_TIMEOUT_S);
      usleep(10000);
    }
    PT_CHECK(fread(handle, sizeof handle, 1, f) == 1, "read handle");
    fclose(f);
    while (!comm) {
      PT_CHECK(net->connect(ctx, 0, handle, &comm, NULL) == STRAND_SUCCESS, "connect");
      PT_CHECK(pt_now_s() - t0 < SMOKE_TIMEOUT_S, "not connected in %d s", SMOKE_TIMEOUT_S);
      if (!comm) usleep(1000);
    }
    snprintf(path, sizeof path, "%s/connected", dir);
    FILE *m = fopen(path, "w");
    if (m) fclose(m);
  }
  unsigned char *buf = malloc(FLAP_MSG);
  PT_CHECK(buf != NULL, "malloc");
  for (int i = 0; i < rounds; i++) {
    void *req = NULL;
    if (sender) {
      pt_fill(buf, FLAP_MSG, (unsigned)i + 100);
      strand_result_t r = STRAND_SUCCESS;
      double s0 = pt_now_s();
      while (req == NULL && r == STRAND_SUCCESS && pt_now_s() - s0 < 60)
        r = net->isend(comm, buf, FLAP_MSG, 1, NULL, NULL, &req);
      if (r == STRAND_SUCCESS && req == NULL) r = (strand_result_t)PT_TIMEOUT;
      if (r == STRAND_SUCCESS) r = (strand_result_t)pt_wait(&pn, req, NULL, 60);
      if (r != STRAND_SUCCESS) {
        printf("flap_send: round %d: error %d after %.2f s\n", i, r, pt_now_s() - t0);
        net->closeSend(comm); /* a failed comm is still closed and freed (LeakSanitizer) */
        free(buf);
        PT_CHECK(expect_error && r == STRAND_REMOTE_ERROR, "send round %d returned %d", i, r);
        return 0;
      }
    } else {
      memset(buf, 0, FLAP_MSG);
      void *d = buf;
      size_t posted = FLAP_MSG;
      int tag = 1, sizes[1] = {0};
      strand_result_t r = net->irecv(comm, 1, &d, &posted, &tag, NULL, NULL, &req);
      if (r == STRAND_SUCCESS && req == NULL) r = STRAND_INTERNAL_ERROR;
      if (r == STRAND_SUCCESS) r = (strand_result_t)pt_wait(&pn, req, sizes, 60);
      if (r != STRAND_SUCCESS) {
        printf("flap_recv: round %d: error %d after %.2f s\n", i, r, pt_now_s() - t0);
        net->closeRecv(comm);
        if (lc) net->closeListen(lc);
        free(buf);
        PT_CHECK(expect_error && r == STRAND_REMOTE_ERROR, "recv round %d returned %d", i, r);
        return 0;
      }
      PT_CHECK(sizes[0] == FLAP_MSG, "round %d: %d bytes", i, sizes[0]);
      long bad = pt_verify(buf, FLAP_MSG, (unsigned)i + 100);
      PT_CHECK(bad < 0, "round %d: byte %ld differs", i, bad);
    }
    usleep(50000);
  }
  printf("%s: %d rounds intact in %.2f s\n", sender ? "flap_send" : "flap_recv", rounds,
         pt_now_s() - t0);
  free(buf);
  if (sender) net->closeSend(comm);
  else net->closeRecv(comm);
  if (lc) net->closeListen(lc);
  PT_CHECK(!expect_error, "every round succeeded although the link stayed down past the timeout");
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
    /* Push a part of the message, then die without closing anything. The parent does not read
     * until this process is gone, so without workers this one test() stops once the socket
     * buffers are full (a few MiB of the 64); with workers they get only the moment until
     * _exit. (It used to test twice around a 2 ms sleep while the parent drained: under load
     * the whole message could get through, and the "dead peer" receive then completed.) */
    int done = 0;
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
      int done = 0;
      /* a completed request may not be tested again (the whole message can get through first) */
      if (n->test(req, &done, NULL) != STRAND_SUCCESS || done) break;
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
    /* Read nothing until the sender is dead (see run_child), then drain what it left. */
    int st;
    PT_CHECK(waitpid(pid, &st, 0) == pid, "waitpid");
    pid = -1;
    PT_CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "child status %d", st);
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
  if (pid > 0) {
    int st;
    waitpid(pid, &st, 0);
    PT_CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "child status %d", st);
  }
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
  /* The "hostile" cases are not in "all": they want a short STRAND_SOCKET_CONNECT_TIMEOUT_MS
   * (meson.build runs them as smoke-hostile). */
  bool hostile = strcmp(which, "hostile") == 0;
  struct {
    const char *name;
    int (*fn)(void);
    bool is_hostile;
  } cases[] = {{"props", case_props, false},       {"transfer", case_transfer, false},
               {"group", case_group, false},       {"window", case_window, false},
               {"reuse", case_reuse, false},       {"profiler", case_profiler, false},
               {"oversize", case_oversize, false}, {"stranger", case_stranger, false},
               {"eager", case_eager, false},
               {"strangers_flood", case_strangers_flood, true},
               {"forged_handle", case_forged_handle, true},
               {"closed_listener", case_closed_listener, true},
               {"dereg_misuse", case_dereg_misuse, true},
               {"abandoned_connect", case_abandoned_connect, true}};
  if (!strcmp(which, "flap_recv") || !strcmp(which, "flap_send")) {
    if (argc < 5) {
      fprintf(stderr, "usage: %s PLUGIN.so %s DIR ROUNDS\n", argv[0], which);
      return 2;
    }
    int r = flap_run(!strcmp(which, "flap_send"), argv[3], atoi(argv[4]));
    printf("%s %s\n", r == 0 && !pt_failures ? "ok" : "FAILED", which);
    return r == 0 && !pt_failures ? 0 : 1;
  }
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    bool pick = all ? !cases[i].is_hostile : hostile ? cases[i].is_hostile
                                                     : strcmp(which, cases[i].name) == 0;
    if (!pick) continue;
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
