/* softverbs — a user-space stand-in for libibverbs.so.1 (internal types).
 *
 * The library is built against rdma-core's own <infiniband/verbs.h>, so the header's inline
 * functions (ibv_post_send, ibv_poll_cq, ...) call through context->ops into this code, and the
 * version script gives every exported function the symbol version the Debian binaries ask for.
 * The contexts are NOT "extended" (abi_compat != __VERBS_ABI_IS_EXTENDED): verbs_get_ctx() then
 * returns NULL and the header's inlines fall back to the exported functions (ibv_query_port,
 * ibv_query_device, ...), which is all a plain RC user needs.
 *
 * Transport (sv_transport.c): every open context listens on one TCP port of the chosen interface's
 * IPv4 address; a QP number is (listen port << 8 | index), so the (GID, QPN) pair a peer receives
 * out of band locates the QP. A QP in RTS opens its own TCP connection to the peer's listener and
 * sends its requests there (the requester stream); the peer's progress thread executes them against
 * registered memory (one-sided: nothing is posted by the target for RDMA WRITE/READ) and answers
 * with cumulative ACKs, NAKs and READ responses on the same connection. One TCP stream per
 * direction keeps RC's in-order delivery for free. See README.md for what is and is not emulated. */
#ifndef SV_H
#define SV_H

#include <infiniband/verbs.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/uio.h>

#include "sv_wire.h"

/* The header turns these into inline wrappers/macros; this library defines the real functions. */
#undef ibv_query_port
#undef ibv_reg_mr
#undef ibv_reg_mr_iova

#define SV_EXPORT __attribute__((visibility("default")))

#define SV_MAX_DEVS 8
#define SV_MAX_PORTS 4
#define SV_MAX_SGE 16
#define SV_MAX_INLINE 256
#define SV_MAX_QP_WR 16384
#define SV_MAX_CQE (1 << 20)
#define SV_QPS_PER_LISTENER 256 /* QPN = listen port << 8 | index in that listener's block */
#define SV_MAX_LISTENERS 16     /* a context opens another listener per 256 QPs */
#define SV_QPS_PER_CTX (SV_QPS_PER_LISTENER * SV_MAX_LISTENERS)
#define SV_MAX_MR (1 << 16)
#define SV_MAX_RD_ATOMIC 16
#define SV_GID_TBL_LEN 1   /* index 0 only: the RoCE v2 GID of the interface */

/* ---------------------------------------------------------------- configuration (sv_config.c) */
typedef struct {
  int ndevs, nports;
  char ifname[64];
  struct in_addr ip;        /* the interface's IPv4 address: GID and listen address */
  int rate_gbps;
  uint8_t active_width, active_speed; /* IB encodings matching rate_gbps */
  enum ibv_mtu active_mtu;
  uint32_t drop_ppm, delay_ppm, delay_us, retx_cap_us;
  uint64_t fail_qp_after;
  uint32_t port_down_ms, port_up_ms, fatal_ms;
  char fault_dev[64];
  int fault_port;
  bool trace;
} sv_config_t;

/* Reads and validates every SOFTVERBS_* variable once; returns NULL (and logs why) when one is
 * invalid. */
const sv_config_t *sv_config(void);
void sv_log(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* A request refused because softverbs does not emulate it (not because it is wrong): one line to
 * the file named by STRAND_ENV_REFUSALS when set, so that a test harness (strand-conform) reports
 * the failure it causes as the environment's, not the caller's (docs/conformance.md). */
void sv_report_refusal(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
#define SV_TRACE(...)                                                                              \
  do {                                                                                             \
    if (sv_config() && sv_config()->trace) sv_log(__VA_ARGS__);                                    \
  } while (0)
uint64_t sv_now_ns(void);
/* A uniformly distributed number in [0, 1e6) for the ppm fault knobs; *state (0 = seed it) is
 * the caller's generator state. */
uint32_t sv_rand_ppm(uint64_t *state);

/* ---------------------------------------------------------------- objects */
typedef struct sv_device {
  struct ibv_device dev;
  int index;
  uint64_t guid;
} sv_device_t;

struct sv_qp;
struct sv_conn;

/* What rdma-core promises about async events affiliated with a QP or CQ (ibv_get_async_event(3)):
 * destroying the object waits until every event handed out for it has been acknowledged, and
 * events not yet handed out die with it. Each QP and CQ carries one of these; the context lists
 * the live ones (under async_lock), and each event record in the pipe names its object's serial. */
typedef struct sv_async_obj {
  uint64_t serial;   /* unique per object incarnation (never reused, unlike the address) */
  unsigned reported; /* events ibv_get_async_event handed out for it */
  unsigned acked;    /* of those, acknowledged with ibv_ack_async_event */
  struct sv_async_obj *next;
} sv_async_obj_t;

typedef struct sv_context {
  struct ibv_context ctx; /* first: the library hands out &ctx */
  sv_device_t *dev;
  const sv_config_t *cfg;
  pthread_mutex_t lock; /* QPs, MRs, connections: everything the progress thread touches */
  int async_wr;         /* write end of the async event pipe (ctx.async_fd is the read end) */
  pthread_mutex_t async_lock; /* async_live and every object's reported/acked counts */
  pthread_cond_t async_cond;  /* an acknowledgement arrived */
  sv_async_obj_t *async_live; /* QPs and CQs that may still get events */
  /* progress thread */
  pthread_t thread;
  bool thread_started, stop;
  int epfd, wakefd;
  int listen_fd[SV_MAX_LISTENERS];
  uint16_t listen_port[SV_MAX_LISTENERS];
  int nlisteners;
  struct sv_conn *pending; /* accepted, waiting for the hello */
  struct sv_conn *orphans; /* responder streams of failed QPs, draining until the peer closes */
  struct sv_conn *grave;   /* closed, freed at the top of the next loop (handlers may hold them) */
  uint8_t scratch[65536];  /* sink for payloads that are refused */
  struct sv_qp *qps[SV_QPS_PER_CTX];
  /* memory regions by key index */
  struct sv_mr **mrs;
  uint32_t nmrs_cap;
  uint8_t mr_gen;
  uint32_t ngpu_mrs; /* regions in GPU memory: while 0, no WR is checked for GPU SGEs */
  /* ports and faults */
  enum ibv_port_state port_state[SV_MAX_PORTS + 1];
  uint64_t open_ns, port_down_at, port_up_at, fatal_at;
  bool fatal;
} sv_context_t;

typedef struct sv_pd {
  struct ibv_pd pd;
} sv_pd_t;

typedef struct sv_mr {
  struct ibv_mr mr;
  int access;
  uint32_t index;
  uint64_t iova;  /* where the keys address it: mr.addr, or a dma-buf region's iova */
  void *gpu_ctx;  /* CUDA context of a region in GPU memory (sv_gpu.c); NULL for host memory */
} sv_mr_t;

typedef struct sv_cq {
  struct ibv_cq cq;
  sv_async_obj_t async;
  pthread_mutex_t lock;
  struct ibv_wc *ring;
  uint32_t cap, head, count;
  bool armed, overflowed;
} sv_cq_t;

typedef struct sv_comp_channel {
  struct ibv_comp_channel ch;
  int wr_fd;
} sv_comp_channel_t;

/* One posted send WR, with its local memory resolved at post time (lkeys checked). */
typedef struct {
  uint64_t wr_id;
  enum ibv_wr_opcode op;
  uint32_t imm;  /* network order, as the application gave it */
  uint64_t raddr;
  uint32_t rkey;
  bool signaled;
  uint64_t len;
  uint32_t niov;
  struct iovec iov[SV_MAX_SGE];
  enum ibv_wc_status local_err; /* a bad lkey found at post time: completes with this */
  sv_atomic_args_t atomic;      /* an atomic's operands (its payload on the wire) */
  sv_hdr_t hdr;                 /* its wire header, built when it is transmitted */
  uint8_t inline_buf[SV_MAX_INLINE];
  struct sv_gpu_stage *gpu;     /* GPU SGEs staged through host memory (sv_gpu.c); kept per slot */
} sv_swqe_t;

typedef struct {
  uint64_t wr_id;
  uint64_t len;
  uint32_t niov;
  enum ibv_wc_status local_err;
  struct iovec iov[SV_MAX_SGE];
  struct sv_gpu_stage *gpu;     /* GPU SGEs staged through host memory (sv_gpu.c); kept per slot */
} sv_rwqe_t;

/* Requester connection life (the QP's outbound stream). */
enum sv_req_state { SV_REQ_IDLE, SV_REQ_CONNECTING, SV_REQ_HELLO, SV_REQ_UP, SV_REQ_BACKOFF };

typedef struct sv_qp {
  struct ibv_qp qp;
  sv_async_obj_t async;
  sv_context_t *sctx;
  uint32_t index;
  struct ibv_qp_cap cap;
  bool sq_sig_all;
  /* attributes as last modified */
  struct ibv_qp_attr attr;
  /* send queue: counters increase forever; slot = counter % sq_cap. [sq_head, sq_tx) transmitted
   * and waiting for a response, [sq_tx, sq_tail) not yet transmitted. */
  sv_swqe_t *sq;
  uint32_t sq_cap;
  uint64_t sq_head, sq_tx, sq_tail;
  sv_rwqe_t *rq;
  uint32_t rq_cap;
  uint64_t rq_head, rq_tail;
  /* requester */
  enum sv_req_state req_state;
  struct sv_conn *req;
  struct sockaddr_in peer;
  uint64_t req_deadline;   /* BACKOFF: next connect attempt; drop/delay: next transmit */
  uint64_t req_progress;   /* last forward progress, for the retry-exceeded bound */
  uint32_t tx_retries;     /* consecutive emulated drops of the WR at sq_tx */
  uint64_t rng;            /* fault-injection random state */
  uint32_t rnr_count;
  bool tx_started;         /* the WR at sq_tx has been partly written */
  bool tx_delayed;         /* the WR at sq_tx already served its injected delay */
  uint64_t ops_done;       /* for SOFTVERBS_FAIL_QP_AFTER */
  uint64_t tx_off;         /* bytes of it (header + payload) written */
  uint64_t tx_wait_until;  /* injected delay / retransmission wait of the WR at sq_tx */
  uint32_t backoff_ms;
  /* responder */
  struct sv_conn *resp;
} sv_qp_t;

/* The remote atomics: one 8-byte word at the target, the original value into one local SGE. */
static inline bool sv_wr_is_atomic(enum ibv_wr_opcode op)
{
  return op == IBV_WR_ATOMIC_FETCH_AND_ADD || op == IBV_WR_ATOMIC_CMP_AND_SWP;
}

static inline sv_context_t *sv_ctx(struct ibv_context *c) { return (sv_context_t *)c; }
static inline sv_qp_t *sv_qp(struct ibv_qp *q) { return (sv_qp_t *)q; }
static inline sv_cq_t *sv_cq(struct ibv_cq *c) { return (sv_cq_t *)c; }
static inline sv_mr_t *sv_mr(struct ibv_mr *m) { return (sv_mr_t *)m; }

/* ---------------------------------------------------------------- cross-file interfaces */
/* sv_device.c */
void sv_async_event(sv_context_t *c, enum ibv_event_type type, void *obj);
/* A QP/CQ comes to life (may get events) / is being destroyed: retire drops its pending events
 * and waits until those already handed out are acknowledged (bounded: 60 s, logged at 5 s). */
void sv_async_obj_register(sv_context_t *c, sv_async_obj_t *o);
void sv_async_obj_retire(sv_context_t *c, sv_async_obj_t *o, const char *what);
/* sv_mr.c: key lookup under c->lock; NULL when the key is unknown. */
sv_mr_t *sv_mr_lookup(sv_context_t *c, uint32_t key);
/* Checks that [addr, addr+len) lies in an MR with key `key` on `pd` allowing `access`; 0 or the
 * failure reason (for logs). */
const char *sv_mr_check(sv_context_t *c, struct ibv_pd *pd, uint32_t key, uint64_t addr,
                        uint64_t len, int access);
void sv_mr_release_all(sv_context_t *c);
/* sv_cq.c: append one completion (takes the CQ lock; raises the channel event when armed). */
void sv_cq_push(sv_cq_t *cq, const struct ibv_wc *wc);
/* sv_qp.c */
void sv_qp_complete_send(sv_qp_t *qp, uint64_t seq, enum ibv_wc_status status);
void sv_qp_set_error(sv_qp_t *qp, enum ibv_wc_status head_status);
uint64_t sv_qp_retry_bound_ns(const sv_qp_t *qp);
/* sv_transport.c (all under c->lock unless stated) */
int sv_transport_start(sv_context_t *c);  /* called without the lock */
int sv_transport_add_listener(sv_context_t *c); /* under the lock; 0 or -1 with errno */
void sv_transport_stop(sv_context_t *c);  /* called without the lock */
void sv_transport_wake(sv_context_t *c);
void sv_transport_qp_rts(sv_qp_t *qp);
void sv_transport_qp_close(sv_qp_t *qp);
void sv_transport_recv_posted(sv_qp_t *qp);
void sv_transport_kick(sv_qp_t *qp);      /* after a post: transmit now if the stream is up */
void sv_transport_poll(sv_context_t *c);  /* called without the lock by an idle poll_cq */
/* sv_gpu.c: GPU memory through the CUDA driver loaded at run time (strand/cuda_driver.h). */
typedef struct sv_gpu_stage sv_gpu_stage_t;
bool sv_gpu_usable(void);                          /* a CUDA driver is loaded and initialised */
void *sv_gpu_range_ctx(uint64_t addr, uint64_t len); /* its CUDA context if all device memory */
bool sv_gpu_is_dmabuf(int fd);
int sv_gpu_to_host(void *ctx, void *dst, const void *gpu_src, size_t n);  /* 0 or -1 (logged) */
int sv_gpu_to_device(void *ctx, void *gpu_dst, const void *src, size_t n);
/* Copies inline data (lkey optional) from host or GPU memory; under c->lock. 0 or -1. */
int sv_gpu_copy_in(sv_context_t *c, uint32_t lkey, void *dst, const void *src, size_t n);
void *sv_gpu_bounce(uint8_t **buf, size_t *cap, size_t need); /* grows *buf; NULL: no memory */
/* A WR with SGEs in GPU regions: its iovecs become one host bounce buffer of len bytes, gathered
 * now from the SGEs when `gather` (SEND, WRITE) or scattered to them later with
 * sv_gpu_stage_scatter (RECV, READ). Host-only WRs are left alone. A failed copy or allocation
 * returns the completion status to report. Call only while c->ngpu_mrs > 0. */
enum ibv_wc_status sv_gpu_stage_wr(sv_context_t *c, const struct ibv_sge *sg, int n,
                                   struct iovec *iov, uint32_t *niov, uint64_t len,
                                   sv_gpu_stage_t **stage, bool gather);
bool sv_gpu_stage_active(const sv_gpu_stage_t *s);
void sv_gpu_stage_reset(sv_gpu_stage_t *s); /* a new WR in the slot: host memory until staged */
void sv_gpu_stage_done(sv_gpu_stage_t *s);  /* its WR completed: large bounce buffers go */
int sv_gpu_stage_scatter(const sv_gpu_stage_t *s, uint64_t len);
void sv_gpu_stage_free(sv_gpu_stage_t *s);

#endif
