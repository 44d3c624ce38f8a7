/* strand-conform — command line.
 *   strand-conform [run] [options] [PLUGIN]   the conformance suite (default subcommand)
 *   strand-conform list                       every check id with its clause
 *   strand-conform sim  [options] [PLUGIN]    NCCL-shaped proxy traffic (sim/)
 *   strand-conform perf [options] [PLUGIN]    bandwidth / latency tables (sim/perf.c)
 * The options every subcommand shares are parsed in options.c. */
#include <stdio.h>
#include <string.h>

#include "conform_internal.h"

int main(int argc, char **argv) {
  const char *sub = "run";
  if (argc > 1 && argv[1][0] != '-') {
    if (!strcmp(argv[1], "run") || !strcmp(argv[1], "list") || !strcmp(argv[1], "sim") ||
        !strcmp(argv[1], "perf")) {
      sub = argv[1];
      argv[1] = argv[0];
      argv++;
      argc--;
    }
  }
  if (!strcmp(sub, "list")) {
    conform_report_list(stdout);
    return 0;
  }
  if (!strcmp(sub, "sim")) return conform_cmd_sim(argc, argv);
  if (!strcmp(sub, "perf")) return conform_cmd_perf(argc, argv);
  int first = conform_parse_opts(argc, argv);
  if (first < 0) return 2;
  if (first < argc) conform_opts.plugin = argv[first];
  if (first + 1 < argc) {
    fprintf(stderr, "strand-conform: one PLUGIN argument expected (a comma list is one argument)\n");
    return 2;
  }
  return conform_cmd_run();
}
