/* device_unpack — the per-recvComm metadata ring and the device handle NCCL's kernel reads.
 *
 * Lock-step is the whole contract (spec §2.5): the k-th irecv on a recvComm is the k-th Simple
 * slice the GPU waits for, and both use slot k % 16. Nothing in the ABI resynchronises the two
 * counters, so this file refuses, loudly and without touching the ring, anything that would skew
 * them: a 17th outstanding claim, a release that is not the oldest, a publish of a seq not claimed.
 * The ring is driven by one thread (NCCL's proxy thread calls irecv/test/irecvConsumed of a comm);
 * only the GPU (or a CPU stand-in) reads it concurrently. */
#include <stdlib.h>
#include <string.h>

#include "strand/log.h"
#include "strand/unpack.h"
#include "unpack_internal.h"

#define DEPTH STRAND_UNPACK_MAX_QUEUE_DEPTH

/* meta and handle share one GPU-visible allocation: the meta first (16-byte aligned), the 24-byte
 * handle right after it (the GPU writes head back there at kernel exit). */
#define HANDLE_OFF sizeof(strand_unpack_meta_t)
#define RING_BYTES (HANDLE_OFF + sizeof(strand_unpack_handle_t))

struct strand_unpack_ring {
  strand_unpack_arena_t *arena;
  bool cuda;
  void *mem_host, *mem_dev;
  strand_unpack_meta_t *meta;            /* CPU view */
  strand_unpack_handle_t *handle;        /* CPU view */
  strand_unpack_handle_t *handle_dev;    /* what ncclNetDeviceHandle.handle gets */
  uint64_t head, tail;                   /* released < head <= claimed < tail */
  bool published[DEPTH];
};

strand_result_t strand_unpack_ring_create(strand_unpack_arena_t *a, strand_unpack_ring_t **out) {
  if (a == NULL || out == NULL) return STRAND_INVALID_ARGUMENT;
  *out = NULL;
  strand_unpack_ring_t *r = calloc(1, sizeof *r);
  if (r == NULL) return STRAND_SYSTEM_ERROR;
  r->arena = a;
  r->cuda = strand_unpack_arena_is_cuda(a);
  if (unpack_mem_alloc(r->cuda, RING_BYTES, "unpack metadata ring", &r->mem_host, &r->mem_dev) != 0) {
    free(r);
    return STRAND_SYSTEM_ERROR;
  }
  r->meta = r->mem_host;
  r->handle = (strand_unpack_handle_t *)((char *)r->mem_host + HANDLE_OFF);
  r->handle_dev = (strand_unpack_handle_t *)((char *)r->mem_dev + HANDLE_OFF);
  r->handle->meta = (strand_unpack_meta_t *)r->mem_dev;
  r->handle->bounce_buf = strand_unpack_arena_device(a);
  /* The kernel increments head before it uses it: the first slice must find slot 0. */
  r->handle->head = UINT64_MAX;
  *out = r;
  return STRAND_SUCCESS;
}

void strand_unpack_ring_destroy(strand_unpack_ring_t *r) {
  if (r == NULL) return;
  unpack_mem_free(r->cuda, r->mem_host, RING_BYTES);
  free(r);
}

void strand_unpack_ring_fill_dev_handle(const strand_unpack_ring_t *r, strand_dev_handle_t *dh) {
  dh->netDeviceType = STRAND_DEV_UNPACK;
  dh->netDeviceVersion = STRAND_NET_DEVICE_UNPACK_VERSION;
  dh->handle = r->handle_dev;
  dh->size = sizeof(strand_unpack_handle_t);
  dh->needsProxyProgress = 1; /* with 0 NCCL installs no receive progress for the connection */
}

const strand_unpack_handle_t *strand_unpack_ring_handle_host(const strand_unpack_ring_t *r) {
  return r->handle;
}
strand_unpack_meta_t *strand_unpack_ring_meta_host(const strand_unpack_ring_t *r) { return r->meta; }
uint64_t strand_unpack_ring_head(const strand_unpack_ring_t *r) { return r->head; }
uint64_t strand_unpack_ring_tail(const strand_unpack_ring_t *r) { return r->tail; }

strand_result_t strand_unpack_ring_claim(strand_unpack_ring_t *r, const char *who, uint64_t *seq) {
  if (r->tail - r->head >= DEPTH) {
    STRAND_WARN("%s: unpack ring overflow: %d receives posted and not yet consumed "
                "(irecvConsumed); NCCL keeps at most 8 in flight, so receives are being posted "
                "without irecvConsumed, or by a protocol other than Simple (set NCCL_PROTO=Simple)",
                who, DEPTH);
    return STRAND_INTERNAL_ERROR;
  }
  unsigned slot = (unsigned)(r->tail % DEPTH);
  /* The slot's previous occupant was released, so the GPU is past it: safe to reset. */
  __atomic_store_n(&r->meta->cnt[slot], 0, __ATOMIC_RELAXED);
  r->published[slot] = false;
  *seq = r->tail++;
  return STRAND_SUCCESS;
}

strand_result_t strand_unpack_ring_publish(strand_unpack_ring_t *r, const char *who, uint64_t seq,
                                           const strand_unpack_load_meta_t *recs, uint32_t n) {
  unsigned slot = (unsigned)(seq % DEPTH);
  if (seq < r->head || seq >= r->tail || r->published[slot]) {
    STRAND_WARN("%s: unpack receive %llu %s (claimed %llu..%llu); plugin bug", who,
                (unsigned long long)seq,
                seq < r->head || seq >= r->tail ? "is not claimed" : "is already published",
                (unsigned long long)r->head, (unsigned long long)r->tail);
    return STRAND_INTERNAL_ERROR;
  }
  if (n > STRAND_UNPACK_MAX_SLICE_PAGES) {
    STRAND_WARN("%s: receive %llu needs %u unpack records, more than the %d NCCL's kernel can "
                "take; lower NCCL_P2P_NET_CHUNKSIZE / the step size or raise the record size",
                who, (unsigned long long)seq, n, STRAND_UNPACK_MAX_SLICE_PAGES);
    return STRAND_INVALID_USAGE;
  }
  if (n > 0) memcpy(r->meta->mem[slot], recs, (size_t)n * sizeof *recs);
  /* Release: the records above and the payload (written by helper threads that handed it to this
   * thread with release/acquire) happen-before any read that observes the count. */
  __atomic_store_n(&r->meta->cnt[slot], (uint64_t)n, __ATOMIC_RELEASE);
  r->published[slot] = true;
  return STRAND_SUCCESS;
}

strand_result_t strand_unpack_ring_release(strand_unpack_ring_t *r, const char *who, uint64_t seq) {
  if (r->head == r->tail || seq != r->head) {
    STRAND_WARN("%s: irecvConsumed out of order: receive %llu consumed while the oldest unconsumed "
                "is %llu (%llu outstanding); NCCL consumes in posting order, the GPU's slot "
                "counter would skew", who, (unsigned long long)seq, (unsigned long long)r->head,
                (unsigned long long)(r->tail - r->head));
    return STRAND_INVALID_USAGE;
  }
  if (!r->published[seq % DEPTH]) {
    STRAND_WARN("%s: irecvConsumed for receive %llu before test() reported it done", who,
                (unsigned long long)seq);
    return STRAND_INVALID_USAGE;
  }
  r->published[seq % DEPTH] = false;
  r->head++;
  return STRAND_SUCCESS;
}
