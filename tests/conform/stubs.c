/* strand-conform — placeholders for the `sim` and `perf` subcommands until sim.c / perf.c land
 * (meson defines CONFORM_HAVE_SIM / CONFORM_HAVE_PERF when those files exist). */
#include <stdio.h>

#include "conform.h"

#ifndef CONFORM_HAVE_SIM
int conform_cmd_sim(int argc, char **argv) {
  (void)argc; (void)argv;
  fprintf(stderr, "strand-conform sim: not built in this version (tests/conform/sim.c missing)\n");
  return 2;
}
#endif

#ifndef CONFORM_HAVE_PERF
int conform_cmd_perf(int argc, char **argv) {
  (void)argc; (void)argv;
  fprintf(stderr, "strand-conform perf: not built in this version (tests/conform/perf.c missing)\n");
  return 2;
}
#endif
