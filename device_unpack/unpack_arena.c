/* device_unpack — the bounce arena: one per GPU per process, and its page/run allocator.
 *
 * Why one per GPU: NCCL keeps ONE bounce base per CTA (the last connection set up wins), so every
 * unpack handle that can meet another in a kernel on this GPU must carry the same base; a per-comm
 * arena would silently corrupt data (spec §5.5). Why <= 4 GiB: records carry a 32-bit src_off.
 *
 * Allocator: a bitmap of 4 KiB pages, first fit from a rotating cursor, under one mutex. Callers
 * allocate one contiguous run per receive (a few hundred pages at most), so a scan that skips full
 * 64-page words is plenty; the lock is taken twice per receive (irecv, irecvConsumed). */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "strand/cuda_driver.h"
#include "strand/log.h"
#include "strand/unpack.h"
#include "unpack_internal.h"

/* ---- libcuda: the SDK's run-time loader (strand/cuda_driver.h) ---------------------------- */
bool strand_unpack_cuda_available(void) { return strand_cuda() != NULL; }

/* The GPU whose context is current on this thread (NCCL's proxy thread has its device's
 * context current), or -1. */
static int cuda_current_device(void) {
  const strand_cuda_t *cu = strand_cuda();
  if (!cu) return -1;
  strand_cu_ctx_t ctx = NULL;
  int dev = -1;
  if (cu->ctxGetCurrent(&ctx) != STRAND_CU_SUCCESS || ctx == NULL) return -1;
  if (cu->ctxGetDevice(&dev) != STRAND_CU_SUCCESS) return -1;
  return dev;
}

int unpack_mem_alloc(bool cuda, size_t bytes, const char *what, void **host, void **dev) {
  *host = *dev = NULL;
  if (cuda) {
    const strand_cuda_t *cu = strand_cuda();
    void *h = NULL;
    strand_cu_devptr_t d = 0;
    strand_cu_result_t r = cu->memHostAlloc(&h, bytes, STRAND_CU_MEMHOSTALLOC_DEVICEMAP |
                                                           STRAND_CU_MEMHOSTALLOC_PORTABLE);
    if (r != 0) {
      STRAND_WARN("device_unpack: cuMemHostAlloc of %zu bytes for the %s failed (CUresult %d); "
                  "lower the arena size or check the pinned-memory limit", bytes, what, r);
      return -1;
    }
    r = cu->memHostGetDevicePointer(&d, h, 0);
    if (r != 0) {
      STRAND_WARN("device_unpack: cuMemHostGetDevicePointer for the %s failed (CUresult %d)", what, r);
      cu->memFreeHost(h);
      return -1;
    }
    memset(h, 0, bytes);
    *host = h;
    *dev = (void *)(uintptr_t)d;
    return 0;
  }
  void *h = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (h == MAP_FAILED) {
    STRAND_WARN("device_unpack: mmap of %zu bytes for the %s failed: %s", bytes, what,
                strerror(errno));
    return -1;
  }
  /* Lock pages as they are first touched (no up-front cost, no failure when the limit is low:
   * the memory is then simply pageable, which only matters for a DMA engine, not for the CPU). */
#ifdef MLOCK_ONFAULT
  (void)mlock2(h, bytes, MLOCK_ONFAULT);
#endif
  *host = *dev = h; /* mmap memory is zero-filled */
  return 0;
}

void unpack_mem_free(bool cuda, void *host, size_t bytes) {
  if (host == NULL) return;
  if (cuda) strand_cuda()->memFreeHost(host);
  else munmap(host, bytes);
}

/* ---- arenas ---------------------------------------------------------------------------------- */
struct strand_unpack_arena {
  int device; /* GPU index, or STRAND_UNPACK_HOST_DEVICE */
  bool cuda;
  int refs;
  uint8_t *host;
  void *dev;
  size_t size;
  uint32_t npages;
  uint64_t *used; /* bit i set: page i is allocated */
  uint32_t cursor;
  uint32_t nfree;
  pthread_mutex_t lock;
  struct strand_unpack_arena *next;
};

static pthread_mutex_t arenas_lock = PTHREAD_MUTEX_INITIALIZER;
static strand_unpack_arena_t *arenas;

strand_result_t strand_unpack_arena_acquire(size_t bytes, bool force_host,
                                            strand_unpack_arena_t **out) {
  if (out == NULL) return STRAND_INVALID_ARGUMENT;
  *out = NULL;
  if (bytes == 0 || bytes > STRAND_UNPACK_ARENA_MAX) {
    STRAND_WARN("device_unpack: arena size %zu bytes is out of range (1 byte .. 4 GiB: record "
                "offsets are 32-bit)", bytes);
    return STRAND_INVALID_ARGUMENT;
  }
  int device = force_host ? STRAND_UNPACK_HOST_DEVICE : cuda_current_device();
  pthread_mutex_lock(&arenas_lock);
  for (strand_unpack_arena_t *a = arenas; a; a = a->next) {
    if (a->device == device) {
      a->refs++;
      pthread_mutex_unlock(&arenas_lock);
      *out = a;
      return STRAND_SUCCESS;
    }
  }
  strand_unpack_arena_t *a = calloc(1, sizeof *a);
  size_t size = (bytes + STRAND_UNPACK_PAGE - 1) / STRAND_UNPACK_PAGE * STRAND_UNPACK_PAGE;
  if (size > STRAND_UNPACK_ARENA_MAX) size = STRAND_UNPACK_ARENA_MAX;
  uint32_t npages = (uint32_t)(size / STRAND_UNPACK_PAGE);
  uint64_t *used = calloc((npages + 63) / 64, sizeof *used);
  if (a == NULL || used == NULL) {
    pthread_mutex_unlock(&arenas_lock);
    free(a);
    free(used);
    return STRAND_SYSTEM_ERROR;
  }
  a->device = device;
  a->cuda = device >= 0;
  void *host, *dev;
  if (unpack_mem_alloc(a->cuda, size, "bounce arena", &host, &dev) != 0) {
    pthread_mutex_unlock(&arenas_lock);
    free(a);
    free(used);
    return STRAND_SYSTEM_ERROR;
  }
  if (((uintptr_t)host | (uintptr_t)dev) % 16 != 0) { /* never with page-granular allocators */
    STRAND_WARN("device_unpack: bounce arena at %p (device %p) is not 16-byte aligned", host, dev);
    unpack_mem_free(a->cuda, host, size);
    pthread_mutex_unlock(&arenas_lock);
    free(a);
    free(used);
    return STRAND_INTERNAL_ERROR;
  }
  a->host = host;
  a->dev = dev;
  a->size = size;
  a->npages = npages;
  a->used = used;
  a->nfree = npages;
  a->refs = 1;
  pthread_mutex_init(&a->lock, NULL);
  a->next = arenas;
  arenas = a;
  pthread_mutex_unlock(&arenas_lock);
  STRAND_INFO(STRAND_SUBSYS_INIT | STRAND_SUBSYS_NET,
              "device_unpack: bounce arena of %zu MiB in %s (GPU %d)", size >> 20,
              a->cuda ? "mapped pinned host memory" : "host memory (no GPU context)", device);
  *out = a;
  return STRAND_SUCCESS;
}

void strand_unpack_arena_release(strand_unpack_arena_t *a) {
  if (a == NULL) return;
  pthread_mutex_lock(&arenas_lock);
  if (--a->refs > 0) {
    pthread_mutex_unlock(&arenas_lock);
    return;
  }
  for (strand_unpack_arena_t **p = &arenas; *p; p = &(*p)->next) {
    if (*p == a) {
      *p = a->next;
      break;
    }
  }
  pthread_mutex_unlock(&arenas_lock);
  if (a->nfree != a->npages)
    STRAND_WARN("device_unpack: bounce arena released with %u pages still allocated (a receive "
                "was never consumed)", a->npages - a->nfree);
  unpack_mem_free(a->cuda, a->host, a->size);
  pthread_mutex_destroy(&a->lock);
  free(a->used);
  free(a);
}

static bool page_used(const strand_unpack_arena_t *a, uint32_t p) {
  return (a->used[p / 64] >> (p % 64)) & 1u;
}

static void mark(strand_unpack_arena_t *a, uint32_t first, uint32_t n, bool used) {
  for (uint32_t p = first; p < first + n; p++) {
    if (used) a->used[p / 64] |= (uint64_t)1 << (p % 64);
    else a->used[p / 64] &= ~((uint64_t)1 << (p % 64));
  }
}

/* First fit of n free pages in [from, to); returns the first page or UINT32_MAX. */
static uint32_t find_run(const strand_unpack_arena_t *a, uint32_t from, uint32_t to, uint32_t n) {
  uint32_t start = from, len = 0;
  for (uint32_t p = from; p < to;) {
    if (p % 64 == 0 && a->used[p / 64] == UINT64_MAX && p + 64 <= to) { /* full word */
      len = 0;
      p += 64;
      start = p;
      continue;
    }
    if (page_used(a, p)) {
      len = 0;
      start = p + 1;
    } else if (++len == n) {
      return start;
    }
    p++;
  }
  return UINT32_MAX;
}

bool strand_unpack_arena_alloc(strand_unpack_arena_t *a, size_t bytes, strand_unpack_run_t *run) {
  size_t np = bytes == 0 ? 1 : (bytes + STRAND_UNPACK_PAGE - 1) / STRAND_UNPACK_PAGE;
  if (a == NULL || run == NULL || np > a->npages) return false;
  uint32_t n = (uint32_t)np;
  pthread_mutex_lock(&a->lock);
  uint32_t first = UINT32_MAX;
  if (a->nfree >= n) {
    first = find_run(a, a->cursor, a->npages, n);
    if (first == UINT32_MAX) first = find_run(a, 0, a->npages, n);
  }
  if (first != UINT32_MAX) {
    mark(a, first, n, true);
    a->nfree -= n;
    a->cursor = first + n < a->npages ? first + n : 0;
  }
  pthread_mutex_unlock(&a->lock);
  if (first == UINT32_MAX) return false;
  run->off = first * STRAND_UNPACK_PAGE;
  run->npages = n;
  return true;
}

void strand_unpack_arena_free(strand_unpack_arena_t *a, strand_unpack_run_t run) {
  if (a == NULL || run.npages == 0) return;
  uint32_t first = run.off / STRAND_UNPACK_PAGE;
  pthread_mutex_lock(&a->lock);
  if (run.off % STRAND_UNPACK_PAGE != 0 || first + run.npages > a->npages) {
    pthread_mutex_unlock(&a->lock);
    STRAND_WARN("device_unpack: free of a run at offset %u (%u pages) outside the arena", run.off,
                run.npages);
    return;
  }
  for (uint32_t p = first; p < first + run.npages; p++) {
    if (!page_used(a, p)) {
      pthread_mutex_unlock(&a->lock);
      STRAND_WARN("device_unpack: double free of arena page %u (run at offset %u)", p, run.off);
      return;
    }
  }
  mark(a, first, run.npages, false);
  a->nfree += run.npages;
  pthread_mutex_unlock(&a->lock);
}

uint8_t *strand_unpack_arena_host(const strand_unpack_arena_t *a) { return a->host; }
void *strand_unpack_arena_device(const strand_unpack_arena_t *a) { return a->dev; }
size_t strand_unpack_arena_size(const strand_unpack_arena_t *a) { return a->size; }
bool strand_unpack_arena_is_cuda(const strand_unpack_arena_t *a) { return a->cuda; }
int strand_unpack_arena_device_index(const strand_unpack_arena_t *a) { return a->device; }

size_t strand_unpack_arena_free_pages(strand_unpack_arena_t *a) {
  pthread_mutex_lock(&a->lock);
  size_t n = a->nfree;
  pthread_mutex_unlock(&a->lock);
  return n;
}
