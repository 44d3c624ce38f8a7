/* tests/e2e/nccl_profiler_abi.h — the part of NCCL's profiler plugin ABI (ext-profiler v5, NCCL
 * 2.26 .. 2.28) that proxy_profiler.c implements and test_proxy_profiler.c drives: the table, the
 * event descriptor up to the members read, the proxy-step event type and states. Written from
 * NCCL's profiler headers (facts: layouts and values). */
#ifndef STRAND_E2E_NCCL_PROFILER_ABI_H
#define STRAND_E2E_NCCL_PROFILER_ABI_H

#include <stdint.h>

typedef int pp_result_t; /* ncclResult_t; 0 = ncclSuccess */
enum { PP_SUCCESS = 0, PP_SYSTEM_ERROR = 2 };
typedef void (*pp_logger_t)(int level, unsigned long flags, const char *file, int line,
                            const char *fmt, ...);

/* Event types (the activation mask's bits) and the proxy-step states of NCCL's profiler ABI. */
enum { PP_EVENT_PROXY_OP = 1 << 3, PP_EVENT_PROXY_STEP = 1 << 4, PP_EVENT_NET_PLUGIN = 1 << 7 };
enum {
  PP_SEND_GPU_WAIT = 8,
  PP_SEND_WAIT = 9,
  PP_RECV_WAIT = 10,
  PP_RECV_FLUSH_WAIT = 11,
  PP_RECV_GPU_WAIT = 12,
  PP_SEND_PEER_WAIT = 20,
  PP_NET_PLUGIN_UPDATE = 21,
};

/* A network plugin's events (ncclProfileNetPlugin): the descriptor's id is type | version. The
 * type bits sit above the low 16 version bits: IB 1, socket 2 (profiler_v5.h). The data layouts
 * (net_socket_v1.h, net_ib_v1.h) are the ones in plugin_api/include/strand/profiler.h. */
#define PP_NET_VER_BITS 16
#define PP_NET_TYPE_IB (1LL << PP_NET_VER_BITS)
#define PP_NET_TYPE_SOCK (2LL << PP_NET_VER_BITS)

/* ncclProfilerEventDescr_v5_t: type, parentObj, rank, then a union of which only proxyStep is read. */
typedef struct {
  uint64_t type;
  void *parentObj;
  int rank;
  union { /* 8-byte aligned, at offset 24, as in NCCL (its other members hold pointers) */
    struct {
      int step;
    } proxyStep;
    struct {
      int64_t id;   /* PP_NET_TYPE_* | version */
      void *data;   /* the plugin's descriptor; valid during startEvent only */
    } netPlugin;
  };
} pp_descr_t;
_Static_assert(__builtin_offsetof(pp_descr_t, proxyStep) == 24, "ncclProfilerEventDescr_v5_t union");
_Static_assert(__builtin_offsetof(pp_descr_t, netPlugin.data) == 32, "netPlugin.data");

typedef struct {
  const char *name;
  pp_result_t (*init)(void **context, uint64_t commId, int *eActivationMask, const char *commName,
                      int nNodes, int nranks, int rank, pp_logger_t logfn);
  pp_result_t (*startEvent)(void *context, void **eHandle, pp_descr_t *eDescr);
  pp_result_t (*stopEvent)(void *eHandle);
  pp_result_t (*recordEventState)(void *eHandle, int eState, void *eStateArgs);
  pp_result_t (*finalize)(void *context);
} pp_profiler_v5_t;

#endif
