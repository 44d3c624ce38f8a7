/* Helpers shared by the standalone plugin tests (plugin_test.h). */
#include "plugin_test.h"

#include <dlfcn.h>
#include <stdarg.h>
#include <time.h>

int pt_failures;

void pt_fail(const char *file, int line, const char *cond, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fprintf(stderr, "FAIL %s:%d: %s: ", file, line, cond);
  vfprintf(stderr, fmt, ap);
  fprintf(stderr, "\n");
  va_end(ap);
  pt_failures++;
}

double pt_now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

void *pt_load_table(const char *path, const char *symbol) {
  void *dl = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (dl == NULL) {
    fprintf(stderr, "cannot load %s: %s\n", path, dlerror());
    return NULL;
  }
  void *table = dlsym(dl, symbol);
  if (table == NULL) fprintf(stderr, "%s does not export %s\n", path, symbol);
  return table;
}

static unsigned char pattern(size_t i, unsigned seed) {
  return (unsigned char)(seed * 131 + i * 7 + (i >> 8) + (i >> 12));
}

void pt_fill(void *buf, size_t n, unsigned seed) {
  unsigned char *p = buf;
  for (size_t i = 0; i < n; i++) p[i] = pattern(i, seed);
}

long pt_verify(const void *buf, size_t n, unsigned seed) {
  const unsigned char *p = buf;
  for (size_t i = 0; i < n; i++)
    if (p[i] != pattern(i, seed)) return (long)i;
  return -1;
}

int pt_connect_pair(const pt_net_t *net, void *ctx, int dev, void **send_comm, void **recv_comm,
                    void **listen_out, double bound_s) {
  char handle[STRAND_NET_HANDLE_MAXSIZE];
  void *lc = NULL;
  *send_comm = *recv_comm = NULL;
  PT_CHECK(net->listen(ctx, dev, handle, &lc) == STRAND_SUCCESS && lc != NULL, "listen on dev %d",
           dev);
  double t0 = pt_now_s();
  while (*send_comm == NULL || *recv_comm == NULL) {
    double c0 = pt_now_s();
    if (*send_comm == NULL)
      PT_CHECK(net->connect(ctx, dev, handle, send_comm, NULL) == STRAND_SUCCESS, "connect");
    if (*recv_comm == NULL)
      PT_CHECK(net->accept(lc, recv_comm, NULL) == STRAND_SUCCESS, "accept");
    PT_CHECK(pt_now_s() - c0 < 1.0, "connect/accept call blocked for %.2f s", pt_now_s() - c0);
    PT_CHECK(pt_now_s() - t0 < bound_s, "connection not established within %.0f s", bound_s);
  }
  if (listen_out != NULL) {
    *listen_out = lc;
  } else {
    PT_CHECK(net->closeListen(lc) == STRAND_SUCCESS, "closeListen");
  }
  return 0;
}

int pt_wait(const pt_net_t *net, void *req, int *sizes, double bound_s) {
  double t0 = pt_now_s();
  for (;;) {
    int done = 0;
    strand_result_t rc = net->test(req, &done, sizes);
    if (rc != STRAND_SUCCESS) return (int)rc;
    if (done) return STRAND_SUCCESS;
    if (pt_now_s() - t0 > bound_s) return PT_TIMEOUT;
  }
}
