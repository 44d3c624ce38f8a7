/* strand-ib unit test of the pure parts: the NCCL_IB_HCA grammar, port speed from width x lane
 * speed, NCCL_IB_ADDR_RANGE, GID family, and the immediate-data layout. No device needed. */
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>

#include "ib.h"
#include "plugin_test.h"

static int hca(const char *spec, const char *dev, int port) {
  ib_hca_filter_t f;
  if (ib_hca_filter_parse(spec, &f) != STRAND_SUCCESS) return -1;
  return ib_hca_filter_match(&f, dev, port) ? 1 : 0;
}

static int test_hca(void) {
  PT_CHECK(hca(NULL, "mlx5_0", 1) == 1 && hca("", "x", 2) == 1, "unset: everything");
  PT_CHECK(hca("mlx5", "mlx5_0", 1) == 1 && hca("mlx5", "mlx5_11", 2) == 1, "prefix");
  PT_CHECK(hca("mlx5", "mlx4_0", 1) == 0, "prefix mismatch");
  PT_CHECK(hca("=mlx5_1", "mlx5_1", 1) == 1 && hca("=mlx5_1", "mlx5_10", 1) == 0, "exact");
  PT_CHECK(hca("mlx5_1", "mlx5_10", 1) == 1, "without '=' a prefix matches mlx5_10");
  PT_CHECK(hca("^mlx5_1", "mlx5_1", 1) == 0 && hca("^mlx5_1", "mlx5_0", 1) == 1, "exclude");
  PT_CHECK(hca("mlx5_0:1,mlx5_1:2", "mlx5_0", 1) == 1 && hca("mlx5_0:1,mlx5_1:2", "mlx5_0", 2) == 0,
           "ports");
  PT_CHECK(hca("mlx5_0:1,mlx5_1:2", "mlx5_1", 2) == 1, "second item");
  PT_CHECK(hca("^=mlx5_0:2", "mlx5_0", 2) == 0 && hca("^=mlx5_0:2", "mlx5_0", 1) == 1 &&
               hca("^=mlx5_0:2", "mlx5_00", 2) == 1,
           "exclude exact port");
  PT_CHECK(hca(" sv0 , sv1:1 ", "sv1", 1) == 1 && hca(" sv0 , sv1:1 ", "sv1", 2) == 0, "blanks");
  const char *bad[] = {"mlx5_0:", "mlx5_0:x", "mlx5_0:0", "^", "=", "^=", ":1", ",,", "a=b"};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
    PT_CHECK(hca(bad[i], "mlx5_0", 1) == -1, "'%s' accepted", bad[i]);
  return 0;
}

static int test_speed(void) {
  PT_CHECK(ib_port_speed_mbps(2, 32) == 100000, "4x EDR");
  PT_CHECK(ib_port_speed_mbps(2, 64) == 200000, "4x HDR");
  PT_CHECK(ib_port_speed_mbps(2, 128) == 400000, "4x NDR");
  PT_CHECK(ib_port_speed_mbps(1, 1) == 2500, "1x SDR");
  PT_CHECK(ib_port_speed_mbps(16, 16) == 28000, "2x FDR");
  PT_CHECK(ib_port_speed_mbps(3, 1) == 0 && ib_port_speed_mbps(2, 3) == 0, "unknown codes");
  return 0;
}

static int test_range(void) {
  uint8_t v4[16] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 10, 1, 2, 3};
  uint8_t v6[16] = {0xfd, 0x12, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1};
  ib_addr_range_t r;
  PT_CHECK(ib_gid_family(v4) == AF_INET && ib_gid_family(v6) == AF_INET6, "family");
  PT_CHECK(ib_addr_range_parse("10.0.0.0/8", &r) == STRAND_SUCCESS, "parse v4");
  PT_CHECK(ib_gid_in_range(v4, AF_INET, &r) && !ib_gid_in_range(v6, AF_INET6, &r), "v4 range");
  PT_CHECK(ib_addr_range_parse("10.1.2.0/25", &r) == STRAND_SUCCESS && ib_gid_in_range(v4, AF_INET, &r),
           "/25");
  PT_CHECK(ib_addr_range_parse("10.1.2.128/25", &r) == STRAND_SUCCESS &&
               !ib_gid_in_range(v4, AF_INET, &r),
           "/25 other half");
  PT_CHECK(ib_addr_range_parse("fd00::/8", &r) == STRAND_SUCCESS && ib_gid_in_range(v6, AF_INET6, &r),
           "v6");
  PT_CHECK(ib_addr_range_parse(NULL, &r) == STRAND_SUCCESS && ib_gid_in_range(v6, AF_INET6, &r),
           "no range");
  const char *bad[] = {"10.0.0.0", "10.0.0.0/33", "x/8", "10.0.0.0/", "::/129"};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
    PT_CHECK(ib_addr_range_parse(bad[i], &r) == STRAND_INVALID_USAGE, "'%s' accepted", bad[i]);
  return 0;
}

static int test_imm(void) {
  uint32_t i = IB_IMM_MAKE(31, 16, 1, IB_IMM_INLINE_MAX);
  PT_CHECK(IB_IMM_SLOT(i) == 31 && IB_IMM_NQPS(i) == 16 && IB_IMM_INLINE(i) == 1 &&
               IB_IMM_SIZE(i) == IB_IMM_INLINE_MAX,
           "imm fields");
  i = IB_IMM_MAKE(0, 1, 0, 0);
  PT_CHECK(IB_IMM_SLOT(i) == 0 && IB_IMM_NQPS(i) == 1 && !IB_IMM_INLINE(i), "imm zero");
  return 0;
}

int main(void) {
  strand_log_set_filter(STRAND_LOG_NONE, 0); /* the parsers WARN on bad input: expected here */
  test_hca();
  test_speed();
  test_range();
  test_imm();
  printf("%s\n", pt_failures ? "FAIL" : "ok");
  return pt_failures ? 1 : 0;
}
