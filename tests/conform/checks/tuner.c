/* strand-conform — tuner.*: the tuner NCCL would load from this library (spec §11). Optional: a
 * library without ncclTunerPlugin_v* skips the area, which is what NCCL does with it too.
 *
 * The tuner is probed like NCCL does, newest symbol first (v7, v6, v5, v4, v3, v2: cores after
 * 2.30.7 start at v7, 2.30 at v6), and driven the
 * way the core drives it: init per communicator shape, getCollInfo with cost tables shaped like the
 * core's, finalize. NCCL trusts every answer (spec §11.3): a non-negative value written into an
 * ignored entry makes it run an algorithm it ruled out, a wild nChannels reaches the kernel plan,
 * a write past the table corrupts the core's stack, an error fails the collective. So each
 * answer is checked for exactly those. The net side is initialised by the harness first, as in
 * NCCL (net init precedes tuner init), so a tuner that keys off its own network is exercised. */
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

#include "conform.h"
#include "strand/abi/tuner.h"

#define NA STRAND_TUNER_NUM_ALGORITHMS
#define NP STRAND_TUNER_NUM_PROTOCOLS
#define IGN STRAND_ALGO_PROTO_IGNORE

typedef struct {
  int version; /* 2..7 */
  const void *raw;
  const char *name;
} tn_t;

/* The newest exported tuner, as the core picks it; 0 = none (skip). */
static int tn_find(conform_ctx_t *c, tn_t *t) {
  memset(t, 0, sizeof *t);
  for (int v = 7; v >= 2; v--) {
    char sym[32];
    snprintf(sym, sizeof sym, "ncclTunerPlugin_v%d", v);
    const void *raw = c->plugin->dl ? dlsym(c->plugin->dl, sym) : NULL;
    if (raw == NULL) continue;
    t->version = v;
    t->raw = raw;
    t->name = *(const char *const *)raw;
    return v;
  }
  return 0;
}

/* Slots 1..3 sit at the same offsets in every version (spec §11.4); only their signatures differ. */
typedef struct {
  const char *name;
  void *init, *getCollInfo, *finalize;
} tn_slots_t;

/* The constants block the core hands init (v5/v6: 1152 bytes, v7: 1272), followed by guard bytes:
 * a tuner built for another version's layout writes past the core's block. */
#define TN_GUARD 0x5a
static struct {
  union {
    strand_tuner_constants_v5_t v5;
    strand_tuner_constants_v7_t v7;
  } k;
  unsigned char guard[512];
} tn_block;

static size_t tn_block_size(int version) {
  return version >= 7 ? sizeof(strand_tuner_constants_v7_t) : sizeof(strand_tuner_constants_v5_t);
}

/* Bytes after the version's block that init changed (0 = none). */
static size_t tn_overrun(int version) {
  const unsigned char *p = (const unsigned char *)&tn_block + tn_block_size(version);
  const unsigned char *end = (const unsigned char *)&tn_block + sizeof tn_block;
  size_t bad = 0;
  for (; p < end; p++) bad += *p != TN_GUARD;
  return bad;
}

static strand_result_t tn_init(const tn_t *t, void **ctx, size_t nranks, size_t nnodes) {
  static strand_nvl_domain_info_v5_t nvl;
  nvl = (strand_nvl_domain_info_v5_t){1, 1, 1};
  memset(&tn_block, TN_GUARD, sizeof tn_block);
  /* Plausible non-zero model inputs: a tuner may read (and change) them. */
  double *d = (double *)(void *)&tn_block.k;
  for (size_t i = 0; i < tn_block_size(t->version) / sizeof(double); i++)
    d[i] = 1.0 + (double)(i % 7);
  *ctx = NULL;
  if (t->version >= 7) {
    const strand_tuner_v7_t *tv = t->raw;
    return tv->init(ctx, 0x7475726e6572ULL + nranks, nranks, nnodes, conform_logger_fn(), &nvl,
                    &tn_block.k.v7);
  }
  if (t->version >= 5) {
    const strand_tuner_v5_t *tv = t->raw;
    return tv->init(ctx, 0x7475726e6572ULL + nranks, nranks, nnodes, conform_logger_fn(), &nvl,
                    &tn_block.k.v5);
  }
  const strand_tuner_v4_t *tv = t->raw; /* v2..v4 share init's signature */
  return tv->init(nranks, nnodes, conform_logger_fn(), ctx);
}

static strand_result_t tn_finalize(const tn_t *t, void *ctx) {
  const tn_slots_t *s = t->raw;
  if (s->finalize == NULL) return STRAND_SUCCESS; /* tuner.table-complete reports it */
  strand_result_t (*fin)(void *) = ((const strand_tuner_v5_t *)t->raw)->finalize;
  return fin(ctx);
}

/* ---- tuner.table-complete ---- */

static conform_status_t tuner_table_complete(conform_ctx_t *c) {
  tn_t t;
  if (!tn_find(c, &t))
    return conform_skip(c, "the library exports no ncclTunerPlugin_v* symbol (NCCL keeps its own "
                           "tuning)");
  int found = 0;
  for (int v = 2; v <= 7; v++) {
    char sym[32];
    snprintf(sym, sizeof sym, "ncclTunerPlugin_v%d", v);
    const tn_slots_t *s = dlsym(c->plugin->dl, sym);
    if (s == NULL) continue;
    found++;
    if (s->name == NULL || s->name[0] == '\0')
      conform_fail(c, "%s.name is %s: NCCL logs it and dereferences it", sym,
                   s->name ? "empty" : "NULL");
    if (s->init == NULL || s->getCollInfo == NULL || s->finalize == NULL)
      conform_fail(c, "%s: init %s, getCollInfo %s, %s %s — NCCL calls all three unconditionally",
                   sym, s->init ? "set" : "NULL", s->getCollInfo ? "set" : "NULL",
                   v >= 5 ? "finalize" : "destroy", s->finalize ? "set" : "NULL");
  }
  if (c->status == CONFORM_FAIL) return CONFORM_FAIL;
  conform_note(c, "%d tuner version(s); the newest core would load v%d (\"%s\")", found, t.version,
               t.name);
  return CONFORM_PASS;
}

/* ---- tuner.init-finalize ---- */

static conform_status_t tuner_init_finalize(conform_ctx_t *c) {
  tn_t t;
  if (!tn_find(c, &t)) return conform_skip(c, "the library exports no ncclTunerPlugin_v* symbol");
  const tn_slots_t *s = t.raw;
  if (s->init == NULL || s->finalize == NULL)
    return conform_fail(c, "ncclTunerPlugin_v%d has init %s and finalize %s", t.version,
                        s->init ? "set" : "NULL", s->finalize ? "set" : "NULL");
  /* Communicator shapes NCCL creates: one rank, one node, across nodes; two live at once. */
  static const size_t shapes[][2] = {{1, 1}, {8, 1}, {2, 2}, {16, 2}, {64, 8}};
  void *ctx[5];
  const int n = (int)(sizeof shapes / sizeof shapes[0]);
  int live = 0;
  for (int i = 0; i < n; i++) {
    conform_phase(c, "tuner v%d init(nRanks %zu, nNodes %zu)", t.version, shapes[i][0],
                  shapes[i][1]);
    strand_result_t r = tn_init(&t, &ctx[i], shapes[i][0], shapes[i][1]);
    size_t over = t.version >= 5 ? tn_overrun(t.version) : 0;
    if (over) {
      conform_fail(c, "tuner v%d init(nRanks %zu, nNodes %zu) wrote %zu byte(s) past the %zu-byte "
                   "constants block: in NCCL that is the core's memory (a tuner built for another "
                   "version's layout? v7 has 5 compute-capability rows, v5/v6 4)", t.version,
                   shapes[i][0], shapes[i][1], over, tn_block_size(t.version));
      if (r == STRAND_SUCCESS) live++;
      break;
    }
    if (r != STRAND_SUCCESS) {
      conform_fail(c, "tuner init(nRanks %zu, nNodes %zu) returned %s: NCCL fails the "
                   "communicator's init", shapes[i][0], shapes[i][1], conform_result_str(r));
      break;
    }
    live++;
  }
  for (int i = live - 1; i >= 0; i--) {
    conform_phase(c, "tuner v%d finalize", t.version);
    strand_result_t r = tn_finalize(&t, ctx[i]);
    if (r != STRAND_SUCCESS)
      conform_fail(c, "tuner finalize (context %d of %d) returned %s: NCCL fails the "
                   "communicator's destroy", i + 1, live, conform_result_str(r));
  }
  return c->status == CONFORM_FAIL ? CONFORM_FAIL : CONFORM_PASS;
}

/* ---- tuner.cost-table ---- */

/* Cost tables as the core builds them (spec §11.3). */
enum { T_RING_TREE, T_RING_SIMPLE_ONLY, T_ONE_RANK, T_EVERYTHING, T_COLLNET_CHEAPEST, T_COUNT };
static const char *const table_names[T_COUNT] = {
    "ring+tree (2 nodes)", "only ring/SIMPLE runnable", "one rank (ring/SIMPLE = 0)",
    "every algorithm runnable", "CollNet Direct cheapest"};

static void make_table(int kind, size_t bytes, float t[NA][NP]) {
  for (int a = 0; a < NA; a++)
    for (int p = 0; p < NP; p++) t[a][p] = IGN;
  float scale = 1.0f; /* grows with log2(bytes), like the model's times do */
  for (size_t b = bytes; b > 1; b >>= 1) scale += 1.0f;
  switch (kind) {
    case T_RING_TREE:
      for (int p = 0; p < NP; p++) {
        t[STRAND_ALGO_RING][p] = 10.0f * scale + (float)p;
        t[STRAND_ALGO_TREE][p] = 12.0f * scale + (float)p;
      }
      break;
    case T_RING_SIMPLE_ONLY:
      t[STRAND_ALGO_RING][STRAND_PROTO_SIMPLE] = 5.0f * scale;
      break;
    case T_ONE_RANK:
      t[STRAND_ALGO_RING][STRAND_PROTO_SIMPLE] = 0.0f;
      break;
    case T_EVERYTHING:
      for (int a = 0; a < NA; a++)
        for (int p = 0; p < NP; p++) t[a][p] = scale * (float)(1 + a) + (float)p;
      break;
    case T_COLLNET_CHEAPEST:
      for (int p = 0; p < NP; p++) t[STRAND_ALGO_RING][p] = 20.0f * scale;
      t[STRAND_ALGO_COLLNET_DIRECT][STRAND_PROTO_SIMPLE] = 1.0f;
      break;
  }
}

/* One call; returns 0 if the answer is one NCCL can run, else records a FAIL and returns -1. */
static int ask(conform_ctx_t *c, const tn_t *t, void *ctx, int kind, int func, size_t bytes) {
  /* The table sits between two guard zones, so writes past either end are seen. */
  enum { GUARD = 8 };
  union {
    float f[GUARD + NA * NP + GUARD];
    unsigned char b[(GUARD + NA * NP + GUARD) * sizeof(float)];
  } frame, before;
  memset(frame.b, 0xA5, sizeof frame.b);
  float(*table)[NP] = (float(*)[NP])(void *)&frame.f[GUARD];
  make_table(kind, bytes, table);
  memcpy(&before, &frame, sizeof frame);
  int nch = 0, algo = STRAND_ALGO_UNDEF, proto = STRAND_PROTO_UNDEF;
  strand_result_t r;
  conform_phase(c, "tuner v%d getCollInfo(func %d, %zu bytes, %s)", t->version, func, bytes,
                table_names[kind]);
  if (t->version >= 4) {
    const strand_tuner_v4_t *tv = t->raw; /* v4..v7 share getCollInfo's signature */
    r = tv->getCollInfo(ctx, func, bytes, 1, (float **)(void *)table, NA, NP, 0, &nch);
  } else if (t->version == 3) {
    const strand_tuner_v3_t *tv = t->raw;
    r = tv->getCollInfo(ctx, func, bytes, 1, (float **)(void *)table, NA, NP, &nch);
  } else {
    const strand_tuner_v2_t *tv = t->raw;
    int collnet = table[STRAND_ALGO_COLLNET_CHAIN][STRAND_PROTO_SIMPLE] != IGN;
    int nvls = table[STRAND_ALGO_NVLS][STRAND_PROTO_SIMPLE] != IGN;
    r = tv->getCollInfo(ctx, func, bytes, collnet, nvls, 1, &algo, &proto, &nch);
  }
  const char *what = table_names[kind];
  if (r != STRAND_SUCCESS) {
    conform_fail(c, "getCollInfo(func %d, %zu bytes, %s) returned %s: NCCL fails the collective "
                 "(it does not fall back); return success and leave the outputs unchanged when "
                 "unsure", func, bytes, what, conform_result_str(r));
    return -1;
  }
  for (int i = 0; i < GUARD; i++) {
    if (memcmp(&frame.f[i], &before.f[i], sizeof(float)) != 0 ||
        memcmp(&frame.f[GUARD + NA * NP + i], &before.f[GUARD + NA * NP + i], sizeof(float)) != 0) {
      conform_fail(c, "getCollInfo(func %d, %zu bytes, %s) wrote outside the %dx%d cost table "
                   "(numAlgo x numProto): that is NCCL's stack", func, bytes, what, NA, NP);
      return -1;
    }
  }
  int runnable = 0;
  for (int a = 0; a < NA; a++) {
    for (int p = 0; p < NP; p++) {
      float was = before.f[GUARD + a * NP + p], now = table[a][p];
      if (was == IGN && now != IGN) {
        conform_fail(c, "getCollInfo(func %d, %zu bytes, %s) wrote %g into cost entry algorithm %d "
                     "protocol %d, which the core marked ignored (-1): NCCL would run a "
                     "combination it ruled out", func, bytes, what, (double)now, a, p);
        return -1;
      }
      if (now >= 0) runnable++;
    }
  }
  if (runnable == 0) {
    conform_fail(c, "getCollInfo(func %d, %zu bytes, %s) left no entry >= 0: NCCL fails with \"no "
                 "algorithm/protocol available\"", func, bytes, what);
    return -1;
  }
  if (nch < 0 || nch > STRAND_TUNER_MAX_CHANNELS) {
    conform_fail(c, "getCollInfo(func %d, %zu bytes, %s) answered nChannels %d; NCCL takes 0 "
                 "(its own choice) or 1..%d and does not check", func, bytes, what, nch,
                 STRAND_TUNER_MAX_CHANNELS);
    return -1;
  }
  if (t->version == 2 && !((algo == STRAND_ALGO_UNDEF && proto == STRAND_PROTO_UNDEF) ||
                           (algo >= 0 && algo < NA && proto >= 0 && proto < NP))) {
    conform_fail(c, "v2 getCollInfo(func %d, %zu bytes) answered algorithm %d protocol %d: both "
                 "-1, or a valid pair", func, bytes, algo, proto);
    return -1;
  }
  return 0;
}

static conform_status_t tuner_cost_table(conform_ctx_t *c) {
  tn_t t;
  if (!tn_find(c, &t)) return conform_skip(c, "the library exports no ncclTunerPlugin_v* symbol");
  const tn_slots_t *s = t.raw;
  if (s->init == NULL || s->getCollInfo == NULL)
    return conform_fail(c, "ncclTunerPlugin_v%d lacks init or getCollInfo", t.version);
  static const size_t shapes[][2] = {{1, 1}, {8, 1}, {2, 2}, {16, 4}};
  static const size_t sizes[] = {8, 4096, 65536, 1u << 20, 16u << 20, 1u << 30};
  int calls = 0;
  for (size_t sh = 0; sh < sizeof shapes / sizeof shapes[0]; sh++) {
    void *ctx = NULL;
    strand_result_t r = tn_init(&t, &ctx, shapes[sh][0], shapes[sh][1]);
    if (r != STRAND_SUCCESS)
      return conform_fail(c, "tuner init(nRanks %zu, nNodes %zu) returned %s (see "
                          "tuner.init-finalize)", shapes[sh][0], shapes[sh][1],
                          conform_result_str(r));
    int bad = 0;
    for (int kind = 0; kind < T_COUNT && !bad; kind++) {
      if (kind == T_ONE_RANK && shapes[sh][0] != 1) continue;
      if (kind != T_ONE_RANK && shapes[sh][0] == 1) continue;
      for (int func = STRAND_FUNC_BROADCAST; func <= STRAND_FUNC_ALLREDUCE && !bad; func++) {
        for (size_t i = 0; i < sizeof sizes / sizeof sizes[0] && !bad; i++) {
          bad = ask(c, &t, ctx, kind, func, sizes[i]) != 0;
          calls++;
        }
      }
    }
    r = tn_finalize(&t, ctx);
    if (r != STRAND_SUCCESS) conform_fail(c, "tuner finalize returned %s", conform_result_str(r));
    if (bad || c->status == CONFORM_FAIL) return CONFORM_FAIL;
  }
  conform_note(c, "v%d \"%s\": %d getCollInfo calls, every answer runnable", t.version, t.name,
               calls);
  return CONFORM_PASS;
}

const conform_check_t conform_checks_tuner[] = {
    {"tuner.table-complete", "§11.1, §11.4",
     "every exported ncclTunerPlugin_vN has a name and init, getCollInfo, finalize/destroy",
     tuner_table_complete, 10, CONFORM_F_NO_INIT | CONFORM_F_ABI_INDEPENDENT},
    {"tuner.init-finalize", "§11.2",
     "init succeeds for 1-rank, 1-node and multi-node communicators, five live at once; finalize "
     "succeeds", tuner_init_finalize, 20, CONFORM_F_ABI_INDEPENDENT},
    {"tuner.cost-table", "§11.3",
     "getCollInfo over core-shaped cost tables x 5 collectives x 6 sizes: success, nothing written "
     "outside the table or into an ignored entry, an entry >= 0 left, nChannels 0..64",
     tuner_cost_table, 30, CONFORM_F_ABI_INDEPENDENT},
    {0},
};
