/* Unit tests of the CollNet export layer (plugin_api/src/export_collnet.c).
 *
 * A mock v12 CollNet table records calls and arguments; each test drives ncclCollNetPlugin_vN
 * as a core of that version would. This test defines no net table: linking must still work,
 * and no ncclNetPlugin_v* may be pulled in. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "strand/plugin.h"
#include "export_internal.h"

extern strand_net_v12_t ncclNetPlugin_v12 __attribute__((weak));

enum { F_INIT, F_LISTEN, F_REGMR, F_IALLREDUCE, F_IALLGATHER, F_IREDUCESCATTER, F_MAKEVDEVICE,
       F_COUNT };

static struct {
  int calls[F_COUNT];
  void **ctx_out;
  uint64_t commId;
  strand_logger_t logger;
  void *ctx;
  int dev;
  void *handle;
  void *comm;
  void *data;
  size_t size;
  int type;
  void *send;
  void *recv;
  size_t count;
  strand_datatype_t dtype;
  strand_redop_t op;
  void *send_mh;
  void *recv_mh;
  int nparts;
  strand_sge_v12_t parts[4];
  size_t bytes_per_rank, window_offset, window_bytes;
  strand_vprops_v12_t vprops;
} rec;

static strand_result_t init_rc;
static int ctx_pool[32];
static int next_ctx;
static int warn_count;
static char last_warn[512];
static int coll_obj, listen_obj, req_obj, mh_obj;

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

static strand_result_t mock_init(void **ctx, uint64_t commId, strand_logger_t logger) {
  rec.calls[F_INIT]++;
  rec.ctx_out = ctx;
  rec.commId = commId;
  rec.logger = logger;
  if (init_rc != STRAND_SUCCESS) return init_rc;
  *ctx = &ctx_pool[next_ctx++];
  return STRAND_SUCCESS;
}
static strand_result_t mock_devices(int *n) { *n = 1; return STRAND_SUCCESS; }

static void expected_props(int dev, strand_props_v12_t *p) {
  static char name[] = "mock-coll", pci[] = "/sys/devices/pci0000:00/0000:00:02.0";
  memset(p, 0, sizeof *p);
  p->name = name;
  p->pciPath = pci;
  p->guid = 0xfeedface00000000ull + (uint64_t)dev;
  p->ptrSupport = STRAND_PTR_HOST | STRAND_PTR_CUDA;
  p->regIsGlobal = 1;
  p->forceFlush = 1;
  p->speed = 200000;
  p->port = 7;
  p->latency = 2.25f;
  p->maxComms = 1024;
  p->maxRecvs = 1;
  p->netDeviceType = STRAND_DEV_HOST;
  p->netDeviceVersion = 3; /* not a real version: only there to catch an unwritten field */
  p->vProps.ndevs = 1;
  p->vProps.devs[0] = dev;
  p->maxP2pBytes = (size_t)1 << 34;
  p->maxCollBytes = (size_t)1 << 30;
  p->maxMultiRequestSize = 4;
  p->railId = 5;
  p->planeId = 6;
}
static strand_result_t mock_getProperties(int dev, strand_props_v12_t *props) {
  expected_props(dev, props);
  return STRAND_SUCCESS;
}
static strand_result_t mock_listen(void *ctx, int dev, void *handle, void **listenComm) {
  rec.calls[F_LISTEN]++;
  rec.ctx = ctx; rec.dev = dev; rec.handle = handle;
  *listenComm = &listen_obj;
  return STRAND_SUCCESS;
}
static strand_result_t mock_connect(void *handles[], int nranks, int rank, void *listenComm,
                                    void **collComm) {
  (void)handles; (void)nranks; (void)rank; (void)listenComm;
  *collComm = &coll_obj;
  return STRAND_SUCCESS;
}
static strand_result_t mock_reduceSupport(strand_datatype_t t, strand_redop_t o, int *s) {
  (void)t; (void)o; *s = 1; return STRAND_SUCCESS;
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
static strand_result_t mock_iallreduce(void *comm, void *send, void *recv, size_t count,
                                       strand_datatype_t dtype, strand_redop_t op, void *smh,
                                       void *rmh, void **request) {
  rec.calls[F_IALLREDUCE]++;
  rec.comm = comm; rec.send = send; rec.recv = recv; rec.count = count; rec.dtype = dtype;
  rec.op = op; rec.send_mh = smh; rec.recv_mh = rmh;
  *request = &req_obj;
  return STRAND_SUCCESS;
}
static strand_result_t mock_iallgather(void *comm, void *send, int nparts, strand_sge_v12_t *parts,
                                       size_t bpr, size_t woff, size_t wbytes, void *smh,
                                       void **request) {
  rec.calls[F_IALLGATHER]++;
  rec.comm = comm; rec.send = send; rec.nparts = nparts;
  for (int i = 0; i < nparts && i < 4; i++) rec.parts[i] = parts[i];
  rec.bytes_per_rank = bpr; rec.window_offset = woff; rec.window_bytes = wbytes;
  rec.send_mh = smh;
  *request = &req_obj;
  return STRAND_SUCCESS;
}
static strand_result_t mock_ireducescatter(void *comm, int nparts, strand_sge_v12_t *parts,
                                           void *recv, size_t bpr, size_t woff, size_t wbytes,
                                           strand_datatype_t dtype, strand_redop_t op, void *rmh,
                                           void **request) {
  rec.calls[F_IREDUCESCATTER]++;
  rec.comm = comm; rec.nparts = nparts; rec.recv = recv;
  for (int i = 0; i < nparts && i < 4; i++) rec.parts[i] = parts[i];
  rec.bytes_per_rank = bpr; rec.window_offset = woff; rec.window_bytes = wbytes;
  rec.dtype = dtype; rec.op = op; rec.recv_mh = rmh;
  *request = &req_obj;
  return STRAND_SUCCESS;
}
static strand_result_t mock_iflush(void *comm, void *data, int size, void *mh, void **request) {
  (void)comm; (void)data; (void)size; (void)mh; *request = NULL; return STRAND_SUCCESS;
}
static strand_result_t mock_test(void *request, int *done, int *size) {
  (void)request; (void)size; *done = 1; return STRAND_SUCCESS;
}
static strand_result_t mock_closeColl(void *c) { (void)c; return STRAND_SUCCESS; }
static strand_result_t mock_closeListen(void *c) { (void)c; return STRAND_SUCCESS; }
static strand_result_t mock_makeVDevice(int *d, strand_vprops_v12_t *props) {
  rec.calls[F_MAKEVDEVICE]++;
  rec.vprops = *props;
  *d = 7;
  return STRAND_SUCCESS;
}
static strand_result_t mock_finalize(void *ctx) { (void)ctx; return STRAND_SUCCESS; }

static const strand_collnet_t full_table = {
    .name = "strand-mock-coll",
    .init = mock_init,
    .devices = mock_devices,
    .getProperties = mock_getProperties,
    .listen = mock_listen,
    .connect = mock_connect,
    .reduceSupport = mock_reduceSupport,
    .regMr = mock_regMr,
    .regMrDmaBuf = mock_regMrDmaBuf,
    .deregMr = mock_deregMr,
    .iallreduce = mock_iallreduce,
    .iallgather = mock_iallgather,
    .ireducescatter = mock_ireducescatter,
    .iflush = mock_iflush,
    .test = mock_test,
    .closeColl = mock_closeColl,
    .closeListen = mock_closeListen,
    .makeVDevice = mock_makeVDevice,
    .finalize = mock_finalize,
};
static strand_collnet_t mock_table;
STRAND_COLLNET_PLUGIN(mock_table);

static int setup(void **state) {
  (void)state;
  memset(&rec, 0, sizeof rec);
  init_rc = STRAND_SUCCESS;
  next_ctx = 0;
  warn_count = 0;
  last_warn[0] = 0;
  mock_table = full_table;
  strand_export_collnet_reset_for_test();
  strand_export_collnet_fill_tables();
  return 0;
}

static strand_result_t core_init(int v, void **ctx) {
  switch (v) {
    case 6: return ncclCollNetPlugin_v6.init(mock_logger);
    case 7: return ncclCollNetPlugin_v7.init(mock_logger);
    case 8: return ncclCollNetPlugin_v8.init(mock_logger);
    case 9: return ncclCollNetPlugin_v9.init(mock_logger);
    case 10: return ncclCollNetPlugin_v10.init(mock_logger);
    case 11: return ncclCollNetPlugin_v11.init(ctx, 0x5151, mock_logger);
    case 12: return ncclCollNetPlugin_v12.init(ctx, 0x5151, mock_logger);
  }
  return STRAND_INTERNAL_ERROR;
}

static strand_result_t core_listen(int v, void *ctx, void **lc) {
  static char handle[STRAND_NET_HANDLE_MAXSIZE];
  switch (v) {
    case 6: return ncclCollNetPlugin_v6.listen(0, handle, lc);
    case 7: return ncclCollNetPlugin_v7.listen(0, handle, lc);
    case 8: return ncclCollNetPlugin_v8.listen(0, handle, lc);
    case 9: return ncclCollNetPlugin_v9.listen(0, handle, lc);
    case 10: return ncclCollNetPlugin_v10.listen(0, handle, lc);
    case 11: return ncclCollNetPlugin_v11.listen(ctx, 0, handle, lc);
    case 12: return ncclCollNetPlugin_v12.listen(ctx, 0, handle, lc);
  }
  return STRAND_INTERNAL_ERROR;
}

static void test_names_and_no_net(void **state) {
  (void)state;
  assert_string_equal(ncclCollNetPlugin_v6.name, "strand-mock-coll");
  assert_string_equal(ncclCollNetPlugin_v7.name, "strand-mock-coll");
  assert_string_equal(ncclCollNetPlugin_v8.name, "strand-mock-coll");
  assert_string_equal(ncclCollNetPlugin_v9.name, "strand-mock-coll");
  assert_string_equal(ncclCollNetPlugin_v10.name, "strand-mock-coll");
  assert_string_equal(ncclCollNetPlugin_v11.name, "strand-mock-coll");
  assert_string_equal(ncclCollNetPlugin_v12.name, "strand-mock-coll");
  assert_null(&ncclNetPlugin_v12);
}

static void test_members(void **state) {
  (void)state;
  assert_ptr_equal(ncclCollNetPlugin_v6.connect, mock_connect);
  assert_ptr_equal(ncclCollNetPlugin_v6.reduceSupport, mock_reduceSupport);
  assert_ptr_equal(ncclCollNetPlugin_v6.iflush, mock_iflush);
  assert_ptr_equal(ncclCollNetPlugin_v6.test, mock_test);
  assert_ptr_equal(ncclCollNetPlugin_v6.closeColl, mock_closeColl);
  assert_ptr_equal(ncclCollNetPlugin_v6.regMrDmaBuf, mock_regMrDmaBuf);
  assert_ptr_equal(ncclCollNetPlugin_v8.regMr, mock_regMr);
  assert_non_null(ncclCollNetPlugin_v8.iallgather);
  assert_ptr_not_equal((void *)ncclCollNetPlugin_v8.iallgather, (void *)mock_iallgather);
  assert_ptr_equal(ncclCollNetPlugin_v9.iallgather, mock_iallgather);
  assert_ptr_equal(ncclCollNetPlugin_v9.iallreduce, mock_iallreduce);
  assert_ptr_equal(ncclCollNetPlugin_v10.ireducescatter, mock_ireducescatter);
  assert_ptr_equal(ncclCollNetPlugin_v11.listen, mock_listen);
  assert_ptr_equal(ncclCollNetPlugin_v11.finalize, mock_finalize);
  assert_ptr_equal(ncclCollNetPlugin_v12.finalize, mock_finalize);
  assert_ptr_equal(ncclCollNetPlugin_v12.makeVDevice, mock_makeVDevice);

  mock_table.regMrDmaBuf = NULL;
  mock_table.iallgather = NULL;
  mock_table.ireducescatter = NULL;
  mock_table.iflush = NULL;
  mock_table.makeVDevice = NULL;
  strand_export_collnet_fill_tables();
  assert_null(ncclCollNetPlugin_v6.regMrDmaBuf);
  assert_null(ncclCollNetPlugin_v7.iflush);
  for (int v = 8; v <= 12; v++) {
    void *ag, *rs, *dma, *fl;
    switch (v) {
      case 8: ag = (void *)ncclCollNetPlugin_v8.iallgather; rs = (void *)ncclCollNetPlugin_v8.ireducescatter;
              dma = (void *)ncclCollNetPlugin_v8.regMrDmaBuf; fl = (void *)ncclCollNetPlugin_v8.iflush; break;
      case 9: ag = (void *)ncclCollNetPlugin_v9.iallgather; rs = (void *)ncclCollNetPlugin_v9.ireducescatter;
              dma = (void *)ncclCollNetPlugin_v9.regMrDmaBuf; fl = (void *)ncclCollNetPlugin_v9.iflush; break;
      case 10: ag = (void *)ncclCollNetPlugin_v10.iallgather; rs = (void *)ncclCollNetPlugin_v10.ireducescatter;
               dma = (void *)ncclCollNetPlugin_v10.regMrDmaBuf; fl = (void *)ncclCollNetPlugin_v10.iflush; break;
      case 11: ag = (void *)ncclCollNetPlugin_v11.iallgather; rs = (void *)ncclCollNetPlugin_v11.ireducescatter;
               dma = (void *)ncclCollNetPlugin_v11.regMrDmaBuf; fl = (void *)ncclCollNetPlugin_v11.iflush; break;
      default: ag = (void *)ncclCollNetPlugin_v12.iallgather; rs = (void *)ncclCollNetPlugin_v12.ireducescatter;
               dma = (void *)ncclCollNetPlugin_v12.regMrDmaBuf; fl = (void *)ncclCollNetPlugin_v12.iflush; break;
    }
    assert_null(ag);
    assert_null(rs);
    assert_null(dma);
    assert_null(fl);
  }
  assert_null(ncclCollNetPlugin_v9.makeVDevice);
  assert_null(ncclCollNetPlugin_v10.makeVDevice);
  assert_null(ncclCollNetPlugin_v11.makeVDevice);
  assert_null(ncclCollNetPlugin_v12.makeVDevice);
}

static void test_init_and_listen(void **state) {
  for (int v = 6; v <= 12; v++) {
    setup(state);
    void *ctx_a = NULL, *ctx_b = NULL, *lc = NULL;
    assert_int_equal(core_init(v, &ctx_a), STRAND_SUCCESS);
    assert_int_equal(strand_core_collnet_abi_version(), v);
    assert_int_equal(strand_core_abi_version(), 0); /* the net version is separate */
    assert_ptr_equal(rec.logger, mock_logger);
    assert_int_equal(core_init(v, &ctx_b), STRAND_SUCCESS);
    if (v <= 10) {
      /* Old cores: one shared context made with commId 0; later inits create nothing. */
      assert_int_equal(rec.calls[F_INIT], 1);
      assert_int_equal(rec.commId, 0);
      assert_int_equal(core_listen(v, NULL, &lc), STRAND_SUCCESS);
      assert_ptr_equal(rec.ctx, &ctx_pool[0]);
    } else {
      assert_int_equal(rec.calls[F_INIT], 2);
      assert_int_equal(rec.commId, 0x5151);
      assert_ptr_equal(rec.ctx_out, &ctx_b);
      assert_ptr_equal(ctx_b, &ctx_pool[1]);
      assert_int_equal(core_listen(v, ctx_b, &lc), STRAND_SUCCESS);
      assert_ptr_equal(rec.ctx, ctx_b);
    }
    assert_ptr_equal(lc, &listen_obj);
  }
}

static void test_listen_before_init_fails(void **state) {
  (void)state;
  init_rc = STRAND_SYSTEM_ERROR;
  assert_int_equal(core_init(9, NULL), STRAND_SYSTEM_ERROR);
  void *lc = NULL;
  warn_count = 0;
  assert_int_equal(core_listen(9, NULL, &lc), STRAND_INTERNAL_ERROR);
  assert_int_equal(rec.calls[F_LISTEN], 0);
  assert_int_equal(warn_count, 1);
  init_rc = STRAND_SUCCESS;
  assert_int_equal(core_init(9, NULL), STRAND_SUCCESS);
  assert_int_equal(core_listen(9, NULL, &lc), STRAND_SUCCESS);
}

#define CANARY 0xA5
#define CHECK_COMMON_PROPS(p, e)                        \
  do {                                                  \
    assert_ptr_equal((p)->name, (e)->name);             \
    assert_ptr_equal((p)->pciPath, (e)->pciPath);       \
    assert_true((p)->guid == (e)->guid);                \
    assert_int_equal((p)->ptrSupport, (e)->ptrSupport); \
    assert_int_equal((p)->speed, (e)->speed);           \
    assert_int_equal((p)->port, (e)->port);             \
    assert_true((p)->latency == (e)->latency);          \
    assert_int_equal((p)->maxComms, (e)->maxComms);     \
    assert_int_equal((p)->maxRecvs, (e)->maxRecvs);     \
  } while (0)

static void test_props(void **state) {
  (void)state;
  _Alignas(8) unsigned char buf[256];
  strand_props_v12_t e;
  expected_props(3, &e);

  memset(buf, CANARY, sizeof buf);
  strand_props_v6_t *p6 = (strand_props_v6_t *)buf;
  assert_int_equal(ncclCollNetPlugin_v6.getProperties(3, p6), STRAND_SUCCESS);
  CHECK_COMMON_PROPS(p6, &e);
  assert_int_equal(buf[sizeof *p6], CANARY);

  memset(buf, CANARY, sizeof buf);
  strand_props_v7_t *p7 = (strand_props_v7_t *)buf;
  assert_int_equal(ncclCollNetPlugin_v7.getProperties(3, p7), STRAND_SUCCESS);
  CHECK_COMMON_PROPS(p7, &e);
  assert_int_equal(p7->netDeviceType, e.netDeviceType);
  assert_int_equal(p7->netDeviceVersion, e.netDeviceVersion);
  assert_int_equal(buf[sizeof *p7], CANARY);

  memset(buf, CANARY, sizeof buf);
  strand_props_v8_t *p8 = (strand_props_v8_t *)buf;
  assert_int_equal(ncclCollNetPlugin_v8.getProperties(3, p8), STRAND_SUCCESS);
  CHECK_COMMON_PROPS(p8, &e);
  assert_int_equal(p8->regIsGlobal, 1);
  assert_int_equal(p8->netDeviceVersion, e.netDeviceVersion);
  assert_int_equal(buf[sizeof *p8], CANARY);

  for (int v = 9; v <= 10; v++) {
    memset(buf, CANARY, sizeof buf);
    strand_props_v9_t *p9 = (strand_props_v9_t *)buf;
    strand_result_t rc = v == 9 ? ncclCollNetPlugin_v9.getProperties(3, p9)
                                : ncclCollNetPlugin_v10.getProperties(3, p9);
    assert_int_equal(rc, STRAND_SUCCESS);
    CHECK_COMMON_PROPS(p9, &e);
    assert_int_equal(p9->regIsGlobal, 1);
    assert_int_equal(p9->forceFlush, 1);
    assert_int_equal(p9->netDeviceType, e.netDeviceType);
    assert_int_equal(p9->netDeviceVersion, e.netDeviceVersion);
    assert_int_equal(p9->vProps.ndevs, 1);
    assert_int_equal(p9->vProps.devs[0], 3);
    assert_true(p9->maxP2pBytes == e.maxP2pBytes);
    assert_true(p9->maxCollBytes == e.maxCollBytes);
    assert_int_equal(buf[sizeof *p9], CANARY);
  }

  memset(buf, CANARY, sizeof buf);
  strand_props_v11_t *p11 = (strand_props_v11_t *)buf;
  assert_int_equal(ncclCollNetPlugin_v11.getProperties(3, p11), STRAND_SUCCESS);
  CHECK_COMMON_PROPS(p11, &e);
  assert_int_equal(p11->forceFlush, 1);
  assert_int_equal(p11->vProps.devs[0], 3);
  assert_true(p11->maxCollBytes == e.maxCollBytes);
  assert_int_equal(p11->maxMultiRequestSize, 4);
  assert_int_equal(buf[sizeof *p11], CANARY);

  strand_props_v12_t p12;
  assert_int_equal(ncclCollNetPlugin_v12.getProperties(3, &p12), STRAND_SUCCESS);
  assert_int_equal(p12.planeId, 6);
}

static void test_regMr_int(void **state) {
  (void)state;
  assert_int_equal(core_init(6, NULL), STRAND_SUCCESS);
  char b[4];
  void *mh = NULL;
  assert_int_equal(ncclCollNetPlugin_v6.regMr(&coll_obj, b, 123456, STRAND_PTR_CUDA, &mh),
                   STRAND_SUCCESS);
  assert_true(rec.size == 123456);
  assert_ptr_equal(rec.comm, &coll_obj);
  assert_int_equal(rec.type, STRAND_PTR_CUDA);
  assert_ptr_equal(mh, &mh_obj);
  assert_int_equal(ncclCollNetPlugin_v7.regMr(&coll_obj, b, 0x7fffffff, STRAND_PTR_HOST, &mh),
                   STRAND_SUCCESS);
  assert_true(rec.size == 0x7fffffffu);
  warn_count = 0;
  assert_int_equal(ncclCollNetPlugin_v6.regMr(&coll_obj, b, -1, STRAND_PTR_HOST, &mh),
                   STRAND_INTERNAL_ERROR);
  assert_int_equal(ncclCollNetPlugin_v7.regMr(&coll_obj, b, INT32_MIN, STRAND_PTR_HOST, &mh),
                   STRAND_INTERNAL_ERROR);
  assert_int_equal(rec.calls[F_REGMR], 2);
  assert_int_equal(warn_count, 2);
}

static void test_iallreduce_int_count(void **state) {
  (void)state;
  assert_int_equal(core_init(8, NULL), STRAND_SUCCESS);
  char s[4], r[4];
  for (int v = 6; v <= 8; v++) {
    strand_result_t (*ar)(void *, void *, void *, int, strand_datatype_t, strand_redop_t, void *,
                          void *, void **) =
        v == 6 ? ncclCollNetPlugin_v6.iallreduce
               : v == 7 ? ncclCollNetPlugin_v7.iallreduce : ncclCollNetPlugin_v8.iallreduce;
    void *req = NULL;
    assert_int_equal(ar(&coll_obj, s, r, 1 << 30, STRAND_BFLOAT16, STRAND_MAX, &mh_obj, NULL, &req),
                     STRAND_SUCCESS);
    assert_true(rec.count == (size_t)1 << 30);
    assert_ptr_equal(rec.send, s);
    assert_ptr_equal(rec.recv, r);
    assert_int_equal(rec.dtype, STRAND_BFLOAT16);
    assert_int_equal(rec.op, STRAND_MAX);
    assert_ptr_equal(rec.send_mh, &mh_obj);
    assert_null(rec.recv_mh);
    assert_ptr_equal(req, &req_obj);
    int calls = rec.calls[F_IALLREDUCE];
    warn_count = 0;
    assert_int_equal(ar(&coll_obj, s, r, -3, STRAND_FLOAT32, STRAND_SUM, NULL, NULL, &req),
                     STRAND_INTERNAL_ERROR);
    assert_int_equal(rec.calls[F_IALLREDUCE], calls);
    assert_int_equal(warn_count, 1);
    assert_non_null(strstr(last_warn, "count"));
  }
  /* v9+ count is size_t and goes straight through. */
  void *req = NULL;
  assert_int_equal(ncclCollNetPlugin_v9.iallreduce(&coll_obj, s, r, (size_t)1 << 35, STRAND_INT8,
                                                   STRAND_MIN, NULL, NULL, &req),
                   STRAND_SUCCESS);
  assert_true(rec.count == (size_t)1 << 35);
}

static void test_sge_v8(void **state) {
  (void)state;
  assert_int_equal(core_init(8, NULL), STRAND_SUCCESS);
  char buf[8];
  strand_sge_v8_t sge[2] = {{.mhandle = &mh_obj, .address = buf, .size = 0xfffffff0u},
                            {.mhandle = NULL, .address = buf + 4, .size = 4}};
  void *req = NULL;
  assert_int_equal(ncclCollNetPlugin_v8.iallgather(&coll_obj, buf, 2, sge, 1 << 20, 4096, 8192,
                                                   &mh_obj, &req),
                   STRAND_SUCCESS);
  assert_int_equal(rec.calls[F_IALLGATHER], 1);
  assert_int_equal(rec.nparts, 2);
  assert_ptr_equal(rec.parts[0].mhandle, &mh_obj);
  assert_ptr_equal(rec.parts[0].address, buf);
  assert_true(rec.parts[0].size == 0xfffffff0u);
  assert_null(rec.parts[1].mhandle);
  assert_ptr_equal(rec.parts[1].address, buf + 4);
  assert_true(rec.parts[1].size == 4);
  assert_true(rec.bytes_per_rank == 1 << 20);
  assert_true(rec.window_offset == 4096);
  assert_true(rec.window_bytes == 8192);
  assert_ptr_equal(rec.send, buf);
  assert_ptr_equal(rec.send_mh, &mh_obj);
  assert_ptr_equal(req, &req_obj);

  req = NULL;
  assert_int_equal(ncclCollNetPlugin_v8.ireducescatter(&coll_obj, 1, sge, buf, 64, 0, 64,
                                                       STRAND_FLOAT16, STRAND_PROD, &mh_obj, &req),
                   STRAND_SUCCESS);
  assert_int_equal(rec.calls[F_IREDUCESCATTER], 1);
  assert_int_equal(rec.nparts, 1);
  assert_true(rec.parts[0].size == 0xfffffff0u);
  assert_ptr_equal(rec.parts[0].address, buf);
  assert_ptr_equal(rec.recv, buf);
  assert_int_equal(rec.dtype, STRAND_FLOAT16);
  assert_int_equal(rec.op, STRAND_PROD);
  assert_ptr_equal(rec.recv_mh, &mh_obj);
  assert_true(rec.window_bytes == 64);

  warn_count = 0;
  assert_int_equal(ncclCollNetPlugin_v8.iallgather(&coll_obj, buf, 0, sge, 1, 0, 1, NULL, &req),
                   STRAND_INTERNAL_ERROR);
  assert_int_equal(ncclCollNetPlugin_v8.ireducescatter(&coll_obj, 65, sge, buf, 1, 0, 1,
                                                       STRAND_INT8, STRAND_SUM, NULL, &req),
                   STRAND_INTERNAL_ERROR);
  assert_int_equal(rec.calls[F_IALLGATHER], 1);
  assert_int_equal(rec.calls[F_IREDUCESCATTER], 1);
  assert_int_equal(warn_count, 2);

  /* v9+: the SGE layout is the plugin's; arrays pass through unchanged. */
  strand_sge_v9_t sge9 = {.mhandle = NULL, .address = buf, .size = (size_t)1 << 33};
  assert_int_equal(ncclCollNetPlugin_v9.iallgather(&coll_obj, buf, 1, &sge9, 1, 0, 1, NULL, &req),
                   STRAND_SUCCESS);
  assert_true(rec.parts[0].size == (size_t)1 << 33);
}

static void test_make_vdevice(void **state) {
  (void)state;
  for (int v = 9; v <= 11; v++) {
    strand_result_t (*mk)(int *, strand_vprops_v9_t *) =
        v == 9 ? ncclCollNetPlugin_v9.makeVDevice
               : v == 10 ? ncclCollNetPlugin_v10.makeVDevice : ncclCollNetPlugin_v11.makeVDevice;
    strand_vprops_v9_t in = {.ndevs = 3, .devs = {2, 0, 1, 99}};
    int d = -1;
    memset(&rec.vprops, CANARY, sizeof rec.vprops);
    assert_int_equal(mk(&d, &in), STRAND_SUCCESS);
    assert_int_equal(d, 7);
    assert_int_equal(rec.vprops.ndevs, 3);
    assert_int_equal(rec.vprops.devs[0], 2);
    assert_int_equal(rec.vprops.devs[1], 0);
    assert_int_equal(rec.vprops.devs[2], 1);
    in.ndevs = 5;
    assert_int_equal(mk(&d, &in), STRAND_INTERNAL_ERROR);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup(test_names_and_no_net, setup),
      cmocka_unit_test_setup(test_members, setup),
      cmocka_unit_test_setup(test_init_and_listen, setup),
      cmocka_unit_test_setup(test_listen_before_init_fails, setup),
      cmocka_unit_test_setup(test_props, setup),
      cmocka_unit_test_setup(test_regMr_int, setup),
      cmocka_unit_test_setup(test_iallreduce_int_count, setup),
      cmocka_unit_test_setup(test_sge_v8, setup),
      cmocka_unit_test_setup(test_make_vdevice, setup),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
