/* Unit tests of strand/reduce.h: small-float conversions checked exhaustively against an independent
 * reference (frexp/nearbyint arithmetic in long double, not bit manipulation), and every
 * datatype x op x aliasing path checked element by element against a reference. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <fenv.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "strand/reduce.h"

/* ---- independent reference model of the four small formats -------------------------------- */

typedef struct {
  const char *name;
  int ebits, mbits, bias;
  bool has_inf;  /* e5m2/half/bf16: all-ones exponent is Inf/NaN; e4m3: only S.1111.111 is NaN */
  bool saturate; /* overflow -> max finite (e4m3) instead of Inf */
  int bytes;
} fmt_t;

static const fmt_t F_HALF = {"half", 5, 10, 15, true, false, 2};
static const fmt_t F_BF16 = {"bf16", 8, 7, 127, true, false, 2};
static const fmt_t F_E5M2 = {"e5m2", 5, 2, 15, true, false, 1};
static const fmt_t F_E4M3 = {"e4m3", 4, 3, 7, false, true, 1};

static long double max_finite(const fmt_t *f) {
  int emax = (1 << f->ebits) - 2 - f->bias; /* formats with Inf */
  long double frac = 2.0L - ldexpl(1.0L, -f->mbits);
  if (!f->has_inf) { /* e4m3: top exponent is normal, mantissa all-ones is NaN */
    emax = (1 << f->ebits) - 1 - f->bias;
    frac = 2.0L - ldexpl(1.0L, -f->mbits) * 2; /* 1.110b */
  }
  return ldexpl(frac, emax);
}

/* Value of a bit pattern, from the textbook formula. */
static long double ref_decode(const fmt_t *f, uint32_t bits) {
  int sign = (bits >> (f->ebits + f->mbits)) & 1;
  uint32_t e = (bits >> f->mbits) & ((1u << f->ebits) - 1);
  uint32_t m = bits & ((1u << f->mbits) - 1);
  uint32_t emask = (1u << f->ebits) - 1, mmask = (1u << f->mbits) - 1;
  long double v;
  if (f->has_inf && e == emask) v = m ? NAN : INFINITY;
  else if (!f->has_inf && e == emask && m == mmask) v = NAN;
  else if (e == 0) v = ldexpl((long double)m, 1 - f->bias - f->mbits);
  else v = ldexpl(1.0L + ldexpl((long double)m, -f->mbits), (int)e - f->bias);
  return sign ? -v : v;
}

/* Round-to-nearest-even of an arbitrary value into the format, as a value. */
static long double ref_round(const fmt_t *f, long double x) {
  if (isnan(x)) return x;
  long double mf = max_finite(f);
  if (isinf(x)) return (f->saturate || !f->has_inf) ? copysignl(mf, x) : x;
  if (x == 0) return x;
  int e;
  frexpl(fabsl(x), &e);
  int lead = e - 1, emin = 1 - f->bias;
  if (lead < emin) lead = emin;
  long double q = ldexpl(1.0L, lead - f->mbits);
  long double r = nearbyintl(x / q) * q; /* default rounding mode: ties to even */
  if (r == 0) return copysignl(0.0L, x);
  if (fabsl(r) > mf) return f->saturate ? copysignl(mf, x) : copysignl(INFINITY, x);
  return r;
}

static bool same_value(long double a, long double b) {
  if (isnan(a) || isnan(b)) return isnan(a) && isnan(b);
  return a == b && signbit(a) == signbit(b);
}

static uint32_t enc_d(const fmt_t *f, double d) {
  if (f == &F_HALF) return strand_double_to_half(d);
  if (f == &F_BF16) return strand_double_to_bf16(d);
  if (f == &F_E5M2) return strand_double_to_e5m2(d);
  return strand_double_to_e4m3(d);
}
static uint32_t enc_f(const fmt_t *f, float x) {
  if (f == &F_HALF) return strand_float_to_half(x);
  if (f == &F_BF16) return strand_float_to_bf16(x);
  if (f == &F_E5M2) return strand_float_to_e5m2(x);
  return strand_float_to_e4m3(x);
}
static float dec(const fmt_t *f, uint32_t bits) {
  if (f == &F_HALF) return strand_half_to_float((uint16_t)bits);
  if (f == &F_BF16) return strand_bf16_to_float((uint16_t)bits);
  if (f == &F_E5M2) return strand_e5m2_to_float((uint8_t)bits);
  return strand_e4m3_to_float((uint8_t)bits);
}

static int check_round(const fmt_t *f, double x) {
  long double want = ref_round(f, x);
  uint32_t got_d = enc_d(f, x);
  if (!same_value(ref_decode(f, got_d), want)) {
    print_error("%s: double %a -> 0x%x (%Lg), want %Lg\n", f->name, x, got_d,
                ref_decode(f, got_d), want);
    return 1;
  }
  float xf = (float)x;
  if ((double)xf == x || isnan(x)) {
    uint32_t got_f = enc_f(f, xf);
    if (!same_value(ref_decode(f, got_f), want)) {
      print_error("%s: float %a -> 0x%x, want %Lg\n", f->name, (double)xf, got_f, want);
      return 1;
    }
  }
  return 0;
}

/* Every bit pattern: decode matches the formula, encode(decode(x)) == x (NaN: stays NaN, quieted,
 * same sign), and the midpoints to the next pattern (and a hair either side) round correctly. */
static void exhaustive_format(const fmt_t *f) {
  uint32_t n = 1u << (8 * f->bytes);
  uint32_t sign_bit = n >> 1;
  int errors = 0;
  for (uint32_t bits = 0; bits < n && errors < 10; bits++) {
    long double v = ref_decode(f, bits);
    float d = dec(f, bits);
    if (!same_value((long double)d, v)) {
      print_error("%s: decode 0x%x = %a, want %La\n", f->name, bits, (double)d, v);
      errors++;
      continue;
    }
    uint32_t back = enc_f(f, d);
    if (isnan(v)) {
      if (!isnan(ref_decode(f, back)) || (back & sign_bit) != (bits & sign_bit)) {
        print_error("%s: NaN 0x%x -> 0x%x\n", f->name, bits, back);
        errors++;
      }
    } else if (back != bits) {
      print_error("%s: round trip 0x%x -> %a -> 0x%x\n", f->name, bits, (double)d, back);
      errors++;
    }
    /* Midpoint to the next larger magnitude (same sign), while both are finite. */
    uint32_t next = bits + 1;
    if ((next & (sign_bit - 1)) == 0) continue;
    long double w = ref_decode(f, next);
    if (isnan(v) || isinf(v) || isnan(w) || isinf(w)) continue;
    double mid = (double)((v + w) / 2);
    errors += check_round(f, mid);
    errors += check_round(f, nextafter(mid, INFINITY));
    errors += check_round(f, nextafter(mid, -INFINITY));
    errors += check_round(f, nextafter((double)v, 0.0));
  }
  assert_int_equal(errors, 0);
}

static void test_half_exhaustive(void **state) { (void)state; exhaustive_format(&F_HALF); }
static void test_bf16_exhaustive(void **state) { (void)state; exhaustive_format(&F_BF16); }
static void test_e4m3_exhaustive(void **state) { (void)state; exhaustive_format(&F_E4M3); }
static void test_e5m2_exhaustive(void **state) { (void)state; exhaustive_format(&F_E5M2); }

static uint64_t rng_state = 0x9E3779B97F4A7C15ull;
static uint64_t rnd(void) { /* splitmix64: deterministic, so failures reproduce */
  uint64_t z = (rng_state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

/* Random doubles over (and beyond) every format's range, and random floats. */
static void test_random_rounding(void **state) {
  (void)state;
  const fmt_t *fmts[] = {&F_HALF, &F_BF16, &F_E5M2, &F_E4M3};
  int errors = 0;
  for (int i = 0; i < 200000 && errors < 10; i++) {
    uint64_t r = rnd();
    double m = 1.0 + (double)(r >> 12) * 0x1p-52;
    int e = (int)(r % 300) - 150;
    double x = ldexp(m, e) * ((r >> 11) & 1 ? -1 : 1);
    for (int k = 0; k < 4; k++) errors += check_round(fmts[k], x);
    uint32_t fb = (uint32_t)rnd();
    float xf;
    memcpy(&xf, &fb, sizeof(xf));
    for (int k = 0; k < 4; k++) errors += check_round(fmts[k], (double)xf);
  }
  assert_int_equal(errors, 0);
}

static void test_edge_values(void **state) {
  (void)state;
  /* float16 */
  assert_int_equal(strand_float_to_half(65504.0f), 0x7BFF);
  assert_int_equal(strand_float_to_half(65519.99f), 0x7BFF);
  assert_int_equal(strand_float_to_half(65520.0f), 0x7C00); /* overflow threshold -> Inf */
  assert_int_equal(strand_float_to_half(-INFINITY), 0xFC00);
  assert_int_equal(strand_float_to_half(0x1p-24f), 0x0001); /* smallest subnormal */
  assert_int_equal(strand_float_to_half(0x1p-25f), 0x0000); /* tie to even: zero */
  assert_int_equal(strand_float_to_half(0x1.8p-24f), 0x0002); /* 1.5 ulp: tie to even, up */
  assert_int_equal(strand_float_to_half(-0.0f), 0x8000);
  assert_int_equal(strand_float_to_half(0x1.ffcp-15f), 0x0400); /* subnormal carries to normal */
  assert_true(isnan(strand_half_to_float(strand_float_to_half(NAN))));
  assert_int_equal(strand_float_to_half(-NAN) & 0x8000, 0x8000);
  assert_true(strand_half_to_float(0x3C00) == 1.0f);
  /* NaN payload: the quiet bit is set and the top payload bits survive. */
  float nan_payload;
  uint32_t nb = 0x7F812000; /* signaling NaN, payload bits 16 and 13 -> half bits 3 and 0 */
  memcpy(&nan_payload, &nb, sizeof(nan_payload));
  assert_int_equal(strand_float_to_half(nan_payload), 0x7E09);
  /* bfloat16 */
  assert_int_equal(strand_float_to_bf16(1.0f), 0x3F80);
  assert_int_equal(strand_float_to_bf16(0x1.01p0f), 0x3F80);  /* tie to even (down) */
  assert_int_equal(strand_float_to_bf16(0x1.03p0f), 0x3F82);  /* tie to even (up) */
  assert_int_equal(strand_float_to_bf16(3.4028235e38f), 0x7F80); /* FLT_MAX rounds to Inf */
  assert_int_equal(strand_float_to_bf16(INFINITY), 0x7F80);
  assert_int_equal(strand_float_to_bf16(0x1p-133f), 0x0001);
  assert_int_equal(strand_float_to_bf16(NAN) & 0x7FC0, 0x7FC0);
  /* fp8 e4m3: saturating, no Inf, NaN = 0x7F/0xFF */
  assert_int_equal(strand_float_to_e4m3(448.0f), 0x7E);
  assert_int_equal(strand_float_to_e4m3(464.0f), 0x7E); /* tie between 448 and (NaN slot) 480 */
  assert_int_equal(strand_float_to_e4m3(500.0f), 0x7E);
  assert_int_equal(strand_float_to_e4m3(1e30f), 0x7E);
  assert_int_equal(strand_float_to_e4m3(INFINITY), 0x7E);
  assert_int_equal(strand_float_to_e4m3(-INFINITY), 0xFE);
  assert_int_equal(strand_float_to_e4m3(NAN), 0x7F);
  assert_int_equal(strand_float_to_e4m3(-NAN), 0xFF);
  assert_int_equal(strand_float_to_e4m3(0x1p-9f), 0x01);
  assert_int_equal(strand_float_to_e4m3(0x1p-10f), 0x00);
  assert_int_equal(strand_float_to_e4m3(0x1.01p-10f), 0x01);
  assert_true(strand_e4m3_to_float(0x7E) == 448.0f);
  assert_true(isnan(strand_e4m3_to_float(0x7F)));
  assert_true(strand_e4m3_to_float(0x78) == 256.0f); /* 0x78 is a number in e4m3, not Inf */
  /* fp8 e5m2: IEEE-like, overflow to Inf */
  assert_int_equal(strand_float_to_e5m2(57344.0f), 0x7B);
  assert_int_equal(strand_float_to_e5m2(61439.0f), 0x7B);
  assert_int_equal(strand_float_to_e5m2(61440.0f), 0x7C);
  assert_int_equal(strand_float_to_e5m2(INFINITY), 0x7C);
  assert_int_equal(strand_float_to_e5m2(-INFINITY), 0xFC);
  assert_int_equal(strand_float_to_e5m2(NAN), 0x7E);
  assert_int_equal(strand_float_to_e5m2(0x1p-16f), 0x01);
  assert_true(isinf(strand_e5m2_to_float(0x7C)));
  /* double versions round once (a value just above a half midpoint that float would round onto
   * the midpoint itself) */
  double just_above = 1.0 + 0x1p-11 + 0x1p-40; /* midpoint between 1 and 1+2^-10, plus a hair */
  assert_int_equal(strand_double_to_half(just_above), 0x3C01);
  assert_int_equal(strand_float_to_half((float)just_above), 0x3C00); /* float lost the hair */
}

static void test_names_sizes(void **state) {
  (void)state;
  const size_t sizes[STRAND_NUM_TYPES] = {1, 1, 4, 4, 8, 8, 2, 4, 8, 2, 1, 1};
  const char *names[STRAND_NUM_TYPES] = {"int8",    "uint8",   "int32",   "uint32",
                                         "int64",   "uint64",  "float16", "float32",
                                         "float64", "bfloat16", "fp8e4m3", "fp8e5m2"};
  for (int t = 0; t < STRAND_NUM_TYPES; t++) {
    assert_int_equal(strand_datatype_size((strand_datatype_t)t), sizes[t]);
    assert_string_equal(strand_datatype_name((strand_datatype_t)t), names[t]);
    for (int op = 0; op < 4; op++) assert_true(strand_reduce_supported(t, (strand_redop_t)op));
    assert_false(strand_reduce_supported(t, STRAND_AVG));
    assert_false(strand_reduce_supported(t, (strand_redop_t)7));
  }
  assert_int_equal(strand_datatype_size(STRAND_NUM_TYPES), 0);
  assert_int_equal(strand_datatype_size((strand_datatype_t)-1), 0);
  assert_string_equal(strand_datatype_name((strand_datatype_t)99), "unknown");
  assert_false(strand_reduce_supported(STRAND_NUM_TYPES, STRAND_SUM));
  assert_string_equal(strand_redop_name(STRAND_SUM), "sum");
  assert_string_equal(strand_redop_name(STRAND_PROD), "prod");
  assert_string_equal(strand_redop_name(STRAND_MAX), "max");
  assert_string_equal(strand_redop_name(STRAND_MIN), "min");
  assert_string_equal(strand_redop_name(STRAND_AVG), "avg");
  assert_string_equal(strand_redop_name((strand_redop_t)42), "unknown");
}

/* ---- reductions ------------------------------------------------------------------------------ */

static const fmt_t *small_fmt(strand_datatype_t t) {
  switch (t) {
  case STRAND_FLOAT16: return &F_HALF;
  case STRAND_BFLOAT16: return &F_BF16;
  case STRAND_FLOAT8_E4M3: return &F_E4M3;
  case STRAND_FLOAT8_E5M2: return &F_E5M2;
  default: return NULL;
  }
}

static bool is_signed_int(strand_datatype_t t) {
  return t == STRAND_INT8 || t == STRAND_INT32 || t == STRAND_INT64;
}

static uint64_t get_raw(const void *buf, size_t i, size_t size) {
  uint64_t v = 0;
  memcpy(&v, (const char *)buf + i * size, size);
  return v;
}
static void put_raw(void *buf, size_t i, size_t size, uint64_t v) {
  memcpy((char *)buf + i * size, &v, size);
}

/* Floating value of element bits (float32/float64/small formats). */
static long double fp_value(strand_datatype_t t, uint64_t raw) {
  if (t == STRAND_FLOAT32) {
    float f;
    uint32_t u = (uint32_t)raw;
    memcpy(&f, &u, 4);
    return f;
  }
  if (t == STRAND_FLOAT64) {
    double d;
    memcpy(&d, &raw, 8);
    return d;
  }
  return ref_decode(small_fmt(t), (uint32_t)raw);
}

/* Reference result, plus whether any NaN result is acceptable (arithmetic on NaN: the payload is
 * not specified) rather than exact bits. */
static uint64_t ref_elem(strand_datatype_t t, strand_redop_t op, uint64_t x, uint64_t y,
                         bool *any_nan) {
  size_t size = strand_datatype_size(t);
  int bits = (int)size * 8;
  uint64_t mask = bits == 64 ? ~0ull : ((1ull << bits) - 1);
  *any_nan = false;
  if (t <= STRAND_UINT64) {
    if (op == STRAND_SUM) return (x + y) & mask;
    if (op == STRAND_PROD) return (x * y) & mask;
    bool second;
    if (is_signed_int(t)) { /* sign-extend */
      int64_t sx = (int64_t)(x << (64 - bits)) >> (64 - bits);
      int64_t sy = (int64_t)(y << (64 - bits)) >> (64 - bits);
      second = op == STRAND_MAX ? sy > sx : sy < sx;
    } else {
      second = op == STRAND_MAX ? y > x : y < x;
    }
    return second ? y : x;
  }
  long double fx = fp_value(t, x), fy = fp_value(t, y);
  if (op == STRAND_MAX || op == STRAND_MIN) {
    if (isnan(fx)) return x;
    if (isnan(fy)) return y;
    bool second = op == STRAND_MAX ? fy > fx : fy < fx;
    return second ? y : x;
  }
  long double exact = op == STRAND_SUM ? fx + fy : fx * fy;
  if (isnan(exact)) {
    *any_nan = true;
    return 0;
  }
  if (t == STRAND_FLOAT32) {
    float f = (float)(double)exact; /* float inputs: sum/product exact enough in long double */
    if (op == STRAND_SUM) f = (float)((double)fx + (double)fy);
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
  }
  if (t == STRAND_FLOAT64) {
    double d = op == STRAND_SUM ? (double)fx + (double)fy : (double)fx * (double)fy;
    uint64_t u;
    memcpy(&u, &d, 8);
    return u;
  }
  /* small formats: round the long double result, then find its encoding via the library's exact
   * encoder of a representable value (checked exhaustively above). */
  const fmt_t *f = small_fmt(t);
  long double r = ref_round(f, exact);
  return enc_d(f, (double)r);
}

/* Fill with random bits, mixing in special values for floating types. */
static void fill(strand_datatype_t t, void *buf, size_t n) {
  size_t size = strand_datatype_size(t);
  for (size_t i = 0; i < n; i++) {
    uint64_t r = rnd();
    put_raw(buf, i, size, r);
    if (t == STRAND_FLOAT32 && (r >> 60) < 12) { /* mostly ordinary numbers */
      float f = (float)((double)((int64_t)r >> 20) * 0x1p-30);
      memcpy((char *)buf + i * 4, &f, 4);
    } else if (t == STRAND_FLOAT64 && (r >> 60) < 12) {
      double d = (double)((int64_t)r >> 8) * 0x1p-40;
      memcpy((char *)buf + i * 8, &d, 8);
    }
  }
  /* Specials at fixed positions: zeros of both signs, infinities, NaN, equal values. */
  if (n > 8 && (t == STRAND_FLOAT32 || t == STRAND_FLOAT64)) {
    double sp[] = {0.0, -0.0, INFINITY, -INFINITY, NAN, 1.0, -1.0, 1e-310};
    for (int k = 0; k < 8; k++) strand_datatype_store(t, buf, (size_t)k, sp[k]);
  }
}

typedef enum { PATH_REDUCE, PATH_K3, PATH_OUT_IS_A, PATH_OUT_IS_B, PATH_ALL_SAME } path_t;

static int check_type_op_path(strand_datatype_t t, strand_redop_t op, path_t path, size_t n) {
  size_t size = strand_datatype_size(t);
  unsigned char *a = malloc(n * size), *b = malloc(n * size), *out = malloc(n * size);
  unsigned char *a0 = malloc(n * size), *b0 = malloc(n * size);
  assert_non_null(a);
  assert_non_null(b);
  assert_non_null(out);
  assert_non_null(a0);
  assert_non_null(b0);
  fill(t, a, n);
  fill(t, b, n);
  /* Force some ties, including +0/-0 pairs for the float types. */
  for (size_t i = 16; i < n; i += 37) memcpy(b + i * size, a + i * size, size);
  if (path == PATH_ALL_SAME) memcpy(b, a, n * size);
  memcpy(a0, a, n * size);
  memcpy(b0, b, n * size);
  strand_result_t r;
  unsigned char *result;
  switch (path) {
  case PATH_REDUCE: r = strand_reduce(t, op, a, b, n); result = a; break;
  case PATH_K3: r = strand_reduce3(t, op, out, a, b, n); result = out; break;
  case PATH_OUT_IS_A: r = strand_reduce3(t, op, a, a, b, n); result = a; break;
  case PATH_OUT_IS_B: r = strand_reduce3(t, op, b, a, b, n); result = b; break;
  default: r = strand_reduce3(t, op, a, a, a, n); result = a; break;
  }
  assert_int_equal(r, STRAND_SUCCESS);
  int errors = 0;
  for (size_t i = 0; i < n && errors < 5; i++) {
    uint64_t x = get_raw(a0, i, size), y = get_raw(b0, i, size);
    bool any_nan;
    uint64_t want = ref_elem(t, op, x, y, &any_nan);
    uint64_t got = get_raw(result, i, size);
    bool ok = any_nan ? isnan(fp_value(t, got)) : got == want;
    if (!ok) {
      print_error("%s %s path %d [%zu]: op(0x%llx, 0x%llx) = 0x%llx, want 0x%llx%s\n",
                  strand_datatype_name(t), strand_redop_name(op), (int)path, i,
                  (unsigned long long)x, (unsigned long long)y, (unsigned long long)got,
                  (unsigned long long)want, any_nan ? " (any NaN)" : "");
      errors++;
    }
  }
  /* The inputs that are not the output are untouched. */
  if (path == PATH_K3) {
    errors += memcmp(a, a0, n * size) != 0;
    errors += memcmp(b, b0, n * size) != 0;
  }
  if (path == PATH_REDUCE || path == PATH_OUT_IS_A) errors += memcmp(b, b0, n * size) != 0;
  if (path == PATH_OUT_IS_B) errors += memcmp(a, a0, n * size) != 0;
  free(a);
  free(b);
  free(out);
  free(a0);
  free(b0);
  return errors;
}

static void test_every_type_op(void **state) {
  (void)state;
  int errors = 0;
  for (int t = 0; t < STRAND_NUM_TYPES; t++)
    for (int op = 0; op < 4; op++)
      for (int p = PATH_REDUCE; p <= PATH_ALL_SAME; p++)
        errors += check_type_op_path((strand_datatype_t)t, (strand_redop_t)op, (path_t)p, 4099);
  assert_int_equal(errors, 0);
}

/* Every pair of fp8 values, every op: 65536 pairs x 4 ops x 2 formats. */
static void test_fp8_all_pairs(void **state) {
  (void)state;
  strand_datatype_t types[] = {STRAND_FLOAT8_E4M3, STRAND_FLOAT8_E5M2};
  int errors = 0;
  uint8_t *a = malloc(65536), *b = malloc(65536), *out = malloc(65536);
  assert_non_null(a);
  assert_non_null(b);
  assert_non_null(out);
  for (int i = 0; i < 65536; i++) a[i] = (uint8_t)(i >> 8), b[i] = (uint8_t)i;
  for (int k = 0; k < 2; k++) {
    for (int op = 0; op < 4 && errors < 5; op++) {
      assert_int_equal(strand_reduce3(types[k], (strand_redop_t)op, out, a, b, 65536),
                       STRAND_SUCCESS);
      for (int i = 0; i < 65536 && errors < 5; i++) {
        bool any_nan;
        uint64_t want = ref_elem(types[k], (strand_redop_t)op, a[i], b[i], &any_nan);
        bool ok = any_nan ? isnan(fp_value(types[k], out[i])) : out[i] == want;
        if (!ok) {
          print_error("%s %s(0x%02x, 0x%02x) = 0x%02x, want 0x%02x\n",
                      strand_datatype_name(types[k]), strand_redop_name((strand_redop_t)op), a[i],
                      b[i], out[i], (unsigned)want);
          errors++;
        }
      }
    }
  }
  free(a);
  free(b);
  free(out);
  assert_int_equal(errors, 0);
}

static void test_documented_semantics(void **state) {
  (void)state;
  /* e4m3 SUM saturates at 448 rather than producing NaN. */
  uint8_t x = strand_float_to_e4m3(448.0f), y = strand_float_to_e4m3(448.0f);
  assert_int_equal(strand_reduce(STRAND_FLOAT8_E4M3, STRAND_SUM, &x, &y, 1), STRAND_SUCCESS);
  assert_int_equal(x, 0x7E);
  /* e5m2 SUM overflows to Inf. */
  uint8_t p = 0x7B, q = 0x7B;
  assert_int_equal(strand_reduce(STRAND_FLOAT8_E5M2, STRAND_SUM, &p, &q, 1), STRAND_SUCCESS);
  assert_int_equal(p, 0x7C);
  /* MAX propagates NaN, from either side. */
  float f[2] = {NAN, 1.0f}, g[2] = {5.0f, NAN};
  assert_int_equal(strand_reduce(STRAND_FLOAT32, STRAND_MAX, f, g, 2), STRAND_SUCCESS);
  assert_true(isnan(f[0]) && isnan(f[1]));
  /* Ties return the first operand: max(+0, -0) = +0, max(-0, +0) = -0. */
  double z[2] = {0.0, -0.0}, w[2] = {-0.0, 0.0};
  assert_int_equal(strand_reduce(STRAND_FLOAT64, STRAND_MAX, z, w, 2), STRAND_SUCCESS);
  assert_false(signbit(z[0]));
  assert_true(signbit(z[1]));
  /* Signed integers wrap. */
  int32_t i1 = INT32_MAX, i2 = 1;
  assert_int_equal(strand_reduce(STRAND_INT32, STRAND_SUM, &i1, &i2, 1), STRAND_SUCCESS);
  assert_int_equal(i1, INT32_MIN);
  int8_t s1 = -128, s2 = -1;
  assert_int_equal(strand_reduce(STRAND_INT8, STRAND_PROD, &s1, &s2, 1), STRAND_SUCCESS);
  assert_int_equal(s1, -128);
  int64_t l1 = -5, l2 = 3;
  assert_int_equal(strand_reduce(STRAND_INT64, STRAND_MIN, &l1, &l2, 1), STRAND_SUCCESS);
  assert_int_equal(l1, -5);
  uint64_t u1 = UINT64_MAX, u2 = 3;
  assert_int_equal(strand_reduce(STRAND_UINT64, STRAND_MAX, &u1, &u2, 1), STRAND_SUCCESS);
  assert_true(u1 == UINT64_MAX);
  /* half: 2048 + 1 is a tie between 2048 and 2050: even mantissa wins. */
  uint16_t h1 = strand_float_to_half(2048.0f), h2 = strand_float_to_half(1.0f);
  assert_int_equal(strand_reduce(STRAND_FLOAT16, STRAND_SUM, &h1, &h2, 1), STRAND_SUCCESS);
  assert_true(strand_half_to_float(h1) == 2048.0f);
  h1 = strand_float_to_half(2050.0f);
  assert_int_equal(strand_reduce(STRAND_FLOAT16, STRAND_SUM, &h1, &h2, 1), STRAND_SUCCESS);
  assert_true(strand_half_to_float(h1) == 2052.0f);
}

static void test_bad_arguments(void **state) {
  (void)state;
  float buf[16] = {0};
  assert_int_equal(strand_reduce(STRAND_FLOAT32, STRAND_AVG, buf, buf + 8, 4),
                   STRAND_INVALID_ARGUMENT);
  assert_int_equal(strand_reduce(STRAND_NUM_TYPES, STRAND_SUM, buf, buf + 8, 4),
                   STRAND_INVALID_ARGUMENT);
  assert_int_equal(strand_reduce(STRAND_FLOAT32, STRAND_SUM, NULL, buf, 4),
                   STRAND_INVALID_ARGUMENT);
  assert_int_equal(strand_reduce(STRAND_FLOAT32, STRAND_SUM, buf, NULL, 4),
                   STRAND_INVALID_ARGUMENT);
  assert_int_equal(strand_reduce(STRAND_FLOAT32, STRAND_SUM, NULL, NULL, 0), STRAND_SUCCESS);
  /* Partial overlap is refused and nothing is written. */
  for (int i = 0; i < 16; i++) buf[i] = (float)i;
  assert_int_equal(strand_reduce(STRAND_FLOAT32, STRAND_SUM, buf, buf + 2, 4),
                   STRAND_INVALID_ARGUMENT);
  assert_int_equal(strand_reduce3(STRAND_FLOAT32, STRAND_SUM, buf + 1, buf, buf + 8, 4),
                   STRAND_INVALID_ARGUMENT);
  assert_int_equal(strand_reduce3(STRAND_FLOAT32, STRAND_SUM, buf + 8, buf, buf + 9, 4),
                   STRAND_INVALID_ARGUMENT);
  for (int i = 0; i < 16; i++) assert_true(buf[i] == (float)i);
  /* Adjacent (touching, not overlapping) buffers are fine. */
  assert_int_equal(strand_reduce(STRAND_FLOAT32, STRAND_SUM, buf, buf + 4, 4), STRAND_SUCCESS);
  assert_true(buf[0] == 4.0f && buf[3] == 10.0f);
  /* dst == src: x = op(x, x). */
  int32_t v[3] = {1, -2, 3};
  assert_int_equal(strand_reduce(STRAND_INT32, STRAND_SUM, v, v, 3), STRAND_SUCCESS);
  assert_int_equal(v[0], 2);
  assert_int_equal(v[1], -4);
  assert_int_equal(v[2], 6);
}

static void test_load_store(void **state) {
  (void)state;
  int8_t i8[4];
  strand_datatype_store(STRAND_INT8, i8, 0, 300.0);
  strand_datatype_store(STRAND_INT8, i8, 1, -300.0);
  strand_datatype_store(STRAND_INT8, i8, 2, 2.5); /* ties to even */
  strand_datatype_store(STRAND_INT8, i8, 3, NAN);
  assert_int_equal(i8[0], 127);
  assert_int_equal(i8[1], -128);
  assert_int_equal(i8[2], 2);
  assert_int_equal(i8[3], 0);
  uint64_t u64[3];
  strand_datatype_store(STRAND_UINT64, u64, 0, 1e30);
  strand_datatype_store(STRAND_UINT64, u64, 1, -1.0);
  strand_datatype_store(STRAND_UINT64, u64, 2, 9007199254740992.0);
  assert_true(u64[0] == UINT64_MAX);
  assert_true(u64[1] == 0);
  assert_true(u64[2] == 9007199254740992ull);
  int64_t i64[2];
  strand_datatype_store(STRAND_INT64, i64, 0, 9223372036854775808.0);
  strand_datatype_store(STRAND_INT64, i64, 1, -9223372036854775808.0);
  assert_true(i64[0] == INT64_MAX);
  assert_true(i64[1] == INT64_MIN);
  uint32_t u32;
  strand_datatype_store(STRAND_UINT32, &u32, 0, 4294967295.4);
  assert_true(u32 == UINT32_MAX);
  /* Every type: store then load gives the value back for small integers and halves. */
  for (int t = 0; t < STRAND_NUM_TYPES; t++) {
    unsigned char buf[8 * 8];
    double vals[] = {0, 1, 2, 3, 0.5, -1, 16, 96}; /* exact in every type */
    for (int k = 0; k < 8; k++) {
      double v = vals[k];
      if (t <= STRAND_UINT64 && v != floor(v)) v = 4;
      if ((t == STRAND_UINT8 || t == STRAND_UINT32 || t == STRAND_UINT64) && v < 0) v = 7;
      strand_datatype_store((strand_datatype_t)t, buf, (size_t)k, v);
      assert_true(strand_datatype_load((strand_datatype_t)t, buf, (size_t)k) == v);
    }
  }
  assert_true(isnan(strand_datatype_load(STRAND_NUM_TYPES, i8, 0)));
  /* float16 store rounds from double directly. */
  uint16_t h;
  strand_datatype_store(STRAND_FLOAT16, &h, 0, 1.0 + 0x1p-11 + 0x1p-40);
  assert_int_equal(h, 0x3C01);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_half_exhaustive),   cmocka_unit_test(test_bf16_exhaustive),
      cmocka_unit_test(test_e4m3_exhaustive),   cmocka_unit_test(test_e5m2_exhaustive),
      cmocka_unit_test(test_random_rounding),   cmocka_unit_test(test_edge_values),
      cmocka_unit_test(test_names_sizes),       cmocka_unit_test(test_every_type_op),
      cmocka_unit_test(test_fp8_all_pairs),     cmocka_unit_test(test_documented_semantics),
      cmocka_unit_test(test_bad_arguments),     cmocka_unit_test(test_load_store),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
