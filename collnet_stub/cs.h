/* collnet_stub internal types. Files and roles (each calls only the ones below it):
 *   cs_plugin.c  the CollNet table, binding to a net table, init/finalize, devices, properties,
 *                reduceSupport, listen/closeListen
 *   cs_coll.c    iallreduce / iallgather / ireducescatter, test, iflush: the chunk schedule and
 *                the progress engine over the mesh
 *   cs_mr.c      regMr / regMrDmaBuf / deregMr of the collComm
 *   cs_conn.c    connect (the N-rank mesh of the net's comms) and closeColl
 * and this header. */
#ifndef STRAND_CS_H
#define STRAND_CS_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "strand/collnet_stub.h"
#include "strand/log.h"

#define CS_CTX_MAGIC 0x43534358u
#define CS_LISTEN_MAGIC 0x43534c4eu
#define CS_COMM_MAGIC 0x4353434du
#define CS_REQ_MAGIC 0x43535251u
#define CS_MR_MAGIC 0x43534d52u

/* Collectives a collComm accepts in flight; beyond that the call returns *request = NULL and NCCL
 * retries (spec §8.3). NCCL merges up to 8 channels' chunks into one call and keeps few in flight. */
#define CS_MAX_INFLIGHT 16
/* Chunk slots per collComm: how many chunks are in flight at once. Two already overlap the
 * all-gather of one chunk with the reduce-scatter of the next; more let staging run ahead and,
 * with helper threads (cs_cpu.c), let that many chunks' copies and reductions run in parallel.
 * CS_NSLOTS is the default of STRAND_COLLNET_SLOTS (1..CS_MAX_SLOTS; -DCS_NSLOTS=n changes the
 * default for measurements). Each slot costs 2 x nranks x (CS_HDR_BYTES + block) of arena. 16:
 * NCCL's CollNet proxy keeps ~7 calls of ~1.8 MB in flight (measured on 2 and 4 H200s), each one
 * chunk with the default chunk size, and a chunk holds its slot until its all-gather completed;
 * 8 slots of 1 MiB chunks held the stub at 8 GB/s where 32 of 4 MiB reached 10-11
 * (docs/benchmarks/collnet.md, 2026-11-28). */
#ifndef CS_NSLOTS
#define CS_NSLOTS 16
#endif
#define CS_MAX_SLOTS 64
/* A chunk's CPU work (staging copies, reduction) goes to a helper thread from this many bytes of
 * user data up; smaller chunks are done on the calling thread, where a hand-off would cost more
 * than the work. */
#define CS_OFFLOAD_MIN (64u << 10)
/* Net comms per ordered pair of ranks and stream, each with its own order of exchanges (its own
 * turns): lane 0 of a stream carries the first exchange of every chunk (an all-reduce's
 * reduce-scatter, or the one exchange of an all-gather or reduce-scatter), lane 1 an all-reduce's
 * all-gather. With one lane the all-gather of chunk k had to be posted before the reduce-scatter of
 * chunk k+1 could be, so every chunk's reduction sat between two exchanges of the whole pipeline
 * (measured: the stub flat at 3.4 GB/s with 8 chunks in flight). The lane is the exchange's place
 * in its chunk, not its kind, so ranks that disagree about the collective still pair their first
 * exchanges and see the disagreement. */
#define CS_LANES 2
/* Streams: sets of CS_LANES comms per ordered pair (STRAND_COLLNET_STREAMS). Chunks go to the
 * streams in turn (the k-th chunk the collComm takes to stream k mod streams, the same on every
 * rank), so the exchanges of several chunks move on several comms at once instead of one after
 * another on one: NCCL keeps a fixed ~12 MB of CollNet calls in flight, so the stub's bandwidth is
 * that window over a call's time, and at 2 ranks a call's time is mostly its two exchanges waiting
 * behind the other calls' on the same comm (docs/benchmarks/collnet.md). Auto (-1,
 * cs_auto_streams): about CS_STREAM_COMMS comms per direction for one exchange counting its n-1
 * peers, rounded up: 4 streams at 2 ranks, 2 at 3 and 4, 1 from 5 ranks. At 4 ranks 2 was
 * measured 0.98-1.11x the single stream of the earlier rule (rounded down) on 4 H200s, 9 paired
 * rounds (collnet.md, "Four GPUs"); 3 and 4 streams no better. Must be the same on every rank;
 * connect checks it. */
#ifndef CS_STREAM_COMMS
#define CS_STREAM_COMMS 4
#endif
#define CS_MAX_STREAMS 8
/* The auto stream count for a collComm of nranks (see above). */
int cs_auto_streams(int nranks);
#define CS_MAX_LANES (CS_LANES * CS_MAX_STREAMS)
/* Bytes each rank exchanges with each peer per chunk: about the chunk target / nranks, within
 * [CS_BLOCK_MIN, CS_BLOCK_MAX], a multiple of 64 (so of every element size). CS_CHUNK_TARGET is
 * the default of STRAND_COLLNET_CHUNK_KB (in KiB there). 2 MiB: one chunk per NCCL call (~1.8 MB
 * at 2 and 4 ranks), so a call pays one exchange pair rather than two in a row; measured 4 MiB
 * chunks 10-25 % faster than 1 MiB at 128 MiB-1 GiB on 2 H200s. */
#ifndef CS_CHUNK_TARGET
#define CS_CHUNK_TARGET (2u << 20)
#endif
/* Default of STRAND_COLLNET_ONESHOT_KB above 2 ranks: all-reduce calls up to this many KiB run as
 * one exchange (cs_coll.c, "One exchange"; at 2 ranks every call does). */
#ifndef CS_ONESHOT_AUTO_KB
#define CS_ONESHOT_AUTO_KB 16
#endif
#define CS_BLOCK_MIN (4u << 10)
#define CS_BLOCK_MAX (4u << 20)
/* Bound on connect (building the mesh): every rank of the group must call connect within it. */
#define CS_CONNECT_TIMEOUT_S 60.0
/* Largest collective one call may carry, reported as maxCollBytes (test() reports an int size). */
#define CS_MAX_COLL_BYTES (1ULL << 30)
/* Every exchange sends each peer two messages on the same comm: a header of this many bytes
 * (cs_coll.c, cs_wire_hdr_t: what the sender believes the collective is), then the payload, which
 * can go straight from (or land straight in) a registered user buffer. A multiple of 64, so
 * payloads in the arena stay aligned. */
#define CS_HDR_BYTES 64u
/* Messages per peer and exchange: the header (CS_MSG_HDR) and the payload (CS_MSG_DATA). Message
 * q = 2 * peer + m in a slot's per-message arrays. */
enum { CS_MSG_HDR = 0, CS_MSG_DATA = 1, CS_MSGS = 2 };

typedef struct {
  uint32_t magic;
  void *net_ctx; /* the net table's context from its init */
  uint64_t comm_id;
} cs_ctx_t;

typedef struct {
  uint32_t magic;
  cs_ctx_t *ctx;
  int dev;
  void *net_listen;
} cs_listen_t;

typedef struct cs_mr {
  uint32_t magic;
  void *base;
  size_t size;
  /* The same range registered with the net on every comm of the mesh: net_mh[i] on send[i],
   * net_mh[nranks * nlanes + i] on recv[i] (NULL where the net needs none). When net_ok, the
   * collectives send from and receive into this range without staging it (cs_coll.c). */
  void **net_mh;
  bool net_ok;
  struct cs_mr *next;
} cs_mr_t;

struct cs_req;

/* The gaps of an all-reduce call, followed through its last chunk to complete. The chain
 * ISSUE_RS + RS + TO_RED + RED + TO_AG + AG + TO_DONE runs from issue to done without overlap;
 * RS_IN / RS_OUT (AG_IN / AG_OUT) split the exchange: from its first post to its first payload
 * received, and to its last send completed. */
enum {
  CS_GAP_ISSUE_RS, /* iallreduce called -> the reduce-scatter's first message posted */
  CS_GAP_RS,       /* -> every message of the reduce-scatter complete */
  CS_GAP_TO_RED,   /* -> its job (peer check, reduction) started: helper pick-up or inline */
  CS_GAP_RED,      /* -> that job finished */
  CS_GAP_TO_AG,    /* -> the all-gather's first message posted */
  CS_GAP_AG,       /* -> every message of the all-gather complete */
  CS_GAP_TO_DONE,  /* -> test() reports the call done */
  CS_GAP_RS_IN, CS_GAP_RS_OUT, CS_GAP_AG_IN, CS_GAP_AG_OUT,
  CS_NGAPS
};

/* Where a collComm's time goes, reported at closeColl (INFO, INIT|NET as the connect line): what bounds the stub's
 * bandwidth (staging copies, CPU reductions, or the net's exchanges) is read off one real run
 * instead of guessed. Costs a clock read per copy, reduction and exchange (per block, not per
 * byte). */
typedef struct {
  uint64_t colls, chunks, bytes; /* collectives and chunks completed, user bytes they carried */
  double t_copy, t_reduce;       /* seconds staging in/out of the arena, and reducing */
  double t_exchange;             /* summed over exchanges: first post -> every message complete */
  uint64_t exchanges;
  double t_busy, t_busy_since;   /* time with at least one collective in flight; since when */
  double t_coll;                 /* summed over collectives: issue -> test() reports done */
  uint64_t tests, tests_idle;    /* test() calls, and those in which nothing moved */
  /* STRAND_COLLNET_PROGRESS=thread, where test() moves nothing and the progress thread does:
   * its rounds, those in which nothing moved, and its sleeps for want of work (cs_coll.c) */
  uint64_t prog_rounds, prog_rounds_idle, prog_sleeps;
  uint64_t chunks_direct;        /* all-reduce chunks sent from and received into user memory */
  uint64_t splits;               /* reductions cut into parts run by several helpers at once */
  /* Where an all-reduce call's time goes between its exchanges (the closing gaps line): summed
   * over the all-reduce calls (gap_calls), each followed through its LAST chunk to complete, whose
   * chain of CS_GAP_* from issue to done sums to exactly the call's time. */
  uint64_t gap_calls;
  double gap[CS_NGAPS];
  /* Time between the starts of consecutive test() calls while collectives were in flight (does
   * NCCL's proxy poll often enough?), and time spent inside test(). */
  uint64_t test_gaps;
  double t_test_gap, t_test_gap_max, t_test_in;
} cs_stats_t;

/* A chunk's timestamps (strand_now_s) per exchange phase (CS_PH_RS / CS_PH_AG) and of its
 * reduce-scatter job, copied into its collective when the chunk completes (the gaps above). */
typedef struct {
  double first[2];  /* the exchange's first message accepted by the net */
  double rin[2];    /* its first payload receive seen complete */
  double sout[2];   /* its last send seen complete */
  double done[2];   /* every message complete */
  double red0, red1; /* the reduce-scatter's job (header check + reduction) started / finished */
} cs_chunk_times_t;

/* A slot's CPU work: who owns the slot (cs_slot_t.cpu). */
enum { CS_CPU_IDLE = 0, /* the caller's thread (NCCL's proxy) */
       CS_CPU_BUSY,     /* a helper thread: queued or running */
       CS_CPU_DONE };   /* the helper finished; the caller's thread takes it back in test() */
enum { CS_JOB_STAGE_IN, /* copy the chunk's user data into the slot */
       CS_JOB_EXCHANGE  /* check the peers' headers, reduce / copy out what the exchange brought */ };

/* A reduce-scatter's reduction of a large block is cut into up to this many parts, each run by
 * a helper thread (cs_cpu.c), when the comm has helpers: measured through NCCL on 2 H200s, one
 * core reduced a 1 MiB block in ~200 us, a sixth of a collective's issue-to-done time, and NCCL
 * keeps a fixed ~12 MB of calls in flight, so that time is bandwidth lost. Parts are cut from
 * CS_SPLIT_MIN bytes of this rank's block up, in multiples of 64 bytes. */
#define CS_RED_PARTS_MAX 8
#ifndef CS_SPLIT_MIN
#define CS_SPLIT_MIN (128u << 10)
#endif
/* One item of a helper's queue: part `part` of slot `sl`'s job. */
typedef struct cs_work {
  struct cs_slot *sl;
  int part;
  struct cs_work *qnext;
} cs_work_t;

/* One chunk in flight: the staging areas of one slot and the exchange under way. */
typedef struct cs_slot {
  struct cs_req *req; /* NULL: free */
  size_t chunk;       /* index of the chunk in its collective */
  int phase;          /* CS_PH_RS (reduce-scatter exchange) or CS_PH_AG (all-gather exchange) */
  uint64_t seq[2];    /* turn of this chunk's exchanges (reduce-scatter, all-gather) in their lanes */
  int lane;           /* lane of the exchange under way (c->send[j * nlanes + lane]) */
  int stream;         /* the chunk's stream: its lanes are stream * c->lanes + 0 (and + 1) */
  char *send, *recv;  /* nranks areas of comm->stride bytes each (header, then up to block bytes) */
  /* Per message q = CS_MSGS * peer + CS_MSG_* of the exchange under way: */
  size_t *slen, *rlen;   /* bytes to send; receive size posted, then bytes received once done */
  char **sbuf, **rbuf;   /* where it is sent from / received into (the arena or user memory) */
  void **smh, **rmh;     /* the net's registration of that memory on the lane's comm */
  void **sreq, **rreq;   /* net requests; NULL when not posted or complete */
  bool *sposted, *rposted;
  bool all_posted;       /* every send and receive of the exchange under way was accepted */
  double t_post;         /* when the exchange under way posted its first message (0: not yet) */
  /* CPU work (cs_cpu.c): while cpu is BUSY only the helper thread touches the slot */
  atomic_int cpu;
  int job;               /* CS_JOB_* of the work last started */
  strand_result_t job_rc;
  double job_copy_s, job_reduce_s; /* what the job took, added to stats by the caller's thread */
  /* The job in parts (a split reduction) or one part (everything else): the helper that finishes
   * the last part marks the slot CS_CPU_DONE. Per part: its result and reduction time. */
  int nparts;
  atomic_int parts_left;
  cs_work_t work[CS_RED_PARTS_MAX];
  strand_result_t part_rc[CS_RED_PARTS_MAX];
  double part_reduce_s[CS_RED_PARTS_MAX];
  /* Timestamps for the gaps line: tm is the chunk's; job_t0 / job_t1 bracket the job last run
   * (written by the thread that runs it; per part for a split reduction). */
  cs_chunk_times_t tm;
  double job_t0, job_t1;
  double part_t0[CS_RED_PARTS_MAX], part_t1[CS_RED_PARTS_MAX];
  size_t *blen;          /* per rank block length of this chunk */
  size_t *boff;          /* per rank block offset (bytes) in the user buffers */
} cs_slot_t;

typedef struct cs_comm {
  uint32_t magic;
  int nranks, rank, dev;
  const strand_net_t *net;
  int nstreams, nlanes;    /* STRAND_COLLNET_STREAMS, and lanes x that per ordered pair */
  int lanes;               /* comms per stream and ordered pair: CS_LANES, or 1 where every all-reduce
                              runs as one exchange (oneshot_max SIZE_MAX, the default at 2 ranks):
                              lane 1 would carry nothing */
  void **send, **recv;     /* send[j*nlanes+l] / recv[..]: lane l's net comms to / from rank j
                              (NULL at j = rank); lane l belongs to stream l / lanes */
  void **send_mh, **recv_mh; /* the staging arena's registration on each of them (may be NULL) */
  char *arena;             /* nslots x 2 x nranks x stride bytes, registered once per net comm */
  size_t arena_bytes, block;
  size_t stride;           /* CS_HDR_BYTES + block: one message of an exchange */
  size_t oneshot_max;      /* all-reduce calls of at most this many bytes run as one exchange
                              (cs_coll.c, "One exchange"); 0: none (STRAND_COLLNET_ONESHOT_KB) */
  uint64_t ncoll;          /* collectives issued so far; the next one's number */
  double t_last_test;      /* start of the last test() that left collectives in flight (0: none) */
  int nslots;              /* slots in use (STRAND_COLLNET_SLOTS) */
  cs_slot_t slots[CS_MAX_SLOTS];
  struct cs_req *head, *tail; /* collectives in issue order */
  int inflight;
  uint64_t chunks_assigned;    /* chunks that took a slot so far: the next one's stream */
  uint64_t next_seq[CS_MAX_LANES]; /* next turn handed out, per lane */
  /* the exchange allowed to post now in each lane: a lane's posts stay in one order on every rank
   * (nets deliver a comm's messages in posting order) */
  uint64_t turn[CS_MAX_LANES];
  strand_result_t failed; /* sticky: a failed exchange or a mismatch leaves the mesh out of step */
  cs_mr_t *mrs;
  cs_stats_t stats;
  struct cs_helpers *helpers; /* NULL: all CPU work on the caller's thread */
  /* STRAND_COLLNET_PROGRESS=thread: a thread of the comm's own runs cs_progress in a loop, so each
   * step of a chunk follows the previous one at once instead of at NCCL's next test(). While it
   * runs (prog_on, set at connect and cleared at close, both on NCCL's thread), every entry point
   * and every call into the net's comms holds `lock`; test() then only reports. */
  pthread_mutex_t lock;
  /* The progress thread sleeps on this (with `lock`, on CLOCK_MONOTONIC) while no collective has
   * a chunk left to move; a call that queues work, and closeColl, wake it. */
  pthread_cond_t prog_wake;
  bool prog_on;
  bool prog_ran;           /* a progress thread ran: the closing line counts its rounds */
  atomic_bool prog_stop;
  atomic_bool prog_failed; /* c->failed is set: test() must take the lock to report it */
  atomic_int lock_waiters;  /* NCCL-side callers in cs_lock: the thread lets them in first */
  pthread_t prog;
} cs_comm_t;

/* The comm's lock, taken only while its progress thread runs (c may be NULL: a bad handle). */
static inline void cs_lock(cs_comm_t *c) {
  if (!c || !c->prog_on) return;
  atomic_fetch_add_explicit(&c->lock_waiters, 1, memory_order_relaxed);
  pthread_mutex_lock(&c->lock);
  atomic_fetch_sub_explicit(&c->lock_waiters, 1, memory_order_relaxed);
}
static inline void cs_unlock(cs_comm_t *c) {
  if (c && c->prog_on) pthread_mutex_unlock(&c->lock);
}

/* The bound net table, or NULL (cs_plugin.c). */
const strand_net_t *cs_net(void);
/* STRAND_SUCCESS while a CollNet context from init is live; else a WARN naming `call` and
 * ncclInvalidUsage (a connect after the last finalize would build a mesh on a freed context). */
strand_result_t cs_require_live(const char *call);

/* cs_conn.c */
strand_result_t cs_connect(void *handles[], int nranks, int rank, void *listenComm, void **collComm);
strand_result_t cs_close_coll(void *collComm);
cs_comm_t *cs_comm_of(void *collComm);

/* cs_mr.c */
strand_result_t cs_reg_mr(void *collComm, void *data, size_t size, int type, void **mhandle);
strand_result_t cs_reg_mr_dmabuf(void *collComm, void *data, size_t size, int type, uint64_t offset,
                                 int fd, void **mhandle);
strand_result_t cs_dereg_mr(void *collComm, void *mhandle);
/* Deregisters and frees every registration; before the mesh's comms are closed. */
void cs_mr_free_all(cs_comm_t *c);
/* The live registration `mhandle` when it covers [p, p+len) and the net holds it on every comm
 * (the collective may then skip staging that buffer); NULL otherwise. */
const cs_mr_t *cs_mr_direct(const cs_comm_t *c, void *mhandle, const void *p, size_t len);

/* cs_coll.c */
strand_result_t cs_iallreduce(void *collComm, void *sendData, void *recvData, size_t count,
                              strand_datatype_t dataType, strand_redop_t redOp, void *sendMhandle,
                              void *recvMhandle, void **request);
strand_result_t cs_iallgather(void *collComm, void *sendData, int nRecvParts, strand_sge_t *recvParts,
                              size_t bytesPerRank, size_t windowOffset, size_t windowBytes,
                              void *sendMhandle, void **request);
strand_result_t cs_ireducescatter(void *collComm, int nSendParts, strand_sge_t *sendParts,
                                  void *recvData, size_t bytesPerRank, size_t windowOffset,
                                  size_t windowBytes, strand_datatype_t dataType,
                                  strand_redop_t redOp, void *recvMhandle, void **request);
strand_result_t cs_iflush(void *collComm, void *data, int size, void *mhandle, void **request);
strand_result_t cs_test(void *request, int *done, int *size);
/* Frees the collectives still queued on a comm being closed. */
void cs_coll_drop_all(cs_comm_t *c);
/* Slot staging memory inside the arena; called by connect once the arena exists. */
void cs_coll_init_slots(cs_comm_t *c);
void cs_coll_free_slots(cs_comm_t *c);
/* Connect's check with the peers (cs_conn.c): sends the first `len` (<= CS_HDR_BYTES) bytes of slot
 * 0's send header area for peer j to every peer j and receives each peer's into slot 0's receive
 * header area for it, on lane 0 as that lane's first exchange, through the same posting and polling
 * as a collective's header messages. Blocking, until every message completed or `until`
 * (strand_now_s; then STRAND_REMOTE_ERROR and *timed_out); a net error fails it with a WARN. */
strand_result_t cs_coll_hello(cs_comm_t *c, size_t len, double until, bool *timed_out);
/* STRAND_COLLNET_PROGRESS=auto runs a progress thread from this many online CPUs and progresses on
 * NCCL's proxy thread below (a thread spinning while calls are in flight would take a core NCCL's
 * own threads need on a small machine; the helpers' rule, cs_cpu.c). Not the default: on two GPUs
 * the thread won 5-8 % in most paired rounds and lost half the speed in 5 of 17
 * (docs/benchmarks/collnet.md, "The progress thread against NCCL's proxy thread"). */
#define CS_PROG_THREAD_MIN_CPUS 5
/* Whether a comm runs a progress thread for that mode ("proxy", "thread", "auto") on ncpus CPUs. */
bool cs_progress_wants_thread(const char *mode, int ncpus);
/* STRAND_COLLNET_PROGRESS: starts the comm's progress thread when the mode asks for one (a WARN and
 * an error when it cannot); stop sets its stop flag and joins it (one bounded cs_progress round at
 * most), after which the comm is back to one thread. Stop is a no-op without a thread. */
strand_result_t cs_progress_start(cs_comm_t *c);
void cs_progress_stop(cs_comm_t *c);
/* The INFO line of where the comm's time went (closeColl). */
void cs_coll_report_stats(const cs_comm_t *c);
/* Runs the slot's job (sl->job) on the calling thread; a helper thread calls it for offloaded work.
 * Touches only the slot, its collective's buffers and the arena. */
void cs_coll_run_job(cs_comm_t *c, cs_slot_t *sl);
/* Runs part `part` of a split reduction (sl->nparts > 1) on the calling thread (a helper). */
void cs_coll_run_part(cs_comm_t *c, cs_slot_t *sl, int part);

/* cs_cpu.c: the collComm's helper threads (STRAND_COLLNET_THREADS). */
strand_result_t cs_helpers_start(cs_comm_t *c);
/* Joins them: a job running finishes first (CPU work on one chunk, bounded), queued jobs are dropped. */
void cs_helpers_stop(cs_comm_t *c);
int cs_helpers_count(const cs_comm_t *c);
/* Queues the slot's job, as sl->nparts parts (1: the whole job); false when the comm has no
 * helpers (run it inline then). */
bool cs_helpers_submit(cs_comm_t *c, cs_slot_t *sl);


#endif
