/*
 * sl_verify_exact.h: how large is a sampler's deviation, and how many iterations does verify need
 * to see it? Planning for `speclab verify` on a synthetic pair.
 *
 * sl_verify_exact enumerates every random choice of one iteration of the rule's own sampler code
 * (sim/sl_enum.h) on the plan's pair, which gives the exact distribution of what that iteration
 * emits. For each test verify runs, it derives the exact distribution the test observes (the first
 * token; the k-th token given that k tokens were emitted; the bonus token given all gamma were
 * accepted; the token emitted at a rejection; a token of the concatenated stream, whose marginal
 * is E[count of x per iteration] / E[tokens per iteration]) and its total-variation distance to
 * the test's null pmf: the effect a lossless sampler has as 0 (up to rounding, ~1e-15) and a wrong
 * one as its true size. From that law, the test's degrees of freedom and Holm's first threshold
 * level/m: the observations that give the asked power against this very alternative (the chi^2
 * noncentrality n w^2 with the exact Cohen's w; the pooling of rare cells is ignored), next to
 * the guarantee for any alternative at that TV (sl_stats_n_for_tv), and the iterations that
 * produce them (observations per iteration: 1 for
 * first, P(N >= k), P(bonus), P(rejection), E[tokens] for the stream). The pair and triple tests
 * are not planned (their null is the product pmf; a dependence bug shows in token_k first).
 * Practical up to V^gamma of about 10^6 paths.
 *
 * Deviations below SL_VERIFY_EXACT_TV_ZERO count as none.
 *
 * sl_verify_iterations_for_tv answers the converse question without a sampler: the iterations at
 * which the first-token test alone has power `power` against any first-token deviation of TV >= tv.
 */
#ifndef SL_VERIFY_EXACT_H
#define SL_VERIFY_EXACT_H

#include <stddef.h>

#include "sl_mc.h"
#include "sl_table.h"

typedef struct {
    char name[32];           /* first, token_k, bonus, after_rejection[_k], all */
    double per_iteration;    /* observations the test gets per iteration (expected) */
    double tv;               /* exact TV between what the test observes and its null */
    double df;               /* positive-probability categories of the null, minus 1 */
    double n_needed;         /* observations for the power at level/m against this alternative
                                (chi^2 noncentrality n w^2, Cohen's w exact); inf when tv ~ 0 */
    double n_tv_bound;       /* the same guaranteed for ANY alternative at this TV (w >= 2 TV):
                                what --tv plans with; NaN when tv ~ 0 */
    double iterations_needed;/* n_needed / per_iteration */
} sl_verify_exact_row;

typedef struct {
    sl_rule rule;
    double lenience;
    size_t vocab, gamma;
    size_t paths;            /* enumerated paths of one iteration */
    size_t m;                /* tests verify counts (Holm's m) */
    double level, power;
    size_t n_rows;
    sl_verify_exact_row row[2 * SL_SPEC_GAMMA_MAX + 2]; /* (n_rows) */
    double max_tv;                 /* over the rows */
    double iterations_needed;      /* the fewest over the rows: the run that sees the deviation */
    const char *first_to_detect;   /* the row that needs them */
} sl_verify_exact_result;

/* TV below this is rounding, not a deviation: the row needs infinitely many iterations. */
#define SL_VERIFY_EXACT_TV_ZERO 1e-12

int sl_verify_exact(const sl_mc_plan *plan, double level, double power, size_t max_paths,
                    sl_verify_exact_result *out);
/* Two tables: exact (rule, lenience, vocab, gamma, paths, tests, level, power, max_tv,
 * iterations_needed, first_to_detect) and rows (test, per_iteration, tv, df, n_needed,
 * iterations_needed); tables must hold 2. */
int sl_verify_exact_report(const sl_verify_exact_result *r, sl_table **tables, size_t *n_tables);

/* The number of tests sl_verify_samples counts for plan (not counting degenerate nulls) and the
 * iterations at which the first-token test has power `power` against TV >= tv at level/m. */
int sl_verify_iterations_for_tv(const sl_mc_plan *plan, double tv, double level, double power, size_t *m,
                                double *iterations);

#endif
