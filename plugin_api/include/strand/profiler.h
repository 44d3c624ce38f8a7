/* Strand SDK — network events for NCCL's profiler (ncclProfileNetPlugin).
 *
 * A v10+ core hands init a callback (strand_profiler_cb_t) and passes, with every isend, the
 * proxy step's event handle (`phandle`; `phandles[i]` for receive i of an irecv). A transport that
 * reports what its requests do calls the callback with START (parent = that handle, a
 * plugin-specific descriptor whose layout and version are named by plugin_id) and STOP (or
 * UPDATE / UPDATE_AND_STOP) with the handle START returned. NCCL then hands a profiler plugin an
 * ncclProfileNetPlugin event, child of the proxy step, with the descriptor.
 *
 * Two descriptor layouts exist in NCCL and profilers know them: the socket one
 * (ncclProfilerNetSockDescr_v1_t, plugin_id STRAND_PROFILER_NET_ID_SOCK) and the IB one
 * (ncclProfilerNetIbDescr_v1_t, STRAND_PROFILER_NET_ID_IB). Strand's plugins use them as follows
 * (docs/plugin-author-guide.md, "Profiler events"):
 *   strand-socket  socket layout: fd = the connection's control socket, op 0 send / 1 receive,
 *                  length = bytes of the message (send) or of the posted buffer (receive).
 *   strand-ofi     socket layout: fd = -1 (libfabric has no descriptor to name), op and length
 *                  as above.
 *   strand-ib      IB layout: device = the plugin's device index, wr_id = the work request
 *                  that carries the message (send: the group's RDMA write-with-immediate;
 *                  receive: the clear-to-send RDMA write), opcode = its ibv_wr_opcode, qpNum =
 *                  the connection's first QP, length as above.
 * One event per request per message: START when isend/irecv accepts it, STOP when test() first
 * reports it done. A request that fails, or that is closed in flight, is not stopped (NCCL's own
 * transports do the same; the core tears the profiler context down with the communicator).
 *
 * Cost: with no callback (v6..v9 core, or init passed NULL) every helper is one relaxed load and
 * a NULL test; an isend/irecv without a parent handle starts nothing. The descriptor passed to
 * START lives only for the call (NCCL copies what it keeps), so transports build it on the stack.
 *
 * Threading: the callback is process-wide (NCCL passes the same function to every init); the
 * latest init's argument is kept. START/STOP of one request come from the thread that calls
 * isend/irecv/test for its comm, as NCCL requires. */
#ifndef STRAND_PROFILER_H
#define STRAND_PROFILER_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "strand/abi/types.h"

/* plugin_id = type | version (NCCL_PROFILER_NET_TYPE_* in profiler_v5.h; the low
 * STRAND_PROFILER_NET_VER_BITS bits carry the descriptor version). */
#define STRAND_PROFILER_NET_TYPE_IB (1U << STRAND_PROFILER_NET_VER_BITS)
#define STRAND_PROFILER_NET_TYPE_SOCK (2U << STRAND_PROFILER_NET_VER_BITS)
#define STRAND_PROFILER_NET_SOCK_VER 1
#define STRAND_PROFILER_NET_IB_VER 1
#define STRAND_PROFILER_NET_ID_SOCK                                                                \
  ((int64_t)(STRAND_PROFILER_NET_TYPE_SOCK | STRAND_PROFILER_NET_SOCK_VER))
#define STRAND_PROFILER_NET_ID_IB ((int64_t)(STRAND_PROFILER_NET_TYPE_IB | STRAND_PROFILER_NET_IB_VER))

/* Descriptor event types (the `type` byte). */
enum { STRAND_PROFILE_SOCKET = 1 << 0 };
enum { STRAND_PROFILE_QP = 1 << 0 };
/* op of the socket layout (NCCL_SOCKET_SEND / NCCL_SOCKET_RECV). */
enum { STRAND_PROFILE_SOCK_SEND = 0, STRAND_PROFILE_SOCK_RECV = 1 };

/* ncclProfilerNetSockDescr_v1_t. */
typedef struct {
  uint8_t type;
  union {
    struct {
      int fd;
      int op;
      size_t length;
    } sock;
  };
} strand_profiler_sock_descr_v1_t;
STRAND_STATIC_ASSERT(sizeof(strand_profiler_sock_descr_v1_t) == 24, "net_socket_v1 descr size");
STRAND_STATIC_ASSERT(offsetof(strand_profiler_sock_descr_v1_t, sock.fd) == 8, "");
STRAND_STATIC_ASSERT(offsetof(strand_profiler_sock_descr_v1_t, sock.op) == 12, "");
STRAND_STATIC_ASSERT(offsetof(strand_profiler_sock_descr_v1_t, sock.length) == 16, "");

/* ncclProfilerNetIbDescr_v1_t. */
typedef struct {
  uint8_t type;
  union {
    struct {
      int device;
      uint64_t wr_id;
      int opcode;
      int qpNum;
      size_t length;
    } qp;
  };
} strand_profiler_ib_descr_v1_t;
STRAND_STATIC_ASSERT(sizeof(strand_profiler_ib_descr_v1_t) == 40, "net_ib_v1 descr size");
STRAND_STATIC_ASSERT(offsetof(strand_profiler_ib_descr_v1_t, qp.device) == 8, "");
STRAND_STATIC_ASSERT(offsetof(strand_profiler_ib_descr_v1_t, qp.wr_id) == 16, "");
STRAND_STATIC_ASSERT(offsetof(strand_profiler_ib_descr_v1_t, qp.opcode) == 24, "");
STRAND_STATIC_ASSERT(offsetof(strand_profiler_ib_descr_v1_t, qp.qpNum) == 28, "");
STRAND_STATIC_ASSERT(offsetof(strand_profiler_ib_descr_v1_t, qp.length) == 32, "");

#ifdef __cplusplus
extern "C" {
#endif

/* The callback of the latest init (NULL: none). Read through strand_profiler_fn(). */
extern __attribute__((visibility("hidden"))) _Atomic(strand_profiler_cb_t) strand_profiler_cb;

/* Call from the plugin's init with the callback the core passed. NULL keeps the current one: a
 * layer's own init of the net (collnet_stub, gin_proxy) passes none and must not switch the core's
 * events off. */
void strand_profiler_set(strand_profiler_cb_t cb);

#ifdef __cplusplus
}
#endif

static inline strand_profiler_cb_t strand_profiler_fn(void) {
  return atomic_load_explicit(&strand_profiler_cb, memory_order_relaxed);
}

/* True when a transport should build a descriptor and call strand_profiler_start for a request
 * with parent handle `parent`. */
static inline int strand_profiler_wanted(const void *parent) {
  return parent != NULL && strand_profiler_fn() != NULL;
}

/* START: *event receives the handle the core returns (NULL when the profiler does not want
 * network events). Always call with *event NULL first (a recycled request must not carry an old
 * handle): strand_profiler_wanted() false leaves *event as it is. */
static inline void strand_profiler_start(void **event, void *parent, int64_t plugin_id,
                                         void *descr) {
  strand_profiler_cb_t f = strand_profiler_fn();
  if (f == NULL || parent == NULL) return;
  (void)f(event, STRAND_PROFILER_NET_EVENT_START, parent, plugin_id, descr);
}

/* STOP the event START returned, once; *event is NULL afterwards. No-op for NULL. */
static inline void strand_profiler_stop(void **event) {
  if (*event == NULL) return;
  strand_profiler_cb_t f = strand_profiler_fn();
  if (f != NULL) (void)f(event, STRAND_PROFILER_NET_EVENT_STOP, NULL, 0, NULL);
  *event = NULL;
}

/* UPDATE (stop = 0) or UPDATE_AND_STOP (stop = 1) with a new descriptor (e.g. the received size). */
static inline void strand_profiler_update(void **event, void *descr, int stop) {
  if (*event == NULL) return;
  strand_profiler_cb_t f = strand_profiler_fn();
  if (f != NULL)
    (void)f(event, stop ? STRAND_PROFILER_NET_EVENT_UPDATE_AND_STOP : STRAND_PROFILER_NET_EVENT_UPDATE,
            NULL, 0, descr);
  if (stop) *event = NULL;
}

#endif
