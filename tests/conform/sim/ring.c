/* strand-conform sim — the ring engine: the per-channel program of NCCL's ring kernels
 * (send, recvReduceSend, recvReduceCopySend, recvCopySend, recv cut into slices), the FIFO
 * connections to both neighbours, and one thread alternating a proxy pass (keep receives posted,
 * test, flush, isend) and a GPU pass (run primitives whose slots allow) per channel, then the
 * exact check of the output. */
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sim.h"

/* ------------------------------------------------------------------ ring plan */

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
  size_t chunk_elems = sim_slice_data_bytes(p) * (size_t)spc / elt;
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

static int slot_of(const ring_t *R, uint64_t msg) {
  return (int)((msg * (uint64_t)R->p->slice_steps) % SIM_STEPS);
}

int sim_ring_open(ring_t *R, conform_ctx_t *c, const sim_proto_t *p, int nch) {
  memset(R, 0, sizeof *R);
  R->c = c;
  R->p = p;
  R->nch = nch;
  R->conn = calloc((size_t)nch, sizeof *R->conn);
  R->ops = calloc((size_t)nch, sizeof *R->ops);
  R->cur = calloc((size_t)nch, sizeof *R->cur);
  R->tmp = malloc(sim_msg_bytes(p));
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

void sim_ring_close(ring_t *R) {
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
  while (k->r_posted < k->r_total && k->r_posted - k->r_consumed < (uint64_t)sim_inflight(p)) {
    int s = slot_of(R, k->r_posted);
    void *buf = k->rfifo + (size_t)s * sim_step_bytes(p);
    size_t size = sim_msg_bytes(p);
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
      void *buf = k->rfifo + (size_t)s * sim_step_bytes(p);
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
    if (simperf_try_isend(c, k->link.send_comm, k->sfifo + (size_t)s * sim_step_bytes(p), k->s_size[s],
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
      const unsigned char *slot = k->rfifo + (size_t)rs * sim_step_bytes(p);
      size_t wire = p->ll ? div_up(bytes, 8) * 16 : bytes;
      /* With the optional-completion sentinel the size is not tracked (§6.6); otherwise test()
       * must report exactly what the peer sent. */
      if (!(p->ll && R->sentinel) && (size_t)k->r_size[rs] != wire) {
        conform_fail(c, "%s %s channel %d: receive #%llu from rank %d: test() reported %d bytes, "
                     "the peer sent %zu (irecv size %zu)", p->name, coll_name(R->coll), ch,
                     (unsigned long long)k->r_consumed, c->prev, k->r_size[rs], wire, sim_msg_bytes(p));
        return -1;
      }
      if (p->ll) {
        if (!sim_ll_ready(slot, bytes, sim_ll_flag(k->r_consumed))) {
          if (R->sentinel) break; /* may land after an early completion: the GPU polls flags */
          conform_fail(c, "LL %s channel %d: test() reported receive #%llu done but its data had "
                       "not landed (flags still stale)", coll_name(R->coll), ch,
                       (unsigned long long)k->r_consumed);
          return -1;
        }
        sim_ll_decode(R->tmp, slot, bytes);
        rdata = R->tmp;
      } else {
        rdata = slot;
      }
    }
    int ss = -1;
    if (op->flags & OP_SEND) {
      if (k->s_filled - k->s_done >= (uint64_t)sim_inflight(p)) break;
      ss = slot_of(R, k->s_filled);
    }
    unsigned char *sslot = ss >= 0 ? k->sfifo + (size_t)ss * sim_step_bytes(p) : NULL;
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
        sim_ll_encode(sslot, res, bytes, sim_ll_flag(k->s_filled));
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

/* Integer-valued element so that any summation order gives the exact same result. */
static long long elem_int(strand_datatype_t t, int rank, size_t i, int iter) {
  uint64_t h = sim_hash3((uint64_t)rank + 1, i, (uint64_t)iter);
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
int sim_ring_collective(ring_t *R, coll_t k, strand_datatype_t t, size_t bytes, int iter) {
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
