/* gin_proxy: what travels on the net's comms between two ranks.
 *
 * Two comms per ordered pair (i -> j). The control comm carries every message from i to j, each
 * one fixed-size slot at most: a gp_hdr_t, then `len` payload bytes. Because every message has the same shape, the
 * receiver keeps GP_RECV_SLOTS receives of GP_SLOT_BYTES pre-posted and they always match; a put
 * or get reply larger than one slot is cut into fragments. The comm is ordered, and the target
 * applies messages strictly in arrival order, which is where every ordering guarantee comes from
 * (a signal after its data and after every earlier put from the same source).
 *
 * The bulk comm carries only the raw bytes of large puts (gp_bulk.c): a PUT fragment with
 * GP_F_BULK has no payload in its slot; its `bulk` bytes follow on the bulk comm, in the order of
 * their control messages, straight from the source window into the destination window where the
 * memory allows it. The target posts the bulk receive when it applies the control message and
 * applies nothing else from i until the bytes are in (several bulk fragments may be in flight).
 *
 * Ops of one ordered pair are numbered 1, 2, 3... (seq). Messages:
 *   PUT    win, base, total: the op writes [base, base+total) of window `win`; this fragment
 *          carries op bytes [off, off+len). GP_F_LAST on the last fragment, GP_F_SIGNAL when the
 *          op ends with a 64-bit atomic on (sig_win, sig_off). Bounds are checked on the first
 *          fragment (off == 0) for the whole op and the signal, so nothing of a bad op is written.
 *   GET    read [base, base+total) of window `win` and send it back as REPLY fragments.
 *   REPLY  bytes [off, off+len) of the get `seq`; GP_F_LAST on the last one. A get that fails at
 *          the target is answered by an ACK carrying the error instead.
 *   ACK    every op up to and including `seq` is applied (cumulative); `status` != 0: op `seq`
 *          failed with that strand_result_t (error ACKs are never merged).
 *   Every message also carries `ack`: when non-zero, every op of the receiver's up to and
 *          including `ack` succeeded at the sender (a success ACK riding on traffic that goes
 *          anyway; the engine sends an ACK of its own only when none goes soon enough).
   BYE    the sender is closing its collComm: its comms are about to close, which is not an
 *          error (the receiver stops driving them instead of reporting the peer dead).
 * Acks and replies travel on the target's own comm back (j -> i), ordered with j's puts to i. */
#ifndef STRAND_GP_WIRE_H
#define STRAND_GP_WIRE_H

#include <stdint.h>

#include "strand/abi/types.h"

#define GP_WIRE_MAGIC 0x47505731u /* "GPW1" */
#define GP_WIRE_VERSION 2

enum { GP_MSG_PUT = 1, GP_MSG_GET = 2, GP_MSG_REPLY = 3, GP_MSG_ACK = 4, GP_MSG_BYE = 5 };
#define GP_F_LAST 0x1
#define GP_F_SIGNAL 0x2
#define GP_F_BULK 0x4

typedef struct {
  uint32_t magic;
  uint16_t version;
  uint8_t type;
  uint8_t flags;
  uint32_t status;  /* ACK: strand_result_t of op seq (0: success) */
  uint32_t win;     /* PUT: destination window id; GET: source window id */
  uint64_t seq;     /* op number on this ordered pair */
  uint64_t base;    /* PUT/GET: the op's offset in `win` */
  uint64_t total;   /* PUT/GET: the op's size */
  uint64_t off;     /* PUT/REPLY: this fragment's position inside the op */
  uint64_t len;     /* PUT/REPLY: payload bytes after the header */
  uint64_t sig_off; /* PUT with GP_F_SIGNAL: the 8-byte word in window sig_win */
  uint64_t sig_val; /* added by the ADD op; INC adds 1 */
  uint32_t sig_win;
  uint32_t sig_op;  /* STRAND_GIN_SIGNAL_OP_INC / _ADD */
  uint64_t bulk;    /* PUT with GP_F_BULK: this fragment's bytes that follow on the bulk comm */
  uint64_t ack;     /* non-zero: the sender's cumulative success ack of our ops (piggybacked) */
} gp_hdr_t;

STRAND_STATIC_ASSERT(sizeof(gp_hdr_t) == 96, "gp_hdr_t: one fixed wire layout");

#endif
