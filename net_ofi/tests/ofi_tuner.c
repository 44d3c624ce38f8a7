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
 *     a Tree row NCCL ignored and an answer NCCL already made are left alone;
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
static char bands_warning[1024]; /* the last WARN naming STRAND_OFI_TUNER_CHANNELS */

static void logger(strand_log_level_t level, unsigned long flags, const char *file, int line,
                   const char *fmt, ...) {
  (void)flags, (void)file, (void)line;
  char buf[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
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
static int tree_zeroed(const strand_tuner_v5_t *t, void *tctx, strand_tuner_func_t func,
                       size_t nBytes, int algo, bool tree_ignored, int preset) {
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
  PT_CHECK(n == preset, "nChannels %d, want %d (no bands)", n, preset);
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
  PT_CHECK(t->finalize(multi) == STRAND_SUCCESS, "tuner finalize");
  PT_CHECK(net->finalize(ctx) == STRAND_SUCCESS, "net finalize");
  printf("tree: %d failure(s)\n", pt_failures);
  return pt_failures ? 1 : 0;
}

int main(int argc, char **argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: %s PLUGIN.so\n", argv[0]);
    return 2;
  }
  bool bad = getenv("OFI_TUNER_BAD") != NULL;
  if (getenv("OFI_TUNER_TREE") != NULL) {
    setenv("STRAND_OFI_TUNER_TREE_BYTES", "64", 1);
    strand_net_v12_t *net = pt_load_table(argv[1], "ncclNetPlugin_v12");
    const strand_tuner_v5_t *t = pt_load_table(argv[1], "ncclTunerPlugin_v5");
    PT_CHECK(net && t, "tables ncclNetPlugin_v12 and ncclTunerPlugin_v5 exported");
    return net && t ? tree_case(net, t) : 1;
  }
  setenv("STRAND_OFI_SPEED_MBPS", "123456", 1);
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

  void *multi = NULL, *single = NULL;
  PT_CHECK(t->init(&multi, 1, 2, 2, logger, NULL, NULL) == STRAND_SUCCESS, "tuner init, 2 nodes");
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
  }
  bool z = true;
  PT_CHECK(channels_for_p(t, multi, 4096, STRAND_ALGO_RING, 0, true, &z) == 2 && !z,
           "an ignored Simple entry was made runnable");
  PT_CHECK(channels_for(t, multi, 8, STRAND_ALGO_COLLNET_DIRECT, 0) == 0, "CollNet answered");
  PT_CHECK(channels_for(t, single, 8, STRAND_ALGO_RING, 0) == 0, "single node answered");
  PT_CHECK(channels_for(t, multi, 8, STRAND_ALGO_RING, 5) == 5, "NCCL's answer overridden");
  PT_CHECK(t->finalize(multi) == STRAND_SUCCESS && t->finalize(single) == STRAND_SUCCESS,
           "tuner finalize");
  PT_CHECK(net->finalize(ctx) == STRAND_SUCCESS, "net finalize");
  printf("bands: %d failure(s)\n", pt_failures);
  return pt_failures ? 1 : 0;
}
