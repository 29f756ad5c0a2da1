/*
 * sl_half.h: the one codec between float32 and the two 16-bit floats speclab stores: IEEE binary16
 * ("f16": model weights, float16 log distributions) and bfloat16 ("bf16": model weights).
 *
 * float32 -> 16 bits rounds to nearest, ties to even; overflow gives infinity, values below half
 * the smallest subnormal give (signed) zero. 16 bits -> float32 is exact. f16 goes through the
 * F16C instructions (part of the build's x86-64-v3 baseline), bf16 through integer shifts. NaN:
 * F16C quiets a NaN and keeps the top of its payload (f32 -> f16: sign | 0x7e00 | mantissa >> 13;
 * f16 -> f32: sign | 0x7fc00000 | mantissa << 13); bf16 likewise (sign | 0x7fc0 | mantissa >> 16).
 * tests/test_half.c checks all of it against a naive reference on every f16 and bf16 value and on
 * millions of floats chosen at the rounding boundaries.
 *
 * The scalar conversions are inline because the engine's kernels call them per element.
 */
#ifndef SL_HALF_H
#define SL_HALF_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* The F16C instructions through the compiler builtins that <immintrin.h>'s _cvtsh_ss and
 * _cvtss_sh are made of (gcc and clang alike): this header is in nearly every file, and
 * <immintrin.h> alone costs gcc ~1.5 s per file on a slow core (about 4 minutes of CPU per build
 * of the project). Rounding argument 0: to nearest, ties to even. */
typedef float sl_half_v4sf __attribute__((vector_size(16)));
typedef short sl_half_v8hi __attribute__((vector_size(16)));

static inline float sl_half_f16_to_f32(uint16_t h)
{
    const sl_half_v8hi v = {(short)h, 0, 0, 0, 0, 0, 0, 0};
    return __builtin_ia32_vcvtph2ps(v)[0];
}

static inline uint16_t sl_half_f32_to_f16(float f)
{
    const sl_half_v4sf v = {f, 0, 0, 0};
    return (uint16_t)__builtin_ia32_vcvtps2ph(v, 0)[0];
}

static inline float sl_half_bf16_to_f32(uint16_t h)
{
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

static inline uint16_t sl_half_f32_to_bf16(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    if ((u & 0x7f800000u) == 0x7f800000u && (u & 0x007fffffu)) return (uint16_t)((u >> 16) | 0x40); /* quiet NaN */
    u += 0x7fffu + ((u >> 16) & 1u); /* round to nearest even */
    return (uint16_t)(u >> 16);
}

/* n f16 values to float32, eight at a time (F16C); the same results as sl_half_f16_to_f32. */
void sl_half_f16_to_f32_n(const uint16_t *in /* (n) */, float *out /* (n) */, size_t n);

/* The trainer's NaN rule (models/train: models it exports as f16, teachers it reads back), kept so
 * that its behaviour does not change: equal to sl_half_f32_to_f16 / sl_half_f16_to_f32 on every non-NaN value, but a NaN
 * becomes the canonical quiet NaN sign | 0x7e00 (payload dropped) on the way to f16, and an f16
 * NaN widens with its payload and signalling bit as they are (sign | 0x7f800000 | mantissa << 13). */
uint16_t sl_half_f32_to_f16_canonical_nan(float f);
float sl_half_f16_to_f32_keep_nan(uint16_t h);

#endif
