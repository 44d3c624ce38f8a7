/* Strand SDK — the profiler callback NCCL handed to init (strand/profiler.h). */
#include "strand/profiler.h"

_Atomic(strand_profiler_cb_t) strand_profiler_cb;

void strand_profiler_set(strand_profiler_cb_t cb) {
  atomic_store_explicit(&strand_profiler_cb, cb, memory_order_relaxed);
}
