/* Unit tests of strand_props_init_host (strand/plugin.h): every field written, whatever the struct
 * held before, with the documented host defaults. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <string.h>

#include "strand/plugin.h"

static void test_defaults(void **state) {
  (void)state;
  strand_props_t p;
  memset(&p, 0xA5, sizeof p); /* the core does not zero it: nothing may survive */
  strand_props_init_host(&p, 3);
  assert_null(p.name);
  assert_null(p.pciPath);
  assert_int_equal(p.guid, 3);
  assert_int_equal(p.ptrSupport, STRAND_PTR_HOST);
  assert_int_equal(p.regIsGlobal, 0);
  assert_int_equal(p.forceFlush, 0);
  assert_int_equal(p.speed, 0);
  assert_int_equal(p.port, 0);
  assert_true(p.latency == 0.0f);
  assert_int_equal(p.maxComms, 65536);
  assert_int_equal(p.maxRecvs, 1);
  assert_int_equal(p.netDeviceType, STRAND_DEV_HOST);
  assert_int_equal(p.netDeviceVersion, STRAND_NET_DEVICE_INVALID_VERSION);
  assert_int_equal(p.vProps.ndevs, 1);
  assert_int_equal(p.vProps.devs[0], 3);
  for (int i = 1; i < STRAND_NET_MAX_DEVS_PER_NIC_V12; i++) assert_int_equal(p.vProps.devs[i], 0);
  assert_int_equal(p.maxP2pBytes, STRAND_MAX_NET_SIZE_V8);
  assert_int_equal(p.maxCollBytes, STRAND_MAX_COLLNET_SIZE_V8);
  assert_int_equal(p.maxMultiRequestSize, 1);
  assert_int_equal(p.railId, STRAND_NET_ID_UNDEF);
  assert_int_equal(p.planeId, STRAND_NET_ID_UNDEF);
}

static void test_device_index_lands_in_guid_and_vprops(void **state) {
  (void)state;
  strand_props_t p;
  strand_props_init_host(&p, 0);
  assert_int_equal(p.guid, 0);
  assert_int_equal(p.vProps.devs[0], 0);
  strand_props_init_host(&p, 41);
  assert_int_equal(p.guid, 41);
  assert_int_equal(p.vProps.devs[0], 41);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_defaults),
      cmocka_unit_test(test_device_index_lands_in_guid_and_vprops),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
