/* sl_theory_grid.c: the closed forms over a grid of (alpha, gamma, c, c_hat) (see sl_theory_grid.h). */
#include "sl_theory_grid.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sl_common.h"

static const double zero = 0;

/* Checks every value and every combination; names the quantity in each message. */
static int validate(const sl_theory_grid_config *g, size_t n_c, size_t n_c_hat, const double *c, const double *c_hat,
                    long cap)
{
    int rc;
    if (g->beta) {
        if (g->alpha) return sl_fail(SL_EINPUT, "alpha: conflicts with beta (which gives the acceptance)");
        if (g->gamma) return sl_fail(SL_EINPUT, "gamma: conflicts with beta (gamma is the number of betas)");
        if (g->n_beta > SL_THEORY_GAMMA_MAX)
            return sl_fail(SL_EINPUT, "beta: %zu values, more than %d", g->n_beta, SL_THEORY_GAMMA_MAX);
        for (size_t i = 0; i < g->n_beta; i++)
            if ((rc = sl_theory_check_alpha("beta", g->beta[i]))) return rc;
    } else {
        if (!g->alpha) return sl_fail(SL_EINPUT, "alpha: required (or give beta_1..beta_G)");
        for (size_t i = 0; i < g->n_alpha; i++)
            if ((rc = sl_theory_check_alpha("alpha", g->alpha[i]))) return rc;
    }
    if (g->optimal && g->gamma)
        return sl_fail(SL_EINPUT, "gamma: conflicts with the optimal search (which tries gamma = 1..gamma_cap)");
    if (g->gamma_cap && !g->optimal) return sl_fail(SL_EINPUT, "gamma_cap: only used with the optimal search");
    if (g->gamma_cap < 0 || g->gamma_cap > SL_THEORY_GAMMA_MAX)
        return sl_fail(SL_EINPUT, "gamma_cap: %d is outside [1, %d]", g->gamma_cap, SL_THEORY_GAMMA_MAX);
    if (!g->beta && !g->optimal && !g->gamma) return sl_fail(SL_EINPUT, "gamma: required (or search the optimal gamma)");
    for (size_t i = 0; i < g->n_gamma; i++) {
        double x = g->gamma[i];
        if (x != floor(x)) return sl_fail(SL_EINPUT, "gamma: %g is not an integer", x);
        if (x < 1 || x > SL_THEORY_GAMMA_MAX)
            return sl_fail(SL_EINPUT, "gamma: %g is outside [1, %d]", x, SL_THEORY_GAMMA_MAX);
    }
    for (size_t i = 0; i < n_c; i++)
        if ((rc = sl_theory_check_cost("c", c[i]))) return rc;
    for (size_t i = 0; i < n_c_hat; i++)
        if ((rc = sl_theory_check_cost("c_hat", c_hat[i]))) return rc;

    /* The gamma values the cost model will be asked about: the swept ones, beta's count, or 1..cap. */
    long g_lo, g_hi;
    if (g->optimal) {
        g_lo = 1;
        g_hi = g->beta && (long)g->n_beta < cap ? (long)g->n_beta : cap;
    } else if (g->beta) {
        g_lo = g_hi = (long)g->n_beta;
    } else {
        g_lo = g_hi = (long)g->gamma[0];
        for (size_t i = 0; i < g->n_gamma; i++) {
            if (g->gamma[i] < g_lo) g_lo = (long)g->gamma[i];
            if (g->gamma[i] > g_hi) g_hi = (long)g->gamma[i];
        }
    }
    const sl_theory_vcost *vc = g->vc;
    if (vc && vc->kind == SL_VCOST_TABLE) {
        double v;
        if (g->optimal && sl_theory_vcost_eval(vc, 2, &v))
            return sl_fail(SL_EINPUT, "v_table: no entry for n = 2 (the optimal search starts at gamma = 1)");
        for (size_t i = 0; !g->optimal && i < (g->beta ? 1 : g->n_gamma); i++) {
            long n = (g->beta ? (long)g->n_beta : (long)g->gamma[i]) + 1;
            if (sl_theory_vcost_eval(vc, n, &v))
                return sl_fail(SL_EINPUT, "v_table: no entry for n = %ld (gamma = %ld verifies gamma+1 tokens)", n,
                               n - 1);
        }
        sl_err_clear();
    }
    if (vc && vc->kind == SL_VCOST_LINEAR) {
        /* v is linear in n, so it is positive on [g_lo+1, g_hi+1] iff it is at both ends. */
        long ends[2] = {g_lo + 1, g_hi + 1};
        for (int e = 0; e < 2; e++) {
            double v;
            if (sl_theory_vcost_eval(vc, ends[e], &v)) { /* its message gives v(n) */
                char why[200];
                snprintf(why, sizeof why, "%s", sl_errmsg());
                return sl_fail(SL_EINPUT, "v_linear: slope %g: %s", vc->slope, why);
            }
        }
    }
    double rows = (double)(g->beta ? 1 : g->n_alpha) * (double)(g->n_gamma ? g->n_gamma : 1) * (double)n_c *
                  (double)n_c_hat;
    if (rows > SL_THEORY_GRID_MAX_POINTS)
        return sl_fail(SL_EINPUT, "the sweep has %.0f combinations, more than %d", rows, SL_THEORY_GRID_MAX_POINTS);
    /* The terms every point's Var N sums over (sl_theory_grid.h): gamma + 1 each, with the optimal
     * search at most cap + 1. */
    double terms = 0;
    if (g->optimal || g->beta) terms = rows * (double)(g_hi + 1);
    else
        for (size_t i = 0; i < g->n_gamma; i++) terms += (double)g->n_alpha * (double)n_c * (double)n_c_hat * (g->gamma[i] + 1);
    if (terms > SL_THEORY_GRID_MAX_TERMS)
        return sl_fail(SL_EINPUT,
                       "the sweep needs %.0f terms (Var N sums gamma + 1 outcomes at each of its %.0f combinations, gamma up "
                       "to %ld), more than %.0e: narrow the gamma range (or gamma_cap, or the other ranges)",
                       terms, rows, g_hi, SL_THEORY_GRID_MAX_TERMS);
    if (g->pmf && rows * (double)(g_hi + 1) > 10.0 * SL_THEORY_GRID_MAX_POINTS)
        return sl_fail(SL_EINPUT, "pmf: %.0f combinations with gamma up to %ld give too many pmf values", rows, g_hi);
    return SL_OK;
}

/* Every quantity of one point at its gamma (p->gamma, p->alpha, p->c, p->c_hat set). */
static int eval_point(const sl_theory_grid_config *g, sl_theory_grid_point *p)
{
    const double *b = g->beta;
    int k = p->gamma, rc;
    double alpha = p->alpha, c = p->c, c_hat = p->c_hat;
    if (b) {
        rc = sl_theory_beta_expected_tokens(b, k, &p->expected_tokens);
        if (!rc) rc = sl_theory_beta_var_tokens(b, k, &p->var_tokens);
        if (!rc) rc = sl_theory_beta_walltime_factor_v(b, k, c, NULL, &p->walltime_factor_v1);
        if (!rc) rc = sl_theory_beta_walltime_factor_v(b, k, c, g->vc, &p->walltime_factor);
        if (!rc) rc = sl_theory_beta_ops_factor(b, k, c_hat, &p->ops_factor);
        if (!rc) rc = sl_theory_cor39(b[0], c, &p->alpha_gt_c, &p->cor39_bound);
    } else {
        rc = sl_theory_expected_tokens(alpha, k, &p->expected_tokens);
        if (!rc) rc = sl_theory_var_tokens(alpha, k, &p->var_tokens);
        if (!rc) rc = sl_theory_walltime_factor(alpha, k, c, &p->walltime_factor_v1);
        if (!rc) rc = sl_theory_walltime_factor_v(alpha, k, c, g->vc, &p->walltime_factor);
        if (!rc) rc = sl_theory_ops_factor(alpha, k, c_hat, &p->ops_factor);
        if (!rc) rc = sl_theory_cor39(alpha, c, &p->alpha_gt_c, &p->cor39_bound);
    }
    if (!rc) rc = sl_theory_vcost_eval(g->vc, (long)k + 1, &p->v_verify);
    if (!rc && g->pmf) {
        p->pmf = sl_malloc(((size_t)k + 1) * sizeof *p->pmf);
        if (!p->pmf) rc = SL_EFAIL;
        else rc = b ? sl_theory_beta_pmf(b, k, p->pmf) : sl_theory_pmf(alpha, k, p->pmf);
    }
    return rc;
}

int sl_theory_grid_run(const sl_theory_grid_config *g, sl_theory_grid_result *res)
{
    memset(res, 0, sizeof *res);
    /* c and c_hat default to 0: free drafting, the most favourable case. */
    const double *c = g->n_c ? g->c : &zero, *c_hat = g->n_c_hat ? g->c_hat : &zero;
    size_t n_c = g->n_c ? g->n_c : 1, n_c_hat = g->n_c_hat ? g->n_c_hat : 1;
    long cap = g->gamma_cap ? g->gamma_cap : SL_THEORY_GAMMA_CAP_DEFAULT;
    int rc = validate(g, n_c, n_c_hat, c, c_hat, cap);
    if (rc) return rc;

    size_t n_a = g->beta ? 1 : g->n_alpha, n_g = g->optimal || g->beta ? 1 : g->n_gamma;
    res->optimal = g->optimal;
    res->pmf = g->pmf;
    res->n_points = n_a * n_g * n_c * n_c_hat;
    res->points = sl_calloc(res->n_points, sizeof *res->points);
    if (!res->points) return SL_EFAIL;
    if (g->beta) {
        res->beta = sl_malloc(g->n_beta * sizeof *res->beta);
        if (!res->beta) rc = SL_EFAIL;
        else memcpy(res->beta, g->beta, g->n_beta * sizeof *res->beta);
        res->n_beta = g->n_beta;
    }
    size_t r = 0;
    for (size_t ia = 0; !rc && ia < n_a; ia++)
        for (size_t ig = 0; !rc && ig < n_g; ig++)
            for (size_t ic = 0; !rc && ic < n_c; ic++)
                for (size_t ih = 0; !rc && ih < n_c_hat; ih++, r++) {
                    sl_theory_grid_point *p = &res->points[r];
                    p->alpha = g->beta ? NAN : g->alpha[ia];
                    p->c = c[ic];
                    p->c_hat = c_hat[ih];
                    p->gamma = g->beta ? (int)g->n_beta : g->optimal ? 0 : (int)g->gamma[ig];
                    if (g->optimal) {
                        rc = g->beta ? sl_theory_beta_optimal_gamma(g->beta, (int)g->n_beta, p->c, g->vc, (int)cap, &p->opt)
                                     : sl_theory_optimal_gamma(p->alpha, p->c, g->vc, (int)cap, &p->opt);
                        p->gamma = p->opt.gamma_best;
                    }
                    if (!rc) rc = eval_point(g, p);
                }
    if (rc) sl_theory_grid_result_free(res);
    return rc;
}

void sl_theory_grid_result_free(sl_theory_grid_result *res)
{
    for (size_t i = 0; res->points && i < res->n_points; i++) {
        sl_theory_optimum_free(&res->points[i].opt);
        free(res->points[i].pmf);
    }
    free(res->points);
    free(res->beta);
    memset(res, 0, sizeof *res);
}
