/* stream.h: the STREAM-like pass of tests/bench/bench_engine.c (every OpenMP thread sums its static
 * share of n floats in four 8-lane sums), for the experiments here. */
#include <immintrin.h>
#include <time.h>
static double stream_now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + 1e-9 * t.tv_nsec;
}
/* Seconds for one pass over a[0..n), n a multiple of 32, a 32-byte aligned; the sum goes to *sink. */
static double stream_pass(const float *a, size_t n, double *sink)
{
    double t0 = stream_now(), total = 0;
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
    return stream_now() - t0;
}
