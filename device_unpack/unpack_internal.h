/* device_unpack — what the library's files share and nobody else sees: the memory kind of an arena
 * (mapped pinned through libcuda, or plain host) and its allocation helpers, reused by the ring so
 * that a ring is always GPU-readable when its arena is. */
#ifndef STRAND_UNPACK_INTERNAL_H
#define STRAND_UNPACK_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>

/* bytes of memory the GPU can read and write, 16-byte aligned (page-aligned in practice). cuda:
 * cuMemHostAlloc(DEVICEMAP|PORTABLE) in the current context, *dev = its device address; otherwise
 * page-aligned host memory, zeroed, *dev = *host. Returns 0 or -1 (a WARN says why). */
int unpack_mem_alloc(bool cuda, size_t bytes, const char *what, void **host, void **dev);
void unpack_mem_free(bool cuda, void *host, size_t bytes);

#endif
