/*
 * sl_plot.h: figures of speclab's results, drawn by gnuplot through a pipe.
 *
 * A figure is a plain model (sl_plot_figure: title, axis labels with units, log flags, ranges and
 * a list of series with their style, or a row of panels that are figures of their own) built by
 * one function per kind from the same result struct the tables read (sl_analyze_result,
 * sl_mc_result, sl_run_report, the closed forms of sl_theory). sl_plot_make.h computes the result
 * and picks the builder for a kind named on the command line. The renderer writes three files
 * next to each other: the figure, FILE.dat (the numbers, one block per series, whitespace columns
 * under a header comment) and FILE.gp (the gnuplot script, which reads FILE.dat by its relative
 * name, so `cd DIR && gnuplot FILE.gp` redraws the figure). The stem FILE is the output path
 * without its extension (fig.png -> fig.dat, fig.gp).
 *
 * House style (plots/README.md): single-column (3.3 in) or full-width (6.8 in) figures, sans
 * fonts at 8-9 pt, the Okabe-Ito colour-blind-safe palette, error bars or bands wherever a number
 * carries a CI, and a key placed in the corner the data leave empty.
 *
 * What this module refuses to be: a plotting library. It knows the handful of styles speclab's
 * figures use, and gnuplot does the drawing. It never prints; errors come back as SL_EINPUT (a
 * figure the caller must fix, gnuplot missing or failing) or SL_EFAIL (I/O, memory).
 */
#ifndef SL_PLOT_H
#define SL_PLOT_H

#include <stddef.h>
#include <stdint.h>

#include "sl_analyze.h"
#include "sl_mc.h"
#include "sl_run.h"
#include "sl_theory.h"
#include "sl_verify.h"

/* ---- the figure model ---- */

typedef enum {
    SL_PLOT_LINES = 0,
    SL_PLOT_POINTS,
    SL_PLOT_LINESPOINTS,
    SL_PLOT_STEPS,       /* piecewise constant: y holds from x[i] to x[i+1] */
    SL_PLOT_ERRORBARS,   /* points with vertical bars from y_lo to y_hi */
    SL_PLOT_BAND,        /* a line with a filled band from y_lo to y_hi */
    SL_PLOT_BOXES,       /* histogram bars centred on x, box_width wide */
    SL_PLOT_DOTWHISKER,  /* one large dot per category with its interval (forest plot) */
    SL_PLOT_STYLE_COUNT
} sl_plot_style;

typedef enum {
    SL_PLOT_KEY_TOP_LEFT = 0,
    SL_PLOT_KEY_TOP_RIGHT,
    SL_PLOT_KEY_BOTTOM_LEFT,
    SL_PLOT_KEY_BOTTOM_RIGHT,
    SL_PLOT_KEY_OUTSIDE,  /* right of the plot area */
    SL_PLOT_KEY_BELOW,    /* under the x axis, horizontal */
    SL_PLOT_KEY_OFF,
    SL_PLOT_KEY_COUNT
} sl_plot_key;

typedef struct {
    char name[128];       /* the key entry; "" keeps the series out of the key */
    sl_plot_style style;
    size_t n;
    double *x;            /* (n) owned */
    double *y;            /* (n) owned */
    double *y_lo, *y_hi;  /* (n) owned; NULL unless the style draws an interval */
    int colour;           /* index into the palette; -1: the series' position among coloured series */
    int dashed;           /* lines: a dashed stroke (the second form of the same quantity) */
    double box_width;     /* BOXES: bar width in x units (0: 1) */
} sl_plot_series;

#define SL_PLOT_MAX_SERIES 32
#define SL_PLOT_MAX_XTICS 64
#define SL_PLOT_MAX_PANELS 4

typedef struct sl_plot_figure {
    char title[256];
    char xlabel[128], ylabel[128];  /* each with its unit in parentheses */
    char xcol[32], ycol[32];        /* column names in FILE.dat: THEORY.md's words (alpha, expected_tokens) */
    int xlog, ylog;
    double xmin, xmax, ymin, ymax;  /* NaN: gnuplot chooses */
    sl_plot_key key;
    size_t n_xtics;                 /* categorical x axis (dot-and-whisker): labels at x = 1..n */
    char xtic[SL_PLOT_MAX_XTICS][64];
    double xtic_step;               /* > 0: x tics every xtic_step (an integer axis such as γ); 0: gnuplot's */
    double width_in;                /* the width the kind is drawn for (SL_PLOT_WIDTH_*); 0: a column */
    size_t n_series;
    sl_plot_series series[SL_PLOT_MAX_SERIES];
    /* A figure of panels (gnuplot multiplot): n_panels > 0 figures of their own, each with its
     * title, axes, key and series, drawn side by side under this title (one below the other in a
     * column figure). Such a figure holds no series itself; FILE.dat holds every panel's blocks
     * in order, numbered across panels. */
    size_t n_panels;
    struct sl_plot_figure *panel;   /* (SL_PLOT_MAX_PANELS) owned; NULL until a panel is added */
} sl_plot_figure;

/* An empty figure: no series, no panels, automatic ranges, key top left. */
void sl_plot_figure_init(sl_plot_figure *f);
/* sl_plot_figure_init, then the axis labels (with units) and the data file's column names. */
void sl_plot_figure_begin(sl_plot_figure *f, const char *xlabel, const char *ylabel, const char *xcol, const char *ycol);
/* Frees every series' arrays and every panel; the figure can be reused after sl_plot_figure_init. */
void sl_plot_figure_free(sl_plot_figure *f);
/* Appends a series of n points (arrays allocated, zeroed; y_lo/y_hi only when with_ci) and
 * returns it, or NULL (error recorded) when the figure is full or memory runs out. */
sl_plot_series *sl_plot_add_series(sl_plot_figure *f, const char *name, sl_plot_style style, size_t n, int with_ci);
/* Appends an empty panel (sl_plot_figure_init) to f and returns it, or NULL (error recorded) when
 * f already has SL_PLOT_MAX_PANELS, holds series of its own, or memory runs out. */
sl_plot_figure *sl_plot_add_panel(sl_plot_figure *f);
/* Checks a figure before drawing: at least one series, finite x and y (NaN y is a gap), intervals
 * present where the style needs them, positive values on log axes; for a figure of panels, each
 * panel so. SL_EINPUT with the series named. */
int sl_plot_figure_check(const sl_plot_figure *f);

/* For kind builders: the top corner whose side (the outer 35% of the x range) has the lower data;
 * and room above the data for a key of n_key lines inside the plot (ymax raised by a line's worth
 * per entry above the tallest value or interval). */
sl_plot_key sl_plot_auto_key(const sl_plot_figure *f);
void sl_plot_headroom(sl_plot_figure *f, size_t n_key);

const char *sl_plot_style_name(sl_plot_style s);
int sl_plot_key_parse(const char *s, sl_plot_key *out);
const char *sl_plot_key_name(sl_plot_key k);

/* ---- rendering ---- */

typedef enum { SL_PLOT_PNG = 0, SL_PLOT_SVG, SL_PLOT_PDF, SL_PLOT_DUMB } sl_plot_term;

typedef struct {
    const char *out;       /* the figure's path; "-" draws on stdout with the dumb terminal */
    double width_in;       /* 3.3 (column) or 6.8 (full); height follows the width */
    int term_dumb;         /* 1: the dumb (text) terminal whatever the extension */
    const char *gnuplot;   /* the binary; NULL: $GNUPLOT, else "gnuplot" on PATH */
    const char *command;   /* recorded in the .gp header: how the figure was made (may be NULL) */
} sl_plot_render_opts;

#define SL_PLOT_WIDTH_COLUMN 3.3
#define SL_PLOT_WIDTH_FULL 6.8

void sl_plot_render_opts_init(sl_plot_render_opts *o);
/* "column" or "full" -> inches. */
int sl_plot_width_parse(const char *s, double *width_in);
/* The terminal for a path: .png, .svg, .pdf (any case), "-" is dumb; anything else SL_EINPUT. */
int sl_plot_term_for(const char *path, int term_dumb, sl_plot_term *out);

/* Draws f. For a file: writes FILE.dat, FILE.gp and the figure to temporary names in the figure's
 * directory, runs gnuplot on the script (its stdin a pipe, its working directory the figure's),
 * and renames all three into place only when gnuplot exits 0 and the figure is not empty. On any
 * failure every temporary file is removed, nothing existing is replaced, and the child has been
 * reaped. An existing FILE.dat or FILE.gp that speclab did not write is refused (SL_EINPUT).
 * For "-": the data go to a temporary file that is removed afterwards, and the text art to stdout.
 * Errors: SL_EINPUT (bad path, gnuplot cannot be run, gnuplot exits non-zero: its first error
 * line is in the message), SL_EFAIL (I/O, fork, memory). */
int sl_plot_render(const sl_plot_figure *f, const sl_plot_render_opts *o);

/* The data file's text and the script's text, for tests and for readers: *out is malloc'd.
 * data_name is the name the script reads, out_name the name it writes (NULL: stdout). */
int sl_plot_data_text(const sl_plot_figure *f, char **out);
int sl_plot_script_text(const sl_plot_figure *f, sl_plot_term term, double width_in, const char *data_name,
                        const char *out_name, const char *command, char **out);

/* ---- kinds: each builds a figure from a result (or a pure configuration) ---- */

/* The closed-form figures of Leviathan et al. (values from sl_theory). */
#define SL_PLOT_THEORY_MAX 16
typedef struct {
    size_t n_gamma;
    int gamma[SL_PLOT_THEORY_MAX];   /* one curve each (tokens, speedup, ops) */
    size_t n_c;
    double c[SL_PLOT_THEORY_MAX];    /* optimal-gamma: one curve each; speedup: c[0] */
    double c_hat;                    /* ops: draft ops per token / target ops per token */
    const sl_theory_vcost *vc;       /* speedup: v(n); NULL: v == 1 (Theorem 3.8) */
    size_t n_alpha;                  /* grid points on [0, 1], both ends included (>= 2) */
    int gamma_cap;                   /* optimal-gamma: largest gamma searched */
} sl_plot_theory_config;

/* Defaults (plots/README.md): gamma 1,2,3,5,7,10; c 0.01,0.02,0.05,0.1,0.2 (speedup: c = 0.05);
 * c_hat 0; 201 points; cap 20 (the optimal-gamma curves stop where gamma reaches it). */
void sl_plot_theory_config_init(sl_plot_theory_config *cfg);

/* E[N] vs alpha, one curve per gamma (Leviathan et al., Figure 2). */
int sl_plot_theory_tokens(const sl_plot_theory_config *cfg, sl_plot_figure *out);
/* Walltime improvement vs alpha, one curve per gamma at c[0] (Theorem 3.8, or E[N]/(gamma c + v(gamma+1))). */
int sl_plot_theory_speedup(const sl_plot_theory_config *cfg, sl_plot_figure *out);
/* Optimal gamma vs alpha, one step curve per c (Figure 3); alpha where no gamma beats plain decoding is 0. */
int sl_plot_theory_optimal_gamma(const sl_plot_theory_config *cfg, sl_plot_figure *out);
/* Operation factor vs alpha, one curve per gamma at c_hat (Theorem 3.11, Figure 4). */
int sl_plot_theory_ops(const sl_plot_theory_config *cfg, sl_plot_figure *out);

/* Log figures: res (n) analysed logs, names (n) their labels in the key. */
/* The beta histogram of each log, normalised to fractions of positions per bin, overlaid. */
int sl_plot_beta_hist(const sl_analyze_result *res, const char *const *names, size_t n, sl_plot_figure *out);
/* alpha(l) in both forms (standard, temperature-0) per log; needs logs with full distributions. */
int sl_plot_lenience(const sl_analyze_result *res, const char *const *names, size_t n, sl_plot_figure *out);
/* Acceptance per draft position, conditional and unconditional, from the replay; observed (with
 * Wilson intervals at the log's CI level) when a run log is part of the result. */
int sl_plot_acceptance_position(const sl_analyze_result *res, const char *const *names, size_t n,
                                sl_plot_figure *out);
/* Mean beta per draft-confidence (max q) bin; empty bins are left out. */
int sl_plot_acceptance_confidence(const sl_analyze_result *res, const char *const *names, size_t n,
                                  sl_plot_figure *out);
/* alpha with its bootstrap CI per log, dot-and-whisker, one category per log. */
int sl_plot_alpha_ci(const sl_analyze_result *res, const char *const *names, size_t n, sl_plot_figure *out);

/* Monte Carlo: the tokens-per-iteration histogram (fractions with Wilson intervals at level
 * 1 - a) against the predicted pmf, i.i.d. (Equation 1) and for the layout (position-dependent). */
int sl_plot_mc_tokens(const sl_mc_result *res, const sl_mc_prediction *pred, double a, sl_plot_figure *out);

/* Verification: the power guaranteed against any alternative at TV >= delta[i], vs the number of
 * samples n (log axis from n_lo to n_hi), at level a with df degrees of freedom (sl_stats_power_at_n). */
typedef struct {
    size_t n_delta;
    double delta[SL_PLOT_THEORY_MAX];
    double df, level;
    double n_lo, n_hi;
    size_t n_points;
} sl_plot_power_config;

void sl_plot_power_config_init(sl_plot_power_config *cfg); /* delta 0.005,0.01,0.02,0.05; df 7; level 0.05 */
int sl_plot_verify_power(const sl_plot_power_config *cfg, sl_plot_figure *out);

/* The verifier's self-calibration (sl_verify_uniformity): for each test with data, its m sorted
 * p-values against the uniform quantiles (i - 0.5)/m, i = 1..m (points, keyed with the test's KS
 * p-value); the diagonal y = x (dashed); and the pointwise 95% band of the i-th order statistic of
 * m uniforms, the Beta(i, m - i + 1) quantiles 0.025 and 0.975 (one band per distinct m, filled,
 * its line on the diagonal). Tests with fewer than 2 p-values are left out. */
int sl_plot_verify_qq(const sl_verify_uniformity_result *res, sl_plot_figure *out);

/* Run logs (sl_plot_run.c): rep (n) the reports of run logs of one pair at different γ (one log
 * per γ, in any order; two logs with the same γ are refused), names (n) their labels in messages.
 * The x axis is γ; every value is a field of sl_run_report, or a field scaled to milliseconds or
 * divided by the report's iteration count. */
/* Measured speedup with its bootstrap CI (error bars) against Theorem 3.8 and the generalised
 * E[N]/(γc + v(γ+1)) at α̂ (lines, with their CI as a band when the reports carry one), and the
 * no-speculation line at 1. */
int sl_plot_run_speedup(const sl_run_report *rep, const char *const *names, size_t n, sl_plot_figure *out);
/* Chen et al. (2023), Figure 1 layout, three panels against γ: time per token (ms), speculative
 * and autoregressive; tokens per iteration: measured with its CI, E[N] at α̂ (Equation 1) with
 * its CI, and drafts accepted per iteration; time per iteration (ms): total, drafting,
 * verification. Drawn at full width by default (width_in). */
int sl_plot_run_chen(const sl_run_report *rep, const char *const *names, size_t n, sl_plot_figure *out);

#endif
