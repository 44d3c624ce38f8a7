/* Strand SDK — CPU reductions for the 12 NCCL datatypes, and the small-float conversions behind them.
 *
 * Used by collnet_stub (in-host reductions) and by strand-conform (generating and checking data).
 *
 * Semantics, per element:
 *  - Integers: SUM and PROD wrap modulo 2^bits (two's complement, also for signed types); MAX/MIN
 *    compare as signed or unsigned according to the type.
 *  - float32 / float64: IEEE arithmetic in the type itself.
 *  - float16, bfloat16, fp8 e4m3, fp8 e5m2: both operands are widened to double (exact), combined in
 *    double, and the result is rounded once to the type, round-to-nearest-even. Products of these
 *    types are exact in double, and double carries more than 2p+2 significand bits for each of
 *    them, so the result is the correctly rounded result of the exact operation (what a GPU's
 *    __hadd/__hmul give), never off by a double rounding.
 *  - MAX / MIN return one of the two operands bit for bit: NaN propagates (if the first operand is
 *    NaN it is returned, else if the second is NaN it is returned), and on equality (including +0
 *    vs -0) the first operand is returned. NCCL's GPU kernels use fmax-like semantics (the non-NaN
 *    operand wins); Strand propagates NaN on purpose so that corrupted data is never hidden.
 *  - AVG (and dynamic ops) are not element-wise binary ops: unsupported. CollNet only sees SUM..MIN.
 *
 * Conversions to the small float formats (round-to-nearest-even everywhere):
 *  - float16 (1.5.10, bias 15) and bfloat16 (1.8.7, bias 127): IEEE-like. Overflow rounds to
 *    ±Inf, subnormals are produced and consumed, NaN stays NaN (quiet bit set, sign and the top
 *    payload bits kept).
 *  - fp8 e5m2 (1.5.2, bias 15, OCP FP8): IEEE-like, has ±Inf (0x7C/0xFC) and NaN (exponent 31,
 *    mantissa != 0). Overflow rounds to ±Inf (non-saturating); NaN becomes 0x7E | sign.
 *  - fp8 e4m3 (1.4.3, bias 7, OCP FP8 "E4M3FN"): no Inf; the only NaNs are 0x7F and 0xFF; max
 *    finite 448. Conversion SATURATES: finite values beyond ±448 and ±Inf become ±448 (the OCP
 *    saturating mode, same as CUDA's __NV_SATFINITE used by NCCL's fp8 kernels); NaN becomes
 *    0x7F | sign. So an e4m3 SUM that overflows gives ±448, never NaN.
 *
 * Reduction kernels are simple per-type loops over restrict-qualified pointers so that the compiler
 * vectorises the integer, float and double cases at -O2/-O3. */
#ifndef STRAND_REDUCE_H
#define STRAND_REDUCE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "strand/abi/types.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Bytes per element (1, 2, 4 or 8); 0 for a value outside 0..STRAND_NUM_TYPES-1. */
size_t strand_datatype_size(strand_datatype_t type);

/* "int8", "uint8", "int32", "uint32", "int64", "uint64", "float16", "float32", "float64",
 * "bfloat16", "fp8e4m3", "fp8e5m2"; "unknown" for anything else. Never NULL. */
const char *strand_datatype_name(strand_datatype_t type);

/* "sum", "prod", "max", "min", "avg"; "unknown" otherwise. Never NULL. */
const char *strand_redop_name(strand_redop_t op);

/* True for every datatype 0..11 with SUM, PROD, MAX, MIN; false otherwise (AVG, dynamic ops). */
bool strand_reduce_supported(strand_datatype_t type, strand_redop_t op);

/* dst[i] = op(dst[i], src[i]) for i < count. dst and src must not overlap unless dst == src.
 * STRAND_SUCCESS; STRAND_INVALID_ARGUMENT for an unsupported type/op, NULL buffers with count > 0,
 * or partially overlapping buffers (nothing is written then). */
strand_result_t strand_reduce(strand_datatype_t type, strand_redop_t op, void *dst,
                              const void *src, size_t count);

/* out[i] = op(a[i], b[i]). out may be exactly a or b (in-place), a may equal b; any other overlap
 * of out with a or b is STRAND_INVALID_ARGUMENT. Otherwise as strand_reduce. */
strand_result_t strand_reduce3(strand_datatype_t type, strand_redop_t op, void *out, const void *a,
                               const void *b, size_t count);

/* Small-float conversions (see the rules above). The *_to_float directions are exact. The double
 * versions round directly from double (not via float, which could round twice). */
float strand_half_to_float(uint16_t h);
uint16_t strand_float_to_half(float f);
uint16_t strand_double_to_half(double d);

float strand_bf16_to_float(uint16_t b);
uint16_t strand_float_to_bf16(float f);
uint16_t strand_double_to_bf16(double d);

float strand_e4m3_to_float(uint8_t v);
uint8_t strand_float_to_e4m3(float f);
uint8_t strand_double_to_e4m3(double d);

float strand_e5m2_to_float(uint8_t v);
uint8_t strand_float_to_e5m2(float f);
uint8_t strand_double_to_e5m2(double d);

/* Element `index` of a buffer of `type`, as a double (exact except int64/uint64 beyond 2^53).
 * Returns NaN for an unknown type. */
double strand_datatype_load(strand_datatype_t type, const void *buf, size_t index);

/* Store `value` into element `index`: floating types round to nearest even (rules above); integer
 * types round to nearest (ties to even) and saturate to the type's range, NaN stores 0. Unknown
 * types store nothing. */
void strand_datatype_store(strand_datatype_t type, void *buf, size_t index, double value);

#ifdef __cplusplus
}
#endif

#endif
