/* Strand — NCCL plugin ABI: the RMA tables ncclRma_v13_t and ncclRma_v14_t, exported as
 * ncclRmaPlugin_v13 / ncclRmaPlugin_v14 (docs/spec/gin-rma.md).
 *
 * Restated from NCCL v2.30.7-1 src/include/plugin/rma/rma_v13.h, rma_v14.h. From 2.30 on, the
 * host data path of NCCL's device API (the GIN proxy) runs over an RMA plugin, looked up in
 * NCCL_RMA_PLUGIN, then the GIN plugin's library, then the net plugin's (src/plugin/rma.cc:
 * ncclRmaPlugin_v14, then ncclRmaPlugin_v13, then ncclGinPlugin_v13 as a v13 RMA). A v13 RMA
 * must report netDeviceType GIN_PROXY (2.30's adapter refuses anything else); v13 signals are all
 * strong. Facts about how 2.30 drives it: src/rma/rma_proxy.cc, rma_proxy_progress.cc. */
#ifndef STRAND_ABI_RMA_H
#define STRAND_ABI_RMA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "strand/abi/gin.h"

/* ncclRma_v13_t is ncclGin_v13_t. */
typedef strand_gin_v13_t strand_rma_v13_t;

/* ncclRmaConfig_v14_t. */
typedef struct {
  int nContexts;
  int trafficClass;
  int rankStride;
} strand_rma_config_v14_t;

/* ncclRma_v14_t: 21 slots. regMrSym without a ginHandle, createContext without a device handle,
 * iputSignal with isStrongSignal. */
typedef struct {
  const char *name;
  strand_result_t (*init)(void **ctx, uint64_t commId, strand_logger_t logFunction);
  strand_result_t (*devices)(int *ndev);
  strand_result_t (*getProperties)(int dev, strand_props_v12_t *props);
  strand_result_t (*listen)(void *ctx, int dev, void *handle, void **listenComm);
  strand_result_t (*connect)(void *ctx, void *handles[], int nranks, int rank, void *listenComm, void **collComm);
  strand_result_t (*createContext)(void *collComm, strand_rma_config_v14_t *config, void **rmaCtx);
  strand_result_t (*regMrSym)(void *collComm, void *data, size_t size, int type, uint64_t mrFlags, void **mhandle);
  strand_result_t (*regMrSymDmaBuf)(void *collComm, void *data, size_t size, int type, uint64_t offset, int fd, uint64_t mrFlags, void **mhandle);
  strand_result_t (*deregMrSym)(void *collComm, void *mhandle);
  strand_result_t (*destroyContext)(void *rmaCtx);
  strand_result_t (*closeColl)(void *collComm);
  strand_result_t (*closeListen)(void *listenComm);
  strand_result_t (*iput)(void *rmaCtx, int context, uint64_t srcOff, void *srcMhandle, size_t size, uint64_t dstOff, void *dstMhandle, uint32_t rank, void **request);
  strand_result_t (*iputSignal)(void *rmaCtx, int context, uint64_t srcOff, void *srcMhandle, size_t size, uint64_t dstOff, void *dstMhandle, uint32_t rank, uint64_t signalOff, void *signalMhandle, uint64_t signalValue, uint32_t signalOp, bool isStrongSignal, void **request);
  strand_result_t (*iget)(void *rmaCtx, int context, uint64_t remoteOff, void *remoteMhandle, size_t size, uint64_t localOff, void *localMhandle, uint32_t rank, void **request);
  strand_result_t (*iflush)(void *rmaCtx, int context, void *mhandle, uint32_t rank, void **request);
  strand_result_t (*test)(void *collComm, void *request, int *done);
  strand_result_t (*rmaProgress)(void *rmaCtx);
  strand_result_t (*queryLastError)(void *rmaCtx, bool *hasError);
  strand_result_t (*finalize)(void *ctx);
} strand_rma_v14_t;

/* Layout pins. */
STRAND_STATIC_ASSERT(sizeof(strand_rma_v14_t) == 168, "ncclRma_v14_t size");
STRAND_STATIC_ASSERT(offsetof(strand_rma_v14_t, name) == 0, "ncclRma_v14_t.name");
STRAND_STATIC_ASSERT(offsetof(strand_rma_v14_t, init) == 8, "ncclRma_v14_t.init");
STRAND_STATIC_ASSERT(offsetof(strand_rma_v14_t, devices) == 16, "ncclRma_v14_t.devices");
STRAND_STATIC_ASSERT(offsetof(strand_rma_v14_t, getProperties) == 24, "ncclRma_v14_t.getProperties");
STRAND_STATIC_ASSERT(offsetof(strand_rma_v14_t, listen) == 32, "ncclRma_v14_t.listen");
STRAND_STATIC_ASSERT(offsetof(strand_rma_v14_t, connect) == 40, "ncclRma_v14_t.connect");
STRAND_STATIC_ASSERT(offsetof(strand_rma_v14_t, createContext) == 48, "ncclRma_v14_t.createContext");
STRAND_STATIC_ASSERT(offsetof(strand_rma_v14_t, regMrSym) == 56, "ncclRma_v14_t.regMrSym");
STRAND_STATIC_ASSERT(offsetof(strand_rma_v14_t, regMrSymDmaBuf) == 64, "ncclRma_v14_t.regMrSymDmaBuf");
STRAND_STATIC_ASSERT(offsetof(strand_rma_v14_t, deregMrSym) == 72, "ncclRma_v14_t.deregMrSym");
STRAND_STATIC_ASSERT(offsetof(strand_rma_v14_t, destroyContext) == 80, "ncclRma_v14_t.destroyContext");
STRAND_STATIC_ASSERT(offsetof(strand_rma_v14_t, closeColl) == 88, "ncclRma_v14_t.closeColl");
STRAND_STATIC_ASSERT(offsetof(strand_rma_v14_t, closeListen) == 96, "ncclRma_v14_t.closeListen");
STRAND_STATIC_ASSERT(offsetof(strand_rma_v14_t, iput) == 104, "ncclRma_v14_t.iput");
STRAND_STATIC_ASSERT(offsetof(strand_rma_v14_t, iputSignal) == 112, "ncclRma_v14_t.iputSignal");
STRAND_STATIC_ASSERT(offsetof(strand_rma_v14_t, iget) == 120, "ncclRma_v14_t.iget");
STRAND_STATIC_ASSERT(offsetof(strand_rma_v14_t, iflush) == 128, "ncclRma_v14_t.iflush");
STRAND_STATIC_ASSERT(offsetof(strand_rma_v14_t, test) == 136, "ncclRma_v14_t.test");
STRAND_STATIC_ASSERT(offsetof(strand_rma_v14_t, rmaProgress) == 144, "ncclRma_v14_t.rmaProgress");
STRAND_STATIC_ASSERT(offsetof(strand_rma_v14_t, queryLastError) == 152, "ncclRma_v14_t.queryLastError");
STRAND_STATIC_ASSERT(offsetof(strand_rma_v14_t, finalize) == 160, "ncclRma_v14_t.finalize");
STRAND_STATIC_ASSERT(sizeof(strand_rma_config_v14_t) == 12, "ncclRmaConfig_v14_t size");
STRAND_STATIC_ASSERT(sizeof(strand_rma_v13_t) == 168, "ncclRma_v13_t size");

#endif
