/* strand-socket eager path (sk_xfer.c): the matching rule both ends must agree on, the credits,
 * and the point of the path — no CTS per receive once small messages stream — driven through
 * sk_isend / sk_irecv / sk_test on two comms joined by a socketpair (one control stream, no data
 * streams: every message here fits inline, up to STRAND_SOCKET_INLINE). No listener, no threads,
 * no TCP: each run takes microseconds, so the interleavings can be enumerated exhaustively.
 *
 * The reference is the rule itself over the whole sequences: each message, in send order, takes
 * the oldest receive with a free entry for its tag (any entry when the receive has one buffer).
 * Whether a message went eagerly or through a CTS, before or after its receive was posted, every
 * buffer must end up holding exactly the message the rule gives it.
 *
 * Run with the argument "handoff" (meson: eager-handoff), the same scenarios run again with the
 * control hand-off on (sk_handoff.c): one worker thread, attached to both comms, spinning for the
 * whole run, so every control write goes through the hand-off ring; then the cases only it has:
 * a write that fails on the worker, and a close with control bytes still in the ring.
 *
 * Run with "defer" (meson: eager-defer), they run with STRAND_SOCKET_SEND_WRITE=test: isend only
 * queues a small send's bytes and the next test() or isend writes them; then the cases only it
 * has: nothing reaches the peer before test(), the first test() completes the send, two isends
 * before a test go out in one write, and a close writes what is still queued. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <pthread.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "sk.h"
#include "strand/params.h"

enum { MAXR = 4, MAXM = 8, POSTED = 16384 };

typedef struct {
  sk_comm_t *s, *r;
} pair_t;

static double now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* Every wait below is bounded in time, not in rounds: with the hand-off a send completes when the
 * worker has written it, and on a loaded CI machine the worker may wait for a core. */
#define WAIT_S 20.0

static pair_t pair_open(void) {
  int fds[2];
  assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, fds), 0);
  pair_t p;
  sk_comm_t *c[2];
  for (int i = 0; i < 2; i++) {
    c[i] = calloc(1, sizeof *c[i]);
    assert_non_null(c[i]);
    c[i]->type = i == 0 ? SK_COMM_SEND : SK_COMM_RECV;
    c[i]->ctrl_fd = fds[i];
    snprintf(c[i]->peer, sizeof c[i]->peer, "socketpair");
    assert_int_equal(sk_comm_init_data(c[i]), STRAND_SUCCESS);
    /* hand-off runs: the worker takes the control ring (no data streams here) */
    if (sk_workers_count() > 0) assert_int_equal(sk_workers_attach(c[i]), STRAND_SUCCESS);
    assert_true((c[i]->handoff != NULL) == (sk_workers_count() > 0));
  }
  p.s = c[0];
  p.r = c[1];
  return p;
}

/* As a close does: take the comm from the worker, deliver what it still holds, free it. */
static void comm_close(sk_comm_t *c) {
  sk_workers_detach(c);
  sk_comm_flush_ctrl(c, 2000);
  sk_comm_free(c);
}

static void pair_close(pair_t p) {
  comm_close(p.s);
  comm_close(p.r);
}

typedef struct {
  int n, tags[3], want[3];
} recv_t;

/* The rule over the whole sequences; false if some message or entry stays unmatched. */
static bool reference(recv_t *rv, int nr, const int *mtag, int nm) {
  bool taken[MAXR][3] = {{false}};
  for (int m = 0; m < nm; m++) {
    bool placed = false;
    for (int r = 0; r < nr && !placed; r++)
      for (int j = 0; j < rv[r].n && !placed; j++)
        if (!taken[r][j] && (rv[r].n == 1 || rv[r].tags[j] == mtag[m])) {
          taken[r][j] = placed = true;
          rv[r].want[j] = m;
        }
    if (!placed) return false;
  }
  for (int r = 0; r < nr; r++)
    for (int j = 0; j < rv[r].n; j++)
      if (!taken[r][j]) return false;
  return true;
}

static unsigned char pattern(int m, size_t i) { return (unsigned char)(m * 31 + (int)i * 7 + 1); }

/* One run: sched[k] = 0 posts the next receive, 1 the next send; every pending request is tested
 * once after each step, then until all are done (bounded). */
static void run(pair_t p, recv_t *rv, int nr, const int *mtag, const size_t *msize, int nm,
                const uint8_t *sched) {
  static unsigned char sbuf[MAXM][POSTED], rbuf[MAXR][3][POSTED];
  void *rreq[MAXR] = {0}, *sreq[MAXM] = {0};
  bool rdone[MAXR] = {false}, sdone[MAXM] = {false};
  int got[MAXR][SK_MAX_RECVS];
  for (int m = 0; m < nm; m++)
    for (size_t i = 0; i < msize[m]; i++) sbuf[m][i] = pattern(m, i);
  int nr_posted = 0, ns_posted = 0, left = nr + nm;
  const double t0 = now_s();
  for (int step = 0; left > 0; step++) {
    assert_true(step < 1000 || now_s() - t0 < WAIT_S);
    if (step < nr + nm && sched[step] == 0) {
      void *d[3];
      size_t posted[3];
      for (int j = 0; j < rv[nr_posted].n; j++) {
        memset(rbuf[nr_posted][j], 0, POSTED);
        d[j] = rbuf[nr_posted][j];
        posted[j] = POSTED;
      }
      assert_int_equal(sk_irecv(p.r, rv[nr_posted].n, d, posted, rv[nr_posted].tags, NULL, NULL,
                                &rreq[nr_posted]), STRAND_SUCCESS);
      assert_non_null(rreq[nr_posted]);
      nr_posted++;
    } else if (step < nr + nm) {
      /* With nothing else in flight a send is always accepted (eagerly, to a known receive, or
       * waiting for one): the request limit is far away. */
      assert_int_equal(sk_isend(p.s, sbuf[ns_posted], msize[ns_posted], mtag[ns_posted], NULL,
                                NULL, &sreq[ns_posted]), STRAND_SUCCESS);
      assert_non_null(sreq[ns_posted]);
      ns_posted++;
    }
    for (int i = 0; i < nr_posted; i++) {
      if (rdone[i]) continue;
      int done = 0;
      assert_int_equal(sk_test(rreq[i], &done, got[i]), STRAND_SUCCESS);
      if (done) rdone[i] = true, left--;
    }
    for (int i = 0; i < ns_posted; i++) {
      if (sdone[i]) continue;
      int done = 0;
      assert_int_equal(sk_test(sreq[i], &done, NULL), STRAND_SUCCESS);
      if (done) sdone[i] = true, left--;
    }
  }
  for (int r = 0; r < nr; r++)
    for (int j = 0; j < rv[r].n; j++) {
      int m = rv[r].want[j];
      assert_int_equal(got[r][j], (int)msize[m]);
      for (size_t i = 0; i < msize[m]; i++)
        if (rbuf[r][j][i] != pattern(m, i)) fail_msg("receive %d entry %d byte %zu", r, j, i);
    }
}

/* n exchanges of one 8-byte message with tag 0 into a one-entry receive, the sender first: the
 * warm-up most tests start with (credits read, the receiver in its quiet mode, a worker awake). */
static void run_small(pair_t p, int n) {
  recv_t rv[1] = {{1, {0}, {0}}};
  const int mtag[1] = {0};
  const size_t msize[1] = {8};
  const uint8_t sched[2] = {0, 1};
  for (int k = 0; k < n; k++) run(p, rv, 1, mtag, msize, 1, sched);
}

/* Every interleaving of 4 receives ({any}, {1, 2}, {any}, {2, 1, 1}) and 7 sends, with every mix of
 * eager (8 B), CTS-path (8193 B, above the eager limit) and empty messages on one connection:
 * C(11, 4) = 330 orders x 3 size mixes per message pattern below. */
static void test_every_interleaving(void **state) {
  (void)state;
  pair_t p = pair_open();
  recv_t base[MAXR] = {{1, {0}, {0}}, {2, {1, 2}, {0}}, {1, {0}, {0}}, {3, {2, 1, 1}, {0}}};
  const int mtag[7] = {2, 1, 1, 2, 2, 1, 1};
  static const size_t kinds[3] = {8, 8193, 0};
  /* With the hand-off (a worker thread in the loop, each run waits for it) three of the mixes,
   * one per stride, keep the run short; the rule is the same. */
  const bool handoff = sk_workers_count() > 0;
  int runs = 0;
  for (unsigned mix = 0; mix < 9; mix += handoff ? 4 : 1) {
    size_t msize[7];
    for (int m = 0; m < 7; m++) msize[m] = kinds[(mix + (unsigned)m * (mix / 3 + 1)) % 3];
    for (unsigned bits = 0; bits < (1u << 11); bits++) {
      if (__builtin_popcount(bits) != 4) continue;
      uint8_t sched[11];
      for (int k = 0; k < 11; k++) sched[k] = (bits >> k) & 1 ? 0 : 1;
      recv_t rv[MAXR];
      memcpy(rv, base, sizeof rv);
      assert_true(reference(rv, MAXR, mtag, 7));
      run(p, rv, MAXR, mtag, msize, 7, sched);
      runs++;
    }
  }
  assert_int_equal(runs, (handoff ? 3 : 9) * 330);
  assert_int_equal(p.r->nunexp, 0);
  pair_close(p);
}

/* The design goal: once small messages stream, the receiver writes no CTS per receive and returns
 * credits once per half window; the sender reads the control stream only for credits. */
static void test_no_cts_per_receive(void **state) {
  (void)state;
  pair_t p = pair_open();
  run_small(p, 16); /* warm up: mode switch */
  uint64_t cts0 = p.r->cts_written, eager0 = p.r->eager_total;
  uint32_t granted0 = p.r->credits_granted;
  run_small(p, 640);
  assert_int_equal(p.r->cts_written, cts0);
  assert_int_equal(p.r->eager_total - eager0, 640);
  /* 640 credits used: 20 returns of 32 */
  assert_int_equal((uint32_t)(p.r->credits_granted - granted0), 640);
  assert_false(p.r->announce);
  pair_close(p);
}

/* More small messages than credits before any receive is posted: 64 go eagerly and wait in the
 * receiver's buffer, the rest wait in the sender (accepted, not NULL), and all arrive in order
 * once receives are posted; then one larger message turns the CTS path back on. */
static void test_credits_exhausted(void **state) {
  (void)state;
  pair_t p = pair_open();
  enum { N = 100 };
  static unsigned char s[N][8], r[N][8];
  void *sreq[N], *rreq[N];
  for (int m = 0; m < N; m++) {
    memset(s[m], m, 8);
    assert_int_equal(sk_isend(p.s, s[m], 8, 5, NULL, NULL, &sreq[m]), STRAND_SUCCESS);
    assert_non_null(sreq[m]);
  }
  /* Receives are posted as slots free up (32 at most in flight); the receiver never holds more
   * than the credits it granted. */
  bool sdone[N] = {false}, rdone[N] = {false};
  int nposted = 0;
  const double t0 = now_s();
  for (int left = 2 * N, spins = 0; left > 0; spins++) {
    assert_true(spins < 1000 || now_s() - t0 < WAIT_S);
    if (nposted < N) {
      void *d = r[nposted];
      size_t posted = 8;
      int tag = 5;
      rreq[nposted] = NULL;
      assert_int_equal(sk_irecv(p.r, 1, &d, &posted, &tag, NULL, NULL, &rreq[nposted]),
                       STRAND_SUCCESS);
      if (rreq[nposted] != NULL) nposted++;
    }
    assert_true(p.r->nunexp <= SK_EAGER_CREDITS);
    for (int m = 0; m < N; m++) {
      int done = 0;
      if (m < nposted && !rdone[m]) {
        assert_int_equal(sk_test(rreq[m], &done, NULL), STRAND_SUCCESS);
        if (done) rdone[m] = true, left--;
      }
      done = 0;
      if (!sdone[m]) {
        assert_int_equal(sk_test(sreq[m], &done, NULL), STRAND_SUCCESS);
        if (done) sdone[m] = true, left--;
      }
    }
  }
  for (int m = 0; m < N; m++)
    for (int i = 0; i < 8; i++)
      if (r[m][i] != m) fail_msg("receive %d byte %d holds %d", m, i, r[m][i]);
  assert_true(p.r->eager_early > 0);
  assert_int_equal(p.r->nunexp, 0);
  pair_close(p);
}

/* An eager message larger than its receive: the receiver fails (nothing copied), the sender's
 * next calls fail too (it reads the receiver's report once it has to read the control stream:
 * when its sends wait for credits). */
static void test_eager_oversize(void **state) {
  (void)state;
  pair_t p = pair_open();
  unsigned char big[200], small[100] = {0};
  memset(big, 0x5a, sizeof big);
  void *sreq = NULL, *rreq = NULL, *d = small;
  size_t posted = sizeof small;
  int tag = 0;
  /* first read the receiver's credits, then send before any receive exists */
  assert_int_equal(sk_isend(p.s, big, 8, 0, NULL, NULL, &sreq), STRAND_SUCCESS);
  assert_int_equal(sk_irecv(p.r, 1, &d, &posted, &tag, NULL, NULL, &rreq), STRAND_SUCCESS);
  /* the send first: with STRAND_SOCKET_SEND_WRITE=test its bytes leave in its test() */
  int done = 0;
  double t0 = now_s();
  while (!done && now_s() - t0 < WAIT_S) assert_int_equal(sk_test(sreq, &done, NULL), 0);
  assert_true(done);
  done = 0;
  while (!done && now_s() - t0 < WAIT_S) assert_int_equal(sk_test(rreq, &done, NULL), 0);
  assert_true(done);
  memset(small, 0, sizeof small);
  sreq = NULL;
  assert_int_equal(sk_isend(p.s, big, sizeof big, 0, NULL, NULL, &sreq), STRAND_SUCCESS);
  assert_non_null(sreq);
  done = 0; /* sent eagerly: done once written, whatever the receiver does */
  while (!done && now_s() - t0 < WAIT_S) assert_int_equal(sk_test(sreq, &done, NULL), 0);
  assert_true(done);
  assert_int_equal(sk_irecv(p.r, 1, &d, &posted, &tag, NULL, NULL, &rreq), STRAND_SUCCESS);
  strand_result_t rc = STRAND_SUCCESS;
  while (rc == STRAND_SUCCESS && now_s() - t0 < WAIT_S) rc = sk_test(rreq, &done, NULL);
  assert_int_equal(rc, STRAND_INVALID_USAGE);
  assert_int_equal(small[0], 0);
  /* keep sending (and testing what is still in flight) until the sender has read the report */
  enum { MAXQ = SK_SEND_REQS };
  static void *q[MAXQ];
  int nq = 0;
  rc = STRAND_SUCCESS;
  while (rc == STRAND_SUCCESS && now_s() - t0 < WAIT_S) {
    void *again = NULL;
    rc = sk_isend(p.s, big, 8, 0, NULL, NULL, &again);
    if (again != NULL) q[nq++] = again;
    for (int k = 0; k < nq && rc == STRAND_SUCCESS; k++) {
      int dn = 0;
      rc = sk_test(q[k], &dn, NULL);
      if (dn) q[k--] = q[--nq];
    }
  }
  assert_int_equal(rc, STRAND_INVALID_USAGE);
  pair_close(p);
}

/* ---- hand-off only ---------------------------------------------------------------------------- */

/* The worker was asked to spin by an earlier control write: wait until it does, so that the next
 * writes are handed over rather than written by the caller. */
static void wait_spinning(sk_comm_t *c) {
  const double t0 = now_s();
  while (!sk_worker_idle_spinning(c->ctrl_worker) && now_s() - t0 < WAIT_S) usleep(100);
  assert_true(sk_worker_idle_spinning(c->ctrl_worker));
}

/* The worker's write fails (the peer's socket is gone): the comm error comes back through the
 * proxy's next isend or test, never a hang, and requests stuck in the ring never report done. */
static void test_handoff_write_error(void **state) {
  (void)state;
  pair_t p = pair_open();
  unsigned char buf[8] = {1};
  /* one exchange first: credits read, the worker spinning */
  run_small(p, 4);
  wait_spinning(p.s);
  const uint64_t before = p.s->handoff->msgs;
  close(p.r->ctrl_fd);
  p.r->ctrl_fd = -1;
  strand_result_t rc = STRAND_SUCCESS;
  void *q[SK_SEND_REQS];
  int nq = 0;
  const double t0 = now_s();
  while (rc == STRAND_SUCCESS && now_s() - t0 < WAIT_S) {
    void *r = NULL;
    rc = sk_isend(p.s, buf, sizeof buf, 0, NULL, NULL, &r);
    if (r != NULL) q[nq++] = r;
    for (int k = 0; k < nq && rc == STRAND_SUCCESS; k++) {
      int done = 0;
      rc = sk_test(q[k], &done, NULL);
      if (done) q[k--] = q[--nq];
    }
  }
  assert_true(rc == STRAND_REMOTE_ERROR || rc == STRAND_SYSTEM_ERROR);
  assert_true(p.s->handoff->msgs > before);
  pair_close(p);
}

/* STRAND_SOCKET_HANDOFF_MIN_BYTES: with the worker spinning, writes below the minimum are made by
 * the caller (nothing handed over), larger ones go to the worker; every message arrives in order
 * either way, also when small and large ones alternate. */
static void test_handoff_min_bytes(void **state) {
  (void)state;
  pair_t p = pair_open();
  p.s->handoff_min = p.r->handoff_min = 1024;
  recv_t rv[1] = {{1, {0}, {0}}};
  const int mtag[1] = {0};
  const uint8_t sched[2] = {0, 1};
  const size_t small[1] = {8}, large[1] = {2048};
  for (int k = 0; k < 8; k++) run(p, rv, 1, mtag, large, 1, sched); /* the worker spins */
  wait_spinning(p.s);
  uint64_t before = p.s->handoff->msgs;
  for (int k = 0; k < 64; k++) run(p, rv, 1, mtag, small, 1, sched);
  assert_int_equal(p.s->handoff->msgs, before); /* 24-byte writes stayed with the caller */
  wait_spinning(p.s);
  for (int k = 0; k < 16; k++) run(p, rv, 1, mtag, large, 1, sched);
  assert_true(p.s->handoff->msgs > before);
  const size_t mixed[4] = {8, 2048, 8, 2048};
  recv_t rv4[4] = {{1, {0}, {0}}, {1, {0}, {0}}, {1, {0}, {0}}, {1, {0}, {0}}};
  const int mtag4[4] = {0, 0, 0, 0};
  const uint8_t sched8[8] = {0, 0, 0, 0, 1, 1, 1, 1};
  for (int k = 0; k < 32; k++) {
    recv_t r4[4];
    memcpy(r4, rv4, sizeof r4);
    assert_true(reference(r4, 4, mtag4, 4));
    run(p, r4, 4, mtag4, mixed, 4, sched8);
  }
  pair_close(p);
}

typedef struct {
  sk_comm_t *r;
  void **req;
  int n;
  int done;
} drain_t;

static void *drain_receives(void *arg) {
  drain_t *dr = arg;
  bool done[64] = {false};
  const double t0 = now_s();
  while (dr->done < dr->n && now_s() - t0 < WAIT_S) {
    for (int m = 0; m < dr->n; m++) {
      int d = 0;
      if (done[m]) continue;
      if (sk_test(dr->req[m], &d, NULL) != STRAND_SUCCESS) return NULL;
      if (d) done[m] = true, dr->done++;
    }
  }
  return NULL;
}

/* Close with control bytes still queued: the receiver does not read until the sender is closing,
 * and the sender's socket buffer is tiny, so most of 30 eager messages are in the hand-off ring
 * (or the proxy's queue behind it) when the close starts. The close takes the comm from the worker
 * and writes the rest itself, within its bound: every message arrives intact, nothing leaks. */
static void test_handoff_close_with_queue(void **state) {
  (void)state;
  pair_t p = pair_open();
  int small = 2048;
  assert_int_equal(setsockopt(p.s->ctrl_fd, SOL_SOCKET, SO_SNDBUF, &small, sizeof small), 0);
  assert_int_equal(setsockopt(p.r->ctrl_fd, SOL_SOCKET, SO_RCVBUF, &small, sizeof small), 0);
  enum { N = 30, LEN = 1024 }; /* N < half the credits: the receiver writes nothing back */
  static unsigned char s[N][LEN], r[N][LEN];
  void *sreq[N], *rreq[N];
  for (int m = 0; m < N; m++) {
    void *d = r[m];
    size_t posted = LEN;
    int tag = 3;
    memset(r[m], 0, LEN);
    memset(s[m], m + 1, LEN);
    rreq[m] = NULL;
    assert_int_equal(sk_irecv(p.r, 1, &d, &posted, &tag, NULL, NULL, &rreq[m]), STRAND_SUCCESS);
    assert_non_null(rreq[m]);
  }
  wait_spinning(p.s); /* the receivers' CTS writes woke it */
  for (int m = 0; m < N; m++) {
    sreq[m] = NULL;
    const double t0 = now_s();
    while (sreq[m] == NULL && now_s() - t0 < WAIT_S)
      assert_int_equal(sk_isend(p.s, s[m], LEN, 3, NULL, NULL, &sreq[m]), STRAND_SUCCESS);
    assert_non_null(sreq[m]);
  }
  /* far more than the socket can hold is still queued on the sender's side */
  assert_true(p.s->tx_accepted - p.s->tx_written - atomic_load(&p.s->handoff->tail) > 16384);
  assert_true(p.s->handoff->msgs > 0);
  drain_t dr = {.r = p.r, .req = rreq, .n = N};
  pthread_t th;
  assert_int_equal(pthread_create(&th, NULL, drain_receives, &dr), 0);
  comm_close(p.s); /* requests still in flight: freed with the comm, as NCCL may do */
  pthread_join(th, NULL);
  assert_int_equal(dr.done, N);
  for (int m = 0; m < N; m++)
    for (int i = 0; i < LEN; i++)
      if (r[m][i] != m + 1) fail_msg("receive %d byte %d holds %d", m, i, r[m][i]);
  comm_close(p.r);
}

/* The registry keeps values once read: read the environment again, then load. */
static strand_result_t load_config(int speed, int ncpus) {
  strand_params_reread_for_test();
  return sk_config_load(speed, ncpus);
}

/* ---- STRAND_SOCKET_SEND_WRITE=test only ---------------------------------------------------- */

/* Bytes waiting in the receiver's control socket, unread. */
static int peer_unread(const pair_t *p) {
  int n = -1;
  assert_int_equal(ioctl(p->r->ctrl_fd, FIONREAD, &n), 0);
  return n;
}

/* Tests the receive until done (bounded); returns the size it reports. */
static int recv_wait(void *rreq) {
  int done = 0, size = -1;
  const double t0 = now_s();
  while (!done && now_s() - t0 < WAIT_S) assert_int_equal(sk_test(rreq, &done, &size), 0);
  assert_true(done);
  return size;
}

static void *post_recv(pair_t *p, void *buf, size_t len) {
  void *rreq = NULL, *d = buf;
  int tag = 0;
  assert_int_equal(sk_irecv(p->r, 1, &d, &len, &tag, NULL, NULL, &rreq), STRAND_SUCCESS);
  assert_non_null(rreq);
  return rreq;
}

/* An eager send: isend writes nothing (the receiver's socket stays empty and its receive does not
 * complete), the first test() writes it and reports it done; two isends before a test go out in
 * one write made by the second; the data arrive in order, intact. Then the same for a CTS-path
 * message (above the eager limit, inline): its header and payload wait for test() as well. */
static void test_defer_until_test(void **state) {
  (void)state;
  pair_t p = pair_open();
  assert_true(p.s->defer_sends);
  run_small(p, 8); /* credits read, quiet mode */
  assert_int_equal(peer_unread(&p), 0);

  static unsigned char a[8], b[8], c[8193], ra[8], rb[8], rc[8193];
  memset(a, 0xa1, sizeof a);
  memset(b, 0xb2, sizeof b);
  for (size_t i = 0; i < sizeof c; i++) c[i] = (unsigned char)(i * 13 + 5);
  void *rreq = post_recv(&p, ra, sizeof ra), *sreq = NULL;
  assert_int_equal(sk_isend(p.s, a, sizeof a, 0, NULL, NULL, &sreq), STRAND_SUCCESS);
  assert_non_null(sreq);
  assert_int_equal(peer_unread(&p), 0);
  for (int k = 0; k < 10; k++) { /* the receive cannot complete: nothing was written */
    int done = 0;
    assert_int_equal(sk_test(rreq, &done, NULL), STRAND_SUCCESS);
    assert_false(done);
  }
  int done = 0, size = -1;
  assert_int_equal(sk_test(sreq, &done, &size), STRAND_SUCCESS);
  assert_true(done); /* the first test() wrote it and completed it */
  assert_int_equal(size, 8);
  assert_int_equal(recv_wait(rreq), 8);
  assert_memory_equal(ra, a, sizeof a);

  /* two isends, then tests: the second isend writes both at once */
  void *r1 = post_recv(&p, ra, sizeof ra), *r2 = post_recv(&p, rb, sizeof rb), *s1 = NULL,
       *s2 = NULL;
  memset(ra, 0, sizeof ra);
  assert_int_equal(sk_isend(p.s, a, sizeof a, 0, NULL, NULL, &s1), STRAND_SUCCESS);
  assert_int_equal(peer_unread(&p), 0);
  const uint64_t written = p.s->tx_written;
  assert_int_equal(sk_isend(p.s, b, sizeof b, 0, NULL, NULL, &s2), STRAND_SUCCESS);
  assert_non_null(s1);
  assert_non_null(s2);
  assert_int_equal(p.s->tx_written - written, 2 * (sizeof(sk_eager_hdr_t) + 8));
  assert_int_equal(peer_unread(&p), (int)(2 * (sizeof(sk_eager_hdr_t) + 8)));
  done = 0;
  assert_int_equal(sk_test(s1, &done, NULL), STRAND_SUCCESS);
  assert_true(done);
  done = 0;
  assert_int_equal(sk_test(s2, &done, NULL), STRAND_SUCCESS);
  assert_true(done);
  assert_int_equal(recv_wait(r1), 8);
  assert_int_equal(recv_wait(r2), 8);
  assert_memory_equal(ra, a, sizeof a);
  assert_memory_equal(rb, b, sizeof b);

  /* CTS path: a message above the eager limit asks for a CTS (NEED_CTS is written at once), the
   * receiver announces, the sender's test() starts the send and writes it in the same call. */
  void *r3 = post_recv(&p, rc, sizeof rc), *s3 = NULL;
  assert_int_equal(sk_isend(p.s, c, sizeof c, 0, NULL, NULL, &s3), STRAND_SUCCESS);
  assert_non_null(s3);
  assert_int_equal(peer_unread(&p), (int)sizeof(sk_need_cts_msg_t));
  done = 0;
  assert_int_equal(sk_test(r3, &done, NULL), STRAND_SUCCESS); /* reads NEED_CTS, writes a CTS */
  assert_false(done);
  const double t0 = now_s();
  done = 0;
  while (!done && now_s() - t0 < WAIT_S) assert_int_equal(sk_test(s3, &done, NULL), 0);
  assert_true(done);
  assert_int_equal(recv_wait(r3), (int)sizeof c);
  assert_memory_equal(rc, c, sizeof c);
  /* the receiver announces now: a CTS-path isend to a known receive is queued, not written */
  void *r4 = post_recv(&p, rc, sizeof rc), *s4 = NULL;
  memset(rc, 0, sizeof rc);
  assert_int_equal(sk_isend(p.s, c, sizeof c, 0, NULL, NULL, &s4), STRAND_SUCCESS);
  assert_non_null(s4);
  assert_int_equal(p.s->tx_len - p.s->tx_off, sizeof(sk_send_hdr_t) + sizeof c);
  assert_int_equal(peer_unread(&p), 0);
  done = 0;
  assert_int_equal(sk_test(s4, &done, NULL), STRAND_SUCCESS);
  assert_true(done);
  assert_int_equal(recv_wait(r4), (int)sizeof c);
  assert_memory_equal(rc, c, sizeof c);
  pair_close(p);
}

/* Sends queued and never tested: the close writes them (as it does a partially written queue),
 * and every message reaches the receiver intact. */
static void test_defer_close_with_queue(void **state) {
  (void)state;
  pair_t p = pair_open();
  run_small(p, 8);
  enum { N = 3 };
  static unsigned char s[N][64], r[N][64];
  void *rreq[N], *sreq[N];
  for (int m = 0; m < N; m++) {
    memset(s[m], 0x40 + m, sizeof s[m]);
    memset(r[m], 0, sizeof r[m]);
    rreq[m] = post_recv(&p, r[m], sizeof r[m]);
    sreq[m] = NULL;
    assert_int_equal(sk_isend(p.s, s[m], sizeof s[m], 0, NULL, NULL, &sreq[m]), STRAND_SUCCESS);
    assert_non_null(sreq[m]);
  }
  assert_true(p.s->tx_len > p.s->tx_off); /* the third is still queued */
  comm_close(p.s);
  for (int m = 0; m < N; m++) {
    assert_int_equal(recv_wait(rreq[m]), 64);
    assert_memory_equal(r[m], s[m], sizeof s[m]);
  }
  comm_close(p.r);
}

/* STRAND_SOCKET_SEND_WRITE as read at init: isend by default, a typo refused. Restores "test". */
static void test_send_write_config(void **state) {
  (void)state;
  unsetenv("STRAND_SOCKET_SEND_WRITE");
  assert_int_equal(load_config(-1, 2), STRAND_SUCCESS);
  assert_false(sk_config()->send_write_test);
  setenv("STRAND_SOCKET_SEND_WRITE", "tset", 1);
  assert_int_not_equal(load_config(-1, 2), STRAND_SUCCESS);
  setenv("STRAND_SOCKET_SEND_WRITE", "isend", 1);
  assert_int_equal(load_config(-1, 2), STRAND_SUCCESS);
  assert_false(sk_config()->send_write_test);
  setenv("STRAND_SOCKET_SEND_WRITE", "test", 1);
  assert_int_equal(load_config(-1, 2), STRAND_SUCCESS);
  assert_true(sk_config()->send_write_test);
}

/* STRAND_SOCKET_HANDOFF as read at init: off by default; auto only with workers and >= 16 CPUs;
 * 1 without workers is a WARN and off (nobody to hand to). Restores this group's settings. */
static void test_handoff_config(void **state) {
  (void)state;
  assert_int_equal(load_config(-1, 64), STRAND_SUCCESS);
  assert_false(sk_config()->handoff);
  setenv("STRAND_SOCKET_HANDOFF", "1", 1);
  assert_int_equal(load_config(-1, 64), STRAND_SUCCESS);
  assert_false(sk_config()->handoff); /* NTHREADS=0 here */
  setenv("STRAND_SOCKET_NTHREADS", "4", 1);
  assert_int_equal(load_config(-1, 2), STRAND_SUCCESS);
  assert_true(sk_config()->handoff);
  setenv("STRAND_SOCKET_HANDOFF", "auto", 1);
  assert_int_equal(load_config(-1, 8), STRAND_SUCCESS);
  assert_false(sk_config()->handoff);
  assert_int_equal(load_config(-1, 16), STRAND_SUCCESS);
  assert_true(sk_config()->handoff);
  assert_int_equal(sk_config()->handoff_min, 0);
  setenv("STRAND_SOCKET_HANDOFF_MIN_BYTES", "4096", 1);
  assert_int_equal(load_config(-1, 16), STRAND_SUCCESS);
  assert_int_equal(sk_config()->handoff_min, 4096);
  unsetenv("STRAND_SOCKET_HANDOFF_MIN_BYTES");
  setenv("STRAND_SOCKET_HANDOFF", "yes", 1);
  assert_int_not_equal(load_config(-1, 16), STRAND_SUCCESS);
  unsetenv("STRAND_SOCKET_HANDOFF");
  setenv("STRAND_SOCKET_NTHREADS", "0", 1);
  assert_int_equal(load_config(-1, 2), STRAND_SUCCESS);
  assert_false(sk_config()->handoff);
}

static int setup(void **state) {
  (void)state;
  setenv("STRAND_SOCKET_NTHREADS", "0", 1);
  setenv("STRAND_SOCKET_EAGER_BYTES", "8192", 1);
  setenv("STRAND_SOCKET_INLINE", "16384", 1);
  return sk_config_load(-1, 2) == STRAND_SUCCESS ? 0 : -1;
}

/* One worker that, once a control write woke it, spins for 1 s after each one: every control
 * write of these tests is handed over (sk_xfer.c writes itself only while the worker sleeps). */
static int setup_handoff(void **state) {
  (void)state;
  setenv("STRAND_SOCKET_NTHREADS", "1", 1);
  setenv("STRAND_SOCKET_HANDOFF", "1", 1);
  setenv("STRAND_SOCKET_HANDOFF_SPIN_US", "1000000", 1);
  setenv("STRAND_SOCKET_EAGER_BYTES", "8192", 1);
  setenv("STRAND_SOCKET_INLINE", "16384", 1);
  if (sk_config_load(-1, 2) != STRAND_SUCCESS || !sk_config()->handoff) return -1;
  return sk_workers_start(1, -1) == STRAND_SUCCESS ? 0 : -1;
}

static int teardown_handoff(void **state) {
  (void)state;
  sk_workers_stop();
  return 0;
}

/* The default group's settings, with sends written from test(). */
static int setup_defer(void **state) {
  setenv("STRAND_SOCKET_SEND_WRITE", "test", 1);
  if (setup(state) != 0 || !sk_config()->send_write_test) return -1;
  return 0;
}

int main(int argc, char **argv) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_every_interleaving),
      cmocka_unit_test(test_no_cts_per_receive),
      cmocka_unit_test(test_credits_exhausted),
      cmocka_unit_test(test_eager_oversize),
      cmocka_unit_test(test_handoff_config),
  };
  if (argc > 1 && strcmp(argv[1], "handoff") == 0) {
    const struct CMUnitTest handoff[] = {
        cmocka_unit_test(test_every_interleaving),
        cmocka_unit_test(test_credits_exhausted),
        cmocka_unit_test(test_eager_oversize),
        cmocka_unit_test(test_handoff_write_error),
        cmocka_unit_test(test_handoff_close_with_queue),
        cmocka_unit_test(test_handoff_min_bytes),
    };
    return cmocka_run_group_tests_name("handoff", handoff, setup_handoff, teardown_handoff);
  }
  if (argc > 1 && strcmp(argv[1], "defer") == 0) {
    const struct CMUnitTest defer[] = {
        cmocka_unit_test(test_send_write_config),
        cmocka_unit_test(test_every_interleaving),
        cmocka_unit_test(test_no_cts_per_receive),
        cmocka_unit_test(test_credits_exhausted),
        cmocka_unit_test(test_eager_oversize),
        cmocka_unit_test(test_defer_until_test),
        cmocka_unit_test(test_defer_close_with_queue),
    };
    return cmocka_run_group_tests_name("defer", defer, setup_defer, NULL);
  }
  return cmocka_run_group_tests(tests, setup, NULL);
}
