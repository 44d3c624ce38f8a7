/* strand-ofi — internal types shared by the libfabric plugin's source files.
 *
 * Object model (one process):
 *   ofi_dev     one per libfabric domain ("NIC") of the chosen provider. Opened lazily: fabric,
 *               domain, ONE RDM endpoint, one CQ, one AV. Every comm on that device multiplexes on
 *               that endpoint; the 64-bit tag says which comm (and which message) a packet is for.
 *               A mutex per device serialises every call into the domain (we open it with
 *               FI_THREAD_DOMAIN) and all of our bookkeeping.
 *   ofi_listen  a listen id + nonce published in the 128-byte handle; connect messages that name it
 *               are turned into ready-to-accept recv comms.
 *   ofi_comm    a send or a recv comm: peer address, the receiver-chosen comm id carried in every
 *               data tag, per-NCCL-tag sequence counters, a fixed pool of requests.
 *   ofi_mr      a registration-cache entry, handed to NCCL as the mhandle.
 *   rails       STRAND_OFI_RAILS=N > 1: each device is N independent copies of the above (N
 *               ofi_dev_t "rails" opened from the same fi_info: N endpoints, N provider
 *               connections per peer), each with its own progress thread (ofi_rail.c). One
 *               endpoint progressed by one caller thread caps a device's throughput; N of them
 *               do not. A comm lives entirely on one rail (comm->dev is its rail), so nothing
 *               below ofi_conn.c knows rails exist; NCCL's device d is rail 0 of device d.
 *
 * Layers (each file calls only the ones below it):
 *   ofi_plugin.c                  table, init/finalize, devices, getProperties
 *   ofi_xfer.c  ofi_mr.c          data path; registrations
 *   ofi_conn.c                    listen/connect/accept/close, comm lifetime, control messages
 *   ofi_rail.c                    opening a rail, its progress thread, picking a rail
 *   ofi_progress.c                CQ reading, completion callbacks, the control channel
 *   ofi_dev.c                     provider, discovery, fabric/domain/endpoint/AV
 *   ofi_config.c                  STRAND_OFI_* parameters, clock
 * Wire formats (tags, control messages, the handle) are in ofi_wire.h. */
#ifndef STRAND_NET_OFI_H
#define STRAND_NET_OFI_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_tagged.h>

#include "strand/log.h"
#include "strand/params.h"
#include "strand/plugin.h"
#include "strand/pool.h"
#include "strand/tuner_bands.h"

#include "ofi_wire.h"

#define OFI_PLUGIN_NAME "strand-ofi"

/* ---- limits ---- */
#define OFI_MAX_RECVS 8                     /* maxRecvs advertised: grouped receive size */
#define OFI_SEND_REQS (STRAND_NET_MAX_REQUESTS * OFI_MAX_RECVS) /* 256 isends in flight per comm */
#define OFI_RECV_REQS STRAND_NET_MAX_REQUESTS                    /* 32 irecvs in flight per comm */
#define OFI_CTRL_RECVS 32                   /* control receives kept posted per device */
#define OFI_CTRL_SENDS 256                  /* control sends outstanding per device */
#define OFI_CQ_BATCH 16                     /* entries per fi_cq_read */
#define OFI_CQ_MAX_BATCHES 8                /* bound on CQ reads per progress call */
#define OFI_MAX_RAILS 8                     /* STRAND_OFI_RAILS range: 1..OFI_MAX_RAILS */
#define OFI_TRUNC_RESEND_MS 50              /* spacing of a TRUNC notice's copies (ofi_conn.c) */
#define OFI_TRUNC_SPREAD_MS 300             /* a TRUNC notice is repeated for this long at least */

/* ---- knobs (ofi_config.c: SDK parameter registry, read once at the first init;
 * docs/plugins/ofi.md) ---- */
typedef struct {
  char provider[128];        /* STRAND_OFI_PROVIDER ("" = best RDM provider fi_getinfo offers) */
  char domains[256];         /* STRAND_OFI_DOMAINS  ("" = every non-loopback domain) */
  int hmem;                  /* STRAND_OFI_HMEM: 1 = use FI_HMEM when offered, 0 = host only */
  long probe_ms;             /* STRAND_OFI_PROBE_MS: liveness probe period of a waiting comm */
  long peer_timeout_ms;      /* STRAND_OFI_PEER_TIMEOUT_S: how long a peer may be unreachable */
  long connect_timeout_ms;   /* STRAND_OFI_CONNECT_TIMEOUT_S: how long connect waits for an answer */
  long close_drain_ms;       /* STRAND_OFI_CLOSE_DRAIN_MS: how long close waits for in-flight ops */
  int rails;                 /* STRAND_OFI_RAILS: endpoints (+ progress threads) per device */
  bool rail_threads;         /* STRAND_OFI_RAIL_THREADS: a progress thread per rail (rails > 1) */
  uint64_t rail_quiet_ns;    /* STRAND_OFI_RAIL_QUIET_US: a thread leaves a rail a caller used
                                more recently than this to the caller (0: no such rule) */
  int rail_block;            /* STRAND_OFI_RAIL_BLOCK: consecutive comms a device puts on one
                                rail before moving to the next */
  int speed_mbps;            /* STRAND_OFI_SPEED_MBPS: speed reported to NCCL (0: discovered) */
  char tuner_channels[256];  /* STRAND_OFI_TUNER_CHANNELS: the tuner's size bands ("" = none) */
  strand_tuner_bands_t tuner_bands; /* ... parsed (a bad value fails ofi_params_load) */
  uint64_t tuner_tree_bytes; /* STRAND_OFI_TUNER_TREE_BYTES: an all-reduce of at most this many
                                bytes runs on Tree when NCCL picked Ring and can run Tree (0: off) */
  bool tuner_channels_set;   /* STRAND_OFI_TUNER_CHANNELS came from the environment (not empty) */
  bool tuner_tree_bytes_set; /* STRAND_OFI_TUNER_TREE_BYTES came from the environment: the tuner's
                                defaults by node count (ofi_tuner.c) then yield to the user's */
  uint64_t slow_ms;          /* STRAND_OFI_SLOW_MS: trace requests slower than this (0: off) */
  bool inject;               /* STRAND_OFI_INJECT: host-memory sends up to the provider's
                                inject_size go by fi_tinject (no completion to reap) */
} ofi_params_t;
extern ofi_params_t ofi_params;
strand_result_t ofi_params_load(void);
/* STRAND_OFI_TUNER_CHANNELS read and parsed for a tuner whose net side never loaded the
 * parameters: a bad value is a WARN naming it and the bad item, and STRAND_INVALID_USAGE. */
strand_result_t ofi_tuner_bands_read(strand_tuner_bands_t *bands);

/* ---- completion contexts: every libfabric operation carries one of these ----
 * Whoever posts an operation (the control channel, a comm, a data request) sets `done`; the
 * progress engine calls it with the completion and never needs to know who the owner is. */
struct ofi_dev;
typedef struct ofi_op ofi_op_t;
typedef struct {
  size_t len;          /* bytes that arrived (receives) */
  int err;             /* 0, or the positive libfabric error */
  size_t olen;         /* FI_ETRUNC: bytes beyond the posted size (0 when unknown) */
  const char *errstr;  /* printable error with the provider's detail; NULL when err == 0 */
} ofi_cqe_t;
typedef void (*ofi_op_done_fn)(struct ofi_dev *dev, ofi_op_t *op, const ofi_cqe_t *e);
struct ofi_op {
  struct fi_context2 fi_ctx; /* must be first: FI_CONTEXT / FI_CONTEXT2 mode space */
  ofi_op_done_fn done;       /* set by the owner when it posts the operation; lock held */
  void *arg;                 /* the owner's object (request slot, control slot) for `done` */
};

struct ofi_comm;

/* ---- memory registration ---- */
typedef struct ofi_mr {
  struct ofi_dev *dev;
  uintptr_t base;
  size_t len;
  enum fi_hmem_iface iface;
  int refs;
  struct fid_mr *mr; /* NULL when the domain needs no registration for this memory */
  void *desc;
  struct ofi_mr *next;
} ofi_mr_t;

/* What regMr hands out (the mhandle): one per regMr call, even when the cache shares the entry,
 * so that every handle can be released exactly once. deregMr finds it in a handle set first and
 * never reads a handle that is not live (double deregMr, foreign pointers). */
typedef struct ofi_mh {
  ofi_mr_t *entry;
} ofi_mh_t;

/* ---- requests ---- */
typedef enum { OFI_REQ_FREE = 0, OFI_REQ_SEND, OFI_REQ_RECV } ofi_req_kind_t;
typedef struct ofi_req ofi_req_t;
typedef struct {
  ofi_op_t op;      /* done = the data path's completion */
  ofi_req_t *req;
  int slot;
  bool done;        /* completion (good or bad) arrived */
} ofi_sub_t;

struct ofi_req {
  ofi_req_kind_t kind;
  struct ofi_comm *comm;
  int n;            /* slots */
  int posted;       /* slots handed to libfabric so far (a post can hit -FI_EAGAIN midway) */
  int completed;    /* slots whose completion (good or bad) arrived */
  strand_result_t result;
  bool abandoned;   /* test() already reported an error; free once the posted slots complete */
  bool injected;    /* a send that went by fi_tinject: complete at once, no completion follows */
  uint64_t t_post_ms;
  int sizes[OFI_MAX_RECVS];
  void *bufs[OFI_MAX_RECVS];
  size_t lens[OFI_MAX_RECVS];
  void *descs[OFI_MAX_RECVS];
  uint64_t tags[OFI_MAX_RECVS];
  ofi_sub_t subs[OFI_MAX_RECVS];
  void *prof[OFI_MAX_RECVS]; /* profiler event of each message (strand/profiler.h); NULL: none */
};

/* Per-NCCL-tag sequence counters: few distinct tags per comm (one per local sender rank). */
typedef struct {
  int tag;
  uint32_t next;
} ofi_seq_t;

typedef enum { OFI_COMM_SEND = 1, OFI_COMM_RECV } ofi_comm_kind_t;
typedef enum {
  OFI_CONN_SENDING = 1, /* connect message not posted yet (-FI_EAGAIN) */
  OFI_CONN_WAIT_ACCEPT, /* posted; waiting for ACCEPT */
  OFI_CONN_READY,
  OFI_CONN_FAILED
} ofi_conn_state_t;

typedef struct ofi_comm {
  ofi_comm_kind_t kind;
  struct ofi_dev *dev;
  uint32_t id;          /* our id on dev (ctrl messages to us name it) */
  uint32_t peer_id;     /* the peer's id: for a send comm, the receiver's id that data tags carry */
  uint32_t data_id;     /* comm id put into data tags (= receiver's id) */
  uint64_t nonce;
  fi_addr_t peer;
  char peer_str[64];    /* printable peer address for messages */
  ofi_conn_state_t state;
  bool handed_out;      /* send side: connect() has returned this comm to the core */
  uint32_t listen_id;   /* send side: the listen id the connect targets */
  uint8_t listen_name[OFI_NAME_MAX]; /* send side: the listener's endpoint address */
  uint16_t listen_name_len;
  uint64_t t_start_ms;
  bool first_done_traced; /* STRAND_OFI_SLOW_MS: this comm's first completion was logged */
  uint64_t retry_at_ms;  /* send side: when a refused connect message may be sent again */
  bool closed;          /* closed by NCCL, kept alive until its operations drain */
  strand_result_t failed; /* STRAND_SUCCESS while healthy */
  char fail_msg[256];
  /* liveness probing */
  uint64_t last_probe_ms;
  uint64_t probe_sent_ms; /* 0 = no probe outstanding */
  uint64_t last_alive_ms; /* last data operation of this comm the provider completed without error */
  uint64_t eagain_since_ms; /* send side: first of a run of sends refused with -FI_EAGAIN (0 = none) */
  /* sequence numbers */
  ofi_seq_t *seqs;
  int nseqs, capseqs;
  /* requests */
  strand_pool_t reqs;
  int outstanding;      /* libfabric operations not yet completed (data subs + ctrl sends) */
  struct ofi_comm *next; /* device comm list */
  struct ofi_comm *next_ready; /* listen accept queue */
} ofi_comm_t;

typedef struct ofi_listen {
  struct ofi_dev *dev;  /* the rail this entry listens on */
  uint32_t id;
  uint64_t nonce;
  ofi_comm_t *ready_head, *ready_tail; /* accepted connections not yet returned by accept() */
  struct ofi_listen *next;
  /* The entry handed to NCCL (rail 0's) also names every rail's entry (rails[0] = itself): one
   * per rail published in the handle, all with the same id and nonce. */
  struct ofi_listen *rails[OFI_MAX_RAILS];
  int nrails;
  int next_accept;      /* the rail accept() looks at first, so that no rail starves */
} ofi_listen_t;

struct ofi_ctrl_send;
/* Completion of a control message, to the one who sent it (lock held; the slot is free again). */
typedef void (*ofi_ctrl_sent_fn)(struct ofi_dev *dev, struct ofi_ctrl_send *cs, const ofi_cqe_t *e);
typedef struct ofi_ctrl_send {
  ofi_op_t op;         /* done = the control channel's, which frees the slot and calls `sent` */
  ofi_ctrl_sent_fn sent;
  int index;
  bool busy;
  bool posted;
  fi_addr_t dest;
  uint32_t owner_comm; /* comm whose probe this is (0 = none) */
  int attempts;        /* sends of this message so far (TRUNC notices are retried) */
  uint64_t first_ms;   /* when the first copy of this message was queued */
  uint64_t not_before_ms; /* a resend waits in the slot until then (0: post at once) */
  ofi_ctrl_msg_t msg;
} ofi_ctrl_send_t;

typedef struct {
  ofi_op_t op;         /* done = the control channel's, which hands the message to on_ctrl */
  ofi_ctrl_msg_t msg;
  uint8_t slack[OFI_CTRL_MSG_SIZE - sizeof(ofi_ctrl_msg_t)];
} ofi_ctrl_recv_t;

/* Endpoint-address → fi_addr_t cache so repeated connections to one peer reuse its AV entry. */
typedef struct ofi_av_entry {
  size_t len;
  uint8_t name[OFI_NAME_MAX];
  fi_addr_t addr;
  struct ofi_av_entry *next;
} ofi_av_entry_t;

typedef struct ofi_dev {
  int index;                /* NCCL's device number (the same on every rail of a device) */
  int rail;                 /* 0 = the device NCCL sees; 1..nrails-1 = its further rails */
  /* Rail 0 only: every rail of the device (rails[0] = itself) and connect's round-robin counter.
   * Rails 1.. share info and pci_path with rail 0, which owns them. */
  struct ofi_dev *rails[OFI_MAX_RAILS];
  int nrails;
  _Atomic uint32_t next_rail;
  char name[64];            /* domain name, as NCCL's device name */
  char *pci_path;           /* sysfs path or NULL */
  uint64_t guid;
  int speed_mbps;
  bool hmem;                /* FI_HMEM offered: NCCL_PTR_CUDA */
  uint64_t mr_mode;
  size_t max_msg_size;
  size_t inject_size;       /* tx_attr->inject_size: fi_tinject takes up to this many bytes */
  struct fi_info *info;     /* the fi_info this device is opened from */

  pthread_mutex_t lock;
  bool open;
  bool open_failed;
  struct fid_fabric *fabric;
  struct fid_domain *domain;
  struct fid_ep *ep;
  struct fid_cq *cq;
  struct fid_av *av;
  uint8_t ep_name[OFI_NAME_MAX];
  size_t ep_name_len;
  char ep_str[64];

  uint64_t next_key;        /* requested_key for domains without FI_MR_PROV_KEY */
  uint32_t next_id;         /* comm / listen id allocator */
  ofi_comm_t *comms;        /* every comm on this device, closed-but-draining ones included */
  ofi_listen_t *listens;
  ofi_mr_t *mrs;            /* registration cache */
  ofi_av_entry_t *av_cache;

  /* control channel (ofi_progress.c) */
  void (*on_ctrl)(struct ofi_dev *dev, const ofi_ctrl_msg_t *msg, size_t len); /* lock held */
  ofi_ctrl_recv_t *ctrl_recv;   /* OFI_CTRL_RECVS */
  ofi_ctrl_send_t *ctrl_send;   /* OFI_CTRL_SENDS */
  struct fid_mr *ctrl_mr;
  void *ctrl_desc;
  bool ctrl_unposted;       /* a control send is filled but not yet accepted by libfabric */
  bool ctrl_recv_short;     /* some control receive could not be reposted */
  uint8_t ctrl_recv_posted[OFI_CTRL_RECVS];

  /* progress thread (ofi_rail.c), only when the device has more than one rail */
  pthread_t progress_thread;
  bool progress_running;    /* started and not yet joined; changed under lock */
  _Atomic bool progress_stop;
  /* When a caller (isend/irecv/test) last entered this rail, ns: with STRAND_OFI_RAIL_QUIET_US
   * the thread keeps off a rail a caller is working. Written only when rail threads run. */
  _Atomic uint64_t caller_ns;
  uint64_t trace_last_ns;   /* STRAND_OFI_SLOW_MS: when a caller last left isend/irecv/test here */
} ofi_dev_t;

/* ---- parameters (ofi_config.c; the clock is strand/clock.h) ---- */
/* ofi_params and ofi_params_load are declared with the knobs above. */

/* ---- provider, devices, endpoints (ofi_dev.c) ---- */
/* Loads the parameters and discovers the devices, once per process (later calls: no-op). */
strand_result_t ofi_devs_init(void);
int ofi_ndevs(void);
ofi_dev_t *ofi_dev_get(int dev);
const char *ofi_provider_name(void);
/* Opens fabric, domain, CQ, AV and the endpoint (lock held); on failure nothing stays open. */
strand_result_t ofi_dev_open(ofi_dev_t *dev);
/* Closes the endpoint, which discards every operation still posted on it (lock held). */
void ofi_dev_close_ep(ofi_dev_t *dev);
/* Closes what ofi_dev_open opened and forgets the AV cache; d->open becomes false (lock held). */
void ofi_dev_close(ofi_dev_t *dev);
uint32_t ofi_dev_alloc_id(ofi_dev_t *dev);
ofi_comm_t *ofi_dev_find_comm(ofi_dev_t *dev, uint32_t id);
strand_result_t ofi_av_lookup(ofi_dev_t *dev, const uint8_t *name, size_t len, fi_addr_t *out);
/* Drops `peer` from the AV (and its cache), so that a later connection to the same endpoint gets
 * a fresh provider connection instead of a dead one. Lock held. */
void ofi_av_forget(ofi_dev_t *dev, fi_addr_t peer, const char *why);
/* Whether `peer` is still an entry of the AV (not forgotten or released since). */
bool ofi_av_has(const ofi_dev_t *dev, fi_addr_t peer);
/* Drops peer from the AV and its cache (quietly: INFO) when it is cached; the caller has checked
 * that no comm and no control send still uses it. */
void ofi_av_release(ofi_dev_t *dev, fi_addr_t peer);
bool ofi_errno_is_connection_loss(int err);
strand_result_t ofi_errno_result(int err);
void ofi_addr_str(const uint8_t *name, size_t len, char *out, size_t outlen);

/* ---- progress and the control channel (ofi_progress.c) ---- */
/* Opens the device (ofi_dev_open) and its control channel on first use: control buffers, their
 * registration, posted control receives. Every control message that arrives goes to on_ctrl.
 * A device that failed to open stays failed. Lock held. */
strand_result_t ofi_ctrl_open(ofi_dev_t *dev,
                              void (*on_ctrl)(ofi_dev_t *, const ofi_ctrl_msg_t *, size_t));
/* Releases the control channel's buffers and registration (endpoint already closed; lock held). */
void ofi_ctrl_close(ofi_dev_t *dev);
/* Drain the CQ a bounded number of times and call each operation's `done`; lock held. Returns
 * the number of completions handled (0: nothing happened), which the rail threads back off on. */
int ofi_progress(ofi_dev_t *dev);
/* Queue a control message to `dest`; its completion goes to `sent`. owner_comm != 0: that comm counts one more outstanding operation. -FI_EAGAIN only when every
 * control slot is busy. */
int ofi_ctrl_send(ofi_dev_t *dev, fi_addr_t dest, uint16_t kind, uint32_t dst_id, uint32_t src_id,
                  uint64_t nonce, uint64_t arg, uint32_t owner_comm, const uint8_t *name,
                  size_t name_len, ofi_ctrl_sent_fn sent);
/* Send a copy of a control message again (attempt number `attempt` of a message first queued at
 * first_ms), no owner comm, posted by progress once delay_ms have passed (0: now). */
int ofi_ctrl_resend(ofi_dev_t *dev, fi_addr_t dest, const ofi_ctrl_msg_t *msg, int attempt,
                    uint64_t first_ms, uint64_t delay_ms, ofi_ctrl_sent_fn sent);

/* ---- rails (ofi_rail.c) ---- */
/* ofi_ctrl_open on one rail, then its progress thread when the device has several rails. Lock
 * of that rail held; the thread only starts working once the caller lets go of the lock. */
strand_result_t ofi_rail_open(ofi_dev_t *rail,
                              void (*on_ctrl)(ofi_dev_t *, const ofi_ctrl_msg_t *, size_t));
/* A caller (isend/irecv/test) is working this rail now (lock held): with STRAND_OFI_RAIL_QUIET_US
 * the rail's thread stays off it for that long. No-op otherwise. */
void ofi_rail_touch(ofi_dev_t *rail);
/* Stops and joins the rail's progress thread, if it runs. Lock NOT held (the thread takes it). */
void ofi_rail_stop(ofi_dev_t *rail);
/* The rail a new connection from `dev` (rail 0) uses, given how many rails the peer published. */
int ofi_rail_pick(ofi_dev_t *dev, int peer_rails);

/* ---- connections (ofi_conn.c) ---- */
strand_result_t ofi_listen(void *ctx, int dev, void *handle, void **listenComm);
strand_result_t ofi_connect(void *ctx, int dev, void *handle, void **sendComm,
                            strand_dev_handle_t **sendDevComm);
strand_result_t ofi_accept(void *listenComm, void **recvComm, strand_dev_handle_t **recvDevComm);
strand_result_t ofi_close_send(void *sendComm);
strand_result_t ofi_close_recv(void *recvComm);
strand_result_t ofi_close_listen(void *listenComm);
/* Completion of a control message a comm sent (the `sent` every ofi_ctrl_send of a comm names). */
void ofi_conn_ctrl_sent(ofi_dev_t *dev, ofi_ctrl_send_t *cs, const ofi_cqe_t *e);
void ofi_comm_fail(ofi_comm_t *comm, strand_result_t res, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
void ofi_comm_maybe_reap(ofi_comm_t *comm);
/* The provider's connection to `peer` is broken (reset, refused, not connected): fail every comm
 * that uses it and drop the address from the AV. Lock held. */
void ofi_peer_broken(ofi_dev_t *dev, fi_addr_t peer, const char *why);
/* A message from `peer` overran a receive of comm `recv_id`: every send comm of this device to
 * that peer fails too (tcp;ofi_rxm has dropped the connection they use; see ofi_xfer.c). */
void ofi_peer_overran(ofi_dev_t *dev, fi_addr_t peer, uint32_t recv_id);
/* Frees every comm and listen comm of a device whose endpoint is closed (lock held). */
void ofi_conn_free_all(ofi_dev_t *dev);

/* ---- registration (ofi_mr.c) ---- */
strand_result_t ofi_reg_mr(void *comm, void *data, size_t size, int type, void **mhandle);
strand_result_t ofi_reg_mr_dmabuf(void *comm, void *data, size_t size, int type, uint64_t offset,
                                  int fd, void **mhandle);
strand_result_t ofi_dereg_mr(void *comm, void *mhandle);
void ofi_mr_cache_clear(ofi_dev_t *dev); /* lock held, device closing */

/* ---- data path (ofi_xfer.c) ---- */
strand_result_t ofi_isend(void *sendComm, void *data, size_t size, int tag, void *mhandle,
                          void *phandle, void **request);
strand_result_t ofi_irecv(void *recvComm, int n, void **data, size_t *sizes, int *tags,
                          void **mhandles, void **phandles, void **request);
strand_result_t ofi_iflush(void *recvComm, int n, void **data, int *sizes, void **mhandles,
                           void **request);
strand_result_t ofi_test(void *request, int *done, int *sizes);

#endif
