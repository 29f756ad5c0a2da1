/*
 * sl_plot_kinds.c: one figure builder per kind (sl_plot.h). Each reads a result struct (or a
 * pure configuration for the closed forms) and fills an sl_plot_figure; none computes a number
 * that the library already computes elsewhere: the closed forms come from sl_theory, the log
 * figures from sl_analyze_result, the Monte Carlo figure from sl_mc_result and sl_mc_predict,
 * the intervals from sl_stats.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <gsl/gsl_cdf.h>

#include "sl_common.h"
#include "sl_plot.h"
#include "sl_stats.h"

/* The key goes to the top corner whose side (the outer 35% of the x range) has the lower data. */
sl_plot_key sl_plot_auto_key(const sl_plot_figure *f)
{
    double xlo = INFINITY, xhi = -INFINITY;
    for (size_t i = 0; i < f->n_series; i++)
        for (size_t k = 0; k < f->series[i].n; k++) {
            xlo = fmin(xlo, f->series[i].x[k]);
            xhi = fmax(xhi, f->series[i].x[k]);
        }
    if (!(xhi > xlo)) return SL_PLOT_KEY_TOP_RIGHT;
    double left = -INFINITY, right = -INFINITY, w = 0.35 * (xhi - xlo);
    for (size_t i = 0; i < f->n_series; i++) {
        const sl_plot_series *s = &f->series[i];
        for (size_t k = 0; k < s->n; k++) {
            double y = s->y_hi ? s->y_hi[k] : s->y[k];
            if (isnan(y)) continue;
            if (s->x[k] <= xlo + w) left = fmax(left, y);
            if (s->x[k] >= xhi - w) right = fmax(right, y);
        }
    }
    return left <= right ? SL_PLOT_KEY_TOP_LEFT : SL_PLOT_KEY_TOP_RIGHT;
}

/* Room above the data for a key of n_key lines inside the plot (histograms): the y range ends a
 * line's worth per entry above the tallest bar or interval. */
void sl_plot_headroom(sl_plot_figure *f, size_t n_key)
{
    double top = 0;
    for (size_t i = 0; i < f->n_series; i++)
        for (size_t k = 0; k < f->series[i].n; k++) {
            double y = f->series[i].y_hi ? f->series[i].y_hi[k] : f->series[i].y[k];
            if (!isnan(y)) top = fmax(top, y);
        }
    if (top > 0) f->ymax = top * (1.08 + 0.09 * (double)n_key);
}

/* ---- closed forms ---- */

void sl_plot_theory_config_init(sl_plot_theory_config *cfg)
{
    static const int g[] = {1, 2, 3, 5, 7, 10};
    static const double c[] = {0.01, 0.02, 0.05, 0.1, 0.2};
    memset(cfg, 0, sizeof *cfg);
    cfg->n_gamma = sizeof g / sizeof g[0];
    memcpy(cfg->gamma, g, sizeof g);
    cfg->n_c = sizeof c / sizeof c[0];
    memcpy(cfg->c, c, sizeof c);
    cfg->c_hat = 0;
    cfg->vc = NULL;
    cfg->n_alpha = 201;
    cfg->gamma_cap = 20;
}

static int check_theory(const sl_plot_theory_config *cfg, int need_gamma, int need_c)
{
    if (cfg->n_alpha < 2 || cfg->n_alpha > 100001)
        return sl_fail(SL_EINPUT, "points: %zu alpha values; expected 2 to 100001", cfg->n_alpha);
    if (need_gamma && (cfg->n_gamma == 0 || cfg->n_gamma > SL_PLOT_THEORY_MAX))
        return sl_fail(SL_EINPUT, "gammas: %zu values; expected 1 to %d", cfg->n_gamma, SL_PLOT_THEORY_MAX);
    if (need_c && (cfg->n_c == 0 || cfg->n_c > SL_PLOT_THEORY_MAX))
        return sl_fail(SL_EINPUT, "cs: %zu values; expected 1 to %d", cfg->n_c, SL_PLOT_THEORY_MAX);
    int rc;
    for (size_t i = 0; need_gamma && i < cfg->n_gamma; i++)
        if ((rc = sl_theory_check_gamma("gamma", cfg->gamma[i]))) return rc;
    for (size_t i = 0; need_c && i < cfg->n_c; i++)
        if ((rc = sl_theory_check_cost("c", cfg->c[i]))) return rc;
    return sl_theory_check_cost("c_hat", cfg->c_hat);
}

static double alpha_at(const sl_plot_theory_config *cfg, size_t k)
{
    return k + 1 == cfg->n_alpha ? 1.0 : (double)k / (double)(cfg->n_alpha - 1);
}

static void theory_axes(sl_plot_figure *f, const char *title, const char *ylabel, const char *ycol)
{
    snprintf(f->title, sizeof f->title, "%s", title);
    snprintf(f->xlabel, sizeof f->xlabel, "α (expected acceptance rate)");
    snprintf(f->ylabel, sizeof f->ylabel, "%s", ylabel);
    snprintf(f->xcol, sizeof f->xcol, "alpha");
    snprintf(f->ycol, sizeof f->ycol, "%s", ycol);
    f->xmin = 0;
    f->xmax = 1;
}

/* A thin dashed black line at y = level across [x0, x1]: the plain-decoding reference. */
static int reference_line(sl_plot_figure *f, const char *name, double x0, double x1, double level)
{
    sl_plot_series *s = sl_plot_add_series(f, name, SL_PLOT_LINES, 2, 0);
    if (!s) return SL_EFAIL;
    s->x[0] = x0;
    s->x[1] = x1;
    s->y[0] = s->y[1] = level;
    s->colour = 6;
    s->dashed = 1;
    return SL_OK;
}

int sl_plot_theory_tokens(const sl_plot_theory_config *cfg, sl_plot_figure *out)
{
    int rc = check_theory(cfg, 1, 0);
    if (rc) return rc;
    sl_plot_figure_init(out);
    theory_axes(out, "Expected tokens per iteration, E[N] = (1 − α^(γ+1))/(1 − α)", "E[N] (tokens per iteration)",
                "expected_tokens");
    out->ymin = 0;
    for (size_t g = 0; g < cfg->n_gamma; g++) {
        char name[64];
        snprintf(name, sizeof name, "γ = %d", cfg->gamma[g]);
        sl_plot_series *s = sl_plot_add_series(out, name, SL_PLOT_LINES, cfg->n_alpha, 0);
        if (!s) goto fail;
        for (size_t k = 0; k < cfg->n_alpha; k++) {
            s->x[k] = alpha_at(cfg, k);
            if ((rc = sl_theory_expected_tokens(s->x[k], cfg->gamma[g], &s->y[k]))) goto fail;
        }
    }
    return SL_OK;
fail:
    sl_plot_figure_free(out);
    return rc ? rc : SL_EFAIL;
}

int sl_plot_theory_speedup(const sl_plot_theory_config *cfg, sl_plot_figure *out)
{
    int rc = check_theory(cfg, 1, 1);
    if (rc) return rc;
    sl_plot_figure_init(out);
    char title[256];
    snprintf(title, sizeof title, cfg->vc ? "Walltime improvement E[N]/(γc + v(γ+1)), c = %g" : "Walltime improvement (Theorem 3.8), c = %g",
             cfg->c[0]);
    theory_axes(out, title, "speedup (× autoregressive decoding)", "walltime_factor");
    out->ymin = 0;
    for (size_t g = 0; g < cfg->n_gamma; g++) {
        char name[64];
        snprintf(name, sizeof name, "γ = %d", cfg->gamma[g]);
        sl_plot_series *s = sl_plot_add_series(out, name, SL_PLOT_LINES, cfg->n_alpha, 0);
        if (!s) goto fail;
        for (size_t k = 0; k < cfg->n_alpha; k++) {
            s->x[k] = alpha_at(cfg, k);
            if ((rc = sl_theory_walltime_factor_v(s->x[k], cfg->gamma[g], cfg->c[0], cfg->vc, &s->y[k]))) goto fail;
        }
    }
    if ((rc = reference_line(out, "no speculation", 0, 1, 1))) goto fail;
    return SL_OK;
fail:
    sl_plot_figure_free(out);
    return rc ? rc : SL_EFAIL;
}

int sl_plot_theory_optimal_gamma(const sl_plot_theory_config *cfg, sl_plot_figure *out)
{
    int rc = check_theory(cfg, 0, 1);
    if (rc) return rc;
    if (cfg->gamma_cap < 1 || cfg->gamma_cap > SL_THEORY_GAMMA_MAX)
        return sl_fail(SL_EINPUT, "gamma_cap: %d is outside [1, %d]", cfg->gamma_cap, SL_THEORY_GAMMA_MAX);
    sl_plot_figure_init(out);
    char title[256];
    snprintf(title, sizeof title, "Optimal γ (%s); 0 = plain decoding", cfg->vc ? "E[N]/(γc + v(γ+1))" : "Theorem 3.8");
    theory_axes(out, title, "optimal γ (drafts per iteration)", "optimal_gamma");
    out->ymin = 0;
    int capped = 0;
    for (size_t j = 0; j < cfg->n_c; j++) {
        char name[64];
        snprintf(name, sizeof name, "c = %g", cfg->c[j]);
        sl_plot_series *s = sl_plot_add_series(out, name, SL_PLOT_STEPS, cfg->n_alpha, 0);
        if (!s) goto fail;
        for (size_t k = 0; k < cfg->n_alpha; k++) {
            sl_theory_optimum o;
            s->x[k] = alpha_at(cfg, k);
            if ((rc = sl_theory_optimal_gamma(s->x[k], cfg->c[j], cfg->vc, cfg->gamma_cap, &o))) goto fail;
            /* At the cap a larger search might find a larger gamma: the value is not the optimum. */
            s->y[k] = o.at_cap ? NAN : (double)o.gamma_opt;
            capped |= o.at_cap;
            sl_theory_optimum_free(&o);
        }
    }
    if (capped) {
        size_t len = strlen(out->title);
        snprintf(out->title + len, sizeof out->title - len, "; cut where γ reaches %d", cfg->gamma_cap);
    }
    return SL_OK;
fail:
    sl_plot_figure_free(out);
    return rc ? rc : SL_EFAIL;
}

int sl_plot_theory_ops(const sl_plot_theory_config *cfg, sl_plot_figure *out)
{
    int rc = check_theory(cfg, 1, 0);
    if (rc) return rc;
    sl_plot_figure_init(out);
    char title[256];
    snprintf(title, sizeof title, "Arithmetic operations (Theorem 3.11), ĉ = %g", cfg->c_hat);
    theory_axes(out, title, "operations (× autoregressive decoding)", "ops_factor");
    out->ymin = 0;
    out->key = SL_PLOT_KEY_TOP_RIGHT;
    for (size_t g = 0; g < cfg->n_gamma; g++) {
        char name[64];
        snprintf(name, sizeof name, "γ = %d", cfg->gamma[g]);
        sl_plot_series *s = sl_plot_add_series(out, name, SL_PLOT_LINES, cfg->n_alpha, 0);
        if (!s) goto fail;
        for (size_t k = 0; k < cfg->n_alpha; k++) {
            s->x[k] = alpha_at(cfg, k);
            if ((rc = sl_theory_ops_factor(s->x[k], cfg->gamma[g], cfg->c_hat, &s->y[k]))) goto fail;
        }
    }
    if ((rc = reference_line(out, "no speculation", 0, 1, 1))) goto fail;
    return SL_OK;
fail:
    sl_plot_figure_free(out);
    return rc ? rc : SL_EFAIL;
}

/* ---- log figures ---- */

static int check_logs(const sl_analyze_result *res, const char *const *names, size_t n, size_t per_log)
{
    if (!res || !names || n == 0) return sl_fail(SL_EINPUT, "logs: no analysed log to plot");
    if (n * per_log > SL_PLOT_MAX_SERIES)
        return sl_fail(SL_EINPUT, "logs: %zu logs; this figure holds at most %zu", n, SL_PLOT_MAX_SERIES / per_log);
    return SL_OK;
}

static int is_t0(const sl_analyze_result *r) { return r->meta.sampling.temperature == 0; }

/* "a.h5 (T = 0)" when the log was sampled at temperature 0: its p and q are one-hot. */
static void log_label(char *buf, size_t n, const char *name, const sl_analyze_result *r)
{
    snprintf(buf, n, "%s%s", name, is_t0(r) ? " (T = 0)" : "");
}

int sl_plot_beta_hist(const sl_analyze_result *res, const char *const *names, size_t n, sl_plot_figure *out)
{
    int rc = check_logs(res, names, n, 1);
    if (rc) return rc;
    sl_plot_figure_begin(out, "β (acceptance probability of a draft)", "fraction of positions", "beta_mid", "fraction");
    snprintf(out->title, sizeof out->title, "Distribution of β = Σ min(p, q) over logged positions");
    out->xmin = 0;
    out->xmax = 1;
    out->ymin = 0;
    for (size_t i = 0; i < n; i++) {
        const sl_analyze_result *r = &res[i];
        uint64_t tot = 0;
        for (size_t k = 0; k < r->n_hist; k++) tot += r->hist[k];
        if (r->n_hist == 0 || tot == 0) {
            sl_plot_figure_free(out);
            return sl_fail(SL_EINPUT, "%s: the log has no positions to histogram", names[i]);
        }
        char name[128];
        log_label(name, sizeof name, names[i], r);
        size_t len = strlen(name);
        snprintf(name + len, sizeof name - len, ", α = %.3f", r->alpha);
        sl_plot_series *s = sl_plot_add_series(out, name, SL_PLOT_BOXES, r->n_hist, 0);
        if (!s) {
            sl_plot_figure_free(out);
            return SL_EFAIL;
        }
        s->box_width = 1.0 / (double)r->n_hist;
        for (size_t k = 0; k < r->n_hist; k++) {
            s->x[k] = ((double)k + 0.5) / (double)r->n_hist;
            s->y[k] = (double)r->hist[k] / (double)tot;
        }
    }
    out->key = sl_plot_auto_key(out);
    sl_plot_headroom(out, n);
    return SL_OK;
}

int sl_plot_lenience(const sl_analyze_result *res, const char *const *names, size_t n, sl_plot_figure *out)
{
    int rc = check_logs(res, names, n, 2);
    if (rc) return rc;
    int any_t0 = 0;
    for (size_t i = 0; i < n; i++) {
        if (!res[i].have_dists || res[i].n_len == 0)
            return sl_fail(SL_EINPUT,
                           "%s: the lenience curve needs full distributions (a log measured with dist float32 or float16)",
                           names[i]);
        any_t0 |= is_t0(&res[i]);
    }
    sl_plot_figure_init(out);
    if (n == 1 && any_t0)
        snprintf(out->title, sizeof out->title, "Lenience curve α(l): a T = 0 log, both forms flat at β = %.3f", res[0].alpha);
    else
        snprintf(out->title, sizeof out->title, "Lenience curve α(l), standard and temperature-0 forms%s",
                 any_t0 ? " (T = 0: flat at β)" : "");
    snprintf(out->xlabel, sizeof out->xlabel, "lenience l (1 = exact speculative sampling)");
    snprintf(out->ylabel, sizeof out->ylabel, "α(l) (expected acceptance rate)");
    snprintf(out->xcol, sizeof out->xcol, "lenience");
    snprintf(out->ycol, sizeof out->ycol, "alpha");
    out->xmin = 0;
    out->xmax = 1;
    out->ymin = 0;
    out->ymax = 1.05;
    for (size_t i = 0; i < n; i++) {
        const sl_analyze_result *r = &res[i];
        for (int form = 0; form < 2; form++) {
            char name[128], label[96];
            log_label(label, sizeof label, names[i], r);
            snprintf(name, sizeof name, "%s%s%s", n > 1 ? label : "", n > 1 ? ": " : "",
                     form == 0 ? "standard Σ min(q, p/l)" : "temperature-0 form");
            sl_plot_series *s = sl_plot_add_series(out, name, SL_PLOT_LINESPOINTS, r->n_len, 0);
            if (!s) {
                sl_plot_figure_free(out);
                return SL_EFAIL;
            }
            s->colour = n > 1 ? (int)i : form;
            s->dashed = form == 1;
            for (size_t k = 0; k < r->n_len; k++) {
                s->x[k] = r->lenience[k];
                /* A T = 0 log: analyze leaves the curves out (flat at beta); the figure draws that
                 * flat line, and its title says why. */
                s->y[k] = is_t0(r) ? r->alpha : form == 0 ? r->alpha_l[k] : r->alpha_t0[k];
            }
        }
    }
    /* α(l) rises towards small l: the upper right is where the curves are lowest. */
    out->key = SL_PLOT_KEY_TOP_RIGHT;
    return SL_OK;
}

int sl_plot_acceptance_position(const sl_analyze_result *res, const char *const *names, size_t n, sl_plot_figure *out)
{
    int rc = check_logs(res, names, n, 4);
    if (rc) return rc;
    sl_plot_figure_init(out);
    int any_run = 0;
    for (size_t i = 0; i < n; i++) any_run |= res[i].have_run;
    snprintf(out->title, sizeof out->title, "Acceptance per draft position%s",
             any_run ? " (replayed; observed with Wilson CI)" : " (replay of the logged β)");
    snprintf(out->xlabel, sizeof out->xlabel, "draft position i (1 = first drafted token)");
    snprintf(out->ylabel, sizeof out->ylabel, "acceptance rate (fraction of drafts)");
    snprintf(out->xcol, sizeof out->xcol, "position");
    snprintf(out->ycol, sizeof out->ycol, "acceptance");
    out->ymin = 0;
    out->ymax = 1.05;
    size_t gmax = 1;
    for (size_t i = 0; i < n; i++) {
        const sl_analyze_result *r = &res[i];
        size_t G = r->gamma_max;
        if (G == 0 || G > SL_ANALYZE_GMAX) {
            sl_plot_figure_free(out);
            return sl_fail(SL_EINPUT, "%s: gamma_max %zu is outside [1, %d]", names[i], G, SL_ANALYZE_GMAX);
        }
        if (G > gmax) gmax = G;
        char label[96];
        log_label(label, sizeof label, names[i], r);
        for (int form = 0; form < 4; form++) {
            int observed = form >= 2, cond = form % 2 == 0;
            if (observed && !r->have_run) continue;
            if (!observed && r->kind == SL_LOG_RUN) continue; /* a run log alone has no replay */
            char name[128];
            snprintf(name, sizeof name, "%s%s%s %s", n > 1 ? label : "", n > 1 ? ": " : "", cond ? "conditional" : "unconditional",
                     observed ? "observed" : "replay");
            sl_plot_series *s = sl_plot_add_series(out, name, observed ? SL_PLOT_ERRORBARS : SL_PLOT_LINESPOINTS, G, observed);
            if (!s) {
                sl_plot_figure_free(out);
                return SL_EFAIL;
            }
            s->colour = n > 1 ? (int)i : form;
            s->dashed = !cond;
            for (size_t k = 0; k < G; k++) {
                s->x[k] = (double)(k + 1) + (observed ? (cond ? -0.08 : 0.08) : 0);
                if (!observed) {
                    s->y[k] = cond ? r->cond[k] : r->uncond[k];
                    continue;
                }
                uint64_t den = cond ? r->obs_reached[k] : r->obs_offered[k];
                s->y[k] = cond ? r->obs_cond[k] : r->obs_uncond[k];
                if (den == 0) {
                    s->y[k] = s->y_lo[k] = s->y_hi[k] = NAN;
                    continue;
                }
                if ((rc = sl_stats_wilson(r->obs_accepted[k], den, 1 - r->ci_level, &s->y_lo[k], &s->y_hi[k]))) {
                    sl_plot_figure_free(out);
                    return rc;
                }
            }
        }
    }
    out->xmin = 0.5;
    out->xmax = (double)gmax + 0.5;
    /* Acceptance falls with position (unconditional) or stays level: the upper right is free. */
    out->key = SL_PLOT_KEY_TOP_RIGHT;
    return SL_OK;
}

int sl_plot_acceptance_confidence(const sl_analyze_result *res, const char *const *names, size_t n, sl_plot_figure *out)
{
    int rc = check_logs(res, names, n, 1);
    if (rc) return rc;
    sl_plot_figure_begin(out, "draft confidence max q (bin centre)", "mean β in the bin (acceptance rate)", "q_max_mid", "mean_beta");
    snprintf(out->title, sizeof out->title, "Acceptance against draft confidence");
    out->xmin = 0;
    out->xmax = 1;
    out->ymin = 0;
    out->ymax = 1.05;
    for (size_t i = 0; i < n; i++) {
        const sl_analyze_result *r = &res[i];
        if (r->kind != SL_LOG_MEASURE || r->n_conf == 0) {
            sl_plot_figure_free(out);
            return sl_fail(SL_EINPUT, "%s: acceptance against confidence needs a measure log", names[i]);
        }
        char name[128];
        log_label(name, sizeof name, names[i], r);
        sl_plot_series *s = sl_plot_add_series(out, name, SL_PLOT_LINESPOINTS, r->n_conf, 0);
        if (!s) {
            sl_plot_figure_free(out);
            return SL_EFAIL;
        }
        for (size_t k = 0; k < r->n_conf; k++) {
            s->x[k] = ((double)k + 0.5) / (double)r->n_conf;
            s->y[k] = r->conf_count[k] ? r->conf_beta[k] : NAN;
        }
    }
    out->key = SL_PLOT_KEY_BOTTOM_RIGHT;
    return SL_OK;
}

int sl_plot_alpha_ci(const sl_analyze_result *res, const char *const *names, size_t n, sl_plot_figure *out)
{
    int rc = check_logs(res, names, n, 1);
    if (rc) return rc;
    if (n > SL_PLOT_MAX_XTICS) return sl_fail(SL_EINPUT, "logs: %zu; at most %d", n, SL_PLOT_MAX_XTICS);
    sl_plot_figure_begin(out, "log", "α (expected acceptance rate)", "log_index", "alpha");
    snprintf(out->title, sizeof out->title, "α per log with its %g%% bootstrap CI over sequences", 100 * res[0].ci_level);
    out->xmin = 0.5;
    out->xmax = (double)n + 0.5;
    out->key = SL_PLOT_KEY_OFF;
    out->n_xtics = n;
    double lo = 1, hi = 0;
    for (size_t i = 0; i < n; i++) {
        const sl_analyze_result *r = &res[i];
        log_label(out->xtic[i], sizeof out->xtic[i], names[i], r);
        sl_plot_series *s = sl_plot_add_series(out, "", SL_PLOT_DOTWHISKER, 1, 1);
        if (!s) {
            sl_plot_figure_free(out);
            return SL_EFAIL;
        }
        s->x[0] = (double)(i + 1);
        s->y[0] = r->alpha;
        s->y_lo[0] = r->alpha_lo;
        s->y_hi[0] = r->alpha_hi;
        lo = fmin(lo, r->alpha_lo);
        hi = fmax(hi, r->alpha_hi);
    }
    /* Zoomed to the intervals (a forest plot compares them), with a margin; never beyond [0, 1]. */
    double pad = fmax(0.02, 0.15 * (hi - lo));
    out->ymin = fmax(0, lo - pad);
    out->ymax = fmin(1, hi + pad);
    return SL_OK;
}

/* ---- Monte Carlo ---- */

int sl_plot_mc_tokens(const sl_mc_result *res, const sl_mc_prediction *pred, double a, sl_plot_figure *out)
{
    if (!res || !pred || res->iterations == 0) return sl_fail(SL_EINPUT, "mc: no iterations to plot");
    if (res->gamma < 1 || res->gamma > SL_SPEC_GAMMA_MAX)
        return sl_fail(SL_EINPUT, "gamma: %zu is outside [1, %d]", res->gamma, SL_SPEC_GAMMA_MAX);
    if (!(a > 0 && a < 1)) return sl_fail(SL_EINPUT, "confidence: 1 - %g is outside (0, 1)", a);
    size_t K = res->gamma + 1;
    sl_plot_figure_begin(out, "N (tokens emitted per iteration)", "fraction of iterations", "tokens", "fraction");
    snprintf(out->title, sizeof out->title, "Tokens per iteration: %zu simulated iterations, γ = %zu, α = %.4f",
             res->iterations, res->gamma, pred->alpha);
    out->xmin = 0.4;
    out->xmax = (double)K + 0.6;
    out->ymin = 0;
    char name[128];
    snprintf(name, sizeof name, "simulated (%g%% Wilson CI)", 100 * (1 - a));
    sl_plot_series *h = sl_plot_add_series(out, name, SL_PLOT_BOXES, K, 0);
    sl_plot_series *e = h ? sl_plot_add_series(out, "", SL_PLOT_ERRORBARS, K, 1) : NULL;
    sl_plot_series *iid = e ? sl_plot_add_series(out, "Equation 1 (i.i.d. α)", SL_PLOT_LINESPOINTS, K, 0) : NULL;
    sl_plot_series *pos = iid ? sl_plot_add_series(out, "position-dependent β_i (exact)", SL_PLOT_POINTS, K, 0) : NULL;
    if (!pos) {
        sl_plot_figure_free(out);
        return SL_EFAIL;
    }
    h->box_width = 0.7;
    h->colour = e->colour = 5;
    iid->colour = 1;
    iid->dashed = 1;
    pos->colour = 6;
    for (size_t k = 1; k <= K; k++) {
        double x = (double)k;
        h->x[k - 1] = e->x[k - 1] = iid->x[k - 1] = pos->x[k - 1] = x;
        h->y[k - 1] = e->y[k - 1] = (double)res->hist[k] / (double)res->iterations;
        int rc = sl_stats_wilson(res->hist[k], res->iterations, a, &e->y_lo[k - 1], &e->y_hi[k - 1]);
        if (rc) {
            sl_plot_figure_free(out);
            return rc;
        }
        iid->y[k - 1] = pred->pmf_iid[k];
        pos->y[k - 1] = pred->pmf[k];
    }
    out->key = sl_plot_auto_key(out);
    sl_plot_headroom(out, 3);
    return SL_OK;
}

/* ---- verification ---- */

void sl_plot_power_config_init(sl_plot_power_config *cfg)
{
    static const double d[] = {0.005, 0.01, 0.02, 0.05};
    memset(cfg, 0, sizeof *cfg);
    cfg->n_delta = sizeof d / sizeof d[0];
    memcpy(cfg->delta, d, sizeof d);
    cfg->df = 7;
    cfg->level = 0.05;
    cfg->n_lo = 10;
    cfg->n_hi = 1e7;
    cfg->n_points = 241;
}

int sl_plot_verify_power(const sl_plot_power_config *cfg, sl_plot_figure *out)
{
    if (cfg->n_delta == 0 || cfg->n_delta > SL_PLOT_THEORY_MAX)
        return sl_fail(SL_EINPUT, "tv: %zu values; expected 1 to %d", cfg->n_delta, SL_PLOT_THEORY_MAX);
    for (size_t i = 0; i < cfg->n_delta; i++)
        if (!(cfg->delta[i] > 0 && cfg->delta[i] <= 1)) return sl_fail(SL_EINPUT, "tv: %g is outside (0, 1]", cfg->delta[i]);
    if (!(cfg->df >= 1 && isfinite(cfg->df))) return sl_fail(SL_EINPUT, "df: %g is not >= 1", cfg->df);
    if (!(cfg->level > 0 && cfg->level < 1)) return sl_fail(SL_EINPUT, "level: %g is outside (0, 1)", cfg->level);
    if (!(cfg->n_lo >= 1 && cfg->n_hi > cfg->n_lo && isfinite(cfg->n_hi)))
        return sl_fail(SL_EINPUT, "n_max: samples range [%g, %g] needs 1 <= n_min < n_max", cfg->n_lo, cfg->n_hi);
    if (cfg->n_points < 2 || cfg->n_points > 100001)
        return sl_fail(SL_EINPUT, "points: %zu; expected 2 to 100001", cfg->n_points);
    sl_plot_figure_begin(out, "n (samples)", "power (probability of rejecting)", "samples", "power");
    snprintf(out->title, sizeof out->title, "Power of the χ² test against any TV ≥ δ (df = %g, level %g)", cfg->df, cfg->level);
    out->xlog = 1;
    out->xmin = cfg->n_lo;
    out->xmax = cfg->n_hi;
    out->ymin = 0;
    out->ymax = 1.02;
    out->key = SL_PLOT_KEY_BOTTOM_RIGHT;
    double l0 = log(cfg->n_lo), l1 = log(cfg->n_hi);
    for (size_t i = 0; i < cfg->n_delta; i++) {
        char name[64];
        snprintf(name, sizeof name, "δ = %g", cfg->delta[i]);
        sl_plot_series *s = sl_plot_add_series(out, name, SL_PLOT_LINES, cfg->n_points, 0);
        if (!s) {
            sl_plot_figure_free(out);
            return SL_EFAIL;
        }
        for (size_t k = 0; k < cfg->n_points; k++) {
            s->x[k] = k + 1 == cfg->n_points ? cfg->n_hi : exp(l0 + (l1 - l0) * (double)k / (double)(cfg->n_points - 1));
            s->y[k] = sl_stats_power_at_n(s->x[k], cfg->delta[i], cfg->df, cfg->level);
        }
    }
    if (reference_line(out, "power 0.9", cfg->n_lo, cfg->n_hi, 0.9)) {
        sl_plot_figure_free(out);
        return SL_EFAIL;
    }
    return SL_OK;
}

/* ---- verifier self-calibration ---- */

static int cmp_p(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* The pointwise 95% band of the order statistics of m uniforms, drawn around the diagonal. */
static int qq_band(sl_plot_figure *f, size_t m)
{
    sl_plot_series *s = sl_plot_add_series(f, "", SL_PLOT_BAND, m, 1);
    if (!s) return SL_EFAIL;
    for (size_t i = 1; i <= m; i++) {
        double a = (double)i, b = (double)(m - i + 1);
        s->x[i - 1] = s->y[i - 1] = ((double)i - 0.5) / (double)m;
        s->y_lo[i - 1] = gsl_cdf_beta_Pinv(0.025, a, b);
        s->y_hi[i - 1] = gsl_cdf_beta_Pinv(0.975, a, b);
    }
    s->colour = 6;
    s->dashed = 1;
    return SL_OK;
}

int sl_plot_verify_qq(const sl_verify_uniformity_result *res, sl_plot_figure *out)
{
    sl_plot_figure_init(out);
    size_t n_drawn = 0, n_bands = 0, band_m[SL_VERIFY_MAX_TESTS];
    for (size_t t = 0; t < res->n_rows; t++) {
        const sl_verify_ks *k = &res->row[t];
        if (k->replications < 2) continue;
        if (!k->p) return sl_fail(SL_EINPUT, "verify-qq: test '%s' holds no p-values", k->test);
        for (size_t r = 0; r < k->replications; r++)
            if (!(k->p[r] >= 0 && k->p[r] <= 1))
                return sl_fail(SL_EINPUT, "verify-qq: test '%s', p-value %zu is %g, expected [0, 1]", k->test, r, k->p[r]);
        size_t j = 0;
        while (j < n_bands && band_m[j] != k->replications) j++;
        if (j == n_bands) band_m[n_bands++] = k->replications;
        n_drawn++;
    }
    if (n_drawn == 0) return sl_fail(SL_EINPUT, "verify-qq: no test has 2 or more p-values");
    if (n_drawn + n_bands + 1 > SL_PLOT_MAX_SERIES)
        return sl_fail(SL_EINPUT, "verify-qq: %zu tests and %zu bands; a figure holds %d series", n_drawn, n_bands,
                       SL_PLOT_MAX_SERIES);
    snprintf(out->title, sizeof out->title, "Verifier self-calibration: p-value QQ (%zu replications)", res->replications);
    snprintf(out->xlabel, sizeof out->xlabel, "uniform quantile");
    snprintf(out->ylabel, sizeof out->ylabel, "p-value (sorted)");
    snprintf(out->xcol, sizeof out->xcol, "uniform_quantile");
    snprintf(out->ycol, sizeof out->ycol, "p_value");
    out->xmin = out->ymin = 0;
    out->xmax = out->ymax = 1;
    out->key = SL_PLOT_KEY_TOP_LEFT;
    int rc = SL_OK;
    for (size_t j = 0; j < n_bands && !rc; j++) rc = qq_band(out, band_m[j]);
    sl_plot_series *d = rc ? NULL : sl_plot_add_series(out, "y = x, pointwise 95% band", SL_PLOT_LINES, 2, 0);
    if (!rc && !d) rc = SL_EFAIL;
    if (d) {
        d->x[0] = d->y[0] = 0;
        d->x[1] = d->y[1] = 1;
        d->colour = 6;
        d->dashed = 1;
    }
    for (size_t t = 0; t < res->n_rows && !rc; t++) {
        const sl_verify_ks *k = &res->row[t];
        if (k->replications < 2) continue;
        char name[128];
        snprintf(name, sizeof name, "%s (KS p = %.3g)", k->test, k->ks_p);
        sl_plot_series *s = sl_plot_add_series(out, name, SL_PLOT_POINTS, k->replications, 0);
        if (!s) {
            rc = SL_EFAIL;
            break;
        }
        memcpy(s->y, k->p, k->replications * sizeof *s->y);
        qsort(s->y, k->replications, sizeof *s->y, cmp_p);
        for (size_t i = 0; i < k->replications; i++) s->x[i] = ((double)i + 0.5) / (double)k->replications;
    }
    if (rc) sl_plot_figure_free(out);
    return rc;
}
