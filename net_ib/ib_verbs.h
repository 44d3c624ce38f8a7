/* strand-ib — the libibverbs entry points the plugin calls, reached through dlopen.
 *
 * The plugin never links libibverbs: it must load (and report 0 devices) on hosts without
 * rdma-core, and tests/softverbs stands in for the library by being found first on the loader
 * path. ib_verbs.c is the only file that names the library; everything else calls the exported
 * functions through `ibv` below. The data-path calls verbs.h defines inline (ibv_post_send,
 * ibv_post_recv, ibv_poll_cq) dispatch through the context's ops table that the library filled
 * in, so they need no symbol and are called directly. */
#ifndef STRAND_NET_IB_VERBS_H
#define STRAND_NET_IB_VERBS_H

#include <stdbool.h>
#include <infiniband/verbs.h>

typedef struct {
  struct ibv_device **(*get_device_list)(int *num_devices);
  void (*free_device_list)(struct ibv_device **list);
  const char *(*get_device_name)(struct ibv_device *device);
  struct ibv_context *(*open_device)(struct ibv_device *device);
  int (*close_device)(struct ibv_context *context);
  int (*query_device)(struct ibv_context *context, struct ibv_device_attr *attr);
  int (*query_port)(struct ibv_context *context, uint8_t port, struct ibv_port_attr *attr);
  int (*query_gid)(struct ibv_context *context, uint8_t port, int index, union ibv_gid *gid);
  /* Optional (rdma-core >= 32): the GID's type and netdev without sysfs. NULL when absent. */
  int (*query_gid_ex)(struct ibv_context *context, uint32_t port, uint32_t index,
                      struct ibv_gid_entry *entry, uint32_t flags, size_t entry_size);
  struct ibv_pd *(*alloc_pd)(struct ibv_context *context);
  int (*dealloc_pd)(struct ibv_pd *pd);
  struct ibv_mr *(*reg_mr)(struct ibv_pd *pd, void *addr, size_t length, int access);
  /* Optional (rdma-core >= 34). NULL when absent: dmabuf registration then fails cleanly. */
  struct ibv_mr *(*reg_dmabuf_mr)(struct ibv_pd *pd, uint64_t offset, size_t length,
                                  uint64_t iova, int fd, int access);
  int (*dereg_mr)(struct ibv_mr *mr);
  struct ibv_cq *(*create_cq)(struct ibv_context *context, int cqe, void *cq_context,
                              struct ibv_comp_channel *channel, int comp_vector);
  int (*destroy_cq)(struct ibv_cq *cq);
  struct ibv_qp *(*create_qp)(struct ibv_pd *pd, struct ibv_qp_init_attr *attr);
  int (*modify_qp)(struct ibv_qp *qp, struct ibv_qp_attr *attr, int attr_mask);
  int (*destroy_qp)(struct ibv_qp *qp);
  int (*get_async_event)(struct ibv_context *context, struct ibv_async_event *event);
  void (*ack_async_event)(struct ibv_async_event *event);
  const char *(*wc_status_str)(enum ibv_wc_status status);
  const char *(*event_type_str)(enum ibv_event_type event);
} ib_verbs_t;

extern ib_verbs_t ibv;

/* Loads libibverbs.so.1 and fills `ibv`, once per process (later calls return the first answer).
 * false: no library, or one that lacks a required symbol; `why` (may be NULL) then holds the
 * loader's message. Never logs: the caller says what it means for the plugin. */
bool ib_verbs_load(char *why, size_t whylen);

#endif
