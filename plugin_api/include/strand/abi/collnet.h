/* Strand — NCCL plugin ABI: the CollNet function tables ncclCollNet_v6_t .. ncclCollNet_v12_t
 * (spec §4), exported as ncclCollNetPlugin_v6 .. ncclCollNetPlugin_v12. */
#ifndef STRAND_ABI_COLLNET_H
#define STRAND_ABI_COLLNET_H

#include <stddef.h>
#include <stdint.h>
#include "strand/abi/types.h"
#include "strand/abi/props.h"
/* ncclCollNet_v6_t: 15 slots. */
typedef struct {
  const char *name;
  strand_result_t (*init)(strand_logger_t logFunction);
  strand_result_t (*devices)(int *ndev);
  strand_result_t (*getProperties)(int dev, strand_props_v6_t *props);
  strand_result_t (*listen)(int dev, void *handle, void **listenComm);
  strand_result_t (*connect)(void *handles[], int nranks, int rank, void *listenComm, void **collComm);
  strand_result_t (*reduceSupport)(strand_datatype_t dataType, strand_redop_t redOp, int *supported);
  strand_result_t (*regMr)(void *collComm, void *data, int size, int type, void **mhandle);
  strand_result_t (*regMrDmaBuf)(void *collComm, void *data, size_t size, int type, uint64_t offset, int fd, void **mhandle);
  strand_result_t (*deregMr)(void *collComm, void *mhandle);
  strand_result_t (*iallreduce)(void *collComm, void *sendData, void *recvData, int count, strand_datatype_t dataType, strand_redop_t redOp, void *sendMhandle, void *recvMhandle, void **request);
  strand_result_t (*iflush)(void *collComm, void *data, int size, void *mhandle, void **request);
  strand_result_t (*test)(void *request, int *done, int *size);
  strand_result_t (*closeColl)(void *collComm);
  strand_result_t (*closeListen)(void *listenComm);
} strand_collnet_v6_t;
STRAND_STATIC_ASSERT(sizeof(strand_collnet_v6_t) == 120, "ncclCollNet_v6_t size");
STRAND_STATIC_ASSERT(offsetof(strand_collnet_v6_t, name) == 0, "");
STRAND_STATIC_ASSERT(offsetof(strand_collnet_v6_t, init) == 8, "");
STRAND_STATIC_ASSERT(offsetof(strand_collnet_v6_t, devices) == 16, "");
STRAND_STATIC_ASSERT(offsetof(strand_collnet_v6_t, getProperties) == 24, "");
STRAND_STATIC_ASSERT(offsetof(strand_collnet_v6_t, listen) == 32, "");
STRAND_STATIC_ASSERT(offsetof(strand_collnet_v6_t, connect) == 40, "");
STRAND_STATIC_ASSERT(offsetof(strand_collnet_v6_t, reduceSupport) == 48, "");
STRAND_STATIC_ASSERT(offsetof(strand_collnet_v6_t, regMr) == 56, "");
STRAND_STATIC_ASSERT(offsetof(strand_collnet_v6_t, regMrDmaBuf) == 64, "");
STRAND_STATIC_ASSERT(offsetof(strand_collnet_v6_t, deregMr) == 72, "");
STRAND_STATIC_ASSERT(offsetof(strand_collnet_v6_t, iallreduce) == 80, "");
STRAND_STATIC_ASSERT(offsetof(strand_collnet_v6_t, iflush) == 88, "");
STRAND_STATIC_ASSERT(offsetof(strand_collnet_v6_t, test) == 96, "");
STRAND_STATIC_ASSERT(offsetof(strand_collnet_v6_t, closeColl) == 104, "");
STRAND_STATIC_ASSERT(offsetof(strand_collnet_v6_t, closeListen) == 112, "");

/* ncclCollNet_v7_t: 15 slots. */
typedef struct {
  const char *name;
  strand_result_t (*init)(strand_logger_t logFunction);
  strand_result_t (*devices)(int *ndev);
  strand_result_t (*getProperties)(int dev, strand_props_v7_t *props);
  strand_result_t (*listen)(int dev, void *handle, void **listenComm);
  strand_result_t (*connect)(void *handles[], int nranks, int rank, void *listenComm, void **collComm);
  strand_result_t (*reduceSupport)(strand_datatype_t dataType, strand_redop_t redOp, int *supported);
  strand_result_t (*regMr)(void *collComm, void *data, int size, int type, void **mhandle);
  strand_result_t (*regMrDmaBuf)(void *collComm, void *data, size_t size, int type, uint64_t offset, int fd, void **mhandle);
  strand_result_t (*deregMr)(void *collComm, void *mhandle);
  strand_result_t (*iallreduce)(void *collComm, void *sendData, void *recvData, int count, strand_datatype_t dataType, strand_redop_t redOp, void *sendMhandle, void *recvMhandle, void **request);
  strand_result_t (*iflush)(void *collComm, void *data, int size, void *mhandle, void **request);
  strand_result_t (*test)(void *request, int *done, int *size);
  strand_result_t (*closeColl)(void *collComm);
  strand_result_t (*closeListen)(void *listenComm);
} strand_collnet_v7_t;
STRAND_STATIC_ASSERT(sizeof(strand_collnet_v7_t) == 120, "ncclCollNet_v7_t size");
STRAND_STATIC_ASSERT(offsetof(strand_collnet_v7_t, name) == 0, "");
STRAND_STATIC_ASSERT(offsetof(strand_collnet_v7_t, init) == 8, "");
STRAND_STATIC_ASSERT(offsetof(strand_collnet_v7_t, devices) == 16, "");
STRAND_STATIC_ASSERT(offsetof(strand_collnet_v7_t, getProperties) == 24, "");
STRAND_STATIC_ASSERT(offsetof(strand_collnet_v7_t, listen) == 32, "");
STRAND_STATIC_ASSERT(offsetof(strand_collnet_v7_t, connect) == 40, "");
STRAND_STATIC_ASSERT(offsetof(strand_collnet_v7_t, reduceSupport) == 48, "");
STRAND_STATIC_ASSERT(offsetof(strand_collnet_v7_t, regMr) == 56, "");
STRAND_STATIC_ASSERT(offsetof(strand_collnet_v7_t, regMrDmaBuf) == 64, "");
STRAND_STATIC_ASSERT(offsetof(strand_collnet_v7_t, deregMr) == 72, "");
STRAND_STATIC_ASSERT(offsetof(strand_collnet_v7_t, iallreduce) == 80, "");
STRAND_STATIC_ASSERT(offsetof(strand_collnet_v7_t, iflush) == 88, "");
STRAND_STATIC_ASSERT(offsetof(strand_collnet_v7_t, test) == 96, "");
STRAND_STATIC_ASSERT(offsetof(strand_collnet_v7_t, closeColl) == 104, "");
STRAND_STATIC_ASSERT(offsetof(strand_collnet_v7_t, closeListen) == 112, "");

/* ncclCollNet_v8_t: 17 slots. */
typedef struct {
  const char *name;
  strand_result_t (*init)(strand_logger_t logFunction);
  strand_result_t (*devices)(int *ndev);
  strand_result_t (*getProperties)(int dev, strand_props_v8_t *props);
  strand_result_t (*listen)(int dev, void *handle, void **listenComm);
  strand_result_t (*connect)(void *handles[], int nranks, int rank, void *listenComm, void **collComm);
  strand_result_t (*reduceSupport)(strand_datatype_t dataType, strand_redop_t redOp, int *supported);
  strand_result_t (*regMr)(void *collComm, void *data, size_t size, int type, void **mhandle);
  strand_result_t (*regMrDmaBuf)(void *collComm, void *data, size_t size, int type, uint64_t offset, int fd, void **mhandle);
  strand_result_t (*deregMr)(void *collComm, void *mhandle);
  strand_result_t (*iallreduce)(void *collComm, void *sendData, void *recvData, int count, strand_datatype_t dataType, strand_redop_t redOp, void *sendMhandle, void *recvMhandle, void **request);
  strand_result_t (*iallgather)(void *collComm, void *sendData, int nRecvParts, strand_sge_v8_t *recvParts, size_t bytesPerRank, size_t windowOffset, size_t windowBytes, void *sendMhandle, void **request);
  strand_result_t (*ireducescatter)(void *collComm, int nSendParts, strand_sge_v8_t *sendParts, void *recvData, size_t bytesPerRank, size_t windowOffset, size_t windowBytes, strand_datatype_t dataType, strand_redop_t redOp, void *recvMhandle, void **request);
  strand_result_t (*iflush)(void *collComm, void *data, int size, void *mhandle, void **request);
  strand_result_t (*test)(void *request, int *done, int *size);
  strand_result_t (*closeColl)(void *collComm);
  strand_result_t (*closeListen)(void *listenComm);
} strand_collnet_v8_t;
STRAND_STATIC_ASSERT(sizeof(strand_collnet_v8_t) == 136, "ncclCollNet_v8_t size");
STRAND_STATIC_ASSERT(offsetof(strand_collnet_v8_t, name) == 0, "");
STRAND_STATIC_ASSERT(offsetof(strand_collnet_v8_t, init) == 8, "");
STRAND_STATIC_ASSERT(offsetof(strand_collnet_v8_t, devices) == 16, "");
STRAND_STATIC_ASSERT(offsetof(strand_collnet_v8_t, getProperties) == 24, "");
STRAND_STATIC_ASSERT(offsetof(strand_collnet_v8_t, listen) == 32, "");
STRAND_STATIC_ASSERT(offsetof(strand_collnet_v8_t, connect) == 40, "");
STRAND_STATIC_ASSERT(offsetof(strand_collnet_v8_t, reduceSupport) == 48, "");
STRAND_STATIC_ASSERT(offsetof(strand_collnet_v8_t, regMr) == 56, "");
STRAND_STATIC_ASSERT(offsetof(strand_collnet_v8_t, regMrDmaBuf) == 64, "");
STRAND_STATIC_ASSERT(offsetof(strand_collnet_v8_t, deregMr) == 72, "");
STRAND_STATIC_ASSERT(offsetof(strand_collnet_v8_t, iallreduce) == 80, "");
STRAND_STATIC_ASSERT(offsetof(strand_collnet_v8_t, iallgather) == 88, "");
STRAND_STATIC_ASSERT(offsetof(strand_collnet_v8_t, ireducescatter) == 96, "");
STRAND_STATIC_ASSERT(offsetof(strand_collnet_v8_t, iflush) == 104, "");
STRAND_STATIC_ASSERT(offsetof(strand_collnet_v8_t, test) == 112, "");
STRAND_STATIC_ASSERT(offsetof(strand_collnet_v8_t, closeColl) == 120, "");
STRAND_STATIC_ASSERT(offsetof(strand_collnet_v8_t, closeListen) == 128, "");

/* ncclCollNet_v9_t: 18 slots. */
typedef struct {
  const char *name;
  strand_result_t (*init)(strand_logger_t logFunction);
  strand_result_t (*devices)(int *ndev);
  strand_result_t (*getProperties)(int dev, strand_props_v9_t *props);
  strand_result_t (*listen)(int dev, void *handle, void **listenComm);
  strand_result_t (*connect)(void *handles[], int nranks, int rank, void *listenComm, void **collComm);
  strand_result_t (*reduceSupport)(strand_datatype_t dataType, strand_redop_t redOp, int *supported);
  strand_result_t (*regMr)(void *collComm, void *data, size_t size, int type, void **mhandle);
  strand_result_t (*regMrDmaBuf)(void *collComm, void *data, size_t size, int type, uint64_t offset, int fd, void **mhandle);
  strand_result_t (*deregMr)(void *collComm, void *mhandle);
  strand_result_t (*iallreduce)(void *collComm, void *sendData, void *recvData, size_t count, strand_datatype_t dataType, strand_redop_t redOp, void *sendMhandle, void *recvMhandle, void **request);
  strand_result_t (*iallgather)(void *collComm, void *sendData, int nRecvParts, strand_sge_v9_t *recvParts, size_t bytesPerRank, size_t windowOffset, size_t windowBytes, void *sendMhandle, void **request);
  strand_result_t (*ireducescatter)(void *collComm, int nSendParts, strand_sge_v9_t *sendParts, void *recvData, size_t bytesPerRank, size_t windowOffset, size_t windowBytes, strand_datatype_t dataType, strand_redop_t redOp, void *recvMhandle, void **request);
  strand_result_t (*iflush)(void *collComm, void *data, int size, void *mhandle, void **request);
  strand_result_t (*test)(void *request, int *done, int *size);
  strand_result_t (*closeColl)(void *collComm);
  strand_result_t (*closeListen)(void *listenComm);
  strand_result_t (*makeVDevice)(int *d, strand_vprops_v9_t *props);
} strand_collnet_v9_t;
STRAND_STATIC_ASSERT(sizeof(strand_collnet_v9_t) == 144, "ncclCollNet_v9_t size");
STRAND_STATIC_ASSERT(offsetof(strand_collnet_v9_t, name) == 0, "");
STRAND_STATIC_ASSERT(offsetof(strand_collnet_v9_t, init) == 8, "");
STRAND_STATIC_ASSERT(offsetof(strand_collnet_v9_t, devices) == 16, "");
STRAND_STATIC_ASSERT(offsetof(strand_collnet_v9_t, getProperties) == 24, "");
STRAND_STATIC_ASSERT(offsetof(strand_collnet_v9_t, listen) == 32, "");
STRAND_STATIC_ASSERT(offsetof(strand_collnet_v9_t, connect) == 40, "");
STRAND_STATIC_ASSERT(offsetof(strand_collnet_v9_t, reduceSupport) == 48, "");
STRAND_STATIC_ASSERT(offsetof(strand_collnet_v9_t, regMr) == 56, "");
STRAND_STATIC_ASSERT(offsetof(strand_collnet_v9_t, regMrDmaBuf) == 64, "");
STRAND_STATIC_ASSERT(offsetof(strand_collnet_v9_t, deregMr) == 72, "");
STRAND_STATIC_ASSERT(offsetof(strand_collnet_v9_t, iallreduce) == 80, "");
STRAND_STATIC_ASSERT(offsetof(strand_collnet_v9_t, iallgather) == 88, "");
STRAND_STATIC_ASSERT(offsetof(strand_collnet_v9_t, ireducescatter) == 96, "");
STRAND_STATIC_ASSERT(offsetof(strand_collnet_v9_t, iflush) == 104, "");
STRAND_STATIC_ASSERT(offsetof(strand_collnet_v9_t, test) == 112, "");
STRAND_STATIC_ASSERT(offsetof(strand_collnet_v9_t, closeColl) == 120, "");
STRAND_STATIC_ASSERT(offsetof(strand_collnet_v9_t, closeListen) == 128, "");
STRAND_STATIC_ASSERT(offsetof(strand_collnet_v9_t, makeVDevice) == 136, "");

/* ncclCollNet_v10_t: 18 slots. */
typedef struct {
  const char *name;
  strand_result_t (*init)(strand_logger_t logFunction);
  strand_result_t (*devices)(int *ndev);
  strand_result_t (*getProperties)(int dev, strand_props_v10_t *props);
  strand_result_t (*listen)(int dev, void *handle, void **listenComm);
  strand_result_t (*connect)(void *handles[], int nranks, int rank, void *listenComm, void **collComm);
  strand_result_t (*reduceSupport)(strand_datatype_t dataType, strand_redop_t redOp, int *supported);
  strand_result_t (*regMr)(void *collComm, void *data, size_t size, int type, void **mhandle);
  strand_result_t (*regMrDmaBuf)(void *collComm, void *data, size_t size, int type, uint64_t offset, int fd, void **mhandle);
  strand_result_t (*deregMr)(void *collComm, void *mhandle);
  strand_result_t (*iallreduce)(void *collComm, void *sendData, void *recvData, size_t count, strand_datatype_t dataType, strand_redop_t redOp, void *sendMhandle, void *recvMhandle, void **request);
  strand_result_t (*iallgather)(void *collComm, void *sendData, int nRecvParts, strand_sge_v10_t *recvParts, size_t bytesPerRank, size_t windowOffset, size_t windowBytes, void *sendMhandle, void **request);
  strand_result_t (*ireducescatter)(void *collComm, int nSendParts, strand_sge_v10_t *sendParts, void *recvData, size_t bytesPerRank, size_t windowOffset, size_t windowBytes, strand_datatype_t dataType, strand_redop_t redOp, void *recvMhandle, void **request);
  strand_result_t (*iflush)(void *collComm, void *data, int size, void *mhandle, void **request);
  strand_result_t (*test)(void *request, int *done, int *size);
  strand_result_t (*closeColl)(void *collComm);
  strand_result_t (*closeListen)(void *listenComm);
  strand_result_t (*makeVDevice)(int *d, strand_vprops_v10_t *props);
} strand_collnet_v10_t;
STRAND_STATIC_ASSERT(sizeof(strand_collnet_v10_t) == 144, "ncclCollNet_v10_t size");
STRAND_STATIC_ASSERT(offsetof(strand_collnet_v10_t, name) == 0, "");
STRAND_STATIC_ASSERT(offsetof(strand_collnet_v10_t, init) == 8, "");
STRAND_STATIC_ASSERT(offsetof(strand_collnet_v10_t, devices) == 16, "");
STRAND_STATIC_ASSERT(offsetof(strand_collnet_v10_t, getProperties) == 24, "");
STRAND_STATIC_ASSERT(offsetof(strand_collnet_v10_t, listen) == 32, "");
STRAND_STATIC_ASSERT(offsetof(strand_collnet_v10_t, connect) == 40, "");
STRAND_STATIC_ASSERT(offsetof(strand_collnet_v10_t, reduceSupport) == 48, "");
STRAND_STATIC_ASSERT(offsetof(strand_collnet_v10_t, regMr) == 56, "");
STRAND_STATIC_ASSERT(offsetof(strand_collnet_v10_t, regMrDmaBuf) == 64, "");
STRAND_STATIC_ASSERT(offsetof(strand_collnet_v10_t, deregMr) == 72, "");
STRAND_STATIC_ASSERT(offsetof(strand_collnet_v10_t, iallreduce) == 80, "");
STRAND_STATIC_ASSERT(offsetof(strand_collnet_v10_t, iallgather) == 88, "");
STRAND_STATIC_ASSERT(offsetof(strand_collnet_v10_t, ireducescatter) == 96, "");
STRAND_STATIC_ASSERT(offsetof(strand_collnet_v10_t, iflush) == 104, "");
STRAND_STATIC_ASSERT(offsetof(strand_collnet_v10_t, test) == 112, "");
STRAND_STATIC_ASSERT(offsetof(strand_collnet_v10_t, closeColl) == 120, "");
STRAND_STATIC_ASSERT(offsetof(strand_collnet_v10_t, closeListen) == 128, "");
STRAND_STATIC_ASSERT(offsetof(strand_collnet_v10_t, makeVDevice) == 136, "");

/* ncclCollNet_v11_t: 19 slots. */
typedef struct {
  const char *name;
  strand_result_t (*init)(void **ctx, uint64_t commId, strand_logger_t logFunction);
  strand_result_t (*devices)(int *ndev);
  strand_result_t (*getProperties)(int dev, strand_props_v11_t *props);
  strand_result_t (*listen)(void *ctx, int dev, void *handle, void **listenComm);
  strand_result_t (*connect)(void *handles[], int nranks, int rank, void *listenComm, void **collComm);
  strand_result_t (*reduceSupport)(strand_datatype_t dataType, strand_redop_t redOp, int *supported);
  strand_result_t (*regMr)(void *collComm, void *data, size_t size, int type, void **mhandle);
  strand_result_t (*regMrDmaBuf)(void *collComm, void *data, size_t size, int type, uint64_t offset, int fd, void **mhandle);
  strand_result_t (*deregMr)(void *collComm, void *mhandle);
  strand_result_t (*iallreduce)(void *collComm, void *sendData, void *recvData, size_t count, strand_datatype_t dataType, strand_redop_t redOp, void *sendMhandle, void *recvMhandle, void **request);
  strand_result_t (*iallgather)(void *collComm, void *sendData, int nRecvParts, strand_sge_v11_t *recvParts, size_t bytesPerRank, size_t windowOffset, size_t windowBytes, void *sendMhandle, void **request);
  strand_result_t (*ireducescatter)(void *collComm, int nSendParts, strand_sge_v11_t *sendParts, void *recvData, size_t bytesPerRank, size_t windowOffset, size_t windowBytes, strand_datatype_t dataType, strand_redop_t redOp, void *recvMhandle, void **request);
  strand_result_t (*iflush)(void *collComm, void *data, int size, void *mhandle, void **request);
  strand_result_t (*test)(void *request, int *done, int *size);
  strand_result_t (*closeColl)(void *collComm);
  strand_result_t (*closeListen)(void *listenComm);
  strand_result_t (*makeVDevice)(int *d, strand_vprops_v11_t *props);
  strand_result_t (*finalize)(void *ctx);
} strand_collnet_v11_t;
STRAND_STATIC_ASSERT(sizeof(strand_collnet_v11_t) == 152, "ncclCollNet_v11_t size");
STRAND_STATIC_ASSERT(offsetof(strand_collnet_v11_t, name) == 0, "");
STRAND_STATIC_ASSERT(offsetof(strand_collnet_v11_t, init) == 8, "");
STRAND_STATIC_ASSERT(offsetof(strand_collnet_v11_t, devices) == 16, "");
STRAND_STATIC_ASSERT(offsetof(strand_collnet_v11_t, getProperties) == 24, "");
STRAND_STATIC_ASSERT(offsetof(strand_collnet_v11_t, listen) == 32, "");
STRAND_STATIC_ASSERT(offsetof(strand_collnet_v11_t, connect) == 40, "");
STRAND_STATIC_ASSERT(offsetof(strand_collnet_v11_t, reduceSupport) == 48, "");
STRAND_STATIC_ASSERT(offsetof(strand_collnet_v11_t, regMr) == 56, "");
STRAND_STATIC_ASSERT(offsetof(strand_collnet_v11_t, regMrDmaBuf) == 64, "");
STRAND_STATIC_ASSERT(offsetof(strand_collnet_v11_t, deregMr) == 72, "");
STRAND_STATIC_ASSERT(offsetof(strand_collnet_v11_t, iallreduce) == 80, "");
STRAND_STATIC_ASSERT(offsetof(strand_collnet_v11_t, iallgather) == 88, "");
STRAND_STATIC_ASSERT(offsetof(strand_collnet_v11_t, ireducescatter) == 96, "");
STRAND_STATIC_ASSERT(offsetof(strand_collnet_v11_t, iflush) == 104, "");
STRAND_STATIC_ASSERT(offsetof(strand_collnet_v11_t, test) == 112, "");
STRAND_STATIC_ASSERT(offsetof(strand_collnet_v11_t, closeColl) == 120, "");
STRAND_STATIC_ASSERT(offsetof(strand_collnet_v11_t, closeListen) == 128, "");
STRAND_STATIC_ASSERT(offsetof(strand_collnet_v11_t, makeVDevice) == 136, "");
STRAND_STATIC_ASSERT(offsetof(strand_collnet_v11_t, finalize) == 144, "");

/* ncclCollNet_v12_t: 19 slots. */
typedef struct {
  const char *name;
  strand_result_t (*init)(void **ctx, uint64_t commId, strand_logger_t logFunction);
  strand_result_t (*devices)(int *ndev);
  strand_result_t (*getProperties)(int dev, strand_props_v12_t *props);
  strand_result_t (*listen)(void *ctx, int dev, void *handle, void **listenComm);
  strand_result_t (*connect)(void *handles[], int nranks, int rank, void *listenComm, void **collComm);
  strand_result_t (*reduceSupport)(strand_datatype_t dataType, strand_redop_t redOp, int *supported);
  strand_result_t (*regMr)(void *collComm, void *data, size_t size, int type, void **mhandle);
  strand_result_t (*regMrDmaBuf)(void *collComm, void *data, size_t size, int type, uint64_t offset, int fd, void **mhandle);
  strand_result_t (*deregMr)(void *collComm, void *mhandle);
  strand_result_t (*iallreduce)(void *collComm, void *sendData, void *recvData, size_t count, strand_datatype_t dataType, strand_redop_t redOp, void *sendMhandle, void *recvMhandle, void **request);
  strand_result_t (*iallgather)(void *collComm, void *sendData, int nRecvParts, strand_sge_v12_t *recvParts, size_t bytesPerRank, size_t windowOffset, size_t windowBytes, void *sendMhandle, void **request);
  strand_result_t (*ireducescatter)(void *collComm, int nSendParts, strand_sge_v12_t *sendParts, void *recvData, size_t bytesPerRank, size_t windowOffset, size_t windowBytes, strand_datatype_t dataType, strand_redop_t redOp, void *recvMhandle, void **request);
  strand_result_t (*iflush)(void *collComm, void *data, int size, void *mhandle, void **request);
  strand_result_t (*test)(void *request, int *done, int *size);
  strand_result_t (*closeColl)(void *collComm);
  strand_result_t (*closeListen)(void *listenComm);
  strand_result_t (*makeVDevice)(int *d, strand_vprops_v12_t *props);
  strand_result_t (*finalize)(void *ctx);
} strand_collnet_v12_t;
STRAND_STATIC_ASSERT(sizeof(strand_collnet_v12_t) == 152, "ncclCollNet_v12_t size");
STRAND_STATIC_ASSERT(offsetof(strand_collnet_v12_t, name) == 0, "");
STRAND_STATIC_ASSERT(offsetof(strand_collnet_v12_t, init) == 8, "");
STRAND_STATIC_ASSERT(offsetof(strand_collnet_v12_t, devices) == 16, "");
STRAND_STATIC_ASSERT(offsetof(strand_collnet_v12_t, getProperties) == 24, "");
STRAND_STATIC_ASSERT(offsetof(strand_collnet_v12_t, listen) == 32, "");
STRAND_STATIC_ASSERT(offsetof(strand_collnet_v12_t, connect) == 40, "");
STRAND_STATIC_ASSERT(offsetof(strand_collnet_v12_t, reduceSupport) == 48, "");
STRAND_STATIC_ASSERT(offsetof(strand_collnet_v12_t, regMr) == 56, "");
STRAND_STATIC_ASSERT(offsetof(strand_collnet_v12_t, regMrDmaBuf) == 64, "");
STRAND_STATIC_ASSERT(offsetof(strand_collnet_v12_t, deregMr) == 72, "");
STRAND_STATIC_ASSERT(offsetof(strand_collnet_v12_t, iallreduce) == 80, "");
STRAND_STATIC_ASSERT(offsetof(strand_collnet_v12_t, iallgather) == 88, "");
STRAND_STATIC_ASSERT(offsetof(strand_collnet_v12_t, ireducescatter) == 96, "");
STRAND_STATIC_ASSERT(offsetof(strand_collnet_v12_t, iflush) == 104, "");
STRAND_STATIC_ASSERT(offsetof(strand_collnet_v12_t, test) == 112, "");
STRAND_STATIC_ASSERT(offsetof(strand_collnet_v12_t, closeColl) == 120, "");
STRAND_STATIC_ASSERT(offsetof(strand_collnet_v12_t, closeListen) == 128, "");
STRAND_STATIC_ASSERT(offsetof(strand_collnet_v12_t, makeVDevice) == 136, "");
STRAND_STATIC_ASSERT(offsetof(strand_collnet_v12_t, finalize) == 144, "");

#endif
