/* strand-conform — the pieces every part of the tool uses and that use nothing else of it: the
 * run's options (conform_opts), monotonic time, sleeping, and size parsing. Kept apart so that the
 * bootstrap, the runner and the check helpers all depend on this file instead of on each other. */
#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <time.h>

#include "conform_internal.h"

conform_opts_t conform_opts = {
  .nranks = 2,
  .rank = -1,
  .max_bytes = (size_t)1 << 30,
  .timeout_scale = 1.0,
  .call_bound_s = 2.0,
  .stale_bound_s = 15.0,
  .close_bound_s = 5.0,
  .bootstrap_timeout_s = 60.0,
  .progress = -1,
};

double conform_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

double conform_call_bound(void) { return conform_opts.call_bound_s * conform_opts.timeout_scale; }

void conform_sleep(double seconds) {
  if (seconds <= 0) return;
  struct timespec ts = {(time_t)seconds, (long)((seconds - (double)(time_t)seconds) * 1e9)};
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
  }
}

int conform_parse_size(const char *s, size_t *out) {
  char *end;
  double v = strtod(s, &end);
  if (end == s || v < 0) return -1;
  switch (toupper((unsigned char)*end)) {
  case 'K': v *= 1024; end++; break;
  case 'M': v *= 1024.0 * 1024; end++; break;
  case 'G': v *= 1024.0 * 1024 * 1024; end++; break;
  default: break;
  }
  if (*end == 'i' || *end == 'I') end++;
  if (*end == 'B' || *end == 'b') end++;
  if (*end) return -1;
  *out = (size_t)v;
  return 0;
}
