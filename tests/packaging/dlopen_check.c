/* Loads a plugin .so the way NCCL does (dlopen RTLD_NOW|RTLD_LOCAL, data symbols by name) and
 * checks what a core of any version would find: ncclNetPlugin_v6..v12 with the expected name,
 * and ncclCollNetPlugin_v6..v12 present or absent as expected, and ncclTunerPlugin_v2..v7 with
 * them ("collnet" = a plugin with every optional table). Then it calls the v7 init and devices, and
 * (when there is a tuner) the v3 and v5 tuner through the export layer, so the adapters are
 * exercised across the dlopen boundary.
 *
 * usage: pkg_dlopen_check PLUGIN.so NAME collnet|nocollnet      exit 0 = all good */
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

#include "strand/abi/abi.h"

static void quiet_logger(strand_log_level_t level, unsigned long flags, const char *file, int line,
                         const char *fmt, ...) {
  (void)level; (void)flags; (void)file; (void)line; (void)fmt;
}

int main(int argc, char **argv) {
  if (argc != 4 || (strcmp(argv[3], "collnet") != 0 && strcmp(argv[3], "nocollnet") != 0)) {
    fprintf(stderr, "usage: %s PLUGIN.so NAME collnet|nocollnet\n", argv[0]);
    return 2;
  }
  const char *path = argv[1], *name = argv[2];
  const int want_collnet = strcmp(argv[3], "collnet") == 0;
  void *lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (lib == NULL) {
    fprintf(stderr, "FAIL dlopen %s: %s\n", path, dlerror());
    return 1;
  }
  int failures = 0;
  for (int v = 6; v <= 12; v++) {
    char sym[64];
    snprintf(sym, sizeof sym, "ncclNetPlugin_v%d", v);
    const char *const *table = dlsym(lib, sym); /* slot 0 of every table is `name` */
    if (table == NULL) {
      fprintf(stderr, "FAIL %s: %s missing\n", path, sym);
      failures++;
    } else if (table[0] == NULL || strcmp(table[0], name) != 0) {
      fprintf(stderr, "FAIL %s: %s.name is \"%s\", expected \"%s\"\n", path, sym,
              table[0] ? table[0] : "(null)", name);
      failures++;
    }
    snprintf(sym, sizeof sym, "ncclCollNetPlugin_v%d", v);
    table = dlsym(lib, sym);
    if (want_collnet && (table == NULL || table[0] == NULL || strcmp(table[0], name) != 0)) {
      fprintf(stderr, "FAIL %s: %s missing or misnamed\n", path, sym);
      failures++;
    } else if (!want_collnet && table != NULL) {
      fprintf(stderr, "FAIL %s: %s exported by a plugin without a CollNet table\n", path, sym);
      failures++;
    }
  }
  for (int v = 2; v <= 7; v++) {
    char sym[64];
    snprintf(sym, sizeof sym, "ncclTunerPlugin_v%d", v);
    const char *const *table = dlsym(lib, sym);
    if (want_collnet && (table == NULL || table[0] == NULL || strcmp(table[0], name) != 0)) {
      fprintf(stderr, "FAIL %s: %s missing or misnamed\n", path, sym);
      failures++;
    } else if (!want_collnet && table != NULL) {
      fprintf(stderr, "FAIL %s: %s exported by a plugin without a tuner\n", path, sym);
      failures++;
    }
  }
  strand_tuner_v5_t *t5 = dlsym(lib, "ncclTunerPlugin_v5");
  strand_tuner_v3_t *t3 = dlsym(lib, "ncclTunerPlugin_v3");
  if (want_collnet && t5 != NULL && t3 != NULL) {
    float cost[STRAND_TUNER_NUM_ALGORITHMS][STRAND_TUNER_NUM_PROTOCOLS] = {{0}};
    void *ctx = NULL;
    int nch5 = 0, nch3 = 0;
    strand_result_t rc = t5->init(&ctx, 1, 2, 2, quiet_logger, NULL, NULL);
    if (rc == STRAND_SUCCESS)
      rc = t5->getCollInfo(ctx, STRAND_FUNC_ALLREDUCE, 1024, 1, (float **)(void *)cost,
                           STRAND_TUNER_NUM_ALGORITHMS, STRAND_TUNER_NUM_PROTOCOLS, 0, &nch5);
    if (rc == STRAND_SUCCESS) rc = t5->finalize(ctx);
    if (rc == STRAND_SUCCESS) rc = t3->init(2, 2, quiet_logger, &ctx);
    if (rc == STRAND_SUCCESS)
      rc = t3->getCollInfo(ctx, STRAND_FUNC_ALLREDUCE, 1024, 1, (float **)(void *)cost,
                           STRAND_TUNER_NUM_ALGORITHMS, STRAND_TUNER_NUM_PROTOCOLS, &nch3);
    if (rc == STRAND_SUCCESS) rc = t3->destroy(ctx);
    if (rc != STRAND_SUCCESS || nch5 != 1 || nch3 != 1) {
      fprintf(stderr, "FAIL %s: tuner v5/v3 returned %d, nChannels %d / %d (expected 1)\n", path,
              rc, nch5, nch3);
      failures++;
    }
  }
  if (dlsym(lib, "ncclNetPlugin_v5") != NULL) {
    fprintf(stderr, "FAIL %s: exports ncclNetPlugin_v5, which no supported NCCL reads\n", path);
    failures++;
  }
  strand_net_v7_t *v7 = dlsym(lib, "ncclNetPlugin_v7");
  if (v7 != NULL) {
    int ndev = -1;
    strand_result_t rc = v7->init(quiet_logger);
    if (rc == STRAND_SUCCESS) rc = v7->devices(&ndev);
    if (rc != STRAND_SUCCESS || ndev < 1) {
      fprintf(stderr, "FAIL %s: v7 init/devices returned %d, ndev %d\n", path, rc, ndev);
      failures++;
    }
  }
  dlclose(lib);
  if (failures == 0) printf("ok %s (%s, %s)\n", path, name, argv[3]);
  return failures == 0 ? 0 : 1;
}
