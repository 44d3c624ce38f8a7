/* NCCL logger bridge with a stderr fallback (see strand/log.h for the rules). */
#include "strand/log.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/syscall.h>
#include <unistd.h>

/* NCCL's default NCCL_DEBUG_SUBSYS mask. */
#define DEFAULT_SUBSYS_MASK                                                                        \
  ((unsigned long)(STRAND_SUBSYS_INIT | STRAND_SUBSYS_BOOTSTRAP | STRAND_SUBSYS_ENV))

static _Atomic(strand_logger_t) g_logger;
static atomic_int g_level = STRAND_LOG_WARN;
static atomic_ulong g_mask = DEFAULT_SUBSYS_MASK;
static atomic_bool g_pinned;
static pthread_once_t g_env_once = PTHREAD_ONCE_INIT;

/* The prefix and the fallback stream change rarely; one mutex keeps readers from seeing a
 * half-copied prefix and keeps fallback lines whole. */
static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static char g_prefix[STRAND_LOG_MAX_PREFIX] = "strand";
static FILE *g_stream; /* NULL = stderr */

static const struct {
  const char *name;
  unsigned long flag;
} k_subsys_names[] = {
    {"INIT", STRAND_SUBSYS_INIT},       {"COLL", STRAND_SUBSYS_COLL},
    {"P2P", STRAND_SUBSYS_P2P},         {"SHM", STRAND_SUBSYS_SHM},
    {"NET", STRAND_SUBSYS_NET},         {"GRAPH", STRAND_SUBSYS_GRAPH},
    {"TUNING", STRAND_SUBSYS_TUNING},   {"ENV", STRAND_SUBSYS_ENV},
    {"ALLOC", STRAND_SUBSYS_ALLOC},     {"CALL", STRAND_SUBSYS_CALL},
    {"PROXY", STRAND_SUBSYS_PROXY},     {"NVLS", STRAND_SUBSYS_NVLS},
    {"BOOTSTRAP", STRAND_SUBSYS_BOOTSTRAP}, {"REG", STRAND_SUBSYS_REG},
    {"PROFILE", STRAND_SUBSYS_PROFILE}, {"RAS", STRAND_SUBSYS_RAS},
    {"DESTROY", STRAND_SUBSYS_DESTROY}, {"ALLOC_HOST", STRAND_SUBSYS_ALLOC_HOST},
    {"ALL", STRAND_SUBSYS_ALL},
};

strand_log_level_t strand_log_parse_level(const char *word, bool *ok) {
  static const struct {
    const char *name;
    strand_log_level_t level;
  } words[] = {{"NONE", STRAND_LOG_NONE}, {"VERSION", STRAND_LOG_VERSION},
               {"WARN", STRAND_LOG_WARN}, {"INFO", STRAND_LOG_INFO},
               {"ABORT", STRAND_LOG_ABORT}, {"TRACE", STRAND_LOG_TRACE}};
  if (ok) *ok = true;
  if (word == NULL || word[0] == '\0') return STRAND_LOG_WARN;
  for (size_t i = 0; i < sizeof(words) / sizeof(words[0]); i++)
    if (strcasecmp(word, words[i].name) == 0) return words[i].level;
  if (ok) *ok = false;
  return STRAND_LOG_WARN;
}

unsigned long strand_log_parse_subsys(const char *list) {
  if (list == NULL || list[0] == '\0') return DEFAULT_SUBSYS_MASK;
  bool invert = false;
  if (list[0] == '^') {
    invert = true;
    list++;
  }
  unsigned long mask = 0;
  const char *p = list;
  while (*p) {
    size_t len = strcspn(p, ",");
    /* Tolerate blanks around names ("INIT, NET"). */
    const char *s = p;
    size_t n = len;
    while (n > 0 && (*s == ' ' || *s == '\t')) s++, n--;
    while (n > 0 && (s[n - 1] == ' ' || s[n - 1] == '\t')) n--;
    for (size_t i = 0; i < sizeof(k_subsys_names) / sizeof(k_subsys_names[0]); i++) {
      if (strlen(k_subsys_names[i].name) == n && strncasecmp(s, k_subsys_names[i].name, n) == 0) {
        mask |= k_subsys_names[i].flag;
        break;
      }
    }
    p += len;
    if (*p == ',') p++;
  }
  return invert ? ~mask : mask;
}

static void load_env_filter(void) {
  strand_log_level_t level = strand_log_parse_level(getenv("NCCL_DEBUG"), NULL);
  unsigned long mask = strand_log_parse_subsys(getenv("NCCL_DEBUG_SUBSYS"));
  atomic_store(&g_level, (int)level);
  atomic_store(&g_mask, mask);
}

static void load_env_once(void) {
  if (!atomic_load(&g_pinned)) load_env_filter();
}

void strand_log_init(strand_logger_t logger) {
  pthread_once(&g_env_once, load_env_once);
  if (!atomic_load(&g_pinned)) load_env_filter();
  atomic_store(&g_logger, logger);
}

strand_logger_t strand_log_get_logger(void) { return atomic_load(&g_logger); }

void strand_log_set_prefix(const char *prefix) {
  pthread_mutex_lock(&g_lock);
  if (prefix == NULL) prefix = "";
  snprintf(g_prefix, sizeof(g_prefix), "%s", prefix);
  pthread_mutex_unlock(&g_lock);
}

const char *strand_log_get_prefix(char *buf, size_t size) {
  if (buf == NULL || size == 0) return buf;
  pthread_mutex_lock(&g_lock);
  snprintf(buf, size, "%s", g_prefix);
  pthread_mutex_unlock(&g_lock);
  return buf;
}

void strand_log_set_filter(strand_log_level_t level, unsigned long subsys_mask) {
  pthread_once(&g_env_once, load_env_once);
  atomic_store(&g_pinned, true);
  atomic_store(&g_level, (int)level);
  atomic_store(&g_mask, subsys_mask);
}

void strand_log_reload_env(void) {
  pthread_once(&g_env_once, load_env_once);
  atomic_store(&g_pinned, false);
  load_env_filter();
}

void strand_log_set_fallback_stream(FILE *stream) {
  pthread_mutex_lock(&g_lock);
  g_stream = stream;
  pthread_mutex_unlock(&g_lock);
}

bool strand_log_enabled(strand_log_level_t level, unsigned long subsys_flags) {
  pthread_once(&g_env_once, load_env_once);
  if (level == STRAND_LOG_VERSION) level = STRAND_LOG_INFO;
  if (level <= STRAND_LOG_WARN && atomic_load(&g_logger) != NULL) return true;
  if (atomic_load(&g_level) < (int)level) return false;
  /* WARN carries every bit; INFO/TRACE need a bit the mask lets through. */
  return level <= STRAND_LOG_WARN || (subsys_flags & atomic_load(&g_mask)) != 0;
}

static const char *level_word(strand_log_level_t level) {
  switch (level) {
  case STRAND_LOG_WARN: return "WARN";
  case STRAND_LOG_TRACE: return "TRACE";
  case STRAND_LOG_ABORT: return "ABORT";
  default: return "INFO";
  }
}

static char g_host[64];
static pthread_once_t g_host_once = PTHREAD_ONCE_INIT;
static void fill_host(void) {
  if (gethostname(g_host, sizeof(g_host)) != 0) snprintf(g_host, sizeof(g_host), "unknown");
  g_host[sizeof(g_host) - 1] = '\0';
  char *dot = strchr(g_host, '.');
  if (dot) *dot = '\0';
}

void strand_log_write(strand_log_level_t level, unsigned long subsys_flags, const char *file,
                      int line, const char *fmt, ...) {
  if (level == STRAND_LOG_VERSION) level = STRAND_LOG_INFO;
  if (!strand_log_enabled(level, subsys_flags)) return;

  char msg[STRAND_LOG_MAX_MESSAGE];
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(msg, sizeof(msg), fmt, ap);
  va_end(ap);
  if (n < 0) snprintf(msg, sizeof(msg), "(unformattable message: %s)", fmt);
  else if ((size_t)n >= sizeof(msg)) memcpy(msg + sizeof(msg) - 4, "...", 4);

  char prefix[STRAND_LOG_MAX_PREFIX];
  strand_log_get_prefix(prefix, sizeof(prefix));
  if (file == NULL) file = "?";

  strand_logger_t logger = atomic_load(&g_logger);
  if (logger != NULL) {
    /* NCCL's own transports write "NET/Socket : ...", "NET/IB : ..."; ours read the same. */
    if (prefix[0]) logger(level, subsys_flags, file, line, "NET/%s : %s", prefix, msg);
    else logger(level, subsys_flags, file, line, "%s", msg);
    return;
  }

  pthread_once(&g_host_once, fill_host);
  const char *base = strrchr(file, '/');
  base = base ? base + 1 : file;
  char where[128] = "";
  if (level != STRAND_LOG_INFO) snprintf(where, sizeof(where), "%s:%d ", base, line);
  pthread_mutex_lock(&g_lock);
  FILE *out = g_stream ? g_stream : stderr;
  fprintf(out, "%s:%d:%ld %s%s%s%s %s%s\n", g_host, (int)getpid(), (long)syscall(SYS_gettid),
          prefix[0] ? "[" : "", prefix, prefix[0] ? "] " : "", level_word(level), where, msg);
  fflush(out);
  pthread_mutex_unlock(&g_lock);
}
