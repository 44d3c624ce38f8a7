/* Strand SDK — socket addresses and network-interface selection.
 *
 * What every TCP-based plugin (and the bootstrap of strand-conform) needs before it can open a
 * socket: an IPv4/IPv6 address type small enough to ship inside the 128-byte NCCL handle, text
 * conversion for logs and configuration, and the interface choice NCCL's own Socket transport makes
 * (spec §9.2), driven by the same variables so operators need to learn nothing new:
 *
 *   NCCL_SOCKET_IFNAME   comma list of interface-name prefixes; a leading '^' turns it into an
 *                        exclude list, a leading '=' makes the items exact names, "^=" does both.
 *                        Unset or empty: NCCL's automatic choice (strand_netif_select).
 *   NCCL_SOCKET_FAMILY   "AF_INET" or "AF_INET6" (case-insensitive); unset/empty = either.
 *
 * Errors are returned as strand_result_t; configuration errors also log a WARN that quotes the
 * offending value and says what is accepted. All functions are thread-safe (no global state). */
#ifndef STRAND_SOCKET_ADDR_H
#define STRAND_SOCKET_ADDR_H

#include <net/if.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include "strand/abi/types.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---------------------------------------------------------------------------------------------
 * Addresses
 * ------------------------------------------------------------------------------------------- */

/* An IPv4 or IPv6 socket address (28 bytes: fits in an NCCL handle). `sa.sa_family` tells which
 * member is valid; AF_UNSPEC (all-zero) means "no address". Ports are in network byte order inside
 * the struct, as the kernel wants them; use the accessors below for host-order ports. */
typedef union {
  struct sockaddr sa;
  struct sockaddr_in sin;
  struct sockaddr_in6 sin6;
} strand_sockaddr_t;

/* Buffer size that always suffices for strand_sockaddr_to_string:
 * "[" + IPv6 text (46) + "%" + scope name/number (16) + "]:" + port (5) + NUL. */
#define STRAND_SOCKADDR_STRLEN 80

/* Length to pass to bind/connect: sizeof(sockaddr_in) or sizeof(sockaddr_in6); 0 if the family is
 * neither (such an address must not be used). */
socklen_t strand_sockaddr_len(const strand_sockaddr_t *addr);

/* Port in host byte order; -1 if the family is neither AF_INET nor AF_INET6. */
int strand_sockaddr_port(const strand_sockaddr_t *addr);

/* Sets the port (host byte order). No effect on an address of unknown family. */
void strand_sockaddr_set_port(strand_sockaddr_t *addr, uint16_t port);

/* "a.b.c.d:port" for IPv4, "[v6addr]:port" for IPv6 ("[fe80::1%2]:port" when a scope id is set),
 * "<unspec>" for AF_UNSPEC, "<family N>" otherwise. Never fails: the text is truncated to `len`
 * (NUL-terminated, if len > 0). Returns `buf`, so it can be used inside a log call. */
const char *strand_sockaddr_to_string(const strand_sockaddr_t *addr, char *buf, size_t len);

/* Parses numeric text (no DNS lookups: this is called from proxy threads):
 *   "1.2.3.4"  "1.2.3.4:5000"  "::1"  "[::1]"  "[::1]:5000"  "[fe80::1%eth0]:5000"  "fe80::1%2"
 * A port is only accepted on IPv4 or bracketed IPv6 text; a missing port means 0. The scope may be
 * an interface name or number. Returns STRAND_SUCCESS, or STRAND_INVALID_ARGUMENT for NULL
 * arguments or text that is not an address (out is then zeroed; nothing is logged, so callers can
 * probe). */
strand_result_t strand_sockaddr_from_string(const char *text, strand_sockaddr_t *out);

/* Total order over addresses: family, then address bytes, then port, then IPv6 scope id. Returns
 * <0, 0 or >0 like memcmp. Fields that do not belong to the address (padding, flowinfo) are
 * ignored, so two addresses built differently but naming the same endpoint compare equal. */
int strand_sockaddr_compare(const strand_sockaddr_t *a, const strand_sockaddr_t *b);

/* Same family and address (ports ignored; IPv6 scope ids compared). */
bool strand_sockaddr_same_host(const strand_sockaddr_t *a, const strand_sockaddr_t *b);

/* 127.0.0.0/8 or ::1 (also ::ffff:127.x.y.z). */
bool strand_sockaddr_is_loopback(const strand_sockaddr_t *addr);

/* fe80::/10. Such an address needs sin6_scope_id (the interface index) to be usable. */
bool strand_sockaddr_is_ipv6_link_local(const strand_sockaddr_t *addr);

/* ---------------------------------------------------------------------------------------------
 * NCCL_SOCKET_FAMILY
 * ------------------------------------------------------------------------------------------- */

/* Parses a NCCL_SOCKET_FAMILY value. NULL or "" (after trimming blanks) -> AF_UNSPEC;
 * "AF_INET" -> AF_INET; "AF_INET6" -> AF_INET6 (case-insensitive). Anything else:
 * STRAND_INVALID_USAGE and a WARN quoting the value and the accepted spellings; *family is then
 * left unchanged. */
strand_result_t strand_socket_family_parse(const char *text, int *family);

/* ---------------------------------------------------------------------------------------------
 * NCCL_SOCKET_IFNAME
 * ------------------------------------------------------------------------------------------- */

#define STRAND_IF_FILTER_MAX_ITEMS 32

/* A parsed NCCL_SOCKET_IFNAME value. Build it with strand_if_filter_parse; test names with
 * strand_if_filter_match. Plain data: copy it freely. */
typedef struct {
  bool automatic; /* variable unset/empty: no user list, NCCL's automatic order applies */
  bool exclude;   /* leading '^': names matching an item are rejected, everything else accepted */
  bool exact;     /* leading '=' (after '^' if both): items are whole names, not prefixes */
  int count;      /* number of items (0 only when automatic) */
  char items[STRAND_IF_FILTER_MAX_ITEMS][IF_NAMESIZE];
} strand_if_filter_t;

/* Parses the NCCL_SOCKET_IFNAME grammar:
 *   spec   := [ '^' ] [ '=' ] item { ',' item }
 *   item   := interface name or prefix, 1..15 chars, no blanks, '/', ',', '^', '=', control chars
 * Blanks around items are trimmed; empty items ("eth0,,ib0", a trailing comma) are skipped.
 * NULL, "" or only blanks -> automatic filter (matches every name; see strand_netif_select).
 * Errors (STRAND_INVALID_USAGE, with a WARN quoting the whole value and the bad item):
 *   a marker with no item at all ("^", "=", "^=", ",,"), an item that is too long or contains a
 *   forbidden character (e.g. "=^eth0", "eth 0", "eth0/1"), more than STRAND_IF_FILTER_MAX_ITEMS
 *   items. On error *filter is left as an automatic filter, never half-filled. */
strand_result_t strand_if_filter_parse(const char *spec, strand_if_filter_t *filter);

/* True if `ifname` passes the filter: for an include list it matches some item (prefix or exact),
 * for an exclude list it matches none. An automatic filter accepts every name. */
bool strand_if_filter_match(const strand_if_filter_t *filter, const char *ifname);

/* ---------------------------------------------------------------------------------------------
 * Interfaces
 * ------------------------------------------------------------------------------------------- */

/* NCCL's Socket transport never uses more than 16 interfaces. */
#define STRAND_NETIF_MAX 16

/* One usable interface: its name, one address on it, and its kernel index. As a candidate for
 * strand_netif_select, `flags` holds the IFF_* flags from getifaddrs; it is copied to results. */
typedef struct {
  char name[IF_NAMESIZE];
  strand_sockaddr_t addr; /* IPv6 link-local addresses carry sin6_scope_id = ifindex */
  int ifindex;
  unsigned int flags;
} strand_netif_t;

/* Rank of a name in NCCL's automatic order (used when NCCL_SOCKET_IFNAME is unset):
 *   0 "ib*", 1 anything else, 2 "docker*", 3 "lo*", 4 "virbr*". */
int strand_netif_auto_rank(const char *ifname);

/* Pure selection over a candidate list (one entry per address, e.g. from getifaddrs), so the
 * policy can be tested without real interfaces. Steps:
 *  1. keep candidates that are IFF_UP and IFF_RUNNING, AF_INET or AF_INET6, of `family` unless it
 *     is AF_UNSPEC, and whose name passes `filter` (NULL = automatic);
 *  2. one address per interface name: IPv4 before IPv6 global/unique-local before IPv6 link-local
 *     or ::1 (the first candidate wins among equals, so getifaddrs order is kept);
 *  3. IPv6 link-local/::1-only interfaces are dropped if any interface has a better address
 *     ("link-local only when there is nothing else");
 *  4. automatic filter: only the lowest non-empty strand_netif_auto_rank group is kept, as NCCL
 *     does (with ib0, eth0 and lo present, only ib0 is used; with eth0 and lo, only eth0). A user
 *     list keeps every matching interface;
 *  5. results keep first-seen order of the interface names; at most min(max, STRAND_NETIF_MAX).
 * Writes to out[0..n) and returns n (0 = nothing usable). NULL candidates with n_candidates 0 is
 * fine. Nothing is logged. */
int strand_netif_select(const strand_netif_t *candidates, int n_candidates,
                        const strand_if_filter_t *filter, int family, strand_netif_t *out,
                        int max);

/* Enumerates this host's interfaces (getifaddrs) and applies strand_netif_select. *count = 0 is
 * not an error here (callers decide; the WARN should name the filter). STRAND_SYSTEM_ERROR if
 * getifaddrs fails (WARN with errno text). */
strand_result_t strand_netif_find(const strand_if_filter_t *filter, int family,
                                  strand_netif_t *out, int max, int *count);

/* strand_netif_find driven by NCCL_SOCKET_IFNAME and NCCL_SOCKET_FAMILY from the environment.
 * Bad values -> STRAND_INVALID_USAGE (WARN already logged by the parsers). If no interface
 * matches, returns STRAND_SYSTEM_ERROR with a WARN naming both variables' values, so the operator
 * knows what to change. On success *count >= 1. */
strand_result_t strand_netif_find_from_env(strand_netif_t *out, int max, int *count);

#ifdef __cplusplus
}
#endif

#endif
