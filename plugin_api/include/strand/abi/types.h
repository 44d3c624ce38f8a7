/* Strand — NCCL plugin ABI: scalar types, enums and constants shared by every version.
 *
 * Restated from the facts in docs/spec/nccl-net-abi.md (§2.1-2.3, §2.7, §5). Names carry the
 * strand_/STRAND_ prefix so these headers can sit beside nccl.h in one translation unit; the
 * values and sizes are NCCL's, and the static asserts below pin them. */
#ifndef STRAND_ABI_TYPES_H
#define STRAND_ABI_TYPES_H

#include <stddef.h>
#include <stdint.h>

/* The layout asserts compile as C11 and as C++11 (vendors write plugins in both). */
#ifdef __cplusplus
#define STRAND_STATIC_ASSERT(cond, msg) static_assert(cond, msg)
#define STRAND_ALIGNOF(T) alignof(T)
#else
#define STRAND_ALIGNOF(T) _Alignof(T)
#define STRAND_STATIC_ASSERT(cond, msg) _Static_assert(cond, msg)
#endif

/* ncclResult_t (§2.1): a 4-byte enum. */
typedef enum {
  STRAND_SUCCESS = 0,
  STRAND_UNHANDLED_CUDA_ERROR = 1,
  STRAND_SYSTEM_ERROR = 2,   /* OS / network / hardware failure */
  STRAND_INTERNAL_ERROR = 3, /* core misused the plugin, or a plugin bug */
  STRAND_INVALID_ARGUMENT = 4,
  STRAND_INVALID_USAGE = 5,  /* user or configuration error, size mismatch */
  STRAND_REMOTE_ERROR = 6,   /* the remote peer failed */
  STRAND_IN_PROGRESS = 7,
  STRAND_TIMEOUT = 8,
  STRAND_NUM_RESULTS = 9
} strand_result_t;

/* ncclDebugLogLevel (§2.2). */
typedef enum {
  STRAND_LOG_NONE = 0,
  STRAND_LOG_VERSION = 1,
  STRAND_LOG_WARN = 2,
  STRAND_LOG_INFO = 3,
  STRAND_LOG_ABORT = 4,
  STRAND_LOG_TRACE = 5
} strand_log_level_t;

/* ncclDebugLogSubSys bit flags (§2.2), passed as the logger's `flags`. */
enum {
  STRAND_SUBSYS_INIT = 0x1,
  STRAND_SUBSYS_COLL = 0x2,
  STRAND_SUBSYS_P2P = 0x4,
  STRAND_SUBSYS_SHM = 0x8,
  STRAND_SUBSYS_NET = 0x10,
  STRAND_SUBSYS_GRAPH = 0x20,
  STRAND_SUBSYS_TUNING = 0x40,
  STRAND_SUBSYS_ENV = 0x80,
  STRAND_SUBSYS_ALLOC = 0x100,
  STRAND_SUBSYS_CALL = 0x200,
  STRAND_SUBSYS_PROXY = 0x400,
  STRAND_SUBSYS_NVLS = 0x800,
  STRAND_SUBSYS_BOOTSTRAP = 0x1000,
  STRAND_SUBSYS_REG = 0x2000,
  STRAND_SUBSYS_PROFILE = 0x4000,
  STRAND_SUBSYS_RAS = 0x8000,
  STRAND_SUBSYS_DESTROY = 0x10000,
  STRAND_SUBSYS_ALLOC_HOST = 0x20000
};
#define STRAND_SUBSYS_ALL (~0UL)

/* ncclDebugLogger_t (§2.2): NCCL's logger, handed to init. */
typedef void (*strand_logger_t)(strand_log_level_t level, unsigned long flags, const char *file,
                                int line, const char *fmt, ...);

/* ncclProfilerCallback_t (§2.3), handed to init from v10 on. */
typedef strand_result_t (*strand_profiler_cb_t)(void **event_handle, int type, void *parent_handle,
                                                int64_t plugin_id, void *ext_data);
enum {
  STRAND_PROFILER_NET_EVENT_START = 0,
  STRAND_PROFILER_NET_EVENT_STOP = 1,
  STRAND_PROFILER_NET_EVENT_UPDATE = 2,
  STRAND_PROFILER_NET_EVENT_UPDATE_AND_STOP = 3
};
#define STRAND_PROFILER_NET_VER_BITS 16

/* ncclDataType_t (§2.7). */
typedef enum {
  STRAND_INT8 = 0,
  STRAND_UINT8 = 1,
  STRAND_INT32 = 2,
  STRAND_UINT32 = 3,
  STRAND_INT64 = 4,
  STRAND_UINT64 = 5,
  STRAND_FLOAT16 = 6,
  STRAND_FLOAT32 = 7,
  STRAND_FLOAT64 = 8,
  STRAND_BFLOAT16 = 9,
  STRAND_FLOAT8_E4M3 = 10,
  STRAND_FLOAT8_E5M2 = 11,
  STRAND_NUM_TYPES = 12
} strand_datatype_t;

/* ncclRedOp_t (§2.7). CollNet only ever sees SUM..MIN. */
typedef enum {
  STRAND_SUM = 0,
  STRAND_PROD = 1,
  STRAND_MAX = 2,
  STRAND_MIN = 3,
  STRAND_AVG = 4,
  STRAND_NUM_OPS = 5,
  STRAND_MAX_REDOP = 0x7fffffff
} strand_redop_t;

/* Constants of §5. */
#define STRAND_NET_HANDLE_MAXSIZE 128
#define STRAND_NET_MAX_REQUESTS 32   /* per comm, v7+ */
#define STRAND_NET_MAX_REQUESTS_V6 8 /* per comm, v6 cores */
/* Pre-stored in *request before irecv by v9+ cores (§6.6). */
#define STRAND_NET_OPTIONAL_RECV_COMPLETION 0x1
#define STRAND_NET_OPTIONAL_RECV_COMPLETION_PTR ((void *)(uintptr_t)STRAND_NET_OPTIONAL_RECV_COMPLETION)
#define STRAND_NET_MULTI_REQUEST 0x2
#define STRAND_PTR_HOST 0x1
#define STRAND_PTR_CUDA 0x2
#define STRAND_PTR_DMABUF 0x4
#define STRAND_MAX_NET_SIZE_BYTES (1ULL << 40)  /* bound of maxP2pBytes / maxCollBytes */
#define STRAND_MAX_NET_SIZE_V8 (1ULL << 30)     /* v6-v8 isend/irecv cap, their maxP2pBytes */
#define STRAND_MAX_COLLNET_SIZE_V8 (1ULL << 29) /* v6-v8 maxCollBytes */
#define STRAND_NET_MAX_PLUGINS 16
#define STRAND_NET_MAX_DEVS_PER_NIC_V11 4
#define STRAND_NET_MAX_DEVS_PER_NIC_V12 8
#define STRAND_NET_TRAFFIC_CLASS_UNDEF (-1)
#define STRAND_NET_ATTR_UNDEF (-1)
#define STRAND_NET_ID_UNDEF (-1)
#define STRAND_NCCL_STEPS 8
#define STRAND_PROXY_MAX_SUBS 64
#define STRAND_SHARED_STEPS 16
#define STRAND_P2P_NET_CHUNKSIZE (128 * 1024)
#define STRAND_BUFFSIZE_LL (512 * 1024)
#define STRAND_BUFFSIZE_LL128 4915200
#define STRAND_BUFFSIZE_SIMPLE (4 * 1024 * 1024)

/* Algorithm, protocol and function ids: bit positions in ncclNetAttr.algo/proto/op (§5). */
enum { STRAND_ALGO_TREE = 0, STRAND_ALGO_RING = 1, STRAND_ALGO_COLLNET_DIRECT = 2,
       STRAND_ALGO_COLLNET_CHAIN = 3, STRAND_ALGO_NVLS = 4, STRAND_ALGO_NVLS_TREE = 5,
       STRAND_ALGO_PAT = 6 };
enum { STRAND_PROTO_LL = 0, STRAND_PROTO_LL128 = 1, STRAND_PROTO_SIMPLE = 2, STRAND_NUM_PROTOCOLS = 3 };
enum { STRAND_FUNC_BROADCAST = 0, STRAND_FUNC_REDUCE = 1, STRAND_FUNC_ALLGATHER = 2,
       STRAND_FUNC_REDUCESCATTER = 3, STRAND_FUNC_ALLREDUCE = 4, STRAND_FUNC_SENDRECV = 5,
       STRAND_FUNC_SEND = 6, STRAND_FUNC_RECV = 7, STRAND_FUNC_ALLTOALL = 8, STRAND_FUNC_SCATTER = 9,
       STRAND_FUNC_GATHER = 10, STRAND_FUNC_ALLGATHERV = 11, STRAND_FUNC_PUTSIGNAL = 12,
       STRAND_FUNC_SIGNAL = 13, STRAND_FUNC_WAITSIGNAL = 14 };

/* Every enum crosses the ABI as 4 bytes (§5.1 item 9). */
STRAND_STATIC_ASSERT(sizeof(strand_result_t) == 4, "ncclResult_t is 4 bytes");
STRAND_STATIC_ASSERT(sizeof(strand_log_level_t) == 4, "ncclDebugLogLevel is 4 bytes");
STRAND_STATIC_ASSERT(sizeof(strand_datatype_t) == 4, "ncclDataType_t is 4 bytes");
STRAND_STATIC_ASSERT(sizeof(strand_redop_t) == 4, "ncclRedOp_t is 4 bytes");
STRAND_STATIC_ASSERT(sizeof(void *) == 8 && sizeof(size_t) == 8, "Strand targets LP64 Linux");

#endif
