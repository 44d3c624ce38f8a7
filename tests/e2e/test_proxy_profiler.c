/* tests/e2e/test_proxy_profiler.c — the proxy-step profiler (proxy_profiler.c) driven the way
 * NCCL 2.28's proxy drives it, without NCCL: steps with known minimum durations (sleeps) in each
 * phase, events of other types, NULL handles. The summary must count every step in the right
 * phase and report at least the time slept there (only lower bounds: a loaded machine sleeps
 * longer, never shorter).
 *   test_proxy_profiler LIBRARY.so */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "nccl_profiler_abi.h"
#include "plugin_test.h"
#include "strand/profiler.h"

/* The summary line of `phase`: its count and median (µs); 0 when the phase has no line. */
static int phase_line(const char *text, const char *phase, long *n, double *median) {
  char key[64];
  snprintf(key, sizeof key, " phase=%s ", phase);
  const char *p = strstr(text, key);
  if (!p) return 0;
  return sscanf(p + strlen(key), "n=%ld median_us=%lf", n, median) == 2;
}

static int run(const char *path) {
  void *lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  PT_CHECK(lib != NULL, "dlopen: %s", dlerror());
  const pp_profiler_v5_t *p = dlsym(lib, "ncclProfiler_v5");
  PT_CHECK(p != NULL, "no ncclProfiler_v5");
  PT_CHECK(strcmp(p->name, "strand-steps") == 0, "name %s", p->name);

  char out[] = "/tmp/strand-profile-XXXXXX";
  int fd = mkstemp(out);
  PT_CHECK(fd >= 0, "mkstemp");
  close(fd);
  setenv("STRAND_PROFILE_OUT", out, 1);

  void *ctx = NULL;
  int mask = 0;
  PT_CHECK(p->init(&ctx, 0x1234, &mask, "test", 2, 2, 0, NULL) == 0 && ctx, "init");
  PT_CHECK(mask == (PP_EVENT_PROXY_STEP | PP_EVENT_NET_PLUGIN),
           "activation mask %#x, want proxy steps and net-plugin events only", mask);

  /* NCCL 2.28 starts a proxy-op event before its steps and records a step's states only while
   * that op event has a handle (profiler.cc: sub->opEventHandle); a plugin that gave proxy ops no
   * handle saw every step start and no state (found in the first real run). Its handle must take
   * a state and a stop. Other events get no handle; NULL handles are accepted everywhere. */
  pp_descr_t op = {.type = PP_EVENT_PROXY_OP};
  void *op_handle = NULL;
  PT_CHECK(p->startEvent(ctx, &op_handle, &op) == 0 && op_handle != NULL,
           "a proxy-op event got no handle: NCCL would drop every step state");
  PT_CHECK(p->recordEventState(op_handle, 19 /* proxy op in progress */, NULL) == 0, "op state");
  pp_descr_t other = {.type = 1 << 1 /* a collective */};
  void *h = (void *)&other;
  PT_CHECK(p->startEvent(ctx, &h, &other) == 0 && h == NULL, "a collective event got a handle");
  PT_CHECK(p->recordEventState(NULL, PP_SEND_WAIT, NULL) == 0 && p->stopEvent(NULL) == 0, "NULL handle");

  enum { SENDS = 5, RECVS = 4 };
  for (int i = 0; i < SENDS; i++) {
    pp_descr_t d = {.type = PP_EVENT_PROXY_STEP, .proxyStep.step = i};
    void *s = NULL;
    PT_CHECK(p->startEvent(ctx, &s, &d) == 0 && s, "send step %d", i);
    p->recordEventState(s, PP_SEND_GPU_WAIT, NULL);
    usleep(2000); /* the GPU producing the data */
    p->recordEventState(s, PP_SEND_PEER_WAIT, NULL);
    usleep(300);  /* isend retried */
    p->recordEventState(s, PP_SEND_WAIT, NULL);
    usleep(1000); /* on the network */
    p->stopEvent(s);
  }
  for (int i = 0; i < RECVS; i++) {
    pp_descr_t d = {.type = PP_EVENT_PROXY_STEP, .proxyStep.step = i};
    void *s = NULL;
    PT_CHECK(p->startEvent(ctx, &s, &d) == 0 && s, "recv step %d", i);
    p->recordEventState(s, PP_RECV_WAIT, NULL);
    usleep(1500); /* on the network */
    if (i % 2) {
      p->recordEventState(s, PP_RECV_FLUSH_WAIT, NULL);
      usleep(700);
    }
    p->recordEventState(s, PP_RECV_GPU_WAIT, NULL);
    usleep(500); /* the GPU consuming it */
    p->stopEvent(s);
  }
  /* Network-plugin events as NCCL's callback hands them on (profiler.cc: parentObj = the proxy
   * step's handle, netPlugin.id / data from the plugin): three socket-layout messages and one
   * IB-layout message under one step, one of another plugin with no parent; one update. */
  {
    pp_descr_t d = {.type = PP_EVENT_PROXY_STEP, .proxyStep.step = 99};
    void *step = NULL;
    PT_CHECK(p->startEvent(ctx, &step, &d) == 0 && step, "step for net events");
    strand_profiler_sock_descr_v1_t sd = {.type = STRAND_PROFILE_SOCKET};
    strand_profiler_ib_descr_v1_t id = {.type = STRAND_PROFILE_QP};
    void *ev[5] = {0};
    for (int i = 0; i < 5; i++) {
      pp_descr_t nd = {.type = PP_EVENT_NET_PLUGIN, .parentObj = step};
      if (i < 3) {
        sd.sock.length = 1000u << i; /* 1000, 2000, 4000 */
        nd.netPlugin.id = STRAND_PROFILER_NET_ID_SOCK;
        nd.netPlugin.data = &sd;
      } else if (i == 3) {
        id.qp.length = 300;
        nd.netPlugin.id = STRAND_PROFILER_NET_ID_IB;
        nd.netPlugin.data = &id;
      } else {
        nd.parentObj = NULL;
        nd.netPlugin.id = 7LL << 16 | 1; /* a layout this profiler does not know */
        nd.netPlugin.data = &sd;
      }
      PT_CHECK(p->startEvent(ctx, &ev[i], &nd) == 0 && ev[i], "net event %d got no handle", i);
      sd.sock.length = 0; /* the descriptor is only valid during startEvent */
    }
    PT_CHECK(p->recordEventState(ev[0], PP_NET_PLUGIN_UPDATE, NULL) == 0, "net update");
    usleep(800);
    for (int i = 0; i < 5; i++) PT_CHECK(p->stopEvent(ev[i]) == 0, "net stop %d", i);
    PT_CHECK(p->stopEvent(step) == 0, "step stop");
  }
  PT_CHECK(p->stopEvent(op_handle) == 0, "op stop");
  PT_CHECK(p->finalize(ctx) == 0, "finalize");

  char text[8192] = {0};
  FILE *f = fopen(out, "r");
  PT_CHECK(f != NULL, "no summary in %s", out);
  if (f) {
    size_t got = fread(text, 1, sizeof text - 1, f);
    text[got] = '\0';
    fclose(f);
  }
  unlink(out);
  printf("%s", text);
  struct {
    const char *phase;
    long n;
    double min_median_us;
  } want[] = {{"send.gpu-data", SENDS, 2000},    {"send.isend-accepted", SENDS, 300},
              {"send.network", SENDS, 1000},     {"recv.irecv-accepted", RECVS, 0},
              {"recv.network", RECVS, 1500},     {"recv.flush", RECVS / 2, 700},
              {"recv.gpu-consumed", RECVS, 500}, {"net.event", 5, 800}};
  for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
    long n = -1;
    double med = -1;
    PT_CHECK(phase_line(text, want[i].phase, &n, &med), "no line for phase %s", want[i].phase);
    PT_CHECK(n == want[i].n, "phase %s counted %ld steps, want %ld", want[i].phase, n, want[i].n);
    PT_CHECK(med >= want[i].min_median_us, "phase %s median %.1f us, below the %.0f us slept",
          want[i].phase, med, want[i].min_median_us);
  }
  PT_CHECK(strstr(text, "comm=0000000000001234 rank=0/2 steps=10\n") != NULL,
           "comm id / rank / step count (10) missing");
  PT_CHECK(strstr(text, "net-plugin comm=0000000000001234 rank=0/2 events=5 stopped=5 updates=1 "
                        "socket=3 ib=1 other=1 bytes=7300 with_step_parent=4\n") != NULL,
           "net-plugin line missing or wrong");
  printf("ok\n");
  return 0;
}

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: %s libnccl-profiler-strand-steps.so\n", argv[0]);
    return 2;
  }
  return run(argv[1]) == 0 && pt_failures == 0 ? 0 : 1;
}
