/* strand-conform — the options every subcommand shares (run, sim, perf), parsed into conform_opts,
 * and the usage text. sim and perf first take their own options out of argv (simperf.c), then
 * hand the rest here. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "conform_internal.h"

enum {
  OPT_ABI = 1000, OPT_ALL_ABIS, OPT_NRANKS, OPT_RANK, OPT_COORD, OPT_MAX_BYTES, OPT_QUICK,
  OPT_TSCALE, OPT_CALL_BOUND, OPT_STALE_BOUND, OPT_CLOSE_BOUND, OPT_BS_TIMEOUT, OPT_ONLY, OPT_SKIP, OPT_TAP,
  OPT_JSON, OPT_JUNIT, OPT_LIST, OPT_PROGRESS, OPT_NO_PROGRESS, OPT_COMPACT, OPT_RMA_ABI, OPT_PLUGIN_REPORT,
};

static const struct option common_opts[] = {
  {"abi", required_argument, 0, OPT_ABI},
  {"all-abis", no_argument, 0, OPT_ALL_ABIS},
  {"rma-abi", required_argument, 0, OPT_RMA_ABI},
  {"nranks", required_argument, 0, OPT_NRANKS},
  {"rank", required_argument, 0, OPT_RANK},
  {"coordinator", required_argument, 0, OPT_COORD},
  {"max-bytes", required_argument, 0, OPT_MAX_BYTES},
  {"quick", no_argument, 0, OPT_QUICK},
  {"timeout-scale", required_argument, 0, OPT_TSCALE},
  {"call-bound", required_argument, 0, OPT_CALL_BOUND},
  {"stale-bound", required_argument, 0, OPT_STALE_BOUND},
  {"close-bound", required_argument, 0, OPT_CLOSE_BOUND},
  {"bootstrap-timeout", required_argument, 0, OPT_BS_TIMEOUT},
  {"only", required_argument, 0, OPT_ONLY},
  {"skip", required_argument, 0, OPT_SKIP},
  {"tap", no_argument, 0, OPT_TAP},
  {"json", required_argument, 0, OPT_JSON},
  {"junit", required_argument, 0, OPT_JUNIT},
  {"list", no_argument, 0, OPT_LIST},
  {"progress", no_argument, 0, OPT_PROGRESS},
  {"no-progress", no_argument, 0, OPT_NO_PROGRESS},
  {"compact", no_argument, 0, OPT_COMPACT},
  {"plugin-report", no_argument, 0, OPT_PLUGIN_REPORT},
  {"verbose", no_argument, 0, 'v'},
  {"help", no_argument, 0, 'h'},
  {0, 0, 0, 0},
};

static void usage(FILE *f) {
  fprintf(f,
    "usage: strand-conform [run] [options] [PLUGIN]\n"
    "       strand-conform list\n"
    "       strand-conform sim|perf [options] [PLUGIN]\n"
    "\n"
    "PLUGIN is a path or a name, with NCCL's rules: a comma list, tried in order; each item is\n"
    "dlopen'ed as given, then as libnccl-net-ITEM.so. Without PLUGIN, NCCL_NET_PLUGIN is used\n"
    "(unset: libnccl-net.so). NCCL_NET, when set, must match the plugin's name.\n"
    "\n"
    "  --abi vN               test ABI version N (6..12) instead of the newest exported\n"
    "  --all-abis             run the suite once per exported ncclNetPlugin_vN\n"
    "  --rma-abi vN           drive the one-sided table of version N (14, 13: ncclRmaPlugin_vN,\n"
    "                         else ncclGinPlugin_v13; 12, 11: ncclGinPlugin_vN) for rma.*\n"
    "                         instead of the newest exported\n"
    "  --nranks N             ranks (default 2); local mode forks N processes\n"
    "  --coordinator H:P      multi-host: rank 0 listens on H:P, the others connect to it\n"
    "  --rank R               multi-host: this process's rank\n"
    "  --max-bytes SIZE       cap for the largest transfers (default 1G; K/M/G suffixes)\n"
    "  --quick                CI sizes: max 16M transfers, fewer messages and comms\n"
    "  --timeout-scale F      multiply every check's time bound (slow machines, sanitizers)\n"
    "  --call-bound S         max seconds one connect/accept call may take (default 2)\n"
    "  --stale-bound S        max seconds connect to a dead listener may stay pending (15)\n"
    "  --close-bound S        max seconds one close*/finalize call may take (5, x --timeout-scale)\n"
    "  --bootstrap-timeout S  max seconds for all ranks to join (default 60)\n"
    "  --only GLOB[,GLOB]     run only matching check ids (fnmatch; an area name selects it)\n"
    "  --skip GLOB[,GLOB]     skip matching check ids\n"
    "  --tap                  TAP on stdout instead of the table\n"
    "  --json FILE            machine-readable results\n"
    "  --junit FILE           JUnit XML for CI\n"
    "  --list                 print every check id with its clause and exit\n"
    "  --progress / --no-progress   progress line on stderr (default: when stderr is a TTY)\n"
    "  --compact              the table lists only failures and skips\n"
    "  --plugin-report        one page instead of the table: versions exported, devices as NCCL\n"
    "                         reads them, failures grouped by cause with the spec clause and\n"
    "                         what NCCL would do\n"
    "  -v, --verbose          show each check's captured output (plugin WARN and INFO lines,\n"
    "                         stdout/stderr) under its row (-vv: every log level)\n"
    "\n"
    "What the plugin logs or prints while a check runs is captured with that check: it is kept\n"
    "in --json and --junit, shown under the row with -v, and its last lines under a failure.\n"
    "The last line of the output is always \"N passed, N failed, N skipped\";\n"
    "the exit status is 0 only when nothing failed.\n");
}

static void add_globs(const char **arr, int *n, char *arg) {
  for (char *tok = strtok(arg, ","); tok && *n < 64; tok = strtok(NULL, ",")) arr[(*n)++] = tok;
}

/* Parses the options every subcommand shares into conform_opts; returns the index of the first
 * positional argument, or -1 on a usage error. `--list` is handled here (exits). */
int conform_parse_opts(int argc, char **argv) {
  optind = 1;
  int c;
  while ((c = getopt_long(argc, argv, "vh", common_opts, NULL)) != -1) {
    switch (c) {
    case OPT_ABI: {
      const char *a = optarg[0] == 'v' || optarg[0] == 'V' ? optarg + 1 : optarg;
      int v = atoi(a);
      if (v < 6 || v > 12) {
        fprintf(stderr, "strand-conform: --abi wants v6..v12, got \"%s\"\n", optarg);
        return -1;
      }
      conform_opts.abi_forced = v;
      break;
    }
    case OPT_ALL_ABIS: conform_opts.all_abis = true; break;
    case OPT_RMA_ABI: {
      const char *a = optarg[0] == 'v' || optarg[0] == 'V' ? optarg + 1 : optarg;
      int v = atoi(a);
      if (v < 11 || v > 14) {
        fprintf(stderr, "strand-conform: --rma-abi wants v11..v14, got \"%s\"\n", optarg);
        return -1;
      }
      conform_opts.rma_abi_forced = v;
      break;
    }
    case OPT_NRANKS: conform_opts.nranks = atoi(optarg); break;
    case OPT_RANK: conform_opts.rank = atoi(optarg); break;
    case OPT_COORD: snprintf(conform_opts.coordinator, sizeof conform_opts.coordinator, "%s", optarg); break;
    case OPT_MAX_BYTES:
      if (conform_parse_size(optarg, &conform_opts.max_bytes) || conform_opts.max_bytes == 0) {
        fprintf(stderr, "strand-conform: bad --max-bytes \"%s\"\n", optarg);
        return -1;
      }
      break;
    case OPT_QUICK: conform_opts.quick = true; break;
    case OPT_TSCALE: conform_opts.timeout_scale = atof(optarg); break;
    case OPT_CALL_BOUND: conform_opts.call_bound_s = atof(optarg); break;
    case OPT_STALE_BOUND: conform_opts.stale_bound_s = atof(optarg); break;
    case OPT_CLOSE_BOUND: conform_opts.close_bound_s = atof(optarg); break;
    case OPT_BS_TIMEOUT: conform_opts.bootstrap_timeout_s = atof(optarg); break;
    case OPT_ONLY: add_globs(conform_opts.only, &conform_opts.n_only, optarg); break;
    case OPT_SKIP: add_globs(conform_opts.skip, &conform_opts.n_skip, optarg); break;
    case OPT_TAP: conform_opts.tap = true; break;
    case OPT_JSON: conform_opts.json_path = optarg; break;
    case OPT_JUNIT: conform_opts.junit_path = optarg; break;
    case OPT_LIST: conform_report_list(stdout); exit(0);
    case OPT_PROGRESS: conform_opts.progress = 1; break;
    case OPT_NO_PROGRESS: conform_opts.progress = 0; break;
    case OPT_COMPACT: conform_opts.compact = true; break;
    case OPT_PLUGIN_REPORT: conform_opts.plugin_report = true; break;
    case 'v': conform_opts.verbose++; break;
    case 'h': usage(stdout); exit(0);
    default: usage(stderr); return -1;
    }
  }
  if (conform_opts.timeout_scale <= 0) conform_opts.timeout_scale = 1.0;
  return optind;
}
