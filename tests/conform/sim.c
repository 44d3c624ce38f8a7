/* strand-conform sim — NCCL-shaped proxy traffic with verified results.
 *
 * Why: a plugin can pass one-message-at-a-time checks and still break under the way NCCL really
 * drives it: up to 8 requests in flight per connection (NCCL_STEPS, slot = step mod 8), several
 * connections progressed round-robin by one proxy thread so completions interleave across comms,
 * messages of mixed sizes (0 bytes included) into buffers larger than the message, grouped
 * receives on shared comms, LL receives with the optional-completion sentinel, iflush after
 * SIMPLE receives (§6.2, §6.4-§6.8). Each scenario here runs collectives the way NCCL's ring
 * kernels and net proxy cut them, on every rank at once, and checks the final buffers exactly.
 *
 * Model (one process per rank, one thread doing both roles, never blocking):
 *   proxy  per connection: keeps receives posted into free FIFO slots, tests the oldest receive,
 *          flushes completed SIMPLE receives when asked, isends what the "GPU" wrote, tests the
 *          oldest send. Every call is tried once; a NULL request is retried on a later pass.
 *   GPU    per channel: a list of ring primitives (send, recvReduceSend, recvReduceCopySend,
 *          recvCopySend, recv), each cut into slices = one network message. A primitive runs
 *          when its receive slot is complete and its send slot is free, and computes with the
 *          SDK's CPU reductions (strand/reduce.h).
 * Data is chosen so that the exact result is known whatever the summation order (small integers
 * in float32 / bfloat16, wrap-around int32), so the comparison is bit for bit. */
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "simperf.h"
#include "strand/reduce.h"

#define SIM_STEPS 8          /* NCCL_STEPS */
#define SIM_P2P_CHUNK (128 * 1024)
#define SIM_P2P_LOCALS 4     /* virtual local ranks per process in the P2P scenario */
#define SIM_SHARED_STEPS 16  /* NCCL_SHARED_STEPS */

/* ------------------------------------------------------------------ options */

static struct {
  int channels;
  size_t bytes;
  int iters;
  bool flush;
  int dev;
} sim_opts = {2, (size_t)4 << 20, 2, false, 0};

/* ------------------------------------------------------------------ protocols */

typedef struct {
  const char *name;
  size_t buff_size;  /* per connection (NCCL_BUFFSIZE / NCCL_LL_BUFFSIZE defaults) */
  int slice_steps;   /* FIFO steps per network message */
  int chunk_steps;   /* FIFO steps per ring primitive */
  bool ll;           /* 16-byte lines: 8 data bytes + two 4-byte flags */
} sim_proto_t;

static const sim_proto_t proto_simple = {"SIMPLE", (size_t)4 << 20, 2, 4, false};
static const sim_proto_t proto_ll = {"LL", (size_t)512 << 10, 1, 1, true};

static size_t step_bytes(const sim_proto_t *p) { return p->buff_size / SIM_STEPS; }
/* Largest message (irecv size): stepSize x sliceSteps (§6.4). */
static size_t msg_bytes(const sim_proto_t *p) { return step_bytes(p) * (size_t)p->slice_steps; }
/* User data carried by one message (LL lines carry half their size). */
static size_t slice_data_bytes(const sim_proto_t *p) { return p->ll ? msg_bytes(p) / 2 : msg_bytes(p); }
static int inflight(const sim_proto_t *p) { return SIM_STEPS / p->slice_steps; }

/* ------------------------------------------------------------------ ring plan */

enum { OP_RECV = 1, OP_REDUCE = 2, OP_SEND = 4, OP_OUT = 8 };

typedef struct {
  uint8_t flags;
  int chunk;          /* ring chunk index (for messages) */
  size_t src, dst, n; /* element offsets into input / output, element count */
} sim_op_t;

typedef struct {
  sim_op_t *v;
  size_t n, cap;
  size_t nsend, nrecv;
} op_list_t;

typedef enum { COLL_ALLREDUCE, COLL_ALLGATHER, COLL_REDUCESCATTER } coll_t;
static const char *coll_name(coll_t k) {
  return k == COLL_ALLREDUCE ? "all-reduce" : k == COLL_ALLGATHER ? "all-gather" : "reduce-scatter";
}

static int ops_push(op_list_t *l, uint8_t flags, int chunk, size_t src, size_t dst, size_t n) {
  if (l->n == l->cap) {
    size_t nc = l->cap ? l->cap * 2 : 256;
    sim_op_t *v = realloc(l->v, nc * sizeof *v);
    if (!v) return -1;
    l->v = v;
    l->cap = nc;
  }
  l->v[l->n++] = (sim_op_t){flags, chunk, src, dst, n};
  if (flags & OP_SEND) l->nsend++;
  if (flags & OP_RECV) l->nrecv++;
  return 0;
}

static size_t div_up(size_t a, size_t b) { return (a + b - 1) / b; }
static size_t round_up(size_t a, size_t b) { return div_up(a, b) * b; }

/* One ring primitive on chunk `c` (within-block offset `o`, `n` elements) cut into slices. */
static int add_prim(op_list_t *l, coll_t k, uint8_t flags, int c, size_t o, size_t n, size_t count,
                    int spc, size_t align) {
  size_t slice = n ? round_up(div_up(n, (size_t)spc), align) : 0;
  for (int s = 0; s < spc; s++) {
    size_t so = slice * (size_t)s;
    size_t sn = so >= n ? 0 : (n - so < slice ? n - so : slice);
    size_t src, dst;
    switch (k) {
    case COLL_ALLREDUCE: src = dst = o + so; break;
    case COLL_ALLGATHER: src = o + so; dst = (size_t)c * count + o + so; break;
    default: src = (size_t)c * count + o + so; dst = o + so; break;
    }
    if (ops_push(l, flags, c, src, dst, sn)) return -1;
  }
  return 0;
}

/* The ring program of one channel, as NCCL's ring kernels order it. `count`: all-reduce = total
 * elements; all-gather / reduce-scatter = elements of one rank's block. */
static int plan_ring(op_list_t *l, coll_t k, const sim_proto_t *p, size_t elt, size_t count,
                     int rank, int nranks, int ch, int nch) {
  size_t align = (p->ll ? 8 : 16) / elt;
  if (!align) align = 1;
  int spc = p->chunk_steps / p->slice_steps;
  size_t chunk_elems = slice_data_bytes(p) * (size_t)spc / elt;
  size_t N = (size_t)nranks, C = (size_t)nch;
  size_t per_loop_chunks = k == COLL_ALLREDUCE ? C * N : C;
  size_t loop = per_loop_chunks * chunk_elems;
  int r = rank;
#define CH(x) ((int)(((x) % nranks + nranks) % nranks))
  for (size_t go = 0; go < count; go += loop) {
    size_t real = div_up(count - go, per_loop_chunks);
    real = round_up(real, align);
    if (real > chunk_elems) real = chunk_elems;
    /* Offset and size of chunk c of this channel in this loop. */
    size_t base = k == COLL_ALLREDUCE ? go + (size_t)ch * N * real : go + (size_t)ch * real;
#define OFF(c) (k == COLL_ALLREDUCE ? base + (size_t)(c) * real : base)
#define LEN(c) (OFF(c) >= count ? 0 : (count - OFF(c) < real ? count - OFF(c) : real))
#define PRIM(fl, c) do { int c_ = (c); \
      if (add_prim(l, k, (fl), c_, OFF(c_), LEN(c_), count, spc, align)) return -1; } while (0)
    if (k == COLL_ALLREDUCE) {
      PRIM(OP_SEND, CH(r - 1));
      for (int j = 2; j <= nranks - 1; j++) PRIM(OP_RECV | OP_REDUCE | OP_SEND, CH(r - j));
      PRIM(OP_RECV | OP_REDUCE | OP_OUT | OP_SEND, r);
      for (int j = 1; j <= nranks - 2; j++) PRIM(OP_RECV | OP_OUT | OP_SEND, CH(r - j));
      PRIM(OP_RECV | OP_OUT, CH(r + 1));
    } else if (k == COLL_ALLGATHER) {
      PRIM(OP_SEND | OP_OUT, r);
      for (int j = 1; j <= nranks - 2; j++) PRIM(OP_RECV | OP_OUT | OP_SEND, CH(r - j));
      PRIM(OP_RECV | OP_OUT, CH(r + 1));
    } else {
      PRIM(OP_SEND, CH(r - 1));
      for (int j = 2; j <= nranks - 1; j++) PRIM(OP_RECV | OP_REDUCE | OP_SEND, CH(r - j));
      PRIM(OP_RECV | OP_REDUCE | OP_OUT, r);
    }
#undef PRIM
#undef LEN
#undef OFF
  }
#undef CH
  return 0;
}

/* ------------------------------------------------------------------ connections */

enum { SLOT_IDLE = 0, SLOT_POSTED, SLOT_FLUSHING, SLOT_READY };

typedef struct {
  conform_link_t link;
  bool open;
  unsigned char *sfifo, *rfifo;
  void *smh, *rmh;
  /* Send side, in messages (cumulative over the scenario's collectives). */
  uint64_t s_total, s_filled, s_posted, s_done;
  size_t s_size[SIM_STEPS];
  void *s_req[SIM_STEPS];
  /* Receive side. */
  uint64_t r_total, r_posted, r_done, r_consumed;
  void *r_req[SIM_STEPS];
  int r_size[SIM_STEPS];
  int r_state[SIM_STEPS];
  void *f_req[SIM_STEPS];
  uint64_t r_flush_next; /* oldest message whose flush is pending */
} ring_conn_t;

typedef struct {
  conform_ctx_t *c;
  const sim_proto_t *p;
  int nch;
  ring_conn_t *conn;
  bool flush;          /* iflush every SIMPLE receive with data (§6.8) */
  bool sentinel;       /* preset NCCL_NET_OPTIONAL_RECV_COMPLETION on every irecv (§6.6) */
  bool flush_refused;  /* iflush returned an error (the scenario decides pass/skip/fail) */
  char flush_error[256];
  unsigned long flushes, flush_null;
  unsigned long zero_msgs, msgs;
  /* Current collective. */
  coll_t coll;
  strand_datatype_t type;
  size_t elt, count;
  const unsigned char *in;
  unsigned char *out;
  op_list_t *ops;  /* per channel */
  size_t *cur;     /* per channel: next op */
  unsigned char *tmp;
} ring_t;

static int slot_of(const ring_t *R, uint64_t msg) {
  return (int)((msg * (uint64_t)R->p->slice_steps) % SIM_STEPS);
}

static uint32_t ll_flag(uint64_t msg) { return (uint32_t)(msg + 1); }

static void ll_encode(unsigned char *lines, const unsigned char *data, size_t bytes, uint32_t flag) {
  size_t nl = div_up(bytes, 8);
  for (size_t i = 0; i < nl; i++) {
    uint32_t d[2] = {0, 0};
    size_t take = bytes - i * 8 < 8 ? bytes - i * 8 : 8;
    memcpy(d, data + i * 8, take);
    uint32_t line[4] = {d[0], flag, d[1], flag};
    memcpy(lines + i * 16, line, 16);
  }
}

/* True when every flag of the message carries `flag` (the data has landed, as the GPU sees it). */
static bool ll_ready(const unsigned char *lines, size_t bytes, uint32_t flag) {
  size_t nl = div_up(bytes, 8);
  for (size_t i = 0; i < nl; i++) {
    uint32_t line[4];
    memcpy(line, lines + i * 16, 16);
    if (line[1] != flag || line[3] != flag) return false;
  }
  return true;
}

static void ll_decode(unsigned char *data, const unsigned char *lines, size_t bytes) {
  size_t nl = div_up(bytes, 8);
  for (size_t i = 0; i < nl; i++) {
    uint32_t line[4];
    memcpy(line, lines + i * 16, 16);
    uint32_t d[2] = {line[0], line[2]};
    size_t take = bytes - i * 8 < 8 ? bytes - i * 8 : 8;
    memcpy(data + i * 8, d, take);
  }
}

static int ring_open(ring_t *R, conform_ctx_t *c, const sim_proto_t *p, int nch) {
  memset(R, 0, sizeof *R);
  R->c = c;
  R->p = p;
  R->nch = nch;
  R->conn = calloc((size_t)nch, sizeof *R->conn);
  R->ops = calloc((size_t)nch, sizeof *R->ops);
  R->cur = calloc((size_t)nch, sizeof *R->cur);
  R->tmp = malloc(msg_bytes(p));
  if (!R->conn || !R->ops || !R->cur || !R->tmp) {
    conform_fail(c, "out of memory");
    return -1;
  }
  for (int ch = 0; ch < nch; ch++) {
    ring_conn_t *k = &R->conn[ch];
    if (conform_link_open(c, sim_opts.dev, &k->link)) return -1;
    k->open = true;
    if (posix_memalign((void **)&k->sfifo, 4096, p->buff_size) ||
        posix_memalign((void **)&k->rfifo, 4096, p->buff_size)) {
      conform_fail(c, "out of memory for the FIFOs");
      return -1;
    }
    memset(k->sfifo, 0, p->buff_size);
    memset(k->rfifo, 0, p->buff_size);
    /* One registration per staging buffer, right after connect/accept (§6.3 dedicated mode). */
    if (conform_reg(c, k->link.send_comm, k->sfifo, p->buff_size, STRAND_PTR_HOST, &k->smh)) return -1;
    if (conform_reg(c, k->link.recv_comm, k->rfifo, p->buff_size, STRAND_PTR_HOST, &k->rmh)) return -1;
  }
  return 0;
}

static void ring_close(ring_t *R) {
  conform_ctx_t *c = R->c;
  for (int ch = 0; R->conn && ch < R->nch; ch++) {
    ring_conn_t *k = &R->conn[ch];
    if (!k->open) continue;
    if (k->smh) conform_dereg(c, k->link.send_comm, k->smh);
    if (k->rmh) conform_dereg(c, k->link.recv_comm, k->rmh);
    conform_link_close(c, &k->link);
  }
  for (int ch = 0; R->conn && ch < R->nch; ch++) {
    free(R->conn[ch].sfifo);
    free(R->conn[ch].rfifo);
    if (R->ops) free(R->ops[ch].v);
  }
  free(R->conn);
  free(R->ops);
  free(R->cur);
  free(R->tmp);
  memset(R, 0, sizeof *R);
}

/* --- proxy side: one pass over one connection; returns how many things moved, -1 on error. */
static int proxy_pass(ring_t *R, int ch) {
  conform_ctx_t *c = R->c;
  ring_conn_t *k = &R->conn[ch];
  const sim_proto_t *p = R->p;
  int moved = 0;
  /* Post receives into free slots (the GPU frees a slot when it consumed its data). */
  while (k->r_posted < k->r_total && k->r_posted - k->r_consumed < (uint64_t)inflight(p)) {
    int s = slot_of(R, k->r_posted);
    void *buf = k->rfifo + (size_t)s * step_bytes(p);
    size_t size = msg_bytes(p);
    int tag = c->prev;
    void *req = NULL;
    conform_phase(c, "sim %s ch %d: irecv msg %llu (slot %d)", p->name, ch,
                  (unsigned long long)k->r_posted, s);
    if (simperf_try_irecv(c, k->link.recv_comm, 1, &buf, &size, &tag, &k->rmh, R->sentinel, &req))
      return -1;
    if (!req) break;
    k->r_req[s] = req;
    k->r_state[s] = SLOT_POSTED;
    k->r_posted++;
    moved++;
  }
  /* Test the oldest receive, in order (NCCL never tests a younger one first). */
  while (k->r_done < k->r_posted) {
    int s = slot_of(R, k->r_done);
    int sizes[STRAND_PROXY_MAX_SUBS] = {0};
    int done = 0;
    if (simperf_try_test(c, k->r_req[s], &done, sizes, "sim irecv")) return -1;
    if (!done) break;
    k->r_size[s] = sizes[0];
    k->r_done++;
    moved++;
    if (R->flush && !p->ll && sizes[0] > 0) {
      void *buf = k->rfifo + (size_t)s * step_bytes(p);
      void *freq = NULL;
      conform_phase(c, "sim ch %d: iflush msg %llu", ch, (unsigned long long)(k->r_done - 1));
      strand_result_t r = c->net->iflush(k->link.recv_comm, 1, &buf, &k->r_size[s], &k->rmh, &freq);
      R->flushes++;
      if (r != STRAND_SUCCESS) {
        R->flush_refused = true;
        snprintf(R->flush_error, sizeof R->flush_error, "iflush(n 1, %d bytes) returned %s",
                 k->r_size[s], conform_result_str(r));
        return -1;
      }
      if (!freq) {
        R->flush_null++; /* NULL = already complete (§6.5) */
        k->r_state[s] = SLOT_READY;
      } else {
        k->f_req[s] = freq;
        k->r_state[s] = SLOT_FLUSHING;
      }
    } else {
      k->r_state[s] = SLOT_READY;
    }
  }
  /* Flush requests complete in order too; test(req, &done, NULL) as the core does (§6.8). */
  while (k->r_flush_next < k->r_done) {
    int s = slot_of(R, k->r_flush_next);
    if (k->r_state[s] == SLOT_FLUSHING) {
      int done = 0;
      if (simperf_try_test(c, k->f_req[s], &done, NULL, "sim iflush")) return -1;
      if (!done) break;
      k->r_state[s] = SLOT_READY;
      moved++;
    }
    k->r_flush_next++;
  }
  /* Send what the GPU wrote. */
  while (k->s_posted < k->s_filled) {
    int s = slot_of(R, k->s_posted);
    void *req = NULL;
    conform_phase(c, "sim %s ch %d: isend msg %llu (%zu bytes)", p->name, ch,
                  (unsigned long long)k->s_posted, k->s_size[s]);
    if (simperf_try_isend(c, k->link.send_comm, k->sfifo + (size_t)s * step_bytes(p), k->s_size[s],
                          c->rank, k->smh, &req))
      return -1;
    if (!req) break;
    k->s_req[s] = req;
    k->s_posted++;
    moved++;
  }
  while (k->s_done < k->s_posted) {
    int s = slot_of(R, k->s_done);
    int size = -1, done = 0;
    if (simperf_try_test(c, k->s_req[s], &done, &size, "sim isend")) return -1;
    if (!done) break;
    k->s_done++;
    moved++;
  }
  return moved;
}

/* --- GPU side: run the channel's primitives while their slots allow; -1 on error. */
static int gpu_pass(ring_t *R, int ch) {
  conform_ctx_t *c = R->c;
  ring_conn_t *k = &R->conn[ch];
  const sim_proto_t *p = R->p;
  op_list_t *ol = &R->ops[ch];
  int moved = 0;
  while (R->cur[ch] < ol->n) {
    const sim_op_t *op = &ol->v[R->cur[ch]];
    size_t bytes = op->n * R->elt;
    const unsigned char *rdata = NULL;
    int rs = -1;
    if (op->flags & OP_RECV) {
      if (k->r_consumed >= k->r_done) break;
      rs = slot_of(R, k->r_consumed);
      if (k->r_state[rs] != SLOT_READY) break;
      const unsigned char *slot = k->rfifo + (size_t)rs * step_bytes(p);
      size_t wire = p->ll ? div_up(bytes, 8) * 16 : bytes;
      /* With the optional-completion sentinel the size is not tracked (§6.6); otherwise test()
       * must report exactly what the peer sent. */
      if (!(p->ll && R->sentinel) && (size_t)k->r_size[rs] != wire) {
        conform_fail(c, "%s %s channel %d: receive #%llu from rank %d: test() reported %d bytes, "
                     "the peer sent %zu (irecv size %zu)", p->name, coll_name(R->coll), ch,
                     (unsigned long long)k->r_consumed, c->prev, k->r_size[rs], wire, msg_bytes(p));
        return -1;
      }
      if (p->ll) {
        if (!ll_ready(slot, bytes, ll_flag(k->r_consumed))) {
          if (R->sentinel) break; /* may land after an early completion: the GPU polls flags */
          conform_fail(c, "LL %s channel %d: test() reported receive #%llu done but its data had "
                       "not landed (flags still stale)", coll_name(R->coll), ch,
                       (unsigned long long)k->r_consumed);
          return -1;
        }
        ll_decode(R->tmp, slot, bytes);
        rdata = R->tmp;
      } else {
        rdata = slot;
      }
    }
    int ss = -1;
    if (op->flags & OP_SEND) {
      if (k->s_filled - k->s_done >= (uint64_t)inflight(p)) break;
      ss = slot_of(R, k->s_filled);
    }
    unsigned char *sslot = ss >= 0 ? k->sfifo + (size_t)ss * step_bytes(p) : NULL;
    const unsigned char *src = R->in + op->src * R->elt;
    /* Where the result goes: the output, else straight into a SIMPLE send slot, else scratch. */
    unsigned char *res;
    if (op->flags & OP_OUT) res = R->out + op->dst * R->elt;
    else if (sslot && !p->ll) res = sslot;
    else res = R->tmp;
    if (op->n) {
      if ((op->flags & OP_RECV) && (op->flags & OP_REDUCE)) {
        strand_result_t r = strand_reduce3(R->type, STRAND_SUM, res, rdata, src, op->n);
        if (r != STRAND_SUCCESS) {
          conform_fail(c, "strand_reduce3 returned %s", conform_result_str(r));
          return -1;
        }
      } else if (op->flags & OP_RECV) {
        if (res != rdata) memmove(res, rdata, bytes);
      } else {
        memcpy(res, src, bytes);
      }
    }
    if (op->flags & OP_SEND) {
      if (p->ll) {
        ll_encode(sslot, res, bytes, ll_flag(k->s_filled));
        k->s_size[ss] = div_up(bytes, 8) * 16;
      } else {
        if (res != sslot && bytes) memcpy(sslot, res, bytes);
        k->s_size[ss] = bytes;
      }
      if (k->s_size[ss] == 0) R->zero_msgs++;
      R->msgs++;
      k->s_filled++;
    }
    if (op->flags & OP_RECV) {
      /* The GPU is done with the step: NCCL tells the plugin (§6.12), then reposts the slot. */
      if (c->net->irecvConsumed) {
        conform_phase(c, "sim ch %d: irecvConsumed msg %llu", ch, (unsigned long long)k->r_consumed);
        strand_result_t r = c->net->irecvConsumed(k->link.recv_comm, 1, k->r_req[rs]);
        if (r != STRAND_SUCCESS) {
          conform_fail(c, "irecvConsumed(n 1) returned %s", conform_result_str(r));
          return -1;
        }
      }
      k->r_state[rs] = SLOT_IDLE;
      k->r_consumed++;
    }
    R->cur[ch]++;
    moved++;
  }
  return moved;
}

static void ring_dump(ring_t *R, char *buf, size_t len) {
  size_t u = 0;
  for (int ch = 0; ch < R->nch && u < len; ch++) {
    ring_conn_t *k = &R->conn[ch];
    const op_list_t *ol = &R->ops[ch];
    const char *wait = "";
    if (R->cur[ch] < ol->n) {
      const sim_op_t *op = &ol->v[R->cur[ch]];
      if ((op->flags & OP_RECV) && k->r_consumed >= k->r_done) wait = " waiting for a receive to complete";
      else if (op->flags & OP_RECV) wait = R->p->ll ? " waiting for LL flags / flush" : " waiting for a flush";
      else wait = " waiting for a send slot";
    }
    int w = snprintf(buf + u, len - u,
                     "%sch %d: GPU at primitive %zu/%zu%s; sends posted %llu, done %llu of %llu; "
                     "receives posted %llu, done %llu, consumed %llu of %llu", ch ? "; " : "", ch,
                     R->cur[ch], ol->n, wait, (unsigned long long)k->s_posted,
                     (unsigned long long)k->s_done, (unsigned long long)k->s_total,
                     (unsigned long long)k->r_posted, (unsigned long long)k->r_done,
                     (unsigned long long)k->r_consumed, (unsigned long long)k->r_total);
    if (w < 0) break;
    u += (size_t)w;
  }
}

/* Bound check shared by both engines: returns -1 (failure recorded) when the peer failed or the
 * check's time is nearly out. */
static int sim_bounded(conform_ctx_t *c, const char *what, const char *state) {
  if (conform_peer_failed(c)) {
    conform_fail(c, "%s: %s", what, c->bs_error);
    return -1;
  }
  if (conform_remaining(c) < 1.5) {
    conform_fail(c, "%s made no progress before the time bound (a plugin that loses or stalls "
                 "requests under pipelining): %s", what, state);
    return -1;
  }
  return 0;
}

/* Run one collective over all channels; the input/output/plan are set in R. */
static int ring_run(ring_t *R, const char *what) {
  conform_ctx_t *c = R->c;
  for (int ch = 0; ch < R->nch; ch++) {
    R->cur[ch] = 0;
    R->conn[ch].s_total += R->ops[ch].nsend;
    R->conn[ch].r_total += R->ops[ch].nrecv;
  }
  unsigned idle = 0;
  double last_progress = conform_now();
  for (unsigned long it = 0;; it++) {
    int moved = 0;
    for (int ch = 0; ch < R->nch; ch++) {
      int m = proxy_pass(R, ch);
      if (m < 0) return -1;
      moved += m;
    }
    for (int ch = 0; ch < R->nch; ch++) {
      int m = gpu_pass(R, ch);
      if (m < 0) return -1;
      moved += m;
    }
    bool finished = true;
    for (int ch = 0; ch < R->nch && finished; ch++)
      finished = R->cur[ch] == R->ops[ch].n && R->conn[ch].s_done == R->conn[ch].s_total;
    if (finished) return 0;
    if (moved) {
      idle = 0;
      last_progress = conform_now();
    } else if (++idle > 64) {
      sched_yield(); /* the peers need the CPU on a small box */
    }
    if ((it & 255) == 0 || (idle && (idle & 63) == 0)) {
      if (conform_peer_failed(c) || conform_remaining(c) < 1.5) {
        char st[CONFORM_MSG_MAX];
        ring_dump(R, st, sizeof st);
        char w[256];
        snprintf(w, sizeof w, "%s (no progress for %.1f s)", what, conform_now() - last_progress);
        return sim_bounded(c, w, st);
      }
    }
  }
}

/* ------------------------------------------------------------------ data */

static uint64_t hash3(uint64_t a, uint64_t b, uint64_t c) {
  uint64_t x = a * 0x9e3779b97f4a7c15ULL ^ (b + 0x632be59bd9b4e019ULL) * 0xbf58476d1ce4e5b9ULL ^
               (c + 0x94d049bb133111ebULL);
  x ^= x >> 31;
  x *= 0xd6e8feb86659fd93ULL;
  x ^= x >> 29;
  return x;
}

/* Integer-valued element so that any summation order gives the exact same result. */
static long long elem_int(strand_datatype_t t, int rank, size_t i, int iter) {
  uint64_t h = hash3((uint64_t)rank + 1, i, (uint64_t)iter);
  switch (t) {
  case STRAND_FLOAT32: return (long long)(h % 129) - 64;  /* sums exact in float up to 2^24 */
  case STRAND_BFLOAT16: return (long long)(h % 9) - 4;    /* |sum| <= 4 x 64 ranks = 256: exact */
  case STRAND_FLOAT16: return (long long)(h % 17) - 8;    /* |sum| <= 512 < 2048: exact */
  default: return (long long)(int32_t)(uint32_t)h;        /* int32: wraps, still exact */
  }
}

static void store_elem(strand_datatype_t t, void *buf, size_t i, long long v) {
  if (t == STRAND_INT32) {
    int32_t x = (int32_t)(uint32_t)(unsigned long long)v;
    memcpy((char *)buf + i * 4, &x, 4);
  } else {
    strand_datatype_store(t, buf, i, (double)v);
  }
}

static void fill_reduce_input(strand_datatype_t t, void *buf, size_t n, size_t first, int rank, int iter) {
  for (size_t i = 0; i < n; i++) store_elem(t, buf, i, elem_int(t, rank, first + i, iter));
}

/* expected[i] = sum over ranks of element (first + i). */
static void fill_reduce_expected(strand_datatype_t t, void *buf, size_t n, size_t first, int nranks,
                                 int iter) {
  for (size_t i = 0; i < n; i++) {
    long long s = 0;
    uint32_t w = 0;
    for (int r = 0; r < nranks; r++) {
      long long v = elem_int(t, r, first + i, iter);
      s += v;
      w += (uint32_t)(unsigned long long)v;
    }
    store_elem(t, buf, i, t == STRAND_INT32 ? (long long)(int32_t)w : s);
  }
}

/* Which channel / ring primitive wrote output element `e` (for failure messages). */
static void locate(const ring_t *R, size_t e, char *out, size_t len) {
  for (int ch = 0; ch < R->nch; ch++) {
    const op_list_t *ol = &R->ops[ch];
    for (size_t i = 0; i < ol->n; i++) {
      const sim_op_t *op = &ol->v[i];
      if ((op->flags & OP_OUT) && e >= op->dst && e < op->dst + op->n) {
        snprintf(out, len, "channel %d, primitive %zu (%s%s%s chunk %d)", ch, i,
                 op->flags & OP_RECV ? "recv" : "", op->flags & OP_REDUCE ? "Reduce" : "",
                 op->flags & OP_SEND ? "Send" : (op->flags & OP_RECV ? "Copy" : "send"), op->chunk);
        return;
      }
    }
  }
  snprintf(out, len, "no primitive wrote it");
}

static int compare_out(ring_t *R, const unsigned char *expect, size_t n, const char *what) {
  conform_ctx_t *c = R->c;
  size_t elt = R->elt;
  if (memcmp(R->out, expect, n * elt) == 0) return 0;
  size_t first = 0, bad = 0;
  for (size_t i = 0; i < n; i++)
    if (memcmp(R->out + i * elt, expect + i * elt, elt) != 0) {
      if (!bad) first = i;
      bad++;
    }
  char where[160];
  locate(R, first, where, sizeof where);
  conform_fail(c, "%s: element %zu of %zu is %.17g, expected %.17g (%zu wrong elements; written by "
               "%s; the data was exact, so any difference is a lost, misplaced or corrupted message)",
               what, first, n, strand_datatype_load(R->type, R->out, first),
               strand_datatype_load(R->type, expect, first), bad, where);
  return -1;
}

/* One collective of `bytes` total (all-reduce buffer, all-gather output, reduce-scatter input). */
static int ring_collective(ring_t *R, coll_t k, strand_datatype_t t, size_t bytes, int iter) {
  conform_ctx_t *c = R->c;
  size_t elt = strand_datatype_size(t);
  int N = c->nranks;
  /* Deliberately not a round number: the last loop gets uneven chunks, some channels get empty
   * ones, and the core then posts 0-byte steps (§6.4). */
  size_t total = bytes / elt > 64 ? bytes / elt - 37 : 27;
  if (bytes == 0) {
    /* The tail case: 5 elements over C x N chunks, so most chunks and slices are empty and many
     * steps carry 0 bytes. */
    total = 5;
  }
  size_t count = k == COLL_ALLREDUCE ? total : (total / (size_t)N ? total / (size_t)N : 1);
  size_t in_n = k == COLL_REDUCESCATTER ? count * (size_t)N : count;
  size_t out_n = k == COLL_ALLGATHER ? count * (size_t)N : count;
  unsigned char *in = malloc(in_n * elt), *out = malloc(out_n * elt), *exp = malloc(out_n * elt);
  int rc = -1;
  char what[200];
  snprintf(what, sizeof what, "%s %s %s#%d (%s, %zu elements per rank, %d ranks, %d channels)",
           R->p->name, coll_name(k), bytes ? "" : "tail ", iter, strand_datatype_name(t), in_n, N,
           R->nch);
  if (!in || !out || !exp) {
    conform_fail(c, "out of memory for %s", what);
    goto done;
  }
  memset(out, 0xA5, out_n * elt); /* anything never written shows up */
  if (k == COLL_ALLGATHER) {
    conform_fill(in, in_n * elt, conform_seed(c->rank, -1, (uint64_t)iter));
  } else {
    fill_reduce_input(t, in, in_n, 0, c->rank, iter);
    fill_reduce_expected(t, exp, out_n, k == COLL_REDUCESCATTER ? (size_t)c->rank * count : 0, N, iter);
  }
  R->coll = k;
  R->type = t;
  R->elt = elt;
  R->count = count;
  R->in = in;
  R->out = out;
  for (int ch = 0; ch < R->nch; ch++) {
    R->ops[ch].n = R->ops[ch].nsend = R->ops[ch].nrecv = 0;
    if (plan_ring(&R->ops[ch], k, R->p, elt, count, c->rank, N, ch, R->nch)) {
      conform_fail(c, "out of memory for the ring plan");
      goto done;
    }
  }
  if (ring_run(R, what)) goto done;
  if (k == COLL_ALLGATHER) {
    for (int b = 0; b < N; b++) {
      long long bad = conform_verify(out + (size_t)b * count * elt, count * elt,
                                     conform_seed(b, -1, (uint64_t)iter));
      if (bad >= 0) {
        char where[160];
        locate(R, (size_t)b * count + (size_t)bad, where, sizeof where);
        conform_fail(c, "%s: block of rank %d differs at byte %lld of %zu (written by %s)", what, b,
                     bad, count * elt, where);
        goto done;
      }
    }
  } else if (compare_out(R, exp, out_n, what)) {
    goto done;
  }
  rc = 0;
done:
  free(in);
  free(out);
  free(exp);
  R->in = R->out = NULL;
  return rc;
}

/* ------------------------------------------------------------------ scenario helpers */

static int sim_precheck(conform_ctx_t *c) {
  if (c->nranks < 2) return conform_skip(c, "needs at least 2 ranks (--nranks)"), -1;
  if (sim_opts.dev >= c->ndev)
    return conform_fail(c, "--dev %d but the plugin has %d devices", sim_opts.dev, c->ndev), -1;
  return 0;
}

static size_t sim_bytes(conform_ctx_t *c) {
  size_t b = sim_opts.bytes;
  if (b > c->max_bytes) b = c->max_bytes;
  return b ? b : 1;
}

static void ring_note(conform_ctx_t *c, ring_t *R, int colls) {
  conform_note(c, "%d collectives, %lu messages (%lu of 0 bytes) per rank over %d channels",
               colls, R->msgs, R->zero_msgs, R->nch);
  if (R->flush)
    conform_note(c, "%lu iflush calls (%lu returned NULL = done)", R->flushes, R->flush_null);
}

/* Flush outcome for scenarios that flush: a refusal is a skip for host-only plugins, whose
 * buffers NCCL never flushes (§6.8), and a failure for plugins that advertise GPU memory. */
static conform_status_t flush_verdict(conform_ctx_t *c, ring_t *R) {
  strand_props_v12_t props;
  if (conform_props(c, sim_opts.dev, &props)) return CONFORM_FAIL;
  if (props.ptrSupport & (STRAND_PTR_CUDA | STRAND_PTR_DMABUF))
    return conform_fail(c, "%s, but the device advertises GPU memory (ptrSupport 0x%x): NCCL "
                        "flushes every GDR receive with data (§6.8)", R->flush_error, props.ptrSupport);
  return conform_skip(c, "%s on a host-only device (ptrSupport 0x%x): NCCL never flushes host "
                      "buffers, so a refusal is allowed", R->flush_error, props.ptrSupport);
}

typedef struct {
  coll_t coll;
  const sim_proto_t *proto;
  const strand_datatype_t *types;
  int ntypes;
  bool flush;
  bool sentinel;
} ring_scenario_t;

static conform_status_t run_ring_scenario(conform_ctx_t *c, const ring_scenario_t *sc) {
  if (sim_precheck(c)) return c->status;
  if ((sc->flush || sim_opts.flush) && !sc->proto->ll && !c->net->iflush)
    return sc->flush ? conform_skip(c, "the plugin has no iflush (NULL): NCCL then never flushes")
                     : conform_skip(c, "--flush given but the plugin has no iflush");
  ring_t R;
  if (ring_open(&R, c, sc->proto, sim_opts.channels)) {
    ring_close(&R);
    return CONFORM_FAIL;
  }
  R.flush = (sc->flush || sim_opts.flush) && !sc->proto->ll;
  R.sentinel = sc->sentinel;
  size_t bytes = sim_bytes(c);
  int colls = 0;
  conform_status_t st = CONFORM_PASS;
  for (int it = 0; it < sim_opts.iters && st == CONFORM_PASS; it++)
    for (int ti = 0; ti < sc->ntypes && st == CONFORM_PASS; ti++) {
      if (ring_collective(&R, sc->coll, sc->types[ti], bytes, it)) {
        st = R.flush_refused ? flush_verdict(c, &R) : CONFORM_FAIL;
        break;
      }
      colls++;
    }
  for (int ti = 0; ti < sc->ntypes && st == CONFORM_PASS; ti++) {
    if (ring_collective(&R, sc->coll, sc->types[ti], 0, sim_opts.iters)) {
      st = R.flush_refused ? flush_verdict(c, &R) : CONFORM_FAIL;
      break;
    }
    colls++;
  }
  if (st == CONFORM_PASS) ring_note(c, &R, colls);
  ring_close(&R);
  if (st == CONFORM_PASS && c->status == CONFORM_FAIL) st = CONFORM_FAIL;
  return st;
}

/* ------------------------------------------------------------------ ring scenarios */

static const strand_datatype_t reduce_types[] = {STRAND_FLOAT32, STRAND_INT32, STRAND_BFLOAT16};
static const strand_datatype_t byte_type[] = {STRAND_UINT8};
static const strand_datatype_t float_type[] = {STRAND_FLOAT32};

static conform_status_t sim_ring_allreduce(conform_ctx_t *c) {
  ring_scenario_t sc = {COLL_ALLREDUCE, &proto_simple, reduce_types, 3, false, false};
  return run_ring_scenario(c, &sc);
}

static conform_status_t sim_ring_allgather(conform_ctx_t *c) {
  ring_scenario_t sc = {COLL_ALLGATHER, &proto_simple, byte_type, 1, false, false};
  return run_ring_scenario(c, &sc);
}

static conform_status_t sim_ring_reducescatter(conform_ctx_t *c) {
  ring_scenario_t sc = {COLL_REDUCESCATTER, &proto_simple, reduce_types, 2, false, false};
  return run_ring_scenario(c, &sc);
}

static conform_status_t sim_ll_sentinel(conform_ctx_t *c) {
  /* v6..v8 cores never show the sentinel (the adapter resets it, §6.6): the same traffic then
   * runs with ordinary completions, which must then mean "data landed". */
  ring_scenario_t sc = {COLL_ALLREDUCE, &proto_ll, float_type, 1, false, c->version >= 9};
  conform_status_t st = run_ring_scenario(c, &sc);
  if (st == CONFORM_PASS && c->version < 9)
    conform_note(c, "ABI v%d: the core adapter clears the sentinel, LL ran with full completions",
                 c->version);
  return st;
}

static conform_status_t sim_flush(conform_ctx_t *c) {
  ring_scenario_t sc = {COLL_ALLREDUCE, &proto_simple, float_type, 1, true, false};
  return run_ring_scenario(c, &sc);
}

/* ------------------------------------------------------------------ P2P all-to-all, grouped */

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
      int r = (int)(hash3((uint64_t)c->rank, (uint64_t)s, (uint64_t)(l->d * 977 + l->k * 31 + l->ch)) %
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

static conform_status_t sim_p2p_alltoall_grouped(conform_ctx_t *c) {
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
  int saved_next = c->next, saved_prev = c->prev;
  if (!P.links || !P.smh || !P.rmh || posix_memalign((void **)&P.spool, 4096, P.spool_len) ||
      posix_memalign((void **)&P.rpool, 4096, P.rpool_len)) {
    conform_fail(c, "out of memory for %zu-byte shared pools", P.spool_len);
    goto out;
  }
  memset(P.rpool, 0, P.rpool_len);
  /* A full mesh: for each distance d, a ring "send to rank+d, receive from rank-d" (the harness's
   * link helper pairs c->next with c->prev), once per destination local rank and channel. */
  int li = 0;
  for (int d = 1; d < R; d++)
    for (int k = 0; k < P.L; k++)
      for (int ch = 0; ch < P.nch; ch++, li++) {
        p2p_link_t *l = &P.links[li];
        l->d = d;
        l->k = k;
        l->ch = ch;
        l->s_pool_off = l->r_pool_off = region * (size_t)li;
        c->next = (c->rank + d) % R;
        c->prev = (c->rank - d + R) % R;
        int rc = conform_link_open(c, sim_opts.dev, &l->link);
        c->next = saved_next;
        c->prev = saved_prev;
        if (rc) goto out;
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
          ring_t fake;
          memset(&fake, 0, sizeof fake);
          snprintf(fake.flush_error, sizeof fake.flush_error, "%s", P.flush_error);
          st = flush_verdict(c, &fake);
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

/* ------------------------------------------------------------------ table and command */

static conform_check_t sim_checks[] = {
  {"sim.ring-allreduce", "§6.2, §6.4 (ring, SIMPLE, dedicated buffers)",
   "ring all-reduce (float32, int32, bfloat16 sums) over C channels with 8-slot FIFOs, 1 MiB "
   "slices, mixed and 0-byte steps; results exact", sim_ring_allreduce, 60, 0},
  {"sim.ring-allgather", "§6.2, §6.4 (ring, SIMPLE)",
   "ring all-gather over C channels; every rank's block byte-exact", sim_ring_allgather, 60, 0},
  {"sim.ring-reducescatter", "§6.2, §6.4 (ring, SIMPLE)",
   "ring reduce-scatter (float32, int32 sums); this rank's block exact", sim_ring_reducescatter, 60, 0},
  {"sim.ll-sentinel", "§6.6, §6.2 (LL, 8 requests in flight)",
   "LL ring all-reduce, 64 KiB steps, 8 in flight per connection, irecv *request preset to "
   "NCCL_NET_OPTIONAL_RECV_COMPLETION (v9+); flags and sums exact", sim_ll_sentinel, 60, 0},
  {"sim.p2p-alltoall-grouped", "§6.7, §6.3 shared buffers, §6.2",
   "all-to-all over shared comms: grouped irecv n = min(maxRecvs, senders), tags = sender ranks, "
   "128 KiB chunks, mixed/0-byte sizes; every chunk byte-exact with its size",
   sim_p2p_alltoall_grouped, 60, 0},
  {"sim.flush", "§6.8, §6.5",
   "ring all-reduce with iflush after every SIMPLE receive with data, flush requests tested with "
   "NULL sizes (NULL request = done); results exact", sim_flush, 60, 0},
  {NULL, NULL, NULL, NULL, 0, 0},
};

enum { SO_CHANNELS = 1, SO_BYTES, SO_ITERS, SO_FLUSH, SO_DEV };

static const simperf_opt_t sim_optlist[] = {
  {"channels", false, SO_CHANNELS}, {"bytes", false, SO_BYTES}, {"iters", false, SO_ITERS},
  {"flush", true, SO_FLUSH},        {"dev", false, SO_DEV},     {NULL, false, 0},
};

static int sim_opt(int id, const char *v, void *arg) {
  (void)arg;
  char *end = NULL;
  switch (id) {
  case SO_CHANNELS:
    sim_opts.channels = (int)strtol(v, &end, 10);
    return (*end || sim_opts.channels < 1 || sim_opts.channels > 32) ? -1 : 0;
  case SO_BYTES: return conform_parse_size(v, &sim_opts.bytes) || sim_opts.bytes == 0 ? -1 : 0;
  case SO_ITERS:
    sim_opts.iters = (int)strtol(v, &end, 10);
    return (*end || sim_opts.iters < 1) ? -1 : 0;
  case SO_FLUSH: sim_opts.flush = true; return 0;
  case SO_DEV:
    sim_opts.dev = (int)strtol(v, &end, 10);
    return (*end || sim_opts.dev < 0) ? -1 : 0;
  default: return -1;
  }
}

static void sim_usage(void) {
  fprintf(stderr,
    "usage: strand-conform sim [sim options] [common options] [PLUGIN]\n"
    "  --channels C   channels = connections per ring neighbour (default 2, 1..32)\n"
    "  --bytes SIZE   bytes per collective (default 4M; capped by --max-bytes / --quick)\n"
    "  --iters N      collectives per datatype and scenario (default 2)\n"
    "  --flush        iflush after every SIMPLE receive in every scenario (sim.flush always does)\n"
    "  --dev D        plugin device (default 0)\n"
    "Scenarios: ");
  for (const conform_check_t *k = sim_checks; k->id; k++)
    fprintf(stderr, "%s%s", k->id, k[1].id ? ", " : "\n");
  fprintf(stderr, "Select with --only/--skip; common options: strand-conform --help.\n");
}

int conform_cmd_sim(int argc, char **argv) {
  for (int i = 1; i < argc; i++)
    if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
      sim_usage();
      return 0;
    }
  argc = simperf_take_opts(argc, argv, sim_optlist, sim_opt, NULL, "sim");
  if (argc < 0) return 2;
  int first = conform_parse_opts(argc, argv);
  if (first < 0) return 2;
  if (first < argc) conform_opts.plugin = argv[first];
  if (first + 1 < argc) {
    fprintf(stderr, "strand-conform sim: one PLUGIN argument expected\n");
    return 2;
  }
  /* Time bounds grow with the traffic: about 4 s per MiB per collective on a loaded 2-core box
   * with sanitizers is far more than a working plugin needs. */
  unsigned per = 20 + (unsigned)((sim_opts.bytes >> 20) * 4 * (size_t)sim_opts.iters);
  const conform_check_t *sel[16];
  int n = 0;
  for (conform_check_t *k = sim_checks; k->id; k++) {
    k->timeout_s = per * (strcmp(k->id, "sim.ring-allreduce") == 0 ? 3 : 1) + 30;
    if (conform_check_selected(k, &conform_opts)) sel[n++] = k;
  }
  if (n == 0) {
    fprintf(stderr, "strand-conform sim: --only/--skip selected no scenario\n");
    sim_usage();
    return 2;
  }
  return conform_run_checks(sel, n);
}
