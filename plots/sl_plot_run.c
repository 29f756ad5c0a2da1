/*
 * sl_plot_run.c: the figures of run logs against γ (sl_plot.h): measured vs predicted speedup, and
 * Chen et al.'s Figure 1 layout. Each reads the sl_run_report of one run log per γ (sl_run.h,
 * computed by sl_run_report_file) and computes nothing the report does not hold: values are its
 * fields, seconds shown as milliseconds, or totals divided by its iteration count.
 */
#include <math.h>
#include <stdio.h>

#include "sl_common.h"
#include "sl_plot.h"

/* order[0..n) sorts the reports by γ; two logs with the same γ are refused. */
static int by_gamma(const sl_run_report *rep, const char *const *names, size_t n, size_t *order)
{
    if (!rep || !names || n == 0) return sl_fail(SL_EINPUT, "logs: no run report to plot");
    if (n > SL_PLOT_MAX_XTICS) return sl_fail(SL_EINPUT, "logs: %zu run logs; at most %d", n, SL_PLOT_MAX_XTICS);
    for (size_t i = 0; i < n; i++) {
        size_t k = i;
        for (; k > 0 && rep[order[k - 1]].gamma > rep[i].gamma; k--) order[k] = order[k - 1];
        order[k] = i;
    }
    for (size_t i = 1; i < n; i++)
        if (rep[order[i]].gamma == rep[order[i - 1]].gamma)
            return sl_fail(SL_EINPUT, "logs: %s and %s both have γ = %d; give one run log per γ", names[order[i - 1]],
                           names[order[i]], rep[order[i]].gamma);
    return SL_OK;
}

/* The γ axis of a panel: integer tics, half a step of margin on both sides. */
static void gamma_axis(sl_plot_figure *f, const sl_run_report *rep, const size_t *order, size_t n, const char *title,
                       const char *ylabel, const char *ycol)
{
    snprintf(f->title, sizeof f->title, "%s", title);
    snprintf(f->xlabel, sizeof f->xlabel, "γ (drafts per iteration)");
    snprintf(f->ylabel, sizeof f->ylabel, "%s", ylabel);
    snprintf(f->xcol, sizeof f->xcol, "gamma");
    snprintf(f->ycol, sizeof f->ycol, "%s", ycol);
    f->xmin = rep[order[0]].gamma - 0.5;
    f->xmax = rep[order[n - 1]].gamma + 0.5;
    f->xtic_step = 1;
    f->ymin = 0;
}

/* What a series reads from one report: an estimate (value with its CI), or a plain number. */
typedef sl_run_estimate (*field_fn)(const sl_run_report *r);

/* One series over the reports in γ order. With want_ci, the style is ci_style when every shown
 * value carries a finite CI and plain_style otherwise (a report without bootstrap). A series with
 * no value at all (a report set without costs has no prediction) is left out: *added stays 0. */
static int add_gamma_series(sl_plot_figure *f, const char *name, const sl_run_report *rep, const size_t *order, size_t n,
                            field_fn get, int want_ci, sl_plot_style ci_style, sl_plot_style plain_style, int colour,
                            int dashed)
{
    int any = 0, all_ci = want_ci;
    for (size_t i = 0; i < n; i++) {
        sl_run_estimate e = get(&rep[order[i]]);
        if (isnan(e.value)) continue;
        any = 1;
        all_ci &= isfinite(e.lo) && isfinite(e.hi);
    }
    if (!any) return SL_OK;
    sl_plot_series *s = sl_plot_add_series(f, name, all_ci ? ci_style : plain_style, n, all_ci);
    if (!s) return SL_EFAIL;
    s->colour = colour;
    s->dashed = dashed;
    for (size_t i = 0; i < n; i++) {
        sl_run_estimate e = get(&rep[order[i]]);
        s->x[i] = rep[order[i]].gamma;
        s->y[i] = isfinite(e.value) ? e.value : NAN;
        if (all_ci) s->y_lo[i] = e.lo, s->y_hi[i] = e.hi;
    }
    return SL_OK;
}

static sl_run_estimate plain(double v) { return (sl_run_estimate){v, NAN, NAN}; }
static sl_run_estimate f_speedup(const sl_run_report *r) { return r->speedup; }
static sl_run_estimate f_thm38(const sl_run_report *r) { return r->predicted_thm38; }
static sl_run_estimate f_general(const sl_run_report *r) { return r->predicted_general; }
static sl_run_estimate f_spec_ms(const sl_run_report *r) { return plain(1e3 * r->spec_time_per_token_s); }
static sl_run_estimate f_ar_ms(const sl_run_report *r) { return plain(1e3 * r->ar_time_per_token_s); }
static sl_run_estimate f_tpi(const sl_run_report *r) { return r->tokens_per_iteration; }
static sl_run_estimate f_expected(const sl_run_report *r) { return r->expected_tokens; }
static double per_iteration(const sl_run_report *r, double x) { return r->iterations > 0 ? x / r->iterations : NAN; }
static sl_run_estimate f_accepted(const sl_run_report *r) { return plain(per_iteration(r, r->accepted)); }
static sl_run_estimate f_iter_ms(const sl_run_report *r) { return plain(1e3 * per_iteration(r, r->speculative_total.seconds)); }
static sl_run_estimate f_draft_ms(const sl_run_report *r) { return plain(1e3 * per_iteration(r, r->drafting.seconds)); }
static sl_run_estimate f_verify_ms(const sl_run_report *r) { return plain(1e3 * per_iteration(r, r->verification.seconds)); }

/* A thin dashed black line at y = level across the γ axis: plain decoding. */
static int level_line(sl_plot_figure *f, const char *name, double level)
{
    sl_plot_series *s = sl_plot_add_series(f, name, SL_PLOT_LINES, 2, 0);
    if (!s) return SL_EFAIL;
    s->x[0] = f->xmin;
    s->x[1] = f->xmax;
    s->y[0] = s->y[1] = level;
    s->colour = 6;
    s->dashed = 1;
    return SL_OK;
}

int sl_plot_run_speedup(const sl_run_report *rep, const char *const *names, size_t n, sl_plot_figure *out)
{
    size_t order[SL_PLOT_MAX_XTICS];
    int rc = by_gamma(rep, names, n, order);
    if (rc) return rc;
    sl_plot_figure_init(out);
    gamma_axis(out, rep, order, n, "Measured vs predicted speedup (bootstrap CI over prompts)",
               "speedup (× autoregressive decoding)", "speedup");
    if ((rc = add_gamma_series(out, "measured", rep, order, n, f_speedup, 1, SL_PLOT_ERRORBARS, SL_PLOT_POINTS, 0, 0)) ||
        (rc = add_gamma_series(out, "Theorem 3.8 at α̂, c", rep, order, n, f_thm38, 1, SL_PLOT_BAND, SL_PLOT_LINESPOINTS, 1, 0)) ||
        (rc = add_gamma_series(out, "E[N]/(γc + v(γ+1)) at α̂", rep, order, n, f_general, 1, SL_PLOT_BAND,
                               SL_PLOT_LINESPOINTS, 2, 1)) ||
        (rc = level_line(out, "no speculation", 1)))
        goto fail;
    if (out->n_series == 1) {
        rc = sl_fail(SL_EINPUT, "%s: no report has a measured speedup", names[order[0]]);
        goto fail;
    }
    out->key = sl_plot_auto_key(out);
    sl_plot_headroom(out, out->n_series);
    return SL_OK;
fail:
    sl_plot_figure_free(out);
    return rc ? rc : SL_EFAIL;
}

int sl_plot_run_chen(const sl_run_report *rep, const char *const *names, size_t n, sl_plot_figure *out)
{
    size_t order[SL_PLOT_MAX_XTICS];
    int rc = by_gamma(rep, names, n, order);
    if (rc) return rc;
    sl_plot_figure_init(out);
    snprintf(out->title, sizeof out->title, "Speculative decoding against γ (Chen et al. 2023, Figure 1 layout): %zu run log%s",
             n, n == 1 ? "" : "s");
    out->width_in = SL_PLOT_WIDTH_FULL;
    sl_plot_figure *p[3];
    for (int i = 0; i < 3; i++)
        if (!(p[i] = sl_plot_add_panel(out))) goto fail;
    gamma_axis(p[0], rep, order, n, "Time per token", "time per token (ms)", "ms_per_token");
    gamma_axis(p[1], rep, order, n, "Tokens per iteration", "tokens per iteration", "tokens");
    gamma_axis(p[2], rep, order, n, "Time per iteration", "time per iteration (ms)", "ms_per_iteration");
    if ((rc = add_gamma_series(p[0], "speculative", rep, order, n, f_spec_ms, 0, 0, SL_PLOT_LINESPOINTS, 0, 0)) ||
        (rc = add_gamma_series(p[0], "autoregressive", rep, order, n, f_ar_ms, 0, 0, SL_PLOT_LINESPOINTS, 6, 1)) ||
        (rc = add_gamma_series(p[1], "emitted (measured)", rep, order, n, f_tpi, 1, SL_PLOT_ERRORBARS, SL_PLOT_POINTS, 0, 0)) ||
        (rc = add_gamma_series(p[1], "E[N] at α̂ (Eq. 1)", rep, order, n, f_expected, 1, SL_PLOT_BAND, SL_PLOT_LINESPOINTS, 1,
                               1)) ||
        (rc = add_gamma_series(p[1], "drafts accepted", rep, order, n, f_accepted, 0, 0, SL_PLOT_LINESPOINTS, 2, 0)) ||
        (rc = add_gamma_series(p[2], "total", rep, order, n, f_iter_ms, 0, 0, SL_PLOT_LINESPOINTS, 0, 0)) ||
        (rc = add_gamma_series(p[2], "drafting", rep, order, n, f_draft_ms, 0, 0, SL_PLOT_LINESPOINTS, 3, 1)) ||
        (rc = add_gamma_series(p[2], "verification", rep, order, n, f_verify_ms, 0, 0, SL_PLOT_LINESPOINTS, 4, 1)))
        goto fail;
    for (int i = 0; i < 3; i++) {
        if (p[i]->n_series == 0) {
            rc = sl_fail(SL_EINPUT, "%s: the run logs hold no %s", names[order[0]], p[i]->title);
            goto fail;
        }
        p[i]->key = sl_plot_auto_key(p[i]);
        sl_plot_headroom(p[i], p[i]->n_series);
    }
    return SL_OK;
fail:
    sl_plot_figure_free(out);
    return rc ? rc : SL_EFAIL;
}
