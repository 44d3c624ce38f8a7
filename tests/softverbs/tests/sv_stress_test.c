/* Two processes over softverbs, randomized: thousands of RDMA WRITEs (1 B to 1 MiB, SGE lists of
 * 1-4 entries, some inline, some WRITE_WITH_IMM) interleaved with RDMA READs and SEND_WITH_IMMs
 * (checked byte by byte at the target), up to 32 in flight.
 * The initiator keeps a model of the target's region; since RC executes in posting order, every
 * READ must return exactly the model as it was when the READ was posted. This exercises batched
 * and partial transmissions, the staging and direct receive paths and ordering across all of them.
 * With SV_STRESS_GPU=1 the target's region is CUDA device memory (cuMemAlloc through the SDK's
 * run-time driver; in CI the fake driver of tests/fake_cuda), so the same order is checked through
 * softverbs' GPU staging: WRITEs staged into it, READs answered from copies of it.
 * Usage: sv_stress_test [ops] [seed] */
#include <stdlib.h>
#include <sys/socket.h>
#include <string.h>
#include <unistd.h>

#include "strand/cuda_driver.h"
#include "sv_test.h"

#define REGION (4u << 20)
#define MAXW (1u << 20)
#define MAXR (64u << 10)
#define DEPTH 32
#define NRECV 1000
#define SENDMAX 8192
#define SEND_FLAG 0x80000000u

/* SEND number n carries send_len(n) bytes of send_byte(n, i): the target checks both. */
static uint32_t send_len(uint32_t n) { return 1 + (n * 2654435761u >> 7) % SENDMAX; }
static uint8_t send_byte(uint32_t n, uint32_t i) { return (uint8_t)(n * 131u + i * 7u + (i >> 8)); }

typedef struct {
  uint64_t id;
  int is_read;
  uint32_t len;
  uint8_t *dst;      /* where a READ lands */
  uint8_t *expect;   /* the model's bytes when the READ was posted */
} op_t;

static uint64_t rng;
static uint32_t rnd(uint32_t n)
{
  rng ^= rng << 13;
  rng ^= rng >> 7;
  rng ^= rng << 17;
  return (uint32_t)(rng % n);
}

static int target(int fd)
{
  svt_end_t e;
  if (svt_open(&e, 4096, false) || svt_create_qp(&e, 1024, 0)) return 1;
  uint8_t *region = calloc(1, REGION);
  CHECK(region, "calloc");
  uint8_t *host_region = region;
  const char *gpu = getenv("SV_STRESS_GPU");
  const strand_cuda_t *cu = gpu && gpu[0] == '1' ? strand_cuda() : NULL;
  strand_cu_devptr_t dev_region = 0;
  if (gpu && gpu[0] == '1') {
    strand_cu_ctx_t ctx = NULL;
    int dev = -1;
    CHECK(cu && cu->deviceGet(&dev, 0) == 0 && cu->devicePrimaryCtxRetain(&ctx, dev) == 0 &&
              cu->ctxSetCurrent(ctx) == 0 && cu->memAlloc(&dev_region, REGION) == 0,
          "SV_STRESS_GPU=1 needs a usable CUDA driver and device");
    CHECK(cu->memcpyHtoDAsync(dev_region, host_region, REGION, NULL) == 0 &&
              cu->streamSynchronize(NULL) == 0, "zero the GPU region");
    region = (uint8_t *)(uintptr_t)dev_region; /* never touched by this CPU code again */
  }
  struct ibv_mr *mr = ibv_reg_mr(e.pd, region, REGION, IBV_ACCESS_LOCAL_WRITE |
                                                          IBV_ACCESS_REMOTE_WRITE |
                                                          IBV_ACCESS_REMOTE_READ);
  CHECK(mr, "reg");
  svt_info_t me, peer;
  svt_local_info(&e, &me);
  me.addr = (uintptr_t)region;
  me.rkey = mr->rkey;
  me.len = REGION;
  svt_qp_params_t p = SVT_DEFAULT_PARAMS;
  if (svt_xchg(fd, &me, &peer) || svt_connect(&e, &peer, &p)) return 1;
  uint8_t *rb = malloc((size_t)NRECV * SENDMAX);
  CHECK(rb, "malloc");
  struct ibv_mr *rmr = ibv_reg_mr(e.pd, rb, (size_t)NRECV * SENDMAX, IBV_ACCESS_LOCAL_WRITE);
  CHECK(rmr, "reg");
  for (int i = 0; i < NRECV; i++)
    CHECK(svt_post_recv(e.qp, (uint64_t)i, rb + (size_t)i * SENDMAX, SENDMAX, rmr->lkey) == 0,
          "post_recv");
  if (svt_sync(fd)) return 1;
  /* count the WRITE_WITH_IMMs and check the SENDs until the initiator says how many it sent */
  uint32_t imms = 0, sends = 0, want = 0;
  for (;;) {
    struct ibv_wc wc;
    int n = ibv_poll_cq(e.cq, 1, &wc);
    if (n == 1) {
      CHECK(wc.status == IBV_WC_SUCCESS, "receive: %s", ibv_wc_status_str(wc.status));
      uint8_t *b = rb + wc.wr_id * SENDMAX;
      if (wc.opcode == IBV_WC_RECV) {
        CHECK((wc.wc_flags & IBV_WC_WITH_IMM) && wc.imm_data == (SEND_FLAG | sends),
              "send %u: imm %#x", sends, wc.imm_data);
        CHECK(wc.byte_len == send_len(sends), "send %u: %u bytes, want %u", sends, wc.byte_len,
              send_len(sends));
        for (uint32_t i = 0; i < wc.byte_len; i++)
          CHECK(b[i] == send_byte(sends, i), "send %u byte %u", sends, i);
        sends++;
      } else {
        CHECK(wc.opcode == IBV_WC_RECV_RDMA_WITH_IMM && wc.imm_data == imms,
              "imm %u: opcode %d imm %u", imms, wc.opcode, wc.imm_data);
        imms++;
      }
      CHECK(svt_post_recv(e.qp, wc.wr_id, b, SENDMAX, rmr->lkey) == 0, "repost");
      continue;
    }
    if (want == 0) {
      ssize_t r = recv(fd, &want, sizeof(want), MSG_DONTWAIT);
      if (r == 0) return 1;
      if (r < (ssize_t)sizeof(want)) want = 0;
    }
    if (want && imms + sends == want) break;
    if (want && imms + sends > want) CHECK(0, "more receives (%u) than sent (%u)", imms + sends, want);
  }
  if (svt_sync(fd)) return 1;
  ibv_dereg_mr(rmr);
  free(rb);
  ibv_dereg_mr(mr);
  svt_close(&e);
  if (dev_region) cu->memFree(dev_region);
  free(host_region);
  return 0;
}

static int initiator(int fd, int nops)
{
  svt_end_t e;
  if (svt_open(&e, 4096, false) || svt_create_qp(&e, DEPTH * 2, 64)) return 1;
  uint8_t *src = malloc(MAXW), *model = calloc(1, REGION), *rbuf = malloc((size_t)DEPTH * MAXR);
  uint8_t *exp = malloc((size_t)DEPTH * MAXR), *sbuf = malloc((size_t)DEPTH * SENDMAX);
  CHECK(src && model && rbuf && exp && sbuf, "malloc");
  for (uint32_t i = 0; i < MAXW; i++) src[i] = (uint8_t)rnd(256);
  struct ibv_mr *ms = ibv_reg_mr(e.pd, src, MAXW, IBV_ACCESS_LOCAL_WRITE);
  struct ibv_mr *mrd = ibv_reg_mr(e.pd, rbuf, (size_t)DEPTH * MAXR, IBV_ACCESS_LOCAL_WRITE);
  struct ibv_mr *msb = ibv_reg_mr(e.pd, sbuf, (size_t)DEPTH * SENDMAX, IBV_ACCESS_LOCAL_WRITE);
  CHECK(ms && mrd && msb, "reg");
  svt_info_t me, peer;
  svt_local_info(&e, &me);
  svt_qp_params_t p = SVT_DEFAULT_PARAMS;
  if (svt_xchg(fd, &me, &peer) || svt_connect(&e, &peer, &p) || svt_sync(fd)) return 1;
  uint32_t sends = 0;
  static op_t ring[DEPTH];
  uint64_t posted = 0, done = 0;
  uint32_t imms = 0, reads = 0;
  uint64_t bytes = 0;
  while (done < (uint64_t)nops) {
    while (posted < (uint64_t)nops && posted - done < DEPTH) {
      op_t *o = &ring[posted % DEPTH];
      o->id = posted;
      uint32_t kind = rnd(10);
      o->is_read = kind < 2;
      if (kind == 2) { /* SEND_WITH_IMM of a checkable pattern, split over two SGEs */
        uint8_t *b = sbuf + (posted % DEPTH) * SENDMAX;
        uint32_t len = send_len(sends);
        for (uint32_t i = 0; i < len; i++) b[i] = send_byte(sends, i);
        uint32_t cut = len / 2;
        struct ibv_sge sg[2] = {{(uintptr_t)b, cut, msb->lkey},
                                {(uintptr_t)(b + cut), len - cut, msb->lkey}};
        struct ibv_send_wr wr = {.wr_id = posted, .sg_list = sg, .num_sge = 2,
                                 .opcode = IBV_WR_SEND_WITH_IMM, .send_flags = IBV_SEND_SIGNALED,
                                 .imm_data = SEND_FLAG | sends};
        struct ibv_send_wr *bad;
        CHECK(ibv_post_send(e.qp, &wr, &bad) == 0, "post send");
        sends++;
        o->len = len;
      } else if (o->is_read) {
        uint32_t len = 1 + rnd(rnd(4) == 0 ? MAXR : 512);
        uint32_t off = rnd(REGION - len + 1);
        o->len = len;
        o->dst = rbuf + (posted % DEPTH) * MAXR;
        o->expect = exp + (posted % DEPTH) * MAXR;
        memcpy(o->expect, model + off, len);
        memset(o->dst, 0xa5, len);
        CHECK(svt_post_rdma(e.qp, IBV_WR_RDMA_READ, posted, o->dst, len, mrd->lkey,
                            peer.addr + off, peer.rkey, 0, IBV_SEND_SIGNALED) == 0, "post read");
        reads++;
      } else {
        /* mostly small, sometimes large; 1-4 SGEs taken from random places of src */
        uint32_t len = 1 + rnd(rnd(8) == 0 ? MAXW : (rnd(2) ? 64 : 4096));
        uint32_t off = rnd(REGION - len + 1);
        int nsge = 1 + (int)rnd(len >= 4 ? 4 : 1);
        struct ibv_sge sg[4];
        uint32_t left = len, at = off;
        for (int s = 0; s < nsge; s++) {
          uint32_t l = s == nsge - 1 ? left : 1 + rnd(left - (uint32_t)(nsge - 1 - s));
          uint32_t so = rnd(MAXW - l + 1);
          sg[s] = (struct ibv_sge){(uintptr_t)(src + so), l, ms->lkey};
          memcpy(model + at, src + so, l);
          at += l;
          left -= l;
        }
        int imm = rnd(16) == 0;
        unsigned flags = IBV_SEND_SIGNALED | (len <= 64 && rnd(2) ? IBV_SEND_INLINE : 0);
        struct ibv_send_wr wr = {.wr_id = posted, .sg_list = sg, .num_sge = nsge,
                                 .opcode = imm ? IBV_WR_RDMA_WRITE_WITH_IMM : IBV_WR_RDMA_WRITE,
                                 .send_flags = flags, .imm_data = imms};
        wr.wr.rdma.remote_addr = peer.addr + off;
        wr.wr.rdma.rkey = peer.rkey;
        struct ibv_send_wr *bad;
        CHECK(ibv_post_send(e.qp, &wr, &bad) == 0, "post write %llu", (unsigned long long)posted);
        imms += imm;
        bytes += len;
        o->len = len;
      }
      posted++;
    }
    struct ibv_wc wc;
    CHECK(svt_poll(e.cq, &wc, 20000) == 1, "op %llu: no completion", (unsigned long long)done);
    CHECK(wc.status == IBV_WC_SUCCESS && wc.wr_id == done, "op %llu: wr %llu %s",
          (unsigned long long)done, (unsigned long long)wc.wr_id, ibv_wc_status_str(wc.status));
    op_t *o = &ring[done % DEPTH];
    if (o->is_read)
      CHECK(memcmp(o->dst, o->expect, o->len) == 0, "read %llu (%u bytes) differs from the model",
            (unsigned long long)done, o->len);
    done++;
  }
  /* the whole region, read back in pieces, equals the model */
  for (uint32_t off = 0; off < REGION; off += MAXR) {
    CHECK(svt_post_rdma(e.qp, IBV_WR_RDMA_READ, 1, rbuf, MAXR, mrd->lkey, peer.addr + off,
                        peer.rkey, 0, IBV_SEND_SIGNALED) == 0, "final read");
    struct ibv_wc wc;
    CHECK(svt_poll(e.cq, &wc, 20000) == 1 && wc.status == IBV_WC_SUCCESS, "final read");
    CHECK(memcmp(rbuf, model + off, MAXR) == 0, "region at %u differs from the model", off);
  }
  uint32_t total = imms + sends;
  CHECK(send(fd, &total, sizeof(total), 0) == (ssize_t)sizeof(total), "send the receive count");
  if (svt_sync(fd)) return 1;
  printf("ok: %d ops (%u reads, %u write-with-imm, %u sends, %.1f MiB written), region and "
         "messages match\n", nops, reads, imms, sends, (double)bytes / (1 << 20));
  ibv_dereg_mr(ms);
  ibv_dereg_mr(mrd);
  ibv_dereg_mr(msb);
  svt_close(&e);
  free(sbuf);
  free(src);
  free(model);
  free(rbuf);
  free(exp);
  return 0;
}

int main(int argc, char **argv)
{
  int nops = argc > 1 ? atoi(argv[1]) : 3000;
  rng = argc > 2 ? strtoull(argv[2], NULL, 0) : 0x9e3779b97f4a7c15ull;
  if (rng == 0) rng = 1;
  int fd = -1;
  int pid = svt_fork(&fd);
  CHECK(pid >= 0, "fork");
  if (pid == 0) _exit(target(fd));
  int rc = initiator(fd, nops);
  close(fd);
  int crc = svt_wait_child(pid, 60000);
  if (rc || crc) {
    fprintf(stderr, "FAIL: initiator %d, target %d (seed %llu)\n", rc, crc,
            (unsigned long long)(argc > 2 ? strtoull(argv[2], NULL, 0) : 0));
    return 1;
  }
  return 0;
}
