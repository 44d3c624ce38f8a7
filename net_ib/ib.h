/* strand-ib — internal types shared by the verbs plugin's source files.
 *
 * Object model (one process):
 *   ib_hca    one opened HCA (ibv_context + one protection domain), its registration cache and
 *             the thread that reads its asynchronous events.
 *   ib_dev    what NCCL sees as a device: one active port of an HCA ("mlx5_0:1"), or a virtual
 *             device fusing up to IB_MAX_RAILS ports (makeVDevice). Each physical port is a rail.
 *   ib_comm   a send or a recv comm: per rail a CQ and the registration of the comm's control
 *             block, nqps RC QPs spread over the rails, the OOB socket kept open as a liveness
 *             signal, and fixed arrays of requests (no allocation on the data path).
 *   ib_mh     the mhandle regMr returns: one cached registration per HCA the comm's rails use.
 *
 * Data path (as NCCL's IB transport, anchors.md §1.1): irecv RDMA-writes a clear-to-send entry
 * (ib_cts_t) into the sender's FIFO; isend matches it by tag, RDMA-writes the payload straight
 * into the receive buffer, and ends on every QP it used with a write-with-immediate, which is the
 * only thing the receiver ever sees completing. Sizes travel in the immediate or in a sizes record
 * written just before it (ib_wire.h).
 *
 * Layers (each file calls only the ones below it):
 *   ib_plugin.c                   table, init/finalize, devices, getProperties, makeVDevice
 *   ib_xfer.c  ib_mr.c            data path; registrations
 *   ib_conn.c                     listen/connect/accept/close, QP set-up, comm errors
 *   ib_dev.c                      HCA discovery, NCCL_IB_HCA, GIDs, async events
 *   ib_config.c                   NCCL_IB_* / STRAND_IB_* parameters, clock
 *   ib_verbs.c                    the dlopen'ed libibverbs */
#ifndef STRAND_NET_IB_H
#define STRAND_NET_IB_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ib_verbs.h"
#include "ib_wire.h"
#include "strand/log.h"
#include "strand/params.h"
#include "strand/plugin.h"
#include "strand/socket_addr.h"

#define IB_PLUGIN_NAME "strand-ib"
#define IB_MAX_DEVS 64     /* physical ports + virtual devices */
#define IB_MAX_HCAS 32
#define IB_SEND_REQS (IB_FIFO_SLOTS * IB_MAX_RECVS)
#define IB_RECV_DEPTH 64   /* receive WRs kept posted per QP (immediates) */

/* ---- knobs (ib_config.c; docs/plugins/ib.md) ---- */
typedef struct {
  bool disable;              /* NCCL_IB_DISABLE */
  char hca[512];             /* NCCL_IB_HCA */
  int gid_index;             /* NCCL_IB_GID_INDEX, -1 = automatic */
  int roce_version;          /* NCCL_IB_ROCE_VERSION_NUM */
  int addr_family;           /* NCCL_IB_ADDR_FAMILY: AF_INET / AF_INET6 */
  char addr_range[128];      /* NCCL_IB_ADDR_RANGE */
  int timeout;               /* NCCL_IB_TIMEOUT */
  int retry_cnt;             /* NCCL_IB_RETRY_CNT */
  int sl;                    /* NCCL_IB_SL */
  int tc;                    /* NCCL_IB_TC */
  int pkey;                  /* NCCL_IB_PKEY (index) */
  int qps_per_conn;          /* NCCL_IB_QPS_PER_CONNECTION */
  long split_min;            /* STRAND_IB_SPLIT_MIN_BYTES */
  long connect_timeout_ms;   /* STRAND_IB_CONNECT_TIMEOUT_MS */
  long async_poll_ms;        /* STRAND_IB_ASYNC_POLL_MS */
  long peer_grace_ms;        /* STRAND_IB_PEER_GRACE_MS */
  bool force_flush;          /* STRAND_IB_FORCE_FLUSH */
} ib_params_t;
extern ib_params_t ib_params;
strand_result_t ib_params_load(void);

/* ---- NCCL_IB_HCA grammar (ib_dev.c; pure, unit-tested) ---- */
#define IB_HCA_FILTER_MAX 32
typedef struct {
  bool any;                  /* unset: every device and port */
  bool exclude, exact;
  int count;
  struct {
    char name[64];
    int port;                /* -1: every port */
  } items[IB_HCA_FILTER_MAX];
} ib_hca_filter_t;
strand_result_t ib_hca_filter_parse(const char *spec, ib_hca_filter_t *f);
bool ib_hca_filter_match(const ib_hca_filter_t *f, const char *dev, int port);
/* Mb/s of a port from ibv_port_attr's active_width and active_speed codes; 0 when unknown. */
int ib_port_speed_mbps(uint8_t active_width, uint8_t active_speed);
/* NCCL_IB_ADDR_RANGE "a.b.c.d/n" or "v6/n": is the address of `gid` (IPv4-mapped or IPv6)
 * inside it? An empty range matches everything. */
typedef struct {
  int family;                /* 0: no range */
  uint8_t addr[16];
  int prefix;
} ib_addr_range_t;
strand_result_t ib_addr_range_parse(const char *text, ib_addr_range_t *r);
bool ib_gid_in_range(const uint8_t gid[16], int family, const ib_addr_range_t *r);
int ib_gid_family(const uint8_t gid[16]); /* AF_INET for ::ffff:a.b.c.d, else AF_INET6 */

/* ---- devices (ib_dev.c) ---- */
struct ib_comm;
typedef struct ib_mr_entry ib_mr_entry_t;

typedef struct ib_hca {
  int index;
  char name[64];
  struct ibv_context *ctx;
  struct ibv_pd *pd;
  struct ibv_device_attr attr;
  char *pci_path;            /* realpath of /sys/class/infiniband/<name>/device, or NULL */
  pthread_mutex_t mr_lock;   /* registration cache */
  ib_mr_entry_t *mrs;
  atomic_int fatal;          /* IBV_EVENT_DEVICE_FATAL seen */
  pthread_t async_thread;
  bool async_running;
  atomic_bool async_stop;
  bool gpu_probed;           /* ib_gpu.c: gpu_ptr_support is known */
  int gpu_ptr_support;       /* STRAND_PTR_CUDA / STRAND_PTR_DMABUF this HCA can register */
} ib_hca_t;

typedef struct ib_dev {
  char name[64];
  bool is_virtual;
  int nrails;
  int rails[IB_MAX_RAILS];   /* physical device indices (itself for a physical device) */
  /* physical ports only */
  ib_hca_t *hca;
  int port;
  uint8_t link_layer;
  uint16_t lid;
  int gid_index;             /* -1: none (IB without GID routing) */
  union ibv_gid gid;
  bool is_global;
  enum ibv_mtu mtu;
  uint32_t max_msg;
  int speed_mbps;
  uint64_t guid;
  atomic_int port_down;      /* IBV_EVENT_PORT_ERR seen, not yet IBV_EVENT_PORT_ACTIVE */
} ib_dev_t;

/* Loads verbs and finds the devices, once per process (later calls: no-op). 0 devices is
 * success (no libibverbs, no HCA, NCCL_IB_DISABLE). */
strand_result_t ib_devs_init(void);
int ib_ndevs(void);
ib_dev_t *ib_dev_get(int dev);
/* Adds a virtual device of `n` physical devices; its index in *out. */
strand_result_t ib_dev_add_virtual(const int *members, int n, int *out);
/* Starts / stops the async-event threads (lifetime setup / teardown). */
void ib_async_start(void);
void ib_async_stop(void);
/* The out-of-band address listeners bind to (NCCL_SOCKET_IFNAME's first interface). */
const strand_sockaddr_t *ib_oob_addr(void);

/* ---- comms (ib_conn.c) ---- */
typedef enum { IB_REQ_FREE = 0, IB_REQ_SEND, IB_REQ_RECV, IB_REQ_FLUSH } ib_req_kind_t;

typedef struct ib_req {
  ib_req_kind_t kind;
  bool done;
  bool reported;             /* test() said done; a later test() repeats the answer */
  struct ib_comm *comm;
  strand_result_t result;
  int n;
  int sizes[IB_MAX_RECVS];
  /* send */
  int group;                 /* FIFO slot of the CTS it matched */
  /* recv */
  uint64_t seq;
  int imm_need, imm_got;
  bool imm_inline;
  uint32_t imm_size;
  void *prof[IB_MAX_RECVS];  /* profiler event of each message (strand/profiler.h); NULL: none */
} ib_req_t;

struct ib_mh;
typedef struct {
  bool active, posted;
  uint64_t seq;
  int n, matched, pending;
  uint32_t err;              /* IB_SIZES_* */
  ib_req_t *reqs[IB_MAX_RECVS];
  void *data[IB_MAX_RECVS];
  size_t size[IB_MAX_RECVS];
  struct ib_mh *mh[IB_MAX_RECVS];
} ib_group_t;

typedef struct {
  ib_dev_t *dev;
  struct ibv_cq *cq;
  struct ibv_mr *ctrl_mr;
} ib_rail_t;

typedef enum { IB_COMM_SEND = 1, IB_COMM_RECV } ib_comm_kind_t;

/* Control block, registered on every rail: the FIFO (send side) or the sizes records (receive
 * side) the peer writes, and the staging records this side writes from. */
typedef struct {
  ib_cts_t fifo[IB_FIFO_SLOTS];         /* send: written by the receiver */
  ib_sizes_t sizes_in[IB_FIFO_SLOTS];   /* recv: written by the sender */
  ib_sizes_t sizes_out[IB_FIFO_SLOTS];  /* send: staged here, written to the receiver */
  ib_cts_t cts_out[IB_FIFO_SLOTS];      /* recv: staged here, written to the sender */
  uint8_t flush_buf[64];                /* recv: target of flush reads */
} ib_ctrl_t;

typedef struct ib_comm {
  ib_comm_kind_t kind;
  int devidx;
  int nrails;
  ib_rail_t rails[IB_MAX_RAILS];
  int nqps;
  struct ibv_qp *qps[IB_MAX_QPS];
  int qp_rail[IB_MAX_QPS];
  struct ibv_qp *flush_qp;   /* recv: loopback QP for iflush reads (lazy) */
  ib_conn_info_t peer;
  int fd;                    /* OOB socket, kept as a liveness signal */
  char peer_str[STRAND_SOCKADDR_STRLEN];
  ib_ctrl_t *ctrl;
  /* errors: set by the data path or the async-event thread, read by test() */
  atomic_int failed;         /* 0 or a strand_result_t */
  char fail_msg[640];
  uint64_t next_liveness_ms;
  uint64_t peer_closed_ms;   /* 0: OOB socket still open */
  int outstanding;           /* requests posted and not reported */
  /* send side */
  uint64_t cts_seq;
  int qp_rr;
  ib_group_t groups[IB_FIFO_SLOTS];
  ib_req_t sreqs[IB_SEND_REQS];
  int sreq_cursor;
  /* recv side */
  uint64_t recv_seq;
  ib_req_t rreqs[IB_FIFO_SLOTS];
  ib_req_t freqs[IB_FIFO_SLOTS]; /* iflush reads in flight */
  struct ib_comm *next;      /* registry, for async events */
} ib_comm_t;

strand_result_t ib_listen(void *ctx, int dev, void *handle, void **listenComm);
strand_result_t ib_connect(void *ctx, int dev, void *handle, void **sendComm,
                           strand_dev_handle_t **sendDevComm);
strand_result_t ib_accept(void *listenComm, void **recvComm, strand_dev_handle_t **recvDevComm);
strand_result_t ib_close_send(void *sendComm);
strand_result_t ib_close_recv(void *recvComm);
strand_result_t ib_close_listen(void *listenComm);
int ib_open_comms(void);
/* Marks the comm failed (first error wins) with a WARN; test() then returns `res`. */
void ib_comm_fail(ib_comm_t *c, strand_result_t res, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Async events: fail every comm that uses `qp` / a rail on (hca, port) / hca. */
void ib_comms_fail_qp(struct ibv_qp *qp, const char *what);
void ib_comms_fail_port(ib_hca_t *hca, int port, const char *what);
void ib_comms_fail_hca(ib_hca_t *hca, const char *what);
/* Connects the loopback flush QP of a recv comm (lazy; ib_xfer.c). */
strand_result_t ib_flush_qp_open(ib_comm_t *c);

/* ---- GPU memory (ib_gpu.c) ---- */
/* STRAND_PTR_CUDA | STRAND_PTR_DMABUF as this HCA can register GPU memory (0: host only); probed
 * once per HCA, the way NCCL's own IB transport decides. */
int ib_hca_gpu_ptr_support(ib_hca_t *h);

/* ---- registration (ib_mr.c) ---- */
struct ib_mr_entry {
  ib_hca_t *hca;
  uintptr_t base;
  size_t len;
  int refs;
  struct ibv_mr *mr;
  bool dmabuf;
  bool gpu;                  /* GPU memory (regMr of NCCL_PTR_CUDA, or a dmabuf) */
  ib_mr_entry_t *next;
};
typedef struct ib_mh {
  bool gpu;                  /* GPU memory: receives into it are flushed (iflush) */
  int nrails;
  ib_mr_entry_t *e[IB_MAX_RAILS]; /* registration on rail r's HCA */
} ib_mh_t;
strand_result_t ib_reg_mr(void *comm, void *data, size_t size, int type, void **mhandle);
strand_result_t ib_reg_mr_dmabuf(void *comm, void *data, size_t size, int type, uint64_t offset,
                                 int fd, void **mhandle);
strand_result_t ib_dereg_mr(void *comm, void *mhandle);
bool ib_mh_live(const void *mhandle);
void ib_mr_cache_clear(ib_hca_t *hca); /* teardown */

/* ---- data path (ib_xfer.c) ---- */
strand_result_t ib_isend(void *sendComm, void *data, size_t size, int tag, void *mhandle,
                         void *phandle, void **request);
strand_result_t ib_irecv(void *recvComm, int n, void **data, size_t *sizes, int *tags,
                         void **mhandles, void **phandles, void **request);
strand_result_t ib_iflush(void *recvComm, int n, void **data, int *sizes, void **mhandles,
                          void **request);
strand_result_t ib_test(void *request, int *done, int *sizes);
/* Posts the receive WRs that take immediates, on QP q (connection set-up; ib_xfer.c). */
strand_result_t ib_post_imm_recvs(ib_comm_t *c, int q, int count);

#endif
