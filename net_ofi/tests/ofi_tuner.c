/* Test of strand-ofi's tuner and reported speed (docs/plugins/ofi.md, "Rails"), as NCCL 2.28
 * drives them: the net table's init first, then ncclTunerPlugin_v5 from the same library.
 *   - STRAND_OFI_SPEED_MBPS is the speed getProperties reports;
 *   - with STRAND_OFI_TUNER_CHANNELS="1K:1,1M:2:simple,64M:0" a multi-node communicator gets 1
 *     channel up to 1 KiB, 2 up to 1 MiB, NCCL's count (0, untouched) up to 64 MiB and above, for
 *     ring and tree alike; from 1 KiB to 1 MiB an all-reduce gets Simple made the cheapest of the
 *     algorithm NCCL picked (cost 0), unless NCCL marked it ignored; nothing else in the cost
 *     table is written; CollNet/NVLS picks, single-node communicators and an answer NCCL already
 *     made are left alone;
 *   - OFI_TUNER_TREE=1: with STRAND_OFI_TUNER_TREE_BYTES=64 (and no bands), an all-reduce of at
 *     most 64 bytes for which NCCL's cheapest entry is Ring gets Tree's cheapest runnable protocol
 *     made cost 0 and nothing else written; larger ones, other collectives, a Tree or CollNet pick,
 *     a Tree row NCCL ignored and an answer NCCL already made are left alone; the user's 64 also
 *     wins at 4 nodes (where the default is no Tree), beside the automatic bands;
 *     (STRAND_OFI_TUNER_TREE_BYTES=0 set: the user's 0 wins over the 2-node default); the same
 *     user bands, not the automatic ones, at 4 nodes;
 *   - OFI_TUNER_DEFAULTS=1: neither variable set (one rail, so no rails-profile bands): at 2
 *     nodes an all-reduce up to 1 KiB goes to Tree and no channel count is given; at 3 and 4
 *     nodes the bands 16K:1,64K:1:ll,1M:2:simple,16M:2:simple and no Tree; at 1 node nothing; the INFO
 *     line says which values are automatic; before the net side is up nothing changes;
 *   - OFI_TUNER_BAD=1: a malformed band list ("1K:1,512:2": sizes must increase) fails the net
 *     init and then the tuner's init (which reads it itself when the net side is not up), each
 *     with a WARN naming STRAND_OFI_TUNER_CHANNELS and the bad item.
 * Usage: ofi_tuner PLUGIN.so (FI_PROVIDER selects the provider). Exit 0 = all passed. */
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plugin_test.h"
#include "strand/abi/abi.h"

static bool saw_bands_warning;
static char tuner_info[1024]; /* the last INFO line of a tuner init ("tuner (ncclTunerPlugin...") */
static char bands_warning[1024]; /* the last WARN naming STRAND_OFI_TUNER_CHANNELS */

static void logger(strand_log_level_t level, unsigned long flags, const char *file, int line,
                   const char *fmt, ...) {
  (void)flags, (void)file, (void)line;
  char buf[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  if (level == STRAND_LOG_INFO && strstr(buf, "tuner (ncclTunerPlugin") != NULL)
    snprintf(tuner_info, sizeof tuner_info, "%s", buf);
  if (level <= STRAND_LOG_WARN) {
    if (strstr(buf, "STRAND_OFI_TUNER_CHANNELS")) {
      saw_bands_warning = true;
      snprintf(bands_warning, sizeof bands_warning, "%s", buf);
    }
    fprintf(stderr, "%s\n", buf);
  }
}

/* The tuner's answer for an all-reduce of `nBytes` when `algo` with LL is the cheapest runnable
 * entry (Simple ignored when simple_ignored). *simple_zeroed: the tuner made `algo` with Simple
 * cost 0; every other entry must come back as it went in. */
static int channels_for_p(const strand_tuner_v5_t *t, void *tctx, size_t nBytes, int algo,
                          int preset, bool simple_ignored, bool *simple_zeroed) {
  float table[STRAND_TUNER_NUM_ALGORITHMS][STRAND_TUNER_NUM_PROTOCOLS];
  for (int a = 0; a < STRAND_TUNER_NUM_ALGORITHMS; a++)
    for (int p = 0; p < STRAND_TUNER_NUM_PROTOCOLS; p++) table[a][p] = 100.0f + (float)(a * 3 + p);
  table[algo][STRAND_PROTO_LL] = 1.0f;
  if (simple_ignored) table[algo][STRAND_PROTO_SIMPLE] = STRAND_ALGO_PROTO_IGNORE;
  float before[STRAND_TUNER_NUM_ALGORITHMS][STRAND_TUNER_NUM_PROTOCOLS];
  memcpy(before, table, sizeof table);
  int n = preset;
  PT_CHECK(t->getCollInfo(tctx, STRAND_FUNC_ALLREDUCE, nBytes, 1, (float **)(void *)table,
                          STRAND_TUNER_NUM_ALGORITHMS, STRAND_TUNER_NUM_PROTOCOLS, 0,
                          &n) == STRAND_SUCCESS,
           "getCollInfo(%zu bytes, algo %d)", nBytes, algo);
  *simple_zeroed = table[algo][STRAND_PROTO_SIMPLE] == 0.0f;
  table[algo][STRAND_PROTO_SIMPLE] = before[algo][STRAND_PROTO_SIMPLE];
  PT_CHECK(memcmp(before, table, sizeof table) == 0, "the cost table changed (%zu bytes)", nBytes);
  return n;
}

/* As channels_for_p, and the table must come back untouched. */
static int channels_for(const strand_tuner_v5_t *t, void *tctx, size_t nBytes, int algo,
                        int preset) {
  bool zeroed = false;
  int n = channels_for_p(t, tctx, nBytes, algo, preset, false, &zeroed);
  PT_CHECK(!zeroed, "%zu bytes, algo %d: Simple made cheapest outside its band", nBytes, algo);
  return n;
}

/* OFI_TUNER_TREE=1: one getCollInfo on a table whose cheapest entry is `algo` with LL (Tree's row
 * ignored when tree_ignored); returns the Tree protocol the tuner made cost 0 (-1: none), and
 * checks that nothing else changed. */
static int tree_zeroed_ch(const strand_tuner_v5_t *t, void *tctx, strand_tuner_func_t func,
                          size_t nBytes, int algo, bool tree_ignored, int preset, int want_n) {
  float table[STRAND_TUNER_NUM_ALGORITHMS][STRAND_TUNER_NUM_PROTOCOLS];
  for (int a = 0; a < STRAND_TUNER_NUM_ALGORITHMS; a++)
    for (int p = 0; p < STRAND_TUNER_NUM_PROTOCOLS; p++) table[a][p] = 100.0f + (float)(a * 3 + p);
  table[STRAND_ALGO_TREE][STRAND_PROTO_LL128] = 50.0f; /* Tree's cheapest: LL128, not LL */
  table[algo][STRAND_PROTO_LL] = 1.0f;
  if (tree_ignored)
    for (int p = 0; p < STRAND_TUNER_NUM_PROTOCOLS; p++)
      table[STRAND_ALGO_TREE][p] = STRAND_ALGO_PROTO_IGNORE;
  float before[STRAND_TUNER_NUM_ALGORITHMS][STRAND_TUNER_NUM_PROTOCOLS];
  memcpy(before, table, sizeof table);
  int n = preset;
  PT_CHECK(t->getCollInfo(tctx, func, nBytes, 1, (float **)(void *)table,
                          STRAND_TUNER_NUM_ALGORITHMS, STRAND_TUNER_NUM_PROTOCOLS, 0,
                          &n) == STRAND_SUCCESS,
           "getCollInfo(func %d, %zu bytes, algo %d)", (int)func, nBytes, algo);
  PT_CHECK(n == want_n, "nChannels %d, want %d", n, want_n);
  int zeroed = -1;
  for (int p = 0; p < STRAND_TUNER_NUM_PROTOCOLS; p++)
    if (table[STRAND_ALGO_TREE][p] != before[STRAND_ALGO_TREE][p]) {
      PT_CHECK(table[STRAND_ALGO_TREE][p] == 0.0f && zeroed < 0, "Tree entry %d written as %f", p,
               (double)table[STRAND_ALGO_TREE][p]);
      zeroed = p;
      table[STRAND_ALGO_TREE][p] = before[STRAND_ALGO_TREE][p];
    }
  PT_CHECK(memcmp(before, table, sizeof table) == 0, "an entry other than Tree's changed");
  return zeroed;
}

/* As tree_zeroed_ch where no band applies: the channel count comes back as NCCL's (preset). */
static int tree_zeroed(const strand_tuner_v5_t *t, void *tctx, strand_tuner_func_t func,
                       size_t nBytes, int algo, bool tree_ignored, int preset) {
  return tree_zeroed_ch(t, tctx, func, nBytes, algo, tree_ignored, preset, preset);
}

static int tree_case(const strand_net_v12_t *net, const strand_tuner_v5_t *t) {
  void *ctx = NULL, *multi = NULL;
  PT_CHECK(net->init(&ctx, 0x7e58, NULL, logger, NULL) == STRAND_SUCCESS, "net init");
  PT_CHECK(t->init(&multi, 3, 2, 2, logger, NULL, NULL) == STRAND_SUCCESS, "tuner init, 2 nodes");
  const int ar = STRAND_FUNC_ALLREDUCE, ring = STRAND_ALGO_RING, tree = STRAND_ALGO_TREE;
  PT_CHECK(tree_zeroed(t, multi, ar, 8, ring, false, 0) == STRAND_PROTO_LL128,
           "8 B ring all-reduce not moved to Tree's cheapest protocol (LL128)");
  PT_CHECK(tree_zeroed(t, multi, ar, 64, ring, false, 0) == STRAND_PROTO_LL128,
           "64 B (the limit) not moved to Tree");
  PT_CHECK(tree_zeroed(t, multi, ar, 65, ring, false, 0) < 0, "65 B moved to Tree");
  PT_CHECK(tree_zeroed(t, multi, STRAND_FUNC_ALLGATHER, 8, ring, false, 0) < 0,
           "an all-gather moved to Tree");
  PT_CHECK(tree_zeroed(t, multi, ar, 8, tree, false, 0) < 0, "a Tree pick rewritten");
  PT_CHECK(tree_zeroed(t, multi, ar, 8, STRAND_ALGO_COLLNET_DIRECT, false, 0) < 0,
           "a CollNet pick moved to Tree");
  PT_CHECK(tree_zeroed(t, multi, ar, 8, ring, true, 0) < 0, "an ignored Tree row made runnable");
  PT_CHECK(tree_zeroed(t, multi, ar, 8, ring, false, 4) < 0, "NCCL's answer overridden");
  /* At 4 nodes the default is no Tree: the user's 64 must still apply, beside the automatic bands
   * (one channel up to 16 KiB, NCCL's protocol). */
  void *four = NULL;
  PT_CHECK(t->init(&four, 4, 4, 4, logger, NULL, NULL) == STRAND_SUCCESS, "tuner init, 4 nodes");
  PT_CHECK(tree_zeroed_ch(t, four, ar, 64, ring, false, 0, 1) == STRAND_PROTO_LL128,
           "4 nodes: the user's STRAND_OFI_TUNER_TREE_BYTES=64 not applied");
  PT_CHECK(tree_zeroed_ch(t, four, ar, 65, ring, false, 0, 1) < 0, "4 nodes: 65 B moved to Tree");
  PT_CHECK(strstr(tuner_info, "up to 64 bytes where NCCL picked Ring (STRAND_OFI_TUNER_TREE_BYTES)"),
           "4 nodes: INFO does not name the user's Tree value: %s", tuner_info);
  PT_CHECK(t->finalize(four) == STRAND_SUCCESS, "tuner finalize, 4 nodes");
  PT_CHECK(t->finalize(multi) == STRAND_SUCCESS, "tuner finalize");
  PT_CHECK(net->finalize(ctx) == STRAND_SUCCESS, "net finalize");
  printf("tree: %d failure(s)\n", pt_failures);
  return pt_failures ? 1 : 0;
}

/* One ring all-reduce of nBytes on a table whose cheapest entry is Ring with LL: the channels the
 * tuner gave, and which of Ring's protocols it made cost 0 (-1: none); every other entry must
 * come back as it went in, and at most one entry may be written (to 0). */
static int ring_answer(const strand_tuner_v5_t *t, void *tctx, size_t nBytes, int *proto_zeroed) {
  const int ring = STRAND_ALGO_RING;
  float table[STRAND_TUNER_NUM_ALGORITHMS][STRAND_TUNER_NUM_PROTOCOLS];
  for (int a = 0; a < STRAND_TUNER_NUM_ALGORITHMS; a++)
    for (int p = 0; p < STRAND_TUNER_NUM_PROTOCOLS; p++) table[a][p] = 100.0f + (float)(a * 3 + p);
  table[ring][STRAND_PROTO_LL] = 1.0f;
  float before[STRAND_TUNER_NUM_ALGORITHMS][STRAND_TUNER_NUM_PROTOCOLS];
  memcpy(before, table, sizeof table);
  int n = 0;
  PT_CHECK(t->getCollInfo(tctx, STRAND_FUNC_ALLREDUCE, nBytes, 1, (float **)(void *)table,
                          STRAND_TUNER_NUM_ALGORITHMS, STRAND_TUNER_NUM_PROTOCOLS, 0,
                          &n) == STRAND_SUCCESS,
           "getCollInfo(%zu bytes)", nBytes);
  *proto_zeroed = -1;
  for (int p = 0; p < STRAND_TUNER_NUM_PROTOCOLS; p++)
    if (table[ring][p] != before[ring][p]) {
      PT_CHECK(table[ring][p] == 0.0f && *proto_zeroed < 0, "%zu bytes: Ring entry %d written as %f",
               nBytes, p, (double)table[ring][p]);
      *proto_zeroed = p;
      table[ring][p] = before[ring][p];
    }
  PT_CHECK(memcmp(before, table, sizeof table) == 0, "%zu bytes: an entry other than Ring's changed",
           nBytes);
  return n;
}

/* One ring all-reduce of nBytes with neither variable set: the channels given, the protocol made
 * cheapest (-1: none) and whether it went to Tree. A failure is counted and printed; the caller
 * goes on with the next case. */
static int default_case(const strand_tuner_v5_t *t, void *tctx, const char *label, size_t nBytes,
                        int want_channels, int want_proto, bool want_tree) {
  if (want_tree) { /* tree_zeroed checks nChannels stays NCCL's (no band at 2 nodes) */
    int z = tree_zeroed(t, tctx, STRAND_FUNC_ALLREDUCE, nBytes, STRAND_ALGO_RING, false, 0);
    PT_CHECK(z == STRAND_PROTO_LL128, "%s, %zu B: not moved to Tree", label, nBytes);
    return 0;
  }
  int proto = -1;
  int n = ring_answer(t, tctx, nBytes, &proto);
  PT_CHECK(n == want_channels && proto == want_proto,
           "%s, %zu B: %d channels, protocol %d made cheapest; want %d, %d", label, nBytes, n,
           proto, want_channels, want_proto);
  return 0;
}

static int defaults_case(const strand_net_v12_t *net, const strand_tuner_v5_t *t) {
  void *ctx = NULL, *two = NULL, *three = NULL, *four = NULL, *one = NULL, *idle = NULL;
  /* Before the net side is up (NCCL loaded the tuner, another net carries the traffic): no default
   * applies, and the INFO line says so. */
  PT_CHECK(t->init(&idle, 4, 2, 2, logger, NULL, NULL) == STRAND_SUCCESS, "tuner init, no net");
  PT_CHECK(strstr(tuner_info, "leaves NCCL's choices unchanged (strand-ofi's network is not in use"),
           "net side unused: INFO does not say NCCL's choices stay: %s", tuner_info);
  (void)default_case(t, idle, "no net, 2 nodes", 8, 0, -1, false);
  (void)default_case(t, idle, "no net, 2 nodes", 2 << 20, 0, -1, false);
  PT_CHECK(t->finalize(idle) == STRAND_SUCCESS, "tuner finalize, no net");
  PT_CHECK(net->init(&ctx, 0x7e59, NULL, logger, NULL) == STRAND_SUCCESS, "net init");
  PT_CHECK(t->init(&two, 5, 2, 2, logger, NULL, NULL) == STRAND_SUCCESS, "tuner init, 2 nodes");
  PT_CHECK(strstr(tuner_info, "up to 1024 bytes where NCCL picked Ring (automatic: 2 nodes)") &&
               strstr(tuner_info, "channels by size NCCL's (automatic;"),
           "2 nodes: INFO does not say Tree 1024 and NCCL's channels are automatic: %s",
           tuner_info);
  PT_CHECK(t->init(&three, 6, 3, 3, logger, NULL, NULL) == STRAND_SUCCESS, "tuner init, 3 nodes");
  PT_CHECK(t->init(&four, 7, 8, 4, logger, NULL, NULL) == STRAND_SUCCESS, "tuner init, 4 nodes");
  PT_CHECK(strstr(tuner_info, "(automatic: 3 nodes or more;") &&
               strstr(tuner_info, "up to 0 bytes where NCCL picked Ring (automatic: 0 at 3 nodes"),
           "4 nodes: INFO does not say the bands and no Tree are automatic: %s", tuner_info);
  PT_CHECK(t->init(&one, 8, 4, 1, logger, NULL, NULL) == STRAND_SUCCESS, "tuner init, 1 node");
  PT_CHECK(strstr(tuner_info, "leaves NCCL's choices unchanged (single-node"),
           "1 node: INFO does not say NCCL's choices stay: %s", tuner_info);
  /* The 3-node bands 16K:1,64K:1:ll,1M:2:simple,16M:2:simple (-1: no protocol written). */
  static const struct { size_t bytes; int ch; int proto; } wide[] = {
      {8, 1, -1},          {16 << 10, 1, -1},        {(16 << 10) + 1, 1, STRAND_PROTO_LL},
      {64 << 10, 1, STRAND_PROTO_LL},                {(64 << 10) + 1, 2, STRAND_PROTO_SIMPLE},
      {1 << 20, 2, STRAND_PROTO_SIMPLE},             {2 << 20, 2, STRAND_PROTO_SIMPLE},
      {16 << 20, 2, STRAND_PROTO_SIMPLE},            {(16 << 20) + 4, 0, -1},
      {128 << 20, 0, -1}};
  for (size_t k = 0; k < sizeof wide / sizeof wide[0]; k++) {
    (void)default_case(t, two, "2 nodes", wide[k].bytes, 0, -1, wide[k].bytes <= 1024);
    (void)default_case(t, three, "3 nodes", wide[k].bytes, wide[k].ch, wide[k].proto, false);
    (void)default_case(t, four, "4 nodes", wide[k].bytes, wide[k].ch, wide[k].proto, false);
    (void)default_case(t, one, "1 node", wide[k].bytes, 0, -1, false);
  }
  (void)default_case(t, two, "2 nodes", 1024, 0, -1, true);
  (void)default_case(t, two, "2 nodes", 1025, 0, -1, false);
  (void)default_case(t, four, "4 nodes", 1024, 1, -1, false);
  PT_CHECK(t->finalize(two) == STRAND_SUCCESS && t->finalize(three) == STRAND_SUCCESS &&
               t->finalize(four) == STRAND_SUCCESS && t->finalize(one) == STRAND_SUCCESS,
           "tuner finalize");
  PT_CHECK(net->finalize(ctx) == STRAND_SUCCESS, "net finalize");
  printf("defaults: %d failure(s)\n", pt_failures);
  return pt_failures ? 1 : 0;
}

int main(int argc, char **argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: %s PLUGIN.so\n", argv[0]);
    return 2;
  }
  bool bad = getenv("OFI_TUNER_BAD") != NULL;
  /* The tuner's INFO line says where each value came from: let it reach logger(). */
  setenv("NCCL_DEBUG", "INFO", 1);
  setenv("NCCL_DEBUG_SUBSYS", "INIT", 1);
  if (getenv("OFI_TUNER_TREE") != NULL) {
    setenv("STRAND_OFI_TUNER_TREE_BYTES", "64", 1);
    strand_net_v12_t *net = pt_load_table(argv[1], "ncclNetPlugin_v12");
    const strand_tuner_v5_t *t = pt_load_table(argv[1], "ncclTunerPlugin_v5");
    PT_CHECK(net && t, "tables ncclNetPlugin_v12 and ncclTunerPlugin_v5 exported");
    return net && t ? tree_case(net, t) : 1;
  }
  if (getenv("OFI_TUNER_DEFAULTS") != NULL) {
    unsetenv("STRAND_OFI_TUNER_CHANNELS");
    unsetenv("STRAND_OFI_TUNER_TREE_BYTES");
    setenv("STRAND_OFI_RAILS", "1", 1); /* no rails-profile bands, whatever the CPU count */
    strand_net_v12_t *net = pt_load_table(argv[1], "ncclNetPlugin_v12");
    const strand_tuner_v5_t *t = pt_load_table(argv[1], "ncclTunerPlugin_v5");
    PT_CHECK(net && t, "tables ncclNetPlugin_v12 and ncclTunerPlugin_v5 exported");
    return net && t ? defaults_case(net, t) : 1;
  }
  setenv("STRAND_OFI_SPEED_MBPS", "123456", 1);
  if (!bad) setenv("STRAND_OFI_TUNER_TREE_BYTES", "0", 1); /* the user's 0 beats the 2-node 1024 */
  setenv("STRAND_OFI_TUNER_CHANNELS", bad ? "1K:1,512:2" : "1K:1,1M:2:simple,64M:0", 1);
  strand_net_v12_t *net = pt_load_table(argv[1], "ncclNetPlugin_v12");
  const strand_tuner_v5_t *t = pt_load_table(argv[1], "ncclTunerPlugin_v5");
  PT_CHECK(net && t, "tables ncclNetPlugin_v12 and ncclTunerPlugin_v5 exported");
  if (!net || !t) return 1;
  void *ctx = NULL;
  if (bad) {
    /* A bad value fails the init that reads it, with a WARN naming the variable and the item. */
    PT_CHECK(net->init(&ctx, 0x7e57, NULL, logger, NULL) == STRAND_INVALID_USAGE,
             "net init accepted a malformed STRAND_OFI_TUNER_CHANNELS");
    PT_CHECK(saw_bands_warning && strstr(bands_warning, "'512:2'") != NULL,
             "net init: no WARN naming STRAND_OFI_TUNER_CHANNELS and '512:2' (last: %s)",
             bands_warning);
    saw_bands_warning = false;
    bands_warning[0] = '\0';
    void *tctx = &tctx;
    PT_CHECK(t->init(&tctx, 1, 2, 2, logger, NULL, NULL) == STRAND_INVALID_USAGE,
             "tuner init accepted a malformed STRAND_OFI_TUNER_CHANNELS");
    PT_CHECK(tctx == NULL, "a failed tuner init left a context");
    PT_CHECK(saw_bands_warning && strstr(bands_warning, "'512:2'") != NULL &&
                 strstr(bands_warning, "increase") != NULL,
             "tuner init: no WARN naming STRAND_OFI_TUNER_CHANNELS, '512:2' and why (last: %s)",
             bands_warning);
    printf("bad bands: %d failure(s)\n", pt_failures);
    return pt_failures ? 1 : 0;
  }
  PT_CHECK(net->init(&ctx, 0x7e57, NULL, logger, NULL) == STRAND_SUCCESS, "net init");
  strand_props_v12_t props;
  memset(&props, 0, sizeof props);
  PT_CHECK(net->getProperties(0, &props) == STRAND_SUCCESS, "getProperties");
  PT_CHECK(props.speed == 123456, "speed %d, STRAND_OFI_SPEED_MBPS says 123456", props.speed);

  void *multi = NULL, *single = NULL, *four = NULL;
  PT_CHECK(t->init(&multi, 1, 2, 2, logger, NULL, NULL) == STRAND_SUCCESS, "tuner init, 2 nodes");
  PT_CHECK(t->init(&four, 3, 4, 4, logger, NULL, NULL) == STRAND_SUCCESS, "tuner init, 4 nodes");
  PT_CHECK(strstr(tuner_info, "(STRAND_OFI_TUNER_CHANNELS;") != NULL,
           "4 nodes: INFO does not name the user's bands: %s", tuner_info);
  PT_CHECK(t->init(&single, 2, 2, 1, logger, NULL, NULL) == STRAND_SUCCESS, "tuner init, 1 node");
  PT_CHECK(!saw_bands_warning, "WARN about a well-formed STRAND_OFI_TUNER_CHANNELS");
  static const struct { size_t bytes; int want; bool simple; } cases[] = {
      {8, 1, false}, {1024, 1, false}, {1025, 2, true}, {128 * 1024, 2, true},
      {1 << 20, 2, true}, {(1 << 20) + 4, 0, false}, {16 << 20, 0, false}, {1u << 30, 0, false}};
  for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
    bool zr = false, zt = false;
    int ring = channels_for_p(t, multi, cases[k].bytes, STRAND_ALGO_RING, 0, false, &zr);
    int tree = channels_for_p(t, multi, cases[k].bytes, STRAND_ALGO_TREE, 0, false, &zt);
    PT_CHECK(ring == cases[k].want && tree == cases[k].want,
             "%zu bytes: ring %d, tree %d channels, want %d", cases[k].bytes, ring, tree,
             cases[k].want);
    PT_CHECK(zr == cases[k].simple && zt == cases[k].simple,
             "%zu bytes: Simple made cheapest: ring %d, tree %d, want %d", cases[k].bytes, zr, zt,
             cases[k].simple);
    /* The user's bands, not the automatic ones (which give 16 MiB 2 channels), at 4 nodes. */
    int ring4 = channels_for_p(t, four, cases[k].bytes, STRAND_ALGO_RING, 0, false, &zr);
    PT_CHECK(ring4 == cases[k].want && zr == cases[k].simple,
             "4 nodes, %zu bytes: ring %d channels, Simple %d, want %d, %d", cases[k].bytes, ring4,
             zr, cases[k].want, cases[k].simple);
  }
  bool z = true;
  PT_CHECK(channels_for_p(t, multi, 4096, STRAND_ALGO_RING, 0, true, &z) == 2 && !z,
           "an ignored Simple entry was made runnable");
  PT_CHECK(channels_for(t, multi, 8, STRAND_ALGO_COLLNET_DIRECT, 0) == 0, "CollNet answered");
  PT_CHECK(channels_for(t, single, 8, STRAND_ALGO_RING, 0) == 0, "single node answered");
  PT_CHECK(channels_for(t, multi, 8, STRAND_ALGO_RING, 5) == 5, "NCCL's answer overridden");
  PT_CHECK(t->finalize(multi) == STRAND_SUCCESS && t->finalize(single) == STRAND_SUCCESS &&
               t->finalize(four) == STRAND_SUCCESS,
           "tuner finalize");
  PT_CHECK(net->finalize(ctx) == STRAND_SUCCESS, "net finalize");
  printf("bands: %d failure(s)\n", pt_failures);
  return pt_failures ? 1 : 0;
}
