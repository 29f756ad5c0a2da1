/* test_verify.c: analysis/sl_verify checks itself: uniform p-values under the exact sampler,
 * rejection of wrong variants, the lenience bound. The heavy, documented-sample-size checks of
 * every wrong variant live in tests/cli/test_verify_cli.py. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "sl_common.h"
#include "sl_mc.h"
#include "sl_verify.h"

static sl_mc_plan *noisy_plan(size_t V, size_t gamma, sl_rule rule, double lenience)
{
    sl_mc_family_params fp = SL_MC_FAMILY_DEFAULT;
    fp.V = V;
    fp.gamma = gamma;
    sl_mc_rows *rows;
    cr_assert_eq(sl_mc_family_rows(&fp, &rows), SL_OK);
    sl_mc_source src = sl_mc_rows_source(rows);
    sl_spec_config cfg = SL_SPEC_CONFIG_DEFAULT;
    cfg.rule = rule;
    cfg.lenience = lenience;
    sl_mc_plan *plan;
    cr_assert_eq(sl_mc_plan_alloc(&src, gamma, &cfg, &plan), SL_OK, "%s", sl_errmsg());
    sl_mc_rows_free(rows);
    return plan;
}

static void free_tables(sl_table **t, size_t n)
{
    for (size_t i = 0; i < n; i++) sl_table_free(t[i]);
}

/* (a) Under the exact sampler (and sampler-match) the p-values of every test over 200
 * replications are uniform: KS p-value > 0.001 for each of the 7 tests (fixed seeds, so this is
 * deterministic; a correct sampler would fail it with probability < 1%). Sizes (V = 4, gamma = 2,
 * 2000 iterations) keep every test on the asymptotic path, whose p-values are continuous. */
Test(verify, p_values_are_uniform_under_exact_sampler)
{
    const sl_rule rules[] = {SL_RULE_EXACT, SL_RULE_SAMPLER_MATCH};
    for (int r = 0; r < 2; r++) {
        sl_mc_plan *plan = noisy_plan(4, 2, rules[r], 1.0);
        sl_verify_opts o = SL_VERIFY_OPTS_DEFAULT;
        o.iterations = 2000;
        o.seed = 1000;
        sl_table *t;
        double ks_min;
        cr_assert_eq(sl_verify_uniformity(plan, &o, 200, &t, &ks_min), SL_OK, "%s", sl_errmsg());
        cr_assert_eq(t->n_rows, 7);
        cr_assert(ks_min > 1e-3, "rule %s: smallest KS p-value %g", sl_rule_name(rules[r]), ks_min);
        long ci = sl_table_col(t, "ks_d");
        cr_log_info("rule %s: KS D of 'all' = %g, min KS p = %g", sl_rule_name(rules[r]),
                    t->cells[4 * t->n_cols + (size_t)ci].v.d, ks_min);
        sl_table_free(t);
        sl_mc_plan_free(plan);
    }
}

/* ... and the same machinery sees a wrong variant: the shared-uniform bug's KS p-values collapse. */
Test(verify, uniformity_check_flags_a_wrong_variant)
{
    sl_mc_plan *plan = noisy_plan(4, 2, SL_BUG_SHARED_UNIFORM, 1.0);
    sl_verify_opts o = SL_VERIFY_OPTS_DEFAULT;
    o.iterations = 2000;
    sl_table *t;
    double ks_min;
    cr_assert_eq(sl_verify_uniformity(plan, &o, 50, &t, &ks_min), SL_OK);
    cr_assert(ks_min < 1e-6, "KS p %g", ks_min);
    sl_table_free(t);
    sl_mc_plan_free(plan);
}

/* (b, quick) Exact rules pass, and wrong variants with a strong effect are rejected at
 * Holm p < 1e-6 already at 20000 iterations on the noisy V = 8 pair. */
Test(verify, verdicts)
{
    const sl_rule ok[] = {SL_RULE_EXACT, SL_RULE_SAMPLER_MATCH, SL_RULE_LENIENT};
    for (int i = 0; i < 3; i++) {
        sl_mc_plan *plan = noisy_plan(8, 3, ok[i], 1.0);
        sl_verify_opts o = SL_VERIFY_OPTS_DEFAULT;
        o.iterations = 20000;
        sl_table *t[3];
        size_t n;
        sl_verify_summary s;
        cr_assert_eq(sl_verify_run(plan, &o, t, &n, &s), SL_OK);
        cr_assert(!s.rejected, "%s: min Holm p %g", sl_rule_name(ok[i]), s.min_p_holm);
        cr_assert_eq(s.n_tests, 8);
        free_tables(t, n);
        sl_mc_plan_free(plan);
    }
    const sl_rule bad[] = {SL_BUG_DRAFT_ARGMAX, SL_BUG_RESIDUAL_PAIRED, SL_BUG_RESAMPLE_FROM_P, SL_BUG_P_INPLACE,
                           SL_BUG_SHARED_UNIFORM};
    for (int i = 0; i < 5; i++) {
        sl_mc_plan *plan = noisy_plan(8, 3, bad[i], 1.0);
        sl_verify_opts o = SL_VERIFY_OPTS_DEFAULT;
        o.iterations = 20000;
        sl_table *t[3];
        size_t n;
        sl_verify_summary s;
        cr_assert_eq(sl_verify_run(plan, &o, t, &n, &s), SL_OK);
        cr_assert(s.rejected && s.min_p_holm < 1e-6, "%s: min Holm p %g", sl_rule_name(bad[i]), s.min_p_holm);
        free_tables(t, n);
        sl_mc_plan_free(plan);
    }
}

/* (c) Lenience l = 0.8 is detected, and no token's emitted frequency exceeds p(x)/l beyond its
 * Wilson bound (confidence 1 - 0.001/V per token). */
Test(verify, lenience_detected_and_within_bound)
{
    sl_mc_plan *plan = noisy_plan(8, 3, SL_RULE_LENIENT, 0.8);
    sl_verify_opts o = SL_VERIFY_OPTS_DEFAULT;
    o.iterations = 50000;
    sl_table *t[3];
    size_t n;
    sl_verify_summary s;
    cr_assert_eq(sl_verify_run(plan, &o, t, &n, &s), SL_OK);
    cr_assert(s.rejected && s.min_p_holm < 1e-6, "min Holm p %g", s.min_p_holm);
    cr_assert(s.lenience_excess <= 0, "excess %g", s.lenience_excess);
    cr_assert(s.max_freq_ratio > 1.0 && s.max_freq_ratio <= 1 / 0.8 + 0.05, "ratio %g", s.max_freq_ratio);
    cr_assert_eq(n, 3); /* verdict, tests, lenience_bound */
    free_tables(t, n);
    sl_mc_plan_free(plan);
}

/* Two-sample mode: exact sampler consistent with plain target samples; argmax draft rejected. */
Test(verify, two_sample_mode)
{
    for (int bug = 0; bug < 2; bug++) {
        sl_mc_plan *plan = noisy_plan(8, 3, bug ? SL_BUG_DRAFT_ARGMAX : SL_RULE_EXACT, 1.0);
        sl_verify_opts o = SL_VERIFY_OPTS_DEFAULT;
        o.iterations = 20000;
        o.two_sample = 1;
        sl_table *t[3];
        size_t n;
        sl_verify_summary s;
        cr_assert_eq(sl_verify_run(plan, &o, t, &n, &s), SL_OK, "%s", sl_errmsg());
        cr_assert_eq(s.n_tests, 2);
        cr_assert_eq(s.rejected, bug, "bug %d: min Holm p %g", bug, s.min_p_holm);
        free_tables(t, n);
        sl_mc_plan_free(plan);
    }
}
