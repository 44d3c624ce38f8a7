/* strand-ib — what crosses the wire: the listen handle, the connection info exchanged over the
 * out-of-band socket, and the two control records the data path writes into the peer's memory
 * with RDMA (the clear-to-send FIFO entry and the sizes record).
 *
 * Both ends are the same plugin build on hosts of one byte order (as for NCCL's own IB transport);
 * every record carries a magic or sequence number so that a stranger's or a stale write is
 * detected instead of trusted. */
#ifndef STRAND_NET_IB_WIRE_H
#define STRAND_NET_IB_WIRE_H

#include <stdint.h>

#include "strand/abi/types.h"
#include "strand/socket_addr.h"

#define IB_MAGIC 0x3142495f444e5453ULL /* "STND_IB1": OOB handshake magic */
#define IB_INFO_MAGIC 0x4f464e49u      /* "INFO" */
#define IB_WIRE_VERSION 1

#define IB_MAX_RECVS 8    /* maxRecvs: receives grouped into one CTS */
#define IB_FIFO_SLOTS 32  /* receives in flight per comm (NCCL_NET_MAX_REQUESTS) */
#define IB_MAX_QPS 16     /* NCCL_IB_QPS_PER_CONNECTION x rails, at most */
#define IB_MAX_RAILS 4    /* physical ports fused into one (virtual) device */

/* The 128-byte NCCL handle: where the listener's OOB socket is, and its per-listener nonce. */
typedef struct {
  uint64_t magic;
  uint64_t nonce;
  strand_sockaddr_t addr;
  int32_t dev;
} ib_handle_t;
STRAND_STATIC_ASSERT(sizeof(ib_handle_t) <= 128, "ib handle fits NCCL_NET_HANDLE_MAXSIZE");

/* One element of a clear-to-send entry: a posted receive buffer. rkey[r] is the key of the
 * buffer's registration on the receiver's rail r (a QP q lands on rail q % nrails). */
typedef struct {
  uint64_t addr;
  uint32_t rkey[IB_MAX_RAILS];
  int64_t size;
  int32_t tag;
  uint32_t pad;
} ib_cts_elem_t;

/* The receiver writes one of these into the sender's FIFO slot seq % IB_FIFO_SLOTS per irecv.
 * `seq` is the receive's sequence number + 1 and is the last field: the sender takes the entry
 * once seq matches the one it expects, so a zeroed slot is never mistaken for a receive. */
typedef struct {
  ib_cts_elem_t elems[IB_MAX_RECVS];
  uint32_t n;
  uint32_t pad;
  volatile uint64_t seq;
} ib_cts_t;

/* Error codes a sender puts into a sizes record. */
enum { IB_SIZES_OK = 0, IB_SIZES_TOO_BIG = 1, IB_SIZES_TAG = 2 };

/* The sender writes this into the receiver's sizes slot before the write-with-immediate that
 * completes the receive (same QP, so it lands first), unless the immediate carries the size. */
typedef struct {
  int64_t sizes[IB_MAX_RECVS]; /* true bytes sent per element; the sender's size on error */
  uint32_t err;                /* IB_SIZES_* */
  uint32_t n;
  uint64_t seq;                /* receive sequence + 1, as in the CTS */
} ib_sizes_t;

/* The 32-bit immediate of the write-with-immediate that ends a send group on each QP used:
 *   bits 0..4 FIFO slot, bits 5..9 QPs used - 1, bit 10 size inline, bits 11..31 the size
 *   (n == 1 and size < 2 MiB: no sizes record is written, the small-message fast path). */
#define IB_IMM_SLOT(i) ((i) & 31u)
#define IB_IMM_NQPS(i) ((((i) >> 5) & 31u) + 1u)
#define IB_IMM_INLINE(i) (((i) >> 10) & 1u)
#define IB_IMM_SIZE(i) ((i) >> 11)
#define IB_IMM_INLINE_MAX ((1u << 21) - 1u)
#define IB_IMM_MAKE(slot, nqps, inl, size)                                                        \
  ((uint32_t)(slot) | ((uint32_t)((nqps) - 1) << 5) | ((uint32_t)(inl) << 10) |                    \
   ((uint32_t)(size) << 11))

/* Addressing of one rail (a physical port) of one end. */
typedef struct {
  uint8_t gid[16];
  uint16_t lid;
  uint8_t link_layer; /* IBV_LINK_LAYER_* */
  uint8_t mtu;        /* enum ibv_mtu, the port's active MTU */
  uint8_t is_global;  /* 1: route with the GID (RoCE, or IB with NCCL_IB_GID_INDEX) */
  uint8_t pad[3];
} ib_rail_wire_t;

typedef struct {
  uint32_t qpn;
  uint32_t ctrl_rkey; /* key of the control block (FIFO or sizes records) on this QP's HCA */
} ib_qp_wire_t;

/* Sent by each end over the OOB socket: connector first, acceptor answers. */
typedef struct {
  uint32_t magic;
  uint16_t version;
  uint16_t nqps;
  uint16_t nrails;
  uint16_t pad;
  uint32_t max_msg;   /* smallest max_msg_sz of the rails */
  uint64_t ctrl_addr; /* sender: its CTS FIFO; receiver: its sizes records */
  ib_rail_wire_t rails[IB_MAX_RAILS];
  ib_qp_wire_t qps[IB_MAX_QPS];
} ib_conn_info_t;

/* The connector's last byte, sent once its QPs are ready to receive RDMA writes. */
#define IB_READY_BYTE 0x5a

#endif
