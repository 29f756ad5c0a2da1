/*
 * sl_recommend.h: the gamma to deploy for a model pair, with its expected speedup, a CI and the
 * latency of an answer (`speclab recommend`): one answer from whatever the user has measured.
 *
 * Inputs (analysis/README.md, "Choosing gamma"):
 *   - a measure log: tokens per iteration at every gamma by the exact sequential replay along the
 *     logged text (analysis/sl_replay.h), CI by bootstrap over sequences;
 *   - run logs (one gamma or a sweep, `run --gamma 1:4`): the speedup measured at each gamma they
 *     decoded, and the cost of an iteration the decode paid at that gamma;
 *   - a cost table (`costs`): a run log or a CSV (gamma, cost_per_iteration | gamma, c, v[, overhead])
 *     giving the cost of one iteration in plain-decoding token times at each gamma; other gammas
 *     from a least-squares line a + b gamma over the table (its error is reported), or from the
 *     log's calibration scaled to the one measured gamma;
 *   - or given costs (c and v(n)): iteration cost gamma c + v(gamma + 1).
 * The predicted speedup at gamma is tokens per iteration / cost per iteration, with a CI from
 * independent bootstraps of both (sequences of the measure log, prompts of the cost run). A
 * speedup measured at some gamma outranks a prediction: the pick is then the best measured gamma,
 * and every gamma with both shows the prediction's error. The latency table uses the same numbers
 * as the pick: its mean is answer / expected speedup, its spread comes from simulations of the
 * replay. Other deployment settings (thread counts, machines: their cost tables) get the chosen
 * gamma's speedup there; batch sizes without a measured cost table are reported as not measured.
 */
#ifndef SL_RECOMMEND_H
#define SL_RECOMMEND_H

#include <stddef.h>
#include <stdint.h>

#include "sl_table.h"
#include "sl_theory.h"

#define SL_RECOMMEND_GMAX 64
#define SL_RECOMMEND_MAX_LOGS 16

typedef struct {
    const char *path;                /* one log (used when n_paths is 0) */
    const char *const *paths;        /* (n_paths) at most one measure log and any run logs */
    size_t n_paths;
    const char *costs;               /* cost table: run log or CSV; NULL: the first run log given */
    const char *const *deploy;       /* (n_deploy) cost tables of other settings */
    size_t n_deploy;
    const size_t *batch;             /* (n_batch) batch sizes asked about */
    size_t n_batch;
    double c;                        /* given c (NaN: none); with vc, overrides every cost table */
    const sl_theory_vcost *vc;       /* given v(n) (NULL: v == 1 when c is given) */
    size_t gamma_max;                /* search gamma in 1..gamma_max (default 12) */
    size_t answer_tokens;            /* latency answer length; 0 = the measure log's tokens per sequence, else 128 */
    size_t n_sims;                   /* latency simulations (default 10000) */
    size_t n_boot;                   /* bootstrap resamples (default 1000) */
    double ci_level;                 /* default 0.95 */
    uint64_t seed;                   /* default 1 */
} sl_recommend_config;

void sl_recommend_config_init(sl_recommend_config *cfg);

#define SL_RECOMMEND_MAX_CAND 6 /* gamma 0, 1, g-1, g, g+1, g+2 */

typedef enum { SL_RECOMMEND_REPLAY = 0, SL_RECOMMEND_EQ1 = 1 } sl_recommend_method;

/* Everything known at one gamma. */
typedef struct {
    int gamma;
    double tokens_per_iteration, tpi_lo, tpi_hi;
    const char *tpi_method;        /* "sequential replay", "measured", "Equation 1 at alpha_hat" */
    double cost, cost_lo, cost_hi; /* one iteration, in plain-decoding token times */
    const char *cost_source;       /* "measured at this gamma", "fit a + b gamma", "calibration scaled", "given c, v(n)" */
    double predicted, pred_lo, pred_hi;
    double measured, meas_lo, meas_hi; /* NaN when no run log decoded this gamma */
    double prediction_error;           /* predicted / measured - 1 (NaN without both) */
} sl_recommend_gamma;

/* The latency spread of one candidate gamma, in plain-decoding token times. */
typedef struct {
    int gamma;
    double p50, p90, p99, mean;
} sl_recommend_latency;

/* The chosen gamma at another setting. */
typedef struct {
    char setting[192];   /* "threads=2 (FILE)", "batch=8", ... */
    int gamma;           /* the recommended gamma (of the main setting) */
    double speedup, lo, hi; /* predicted there (NaN: not measured) */
    double measured;     /* measured there at gamma when the table is a run log that decoded it */
    int best_gamma;      /* the best gamma at that setting */
    double best_speedup;
    char note[256];
} sl_recommend_deploy;

typedef struct {
    char *path;              /* owned: the logs, comma-separated */
    double alpha;            /* measure log: mean min(1, q/p) of the logged tokens (estimates mean beta); run logs: alpha_hat */
    double c;                /* the draft cost c behind the chosen gamma's cost (NaN when the table has none) */
    const char *c_source;    /* static: "--c", "run log", "cost table" */
    int gamma;               /* the recommended gamma; 0 = plain decoding */
    int at_cap;              /* gamma_max is the best: a larger search might do better */
    double speedup;          /* the expected speedup at gamma (measured when measured, else predicted) */
    double speedup_lo, speedup_hi;
    double ci_level;
    sl_recommend_method method;
    const char *basis;       /* "measured" or "predicted" */
    char inputs[768];        /* which inputs gave what, in words */
    double prediction_max_abs_error; /* over the gammas with both (NaN when none) */
    size_t answer_tokens;
    size_t n_gamma;
    sl_recommend_gamma per[SL_RECOMMEND_GMAX]; /* (n_gamma) gamma = 1..n_gamma */
    size_t n_cand;
    sl_recommend_latency cand[SL_RECOMMEND_MAX_CAND]; /* (n_cand) ascending gamma, distinct, in 0..gamma_max */
    size_t n_deploy;
    sl_recommend_deploy *deploy; /* (n_deploy) owned */
    size_t n_notes;
    char notes[8][256];
} sl_recommend_result;

/* Reads the inputs and decides. SL_EINPUT names the quantity ("c: ...", "costs: FILE:LINE ..."). */
int sl_recommend_run(const sl_recommend_config *cfg, sl_recommend_result *res);
void sl_recommend_result_free(sl_recommend_result *res);

/* The method in words, as the report prints it. */
const char *sl_recommend_method_text(sl_recommend_method m);

/* Tables "recommendation" (one row), "per_gamma", "latency" (one row per candidate), "deployment"
 * (when asked) and "notes"; the caller frees each table and the array. */
int sl_recommend_report(const sl_recommend_result *res, sl_table ***tables, size_t *n);

#endif
