/* strand-conform — the bootstrap wire protocol, shared by the coordinator and rank sides
 * (bootstrap.c) and the runner (runner.c). Internal to tests/conform.
 *
 * Every frame is a 16-byte header (type, a, b, len; network byte order) and `len` payload bytes.
 * Two kinds of connection reach the coordinator:
 *   control  one per rank parent, for the whole run: HELLO (the run's item list), WELCOME,
 *            RESULT per item, ABORT_ITEM (another rank failed: stop your child soon), FINAL.
 *   session  one per check child: JOIN, GATHER / GATHER_RESULT (allgather, barrier), SEND / MSG
 *            (point to point), DONE, ABORT (another rank failed or died), PEER_GONE. */
#ifndef STRAND_CONFORM_BOOTSTRAP_H
#define STRAND_CONFORM_BOOTSTRAP_H

#include <stddef.h>
#include <stdint.h>

#include "conform_internal.h"

enum {
  BS_HELLO = 1,      /* rank -> coord: a = rank, b = nranks, payload = run description */
  BS_WELCOME,        /* coord -> rank: every rank joined, start */
  BS_RESULT,         /* rank -> coord: a = item, payload = conform_rank_result_t */
  BS_ABORT_ITEM,     /* coord -> rank: a = item, payload = reason */
  BS_FINAL,          /* coord -> rank: a = passed, b = failed, payload = "skipped\0fatal" */
  BS_JOIN = 16,      /* child -> coord: a = item, b = rank */
  BS_GATHER,         /* child -> coord: payload = contribution */
  BS_GATHER_RESULT,  /* coord -> child: payload = contributions in rank order */
  BS_SEND,           /* child -> coord: a = destination rank */
  BS_MSG,            /* coord -> child: a = source rank */
  BS_DONE,           /* child -> coord: a = status */
  BS_ABORT,          /* coord -> child: payload = reason */
  BS_PEER_GONE,      /* coord -> child: a = rank that left the check */
};

typedef struct {
  uint32_t type;
  int32_t a, b;
  uint32_t len;
} bs_hdr_t;

/* Blocking framed I/O with a deadline (conform_now() value; <= 0 = no deadline). */
int bs_write_frame(int fd, uint32_t type, int32_t a, int32_t b, const void *payload, uint32_t len);
/* Reads one frame; *payload is malloc'd (NULL when len == 0). Returns 0, or -1 on EOF/error/time. */
int bs_read_frame(int fd, bs_hdr_t *h, void **payload, double deadline);
/* TCP helpers. */
int bs_connect(const char *hostport, double deadline, char *err, size_t errlen);
int bs_parse_hostport(const char *hostport, char *host, size_t hlen, char *port, size_t plen);

/* Check-child side of a session. */
int conform_session_open(conform_ctx_t *c, const char *hostport, int item);
void conform_session_done(conform_ctx_t *c);

#endif
