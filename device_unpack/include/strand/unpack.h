/* device_unpack — the host side of NCCL's NCCL_NET_DEVICE_UNPACK (v7) receive path, for any host.
 *
 * A plugin using it lets received bytes land in a GPU-visible bounce ARENA instead of NCCL's FIFO
 * slot, then tells NCCL's Simple-protocol kernel where each fragment lies through a per-receive-comm
 * metadata RING of 16 slots (docs/spec/device-unpack.md §2). The kernel gathers the fragments into
 * the FIFO slot itself. The ABI structures (strand_unpack_meta_t, strand_unpack_handle_t,
 * strand_unpack_load_meta_t) live in strand/abi/device.h; this header adds what a plugin calls:
 *
 *   arena   one per GPU per process (every handle of one GPU must carry the same bounce base:
 *           NCCL keeps one base per CTA), <= 4 GiB (src_off is 32-bit), 16-byte aligned, carved
 *           into 4 KiB pages handed out as contiguous runs. Full -> allocation fails and the
 *           caller applies back-pressure (irecv returns a NULL request and is retried).
 *   ring    per recvComm: claim a slot in irecv order (zero-byte receives too), publish the records
 *           and the count with release ordering before test() reports done, release in
 *           irecvConsumed order (anything else is an error: the GPU's head would skew).
 *   ref     unpack_validate() checks records the way the kernel cannot; unpack_ref() is the CPU
 *           golden gather (tests, strand-conform, and the check of the CUDA kernels).
 *
 * Memory: with a GPU (libcuda loadable and a CUDA context current on the calling thread) the arena,
 * the rings and the device handles are mapped pinned host memory (cuMemHostAlloc DEVICEMAP |
 * PORTABLE); libcuda is dlopen'ed, so the library builds and runs without CUDA. Without a GPU they
 * are page-aligned host memory (locked on fault when the limit allows), so the whole host-side
 * protocol runs in CI and a CPU "kernel" (strand-conform) can read the ring through the handle. */
#ifndef STRAND_UNPACK_H
#define STRAND_UNPACK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "strand/abi/device.h"
#include "strand/abi/types.h"

#ifdef __cplusplus
extern "C" {
#endif

#define STRAND_UNPACK_PAGE 4096u
#define STRAND_UNPACK_ARENA_MAX ((uint64_t)4 << 30) /* src_off is a u32 */
#define STRAND_UNPACK_HOST_DEVICE (-1)              /* arena key when no GPU is in use */

/* ---- arena ----------------------------------------------------------------------------------- */
typedef struct strand_unpack_arena strand_unpack_arena_t;

/* A contiguous run of arena pages: bytes [off, off + npages * 4096). */
typedef struct {
  uint32_t off;
  uint32_t npages;
} strand_unpack_run_t;

/* The arena of the GPU current on the calling thread (or the host arena without one), created on
 * first use with `bytes` (rounded up to pages, <= 4 GiB; later callers share it whatever they ask)
 * and reference-counted. force_host: never touch CUDA (tests). */
strand_result_t strand_unpack_arena_acquire(size_t bytes, bool force_host,
                                            strand_unpack_arena_t **out);
void strand_unpack_arena_release(strand_unpack_arena_t *a);
/* A run covering `bytes` (at least one page, so zero-byte callers need none). false: no run that
 * large is free now (back-pressure), or bytes exceed the arena (check strand_unpack_arena_size). */
bool strand_unpack_arena_alloc(strand_unpack_arena_t *a, size_t bytes, strand_unpack_run_t *run);
void strand_unpack_arena_free(strand_unpack_arena_t *a, strand_unpack_run_t run);
uint8_t *strand_unpack_arena_host(const strand_unpack_arena_t *a); /* CPU address of offset 0 */
void *strand_unpack_arena_device(const strand_unpack_arena_t *a);  /* what bounce_buf gets */
size_t strand_unpack_arena_size(const strand_unpack_arena_t *a);
size_t strand_unpack_arena_free_pages(strand_unpack_arena_t *a);
bool strand_unpack_arena_is_cuda(const strand_unpack_arena_t *a);
int strand_unpack_arena_device_index(const strand_unpack_arena_t *a); /* GPU or -1 */
/* Whether libcuda can be loaded (says nothing about a GPU or a context being present). */
bool strand_unpack_cuda_available(void);

/* ---- ring ------------------------------------------------------------------------------------ */
typedef struct strand_unpack_ring strand_unpack_ring_t;

/* A ring in the arena's kind of memory: meta (cnt zero) and handle {meta, bounce base,
 * head = UINT64_MAX}. */
strand_result_t strand_unpack_ring_create(strand_unpack_arena_t *a, strand_unpack_ring_t **out);
void strand_unpack_ring_destroy(strand_unpack_ring_t *r);
/* Fills NCCL's ncclNetDeviceHandle: UNPACK, 0x7, handle = device pointer of the 24-byte handle,
 * size 24, needsProxyProgress 1. */
void strand_unpack_ring_fill_dev_handle(const strand_unpack_ring_t *r, strand_dev_handle_t *dh);
const strand_unpack_handle_t *strand_unpack_ring_handle_host(const strand_unpack_ring_t *r);
strand_unpack_meta_t *strand_unpack_ring_meta_host(const strand_unpack_ring_t *r);

/* Claims the next slot for the next receive in irecv order; *seq numbers receives 0, 1, 2, ... and
 * the slot is seq % 16. STRAND_INTERNAL_ERROR (with a WARN naming `who`) when 16 receives are
 * claimed and not yet released: NCCL never has that many in flight, so it is a caller bug. */
strand_result_t strand_unpack_ring_claim(strand_unpack_ring_t *r, const char *who, uint64_t *seq);
/* Writes the n records of receive `seq` into its slot, then stores cnt with release ordering, so a
 * reader that sees the count (after NCCL's own fences) sees the records, and the payload written
 * before this call by any thread that synchronised with the caller. n > 2048, a seq not claimed,
 * or a second publish is refused with a WARN. */
strand_result_t strand_unpack_ring_publish(strand_unpack_ring_t *r, const char *who, uint64_t seq,
                                           const strand_unpack_load_meta_t *recs, uint32_t n);
/* Frees receive `seq`'s slot. It must be the oldest claimed one and published (irecvConsumed
 * order): anything else is refused with a WARN and STRAND_INVALID_USAGE, the ring unchanged. */
strand_result_t strand_unpack_ring_release(strand_unpack_ring_t *r, const char *who, uint64_t seq);
uint64_t strand_unpack_ring_head(const strand_unpack_ring_t *r); /* oldest claimed, not released */
uint64_t strand_unpack_ring_tail(const strand_unpack_ring_t *r); /* next seq to claim */

/* ---- validation and the golden gather -------------------------------------------------------- */
/* Checks records as the kernel would need them: cnt <= 2048, src_off + len <= arena_size (and
 * < 2^32 as a u32 base), dst_off + len <= dst_size, destination ranges pairwise disjoint (warps
 * copy them concurrently). Returns 0, or -1 with a reason in why. */
int strand_unpack_validate(const strand_unpack_load_meta_t *recs, uint64_t cnt,
                           uint64_t arena_size, uint64_t dst_size, char *why, size_t why_len);
/* dst[dst_off .. +len) = bounce[src_off .. +len) for each record (validate first). */
void strand_unpack_ref(const void *bounce, void *dst, const strand_unpack_load_meta_t *recs,
                       uint64_t cnt);
/* Bytes the records cover (sum of len). */
uint64_t strand_unpack_bytes(const strand_unpack_load_meta_t *recs, uint64_t cnt);

#ifdef __cplusplus
}
#endif

#endif
