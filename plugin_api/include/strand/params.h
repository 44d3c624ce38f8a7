/* Strand SDK — typed configuration parameters read from the environment.
 *
 * A module describes its parameters once, in a file-scope table, and registers the table from its
 * init; it then reads typed values by variable name:
 *
 *   static const strand_param_def_t socket_params[] = {
 *     STRAND_PARAM_INT("STRAND_SOCKET_NTHREADS", "NCCL_SOCKET_NTHREADS", 2, 0, 16,
 *                      "helper threads per connection"),
 *     STRAND_PARAM_BOOL("STRAND_SOCKET_ZCOPY", NULL, true, "MSG_ZEROCOPY for large sends"),
 *     STRAND_PARAM_STRING("NCCL_SOCKET_IFNAME", NULL, NULL, "interfaces to use (NCCL grammar)"),
 *     STRAND_PARAM_ENUM("NCCL_SOCKET_FAMILY", NULL, "any",
 *                       STRAND_PARAM_CHOICES("any", "AF_INET", "AF_INET6"), "address family"),
 *   };
 *   ...
 *   if (strand_params_register(socket_params, STRAND_PARAM_COUNT(socket_params)) != STRAND_SUCCESS)
 *     return STRAND_INTERNAL_ERROR;
 *   int64_t nthreads;
 *   if (strand_param_get_int("STRAND_SOCKET_NTHREADS", &nthreads) != STRAND_SUCCESS)
 *     return STRAND_INVALID_USAGE;   // the WARN naming variable, value and range is already out
 *
 * Values:
 *  - Each parameter is read from the environment once, the first time it is asked for (or by
 *    strand_params_validate / _dump), under the registry's lock; later reads return the cached
 *    value. Copy what you need into your own state: getters take a lock and search by name.
 *  - The primary name is looked up first, then `alias` (typically NCCL's own variable with the same
 *    meaning, e.g. NCCL_SOCKET_NTHREADS). An empty value ("VAR=") counts as unset, as in NCCL.
 *  - INT64: strtoll base 0 (decimal, 0x hex, leading 0 octal), optional sign, optional binary
 *    suffix K, M, G or T (x1024^n, case-insensitive), surrounding blanks allowed; must lie in
 *    [min, max]. BOOL: 1/0, true/false, yes/no, on/off (case-insensitive). STRING: any text.
 *    ENUM: one of the NULL-terminated `choices`, case-insensitive; the getter returns the spelling
 *    from the table and its index.
 *  - A bad value is never replaced by the default: the getter logs one WARN naming the variable,
 *    the value and what is accepted, and returns STRAND_INVALID_USAGE (every time it is asked).
 *
 * Registry errors (unknown name, type mismatch, inconsistent table) are programming errors:
 * STRAND_INTERNAL_ERROR plus a WARN. All functions are thread-safe. The registry holds up to
 * STRAND_PARAMS_MAX entries; registering the same table (same address) twice is a no-op, and a
 * definition identical in every field to an existing one is accepted (two modules sharing
 * NCCL_SOCKET_IFNAME, say); a different definition under an existing name is an error. */
#ifndef STRAND_PARAMS_H
#define STRAND_PARAMS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "strand/abi/types.h"

#ifdef __cplusplus
extern "C" {
#endif

#define STRAND_PARAMS_MAX 256

typedef enum {
  STRAND_PARAM_TYPE_INT64 = 0,
  STRAND_PARAM_TYPE_BOOL = 1,
  STRAND_PARAM_TYPE_STRING = 2,
  STRAND_PARAM_TYPE_ENUM = 3
} strand_param_type_t;

/* One parameter. Fill it with the STRAND_PARAM_* macros below; the table must outlive the
 * registry (file-scope static const), since the registry keeps pointers into it. */
typedef struct {
  const char *name;           /* primary environment variable, e.g. "STRAND_SOCKET_NTHREADS" */
  const char *alias;          /* alternative variable read when `name` is unset, or NULL */
  strand_param_type_t type;
  int64_t int_default;        /* INT64 default; BOOL default (0/1) */
  int64_t int_min, int_max;   /* INT64 accepted range, inclusive */
  const char *str_default;    /* STRING default (NULL = unset) or ENUM default (must be a choice) */
  const char *const *choices; /* ENUM: accepted words, NULL-terminated */
  const char *doc;            /* one line for the configuration reference */
} strand_param_def_t;

#define STRAND_PARAM_INT(name, alias, def, min, max, doc)                                          \
  { (name), (alias), STRAND_PARAM_TYPE_INT64, (def), (min), (max), NULL, NULL, (doc) }
#define STRAND_PARAM_BOOL(name, alias, def, doc)                                                   \
  { (name), (alias), STRAND_PARAM_TYPE_BOOL, ((def) ? 1 : 0), 0, 1, NULL, NULL, (doc) }
#define STRAND_PARAM_STRING(name, alias, def, doc)                                                 \
  { (name), (alias), STRAND_PARAM_TYPE_STRING, 0, 0, 0, (def), NULL, (doc) }
#define STRAND_PARAM_ENUM(name, alias, def, choices, doc)                                          \
  { (name), (alias), STRAND_PARAM_TYPE_ENUM, 0, 0, 0, (def), (choices), (doc) }
/* A NULL-terminated word list for STRAND_PARAM_ENUM. Use it in a file-scope table: the compound
 * literal then has static storage. */
#define STRAND_PARAM_CHOICES(...) ((const char *const[]){__VA_ARGS__, NULL})
#define STRAND_PARAM_COUNT(table) (sizeof(table) / sizeof((table)[0]))

/* Where a parameter's effective value came from. */
typedef enum {
  STRAND_PARAM_SOURCE_DEFAULT = 0,
  STRAND_PARAM_SOURCE_ENV = 1,   /* the primary variable */
  STRAND_PARAM_SOURCE_ALIAS = 2  /* the alias variable */
} strand_param_source_t;

/* Add a table. Checks every definition (name set, min <= default <= max, ENUM default among the
 * choices, no duplicate with a different definition); on any error nothing from the table is
 * added and STRAND_INTERNAL_ERROR is returned with a WARN. */
strand_result_t strand_params_register(const strand_param_def_t *defs, size_t count);

/* Typed getters. STRAND_SUCCESS, STRAND_INVALID_USAGE (bad value in the environment, WARN logged
 * once), or STRAND_INTERNAL_ERROR (not registered / wrong type). *out is written only on success.
 * The string returned by get_string / get_enum stays valid until a reset; for a STRING parameter
 * that is unset with a NULL default, *out is NULL. get_string also works for ENUM parameters. */
strand_result_t strand_param_get_int(const char *name, int64_t *out);
strand_result_t strand_param_get_bool(const char *name, bool *out);
strand_result_t strand_param_get_string(const char *name, const char **out);
strand_result_t strand_param_get_enum(const char *name, int *index_out, const char **word_out);
/* get_string into a caller's fixed buffer (a plugin keeping its configuration in a struct): ""
 * for an unset parameter with a NULL default; a value that does not fit is STRAND_INVALID_USAGE
 * with a WARN naming the parameter and the limit, and `out` is then "". */
strand_result_t strand_param_copy_string(const char *name, char *out, size_t outlen);

/* Where the value came from, and the variable that supplied it (NULL for the default). Same
 * results as the getters. */
strand_result_t strand_param_get_source(const char *name, strand_param_source_t *source,
                                        const char **env_name);

/* Read every registered parameter now. Logs a WARN for each bad value and returns
 * STRAND_INVALID_USAGE if there was any: a plugin's init can call this once and fail cleanly. */
strand_result_t strand_params_validate(void);

/* Log the effective configuration, one INFO line (INIT|ENV) per parameter:
 * "NAME=value (default)", "(env)" or "(env ALIAS)", "<invalid: 'text'>" for a bad value. */
void strand_params_dump(void);

/* WARN for every environment variable that starts with `prefix` (e.g. "STRAND_SOCKET_") and is
 * neither the name nor the alias of a registered parameter, naming the closest registered name
 * (Levenshtein distance). Returns how many such variables there are. Each plugin .so links its own
 * copy of the SDK and so has its own registry: pass the plugin's own prefix, not plain "STRAND_",
 * or one plugin will warn about another's variables. */
size_t strand_params_check_unknown(const char *prefix);

/* The registered name (primary or alias) closest to `name` by edit distance, ties broken by
 * registration order; NULL when nothing is registered. */
const char *strand_params_closest(const char *name);

/* Edit distance (insert, delete, substitute each cost 1); exposed for tests and tools. */
size_t strand_levenshtein(const char *a, const char *b);

/* A markdown table of every registered parameter (variable, alias, type, default, accepted values,
 * description) for the configuration reference in docs/. */
void strand_params_print_markdown(FILE *out);

/* Tests: forget cached values so the next get re-reads the environment (registrations kept). */
void strand_params_reread_for_test(void);
/* Tests: forget cached values and every registration. */
void strand_params_reset_for_test(void);

#ifdef __cplusplus
}
#endif

#endif
