/* strand-socket — the control-stream hand-off ring.
 *
 * Why: a send on a loopback (or any local) TCP socket runs the receiver's protocol work in the
 * sender's system call, so writing an 8-byte eager message holds NCCL's proxy thread for ~3.5 us
 * (docs/benchmarks/socket.md, the 4-GPU proxy-step profile), time in which it cannot post or poll
 * its other steps. When a worker is already awake, the proxy copies the few bytes here and returns;
 * the worker writes them. The ring is a single-producer single-consumer byte queue: the proxy
 * appends (sk_handoff_put), the worker that owns the connection's control ring writes and advances
 * tail (sk_handoff_write). A request is done once tail has passed its bytes (sk_xfer.c), so the
 * completion rule of the proxy-written path holds unchanged. */
#include <errno.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include "sk.h"

#define SK_HANDOFF_ROUNDS 8 /* sendmsg calls per visit, so one connection cannot starve others */

static void ring_copy_in(sk_handoff_t *h, uint64_t at, const void *src, size_t len) {
  size_t off = (size_t)(at % SK_HANDOFF_RING);
  size_t first = len < SK_HANDOFF_RING - off ? len : SK_HANDOFF_RING - off;
  memcpy(h->buf + off, src, first);
  if (len > first) memcpy(h->buf, (const char *)src + first, len - first);
}

bool sk_handoff_put(sk_handoff_t *h, const void *hdr, size_t hl, const void *payload, size_t pl) {
  uint64_t head = atomic_load_explicit(&h->head, memory_order_relaxed);
  /* acquire: the worker's sendmsg read the bytes before it moved tail past them */
  uint64_t tail = atomic_load_explicit(&h->tail, memory_order_acquire);
  if (SK_HANDOFF_RING - (head - tail) < hl + pl) return false;
  ring_copy_in(h, head, hdr, hl);
  if (pl > 0) ring_copy_in(h, head + hl, payload, pl);
  atomic_store_explicit(&h->head, head + hl + pl, memory_order_release);
  h->msgs++;
  return true;
}

bool sk_handoff_write(sk_comm_t *c, bool *blocked) {
  sk_handoff_t *h = c->handoff;
  bool progress = false;
  *blocked = false;
  if (h->failed) return false;
  for (int round = 0; round < SK_HANDOFF_ROUNDS; round++) {
    uint64_t tail = atomic_load_explicit(&h->tail, memory_order_relaxed);
    uint64_t head = atomic_load_explicit(&h->head, memory_order_acquire);
    if (tail == head) break;
    size_t off = (size_t)(tail % SK_HANDOFF_RING), len = (size_t)(head - tail);
    struct iovec iov[2];
    int niov = 1;
    iov[0].iov_base = h->buf + off;
    iov[0].iov_len = len < SK_HANDOFF_RING - off ? len : SK_HANDOFF_RING - off;
    if (iov[0].iov_len < len) {
      iov[1].iov_base = h->buf;
      iov[1].iov_len = len - iov[0].iov_len;
      niov = 2;
    }
    struct msghdr mh = {.msg_iov = iov, .msg_iovlen = (size_t)niov};
    ssize_t n = sendmsg(c->ctrl_fd, &mh, MSG_DONTWAIT | MSG_NOSIGNAL);
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) {
        *blocked = true;
        break;
      }
      int err = errno;
      h->failed = true;
      sk_comm_set_error(c, sk_errno_result(err),
                        "send on the control stream failed: %s (peer process gone?)%s",
                        strerror(err), sk_errno_hint(err));
      return progress;
    }
    progress = true;
    atomic_store_explicit(&h->tail, tail + (uint64_t)n, memory_order_release);
  }
  return progress;
}
