/* strand-ib — NCCL_IB_* (NCCL's own names and defaults) and STRAND_IB_* parameters through the
 * SDK registry (documented in docs/plugins/ib.md and docs/configuration.md). The bottom of the
 * plugin: calls nothing of ours (the clock the other files read is the SDK's strand/clock.h). */
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>

#include "ib.h"

ib_params_t ib_params;

static const strand_param_def_t ib_param_defs[] = {
    STRAND_PARAM_BOOL("NCCL_IB_DISABLE", NULL, false,
                      "1: strand-ib offers no device (as NCCL's own IB transport)"),
    STRAND_PARAM_STRING("NCCL_IB_HCA", NULL, NULL,
                        "HCAs/ports to use: comma list of name prefixes with optional :port, "
                        "'^' excludes, '=' exact names (NCCL's grammar; unset: every active port)"),
    STRAND_PARAM_INT("NCCL_IB_GID_INDEX", NULL, -1, -1, 1023,
                     "GID table index for RoCE (and GID routing on IB); -1 picks the first GID "
                     "matching NCCL_IB_ROCE_VERSION_NUM, NCCL_IB_ADDR_FAMILY and "
                     "NCCL_IB_ADDR_RANGE"),
    STRAND_PARAM_INT("NCCL_IB_ROCE_VERSION_NUM", NULL, 2, 1, 2,
                     "RoCE version of the automatically chosen GID"),
    STRAND_PARAM_ENUM("NCCL_IB_ADDR_FAMILY", NULL, "AF_INET",
                      STRAND_PARAM_CHOICES("AF_INET", "AF_INET6"),
                      "address family of the automatically chosen RoCE GID"),
    STRAND_PARAM_STRING("NCCL_IB_ADDR_RANGE", NULL, NULL,
                        "CIDR range (a.b.c.d/n or v6/n) the automatically chosen RoCE GID must "
                        "lie in (unset: any)"),
    STRAND_PARAM_INT("NCCL_IB_TIMEOUT", NULL, 20, 1, 31,
                     "RC QP local ACK timeout exponent: 4.096 us x 2^value per retry"),
    STRAND_PARAM_INT("NCCL_IB_RETRY_CNT", NULL, 7, 0, 7, "RC QP transport retry count"),
    STRAND_PARAM_INT("NCCL_IB_SL", NULL, 0, 0, 15, "InfiniBand service level of the QPs"),
    STRAND_PARAM_INT("NCCL_IB_TC", NULL, 0, 0, 255,
                     "traffic class of the QPs' global route header (RoCE / GID routing)"),
    STRAND_PARAM_INT("NCCL_IB_PKEY", NULL, 0, 0, 65535, "partition key index of the QPs"),
    STRAND_PARAM_INT("NCCL_IB_QPS_PER_CONNECTION", NULL, 1, 1, 16,
                     "RC QPs per connection and rail; large messages are split across them"),
    STRAND_PARAM_INT("STRAND_IB_SPLIT_MIN_BYTES", NULL, 65536, 1, 1L << 30,
                     "a message is split over several QPs only in pieces of at least this size"),
    STRAND_PARAM_INT("STRAND_IB_CONNECT_TIMEOUT_MS", NULL, 10000, 100, 3600000,
                     "bound on connect/accept: the OOB handshake and QP information exchange"),
    STRAND_PARAM_INT("STRAND_IB_ASYNC_POLL_MS", NULL, 100, 1, 10000,
                     "period at which the async-event thread wakes; bounds how late a port or "
                     "QP event turns into an error from test()"),
    STRAND_PARAM_INT("STRAND_IB_PEER_GRACE_MS", NULL, 2000, 0, 600000,
                     "after the peer's OOB socket closed, how long pending requests may still "
                     "complete before test() reports the peer gone"),
    STRAND_PARAM_BOOL("STRAND_IB_FORCE_FLUSH", NULL, false,
                      "iflush always reads back through the loopback QP, also for host memory "
                      "(tests the GPU Direct flush path without a GPU)"),
};

static strand_result_t get_int(const char *name, long *out) {
  int64_t v = 0;
  strand_result_t r = strand_param_get_int(name, &v);
  if (r == STRAND_SUCCESS) *out = (long)v;
  return r;
}

strand_result_t ib_params_load(void) {
  strand_result_t r = strand_params_register(ib_param_defs, STRAND_PARAM_COUNT(ib_param_defs));
  if (r != STRAND_SUCCESS) return r;
  strand_params_check_unknown("STRAND_IB_");
  r = strand_params_validate();
  if (r != STRAND_SUCCESS) return r;
  long gid = 0, roce = 0, timeout = 0, retry = 0, sl = 0, tc = 0, pkey = 0, qps = 0;
  int fam = 0;
  if ((r = strand_param_get_bool("NCCL_IB_DISABLE", &ib_params.disable)) != STRAND_SUCCESS ||
      (r = strand_param_copy_string("NCCL_IB_HCA", ib_params.hca, sizeof ib_params.hca)) !=
          STRAND_SUCCESS ||
      (r = get_int("NCCL_IB_GID_INDEX", &gid)) != STRAND_SUCCESS ||
      (r = get_int("NCCL_IB_ROCE_VERSION_NUM", &roce)) != STRAND_SUCCESS ||
      (r = strand_param_get_enum("NCCL_IB_ADDR_FAMILY", &fam, NULL)) != STRAND_SUCCESS ||
      (r = strand_param_copy_string("NCCL_IB_ADDR_RANGE", ib_params.addr_range,
                                    sizeof ib_params.addr_range)) != STRAND_SUCCESS ||
      (r = get_int("NCCL_IB_TIMEOUT", &timeout)) != STRAND_SUCCESS ||
      (r = get_int("NCCL_IB_RETRY_CNT", &retry)) != STRAND_SUCCESS ||
      (r = get_int("NCCL_IB_SL", &sl)) != STRAND_SUCCESS ||
      (r = get_int("NCCL_IB_TC", &tc)) != STRAND_SUCCESS ||
      (r = get_int("NCCL_IB_PKEY", &pkey)) != STRAND_SUCCESS ||
      (r = get_int("NCCL_IB_QPS_PER_CONNECTION", &qps)) != STRAND_SUCCESS ||
      (r = get_int("STRAND_IB_SPLIT_MIN_BYTES", &ib_params.split_min)) != STRAND_SUCCESS ||
      (r = get_int("STRAND_IB_CONNECT_TIMEOUT_MS", &ib_params.connect_timeout_ms)) !=
          STRAND_SUCCESS ||
      (r = get_int("STRAND_IB_ASYNC_POLL_MS", &ib_params.async_poll_ms)) != STRAND_SUCCESS ||
      (r = get_int("STRAND_IB_PEER_GRACE_MS", &ib_params.peer_grace_ms)) != STRAND_SUCCESS ||
      (r = strand_param_get_bool("STRAND_IB_FORCE_FLUSH", &ib_params.force_flush)) !=
          STRAND_SUCCESS)
    return r;
  ib_params.gid_index = (int)gid;
  ib_params.roce_version = (int)roce;
  ib_params.addr_family = fam == 1 ? AF_INET6 : AF_INET;
  ib_params.timeout = (int)timeout;
  ib_params.retry_cnt = (int)retry;
  ib_params.sl = (int)sl;
  ib_params.tc = (int)tc;
  ib_params.pkey = (int)pkey;
  ib_params.qps_per_conn = (int)qps;
  strand_params_dump();
  return STRAND_SUCCESS;
}

