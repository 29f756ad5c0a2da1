/*
 * test_dist.c: probability vectors. Standardisation against a naive twin kept here; identities of
 * beta, D_LK and TV; the alias table's implied pmf exactly; samplers by a chi-square test.
 */
#include <criterion/criterion.h>
#include <gsl/gsl_cdf.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "sl_common.h"
#include "sl_dist.h"

/* ---- naive twin of sl_dist_standardise: plain loops, selection of maxima, no sorting helper ---- */
static void naive_standardise(const double *logits, size_t V, sl_sampling s, double *p)
{
    if (s.temperature == 0) {
        size_t best = 0;
        for (size_t i = 1; i < V; i++)
            if (logits[i] > logits[best]) best = i;
        for (size_t i = 0; i < V; i++) p[i] = i == best;
        return;
    }
    double mx = -INFINITY, sum = 0;
    for (size_t i = 0; i < V; i++) mx = fmax(mx, logits[i] / s.temperature);
    for (size_t i = 0; i < V; i++) sum += p[i] = exp(logits[i] / s.temperature - mx);
    for (size_t i = 0; i < V; i++) p[i] /= sum;
    /* rank of each token: how many tokens come before it (higher p, or equal p and lower id) */
    size_t *rank = calloc(V, sizeof *rank);
    for (size_t i = 0; i < V; i++)
        for (size_t j = 0; j < V; j++)
            if (p[j] > p[i] || (p[j] == p[i] && j < i)) rank[i]++;
    if (s.top_k > 0 && s.top_k < V) {
        sum = 0;
        for (size_t i = 0; i < V; i++) {
            if (rank[i] >= s.top_k) p[i] = 0;
            sum += p[i];
        }
        for (size_t i = 0; i < V; i++) p[i] /= sum;
    }
    if (s.top_p < 1) {
        /* keep token i if the mass strictly before it in rank order is < top_p */
        double *before = calloc(V, sizeof *before);
        for (size_t i = 0; i < V; i++)
            for (size_t j = 0; j < V; j++)
                if (rank[j] < rank[i]) before[i] += p[j];
        sum = 0;
        for (size_t i = 0; i < V; i++) {
            if (!(before[i] < s.top_p)) p[i] = 0;
            sum += p[i];
        }
        for (size_t i = 0; i < V; i++) p[i] /= sum;
        free(before);
    }
    if (s.min_p > 0) {
        double pmax = 0;
        for (size_t i = 0; i < V; i++) pmax = fmax(pmax, p[i]);
        sum = 0;
        for (size_t i = 0; i < V; i++) {
            if (p[i] < s.min_p * pmax) p[i] = 0;
            sum += p[i];
        }
        for (size_t i = 0; i < V; i++) p[i] /= sum;
    }
    free(rank);
}

static void random_logits(gsl_rng *r, double *x, size_t V, double scale)
{
    for (size_t i = 0; i < V; i++) x[i] = scale * (sl_rng_uniform53(r) - 0.5);
}

/* Tolerance 1e-12: both compute the same sums in a different order; the two top-p rules agree except
 * when a cumulative mass lands within rounding of top_p, which random logits make vanishingly rare. */
Test(dist, standardise_matches_naive_twin)
{
    gsl_rng *r = sl_rng_alloc(5, SL_STREAM_DATA, 0);
    const size_t Vs[] = {1, 2, 7, 50, 300};
    const double temps[] = {0, 0.5, 1, 2};
    const size_t ks[] = {0, 1, 3, 10};
    const double tps[] = {1, 0.9, 0.5, 0.01};
    const double mps[] = {0, 0.05, 0.3};
    double logits[300], a[300], b[300];
    sl_dist_work *w = sl_dist_work_alloc(300);
    for (size_t vi = 0; vi < 5; vi++) {
        size_t V = Vs[vi];
        random_logits(r, logits, V, 8);
        if (V >= 7) logits[3] = logits[5]; /* a tie */
        for (size_t ti = 0; ti < 4; ti++)
            for (size_t ki = 0; ki < 4; ki++)
                for (size_t pi = 0; pi < 4; pi++)
                    for (size_t mi = 0; mi < 3; mi++) {
                        sl_sampling s = {temps[ti], ks[ki], tps[pi], mps[mi]};
                        cr_assert_eq(sl_dist_standardise(logits, V, &s, a, w), SL_OK);
                        naive_standardise(logits, V, s, b);
                        for (size_t i = 0; i < V; i++)
                            cr_assert(fabs(a[i] - b[i]) < 1e-12, "V=%zu T=%g k=%zu p=%g m=%g: [%zu] %.17g vs %.17g", V,
                                      s.temperature, s.top_k, s.top_p, s.min_p, i, a[i], b[i]);
                        cr_assert_eq(sl_dist_check(a, V, 1e-12, "p"), SL_OK);
                    }
    }
    sl_dist_work_free(w);
    gsl_rng_free(r);
}

Test(dist, temperature_zero_breaks_ties_by_lowest_id)
{
    double logits[] = {1, 3, 2, 3}, p[4];
    sl_dist_work *w = sl_dist_work_alloc(4);
    sl_sampling s = {0, 0, 1, 0};
    cr_assert_eq(sl_dist_standardise(logits, 4, &s, p, w), SL_OK);
    double want[] = {0, 1, 0, 0};
    cr_assert_arr_eq(p, want, sizeof want);
    float lf[] = {1, 3, 2, 3};
    cr_assert_eq(sl_dist_standardise_f32(lf, 4, &s, p, w), SL_OK);
    cr_assert_arr_eq(p, want, sizeof want);
    sl_dist_work_free(w);
}

/* sl_dist_exp_nonpos (the softmax's vectorised exponential) against glibc's exp, whose results are
 * correctly rounded but for rare cases (< 1 ulp): within 2 ulp (the bound sl_dist.c states: the
 * Taylor polynomial's truncation < 4e-18 and the rounding of its Horner steps and of the scaling)
 * over 6 million points of [-745.5, 0], at the ends of the subnormals and for -inf; observed 1. And
 * a softmax of V = 4099 logits (the vector loop and a tail of 3) within 1e-13 relative of one through
 * libm's exp with the sum in index order: 2 ulp of each exponential, plus the two sums' rounding in
 * their different orders (at most V 2^-53 ~ 4.6e-13 each in the worst case, ~sqrt(V) 2^-53 ~ 7e-15
 * typically; observed 1.3e-15). */
static int64_t ulp_order(double d)
{
    int64_t i;
    memcpy(&i, &d, sizeof i);
    return i;
}

Test(dist, exp_nonpos_within_two_ulp_of_libm)
{
    int64_t worst = 0;
    for (double x = 0; x >= -745.5; x -= 0.0001234567) {
        int64_t u = ulp_order(sl_dist_exp_nonpos(x)) - ulp_order(exp(x));
        if (u < 0) u = -u;
        if (u > worst) worst = u;
        cr_assert(u <= 2, "exp(%.17g): %.17g vs libm %.17g", x, sl_dist_exp_nonpos(x), exp(x));
    }
    const double special[] = {0, -0.0, -1e-300, -708.39, -709.78, -744.4, -745.13, -745.14, -746, -1e300, -INFINITY};
    for (size_t i = 0; i < sizeof special / sizeof *special; i++) {
        int64_t u = ulp_order(sl_dist_exp_nonpos(special[i])) - ulp_order(exp(special[i]));
        cr_assert(u >= -2 && u <= 2, "exp(%g): %.17g vs libm %.17g", special[i], sl_dist_exp_nonpos(special[i]),
                  exp(special[i]));
    }
    cr_assert_eq(sl_dist_exp_nonpos(-INFINITY), 0.0);
    cr_assert_eq(sl_dist_exp_nonpos(0), 1.0);
    gsl_rng *r = sl_rng_alloc(6, SL_STREAM_DATA, 0);
    const size_t V = 4099;
    double *z = malloc(V * sizeof *z), *p = malloc(V * sizeof *p);
    random_logits(r, z, V, 12);
    z[17] = -INFINITY;
    cr_assert_eq(sl_dist_softmax(z, V, p), SL_OK);
    double mx = -INFINITY, sum = 0;
    for (size_t i = 0; i < V; i++) mx = z[i] > mx ? z[i] : mx;
    for (size_t i = 0; i < V; i++) sum += exp(z[i] - mx);
    for (size_t i = 0; i < V; i++) {
        const double want = exp(z[i] - mx) / sum;
        cr_assert(fabs(p[i] - want) <= 1e-13 * want, "p[%zu] = %.17g vs %.17g", i, p[i], want);
    }
    cr_assert_eq(p[17], 0.0);
    free(z), free(p);
    gsl_rng_free(r);
}

Test(dist, softmax_is_stable_and_checks_input)
{
    double logits[] = {1000, 1001, -INFINITY}, p[3];
    cr_assert_eq(sl_dist_softmax(logits, 3, p), SL_OK);
    /* closed form: 1/(1+e), e/(1+e), 0 */
    cr_assert(fabs(p[0] - 1 / (1 + M_E)) < 1e-15 && fabs(p[1] - M_E / (1 + M_E)) < 1e-15 && p[2] == 0);
    double bad[] = {0, NAN};
    cr_assert_eq(sl_dist_softmax(bad, 2, p), SL_EINPUT);
    double inf[] = {0, INFINITY};
    cr_assert_eq(sl_dist_softmax(inf, 2, p), SL_EINPUT);
    double none[] = {-INFINITY, -INFINITY};
    cr_assert_eq(sl_dist_softmax(none, 2, p), SL_EINPUT);
}

Test(dist, check_rejects_bad_vectors)
{
    double nan_p[] = {0.5, NAN}, neg[] = {1.2, -0.2}, off[] = {0.5, 0.4}, ok[] = {0.5, 0.5};
    cr_assert_eq(sl_dist_check(nan_p, 2, SL_DIST_SUM_TOL, "p"), SL_EINPUT);
    cr_assert(strstr(sl_errmsg(), "p[1]") != NULL);
    cr_assert_eq(sl_dist_check(neg, 2, SL_DIST_SUM_TOL, "q"), SL_EINPUT);
    cr_assert(strstr(sl_errmsg(), "negative") != NULL);
    cr_assert_eq(sl_dist_check(off, 2, SL_DIST_SUM_TOL, "p"), SL_EINPUT);
    cr_assert(strstr(sl_errmsg(), "sums to 0.9") != NULL);
    cr_assert_eq(sl_dist_check(ok, 0, SL_DIST_SUM_TOL, "p"), SL_EINPUT);
    cr_assert_eq(sl_dist_check(ok, 2, SL_DIST_SUM_TOL, "p"), SL_OK);
    sl_sampling s = {-1, 0, 1, 0};
    cr_assert_eq(sl_sampling_validate(&s), SL_EINPUT);
    s = (sl_sampling){1, 0, 0, 0};
    cr_assert_eq(sl_sampling_validate(&s), SL_EINPUT);
    s = (sl_sampling){1, 0, 1, 1};
    cr_assert_eq(sl_sampling_validate(&s), SL_EINPUT);
}

/* Lemma 3.3: D_LK = 1 - beta; and D_LK equals total variation; residual normaliser = 1 - beta.
 * Tolerance 1e-14: sums of ~100 terms of size <= 1. */
Test(dist, beta_dlk_tv_residual_identities)
{
    gsl_rng *r = sl_rng_alloc(9, SL_STREAM_DATA, 0);
    double lp[100], lq[100], p[100], q[100], res[100];
    for (int rep = 0; rep < 200; rep++) {
        size_t V = 1 + rep % 100;
        random_logits(r, lp, V, 6);
        random_logits(r, lq, V, 6);
        sl_dist_softmax(lp, V, p);
        sl_dist_softmax(lq, V, q);
        if (rep % 3 == 0 && V > 1) { /* a zero in q: supports differ */
            q[rep % V] = 0;
            double s = 0;
            for (size_t i = 0; i < V; i++) s += q[i];
            for (size_t i = 0; i < V; i++) q[i] /= s;
        }
        double beta = sl_dist_beta(p, q, V), dlk = sl_dist_dlk(p, q, V), tv = sl_dist_tv(p, q, V);
        cr_assert(fabs(dlk - (1 - beta)) < 1e-14, "D_LK %.17g vs 1-beta %.17g", dlk, 1 - beta);
        cr_assert(fabs(dlk - tv) < 1e-14);
        cr_assert(fabs(sl_dist_dlk(q, p, V) - dlk) < 1e-15, "D_LK is symmetric");
        double z = sl_dist_residual(p, q, V, res);
        cr_assert(fabs(z - (1 - beta)) < 1e-14);
        if (z > 1e-12) {
            cr_assert_eq(sl_dist_check(res, V, 1e-12, "residual"), SL_OK);
            for (size_t i = 0; i < V; i++)
                cr_assert(fabs(res[i] - fmax(0, p[i] - q[i]) / z) < 1e-12);
        }
    }
    gsl_rng_free(r);
}

Test(dist, residual_when_beta_is_one_is_p)
{
    double p[] = {0.25, 0.75, 0}, res[3];
    cr_assert_eq(sl_dist_residual(p, p, 3, res), 0.0);
    cr_assert_arr_eq(res, p, sizeof p);
}

Test(dist, kl_and_entropy_closed_forms)
{
    double p[] = {0.5, 0.5}, q[] = {0.25, 0.75}, z[] = {1, 0};
    /* KL = 0.5 ln(0.5/0.25) + 0.5 ln(0.5/0.75) */
    cr_assert(fabs(sl_dist_kl(p, q, 2) - (0.5 * log(2) + 0.5 * log(2.0 / 3))) < 1e-15);
    cr_assert(isinf(sl_dist_kl(p, z, 2)));
    cr_assert_eq(sl_dist_kl(z, p, 2), log(2));
    cr_assert(fabs(sl_dist_entropy(p, 2) - log(2)) < 1e-15);
    cr_assert_eq(sl_dist_entropy(z, 2), 0);
}

/* The alias table is exact: the pmf it implies, sum over columns of prob/V to the column and
 * (1-prob)/V to its alias, equals p to 1e-13 (rounding of ~V additions); zero-probability tokens get
 * exactly zero mass. */
Test(dist, alias_table_implies_exactly_p)
{
    gsl_rng *r = sl_rng_alloc(11, SL_STREAM_DATA, 0);
    const size_t Vs[] = {1, 2, 3, 17, 256, 4096};
    for (size_t vi = 0; vi < 6; vi++) {
        size_t V = Vs[vi];
        double *lg = malloc(V * sizeof *lg), *p = malloc(V * sizeof *p), *imp = calloc(V, sizeof *imp);
        random_logits(r, lg, V, 20);
        for (size_t i = 0; i < V; i += 3) lg[i] = -INFINITY;
        if (V == 1) lg[0] = 0;
        sl_dist_softmax(lg, V, p);
        sl_alias *a = sl_alias_alloc(V);
        sl_alias_build(a, p);
        for (size_t c = 0; c < V; c++) {
            imp[c] += a->prob[c] / (double)V;
            imp[a->alias[c]] += (1 - a->prob[c]) / (double)V;
        }
        for (size_t i = 0; i < V; i++) {
            cr_assert(fabs(imp[i] - p[i]) < 1e-13, "V=%zu token %zu: %.17g vs %.17g", V, i, imp[i], p[i]);
            if (p[i] == 0) cr_assert_eq(imp[i], 0.0, "zero-probability token %zu is drawable", i);
        }
        sl_alias_free(a);
        free(lg);
        free(p);
        free(imp);
    }
    gsl_rng_free(r);
}

Test(dist, sample_u_skips_zeros_and_handles_rounding)
{
    double p[] = {0, 0.5, 0, 0.5, 0};
    cr_assert_eq(sl_dist_sample_u(p, 5, 0.0), 1);
    cr_assert_eq(sl_dist_sample_u(p, 5, 0.4999), 1);
    cr_assert_eq(sl_dist_sample_u(p, 5, 0.5), 3);
    cr_assert_eq(sl_dist_sample_u(p, 5, 1.0), 3); /* beyond the total: last possible token */
}

/* Pearson chi-square against a known pmf, pooling the smallest-expected categories until every
 * expected count is >= 5. Returns the p-value. */
static double chisq_pvalue(const size_t *counts, const double *p, size_t V, size_t n)
{
    double stat = 0, pool_e = 0, pool_o = 0;
    size_t df = 0;
    for (size_t i = 0; i < V; i++) {
        double e = p[i] * (double)n;
        if (p[i] == 0) {
            cr_assert_eq(counts[i], 0, "token %zu has probability 0 but was drawn", i);
            continue;
        }
        if (e < 5) {
            pool_e += e;
            pool_o += (double)counts[i];
            continue;
        }
        stat += ((double)counts[i] - e) * ((double)counts[i] - e) / e;
        df++;
    }
    if (pool_e > 0) {
        stat += (pool_o - pool_e) * (pool_o - pool_e) / pool_e;
        df++;
    }
    return gsl_cdf_chisq_Q(stat, (double)(df - 1));
}

/* Draws from standardised pmfs (alias and inverse CDF) pass a chi-square test at the 1e-4 level
 * with a fixed seed (n = 200000); the same counts tested against a slightly different pmf (another
 * temperature) fail at 1e-6, so the test has power. */
Test(dist, standardised_samplers_pass_goodness_of_fit)
{
    gsl_rng *r = sl_rng_alloc(21, SL_STREAM_DATA, 0);
    const size_t V = 64, n = 200000;
    double logits[64], p[64], other[64];
    random_logits(r, logits, V, 6);
    sl_dist_work *w = sl_dist_work_alloc(V);
    sl_sampling settings[] = {{1, 0, 1, 0}, {0.7, 0, 1, 0}, {1.3, 20, 1, 0}, {1, 0, 0.8, 0}, {1, 0, 1, 0.1},
                              {0.9, 30, 0.95, 0.02}};
    sl_alias *a = sl_alias_alloc(V);
    size_t counts[64];
    for (size_t si = 0; si < sizeof settings / sizeof settings[0]; si++) {
        cr_assert_eq(sl_dist_standardise(logits, V, &settings[si], p, w), SL_OK);
        sl_alias_build(a, p);
        for (int method = 0; method < 2; method++) {
            memset(counts, 0, sizeof counts);
            for (size_t k = 0; k < n; k++)
                counts[method ? sl_dist_sample_u(p, V, sl_rng_uniform53(r)) : sl_alias_sample(a, r)]++;
            double pv = chisq_pvalue(counts, p, V, n);
            cr_assert(pv > 1e-4, "setting %zu method %d: chi-square p = %g", si, method, pv);
            sl_sampling s2 = settings[si];
            s2.temperature *= 1.1;
            sl_dist_standardise(logits, V, &s2, other, w);
            int support_ok = 1;
            for (size_t i = 0; i < V; i++) support_ok &= !(other[i] == 0 && counts[i] > 0);
            if (support_ok) {
                double pv2 = chisq_pvalue(counts, other, V, n);
                cr_assert(pv2 < 1e-6, "setting %zu: a 10%% temperature error went undetected (p = %g)", si, pv2);
            }
        }
    }
    sl_alias_free(a);
    sl_dist_work_free(w);
    gsl_rng_free(r);
}

/* The other rules' acceptance on a pair worked by hand: p = (0.5, 0.3, 0.2), q = (0.2, 0.3, 0.5).
 * beta = 0.2 + 0.3 + 0.2 = 0.7; lenient l = 0.5: min(0.2, 1) + min(0.3, 0.6) + min(0.5, 0.4) = 0.9;
 * sampler match 0.1 + 0.09 + 0.1 = 0.29; min q/p = min(0.4, 1, 2.5) = 0.4. */
Test(dist, other_rules_acceptance_by_hand)
{
    const double p[] = {0.5, 0.3, 0.2}, q[] = {0.2, 0.3, 0.5};
    cr_assert(fabs(sl_dist_alpha_lenient(p, q, 3, 1.0) - 0.7) < 1e-15);
    cr_assert(fabs(sl_dist_alpha_lenient(p, q, 3, 0.5) - 0.9) < 1e-15);
    cr_assert(fabs(sl_dist_alpha_match(p, q, 3) - 0.29) < 1e-15);
    cr_assert(fabs(sl_dist_alpha_nonit(p, q, 3) - 0.4) < 1e-15);
}
