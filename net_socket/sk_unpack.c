/* strand-socket — unpack mode (STRAND_SOCKET_UNPACK=1): NCCL's NCCL_NET_DEVICE_UNPACK v7 receive
 * path on top of the ordinary TCP data path (docs/spec/device-unpack.md §5.2, E1).
 *
 * The only thing that changes is where a receive's bytes land: irecv gives the receive a run of
 * pages in the process's bounce arena (device_unpack, one per GPU) and the data path — helper
 * threads readv'ing data-stream chunks, the proxy copying inline payloads — writes there instead of
 * into NCCL's FIFO slot. When test() finds the receive complete, its records (one per
 * STRAND_SOCKET_UNPACK_RECORD bytes, src = arena run, dst = offset in the FIFO slot) and the count
 * are published in the connection's ring slot before done is reported; NCCL's Simple kernel
 * gathers them into the FIFO slot, and irecvConsumed gives the pages back.
 *
 * A connection runs in unpack mode only when accept() was handed a device handle to fill, which
 * NCCL does exactly when the properties say UNPACK (v7+ cores). Without one (a v6 core, a caller
 * that passes none) it is an ordinary host-mode connection, so nothing lands where nobody gathers.
 *
 * What the mode refuses, each with a WARN and an error rather than silent corruption: grouped
 * receives (maxRecvs is 1), a receive needing more than 2048 records, a 17th receive before
 * irecvConsumed (ring overflow), irecvConsumed out of order, and, when the arena is GPU-mapped, a
 * receive into host-registered memory — NCCL keeps LL buffers in host memory (and every buffer
 * when GDR is off), and a receive the GPU does not unpack skews the slot counters for good. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sk.h"
#include "strand/log.h"
#include "strand/unpack.h"

#define SK_UNPACK_DEPTH STRAND_UNPACK_MAX_QUEUE_DEPTH

typedef struct {
  void *req;              /* the receive request NCCL will name in irecvConsumed */
  strand_unpack_run_t run;
  bool has_run;
} sk_unpack_pending_t;

struct sk_unpack {
  strand_unpack_arena_t *arena;
  strand_unpack_ring_t *ring;
  uint8_t *arena_host;
  size_t record;
  sk_unpack_pending_t pending[SK_UNPACK_DEPTH]; /* by seq % 16, from irecv to irecvConsumed */
  strand_unpack_load_meta_t recs[STRAND_UNPACK_MAX_SLICE_PAGES];
  char who[160];
};

bool sk_unpack_mode(void) { return sk_config()->unpack; }

void sk_unpack_props(strand_props_t *p) {
  p->netDeviceType = STRAND_DEV_UNPACK;
  p->netDeviceVersion = STRAND_NET_DEVICE_UNPACK_VERSION;
  p->maxRecvs = 1; /* one buffer per request: the ring holds one record list per receive */
  /* CUDA: NCCL then keeps the receive FIFO in GPU memory (useGdr), where the kernel gathers to.
   * Only claimed where a GPU can exist, so that a CPU-only host does not advertise it. */
  if (strand_unpack_cuda_available()) p->ptrSupport |= STRAND_PTR_CUDA;
}

strand_result_t sk_unpack_accept(sk_comm_t *c, strand_dev_handle_t **recvDevComm) {
  if (!sk_unpack_mode() || recvDevComm == NULL || *recvDevComm == NULL) return STRAND_SUCCESS;
  const sk_config_t *cfg = sk_config();
  struct sk_unpack *u = calloc(1, sizeof *u);
  if (u == NULL) return STRAND_SYSTEM_ERROR;
  snprintf(u->who, sizeof u->who, "unpack receive from %s (dev %s)", c->peer, c->dev_name);
  strand_result_t rc = strand_unpack_arena_acquire(cfg->unpack_arena, false, &u->arena);
  if (rc == STRAND_SUCCESS) rc = strand_unpack_ring_create(u->arena, &u->ring);
  if (rc != STRAND_SUCCESS) {
    STRAND_WARN("accept from %s: could not set up the unpack bounce arena / ring (%zu MiB); lower "
                "STRAND_SOCKET_UNPACK_ARENA_MB or switch STRAND_SOCKET_UNPACK off", c->peer,
                cfg->unpack_arena >> 20);
    strand_unpack_arena_release(u->arena);
    free(u);
    return rc;
  }
  if (!strand_unpack_arena_is_cuda(u->arena) && strand_unpack_cuda_available())
    STRAND_WARN("accept from %s: unpack mode without a current CUDA context: the bounce arena is "
                "plain host memory that a GPU cannot read (fine for CPU tests only)", c->peer);
  u->arena_host = strand_unpack_arena_host(u->arena);
  u->record = cfg->unpack_record;
  strand_unpack_ring_fill_dev_handle(u->ring, *recvDevComm);
  c->unpack = u;
  return STRAND_SUCCESS;
}

void sk_unpack_close(sk_comm_t *c) {
  struct sk_unpack *u = c->unpack;
  if (u == NULL) return;
  /* Receives never consumed (closing mid-flight): their pages go back with the comm. */
  for (uint64_t s = strand_unpack_ring_head(u->ring); s != strand_unpack_ring_tail(u->ring); s++) {
    sk_unpack_pending_t *p = &u->pending[s % SK_UNPACK_DEPTH];
    if (p->has_run) strand_unpack_arena_free(u->arena, p->run);
    p->has_run = false;
  }
  strand_unpack_ring_destroy(u->ring);
  strand_unpack_arena_release(u->arena);
  free(u);
  c->unpack = NULL;
}

strand_result_t sk_unpack_post(sk_comm_t *c, sk_recv_slot_t *s, int n, const size_t *sizes,
                               void **mhandles, char **landing, bool *retry) {
  struct sk_unpack *u = c->unpack;
  *landing = NULL;
  *retry = false;
  if (n != 1) {
    STRAND_WARN("irecv on %s: %d buffers in one receive; unpack mode reports maxRecvs 1", u->who, n);
    return STRAND_INVALID_USAGE;
  }
  size_t size = sizes[0];
  if ((size + u->record - 1) / u->record > STRAND_UNPACK_MAX_SLICE_PAGES) {
    STRAND_WARN("irecv on %s: %zu bytes would need more than %d unpack records of %zu bytes; "
                "raise STRAND_SOCKET_UNPACK_RECORD or lower NCCL's step size", u->who, size,
                STRAND_UNPACK_MAX_SLICE_PAGES, u->record);
    return STRAND_INVALID_USAGE;
  }
  if (size > strand_unpack_arena_size(u->arena)) {
    STRAND_WARN("irecv on %s: %zu bytes do not fit in the %zu-byte bounce arena; raise "
                "STRAND_SOCKET_UNPACK_ARENA_MB", u->who, size, strand_unpack_arena_size(u->arena));
    return STRAND_INVALID_USAGE;
  }
  if (strand_unpack_arena_is_cuda(u->arena) && mhandles && mhandles[0] &&
      sk_mr_type(mhandles[0]) == STRAND_PTR_HOST) {
    STRAND_WARN("irecv on %s: receive into host memory on a device-unpack connection. NCCL does "
                "that for LL/LL128-protocol receives and when GPUDirect is off; the GPU would not "
                "unpack it and its slot counter would skew. Set NCCL_PROTO=Simple and "
                "NCCL_NET_GDR_LEVEL=SYS (docs/plugins/socket.md, unpack mode)", u->who);
    return STRAND_INVALID_USAGE;
  }
  strand_unpack_run_t run = {0, 0};
  if (size > 0 && !strand_unpack_arena_alloc(u->arena, size, &run)) {
    *retry = true; /* arena full: NULL request, NCCL retries once irecvConsumed freed pages */
    return STRAND_SUCCESS;
  }
  uint64_t seq;
  strand_result_t rc = strand_unpack_ring_claim(u->ring, u->who, &seq);
  if (rc != STRAND_SUCCESS) {
    if (size > 0) strand_unpack_arena_free(u->arena, run);
    return rc;
  }
  u->pending[seq % SK_UNPACK_DEPTH] = (sk_unpack_pending_t){s, run, size > 0};
  s->unpack_seq = seq;
  if (size > 0) *landing = (char *)u->arena_host + run.off;
  return STRAND_SUCCESS;
}

strand_result_t sk_unpack_complete(sk_comm_t *c, sk_recv_slot_t *s, size_t size) {
  struct sk_unpack *u = c->unpack;
  sk_unpack_pending_t *p = &u->pending[s->unpack_seq % SK_UNPACK_DEPTH];
  uint32_t n = 0;
  for (size_t off = 0; off < size; off += u->record) {
    size_t len = size - off < u->record ? size - off : u->record;
    u->recs[n++] = (strand_unpack_load_meta_t){{.src_off = p->run.off + (uint32_t)off,
                                                .len = (uint32_t)len, .dst_off = off}};
  }
  return strand_unpack_ring_publish(u->ring, u->who, s->unpack_seq, u->recs, n);
}

strand_result_t sk_irecv_consumed(void *recvComm, int n, void *request) {
  sk_comm_t *c = recvComm;
  if (c == NULL || c->type != SK_COMM_RECV) {
    STRAND_WARN("irecvConsumed: %p is not a strand-socket receive communicator", recvComm);
    return STRAND_INVALID_ARGUMENT;
  }
  struct sk_unpack *u = c->unpack;
  if (u == NULL) return STRAND_SUCCESS; /* host mode: the bytes are in NCCL's buffer already */
  if (n != 1) {
    STRAND_WARN("irecvConsumed on %s: n = %d, unpack receives have one buffer", u->who, n);
    return STRAND_INVALID_USAGE;
  }
  uint64_t head = strand_unpack_ring_head(u->ring);
  sk_unpack_pending_t *p = &u->pending[head % SK_UNPACK_DEPTH];
  uint64_t seq = head;
  if (head == strand_unpack_ring_tail(u->ring) || p->req != request) {
    /* Name the receive it was, if it is pending at all, so the WARN says what happened. */
    seq = UINT64_MAX;
    for (uint64_t q = head; q != strand_unpack_ring_tail(u->ring); q++)
      if (u->pending[q % SK_UNPACK_DEPTH].req == request) seq = q;
    if (seq == UINT64_MAX) {
      STRAND_WARN("irecvConsumed on %s: request %p is not an unconsumed receive", u->who, request);
      return STRAND_INVALID_USAGE;
    }
  }
  strand_result_t rc = strand_unpack_ring_release(u->ring, u->who, seq);
  if (rc != STRAND_SUCCESS) return rc;
  if (p->has_run) strand_unpack_arena_free(u->arena, p->run);
  p->has_run = false;
  p->req = NULL;
  return STRAND_SUCCESS;
}

strand_result_t sk_get_device_mr(void *comm, void *mhandle, void **dptr_mhandle) {
  (void)comm;
  (void)mhandle;
  /* NCCL stores the result where no device code reads it (spec §2.1): nothing to give. */
  if (dptr_mhandle) *dptr_mhandle = NULL;
  return STRAND_SUCCESS;
}
