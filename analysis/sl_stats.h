/*
 * sl_stats.h: the statistics that `speclab mc` and `speclab verify` stand on (THEORY.md,
 * "Statistics"): goodness of fit against a known pmf (Pearson chi^2, G-test, exact and Monte Carlo
 * multinomial p-values), two-sample homogeneity, Holm's correction, a KS test of p-values against
 * U(0,1), confidence intervals, a total-variation estimate with a CI, and power.
 *
 * Pooling rule (sl_stats_pool), deterministic and used by every chi^2/G function here:
 *   1. categories with expected count 0 are set aside: an observation there makes the null
 *      impossible (p-value 0, statistic +inf); otherwise they carry no information and are dropped;
 *   2. the remaining categories are sorted by expected count, ascending (ties: lower index first);
 *   3. every category with expected count < min_expected (5) goes into one pooled cell; if that
 *      pooled cell is itself below min_expected, the next-smallest categories are added to it one at
 *      a time until it is not (or nothing is left);
 *   4. df = (number of cells after pooling) - 1. With a single cell left the test has no power:
 *      statistic 0, df 0, p-value 1.
 * Pooling only merges cells, so a test on pooled cells is still exact in level asymptotically; it
 * loses power only against deviations inside the pooled tail.
 */
#ifndef SL_STATS_H
#define SL_STATS_H

#include <stddef.h>
#include <stdint.h>

#define SL_STATS_MIN_EXPECTED 5.0

typedef enum {
    SL_GOF_PEARSON = 0, /* X^2 = sum (O - E)^2 / E */
    SL_GOF_G = 1,       /* G = 2 sum O ln(O / E) */
} sl_gof_kind;

typedef struct {
    double stat;      /* X^2 or G on the pooled cells; +inf when a zero-probability category was hit */
    double df;        /* pooled cells - 1 */
    double p_value;   /* asymptotic chi^2 tail (gsl_cdf_chisq_Q), or exact/MC as the function says */
    size_t n_cells;   /* cells after pooling */
    size_t n_pooled;  /* original categories merged into the pooled cell (0 = no pooling) */
    uint64_t n;       /* total observations */
    int impossible;   /* an observation fell on a category of probability 0 */
} sl_gof;

/* Pools counts (k) against pmf (k) with the rule above. cell_obs/cell_exp (k) receive the pooled
 * observed and expected counts; returns the number of cells via *n_cells. */
int sl_stats_pool(const uint64_t *counts, const double *pmf, size_t k, double min_expected, double *cell_obs,
                  double *cell_exp, size_t *n_cells, size_t *n_pooled, int *impossible);

/* Goodness of fit of counts (k) against pmf (k) (a probability vector) with pooling; asymptotic
 * chi^2 p-value. */
int sl_stats_gof(const uint64_t *counts, const double *pmf, size_t k, sl_gof_kind kind, sl_gof *out);

/* Exact multinomial p-value: P(X^2(Y) >= X^2(observed)) under Y ~ Multinomial(n, pmf), summing
 * over every outcome (no pooling; ties within a relative 1e-9 count as >=). Refuses (SL_EINPUT)
 * when the number of outcomes C(n+k-1, k-1) exceeds max_outcomes. Categories of probability 0 must
 * have count 0 (else the p-value is 0). */
int sl_stats_exact_multinomial(const uint64_t *counts, const double *pmf, size_t k, double max_outcomes,
                               double *p_value);
/* The same, also returning P(X^2 > observed) (strictly, beyond the tie tolerance) in *p_gt. */
int sl_stats_exact_multinomial_ext(const uint64_t *counts, const double *pmf, size_t k, double max_outcomes,
                                   double *p_value, double *p_gt);
/* Number of outcomes the exact test would enumerate (as a double; may be huge). */
double sl_stats_multinomial_outcomes(uint64_t n, size_t k);

/* Monte Carlo multinomial p-value for the unpooled Pearson statistic: (1 + #{X^2_sim >= X^2_obs})
 * / (1 + n_sim) with n_sim multinomial samples drawn from pmf (sl_stats_mc_multinomial_count,
 * item 0, every block, OpenMP's default threads: the same value for any thread count).
 * Valid (never anti-conservative) at any n. */
int sl_stats_mc_multinomial(const uint64_t *counts, const double *pmf, size_t k, size_t n_sim, uint64_t seed,
                            double *p_value);

/* The same, also returning #{X^2_sim > X^2_obs} / (1 + n_sim) in *p_gt. */
int sl_stats_mc_multinomial_ext(const uint64_t *counts, const double *pmf, size_t k, size_t n_sim, uint64_t seed,
                                double *p_value, double *p_gt);
/* Draws per block of randomness of the Monte Carlo multinomial. Part of what a seed means. */
#define SL_STATS_MC_BLOCK 256

/* The exceedance counts behind the Monte Carlo p-value, for the draws of blocks [b_lo, b_hi)
 * (block b: draws b SL_STATS_MC_BLOCK .. up to n_sim) on `threads` OpenMP threads (0: default):
 * *ge = #{X^2_sim >= X^2_obs}, *gt = #{X^2_sim > X^2_obs} (ties within a relative 1e-9). Block b
 * draws from the stream (sl_seed_derive(seed, SL_STREAM_BOOT, item), SL_STREAM_BOOT, b) alone, so
 * the counts of disjoint block ranges add up exactly to those of the whole, whoever computes them
 * (threads, MPI ranks). A draw of n over the m categories of positive probability costs O(n) (n
 * alias draws) when n <= 8 m, else O(m) (gsl_ran_multinomial: conditional binomials). Zero counts
 * when an observation falls on a category of probability 0 (the p-value is then 0). */
int sl_stats_mc_multinomial_count(const uint64_t *counts, const double *pmf, size_t k, size_t n_sim, uint64_t seed,
                                  uint64_t item, size_t b_lo, size_t b_hi, int threads, uint64_t *ge, uint64_t *gt);
/* Randomized p-value p_gt + u (p_ge - p_gt), u ~ U(0,1): exactly U(0,1) under the null for a
 * discrete test statistic (the exact test) and nearly so for the Monte Carlo one, where the
 * conventional P(>=) is discrete and conservative. For checking uniformity, not for decisions. */
double sl_stats_randomized_p(double p_ge, double p_gt, double u);

/* Two-sample homogeneity (2 x k contingency table) chi^2 or G: are a (k) and b (k) counts from the
 * same distribution? Pooling as above with expected counts E_ij = row_i * col_j / N, categories
 * ordered by their smallest expected count; cells pooled in both rows together. */
int sl_stats_homogeneity(const uint64_t *a, const uint64_t *b, size_t k, sl_gof_kind kind, sl_gof *out);

/* Holm's step-down adjusted p-values: adj (m) from p (m); valid under any dependence.
 * Reject hypothesis i at family-wise level a iff adj[i] <= a. */
int sl_stats_holm(const double *p, size_t m, double *adj);

/* One-sample Kolmogorov-Smirnov test of x (n) against U(0,1): D = sup |F_n - F|, two-sided.
 * p-value: exact (Marsaglia, Tsang & Wang 2003) where n*D^2 is moderate, their asymptotic tail
 * 2 exp(-(2.000071 + .331/sqrt(n) + 1.409/n) n D^2) beyond that (where it is below ~1e-6). */
int sl_stats_ks_uniform(const double *x, size_t n, double *D, double *p_value);
/* P(D_n >= d) for the two-sided one-sample KS statistic. */
double sl_stats_ks_sf(size_t n, double d);

/* Confidence intervals at confidence 1 - a. */
int sl_stats_wilson(uint64_t successes, uint64_t n, double a, double *lo, double *hi);
int sl_stats_clopper_pearson(uint64_t successes, uint64_t n, double a, double *lo, double *hi);
/* Normal-approximation CI for a mean from its sample mean and sample standard deviation. */
int sl_stats_mean_ci(double mean, double sd, uint64_t n, double a, double *lo, double *hi);

/* Total variation between the empirical pmf of counts (k) and pmf (k): tv = (1/2) sum |O/n - p|
 * (the plug-in estimate, biased upward by about sqrt(k / (2 pi n))). The CI at confidence 1 - a is
 * a stated bound, not an approximation: for every event A, P(phat(A) - p_true(A) > eps) <=
 * exp(-2 n eps^2) (Hoeffding); a union over the 2^k events gives, with probability >= 1 - a,
 * TV(phat, p_true) <= eps = sqrt((k ln 2 + ln(1/a)) / (2n)), so the true TV(p_true, pmf) lies in
 * [tv - eps, tv + eps] clipped to [0, 1]. Conservative, valid at every n. */
int sl_stats_tv_ci(const uint64_t *counts, const double *pmf, size_t k, double a, double *tv, double *lo,
                   double *hi);
/* The same TV with a percentile bootstrap CI (n_boot multinomial resamples of the observed counts,
 * stream SL_STREAM_BOOT of seed): narrower, approximate, poor near TV = 0. */
int sl_stats_tv_bootstrap(const uint64_t *counts, const double *pmf, size_t k, double a, size_t n_boot,
                          uint64_t seed, double *tv, double *lo, double *hi);

/* ---- quantiles (the one implementation; every median, percentile and bootstrap CI uses it) ---- */

/* The q-quantile of x (n, sorted ascending) by linear interpolation between order statistics
 * (Hyndman & Fan type 7, numpy's default): h = q (n - 1), x[floor h] + (h - floor h)(x[floor h + 1] -
 * x[floor h]). NaN when n = 0. */
double sl_stats_quantile_sorted(const double *x, size_t n, double q);
/* Sorts x in place (ascending) and returns its q-quantile. */
double sl_stats_quantile(double *x, size_t n, double q);
/* The (1 - level)/2 and (1 + level)/2 quantiles of x (n, sorted in place): a percentile CI. */
void sl_stats_percentile_ci(double *x, size_t n, double level, double *lo, double *hi);

/* Non-central chi^2 CDF P(X <= x) with df degrees of freedom and non-centrality lambda, by the
 * Poisson-weighted series of central chi^2 CDFs, summed outward from the Poisson mode until the
 * remaining weight is below 1e-15. */
double sl_stats_ncx2_cdf(double x, double df, double lambda);
/* Power of a level-a chi^2 test with df degrees of freedom at non-centrality lambda. */
double sl_stats_power(double lambda, double df, double a);
/* The non-centrality giving the wanted power (bisection to 1e-10 relative). */
int sl_stats_lambda_for_power(double df, double a, double power, double *lambda);
/* Observations needed to detect a total-variation deviation delta with the given power at level a
 * and df: n = ceil(lambda / (4 delta^2)), because Cohen's w = sqrt(sum (p1 - p0)^2 / p0) >= 2 delta
 * (Cauchy-Schwarz), so lambda = n w^2 >= 4 n delta^2 for every alternative at TV delta. */
int sl_stats_n_for_tv(double delta, double df, double a, double power, double *n);
/* The power guaranteed at sample size n against any alternative at TV >= delta: power(4 n delta^2). */
double sl_stats_power_at_n(double n, double delta, double df, double a);

#endif
