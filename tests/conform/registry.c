/* strand-conform — every check in report order, and --only/--skip selection by id or glob. */
#include <fnmatch.h>
#include <stdlib.h>
#include <string.h>

#include "conform_internal.h"

int conform_all_checks(const conform_check_t ***out) {
  static const conform_check_t **all;
  static int n;
  if (!all) {
    const conform_check_t *tables[] = {
      conform_checks_load, conform_checks_props, conform_checks_handle, conform_checks_conn,
      conform_checks_reg, conform_checks_xfer, conform_checks_limits, conform_checks_group,
      conform_checks_life, conform_checks_collnet, conform_checks_unpack, conform_checks_finalize,
      conform_checks_hostile,
      conform_checks_tuner, conform_checks_rma,
    };
    int cap = 0;
    for (size_t t = 0; t < sizeof tables / sizeof tables[0]; t++)
      for (const conform_check_t *c = tables[t]; c->id; c++) cap++;
    all = calloc((size_t)cap + 1, sizeof *all);
    for (size_t t = 0; t < sizeof tables / sizeof tables[0]; t++)
      for (const conform_check_t *c = tables[t]; c->id; c++) all[n++] = c;
  }
  *out = all;
  return n;
}

/* The checks of the run in progress: the suite's registry, or the scenario list of sim/perf,
 * which are not in the registry. Set by conform_run_checks. */
static const conform_check_t *const *running_checks;
static int running_count;

void conform_set_running_checks(const conform_check_t *const *checks, int n) {
  running_checks = checks;
  running_count = n;
}

const conform_check_t *conform_find_check(const char *id) {
  for (int i = 0; i < running_count; i++)
    if (strcmp(running_checks[i]->id, id) == 0) return running_checks[i];
  const conform_check_t **all;
  int n = conform_all_checks(&all);
  for (int i = 0; i < n; i++)
    if (strcmp(all[i]->id, id) == 0) return all[i];
  return NULL;
}

/* A pattern matches an id as a glob; a bare area name ("xfer") selects the whole area. */
static bool matches(const char *pat, const char *id) {
  if (fnmatch(pat, id, 0) == 0) return true;
  size_t pl = strlen(pat);
  return strchr(pat, '.') == NULL && strncmp(pat, id, pl) == 0 && id[pl] == '.';
}

bool conform_check_selected(const conform_check_t *chk, const conform_opts_t *o) {
  bool sel = o->n_only == 0;
  for (int i = 0; i < o->n_only && !sel; i++)
    if (matches(o->only[i], chk->id)) sel = true;
  for (int i = 0; i < o->n_skip && sel; i++)
    if (matches(o->skip[i], chk->id)) sel = false;
  return sel;
}
