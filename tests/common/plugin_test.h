/* Helpers shared by every standalone plugin test (smoke tests of strand-socket, strand-ofi, the
 * fixture plugin, and what comes next): load a plugin table the way NCCL does, bounded waits,
 * byte patterns that catch misplaced or stale data, and a CHECK that counts failures.
 *
 * Tests drive the v11 or v12 table (the ones NCCL 2.28 picks); both have the same listen /
 * connect / accept / test signatures, so the helpers take a pt_net_t made from either:
 *   pt_net_t n = PT_NET(table);
 * Link: the `plugin_test_dep` meson dependency (tests/common/meson.build). */
#ifndef STRAND_PLUGIN_TEST_H
#define STRAND_PLUGIN_TEST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include "strand/abi/abi.h"

/* Failures counted by PT_CHECK; a test's main returns pt_failures ? 1 : 0. */
extern int pt_failures;

/* On a false condition: print "FAIL file:line: cond: message", count it and return -1 from the
 * calling function (which therefore returns int). */
#define PT_CHECK(cond, ...)                                                                        \
  do {                                                                                             \
    if (!(cond)) {                                                                                 \
      pt_fail(__FILE__, __LINE__, #cond, __VA_ARGS__);                                             \
      return -1;                                                                                   \
    }                                                                                              \
  } while (0)
void pt_fail(const char *file, int line, const char *cond, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* Monotonic seconds. */
double pt_now_s(void);

/* dlopen(path, RTLD_NOW | RTLD_LOCAL) and dlsym(symbol), as NCCL's loader does. NULL with the
 * reason on stderr when either fails. The library stays loaded. */
void *pt_load_table(const char *path, const char *symbol);

/* Pattern of `seed` over n bytes: neighbouring bytes, bytes 256 and 4096 apart, and two seeds all
 * differ, so a shifted, truncated, stale or swapped buffer does not verify. */
void pt_fill(void *buf, size_t n, unsigned seed);
/* Index of the first byte that differs from pt_fill(seed), or -1 when all n match. */
long pt_verify(const void *buf, size_t n, unsigned seed);

/* The members of a v11 / v12 table the helpers call. */
typedef struct {
  strand_result_t (*listen)(void *ctx, int dev, void *handle, void **listenComm);
  strand_result_t (*connect)(void *ctx, int dev, void *handle, void **sendComm,
                             strand_dev_handle_t **sendDevComm);
  strand_result_t (*accept)(void *listenComm, void **recvComm, strand_dev_handle_t **recvDevComm);
  strand_result_t (*closeListen)(void *listenComm);
  strand_result_t (*test)(void *request, int *done, int *sizes);
} pt_net_t;
#define PT_NET(table)                                                                              \
  ((pt_net_t){(table)->listen, (table)->connect, (table)->accept, (table)->closeListen,           \
              (table)->test})

/* Listens on dev, then calls connect and accept alternately until both comms exist. Fails (with a
 * message, counted) when a call errs, when one call takes longer than 1 s (they must not block),
 * or when the pair is not up within bound_s. With listen_out NULL the listen comm is closed;
 * otherwise it is handed back open. Returns 0 or -1. */
int pt_connect_pair(const pt_net_t *net, void *ctx, int dev, void **send_comm, void **recv_comm,
                    void **listen_out, double bound_s);

/* test() on `req` until done. Returns STRAND_SUCCESS, the error test() returned (not counted as a
 * failure: callers that expect an error check it), or PT_TIMEOUT after bound_s. */
#define PT_TIMEOUT (-2)
int pt_wait(const pt_net_t *net, void *req, int *sizes, double bound_s);

/* A barrier of n processes over two ints in shared memory (a MAP_SHARED mapping, both zero at the
 * start): the last to arrive opens it; the others call pump (may be NULL: a rank's progress, which
 * its peers may need) while they wait, up to bound_s. Returns 0, or -1 (counted, naming `who`) on
 * timeout. */
int pt_proc_barrier(int *count, int *gen, int n, void (*pump)(void), double bound_s, const char *who);

/* Whether GPU 0 is usable (libcuda.so.1 loads, cuInit and cuDeviceGet succeed), asked in a child
 * process: CUDA must not be initialised in a process that forks afterwards. */
bool pt_gpu_usable(void);

/* GPU memory the way NCCL allocates windows (cuMemCreate, cuMemAddressReserve, cuMemMap and
 * cuMemSetAccess on device `ordinal`, `bytes` rounded up to the allocation granularity): memory
 * of no CUDA context. GPU tests and tools only; the driver must already be loaded (strand_cuda()).
 * Returns 0 with *d set, else the failing CUresult (or -1 when an entry point is missing). */
int pt_cuda_vmm_alloc(int ordinal, size_t bytes, unsigned long long *d);

/* Profiler events (strand/profiler.h): inits a second context with a recording profiler
 * callback, connects a pair on dev, and sends single messages (8 B, 5000 B, 1 MiB, each direction
 * with its own parent handle), one message with NULL phandles, and, when the device reports
 * maxRecvs >= 2, a grouped receive of two. Checks one START per message with the parent handle,
 * plugin_id `want_id`, the descriptor's type and length, no event without a parent, and that each
 * event is STOPped exactly once, by the test() that reports the message done. Then inits a third
 * context with no callback and checks that a message with parents reports nothing. Both contexts
 * are finalized. Returns 0 or -1 (counted). */
int pt_profiler_case(const strand_net_v11_t *net, int dev, int64_t want_id, double bound_s);

#endif
