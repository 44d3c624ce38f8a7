/* strand-conform — failures the test environment caused (docs/conformance.md, "ENV verdicts").
 *
 * A component of the test environment that refuses a request because it does not emulate it
 * (softverbs refusing dma-buf without CUDA, SRQs, atomics on GPU memory, ...) appends one line saying so to
 * the file named by STRAND_ENV_REFUSALS. Each rank parent points that variable at a file of its
 * own, empties it before every check child and reads it when the child is done: a check that
 * failed while the environment refused something is reported as ENV (the plugin could not be
 * judged here) with the refusal as the reason, never as the plugin's failure. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "conform_internal.h"

#define ENV_REFUSALS_VAR "STRAND_ENV_REFUSALS"

static char g_path[64];
static int g_fd = -1;

void conform_env_refusals_open(void) {
  if (g_fd >= 0) return;
  snprintf(g_path, sizeof g_path, "/tmp/strand-conform-env.XXXXXX");
  g_fd = mkstemp(g_path);
  if (g_fd < 0) return; /* without the file, failures stay the plugin's: the old behaviour */
  fcntl(g_fd, F_SETFD, FD_CLOEXEC);
  setenv(ENV_REFUSALS_VAR, g_path, 1);
}

void conform_env_refusals_reset(void) {
  if (g_fd >= 0 && ftruncate(g_fd, 0) != 0) { /* a stale line only makes a failure ENV: say so */
    fprintf(stderr, "strand-conform: cannot empty %s: %s\n", g_path, strerror(errno));
  }
}

/* The distinct refusal lines, joined with "; " into out. Returns how many there were. */
int conform_env_refusals_take(char *out, size_t len) {
  out[0] = '\0';
  if (g_fd < 0) return 0;
  char buf[8192];
  ssize_t n = pread(g_fd, buf, sizeof buf - 1, 0);
  if (n <= 0) return 0;
  buf[n] = '\0';
  int count = 0;
  for (char *save = NULL, *line = strtok_r(buf, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
    count++;
    if (strstr(out, line)) continue; /* one line per kind of refusal */
    size_t used = strlen(out);
    snprintf(out + used, len - used, "%s%s", used ? "; " : "", line);
  }
  return count;
}

void conform_env_refusals_apply(conform_rank_result_t *res) {
  if (res->status != CONFORM_FAIL) return;
  char why[600];
  if (!conform_env_refusals_take(why, sizeof why)) return;
  char orig[CONFORM_MSG_MAX];
  snprintf(orig, sizeof orig, "%s", res->msg);
  res->status = CONFORM_ENV;
  char msg[sizeof why + sizeof orig + 128];
  snprintf(msg, sizeof msg, "the test environment refused what this check needed (%s); the "
           "plugin's resulting error, not counted against it: %s", why, orig);
  size_t n = strnlen(msg, sizeof res->msg - 1); /* cut to fit */
  memcpy(res->msg, msg, n);
  res->msg[n] = '\0';
}

void conform_env_refusals_close(void) {
  if (g_fd < 0) return;
  close(g_fd);
  unlink(g_path);
  g_fd = -1;
}
