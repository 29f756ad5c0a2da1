/* test_verify.c: analysis/sl_verify checks itself: uniform p-values under the exact sampler,
 * rejection of wrong variants, the lenience bound. The heavy, documented-sample-size checks of
 * every wrong variant live in tests/cli/test_verify_cli.py. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "sl_common.h"
#include "sl_mc.h"
#include "sl_stats.h"
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
        sl_verify_uniformity_result *u;
        cr_assert_eq(sl_verify_uniformity(plan, &o, 200, &u), SL_OK, "%s", sl_errmsg());
        cr_assert_eq(u->n_rows, 7);
        cr_assert(u->ks_min_p > 1e-3, "rule %s: smallest KS p-value %g", sl_rule_name(rules[r]), u->ks_min_p);
        cr_assert_str_eq(u->row[4].test, "all");
        cr_log_info("rule %s: KS D of 'all' = %g, min KS p = %g", sl_rule_name(rules[r]), u->row[4].ks_d, u->ks_min_p);
        sl_verify_uniformity_free(u);
        sl_mc_plan_free(plan);
    }
}

/* ... and the same machinery sees a wrong variant: the shared-uniform bug's KS p-values collapse. */
Test(verify, uniformity_check_flags_a_wrong_variant)
{
    sl_mc_plan *plan = noisy_plan(4, 2, SL_BUG_SHARED_UNIFORM, 1.0);
    sl_verify_opts o = SL_VERIFY_OPTS_DEFAULT;
    o.iterations = 2000;
    sl_verify_uniformity_result *u;
    cr_assert_eq(sl_verify_uniformity(plan, &o, 50, &u), SL_OK);
    cr_assert(u->ks_min_p < 1e-6, "KS p %g", u->ks_min_p);
    sl_verify_uniformity_free(u);
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
        sl_verify_result *s;
        cr_assert_eq(sl_verify_run(plan, &o, &s), SL_OK);
        cr_assert(!s->rejected, "%s: min Holm p %g", sl_rule_name(ok[i]), s->min_p_holm);
        cr_assert_eq(s->n_tests, 8);
        sl_verify_result_free(s);
        sl_mc_plan_free(plan);
    }
    const sl_rule bad[] = {SL_BUG_DRAFT_ARGMAX, SL_BUG_RESIDUAL_PAIRED, SL_BUG_RESAMPLE_FROM_P, SL_BUG_P_INPLACE,
                           SL_BUG_SHARED_UNIFORM};
    for (int i = 0; i < 5; i++) {
        sl_mc_plan *plan = noisy_plan(8, 3, bad[i], 1.0);
        sl_verify_opts o = SL_VERIFY_OPTS_DEFAULT;
        o.iterations = 20000;
        sl_verify_result *s;
        cr_assert_eq(sl_verify_run(plan, &o, &s), SL_OK);
        cr_assert(s->rejected && s->min_p_holm < 1e-6, "%s: min Holm p %g", sl_rule_name(bad[i]), s->min_p_holm);
        sl_verify_result_free(s);
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
    sl_verify_result *s;
    cr_assert_eq(sl_verify_run(plan, &o, &s), SL_OK);
    sl_table *t[3];
    size_t n;
    cr_assert_eq(sl_verify_report(s, t, &n), SL_OK, "%s", sl_errmsg());
    cr_assert(s->rejected && s->min_p_holm < 1e-6, "min Holm p %g", s->min_p_holm);
    cr_assert(s->lenience_excess <= 0, "excess %g", s->lenience_excess);
    cr_assert(s->max_freq_ratio > 1.0 && s->max_freq_ratio <= 1 / 0.8 + 0.05, "ratio %g", s->max_freq_ratio);
    cr_assert_eq(n, 3); /* verdict, tests, lenience_bound */
    free_tables(t, n);
    sl_verify_result_free(s);
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
        sl_verify_result *s;
        cr_assert_eq(sl_verify_run(plan, &o, &s), SL_OK, "%s", sl_errmsg());
        cr_assert_eq(s->n_tests, 2);
        cr_assert_eq(s->rejected, bug, "bug %d: min Holm p %g", bug, s->min_p_holm);
        sl_verify_result_free(s);
        sl_mc_plan_free(plan);
    }
}

/* The result struct against independent recomputations: the per-position counts add up to the
 * iterations and the stream to the emitted tokens, Holm's step-down recomputed here from the raw
 * p-values, the verdict counts, and every cell of the rendered tables equal to its field. */
Test(verify, result_fields_and_report)
{
    sl_mc_plan *plan = noisy_plan(8, 3, SL_RULE_EXACT, 1.0);
    sl_verify_opts o = SL_VERIFY_OPTS_DEFAULT;
    o.iterations = 5000;
    sl_verify_result *r;
    cr_assert_eq(sl_verify_run(plan, &o, &r), SL_OK, "%s", sl_errmsg());
    cr_assert_eq(r->n_rows, 8); /* first, token_2, token_3, bonus, after_rejection, all, pair, triple */
    cr_assert_str_eq(r->test[0].name, "first");
    cr_assert_str_eq(r->test[4].name, "after_rejection");
    cr_assert_str_eq(r->test[4].null, "residual");
    cr_assert_str_eq(r->test[6].null, "target^2");
    cr_assert_eq(r->test[0].n, o.iterations);
    cr_assert_eq(r->test[3].n + r->test[4].n, o.iterations); /* bonus or a rejection, once each */
    cr_assert_eq(r->test[5].n, r->tokens);
    /* Pairs restart every SL_MC_BLOCK iterations: at most one token per block is left unpaired
     * (tests/test_verify_stream.c recounts them exactly). */
    size_t n_blocks = (o.iterations + SL_MC_BLOCK - 1) / SL_MC_BLOCK;
    cr_assert(r->test[6].n <= r->tokens / 2 && 2 * r->test[6].n + n_blocks >= r->tokens);
    /* Holm: sort the m raw p-values, adjusted p_(i) = max_{j <= i} min(1, (m - j + 1) p_(j)). */
    size_t m = 0, idx[SL_VERIFY_MAX_TESTS];
    for (size_t i = 0; i < r->n_rows; i++)
        if (!r->test[i].degenerate && !isnan(r->test[i].p_value)) idx[m++] = i;
    cr_assert_eq(m, r->n_tests);
    for (size_t a = 0; a < m; a++)
        for (size_t b = a + 1; b < m; b++)
            if (r->test[idx[b]].p_value < r->test[idx[a]].p_value) {
                size_t tmp = idx[a];
                idx[a] = idx[b];
                idx[b] = tmp;
            }
    double run_max = 0, min_holm = 1;
    size_t rej = 0;
    for (size_t j = 0; j < m; j++) {
        const sl_verify_test *e = &r->test[idx[j]];
        run_max = fmax(run_max, fmin(1, (double)(m - j) * e->p_value));
        cr_assert_float_eq(e->p_holm, run_max, 1e-12, "%s: holm %g vs %g", e->name, e->p_holm, run_max);
        cr_assert_eq(e->reject, e->p_holm <= o.level);
        rej += e->reject;
        min_holm = fmin(min_holm, e->p_holm);
        cr_assert(e->tv_lo <= e->tv && e->tv <= e->tv_hi, "%s: tv CI", e->name);
        cr_assert(e->power >= 0 && e->power <= 1);
    }
    cr_assert_eq(rej, r->n_rejected);
    cr_assert_float_eq(min_holm, r->min_p_holm, 1e-15);
    cr_assert_float_eq(r->power_level, o.level / (double)m, 1e-15);

    sl_table *t[3];
    size_t n;
    cr_assert_eq(sl_verify_report(r, t, &n), SL_OK, "%s", sl_errmsg());
    cr_assert_eq(n, 2);
    sl_table *tests = sl_report_find(t, n, "tests"), *verdict = sl_report_find(t, n, "verdict");
    cr_assert(tests && verdict);
    cr_assert_eq(tests->n_rows, r->n_rows);
    for (size_t i = 0; i < r->n_rows; i++) {
        double v;
        cr_assert_str_eq(sl_table_gets(tests, i, "test"), r->test[i].name);
        cr_assert_str_eq(sl_table_gets(tests, i, "method"), r->test[i].method);
        cr_assert_eq(sl_table_getd(tests, i, "p_value", &v), SL_OK);
        cr_assert(v == r->test[i].p_value || (isnan(v) && isnan(r->test[i].p_value)));
        cr_assert_eq(sl_table_getd(tests, i, "n", &v), SL_OK);
        cr_assert_eq(v, (double)r->test[i].n);
    }
    double v;
    cr_assert_eq(sl_table_getd(verdict, 0, "tokens", &v), SL_OK);
    cr_assert_eq(v, (double)r->tokens);
    cr_assert_str_eq(sl_table_gets(verdict, 0, "verdict"), "consistent-with-lossless");
    free_tables(t, n);
    sl_verify_result_free(r);
    sl_mc_plan_free(plan);
}

/* Sample-size planning: the n it returns reaches the power and a tenth fewer does not. */
Test(verify, power_n_reaches_the_power)
{
    sl_verify_power_result pw;
    cr_assert_eq(sl_verify_power(0.05, 7, 0.01, 0.9, &pw), SL_OK, "%s", sl_errmsg());
    cr_assert(sl_stats_power_at_n(pw.n, 0.05, 7, 0.01) >= 0.9 - 1e-9, "n %g", pw.n);
    cr_assert(sl_stats_power_at_n(0.9 * pw.n, 0.05, 7, 0.01) < 0.9, "n %g", pw.n);
    sl_table *t;
    cr_assert_eq(sl_verify_power_report(&pw, &t), SL_OK);
    double n;
    cr_assert_eq(sl_table_getd(t, 0, "n", &n), SL_OK);
    cr_assert_eq(n, (double)(int64_t)pw.n);
    sl_table_free(t);
}
