/*
 * sl_stats.c: goodness of fit, homogeneity, Holm, KS, confidence intervals, TV and power.
 * Every function is checked against scipy in tests/test_stats.c (fixtures from
 * tests/gen_stats_fixtures.py).
 */
#include "sl_stats.h"

#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <gsl/gsl_cdf.h>
#include <gsl/gsl_randist.h>
#include <gsl/gsl_sf_gamma.h>

#include <omp.h>

#include "sl_common.h"
#include "sl_dist.h"

/* ---- pooling ---- */

typedef struct {
    double key;
    size_t idx;
} key_idx;

static int cmp_key_idx(const void *a, const void *b)
{
    const key_idx *x = a, *y = b;
    if (x->key < y->key) return -1;
    if (x->key > y->key) return 1;
    return x->idx < y->idx ? -1 : x->idx > y->idx;
}

/* Pools columns given per-column keys (the quantity that must reach min_expected) and returns the
 * column order: order[0..n_small) go into the pooled cell, the rest stay single. Columns with key
 * 0 must have been removed by the caller. */
static size_t pool_split(key_idx *ki, size_t n, double min_expected)
{
    qsort(ki, n, sizeof *ki, cmp_key_idx);
    size_t n_small = 0;
    double pooled = 0;
    while (n_small < n && ki[n_small].key < min_expected) pooled += ki[n_small++].key;
    while (n_small > 0 && pooled < min_expected && n_small < n) pooled += ki[n_small++].key;
    /* A pooled "cell" of one category is just that category. */
    return n_small == 1 ? 0 : n_small;
}

int sl_stats_pool(const uint64_t *counts, const double *pmf, size_t k, double min_expected, double *cell_obs,
                  double *cell_exp, size_t *n_cells, size_t *n_pooled, int *impossible)
{
    if (k == 0) return sl_fail(SL_EINPUT, "goodness of fit: no categories");
    uint64_t n = 0;
    for (size_t j = 0; j < k; j++) {
        if (!(pmf[j] >= 0) || !isfinite(pmf[j]))
            return sl_fail(SL_EINPUT, "goodness of fit: pmf[%zu] = %g is not a probability", j, pmf[j]);
        n += counts[j];
    }
    key_idx *ki = sl_malloc(k * sizeof *ki);
    if (!ki) return SL_EFAIL;
    size_t m = 0;
    *impossible = 0;
    for (size_t j = 0; j < k; j++) {
        if (pmf[j] > 0) {
            ki[m].key = (double)n * pmf[j];
            ki[m].idx = j;
            m++;
        } else if (counts[j] > 0) {
            *impossible = 1;
        }
    }
    size_t n_small = pool_split(ki, m, min_expected);
    size_t c = 0;
    if (n_small > 0) {
        cell_obs[0] = cell_exp[0] = 0;
        for (size_t i = 0; i < n_small; i++) {
            cell_obs[0] += (double)counts[ki[i].idx];
            cell_exp[0] += ki[i].key;
        }
        c = 1;
    }
    for (size_t i = n_small; i < m; i++, c++) {
        cell_obs[c] = (double)counts[ki[i].idx];
        cell_exp[c] = ki[i].key;
    }
    *n_cells = c;
    *n_pooled = n_small;
    free(ki);
    return SL_OK;
}

static double gof_stat(const double *obs, const double *exp_, size_t c, sl_gof_kind kind)
{
    double s = 0;
    for (size_t j = 0; j < c; j++) {
        if (kind == SL_GOF_PEARSON) {
            double d = obs[j] - exp_[j];
            s += d * d / exp_[j];
        } else if (obs[j] > 0) {
            s += obs[j] * log(obs[j] / exp_[j]);
        }
    }
    return kind == SL_GOF_PEARSON ? s : 2 * s;
}

int sl_stats_gof(const uint64_t *counts, const double *pmf, size_t k, sl_gof_kind kind, sl_gof *out)
{
    memset(out, 0, sizeof *out);
    double *obs = sl_malloc(2 * k * sizeof *obs);
    if (!obs) return SL_EFAIL;
    double *exp_ = obs + k;
    size_t c, np;
    int imp, rc = sl_stats_pool(counts, pmf, k, SL_STATS_MIN_EXPECTED, obs, exp_, &c, &np, &imp);
    if (rc) {
        free(obs);
        return rc;
    }
    for (size_t j = 0; j < k; j++) out->n += counts[j];
    out->n_cells = c;
    out->n_pooled = np;
    out->impossible = imp;
    if (imp) {
        out->stat = INFINITY;
        out->df = c > 0 ? (double)c - 1 : 0;
        out->p_value = 0;
    } else if (c <= 1) {
        out->stat = 0;
        out->df = 0;
        out->p_value = 1;
    } else {
        out->stat = gof_stat(obs, exp_, c, kind);
        out->df = (double)c - 1;
        out->p_value = gsl_cdf_chisq_Q(out->stat, out->df);
    }
    free(obs);
    return SL_OK;
}

/* ---- exact and Monte Carlo multinomial ---- */

double sl_stats_multinomial_outcomes(uint64_t n, size_t k)
{
    if (k == 0) return 0;
    /* C(n + k - 1, k - 1) through lgamma; exact enough to compare against a limit. */
    return exp(lgamma((double)n + (double)k) - lgamma((double)n + 1) - lgamma((double)k));
}

typedef struct {
    size_t k;
    const double *np;     /* (k) n * pmf */
    const double *logp;   /* (k) log pmf */
    double x2_obs;        /* threshold, already lowered by the tie tolerance */
    double x2_hi;         /* observed X^2 raised by the tie tolerance: above it is "greater" */
    double p_value;       /* P(X^2 >= observed) */
    double p_gt;          /* P(X^2 > observed) */
    double lfact_n;
    double *lfact;        /* (n + 1) log y! */
} exact_ctx;

/* Recursion over categories: y_0..y_{j-1} fixed, `left` observations still to place; acc is the
 * partial X^2 and lp the partial log probability (without the multinomial coefficient's n!). */
static void exact_rec(exact_ctx *c, size_t j, uint64_t left, double acc, double lp)
{
    if (j == c->k - 1) {
        double y = (double)left;
        double d = y - c->np[j];
        double x2 = acc + d * d / c->np[j];
        if (x2 >= c->x2_obs) {
            double pr = exp(c->lfact_n + lp + y * c->logp[j] - c->lfact[left]);
            c->p_value += pr;
            if (x2 > c->x2_hi) c->p_gt += pr;
        }
        return;
    }
    for (uint64_t y = 0; y <= left; y++) {
        double d = (double)y - c->np[j];
        exact_rec(c, j + 1, left - y, acc + d * d / c->np[j], lp + (double)y * c->logp[j] - c->lfact[y]);
    }
}

int sl_stats_exact_multinomial(const uint64_t *counts, const double *pmf, size_t k, double max_outcomes,
                               double *p_value)
{
    double gt;
    return sl_stats_exact_multinomial_ext(counts, pmf, k, max_outcomes, p_value, &gt);
}

int sl_stats_exact_multinomial_ext(const uint64_t *counts, const double *pmf, size_t k, double max_outcomes,
                                   double *p_value, double *p_gt)
{
    *p_gt = 0;
    uint64_t n = 0;
    size_t m = 0;
    for (size_t j = 0; j < k; j++) {
        n += counts[j];
        if (pmf[j] > 0) m++;
        else if (counts[j] > 0) {
            *p_value = 0;
            return SL_OK;
        }
    }
    if (m == 0) return sl_fail(SL_EINPUT, "exact multinomial: pmf has no positive entry");
    double outcomes = sl_stats_multinomial_outcomes(n, m);
    if (outcomes > max_outcomes)
        return sl_fail(SL_EINPUT, "exact multinomial: %.3g outcomes for n = %llu, k = %zu exceed the limit %.3g",
                       outcomes, (unsigned long long)n, m, max_outcomes);
    double *buf = sl_malloc((2 * m + n + 1) * sizeof *buf);
    if (!buf) return SL_EFAIL;
    double *np = buf, *logp = buf + m, *lfact = buf + 2 * m;
    double x2 = 0;
    size_t i = 0;
    for (size_t j = 0; j < k; j++) {
        if (pmf[j] <= 0) continue;
        np[i] = (double)n * pmf[j];
        logp[i] = log(pmf[j]);
        double d = (double)counts[j] - np[i];
        x2 += d * d / np[i];
        i++;
    }
    for (uint64_t y = 0; y <= n; y++) lfact[y] = lgamma((double)y + 1);
    double tol = 1e-9 * fmax(x2, 1e-300);
    exact_ctx c = {m, np, logp, x2 - tol, x2 + tol, 0, 0, lfact[n], lfact};
    if (n == 0) c.p_value = 1;
    else exact_rec(&c, 0, n, 0, 0);
    *p_value = fmin(1.0, c.p_value);
    *p_gt = fmin(*p_value, c.p_gt);
    free(buf);
    return SL_OK;
}

int sl_stats_mc_multinomial(const uint64_t *counts, const double *pmf, size_t k, size_t n_sim, uint64_t seed,
                            double *p_value)
{
    double gt;
    return sl_stats_mc_multinomial_ext(counts, pmf, k, n_sim, seed, p_value, &gt);
}

int sl_stats_mc_multinomial_ext(const uint64_t *counts, const double *pmf, size_t k, size_t n_sim, uint64_t seed,
                                double *p_value, double *p_gt)
{
    *p_gt = 0;
    for (size_t j = 0; j < k; j++)
        if (pmf[j] <= 0 && counts[j] > 0) {
            *p_value = 0;
            return SL_OK;
        }
    uint64_t ge, gt;
    size_t n_blocks = (n_sim + SL_STATS_MC_BLOCK - 1) / SL_STATS_MC_BLOCK;
    int rc = sl_stats_mc_multinomial_count(counts, pmf, k, n_sim, seed, 0, 0, n_blocks, 0, &ge, &gt);
    if (rc) return rc;
    *p_value = (1.0 + (double)ge) / (1.0 + (double)n_sim);
    *p_gt = (double)gt / (1.0 + (double)n_sim);
    return SL_OK;
}

/* Draws above this many per category go through conditional binomials (O(categories) per draw);
 * below it, n alias draws (O(n)) are cheaper. Measured at V = 50257 on one core: a
 * gsl_ran_multinomial draw costs about 190 ns per category, an alias draw about 6.5 ns plus 1 ns
 * per category for the statistic, so the two meet near 30 draws per category. */
#define MC_ALIAS_MAX_PER_CATEGORY 24
#define MC_BATCH 512 /* alias draws computed before their counts are incremented */

/* Pearson's X^2 of the counts y (m) against the expected counts e (m), with inv_e = 1 / e: four
 * partial sums in a fixed order (so that the compiler may vectorise them), then added. The one
 * expression for the observed table and every simulated one, so that equal tables give equal bits. */
static double mc_x2(const unsigned *y, const double *e, const double *inv_e, size_t m)
{
    double acc[4] = {0, 0, 0, 0};
    size_t i = 0;
    for (; i + 4 <= m; i += 4)
        for (int l = 0; l < 4; l++) {
            double d = (double)y[i + l] - e[i + l];
            acc[l] += d * d * inv_e[i + l];
        }
    for (; i < m; i++) {
        double d = (double)y[i] - e[i];
        acc[0] += d * d * inv_e[i];
    }
    return (acc[0] + acc[1]) + (acc[2] + acc[3]);
}

int sl_stats_mc_multinomial_count(const uint64_t *counts, const double *pmf, size_t k, size_t n_sim, uint64_t seed,
                                  uint64_t item, size_t b_lo, size_t b_hi, int threads, uint64_t *ge, uint64_t *gt)
{
    *ge = *gt = 0;
    uint64_t n = 0;
    size_t m = 0;
    for (size_t j = 0; j < k; j++) {
        n += counts[j];
        if (pmf[j] > 0) m++;
        else if (counts[j] > 0) return SL_OK; /* impossible under the null: no draw reaches it */
    }
    if (m == 0) return sl_fail(SL_EINPUT, "Monte Carlo multinomial: pmf has no positive entry");
    if (n > UINT32_MAX) return sl_fail(SL_EINPUT, "Monte Carlo multinomial: n = %llu is too large", (unsigned long long)n);
    size_t n_blocks = (n_sim + SL_STATS_MC_BLOCK - 1) / SL_STATS_MC_BLOCK;
    if (b_hi > n_blocks) b_hi = n_blocks;
    if (b_lo >= b_hi) return SL_OK;
    if (threads < 0) return sl_fail(SL_EINPUT, "threads: %d, expected >= 0", threads);
    /* The positive categories, compacted. */
    double *pm = sl_malloc(3 * m * sizeof *pm), *e = pm + m, *inv_e = pm + 2 * m; /* (m) each: pmf, n pmf, 1/(n pmf) */
    unsigned *y_obs = sl_malloc(m * sizeof *y_obs);
    sl_alias *al = sl_alias_alloc(m);
    int rc = SL_OK;
    if (!pm || !y_obs || !al) {
        rc = sl_fail(SL_EFAIL, "out of memory allocating the Monte Carlo multinomial");
        goto done;
    }
    double mass = 0;
    for (size_t j = 0, i = 0; j < k; j++) {
        if (pmf[j] <= 0) continue;
        pm[i] = pmf[j];
        mass += pmf[j];
        e[i] = (double)n * pmf[j];
        inv_e[i] = 1.0 / e[i];
        y_obs[i] = (unsigned)counts[j];
        i++;
    }
    const double x2_obs = mc_x2(y_obs, e, inv_e, m);
    for (size_t i = 0; i < m; i++) pm[i] /= mass; /* the alias table wants an exact probability vector */
    sl_alias_build(al, pm);
    const double tol = 1e-9 * fmax(x2_obs, 1e-300), x2_hi = x2_obs + tol, x2_lo = x2_obs - tol;
    const int by_alias = n <= MC_ALIAS_MAX_PER_CATEGORY * (uint64_t)m;
    const uint64_t bseed = sl_seed_derive(seed, SL_STREAM_BOOT, item);
    const double *prob = al->prob;
    const uint32_t *alias = al->alias;
    int nt = threads > 0 ? threads : omp_get_max_threads();
    uint64_t n_ge = 0, n_gt = 0;
    int status = SL_OK;
#pragma omp parallel num_threads(nt) reduction(+ : n_ge, n_gt)
    {
        unsigned *y = calloc(m, sizeof *y); /* (m) one draw's counts, zeroed after each draw */
        uint32_t *idx = malloc(MC_BATCH * sizeof *idx); /* (MC_BATCH) a batch of drawn categories */
        gsl_rng *r = by_alias ? NULL : gsl_rng_alloc(sl_rng_xoshiro);
        int ok = y && idx && (by_alias || r);
        if (!ok) {
#pragma omp atomic write
            status = SL_EFAIL;
        }
        /* Block b of SL_STATS_MC_BLOCK draws uses the stream (seed', SL_STREAM_BOOT, b) alone, so
         * which thread or rank draws it changes nothing and the exceedances sum exactly. */
#pragma omp for schedule(static)
        for (size_t b = b_lo; b < b_hi; b++) {
            if (!ok) continue;
            size_t s_end = (b + 1) * SL_STATS_MC_BLOCK < n_sim ? (b + 1) * SL_STATS_MC_BLOCK : n_sim;
            sl_xoshiro x;
            sl_xoshiro_seed(&x, bseed, SL_STREAM_BOOT, b);
            if (r) sl_rng_reseed(r, bseed, SL_STREAM_BOOT, b);
            for (size_t s = b * SL_STATS_MC_BLOCK; s < s_end; s++) {
                if (by_alias) {
                    /* sl_alias_sample_u without a branch, a batch of categories at a time so that
                     * the increments' cache misses overlap. */
                    const double md = (double)m;
                    for (uint64_t t0 = 0; t0 < n; t0 += MC_BATCH) {
                        size_t nb = n - t0 < MC_BATCH ? (size_t)(n - t0) : MC_BATCH;
                        for (size_t t = 0; t < nb; t++) {
                            double u = sl_xoshiro_uniform53(&x) * md;
                            size_t col = (size_t)u;
                            col = col < m ? col : m - 1;
                            uint32_t keep = -(uint32_t)(u - (double)col < prob[col]);
                            idx[t] = ((uint32_t)col & keep) | (alias[col] & ~keep);
                        }
                        for (size_t t = 0; t < nb; t++) y[idx[t]]++;
                    }
                } else {
                    gsl_ran_multinomial(r, m, (unsigned)n, pm, y);
                }
                double x2 = mc_x2(y, e, inv_e, m);
                memset(y, 0, m * sizeof *y);
                n_ge += x2 >= x2_lo;
                n_gt += x2 > x2_hi;
            }
        }
        free(y);
        free(idx);
        if (r) gsl_rng_free(r);
    }
    if (status) {
        rc = sl_fail(SL_EFAIL, "out of memory allocating the Monte Carlo multinomial");
        goto done;
    }
    *ge = n_ge;
    *gt = n_gt;
done:
    free(pm);
    free(y_obs);
    sl_alias_free(al);
    return rc;
}

double sl_stats_randomized_p(double p_ge, double p_gt, double u)
{
    return p_gt + u * (p_ge - p_gt);
}

/* ---- two-sample homogeneity ---- */

int sl_stats_homogeneity(const uint64_t *a, const uint64_t *b, size_t k, sl_gof_kind kind, sl_gof *out)
{
    memset(out, 0, sizeof *out);
    double na = 0, nb = 0;
    for (size_t j = 0; j < k; j++) {
        na += (double)a[j];
        nb += (double)b[j];
    }
    out->n = (uint64_t)(na + nb);
    if (na == 0 || nb == 0) {
        out->p_value = 1;
        return SL_OK;
    }
    double N = na + nb, small = fmin(na, nb);
    key_idx *ki = sl_malloc(k * sizeof *ki);
    double *cells = sl_malloc(4 * (k + 1) * sizeof *cells);
    if (!ki || !cells) {
        free(ki);
        free(cells);
        return SL_EFAIL;
    }
    size_t m = 0;
    for (size_t j = 0; j < k; j++) {
        double col = (double)a[j] + (double)b[j];
        if (col > 0) {
            ki[m].key = small * col / N; /* the smaller of the column's two expected counts */
            ki[m].idx = j;
            m++;
        }
    }
    size_t n_small = pool_split(ki, m, SL_STATS_MIN_EXPECTED);
    double *oa = cells, *ob = cells + (k + 1);
    size_t c = 0;
    if (n_small) {
        oa[0] = ob[0] = 0;
        for (size_t i = 0; i < n_small; i++) {
            oa[0] += (double)a[ki[i].idx];
            ob[0] += (double)b[ki[i].idx];
        }
        c = 1;
    }
    for (size_t i = n_small; i < m; i++, c++) {
        oa[c] = (double)a[ki[i].idx];
        ob[c] = (double)b[ki[i].idx];
    }
    double s = 0;
    for (size_t j = 0; j < c; j++) {
        double col = oa[j] + ob[j];
        double ea = na * col / N, eb = nb * col / N;
        if (kind == SL_GOF_PEARSON) {
            s += (oa[j] - ea) * (oa[j] - ea) / ea + (ob[j] - eb) * (ob[j] - eb) / eb;
        } else {
            if (oa[j] > 0) s += 2 * oa[j] * log(oa[j] / ea);
            if (ob[j] > 0) s += 2 * ob[j] * log(ob[j] / eb);
        }
    }
    out->n_cells = c;
    out->n_pooled = n_small;
    if (c <= 1) {
        out->p_value = 1;
    } else {
        out->stat = s;
        out->df = (double)c - 1;
        out->p_value = gsl_cdf_chisq_Q(s, out->df);
    }
    free(ki);
    free(cells);
    return SL_OK;
}

/* ---- Holm ---- */

int sl_stats_holm(const double *p, size_t m, double *adj)
{
    if (m == 0) return SL_OK;
    key_idx *ki = sl_malloc(m * sizeof *ki);
    if (!ki) return SL_EFAIL;
    for (size_t i = 0; i < m; i++) {
        if (!(p[i] >= 0 && p[i] <= 1)) {
            free(ki);
            return sl_fail(SL_EINPUT, "Holm: p-value %zu is %g, expected a value in [0, 1]", i, p[i]);
        }
        ki[i].key = p[i];
        ki[i].idx = i;
    }
    qsort(ki, m, sizeof *ki, cmp_key_idx);
    double running = 0;
    for (size_t i = 0; i < m; i++) {
        double v = fmin(1.0, (double)(m - i) * ki[i].key);
        running = fmax(running, v); /* step-down: adjusted p-values never decrease */
        adj[ki[i].idx] = running;
    }
    free(ki);
    return SL_OK;
}

/* ---- Kolmogorov-Smirnov ---- */

/* Marsaglia, Tsang & Wang (2003), "Evaluating Kolmogorov's distribution", J. Stat. Software 8(18):
 * P(D_n < d) as an element of the n-th power of an m x m matrix, with a running decimal exponent
 * against overflow. */
static void mtw_mul(const double *A, const double *B, double *C, int m)
{
    for (int i = 0; i < m; i++)
        for (int j = 0; j < m; j++) {
            double s = 0;
            for (int k = 0; k < m; k++) s += A[i * m + k] * B[k * m + j];
            C[i * m + j] = s;
        }
}

static int mtw_pow(const double *A, int eA, double *V, int *eV, int m, size_t n, double *B)
{
    if (n == 1) {
        memcpy(V, A, (size_t)m * m * sizeof *V);
        *eV = eA;
        return 0;
    }
    mtw_pow(A, eA, V, eV, m, n / 2, B);
    mtw_mul(V, V, B, m);
    int eB = 2 * (*eV);
    if (n % 2 == 0) {
        memcpy(V, B, (size_t)m * m * sizeof *V);
        *eV = eB;
    } else {
        mtw_mul(A, B, V, m);
        *eV = eA + eB;
    }
    if (V[(m / 2) * m + (m / 2)] > 1e140) {
        for (int i = 0; i < m * m; i++) V[i] *= 1e-140;
        *eV += 140;
    }
    return 0;
}

static double ks_asymptotic_sf(size_t n, double d)
{
    /* Kolmogorov's limit with Stephens' finite-n correction. */
    double rn = sqrt((double)n), t = (rn + 0.12 + 0.11 / rn) * d, s = 0;
    for (int j = 1; j <= 100; j++) {
        double term = 2 * ((j & 1) ? 1 : -1) * exp(-2.0 * j * j * t * t);
        s += term;
        if (fabs(term) < 1e-17) break;
    }
    return fmin(1.0, fmax(0.0, s));
}

double sl_stats_ks_sf(size_t n, double d)
{
    if (n == 0 || d <= 0) return 1;
    if (d >= 1) return 0;
    double s = d * d * (double)n;
    int k = (int)((double)n * d) + 1, m = 2 * k - 1;
    /* The matrix method costs O(m^3 log n); beyond m = 301 or where the tail is below ~1e-15 (so
     * that 1 - P(D < d) would be all rounding), MTW's asymptotic tail formula takes over. */
    if (s > 18 || (m > 301 && (s > 7.24 || (s > 3.76 && n > 99))))
        return 2 * exp(-(2.000071 + .331 / sqrt((double)n) + 1.409 / (double)n) * s);
    if (m > 301) return ks_asymptotic_sf(n, d);
    double h = k - (double)n * d;
    double *H = calloc(3 * (size_t)m * m, sizeof *H);
    if (!H) return NAN;
    double *Q = H + (size_t)m * m, *B = Q + (size_t)m * m;
    for (int i = 0; i < m; i++)
        for (int j = 0; j < m; j++) H[i * m + j] = (i - j + 1 < 0) ? 0 : 1;
    for (int i = 0; i < m; i++) {
        H[i * m] -= pow(h, i + 1);
        H[(m - 1) * m + i] -= pow(h, m - i);
    }
    H[(m - 1) * m] += (2 * h - 1 > 0 ? pow(2 * h - 1, m) : 0);
    for (int i = 0; i < m; i++)
        for (int j = 0; j < m; j++)
            if (i - j + 1 > 0)
                for (int g = 1; g <= i - j + 1; g++) H[i * m + j] /= g;
    int eQ = 0;
    mtw_pow(H, 0, Q, &eQ, m, n, B);
    double v = Q[(k - 1) * m + k - 1];
    for (size_t i = 1; i <= n; i++) {
        v = v * (double)i / (double)n;
        if (v < 1e-140) {
            v *= 1e140;
            eQ -= 140;
        }
    }
    v *= pow(10., eQ);
    free(H);
    return fmin(1.0, fmax(0.0, 1.0 - v));
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int sl_stats_ks_uniform(const double *x, size_t n, double *D, double *p_value)
{
    if (n == 0) return sl_fail(SL_EINPUT, "KS test: no values");
    double *s = sl_malloc(n * sizeof *s);
    if (!s) return SL_EFAIL;
    for (size_t i = 0; i < n; i++) {
        if (!(x[i] >= 0 && x[i] <= 1)) {
            free(s);
            return sl_fail(SL_EINPUT, "KS test: value %zu is %g, expected a value in [0, 1]", i, x[i]);
        }
        s[i] = x[i];
    }
    qsort(s, n, sizeof *s, cmp_double);
    double d = 0;
    for (size_t i = 0; i < n; i++) {
        d = fmax(d, (double)(i + 1) / (double)n - s[i]);
        d = fmax(d, s[i] - (double)i / (double)n);
    }
    free(s);
    *D = d;
    *p_value = sl_stats_ks_sf(n, d);
    return SL_OK;
}

/* ---- confidence intervals ---- */

static int check_level(double a)
{
    if (!(a > 0 && a < 1)) return sl_fail(SL_EINPUT, "confidence level: a = %g, expected 0 < a < 1", a);
    return SL_OK;
}

int sl_stats_wilson(uint64_t x, uint64_t n, double a, double *lo, double *hi)
{
    if (check_level(a)) return SL_EINPUT;
    if (n == 0 || x > n) return sl_fail(SL_EINPUT, "Wilson interval: %llu successes of %llu trials",
                                        (unsigned long long)x, (unsigned long long)n);
    double z = gsl_cdf_ugaussian_Qinv(a / 2), nn = (double)n, p = (double)x / nn, z2 = z * z;
    double center = (p + z2 / (2 * nn)) / (1 + z2 / nn);
    double half = z / (1 + z2 / nn) * sqrt(p * (1 - p) / nn + z2 / (4 * nn * nn));
    *lo = fmax(0.0, center - half);
    *hi = fmin(1.0, center + half);
    return SL_OK;
}

/* Quantile of Beta(a, b) by bisection on the CDF: GSL's own inverse aborts through its error
 * handler for extreme parameters (e.g. a = 4, b = 99997), and a library must not abort. */
static double beta_quantile(double prob, double a, double b)
{
    double lo = 0, hi = 1;
    for (int it = 0; it < 200; it++) {
        double mid = 0.5 * (lo + hi);
        if (gsl_cdf_beta_P(mid, a, b) < prob) lo = mid;
        else hi = mid;
        if (hi - lo <= 1e-15 * hi) break;
    }
    return 0.5 * (lo + hi);
}

int sl_stats_clopper_pearson(uint64_t x, uint64_t n, double a, double *lo, double *hi)
{
    if (check_level(a)) return SL_EINPUT;
    if (n == 0 || x > n) return sl_fail(SL_EINPUT, "Clopper-Pearson interval: %llu successes of %llu trials",
                                        (unsigned long long)x, (unsigned long long)n);
    double xd = (double)x, nd = (double)n;
    *lo = x == 0 ? 0 : beta_quantile(a / 2, xd, nd - xd + 1);
    *hi = x == n ? 1 : beta_quantile(1 - a / 2, xd + 1, nd - xd);
    return SL_OK;
}

int sl_stats_mean_ci(double mean, double sd, uint64_t n, double a, double *lo, double *hi)
{
    if (check_level(a)) return SL_EINPUT;
    if (n == 0) return sl_fail(SL_EINPUT, "mean interval: no observations");
    double h = gsl_cdf_ugaussian_Qinv(a / 2) * sd / sqrt((double)n);
    *lo = mean - h;
    *hi = mean + h;
    return SL_OK;
}

/* ---- total variation ---- */

static double tv_of(const uint64_t *counts, uint64_t n, const double *pmf, size_t k)
{
    double s = 0;
    for (size_t j = 0; j < k; j++) s += fabs((double)counts[j] / (double)n - pmf[j]);
    return 0.5 * s;
}

int sl_stats_tv_ci(const uint64_t *counts, const double *pmf, size_t k, double a, double *tv, double *lo,
                   double *hi)
{
    if (check_level(a)) return SL_EINPUT;
    uint64_t n = 0;
    for (size_t j = 0; j < k; j++) n += counts[j];
    if (n == 0) return sl_fail(SL_EINPUT, "TV estimate: no observations");
    *tv = tv_of(counts, n, pmf, k);
    double eps = sqrt(((double)k * log(2.0) + log(1 / a)) / (2.0 * (double)n));
    *lo = fmax(0.0, *tv - eps);
    *hi = fmin(1.0, *tv + eps);
    return SL_OK;
}

int sl_stats_tv_bootstrap(const uint64_t *counts, const double *pmf, size_t k, double a, size_t n_boot,
                          uint64_t seed, double *tv, double *lo, double *hi)
{
    if (check_level(a)) return SL_EINPUT;
    uint64_t n = 0;
    for (size_t j = 0; j < k; j++) n += counts[j];
    if (n == 0 || n > UINT32_MAX || n_boot < 2)
        return sl_fail(SL_EINPUT, "TV bootstrap: n = %llu observations, %zu resamples", (unsigned long long)n, n_boot);
    *tv = tv_of(counts, n, pmf, k);
    double *phat = sl_malloc(k * sizeof *phat);
    unsigned *y = sl_malloc(k * sizeof *y);
    uint64_t *y64 = sl_malloc(k * sizeof *y64);
    double *t = sl_malloc(n_boot * sizeof *t);
    gsl_rng *r = sl_rng_alloc(seed, SL_STREAM_BOOT, 1);
    int rc = SL_OK;
    if (!phat || !y || !y64 || !t || !r) {
        rc = SL_EFAIL;
        goto done;
    }
    for (size_t j = 0; j < k; j++) phat[j] = (double)counts[j] / (double)n;
    for (size_t b = 0; b < n_boot; b++) {
        gsl_ran_multinomial(r, k, (unsigned)n, phat, y);
        for (size_t j = 0; j < k; j++) y64[j] = y[j];
        t[b] = tv_of(y64, n, pmf, k);
    }
    qsort(t, n_boot, sizeof *t, cmp_double);
    size_t il = (size_t)floor(a / 2 * (double)(n_boot - 1)), ih = (size_t)ceil((1 - a / 2) * (double)(n_boot - 1));
    *lo = t[il];
    *hi = t[ih];
done:
    free(phat);
    free(y);
    free(y64);
    free(t);
    if (r) gsl_rng_free(r);
    return rc;
}

/* ---- power ---- */

/* Poisson-weighted series: sf selects sum w_j Q(x; df + 2j) (power) instead of sum w_j P(...). */
static double ncx2_series(double x, double df, double lambda, int sf)
{
    if (lambda <= 0) return sf ? gsl_cdf_chisq_Q(x, df) : gsl_cdf_chisq_P(x, df);
    double mu = lambda / 2;
    long j0 = (long)floor(mu);
    double lw0 = -mu + (double)j0 * log(mu) - lgamma((double)j0 + 1);
    double s = 0, wsum = 0;
    /* Upward from the mode. */
    double lw = lw0;
    for (long j = j0;; j++) {
        double w = exp(lw);
        double f = sf ? gsl_cdf_chisq_Q(x, df + 2.0 * j) : gsl_cdf_chisq_P(x, df + 2.0 * j);
        s += w * f;
        wsum += w;
        if (w < 1e-17 && j > j0 + 5) break;
        lw += log(mu) - log((double)j + 1);
    }
    /* Downward. */
    lw = lw0;
    for (long j = j0 - 1; j >= 0; j--) {
        lw += log((double)j + 1) - log(mu);
        double w = exp(lw);
        double f = sf ? gsl_cdf_chisq_Q(x, df + 2.0 * j) : gsl_cdf_chisq_P(x, df + 2.0 * j);
        s += w * f;
        wsum += w;
        if (w < 1e-17) break;
    }
    (void)wsum;
    return fmin(1.0, fmax(0.0, s));
}

double sl_stats_ncx2_cdf(double x, double df, double lambda)
{
    if (x <= 0) return 0;
    return ncx2_series(x, df, lambda, 0);
}

double sl_stats_power(double lambda, double df, double a)
{
    if (df <= 0) return a;
    double crit = gsl_cdf_chisq_Qinv(a, df);
    return ncx2_series(crit, df, lambda, 1);
}

int sl_stats_lambda_for_power(double df, double a, double power, double *lambda)
{
    if (!(df > 0)) return sl_fail(SL_EINPUT, "power: df = %g, expected > 0", df);
    if (check_level(a)) return SL_EINPUT;
    if (!(power > a && power < 1)) return sl_fail(SL_EINPUT, "power: %g, expected a value in (level, 1)", power);
    double lo = 0, hi = 1;
    while (sl_stats_power(hi, df, a) < power) {
        lo = hi;
        hi *= 2;
        if (hi > 1e9) return sl_fail(SL_EFAIL, "power: no non-centrality below 1e9 reaches %g", power);
    }
    for (int it = 0; it < 200 && hi - lo > 1e-10 * hi; it++) {
        double mid = 0.5 * (lo + hi);
        if (sl_stats_power(mid, df, a) < power) lo = mid;
        else hi = mid;
    }
    *lambda = 0.5 * (lo + hi);
    return SL_OK;
}

int sl_stats_n_for_tv(double delta, double df, double a, double power, double *n)
{
    if (!(delta > 0 && delta <= 1)) return sl_fail(SL_EINPUT, "tv: %g, expected a value in (0, 1]", delta);
    double lambda;
    int rc = sl_stats_lambda_for_power(df, a, power, &lambda);
    if (rc) return rc;
    *n = ceil(lambda / (4 * delta * delta));
    return SL_OK;
}

double sl_stats_power_at_n(double n, double delta, double df, double a)
{
    return sl_stats_power(4 * n * delta * delta, df, a);
}

double sl_stats_quantile_sorted(const double *x, size_t n, double q)
{
    if (n == 0) return NAN;
    double h = q * (double)(n - 1);
    size_t i = (size_t)floor(h);
    if (i + 1 >= n) return x[n - 1];
    return x[i] + (h - (double)i) * (x[i + 1] - x[i]);
}

double sl_stats_quantile(double *x, size_t n, double q)
{
    qsort(x, n, sizeof *x, cmp_double);
    return sl_stats_quantile_sorted(x, n, q);
}

void sl_stats_percentile_ci(double *x, size_t n, double level, double *lo, double *hi)
{
    qsort(x, n, sizeof *x, cmp_double);
    *lo = sl_stats_quantile_sorted(x, n, (1 - level) / 2);
    *hi = sl_stats_quantile_sorted(x, n, (1 + level) / 2);
}
