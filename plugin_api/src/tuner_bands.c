/* Strand SDK — size bands for a tuner (strand/tuner_bands.h): the SIZE:CHANNELS[:PROTO] grammar,
 * looking a size up, printing the bands for an INFO line, and the rule that turns a band into an
 * answer to NCCL's getCollInfo. Pure functions, no state: each plugin parses its own knob at init
 * (so that a bad value fails init like any other knob) and looks sizes up per collective. */
#include "strand/tuner_bands.h"

#include <ctype.h>
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "strand/tuner.h"

static const char *skip_blanks(const char *s) {
  while (*s == ' ' || *s == '\t') s++;
  return s;
}

/* A decimal unsigned integer after optional blanks; *end just past its digits. */
static bool parse_uint(const char *s, unsigned long long *out, char **end) {
  s = skip_blanks(s);
  if (!isdigit((unsigned char)*s)) return false;
  errno = 0;
  *out = strtoull(s, end, 10);
  return errno == 0 && *end != s;
}

/* An unsigned integer with an optional binary suffix; *end past it (and trailing blanks). */
static bool parse_size(const char *s, uint64_t *out, const char **end) {
  unsigned long long v = 0;
  char *e = NULL;
  if (!parse_uint(s, &v, &e)) return false;
  int shift = 0;
  switch (toupper((unsigned char)*e)) {
    case 'K': shift = 10; e++; break;
    case 'M': shift = 20; e++; break;
    case 'G': shift = 30; e++; break;
    default: break;
  }
  /* Accept "64KB" / "64KiB" spellings too: people write sizes that way. */
  if (shift != 0 && (e[0] == 'i' || e[0] == 'I') && (e[1] == 'B' || e[1] == 'b')) e += 2;
  else if (shift != 0 && (e[0] == 'B' || e[0] == 'b')) e++;
  if (shift != 0 && v > (UINT64_MAX >> shift)) return false;
  *out = (uint64_t)v << shift;
  *end = skip_blanks(e);
  return true;
}

static bool parse_channels(const char *s, int *out, const char **end) {
  unsigned long long v = 0;
  char *e = NULL;
  if (!parse_uint(s, &v, &e) || v > STRAND_TUNER_MAX_CHANNELS) return false;
  *out = (int)v;
  *end = skip_blanks(e);
  return true;
}

/* ":ll" / ":ll128" / ":simple" after CHANNELS; no colon = NCCL's protocol. */
static bool parse_proto(const char *s, int *out, const char **end) {
  static const struct { const char *name; int proto; } names[] = {
      {"ll128", STRAND_PROTO_LL128}, {"ll", STRAND_PROTO_LL}, {"simple", STRAND_PROTO_SIMPLE}};
  *out = STRAND_PROTO_UNDEF;
  if (*s != ':') {
    *end = s;
    return true;
  }
  s = skip_blanks(s + 1);
  for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
    size_t n = strlen(names[i].name);
    if (strncasecmp(s, names[i].name, n) == 0 && !isalnum((unsigned char)s[n])) {
      *out = names[i].proto;
      *end = skip_blanks(s + n);
      return true;
    }
  }
  return false;
}

strand_result_t strand_tuner_bands_parse(const char *text, strand_tuner_bands_t *bands, char *err,
                                         size_t errlen) {
  strand_tuner_bands_t p = {0};
  if (err == NULL) errlen = 0;
  if (errlen > 0) err[0] = '\0';
  const char *s = skip_blanks(text != NULL ? text : "");
  if (*s == '\0') {
    *bands = p;
    return STRAND_SUCCESS;
  }
  for (int item = 1;; item++) {
    const char *start = s, *e = NULL;
    int item_len = (int)strcspn(start, ",");
    uint64_t size = 0;
    int ch = 0;
    if (!parse_size(s, &size, &e) || *e != ':') {
      snprintf(err, errlen, "item %d ('%.*s'): expected SIZE:CHANNELS with SIZE like 65536, 64K, "
               "2M or 1G", item, item_len, start);
      return STRAND_INVALID_USAGE;
    }
    int proto = STRAND_PROTO_UNDEF;
    if (!parse_channels(e + 1, &ch, &e) || (*e != ',' && *e != '\0' && *e != ':')) {
      snprintf(err, errlen, "item %d ('%.*s'): CHANNELS must be an integer 0..%d (0 = NCCL's own "
               "count)", item, item_len, start, STRAND_TUNER_MAX_CHANNELS);
      return STRAND_INVALID_USAGE;
    }
    if (!parse_proto(e, &proto, &e) || (*e != ',' && *e != '\0')) {
      snprintf(err, errlen, "item %d ('%.*s'): PROTO after the second ':' must be ll, ll128 or "
               "simple", item, item_len, start);
      return STRAND_INVALID_USAGE;
    }
    if (p.nbands == STRAND_TUNER_MAX_BANDS) {
      snprintf(err, errlen, "more than %d items", STRAND_TUNER_MAX_BANDS);
      return STRAND_INVALID_USAGE;
    }
    if (p.nbands > 0 && size <= p.bands[p.nbands - 1].max_bytes) {
      snprintf(err, errlen, "item %d ('%.*s'): sizes must increase from item to item (%llu bytes "
               "after %llu)", item, item_len, start, (unsigned long long)size,
               (unsigned long long)p.bands[p.nbands - 1].max_bytes);
      return STRAND_INVALID_USAGE;
    }
    p.bands[p.nbands++] = (strand_tuner_band_t){.max_bytes = size, .channels = ch, .proto = proto};
    if (*e == '\0') break;
    s = e + 1;
  }
  *bands = p;
  return STRAND_SUCCESS;
}

strand_result_t strand_tuner_size_range_parse(const char *text, uint64_t *min, uint64_t *max,
                                              char *err, size_t errlen) {
  if (err == NULL) errlen = 0;
  if (errlen > 0) err[0] = '\0';
  const char *s = skip_blanks(text != NULL ? text : "");
  if (*s == '\0' || strcasecmp(s, "off") == 0 || strcmp(s, "0") == 0) {
    *min = *max = 0;
    return STRAND_SUCCESS;
  }
  uint64_t lo = 0, hi = 0;
  const char *e = NULL;
  if (!parse_size(s, &lo, &e) || *e != '-' || !parse_size(e + 1, &hi, &e) || *e != '\0') {
    snprintf(err, errlen, "expected MIN-MAX with sizes like 256K or 4M (e.g. 256K-4M), or off");
    return STRAND_INVALID_USAGE;
  }
  if (hi == 0 || lo > hi) {
    snprintf(err, errlen, "MIN must not exceed MAX and MAX must be above 0 (%llu-%llu bytes)",
             (unsigned long long)lo, (unsigned long long)hi);
    return STRAND_INVALID_USAGE;
  }
  *min = lo;
  *max = hi;
  return STRAND_SUCCESS;
}

const strand_tuner_band_t *strand_tuner_bands_find(const strand_tuner_bands_t *bands,
                                                   uint64_t nbytes) {
  for (int i = 0; i < bands->nbands; i++)
    if (nbytes <= bands->bands[i].max_bytes) return &bands->bands[i];
  return NULL;
}

int strand_tuner_bands_channels(const strand_tuner_bands_t *bands, uint64_t nbytes) {
  const strand_tuner_band_t *b = strand_tuner_bands_find(bands, nbytes);
  return b != NULL ? b->channels : 0;
}

void strand_tuner_size_format(uint64_t v, char *buf, size_t len) {
  if (v != 0 && v % (1ULL << 30) == 0) snprintf(buf, len, "%lluG", (unsigned long long)(v >> 30));
  else if (v != 0 && v % (1ULL << 20) == 0) snprintf(buf, len, "%lluM", (unsigned long long)(v >> 20));
  else if (v != 0 && v % (1ULL << 10) == 0) snprintf(buf, len, "%lluK", (unsigned long long)(v >> 10));
  else snprintf(buf, len, "%llu", (unsigned long long)v);
}

void strand_tuner_bands_format(const strand_tuner_bands_t *bands, char *buf, size_t len) {
  if (len == 0) return;
  size_t used = 0;
  buf[0] = '\0';
  for (int i = 0; i < bands->nbands && used < len; i++) {
    static const char *proto_names[] = {":ll", ":ll128", ":simple"};
    char size[32], ch[16];
    strand_tuner_size_format(bands->bands[i].max_bytes, size, sizeof size);
    if (bands->bands[i].channels == 0) snprintf(ch, sizeof ch, "NCCL");
    else snprintf(ch, sizeof ch, "%d", bands->bands[i].channels);
    int pr = bands->bands[i].proto;
    int n = snprintf(buf + used, len - used, "<=%s:%s%s ", size, ch,
                     pr >= 0 && pr < STRAND_NUM_PROTOCOLS ? proto_names[pr] : "");
    if (n < 0) return;
    used += (size_t)n;
  }
  if (used < len) snprintf(buf + used, len - used, "above:NCCL");
}

/* An entry NCCL can run: not ignored and not negative (the rule of NCCL's topoGetAlgoInfo). A
 * tuner only ever lowers runnable entries, so its choice is always one NCCL offered. */
static bool runnable(float cost) { return cost != STRAND_ALGO_PROTO_IGNORE && cost >= 0; }

int strand_tuner_nccl_algo(float **table, int numAlgo, int numProto) {
  int best = STRAND_ALGO_UNDEF;
  float best_cost = 0;
  for (int a = 0; a < numAlgo; a++) {
    for (int p = 0; p < numProto; p++) {
      float c = *strand_tuner_cost(table, numProto, a, p);
      if (!runnable(c)) continue;
      if (best == STRAND_ALGO_UNDEF || c < best_cost) {
        best = a;
        best_cost = c;
      }
    }
  }
  return best;
}

int strand_tuner_prefer_algo(float **table, int numAlgo, int numProto, int algo) {
  if (algo < 0 || algo >= numAlgo) return -1;
  float *best = NULL;
  for (int p = 0; p < numProto; p++) {
    float *c = strand_tuner_cost(table, numProto, algo, p);
    if (!runnable(*c)) continue;
    if (best == NULL || *c < *best) best = c;
  }
  if (best == NULL) return -1;
  *best = 0.0f;
  return 0;
}

void strand_tuner_bands_apply(const strand_tuner_bands_t *bands, strand_tuner_func_t func,
                              uint64_t nBytes, int algo, float **table, int numProto,
                              int *nChannels) {
  /* Someone (NCCL, a future core) already answered: do not override. */
  if (*nChannels != 0) return;
  /* NCCL caps nChannels at what the comm opened only for these; CollNet/NVLS take it as given. */
  if (algo != STRAND_ALGO_RING && algo != STRAND_ALGO_TREE && algo != STRAND_ALGO_PAT) return;
  const strand_tuner_band_t *band = strand_tuner_bands_find(bands, nBytes);
  if (band == NULL) return;
  if (band->channels > 0 && band->channels <= STRAND_TUNER_MAX_CHANNELS) *nChannels = band->channels;
  if (func == STRAND_FUNC_ALLREDUCE && band->proto >= 0 && band->proto < numProto) {
    /* Only ever lower a runnable entry of the algorithm NCCL chose: the choice stays one NCCL
     * offered, and an entry NCCL disabled (LL128 on some GPUs) is left alone. */
    float *c = strand_tuner_cost(table, numProto, algo, band->proto);
    if (runnable(*c)) *c = 0.0f;
  }
}
