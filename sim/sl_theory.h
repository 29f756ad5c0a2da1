/*
 * sl_theory.h: the closed forms of THEORY.md ("Closed forms"), as pure functions.
 *
 * N is the number of tokens one iteration of Algorithm 1 emits (1..γ+1). With i.i.d. acceptance
 * α, P(N >= k+1) = α^k; with position-dependent acceptance β_1..β_γ, P(N >= k+1) = Π_{i<=k} β_i.
 * Every quantity is computed so that it keeps full relative precision for α (or the β_i) near 1,
 * where the textbook forms (1 − α^{γ+1})/(1 − α) and the variance formula cancel catastrophically.
 *
 * Every function that can receive bad input returns SL_OK or SL_EINPUT (with a one-line message
 * naming the argument: "alpha: 1.5 is outside [0, 1]") and writes its result through a pointer;
 * outputs are never NaN. Nothing here allocates except the vcost table and the optimum's tie list.
 */
#ifndef SL_THEORY_H
#define SL_THEORY_H

#include <stddef.h>

/* γ above this is refused: the O(γ) sums stay cheap, and no deployment drafts a million tokens. */
#define SL_THEORY_GAMMA_MAX 1000000
#define SL_THEORY_GAMMA_CAP_DEFAULT 64
/* Two γ whose walltime factors differ by at most this, relatively, are reported as ties. */
#define SL_THEORY_TIE_RTOL 1e-12

/* ---- input checks (the names appear in the messages) ---- */
int sl_theory_check_alpha(const char *name, double alpha); /* finite, in [0, 1] */
int sl_theory_check_gamma(const char *name, long gamma);   /* integer in [1, SL_THEORY_GAMMA_MAX] */
int sl_theory_check_cost(const char *name, double c);      /* finite, >= 0 (c, c_hat) */
int sl_theory_check_beta(const double *beta, int gamma);   /* gamma valid, each beta[i] in [0, 1] */

/* ---- i.i.d. acceptance α ---- */

/* E[N] = Σ_{k=0}^{γ} α^k = (1 − α^{γ+1})/(1 − α): exactly γ+1 at α = 1, 1 at α = 0. */
int sl_theory_expected_tokens(double alpha, int gamma, double *out);
/* pmf[k-1] = P(N = k), k = 1..γ+1: α^{k−1}(1 − α) for k <= γ, α^γ for k = γ+1. */
int sl_theory_pmf(double alpha, int gamma, double *pmf /* (gamma+1) */);
/* Var N = [α − (2γ+1)(1−α)α^{γ+1} − α^{2γ+2}]/(1−α)², computed stably (0 at α = 0 and α = 1). */
int sl_theory_var_tokens(double alpha, int gamma, double *out);

/* ---- position-dependent acceptance β_1..β_γ (beta[i-1] = β_i) ---- */

/* E[N] = Σ_{k=0}^{γ} Π_{i<=k} β_i. Equals sl_theory_expected_tokens when every β_i = α. */
int sl_theory_beta_expected_tokens(const double *beta /* (gamma) */, int gamma, double *out);
/* pmf[k] = P(N = k+1) = (Π_{i<=k} β_i)(1 − β_{k+1}) for k < γ, pmf[γ] = Π_i β_i. */
int sl_theory_beta_pmf(const double *beta /* (gamma) */, int gamma, double *pmf /* (gamma+1) */);
int sl_theory_beta_var_tokens(const double *beta /* (gamma) */, int gamma, double *out);

/* ---- verification cost v(n): one target call on n tokens ÷ one single-token target step ---- */

typedef enum {
    SL_VCOST_CONST = 0, /* v(n) = value for every n (value = 1 is Theorem 3.8's assumption) */
    SL_VCOST_TABLE = 1, /* measured points n -> v(n); asking for an n not in the table is an error */
    SL_VCOST_LINEAR = 2 /* v(n) = 1 + slope·(n − 1), so v(1) = 1 by construction */
} sl_vcost_kind;

typedef struct {
    sl_vcost_kind kind;
    double value;     /* CONST */
    double slope;     /* LINEAR */
    size_t n_entries; /* TABLE */
    long *n;          /* (n_entries) token counts, distinct, >= 1; owned */
    double *v;        /* (n_entries) v(n[i]) > 0; v(1) = 1 when n = 1 is present; owned */
} sl_theory_vcost;

/* Initialise vc (no allocation for const and linear; the table copies its inputs). */
int sl_theory_vcost_const(sl_theory_vcost *vc, double value);
int sl_theory_vcost_linear(sl_theory_vcost *vc, double slope);
int sl_theory_vcost_table(sl_theory_vcost *vc, const long *n /* (count) */, const double *v /* (count) */,
                          size_t count);
void sl_theory_vcost_free(sl_theory_vcost *vc); /* frees a table's arrays; safe on any kind */
/* v(n) for n >= 1. vc == NULL means v ≡ 1. SL_EINPUT if n is not in a table or v(n) <= 0. */
int sl_theory_vcost_eval(const sl_theory_vcost *vc, long n, double *out);

/* ---- speed and cost factors ---- */

/* Theorem 3.8 (v ≡ 1): (1 − α^{γ+1}) / ((1 − α)(γc + 1)). */
int sl_theory_walltime_factor(double alpha, int gamma, double c, double *out);
/* Generalised: E[N] / (γc + v(γ+1)); vc == NULL gives Theorem 3.8. */
int sl_theory_walltime_factor_v(double alpha, int gamma, double c, const sl_theory_vcost *vc, double *out);
int sl_theory_beta_walltime_factor_v(const double *beta /* (gamma) */, int gamma, double c,
                                     const sl_theory_vcost *vc, double *out);
/* Theorem 3.11: (1 − α)(γĉ + γ + 1)/(1 − α^{γ+1}) = (γĉ + γ + 1)/E[N]; (γĉ + γ + 1)/(γ + 1) at α = 1. */
int sl_theory_ops_factor(double alpha, int gamma, double c_hat, double *out);
/* The same cost per iteration divided by the position-dependent E[N]. */
int sl_theory_beta_ops_factor(const double *beta /* (gamma) */, int gamma, double c_hat, double *out);
/* Chen et al.'s per-loop speedup r'(K+1)·t_target / (K·t_draft + t_target), r' = E[N]/(K+1) the
 * acceptance ratio. With t_draft/t_target = c it is Theorem 3.8's factor. */
int sl_theory_chen_speedup(double accept_ratio, int K, double t_draft_s, double t_target_s, double *out);
/* Corollary 3.9: *improves = α > c; *bound = (1 + α)/(1 + c), the walltime factor at γ = 1. */
int sl_theory_cor39(double alpha, double c, int *improves, double *bound);

/* ---- optimal integer γ ---- */

typedef struct {
    int gamma_best;      /* the smallest γ in 1..gamma_cap whose walltime factor is within
                            SL_THEORY_TIE_RTOL (relative) of the largest */
    double factor_best;  /* its walltime factor */
    int gamma_opt;       /* gamma_best, or 0 when factor_best <= 1: plain decoding is no slower */
    double factor_opt;   /* factor_best, or 1 (plain decoding) when gamma_opt = 0 */
    int gamma_cap;       /* the largest γ searched (see the table rule below) */
    int at_cap;          /* gamma_cap is among the ties: a larger cap might find a better γ */
    size_t n_ties;       /* how many γ are within SL_THEORY_TIE_RTOL of factor_best, gamma_best included */
    int *ties;           /* (n_ties) those γ, ascending; owned, freed by sl_theory_optimum_free */
} sl_theory_optimum;

/* Searches γ = 1..gamma_cap for the largest E[N]/(γc + v(γ+1)). With a table cost model the search
 * stops before the first γ whose γ+1 is missing from the table (gamma_cap then reports where it
 * stopped); a table without n = 2 is an error. */
int sl_theory_optimal_gamma(double alpha, double c, const sl_theory_vcost *vc, int gamma_cap,
                            sl_theory_optimum *out);
/* Position-dependent: γ drafts use β_1..β_γ, so the search runs over 1..min(gamma_cap, n_beta). */
int sl_theory_beta_optimal_gamma(const double *beta /* (n_beta) */, int n_beta, double c,
                                 const sl_theory_vcost *vc, int gamma_cap, sl_theory_optimum *out);
void sl_theory_optimum_free(sl_theory_optimum *o);

/* ---- cost of drafting and verifying ---- */

/* draft_steps·c + verify: the cost in target steps of draft_steps draft steps and a verification
 * costing verify. For one iteration with γ drafts it is γc + v(γ+1), the denominator of the walltime
 * factor (sl_theory_walltime_factor_v); summed over a replay it is the replay's total cost from its
 * total draft steps and verification cost. Replays and latency simulations call it with a
 * precomputed v(γ+1) (vtab) instead of evaluating the cost model per iteration. */
double sl_theory_iteration_cost(double draft_steps, double c, double verify);

#endif
