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

enum { SK_MSG_CTS = 1, SK_MSG_SEND = 2, SK_MSG_ERR = 3 };

typedef struct { /* receiver -> sender: a receive was posted; followed by n sk_cts_entry_t */
  uint8_t type, n, slot, pad;
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
