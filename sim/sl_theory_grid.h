/*
 * sl_theory_grid.h: the closed forms of THEORY.md (sl_theory) evaluated over a grid of
 * (alpha, gamma, c, c_hat), or for one position-dependent acceptance vector beta_1..beta_G, with an
 * optional search for the optimal gamma (`speclab theory`).
 *
 * The grid is every combination, alpha slowest and c_hat fastest. Every value is computed by an
 * sl_theory_* function; nothing here restates a formula. The result is plain arrays (the core does
 * not build tables): analysis/sl_theory_report renders it.
 */
#ifndef SL_THEORY_GRID_H
#define SL_THEORY_GRID_H

#include <stddef.h>

#include "sl_theory.h"

/* A grid larger than this is almost certainly a typo in a range. */
#define SL_THEORY_GRID_MAX_POINTS 1000000
/* Var N (and the pmf) at one point sums over its gamma + 1 outcomes, so a grid's work is the sum
 * of gamma + 1 over its points: quadratic in the length of a gamma range (1:1000000 would need
 * 5e11 terms, hours). A grid that needs more terms than this (about a second) is refused before
 * anything is computed. */
#define SL_THEORY_GRID_MAX_TERMS 200000000.0

typedef struct {
    const double *alpha;       /* (n_alpha) each in [0, 1]; NULL with beta */
    size_t n_alpha;
    const double *gamma;       /* (n_gamma) integers in [1, SL_THEORY_GAMMA_MAX]; NULL with optimal or beta */
    size_t n_gamma;
    const double *c;           /* (n_c) draft step / target step, >= 0; none: {0}, free drafting */
    size_t n_c;
    const double *c_hat;       /* (n_c_hat) draft / target operations per token, >= 0; none: {0} */
    size_t n_c_hat;
    const double *beta;        /* (n_beta) beta_1..beta_G instead of alpha and gamma (gamma = G), or NULL */
    size_t n_beta;
    const sl_theory_vcost *vc; /* verification cost v(n); NULL: v == 1 (Theorem 3.8) */
    int optimal;               /* search gamma = 1..gamma_cap for the largest walltime factor */
    int gamma_cap;             /* cap of that search; 0: SL_THEORY_GAMMA_CAP_DEFAULT (only with optimal) */
    int pmf;                   /* also P(N = k), k = 1..gamma+1, per point */
} sl_theory_grid_config;

/* One combination. With optimal, gamma is the best gamma (opt.gamma_best) and every quantity is
 * evaluated there. */
typedef struct {
    double alpha;              /* NaN with beta */
    int gamma;
    double c, c_hat;
    double v_verify;           /* v(gamma + 1) of the cost model (1 without one) */
    double expected_tokens;    /* E[N] */
    double var_tokens;         /* Var N */
    double walltime_factor_v1; /* Theorem 3.8: E[N] / (gamma c + 1) */
    double walltime_factor;    /* E[N] / (gamma c + v(gamma + 1)) */
    double ops_factor;         /* Theorem 3.11 */
    int alpha_gt_c;            /* Corollary 3.9 (with beta: beta_1 > c) */
    double cor39_bound;        /* (1 + alpha) / (1 + c) */
    sl_theory_optimum opt;     /* with optimal: gamma_opt, factor_opt, cap, ties (owned); zeroed otherwise */
    double *pmf;               /* (gamma + 1) P(N = k) for k = 1..gamma+1 with pmf, else NULL; owned */
} sl_theory_grid_point;

typedef struct {
    double *beta;              /* (n_beta) copy of the config's beta, or NULL; owned */
    size_t n_beta;
    int optimal, pmf;
    size_t n_points;
    sl_theory_grid_point *points; /* (n_points) alpha slowest, then gamma, c, c_hat; owned */
} sl_theory_grid_result;

/* Checks every value and combination first (one message naming the quantity, SL_EINPUT, nothing
 * computed), then evaluates the grid. */
int sl_theory_grid_run(const sl_theory_grid_config *cfg, sl_theory_grid_result *res);
void sl_theory_grid_result_free(sl_theory_grid_result *res);

#endif
