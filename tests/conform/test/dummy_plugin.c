/* A tiny plugin for strand-conform's own tests (loader, watchdog, crash isolation, reporting).
 * It exports ncclNetPlugin_v9 and _v12 and has no network: listen fails. CONFORM_DUMMY_MODE picks
 * a misbehaviour: "crash-props" (SIGSEGV in getProperties), "hang-props" (getProperties never
 * returns), "bad-max-comms" (maxComms 0), "exit-init" (calls exit in init), "warn-props" (getProperties
 * logs a WARN through NCCL's logger and writes a line to stderr and one to stdout, then behaves);
 * anything else behaves. "crash-props" logs a WARN before it crashes. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "strand/abi/abi.h"

#define EXPORT __attribute__((visibility("default")))

static const char *mode(void) {
  const char *m = getenv("CONFORM_DUMMY_MODE");
  return m ? m : "";
}

static strand_logger_t g_logger; /* the logger init was given */

static strand_result_t d_devices(int *n) {
  *n = 1;
  return STRAND_SUCCESS;
}

static void fill12(strand_props_v12_t *p) {
  memset(p, 0, sizeof *p);
  p->name = "dummy0";
  p->pciPath = NULL;
  p->guid = 0;
  p->ptrSupport = STRAND_PTR_HOST;
  p->speed = 10000;
  p->maxComms = strcmp(mode(), "bad-max-comms") == 0 ? 0 : 1024;
  p->maxRecvs = 1;
  p->vProps.ndevs = 1;
  p->maxP2pBytes = (size_t)1 << 30;
  p->maxCollBytes = (size_t)1 << 29;
  p->maxMultiRequestSize = 1;
  p->railId = -1;
  p->planeId = -1;
}

static strand_result_t d_props12(int dev, strand_props_v12_t *p) {
  if (dev != 0) return STRAND_INVALID_ARGUMENT;
  if (strcmp(mode(), "warn-props") == 0) {
    if (g_logger) g_logger(STRAND_LOG_WARN, 0, "dummy_plugin.c", __LINE__,
                           "NET/conformdummy : dummy-warn-line dev %d", dev);
    fprintf(stderr, "dummy-stderr-line\n");
    printf("dummy-stdout-line\n");
  }
  if (strcmp(mode(), "crash-props") == 0) {
    if (g_logger) g_logger(STRAND_LOG_WARN, 0, "dummy_plugin.c", __LINE__,
                           "NET/conformdummy : dummy-last-words before the crash");
    raise(SIGSEGV);
  }
  if (strcmp(mode(), "hang-props") == 0)
    for (;;) pause();
  fill12(p);
  return STRAND_SUCCESS;
}

static strand_result_t d_props9(int dev, strand_props_v9_t *p) {
  strand_props_v12_t q;
  strand_result_t r = d_props12(dev, &q);
  if (r) return r;
  memset(p, 0, sizeof *p);
  p->name = q.name;
  p->ptrSupport = q.ptrSupport;
  p->speed = q.speed;
  p->maxComms = q.maxComms;
  p->maxRecvs = q.maxRecvs;
  p->vProps.ndevs = 1;
  p->maxP2pBytes = q.maxP2pBytes;
  p->maxCollBytes = q.maxCollBytes;
  return STRAND_SUCCESS;
}

static strand_result_t d_init12(void **ctx, uint64_t id, strand_comm_config_t *cfg,
                                strand_logger_t l, strand_profiler_cb_t pf) {
  (void)id; (void)cfg; (void)pf;
  g_logger = l;
  if (strcmp(mode(), "exit-init") == 0) exit(3);
  *ctx = (void *)0x1;
  return STRAND_SUCCESS;
}
static strand_result_t d_init9(strand_logger_t l) { g_logger = l; return STRAND_SUCCESS; }
static strand_result_t d_fin(void *ctx) { (void)ctx; return STRAND_SUCCESS; }
static strand_result_t d_listen12(void *ctx, int dev, void *h, void **lc) {
  (void)ctx; (void)dev; (void)h; *lc = NULL;
  return STRAND_SYSTEM_ERROR;
}
static strand_result_t d_listen9(int dev, void *h, void **lc) { return d_listen12(NULL, dev, h, lc); }
static strand_result_t d_connect12(void *ctx, int dev, void *h, void **sc, strand_dev_handle_t **dh) {
  (void)ctx; (void)dev; (void)h; (void)dh; *sc = NULL;
  return STRAND_SYSTEM_ERROR;
}
static strand_result_t d_connect9(int dev, void *h, void **sc, strand_dev_handle_t **dh) {
  return d_connect12(NULL, dev, h, sc, dh);
}
static strand_result_t d_accept(void *lc, void **rc, strand_dev_handle_t **dh) {
  (void)lc; (void)dh; *rc = NULL;
  return STRAND_SYSTEM_ERROR;
}
static strand_result_t d_regmr(void *c, void *d, size_t s, int t, void **mh) {
  (void)c; (void)d; (void)s; (void)t; *mh = NULL;
  return STRAND_SYSTEM_ERROR;
}
static strand_result_t d_dereg(void *c, void *mh) { (void)c; (void)mh; return STRAND_SUCCESS; }
static strand_result_t d_isend12(void *c, void *d, size_t s, int t, void *mh, void *ph, void **r) {
  (void)c; (void)d; (void)s; (void)t; (void)mh; (void)ph; *r = NULL;
  return STRAND_SYSTEM_ERROR;
}
static strand_result_t d_isend9(void *c, void *d, size_t s, int t, void *mh, void **r) {
  return d_isend12(c, d, s, t, mh, NULL, r);
}
static strand_result_t d_irecv12(void *c, int n, void **d, size_t *s, int *t, void **mh, void **ph,
                                 void **r) {
  (void)c; (void)n; (void)d; (void)s; (void)t; (void)mh; (void)ph; *r = NULL;
  return STRAND_SYSTEM_ERROR;
}
static strand_result_t d_irecv9(void *c, int n, void **d, size_t *s, int *t, void **mh, void **r) {
  return d_irecv12(c, n, d, s, t, mh, NULL, r);
}
static strand_result_t d_test(void *r, int *done, int *s) {
  (void)r; (void)s; *done = 0;
  return STRAND_SYSTEM_ERROR;
}
static strand_result_t d_close(void *c) { (void)c; return STRAND_SUCCESS; }

EXPORT const strand_net_v12_t ncclNetPlugin_v12 = {
  .name = "conformdummy", .init = d_init12, .devices = d_devices, .getProperties = d_props12,
  .listen = d_listen12, .connect = d_connect12, .accept = d_accept, .regMr = d_regmr,
  .deregMr = d_dereg, .isend = d_isend12, .irecv = d_irecv12, .test = d_test,
  .closeSend = d_close, .closeRecv = d_close, .closeListen = d_close, .finalize = d_fin,
};

EXPORT const strand_net_v9_t ncclNetPlugin_v9 = {
  .name = "conformdummy", .init = d_init9, .devices = d_devices, .getProperties = d_props9,
  .listen = d_listen9, .connect = d_connect9, .accept = d_accept, .regMr = d_regmr,
  .deregMr = d_dereg, .isend = d_isend9, .irecv = d_irecv9, .test = d_test,
  .closeSend = d_close, .closeRecv = d_close, .closeListen = d_close,
};
