/* strand-conform sim — NCCL-shaped proxy traffic with verified results.
 *
 * Why: a plugin can pass one-message-at-a-time checks and still break under the way NCCL really
 * drives it: up to 8 requests in flight per connection (NCCL_STEPS, slot = step mod 8), several
 * connections progressed round-robin by one proxy thread so completions interleave across comms,
 * messages of mixed sizes (0 bytes included) into buffers larger than the message, grouped
 * receives on shared comms, LL receives with the optional-completion sentinel, iflush after
 * SIMPLE receives (§6.2, §6.4-§6.8). Each scenario here runs collectives the way NCCL's ring
 * kernels and net proxy cut them, on every rank at once, and checks the final buffers exactly.
 *
 * Model (one process per rank, one thread doing both roles, never blocking):
 *   proxy  per connection: keeps receives posted into free FIFO slots, tests the oldest receive,
 *          flushes completed SIMPLE receives when asked, isends what the "GPU" wrote, tests the
 *          oldest send. Every call is tried once; a NULL request is retried on a later pass.
 *   GPU    per channel: a list of ring primitives (send, recvReduceSend, recvReduceCopySend,
 *          recvCopySend, recv), each cut into slices = one network message. A primitive runs
 *          when its receive slot is complete and its send slot is free, and computes with the
 *          SDK's CPU reductions (strand/reduce.h).
 * Data is chosen so that the exact result is known whatever the summation order (small integers
 * in float32 / bfloat16, wrap-around int32), so the comparison is bit for bit.
 *
 * This file: options, the scenarios and `strand-conform sim`. The engines are ring.c and p2p.c,
 * the protocol sizes and LL format proto.c; sim.h says what they share. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sim.h"

/* ------------------------------------------------------------------ options */

sim_opts_t sim_opts = {2, (size_t)4 << 20, 2, false, 0};

/* ------------------------------------------------------------------ scenario helpers */

/* Bound check shared by both engines: returns -1 (failure recorded) when the peer failed or the
 * check's time is nearly out. */
int sim_bounded(conform_ctx_t *c, const char *what, const char *state) {
  if (conform_peer_failed(c)) {
    conform_fail(c, "%s: %s", what, c->bs_error);
    return -1;
  }
  if (conform_remaining(c) < 1.5) {
    conform_fail(c, "%s made no progress before the time bound (a plugin that loses or stalls "
                 "requests under pipelining): %s", what, state);
    return -1;
  }
  return 0;
}
uint64_t sim_hash3(uint64_t a, uint64_t b, uint64_t c) {
  uint64_t x = a * 0x9e3779b97f4a7c15ULL ^ (b + 0x632be59bd9b4e019ULL) * 0xbf58476d1ce4e5b9ULL ^
               (c + 0x94d049bb133111ebULL);
  x ^= x >> 31;
  x *= 0xd6e8feb86659fd93ULL;
  x ^= x >> 29;
  return x;
}
int sim_precheck(conform_ctx_t *c) {
  if (c->nranks < 2) return conform_skip(c, "needs at least 2 ranks (--nranks)"), -1;
  if (sim_opts.dev >= c->ndev)
    return conform_fail(c, "--dev %d but the plugin has %d devices", sim_opts.dev, c->ndev), -1;
  return 0;
}

size_t sim_bytes(conform_ctx_t *c) {
  size_t b = sim_opts.bytes;
  if (b > c->max_bytes) b = c->max_bytes;
  return b ? b : 1;
}

static void ring_note(conform_ctx_t *c, ring_t *R, int colls) {
  conform_note(c, "%d collectives, %lu messages (%lu of 0 bytes) per rank over %d channels",
               colls, R->msgs, R->zero_msgs, R->nch);
  if (R->flush)
    conform_note(c, "%lu iflush calls (%lu returned NULL = done)", R->flushes, R->flush_null);
}

/* Flush outcome for scenarios that flush: a refusal is a skip for host-only plugins, whose
 * buffers NCCL never flushes (§6.8), and a failure for plugins that advertise GPU memory. */
conform_status_t sim_flush_verdict(conform_ctx_t *c, const char *flush_error) {
  strand_props_v12_t props;
  if (conform_props(c, sim_opts.dev, &props)) return CONFORM_FAIL;
  if (props.ptrSupport & (STRAND_PTR_CUDA | STRAND_PTR_DMABUF))
    return conform_fail(c, "%s, but the device advertises GPU memory (ptrSupport 0x%x): NCCL "
                        "flushes every GDR receive with data (§6.8)", flush_error, props.ptrSupport);
  return conform_skip(c, "%s on a host-only device (ptrSupport 0x%x): NCCL never flushes host "
                      "buffers, so a refusal is allowed", flush_error, props.ptrSupport);
}

typedef struct {
  coll_t coll;
  const sim_proto_t *proto;
  const strand_datatype_t *types;
  int ntypes;
  bool flush;
  bool sentinel;
} ring_scenario_t;

static conform_status_t run_ring_scenario(conform_ctx_t *c, const ring_scenario_t *sc) {
  if (sim_precheck(c)) return c->status;
  if ((sc->flush || sim_opts.flush) && !sc->proto->ll && !c->net->iflush)
    return sc->flush ? conform_skip(c, "the plugin has no iflush (NULL): NCCL then never flushes")
                     : conform_skip(c, "--flush given but the plugin has no iflush");
  ring_t R;
  if (sim_ring_open(&R, c, sc->proto, sim_opts.channels)) {
    sim_ring_close(&R);
    return CONFORM_FAIL;
  }
  R.flush = (sc->flush || sim_opts.flush) && !sc->proto->ll;
  R.sentinel = sc->sentinel;
  size_t bytes = sim_bytes(c);
  int colls = 0;
  conform_status_t st = CONFORM_PASS;
  for (int it = 0; it < sim_opts.iters && st == CONFORM_PASS; it++)
    for (int ti = 0; ti < sc->ntypes && st == CONFORM_PASS; ti++) {
      if (sim_ring_collective(&R, sc->coll, sc->types[ti], bytes, it)) {
        st = R.flush_refused ? sim_flush_verdict(c, R.flush_error) : CONFORM_FAIL;
        break;
      }
      colls++;
    }
  for (int ti = 0; ti < sc->ntypes && st == CONFORM_PASS; ti++) {
    if (sim_ring_collective(&R, sc->coll, sc->types[ti], 0, sim_opts.iters)) {
      st = R.flush_refused ? sim_flush_verdict(c, R.flush_error) : CONFORM_FAIL;
      break;
    }
    colls++;
  }
  if (st == CONFORM_PASS) ring_note(c, &R, colls);
  sim_ring_close(&R);
  if (st == CONFORM_PASS && c->status == CONFORM_FAIL) st = CONFORM_FAIL;
  return st;
}

/* ------------------------------------------------------------------ ring scenarios */

static const strand_datatype_t reduce_types[] = {STRAND_FLOAT32, STRAND_INT32, STRAND_BFLOAT16};
static const strand_datatype_t byte_type[] = {STRAND_UINT8};
static const strand_datatype_t float_type[] = {STRAND_FLOAT32};

static conform_status_t sim_ring_allreduce(conform_ctx_t *c) {
  ring_scenario_t sc = {COLL_ALLREDUCE, &sim_proto_simple, reduce_types, 3, false, false};
  return run_ring_scenario(c, &sc);
}

static conform_status_t sim_ring_allgather(conform_ctx_t *c) {
  ring_scenario_t sc = {COLL_ALLGATHER, &sim_proto_simple, byte_type, 1, false, false};
  return run_ring_scenario(c, &sc);
}

static conform_status_t sim_ring_reducescatter(conform_ctx_t *c) {
  ring_scenario_t sc = {COLL_REDUCESCATTER, &sim_proto_simple, reduce_types, 2, false, false};
  return run_ring_scenario(c, &sc);
}

static conform_status_t sim_ll_sentinel(conform_ctx_t *c) {
  /* v6..v8 cores never show the sentinel (the adapter resets it, §6.6): the same traffic then
   * runs with ordinary completions, which must then mean "data landed". */
  ring_scenario_t sc = {COLL_ALLREDUCE, &sim_proto_ll, float_type, 1, false, c->version >= 9};
  conform_status_t st = run_ring_scenario(c, &sc);
  if (st == CONFORM_PASS && c->version < 9)
    conform_note(c, "ABI v%d: the core adapter clears the sentinel, LL ran with full completions",
                 c->version);
  return st;
}

static conform_status_t sim_flush(conform_ctx_t *c) {
  ring_scenario_t sc = {COLL_ALLREDUCE, &sim_proto_simple, float_type, 1, true, false};
  return run_ring_scenario(c, &sc);
}

/* ------------------------------------------------------------------ table and command */

static conform_check_t sim_checks[] = {
  {"sim.ring-allreduce", "§6.2, §6.4 (ring, SIMPLE, dedicated buffers)",
   "ring all-reduce (float32, int32, bfloat16 sums) over C channels with 8-slot FIFOs, 1 MiB "
   "slices, mixed and 0-byte steps; results exact", sim_ring_allreduce, 60, 0},
  {"sim.ring-allgather", "§6.2, §6.4 (ring, SIMPLE)",
   "ring all-gather over C channels; every rank's block byte-exact", sim_ring_allgather, 60, 0},
  {"sim.ring-reducescatter", "§6.2, §6.4 (ring, SIMPLE)",
   "ring reduce-scatter (float32, int32 sums); this rank's block exact", sim_ring_reducescatter, 60, 0},
  {"sim.ll-sentinel", "§6.6, §6.2 (LL, 8 requests in flight)",
   "LL ring all-reduce, 64 KiB steps, 8 in flight per connection, irecv *request preset to "
   "NCCL_NET_OPTIONAL_RECV_COMPLETION (v9+); flags and sums exact", sim_ll_sentinel, 60, 0},
  {"sim.p2p-alltoall-grouped", "§6.7, §6.3 shared buffers, §6.2",
   "all-to-all over shared comms: grouped irecv n = min(maxRecvs, senders), tags = sender ranks, "
   "128 KiB chunks, mixed/0-byte sizes; every chunk byte-exact with its size",
   sim_p2p_alltoall_grouped, 60, 0},
  {"sim.flush", "§6.8, §6.5",
   "ring all-reduce with iflush after every SIMPLE receive with data, flush requests tested with "
   "NULL sizes (NULL request = done); results exact", sim_flush, 60, 0},
  {"sim.collnet-allreduce", "§8.2, §8.3 (CollNet, shared staging buffer)",
   "CollNet all-reduce (float32, bfloat16, int32 sums) through one shared buffer registered twice, "
   "100 KiB units, 8 in flight, NULL requests retried; results exact", sim_collnet_allreduce, 60,
   CONFORM_F_COLLNET},
  {"sim.collnet-allgather", "§8.3 (CollNet windows)",
   "CollNet all-gather in 100 KiB windows straddling the ranks' blocks, 8 in flight; every block "
   "byte-exact", sim_collnet_allgather, 60, CONFORM_F_COLLNET},
  {"sim.collnet-reducescatter", "§8.3 (CollNet windows)",
   "CollNet reduce-scatter (float32, int32 sums) in 100 KiB windows, 8 in flight; this rank's "
   "block exact", sim_collnet_reducescatter, 60, CONFORM_F_COLLNET},
  {NULL, NULL, NULL, NULL, 0, 0},
};

enum { SO_CHANNELS = 1, SO_BYTES, SO_ITERS, SO_FLUSH, SO_DEV };

static const simperf_opt_t sim_optlist[] = {
  {"channels", false, SO_CHANNELS}, {"bytes", false, SO_BYTES}, {"iters", false, SO_ITERS},
  {"flush", true, SO_FLUSH},        {"dev", false, SO_DEV},     {NULL, false, 0},
};

static int sim_opt(int id, const char *v, void *arg) {
  (void)arg;
  char *end = NULL;
  switch (id) {
  case SO_CHANNELS:
    sim_opts.channels = (int)strtol(v, &end, 10);
    return (*end || sim_opts.channels < 1 || sim_opts.channels > 32) ? -1 : 0;
  case SO_BYTES: return conform_parse_size(v, &sim_opts.bytes) || sim_opts.bytes == 0 ? -1 : 0;
  case SO_ITERS:
    sim_opts.iters = (int)strtol(v, &end, 10);
    return (*end || sim_opts.iters < 1) ? -1 : 0;
  case SO_FLUSH: sim_opts.flush = true; return 0;
  case SO_DEV:
    sim_opts.dev = (int)strtol(v, &end, 10);
    return (*end || sim_opts.dev < 0) ? -1 : 0;
  default: return -1;
  }
}

static void sim_usage(void) {
  fprintf(stderr,
    "usage: strand-conform sim [sim options] [common options] [PLUGIN]\n"
    "  --channels C   channels = connections per ring neighbour (default 2, 1..32)\n"
    "  --bytes SIZE   bytes per collective (default 4M; capped by --max-bytes / --quick)\n"
    "  --iters N      collectives per datatype and scenario (default 2)\n"
    "  --flush        iflush after every SIMPLE receive in every scenario (sim.flush always does)\n"
    "  --dev D        plugin device (default 0)\n"
    "Scenarios: ");
  for (const conform_check_t *k = sim_checks; k->id; k++)
    fprintf(stderr, "%s%s", k->id, k[1].id ? ", " : "\n");
  fprintf(stderr, "Select with --only/--skip; common options: strand-conform --help.\n");
}

int conform_cmd_sim(int argc, char **argv) {
  for (int i = 1; i < argc; i++)
    if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
      sim_usage();
      return 0;
    }
  argc = simperf_take_opts(argc, argv, sim_optlist, sim_opt, NULL, "sim");
  if (argc < 0) return 2;
  int first = conform_parse_opts(argc, argv);
  if (first < 0) return 2;
  if (first < argc) conform_opts.plugin = argv[first];
  if (first + 1 < argc) {
    fprintf(stderr, "strand-conform sim: one PLUGIN argument expected\n");
    return 2;
  }
  /* Time bounds grow with the traffic: about 4 s per MiB per collective on a loaded 2-core box
   * with sanitizers is far more than a working plugin needs. */
  unsigned per = 20 + (unsigned)((sim_opts.bytes >> 20) * 4 * (size_t)sim_opts.iters);
  const conform_check_t *sel[16];
  int n = 0;
  for (conform_check_t *k = sim_checks; k->id; k++) {
    k->timeout_s = per * (strcmp(k->id, "sim.ring-allreduce") == 0 ? 3 : 1) + 30;
    if (conform_check_selected(k, &conform_opts)) sel[n++] = k;
  }
  if (n == 0) {
    fprintf(stderr, "strand-conform sim: --only/--skip selected no scenario\n");
    sim_usage();
    return 2;
  }
  return conform_run_checks(sel, n);
}

