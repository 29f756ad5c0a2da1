/*
 * sl_recommend.h: the gamma to deploy for a logged model pair, its expected speedup with a CI, and
 * the latency spread of an answer (`speclab recommend`).
 *
 * The deployment is a measure or run log plus the draft/target cost ratio c and the verification
 * cost v(n), given in the config or measured in a run log. The chosen gamma maximises the expected
 * walltime factor E[N] / (gamma c + v(gamma + 1)) (sl_theory): with E[N] replayed from the logged
 * beta sequences when the log has replay windows (a measure log; CI: bootstrap over sequences),
 * else Equation 1 at alpha (a run log; CI: alpha's bootstrap CI mapped through the factor, which
 * is increasing in alpha). The latency of an answer is simulated over the logged betas for the
 * chosen gamma and its neighbours (sl_analyze_latency). gamma 0 means plain autoregressive decoding.
 */
#ifndef SL_RECOMMEND_H
#define SL_RECOMMEND_H

#include <stddef.h>
#include <stdint.h>

#include "sl_table.h"
#include "sl_theory.h"

typedef struct {
    const char *path;          /* the measure or run log */
    double c;                  /* deployment c; NaN: the run log's measured c (an error when it has none) */
    const sl_theory_vcost *vc; /* deployment v(n); NULL: the run log's, else v == 1 */
    size_t gamma_max;          /* search gamma in 1..gamma_max (default 12) */
    size_t answer_tokens;      /* answer length of the latency simulation (default 128) */
    size_t n_sims;             /* latency simulations (default 10000) */
    size_t n_boot;             /* bootstrap resamples (default 1000) */
    double ci_level;           /* default 0.95 */
    uint64_t seed;             /* default 1 */
} sl_recommend_config;

void sl_recommend_config_init(sl_recommend_config *cfg);

#define SL_RECOMMEND_MAX_CAND 6 /* gamma 0, 1, g-1, g, g+1, g+2 */

typedef enum { SL_RECOMMEND_REPLAY = 0, SL_RECOMMEND_EQ1 = 1 } sl_recommend_method;

/* The latency spread of one candidate gamma, in target-step units. */
typedef struct {
    int gamma;
    double p50, p90, p99, mean;
} sl_recommend_latency;

typedef struct {
    char *path;              /* owned copy of the config's path */
    double alpha;            /* mean beta of the log */
    double c;                /* the deployment c used */
    const char *c_source;    /* "--c" (given) or "run log" (static string) */
    int gamma;               /* the recommended gamma; 0 = plain decoding */
    int at_cap;              /* gamma_max is among the tied best: a larger search might do better */
    double speedup;          /* the expected walltime factor at gamma (1 at gamma 0) */
    double speedup_lo, speedup_hi; /* its CI at ci_level */
    double ci_level;
    sl_recommend_method method;
    size_t answer_tokens;
    size_t n_cand;
    sl_recommend_latency cand[SL_RECOMMEND_MAX_CAND]; /* (n_cand) ascending gamma, distinct, in 0..gamma_max */
} sl_recommend_result;

/* Runs the analysis and the latency simulation. SL_EINPUT when the log has no measured costs and no
 * c is given, or holds no beta values; errors name the quantity ("c: ..."). */
int sl_recommend_run(const sl_recommend_config *cfg, sl_recommend_result *res);
void sl_recommend_result_free(sl_recommend_result *res);

/* The method in words, as the report prints it. */
const char *sl_recommend_method_text(sl_recommend_method m);

/* Two tables, "recommendation" (one row) and "latency" (one row per candidate); the caller frees
 * each table and the array. */
int sl_recommend_report(const sl_recommend_result *res, sl_table ***tables, size_t *n);

#endif
