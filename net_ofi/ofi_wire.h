/* strand-ofi — everything that goes on the wire: the 64-bit tag layout, the control messages and
 * the 128-byte listen handle. Both ends of a connection must agree on every byte here; bump
 * OFI_CTRL_VERSION when a control message changes.
 *
 * Tag layout (64 bits, see ofi_xfer.c for why per-tag sequence numbers keep NCCL's ordering):
 *   bit 63        1 = control message (connect/accept/reject/probe/...), 0 = data
 *   bits 62..43   receiver's comm id (20 bits)
 *   bits 42..24   sequence number of this message among those carrying the same NCCL tag (19 bits)
 *   bits 23..0    the NCCL tag (sender's rank), folded to 24 bits */
#ifndef STRAND_NET_OFI_WIRE_H
#define STRAND_NET_OFI_WIRE_H

#include <stdint.h>

#include "strand/plugin.h"

#define OFI_NAME_MAX 88        /* endpoint address bytes carried in handle/messages */
#define OFI_CTRL_MSG_SIZE 256  /* every control message fits in this */

/* ---- tag layout ---- */
#define OFI_TAG_CTRL (1ULL << 63)
#define OFI_TAG_COMM_BITS 20
#define OFI_TAG_SEQ_BITS 19
#define OFI_TAG_NCCL_BITS 24
#define OFI_TAG_COMM_SHIFT (OFI_TAG_SEQ_BITS + OFI_TAG_NCCL_BITS)
#define OFI_TAG_SEQ_SHIFT OFI_TAG_NCCL_BITS
#define OFI_COMM_ID_MAX ((1u << OFI_TAG_COMM_BITS) - 1) /* id 0 is never used */
#define OFI_SEQ_MASK ((1u << OFI_TAG_SEQ_BITS) - 1)
#define OFI_NCCL_TAG_MASK ((1u << OFI_TAG_NCCL_BITS) - 1)

/* ---- control messages (fixed layout, little-endian hosts only: LP64 Linux targets) ---- */
enum {
  OFI_CTRL_CONNECT = 1, /* sender -> listener: dst = listen id, src = sender comm id, name = sender */
  OFI_CTRL_ACCEPT,      /* listener -> sender: dst = sender comm id, src = recv comm id */
  OFI_CTRL_REJECT,      /* listener -> sender: unknown listen id or wrong nonce */
  OFI_CTRL_PROBE,       /* either side: "are you still there" (the send completion is the answer) */
  OFI_CTRL_GONE,        /* reply to a probe naming a comm that no longer exists */
  OFI_CTRL_TRUNC        /* receiver -> sender: your message did not fit the posted receive */
};
#define OFI_CTRL_MAGIC 0x53544f46u /* "STOF" */
#define OFI_CTRL_VERSION 1
typedef struct {
  uint32_t magic;
  uint16_t version;
  uint16_t kind;
  uint32_t dst_id;
  uint32_t src_id;
  uint64_t nonce;
  uint64_t arg;         /* TRUNC: bytes the sender tried to send over the posted size */
  uint16_t name_len;
  uint8_t name[OFI_NAME_MAX];
} ofi_ctrl_msg_t;
_Static_assert(sizeof(ofi_ctrl_msg_t) <= OFI_CTRL_MSG_SIZE, "control message fits its buffer");

/* ---- the 128-byte listen handle ----
 * A connect in progress is found again by (listener's rail-0 address, listen id, nonce), not by
 * anything written into the handle: callers may pass a fresh copy each time.
 * Rails: the listener publishes the endpoint address of each of its rails, packed back to back
 * (every address of one provider has the same length), as many as fit (tcp;ofi_rxm and sockets:
 * 16-byte addresses, 6 rails). listen_id and nonce keep the offsets of the first layout.
 * The magic changed with the rails layout ("STOH" was the single-address one), so a handle from an
 * older build is refused by name instead of being misread. */
#define OFI_HANDLE_MAGIC 0x53544f52u    /* "STOR" */
#define OFI_HANDLE_MAGIC_V1 0x53544f48u /* "STOH": single-address layout, refused */
#define OFI_HANDLE_NAMES 104            /* bytes for the packed rail addresses */
typedef struct {
  uint32_t magic;
  uint32_t listen_id;
  uint64_t nonce;
  uint8_t nrails;       /* addresses in names[], 1.. */
  uint8_t name_len;     /* bytes of each address, 1..OFI_NAME_MAX */
  uint8_t pad[6];
  uint8_t names[OFI_HANDLE_NAMES]; /* rail k's address at names + k * name_len */
} ofi_handle_t;
_Static_assert(sizeof(ofi_handle_t) == STRAND_NET_HANDLE_MAXSIZE, "handle is exactly 128 bytes");
_Static_assert(OFI_NAME_MAX <= OFI_HANDLE_NAMES, "one address of any size always fits");
_Static_assert(OFI_NAME_MAX <= 255, "name_len is one byte");

#endif
