/* Unit tests of the one-sided export layer (plugin_api/src/export_rma.c, export_gin.c).
 *
 * A mock RMA v14 table records calls; each test drives ncclRmaPlugin_v14/_v13 or
 * ncclGinPlugin_v12/_v11 as a core of that version would (NCCL 2.30's RMA loader and 2.28/2.29's
 * GIN proxy), and checks what reaches the plugin. No net or CollNet table is defined: linking must
 * still work and pull in no ncclNetPlugin_v* symbol. */
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

static struct {
  int init, connect, create, destroy, close, regmr, iput, iputsig, test, progress, query;
  void *connect_ctx;
  strand_rma_config_t cfg;
  void *coll_seen, *ctx_seen;
  int context;
  uint32_t rank;
  uint64_t src_off, dst_off, sig_off, sig_val;
  void *src_mh, *dst_mh, *sig_mh;
  uint32_t sig_op;
  bool strong;
} rec;

static int coll_obj, ctx_obj, mh_obj, req_obj, inst_obj;
static int warn_count;
static char last_warn[512];

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

static strand_result_t m_init(void **ctx, uint64_t commId, strand_logger_t logger) {
  (void)commId; (void)logger;
  rec.init++;
  *ctx = &inst_obj;
  return STRAND_SUCCESS;
}
static strand_result_t m_devices(int *n) { *n = 1; return STRAND_SUCCESS; }
static strand_result_t m_props(int dev, strand_props_v12_t *p) {
  static char name[] = "mock-rma";
  strand_props_init_host(p, dev);
  p->name = name;
  p->speed = 100000;
  p->netDeviceType = STRAND_DEV_GIN_PROXY;
  p->netDeviceVersion = STRAND_GIN_PROXY_VERSION;
  return STRAND_SUCCESS;
}
static strand_result_t m_listen(void *ctx, int dev, void *handle, void **l) {
  (void)ctx; (void)dev; (void)handle; *l = &inst_obj; return STRAND_SUCCESS;
}
static strand_result_t m_connect(void *ctx, void *handles[], int nranks, int rank, void *l, void **coll) {
  (void)handles; (void)nranks; (void)rank; (void)l;
  rec.connect++;
  rec.connect_ctx = ctx;
  *coll = &coll_obj;
  return STRAND_SUCCESS;
}
static strand_result_t m_create(void *coll, strand_rma_config_t *cfg, void **ctx) {
  rec.create++;
  rec.coll_seen = coll;
  rec.cfg = *cfg;
  *ctx = &ctx_obj;
  return STRAND_SUCCESS;
}
static strand_result_t m_regmr(void *coll, void *data, size_t size, int type, uint64_t flags, void **mh) {
  (void)data; (void)size; (void)type; (void)flags;
  rec.regmr++;
  rec.coll_seen = coll;
  *mh = &mh_obj;
  return STRAND_SUCCESS;
}
static strand_result_t m_regmr_dmabuf(void *coll, void *data, size_t size, int type, uint64_t off, int fd,
                                      uint64_t flags, void **mh) {
  (void)off; (void)fd;
  return m_regmr(coll, data, size, type, flags, mh);
}
static strand_result_t m_dereg(void *coll, void *mh) { (void)coll; (void)mh; return STRAND_SUCCESS; }
static strand_result_t m_destroy(void *ctx) { rec.destroy++; rec.ctx_seen = ctx; return STRAND_SUCCESS; }
static strand_result_t m_close(void *coll) { rec.close++; rec.coll_seen = coll; return STRAND_SUCCESS; }
static strand_result_t m_close_listen(void *l) { (void)l; return STRAND_SUCCESS; }
static strand_result_t m_iput(void *ctx, int context, uint64_t srcOff, void *srcMh, size_t size,
                              uint64_t dstOff, void *dstMh, uint32_t rank, void **req) {
  (void)size;
  rec.iput++;
  rec.ctx_seen = ctx;
  rec.context = context;
  rec.src_off = srcOff; rec.src_mh = srcMh; rec.dst_off = dstOff; rec.dst_mh = dstMh;
  rec.rank = rank;
  *req = &req_obj;
  return STRAND_SUCCESS;
}
static strand_result_t m_iputsig(void *ctx, int context, uint64_t srcOff, void *srcMh, size_t size,
                                 uint64_t dstOff, void *dstMh, uint32_t rank, uint64_t sigOff,
                                 void *sigMh, uint64_t sigVal, uint32_t sigOp, bool strong, void **req) {
  rec.iputsig++;
  m_iput(ctx, context, srcOff, srcMh, size, dstOff, dstMh, rank, req);
  rec.iput--;
  rec.sig_off = sigOff; rec.sig_mh = sigMh; rec.sig_val = sigVal; rec.sig_op = sigOp;
  rec.strong = strong;
  return STRAND_SUCCESS;
}
static strand_result_t m_iget(void *ctx, int context, uint64_t ro, void *rmh, size_t size, uint64_t lo,
                              void *lmh, uint32_t rank, void **req) {
  (void)ctx; (void)context; (void)ro; (void)rmh; (void)size; (void)lo; (void)lmh; (void)rank;
  *req = &req_obj;
  return STRAND_SUCCESS;
}
static strand_result_t m_iflush(void *ctx, int context, void *mh, uint32_t rank, void **req) {
  (void)ctx; (void)context; (void)mh; (void)rank;
  *req = &req_obj;
  return STRAND_SUCCESS;
}
static strand_result_t m_test(void *coll, void *req, int *done) {
  (void)req;
  rec.test++;
  rec.coll_seen = coll;
  *done = 1;
  return STRAND_SUCCESS;
}
static strand_result_t m_progress(void *ctx) { rec.progress++; rec.ctx_seen = ctx; return STRAND_SUCCESS; }
static strand_result_t m_query(void *ctx, bool *err) {
  rec.query++;
  rec.ctx_seen = ctx;
  *err = true;
  return STRAND_SUCCESS;
}
static strand_result_t m_finalize(void *ctx) { (void)ctx; return STRAND_SUCCESS; }

static strand_rma_t mock_table = {
    .name = "mock-rma", .init = m_init, .devices = m_devices, .getProperties = m_props,
    .listen = m_listen, .connect = m_connect, .createContext = m_create, .regMrSym = m_regmr,
    .regMrSymDmaBuf = m_regmr_dmabuf, .deregMrSym = m_dereg, .destroyContext = m_destroy,
    .closeColl = m_close, .closeListen = m_close_listen, .iput = m_iput, .iputSignal = m_iputsig,
    .iget = m_iget, .iflush = m_iflush, .test = m_test, .rmaProgress = m_progress,
    .queryLastError = m_query, .finalize = m_finalize,
};
STRAND_RMA_PLUGIN(mock_table);

static int setup(void **state) {
  (void)state;
  memset(&rec, 0, sizeof rec);
  warn_count = 0;
  last_warn[0] = 0;
  strand_export_rma_reset_for_test();
  strand_export_rma_fill_tables();
  strand_export_gin_fill_tables();
  return 0;
}

static void test_no_net_and_names(void **state) {
  (void)state;
  assert_null(&ncclNetPlugin_v12);
  assert_string_equal(ncclRmaPlugin_v14.name, "mock-rma");
  assert_string_equal(ncclRmaPlugin_v13.name, "mock-rma");
  assert_string_equal(ncclGinPlugin_v12.name, "mock-rma");
  assert_string_equal(ncclGinPlugin_v11.name, "mock-rma");
  assert_int_equal(strand_core_rma_abi_version(), 0);
}

/* Every slot of every exported table is filled (the mock has every member). */
static void test_all_members(void **state) {
  (void)state;
  const void *const *slots[] = {(const void *const *)&ncclRmaPlugin_v14,
                                (const void *const *)&ncclRmaPlugin_v13,
                                (const void *const *)&ncclGinPlugin_v12,
                                (const void *const *)&ncclGinPlugin_v11};
  size_t n[] = {sizeof ncclRmaPlugin_v14 / 8, sizeof ncclRmaPlugin_v13 / 8,
                sizeof ncclGinPlugin_v12 / 8, sizeof ncclGinPlugin_v11 / 8};
  for (size_t t = 0; t < 4; t++)
    for (size_t i = 0; i < n[t]; i++) assert_non_null(slots[t][i]);
}

static void test_v14_passthrough(void **state) {
  (void)state;
  void *ctx = NULL;
  assert_int_equal(ncclRmaPlugin_v14.init(&ctx, 7, mock_logger), STRAND_SUCCESS);
  assert_int_equal(strand_core_rma_abi_version(), 14);
  assert_ptr_equal(ncclRmaPlugin_v14.iput, m_iput);
  assert_ptr_equal(ncclRmaPlugin_v14.iputSignal, m_iputsig);
  assert_ptr_equal(ncclRmaPlugin_v14.createContext, m_create);
}

static void test_v13_adapters(void **state) {
  (void)state;
  void *inst = NULL, *coll = NULL, *ctx = NULL, *mh = NULL, *gh = NULL, *req = NULL;
  assert_int_equal(ncclRmaPlugin_v13.init(&inst, 7, mock_logger), STRAND_SUCCESS);
  assert_int_equal(strand_core_rma_abi_version(), 13);
  assert_int_equal(ncclRmaPlugin_v13.connect(inst, NULL, 2, 0, inst, &coll), STRAND_SUCCESS);
  strand_gin_config_v13_t cfg = {.nSignals = 8, .nCounters = 8, .nContexts = 3, .queueDepth = 16,
                                 .trafficClass = 5};
  strand_dev_handle_v11_t dh, *devh = &dh;
  assert_int_equal(ncclRmaPlugin_v13.createContext(coll, &cfg, &ctx, &devh), STRAND_SUCCESS);
  assert_null(devh);
  assert_ptr_equal(ctx, &ctx_obj);
  assert_int_equal(rec.cfg.nContexts, 3);
  assert_int_equal(rec.cfg.trafficClass, 5);
  assert_int_equal(rec.cfg.rankStride, 1);
  assert_int_equal(ncclRmaPlugin_v13.createContext(coll, NULL, &ctx, &devh), STRAND_INVALID_ARGUMENT);
  assert_int_equal(ncclRmaPlugin_v13.regMrSym(coll, &mh_obj, 64, STRAND_PTR_HOST, 0, &mh, &gh),
                   STRAND_SUCCESS);
  assert_ptr_equal(gh, mh);
  assert_int_equal(ncclRmaPlugin_v13.regMrSymDmaBuf(coll, &mh_obj, 64, STRAND_PTR_HOST, 0, 3, 0, &mh, &gh),
                   STRAND_SUCCESS);
  assert_ptr_equal(gh, mh);
  assert_int_equal(ncclRmaPlugin_v13.iputSignal(ctx, 2, 1, mh, 8, 2, gh, 1, 16, gh, 5,
                                                STRAND_GIN_SIGNAL_OP_ADD, &req), STRAND_SUCCESS);
  assert_true(rec.strong); /* every v13 signal is strong */
  assert_int_equal(rec.context, 2);
  assert_int_equal(rec.sig_val, 5);
  assert_int_equal(rec.sig_op, STRAND_GIN_SIGNAL_OP_ADD);
  assert_ptr_equal(ncclRmaPlugin_v13.ginProgress, m_progress);
}

/* A v11 core: connect gives a wrapper; iput/test/progress reach the plugin's context and coll. */
static void test_v11_proxy(void **state) {
  (void)state;
  void *inst = NULL, *coll = NULL, *mh = NULL, *gh = NULL, *req = NULL;
  int foreign;
  assert_int_equal(ncclGinPlugin_v11.init(&inst, 7, mock_logger), STRAND_SUCCESS);
  assert_int_equal(strand_core_rma_abi_version(), 11);
  /* NCCL passes its own context as connect's ctx: it must reach the plugin untouched. */
  assert_int_equal(ncclGinPlugin_v11.connect(&foreign, NULL, 2, 1, inst, &coll), STRAND_SUCCESS);
  assert_ptr_equal(rec.connect_ctx, &foreign);
  assert_non_null(coll);
  assert_ptr_not_equal(coll, &coll_obj); /* the wrapper, not the plugin's collComm */
  assert_int_equal(rec.create, 1);
  assert_int_equal(rec.cfg.nContexts, 1);
  assert_int_equal(ncclGinPlugin_v11.regMrSym(coll, &mh_obj, 64, STRAND_PTR_HOST, 0, &mh, &gh), STRAND_SUCCESS);
  assert_ptr_equal(rec.coll_seen, &coll_obj);
  assert_ptr_equal(gh, &mh_obj);
  assert_int_equal(ncclGinPlugin_v11.iput(coll, 8, gh, 16, 24, gh, 1, &req), STRAND_SUCCESS);
  assert_ptr_equal(rec.ctx_seen, &ctx_obj);
  assert_int_equal(rec.context, 0);
  assert_int_equal(rec.dst_off, 24);
  assert_ptr_equal(req, &req_obj);
  assert_int_equal(ncclGinPlugin_v11.iputSignal(coll, 0, gh, 0, 0, gh, 1, 8, gh, 0,
                                                STRAND_GIN_SIGNAL_OP_INC, &req), STRAND_SUCCESS);
  assert_true(rec.strong);
  int done = 0;
  assert_int_equal(ncclGinPlugin_v11.test(coll, req, &done), STRAND_SUCCESS);
  assert_int_equal(done, 1);
  assert_ptr_equal(rec.coll_seen, &coll_obj);
  assert_int_equal(ncclGinPlugin_v11.ginProgress(coll), STRAND_SUCCESS);
  assert_ptr_equal(rec.ctx_seen, &ctx_obj);
  /* createContext is not used in proxy mode, but queryLastError works through what it returns. */
  void *gctx = NULL;
  strand_dev_handle_v11_t dh, *devh = &dh;
  assert_int_equal(ncclGinPlugin_v11.createContext(coll, 4, 4, &gctx, &devh), STRAND_SUCCESS);
  assert_null(devh);
  bool err = false;
  assert_int_equal(ncclGinPlugin_v11.queryLastError(gctx, &err), STRAND_SUCCESS);
  assert_true(err);
  assert_ptr_equal(rec.ctx_seen, &ctx_obj);
  assert_int_equal(ncclGinPlugin_v11.destroyContext(gctx), STRAND_SUCCESS);
  assert_int_equal(ncclGinPlugin_v11.destroyContext(gctx), STRAND_INVALID_ARGUMENT);
  assert_int_equal(ncclGinPlugin_v11.closeColl(coll), STRAND_SUCCESS);
  assert_int_equal(rec.destroy, 1);
  assert_int_equal(rec.close, 1);
  assert_ptr_equal(rec.coll_seen, &coll_obj);
  /* The closed wrapper is refused (not read) by every call. */
  warn_count = 0;
  assert_int_equal(ncclGinPlugin_v11.iput(coll, 0, gh, 8, 0, gh, 1, &req), STRAND_INVALID_ARGUMENT);
  assert_int_equal(ncclGinPlugin_v11.test(coll, req, &done), STRAND_INVALID_ARGUMENT);
  assert_int_equal(ncclGinPlugin_v11.closeColl(coll), STRAND_INVALID_ARGUMENT);
  assert_int_equal(warn_count, 3);
  assert_non_null(strstr(last_warn, "not a live collComm"));
}

/* A v12 core: nConnections contexts, connectionId picks one, out of range refused. */
static void test_v12_connections(void **state) {
  (void)state;
  void *inst = NULL, *coll = NULL, *req = NULL;
  assert_int_equal(ncclGinPlugin_v12.init(&inst, 7, mock_logger), STRAND_SUCCESS);
  assert_int_equal(ncclGinPlugin_v12.connect(inst, NULL, 2, 0, 4, 64, inst, &coll), STRAND_SUCCESS);
  assert_int_equal(rec.cfg.nContexts, 4);
  assert_int_equal(ncclGinPlugin_v12.iput(coll, 0, &mh_obj, 8, 0, &mh_obj, 1, 3, &req), STRAND_SUCCESS);
  assert_int_equal(rec.context, 3);
  assert_int_equal(ncclGinPlugin_v12.iputSignal(coll, 0, &mh_obj, 8, 0, &mh_obj, 1, 0, &mh_obj, 2,
                                                STRAND_GIN_SIGNAL_OP_ADD, 1, &req), STRAND_SUCCESS);
  assert_int_equal(rec.context, 1);
  assert_true(rec.strong);
  warn_count = 0;
  assert_int_equal(ncclGinPlugin_v12.iput(coll, 0, &mh_obj, 8, 0, &mh_obj, 1, 4, &req), STRAND_INVALID_ARGUMENT);
  assert_int_equal(ncclGinPlugin_v12.iput(coll, 0, &mh_obj, 8, 0, &mh_obj, 1, -1, &req), STRAND_INVALID_ARGUMENT);
  assert_int_equal(warn_count, 2);
  assert_non_null(strstr(last_warn, "connectionId -1"));
  assert_int_equal(ncclGinPlugin_v12.connect(inst, NULL, 2, 0, 0, 64, inst, &coll), STRAND_INVALID_ARGUMENT);
  assert_null(coll);
}

/* v11/v12 cores read the v11 properties layout. */
static void test_v11_props(void **state) {
  (void)state;
  strand_props_v11_t p;
  memset(&p, 0xa5, sizeof p);
  assert_int_equal(ncclGinPlugin_v11.getProperties(0, &p), STRAND_SUCCESS);
  assert_string_equal(p.name, "mock-rma");
  assert_int_equal(p.netDeviceType, STRAND_DEV_GIN_PROXY);
  assert_int_equal(p.netDeviceVersion, STRAND_GIN_PROXY_VERSION);
  assert_int_equal(p.speed, 100000);
  assert_int_equal(p.vProps.ndevs, 1);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup(test_no_net_and_names, setup),
      cmocka_unit_test_setup(test_all_members, setup),
      cmocka_unit_test_setup(test_v14_passthrough, setup),
      cmocka_unit_test_setup(test_v13_adapters, setup),
      cmocka_unit_test_setup(test_v11_proxy, setup),
      cmocka_unit_test_setup(test_v12_connections, setup),
      cmocka_unit_test_setup(test_v11_props, setup),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
