/*
 * sl_run.h: `speclab run` as library calls.
 *
 * sl_run_experiment decodes every prompt with real models, speculatively (sl_spec_decode: gamma
 * drafts, one verification call scoring gamma + 1 tokens, exact rejection) at one gamma or at each
 * gamma of a sweep, and with the plain autoregressive baseline, all timed after an untimed prefill;
 * it measures c and v(n) on this machine in the same run (sl_run_measure_costs) and writes
 * everything to a run log (analysis/LOG_SCHEMA.md), crash-safe and resumable shard by shard. A
 * sweep decodes each prompt at every gamma and then autoregressively, back to back, so that drift
 * of the machine hits every gamma alike.
 *
 * sl_run_report_file computes the report of one gamma from the assembled log alone: acceptance (alpha_hat =
 * accepted / tested) with percentile bootstrap CIs over prompts, the measured walltime speedup next
 * to Theorem 3.8 and its generalised form E[N]/(gamma c + v(gamma + 1)) (sim/sl_theory.h), the costs
 * as the decode paid them, and the time split. sl_run_report_tables renders that result as the
 * tables `speclab run` prints (run, time_split, costs). sl_run_sweep_file reports every gamma of
 * a sweep log, finds the best one and fits the cost of an iteration as a line in gamma.
 *
 * Nothing here prints. Errors name the quantity ("gamma: ...", "v_max: ..."), never a flag.
 */
#ifndef SL_RUN_H
#define SL_RUN_H

#include <stddef.h>
#include <stdint.h>

#include "sl_common.h"
#include "sl_dist.h"
#include "sl_log.h"
#include "sl_lm_open.h"
#include "sl_model.h"
#include "sl_spec.h"
#include "sl_table.h"
#include "sl_theory.h"
#include "sl_tok.h"

/* ---- calibration: c and v(n) timed the way a decode meets them ---- */

typedef struct {
    double c;             /* draft_step_s / target_step_s */
    double draft_step_s;  /* one draft step, seconds (median) */
    double target_step_s; /* one single-token target step, seconds (median): the unit, v(1) = 1 */
    double *call_s;       /* (v.n_entries) one target call on v.n[i] tokens, seconds (median); owned */
    sl_theory_vcost v;    /* table n -> v(n) = call_s / target_step_s (n = 1..v_max); owned */
} sl_run_costs;

void sl_run_costs_free(sl_run_costs *c); /* safe on a zeroed struct */

/* Measures c and v(n), n = 1..v_max, with both models holding a context of ctx_len tokens:
 * ctx (ctx_len + v_max) holds the context followed by the tokens fed to the timed calls; dists
 * (v_max, vocab) is a workspace. reps timed repetitions per point after 3 warm-ups; medians.
 * The protocol (sl_run.c) times each call right after what precedes it in a decode. */
int sl_run_measure_costs(sl_lm *target, sl_lm *draft, const int32_t *ctx, size_t ctx_len, size_t v_max, int gamma,
                         long reps, double *dists, sl_run_costs *out);

/* ---- the experiment ---- */

#define SL_RUN_MAX_GAMMAS 16 /* gammas of one sweep */

typedef struct {
    /* Models and tokenizer, opened by the caller and borrowed. The draft must be opened with the
     * target's vocabulary and the same sampling as below (sl_lm_open_opts); the experiment starts
     * it (sl_lm_start) for the lengths it needs, or uses it as it is when already started for at
     * least that many tokens (a second run on the same handles). */
    sl_model *target;
    const char *target_path; /* the target's file: named in the log and hashed into it */
    sl_lm_handle *draft;
    const char *draft_spec;  /* as given: named in the log (and its identity when it has no file) */
    sl_tok *tok;             /* tokenizes the prompts; may be NULL with prompt_ids */

    const char *prompts;     /* prompt file (data/prompts/NAME.txt) */
    const char *prompt_ids;  /* or prompts as token ids (data/sl_prompts.h): exactly one of the two */
    size_t max_prompts;      /* the first K prompts only; 0 = all */
    size_t tokens;           /* N: tokens generated per prompt, both modes, >= 1 */
    int gamma;               /* drafts per iteration, 1..SL_SPEC_GAMMA_MAX; ignored when n_gammas >= 1 */
    /* A sweep: (n_gammas) strictly ascending, each in 1..SL_SPEC_GAMMA_MAX, at most
     * SL_RUN_MAX_GAMMAS; borrowed. NULL/0 = the single gamma above. With n_g gammas each prompt p
     * is M = n_g + 1 sequences s = p M + j, all with prompt_id p: j < n_g speculative at gammas[j]
     * (mode 0), j = n_g the autoregressive baseline (mode 1), decoded in the order of s, so the M
     * decodes of a prompt run back to back (interleaved). n_g = 1 is the single-gamma layout. */
    const int *gammas;
    size_t n_gammas;
    sl_sampling sampling;    /* standardisation of both models' distributions */
    sl_spec_config rule;     /* acceptance rule and lenience */
    long eos;                /* stop a sequence at this token; -1 = none */
    uint64_t seed;           /* sequence s draws from (seed, stream, s) */
    long cost_reps;          /* timed repetitions per cost point after 3 warm-ups (default 15) */
    size_t cost_context;     /* context of the cost measurement; 0 = median prompt + N/2 */
    size_t v_max;            /* largest n of v(n); 0 = max(16, largest gamma + 1) */
    size_t shard_prompts;    /* prompts per log shard (default 4) */
    const char *tokens_out;  /* NULL, or a file for the token ids of the sequences decoded now */
    int force;               /* replace an existing tokens_out (otherwise refused) */
    const char *out;         /* the run log */

    /* Called after each decoded sequence with (sequences done, M x prompts): every prompt is
     * decoded at each gamma and autoregressively. NULL = silent. */
    sl_progress_fn progress;
    void *progress_ctx;
} sl_run_config;

/* Defaults: all prompts, eos -1, seed 1, cost_reps 15, shard_prompts 4, exact rule, default
 * sampling; tokens, gamma, the models, prompts and out must be set. */
void sl_run_config_init(sl_run_config *c);

/* Checks the options alone (not the models): SL_EINPUT naming the quantity. */
int sl_run_config_validate(const sl_run_config *c);

/* Decodes, calibrates and writes the log cfg->out (an existing run log is resumed: finished shards
 * are kept, and so are the costs measured with the first shards). An existing out that is not a
 * run log is refused, and so is one written with other settings (another gamma list included).
 * The calibration runs once, at the largest gamma. The log records the gammas (attribute gammas
 * "1,2,4" for a sweep; gamma = the largest) and the decode's OpenMP thread count (threads).
 * Prints nothing; the report is sl_run_report_file(cfg->out, ...) or sl_run_sweep_file. */
int sl_run_experiment(const sl_run_config *cfg);

/* The gammas of a run log, ascending, into out (SL_RUN_MAX_GAMMAS): its gammas list, or {gamma}.
 * Returns the count; 0 with an SL_EINPUT message (sl_fail) when the list is malformed (not
 * strictly ascending integers in 1..SL_SPEC_GAMMA_MAX, more than SL_RUN_MAX_GAMMAS, or a largest
 * one other than the gamma attribute). */
size_t sl_run_log_gammas(const sl_log_meta *m, int *out);

/* ---- the report, from the log alone ---- */

typedef struct {
    long boot;      /* bootstrap resamples over prompts (default 2000); 0 = no CIs */
    double ci;      /* CI level (default 0.95) */
    uint64_t seed;  /* the bootstrap draws from (seed, SL_STREAM_BOOT, 0) */
    int gamma;      /* the gamma reported: 0 = the log's one gamma (a sweep log needs one of its list) */
} sl_run_report_config;

#define SL_RUN_REPORT_CONFIG_DEFAULT ((sl_run_report_config){2000, 0.95, 1, 0})

/* A point estimate with its percentile bootstrap CI over prompts (lo, hi NaN without one). */
typedef struct {
    double value, lo, hi;
} sl_run_estimate;

/* One component of the time split: seconds and the fraction of the speculative total (NaN for
 * the autoregressive total, and when the speculative total is 0). */
typedef struct {
    double seconds, fraction;
} sl_run_time_part;

/* One prompt's sums: its speculative decode at the reported gamma and all its baseline decodes. */
typedef struct {
    double iterations, kept, spec_wall, draft_s, verify_s; /* speculative: iterations, tokens kept, seconds */
    double ar_tokens, ar_wall;                             /* baseline: tokens, seconds */
    double accepted, tested;                               /* drafts */
} sl_run_prompt_sums;

typedef struct {
    int gamma;
    size_t prompts;                   /* each decoded speculatively and autoregressively */
    double iterations;                /* speculative iterations (Algorithm 1) */
    double accepted, drafted, tested; /* drafts; tested = up to and including the first rejection */
    sl_run_estimate acceptance_rate;  /* accepted / drafted (vLLM's acceptance rate) */
    sl_run_estimate alpha_hat;        /* accepted / tested: estimates alpha */
    sl_run_estimate beta_tested;      /* mean logged beta at the tested positions */
    sl_run_estimate alpha_minus_beta_tested; /* paired over the same resamples */
    int acceptance_matches_beta;      /* 1 when 0 lies in that difference's CI (+-1e-6) */
    sl_run_estimate tokens_per_iteration;    /* emitted / iterations */
    sl_run_estimate expected_tokens;  /* E[N] at alpha_hat (Equation 1) */
    double iid_g, iid_df, iid_p;      /* is alpha the same at every draft position, as E[N] at alpha_hat
                                       * assumes? The G-test of homogeneity of the 2 x gamma table of
                                       * accepted and rejected drafts by position (sl_stats_homogeneity:
                                       * small cells pooled), its df and chi-square p-value; NaN at gamma 1.
                                       * Small p: acceptance depends on the position, or differs between
                                       * prompts (which also makes later positions look likelier) */
    double c;                         /* measured draft step / target step; NaN without costs */
    double v_gamma_plus_1;            /* measured v(gamma + 1); NaN without costs */
    sl_run_estimate speedup;          /* autoregressive / speculative time per token */
    sl_run_estimate predicted_thm38;  /* Theorem 3.8 at alpha_hat and c */
    sl_run_estimate predicted_general;/* E[N]/(gamma c + v(gamma + 1)) at alpha_hat */
    double thm38_in_ci, general_in_ci;/* 1 or 0: the prediction inside the speedup's CI; NaN without a CI */
    double c_in_run;                  /* draft seconds per draft step / baseline seconds per token */
    double v_in_run;                  /* verification seconds per call / baseline seconds per token */
    double predicted_in_run_costs;    /* E[N]/(gamma c_in_run + v_in_run) */
    double ar_time_per_token_s, spec_time_per_token_s;
    double target_step_s, draft_step_s; /* the calibration's; NaN without costs */
    sl_run_time_part drafting, verification, sampling, other, speculative_total, autoregressive_total;
    int has_costs;                    /* the log holds a calibration: costs is valid */
    sl_run_costs costs;
    sl_run_estimate kept_per_iteration; /* tokens kept / iterations (the speedup's numerator:
                                         * measured speedup = kept_per_iteration / cost_per_iteration) */
    sl_run_estimate cost_per_iteration; /* (speculative wall seconds / iterations) / (baseline seconds
                                         * per token): one iteration's whole cost in baseline-token units */
    double overhead_in_run;           /* (speculative wall - drafting - verification) seconds per
                                       * iteration / baseline seconds per token */
    size_t n_prompt_sums;
    sl_run_prompt_sums *prompt_sums;  /* (n_prompt_sums) per prompt, in prompt_id order; owned */
    int threads;                      /* the log's threads attribute (0 = not recorded) */
} sl_run_report;

/* Reads the run log at log_path (validated on opening) and computes every metric for cfg->gamma:
 * that gamma's speculative sequences against all the baseline sequences of the same prompts
 * (paired by prompt_id). On failure res holds nothing to free. */
int sl_run_report_file(const char *log_path, const sl_run_report_config *cfg, sl_run_report *res);
void sl_run_report_free(sl_run_report *res);

/* The tables `speclab run` prints: "run" (metric, value, ci_lo, ci_hi, note), "time_split"
 * (component, seconds, fraction) and "costs" (n, call_s, v). *tables is malloc'd with *n tables;
 * free each with sl_table_free and the array with free. */
int sl_run_report_tables(const sl_run_report *res, sl_table ***tables, size_t *n);

/* ---- a sweep over gamma ---- */

typedef struct {
    size_t n;                 /* gammas */
    sl_run_report *per_gamma; /* (n) ascending gamma: sl_run_report_file with cfg->gamma = that gamma; owned */
    int best_gamma;           /* largest measured speedup (point estimate); 0 when none is defined */
    double fit_a, fit_b;      /* cost_per_iteration(gamma) ~ fit_a + fit_b gamma, least squares over the
                               * sweep's point estimates; NaN when n < 2 or a point is undefined */
    double fit_max_rel_error; /* max over the sweep of |fit / measured - 1|; NaN when n < 2 */
    int threads;              /* the log's threads attribute (0 = not recorded) */
} sl_run_sweep;

/* Reports every gamma of the log (cfg->gamma ignored; every bootstrap on cfg's seed). A
 * single-gamma log gives n = 1. On failure out holds nothing to free. */
int sl_run_sweep_file(const char *path, const sl_run_report_config *cfg, sl_run_sweep *out);
void sl_run_sweep_free(sl_run_sweep *s);

/* The tables `speclab run --gamma LIST` prints: "sweep" (a row per gamma), "cost_fit" and "costs"
 * (the calibration, as sl_run_report_tables). Freed as there. */
int sl_run_sweep_tables(const sl_run_sweep *s, sl_table ***tables, size_t *n);

#endif
