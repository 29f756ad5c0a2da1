/*
 * test_theory.c: every closed form of sl_theory against an independent computation: direct
 * summation of the pmf or of the geometric series in long double (64-bit mantissa, unit roundoff
 * 5.4e-20), THEORY.md's textbook formulas evaluated in long double where they do not cancel,
 * first-order series at α → 1, and brute-force searches for the optimal γ.
 */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "sl_common.h"
#include "sl_theory.h"
#include "sl_theory_grid.h"
#include "sl_theory_report.h"

static double rel_err(long double got, long double ref)
{
    if (ref == 0) return (double)fabsl(got);
    return (double)(fabsl(got - ref) / fabsl(ref));
}

/* Σ_{k=0}^{γ} α^k in long double, term by term: γ roundings of 5.4e-20 each. */
static long double ref_geom(long double a, int gamma)
{
    long double s = 0, t = 1;
    for (int k = 0; k <= gamma; k++) {
        s += t;
        t *= a;
    }
    return s;
}

/* The i.i.d. pmf in long double, straight from THEORY.md. */
static void ref_pmf(long double a, int gamma, long double *pmf /* (gamma+1) */)
{
    for (int k = 1; k <= gamma; k++) pmf[k - 1] = powl(a, k - 1) * (1 - a);
    pmf[gamma] = powl(a, gamma);
}

/* Mean and variance by direct summation of a pmf in long double. Var N = E[(N−a)²] − E[N−a]²
 * for any shift a; the shift is the end of 1..γ+1 where the mass sits (the larger of P(N=1) and
 * P(N=γ+1)), so the raw moments stay small where the variance is small. This is an algorithm
 * different from the library's centred sum over accurately summed offsets. */
static void ref_moments(const long double *pmf, int gamma, long double *mean, long double *var)
{
    long double a = pmf[gamma] > pmf[0] ? gamma + 1 : 1;
    long double m1 = 0, m2 = 0, m = 0;
    for (int k = 1; k <= gamma + 1; k++) {
        m1 += pmf[k - 1] * (k - a);
        m2 += pmf[k - 1] * (k - a) * (k - a);
        m += pmf[k - 1] * k;
    }
    *mean = m;
    *var = m2 - m1 * m1;
}

static const double alphas[] = {0,    1e-9, 0.05, 0.1,  0.3,  0.5,     0.6,     0.7,      0.8,
                                0.9,  0.95, 0.99, 0.999, 1 - 1e-6, 1 - 1e-9, 1 - 1e-12, 1 - 1e-15, 1};
static const int gammas[] = {1, 2, 3, 4, 5, 7, 8, 10, 16, 31, 64, 127, 128, 129, 200, 1000};
#define N_ALPHAS (sizeof alphas / sizeof alphas[0])
#define N_GAMMAS (sizeof gammas / sizeof gammas[0])

Test(theory, expected_tokens_matches_long_double_series)
{
    for (size_t i = 0; i < N_ALPHAS; i++)
        for (size_t j = 0; j < N_GAMMAS; j++) {
            double en;
            cr_assert_eq(sl_theory_expected_tokens(alphas[i], gammas[j], &en), SL_OK);
            long double ref = ref_geom(alphas[i], gammas[j]);
            /* Horner (γ <= 128) accumulates at most γ+1 roundings of 1.1e-16 (<= 1.5e-14); the
             * expm1 form a few. 1e-13 leaves room for both and is 10x below the brief's 1e-12. */
            cr_assert(rel_err(en, ref) < 1e-13, "alpha %.17g gamma %d: %.17g vs %.20Lg (rel %g)", alphas[i],
                      gammas[j], en, ref, rel_err(en, ref));
        }
}

Test(theory, expected_tokens_exact_at_the_ends)
{
    for (size_t j = 0; j < N_GAMMAS; j++) {
        double en;
        sl_theory_expected_tokens(1, gammas[j], &en);
        cr_assert_eq(en, gammas[j] + 1.0); /* exact: γ+1 is representable */
        sl_theory_expected_tokens(0, gammas[j], &en);
        cr_assert_eq(en, 1.0);
    }
    double en;
    sl_theory_expected_tokens(0.3, SL_THEORY_GAMMA_MAX, &en);
    cr_assert(rel_err(en, 1 / 0.7L) < 1e-15); /* α^{γ+1} underflows: E[N] = 1/(1−α) to rounding */
}

/* Near α = 1 the deficit γ+1 − E[N] = ε γ(γ+1)/2 + O(ε²) (ε = 1 − α) is what decides the
 * walltime factor for c ≈ 0; the library keeps it, the textbook double formula does not. */
Test(theory, expected_tokens_keeps_precision_near_one)
{
    const double eps = 1e-12;
    const double a = 1 - eps; /* exact: 1e-12 is representable relative to 1 to 2^-53 */
    for (int g = 1; g <= 1000; g += g < 10 ? 1 : 37) {
        double en;
        sl_theory_expected_tokens(a, g, &en);
        long double ref = ref_geom(a, g);
        cr_assert(rel_err(en, ref) < 1e-13, "gamma %d rel %g", g, rel_err(en, ref));
        /* The series: the deficit to first order, to within its second-order term (~ε²γ³/6, tiny)
         * plus the rounding of en itself (ulp(γ+1) ≈ 2.2e-16·(γ+1)); (1−α) is not exactly 1e-12. */
        long double e = 1 - (long double)a;
        long double deficit = e * g * (g + 1) / 2;
        cr_assert(fabsl((long double)en - (g + 1 - deficit)) < 4e-16L * (g + 1) + e * e * g * g * g,
                  "gamma %d", g);
    }
    /* Teeth: the textbook formula in double is off by up to ~5e-9 relative for 1 − α between
     * 1e-10 and 1e-8 (pow rounds α^{γ+1} to 1.1e-16 absolute, then 1 − α^{γ+1} is tiny); over the
     * same α the library stays below 1e-13. This test would catch a library that used it. */
    double worst_naive = 0, worst_lib = 0;
    for (double e = 1e-11; e < 1e-7; e *= 1.01) {
        double b = 1 - e, en;
        long double ref = ref_geom(b, 8);
        double naive = (1 - pow(b, 9)) / (1 - b);
        sl_theory_expected_tokens(b, 8, &en);
        worst_naive = fmax(worst_naive, rel_err(naive, ref));
        worst_lib = fmax(worst_lib, rel_err(en, ref));
    }
    cr_assert(worst_naive > 1e-9, "naive %g", worst_naive);
    cr_assert(worst_lib < 1e-13, "library %g", worst_lib);
}

Test(theory, expected_tokens_large_gamma_direct_sum)
{
    const double as[] = {0.5, 0.999, 0.999999, 1 - 1e-9};
    for (size_t i = 0; i < 4; i++) {
        double en;
        sl_theory_expected_tokens(as[i], SL_THEORY_GAMMA_MAX, &en);
        long double ref = ref_geom(as[i], SL_THEORY_GAMMA_MAX);
        /* The reference sums 1e6 terms: its own error is at most 1e6 · 5.4e-20 = 5.4e-14. */
        cr_assert(rel_err(en, ref) < 1e-12, "alpha %g rel %g", as[i], rel_err(en, ref));
    }
}

Test(theory, pmf_mean_and_variance_by_direct_summation)
{
    long double *ref = malloc((1000 + 1) * sizeof *ref);
    double *pmf = malloc((1000 + 1) * sizeof *pmf);
    for (size_t i = 0; i < N_ALPHAS; i++)
        for (size_t j = 0; j < N_GAMMAS; j++) {
            double a = alphas[i];
            int g = gammas[j];
            cr_assert_eq(sl_theory_pmf(a, g, pmf), SL_OK);
            ref_pmf(a, g, ref);
            double total = 0;
            for (int k = 0; k <= g; k++) {
                /* pow and one product: a few ulp, relative (absolute below the smallest normal). */
                cr_assert(fabsl(pmf[k] - ref[k]) <= 1e-14L * ref[k] + 1e-300L, "alpha %g gamma %d k %d", a, g, k + 1);
                total += pmf[k];
            }
            cr_assert(fabs(total - 1) < 1e-15 * (g + 1), "pmf sums to %.17g", total); /* γ+1 roundings */

            long double mean, var;
            ref_moments(ref, g, &mean, &var);
            double en, v;
            sl_theory_expected_tokens(a, g, &en);
            sl_theory_var_tokens(a, g, &v);
            cr_assert(rel_err(en, mean) < 1e-13, "alpha %g gamma %d mean", a, g);
            cr_assert(v >= 0 && isfinite(v));
            /* Both sides are sums of γ+1 terms with a few roundings each; the reference's shifted
             * raw moments can cancel by up to (γ+1)²/Var, harmless at 5.4e-20. 1e-12 relative,
             * or absolute 1e-25 for variances that are themselves ~0 (α = 1e-9 or 1 − 1e-15). */
            cr_assert(fabsl(v - var) <= 1e-12L * var + 1e-25L, "alpha %.17g gamma %d var %.17g vs %.20Lg", a, g,
                      v, var);
        }
    free(ref);
    free(pmf);
}

Test(theory, variance_matches_textbook_formula_away_from_one)
{
    for (int i = 1; i <= 19; i++) {
        long double a = i / 20.0L;
        for (int g = 1; g <= 40; g++) {
            /* THEORY.md: [α − (2γ+1)(1−α)α^{γ+1} − α^{2γ+2}] / (1−α)², in long double. Cancels by
             * a factor ~1/(1−α)² <= 400 here: still ~1e-16 relative. */
            long double ref =
                (a - (2 * g + 1) * (1 - a) * powl(a, g + 1) - powl(a, 2 * g + 2)) / ((1 - a) * (1 - a));
            double v;
            sl_theory_var_tokens((double)a, g, &v);
            cr_assert(rel_err(v, ref) < 1e-12, "alpha %Lg gamma %d: %.17g vs %.20Lg", a, g, v, ref);
        }
    }
}

Test(theory, variance_limits_and_series_near_one)
{
    double v;
    for (size_t j = 0; j < N_GAMMAS; j++) {
        sl_theory_var_tokens(1, gammas[j], &v);
        cr_assert_eq(v, 0.0); /* N = γ+1 surely */
        sl_theory_var_tokens(0, gammas[j], &v);
        cr_assert_eq(v, 0.0); /* N = 1 surely */
    }
    /* α = 1 − ε: P(N = k) ≈ ε for k <= γ, so Var N ≈ ε Σ_{j=1}^{γ} j² = ε γ(γ+1)(2γ+1)/6, with a
     * relative correction O(εγ²) (< 1e-6 here). The textbook formula in double gives garbage. */
    const double eps = 0x1p-40; /* ≈ 9.1e-13, exact so that 1 − ε is exact */
    int g8 = 8;
    double a8 = 1 - eps, naive = (a8 - (2 * g8 + 1) * (1 - a8) * pow(a8, g8 + 1) - pow(a8, 2 * g8 + 2)) /
                                 ((1 - a8) * (1 - a8));
    sl_theory_var_tokens(a8, 8, &v);
    cr_assert(rel_err(naive, v) > 1e-3, "naive %g library %g", naive, v); /* teeth: the formula fails here */
    for (int g = 1; g <= 64; g++) {
        sl_theory_var_tokens(1 - eps, g, &v);
        long double series = (long double)eps * g * (g + 1) * (2 * g + 1) / 6;
        cr_assert(rel_err(v, series) < 1e-8, "gamma %d: %.17g vs %.17Lg", g, v, series);
    }
}

Test(theory, pmf_is_a_distribution_at_the_ends)
{
    double pmf[9];
    sl_theory_pmf(0, 8, pmf);
    cr_assert_eq(pmf[0], 1.0);
    for (int k = 1; k <= 8; k++) cr_assert_eq(pmf[k], 0.0);
    sl_theory_pmf(1, 8, pmf);
    for (int k = 0; k < 8; k++) cr_assert_eq(pmf[k], 0.0);
    cr_assert_eq(pmf[8], 1.0);
}

/* ---- position-dependent β ---- */

static void ref_beta_pmf(const double *beta, int gamma, long double *pmf)
{
    long double s = 1;
    for (int k = 0; k < gamma; k++) {
        pmf[k] = s * (1 - (long double)beta[k]);
        s *= beta[k];
    }
    pmf[gamma] = s;
}

Test(theory, beta_forms_by_direct_summation)
{
    gsl_rng *r = sl_rng_alloc(20240601, SL_STREAM_DATA, 0);
    double beta[40], pmf[41];
    long double ref[41];
    for (int trial = 0; trial < 400; trial++) {
        int g = 1 + (int)gsl_rng_uniform_int(r, 40);
        int kind = trial % 4; /* uniform β; β near 1; β with zeros and ones; β near 0 */
        for (int i = 0; i < g; i++) {
            double u = sl_rng_uniform53(r);
            beta[i] = kind == 0 ? u : kind == 1 ? 1 - 1e-10 * u : kind == 2 ? (u < 0.2 ? 0 : u < 0.5 ? 1 : u) : 1e-6 * u;
        }
        double en, v;
        cr_assert_eq(sl_theory_beta_expected_tokens(beta, g, &en), SL_OK);
        cr_assert_eq(sl_theory_beta_var_tokens(beta, g, &v), SL_OK);
        cr_assert_eq(sl_theory_beta_pmf(beta, g, pmf), SL_OK);
        ref_beta_pmf(beta, g, ref);
        double total = 0;
        for (int k = 0; k <= g; k++) {
            /* k+1 products: (k+1) ulp relative. */
            cr_assert(fabsl(pmf[k] - ref[k]) <= 1e-14L * ref[k] + 1e-300L, "trial %d k %d", trial, k);
            total += pmf[k];
        }
        cr_assert(fabs(total - 1) < 1e-15 * (g + 1));
        long double mean, var;
        ref_moments(ref, g, &mean, &var);
        /* THEORY.md's E[N] = Σ_k Π_{i<=k} β_i against Σ k P(N = k): same 1e-13 budget as i.i.d. */
        cr_assert(rel_err(en, mean) < 1e-13, "trial %d mean %.17g vs %.20Lg", trial, en, mean);
        cr_assert(fabsl(v - var) <= 1e-12L * var + 1e-25L, "trial %d kind %d var %.17g vs %.20Lg", trial, kind, v,
                  var);
    }
    gsl_rng_free(r);
}

Test(theory, beta_forms_equal_iid_when_all_beta_equal)
{
    double beta[200], pmf_b[201], pmf_a[201];
    for (size_t i = 0; i < N_ALPHAS; i++)
        for (int g = 1; g <= 200; g += (g < 10 ? 1 : 23)) {
            for (int k = 0; k < g; k++) beta[k] = alphas[i];
            double eb, ea, vb, va, wb, wa, ob, oa;
            sl_theory_beta_expected_tokens(beta, g, &eb);
            sl_theory_expected_tokens(alphas[i], g, &ea);
            sl_theory_beta_var_tokens(beta, g, &vb);
            sl_theory_var_tokens(alphas[i], g, &va);
            sl_theory_beta_walltime_factor_v(beta, g, 0.05, NULL, &wb);
            sl_theory_walltime_factor(alphas[i], g, 0.05, &wa);
            sl_theory_beta_ops_factor(beta, g, 0.02, &ob);
            sl_theory_ops_factor(alphas[i], g, 0.02, &oa);
            /* Different summation orders (running products vs Horner/expm1): γ ulp apart. */
            cr_assert(rel_err(eb, ea) < 1e-13, "alpha %g gamma %d", alphas[i], g);
            cr_assert(rel_err(wb, wa) < 1e-13);
            cr_assert(rel_err(ob, oa) < 1e-13);
            cr_assert(fabs(vb - va) <= 1e-13 * va, "alpha %g gamma %d var %g vs %g", alphas[i], g, vb, va);
            sl_theory_beta_pmf(beta, g, pmf_b);
            sl_theory_pmf(alphas[i], g, pmf_a);
            for (int k = 0; k <= g; k++) cr_assert(fabs(pmf_b[k] - pmf_a[k]) <= 1e-13 * pmf_a[k] + 1e-300);
        }
}

/* ---- verification cost, factors ---- */

Test(theory, vcost_models)
{
    sl_theory_vcost vc;
    double v;
    cr_assert_eq(sl_theory_vcost_eval(NULL, 7, &v), SL_OK);
    cr_assert_eq(v, 1.0);
    cr_assert_eq(sl_theory_vcost_const(&vc, 1.3), SL_OK);
    sl_theory_vcost_eval(&vc, 5, &v);
    cr_assert_eq(v, 1.3);
    cr_assert_eq(sl_theory_vcost_linear(&vc, 0.02), SL_OK);
    sl_theory_vcost_eval(&vc, 1, &v);
    cr_assert_eq(v, 1.0); /* v(1) = 1 by construction */
    sl_theory_vcost_eval(&vc, 6, &v);
    cr_assert(fabs(v - 1.1) < 1e-15);
    long double ref;
    (void)ref;
    long n[] = {1, 2, 3, 5};
    double vv[] = {1, 1.02, 1.05, 1.2};
    cr_assert_eq(sl_theory_vcost_table(&vc, n, vv, 4), SL_OK);
    sl_theory_vcost_eval(&vc, 3, &v);
    cr_assert_eq(v, 1.05);
    cr_assert_eq(sl_theory_vcost_eval(&vc, 4, &v), SL_EINPUT); /* not in the table */
    cr_assert(strstr(sl_errmsg(), "n = 4") != NULL);
    sl_theory_vcost_free(&vc);
    sl_theory_vcost_free(&vc); /* idempotent */
}

Test(theory, vcost_bad_input)
{
    sl_theory_vcost vc;
    cr_assert_eq(sl_theory_vcost_const(&vc, 0), SL_EINPUT);
    cr_assert_eq(sl_theory_vcost_const(&vc, -1), SL_EINPUT);
    cr_assert_eq(sl_theory_vcost_const(&vc, NAN), SL_EINPUT);
    cr_assert_eq(sl_theory_vcost_linear(&vc, INFINITY), SL_EINPUT);
    cr_assert_eq(sl_theory_vcost_linear(&vc, -0.5), SL_OK);
    double v;
    cr_assert_eq(sl_theory_vcost_eval(&vc, 3, &v), SL_EINPUT); /* v(3) = 0 */
    cr_assert_eq(sl_theory_vcost_eval(&vc, 2, &v), SL_OK);
    cr_assert_eq(sl_theory_vcost_eval(NULL, 0, &v), SL_EINPUT);
    long n1[] = {1, 2}, n2[] = {2, 2}, n3[] = {0, 2};
    double v1[] = {1.1, 1.2}, v2[] = {1.1, 1.2}, v3[] = {1, -1}, v4[] = {1, NAN};
    cr_assert_eq(sl_theory_vcost_table(&vc, n1, v1, 2), SL_EINPUT); /* v(1) != 1 */
    cr_assert(strstr(sl_errmsg(), "v(1)") != NULL);
    cr_assert_eq(sl_theory_vcost_table(&vc, n2, v2, 2), SL_EINPUT); /* duplicate n */
    cr_assert_eq(sl_theory_vcost_table(&vc, n3, v2, 2), SL_EINPUT); /* n = 0 */
    cr_assert_eq(sl_theory_vcost_table(&vc, n1, v3, 2), SL_EINPUT); /* v <= 0 */
    cr_assert_eq(sl_theory_vcost_table(&vc, n1, v4, 2), SL_EINPUT); /* NaN */
    cr_assert_eq(sl_theory_vcost_table(&vc, n1, v4, 0), SL_EINPUT); /* empty */
    sl_theory_vcost_free(&vc);
}

Test(theory, walltime_and_ops_factors_against_textbook_forms)
{
    const double cs[] = {0, 0.001, 0.01, 0.05, 0.1, 0.5, 1, 3};
    for (int i = 0; i <= 19; i++) {
        long double a = i / 20.0L;
        for (int g = 1; g <= 30; g++)
            for (size_t j = 0; j < 8; j++) {
                long double c = cs[j];
                double w, o;
                cr_assert_eq(sl_theory_walltime_factor((double)a, g, cs[j], &w), SL_OK);
                cr_assert_eq(sl_theory_ops_factor((double)a, g, cs[j], &o), SL_OK);
                /* Theorem 3.8 and 3.11 as printed, in long double (no cancellation for α <= 0.95).
                 * Budget: E[N]'s 1e-13 plus two roundings. */
                long double w_ref = (1 - powl(a, g + 1)) / ((1 - a) * (g * c + 1));
                long double o_ref = (1 - a) * (g * c + g + 1) / (1 - powl(a, g + 1));
                cr_assert(rel_err(w, w_ref) < 1e-13, "alpha %Lg gamma %d c %Lg", a, g, c);
                cr_assert(rel_err(o, o_ref) < 1e-13, "alpha %Lg gamma %d c_hat %Lg", a, g, c);
            }
    }
    /* α = 1: (γ+1)/(γc+1) and (γĉ+γ+1)/(γ+1). */
    double w, o;
    sl_theory_walltime_factor(1, 4, 0.25, &w);
    cr_assert_eq(w, 2.5);
    sl_theory_ops_factor(1, 4, 0.25, &o);
    cr_assert_eq(o, 6.0 / 5.0);
    /* Near 1, against the long double series: E[N] carries the precision. */
    sl_theory_ops_factor(1 - 1e-12, 8, 0.1, &o);
    cr_assert(rel_err(o, (8 * 0.1L + 9) / ref_geom(1 - 1e-12, 8)) < 1e-13);
}

Test(theory, generalised_walltime_factor)
{
    sl_theory_vcost one, tab, lin;
    sl_theory_vcost_const(&one, 1);
    long n[] = {1, 2, 3, 4, 5, 6};
    double v[] = {1, 1.01, 1.03, 1.06, 1.1, 1.15};
    sl_theory_vcost_table(&tab, n, v, 6);
    sl_theory_vcost_linear(&lin, 0.03);
    for (size_t i = 0; i < N_ALPHAS; i++)
        for (int g = 1; g <= 5; g++) {
            double w1, w_one, w_tab, w_lin, w_null;
            sl_theory_walltime_factor(alphas[i], g, 0.05, &w1);
            sl_theory_walltime_factor_v(alphas[i], g, 0.05, &one, &w_one);
            sl_theory_walltime_factor_v(alphas[i], g, 0.05, NULL, &w_null);
            cr_assert_eq(w_one, w1); /* v ≡ 1 is Theorem 3.8, bit for bit */
            cr_assert_eq(w_null, w1);
            cr_assert_eq(sl_theory_walltime_factor_v(alphas[i], g, 0.05, &tab, &w_tab), SL_OK);
            sl_theory_walltime_factor_v(alphas[i], g, 0.05, &lin, &w_lin);
            long double en = ref_geom(alphas[i], g);
            cr_assert(rel_err(w_tab, en / (g * 0.05L + v[g])) < 1e-13);
            cr_assert(rel_err(w_lin, en / (g * 0.05L + 1 + 0.03L * g)) < 1e-13);
        }
    double w;
    cr_assert_eq(sl_theory_walltime_factor_v(0.8, 6, 0.05, &tab, &w), SL_EINPUT); /* v(7) missing */
    sl_theory_vcost_free(&tab);
}

Test(theory, chen_per_loop_speedup_is_theorem_3_8)
{
    for (size_t i = 0; i < N_ALPHAS; i++)
        for (int K = 1; K <= 12; K++) {
            double en, w, s;
            const double t_target_s = 0.014, c = 0.07;
            sl_theory_expected_tokens(alphas[i], K, &en);
            sl_theory_walltime_factor(alphas[i], K, c, &w);
            cr_assert_eq(sl_theory_chen_speedup(en / (K + 1), K, c * t_target_s, t_target_s, &s), SL_OK);
            /* The same quantity through a division and multiplication by K+1 and t_target. */
            cr_assert(rel_err(s, w) < 1e-14, "alpha %g K %d", alphas[i], K);
        }
    double s;
    cr_assert_eq(sl_theory_chen_speedup(0.5, 3, 0.1, 0, &s), SL_EINPUT);
    cr_assert_eq(sl_theory_chen_speedup(1.5, 3, 0.1, 1, &s), SL_EINPUT);
    cr_assert_eq(sl_theory_chen_speedup(0.5, 0, 0.1, 1, &s), SL_EINPUT);
}

Test(theory, corollary_3_9)
{
    for (int i = 0; i <= 40; i++)
        for (int j = 0; j <= 40; j++) {
            double a = i / 40.0, c = j / 40.0 * 1.5;
            int improves;
            double bound, w1;
            cr_assert_eq(sl_theory_cor39(a, c, &improves, &bound), SL_OK);
            sl_theory_walltime_factor(a, 1, c, &w1);
            cr_assert_eq(w1, bound, "alpha %g c %g: %.17g vs %.17g", a, c, w1, bound); /* exactly */
            cr_assert_eq(improves, a > c);
            /* 9/40 and 6/40·1.5 differ in the last bit: α > c holds in double while (1+α)/(1+c)
             * rounds to 1. The equivalence below is about real numbers; skip that boundary. */
            if (fabs(a - c) < 1e-12 && a != c) continue;
            sl_theory_optimum opt;
            cr_assert_eq(sl_theory_optimal_gamma(a, c, NULL, 64, &opt), SL_OK);
            cr_assert(opt.factor_best >= bound);
            /* With v ≡ 1, Σ_{k<=γ} α^k <= 1 + γα <= 1 + γc when α <= c, so no γ improves; and
             * γ = 1 improves when α > c. So "some γ improves" is exactly "α > c". */
            cr_assert_eq(opt.gamma_opt > 0, improves, "alpha %g c %g", a, c);
            if (improves) cr_assert(opt.factor_opt >= bound);
            else cr_assert_eq(opt.factor_opt, 1.0);
            sl_theory_optimum_free(&opt);
        }
}

/* ---- optimal γ ---- */

/* Brute force in long double: factors, their maximum, and the tie set. Returns the smallest tie. */
static int brute_optimum(const double *beta, double a, double c, const sl_theory_vcost *vc, int cap,
                         long double *f /* (cap) */, long double *fmax)
{
    long double s = 1, en = 1;
    *fmax = 0;
    for (int g = 1; g <= cap; g++) {
        s *= beta ? beta[g - 1] : a;
        en += s;
        double v;
        sl_theory_vcost_eval(vc, g + 1, &v);
        f[g - 1] = en / (g * (long double)c + v);
        if (f[g - 1] > *fmax) *fmax = f[g - 1];
    }
    for (int g = 1; g <= cap; g++)
        if (f[g - 1] >= *fmax * (1 - 1e-12L)) return g;
    return -1;
}

static void check_against_brute(const double *beta, int n_beta, double a, double c, const sl_theory_vcost *vc,
                                int cap)
{
    sl_theory_optimum opt;
    int rc = beta ? sl_theory_beta_optimal_gamma(beta, n_beta, c, vc, cap, &opt)
                  : sl_theory_optimal_gamma(a, c, vc, cap, &opt);
    cr_assert_eq(rc, SL_OK, "%s", sl_errmsg());
    int eff = opt.gamma_cap;
    long double *f = malloc((size_t)eff * sizeof *f), fmax;
    int g_ref = brute_optimum(beta, a, c, vc, eff, f, &fmax);
    long double thresh = fmax * (1 - 1e-12L);
    /* γ whose factor sits within 1e-15 (relative) of the tie threshold may fall either way in
     * double; every other γ must be classified exactly as the brute force does. */
    size_t t = 0;
    for (int g = 1; g <= eff; g++) {
        int borderline = fabsl(f[g - 1] - thresh) <= 1e-15L * fmax;
        int in_lib = t < opt.n_ties && opt.ties[t] == g;
        if (in_lib) t++;
        if (!borderline) cr_assert_eq(in_lib, f[g - 1] >= thresh, "alpha %g c %g gamma %d", a, c, g);
    }
    cr_assert_eq(t, opt.n_ties);
    if (fabsl(f[g_ref - 1] - thresh) > 1e-15L * fmax) cr_assert_eq(opt.gamma_best, g_ref, "alpha %g c %g", a, c);
    cr_assert(rel_err(opt.factor_best, f[opt.gamma_best - 1]) < 1e-13);
    cr_assert_eq(opt.at_cap, opt.ties[opt.n_ties - 1] == eff);
    if (fabsl(fmax - 1) > 1e-13L) {
        cr_assert_eq(opt.gamma_opt, fmax > 1 ? opt.gamma_best : 0, "alpha %g c %g", a, c);
        cr_assert_eq(opt.factor_opt, fmax > 1 ? opt.factor_best : 1.0);
    }
    free(f);
    sl_theory_optimum_free(&opt);
}

Test(theory, optimal_gamma_against_brute_force)
{
    const double cs[] = {0, 1e-4, 0.001, 0.01, 0.03, 0.05, 0.1, 0.2, 0.5, 0.9, 1.2};
    const int caps[] = {1, 2, 8, 64, 300};
    sl_theory_vcost lin, tab;
    sl_theory_vcost_linear(&lin, 0.02);
    long n[10];
    double v[10];
    for (int i = 0; i < 10; i++) {
        n[i] = i + 1;
        v[i] = 1 + 0.001 * i * i; /* convex measured cost, v(1) = 1 */
    }
    sl_theory_vcost_table(&tab, n, v, 10);
    for (size_t i = 0; i < N_ALPHAS; i++)
        for (size_t j = 0; j < sizeof cs / sizeof cs[0]; j++)
            for (size_t k = 0; k < sizeof caps / sizeof caps[0]; k++) {
                check_against_brute(NULL, 0, alphas[i], cs[j], NULL, caps[k]);
                check_against_brute(NULL, 0, alphas[i], cs[j], &lin, caps[k]);
                check_against_brute(NULL, 0, alphas[i], cs[j], &tab, caps[k]);
            }
    sl_theory_vcost_free(&tab);
}

Test(theory, optimal_gamma_known_cases)
{
    sl_theory_optimum opt;
    /* α = 0.8, c = 0.05: factors 1.714, 2.218, 2.567, 2.801, 2.952, 3.044, 3.088, 3.092, 3.065...
     * (hand-checked against Leviathan et al.'s Figure 3 trend); the best is γ = 8. */
    sl_theory_optimal_gamma(0.8, 0.05, NULL, 64, &opt);
    cr_assert_eq(opt.gamma_best, 8);
    cr_assert_eq(opt.gamma_opt, 8);
    cr_assert_eq(opt.n_ties, 1);
    cr_assert_eq(opt.at_cap, 0);
    sl_theory_optimum_free(&opt);
    /* A cap below the optimum: the cap is the answer and says so. */
    sl_theory_optimal_gamma(0.8, 0.05, NULL, 5, &opt);
    cr_assert_eq(opt.gamma_best, 5);
    cr_assert_eq(opt.gamma_cap, 5);
    cr_assert_eq(opt.at_cap, 1);
    sl_theory_optimum_free(&opt);
    /* α = 0: every γ gives factor 1/(γc + 1) <= 1; with c = 0 all tie at exactly 1. */
    sl_theory_optimal_gamma(0, 0, NULL, 10, &opt);
    cr_assert_eq(opt.gamma_opt, 0);
    cr_assert_eq(opt.factor_opt, 1.0);
    cr_assert_eq(opt.gamma_best, 1);
    cr_assert_eq(opt.n_ties, 10);
    cr_assert_eq(opt.at_cap, 1);
    sl_theory_optimum_free(&opt);
    /* α = 1, c = 0: (γ+1) grows without bound, so the best is the cap. */
    sl_theory_optimal_gamma(1, 0, NULL, 64, &opt);
    cr_assert_eq(opt.gamma_best, 64);
    cr_assert_eq(opt.factor_best, 65.0);
    cr_assert_eq(opt.at_cap, 1);
    sl_theory_optimum_free(&opt);
    /* A table stops the search at its last contiguous n. */
    long n[] = {2, 3, 4, 6};
    double v[] = {1.01, 1.02, 1.03, 1.05};
    sl_theory_vcost tab;
    sl_theory_vcost_table(&tab, n, v, 4);
    sl_theory_optimal_gamma(0.9, 0.0, &tab, 64, &opt);
    cr_assert_eq(opt.gamma_cap, 3);
    sl_theory_optimum_free(&opt);
    long n2[] = {1, 3};
    double v2[] = {1, 1.02};
    sl_theory_vcost_free(&tab);
    sl_theory_vcost_table(&tab, n2, v2, 2);
    cr_assert_eq(sl_theory_optimal_gamma(0.9, 0.0, &tab, 64, &opt), SL_EINPUT); /* no n = 2 */
    cr_assert(strstr(sl_errmsg(), "n = 2") != NULL);
    sl_theory_vcost_free(&tab);
}

Test(theory, beta_optimal_gamma_against_brute_force)
{
    gsl_rng *r = sl_rng_alloc(7, SL_STREAM_DATA, 1);
    double beta[50];
    for (int trial = 0; trial < 200; trial++) {
        int nb = 1 + (int)gsl_rng_uniform_int(r, 50);
        /* Acceptance that decays with the position, as measured logs show, plus noise. */
        double b0 = sl_rng_uniform53(r), decay = 0.05 * sl_rng_uniform53(r);
        for (int i = 0; i < nb; i++) {
            double b = b0 - decay * i + 0.05 * (sl_rng_uniform53(r) - 0.5);
            beta[i] = b < 0 ? 0 : b > 1 ? 1 : b;
        }
        double c = 0.2 * sl_rng_uniform53(r);
        check_against_brute(beta, nb, 0, c, NULL, 64);
        check_against_brute(beta, nb, 0, c, NULL, 3);
    }
    gsl_rng_free(r);
}

/* ---- bad input: an error naming the argument, never a NaN ---- */

Test(theory, bad_input_is_refused_with_a_named_message)
{
    double out = 12345, pmf[4], beta_bad[] = {0.5, 1.5}, beta_nan[] = {NAN};
    const double bad_alpha[] = {-0.1, 1.0000001, NAN, INFINITY, -INFINITY};
    for (size_t i = 0; i < 5; i++) {
        cr_assert_eq(sl_theory_expected_tokens(bad_alpha[i], 3, &out), SL_EINPUT);
        cr_assert(strncmp(sl_errmsg(), "alpha: ", 7) == 0, "%s", sl_errmsg());
        cr_assert_eq(sl_theory_var_tokens(bad_alpha[i], 3, &out), SL_EINPUT);
        cr_assert_eq(sl_theory_pmf(bad_alpha[i], 3, pmf), SL_EINPUT);
        cr_assert_eq(sl_theory_walltime_factor(bad_alpha[i], 3, 0, &out), SL_EINPUT);
        cr_assert_eq(sl_theory_ops_factor(bad_alpha[i], 3, 0, &out), SL_EINPUT);
        int imp;
        cr_assert_eq(sl_theory_cor39(bad_alpha[i], 0, &imp, &out), SL_EINPUT);
        sl_theory_optimum opt;
        cr_assert_eq(sl_theory_optimal_gamma(bad_alpha[i], 0, NULL, 8, &opt), SL_EINPUT);
        cr_assert_null(opt.ties);
    }
    cr_assert_eq(out, 12345); /* nothing written on error */
    cr_assert_eq(sl_theory_expected_tokens(0.5, 0, &out), SL_EINPUT);
    cr_assert(strstr(sl_errmsg(), "gamma: 0") != NULL, "%s", sl_errmsg());
    cr_assert_eq(sl_theory_expected_tokens(0.5, -3, &out), SL_EINPUT);
    cr_assert_eq(sl_theory_expected_tokens(0.5, SL_THEORY_GAMMA_MAX + 1, &out), SL_EINPUT);
    cr_assert_eq(sl_theory_walltime_factor(0.5, 3, -0.01, &out), SL_EINPUT);
    cr_assert(strstr(sl_errmsg(), "c: -0.01") != NULL, "%s", sl_errmsg());
    cr_assert_eq(sl_theory_walltime_factor(0.5, 3, NAN, &out), SL_EINPUT);
    cr_assert_eq(sl_theory_ops_factor(0.5, 3, -1, &out), SL_EINPUT);
    cr_assert(strstr(sl_errmsg(), "c_hat") != NULL);
    cr_assert_eq(sl_theory_ops_factor(0.5, 3, INFINITY, &out), SL_EINPUT);
    cr_assert_eq(sl_theory_beta_expected_tokens(beta_bad, 2, &out), SL_EINPUT);
    cr_assert(strstr(sl_errmsg(), "beta_2: 1.5") != NULL, "%s", sl_errmsg());
    cr_assert_eq(sl_theory_beta_var_tokens(beta_nan, 1, &out), SL_EINPUT);
    cr_assert_eq(sl_theory_beta_pmf(NULL, 1, pmf), SL_EINPUT);
    cr_assert_eq(sl_theory_beta_expected_tokens(beta_bad, 0, &out), SL_EINPUT);
    sl_theory_optimum opt;
    cr_assert_eq(sl_theory_optimal_gamma(0.5, 0, NULL, 0, &opt), SL_EINPUT);
    cr_assert(strstr(sl_errmsg(), "gamma_cap") != NULL);
    cr_assert_eq(sl_theory_beta_optimal_gamma(beta_bad, 2, 0, NULL, 8, &opt), SL_EINPUT);
    cr_assert_eq(sl_theory_optimal_gamma(0.5, -1, NULL, 8, &opt), SL_EINPUT);
    sl_theory_vcost lin;
    sl_theory_vcost_linear(&lin, -0.3); /* v(5) = −0.2 */
    cr_assert_eq(sl_theory_walltime_factor_v(0.5, 4, 0, &lin, &out), SL_EINPUT);
    cr_assert_eq(sl_theory_optimal_gamma(0.5, 0, &lin, 8, &opt), SL_EINPUT);
    cr_assert_null(opt.ties);
    cr_assert_eq(out, 12345);
}

/* No finite input in range gives a NaN or infinity anywhere. */
Test(theory, outputs_are_finite_on_a_dense_grid)
{
    double pmf[65];
    for (int i = 0; i <= 200; i++) {
        double a = i / 200.0;
        if (i == 199) a = nextafter(1.0, 0.0);
        if (i == 1) a = 0x1p-1074; /* the smallest subnormal */
        for (int g = 1; g <= 64; g++) {
            double en, v, w, o;
            sl_theory_expected_tokens(a, g, &en);
            sl_theory_var_tokens(a, g, &v);
            sl_theory_walltime_factor(a, g, 0, &w);
            sl_theory_ops_factor(a, g, 0, &o);
            sl_theory_pmf(a, g, pmf);
            cr_assert(isfinite(en) && isfinite(v) && isfinite(w) && isfinite(o), "alpha %g gamma %d", a, g);
            cr_assert(en >= 1 && en <= g + 1 && v >= 0 && o > 0);
            for (int k = 0; k <= g; k++) cr_assert(isfinite(pmf[k]) && pmf[k] >= 0);
        }
    }
}

/* ---- the per-iteration cost and the grid (sim/sl_theory_grid, analysis/sl_theory_report) ---- */

Test(theory, iteration_cost_is_the_walltime_denominator)
{
    sl_theory_vcost vc;
    cr_assert_eq(sl_theory_vcost_linear(&vc, 0.03), SL_OK);
    for (int g = 1; g <= 40; g += 3)
        for (double c = 0; c <= 0.5; c += 0.05) {
            double en, v, f;
            cr_assert_eq(sl_theory_expected_tokens(0.8, g, &en), SL_OK);
            cr_assert_eq(sl_theory_vcost_eval(&vc, g + 1, &v), SL_OK);
            cr_assert_eq(sl_theory_walltime_factor_v(0.8, g, c, &vc, &f), SL_OK);
            long double ref = (long double)g * c + (1 + 0.03L * g);
            double cost = sl_theory_iteration_cost(g, c, v);
            cr_assert(rel_err(cost, ref) < 1e-15, "g %d c %g: %.17g vs %.17Lg", g, c, cost, ref);
            /* The same bits as the factor's own denominator. */
            cr_assert_eq(en / cost, f, "g %d c %g", g, c);
        }
}

Test(theory, grid_points_equal_direct_calls)
{
    const double alpha[] = {0.5, 0.8, 1}, gamma[] = {1, 4, 9}, c[] = {0, 0.05}, c_hat[] = {0.02};
    sl_theory_vcost vc;
    cr_assert_eq(sl_theory_vcost_const(&vc, 1.25), SL_OK);
    sl_theory_grid_config cfg = {.alpha = alpha, .n_alpha = 3, .gamma = gamma, .n_gamma = 3, .c = c, .n_c = 2,
                                 .c_hat = c_hat, .n_c_hat = 1, .vc = &vc, .pmf = 1};
    sl_theory_grid_result r;
    cr_assert_eq(sl_theory_grid_run(&cfg, &r), SL_OK, "%s", sl_errmsg());
    cr_assert_eq(r.n_points, 18);
    size_t i = 0;
    for (int ia = 0; ia < 3; ia++) /* alpha slowest, then gamma, c, c_hat */
        for (int ig = 0; ig < 3; ig++)
            for (int ic = 0; ic < 2; ic++, i++) {
                const sl_theory_grid_point *p = &r.points[i];
                int g = (int)gamma[ig];
                double en, var, w1, w, ops, bound, sum = 0;
                int imp;
                cr_assert_eq(p->alpha, alpha[ia]);
                cr_assert_eq(p->gamma, g);
                cr_assert_eq(p->c, c[ic]);
                sl_theory_expected_tokens(alpha[ia], g, &en);
                sl_theory_var_tokens(alpha[ia], g, &var);
                sl_theory_walltime_factor(alpha[ia], g, c[ic], &w1);
                sl_theory_walltime_factor_v(alpha[ia], g, c[ic], &vc, &w);
                sl_theory_ops_factor(alpha[ia], g, 0.02, &ops);
                sl_theory_cor39(alpha[ia], c[ic], &imp, &bound);
                cr_assert_eq(p->expected_tokens, en);
                cr_assert_eq(p->var_tokens, var);
                cr_assert_eq(p->walltime_factor_v1, w1);
                cr_assert_eq(p->walltime_factor, w);
                cr_assert_eq(p->ops_factor, ops);
                cr_assert_eq(p->alpha_gt_c, imp);
                cr_assert_eq(p->cor39_bound, bound);
                cr_assert_eq(p->v_verify, 1.25);
                for (int k = 0; k <= g; k++) sum += p->pmf[k];
                cr_assert(fabs(sum - 1) < 1e-14);
                /* E[N] from the pmf, independently of sl_theory_expected_tokens. */
                double mean = 0;
                for (int k = 0; k <= g; k++) mean += (k + 1) * p->pmf[k];
                cr_assert(fabs(mean - en) < 1e-13 * en);
            }
    /* The table reads back the struct's values by name; JSON leaves the string columns out. */
    sl_table **ts;
    size_t n;
    cr_assert_eq(sl_theory_grid_report(&r, SL_FMT_CSV, &ts, &n), SL_OK);
    cr_assert_eq(n, 2, "theory and pmf");
    double x;
    cr_assert_eq(sl_table_getd(ts[0], 7, "walltime_factor", &x), SL_OK);
    cr_assert_eq(x, r.points[7].walltime_factor);
    /* pmf rows: each (alpha, gamma) once whatever c is: 3 * (2 + 5 + 10) rows. */
    cr_assert_eq(ts[1]->n_rows, 51);
    for (size_t k = 0; k < n; k++) sl_table_free(ts[k]);
    free(ts);
    sl_theory_grid_result_free(&r);
}

Test(theory, grid_optimum_and_beta_mode)
{
    const double alpha[] = {0.3, 0.9}, c[] = {0.5, 0.05};
    sl_theory_grid_config cfg = {.alpha = alpha, .n_alpha = 2, .c = c, .n_c = 2, .optimal = 1, .gamma_cap = 20};
    sl_theory_grid_result r;
    cr_assert_eq(sl_theory_grid_run(&cfg, &r), SL_OK, "%s", sl_errmsg());
    cr_assert_eq(r.n_points, 4);
    for (size_t i = 0; i < 4; i++) {
        const sl_theory_grid_point *p = &r.points[i];
        sl_theory_optimum o;
        cr_assert_eq(sl_theory_optimal_gamma(p->alpha, p->c, NULL, 20, &o), SL_OK);
        cr_assert_eq(p->gamma, o.gamma_best);
        cr_assert_eq(p->opt.gamma_opt, o.gamma_opt);
        cr_assert_eq(p->opt.n_ties, o.n_ties);
        cr_assert_eq(p->opt.gamma_cap, 20);
        /* Brute force: no gamma in 1..20 beats the reported one. */
        for (int g = 1; g <= 20; g++) {
            double f;
            sl_theory_walltime_factor(p->alpha, g, p->c, &f);
            cr_assert(f <= p->walltime_factor * (1 + 1e-12), "alpha %g c %g gamma %d", p->alpha, p->c, g);
        }
        sl_theory_optimum_free(&o);
    }
    cr_assert_eq(r.points[0].opt.gamma_opt, 0, "alpha 0.3 < c 0.5: plain decoding wins");
    sl_theory_grid_result_free(&r);

    const double beta[] = {0.9, 0.8, 0.7};
    sl_theory_grid_config cb = {.beta = beta, .n_beta = 3};
    cr_assert_eq(sl_theory_grid_run(&cb, &r), SL_OK, "%s", sl_errmsg());
    cr_assert_eq(r.n_points, 1);
    cr_assert_eq(r.points[0].gamma, 3);
    cr_assert_eq(r.points[0].c, 0, "c defaults to 0");
    cr_assert(isnan(r.points[0].alpha));
    cr_assert(fabs(r.points[0].expected_tokens - (1 + 0.9 + 0.72 + 0.504)) < 1e-15);
    sl_theory_grid_result_free(&r);
}

Test(theory, grid_bad_input_names_the_quantity)
{
    const double a[] = {0.5}, bad_a[] = {1.5}, g[] = {2.5}, beta[] = {0.9}, neg[] = {-1};
    sl_theory_grid_result r;
    struct {
        sl_theory_grid_config cfg;
        const char *prefix;
    } cases[] = {
        {{.alpha = bad_a, .n_alpha = 1, .gamma = a, .n_gamma = 1}, "alpha: "},
        {{.alpha = a, .n_alpha = 1, .gamma = g, .n_gamma = 1}, "gamma: "},
        {{.alpha = a, .n_alpha = 1}, "gamma: "},
        {{.alpha = a, .n_alpha = 1, .beta = beta, .n_beta = 1}, "alpha: "},
        {{.alpha = a, .n_alpha = 1, .gamma_cap = 8}, "gamma_cap: "},
        {{.beta = beta, .n_beta = 1, .c_hat = neg, .n_c_hat = 1}, "c_hat: "},
        {{.beta = neg, .n_beta = 1}, "beta: "},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        cr_assert_eq(sl_theory_grid_run(&cases[i].cfg, &r), SL_EINPUT, "case %zu", i);
        cr_assert(!strncmp(sl_errmsg(), cases[i].prefix, strlen(cases[i].prefix)), "case %zu: %s", i, sl_errmsg());
        cr_assert_eq(r.points, NULL);
    }
}


/* Issue 17, defect 6: Var N sums gamma + 1 outcomes per point, so `--gamma 1:1000000` needed
 * 5e11 terms (hours). Such a grid is refused before anything is computed; one just under the
 * bound of terms runs, and its last point's Var N equals the textbook closed form for i.i.d.
 * alpha (N - 1 a geometric truncated at gamma; relative tolerance 1e-9, a sum of ~2e4 terms). */
Test(theory_grid, work_is_bounded_before_anything_is_computed)
{
    size_t n = 1000000;
    double *gam = malloc(n * sizeof *gam), alpha = 0.5;
    cr_assert_not_null(gam);
    for (size_t i = 0; i < n; i++) gam[i] = (double)(i + 1);
    sl_theory_grid_config cfg = {.alpha = &alpha, .n_alpha = 1, .gamma = gam, .n_gamma = n};
    sl_theory_grid_result res;
    cr_assert_eq(sl_theory_grid_run(&cfg, &res), SL_EINPUT);
    cr_assert(strstr(sl_errmsg(), "narrow the gamma range") && strstr(sl_errmsg(), "500001500000 terms"), "%s", sl_errmsg());
    cr_assert_null(res.points);
    /* sum_{g=1}^{m} (g + 1) = m (m + 3) / 2 <= 2e8 for m = 19997 */
    cfg.n_gamma = 19997;
    cr_assert_eq(sl_theory_grid_run(&cfg, &res), SL_OK, "%s", sl_errmsg());
    cr_assert_eq(res.n_points, 19997);
    double a = alpha, g = 19997, an = pow(a, g);
    /* Var of min(Geom, gamma) successes: E[X] = a(1-a^g)/(1-a), E[X^2] by the tail-sum identity. */
    double ex = a * (1 - an) / (1 - a), ex2 = 0;
    for (double k = 1; k <= g; k++) ex2 += (2 * k - 1) * pow(a, k);
    double var = ex2 - ex * ex;
    cr_assert(fabs(res.points[19996].var_tokens - var) <= 1e-9 * var, "%.17g vs %.17g", res.points[19996].var_tokens, var);
    sl_theory_grid_result_free(&res);
    cfg.n_gamma = 20000;
    cr_assert_eq(sl_theory_grid_run(&cfg, &res), SL_EINPUT);
    free(gam);
}
