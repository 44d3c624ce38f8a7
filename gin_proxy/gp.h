/* gin_proxy internal types. Files and roles (each calls only the ones below it):
 *   gp_plugin.c  the RMA table, binding to a net table, init/finalize, devices, properties,
 *                listen/closeListen, createContext/destroyContext
 *   gp_xfer.c    iput / iputSignal / iget / iflush / test / rmaProgress / queryLastError:
 *                argument checks, local (self) operations, requests
 *   gp_engine.c  the wire engine: per-peer send queues and slots, pre-posted receives, applying
 *                incoming messages at the target, acks and replies at the source
 *   gp_mr.c      regMrSym / regMrSymDmaBuf / deregMrSym: symmetric windows by registration order
 *   gp_conn.c    connect (the mesh, staging arenas, receive slots) and closeColl
 *   gp_bulk.c    large puts: their bytes on a second comm per pair, zero-copy for host windows,
 *                through pinned bounce buffers and asynchronous copies for GPU windows
 *   gp_cuda.c    GPU windows: every copy into or out of a window and every signal
 * and gp_wire.h (the wire format). */
#ifndef STRAND_GP_H
#define STRAND_GP_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "gp_wire.h"
#include "strand/gin_proxy.h"
#include "strand/handle_set.h"
#include "strand/log.h"
#include "strand/mesh.h"

#define GP_CTX_MAGIC 0x47504358u
#define GP_LISTEN_MAGIC 0x47504c4eu
#define GP_COMM_MAGIC 0x4750434du
#define GP_RCTX_MAGIC 0x47505243u
#define GP_MR_MAGIC 0x47504d52u
#define GP_REQ_MAGIC 0x47505251u

/* One message slot: header + payload. 64 KiB amortises the per-message cost of the net while
 * keeping the pre-posted receive memory small (GP_RECV_SLOTS x 64 KiB per peer). */
#define GP_SLOT_BYTES (64u << 10)
#define GP_PAYLOAD_MAX (GP_SLOT_BYTES - sizeof(gp_hdr_t))
/* Requests in flight on one net comm, well under the 32 every net must accept. */
#define GP_RECV_SLOTS 8
#define GP_SEND_SLOTS 8
/* Large puts (gp_bulk.c): a put of GP_BULK_MIN bytes or more moves in GP_BULK_CHUNK pieces on
 * the pair's bulk comm, GP_BULK_SLOTS pieces in flight each way. Below GP_BULK_MIN the two extra
 * net requests per piece cost more than copying through a slot. */
#ifndef GP_BULK_MIN /* -D overrides: build-time experiments (docs/benchmarks/gin.md), not knobs */
#define GP_BULK_MIN (256u << 10)
#endif
#ifndef GP_BULK_CHUNK
#define GP_BULK_CHUNK (1u << 20)
#endif
#ifndef GP_BULK_SLOTS
#define GP_BULK_SLOTS 8
#endif
/* Net comms per ordered pair: 0 control, 1 bulk. */
#define GP_COMMS_PER_PAIR 2
/* A success ack waits this long for a message to ride on before it is sent on its own. */
#ifndef GP_ACK_DELAY_S
#define GP_ACK_DELAY_S 20e-6
#endif
/* Bound on connect: every rank of the group must call connect within it. */
#define GP_CONNECT_TIMEOUT_S 60.0

typedef struct {
  uint32_t magic;
  void *net_ctx; /* our own context of the net: the mesh's comms belong to it */
} gp_ctx_t;

typedef struct {
  uint32_t magic;
  gp_ctx_t *ctx;
  int dev;
  void *net_listen;
} gp_listen_t;

struct gp_comm;

typedef struct gp_mr {
  uint32_t magic;
  struct gp_comm *comm;
  uint32_t id; /* registration number on the collComm: the same window on every rank */
  char *base;
  size_t size;
  bool cuda;    /* GPU memory: moved by gp_copy / gp_signal through the CUDA driver */
  void *cu_ctx; /* its CUDA context */
  /* host windows: the net's registration on each peer's bulk comms ([nranks]; gp_bulk.c) */
  void **bulk_send_mh, **bulk_recv_mh;
} gp_mr_t;

enum { GP_OP_PUT = 1, GP_OP_GET, GP_OP_FLUSH };
/* The window id a 0-byte put carries: it names no window. */
#define GP_NO_WIN UINT32_MAX

/* A request NCCL holds. Remote ops also sit in their peer's `ops` FIFO until acked. */
typedef struct gp_req {
  uint32_t magic;
  struct gp_comm *comm;
  int kind, peer;
  uint64_t seq;           /* op number on (me -> peer); FLUSH: done once peer's done_seq reaches it */
  bool done;
  strand_result_t status;
  /* PUT: local source; GET: local destination. */
  char *local;
  gp_mr_t *src_win; /* PUT: the window `local` lies in (NULL once deregistered) */
  bool local_cuda;  /* `local` is GPU memory */
  size_t size;
  uint32_t win;     /* PUT: destination window id; GET: source window id */
  uint64_t roff;    /* the remote offset */
  bool signal;
  uint32_t sig_win, sig_op;
  uint64_t sig_off, sig_val;
  size_t sent;      /* PUT: bytes already put in fragments; GET: request sent (0/1) */
  strand_result_t err; /* a local failure (a GPU copy) reported when the op completes */
  struct gp_req *next_op;   /* peer's ops FIFO (issued, not yet acked) */
  struct gp_req *next_out;  /* peer's outgoing queue (fragments still to send) */
  struct gp_req *prev_all, *next_all; /* every live request of the comm */
} gp_req_t;

/* Outgoing items that are not our own ops: acks and get replies owed to the peer. */
typedef struct gp_item {
  int type;          /* GP_MSG_ACK or GP_MSG_REPLY */
  uint64_t seq;
  uint32_t status;
  char *data;        /* REPLY: the bytes, copied when the GET was applied (so a later put from the
                      * same source cannot leak into an earlier get) */
  uint64_t total, off;
  struct gp_item *next;
} gp_item_t;

/* One piece of a large put on a bulk comm (gp_bulk.c). */
enum { GP_BS_FREE = 0, GP_BS_WAIT_POST, GP_BS_COPY_IN, GP_BS_POSTED, GP_BS_COPY_OUT, GP_BS_DONE };
typedef struct {
  int state;
  char *ptr;          /* what the net sends from / receives into */
  size_t len;
  void *mh;           /* ptr's registration on the bulk comm */
  void *req;          /* the net's request */
  void *ev;           /* CUDA event after this slot's copy (created once, reused) */
  double t_copy;      /* when that copy was queued (strand_now_s): its wait is bounded */
  char *bounce;       /* staging for GPU memory or discarded bytes, allocated at first need */
  void *bounce_mh;
  bool bounce_pinned;
  /* target side: where the bytes go once in, and what completes with them */
  char *dst;
  bool dst_cuda, last;
  uint64_t seq;
  strand_result_t status; /* the op's error (bytes discarded), or success */
  bool signal;
  uint32_t sig_win, sig_op;
  uint64_t sig_off, sig_val;
} gp_bslot_t;

typedef struct {
  void *send, *recv;     /* the control comms to / from the peer */
  void *bsend, *brecv;   /* the bulk comms to / from the peer */
  gp_bslot_t bs[GP_BULK_SLOTS], br[GP_BULK_SLOTS]; /* rings: outgoing / incoming bulk pieces */
  int bs_head, bs_n, br_head, br_n;
  void *send_mh, *recv_mh;
  char *sbuf, *rbuf;     /* GP_SEND_SLOTS / GP_RECV_SLOTS slots of GP_SLOT_BYTES */
  void *sreq[GP_SEND_SLOTS];   /* posted sends; NULL: slot free (unless it is `spend`) */
  int spend;             /* slot holding an encoded message the net did not take yet, or -1 */
  size_t spend_len;
  void *rreq[GP_RECV_SLOTS];
  int rhead, nposted;    /* receives are posted in ring order from rhead; they match in that order */
  gp_req_t *out_head, *out_tail;   /* our ops with fragments still to send, issue order */
  gp_item_t *item_head, *item_tail; /* acks / replies to send (after any op fragment under way) */
  gp_req_t *ops_head, *ops_tail;    /* our ops sent or sending, not yet acked, in seq order */
  uint64_t next_seq;     /* last seq handed out */
  uint64_t done_seq;     /* every op <= done_seq is complete */
  strand_result_t dead;  /* non-zero: the peer's comms failed; everything to it fails */
  bool closed;           /* the peer said BYE: its comms are no longer driven */
  uint64_t rx_bad_seq;   /* incoming op being dropped (bounds error on its first fragment) */
  strand_result_t rx_bad;
  bool item_turn;        /* fairness: alternate our fragments with acks / replies we owe */
  bool rheld;            /* the receive at rhead is complete but waits for bulk pieces ahead of it */
  int rheld_size;
  uint64_t ack_owed;     /* success ack not sent yet (rides on the next message to the peer) */
  double ack_owed_since;
} gp_peer_t;

typedef struct gp_comm {
  uint32_t magic;
  pthread_mutex_t lock; /* one per collComm: NCCL registers from another thread than its proxy */
  int nranks, rank, dev;
  const strand_net_t *net;
  strand_mesh_t mesh;
  gp_peer_t *peers;     /* [nranks]; peers[rank] unused */
  gp_mr_t **wins;       /* by id; NULL once deregistered */
  uint32_t nwins, capwins;
  gp_req_t *all;        /* every live request (freed at closeColl) */
  struct gp_rctx *rctxs;
  strand_result_t last_error; /* sticky, for queryLastError */
  void *cu_win_ctx;           /* the GPU windows' context (one per comm: NCCL's GPU) */
  void *cu_ctx, *cu_stream;   /* the context the comm's GPU work runs in (the windows' or one of
                                 Strand's own, STRAND_GIN_CUDA_CONTEXT) and its stream (gp_cuda.c) */
  bool cu_warned;             /* a slow GPU wait was reported (once per comm) */
} gp_comm_t;

typedef struct gp_rctx {
  uint32_t magic;
  gp_comm_t *comm;
  int ncontexts;
  struct gp_rctx *next; /* the comm's contexts: closeColl frees those NCCL did not destroy */
} gp_rctx_t;

/* The bound net table, or NULL (gp_plugin.c). */
const strand_net_t *gp_net(void);
/* Live handles, to refuse stale or foreign ones without reading them (gp_plugin.c). */
extern strand_handle_set_t gp_live_comms, gp_live_rctx, gp_live_mrs, gp_live_reqs;
/* The listenComm if live. */
gp_listen_t *gp_listen_get(void *listenComm);
/* Frees the contexts still open on a comm being closed. */
void gp_rctx_free_all(gp_comm_t *c);
/* The context if live and its comm too (WARN naming `call` otherwise). */
gp_rctx_t *gp_rctx_get(void *rmaCtx, const char *call);

/* gp_conn.c */
strand_result_t gp_connect(void *ctx, void *handles[], int nranks, int rank, void *listenComm, void **collComm);
strand_result_t gp_close_coll(void *collComm);
/* The collComm if live (WARN naming `call` otherwise). */
gp_comm_t *gp_comm_get(void *collComm, const char *call);

/* gp_mr.c */
strand_result_t gp_reg_mr_sym(void *collComm, void *data, size_t size, int type, uint64_t mrFlags, void **mhandle);
strand_result_t gp_reg_mr_sym_dmabuf(void *collComm, void *data, size_t size, int type, uint64_t offset,
                                     int fd, uint64_t mrFlags, void **mhandle);
strand_result_t gp_dereg_mr_sym(void *collComm, void *mhandle);
/* Window `id` of c, or NULL (deregistered or never registered). Under c->lock. */
gp_mr_t *gp_win(gp_comm_t *c, uint32_t id);
/* The mhandle if it is a live window of c. */
gp_mr_t *gp_mr_get(gp_comm_t *c, void *mhandle);
void gp_mr_free_all(gp_comm_t *c);

/* gp_engine.c */
/* Everything to and from j fails from now on (a net error, or the stream out of step). */
void gp_peer_fail(gp_comm_t *c, int j, strand_result_t rc, const char *what);
/* Drives every peer of c once: completes sends, applies what arrived, sends what is queued. */
void gp_progress(gp_comm_t *c);
/* Posts every receive slot of every peer (connect). */
void gp_post_recvs(gp_comm_t *c);
/* Queues a remote op (PUT or GET) to its peer: seq, ops FIFO, outgoing queue. */
void gp_engine_issue(gp_comm_t *c, gp_req_t *r);
/* closeColl: tells every live peer we are closing (bounded, best effort). */
void gp_say_bye(gp_comm_t *c);
/* Frees every request and queued item of c (closeColl). */
void gp_xfer_free_all(gp_comm_t *c);
/* Checks [off, off+len) against a window. */
bool gp_in_range(const gp_mr_t *w, uint64_t off, uint64_t len);
/* Checks a signal word: window live, 8-byte aligned, in range, known op. NULL when fine, else why. */
const char *gp_signal_bad(const gp_mr_t *w, uint64_t off, uint32_t op);
/* Request bookkeeping. */
gp_req_t *gp_req_new(gp_comm_t *c, int kind, int peer);
void gp_req_free(gp_comm_t *c, gp_req_t *r);
void gp_req_finish(gp_req_t *r, strand_result_t status);

/* gp_bulk.c */
/* Whether op r moves on the bulk comm. */
bool gp_bulk_op(const gp_req_t *r);
/* Source: puts the next piece of bulk op r into the free slot (the caller checked bs_n <
 * GP_BULK_SLOTS) and fills h (GP_F_BULK, off, bulk = the piece's size, no payload). */
strand_result_t gp_bulk_send_take(gp_comm_t *c, gp_peer_t *p, gp_req_t *r, gp_hdr_t *h);
/* Target: whether another announced piece can be taken now. */
bool gp_bulk_recv_room(const gp_peer_t *p);
/* Target: a bulk PUT fragment is applied: its receive goes into the ring. status != success: the
 * op was refused; its bytes are received and dropped. */
strand_result_t gp_bulk_recv_take(gp_comm_t *c, int j, const gp_hdr_t *h, strand_result_t status);
/* Drives both rings of peer j: copies, posts in ring order, completions; each incoming op whose
 * last piece is in goes to gp_bulk_op_done. */
strand_result_t gp_bulk_progress(gp_comm_t *c, int j, const char **what);
/* gp_engine.c: an incoming bulk op's last piece is in the window (or dropped): signal and ack. */
void gp_bulk_op_done(gp_comm_t *c, int j, const gp_bslot_t *s);
/* Registers host window m on every peer's bulk comms (regMrSym). */
strand_result_t gp_bulk_reg(gp_comm_t *c, gp_mr_t *m);
/* deregMrSym: waits (bounded) for the pieces still reading or writing m, then drops the net's
 * registrations; a peer whose pieces do not finish in time fails and loses its bulk comms. */
void gp_bulk_dereg(gp_comm_t *c, gp_mr_t *m);
/* Closes peer j's bulk comms, dropping their registrations and pieces. */
void gp_bulk_close_peer(gp_comm_t *c, int j);
/* closeColl, before the comms close: every registration on the bulk comms; after: the bounce
 * buffers and events. */
void gp_bulk_release(gp_comm_t *c);
void gp_bulk_free(gp_comm_t *c);

/* gp_cuda.c */
bool gp_cuda_available(void);
/* Marks window m (registered as GPU memory) as such, after checking that it is device memory;
 * creates the comm's copy stream with the first one. WARNs naming `call` on failure. */
strand_result_t gp_cuda_attach(gp_comm_t *c, gp_mr_t *m, const char *call);
/* Waits for and destroys the comm's copy stream (closeColl). */
void gp_cuda_detach(gp_comm_t *c);
/* n bytes src -> dst, either side host or GPU memory; complete when it returns. */
strand_result_t gp_copy(gp_comm_t *c, void *dst, bool dst_cuda, const void *src, bool src_cuda, size_t n);
/* The same, asynchronous: queued on the comm's stream, *ev (created on first use) recorded after. */
strand_result_t gp_copy_async(gp_comm_t *c, void *dst, bool dst_cuda, const void *src, bool src_cuda, size_t n,
                              void **ev);
/* Whether the copy behind ev, queued at `since` (strand_now_s), is done (*rc: its error, if it
 * failed; a copy past the bounded wait of gp_cuda.c counts as failed). */
bool gp_event_done(gp_comm_t *c, void *ev, double since, strand_result_t *rc);
void gp_event_destroy(gp_comm_t *c, void *ev);
/* Host staging: pinned (page-locked through CUDA) once the comm has GPU windows, else plain. */
void *gp_host_alloc(gp_comm_t *c, size_t n, bool *pinned);
void gp_host_free(void *p, bool pinned);
/* The signal's effect on its word, ordered after everything written to the comm's windows
 * before it (host: a release atomic; GPU: an atomic add on the copy stream). */
strand_result_t gp_signal(gp_comm_t *c, gp_mr_t *w, uint64_t off, uint32_t op, uint64_t value);
/* A put's fragment from the host (n bytes; w may be NULL where n is 0) into window w at off, then
 * its signal on sw (NULL: none), complete when it returns. Where both are GPU memory they are
 * queued together and waited for once: the stream orders the add after the bytes, one GPU round
 * trip instead of two. */
strand_result_t gp_put_signal(gp_comm_t *c, gp_mr_t *w, uint64_t off, const void *src, size_t n, gp_mr_t *sw,
                              uint64_t sig_off, uint32_t op, uint64_t value);

/* gp_xfer.c */
strand_result_t gp_iput(void *rmaCtx, int context, uint64_t srcOff, void *srcMh, size_t size, uint64_t dstOff,
                        void *dstMh, uint32_t rank, void **request);
strand_result_t gp_iput_signal(void *rmaCtx, int context, uint64_t srcOff, void *srcMh, size_t size,
                               uint64_t dstOff, void *dstMh, uint32_t rank, uint64_t signalOff, void *signalMh,
                               uint64_t signalValue, uint32_t signalOp, bool isStrongSignal, void **request);
strand_result_t gp_iget(void *rmaCtx, int context, uint64_t remoteOff, void *remoteMh, size_t size,
                        uint64_t localOff, void *localMh, uint32_t rank, void **request);
strand_result_t gp_iflush(void *rmaCtx, int context, void *mhandle, uint32_t rank, void **request);
strand_result_t gp_test(void *collComm, void *request, int *done);
strand_result_t gp_rma_progress(void *rmaCtx);
strand_result_t gp_query_last_error(void *rmaCtx, bool *hasError);

#endif
