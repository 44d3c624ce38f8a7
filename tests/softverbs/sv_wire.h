/* softverbs wire format: every message on a QP's TCP stream starts with this 32-byte header.
 * Both ends are softverbs on the same architecture (little-endian x86-64 in practice), so fields
 * are in host order. Requests flow requester -> responder, responses the other way, on the
 * connection the requester opened. */
#ifndef SV_WIRE_H
#define SV_WIRE_H

#include <stdint.h>

#define SV_HELLO_MAGIC 0x53565331u /* "SVS1" */

enum sv_op {
  SV_OP_HELLO = 1,  /* requester -> responder: imm = magic, psn = src QPN, rkey = dst QPN */
  SV_OP_HELLO_ACK,  /* status 0 = bound to the QP, else refused (QP missing / not ready) */
  SV_OP_SEND,       /* len payload bytes follow */
  SV_OP_SEND_IMM,
  SV_OP_WRITE,      /* raddr/rkey/len, payload follows */
  SV_OP_WRITE_IMM,
  SV_OP_READ_REQ,   /* raddr/rkey/len, no payload */
  SV_OP_ACK,        /* cumulative: every request up to psn executed */
  SV_OP_NAK,        /* request psn failed with status (an ibv_wc_status); earlier ones done */
  SV_OP_RNR_NAK,    /* request psn waits for a receive buffer (sent every min_rnr_timer) */
  SV_OP_READ_RESP,  /* len bytes of data for READ psn follow */
  /* Atomics (appended, so the values above keep their numbers): raddr/rkey name the 8-byte word,
   * len is 16 and the payload is two 64-bit operands (sv_atomic_args_t). */
  SV_OP_FETCH_ADD,  /* word += add; the original value goes back */
  SV_OP_CMP_SWP,    /* if word == compare: word = swap; the original value goes back */
  SV_OP_ATOMIC_RESP, /* responder -> requester: raddr = the word's original value, no payload */
};

/* The payload of an atomic request. */
typedef struct {
  uint64_t compare_add; /* FETCH_ADD: the addend; CMP_SWP: the value compared with */
  uint64_t swap;        /* CMP_SWP: the value stored on a match; FETCH_ADD: unused */
} sv_atomic_args_t;

typedef struct {
  uint8_t op;
  uint8_t status;
  uint16_t rsvd;
  uint32_t imm;
  uint32_t psn; /* low 32 bits of the requester's send-queue sequence number */
  uint32_t rkey;
  uint64_t raddr;
  uint64_t len;
} sv_hdr_t;

_Static_assert(sizeof(sv_hdr_t) == 32, "wire header is 32 bytes");
_Static_assert(sizeof(sv_atomic_args_t) == 16, "atomic operands are 16 bytes");

#endif
