/* strand-socket — the tuner's channel policy: parsing STRAND_SOCKET_TUNER_CHANNELS, looking a size
 * up, and printing the policy for the INFO line. Pure functions, no state: sk_config.c parses the
 * knob at init (so that a bad value fails init like any other knob) and sk_tuner.c looks sizes up.
 *
 * Why size bands: the gaps measured (docs/benchmarks/socket.md, "Known gaps" and "The tuner's
 * default") are NCCL opening as many channels for a 64 KiB collective as for a 128 MiB one, and
 * NCCL choosing the LL protocol up to 512 KiB for the speed strand-socket reports; fewer channels
 * and Simple win below a few MiB and lose above. A table of "up to SIZE: N channels [, protocol]"
 * says exactly that and nothing it was not measured to need. */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "sk.h"

static const char *skip_blanks(const char *s) {
  while (*s == ' ' || *s == '\t') s++;
  return s;
}

/* An unsigned integer with an optional binary suffix; *end past it (and trailing blanks). */
static bool parse_size(const char *s, uint64_t *out, const char **end) {
  s = skip_blanks(s);
  if (!isdigit((unsigned char)*s)) return false;
  errno = 0;
  char *e = NULL;
  unsigned long long v = strtoull(s, &e, 10);
  if (errno != 0 || e == s) return false;
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
  s = skip_blanks(s);
  if (!isdigit((unsigned char)*s)) return false;
  errno = 0;
  char *e = NULL;
  long v = strtol(s, &e, 10);
  if (errno != 0 || e == s || v < 0 || v > STRAND_TUNER_MAX_CHANNELS) return false;
  *out = (int)v;
  *end = skip_blanks(e);
  return true;
}

/* ":ll" / ":ll128" / ":simple" after CHANNELS; no colon = NCCL's protocol (-1). */
static bool parse_proto(const char *s, int *out, const char **end) {
  static const struct { const char *name; int proto; } names[] = {
      {"ll128", STRAND_PROTO_LL128}, {"ll", STRAND_PROTO_LL}, {"simple", STRAND_PROTO_SIMPLE}};
  *out = -1;
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

strand_result_t sk_tuner_policy_parse(const char *text, sk_tuner_policy_t *policy, char *err,
                                       size_t errlen) {
  sk_tuner_policy_t p = {0};
  if (err != NULL && errlen > 0) err[0] = '\0';
  const char *s = skip_blanks(text != NULL ? text : "");
  if (*s == '\0') {
    *policy = p;
    return STRAND_SUCCESS;
  }
  for (int item = 1;; item++) {
    const char *start = s, *e = NULL;
    uint64_t size = 0;
    int ch = 0;
    if (!parse_size(s, &size, &e) || *e != ':') {
      snprintf(err, errlen, "item %d ('%.*s'): expected SIZE:CHANNELS with SIZE like 65536, 64K, "
               "2M or 1G", item, (int)strcspn(start, ","), start);
      return STRAND_INVALID_USAGE;
    }
    int proto = -1;
    if (!parse_channels(e + 1, &ch, &e) || (*e != ',' && *e != '\0' && *e != ':')) {
      snprintf(err, errlen, "item %d ('%.*s'): CHANNELS must be an integer 0..%d (0 = NCCL's own "
               "count)", item, (int)strcspn(start, ","), start, STRAND_TUNER_MAX_CHANNELS);
      return STRAND_INVALID_USAGE;
    }
    if (!parse_proto(e, &proto, &e) || (*e != ',' && *e != '\0')) {
      snprintf(err, errlen, "item %d ('%.*s'): PROTO after the second ':' must be ll, ll128 or "
               "simple", item, (int)strcspn(start, ","), start);
      return STRAND_INVALID_USAGE;
    }
    if (p.nbands == SK_TUNER_MAX_BANDS) {
      snprintf(err, errlen, "more than %d items", SK_TUNER_MAX_BANDS);
      return STRAND_INVALID_USAGE;
    }
    if (p.nbands > 0 && size <= p.bands[p.nbands - 1].max_bytes) {
      snprintf(err, errlen, "item %d ('%.*s'): sizes must increase from item to item (%llu bytes "
               "after %llu)", item, (int)strcspn(start, ","), start, (unsigned long long)size,
               (unsigned long long)p.bands[p.nbands - 1].max_bytes);
      return STRAND_INVALID_USAGE;
    }
    p.bands[p.nbands++] = (sk_tuner_band_t){.max_bytes = size, .channels = ch, .proto = proto};
    if (*e == '\0') break;
    s = e + 1;
  }
  *policy = p;
  return STRAND_SUCCESS;
}

strand_result_t sk_tuner_range_parse(const char *text, sk_tuner_policy_t *policy, char *err,
                                      size_t errlen) {
  if (err != NULL && errlen > 0) err[0] = '\0';
  const char *s = skip_blanks(text != NULL ? text : "");
  if (*s == '\0' || strcasecmp(s, "off") == 0 || strcmp(s, "0") == 0) {
    policy->ag_ring_min = policy->ag_ring_max = 0;
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
  policy->ag_ring_min = lo;
  policy->ag_ring_max = hi;
  return STRAND_SUCCESS;
}

const sk_tuner_band_t *sk_tuner_policy_band(const sk_tuner_policy_t *policy, uint64_t nbytes) {
  for (int i = 0; i < policy->nbands; i++)
    if (nbytes <= policy->bands[i].max_bytes) return &policy->bands[i];
  return NULL;
}

int sk_tuner_policy_channels(const sk_tuner_policy_t *policy, uint64_t nbytes) {
  const sk_tuner_band_t *b = sk_tuner_policy_band(policy, nbytes);
  return b != NULL ? b->channels : 0;
}

static void format_size(uint64_t v, char *buf, size_t len) {
  if (v != 0 && v % (1ULL << 30) == 0) snprintf(buf, len, "%lluG", (unsigned long long)(v >> 30));
  else if (v != 0 && v % (1ULL << 20) == 0) snprintf(buf, len, "%lluM", (unsigned long long)(v >> 20));
  else if (v != 0 && v % (1ULL << 10) == 0) snprintf(buf, len, "%lluK", (unsigned long long)(v >> 10));
  else snprintf(buf, len, "%llu", (unsigned long long)v);
}

void sk_tuner_policy_format(const sk_tuner_policy_t *policy, char *buf, size_t len) {
  if (len == 0) return;
  size_t used = 0;
  buf[0] = '\0';
  for (int i = 0; i < policy->nbands && used < len; i++) {
    static const char *proto_names[] = {":ll", ":ll128", ":simple"};
    char size[32], ch[16];
    format_size(policy->bands[i].max_bytes, size, sizeof size);
    if (policy->bands[i].channels == 0) snprintf(ch, sizeof ch, "NCCL");
    else snprintf(ch, sizeof ch, "%d", policy->bands[i].channels);
    int pr = policy->bands[i].proto;
    int n = snprintf(buf + used, len - used, "<=%s:%s%s ", size, ch,
                     pr >= 0 && pr < STRAND_NUM_PROTOCOLS ? proto_names[pr] : "");
    if (n < 0) return;
    used += (size_t)n;
  }
  if (used < len) used += (size_t)snprintf(buf + used, len - used, "above:NCCL");
  if (policy->ag_ring_max != 0 && used < len) {
    char lo[32], hi[32];
    format_size(policy->ag_ring_min, lo, sizeof lo);
    format_size(policy->ag_ring_max, hi, sizeof hi);
    snprintf(buf + used, len - used, "; all-gather %s..%s: ring over PAT", lo, hi);
  }
}
