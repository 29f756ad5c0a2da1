/*
 * sl_kern.c: multi-token matmul streaming each weight row once (AVX2/FMA/F16C). See sl_kern.h.
 */
#include "sl_kern.h"

#include <immintrin.h>
#include <omp.h>
#include <stdint.h>
#include <string.h>

float sl_f16_to_f32(uint16_t h)
{
    return _cvtsh_ss(h);
}

uint16_t sl_f32_to_f16(float f)
{
    return _cvtss_sh(f, _MM_FROUND_TO_NEAREST_INT);
}

float sl_bf16_to_f32(uint16_t h)
{
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

uint16_t sl_f32_to_bf16(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    if ((u & 0x7f800000u) == 0x7f800000u && (u & 0x007fffffu)) return (uint16_t)((u >> 16) | 0x40); /* quiet NaN */
    u += 0x7fffu + ((u >> 16) & 1u); /* round to nearest even */
    return (uint16_t)(u >> 16);
}

void sl_kern_to_f32(float *dst, const void *src, sl_dtype dt, size_t n)
{
    const unsigned char *s = src;
    if (dt == SL_DT_F32) {
        memcpy(dst, src, n * 4);
        return;
    }
    for (size_t i = 0; i < n; i++) {
        uint16_t h;
        memcpy(&h, s + 2 * i, 2);
        dst[i] = dt == SL_DT_F16 ? sl_f16_to_f32(h) : sl_bf16_to_f32(h);
    }
}

void sl_kern_from_f32(void *dst, const float *src, sl_dtype dt, size_t n)
{
    unsigned char *d = dst;
    if (dt == SL_DT_F32) {
        memcpy(dst, src, n * 4);
        return;
    }
    for (size_t i = 0; i < n; i++) {
        uint16_t h = dt == SL_DT_F16 ? sl_f32_to_f16(src[i]) : sl_f32_to_bf16(src[i]);
        memcpy(d + 2 * i, &h, 2);
    }
}

/* Eight weights from element k of a row, as float32. */
static inline __attribute__((always_inline)) __m256 load8(const unsigned char *row, size_t k, sl_dtype dt)
{
    if (dt == SL_DT_F32) return _mm256_loadu_ps((const float *)(const void *)(row + 4 * k));
    __m128i h = _mm_loadu_si128((const __m128i *)(const void *)(row + 2 * k));
    if (dt == SL_DT_F16) return _mm256_cvtph_ps(h);
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
}

static inline __attribute__((always_inline)) float load1(const unsigned char *row, size_t k, sl_dtype dt)
{
    if (dt == SL_DT_F32) {
        float f;
        memcpy(&f, row + 4 * k, 4);
        return f;
    }
    uint16_t h;
    memcpy(&h, row + 2 * k, 2);
    return dt == SL_DT_F16 ? sl_f16_to_f32(h) : sl_bf16_to_f32(h);
}

/* The fixed horizontal sum: ((l0+l4)+(l2+l6)) + ((l1+l5)+(l3+l7)). */
static inline __attribute__((always_inline)) float hsum8(__m256 v)
{
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

/* Software-prefetch distance. At n = 1 it changes nothing measurable; at n = 3..5 on the 2-core
 * machine 4 KiB ahead brought t(n)/t(1) on a 300 MB matrix from 1.14-1.29 to 1.00-1.14 (shorter
 * distances, 0.5-2 KiB, helped less). */
#define SL_KERN_PREFETCH 4096

/* One output row o for T tokens (starting at token t0), T in {1, 2, 3}. Every output is summed in
 * one fixed order, whatever T, the token count or the thread count: four 8-lane accumulators
 * take the 32-element blocks of the row in turn (accumulator j gets elements 32b + 8j .. +7);
 * the last one to three full 8-element groups go to accumulators 0, 1, 2; then
 * (a0 + a1) + (a2 + a3), the fixed horizontal sum, the scalar tail, the bias. So scoring n tokens
 * in one call gives the bits of n single-token calls.
 * The row is read as one sequential stream (4 x 32 bytes per step for f32): on a two-core VM
 * this reads ~25% faster than interleaving four rows, whose four streams the hardware prefetcher
 * follows less well (tests/bench/bench_engine.c measures the kernel against cblas_sgemv). The
 * 4T accumulators and a weight vector fit in the 16 ymm registers; inputs are loaded from L1.
 * Software prefetch: see SL_KERN_PREFETCH. */
static inline __attribute__((always_inline)) void block(float *y, const float *x, const unsigned char *row,
                                                         sl_dtype dt, const float *bias, size_t in, size_t out,
                                                         size_t o, size_t t0, int T, int add)
{
    const size_t k32 = in & ~(size_t)31, k8 = in & ~(size_t)7;
    __m256 acc[3][4];
#pragma GCC unroll 3
    for (int t = 0; t < T; t++)
#pragma GCC unroll 4
        for (int j = 0; j < 4; j++) acc[t][j] = _mm256_setzero_ps();
    const size_t esz = sl_dtype_size(dt);
    for (size_t k = 0; k < k32; k += 32) {
        /* The lines SL_KERN_PREFETCH bytes ahead (into the next rows at a row's end; a prefetch
         * past the matrix never faults): with several tokens the core computes long enough per
         * line that the hardware prefetcher alone leaves memory idle. */
        _mm_prefetch((const char *)row + k * esz + SL_KERN_PREFETCH, _MM_HINT_T0);
        if (esz == 4) _mm_prefetch((const char *)row + k * esz + SL_KERN_PREFETCH + 64, _MM_HINT_T0);
#pragma GCC unroll 4
        for (int j = 0; j < 4; j++) {
            const __m256 w = load8(row, k + 8 * (size_t)j, dt);
#pragma GCC unroll 3
            for (int t = 0; t < T; t++)
                acc[t][j] = _mm256_fmadd_ps(w, _mm256_loadu_ps(x + (t0 + t) * in + k + 8 * (size_t)j), acc[t][j]);
        }
    }
    for (size_t k = k32, j = 0; k < k8; k += 8, j++) {
        const __m256 w = load8(row, k, dt);
#pragma GCC unroll 3
        for (int t = 0; t < T; t++) acc[t][j] = _mm256_fmadd_ps(w, _mm256_loadu_ps(x + (t0 + t) * in + k), acc[t][j]);
    }
#pragma GCC unroll 3
    for (int t = 0; t < T; t++) {
        float s = hsum8(_mm256_add_ps(_mm256_add_ps(acc[t][0], acc[t][1]), _mm256_add_ps(acc[t][2], acc[t][3])));
        const float *xt = x + (t0 + t) * in;
        for (size_t k = k8; k < in; k++) s += load1(row, k, dt) * xt[k];
        if (bias) s += bias[o];
        if (add) y[(t0 + t) * out + o] += s;
        else y[(t0 + t) * out + o] = s;
    }
}

/* All n tokens for row o: blocks of three tokens, then two or one. */
static inline __attribute__((always_inline)) void rows(float *y, const float *x, const unsigned char *W,
                                                        sl_dtype dt, const float *bias, size_t n, size_t in,
                                                        size_t out, size_t o, int add)
{
    const unsigned char *row = W + o * in * sl_dtype_size(dt);
    size_t t = 0;
    for (; t + 3 <= n; t += 3) block(y, x, row, dt, bias, in, out, o, t, 3, add);
    if (n - t == 2) block(y, x, row, dt, bias, in, out, o, t, 2, add);
    else if (n - t == 1) block(y, x, row, dt, bias, in, out, o, t, 1, add);
}

/* Unit u: four consecutive rows (or the last few) of one matrix, all tokens. */
static inline __attribute__((always_inline)) void unit(const sl_kern_mm *mm, const size_t *first, const float *x,
                                                        size_t n, size_t in, long u, sl_dtype dt)
{
    size_t i = 0;
    while ((size_t)u >= first[i + 1]) i++;
    const size_t o = ((size_t)u - first[i]) * 4, out = mm[i].out, end = o + 4 < out ? o + 4 : out;
    for (size_t r = o; r < end; r++) rows(mm[i].y, x, mm[i].w, dt, mm[i].bias, n, in, out, r, mm[i].add);
}

/* One function per dtype, with the dtype a literal inside the OpenMP region, so that the weight
 * conversion is resolved at compile time in the outlined loop body. The work is cut into units of
 * four rows of one matrix (a matrix whose row count is not a multiple of four ends with a shorter
 * unit); each output is computed in the same order whichever unit or thread has it. Called
 * inside a parallel region (the model's forward pass), the units are work-shared among that
 * team; otherwise the call opens a region of its own. */
#define SL_KERN_DEFINE_MATMUL(NAME, DT)                                                                         \
    static void NAME(const sl_kern_mm *mm, size_t count, const float *x, size_t n, size_t in)                   \
    {                                                                                                           \
        size_t first[SL_KERN_MAX_MULTI + 1], work = 0;                                                          \
        first[0] = 0;                                                                                           \
        for (size_t i = 0; i < count; i++) {                                                                    \
            first[i + 1] = first[i] + (mm[i].out + 3) / 4;                                                      \
            work += mm[i].out * in;                                                                             \
        }                                                                                                       \
        const long units = (long)first[count];                                                                 \
        const int par = work >= (1u << 20); /* below ~0.2 ms: not worth waking threads */                    \
        if (omp_in_parallel()) {                                                                                \
            _Pragma("omp for schedule(static)")                                                                 \
            for (long u = 0; u < units; u++) unit(mm, first, x, n, in, u, DT);                                  \
        } else {                                                                                                \
            _Pragma("omp parallel for schedule(static) if (par)")                                               \
            for (long u = 0; u < units; u++) unit(mm, first, x, n, in, u, DT);                                  \
        }                                                                                                       \
    }
SL_KERN_DEFINE_MATMUL(matmul_f32, SL_DT_F32)
SL_KERN_DEFINE_MATMUL(matmul_f16, SL_DT_F16)
SL_KERN_DEFINE_MATMUL(matmul_bf16, SL_DT_BF16)

void sl_kern_matmul_multi(const sl_kern_mm *mm, size_t count, const float *x, size_t n, size_t in)
{
    /* All matrices of one call share a dtype (checked by the caller); mixed calls are split. */
    size_t i = 0;
    while (i < count) {
        size_t j = i + 1;
        while (j < count && j - i < SL_KERN_MAX_MULTI && mm[j].dt == mm[i].dt) j++;
        switch (mm[i].dt) {
        case SL_DT_F32: matmul_f32(mm + i, j - i, x, n, in); break;
        case SL_DT_F16: matmul_f16(mm + i, j - i, x, n, in); break;
        case SL_DT_BF16: matmul_bf16(mm + i, j - i, x, n, in); break;
        case SL_DT_I32: break; /* never a weight: sl_model_open refuses it */
        }
        i = j;
    }
}

void sl_kern_matmul(float *y, const float *x, const void *W, sl_dtype dt, const float *bias, size_t n, size_t in,
                    size_t out)
{
    const sl_kern_mm mm = {y, W, dt, bias, out, 0};
    sl_kern_matmul_multi(&mm, 1, x, n, in);
}

/* ---- attention and activation helpers (vectorised, each output in a fixed order) ---- */

float sl_kern_dot(const float *a, const float *b, size_t n)
{
    const size_t n8 = n & ~(size_t)7;
    __m256 acc = _mm256_setzero_ps();
    for (size_t k = 0; k < n8; k += 8) acc = _mm256_fmadd_ps(_mm256_loadu_ps(a + k), _mm256_loadu_ps(b + k), acc);
    float s = hsum8(acc);
    for (size_t k = n8; k < n; k++) s += a[k] * b[k];
    return s;
}

void sl_kern_axpy(float *y, float a, const float *x, size_t n)
{
    const size_t n8 = n & ~(size_t)7;
    const __m256 av = _mm256_set1_ps(a);
    for (size_t k = 0; k < n8; k += 8)
        _mm256_storeu_ps(y + k, _mm256_fmadd_ps(av, _mm256_loadu_ps(x + k), _mm256_loadu_ps(y + k)));
    for (size_t k = n8; k < n; k++) y[k] += a * x[k];
}

/* exp of 8 floats: Cephes' expf (range reduction by ln 2 in two parts, degree-5 polynomial),
 * about 2 ulp over [-87, 88]; inputs are clamped there, so exp(-inf-ish) is ~1e-38, not 0. */
static inline __m256 exp8(__m256 x)
{
    x = _mm256_min_ps(_mm256_max_ps(x, _mm256_set1_ps(-87.3365f)), _mm256_set1_ps(88.3762626647949f));
    __m256 fx = _mm256_floor_ps(_mm256_fmadd_ps(x, _mm256_set1_ps(1.44269504088896341f), _mm256_set1_ps(0.5f)));
    x = _mm256_fnmadd_ps(fx, _mm256_set1_ps(0.693359375f), x);
    x = _mm256_fnmadd_ps(fx, _mm256_set1_ps(-2.12194440e-4f), x);
    __m256 y = _mm256_set1_ps(1.9875691500e-4f);
    y = _mm256_fmadd_ps(y, x, _mm256_set1_ps(1.3981999507e-3f));
    y = _mm256_fmadd_ps(y, x, _mm256_set1_ps(8.3334519073e-3f));
    y = _mm256_fmadd_ps(y, x, _mm256_set1_ps(4.1665795894e-2f));
    y = _mm256_fmadd_ps(y, x, _mm256_set1_ps(1.6666665459e-1f));
    y = _mm256_fmadd_ps(y, x, _mm256_set1_ps(5.0000001201e-1f));
    y = _mm256_fmadd_ps(y, _mm256_mul_ps(x, x), _mm256_add_ps(x, _mm256_set1_ps(1.0f)));
    __m256i e = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(fx), _mm256_set1_epi32(127)), 23);
    return _mm256_mul_ps(y, _mm256_castsi256_ps(e));
}

/* 1 / (1 + exp(-z)), exact division. */
static inline __m256 sigmoid8(__m256 z)
{
    const __m256 one = _mm256_set1_ps(1.0f);
    return _mm256_div_ps(one, _mm256_add_ps(one, exp8(_mm256_sub_ps(_mm256_setzero_ps(), z))));
}

/* GELU, tanh form, as x * sigmoid(2y) with y = sqrt(2/pi) (x + 0.044715 x^3): the same function
 * as 0.5 x (1 + tanh y), written without the cancellation of 1 + tanh y for negative y. */
static inline __m256 gelu8(__m256 x)
{
    const __m256 x3 = _mm256_mul_ps(_mm256_mul_ps(x, x), x);
    const __m256 y2 = _mm256_mul_ps(_mm256_set1_ps(2.0f * 0.7978845608028654f),
                                    _mm256_fmadd_ps(_mm256_set1_ps(0.044715f), x3, x));
    return _mm256_mul_ps(x, sigmoid8(y2));
}

/* Loads n < 8 floats into a zero-padded vector, so that a row's tail goes through the same
 * vector code as its body (one formula for every element). */
static inline __m256 load_tail(const float *p, size_t n)
{
    float buf[8] = {0};
    memcpy(buf, p, n * sizeof(float));
    return _mm256_loadu_ps(buf);
}

static inline void store_tail(float *p, __m256 v, size_t n)
{
    float buf[8];
    _mm256_storeu_ps(buf, v);
    memcpy(p, buf, n * sizeof(float));
}

void sl_kern_gelu(float *x, size_t n)
{
    const size_t n8 = n & ~(size_t)7;
    for (size_t k = 0; k < n8; k += 8) _mm256_storeu_ps(x + k, gelu8(_mm256_loadu_ps(x + k)));
    if (n8 < n) store_tail(x + n8, gelu8(load_tail(x + n8, n - n8)), n - n8);
}

void sl_kern_silu_mul(float *up, const float *gate, size_t n)
{
    const size_t n8 = n & ~(size_t)7;
    for (size_t k = 0; k < n8; k += 8) {
        const __m256 g = _mm256_loadu_ps(gate + k);
        _mm256_storeu_ps(up + k, _mm256_mul_ps(_mm256_loadu_ps(up + k), _mm256_mul_ps(g, sigmoid8(g))));
    }
    if (n8 < n) {
        const __m256 g = load_tail(gate + n8, n - n8);
        store_tail(up + n8, _mm256_mul_ps(load_tail(up + n8, n - n8), _mm256_mul_ps(g, sigmoid8(g))), n - n8);
    }
}
