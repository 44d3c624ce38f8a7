/* gin_proxy: what travels on the net's comms between two ranks.
 *
 * One comm per ordered pair (i -> j) carries every message from i to j, each one fixed-size slot
 * at most: a gp_hdr_t, then `len` payload bytes. Because every message has the same shape, the
 * receiver keeps GP_RECV_SLOTS receives of GP_SLOT_BYTES pre-posted and they always match; a put
 * or get reply larger than one slot is cut into fragments. The comm is ordered, and the target
 * applies messages strictly in arrival order, which is where every ordering guarantee comes from
 * (a signal after its data and after every earlier put from the same source).
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
 *   BYE    the sender is closing its collComm: its comms are about to close, which is not an
 *          error (the receiver stops driving them instead of reporting the peer dead).
 * Acks and replies travel on the target's own comm back (j -> i), ordered with j's puts to i. */
#ifndef STRAND_GP_WIRE_H
#define STRAND_GP_WIRE_H

#include <stdint.h>

#include "strand/abi/types.h"

#define GP_WIRE_MAGIC 0x47505731u /* "GPW1" */
#define GP_WIRE_VERSION 1

enum { GP_MSG_PUT = 1, GP_MSG_GET = 2, GP_MSG_REPLY = 3, GP_MSG_ACK = 4, GP_MSG_BYE = 5 };
#define GP_F_LAST 0x1
#define GP_F_SIGNAL 0x2

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
} gp_hdr_t;

STRAND_STATIC_ASSERT(sizeof(gp_hdr_t) == 80, "gp_hdr_t: one fixed wire layout");

#endif
