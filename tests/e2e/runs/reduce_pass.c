/* Issue 26 item 3, 2026-11-29 (session 13): does reducing a CollNet block's n contributions in one
 * pass over memory pay, against the n-1 passes collnet_stub makes (cs_reduce_block: strand_reduce3
 * of the first two, then strand_reduce of each further one)? Session 12 named it as a next step
 * (80-108 us of a 4-rank call's chain). Three ways over the same float32 sum, one core:
 *   pairwise  the stub's way, through the SDK (plugin_api/src/reduce.c);
 *   blocked   the same SDK calls on 16 KiB or 256 KiB blocks of the result, every source in turn, so
 *             the result stays in cache between sources;
 *   fused     one loop, out[i] = s0[i] + s1[i] + ... (the sources read once, the result written once).
 * Warm: the best of 400 runs back to back. Cold: the best of 60, a 64 MiB buffer written before each
 * run (what a block that the socket's receive copy has just written is NOT: this is the bound).
 * Build and run: tests/e2e/runs/reduce_pass.sh. Prints microseconds per block. */
#define _GNU_SOURCE
/* the loop vectoriser, as plugin_api/src/reduce.c asks for it, for the fused loop too */
#pragma GCC optimize("tree-loop-vectorize", "vect-cost-model=cheap")
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "strand/reduce.h"

static double now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static void pairwise(float *out, float *const *in, int n, size_t cnt) {
  strand_reduce3(STRAND_FLOAT32, STRAND_SUM, out, in[0], in[1], cnt);
  for (int j = 2; j < n; j++) strand_reduce(STRAND_FLOAT32, STRAND_SUM, out, in[j], cnt);
}

static void blocked(float *out, float *const *in, int n, size_t cnt, size_t block_elems) {
  for (size_t i = 0; i < cnt; i += block_elems) {
    size_t m = cnt - i < block_elems ? cnt - i : block_elems;
    strand_reduce3(STRAND_FLOAT32, STRAND_SUM, out + i, in[0] + i, in[1] + i, m);
    for (int j = 2; j < n; j++) strand_reduce(STRAND_FLOAT32, STRAND_SUM, out + i, in[j] + i, m);
  }
}

static void fused(float *restrict out, float *const *in, int n, size_t cnt) {
  const float *restrict a = in[0], *restrict b = in[1], *restrict c = n > 2 ? in[2] : NULL,
                        *restrict d = n > 3 ? in[3] : NULL;
  if (n == 2)
    for (size_t i = 0; i < cnt; i++) out[i] = a[i] + b[i];
  else if (n == 3)
    for (size_t i = 0; i < cnt; i++) out[i] = (a[i] + b[i]) + c[i];
  else
    for (size_t i = 0; i < cnt; i++) out[i] = ((a[i] + b[i]) + c[i]) + d[i];
}

int main(int argc, char **argv) {
  size_t bytes = argc > 1 ? strtoul(argv[1], NULL, 0) : 458752;
  int n = argc > 2 ? atoi(argv[2]) : 4;
  if (n < 2 || n > 4) return fprintf(stderr, "2..4 sources\n"), 2;
  size_t cnt = bytes / 4, flush_bytes = 64u << 20;
  float *in[4], *out = aligned_alloc(64, bytes), *want = aligned_alloc(64, bytes);
  char *flush = malloc(flush_bytes);
  for (int j = 0; j < n; j++) {
    in[j] = aligned_alloc(64, bytes);
    for (size_t i = 0; i < cnt; i++) in[j][i] = (float)((i * 7 + (size_t)j * 13) % 97) * 0.25f;
  }
  pairwise(want, in, n, cnt);
  const char *names[4] = {"pairwise", "blocked16K", "blocked256K", "fused"};
  for (int cold = 0; cold < 2; cold++) {
    int reps = cold ? 60 : 400;
    printf("%s %zu B x %d:", cold ? "cold" : "warm", bytes, n);
    for (int v = 0; v < 4; v++) {
      double best = 1e9;
      for (int r = 0; r < reps; r++) {
        if (cold) memset(flush, r, flush_bytes);
        double t0 = now_s();
        if (v == 0) pairwise(out, in, n, cnt);
        else if (v == 1) blocked(out, in, n, cnt, 4096);
        else if (v == 2) blocked(out, in, n, cnt, 65536);
        else fused(out, in, n, cnt);
        double t = now_s() - t0;
        if (t < best) best = t;
      }
      if (memcmp(out, want, bytes) != 0) return fprintf(stderr, "%s: wrong result\n", names[v]), 1;
      printf(" %s %.1f us", names[v], best * 1e6);
    }
    printf("\n");
  }
  return 0;
}
