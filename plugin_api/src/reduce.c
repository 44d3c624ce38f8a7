/* CPU reductions for the 12 NCCL datatypes and the small-float conversions they need
 * (rules in strand/reduce.h). */
#include "strand/reduce.h"

#include <math.h>
#include <string.h>

/* The project builds at -O2, where GCC 12 only vectorises with its
 * "very cheap" cost model, which rejects every loop here (unknown trip count needs an epilogue).
 * These loops are the point of the file, so ask GCC for the "cheap" model here. Clang vectorises
 * them at -O2 already. */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("tree-loop-vectorize", "vect-cost-model=cheap")
#endif

/* ---- small-float formats -------------------------------------------------------------------
 * One rounding routine, parameterised by the format, turns a double into the bits of any of the
 * four small formats; with constant arguments the compiler specialises it per format. */

typedef struct {
  int mbits;              /* stored fraction bits */
  int bias;               /* exponent bias */
  int sign_shift;         /* position of the sign bit */
  uint32_t max_finite;    /* bits of the largest finite value (positive) */
  uint32_t inf;           /* bits of +Inf, 0 when the format has none */
  bool saturate;          /* overflow and Inf become max_finite instead of Inf/NaN */
  uint32_t quiet_nan;     /* bits of the canonical positive quiet NaN */
  int nan_payload_bits;   /* fraction bits of a NaN's payload copied from the input (0: none) */
} small_format_t;

static const small_format_t k_half = {10, 15, 15, 0x7BFF, 0x7C00, false, 0x7E00, 9};
static const small_format_t k_bf16 = {7, 127, 15, 0x7F7F, 0x7F80, false, 0x7FC0, 6};
static const small_format_t k_e5m2 = {2, 15, 7, 0x7B, 0x7C, false, 0x7E, 0};
static const small_format_t k_e4m3 = {3, 7, 7, 0x7E, 0, true, 0x7F, 0};

static inline uint32_t round_double_to(const small_format_t f, double d) {
  uint64_t x;
  memcpy(&x, &d, sizeof(x));
  uint32_t sign = (uint32_t)(x >> 63) << f.sign_shift;
  uint64_t abs = x & 0x7FFFFFFFFFFFFFFFull;
  uint64_t frac = abs & 0xFFFFFFFFFFFFFull;
  int dexp = (int)(abs >> 52);
  if (dexp == 0x7FF) {
    if (frac != 0) { /* NaN: quiet, keep the sign and what fits of the payload's top bits */
      /* Double fraction bit 51 is the quiet bit; the payload wanted is the bits just below it. */
      uint32_t payload = f.nan_payload_bits ? (uint32_t)(frac >> (51 - f.nan_payload_bits)) : 0;
      return sign | f.quiet_nan | (payload & ((1u << f.nan_payload_bits) - 1));
    }
    if (f.saturate || f.inf == 0) return sign | f.max_finite;
    return sign | f.inf;
  }
  /* Double subnormals (< 2^-1022) are far below half the smallest subnormal of every format. */
  if (dexp == 0) return sign;
  int e = dexp - 1023;          /* unbiased exponent */
  int emin = 1 - f.bias;        /* exponent of the smallest normal */
  uint64_t mant = frac | (1ull << 52);
  int shift = 52 - f.mbits;     /* fraction bits to drop */
  if (e < emin) shift += emin - e; /* subnormal in the target: fixed quantum 2^(emin - mbits) */
  if (shift > 54) return sign;     /* below half the smallest subnormal: rounds to zero */
  uint64_t q = mant >> shift;
  uint64_t rem = mant & ((1ull << shift) - 1);
  uint64_t half = 1ull << (shift - 1);
  if (rem > half || (rem == half && (q & 1))) q++;
  uint64_t bits;
  if (e < emin) {
    bits = q; /* exponent field 0; a carry to 2^mbits lands exactly on the smallest normal */
  } else {
    /* q holds the implicit bit at 2^mbits: adding (biased exponent - 1) << mbits yields the
     * encoding, and a rounding carry to 2^(mbits+1) bumps the exponent by itself. */
    bits = ((uint64_t)(e + f.bias - 1) << f.mbits) + q;
  }
  if (bits > f.max_finite) return sign | ((f.saturate || f.inf == 0) ? f.max_finite : f.inf);
  return sign | (uint32_t)bits;
}

static inline float bits_to_float(uint32_t u) {
  float f;
  memcpy(&f, &u, sizeof(f));
  return f;
}

float strand_half_to_float(uint16_t h) {
  uint32_t sign = (uint32_t)(h & 0x8000) << 16;
  uint32_t e = (h >> 10) & 0x1F, m = h & 0x3FF;
  if (e == 0x1F) return bits_to_float(sign | 0x7F800000u | (m << 13));
  if (e == 0) { /* subnormal or zero: m * 2^-24, exact in float */
    float v = (float)m * 0x1p-24f;
    return sign ? -v : v;
  }
  return bits_to_float(sign | ((e - 15 + 127) << 23) | (m << 13));
}

float strand_bf16_to_float(uint16_t b) { return bits_to_float((uint32_t)b << 16); }

/* e5m2 is the upper byte of a float16 (same sign/exponent layout, 2 of the 10 fraction bits). */
float strand_e5m2_to_float(uint8_t v) { return strand_half_to_float((uint16_t)(v << 8)); }

float strand_e4m3_to_float(uint8_t v) {
  uint32_t sign = (uint32_t)(v & 0x80) << 24;
  uint32_t e = (v >> 3) & 0xF, m = v & 0x7;
  if (e == 0xF && m == 0x7) return bits_to_float(sign | 0x7FC00000u); /* the only NaN */
  if (e == 0) {
    float s = (float)m * 0x1p-9f;
    return sign ? -s : s;
  }
  return bits_to_float(sign | ((e - 7 + 127) << 23) | (m << 20));
}

uint16_t strand_double_to_half(double d) { return (uint16_t)round_double_to(k_half, d); }
uint16_t strand_double_to_bf16(double d) { return (uint16_t)round_double_to(k_bf16, d); }
uint8_t strand_double_to_e5m2(double d) { return (uint8_t)round_double_to(k_e5m2, d); }
uint8_t strand_double_to_e4m3(double d) { return (uint8_t)round_double_to(k_e4m3, d); }
/* float -> double is exact, so these round exactly once. */
uint16_t strand_float_to_half(float f) { return strand_double_to_half((double)f); }
uint16_t strand_float_to_bf16(float f) { return strand_double_to_bf16((double)f); }
uint8_t strand_float_to_e5m2(float f) { return strand_double_to_e5m2((double)f); }
uint8_t strand_float_to_e4m3(float f) { return strand_double_to_e4m3((double)f); }

/* ---- names and sizes ----------------------------------------------------------------------- */

static const struct {
  const char *name;
  size_t size;
} k_types[STRAND_NUM_TYPES] = {
    [STRAND_INT8] = {"int8", 1},        [STRAND_UINT8] = {"uint8", 1},
    [STRAND_INT32] = {"int32", 4},      [STRAND_UINT32] = {"uint32", 4},
    [STRAND_INT64] = {"int64", 8},      [STRAND_UINT64] = {"uint64", 8},
    [STRAND_FLOAT16] = {"float16", 2},  [STRAND_FLOAT32] = {"float32", 4},
    [STRAND_FLOAT64] = {"float64", 8},  [STRAND_BFLOAT16] = {"bfloat16", 2},
    [STRAND_FLOAT8_E4M3] = {"fp8e4m3", 1}, [STRAND_FLOAT8_E5M2] = {"fp8e5m2", 1},
};

static bool type_valid(strand_datatype_t t) { return (unsigned)t < STRAND_NUM_TYPES; }

size_t strand_datatype_size(strand_datatype_t type) {
  return type_valid(type) ? k_types[type].size : 0;
}

const char *strand_datatype_name(strand_datatype_t type) {
  return type_valid(type) ? k_types[type].name : "unknown";
}

const char *strand_redop_name(strand_redop_t op) {
  switch (op) {
  case STRAND_SUM: return "sum";
  case STRAND_PROD: return "prod";
  case STRAND_MAX: return "max";
  case STRAND_MIN: return "min";
  case STRAND_AVG: return "avg";
  default: return "unknown";
  }
}

bool strand_reduce_supported(strand_datatype_t type, strand_redop_t op) {
  return type_valid(type) && (unsigned)op <= (unsigned)STRAND_MIN;
}

/* ---- element operations ---------------------------------------------------------------------
 * x is the first operand, y the second. Integer SUM/PROD go through the unsigned type so that
 * wrap-around is defined; MAX/MIN return x on ties; floating MAX/MIN propagate NaN, x first. */

#define INT_SUM(T, U, x, y) ((T)((U)(x) + (U)(y)))
#define INT_PROD(T, U, x, y) ((T)((U)(x) * (U)(y)))
#define PICK_MAX(x, y) ((y) > (x) ? (y) : (x))
#define PICK_MIN(x, y) ((y) < (x) ? (y) : (x))
#define FP_MAX(x, y) (isnan(x) ? (x) : isnan(y) ? (y) : PICK_MAX(x, y))
#define FP_MIN(x, y) (isnan(x) ? (x) : isnan(y) ? (y) : PICK_MIN(x, y))

/* Small floats: decode to float (exact), compute in double, round once. MAX/MIN compare decoded
 * values but return the original bits. */
#define SMALL_SUM(DEC, ENC, x, y) ENC((double)DEC(x) + (double)DEC(y))
#define SMALL_PROD(DEC, ENC, x, y) ENC((double)DEC(x) * (double)DEC(y))
static inline bool small_pick_second_max(float fx, float fy) {
  return !isnan(fx) && (isnan(fy) || fy > fx);
}
static inline bool small_pick_second_min(float fx, float fy) {
  return !isnan(fx) && (isnan(fy) || fy < fx);
}
#define SMALL_MAX(DEC, x, y) (small_pick_second_max(DEC(x), DEC(y)) ? (y) : (x))
#define SMALL_MIN(DEC, x, y) (small_pick_second_min(DEC(x), DEC(y)) ? (y) : (x))

static inline uint16_t enc_half(double d) { return (uint16_t)round_double_to(k_half, d); }
static inline uint16_t enc_bf16(double d) { return (uint16_t)round_double_to(k_bf16, d); }
static inline uint8_t enc_e5m2(double d) { return (uint8_t)round_double_to(k_e5m2, d); }
static inline uint8_t enc_e4m3(double d) { return (uint8_t)round_double_to(k_e4m3, d); }

/* ---- kernels ----------------------------------------------------------------------------------
 * Four loops per (type, op), all element-wise:
 *   k3:    out = op(a, b), three distinct buffers (a may equal b: both are only read)
 *   k2:    dst = op(dst, src)          (reduce, reduce3 with out == a)
 *   k2r:   dst = op(src, dst)          (reduce3 with out == b)
 *   alias: no restrict, for out == a == b
 * restrict lets the compiler vectorise without runtime overlap checks. */

typedef void (*k3_fn)(void *restrict, const void *restrict, const void *restrict, size_t);
typedef void (*k2_fn)(void *restrict, const void *restrict, size_t);
typedef void (*ka_fn)(void *, const void *, const void *, size_t);

typedef struct {
  k3_fn k3;
  k2_fn k2, k2r;
  ka_fn alias;
} kernel_set_t;

#define DEFINE_KERNELS(NAME, T, EXPR)                                                              \
  static void NAME##_k3(void *restrict out_, const void *restrict a_, const void *restrict b_,     \
                        size_t n) {                                                                \
    T *restrict out = out_;                                                                        \
    const T *restrict a = a_;                                                                      \
    const T *restrict b = b_;                                                                      \
    for (size_t i = 0; i < n; i++) {                                                               \
      T x = a[i], y = b[i];                                                                        \
      out[i] = EXPR;                                                                               \
    }                                                                                              \
  }                                                                                                \
  static void NAME##_k2(void *restrict dst_, const void *restrict src_, size_t n) {                \
    T *restrict dst = dst_;                                                                        \
    const T *restrict src = src_;                                                                  \
    for (size_t i = 0; i < n; i++) {                                                               \
      T x = dst[i], y = src[i];                                                                    \
      dst[i] = EXPR;                                                                               \
    }                                                                                              \
  }                                                                                                \
  static void NAME##_k2r(void *restrict dst_, const void *restrict src_, size_t n) {               \
    T *restrict dst = dst_;                                                                        \
    const T *restrict src = src_;                                                                  \
    for (size_t i = 0; i < n; i++) {                                                               \
      T x = src[i], y = dst[i];                                                                    \
      dst[i] = EXPR;                                                                               \
    }                                                                                              \
  }                                                                                                \
  static void NAME##_alias(void *out_, const void *a_, const void *b_, size_t n) {                 \
    T *out = out_;                                                                                 \
    const T *a = a_;                                                                               \
    const T *b = b_;                                                                               \
    for (size_t i = 0; i < n; i++) {                                                               \
      T x = a[i], y = b[i];                                                                        \
      out[i] = EXPR;                                                                               \
    }                                                                                              \
  }

#define KSET(NAME) {NAME##_k3, NAME##_k2, NAME##_k2r, NAME##_alias}

#define DEFINE_INT(NAME, T, U)                                                                     \
  DEFINE_KERNELS(NAME##_sum, T, INT_SUM(T, U, x, y))                                               \
  DEFINE_KERNELS(NAME##_prod, T, INT_PROD(T, U, x, y))                                             \
  DEFINE_KERNELS(NAME##_max, T, PICK_MAX(x, y))                                                    \
  DEFINE_KERNELS(NAME##_min, T, PICK_MIN(x, y))

#define DEFINE_FP(NAME, T)                                                                         \
  DEFINE_KERNELS(NAME##_sum, T, x + y)                                                             \
  DEFINE_KERNELS(NAME##_prod, T, x * y)                                                            \
  DEFINE_KERNELS(NAME##_max, T, FP_MAX(x, y))                                                      \
  DEFINE_KERNELS(NAME##_min, T, FP_MIN(x, y))

#define DEFINE_SMALL(NAME, T, DEC, ENC)                                                            \
  DEFINE_KERNELS(NAME##_sum, T, SMALL_SUM(DEC, ENC, x, y))                                         \
  DEFINE_KERNELS(NAME##_prod, T, SMALL_PROD(DEC, ENC, x, y))                                       \
  DEFINE_KERNELS(NAME##_max, T, SMALL_MAX(DEC, x, y))                                              \
  DEFINE_KERNELS(NAME##_min, T, SMALL_MIN(DEC, x, y))

/* uint8/int8 promote to int before the multiply; 255 * 255 fits, so no signed overflow. */
DEFINE_INT(i8, int8_t, uint8_t)
DEFINE_INT(u8, uint8_t, uint8_t)
DEFINE_INT(i32, int32_t, uint32_t)
DEFINE_INT(u32, uint32_t, uint32_t)
DEFINE_INT(i64, int64_t, uint64_t)
DEFINE_INT(u64, uint64_t, uint64_t)
DEFINE_FP(f32, float)
DEFINE_FP(f64, double)
DEFINE_SMALL(f16, uint16_t, strand_half_to_float, enc_half)
DEFINE_SMALL(bf16, uint16_t, strand_bf16_to_float, enc_bf16)
DEFINE_SMALL(e4m3, uint8_t, strand_e4m3_to_float, enc_e4m3)
DEFINE_SMALL(e5m2, uint8_t, strand_e5m2_to_float, enc_e5m2)

#define KROW(NAME) {KSET(NAME##_sum), KSET(NAME##_prod), KSET(NAME##_max), KSET(NAME##_min)}

static const kernel_set_t k_kernels[STRAND_NUM_TYPES][4] = {
    [STRAND_INT8] = KROW(i8),       [STRAND_UINT8] = KROW(u8),
    [STRAND_INT32] = KROW(i32),     [STRAND_UINT32] = KROW(u32),
    [STRAND_INT64] = KROW(i64),     [STRAND_UINT64] = KROW(u64),
    [STRAND_FLOAT16] = KROW(f16),   [STRAND_FLOAT32] = KROW(f32),
    [STRAND_FLOAT64] = KROW(f64),   [STRAND_BFLOAT16] = KROW(bf16),
    [STRAND_FLOAT8_E4M3] = KROW(e4m3), [STRAND_FLOAT8_E5M2] = KROW(e5m2),
};

/* ---- entry points ---------------------------------------------------------------------------- */

typedef enum { DISJOINT, SAME, PARTIAL } overlap_t;

static overlap_t overlap(const void *p, const void *q, size_t bytes) {
  uintptr_t x = (uintptr_t)p, y = (uintptr_t)q;
  if (x == y) return SAME;
  if (x < y + bytes && y < x + bytes) return PARTIAL;
  return DISJOINT;
}

strand_result_t strand_reduce3(strand_datatype_t type, strand_redop_t op, void *out, const void *a,
                               const void *b, size_t count) {
  if (!strand_reduce_supported(type, op)) return STRAND_INVALID_ARGUMENT;
  if (count == 0) return STRAND_SUCCESS;
  if (out == NULL || a == NULL || b == NULL) return STRAND_INVALID_ARGUMENT;
  size_t size = k_types[type].size;
  if (count > SIZE_MAX / size) return STRAND_INVALID_ARGUMENT;
  size_t bytes = count * size;
  const kernel_set_t *k = &k_kernels[type][op];
  overlap_t oa = overlap(out, a, bytes), ob = overlap(out, b, bytes);
  if (oa == PARTIAL || ob == PARTIAL) return STRAND_INVALID_ARGUMENT;
  if (oa == SAME && ob == SAME) k->alias(out, a, b, count);
  else if (oa == SAME) k->k2(out, b, count);
  else if (ob == SAME) k->k2r(out, a, count);
  else k->k3(out, a, b, count);
  return STRAND_SUCCESS;
}

strand_result_t strand_reduce(strand_datatype_t type, strand_redop_t op, void *dst,
                              const void *src, size_t count) {
  return strand_reduce3(type, op, dst, dst, src, count);
}

/* ---- load / store as double -------------------------------------------------------------------- */

double strand_datatype_load(strand_datatype_t type, const void *buf, size_t i) {
  switch (type) {
  case STRAND_INT8: return ((const int8_t *)buf)[i];
  case STRAND_UINT8: return ((const uint8_t *)buf)[i];
  case STRAND_INT32: return ((const int32_t *)buf)[i];
  case STRAND_UINT32: return ((const uint32_t *)buf)[i];
  case STRAND_INT64: return (double)((const int64_t *)buf)[i];
  case STRAND_UINT64: return (double)((const uint64_t *)buf)[i];
  case STRAND_FLOAT16: return strand_half_to_float(((const uint16_t *)buf)[i]);
  case STRAND_FLOAT32: return ((const float *)buf)[i];
  case STRAND_FLOAT64: return ((const double *)buf)[i];
  case STRAND_BFLOAT16: return strand_bf16_to_float(((const uint16_t *)buf)[i]);
  case STRAND_FLOAT8_E4M3: return strand_e4m3_to_float(((const uint8_t *)buf)[i]);
  case STRAND_FLOAT8_E5M2: return strand_e5m2_to_float(((const uint8_t *)buf)[i]);
  default: return NAN;
  }
}

/* Round to nearest (ties to even) and clamp to [lo, hi]; NaN gives 0. The bounds are compared as
 * doubles: hi + 1 is a power of two, exact in double. */
static double int_round_clamp(double v, double lo, double hi_plus_one, bool *above) {
  *above = false;
  if (isnan(v)) return 0;
  v = nearbyint(v);
  if (v >= hi_plus_one) {
    *above = true;
    return 0;
  }
  return v < lo ? lo : v;
}

void strand_datatype_store(strand_datatype_t type, void *buf, size_t i, double v) {
  bool above;
  double r;
  switch (type) {
  case STRAND_INT8:
    r = int_round_clamp(v, -128.0, 128.0, &above);
    ((int8_t *)buf)[i] = above ? INT8_MAX : (int8_t)r;
    break;
  case STRAND_UINT8:
    r = int_round_clamp(v, 0.0, 256.0, &above);
    ((uint8_t *)buf)[i] = above ? UINT8_MAX : (uint8_t)r;
    break;
  case STRAND_INT32:
    r = int_round_clamp(v, -2147483648.0, 2147483648.0, &above);
    ((int32_t *)buf)[i] = above ? INT32_MAX : (int32_t)r;
    break;
  case STRAND_UINT32:
    r = int_round_clamp(v, 0.0, 4294967296.0, &above);
    ((uint32_t *)buf)[i] = above ? UINT32_MAX : (uint32_t)r;
    break;
  case STRAND_INT64:
    r = int_round_clamp(v, -9223372036854775808.0, 9223372036854775808.0, &above);
    ((int64_t *)buf)[i] = above ? INT64_MAX : (int64_t)r;
    break;
  case STRAND_UINT64:
    r = int_round_clamp(v, 0.0, 18446744073709551616.0, &above);
    ((uint64_t *)buf)[i] = above ? UINT64_MAX : (uint64_t)r;
    break;
  case STRAND_FLOAT16: ((uint16_t *)buf)[i] = strand_double_to_half(v); break;
  case STRAND_FLOAT32: ((float *)buf)[i] = (float)v; break;
  case STRAND_FLOAT64: ((double *)buf)[i] = v; break;
  case STRAND_BFLOAT16: ((uint16_t *)buf)[i] = strand_double_to_bf16(v); break;
  case STRAND_FLOAT8_E4M3: ((uint8_t *)buf)[i] = strand_double_to_e4m3(v); break;
  case STRAND_FLOAT8_E5M2: ((uint8_t *)buf)[i] = strand_double_to_e5m2(v); break;
  default: break;
  }
}
