/* Typed parameter registry (see strand/params.h for the rules). */
#include "strand/params.h"

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "strand/log.h"

typedef enum { VALUE_UNREAD = 0, VALUE_OK, VALUE_BAD } value_state_t;

typedef struct {
  const strand_param_def_t *def;
  value_state_t state;
  strand_param_source_t source;
  const char *source_var; /* def->name or def->alias; NULL for the default */
  char *raw;              /* copy of the environment text, NULL for the default */
  int64_t int_value;      /* INT64, BOOL (0/1), ENUM (index) */
  const char *str_value;  /* STRING: raw or default; ENUM: the word from the table */
} entry_t;

static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static entry_t g_entries[STRAND_PARAMS_MAX];
static size_t g_count;

static bool str_eq(const char *a, const char *b) {
  if (a == NULL || b == NULL) return a == b;
  return strcmp(a, b) == 0;
}

static bool choices_eq(const char *const *a, const char *const *b) {
  if (a == NULL || b == NULL) return a == b;
  for (;; a++, b++) {
    if (*a == NULL || *b == NULL) return *a == *b;
    if (strcmp(*a, *b) != 0) return false;
  }
}

static bool defs_equal(const strand_param_def_t *a, const strand_param_def_t *b) {
  return str_eq(a->name, b->name) && str_eq(a->alias, b->alias) && a->type == b->type &&
         a->int_default == b->int_default && a->int_min == b->int_min &&
         a->int_max == b->int_max && str_eq(a->str_default, b->str_default) &&
         choices_eq(a->choices, b->choices) && str_eq(a->doc, b->doc);
}

static entry_t *find_locked(const char *name) {
  if (name == NULL) return NULL;
  for (size_t i = 0; i < g_count; i++)
    if (strcmp(g_entries[i].def->name, name) == 0) return &g_entries[i];
  return NULL;
}

static const char *type_name(strand_param_type_t t) {
  switch (t) {
  case STRAND_PARAM_TYPE_INT64: return "integer";
  case STRAND_PARAM_TYPE_BOOL: return "bool";
  case STRAND_PARAM_TYPE_STRING: return "string";
  case STRAND_PARAM_TYPE_ENUM: return "enum";
  }
  return "?";
}

/* Why a definition is unusable, or NULL when it is fine. */
static const char *def_problem(const strand_param_def_t *d) {
  if (d->name == NULL || d->name[0] == '\0') return "it has no name";
  switch (d->type) {
  case STRAND_PARAM_TYPE_INT64:
    if (d->int_min > d->int_max) return "its min is above its max";
    if (d->int_default < d->int_min || d->int_default > d->int_max)
      return "its default is outside [min, max]";
    return NULL;
  case STRAND_PARAM_TYPE_BOOL:
    if (d->int_default != 0 && d->int_default != 1) return "its default is not 0 or 1";
    return NULL;
  case STRAND_PARAM_TYPE_STRING: return NULL;
  case STRAND_PARAM_TYPE_ENUM:
    if (d->choices == NULL || d->choices[0] == NULL) return "it has no accepted words";
    if (d->str_default == NULL) return "it has no default";
    for (const char *const *c = d->choices; *c; c++)
      if (strcmp(*c, d->str_default) == 0) return NULL;
    return "its default is not one of its accepted words";
  }
  return "its type is unknown";
}

strand_result_t strand_params_register(const strand_param_def_t *defs, size_t count) {
  if (defs == NULL && count > 0) {
    STRAND_WARN("params: register called with a NULL table of %zu entries", count);
    return STRAND_INTERNAL_ERROR;
  }
  pthread_mutex_lock(&g_lock);
  strand_result_t res = STRAND_SUCCESS;
  size_t new_count = 0;
  /* Check the whole table before adding anything, so a bad table leaves the registry as it was. */
  for (size_t i = 0; i < count && res == STRAND_SUCCESS; i++) {
    const strand_param_def_t *d = &defs[i];
    const char *why = def_problem(d);
    if (why) {
      STRAND_WARN("params: definition %zu (%s) is invalid: %s", i, d->name ? d->name : "(null)",
                  why);
      res = STRAND_INTERNAL_ERROR;
      break;
    }
    entry_t *e = find_locked(d->name);
    bool dup_in_table = false;
    for (size_t j = 0; j < i; j++)
      if (strcmp(defs[j].name, d->name) == 0) dup_in_table = true;
    if (dup_in_table) {
      STRAND_WARN("params: %s is defined twice in one table", d->name);
      res = STRAND_INTERNAL_ERROR;
    } else if (e != NULL && e->def != d && !defs_equal(e->def, d)) {
      STRAND_WARN("params: %s is already registered with a different definition", d->name);
      res = STRAND_INTERNAL_ERROR;
    } else if (e == NULL) {
      new_count++;
    }
  }
  if (res == STRAND_SUCCESS && g_count + new_count > STRAND_PARAMS_MAX) {
    STRAND_WARN("params: registry full (%d parameters) while adding %zu more", STRAND_PARAMS_MAX,
                new_count);
    res = STRAND_INTERNAL_ERROR;
  }
  if (res == STRAND_SUCCESS) {
    for (size_t i = 0; i < count; i++) {
      if (find_locked(defs[i].name) != NULL) continue;
      g_entries[g_count++] = (entry_t){.def = &defs[i]};
    }
  }
  pthread_mutex_unlock(&g_lock);
  return res;
}

/* ---- reading values ---------------------------------------------------------------------- */

static bool parse_int(const char *text, int64_t *out) {
  const char *s = text;
  while (isspace((unsigned char)*s)) s++;
  if (*s == '\0') return false;
  errno = 0;
  char *end;
  long long v = strtoll(s, &end, 0);
  if (end == s || errno == ERANGE) return false;
  int shift = 0;
  switch (toupper((unsigned char)*end)) {
  case 'K': shift = 10; break;
  case 'M': shift = 20; break;
  case 'G': shift = 30; break;
  case 'T': shift = 40; break;
  default: break;
  }
  if (shift) end++;
  while (isspace((unsigned char)*end)) end++;
  if (*end != '\0') return false;
  int64_t result;
  if (__builtin_mul_overflow((int64_t)v, (int64_t)1 << shift, &result)) return false;
  *out = result;
  return true;
}

static bool parse_bool(const char *text, int64_t *out) {
  static const char *const yes[] = {"1", "true", "yes", "on"};
  static const char *const no[] = {"0", "false", "no", "off"};
  const char *s = text;
  while (isspace((unsigned char)*s)) s++;
  size_t n = strlen(s);
  while (n > 0 && isspace((unsigned char)s[n - 1])) n--;
  for (size_t i = 0; i < 4; i++) {
    if (strlen(yes[i]) == n && strncasecmp(s, yes[i], n) == 0) return *out = 1, true;
    if (strlen(no[i]) == n && strncasecmp(s, no[i], n) == 0) return *out = 0, true;
  }
  return false;
}

/* "one of: a, b, c" into buf. */
static void format_choices(const strand_param_def_t *d, char *buf, size_t size) {
  size_t off = 0;
  buf[0] = '\0';
  for (const char *const *c = d->choices; c && *c && off < size; c++)
    off += (size_t)snprintf(buf + off, size - off, "%s%s", c == d->choices ? "" : ", ", *c);
}

/* Fill e from the environment (or the default). Called with g_lock held. */
static void read_locked(entry_t *e) {
  if (e->state != VALUE_UNREAD) return;
  const strand_param_def_t *d = e->def;
  const char *var = d->name;
  const char *text = getenv(d->name);
  e->source = STRAND_PARAM_SOURCE_ENV;
  if ((text == NULL || text[0] == '\0') && d->alias != NULL) {
    var = d->alias;
    text = getenv(d->alias);
    e->source = STRAND_PARAM_SOURCE_ALIAS;
  }
  if (text == NULL || text[0] == '\0') {
    e->source = STRAND_PARAM_SOURCE_DEFAULT;
    e->source_var = NULL;
    e->raw = NULL;
    e->int_value = d->int_default;
    e->str_value = d->str_default;
    if (d->type == STRAND_PARAM_TYPE_ENUM)
      for (int i = 0; d->choices[i]; i++)
        if (strcmp(d->choices[i], d->str_default) == 0) e->int_value = i;
    e->state = VALUE_OK;
    return;
  }
  e->source_var = var;
  e->raw = strdup(text);
  if (e->raw == NULL) {
    STRAND_WARN("params: out of memory copying %s", var);
    e->state = VALUE_BAD;
    return;
  }
  /* How the WARN names the variable: the alias also says which parameter it feeds. */
  char who[160];
  if (e->source == STRAND_PARAM_SOURCE_ALIAS)
    snprintf(who, sizeof(who), "%s='%s' (read for %s)", var, text, d->name);
  else
    snprintf(who, sizeof(who), "%s='%s'", var, text);

  e->state = VALUE_OK;
  switch (d->type) {
  case STRAND_PARAM_TYPE_INT64: {
    int64_t v;
    if (!parse_int(text, &v)) {
      STRAND_WARN("%s is not a valid integer: expected an integer in [%" PRId64 ", %" PRId64
                  "] (K/M/G/T suffixes allowed; default %" PRId64 ")",
                  who, d->int_min, d->int_max, d->int_default);
      e->state = VALUE_BAD;
    } else if (v < d->int_min || v > d->int_max) {
      STRAND_WARN("%s is out of range: expected an integer in [%" PRId64 ", %" PRId64
                  "] (default %" PRId64 ")",
                  who, d->int_min, d->int_max, d->int_default);
      e->state = VALUE_BAD;
    } else {
      e->int_value = v;
    }
    break;
  }
  case STRAND_PARAM_TYPE_BOOL:
    if (!parse_bool(text, &e->int_value)) {
      STRAND_WARN("%s is not a valid boolean: expected one of 1/0, true/false, yes/no, on/off "
                  "(default %s)",
                  who, d->int_default ? "1" : "0");
      e->state = VALUE_BAD;
    }
    break;
  case STRAND_PARAM_TYPE_STRING: e->str_value = e->raw; break;
  case STRAND_PARAM_TYPE_ENUM: {
    e->state = VALUE_BAD;
    for (int i = 0; d->choices[i]; i++) {
      if (strcasecmp(d->choices[i], text) == 0) {
        e->int_value = i;
        e->str_value = d->choices[i];
        e->state = VALUE_OK;
        break;
      }
    }
    if (e->state == VALUE_BAD) {
      char words[512];
      format_choices(d, words, sizeof(words));
      STRAND_WARN("%s is not an accepted value: expected one of: %s (default %s)", who, words,
                  d->str_default);
    }
    break;
  }
  }
}

/* Look up, check the type, read. Returns with g_lock held on success (caller unlocks). */
static strand_result_t fetch(const char *name, int type_mask, entry_t **out) {
  pthread_mutex_lock(&g_lock);
  entry_t *e = find_locked(name);
  if (e == NULL) {
    pthread_mutex_unlock(&g_lock);
    STRAND_WARN("params: %s is not a registered parameter", name ? name : "(null)");
    return STRAND_INTERNAL_ERROR;
  }
  if (!(type_mask & (1 << e->def->type))) {
    strand_param_type_t t = e->def->type;
    pthread_mutex_unlock(&g_lock);
    STRAND_WARN("params: %s is a %s parameter, read with the wrong getter", name, type_name(t));
    return STRAND_INTERNAL_ERROR;
  }
  read_locked(e);
  if (e->state == VALUE_BAD) {
    pthread_mutex_unlock(&g_lock);
    return STRAND_INVALID_USAGE;
  }
  *out = e;
  return STRAND_SUCCESS;
}

#define MASK(t) (1 << (t))

strand_result_t strand_param_get_int(const char *name, int64_t *out) {
  entry_t *e;
  strand_result_t r = fetch(name, MASK(STRAND_PARAM_TYPE_INT64), &e);
  if (r != STRAND_SUCCESS) return r;
  if (out) *out = e->int_value;
  pthread_mutex_unlock(&g_lock);
  return STRAND_SUCCESS;
}

strand_result_t strand_param_get_bool(const char *name, bool *out) {
  entry_t *e;
  strand_result_t r = fetch(name, MASK(STRAND_PARAM_TYPE_BOOL), &e);
  if (r != STRAND_SUCCESS) return r;
  if (out) *out = e->int_value != 0;
  pthread_mutex_unlock(&g_lock);
  return STRAND_SUCCESS;
}

strand_result_t strand_param_get_string(const char *name, const char **out) {
  entry_t *e;
  strand_result_t r =
      fetch(name, MASK(STRAND_PARAM_TYPE_STRING) | MASK(STRAND_PARAM_TYPE_ENUM), &e);
  if (r != STRAND_SUCCESS) return r;
  if (out) *out = e->str_value;
  pthread_mutex_unlock(&g_lock);
  return STRAND_SUCCESS;
}

strand_result_t strand_param_copy_string(const char *name, char *out, size_t outlen) {
  if (out == NULL || outlen == 0) return STRAND_INTERNAL_ERROR;
  out[0] = '\0';
  const char *v = NULL;
  strand_result_t r = strand_param_get_string(name, &v);
  if (r != STRAND_SUCCESS || v == NULL) return r;
  if (strlen(v) >= outlen) {
    STRAND_WARN("%s is longer than %zu characters", name, outlen - 1);
    return STRAND_INVALID_USAGE;
  }
  snprintf(out, outlen, "%s", v);
  return STRAND_SUCCESS;
}

strand_result_t strand_param_get_enum(const char *name, int *index_out, const char **word_out) {
  entry_t *e;
  strand_result_t r = fetch(name, MASK(STRAND_PARAM_TYPE_ENUM), &e);
  if (r != STRAND_SUCCESS) return r;
  if (index_out) *index_out = (int)e->int_value;
  if (word_out) *word_out = e->str_value;
  pthread_mutex_unlock(&g_lock);
  return STRAND_SUCCESS;
}

strand_result_t strand_param_get_source(const char *name, strand_param_source_t *source,
                                        const char **env_name) {
  entry_t *e;
  strand_result_t r = fetch(name, 0xf, &e);
  if (r != STRAND_SUCCESS) return r;
  if (source) *source = e->source;
  if (env_name) *env_name = e->source_var;
  pthread_mutex_unlock(&g_lock);
  return STRAND_SUCCESS;
}

strand_result_t strand_params_validate(void) {
  strand_result_t res = STRAND_SUCCESS;
  pthread_mutex_lock(&g_lock);
  for (size_t i = 0; i < g_count; i++) {
    read_locked(&g_entries[i]);
    if (g_entries[i].state == VALUE_BAD) res = STRAND_INVALID_USAGE;
  }
  pthread_mutex_unlock(&g_lock);
  return res;
}

/* The effective value as text, for dump and markdown. */
static void format_value(const entry_t *e, char *buf, size_t size) {
  const strand_param_def_t *d = e->def;
  if (e->state == VALUE_BAD) {
    snprintf(buf, size, "<invalid: '%s'>", e->raw ? e->raw : "");
    return;
  }
  switch (d->type) {
  case STRAND_PARAM_TYPE_INT64: snprintf(buf, size, "%" PRId64, e->int_value); break;
  case STRAND_PARAM_TYPE_BOOL: snprintf(buf, size, "%s", e->int_value ? "true" : "false"); break;
  case STRAND_PARAM_TYPE_STRING:
  case STRAND_PARAM_TYPE_ENUM:
    snprintf(buf, size, "%s", e->str_value ? e->str_value : "(unset)");
    break;
  }
}

void strand_params_dump(void) {
  /* Format under the lock, log outside it: a logger may be slow, and it must not deadlock with a
   * logger that itself reads parameters. */
  pthread_mutex_lock(&g_lock);
  size_t n = g_count;
  char(*lines)[384] = calloc(n ? n : 1, sizeof(*lines));
  if (lines == NULL) {
    pthread_mutex_unlock(&g_lock);
    STRAND_WARN("params: out of memory dumping %zu parameters", n);
    return;
  }
  for (size_t i = 0; i < n; i++) {
    entry_t *e = &g_entries[i];
    read_locked(e);
    char value[256];
    format_value(e, value, sizeof(value));
    const char *src = e->source == STRAND_PARAM_SOURCE_DEFAULT ? "default" : "env";
    if (e->source == STRAND_PARAM_SOURCE_ALIAS)
      snprintf(lines[i], sizeof(lines[i]), "%s=%s (env %s)", e->def->name, value, e->def->alias);
    else
      snprintf(lines[i], sizeof(lines[i]), "%s=%s (%s)", e->def->name, value, src);
  }
  pthread_mutex_unlock(&g_lock);
  for (size_t i = 0; i < n; i++) STRAND_INFO(STRAND_SUBSYS_INIT | STRAND_SUBSYS_ENV, "%s", lines[i]);
  free(lines);
}

size_t strand_levenshtein(const char *a, const char *b) {
  size_t la = strlen(a), lb = strlen(b);
  size_t *row = malloc((lb + 1) * sizeof(*row));
  if (row == NULL) return la > lb ? la : lb;
  for (size_t j = 0; j <= lb; j++) row[j] = j;
  for (size_t i = 1; i <= la; i++) {
    size_t diag = row[0]; /* row[i-1][j-1] */
    row[0] = i;
    for (size_t j = 1; j <= lb; j++) {
      size_t up = row[j]; /* row[i-1][j] */
      size_t best = diag + (a[i - 1] != b[j - 1]);
      if (up + 1 < best) best = up + 1;
      if (row[j - 1] + 1 < best) best = row[j - 1] + 1;
      diag = up;
      row[j] = best;
    }
  }
  size_t d = row[lb];
  free(row);
  return d;
}

static const char *closest_locked(const char *name) {
  const char *best = NULL;
  size_t best_d = SIZE_MAX;
  for (size_t i = 0; i < g_count; i++) {
    const char *cands[2] = {g_entries[i].def->name, g_entries[i].def->alias};
    for (int k = 0; k < 2; k++) {
      if (cands[k] == NULL) continue;
      size_t d = strand_levenshtein(name, cands[k]);
      if (d < best_d) best_d = d, best = cands[k];
    }
  }
  return best;
}

const char *strand_params_closest(const char *name) {
  if (name == NULL) return NULL;
  pthread_mutex_lock(&g_lock);
  const char *r = closest_locked(name);
  pthread_mutex_unlock(&g_lock);
  return r;
}

static bool known_locked(const char *var, size_t len) {
  for (size_t i = 0; i < g_count; i++) {
    const strand_param_def_t *d = g_entries[i].def;
    if (strlen(d->name) == len && strncmp(d->name, var, len) == 0) return true;
    if (d->alias && strlen(d->alias) == len && strncmp(d->alias, var, len) == 0) return true;
  }
  return false;
}

size_t strand_params_check_unknown(const char *prefix) {
  if (prefix == NULL) return 0;
  size_t plen = strlen(prefix), unknown = 0;
  pthread_mutex_lock(&g_lock);
  for (char **env = environ; env && *env; env++) {
    const char *var = *env;
    if (strncmp(var, prefix, plen) != 0) continue;
    const char *eq = strchr(var, '=');
    size_t len = eq ? (size_t)(eq - var) : strlen(var);
    if (known_locked(var, len)) continue;
    char name[256];
    snprintf(name, sizeof(name), "%.*s", (int)len, var);
    const char *near = closest_locked(name);
    unknown++;
    if (near)
      STRAND_WARN("%s is set but is not a known parameter (ignored); did you mean %s?", name, near);
    else
      STRAND_WARN("%s is set but is not a known parameter (ignored)", name);
  }
  pthread_mutex_unlock(&g_lock);
  return unknown;
}

/* Markdown table cells must not contain '|' or newlines. */
static void md_cell(FILE *out, const char *s) {
  for (; s && *s; s++) {
    if (*s == '|') fputs("\\|", out);
    else if (*s == '\n') fputc(' ', out);
    else fputc(*s, out);
  }
}

void strand_params_print_markdown(FILE *out) {
  if (out == NULL) return;
  pthread_mutex_lock(&g_lock);
  fputs("| Variable | Type | Default | Accepted values | Description |\n", out);
  fputs("|---|---|---|---|---|\n", out);
  for (size_t i = 0; i < g_count; i++) {
    const strand_param_def_t *d = g_entries[i].def;
    fprintf(out, "| `%s`", d->name);
    if (d->alias) fprintf(out, " (or `%s`)", d->alias);
    fprintf(out, " | %s | ", type_name(d->type));
    char buf[512];
    switch (d->type) {
    case STRAND_PARAM_TYPE_INT64:
      fprintf(out, "%" PRId64 " | %" PRId64 " .. %" PRId64, d->int_default, d->int_min, d->int_max);
      break;
    case STRAND_PARAM_TYPE_BOOL:
      fprintf(out, "%s | 1/0, true/false, yes/no, on/off", d->int_default ? "true" : "false");
      break;
    case STRAND_PARAM_TYPE_STRING:
      if (d->str_default) {
        fputc('`', out);
        md_cell(out, d->str_default);
        fputc('`', out);
      } else {
        fputs("(unset)", out);
      }
      fputs(" | any text", out);
      break;
    case STRAND_PARAM_TYPE_ENUM:
      fprintf(out, "`%s` | ", d->str_default);
      format_choices(d, buf, sizeof(buf));
      md_cell(out, buf);
      break;
    }
    fputs(" | ", out);
    md_cell(out, d->doc);
    fputs(" |\n", out);
  }
  pthread_mutex_unlock(&g_lock);
}

static void forget_values_locked(void) {
  for (size_t i = 0; i < g_count; i++) {
    free(g_entries[i].raw);
    g_entries[i] = (entry_t){.def = g_entries[i].def};
  }
}

void strand_params_reread_for_test(void) {
  pthread_mutex_lock(&g_lock);
  forget_values_locked();
  pthread_mutex_unlock(&g_lock);
}

void strand_params_reset_for_test(void) {
  pthread_mutex_lock(&g_lock);
  forget_values_locked();
  g_count = 0;
  pthread_mutex_unlock(&g_lock);
}
