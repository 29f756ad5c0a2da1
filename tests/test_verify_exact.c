/*
 * test_verify_exact.c: analysis/sl_verify_exact (the exact deviation of one iteration, and the
 * iterations verify needs to see it) against closed forms and against the sampler itself.
 *  - Lossless rules: every test's exact TV is 0 up to rounding (< 1e-12: sums of a few thousand
 *    path probabilities, each with ~1e-16 relative error).
 *  - bug-resample-from-p: the first token's law has the closed form min(p, q) + (1 - beta) p and
 *    the token after a rejection is p; their TVs to p and to the residual match to 1e-12.
 *  - The sampler agrees: a 400000-iteration verify run of the same bug sees a first-token TV whose
 *    Hoeffding CI (at 0.01) contains the exact one, and is rejected at the planned iterations x 2.
 */
#include <criterion/criterion.h>
#include <math.h>
#include <string.h>

#include "sl_common.h"
#include "sl_dist.h"
#include "sl_stats.h"
#include "sl_mc.h"
#include "sl_verify.h"
#include "sl_verify_exact.h"

static sl_mc_plan *plan_of(const char *family, size_t V, size_t gamma, sl_rule rule, double lenience)
{
    sl_mc_family_params fp = SL_MC_FAMILY_DEFAULT;
    cr_assert_eq(sl_mc_family_parse(family, &fp.family), SL_OK);
    fp.V = V;
    fp.gamma = gamma;
    sl_mc_rows *rows;
    cr_assert_eq(sl_mc_family_rows(&fp, &rows), SL_OK, "%s", sl_errmsg());
    sl_mc_source src = sl_mc_rows_source(rows);
    sl_spec_config cfg = SL_SPEC_CONFIG_DEFAULT;
    cfg.rule = rule;
    cfg.lenience = lenience;
    sl_mc_plan *plan;
    cr_assert_eq(sl_mc_plan_alloc(&src, gamma, &cfg, &plan), SL_OK, "%s", sl_errmsg());
    sl_mc_rows_free(rows);
    return plan;
}

Test(verify_exact, lossless_rules_have_no_deviation)
{
    const struct {
        sl_rule rule;
        double l;
    } rules[] = {{SL_RULE_EXACT, 1}, {SL_RULE_SAMPLER_MATCH, 1}, {SL_RULE_LENIENT, 1}, {SL_RULE_LENIENT_T0, 1}};
    const char *families[] = {"noisy", "dirichlet", "positional"};
    for (size_t f = 0; f < 3; f++)
        for (size_t r = 0; r < 4; r++) {
            sl_mc_plan *plan = plan_of(families[f], 6, 3, rules[r].rule, rules[r].l);
            sl_verify_exact_result e;
            cr_assert_eq(sl_verify_exact(plan, 0.01, 0.9, 10000000, &e), SL_OK, "%s", sl_errmsg());
            cr_assert_gt(e.n_rows, 4);
            cr_assert_lt(e.max_tv, 1e-12, "%s on %s: max TV %g", sl_rule_name(rules[r].rule), families[f], e.max_tv);
            cr_assert(isinf(e.iterations_needed));
            sl_mc_plan_free(plan);
        }
}

Test(verify_exact, resample_from_p_closed_form)
{
    sl_mc_plan *plan = plan_of("noisy", 6, 3, SL_BUG_RESAMPLE_FROM_P, 1);
    const double *p = sl_mc_plan_p(plan, 0), *q = sl_mc_plan_q(plan, 0);
    double beta = 0, first[6], res[6], tv_first = 0, tv_rej = 0;
    for (size_t x = 0; x < 6; x++) beta += fmin(p[x], q[x]);
    sl_dist_residual(p, q, 6, res);
    for (size_t x = 0; x < 6; x++) {
        first[x] = fmin(p[x], q[x]) + (1 - beta) * p[x];
        tv_first += 0.5 * fabs(first[x] - p[x]);
        tv_rej += 0.5 * fabs(p[x] - res[x]);
    }
    sl_verify_exact_result e;
    cr_assert_eq(sl_verify_exact(plan, 0.01, 0.9, 10000000, &e), SL_OK, "%s", sl_errmsg());
    cr_assert_str_eq(e.row[0].name, "first");
    cr_assert_float_eq(e.row[0].tv, tv_first, 1e-12);
    cr_assert_str_eq(e.row[4].name, "after_rejection");
    cr_assert_float_eq(e.row[4].tv, tv_rej, 1e-12);
    cr_assert_float_eq(e.row[4].per_iteration, 1 - pow(beta, 3), 1e-12, "P(some rejection) = 1 - beta^gamma");
    cr_assert(isfinite(e.iterations_needed));

    /* The sampler: the first-token TV it shows contains the exact one; at twice the planned
     * iterations it is rejected (power >= 0.9 there; fixed seed, so deterministic). */
    sl_verify_opts o = SL_VERIFY_OPTS_DEFAULT;
    o.iterations = 400000;
    sl_verify_result *r;
    cr_assert_eq(sl_verify_run(plan, &o, &r), SL_OK, "%s", sl_errmsg());
    cr_assert_leq(r->test[0].tv_lo, tv_first);
    cr_assert_geq(r->test[0].tv_hi, tv_first);
    sl_verify_result_free(r);
    o.iterations = (size_t)ceil(2 * e.iterations_needed);
    cr_assert_eq(sl_verify_run(plan, &o, &r), SL_OK);
    cr_assert(r->rejected, "not rejected at %zu iterations (planned %g)", o.iterations, e.iterations_needed);
    sl_verify_result_free(r);
    sl_mc_plan_free(plan);
}

/* The planned iterations for --tv: the first test (df = V - 1 on the noisy family) reaches power
 * 0.9 at level / m, m the counted tests (first, token_2, token_3, bonus, after_rejection, all,
 * pair, triple for V = 8 and gamma = 3). */
Test(verify_exact, iterations_for_tv)
{
    sl_mc_plan *plan = plan_of("noisy", 8, 3, SL_RULE_EXACT, 1);
    size_t m;
    double it, n;
    cr_assert_eq(sl_verify_iterations_for_tv(plan, 0.01, 0.01, 0.9, &m, &it), SL_OK, "%s", sl_errmsg());
    cr_assert_eq(m, 8);
    cr_assert_eq(sl_stats_n_for_tv(0.01, 7, 0.01 / 8, 0.9, &n), SL_OK);
    cr_assert_eq(it, n);
    sl_verify_opts o = SL_VERIFY_OPTS_DEFAULT;
    o.iterations = 2000;
    sl_verify_result *r;
    cr_assert_eq(sl_verify_run(plan, &o, &r), SL_OK);
    cr_assert_eq(r->n_tests, m, "verify counted %zu tests, the planner %zu", r->n_tests, m);
    sl_verify_result_free(r);
    sl_mc_plan_free(plan);
}
