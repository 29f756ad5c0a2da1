/*
 * sl_analyze.h: analysis of HDF5 logs (sl_log.h): alpha with a sequence bootstrap CI, beta
 * distribution, acceptance per draft position (conditional and unconditional), acceptance against
 * draft confidence, expected tokens (i.i.d. formula, replay of the logged beta sequences, observed),
 * lenience curves and other rules from full distributions, walltime/operation factors and optimal
 * gamma through sl_theory, and dynamic-gamma policies replayed on the logged betas
 * (analysis/DYNAMIC_GAMMA.md). Results live in sl_analyze_result, which the report, the plotter and
 * the notebook exporter read.
 *
 * Memory is bounded: rows stream in blocks; what grows is O(n_sequences * gamma_max) per-sequence
 * sums for the bootstrap and one sequence's betas at a time, never the number of positions.
 *
 * Three models of E[N] for measure logs, side by side:
 *   iid        Equation 1 at alpha (the paper's assumption);
 *   window     (kept for comparison) an iteration may start at every position t and accepts its
 *              drafts with probabilities beta_t .. beta_{t+gamma-1}: E[N] = sum_k prod_{i<=k} beta_i
 *              averaged over the windows of gamma_max positions;
 *   sequential the exact replay of analysis/sl_replay.h: along the logged text, a tested draft is
 *              accepted with probability min(1, q(x_t)/p(x_t)), and each iteration starts where the
 *              previous one ended (the positions a real run tests, and their autocorrelation).
 * The dynamic-gamma policies replay acceptance patterns drawn from the logged betas.
 */
#ifndef SL_ANALYZE_H
#define SL_ANALYZE_H

#include <stddef.h>
#include <stdint.h>

#include "sl_log.h"
#include "sl_table.h"
#include "sl_theory.h"

#define SL_ANALYZE_GMAX 64
#define SL_ANALYZE_NC 5     /* cost values: the deployment c (if any) and 0, 0.01, 0.05, 0.1 */
#define SL_ANALYZE_QBINS 10000 /* fine beta histogram for quantiles: error <= 1e-4 */

typedef struct {
    size_t gamma_max;     /* windows and policies use gamma = 1..gamma_max (default 12) */
    size_t n_boot;        /* bootstrap resamples over whole sequences (default 1000) */
    double ci_level;      /* default 0.95 */
    uint64_t seed;        /* bootstrap: stream SL_STREAM_BOOT item b; replay: SL_STREAM_ACCEPT item seq*reps+r */
    size_t n_lenience;
    double lenience[32];  /* grid in (0, 1] */
    size_t n_conf_bins;   /* draft-confidence bins on [0, 1] (default 10) */
    size_t n_hist_bins;   /* beta histogram bins on [0, 1] (default 20) */
    double c;             /* deployment c; NaN: from the run log's costs, else none */
    double c_hat;         /* operations ratio for Theorem 3.11; NaN: c_hat = c */
    const sl_theory_vcost *vc; /* deployment v(n); NULL: from the run log, else v == 1 */
    size_t policy_reps;   /* replications of the policy replay per sequence (default 10) */
    size_t n_pmin;
    double pmin[16];      /* llama.cpp p_min thresholds (default 0.5..0.9 and 0.75) */
    int hf_start;         /* HF transformers' initial num_assistant_tokens (default 5) */
    int threads;          /* 0 = OpenMP default */
    int fast;             /* 1: raw-chunk libdeflate path for distributions (default); 0: H5Dread */
    int beta_only;        /* only recompute beta from the distributions (benchmark) */
    int no_dists;         /* skip the distribution pass even when present */
    const char *run_path; /* measure logs: a run log of the same pair, observed next to replayed
                             (and its measured c and v(n) when c and vc are not set) */
} sl_analyze_opts;

void sl_analyze_opts_init(sl_analyze_opts *o);

typedef struct {
    const char *policy;   /* "fixed", "oracle", "p_min", "hf_schedule" */
    double param;         /* gamma, threshold, start; NaN for oracle */
    double c;
    double tokens, iterations, draft_steps, verify_cost, cost; /* totals over the replay */
    double walltime_factor; /* tokens / cost (autoregressive = 1) */
    double mean_gamma;
} sl_analyze_policy;

typedef struct {
    sl_log_kind kind;
    sl_log_meta meta;
    size_t n_sequences, n_positions, gamma_max, n_boot;
    double ci_level;
    /* beta (measure: positions; run: drafted tokens) */
    double alpha, alpha_lo, alpha_hi;
    double d_lk_mean, entropy_p_mean, entropy_q_mean, q_max_mean;
    double dlk_identity_max; /* max |D_LK - (1 - beta)| over rows (Lemma 3.3 check) */
    size_t n_hist;
    uint64_t hist[64];
    uint64_t qhist[SL_ANALYZE_QBINS];
    double quantile_p[9], quantile[9];
    /* acceptance per draft position 1..gamma_max */
    double uncond[SL_ANALYZE_GMAX], cond[SL_ANALYZE_GMAX];       /* replay (measure) */
    double obs_uncond[SL_ANALYZE_GMAX], obs_cond[SL_ANALYZE_GMAX]; /* observed (run) */
    uint64_t obs_reached[SL_ANALYZE_GMAX], obs_accepted[SL_ANALYZE_GMAX], obs_offered[SL_ANALYZE_GMAX];
    size_t n_windows;
    /* confidence bins */
    size_t n_conf;
    uint64_t conf_count[64];
    double conf_beta[64];
    /* expected tokens per gamma 1..gamma_max */
    double en_iid[SL_ANALYZE_GMAX], en_replay[SL_ANALYZE_GMAX], en_lo[SL_ANALYZE_GMAX], en_hi[SL_ANALYZE_GMAX];
    double en_observed[SL_ANALYZE_GMAX]; uint64_t n_observed[SL_ANALYZE_GMAX];
    /* the exact sequential replay along the logged text (measure logs, analysis/sl_replay.h): tokens
     * per iteration at each gamma with a bootstrap CI over sequences, and the acceptance of the
     * drafts it tests (accepted / tested) */
    int have_seq;
    double en_seq[SL_ANALYZE_GMAX], en_seq_lo[SL_ANALYZE_GMAX], en_seq_hi[SL_ANALYZE_GMAX];
    double alpha_seq[SL_ANALYZE_GMAX];
    /* full distributions */
    int have_dists;
    double beta_dists, beta_dists_maxdiff, match, nonit;
    size_t n_len;
    double lenience[32], alpha_l[32], alpha_t0[32];
    /* costs */
    double c_deploy;        /* NaN when none */
    const char *c_source;   /* "--c", "run log", "none" */
    double cs[SL_ANALYZE_NC];
    size_t n_cs;
    /* run logs (or the run log given with a measure log: have_run) */
    int have_run;
    double accept_rate, accept_lo, accept_hi; /* accepted / tested drafts */
    double mean_emitted, draft_s, verify_s, sample_s; /* per iteration */
    double spec_tokens_per_s, base_tokens_per_s;
    size_t n_iterations;
    /* policies (measure logs) */
    size_t n_pol;
    sl_analyze_policy *pol;  /* (n_pol) owned */
    double best_fixed[SL_ANALYZE_NC];
    int best_fixed_gamma[SL_ANALYZE_NC];
    /* speedup CI per gamma at the deployment c (bootstrap), used by recommend */
    double sp[SL_ANALYZE_GMAX], sp_lo[SL_ANALYZE_GMAX], sp_hi[SL_ANALYZE_GMAX];
    /* notes for the reader ("lenience needs full distributions", ...) */
    size_t n_notes;
    char notes[8][256];
    /* factors per c (cs) and gamma 1..gamma_max; replay ones use the conditional acceptance vector
     * cond[] as sl_theory's position-dependent beta_1..beta_gamma (its E[N] equals the window mean) */
    double vtab[SL_ANALYZE_GMAX + 1]; /* v(g + 1), vtab[0] = 1 */
    int have_replay;
    double c_hat[SL_ANALYZE_NC];
    double f38[SL_ANALYZE_NC][SL_ANALYZE_GMAX];  /* Theorem 3.8, i.i.d. alpha, v == 1 */
    double fv[SL_ANALYZE_NC][SL_ANALYZE_GMAX];   /* E[N] / (gamma c + v(gamma + 1)), i.i.d. alpha */
    double frep[SL_ANALYZE_NC][SL_ANALYZE_GMAX]; /* the same with the replayed E[N] */
    double fops[SL_ANALYZE_NC][SL_ANALYZE_GMAX]; /* Theorem 3.11 with c_hat */
    double fseq[SL_ANALYZE_NC][SL_ANALYZE_GMAX]; /* the sequential replay's tokens per iteration / (gamma c + v(gamma + 1)) */
    int opt_seq[SL_ANALYZE_NC];                  /* its best gamma (0: plain decoding is faster) */
    double optf_seq[SL_ANALYZE_NC];
    int opt_iid[SL_ANALYZE_NC], opt_rep[SL_ANALYZE_NC], opt_iid_cap[SL_ANALYZE_NC], opt_rep_cap[SL_ANALYZE_NC];
    double optf_iid[SL_ANALYZE_NC], optf_rep[SL_ANALYZE_NC];
    int cor_improves[SL_ANALYZE_NC];
    double cor_bound[SL_ANALYZE_NC];
    double seconds;
} sl_analyze_result;

/* Analyses a measure or run log. The log is validated structurally on open; values are checked
 * as they stream (SL_EINPUT on NaN or out-of-range probabilities). */
int sl_analyze_file(const char *path, const sl_analyze_opts *o, sl_analyze_result *res);
void sl_analyze_result_free(sl_analyze_result *res);

/* The report: several sl_tables (caller frees each and the array). */
int sl_analyze_report(const sl_analyze_result *res, sl_table ***tables, size_t *n);

/* Percentile bootstrap over groups (sequences) of the ratio sum(num) / sum(den): n_boot resamples
 * of n groups with replacement, resample b drawing from (seed, SL_STREAM_BOOT, b). */
int sl_analyze_boot_ratio(const double *num, const double *den, size_t n, size_t n_boot, double level, uint64_t seed,
                          double *est, double *lo, double *hi);

/* ---- replay of policies on one sequence (exposed for tests and recommend) ---- */

/* vtab[g] = v(g + 1) for g = 0..gamma_max (vtab[0] = 1: a plain target step). */
typedef struct {
    double tokens, iterations, draft_steps, verify_cost;
} sl_replay_acc;

/* accept (n): the realised acceptance pattern (1 = the draft at that position would be accepted). */
void sl_replay_fixed(const uint8_t *accept, size_t n, size_t gamma, const double *vtab, sl_replay_acc *acc);
/* The oracle: knows the pattern, picks each iteration's gamma to minimise total cost (dynamic
 * programming, DYNAMIC_GAMMA.md). cost_scratch (n + 1). */
void sl_replay_oracle(const uint8_t *accept, size_t n, size_t gamma_max, double c, const double *vtab,
                      double *cost_scratch, sl_replay_acc *acc);
void sl_replay_pmin(const uint8_t *accept, const double *q_max, size_t n, size_t gamma_max, double p_min,
                    const double *vtab, sl_replay_acc *acc);
void sl_replay_hf(const uint8_t *accept, size_t n, size_t gamma_max, int start, const double *vtab, sl_replay_acc *acc);

/* The oracle's walltime factor for i.i.d. acceptance alpha in closed form (DYNAMIC_GAMMA.md):
 * E[K + 1] / (c E[K] + E[v(K + 1)]) with K = min(run of accepts, gamma_max). Greedy oracle; it is
 * the optimum when v(g + 1) + v(h + 1) >= v(g + h + 2) - c for all g, h (e.g. v == 1, c < 1). */
double sl_analyze_oracle_iid(double alpha, size_t gamma_max, double c, const double *vtab);

/* Latency (in target-step units) of producing answer_tokens with fixed gamma along one logged beta
 * sequence (positions wrap around when the answer outruns it), with uniforms from r. */
double sl_replay_latency(const double *beta, size_t n, size_t gamma, size_t answer_tokens, double c, const double *vtab,
                         gsl_rng *r);

/* Latency spread of an answer of answer_tokens under fixed gamma (each of gammas, n_g), in target-step
 * units: n_sims simulations spread evenly over the logged sequences (measure log: each sequence's
 * betas from its first position, wrapping around; run log: i.i.d. beta = alpha), simulation j of
 * sequence s drawing from (seed, SL_STREAM_ACCEPT, 2^40 + s * per_seq + j). q (n_g, 4) receives
 * P50, P90, P99 and the mean. */
int sl_analyze_latency(const char *path, double alpha, const size_t *gammas, size_t n_g, size_t answer_tokens,
                       size_t n_sims, uint64_t seed, double c, const double *vtab, double *q);

#endif
