/* Strand — NCCL plugin ABI: properties v6..v12, vNIC properties, comm config, net attributes and
 * scatter-gather entries (spec §2.5, §2.6). Offsets are pinned by static asserts. */
#ifndef STRAND_ABI_PROPS_H
#define STRAND_ABI_PROPS_H

#include <stddef.h>
#include <stdint.h>
#include "strand/abi/types.h"
#include "strand/abi/device.h"

/* ncclNetVDeviceProps: v9..v11 hold 4 devices, v12 holds 8. */
typedef struct {
  int ndevs;
  int devs[STRAND_NET_MAX_DEVS_PER_NIC_V11];
} strand_vprops_v9_t;
typedef strand_vprops_v9_t strand_vprops_v10_t;
typedef strand_vprops_v9_t strand_vprops_v11_t;
typedef struct {
  int ndevs;
  int devs[STRAND_NET_MAX_DEVS_PER_NIC_V12];
} strand_vprops_v12_t;

/* ncclNetCommConfig_v10/v11/v12_t. */
typedef struct {
  int trafficClass; /* STRAND_NET_TRAFFIC_CLASS_UNDEF when the user set none */
} strand_comm_config_t;
typedef strand_comm_config_t strand_comm_config_v10_t;
typedef strand_comm_config_t strand_comm_config_v11_t;
typedef strand_comm_config_t strand_comm_config_v12_t;

/* ncclNetCommAttr / ncclNetAttr (v11, v12); every field -1 when undefined (§6.11). */
typedef struct {
  int32_t maxConcurrentPeers;
  int32_t minConcurrentPeers;
  int32_t maxFlowsPerPeer;
  int32_t minFlowsPerPeer;
} strand_comm_attr_t;
typedef struct {
  strand_comm_attr_t sendCommAttr;
  strand_comm_attr_t recvCommAttr;
  uint32_t op;    /* bit set of STRAND_FUNC_* */
  uint32_t algo;  /* bit set of STRAND_ALGO_* */
  uint32_t proto; /* bit set of STRAND_PROTO_* */
} strand_net_attr_t;
typedef strand_net_attr_t strand_net_attr_v11_t;
typedef strand_net_attr_t strand_net_attr_v12_t;

/* ncclNetSGE: v8 has a 32-bit size, v9+ a size_t. */
typedef struct {
  void *mhandle;
  void *address;
  uint32_t size;
} strand_sge_v8_t;
typedef struct {
  void *mhandle;
  void *address;
  size_t size;
} strand_sge_v9_t;
typedef strand_sge_v9_t strand_sge_v10_t;
typedef strand_sge_v9_t strand_sge_v11_t;
typedef strand_sge_v9_t strand_sge_v12_t;

/* ncclNetProperties_vN_t. Field order is the ABI; do not reorder. */
typedef struct {
  char *name;
  char *pciPath;
  uint64_t guid;
  int ptrSupport;
  int speed;
  int port;
  float latency;
  int maxComms;
  int maxRecvs;
} strand_props_v6_t;

typedef struct {
  char *name;
  char *pciPath;
  uint64_t guid;
  int ptrSupport;
  int speed;
  int port;
  float latency;
  int maxComms;
  int maxRecvs;
  strand_dev_type_t netDeviceType;
  int netDeviceVersion;
} strand_props_v7_t;

typedef struct {
  char *name;
  char *pciPath;
  uint64_t guid;
  int ptrSupport;
  int regIsGlobal;
  int speed;
  int port;
  float latency;
  int maxComms;
  int maxRecvs;
  strand_dev_type_t netDeviceType;
  int netDeviceVersion;
} strand_props_v8_t;

typedef struct {
  char *name;
  char *pciPath;
  uint64_t guid;
  int ptrSupport;
  int regIsGlobal;
  int forceFlush;
  int speed;
  int port;
  float latency;
  int maxComms;
  int maxRecvs;
  strand_dev_type_t netDeviceType;
  int netDeviceVersion;
  strand_vprops_v9_t vProps;
  size_t maxP2pBytes;
  size_t maxCollBytes;
} strand_props_v9_t;
typedef strand_props_v9_t strand_props_v10_t;

typedef struct {
  char *name;
  char *pciPath;
  uint64_t guid;
  int ptrSupport;
  int regIsGlobal;
  int forceFlush;
  int speed;
  int port;
  float latency;
  int maxComms;
  int maxRecvs;
  strand_dev_type_t netDeviceType;
  int netDeviceVersion;
  strand_vprops_v11_t vProps;
  size_t maxP2pBytes;
  size_t maxCollBytes;
  int maxMultiRequestSize;
} strand_props_v11_t;

typedef struct {
  char *name;
  char *pciPath;
  uint64_t guid;
  int ptrSupport;
  int regIsGlobal;
  int forceFlush;
  int speed;
  int port;
  float latency;
  int maxComms;
  int maxRecvs;
  strand_dev_type_t netDeviceType;
  int netDeviceVersion;
  strand_vprops_v12_t vProps;
  size_t maxP2pBytes;
  size_t maxCollBytes;
  int maxMultiRequestSize;
  int16_t railId;
  int16_t planeId;
} strand_props_v12_t;

/* §2.5 */
STRAND_STATIC_ASSERT(sizeof(strand_vprops_v9_t) == 20 && STRAND_ALIGNOF(strand_vprops_v9_t) == 4, "");
STRAND_STATIC_ASSERT(offsetof(strand_vprops_v9_t, devs) == 4, "");
STRAND_STATIC_ASSERT(sizeof(strand_vprops_v12_t) == 36 && STRAND_ALIGNOF(strand_vprops_v12_t) == 4, "");
STRAND_STATIC_ASSERT(offsetof(strand_vprops_v12_t, devs) == 4, "");
STRAND_STATIC_ASSERT(sizeof(strand_comm_config_t) == 4, "");
STRAND_STATIC_ASSERT(sizeof(strand_comm_attr_t) == 16, "");
STRAND_STATIC_ASSERT(offsetof(strand_comm_attr_t, minConcurrentPeers) == 4, "");
STRAND_STATIC_ASSERT(offsetof(strand_comm_attr_t, maxFlowsPerPeer) == 8, "");
STRAND_STATIC_ASSERT(offsetof(strand_comm_attr_t, minFlowsPerPeer) == 12, "");
STRAND_STATIC_ASSERT(sizeof(strand_net_attr_t) == 44 && STRAND_ALIGNOF(strand_net_attr_t) == 4, "");
STRAND_STATIC_ASSERT(offsetof(strand_net_attr_t, recvCommAttr) == 16, "");
STRAND_STATIC_ASSERT(offsetof(strand_net_attr_t, op) == 32, "");
STRAND_STATIC_ASSERT(offsetof(strand_net_attr_t, algo) == 36, "");
STRAND_STATIC_ASSERT(offsetof(strand_net_attr_t, proto) == 40, "");
STRAND_STATIC_ASSERT(sizeof(strand_sge_v8_t) == 24 && STRAND_ALIGNOF(strand_sge_v8_t) == 8, "");
STRAND_STATIC_ASSERT(offsetof(strand_sge_v8_t, address) == 8 && offsetof(strand_sge_v8_t, size) == 16, "");
STRAND_STATIC_ASSERT(sizeof(strand_sge_v9_t) == 24 && STRAND_ALIGNOF(strand_sge_v9_t) == 8, "");
STRAND_STATIC_ASSERT(offsetof(strand_sge_v9_t, address) == 8 && offsetof(strand_sge_v9_t, size) == 16, "");

/* §2.6, one assert per cell of the offset table. */
#define STRAND_OFF(T, f, o) STRAND_STATIC_ASSERT(offsetof(T, f) == (o), #T "." #f " @" #o)
STRAND_OFF(strand_props_v6_t, name, 0);
STRAND_OFF(strand_props_v6_t, pciPath, 8);
STRAND_OFF(strand_props_v6_t, guid, 16);
STRAND_OFF(strand_props_v6_t, ptrSupport, 24);
STRAND_OFF(strand_props_v6_t, speed, 28);
STRAND_OFF(strand_props_v6_t, port, 32);
STRAND_OFF(strand_props_v6_t, latency, 36);
STRAND_OFF(strand_props_v6_t, maxComms, 40);
STRAND_OFF(strand_props_v6_t, maxRecvs, 44);
STRAND_STATIC_ASSERT(sizeof(strand_props_v6_t) == 48, "props v6 is 48 bytes");

STRAND_OFF(strand_props_v7_t, name, 0);
STRAND_OFF(strand_props_v7_t, pciPath, 8);
STRAND_OFF(strand_props_v7_t, guid, 16);
STRAND_OFF(strand_props_v7_t, ptrSupport, 24);
STRAND_OFF(strand_props_v7_t, speed, 28);
STRAND_OFF(strand_props_v7_t, port, 32);
STRAND_OFF(strand_props_v7_t, latency, 36);
STRAND_OFF(strand_props_v7_t, maxComms, 40);
STRAND_OFF(strand_props_v7_t, maxRecvs, 44);
STRAND_OFF(strand_props_v7_t, netDeviceType, 48);
STRAND_OFF(strand_props_v7_t, netDeviceVersion, 52);
STRAND_STATIC_ASSERT(sizeof(strand_props_v7_t) == 56, "props v7 is 56 bytes");

STRAND_OFF(strand_props_v8_t, name, 0);
STRAND_OFF(strand_props_v8_t, pciPath, 8);
STRAND_OFF(strand_props_v8_t, guid, 16);
STRAND_OFF(strand_props_v8_t, ptrSupport, 24);
STRAND_OFF(strand_props_v8_t, regIsGlobal, 28);
STRAND_OFF(strand_props_v8_t, speed, 32);
STRAND_OFF(strand_props_v8_t, port, 36);
STRAND_OFF(strand_props_v8_t, latency, 40);
STRAND_OFF(strand_props_v8_t, maxComms, 44);
STRAND_OFF(strand_props_v8_t, maxRecvs, 48);
STRAND_OFF(strand_props_v8_t, netDeviceType, 52);
STRAND_OFF(strand_props_v8_t, netDeviceVersion, 56);
STRAND_STATIC_ASSERT(sizeof(strand_props_v8_t) == 64, "props v8 is 64 bytes");

STRAND_OFF(strand_props_v9_t, name, 0);
STRAND_OFF(strand_props_v9_t, pciPath, 8);
STRAND_OFF(strand_props_v9_t, guid, 16);
STRAND_OFF(strand_props_v9_t, ptrSupport, 24);
STRAND_OFF(strand_props_v9_t, regIsGlobal, 28);
STRAND_OFF(strand_props_v9_t, forceFlush, 32);
STRAND_OFF(strand_props_v9_t, speed, 36);
STRAND_OFF(strand_props_v9_t, port, 40);
STRAND_OFF(strand_props_v9_t, latency, 44);
STRAND_OFF(strand_props_v9_t, maxComms, 48);
STRAND_OFF(strand_props_v9_t, maxRecvs, 52);
STRAND_OFF(strand_props_v9_t, netDeviceType, 56);
STRAND_OFF(strand_props_v9_t, netDeviceVersion, 60);
STRAND_OFF(strand_props_v9_t, vProps, 64);
STRAND_OFF(strand_props_v9_t, maxP2pBytes, 88);
STRAND_OFF(strand_props_v9_t, maxCollBytes, 96);
STRAND_STATIC_ASSERT(sizeof(strand_props_v9_t) == 104, "props v9/v10 are 104 bytes");

STRAND_OFF(strand_props_v11_t, name, 0);
STRAND_OFF(strand_props_v11_t, pciPath, 8);
STRAND_OFF(strand_props_v11_t, guid, 16);
STRAND_OFF(strand_props_v11_t, ptrSupport, 24);
STRAND_OFF(strand_props_v11_t, regIsGlobal, 28);
STRAND_OFF(strand_props_v11_t, forceFlush, 32);
STRAND_OFF(strand_props_v11_t, speed, 36);
STRAND_OFF(strand_props_v11_t, port, 40);
STRAND_OFF(strand_props_v11_t, latency, 44);
STRAND_OFF(strand_props_v11_t, maxComms, 48);
STRAND_OFF(strand_props_v11_t, maxRecvs, 52);
STRAND_OFF(strand_props_v11_t, netDeviceType, 56);
STRAND_OFF(strand_props_v11_t, netDeviceVersion, 60);
STRAND_OFF(strand_props_v11_t, vProps, 64);
STRAND_OFF(strand_props_v11_t, maxP2pBytes, 88);
STRAND_OFF(strand_props_v11_t, maxCollBytes, 96);
STRAND_OFF(strand_props_v11_t, maxMultiRequestSize, 104);
STRAND_STATIC_ASSERT(sizeof(strand_props_v11_t) == 112, "props v11 is 112 bytes");

STRAND_OFF(strand_props_v12_t, name, 0);
STRAND_OFF(strand_props_v12_t, pciPath, 8);
STRAND_OFF(strand_props_v12_t, guid, 16);
STRAND_OFF(strand_props_v12_t, ptrSupport, 24);
STRAND_OFF(strand_props_v12_t, regIsGlobal, 28);
STRAND_OFF(strand_props_v12_t, forceFlush, 32);
STRAND_OFF(strand_props_v12_t, speed, 36);
STRAND_OFF(strand_props_v12_t, port, 40);
STRAND_OFF(strand_props_v12_t, latency, 44);
STRAND_OFF(strand_props_v12_t, maxComms, 48);
STRAND_OFF(strand_props_v12_t, maxRecvs, 52);
STRAND_OFF(strand_props_v12_t, netDeviceType, 56);
STRAND_OFF(strand_props_v12_t, netDeviceVersion, 60);
STRAND_OFF(strand_props_v12_t, vProps, 64);
STRAND_OFF(strand_props_v12_t, maxP2pBytes, 104);
STRAND_OFF(strand_props_v12_t, maxCollBytes, 112);
STRAND_OFF(strand_props_v12_t, maxMultiRequestSize, 120);
STRAND_OFF(strand_props_v12_t, railId, 124);
STRAND_OFF(strand_props_v12_t, planeId, 126);
STRAND_STATIC_ASSERT(sizeof(strand_props_v12_t) == 128, "props v12 is 128 bytes");

#endif
