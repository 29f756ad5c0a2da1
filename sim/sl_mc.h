/*
 * sl_mc.h: Monte Carlo simulation of Algorithm 1 (THEORY.md) on synthetic (p, q) families and on
 * logged distributions, with the theory's predictions beside the measurements.
 *
 * Model of a simulated iteration: draft position i (1..gamma) uses the pair (p_i, q_i) and the
 * bonus position gamma+1 uses p_{gamma+1}; the pairs do not depend on the tokens drawn
 * (context-free), so each iteration is independent and predictions are exact. Where the pairs come
 * from is a source (sl_mc_source): a synthetic family, or rows of a log, laid out as
 *   SL_MC_IID         one row serves every position (beta is i.i.d., Equation 1 applies);
 *   SL_MC_POSITIONAL  row i serves position i+1 (n_rows >= gamma + 1; beta_i varies with i);
 *   SL_MC_SLIDING     iteration t uses rows (t + i) mod n_rows for i = 0..gamma: a replay of a logged
 *                     sequence from every prefix, predictions averaged over the windows used.
 *
 * Reproducibility: iterations run in blocks of SL_MC_BLOCK; block b draws from the streams of
 * sl_rand_rng_reseed(seed, b), never from a thread id, and every reduction is over integers, so
 * results are the same bytes for any OpenMP thread count. Within a block each iteration takes a
 * fixed share of every stream: gamma draft uniforms (one per sl_spec_draft call), gamma accept
 * uniforms (sl_spec_verify uses the first one per tested position; the rest are skipped) and, for
 * the rules that resample, resample uniforms as sl_spec_verify draws them.
 * Speed: the run precomputes alias tables of q, p and the residual for every distinct row, so
 * each draw is O(1) after an O(V) set-up. For the exact and lenient rules a fused loop, the fast
 * twin of sl_spec_draft + sl_spec_verify, emits bit-identical tokens (tests/test_mc.c): it draws a
 * block's uniforms up front (an inline xoshiro256**, four streams side by side), draws tokens from
 * integer alias columns and tests them against integer thresholds, all without a branch on a
 * random outcome. The other rules run the reference path (the wrong variants that draw otherwise
 * do their own O(V) work, as they would).
 */
#ifndef SL_MC_H
#define SL_MC_H

#include <stddef.h>
#include <stdint.h>

#include "sl_common.h"
#include "sl_dist.h"
#include "sl_spec.h"

/* ---- sources of (p, q) rows ---- */

typedef enum { SL_MC_IID = 0, SL_MC_POSITIONAL = 1, SL_MC_SLIDING = 2 } sl_mc_layout;

/* A source yields n_rows pairs (p, q) over V tokens. The HDF5 log reader implements this
 * callback; sl_mc_rows below is the in-memory one. */
typedef struct {
    void *self;
    size_t V;
    size_t n_rows;
    sl_mc_layout layout;
    /* Writes row i's target pmf into p (V) and draft pmf into q (V). */
    int (*row)(void *self, size_t i, double *p, double *q);
} sl_mc_source;

/* In-memory rows. */
typedef struct {
    size_t V, n_rows;
    sl_mc_layout layout;
    double *p; /* (n_rows, V) target */
    double *q; /* (n_rows, V) draft */
} sl_mc_rows;

sl_mc_rows *sl_mc_rows_alloc(size_t V, size_t n_rows, sl_mc_layout layout);
void sl_mc_rows_free(sl_mc_rows *r);
/* A source reading r (which must outlive it). */
sl_mc_source sl_mc_rows_source(sl_mc_rows *r);

/* ---- synthetic families ---- */

typedef enum {
    SL_FAMILY_IDENTICAL = 0, /* q = p, p ~ Dirichlet(concentration): alpha = 1 */
    SL_FAMILY_NOISY,         /* p ~ Dirichlet(concentration), q = softmax(log p + noise * z), z ~ N(0, 1) */
    SL_FAMILY_DIRICHLET,     /* p, q independent Dirichlet(concentration) */
    SL_FAMILY_ZIPF,          /* p(x) ~ (x+1)^(-s/temp_p), q(x) ~ (x+1)^(-s/temp_q): temperature mismatch */
    SL_FAMILY_DISJOINT,      /* p uniform on [0, V/2), q uniform on [V/2, V): alpha = 0 */
    SL_FAMILY_POSITIONAL,    /* per position i = 1..gamma+1: p_i ~ Dirichlet, q_i noisy copy at noise * i */
    SL_FAMILY_COUNT
} sl_mc_family;

const char *sl_mc_family_name(sl_mc_family f);
int sl_mc_family_parse(const char *s, sl_mc_family *out);

typedef struct {
    sl_mc_family family;
    size_t V;             /* vocabulary size, >= 2 */
    size_t gamma;         /* positional family: rows for positions 1..gamma+1 */
    double noise;         /* noisy, positional: standard deviation of the logit noise, >= 0 */
    double concentration; /* Dirichlet parameter of every entry, > 0 */
    double zipf_s;        /* Zipf exponent, > 0 */
    double temp_p, temp_q;/* Zipf temperatures, > 0 */
    uint64_t seed;        /* stream SL_STREAM_FAMILY, item = row index */
} sl_mc_family_params;

#define SL_MC_FAMILY_DEFAULT ((sl_mc_family_params){SL_FAMILY_NOISY, 256, 4, 0.5, 1.0, 1.1, 1.0, 1.3, 1})

int sl_mc_family_validate(const sl_mc_family_params *fp);
/* Builds the family's rows (1 row, or gamma+1 for the positional family). */
int sl_mc_family_rows(const sl_mc_family_params *fp, sl_mc_rows **out);

/* ---- the simulation ---- */

/* Everything a run needs, set up once: the window rows and their alias tables. */
typedef struct sl_mc_plan sl_mc_plan;

int sl_mc_plan_alloc(const sl_mc_source *src, size_t gamma, const sl_spec_config *cfg, sl_mc_plan **out);
void sl_mc_plan_free(sl_mc_plan *plan);
size_t sl_mc_plan_vocab(const sl_mc_plan *plan);
size_t sl_mc_plan_gamma(const sl_mc_plan *plan);
/* Distinct rows and their (p, q): for tests and verify. */
size_t sl_mc_plan_rows(const sl_mc_plan *plan);
const double *sl_mc_plan_p(const sl_mc_plan *plan, size_t row);
const double *sl_mc_plan_q(const sl_mc_plan *plan, size_t row);
sl_mc_layout sl_mc_plan_layout(const sl_mc_plan *plan);
/* For tests: the fused loop's integer alias draw for u = k 2^-53 (k < 2^53) from table `which`
 * (0 = q, 1 = residual, 2 = p) of distinct row `row`, and the sl_alias table it must agree with
 * token for token. -1 / NULL when the plan has no fused loop (rules other than exact and lenient). */
int64_t sl_mc_plan_fused_draw(const sl_mc_plan *plan, int which, size_t row, uint64_t k);
const sl_alias *sl_mc_plan_alias(const sl_mc_plan *plan, int which, size_t row);
/* For tests: the AVX2 counting loop's draft points for four generator outputs r (k = r >> 11):
 * x[l] must be (k 2^-53) V as sl_alias_sample_u computes it, bit for bit. Returns 1. */
int sl_mc_counting_draft_x(const uint64_t r[4], size_t V, double x[4]);
const sl_spec_config *sl_mc_plan_config(const sl_mc_plan *plan);
/* For tests: the counting loop's compact table keeps prob's bits >> pshift and the thresholds
 * >> tshift (defaults 32 and 37); larger shifts make its ties, decided from the full table, common. */
int sl_mc_plan_set_count_bits(sl_mc_plan *plan, unsigned pshift, unsigned tshift);
/* The build of the counting loop (sl_mc_run without token arrays, i.i.d. and positional layouts):
 * SL_MC_COUNT_WIDE (eight lanes of 512 bits; AVX-512 F and DQ) or SL_MC_COUNT_AVX2 (two halves of
 * four lanes); SL_MC_COUNT_AUTO (the default) picks the wide one where the CPU has it, as does a
 * request for it where the CPU has not. Both give the same histogram. Returns the build now in
 * effect. Not to be called while a run is in progress. */
enum { SL_MC_COUNT_AUTO = 0, SL_MC_COUNT_AVX2 = 1, SL_MC_COUNT_WIDE = 2 };
int sl_mc_counting_isa(int isa);

/* Iterations per block of randomness: block b (iterations b*SL_MC_BLOCK ...) draws from the streams
 * seeded with (seed, stream, b), its iterations one after another. Part of what a seed means:
 * changing it changes every result. */
#define SL_MC_BLOCK 256

typedef struct {
    size_t iterations;
    uint64_t seed;
    int threads;         /* 0 = OpenMP's default */
    int32_t *tokens;     /* optional (iterations, gamma + 1): emitted tokens, unused slots -1 */
    uint8_t *n_emitted;  /* optional (iterations) */
    int reference;       /* 1: every iteration through sl_spec_draft/sl_spec_verify. 0 (default): the
                            exact and lenient rules take a fused loop that uses the same uniforms
                            from the same streams for the same draws, so its output is bit-identical
                            (tests/test_mc.c checks it); `speclab verify` always uses the reference. */
} sl_mc_opts;

typedef struct {
    size_t gamma, iterations;
    uint64_t hist[SL_SPEC_GAMMA_MAX + 2];   /* hist[k]: iterations that emitted k tokens (1..gamma+1) */
    uint64_t reached_at[SL_SPEC_GAMMA_MAX]; /* iterations that tested draft position i+1 */
    uint64_t accepted_at[SL_SPEC_GAMMA_MAX];/* ... and accepted it */
    uint64_t tokens;                        /* emitted tokens, sum of N */
    uint64_t tokens_sq;                     /* sum of N^2 */
    uint64_t draft_calls, target_calls;     /* gamma and 1 per iteration */
    double elapsed_s;                       /* wall clock of the loop (not part of any comparison) */
} sl_mc_result;

int sl_mc_run(const sl_mc_plan *plan, const sl_mc_opts *o, sl_mc_result *res);
/* The same, calling progress(ctx, iterations done, iterations) after blocks of SL_MC_BLOCK, from
 * one thread (NULL = silent). The callback stays out of sl_mc_opts, which callers fill by position. */
int sl_mc_run_progress(const sl_mc_plan *plan, const sl_mc_opts *o, sl_progress_fn progress, void *progress_ctx,
                       sl_mc_result *res);

/* Called once per block, after its iterations ran, by the thread that ran it (thread: its OpenMP
 * thread number, below the run's thread count): block b's iterations b*SL_MC_BLOCK + j, j < n,
 * emitted nem[j] tokens tok[j * (gamma + 1) ..] (unused slots -1). The buffers are the thread's
 * and are reused for its next block. Blocks reach a thread in no promised order (OpenMP's static
 * schedule, shares of MPI ranks); what the callback accumulates must not depend on it (integer
 * counts per thread, summed at the end, do not). A non-zero return (an sl_fail status) stops that
 * thread and fails the run. */
typedef int (*sl_mc_block_fn)(void *ctx, int thread, size_t block, const int32_t *tok, const uint8_t *nem, size_t n);

/* sl_mc_run_progress with on_block (NULL: none) instead of o->tokens and o->n_emitted (which must
 * then be NULL): for callers that count the tokens as they come, in memory independent of the
 * iterations (sl_verify_run). In the MPI build each rank sees only its own blocks. */
int sl_mc_run_blocks(const sl_mc_plan *plan, const sl_mc_opts *o, sl_mc_block_fn on_block, void *block_ctx,
                     sl_progress_fn progress, void *progress_ctx, sl_mc_result *res);

/* ---- predictions ---- */

/* Acceptance probability of one drafted token under cfg's rule, for the pair (p, q) (V):
 * exact: sum min(p, q); lenient: sum min(q, p/l); sampler-match: sum p q; lenient-t0: 1 if
 * p(argmax q) >= l max p else 0. The deliberately wrong variants get the exact rule's value: what
 * a correct sampler would do. */
double sl_mc_accept_prob(const sl_spec_config *cfg, const double *p, const double *q, size_t V);

/* Tokens-per-iteration pmf (gamma + 2 entries, [0] = 0) from i.i.d. alpha (Equation 1) and from
 * position-dependent beta_1..beta_gamma, through sl_theory_pmf / sl_theory_beta_pmf. */
void sl_mc_pmf_iid(double alpha, size_t gamma, double *pmf);
void sl_mc_pmf_positional(const double *beta, size_t gamma, double *pmf);

typedef struct {
    double alpha;                            /* mean per-row acceptance probability over the windows used */
    double beta[SL_SPEC_GAMMA_MAX];          /* expected conditional acceptance at position i+1:
                                                E[accepted_at] / E[reached_at] */
    double acceptance;                       /* expected pooled accepted / reached */
    double pmf_iid[SL_SPEC_GAMMA_MAX + 2];   /* Equation 1 at alpha */
    double pmf[SL_SPEC_GAMMA_MAX + 2];       /* exact for the layout: positional, window-averaged */
    double expected_tokens;                  /* mean of pmf */
    double expected_tokens_iid;              /* mean of pmf_iid */
} sl_mc_prediction;

/* Predictions for a run of `iterations` iterations of plan. */
int sl_mc_predict(const sl_mc_plan *plan, size_t iterations, sl_mc_prediction *pred);

#endif
