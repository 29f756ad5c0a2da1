/*
 * test_analyze.c: the analysis of logs against independent computations: the oracle's dynamic
 * programme against brute force, the oracle's closed form and the fixed-gamma factor against
 * simulation, policy edge cases, bootstrap coverage, and every number analyze derives from full
 * distributions and from beta windows against naive double-precision loops over the same file.
 */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <gsl/gsl_randist.h>

#include "sl_analyze.h"
#include "sl_common.h"
#include "sl_log.h"
#include "sl_recommend.h"
#include "sl_synth.h"

/* Brute force over every gamma choice, drafting past rejections included. */
static double brute(const uint8_t *a, size_t n, size_t t, size_t G, double c, const double *vtab)
{
    if (t >= n) return 0;
    double best = INFINITY;
    size_t cap = G < n - 1 - t ? G : n - 1 - t;
    for (size_t g = 0; g <= cap; g++) {
        size_t k = 0;
        while (k < g && a[t + k]) k++;
        double v = (double)g * c + vtab[g] + brute(a, n, t + k + 1, G, c, vtab);
        if (v < best) best = v;
    }
    return best;
}

Test(analyze, oracle_dp_equals_brute_force)
{
    gsl_rng *r = sl_rng_alloc(3, SL_STREAM_DATA, 0);
    double vlin[6] = {1, 1.1, 1.2, 1.3, 1.4, 1.5}, vconvex[6] = {1, 1.5, 2.6, 4.5, 7, 11};
    const double *vt[2] = {vlin, vconvex};
    for (int it = 0; it < 300; it++) {
        size_t n = 1 + gsl_rng_uniform_int(r, 11), G = 1 + gsl_rng_uniform_int(r, 5);
        uint8_t a[12];
        double pa = gsl_rng_uniform(r);
        for (size_t t = 0; t < n; t++) a[t] = gsl_rng_uniform(r) < pa;
        double c = it % 2 ? 0.05 : 0.6, C[13];
        const double *v = vt[it % 3 == 0];
        sl_replay_acc acc = {0};
        sl_replay_oracle(a, n, G, c, v, C, &acc);
        double bf = brute(a, n, 0, G, c, v);
        /* Tolerance 1e-12: the same few additions in another order. */
        cr_assert(fabs(C[0] - bf) < 1e-12, "dp %g brute %g", C[0], bf);
        cr_assert(fabs(acc.draft_steps * c + acc.verify_cost - bf) < 1e-12, "forward walk cost differs");
        cr_assert_eq(acc.tokens, (double)n);
    }
    gsl_rng_free(r);
}

/* i.i.d. acceptance: simulated oracle and fixed-gamma factors against their closed forms. */
Test(analyze, oracle_and_fixed_closed_forms_vs_simulation)
{
    size_t n = 200000, G = 8;
    uint8_t *a = malloc(n);
    double *C = malloc((n + 1) * sizeof *C), vtab[9];
    gsl_rng *r = sl_rng_alloc(11, SL_STREAM_ACCEPT, 0);
    const double alphas[3] = {0.5, 0.8, 0.95}, cs[2] = {0.05, 0.2}, slope[2] = {0, 0.05};
    for (int ia = 0; ia < 3; ia++)
        for (int ic = 0; ic < 2; ic++)
            for (int iv = 0; iv < 2; iv++) {
                for (size_t g = 0; g <= G; g++) vtab[g] = 1 + slope[iv] * (double)g;
                for (size_t t = 0; t < n; t++) a[t] = sl_rng_uniform53(r) < alphas[ia];
                sl_replay_acc o = {0}, f = {0};
                sl_replay_oracle(a, n, G, cs[ic], vtab, C, &o);
                double sim = o.tokens / (o.draft_steps * cs[ic] + o.verify_cost);
                double cf = sl_analyze_oracle_iid(alphas[ia], G, cs[ic], vtab);
                /* Tolerance 1%: at least 4 standard errors of a ratio over >= 25000 iterations
                 * (relative sd <= 0.25%); the end effect is <= G / n = 4e-5. The closed form is the
                 * greedy oracle, optimal here (v linear with slope <= c... or v == 1). */
                cr_assert(fabs(sim / cf - 1) < 0.01, "alpha %g c %g slope %g: oracle simulated %g, closed form %g",
                          alphas[ia], cs[ic], slope[iv], sim, cf);
                sl_theory_vcost vc;
                sl_theory_vcost_linear(&vc, slope[iv]);
                for (size_t g = 1; g <= G; g += 3) {
                    memset(&f, 0, sizeof f);
                    sl_replay_fixed(a, n, g, vtab, &f);
                    double fs = f.tokens / (f.draft_steps * cs[ic] + f.verify_cost), th;
                    cr_assert_eq(sl_theory_walltime_factor_v(alphas[ia], (int)g, cs[ic], &vc, &th), SL_OK);
                    cr_assert(fabs(fs / th - 1) < 0.01, "fixed gamma %zu: simulated %g, theory %g", g, fs, th);
                    cr_assert(sim >= fs * (1 - 1e-12), "the oracle is never worse than a fixed gamma on the same pattern");
                }
            }
    gsl_rng_free(r);
    free(a);
    free(C);
}

Test(analyze, policy_edge_cases)
{
    size_t n = 1000, G = 6;
    uint8_t a[1000];
    double qm_hi[1000], vtab[7] = {1, 1, 1, 1, 1, 1, 1};
    for (size_t t = 0; t < n; t++) a[t] = (t * 7) % 5 != 0, qm_hi[t] = 1;
    sl_replay_acc f = {0}, p = {0}, z = {0}, h = {0};
    sl_replay_fixed(a, n, G, vtab, &f);
    sl_replay_pmin(a, qm_hi, n, G, 0.5, vtab, &p);
    /* Confidence always above the threshold: p_min drafts the full gamma, like fixed gamma. */
    cr_assert_eq(memcmp(&f, &p, sizeof f), 0);
    sl_replay_pmin(a, qm_hi, n, G, 1.5, vtab, &z);
    /* Never confident: every iteration is one draft step that stops, then one plain target step;
     * at the last position there is nothing left to draft. */
    cr_assert_eq(z.tokens, (double)n);
    cr_assert_eq(z.iterations, (double)n);
    cr_assert_eq(z.draft_steps, (double)(n - 1));
    cr_assert_eq(z.verify_cost, (double)n);
    /* All accepted: the +2/-1 schedule climbs 5, 7 -> capped at G. */
    uint8_t all[1000];
    memset(all, 1, sizeof all);
    sl_replay_hf(all, n, G, 5, vtab, &h);
    cr_assert_eq(h.tokens, (double)n);
    cr_assert(h.iterations <= (double)n / (double)(G + 1) + 3, "iterations %g", h.iterations);
}

/* The percentile bootstrap over sequences covers a known alpha in >= 90 of 100 replications. */
Test(analyze, bootstrap_coverage)
{
    size_t reps = 100, ns = 40, covered = 0;
    double num[40], den[40];
    gsl_rng *r = sl_rng_alloc(5, SL_STREAM_DATA, 0);
    for (size_t rep = 0; rep < reps; rep++) {
        for (size_t s = 0; s < ns; s++) {
            size_t len = 10 + gsl_rng_uniform_int(r, 31);
            double sum = 0;
            for (size_t t = 0; t < len; t++) sum += gsl_ran_beta(r, 3, 2); /* mean 0.6 */
            num[s] = sum;
            den[s] = (double)len;
        }
        double est, lo, hi;
        cr_assert_eq(sl_analyze_boot_ratio(num, den, ns, 400, 0.95, 100 + rep, &est, &lo, &hi), SL_OK);
        covered += lo <= 0.6 && 0.6 <= hi;
    }
    gsl_rng_free(r);
    /* Nominal 95%: P(Binomial(100, 0.95) < 90) is about 0.03; the percentile method runs a little
     * short with 40 groups, so 90 is the floor the brief asks for. */
    cr_assert(covered >= 90, "covered %zu of %zu", covered, reps);
}

/* A synthetic measure log analysed, against naive double loops over the same file. */
Test(analyze, measure_log_against_naive)
{
    char dir[256], path[300], cmd[600];
    snprintf(dir, sizeof dir, "/tmp/sl_test_an.%ld", (long)getpid());
    snprintf(path, sizeof path, "%s/m.h5", dir);
    snprintf(cmd, sizeof cmd, "rm -rf %s && mkdir -p %s", dir, dir);
    cr_assert_eq(system(cmd), 0);
    sl_synth_params sp = SL_SYNTH_DEFAULT;
    sp.V = 128;
    sp.noise = 0.8;
    sl_synth_lm *mt, *md;
    cr_assert_eq(sl_synth_alloc(&sp, 0, &mt), SL_OK);
    cr_assert_eq(sl_synth_alloc(&sp, 1, &md), SL_OK);
    sl_lm lt = sl_synth_lm_of(mt), ld = sl_synth_lm_of(md);
    size_t ns = 7, N = 40, G = 5;
    int32_t pt[7][2];
    const int32_t *pp[7];
    size_t pl[7];
    for (size_t s = 0; s < ns; s++) pt[s][0] = (int32_t)s, pt[s][1] = (int32_t)(3 * s), pp[s] = pt[s], pl[s] = 2;
    sl_log_prompts pr = {ns, pp, pl, NULL};
    sl_log_meta m;
    sl_log_meta_init(&m, SL_LOG_MEASURE);
    m.dist = SL_LOG_DIST_F32;
    m.tokens_per_sequence = N;
    m.shard_sequences = 3;
    cr_assert_eq(sl_log_measure(&lt, &ld, &pr, &m, NULL, path, NULL, NULL), SL_OK, "%s", sl_errmsg());
    sl_analyze_opts o;
    sl_analyze_opts_init(&o);
    o.gamma_max = G;
    o.n_lenience = 2;
    o.lenience[0] = 0.5;
    o.lenience[1] = 1;
    o.threads = 2;
    sl_analyze_result res, res1;
    cr_assert_eq(sl_analyze_file(path, &o, &res), SL_OK, "%s", sl_errmsg());
    o.threads = 1;
    cr_assert_eq(sl_analyze_file(path, &o, &res1), SL_OK, "%s", sl_errmsg());
    /* Thread count never changes a number: per-row results are summed in row order. */
    cr_assert_eq(res.beta_dists, res1.beta_dists);
    cr_assert_eq(res.alpha_l[0], res1.alpha_l[0]);
    cr_assert_eq(res.alpha_lo, res1.alpha_lo);
    cr_assert_eq(res.pol[1].walltime_factor, res1.pol[1].walltime_factor);
    /* --beta-only runs the same beta kernel: the same bits. */
    sl_analyze_result rb;
    o.beta_only = 1;
    cr_assert_eq(sl_analyze_file(path, &o, &rb), SL_OK, "%s", sl_errmsg());
    cr_assert_eq(rb.beta_dists, res.beta_dists, "%.17g vs %.17g", rb.beta_dists, res.beta_dists);
    o.beta_only = 0;

    sl_log_reader *r;
    cr_assert_eq(sl_log_open(&r, path), SL_OK);
    size_t V = sp.V, total = sl_log_n_rows(r);
    cr_assert_eq(total, ns * N);
    double *p = malloc(V * sizeof *p), *q = malloc(V * sizeof *q), *beta = malloc(total * sizeof *beta);
    double sb = 0, sl05 = 0, st0 = 0, sm = 0, snon = 0, sa = 0;
    sl_log_pos_block b;
    sl_log_pos_block_alloc(&b, total);
    cr_assert_eq(sl_log_read_positions(r, 0, &b), SL_OK);
    for (size_t i = 0; i < total; i++) {
        cr_assert_eq(sl_log_read_row(r, i, p, q), SL_OK);
        double be = 0, al = 0, mt_ = 0, nn = INFINITY, pmax = 0;
        size_t qa = 0;
        for (size_t x = 0; x < V; x++) {
            be += fmin(p[x], q[x]);
            al += fmin(q[x], p[x] / 0.5);
            mt_ += p[x] * q[x];
            if (p[x] > 0) nn = fmin(nn, q[x] / p[x]);
            pmax = fmax(pmax, p[x]);
            if (q[x] > q[qa]) qa = x;
        }
        sb += be, sl05 += al, sm += mt_, snon += nn, st0 += p[qa] >= 0.5 * pmax;
        beta[i] = b.beta[i];
        sa += b.beta[i];
    }
    /* Tolerance 1e-12: the same float inputs summed in double in another order (V = 128 terms). */
    cr_assert(fabs(res.beta_dists - sb / (double)total) < 1e-12, "%.17g vs %.17g", res.beta_dists, sb / (double)total);
    cr_assert(fabs(res.alpha_l[0] - sl05 / (double)total) < 1e-12);
    cr_assert(fabs(res.alpha_l[1] - res.beta_dists) < 1e-12, "alpha(l = 1) is beta");
    cr_assert(fabs(res.match - sm / (double)total) < 1e-12);
    cr_assert(fabs(res.nonit - snon / (double)total) < 1e-12);
    cr_assert(fabs(res.alpha_t0[0] - st0 / (double)total) < 1e-12);
    cr_assert(fabs(res.alpha - sa / (double)total) < 1e-12);
    /* float32 storage moves beta by at most V * 2^-24 relative. */
    cr_assert(res.beta_dists_maxdiff < 128 * 0x1p-24, "%g", res.beta_dists_maxdiff);
    /* Windows, per gamma = k + 1 over every window of that length (issue 17, defect 7): U_k = mean of
     * prod_{i<=k} beta_{t+i}, E[N](gamma) = mean of sum_{j<=gamma} prod_{i<j} beta_{t+i}, by
     * direct loops over each window. Acceptance at position 1 is then alpha on the same rows. */
    for (size_t k = 0; k < G; k++) {
        double U = 0, E = 0, W = 0;
        for (size_t s = 0; s < ns; s++)
            for (size_t t = 0; t + k + 1 <= N; t++) {
                double prod = 1, e = 1;
                for (size_t j = 0; j <= k; j++) prod *= beta[s * N + t + j], e += prod;
                U += prod, E += e, W += 1;
            }
        cr_assert(fabs(res.uncond[k] - U / W) < 1e-12, "position %zu", k + 1);
        cr_assert(fabs(res.en_replay[k] - E / W) < 1e-12, "gamma %zu: %.17g vs %.17g", k + 1, res.en_replay[k], E / W);
    }
    cr_assert(fabs(res.uncond[0] - res.alpha) < 1e-12, "replayed acceptance at position 1 is alpha");
    /* ... and the replay of a gamma does not depend on --gamma-max (it dropped rows before). */
    sl_analyze_opts o1 = o;
    o1.gamma_max = 1;
    sl_analyze_result r1;
    cr_assert_eq(sl_analyze_file(path, &o1, &r1), SL_OK, "%s", sl_errmsg());
    cr_assert_eq(r1.en_replay[0], res.en_replay[0]);
    cr_assert_eq(r1.uncond[0], res.uncond[0]);
    sl_analyze_result_free(&r1);
    cr_assert(res.alpha_lo <= res.alpha && res.alpha <= res.alpha_hi);
    sl_log_pos_block_free(&b);
    free(p), free(q), free(beta);
    sl_log_close(r);
    sl_analyze_result_free(&res);
    sl_analyze_result_free(&res1);
    sl_analyze_result_free(&rb);
    sl_synth_free(mt);
    sl_synth_free(md);
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    cr_assert_eq(system(cmd), 0);
}

/* recommend (analysis/sl_recommend): the result's fields are analyze's numbers at the deployment c,
 * the latency rows are the candidates around the chosen gamma, and the report reads them back. */
Test(analyze, recommend_result_against_analyze)
{
    char dir[256], path[300], cmd[600];
    snprintf(dir, sizeof dir, "/tmp/sl_test_rec.%ld", (long)getpid());
    snprintf(path, sizeof path, "%s/m.h5", dir);
    snprintf(cmd, sizeof cmd, "rm -rf %s && mkdir -p %s", dir, dir);
    cr_assert_eq(system(cmd), 0);
    sl_synth_params sp = SL_SYNTH_DEFAULT;
    sp.V = 64;
    sp.noise = 0.5;
    sl_synth_lm *mt, *md;
    cr_assert_eq(sl_synth_alloc(&sp, 0, &mt), SL_OK);
    cr_assert_eq(sl_synth_alloc(&sp, 1, &md), SL_OK);
    sl_lm lt = sl_synth_lm_of(mt), ld = sl_synth_lm_of(md);
    int32_t pt[6][2];
    const int32_t *pp[6];
    size_t pl[6];
    for (size_t s = 0; s < 6; s++) pt[s][0] = (int32_t)s, pt[s][1] = (int32_t)(5 * s), pp[s] = pt[s], pl[s] = 2;
    sl_log_prompts pr = {6, pp, pl, NULL};
    sl_log_meta m;
    sl_log_meta_init(&m, SL_LOG_MEASURE);
    m.dist = SL_LOG_DIST_NONE;
    m.tokens_per_sequence = 60;
    cr_assert_eq(sl_log_measure(&lt, &ld, &pr, &m, NULL, path, NULL, NULL), SL_OK, "%s", sl_errmsg());

    sl_theory_vcost vc;
    cr_assert_eq(sl_theory_vcost_linear(&vc, 0.02), SL_OK);
    sl_recommend_config cfg;
    sl_recommend_config_init(&cfg);
    cfg.path = path;
    cfg.vc = &vc;
    sl_recommend_result res;
    /* A measure log has no measured costs: c must be given, and the message names it. */
    cr_assert_eq(sl_recommend_run(&cfg, &res), SL_EINPUT);
    cr_assert(!strncmp(sl_errmsg(), "c: ", 3), "%s", sl_errmsg());
    cfg.c = 0.05;
    cfg.n_sims = 3000;
    cr_assert_eq(sl_recommend_run(&cfg, &res), SL_OK, "%s", sl_errmsg());

    sl_analyze_opts o;
    sl_analyze_opts_init(&o);
    o.c = 0.05;
    o.vc = &vc;
    o.no_dists = 1;
    o.policy_reps = 0;
    sl_analyze_result a;
    cr_assert_eq(sl_analyze_file(path, &o, &a), SL_OK, "%s", sl_errmsg());
    cr_assert_eq(res.method, SL_RECOMMEND_REPLAY);
    cr_assert(fabs(res.alpha - a.alpha) < 0.05, "mean min(1, q/p) %g estimates mean beta %g", res.alpha, a.alpha);
    cr_assert_eq(res.c, 0.05);
    cr_assert_str_eq(res.c_source, "--c");
    cr_assert_str_eq(res.basis, "predicted");
    /* The chosen gamma maximises the sequential replay's tokens per iteration / (gamma c + v(gamma + 1)),
     * by brute force over analyze's numbers (the same replay, read once more). */
    int best = 0;
    double fbest = 1;
    for (int g = 1; g <= 12; g++) {
        double f = a.en_seq[g - 1] / (g * 0.05 + 1 + 0.02 * g);
        cr_assert(fabs(res.per[g - 1].predicted - f) <= 1e-12 * f, "gamma %d: %.17g vs %.17g", g, res.per[g - 1].predicted, f);
        if (f > fbest * (1 + 1e-12)) best = g, fbest = f;
    }
    cr_assert_eq(a.opt_seq[0], best);
    cr_assert(best > 0, "the pair should gain from drafting (alpha %g)", a.alpha);
    cr_assert_eq(res.gamma, best);
    cr_assert(fabs(res.speedup - fbest) < 1e-12 * fbest, "%.17g vs %.17g", res.speedup, fbest);
    /* The same bootstrap resamples (seed, SL_STREAM_BOOT, b) as analyze's CI of tokens per iteration. */
    double den = best * 0.05 + 1 + 0.02 * best;
    cr_assert(fabs(res.speedup_lo - a.en_seq_lo[best - 1] / den) < 1e-12);
    cr_assert(fabs(res.speedup_hi - a.en_seq_hi[best - 1] / den) < 1e-12);
    cr_assert(res.speedup_lo <= res.speedup && res.speedup <= res.speedup_hi);
    /* Candidates: ascending, distinct, gamma 0 first, the chosen one among them. */
    cr_assert(res.n_cand >= 2);
    cr_assert_eq(res.cand[0].gamma, 0);
    int found = 0;
    for (size_t i = 0; i < res.n_cand; i++) {
        if (i) cr_assert(res.cand[i].gamma > res.cand[i - 1].gamma);
        found |= res.cand[i].gamma == res.gamma;
        cr_assert(res.cand[i].p50 <= res.cand[i].p90 && res.cand[i].p90 <= res.cand[i].p99);
    }
    cr_assert(found);
    /* gamma 0 is plain decoding: exactly one target step per token (the answer defaults to the
     * log's 60 tokens per sequence); every mean is answer / expected speedup, so the latency table
     * agrees with the pick. */
    cr_assert_eq(res.cand[0].p50, 60);
    cr_assert_eq(res.cand[0].mean, 60);
    for (size_t i = 1; i < res.n_cand; i++) {
        const sl_recommend_gamma *x = &res.per[res.cand[i].gamma - 1];
        cr_assert(fabs(res.cand[i].mean - 60 / x->predicted) < 1e-9);
    }
    for (size_t i = 0; i < res.n_cand; i++) /* the pick has the smallest mean latency */
        cr_assert(res.cand[i].mean >= 60 / res.speedup - 1e-9);

    sl_table **ts;
    size_t n;
    cr_assert_eq(sl_recommend_report(&res, &ts, &n), SL_OK);
    cr_assert_eq(n, 4); /* recommendation, per_gamma, latency, notes */
    sl_table *t = sl_report_find(ts, n, "recommendation"), *l = sl_report_find(ts, n, "latency");
    cr_assert(t && l);
    double x;
    cr_assert_eq(sl_table_getd(t, 0, "expected_speedup", &x), SL_OK);
    cr_assert_eq(x, res.speedup);
    cr_assert_eq(sl_table_getd(t, 0, "gamma", &x), SL_OK);
    cr_assert_eq(x, res.gamma);
    cr_assert_str_eq(sl_table_gets(t, 0, "method"), sl_recommend_method_text(SL_RECOMMEND_REPLAY));
    cr_assert_eq(l->n_rows, res.n_cand);
    for (size_t i = 0; i < res.n_cand; i++) {
        cr_assert_eq(sl_table_getd(l, i, "p99_over_p50", &x), SL_OK);
        cr_assert_eq(x, res.cand[i].p99 / res.cand[i].p50);
        cr_assert_eq(sl_table_getd(l, i, "recommended", &x), SL_OK);
        cr_assert_eq(x, res.cand[i].gamma == res.gamma);
    }
    for (size_t i = 0; i < n; i++) sl_table_free(ts[i]);
    free(ts);
    sl_recommend_result_free(&res);
    sl_analyze_result_free(&a);
    sl_synth_free(mt);
    sl_synth_free(md);
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    cr_assert_eq(system(cmd), 0);
}

