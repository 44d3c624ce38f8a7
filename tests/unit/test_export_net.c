/* Unit tests of the net export layer (plugin_api/src/export_net.c, export_common.c).
 *
 * A mock v12 plugin table records every call and its arguments; each test drives the exported
 * ncclNetPlugin_vN tables the way a core of that version would and checks what the plugin saw
 * (and what the core gets back), field by field. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "strand/plugin.h"
#include "export_internal.h"

/* This test defines no CollNet table, so the CollNet export object must not be linked in. */
extern strand_collnet_v12_t ncclCollNetPlugin_v12 __attribute__((weak));
extern strand_collnet_v6_t ncclCollNetPlugin_v6 __attribute__((weak));

/* ------------------------------------------------------------------ mock plugin and recorder */

enum { F_INIT, F_GETPROPS, F_LISTEN, F_CONNECT, F_ACCEPT, F_REGMR, F_ISEND, F_IRECV,
       F_MAKEVDEVICE, F_COUNT };

static struct {
  int calls[F_COUNT];
  void **ctx_out;
  uint64_t commId;
  int config_null;
  int config_tc;
  strand_logger_t logger;
  strand_profiler_cb_t prof;
  void *ctx; /* ctx given to listen / connect */
  int dev;
  void *handle;
  strand_dev_handle_t **devcomm;
  void *comm;
  void *data;
  size_t size;
  int type;
  int tag;
  void *mhandle;
  void *phandle;
  void **phandles;
  int n;
  size_t sizes[STRAND_PROXY_MAX_SUBS];
  void **datas;
  int *tags;
  void **mhandles;
  void *request_in; /* *request as the plugin saw it on entry */
  strand_vprops_v12_t vprops;
} rec;

static strand_result_t init_rc;   /* what the mock's init returns */
static int ctx_pool[128];         /* each successful init hands out the next element */
static int next_ctx;
static int vnic_ndevs = 2;        /* vProps.ndevs the mock reports */
static int warn_count;
static char last_warn[512];
static int listen_obj, send_obj, recv_obj, req_obj, mh_obj;

static void mock_logger(strand_log_level_t level, unsigned long flags, const char *file, int line,
                        const char *fmt, ...) {
  (void)flags; (void)file; (void)line;
  if (level != STRAND_LOG_WARN) return;
  warn_count++;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(last_warn, sizeof last_warn, fmt, ap);
  va_end(ap);
}

static strand_result_t mock_prof(void **e, int type, void *parent, int64_t id, void *ext) {
  (void)e; (void)type; (void)parent; (void)id; (void)ext;
  return STRAND_SUCCESS;
}

static strand_result_t mock_init(void **ctx, uint64_t commId, strand_comm_config_t *config,
                                 strand_logger_t logger, strand_profiler_cb_t prof) {
  rec.calls[F_INIT]++;
  rec.ctx_out = ctx;
  rec.commId = commId;
  rec.config_null = config == NULL;
  rec.config_tc = config ? config->trafficClass : -999;
  rec.logger = logger;
  rec.prof = prof;
  if (init_rc != STRAND_SUCCESS) return init_rc;
  *ctx = &ctx_pool[next_ctx++];
  return STRAND_SUCCESS;
}

static strand_result_t mock_devices(int *ndev) { *ndev = 2; return STRAND_SUCCESS; }

/* Distinct, non-zero values in every field, derived from dev. */
static void expected_props(int dev, strand_props_v12_t *p) {
  static char name[] = "mock-nic", pci[] = "/sys/devices/pci0000:00/0000:00:01.0";
  memset(p, 0, sizeof *p);
  p->name = name;
  p->pciPath = pci;
  p->guid = 0x1122334455667700ull + (uint64_t)dev;
  p->ptrSupport = STRAND_PTR_HOST | STRAND_PTR_CUDA | STRAND_PTR_DMABUF;
  p->regIsGlobal = 1;
  p->forceFlush = 1;
  p->speed = 400000 + dev;
  p->port = 3 + dev;
  p->latency = 1.5f;
  p->maxComms = 65536 + dev;
  p->maxRecvs = 8;
  p->netDeviceType = STRAND_DEV_UNPACK;
  p->netDeviceVersion = STRAND_NET_DEVICE_UNPACK_VERSION;
  p->vProps.ndevs = vnic_ndevs;
  for (int i = 0; i < vnic_ndevs && i < STRAND_NET_MAX_DEVS_PER_NIC_V12; i++)
    p->vProps.devs[i] = 10 + i;
  p->maxP2pBytes = (size_t)1 << 33;
  p->maxCollBytes = (size_t)1 << 31;
  p->maxMultiRequestSize = 9;
  p->railId = 2;
  p->planeId = 1;
}

static strand_result_t mock_getProperties(int dev, strand_props_v12_t *props) {
  rec.calls[F_GETPROPS]++;
  expected_props(dev, props);
  return STRAND_SUCCESS;
}

static strand_result_t mock_listen(void *ctx, int dev, void *handle, void **listenComm) {
  rec.calls[F_LISTEN]++;
  rec.ctx = ctx; rec.dev = dev; rec.handle = handle;
  *listenComm = &listen_obj;
  return STRAND_SUCCESS;
}

static strand_result_t mock_connect(void *ctx, int dev, void *handle, void **sendComm,
                                    strand_dev_handle_t **devcomm) {
  rec.calls[F_CONNECT]++;
  rec.ctx = ctx; rec.dev = dev; rec.handle = handle; rec.devcomm = devcomm;
  *sendComm = &send_obj;
  return STRAND_SUCCESS;
}

static strand_result_t mock_accept(void *listenComm, void **recvComm,
                                   strand_dev_handle_t **devcomm) {
  rec.calls[F_ACCEPT]++;
  rec.comm = listenComm; rec.devcomm = devcomm;
  *recvComm = &recv_obj;
  return STRAND_SUCCESS;
}

static strand_result_t mock_regMr(void *comm, void *data, size_t size, int type, void **mh) {
  rec.calls[F_REGMR]++;
  rec.comm = comm; rec.data = data; rec.size = size; rec.type = type;
  *mh = &mh_obj;
  return STRAND_SUCCESS;
}

static strand_result_t mock_regMrDmaBuf(void *comm, void *data, size_t size, int type,
                                        uint64_t offset, int fd, void **mh) {
  (void)comm; (void)data; (void)size; (void)type; (void)offset; (void)fd; (void)mh;
  return STRAND_SUCCESS;
}
static strand_result_t mock_deregMr(void *comm, void *mh) { (void)comm; (void)mh; return STRAND_SUCCESS; }

static strand_result_t mock_isend(void *comm, void *data, size_t size, int tag, void *mhandle,
                                  void *phandle, void **request) {
  rec.calls[F_ISEND]++;
  rec.comm = comm; rec.data = data; rec.size = size; rec.tag = tag; rec.mhandle = mhandle;
  rec.phandle = phandle; rec.request_in = *request;
  *request = &req_obj;
  return STRAND_SUCCESS;
}

static strand_result_t mock_irecv(void *comm, int n, void **data, size_t *sizes, int *tags,
                                  void **mhandles, void **phandles, void **request) {
  rec.calls[F_IRECV]++;
  rec.comm = comm; rec.n = n; rec.datas = data; rec.tags = tags; rec.mhandles = mhandles;
  rec.phandles = phandles; rec.request_in = *request;
  for (int i = 0; i < n && i < STRAND_PROXY_MAX_SUBS; i++) rec.sizes[i] = sizes[i];
  *request = &req_obj;
  return STRAND_SUCCESS;
}

static strand_result_t mock_iflush(void *comm, int n, void **data, int *sizes, void **mh,
                                   void **request) {
  (void)comm; (void)n; (void)data; (void)sizes; (void)mh;
  *request = NULL;
  return STRAND_SUCCESS;
}
static strand_result_t mock_test(void *request, int *done, int *sizes) {
  (void)request; (void)sizes; *done = 1; return STRAND_SUCCESS;
}
static strand_result_t mock_closeSend(void *c) { (void)c; return STRAND_SUCCESS; }
static strand_result_t mock_closeRecv(void *c) { (void)c; return STRAND_SUCCESS; }
static strand_result_t mock_closeListen(void *c) { (void)c; return STRAND_SUCCESS; }
static strand_result_t mock_getDeviceMr(void *comm, void *mh, void **dptr) {
  (void)comm; (void)mh; *dptr = NULL; return STRAND_SUCCESS;
}
static strand_result_t mock_irecvConsumed(void *comm, int n, void *request) {
  (void)comm; (void)n; (void)request; return STRAND_SUCCESS;
}
static strand_result_t mock_makeVDevice(int *d, strand_vprops_v12_t *props) {
  rec.calls[F_MAKEVDEVICE]++;
  rec.vprops = *props;
  *d = 42;
  return STRAND_SUCCESS;
}
static strand_result_t mock_finalize(void *ctx) { (void)ctx; return STRAND_SUCCESS; }
static strand_result_t mock_setNetAttr(void *ctx, strand_net_attr_t *attr) {
  (void)ctx; (void)attr; return STRAND_SUCCESS;
}

static const strand_net_t full_table = {
    .name = "strand-mock",
    .init = mock_init,
    .devices = mock_devices,
    .getProperties = mock_getProperties,
    .listen = mock_listen,
    .connect = mock_connect,
    .accept = mock_accept,
    .regMr = mock_regMr,
    .regMrDmaBuf = mock_regMrDmaBuf,
    .deregMr = mock_deregMr,
    .isend = mock_isend,
    .irecv = mock_irecv,
    .iflush = mock_iflush,
    .test = mock_test,
    .closeSend = mock_closeSend,
    .closeRecv = mock_closeRecv,
    .closeListen = mock_closeListen,
    .getDeviceMr = mock_getDeviceMr,
    .irecvConsumed = mock_irecvConsumed,
    .makeVDevice = mock_makeVDevice,
    .finalize = mock_finalize,
    .setNetAttr = mock_setNetAttr,
};

/* The table the SDK sees; tests swap members and call strand_export_net_fill_tables(). */
static strand_net_t mock_table = {
    .name = "strand-mock",
    .init = mock_init,
    .devices = mock_devices,
    .getProperties = mock_getProperties,
    .listen = mock_listen,
    .connect = mock_connect,
    .accept = mock_accept,
    .regMr = mock_regMr,
    .regMrDmaBuf = mock_regMrDmaBuf,
    .deregMr = mock_deregMr,
    .isend = mock_isend,
    .irecv = mock_irecv,
    .iflush = mock_iflush,
    .test = mock_test,
    .closeSend = mock_closeSend,
    .closeRecv = mock_closeRecv,
    .closeListen = mock_closeListen,
    .getDeviceMr = mock_getDeviceMr,
    .irecvConsumed = mock_irecvConsumed,
    .makeVDevice = mock_makeVDevice,
    .finalize = mock_finalize,
    .setNetAttr = mock_setNetAttr,
};
STRAND_NET_PLUGIN(mock_table);

static int setup(void **state) {
  (void)state;
  memset(&rec, 0, sizeof rec);
  init_rc = STRAND_SUCCESS;
  next_ctx = 0;
  vnic_ndevs = 2;
  warn_count = 0;
  last_warn[0] = 0;
  mock_table = full_table;
  strand_export_net_reset_for_test();
  strand_export_net_fill_tables();
  return 0;
}

/* Call the init of table `version` as that core would. */
static strand_result_t core_init(int version, void **ctx) {
  strand_comm_config_t cfg = {.trafficClass = STRAND_NET_TRAFFIC_CLASS_UNDEF};
  switch (version) {
    case 6: return ncclNetPlugin_v6.init(mock_logger);
    case 7: return ncclNetPlugin_v7.init(mock_logger);
    case 8: return ncclNetPlugin_v8.init(mock_logger);
    case 9: return ncclNetPlugin_v9.init(mock_logger);
    case 10: return ncclNetPlugin_v10.init(mock_logger, mock_prof);
    case 11: return ncclNetPlugin_v11.init(ctx, 0xabcdef, &cfg, mock_logger, mock_prof);
    case 12: return ncclNetPlugin_v12.init(ctx, 0xabcdef, &cfg, mock_logger, mock_prof);
  }
  return STRAND_INTERNAL_ERROR;
}

/* Call listen of table `version` with ctx (ignored before v11). */
static strand_result_t core_listen(int version, void *ctx, void **listenComm) {
  static char handle[STRAND_NET_HANDLE_MAXSIZE];
  switch (version) {
    case 6: return ncclNetPlugin_v6.listen(1, handle, listenComm);
    case 7: return ncclNetPlugin_v7.listen(1, handle, listenComm);
    case 8: return ncclNetPlugin_v8.listen(1, handle, listenComm);
    case 9: return ncclNetPlugin_v9.listen(1, handle, listenComm);
    case 10: return ncclNetPlugin_v10.listen(1, handle, listenComm);
    case 11: return ncclNetPlugin_v11.listen(ctx, 1, handle, listenComm);
    case 12: return ncclNetPlugin_v12.listen(ctx, 1, handle, listenComm);
  }
  return STRAND_INTERNAL_ERROR;
}

static strand_result_t core_connect(int version, void *ctx, strand_comm_config_t *cfg,
                                    void **sendComm, strand_dev_handle_t **devcomm) {
  static char handle[STRAND_NET_HANDLE_MAXSIZE];
  switch (version) {
    case 6: return ncclNetPlugin_v6.connect(1, handle, sendComm);
    case 7: return ncclNetPlugin_v7.connect(1, handle, sendComm, devcomm);
    case 8: return ncclNetPlugin_v8.connect(1, handle, sendComm, devcomm);
    case 9: return ncclNetPlugin_v9.connect(1, handle, sendComm, devcomm);
    case 10: return ncclNetPlugin_v10.connect(1, cfg, handle, sendComm, devcomm);
    case 11: return ncclNetPlugin_v11.connect(ctx, 1, handle, sendComm, devcomm);
    case 12: return ncclNetPlugin_v12.connect(ctx, 1, handle, sendComm, devcomm);
  }
  return STRAND_INTERNAL_ERROR;
}

/* ------------------------------------------------------------------ tables, names, NULLs */

static void test_names_before_init(void **state) {
  (void)state;
  /* NCCL reads name right after dlopen, before init: the constructor must have set it. */
  assert_string_equal(ncclNetPlugin_v6.name, "strand-mock");
  assert_string_equal(ncclNetPlugin_v7.name, "strand-mock");
  assert_string_equal(ncclNetPlugin_v8.name, "strand-mock");
  assert_string_equal(ncclNetPlugin_v9.name, "strand-mock");
  assert_string_equal(ncclNetPlugin_v10.name, "strand-mock");
  assert_string_equal(ncclNetPlugin_v11.name, "strand-mock");
  assert_string_equal(ncclNetPlugin_v12.name, "strand-mock");
  assert_int_equal(strand_core_abi_version(), 0);
}

static void test_no_collnet_without_table(void **state) {
  (void)state;
  assert_null(&ncclCollNetPlugin_v12);
  assert_null(&ncclCollNetPlugin_v6);
}

static void test_passthrough_members(void **state) {
  (void)state;
  /* Members whose signature did not change are the plugin's own pointers in every version. */
  assert_ptr_equal(ncclNetPlugin_v6.devices, mock_devices);
  assert_ptr_equal(ncclNetPlugin_v6.test, mock_test);
  assert_ptr_equal(ncclNetPlugin_v6.deregMr, mock_deregMr);
  assert_ptr_equal(ncclNetPlugin_v6.closeSend, mock_closeSend);
  assert_ptr_equal(ncclNetPlugin_v6.closeRecv, mock_closeRecv);
  assert_ptr_equal(ncclNetPlugin_v6.closeListen, mock_closeListen);
  assert_ptr_equal(ncclNetPlugin_v6.regMrDmaBuf, mock_regMrDmaBuf);
  assert_ptr_equal(ncclNetPlugin_v6.iflush, mock_iflush);
  assert_ptr_equal(ncclNetPlugin_v7.accept, mock_accept);
  assert_ptr_equal(ncclNetPlugin_v7.getDeviceMr, mock_getDeviceMr);
  assert_ptr_equal(ncclNetPlugin_v7.irecvConsumed, mock_irecvConsumed);
  assert_ptr_equal(ncclNetPlugin_v8.regMr, mock_regMr);
  assert_ptr_equal(ncclNetPlugin_v9.regMr, mock_regMr);
  assert_ptr_equal(ncclNetPlugin_v10.isend, mock_isend);
  assert_ptr_equal(ncclNetPlugin_v10.irecv, mock_irecv);
  assert_ptr_equal(ncclNetPlugin_v11.listen, mock_listen);
  assert_ptr_equal(ncclNetPlugin_v11.connect, mock_connect);
  assert_ptr_equal(ncclNetPlugin_v11.isend, mock_isend);
  assert_ptr_equal(ncclNetPlugin_v11.finalize, mock_finalize);
  assert_ptr_equal(ncclNetPlugin_v11.setNetAttr, mock_setNetAttr);
  assert_ptr_equal(ncclNetPlugin_v12.finalize, mock_finalize);
  assert_ptr_equal(ncclNetPlugin_v12.setNetAttr, mock_setNetAttr);
  assert_ptr_equal(ncclNetPlugin_v12.makeVDevice, mock_makeVDevice);
  assert_ptr_equal(ncclNetPlugin_v12.getProperties, mock_getProperties);
  /* Converted members are adapters, not the plugin's pointers. */
  assert_ptr_not_equal((void *)ncclNetPlugin_v11.getProperties, (void *)mock_getProperties);
  assert_ptr_not_equal((void *)ncclNetPlugin_v11.makeVDevice, (void *)mock_makeVDevice);
  assert_ptr_not_equal((void *)ncclNetPlugin_v12.init, (void *)mock_init);
  assert_non_null(ncclNetPlugin_v9.makeVDevice);
  assert_non_null(ncclNetPlugin_v10.makeVDevice);
}

static void test_null_optional_members_stay_null(void **state) {
  (void)state;
  mock_table.regMrDmaBuf = NULL;
  mock_table.getDeviceMr = NULL;
  mock_table.irecvConsumed = NULL;
  mock_table.makeVDevice = NULL;
  mock_table.setNetAttr = NULL;
  mock_table.iflush = NULL;
  strand_export_net_fill_tables();
  assert_null(ncclNetPlugin_v6.regMrDmaBuf);
  assert_null(ncclNetPlugin_v6.iflush);
  assert_null(ncclNetPlugin_v7.regMrDmaBuf);
  assert_null(ncclNetPlugin_v7.iflush);
  assert_null(ncclNetPlugin_v7.getDeviceMr);
  assert_null(ncclNetPlugin_v7.irecvConsumed);
  assert_null(ncclNetPlugin_v8.regMrDmaBuf);
  assert_null(ncclNetPlugin_v8.getDeviceMr);
  assert_null(ncclNetPlugin_v8.irecvConsumed);
  assert_null(ncclNetPlugin_v8.iflush);
  assert_null(ncclNetPlugin_v9.makeVDevice);
  assert_null(ncclNetPlugin_v9.regMrDmaBuf);
  assert_null(ncclNetPlugin_v9.irecvConsumed);
  assert_null(ncclNetPlugin_v10.makeVDevice);
  assert_null(ncclNetPlugin_v10.getDeviceMr);
  assert_null(ncclNetPlugin_v11.makeVDevice);
  assert_null(ncclNetPlugin_v11.setNetAttr);
  assert_null(ncclNetPlugin_v11.iflush);
  assert_null(ncclNetPlugin_v12.makeVDevice);
  assert_null(ncclNetPlugin_v12.setNetAttr);
  assert_null(ncclNetPlugin_v12.regMrDmaBuf);
  /* Mandatory members are unaffected. */
  assert_non_null(ncclNetPlugin_v6.irecv);
  assert_non_null(ncclNetPlugin_v11.getProperties);
}

/* ------------------------------------------------------------------ init and contexts */

static void test_init_once_pre_v11(void **state) {
  for (int v = 6; v <= 10; v++) {
    setup(state);
    assert_int_equal(core_init(v, NULL), STRAND_SUCCESS);
    assert_int_equal(strand_core_abi_version(), v);
    assert_int_equal(rec.calls[F_INIT], 1);
    assert_non_null(rec.ctx_out);
    assert_int_equal(rec.commId, 0);
    assert_false(rec.config_null);
    assert_int_equal(rec.config_tc, STRAND_NET_TRAFFIC_CLASS_UNDEF);
    assert_ptr_equal(rec.logger, mock_logger);
    if (v == 10) assert_ptr_equal(rec.prof, mock_prof);
    else assert_null(rec.prof);
    /* A second init (another communicator on an old core) creates nothing. */
    assert_int_equal(core_init(v, NULL), STRAND_SUCCESS);
    assert_int_equal(rec.calls[F_INIT], 1);

    void *comm = NULL;
    assert_int_equal(core_listen(v, NULL, &comm), STRAND_SUCCESS);
    assert_ptr_equal(rec.ctx, &ctx_pool[0]);
    assert_int_equal(rec.dev, 1);
    assert_ptr_equal(comm, &listen_obj);
    strand_dev_handle_t *dh = NULL;
    comm = NULL;
    assert_int_equal(core_connect(v, NULL, NULL, &comm, &dh), STRAND_SUCCESS);
    assert_ptr_equal(rec.ctx, &ctx_pool[0]);
    assert_ptr_equal(comm, &send_obj);
    assert_int_equal(rec.calls[F_INIT], 1);
  }
}

static void test_init_failure_then_retry(void **state) {
  (void)state;
  init_rc = STRAND_SYSTEM_ERROR;
  assert_int_equal(core_init(8, NULL), STRAND_SYSTEM_ERROR);
  void *comm = NULL;
  warn_count = 0;
  assert_int_equal(core_listen(8, NULL, &comm), STRAND_INTERNAL_ERROR);
  assert_int_equal(rec.calls[F_LISTEN], 0);
  assert_int_equal(warn_count, 1);
  assert_non_null(strstr(last_warn, "listen"));
  init_rc = STRAND_SUCCESS;
  assert_int_equal(core_init(8, NULL), STRAND_SUCCESS);
  assert_int_equal(rec.calls[F_INIT], 2);
  assert_int_equal(core_listen(8, NULL, &comm), STRAND_SUCCESS);
  assert_ptr_equal(rec.ctx, &ctx_pool[0]);
}

static void test_init_per_comm_v11_v12(void **state) {
  for (int v = 11; v <= 12; v++) {
    setup(state);
    void *ctx_a = NULL, *ctx_b = NULL;
    assert_int_equal(core_init(v, &ctx_a), STRAND_SUCCESS);
    assert_int_equal(strand_core_abi_version(), v);
    assert_ptr_equal(rec.ctx_out, &ctx_a);
    assert_int_equal(rec.commId, 0xabcdef);
    assert_ptr_equal(rec.logger, mock_logger);
    assert_ptr_equal(rec.prof, mock_prof);
    assert_int_equal(core_init(v, &ctx_b), STRAND_SUCCESS);
    assert_int_equal(rec.calls[F_INIT], 2);
    assert_ptr_equal(ctx_a, &ctx_pool[0]);
    assert_ptr_equal(ctx_b, &ctx_pool[1]);
    void *comm = NULL;
    assert_int_equal(core_listen(v, ctx_b, &comm), STRAND_SUCCESS);
    assert_ptr_equal(rec.ctx, ctx_b);
    strand_dev_handle_t *dh = NULL;
    assert_int_equal(core_connect(v, ctx_a, NULL, &comm, &dh), STRAND_SUCCESS);
    assert_ptr_equal(rec.ctx, ctx_a);
    assert_ptr_equal(rec.devcomm, &dh);
  }
}

static void test_max_requests(void **state) {
  assert_int_equal(strand_core_max_requests(), STRAND_NET_MAX_REQUESTS);
  assert_int_equal(core_init(6, NULL), STRAND_SUCCESS);
  assert_int_equal(strand_core_max_requests(), STRAND_NET_MAX_REQUESTS_V6);
  for (int v = 7; v <= 12; v++) {
    setup(state);
    void *ctx;
    assert_int_equal(core_init(v, &ctx), STRAND_SUCCESS);
    assert_int_equal(strand_core_max_requests(), STRAND_NET_MAX_REQUESTS);
  }
}

static void test_v10_traffic_class(void **state) {
  (void)state;
  assert_int_equal(core_init(10, NULL), STRAND_SUCCESS);
  void *default_ctx = &ctx_pool[0];
  void *comm = NULL;
  strand_dev_handle_t *dh = NULL;

  strand_comm_config_t undef = {.trafficClass = STRAND_NET_TRAFFIC_CLASS_UNDEF};
  assert_int_equal(core_connect(10, NULL, &undef, &comm, &dh), STRAND_SUCCESS);
  assert_ptr_equal(rec.ctx, default_ctx);
  assert_ptr_equal(rec.devcomm, &dh);
  assert_int_equal(core_connect(10, NULL, NULL, &comm, &dh), STRAND_SUCCESS);
  assert_ptr_equal(rec.ctx, default_ctx);
  assert_int_equal(rec.calls[F_INIT], 1);

  /* A new class gets its own plugin context, created with that class in its config. */
  strand_comm_config_t tc5 = {.trafficClass = 5};
  assert_int_equal(core_connect(10, NULL, &tc5, &comm, &dh), STRAND_SUCCESS);
  assert_int_equal(rec.calls[F_INIT], 2);
  assert_int_equal(rec.config_tc, 5);
  assert_int_equal(rec.commId, 0);
  assert_ptr_equal(rec.logger, mock_logger);
  assert_ptr_equal(rec.prof, mock_prof);
  assert_ptr_equal(rec.ctx, &ctx_pool[1]);
  /* Same class again: same context, no new init. */
  assert_int_equal(core_connect(10, NULL, &tc5, &comm, &dh), STRAND_SUCCESS);
  assert_int_equal(rec.calls[F_INIT], 2);
  assert_ptr_equal(rec.ctx, &ctx_pool[1]);
  strand_comm_config_t tc0 = {.trafficClass = 0};
  assert_int_equal(core_connect(10, NULL, &tc0, &comm, &dh), STRAND_SUCCESS);
  assert_int_equal(rec.calls[F_INIT], 3);
  assert_int_equal(rec.config_tc, 0);
  assert_ptr_equal(rec.ctx, &ctx_pool[2]);
  /* listen always uses the default context: v10 passes no config there. */
  assert_int_equal(core_listen(10, NULL, &comm), STRAND_SUCCESS);
  assert_ptr_equal(rec.ctx, default_ctx);

  /* The plugin refusing a class fails that connect (with a WARN) and is retried next time. */
  init_rc = STRAND_INVALID_USAGE;
  strand_comm_config_t tc9 = {.trafficClass = 9};
  int connects = rec.calls[F_CONNECT];
  warn_count = 0;
  assert_int_equal(core_connect(10, NULL, &tc9, &comm, &dh), STRAND_INVALID_USAGE);
  assert_int_equal(rec.calls[F_CONNECT], connects);
  assert_int_equal(warn_count, 1);
  init_rc = STRAND_SUCCESS;
  assert_int_equal(core_connect(10, NULL, &tc9, &comm, &dh), STRAND_SUCCESS);
  assert_int_equal(rec.config_tc, 9);

  /* Bounded: beyond STRAND_EXPORT_MAX_TC_CTX classes, connections use the default context. */
  for (int tc = 100; tc < 100 + STRAND_EXPORT_MAX_TC_CTX; tc++) {
    strand_comm_config_t c = {.trafficClass = tc};
    assert_int_equal(core_connect(10, NULL, &c, &comm, &dh), STRAND_SUCCESS);
  }
  assert_int_equal(rec.calls[F_INIT], 1 + STRAND_EXPORT_MAX_TC_CTX + 1 /* failed tc9 */);
  assert_ptr_equal(rec.ctx, default_ctx);
  assert_true(warn_count >= 1);
  /* Classes created before the limit still map to their own contexts. */
  assert_int_equal(core_connect(10, NULL, &tc5, &comm, &dh), STRAND_SUCCESS);
  assert_ptr_equal(rec.ctx, &ctx_pool[1]);
}

static void test_connect_accept_dev_handles(void **state) {
  (void)state;
  for (int v = 6; v <= 12; v++) {
    setup(state);
    void *ctx = NULL, *comm = NULL;
    assert_int_equal(core_init(v, &ctx), STRAND_SUCCESS);
    strand_dev_handle_t *dh = NULL;
    rec.devcomm = (strand_dev_handle_t **)&rec; /* anything but NULL */
    assert_int_equal(core_connect(v, ctx, NULL, &comm, &dh), STRAND_SUCCESS);
    if (v == 6) assert_null(rec.devcomm);
    else assert_ptr_equal(rec.devcomm, &dh);

    rec.devcomm = (strand_dev_handle_t **)&rec;
    strand_dev_handle_t *rdh = NULL;
    void *recv = NULL;
    strand_result_t rc;
    switch (v) {
      case 6: rc = ncclNetPlugin_v6.accept(&listen_obj, &recv); break;
      case 7: rc = ncclNetPlugin_v7.accept(&listen_obj, &recv, &rdh); break;
      case 8: rc = ncclNetPlugin_v8.accept(&listen_obj, &recv, &rdh); break;
      case 9: rc = ncclNetPlugin_v9.accept(&listen_obj, &recv, &rdh); break;
      case 10: rc = ncclNetPlugin_v10.accept(&listen_obj, &recv, &rdh); break;
      case 11: rc = ncclNetPlugin_v11.accept(&listen_obj, &recv, &rdh); break;
      default: rc = ncclNetPlugin_v12.accept(&listen_obj, &recv, &rdh); break;
    }
    assert_int_equal(rc, STRAND_SUCCESS);
    assert_ptr_equal(recv, &recv_obj);
    assert_ptr_equal(rec.comm, &listen_obj);
    if (v == 6) assert_null(rec.devcomm);
    else assert_ptr_equal(rec.devcomm, &rdh);
  }
}

/* ------------------------------------------------------------------ properties */

#define CANARY 0xA5

/* Fields every layout has. */
#define CHECK_COMMON_PROPS(p, e)                                    \
  do {                                                              \
    assert_ptr_equal((p)->name, (e)->name);                         \
    assert_ptr_equal((p)->pciPath, (e)->pciPath);                   \
    assert_true((p)->guid == (e)->guid);                            \
    assert_int_equal((p)->ptrSupport, (e)->ptrSupport);             \
    assert_int_equal((p)->speed, (e)->speed);                       \
    assert_int_equal((p)->port, (e)->port);                         \
    assert_true((p)->latency == (e)->latency);                      \
    assert_int_equal((p)->maxComms, (e)->maxComms);                 \
    assert_int_equal((p)->maxRecvs, (e)->maxRecvs);                 \
  } while (0)

static void check_tail(const unsigned char *buf, size_t size, size_t total) {
  for (size_t i = size; i < total; i++) assert_int_equal(buf[i], CANARY);
}

static void test_props_every_layout(void **state) {
  (void)state;
  _Alignas(8) unsigned char buf[sizeof(strand_props_v12_t) + 64];
  strand_props_v12_t e;
  for (int dev = 0; dev < 2; dev++) {
    expected_props(dev, &e);

    memset(buf, CANARY, sizeof buf);
    strand_props_v6_t *p6 = (strand_props_v6_t *)buf;
    assert_int_equal(ncclNetPlugin_v6.getProperties(dev, p6), STRAND_SUCCESS);
    CHECK_COMMON_PROPS(p6, &e);
    check_tail(buf, sizeof *p6, sizeof buf);

    memset(buf, CANARY, sizeof buf);
    strand_props_v7_t *p7 = (strand_props_v7_t *)buf;
    assert_int_equal(ncclNetPlugin_v7.getProperties(dev, p7), STRAND_SUCCESS);
    CHECK_COMMON_PROPS(p7, &e);
    assert_int_equal(p7->netDeviceType, e.netDeviceType);
    assert_int_equal(p7->netDeviceVersion, e.netDeviceVersion);
    check_tail(buf, sizeof *p7, sizeof buf);

    memset(buf, CANARY, sizeof buf);
    strand_props_v8_t *p8 = (strand_props_v8_t *)buf;
    assert_int_equal(ncclNetPlugin_v8.getProperties(dev, p8), STRAND_SUCCESS);
    CHECK_COMMON_PROPS(p8, &e);
    assert_int_equal(p8->regIsGlobal, e.regIsGlobal);
    assert_int_equal(p8->netDeviceType, e.netDeviceType);
    assert_int_equal(p8->netDeviceVersion, e.netDeviceVersion);
    check_tail(buf, sizeof *p8, sizeof buf);

    for (int v = 9; v <= 10; v++) {
      memset(buf, CANARY, sizeof buf);
      strand_props_v9_t *p9 = (strand_props_v9_t *)buf;
      strand_result_t rc = v == 9 ? ncclNetPlugin_v9.getProperties(dev, p9)
                                  : ncclNetPlugin_v10.getProperties(dev, p9);
      assert_int_equal(rc, STRAND_SUCCESS);
      CHECK_COMMON_PROPS(p9, &e);
      assert_int_equal(p9->regIsGlobal, e.regIsGlobal);
      assert_int_equal(p9->forceFlush, e.forceFlush);
      assert_int_equal(p9->netDeviceType, e.netDeviceType);
      assert_int_equal(p9->netDeviceVersion, e.netDeviceVersion);
      assert_int_equal(p9->vProps.ndevs, 2);
      assert_int_equal(p9->vProps.devs[0], 10);
      assert_int_equal(p9->vProps.devs[1], 11);
      assert_true(p9->maxP2pBytes == e.maxP2pBytes);
      assert_true(p9->maxCollBytes == e.maxCollBytes);
      check_tail(buf, sizeof *p9, sizeof buf);
    }

    memset(buf, CANARY, sizeof buf);
    strand_props_v11_t *p11 = (strand_props_v11_t *)buf;
    assert_int_equal(ncclNetPlugin_v11.getProperties(dev, p11), STRAND_SUCCESS);
    CHECK_COMMON_PROPS(p11, &e);
    assert_int_equal(p11->regIsGlobal, e.regIsGlobal);
    assert_int_equal(p11->forceFlush, e.forceFlush);
    assert_int_equal(p11->netDeviceType, e.netDeviceType);
    assert_int_equal(p11->netDeviceVersion, e.netDeviceVersion);
    assert_int_equal(p11->vProps.ndevs, 2);
    assert_int_equal(p11->vProps.devs[0], 10);
    assert_int_equal(p11->vProps.devs[1], 11);
    assert_true(p11->maxP2pBytes == e.maxP2pBytes);
    assert_true(p11->maxCollBytes == e.maxCollBytes);
    assert_int_equal(p11->maxMultiRequestSize, e.maxMultiRequestSize);
    check_tail(buf, sizeof *p11, sizeof buf);

    memset(buf, CANARY, sizeof buf);
    strand_props_v12_t *p12 = (strand_props_v12_t *)buf;
    assert_int_equal(ncclNetPlugin_v12.getProperties(dev, p12), STRAND_SUCCESS);
    CHECK_COMMON_PROPS(p12, &e);
    assert_int_equal(p12->railId, e.railId);
    assert_int_equal(p12->planeId, e.planeId);
  }
}

static void test_props_vnic_beyond_v11(void **state) {
  (void)state;
  vnic_ndevs = 5;
  strand_props_v9_t p9;
  strand_props_v11_t p11;
  strand_props_v8_t p8;
  strand_props_v12_t p12;
  assert_int_equal(core_init(9, NULL), STRAND_SUCCESS);
  warn_count = 0;
  assert_int_equal(ncclNetPlugin_v9.getProperties(0, &p9), STRAND_INTERNAL_ERROR);
  assert_int_equal(ncclNetPlugin_v10.getProperties(0, &p9), STRAND_INTERNAL_ERROR);
  assert_int_equal(ncclNetPlugin_v11.getProperties(1, &p11), STRAND_INTERNAL_ERROR);
  assert_int_equal(warn_count, 3);
  assert_non_null(strstr(last_warn, "fuses 5"));
  /* Layouts without vProps just convert; v12 carries up to 8. */
  assert_int_equal(ncclNetPlugin_v8.getProperties(0, &p8), STRAND_SUCCESS);
  assert_int_equal(ncclNetPlugin_v12.getProperties(0, &p12), STRAND_SUCCESS);
  assert_int_equal(p12.vProps.ndevs, 5);
  vnic_ndevs = 4;
  assert_int_equal(ncclNetPlugin_v11.getProperties(1, &p11), STRAND_SUCCESS);
  assert_int_equal(p11.vProps.ndevs, 4);
  assert_int_equal(p11.vProps.devs[3], 13);
}

/* ------------------------------------------------------------------ sizes */

static void test_regMr_int_v6_v7(void **state) {
  (void)state;
  assert_int_equal(core_init(7, NULL), STRAND_SUCCESS);
  char buf[16];
  void *mh = NULL;
  for (int v = 6; v <= 7; v++) {
    strand_result_t (*regMr)(void *, void *, int, int, void **) =
        v == 6 ? ncclNetPlugin_v6.regMr : ncclNetPlugin_v7.regMr;
    rec.size = 0;
    assert_int_equal(regMr(&send_obj, buf, 0x7fffffff, STRAND_PTR_CUDA, &mh), STRAND_SUCCESS);
    assert_true(rec.size == 0x7fffffffu);
    assert_ptr_equal(rec.comm, &send_obj);
    assert_ptr_equal(rec.data, buf);
    assert_int_equal(rec.type, STRAND_PTR_CUDA);
    assert_ptr_equal(mh, &mh_obj);
    assert_int_equal(regMr(&send_obj, buf, 0, STRAND_PTR_HOST, &mh), STRAND_SUCCESS);
    assert_true(rec.size == 0);
    int calls = rec.calls[F_REGMR];
    warn_count = 0;
    assert_int_equal(regMr(&send_obj, buf, -1, STRAND_PTR_HOST, &mh), STRAND_INTERNAL_ERROR);
    assert_int_equal(regMr(&send_obj, buf, INT32_MIN, STRAND_PTR_HOST, &mh),
                     STRAND_INTERNAL_ERROR);
    assert_int_equal(rec.calls[F_REGMR], calls);
    assert_int_equal(warn_count, 2);
    assert_non_null(strstr(last_warn, "regMr"));
  }
}

static void test_isend_v6_to_v9(void **state) {
  (void)state;
  assert_int_equal(core_init(8, NULL), STRAND_SUCCESS);
  char buf[8];
  for (int v = 6; v <= 9; v++) {
    void *req = (void *)(uintptr_t)0xdead;
    rec.phandle = (void *)1;
    strand_result_t rc;
    switch (v) {
      case 6: rc = ncclNetPlugin_v6.isend(&send_obj, buf, 1 << 30, 77, &mh_obj, &req); break;
      case 7: rc = ncclNetPlugin_v7.isend(&send_obj, buf, 1 << 30, 77, &mh_obj, &req); break;
      case 8: rc = ncclNetPlugin_v8.isend(&send_obj, buf, 1 << 30, 77, &mh_obj, &req); break;
      default: rc = ncclNetPlugin_v9.isend(&send_obj, buf, (size_t)1 << 30, 77, &mh_obj, &req);
    }
    assert_int_equal(rc, STRAND_SUCCESS);
    assert_true(rec.size == (size_t)1 << 30);
    assert_int_equal(rec.tag, 77);
    assert_ptr_equal(rec.comm, &send_obj);
    assert_ptr_equal(rec.data, buf);
    assert_ptr_equal(rec.mhandle, &mh_obj);
    assert_null(rec.phandle);
    assert_ptr_equal(req, &req_obj);
  }
  /* size 0 is legal (LL may post empty steps); negative is an overflowed int. */
  void *req = NULL;
  assert_int_equal(ncclNetPlugin_v7.isend(&send_obj, buf, 0, 1, &mh_obj, &req), STRAND_SUCCESS);
  assert_true(rec.size == 0);
  int calls = rec.calls[F_ISEND];
  warn_count = 0;
  req = NULL;
  assert_int_equal(ncclNetPlugin_v6.isend(&send_obj, buf, -5, 1, &mh_obj, &req),
                   STRAND_INTERNAL_ERROR);
  assert_int_equal(ncclNetPlugin_v8.isend(&send_obj, buf, -1, 1, &mh_obj, &req),
                   STRAND_INTERNAL_ERROR);
  assert_int_equal(rec.calls[F_ISEND], calls);
  assert_int_equal(warn_count, 2);
  assert_null(req);
}

static void test_irecv_v6_to_v8(void **state) {
  (void)state;
  assert_int_equal(core_init(6, NULL), STRAND_SUCCESS);
  char b0[4], b1[4], b2[4];
  void *data[3] = {b0, b1, b2};
  int sizes[3] = {0, 4096, 0x7fffffff};
  int tags[3] = {5, 6, 7};
  void *mhs[3] = {&mh_obj, &mh_obj, NULL};
  for (int v = 6; v <= 8; v++) {
    strand_result_t (*irecv)(void *, int, void **, int *, int *, void **, void **) =
        v == 6 ? ncclNetPlugin_v6.irecv : v == 7 ? ncclNetPlugin_v7.irecv : ncclNetPlugin_v8.irecv;
    /* The optional-completion sentinel is cleared before the plugin sees it. */
    void *req = STRAND_NET_OPTIONAL_RECV_COMPLETION_PTR;
    rec.phandles = (void **)1;
    assert_int_equal(irecv(&recv_obj, 3, data, sizes, tags, mhs, &req), STRAND_SUCCESS);
    assert_null(rec.request_in);
    assert_ptr_equal(req, &req_obj);
    assert_int_equal(rec.n, 3);
    assert_true(rec.sizes[0] == 0);
    assert_true(rec.sizes[1] == 4096);
    assert_true(rec.sizes[2] == 0x7fffffffu);
    assert_ptr_equal(rec.datas, data);
    assert_ptr_equal(rec.tags, tags);
    assert_ptr_equal(rec.mhandles, mhs);
    assert_null(rec.phandles);
    assert_ptr_equal(rec.comm, &recv_obj);
    /* A NULL request stays NULL. */
    req = NULL;
    assert_int_equal(irecv(&recv_obj, 1, data, sizes, tags, mhs, &req), STRAND_SUCCESS);
    assert_null(rec.request_in);
  }
  /* n at the upper bound is accepted and every element converted. */
  int many[STRAND_PROXY_MAX_SUBS];
  int many_tags[STRAND_PROXY_MAX_SUBS];
  void *many_data[STRAND_PROXY_MAX_SUBS], *many_mh[STRAND_PROXY_MAX_SUBS];
  for (int i = 0; i < STRAND_PROXY_MAX_SUBS; i++) {
    many[i] = 1000 + i; many_tags[i] = i; many_data[i] = b0; many_mh[i] = NULL;
  }
  void *req = NULL;
  assert_int_equal(ncclNetPlugin_v7.irecv(&recv_obj, STRAND_PROXY_MAX_SUBS, many_data, many,
                                          many_tags, many_mh, &req), STRAND_SUCCESS);
  assert_int_equal(rec.n, STRAND_PROXY_MAX_SUBS);
  for (int i = 0; i < STRAND_PROXY_MAX_SUBS; i++) assert_true(rec.sizes[i] == (size_t)(1000 + i));

  /* Out-of-range n and negative sizes: error + WARN, plugin not called. */
  int calls = rec.calls[F_IRECV];
  warn_count = 0;
  assert_int_equal(ncclNetPlugin_v6.irecv(&recv_obj, 0, data, sizes, tags, mhs, &req),
                   STRAND_INTERNAL_ERROR);
  assert_int_equal(ncclNetPlugin_v7.irecv(&recv_obj, STRAND_PROXY_MAX_SUBS + 1, many_data, many,
                                          many_tags, many_mh, &req), STRAND_INTERNAL_ERROR);
  assert_int_equal(ncclNetPlugin_v8.irecv(&recv_obj, -1, data, sizes, tags, mhs, &req),
                   STRAND_INTERNAL_ERROR);
  int bad[2] = {16, -16};
  assert_int_equal(ncclNetPlugin_v8.irecv(&recv_obj, 2, data, bad, tags, mhs, &req),
                   STRAND_INTERNAL_ERROR);
  assert_int_equal(rec.calls[F_IRECV], calls);
  assert_int_equal(warn_count, 4);
  assert_non_null(strstr(last_warn, "irecv"));
}

static void test_irecv_v9_and_later(void **state) {
  (void)state;
  char b0[4];
  void *data[2] = {b0, b0};
  size_t sizes[2] = {(size_t)1 << 31, 12};
  int tags[2] = {1, 2};
  void *mhs[2] = {NULL, NULL};
  void *ph[2] = {(void *)3, (void *)4};
  /* v9 keeps the sentinel (the plugin may use it) and drops profiler handles. */
  void *req = STRAND_NET_OPTIONAL_RECV_COMPLETION_PTR;
  rec.phandles = (void **)1;
  assert_int_equal(ncclNetPlugin_v9.irecv(&recv_obj, 2, data, sizes, tags, mhs, &req),
                   STRAND_SUCCESS);
  assert_ptr_equal(rec.request_in, STRAND_NET_OPTIONAL_RECV_COMPLETION_PTR);
  assert_null(rec.phandles);
  assert_int_equal(rec.n, 2);
  assert_true(rec.sizes[0] == (size_t)1 << 31);
  assert_true(rec.sizes[1] == 12);
  assert_ptr_equal(req, &req_obj);
  /* v10..v12 are the plugin's own irecv: sentinel and phandles arrive untouched. */
  req = STRAND_NET_OPTIONAL_RECV_COMPLETION_PTR;
  assert_int_equal(ncclNetPlugin_v10.irecv(&recv_obj, 2, data, sizes, tags, mhs, ph, &req),
                   STRAND_SUCCESS);
  assert_ptr_equal(rec.request_in, STRAND_NET_OPTIONAL_RECV_COMPLETION_PTR);
  assert_ptr_equal(rec.phandles, ph);
  req = STRAND_NET_OPTIONAL_RECV_COMPLETION_PTR;
  assert_int_equal(ncclNetPlugin_v12.irecv(&recv_obj, 2, data, sizes, tags, mhs, ph, &req),
                   STRAND_SUCCESS);
  assert_ptr_equal(rec.request_in, STRAND_NET_OPTIONAL_RECV_COMPLETION_PTR);
  /* v10+ isend carries phandle. */
  void *sreq = NULL;
  assert_int_equal(ncclNetPlugin_v11.isend(&send_obj, b0, 3, 9, NULL, (void *)5, &sreq),
                   STRAND_SUCCESS);
  assert_ptr_equal(rec.phandle, (void *)5);
}

/* ------------------------------------------------------------------ makeVDevice */

static void test_make_vdevice(void **state) {
  (void)state;
  for (int v = 9; v <= 11; v++) {
    strand_result_t (*mk)(int *, strand_vprops_v9_t *) =
        v == 9 ? ncclNetPlugin_v9.makeVDevice
               : v == 10 ? ncclNetPlugin_v10.makeVDevice : ncclNetPlugin_v11.makeVDevice;
    strand_vprops_v9_t in = {.ndevs = 4, .devs = {3, 1, 2, 0}};
    int d = -1;
    memset(&rec.vprops, CANARY, sizeof rec.vprops);
    assert_int_equal(mk(&d, &in), STRAND_SUCCESS);
    assert_int_equal(d, 42);
    assert_int_equal(rec.vprops.ndevs, 4);
    assert_int_equal(rec.vprops.devs[0], 3);
    assert_int_equal(rec.vprops.devs[1], 1);
    assert_int_equal(rec.vprops.devs[2], 2);
    assert_int_equal(rec.vprops.devs[3], 0);
    for (int i = 4; i < STRAND_NET_MAX_DEVS_PER_NIC_V12; i++)
      assert_int_equal(rec.vprops.devs[i], 0);
    int calls = rec.calls[F_MAKEVDEVICE];
    in.ndevs = 5;
    assert_int_equal(mk(&d, &in), STRAND_INTERNAL_ERROR);
    in.ndevs = -1;
    assert_int_equal(mk(&d, &in), STRAND_INTERNAL_ERROR);
    assert_int_equal(rec.calls[F_MAKEVDEVICE], calls);
  }
  strand_vprops_v12_t big = {.ndevs = 8, .devs = {0, 1, 2, 3, 4, 5, 6, 7}};
  int d = -1;
  assert_int_equal(ncclNetPlugin_v12.makeVDevice(&d, &big), STRAND_SUCCESS);
  assert_int_equal(rec.vprops.ndevs, 8);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup(test_names_before_init, setup),
      cmocka_unit_test_setup(test_no_collnet_without_table, setup),
      cmocka_unit_test_setup(test_passthrough_members, setup),
      cmocka_unit_test_setup(test_null_optional_members_stay_null, setup),
      cmocka_unit_test_setup(test_init_once_pre_v11, setup),
      cmocka_unit_test_setup(test_init_failure_then_retry, setup),
      cmocka_unit_test_setup(test_init_per_comm_v11_v12, setup),
      cmocka_unit_test_setup(test_max_requests, setup),
      cmocka_unit_test_setup(test_v10_traffic_class, setup),
      cmocka_unit_test_setup(test_connect_accept_dev_handles, setup),
      cmocka_unit_test_setup(test_props_every_layout, setup),
      cmocka_unit_test_setup(test_props_vnic_beyond_v11, setup),
      cmocka_unit_test_setup(test_regMr_int_v6_v7, setup),
      cmocka_unit_test_setup(test_isend_v6_to_v9, setup),
      cmocka_unit_test_setup(test_irecv_v6_to_v8, setup),
      cmocka_unit_test_setup(test_irecv_v9_and_later, setup),
      cmocka_unit_test_setup(test_make_vdevice, setup),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
