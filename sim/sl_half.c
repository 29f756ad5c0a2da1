/*
 * sl_half.c: the bulk f16 conversion and the trainer's NaN variants of sl_half.h.
 */
#include "sl_half.h"

#include <immintrin.h>
#include <string.h>

void sl_half_f16_to_f32_n(const uint16_t *in, float *out, size_t n)
{
    size_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(out + i, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(in + i))));
    for (; i < n; i++) out[i] = _cvtsh_ss(in[i]);
}

uint16_t sl_half_f32_to_f16_canonical_nan(float f)
{
    uint32_t x;
    memcpy(&x, &f, 4);
    if ((x & 0x7fffffffu) > 0x7f800000u) return (uint16_t)(((x >> 16) & 0x8000u) | 0x7e00u);
    return sl_half_f32_to_f16(f);
}

float sl_half_f16_to_f32_keep_nan(uint16_t h)
{
    if ((h & 0x7c00u) == 0x7c00u && (h & 0x03ffu)) {
        uint32_t x = (uint32_t)(h & 0x8000u) << 16 | 0x7f800000u | (uint32_t)(h & 0x03ffu) << 13;
        float f;
        memcpy(&f, &x, 4);
        return f;
    }
    return sl_half_f16_to_f32(h);
}
