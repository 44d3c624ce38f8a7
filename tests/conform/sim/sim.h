/* strand-conform sim — what the pieces of the `sim` subcommand share (internal to sim/):
 *   sim.c    options, scenario helpers, the scenarios and their table, `strand-conform sim`
 *   proto.c  NCCL's protocols as the proxy sees them: step / slice sizes, the LL line format
 *   ring.c   the ring engine: per-channel plans, FIFO connections, proxy and GPU passes, data
 *   p2p.c    the P2P all-to-all engine over shared comms with grouped receives
 *   collnet.c the CollNet scenarios: NCCL's CollNet proxy over a CollNet table (shared staging
 *            buffer, NCCL_STEPS collectives in flight, windows)
 * The model and why it looks like NCCL's proxy are described at the top of sim.c. */
#ifndef STRAND_CONFORM_SIM_H
#define STRAND_CONFORM_SIM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "simperf.h"
#include "strand/reduce.h"

#define SIM_STEPS 8          /* NCCL_STEPS */
#define SIM_P2P_CHUNK (128 * 1024)
#define SIM_P2P_LOCALS 4     /* virtual local ranks per process in the P2P scenario */
#define SIM_SHARED_STEPS 16  /* NCCL_SHARED_STEPS */

/* ------------------------------------------------------------------ options (sim.c) */

typedef struct {
  int channels;
  size_t bytes;
  int iters;
  bool flush;
  int dev;
} sim_opts_t;
extern sim_opts_t sim_opts; /* sim.c: --channels, --bytes, --iters, --flush, --dev */

static inline size_t div_up(size_t a, size_t b) { return (a + b - 1) / b; }
static inline size_t round_up(size_t a, size_t b) { return div_up(a, b) * b; }

/* ------------------------------------------------------------------ protocols */

typedef struct {
  const char *name;
  size_t buff_size;  /* per connection (NCCL_BUFFSIZE / NCCL_LL_BUFFSIZE defaults) */
  int slice_steps;   /* FIFO steps per network message */
  int chunk_steps;   /* FIFO steps per ring primitive */
  bool ll;           /* 16-byte lines: 8 data bytes + two 4-byte flags */
} sim_proto_t;

extern const sim_proto_t sim_proto_simple;
extern const sim_proto_t sim_proto_ll;
size_t sim_step_bytes(const sim_proto_t *p);
/* Largest message (irecv size): stepSize x sliceSteps (§6.4). */
size_t sim_msg_bytes(const sim_proto_t *p);
/* User data carried by one message (LL lines carry half their size). */
size_t sim_slice_data_bytes(const sim_proto_t *p);
/* Messages in flight per connection: NCCL_STEPS / sliceSteps. */
int sim_inflight(const sim_proto_t *p);
/* LL: 16-byte lines of 8 data bytes and two 4-byte flags; the flag of message `msg`. */
uint32_t sim_ll_flag(uint64_t msg);
void sim_ll_encode(unsigned char *lines, const unsigned char *data, size_t bytes, uint32_t flag);
/* True when every flag of the message carries `flag` (the data has landed, as the GPU sees it). */
bool sim_ll_ready(const unsigned char *lines, size_t bytes, uint32_t flag);
void sim_ll_decode(unsigned char *data, const unsigned char *lines, size_t bytes);

/* ------------------------------------------------------------------ ring engine (ring.c) */

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

/* Open / close the ring's connections (one per channel to each neighbour) and FIFOs. 0, or -1
 * with the failure recorded. */
int sim_ring_open(ring_t *R, conform_ctx_t *c, const sim_proto_t *p, int nch);
void sim_ring_close(ring_t *R);
/* One collective of `bytes` bytes of type `t` (iteration `iter` picks the data), planned as NCCL's
 * ring kernels cut it, run and verified bit for bit. 0, or -1 with the failure recorded. */
int sim_ring_collective(ring_t *R, coll_t k, strand_datatype_t t, size_t bytes, int iter);

/* ------------------------------------------------------------------ P2P engine (p2p.c) */

/* The sim.p2p-alltoall-grouped scenario. */
conform_status_t sim_p2p_alltoall_grouped(conform_ctx_t *c);

/* ------------------------------------------------------------------ CollNet scenarios (collnet.c) */

conform_status_t sim_collnet_allreduce(conform_ctx_t *c);

/* What NCCL's CollNet proxy holds, shared with perf --collnet (perf_collnet.c). */
typedef struct {
  void *ctx, *lc, *cc;
  bool inited;
  unsigned char *shared; /* [send slots | recv slots] */
  void *mh_send, *mh_recv;
} sim_cn_t;
/* init, listen, handles in rank order, connect, closeListen, then ONE `bytes`-byte host buffer
 * registered twice on the collComm (NCCL's send and recv connectors). 0, or -1 with the failure
 * recorded; sim_cn_close is due either way. */
int sim_cn_open(conform_ctx_t *c, sim_cn_t *s, size_t bytes);
void sim_cn_close(conform_ctx_t *c, sim_cn_t *s);
/* Rank `rank`'s data for `salt`: values whose sums are exact in every type used here, whatever
 * the order; `out` = the sum of every rank's data (`tmp` is scratch of the same size). */
void sim_cn_gen(strand_datatype_t t, int rank, void *buf, size_t count, uint64_t salt);
void sim_cn_expected(strand_datatype_t t, int nranks, void *out, void *tmp, size_t count, uint64_t salt);
conform_status_t sim_collnet_allgather(conform_ctx_t *c);
conform_status_t sim_collnet_reducescatter(conform_ctx_t *c);

/* ------------------------------------------------------------------ shared helpers (sim.c) */

/* Bound check shared by both engines: returns -1 (failure recorded) when the peer failed or the
 * check's time is nearly out. */
int sim_bounded(conform_ctx_t *c, const char *what, const char *state);
/* Deterministic 64-bit mix of three values (the data of both engines). */
uint64_t sim_hash3(uint64_t a, uint64_t b, uint64_t c);
/* Skip (fewer than 2 ranks) or fail (--dev out of range) a scenario up front: -1, else 0. */
int sim_precheck(conform_ctx_t *c);
/* --bytes capped by --max-bytes / --quick. */
size_t sim_bytes(conform_ctx_t *c);
/* Outcome of a refused iflush: skip on host-only devices, fail when GPU memory is advertised. */
conform_status_t sim_flush_verdict(conform_ctx_t *c, const char *flush_error);

#endif
