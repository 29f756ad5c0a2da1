/* test_mc.c: sim/sl_mc: families, predictions against closed forms, the Monte Carlo loop against
 * theory, and thread-count invariance. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "sl_common.h"
#include "sl_mc.h"
#include "sl_stats.h"
#include "verify_plans.h"

/* Families: valid pmfs (checked by the plan), alpha = 1 for identical, 0 for disjoint, and the
 * noisy family's alpha falls as the noise grows. */
Test(mc, family_alphas)
{
    sl_mc_prediction pr;
    sl_mc_plan *p = family_plan_noise(SL_FAMILY_IDENTICAL, 100, 3, 0, SL_RULE_EXACT);
    sl_mc_predict(p, 10, &pr);
    cr_assert(fabs(pr.alpha - 1) < 1e-12);
    sl_mc_plan_free(p);
    p = family_plan_noise(SL_FAMILY_DISJOINT, 101, 3, 0, SL_RULE_EXACT);
    sl_mc_predict(p, 10, &pr);
    cr_assert_eq(pr.alpha, 0);
    sl_mc_plan_free(p);
    double last = 1.0;
    for (double e = 0.25; e <= 2.0; e *= 2) {
        p = family_plan_noise(SL_FAMILY_NOISY, 1000, 3, e, SL_RULE_EXACT);
        sl_mc_predict(p, 10, &pr);
        cr_assert(pr.alpha < last, "noise %g: alpha %g", e, pr.alpha);
        last = pr.alpha;
        sl_mc_plan_free(p);
    }
}

/* The local pmfs against Equation 1's closed forms (mean (1 - a^(g+1)) / (1 - a)), and the
 * positional form with equal betas against the i.i.d. one; both to 1e-12. */
Test(mc, pmfs_match_closed_forms)
{
    double pmf[SL_SPEC_GAMMA_MAX + 2], pmf2[SL_SPEC_GAMMA_MAX + 2], beta[SL_SPEC_GAMMA_MAX];
    for (size_t g = 1; g <= 8; g++)
        for (double a = 0.05; a < 1; a += 0.1) {
            sl_mc_pmf_iid(a, g, pmf);
            double s = 0, m = 0;
            for (size_t k = 1; k <= g + 1; k++) {
                s += pmf[k];
                m += (double)k * pmf[k];
            }
            cr_assert(fabs(s - 1) < 1e-12);
            cr_assert(fabs(m - (1 - pow(a, (double)g + 1)) / (1 - a)) < 1e-12);
            for (size_t i = 0; i < g; i++) beta[i] = a;
            sl_mc_pmf_positional(beta, g, pmf2);
            for (size_t k = 0; k <= g + 1; k++) cr_assert(fabs(pmf[k] - pmf2[k]) < 1e-12);
        }
}

/* Simulation against theory for the i.i.d. families and the positional one: fixed seed, so the
 * assertions are deterministic; each would fail for a correct sampler with probability ~1e-4
 * (mean within 4 standard errors, goodness-of-fit p > 1e-4). */
Test(mc, simulation_matches_theory)
{
    const sl_mc_family fams[] = {SL_FAMILY_NOISY, SL_FAMILY_DIRICHLET, SL_FAMILY_ZIPF, SL_FAMILY_POSITIONAL};
    for (size_t f = 0; f < 4; f++) {
        sl_mc_plan *p = family_plan_noise(fams[f], 300, 4, 0.4, SL_RULE_EXACT);
        sl_mc_opts o = {50000, 3, 0, NULL, NULL, 0};
        sl_mc_result r;
        cr_assert_eq(sl_mc_run(p, &o, &r), SL_OK);
        sl_mc_prediction pr;
        sl_mc_predict(p, o.iterations, &pr);
        double mean = (double)r.tokens / 50000.0, var = 0;
        for (size_t k = 1; k <= 5; k++) var += pr.pmf[k] * ((double)k - pr.expected_tokens) * ((double)k - pr.expected_tokens);
        cr_assert(fabs(mean - pr.expected_tokens) < 4 * sqrt(var / 50000.0), "family %zu: %g vs %g", f, mean,
                  pr.expected_tokens);
        sl_gof g;
        cr_assert_eq(sl_stats_gof(r.hist + 1, pr.pmf + 1, 5, SL_GOF_PEARSON, &g), SL_OK);
        cr_assert(g.p_value > 1e-4, "family %zu: p = %g", f, g.p_value);
        if (fams[f] == SL_FAMILY_POSITIONAL) {
            /* ... and the i.i.d. formula is rejected there, which is the point of the family. */
            cr_assert_eq(sl_stats_gof(r.hist + 1, pr.pmf_iid + 1, 5, SL_GOF_PEARSON, &g), SL_OK);
            cr_assert(g.p_value < 1e-10, "positional vs iid: p = %g", g.p_value);
        }
        cr_assert_eq(r.draft_calls, 4 * 50000);
        cr_assert_eq(r.target_calls, 50000);
        sl_mc_plan_free(p);
    }
}

/* Same seed, 1 and 2 threads: identical results and identical token streams, byte for byte. */
Test(mc, thread_count_does_not_change_results)
{
    sl_mc_plan *p = family_plan_noise(SL_FAMILY_NOISY, 500, 3, 0.6, SL_RULE_EXACT);
    const size_t N = 20001;
    int32_t *t1 = calloc(N * 4, sizeof *t1), *t2 = calloc(N * 4, sizeof *t2);
    uint8_t *n1 = calloc(N, 1), *n2 = calloc(N, 1);
    sl_mc_opts o1 = {N, 9, 1, t1, n1, 0}, o2 = {N, 9, 2, t2, n2, 0};
    sl_mc_result r1, r2;
    cr_assert_eq(sl_mc_run(p, &o1, &r1), SL_OK);
    cr_assert_eq(sl_mc_run(p, &o2, &r2), SL_OK);
    r1.elapsed_s = r2.elapsed_s = 0;
    cr_assert_eq(memcmp(&r1, &r2, sizeof r1), 0);
    cr_assert_eq(memcmp(t1, t2, N * 4 * sizeof *t1), 0);
    cr_assert_eq(memcmp(n1, n2, N), 0);
    free(t1);
    free(t2);
    free(n1);
    free(n2);
    sl_mc_plan_free(p);
}

/* The reference path (every iteration through sl_spec_draft + sl_spec_verify, as `speclab verify`
 * runs it) is thread-count invariant too, for a rule with its own streams (sampler-match draws
 * from the target stream) and for a wrong variant; N is not a multiple of the block size. */
Test(mc, reference_path_thread_count_does_not_change_results)
{
    const sl_rule rules[] = {SL_RULE_EXACT, SL_RULE_SAMPLER_MATCH, SL_BUG_SHARED_UNIFORM};
    const size_t N = 3001, gamma = 3;
    for (int r = 0; r < 3; r++) {
        sl_mc_plan *p = family_plan_noise(SL_FAMILY_NOISY, 50, gamma, 0.6, rules[r]);
        int32_t *t1 = calloc(N * (gamma + 1), sizeof *t1), *t2 = calloc(N * (gamma + 1), sizeof *t2);
        sl_mc_opts o1 = {N, 5, 1, t1, NULL, 1}, o2 = {N, 5, 2, t2, NULL, 1};
        sl_mc_result r1, r2;
        cr_assert_eq(sl_mc_run(p, &o1, &r1), SL_OK);
        cr_assert_eq(sl_mc_run(p, &o2, &r2), SL_OK);
        r1.elapsed_s = r2.elapsed_s = 0;
        cr_assert_eq(memcmp(&r1, &r2, sizeof r1), 0, "rule %d", r);
        cr_assert_eq(memcmp(t1, t2, N * (gamma + 1) * sizeof *t1), 0, "rule %d", r);
        free(t1);
        free(t2);
        sl_mc_plan_free(p);
    }
}

/* The fused loop at the edges of its bit mask: gamma = 1, an odd gamma, and gamma = 64 where an
 * iteration that accepts every draft sets all 64 bits (identical pair: always). Byte-identical to
 * the reference path; N is not a multiple of the block size. */
Test(mc, fused_loop_equals_reference_at_extreme_gammas)
{
    const size_t gammas[] = {1, 5, 64}, N = 1000;
    {
        /* V >= 16384: the loop that prefetches table columns */
        const size_t g4 = 4, V = 20000;
        sl_mc_plan *p = family_plan_noise(SL_FAMILY_NOISY, V, g4, 0.5, SL_RULE_EXACT);
        int32_t *t1 = calloc(N * (g4 + 1), sizeof *t1), *t2 = calloc(N * (g4 + 1), sizeof *t2);
        sl_mc_opts fast = {N, 4, 1, t1, NULL, 0}, ref = {N, 4, 1, t2, NULL, 1};
        sl_mc_result a, b;
        cr_assert_eq(sl_mc_run(p, &fast, &a), SL_OK);
        cr_assert_eq(sl_mc_run(p, &ref, &b), SL_OK);
        cr_assert_eq(memcmp(t1, t2, N * (g4 + 1) * sizeof *t1), 0, "V %zu", V);
        free(t1);
        free(t2);
        sl_mc_plan_free(p);
    }
    const sl_mc_family fams[] = {SL_FAMILY_IDENTICAL, SL_FAMILY_NOISY};
    for (int g = 0; g < 3; g++)
        for (int f = 0; f < 2; f++) {
            size_t gamma = gammas[g];
            sl_mc_plan *p = family_plan_noise(fams[f], 40, gamma, 0.3, SL_RULE_EXACT);
            int32_t *t1 = calloc(N * (gamma + 1), sizeof *t1), *t2 = calloc(N * (gamma + 1), sizeof *t2);
            uint8_t *n1 = calloc(N, 1), *n2 = calloc(N, 1);
            sl_mc_opts fast = {N, 3, 1, t1, n1, 0}, ref = {N, 3, 1, t2, n2, 1};
            sl_mc_result a, b;
            cr_assert_eq(sl_mc_run(p, &fast, &a), SL_OK);
            cr_assert_eq(sl_mc_run(p, &ref, &b), SL_OK);
            cr_assert_eq(memcmp(t1, t2, N * (gamma + 1) * sizeof *t1), 0, "gamma %zu family %d", gamma, f);
            cr_assert_eq(memcmp(n1, n2, N), 0);
            a.elapsed_s = b.elapsed_s = 0;
            cr_assert_eq(memcmp(&a, &b, sizeof a), 0);
            if (f == 0) cr_assert_eq(a.hist[gamma + 1], N, "identical pair: every draft accepted");
            free(t1);
            free(t2);
            free(n1);
            free(n2);
            sl_mc_plan_free(p);
        }
}

/* The fused loop's integer alias draw against sl_alias_sample_u, token for token: at both ends
 * of every column's range of k (where rounding of u V can move a draw to the next column), on
 * both sides of every place inside a column where the reference switches from the column to its
 * alias (found by bisection on the reference alone), and at random k. Tables with zero columns
 * (disjoint), prob-1 columns (identical pair: the residual is 0/0), and V up to 50257. */
static void check_draws(sl_mc_plan *p, const char *what)
{
    size_t V = sl_mc_plan_vocab(p);
    const unsigned __int128 two53 = (unsigned __int128)1 << 53;
    gsl_rng *r = sl_rng_alloc(1, SL_STREAM_DATA, V);
    for (size_t row = 0; row < sl_mc_plan_rows(p); row++)
        for (int which = 0; which < 3; which++) {
            const sl_alias *a = sl_mc_plan_alias(p, which, row);
            cr_assert_not_null(a);
#define CHECK(kk)                                                                                          \
    do {                                                                                                   \
        uint64_t k_ = (kk);                                                                                \
        size_t ref = sl_alias_sample_u(a, (double)k_ * 0x1.0p-53);                                        \
        int64_t got = sl_mc_plan_fused_draw(p, which, row, k_);                                           \
        cr_assert_eq(got, (int64_t)ref, "%s table %d row %zu k %llu: %lld, reference %zu", what, which, row, \
                     (unsigned long long)k_, (long long)got, ref);                                         \
    } while (0)
            for (size_t c = 0; c < V; c++) {
                uint64_t k0 = (uint64_t)((c * two53 + V - 1) / V), k1 = (uint64_t)(((c + 1) * two53 + V - 1) / V) - 1;
                for (uint64_t d = 0; d < 3; d++) {
                    CHECK(k0 + d);
                    CHECK(k1 - d);
                }
                if (a->alias[c] == c) continue;
                /* first k in [k0, k1] whose reference token is not c, if any */
                uint64_t lo = k0, hi = k1 + 1;
                while (lo < hi) {
                    uint64_t mid = lo + (hi - lo) / 2;
                    if (sl_alias_sample_u(a, (double)mid * 0x1.0p-53) == c) lo = mid + 1;
                    else hi = mid;
                }
                for (uint64_t d = lo > k0 + 2 ? lo - 2 : k0; d <= lo + 2 && d <= k1; d++) CHECK(d);
            }
            for (int i = 0; i < 2000; i++) CHECK(gsl_rng_get(r) << 21 ^ gsl_rng_get(r));
#undef CHECK
        }
    gsl_rng_free(r);
}

Test(mc, fused_integer_draw_equals_alias_sample)
{
    const size_t Vs[] = {2, 3, 7, 300, 4097};
    for (int v = 0; v < 5; v++) {
        sl_mc_plan *p = family_plan_noise(SL_FAMILY_NOISY, Vs[v], 3, 0.8, SL_RULE_EXACT);
        check_draws(p, "noisy");
        sl_mc_plan_free(p);
    }
    sl_mc_plan *p = family_plan_noise(SL_FAMILY_DISJOINT, 101, 2, 0, SL_RULE_EXACT);
    check_draws(p, "disjoint");
    sl_mc_plan_free(p);
    p = family_plan_noise(SL_FAMILY_IDENTICAL, 64, 2, 0, SL_RULE_LENIENT);
    check_draws(p, "identical");
    sl_mc_plan_free(p);
    p = family_plan_noise(SL_FAMILY_POSITIONAL, 50, 2, 0.5, SL_RULE_EXACT);
    check_draws(p, "positional");
    sl_mc_plan_free(p);
    p = family_plan_noise(SL_FAMILY_ZIPF, 50257, 4, 0, SL_RULE_EXACT);
    check_draws(p, "zipf");
    sl_mc_plan_free(p);
}

/* The AVX2 counting loop computes the draft point x = (k 2^-53) V from the generator's 64-bit
 * output with one fused multiply-add (sim/sl_mc.c, mc_draft_x); the reference path multiplies the
 * uniform k 2^-53 by V. Both round the same real number once, so they must agree bit for bit: on
 * 2^20 outputs of a generator and the edges of k (0, 1, 2^52 - 1, 2^52, 2^53 - 1, and outputs whose
 * bit 11, k's lowest, is set), for vocabularies from 2 to 2^31 - 1. */
Test(mc, counting_draft_point_equals_reference)
{
    const size_t Vs[] = {2, 3, 7, 256, 4096, 50257, 1000003, 2147483647};
    sl_xoshiro g;
    sl_xoshiro_seed(&g, 5, 0, 0);
    const uint64_t edges[] = {0, 1ULL << 11, ((1ULL << 52) - 1) << 11, 1ULL << 63, ~0ULL, ~0ULL ^ (1ULL << 11),
                              (1ULL << 11) | 0x7ff, 0x123456789abcdef0ULL | (1ULL << 11)};
    for (size_t v = 0; v < sizeof Vs / sizeof Vs[0]; v++)
        for (size_t n = 0; n < (1u << 18) + 2; n++) {
            uint64_t r[4];
            for (int l = 0; l < 4; l++) r[l] = n < 2 ? edges[4 * n + l] : sl_xoshiro_next(&g);
            double x[4];
            cr_assert_eq(sl_mc_counting_draft_x(r, Vs[v], x), 1);
            for (int l = 0; l < 4; l++) {
                const double want = (double)(r[l] >> 11) * 0x1.0p-53 * (double)Vs[v];
                cr_assert(!memcmp(&x[l], &want, sizeof want), "V %zu, r %#llx: x %a, reference %a", Vs[v],
                          (unsigned long long)r[l], x[l], want);
            }
        }
}

/* The fused loop of the exact and lenient rules is the fast twin of sl_spec_draft + sl_spec_verify:
 * byte-identical tokens for the same seed on i.i.d., positional and sliding layouts. */
Test(mc, fused_loop_equals_reference_sampler)
{
    const sl_rule rules[] = {SL_RULE_EXACT, SL_RULE_LENIENT};
    const sl_mc_family fams[] = {SL_FAMILY_NOISY, SL_FAMILY_POSITIONAL, SL_FAMILY_DISJOINT, SL_FAMILY_IDENTICAL};
    const size_t N = 20000, gamma = 3;
    int32_t *t1 = calloc(N * (gamma + 1), sizeof *t1), *t2 = calloc(N * (gamma + 1), sizeof *t2);
    uint8_t *n1 = calloc(N, 1), *n2 = calloc(N, 1);
    for (int r = 0; r < 2; r++)
        for (int f = 0; f < 4; f++) {
            sl_mc_family_params fp = SL_MC_FAMILY_DEFAULT;
            fp.family = fams[f];
            fp.V = 300;
            fp.gamma = gamma;
            sl_mc_rows *rows;
            cr_assert_eq(sl_mc_family_rows(&fp, &rows), SL_OK);
            sl_mc_source src = sl_mc_rows_source(rows);
            if (f == 2) src.layout = SL_MC_SLIDING; /* one row replayed as a log: still the same pair */
            sl_spec_config cfg = SL_SPEC_CONFIG_DEFAULT;
            cfg.rule = rules[r];
            cfg.lenience = r ? 0.7 : 1.0;
            sl_mc_plan *p;
            cr_assert_eq(sl_mc_plan_alloc(&src, gamma, &cfg, &p), SL_OK);
            sl_mc_opts fast = {N, 17, 1, t1, n1, 0}, ref = {N, 17, 1, t2, n2, 1};
            sl_mc_result a, b;
            cr_assert_eq(sl_mc_run(p, &fast, &a), SL_OK);
            cr_assert_eq(sl_mc_run(p, &ref, &b), SL_OK);
            cr_assert_eq(memcmp(t1, t2, N * (gamma + 1) * sizeof *t1), 0, "rule %d family %d", r, f);
            cr_assert_eq(memcmp(n1, n2, N), 0);
            cr_assert_eq(a.tokens, b.tokens);
            sl_mc_plan_free(p);
            sl_mc_rows_free(rows);
        }
    free(t1);
    free(t2);
    free(n1);
    free(n2);
}

/* The counting loop (sl_mc_run without token arrays: eight blocks at a time, as eight 512-bit lanes
 * where the CPU has AVX-512 and as two halves of four AVX2 lanes, both builds where the CPU runs
 * them) gives the reference path's results exactly: histogram, and
 * with it every count and sum. i.i.d. and positional layouts (the ones it takes), a sliding one
 * (the fused loop's), exact and lenient rules, gamma 1, 4, 5 and 64, tables from L1 to larger than
 * L2 (V = 50257), N a multiple of neither the block (256) nor the eight-block group, 1 and 2
 * threads, with the compact table's ties rare, common and everywhere. */
Test(mc, counting_loop_equals_reference)
{
    const struct {
        sl_mc_family fam;
        size_t V, gamma;
        sl_rule rule;
        double lenience;
        int sliding;
    } cases[] = {
        {SL_FAMILY_NOISY, 40, 4, SL_RULE_EXACT, 1, 0},       {SL_FAMILY_NOISY, 300, 5, SL_RULE_LENIENT, 0.7, 0},
        {SL_FAMILY_IDENTICAL, 40, 64, SL_RULE_EXACT, 1, 0},  {SL_FAMILY_DISJOINT, 50, 1, SL_RULE_EXACT, 1, 0},
        {SL_FAMILY_POSITIONAL, 300, 4, SL_RULE_EXACT, 1, 0}, {SL_FAMILY_ZIPF, 50257, 4, SL_RULE_EXACT, 1, 0},
        {SL_FAMILY_NOISY, 300, 3, SL_RULE_EXACT, 1, 1},
    };
    const size_t Ns[] = {1, 3001, 2048 * 2 + 256 * 3 + 17};
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        sl_mc_family_params fp = SL_MC_FAMILY_DEFAULT;
        fp.family = cases[c].fam;
        fp.V = cases[c].V;
        fp.gamma = cases[c].gamma;
        fp.noise = 0.4;
        sl_mc_rows *rows;
        cr_assert_eq(sl_mc_family_rows(&fp, &rows), SL_OK, "%s", sl_errmsg());
        sl_mc_source src = sl_mc_rows_source(rows);
        if (cases[c].sliding) src.layout = SL_MC_SLIDING;
        sl_spec_config cfg = SL_SPEC_CONFIG_DEFAULT;
        cfg.rule = cases[c].rule;
        cfg.lenience = cases[c].lenience;
        sl_mc_plan *p;
        cr_assert_eq(sl_mc_plan_alloc(&src, cases[c].gamma, &cfg, &p), SL_OK, "%s", sl_errmsg());
        /* The compact table's default bits (ties rare), few bits (ties common: prob by its exponent
         * alone, thresholds by 3 bits) and none (every test a tie, decided from the full table). */
        const unsigned bits[3][2] = {{32, 37}, {52, 50}, {63, 63}};
        for (size_t k = 0; k < 3; k++) {
            sl_mc_opts ref = {Ns[k], 11 + k, 1, NULL, NULL, 1};
            sl_mc_result b;
            cr_assert_eq(sl_mc_run(p, &ref, &b), SL_OK);
            b.elapsed_s = 0;
            for (size_t bi = 0; bi < 3; bi++) {
                cr_assert_eq(sl_mc_plan_set_count_bits(p, bits[bi][0], bits[bi][1]), SL_OK, "%s", sl_errmsg());
                for (int isa = SL_MC_COUNT_AVX2; isa <= SL_MC_COUNT_WIDE; isa++) {
                    if (sl_mc_counting_isa(isa) != isa) continue; /* no AVX-512 here */
                    for (int threads = 1; threads <= 2; threads++) {
                        sl_mc_opts fast = {Ns[k], 11 + k, threads, NULL, NULL, 0};
                        sl_mc_result a;
                        cr_assert_eq(sl_mc_run(p, &fast, &a), SL_OK);
                        a.elapsed_s = 0;
                        cr_assert_eq(memcmp(&a, &b, sizeof a), 0,
                                     "case %zu bits %u/%u N %zu isa %d threads %d: tokens %llu vs %llu", c, bits[bi][0],
                                     bits[bi][1], Ns[k], isa, threads, (unsigned long long)a.tokens,
                                     (unsigned long long)b.tokens);
                    }
                }
                sl_mc_counting_isa(SL_MC_COUNT_AUTO);
            }
        }
        sl_mc_plan_free(p);
        sl_mc_rows_free(rows);
    }
}

/* A sliding source (logged rows replayed from every prefix): the window-averaged prediction
 * matches the simulated histogram (p > 1e-4, fixed seed). */
Test(mc, sliding_source_matches_window_average)
{
    const size_t V = 4, R = 5;
    sl_mc_rows *rows = sl_mc_rows_alloc(V, R, SL_MC_SLIDING);
    for (size_t i = 0; i < R; i++) {
        double *p = rows->p + i * V, *q = rows->q + i * V;
        double w = 0.15 * (double)i; /* beta = 1 - w */
        for (size_t x = 0; x < V; x++) p[x] = 0.25;
        q[0] = 0.25 + w; q[1] = 0.25 - w / 3; q[2] = 0.25 - w / 3; q[3] = 0.25 - w / 3;
    }
    sl_mc_source src = sl_mc_rows_source(rows);
    sl_spec_config cfg = SL_SPEC_CONFIG_DEFAULT;
    sl_mc_plan *p;
    cr_assert_eq(sl_mc_plan_alloc(&src, 3, &cfg, &p), SL_OK, "%s", sl_errmsg());
    sl_mc_opts o = {40003, 5, 0, NULL, NULL, 0};
    sl_mc_result r;
    cr_assert_eq(sl_mc_run(p, &o, &r), SL_OK);
    sl_mc_prediction pr;
    sl_mc_predict(p, o.iterations, &pr);
    sl_gof g;
    cr_assert_eq(sl_stats_gof(r.hist + 1, pr.pmf + 1, 4, SL_GOF_PEARSON, &g), SL_OK);
    cr_assert(g.p_value > 1e-4, "p = %g", g.p_value);
    cr_assert(fabs(pr.alpha - (1 - 0.15 * 2)) < 1e-12); /* mean beta over the 5 rows */
    sl_mc_plan_free(p);
    sl_mc_rows_free(rows);
}

/* Bad input: one-line SL_EINPUT, nothing allocated. */
Test(mc, bad_input)
{
    sl_mc_family_params fp = SL_MC_FAMILY_DEFAULT;
    sl_mc_rows *rows;
    fp.V = 1;
    cr_assert_eq(sl_mc_family_rows(&fp, &rows), SL_EINPUT);
    cr_assert(!strncmp(sl_errmsg(), "vocab: ", 7), "%s", sl_errmsg()); /* the quantity, which main maps to --vocab */
    fp = SL_MC_FAMILY_DEFAULT;
    fp.noise = -1;
    cr_assert_eq(sl_mc_family_rows(&fp, &rows), SL_EINPUT);
    fp = SL_MC_FAMILY_DEFAULT;
    fp.concentration = 0;
    cr_assert_eq(sl_mc_family_rows(&fp, &rows), SL_EINPUT);
    /* A source row that is not a pmf. */
    rows = sl_mc_rows_alloc(3, 1, SL_MC_IID);
    rows->p[0] = 0.5; rows->p[1] = 0.6; rows->p[2] = 0;
    rows->q[0] = 1;
    sl_mc_source src = sl_mc_rows_source(rows);
    sl_spec_config cfg = SL_SPEC_CONFIG_DEFAULT;
    sl_mc_plan *p;
    cr_assert_eq(sl_mc_plan_alloc(&src, 2, &cfg, &p), SL_EINPUT);
    cr_assert_eq(sl_mc_plan_alloc(&src, 0, &cfg, &p), SL_EINPUT);
    sl_mc_family sf;
    cr_assert_eq(sl_mc_family_parse("gaussian", &sf), SL_EINPUT);
    sl_mc_rows_free(rows);
}
