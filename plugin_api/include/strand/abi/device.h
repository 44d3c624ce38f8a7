/* Strand — NCCL plugin ABI: device-offload types, the device handle (v7..v12) and the
 * NCCL_NET_DEVICE_UNPACK v7 structures (spec §2.4, §7.1). */
#ifndef STRAND_ABI_DEVICE_H
#define STRAND_ABI_DEVICE_H

#include <stddef.h>
#include <stdint.h>
#include "strand/abi/types.h"

/* ncclNetDeviceType. A net plugin may only report HOST or UNPACK (§1.3); a GIN/RMA plugin GIN_*. */
typedef enum {
  STRAND_DEV_HOST = 0,
  STRAND_DEV_UNPACK = 1,
  STRAND_DEV_GIN_PROXY = 2,
  STRAND_DEV_GIN_GDAKI = 3,
  STRAND_DEV_GIN_GPI = 4,
  STRAND_DEV_GIN_EFA_GDA = 5 /* NCCL 2.31.2 (aws-ofi-nccl#1355: 4 meant this before 2.31.2) */
} strand_dev_type_t;
/* NCCL_GIN_PROXY_VERSION: netDeviceVersion of a GIN_PROXY device handle (2.28.9 and 2.30.7). */
#define STRAND_GIN_PROXY_VERSION 100

#define STRAND_NET_DEVICE_INVALID_VERSION 0x0
#define STRAND_NET_MTU_SIZE 4096
#define STRAND_NET_DEVICE_UNPACK_VERSION 0x7

/* ncclNetDeviceHandle_v7_t; identical for v7..v12. */
typedef struct {
  strand_dev_type_t netDeviceType;
  int netDeviceVersion;
  void *handle;           /* plugin object visible to the device (UNPACK: strand_unpack_handle_t) */
  size_t size;            /* size of *handle, informational */
  int needsProxyProgress; /* 1: the proxy must keep driving isend/irecv/test */
} strand_dev_handle_t;
typedef strand_dev_handle_t strand_dev_handle_v7_t;
typedef strand_dev_handle_t strand_dev_handle_v8_t;
typedef strand_dev_handle_t strand_dev_handle_v9_t;
typedef strand_dev_handle_t strand_dev_handle_v10_t;
typedef strand_dev_handle_t strand_dev_handle_v11_t;
typedef strand_dev_handle_t strand_dev_handle_v12_t;

STRAND_STATIC_ASSERT(sizeof(strand_dev_type_t) == 4, "ncclNetDeviceType is 4 bytes");
STRAND_STATIC_ASSERT(sizeof(strand_dev_handle_t) == 32, "device handle is 32 bytes");
STRAND_STATIC_ASSERT(STRAND_ALIGNOF(strand_dev_handle_t) == 8, "device handle align 8");
STRAND_STATIC_ASSERT(offsetof(strand_dev_handle_t, netDeviceType) == 0, "");
STRAND_STATIC_ASSERT(offsetof(strand_dev_handle_t, netDeviceVersion) == 4, "");
STRAND_STATIC_ASSERT(offsetof(strand_dev_handle_t, handle) == 8, "");
STRAND_STATIC_ASSERT(offsetof(strand_dev_handle_t, size) == 16, "");
STRAND_STATIC_ASSERT(offsetof(strand_dev_handle_t, needsProxyProgress) == 24, "");

/* UNPACK v7 (§7.1). */
#define STRAND_UNPACK_MAX_QUEUE_DEPTH 16         /* slots */
#define STRAND_UNPACK_MAX_SLICE_SIZE (4u << 20)  /* bytes per irecv */
#define STRAND_UNPACK_SLICE_PAGE_SIZE 4096
#define STRAND_UNPACK_MAX_SLICE_PAGES 2048       /* entries per slot */
#define STRAND_UNPACK_WARP_SHM_PAGE_CNT 4
#define STRAND_UNPACK_MAX_NPEERS 2
#define STRAND_UNPACK_MAX_GROUPS 16

/* One fragment: copy len bytes from bounce_buf + src_off to dst + dst_off. 16 bytes, align 16. */
typedef union {
  struct {
    uint32_t src_off;
    uint32_t len;
    uint64_t dst_off;
  };
  uint64_t r64[2];
} __attribute__((aligned(16))) strand_unpack_load_meta_t;

/* Metadata queue read by NCCL's kernel: 16 slots of 2048 entries, then 16 counts. */
typedef struct {
  strand_unpack_load_meta_t mem[STRAND_UNPACK_MAX_QUEUE_DEPTH][STRAND_UNPACK_MAX_SLICE_PAGES];
  uint64_t cnt[STRAND_UNPACK_MAX_QUEUE_DEPTH];
} __attribute__((aligned(16))) strand_unpack_meta_t;

/* What ncclNetDeviceHandle.handle points at for UNPACK (device memory). */
typedef struct {
  strand_unpack_meta_t *meta; /* device-usable pointer to the queue */
  void *bounce_buf;           /* device pointer, base of the bounce region */
  uint64_t head;              /* consumer counter written by the GPU; start at UINT64_MAX */
} strand_unpack_handle_t;

STRAND_STATIC_ASSERT(sizeof(strand_unpack_load_meta_t) == 16, "loadMeta is 16 bytes");
STRAND_STATIC_ASSERT(STRAND_ALIGNOF(strand_unpack_load_meta_t) == 16, "loadMeta align 16");
STRAND_STATIC_ASSERT(offsetof(strand_unpack_load_meta_t, src_off) == 0, "");
STRAND_STATIC_ASSERT(offsetof(strand_unpack_load_meta_t, len) == 4, "");
STRAND_STATIC_ASSERT(offsetof(strand_unpack_load_meta_t, dst_off) == 8, "");
STRAND_STATIC_ASSERT(sizeof(strand_unpack_meta_t) == 524416, "netUnpackMeta is 524,416 bytes");
STRAND_STATIC_ASSERT(STRAND_ALIGNOF(strand_unpack_meta_t) == 16, "netUnpackMeta align 16");
STRAND_STATIC_ASSERT(offsetof(strand_unpack_meta_t, mem) == 0, "");
STRAND_STATIC_ASSERT(offsetof(strand_unpack_meta_t, mem[1][0]) == 32768, "slot stride 32768");
STRAND_STATIC_ASSERT(offsetof(strand_unpack_meta_t, mem[0][1]) == 16, "entry stride 16");
STRAND_STATIC_ASSERT(offsetof(strand_unpack_meta_t, cnt) == 524288, "");
STRAND_STATIC_ASSERT(sizeof(strand_unpack_handle_t) == 24, "unpackNetDeviceHandle is 24 bytes");
STRAND_STATIC_ASSERT(offsetof(strand_unpack_handle_t, meta) == 0, "");
STRAND_STATIC_ASSERT(offsetof(strand_unpack_handle_t, bounce_buf) == 8, "");
STRAND_STATIC_ASSERT(offsetof(strand_unpack_handle_t, head) == 16, "");

#endif
