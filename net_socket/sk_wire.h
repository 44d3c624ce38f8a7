/* strand-socket — everything that goes on the wire: the control-stream messages (CTS, SEND, ERR),
 * the data-stream chunk header, and the listen handle the core carries out of band.
 *
 * Wire structs are in host byte order: both ends run the same plugin on the same architecture (a
 * magic mismatch is what an endianness mismatch would look like). Every size is pinned by a static
 * assert, so a field change that alters the format fails the build. */
#ifndef STRAND_NET_SOCKET_WIRE_H
#define STRAND_NET_SOCKET_WIRE_H

#include <stdint.h>

#include "strand/abi/types.h"
#include "strand/socket_addr.h"

/* "STRANDSK" little-endian: distinct from the SDK default so that no other Strand transport's
 * listener accepts our streams, or we theirs. */
#define SK_MAGIC 0x4b53444e41525453ULL

enum {
  SK_MSG_CTS = 1,      /* receiver -> sender */
  SK_MSG_SEND = 2,     /* sender -> receiver */
  SK_MSG_ERR = 3,      /* sender -> receiver */
  SK_MSG_EAGER = 4,    /* sender -> receiver: a small message sent without a CTS */
  SK_MSG_HELLO = 5,    /* sender -> receiver: first message, the sender's eager limit */
  SK_MSG_NEED_CTS = 6, /* sender -> receiver: a send waits for receives to be announced */
  SK_MSG_CREDIT = 7,   /* receiver -> sender: eager credits, and how far it has read */
  SK_MSG_EAGER_ERR = 8 /* receiver -> sender: an eager message was larger than its receive */
};

/* receiver -> sender: a receive was posted; followed by n sk_cts_entry_t. `taken` has bit i set
 * when entry i was already matched by an eager message when the CTS was written; the CREDIT
 * message written just before it says how many sender messages the receiver had read then. */
typedef struct {
  uint8_t type, n, slot, taken;
  uint32_t seq;
} sk_cts_hdr_t;
typedef struct {
  uint64_t size;
  int32_t tag;
  uint32_t pad;
} sk_cts_entry_t;

typedef struct { /* sender -> receiver: message for (slot, seq, idx); inline payload follows */
  uint8_t type, slot, idx, is_inline;
  uint32_t seq;
  uint64_t size;
} sk_send_hdr_t;

typedef struct { /* sender -> receiver: that message was larger than the posted receive */
  uint8_t type, slot, idx, pad;
  uint32_t seq;
  uint64_t size, posted;
} sk_err_msg_t;

/* Eager small messages (sk_xfer.c, "eager path"): the sender numbers every message that takes a
 * receive entry (SEND, ERR, EAGER) 0, 1, 2, ...; both ends apply the same matching rule to them. */
typedef struct { /* sender -> receiver: payload of `size` bytes follows; matched by the receiver */
  uint8_t type, pad[3];
  int32_t tag;
  uint64_t size;
} sk_eager_hdr_t;

typedef struct { /* sender -> receiver (first message), eager_max 0 = this sender sends no eager */
  uint8_t type, pad[3];
  uint32_t eager_max;
} sk_hello_msg_t;

typedef struct { /* sender -> receiver: announce every posted receive, return credits */
  uint8_t type, pad[7];
} sk_need_cts_msg_t;

typedef struct { /* receiver -> sender */
  uint8_t type, pad[3];
  uint32_t msgs_read;     /* sender messages the receiver had read when it wrote this */
  uint32_t credits;       /* eager messages the sender may have sent in all, ever (wraps) */
  uint32_t eager_max;     /* largest eager message the receiver buffers; 0 = none */
} sk_credit_msg_t;

typedef struct { /* receiver -> sender: an eager message did not fit the receive it matched */
  uint8_t type, pad[3];
  int32_t tag;
  uint64_t size, posted;
} sk_eager_err_msg_t;

typedef struct { /* data stream: one chunk header, then len payload bytes */
  uint32_t seq;
  uint8_t slot, idx;
  uint16_t pad;
  uint32_t offset, len;
} sk_chunk_hdr_t;

_Static_assert(sizeof(sk_cts_hdr_t) == 8, "wire");
_Static_assert(sizeof(sk_cts_entry_t) == 16, "wire");
_Static_assert(sizeof(sk_send_hdr_t) == 16, "wire");
_Static_assert(sizeof(sk_err_msg_t) == 24, "wire");
_Static_assert(sizeof(sk_chunk_hdr_t) == 16, "wire");
_Static_assert(sizeof(sk_eager_hdr_t) == 16, "wire");
_Static_assert(sizeof(sk_hello_msg_t) == 8, "wire");
_Static_assert(sizeof(sk_need_cts_msg_t) == 8, "wire");
_Static_assert(sizeof(sk_credit_msg_t) == 16, "wire");
_Static_assert(sizeof(sk_eager_err_msg_t) == 24, "wire");

/* The listen handle (<= NCCL_NET_HANDLE_MAXSIZE). Everything in it came from a peer (or from
 * anything that wrote the core's buffer) and is checked, never trusted: magic here, the address
 * by socket_conn, the nonce by the listener (its verdict fails connect). The connecting side keeps
 * the key of its connect state in `conn_key` between connect() calls (the core passes the same
 * buffer every time); the key is looked up in a table of live connect states and never used as an
 * address, so a forged or stale value only starts a fresh connect. */
typedef struct {
  uint64_t magic;
  strand_sockaddr_t addr;
  uint32_t pad;
  uint64_t nonce;
  uint64_t conn_key; /* 0 as produced by listen */
  uint64_t reserved;
} sk_handle_t;
_Static_assert(sizeof(sk_handle_t) <= STRAND_NET_HANDLE_MAXSIZE, "handle too large");

#endif
