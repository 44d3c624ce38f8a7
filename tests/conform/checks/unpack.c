/* strand-conform — unpack.*: a plugin reporting NCCL_NET_DEVICE_UNPACK (v7), driven the way NCCL's
 * core drives it, with NCCL's Simple-protocol kernel played on the CPU (docs/spec/device-unpack.md
 * §2-3). For every receive, in posting order, once test() said done: head++ (waitPeer), read
 * cnt[head % 16] with acquire, validate the records (count, bounds, disjoint destinations, exact
 * coverage of the bytes test() reported), gather them from bounce_buf into the FIFO slot with the
 * reference copy, store head back into the handle (kernel exit), then irecvConsumed. The FIFO slot
 * is zeroed first, so data can only arrive there through the records.
 *
 * Any UNPACK plugin is checkable without a GPU as long as its device handle, ring and bounce
 * buffer are CPU-readable (host or host-mapped memory; with UVA the device pointers of mapped
 * memory are the host ones). A plugin whose bounce buffer is device-only memory (TCPX: HBM imported
 * from a daemon) would fault here, and the fault is reported against the check. A plugin that does
 * not report UNPACK, or ABI v6 (accept has no device handle), gets a skip saying so. */
#include <stdlib.h>
#include <string.h>

#include "conform.h"
#include "strand/unpack.h"

#define DEPTH STRAND_UNPACK_MAX_QUEUE_DEPTH

typedef struct {
  conform_link_t l;
  bool open;
  strand_dev_handle_t dh;
  strand_unpack_handle_t *h; /* CPU view of dh.handle */
  uint64_t head;             /* the kernel stand-in's head (starts at the handle's) */
  conform_buf_t s, r;        /* send buffers and the receive "FIFO": nslots x slot bytes */
  void *smh, *rmh;
  size_t slot;
  int nslots;
} up_t;

static conform_status_t up_gate(conform_ctx_t *c) {
  if (c->version < 7)
    return conform_skip(c, "not applicable at ABI v%d: accept has no device handle (UNPACK needs "
                        "v7+)", c->version);
  strand_props_v12_t p;
  if (conform_props(c, 0, &p)) return CONFORM_FAIL;
  if (p.netDeviceType != STRAND_DEV_UNPACK)
    return conform_skip(c, "not applicable: device 0 reports netDeviceType %d, not "
                        "NCCL_NET_DEVICE_UNPACK", (int)p.netDeviceType);
  return CONFORM_PASS;
}

static void up_close(conform_ctx_t *c, up_t *x) {
  if (x->smh) conform_dereg(c, x->l.send_comm, x->smh);
  if (x->rmh) conform_dereg(c, x->l.recv_comm, x->rmh);
  conform_buf_free(&x->s);
  conform_buf_free(&x->r);
  if (x->open) conform_link_close(c, &x->l);
}

/* Connects with a device handle and checks what accept put in it (spec §2.1-2.3). */
static int up_open(conform_ctx_t *c, up_t *x, size_t slot, int nslots) {
  memset(x, 0, sizeof *x);
  if (conform_link_open_unpack(c, 0, &x->l, &x->dh)) return -1;
  x->open = true;
  const strand_dev_handle_t *d = &x->dh;
  if (d->netDeviceType != STRAND_DEV_UNPACK || d->netDeviceVersion != STRAND_NET_DEVICE_UNPACK_VERSION) {
    conform_fail(c, "accept left the device handle as netDeviceType %d version 0x%x (want UNPACK "
                 "0x7)", (int)d->netDeviceType, (unsigned)d->netDeviceVersion);
    return -1;
  }
  if (d->handle == NULL) {
    conform_fail(c, "accept returned a recvComm but left ncclNetDeviceHandle.handle NULL: NCCL's "
                 "kernel would dereference NULL");
    return -1;
  }
  if (d->needsProxyProgress != 1)
    conform_fail(c, "needsProxyProgress is %d: with 0 NCCL installs no receive progress for the "
                 "connection", d->needsProxyProgress);
  x->h = d->handle;
  if (x->h->meta == NULL || x->h->bounce_buf == NULL) {
    conform_fail(c, "unpack handle has meta %p, bounce_buf %p", (void *)x->h->meta, x->h->bounce_buf);
    return -1;
  }
  if (((uintptr_t)x->h->meta | (uintptr_t)x->h->bounce_buf) % 16 != 0)
    conform_fail(c, "meta %p / bounce_buf %p not 16-byte aligned (the kernel loads 16 bytes)",
                 (void *)x->h->meta, x->h->bounce_buf);
  if (x->h->head != UINT64_MAX)
    conform_fail(c, "handle head starts at %llu, not UINT64_MAX: the kernel increments before use, "
                 "so the first slice would read slot %llu instead of 0",
                 (unsigned long long)x->h->head, (unsigned long long)((x->h->head + 1) % DEPTH));
  x->head = x->h->head;
  x->slot = slot;
  x->nslots = nslots;
  size_t total = slot * (size_t)nslots;
  if (conform_buf_alloc(&x->s, total, 0) || conform_buf_alloc(&x->r, total, 0)) {
    conform_fail(c, "out of memory for 2 x %zu bytes", total);
    return -1;
  }
  if (conform_reg(c, x->l.send_comm, x->s.data, total, STRAND_PTR_HOST, &x->smh)) return -1;
  if (conform_reg(c, x->l.recv_comm, x->r.data, total, STRAND_PTR_HOST, &x->rmh)) return -1;
  return c->status == CONFORM_FAIL ? -1 : 0;
}

/* NCCL's kernel for one receive of `size` bytes (test() said done) into `dst` (posted bytes). */
static int up_kernel(conform_ctx_t *c, up_t *x, unsigned char *dst, size_t posted, size_t size,
                     int k) {
  uint64_t head = ++x->head; /* waitPeer */
  unsigned slot = (unsigned)(head % DEPTH);
  strand_unpack_meta_t *m = x->h->meta;
  uint64_t cnt = __atomic_load_n(&m->cnt[slot], __ATOMIC_ACQUIRE);
  char why[256];
  if (strand_unpack_validate(m->mem[slot], cnt, (uint64_t)1 << 32, posted, why, sizeof why)) {
    conform_fail(c, "receive %d (slot %u, head %llu): %s", k, slot, (unsigned long long)head, why);
    return -1;
  }
  uint64_t covered = strand_unpack_bytes(m->mem[slot], cnt);
  for (uint64_t i = 0; i < cnt && covered == size; i++)
    if (m->mem[slot][i].dst_off + m->mem[slot][i].len > size) covered = UINT64_MAX;
  if (covered != size) {
    conform_fail(c, "receive %d of %zu bytes (slot %u): its %llu records cover %s bytes, not "
                 "exactly [0, %zu): the ring is out of step with the receives, or cnt/records were "
                 "not published before test() reported done", k, size, slot,
                 (unsigned long long)cnt, covered == UINT64_MAX ? "bytes past the received" :
                 "a different number of", size);
    return -1;
  }
  strand_unpack_ref(x->h->bounce_buf, dst, m->mem[slot], cnt);
  x->h->head = head; /* kernel exit saves head into the handle */
  return 0;
}

static int up_consumed(conform_ctx_t *c, up_t *x, void *req, int k) {
  conform_phase(c, "irecvConsumed(receive %d)", k);
  strand_result_t r = c->net->irecvConsumed(x->l.recv_comm, 1, req);
  if (r != STRAND_SUCCESS) {
    conform_fail(c, "irecvConsumed of receive %d (in posting order, after the gather) returned %s",
                 k, conform_result_str(r));
    return -1;
  }
  return 0;
}

/* Posts receive k (FIFO slot k % nslots) and its matching send. */
static int up_post(conform_ctx_t *c, up_t *x, int k, size_t size, uint64_t salt, void **rreq,
                   void **sreq) {
  unsigned char *rp = x->r.data + (size_t)(k % x->nslots) * x->slot;
  unsigned char *sp = x->s.data + (size_t)(k % x->nslots) * x->slot;
  memset(rp, 0, x->slot);
  conform_fill(sp, size, conform_seed(c->rank, c->next, salt + (uint64_t)k));
  void *rdata = rp;
  size_t psz = size;
  int tag = c->prev;
  if (conform_irecv(c, x->l.recv_comm, 1, &rdata, &psz, &tag, &x->rmh, rreq)) return -1;
  return conform_isend(c, x->l.send_comm, sp, size, c->rank, x->smh, sreq);
}

/* n messages each way with up to `depth` in flight, every one gathered by the CPU kernel in
 * posting order and verified, then consumed. */
static conform_status_t up_stream(conform_ctx_t *c, const size_t *sizes, int n, int depth,
                                  uint64_t salt) {
  conform_status_t g = up_gate(c);
  if (g != CONFORM_PASS) return g;
  size_t max = 1;
  for (int i = 0; i < n; i++) max = sizes[i] > max ? sizes[i] : max;
  up_t x;
  void *rreq[DEPTH], *sreq[DEPTH];
  if (up_open(c, &x, max, depth) == 0) {
    int posted = 0;
    for (int k = 0; k < n; k++) {
      while (posted < n && posted - k < depth) {
        if (up_post(c, &x, posted, sizes[posted], salt, &rreq[posted % DEPTH], &sreq[posted % DEPTH]))
          goto out;
        posted++;
      }
      int got = -1;
      if (conform_wait_pair(c, sreq[k % DEPTH], rreq[k % DEPTH], &got)) goto out;
      if (got < 0 || (size_t)got != sizes[k]) {
        conform_fail(c, "receive %d of %zu bytes: test() reported %d bytes (unpack plugins must "
                     "report true sizes)", k, sizes[k], got);
        goto out;
      }
      unsigned char *rp = x.r.data + (size_t)(k % depth) * x.slot;
      if (up_kernel(c, &x, rp, sizes[k], sizes[k], k)) goto out;
      long long bad = conform_verify(rp, sizes[k], conform_seed(c->prev, c->rank, salt + (uint64_t)k));
      if (bad >= 0) {
        conform_fail(c, "receive %d of %zu bytes (ring slot %llu): gathered data differs at byte "
                     "%lld", k, sizes[k], (unsigned long long)(x.head % DEPTH), bad);
        goto out;
      }
      if (!conform_buf_guards_ok(&x.r, &bad)) {
        conform_fail(c, "receive %d: bytes written outside the FIFO (offset %lld)", k, bad);
        goto out;
      }
      if (up_consumed(c, &x, rreq[k % DEPTH], k)) goto out;
    }
  }
out:
  up_close(c, &x);
  return conform_verdict(c);
}

static conform_status_t unpack_handle(conform_ctx_t *c) {
  const size_t sizes[] = {65536};
  return up_stream(c, sizes, 1, 1, 0x5501);
}

/* 40 receives, 8 in flight (NCCL_STEPS): the ring wraps past 16 twice. */
static conform_status_t unpack_lockstep(conform_ctx_t *c) {
  size_t sizes[40];
  for (int i = 0; i < 40; i++) sizes[i] = 1 + (size_t)((i * 7919) % 65536);
  return up_stream(c, sizes, 40, 8, 0x5502);
}

/* Zero-byte receives still take a slot (cnt 0), between non-empty ones, across a wrap. */
static conform_status_t unpack_zero_byte(conform_ctx_t *c) {
  size_t sizes[36];
  for (int i = 0; i < 36; i++) sizes[i] = (i % 3 == 1) ? 4096 + (size_t)i : 0;
  return up_stream(c, sizes, 36, 4, 0x5503);
}

/* Sizes around 16-byte and page boundaries up to 4 MiB (NCCL's largest design slice), 2 in flight. */
static conform_status_t unpack_integrity(conform_ctx_t *c) {
  size_t sizes[] = {1, 15, 16, 17, 4095, 4096, 4097, 65535, 65537, 1 << 20, (1 << 20) + 3,
                    4 << 20};
  int n = (int)(sizeof sizes / sizeof sizes[0]);
  while (n > 1 && sizes[n - 1] > c->max_bytes) n--;
  return up_stream(c, sizes, n, 2, 0x5504);
}

/* Three receives done and gathered; irecvConsumed of the second first must be refused (accepting
 * it would free a slot the GPU has not reached), and the ring must then go on in order. */
static conform_status_t unpack_consume_order(conform_ctx_t *c) {
  conform_status_t g = up_gate(c);
  if (g != CONFORM_PASS) return g;
  up_t x;
  void *rreq[3], *sreq[3];
  if (up_open(c, &x, 8192, 3) == 0) {
    for (int k = 0; k < 3; k++)
      if (up_post(c, &x, k, 8192, 0x5505, &rreq[k], &sreq[k])) goto out;
    for (int k = 0; k < 3; k++) {
      int got = -1;
      if (conform_wait_pair(c, sreq[k], rreq[k], &got)) goto out;
      if (up_kernel(c, &x, x.r.data + (size_t)k * x.slot, 8192, 8192, k)) goto out;
    }
    conform_phase(c, "irecvConsumed(receive 1) before receive 0");
    strand_result_t r = c->net->irecvConsumed(x.l.recv_comm, 1, rreq[1]);
    if (r == STRAND_SUCCESS) {
      conform_fail(c, "irecvConsumed of receive 1 before receive 0 was accepted: NCCL consumes in "
                   "posting order, and a plugin that frees out of order lets the ring overwrite a "
                   "slot the GPU has not unpacked yet");
      goto out;
    }
    conform_note(c, "out-of-order irecvConsumed refused with %s", conform_result_str(r));
    /* the same ring, in order, must still work */
    for (int k = 0; k < 3; k++)
      if (up_consumed(c, &x, rreq[k], k)) goto out;
    void *rq, *sq;
    int got = -1;
    if (up_post(c, &x, 3, 8192, 0x5505, &rq, &sq) || conform_wait_pair(c, sq, rq, &got)) goto out;
    if (up_kernel(c, &x, x.r.data, 8192, 8192, 3)) goto out;
    if (conform_verify(x.r.data, 8192, conform_seed(c->prev, c->rank, 0x5505 + 3)) >= 0)
      conform_fail(c, "receive 3 after the refused irecvConsumed: gathered data differs");
    up_consumed(c, &x, rq, 3);
  }
out:
  up_close(c, &x);
  return conform_verdict(c);
}

/* 16 receives done and gathered but not consumed: a 17th irecv must not get a request (NULL, or
 * an error), and slot 0's records must stay untouched; after irecvConsumed it is accepted. */
static conform_status_t unpack_no_slot_reuse(conform_ctx_t *c) {
  conform_status_t g = up_gate(c);
  if (g != CONFORM_PASS) return g;
  up_t x;
  void *rreq[DEPTH + 1], *sreq[DEPTH + 1];
  const size_t sz = 4096;
  if (up_open(c, &x, sz, DEPTH + 1) == 0) {
    for (int k = 0; k < DEPTH; k++) {
      int got = -1;
      if (up_post(c, &x, k, sz, 0x5506, &rreq[k], &sreq[k])) goto out;
      if (conform_wait_pair(c, sreq[k], rreq[k], &got)) goto out;
      if (up_kernel(c, &x, x.r.data + (size_t)k * x.slot, sz, sz, k)) goto out;
    }
    strand_unpack_meta_t *m = x.h->meta;
    uint64_t cnt0 = m->cnt[0];
    strand_unpack_load_meta_t rec0 = m->mem[0][0];
    /* Both ranks are at this point: the 17th receive of each is tried against 16 unconsumed. */
    if (conform_barrier(c)) {
      conform_fail(c, "%s", c->bs_error);
      goto out;
    }
    unsigned char *rp = x.r.data + (size_t)DEPTH * x.slot;
    void *rdata = rp, *req = NULL;
    size_t psz = sz;
    int tag = c->prev;
    strand_result_t r = STRAND_SUCCESS;
    for (int i = 0; i < 200 && req == NULL && r == STRAND_SUCCESS; i++) {
      conform_phase(c, "irecv #17 with 16 unconsumed");
      r = c->net->irecv(x.l.recv_comm, 1, &rdata, &psz, &tag, &x.rmh, NULL, &req);
      if (req == NULL && r == STRAND_SUCCESS) conform_sleep(0.001);
    }
    if (req != NULL) {
      conform_fail(c, "a 17th receive was accepted while 16 were not consumed (irecvConsumed): its "
                   "ring slot is slot 0, which the GPU may still be reading");
      goto out;
    }
    if (m->cnt[0] != cnt0 || memcmp(&m->mem[0][0], &rec0, sizeof rec0) != 0) {
      conform_fail(c, "slot 0 was rewritten before its receive was consumed");
      goto out;
    }
    conform_note(c, "17th irecv with 16 unconsumed: %s", r == STRAND_SUCCESS ? "NULL request (retry)" :
                 conform_result_str(r));
    for (int k = 0; k < DEPTH; k++)
      if (up_consumed(c, &x, rreq[k], k)) goto out;
    int got = -1;
    if (up_post(c, &x, DEPTH, sz, 0x5506, &rreq[DEPTH], &sreq[DEPTH]) ||
        conform_wait_pair(c, sreq[DEPTH], rreq[DEPTH], &got))
      goto out;
    if (up_kernel(c, &x, rp, sz, sz, DEPTH)) goto out;
    if (conform_verify(rp, sz, conform_seed(c->prev, c->rank, 0x5506 + DEPTH)) >= 0)
      conform_fail(c, "receive 16 (slot 0 again): gathered data differs");
    up_consumed(c, &x, rreq[DEPTH], DEPTH);
  }
out:
  up_close(c, &x);
  return conform_verdict(c);
}

const conform_check_t conform_checks_unpack[] = {
  {"unpack.handle", "device-unpack §2.1-2.3",
   "accept fills the UNPACK handle (type, 0x7, needsProxyProgress 1, head UINT64_MAX, aligned "
   "meta/bounce) and one receive gathers correctly", unpack_handle, 30, 0},
  {"unpack.lockstep", "device-unpack §2.5",
   "40 receives, 8 in flight: receive k's records are in slot k % 16 when test() says done "
   "(wraps past 16)", unpack_lockstep, 60, 0},
  {"unpack.zero-byte", "device-unpack §2.5",
   "zero-byte receives take a ring slot with cnt 0 and keep later receives in step",
   unpack_zero_byte, 60, 0},
  {"unpack.integrity", "device-unpack §2.3-2.4",
   "records are valid (<= 2048, bounds, disjoint), cover exactly the reported size, and gather "
   "to the sent bytes, 1 B .. 4 MiB", unpack_integrity, 60, 0},
  {"unpack.consume-order", "device-unpack §2.1, §5.5",
   "irecvConsumed out of posting order is refused; in order, the ring goes on", unpack_consume_order,
   30, 0},
  {"unpack.no-slot-reuse", "device-unpack §5.5",
   "with 16 receives unconsumed a 17th gets no request and slot 0 stays untouched",
   unpack_no_slot_reuse, 30, 0},
  {0},
};
