/*
 * stream_pass.h: the STREAM-like read pass that bench_engine's bandwidth figures divide by (every
 * OpenMP thread sums its static share of n floats in four 8-lane sums), in one place for the
 * benchmark and for the experiments in tests/bench/results/ that measure against it.
 */
#ifndef SL_BENCH_STREAM_PASS_H
#define SL_BENCH_STREAM_PASS_H
#include <immintrin.h>
#include <stddef.h>

#include "sl_common.h"

/* Seconds for one pass summing n floats of a (n a multiple of 32, a 32-byte aligned) with every
 * OpenMP thread (4 independent 8-lane sums per thread, aligned loads); the sum goes to *sink. */
static inline double stream_pass(const float *a, size_t n, double *sink)
{
    double t0 = sl_now_s(), total = 0;
#pragma omp parallel reduction(+ : total)
    {
        __m256 s0 = _mm256_setzero_ps(), s1 = s0, s2 = s0, s3 = s0;
#pragma omp for schedule(static)
        for (size_t i = 0; i < n; i += 32) {
            s0 = _mm256_add_ps(s0, _mm256_load_ps(a + i));
            s1 = _mm256_add_ps(s1, _mm256_load_ps(a + i + 8));
            s2 = _mm256_add_ps(s2, _mm256_load_ps(a + i + 16));
            s3 = _mm256_add_ps(s3, _mm256_load_ps(a + i + 24));
        }
        __m256 s = _mm256_add_ps(_mm256_add_ps(s0, s1), _mm256_add_ps(s2, s3));
        float f[8];
        _mm256_storeu_ps(f, s);
        for (int k = 0; k < 8; k++) total += f[k];
    }
    *sink += total;
    return sl_now_s() - t0;
}

#endif
