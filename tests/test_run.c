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
 *  - option checks name the quantity.
 */
#include <criterion/criterion.h>
#include <gsl/gsl_rng.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
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
    sl_run_report_config rc = {500, 0.9, 11};
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
    sl_lm_open_opts od = {c.sampling, c.target->cfg.vocab_size, "draft", tp};
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
