/* strand-conform — handle.*: what listen gives the core (spec §5 NCCL_NET_HANDLE_MAXSIZE, §6.1). */
#include <string.h>

#include "conform.h"

static conform_status_t handle_size_limit(conform_ctx_t *c) {
  unsigned char buf[STRAND_NET_HANDLE_MAXSIZE + 256];
  for (int dev = 0; dev < c->ndev && dev < 8; dev++) {
    memset(buf, CONFORM_GUARD_BYTE, sizeof buf);
    void *lc = NULL;
    conform_phase(c, "listen(dev %d)", dev);
    strand_result_t r = c->net->listen(c->net_ctx, dev, buf, &lc);
    if (r != STRAND_SUCCESS) {
      conform_fail(c, "listen(dev %d) returned %s", dev, conform_result_str(r));
      continue;
    }
    for (size_t i = STRAND_NET_HANDLE_MAXSIZE; i < sizeof buf; i++)
      if (buf[i] != CONFORM_GUARD_BYTE) {
        size_t last = i;
        for (size_t j = sizeof buf; j-- > i;)
          if (buf[j] != CONFORM_GUARD_BYTE) {
            last = j;
            break;
          }
        conform_fail(c, "listen(dev %d) wrote the handle up to byte %zu; NCCL's buffer has %d", dev,
                     last + 1, STRAND_NET_HANDLE_MAXSIZE);
        break;
      }
    if (lc) {
      conform_phase(c, "closeListen");
      c->net->closeListen(lc);
    }
  }
  return c->status == CONFORM_FAIL ? CONFORM_FAIL : CONFORM_PASS;
}

static conform_status_t handle_listen_comm(conform_ctx_t *c) {
  for (int dev = 0; dev < c->ndev; dev++) {
    unsigned char h[CONFORM_LISTEN_BUF];
    memset(h, 0, sizeof h);
    void *lc = NULL;
    conform_phase(c, "listen(dev %d)", dev);
    strand_result_t r = c->net->listen(c->net_ctx, dev, h, &lc);
    if (r != STRAND_SUCCESS) conform_fail(c, "listen(dev %d) returned %s", dev, conform_result_str(r));
    else if (!lc) conform_fail(c, "listen(dev %d) succeeded with a NULL listenComm", dev);
    if (lc) {
      conform_phase(c, "closeListen(dev %d)", dev);
      r = c->net->closeListen(lc);
      if (r != STRAND_SUCCESS) conform_fail(c, "closeListen(dev %d) returned %s", dev, conform_result_str(r));
    }
  }
  return c->status == CONFORM_FAIL ? CONFORM_FAIL : CONFORM_PASS;
}

const conform_check_t conform_checks_handle[] = {
  {"handle.size-limit", "§5 NCCL_NET_HANDLE_MAXSIZE, §6.1 step 1", "listen writes no byte past 128",
   handle_size_limit, 20, 0},
  {"handle.listen-comm", "§6.1 step 1", "successful listen returns a non-NULL listenComm, every device",
   handle_listen_comm, 20, 0},
  {0},
};
