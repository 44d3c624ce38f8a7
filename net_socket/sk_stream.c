/* strand-socket — moving chunks over one data stream.
 *
 * The same two functions serve a worker thread (woken by epoll) and the proxy thread (nthreads=0):
 * each call moves what the socket accepts without blocking and reports whether it would block.
 * A stream is driven by exactly one of them, so the per-stream cursors need no lock; only the
 * chunk ring (proxy produces, mover consumes) and the completion counters are shared. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include "sk.h"
#include "strand/log.h"

#define SK_IOV_CHUNKS 8   /* chunks gathered into one sendmsg */
#define SK_SEND_ROUNDS 8  /* sendmsg calls per visit, so one busy stream cannot starve others */
#define SK_RECV_ROUNDS 16

/* Said once per process: with many connections the same cause would repeat on every stream. */
static atomic_bool said_nobufs;

/* A MSG_ZEROCOPY send was refused with ENOBUFS: the chunk is sent by copying. */
static void zc_nobufs(sk_stream_t *s) {
  if (!atomic_exchange(&said_nobufs, true))
    STRAND_INFO(STRAND_SUBSYS_NET,
                "MSG_ZEROCOPY send on data stream %d to %s refused with ENOBUFS (option memory "
                "or locked-memory limit); such chunks are sent by copying. If this is frequent, "
                "raise net.core.optmem_max or RLIMIT_MEMLOCK, or set "
                "STRAND_SOCKET_ZEROCOPY_THRESHOLD=0", s->index, s->comm->peer);
}

void sk_comm_set_error(sk_comm_t *c, strand_result_t rc, const char *fmt, ...) {
  int expected = 0;
  /* First error wins; the message is complete before `error` becomes visible (release). */
  if (atomic_load_explicit(&c->error, memory_order_acquire) != 0) return;
  va_list ap;
  char msg[sizeof c->errmsg];
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  /* Two threads (a worker and the proxy) may fail at once: claim with a CAS on a sentinel. */
  if (!atomic_compare_exchange_strong(&c->error, &expected, -1)) return;
  memcpy(c->errmsg, msg, sizeof msg);
  atomic_store_explicit(&c->error, (int)rc, memory_order_release);
}

const char *sk_errno_hint(int err) {
  if (err == ETIMEDOUT)
    return "; nothing was acknowledged for STRAND_SOCKET_PEER_TIMEOUT_S: the peer host is down or "
           "the link was down longer than that (raise it to ride out longer flaps)";
  if (err == EHOSTUNREACH || err == ENETUNREACH || err == ENETDOWN || err == EHOSTDOWN)
    return "; the route to the peer is gone: check the link and NCCL_SOCKET_IFNAME";
  return "";
}

strand_result_t sk_errno_result(int err) {
  return (err == ECONNRESET || err == EPIPE || err == ETIMEDOUT || err == ECONNABORTED ||
          err == EHOSTUNREACH || err == ENETUNREACH || err == EHOSTDOWN || err == ENETDOWN)
             ? STRAND_REMOTE_ERROR
             : STRAND_SYSTEM_ERROR;
}

/* Hands back, in ring order, the chunks the kernel no longer references: their requests may
 * complete (the caller may reuse the buffer) and the producer may reuse their slots. Without
 * zero-copy a chunk is released as soon as its last byte was sent. */
void sk_stream_release(sk_stream_t *s) {
  uint32_t r = atomic_load_explicit(&s->released, memory_order_relaxed);
  const uint32_t tail = atomic_load_explicit(&s->tail, memory_order_relaxed);
  while (r != tail) {
    sk_chunk_t *ch = &s->ring[r % SK_RING];
    if ((int32_t)(s->zc_done - ch->zc_need) < 0) break; /* an id it needs is still out */
    uint32_t len = ch->len;
    sk_send_req_t *req = ch->req;
    r++;
    /* The slot is the producer's again from here on: read it before. */
    atomic_store_explicit(&s->released, r, memory_order_release);
    /* Last touch of req: the proxy may recycle it as soon as bytes_done reaches size. */
    atomic_fetch_add_explicit(&req->bytes_done, len, memory_order_release);
  }
}

static bool zc_eligible(const sk_stream_t *s, const sk_chunk_t *ch) {
  return s->zc_min != 0 && ch->len >= s->zc_min;
}

bool sk_stream_send(sk_stream_t *s, bool *progress, bool *blocked) {
  *progress = false;
  *blocked = false;
  for (int round = 0; round < SK_SEND_ROUNDS; round++) {
    uint32_t tail = atomic_load_explicit(&s->tail, memory_order_relaxed);
    uint32_t head = atomic_load_explicit(&s->head, memory_order_acquire);
    if (tail == head) break;
    /* One sendmsg gathers chunks of one kind only: all zero-copy or all copied. */
    const bool eligible = zc_eligible(s, &s->ring[tail % SK_RING]);
    bool zc = eligible && s->zc_next - s->zc_done < SK_ZC_WINDOW;
    struct iovec iov[2 * SK_IOV_CHUNKS];
    int niov = 0;
    size_t total = 0, skip = s->cur_sent;
    for (uint32_t i = tail; i != head && niov + 2 <= 2 * SK_IOV_CHUNKS; i++) {
      sk_chunk_t *ch = &s->ring[i % SK_RING];
      if (i != tail && zc_eligible(s, ch) != eligible) break;
      if (skip < sizeof ch->hdr) {
        iov[niov].iov_base = (char *)&ch->hdr + skip;
        iov[niov].iov_len = sizeof ch->hdr - skip;
        total += iov[niov++].iov_len;
        iov[niov].iov_base = ch->data;
        iov[niov].iov_len = ch->len;
      } else {
        iov[niov].iov_base = ch->data + (skip - sizeof ch->hdr);
        iov[niov].iov_len = ch->len - (skip - sizeof ch->hdr);
      }
      total += iov[niov++].iov_len;
      skip = 0;
    }
    struct msghdr mh = {.msg_iov = iov, .msg_iovlen = (size_t)niov};
    ssize_t n = sendmsg(s->fd, &mh, MSG_DONTWAIT | MSG_NOSIGNAL | (zc ? MSG_ZEROCOPY : 0));
    if (n < 0 && zc && errno == ENOBUFS) {
      /* No option memory for the notification (net.core.optmem_max) or no locked-memory
       * allowance for the pinned pages: send this one by copying. */
      zc_nobufs(s);
      zc = false;
      n = sendmsg(s->fd, &mh, MSG_DONTWAIT | MSG_NOSIGNAL);
    }
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) {
        *blocked = true;
        break;
      }
      int err = errno;
      sk_comm_set_error(s->comm, sk_errno_result(err),
                        "send on data stream %d to %s failed: %s (peer process gone or network "
                        "down?)%s", s->index, s->comm->peer, strerror(err), sk_errno_hint(err));
      return false;
    }
    *progress = true;
    /* The kernel gave this call the next id (only calls that took bytes get one). */
    if (zc && n > 0) s->zc_next++;
    size_t left = (size_t)n;
    while (left > 0) {
      sk_chunk_t *ch = &s->ring[tail % SK_RING];
      /* Every chunk with bytes in this call waits for this call's id (copied: for the ids
       * before it, which keeps releases in ring order). */
      ch->zc_need = s->zc_next;
      size_t rem = sizeof ch->hdr + ch->len - s->cur_sent;
      if (left < rem) {
        s->cur_sent += left;
        break;
      }
      left -= rem;
      s->cur_sent = 0;
      atomic_fetch_sub_explicit(&s->queued, ch->len, memory_order_relaxed);
      tail++;
      atomic_store_explicit(&s->tail, tail, memory_order_release);
    }
    if ((size_t)n < total) {
      *blocked = true;
      break;
    }
  }
  sk_stream_release(s);
  return true;
}

/* Turns a complete chunk header into a destination inside a posted receive. */
static bool resolve_chunk(sk_stream_t *s) {
  sk_comm_t *c = s->comm;
  const sk_chunk_hdr_t *h = &s->rhdr;
  sk_recv_slot_t *slot = h->slot < SK_RECV_SLOTS ? strand_pool_at(&c->slots, h->slot) : NULL;
  if (slot == NULL ||
      atomic_load_explicit(&slot->active_seq, memory_order_acquire) != h->seq + 1 ||
      h->idx >= slot->n || h->len == 0 ||
      (uint64_t)h->offset + h->len > slot->e[h->idx].posted) {
    sk_comm_set_error(c, STRAND_REMOTE_ERROR,
                      "protocol error on data stream %d from %s: chunk (slot %u seq %u index %u "
                      "offset %u length %u) matches no posted receive; is the peer running the "
                      "same strand-socket version?", s->index, c->peer, h->slot, h->seq, h->idx,
                      h->offset, h->len);
    return false;
  }
  s->rdst = slot->e[h->idx].data + h->offset;
  s->rcounter = &slot->e[h->idx].bytes_done;
  s->rdata_got = 0;
  return true;
}

static bool recv_failed(sk_stream_t *s, ssize_t n, const char *what) {
  if (n == 0) {
    sk_comm_set_error(s->comm, STRAND_REMOTE_ERROR,
                      "peer %s closed data stream %d in the middle of a %s (peer process died "
                      "or closed the connection early)", s->comm->peer, s->index, what);
  } else {
    int err = errno;
    sk_comm_set_error(s->comm, sk_errno_result(err), "receive on data stream %d from %s failed: %s%s",
                      s->index, s->comm->peer, strerror(err), sk_errno_hint(err));
  }
  return false;
}

bool sk_stream_recv(sk_stream_t *s, bool *progress, bool *blocked) {
  *progress = false;
  *blocked = false;
  for (int round = 0; round < SK_RECV_ROUNDS; round++) {
    if (s->rdst == NULL) {
      if (s->rhdr_got < sizeof s->rhdr) {
        ssize_t n = recv(s->fd, (char *)&s->rhdr + s->rhdr_got, sizeof s->rhdr - s->rhdr_got,
                         MSG_DONTWAIT);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
          *blocked = true;
          return true;
        }
        if (n == 0 && s->rhdr_got == 0) { /* orderly close between chunks */
          atomic_store_explicit(&s->eof, true, memory_order_release);
          *blocked = true;
          return true;
        }
        if (n <= 0) return recv_failed(s, n, "chunk header");
        *progress = true;
        s->rhdr_got += (size_t)n;
        if (s->rhdr_got < sizeof s->rhdr) continue;
      }
      if (!resolve_chunk(s)) return false;
    }
    /* Payload straight into the posted buffer, plus the next header if it is already there. */
    size_t want = s->rhdr.len - s->rdata_got;
    struct iovec iov[2] = {{s->rdst + s->rdata_got, want}, {&s->rnext, sizeof s->rnext}};
    struct msghdr mh = {.msg_iov = iov, .msg_iovlen = 2};
    ssize_t n = recvmsg(s->fd, &mh, MSG_DONTWAIT);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      *blocked = true;
      return true;
    }
    if (n <= 0) return recv_failed(s, n, "chunk");
    *progress = true;
    if ((size_t)n < want) {
      s->rdata_got += (size_t)n;
      continue;
    }
    atomic_fetch_add_explicit(s->rcounter, s->rhdr.len, memory_order_release);
    size_t extra = (size_t)n - want;
    if (extra > 0) memcpy(&s->rhdr, &s->rnext, extra);
    s->rhdr_got = extra;
    s->rdst = NULL;
    s->rcounter = NULL;
  }
  return true;
}
