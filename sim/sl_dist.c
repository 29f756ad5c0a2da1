/* sl_dist.c: probability vectors: checks, softmax, standardisation, distances, residual, alias. */
#include "sl_dist.h"

#include <float.h>
#include <immintrin.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "sl_common.h"

int sl_dist_check(const double *p, size_t V, double tol, const char *name)
{
    if (V == 0) return sl_fail(SL_EINPUT, "%s: empty probability vector", name);
    double sum = 0;
    for (size_t i = 0; i < V; i++) {
        if (!isfinite(p[i])) return sl_fail(SL_EINPUT, "%s[%zu] = %g is not finite", name, i, p[i]);
        if (p[i] < 0) return sl_fail(SL_EINPUT, "%s[%zu] = %g is negative", name, i, p[i]);
        sum += p[i];
    }
    if (fabs(sum - 1.0) > tol)
        return sl_fail(SL_EINPUT, "%s sums to %.17g, not 1 within %g", name, sum, tol);
    return SL_OK;
}

/* e^x for x <= 0, four at a time (AVX2), within 2 ulp of the correctly rounded value
 * (tests/test_dist.c checks it against libm's exp over [-745, 0]): x = n ln 2 + r with n the
 * nearest integer to x / ln 2 and r = x - n ln2_hi - n ln2_lo (|r| <= 0.347; ln2_hi has 11
 * trailing zero bits, so n ln2_hi is exact for |n| <= 1075), e^r by its Taylor polynomial to
 * r^13 / 13! (truncation < 4e-18) in Horner form, then scaled by 2^(n/2) and 2^(n - n/2) (two
 * normal powers, so that results down to the subnormals come out right). x < -745.2 (e^x below
 * half the least subnormal) and -inf give 0. glibc's scalar exp took 30.7 of the 45.6 us that
 * sl_dist_standardise_f32 spent on a row of V = 4096 (2-vCPU Emerald Rapids VM), a third of a
 * 2-layer draft model's step. */
static inline __m256d exp_nonpos4(__m256d x)
{
    const __m256d magic = _mm256_set1_pd(0x1.8p52), inv_ln2 = _mm256_set1_pd(0x1.71547652b82fep0);
    const __m256d ln2_hi = _mm256_set1_pd(0x1.62e42fee00000p-1), ln2_lo = _mm256_set1_pd(0x1.a39ef35793c76p-33);
    const __m256d t = _mm256_fmadd_pd(x, inv_ln2, magic); /* n in the low bits of t's significand */
    const __m256d n = _mm256_sub_pd(t, magic);
    const __m256d r = _mm256_fnmadd_pd(n, ln2_lo, _mm256_fnmadd_pd(n, ln2_hi, x));
    static const double c[14] = {0x1p0, 0x1p0, 0x1p-1, 0x1.5555555555555p-3, 0x1.5555555555555p-5,
                                 0x1.1111111111111p-7, 0x1.6c16c16c16c17p-10, 0x1.a01a01a01a01ap-13,
                                 0x1.a01a01a01a01ap-16, 0x1.71de3a556c734p-19, 0x1.27e4fb7789f5cp-22,
                                 0x1.ae64567f544e4p-26, 0x1.1eed8eff8d898p-29, 0x1.6124613a86d09p-33};
    __m256d y = _mm256_set1_pd(c[13]);
#pragma GCC unroll 13
    for (int k = 12; k >= 0; k--) y = _mm256_fmadd_pd(y, r, _mm256_set1_pd(c[k]));
    const __m256i ni = _mm256_sub_epi64(_mm256_castpd_si256(t), _mm256_castpd_si256(magic)); /* n, exactly */
    /* n / 2 rounded toward -inf, with n in [-1075, 1]: an arithmetic shift of the 64-bit integer,
     * done as (n + 2048) >> 1 - 1024 on non-negative values (AVX2 has no 64-bit arithmetic shift). */
    const __m256i off = _mm256_set1_epi64x(2048);
    const __m256i h1 = _mm256_sub_epi64(_mm256_srli_epi64(_mm256_add_epi64(ni, off), 1), _mm256_set1_epi64x(1024));
    const __m256i h2 = _mm256_sub_epi64(ni, h1);
    const __m256i bias = _mm256_set1_epi64x(1023);
    const __m256d s1 = _mm256_castsi256_pd(_mm256_slli_epi64(_mm256_add_epi64(h1, bias), 52));
    const __m256d s2 = _mm256_castsi256_pd(_mm256_slli_epi64(_mm256_add_epi64(h2, bias), 52));
    const __m256d e = _mm256_mul_pd(_mm256_mul_pd(y, s1), s2);
    return _mm256_and_pd(e, _mm256_cmp_pd(x, _mm256_set1_pd(-745.2), _CMP_GE_OQ));
}

double sl_dist_exp_nonpos(double x)
{
    double out[4];
    _mm256_storeu_pd(out, exp_nonpos4(_mm256_set1_pd(x)));
    return out[0];
}

int sl_dist_softmax(const double *logits, size_t V, double *p)
{
    /* The maximum and a flag for NaN or +inf, four lanes at a time; the message from a scalar pass. */
    __m256d mx4 = _mm256_set1_pd(-INFINITY), bad4 = _mm256_setzero_pd();
    const __m256d pinf = _mm256_set1_pd(INFINITY);
    size_t i = 0;
    for (; i + 4 <= V; i += 4) {
        const __m256d v = _mm256_loadu_pd(logits + i);
        bad4 = _mm256_or_pd(bad4, _mm256_or_pd(_mm256_cmp_pd(v, v, _CMP_UNORD_Q), _mm256_cmp_pd(v, pinf, _CMP_EQ_OQ)));
        mx4 = _mm256_max_pd(mx4, v);
    }
    double m4[4];
    _mm256_storeu_pd(m4, mx4);
    double mx = m4[0] > m4[1] ? m4[0] : m4[1];
    mx = mx > m4[2] ? mx : m4[2];
    mx = mx > m4[3] ? mx : m4[3];
    int bad = _mm256_movemask_pd(bad4) != 0;
    for (; i < V; i++) {
        bad |= isnan(logits[i]) || logits[i] == INFINITY;
        if (logits[i] > mx) mx = logits[i];
    }
    if (bad)
        for (size_t j = 0; j < V; j++)
            if (isnan(logits[j]) || logits[j] == INFINITY)
                return sl_fail(SL_EINPUT, "logit[%zu] = %g is NaN or +inf", j, logits[j]);
    if (mx == -INFINITY) return sl_fail(SL_EINPUT, "every logit is -inf: no token is possible");
    /* e^(z - max) into p and its sum over four lanes (element i into lane i % 4, then
     * ((l0 + l1) + (l2 + l3)) + the tail in order): a fixed order, the same bits on every run. */
    const __m256d m = _mm256_set1_pd(mx);
    __m256d s4 = _mm256_setzero_pd();
    for (i = 0; i + 4 <= V; i += 4) {
        const __m256d e = exp_nonpos4(_mm256_sub_pd(_mm256_loadu_pd(logits + i), m));
        _mm256_storeu_pd(p + i, e);
        s4 = _mm256_add_pd(s4, e);
    }
    double l[4], tail = 0;
    _mm256_storeu_pd(l, s4);
    for (; i < V; i++) tail += p[i] = sl_dist_exp_nonpos(logits[i] - mx);
    const double inv = 1.0 / (((l[0] + l[1]) + (l[2] + l[3])) + tail);
#pragma omp simd
    for (i = 0; i < V; i++) p[i] *= inv;
    return SL_OK;
}

int sl_sampling_validate(const sl_sampling *s)
{
    if (!(s->temperature >= 0) || !isfinite(s->temperature))
        return sl_fail(SL_EINPUT, "temperature: %g must be a finite number >= 0", s->temperature);
    if (!(s->top_p > 0 && s->top_p <= 1))
        return sl_fail(SL_EINPUT, "top_p: %g is outside (0, 1]", s->top_p);
    if (!(s->min_p >= 0 && s->min_p < 1))
        return sl_fail(SL_EINPUT, "min_p: %g is outside [0, 1)", s->min_p);
    return SL_OK;
}

sl_dist_work *sl_dist_work_alloc(size_t V)
{
    sl_dist_work *w = sl_calloc(1, sizeof *w);
    if (!w) return NULL;
    w->V = V;
    w->idx = sl_malloc(V * sizeof *w->idx);
    w->tmp = sl_malloc(V * sizeof *w->tmp);
    if (!w->idx || !w->tmp) {
        sl_dist_work_free(w);
        return NULL;
    }
    return w;
}

void sl_dist_work_free(sl_dist_work *w)
{
    if (!w) return;
    free(w->idx);
    free(w->tmp);
    free(w);
}

static int cmp_desc(const void *a, const void *b, void *ctx)
{
    const double *p = ctx;
    uint32_t i = *(const uint32_t *)a, j = *(const uint32_t *)b;
    if (p[i] > p[j]) return -1;
    if (p[i] < p[j]) return 1;
    return (i > j) - (i < j);
}

void sl_dist_sort_desc(const double *p, size_t V, sl_dist_work *w)
{
    for (size_t i = 0; i < V; i++) w->idx[i] = (uint32_t)i;
    qsort_r(w->idx, V, sizeof *w->idx, cmp_desc, (void *)p);
}

static void normalise(double *p, size_t V)
{
    double sum = 0;
    for (size_t i = 0; i < V; i++) sum += p[i];
    double inv = 1.0 / sum;
    for (size_t i = 0; i < V; i++) p[i] *= inv;
}

void sl_dist_top_k(const double *p, size_t V, size_t k, double *out, sl_dist_work *w)
{
    if (out != p) memcpy(out, p, V * sizeof *out);
    if (k == 0 || k >= V) return;
    sl_dist_sort_desc(out, V, w);
    for (size_t r = k; r < V; r++) out[w->idx[r]] = 0;
    normalise(out, V);
}

size_t sl_dist_argmax(const double *p, size_t V)
{
    size_t best = 0;
    for (size_t i = 1; i < V; i++)
        if (p[i] > p[best]) best = i;
    return best;
}

int sl_sampling_filters(const sl_sampling *s, size_t V)
{
    return (s->top_k > 0 && s->top_k < V) || s->top_p < 1 || s->min_p > 0;
}

void sl_dist_filter(double *p, size_t V, const sl_sampling *s, sl_dist_work *w)
{
    int sorted = 0;
    if (s->top_k > 0 && s->top_k < V) {
        sl_dist_top_k(p, V, s->top_k, p, w);
        sorted = 1; /* zeroing the tail keeps the sorted order valid */
    }
    if (s->top_p < 1) {
        if (!sorted) sl_dist_sort_desc(p, V, w);
        double cum = 0;
        size_t keep = V;
        for (size_t r = 0; r < V; r++) {
            cum += p[w->idx[r]];
            if (cum >= s->top_p) {
                keep = r + 1;
                break;
            }
        }
        for (size_t r = keep; r < V; r++) p[w->idx[r]] = 0;
        normalise(p, V);
    }
    if (s->min_p > 0) {
        double thr = s->min_p * p[sl_dist_argmax(p, V)];
        for (size_t i = 0; i < V; i++)
            if (p[i] < thr) p[i] = 0;
        normalise(p, V);
    }
}

/* The softmax of w->tmp (logits already divided by the temperature) into p, then the filters. */
static int softmax_filtered(size_t V, const sl_sampling *s, double *p, sl_dist_work *w)
{
    int rc = sl_dist_softmax(w->tmp, V, p);
    if (rc) return rc;
    sl_dist_filter(p, V, s, w);
    return SL_OK;
}

int sl_dist_standardise(const double *logits, size_t V, const sl_sampling *s, double *p, sl_dist_work *w)
{
    int rc = sl_sampling_validate(s);
    if (rc) return rc;
    if (s->temperature == 0) {
        double mx = -INFINITY;
        size_t best = 0;
        for (size_t i = 0; i < V; i++) {
            if (isnan(logits[i])) return sl_fail(SL_EINPUT, "logit[%zu] is NaN", i);
            if (logits[i] > mx) {
                mx = logits[i];
                best = i;
            }
        }
        memset(p, 0, V * sizeof *p);
        p[best] = 1;
        return SL_OK;
    }
    for (size_t i = 0; i < V; i++) w->tmp[i] = logits[i] / s->temperature;
    return softmax_filtered(V, s, p, w);
}

int sl_dist_standardise_f32(const float *logits, size_t V, const sl_sampling *s, double *p, sl_dist_work *w)
{
    if (s->temperature == 0) { /* p doubles as the widened logits */
        for (size_t i = 0; i < V; i++) p[i] = logits[i];
        return sl_dist_standardise(p, V, s, p, w);
    }
    /* sl_dist_standardise's steps with the widening and the division by the temperature in one
     * pass (the same values). */
    int rc = sl_sampling_validate(s);
    if (rc) return rc;
    const double T = s->temperature;
    if (T == 1) { /* z / 1 is z */
#pragma omp simd
        for (size_t i = 0; i < V; i++) w->tmp[i] = (double)logits[i];
    } else {
#pragma omp simd
        for (size_t i = 0; i < V; i++) w->tmp[i] = (double)logits[i] / T;
    }
    return softmax_filtered(V, s, p, w);
}

/* Sums over a vocabulary run in SUM_LANES interleaved partial sums (element i into lane i % 4,
 * the lanes then added pairwise, the tail after them), so that the additions do not wait on one
 * another: a one-chain sum of V = 4096 doubles took ~5 us, several times a speculative
 * iteration's bookkeeping on a GPU (models/GPU_INFERENCE.md). A fixed order: the same bits on
 * every run and thread count. */
#define SUM_LANES 4
static double lanes_total(const double *s, double tail) { return ((s[0] + s[1]) + (s[2] + s[3])) + tail; }

double sl_dist_beta(const double *p, const double *q, size_t V)
{
    double s[SUM_LANES] = {0}, tail = 0;
    size_t i = 0;
    for (; i + SUM_LANES <= V; i += SUM_LANES)
        for (int k = 0; k < SUM_LANES; k++) s[k] += p[i + k] < q[i + k] ? p[i + k] : q[i + k];
    for (; i < V; i++) tail += p[i] < q[i] ? p[i] : q[i];
    return lanes_total(s, tail);
}

double sl_dist_alpha_lenient(const double *p, const double *q, size_t V, double l)
{
    double s = 0;
    for (size_t x = 0; x < V; x++) s += fmin(q[x], p[x] / l);
    return s;
}

double sl_dist_alpha_match(const double *p, const double *q, size_t V)
{
    double s = 0;
    for (size_t x = 0; x < V; x++) s += p[x] * q[x];
    return s;
}

double sl_dist_alpha_nonit(const double *p, const double *q, size_t V)
{
    double m = INFINITY;
    for (size_t x = 0; x < V; x++)
        if (p[x] > 0) m = fmin(m, q[x] / p[x]);
    return m;
}

double sl_dist_dlk(const double *p, const double *q, size_t V)
{
    double s = 0;
    for (size_t i = 0; i < V; i++) s += fabs(p[i] - 0.5 * (p[i] + q[i]));
    return s;
}

double sl_dist_tv(const double *p, const double *q, size_t V)
{
    double s = 0;
    for (size_t i = 0; i < V; i++) s += fabs(p[i] - q[i]);
    return 0.5 * s;
}

double sl_dist_kl(const double *p, const double *q, size_t V)
{
    double s = 0;
    for (size_t i = 0; i < V; i++) {
        if (p[i] <= 0) continue;
        if (q[i] <= 0) return INFINITY;
        s += p[i] * log(p[i] / q[i]);
    }
    return s;
}

double sl_dist_entropy(const double *p, size_t V)
{
    double s = 0;
    for (size_t i = 0; i < V; i++)
        if (p[i] > 0) s -= p[i] * log(p[i]);
    return s;
}

double sl_dist_residual(const double *p, const double *q, size_t V, double *out)
{
    double s[SUM_LANES] = {0}, tail = 0;
    size_t i = 0;
    for (; i + SUM_LANES <= V; i += SUM_LANES)
        for (int k = 0; k < SUM_LANES; k++) {
            const double d = p[i + k] - q[i + k];
            out[i + k] = d > 0 ? d : 0;
            s[k] += out[i + k];
        }
    for (; i < V; i++) {
        const double d = p[i] - q[i];
        out[i] = d > 0 ? d : 0;
        tail += out[i];
    }
    const double z = lanes_total(s, tail);
    if (z > 0) {
        double inv = 1.0 / z;
        for (size_t i = 0; i < V; i++) out[i] *= inv;
    } else {
        memcpy(out, p, V * sizeof *out);
    }
    return z;
}

/* One token of the inverse CDF: acc runs over the positive entries in order. */
#define SAMPLE_STEP(k)            \
    if (p[k] > 0) {               \
        acc += p[k];              \
        last = k;                 \
        if (u < acc) return k;    \
    }

size_t sl_dist_sample_u(const double *p, size_t V, double u)
{
    double acc = 0;
    size_t last = 0, i = 0;
    /* Four at a time, a block of zeros (a greedy or filtered pmf) skipped whole: it adds nothing. */
    for (; i + 4 <= V; i += 4) {
        if (p[i] <= 0 && p[i + 1] <= 0 && p[i + 2] <= 0 && p[i + 3] <= 0) continue;
        for (size_t k = i; k < i + 4; k++) SAMPLE_STEP(k)
    }
    for (; i < V; i++) SAMPLE_STEP(i)
    return last; /* u beyond the rounded total: the last possible token */
}

sl_alias *sl_alias_alloc(size_t V)
{
    sl_alias *a = sl_calloc(1, sizeof *a);
    if (!a) return NULL;
    a->V = V;
    a->prob = sl_malloc(V * sizeof *a->prob);
    a->alias = sl_malloc(V * sizeof *a->alias);
    a->work = sl_malloc(2 * V * sizeof *a->work);
    if (!a->prob || !a->alias || !a->work) {
        sl_alias_free(a);
        return NULL;
    }
    return a;
}

void sl_alias_free(sl_alias *a)
{
    if (!a) return;
    free(a->prob);
    free(a->alias);
    free(a->work);
    free(a);
}

/* Vose's method. Scaled masses p*V go to a small (< 1) or large stack; each small column is topped
 * up by a large one. Columns left over at the end hold mass 1 up to rounding, except that a
 * zero-probability token must never become drawable: it keeps threshold 0 and aliases to a token
 * of positive mass. */
void sl_alias_build(sl_alias *a, const double *p)
{
    size_t V = a->V;
    uint32_t *small = a->work, *large = a->work + V;
    size_t ns = 0, nl = 0;
    double sum = 0;
    for (size_t i = 0; i < V; i++) sum += p[i];
    size_t positive = sl_dist_argmax(p, V);
    for (size_t i = 0; i < V; i++) {
        a->prob[i] = p[i] / sum * (double)V;
        a->alias[i] = (uint32_t)i;
        if (a->prob[i] < 1) small[ns++] = (uint32_t)i;
        else large[nl++] = (uint32_t)i;
    }
    while (ns > 0 && nl > 0) {
        uint32_t s = small[--ns], l = large[nl - 1];
        a->alias[s] = l;
        a->prob[l] = (a->prob[l] + a->prob[s]) - 1.0;
        if (a->prob[l] < 1) {
            nl--;
            small[ns++] = l;
        }
    }
    while (nl > 0) a->prob[large[--nl]] = 1.0;
    while (ns > 0) {
        uint32_t s = small[--ns];
        if (p[s] > 0) a->prob[s] = 1.0;
        else {
            a->prob[s] = 0.0;
            a->alias[s] = (uint32_t)positive;
        }
    }
}

size_t sl_alias_sample_u(const sl_alias *a, double u)
{
    double x = u * (double)a->V;
    size_t col = (size_t)x;
    if (col >= a->V) col = a->V - 1;
    double frac = x - (double)col;
    return frac < a->prob[col] ? col : a->alias[col];
}

size_t sl_alias_sample(const sl_alias *a, gsl_rng *r) { return sl_alias_sample_u(a, sl_rng_uniform53(r)); }
