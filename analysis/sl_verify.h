/*
 * sl_verify.h: is a speculative sampler lossless? Runs the sampler on a context-free synthetic
 * pair (sl_mc plan) and tests what it emitted against the known target pmf (THEORY.md,
 * "Statistics").
 *
 * Tests (one-sample mode), each a multinomial goodness of fit:
 *   first            first token of every iteration                      ~ p_1
 *   token_k          k-th token (2 <= k <= gamma) of iterations with N >= k ~ p_k
 *                    (valid because positions < k use randomness independent of position k)
 *   bonus            the bonus token, when all gamma drafts were accepted ~ p_{gamma+1}
 *   after_rejection  the token emitted at a rejection                     ~ the rule's correction
 *                    pmf: norm(max(0, p - q)) (exact, lenient, and what every wrong variant claims
 *                    to do), p (1 - q) normalised (sampler-match), argmax p (lenient-t0)
 *   all              every emitted token of the concatenated stream        ~ p   (i.i.d. layout)
 *   pair, triple     consecutive non-overlapping 2- and 3-token blocks of the stream ~ p x p (x p),
 *                    when V^m <= 4096 (i.i.d. layout); sl_verify_run starts them afresh at the
 *                    first token of every block of SL_MC_BLOCK iterations (a restart point fixed
 *                    in advance keeps them i.i.d. under the null; an incomplete m-block at a
 *                    block's end is dropped), sl_verify_samples reads one unbroken stream
 * With a positional layout (p_i, q_i differ by draft position) there is one after_rejection_k per
 * position and no stream tests. For lenient-t0 every target pmf is the one-hot argmax of p.
 *
 * Each test: Pearson chi^2 and G with pooling (sl_stats.h), the primary p-value Pearson's, except
 * when counts are small (n < 5 x categories of positive probability, or pooling left one cell):
 * then the exact multinomial p-value (up to 1e6 outcomes) or a Monte Carlo one (mc_sims draws).
 * A test whose null pmf has a single possible token is "degenerate" (reported, no p-value, not
 * counted) unless a token of probability 0 was seen, which gives p = 0. Holm's correction over all
 * tests; the sampler is rejected when some Holm-adjusted p-value is <= level. TV of each test with
 * the Hoeffding-union bound CI. Power: for each test the power guaranteed at its n against any
 * deviation of TV >= tv_delta (on its pooled cells) at level level/m (Holm's first threshold).
 *
 * Two-sample mode compares the speculative stream with as many plain target samples (stream
 * SL_STREAM_TARGET; in sl_verify_run, block b's from (sl_seed_derive(seed, SL_STREAM_TARGET,
 * UINT64_MAX), SL_STREAM_TARGET, b), apart from the sampler's own): chi^2 homogeneity of single tokens
 * and of pairs. It needs no pmf, only the ability to sample the target: the mode for real models.
 *
 * Memory and splitting: sl_verify_run keeps no tokens. Each block's tokens are counted as the
 * sampler emits them (sl_mc_run_blocks) into per-thread tables, summed as integers over threads
 * and, in the MPI build, over ranks (each rank runs its share of the blocks): O(V x tests x
 * threads) memory, the same counts for any thread or rank count. The Monte Carlo p-values are
 * split the same way (sl_stats_mc_multinomial_count: blocks of draws from (seed, test, block)).
 */
#ifndef SL_VERIFY_H
#define SL_VERIFY_H

#include <stddef.h>
#include <stdint.h>

#include "sl_mc.h"
#include "sl_table.h"

typedef struct {
    size_t iterations;
    uint64_t seed;
    int threads;
    double level;     /* family-wise level of the verdict (default 0.01) */
    double tv_delta;  /* deviation for the power statement (default 0.05) */
    int two_sample;   /* 1: homogeneity against plain target samples instead of the known pmf */
    size_t mc_sims;   /* Monte Carlo multinomial draws for small counts (default 20000) */
    sl_progress_fn progress; /* (sampler iterations done, iterations); in sl_verify_uniformity,
                                (replications done, replications). NULL = silent */
    void *progress_ctx;
} sl_verify_opts;

#define SL_VERIFY_OPTS_DEFAULT ((sl_verify_opts){200000, 1, 0, 0.01, 0.05, 0, 20000, NULL, NULL})

#define SL_VERIFY_MAX_TESTS (2 * SL_SPEC_GAMMA_MAX + 8)

/* One goodness-of-fit (or homogeneity) test. Values without data are NaN (n = 0). */
typedef struct {
    char name[32];        /* first, token_k, bonus, after_rejection[_k], all, pair, triple */
    char null[32];        /* the null pmf: target, residual, sampler-match, argmax-p, target^2,
                             target^3, or plain-target (two-sample homogeneity) */
    size_t n;             /* observations (speculative sample) */
    size_t n_b;           /* observations of the other sample (homogeneity); 0 otherwise */
    size_t categories;    /* k: support of the test */
    size_t cells;         /* cells after pooling */
    double df;            /* degrees of freedom of the asymptotic test */
    double pearson, p_pearson; /* Pearson chi^2 and its p-value */
    double g, p_g;        /* G (likelihood ratio) and its p-value */
    double p_small;       /* exact or Monte Carlo p-value for small counts; NaN when not used */
    const char *method;   /* none | asymptotic | exact | monte-carlo | homogeneity | degenerate */
    double p_value;       /* the primary p-value; NaN without data or when degenerate */
    double p_random;      /* the same with ties randomized (sl_stats_randomized_p) */
    double p_holm;        /* Holm-adjusted over the counted tests; NaN when not counted */
    int reject;           /* p_holm <= level; -1 when not counted */
    double tv, tv_lo, tv_hi; /* TV and its Hoeffding-union CI at the level */
    double power;         /* power at n against TV >= tv_delta at level / tests; NaN when df < 1 */
    double tv_90;         /* the TV this test detects with power 0.9 at its n and level / tests,
                             whatever the alternative (4 n tv^2 = lambda_0.9); NaN when df < 1 */
    int degenerate;       /* a null with one possible token: reported, not counted */
} sl_verify_test;

/* The lenient rules' bound freq(x) <= p(x) / l, one token (table only for V <= 64, lenient). */
typedef struct {
    double p, frequency, ci_lo, ci_hi, bound; /* Wilson CI at confidence 1 - 0.001/V */
    int within;           /* ci_lo <= bound */
} sl_verify_token;

typedef struct {
    sl_rule rule;
    double lenience;
    size_t iterations;
    uint64_t tokens;      /* emitted by the speculative sampler */
    double level, tv_delta;
    size_t n_rows;        /* tests built, with data or not */
    sl_verify_test *test; /* (n_rows) */
    size_t n_tests;       /* tests counted by Holm (with data, not degenerate) */
    size_t n_rejected;    /* tests with Holm-adjusted p <= level */
    double min_p_holm;
    double min_p;         /* smallest raw primary p-value */
    double power_level;   /* level / n_tests: Holm's first threshold */
    int rejected;         /* the sampler is not lossless at the family-wise level */
    /* Lenient rules: max over tokens of (lower Wilson bound of the emitted frequency) - p(x)/l,
     * per token at confidence 1 - 0.001/V; <= 0 means the p(x)/l bound holds. NaN otherwise. */
    double lenience_excess;
    double max_freq_ratio;  /* max_x freq(x) / p(x) in the stream (inf when p(x) = 0 was seen); NaN without */
    size_t n_tokens;        /* rows of the lenience bound table (0: none) */
    sl_verify_token *token; /* (n_tokens) */
} sl_verify_result;

/* Runs the sampler of plan and the tests into *out (free with sl_verify_result_free). Collective
 * in the MPI build (every rank calls it with the same arguments). */
int sl_verify_run(const sl_mc_plan *plan, const sl_verify_opts *o, sl_verify_result **out);
void sl_verify_result_free(sl_verify_result *r);
/* The same tests on tokens a sampler emitted elsewhere (plan gives the pair, gamma and rule; its
 * sampler is not run). With nem, tok is (n, gamma + 1): iteration t emitted nem[t] tokens (1 to
 * gamma + 1), the accepted drafts then a resampled token, or gamma accepted drafts and the bonus
 * token. With nem == NULL, tok is a plain stream of n tokens and only the stream tests (all,
 * pair, triple) run, which needs an i.i.d. plan. o->iterations is not used. */
int sl_verify_samples(const sl_mc_plan *plan, const int32_t *tok, const uint8_t *nem, size_t n,
                      const sl_verify_opts *o, sl_verify_result **out);
/* Renders a result: tables verdict, tests and (lenient rule, V <= 64) lenience_bound, owned by
 * the caller; tables must hold 3. */
int sl_verify_report(const sl_verify_result *r, sl_table **tables, size_t *n_tables);

/* Self-check: runs `replications` independent verifications (seeds seed, seed+1, ...) and tests
 * each test's p-values against U(0,1) with Kolmogorov-Smirnov. Under a correct sampler they are
 * uniform: the exact and Monte Carlo p-values of small counts enter with their ties randomized
 * (p_random), the asymptotic ones as they are (nearly continuous when the cells are >= 5). */
typedef struct {
    char test[32];
    size_t replications;  /* replications with data for this test */
    double ks_d, ks_p;    /* NaN when fewer than 2 */
    double mean_p;
    double rejected_fraction; /* of raw p-values <= level */
    const double *p;      /* (replications) this test's p_random values in replication order
                             (seed, seed+1, ...), those without data left out; not sorted.
                             Points into the result's p_values. */
} sl_verify_ks;

typedef struct {
    size_t replications;
    double level;
    size_t n_rows;
    sl_verify_ks row[SL_VERIFY_MAX_TESTS]; /* (n_rows) */
    double ks_min_p;      /* the smallest KS p-value (1 when none) */
    double *p_values;     /* (SL_VERIFY_MAX_TESTS, replications): owns every row's p; freed by
                             sl_verify_uniformity_free */
} sl_verify_uniformity_result;

int sl_verify_uniformity(const sl_mc_plan *plan, const sl_verify_opts *o, size_t replications,
                         sl_verify_uniformity_result **out);
void sl_verify_uniformity_free(sl_verify_uniformity_result *r);
/* One table (test, replications, ks_d, ks_p, mean_p, rejected_fraction). */
int sl_verify_uniformity_report(const sl_verify_uniformity_result *r, sl_table **out);

/* Sample-size planning: observations needed for power `power` at level `level` with df degrees of
 * freedom against TV tv (sl_stats_lambda_for_power, sl_stats_n_for_tv). */
typedef struct {
    double df, level, power, tv;
    double lambda;        /* noncentrality reaching the power */
    double n;             /* observations needed */
} sl_verify_power_result;

int sl_verify_power(double tv, double df, double level, double power, sl_verify_power_result *out);
/* One-row table (df, level, power, tv, lambda, n). */
int sl_verify_power_report(const sl_verify_power_result *r, sl_table **out);

#endif
