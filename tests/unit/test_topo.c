/* Unit tests of strand/topo.h against a fake sysfs tree built in a temp dir (PCI NICs, a virtio
 * NIC below its PCI function, virtual interfaces, unknown speeds, NUMA nodes), plus sanity checks
 * on this host's real sysfs. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <dirent.h>
#include <errno.h>
#include <ftw.h>
#include <limits.h>
#include <pthread.h>
#include <sys/stat.h>
#include <unistd.h>

#include "strand/log.h"
#include "strand/topo.h"

static char g_root[PATH_MAX / 2];
static int g_warns;

static void capture_logger(strand_log_level_t level, unsigned long flags, const char *file,
                           int line, const char *fmt, ...) {
  (void)flags, (void)file, (void)line, (void)fmt;
  if (level == STRAND_LOG_WARN) g_warns++;
}

/* mkdir -p root/rel */
static void mkdirs(const char *rel) {
  char path[PATH_MAX];
  snprintf(path, sizeof(path), "%s/%s", g_root, rel);
  for (char *p = path + strlen(g_root) + 1; *p; p++) {
    if (*p != '/') continue;
    *p = '\0';
    if (mkdir(path, 0755) != 0 && errno != EEXIST) fail_msg("mkdir %s: %s", path, strerror(errno));
    *p = '/';
  }
  if (mkdir(path, 0755) != 0 && errno != EEXIST) fail_msg("mkdir %s: %s", path, strerror(errno));
}

static void write_file(const char *rel, const char *content) {
  char path[PATH_MAX];
  snprintf(path, sizeof(path), "%s/%s", g_root, rel);
  FILE *f = fopen(path, "w");
  if (f == NULL) fail_msg("fopen %s: %s", path, strerror(errno));
  fputs(content, f);
  fclose(f);
}

static void make_link(const char *rel, const char *target) {
  char path[PATH_MAX];
  snprintf(path, sizeof(path), "%s/%s", g_root, rel);
  if (symlink(target, path) != 0) fail_msg("symlink %s: %s", path, strerror(errno));
}

static int rm_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw) {
  (void)st, (void)flag, (void)ftw;
  return remove(path);
}

static int setup_tree(void **state) {
  (void)state;
  snprintf(g_root, sizeof(g_root), "%s/strand-topo-XXXXXX",
           getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
  if (mkdtemp(g_root) == NULL) return -1;

  /* A PCI NIC on NUMA node 1, 100 Gb/s; /sys/class/net/X is a link into the device tree as on a
   * real system, and X/device points back up to the PCI function. */
  mkdirs("sys/devices/pci0000:17/0000:17:00.0/net/ens1f0");
  write_file("sys/devices/pci0000:17/0000:17:00.0/vendor", "0x15b3\n");
  write_file("sys/devices/pci0000:17/0000:17:00.0/device", "0x101d\n");
  write_file("sys/devices/pci0000:17/0000:17:00.0/numa_node", "1\n");
  write_file("sys/devices/pci0000:17/0000:17:00.0/net/ens1f0/speed", "100000\n");
  make_link("sys/devices/pci0000:17/0000:17:00.0/net/ens1f0/device", "../../../0000:17:00.0");
  mkdirs("sys/class/net");
  make_link("sys/class/net/ens1f0", "../../devices/pci0000:17/0000:17:00.0/net/ens1f0");

  /* virtio NIC: device -> .../0000:00:03.0/virtio2; unknown speed (-1); no NUMA info (-1). */
  mkdirs("sys/devices/pci0000:00/0000:00:03.0/virtio2");
  write_file("sys/devices/pci0000:00/0000:00:03.0/vendor", "0x1af4\n");
  write_file("sys/devices/pci0000:00/0000:00:03.0/device", "0x1000\n");
  write_file("sys/devices/pci0000:00/0000:00:03.0/numa_node", "-1\n");
  mkdirs("sys/class/net/eth0");
  write_file("sys/class/net/eth0/speed", "-1\n");
  make_link("sys/class/net/eth0/device", "../../../devices/pci0000:00/0000:00:03.0/virtio2");

  /* A PCI function behind a bridge: the deepest function is the NIC. */
  mkdirs("sys/devices/pci0000:80/0000:80:01.0/0000:81:00.1");
  write_file("sys/devices/pci0000:80/0000:80:01.0/0000:81:00.1/numa_node", "0\n");
  write_file("sys/devices/pci0000:80/0000:80:01.0/0000:81:00.1/vendor", "junk\n");
  mkdirs("sys/class/net/ib0");
  write_file("sys/class/net/ib0/speed", "200000\n");
  make_link("sys/class/net/ib0/device", "../../../devices/pci0000:80/0000:80:01.0/0000:81:00.1");

  /* Virtual interfaces: no device link at all, or one into /sys/devices/virtual. */
  mkdirs("sys/class/net/lo");
  mkdirs("sys/devices/virtual/net/veth0");
  mkdirs("sys/class/net/veth0");
  write_file("sys/class/net/veth0/speed", "10000\n");
  make_link("sys/class/net/veth0/device", "../../../devices/virtual/net/veth0");
  /* device link into a non-PCI platform device */
  mkdirs("sys/devices/platform/soc/eth-mac");
  mkdirs("sys/class/net/end0");
  make_link("sys/class/net/end0/device", "../../../devices/platform/soc/eth-mac");
  write_file("sys/class/net/end0/speed", "garbage\n");
  /* a dangling device link */
  mkdirs("sys/class/net/gone0");
  make_link("sys/class/net/gone0/device", "../../../devices/pci0000:99/0000:99:00.0");
  write_file("sys/class/net/gone0/speed", "0\n");

  /* NUMA nodes */
  mkdirs("sys/devices/system/node/node0");
  write_file("sys/devices/system/node/node0/cpulist", "0\n");
  mkdirs("sys/devices/system/node/node1");
  write_file("sys/devices/system/node/node1/cpulist", "0-3,8,10-11\n");
  mkdirs("sys/devices/system/node/node2");
  write_file("sys/devices/system/node/node2/cpulist", "1000\n"); /* a CPU we may not use */
  mkdirs("sys/devices/system/node/node3");
  write_file("sys/devices/system/node/node3/cpulist", "5000\n"); /* beyond CPU_SETSIZE */

  g_warns = 0;
  strand_log_init(capture_logger);
  return strand_topo_set_root(g_root) == STRAND_SUCCESS ? 0 : -1;
}

static int teardown_tree(void **state) {
  (void)state;
  strand_topo_set_root(NULL);
  strand_log_init(NULL);
  nftw(g_root, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
  return 0;
}

static void test_root_override(void **state) {
  (void)state;
  assert_string_equal(strand_topo_root(), g_root);
  char with_slash[PATH_MAX + 2];
  snprintf(with_slash, sizeof(with_slash), "%s//", g_root);
  assert_int_equal(strand_topo_set_root(with_slash), STRAND_SUCCESS);
  assert_string_equal(strand_topo_root(), g_root); /* trailing slashes dropped */
  assert_int_equal(strand_topo_set_root("/"), STRAND_SUCCESS);
  assert_string_equal(strand_topo_root(), "");
  assert_int_equal(strand_topo_set_root(g_root), STRAND_SUCCESS);
}

static void test_pci_nic(void **state) {
  (void)state;
  strand_netif_topo_t t;
  assert_int_equal(strand_topo_netif("ens1f0", 0, &t), STRAND_SUCCESS);
  assert_non_null(t.pci_path);
  assert_string_equal(t.pci_path, "/sys/devices/pci0000:17/0000:17:00.0");
  assert_false(t.is_virtual);
  assert_int_equal(t.numa_node, 1);
  assert_int_equal(t.speed_mbps, 100000);
  assert_true(t.speed_known);
  assert_int_equal(t.vendor_id, 0x15b3);
  assert_int_equal(t.device_id, 0x101d);
  strand_topo_netif_free(&t);
  assert_null(t.pci_path);
  strand_topo_netif_free(&t); /* idempotent */
}

static void test_virtio_nic_trimmed_to_pci_function(void **state) {
  (void)state;
  strand_netif_topo_t t;
  assert_int_equal(strand_topo_netif("eth0", 25000, &t), STRAND_SUCCESS);
  assert_non_null(t.pci_path);
  assert_string_equal(t.pci_path, "/sys/devices/pci0000:00/0000:00:03.0");
  assert_int_equal(t.numa_node, -1);
  assert_int_equal(t.speed_mbps, 25000); /* -1 in sysfs: the caller's default */
  assert_false(t.speed_known);
  assert_int_equal(t.vendor_id, 0x1af4);
  assert_int_equal(t.device_id, 0x1000);
  strand_topo_netif_free(&t);
  /* default <= 0 selects the documented 10000 */
  assert_int_equal(strand_topo_netif("eth0", -1, &t), STRAND_SUCCESS);
  assert_int_equal(t.speed_mbps, STRAND_TOPO_DEFAULT_SPEED_MBPS);
  strand_topo_netif_free(&t);
}

static void test_nic_behind_bridge(void **state) {
  (void)state;
  strand_netif_topo_t t;
  assert_int_equal(strand_topo_netif("ib0", 0, &t), STRAND_SUCCESS);
  assert_string_equal(t.pci_path, "/sys/devices/pci0000:80/0000:80:01.0/0000:81:00.1");
  assert_int_equal(t.numa_node, 0);
  assert_int_equal(t.speed_mbps, 200000);
  assert_int_equal(t.vendor_id, -1); /* unparsable */
  assert_int_equal(t.device_id, -1); /* missing */
  strand_topo_netif_free(&t);
}

static void expect_virtual(const char *ifname, int speed, bool known) {
  strand_netif_topo_t t;
  assert_int_equal(strand_topo_netif(ifname, 0, &t), STRAND_SUCCESS);
  if (t.pci_path != NULL) fail_msg("%s: pci_path %s, expected NULL", ifname, t.pci_path);
  assert_true(t.is_virtual);
  assert_int_equal(t.numa_node, -1);
  assert_int_equal(t.vendor_id, -1);
  assert_int_equal(t.device_id, -1);
  assert_int_equal(t.speed_mbps, speed);
  assert_int_equal(t.speed_known, known);
  strand_topo_netif_free(&t);
}

static void test_virtual_interfaces(void **state) {
  (void)state;
  expect_virtual("lo", STRAND_TOPO_DEFAULT_SPEED_MBPS, false);    /* no device, no speed */
  expect_virtual("veth0", 10000, true);                           /* /sys/devices/virtual */
  expect_virtual("end0", STRAND_TOPO_DEFAULT_SPEED_MBPS, false);  /* platform device, junk */
  expect_virtual("gone0", STRAND_TOPO_DEFAULT_SPEED_MBPS, false); /* dangling link, speed 0 */
  assert_int_equal(g_warns, 0);
}

static void test_bad_names(void **state) {
  (void)state;
  strand_netif_topo_t t;
  g_warns = 0;
  assert_int_equal(strand_topo_netif("nosuch0", 0, &t), STRAND_INVALID_USAGE);
  assert_int_equal(g_warns, 1);
  assert_null(t.pci_path);
  assert_int_equal(t.numa_node, -1);
  assert_int_equal(strand_topo_netif("../../etc", 0, &t), STRAND_INVALID_ARGUMENT);
  assert_int_equal(strand_topo_netif("..", 0, &t), STRAND_INVALID_ARGUMENT);
  assert_int_equal(strand_topo_netif("", 0, &t), STRAND_INVALID_ARGUMENT);
  assert_int_equal(strand_topo_netif(NULL, 0, &t), STRAND_INVALID_ARGUMENT);
  assert_int_equal(strand_topo_netif("a-name-far-too-long-for-linux", 0, &t),
                   STRAND_INVALID_ARGUMENT);
  assert_int_equal(strand_topo_netif("lo", 0, NULL), STRAND_INVALID_ARGUMENT);
}

static void test_parse_cpulist(void **state) {
  (void)state;
  cpu_set_t s;
  assert_int_equal(strand_topo_parse_cpulist("0-3,8,10-11\n", &s), STRAND_SUCCESS);
  assert_int_equal(CPU_COUNT(&s), 7);
  assert_true(CPU_ISSET(0, &s) && CPU_ISSET(3, &s) && CPU_ISSET(8, &s) && CPU_ISSET(11, &s));
  assert_false(CPU_ISSET(4, &s) || CPU_ISSET(9, &s));
  assert_int_equal(strand_topo_parse_cpulist("", &s), STRAND_SUCCESS);
  assert_int_equal(CPU_COUNT(&s), 0);
  assert_int_equal(strand_topo_parse_cpulist("\n", &s), STRAND_SUCCESS);
  assert_int_equal(strand_topo_parse_cpulist(" 5 , 7-7 ", &s), STRAND_SUCCESS);
  assert_int_equal(CPU_COUNT(&s), 2);
  const char *bad[] = {"3-1", "1-", "-1", "a", "1,,2", "1,", "1 2", "0-3:2", "5000", "1-5000",
                       "99999999999999999999"};
  for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
    CPU_ZERO(&s);
    CPU_SET(1, &s);
    if (strand_topo_parse_cpulist(bad[i], &s) != STRAND_INVALID_ARGUMENT)
      fail_msg("cpulist '%s' was accepted", bad[i]);
    assert_int_equal(CPU_COUNT(&s), 0);
  }
}

static void test_numa_cpus(void **state) {
  (void)state;
  cpu_set_t s;
  assert_int_equal(strand_topo_numa_cpus(1, &s), STRAND_SUCCESS);
  assert_int_equal(CPU_COUNT(&s), 7);
  assert_int_equal(strand_topo_numa_cpus(0, &s), STRAND_SUCCESS);
  assert_int_equal(CPU_COUNT(&s), 1);
  assert_int_equal(strand_topo_numa_cpus(7, &s), STRAND_SYSTEM_ERROR); /* no such node */
  assert_int_equal(strand_topo_numa_cpus(-1, &s), STRAND_INVALID_ARGUMENT);
  assert_int_equal(strand_topo_numa_cpus(3, &s), STRAND_INVALID_ARGUMENT);
  assert_true(strand_topo_num_cpus() >= 1);
}

struct pin_case {
  int node;
  strand_result_t result;
  bool pinned;
  cpu_set_t before, after;
};

/* Pinning runs in its own thread so the test process keeps its affinity. */
static void *pin_thread(void *arg) {
  struct pin_case *c = arg;
  pthread_getaffinity_np(pthread_self(), sizeof(c->before), &c->before);
  c->result = strand_topo_pin_thread_to_numa(c->node, &c->pinned);
  pthread_getaffinity_np(pthread_self(), sizeof(c->after), &c->after);
  return NULL;
}

static struct pin_case run_pin(int node) {
  struct pin_case c;
  memset(&c, 0, sizeof(c));
  c.node = node;
  c.pinned = true; /* must be overwritten */
  pthread_t th;
  assert_int_equal(pthread_create(&th, NULL, pin_thread, &c), 0);
  pthread_join(th, NULL);
  return c;
}

static void test_pin_thread(void **state) {
  (void)state;
  cpu_set_t mine;
  assert_int_equal(sched_getaffinity(0, sizeof(mine), &mine), 0);
  /* node1 = 0-3,8,10-11: the thread ends up on the allowed part of it */
  struct pin_case c = run_pin(1);
  assert_int_equal(c.result, STRAND_SUCCESS);
  cpu_set_t node1, expect;
  assert_int_equal(strand_topo_numa_cpus(1, &node1), STRAND_SUCCESS);
  CPU_AND(&expect, &node1, &c.before);
  if (CPU_COUNT(&expect) == 0) {
    assert_false(c.pinned);
    assert_true(CPU_EQUAL(&c.after, &c.before));
  } else {
    assert_true(c.pinned);
    assert_true(CPU_EQUAL(&c.after, &expect));
  }
  /* no-ops: unknown node, unreadable node, node of CPUs we may not use, bad cpulist */
  int noop_nodes[] = {-1, 7, 2, 3};
  for (size_t i = 0; i < sizeof(noop_nodes) / sizeof(noop_nodes[0]); i++) {
    c = run_pin(noop_nodes[i]);
    assert_int_equal(c.result, STRAND_SUCCESS);
    assert_false(c.pinned);
    assert_true(CPU_EQUAL(&c.after, &c.before));
  }
  /* the test thread itself was never touched */
  cpu_set_t now;
  assert_int_equal(sched_getaffinity(0, sizeof(now), &now), 0);
  assert_true(CPU_EQUAL(&now, &mine));
  assert_int_equal(strand_topo_pin_thread_to_numa(-1, NULL), STRAND_SUCCESS);
}

/* The real sysfs of this host: whatever is there must come out consistent. */
static void test_real_host(void **state) {
  (void)state;
  strand_topo_set_root(NULL);
  strand_netif_topo_t t;
  if (access("/sys/class/net/lo", F_OK) != 0) {
    fprintf(stderr, "skipped: no /sys/class/net/lo (sysfs not mounted?)\n");
    strand_topo_set_root(g_root);
    skip();
  }
  assert_int_equal(strand_topo_netif("lo", 0, &t), STRAND_SUCCESS);
  assert_null(t.pci_path);
  assert_true(t.is_virtual);
  assert_int_equal(t.speed_mbps, STRAND_TOPO_DEFAULT_SPEED_MBPS);
  DIR *d = opendir("/sys/class/net");
  assert_non_null(d);
  struct dirent *e;
  while ((e = readdir(d)) != NULL) {
    if (e->d_name[0] == '.') continue;
    assert_int_equal(strand_topo_netif(e->d_name, 12345, &t), STRAND_SUCCESS);
    assert_true(t.speed_mbps > 0);
    assert_true(t.speed_known || t.speed_mbps == 12345);
    assert_true(t.numa_node >= -1);
    if (t.pci_path != NULL) {
      assert_int_equal(strncmp(t.pci_path, "/sys/devices/", 13), 0);
      assert_int_equal(access(t.pci_path, F_OK), 0);
      assert_false(t.is_virtual);
      fprintf(stderr, "  %s: %s numa %d speed %d vendor 0x%x\n", e->d_name, t.pci_path,
              t.numa_node, t.speed_mbps, (unsigned)t.vendor_id);
    }
    strand_topo_netif_free(&t);
  }
  closedir(d);
  strand_topo_set_root(g_root);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_root_override),
      cmocka_unit_test(test_pci_nic),
      cmocka_unit_test(test_virtio_nic_trimmed_to_pci_function),
      cmocka_unit_test(test_nic_behind_bridge),
      cmocka_unit_test(test_virtual_interfaces),
      cmocka_unit_test(test_bad_names),
      cmocka_unit_test(test_parse_cpulist),
      cmocka_unit_test(test_numa_cpus),
      cmocka_unit_test(test_pin_thread),
      cmocka_unit_test(test_real_host),
  };
  return cmocka_run_group_tests(tests, setup_tree, teardown_tree);
}
