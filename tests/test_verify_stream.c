/* test_verify_stream.c: sl_verify_run counts the sampler's tokens block by block, in memory
 * independent of the iterations (sl_mc_run_blocks), and its Monte Carlo p-values come in blocks
 * shared by threads and ranks. Checked against independent computations:
 * - the counts of the old stored-token path: the same tokens captured by sl_mc_run and tested by
 *   sl_verify_samples give every positional test and "all" bit for bit (every field); pair and
 *   triple against a naive recount here of the captured stream with the m-blocks restarted every
 *   SL_MC_BLOCK iterations (their Pearson and G statistics through sl_stats_gof, bit for bit);
 * - any thread count gives the same result, field for field, in one- and two-sample mode;
 * - the Monte Carlo exceedances: blocks split anywhere and on any thread count add up exactly to
 *   the whole, and the p-value estimates the exact enumerated one (sl_stats_exact_multinomial,
 *   itself checked against scipy in test_stats.c) on both draw paths (alias and binomials). */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "sl_common.h"
#include "sl_mc.h"
#include "sl_stats.h"
#include "sl_verify.h"
#include "verify_plans.h"

/* Every field of two test rows, bit for bit, but the Holm adjustment (it depends on the other
 * tests' p-values: pair and triple differ between the streaming and the stored path). */
static void assert_same_test(const sl_verify_test *x, const sl_verify_test *y, const char *what)
{
    cr_assert_str_eq(x->name, y->name, "%s", what);
    cr_assert_str_eq(x->method, y->method, "%s %s", what, x->name);
    cr_assert(x->n == y->n && x->n_b == y->n_b && x->cells == y->cells && x->degenerate == y->degenerate,
              "%s: test %s counts (n %zu vs %zu)", what, x->name, x->n, y->n);
    const double a[] = {x->df, x->pearson, x->p_pearson, x->g, x->p_g, x->p_small, x->p_value, x->p_random,
                        x->tv, x->tv_lo, x->tv_hi, x->power, x->tv_90};
    const double b[] = {y->df, y->pearson, y->p_pearson, y->g, y->p_g, y->p_small, y->p_value, y->p_random,
                        y->tv, y->tv_lo, y->tv_hi, y->power, y->tv_90};
    for (size_t j = 0; j < sizeof a / sizeof *a; j++)
        cr_assert(same_double(a[j], b[j]), "%s: test %s field %zu: %.17g vs %.17g", what, x->name, j, a[j], b[j]);
}

static void assert_same_result(const sl_verify_result *a, const sl_verify_result *b, const char *what)
{
    cr_assert_eq(a->n_rows, b->n_rows, "%s", what);
    cr_assert_eq(a->tokens, b->tokens, "%s", what);
    cr_assert_eq(a->n_tests, b->n_tests, "%s", what);
    cr_assert_eq(a->rejected, b->rejected, "%s", what);
    cr_assert(same_double(a->min_p_holm, b->min_p_holm) && same_double(a->max_freq_ratio, b->max_freq_ratio) &&
                  same_double(a->lenience_excess, b->lenience_excess),
              "%s: summary", what);
    for (size_t i = 0; i < a->n_rows; i++) {
        assert_same_test(&a->test[i], &b->test[i], what);
        cr_assert(same_double(a->test[i].p_holm, b->test[i].p_holm) && a->test[i].reject == b->test[i].reject,
                  "%s: %s p_holm", what, a->test[i].name);
    }
}

/* The stored-token path's counts equal the streaming ones; pair/triple as recounted here. */
static void check_against_stored(sl_mc_family fam, size_t V, size_t g, sl_rule rule, size_t N)
{
    sl_mc_plan *plan = family_plan(fam, V, g, rule);
    int32_t *tok = malloc(N * (g + 1) * sizeof *tok); /* (N, g+1) */
    uint8_t *nem = malloc(N);                         /* (N) */
    cr_assert(tok && nem);
    sl_mc_opts mo = {N, 5, 1, tok, nem, 1};
    sl_mc_result res;
    cr_assert_eq(sl_mc_run(plan, &mo, &res), SL_OK, "%s", sl_errmsg());
    sl_verify_opts o = SL_VERIFY_OPTS_DEFAULT;
    o.iterations = N;
    o.seed = 5;
    o.threads = 2;
    o.mc_sims = 500; /* the small-count tests (V = 300, 700 iterations) take the Monte Carlo path */
    sl_verify_result *run, *stored;
    cr_assert_eq(sl_verify_run(plan, &o, &run), SL_OK, "%s", sl_errmsg());
    cr_assert_eq(sl_verify_samples(plan, tok, nem, N, &o, &stored), SL_OK, "%s", sl_errmsg());
    cr_assert_eq(run->n_rows, stored->n_rows);
    cr_assert_eq(run->tokens, stored->tokens);
    size_t compared = 0, mc = 0;
    for (size_t i = 0; i < run->n_rows; i++) {
        const sl_verify_test *a = &run->test[i];
        mc += !strcmp(a->method, "monte-carlo");
        if (!strcmp(a->name, "pair") || !strcmp(a->name, "triple")) continue;
        assert_same_test(a, &stored->test[i], "stream vs stored");
        compared++;
    }
    cr_assert(compared >= 5);
    if (V == 300) cr_assert(mc >= 1, "no Monte Carlo p-value compared");
    /* Naive recount of the m-blocks: the tokens of each block of SL_MC_BLOCK iterations in order,
     * non-overlapping m-blocks from the block's first token, an incomplete last one dropped. */
    const double *p = sl_mc_plan_p(plan, 0);
    for (int m = 2; m <= 3; m++) {
        size_t K = m == 2 ? V * V : V * V * V, row = SIZE_MAX;
        for (size_t i = 0; i < run->n_rows; i++)
            if (!strcmp(run->test[i].name, m == 2 ? "pair" : "triple")) row = i;
        if (K > 4096 || sl_mc_plan_layout(plan) != SL_MC_IID) {
            cr_assert_eq(row, SIZE_MAX, "m = %d at V = %zu: no joint test expected", m, V);
            continue;
        }
        cr_assert_neq(row, SIZE_MAX);
        uint64_t *cnt = calloc(K, sizeof *cnt);
        double *pmf = malloc(K * sizeof *pmf);
        cr_assert(cnt && pmf);
        for (size_t c = 0; c < K; c++) {
            pmf[c] = 1;
            for (size_t r = c, j = 0; j < (size_t)m; j++, r /= V) pmf[c] *= p[r % V];
        }
        for (size_t b0 = 0; b0 < N; b0 += SL_MC_BLOCK) {
            size_t cell = 0, len = 0;
            for (size_t t = b0; t < N && t < b0 + SL_MC_BLOCK; t++)
                for (size_t j = 0; j < nem[t]; j++) {
                    cell = cell * V + (size_t)tok[t * (g + 1) + j];
                    if (++len == (size_t)m) {
                        cnt[cell]++;
                        cell = len = 0;
                    }
                }
        }
        uint64_t n = 0;
        for (size_t c = 0; c < K; c++) n += cnt[c];
        sl_gof x2, gg;
        cr_assert_eq(sl_stats_gof(cnt, pmf, K, SL_GOF_PEARSON, &x2), SL_OK);
        cr_assert_eq(sl_stats_gof(cnt, pmf, K, SL_GOF_G, &gg), SL_OK);
        const sl_verify_test *e = &run->test[row];
        cr_assert_eq(e->n, n, "m = %d: n %zu vs recount %llu", m, e->n, (unsigned long long)n);
        cr_assert(same_double(e->pearson, x2.stat) && same_double(e->g, gg.stat), "m = %d: statistics", m);
        cr_assert(N <= SL_MC_BLOCK || n < run->tokens / m, "restarts drop an incomplete m-block per block");
        free(cnt);
        free(pmf);
    }
    sl_verify_result_free(run);
    sl_verify_result_free(stored);
    free(tok);
    free(nem);
    sl_mc_plan_free(plan);
}

Test(verify_stream, counts_equal_stored_tokens)
{
    check_against_stored(SL_FAMILY_NOISY, 6, 3, SL_RULE_EXACT, 5000);   /* pair and triple */
    check_against_stored(SL_FAMILY_NOISY, 5, 2, SL_RULE_SAMPLER_MATCH, 3001);
    check_against_stored(SL_FAMILY_POSITIONAL, 5, 3, SL_RULE_EXACT, 4000);
    check_against_stored(SL_FAMILY_NOISY, 300, 3, SL_BUG_RESAMPLE_FROM_P, 700); /* Monte Carlo p-values */
}

/* The same bits for 1, 2 and 3 threads, one- and two-sample, with exact and Monte Carlo p-values. */
Test(verify_stream, any_thread_count)
{
    struct {
        size_t V, N;
        int two;
    } cases[] = {{6, 3000, 0}, {6, 3000, 1}, {300, 1500, 0}};
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
        sl_mc_plan *plan = family_plan(SL_FAMILY_NOISY, cases[c].V, 3, SL_RULE_EXACT);
        sl_verify_opts o = SL_VERIFY_OPTS_DEFAULT;
        o.iterations = cases[c].N;
        o.two_sample = cases[c].two;
        o.mc_sims = 1000;
        sl_verify_result *r[3];
        for (int t = 0; t < 3; t++) {
            o.threads = t + 1;
            cr_assert_eq(sl_verify_run(plan, &o, &r[t]), SL_OK, "%s", sl_errmsg());
        }
        if (cases[c].two) cr_assert_eq(r[0]->test[0].n_b, r[0]->tokens, "as many plain target tokens as emitted");
        for (int t = 1; t < 3; t++) assert_same_result(r[0], r[t], "threads");
        for (int t = 0; t < 3; t++) sl_verify_result_free(r[t]);
        sl_mc_plan_free(plan);
    }
}

/* Exceedances of disjoint block ranges, on different thread counts, add up to the whole's. */
Test(verify_stream, mc_blocks_add_up)
{
    const double pmf[5] = {0.1, 0.2, 0.3, 0.25, 0.15};
    const uint64_t counts[5] = {3, 1, 6, 2, 3};
    const size_t n_sim = 5000, nb = (n_sim + SL_STATS_MC_BLOCK - 1) / SL_STATS_MC_BLOCK;
    uint64_t ge, gt, ge1, gt1, ge2, gt2;
    cr_assert_eq(sl_stats_mc_multinomial_count(counts, pmf, 5, n_sim, 9, 3, 0, nb, 1, &ge, &gt), SL_OK);
    for (size_t split = 1; split < nb; split += 7) {
        cr_assert_eq(sl_stats_mc_multinomial_count(counts, pmf, 5, n_sim, 9, 3, 0, split, 2, &ge1, &gt1), SL_OK);
        cr_assert_eq(sl_stats_mc_multinomial_count(counts, pmf, 5, n_sim, 9, 3, split, nb, 3, &ge2, &gt2), SL_OK);
        cr_assert(ge1 + ge2 == ge && gt1 + gt2 == gt, "split at block %zu", split);
    }
    /* Another item is another stream. */
    cr_assert_eq(sl_stats_mc_multinomial_count(counts, pmf, 5, n_sim, 9, 4, 0, nb, 1, &ge1, &gt1), SL_OK);
    cr_assert(ge1 != ge || gt1 != gt);
}

/* The Monte Carlo p-value estimates the exact one on both draw paths: n <= 24 per category (alias
 * draws) and beyond (conditional binomials). 100000 draws: standard error <= sqrt(0.25 / 1e5) =
 * 1.6e-3; the tolerance 7e-3 is 4.4 standard errors (fixed seeds: deterministic). P(>) too. */
Test(verify_stream, mc_estimates_exact_on_both_paths)
{
    const double pmf[4] = {0.4, 0.3, 0.2, 0.1};
    const uint64_t c_alias[4] = {2, 6, 1, 3};      /* n = 12: alias draws */
    const uint64_t c_binom[4] = {30, 35, 20, 15}; /* n = 100 > 24 x 4: binomials */
    const uint64_t *cases[2] = {c_alias, c_binom};
    for (int i = 0; i < 2; i++) {
        double p_exact, gt_exact, p_mc, gt_mc;
        cr_assert_eq(sl_stats_exact_multinomial_ext(cases[i], pmf, 4, 1e6, &p_exact, &gt_exact), SL_OK);
        cr_assert_eq(sl_stats_mc_multinomial_ext(cases[i], pmf, 4, 100000, 11, &p_mc, &gt_mc), SL_OK);
        cr_assert(fabs(p_mc - p_exact) < 7e-3, "case %d: P(>=) %g vs exact %g", i, p_mc, p_exact);
        cr_assert(fabs(gt_mc - gt_exact) < 7e-3, "case %d: P(>) %g vs exact %g", i, gt_mc, gt_exact);
        cr_assert(p_exact > 0.01 && p_exact < 0.99, "case %d: exact %g, pick a discriminating table", i, p_exact);
    }
}
