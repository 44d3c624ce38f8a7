/* strand-conform — single-attempt plugin calls and option helpers shared by `sim` and `perf`
 * (see simperf.h for why they are not harness.c's retrying wrappers). */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "simperf.h"

char simperf_phandle_dummy[64];

int simperf_try_isend(conform_ctx_t *c, void *comm, void *data, size_t size, int tag, void *mh,
                      void **req) {
  *req = NULL;
  strand_result_t r = c->net->isend(comm, data, size, tag, mh, simperf_phandle_dummy, req);
  if (r != STRAND_SUCCESS) {
    conform_fail(c, "isend(%zu bytes, tag %d) returned %s%s", size, tag, conform_result_str(r),
                 conform_upgrade_last_error_was_adapter() ? " (refused by the core adapter)" : "");
    return -1;
  }
  return 0;
}

int simperf_try_irecv(conform_ctx_t *c, void *comm, int n, void **data, size_t *sizes, int *tags,
                      void **mhs, bool sentinel, void **req) {
  void *ph[STRAND_PROXY_MAX_SUBS];
  for (int i = 0; i < n && i < STRAND_PROXY_MAX_SUBS; i++) ph[i] = simperf_phandle_dummy;
  *req = sentinel ? STRAND_NET_OPTIONAL_RECV_COMPLETION_PTR : NULL;
  strand_result_t r = c->net->irecv(comm, n, data, sizes, tags, mhs, ph, req);
  if (r != STRAND_SUCCESS) {
    conform_fail(c, "irecv(n %d, sizes[0] %zu%s) returned %s%s", n, sizes[0],
                 sentinel ? ", *request preset to NCCL_NET_OPTIONAL_RECV_COMPLETION" : "",
                 conform_result_str(r),
                 conform_upgrade_last_error_was_adapter() ? " (refused by the core adapter)" : "");
    return -1;
  }
  if (sentinel && *req == STRAND_NET_OPTIONAL_RECV_COMPLETION_PTR) {
    conform_fail(c, "irecv returned success but left NCCL_NET_OPTIONAL_RECV_COMPLETION (0x1) in "
                 "*request: the core would call test() on 0x1 (§6.6: write a real request or NULL)");
    *req = NULL;
    return -1;
  }
  return 0;
}

int simperf_try_test(conform_ctx_t *c, void *req, int *done, int *sizes, const char *what) {
  *done = 0;
  strand_result_t r = c->net->test(req, done, sizes);
  if (r != STRAND_SUCCESS) {
    conform_fail(c, "test(%s) returned %s", what, conform_result_str(r));
    return -1;
  }
  return 0;
}

const char *simperf_size_str(size_t b, char *buf, size_t len) {
  if (b >= ((size_t)1 << 30) && b % ((size_t)1 << 30) == 0)
    snprintf(buf, len, "%zu GiB", b >> 30);
  else if (b >= ((size_t)1 << 20) && b % ((size_t)1 << 20) == 0)
    snprintf(buf, len, "%zu MiB", b >> 20);
  else if (b >= 1024 && b % 1024 == 0)
    snprintf(buf, len, "%zu KiB", b >> 10);
  else
    snprintf(buf, len, "%zu B", b);
  return buf;
}

int simperf_take_opts(int argc, char **argv, const simperf_opt_t *opts, simperf_opt_cb cb,
                      void *arg, const char *cmd) {
  int out = 1;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    if (!strcmp(a, "--")) { /* end of options: keep the rest as is */
      for (; i < argc; i++) argv[out++] = argv[i];
      break;
    }
    const simperf_opt_t *hit = NULL;
    const char *val = NULL;
    if (a[0] == '-' && a[1] == '-') {
      for (const simperf_opt_t *o = opts; o->name; o++) {
        size_t l = strlen(o->name);
        if (strncmp(a + 2, o->name, l) == 0 && (a[2 + l] == '\0' || a[2 + l] == '=')) {
          hit = o;
          if (a[2 + l] == '=') val = a + 3 + l;
          break;
        }
      }
    }
    if (!hit) {
      argv[out++] = argv[i];
      continue;
    }
    if (hit->flag) {
      if (val) {
        fprintf(stderr, "strand-conform %s: --%s takes no value\n", cmd, hit->name);
        return -1;
      }
    } else if (!val) {
      if (i + 1 >= argc) {
        fprintf(stderr, "strand-conform %s: --%s needs a value\n", cmd, hit->name);
        return -1;
      }
      val = argv[++i];
    }
    if (cb(hit->id, val, arg) != 0) {
      fprintf(stderr, "strand-conform %s: bad value for --%s: \"%s\"\n", cmd, hit->name,
              val ? val : "");
      return -1;
    }
  }
  argv[out] = NULL;
  return out;
}
