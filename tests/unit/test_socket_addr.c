/* Unit tests of strand/socket_addr.h: address text round trips, the NCCL_SOCKET_IFNAME and
 * NCCL_SOCKET_FAMILY grammars, the interface-selection policy on synthetic lists, and enumeration
 * on this host. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <arpa/inet.h>
#include <cmocka.h>
#include <net/if.h>

#include "strand/log.h"
#include "strand/socket_addr.h"

/* ---- WARN capture: configuration errors must say something ---------------------------------- */

static int g_warns;
static char g_last_warn[1024];

static void capture_logger(strand_log_level_t level, unsigned long flags, const char *file,
                           int line, const char *fmt, ...) {
  (void)flags, (void)file, (void)line;
  if (level != STRAND_LOG_WARN) return;
  g_warns++;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(g_last_warn, sizeof(g_last_warn), fmt, ap);
  va_end(ap);
}

static int setup_capture(void **state) {
  (void)state;
  g_warns = 0;
  g_last_warn[0] = '\0';
  strand_log_init(capture_logger);
  return 0;
}

static int teardown_capture(void **state) {
  (void)state;
  strand_log_init(NULL);
  return 0;
}

/* ---- addresses ------------------------------------------------------------------------------ */

static void roundtrip(const char *in, const char *expect_out, int family, int port) {
  strand_sockaddr_t a;
  assert_int_equal(strand_sockaddr_from_string(in, &a), STRAND_SUCCESS);
  assert_int_equal(a.sa.sa_family, family);
  assert_int_equal(strand_sockaddr_port(&a), port);
  char buf[STRAND_SOCKADDR_STRLEN];
  assert_string_equal(strand_sockaddr_to_string(&a, buf, sizeof(buf)), expect_out);
  /* the printed form parses back to the same address */
  strand_sockaddr_t b;
  assert_int_equal(strand_sockaddr_from_string(buf, &b), STRAND_SUCCESS);
  assert_int_equal(strand_sockaddr_compare(&a, &b), 0);
}

static void test_addr_roundtrip(void **state) {
  (void)state;
  roundtrip("1.2.3.4", "1.2.3.4:0", AF_INET, 0);
  roundtrip("10.0.0.1:5000", "10.0.0.1:5000", AF_INET, 5000);
  roundtrip("::1", "[::1]:0", AF_INET6, 0);
  roundtrip("[::1]", "[::1]:0", AF_INET6, 0);
  roundtrip("[fd00::2]:65535", "[fd00::2]:65535", AF_INET6, 65535);
  roundtrip("fe80::1%7", "[fe80::1%7]:0", AF_INET6, 0);
  roundtrip("[fe80::1%3]:80", "[fe80::1%3]:80", AF_INET6, 80);
  strand_sockaddr_t a;
  assert_int_equal(strand_sockaddr_from_string("[fe80::1%lo]:80", &a), STRAND_SUCCESS);
  assert_int_equal(a.sin6.sin6_scope_id, if_nametoindex("lo"));
  assert_int_equal(strand_sockaddr_len(&a), sizeof(struct sockaddr_in6));
}

static void test_addr_bad_text(void **state) {
  (void)state;
  const char *bad[] = {"",          "1.2.3",        "1.2.3.4:",        "1.2.3.4:65536",
                       "1.2.3.4:-1", "1.2.3.4:80x",  "::1:80x::",       "[::1",
                       "[::1]80",    "[::1]:",       "[1.2.3.4]:80",    "host.example:80",
                       "fe80::1%",   "fe80::1%nosuchif0", "256.1.1.1", " 1.2.3.4"};
  for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
    strand_sockaddr_t a;
    memset(&a, 0xab, sizeof(a));
    if (strand_sockaddr_from_string(bad[i], &a) != STRAND_INVALID_ARGUMENT)
      fail_msg("'%s' was accepted as an address", bad[i]);
    assert_int_equal(a.sa.sa_family, AF_UNSPEC); /* zeroed on failure */
  }
  assert_int_equal(strand_sockaddr_from_string(NULL, NULL), STRAND_INVALID_ARGUMENT);
}

static void test_addr_compare_and_helpers(void **state) {
  (void)state;
  strand_sockaddr_t a, b, c, d;
  assert_int_equal(strand_sockaddr_from_string("10.0.0.1:80", &a), STRAND_SUCCESS);
  assert_int_equal(strand_sockaddr_from_string("10.0.0.1:81", &b), STRAND_SUCCESS);
  assert_int_equal(strand_sockaddr_from_string("10.0.0.2:1", &c), STRAND_SUCCESS);
  assert_int_equal(strand_sockaddr_from_string("[::1]:80", &d), STRAND_SUCCESS);
  assert_true(strand_sockaddr_compare(&a, &b) < 0);
  assert_true(strand_sockaddr_compare(&b, &a) > 0);
  assert_true(strand_sockaddr_compare(&b, &c) < 0); /* address before port */
  assert_true(strand_sockaddr_compare(&a, &d) != 0);
  assert_true(strand_sockaddr_same_host(&a, &b));
  assert_false(strand_sockaddr_same_host(&a, &c));
  assert_false(strand_sockaddr_same_host(&a, &d));

  /* padding and flowinfo do not matter */
  strand_sockaddr_t e = d;
  e.sin6.sin6_flowinfo = 1234;
  assert_int_equal(strand_sockaddr_compare(&d, &e), 0);
  strand_sockaddr_t f;
  memset(&f, 0x5a, sizeof(f));
  f.sin.sin_family = AF_INET;
  f.sin.sin_port = htons(80);
  f.sin.sin_addr.s_addr = htonl(0x0a000001);
  assert_int_equal(strand_sockaddr_compare(&a, &f), 0);

  strand_sockaddr_set_port(&a, 4242);
  assert_int_equal(strand_sockaddr_port(&a), 4242);
  assert_true(strand_sockaddr_is_loopback(&d));
  assert_false(strand_sockaddr_is_loopback(&a));
  strand_sockaddr_t lo4, ll;
  assert_int_equal(strand_sockaddr_from_string("127.1.2.3", &lo4), STRAND_SUCCESS);
  assert_true(strand_sockaddr_is_loopback(&lo4));
  assert_int_equal(strand_sockaddr_from_string("fe80::abcd", &ll), STRAND_SUCCESS);
  assert_true(strand_sockaddr_is_ipv6_link_local(&ll));
  assert_false(strand_sockaddr_is_ipv6_link_local(&d));

  strand_sockaddr_t none;
  memset(&none, 0, sizeof(none));
  char buf[STRAND_SOCKADDR_STRLEN];
  assert_string_equal(strand_sockaddr_to_string(&none, buf, sizeof(buf)), "<unspec>");
  assert_int_equal(strand_sockaddr_len(&none), 0);
  assert_int_equal(strand_sockaddr_port(&none), -1);
  /* truncation is safe */
  char tiny[5];
  strand_sockaddr_to_string(&a, tiny, sizeof(tiny));
  assert_int_equal(strlen(tiny), 4);
}

/* ---- NCCL_SOCKET_FAMILY ----------------------------------------------------------------------- */

static void test_family_parse(void **state) {
  (void)state;
  int fam = -7;
  assert_int_equal(strand_socket_family_parse(NULL, &fam), STRAND_SUCCESS);
  assert_int_equal(fam, AF_UNSPEC);
  fam = -7;
  assert_int_equal(strand_socket_family_parse("  ", &fam), STRAND_SUCCESS);
  assert_int_equal(fam, AF_UNSPEC);
  assert_int_equal(strand_socket_family_parse("AF_INET", &fam), STRAND_SUCCESS);
  assert_int_equal(fam, AF_INET);
  assert_int_equal(strand_socket_family_parse("af_inet6", &fam), STRAND_SUCCESS);
  assert_int_equal(fam, AF_INET6);
  assert_int_equal(strand_socket_family_parse(" AF_INET6\n", &fam), STRAND_SUCCESS);
  assert_int_equal(fam, AF_INET6);
  assert_int_equal(g_warns, 0);

  const char *bad[] = {"inet", "AF_INET4", "AF_UNIX", "4", "AF_INET6x", "AF_INET AF_INET6",
                       "a very long value that is not a family at all"};
  for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
    fam = 99;
    g_warns = 0;
    assert_int_equal(strand_socket_family_parse(bad[i], &fam), STRAND_INVALID_USAGE);
    assert_int_equal(fam, 99); /* unchanged */
    assert_int_equal(g_warns, 1);
    assert_non_null(strstr(g_last_warn, bad[i]));
    assert_non_null(strstr(g_last_warn, "AF_INET6"));
  }
}

/* ---- NCCL_SOCKET_IFNAME ---------------------------------------------------------------------- */

static strand_if_filter_t parse_ok(const char *spec) {
  strand_if_filter_t f;
  int before = g_warns;
  if (strand_if_filter_parse(spec, &f) != STRAND_SUCCESS) fail_msg("'%s' was rejected", spec ? spec : "(unset)");
  assert_int_equal(g_warns, before);
  return f;
}

static void test_ifname_prefix(void **state) {
  (void)state;
  strand_if_filter_t f = parse_ok("eth,ib");
  assert_false(f.automatic);
  assert_false(f.exclude);
  assert_false(f.exact);
  assert_int_equal(f.count, 2);
  assert_string_equal(f.items[0], "eth");
  assert_string_equal(f.items[1], "ib");
  assert_true(strand_if_filter_match(&f, "eth0"));
  assert_true(strand_if_filter_match(&f, "eth"));
  assert_true(strand_if_filter_match(&f, "ib12"));
  assert_false(strand_if_filter_match(&f, "enp1s0"));
  assert_false(strand_if_filter_match(&f, "et"));
  assert_false(strand_if_filter_match(&f, "lo"));
}

static void test_ifname_exact(void **state) {
  (void)state;
  strand_if_filter_t f = parse_ok("=eth0,eth1");
  assert_true(f.exact);
  assert_false(f.exclude);
  assert_true(strand_if_filter_match(&f, "eth0"));
  assert_true(strand_if_filter_match(&f, "eth1"));
  assert_false(strand_if_filter_match(&f, "eth10"));
  assert_false(strand_if_filter_match(&f, "eth"));
}

static void test_ifname_exclude(void **state) {
  (void)state;
  strand_if_filter_t f = parse_ok("^docker,lo");
  assert_true(f.exclude);
  assert_false(f.exact);
  assert_true(strand_if_filter_match(&f, "eth0"));
  assert_false(strand_if_filter_match(&f, "docker0"));
  assert_false(strand_if_filter_match(&f, "lo"));
  assert_false(strand_if_filter_match(&f, "lo2"));

  strand_if_filter_t g = parse_ok("^=eth0");
  assert_true(g.exclude);
  assert_true(g.exact);
  assert_false(strand_if_filter_match(&g, "eth0"));
  assert_true(strand_if_filter_match(&g, "eth01"));
  assert_true(strand_if_filter_match(&g, "lo"));
}

static void test_ifname_automatic_and_empty_items(void **state) {
  (void)state;
  strand_if_filter_t f = parse_ok(NULL);
  assert_true(f.automatic);
  assert_true(strand_if_filter_match(&f, "anything"));
  f = parse_ok("");
  assert_true(f.automatic);
  f = parse_ok("   ");
  assert_true(f.automatic);
  assert_true(strand_if_filter_match(NULL, "eth0"));

  f = parse_ok("eth0,,ib0,");
  assert_int_equal(f.count, 2);
  assert_string_equal(f.items[1], "ib0");
  f = parse_ok(" eth0 , ib0 ");
  assert_int_equal(f.count, 2);
  assert_string_equal(f.items[0], "eth0");
  assert_string_equal(f.items[1], "ib0");
  f = parse_ok(",eth0");
  assert_int_equal(f.count, 1);
  f = parse_ok("eth0:1"); /* alias labels keep their colon */
  assert_true(strand_if_filter_match(&f, "eth0:1"));
  assert_false(strand_if_filter_match(&f, "eth0"));
}

static void test_ifname_garbage(void **state) {
  (void)state;
  const char *bad[] = {"^",      "=",         "^=",      ",,",        " , ",
                       "=^eth0", "eth 0",     "eth0/1",  "eth0,^ib",  "eth0,=ib0",
                       "a-name-much-too-long-for-linux", "eth\x01", "^^eth0"};
  for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
    strand_if_filter_t f;
    memset(&f, 0x77, sizeof(f));
    g_warns = 0;
    if (strand_if_filter_parse(bad[i], &f) != STRAND_INVALID_USAGE)
      fail_msg("'%s' was accepted", bad[i]);
    assert_int_equal(g_warns, 1);
    assert_non_null(strstr(g_last_warn, "NCCL_SOCKET_IFNAME"));
    /* never half-filled: an automatic filter */
    assert_true(f.automatic);
    assert_int_equal(f.count, 0);
  }
  /* too many items */
  char many[1024] = "";
  for (int i = 0; i <= STRAND_IF_FILTER_MAX_ITEMS; i++) {
    char item[16];
    snprintf(item, sizeof(item), "e%d,", i);
    strcat(many, item);
  }
  strand_if_filter_t f;
  g_warns = 0;
  assert_int_equal(strand_if_filter_parse(many, &f), STRAND_INVALID_USAGE);
  assert_int_equal(g_warns, 1);
  /* exactly 15 characters is the longest legal name */
  f = parse_ok("=abcdefghijklmno");
  assert_true(strand_if_filter_match(&f, "abcdefghijklmno"));
}

/* ---- selection policy on synthetic lists ----------------------------------------------------- */

#define UPRUN (IFF_UP | IFF_RUNNING)

static strand_netif_t cand(const char *name, const char *addr, unsigned flags) {
  strand_netif_t c;
  memset(&c, 0, sizeof(c));
  snprintf(c.name, sizeof(c.name), "%s", name);
  assert_int_equal(strand_sockaddr_from_string(addr, &c.addr), STRAND_SUCCESS);
  c.ifindex = (int)(strlen(name) + 1);
  c.flags = flags;
  return c;
}

static void expect_names(const strand_netif_t *out, int n, const char *const *names, int count) {
  if (n != count) {
    char got[512] = "";
    for (int i = 0; i < n; i++) {
      strcat(got, out[i].name);
      strcat(got, " ");
    }
    fail_msg("expected %d interfaces, got %d: %s", count, n, got);
  }
  for (int i = 0; i < n; i++) assert_string_equal(out[i].name, names[i]);
}

static void test_auto_rank(void **state) {
  (void)state;
  assert_int_equal(strand_netif_auto_rank("ib0"), 0);
  assert_int_equal(strand_netif_auto_rank("eth0"), 1);
  assert_int_equal(strand_netif_auto_rank("enp1s0f0"), 1);
  assert_int_equal(strand_netif_auto_rank("docker0"), 2);
  assert_int_equal(strand_netif_auto_rank("lo"), 3);
  assert_int_equal(strand_netif_auto_rank("virbr0"), 4);
  assert_int_equal(strand_netif_auto_rank("i"), 1);
}

static void test_select_auto_cascade(void **state) {
  (void)state;
  strand_netif_t c[] = {
      cand("lo", "127.0.0.1", UPRUN | IFF_LOOPBACK), cand("docker0", "172.17.0.1", UPRUN),
      cand("eth0", "10.0.0.2", UPRUN),               cand("virbr0", "192.168.122.1", UPRUN),
      cand("ib0", "10.1.0.2", UPRUN),                cand("eth1", "10.0.1.2", UPRUN),
      cand("ib1", "10.1.1.2", UPRUN),
  };
  strand_netif_t out[STRAND_NETIF_MAX];
  int n = strand_netif_select(c, 7, NULL, AF_UNSPEC, out, STRAND_NETIF_MAX);
  expect_names(out, n, (const char *const[]){"ib0", "ib1"}, 2);
  assert_int_equal(out[0].ifindex, 4);
  assert_int_equal(out[0].flags, UPRUN);

  /* without ib: every "other" interface, in the order seen */
  n = strand_netif_select(c, 4, NULL, AF_UNSPEC, out, STRAND_NETIF_MAX);
  expect_names(out, n, (const char *const[]){"eth0"}, 1);
  strand_netif_t c2[] = {c[0], c[1], c[2], c[3], c[5]};
  n = strand_netif_select(c2, 5, NULL, AF_UNSPEC, out, STRAND_NETIF_MAX);
  expect_names(out, n, (const char *const[]){"eth0", "eth1"}, 2);
  /* then docker, then lo, then virbr */
  strand_netif_t c3[] = {c[3], c[0], c[1]};
  n = strand_netif_select(c3, 3, NULL, AF_UNSPEC, out, STRAND_NETIF_MAX);
  expect_names(out, n, (const char *const[]){"docker0"}, 1);
  strand_netif_t c4[] = {c[3], c[0]};
  n = strand_netif_select(c4, 2, NULL, AF_UNSPEC, out, STRAND_NETIF_MAX);
  expect_names(out, n, (const char *const[]){"lo"}, 1);
  n = strand_netif_select(&c[3], 1, NULL, AF_UNSPEC, out, STRAND_NETIF_MAX);
  expect_names(out, n, (const char *const[]){"virbr0"}, 1);
  /* an automatic filter object behaves like NULL */
  strand_if_filter_t autof;
  assert_int_equal(strand_if_filter_parse("", &autof), STRAND_SUCCESS);
  n = strand_netif_select(c, 7, &autof, AF_UNSPEC, out, STRAND_NETIF_MAX);
  expect_names(out, n, (const char *const[]){"ib0", "ib1"}, 2);
}

static void test_select_flags_family_filter(void **state) {
  (void)state;
  strand_netif_t c[] = {
      cand("eth0", "10.0.0.2", IFF_UP),               /* not RUNNING */
      cand("eth1", "10.0.1.2", IFF_RUNNING),          /* not UP */
      cand("eth2", "fd00::2", UPRUN),                 /* IPv6 only */
      cand("eth3", "10.0.3.2", UPRUN),
      cand("docker0", "172.17.0.1", UPRUN),
      cand("lo", "127.0.0.1", UPRUN | IFF_LOOPBACK),
  };
  strand_netif_t out[STRAND_NETIF_MAX];
  int n = strand_netif_select(c, 6, NULL, AF_UNSPEC, out, STRAND_NETIF_MAX);
  expect_names(out, n, (const char *const[]){"eth2", "eth3"}, 2);
  n = strand_netif_select(c, 6, NULL, AF_INET, out, STRAND_NETIF_MAX);
  expect_names(out, n, (const char *const[]){"eth3"}, 1);
  n = strand_netif_select(c, 6, NULL, AF_INET6, out, STRAND_NETIF_MAX);
  expect_names(out, n, (const char *const[]){"eth2"}, 1);

  /* a user list keeps every matching interface, whatever its group */
  strand_if_filter_t f;
  assert_int_equal(strand_if_filter_parse("^eth", &f), STRAND_SUCCESS);
  n = strand_netif_select(c, 6, &f, AF_UNSPEC, out, STRAND_NETIF_MAX);
  expect_names(out, n, (const char *const[]){"docker0", "lo"}, 2);
  assert_int_equal(strand_if_filter_parse("lo,eth", &f), STRAND_SUCCESS);
  n = strand_netif_select(c, 6, &f, AF_UNSPEC, out, STRAND_NETIF_MAX);
  expect_names(out, n, (const char *const[]){"eth2", "eth3", "lo"}, 3);
  assert_int_equal(strand_if_filter_parse("=eth", &f), STRAND_SUCCESS);
  n = strand_netif_select(c, 6, &f, AF_UNSPEC, out, STRAND_NETIF_MAX);
  assert_int_equal(n, 0);
  /* nothing in, nothing out */
  assert_int_equal(strand_netif_select(NULL, 0, NULL, AF_UNSPEC, out, STRAND_NETIF_MAX), 0);
  assert_int_equal(strand_netif_select(c, 6, NULL, AF_UNSPEC, out, 0), 0);
}

static void test_select_one_address_per_interface(void **state) {
  (void)state;
  strand_netif_t c[] = {
      cand("eth0", "fe80::1%1", UPRUN), cand("eth0", "fd00::2", UPRUN),
      cand("eth0", "10.0.0.2", UPRUN),  cand("eth0", "10.0.0.3", UPRUN),
      cand("eth1", "fd00::3", UPRUN),   cand("eth1", "fe80::2%2", UPRUN),
  };
  strand_netif_t out[STRAND_NETIF_MAX];
  int n = strand_netif_select(c, 6, NULL, AF_UNSPEC, out, STRAND_NETIF_MAX);
  expect_names(out, n, (const char *const[]){"eth0", "eth1"}, 2);
  char buf[STRAND_SOCKADDR_STRLEN];
  assert_string_equal(strand_sockaddr_to_string(&out[0].addr, buf, sizeof(buf)), "10.0.0.2:0");
  assert_string_equal(strand_sockaddr_to_string(&out[1].addr, buf, sizeof(buf)), "[fd00::3]:0");
  n = strand_netif_select(c, 6, NULL, AF_INET6, out, STRAND_NETIF_MAX);
  expect_names(out, n, (const char *const[]){"eth0", "eth1"}, 2);
  assert_string_equal(strand_sockaddr_to_string(&out[0].addr, buf, sizeof(buf)), "[fd00::2]:0");
}

static void test_select_link_local_only_as_last_resort(void **state) {
  (void)state;
  strand_netif_t c[] = {
      cand("eth0", "fe80::1%1", UPRUN),
      cand("eth1", "fd00::3", UPRUN),
  };
  strand_netif_t out[STRAND_NETIF_MAX];
  int n = strand_netif_select(c, 2, NULL, AF_INET6, out, STRAND_NETIF_MAX);
  expect_names(out, n, (const char *const[]){"eth1"}, 1);
  /* nothing else: the link-local address is used, scope id kept */
  n = strand_netif_select(c, 1, NULL, AF_INET6, out, STRAND_NETIF_MAX);
  expect_names(out, n, (const char *const[]){"eth0"}, 1);
  assert_int_equal(out[0].addr.sin6.sin6_scope_id, 1);
  /* ::1 counts as link-local-like: a real IPv6 address elsewhere wins, even from a later group */
  strand_netif_t d[] = {cand("lo", "::1", UPRUN), cand("docker0", "fd00::17", UPRUN)};
  n = strand_netif_select(d, 2, NULL, AF_INET6, out, STRAND_NETIF_MAX);
  expect_names(out, n, (const char *const[]){"docker0"}, 1);
  n = strand_netif_select(d, 1, NULL, AF_INET6, out, STRAND_NETIF_MAX);
  expect_names(out, n, (const char *const[]){"lo"}, 1);
}

static void test_select_max(void **state) {
  (void)state;
  strand_netif_t c[40];
  for (int i = 0; i < 40; i++) {
    char name[16], addr[32];
    snprintf(name, sizeof(name), "eth%d", i);
    snprintf(addr, sizeof(addr), "10.0.%d.1", i);
    c[i] = cand(name, addr, i < 20 ? IFF_UP : UPRUN); /* the first 20 are unusable */
  }
  strand_netif_t out[STRAND_NETIF_MAX + 4];
  int n = strand_netif_select(c, 40, NULL, AF_UNSPEC, out, STRAND_NETIF_MAX + 4);
  assert_int_equal(n, STRAND_NETIF_MAX);
  assert_string_equal(out[0].name, "eth20"); /* unusable ones do not eat the budget */
  assert_string_equal(out[15].name, "eth35");
  n = strand_netif_select(c, 40, NULL, AF_UNSPEC, out, 3);
  assert_int_equal(n, 3);
}

/* ---- this host ------------------------------------------------------------------------------- */

static void test_find_on_host(void **state) {
  (void)state;
  strand_if_filter_t f;
  assert_int_equal(strand_if_filter_parse("=lo", &f), STRAND_SUCCESS);
  strand_netif_t out[STRAND_NETIF_MAX];
  int n = -1;
  assert_int_equal(strand_netif_find(&f, AF_INET, out, STRAND_NETIF_MAX, &n), STRAND_SUCCESS);
  if (n == 0) skip(); /* a host whose loopback is down: nothing to check */
  assert_int_equal(n, 1);
  assert_string_equal(out[0].name, "lo");
  assert_true(strand_sockaddr_is_loopback(&out[0].addr));
  assert_int_equal(out[0].ifindex, (int)if_nametoindex("lo"));
  assert_int_equal(strand_sockaddr_port(&out[0].addr), 0);

  /* automatic choice finds something on any host with loopback, and never more than 16 */
  assert_int_equal(strand_netif_find(NULL, AF_UNSPEC, out, STRAND_NETIF_MAX, &n), STRAND_SUCCESS);
  assert_true(n >= 1 && n <= STRAND_NETIF_MAX);
  for (int i = 0; i < n; i++) {
    assert_true(out[i].ifindex > 0);
    assert_true((out[i].flags & (IFF_UP | IFF_RUNNING)) == (IFF_UP | IFF_RUNNING));
  }

  /* a filter matching nothing is not an error for strand_netif_find */
  assert_int_equal(strand_if_filter_parse("=no-such-if0", &f), STRAND_SUCCESS);
  assert_int_equal(strand_netif_find(&f, AF_UNSPEC, out, STRAND_NETIF_MAX, &n), STRAND_SUCCESS);
  assert_int_equal(n, 0);
}

static void test_find_from_env(void **state) {
  (void)state;
  strand_netif_t out[STRAND_NETIF_MAX];
  int n = -1;
  setenv("NCCL_SOCKET_IFNAME", "=lo", 1);
  setenv("NCCL_SOCKET_FAMILY", "AF_INET", 1);
  assert_int_equal(strand_netif_find_from_env(out, STRAND_NETIF_MAX, &n), STRAND_SUCCESS);
  assert_int_equal(n, 1);
  assert_string_equal(out[0].name, "lo");

  g_warns = 0;
  setenv("NCCL_SOCKET_IFNAME", "=no-such-if0", 1);
  assert_int_equal(strand_netif_find_from_env(out, STRAND_NETIF_MAX, &n), STRAND_SYSTEM_ERROR);
  assert_int_equal(n, 0);
  assert_int_equal(g_warns, 1);
  assert_non_null(strstr(g_last_warn, "=no-such-if0"));
  assert_non_null(strstr(g_last_warn, "AF_INET"));

  setenv("NCCL_SOCKET_IFNAME", "lo", 1);
  setenv("NCCL_SOCKET_FAMILY", "IPv4", 1);
  assert_int_equal(strand_netif_find_from_env(out, STRAND_NETIF_MAX, &n), STRAND_INVALID_USAGE);
  setenv("NCCL_SOCKET_FAMILY", "AF_INET", 1);
  setenv("NCCL_SOCKET_IFNAME", "^", 1);
  assert_int_equal(strand_netif_find_from_env(out, STRAND_NETIF_MAX, &n), STRAND_INVALID_USAGE);
  unsetenv("NCCL_SOCKET_IFNAME");
  unsetenv("NCCL_SOCKET_FAMILY");
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_addr_roundtrip),
      cmocka_unit_test(test_addr_bad_text),
      cmocka_unit_test(test_addr_compare_and_helpers),
      cmocka_unit_test_setup_teardown(test_family_parse, setup_capture, teardown_capture),
      cmocka_unit_test_setup_teardown(test_ifname_prefix, setup_capture, teardown_capture),
      cmocka_unit_test_setup_teardown(test_ifname_exact, setup_capture, teardown_capture),
      cmocka_unit_test_setup_teardown(test_ifname_exclude, setup_capture, teardown_capture),
      cmocka_unit_test_setup_teardown(test_ifname_automatic_and_empty_items, setup_capture,
                                      teardown_capture),
      cmocka_unit_test_setup_teardown(test_ifname_garbage, setup_capture, teardown_capture),
      cmocka_unit_test(test_auto_rank),
      cmocka_unit_test(test_select_auto_cascade),
      cmocka_unit_test(test_select_flags_family_filter),
      cmocka_unit_test(test_select_one_address_per_interface),
      cmocka_unit_test(test_select_link_local_only_as_last_resort),
      cmocka_unit_test(test_select_max),
      cmocka_unit_test_setup_teardown(test_find_on_host, setup_capture, teardown_capture),
      cmocka_unit_test_setup_teardown(test_find_from_env, setup_capture, teardown_capture),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
