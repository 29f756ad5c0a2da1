/*
 * test_plot.c: the figure engine (plots/sl_plot.h). Figures hold the library's numbers (checked
 * against the closed forms evaluated here in long double, and against the result structs they
 * read); the data and script texts say what they should; rendering writes PNG, SVG and PDF with
 * their signatures, and on every failure (gnuplot missing, gnuplot exiting non-zero, a foreign
 * FILE.dat) leaves no file, no temporary file and no unreaped child. The run figures read the
 * report's fields; a figure of panels writes one multiplot; sl_plot_make gives the builders'
 * figures. Needs gnuplot on PATH.
 */
#include <criterion/criterion.h>
#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "sl_common.h"
#include "sl_plot.h"
#include "sl_plot_make.h"
#include "sl_stats.h"

static char dir[256];

static void make_dir(void)
{
    snprintf(dir, sizeof dir, "/tmp/sl_test_plot_XXXXXX");
    cr_assert_not_null(mkdtemp(dir));
}

static void remove_dir(void)
{
    DIR *d = opendir(dir);
    if (!d) return;
    struct dirent *e;
    char p[512];
    while ((e = readdir(d)))
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) {
            snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
            unlink(p);
        }
    closedir(d);
    rmdir(dir);
}

/* Entries in the test directory (without . and ..). */
static int count_entries(void)
{
    DIR *d = opendir(dir);
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)))
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) n++;
    closedir(d);
    return n;
}

/* No child of this process is left, reaped or not. */
static void assert_no_children(void)
{
    errno = 0;
    cr_assert_eq(waitpid(-1, NULL, WNOHANG), -1, "a child process is left");
    cr_assert_eq(errno, ECHILD);
}

static long file_size(const char *path)
{
    struct stat st;
    return stat(path, &st) ? -1 : (long)st.st_size;
}

static int starts_with(const char *path, const char *magic, size_t n)
{
    char buf[16] = {0};
    FILE *f = fopen(path, "rb");
    if (!f) return 0;
    size_t k = fread(buf, 1, n, f);
    fclose(f);
    return k == n && !memcmp(buf, magic, n);
}

static long double ref_tokens(long double a, int g)
{
    long double s = 0, t = 1;
    for (int k = 0; k <= g; k++, t *= a) s += t;
    return s;
}

TestSuite(plot, .init = make_dir, .fini = remove_dir);

Test(plot, theory_tokens_values)
{
    sl_plot_theory_config cfg;
    sl_plot_theory_config_init(&cfg);
    sl_plot_figure f;
    cr_assert_eq(sl_plot_theory_tokens(&cfg, &f), SL_OK);
    cr_assert_eq(f.n_series, cfg.n_gamma);
    for (size_t i = 0; i < f.n_series; i++) {
        const sl_plot_series *s = &f.series[i];
        cr_assert_eq(s->n, cfg.n_alpha);
        cr_assert_eq(s->x[0], 0.0);
        cr_assert_eq(s->x[s->n - 1], 1.0);
        for (size_t k = 0; k < s->n; k++) {
            long double ref = ref_tokens(s->x[k], cfg.gamma[i]);
            cr_assert_leq(fabsl(s->y[k] - ref) / ref, 1e-14L, "gamma %d alpha %g: %.17g vs %.17Lg", cfg.gamma[i], s->x[k],
                          s->y[k], ref);
        }
    }
    sl_plot_figure_free(&f);
}

Test(plot, theory_speedup_ops_optimal)
{
    sl_plot_theory_config cfg;
    sl_plot_theory_config_init(&cfg);
    cfg.c[0] = 0.1;
    cfg.c_hat = 0.2;
    sl_plot_figure f;
    cr_assert_eq(sl_plot_theory_speedup(&cfg, &f), SL_OK);
    cr_assert_eq(f.n_series, cfg.n_gamma + 1); /* the curves and the plain-decoding line */
    for (size_t i = 0; i < cfg.n_gamma; i++)
        for (size_t k = 0; k < f.series[i].n; k += 7) {
            long double ref = ref_tokens(f.series[i].x[k], cfg.gamma[i]) / (cfg.gamma[i] * 0.1L + 1);
            cr_assert_leq(fabsl(f.series[i].y[k] - ref) / ref, 1e-14L);
        }
    sl_plot_figure_free(&f);
    cr_assert_eq(sl_plot_theory_ops(&cfg, &f), SL_OK);
    for (size_t i = 0; i < cfg.n_gamma; i++)
        for (size_t k = 0; k < f.series[i].n; k += 7) {
            int g = cfg.gamma[i];
            long double ref = (g * 0.2L + g + 1) / ref_tokens(f.series[i].x[k], g);
            cr_assert_leq(fabsl(f.series[i].y[k] - ref) / ref, 1e-14L);
        }
    sl_plot_figure_free(&f);
    /* Optimal gamma: brute force over 1..cap, NaN where the search stops at the cap. */
    cr_assert_eq(sl_plot_theory_optimal_gamma(&cfg, &f), SL_OK);
    cr_assert_eq(f.n_series, cfg.n_c);
    for (size_t j = 0; j < cfg.n_c; j++)
        for (size_t k = 0; k < f.series[j].n; k += 5) {
            double a = f.series[j].x[k], best = 1;
            int gbest = 0;
            for (int g = 1; g <= cfg.gamma_cap; g++) {
                double v;
                sl_theory_walltime_factor(a, g, cfg.c[j], &v);
                if (v > best * (1 + 1e-12)) best = v, gbest = g;
            }
            if (gbest == cfg.gamma_cap) cr_assert(isnan(f.series[j].y[k]));
            else cr_assert_eq(f.series[j].y[k], gbest, "c %g alpha %g: %g vs %d", cfg.c[j], a, f.series[j].y[k], gbest);
        }
    sl_plot_figure_free(&f);
    cfg.gamma[0] = 0;
    cr_assert_eq(sl_plot_theory_tokens(&cfg, &f), SL_EINPUT);
    cr_assert(strstr(sl_errmsg(), "gamma"));
}

/* A hand-filled analysis result: the builders read only the fields named here. */
static void fake_result(sl_analyze_result *r, double temperature)
{
    memset(r, 0, sizeof *r);
    r->kind = SL_LOG_MEASURE;
    r->meta.sampling.temperature = temperature;
    r->alpha = 0.6, r->alpha_lo = 0.55, r->alpha_hi = 0.65, r->ci_level = 0.95;
    r->n_hist = 4;
    uint64_t h[4] = {1, 2, 3, 4};
    memcpy(r->hist, h, sizeof h);
    r->gamma_max = 3;
    double cond[3] = {0.6, 0.62, 0.64}, uncond[3] = {0.6, 0.372, 0.238};
    memcpy(r->cond, cond, sizeof cond);
    memcpy(r->uncond, uncond, sizeof uncond);
    r->n_conf = 2;
    r->conf_count[0] = 0, r->conf_count[1] = 5;
    r->conf_beta[1] = 0.7;
}

Test(plot, log_builders_read_the_struct)
{
    sl_analyze_result r[2];
    fake_result(&r[0], 1);
    fake_result(&r[1], 0);
    const char *names[2] = {"a.h5", "b"};
    sl_plot_figure f;
    cr_assert_eq(sl_plot_beta_hist(r, names, 2, &f), SL_OK);
    cr_assert_eq(f.n_series, 2);
    for (size_t k = 0; k < 4; k++) {
        cr_assert_float_eq(f.series[0].x[k], (k + 0.5) / 4, 1e-15);
        cr_assert_float_eq(f.series[0].y[k], (k + 1) / 10.0, 1e-15);
    }
    cr_assert(strstr(f.series[1].name, "T = 0"), "a temperature-0 log says so: %s", f.series[1].name);
    sl_plot_figure_free(&f);

    cr_assert_eq(sl_plot_alpha_ci(r, names, 2, &f), SL_OK);
    cr_assert_eq(f.n_xtics, 2);
    cr_assert_str_eq(f.xtic[0], "a.h5");
    cr_assert_eq(f.series[0].y[0], 0.6);
    cr_assert_eq(f.series[0].y_lo[0], 0.55);
    cr_assert_eq(f.series[0].y_hi[0], 0.65);
    sl_plot_figure_free(&f);

    cr_assert_eq(sl_plot_acceptance_position(r, names, 1, &f), SL_OK);
    cr_assert_eq(f.n_series, 2); /* no run log: replay only */
    cr_assert_eq(f.series[0].y[2], 0.64);
    cr_assert_eq(f.series[1].y[1], 0.372);
    sl_plot_figure_free(&f);
    /* With a run log: observed points with Wilson intervals from the counts. */
    r[0].have_run = 1;
    for (int k = 0; k < 3; k++) {
        r[0].obs_reached[k] = 100, r[0].obs_accepted[k] = 60, r[0].obs_offered[k] = 200;
        r[0].obs_cond[k] = 0.6, r[0].obs_uncond[k] = 0.3;
    }
    cr_assert_eq(sl_plot_acceptance_position(r, names, 1, &f), SL_OK);
    cr_assert_eq(f.n_series, 4);
    double lo, hi;
    sl_stats_wilson(60, 100, 0.05, &lo, &hi);
    cr_assert_eq(f.series[2].style, SL_PLOT_ERRORBARS);
    cr_assert_eq(f.series[2].y_lo[0], lo);
    cr_assert_eq(f.series[2].y_hi[0], hi);
    sl_plot_figure_free(&f);

    cr_assert_eq(sl_plot_acceptance_confidence(r, names, 1, &f), SL_OK);
    cr_assert(isnan(f.series[0].y[0]), "an empty bin is a gap");
    cr_assert_eq(f.series[0].y[1], 0.7);
    sl_plot_figure_free(&f);

    cr_assert_eq(sl_plot_lenience(r, names, 1, &f), SL_EINPUT, "no distributions, no lenience curve");
    cr_assert(strstr(sl_errmsg(), "a.h5"));
}

Test(plot, mc_tokens_reads_result_and_prediction)
{
    sl_mc_result res;
    memset(&res, 0, sizeof res);
    res.gamma = 2;
    res.iterations = 100;
    res.hist[1] = 20, res.hist[2] = 30, res.hist[3] = 50;
    sl_mc_prediction pred;
    memset(&pred, 0, sizeof pred);
    pred.alpha = 0.7;
    sl_mc_pmf_iid(0.7, 2, pred.pmf_iid);
    sl_mc_pmf_iid(0.7, 2, pred.pmf);
    sl_plot_figure f;
    cr_assert_eq(sl_plot_mc_tokens(&res, &pred, 0.05, &f), SL_OK);
    cr_assert_eq(f.n_series, 4);
    cr_assert_eq(f.series[0].n, 3);
    cr_assert_eq(f.series[0].y[2], 0.5);
    cr_assert_float_eq(f.series[2].y[0], 0.3, 1e-15);
    cr_assert_float_eq(f.series[2].y[2], 0.49, 1e-15);
    cr_assert(f.series[1].y_lo[1] < 0.3 && f.series[1].y_hi[1] > 0.3);
    sl_plot_figure_free(&f);
}

Test(plot, data_and_script_text)
{
    sl_plot_figure f;
    sl_plot_figure_init(&f);
    snprintf(f.title, sizeof f.title, "it's a title");
    snprintf(f.xcol, sizeof f.xcol, "alpha");
    snprintf(f.ycol, sizeof f.ycol, "beta");
    sl_plot_series *s = sl_plot_add_series(&f, "one", SL_PLOT_BAND, 3, 1);
    cr_assert_not_null(s);
    for (int k = 0; k < 3; k++) s->x[k] = k, s->y[k] = 0.1 * k, s->y_lo[k] = 0, s->y_hi[k] = 1;
    s->y[1] = NAN;
    sl_plot_add_series(&f, "two", SL_PLOT_LINES, 1, 0);
    char *data, *script;
    cr_assert_eq(sl_plot_data_text(&f, &data), SL_OK);
    cr_assert(strstr(data, "# alpha beta beta_lo beta_hi\n0 0 0 1\n\n2 0.20000000000000001 0 1\n\n\n# block 1: two"),
              "%s", data);
    cr_assert_eq(sl_plot_script_text(&f, SL_PLOT_PDF, SL_PLOT_WIDTH_FULL, "x y.dat", "x.pdf", "speclab plot", &script), SL_OK);
    cr_assert(strstr(script, "set title 'it''s a title'"), "%s", script);
    cr_assert(strstr(script, "pdfcairo size 6.80in"), "%s", script);
    cr_assert(strstr(script, "data = 'x y.dat'"));
    cr_assert(strstr(script, "filledcurves"));
    free(data);
    free(script);
    /* Checks: a band without its interval, a non-positive value on a log axis. */
    free(f.series[0].y_lo);
    f.series[0].y_lo = NULL;
    cr_assert_eq(sl_plot_figure_check(&f), SL_EINPUT);
    sl_plot_figure_free(&f);
    sl_plot_figure_init(&f);
    f.xlog = 1;
    s = sl_plot_add_series(&f, "z", SL_PLOT_LINES, 2, 0);
    s->x[0] = 0, s->x[1] = 1;
    cr_assert_eq(sl_plot_figure_check(&f), SL_EINPUT);
    sl_plot_figure_free(&f);
}

static void render_kind(const char *ext, const char *magic, size_t n)
{
    sl_plot_theory_config cfg;
    sl_plot_theory_config_init(&cfg);
    sl_plot_figure f;
    cr_assert_eq(sl_plot_theory_speedup(&cfg, &f), SL_OK);
    char out[400], dat[400], gp[400];
    snprintf(out, sizeof out, "%s/fig%s", dir, ext);
    snprintf(dat, sizeof dat, "%s/fig.dat", dir);
    snprintf(gp, sizeof gp, "%s/fig.gp", dir);
    sl_plot_render_opts o;
    sl_plot_render_opts_init(&o);
    o.out = out;
    o.gnuplot = "gnuplot";
    int rc = sl_plot_render(&f, &o);
    cr_assert_eq(rc, SL_OK, "%s", sl_errmsg());
    cr_assert(starts_with(out, magic, n), "%s: signature", out);
    cr_assert_gt(file_size(out), 3000);
    cr_assert_gt(file_size(dat), 1000);
    cr_assert_gt(file_size(gp), 200);
    cr_assert_eq(count_entries(), 3, "only the figure, its data and script");
    assert_no_children();
    sl_plot_figure_free(&f);
}

Test(plot, render_png) { render_kind(".png", "\x89PNG", 4); }
Test(plot, render_svg) { render_kind(".svg", "<?xml", 5); }
Test(plot, render_pdf) { render_kind(".pdf", "%PDF", 4); }

static void one_series(sl_plot_figure *f)
{
    sl_plot_figure_init(f);
    snprintf(f->title, sizeof f->title, "t");
    sl_plot_series *s = sl_plot_add_series(f, "s", SL_PLOT_LINES, 2, 0);
    s->x[1] = s->y[1] = 1;
}

Test(plot, broken_gnuplot_leaves_nothing)
{
    char fake[400], out[400];
    snprintf(fake, sizeof fake, "%s/fakeplot", dir);
    FILE *fp = fopen(fake, "w");
    fprintf(fp, "#!/bin/sh\ncat >/dev/null\necho 'first: broken' >&2\necho 'second' >&2\nexit 3\n");
    fclose(fp);
    chmod(fake, 0755);
    sl_plot_figure f;
    one_series(&f);
    snprintf(out, sizeof out, "%s/x.png", dir);
    sl_plot_render_opts o;
    sl_plot_render_opts_init(&o);
    o.out = out;
    o.gnuplot = fake;
    cr_assert_eq(sl_plot_render(&f, &o), SL_EINPUT);
    cr_assert(strstr(sl_errmsg(), "exit status 3") && strstr(sl_errmsg(), "first: broken") && !strstr(sl_errmsg(), "second"),
              "%s", sl_errmsg());
    cr_assert_eq(count_entries(), 1, "only the fake gnuplot remains");
    assert_no_children();
    /* A gnuplot that cannot be executed at all. */
    o.gnuplot = "/nonexistent/gnuplot";
    cr_assert_eq(sl_plot_render(&f, &o), SL_EINPUT);
    cr_assert(strstr(sl_errmsg(), "cannot run gnuplot"), "%s", sl_errmsg());
    cr_assert_eq(count_entries(), 1);
    assert_no_children();
    /* A gnuplot that dies before reading its script: no SIGPIPE kills us. */
    fp = fopen(fake, "w");
    fprintf(fp, "#!/bin/sh\nexec 0<&-\necho 'closed early' >&2\nexit 1\n");
    fclose(fp);
    o.gnuplot = fake;
    cr_assert_eq(sl_plot_render(&f, &o), SL_EINPUT);
    cr_assert_eq(count_entries(), 1);
    assert_no_children();
    sl_plot_figure_free(&f);
}

Test(plot, refuses_foreign_data_file)
{
    char dat[400], out[400];
    snprintf(dat, sizeof dat, "%s/mine.dat", dir);
    FILE *fp = fopen(dat, "w");
    fputs("precious\n", fp);
    fclose(fp);
    sl_plot_figure f;
    one_series(&f);
    snprintf(out, sizeof out, "%s/mine.svg", dir);
    sl_plot_render_opts o;
    sl_plot_render_opts_init(&o);
    o.out = out;
    cr_assert_eq(sl_plot_render(&f, &o), SL_EINPUT);
    cr_assert(strstr(sl_errmsg(), "not written by speclab plot"), "%s", sl_errmsg());
    cr_assert_eq(count_entries(), 1);
    /* Its own earlier output is replaced. */
    snprintf(out, sizeof out, "%s/ours.svg", dir);
    cr_assert_eq(sl_plot_render(&f, &o), SL_OK, "%s", sl_errmsg());
    cr_assert_eq(sl_plot_render(&f, &o), SL_OK, "%s", sl_errmsg());
    cr_assert_eq(count_entries(), 4);
    sl_plot_figure_free(&f);
}

Test(plot, paths_and_options)
{
    sl_plot_term t;
    cr_assert_eq(sl_plot_term_for("a/b.PNG", 0, &t), SL_OK);
    cr_assert_eq(t, SL_PLOT_PNG);
    cr_assert_eq(sl_plot_term_for("-", 0, &t), SL_OK);
    cr_assert_eq(t, SL_PLOT_DUMB);
    cr_assert_eq(sl_plot_term_for("x.txt", 1, &t), SL_OK);
    cr_assert_eq(t, SL_PLOT_DUMB);
    cr_assert_eq(sl_plot_term_for("x.jpg", 0, &t), SL_EINPUT);
    cr_assert_eq(sl_plot_term_for("dir.png/x", 0, &t), SL_EINPUT);
    double w;
    cr_assert_eq(sl_plot_width_parse("full", &w), SL_OK);
    cr_assert_eq(w, 6.8);
    cr_assert_eq(sl_plot_width_parse("wide", &w), SL_EINPUT);
    sl_plot_key k;
    cr_assert_eq(sl_plot_key_parse("outside", &k), SL_OK);
    cr_assert_eq(k, SL_PLOT_KEY_OUTSIDE);
}

Test(plot, verify_power_curve)
{
    sl_plot_power_config cfg;
    sl_plot_power_config_init(&cfg);
    sl_plot_figure f;
    cr_assert_eq(sl_plot_verify_power(&cfg, &f), SL_OK);
    cr_assert_eq(f.n_series, cfg.n_delta + 1);
    for (size_t i = 0; i < cfg.n_delta; i++)
        for (size_t k = 0; k < f.series[i].n; k += 20)
            cr_assert_eq(f.series[i].y[k], sl_stats_power_at_n(f.series[i].x[k], cfg.delta[i], cfg.df, cfg.level));
    sl_plot_figure_free(&f);
}

/* A hand-filled uniformity result: two tests with 4 p-values in replication order, one without
 * enough data (left out of the figure). */
Test(plot, verify_qq_builder)
{
    static const double pa[4] = {0.9, 0.1, 0.5, 0.3}, pb[4] = {0.2, 0.8, 0.05, 0.6};
    sl_verify_uniformity_result u;
    memset(&u, 0, sizeof u);
    u.replications = 4;
    u.n_rows = 3;
    snprintf(u.row[0].test, sizeof u.row[0].test, "first");
    snprintf(u.row[1].test, sizeof u.row[1].test, "bonus");
    snprintf(u.row[2].test, sizeof u.row[2].test, "pair");
    u.row[0].replications = u.row[1].replications = 4;
    u.row[0].p = pa;
    u.row[1].p = pb;
    u.row[0].ks_p = 0.5;
    u.row[1].ks_p = 0.25;
    u.row[2].replications = 1;
    u.row[2].ks_p = NAN;
    sl_plot_figure f;
    cr_assert_eq(sl_plot_verify_qq(&u, &f), SL_OK);
    cr_assert_eq(f.n_series, 4); /* band, diagonal, two tests */
    const sl_plot_series *band = &f.series[0], *diag = &f.series[1], *a = &f.series[2], *b = &f.series[3];
    cr_assert_eq(band->style, SL_PLOT_BAND);
    cr_assert_eq(diag->style, SL_PLOT_LINES);
    cr_assert(diag->dashed && diag->x[0] == 0 && diag->y[1] == 1);
    cr_assert_str_eq(a->name, "first (KS p = 0.5)");
    cr_assert_str_eq(b->name, "bonus (KS p = 0.25)");
    static const double sa[4] = {0.1, 0.3, 0.5, 0.9}, sb[4] = {0.05, 0.2, 0.6, 0.8};
    for (size_t i = 0; i < 4; i++) {
        double q = ((double)i + 0.5) / 4;
        cr_assert_eq(a->x[i], q);
        cr_assert_eq(a->y[i], sa[i]);
        cr_assert_eq(b->y[i], sb[i]);
        cr_assert_eq(band->x[i], q);
        /* The order statistics of 4 uniforms: Beta(i, 5 - i); the first is 1 - (1 - u)^(1/4). */
        cr_assert(band->y_lo[i] < q && q < band->y_hi[i]);
    }
    cr_assert_float_eq(band->y_lo[0], 1 - pow(0.975, 0.25), 1e-12);
    cr_assert_float_eq(band->y_hi[3], pow(0.975, 0.25), 1e-12);
    cr_assert_str_eq(f.xlabel, "uniform quantile");
    cr_assert_str_eq(f.ylabel, "p-value (sorted)");
    cr_assert(f.xmin == 0 && f.xmax == 1 && f.ymin == 0 && f.ymax == 1);
    sl_plot_figure_free(&f);
    u.row[0].replications = u.row[1].replications = 0;
    cr_assert_eq(sl_plot_verify_qq(&u, &f), SL_EINPUT);
}

/* A hand-filled run report: the run builders read only the fields named here. */
static void fake_report(sl_run_report *r, int gamma)
{
    memset(r, 0, sizeof *r);
    r->gamma = gamma;
    r->iterations = 10 * gamma;
    r->accepted = 5.0 * gamma;
    r->speedup = (sl_run_estimate){1 + 0.1 * gamma, 0.9 + 0.1 * gamma, 1.1 + 0.1 * gamma};
    r->predicted_thm38 = (sl_run_estimate){1.2 + 0.1 * gamma, 1.1 + 0.1 * gamma, 1.3 + 0.1 * gamma};
    r->predicted_general = (sl_run_estimate){1.1, NAN, NAN}; /* no bootstrap: drawn without a band */
    r->tokens_per_iteration = (sl_run_estimate){1.5, 1.4, 1.6};
    r->expected_tokens = (sl_run_estimate){1.55, 1.45, 1.65};
    r->spec_time_per_token_s = 0.002 * gamma;
    r->ar_time_per_token_s = 0.003;
    r->speculative_total.seconds = 0.5 * gamma;
    r->drafting.seconds = 0.1 * gamma;
    r->verification.seconds = 0.3;
}

Test(plot, run_builders_read_the_report)
{
    sl_run_report r[3];
    fake_report(&r[0], 3), fake_report(&r[1], 1), fake_report(&r[2], 2); /* any order: sorted by gamma */
    const char *names[3] = {"r3.h5", "r1.h5", "r2.h5"};
    sl_plot_figure f;
    cr_assert_eq(sl_plot_run_speedup(r, names, 3, &f), SL_OK, "%s", sl_errmsg());
    cr_assert_eq(f.n_series, 4);
    cr_assert_eq(f.series[0].style, SL_PLOT_ERRORBARS);
    cr_assert_eq(f.series[1].style, SL_PLOT_BAND);
    cr_assert_eq(f.series[2].style, SL_PLOT_LINESPOINTS, "a prediction without CI is a line");
    cr_assert_null(f.series[2].y_lo);
    for (int k = 0; k < 3; k++) {
        cr_assert_eq(f.series[0].x[k], k + 1);
        cr_assert_eq(f.series[0].y[k], 1 + 0.1 * (k + 1));
        cr_assert_eq(f.series[0].y_lo[k], 0.9 + 0.1 * (k + 1));
        cr_assert_eq(f.series[1].y_hi[k], 1.3 + 0.1 * (k + 1));
    }
    cr_assert_eq(f.xtic_step, 1);
    sl_plot_figure_free(&f);

    cr_assert_eq(sl_plot_run_chen(r, names, 3, &f), SL_OK, "%s", sl_errmsg());
    cr_assert_eq(f.n_panels, 3);
    cr_assert_eq(f.n_series, 0);
    cr_assert_eq(f.width_in, SL_PLOT_WIDTH_FULL);
    const sl_plot_figure *p = f.panel;
    cr_assert_eq(p[0].n_series, 2);
    cr_assert_float_eq(p[0].series[0].y[1], 4.0, 1e-12, "2 ms per token at gamma 2");
    cr_assert_float_eq(p[0].series[1].y[0], 3.0, 1e-12);
    cr_assert_eq(p[1].n_series, 3);
    cr_assert_eq(p[1].series[0].y_lo[0], 1.4);
    cr_assert_eq(p[1].series[1].y_hi[2], 1.65);
    cr_assert_float_eq(p[1].series[2].y[2], 0.5, 1e-15, "accepted / iterations");
    cr_assert_eq(p[2].n_series, 3);
    cr_assert_float_eq(p[2].series[0].y[0], 50.0, 1e-12, "0.5 s over 10 iterations");
    cr_assert_float_eq(p[2].series[2].y[2], 10.0, 1e-12, "0.3 s over 30 iterations");
    char *data, *script;
    cr_assert_eq(sl_plot_data_text(&f, &data), SL_OK);
    cr_assert(strstr(data, "# panel: Tokens per iteration\n# block 2: emitted (measured) (errorbars)\n"
                           "# gamma tokens tokens_lo tokens_hi\n1 1.5 1.3999999999999999 1.6000000000000001\n"),
              "%s", data);
    cr_assert(strstr(data, "# block 7: verification"));
    cr_assert_eq(sl_plot_script_text(&f, SL_PLOT_PNG, SL_PLOT_WIDTH_FULL, "c.dat", "c.png", NULL, &script), SL_OK);
    cr_assert(strstr(script, "set multiplot layout 1,3 title"), "%s", script);
    cr_assert(strstr(script, "data index 7 using 1:2"), "%s", script);
    cr_assert(strstr(script, "set xtics 1\n"));
    cr_assert(strstr(script, "unset multiplot\nunset output\n"));
    free(script);
    cr_assert_eq(sl_plot_script_text(&f, SL_PLOT_PNG, SL_PLOT_WIDTH_COLUMN, "c.dat", "c.png", NULL, &script), SL_OK);
    cr_assert(strstr(script, "set multiplot layout 3,1 title") && strstr(script, "size 495,921"), "%s", script);
    free(script);
    free(data);

    /* Drawn: one PNG of three panels. */
    char out[400];
    snprintf(out, sizeof out, "%s/chen.png", dir);
    sl_plot_render_opts o;
    sl_plot_render_opts_init(&o);
    o.out = out;
    o.width_in = f.width_in;
    cr_assert_eq(sl_plot_render(&f, &o), SL_OK, "%s", sl_errmsg());
    cr_assert(starts_with(out, "\x89PNG", 4));
    cr_assert_eq(count_entries(), 3);
    assert_no_children();
    sl_plot_figure_free(&f);
    cr_assert_null(f.panel);

    /* Two logs at one gamma are refused, naming both. */
    r[2].gamma = 1;
    cr_assert_eq(sl_plot_run_chen(r, names, 3, &f), SL_EINPUT);
    cr_assert(strstr(sl_errmsg(), "r1.h5") && strstr(sl_errmsg(), "r2.h5"), "%s", sl_errmsg());
}

Test(plot, panels_hold_figures_not_series)
{
    sl_plot_figure f;
    one_series(&f);
    cr_assert_null(sl_plot_add_panel(&f), "a figure with series takes no panel");
    sl_plot_figure_free(&f);
    sl_plot_figure_init(&f);
    for (int i = 0; i < SL_PLOT_MAX_PANELS; i++) cr_assert_not_null(sl_plot_add_panel(&f));
    cr_assert_null(sl_plot_add_panel(&f));
    cr_assert_null(sl_plot_add_series(&f, "x", SL_PLOT_LINES, 1, 0), "a figure of panels takes no series");
    cr_assert_eq(sl_plot_figure_check(&f), SL_EINPUT, "empty panels");
    sl_plot_figure_free(&f);
}

Test(plot, make_gives_the_builders_figures)
{
    sl_plot_request rq;
    sl_plot_request_init(&rq);
    rq.kind = "theory-speedup";
    rq.c.n = 1, rq.c.v[0] = 0.1;
    rq.gamma.n = 2, rq.gamma.v[0] = 2, rq.gamma.v[1] = 4;
    rq.title = "mine";
    rq.key_set = 1, rq.key = SL_PLOT_KEY_BELOW;
    sl_plot_figure f, g;
    cr_assert_eq(sl_plot_make(&rq, &f), SL_OK, "%s", sl_errmsg());
    sl_plot_theory_config cfg;
    sl_plot_theory_config_init(&cfg);
    cfg.n_gamma = 2, cfg.gamma[0] = 2, cfg.gamma[1] = 4;
    cfg.n_c = 1, cfg.c[0] = 0.1;
    cr_assert_eq(sl_plot_theory_speedup(&cfg, &g), SL_OK);
    cr_assert_eq(f.n_series, g.n_series);
    for (size_t i = 0; i < f.n_series; i++)
        cr_assert_eq(memcmp(f.series[i].y, g.series[i].y, f.series[i].n * sizeof(double)), 0);
    cr_assert_str_eq(f.title, "mine");
    cr_assert_eq(f.key, SL_PLOT_KEY_BELOW);
    sl_plot_figure_free(&f);
    sl_plot_figure_free(&g);

    /* Errors name the quantity, or the kind. */
    rq.c.n = 2;
    cr_assert_eq(sl_plot_make(&rq, &f), SL_EINPUT);
    cr_assert(!strncmp(sl_errmsg(), "c: ", 3), "%s", sl_errmsg());
    rq.kind = "mc-tokens";
    cr_assert_eq(sl_plot_make(&rq, &f), SL_EINPUT);
    cr_assert(!strncmp(sl_errmsg(), "family: ", 8), "%s", sl_errmsg());
    rq.kind = "nonsense";
    cr_assert_eq(sl_plot_make(&rq, &f), SL_EINPUT);
    cr_assert(strstr(sl_errmsg(), "unknown kind 'nonsense'") && strstr(sl_errmsg(), "run-chen"), "%s", sl_errmsg());
    const char *in[1] = {"x.h5"};
    rq.kind = "verify-power";
    rq.n_inputs = 1, rq.inputs = in;
    cr_assert_eq(sl_plot_make(&rq, &f), SL_EINPUT);
    cr_assert(strstr(sl_errmsg(), "takes no LOG"), "%s", sl_errmsg());
    rq.kind = "run-speedup";
    rq.n_inputs = 0;
    cr_assert_eq(sl_plot_make(&rq, &f), SL_EINPUT);
    cr_assert(strstr(sl_errmsg(), "at least one LOG"), "%s", sl_errmsg());
    rq.n_inputs = 1;
    in[0] = "label=/nonexistent/r.h5";
    cr_assert_eq(sl_plot_make(&rq, &f), SL_EINPUT);
    cr_assert(strstr(sl_errmsg(), "/nonexistent/r.h5") && !strstr(sl_errmsg(), "label"), "%s", sl_errmsg());
}
