/* strand-conform — group.*: grouped receives (spec §6.7): one irecv with n = 2..maxRecvs buffers
 * and tags; sends on the (shared) sendComm carry those tags in any order; test() fills n sizes. */
#include <stdlib.h>
#include <string.h>

#include "conform.h"

enum { GSLOT = 65536 };

/* One grouped receive of n slots; the sender posts the n tagged sends in `order`. */
static int group_round(conform_ctx_t *c, conform_link_t *l, conform_buf_t *sb, conform_buf_t *rb,
                       void *smh, void *rmh, int n, const int *order, const size_t *sizes,
                       uint64_t salt) {
  void *data[8], *mhs[8];
  size_t psz[8];
  int tags[8];
  for (int k = 0; k < n; k++) {
    data[k] = rb->data + (size_t)k * GSLOT;
    psz[k] = GSLOT;
    tags[k] = 7000 + 3 * k; /* distinct, not 0..n-1, so "slot = tag" shortcuts show */
    mhs[k] = rmh;
    memset(data[k], 0, GSLOT);
  }
  void *rreq, *sreq[8];
  if (conform_irecv(c, l->recv_comm, n, data, psz, tags, mhs, &rreq)) return -1;
  for (int j = 0; j < n; j++) {
    int k = order[j];
    unsigned char *d = sb->data + (size_t)k * GSLOT;
    conform_fill(d, sizes[k], conform_seed(c->rank, c->next, salt + (uint64_t)k));
    if (conform_isend(c, l->send_comm, d, sizes[k], tags[k], smh, &sreq[j])) return -1;
  }
  int got[STRAND_PROXY_MAX_SUBS];
  for (int k = 0; k < STRAND_PROXY_MAX_SUBS; k++) got[k] = -1;
  void *reqs[9];
  int *szp[9];
  for (int j = 0; j < n; j++) reqs[j] = sreq[j], szp[j] = NULL;
  reqs[n] = rreq;
  szp[n] = got; /* NCCL passes an int[64] */
  if (conform_wait_all(c, n + 1, reqs, szp, "grouped isend/irecv")) return -1;
  for (int k = 0; k < n; k++) {
    if (got[k] != (int)sizes[k]) {
      conform_fail(c, "grouped receive n=%d: slot %d (tag %d) reported %d bytes, %zu were sent with "
                   "that tag", n, k, tags[k], got[k], sizes[k]);
      return -1;
    }
    if (conform_verify(data[k], sizes[k], conform_seed(c->prev, c->rank, salt + (uint64_t)k)) >= 0) {
      int from = -1;
      for (int q = 0; q < n && from < 0; q++)
        if (sizes[q] == sizes[k] && conform_verify(data[k], sizes[k], conform_seed(c->prev, c->rank, salt + (uint64_t)q)) < 0)
          from = q;
      if (from >= 0)
        conform_fail(c, "grouped receive n=%d: slot %d (tag %d) holds the message sent with tag %d: "
                     "tags must select the slot", n, k, tags[k], tags[from]);
      else
        conform_fail(c, "grouped receive n=%d: slot %d (tag %d) payload wrong", n, k, tags[k]);
      return -1;
    }
  }
  return 0;
}

static conform_status_t run_groups(conform_ctx_t *c, bool vary_sizes) {
  strand_props_v12_t p;
  if (conform_props(c, 0, &p)) return CONFORM_FAIL;
  int m = p.maxRecvs > 8 ? 8 : p.maxRecvs;
  if (m <= 1) return conform_skip(c, "maxRecvs is %d: the plugin does not group receives", p.maxRecvs);
  conform_link_t l;
  if (conform_link_open(c, 0, &l)) return CONFORM_FAIL;
  conform_buf_t sb, rb;
  void *smh = NULL, *rmh = NULL;
  if (conform_buf_alloc(&sb, (size_t)8 * GSLOT, 0) || conform_buf_alloc(&rb, (size_t)8 * GSLOT, 0)) {
    conform_fail(c, "out of memory");
    goto out;
  }
  if (conform_reg(c, l.send_comm, sb.data, sb.len, STRAND_PTR_HOST, &smh) ||
      conform_reg(c, l.recv_comm, rb.data, rb.len, STRAND_PTR_HOST, &rmh))
    goto out;
  uint64_t salt = 60000;
  for (int n = vary_sizes ? m : 2; n <= m; n++) {
    int order[3][8];
    for (int k = 0; k < n; k++) {
      order[0][k] = k;             /* in tag order */
      order[1][k] = n - 1 - k;     /* reversed */
      order[2][k] = (k * 5 + 3) % n; /* shuffled (a permutation when gcd(5, n) == 1) */
    }
    bool perm_ok = n % 5 != 0;
    size_t sizes[8];
    for (int k = 0; k < n; k++)
      sizes[k] = vary_sizes ? (k == 1 ? 0 : (size_t)(k * 9973 + 17) % GSLOT) : 4096 + (size_t)k;
    for (int o = 0; o < (perm_ok ? 3 : 2); o++, salt += 16)
      if (group_round(c, &l, &sb, &rb, smh, rmh, n, order[o], sizes, salt)) goto out;
  }
  conform_note(c, "grouped receives n = %d..%d, sends in tag, reverse and shuffled order",
               vary_sizes ? m : 2, m);
out:
  if (smh) conform_dereg(c, l.send_comm, smh);
  if (rmh) conform_dereg(c, l.recv_comm, rmh);
  conform_buf_free(&sb);
  conform_buf_free(&rb);
  conform_link_close(c, &l);
  return c->status == CONFORM_FAIL ? CONFORM_FAIL : CONFORM_PASS;
}

static conform_status_t group_recv_n(conform_ctx_t *c) { return run_groups(c, false); }
static conform_status_t group_slot_sizes(conform_ctx_t *c) { return run_groups(c, true); }

const conform_check_t conform_checks_group[] = {
  {"group.recv-n", "§6.7", "grouped irecv n = 2..maxRecvs, tags matched in any send order",
   group_recv_n, 30, 0},
  {"group.slot-sizes", "§6.7, §6.9", "per-slot sizes (including 0) reported for grouped receives",
   group_slot_sizes, 30, 0},
  {0},
};
