/*
 * sl_train_elem.h: the trainer's per-element and per-row arithmetic, written once for both
 * backends: sl_train.c (the CPU, inside its OpenMP/SIMD loops) and sl_train_gpu.c (inside its
 * kernels, compiled by nvcc as host-and-device functions or by the C compiler for cuda-emu). Same
 * operations in the same order, so the two backends differ only where their sums are ordered
 * differently (matrix products, chunked reductions), never here.
 */
#ifndef SL_TRAIN_ELEM_H
#define SL_TRAIN_ELEM_H

#include <math.h>
#include <stdint.h>

#ifdef __CUDACC__
#define SL_ELEM static inline __host__ __device__
#else
#define SL_ELEM static inline
#endif
/* The comparisons of tanh's clamp only vectorise without trapping-math (no FP exception flags are
 * ever read here): the tanh-based functions and the loops that call them (gelu_forward and
 * gelu_backward in sl_train.c) carry this attribute, so that they inline there. */
#if defined(__GNUC__) && !defined(__clang__) && !defined(__CUDACC__)
#define SL_VECTORISE __attribute__((optimize("no-trapping-math")))
#else
#define SL_VECTORISE
#endif
#define SL_ELEM_VEC SL_ELEM SL_VECTORISE

#define SL_GELU_SCALE 0.7978845608028654f /* sqrt(2/pi) */

/* tanh through a branch-free expf (Cephes' polynomial on a Cody-Waite reduced argument, round to
 * nearest by the 1.5*2^23 trick) so that the GELU loops vectorise; libm's tanhf made GELU a fifth of
 * the step time. Absolute error ~1e-7, the same order as float rounding of the GELU itself (the
 * gradient test compares against a double reference). */
SL_ELEM_VEC float sl_tanh_fast(float u)
{
    float x = 2.0f * u;
    x = x < -87.0f ? -87.0f : (x > 87.0f ? 87.0f : x);
    float n = (x * 1.44269504088896341f + 12582912.0f) - 12582912.0f;
    float r = x - n * 0.693359375f + n * 2.12194440e-4f;
    float p = 1.9875691500e-4f;
    p = p * r + 1.3981999507e-3f;
    p = p * r + 8.3334519073e-3f;
    p = p * r + 4.1665795894e-2f;
    p = p * r + 1.6666665459e-1f;
    p = p * r + 5.0000001201e-1f;
    p = p * r * r + r + 1.0f;
    union {
        uint32_t i;
        float f;
    } sc;
    sc.i = (uint32_t)((int32_t)n + 127) << 23;
    float e = p * sc.f; /* exp(2u) */
    return 1.0f - 2.0f / (1.0f + e);
}

/* GELU in its tanh form, and its derivative. */
SL_ELEM_VEC float sl_gelu(float x)
{
    return 0.5f * x * (1.0f + sl_tanh_fast(SL_GELU_SCALE * (x + 0.044715f * x * x * x)));
}

SL_ELEM_VEC float sl_gelu_grad(float x)
{
    float th = sl_tanh_fast(SL_GELU_SCALE * (x + 0.044715f * x * x * x));
    float sech2 = 1.0f - th * th;
    return 0.5f * (1.0f + th) + 0.5f * x * sech2 * SL_GELU_SCALE * (1.0f + 3.0f * 0.044715f * x * x);
}

/* Row t of a (T, T) score matrix: causal softmax in place (entries 0..t), zero above the diagonal. */
SL_ELEM void sl_softmax_causal_row(float *a, int t, int T)
{
    float maxv = a[0];
    for (int t2 = 1; t2 <= t; t2++)
        if (a[t2] > maxv) maxv = a[t2];
    float sum = 0;
    for (int t2 = 0; t2 <= t; t2++) {
        a[t2] = expf(a[t2] - maxv);
        sum += a[t2];
    }
    float inv = 1.0f / sum;
    for (int t2 = 0; t2 <= t; t2++) a[t2] *= inv;
    for (int t2 = t + 1; t2 < T; t2++) a[t2] = 0;
}

/* Its backward: g (the gradient of the row's output, in place) becomes dP_j = S_j (g_j - sum_k S_k g_k). */
SL_ELEM void sl_softmax_causal_row_bwd(float *g, const float *a, int t, int T)
{
    float dot = 0;
    for (int t2 = 0; t2 <= t; t2++) dot += a[t2] * g[t2];
    for (int t2 = 0; t2 <= t; t2++) g[t2] = a[t2] * (g[t2] - dot);
    for (int t2 = t + 1; t2 < T; t2++) g[t2] = 0;
}

/* One AdamW update of one parameter (c1, c2: the bias corrections 1 - beta^t; wd 0 where the tensor
 * does not decay). */
SL_ELEM void sl_adamw_elem(float *w, float g, float *m, float *v, float b1, float b2, float eps, float c1, float c2,
                           float lr, float wd)
{
    float mi = b1 * *m + (1.0f - b1) * g;
    float vi = b2 * *v + (1.0f - b2) * g * g;
    *m = mi;
    *v = vi;
    float mhat = mi / c1, vhat = vi / c2;
    *w -= lr * (mhat / (sqrtf(vhat) + eps) + wd * *w);
}

#endif
