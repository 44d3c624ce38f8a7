/* strand-conform — hostile.*: the plugin attacked the way a stranger on the network or a buggy core
 * would. Nothing here is a call sequence NCCL's core makes on purpose (§6); each check asks that
 * the plugin survives it without crashing, hanging or silently losing data, and that the real
 * traffic around it keeps working. Every check runs on any plugin at every ABI, within its bound,
 * in the per-check child process (a crash is a FAIL naming the call in progress). */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "conform.h"

#define HS STRAND_NET_HANDLE_MAXSIZE

/* Opaque profiler handles as NCCL passes them (NULL ones are xfer.null-phandle's subject). */
static char g_phandle[64];
static void *g_phandles[1] = {g_phandle};

/* A small local generator: the bytes only need to look random to the plugin. */
static uint64_t g_rng;
static uint64_t rnd(void) {
  if (!g_rng) g_rng = ((uint64_t)getpid() << 32) ^ (uint64_t)(conform_now() * 1e9) ^ 0x9e3779b97f4a7c15ULL;
  g_rng ^= g_rng << 13;
  g_rng ^= g_rng >> 7;
  g_rng ^= g_rng << 17;
  return g_rng;
}
static void rnd_bytes(unsigned char *p, size_t n) {
  for (size_t i = 0; i < n; i++) p[i] = (unsigned char)(rnd() >> 24);
}

/* Listen on `dev` into a buffer pre-filled with a canary; `*written` gets the extent listen wrote
 * (last byte that differs from the canary, + 1). Bytes past it are zeroed, as in core's buffer. */
static int listen_canary(conform_ctx_t *c, int dev, unsigned char *h, size_t *written, void **lc) {
  unsigned char buf[CONFORM_LISTEN_BUF];
  memset(buf, 0xA5, sizeof buf);
  *lc = NULL;
  conform_phase(c, "listen(dev %d)", dev);
  strand_result_t r = c->net->listen(c->net_ctx, dev, buf, lc);
  if (r != STRAND_SUCCESS || !*lc) {
    conform_fail(c, "listen(dev %d) returned %s, listenComm %p", dev, conform_result_str(r), *lc);
    return -1;
  }
  size_t w = HS;
  while (w > 0 && buf[w - 1] == 0xA5) w--;
  for (size_t i = w; i < HS; i++) buf[i] = 0;
  memcpy(h, buf, HS);
  *written = w;
  return 0;
}

/* ======================================================================= stranger-on-listen-port */

/* An IP endpoint found in a handle. */
typedef struct {
  struct sockaddr_storage sa;
  socklen_t len;
  size_t off;
  char str[80];
} endpoint_t;

static int tcp_socket_to(const endpoint_t *ep) {
  int fd = socket(ep->sa.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  if (connect(fd, (const struct sockaddr *)&ep->sa, ep->len) != 0 && errno != EINPROGRESS) {
    close(fd);
    return -1;
  }
  return fd;
}

/* Does a TCP connect to `ep` complete within `secs`? (The probe is one more stranger.) */
static bool tcp_reaches(const endpoint_t *ep, double secs) {
  int fd = tcp_socket_to(ep);
  if (fd < 0) return false;
  struct pollfd p = {.fd = fd, .events = POLLOUT};
  int err = -1;
  if (poll(&p, 1, (int)(secs * 1000)) > 0) {
    socklen_t el = sizeof err;
    if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &el) != 0) err = -1;
  }
  close(fd);
  return err == 0;
}

/* Scan a handle for a sockaddr_in / sockaddr_in6 (family in host order at an even offset, non-zero
 * port) that a local TCP connect reaches. A wildcard address is tried as loopback. */
static bool find_endpoint(const unsigned char *h, size_t hlen, endpoint_t *ep, int *tried) {
  *tried = 0;
  for (size_t off = 0; off + sizeof(struct sockaddr_in) <= hlen && *tried < 8; off += 2) {
    uint16_t fam;
    memcpy(&fam, h + off, sizeof fam);
    memset(ep, 0, sizeof *ep);
    ep->off = off;
    if (fam == AF_INET) {
      struct sockaddr_in a;
      memcpy(&a, h + off, sizeof a);
      if (a.sin_port == 0) continue;
      if (a.sin_addr.s_addr == htonl(INADDR_ANY)) a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
      memcpy(&ep->sa, &a, sizeof a);
      ep->len = sizeof a;
      char ip[INET_ADDRSTRLEN] = "?";
      inet_ntop(AF_INET, &a.sin_addr, ip, sizeof ip);
      snprintf(ep->str, sizeof ep->str, "%s:%u (handle offset %zu)", ip, ntohs(a.sin_port), off);
    } else if (fam == AF_INET6 && off + sizeof(struct sockaddr_in6) <= hlen) {
      struct sockaddr_in6 a;
      memcpy(&a, h + off, sizeof a);
      if (a.sin6_port == 0) continue;
      if (IN6_IS_ADDR_UNSPECIFIED(&a.sin6_addr)) a.sin6_addr = in6addr_loopback;
      memcpy(&ep->sa, &a, sizeof a);
      ep->len = sizeof a;
      char ip[INET6_ADDRSTRLEN] = "?";
      inet_ntop(AF_INET6, &a.sin6_addr, ip, sizeof ip);
      snprintf(ep->str, sizeof ep->str, "[%s]:%u (handle offset %zu)", ip, ntohs(a.sin6_port), off);
    } else {
      continue;
    }
    (*tried)++;
    if (tcp_reaches(ep, 0.5)) return true;
  }
  return false;
}

enum { N_STRANGERS = 60 };

/* Open N_STRANGERS connections to `ep`, six kinds in turn: 0 silent; 1 random bytes; 2 closed at
 * once (FIN); 3 a few random bytes then reset (RST); 4 the handle's first 12 bytes (a hello-like
 * prefix: magic, device) then silence; 5 the whole handle replayed, then random bytes. Kinds 0, 1,
 * 4 and 5 stay open in fds[] until the check ends. */
enum { N_KINDS = 6 };
static int attack(const endpoint_t *ep, const unsigned char *handle, int *fds, int *kinds,
                  int *established) {
  int n = 0;
  for (int i = 0; i < N_STRANGERS; i++) {
    fds[n] = tcp_socket_to(ep);
    if (fds[n] >= 0) kinds[n] = i % N_KINDS, n++;
  }
  /* Give the connections a moment to be established (those past the backlog stay pending). */
  *established = 0;
  double until = conform_now() + 2.0;
  bool ready[N_STRANGERS] = {false};
  while (*established < n && conform_now() < until) {
    struct pollfd p[N_STRANGERS];
    for (int i = 0; i < n; i++) p[i] = (struct pollfd){.fd = ready[i] ? -1 : fds[i], .events = POLLOUT};
    if (poll(p, (nfds_t)n, 50) <= 0) continue;
    for (int i = 0; i < n; i++) {
      if (ready[i] || !(p[i].revents & (POLLOUT | POLLERR | POLLHUP))) continue;
      ready[i] = true;
      int err = 0;
      socklen_t el = sizeof err;
      getsockopt(fds[i], SOL_SOCKET, SO_ERROR, &err, &el);
      if (err) continue;
      (*established)++;
      unsigned char junk[4096];
      if (kinds[i] == 1) { /* random bytes, sizes from 1 to 4096 */
        size_t len = 1 + (size_t)(rnd() % sizeof junk);
        rnd_bytes(junk, len);
        (void)!send(fds[i], junk, len, MSG_NOSIGNAL | MSG_DONTWAIT);
      } else if (kinds[i] == 3) { /* a few random bytes, then a reset */
        rnd_bytes(junk, 64);
        (void)!send(fds[i], junk, 64, MSG_NOSIGNAL | MSG_DONTWAIT);
        struct linger lg = {.l_onoff = 1, .l_linger = 0};
        setsockopt(fds[i], SOL_SOCKET, SO_LINGER, &lg, sizeof lg);
      }
      if (kinds[i] == 4) (void)!send(fds[i], handle, 12, MSG_NOSIGNAL | MSG_DONTWAIT);
      if (kinds[i] == 5) {
        memcpy(junk, handle, HS);
        rnd_bytes(junk + HS, 256);
        (void)!send(fds[i], junk, HS + 256, MSG_NOSIGNAL | MSG_DONTWAIT);
      }
      if (kinds[i] == 2 || kinds[i] == 3) {
        close(fds[i]);
        fds[i] = -1;
      }
    }
  }
  return n;
}

/* Drive connect/accept with `peer_handle` until both comms are up or `bound` seconds pass. */
static int link_up_within(conform_ctx_t *c, conform_link_t *l, unsigned char *peer_handle,
                          double bound, const char *what) {
  double t0 = conform_now(), until = t0 + bound;
  if (until > c->deadline - 2) until = c->deadline - 2;
  strand_dev_handle_t *sd = NULL, *rd = NULL;
  unsigned spins = 0;
  while (!l->send_comm || !l->recv_comm) {
    if (!l->send_comm) {
      conform_phase(c, "connect(dev %d)%s", l->dev, what);
      strand_result_t r = c->net->connect(c->net_ctx, l->dev, peer_handle, &l->send_comm, &sd);
      if (r != STRAND_SUCCESS)
        return conform_fail(c, "connect to rank %d%s returned %s", c->next, what, conform_result_str(r)), -1;
    }
    if (!l->recv_comm) {
      conform_phase(c, "accept%s", what);
      strand_result_t r = c->net->accept(l->listen_comm, &l->recv_comm, &rd);
      if (r != STRAND_SUCCESS)
        return conform_fail(c, "accept from rank %d%s returned %s", c->prev, what, conform_result_str(r)), -1;
      if (l->recv_comm) {
        conform_phase(c, "closeListen after accept");
        c->net->closeListen(l->listen_comm);
        l->listen_comm = NULL;
      }
    }
    if ((++spins & 63) == 0) {
      if (conform_peer_failed(c)) return conform_fail(c, "%s", c->bs_error), -1;
      if (conform_now() > until)
        return conform_fail(c, "the legitimate connection%s was not up within %.1f s (sendComm %s, "
                            "recvComm %s)", what, conform_now() - t0, l->send_comm ? "up" : "NULL",
                            l->recv_comm ? "up" : "NULL"), -1;
    }
    if (!l->send_comm || !l->recv_comm) conform_sleep(0.0005);
  }
  return 0;
}

typedef struct {
  unsigned char handle[HS];
  int found;
} stranger_pub_t;

static conform_status_t hostile_stranger(conform_ctx_t *c) {
  conform_link_t l = {.dev = 0};
  unsigned char h[HS];
  size_t w;
  if (listen_canary(c, 0, h, &w, &l.listen_comm)) return CONFORM_FAIL;
  endpoint_t ep;
  int tried = 0;
  conform_phase(c, "scanning the listen handle for an IP endpoint");
  stranger_pub_t mine = {.found = find_endpoint(h, w, &ep, &tried)};
  memcpy(mine.handle, h, HS);
  int fds[N_STRANGERS], kinds[N_STRANGERS], n = 0, est = 0;
  if (mine.found) {
    conform_phase(c, "opening %d stranger connections to %s", N_STRANGERS, ep.str);
    n = attack(&ep, h, fds, kinds, &est);
  }
  stranger_pub_t *all = calloc((size_t)c->nranks, sizeof *all);
  if (conform_allgather(c, &mine, sizeof mine, all)) {
    free(all);
    for (int i = 0; i < n; i++) if (fds[i] >= 0) close(fds[i]);
    return conform_fail(c, "%s", c->bs_error);
  }
  int missing = -1;
  for (int r = 0; r < c->nranks; r++) if (!all[r].found) missing = r;
  unsigned char ph[HS];
  memcpy(ph, all[c->next].handle, HS);
  free(all);
  if (missing >= 0) {
    for (int i = 0; i < n; i++) if (fds[i] >= 0) close(fds[i]);
    c->net->closeListen(l.listen_comm);
    return conform_skip(c, "rank %d's listen handle holds no sockaddr_in/sockaddr_in6 that a local "
                        "TCP connect reaches (%d candidate(s) probed): not a TCP listener the suite "
                        "can recognise", missing, missing == c->rank ? tried : -1);
  }
  conform_note(c, "%d stranger connections to %s (%d established: silent, random bytes, FIN, RST, "
               "a hello-like handle prefix, the handle replayed)", n, ep.str, est);
  double bound = 10.0 * c->timeout_scale;
  int rc = link_up_within(c, &l, ph, bound, " while strangers hold the listen port");
  /* Sizes the data-path checks do not single out (xfer.* own 1 byte, > 64 KiB, odd sizes). */
  if (rc == 0 && (conform_ping(c, &l, 4096, 41) || conform_ping(c, &l, 65536, 42)))
    conform_fail(c, "(the transfer after the stranger connections was not byte-exact or failed)");
  for (int i = 0; i < n; i++) if (fds[i] >= 0) close(fds[i]);
  conform_link_close(c, &l);
  return conform_verdict(c);
}

/* ================================================================================ forged-handle */

enum { FORGE_RANDOM, FORGE_ZERO, FORGE_FLIPPED, FORGE_TRUNCATED, FORGE_N };
static const char *const forge_name[FORGE_N] = {
  "random bytes", "all zero", "the real handle with its per-listener (nonce-like) bytes inverted",
  "the real handle truncated after 16 bytes"};

/* The per-listener bytes of a handle: those that differ between two listens on one device, less
 * the port of any sockaddr_in/in6 in it (a changed port just reaches nobody). Returns 1 with mask
 * set when there are such bytes, 0 when there are none, -1 on a listen failure. */
static int nonce_area(conform_ctx_t *c, const unsigned char *real, size_t w, bool *mask) {
  unsigned char other[HS];
  size_t w2;
  void *lc2 = NULL;
  if (listen_canary(c, 0, other, &w2, &lc2)) return -1;
  c->net->closeListen(lc2);
  for (size_t i = 0; i < HS; i++) mask[i] = real[i] != other[i];
  for (size_t off = 0; off + 4 <= HS; off += 2) {
    uint16_t fam;
    memcpy(&fam, real + off, sizeof fam);
    if ((fam == AF_INET || fam == AF_INET6) && (mask[off + 2] || mask[off + 3]))
      mask[off + 2] = mask[off + 3] = false;
  }
  int n = 0;
  for (size_t i = 0; i < HS; i++) n += mask[i];
  (void)w;
  return n > 0;
}

/* One attempt: connect with a forged handle while the real listener's accept is polled too. */
static void forged_attempt(conform_ctx_t *c, int kind) {
  const char *what = forge_name[kind];
  void *lc = NULL;
  unsigned char real[HS], f[HS];
  bool mask[HS];
  int nonce_like = 0;
  size_t w;
  if (listen_canary(c, 0, real, &w, &lc)) return;
  switch (kind) {
  case FORGE_RANDOM: rnd_bytes(f, HS); break;
  case FORGE_ZERO: memset(f, 0, HS); break;
  case FORGE_FLIPPED:
    memcpy(f, real, HS);
    nonce_like = nonce_area(c, real, w, mask);
    if (nonce_like < 0) {
      if (lc) c->net->closeListen(lc);
      return;
    }
    for (size_t i = 0; i < HS; i++)
      if (nonce_like ? mask[i] : (i >= w / 2 && i < (w < 2 ? HS : w))) f[i] ^= 0xFF;
    break;
  case FORGE_TRUNCATED:
    memcpy(f, real, HS);
    memset(f + 16, 0, HS - 16);
    break;
  }
  if (memcmp(f, real, HS) == 0) {
    conform_note(c, "%s: identical to the real handle (listen wrote %zu bytes), not tried", what, w);
    c->net->closeListen(lc);
    return;
  }
  double t0 = conform_now(), until = t0 + c->stale_bound;
  if (until > c->deadline - 3) until = c->deadline - 3;
  void *sc = NULL, *rc = NULL, *mh = NULL, *req = NULL;
  strand_dev_handle_t *sd = NULL, *rd = NULL;
  bool conn_err = false, send_err = false, accepted = false;
  int sends_done = 0;
  unsigned char *buf = calloc(1, 65536);
  strand_result_t r = STRAND_SUCCESS;
  while (conform_now() < until) {
    if (!sc) {
      conform_phase(c, "connect with a forged handle (%s)", what);
      double c0 = conform_now();
      r = c->net->connect(c->net_ctx, 0, f, &sc, &sd);
      if (conform_now() - c0 > conform_call_bound()) {
        conform_fail(c, "connect with %s blocked for %.2f s", what, conform_now() - c0);
        break;
      }
      if (r != STRAND_SUCCESS) {
        conn_err = true;
        if (sc) c->net->closeSend(sc); /* core does this on an error with a comm (§6.1 step 4) */
        sc = NULL;
        break;
      }
      if (sc) {
        conform_phase(c, "regMr on a comm from a forged handle (%s)", what);
        if (c->net->regMr(sc, buf, 65536, STRAND_PTR_HOST, &mh) != STRAND_SUCCESS) {
          mh = NULL;
          send_err = true;
          break;
        }
      }
    }
    if (!rc) {
      conform_phase(c, "accept while a forged handle (%s) connects", what);
      r = c->net->accept(lc, &rc, &rd);
      if (r != STRAND_SUCCESS) {
        conform_fail(c, "the real listener's accept returned %s while %s was tried", conform_result_str(r), what);
        break;
      }
      if (rc) {
        accepted = true;
        break;
      }
    }
    if (sc && !req) {
      conform_phase(c, "isend on a comm from a forged handle (%s)", what);
      r = c->net->isend(sc, buf, 65536, c->rank, mh, g_phandle, &req);
      if (r != STRAND_SUCCESS) {
        send_err = true;
        req = NULL;
        break;
      }
    }
    if (req) {
      int done = 0;
      conform_phase(c, "test(isend on a comm from a forged handle (%s))", what);
      r = c->net->test(req, &done, NULL);
      if (r != STRAND_SUCCESS) {
        send_err = true;
        req = NULL;
        break;
      }
      if (done) req = NULL, sends_done++;
    }
    conform_sleep(0.001);
  }
  double dt = conform_now() - t0;
  if (c->status == CONFORM_FAIL) {
    /* already reported */
  } else if (conn_err) {
    conform_note(c, "%s: connect returned %s after %.2f s", what, conform_result_str(r), dt);
  } else if (send_err) {
    conform_note(c, "%s: connect gave a sendComm; %s failed with %s after %.2f s", what,
                 mh ? "sends" : "regMr", conform_result_str(r), dt);
  } else if (accepted && (kind == FORGE_RANDOM || kind == FORGE_ZERO)) {
    conform_fail(c, "the listener accepted a connection made with a forged handle (%s)", what);
  } else if (accepted && nonce_like) {
    char offs[160] = "";
    for (size_t i = 0, u = 0; i < HS && u + 6 < sizeof offs; i++)
      if (mask[i]) u += (size_t)snprintf(offs + u, sizeof offs - u, "%s%zu", u ? "," : "", i);
    conform_fail(c, "the listener accepted a connection made with its handle's per-listener bytes "
                 "inverted (offsets %s: the bytes that differ between two listens, a sockaddr's "
                 "port excepted): a stale or foreign handle that reaches the same address is taken "
                 "for the real one", offs);
  } else if (accepted) {
    conform_note(c, "%s: the listener accepted it (the plugin does not depend on the changed bytes)", what);
  } else if (!sc) {
    char why[600];
    conform_stale_text(c, dt, why, sizeof why);
    conform_fail(c, "connect with a forged handle (%s) returned NULL without an error: it %s", what, why);
  } else {
    conform_fail(c, "connect with a forged handle (%s) returned a sendComm whose sends kept "
                 "succeeding or pending for %.1f s (%d reported done) while no listener accepted "
                 "it: data is lost silently", what, dt, sends_done);
  }
  if (sc) {
    if (mh) c->net->deregMr(sc, mh);
    conform_phase(c, "closeSend of a comm from a forged handle (%s)", what);
    c->net->closeSend(sc);
  }
  if (rc) c->net->closeRecv(rc);
  conform_phase(c, "closeListen");
  c->net->closeListen(lc);
  free(buf);
}

static conform_status_t hostile_forged_handle(conform_ctx_t *c) {
  for (int k = 0; k < FORGE_N && c->status != CONFORM_FAIL; k++) forged_attempt(c, k);
  if (conform_barrier(c)) return conform_fail(c, "%s", c->bs_error);
  /* The plugin still works for the real peer. */
  conform_link_t l;
  if (c->status != CONFORM_FAIL && conform_link_open(c, 0, &l) == 0) {
    if (conform_ping(c, &l, 4096, 43)) conform_fail(c, "(the real connection after the forged ones)");
    conform_link_close(c, &l);
  }
  return conform_verdict(c);
}

/* ================================================================================= double-dereg */

static conform_status_t hostile_double_dereg(conform_ctx_t *c) {
  conform_link_t l;
  if (conform_link_open(c, 0, &l)) return CONFORM_FAIL;
  size_t len = 65536;
  unsigned char *buf = malloc(len);
  void *comms[2] = {l.send_comm, l.recv_comm};
  for (int k = 0; k < 2 && c->status != CONFORM_FAIL; k++) {
    const char *nm = k ? "recvComm" : "sendComm";
    void *mh = NULL;
    if (conform_reg(c, comms[k], buf, len, STRAND_PTR_HOST, &mh)) break;
    if (!mh) { /* reg.host's finding: there is no handle to deregister twice */
      conform_note(c, "regMr on the %s gave a NULL handle: not tried", nm);
      continue;
    }
    if (conform_dereg(c, comms[k], mh)) break;
    conform_phase(c, "deregMr a second time on the %s", nm);
    strand_result_t r = c->net->deregMr(comms[k], mh);
    if (r == STRAND_SUCCESS)
      conform_fail(c, "deregMr of a handle already deregistered on the %s returned ncclSuccess: a "
                   "core bug that frees twice goes unnoticed (and the plugin touched freed state)", nm);
    else
      conform_note(c, "second deregMr on the %s: %s", nm, conform_result_str(r));
  }
  /* The comms still carry data afterwards. */
  if (c->status != CONFORM_FAIL && conform_ping(c, &l, 8192, 44))
    conform_fail(c, "(transfer after the double deregMr)");
  free(buf);
  conform_link_close(c, &l);
  return conform_verdict(c);
}

/* =============================================================================== test-after-done */

/* test() once more on a request it already reported done, with no other call on its comm in
 * between. Core never does this (§6.9: it clears its slot); a buggy core might. */
static void test_again(conform_ctx_t *c, void *req, int first_size, const char *what) {
  int done = -7, size = -7;
  conform_phase(c, "test(%s) after it was reported done", what);
  double t0 = conform_now();
  strand_result_t r = c->net->test(req, &done, &size);
  double dt = conform_now() - t0;
  if (dt > conform_call_bound())
    conform_fail(c, "test(%s) after done blocked for %.2f s", what, dt);
  else if (r != STRAND_SUCCESS)
    conform_note(c, "%s: %s", what, conform_result_str(r));
  else if (done != 1)
    conform_fail(c, "test(%s) after it was reported done returned ncclSuccess with done=%d on the "
                 "one extra call the suite made (answered in %.3f s, within the per-call bound of "
                 "%.2f s): a finished request reported as pending again. NCCL clears its slot at "
                 "done and never asks again (§6.9); a core that did would keep polling a request "
                 "that can no longer complete, with no bound of its own, and hang instead of moving "
                 "on", what, done, dt, conform_call_bound());
  else if (size != first_size)
    conform_fail(c, "test(%s) after it was reported done reported done again with size %d (first "
                 "report: %d)", what, size, first_size);
  else
    conform_note(c, "%s: done again, same size", what);
}

static conform_status_t hostile_test_after_done(conform_ctx_t *c) {
  conform_link_t l;
  if (conform_link_open(c, 0, &l)) return CONFORM_FAIL;
  size_t bytes = 5000;
  unsigned char *sb = malloc(bytes), *rb = malloc(bytes);
  void *smh = NULL, *rmh = NULL, *sreq = NULL, *rreq = NULL;
  conform_fill(sb, bytes, conform_seed(c->rank, c->next, 45));
  int tag = c->prev, ssize = -1, rsize = -1;
  size_t rcap = bytes;
  void *rdata = rb;
  if (conform_reg(c, l.send_comm, sb, bytes, STRAND_PTR_HOST, &smh) ||
      conform_reg(c, l.recv_comm, rb, bytes, STRAND_PTR_HOST, &rmh))
    goto out;
  if (conform_irecv(c, l.recv_comm, 1, &rdata, &rcap, &tag, &rmh, &rreq)) goto out;
  if (conform_isend(c, l.send_comm, sb, bytes, c->rank, smh, &sreq)) goto out;
  /* Both reported done, each with its size. */
  void *reqs[2] = {sreq, rreq};
  int *sizes[2] = {&ssize, &rsize};
  if (conform_wait_all(c, 2, reqs, sizes, "first transfer")) goto out;
  if (rsize != (int)bytes || conform_verify(rb, bytes, conform_seed(c->prev, c->rank, 45)) >= 0) {
    conform_fail(c, "the transfer itself arrived wrong (size %d)", rsize);
    goto out;
  }
  test_again(c, sreq, ssize, "isend");
  test_again(c, rreq, rsize, "irecv");
  if (conform_barrier(c)) {
    conform_fail(c, "%s", c->bs_error);
    goto out;
  }
  /* The comms keep working. */
  if (c->status != CONFORM_FAIL && conform_ping(c, &l, 4096, 46))
    conform_fail(c, "(transfer after test() on finished requests)");
out:
  if (smh) conform_dereg(c, l.send_comm, smh);
  if (rmh) conform_dereg(c, l.recv_comm, rmh);
  free(sb);
  free(rb);
  conform_link_close(c, &l);
  return conform_verdict(c);
}

/* ================================================================================= result-codes */

static int g_bad_codes;

/* One provoked result: any code the plugin ABI defines (§2.1: 0..6, ncclSuccess..ncclRemoteError)
 * passes; 7 and 8 are the core's own states, 9 a sentinel. */
static void code_seen(conform_ctx_t *c, const char *call, strand_result_t r) {
  if ((int)r >= 0 && (int)r <= CONFORM_PLUGIN_RESULT_MAX) return;
  g_bad_codes++;
  conform_fail(c, "%s returned %d, which is no result a plugin may return (§2.1: 0..%d)", call,
               (int)r, CONFORM_PLUGIN_RESULT_MAX);
}

static conform_status_t hostile_result_codes(conform_ctx_t *c) {
  int calls = 0;
  /* Bad device indices. */
  int bad_dev[2] = {-1, c->ndev};
  for (int i = 0; i < 2; i++) {
    strand_props_v12_t p;
    char nm[64];
    snprintf(nm, sizeof nm, "getProperties(dev %d)", bad_dev[i]);
    conform_phase(c, "%s", nm);
    code_seen(c, nm, c->net->getProperties(bad_dev[i], &p)), calls++;
    unsigned char h[CONFORM_LISTEN_BUF];
    void *lc = NULL;
    snprintf(nm, sizeof nm, "listen(dev %d)", bad_dev[i]);
    conform_phase(c, "%s", nm);
    code_seen(c, nm, c->net->listen(c->net_ctx, bad_dev[i], h, &lc)), calls++;
    if (lc) c->net->closeListen(lc);
  }
  /* Connect to a closed listener's handle, until it errors or the stale bound passes. */
  {
    unsigned char h[HS];
    size_t w;
    void *lc;
    if (listen_canary(c, 0, h, &w, &lc) == 0) {
      c->net->closeListen(lc);
      void *sc = NULL;
      strand_dev_handle_t *sd = NULL;
      double until = conform_now() + c->stale_bound;
      if (until > c->deadline - 15) until = c->deadline - 15;
      while (!sc && conform_now() < until) {
        conform_phase(c, "connect to a closed listener");
        strand_result_t r = c->net->connect(c->net_ctx, 0, h, &sc, &sd);
        calls++;
        code_seen(c, "connect to a closed listener", r);
        if (r != STRAND_SUCCESS) break;
        conform_sleep(0.002);
      }
      if (sc) c->net->closeSend(sc);
    }
  }
  /* Data-path errors: a send larger than the posted receive; then deregMr twice. */
  conform_link_t l;
  if (conform_link_open(c, 0, &l) == 0) {
    size_t big = 16384, small = 4096;
    unsigned char *sb = calloc(1, big), *rb = calloc(1, big);
    void *smh = NULL, *rmh = NULL, *sreq = NULL, *rreq = NULL;
    if (conform_reg(c, l.send_comm, sb, big, STRAND_PTR_HOST, &smh) == 0 &&
        conform_reg(c, l.recv_comm, rb, big, STRAND_PTR_HOST, &rmh) == 0) {
      int tag = c->prev;
      void *rdata = rb;
      strand_result_t r;
      double until = conform_now() + c->stale_bound;
      if (until > c->deadline - 5) until = c->deadline - 5;
      do {
        conform_phase(c, "irecv(%zu bytes) for a larger send", small);
        size_t sz = small;
        r = c->net->irecv(l.recv_comm, 1, &rdata, &sz, &tag, &rmh, g_phandles, &rreq);
        calls++;
        code_seen(c, "irecv", r);
      } while (r == STRAND_SUCCESS && !rreq && conform_now() < until);
      do {
        conform_phase(c, "isend(%zu bytes) into a smaller receive", big);
        r = c->net->isend(l.send_comm, sb, big, c->rank, smh, g_phandle, &sreq);
        calls++;
        code_seen(c, "isend", r);
      } while (r == STRAND_SUCCESS && !sreq && conform_now() < until);
      bool serr = !sreq, rerr = !rreq;
      while ((!serr || !rerr) && conform_now() < until) {
        int done = 0, size = 0;
        if (!serr) {
          conform_phase(c, "test(oversized isend)");
          r = c->net->test(sreq, &done, &size);
          calls++;
          code_seen(c, "test(oversized isend)", r);
          if (r != STRAND_SUCCESS || done) serr = true;
        }
        if (!rerr) {
          conform_phase(c, "test(irecv smaller than the send)");
          r = c->net->test(rreq, &done, &size);
          calls++;
          code_seen(c, "test(irecv smaller than the send)", r);
          if (r != STRAND_SUCCESS || done) rerr = true;
        }
        conform_sleep(0.0005);
      }
    }
    /* (deregMr twice is hostile.double-dereg's: a crash there must not fail this check too) */
    for (int k = 0; k < 2; k++) {
      void *comm = k ? l.recv_comm : l.send_comm, **mh = k ? &rmh : &smh;
      if (!*mh) continue;
      conform_phase(c, "deregMr");
      code_seen(c, "deregMr", c->net->deregMr(comm, *mh));
      calls++;
    }
    free(sb);
    free(rb);
    /* the comms may be broken now: close without insisting on success */
    conform_barrier(c);
    code_seen(c, "closeSend", c->net->closeSend(l.send_comm));
    code_seen(c, "closeRecv", c->net->closeRecv(l.recv_comm));
    calls += 2;
  }
  /* What the harness saw earlier in this run, from any check on this rank. */
  const conform_result_seen_t *seen;
  int n = conform_results_seen(&seen), shown = 0;
  for (int i = 0; i < n; i++) {
    if (strcmp(seen[i].check, c->check->id) == 0) continue;
    if (shown++ < 8)
      conform_fail(c, "in %s, %s returned %d, which is no result a plugin may return (0..%d)",
                   seen[i].check, seen[i].call, seen[i].code, CONFORM_PLUGIN_RESULT_MAX);
  }
  if (shown > 8) conform_fail(c, "(%d more out-of-range results in earlier checks)", shown - 8);
  if (c->status != CONFORM_FAIL)
    conform_note(c, "%d provoked call results, all within 0..%d; no out-of-range result in earlier "
                 "checks of this rank", calls, CONFORM_PLUGIN_RESULT_MAX);
  return conform_verdict(c);
}

const conform_check_t conform_checks_hostile[] = {
  {"hostile.stranger-on-listen-port", "§6.1, DESIGN bounded waits",
   "60 stray TCP connections to the listen port do not stop the real connect/accept or transfer",
   hostile_stranger, 60, CONFORM_F_ABI_INDEPENDENT},
  {"hostile.forged-handle", "§6.1, §2.1",
   "connect with forged handles errors (or its comm's sends fail) within --stale-bound; no crash",
   hostile_forged_handle, 120, CONFORM_F_ABI_INDEPENDENT | CONFORM_F_STALE},
  {"hostile.double-dereg", "§6.3, §2.1", "a second deregMr of the same handle returns an error",
   hostile_double_dereg, 30, 0},
  {"hostile.test-after-done", "§6.9", "test() on a request already reported done: an error, or done "
   "again with the same size", hostile_test_after_done, 30, 0},
  {"hostile.result-codes", "§2.1",
   "provoked errors, and every result any check saw, are results a plugin may return (0..6)",
   hostile_result_codes, 60, 0},
  {0},
};
