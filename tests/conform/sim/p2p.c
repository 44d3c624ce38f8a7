/* strand-conform sim — the P2P all-to-all engine: every rank process plays SIM_P2P_LOCALS local
 * ranks that send to every remote one through shared comms (one per remote node, destination
 * local rank and channel), tags = sender ranks, and the receiver posts grouped irecvs of 128 KiB
 * chunks (n = senders still sending, at most maxRecvs), as NCCL's p2p proxy does (§6.7). */
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sim.h"

/* Model: each rank process is a node with L virtual local ranks (global rank g = node * L + j).
 * Shared comms (§6.7): for every (remote node, destination local rank k, channel) there is ONE
 * connection; on the sender all L local ranks of the node send through its sendComm with tag =
 * their global rank, and the receiver posts ONE irecv per step with n = number of senders still
 * sending (n = min(maxRecvs, L) at first), each slot a 128 KiB p2p chunk of the shared pool. */
typedef struct {
  conform_link_t link;
  bool open;
  int d, k, ch;            /* send to node rank+d (local k), receive from node rank-d for local k */
  /* sender */
  int *s_order;            /* message q -> sub j, step-major, permuted within a step */
  int *s_step;             /* message q -> step */
  size_t s_total;          /* messages */
  size_t *s_step_start;    /* step s -> first message index */
  int s_nsteps;
  size_t s_posted, s_done;
  void **s_req;            /* per message */
  size_t s_pool_off;       /* this link's region of the send pool */
  /* receiver */
  int r_nsteps;
  int r_posted, r_done;
  void *r_req[SIM_STEPS];
  void *f_req[SIM_STEPS];
  int r_state[SIM_STEPS];
  int r_sizes[SIM_STEPS][STRAND_PROXY_MAX_SUBS];
  int r_n[SIM_STEPS];
  int r_subs[SIM_STEPS][STRAND_PROXY_MAX_SUBS];
  size_t r_pool_off;
} p2p_link_t;

typedef struct {
  conform_ctx_t *c;
  int L, depth, nch, nlinks;
  p2p_link_t *links;
  unsigned char *spool, *rpool;
  size_t spool_len, rpool_len;
  void **smh, **rmh;        /* the whole pool registered on every comm (§6.3 shared mode) */
  bool flush, flush_refused;
  char flush_error[256];
  unsigned long msgs, zero_msgs, groups, group_n_hist[STRAND_PROXY_MAX_SUBS + 1], flushes;
  size_t base;              /* bytes scale per pair */
} p2p_t;

static size_t pair_bytes(const p2p_t *P, int g, int h) {
  if ((g + 2 * h) % 11 == 5) return 0;                      /* an empty send still posts a step */
  if ((g * 3 + h) % 13 == 7) return (size_t)(g * 7 + h) % 97 + 1; /* a tiny one */
  size_t f = (size_t)((g * 7 + h * 13) % 5) + 1;            /* 1/3 .. 5/3 of the base */
  return P->base * f / 3 + (size_t)((g * 131 + h * 71) % 4093);
}

static void sub_range(const p2p_t *P, int g, int h, int ch, size_t *lo, size_t *len) {
  size_t b = pair_bytes(P, g, h);
  size_t a = b * (size_t)ch / (size_t)P->nch, z = b * (size_t)(ch + 1) / (size_t)P->nch;
  *lo = a;
  *len = z - a;
}

static int sub_steps(size_t len) { return len ? (int)div_up(len, SIM_P2P_CHUNK) : 1; }

static size_t step_len(size_t len, int s) {
  size_t o = (size_t)s * SIM_P2P_CHUNK;
  return o >= len ? 0 : (len - o < SIM_P2P_CHUNK ? len - o : SIM_P2P_CHUNK);
}

static uint64_t chunk_seed(int g, int h, int ch, int s) {
  return conform_seed(g, h, ((uint64_t)(uint32_t)ch << 32) | (uint32_t)s);
}

static unsigned char *rslot(p2p_t *P, p2p_link_t *l, int j, int s) {
  return P->rpool + l->r_pool_off + ((size_t)j * (size_t)P->depth + (size_t)(s % P->depth)) * SIM_P2P_CHUNK;
}
static unsigned char *sslot(p2p_t *P, p2p_link_t *l, int j, int s) {
  return P->spool + l->s_pool_off + ((size_t)j * (size_t)P->depth + (size_t)(s % P->depth)) * SIM_P2P_CHUNK;
}

static int p2p_plan_link(p2p_t *P, p2p_link_t *l) {
  conform_ctx_t *c = P->c;
  int R = c->nranks, L = P->L;
  int dst_node = (c->rank + l->d) % R, src_node = (c->rank - l->d + R) % R;
  /* Sender: subs j = my local ranks sending to (dst_node, k). */
  int steps[STRAND_PROXY_MAX_SUBS];
  int maxs = 0;
  size_t total = 0;
  for (int j = 0; j < L; j++) {
    size_t lo, len;
    sub_range(P, c->rank * L + j, dst_node * L + l->k, l->ch, &lo, &len);
    steps[j] = sub_steps(len);
    if (steps[j] > maxs) maxs = steps[j];
    total += (size_t)steps[j];
  }
  l->s_nsteps = maxs;
  l->s_total = total;
  l->s_order = calloc(total ? total : 1, sizeof *l->s_order);
  l->s_step = calloc(total ? total : 1, sizeof *l->s_step);
  l->s_req = calloc(total ? total : 1, sizeof *l->s_req);
  l->s_step_start = calloc((size_t)maxs + 1, sizeof *l->s_step_start);
  if (!l->s_order || !l->s_step || !l->s_req || !l->s_step_start) return -1;
  size_t q = 0;
  for (int s = 0; s < maxs; s++) {
    l->s_step_start[s] = q;
    int act[STRAND_PROXY_MAX_SUBS], na = 0;
    for (int j = 0; j < L; j++)
      if (s < steps[j]) act[na++] = j;
    /* Local ranks' proxies run independently: within a step any order may reach the shared
     * sendComm, and the receiver matches by tag (§6.7). */
    for (int i = na - 1; i > 0; i--) {
      int r = (int)(sim_hash3((uint64_t)c->rank, (uint64_t)s, (uint64_t)(l->d * 977 + l->k * 31 + l->ch)) %
                    (uint64_t)(i + 1));
      int t = act[i];
      act[i] = act[r];
      act[r] = t;
    }
    for (int i = 0; i < na; i++) {
      l->s_order[q] = act[i];
      l->s_step[q] = s;
      q++;
    }
  }
  l->s_step_start[maxs] = q;
  /* Receiver: subs j = the source node's local ranks sending to my local rank k. */
  int rmax = 0;
  for (int j = 0; j < L; j++) {
    size_t lo, len;
    sub_range(P, src_node * L + j, c->rank * L + l->k, l->ch, &lo, &len);
    int st = sub_steps(len);
    if (st > rmax) rmax = st;
  }
  l->r_nsteps = rmax;
  return 0;
}

static int p2p_proxy(p2p_t *P, p2p_link_t *l) {
  conform_ctx_t *c = P->c;
  int R = c->nranks, L = P->L;
  int dst_node = (c->rank + l->d) % R, src_node = (c->rank - l->d + R) % R;
  int h_recv = c->rank * L + l->k, h_send = dst_node * L + l->k;
  int li = (int)(l - P->links);
  int moved = 0;
  /* Receiver: one grouped irecv per step over the senders that still have a step. */
  while (l->r_posted < l->r_nsteps && l->r_posted - l->r_done < P->depth) {
    int s = l->r_posted, slot = s % SIM_STEPS;
    void *bufs[STRAND_PROXY_MAX_SUBS], *mhs[STRAND_PROXY_MAX_SUBS];
    size_t sizes[STRAND_PROXY_MAX_SUBS];
    int tags[STRAND_PROXY_MAX_SUBS], n = 0;
    for (int j = 0; j < L; j++) {
      size_t lo, len;
      sub_range(P, src_node * L + j, h_recv, l->ch, &lo, &len);
      if (s >= sub_steps(len)) continue;
      bufs[n] = rslot(P, l, j, s);
      sizes[n] = SIM_P2P_CHUNK;
      tags[n] = src_node * L + j;
      mhs[n] = P->rmh[li];
      l->r_subs[slot][n] = j;
      n++;
    }
    void *req = NULL;
    conform_phase(c, "sim p2p link %d: irecv step %d (n %d)", li, s, n);
    if (simperf_try_irecv(c, l->link.recv_comm, n, bufs, sizes, tags, mhs, false, &req)) return -1;
    if (!req) break;
    l->r_req[slot] = req;
    l->r_n[slot] = n;
    l->r_state[slot] = SLOT_POSTED;
    memset(l->r_sizes[slot], 0, sizeof l->r_sizes[slot]);
    l->r_posted++;
    P->groups++;
    P->group_n_hist[n]++;
    moved++;
  }
  /* Oldest receive: test, flush, verify, consume. */
  while (l->r_done < l->r_posted) {
    int s = l->r_done, slot = s % SIM_STEPS, n = l->r_n[slot];
    if (l->r_state[slot] == SLOT_POSTED) {
      int done = 0;
      if (simperf_try_test(c, l->r_req[slot], &done, l->r_sizes[slot], "sim grouped irecv")) return -1;
      if (!done) break;
      l->r_state[slot] = SLOT_READY;
      long sum = 0;
      for (int i = 0; i < n; i++) sum += l->r_sizes[slot][i];
      if (P->flush && sum > 0) {
        void *bufs[STRAND_PROXY_MAX_SUBS], *mhs[STRAND_PROXY_MAX_SUBS], *freq = NULL;
        for (int i = 0; i < n; i++) {
          bufs[i] = rslot(P, l, l->r_subs[slot][i], s);
          mhs[i] = P->rmh[li];
        }
        conform_phase(c, "sim p2p link %d: iflush step %d (n %d)", li, s, n);
        strand_result_t r = c->net->iflush(l->link.recv_comm, n, bufs, l->r_sizes[slot], mhs, &freq);
        P->flushes++;
        if (r != STRAND_SUCCESS) {
          P->flush_refused = true;
          snprintf(P->flush_error, sizeof P->flush_error, "iflush(n %d) returned %s", n,
                   conform_result_str(r));
          return -1;
        }
        if (freq) {
          l->f_req[slot] = freq;
          l->r_state[slot] = SLOT_FLUSHING;
        }
      }
    }
    if (l->r_state[slot] == SLOT_FLUSHING) {
      int done = 0;
      if (simperf_try_test(c, l->f_req[slot], &done, NULL, "sim iflush")) return -1;
      if (!done) break;
      l->r_state[slot] = SLOT_READY;
    }
    for (int i = 0; i < n; i++) {
      int j = l->r_subs[slot][i], g = src_node * L + j;
      size_t lo, len;
      sub_range(P, g, h_recv, l->ch, &lo, &len);
      size_t want = step_len(len, s);
      if ((size_t)l->r_sizes[slot][i] != want) {
        conform_fail(c, "grouped irecv (n %d) on the shared comm from rank %d, channel %d, step %d: "
                     "slot %d (tag %d) reported %d bytes, rank %d sent %zu%s", n, src_node, l->ch,
                     s, i, g, l->r_sizes[slot][i], g, want,
                     " (sizes must follow the tags, not the arrival order, §6.7)");
        return -1;
      }
      long long bad = conform_verify(rslot(P, l, j, s), want, chunk_seed(g, h_recv, l->ch, s));
      if (bad >= 0) {
        conform_fail(c, "grouped irecv (n %d) from rank %d, channel %d, step %d: slot %d (tag %d) "
                     "differs at byte %lld of %zu: the data of another tag or step landed there",
                     n, src_node, l->ch, s, i, g, bad, want);
        return -1;
      }
    }
    if (c->net->irecvConsumed) {
      strand_result_t r = c->net->irecvConsumed(l->link.recv_comm, n, l->r_req[slot]);
      if (r != STRAND_SUCCESS) {
        conform_fail(c, "irecvConsumed(n %d) returned %s", n, conform_result_str(r));
        return -1;
      }
    }
    l->r_state[slot] = SLOT_IDLE;
    l->r_done++;
    moved++;
  }
  /* Sender: message q (step s of sub j) once step s - depth has completed for everyone. */
  while (l->s_posted < l->s_total) {
    size_t q = l->s_posted;
    int s = l->s_step[q], j = l->s_order[q];
    if (s >= P->depth && l->s_done < l->s_step_start[s - P->depth + 1]) break;
    int g = c->rank * L + j;
    size_t lo, len;
    sub_range(P, g, h_send, l->ch, &lo, &len);
    size_t sz = step_len(len, s);
    unsigned char *buf = sslot(P, l, j, s);
    /* The "GPU" writes the chunk just before the proxy sends it; it stays put until done. */
    if (l->s_req[q] == NULL) conform_fill(buf, sz, chunk_seed(g, h_send, l->ch, s));
    void *req = NULL;
    conform_phase(c, "sim p2p link %d: isend step %d tag %d (%zu bytes)", li, s, g, sz);
    if (simperf_try_isend(c, l->link.send_comm, buf, sz, g, P->smh[li], &req)) return -1;
    if (!req) break;
    l->s_req[q] = req;
    l->s_posted++;
    P->msgs++;
    if (!sz) P->zero_msgs++;
    moved++;
  }
  while (l->s_done < l->s_posted) {
    int done = 0, size = -1;
    if (simperf_try_test(c, l->s_req[l->s_done], &done, &size, "sim p2p isend")) return -1;
    if (!done) break;
    l->s_done++;
    moved++;
  }
  return moved;
}

static void p2p_dump(p2p_t *P, char *buf, size_t len) {
  size_t u = 0;
  for (int i = 0; i < P->nlinks && u < len; i++) {
    p2p_link_t *l = &P->links[i];
    if (l->r_done == l->r_nsteps && l->s_done == l->s_total) continue;
    int w = snprintf(buf + u, len - u, "%slink %d (node +%d, local %d, ch %d): sends posted %zu, done "
                     "%zu of %zu; grouped receives posted %d, done %d of %d", u ? "; " : "", i, l->d,
                     l->k, l->ch, l->s_posted, l->s_done, l->s_total, l->r_posted, l->r_done,
                     l->r_nsteps);
    if (w < 0) break;
    u += (size_t)w;
  }
}

conform_status_t sim_p2p_alltoall_grouped(conform_ctx_t *c) {
  if (sim_precheck(c)) return c->status;
  strand_props_v12_t props;
  if (conform_props(c, sim_opts.dev, &props)) return CONFORM_FAIL;
  bool flush = sim_opts.flush;
  if (flush && !c->net->iflush) return conform_skip(c, "--flush given but the plugin has no iflush");
  p2p_t P;
  memset(&P, 0, sizeof P);
  P.c = c;
  P.nch = sim_opts.channels;
  int max_recvs = props.maxRecvs < 1 ? 1 : props.maxRecvs;
  P.L = max_recvs < SIM_P2P_LOCALS ? max_recvs : SIM_P2P_LOCALS;
  if (P.L > STRAND_PROXY_MAX_SUBS) P.L = STRAND_PROXY_MAX_SUBS;
  /* Per-sub posting depth min(8, 16 / nsubs) (§6.2), over NCCL_SHARED_STEPS slots. */
  P.depth = SIM_SHARED_STEPS / P.L;
  if (P.depth > SIM_STEPS) P.depth = SIM_STEPS;
  if (P.depth < 1) P.depth = 1;
  P.flush = flush;
  size_t bytes = sim_bytes(c);
  P.base = bytes / (size_t)P.L;
  int R = c->nranks;
  P.nlinks = (R - 1) * P.L * P.nch;
  P.links = calloc((size_t)P.nlinks, sizeof *P.links);
  P.smh = calloc((size_t)P.nlinks, sizeof *P.smh);
  P.rmh = calloc((size_t)P.nlinks, sizeof *P.rmh);
  size_t region = (size_t)P.L * (size_t)P.depth * SIM_P2P_CHUNK;
  P.spool_len = P.rpool_len = region * (size_t)P.nlinks;
  conform_status_t st = CONFORM_FAIL;
  if (!P.links || !P.smh || !P.rmh || posix_memalign((void **)&P.spool, 4096, P.spool_len) ||
      posix_memalign((void **)&P.rpool, 4096, P.rpool_len)) {
    conform_fail(c, "out of memory for %zu-byte shared pools", P.spool_len);
    goto out;
  }
  memset(P.rpool, 0, P.rpool_len);
  /* A full mesh: for each distance d, a ring "send to rank+d, receive from rank-d"
   * (conform_link_open_at), once per destination local rank and channel. */
  int li = 0;
  for (int d = 1; d < R; d++)
    for (int k = 0; k < P.L; k++)
      for (int ch = 0; ch < P.nch; ch++, li++) {
        p2p_link_t *l = &P.links[li];
        l->d = d;
        l->k = k;
        l->ch = ch;
        l->s_pool_off = l->r_pool_off = region * (size_t)li;
        if (conform_link_open_at(c, sim_opts.dev, d, &l->link)) goto out;
        l->open = true;
        /* The same pool registered on every comm, like NCCL's shared P2P buffers (§6.3). */
        if (conform_reg(c, l->link.send_comm, P.spool, P.spool_len, STRAND_PTR_HOST, &P.smh[li]) ||
            conform_reg(c, l->link.recv_comm, P.rpool, P.rpool_len, STRAND_PTR_HOST, &P.rmh[li]))
          goto out;
        if (p2p_plan_link(&P, l)) {
          conform_fail(c, "out of memory for the P2P plan");
          goto out;
        }
      }
  unsigned idle = 0;
  double last = conform_now();
  for (unsigned long it = 0;; it++) {
    int moved = 0;
    bool finished = true;
    for (int i = 0; i < P.nlinks; i++) {
      int m = p2p_proxy(&P, &P.links[i]);
      if (m < 0) {
        if (P.flush_refused) {
          st = sim_flush_verdict(c, P.flush_error);
        }
        goto out;
      }
      moved += m;
      finished = finished && P.links[i].r_done == P.links[i].r_nsteps &&
                 P.links[i].s_done == P.links[i].s_total;
    }
    if (finished) break;
    if (moved) {
      idle = 0;
      last = conform_now();
    } else if (++idle > 64) {
      sched_yield();
    }
    if ((it & 255) == 0 || (idle && (idle & 63) == 0)) {
      if (conform_peer_failed(c) || conform_remaining(c) < 1.5) {
        char s[CONFORM_MSG_MAX];
        p2p_dump(&P, s, sizeof s);
        char w[200];
        snprintf(w, sizeof w, "P2P all-to-all with grouped receives (no progress for %.1f s)",
                 conform_now() - last);
        sim_bounded(c, w, s);
        goto out;
      }
    }
  }
  st = CONFORM_PASS;
  {
    char hist[128] = "";
    for (int n = 1; n <= P.L; n++)
      if (P.group_n_hist[n])
        snprintf(hist + strlen(hist), sizeof hist - strlen(hist), "%sn=%d: %lu", hist[0] ? ", " : "",
                 n, P.group_n_hist[n]);
    conform_note(c, "%d virtual local ranks per process (maxRecvs %d), depth %d, %d shared comm "
                 "pairs; %lu grouped irecvs (%s); %lu sends (%lu of 0 bytes)%s", P.L,
                 props.maxRecvs, P.depth, P.nlinks, P.groups, hist, P.msgs, P.zero_msgs,
                 max_recvs == 1 ? "; maxRecvs = 1, so every receive had n = 1" : "");
    if (flush) conform_note(c, "%lu iflush calls", P.flushes);
  }
out:
  for (int i = 0; P.links && i < P.nlinks; i++) {
    p2p_link_t *l = &P.links[i];
    if (l->open) {
      if (P.smh[i]) conform_dereg(c, l->link.send_comm, P.smh[i]);
      if (P.rmh[i]) conform_dereg(c, l->link.recv_comm, P.rmh[i]);
      conform_link_close(c, &l->link);
    }
    free(l->s_order);
    free(l->s_step);
    free(l->s_req);
    free(l->s_step_start);
  }
  free(P.links);
  free(P.smh);
  free(P.rmh);
  free(P.spool);
  free(P.rpool);
  if (st == CONFORM_PASS && c->status == CONFORM_FAIL) st = CONFORM_FAIL;
  return st;
}
