/* test_stats.c: analysis/sl_stats against scipy reference values (tests/fixtures/stats_fixtures.h,
 * written by tests/gen_stats_fixtures.py) and against closed forms. */
#include <criterion/criterion.h>
#include <math.h>
#include <gsl/gsl_randist.h>
#include <stdlib.h>

#include "fixtures/stats_fixtures.h"
#include "sl_common.h"
#include "sl_stats.h"

#define N_OF(a) (sizeof(a) / sizeof((a)[0]))

/* Relative closeness with an absolute floor for values near 0. */
static int close_rel(double a, double b, double rel, double abs_floor)
{
    return fabs(a - b) <= rel * fabs(b) + abs_floor;
}

/* Statistics: same arithmetic as scipy on the same pooled cells, so 1e-10 relative (sums of tens
 * of terms in double). p-values: GSL's and scipy's chi^2 tails (both from the incomplete gamma
 * function) agree to ~1e-12 relative; 1e-8 leaves room, with an absolute floor of 1e-300. */
Test(stats, gof_pearson_and_g_match_scipy)
{
    for (size_t i = 0; i < N_OF(gof_fixtures); i++) {
        const gof_fixture *f = &gof_fixtures[i];
        sl_gof x, g;
        cr_assert_eq(sl_stats_gof(f->counts, f->pmf, f->k, SL_GOF_PEARSON, &x), SL_OK);
        cr_assert_eq(sl_stats_gof(f->counts, f->pmf, f->k, SL_GOF_G, &g), SL_OK);
        cr_assert_eq((int)x.df, f->df, "case %zu: df %g vs %d", i, x.df, f->df);
        cr_assert(close_rel(x.stat, f->x2, 1e-10, 1e-12), "case %zu: X2 %.17g vs %.17g", i, x.stat, f->x2);
        cr_assert(close_rel(g.stat, f->g, 1e-10, 1e-12), "case %zu: G %.17g vs %.17g", i, g.stat, f->g);
        cr_assert(close_rel(x.p_value, f->p_x2, 1e-8, 1e-300), "case %zu: p %.17g vs %.17g", i, x.p_value, f->p_x2);
        cr_assert(close_rel(g.p_value, f->p_g, 1e-8, 1e-300), "case %zu: p %.17g vs %.17g", i, g.p_value, f->p_g);
    }
}

/* Pooling puts every cell at expected >= 5 (when more than one cell is left) and keeps totals. */
Test(stats, pooling_reaches_min_expected_and_keeps_totals)
{
    for (size_t i = 0; i < N_OF(gof_fixtures); i++) {
        const gof_fixture *f = &gof_fixtures[i];
        double obs[64], ex[64];
        size_t c, np;
        int imp;
        cr_assert_eq(sl_stats_pool(f->counts, f->pmf, f->k, 5.0, obs, ex, &c, &np, &imp), SL_OK);
        double so = 0, se = 0, n = 0;
        for (size_t j = 0; j < f->k; j++) n += (double)f->counts[j];
        for (size_t j = 0; j < c; j++) {
            so += obs[j];
            se += ex[j];
            if (c > 1) cr_assert(ex[j] >= 5.0, "case %zu cell %zu: expected %g", i, j, ex[j]);
        }
        cr_assert(fabs(so - n) < 1e-9 && fabs(se - n) < 1e-9 * n);
    }
}

/* An observation on a zero-probability category makes the null impossible. */
Test(stats, zero_probability_hit_gives_p_zero)
{
    const uint64_t counts[] = {50, 49, 1};
    const double pmf[] = {0.5, 0.5, 0.0};
    sl_gof r;
    cr_assert_eq(sl_stats_gof(counts, pmf, 3, SL_GOF_PEARSON, &r), SL_OK);
    cr_assert(r.impossible && r.p_value == 0 && isinf(r.stat));
    double p;
    cr_assert_eq(sl_stats_exact_multinomial(counts, pmf, 3, 1e6, &p), SL_OK);
    cr_assert_eq(p, 0);
}

/* Exact enumeration against itertools + scipy.stats.multinomial: both sum the same few hundred
 * probabilities, 1e-10 relative. */
Test(stats, exact_multinomial_matches_enumeration)
{
    for (size_t i = 0; i < N_OF(exact_fixtures); i++) {
        const exact_fixture *f = &exact_fixtures[i];
        double p;
        cr_assert_eq(sl_stats_exact_multinomial(f->counts, f->pmf, f->k, 1e6, &p), SL_OK);
        cr_assert(close_rel(p, fmin(1.0, f->p), 1e-10, 1e-15), "case %zu: %.17g vs %.17g", i, p, f->p);
    }
    /* Too many outcomes: refused with SL_EINPUT, not silently slow. */
    uint64_t big[10] = {100, 100, 100, 100, 100, 100, 100, 100, 100, 100};
    double pmf[10];
    for (int j = 0; j < 10; j++) pmf[j] = 0.1;
    double p;
    cr_assert_eq(sl_stats_exact_multinomial(big, pmf, 10, 1e6, &p), SL_EINPUT);
}

/* The Monte Carlo p-value estimates the exact one: with 200000 draws its standard error is at most
 * sqrt(0.25 / 2e5) = 1.1e-3; 5e-3 is 4.5 standard errors. Also reproducible for a fixed seed. */
Test(stats, mc_multinomial_estimates_exact)
{
    for (size_t i = 0; i < N_OF(exact_fixtures); i++) {
        const exact_fixture *f = &exact_fixtures[i];
        double p1, p2;
        cr_assert_eq(sl_stats_mc_multinomial(f->counts, f->pmf, f->k, 200000, 7, &p1), SL_OK);
        cr_assert_eq(sl_stats_mc_multinomial(f->counts, f->pmf, f->k, 200000, 7, &p2), SL_OK);
        cr_assert_eq(p1, p2);
        cr_assert(fabs(p1 - fmin(1.0, f->p)) < 5e-3, "case %zu: %g vs %g", i, p1, f->p);
    }
}

/* Two-sample homogeneity against scipy.stats.chi2_contingency (correction=False) on the same
 * pooled table: 1e-10 relative on the statistic, 1e-8 on the p-value (as above). */
Test(stats, homogeneity_matches_scipy)
{
    for (size_t i = 0; i < N_OF(hom_fixtures); i++) {
        const hom_fixture *f = &hom_fixtures[i];
        sl_gof x, g;
        cr_assert_eq(sl_stats_homogeneity(f->a, f->b, f->k, SL_GOF_PEARSON, &x), SL_OK);
        cr_assert_eq(sl_stats_homogeneity(f->a, f->b, f->k, SL_GOF_G, &g), SL_OK);
        cr_assert_eq((int)x.df, f->df, "case %zu: df %g vs %d", i, x.df, f->df);
        cr_assert(close_rel(x.stat, f->x2, 1e-10, 1e-12), "case %zu: X2 %.17g vs %.17g", i, x.stat, f->x2);
        cr_assert(close_rel(g.stat, f->g, 1e-10, 1e-12), "case %zu: G %.17g vs %.17g", i, g.stat, f->g);
        cr_assert(close_rel(x.p_value, f->p_x2, 1e-8, 1e-300));
        cr_assert(close_rel(g.p_value, f->p_g, 1e-8, 1e-300));
    }
}

Test(stats, holm_matches_definition)
{
    double adj[N_OF(holm_p)];
    cr_assert_eq(sl_stats_holm(holm_p, N_OF(holm_p), adj), SL_OK);
    for (size_t i = 0; i < N_OF(holm_p); i++)
        cr_assert(fabs(adj[i] - holm_adj[i]) < 1e-15, "%zu: %g vs %g", i, adj[i], holm_adj[i]);
    double bad = 1.5;
    cr_assert_eq(sl_stats_holm(&bad, 1, adj), SL_EINPUT);
}

/* KS statistic: the same max over sorted values, 1e-14. p-value: scipy's kstwo (Simard &
 * L'Ecuyer) against Marsaglia-Tsang-Wang: 1e-7 relative where both are exact (n <= 140); for
 * n > 140 scipy switches to approximations good to ~5 digits, so 2e-5 there (every fixture here
 * has n D <= 150, so the matrix method runs). */
Test(stats, ks_uniform_matches_scipy)
{
    for (size_t i = 0; i < N_OF(ks_fixtures); i++) {
        const ks_fixture *f = &ks_fixtures[i];
        double D, p;
        cr_assert_eq(sl_stats_ks_uniform(f->x, f->n, &D, &p), SL_OK);
        cr_assert(fabs(D - f->D) < 1e-14, "case %zu: D %.17g vs %.17g", i, D, f->D);
        double rel = f->n > 140 ? 2e-5 : 1e-7;
        cr_assert(close_rel(p, f->p, rel, 1e-15), "case %zu: p %.17g vs %.17g", i, p, f->p);
    }
    for (size_t i = 0; i < N_OF(kssf_fixtures); i++) {
        const kssf_fixture *f = &kssf_fixtures[i];
        double p = sl_stats_ks_sf(f->n, f->d);
        double rel = f->n > 140 ? 2e-5 : 1e-7;
        /* Past the matrix method (n D > 150) the asymptotic forms are good to a few percent. */
        if ((double)f->n * f->d > 150) rel = 5e-2;
        cr_assert(close_rel(p, f->sf, rel, 1e-15), "n %zu d %g: %.17g vs %.17g", f->n, f->d, p, f->sf);
    }
}

/* Wilson: closed form on both sides, 1e-12. Clopper-Pearson: GSL's and scipy's inverse incomplete
 * beta, 1e-9 relative. */
Test(stats, proportion_cis_match_scipy)
{
    for (size_t i = 0; i < N_OF(ci_fixtures); i++) {
        const ci_fixture *f = &ci_fixtures[i];
        double lo, hi;
        cr_assert_eq(sl_stats_wilson(f->x, f->n, f->a, &lo, &hi), SL_OK);
        cr_assert(fabs(lo - f->w_lo) < 1e-12 && fabs(hi - f->w_hi) < 1e-12, "case %zu: [%.17g, %.17g]", i, lo, hi);
        cr_assert_eq(sl_stats_clopper_pearson(f->x, f->n, f->a, &lo, &hi), SL_OK);
        cr_assert(close_rel(lo, f->cp_lo, 1e-9, 1e-15) && close_rel(hi, f->cp_hi, 1e-9, 1e-15),
                  "case %zu: [%.17g, %.17g] vs [%.17g, %.17g]", i, lo, hi, f->cp_lo, f->cp_hi);
    }
    double lo, hi;
    cr_assert_eq(sl_stats_wilson(1, 0, 0.05, &lo, &hi), SL_EINPUT);
    cr_assert_eq(sl_stats_mean_ci(2.0, 1.0, 100, 0.05, &lo, &hi), SL_OK);
    /* 1.959963984540054 = scipy.stats.norm.isf(0.025). */
    cr_assert(fabs(hi - 2.0 - 0.1959963984540054) < 1e-12);
}

/* Non-central chi^2: the Poisson series against scipy.stats.ncx2 (Boost), 1e-9 absolute. */
Test(stats, ncx2_cdf_matches_scipy)
{
    for (size_t i = 0; i < N_OF(ncx2_fixtures); i++) {
        const ncx2_fixture *f = &ncx2_fixtures[i];
        double c = sl_stats_ncx2_cdf(f->x, f->df, f->lambda);
        cr_assert(fabs(c - f->cdf) < 1e-9, "case %zu: %.17g vs %.17g", i, c, f->cdf);
    }
}

/* The non-centrality for power 0.9 at level 0.01, df 1 is 14.88 (THEORY.md); all cases against
 * scipy's brentq on ncx2.sf to 1e-6 relative (both solve to ~1e-10). */
Test(stats, lambda_for_power_matches_scipy)
{
    double lam;
    cr_assert_eq(sl_stats_lambda_for_power(1, 0.01, 0.9, &lam), SL_OK);
    cr_assert(fabs(lam - 14.88) < 0.005, "lambda %g", lam);
    for (size_t i = 0; i < N_OF(lambda_fixtures); i++) {
        const lambda_fixture *f = &lambda_fixtures[i];
        cr_assert_eq(sl_stats_lambda_for_power(f->df, f->a, f->power, &lam), SL_OK);
        cr_assert(close_rel(lam, f->lambda, 1e-6, 0), "case %zu: %.12g vs %.12g", i, lam, f->lambda);
    }
    double n;
    cr_assert_eq(sl_stats_n_for_tv(0.05, 1, 0.01, 0.9, &n), SL_OK);
    cr_assert_eq(n, ceil(14.879387166502486 / (4 * 0.05 * 0.05)));
    /* At that n the guaranteed power is at least 0.9 (n rounds up). */
    cr_assert(sl_stats_power_at_n(n, 0.05, 1, 0.01) >= 0.9);
    cr_assert_eq(sl_stats_n_for_tv(0.0, 1, 0.01, 0.9, &n), SL_EINPUT);
}

/* TV CI: the Hoeffding-union bound covers the truth. For counts drawn from pmf itself the true TV
 * is 0; the interval must contain it in (at least) 95% of 200 replications -- it is conservative,
 * so in practice all of them. The bootstrap interval contains the plug-in estimate. */
Test(stats, tv_ci_covers_truth)
{
    const size_t k = 6;
    const double pmf[6] = {0.3, 0.25, 0.2, 0.15, 0.07, 0.03};
    gsl_rng *r = sl_rng_alloc(11, SL_STREAM_DATA, 0);
    unsigned y[6];
    uint64_t c[6];
    int covered = 0;
    for (int rep = 0; rep < 200; rep++) {
        gsl_ran_multinomial(r, k, 500, pmf, y);
        for (size_t j = 0; j < k; j++) c[j] = y[j];
        double tv, lo, hi;
        cr_assert_eq(sl_stats_tv_ci(c, pmf, k, 0.05, &tv, &lo, &hi), SL_OK);
        covered += lo <= 0.0;
        if (rep == 0) {
            double tb, blo, bhi;
            cr_assert_eq(sl_stats_tv_bootstrap(c, pmf, k, 0.05, 500, 3, &tb, &blo, &bhi), SL_OK);
            cr_assert(tb == tv && blo <= bhi);
        }
    }
    cr_assert(covered >= 190, "covered %d of 200", covered);
    gsl_rng_free(r);
}

/* Randomized exact p-values are U(0,1) under the null although the exact test is discrete: 1000
 * multinomial samples (n = 8, k = 3) from the null, KS p > 1e-3 (fixed seed, deterministic), while
 * the conventional P(>=) p-values are conservative: their mean is 1/2 + E[P(X^2 = observed)]/2,
 * about 0.53 here; asserted above 0.51 (the standard error of a mean of 1000 is 0.009). */
Test(stats, randomized_exact_p_is_uniform)
{
    const double pmf[3] = {0.5, 0.3, 0.2};
    gsl_rng *r = sl_rng_alloc(5, SL_STREAM_DATA, 0), *ur = sl_rng_alloc(5, SL_STREAM_BOOT, 0);
    enum { R = 1000 };
    double prand[R], mean_ge = 0;
    unsigned y[3];
    uint64_t c[3];
    for (int i = 0; i < R; i++) {
        gsl_ran_multinomial(r, 3, 8, pmf, y);
        for (int j = 0; j < 3; j++) c[j] = y[j];
        double ge, gt;
        cr_assert_eq(sl_stats_exact_multinomial_ext(c, pmf, 3, 1e6, &ge, &gt), SL_OK);
        cr_assert(gt <= ge);
        mean_ge += ge / R;
        prand[i] = sl_stats_randomized_p(ge, gt, sl_rng_uniform53(ur));
    }
    double D, p;
    cr_assert_eq(sl_stats_ks_uniform(prand, R, &D, &p), SL_OK);
    cr_assert(p > 1e-3, "KS D %g p %g", D, p);
    cr_assert(mean_ge > 0.51, "mean conventional p %g", mean_ge);
    gsl_rng_free(r);
    gsl_rng_free(ur);
}
