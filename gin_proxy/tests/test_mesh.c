/* The SDK's mesh builder (strand/mesh.h) with k > 1 comms per ordered pair, over strand-socket on
 * loopback: ranks are processes; every comm i to rank j must reach rank j's recv[me*k+i] (a
 * message carrying (me, i) proves the placement). Then the bound: a group whose peer never shows
 * up fails with STRAND_REMOTE_ERROR after timeout_s, not later.
 * Usage: test_mesh <libnccl-net-strand-socket.so> <nranks> <k> */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "plugin_test.h"
#include "strand/mesh.h"

#define MAXR 8

typedef struct {
  char handles[MAXR][STRAND_NET_HANDLE_MAXSIZE];
  int arrived;
} shm_t;

static int wait_all(const strand_net_t *n, void **reqs, int count) {
  double end = pt_now_s() + 10;
  for (int left = count; left > 0;) {
    PT_CHECK(pt_now_s() < end, "%d requests still pending", left);
    left = 0;
    for (int q = 0; q < count; q++) {
      if (!reqs[q]) continue;
      int done = 0, size = 0;
      PT_CHECK(n->test(reqs[q], &done, &size) == STRAND_SUCCESS, "test");
      if (done)
        reqs[q] = NULL;
      else
        left++;
    }
  }
  return 0;
}

/* Sends (me, i) on every send comm and checks what every recv comm hears. */
static int exchange(const strand_net_t *n, strand_mesh_t *m) {
  int k = m->k, nc = m->nranks * k;
  int32_t *out = calloc((size_t)nc * 2, sizeof(int32_t)), *in = calloc((size_t)nc * 2, sizeof(int32_t));
  void **reqs = calloc((size_t)nc * 2, sizeof(void *)), **mhs = calloc((size_t)nc * 2, sizeof(void *));
  PT_CHECK(out && in && reqs && mhs, "calloc");
  for (int c = 0; c < nc; c++) {
    if (c / k == m->rank) continue;
    out[2 * c] = m->rank;
    out[2 * c + 1] = c % k;
    in[2 * c] = in[2 * c + 1] = -1;
    PT_CHECK(n->regMr(m->send[c], &out[2 * c], 8, STRAND_PTR_HOST, &mhs[2 * c]) == 0, "regMr");
    PT_CHECK(n->regMr(m->recv[c], &in[2 * c], 8, STRAND_PTR_HOST, &mhs[2 * c + 1]) == 0, "regMr");
    void *buf = &in[2 * c];
    size_t sz = 8;
    int tag = 0;
    while (!reqs[2 * c + 1])
      PT_CHECK(n->irecv(m->recv[c], 1, &buf, &sz, &tag, &mhs[2 * c + 1], NULL, &reqs[2 * c + 1]) == 0, "irecv");
    while (!reqs[2 * c])
      PT_CHECK(n->isend(m->send[c], &out[2 * c], 8, 0, mhs[2 * c], NULL, &reqs[2 * c]) == 0, "isend");
  }
  if (wait_all(n, reqs, nc * 2)) return -1;
  for (int c = 0; c < nc; c++) {
    if (c / k == m->rank) continue;
    PT_CHECK(in[2 * c] == c / k && in[2 * c + 1] == c % k, "rank %d: recv[%d] heard (%d, %d), want (%d, %d)",
             m->rank, c, in[2 * c], in[2 * c + 1], c / k, c % k);
    n->deregMr(m->send[c], mhs[2 * c]);
    n->deregMr(m->recv[c], mhs[2 * c + 1]);
  }
  free(out);
  free(in);
  free(reqs);
  free(mhs);
  return 0;
}

static int run_rank(const char *plugin, shm_t *shm, int nranks, int me, int k) {
  const strand_net_t *n = pt_load_table(plugin, "ncclNetPlugin_v12");
  PT_CHECK(n, "load");
  void *ctx = NULL, *l = NULL;
  PT_CHECK(n->init(&ctx, 7, NULL, NULL, NULL) == STRAND_SUCCESS, "init");
  char h[STRAND_NET_HANDLE_MAXSIZE] = {0};
  PT_CHECK(n->listen(ctx, 0, h, &l) == STRAND_SUCCESS, "listen");
  memcpy(shm->handles[me], h, sizeof h);
  __atomic_add_fetch(&shm->arrived, 1, __ATOMIC_ACQ_REL);
  while (__atomic_load_n(&shm->arrived, __ATOMIC_ACQUIRE) < nranks) usleep(100);
  void *hs[MAXR];
  for (int j = 0; j < nranks; j++) hs[j] = shm->handles[j];
  strand_mesh_spec_t spec = {.net = n, .net_ctx = ctx, .net_listen = l, .dev = 0, .nranks = nranks,
                             .rank = me, .k = k, .timeout_s = 20, .who = "test_mesh"};
  strand_mesh_t m;
  PT_CHECK(strand_mesh_form(&spec, hs, &m) == STRAND_SUCCESS, "strand_mesh_form k=%d", k);
  int rc = exchange(n, &m);
  strand_mesh_close(&m);
  n->closeListen(l);
  n->finalize(ctx);
  return rc;
}

/* Rank 0 of 2 alone: rank 1's handle is a listener nobody drives. */
static int run_timeout(const char *plugin) {
  const strand_net_t *n = pt_load_table(plugin, "ncclNetPlugin_v12");
  PT_CHECK(n, "load");
  void *ctx = NULL, *l0 = NULL, *l1 = NULL;
  PT_CHECK(n->init(&ctx, 8, NULL, NULL, NULL) == STRAND_SUCCESS, "init");
  char h0[STRAND_NET_HANDLE_MAXSIZE] = {0}, h1[STRAND_NET_HANDLE_MAXSIZE] = {0};
  PT_CHECK(n->listen(ctx, 0, h0, &l0) == 0 && n->listen(ctx, 0, h1, &l1) == 0, "listen");
  void *hs[2] = {h0, h1};
  strand_mesh_spec_t spec = {.net = n, .net_ctx = ctx, .net_listen = l0, .dev = 0, .nranks = 2,
                             .rank = 0, .k = 2, .timeout_s = 1, .who = "test_mesh (timeout expected)"};
  strand_mesh_t m;
  double t0 = pt_now_s();
  strand_result_t rc = strand_mesh_form(&spec, hs, &m);
  double took = pt_now_s() - t0;
  PT_CHECK(rc == STRAND_REMOTE_ERROR && took >= 1 && took < 4, "missing peer: rc %d after %.1f s", rc, took);
  PT_CHECK(m.send == NULL && m.recv == NULL, "a failed mesh holds nothing");
  n->closeListen(l0);
  n->closeListen(l1);
  n->finalize(ctx);
  return 0;
}

int main(int argc, char **argv) {
  if (argc != 4) return 2;
  int nranks = atoi(argv[2]), k = atoi(argv[3]);
  if (nranks < 1 || nranks > MAXR || k < 1) return 2;
  shm_t *shm = mmap(NULL, sizeof *shm, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (shm == MAP_FAILED) return 2;
  pid_t pids[MAXR];
  for (int r = 0; r < nranks; r++)
    if ((pids[r] = fork()) == 0) {
      alarm(60);
      exit(run_rank(argv[1], shm, nranks, r, k) || pt_failures ? 1 : 0);
    }
  int bad = 0;
  for (int r = 0; r < nranks; r++) {
    int st = 0;
    waitpid(pids[r], &st, 0);
    if (!WIFEXITED(st) || WEXITSTATUS(st)) bad = 1;
  }
  if (run_timeout(argv[1]) || pt_failures) bad = 1;
  printf("%s: mesh of %d ranks, %d comms per pair; missing peer bounded\n", bad ? "FAIL" : "ok", nranks, k);
  return bad;
}
