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
 *                    when V^m <= 4096 (i.i.d. layout)
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
 * SL_STREAM_TARGET): chi^2 homogeneity of single tokens and of pairs. It needs no pmf, only the
 * ability to sample the target: the mode for real models.
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
} sl_verify_opts;

#define SL_VERIFY_OPTS_DEFAULT ((sl_verify_opts){200000, 1, 0, 0.01, 0.05, 0, 20000})

#define SL_VERIFY_MAX_TESTS (2 * SL_SPEC_GAMMA_MAX + 8)

typedef struct {
    size_t n_rows;                                /* tests built, with data or not */
    char test_name[SL_VERIFY_MAX_TESTS][32];      /* (n_rows) */
    double p_value[SL_VERIFY_MAX_TESTS];          /* (n_rows) primary p-value; NaN without data */
    double p_random[SL_VERIFY_MAX_TESTS];         /* (n_rows) the same with ties randomized for the
                                                     exact and Monte Carlo tests (sl_stats_randomized_p) */
    size_t n_tests;
    size_t n_rejected;    /* tests with Holm-adjusted p <= level */
    double min_p_holm;
    double min_p;         /* smallest raw primary p-value */
    int rejected;         /* the sampler is not lossless at the family-wise level */
    /* Lenient rules: max over tokens of (lower Wilson bound of the emitted frequency) - p(x)/l,
     * per token at confidence 1 - 0.001/V; <= 0 means the p(x)/l bound holds. NaN otherwise. */
    double lenience_excess;
    double max_freq_ratio;  /* max_x freq(x) / p(x) in the stream */
} sl_verify_summary;

/* Runs the sampler of plan and the tests; builds up to 3 tables (tests, verdict, lenience_bound)
 * owned by the caller. */
int sl_verify_run(const sl_mc_plan *plan, const sl_verify_opts *o, sl_table **tables, size_t *n_tables,
                  sl_verify_summary *sum);

/* Self-check: runs `replications` independent verifications (seeds seed, seed+1, ...) and tests
 * each test's p-values against U(0,1) with Kolmogorov-Smirnov. Under a correct sampler they are
 * uniform: the exact and Monte Carlo p-values of small counts enter with their ties randomized
 * (p_random), the asymptotic ones as they are (nearly continuous when the cells are >= 5). One table
 * (test, replications, ks_d, ks_p, mean_p, rejected_fraction at `level`). *ks_min_p receives the
 * smallest KS p-value. */
int sl_verify_uniformity(const sl_mc_plan *plan, const sl_verify_opts *o, size_t replications, sl_table **out,
                         double *ks_min_p);

/* `--power`: observations needed for power `power` at level a with df degrees of freedom against
 * TV delta, as a one-row table (df, level, power, tv, lambda, n). */
int sl_verify_power_table(double delta, double df, double a, double power, sl_table **out);

#endif
