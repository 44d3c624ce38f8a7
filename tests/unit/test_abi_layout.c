/* Runtime view of the ABI layouts (complements the _Static_asserts in the strand/abi headers): the
 * numbers below are typed in from spec §2.6, §3 and §4 independently of the headers, compared
 * with what the compiler laid out, and printed so a failing CI log shows the whole picture. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <cmocka.h>

#include "strand/plugin.h"

#define ABSENT (-1)

/* ---- function tables: sizeof and slot count per version (spec §3, §4) ---- */

static void test_table_sizes(void **state) {
  (void)state;
  const struct {
    const char *type;
    size_t size;
    int slots;
  } tables[] = {
      {"ncclNet_v6_t", sizeof(strand_net_v6_t), 17},
      {"ncclNet_v7_t", sizeof(strand_net_v7_t), 19},
      {"ncclNet_v8_t", sizeof(strand_net_v8_t), 19},
      {"ncclNet_v9_t", sizeof(strand_net_v9_t), 20},
      {"ncclNet_v10_t", sizeof(strand_net_v10_t), 20},
      {"ncclNet_v11_t", sizeof(strand_net_v11_t), 22},
      {"ncclNet_v12_t", sizeof(strand_net_v12_t), 22},
      {"ncclCollNet_v6_t", sizeof(strand_collnet_v6_t), 15},
      {"ncclCollNet_v7_t", sizeof(strand_collnet_v7_t), 15},
      {"ncclCollNet_v8_t", sizeof(strand_collnet_v8_t), 17},
      {"ncclCollNet_v9_t", sizeof(strand_collnet_v9_t), 18},
      {"ncclCollNet_v10_t", sizeof(strand_collnet_v10_t), 18},
      {"ncclCollNet_v11_t", sizeof(strand_collnet_v11_t), 19},
      {"ncclCollNet_v12_t", sizeof(strand_collnet_v12_t), 19},
  };
  for (size_t i = 0; i < sizeof tables / sizeof tables[0]; i++) {
    printf("  %-18s %4zu bytes = %2d slots x 8\n", tables[i].type, tables[i].size,
           tables[i].slots);
    assert_int_equal(tables[i].size, (size_t)tables[i].slots * 8);
  }
  /* What the plugin implements is exactly the newest layout. */
  assert_int_equal(sizeof(strand_net_t), sizeof(strand_net_v12_t));
  assert_int_equal(sizeof(strand_collnet_t), sizeof(strand_collnet_v12_t));
  assert_int_equal(sizeof(strand_props_t), 128);
}

/* ---- properties: offsets of every field in every version (spec §2.6) ---- */


static void test_props_offsets(void **state) {
  (void)state;
  /* Columns: v6 v7 v8 v9 v10 v11 v12 (spec §2.6, typed from the table, not from the headers). */
  static const struct {
    const char *field;
    long expected[7];
  } spec[] = {
      {"name", {0, 0, 0, 0, 0, 0, 0}},
      {"pciPath", {8, 8, 8, 8, 8, 8, 8}},
      {"guid", {16, 16, 16, 16, 16, 16, 16}},
      {"ptrSupport", {24, 24, 24, 24, 24, 24, 24}},
      {"regIsGlobal", {ABSENT, ABSENT, 28, 28, 28, 28, 28}},
      {"forceFlush", {ABSENT, ABSENT, ABSENT, 32, 32, 32, 32}},
      {"speed", {28, 28, 32, 36, 36, 36, 36}},
      {"port", {32, 32, 36, 40, 40, 40, 40}},
      {"latency", {36, 36, 40, 44, 44, 44, 44}},
      {"maxComms", {40, 40, 44, 48, 48, 48, 48}},
      {"maxRecvs", {44, 44, 48, 52, 52, 52, 52}},
      {"netDeviceType", {ABSENT, 48, 52, 56, 56, 56, 56}},
      {"netDeviceVersion", {ABSENT, 52, 56, 60, 60, 60, 60}},
      {"vProps", {ABSENT, ABSENT, ABSENT, 64, 64, 64, 64}},
      {"maxP2pBytes", {ABSENT, ABSENT, ABSENT, 88, 88, 88, 104}},
      {"maxCollBytes", {ABSENT, ABSENT, ABSENT, 96, 96, 96, 112}},
      {"maxMultiRequestSize", {ABSENT, ABSENT, ABSENT, ABSENT, ABSENT, 104, 120}},
      {"railId", {ABSENT, ABSENT, ABSENT, ABSENT, ABSENT, ABSENT, 124}},
      {"planeId", {ABSENT, ABSENT, ABSENT, ABSENT, ABSENT, ABSENT, 126}},
      {"sizeof", {48, 56, 64, 104, 104, 112, 128}},
  };
  /* The same table from the compiler. */
  const long actual[][7] = {
      {offsetof(strand_props_v6_t, name), offsetof(strand_props_v7_t, name),
       offsetof(strand_props_v8_t, name), offsetof(strand_props_v9_t, name),
       offsetof(strand_props_v10_t, name), offsetof(strand_props_v11_t, name),
       offsetof(strand_props_v12_t, name)},
      {offsetof(strand_props_v6_t, pciPath), offsetof(strand_props_v7_t, pciPath),
       offsetof(strand_props_v8_t, pciPath), offsetof(strand_props_v9_t, pciPath),
       offsetof(strand_props_v10_t, pciPath), offsetof(strand_props_v11_t, pciPath),
       offsetof(strand_props_v12_t, pciPath)},
      {offsetof(strand_props_v6_t, guid), offsetof(strand_props_v7_t, guid),
       offsetof(strand_props_v8_t, guid), offsetof(strand_props_v9_t, guid),
       offsetof(strand_props_v10_t, guid), offsetof(strand_props_v11_t, guid),
       offsetof(strand_props_v12_t, guid)},
      {offsetof(strand_props_v6_t, ptrSupport), offsetof(strand_props_v7_t, ptrSupport),
       offsetof(strand_props_v8_t, ptrSupport), offsetof(strand_props_v9_t, ptrSupport),
       offsetof(strand_props_v10_t, ptrSupport), offsetof(strand_props_v11_t, ptrSupport),
       offsetof(strand_props_v12_t, ptrSupport)},
      {ABSENT, ABSENT, offsetof(strand_props_v8_t, regIsGlobal),
       offsetof(strand_props_v9_t, regIsGlobal), offsetof(strand_props_v10_t, regIsGlobal),
       offsetof(strand_props_v11_t, regIsGlobal), offsetof(strand_props_v12_t, regIsGlobal)},
      {ABSENT, ABSENT, ABSENT, offsetof(strand_props_v9_t, forceFlush),
       offsetof(strand_props_v10_t, forceFlush), offsetof(strand_props_v11_t, forceFlush),
       offsetof(strand_props_v12_t, forceFlush)},
      {offsetof(strand_props_v6_t, speed), offsetof(strand_props_v7_t, speed),
       offsetof(strand_props_v8_t, speed), offsetof(strand_props_v9_t, speed),
       offsetof(strand_props_v10_t, speed), offsetof(strand_props_v11_t, speed),
       offsetof(strand_props_v12_t, speed)},
      {offsetof(strand_props_v6_t, port), offsetof(strand_props_v7_t, port),
       offsetof(strand_props_v8_t, port), offsetof(strand_props_v9_t, port),
       offsetof(strand_props_v10_t, port), offsetof(strand_props_v11_t, port),
       offsetof(strand_props_v12_t, port)},
      {offsetof(strand_props_v6_t, latency), offsetof(strand_props_v7_t, latency),
       offsetof(strand_props_v8_t, latency), offsetof(strand_props_v9_t, latency),
       offsetof(strand_props_v10_t, latency), offsetof(strand_props_v11_t, latency),
       offsetof(strand_props_v12_t, latency)},
      {offsetof(strand_props_v6_t, maxComms), offsetof(strand_props_v7_t, maxComms),
       offsetof(strand_props_v8_t, maxComms), offsetof(strand_props_v9_t, maxComms),
       offsetof(strand_props_v10_t, maxComms), offsetof(strand_props_v11_t, maxComms),
       offsetof(strand_props_v12_t, maxComms)},
      {offsetof(strand_props_v6_t, maxRecvs), offsetof(strand_props_v7_t, maxRecvs),
       offsetof(strand_props_v8_t, maxRecvs), offsetof(strand_props_v9_t, maxRecvs),
       offsetof(strand_props_v10_t, maxRecvs), offsetof(strand_props_v11_t, maxRecvs),
       offsetof(strand_props_v12_t, maxRecvs)},
      {ABSENT, offsetof(strand_props_v7_t, netDeviceType),
       offsetof(strand_props_v8_t, netDeviceType), offsetof(strand_props_v9_t, netDeviceType),
       offsetof(strand_props_v10_t, netDeviceType), offsetof(strand_props_v11_t, netDeviceType),
       offsetof(strand_props_v12_t, netDeviceType)},
      {ABSENT, offsetof(strand_props_v7_t, netDeviceVersion),
       offsetof(strand_props_v8_t, netDeviceVersion),
       offsetof(strand_props_v9_t, netDeviceVersion),
       offsetof(strand_props_v10_t, netDeviceVersion),
       offsetof(strand_props_v11_t, netDeviceVersion),
       offsetof(strand_props_v12_t, netDeviceVersion)},
      {ABSENT, ABSENT, ABSENT, offsetof(strand_props_v9_t, vProps),
       offsetof(strand_props_v10_t, vProps), offsetof(strand_props_v11_t, vProps),
       offsetof(strand_props_v12_t, vProps)},
      {ABSENT, ABSENT, ABSENT, offsetof(strand_props_v9_t, maxP2pBytes),
       offsetof(strand_props_v10_t, maxP2pBytes), offsetof(strand_props_v11_t, maxP2pBytes),
       offsetof(strand_props_v12_t, maxP2pBytes)},
      {ABSENT, ABSENT, ABSENT, offsetof(strand_props_v9_t, maxCollBytes),
       offsetof(strand_props_v10_t, maxCollBytes), offsetof(strand_props_v11_t, maxCollBytes),
       offsetof(strand_props_v12_t, maxCollBytes)},
      {ABSENT, ABSENT, ABSENT, ABSENT, ABSENT,
       offsetof(strand_props_v11_t, maxMultiRequestSize),
       offsetof(strand_props_v12_t, maxMultiRequestSize)},
      {ABSENT, ABSENT, ABSENT, ABSENT, ABSENT, ABSENT, offsetof(strand_props_v12_t, railId)},
      {ABSENT, ABSENT, ABSENT, ABSENT, ABSENT, ABSENT, offsetof(strand_props_v12_t, planeId)},
      {sizeof(strand_props_v6_t), sizeof(strand_props_v7_t), sizeof(strand_props_v8_t),
       sizeof(strand_props_v9_t), sizeof(strand_props_v10_t), sizeof(strand_props_v11_t),
       sizeof(strand_props_v12_t)},
  };
  _Static_assert(sizeof actual / sizeof actual[0] == sizeof spec / sizeof spec[0], "rows");
  printf("  %-20s %5s %5s %5s %5s %5s %5s %5s\n", "field", "v6", "v7", "v8", "v9", "v10", "v11",
         "v12");
  int mismatches = 0;
  for (size_t r = 0; r < sizeof spec / sizeof spec[0]; r++) {
    printf("  %-20s", spec[r].field);
    for (int v = 0; v < 7; v++) {
      int ok = actual[r][v] == spec[r].expected[v];
      mismatches += !ok;
      if (actual[r][v] == ABSENT) printf(" %5s", "-");
      else printf(" %4ld%c", actual[r][v], ok ? ' ' : '!');
    }
    printf("\n");
  }
  assert_int_equal(mismatches, 0);
}

/* ---- small structs: SGE and vProps (spec §2.5) ---- */

static void test_small_structs(void **state) {
  (void)state;
  assert_int_equal(sizeof(strand_sge_v8_t), 24);
  assert_int_equal(sizeof(strand_sge_v12_t), 24);
  assert_int_equal(offsetof(strand_sge_v8_t, size), offsetof(strand_sge_v12_t, size));
  assert_int_equal(sizeof(strand_vprops_v9_t), 20);
  assert_int_equal(sizeof(strand_vprops_v12_t), 36);
  assert_int_equal(sizeof(strand_net_attr_t), 44);
  assert_int_equal(sizeof(strand_dev_handle_t), 32);
  assert_int_equal(offsetof(strand_dev_handle_t, needsProxyProgress), 24);
  /* The optional-completion sentinel must not be a pointer any allocator returns. */
  assert_true((uintptr_t)STRAND_NET_OPTIONAL_RECV_COMPLETION_PTR == 1);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_table_sizes),
      cmocka_unit_test(test_props_offsets),
      cmocka_unit_test(test_small_structs),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
