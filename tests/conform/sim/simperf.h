/* strand-conform — pieces shared by the `sim` and `perf` subcommands (sim.c, perf.c, rawtcp.c).
 *
 * Why these exist next to harness.c's wrappers: conform_isend/irecv/wait retry or poll until done,
 * which is the right shape for a check that moves one message at a time. A proxy that keeps many
 * connections busy must instead try each call ONCE and come back later (NCCL's progress loop,
 * §6.2, §6.5): blocking in one connection's isend while another connection's receive waits to be
 * reposted can deadlock two ranks. The single-attempt calls below are that primitive; they record
 * failures through conform_fail like the harness's wrappers. */
#ifndef STRAND_CONFORM_SIMPERF_H
#define STRAND_CONFORM_SIMPERF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include "conform_internal.h"

/* Opaque profiler handle, never dereferenced by a correct plugin (same role as harness.c's). */
extern char simperf_phandle_dummy[64];

/* One isend attempt: 0 with *req set (or NULL = "cannot post now, retry"), -1 on error (recorded). */
int simperf_try_isend(conform_ctx_t *c, void *comm, void *data, size_t size, int tag, void *mh,
                      void **req);
/* One irecv attempt. `sentinel`: preset *req to NCCL_NET_OPTIONAL_RECV_COMPLETION first, as the core
 * does for LL/LL128 receives with n == 1 (§6.6); a plugin that leaves the sentinel in place fails. */
int simperf_try_irecv(conform_ctx_t *c, void *comm, int n, void **data, size_t *sizes, int *tags,
                      void **mhs, bool sentinel, void **req);
/* One test() call: 0 with *done set, -1 on error (recorded). */
int simperf_try_test(conform_ctx_t *c, void *req, int *done, int *sizes, const char *what);

/* "512 B", "4 KiB", "64 MiB" when exact, else the byte count. */
const char *simperf_size_str(size_t bytes, char *buf, size_t len);

/* Pull the options a subcommand understands out of argv (getopt_long-style "--name VALUE" or
 * "--name=VALUE"; `flag` options take no value). Everything else is kept in order, so the result
 * can go to conform_parse_opts. Returns the new argc, or -1 after printing a usage error. */
typedef struct {
  const char *name;  /* without the leading "--" */
  bool flag;         /* no value */
  int id;
} simperf_opt_t;
typedef int (*simperf_opt_cb)(int id, const char *value, void *arg); /* 0 ok, -1 bad value */
int simperf_take_opts(int argc, char **argv, const simperf_opt_t *opts, simperf_opt_cb cb,
                      void *arg, const char *cmd);

/* ------------------------------------------------------------------------------------------- */
/* rawtcp.c — the raw-TCP reference of `perf --ref tcp`: `streams` TCP connections per direction
 * between this rank and its ring neighbours (send to c->next, receive from c->prev), with the same
 * request shape as a plugin (post, then test) so that perf.c runs one measurement loop for both.
 * A message is cut into up to `streams` chunks of at least RAWTCP_MIN_CHUNK bytes, chunk j of
 * message k on stream (k + j) % streams; the caller (in post/test) and one worker thread per
 * stream and direction move the chunks with non-blocking I/O (see rawtcp.c). */
#define RAWTCP_MAX_STREAMS 64
#define RAWTCP_MIN_CHUNK (64 * 1024)
#define RAWTCP_RING 1024 /* messages in flight per direction (depth x group fits) */

typedef struct rawtcp rawtcp_t;

/* Pick this rank's address for the reference: `ref_addr` when given, else the first IPv4 (then
 * IPv6) address of the interface named `ifname` (the plugin's device name), else NULL is returned
 * with `why` set. */
int rawtcp_local_addr(const char *ref_addr, const char *ifname, struct sockaddr_storage *ss,
                      char *desc, size_t desclen, char *why, size_t whylen);
/* Collective over all ranks of the check (allgather of addresses). NULL with a failure recorded. */
rawtcp_t *rawtcp_open(conform_ctx_t *c, const struct sockaddr_storage *local, int streams);
void rawtcp_close(rawtcp_t *t);
/* Post a send / a receive of `n` messages (sizes known by both sides: there is no header, this is
 * the floor a TCP transport can reach). *req NULL = ring full, retry. -1 on error (recorded). */
int rawtcp_isend(conform_ctx_t *c, rawtcp_t *t, void *buf, size_t size, void **req);
int rawtcp_irecv(conform_ctx_t *c, rawtcp_t *t, int n, void **bufs, const size_t *sizes, void **req);
/* Non-blocking completion test; frees the request when done. */
int rawtcp_test(conform_ctx_t *c, rawtcp_t *t, void *req, int *done);
/* Latency path: send / receive of one message on stream 0 in the calling thread, polled without
 * sleeping (no hand-off, no wake-up: the best a TCP transport can do). Only while nothing else is
 * in flight. */
int rawtcp_send_now(conform_ctx_t *c, rawtcp_t *t, const void *buf, size_t size);
int rawtcp_recv_now(conform_ctx_t *c, rawtcp_t *t, void *buf, size_t size);

#endif
