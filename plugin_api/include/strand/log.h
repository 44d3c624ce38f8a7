/* Strand SDK — logging through NCCL's logger, or to stderr when there is none.
 *
 * A plugin calls strand_log_init(logger) from its init with the ncclDebugLogger_t that NCCL handed
 * it (NULL is allowed). From then on STRAND_WARN / STRAND_INFO / STRAND_TRACE go to NCCL, which
 * prints them in its own format, prefixed here in the style of NCCL's own transports with the
 * plugin name ("NET/strand-socket : ...", as NCCL writes "NET/Socket : ...").
 *
 * Without an NCCL logger (standalone tools such as strand-conform, unit tests, or before init),
 * messages go to stderr in the shape "host:pid:tid [prefix] LEVEL message" (WARN and TRACE add
 * "file:line " before the message), filtered the way NCCL filters its own output:
 *   NCCL_DEBUG         VERSION | WARN | INFO | ABORT | TRACE (case-insensitive); unset = WARN
 *                      (so that a standalone tool always reports its errors).
 *   NCCL_DEBUG_SUBSYS  comma list of INIT, COLL, P2P, SHM, NET, GRAPH, TUNING, ENV, ALLOC, CALL,
 *                      PROXY, NVLS, BOOTSTRAP, REG, PROFILE, RAS, DESTROY, ALLOC_HOST, ALL; a
 *                      leading '^' makes it an exclude list. Default, as in NCCL: INIT,BOOTSTRAP,ENV.
 *                      Unknown names are ignored.
 *
 * The same level/subsystem filter is applied before INFO and TRACE messages are formatted and handed
 * to NCCL's logger (NCCL reads the same variables, so nothing it would print is dropped; the point
 * is not to format messages NCCL throws away). WARN is always handed to NCCL's logger: NCCL keeps
 * the last WARN for ncclGetLastError() even when it does not print it.
 * Use STRAND_INFO(STRAND_SUBSYS_INIT | STRAND_SUBSYS_NET, ...) for messages that should appear with
 * a plain NCCL_DEBUG=INFO (NET alone is not in NCCL's default subsystem mask).
 *
 * All functions are thread-safe. Messages longer than STRAND_LOG_MAX_MESSAGE bytes are truncated
 * and end in "...". */
#ifndef STRAND_LOG_H
#define STRAND_LOG_H

#include <stdbool.h>
#include <stdio.h>

#include "strand/abi/types.h"

#ifdef __cplusplus
extern "C" {
#endif

#define STRAND_LOG_MAX_MESSAGE 1024
#define STRAND_LOG_MAX_PREFIX 64

/* Route messages to NCCL's logger; NULL routes them to the stderr fallback. Also re-reads
 * NCCL_DEBUG / NCCL_DEBUG_SUBSYS (NCCL may have loaded them from nccl.conf before calling init)
 * unless strand_log_set_filter() has pinned the filter. Tests use this to install a capturing
 * logger. */
void strand_log_init(strand_logger_t logger);

/* The logger currently installed (NULL: stderr fallback). */
strand_logger_t strand_log_get_logger(void);

/* Name put in front of every message, e.g. "strand-socket". Copied (at most
 * STRAND_LOG_MAX_PREFIX-1 bytes); NULL or "" means no prefix. Default: "strand". */
void strand_log_set_prefix(const char *prefix);

/* Copies the current prefix into buf (always NUL-terminated); returns buf. */
const char *strand_log_get_prefix(char *buf, size_t size);

/* Pin the filter to a level and subsystem mask, ignoring NCCL_DEBUG / NCCL_DEBUG_SUBSYS
 * (tests, and tools with a --verbose flag). A level below WARN (NONE, VERSION) silences WARN in
 * the stderr fallback; WARN is still always handed to an installed NCCL logger. */
void strand_log_set_filter(strand_log_level_t level, unsigned long subsys_mask);

/* Forget a pinned filter and re-read NCCL_DEBUG / NCCL_DEBUG_SUBSYS now. */
void strand_log_reload_env(void);

/* Where the fallback writes; NULL restores stderr. Tests point this at a tmpfile(). */
void strand_log_set_fallback_stream(FILE *stream);

/* Would a message of this level and subsystem be emitted? Cheap (two atomic loads); use it to
 * skip building expensive arguments. WARN is enabled whenever an NCCL logger is installed. */
bool strand_log_enabled(strand_log_level_t level, unsigned long subsys_flags);

/* The function behind the macros. level is WARN, INFO or TRACE (VERSION is treated as INFO). */
void strand_log_write(strand_log_level_t level, unsigned long subsys_flags, const char *file,
                      int line, const char *fmt, ...) __attribute__((format(printf, 5, 6)));

/* Parsers behind the environment filter, exposed for tests and for tools that take the same
 * words on their command line. strand_log_parse_level returns the level for
 * NCCL_DEBUG's words, case-insensitive; NULL or "" gives WARN; an unknown word gives WARN and sets
 * *ok = false (ok may be NULL). strand_log_parse_subsys returns the mask for an NCCL_DEBUG_SUBSYS
 * list; NULL or "" gives the default INIT|BOOTSTRAP|ENV. */
strand_log_level_t strand_log_parse_level(const char *word, bool *ok);
unsigned long strand_log_parse_subsys(const char *list);

/* WARN carries every subsystem bit, as NCCL's own WARN does. The format string is the first of the
 * variadic arguments so that the macros are valid C11 without GNU extensions. */
#define STRAND_WARN(...)                                                                           \
  strand_log_write(STRAND_LOG_WARN, STRAND_SUBSYS_ALL, __FILE__, __LINE__, __VA_ARGS__)

#define STRAND_INFO(subsys_flags, ...)                                                             \
  do {                                                                                             \
    if (strand_log_enabled(STRAND_LOG_INFO, (subsys_flags)))                                       \
      strand_log_write(STRAND_LOG_INFO, (subsys_flags), __FILE__, __LINE__, __VA_ARGS__);          \
  } while (0)

/* TRACE is compiled in (unlike NCCL's, which needs ENABLE_TRACE) but costs one branch when off. */
#define STRAND_TRACE(subsys_flags, ...)                                                            \
  do {                                                                                             \
    if (strand_log_enabled(STRAND_LOG_TRACE, (subsys_flags)))                                      \
      strand_log_write(STRAND_LOG_TRACE, (subsys_flags), __FILE__, __LINE__, __VA_ARGS__);         \
  } while (0)

#ifdef __cplusplus
}
#endif

#endif
