/* softverbs with GPU memory (GPU machines; exit 77 = skipped without a usable CUDA driver and
 * device, as in CI). Two contexts in one process, one RC QP each, connected to each other; both
 * regions in CUDA device memory (cuMemAlloc through the SDK's run-time driver loader): region A
 * registered from its dma-buf (cuMemGetHandleForAddressRange + ibv_reg_dmabuf_mr, iova = its
 * device address, as NCCL registers) and region B with ibv_reg_mr on the device pointer (as
 * nvidia-peermem allows). Every operation moves GPU bytes and is checked byte for byte on the
 * host: RDMA WRITE GPU->GPU (small, and large enough to be streamed), WRITE_WITH_IMM, READ
 * GPU->GPU and GPU->host (a flush read), SEND/RECV with SGE lists mixing GPU and host memory,
 * inline SEND from GPU memory, and an out-of-bounds WRITE into a GPU region refused with
 * IBV_WC_REM_ACCESS_ERR. Fork is not used: CUDA does not survive it. */
#include <arpa/inet.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "strand/cuda_driver.h"
#include "sv_test.h"

#define LEN (6u << 20) /* each region; the large write (4 MiB + 3) is streamed, not staged */
#define BIG ((4u << 20) + 3)

static const strand_cuda_t *cu;

static void pattern(uint8_t *p, size_t n, uint32_t seed)
{
  for (size_t i = 0; i < n; i++) p[i] = (uint8_t)((i * 131u + seed * 7u + (i >> 9)) ^ seed);
}

static int to_gpu(strand_cu_devptr_t d, const void *h, size_t n)
{
  CHECK(cu->memcpyHtoDAsync(d, h, n, NULL) == 0 && cu->streamSynchronize(NULL) == 0, "HtoD");
  return 0;
}

static int from_gpu(void *h, strand_cu_devptr_t d, size_t n)
{
  CHECK(cu->memcpyDtoHAsync(h, d, n, NULL) == 0 && cu->streamSynchronize(NULL) == 0, "DtoH");
  return 0;
}

/* Waits for one completion on cq and checks its status and opcode. */
static int expect(struct ibv_cq *cq, enum ibv_wc_status st, enum ibv_wc_opcode op, uint64_t id,
                  struct ibv_wc *out)
{
  struct ibv_wc wc;
  CHECK(svt_poll(cq, &wc, 10000) == 1, "no completion for wr %llu within 10 s",
        (unsigned long long)id);
  CHECK(wc.status == st, "wr %llu: status %s, expected %s", (unsigned long long)wc.wr_id,
        ibv_wc_status_str(wc.status), ibv_wc_status_str(st));
  CHECK(st != IBV_WC_SUCCESS || (wc.opcode == op && wc.wr_id == id),
        "wr %llu opcode %d, expected wr %llu opcode %d", (unsigned long long)wc.wr_id, wc.opcode,
        (unsigned long long)id, op);
  if (out) *out = wc;
  return 0;
}

/* Compares n bytes of GPU memory at d with want; reports the first difference. */
static int same(strand_cu_devptr_t d, const uint8_t *want, size_t n, const char *what)
{
  uint8_t *h = malloc(n);
  CHECK(h, "malloc");
  if (from_gpu(h, d, n)) return 1;
  size_t i = 0;
  while (i < n && h[i] == want[i]) i++;
  int bad = i < n;
  if (bad)
    fprintf(stderr, "%s: byte %zu of %zu is %#x, expected %#x\n", what, i, n, h[i], want[i]);
  free(h);
  CHECK(!bad, "%s: GPU memory differs", what);
  printf("ok %s (%zu bytes)\n", what, n);
  return 0;
}

int main(void)
{
  cu = strand_cuda();
  int dev = -1;
  strand_cu_ctx_t ctx = NULL;
  if (!cu || cu->deviceGet(&dev, 0) != 0 || cu->devicePrimaryCtxRetain(&ctx, dev) != 0) {
    printf("skip: no usable CUDA driver and device (a GPU machine runs this test)\n");
    return 77;
  }
  CHECK(cu->ctxSetCurrent(ctx) == 0, "cuCtxSetCurrent");
  strand_cu_devptr_t ga = 0, gb = 0;
  CHECK(cu->memAlloc(&ga, LEN) == 0 && cu->memAlloc(&gb, LEN) == 0, "cuMemAlloc");

  svt_end_t a, b;
  if (svt_open(&a, 64, false) || svt_open(&b, 64, false) || svt_create_qp(&a, 32, 256) ||
      svt_create_qp(&b, 32, 256))
    return 1;
  int acc = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;

  /* A from its dma-buf when the driver can export one, else (said) from the pointer too. */
  struct ibv_mr *ma = NULL;
  int fd = -1;
  if (cu->memGetHandleForAddressRange &&
      cu->memGetHandleForAddressRange(&fd, ga, LEN, STRAND_CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD,
                                      0) == 0 &&
      fd >= 0) {
    ma = ibv_reg_dmabuf_mr(a.pd, 0, LEN, ga, fd, acc);
    CHECK(ma, "ibv_reg_dmabuf_mr of a CUDA dma-buf: %s", strerror(errno));
    CHECK((uintptr_t)ma->addr == 0 && ma->length == LEN, "a dma-buf region's addr is its offset");
    close(fd); /* as NCCL: the registration outlives the fd */
    errno = 0;
    uint8_t host[64];
    CHECK(!ibv_reg_dmabuf_mr(a.pd, 0, sizeof host, (uintptr_t)host, 0, acc) && errno == EBADF,
          "a file that is no dma-buf is EBADF");
    printf("ok region A registered from its dma-buf (iova = device address)\n");
  } else {
    printf("note: this driver exports no dma-buf (cuMemGetHandleForAddressRange); region A is "
           "registered with ibv_reg_mr like B\n");
    ma = ibv_reg_mr(a.pd, (void *)(uintptr_t)ga, LEN, acc);
    CHECK(ma, "ibv_reg_mr of device memory: %s", strerror(errno));
  }
  struct ibv_mr *mb = ibv_reg_mr(b.pd, (void *)(uintptr_t)gb, LEN, acc);
  CHECK(mb, "ibv_reg_mr of a CUDA pointer: %s", strerror(errno));
  uint8_t *ha = malloc(LEN), *hb = malloc(LEN), *want = malloc(LEN), *hostbuf = calloc(1, 4096);
  CHECK(ha && hb && want && hostbuf, "malloc");
  struct ibv_mr *mh = ibv_reg_mr(a.pd, hostbuf, 4096, acc);
  struct ibv_mr *mhb = ibv_reg_mr(b.pd, hb, LEN, acc);
  CHECK(mh && mhb, "host regions");

  svt_info_t ia, ib;
  svt_local_info(&a, &ia);
  svt_local_info(&b, &ib);
  svt_qp_params_t prm = SVT_DEFAULT_PARAMS;
  if (svt_connect(&a, &ib, &prm) || svt_connect(&b, &ia, &prm)) return 1;

  pattern(ha, LEN, 1);
  if (to_gpu(ga, ha, LEN)) return 1;
  memset(want, 0, LEN);
  if (to_gpu(gb, want, LEN)) return 1;

  /* 1. RDMA WRITE GPU -> GPU: 1000 bytes at an odd offset, then a large one (streamed). */
  CHECK(svt_post_rdma(a.qp, IBV_WR_RDMA_WRITE, 1, (void *)(uintptr_t)(ga + 7), 1000, ma->lkey,
                      gb + 13, mb->rkey, 0, IBV_SEND_SIGNALED) == 0, "post write");
  if (expect(a.cq, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE, 1, NULL)) return 1;
  memcpy(want + 13, ha + 7, 1000);
  if (same(gb, want, 4096, "RDMA WRITE GPU->GPU 1000 B")) return 1;
  CHECK(svt_post_rdma(a.qp, IBV_WR_RDMA_WRITE, 2, (void *)(uintptr_t)ga, BIG, ma->lkey,
                      gb + (1u << 20), mb->rkey, 0, IBV_SEND_SIGNALED) == 0, "post big write");
  if (expect(a.cq, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE, 2, NULL)) return 1;
  memcpy(want + (1u << 20), ha, BIG);
  if (same(gb, want, LEN, "RDMA WRITE GPU->GPU 4 MiB + 3")) return 1;
  /* The next large send is staged in the bounce buffer the last one left behind (a spare, larger
   * than it needs, with the old bytes still in it): only the new bytes may arrive. */
  CHECK(svt_post_rdma(a.qp, IBV_WR_RDMA_WRITE, 6, (void *)(uintptr_t)(ga + (1u << 20) + 11),
                      (1u << 20) + 1, ma->lkey, gb + (1u << 20) + 5, mb->rkey, 0,
                      IBV_SEND_SIGNALED) == 0, "post second big write");
  if (expect(a.cq, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE, 6, NULL)) return 1;
  memcpy(want + (1u << 20) + 5, ha + (1u << 20) + 11, (1u << 20) + 1);
  if (same(gb, want, LEN, "RDMA WRITE GPU->GPU 1 MiB + 1 through a spare bounce buffer")) return 1;

  /* 2. WRITE_WITH_IMM into GPU memory: the receive completion comes after the data. */
  CHECK(svt_post_recv(b.qp, 10, NULL, 0, 0) == 0, "post recv");
  CHECK(svt_post_rdma(a.qp, IBV_WR_RDMA_WRITE_WITH_IMM, 3, (void *)(uintptr_t)(ga + 4096), 333,
                      ma->lkey, gb + 5000, mb->rkey, htonl(77), IBV_SEND_SIGNALED) == 0,
        "post write-imm");
  struct ibv_wc wc;
  if (expect(b.cq, IBV_WC_SUCCESS, IBV_WC_RECV_RDMA_WITH_IMM, 10, &wc)) return 1;
  CHECK(wc.byte_len == 333 && ntohl(wc.imm_data) == 77, "imm %u len %u", ntohl(wc.imm_data),
        wc.byte_len);
  if (expect(a.cq, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE, 3, NULL)) return 1;
  memcpy(want + 5000, ha + 4096, 333);
  if (same(gb, want, 8192, "WRITE_WITH_IMM into GPU memory")) return 1;

  /* 3. READ GPU -> GPU (b reads A into B), and a 1-byte flush read GPU -> host. */
  CHECK(svt_post_rdma(b.qp, IBV_WR_RDMA_READ, 4, (void *)(uintptr_t)(gb + (5u << 20)), 65536 + 5,
                      mb->lkey, ga + 100, ma->rkey, 0, IBV_SEND_SIGNALED) == 0, "post read");
  if (expect(b.cq, IBV_WC_SUCCESS, IBV_WC_RDMA_READ, 4, NULL)) return 1;
  memcpy(want + (5u << 20), ha + 100, 65536 + 5);
  if (same(gb, want, LEN, "RDMA READ GPU->GPU")) return 1;
  CHECK(svt_post_rdma(a.qp, IBV_WR_RDMA_READ, 5, hostbuf, 1, mh->lkey, gb + 13, mb->rkey, 0,
                      IBV_SEND_SIGNALED) == 0, "post flush read");
  if (expect(a.cq, IBV_WC_SUCCESS, IBV_WC_RDMA_READ, 5, NULL)) return 1;
  CHECK(hostbuf[0] == ha[7], "flush read returned %#x, expected %#x", hostbuf[0], ha[7]);
  printf("ok RDMA READ GPU->host (flush read)\n");

  /* 4. SEND/RECV with mixed SGE lists: send [host 100 B, GPU 90000 B], receive [GPU 50000 B,
   * host 30000 B, GPU 90000 B] (the last one gets 10100). */
  pattern(hostbuf, 100, 9);
  struct ibv_sge rs[3] = {{gb + (2u << 20), 50000, mb->lkey},
                          {(uintptr_t)hb, 30000, mhb->lkey},
                          {gb + (3u << 20), 90000, mb->lkey}};
  struct ibv_recv_wr rw = {.wr_id = 11, .sg_list = rs, .num_sge = 3}, *rbad = NULL;
  CHECK(ibv_post_recv(b.qp, &rw, &rbad) == 0, "post recv (3 SGEs)");
  struct ibv_sge ss[2] = {{(uintptr_t)hostbuf, 100, mh->lkey}, {ga + 9000, 90000, ma->lkey}};
  struct ibv_send_wr sw = {.wr_id = 6, .sg_list = ss, .num_sge = 2, .opcode = IBV_WR_SEND,
                           .send_flags = IBV_SEND_SIGNALED}, *sbad = NULL;
  CHECK(ibv_post_send(a.qp, &sw, &sbad) == 0, "post send (2 SGEs)");
  if (expect(b.cq, IBV_WC_SUCCESS, IBV_WC_RECV, 11, &wc)) return 1;
  CHECK(wc.byte_len == 90100, "received %u bytes, expected 90100", wc.byte_len);
  if (expect(a.cq, IBV_WC_SUCCESS, IBV_WC_SEND, 6, NULL)) return 1;
  uint8_t *msg = malloc(90100);
  CHECK(msg, "malloc");
  memcpy(msg, hostbuf, 100);
  memcpy(msg + 100, ha + 9000, 90000);
  memcpy(want + (2u << 20), msg, 50000);
  memcpy(want + (3u << 20), msg + 80000, 10100);
  CHECK(memcmp(hb, msg + 50000, 30000) == 0, "the host SGE of the receive differs");
  if (same(gb, want, LEN, "SEND/RECV across GPU and host SGEs")) return 1;

  /* 5. Inline SEND from GPU memory into a GPU receive. */
  CHECK(svt_post_recv(b.qp, 12, (void *)(uintptr_t)(gb + (4u << 20)), 256, mb->lkey) == 0,
        "post recv");
  CHECK(svt_post_rdma(a.qp, IBV_WR_SEND, 7, (void *)(uintptr_t)(ga + 12345), 200, ma->lkey, 0, 0,
                      0, IBV_SEND_SIGNALED | IBV_SEND_INLINE) == 0, "post inline send");
  if (expect(b.cq, IBV_WC_SUCCESS, IBV_WC_RECV, 12, &wc)) return 1;
  if (expect(a.cq, IBV_WC_SUCCESS, IBV_WC_SEND, 7, NULL)) return 1;
  memcpy(want + (4u << 20), ha + 12345, 200);
  if (same(gb, want, LEN, "inline SEND from GPU memory")) return 1;
  /* inline data needs no lkey: without one the address alone must say it is GPU memory */
  CHECK(svt_post_recv(b.qp, 13, (void *)(uintptr_t)(gb + (4u << 20) + 256), 256, mb->lkey) == 0,
        "post recv");
  CHECK(svt_post_rdma(a.qp, IBV_WR_SEND, 9, (void *)(uintptr_t)(ga + 54321), 100, 0, 0, 0, 0,
                      IBV_SEND_SIGNALED | IBV_SEND_INLINE) == 0, "post inline send, no lkey");
  if (expect(b.cq, IBV_WC_SUCCESS, IBV_WC_RECV, 13, &wc)) return 1;
  if (expect(a.cq, IBV_WC_SUCCESS, IBV_WC_SEND, 9, NULL)) return 1;
  memcpy(want + (4u << 20) + 256, ha + 54321, 100);
  if (same(gb, want, LEN, "inline SEND from GPU memory without an lkey")) return 1;

  /* 6. Out of bounds of a GPU region: refused, nothing written. */
  CHECK(svt_post_rdma(a.qp, IBV_WR_RDMA_WRITE, 8, (void *)(uintptr_t)ga, 4096, ma->lkey,
                      gb + LEN - 100, mb->rkey, 0, IBV_SEND_SIGNALED) == 0, "post oob write");
  if (expect(a.cq, IBV_WC_REM_ACCESS_ERR, IBV_WC_RDMA_WRITE, 8, NULL)) return 1;
  if (same(gb, want, LEN, "out-of-bounds WRITE refused, GPU memory untouched")) return 1;

  free(msg);
  ibv_dereg_mr(ma);
  ibv_dereg_mr(mb);
  ibv_dereg_mr(mh);
  ibv_dereg_mr(mhb);
  svt_close(&a);
  svt_close(&b);
  cu->memFree(ga);
  cu->memFree(gb);
  free(ha);
  free(hb);
  free(want);
  free(hostbuf);
  printf("PASS softverbs GPU memory\n");
  return 0;
}
