/*
 * sl_plot_make.h: `speclab plot` as one library call. A request names a kind, its inputs and its
 * options; sl_plot_make computes the result that kind reads and builds the figure from it:
 *
 *   theory-tokens, theory-speedup, theory-optimal-gamma, theory-ops   the closed forms (sl_theory)
 *   beta-hist, lenience, acceptance-position, acceptance-confidence, alpha-ci
 *                                  sl_analyze_file on each log (measure or run)
 *   mc-tokens                      sl_mc_run and sl_mc_predict on a synthetic family
 *   verify-power                   the χ² test's power (sl_stats_power_at_n)
 *   verify-qq                      sl_verify_uniformity on a synthetic family (exact sampler)
 *   run-speedup, run-chen          sl_run_report_file on each run log, one per γ
 *
 * then sets the request's title and key. The figure goes to sl_plot_render (sl_plot.h). Nothing
 * here prints; errors name the quantity ("gamma: ...", "family: ..."), never a flag.
 */
#ifndef SL_PLOT_MAKE_H
#define SL_PLOT_MAKE_H

#include <stddef.h>
#include <stdint.h>

#include "sl_mc.h"
#include "sl_plot.h"

/* A short list of values: a --gamma, --c, --tv or --lenience sweep. */
typedef struct {
    size_t n;
    double v[SL_PLOT_THEORY_MAX];
} sl_plot_list;

typedef struct {
    const char *kind;              /* one of sl_plot_kind_name(0..) */
    size_t n_inputs;
    const char *const *inputs;     /* (n_inputs) log files, each "FILE" or "NAME=FILE": NAME labels the
                                      log (default: the file's base name); an existing file whose
                                      name holds '=' is taken whole */
    const char *title;             /* NULL: the kind's title */
    int key_set;                   /* 1: key replaces the kind's key placement */
    sl_plot_key key;

    /* closed forms; an empty list takes the kind's default (sl_plot_theory_config_init) */
    sl_plot_list gamma;            /* theory kinds: one curve each; mc-tokens: one value (default 4) */
    sl_plot_list c;                /* theory-speedup: one value (default 0.05); theory-optimal-gamma: curves */
    double c_hat;                  /* theory-ops (default 0) */
    double v_linear;               /* v(n) = 1 + v_linear (n - 1); NaN: v = 1 (default) */
    size_t points;                 /* α grid points on [0, 1] (default 201) */
    int gamma_cap;                 /* theory-optimal-gamma: largest γ searched (default 20) */

    /* logs and run logs */
    const char *run_path;          /* log kinds: a run log of the pair of the one measure log, or NULL */
    size_t gamma_max;              /* log kinds: draft positions 1..gamma_max (default 12) */
    size_t boot;                   /* bootstrap resamples; 0: the kind's default, 1000 for the log kinds
                                      (speclab analyze), 2000 for the run kinds (speclab run) */
    double ci;                     /* CI level (default 0.95) */
    sl_plot_list lenience;         /* lenience: grid in (0, 1] (default: sl_analyze's) */
    uint64_t seed;                 /* bootstrap and Monte Carlo draws (default 1); speclab run's report
                                      draws its bootstrap from the run's --seed */

    /* Monte Carlo (mc-tokens): the family's fields as `speclab mc` takes them; gamma above */
    int family_set;                /* 0: refused, the family must be named */
    sl_mc_family_params family;    /* default SL_MC_FAMILY_DEFAULT; its seed is replaced by seed */
    int vocab_set;                 /* 0: the kind's vocabulary (mc-tokens the family's 256, verify-qq 8) */
    long iterations;               /* 0: the kind's default (mc-tokens 100000, verify-qq 20000) */
    double confidence;             /* of the Wilson intervals (default 0.95) */

    /* verification (verify-power) */
    sl_plot_list tv;               /* TV deviations (default 0.005, 0.01, 0.02, 0.05) */
    double df, level;              /* default 7 and 0.01 (speclab verify's) */
    double n_min, n_max;           /* samples axis (default 10 to 1e7) */
    /* verifier self-calibration (verify-qq): family, vocab, gamma (one value, default 3, as speclab
       verify's), iterations per replication and seed above; seeds seed .. seed + R - 1 */
    size_t replications;           /* R (default 200) */
} sl_plot_request;

/* The defaults above; kind and inputs unset. */
void sl_plot_request_init(sl_plot_request *rq);

/* The kinds, in the order --help lists them: i = 0, 1, ... until NULL. */
const char *sl_plot_kind_name(size_t i);

/* Computes the kind's result and builds *out (free with sl_plot_figure_free). On failure *out
 * holds nothing to free. SL_EINPUT: an unknown kind, inputs the kind does not take or lacks,
 * values out of range, unreadable logs; SL_EFAIL: memory, I/O. */
int sl_plot_make(const sl_plot_request *rq, sl_plot_figure *out);

#endif
