/*
 * sl_theory.c: closed forms for tokens per iteration, walltime and operation factors, optimal γ.
 *
 * Precision near α = 1. The textbook forms divide quantities that vanish at α = 1: in double,
 * (1 − α^{γ+1})/(1 − α) is off by up to 5e-9 (relative, near 1 − α ≈ 1e-9), and THEORY.md's
 * variance formula returns 0 instead of 2.0e-10 at α = 1 − 1e-12, γ = 8. Here:
 *   - E[N] is the finite geometric sum by Horner's rule for γ <= 128 (all terms positive, error
 *     about γ ulp, exact at α = 0 and α = 1, and 1 + α exactly at γ = 1 so that Corollary 3.9's
 *     bound is reproduced bit for bit), and −expm1((γ+1)·log α)/(1 − α) beyond, where 1 − α is
 *     exact for α >= 1/2 and expm1 keeps the small difference to full precision;
 *   - Var N is the centred sum Σ P(N=k)(k − μ)² of non-negative terms. Since Σ P(N=k)(k − μ) = 0,
 *     an error δ in μ moves the sum only by δ², so μ computed to a few ulp is plenty and nothing
 *     cancels at either end (THEORY.md's closed form subtracts numbers ~α from each other and
 *     divides by (1 − α)²).
 */
#include "sl_theory.h"

#include <math.h>
#include <stdlib.h>

#include "sl_common.h"

/* Up to this γ, E[N] is summed by Horner's rule; see the file comment. */
#define HORNER_MAX_GAMMA 128

/* ---- checks ---- */

int sl_theory_check_alpha(const char *name, double alpha)
{
    if (!isfinite(alpha)) return sl_fail(SL_EINPUT, "%s: %g is not a finite number", name, alpha);
    if (alpha < 0 || alpha > 1) return sl_fail(SL_EINPUT, "%s: %g is outside [0, 1]", name, alpha);
    return SL_OK;
}

int sl_theory_check_gamma(const char *name, long gamma)
{
    if (gamma < 1 || gamma > SL_THEORY_GAMMA_MAX)
        return sl_fail(SL_EINPUT, "%s: %ld is outside [1, %d]", name, gamma, SL_THEORY_GAMMA_MAX);
    return SL_OK;
}

int sl_theory_check_cost(const char *name, double c)
{
    if (!isfinite(c)) return sl_fail(SL_EINPUT, "%s: %g is not a finite number", name, c);
    if (c < 0) return sl_fail(SL_EINPUT, "%s: %g is negative (a cost ratio is >= 0)", name, c);
    return SL_OK;
}

int sl_theory_check_beta(const double *beta, int gamma)
{
    int rc = sl_theory_check_gamma("gamma (length of beta)", gamma);
    if (rc) return rc;
    if (!beta) return sl_fail(SL_EINPUT, "beta: no values given");
    for (int i = 0; i < gamma; i++) {
        if (!isfinite(beta[i]))
            return sl_fail(SL_EINPUT, "beta_%d: %g is not a finite number", i + 1, beta[i]);
        if (beta[i] < 0 || beta[i] > 1)
            return sl_fail(SL_EINPUT, "beta_%d: %g is outside [0, 1]", i + 1, beta[i]);
    }
    return SL_OK;
}

/* ---- tokens per iteration ---- */

/* Σ_{k=0}^{γ} α^k for a checked α and γ. */
static double geom_sum(double alpha, int gamma)
{
    if (alpha == 1) return (double)gamma + 1;
    if (gamma <= HORNER_MAX_GAMMA) {
        double s = 1;
        for (int k = 0; k < gamma; k++) s = 1 + alpha * s;
        return s;
    }
    if (alpha == 0) return 1;
    return -expm1(((double)gamma + 1) * log(alpha)) / (1 - alpha);
}

int sl_theory_expected_tokens(double alpha, int gamma, double *out)
{
    int rc = sl_theory_check_alpha("alpha", alpha);
    if (!rc) rc = sl_theory_check_gamma("gamma", gamma);
    if (rc) return rc;
    *out = geom_sum(alpha, gamma);
    return SL_OK;
}

int sl_theory_pmf(double alpha, int gamma, double *pmf)
{
    int rc = sl_theory_check_alpha("alpha", alpha);
    if (!rc) rc = sl_theory_check_gamma("gamma", gamma);
    if (rc) return rc;
    for (int k = 1; k <= gamma; k++) pmf[k - 1] = pow(alpha, k - 1) * (1 - alpha);
    pmf[gamma] = pow(alpha, gamma);
    return SL_OK;
}

/* β_i for either form: beta[i-1], or α for every i. */
static inline double acc(const double *beta, double alpha, int i) { return beta ? beta[i - 1] : alpha; }

/* E[N] − 1 = Σ_{k=1}^{γ} Π_{i<=k} β_i (all terms >= 0). */
static double mean_minus_one(const double *beta, double alpha, int gamma)
{
    double s = 1, lo = 0;
    for (int k = 1; k <= gamma; k++) {
        s *= acc(beta, alpha, k);
        lo += s;
    }
    return lo;
}

/* Var N by the centred sum; see the file comment. */
static double var_tokens(const double *beta, double alpha, int gamma)
{
    double mu1 = mean_minus_one(beta, alpha, gamma); /* μ − 1, the offset of N − 1 */
    double var = 0, s = 1;
    for (int k = 0; k <= gamma; k++) { /* the event N = k + 1, where N − 1 − (μ − 1) = k − mu1 */
        double p = k < gamma ? s * (1 - acc(beta, alpha, k + 1)) : s;
        double dev = (double)k - mu1;
        var += p * dev * dev;
        if (k < gamma) s *= acc(beta, alpha, k + 1);
    }
    return var;
}

int sl_theory_var_tokens(double alpha, int gamma, double *out)
{
    int rc = sl_theory_check_alpha("alpha", alpha);
    if (!rc) rc = sl_theory_check_gamma("gamma", gamma);
    if (rc) return rc;
    *out = var_tokens(NULL, alpha, gamma);
    return SL_OK;
}

int sl_theory_beta_expected_tokens(const double *beta, int gamma, double *out)
{
    int rc = sl_theory_check_beta(beta, gamma);
    if (rc) return rc;
    *out = 1 + mean_minus_one(beta, 0, gamma);
    return SL_OK;
}

int sl_theory_beta_pmf(const double *beta, int gamma, double *pmf)
{
    int rc = sl_theory_check_beta(beta, gamma);
    if (rc) return rc;
    double s = 1;
    for (int k = 0; k < gamma; k++) {
        pmf[k] = s * (1 - beta[k]);
        s *= beta[k];
    }
    pmf[gamma] = s;
    return SL_OK;
}

int sl_theory_beta_var_tokens(const double *beta, int gamma, double *out)
{
    int rc = sl_theory_check_beta(beta, gamma);
    if (rc) return rc;
    *out = var_tokens(beta, 0, gamma);
    return SL_OK;
}

/* ---- verification cost ---- */

int sl_theory_vcost_const(sl_theory_vcost *vc, double value)
{
    *vc = (sl_theory_vcost){.kind = SL_VCOST_CONST, .value = value};
    if (!isfinite(value) || value <= 0)
        return sl_fail(SL_EINPUT, "verification cost: v = %g must be a finite number > 0", value);
    return SL_OK;
}

int sl_theory_vcost_linear(sl_theory_vcost *vc, double slope)
{
    *vc = (sl_theory_vcost){.kind = SL_VCOST_LINEAR, .slope = slope};
    if (!isfinite(slope)) return sl_fail(SL_EINPUT, "verification cost: slope %g is not finite", slope);
    return SL_OK;
}

int sl_theory_vcost_table(sl_theory_vcost *vc, const long *n, const double *v, size_t count)
{
    *vc = (sl_theory_vcost){.kind = SL_VCOST_TABLE};
    if (count == 0) return sl_fail(SL_EINPUT, "verification cost table: no entries");
    for (size_t i = 0; i < count; i++) {
        if (n[i] < 1) return sl_fail(SL_EINPUT, "verification cost table: n = %ld is not >= 1", n[i]);
        if (!isfinite(v[i]) || v[i] <= 0)
            return sl_fail(SL_EINPUT, "verification cost table: v(%ld) = %g must be a finite number > 0",
                           n[i], v[i]);
        /* v is relative to one single-token step, so v(1) = 1 by definition; allow print rounding. */
        if (n[i] == 1 && fabs(v[i] - 1) > 1e-9)
            return sl_fail(SL_EINPUT, "verification cost table: v(1) = %g but v(1) = 1 by definition", v[i]);
        for (size_t j = 0; j < i; j++)
            if (n[j] == n[i]) return sl_fail(SL_EINPUT, "verification cost table: n = %ld appears twice", n[i]);
    }
    vc->n = sl_malloc(count * sizeof *vc->n);
    vc->v = sl_malloc(count * sizeof *vc->v);
    if (!vc->n || !vc->v) {
        sl_theory_vcost_free(vc);
        return SL_EFAIL;
    }
    for (size_t i = 0; i < count; i++) {
        vc->n[i] = n[i];
        vc->v[i] = v[i];
    }
    vc->n_entries = count;
    return SL_OK;
}

void sl_theory_vcost_free(sl_theory_vcost *vc)
{
    if (!vc) return;
    free(vc->n);
    free(vc->v);
    vc->n = NULL;
    vc->v = NULL;
    vc->n_entries = 0;
}

int sl_theory_vcost_eval(const sl_theory_vcost *vc, long n, double *out)
{
    if (n < 1) return sl_fail(SL_EINPUT, "verification cost: n = %ld is not >= 1", n);
    if (!vc) {
        *out = 1;
        return SL_OK;
    }
    double v = 0;
    switch (vc->kind) {
    case SL_VCOST_CONST: v = vc->value; break;
    case SL_VCOST_LINEAR: v = 1 + vc->slope * (double)(n - 1); break;
    case SL_VCOST_TABLE: {
        size_t i = 0;
        while (i < vc->n_entries && vc->n[i] != n) i++;
        if (i == vc->n_entries)
            return sl_fail(SL_EINPUT, "verification cost table: no entry for n = %ld", n);
        v = vc->v[i];
        break;
    }
    default: return sl_fail(SL_EINPUT, "verification cost: unknown kind %d", (int)vc->kind);
    }
    if (!isfinite(v) || v <= 0)
        return sl_fail(SL_EINPUT, "verification cost: v(%ld) = %g is not a finite number > 0", n, v);
    *out = v;
    return SL_OK;
}

/* ---- factors ---- */

int sl_theory_walltime_factor(double alpha, int gamma, double c, double *out)
{
    return sl_theory_walltime_factor_v(alpha, gamma, c, NULL, out);
}

int sl_theory_walltime_factor_v(double alpha, int gamma, double c, const sl_theory_vcost *vc, double *out)
{
    double en, v;
    int rc = sl_theory_expected_tokens(alpha, gamma, &en);
    if (!rc) rc = sl_theory_check_cost("c", c);
    if (!rc) rc = sl_theory_vcost_eval(vc, (long)gamma + 1, &v);
    if (rc) return rc;
    *out = en / ((double)gamma * c + v);
    return SL_OK;
}

int sl_theory_beta_walltime_factor_v(const double *beta, int gamma, double c, const sl_theory_vcost *vc,
                                     double *out)
{
    double en, v;
    int rc = sl_theory_beta_expected_tokens(beta, gamma, &en);
    if (!rc) rc = sl_theory_check_cost("c", c);
    if (!rc) rc = sl_theory_vcost_eval(vc, (long)gamma + 1, &v);
    if (rc) return rc;
    *out = en / ((double)gamma * c + v);
    return SL_OK;
}

/* One iteration costs γĉ + γ + 1 target-token equivalents of arithmetic (γ draft runs, γ+1
 * positions scored by the target); Theorem 3.11 divides that by the tokens it yields, E[N]. */
int sl_theory_ops_factor(double alpha, int gamma, double c_hat, double *out)
{
    double en;
    int rc = sl_theory_expected_tokens(alpha, gamma, &en);
    if (!rc) rc = sl_theory_check_cost("c_hat", c_hat);
    if (rc) return rc;
    *out = ((double)gamma * c_hat + (double)gamma + 1) / en;
    return SL_OK;
}

int sl_theory_beta_ops_factor(const double *beta, int gamma, double c_hat, double *out)
{
    double en;
    int rc = sl_theory_beta_expected_tokens(beta, gamma, &en);
    if (!rc) rc = sl_theory_check_cost("c_hat", c_hat);
    if (rc) return rc;
    *out = ((double)gamma * c_hat + (double)gamma + 1) / en;
    return SL_OK;
}

int sl_theory_chen_speedup(double accept_ratio, int K, double t_draft_s, double t_target_s, double *out)
{
    int rc = sl_theory_check_alpha("accept_ratio", accept_ratio);
    if (!rc) rc = sl_theory_check_gamma("K", K);
    if (!rc) rc = sl_theory_check_cost("t_draft_s", t_draft_s);
    if (rc) return rc;
    if (!isfinite(t_target_s) || t_target_s <= 0)
        return sl_fail(SL_EINPUT, "t_target_s: %g must be a finite number > 0", t_target_s);
    *out = accept_ratio * ((double)K + 1) * t_target_s / ((double)K * t_draft_s + t_target_s);
    return SL_OK;
}

int sl_theory_cor39(double alpha, double c, int *improves, double *bound)
{
    int rc = sl_theory_check_alpha("alpha", alpha);
    if (!rc) rc = sl_theory_check_cost("c", c);
    if (rc) return rc;
    *improves = alpha > c;
    /* Written as the walltime factor at γ = 1 is evaluated, so the two agree to the last bit. */
    *bound = (1 + alpha) / (1 * c + 1);
    return SL_OK;
}

/* ---- optimal γ ---- */

void sl_theory_optimum_free(sl_theory_optimum *o)
{
    if (!o) return;
    free(o->ties);
    o->ties = NULL;
    o->n_ties = 0;
}

/* Shared search: β from beta[0..n_beta) or i.i.d. α (beta == NULL, n_beta ignored). */
static int optimum_search(const double *beta, int n_beta, double alpha, double c, const sl_theory_vcost *vc,
                          int gamma_cap, sl_theory_optimum *out)
{
    *out = (sl_theory_optimum){0};
    int rc = sl_theory_check_cost("c", c);
    if (!rc) rc = sl_theory_check_gamma("gamma_cap", gamma_cap);
    if (rc) return rc;
    int cap = beta && n_beta < gamma_cap ? n_beta : gamma_cap;
    if (vc && vc->kind == SL_VCOST_TABLE) {
        int g = 1;
        double v;
        while (g <= cap && sl_theory_vcost_eval(vc, (long)g + 1, &v) == SL_OK) g++;
        if (g == 1) return sl_fail(SL_EINPUT, "verification cost table: no entry for n = 2 (gamma = 1)");
        sl_err_clear();
        cap = g - 1;
    }
    double *factor = sl_malloc((size_t)cap * sizeof *factor); /* (cap) walltime factor at γ = index+1 */
    if (!factor) return SL_EFAIL;
    double s = 1, lo = 0; /* running Π β_i and Σ of them, as in sl_theory_beta_expected_tokens */
    int best = 1;
    for (int g = 1; g <= cap; g++) {
        double en, v;
        if (beta) {
            s *= beta[g - 1];
            lo += s;
            en = 1 + lo;
        } else {
            en = geom_sum(alpha, g);
        }
        rc = sl_theory_vcost_eval(vc, (long)g + 1, &v);
        if (rc) {
            free(factor);
            return rc;
        }
        factor[g - 1] = en / ((double)g * c + v);
        if (factor[g - 1] > factor[best - 1]) best = g;
    }
    /* Factors that agree to 1e-12 are equal for any purpose (c = 0 makes E[N] flatten out to
     * 1/(1 − α) long before the cap), so the reported γ is the smallest of the ties: it is as fast
     * as the others and the cheapest in arithmetic, and it does not depend on rounding noise. */
    double fmax = factor[best - 1], floor_tie = fmax * (1 - SL_THEORY_TIE_RTOL);
    size_t n_ties = 0;
    for (int g = 1; g <= cap; g++) n_ties += factor[g - 1] >= floor_tie;
    out->ties = sl_malloc(n_ties * sizeof *out->ties);
    if (!out->ties) {
        free(factor);
        return SL_EFAIL;
    }
    for (int g = 1; g <= cap; g++)
        if (factor[g - 1] >= floor_tie) out->ties[out->n_ties++] = g;
    best = out->ties[0];
    out->gamma_best = best;
    out->factor_best = factor[best - 1];
    out->gamma_cap = cap;
    out->at_cap = out->ties[out->n_ties - 1] == cap;
    free(factor);
    /* Plain decoding has factor 1 by definition; speculating only pays when it beats that. */
    out->gamma_opt = fmax > 1 ? best : 0;
    out->factor_opt = fmax > 1 ? out->factor_best : 1;
    return SL_OK;
}

int sl_theory_optimal_gamma(double alpha, double c, const sl_theory_vcost *vc, int gamma_cap,
                            sl_theory_optimum *out)
{
    *out = (sl_theory_optimum){0};
    int rc = sl_theory_check_alpha("alpha", alpha);
    if (rc) return rc;
    return optimum_search(NULL, 0, alpha, c, vc, gamma_cap, out);
}

int sl_theory_beta_optimal_gamma(const double *beta, int n_beta, double c, const sl_theory_vcost *vc,
                                 int gamma_cap, sl_theory_optimum *out)
{
    *out = (sl_theory_optimum){0};
    int rc = sl_theory_check_beta(beta, n_beta);
    if (rc) return rc;
    return optimum_search(beta, n_beta, 0, c, vc, gamma_cap, out);
}

double sl_theory_iteration_cost(double draft_steps, double c, double verify) { return draft_steps * c + verify; }
