/* Unit tests of strand-conform's pieces that need no running plugin: the NCCL_NET_PLUGIN grammar
 * and rewrite rule, symbol probing and version choice (dummy plugin), the upward adaptation of
 * properties, patterns and guard bytes, --only/--skip selection, and the report's counts. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "conform_internal.h"

static void test_candidates(void **state) {
  (void)state;
  char c[20][256];
  assert_int_equal(conform_plugin_candidates(NULL, c, 20), 1);
  assert_string_equal(c[0], "libnccl-net.so");
  assert_int_equal(conform_plugin_candidates("none", c, 20), 0);
  assert_int_equal(conform_plugin_candidates("NoNe", c, 20), 0);
  assert_int_equal(conform_plugin_candidates("a,,b,", c, 20), 2);
  assert_string_equal(c[0], "a");
  assert_string_equal(c[1], "b");
  assert_int_equal(conform_plugin_candidates("1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16", c, 20), 14);
  char longitem[300];
  memset(longitem, 'x', 255);
  longitem[255] = '\0';
  char list[400];
  snprintf(list, sizeof list, "%s,ok", longitem);
  assert_int_equal(conform_plugin_candidates(list, c, 20), 1);
  assert_string_equal(c[0], "ok");
}

static void test_rewrite(void **state) {
  (void)state;
  char buf[300];
  assert_string_equal(conform_plugin_rewrite("strand-socket", buf, sizeof buf), "libnccl-net-strand-socket.so");
  assert_null(conform_plugin_rewrite("libfoo.so", buf, sizeof buf));
  assert_null(conform_plugin_rewrite("./x.so", buf, sizeof buf));
  assert_null(conform_plugin_rewrite("/abs/libnccl-net-x.so", buf, sizeof buf));
  assert_string_equal(conform_plugin_rewrite("libfoo", buf, sizeof buf), "libnccl-net-libfoo.so");
  assert_string_equal(conform_plugin_rewrite("foo.so", buf, sizeof buf), "libnccl-net-foo.so.so");
}

static void test_load_dummy(void **state) {
  (void)state;
  const char *dummy = getenv("CONFORM_DUMMY");
  assert_non_null(dummy);
  static conform_plugin_t p;
  char err[2048];
  unsetenv("NCCL_NET");
  assert_int_equal(conform_plugin_load(dummy, 0, &p, err, sizeof err), 0);
  assert_int_equal(p.n_net_versions, 2);
  assert_int_equal(p.net_versions[0], 12);
  assert_int_equal(p.net_versions[1], 9);
  assert_int_equal(p.version, 12);
  assert_false(p.has_collnet);
  /* --abi v9: the adapted table converts properties with the core's defaults */
  assert_int_equal(conform_plugin_select(&p, 9, err, sizeof err), 0);
  assert_int_equal(p.version, 9);
  strand_props_v12_t pr;
  memset(&pr, 0x77, sizeof pr);
  assert_int_equal(p.net.getProperties(0, &pr), STRAND_SUCCESS);
  assert_string_equal(pr.name, "dummy0");
  assert_int_equal(pr.maxMultiRequestSize, 1);
  assert_int_equal(pr.railId, -1);
  assert_int_equal(pr.planeId, -1);
  assert_null(p.net.setNetAttr);
  assert_non_null(p.net.finalize);
  /* v9 init is once per load and leaves the ctx NULL */
  void *ctx = (void *)0x1234;
  ctx = NULL;
  strand_comm_config_t cfg = {-1};
  assert_int_equal(p.net.init(&ctx, 1, &cfg, NULL, NULL), STRAND_SUCCESS);
  assert_null(ctx);
  assert_int_equal(p.net.finalize(ctx), STRAND_SUCCESS);
  /* --abi v8 is not exported */
  assert_int_not_equal(conform_plugin_select(&p, 8, err, sizeof err), 0);
  /* NCCL_NET must match the name, case-insensitively */
  setenv("NCCL_NET", "CONFORMDUMMY", 1);
  static conform_plugin_t q;
  assert_int_equal(conform_plugin_load(dummy, 0, &q, err, sizeof err), 0);
  setenv("NCCL_NET", "IB", 1);
  assert_int_not_equal(conform_plugin_load(dummy, 0, &q, err, sizeof err), 0);
  unsetenv("NCCL_NET");
  /* NCCL_NET_PLUGIN list: a missing first candidate, then the dummy */
  char list[4200];
  snprintf(list, sizeof list, "/nonexistent/libx.so,%s", dummy);
  setenv("NCCL_NET_PLUGIN", list, 1);
  assert_int_equal(conform_plugin_load(NULL, 0, &q, err, sizeof err), 0);
  assert_string_equal(q.candidate, dummy);
  setenv("NCCL_NET_PLUGIN", "none", 1);
  assert_int_not_equal(conform_plugin_load(NULL, 0, &q, err, sizeof err), 0);
  unsetenv("NCCL_NET_PLUGIN");
}

static void test_props_fields(void **state) {
  (void)state;
  const conform_field_t *f;
  assert_int_equal(conform_props_fields(6, &f), 9);
  assert_int_equal(conform_props_fields(12, &f), 19);
  assert_int_equal(conform_props_size(9), 104);
  assert_int_equal(conform_props_size(11), 112);
  assert_int_equal(conform_props_size(12), 128);
}

static void test_patterns(void **state) {
  (void)state;
  size_t n = 100003;
  unsigned char *b = malloc(n);
  conform_fill(b, n, 42);
  assert_int_equal(conform_verify(b, n, 42), -1);
  assert_int_not_equal(conform_verify(b, n, 43), -1);
  b[77777] ^= 1;
  assert_int_equal(conform_verify(b, n, 42), 77777);
  free(b);
  assert_int_not_equal(conform_seed(0, 1, 5), conform_seed(1, 0, 5));
  conform_buf_t g;
  assert_int_equal(conform_buf_alloc(&g, 1000, 3), 0);
  long long bad = 0;
  memset(g.data, 1, 1000);
  assert_true(conform_buf_guards_ok(&g, &bad));
  g.data[1000] = 0;
  assert_false(conform_buf_guards_ok(&g, &bad));
  assert_int_equal(bad, 1000);
  conform_buf_free(&g);
}

static void test_selection(void **state) {
  (void)state;
  conform_opts_t o;
  memset(&o, 0, sizeof o);
  const conform_check_t *x = conform_find_check("xfer.ordering");
  const conform_check_t *p = conform_find_check("props.speed-positive");
  assert_non_null(x);
  assert_non_null(p);
  assert_true(conform_check_selected(x, &o));
  o.only[o.n_only++] = "xfer";
  assert_true(conform_check_selected(x, &o));
  assert_false(conform_check_selected(p, &o));
  o.only[o.n_only++] = "props.s*";
  assert_true(conform_check_selected(p, &o));
  o.skip[o.n_skip++] = "*.ordering";
  assert_false(conform_check_selected(x, &o));
  /* ids are unique */
  const conform_check_t **all;
  int n = conform_all_checks(&all);
  for (int i = 0; i < n; i++)
    for (int j = i + 1; j < n; j++) assert_string_not_equal(all[i]->id, all[j]->id);
}

static void test_report_counts(void **state) {
  (void)state;
  conform_row_t rows[3];
  memset(rows, 0, sizeof rows);
  rows[0].status = CONFORM_PASS;
  rows[1].status = CONFORM_FAIL;
  rows[2].status = CONFORM_SKIP;
  conform_run_result_t run;
  memset(&run, 0, sizeof run);
  run.rows = rows;
  run.n_rows = 3;
  int a, b, c;
  conform_report_counts(&run, &a, &b, &c);
  assert_int_equal(a, 1);
  assert_int_equal(b, 1);
  assert_int_equal(c, 1);
}

/* --compact: failures first and in full, then one line per distinct skip reason with its count,
 * versions and ids (a family's ids share its prefix), most frequent first; passes only counted. */
static void test_report_compact(void **state) {
  (void)state;
  static const conform_check_t chk[] = {
      {.id = "props.make-vdevice", .clause = "c0"}, {.id = "reg.cuda", .clause = "c1"},
      {.id = "reg.dmabuf", .clause = "c2"},         {.id = "unpack.handle", .clause = "c3"},
      {.id = "unpack.lockstep", .clause = "c4"},    {.id = "xfer.sizes", .clause = "§6.4 sizes"},
      {.id = "unpack.integrity", .clause = "c6"},   {.id = "life.set-net-attr", .clause = "c7"}};
  conform_row_t rows[10];
  memset(rows, 0, sizeof rows);
  const char *na = "not applicable: no unpack device";
  struct { int chk, version; conform_status_t st; const char *msg; } spec[10] = {
      {0, 12, CONFORM_SKIP, "makeVDevice is NULL"}, {1, 12, CONFORM_SKIP, "no GPU visible"},
      {2, 12, CONFORM_SKIP, "no GPU visible"},      {3, 12, CONFORM_SKIP, na},
      {4, 12, CONFORM_SKIP, na},                    {5, 12, CONFORM_FAIL, "message truncated"},
      {6, 12, CONFORM_SKIP, na},                    {7, 12, CONFORM_PASS, ""},
      {3, 11, CONFORM_SKIP, na},                    {7, 11, CONFORM_PASS, ""}};
  for (int i = 0; i < 10; i++) {
    rows[i].check = &chk[spec[i].chk];
    rows[i].version = spec[i].version;
    rows[i].status = spec[i].st;
    snprintf(rows[i].msg, sizeof rows[i].msg, "%s", spec[i].msg);
  }
  conform_run_result_t run;
  memset(&run, 0, sizeof run);
  run.rows = rows;
  run.n_rows = 10;
  snprintf(run.plugin_desc, sizeof run.plugin_desc, "plugin \"x\" from x.so");
  bool old_compact = conform_opts.compact;
  conform_opts.compact = true;
  char path[] = "/tmp/strand-compact-XXXXXX";
  int fd = mkstemp(path);
  assert_true(fd >= 0);
  fflush(stdout);
  int saved = dup(1);
  dup2(fd, 1);
  int rc = conform_report_write(&run);
  fflush(stdout);
  dup2(saved, 1);
  close(saved);
  conform_opts.compact = old_compact;
  char text[4096] = {0};
  lseek(fd, 0, SEEK_SET);
  ssize_t got = read(fd, text, sizeof text - 1);
  close(fd);
  unlink(path);
  assert_true(got > 0);
  printf("%s", text);
  assert_int_equal(rc, 1);
  const char *fail = strstr(text, "FAIL  v12   xfer.sizes");
  const char *g1 = strstr(text, "SKIP   4  v12,v11  unpack.{handle,lockstep,integrity}: "
                                "not applicable: no unpack device\n");
  const char *g2 = strstr(text, "SKIP   2  v12  reg.{cuda,dmabuf}: no GPU visible\n");
  const char *g3 = strstr(text, "SKIP   1  v12  props.make-vdevice: makeVDevice is NULL\n");
  assert_non_null(fail);
  assert_non_null(strstr(fail, "message truncated"));
  assert_non_null(g1);
  assert_non_null(g2);
  assert_non_null(g3);
  assert_true(fail < g1 && g1 < g2 && g2 < g3);
  assert_null(strstr(text, "life.set-net-attr")); /* passes are only counted */
  assert_non_null(strstr(text, "2 passed, 1 failed, 7 skipped\n"));
  /* one line per reason: 3 skip lines in all */
  int nskip = 0;
  for (const char *q = text; (q = strstr(q, "SKIP ")) != NULL; q++) nskip++;
  assert_int_equal(nskip, 3);
}

/* The per-check output capture keeps everything up to the cap, then the head and the last lines
 * with a note of what was cut. */
static void test_capture(void **state) {
  (void)state;
  conform_capture_t cap = {0};
  assert_null(conform_capture_take(&cap));
  conform_capture_add(&cap, "one\n", 4);
  conform_capture_add(&cap, "two\n", 4);
  char *s = conform_capture_take(&cap);
  assert_string_equal(s, "one\ntwo\n");
  free(s);
  /* 10000 numbered lines of 20 bytes = 200000 bytes, fed in odd-sized chunks */
  char *all = malloc(200001);
  for (int i = 0; i < 10000; i++) snprintf(all + i * 20, 21, "line %014d\n", i);
  for (size_t off = 0; off < 200000;) {
    size_t n = 200000 - off < 777 ? 200000 - off : 777;
    conform_capture_add(&cap, all + off, n);
    off += n;
  }
  s = conform_capture_take(&cap);
  assert_true(strlen(s) <= CONFORM_LOG_CAP + 64);
  assert_true(strncmp(s, "line 00000000000000\n", 20) == 0);
  assert_non_null(strstr(s, " bytes cut ...\n"));
  size_t len = strlen(s);
  assert_string_equal(s + len - 20, "line 00000000009999\n");
  /* the tail starts on a whole line and the note's count adds up */
  const char *note = strstr(s, "... ");
  const char *tail = strchr(note, '\n') + 1;
  assert_true(strncmp(tail, "line ", 5) == 0);
  size_t cut = strtoull(note + 4, NULL, 10);
  assert_int_equal(CONFORM_LOG_CAP / 2 + cut + strlen(tail), 200000);
  free(s);
  /* one chunk larger than the whole cap */
  conform_capture_add(&cap, all, 200000);
  s = conform_capture_take(&cap);
  assert_string_equal(s + strlen(s) - 20, "line 00000000009999\n");
  free(s);
  free(all);
}

/* ------------------------------------------------------------------ one-sided adapters */
/* A fake GIN v11 / v12 / v13 table that records what the adapters of upgrade.c hand it. */
static struct {
  void *cc, *mh, *gh, *ginctx;
  uint64_t srcOff, dstOff, sigOff, value;
  uint32_t op, rank;
  int context, connectionId, nContexts, trafficClass, nConnections, queueDepth;
  int ndev, devType, deregs;
  void *dereg_mh;
  bool finalized;
} fk;
static char fk_cc_obj, fk_ctx_obj, fk_ginctx_obj, fk_mh_obj, fk_gh_obj, fk_req_obj;

static strand_result_t fk_init(void **ctx, uint64_t id, strand_logger_t l) {
  (void)id, (void)l;
  *ctx = &fk_ctx_obj;
  fk.finalized = false;
  return STRAND_SUCCESS;
}
static strand_result_t fk_devices(int *n) { *n = fk.ndev; return STRAND_SUCCESS; }
static strand_result_t fk_props11(int dev, strand_props_v11_t *p) {
  (void)dev;
  memset(p, 0, sizeof *p);
  p->name = "fake";
  p->netDeviceType = fk.devType;
  p->maxP2pBytes = 12345;
  return STRAND_SUCCESS;
}
static strand_result_t fk_props12(int dev, strand_props_v12_t *p) {
  (void)dev;
  memset(p, 0, sizeof *p);
  p->name = "fake";
  p->netDeviceType = fk.devType;
  return STRAND_SUCCESS;
}
static strand_result_t fk_reg(void *cc, void *d, size_t s, int t, uint64_t f, void **mh, void **gh) {
  (void)d, (void)s, (void)t, (void)f;
  fk.cc = cc;
  *mh = &fk_mh_obj;
  *gh = &fk_gh_obj;
  return STRAND_SUCCESS;
}
static strand_result_t fk_dereg(void *cc, void *mh) {
  (void)cc;
  fk.deregs++;
  fk.dereg_mh = mh;
  return STRAND_SUCCESS;
}
static strand_result_t fk_put11(void *cc, uint64_t so, void *smh, size_t size, uint64_t doff, void *dmh,
                                uint32_t rank, void **req) {
  (void)size;
  fk.cc = cc, fk.srcOff = so, fk.dstOff = doff, fk.rank = rank, fk.mh = smh, fk.gh = dmh;
  *req = &fk_req_obj;
  return STRAND_SUCCESS;
}
static strand_result_t fk_put12(void *cc, uint64_t so, void *smh, size_t size, uint64_t doff, void *dmh,
                                uint32_t rank, int conn, void **req) {
  fk.connectionId = conn;
  return fk_put11(cc, so, smh, size, doff, dmh, rank, req);
}
static strand_result_t fk_sig11(void *cc, uint64_t so, void *smh, size_t size, uint64_t doff, void *dmh,
                                uint32_t rank, uint64_t sigoff, void *sigmh, uint64_t v, uint32_t op, void **req) {
  (void)sigmh;
  fk.sigOff = sigoff, fk.value = v, fk.op = op;
  return fk_put11(cc, so, smh, size, doff, dmh, rank, req);
}
static strand_result_t fk_connect12(void *ctx, void *h[], int n, int r, int nconn, int qd, void *lc, void **cc) {
  (void)ctx, (void)h, (void)n, (void)r, (void)lc;
  fk.nConnections = nconn, fk.queueDepth = qd;
  *cc = &fk_cc_obj;
  return STRAND_SUCCESS;
}
static strand_result_t fk_create13(void *cc, strand_gin_config_v13_t *cfg, void **gctx, strand_dev_handle_v11_t **dh) {
  fk.cc = cc, fk.nContexts = cfg->nContexts, fk.trafficClass = cfg->trafficClass;
  *gctx = &fk_ginctx_obj;
  *dh = NULL;
  return STRAND_SUCCESS;
}
static strand_result_t fk_put13(void *gctx, int context, uint64_t so, void *smh, size_t size, uint64_t doff,
                                void *dmh, uint32_t rank, void **req) {
  fk.ginctx = gctx, fk.context = context;
  return fk_put11(fk.cc, so, smh, size, doff, dmh, rank, req);
}
static strand_result_t fk_sig13(void *gctx, int context, uint64_t so, void *smh, size_t size, uint64_t doff,
                                void *dmh, uint32_t rank, uint64_t sigoff, void *sigmh, uint64_t v, uint32_t op,
                                void **req) {
  fk.ginctx = gctx, fk.context = context;
  return fk_sig11(fk.cc, so, smh, size, doff, dmh, rank, sigoff, sigmh, v, op, req);
}
static strand_result_t fk_finalize(void *ctx) {
  (void)ctx;
  fk.finalized = true;
  return STRAND_SUCCESS;
}

static void test_rma_adapt_v11_v12(void **state) {
  (void)state;
  static strand_gin_v12_t t12;
  memset(&t12, 0, sizeof t12);
  t12.name = "fake12", t12.init = fk_init, t12.devices = fk_devices, t12.getProperties = fk_props11;
  t12.connect = fk_connect12, t12.regMrSym = fk_reg, t12.deregMrSym = fk_dereg, t12.iput = fk_put12;
  t12.finalize = fk_finalize;
  static conform_plugin_t p;
  memset(&p, 0, sizeof p);
  p.raw_rma = &t12, p.rma_version = 12;
  conform_upgrade_rma(&p);
  assert_true(p.has_rma);
  assert_null(p.rma.iget);
  assert_null(p.rma.iflush);
  memset(&fk, 0, sizeof fk);
  fk.devType = STRAND_DEV_GIN_PROXY;
  strand_props_v12_t pr;
  assert_int_equal(p.rma.getProperties(0, &pr), STRAND_SUCCESS);
  assert_int_equal(pr.netDeviceType, STRAND_DEV_GIN_PROXY);
  assert_int_equal(pr.maxP2pBytes, 12345);
  void *cc = NULL, *rctx = NULL, *mh = NULL, *req = NULL;
  assert_int_equal(p.rma.connect(NULL, NULL, 2, 0, NULL, &cc), STRAND_SUCCESS);
  assert_int_equal(fk.nConnections, 1);
  assert_true(fk.queueDepth > 0);
  strand_rma_config_v14_t cfg = {1, 0, 1};
  assert_int_equal(p.rma.createContext(cc, &cfg, &rctx), STRAND_SUCCESS);
  assert_ptr_equal(rctx, cc); /* proxy mode: no contexts, the collComm carries the data path */
  assert_int_equal(p.rma.regMrSym(cc, &fk, 64, STRAND_PTR_HOST, 0, &mh), STRAND_SUCCESS);
  assert_non_null(mh);
  assert_int_equal(p.rma.iput(rctx, 0, 8, mh, 16, 24, mh, 1, &req), STRAND_SUCCESS);
  assert_ptr_equal(fk.cc, &fk_cc_obj);
  assert_ptr_equal(fk.mh, &fk_gh_obj); /* the ginHandle reaches the data path */
  assert_ptr_equal(fk.gh, &fk_gh_obj);
  assert_int_equal(fk.connectionId, 0);
  assert_int_equal(fk.srcOff, 8);
  assert_int_equal(fk.dstOff, 24);
  assert_int_equal(fk.rank, 1);
  /* dereg gets the mhandle; a second dereg of the same handle reaches the plugin again */
  assert_int_equal(p.rma.deregMrSym(cc, mh), STRAND_SUCCESS);
  assert_ptr_equal(fk.dereg_mh, &fk_mh_obj);
  assert_int_equal(p.rma.deregMrSym(cc, mh), STRAND_SUCCESS);
  assert_int_equal(fk.deregs, 2);
  assert_ptr_equal(fk.dereg_mh, &fk_mh_obj);
  /* a pointer that is no adapter handle reaches the plugin unchanged */
  static char garbage[64];
  p.rma.deregMrSym(cc, garbage);
  assert_ptr_equal(fk.dereg_mh, garbage);

  static strand_gin_v11_t t11;
  memset(&t11, 0, sizeof t11);
  t11.name = "fake11", t11.getProperties = fk_props11, t11.regMrSym = fk_reg, t11.iputSignal = fk_sig11;
  p.raw_rma = &t11, p.rma_version = 11;
  conform_upgrade_rma(&p);
  assert_int_equal(p.rma.regMrSym(&fk_cc_obj, &fk, 64, STRAND_PTR_HOST, 0, &mh), STRAND_SUCCESS);
  assert_int_equal(p.rma.iputSignal(&fk_cc_obj, 0, 0, mh, 0, 0, mh, 0, 40, mh, 7, STRAND_GIN_SIGNAL_OP_INC,
                                    false, &req), STRAND_SUCCESS);
  assert_int_equal(fk.sigOff, 40);
  assert_int_equal(fk.value, 7);
  assert_int_equal(fk.op, STRAND_GIN_SIGNAL_OP_INC);
}

static void test_rma_adapt_v13(void **state) {
  (void)state;
  static strand_gin_v13_t t;
  memset(&t, 0, sizeof t);
  t.name = "fake13", t.init = fk_init, t.devices = fk_devices, t.getProperties = fk_props12;
  t.createContext = fk_create13, t.regMrSym = fk_reg, t.deregMrSym = fk_dereg, t.iput = fk_put13;
  t.iputSignal = fk_sig13, t.finalize = fk_finalize;
  static conform_plugin_t p;
  memset(&p, 0, sizeof p);
  p.raw_rma = &t, p.rma_version = 13;
  conform_upgrade_rma(&p);
  memset(&fk, 0, sizeof fk);
  fk.ndev = 1;
  void *ctx = NULL;
  /* NCCL 2.30's v13 adapter: device 0 must be GIN_PROXY */
  fk.devType = STRAND_DEV_HOST;
  assert_int_not_equal(p.rma.init(&ctx, 1, NULL), STRAND_SUCCESS);
  assert_true(fk.finalized);
  assert_non_null(strstr(conform_upgrade_rma_refusal(), "GIN_PROXY"));
  fk.devType = STRAND_DEV_GIN_PROXY;
  assert_int_equal(p.rma.init(&ctx, 1, NULL), STRAND_SUCCESS);
  assert_string_equal(conform_upgrade_rma_refusal(), "");
  void *rctx = NULL, *mh = NULL, *req = NULL;
  strand_rma_config_v14_t cfg = {3, 5, 1};
  assert_int_equal(p.rma.createContext(&fk_cc_obj, &cfg, &rctx), STRAND_SUCCESS);
  assert_ptr_equal(rctx, &fk_ginctx_obj);
  assert_int_equal(fk.nContexts, 3);
  assert_int_equal(fk.trafficClass, 5);
  assert_int_equal(p.rma.regMrSym(&fk_cc_obj, &fk, 64, STRAND_PTR_HOST, 0, &mh), STRAND_SUCCESS);
  assert_int_equal(p.rma.iputSignal(rctx, 2, 0, mh, 8, 0, mh, 1, 16, mh, 9, STRAND_GIN_SIGNAL_OP_ADD, false, &req),
                   STRAND_SUCCESS);
  assert_ptr_equal(fk.ginctx, &fk_ginctx_obj);
  assert_int_equal(fk.context, 2);
  assert_ptr_equal(fk.mh, &fk_gh_obj);
  assert_int_equal(fk.value, 9);
  assert_int_equal(fk.op, STRAND_GIN_SIGNAL_OP_ADD);
}

int main(void) {
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_candidates), cmocka_unit_test(test_rewrite),
    cmocka_unit_test(test_load_dummy), cmocka_unit_test(test_props_fields),
    cmocka_unit_test(test_patterns), cmocka_unit_test(test_selection),
    cmocka_unit_test(test_report_counts), cmocka_unit_test(test_report_compact),
    cmocka_unit_test(test_capture),
    cmocka_unit_test(test_rma_adapt_v11_v12), cmocka_unit_test(test_rma_adapt_v13),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
