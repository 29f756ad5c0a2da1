/*
 * sl_kern_mm.h: the body of the multi-token matmul (see sl_kern.h), written once and compiled
 * twice: by sl_kern.c for AVX2, and by sl_kern_wide.c with AVX-512 enabled; sl_kern.c picks one
 * at run time. Both compute every output with the same multiply-adds on the same lanes in the
 * same order, so they give the same bits:
 *  - block8 (AVX2): four 8-lane accumulators per token in 16 ymm registers, so a pass over a
 *    weight row takes at most 3 tokens (12 accumulators + a weight vector);
 *  - block16 (AVX-512): the same four 8-lane accumulators held as two 16-lane ones (a0|a1, a2|a3),
 *    so one 512-bit load and multiply-add do the work of two 256-bit ones, and 32 registers hold
 *    the accumulators of 8 tokens: verification of up to 8 tokens reads each row in one pass;
 *    passes of 2 to 4 tokens take four rows at a time, sharing each input load among them;
 *  - colpass (both builds, packed weights, sl_kern_pack): 32 rows' outputs held across the
 *    register lanes, each converted weight vector multiplied by a broadcast input; the partial
 *    sums of the row-major order are kept apart by lane of the 32-element block and added up in
 *    finish()'s order, so the bits are the same again, with no horizontal sum per output.
 * Before including the template part, define SL_KERN_BLOCK (block8 or block16), SL_KERN_TMAX
 * (its tokens per pass), SL_KERN_ROWS(T) (rows per pass of T tokens: 1, or a size that divides
 * the unit of four) and SL_KERN_NAME(f) (appends the build's suffix). Internal to the kernel;
 * nothing else includes it.
 */
#include <immintrin.h>
#include <omp.h>
#include <stdint.h>
#include <string.h>

#include "sl_kern.h"

#ifndef SL_KERN_MM_HELPERS
#define SL_KERN_MM_HELPERS

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
    return dt == SL_DT_F16 ? sl_half_f16_to_f32(h) : sl_half_bf16_to_f32(h);
}

/* The fixed horizontal sum: ((l0+l4)+(l2+l6)) + ((l1+l5)+(l3+l7)). */
static inline __attribute__((always_inline)) float hsum8(__m256 v)
{
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

/* Software-prefetch distance, in bytes of the matrix ahead of what is being read, rounded up to
 * whole units of four rows (see unit()): while a pass reads element k of its rows, it prefetches
 * element k of the rows that many units further on, one line per row at every 32 elements (a
 * prefetch past the matrix never faults). With several tokens the core computes long enough per
 * line that the hardware prefetcher alone leaves memory idle; and a unit of four rows read side
 * by side (passes of 2 to 4 tokens), or chunk by chunk (large inputs), is four streams a row
 * apart, which the hardware prefetcher follows poorly. The rule "same element, later units"
 * holds for all three ways of reading. Measured ad hoc (f16 matrices of 32 M elements from
 * memory, one thread; the previous rule prefetched 4 KiB ahead along the row, or the row's next
 * chunk in the chunked path):
 *  - 2-core Zen 5 VM: in = 2048, n = 5 (chunked): 4.75 -> 2.75 ms; n = 1 at in = 512, 768, 2048:
 *    1.56, 1.54, 1.53 -> 1.15, 1.15, 1.16 ms; the shipped target's t(1) 1.45 -> 1.17 ms and t(5)
 *    2.81 -> 2.22 ms (one thread), t(1) 0.73 -> 0.59 ms, t(5) 1.53 -> 1.31 ms (two); 8 KiB and
 *    32 KiB did no better than 16;
 *  - the accelerator machine's Xeon (768 MB matrices, its L3 being 300 MB): in = 2048, n = 5:
 *    121 -> 82 ms; in = 768, n = 3: 91 -> 73 ms; n = 1 unchanged within its noise (~5%). */
#define SL_KERN_PREFETCH 16384
/* One token on AVX2 (colpass with T = 1, 16-bit weights: one line per step) prefetches 1 KiB ahead
 * instead. A matmul call's thread starts on its share cold: the first SL_KERN_PREFETCH bytes of
 * every share are read before any prefetch reaches them, and a decode makes ~50-70 calls per token
 * (the gain below is in those starts: one call over the same bytes is as fast either way). On the
 * 2-core Zen 3 VM (ad hoc, the two distances alternated call by call in one process, 200-300 pairs
 * each; tests/bench/results/f16_decode_prefetch_zen3/): single-token decode of GPT-2-124M f16
 * 0.962-0.982x and of the shipped target 0.978-0.986x the time at 16 KiB (medians of the pair
 * ratios, 8 of 8 below 1 at one and two threads); 52 matrices of 3072 x 768, one call each: 80%
 * -> 85% (one thread) and 79% -> 83% (two) of an interleaved STREAM-like pass, one call over all of
 * them 86% either way; a bare f16 stream with the same instructions 90-95% at 1 KiB, 78-89% at
 * 16 KiB, 75-85% without the prefetch. The AVX-512 build prefetches 8 KiB ahead instead: on the
 * accelerator machine's Xeon (GPT-2-774M f16, 1.5 GB; 1, 2 and 16 threads) 1 KiB took 1.09-1.13x
 * the time of 16 KiB (tests/bench/results/f16_decode_prefetch_zen3/device_xeon/), 8 KiB 0.97-1.03x
 * (median of six 0.98) and 4 KiB 0.97-1.00x (tests/bench/results/draft_team_zen5/device_xeon/);
 * on the 2-core Zen 5 VM, 8 KiB took 0.95-0.99x the time of 16 KiB at one thread and 0.99-1.01x
 * at two (GPT-2-124M f16 and the shipped target, two rounds, medians of pair ratios), where 4 KiB
 * ranged 0.97-1.08x (tests/bench/results/draft_team_zen5/prefetch_one_zen5.txt). The best
 * distance is the CPU's: the AVX2 build's 1 KiB rests on the Zen 3 VM alone. One token of f32
 * weights takes SL_KERN_PREFETCH_ONE as well (AVX-512 only: the AVX2 build leaves that stream to
 * the hardware prefetcher, see colpass): on the Zen 5 VM GPT-2-124M f32 decode took 0.956-0.959x
 * the time of 16 KiB at one thread and 0.950-0.996x at two (4 KiB 0.960x, 2 KiB 0.99x; medians of
 * 60-100 call-by-call pair ratios; tests/bench/results/literal_strides_zen5/prefetch_f32.txt), and
 * on the accelerator machine's Xeon (a 1.4 GB f32 model) 0.973-0.979x at one thread, 0.982-0.985x
 * at two, 0.999-1.016x at sixteen (that folder's device_xeon/). */
#define SL_KERN_PREFETCH_ONE (CV_W == 8 ? 1024 : 8192)

/* The lines of one row's 32-element block at pf: one for 16-bit weights, two for f32. Into L1
 * (T0), or into L2 only (T1) for colpass's passes of several sweeps (see there). */
static inline __attribute__((always_inline)) void prefetch_ahead_hint(const unsigned char *pf, sl_dtype dt, int l2)
{
    /* dt and l2 are literals in each instance */
    if (l2) {
        _mm_prefetch((const char *)pf, _MM_HINT_T1);
        if (dt == SL_DT_F32) _mm_prefetch((const char *)pf + 64, _MM_HINT_T1);
    } else {
        _mm_prefetch((const char *)pf, _MM_HINT_T0);
        if (dt == SL_DT_F32) _mm_prefetch((const char *)pf + 64, _MM_HINT_T0);
    }
}
static inline __attribute__((always_inline)) void prefetch_ahead(const unsigned char *pf, sl_dtype dt)
{
    prefetch_ahead_hint(pf, dt, 0);
}

/* The part of R consecutive rows one block call works on: elements [k0, k1), multiples of 32 with
 * k1 <= in & ~31. A call that starts at 0 starts from zero accumulators, one that ends at in & ~31
 * finishes the outputs; otherwise the accumulators are carried in carry (row r at carry + r *
 * SL_KERN_TMAX * 32, then (T, 32) floats, 64-byte aligned) to the next call on the rows, with calls
 * for other rows in between (see unit()). Rows are row-major, in elements apart. pf is the address
 * prefetched for the first row's element k0, with the same steps. */
typedef struct {
    size_t k0, k1;
    float *carry;             /* (R, SL_KERN_TMAX, 32) */
    const unsigned char *pf;
} span;

#define SL_KERN_CARRY (SL_KERN_TMAX * 32) /* floats of carry per row */

/* The end of one output: the four 8-lane accumulators take the last one to three full 8-element
 * groups (accumulators 0, 1, 2), then (a0 + a1) + (a2 + a3), the fixed horizontal sum, the scalar
 * tail, the bias. The leftover groups are written out one by one (not a loop indexing a[]), so
 * that the accumulators stay in registers: with the loop, gcc spilled them to the stack for every
 * output, and a pass of 5 tokens over a 512 x 512 f16 matrix in L2 took 28.0 instead of 24.9 us
 * (Zen 5 VM, one thread, best of 7). */
static inline __attribute__((always_inline)) void finish(float *y, const float *xt, const unsigned char *row,
                                                          sl_dtype dt, const float *bias, size_t in, size_t o,
                                                          __m256 a[4], int add)
{
    const size_t k32 = in & ~(size_t)31, k8 = in & ~(size_t)7;
    if (k8 > k32) {
        a[0] = _mm256_fmadd_ps(load8(row, k32, dt), _mm256_loadu_ps(xt + k32), a[0]);
        if (k8 > k32 + 8) a[1] = _mm256_fmadd_ps(load8(row, k32 + 8, dt), _mm256_loadu_ps(xt + k32 + 8), a[1]);
        if (k8 > k32 + 16) a[2] = _mm256_fmadd_ps(load8(row, k32 + 16, dt), _mm256_loadu_ps(xt + k32 + 16), a[2]);
    }
    float s = hsum8(_mm256_add_ps(_mm256_add_ps(a[0], a[1]), _mm256_add_ps(a[2], a[3])));
    for (size_t k = k8; k < in; k++) s += load1(row, k, dt) * xt[k];
    if (bias) s += bias[o];
    if (add) *y += s;
    else *y = s;
}

/* R output rows o .. o + R - 1 (stride bytes apart) for T tokens (starting at token t0),
 * R * T <= 3. Every output is summed in one fixed order, whatever T, R, the token count, the
 * thread count or the build: four 8-lane accumulators take the 32-element blocks of the row in
 * turn (accumulator j gets elements 32b + 8j .. +7), then finish(). So scoring n tokens in one
 * call gives the bits of n single-token calls. Each input vector loaded serves the R rows. The
 * AVX2 build takes R = 1: a row read as one sequential stream (4 x 32 bytes per step for f32) was
 * ~25% faster from memory on a two-core VM than four interleaved rows, whose streams the hardware
 * prefetcher follows less well. Inputs are loaded from L1. */
static inline __attribute__((always_inline)) void block8(float *y, const float *x, const unsigned char *row,
                                                          sl_dtype dt, const float *bias, size_t in, size_t out,
                                                          size_t o, size_t t0, int T, int R, int add, span sp)
{
    const size_t k32 = in & ~(size_t)31, esz = dt == SL_DT_F32 ? 4 : 2, stride = in * esz;
    __m256 acc[2][3][4];
#pragma GCC unroll 2
    for (int r = 0; r < R; r++)
#pragma GCC unroll 3
        for (int t = 0; t < T; t++)
#pragma GCC unroll 4
            for (int j = 0; j < 4; j++)
                acc[r][t][j] = sp.k0 ? _mm256_load_ps(sp.carry + r * SL_KERN_CARRY + 32 * t + 8 * j) : _mm256_setzero_ps();
    for (size_t k = sp.k0; k < sp.k1; k += 32) {
#pragma GCC unroll 2
        for (int r = 0; r < R; r++) prefetch_ahead(sp.pf + r * stride + (k - sp.k0) * esz, dt);
        const unsigned char *wb = row + k * esz;
#pragma GCC unroll 4
        for (int j = 0; j < 4; j++) {
            __m256 w[2];
#pragma GCC unroll 2
            for (int r = 0; r < R; r++) w[r] = load8(wb + r * stride, 8 * (size_t)j, dt);
#pragma GCC unroll 3
            for (int t = 0; t < T; t++) {
                const __m256 xv = _mm256_loadu_ps(x + (t0 + t) * in + k + 8 * (size_t)j);
#pragma GCC unroll 2
                for (int r = 0; r < R; r++) acc[r][t][j] = _mm256_fmadd_ps(w[r], xv, acc[r][t][j]);
            }
        }
    }
    if (sp.k1 < k32) {
#pragma GCC unroll 2
        for (int r = 0; r < R; r++)
#pragma GCC unroll 3
            for (int t = 0; t < T; t++)
#pragma GCC unroll 4
                for (int j = 0; j < 4; j++) _mm256_store_ps(sp.carry + r * SL_KERN_CARRY + 32 * t + 8 * j, acc[r][t][j]);
        return;
    }
#pragma GCC unroll 2
    for (int r = 0; r < R; r++)
#pragma GCC unroll 3
        for (int t = 0; t < T; t++)
            finish(y + (t0 + t) * out + o + r, x + (t0 + t) * in, row + r * stride, dt, bias, in, o + r, acc[r][t],
                   add);
}

#ifdef __AVX512F__
/* Sixteen weights from element k of a row, as float32. */
static inline __attribute__((always_inline)) __m512 load16(const unsigned char *row, size_t k, sl_dtype dt)
{
    if (dt == SL_DT_F32) return _mm512_loadu_ps((const float *)(const void *)(row + 4 * k));
    __m256i h = _mm256_loadu_si256((const __m256i *)(const void *)(row + 2 * k));
    if (dt == SL_DT_F16) return _mm512_cvtph_ps(h);
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
}

/* block8's sums with 16-lane registers, R rows and T tokens, R * T <= 16: acc[r][t][0] holds
 * accumulators 0 and 1 (elements 32b .. 32b + 15), acc[r][t][1] holds 2 and 3, each lane getting
 * the same multiply-adds in the same order as in block8; the halves are split off for finish().
 * The AVX-512 build takes R = 4 for 2 <= T <= 4 where rows are short enough (sl_kern_set_quad_max
 * in sl_kern.h: on AMD, rows of at most 2 KiB) (2 R T accumulators; at T = 4 all 32 registers,
 * a few spilled, still faster): each input vector loaded then feeds four rows' multiply-adds, and
 * each row's weights are converted once per pass as before. Ad hoc, a 512 x 512 f16 matrix in L2,
 * one thread, best of 6 alternated runs: t(2), t(3), t(4) 62.3, 79.9, 98.2 -> 51.6, 65.1, 96.1 us on
 * the 2-core Zen 5 VM, 19.3, 24.0, 28.8 -> 17.0, 21.6, 26.7 us on the accelerator machine's Xeon;
 * the shipped target's whole t(3) 10.99 -> 10.27 ms (one thread), 5.94 -> 5.46 ms (two). T = 1
 * stays one row (four interleaved rows made the shipped target's t(1) ~8% slower from memory),
 * and so do passes of 5..8 tokens: on the Xeon, whose f16 conversion competes with its
 * multiply-adds, one pass of 5 tokens over a row beat 3 + 2 tokens over four rows (32.4 vs 38.4 us).
 * Models keep their matrices packed (colpass below); these row-major passes serve rows whose
 * length is not a multiple of 32 elements, and SL_PACK=0. */
static inline __attribute__((always_inline)) void block16(float *y, const float *x, const unsigned char *row,
                                                           sl_dtype dt, const float *bias, size_t in, size_t out,
                                                           size_t o, size_t t0, int T, int R, int add, span sp)
{
    const size_t k32 = in & ~(size_t)31, esz = dt == SL_DT_F32 ? 4 : 2, stride = in * esz;
    __m512 acc[4][8][2];
#pragma GCC unroll 4
    for (int r = 0; r < R; r++)
#pragma GCC unroll 8
        for (int t = 0; t < T; t++)
#pragma GCC unroll 2
            for (int h = 0; h < 2; h++)
                acc[r][t][h] = sp.k0 ? _mm512_load_ps(sp.carry + r * SL_KERN_CARRY + 32 * t + 16 * h) : _mm512_setzero_ps();
    for (size_t k = sp.k0; k < sp.k1; k += 32) {
#pragma GCC unroll 4
        for (int r = 0; r < R; r++) prefetch_ahead(sp.pf + r * stride + (k - sp.k0) * esz, dt);
        const unsigned char *wb = row + k * esz;
#pragma GCC unroll 2
        for (int h = 0; h < 2; h++) {
            __m512 w[4];
#pragma GCC unroll 4
            for (int r = 0; r < R; r++) w[r] = load16(wb + r * stride, 16 * (size_t)h, dt);
#pragma GCC unroll 8
            for (int t = 0; t < T; t++) {
                const __m512 xv = _mm512_loadu_ps(x + (t0 + t) * in + k + 16 * (size_t)h);
#pragma GCC unroll 4
                for (int r = 0; r < R; r++) acc[r][t][h] = _mm512_fmadd_ps(w[r], xv, acc[r][t][h]);
            }
        }
    }
    if (sp.k1 < k32) {
#pragma GCC unroll 4
        for (int r = 0; r < R; r++)
#pragma GCC unroll 8
            for (int t = 0; t < T; t++)
#pragma GCC unroll 2
                for (int h = 0; h < 2; h++) _mm512_store_ps(sp.carry + r * SL_KERN_CARRY + 32 * t + 16 * h, acc[r][t][h]);
        return;
    }
#pragma GCC unroll 4
    for (int r = 0; r < R; r++)
#pragma GCC unroll 8
        for (int t = 0; t < T; t++) {
            __m256 a[4] = {_mm512_castps512_ps256(acc[r][t][0]),
                           _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(acc[r][t][0]), 1)),
                           _mm512_castps512_ps256(acc[r][t][1]),
                           _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(acc[r][t][1]), 1))};
            finish(y + (t0 + t) * out + o + r, x + (t0 + t) * in, row + r * stride, dt, bias, in, o + r, a, add);
        }
}
#endif

/* In sl_kern.c: this thread's buffer for the transposed inputs (NULL if it cannot have one), and
 * the transposition: xT[(jj * (in / 32) + b) * n + t] = x[t * in + 32 b + SL_KERN_COL_LANE(jj)],
 * the order in which the passes over packed weights broadcast them. */
float *sl_kern_xt_buffer(size_t floats);
int sl_kern_team_claim(sl_kern_team *t, int v, unsigned e, long units, int front, long *a, long *b);
/* The next units [*a, *b) of thread me of a team of T for a call of `units`, *k counting the calls
 * (from 0); 0 when none are left. Without a team state (t NULL), me's static share, once; with
 * one, its own share front to back, then the others' from the back (sl_kern_team_claim). */
static inline int sl_kern_next_units(sl_kern_team *t, int me, int T, unsigned e, long units, int *k, long *a, long *b)
{
    if (!t) {
        if ((*k)++) return 0;
        *a = (long)me * units / T, *b = (long)(me + 1) * units / T;
        return 1; /* an empty share runs no unit */
    }
    for (; *k < T; ++*k)
        if (sl_kern_team_claim(t, (me + *k) % T, e, units, *k == 0, a, b)) return 1;
    return 0;
}
void sl_kern_xt_fill(float *xT, const float *x, size_t n, size_t in);

void sl_kern_mm_run_avx2(const sl_kern_mm *mm, size_t count, const float *x, size_t n, size_t in, size_t quad_max);
void sl_kern_mm_run_wide(const sl_kern_mm *mm, size_t count, const float *x, size_t n, size_t in, size_t quad_max);

#endif /* SL_KERN_MM_HELPERS */

/* One pass of T tokens (from t0) over one span of rows o .. o + R - 1, R = 1 or SL_KERN_ROWS(T): T
 * and R literals in each case, so that each pass shape gets its own unrolled code. */
static inline __attribute__((always_inline)) void pass(float *y, const float *x, const unsigned char *row,
                                                       sl_dtype dt, const float *bias, size_t in, size_t out,
                                                       size_t o, size_t t0, int T, int R, int add, span sp)
{
#define SL_KERN_CASE(TT)                                                                                          \
    case TT:                                                                                                      \
        if (SL_KERN_ROWS(TT) == 4 && R == 4)                                                                     \
            SL_KERN_BLOCK(y, x, row, dt, bias, in, out, o, t0, TT, 4, add, sp);                                  \
        else                                                                                                      \
            SL_KERN_BLOCK(y, x, row, dt, bias, in, out, o, t0, TT, 1, add, sp);                                  \
        break;
    switch (T) {
        SL_KERN_CASE(1)
        SL_KERN_CASE(2)
        SL_KERN_CASE(3)
#if SL_KERN_TMAX >= 8
        SL_KERN_CASE(4)
        SL_KERN_CASE(5)
        SL_KERN_CASE(6)
        SL_KERN_CASE(7)
        SL_KERN_CASE(8)
#endif
    default: break; /* T <= SL_KERN_TMAX by construction */
    }
#undef SL_KERN_CASE
}

/* ---- Passes over packed weights (sl_kern_pack: groups of 32 rows, column-major by lane) ---- */
#ifdef __AVX512F__
typedef __m512 cvec;
#define CV_W 16 /* lanes: rows per vector */
#define CV_LOADW(p, dt) load16((p), 0, (dt))
#define CV_SET1 _mm512_set1_ps
#define CV_ZERO _mm512_setzero_ps
#define CV_FMA _mm512_fmadd_ps
#define CV_ADD _mm512_add_ps
#define CV_LOAD _mm512_load_ps
#define CV_STORE _mm512_store_ps
#define CV_LOADU _mm512_loadu_ps
#define CV_STOREU _mm512_storeu_ps
#define COL_TMAX 8 /* tokens per pass: 2 T accumulators, 2 weight vectors, a broadcast */
#else
typedef __m256 cvec;
#define CV_W 8
#define CV_LOADW(p, dt) load8((p), 0, (dt))
#define CV_SET1 _mm256_set1_ps
#define CV_ZERO _mm256_setzero_ps
#define CV_FMA _mm256_fmadd_ps
#define CV_ADD _mm256_add_ps
#define CV_LOAD _mm256_load_ps
#define CV_STORE _mm256_store_ps
#define CV_LOADU _mm256_loadu_ps
#define CV_STOREU _mm256_storeu_ps
#define COL_TMAX 8 /* in sweeps of up to 3 tokens (see colpass) */
#endif
#define COL_NV (32 / CV_W) /* vectors per group of 32 rows: 2 (AVX-512) or 4 (AVX2) */
#define COL_REGS (CV_W == 16 ? 32 : 16) /* vector registers */

/* One pass of T tokens (from t0) over the 32 rows o .. of a packed group, whose weights start at
 * w. Input element (slot jj, block b, token t) is at xs + jj * sj + b * sb + t * st, or with sj = 0
 * at xs + SL_KERN_COL_LANE(jj) + b * sb + t * st (x read in place). For each slot, the rows' partial
 * sums over the blocks, in order (as the row-major passes sum lane j), in sweeps over the slot's
 * blocks of NV vectors of rows and at most TG tokens each (COL_SWEEP, COL_TG): the slot's blocks
 * (1-4 KiB) stay in L1 from one sweep to the next, so the group is read from memory once and in
 * order, and the prefetch runs on through every sweep. Each lane's four sums are added up as they
 * come in the order of finish() ((a0 + a1) + (a2 + a3)); then the fixed horizontal sum ((l0 + l4)
 * + (l2 + l6)) + ((l1 + l5) + (l3 + l7)), the bias and the residual, lane by lane: the bits of
 * finish(). AVX-512: one sweep of the whole group (two 16-lane vectors) and all T tokens. AVX2:
 * 16 registers; all four 8-lane vectors per sweep and at most 3 tokens (12 accumulators, 3
 * broadcasts, a weight vector), so five tokens are two sweeps (3 + 2) of 32 rows, each broadcast
 * feeding four multiply-adds. Measured ad hoc on a 2-core Zen 3 VM (one thread, f16 matrices of
 * 2048 x 512 from memory, 64 MB, best of 6 alternated runs): five tokens 7.75 ms with two sweeps
 * over the group of 16 rows each (the previous code), 7.73 with the slot's two 16-row halves in
 * turn and all five tokens, 6.20 with 32 rows and 3 + 2 tokens (one token: 5.6-5.8 ms). */
static inline __attribute__((always_inline)) void colpass(const sl_kern_mm *m, const float *xs, size_t sj, size_t sb,
                                                           size_t st, const unsigned char *w, sl_dtype dt,
                                                           size_t in, size_t o, size_t t0, int T, int NV, int TG)
{
    const size_t nb = in / 32, es = dt == SL_DT_F32 ? 4 : 2, step = 32 * es;
    cvec acc[4][COL_TMAX];                                              /* (vector, token) */
    float part[9][COL_NV][COL_TMAX][CV_W] __attribute__((aligned(64))); /* lanes l = 0..7, then a scratch */
    for (int jj = 0; jj < 32; jj++) {
        const unsigned char *wj = w + (size_t)jj * nb * step;
        const float *xj = xs + (sj ? (size_t)jj * sj : (size_t)SL_KERN_COL_LANE(jj));
        const int q = jj & 3, l = jj >> 2; /* the slot holds lane l + 8 q */
        const int ng = (T + TG - 1) / TG; /* token groups of balanced size, each swept on its own */
#pragma GCC unroll 3
        for (int g = 0, t0g = 0; g < ng; g++) {
            const int TS = T / ng + (g < T % ng);
#pragma GCC unroll 2
            for (int h = 0; h < COL_NV; h += NV) {
#pragma GCC unroll 4
                for (int v = 0; v < NV; v++)
#pragma GCC unroll 8
                    for (int t = 0; t < TS; t++) acc[v][t] = CV_ZERO();
                for (size_t b = 0; b < nb; b++) {
                    const unsigned char *wb = wj + b * step + (size_t)h * CV_W * es;
                    const float *xb = xj + b * sb + (size_t)t0g * st;
                    /* One token of f32 weights on AVX2 (two lines per step) leaves the stream to
                     * the hardware prefetcher: on the Zen 3 VM, GPT-2-124M f32 t(1) at two threads
                     * 18.5-23.7 ms without the software prefetch against 20.2-30.1 with it (ad hoc,
                     * alternated, two of the machine's phases), and at one thread it read at 77-80%
                     * of a STREAM-like pass without against 71-74% with (another Zen 3 VM,
                     * tests/bench/results/prefetch_variants_zen3.txt); f16 was faster with it (9.6-10.8
                     * against 11.1-11.5 ms), and so was the shipped target; 4, 8 or 32 KiB ahead, or
                     * the NTA or T1 hints, did not beat 16 KiB T0 beyond the runs' spread (separate
                     * runs; 1 KiB did, alternated call by call: SL_KERN_PREFETCH_ONE). AVX-512 prefetches
                     * for every dtype (8 KiB ahead for one token, SL_KERN_PREFETCH_ONE): leaving
                     * one token of 16-bit weights to the hardware prefetcher (433bbb6, reverted)
                     * read f16 GPT-2-124M at 74-78% of a STREAM-like pass instead of 70-72% on
                     * the Zen 5 VM in a fast memory phase, the same in a slow
                     * one, but on the accelerator machine's Xeon (GPT-2-774M shape, f16, 1.5 GB)
                     * one thread's decode took 152-161 ms instead of 126 (72-74% of the pass
                     * against 94-95%) and 16 threads' 20.3-21.8 instead of 18.2-20.5
                     * (tests/bench/results/engine_device_prefetch_433bbb6/). */
                    /* With several sweeps (AVX2, four tokens or more) the prefetch goes to L2 only:
                     * the slot's blocks, kept in L1 from one sweep to the next, and the inputs (up
                     * to 40 KiB at five tokens over 2048) leave L1 no room for 16 KiB of lines
                     * ahead. Measured ad hoc on the Zen 3 VM (the shipped target at context 100,
                     * the two hints alternated call by call in one process, medians of the pairs'
                     * ratios over 30-40 pairs): t(5) 0.90-1.00x T0's at one thread, 0.92-0.94x
                     * at two; t(4) 0.94 and 0.96x; t(8) 0.93x at one thread, 1.00x at two;
                     * GPT-2-124M t(5) 0.96x (f16, two threads; f32, one) and 1.02x (f16, one).
                     * One sweep (T <= 3) was slower with T1 (t(3) 1.05-1.09x), and T2 or NTA
                     * slower at five tokens (1.02-1.24x). */
                    if (COL_NV == 2 || T > 1 || dt != SL_DT_F32)
                        prefetch_ahead_hint(wj + b * step + (T == 1 ? SL_KERN_PREFETCH_ONE : SL_KERN_PREFETCH),
                                            dt, ng > 1);
                    if (NV * TS + NV + 1 <= COL_REGS) { /* the weight vectors held, one broadcast at a time */
                        cvec wv[4];
#pragma GCC unroll 4
                        for (int v = 0; v < NV; v++) wv[v] = CV_LOADW(wb + (size_t)v * CV_W * es, dt);
#pragma GCC unroll 8
                        for (int t = 0; t < TS; t++) {
                            const cvec x1 = CV_SET1(xb[(size_t)t * st]);
#pragma GCC unroll 4
                            for (int v = 0; v < NV; v++) acc[v][t] = CV_FMA(wv[v], x1, acc[v][t]);
                        }
                    } else { /* the broadcasts held, one weight vector at a time */
                        cvec xv[COL_TMAX];
#pragma GCC unroll 8
                        for (int t = 0; t < TS; t++) xv[t] = CV_SET1(xb[(size_t)t * st]);
#pragma GCC unroll 4
                        for (int v = 0; v < NV; v++) {
                            const cvec w1 = CV_LOADW(wb + (size_t)v * CV_W * es, dt);
#pragma GCC unroll 8
                            for (int t = 0; t < TS; t++) acc[v][t] = CV_FMA(w1, xv[t], acc[v][t]);
                        }
                    }
                }
#pragma GCC unroll 4
                for (int v = 0; v < NV; v++)
#pragma GCC unroll 8
                    for (int t = 0; t < TS; t++) {
                        float *pl = part[l][h + v][t0g + t], *sc = part[8][h + v][t0g + t];
                        if (q == 0) CV_STORE(pl, acc[v][t]);
                        else if (q == 1) CV_STORE(pl, CV_ADD(CV_LOAD(pl), acc[v][t]));
                        else if (q == 2) CV_STORE(sc, acc[v][t]);
                        else CV_STORE(pl, CV_ADD(CV_LOAD(pl), CV_ADD(CV_LOAD(sc), acc[v][t])));
                    }
            }
            t0g += TS;
        }
    }
    const size_t out = m->out;
    for (int v = 0; v < COL_NV; v++)
        for (int t = 0; t < T; t++) {
#define SL_KERN_L(l) CV_LOAD(part[l][v][t])
            cvec s = CV_ADD(CV_ADD(CV_ADD(SL_KERN_L(0), SL_KERN_L(4)), CV_ADD(SL_KERN_L(2), SL_KERN_L(6))),
                            CV_ADD(CV_ADD(SL_KERN_L(1), SL_KERN_L(5)), CV_ADD(SL_KERN_L(3), SL_KERN_L(7))));
#undef SL_KERN_L
            const size_t r0 = o + (size_t)v * CV_W;
            float *y = m->y + (t0 + (size_t)t) * out + r0;
            if (r0 + CV_W <= out) {
                if (m->bias) s = CV_ADD(s, CV_LOADU(m->bias + r0));
                CV_STOREU(y, m->add ? CV_ADD(CV_LOADU(y), s) : s);
            } else if (r0 < out) { /* the last group's rows past out are not stored */
                float f[CV_W];
                CV_STOREU(f, s);
                for (size_t i = 0; i < out - r0; i++) {
                    if (m->bias) f[i] += m->bias[r0 + i];
                    y[i] = m->add ? y[i] + f[i] : f[i];
                }
            }
        }
}

/* Vectors of rows, and the most tokens, per sweep of a pass of T tokens (see colpass). */
#define COL_SWEEP(T) COL_NV
#define COL_TG(T) (COL_NV == 4 ? 3 : (T))

/* Row lengths whose small inputs (at most 4096 floats) the AVX-512 build reads in place with
 * literal strides in passes of 4 to 8 tokens: the shipped family's d_model and GPT-2's. Each has
 * its literal case in colunit's SL_KERN_COL_CASE; the units' transposition rule leaves them out. */
#define SL_KERN_LITERAL_IN(in) ((in) == 512 || (in) == 768)

/* Group u of matrix m: all n tokens in ceil(n / COL_TMAX) passes of balanced size; x transposed in
 * xT (sl_kern_xt_fill), or read in place when xT is NULL. */
static inline __attribute__((always_inline)) void colunit(const sl_kern_mm *m, size_t u, const float *x, const float *xT,
                                                           size_t n, size_t in, sl_dtype dt)
{
    const size_t o = u * 32, es = dt == SL_DT_F32 ? 4 : 2;
    const unsigned char *W = (const unsigned char *)m->w + o * in * es;
    const size_t passes = (n + COL_TMAX - 1) / COL_TMAX, base = n / passes, extra = n % passes;
    for (size_t p = 0, t = 0; p < passes; t += base + (p < extra), p++) {
        const int T = (int)(base + (p < extra));
        const float *xs = xT ? xT + t : x + t * in;
        const size_t sj = xT ? (in / 32) * n : 0, sb = xT ? n : 32, st = xT ? 1 : in;
        /* In the AVX-512 build a single pass of 4 to 8 tokens gets its strides as literals: over
         * transposed inputs sb = T, st = 1; over inputs read in place, rows of SL_KERN_LITERAL_IN
         * elements, sb = 32, st = in. Its broadcasts are then at fixed offsets from one pointer.
         * With the strides in variables, the pass of five tokens kept the five offsets on the stack
         * and in vector registers (29 instructions per step of 10 multiply-adds, 23 with literals). */
#define SL_KERN_COL_CASE(TT)                                                                                     \
    case TT:                                                                                                     \
        if (CV_W == 16 && TT >= 4 && xT && n == TT)                                                              \
            colpass(m, xs, sj, TT, 1, W, dt, in, o, t, TT, COL_SWEEP(TT), COL_TG(TT));                           \
        else if (CV_W == 16 && TT >= 4 && !xT && in == 512)                                                      \
            colpass(m, xs, 0, 32, 512, W, dt, 512, o, t, TT, COL_SWEEP(TT), COL_TG(TT));                         \
        else if (CV_W == 16 && TT >= 4 && !xT && in == 768)                                                      \
            colpass(m, xs, 0, 32, 768, W, dt, 768, o, t, TT, COL_SWEEP(TT), COL_TG(TT));                         \
        else                                                                                                     \
            colpass(m, xs, sj, sb, st, W, dt, in, o, t, TT, COL_SWEEP(TT), COL_TG(TT));                          \
        break;
        switch (T) {
            SL_KERN_COL_CASE(1)
            SL_KERN_COL_CASE(2)
            SL_KERN_COL_CASE(3)
            SL_KERN_COL_CASE(4)
            SL_KERN_COL_CASE(5)
            SL_KERN_COL_CASE(6)
            SL_KERN_COL_CASE(7)
            SL_KERN_COL_CASE(8)
        default: break; /* T <= COL_TMAX by construction */
        }
#undef SL_KERN_COL_CASE
    }
}

/* Elements per chunk when a pass's inputs are large: the inputs of 5 tokens over 1024 elements
 * are 20 KiB (8 tokens: 32 KiB), so they stay in L1 while the chunk is applied to every row of a
 * unit (512 measured the same). Passes whose inputs fit in SL_KERN_WHOLE_BYTES read each row whole. */
#define SL_KERN_CHUNK 1024
#define SL_KERN_WHOLE_BYTES (24 * 1024)

/* Unit u of matrix m: rows o = 4 u .. end - 1 (four, or the last few), all n tokens, in
 * ceil(n / SL_KERN_TMAX) passes of balanced size (n = 4 with AVX2 is 2 + 2, not 3 + 1: a pass of
 * one token has only four accumulator chains and waits on the FMA latency). A pass whose inputs
 * fit in SL_KERN_WHOLE_BYTES reads each row whole. Larger inputs would not stay in L1 from one
 * row to the next (5 tokens of a 3072-wide row are 60 KiB), so such a pass goes chunk by chunk,
 * applying a chunk to all rows of the unit before the next, and carries the accumulators between chunks: the same
 * multiply-adds in the same order, so the same bits. Either way the prefetch runs ahead by
 * whole units (SL_KERN_PREFETCH). */
static inline __attribute__((always_inline)) void unit(const sl_kern_mm *m, size_t u, const float *x, size_t n,
                                                        size_t in, sl_dtype dt, size_t quad_max)
{
    const size_t o = u * 4, out = m->out, end = o + 4 < out ? o + 4 : out;
    const size_t esz = dt == SL_DT_F32 ? 4 : 2, stride = in * esz, k32 = in & ~(size_t)31;
    const unsigned char *W = (const unsigned char *)m->w + o * stride;
    const size_t passes = (n + SL_KERN_TMAX - 1) / SL_KERN_TMAX, base = n / passes, extra = n % passes;
    float carry[4][SL_KERN_TMAX * 32] __attribute__((aligned(64))); /* (row in unit, token, 32 lanes) */
    const size_t ahead = 4 * ((SL_KERN_PREFETCH + 4 * stride - 1) / (4 * stride)); /* rows */
    for (size_t p = 0, t = 0; p < passes; t += base + (p < extra), p++) {
        const int T = (int)(base + (p < extra));
        const size_t R = stride <= quad_max ? (size_t)SL_KERN_ROWS(T) : 1;
        if ((size_t)T * in * sizeof(float) <= SL_KERN_WHOLE_BYTES || k32 <= SL_KERN_CHUNK) {
            for (size_t r = o, g; r < end; r += g) {
                g = end - r >= R ? R : 1;
                const span sp = {0, k32, NULL, W + ahead * stride + (r - o) * stride};
                pass(m->y, x, W + (r - o) * stride, dt, m->bias, in, out, r, t, T, (int)g, m->add, sp);
            }
            continue;
        }
        for (size_t k0 = 0; k0 < k32; k0 += SL_KERN_CHUNK) {
            const size_t k1 = k0 + SL_KERN_CHUNK < k32 ? k0 + SL_KERN_CHUNK : k32;
            for (size_t r = o, g; r < end; r += g) {
                g = end - r >= R ? R : 1;
                const span sp = {k0, k1, carry[r - o], W + ahead * stride + (r - o) * stride + k0 * esz};
                pass(m->y, x, W + (r - o) * stride, dt, m->bias, in, out, r, t, T, (int)g, m->add, sp);
            }
        }
    }
}

/* The units of one call, work-shared among the team of the enclosing parallel region (an
 * orphaned omp for): one function per dtype, with the dtype a literal, so that the weight
 * conversion is resolved at compile time. The work is cut into units of four rows of one matrix (a
 * matrix whose row count is not a multiple of four ends with a shorter unit); each output is
 * computed in the same order whichever unit or thread has it. Both branches of the matmul below
 * call this one copy: with unit() inlined into each, the AVX-512 build alone took gcc 113 s to
 * compile on the Zen 5 VM (now ~40 s), for a kernel no faster (512 x 512 f16, one thread, best of
 * 6: within 1-3% at every n from 1 to 8). Giving pass() a single call site in unit() as well
 * would halve it again, but made passes of 1-3 and 5-7 tokens 5-8% slower: the whole-row call,
 * with k0 = 0 and k1 = k32 known, compiles without the carry's loads and stores.
 * Packed matrices are cut into their groups of 32 rows (colunit). Each thread transposes the
 * inputs for them once per call (sl_kern_xt_fill) when they are larger than 16 KiB; smaller ones
 * stay in L1 and are broadcast from x in place, sparing every thread the transposition: on the
 * accelerator machine's 16-core Xeon, where a 512 x 512 matrix gives each thread one group, that
 * took packed / row-major t(5) from 1.11-1.15 to 0.97-1.03 at 16 threads (f16, 832 MB of
 * matrices, ad hoc); one token always reads x in place. The AVX-512 build also transposes smaller
 * inputs of 4 to 8 tokens when each thread has at least 8 groups (a transposition of at most 8 in
 * floats against 8 x 32 x in multiply-adds per token), for colunit's passes with literal strides,
 * unless their rows are SL_KERN_LITERAL_IN long (read in place with literal strides, better still).
 * On the 2-core Zen 5 VM, call by call (tests/bench/results/literal_strides_zen5/): transposed with
 * literal strides against in place with variable ones, the shipped target's t(5) 0.970-0.972x the
 * time at one thread and 0.989-1.002x at two (1000 pairs, two rounds), where each thread's
 * transposition, reading inputs the other core wrote, took ~6% of t(5); then in place with literal
 * strides against transposed, 0.965x (one thread) and 0.952-0.971x (two), t(4) 0.962x / 0.945x,
 * GPT-2-124M f16 t(5) 0.993x / 0.982x. The AVX2 build, whose five tokens are two sweeps, took
 * 1.007x / 1.019x with the transposition, so it keeps the threshold. */
/* Unit u of a call (its place among the matrices' units, first[i] .. first[i + 1] - 1 being
 * matrix i's). */
static inline __attribute__((always_inline)) void call_unit(const sl_kern_mm *mm, const size_t *first, long u,
                                                             const float *x, const float *xT, size_t n, size_t in,
                                                             sl_dtype dt, size_t quad_max)
{
    size_t i = 0;
    while ((size_t)u >= first[i + 1]) i++;
    const size_t v = (size_t)u - first[i]; /* the unit's place in matrix i */
    if (mm[i].packed) colunit(mm + i, v, x, xT, n, in, dt);
    else unit(mm + i, v, x, n, in, dt, quad_max);
}

/* With mm[0].team (a model's forward pass on a team of at least sl_kern_steal_from() threads:
 * sl_kern_team), each thread takes its static share front to back, then what is left of the
 * others' from the back; otherwise static shares. */
#define SL_KERN_DEFINE_UNITS(NAME, DT)                                                                          \
    static __attribute__((noinline)) void NAME(const sl_kern_mm *mm, const size_t *first, const float *x,      \
                                               size_t n, size_t in, long units, size_t quad_max, int packed)   \
    {                                                                                                           \
        sl_kern_team *tm = mm[0].team;                                                                          \
        const int T = omp_get_num_threads(), me = omp_get_thread_num();                                         \
        const int xt = packed && n > 1 &&                                                                       \
                       (n * in > 4096 || (CV_W == 16 && n >= 4 && units >= 8L * T && !SL_KERN_LITERAL_IN(in))); \
        float *xT = xt ? sl_kern_xt_buffer(n * in) : NULL;                                                      \
        if (xT) sl_kern_xt_fill(xT, x, n, in);                                                                  \
        if (!(tm && T > 1 && tm->threads == T && units < (1L << 24))) tm = NULL;                                \
        const unsigned e = tm ? (tm->th[me].epoch = (tm->th[me].epoch + 1) % 0xffff) : 0;                       \
        long a, b;                                                                                              \
        for (int k = 0; sl_kern_next_units(tm, me, T, e, units, &k, &a, &b);)                                   \
            for (long u = a; u < b; u++) call_unit(mm, first, u, x, xT, n, in, DT, quad_max);                   \
        _Pragma("omp barrier")                                                                                  \
    }
SL_KERN_DEFINE_UNITS(units_f32, SL_DT_F32)
SL_KERN_DEFINE_UNITS(units_f16, SL_DT_F16)
SL_KERN_DEFINE_UNITS(units_bf16, SL_DT_BF16)

/* Called inside a parallel region (the model's forward pass), the units are work-shared among
 * that team; otherwise the call opens a region of its own. */
#define SL_KERN_DEFINE_MATMUL(NAME, UNITS)                                                                      \
    static void NAME(const sl_kern_mm *mm, size_t count, const float *x, size_t n, size_t in, size_t quad_max)  \
    {                                                                                                           \
        size_t first[SL_KERN_MAX_MULTI + 1], work = 0;                                                          \
        int packed = 0;                                                                                         \
        first[0] = 0;                                                                                           \
        for (size_t i = 0; i < count; i++) {                                                                    \
            first[i + 1] = first[i] + (mm[i].packed ? (mm[i].out + 31) / 32 : (mm[i].out + 3) / 4);            \
            work += mm[i].out * in;                                                                             \
            packed |= mm[i].packed;                                                                             \
        }                                                                                                       \
        const long units = (long)first[count];                                                                 \
        const int par = work >= (1u << 20); /* below ~0.2 ms: not worth waking threads */                    \
        if (omp_in_parallel()) {                                                                                \
            UNITS(mm, first, x, n, in, units, quad_max, packed);                                                \
        } else {                                                                                                \
            _Pragma("omp parallel if (par)")                                                                    \
            UNITS(mm, first, x, n, in, units, quad_max, packed);                                                \
        }                                                                                                       \
    }
SL_KERN_DEFINE_MATMUL(matmul_f32, units_f32)
SL_KERN_DEFINE_MATMUL(matmul_f16, units_f16)
SL_KERN_DEFINE_MATMUL(matmul_bf16, units_bf16)

void SL_KERN_NAME(sl_kern_mm_run)(const sl_kern_mm *mm, size_t count, const float *x, size_t n, size_t in,
                                  size_t quad_max)
{
    switch (mm[0].dt) {
    case SL_DT_F32: matmul_f32(mm, count, x, n, in, quad_max); break;
    case SL_DT_F16: matmul_f16(mm, count, x, n, in, quad_max); break;
    case SL_DT_BF16: matmul_bf16(mm, count, x, n, in, quad_max); break;
    case SL_DT_I32:
    case SL_DT_U8:
    case SL_DT_BOOL: break; /* never a weight: sl_model_open refuses it */
    }
}
