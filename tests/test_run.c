/*
 * test_run.c: `speclab run` as library calls (analysis/sl_run.h).
 *  - the report of a synthetic run log written through the sl_log writer, against hand
 *    computation: alpha_hat, acceptance rate, tokens per iteration, beta at the tested positions,
 *    Theorem 3.8 and the generalised prediction, the in-run costs, the speedup, the time split;
 *    the bootstrap CIs against an independent resampling loop on the same stream;
 *  - the rendered tables carry the struct's numbers under the names speclab run prints;
 *  - the experiment end to end on tiny random models, the target drafting for itself: every draft
 *    accepted, gamma + 1 tokens per iteration, the calibration consistent (v(1) = 1, c = draft /
 *    target step) and the predictions equal (gamma + 1) / (gamma c + v(gamma + 1));
 *  - option checks name the quantity;
 *  - sweeps over gamma: a synthetic sweep log's per-gamma reports and cost line against hand
 *    computation and a closed-form least squares, readers refusing a broken layout,
 *    sl_run_log_gammas on malformed lists; a real sweep on tiny models at T = 0 gives, per prompt,
 *    the same iterations, accepted drafts and kept tokens as single-gamma runs, and a one-element
 *    list writes the same log as a plain gamma.
 */
#include <criterion/criterion.h>
#include <gsl/gsl_rng.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <omp.h>
#include <unistd.h>

#include "sl_common.h"
#include "sl_log.h"
#include "sl_run.h"

static char tmpdir[256];

static void mk_tmp(void)
{
    snprintf(tmpdir, sizeof tmpdir, "/tmp/sl_test_run.%ld", (long)getpid());
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf %s && mkdir -p %s", tmpdir, tmpdir);
    cr_assert_eq(system(cmd), 0);
}
static void rm_tmp(void)
{
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf %s", tmpdir);
    cr_assert_eq(system(cmd), 0);
}

/* ---- a synthetic run log: gamma 2, three prompts ----
 * accepted per iteration of each prompt's speculative decode; every iteration emits accepted + 1.
 *   prompt 0: 2 0 1    tested 2 + 1 + 2 = 5, accepted 3, emitted 6
 *   prompt 1: 1 2      tested 2 + 2     = 4, accepted 3, emitted 5
 *   prompt 2: 0 0 2 1  tested 1+1+2+2   = 6, accepted 3, emitted 7
 * Totals: 9 iterations, 18 drafted, 15 tested, 9 accepted, 18 emitted. Logged beta is 0.6 at the
 * tested positions and 0.1 at the untested ones. Each iteration: draft 2 ms, verify 3 ms, sample
 * 0.5 ms. Speculative wall 40, 30, 50 ms; the baseline decodes the same tokens at 10 ms a token.
 * Costs: c = 0.25, v(n) = 1, 1.2, 1.5, 1.9 for n = 1..4. */
enum { G = 2, NP = 3 };
static const int acc_of[NP][4] = {{2, 0, 1, -1}, {1, 2, -1, -1}, {0, 0, 2, 1}};
static const double spec_wall[NP] = {0.04, 0.03, 0.05};
static const size_t emitted_of[NP] = {6, 5, 7};
static const double tested_of[NP] = {5, 4, 6};

static void write_synthetic(const char *path)
{
    sl_log_meta m;
    sl_log_meta_init(&m, SL_LOG_RUN);
    m.vocab_size = 16;
    m.gamma = G;
    m.tokens_per_sequence = 5;
    m.shard_sequences = 2;
    snprintf(m.rule, sizeof m.rule, "exact");
    snprintf(m.target_name, sizeof m.target_name, "t");
    snprintf(m.draft_name, sizeof m.draft_name, "d");
    sl_log_writer *w;
    cr_assert_eq(sl_log_writer_open(&w, path, &m, NULL), SL_OK, "%s", sl_errmsg());
    for (size_t p = 0; p < NP; p++) {
        int32_t prompt[2] = {(int32_t)p, 1};
        cr_assert_eq(sl_log_shard_begin(w, p), SL_OK, "%s", sl_errmsg());
        /* sequence 2p: speculative */
        cr_assert_eq(sl_log_seq_begin(w, (int64_t)(2 * p), (int64_t)p, prompt, 2), SL_OK);
        for (size_t i = 0; i < 4 && acc_of[p][i] >= 0; i++) {
            int32_t drafts[G] = {3, 4}, tokens[G + 1] = {3, 4, 5};
            double beta[G];
            for (int k = 0; k < G; k++) beta[k] = k <= acc_of[p][i] ? 0.6 : 0.1; /* tested: up to the first rejection */
            sl_spec_iter_record r = {i, G, (size_t)acc_of[p][i], (size_t)acc_of[p][i] + 1, drafts, tokens, beta,
                                     0.002, 0.003, 0.0005};
            cr_assert_eq(sl_log_add_iteration(w, &r, NULL), SL_OK, "%s", sl_errmsg());
        }
        cr_assert_eq(sl_log_seq_set_generated(w, emitted_of[p]), SL_OK);
        cr_assert_eq(sl_log_seq_end(w, 0, spec_wall[p]), SL_OK);
        /* sequence 2p + 1: the autoregressive baseline, 10 ms a token */
        cr_assert_eq(sl_log_seq_begin(w, (int64_t)(2 * p + 1), (int64_t)p, prompt, 2), SL_OK);
        cr_assert_eq(sl_log_seq_set_generated(w, emitted_of[p]), SL_OK);
        cr_assert_eq(sl_log_seq_end(w, 1, 0.01 * (double)emitted_of[p]), SL_OK);
        cr_assert_eq(sl_log_shard_commit(w), SL_OK, "%s", sl_errmsg());
    }
    long n[4] = {1, 2, 3, 4};
    double v[4] = {1, 1.2, 1.5, 1.9}, cs[4] = {0.01, 0.012, 0.015, 0.019};
    cr_assert_eq(sl_log_set_costs(w, 0.25, 0.0025, 0.01, n, v, cs, 4), SL_OK, "%s", sl_errmsg());
    cr_assert_eq(sl_log_assemble(w, NP), SL_OK, "%s", sl_errmsg());
    sl_log_writer_close(w);
}

/* Tolerance 1e-12 throughout: the same few sums of exact or near-exact decimals, in another order. */
#define NEAR(a, b) (fabs((a) - (b)) < 1e-12)

Test(run, report_of_a_synthetic_log)
{
    mk_tmp();
    char path[512];
    snprintf(path, sizeof path, "%s/run.h5", tmpdir);
    write_synthetic(path);
    sl_run_report_config rc = {500, 0.9, 11, 0};
    sl_run_report r;
    cr_assert_eq(sl_run_report_file(path, &rc, &r), SL_OK, "%s", sl_errmsg());

    cr_assert_eq(r.gamma, 2);
    cr_assert_eq(r.prompts, 3);
    cr_assert_eq(r.iterations, 9);
    cr_assert_eq(r.accepted, 9);
    cr_assert_eq(r.drafted, 18);
    cr_assert_eq(r.tested, 15);
    cr_assert(NEAR(r.alpha_hat.value, 0.6), "alpha_hat %.17g", r.alpha_hat.value);
    cr_assert(NEAR(r.acceptance_rate.value, 0.5));
    cr_assert(NEAR(r.tokens_per_iteration.value, 2.0));
    cr_assert(NEAR(r.beta_tested.value, 0.6), "beta_tested %.17g", r.beta_tested.value);
    cr_assert(fabs(r.alpha_minus_beta_tested.value) < 1e-12);
    cr_assert_eq(r.acceptance_matches_beta, 1);
    /* Equation 1 at alpha = 0.6, gamma = 2: 1 + 0.6 + 0.36; Theorem 3.8 with c = 0.25: / (2 c + 1);
     * generalised with v(3) = 1.5: / (2 c + 1.5). */
    cr_assert(NEAR(r.expected_tokens.value, 1.96));
    cr_assert_eq(r.c, 0.25);
    cr_assert_eq(r.v_gamma_plus_1, 1.5);
    cr_assert(NEAR(r.predicted_thm38.value, 1.96 / 1.5));
    cr_assert(NEAR(r.predicted_general.value, 1.96 / 2.0));
    /* Speedup: 10 ms a token against 120 ms for 18 tokens. */
    cr_assert(NEAR(r.speedup.value, 0.01 / (0.12 / 18)), "speedup %.17g", r.speedup.value);
    cr_assert(NEAR(r.ar_time_per_token_s, 0.01));
    cr_assert(NEAR(r.spec_time_per_token_s, 0.12 / 18));
    /* In-run costs: 18 ms of drafting over 18 drafts, 27 ms of verification over 9 calls, in units
     * of the baseline's 10 ms a token: c = 0.1, v = 0.3, so E[N]/(2 c + v) = 1.96 / 0.5. */
    cr_assert(NEAR(r.c_in_run, 0.1));
    cr_assert(NEAR(r.v_in_run, 0.3));
    cr_assert(NEAR(r.predicted_in_run_costs, 1.96 / 0.5));
    cr_assert_eq(r.target_step_s, 0.01);
    cr_assert_eq(r.draft_step_s, 0.0025);
    /* Time split of the 120 ms speculative total. */
    cr_assert(NEAR(r.drafting.seconds, 0.018) && NEAR(r.drafting.fraction, 0.15));
    cr_assert(NEAR(r.verification.seconds, 0.027) && NEAR(r.verification.fraction, 0.225));
    cr_assert(NEAR(r.sampling.seconds, 0.0045) && NEAR(r.sampling.fraction, 0.0375));
    cr_assert(NEAR(r.other.seconds, 0.12 - 0.0495) && NEAR(r.other.fraction, 0.5875));
    cr_assert(NEAR(r.speculative_total.seconds, 0.12) && r.speculative_total.fraction == 1);
    cr_assert(NEAR(r.autoregressive_total.seconds, 0.18) && isnan(r.autoregressive_total.fraction));
    cr_assert(r.has_costs);
    cr_assert_eq(r.costs.v.n_entries, 4);
    cr_assert_eq(r.costs.call_s[3], 0.019);

    /* The CIs: an independent percentile bootstrap over prompts on the same stream (seed 11,
     * SL_STREAM_BOOT, item 0), type-7 quantiles at 0.05 and 0.95. */
    double a[500], s[500];
    gsl_rng *g = sl_rng_alloc(11, SL_STREAM_BOOT, 0);
    for (int j = 0; j < 500; j++) {
        double acc = 0, tested = 0, ar_w = 0, ar_t = 0, sw = 0, kept = 0;
        for (int i = 0; i < NP; i++) {
            size_t p = (size_t)gsl_rng_uniform_int(g, NP);
            acc += 3, tested += tested_of[p];
            ar_w += 0.01 * (double)emitted_of[p], ar_t += (double)emitted_of[p];
            sw += spec_wall[p], kept += (double)emitted_of[p];
        }
        a[j] = acc / tested;
        s[j] = (ar_w / ar_t) / (sw / kept);
    }
    gsl_rng_free(g);
    double *xs[2] = {a, s};
    const sl_run_estimate *es[2] = {&r.alpha_hat, &r.speedup};
    for (int k = 0; k < 2; k++) {
        double *x = xs[k];
        for (int i = 1; i < 500; i++) /* insertion sort */
            for (int j = i; j > 0 && x[j - 1] > x[j]; j--) {
                double t = x[j];
                x[j] = x[j - 1];
                x[j - 1] = t;
            }
        double h = 0.05 * 499, lo = x[(int)h] + (h - floor(h)) * (x[(int)h + 1] - x[(int)h]);
        h = 0.95 * 499;
        double hi = x[(int)h] + (h - floor(h)) * (x[(int)h + 1] - x[(int)h]);
        cr_assert(fabs(es[k]->lo - lo) < 1e-12 && fabs(es[k]->hi - hi) < 1e-12, "estimate %d: [%g, %g] vs [%g, %g]", k,
                  es[k]->lo, es[k]->hi, lo, hi);
    }
    cr_assert_eq(r.thm38_in_ci, r.predicted_thm38.value >= r.speedup.lo && r.predicted_thm38.value <= r.speedup.hi);
    cr_assert_eq(r.general_in_ci, r.predicted_general.value >= r.speedup.lo && r.predicted_general.value <= r.speedup.hi);

    /* The tables carry the same numbers under the printed names. */
    sl_table **t;
    size_t nt;
    cr_assert_eq(sl_run_report_tables(&r, &t, &nt), SL_OK, "%s", sl_errmsg());
    cr_assert_eq(nt, 3);
    sl_table *tr = sl_report_find(t, nt, "run"), *ts = sl_report_find(t, nt, "time_split"),
             *tc = sl_report_find(t, nt, "costs");
    cr_assert(tr && ts && tc);
    struct {
        const char *name;
        double v;
    } want[] = {{"alpha_hat", 0.6}, {"tokens_per_iteration", 2}, {"expected_tokens", 1.96},
                {"predicted_thm38", 1.96 / 1.5}, {"predicted_general", 0.98}, {"c", 0.25}, {"v_gamma_plus_1", 1.5}};
    for (size_t k = 0; k < sizeof want / sizeof want[0]; k++) {
        size_t row = 0;
        while (row < tr->n_rows && strcmp(sl_table_gets(tr, row, "metric"), want[k].name)) row++;
        cr_assert_lt(row, tr->n_rows, "metric %s missing", want[k].name);
        double v;
        cr_assert_eq(sl_table_getd(tr, row, "value", &v), SL_OK);
        cr_assert(NEAR(v, want[k].v), "%s: %g", want[k].name, v);
    }
    cr_assert_str_eq(sl_table_gets(tr, 3, "note"), "accepted 9 of 18 drafted (vLLM's acceptance rate)");
    cr_assert_str_eq(sl_table_gets(ts, 0, "component"), "drafting");
    double f;
    cr_assert_eq(sl_table_getd(ts, 0, "fraction", &f), SL_OK);
    cr_assert(NEAR(f, 0.15));
    cr_assert_eq(tc->n_rows, 4);
    cr_assert_eq(sl_table_getd(tc, 2, "v", &f), SL_OK);
    cr_assert_eq(f, 1.5);
    for (size_t i = 0; i < nt; i++) sl_table_free(t[i]);
    free(t);
    sl_run_report_free(&r);

    /* Without resamples there are no CIs, and the in-CI flags are undefined. */
    rc.boot = 0;
    cr_assert_eq(sl_run_report_file(path, &rc, &r), SL_OK, "%s", sl_errmsg());
    cr_assert(isnan(r.alpha_hat.lo) && isnan(r.speedup.hi) && isnan(r.thm38_in_ci) && isnan(r.general_in_ci));
    cr_assert(NEAR(r.alpha_hat.value, 0.6));
    sl_run_report_free(&r);
    rm_tmp();
}

Test(run, options_name_the_quantity)
{
    sl_run_config c;
    sl_run_config_init(&c);
    c.prompts = "p.txt";
    c.out = "run.h5";
    c.tokens = 10;
    c.gamma = 0;
    cr_assert_eq(sl_run_config_validate(&c), SL_EINPUT);
    cr_assert(!strncmp(sl_errmsg(), "gamma: ", 7), "%s", sl_errmsg());
    c.gamma = 20; /* default v_max: max(16, gamma + 1) = 21 */
    cr_assert_eq(sl_run_config_validate(&c), SL_OK, "%s", sl_errmsg());
    c.v_max = 20;
    cr_assert_eq(sl_run_config_validate(&c), SL_EINPUT);
    cr_assert(!strncmp(sl_errmsg(), "v_max: 20 is below gamma + 1 = 21", 33), "%s", sl_errmsg());
    c.v_max = 0;
    c.tokens = 0;
    cr_assert_eq(sl_run_config_validate(&c), SL_EINPUT);
    cr_assert(!strncmp(sl_errmsg(), "tokens: ", 8), "%s", sl_errmsg());
}

/* ---- the experiment on tiny random models ---- */

Test(run, self_drafting_experiment)
{
    mk_tmp();
    char tp[512], pp[512], out[512];
    snprintf(tp, sizeof tp, "%s/t.st", tmpdir);
    snprintf(pp, sizeof pp, "%s/p.txt", tmpdir);
    snprintf(out, sizeof out, "%s/run.h5", tmpdir);
    /* models/tokenizer.json has 4096 tokens: the model takes that vocabulary, and little else. */
    sl_model_config mc;
    const char *cfg = "{\"vocab_size\":4096,\"n_layer\":1,\"n_head\":4,\"d_model\":32,\"d_ff\":128,\"max_seq_len\":256}";
    cr_assert_eq(sl_model_config_parse(cfg, SL_ARCH_GPT2, "test", &mc), SL_OK, "%s", sl_errmsg());
    cr_assert_eq(sl_model_init_write(tp, SL_ARCH_GPT2, &mc, 3, SL_DT_F32, 0.2, NULL), SL_OK, "%s", sl_errmsg());
    FILE *f = fopen(pp, "w");
    fputs("The cat sat on the mat.\nOnce upon a time\ndef f(x): return x\n", f);
    fclose(f);

    sl_run_config c;
    sl_run_config_init(&c);
    cr_assert_eq(sl_model_open(tp, &c.target), SL_OK, "%s", sl_errmsg());
    sl_lm_open_opts od = {c.sampling, c.target->cfg.vocab_size, "draft", tp, NULL};
    cr_assert_eq(sl_lm_open(tp, &od, &c.draft), SL_OK, "%s", sl_errmsg());
    cr_assert_eq(sl_tok_load_file("models/tokenizer.json", &c.tok), SL_OK, "%s", sl_errmsg());
    c.target_path = c.draft_spec = tp;
    c.prompts = pp;
    c.out = out;
    c.tokens = 20;
    c.gamma = 3;
    c.cost_reps = 2;
    c.seed = 5;
    cr_assert_eq(sl_run_experiment(&c), SL_OK, "%s", sl_errmsg());
    cr_assert_eq(sl_log_validate(out), SL_OK, "%s", sl_errmsg());

    sl_run_report r;
    sl_run_report_config rc = SL_RUN_REPORT_CONFIG_DEFAULT;
    cr_assert_eq(sl_run_report_file(out, &rc, &r), SL_OK, "%s", sl_errmsg());
    cr_assert_eq(r.prompts, 3);
    cr_assert_eq(r.gamma, 3);
    /* p == q: every draft accepted, 4 tokens per iteration, 20 tokens in 5 iterations a prompt. */
    cr_assert_eq(r.alpha_hat.value, 1);
    cr_assert_eq(r.acceptance_rate.value, 1);
    cr_assert_eq(r.iterations, 15);
    cr_assert_eq(r.tokens_per_iteration.value, 4);
    cr_assert_eq(r.expected_tokens.value, 4);
    cr_assert(fabs(r.beta_tested.value - 1) < 1e-9, "beta_tested %.17g", r.beta_tested.value);
    cr_assert_eq(r.acceptance_matches_beta, 1);
    /* The calibration: v(1) = 1, v(n) = call_s / one-token step, c = draft / target step, 16 points. */
    cr_assert(r.has_costs);
    const sl_run_costs *k = &r.costs;
    cr_assert_eq(k->v.n_entries, 16);
    cr_assert_eq(k->v.n[0], 1);
    cr_assert_eq(k->v.v[0], 1);
    cr_assert_eq(k->target_step_s, k->call_s[0]);
    cr_assert(fabs(k->c - k->draft_step_s / k->target_step_s) <= 1e-12 * k->c);
    const double v4 = k->call_s[3] / k->target_step_s;
    cr_assert(fabs(k->v.v[3] - v4) <= 1e-12 * v4);
    /* The predictions at alpha = 1: (gamma + 1) / (gamma c + 1) and (gamma + 1) / (gamma c + v(4)). */
    const double t38 = 4 / (3 * k->c + 1), gen = 4 / (3 * k->c + v4);
    cr_assert(fabs(r.predicted_thm38.value - t38) <= 1e-12 * t38, "%.17g vs %.17g", r.predicted_thm38.value, t38);
    cr_assert(fabs(r.predicted_general.value - gen) <= 1e-12 * gen, "%.17g vs %.17g", r.predicted_general.value, gen);
    cr_assert_eq(r.v_gamma_plus_1, k->v.v[3]);
    cr_assert(r.speedup.value > 0 && isfinite(r.speedup.value));
    sl_run_report_free(&r);

    /* A rerun resumes: nothing left to decode, the same log. */
    cr_assert_eq(sl_run_experiment(&c), SL_OK, "%s", sl_errmsg());
    cr_assert_eq(sl_run_report_file(out, &rc, &r), SL_OK, "%s", sl_errmsg());
    cr_assert_eq(r.iterations, 15);
    sl_run_report_free(&r);
    sl_tok_free(c.tok);
    sl_lm_close(c.draft);
    sl_model_close(c.target);
    rm_tmp();
}

/* ---- sweeps ---- */

/* A synthetic sweep log: gammas {1, 2, 4}, three prompts, M = 4 sequences a prompt (s = 4p + j:
 * j < 3 speculative at SG[j], j = 3 the baseline). Iteration i of prompt p at gamma g accepts
 * (p + i + g) % (g + 1) drafts, drafts for g ms, verifies for 2 + 0.5 g ms, samples for 0.1 ms;
 * the sequence's wall is that plus 1 ms an iteration. Prompt p has 3 + p iterations at every gamma
 * and keeps the emitted tokens; its baseline decodes 10 tokens in 30 + 5 p ms.
 * bad = 1: one iteration row carries gamma 3 (not in the list); bad = 2: the last prompt has no
 * baseline (sequence count not a multiple of M). */
enum { SNG = 3, SM = 4, SNP = 3 };
static const int SG[SNG] = {1, 2, 4};

static int sw_iters(size_t p) { return 3 + (int)p; }
static int sw_acc(size_t p, int i, int g) { return ((int)p + i + g) % (g + 1); }
static double sw_draft_s(int g) { return 1e-3 * g; }
static double sw_verify_s(int g) { return 1e-3 * (2 + 0.5 * g); }
static double sw_ar_wall(size_t p) { return 1e-3 * (30 + 5 * (double)p); }

static void write_sweep(const char *path, int bad)
{
    sl_log_meta m;
    sl_log_meta_init(&m, SL_LOG_RUN);
    m.vocab_size = 16;
    m.gamma = 4;
    snprintf(m.gammas, sizeof m.gammas, "1,2,4");
    m.threads = 3;
    m.tokens_per_sequence = 10;
    m.shard_sequences = SM;
    snprintf(m.rule, sizeof m.rule, "exact");
    snprintf(m.target_name, sizeof m.target_name, "t");
    snprintf(m.draft_name, sizeof m.draft_name, "d");
    sl_log_writer *w;
    cr_assert_eq(sl_log_writer_open(&w, path, &m, NULL), SL_OK, "%s", sl_errmsg());
    for (size_t p = 0; p < SNP; p++) {
        int32_t prompt[2] = {(int32_t)p, 1};
        cr_assert_eq(sl_log_shard_begin(w, p), SL_OK, "%s", sl_errmsg());
        for (size_t j = 0; j < SNG; j++) {
            const int g = SG[j];
            cr_assert_eq(sl_log_seq_begin(w, (int64_t)(SM * p + j), (int64_t)p, prompt, 2), SL_OK);
            size_t emitted = 0;
            for (int i = 0; i < sw_iters(p); i++) {
                int32_t drafts[4] = {3, 4, 5, 6}, tokens[5] = {3, 4, 5, 6, 7};
                double beta[4] = {0.5, 0.5, 0.5, 0.5};
                const size_t a = (size_t)sw_acc(p, i, g);
                sl_spec_iter_record r = {(size_t)i, (size_t)g, a, a + 1, drafts, tokens, beta, sw_draft_s(g),
                                         sw_verify_s(g), 1e-4};
                if (bad == 1 && p == 1 && j == 1 && i == 0) {
                    r.gamma = 3;
                    r.n_accepted = 0;
                    r.n_emitted = 1;
                }
                cr_assert_eq(sl_log_add_iteration(w, &r, NULL), SL_OK, "%s", sl_errmsg());
                emitted += r.n_emitted;
            }
            cr_assert_eq(sl_log_seq_set_generated(w, emitted), SL_OK);
            const double wall = sw_iters(p) * (sw_draft_s(g) + sw_verify_s(g) + 1e-4 + 1e-3);
            cr_assert_eq(sl_log_seq_end(w, 0, wall), SL_OK);
        }
        if (!(bad == 2 && p == SNP - 1)) {
            cr_assert_eq(sl_log_seq_begin(w, (int64_t)(SM * p + SNG), (int64_t)p, prompt, 2), SL_OK);
            cr_assert_eq(sl_log_seq_set_generated(w, 10), SL_OK);
            cr_assert_eq(sl_log_seq_end(w, 1, sw_ar_wall(p)), SL_OK);
        }
        cr_assert_eq(sl_log_shard_commit(w), SL_OK, "%s", sl_errmsg());
    }
    long n[5] = {1, 2, 3, 4, 5};
    double v[5] = {1, 1.2, 1.5, 1.9, 2.4}, cs[5] = {0.003, 0.0036, 0.0045, 0.0057, 0.0072};
    cr_assert_eq(sl_log_set_costs(w, 0.25, 0.00075, 0.003, n, v, cs, 5), SL_OK, "%s", sl_errmsg());
    cr_assert_eq(sl_log_assemble(w, SNP), SL_OK, "%s", sl_errmsg());
    sl_log_writer_close(w);
}

/* Relative closeness for sums of a few dozen decimals (1e-12: rounding only). */
#define RNEAR(a, b) (fabs((a) - (b)) <= 1e-12 * fabs(b))

Test(run, sweep_of_a_synthetic_log)
{
    mk_tmp();
    char path[512];
    snprintf(path, sizeof path, "%s/sweep.h5", tmpdir);
    write_sweep(path, 0);
    sl_run_report_config rc = {300, 0.9, 7, 0};
    sl_run_report r;
    /* A sweep log needs a gamma named, and one of its own. */
    cr_assert_eq(sl_run_report_file(path, &rc, &r), SL_EINPUT);
    char want[700];
    snprintf(want, sizeof want, "gamma: %s is a sweep over 1,2,4; name one of them", path);
    cr_assert_str_eq(sl_errmsg(), want);
    rc.gamma = 3;
    cr_assert_eq(sl_run_report_file(path, &rc, &r), SL_EINPUT);
    cr_assert(!strncmp(sl_errmsg(), "gamma: 3 is not among the gammas of ", 36), "%s", sl_errmsg());

    sl_run_sweep sw;
    cr_assert_eq(sl_run_sweep_file(path, &rc, &sw), SL_OK, "%s", sl_errmsg());
    cr_assert_eq(sw.n, SNG);
    cr_assert_eq(sw.threads, 3);
    double y[SNG], ar_w = 0, ar_t = 10.0 * SNP;
    for (size_t p = 0; p < SNP; p++) ar_w += sw_ar_wall(p);
    for (size_t j = 0; j < SNG; j++) {
        const int g = SG[j];
        const sl_run_report *q = &sw.per_gamma[j];
        cr_assert_eq(q->gamma, g);
        cr_assert_eq(q->prompts, SNP);
        cr_assert_eq(q->threads, 3);
        /* By hand from the generator above. */
        double it = 0, acc = 0, tested = 0, kept = 0, wall = 0;
        for (size_t p = 0; p < SNP; p++) {
            double pit = 0, pacc = 0, ptested = 0, pkept = 0;
            for (int i = 0; i < sw_iters(p); i++) {
                const int a = sw_acc(p, i, g);
                pit += 1, pacc += a, ptested += a + (a < g), pkept += a + 1;
            }
            const double pwall = sw_iters(p) * (sw_draft_s(g) + sw_verify_s(g) + 1e-4 + 1e-3);
            /* prompt_sums: this gamma's decode and the prompt's own baseline, paired by prompt_id. */
            cr_assert_eq(q->n_prompt_sums, SNP);
            const sl_run_prompt_sums *ps = &q->prompt_sums[p];
            cr_assert(ps->iterations == pit && ps->kept == pkept && ps->accepted == pacc && ps->tested == ptested);
            cr_assert(RNEAR(ps->spec_wall, pwall) && RNEAR(ps->ar_wall, sw_ar_wall(p)) && ps->ar_tokens == 10);
            cr_assert(RNEAR(ps->draft_s, pit * sw_draft_s(g)) && RNEAR(ps->verify_s, pit * sw_verify_s(g)));
            it += pit, acc += pacc, tested += ptested, kept += pkept, wall += pwall;
        }
        cr_assert_eq(q->iterations, it);
        cr_assert_eq(q->accepted, acc);
        cr_assert(RNEAR(q->alpha_hat.value, acc / tested));
        cr_assert(RNEAR(q->kept_per_iteration.value, kept / it));
        y[j] = (wall / it) / (ar_w / ar_t);
        cr_assert(RNEAR(q->cost_per_iteration.value, y[j]), "gamma %d: %.17g vs %.17g", g, q->cost_per_iteration.value,
                  y[j]);
        /* The speedup splits into tokens kept per iteration over the iteration's cost. */
        cr_assert(RNEAR(q->speedup.value, q->kept_per_iteration.value / q->cost_per_iteration.value));
        cr_assert(RNEAR(q->overhead_in_run, (1e-4 + 1e-3) / (ar_w / ar_t)));
        cr_assert(q->cost_per_iteration.lo <= y[j] && y[j] <= q->cost_per_iteration.hi);
        cr_assert(RNEAR(q->ar_time_per_token_s, ar_w / ar_t)); /* every baseline decode, for every gamma */
        static const double v_next[5] = {NAN, 1.2, 1.5, 1.9, 2.4}; /* v(g + 1) as written below */
        cr_assert_eq(q->v_gamma_plus_1, v_next[g]);
    }
    /* The cost line by the normal equations (Cramer's rule), not the code's centred form. */
    double sx = 0, sy = 0, sxx = 0, sxy = 0;
    for (size_t j = 0; j < SNG; j++) sx += SG[j], sy += y[j], sxx += SG[j] * SG[j], sxy += SG[j] * y[j];
    const double b = (SNG * sxy - sx * sy) / (SNG * sxx - sx * sx), a = (sy - b * sx) / SNG;
    cr_assert(fabs(sw.fit_a - a) < 1e-12 && fabs(sw.fit_b - b) < 1e-12, "fit %.17g %.17g vs %.17g %.17g", sw.fit_a,
              sw.fit_b, a, b);
    double emax = 0;
    for (size_t j = 0; j < SNG; j++) emax = fmax(emax, fabs((a + b * SG[j]) / y[j] - 1));
    cr_assert(fabs(sw.fit_max_rel_error - emax) < 1e-12);
    size_t bj = 0;
    for (size_t j = 1; j < SNG; j++)
        if (sw.per_gamma[j].speedup.value > sw.per_gamma[bj].speedup.value) bj = j;
    cr_assert_eq(sw.best_gamma, SG[bj]);

    /* One gamma through sl_run_report_file equals the sweep's, CIs included (same seed). */
    rc.gamma = 2;
    cr_assert_eq(sl_run_report_file(path, &rc, &r), SL_OK, "%s", sl_errmsg());
    cr_assert(r.speedup.lo == sw.per_gamma[1].speedup.lo &&
              r.cost_per_iteration.hi == sw.per_gamma[1].cost_per_iteration.hi);
    sl_run_report_free(&r);

    sl_table **t;
    size_t nt;
    cr_assert_eq(sl_run_sweep_tables(&sw, &t, &nt), SL_OK, "%s", sl_errmsg());
    cr_assert_eq(nt, 3);
    sl_table *ts = sl_report_find(t, nt, "sweep"), *tf = sl_report_find(t, nt, "cost_fit");
    cr_assert(ts && tf && sl_report_find(t, nt, "costs"));
    cr_assert_eq(ts->n_rows, SNG);
    for (size_t j = 0; j < SNG; j++) {
        double v;
        cr_assert_eq(sl_table_getd(ts, j, "cost_per_iteration", &v), SL_OK);
        cr_assert_eq(v, sw.per_gamma[j].cost_per_iteration.value);
        cr_assert_eq(sl_table_getd(ts, j, "tokens_per_iteration", &v), SL_OK);
        cr_assert_eq(v, sw.per_gamma[j].kept_per_iteration.value);
        cr_assert_eq(sl_table_getd(ts, j, "best", &v), SL_OK);
        cr_assert_eq(v, SG[j] == sw.best_gamma);
    }
    double fb;
    cr_assert_eq(sl_table_getd(tf, 0, "fit_b", &fb), SL_OK);
    cr_assert_eq(fb, sw.fit_b);
    for (size_t i = 0; i < nt; i++) sl_table_free(t[i]);
    free(t);
    sl_run_sweep_free(&sw);

    /* Readers refuse a broken sweep layout, in one line. */
    write_sweep(path, 1);
    cr_assert_eq(sl_run_sweep_file(path, &rc, &sw), SL_EINPUT);
    cr_assert(strstr(sl_errmsg(), "has gamma 3; the sweep over 1,2,4 puts 2 there"), "%s", sl_errmsg());
    char cmd[1200];
    snprintf(cmd, sizeof cmd, "rm -rf %s %s.d", path, path);
    cr_assert_eq(system(cmd), 0);
    write_sweep(path, 2);
    rc.gamma = 1;
    cr_assert_eq(sl_run_report_file(path, &rc, &r), SL_EINPUT);
    cr_assert(strstr(sl_errmsg(), "11 sequences is not a multiple of 4"), "%s", sl_errmsg());
    rm_tmp();
}

Test(run, sweep_of_a_single_gamma_log)
{
    mk_tmp();
    char path[512];
    snprintf(path, sizeof path, "%s/run.h5", tmpdir);
    write_synthetic(path);
    sl_run_report_config rc = {200, 0.9, 11, 0};
    sl_run_sweep sw;
    cr_assert_eq(sl_run_sweep_file(path, &rc, &sw), SL_OK, "%s", sl_errmsg());
    cr_assert_eq(sw.n, 1);
    cr_assert_eq(sw.per_gamma[0].gamma, G);
    cr_assert_eq(sw.best_gamma, G);
    cr_assert(isnan(sw.fit_a) && isnan(sw.fit_b) && isnan(sw.fit_max_rel_error));
    cr_assert_eq(sw.threads, 0);
    /* The new estimates of the synthetic log: 18 kept in 9 iterations; 120 ms over 9 iterations
     * at 10 ms a baseline token; other = 120 - 18 - 27 ms. */
    const sl_run_report *q = &sw.per_gamma[0];
    cr_assert(NEAR(q->kept_per_iteration.value, 2));
    cr_assert(NEAR(q->cost_per_iteration.value, 0.12 / 9 / 0.01));
    cr_assert(NEAR(q->overhead_in_run, (0.12 - 0.018 - 0.027) / 9 / 0.01));
    cr_assert_eq(q->n_prompt_sums, NP);
    cr_assert(q->prompt_sums[1].kept == 5 && q->prompt_sums[1].ar_tokens == 5 && q->prompt_sums[1].iterations == 2);
    sl_run_sweep_free(&sw);
    rc.gamma = 2;
    sl_run_report r;
    cr_assert_eq(sl_run_report_file(path, &rc, &r), SL_OK, "%s", sl_errmsg());
    sl_run_report_free(&r);
    rc.gamma = 3;
    cr_assert_eq(sl_run_report_file(path, &rc, &r), SL_EINPUT);
    cr_assert(!strncmp(sl_errmsg(), "gamma: 3 is not the gamma of ", 29), "%s", sl_errmsg());
    rm_tmp();
}

Test(run, log_gammas_parses_and_refuses)
{
    sl_log_meta m;
    sl_log_meta_init(&m, SL_LOG_RUN);
    int g[SL_RUN_MAX_GAMMAS];
    m.gamma = 4;
    cr_assert_eq(sl_run_log_gammas(&m, g), 1);
    cr_assert_eq(g[0], 4);
    snprintf(m.gammas, sizeof m.gammas, "1,2,4");
    cr_assert_eq(sl_run_log_gammas(&m, g), 3);
    cr_assert(g[0] == 1 && g[1] == 2 && g[2] == 4);
    static const char *bad[] = {"2,1,4", "1,,4", "1,2,4,", ",4", "a", "1,2,x4", "0,4", "-1,4", " 1,4", "1, 4",
                                "1,4.5", "1,2", "1,2,3,4,5", "4,4", "1,65", "99999999999999999999,4"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        snprintf(m.gammas, sizeof m.gammas, "%s", bad[i]);
        m.gamma = strcmp(bad[i], "1,65") ? 4 : 65;
        cr_assert_eq(sl_run_log_gammas(&m, g), 0, "'%s' accepted", bad[i]);
        cr_assert(!strncmp(sl_errmsg(), "gammas: ", 8) && !strchr(sl_errmsg(), '\n'), "%s", sl_errmsg());
    }
    /* 17 gammas: one more than a sweep takes. */
    snprintf(m.gammas, sizeof m.gammas, "1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17");
    m.gamma = 17;
    cr_assert_eq(sl_run_log_gammas(&m, g), 0);
    cr_assert(strstr(sl_errmsg(), "more than 16"), "%s", sl_errmsg());
    m.gammas[0] = 0;
    m.gamma = 0;
    cr_assert_eq(sl_run_log_gammas(&m, g), 0);
    cr_assert(!strncmp(sl_errmsg(), "gamma: ", 7), "%s", sl_errmsg());
}

Test(run, sweep_options_name_the_quantity)
{
    sl_run_config c;
    sl_run_config_init(&c);
    c.prompts = "p.txt";
    c.out = "run.h5";
    c.tokens = 10;
    c.gamma = 0; /* ignored by a sweep */
    int g[17];
    for (int i = 0; i < 17; i++) g[i] = i + 1;
    c.gammas = g;
    c.n_gammas = 3;
    cr_assert_eq(sl_run_config_validate(&c), SL_OK, "%s", sl_errmsg());
    c.n_gammas = 17;
    cr_assert_eq(sl_run_config_validate(&c), SL_EINPUT);
    cr_assert(!strncmp(sl_errmsg(), "gammas: 17 gammas", 17), "%s", sl_errmsg());
    int desc[2] = {3, 2}, dup[2] = {2, 2}, out[2] = {1, 65};
    const int *lists[3] = {desc, dup, out};
    for (int k = 0; k < 3; k++) {
        c.gammas = lists[k];
        c.n_gammas = 2;
        cr_assert_eq(sl_run_config_validate(&c), SL_EINPUT);
        cr_assert(!strncmp(sl_errmsg(), "gammas: ", 8), "%s", sl_errmsg());
    }
    /* v_max must reach the largest gamma + 1. */
    int big[2] = {2, 20};
    c.gammas = big;
    c.v_max = 20;
    cr_assert_eq(sl_run_config_validate(&c), SL_EINPUT);
    cr_assert(!strncmp(sl_errmsg(), "v_max: 20 is below gamma + 1 = 21", 33), "%s", sl_errmsg());
}

/* Untimed columns of a run log, read back for comparison. */
typedef struct {
    sl_log_meta meta;
    size_t ns, ni, nd;
    sl_log_seq *seq;
    sl_log_iter_block it;
    sl_log_draft_block dr;
} log_dump;

static void dump_log(const char *path, log_dump *d)
{
    sl_log_reader *r;
    cr_assert_eq(sl_log_open(&r, path), SL_OK, "%s", sl_errmsg());
    d->meta = *sl_log_meta_of(r);
    d->ns = sl_log_n_sequences(r), d->ni = sl_log_n_rows(r), d->nd = sl_log_n_drafts(r);
    cr_assert_eq(sl_log_sequences(r, &d->seq), SL_OK);
    cr_assert_eq(sl_log_iter_block_alloc(&d->it, d->ni + 1), SL_OK);
    cr_assert_eq(sl_log_read_iterations(r, 0, &d->it), SL_OK);
    cr_assert_eq(sl_log_draft_block_alloc(&d->dr, d->nd + 1), SL_OK);
    cr_assert_eq(sl_log_read_drafts(r, 0, &d->dr), SL_OK);
    cr_assert(d->it.n == d->ni && d->dr.n == d->nd);
    sl_log_close(r);
}
static void dump_free(log_dump *d)
{
    free(d->seq);
    sl_log_iter_block_free(&d->it);
    sl_log_draft_block_free(&d->dr);
}

Test(run, sweep_experiment_matches_single_runs)
{
    mk_tmp();
    char tp[512], pp[512], out[4][512];
    snprintf(tp, sizeof tp, "%s/t.st", tmpdir);
    snprintf(pp, sizeof pp, "%s/p.txt", tmpdir);
    for (int k = 0; k < 4; k++) snprintf(out[k], sizeof out[k], "%s/run%d.h5", tmpdir, k);
    /* A random target drafted for by prompt lookup: greedy, the target falls into loops the lookup
     * draft partly predicts (alpha about 0.2 with init std 1), so drafts are accepted and rejected
     * and the counts depend on gamma. */
    sl_model_config mc;
    const char *cfg = "{\"vocab_size\":4096,\"n_layer\":1,\"n_head\":4,\"d_model\":32,\"d_ff\":128,\"max_seq_len\":256}";
    cr_assert_eq(sl_model_config_parse(cfg, SL_ARCH_GPT2, "test", &mc), SL_OK, "%s", sl_errmsg());
    cr_assert_eq(sl_model_init_write(tp, SL_ARCH_GPT2, &mc, 3, SL_DT_F32, 1.0, NULL), SL_OK, "%s", sl_errmsg());
    FILE *f = fopen(pp, "w");
    fputs("The cat sat on the mat.\nOnce upon a time\ndef f(x): return x\n", f);
    fclose(f);

    sl_run_config c;
    sl_run_config_init(&c);
    c.sampling.temperature = 0; /* greedy: the tokens do not depend on the random stream */
    cr_assert_eq(sl_model_open(tp, &c.target), SL_OK, "%s", sl_errmsg());
    sl_lm_open_opts od = {c.sampling, c.target->cfg.vocab_size, "draft", tp, NULL};
    cr_assert_eq(sl_lm_open("lookup:1", &od, &c.draft), SL_OK, "%s", sl_errmsg());
    cr_assert_eq(sl_tok_load_file("models/tokenizer.json", &c.tok), SL_OK, "%s", sl_errmsg());
    c.target_path = tp;
    c.draft_spec = "lookup:1";
    c.prompts = pp;
    c.tokens = 40;
    c.cost_reps = 2;
    c.seed = 5;
    c.shard_prompts = 2;
    /* out[0]: the sweep {1, 2, 3}; out[k], k = 1..3: gamma k alone (k = 2 as a one-element list). */
    const int sweep[3] = {1, 2, 3}, two[1] = {2};
    c.out = out[0];
    c.gammas = sweep;
    c.n_gammas = 3;
    cr_assert_eq(sl_run_experiment(&c), SL_OK, "%s", sl_errmsg());
    for (int k = 1; k <= 3; k++) {
        c.out = out[k];
        c.gamma = k;
        c.gammas = k == 2 ? two : NULL;
        c.n_gammas = k == 2 ? 1 : 0;
        cr_assert_eq(sl_run_experiment(&c), SL_OK, "%s", sl_errmsg());
    }

    /* The layout: s = 4p + j, prompt_id p, mode 1 at j = 3, rows at gamma j + 1. */
    log_dump d;
    dump_log(out[0], &d);
    cr_assert_str_eq(d.meta.gammas, "1,2,3");
    cr_assert_eq(d.meta.gamma, 3);
    cr_assert_eq(d.meta.shard_sequences, 8);
    cr_assert_eq(d.meta.threads, omp_get_max_threads());
    cr_assert_eq(d.ns, 12);
    for (size_t i = 0; i < d.ns; i++) {
        const sl_log_seq *q = &d.seq[i];
        cr_assert(q->sequence == (int64_t)i && q->prompt_id == (int64_t)i / 4 && q->mode == (i % 4 == 3));
        cr_assert_eq(q->n_generated, 40);
    }
    for (size_t i = 0; i < d.ni; i++) cr_assert_eq(d.it.gamma[i], d.it.sequence[i] % 4 + 1);
    dump_free(&d);

    /* Per gamma, prompt by prompt: the sweep's counts equal the single run's. */
    sl_run_report_config rc = {100, 0.95, 1, 0};
    sl_run_sweep sw;
    cr_assert_eq(sl_run_sweep_file(out[0], &rc, &sw), SL_OK, "%s", sl_errmsg());
    cr_assert_eq(sw.n, 3);
    for (int k = 1; k <= 3; k++) {
        sl_run_report r;
        cr_assert_eq(sl_run_report_file(out[k], &rc, &r), SL_OK, "%s", sl_errmsg());
        const sl_run_report *q = &sw.per_gamma[k - 1];
        cr_assert_eq(q->gamma, k);
        cr_assert_eq(q->n_prompt_sums, 3);
        cr_assert_eq(r.n_prompt_sums, 3);
        for (size_t p = 0; p < 3; p++) {
            const sl_run_prompt_sums *a = &q->prompt_sums[p], *b = &r.prompt_sums[p];
            cr_assert(a->iterations == b->iterations && a->accepted == b->accepted && a->kept == b->kept &&
                          a->tested == b->tested && a->ar_tokens == b->ar_tokens,
                      "gamma %d prompt %zu: %g %g %g vs %g %g %g", k, p, a->iterations, a->accepted, a->kept,
                      b->iterations, b->accepted, b->kept);
        }
        cr_assert_eq(q->alpha_hat.value, r.alpha_hat.value);
        sl_run_report_free(&r);
    }
    for (int k = 0; k < 3; k++) /* neither all nor no drafts accepted: the comparison has teeth */
        cr_assert(sw.per_gamma[k].accepted > 0 && sw.per_gamma[k].accepted < sw.per_gamma[k].tested,
                  "gamma %d: %g of %g", k + 1, sw.per_gamma[k].accepted, sw.per_gamma[k].tested);
    cr_assert(sw.per_gamma[0].iterations != sw.per_gamma[2].iterations);
    cr_assert(isfinite(sw.fit_a) && isfinite(sw.fit_b));
    sl_run_sweep_free(&sw);

    /* A one-element list writes the plain single-gamma log: same attributes and untimed values as
     * gamma 2 given alone (out[2] against a fresh plain run). */
    char plain2[512];
    snprintf(plain2, sizeof plain2, "%s/plain2.h5", tmpdir);
    c.out = plain2;
    c.gamma = 2;
    c.gammas = NULL;
    c.n_gammas = 0;
    cr_assert_eq(sl_run_experiment(&c), SL_OK, "%s", sl_errmsg());
    log_dump a, b;
    dump_log(out[2], &a);
    dump_log(plain2, &b);
    cr_assert_str_eq(a.meta.gammas, "");
    cr_assert(a.meta.gamma == 2 && b.meta.gamma == 2 && a.meta.shard_sequences == 4 && b.meta.shard_sequences == 4);
    cr_assert(a.ns == b.ns && a.ni == b.ni && a.nd == b.nd);
    for (size_t i = 0; i < a.ns; i++) {
        const sl_log_seq *x = &a.seq[i], *y = &b.seq[i];
        cr_assert(x->sequence == y->sequence && x->prompt_id == y->prompt_id && x->mode == y->mode &&
                  x->n_generated == y->n_generated && x->n_rows == y->n_rows && x->n_drafts == y->n_drafts);
    }
    for (size_t i = 0; i < a.ni; i++)
        cr_assert(a.it.sequence[i] == b.it.sequence[i] && a.it.gamma[i] == b.it.gamma[i] &&
                  a.it.accepted[i] == b.it.accepted[i] && a.it.emitted[i] == b.it.emitted[i]);
    for (size_t i = 0; i < a.nd; i++)
        cr_assert(a.dr.token[i] == b.dr.token[i] && a.dr.accepted[i] == b.dr.accepted[i] &&
                  (a.dr.beta[i] == b.dr.beta[i] || (isnan(a.dr.beta[i]) && isnan(b.dr.beta[i]))));
    dump_free(&a);
    dump_free(&b);

    /* Resuming the sweep with another list is refused; the log stays as it was. */
    const int other[2] = {1, 3};
    c.out = out[0];
    c.gammas = other;
    c.n_gammas = 2;
    cr_assert_eq(sl_run_experiment(&c), SL_EINPUT);
    cr_assert_eq(sl_log_validate(out[0]), SL_OK, "%s", sl_errmsg());

    sl_tok_free(c.tok);
    sl_lm_close(c.draft);
    sl_model_close(c.target);
    rm_tmp();
}
