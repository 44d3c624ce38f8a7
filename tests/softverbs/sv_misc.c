/* softverbs: the helper and stub entry points of libibverbs that carry no device logic (status
 * strings, fork support, unsupported object types that must fail cleanly). */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "sv.h"

SV_EXPORT const char *ibv_wc_status_str(enum ibv_wc_status status)
{
  static const char *const s[] = {
    [IBV_WC_SUCCESS] = "success",
    [IBV_WC_LOC_LEN_ERR] = "local length error",
    [IBV_WC_LOC_QP_OP_ERR] = "local QP operation error",
    [IBV_WC_LOC_EEC_OP_ERR] = "local EE context operation error",
    [IBV_WC_LOC_PROT_ERR] = "local protection error",
    [IBV_WC_WR_FLUSH_ERR] = "work request flushed error",
    [IBV_WC_MW_BIND_ERR] = "memory window bind error",
    [IBV_WC_BAD_RESP_ERR] = "bad response error",
    [IBV_WC_LOC_ACCESS_ERR] = "local access error",
    [IBV_WC_REM_INV_REQ_ERR] = "remote invalid request error",
    [IBV_WC_REM_ACCESS_ERR] = "remote access error",
    [IBV_WC_REM_OP_ERR] = "remote operation error",
    [IBV_WC_RETRY_EXC_ERR] = "transport retry counter exceeded",
    [IBV_WC_RNR_RETRY_EXC_ERR] = "RNR retry counter exceeded",
    [IBV_WC_LOC_RDD_VIOL_ERR] = "local RDD violation error",
    [IBV_WC_REM_INV_RD_REQ_ERR] = "remote invalid RD request",
    [IBV_WC_REM_ABORT_ERR] = "aborted error",
    [IBV_WC_INV_EECN_ERR] = "invalid EE context number",
    [IBV_WC_INV_EEC_STATE_ERR] = "invalid EE context state",
    [IBV_WC_FATAL_ERR] = "fatal error",
    [IBV_WC_RESP_TIMEOUT_ERR] = "response timeout error",
    [IBV_WC_GENERAL_ERR] = "general error",
    [IBV_WC_TM_ERR] = "TM error",
    [IBV_WC_TM_RNDV_INCOMPLETE] = "TM software rendezvous",
  };
  if ((unsigned)status < sizeof(s) / sizeof(s[0]) && s[status]) return s[status];
  return "unknown";
}

SV_EXPORT const char *ibv_event_type_str(enum ibv_event_type event)
{
  static const char *const s[] = {
    [IBV_EVENT_CQ_ERR] = "CQ error",
    [IBV_EVENT_QP_FATAL] = "local work queue catastrophic error",
    [IBV_EVENT_QP_REQ_ERR] = "invalid request local work queue error",
    [IBV_EVENT_QP_ACCESS_ERR] = "local access violation work queue error",
    [IBV_EVENT_COMM_EST] = "communication established",
    [IBV_EVENT_SQ_DRAINED] = "send queue drained",
    [IBV_EVENT_PATH_MIG] = "path migrated",
    [IBV_EVENT_PATH_MIG_ERR] = "path migration request error",
    [IBV_EVENT_DEVICE_FATAL] = "local catastrophic error",
    [IBV_EVENT_PORT_ACTIVE] = "port active",
    [IBV_EVENT_PORT_ERR] = "port error",
    [IBV_EVENT_LID_CHANGE] = "LID change",
    [IBV_EVENT_PKEY_CHANGE] = "P_key change",
    [IBV_EVENT_SM_CHANGE] = "SM change",
    [IBV_EVENT_SRQ_ERR] = "SRQ catastrophic error",
    [IBV_EVENT_SRQ_LIMIT_REACHED] = "SRQ limit reached",
    [IBV_EVENT_QP_LAST_WQE_REACHED] = "last WQE reached",
    [IBV_EVENT_CLIENT_REREGISTER] = "client reregistration",
    [IBV_EVENT_GID_CHANGE] = "GID table change",
    [IBV_EVENT_WQ_FATAL] = "WQ fatal",
  };
  if ((unsigned)event < sizeof(s) / sizeof(s[0]) && s[event]) return s[event];
  return "unknown";
}

SV_EXPORT const char *ibv_port_state_str(enum ibv_port_state state)
{
  switch (state) {
  case IBV_PORT_NOP: return "PORT_NOP";
  case IBV_PORT_DOWN: return "PORT_DOWN";
  case IBV_PORT_INIT: return "PORT_INIT";
  case IBV_PORT_ARMED: return "PORT_ARMED";
  case IBV_PORT_ACTIVE: return "PORT_ACTIVE";
  case IBV_PORT_ACTIVE_DEFER: return "PORT_ACTIVE_DEFER";
  default: return "invalid state";
  }
}

SV_EXPORT const char *ibv_node_type_str(enum ibv_node_type t)
{
  switch (t) {
  case IBV_NODE_CA: return "InfiniBand channel adapter";
  case IBV_NODE_SWITCH: return "InfiniBand switch";
  case IBV_NODE_ROUTER: return "InfiniBand router";
  case IBV_NODE_RNIC: return "iWARP NIC";
  case IBV_NODE_USNIC: return "usNIC";
  case IBV_NODE_USNIC_UDP: return "usNIC UDP";
  case IBV_NODE_UNSPECIFIED: return "unspecified";
  default: return "unknown";
  }
}

/* Memory is never pinned here, so fork needs no protection. */
SV_EXPORT int ibv_fork_init(void) { return 0; }
SV_EXPORT enum ibv_fork_status ibv_is_fork_initialized(void) { return IBV_FORK_UNNEEDED; }

/* There is no sysfs behind these devices. */
SV_EXPORT int ibv_read_sysfs_file(const char *dir, const char *file, char *buf, size_t size)
{
  (void)dir, (void)file, (void)buf, (void)size;
  errno = ENOENT;
  return -1;
}

SV_EXPORT int ibv_rate_to_mult(enum ibv_rate rate)
{
  switch (rate) {
  case IBV_RATE_2_5_GBPS: return 1;
  case IBV_RATE_5_GBPS: return 2;
  case IBV_RATE_10_GBPS: return 4;
  case IBV_RATE_20_GBPS: return 8;
  case IBV_RATE_30_GBPS: return 12;
  case IBV_RATE_40_GBPS: return 16;
  case IBV_RATE_60_GBPS: return 24;
  case IBV_RATE_80_GBPS: return 32;
  case IBV_RATE_120_GBPS: return 48;
  default: return -1;
  }
}

SV_EXPORT struct ibv_ah *ibv_create_ah(struct ibv_pd *pd, struct ibv_ah_attr *attr)
{
  (void)pd, (void)attr;
  sv_report_refusal("ibv_create_ah refused (UD address handles are not emulated)");
  errno = EOPNOTSUPP; /* address handles are for UD: not emulated */
  return NULL;
}

SV_EXPORT int ibv_destroy_ah(struct ibv_ah *ah)
{
  (void)ah;
  return EOPNOTSUPP;
}

SV_EXPORT struct ibv_srq *ibv_create_srq(struct ibv_pd *pd, struct ibv_srq_init_attr *attr)
{
  (void)pd, (void)attr;
  sv_report_refusal("ibv_create_srq refused (shared receive queues are not emulated)");
  errno = EOPNOTSUPP;
  return NULL;
}

SV_EXPORT int ibv_modify_srq(struct ibv_srq *srq, struct ibv_srq_attr *attr, int mask)
{
  (void)srq, (void)attr, (void)mask;
  return EOPNOTSUPP;
}

SV_EXPORT int ibv_query_srq(struct ibv_srq *srq, struct ibv_srq_attr *attr)
{
  (void)srq, (void)attr;
  return EOPNOTSUPP;
}

SV_EXPORT int ibv_destroy_srq(struct ibv_srq *srq)
{
  (void)srq;
  return EOPNOTSUPP;
}

SV_EXPORT int ibv_attach_mcast(struct ibv_qp *qp, const union ibv_gid *gid, uint16_t lid)
{
  (void)qp, (void)gid, (void)lid;
  return EOPNOTSUPP;
}

SV_EXPORT int ibv_detach_mcast(struct ibv_qp *qp, const union ibv_gid *gid, uint16_t lid)
{
  (void)qp, (void)gid, (void)lid;
  return EOPNOTSUPP;
}

SV_EXPORT int ibv_set_ece(struct ibv_qp *qp, struct ibv_ece *ece)
{
  (void)qp, (void)ece;
  return EOPNOTSUPP;
}

SV_EXPORT int ibv_query_ece(struct ibv_qp *qp, struct ibv_ece *ece)
{
  (void)qp, (void)ece;
  return EOPNOTSUPP;
}

void sv_report_refusal(const char *fmt, ...)
{
  const char *path = getenv("STRAND_ENV_REFUSALS");
  if (!path || !path[0]) return;
  char line[512];
  int n = snprintf(line, sizeof line, "softverbs: ");
  va_list ap;
  va_start(ap, fmt);
  n += vsnprintf(line + n, sizeof line - (size_t)n - 1, fmt, ap);
  va_end(ap);
  if (n > (int)sizeof line - 2) n = (int)sizeof line - 2;
  line[n++] = '\n';
  /* O_APPEND: one write per line, so lines of several threads or processes never interleave. */
  int fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0600);
  if (fd < 0) return;
  if (write(fd, line, (size_t)n) < 0) { /* best effort: the refusal itself is still returned */ }
  close(fd);
}
