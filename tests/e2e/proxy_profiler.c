/* tests/e2e/proxy_profiler.c — an NCCL profiler plugin (ncclProfiler_v5: NCCL 2.26 .. 2.28) that
 * times each step of NCCL's network proxy, so that two network plugins (strand-socket and NCCL's
 * built-in Socket) can be compared phase by phase under the same collective.
 *
 * NCCL's proxy reports, per step of a send or receive (src/transport/net.cc, 2.28):
 *   send: step started (waiting for the GPU's data) -> SendPeerWait (data ready: isend is tried,
 *         and retried while the plugin returns no request) -> SendWait (isend accepted) -> stop
 *         (test() said done);
 *   recv: step started (about to post) -> RecvWait (irecv accepted) -> [RecvFlushWait (iflush
 *         posted)] -> RecvGPUWait (test() said done) -> stop (the GPU consumed the data).
 * The time between two of those points is one phase; every phase of every step is kept, and at
 * finalize the plugin writes one line per phase: count, median, 90th percentile and maximum, in
 * microseconds. Nothing is timed that NCCL does not report, and only proxy-step events are asked
 * for (the activation mask; NCCL then also starts their proxy-op events, which get a handle and
 * nothing else), so the cost is two clock reads per state change.
 *
 * It also asks for the network plugin's own events (ncclProfileNetPlugin: what NCCL's built-in
 * Socket and IB report, and the Strand plugins through strand/profiler.h): one event per message a
 * plugin's isend/irecv accepted, child of the proxy step, stopped when test() said done. They are
 * counted by descriptor kind (socket layout, IB layout, other), with their bytes and how many had
 * a proxy step of this profiler as parent, and their start -> stop time is one more phase
 * (net.event); finalize writes a `net-plugin ...` line beside the proxy-step lines. A network
 * plugin that reports nothing gives `net-plugin ... events=0`.
 *
 * Use (tests/e2e/run_e2e.sh profile does this): NCCL_PROFILER_PLUGIN=strand-steps with this
 * library (libnccl-profiler-strand-steps.so) on LD_LIBRARY_PATH; STRAND_PROFILE_OUT=FILE appends
 * the summary there instead of stderr. The structures below are written from NCCL's profiler ABI
 * (ext-profiler v5): only the members this plugin reads are named. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "nccl_profiler_abi.h"

/* ---- phases ---------------------------------------------------------------------------------- */

enum {
  PH_SEND_GPU,     /* step start -> data ready (the GPU producing the data, the slot free) */
  PH_SEND_POST,    /* data ready -> isend accepted (retries while the plugin has no request) */
  PH_SEND_NET,     /* isend accepted -> test() done */
  PH_RECV_POST,    /* step start -> irecv accepted */
  PH_RECV_NET,     /* irecv accepted -> test() done (or -> iflush posted) */
  PH_RECV_FLUSH,   /* iflush posted -> done */
  PH_RECV_GPU,     /* test() done -> the GPU consumed the data */
  PH_NET_EVENT,    /* a network plugin's event: START (isend/irecv) -> STOP (test() done) */
  PH_COUNT
};
static const char *const phase_names[PH_COUNT] = {
    "send.gpu-data", "send.isend-accepted", "send.network", "recv.irecv-accepted",
    "recv.network", "recv.flush", "recv.gpu-consumed", "net.event"};

#define PP_MAX_SAMPLES (1 << 18) /* per phase per communicator: beyond, only count and max */

typedef struct {
  float *us; /* samples, microseconds */
  size_t n, kept;
  double max;
} pp_phase_t;

typedef struct {
  pthread_mutex_t lock;
  uint64_t comm_id;
  int rank, nranks;
  pp_phase_t ph[PH_COUNT];
  size_t steps; /* proxy-step events started: 0 at finalize means NCCL sent none */
  /* network-plugin events: started, stopped, updates; by descriptor kind; bytes; with a step of
   * ours as parent */
  size_t net_events, net_stopped, net_updates, net_sock, net_ib, net_other, net_with_step;
  uint64_t net_bytes;
} pp_ctx_t;

enum { PP_H_STEP = 0x53544550, PP_H_NET = 0x4e455420 }; /* first word of a handle: its kind */

/* One step: the time it started and of the last state recorded, and which one that was. */
typedef struct {
  uint32_t kind; /* PP_H_STEP */
  pp_ctx_t *ctx;
  uint64_t t_start, t_last;
  int last_state; /* 0 = none yet */
} pp_step_t;

/* One network-plugin event. */
typedef struct {
  uint32_t kind; /* PP_H_NET */
  pp_ctx_t *ctx;
  uint64_t t_start;
} pp_net_t;

/* The message length a network plugin's descriptor carries (socket layout: sock.length at 16; IB
 * layout: qp.length at 32; both version 1), or 0 for another layout. */
static uint64_t net_length(int64_t id, const void *data) {
  if (data == NULL || (id & ((1LL << PP_NET_VER_BITS) - 1)) != 1) return 0;
  size_t len = 0;
  if ((id & ~((1LL << PP_NET_VER_BITS) - 1)) == PP_NET_TYPE_SOCK)
    memcpy(&len, (const char *)data + 16, sizeof len);
  else if ((id & ~((1LL << PP_NET_VER_BITS) - 1)) == PP_NET_TYPE_IB)
    memcpy(&len, (const char *)data + 32, sizeof len);
  return len;
}

static uint64_t now_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

static void add(pp_ctx_t *c, int phase, uint64_t t0, uint64_t t1) {
  if (phase < 0 || t1 < t0) return;
  double us = (double)(t1 - t0) / 1000.0;
  pthread_mutex_lock(&c->lock);
  pp_phase_t *p = &c->ph[phase];
  if (p->us == NULL) p->us = malloc(PP_MAX_SAMPLES * sizeof *p->us);
  if (p->us != NULL && p->kept < PP_MAX_SAMPLES) p->us[p->kept++] = (float)us;
  p->n++;
  if (us > p->max) p->max = us;
  pthread_mutex_unlock(&c->lock);
}

/* The phase that ends when `state` is recorded after `prev` (0 = the step's start). */
static int phase_ending_at(int prev, int state) {
  switch (state) {
    case PP_SEND_PEER_WAIT: return prev == 0 || prev == PP_SEND_GPU_WAIT ? PH_SEND_GPU : -1;
    case PP_SEND_WAIT: return prev == PP_SEND_PEER_WAIT ? PH_SEND_POST : -1;
    case PP_RECV_WAIT: return prev == 0 ? PH_RECV_POST : -1;
    case PP_RECV_FLUSH_WAIT: return prev == PP_RECV_WAIT ? PH_RECV_NET : -1;
    case PP_RECV_GPU_WAIT:
      return prev == PP_RECV_WAIT ? PH_RECV_NET : prev == PP_RECV_FLUSH_WAIT ? PH_RECV_FLUSH : -1;
    default: return -1; /* SendGPUWait marks the start; it ends no phase */
  }
}

/* ---- the ABI ---------------------------------------------------------------------------------- */

static pp_result_t pp_init(void **context, uint64_t commId, int *eActivationMask,
                           const char *commName, int nNodes, int nranks, int rank,
                           pp_logger_t logfn) {
  (void)commName, (void)nNodes, (void)logfn;
  if (context == NULL || eActivationMask == NULL) return PP_SYSTEM_ERROR;
  pp_ctx_t *c = calloc(1, sizeof *c);
  if (c == NULL) return PP_SYSTEM_ERROR;
  pthread_mutex_init(&c->lock, NULL);
  c->comm_id = commId;
  c->rank = rank;
  c->nranks = nranks;
  *eActivationMask = PP_EVENT_PROXY_STEP | PP_EVENT_NET_PLUGIN;
  *context = c;
  return PP_SUCCESS;
}

/* The handle of every proxy-op event. NCCL 2.28 records a proxy step's states only while the
 * step's proxy-op event has a handle (profiler.cc checks sub->opEventHandle), so proxy ops must
 * get one although nothing is timed for them; it is never dereferenced. */
static char pp_proxy_op_handle;

static pp_result_t pp_start(void *context, void **eHandle, pp_descr_t *eDescr) {
  if (eHandle == NULL) return PP_SUCCESS;
  *eHandle = NULL;
  if (context == NULL || eDescr == NULL) return PP_SUCCESS;
  if (eDescr->type == PP_EVENT_PROXY_OP) {
    *eHandle = &pp_proxy_op_handle;
    return PP_SUCCESS;
  }
  if (eDescr->type == PP_EVENT_NET_PLUGIN) {
    pp_ctx_t *c = context;
    int64_t id = eDescr->netPlugin.id;
    int64_t type = id & ~((1LL << PP_NET_VER_BITS) - 1);
    const pp_step_t *parent = eDescr->parentObj;
    pthread_mutex_lock(&c->lock);
    c->net_events++;
    if (type == PP_NET_TYPE_SOCK) c->net_sock++;
    else if (type == PP_NET_TYPE_IB) c->net_ib++;
    else c->net_other++;
    c->net_bytes += net_length(id, eDescr->netPlugin.data);
    if (parent != NULL && parent->kind == PP_H_STEP) c->net_with_step++;
    pthread_mutex_unlock(&c->lock);
    pp_net_t *n = malloc(sizeof *n);
    if (n == NULL) return PP_SUCCESS;
    n->kind = PP_H_NET;
    n->ctx = c;
    n->t_start = now_ns();
    *eHandle = n;
    return PP_SUCCESS;
  }
  if (eDescr->type != PP_EVENT_PROXY_STEP) return PP_SUCCESS;
  pp_step_t *s = malloc(sizeof *s);
  if (s == NULL) return PP_SUCCESS; /* this step is simply not timed */
  s->kind = PP_H_STEP;
  s->ctx = context;
  pthread_mutex_lock(&s->ctx->lock);
  s->ctx->steps++;
  pthread_mutex_unlock(&s->ctx->lock);
  s->t_start = s->t_last = now_ns();
  s->last_state = 0;
  *eHandle = s;
  return PP_SUCCESS;
}

static pp_result_t pp_record(void *eHandle, int eState, void *eStateArgs) {
  (void)eStateArgs;
  pp_step_t *s = eHandle;
  if (s == NULL || eHandle == &pp_proxy_op_handle) return PP_SUCCESS;
  if (s->kind == PP_H_NET) {
    pp_net_t *n = eHandle;
    if (eState == PP_NET_PLUGIN_UPDATE) {
      pthread_mutex_lock(&n->ctx->lock);
      n->ctx->net_updates++;
      pthread_mutex_unlock(&n->ctx->lock);
    }
    return PP_SUCCESS;
  }
  uint64_t t = now_ns();
  int ph = phase_ending_at(s->last_state, eState);
  if (ph >= 0) add(s->ctx, ph, s->last_state == 0 ? s->t_start : s->t_last, t);
  if (eState == PP_SEND_GPU_WAIT && s->last_state == 0) return PP_SUCCESS; /* still the start */
  s->last_state = eState;
  s->t_last = t;
  return PP_SUCCESS;
}

static pp_result_t pp_stop(void *eHandle) {
  pp_step_t *s = eHandle;
  if (s == NULL || eHandle == &pp_proxy_op_handle) return PP_SUCCESS;
  uint64_t t = now_ns();
  if (s->kind == PP_H_NET) {
    pp_net_t *n = eHandle;
    pthread_mutex_lock(&n->ctx->lock);
    n->ctx->net_stopped++;
    pthread_mutex_unlock(&n->ctx->lock);
    add(n->ctx, PH_NET_EVENT, n->t_start, t);
    free(n);
    return PP_SUCCESS;
  }
  if (s->last_state == PP_SEND_WAIT) add(s->ctx, PH_SEND_NET, s->t_last, t);
  else if (s->last_state == PP_RECV_GPU_WAIT) add(s->ctx, PH_RECV_GPU, s->t_last, t);
  free(s);
  return PP_SUCCESS;
}

static int cmp_float(const void *a, const void *b) {
  float x = *(const float *)a, y = *(const float *)b;
  return (x > y) - (x < y);
}

static pp_result_t pp_finalize(void *context) {
  pp_ctx_t *c = context;
  if (c == NULL) return PP_SUCCESS;
  const char *path = getenv("STRAND_PROFILE_OUT");
  FILE *out = path && *path ? fopen(path, "a") : NULL;
  FILE *f = out ? out : stderr;
  /* Always one line, so that a run without proxy steps (the plugin not loaded as a profiler, or no
   * network traffic) says so instead of printing nothing. */
  fprintf(f, "proxy-steps comm=%016llx rank=%d/%d steps=%zu\n", (unsigned long long)c->comm_id,
          c->rank, c->nranks, c->steps);
  fprintf(f, "net-plugin comm=%016llx rank=%d/%d events=%zu stopped=%zu updates=%zu socket=%zu "
          "ib=%zu other=%zu bytes=%llu with_step_parent=%zu\n", (unsigned long long)c->comm_id,
          c->rank, c->nranks, c->net_events, c->net_stopped, c->net_updates, c->net_sock, c->net_ib,
          c->net_other, (unsigned long long)c->net_bytes, c->net_with_step);
  for (int i = 0; i < PH_COUNT; i++) {
    pp_phase_t *p = &c->ph[i];
    if (p->n == 0) continue;
    double med = 0, p90 = 0;
    if (p->kept > 0) {
      qsort(p->us, p->kept, sizeof *p->us, cmp_float);
      med = p->us[p->kept / 2];
      p90 = p->us[(p->kept * 9) / 10];
    }
    fprintf(f, "proxy-steps comm=%016llx rank=%d/%d phase=%s n=%zu median_us=%.2f p90_us=%.2f "
            "max_us=%.1f\n", (unsigned long long)c->comm_id, c->rank, c->nranks, phase_names[i],
            p->n, med, p90, p->max);
    free(p->us);
  }
  if (out) fclose(out);
  pthread_mutex_destroy(&c->lock);
  free(c);
  return PP_SUCCESS;
}

__attribute__((visibility("default"))) const pp_profiler_v5_t ncclProfiler_v5 = {
    .name = "strand-steps",
    .init = pp_init,
    .startEvent = pp_start,
    .stopEvent = pp_stop,
    .recordEventState = pp_record,
    .finalize = pp_finalize,
};
