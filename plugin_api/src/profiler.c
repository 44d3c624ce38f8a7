/* Strand SDK — the profiler callback NCCL handed to init (strand/profiler.h). */
#include "strand/profiler.h"

_Atomic(strand_profiler_cb_t) strand_profiler_cb;

/* A NULL callback leaves the current one: the layers over a net (collnet_stub, gin_proxy) init the
 * net for their own contexts without one (CollNet and GIN inits get no profiler callback), and
 * clearing there switched NCCL's events off for every comm (measured: 0 net-plugin events under
 * NCCL 2.28.9 until this). NCCL's own callback is a no-op when no profiler is loaded. */
void strand_profiler_set(strand_profiler_cb_t cb) {
  if (cb != NULL) atomic_store_explicit(&strand_profiler_cb, cb, memory_order_relaxed);
}
