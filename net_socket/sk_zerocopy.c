/* strand-socket — zero-copy sends (MSG_ZEROCOPY): turning it on, and reading its completions.
 *
 * With SO_ZEROCOPY set, a sendmsg(MSG_ZEROCOPY) pins the caller's pages instead of copying them,
 * so the buffer stays in use after the call returns: until the data is acknowledged and every
 * clone of it freed. The kernel numbers each such call that took bytes (0, 1, 2, ... per socket)
 * and queues "ids lo..hi completed" on the socket's error queue; epoll reports that as EPOLLERR.
 * A chunk records the id of the last call that carried any of its bytes (sk_chunk_t.zc_need), and
 * is released (sk_stream_release) only when every id below that has completed, which is what allows
 * test() to say done and the caller to reuse the buffer.
 *
 * When the data has to be copied anyway (loopback, veth into another namespace, a NIC without
 * scatter-gather), the notification carries SO_EE_CODE_ZEROCOPY_COPIED: then zero-copy only adds
 * page pinning and notifications, so after STRAND_SOCKET_ZEROCOPY_COPIED_LIMIT such notifications
 * in a row the stream goes back to plain sends. Everything here runs on the stream's mover (its
 * worker, or the proxy thread with nthreads 0), like the rest of the stream's send state.
 * The send itself, and its fallback to copying when the kernel refuses MSG_ZEROCOPY, are in
 * sk_stream.c, which this file calls (release, errors) and which never calls back. */
#include <errno.h>
#include <time.h> /* linux/errqueue.h needs struct timespec */
#include <linux/errqueue.h>
#include <netinet/in.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/socket.h>

#include "sk.h"
#include "strand/log.h"

#ifndef SO_EE_ORIGIN_ZEROCOPY
#define SO_EE_ORIGIN_ZEROCOPY 5
#endif
#ifndef SO_EE_CODE_ZEROCOPY_COPIED
#define SO_EE_CODE_ZEROCOPY_COPIED 1
#endif

/* Said once per process: with many connections the same cause would repeat on every stream. */
static atomic_bool said_unsupported, said_copied;

static bool first_time(atomic_bool *flag) { return !atomic_exchange(flag, true); }

void sk_stream_zc_enable(sk_stream_t *s, size_t threshold) {
  s->zc_min = 0;
  if (threshold == 0) return;
  int one = 1;
  if (setsockopt(s->fd, SOL_SOCKET, SO_ZEROCOPY, &one, sizeof one) != 0) {
    int err = errno;
    if (first_time(&said_unsupported))
      STRAND_INFO(STRAND_SUBSYS_NET,
                  "SO_ZEROCOPY refused on data streams to %s: %s (kernel older than 4.14?); "
                  "sends copy, as with STRAND_SOCKET_ZEROCOPY_THRESHOLD=0", s->comm->peer,
                  strerror(err));
    return;
  }
  s->zc_min = threshold;
}

/* Marks ids lo..hi (inclusive, modulo 2^32) completed and advances zc_done over the completed
 * prefix. Ids outside [zc_done, zc_done + window) cannot be ours: send() never lets more than the
 * window be outstanding. */
static void complete_range(sk_stream_t *s, uint32_t lo, uint32_t hi) {
  for (uint32_t id = lo;; id++) {
    if (id - s->zc_done < SK_ZC_WINDOW) {
      uint32_t b = id % SK_ZC_WINDOW;
      s->zc_bits[b / 64] |= 1ULL << (b % 64);
    }
    if (id == hi) break;
  }
  for (;;) {
    uint32_t b = s->zc_done % SK_ZC_WINDOW;
    uint64_t mask = 1ULL << (b % 64);
    if (!(s->zc_bits[b / 64] & mask)) break;
    s->zc_bits[b / 64] &= ~mask;
    s->zc_done++;
  }
}

static void note_copied(sk_stream_t *s, bool copied) {
  if (!copied) {
    s->zc_copied = 0;
    return;
  }
  const int limit = sk_config()->zc_copied_limit;
  if (s->zc_min == 0 || limit == 0 || ++s->zc_copied < limit) return;
  s->zc_min = 0; /* outstanding ids still complete and are still reaped */
  if (first_time(&said_copied))
    STRAND_INFO(STRAND_SUBSYS_NET,
                "zero-copy sends on data stream %d to %s (dev %s) were copied by the kernel "
                "anyway (loopback, veth or a NIC without scatter-gather): MSG_ZEROCOPY is off "
                "for that stream, and for any other stream that sees the same (said once)",
                s->index, s->comm->peer, s->comm->dev_name);
}

bool sk_stream_zc_reap(sk_stream_t *s) {
  /* Drains the queue: the worker's epoll is edge-triggered, so notifications left behind would
   * wake nobody. The kernel merges adjacent notifications, so this is a few calls at most. */
  while (sk_stream_zc_pending(s)) {
    char ctl[CMSG_SPACE(sizeof(struct sock_extended_err) + sizeof(struct sockaddr_in6))];
    struct msghdr mh = {.msg_control = ctl, .msg_controllen = sizeof ctl};
    ssize_t n = recvmsg(s->fd, &mh, MSG_ERRQUEUE | MSG_DONTWAIT);
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) break;
      int err = errno;
      sk_comm_set_error(s->comm, STRAND_SYSTEM_ERROR,
                        "reading zero-copy completions of data stream %d to %s failed: %s; set "
                        "STRAND_SOCKET_ZEROCOPY_THRESHOLD=0 to work around it", s->index,
                        s->comm->peer, strerror(err));
      return false;
    }
    for (struct cmsghdr *cm = CMSG_FIRSTHDR(&mh); cm != NULL; cm = CMSG_NXTHDR(&mh, cm)) {
      if (!((cm->cmsg_level == SOL_IP && cm->cmsg_type == IP_RECVERR) ||
            (cm->cmsg_level == SOL_IPV6 && cm->cmsg_type == IPV6_RECVERR)))
        continue;
      struct sock_extended_err ee;
      memcpy(&ee, CMSG_DATA(cm), sizeof ee);
      if (ee.ee_origin != SO_EE_ORIGIN_ZEROCOPY || ee.ee_errno != 0) continue;
      complete_range(s, ee.ee_info, ee.ee_data);
      note_copied(s, (ee.ee_code & SO_EE_CODE_ZEROCOPY_COPIED) != 0);
    }
  }
  sk_stream_release(s);
  return true;
}
