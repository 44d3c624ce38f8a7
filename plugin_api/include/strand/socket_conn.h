/* Strand SDK — non-blocking TCP connection set-up and byte-moving helpers.
 *
 * NCCL polls connect() and accept() from its proxy service thread and expects each call to return
 * at once (spec §6.1). These helpers give a plugin state machines it can poll the same way:
 *
 *   listener side                               connector side
 *   strand_sock_listen(&l, addr, magic, opts)   (handle carries l.addr and l.nonce)
 *                                               strand_sock_connect_start(&c, addr, magic, nonce,
 *                                                                         &payload, opts)
 *   strand_sock_accept_progress(&l, &fd, ...)   strand_sock_connect_progress(&c, &fd)
 *     ... until STRAND_SOCK_DONE / _ERROR        ... until STRAND_SOCK_DONE / _ERROR
 *
 * Handshake: after TCP connects, the connector sends one fixed-size hello (STRAND_SOCK_HELLO_BYTES,
 * little-endian on the wire): magic (u64), nonce (u64), then the caller's strand_sock_payload_t.
 * The acceptor answers with a verdict (STRAND_SOCK_VERDICT_BYTES): "accepted" once magic and nonce
 * match the listener's, "refused: wrong nonce" when only the magic does (a stale or forged handle),
 * and nothing at all to strangers (port scanners, wrong magic, garbage, a peer closing or stalling
 * mid-hello), which are closed with a WARN naming the peer address. The connector is DONE only once
 * it read "accepted", so a bad handle fails connect itself (STRAND_INVALID_ARGUMENT) instead of
 * yielding a socket that fails later. Both sides must therefore be progressed concurrently (NCCL's
 * proxy threads, or one thread alternating connect and accept calls); a connector whose listener
 * is never polled fails at connect_timeout_ms.
 *
 * Hostile traffic: every pending hello is progressed in every accept call, independently of the
 * others, and a newly accepted connection is read at once; the table of pending connections is
 * bounded (STRAND_SOCK_MAX_PENDING, about 100 bytes each, no heap). When it is full, further
 * connections wait in the kernel's listen backlog (SOMAXCONN) until a slot frees up (a connection
 * handed out or dropped), and a waiting newcomer takes the slot of the oldest unverified
 * connection once that one has gone a tenth of handshake_timeout_ms without a complete hello. So a
 * burst of real peers larger than the table is served in turn, never dropped; a stranger delays a
 * real peer by at most that tenth (and only when strangers fill the whole table), and holds a
 * descriptor only until it leaves or handshake_timeout_ms passes.
 *
 * Every wait is bounded: connect (with retries on ECONNREFUSED and similar, exponential backoff)
 * ends with STRAND_TIMEOUT after connect_timeout_ms; a half-done hello is dropped after
 * handshake_timeout_ms. No progress call blocks, sleeps or loops waiting on the network.
 *
 * Thread safety: a listener or connect state belongs to one thread at a time (NCCL calls
 * connect/accept for one comm from one proxy thread); different objects are independent. */
#ifndef STRAND_SOCKET_CONN_H
#define STRAND_SOCKET_CONN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "strand/abi/types.h"
#include "strand/socket_addr.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Outcome of one non-blocking step. */
typedef enum {
  STRAND_SOCK_DONE = 0,        /* finished: the operation's outputs are valid */
  STRAND_SOCK_IN_PROGRESS = 1, /* nothing more can happen now; call again later */
  STRAND_SOCK_ERROR = 2,       /* failed for good; see errno / the object's `result` */
  STRAND_SOCK_CLOSED = 3       /* recv only: the peer closed the connection (orderly EOF) */
} strand_sock_status_t;
#define STRAND_SOCK_AGAIN STRAND_SOCK_IN_PROGRESS

/* Default handshake magic ("STRAND01" as little-endian ASCII). Plugins should pick their own so
 * that e.g. a socket plugin never accepts a connection meant for another transport's OOB port. */
#define STRAND_SOCK_MAGIC_DEFAULT 0x3130444e41525453ULL

/* ---------------------------------------------------------------------------------------------
 * Options
 * ------------------------------------------------------------------------------------------- */

typedef struct {
  int connect_timeout_ms;   /* total bound on connect incl. retries (default 30000) */
  int retry_initial_ms;     /* first backoff after a refused/failed attempt (default 20) */
  int retry_max_ms;         /* backoff doubles up to this (default 1000) */
  int handshake_timeout_ms; /* bound on a half-done hello, both sides (default 10000) */
  int accept_timeout_ms;    /* >0: accept_progress fails with STRAND_TIMEOUT when no valid
                               connection arrived this long after listen or the last DONE;
                               0 (default): unbounded, the caller's polling owns the bound */
  int sndbuf;               /* SO_SNDBUF bytes; <= 0 leaves the OS default (default -1) */
  int rcvbuf;               /* SO_RCVBUF bytes; <= 0 leaves the OS default (default -1) */
  int tos;                  /* IP_TOS / IPV6_TCLASS 0..255; < 0 leaves it (default -1) */
  int priority;             /* SO_PRIORITY; < 0 leaves it (default -1) */
  bool nodelay;             /* TCP_NODELAY (default true) */
} strand_sock_opts_t;

/* Fills the defaults listed above. */
void strand_sock_opts_default(strand_sock_opts_t *opts);

/* Applies nodelay/sndbuf/rcvbuf/tos/priority to a TCP socket. A failure of any option returns
 * STRAND_SYSTEM_ERROR with a WARN naming the option and errno text (the socket stays usable). */
strand_result_t strand_sock_apply_opts(int fd, int family, const strand_sock_opts_t *opts);

/* O_NONBLOCK on/off. STRAND_SYSTEM_ERROR on fcntl failure (no log). */
strand_result_t strand_sock_set_nonblocking(int fd, bool nonblocking);

/* ---------------------------------------------------------------------------------------------
 * Handshake payload
 * ------------------------------------------------------------------------------------------- */

#define STRAND_SOCK_PAYLOAD_USER_BYTES 16

/* What the connector tells the acceptor about this connection; opaque to the SDK. */
typedef struct {
  uint64_t conn_id;      /* e.g. an id grouping the streams of one NCCL connection */
  uint32_t stream_index; /* e.g. 0 = control socket, 1.. = data streams */
  uint32_t stream_type;
  uint8_t user[STRAND_SOCK_PAYLOAD_USER_BYTES];
} strand_sock_payload_t;

/* magic + nonce + conn_id + stream_index + stream_type + user. */
#define STRAND_SOCK_HELLO_BYTES (8 + 8 + 8 + 4 + 4 + STRAND_SOCK_PAYLOAD_USER_BYTES)

/* A random 64-bit value from getrandom() (never 0, so 0 can mean "no nonce"). Used for the
 * per-listener nonce; also handy for connection ids. STRAND_SYSTEM_ERROR (WARN) if the kernel has
 * no randomness to give. */
strand_result_t strand_sock_random_u64(uint64_t *out);

/* ---------------------------------------------------------------------------------------------
 * Listener and accept state machine
 * ------------------------------------------------------------------------------------------- */

/* Connections in handshake one listener holds at most; beyond, the oldest unverified one is dropped
 * for each newcomer. */
#define STRAND_SOCK_MAX_PENDING 256

/* The acceptor's answer to a hello: u32 STRAND_SOCK_VERDICT_TAG, u32 code (little-endian). */
#define STRAND_SOCK_VERDICT_BYTES 8
#define STRAND_SOCK_VERDICT_TAG 0x54434456u /* "VDCT" */
enum { STRAND_SOCK_VERDICT_ACCEPTED = 1, STRAND_SOCK_VERDICT_WRONG_NONCE = 2 };

/* One accepted TCP connection whose hello is still being read or waits to be handed out. */
typedef struct {
  int fd; /* -1 = free slot */
  strand_sockaddr_t peer;
  uint64_t deadline_ns; /* CLOCK_MONOTONIC; past it a half-done hello is dropped */
  uint64_t arrived_ns;  /* for dropping the oldest unverified one when the table is full */
  size_t got;
  size_t verdict_sent;  /* bytes of the "accepted" verdict written; handed out once complete */
  uint8_t hello[STRAND_SOCK_HELLO_BYTES];
} strand_sock_pending_t;

/* A listening socket plus the connections in handshake. Fields other than addr/nonce/magic/fd are
 * private. Embed it or allocate it (about 30 KiB); it needs no other storage. */
typedef struct {
  int fd;                 /* listening socket (non-blocking), -1 when closed */
  strand_sockaddr_t addr; /* bound address; the real port when port 0 was asked */
  uint64_t magic;
  uint64_t nonce;         /* random per listener: put it in the handle next to addr */
  strand_sock_opts_t opts;
  uint64_t idle_since_ns; /* for accept_timeout_ms */
  strand_result_t result; /* why accept_progress returned STRAND_SOCK_ERROR */
  int rejected;           /* strangers dropped so far (for tests and statistics) */
  int evicted;            /* of those, unverified ones dropped to make room (table full) */
  strand_sock_pending_t pending[STRAND_SOCK_MAX_PENDING];
} strand_sock_listener_t;

/* Creates a non-blocking listening socket bound to `addr` (port 0 = an ephemeral port; the
 * bound address, real port included, is written to l->addr) and draws a fresh nonce. `opts` may be
 * NULL for defaults; options are also applied to each accepted socket. Returns STRAND_SUCCESS, or
 * STRAND_SYSTEM_ERROR with a WARN naming the address and errno text (l->fd is then -1).
 * `magic` 0 selects STRAND_SOCK_MAGIC_DEFAULT. */
strand_result_t strand_sock_listen(strand_sock_listener_t *l, const strand_sockaddr_t *addr,
                                   uint64_t magic, const strand_sock_opts_t *opts);

/* One non-blocking step: accepts whatever the kernel has queued (while slots are free), reads
 * hello bytes from every pending connection, drops strangers and stalled peers (WARN each, with the
 * peer address and reason), and hands out at most one validated connection:
 *   DONE:        *fd_out is a connected, non-blocking TCP socket with opts applied, owned by the
 *                caller; *payload_out / *peer_out (each may be NULL) describe it.
 *   IN_PROGRESS: no valid connection yet.
 *   ERROR:       the listener itself failed (accept() error, or accept_timeout_ms passed);
 *                l->result says which (STRAND_SYSTEM_ERROR / STRAND_TIMEOUT); WARN logged.
 * Other pending connections are never disturbed by one peer's failure. */
strand_sock_status_t strand_sock_accept_progress(strand_sock_listener_t *l, int *fd_out,
                                                 strand_sock_payload_t *payload_out,
                                                 strand_sockaddr_t *peer_out);

/* Polls strand_sock_accept_progress until DONE/ERROR or `timeout_ms` (bootstrap use; blocks the
 * caller, sleeping in poll()). Returns STRAND_SUCCESS, STRAND_TIMEOUT (WARN naming the listen
 * address) or the listener's error. */
strand_result_t strand_sock_accept_wait(strand_sock_listener_t *l, int timeout_ms, int *fd_out,
                                        strand_sock_payload_t *payload_out,
                                        strand_sockaddr_t *peer_out);

/* Closes the listening socket and every pending connection. Idempotent. */
void strand_sock_listener_close(strand_sock_listener_t *l);

/* ---------------------------------------------------------------------------------------------
 * Connect state machine
 * ------------------------------------------------------------------------------------------- */

/* Private state of one outgoing connection; embed or allocate it. */
typedef struct {
  int fd;
  int state; /* private */
  strand_sockaddr_t peer;
  strand_sock_opts_t opts;
  uint64_t start_ns, deadline_ns, retry_at_ns, handshake_deadline_ns;
  int backoff_ms;
  int attempts;
  int last_errno;         /* errno of the last failed attempt, 0 if none */
  strand_result_t result; /* why progress returned STRAND_SOCK_ERROR */
  size_t sent;
  size_t verdict_got;
  uint8_t hello[STRAND_SOCK_HELLO_BYTES];
  uint8_t verdict[STRAND_SOCK_VERDICT_BYTES];
} strand_sock_connect_t;

/* Prepares a connection to `peer` (a listener's addr) carrying `magic` (0 = default), the
 * listener's `nonce` and `payload` (NULL = zeros). Does not touch the network yet: the first
 * strand_sock_connect_progress call starts the first attempt, so start never fails for network
 * reasons. STRAND_INVALID_ARGUMENT (WARN) for NULL, a peer of unknown family / port 0, or nonce 0
 * (listeners never draw 0: a zeroed or truncated handle). */
strand_result_t strand_sock_connect_start(strand_sock_connect_t *c, const strand_sockaddr_t *peer,
                                          uint64_t magic, uint64_t nonce,
                                          const strand_sock_payload_t *payload,
                                          const strand_sock_opts_t *opts);

/* One non-blocking step:
 *   DONE:        hello sent and the listener's "accepted" verdict read; *fd_out is a connected, non-blocking socket owned by the caller
 *                (the state no longer refers to it).
 *   IN_PROGRESS: TCP connect pending, waiting out a retry backoff, hello partially sent, or the
 *                verdict not read yet.
 *   ERROR:       c->result is STRAND_TIMEOUT (connect_timeout_ms passed while the peer refused or
 *                did not answer or give its verdict, or the hello could not be sent within
 *                handshake_timeout_ms), STRAND_INVALID_ARGUMENT (the listener refused the nonce,
 *                or answered something that is not a verdict: a stale, forged or foreign handle)
 *                or STRAND_SYSTEM_ERROR (a non-retryable error, e.g. no route, bad address); a
 *                WARN names the peer, the attempts made, errno text and what to check.
 * Retryable: ECONNREFUSED, ETIMEDOUT, ECONNRESET, EPIPE, EHOSTUNREACH, ENETUNREACH, EADDRNOTAVAIL,
 * EAGAIN (the listener may not be up yet, or its backlog was full), and a connection the listener
 * closed before giving a verdict (it may have dropped it to make room). Calling again after DONE or
 * ERROR returns the same status. */
strand_sock_status_t strand_sock_connect_progress(strand_sock_connect_t *c, int *fd_out);

/* Polls strand_sock_connect_progress until DONE/ERROR (bootstrap use; blocks the caller, bounded
 * by the connect and handshake timeouts). The listener must be progressed meanwhile by another
 * thread or process: the verdict needs it. Returns STRAND_SUCCESS or c->result. */
strand_result_t strand_sock_connect_wait(strand_sock_connect_t *c, int *fd_out);

/* Closes the socket of an unfinished connect (after ERROR, or to give up). Idempotent. */
void strand_sock_connect_abort(strand_sock_connect_t *c);

/* ---------------------------------------------------------------------------------------------
 * Moving bytes
 * ------------------------------------------------------------------------------------------- */

/* Sends buf[*offset..len) as far as the socket accepts without blocking (MSG_DONTWAIT |
 * MSG_NOSIGNAL, so it is safe on blocking sockets too and never raises SIGPIPE), advancing
 * *offset. EINTR is retried. DONE when *offset == len (also for len 0); IN_PROGRESS when the
 * socket buffer is full; ERROR with errno set (EPIPE/ECONNRESET when the peer is gone). No log. */
strand_sock_status_t strand_sock_send_some(int fd, const void *buf, size_t len, size_t *offset);

/* Receives into buf[*offset..len) likewise. CLOSED if the peer closed before len bytes arrived
 * (*offset tells how many did); ERROR with errno set otherwise. No log. */
strand_sock_status_t strand_sock_recv_some(int fd, void *buf, size_t len, size_t *offset);

/* Blocking-with-timeout variants for bootstrap code: move all `len` bytes or fail within
 * `timeout_ms` (total, not per chunk; < 0 = no bound, only for callers that bound it otherwise).
 * Return STRAND_SUCCESS, STRAND_TIMEOUT, STRAND_REMOTE_ERROR (peer closed or reset) or
 * STRAND_SYSTEM_ERROR, with errno set. No log: the caller knows what the bytes were for and should
 * WARN with that, the peer address and strerror(errno). */
strand_result_t strand_sock_send_all(int fd, const void *buf, size_t len, int timeout_ms);
strand_result_t strand_sock_recv_all(int fd, void *buf, size_t len, int timeout_ms);

#ifdef __cplusplus
}
#endif

#endif
