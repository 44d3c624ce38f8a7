/* strand-socket — state shared by the plugin's source files.
 *
 * Shape of one NCCL connection (a sendComm on one side, a recvComm on the other):
 *   - one control stream, driven only by the proxy thread from isend/irecv/test. It carries the
 *     receiver's "clear to send" (CTS) for every posted receive, the sender's per-message header,
 *     and small messages inline after that header (latency: no thread hand-off, except that with
 *     STRAND_SOCKET_HANDOFF a worker that is already spinning makes the small writes, so the proxy
 *     does not wait in the loopback sendmsg: sk_handoff.c);
 *   - nstreams data streams carrying the chunks of large messages. With worker threads
 *     (nthreads > 0) each data stream belongs to one epoll worker of a process-wide pool; with
 *     nthreads == 0 the proxy thread moves the chunks itself from test() (small machines, where a
 *     spinning proxy thread and busy workers would fight for the same cores).
 *
 * Receiver-driven matching: a send is matched to a posted receive by the CTS the receiver sent, so
 * the sender knows where (slot, index) and how much (posted size) before it writes a byte. That
 * gives grouped receives with tags, and lets both sides report a send larger than the receive.
 * Data chunks carry (slot, sequence, index, offset) so a receiving worker copies straight into the
 * posted buffer. The wire formats themselves are in sk_wire.h.
 *
 * Files, from the top down; a file calls only files below it (lower layers never name callers):
 *   sk_plugin.c   table, init/finalize, devices, getProperties
 *   sk_tuner.c    the NCCL tuner in this library (channels per collective size)
 *   sk_conn.c     listen / connect / accept / close            sk_mr.c   regMr / deregMr
 *   sk_xfer.c     isend / irecv / test / iflush, control stream, chunk scheduler
 *   sk_dev.c      interface discovery, speed / NUMA, worker start (global set-up and teardown)
 *   sk_worker.c   epoll worker threads
 *   sk_handoff.c  the control-stream hand-off ring: small writes the proxy leaves to a worker
 *   sk_zerocopy.c MSG_ZEROCOPY: SO_ZEROCOPY and completion notifications
 *   sk_stream.c   moving chunks over one data stream; comm errors
 *   sk_unpack.c   unpack mode: receives land in a GPU-visible bounce arena, NCCL's kernel gathers
 *   sk_config.c   knobs, and the plugin-wide state the data path reads (devices, configuration)
 */
#ifndef STRAND_NET_SOCKET_SK_H
#define STRAND_NET_SOCKET_SK_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "strand/plugin.h"
#include "strand/pool.h"
#include "strand/socket_addr.h"
#include "strand/socket_conn.h"
#include "strand/tuner_bands.h"

#include "sk_wire.h"

#define SK_PLUGIN_NAME "strand-socket"

#define SK_MAX_DEVS STRAND_NETIF_MAX
#define SK_MAX_RECVS 8                                  /* maxRecvs reported */
#define SK_RECV_SLOTS STRAND_NET_MAX_REQUESTS           /* posted receives per recvComm */
#define SK_SEND_REQS (STRAND_NET_MAX_REQUESTS * SK_MAX_RECVS) /* isends in flight per sendComm */
#define SK_MAX_STREAMS 32                               /* data streams per connection */
#define SK_RING 64                                      /* chunk queue depth per data stream */
#define SK_MAX_CHUNK (1u << 20)                         /* largest chunk handed to one stream */
#define SK_MAX_MSG ((size_t)INT32_MAX)                  /* test() reports sizes as int */
/* Zero-copy ids one stream may have outstanding (sent, not yet released by the kernel). Bounds
 * the completion bitmap; beyond it sends copy (the kernel's optmem limit usually bites first). */
#define SK_ZC_WINDOW 1024
/* Eager small messages (sk_xfer.c): messages the receiver may hold unmatched at once (each a
 * malloc'd copy of at most eager_max bytes), i.e. the credits it grants; returned in batches of
 * half this. The largest eager message is bounded so that one always fits the control buffer. */
#define SK_EAGER_CREDITS 64
#define SK_EAGER_MAX_LIMIT 32768
/* Size ranges STRAND_SOCKET_TUNER_ALLGATHER_RING may list. */
#define SK_TUNER_AG_RING_RANGES 4
/* Consecutive small messages after which the receiver stops announcing receives (no CTS). */
#define SK_EAGER_QUIET_AFTER 4
/* Control-stream hand-off (sk_handoff.c): ring bytes per connection, the largest control write
 * handed to a worker (header + payload; larger ones the proxy writes itself), and how many workers
 * of the pool take control rings (each spins for a while after its last control write, so the
 * number of spinning threads per process stays small whatever the channel count). */
#define SK_HANDOFF_RING 65536
#define SK_HANDOFF_MAX 16448
#define SK_HANDOFF_WORKERS 2

/* ---------------------------------------------------------------------------------------------
 * Configuration, devices, contexts
 * ------------------------------------------------------------------------------------------- */
/* The tuner's policy: the SDK's size bands (strand/tuner_bands.h) from STRAND_SOCKET_TUNER_CHANNELS,
 * and strand-socket's own all-gather rule. */
typedef struct {
  strand_tuner_bands_t bands;
  /* STRAND_SOCKET_TUNER_ALLGATHER_RING: an all-gather whose byte count (NCCL's nBytes for the tuner: the
   * whole output, nRanks x one rank's share) lies in one of the ranges runs as ring when NCCL picked PAT and offers ring; no ranges
   * = never. Ranges are increasing and do not overlap. */
  int nag_ring;
  struct {
    uint64_t min, max;
  } ag_ring[SK_TUNER_AG_RING_RANGES];
} sk_tuner_policy_t;

typedef struct {
  int nthreads;            /* worker threads in the process; 0 = the proxy thread moves data */
  int nstreams;            /* data streams per connection */
  size_t inline_max;       /* messages up to this size ride on the control stream */
  size_t eager_max;        /* STRAND_SOCKET_EAGER_BYTES: messages up to this size may be sent
                            * without a CTS (0 = never) */
  size_t min_chunk;        /* smallest chunk a message is cut into */
  int sndbuf, rcvbuf;      /* SO_SNDBUF / SO_RCVBUF, <= 0 = OS default */
  int timeout_ms;          /* STRAND_SOCKET_PEER_TIMEOUT_S: TCP_USER_TIMEOUT and keepalive bound
                            * for a silent or unreachable peer (link flaps shorter are ridden) */
  int connect_timeout_ms;  /* connect retries (refused, unreachable) give up after this */
  bool numa_pin;           /* pin workers to the NIC's NUMA node */
  bool yield;              /* sched_yield() in test() while a request is not done */
  size_t zc_threshold;     /* MSG_ZEROCOPY for data chunks of at least this size; 0 = never */
  int zc_copied_limit;     /* consecutive "copied anyway" notifications before a stream stops
                            * asking for MSG_ZEROCOPY; 0 = never stop (tests, measurements) */
  const char *nthreads_src, *nstreams_src; /* how the value was chosen, for the INFO line */
  bool unpack;             /* STRAND_SOCKET_UNPACK: report NCCL_NET_DEVICE_UNPACK (sk_unpack.c) */
  size_t unpack_arena;     /* bounce arena bytes per GPU per process */
  size_t unpack_record;    /* bytes per unpack record (multiple of 16) */
  bool handoff;            /* STRAND_SOCKET_HANDOFF: small control writes go to a spinning worker */
  int handoff_spin_us;     /* STRAND_SOCKET_HANDOFF_SPIN_US: how long a worker spins after its last
                            * control write before it sleeps */
  size_t handoff_min;      /* STRAND_SOCKET_HANDOFF_MIN_BYTES: smaller control writes stay with
                            * the proxy (0 = every write up to SK_HANDOFF_MAX is handed over) */
  const char *handoff_src; /* how handoff was chosen, for the INFO line */
  bool send_write_test;    /* STRAND_SOCKET_SEND_WRITE=test: the control bytes of a small send
                            * started in isend wait in the comm's queue for the next test() or
                            * isend of that comm (sk_xfer.c ctrl_defer) */
  bool tuner_enabled;      /* STRAND_SOCKET_TUNER: the tuner may change NCCL's channel counts */
  sk_tuner_policy_t tuner_policy; /* STRAND_SOCKET_TUNER_CHANNELS, parsed */
} sk_config_t;

typedef struct {
  strand_netif_t netif;
  char *pci_path;   /* NULL for virtual interfaces */
  int speed_mbps;
  bool speed_known;
  int numa_node;
} sk_dev_t;

typedef struct {
  uint64_t comm_id;
  int traffic_class; /* STRAND_NET_TRAFFIC_CLASS_UNDEF or 0..255 */
} sk_ctx_t;

/* ---------------------------------------------------------------------------------------------
 * Requests, comms, streams
 * ------------------------------------------------------------------------------------------- */
enum { SK_REQ_SEND = 0x53454e44, SK_REQ_RECV = 0x52454356 };
enum { SK_COMM_SEND = 1, SK_COMM_RECV = 2 };

struct sk_comm;
struct sk_worker;

typedef struct sk_send_req {
  uint32_t kind; /* SK_REQ_SEND: test() tells requests apart by the first word */
  struct sk_comm *comm;
  char *data;
  size_t size;
  size_t next_off;             /* proxy: bytes already cut into chunks */
  _Atomic size_t bytes_done;   /* bytes handed to the kernel (workers or proxy) */
  uint32_t seq;
  uint8_t slot, idx;
  int32_t tag;
  bool waiting;      /* accepted, not started yet: no receive known for it (sk_comm_t.wait_head) */
  uint64_t ctrl_end; /* done only once tx_written reaches this: header (+ inline payload) left */
  struct sk_send_req *next_pending; /* proxy: FIFO of requests not fully chunked */
  struct sk_send_req *next_waiting; /* FIFO of waiting requests */
  void *prof; /* profiler event of this send (strand/profiler.h); NULL: none */
} sk_send_req_t;

typedef struct {
  char *data;
  size_t posted;
  size_t size;               /* proxy: from the sender's header */
  bool size_known;
  _Atomic size_t bytes_done; /* payload bytes landed */
  int32_t tag;
  bool taken;                /* matched to a message (eager, SEND header or ERR) */
} sk_recv_entry_t;

typedef struct sk_recv_slot {
  uint32_t kind; /* SK_REQ_RECV */
  struct sk_comm *comm;
  _Atomic uint32_t active_seq; /* seq + 1 while posted; 0 when free (workers check it) */
  uint32_t seq;
  int n;
  int failed;                /* an ERR message named this receive */
  int nlarge;                /* entries whose payload may come over the data streams */
  int ntaken;                /* entries matched to a message */
  bool announced;            /* a CTS for it was written */
  uint64_t unpack_seq;       /* unpack mode: this receive's ring sequence number */
  sk_recv_entry_t e[SK_MAX_RECVS];
  void *prof[SK_MAX_RECVS]; /* profiler event of each receive; NULL: none */
} sk_recv_slot_t;

typedef struct {
  sk_send_req_t *req;
  char *data;
  uint32_t len;
  /* Released (its request may complete, the slot may be reused) only once every zero-copy id
   * below this has completed: the kernel reads the header and payload until then. */
  uint32_t zc_need;
  sk_chunk_hdr_t hdr;
} sk_chunk_t;

typedef struct sk_stream {
  int fd;
  int index;
  struct sk_comm *comm;
  bool is_send;
  struct sk_worker *worker; /* NULL: progressed by the proxy thread */
  /* send side: single-producer (proxy) single-consumer (mover) ring. Chunks [released, tail)
   * are in the kernel but may still be referenced by it (zero-copy); [tail, head) are to send. */
  sk_chunk_t ring[SK_RING];
  _Atomic uint32_t head, tail, released;
  _Atomic uint64_t queued;  /* bytes queued and not yet sent: the least-loaded choice */
  size_t cur_sent;          /* bytes of ring[tail] (header + payload) already sent */
  /* zero-copy send state, mover only (sk_stream.c, sk_zerocopy.c). The kernel numbers every
   * successful MSG_ZEROCOPY sendmsg on a socket 0, 1, 2, ... and reports completed ranges of those
   * ids on the socket's error queue, not necessarily in order. */
  size_t zc_min;            /* chunks of at least this size go zero-copy; 0 = never */
  bool zc_errq;             /* worker: EPOLLERR seen, the error queue may hold notifications */
  uint32_t zc_next;         /* id the next successful MSG_ZEROCOPY sendmsg gets */
  uint32_t zc_done;         /* every id below this has completed */
  uint64_t zc_bits[SK_ZC_WINDOW / 64]; /* completed ids >= zc_done, indexed by id % window */
  int zc_copied;            /* consecutive notifications saying the kernel copied anyway */
  /* receive side */
  sk_chunk_hdr_t rhdr, rnext;
  size_t rhdr_got, rdata_got;
  char *rdst;
  _Atomic size_t *rcounter;
  /* worker-only readiness (edge-triggered epoll) */
  bool readable, writable;
  _Atomic bool eof;      /* orderly EOF at a chunk boundary */
} sk_stream_t;

/* Control bytes the proxy queued for a worker to write (sk_handoff.c): a single-producer (proxy)
 * single-consumer (worker) byte ring. head and tail count bytes ever queued / ever written, so
 * head == tail means the worker holds nothing of this connection and the proxy may write the
 * socket itself. Only one thread writes the control socket at any time: the worker while the ring
 * holds bytes, the proxy while it is empty (or once the connection is detached from workers). */
typedef struct sk_handoff {
  _Alignas(64) _Atomic uint64_t head; /* proxy */
  _Alignas(64) _Atomic uint64_t tail; /* worker (the proxy after detach) */
  uint64_t msgs;                      /* proxy: writes handed off, for the INFO line at close */
  bool failed; /* writer: a write failed (comm error recorded); nothing more is written. Other
                * errors of the comm do not stop the ring: it may carry the report of one */
  uint8_t buf[SK_HANDOFF_RING];
} sk_handoff_t;

typedef struct sk_comm {
  int type; /* SK_COMM_SEND / SK_COMM_RECV */
  int dev;
  int ctrl_fd;
  int nstreams;
  sk_stream_t *streams[SK_MAX_STREAMS];
  char peer[STRAND_SOCKADDR_STRLEN];
  char dev_name[IF_NAMESIZE];
  bool use_workers;
  /* errors found by workers: errmsg is written before error is stored (release) */
  _Atomic int error;
  char errmsg[320];
  bool error_reported;
  bool peer_closed; /* orderly EOF on the control stream */
  /* control stream, proxy thread only */
  uint8_t *tx;
  size_t tx_len, tx_off, tx_cap;
  /* control bytes ever accepted / written by the proxy itself (the hand-off ring's tail counts
   * those a worker wrote; sk_xfer.c ctrl_written adds both) */
  uint64_t tx_accepted, tx_written;
  sk_handoff_t *handoff;           /* NULL: the proxy writes every control byte itself */
  size_t handoff_min;              /* control writes below this stay with the proxy */
  bool defer_sends;                /* send side, STRAND_SOCKET_SEND_WRITE=test: small sends
                                    * started in isend are queued in tx, written by the next
                                    * test() or isend (sk_xfer.c ctrl_defer) */
  struct sk_worker *ctrl_worker;   /* the worker that drains handoff (set by sk_workers_attach) */
  uint8_t *rx;
  size_t rx_len, rx_cap;
  size_t inline_max;
  size_t min_chunk;
  /* send side */
  strand_pool_t reqs;
  struct {
    uint32_t seq;
    uint8_t slot, n, nmatched;
    uint8_t matched[SK_MAX_RECVS];
    uint64_t size[SK_MAX_RECVS];
    int32_t tag[SK_MAX_RECVS];
  } cts[SK_RECV_SLOTS];
  uint32_t cts_head, cts_tail; /* FIFO of posted receives not yet fully matched */
  sk_send_req_t *pend_head, *pend_tail;
  sk_send_req_t *wait_head, *wait_tail; /* sends accepted before a receive was known for them */
  /* eager path, both sides (sk_xfer.c): msg_count numbers the sender's messages that take a
   * receive entry; eager_max is this side's limit, peer_eager_max the other side's */
  uint32_t msg_count;
  size_t eager_max, peer_eager_max;
  uint64_t eager_total, eager_early, cts_written, cts_asked; /* for the INFO line at close */
  /* eager path, send side: credits granted in all (from CREDIT), eager messages sent in all,
   * and the eager messages the receiver may not have matched yet to a receive this side knows */
  uint32_t credits, eager_sent;
  bool need_cts_sent;
  int nunplaced;
  struct {
    uint32_t index;
    int32_t tag;
  } unplaced[SK_EAGER_CREDITS];
  /* receive side */
  strand_pool_t slots;
  uint32_t next_seq;
  /* eager path, receive side: posted receives with an unmatched entry, in post order (slot
   * indices); eager messages that arrived before a receive for them; credit accounting */
  uint8_t open_order[SK_RECV_SLOTS];
  int nopen;
  struct {
    int32_t tag;
    uint64_t size;
    uint8_t *data;
  } unexp[SK_EAGER_CREDITS];
  int nunexp;
  uint32_t eager_consumed, credits_granted; /* credits_granted: what the last CREDIT said */
  bool announce;                /* write a CTS for every posted receive (the CTS path) */
  bool announce_now;            /* NEED_CTS read: announce and return credits after parsing */
  int small_run;                /* consecutive small messages read */
  int large_posted; /* sum of nlarge over posted receives: 0 = data streams need no polling */
  struct sk_unpack *unpack; /* unpack-mode state; NULL: host mode (sk_unpack.c) */
} sk_comm_t;

/* ---------------------------------------------------------------------------------------------
 * sk_config.c (bottom): knobs and the plugin-wide state read by the data path
 * ------------------------------------------------------------------------------------------- */
/* Registers and reads the knobs into the plugin-wide configuration, sizing the automatic ones for
 * the link speed (< 0: unknown) and core count. */
strand_result_t sk_config_load(int link_speed_mbps, int ncpus);
/* Register the plugin's parameter table (idempotent). sk_config_load does it; the tuner, which
 * NCCL may initialise although the net side never was, calls it before reading its knobs. */
strand_result_t sk_params_register(void);
/* Read STRAND_SOCKET_TUNER / _TUNER_CHANNELS / _TUNER_ALLGATHER_RING. A bad value is a WARN naming it and
 * STRAND_INVALID_USAGE, as for every other knob. */
strand_result_t sk_tuner_config_read(bool *enabled, sk_tuner_policy_t *policy);

const sk_config_t *sk_config(void);
const sk_dev_t *sk_device(int dev);
int sk_device_count(void);
/* Takes the devices found by sk_dev.c, with ownership of their pci_path; release frees them. */
void sk_devices_set(const sk_dev_t *devs, int ndev);
void sk_devices_release(void);
/* Connections open in the process: the last finalize leaves the global state alone while any is. */
void sk_comm_count_add(int delta);
int sk_comm_count(void);

/* ---------------------------------------------------------------------------------------------
 * sk_stream.c: stream movers shared by workers and the proxy-driven mode
 * ------------------------------------------------------------------------------------------- */
/* They return false after recording a comm error; *progress tells whether bytes moved;
 * *blocked that the socket would block. */
bool sk_stream_send(sk_stream_t *s, bool *progress, bool *blocked);
bool sk_stream_recv(sk_stream_t *s, bool *progress, bool *blocked);
void sk_stream_release(sk_stream_t *s); /* hands back chunks the kernel no longer reads */
static inline bool sk_stream_zc_pending(const sk_stream_t *s) { return s->zc_next != s->zc_done; }
void sk_comm_set_error(sk_comm_t *c, strand_result_t rc, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* STRAND_REMOTE_ERROR for errno values that mean the peer is gone or unreachable (reset, broken
 * pipe, TCP_USER_TIMEOUT / keepalive expiry, no route), STRAND_SYSTEM_ERROR otherwise. */
strand_result_t sk_errno_result(int err);
/* What to check for that errno ("" when nothing specific), appended to comm error messages. */
const char *sk_errno_hint(int err);

/* ---------------------------------------------------------------------------------------------
 * sk_handoff.c: the control-stream hand-off ring (proxy puts, worker writes)
 * ------------------------------------------------------------------------------------------- */
/* Queues header + payload when the ring has room for both (false: no room, nothing queued). */
bool sk_handoff_put(sk_handoff_t *h, const void *hdr, size_t hl, const void *payload, size_t pl);
static inline bool sk_handoff_pending(sk_handoff_t *h) {
  return h != NULL && atomic_load_explicit(&h->head, memory_order_acquire) !=
                          atomic_load_explicit(&h->tail, memory_order_acquire);
}
/* Writes what the ring holds to the comm's control socket (the ring's one writer). Returns true
 * when bytes moved; *blocked: the socket would block. A failed write records a comm error. */
bool sk_handoff_write(sk_comm_t *c, bool *blocked);

/* ---------------------------------------------------------------------------------------------
 * sk_zerocopy.c: asks the kernel for SO_ZEROCOPY on a send stream (set-up), and reads the stream's
 * completion notifications, releasing the chunks they cover (mover; false after a comm error)
 * ------------------------------------------------------------------------------------------- */
void sk_stream_zc_enable(sk_stream_t *s, size_t threshold);
bool sk_stream_zc_reap(sk_stream_t *s);

/* ---------------------------------------------------------------------------------------------
 * sk_worker.c: the process-wide pool of epoll workers
 * ------------------------------------------------------------------------------------------- */
strand_result_t sk_workers_start(int nthreads, int numa_node);
void sk_workers_stop(void);
int sk_workers_count(void);
/* Hands the comm's data streams to workers (round-robin from a rotating start). */
strand_result_t sk_workers_attach(sk_comm_t *comm);
/* Takes them back; on return no worker touches the comm's streams any more. */
void sk_workers_detach(sk_comm_t *comm);
/* Wakes the worker of a stream that just got chunks, if it is asleep. */
void sk_worker_kick(struct sk_worker *w);
/* Whether the worker is awake with no data to move (spinning after a control write): a control
 * write handed to it now is picked up within a fraction of a microsecond. */
bool sk_worker_idle_spinning(struct sk_worker *w);
/* The proxy queued control bytes for w (ring published, then a full fence here): wakes it if it
 * went to sleep meanwhile. */
void sk_worker_handoff_queued(struct sk_worker *w);
/* The proxy wrote a small control message itself: asks w to spin for the next ones (wakes it if
 * it sleeps; costs nothing when it is already awake). */
void sk_worker_want_spin(struct sk_worker *w);

/* ---------------------------------------------------------------------------------------------
 * sk_dev.c: global set-up (interfaces, speed / NUMA, configuration, workers) and its reverse;
 * run by the plugin lifetime (strand/lifetime.h)
 * ------------------------------------------------------------------------------------------- */
strand_result_t sk_dev_setup(void);
void sk_dev_teardown(void);

/* ---------------------------------------------------------------------------------------------
 * sk_unpack.c: unpack mode. Called by sk_plugin.c (props), sk_conn.c (accept / close) and
 * sk_xfer.c (irecv / test); calls only device_unpack, sk_config.c and sk_mr.c's type lookup.
 * ------------------------------------------------------------------------------------------- */
bool sk_unpack_mode(void);
void sk_unpack_props(strand_props_t *p);
/* Sets up the comm's ring and fills *recvDevComm when unpack mode is on and NCCL passed a handle
 * (c->unpack stays NULL otherwise: host mode). */
strand_result_t sk_unpack_accept(sk_comm_t *c, strand_dev_handle_t **recvDevComm);
void sk_unpack_close(sk_comm_t *c);
/* irecv: claims the ring slot and the arena run; *landing is where the payload goes (NULL for 0
 * bytes); *retry: arena full, return a NULL request. */
strand_result_t sk_unpack_post(sk_comm_t *c, sk_recv_slot_t *s, int n, const size_t *sizes,
                               void **mhandles, char **landing, bool *retry);
/* test() found the receive complete with `size` bytes: publish its records. */
strand_result_t sk_unpack_complete(sk_comm_t *c, sk_recv_slot_t *s, size_t size);
strand_result_t sk_irecv_consumed(void *recvComm, int n, void *request);
strand_result_t sk_get_device_mr(void *comm, void *mhandle, void **dptr_mhandle);

/* ---------------------------------------------------------------------------------------------
 * sk_xfer.c: the data path, and the data-path state of a comm
 * ------------------------------------------------------------------------------------------- */
strand_result_t sk_isend(void *sendComm, void *data, size_t size, int tag, void *mhandle,
                         void *phandle, void **request);
strand_result_t sk_irecv(void *recvComm, int n, void **data, size_t *sizes, int *tags,
                         void **mhandles, void **phandles, void **request);
strand_result_t sk_iflush(void *recvComm, int n, void **data, int *sizes, void **mhandles,
                          void **request);
strand_result_t sk_test(void *request, int *done, int *sizes);
strand_result_t sk_comm_init_data(sk_comm_t *c);
void sk_comm_free(sk_comm_t *c);
/* Best effort: hand queued control bytes to the kernel before a close (bounded wait). */
void sk_comm_flush_ctrl(sk_comm_t *c, int timeout_ms);

/* ---------------------------------------------------------------------------------------------
 * sk_conn.c: connection set-up and teardown
 * ------------------------------------------------------------------------------------------- */
strand_result_t sk_listen(void *ctx, int dev, void *handle, void **listenComm);
strand_result_t sk_connect(void *ctx, int dev, void *handle, void **sendComm,
                           strand_dev_handle_t **sendDevComm);
strand_result_t sk_accept(void *listenComm, void **recvComm, strand_dev_handle_t **recvDevComm);
strand_result_t sk_close_send(void *sendComm);
strand_result_t sk_close_recv(void *recvComm);
strand_result_t sk_close_listen(void *listenComm);
/* Frees every connect still in progress (plugin teardown): their descriptors are closed. */
void sk_conn_teardown(void);

/* ---------------------------------------------------------------------------------------------
 * sk_mr.c: memory registration
 * ------------------------------------------------------------------------------------------- */
strand_result_t sk_reg_mr(void *comm, void *data, size_t size, int type, void **mhandle);
strand_result_t sk_dereg_mr(void *comm, void *mhandle);
/* NCCL_PTR_* type a live handle was registered with (-1: not a live handle). */
int sk_mr_type(void *mhandle);

#endif
