/* collnet_stub: the collectives and their progress engine.
 *
 * A collective is cut into chunks; a chunk occupies one of the collComm's staging slots
 * (STRAND_COLLNET_SLOTS of them; nranks blocks of comm->block bytes to send, nranks to receive,
 * comm->block from STRAND_COLLNET_CHUNK_KB) and runs one or two exchanges
 * over the mesh. An all-reduce whose buffers were registered (the net holds the registration too,
 * cs_mr.c) stages nothing: the reduce-scatter sends from the send buffer, the reduction writes
 * this rank's block of the receive buffer, and the all-gather sends from and receives into the
 * receive buffer; only the peers' reduce-scatter blocks land in the slot. Otherwise, and for the
 * window collectives, every byte goes through the slot:
 *   RS (reduce-scatter): block j goes to rank j; each rank receives its block from every peer and
 *      reduces the nranks contributions in rank order 0..n-1 (identical bits on every rank).
 *   AG (all-gather): each rank sends its block to every peer and receives theirs.
 * iallreduce = RS then AG per chunk; ireducescatter = RS only; iallgather = AG only.
 *
 * One exchange. An all-reduce call of at most comm->oneshot_max bytes runs each chunk as a single
 * exchange instead: every rank sends its whole chunk (of at most a block) to every peer and reduces
 * all nranks copies in rank order into the whole chunk of its receive buffer (every "block" of the
 * chunk is the chunk: cs_chunk_blocks). Bytes sent per rank: (n-1) x size instead of
 * 2(n-1)/n x size, the same at 2 ranks; what it saves is the second exchange, the wait between the
 * two (the all-gather needs the reduction) and the all-gather's lane. So by default it is every
 * call at 2 ranks and small calls above (STRAND_COLLNET_ONESHOT_KB; docs/benchmarks/collnet.md
 * measured both). Every rank decides alike from the call and the setting; the header carries the
 * decision, so ranks configured differently fail the call with a WARN instead of mixing data.
 *
 * Ordering. Every pair of ranks shares CS_LANES net comms per direction and stream (lane 0: the
 * first exchange of every chunk; lane 1: an all-reduce's all-gather, formed only where some
 * all-reduce runs as two exchanges; chunks take the STRAND_COLLNET_STREAMS streams in turn), and nets deliver a comm's messages in posting order, so
 * all ranks must post a lane's exchanges in the same order. Each exchange gets a sequence number in
 * its lane (a "turn") when its chunk takes a slot, chunks take slots in issue order, and an
 * exchange posts only when its lane's turn reaches it and hands the turn on once all of its sends
 * and receives were accepted. With two lanes the reduce-scatters of chunks k+1,
 * k+2, ... go out while chunk k is still being reduced, and the all-gathers follow as reductions
 * finish (the pipeline); the CPU work of the chunks runs on helper threads (cs_cpu.c).
 *
 * Agreement. Ranks of a buggy application may call different collectives (count, datatype, op, kind
 * or window differ). NCCL itself then hangs, or one rank finishes with wrong data. Here every
 * payload is preceded by a header message (cs_wire_hdr_t) saying what its sender believes the
 * collective is; every exchange is all-to-all and every collective has at least one exchange, and a
 * rank checks its peers' headers once the exchange completed and before it uses their data (an
 * all-gather payload that landed in the receive buffer is not read; the collective then fails, so
 * that buffer's contents are undefined, as after any failed collective). Turns pair up whatever
 * the ranks believe (each exchange posts exactly one header and one payload per peer and
 * direction, and payload receives are posted at the largest payload, a block), so the first
 * exchange of a mismatched collective completes on every rank and every rank sees the
 * disagreement: each fails it with STRAND_INVALID_USAGE and a WARN naming both sides. The comm
 * stays failed (sticky), so later collectives fail at once. Bound: one exchange after the last
 * rank issued the collective.
 *
 * Nothing here blocks: test() posts what it may, polls the net's requests once, and returns. With
 * STRAND_COLLNET_PROGRESS=thread a thread of the comm runs those rounds in a loop instead and
 * test() only reports (the progress thread, below). */
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <time.h>

#include "cs.h"
#include "strand/clock.h"
#include "strand/net_layer.h"
#include "strand/params.h"
#include "strand/reduce.h"
#include "strand/topo.h"

enum { CS_ALLREDUCE, CS_ALLGATHER, CS_REDUCESCATTER };
enum { CS_PH_RS = 0, CS_PH_AG = 1 };

#define CS_WIRE_MAGIC 0x43534831u
/* The header of every message: what the sender believes the collective is. All ranks of a group
 * run the same build on the same architecture, so it travels in host byte order. */
typedef struct {
  uint32_t magic;
  uint32_t rank, nranks;
  uint8_t kind, phase, dtype, op; /* dtype / op: 0xff for an all-gather */
  uint64_t turn;                  /* mesh turn of this exchange */
  uint64_t coll;                  /* the collective's number on the collComm */
  uint64_t a, b, c;               /* allreduce: count, 1 when run as one exchange per chunk (else
                                     0), 0; window collectives: bytesPerRank,
                                     windowOffset, windowBytes */
  uint64_t block;                 /* the sender's block size (STRAND_COLLNET_CHUNK_KB / nranks):
                                     ranks must cut chunks alike */
} cs_wire_hdr_t;
_Static_assert(sizeof(cs_wire_hdr_t) <= CS_HDR_BYTES, "the wire header fits its room");

typedef struct cs_req {
  uint32_t magic;
  cs_comm_t *comm;
  struct cs_req *next;
  int kind;
  const char *call;
  strand_datatype_t dtype;
  strand_redop_t op;
  size_t esz;
  char *src, *dst;       /* allreduce: sendData / recvData; allgather: sendData; reducescatter: recvData */
  strand_sge_t *parts;   /* allgather: receive window; reducescatter: send window (a private copy) */
  int nparts;
  size_t count;          /* allreduce: elements */
  bool oneshot;          /* allreduce: one exchange per chunk, each rank's block the whole chunk */
  size_t chunk_elems;    /* allreduce: elements per chunk (a block, or a block per rank) */
  uint64_t coll;         /* number of the collective on its comm (the wire header's) */
  size_t bpr, woff, wbytes; /* window collectives: bytesPerRank, windowOffset, windowBytes */
  size_t *part_off, *part_len; /* allgather / reducescatter: rank j's bytes inside the window */
  size_t nchunks, next_chunk, chunks_done;
  atomic_bool complete;  /* chunks_done reached nchunks */
  size_t result_bytes;
  /* allreduce: the registrations covering src / dst when the net holds them (cs_mr_direct), so
   * blocks go out of and land in the user's memory; NULL: staged through the slot's arena */
  const cs_mr_t *smr, *rmr;
  double t_issued;
  cs_chunk_times_t tm_last; /* allreduce: the timestamps of its chunk that completed last */
} cs_req_t;

/* ---- slots ---- */

void cs_coll_init_slots(cs_comm_t *c) {
  size_t n = (size_t)c->nranks;
  for (int s = 0; s < c->nslots; s++) {
    cs_slot_t *sl = &c->slots[s];
    sl->send = c->arena + (size_t)s * 2 * n * c->stride;
    sl->recv = sl->send + n * c->stride;
    for (size_t j = 0; j < 2 * n; j++) /* headers: a sent one's unused bytes are defined */
      memset(sl->send + j * c->stride, 0, CS_HDR_BYTES);
    size_t nm = CS_MSGS * n;
    sl->slen = calloc(nm, sizeof(size_t));
    sl->rlen = calloc(nm, sizeof(size_t));
    sl->blen = calloc(n, sizeof(size_t));
    sl->boff = calloc(n, sizeof(size_t));
    sl->sbuf = calloc(nm, sizeof(char *));
    sl->rbuf = calloc(nm, sizeof(char *));
    sl->smh = calloc(nm, sizeof(void *));
    sl->rmh = calloc(nm, sizeof(void *));
    sl->sreq = calloc(nm, sizeof(void *));
    sl->rreq = calloc(nm, sizeof(void *));
    sl->sposted = calloc(nm, sizeof(bool));
    sl->rposted = calloc(nm, sizeof(bool));
    if (!sl->slen || !sl->rlen || !sl->blen || !sl->boff || !sl->sbuf || !sl->rbuf || !sl->smh ||
        !sl->rmh || !sl->sreq || !sl->rreq || !sl->sposted || !sl->rposted) {
      free(sl->sreq);
      sl->sreq = NULL; /* connect checks this */
    }
  }
}

void cs_coll_free_slots(cs_comm_t *c) {
  for (int s = 0; s < c->nslots; s++) {
    cs_slot_t *sl = &c->slots[s];
    free(sl->slen);
    free(sl->rlen);
    free(sl->blen);
    free(sl->boff);
    free(sl->sbuf);
    free(sl->rbuf);
    free(sl->smh);
    free(sl->rmh);
    free(sl->sreq);
    free(sl->rreq);
    free(sl->sposted);
    free(sl->rposted);
    memset(sl, 0, sizeof *sl);
  }
}

/* ---- requests ---- */

static void cs_req_free(cs_req_t *r) {
  free(r->parts);
  free(r->part_off);
  free(r->part_len);
  r->magic = 0;
  free(r);
}

void cs_coll_drop_all(cs_comm_t *c) {
  for (cs_req_t *r = c->head, *nx; r; r = nx) {
    nx = r->next;
    cs_req_free(r);
  }
  c->head = c->tail = NULL;
  c->inflight = 0;
  for (int s = 0; s < c->nslots; s++) c->slots[s].req = NULL;
}

/* Common entry checks; *request = NULL (retry) while the comm is full. */
static strand_result_t cs_begin(cs_comm_t *c, void *collComm, const char *call, void **request, bool *full) {
  *full = false;
  if (!request) return STRAND_INVALID_ARGUMENT;
  *request = NULL;
  if (!c) {
    STRAND_WARN("collnet_stub %s: %p is not a collComm of the stub", call, collComm);
    return STRAND_INVALID_ARGUMENT;
  }
  if (c->failed != STRAND_SUCCESS) {
    STRAND_WARN("collnet_stub %s(rank %d/%d): the collComm failed earlier (%d); NCCL must tear it down",
                call, c->rank, c->nranks, (int)c->failed);
    return c->failed;
  }
  *full = c->inflight >= CS_MAX_INFLIGHT;
  return STRAND_SUCCESS;
}

static cs_req_t *cs_req_new(cs_comm_t *c, int kind, const char *call) {
  cs_req_t *r = calloc(1, sizeof *r);
  if (!r) return NULL;
  r->magic = CS_REQ_MAGIC;
  r->comm = c;
  r->kind = kind;
  r->call = call;
  if (kind != CS_ALLREDUCE) {
    r->part_off = calloc((size_t)c->nranks, sizeof(size_t));
    r->part_len = calloc((size_t)c->nranks, sizeof(size_t));
    if (!r->part_off || !r->part_len) {
      cs_req_free(r);
      return NULL;
    }
  }
  return r;
}

static void cs_enqueue(cs_comm_t *c, cs_req_t *r, void **request) {
  r->t_issued = strand_now_s();
  if (!c->inflight) c->stats.t_busy_since = r->t_issued;
  r->coll = c->ncoll++;
  if (c->tail)
    c->tail->next = r;
  else
    c->head = r;
  c->tail = r;
  c->inflight++;
  *request = r;
  /* every issuing call queues here, under the lock: a progress thread asleep for want of work
   * (cs_progress_main) cannot miss it */
  if (c->prog_on) pthread_cond_signal(&c->prog_wake);
}

/* Rank j's block [j*bpr, (j+1)*bpr) of the logical nranks x bpr buffer, inside the window
 * [wo, wo+wb), as (offset in the window, length). */
static void cs_window_part(size_t bpr, size_t wo, size_t wb, int j, size_t *off, size_t *len) {
  size_t b0 = (size_t)j * bpr, b1 = b0 + bpr, w1 = wo + wb;
  size_t lo = b0 > wo ? b0 : wo, hi = b1 < w1 ? b1 : w1;
  *off = lo > wo ? lo - wo : 0;
  *len = hi > lo ? hi - lo : 0;
}

/* Copies between a contiguous buffer and a scatter-gather list seen as one window. */
static void cs_sge_copy(const strand_sge_t *parts, int nparts, size_t off, void *buf, size_t len, bool into_parts) {
  char *b = buf;
  for (int i = 0; i < nparts && len > 0; i++) {
    size_t sz = parts[i].size;
    if (off >= sz) {
      off -= sz;
      continue;
    }
    size_t n = sz - off < len ? sz - off : len;
    char *p = (char *)parts[i].address + off;
    if (into_parts)
      memcpy(p, b, n);
    else
      memcpy(b, p, n);
    b += n;
    len -= n;
    off = 0;
  }
}

static size_t cs_chunks_of_parts(const cs_comm_t *c, const cs_req_t *r) {
  size_t most = 0;
  for (int j = 0; j < c->nranks; j++)
    if (r->part_len[j] > most) most = r->part_len[j];
  return most ? (most + c->block - 1) / c->block : 1; /* one exchange at least: agreement */
}

/* Message j of a slot's send or receive area, and the payload after its header. */
static char *cs_msg(const cs_comm_t *c, char *base, int j) { return base + (size_t)j * c->stride; }
static char *cs_blk(const cs_comm_t *c, char *base, int j) { return cs_msg(c, base, j) + CS_HDR_BYTES; }

static strand_result_t cs_check_reduction(cs_comm_t *c, const char *call, strand_datatype_t t, strand_redop_t op) {
  if (strand_reduce_supported(t, op)) return STRAND_SUCCESS;
  STRAND_WARN("collnet_stub %s(rank %d/%d): datatype %d / op %d is not supported (reduceSupport says 0 "
              "for it)", call, c->rank, c->nranks, (int)t, (int)op);
  return STRAND_INVALID_ARGUMENT;
}

/* ---- the calls ---- */

static strand_result_t iallreduce_locked(void *collComm, void *sendData, void *recvData, size_t count,
                              strand_datatype_t dataType, strand_redop_t redOp, void *sendMhandle,
                              void *recvMhandle, void **request) {
  cs_comm_t *c = cs_comm_of(collComm);
  bool full;
  strand_result_t rc = cs_begin(c, collComm, "iallreduce", request, &full);
  if (rc != STRAND_SUCCESS) return rc;
  rc = cs_check_reduction(c, "iallreduce", dataType, redOp);
  if (rc != STRAND_SUCCESS) return rc;
  size_t esz = strand_datatype_size(dataType);
  if (count > CS_MAX_COLL_BYTES / esz || (count && (!sendData || !recvData))) {
    STRAND_WARN("collnet_stub iallreduce(rank %d/%d): %zu elements of %zu bytes (buffers %p, %p); "
                "maxCollBytes is %llu", c->rank, c->nranks, count, esz, sendData, recvData,
                (unsigned long long)CS_MAX_COLL_BYTES);
    return STRAND_INVALID_ARGUMENT;
  }
  if (full) return STRAND_SUCCESS;
  cs_req_t *r = cs_req_new(c, CS_ALLREDUCE, "iallreduce");
  if (!r) return STRAND_SYSTEM_ERROR;
  r->dtype = dataType;
  r->op = redOp;
  r->esz = esz;
  r->src = sendData;
  r->dst = recvData;
  r->count = count;
  r->oneshot = c->nranks > 1 && c->oneshot_max && count * esz <= c->oneshot_max; /* 0: never */
  r->chunk_elems = c->block / esz * (size_t)(r->oneshot ? 1 : c->nranks);
  r->nchunks = count ? (count + r->chunk_elems - 1) / r->chunk_elems : 1; /* one exchange at least: agreement */
  r->result_bytes = count * esz;
  r->smr = cs_mr_direct(c, sendMhandle, sendData, count * esz);
  r->rmr = cs_mr_direct(c, recvMhandle, recvData, count * esz);
  cs_enqueue(c, r, request);
  return STRAND_SUCCESS;
}

static strand_result_t iallgather_locked(void *collComm, void *sendData, int nRecvParts, strand_sge_t *recvParts,
                              size_t bytesPerRank, size_t windowOffset, size_t windowBytes,
                              void *sendMhandle, void **request) {
  (void)sendMhandle;
  cs_comm_t *c = cs_comm_of(collComm);
  bool full;
  strand_result_t rc = cs_begin(c, collComm, "iallgather", request, &full);
  if (rc != STRAND_SUCCESS) return rc;
  if (nRecvParts < 1 || !recvParts || windowBytes > CS_MAX_COLL_BYTES ||
      windowOffset + windowBytes > bytesPerRank * (size_t)c->nranks) {
    STRAND_WARN("collnet_stub iallgather(rank %d/%d): %d receive parts (%p), window %zu+%zu of %d x %zu "
                "bytes", c->rank, c->nranks, nRecvParts, (void *)recvParts, windowOffset, windowBytes,
                c->nranks, bytesPerRank);
    return STRAND_INVALID_ARGUMENT;
  }
  if (full) return STRAND_SUCCESS;
  cs_req_t *r = cs_req_new(c, CS_ALLGATHER, "iallgather");
  if (!r) return STRAND_SYSTEM_ERROR;
  r->parts = malloc((size_t)nRecvParts * sizeof *r->parts);
  if (!r->parts) {
    cs_req_free(r);
    return STRAND_SYSTEM_ERROR;
  }
  memcpy(r->parts, recvParts, (size_t)nRecvParts * sizeof *r->parts);
  r->nparts = nRecvParts;
  r->src = sendData; /* this rank's bytes of the window, from its first one (spec §8.3) */
  for (int j = 0; j < c->nranks; j++)
    cs_window_part(bytesPerRank, windowOffset, windowBytes, j, &r->part_off[j], &r->part_len[j]);
  if (r->part_len[c->rank] && !sendData) {
    cs_req_free(r);
    STRAND_WARN("collnet_stub iallgather(rank %d/%d): NULL sendData", c->rank, c->nranks);
    return STRAND_INVALID_ARGUMENT;
  }
  r->nchunks = cs_chunks_of_parts(c, r);
  r->bpr = bytesPerRank;
  r->woff = windowOffset;
  r->wbytes = windowBytes;
  r->result_bytes = windowBytes;
  cs_enqueue(c, r, request);
  return STRAND_SUCCESS;
}

static strand_result_t ireducescatter_locked(void *collComm, int nSendParts, strand_sge_t *sendParts,
                                  void *recvData, size_t bytesPerRank, size_t windowOffset,
                                  size_t windowBytes, strand_datatype_t dataType,
                                  strand_redop_t redOp, void *recvMhandle, void **request) {
  (void)recvMhandle;
  cs_comm_t *c = cs_comm_of(collComm);
  bool full;
  strand_result_t rc = cs_begin(c, collComm, "ireducescatter", request, &full);
  if (rc != STRAND_SUCCESS) return rc;
  rc = cs_check_reduction(c, "ireducescatter", dataType, redOp);
  if (rc != STRAND_SUCCESS) return rc;
  size_t esz = strand_datatype_size(dataType);
  if (nSendParts < 1 || !sendParts || windowBytes > CS_MAX_COLL_BYTES ||
      windowOffset + windowBytes > bytesPerRank * (size_t)c->nranks || bytesPerRank % esz ||
      windowOffset % esz || windowBytes % esz) {
    STRAND_WARN("collnet_stub ireducescatter(rank %d/%d): %d send parts (%p), window %zu+%zu of %d x %zu "
                "bytes, element size %zu (the window must hold whole elements)", c->rank, c->nranks,
                nSendParts, (void *)sendParts, windowOffset, windowBytes, c->nranks, bytesPerRank, esz);
    return STRAND_INVALID_ARGUMENT;
  }
  if (full) return STRAND_SUCCESS;
  cs_req_t *r = cs_req_new(c, CS_REDUCESCATTER, "ireducescatter");
  if (!r) return STRAND_SYSTEM_ERROR;
  r->parts = malloc((size_t)nSendParts * sizeof *r->parts);
  if (!r->parts) {
    cs_req_free(r);
    return STRAND_SYSTEM_ERROR;
  }
  memcpy(r->parts, sendParts, (size_t)nSendParts * sizeof *r->parts);
  r->nparts = nSendParts;
  r->dtype = dataType;
  r->op = redOp;
  r->esz = esz;
  r->dst = recvData; /* this rank's result bytes of the window (spec §8.3) */
  for (int j = 0; j < c->nranks; j++)
    cs_window_part(bytesPerRank, windowOffset, windowBytes, j, &r->part_off[j], &r->part_len[j]);
  if (r->part_len[c->rank] && !recvData) {
    cs_req_free(r);
    STRAND_WARN("collnet_stub ireducescatter(rank %d/%d): NULL recvData", c->rank, c->nranks);
    return STRAND_INVALID_ARGUMENT;
  }
  r->nchunks = cs_chunks_of_parts(c, r);
  r->bpr = bytesPerRank;
  r->woff = windowOffset;
  r->wbytes = windowBytes;
  r->result_bytes = r->part_len[c->rank];
  cs_enqueue(c, r, request);
  return STRAND_SUCCESS;
}

/* The issuing calls hold the comm's lock while a progress thread runs (it walks the same queue):
 * each one returns its *_locked body, called under the lock. */
#define CS_ISSUE_LOCKED(collComm, locked_call)                                                     \
  do {                                                                                             \
    cs_comm_t *c_ = cs_comm_of(collComm);                                                          \
    cs_lock(c_);                                                                                   \
    strand_result_t rc_ = (locked_call);                                                           \
    cs_unlock(c_);                                                                                 \
    return rc_;                                                                                    \
  } while (0)

strand_result_t cs_iallreduce(void *collComm, void *sendData, void *recvData, size_t count,
                              strand_datatype_t dataType, strand_redop_t redOp, void *sendMhandle,
                              void *recvMhandle, void **request) {
  CS_ISSUE_LOCKED(collComm, iallreduce_locked(collComm, sendData, recvData, count, dataType, redOp,
                                              sendMhandle, recvMhandle, request));
}

strand_result_t cs_iallgather(void *collComm, void *sendData, int nRecvParts, strand_sge_t *recvParts,
                              size_t bytesPerRank, size_t windowOffset, size_t windowBytes,
                              void *sendMhandle, void **request) {
  CS_ISSUE_LOCKED(collComm, iallgather_locked(collComm, sendData, nRecvParts, recvParts, bytesPerRank,
                                              windowOffset, windowBytes, sendMhandle, request));
}

strand_result_t cs_ireducescatter(void *collComm, int nSendParts, strand_sge_t *sendParts,
                                  void *recvData, size_t bytesPerRank, size_t windowOffset,
                                  size_t windowBytes, strand_datatype_t dataType,
                                  strand_redop_t redOp, void *recvMhandle, void **request) {
  CS_ISSUE_LOCKED(collComm, ireducescatter_locked(collComm, nSendParts, sendParts, recvData, bytesPerRank,
                                                  windowOffset, windowBytes, dataType, redOp,
                                                  recvMhandle, request));
}

/* Host memory only (ptrSupport = HOST): nothing is ever in flight towards a GPU. It touches no
 * state of the comm, so it needs no lock under a progress thread. */
strand_result_t cs_iflush(void *collComm, void *data, int size, void *mhandle, void **request) {
  (void)data;
  (void)size;
  (void)mhandle;
  if (!request) return STRAND_INVALID_ARGUMENT;
  *request = NULL;
  if (!cs_comm_of(collComm)) {
    STRAND_WARN("collnet_stub iflush: %p is not a collComm of the stub", collComm);
    return STRAND_INVALID_ARGUMENT;
  }
  return STRAND_SUCCESS;
}

/* ---- the engine ---- */

/* Block of rank j in chunk k: blen[j] bytes at boff[j] (allreduce: in the user buffers; the
 * window collectives: inside rank j's part of the window). */
static void cs_chunk_blocks(const cs_comm_t *c, const cs_req_t *r, size_t k, size_t *blen, size_t *boff) {
  int n = c->nranks;
  if (r->kind == CS_ALLREDUCE) {
    size_t c0 = k * r->chunk_elems, ce = r->count - c0 < r->chunk_elems ? r->count - c0 : r->chunk_elems;
    if (r->oneshot) { /* every rank's block is the whole chunk */
      for (int j = 0; j < n; j++) {
        boff[j] = c0 * r->esz;
        blen[j] = ce * r->esz;
      }
      return;
    }
    size_t per = (ce + (size_t)n - 1) / (size_t)n;
    for (int j = 0; j < n; j++) {
      size_t e0 = (size_t)j * per < ce ? (size_t)j * per : ce;
      size_t e1 = e0 + per < ce ? e0 + per : ce;
      boff[j] = (c0 + e0) * r->esz;
      blen[j] = (e1 - e0) * r->esz;
    }
    return;
  }
  for (int j = 0; j < n; j++) {
    size_t o = k * c->block;
    boff[j] = o;
    blen[j] = r->part_len[j] > o ? (r->part_len[j] - o < c->block ? r->part_len[j] - o : c->block) : 0;
  }
}

/* What this rank believes the slot's exchange of `phase` is. */
static void cs_header_of(const cs_comm_t *c, const cs_slot_t *sl, int phase, cs_wire_hdr_t *h) {
  const cs_req_t *r = sl->req;
  memset(h, 0, sizeof *h);
  h->magic = CS_WIRE_MAGIC;
  h->rank = (uint32_t)c->rank;
  h->nranks = (uint32_t)c->nranks;
  h->kind = (uint8_t)r->kind;
  h->phase = (uint8_t)phase;
  h->dtype = r->kind == CS_ALLGATHER ? 0xff : (uint8_t)r->dtype;
  h->op = r->kind == CS_ALLGATHER ? 0xff : (uint8_t)r->op;
  h->turn = sl->seq[phase];
  h->coll = r->coll;
  h->block = c->block;
  if (r->kind == CS_ALLREDUCE) {
    h->a = r->count;
    h->b = r->oneshot;
  } else {
    h->a = r->bpr;
    h->b = r->woff;
    h->c = r->wbytes;
  }
}

/* The user memory an all-reduce's block of rank j goes out of (send: its send buffer in the
 * reduce-scatter, its receive buffer in the all-gather) when that buffer's registration is held by
 * the net; NULL: the block is staged in the arena. */
static char *cs_user_src(const cs_req_t *r, const cs_slot_t *sl, int phase, int j) {
  if (r->kind != CS_ALLREDUCE) return NULL;
  if (phase == CS_PH_RS) return r->smr ? r->src + sl->boff[j] : NULL;
  return r->rmr ? r->dst + sl->boff[j] : NULL;
}

/* Whether the slot's exchange of `phase` sends a header message to every peer. An all-reduce's
 * all-gather does not (unless built with -DCS_AG_HEADER=1, for measurements): it is posted only
 * after this rank's check of the same chunk's reduce-scatter headers passed, and lane 1 carries
 * nothing but all-reduce all-gathers, in chunk order. Every earlier exchange of lane 0 matched too
 * (a mismatch fails the comm before any later all-gather posts), so both ranks issued the same
 * collectives cut into the same blocks, and a peer's turn t on lane 1 is this rank's turn t: the
 * same chunk, posted by the peer after its own check passed. The payload's length is still
 * checked. One message per peer and chunk fewer: lane 1 then carries only payloads. */
#ifndef CS_AG_HEADER
#define CS_AG_HEADER 0
#endif
static bool cs_sends_header(const cs_req_t *r, int phase) {
  return CS_AG_HEADER || r->kind != CS_ALLREDUCE || phase != CS_PH_AG;
}

/* Whether a chunk of the call takes an all-gather turn: an all-gather's only exchange, an
 * all-reduce's second unless it runs as one exchange; never a reduce-scatter. */
static bool cs_has_ag(const cs_req_t *r) {
  return r->kind == CS_ALLGATHER || (r->kind == CS_ALLREDUCE && !r->oneshot);
}

/* The lane of the slot's exchange of `phase`: lane 0 of the chunk's stream for its first exchange,
 * lane 1 for an all-reduce's all-gather (which a comm of one lane per stream never runs: there every
 * all-reduce is one exchange, cs_connect). */
static int cs_lane_of(const cs_comm_t *c, const cs_slot_t *sl, int phase) {
  return sl->stream * c->lanes + (phase == CS_PH_AG && sl->req->kind == CS_ALLREDUCE ? 1 : 0);
}

/* Where this rank's block of a reduce-scatter comes from (the send buffer, or the arena when
 * staged) and where its result goes (the receive buffer). */
static const char *cs_rs_mine(const cs_comm_t *c, const cs_slot_t *sl) {
  const char *user = cs_user_src(sl->req, sl, CS_PH_RS, c->rank);
  return user ? user : cs_blk(c, sl->send, c->rank);
}

/* Where peer j's block of an all-reduce's all-gather lands in the user's receive buffer: there
 * when the net holds that buffer's registration and a whole block fits inside it (a peer that
 * disagrees can send up to a block, never past it); NULL: in the arena. */
static bool cs_block_fits(const cs_comm_t *c, const cs_req_t *r, const char *land) {
  return (size_t)(land - (const char *)r->rmr->base) + c->block <= r->rmr->size;
}

static char *cs_ag_landing(const cs_comm_t *c, const cs_slot_t *sl, int j) {
  const cs_req_t *r = sl->req;
  char *land = cs_user_src(r, sl, CS_PH_AG, j);
  return land && cs_block_fits(c, r, land) ? land : NULL;
}

/* Where the peer's copy of the chunk lands in an all-reduce of one exchange at 2 ranks: straight in
 * this rank's result, which the reduction then combines with this rank's own copy in place (the
 * operands stay in rank order, so both ranks compute the same bits). That skips a pass over an
 * arena block, one of the reduction's memory streams (tests/e2e/runs/cnhost16.sh measured the
 * reduction's passes over memory as a fifth of the stub's time at NCCL's call size). Only for calls
 * of at most CS_LAND_MAX_BYTES (cnhost17.sh: 5-9 % faster from 1 to 4 MiB; at 8 MiB 8 % faster in
 * one call and 2 % slower in another, at 16 MiB 3-6 % slower: the net's receives then write a
 * window of cold memory instead of arena blocks the cache holds; NCCL's CollNet calls are at most
 * 256 KiB per channel, 1.75 MiB with 7 channels). And only where a whole block fits in the
 * registration and cannot reach this rank's own copy (an in-place call keeps the arena). Above 2
 * ranks landing one peer's reduce-scatter block the same way measured no gain (cnhost18.sh). */
#define CS_LAND_MAX_BYTES (4u << 20)
static char *cs_oneshot_landing(const cs_comm_t *c, const cs_slot_t *sl, int j) {
  const cs_req_t *r = sl->req;
  if (r->kind != CS_ALLREDUCE || !r->oneshot || c->nranks != 2 || !r->rmr || r->count * r->esz > CS_LAND_MAX_BYTES)
    return NULL;
  char *land = r->dst + sl->boff[j];
  const char *mine = cs_rs_mine(c, sl);
  if (land < mine + sl->blen[c->rank] && mine < land + c->block) return NULL;
  return cs_block_fits(c, r, land) ? land : NULL;
}

/* Points the slot's per-message lengths, buffers and registrations at the exchange of `phase` and
 * writes the header every peer is sent. Every peer gets two messages on the lane's comm, the
 * header and the payload (zero bytes when it has no data; only the payload in an all-reduce's
 * all-gather, cs_sends_header), and every payload receive is posted at
 * a whole block, so the exchange completes even when the ranks disagree and each rank reads its
 * peers' headers before it trusts their payloads. A payload receive lands in the user's receive
 * buffer (the all-gather of an all-reduce on registered memory, and the one exchange of one at 2
 * ranks) only where a whole block fits inside that registration: a peer that disagrees can send up
 * to a block, never past it. */
static void cs_slot_exchange(cs_comm_t *c, cs_slot_t *sl, int phase) {
  const cs_req_t *r = sl->req;
  int me = c->rank;
  sl->phase = phase;
  sl->lane = cs_lane_of(c, sl, phase);
  sl->all_posted = false;
  sl->t_post = 0;
  sl->tm.first[phase] = sl->tm.rin[phase] = sl->tm.sout[phase] = sl->tm.done[phase] = 0;
  cs_wire_hdr_t h;
  cs_header_of(c, sl, phase, &h);
  for (int j = 0; j < c->nranks; j++) {
    /* whose block goes to j: j's in a reduce-scatter, this rank's in an all-gather and in one
     * exchange (where every block is the chunk: sent once from this rank's copy) */
    int i = j * c->nlanes + sl->lane, src = phase == CS_PH_RS && !r->oneshot ? j : me;
    for (int m = 0; m < CS_MSGS; m++) {
      int q = CS_MSGS * j + m;
      sl->sposted[q] = sl->rposted[q] = j == me;
      sl->sreq[q] = sl->rreq[q] = NULL;
    }
    if (j == me) continue;
    int qh = CS_MSGS * j + CS_MSG_HDR, qd = CS_MSGS * j + CS_MSG_DATA;
    if (!cs_sends_header(r, phase)) sl->sposted[qh] = sl->rposted[qh] = true; /* none to post */
    memcpy(cs_msg(c, sl->send, j), &h, sizeof h);
    sl->sbuf[qh] = cs_msg(c, sl->send, j);
    sl->slen[qh] = CS_HDR_BYTES;
    sl->smh[qh] = c->send_mh[i];
    sl->rbuf[qh] = cs_msg(c, sl->recv, j);
    sl->rlen[qh] = CS_HDR_BYTES;
    sl->rmh[qh] = c->recv_mh[i];
    char *user = cs_user_src(r, sl, phase, src);
    const cs_mr_t *umr = phase == CS_PH_RS ? r->smr : r->rmr;
    sl->sbuf[qd] = user ? user : cs_blk(c, sl->send, src);
    sl->slen[qd] = sl->blen[src];
    sl->smh[qd] = user ? umr->net_mh[i] : c->send_mh[i];
    char *land = phase == CS_PH_AG ? cs_ag_landing(c, sl, j) : cs_oneshot_landing(c, sl, j);
    sl->rbuf[qd] = land ? land : cs_blk(c, sl->recv, j);
    sl->rlen[qd] = c->block;
    sl->rmh[qd] = land ? r->rmr->net_mh[(size_t)c->nranks * (size_t)c->nlanes + (size_t)i] : c->recv_mh[i];
  }
}

/* User bytes of the slot's chunk, every rank's block. */
static size_t cs_chunk_bytes(const cs_comm_t *c, const cs_slot_t *sl) {
  if (sl->req->kind == CS_ALLREDUCE && sl->req->oneshot) return sl->blen[c->rank];
  size_t bytes = 0;
  for (int j = 0; j < c->nranks; j++) bytes += sl->blen[j];
  return bytes;
}

/* The job CS_JOB_STAGE_IN: copies the chunk's user data into the slot's send area. */
static void cs_stage_in(cs_comm_t *c, cs_slot_t *sl) {
  const cs_req_t *r = sl->req;
  int me = c->rank, n = c->nranks;
  if (r->kind == CS_ALLREDUCE) {
    if (r->smr) return; /* the reduce-scatter sends and reduces straight from the user's buffer */
    if (r->oneshot) { /* one copy of the chunk, sent to every peer */
      if (sl->blen[me]) memcpy(cs_blk(c, sl->send, me), r->src + sl->boff[me], sl->blen[me]);
      return;
    }
    for (int j = 0; j < n; j++)
      if (sl->blen[j]) memcpy(cs_blk(c, sl->send, j), r->src + sl->boff[j], sl->blen[j]);
  } else if (r->kind == CS_ALLGATHER) {
    if (sl->blen[me]) memcpy(cs_blk(c, sl->send, me), r->src + sl->boff[me], sl->blen[me]);
  } else {
    for (int j = 0; j < n; j++)
      cs_sge_copy(r->parts, r->nparts, r->part_off[j] + sl->boff[j], cs_blk(c, sl->send, j), sl->blen[j],
                  false);
  }
}

static strand_result_t cs_start_job(cs_comm_t *c, cs_slot_t *sl, int job);

/* Gives the next chunk of the oldest collective that has one to a free slot and starts staging its
 * data. The chunk's exchanges take their turns now, in issue order, whoever stages it. */
static strand_result_t cs_assign_chunk(cs_comm_t *c, bool *assigned) {
  *assigned = false;
  cs_req_t *r = c->head;
  while (r && r->next_chunk >= r->nchunks) r = r->next;
  if (!r) return STRAND_SUCCESS;
  cs_slot_t *sl = NULL;
  for (int s = 0; s < c->nslots && !sl; s++)
    if (!c->slots[s].req) sl = &c->slots[s];
  if (!sl) return STRAND_SUCCESS;
  *assigned = true;
  sl->req = r;
  sl->chunk = r->next_chunk++;
  cs_chunk_blocks(c, r, sl->chunk, sl->blen, sl->boff);
  sl->stream = (int)(c->chunks_assigned++ % (uint64_t)c->nstreams); /* the same on every rank */
  if (r->kind != CS_ALLGATHER) sl->seq[CS_PH_RS] = c->next_seq[cs_lane_of(c, sl, CS_PH_RS)]++;
  if (cs_has_ag(r)) sl->seq[CS_PH_AG] = c->next_seq[cs_lane_of(c, sl, CS_PH_AG)]++;
  return cs_start_job(c, sl, CS_JOB_STAGE_IN);
}

static strand_result_t cs_fail(cs_comm_t *c, cs_slot_t *sl, int peer, const char *what, strand_result_t rc) {
  if (!sl->req) { /* connect's check (cs_coll_hello) */
    STRAND_WARN("collnet_stub connect(rank %d/%d): %s rank %d failed (net %s returned %d) in the check "
                "with the peers; connect fails; check rank %d's log and the network between the two",
                c->rank, c->nranks, what, peer, c->net->name, (int)rc, peer);
    c->failed = rc;
    return rc;
  }
  STRAND_WARN("collnet_stub %s(rank %d/%d): %s rank %d failed (net %s returned %d) in chunk %zu; the "
              "collComm is unusable; check rank %d's log, the network between the two, and that "
              "STRAND_COLLNET_CHUNK_KB is the same on every rank (a peer that cuts larger blocks "
              "sends more than a receive holds)",
              sl->req->call, c->rank, c->nranks, what, peer, c->net->name, (int)rc, sl->chunk, peer);
  c->failed = rc;
  return rc;
}

/* Posts what the slot's exchange may post now, on its lane's turn; *changed when something was
 * posted. The lane's turn moves on once every send and receive of the exchange was accepted, so a
 * lane's sends stay in one order on every rank and so do its receives (the peer's matching sends).
 * A peer's payload is posted after its header on the same comm (the net keeps that order). */
static strand_result_t cs_post(cs_comm_t *c, cs_slot_t *sl, bool *changed) {
  if (sl->all_posted || c->turn[sl->lane] != sl->seq[sl->phase]) return STRAND_SUCCESS;
  const strand_net_t *n = c->net;
  bool all = true, any = false;
  if (!sl->t_post) sl->t_post = strand_now_s();
  for (int j = 0; j < c->nranks; j++) {
    if (j == c->rank) continue;
    int i = j * c->nlanes + sl->lane;
    for (int q = CS_MSGS * j; q < CS_MSGS * (j + 1); q++) {
      bool first = q == CS_MSGS * j;
      if (!sl->sposted[q] && (first || sl->sposted[q - 1])) {
        strand_result_t rc = n->isend(c->send[i], sl->sbuf[q], sl->slen[q], 0, sl->smh[q], NULL, &sl->sreq[q]);
        if (rc != STRAND_SUCCESS) return cs_fail(c, sl, j, "isend to", rc);
        sl->sposted[q] = sl->sreq[q] != NULL; /* NULL: the comm is full, retried next time */
        any |= sl->sposted[q];
      }
      if (!sl->rposted[q] && (first || sl->rposted[q - 1])) {
        void *buf = sl->rbuf[q];
        size_t sz = sl->rlen[q];
        int tag = 0;
        strand_result_t rc = n->irecv(c->recv[i], 1, &buf, &sz, &tag, &sl->rmh[q], NULL, &sl->rreq[q]);
        if (rc != STRAND_SUCCESS) return cs_fail(c, sl, j, "irecv from", rc);
        sl->rposted[q] = sl->rreq[q] != NULL;
        any |= sl->rposted[q];
      }
      all &= sl->sposted[q] && sl->rposted[q];
    }
  }
  *changed |= any;
  if (any && !sl->tm.first[sl->phase]) sl->tm.first[sl->phase] = strand_now_s();
  if (all) {
    sl->all_posted = true;
    c->turn[sl->lane]++;
    *changed = true;
  }
  return STRAND_SUCCESS;
}

/* Reduces the slot's nranks contributions to this rank's block (its own from `mine`, the peers'
 * from where their payloads landed), in rank order, into `out`. */
static strand_result_t cs_reduce_block(cs_comm_t *c, cs_slot_t *sl, const char *mine, char *out) {
  cs_req_t *r = sl->req;
  int me = c->rank, n = c->nranks;
  size_t len = sl->blen[me], cnt = len / r->esz;
  if (len == 0) return STRAND_SUCCESS;
  /* `out` overwritten by the first step while `mine` is still needed (in place, rank 2 or more):
   * accumulate in this rank's receive area, unused by the exchange, and copy at the end. */
  bool overlap = out < mine + len && mine < out + len;
  char *acc = overlap && !(out == mine && me < 2) ? cs_blk(c, sl->recv, me) : out;
#define CS_CONTRIB(j) ((j) == me ? mine : sl->rbuf[CS_MSGS * (j) + CS_MSG_DATA])
  strand_result_t rc = STRAND_SUCCESS;
  if (n == 1)
    memmove(acc, mine, len);
  else
    rc = strand_reduce3(r->dtype, r->op, acc, CS_CONTRIB(0), CS_CONTRIB(1), cnt);
  for (int j = 2; j < n && rc == STRAND_SUCCESS; j++)
    rc = strand_reduce(r->dtype, r->op, acc, CS_CONTRIB(j), cnt);
#undef CS_CONTRIB
  if (rc != STRAND_SUCCESS) {
    STRAND_WARN("collnet_stub %s(rank %d/%d): reduction of %zu elements failed (%d)", r->call, me,
                c->nranks, cnt, (int)rc);
    return rc;
  }
  if (acc != out) memcpy(out, acc, len);
  return STRAND_SUCCESS;
}

/* Bytes [off, off+len) of the reduction above, for a split one: the caller made sure that `out`'s
 * block and `mine`'s do not overlap, so parts running at once touch disjoint bytes. */
static strand_result_t cs_reduce_range(cs_comm_t *c, cs_slot_t *sl, const char *mine, char *out, size_t off,
                                       size_t len) {
  cs_req_t *r = sl->req;
  int me = c->rank, n = c->nranks;
  size_t cnt = len / r->esz;
#define CS_CONTRIB(j) ((j) == me ? mine + off : sl->rbuf[CS_MSGS * (j) + CS_MSG_DATA] + off)
  strand_result_t rc = strand_reduce3(r->dtype, r->op, out + off, CS_CONTRIB(0), CS_CONTRIB(1), cnt);
  for (int j = 2; j < n && rc == STRAND_SUCCESS; j++)
    rc = strand_reduce(r->dtype, r->op, out + off, CS_CONTRIB(j), cnt);
#undef CS_CONTRIB
  if (rc != STRAND_SUCCESS)
    STRAND_WARN("collnet_stub %s(rank %d/%d): reduction of %zu elements failed (%d)", r->call, me,
                c->nranks, cnt, (int)rc);
  return rc;
}

static void cs_describe(const cs_wire_hdr_t *h, char *out, size_t len) {
  static const char *const kinds[] = {"iallreduce", "iallgather", "ireducescatter"};
  const char *k = h->kind < 3 ? kinds[h->kind] : "unknown collective";
  if (h->kind == CS_ALLREDUCE)
    snprintf(out, len, "%s(count %llu, %s, %s)", k, (unsigned long long)h->a,
             strand_datatype_name((strand_datatype_t)h->dtype), strand_redop_name((strand_redop_t)h->op));
  else if (h->kind == CS_ALLGATHER)
    snprintf(out, len, "%s(bytesPerRank %llu, window %llu+%llu)", k, (unsigned long long)h->a,
             (unsigned long long)h->b, (unsigned long long)h->c);
  else
    snprintf(out, len, "%s(bytesPerRank %llu, window %llu+%llu, %s, %s)", k, (unsigned long long)h->a,
             (unsigned long long)h->b, (unsigned long long)h->c,
             strand_datatype_name((strand_datatype_t)h->dtype), strand_redop_name((strand_redop_t)h->op));
}

/* Before using a completed exchange's data: every peer's header must say what this rank believes
 * (the same collective, arguments, number and turn), and its payload the length that implies.
 * Runs in the exchange's job (maybe on a helper thread): it reports, the caller's thread fails the
 * comm. */
static strand_result_t cs_check_peers(cs_comm_t *c, cs_slot_t *sl) {
  cs_wire_hdr_t mine, peer;
  cs_header_of(c, sl, sl->phase, &mine);
  for (int j = 0; j < c->nranks; j++) {
    if (j == c->rank) continue;
    int src = sl->phase == CS_PH_RS ? c->rank : j; /* whose block the peer sent */
    size_t want = sl->blen[src], got = sl->rlen[CS_MSGS * j + CS_MSG_DATA];
    if (!cs_sends_header(sl->req, sl->phase)) {
      if (got == want) continue;
      STRAND_WARN("collnet_stub %s(rank %d/%d): rank %d sent %zu bytes in the all-gather of chunk %zu "
                  "of collective #%llu, this rank expected %zu; the collComm is unusable",
                  sl->req->call, c->rank, c->nranks, j, got, sl->chunk, (unsigned long long)mine.coll,
                  want);
      return STRAND_REMOTE_ERROR;
    }
    memset(&peer, 0, sizeof peer);
    if (sl->rlen[CS_MSGS * j + CS_MSG_HDR] >= sizeof peer) memcpy(&peer, cs_msg(c, sl->recv, j), sizeof peer);
    bool agree = peer.magic == mine.magic && peer.rank == (uint32_t)j && peer.nranks == mine.nranks &&
                 peer.kind == mine.kind && peer.phase == mine.phase && peer.dtype == mine.dtype &&
                 peer.op == mine.op && peer.a == mine.a && peer.b == mine.b && peer.c == mine.c;
    if (agree && peer.turn == mine.turn && peer.coll == mine.coll && got == want) continue;
    char me_s[160], peer_s[160];
    cs_describe(&mine, me_s, sizeof me_s);
    if (peer.magic != CS_WIRE_MAGIC) {
      STRAND_WARN("collnet_stub %s(rank %d/%d): rank %d sent %zu bytes without the stub's header in "
                  "collective #%llu (%s here): not a collnet_stub peer of this build, or a corrupted "
                  "message; the collComm is unusable", sl->req->call, c->rank, c->nranks, j,
                  sl->rlen[CS_MSGS * j + CS_MSG_HDR],
                  (unsigned long long)mine.coll, me_s);
      return STRAND_REMOTE_ERROR;
    }
    cs_describe(&peer, peer_s, sizeof peer_s);
    if (peer.block != mine.block) {
      STRAND_WARN("collnet_stub %s(rank %d/%d): rank %d cuts collectives into %llu-byte blocks, this "
                  "rank into %zu (STRAND_COLLNET_CHUNK_KB must be the same on every rank); the "
                  "collComm is unusable", sl->req->call, c->rank, c->nranks, j,
                  (unsigned long long)peer.block, c->block);
      return STRAND_INVALID_USAGE;
    }
    if (mine.kind == CS_ALLREDUCE && peer.kind == mine.kind && peer.a == mine.a && peer.b != mine.b) {
      STRAND_WARN("collnet_stub %s(rank %d/%d): rank %d runs %s as %s exchange per chunk, this rank as "
                  "%s (STRAND_COLLNET_ONESHOT_KB must be the same on every rank); the collComm is "
                  "unusable", sl->req->call, c->rank, c->nranks, j, me_s, peer.b ? "one" : "two",
                  mine.b ? "one" : "two");
      return STRAND_INVALID_USAGE;
    }
    if (agree)
      STRAND_WARN("collnet_stub %s(rank %d/%d): rank %d is out of step: its message is collective #%llu "
                  "turn %llu with %zu bytes, this rank is at collective #%llu turn %llu expecting %zu "
                  "(%s on both); the collComm is unusable", sl->req->call, c->rank, c->nranks, j,
                  (unsigned long long)peer.coll, (unsigned long long)peer.turn, got,
                  (unsigned long long)mine.coll, (unsigned long long)mine.turn, want, me_s);
    else
      STRAND_WARN("collnet_stub %s(rank %d/%d): the ranks called different collectives: collective #%llu "
                  "is %s on this rank (%d) but %s on rank %d; every rank fails it with "
                  "ncclInvalidUsage (all ranks must make the same calls with the same count, datatype "
                  "and op) and the collComm stays failed", sl->req->call, c->rank, c->nranks,
                  (unsigned long long)mine.coll, me_s, c->rank, peer_s, j);
    return STRAND_INVALID_USAGE;
  }
  return STRAND_SUCCESS;
}

/* The job CS_JOB_EXCHANGE: the slot's exchange completed; check the peers, then reduce into this
 * rank's block (reduce-scatter) or copy every block out (all-gather). */
static strand_result_t cs_exchange_cpu(cs_comm_t *c, cs_slot_t *sl) {
  cs_req_t *r = sl->req;
  int me = c->rank, n = c->nranks;
  char *staged = cs_blk(c, sl->send, me);
  double t0 = strand_now_s();
  strand_result_t rc = cs_check_peers(c, sl);
  if (rc != STRAND_SUCCESS) return rc;
  if (sl->phase == CS_PH_RS) {
    /* Straight into this rank's block of the result (the user's buffer); the all-gather sends it
     * from there when the net holds that buffer's registration, else from the arena. */
    char *mine = cs_user_src(r, sl, CS_PH_RS, me);
    if (!sl->blen[me]) return STRAND_SUCCESS; /* nothing of this rank's (r->dst may be NULL) */
    rc = cs_reduce_block(c, sl, mine ? mine : staged, r->dst + sl->boff[me]);
    if (rc != STRAND_SUCCESS) return rc;
    double t1 = strand_now_s();
    sl->job_reduce_s = t1 - t0;
    if (r->kind == CS_ALLREDUCE && !r->oneshot && !r->rmr && sl->blen[me])
      memcpy(staged, r->dst + sl->boff[me], sl->blen[me]); /* the all-gather sends it from there */
    sl->job_copy_s = strand_now_s() - t1;
    return STRAND_SUCCESS;
  }
  for (int j = 0; j < n; j++) {
    if (!sl->blen[j]) continue;
    if (r->kind == CS_ALLREDUCE) {
      /* this rank's block is in place since the reduction; a peer's landed there or in the arena */
      const char *blk = sl->rbuf[CS_MSGS * j + CS_MSG_DATA];
      if (j != me && blk != r->dst + sl->boff[j]) memcpy(r->dst + sl->boff[j], blk, sl->blen[j]);
      continue;
    }
    const char *blk = j == me ? staged : sl->rbuf[CS_MSGS * j + CS_MSG_DATA];
    cs_sge_copy(r->parts, r->nparts, r->part_off[j] + sl->boff[j], (void *)blk, sl->blen[j], true);
  }
  sl->job_copy_s = strand_now_s() - t0;
  return STRAND_SUCCESS;
}


/* Part p of nparts of a len-byte block: 64-byte multiples (so whole elements), the last one the
 * rest. */
static void cs_part_range(size_t len, int nparts, int p, size_t *off, size_t *plen) {
  size_t per = (len / (size_t)nparts + 63) & ~(size_t)63;
  size_t o = per * (size_t)p < len ? per * (size_t)p : len;
  *off = o;
  *plen = len - o < per ? len - o : per;
}

/* How many parts the slot's job is cut into: a registered all-reduce's reduce-scatter reduction
 * of at least CS_SPLIT_MIN bytes, on a comm with 2 or more helpers, into one part per helper (at
 * most CS_RED_PARTS_MAX, at least 64 KiB each); every other job is one part. Never when the
 * block's source and result overlap (in place): parts would read what another part writes. */
static int cs_split_parts(const cs_comm_t *c, const cs_slot_t *sl, int job) {
  const cs_req_t *r = sl->req;
  int helpers = cs_helpers_count(c);
  size_t len = sl->blen[c->rank];
  if (job != CS_JOB_EXCHANGE || r->kind != CS_ALLREDUCE || sl->phase != CS_PH_RS || !r->rmr ||
      helpers < 2 || len < CS_SPLIT_MIN || c->nranks < 2)
    return 1;
  const char *mine = cs_rs_mine(c, sl), *out = r->dst + sl->boff[c->rank];
  if (out < mine + len && mine < out + len) return 1;
  size_t most = len / (64u << 10);
  int parts = helpers < CS_RED_PARTS_MAX ? helpers : CS_RED_PARTS_MAX;
  return (size_t)parts < most ? parts : (int)most;
}

void cs_coll_run_part(cs_comm_t *c, cs_slot_t *sl, int part) {
  cs_req_t *r = sl->req;
  size_t off, len;
  cs_part_range(sl->blen[c->rank], sl->nparts, part, &off, &len);
  double t0 = strand_now_s();
  sl->part_rc[part] = len ? cs_reduce_range(c, sl, cs_rs_mine(c, sl), r->dst + sl->boff[c->rank], off, len)
                          : STRAND_SUCCESS;
  double t1 = strand_now_s();
  sl->part_reduce_s[part] = t1 - t0;
  sl->part_t0[part] = t0;
  sl->part_t1[part] = t1;
}

void cs_coll_run_job(cs_comm_t *c, cs_slot_t *sl) {
  sl->job_t0 = strand_now_s();
  if (sl->job == CS_JOB_STAGE_IN) {
    cs_stage_in(c, sl);
    sl->job_t1 = strand_now_s();
    sl->job_copy_s = sl->job_t1 - sl->job_t0;
    sl->job_rc = STRAND_SUCCESS;
    return;
  }
  sl->job_rc = cs_exchange_cpu(c, sl);
  sl->job_t1 = strand_now_s();
}

/* A rank that has just failed the comm (the ranks disagree) drives the net requests it still has
 * in flight for a bounded time before it stops calling the net: a peer's exchange can still need
 * this rank's net to move (a rendezvous read to serve, an acknowledgement to send; seen on
 * tcp;ofi_rxm with 3 ranks and several chunks in flight, where a peer then never completed its own
 * first exchange and never saw the disagreement). Bounded by CS_DRAIN_S; an error path only. */
#define CS_DRAIN_S 0.5
static void cs_drain(cs_comm_t *c) {
  const strand_net_t *n = c->net;
  double until = strand_now_s() + CS_DRAIN_S;
  for (bool left = true; left && strand_now_s() < until;) {
    left = false;
    for (int s = 0; s < c->nslots; s++) {
      cs_slot_t *sl = &c->slots[s];
      if (atomic_load_explicit(&sl->cpu, memory_order_acquire) == CS_CPU_BUSY) continue;
      for (int q = 0; q < CS_MSGS * c->nranks; q++) {
        void **reqs[2] = {&sl->sreq[q], &sl->rreq[q]};
        for (int k = 0; k < 2; k++) {
          if (!*reqs[k]) continue;
          int done = 0;
          if (n->test(*reqs[k], &done, NULL) != STRAND_SUCCESS || done)
            *reqs[k] = NULL;
          else
            left = true;
        }
      }
    }
  }
}

/* On the caller's thread once the slot's job is done: the slot's next exchange, or the chunk is
 * done. */
static strand_result_t cs_finish_job(cs_comm_t *c, cs_slot_t *sl) {
  atomic_store_explicit(&sl->cpu, CS_CPU_IDLE, memory_order_relaxed);
  if (sl->nparts > 1) { /* a split reduction: the parts' results and times */
    sl->job_t0 = sl->part_t0[0];
    sl->job_t1 = sl->part_t1[0];
    for (int p = 0; p < sl->nparts; p++) {
      sl->job_reduce_s += sl->part_reduce_s[p];
      if (sl->job_rc == STRAND_SUCCESS) sl->job_rc = sl->part_rc[p];
      if (sl->part_t0[p] < sl->job_t0) sl->job_t0 = sl->part_t0[p];
      if (sl->part_t1[p] > sl->job_t1) sl->job_t1 = sl->part_t1[p];
    }
    sl->nparts = 1;
    c->stats.splits++;
  }
  c->stats.t_copy += sl->job_copy_s;
  c->stats.t_reduce += sl->job_reduce_s;
  if (sl->job_rc != STRAND_SUCCESS) {
    c->failed = sl->job_rc; /* sticky: the mesh is out of step */
    cs_drain(c);
    return c->failed;
  }
  cs_req_t *r = sl->req;
  if (sl->job == CS_JOB_STAGE_IN) {
    cs_slot_exchange(c, sl, r->kind == CS_ALLGATHER ? CS_PH_AG : CS_PH_RS);
    return STRAND_SUCCESS;
  }
  if (sl->phase == CS_PH_RS && r->kind == CS_ALLREDUCE) {
    sl->tm.red0 = sl->job_t0;
    sl->tm.red1 = sl->job_t1;
    if (cs_has_ag(r)) {
      cs_slot_exchange(c, sl, CS_PH_AG);
      return STRAND_SUCCESS;
    }
    /* one exchange: no all-gather; for the gaps line it took no time right after the reduction */
    sl->tm.first[CS_PH_AG] = sl->tm.rin[CS_PH_AG] = sl->tm.sout[CS_PH_AG] = sl->tm.done[CS_PH_AG] = sl->tm.red1;
  }
  if (r->kind == CS_ALLREDUCE) r->tm_last = sl->tm; /* the last chunk to get here is the call's */
  r->chunks_done++;
  /* a progress thread's test() reads this without the lock (cs_test) */
  if (r->chunks_done == r->nchunks) atomic_store_explicit(&r->complete, true, memory_order_release);
  c->stats.chunks++;
  c->stats.chunks_direct += r->kind == CS_ALLREDUCE && r->smr && r->rmr;
  c->stats.bytes += cs_chunk_bytes(c, sl);
  sl->req = NULL;
  return STRAND_SUCCESS;
}

/* Whether the job has no bulk work, so a hand-off to a helper would only add latency: an
 * all-reduce on a registered send buffer stages nothing in, and its all-gather, when every peer's
 * block landed in the receive buffer, only checks headers. */
static bool cs_job_is_light(const cs_comm_t *c, const cs_slot_t *sl, int job) {
  const cs_req_t *r = sl->req;
  if (r->kind != CS_ALLREDUCE) return false;
  if (job == CS_JOB_STAGE_IN) return r->smr != NULL;
  if (sl->phase != CS_PH_AG || !r->rmr) return false;
  for (int j = 0; j < c->nranks; j++)
    if (j != c->rank && sl->blen[j] && sl->rbuf[CS_MSGS * j + CS_MSG_DATA] != r->dst + sl->boff[j]) return false;
  return true;
}

/* Runs the job on a helper when the chunk is big enough and the comm has helpers, else here and
 * now (then the slot moves on at once). */
static strand_result_t cs_start_job(cs_comm_t *c, cs_slot_t *sl, int job) {
  sl->job = job;
  sl->job_rc = STRAND_SUCCESS;
  sl->job_copy_s = sl->job_reduce_s = 0;
  sl->nparts = 1;
  if (!cs_job_is_light(c, sl, job) && cs_chunk_bytes(c, sl) >= CS_OFFLOAD_MIN) {
    int parts = cs_split_parts(c, sl, job);
    if (parts > 1) {
      /* the peers' headers first, here: no part may write the user's buffer before they agree */
      sl->job_rc = cs_check_peers(c, sl);
      if (sl->job_rc != STRAND_SUCCESS) return cs_finish_job(c, sl);
      sl->nparts = parts;
    }
    if (cs_helpers_submit(c, sl)) return STRAND_SUCCESS;
    sl->nparts = 1;
  }
  cs_coll_run_job(c, sl);
  return cs_finish_job(c, sl);
}

/* Tests the exchange's posted requests (also before all are posted: a net that takes one request
 * per comm accepts a payload only once its header completed); the exchange is done when every
 * message was posted and completed. Only that counts as a change for cs_progress: a request's
 * completion alone does not buy another pass over every slot (measured through NCCL on 2 H200s,
 * docs/benchmarks/collnet.md: with it, test() calls took ~30 us instead of ~5 us, NCCL's proxy
 * thread called test() 5.5x less often, and exchanges looked twice as long). */
static strand_result_t cs_poll_msgs(cs_comm_t *c, cs_slot_t *sl, bool *all_done);

static strand_result_t cs_poll_slot(cs_comm_t *c, cs_slot_t *sl, bool *changed) {
  bool all;
  strand_result_t rc = cs_poll_msgs(c, sl, &all);
  if (rc != STRAND_SUCCESS || !all) return rc;
  *changed = true;
  cs_chunk_times_t *tm = &sl->tm;
  int ph = sl->phase;
  double now = strand_now_s();
  /* one rank alone posts nothing: its exchange starts and ends here */
  if (!tm->first[ph]) tm->first[ph] = now;
  if (!tm->rin[ph]) tm->rin[ph] = now;
  if (!tm->sout[ph]) tm->sout[ph] = tm->first[ph];
  tm->done[ph] = now;
  c->stats.t_exchange += now - sl->t_post;
  c->stats.exchanges++;
  return cs_start_job(c, sl, CS_JOB_EXCHANGE);
}

/* One pass of tests over the slot's posted requests; *all_done when every message of the exchange
 * was posted and has completed. */
static strand_result_t cs_poll_msgs(cs_comm_t *c, cs_slot_t *sl, bool *all_done) {
  const strand_net_t *n = c->net;
  bool all = sl->all_posted;
  cs_chunk_times_t *tm = &sl->tm;
  int ph = sl->phase;
  double now = 0; /* read once, when the first completion of this pass is seen */
  for (int q = 0; q < CS_MSGS * c->nranks; q++) {
    int done, size, j = q / CS_MSGS;
    if (sl->sreq[q]) {
      done = 0;
      strand_result_t rc = n->test(sl->sreq[q], &done, &size);
      if (rc != STRAND_SUCCESS) return cs_fail(c, sl, j, "send to", rc);
      if (done) {
        sl->sreq[q] = NULL;
        tm->sout[ph] = now = now ? now : strand_now_s();
      }
    }
    if (sl->rreq[q]) {
      done = 0;
      size = -1;
      strand_result_t rc = n->test(sl->rreq[q], &done, &size);
      if (rc != STRAND_SUCCESS) return cs_fail(c, sl, j, "receive from", rc);
      if (done) {
        sl->rreq[q] = NULL;
        sl->rlen[q] = size < 0 ? 0 : (size_t)size;
        if (q % CS_MSGS == CS_MSG_DATA && !tm->rin[ph]) tm->rin[ph] = now = now ? now : strand_now_s();
      }
    }
    all &= !sl->sreq[q] && !sl->rreq[q];
  }
  *all_done = all;
  return STRAND_SUCCESS;
}

strand_result_t cs_coll_hello(cs_comm_t *c, size_t len, double until, bool *timed_out) {
  cs_slot_t *sl = &c->slots[0];
  *timed_out = false;
  sl->req = NULL;
  sl->phase = CS_PH_RS;
  sl->lane = 0;
  sl->seq[CS_PH_RS] = c->next_seq[0]++; /* lane 0's first turn: the collectives' start at the next */
  sl->all_posted = false;
  sl->t_post = 0;
  memset(&sl->tm, 0, sizeof sl->tm);
  for (int j = 0; j < c->nranks; j++) {
    int qh = CS_MSGS * j + CS_MSG_HDR, qd = CS_MSGS * j + CS_MSG_DATA, i = j * c->nlanes;
    sl->sreq[qh] = sl->rreq[qh] = sl->sreq[qd] = sl->rreq[qd] = NULL;
    sl->sposted[qh] = sl->rposted[qh] = j == c->rank;
    sl->sposted[qd] = sl->rposted[qd] = true; /* no payload */
    if (j == c->rank) continue;
    sl->sbuf[qh] = cs_msg(c, sl->send, j);
    sl->slen[qh] = len;
    sl->smh[qh] = c->send_mh[i];
    sl->rbuf[qh] = cs_msg(c, sl->recv, j);
    sl->rlen[qh] = CS_HDR_BYTES;
    sl->rmh[qh] = c->recv_mh[i];
  }
  for (;;) {
    bool changed = false, all = false;
    strand_result_t rc = cs_post(c, sl, &changed);
    if (rc == STRAND_SUCCESS) rc = cs_poll_msgs(c, sl, &all);
    if (rc != STRAND_SUCCESS || all) return rc;
    if (strand_now_s() > until) {
      *timed_out = true;
      return STRAND_REMOTE_ERROR;
    }
  }
}

static bool cs_slot_idle(cs_slot_t *sl) {
  return atomic_load_explicit(&sl->cpu, memory_order_acquire) == CS_CPU_IDLE;
}

/* One bounded round of progress over the whole collComm; *moved when anything was posted or done. */
static strand_result_t cs_progress(cs_comm_t *c, bool *moved) {
  for (int pass = 0; pass < 2 * c->nslots + 2; pass++) {
    bool changed = false;
    for (bool assigned = true; assigned;) {
      strand_result_t rc = cs_assign_chunk(c, &assigned);
      if (rc != STRAND_SUCCESS) return rc;
      changed |= assigned;
    }
    for (int s = 0; s < c->nslots; s++) {
      cs_slot_t *sl = &c->slots[s];
      if (!sl->req) continue;
      int cpu = atomic_load_explicit(&sl->cpu, memory_order_acquire);
      if (cpu == CS_CPU_BUSY) continue; /* a helper owns it */
      strand_result_t rc = STRAND_SUCCESS;
      if (cpu == CS_CPU_DONE) {
        changed = true;
        rc = cs_finish_job(c, sl);
        if (rc != STRAND_SUCCESS) return rc;
        if (!sl->req) continue;
      }
      rc = cs_post(c, sl, &changed);
      if (rc == STRAND_SUCCESS && sl->req && cs_slot_idle(sl)) rc = cs_poll_slot(c, sl, &changed);
      if (rc == STRAND_SUCCESS && sl->req && cs_slot_idle(sl))
        rc = cs_post(c, sl, &changed); /* the AG that follows an RS */
      if (rc != STRAND_SUCCESS) return rc;
    }
    if (!changed) break;
    *moved = true;
  }
  return STRAND_SUCCESS;
}

/* ---- the progress thread (STRAND_COLLNET_PROGRESS=thread) ---- */

/* Back-off when a round moved nothing while a collective still has chunks to move: CS_PROG_SPINS
 * rounds back to back, then rounds with a sched_yield between them (other threads of the process,
 * NCCL's proxy among them, get the core) until CS_PROG_IDLE_S without progress, then naps of
 * CS_PROG_NAP_NS (the net's exchanges take hundreds of microseconds, so a few microseconds' nap
 * costs little once nothing moves). With nothing to move at all (no collective queued, or all of
 * them done and waiting for test() to report them, or the comm failed) it sleeps on prog_wake
 * instead: naps there would cost ~200k wake-ups a second on an idle job. That sleep is bounded by
 * CS_PROG_SLEEP_NS only as a safety net; the issuing calls and closeColl signal it. */
#define CS_PROG_SPINS 64
#define CS_PROG_IDLE_S 50e-6
#define CS_PROG_NAP_NS 5000L
#define CS_PROG_SLEEP_NS 100000000L
#define CS_PROG_HANDOFF_S 100e-6

/* Whether a round could move anything: a collective with chunks not done, on a comm not failed.
 * Under the lock. */
static bool cs_has_work(const cs_comm_t *c) {
  if (c->failed != STRAND_SUCCESS) return false;
  for (const cs_req_t *r = c->head; r; r = r->next)
    if (r->chunks_done < r->nchunks) return true;
  return false;
}

/* Sleeps on prog_wake until signalled or CS_PROG_SLEEP_NS passed. Under the lock, which the wait
 * releases meanwhile. */
static void cs_progress_sleep(cs_comm_t *c) {
  struct timespec until = strand_deadline_in_ns(CLOCK_MONOTONIC, CS_PROG_SLEEP_NS);
  c->stats.prog_sleeps++;
  pthread_cond_timedwait(&c->prog_wake, &c->lock, &until); /* a timeout or a spurious wake: the
                                                              caller's loop checks again */
}

static void *cs_progress_main(void *arg) {
  cs_comm_t *c = arg;
  /* the naps are a few microseconds, not the default 50 us of timer slack */
  prctl(PR_SET_TIMERSLACK, 1000UL, 0UL, 0UL, 0UL);
  int idle = 0;
  double idle_since = 0;
  while (!atomic_load_explicit(&c->prog_stop, memory_order_acquire)) {
    bool moved = false, slept = false;
    pthread_mutex_lock(&c->lock);
    if (c->failed == STRAND_SUCCESS) {
      strand_result_t rc = cs_progress(c, &moved);
      if (rc != STRAND_SUCCESS) c->failed = rc; /* sticky: test() reports it */
      if (c->failed != STRAND_SUCCESS) atomic_store_explicit(&c->prog_failed, true, memory_order_release);
      c->stats.prog_rounds++;
      c->stats.prog_rounds_idle += !moved;
    }
    /* Checked under the lock that an issuing call holds to queue and signal: no wake-up is lost.
     * The stop flag too, as closeColl signals under the lock after setting it. */
    if (!moved && !cs_has_work(c) && !atomic_load_explicit(&c->prog_stop, memory_order_acquire)) {
      cs_progress_sleep(c);
      slept = true;
    }
    pthread_mutex_unlock(&c->lock);
    /* A mutex is not fair: relocking at once could keep an issuing call or a regMr waiting for
     * many rounds. Let a waiter in first (bounded: CS_PROG_HANDOFF_S). */
    if (atomic_load_explicit(&c->lock_waiters, memory_order_relaxed) > 0) {
      double until = strand_now_s() + CS_PROG_HANDOFF_S;
      while (atomic_load_explicit(&c->lock_waiters, memory_order_relaxed) > 0 && strand_now_s() < until)
        sched_yield();
    }
    if (moved || slept) { /* after a sleep, work just queued: back to back rounds first */
      idle = 0;
      continue;
    }
    if (++idle < CS_PROG_SPINS) continue;
    double now = strand_now_s();
    if (idle == CS_PROG_SPINS) idle_since = now;
    if (now - idle_since < CS_PROG_IDLE_S) {
      sched_yield();
    } else {
      struct timespec nap = {0, CS_PROG_NAP_NS};
      nanosleep(&nap, NULL);
    }
  }
  return NULL;
}

bool cs_progress_wants_thread(const char *mode, int ncpus) {
  if (strcmp(mode, "thread") == 0) return true;
  if (strcmp(mode, "auto") == 0) return ncpus >= CS_PROG_THREAD_MIN_CPUS;
  return false;
}

strand_result_t cs_progress_start(cs_comm_t *c) {
  const char *mode = "proxy";
  if (strand_param_get_enum("STRAND_COLLNET_PROGRESS", NULL, &mode) != STRAND_SUCCESS)
    return STRAND_INVALID_USAGE; /* the WARN naming the bad value is out */
  if (!cs_progress_wants_thread(mode, strand_topo_num_cpus())) return STRAND_SUCCESS;
  pthread_condattr_t ca;
  int err = pthread_condattr_init(&ca);
  if (!err) err = pthread_condattr_setclock(&ca, CLOCK_MONOTONIC); /* sleeps immune to clock steps */
  if (!err) err = pthread_cond_init(&c->prog_wake, &ca);
  if (!err) pthread_condattr_destroy(&ca);
  if (err) {
    STRAND_WARN("collnet_stub connect(rank %d/%d): cannot set up the progress thread's condition "
                "variable (error %d)", c->rank, c->nranks, err);
    return STRAND_SYSTEM_ERROR;
  }
  atomic_store_explicit(&c->prog_stop, false, memory_order_relaxed);
  c->prog_on = true; /* before the thread exists: the issuing calls see it only after connect */
  err = pthread_create(&c->prog, NULL, cs_progress_main, c);
  if (err) {
    c->prog_on = false;
    pthread_cond_destroy(&c->prog_wake);
    STRAND_WARN("collnet_stub connect(rank %d/%d): cannot start the progress thread (error %d); unset "
                "STRAND_COLLNET_PROGRESS to progress on NCCL's proxy thread", c->rank, c->nranks, err);
    return STRAND_SYSTEM_ERROR;
  }
  pthread_setname_np(c->prog, "strand-cs-prog");
  c->prog_ran = true;
  return STRAND_SUCCESS;
}

void cs_progress_stop(cs_comm_t *c) {
  if (!c->prog_on) return;
  atomic_store_explicit(&c->prog_stop, true, memory_order_release);
  /* under the lock: the thread checks the flag under it before sleeping, so it either sees the
   * flag or is asleep and gets the signal */
  pthread_mutex_lock(&c->lock);
  pthread_cond_signal(&c->prog_wake);
  pthread_mutex_unlock(&c->lock);
  pthread_join(c->prog, NULL); /* it sees the flag within one cs_progress round or one nap */
  pthread_cond_destroy(&c->prog_wake);
  c->prog_on = false;
}

/* Adds a finished all-reduce's gaps (cs.h, CS_GAP_*): its last chunk's chain from issue to `now`. */
static void cs_add_gaps(cs_stats_t *st, const cs_req_t *r, double now) {
  const cs_chunk_times_t *t = &r->tm_last;
  enum { RS = CS_PH_RS, AG = CS_PH_AG };
  double *g = st->gap;
  g[CS_GAP_ISSUE_RS] += t->first[RS] - r->t_issued;
  g[CS_GAP_RS] += t->done[RS] - t->first[RS];
  g[CS_GAP_TO_RED] += t->red0 - t->done[RS];
  g[CS_GAP_RED] += t->red1 - t->red0;
  g[CS_GAP_TO_AG] += t->first[AG] - t->red1;
  g[CS_GAP_AG] += t->done[AG] - t->first[AG];
  g[CS_GAP_TO_DONE] += now - t->done[AG];
  g[CS_GAP_RS_IN] += t->rin[RS] - t->first[RS];
  g[CS_GAP_RS_OUT] += t->sout[RS] - t->first[RS];
  g[CS_GAP_AG_IN] += t->rin[AG] - t->first[AG];
  g[CS_GAP_AG_OUT] += t->sout[AG] - t->first[AG];
  st->gap_calls++;
}

/* End of a test() that started at t0: its time, and where the next one's interval starts from. */
static void cs_test_end(cs_comm_t *c, double t0) {
  double t1 = strand_now_s();
  c->stats.t_test_in += t1 - t0;
  c->t_last_test = c->inflight ? t0 : 0;
}

static strand_result_t cs_test_locked(cs_comm_t *c, cs_req_t *r, bool quick, int *done, int *size);

strand_result_t cs_test(void *request, int *done, int *size) {
  if (!done) return STRAND_INVALID_ARGUMENT;
  *done = 0;
  cs_req_t *r = request;
  if ((uintptr_t)request < 4096 || r->magic != CS_REQ_MAGIC) {
    STRAND_WARN("collnet_stub test: %p is not a collective in flight (completed and tested already?)", request);
    return STRAND_INTERNAL_ERROR;
  }
  cs_comm_t *c = r->comm;
  /* Under a progress thread, a call not complete on a comm not failed is reported without the
   * lock: NCCL's proxy polls test() back to back, and taking the lock each time would keep the
   * progress thread waiting for it. */
  bool quick = c->prog_on && !atomic_load_explicit(&r->complete, memory_order_acquire) &&
               !atomic_load_explicit(&c->prog_failed, memory_order_acquire);
  if (!quick) cs_lock(c);
  strand_result_t rc = cs_test_locked(c, r, quick, done, size);
  if (!quick) cs_unlock(c);
  return rc;
}

/* test() of r on its comm c: progresses c (proxy mode; a progress thread does it otherwise), then
 * reports r done and frees it once its last chunk completed. `quick`: without the lock, r known
 * not complete; only the fields of test() itself are touched then. */
static strand_result_t cs_test_locked(cs_comm_t *c, cs_req_t *r, bool quick, int *done, int *size) {
  if (!quick && c->failed != STRAND_SUCCESS) return c->failed;
  double t0 = strand_now_s();
  if (c->t_last_test > 0) {
    double gap = t0 - c->t_last_test;
    c->stats.test_gaps++;
    c->stats.t_test_gap += gap;
    if (gap > c->stats.t_test_gap_max) c->stats.t_test_gap_max = gap;
  }
  bool moved = false;
  strand_result_t rc = c->prog_on ? STRAND_SUCCESS : cs_progress(c, &moved);
  c->stats.tests++;
  c->stats.tests_idle += !moved;
  if (rc != STRAND_SUCCESS) return rc;
  if (quick || r->chunks_done < r->nchunks) {
    cs_test_end(c, t0);
    return STRAND_SUCCESS;
  }
  *done = 1;
  double now = strand_now_s();
  c->stats.colls++;
  c->stats.t_coll += now - r->t_issued;
  if (r->kind == CS_ALLREDUCE) cs_add_gaps(&c->stats, r, now);
  if (size) *size = (int)r->result_bytes;
  cs_req_t **pp = &c->head, *prev = NULL;
  while (*pp != r) {
    prev = *pp;
    pp = &(*pp)->next;
  }
  *pp = r->next;
  if (c->tail == r) c->tail = prev;
  c->inflight--;
  if (!c->inflight) c->stats.t_busy += now - c->stats.t_busy_since;
  cs_req_free(r);
  cs_test_end(c, t0);
  return STRAND_SUCCESS;
}

void cs_coll_report_stats(const cs_comm_t *c) {
  const cs_stats_t *st = &c->stats;
  if (!st->colls) return;
  double active = st->t_busy;
  double pct = active > 0 ? 100.0 / active : 0;
  /* Who moved the chunks: test() calls on NCCL's proxy thread, or the progress thread's rounds
   * (test() then only reports, so its idle count would say nothing). */
  char movers[200];
  if (c->prog_ran)
    snprintf(movers, sizeof movers, "progress thread: %llu rounds, %llu of them moved nothing, %llu "
             "sleeps with nothing to move; %llu test() calls (report only)",
             (unsigned long long)st->prog_rounds, (unsigned long long)st->prog_rounds_idle,
             (unsigned long long)st->prog_sleeps, (unsigned long long)st->tests);
  else
    snprintf(movers, sizeof movers, "%llu test() calls, %llu of them moved nothing",
             (unsigned long long)st->tests, (unsigned long long)st->tests_idle);
  STRAND_INFO(STRAND_SUBSYS_INIT | STRAND_SUBSYS_NET,
              "collnet_stub: rank %d/%d closing: %llu collectives, %.1f MiB in %llu chunks of up to "
              "%zu-byte blocks in %.3f s with collectives in flight (%.2f GB/s of user data); %.2f "
              "collectives in flight on average, %.1f us each from issue to done; CPU time in staging "
              "copies %.3f s (%.0f%%), in reductions %.3f s (%.0f%%); %llu exchanges of %.1f us each "
              "on average (first post to complete; up to %d chunks in flight); %s; %llu chunks sent "
              "from and received into registered user memory (no staging); %llu reductions split over helpers; %d streams",
              c->rank, c->nranks, (unsigned long long)st->colls, (double)st->bytes / (1 << 20),
              (unsigned long long)st->chunks, c->block, active,
              active > 0 ? (double)st->bytes / active / 1e9 : 0.0, active > 0 ? st->t_coll / active : 0.0,
              st->t_coll / (double)st->colls * 1e6, st->t_copy, st->t_copy * pct,
              st->t_reduce, st->t_reduce * pct, (unsigned long long)st->exchanges,
              st->exchanges ? st->t_exchange / (double)st->exchanges * 1e6 : 0.0, c->nslots, movers,
              (unsigned long long)st->chunks_direct, (unsigned long long)st->splits, c->nstreams);
  /* A second line: one message holds at most STRAND_LOG_MAX_MESSAGE bytes. Means in microseconds;
   * the chain (issue .. done) adds up to the mean all-reduce call time printed at its end. */
  double k = st->gap_calls ? 1e6 / (double)st->gap_calls : 0;
  const double *g = st->gap;
  double call = 0;
  for (int i = CS_GAP_ISSUE_RS; i <= CS_GAP_TO_DONE; i++) call += g[i] * k;
  STRAND_INFO(STRAND_SUBSYS_INIT | STRAND_SUBSYS_NET,
              "collnet_stub: rank %d/%d closing: call gaps: %llu all-reduce calls, mean us through each "
              "call's last chunk: issue->RS posted %.1f, RS %.1f (first payload in %.1f, last send "
              "done %.1f), ->reduce start %.1f, reduce %.1f, ->AG posted %.1f, AG %.1f (first "
              "payload in %.1f, last send done %.1f), ->done %.1f; sum %.1f; test() every %.1f us "
              "(max %.1f) while calls in flight, %.1f us inside each",
              c->rank, c->nranks, (unsigned long long)st->gap_calls, g[CS_GAP_ISSUE_RS] * k,
              g[CS_GAP_RS] * k, g[CS_GAP_RS_IN] * k, g[CS_GAP_RS_OUT] * k, g[CS_GAP_TO_RED] * k,
              g[CS_GAP_RED] * k, g[CS_GAP_TO_AG] * k, g[CS_GAP_AG] * k, g[CS_GAP_AG_IN] * k,
              g[CS_GAP_AG_OUT] * k, g[CS_GAP_TO_DONE] * k, call,
              st->test_gaps ? st->t_test_gap / (double)st->test_gaps * 1e6 : 0.0, st->t_test_gap_max * 1e6,
              st->tests ? st->t_test_in / (double)st->tests * 1e6 : 0.0);
}
