/* Strand — NCCL plugin ABI: the net function tables ncclNet_v6_t .. ncclNet_v12_t (spec §3).
 * A plugin exports them as the data symbols ncclNetPlugin_v6 .. ncclNetPlugin_v12.
 * Slot N sits at byte offset 8*N; the asserts pin every slot and the table sizes. */
#ifndef STRAND_ABI_NET_H
#define STRAND_ABI_NET_H

#include <stddef.h>
#include <stdint.h>
#include "strand/abi/types.h"
#include "strand/abi/device.h"
#include "strand/abi/props.h"
/* ncclNet_v6_t: 17 slots. */
typedef struct {
  const char *name;
  strand_result_t (*init)(strand_logger_t logFunction);
  strand_result_t (*devices)(int *ndev);
  strand_result_t (*getProperties)(int dev, strand_props_v6_t *props);
  strand_result_t (*listen)(int dev, void *handle, void **listenComm);
  strand_result_t (*connect)(int dev, void *handle, void **sendComm);
  strand_result_t (*accept)(void *listenComm, void **recvComm);
  strand_result_t (*regMr)(void *comm, void *data, int size, int type, void **mhandle);
  strand_result_t (*regMrDmaBuf)(void *comm, void *data, size_t size, int type, uint64_t offset, int fd, void **mhandle);
  strand_result_t (*deregMr)(void *comm, void *mhandle);
  strand_result_t (*isend)(void *sendComm, void *data, int size, int tag, void *mhandle, void **request);
  strand_result_t (*irecv)(void *recvComm, int n, void **data, int *sizes, int *tags, void **mhandles, void **request);
  strand_result_t (*iflush)(void *recvComm, int n, void **data, int *sizes, void **mhandles, void **request);
  strand_result_t (*test)(void *request, int *done, int *sizes);
  strand_result_t (*closeSend)(void *sendComm);
  strand_result_t (*closeRecv)(void *recvComm);
  strand_result_t (*closeListen)(void *listenComm);
} strand_net_v6_t;
STRAND_STATIC_ASSERT(sizeof(strand_net_v6_t) == 136, "ncclNet_v6_t size");
STRAND_STATIC_ASSERT(offsetof(strand_net_v6_t, name) == 0, "");
STRAND_STATIC_ASSERT(offsetof(strand_net_v6_t, init) == 8, "");
STRAND_STATIC_ASSERT(offsetof(strand_net_v6_t, devices) == 16, "");
STRAND_STATIC_ASSERT(offsetof(strand_net_v6_t, getProperties) == 24, "");
STRAND_STATIC_ASSERT(offsetof(strand_net_v6_t, listen) == 32, "");
STRAND_STATIC_ASSERT(offsetof(strand_net_v6_t, connect) == 40, "");
STRAND_STATIC_ASSERT(offsetof(strand_net_v6_t, accept) == 48, "");
STRAND_STATIC_ASSERT(offsetof(strand_net_v6_t, regMr) == 56, "");
STRAND_STATIC_ASSERT(offsetof(strand_net_v6_t, regMrDmaBuf) == 64, "");
STRAND_STATIC_ASSERT(offsetof(strand_net_v6_t, deregMr) == 72, "");
STRAND_STATIC_ASSERT(offsetof(strand_net_v6_t, isend) == 80, "");
STRAND_STATIC_ASSERT(offsetof(strand_net_v6_t, irecv) == 88, "");
STRAND_STATIC_ASSERT(offsetof(strand_net_v6_t, iflush) == 96, "");
STRAND_STATIC_ASSERT(offsetof(strand_net_v6_t, test) == 104, "");
STRAND_STATIC_ASSERT(offsetof(strand_net_v6_t, closeSend) == 112, "");
STRAND_STATIC_ASSERT(offsetof(strand_net_v6_t, closeRecv) == 120, "");
STRAND_STATIC_ASSERT(offsetof(strand_net_v6_t, closeListen) == 128, "");

/* ncclNet_v7_t: 19 slots. */
typedef struct {
  const char *name;
  strand_result_t (*init)(strand_logger_t logFunction);
  strand_result_t (*devices)(int *ndev);
  strand_result_t (*getProperties)(int dev, strand_props_v7_t *props);
  strand_result_t (*listen)(int dev, void *handle, void **listenComm);
  strand_result_t (*connect)(int dev, void *handle, void **sendComm, strand_dev_handle_t **sendDevComm);
  strand_result_t (*accept)(void *listenComm, void **recvComm, strand_dev_handle_t **recvDevComm);
  strand_result_t (*regMr)(void *comm, void *data, int size, int type, void **mhandle);
  strand_result_t (*regMrDmaBuf)(void *comm, void *data, size_t size, int type, uint64_t offset, int fd, void **mhandle);
  strand_result_t (*deregMr)(void *comm, void *mhandle);
  strand_result_t (*isend)(void *sendComm, void *data, int size, int tag, void *mhandle, void **request);
  strand_result_t (*irecv)(void *recvComm, int n, void **data, int *sizes, int *tags, void **mhandles, void **request);
  strand_result_t (*iflush)(void *recvComm, int n, void **data, int *sizes, void **mhandles, void **request);
  strand_result_t (*test)(void *request, int *done, int *sizes);
  strand_result_t (*closeSend)(void *sendComm);
  strand_result_t (*closeRecv)(void *recvComm);
  strand_result_t (*closeListen)(void *listenComm);
  strand_result_t (*getDeviceMr)(void *comm, void *mhandle, void **dptr_mhandle);
  strand_result_t (*irecvConsumed)(void *recvComm, int n, void *request);
} strand_net_v7_t;
STRAND_STATIC_ASSERT(sizeof(strand_net_v7_t) == 152, "ncclNet_v7_t size");
STRAND_STATIC_ASSERT(offsetof(strand_net_v7_t, name) == 0, "");
STRAND_STATIC_ASSERT(offsetof(strand_net_v7_t, init) == 8, "");
STRAND_STATIC_ASSERT(offsetof(strand_net_v7_t, devices) == 16, "");
STRAND_STATIC_ASSERT(offsetof(strand_net_v7_t, getProperties) == 24, "");
STRAND_STATIC_ASSERT(offsetof(strand_net_v7_t, listen) == 32, "");
STRAND_STATIC_ASSERT(offsetof(strand_net_v7_t, connect) == 40, "");
STRAND_STATIC_ASSERT(offsetof(strand_net_v7_t, accept) == 48, "");
STRAND_STATIC_ASSERT(offsetof(strand_net_v7_t, regMr) == 56, "");
STRAND_STATIC_ASSERT(offsetof(strand_net_v7_t, regMrDmaBuf) == 64, "");
STRAND_STATIC_ASSERT(offsetof(strand_net_v7_t, deregMr) == 72, "");
STRAND_STATIC_ASSERT(offsetof(strand_net_v7_t, isend) == 80, "");
STRAND_STATIC_ASSERT(offsetof(strand_net_v7_t, irecv) == 88, "");
STRAND_STATIC_ASSERT(offsetof(strand_net_v7_t, iflush) == 96, "");
STRAND_STATIC_ASSERT(offsetof(strand_net_v7_t, test) == 104, "");
STRAND_STATIC_ASSERT(offsetof(strand_net_v7_t, closeSend) == 112, "");
STRAND_STATIC_ASSERT(offsetof(strand_net_v7_t, closeRecv) == 120, "");
STRAND_STATIC_ASSERT(offsetof(strand_net_v7_t, closeListen) == 128, "");
STRAND_STATIC_ASSERT(offsetof(strand_net_v7_t, getDeviceMr) == 136, "");
STRAND_STATIC_ASSERT(offsetof(strand_net_v7_t, irecvConsumed) == 144, "");

/* ncclNet_v8_t: 19 slots. */
typedef struct {
  const char *name;
  strand_result_t (*init)(strand_logger_t logFunction);
  strand_result_t (*devices)(int *ndev);
  strand_result_t (*getProperties)(int dev, strand_props_v8_t *props);
  strand_result_t (*listen)(int dev, void *handle, void **listenComm);
  strand_result_t (*connect)(int dev, void *handle, void **sendComm, strand_dev_handle_t **sendDevComm);
  strand_result_t (*accept)(void *listenComm, void **recvComm, strand_dev_handle_t **recvDevComm);
  strand_result_t (*regMr)(void *comm, void *data, size_t size, int type, void **mhandle);
  strand_result_t (*regMrDmaBuf)(void *comm, void *data, size_t size, int type, uint64_t offset, int fd, void **mhandle);
  strand_result_t (*deregMr)(void *comm, void *mhandle);
  strand_result_t (*isend)(void *sendComm, void *data, int size, int tag, void *mhandle, void **request);
  strand_result_t (*irecv)(void *recvComm, int n, void **data, int *sizes, int *tags, void **mhandles, void **request);
  strand_result_t (*iflush)(void *recvComm, int n, void **data, int *sizes, void **mhandles, void **request);
  strand_result_t (*test)(void *request, int *done, int *sizes);
  strand_result_t (*closeSend)(void *sendComm);
  strand_result_t (*closeRecv)(void *recvComm);
  strand_result_t (*closeListen)(void *listenComm);
  strand_result_t (*getDeviceMr)(void *comm, void *mhandle, void **dptr_mhandle);
  strand_result_t (*irecvConsumed)(void *recvComm, int n, void *request);
} strand_net_v8_t;
STRAND_STATIC_ASSERT(sizeof(strand_net_v8_t) == 152, "ncclNet_v8_t size");
STRAND_STATIC_ASSERT(offsetof(strand_net_v8_t, name) == 0, "");
STRAND_STATIC_ASSERT(offsetof(strand_net_v8_t, init) == 8, "");
STRAND_STATIC_ASSERT(offsetof(strand_net_v8_t, devices) == 16, "");
STRAND_STATIC_ASSERT(offsetof(strand_net_v8_t, getProperties) == 24, "");
STRAND_STATIC_ASSERT(offsetof(strand_net_v8_t, listen) == 32, "");
STRAND_STATIC_ASSERT(offsetof(strand_net_v8_t, connect) == 40, "");
STRAND_STATIC_ASSERT(offsetof(strand_net_v8_t, accept) == 48, "");
STRAND_STATIC_ASSERT(offsetof(strand_net_v8_t, regMr) == 56, "");
STRAND_STATIC_ASSERT(offsetof(strand_net_v8_t, regMrDmaBuf) == 64, "");
STRAND_STATIC_ASSERT(offsetof(strand_net_v8_t, deregMr) == 72, "");
STRAND_STATIC_ASSERT(offsetof(strand_net_v8_t, isend) == 80, "");
STRAND_STATIC_ASSERT(offsetof(strand_net_v8_t, irecv) == 88, "");
STRAND_STATIC_ASSERT(offsetof(strand_net_v8_t, iflush) == 96, "");
STRAND_STATIC_ASSERT(offsetof(strand_net_v8_t, test) == 104, "");
STRAND_STATIC_ASSERT(offsetof(strand_net_v8_t, closeSend) == 112, "");
STRAND_STATIC_ASSERT(offsetof(strand_net_v8_t, closeRecv) == 120, "");
STRAND_STATIC_ASSERT(offsetof(strand_net_v8_t, closeListen) == 128, "");
STRAND_STATIC_ASSERT(offsetof(strand_net_v8_t, getDeviceMr) == 136, "");
STRAND_STATIC_ASSERT(offsetof(strand_net_v8_t, irecvConsumed) == 144, "");

/* ncclNet_v9_t: 20 slots. */
typedef struct {
  const char *name;
  strand_result_t (*init)(strand_logger_t logFunction);
  strand_result_t (*devices)(int *ndev);
  strand_result_t (*getProperties)(int dev, strand_props_v9_t *props);
  strand_result_t (*listen)(int dev, void *handle, void **listenComm);
  strand_result_t (*connect)(int dev, void *handle, void **sendComm, strand_dev_handle_t **sendDevComm);
  strand_result_t (*accept)(void *listenComm, void **recvComm, strand_dev_handle_t **recvDevComm);
  strand_result_t (*regMr)(void *comm, void *data, size_t size, int type, void **mhandle);
  strand_result_t (*regMrDmaBuf)(void *comm, void *data, size_t size, int type, uint64_t offset, int fd, void **mhandle);
  strand_result_t (*deregMr)(void *comm, void *mhandle);
  strand_result_t (*isend)(void *sendComm, void *data, size_t size, int tag, void *mhandle, void **request);
  strand_result_t (*irecv)(void *recvComm, int n, void **data, size_t *sizes, int *tags, void **mhandles, void **request);
  strand_result_t (*iflush)(void *recvComm, int n, void **data, int *sizes, void **mhandles, void **request);
  strand_result_t (*test)(void *request, int *done, int *sizes);
  strand_result_t (*closeSend)(void *sendComm);
  strand_result_t (*closeRecv)(void *recvComm);
  strand_result_t (*closeListen)(void *listenComm);
  strand_result_t (*getDeviceMr)(void *comm, void *mhandle, void **dptr_mhandle);
  strand_result_t (*irecvConsumed)(void *recvComm, int n, void *request);
  strand_result_t (*makeVDevice)(int *d, strand_vprops_v9_t *props);
} strand_net_v9_t;
STRAND_STATIC_ASSERT(sizeof(strand_net_v9_t) == 160, "ncclNet_v9_t size");
STRAND_STATIC_ASSERT(offsetof(strand_net_v9_t, name) == 0, "");
STRAND_STATIC_ASSERT(offsetof(strand_net_v9_t, init) == 8, "");
STRAND_STATIC_ASSERT(offsetof(strand_net_v9_t, devices) == 16, "");
STRAND_STATIC_ASSERT(offsetof(strand_net_v9_t, getProperties) == 24, "");
STRAND_STATIC_ASSERT(offsetof(strand_net_v9_t, listen) == 32, "");
STRAND_STATIC_ASSERT(offsetof(strand_net_v9_t, connect) == 40, "");
STRAND_STATIC_ASSERT(offsetof(strand_net_v9_t, accept) == 48, "");
STRAND_STATIC_ASSERT(offsetof(strand_net_v9_t, regMr) == 56, "");
STRAND_STATIC_ASSERT(offsetof(strand_net_v9_t, regMrDmaBuf) == 64, "");
STRAND_STATIC_ASSERT(offsetof(strand_net_v9_t, deregMr) == 72, "");
STRAND_STATIC_ASSERT(offsetof(strand_net_v9_t, isend) == 80, "");
STRAND_STATIC_ASSERT(offsetof(strand_net_v9_t, irecv) == 88, "");
STRAND_STATIC_ASSERT(offsetof(strand_net_v9_t, iflush) == 96, "");
STRAND_STATIC_ASSERT(offsetof(strand_net_v9_t, test) == 104, "");
STRAND_STATIC_ASSERT(offsetof(strand_net_v9_t, closeSend) == 112, "");
STRAND_STATIC_ASSERT(offsetof(strand_net_v9_t, closeRecv) == 120, "");
STRAND_STATIC_ASSERT(offsetof(strand_net_v9_t, closeListen) == 128, "");
STRAND_STATIC_ASSERT(offsetof(strand_net_v9_t, getDeviceMr) == 136, "");
STRAND_STATIC_ASSERT(offsetof(strand_net_v9_t, irecvConsumed) == 144, "");
STRAND_STATIC_ASSERT(offsetof(strand_net_v9_t, makeVDevice) == 152, "");

/* ncclNet_v10_t: 20 slots. */
typedef struct {
  const char *name;
  strand_result_t (*init)(strand_logger_t logFunction, strand_profiler_cb_t profFunction);
  strand_result_t (*devices)(int *ndev);
  strand_result_t (*getProperties)(int dev, strand_props_v10_t *props);
  strand_result_t (*listen)(int dev, void *handle, void **listenComm);
  strand_result_t (*connect)(int dev, strand_comm_config_t *config, void *handle, void **sendComm, strand_dev_handle_t **sendDevComm);
  strand_result_t (*accept)(void *listenComm, void **recvComm, strand_dev_handle_t **recvDevComm);
  strand_result_t (*regMr)(void *comm, void *data, size_t size, int type, void **mhandle);
  strand_result_t (*regMrDmaBuf)(void *comm, void *data, size_t size, int type, uint64_t offset, int fd, void **mhandle);
  strand_result_t (*deregMr)(void *comm, void *mhandle);
  strand_result_t (*isend)(void *sendComm, void *data, size_t size, int tag, void *mhandle, void *phandle, void **request);
  strand_result_t (*irecv)(void *recvComm, int n, void **data, size_t *sizes, int *tags, void **mhandles, void **phandles, void **request);
  strand_result_t (*iflush)(void *recvComm, int n, void **data, int *sizes, void **mhandles, void **request);
  strand_result_t (*test)(void *request, int *done, int *sizes);
  strand_result_t (*closeSend)(void *sendComm);
  strand_result_t (*closeRecv)(void *recvComm);
  strand_result_t (*closeListen)(void *listenComm);
  strand_result_t (*getDeviceMr)(void *comm, void *mhandle, void **dptr_mhandle);
  strand_result_t (*irecvConsumed)(void *recvComm, int n, void *request);
  strand_result_t (*makeVDevice)(int *d, strand_vprops_v10_t *props);
} strand_net_v10_t;
STRAND_STATIC_ASSERT(sizeof(strand_net_v10_t) == 160, "ncclNet_v10_t size");
STRAND_STATIC_ASSERT(offsetof(strand_net_v10_t, name) == 0, "");
STRAND_STATIC_ASSERT(offsetof(strand_net_v10_t, init) == 8, "");
STRAND_STATIC_ASSERT(offsetof(strand_net_v10_t, devices) == 16, "");
STRAND_STATIC_ASSERT(offsetof(strand_net_v10_t, getProperties) == 24, "");
STRAND_STATIC_ASSERT(offsetof(strand_net_v10_t, listen) == 32, "");
STRAND_STATIC_ASSERT(offsetof(strand_net_v10_t, connect) == 40, "");
STRAND_STATIC_ASSERT(offsetof(strand_net_v10_t, accept) == 48, "");
STRAND_STATIC_ASSERT(offsetof(strand_net_v10_t, regMr) == 56, "");
STRAND_STATIC_ASSERT(offsetof(strand_net_v10_t, regMrDmaBuf) == 64, "");
STRAND_STATIC_ASSERT(offsetof(strand_net_v10_t, deregMr) == 72, "");
STRAND_STATIC_ASSERT(offsetof(strand_net_v10_t, isend) == 80, "");
STRAND_STATIC_ASSERT(offsetof(strand_net_v10_t, irecv) == 88, "");
STRAND_STATIC_ASSERT(offsetof(strand_net_v10_t, iflush) == 96, "");
STRAND_STATIC_ASSERT(offsetof(strand_net_v10_t, test) == 104, "");
STRAND_STATIC_ASSERT(offsetof(strand_net_v10_t, closeSend) == 112, "");
STRAND_STATIC_ASSERT(offsetof(strand_net_v10_t, closeRecv) == 120, "");
STRAND_STATIC_ASSERT(offsetof(strand_net_v10_t, closeListen) == 128, "");
STRAND_STATIC_ASSERT(offsetof(strand_net_v10_t, getDeviceMr) == 136, "");
STRAND_STATIC_ASSERT(offsetof(strand_net_v10_t, irecvConsumed) == 144, "");
STRAND_STATIC_ASSERT(offsetof(strand_net_v10_t, makeVDevice) == 152, "");

/* ncclNet_v11_t: 22 slots. */
typedef struct {
  const char *name;
  strand_result_t (*init)(void **ctx, uint64_t commId, strand_comm_config_t *config, strand_logger_t logFunction, strand_profiler_cb_t profFunction);
  strand_result_t (*devices)(int *ndev);
  strand_result_t (*getProperties)(int dev, strand_props_v11_t *props);
  strand_result_t (*listen)(void *ctx, int dev, void *handle, void **listenComm);
  strand_result_t (*connect)(void *ctx, int dev, void *handle, void **sendComm, strand_dev_handle_t **sendDevComm);
  strand_result_t (*accept)(void *listenComm, void **recvComm, strand_dev_handle_t **recvDevComm);
  strand_result_t (*regMr)(void *comm, void *data, size_t size, int type, void **mhandle);
  strand_result_t (*regMrDmaBuf)(void *comm, void *data, size_t size, int type, uint64_t offset, int fd, void **mhandle);
  strand_result_t (*deregMr)(void *comm, void *mhandle);
  strand_result_t (*isend)(void *sendComm, void *data, size_t size, int tag, void *mhandle, void *phandle, void **request);
  strand_result_t (*irecv)(void *recvComm, int n, void **data, size_t *sizes, int *tags, void **mhandles, void **phandles, void **request);
  strand_result_t (*iflush)(void *recvComm, int n, void **data, int *sizes, void **mhandles, void **request);
  strand_result_t (*test)(void *request, int *done, int *sizes);
  strand_result_t (*closeSend)(void *sendComm);
  strand_result_t (*closeRecv)(void *recvComm);
  strand_result_t (*closeListen)(void *listenComm);
  strand_result_t (*getDeviceMr)(void *comm, void *mhandle, void **dptr_mhandle);
  strand_result_t (*irecvConsumed)(void *recvComm, int n, void *request);
  strand_result_t (*makeVDevice)(int *d, strand_vprops_v11_t *props);
  strand_result_t (*finalize)(void *ctx);
  strand_result_t (*setNetAttr)(void *ctx, strand_net_attr_t *netAttr);
} strand_net_v11_t;
STRAND_STATIC_ASSERT(sizeof(strand_net_v11_t) == 176, "ncclNet_v11_t size");
STRAND_STATIC_ASSERT(offsetof(strand_net_v11_t, name) == 0, "");
STRAND_STATIC_ASSERT(offsetof(strand_net_v11_t, init) == 8, "");
STRAND_STATIC_ASSERT(offsetof(strand_net_v11_t, devices) == 16, "");
STRAND_STATIC_ASSERT(offsetof(strand_net_v11_t, getProperties) == 24, "");
STRAND_STATIC_ASSERT(offsetof(strand_net_v11_t, listen) == 32, "");
STRAND_STATIC_ASSERT(offsetof(strand_net_v11_t, connect) == 40, "");
STRAND_STATIC_ASSERT(offsetof(strand_net_v11_t, accept) == 48, "");
STRAND_STATIC_ASSERT(offsetof(strand_net_v11_t, regMr) == 56, "");
STRAND_STATIC_ASSERT(offsetof(strand_net_v11_t, regMrDmaBuf) == 64, "");
STRAND_STATIC_ASSERT(offsetof(strand_net_v11_t, deregMr) == 72, "");
STRAND_STATIC_ASSERT(offsetof(strand_net_v11_t, isend) == 80, "");
STRAND_STATIC_ASSERT(offsetof(strand_net_v11_t, irecv) == 88, "");
STRAND_STATIC_ASSERT(offsetof(strand_net_v11_t, iflush) == 96, "");
STRAND_STATIC_ASSERT(offsetof(strand_net_v11_t, test) == 104, "");
STRAND_STATIC_ASSERT(offsetof(strand_net_v11_t, closeSend) == 112, "");
STRAND_STATIC_ASSERT(offsetof(strand_net_v11_t, closeRecv) == 120, "");
STRAND_STATIC_ASSERT(offsetof(strand_net_v11_t, closeListen) == 128, "");
STRAND_STATIC_ASSERT(offsetof(strand_net_v11_t, getDeviceMr) == 136, "");
STRAND_STATIC_ASSERT(offsetof(strand_net_v11_t, irecvConsumed) == 144, "");
STRAND_STATIC_ASSERT(offsetof(strand_net_v11_t, makeVDevice) == 152, "");
STRAND_STATIC_ASSERT(offsetof(strand_net_v11_t, finalize) == 160, "");
STRAND_STATIC_ASSERT(offsetof(strand_net_v11_t, setNetAttr) == 168, "");

/* ncclNet_v12_t: 22 slots. */
typedef struct {
  const char *name;
  strand_result_t (*init)(void **ctx, uint64_t commId, strand_comm_config_t *config, strand_logger_t logFunction, strand_profiler_cb_t profFunction);
  strand_result_t (*devices)(int *ndev);
  strand_result_t (*getProperties)(int dev, strand_props_v12_t *props);
  strand_result_t (*listen)(void *ctx, int dev, void *handle, void **listenComm);
  strand_result_t (*connect)(void *ctx, int dev, void *handle, void **sendComm, strand_dev_handle_t **sendDevComm);
  strand_result_t (*accept)(void *listenComm, void **recvComm, strand_dev_handle_t **recvDevComm);
  strand_result_t (*regMr)(void *comm, void *data, size_t size, int type, void **mhandle);
  strand_result_t (*regMrDmaBuf)(void *comm, void *data, size_t size, int type, uint64_t offset, int fd, void **mhandle);
  strand_result_t (*deregMr)(void *comm, void *mhandle);
  strand_result_t (*isend)(void *sendComm, void *data, size_t size, int tag, void *mhandle, void *phandle, void **request);
  strand_result_t (*irecv)(void *recvComm, int n, void **data, size_t *sizes, int *tags, void **mhandles, void **phandles, void **request);
  strand_result_t (*iflush)(void *recvComm, int n, void **data, int *sizes, void **mhandles, void **request);
  strand_result_t (*test)(void *request, int *done, int *sizes);
  strand_result_t (*closeSend)(void *sendComm);
  strand_result_t (*closeRecv)(void *recvComm);
  strand_result_t (*closeListen)(void *listenComm);
  strand_result_t (*getDeviceMr)(void *comm, void *mhandle, void **dptr_mhandle);
  strand_result_t (*irecvConsumed)(void *recvComm, int n, void *request);
  strand_result_t (*makeVDevice)(int *d, strand_vprops_v12_t *props);
  strand_result_t (*finalize)(void *ctx);
  strand_result_t (*setNetAttr)(void *ctx, strand_net_attr_t *netAttr);
} strand_net_v12_t;
STRAND_STATIC_ASSERT(sizeof(strand_net_v12_t) == 176, "ncclNet_v12_t size");
STRAND_STATIC_ASSERT(offsetof(strand_net_v12_t, name) == 0, "");
STRAND_STATIC_ASSERT(offsetof(strand_net_v12_t, init) == 8, "");
STRAND_STATIC_ASSERT(offsetof(strand_net_v12_t, devices) == 16, "");
STRAND_STATIC_ASSERT(offsetof(strand_net_v12_t, getProperties) == 24, "");
STRAND_STATIC_ASSERT(offsetof(strand_net_v12_t, listen) == 32, "");
STRAND_STATIC_ASSERT(offsetof(strand_net_v12_t, connect) == 40, "");
STRAND_STATIC_ASSERT(offsetof(strand_net_v12_t, accept) == 48, "");
STRAND_STATIC_ASSERT(offsetof(strand_net_v12_t, regMr) == 56, "");
STRAND_STATIC_ASSERT(offsetof(strand_net_v12_t, regMrDmaBuf) == 64, "");
STRAND_STATIC_ASSERT(offsetof(strand_net_v12_t, deregMr) == 72, "");
STRAND_STATIC_ASSERT(offsetof(strand_net_v12_t, isend) == 80, "");
STRAND_STATIC_ASSERT(offsetof(strand_net_v12_t, irecv) == 88, "");
STRAND_STATIC_ASSERT(offsetof(strand_net_v12_t, iflush) == 96, "");
STRAND_STATIC_ASSERT(offsetof(strand_net_v12_t, test) == 104, "");
STRAND_STATIC_ASSERT(offsetof(strand_net_v12_t, closeSend) == 112, "");
STRAND_STATIC_ASSERT(offsetof(strand_net_v12_t, closeRecv) == 120, "");
STRAND_STATIC_ASSERT(offsetof(strand_net_v12_t, closeListen) == 128, "");
STRAND_STATIC_ASSERT(offsetof(strand_net_v12_t, getDeviceMr) == 136, "");
STRAND_STATIC_ASSERT(offsetof(strand_net_v12_t, irecvConsumed) == 144, "");
STRAND_STATIC_ASSERT(offsetof(strand_net_v12_t, makeVDevice) == 152, "");
STRAND_STATIC_ASSERT(offsetof(strand_net_v12_t, finalize) == 160, "");
STRAND_STATIC_ASSERT(offsetof(strand_net_v12_t, setNetAttr) == 168, "");

#endif
