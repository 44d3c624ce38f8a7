/* Strand — NCCL plugin ABI: the GIN tables ncclGin_v11_t .. ncclGin_v14_t, exported as
 * ncclGinPlugin_v11 .. ncclGinPlugin_v14 (docs/spec/gin-rma.md).
 *
 * Restated from NCCL's headers (v2.28.9-1 src/include/plugin/net/net_v11.h, v2.29.7-1
 * src/include/plugin/gin/gin_v12.h, v2.30.7-1 src/include/plugin/gin/gin_v13.h and gin_v14.h).
 * Which core loads which (NCCL's src/plugin/gin.cc):
 *   2.28.7-2.28.9  ncclGinPlugin_v11, from the net plugin's library
 *   2.29.x         ncclGinPlugin_v12 (then v11), from NCCL_GIN_PLUGIN or the net library
 *   2.30.x         ncclGinPlugin_v14 (then v13); an external GIN that reports GIN_PROXY is skipped:
 *                  2.30 runs its own GIN proxy over an RMA plugin (strand/abi/rma.h)
 * v11/v12 carry the host data path (iput, iputSignal, test) that NCCL's GIN proxy drives;
 * v13 adds iget/iflush and per-context calls; v14 drops the data path (device-side GIN only). */
#ifndef STRAND_ABI_GIN_H
#define STRAND_ABI_GIN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "strand/abi/types.h"
#include "strand/abi/device.h"
#include "strand/abi/props.h"

/* NCCL_GIN_SIGNAL_OP_* (nccl_gin.h; NCCL_NET_SIGNAL_OP_* in 2.28's nccl_net.h): what a signal
 * does to the remote 64-bit word. INC adds 1 (the value argument is ignored), ADD adds the value. */
#define STRAND_GIN_SIGNAL_OP_INC 0x1
#define STRAND_GIN_SIGNAL_OP_ADD 0x2
/* NCCL_NET_MR_FLAG_FORCE_SO: register with strict ordering (NCCL asks it of its signal array). */
#define STRAND_GIN_MR_FLAG_FORCE_SO (1 << 0)
#define STRAND_GIN_HANDLE_MAXSIZE 128
/* MAX_GIN_SIZE: the largest single put NCCL issues (1 GiB). */
#define STRAND_MAX_GIN_SIZE (1ULL << 30)

/* ncclGin_v11_t: 19 slots. init has no config; connect gets every rank's listen handle. */
typedef struct {
  const char *name;
  strand_result_t (*init)(void **ctx, uint64_t commId, strand_logger_t logFunction);
  strand_result_t (*devices)(int *ndev);
  strand_result_t (*getProperties)(int dev, strand_props_v11_t *props);
  strand_result_t (*listen)(void *ctx, int dev, void *handle, void **listenComm);
  strand_result_t (*connect)(void *ctx, void *handles[], int nranks, int rank, void *listenComm, void **collComm);
  strand_result_t (*createContext)(void *collComm, int nSignals, int nCounters, void **ginCtx, strand_dev_handle_v11_t **devHandle);
  strand_result_t (*regMrSym)(void *collComm, void *data, size_t size, int type, uint64_t mrFlags, void **mhandle, void **ginHandle);
  strand_result_t (*regMrSymDmaBuf)(void *collComm, void *data, size_t size, int type, uint64_t offset, int fd, uint64_t mrFlags, void **mhandle, void **ginHandle);
  strand_result_t (*deregMrSym)(void *collComm, void *mhandle);
  strand_result_t (*destroyContext)(void *ginCtx);
  strand_result_t (*closeColl)(void *collComm);
  strand_result_t (*closeListen)(void *listenComm);
  strand_result_t (*iput)(void *collComm, uint64_t srcOff, void *srcMhandle, size_t size, uint64_t dstOff, void *dstMhandle, uint32_t rank, void **request);
  strand_result_t (*iputSignal)(void *collComm, uint64_t srcOff, void *srcMhandle, size_t size, uint64_t dstOff, void *dstMhandle, uint32_t rank, uint64_t signalOff, void *signalMhandle, uint64_t signalValue, uint32_t signalOp, void **request);
  strand_result_t (*test)(void *collComm, void *request, int *done);
  strand_result_t (*ginProgress)(void *collComm);
  strand_result_t (*queryLastError)(void *ginCtx, bool *hasError);
  strand_result_t (*finalize)(void *ctx);
} strand_gin_v11_t;

/* ncclGin_v12_t: 19 slots. connect gains nConnections and queueDepth, createContext nContexts,
 * iput/iputSignal a connectionId. */
typedef struct {
  const char *name;
  strand_result_t (*init)(void **ctx, uint64_t commId, strand_logger_t logFunction);
  strand_result_t (*devices)(int *ndev);
  strand_result_t (*getProperties)(int dev, strand_props_v11_t *props);
  strand_result_t (*listen)(void *ctx, int dev, void *handle, void **listenComm);
  strand_result_t (*connect)(void *ctx, void *handles[], int nranks, int rank, int nConnections, int queueDepth, void *listenComm, void **collComm);
  strand_result_t (*createContext)(void *collComm, int nSignals, int nCounters, int nContexts, void **ginCtx, strand_dev_handle_v11_t **devHandle);
  strand_result_t (*regMrSym)(void *collComm, void *data, size_t size, int type, uint64_t mrFlags, void **mhandle, void **ginHandle);
  strand_result_t (*regMrSymDmaBuf)(void *collComm, void *data, size_t size, int type, uint64_t offset, int fd, uint64_t mrFlags, void **mhandle, void **ginHandle);
  strand_result_t (*deregMrSym)(void *collComm, void *mhandle);
  strand_result_t (*destroyContext)(void *ginCtx);
  strand_result_t (*closeColl)(void *collComm);
  strand_result_t (*closeListen)(void *listenComm);
  strand_result_t (*iput)(void *collComm, uint64_t srcOff, void *srcMhandle, size_t size, uint64_t dstOff, void *dstMhandle, uint32_t rank, int connectionId, void **request);
  strand_result_t (*iputSignal)(void *collComm, uint64_t srcOff, void *srcMhandle, size_t size, uint64_t dstOff, void *dstMhandle, uint32_t rank, uint64_t signalOff, void *signalMhandle, uint64_t signalValue, uint32_t signalOp, int connectionId, void **request);
  strand_result_t (*test)(void *collComm, void *request, int *done);
  strand_result_t (*ginProgress)(void *collComm);
  strand_result_t (*queryLastError)(void *ginCtx, bool *hasError);
  strand_result_t (*finalize)(void *ctx);
} strand_gin_v12_t;

/* ncclGinConfig_v13_t: createContext's configuration from v13 on. */
typedef struct {
  int nSignals;
  int nCounters;
  int nContexts;
  int queueDepth;
  int trafficClass;
} strand_gin_config_v13_t;

/* ncclGin_v13_t: 21 slots; props v12; the data path takes the context from createContext and a
 * context index, and gains iget / iflush. The same layout is RMA v13 (strand/abi/rma.h). */
typedef struct {
  const char *name;
  strand_result_t (*init)(void **ctx, uint64_t commId, strand_logger_t logFunction);
  strand_result_t (*devices)(int *ndev);
  strand_result_t (*getProperties)(int dev, strand_props_v12_t *props);
  strand_result_t (*listen)(void *ctx, int dev, void *handle, void **listenComm);
  strand_result_t (*connect)(void *ctx, void *handles[], int nranks, int rank, void *listenComm, void **collComm);
  strand_result_t (*createContext)(void *collComm, strand_gin_config_v13_t *config, void **ginCtx, strand_dev_handle_v11_t **devHandle);
  strand_result_t (*regMrSym)(void *collComm, void *data, size_t size, int type, uint64_t mrFlags, void **mhandle, void **ginHandle);
  strand_result_t (*regMrSymDmaBuf)(void *collComm, void *data, size_t size, int type, uint64_t offset, int fd, uint64_t mrFlags, void **mhandle, void **ginHandle);
  strand_result_t (*deregMrSym)(void *collComm, void *mhandle);
  strand_result_t (*destroyContext)(void *ginCtx);
  strand_result_t (*closeColl)(void *collComm);
  strand_result_t (*closeListen)(void *listenComm);
  strand_result_t (*iput)(void *ginCtx, int context, uint64_t srcOff, void *srcMhandle, size_t size, uint64_t dstOff, void *dstMhandle, uint32_t rank, void **request);
  strand_result_t (*iputSignal)(void *ginCtx, int context, uint64_t srcOff, void *srcMhandle, size_t size, uint64_t dstOff, void *dstMhandle, uint32_t rank, uint64_t signalOff, void *signalMhandle, uint64_t signalValue, uint32_t signalOp, void **request);
  strand_result_t (*iget)(void *ginCtx, int context, uint64_t remoteOff, void *remoteMhandle, size_t size, uint64_t localOff, void *localMhandle, uint32_t rank, void **request);
  strand_result_t (*iflush)(void *ginCtx, int context, void *mhandle, uint32_t rank, void **request);
  strand_result_t (*test)(void *collComm, void *request, int *done);
  strand_result_t (*ginProgress)(void *ginCtx);
  strand_result_t (*queryLastError)(void *ginCtx, bool *hasError);
  strand_result_t (*finalize)(void *ctx);
} strand_gin_v13_t;

/* ncclGinProperties_v14_t and ncclGinConfig_v14_t. */
typedef struct {
  bool supportsStrongSignals;
  bool supportsVASignals;
} strand_gin_props_v14_t;

typedef struct {
  int nSignals;
  int nCounters;
  int nContexts;
  int queueDepth;
  int trafficClass;
  int backendVersion;
  int rankStride;
} strand_gin_config_v14_t;

/* ncclGin_v14_t: 17 slots; device-side GIN only (no host data path), getGinProperties added. */
typedef struct {
  const char *name;
  strand_result_t (*init)(void **ctx, uint64_t commId, strand_logger_t logFunction);
  strand_result_t (*devices)(int *ndev);
  strand_result_t (*getGinProperties)(strand_gin_props_v14_t *ginProps);
  strand_result_t (*getProperties)(int dev, strand_props_v12_t *props);
  strand_result_t (*listen)(void *ctx, int dev, void *handle, void **listenComm);
  strand_result_t (*connect)(void *ctx, void *handles[], int nranks, int rank, void *listenComm, void **collComm);
  strand_result_t (*createContext)(void *collComm, strand_gin_config_v14_t *config, void **ginCtx, strand_dev_handle_v11_t **devHandle);
  strand_result_t (*regMrSym)(void *collComm, void *data, size_t size, int type, uint64_t mrFlags, void **mhandle, void **ginHandle);
  strand_result_t (*regMrSymDmaBuf)(void *collComm, void *data, size_t size, int type, uint64_t offset, int fd, uint64_t mrFlags, void **mhandle, void **ginHandle);
  strand_result_t (*deregMrSym)(void *collComm, void *mhandle);
  strand_result_t (*destroyContext)(void *ginCtx);
  strand_result_t (*closeColl)(void *collComm);
  strand_result_t (*closeListen)(void *listenComm);
  strand_result_t (*ginProgress)(void *ginCtx);
  strand_result_t (*queryLastError)(void *ginCtx, bool *hasError);
  strand_result_t (*finalize)(void *ctx);
} strand_gin_v14_t;

/* Layout pins: every slot is one pointer, in NCCL's order. */
STRAND_STATIC_ASSERT(sizeof(strand_gin_v11_t) == 152, "ncclGin_v11_t size");
STRAND_STATIC_ASSERT(offsetof(strand_gin_v11_t, name) == 0, "ncclGin_v11_t.name");
STRAND_STATIC_ASSERT(offsetof(strand_gin_v11_t, init) == 8, "ncclGin_v11_t.init");
STRAND_STATIC_ASSERT(offsetof(strand_gin_v11_t, devices) == 16, "ncclGin_v11_t.devices");
STRAND_STATIC_ASSERT(offsetof(strand_gin_v11_t, getProperties) == 24, "ncclGin_v11_t.getProperties");
STRAND_STATIC_ASSERT(offsetof(strand_gin_v11_t, listen) == 32, "ncclGin_v11_t.listen");
STRAND_STATIC_ASSERT(offsetof(strand_gin_v11_t, connect) == 40, "ncclGin_v11_t.connect");
STRAND_STATIC_ASSERT(offsetof(strand_gin_v11_t, createContext) == 48, "ncclGin_v11_t.createContext");
STRAND_STATIC_ASSERT(offsetof(strand_gin_v11_t, regMrSym) == 56, "ncclGin_v11_t.regMrSym");
STRAND_STATIC_ASSERT(offsetof(strand_gin_v11_t, regMrSymDmaBuf) == 64, "ncclGin_v11_t.regMrSymDmaBuf");
STRAND_STATIC_ASSERT(offsetof(strand_gin_v11_t, deregMrSym) == 72, "ncclGin_v11_t.deregMrSym");
STRAND_STATIC_ASSERT(offsetof(strand_gin_v11_t, destroyContext) == 80, "ncclGin_v11_t.destroyContext");
STRAND_STATIC_ASSERT(offsetof(strand_gin_v11_t, closeColl) == 88, "ncclGin_v11_t.closeColl");
STRAND_STATIC_ASSERT(offsetof(strand_gin_v11_t, closeListen) == 96, "ncclGin_v11_t.closeListen");
STRAND_STATIC_ASSERT(offsetof(strand_gin_v11_t, iput) == 104, "ncclGin_v11_t.iput");
STRAND_STATIC_ASSERT(offsetof(strand_gin_v11_t, iputSignal) == 112, "ncclGin_v11_t.iputSignal");
STRAND_STATIC_ASSERT(offsetof(strand_gin_v11_t, test) == 120, "ncclGin_v11_t.test");
STRAND_STATIC_ASSERT(offsetof(strand_gin_v11_t, ginProgress) == 128, "ncclGin_v11_t.ginProgress");
STRAND_STATIC_ASSERT(offsetof(strand_gin_v11_t, queryLastError) == 136, "ncclGin_v11_t.queryLastError");
STRAND_STATIC_ASSERT(offsetof(strand_gin_v11_t, finalize) == 144, "ncclGin_v11_t.finalize");
STRAND_STATIC_ASSERT(sizeof(strand_gin_v12_t) == 152, "ncclGin_v12_t size");
STRAND_STATIC_ASSERT(offsetof(strand_gin_v12_t, name) == 0, "ncclGin_v12_t.name");
STRAND_STATIC_ASSERT(offsetof(strand_gin_v12_t, init) == 8, "ncclGin_v12_t.init");
STRAND_STATIC_ASSERT(offsetof(strand_gin_v12_t, devices) == 16, "ncclGin_v12_t.devices");
STRAND_STATIC_ASSERT(offsetof(strand_gin_v12_t, getProperties) == 24, "ncclGin_v12_t.getProperties");
STRAND_STATIC_ASSERT(offsetof(strand_gin_v12_t, listen) == 32, "ncclGin_v12_t.listen");
STRAND_STATIC_ASSERT(offsetof(strand_gin_v12_t, connect) == 40, "ncclGin_v12_t.connect");
STRAND_STATIC_ASSERT(offsetof(strand_gin_v12_t, createContext) == 48, "ncclGin_v12_t.createContext");
STRAND_STATIC_ASSERT(offsetof(strand_gin_v12_t, regMrSym) == 56, "ncclGin_v12_t.regMrSym");
STRAND_STATIC_ASSERT(offsetof(strand_gin_v12_t, regMrSymDmaBuf) == 64, "ncclGin_v12_t.regMrSymDmaBuf");
STRAND_STATIC_ASSERT(offsetof(strand_gin_v12_t, deregMrSym) == 72, "ncclGin_v12_t.deregMrSym");
STRAND_STATIC_ASSERT(offsetof(strand_gin_v12_t, destroyContext) == 80, "ncclGin_v12_t.destroyContext");
STRAND_STATIC_ASSERT(offsetof(strand_gin_v12_t, closeColl) == 88, "ncclGin_v12_t.closeColl");
STRAND_STATIC_ASSERT(offsetof(strand_gin_v12_t, closeListen) == 96, "ncclGin_v12_t.closeListen");
STRAND_STATIC_ASSERT(offsetof(strand_gin_v12_t, iput) == 104, "ncclGin_v12_t.iput");
STRAND_STATIC_ASSERT(offsetof(strand_gin_v12_t, iputSignal) == 112, "ncclGin_v12_t.iputSignal");
STRAND_STATIC_ASSERT(offsetof(strand_gin_v12_t, test) == 120, "ncclGin_v12_t.test");
STRAND_STATIC_ASSERT(offsetof(strand_gin_v12_t, ginProgress) == 128, "ncclGin_v12_t.ginProgress");
STRAND_STATIC_ASSERT(offsetof(strand_gin_v12_t, queryLastError) == 136, "ncclGin_v12_t.queryLastError");
STRAND_STATIC_ASSERT(offsetof(strand_gin_v12_t, finalize) == 144, "ncclGin_v12_t.finalize");
STRAND_STATIC_ASSERT(sizeof(strand_gin_v13_t) == 168, "ncclGin_v13_t size");
STRAND_STATIC_ASSERT(offsetof(strand_gin_v13_t, name) == 0, "ncclGin_v13_t.name");
STRAND_STATIC_ASSERT(offsetof(strand_gin_v13_t, init) == 8, "ncclGin_v13_t.init");
STRAND_STATIC_ASSERT(offsetof(strand_gin_v13_t, devices) == 16, "ncclGin_v13_t.devices");
STRAND_STATIC_ASSERT(offsetof(strand_gin_v13_t, getProperties) == 24, "ncclGin_v13_t.getProperties");
STRAND_STATIC_ASSERT(offsetof(strand_gin_v13_t, listen) == 32, "ncclGin_v13_t.listen");
STRAND_STATIC_ASSERT(offsetof(strand_gin_v13_t, connect) == 40, "ncclGin_v13_t.connect");
STRAND_STATIC_ASSERT(offsetof(strand_gin_v13_t, createContext) == 48, "ncclGin_v13_t.createContext");
STRAND_STATIC_ASSERT(offsetof(strand_gin_v13_t, regMrSym) == 56, "ncclGin_v13_t.regMrSym");
STRAND_STATIC_ASSERT(offsetof(strand_gin_v13_t, regMrSymDmaBuf) == 64, "ncclGin_v13_t.regMrSymDmaBuf");
STRAND_STATIC_ASSERT(offsetof(strand_gin_v13_t, deregMrSym) == 72, "ncclGin_v13_t.deregMrSym");
STRAND_STATIC_ASSERT(offsetof(strand_gin_v13_t, destroyContext) == 80, "ncclGin_v13_t.destroyContext");
STRAND_STATIC_ASSERT(offsetof(strand_gin_v13_t, closeColl) == 88, "ncclGin_v13_t.closeColl");
STRAND_STATIC_ASSERT(offsetof(strand_gin_v13_t, closeListen) == 96, "ncclGin_v13_t.closeListen");
STRAND_STATIC_ASSERT(offsetof(strand_gin_v13_t, iput) == 104, "ncclGin_v13_t.iput");
STRAND_STATIC_ASSERT(offsetof(strand_gin_v13_t, iputSignal) == 112, "ncclGin_v13_t.iputSignal");
STRAND_STATIC_ASSERT(offsetof(strand_gin_v13_t, iget) == 120, "ncclGin_v13_t.iget");
STRAND_STATIC_ASSERT(offsetof(strand_gin_v13_t, iflush) == 128, "ncclGin_v13_t.iflush");
STRAND_STATIC_ASSERT(offsetof(strand_gin_v13_t, test) == 136, "ncclGin_v13_t.test");
STRAND_STATIC_ASSERT(offsetof(strand_gin_v13_t, ginProgress) == 144, "ncclGin_v13_t.ginProgress");
STRAND_STATIC_ASSERT(offsetof(strand_gin_v13_t, queryLastError) == 152, "ncclGin_v13_t.queryLastError");
STRAND_STATIC_ASSERT(offsetof(strand_gin_v13_t, finalize) == 160, "ncclGin_v13_t.finalize");
STRAND_STATIC_ASSERT(sizeof(strand_gin_v14_t) == 136, "ncclGin_v14_t size");
STRAND_STATIC_ASSERT(offsetof(strand_gin_v14_t, name) == 0, "ncclGin_v14_t.name");
STRAND_STATIC_ASSERT(offsetof(strand_gin_v14_t, init) == 8, "ncclGin_v14_t.init");
STRAND_STATIC_ASSERT(offsetof(strand_gin_v14_t, devices) == 16, "ncclGin_v14_t.devices");
STRAND_STATIC_ASSERT(offsetof(strand_gin_v14_t, getGinProperties) == 24, "ncclGin_v14_t.getGinProperties");
STRAND_STATIC_ASSERT(offsetof(strand_gin_v14_t, getProperties) == 32, "ncclGin_v14_t.getProperties");
STRAND_STATIC_ASSERT(offsetof(strand_gin_v14_t, listen) == 40, "ncclGin_v14_t.listen");
STRAND_STATIC_ASSERT(offsetof(strand_gin_v14_t, connect) == 48, "ncclGin_v14_t.connect");
STRAND_STATIC_ASSERT(offsetof(strand_gin_v14_t, createContext) == 56, "ncclGin_v14_t.createContext");
STRAND_STATIC_ASSERT(offsetof(strand_gin_v14_t, regMrSym) == 64, "ncclGin_v14_t.regMrSym");
STRAND_STATIC_ASSERT(offsetof(strand_gin_v14_t, regMrSymDmaBuf) == 72, "ncclGin_v14_t.regMrSymDmaBuf");
STRAND_STATIC_ASSERT(offsetof(strand_gin_v14_t, deregMrSym) == 80, "ncclGin_v14_t.deregMrSym");
STRAND_STATIC_ASSERT(offsetof(strand_gin_v14_t, destroyContext) == 88, "ncclGin_v14_t.destroyContext");
STRAND_STATIC_ASSERT(offsetof(strand_gin_v14_t, closeColl) == 96, "ncclGin_v14_t.closeColl");
STRAND_STATIC_ASSERT(offsetof(strand_gin_v14_t, closeListen) == 104, "ncclGin_v14_t.closeListen");
STRAND_STATIC_ASSERT(offsetof(strand_gin_v14_t, ginProgress) == 112, "ncclGin_v14_t.ginProgress");
STRAND_STATIC_ASSERT(offsetof(strand_gin_v14_t, queryLastError) == 120, "ncclGin_v14_t.queryLastError");
STRAND_STATIC_ASSERT(offsetof(strand_gin_v14_t, finalize) == 128, "ncclGin_v14_t.finalize");
STRAND_STATIC_ASSERT(sizeof(strand_gin_config_v13_t) == 20, "ncclGinConfig_v13_t size");
STRAND_STATIC_ASSERT(sizeof(strand_gin_config_v14_t) == 28, "ncclGinConfig_v14_t size");
STRAND_STATIC_ASSERT(offsetof(strand_gin_config_v14_t, backendVersion) == 20, "ncclGinConfig_v14_t.backendVersion");
STRAND_STATIC_ASSERT(offsetof(strand_gin_config_v14_t, rankStride) == 24, "ncclGinConfig_v14_t.rankStride");
STRAND_STATIC_ASSERT(sizeof(strand_gin_props_v14_t) == 2, "ncclGinProperties_v14_t size");
STRAND_STATIC_ASSERT(sizeof(bool) == 1, "bool is one byte, as in NCCL's C++");

#endif
