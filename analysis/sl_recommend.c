/* sl_recommend.c: the gamma to deploy from measure logs, run logs and cost tables (sl_recommend.h). */
#include "sl_recommend.h"

#include <errno.h>
#include <stdarg.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sl_common.h"
#include "sl_log.h"
#include "sl_replay.h"
#include "sl_run.h"
#include "sl_stats.h"

void sl_recommend_config_init(sl_recommend_config *cfg)
{
    memset(cfg, 0, sizeof *cfg);
    cfg->c = NAN;
    cfg->gamma_max = 12;
    cfg->n_sims = 10000;
    cfg->n_boot = 1000;
    cfg->ci_level = 0.95;
    cfg->seed = 1;
}

void sl_recommend_result_free(sl_recommend_result *res)
{
    free(res->path);
    free(res->deploy);
    res->path = NULL;
    res->deploy = NULL;
}

const char *sl_recommend_method_text(sl_recommend_method m)
{
    return m == SL_RECOMMEND_REPLAY
               ? "tokens per iteration: sequential replay of the measure log (CI: bootstrap over sequences)"
               : "tokens per iteration: measured where run, Equation 1 at alpha_hat elsewhere";
}

static void add_note(sl_recommend_result *res, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void add_note(sl_recommend_result *res, const char *fmt, ...)
{
    if (res->n_notes >= sizeof res->notes / sizeof res->notes[0]) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(res->notes[res->n_notes++], sizeof res->notes[0], fmt, ap);
    va_end(ap);
}

/* ---- cost tables: one iteration's cost in plain-decoding token times, per gamma ---- */

typedef struct {
    char label[192];
    int threads;
    size_t G, n_boot;
    double cost[SL_RECOMMEND_GMAX + 1];      /* by gamma; NaN unknown */
    double c_at[SL_RECOMMEND_GMAX + 1];      /* draft cost c behind it (NaN unknown) */
    const char *src[SL_RECOMMEND_GMAX + 1];
    int measured[SL_RECOMMEND_GMAX + 1];
    double *draws;                           /* (n_boot, G + 1) or NULL: no CI */
    double fit_a, fit_b, fit_err;
    int fit_usable;                          /* the line rises with gamma: used for unmeasured gammas */
    const char *kind;                        /* "run log", "cost table", "--c" */
    sl_run_sweep sweep;                      /* when loaded from a run log */
    int have_sweep;
} cost_table;

static void cost_table_free(cost_table *t)
{
    free(t->draws);
    if (t->have_sweep) sl_run_sweep_free(&t->sweep);
    memset(t, 0, sizeof *t);
}

static void cost_table_init(cost_table *t, size_t G, size_t n_boot)
{
    memset(t, 0, sizeof *t);
    t->G = G;
    t->n_boot = n_boot;
    t->fit_a = t->fit_b = t->fit_err = NAN;
    for (size_t g = 0; g <= SL_RECOMMEND_GMAX; g++) t->cost[g] = t->c_at[g] = NAN, t->src[g] = "unknown";
}

/* Least squares of y on x over the points with mask set: a + b x. Returns the number of points. */
static size_t line_fit(const double *y, const int *mask, size_t G, double *a, double *b)
{
    double n = 0, sx = 0, sy = 0, sxx = 0, sxy = 0;
    for (size_t g = 1; g <= G; g++)
        if (mask[g] && isfinite(y[g])) n++, sx += (double)g, sy += y[g], sxx += (double)g * (double)g, sxy += (double)g * y[g];
    *a = *b = NAN;
    if (n < 2) return (size_t)n;
    double den = n * sxx - sx * sx;
    *b = (n * sxy - sx * sy) / den;
    *a = (sy - *b * sx) / n;
    return (size_t)n;
}

/* Fills the gammas the table did not measure: a line through the measured points when there are
 * two or more (draws refitted per resample), else the calibration c, v(n) scaled to the one
 * measured point (cal NULL: left unknown). */
static void fill_unmeasured(cost_table *t, const sl_run_costs *cal)
{
    const size_t G = t->G;
    size_t nm = 0;
    int g0 = 0;
    for (size_t g = 1; g <= G; g++)
        if (t->measured[g]) nm++, g0 = (int)g;
    if (nm >= 2) {
        line_fit(t->cost, t->measured, G, &t->fit_a, &t->fit_b);
        t->fit_err = 0;
        for (size_t g = 1; g <= G; g++)
            if (t->measured[g]) t->fit_err = fmax(t->fit_err, fabs((t->fit_a + t->fit_b * (double)g) / t->cost[g] - 1));
        /* An iteration costs more with more drafts: a line that does not rise (timings disturbed by
         * other load) says nothing about the gammas between and beyond, so they stay unknown. */
        t->fit_usable = t->fit_b > 0;
        for (size_t g = 1; g <= G && t->fit_usable; g++) {
            double f = t->fit_a + t->fit_b * (double)g;
            if (t->measured[g] || !(f > 0)) continue;
            t->cost[g] = f;
            t->src[g] = "fit a + b gamma";
        }
        for (size_t b = 0; t->draws && b < t->n_boot; b++) {
            double *d = t->draws + b * (G + 1), fa, fb;
            line_fit(d, t->measured, G, &fa, &fb);
            for (size_t g = 1; g <= G; g++)
                if (!t->measured[g]) d[g] = t->fit_usable && fb > 0 && fa + fb * (double)g > 0 ? fa + fb * (double)g : NAN;
        }
        return;
    }
    if (nm != 1 || !cal || cal->v.n_entries == 0) return;
    double v0, v;
    if (sl_theory_vcost_eval(&cal->v, g0 + 1, &v0)) {
        sl_err_clear();
        return;
    }
    double ratio = t->cost[g0] / sl_theory_iteration_cost((double)g0, cal->c, v0);
    for (size_t g = 1; g <= G; g++) {
        if (t->measured[g]) continue;
        if (sl_theory_vcost_eval(&cal->v, (long)g + 1, &v)) {
            sl_err_clear();
            continue;
        }
        t->cost[g] = ratio * sl_theory_iteration_cost((double)g, cal->c, v);
        t->c_at[g] = cal->c;
        t->src[g] = "calibration scaled to the measured gamma";
        for (size_t b = 0; t->draws && b < t->n_boot; b++) {
            double *d = t->draws + b * (G + 1);
            d[g] = t->cost[g] * d[g0] / t->cost[g0];
        }
    }
}

/* One resample's cost per iteration at each measured gamma of a sweep: prompts resampled with the
 * same indices for every gamma (a prompt keeps its decodes at every gamma and its baseline). */
static int sweep_draws(cost_table *t, uint64_t seed)
{
    const sl_run_sweep *s = &t->sweep;
    const size_t G = t->G, np = s->n ? s->per_gamma[0].n_prompt_sums : 0;
    if (t->n_boot < 2 || np < 2) return SL_OK;
    for (size_t i = 0; i < s->n; i++)
        if (s->per_gamma[i].n_prompt_sums != np) return SL_OK; /* no paired resampling: no CI */
    t->draws = malloc(t->n_boot * (G + 1) * sizeof *t->draws);
    gsl_rng *r = sl_rng_alloc(seed, SL_STREAM_BOOT, 0);
    size_t *idx = malloc(np * sizeof *idx);
    if (!t->draws || !r || !idx) {
        free(idx);
        if (r) gsl_rng_free(r);
        return sl_fail(SL_EFAIL, "out of memory");
    }
    for (size_t b = 0; b < t->n_boot; b++) {
        /* Items 2^40 + b: not the measure log's resamples (items b), so the two are independent. */
        sl_rng_reseed(r, seed, SL_STREAM_BOOT, ((uint64_t)1 << 40) + b);
        for (size_t j = 0; j < np; j++) idx[j] = (size_t)gsl_rng_uniform_int(r, np);
        double *d = t->draws + b * (G + 1);
        for (size_t g = 0; g <= G; g++) d[g] = NAN;
        for (size_t i = 0; i < s->n; i++) {
            const sl_run_report *rep = &s->per_gamma[i];
            if (rep->gamma < 1 || (size_t)rep->gamma > G) continue;
            double it = 0, wall = 0, art = 0, arw = 0;
            for (size_t j = 0; j < np; j++) {
                const sl_run_prompt_sums *p = &rep->prompt_sums[idx[j]];
                it += p->iterations, wall += p->spec_wall, art += p->ar_tokens, arw += p->ar_wall;
            }
            d[rep->gamma] = it > 0 && art > 0 && arw > 0 ? (wall / it) / (arw / art) : NAN;
        }
    }
    free(idx);
    gsl_rng_free(r);
    return SL_OK;
}

static int cost_from_run_log(cost_table *t, const char *path, uint64_t seed, double level)
{
    sl_run_report_config rc = {t->n_boot > 0 ? (long)t->n_boot : 0, level, seed, 0};
    int e = sl_run_sweep_file(path, &rc, &t->sweep);
    if (e) return e;
    t->have_sweep = 1;
    t->kind = "run log";
    t->threads = t->sweep.threads;
    if (t->threads > 0) snprintf(t->label, sizeof t->label, "threads=%d (%s)", t->threads, sl_path_base(path));
    else snprintf(t->label, sizeof t->label, "%s", sl_path_base(path));
    const sl_run_costs *cal = NULL;
    for (size_t i = 0; i < t->sweep.n; i++) {
        const sl_run_report *rep = &t->sweep.per_gamma[i];
        if (rep->has_costs && !cal) cal = &rep->costs;
        if (rep->gamma < 1 || (size_t)rep->gamma > t->G || !isfinite(rep->cost_per_iteration.value)) continue;
        t->cost[rep->gamma] = rep->cost_per_iteration.value;
        t->c_at[rep->gamma] = rep->c_in_run;
        t->src[rep->gamma] = "measured at this gamma";
        t->measured[rep->gamma] = 1;
    }
    e = sweep_draws(t, seed);
    if (!e) fill_unmeasured(t, cal);
    return e;
}

/* CSV cost table: a header naming gamma and either cost_per_iteration or c and v (overhead
 * optional, default 0); '#' lines are comments. */
static int cost_from_csv(cost_table *t, const char *path)
{
    FILE *f = fopen(path, "r");
    if (!f) return sl_fail(SL_EINPUT, "costs: cannot read %s: %s", path, strerror(errno));
    t->kind = "cost table";
    snprintf(t->label, sizeof t->label, "%s", sl_path_base(path));
    char line[4096];
    int col_g = -1, col_cost = -1, col_c = -1, col_v = -1, col_o = -1, ncol = 0, rc = SL_OK;
    size_t lineno = 0, rows = 0;
    while (!rc && fgets(line, sizeof line, f)) {
        lineno++;
        size_t L = strlen(line);
        if (L == sizeof line - 1 && line[L - 1] != '\n') {
            rc = sl_fail(SL_EINPUT, "costs: %s:%zu: line longer than %zu bytes", path, lineno, sizeof line - 2);
            break;
        }
        while (L && (line[L - 1] == '\n' || line[L - 1] == '\r')) line[--L] = 0;
        if (L == 0 || line[0] == '#') continue;
        char *fields[16];
        int nf = 0;
        for (char *p = line, *q; p && nf < 16; p = q) {
            q = strchr(p, ',');
            if (q) *q++ = 0;
            while (*p == ' ') p++;
            fields[nf++] = p;
        }
        if (col_g < 0) { /* the header */
            for (int i = 0; i < nf; i++) {
                const char *h = fields[i];
                if (!strcmp(h, "gamma")) col_g = i;
                else if (!strcmp(h, "cost_per_iteration")) col_cost = i;
                else if (!strcmp(h, "c")) col_c = i;
                else if (!strcmp(h, "v")) col_v = i;
                else if (!strcmp(h, "overhead")) col_o = i;
            }
            ncol = nf;
            if (col_g < 0 || (col_cost < 0 && (col_c < 0 || col_v < 0)))
                rc = sl_fail(SL_EINPUT, "costs: %s:%zu: the header must name gamma and cost_per_iteration, or gamma, c and v",
                             path, lineno);
            continue;
        }
        if (nf != ncol) {
            rc = sl_fail(SL_EINPUT, "costs: %s:%zu: %d fields; the header has %d", path, lineno, nf, ncol);
            break;
        }
        double val[16];
        for (int i = 0; i < nf && !rc; i++) {
            char *end;
            errno = 0;
            val[i] = strtod(fields[i], &end);
            if (end == fields[i] || *end || errno || !isfinite(val[i]))
                rc = sl_fail(SL_EINPUT, "costs: %s:%zu: field %d '%s' is not a finite number", path, lineno, i + 1, fields[i]);
        }
        if (rc) break;
        double gd = val[col_g];
        if (gd != floor(gd) || gd < 1 || gd > SL_SPEC_GAMMA_MAX) {
            rc = sl_fail(SL_EINPUT, "costs: %s:%zu: gamma %g is not an integer in [1, %d]", path, lineno, gd, SL_SPEC_GAMMA_MAX);
            break;
        }
        size_t g = (size_t)gd;
        double cost = col_cost >= 0 ? val[col_cost] : (double)g * val[col_c] + val[col_v] + (col_o >= 0 ? val[col_o] : 0);
        if (!(cost > 0) || (col_c >= 0 && val[col_c] < 0) || (col_v >= 0 && !(val[col_v] > 0))) {
            rc = sl_fail(SL_EINPUT, "costs: %s:%zu: the cost of an iteration must be > 0 (c >= 0, v > 0)", path, lineno);
            break;
        }
        if (g > t->G) continue; /* outside the search */
        if (t->measured[g]) {
            rc = sl_fail(SL_EINPUT, "costs: %s:%zu: gamma %zu appears twice", path, lineno, g);
            break;
        }
        t->cost[g] = cost;
        t->c_at[g] = col_c >= 0 ? val[col_c] : NAN;
        t->src[g] = "measured at this gamma";
        t->measured[g] = 1;
        rows++;
    }
    if (!rc && ferror(f)) rc = sl_fail(SL_EINPUT, "costs: reading %s failed", path);
    fclose(f);
    if (!rc && col_g < 0) rc = sl_fail(SL_EINPUT, "costs: %s has no header line", path);
    if (!rc && rows == 0) rc = sl_fail(SL_EINPUT, "costs: %s has no row with gamma in [1, %zu]", path, t->G);
    if (!rc) fill_unmeasured(t, NULL);
    return rc;
}

/* A run log or a CSV, by content: HDF5 files start with the HDF5 signature. */
static int cost_load(cost_table *t, const char *path, uint64_t seed, double level)
{
    FILE *f = fopen(path, "rb");
    if (!f) return sl_fail(SL_EINPUT, "costs: cannot read %s: %s", path, strerror(errno));
    unsigned char sig[8] = {0};
    size_t got = fread(sig, 1, 8, f);
    fclose(f);
    if (got == 8 && !memcmp(sig, "\x89HDF\r\n\x1a\n", 8)) return cost_from_run_log(t, path, seed, level);
    return cost_from_csv(t, path);
}

static void cost_given(cost_table *t, double c, const sl_theory_vcost *vc)
{
    t->kind = "--c";
    snprintf(t->label, sizeof t->label, "given c = %g", c);
    for (size_t g = 1; g <= t->G; g++) {
        double v = 1;
        if (vc && sl_theory_vcost_eval(vc, (long)g + 1, &v)) {
            sl_err_clear();
            continue;
        }
        t->cost[g] = sl_theory_iteration_cost((double)g, c, v);
        t->c_at[g] = c;
        t->src[g] = "given c, v(n)";
    }
}

/* ---- the decision ---- */

static int percentile_ci(double *x, size_t n, double level, double *lo, double *hi)
{
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        if (isfinite(x[i])) x[k++] = x[i];
    *lo = *hi = NAN;
    if (k < 2) return 0;
    sl_stats_percentile_ci(x, k, level, lo, hi);
    return 1;
}

/* gamma 0 (plain), 1, g-1, g, g+1, g+2: distinct, within 0..G, ascending. */
static size_t candidates(int g, size_t G, int *cand)
{
    size_t nc = 0;
    long want[] = {0, 1, g - 1, g, g + 1, g + 2};
    for (size_t i = 0; i < 6; i++) {
        if (want[i] < 0 || want[i] > (long)G) continue;
        int dup = 0;
        for (size_t j = 0; j < nc; j++) dup |= cand[j] == want[i];
        if (!dup) cand[nc++] = (int)want[i];
    }
    for (size_t i = 1; i < nc; i++)
        for (size_t j = i; j > 0 && cand[j - 1] > cand[j]; j--) {
            int tmp = cand[j];
            cand[j] = cand[j - 1];
            cand[j - 1] = tmp;
        }
    return nc;
}

typedef struct {
    const char *measure;                     /* the measure log, or NULL */
    const char *runs[SL_RECOMMEND_MAX_LOGS]; /* run logs */
    size_t n_runs;
    uint64_t tokens_per_sequence;
} inputs;

static int classify(const sl_recommend_config *cfg, inputs *in)
{
    memset(in, 0, sizeof *in);
    const char *one[1] = {cfg->path};
    const char *const *paths = cfg->n_paths ? cfg->paths : one;
    size_t n = cfg->n_paths ? cfg->n_paths : cfg->path ? 1 : 0;
    if (n == 0) return sl_fail(SL_EINPUT, "path: no log file given");
    if (n > SL_RECOMMEND_MAX_LOGS) return sl_fail(SL_EINPUT, "path: %zu logs; at most %d", n, SL_RECOMMEND_MAX_LOGS);
    for (size_t i = 0; i < n; i++) {
        sl_log_reader *r = NULL;
        int rc = sl_log_open(&r, paths[i]);
        if (rc) return rc;
        const sl_log_meta *m = sl_log_meta_of(r);
        if (m->kind == SL_LOG_MEASURE) {
            if (in->measure) rc = sl_fail(SL_EINPUT, "path: %s and %s are both measure logs; give one", in->measure, paths[i]);
            in->measure = paths[i];
            in->tokens_per_sequence = m->tokens_per_sequence;
        } else in->runs[in->n_runs++] = paths[i];
        sl_log_close(r);
        if (rc) return rc;
    }
    return SL_OK;
}

/* The joined file names for the report. */
static int join_paths(const sl_recommend_config *cfg, char **out)
{
    const char *one[1] = {cfg->path};
    const char *const *paths = cfg->n_paths ? cfg->paths : one;
    size_t n = cfg->n_paths ? cfg->n_paths : 1, len = 1;
    for (size_t i = 0; i < n; i++) len += strlen(paths[i]) + 1;
    char *s = sl_malloc(len);
    if (!s) return SL_EFAIL;
    s[0] = 0;
    for (size_t i = 0; i < n; i++) {
        if (i) strcat(s, ",");
        strcat(s, paths[i]);
    }
    *out = s;
    return SL_OK;
}

/* Predicted speedups of one cost table for every gamma: value and CI. td (n_boot, G) are the
 * tokens-per-iteration draws (NULL: none). */
static void predict(const cost_table *t, const double *tpi, const double *td, size_t n_boot, size_t G, double level,
                    double *pred, double *lo, double *hi, double *scratch)
{
    for (size_t g = 1; g <= G; g++) {
        pred[g] = tpi[g] / t->cost[g];
        lo[g] = hi[g] = NAN;
        if (!isfinite(pred[g]) || (!td && !t->draws)) continue;
        for (size_t b = 0; b < n_boot; b++)
            scratch[b] = (td ? td[b * G + g - 1] : tpi[g]) / (t->draws ? t->draws[b * (G + 1) + g] : t->cost[g]);
        percentile_ci(scratch, n_boot, level, &lo[g], &hi[g]);
    }
}

static int best_of(const double *x, size_t G)
{
    int best = 0;
    double bv = 1; /* plain decoding */
    for (size_t g = 1; g <= G; g++)
        if (isfinite(x[g]) && x[g] > bv) bv = x[g], best = (int)g;
    return best;
}

int sl_recommend_run(const sl_recommend_config *cfg, sl_recommend_result *res)
{
    memset(res, 0, sizeof *res);
    const size_t G = cfg->gamma_max, B = cfg->n_boot;
    if (G < 1 || G > SL_RECOMMEND_GMAX || G > SL_SPEC_GAMMA_MAX)
        return sl_fail(SL_EINPUT, "gamma_max: %zu is outside [1, %d]", G, SL_RECOMMEND_GMAX);
    if (cfg->n_sims < 1) return sl_fail(SL_EINPUT, "sims: %zu; expected at least 1", cfg->n_sims);
    if (!(cfg->ci_level > 0 && cfg->ci_level < 1)) return sl_fail(SL_EINPUT, "ci_level: %g is outside (0, 1)", cfg->ci_level);
    if (isfinite(cfg->c) && cfg->costs)
        return sl_fail(SL_EINPUT, "costs: give either a cost table or c and v(n), not both");
    for (size_t i = 0; i < cfg->n_batch; i++)
        if (cfg->batch[i] < 1) return sl_fail(SL_EINPUT, "batch: %zu is not >= 1", cfg->batch[i]);
    inputs in;
    int rc = classify(cfg, &in);
    if (rc) return rc;

    sl_replay_seqs rs;
    int have_rs = 0;
    cost_table own, *runs = NULL, *dep = NULL;
    const cost_table *ct = &own; /* the costs used: own (given or loaded), or the first run log's */
    cost_table_init(&own, G, B);
    double *td = NULL, *scratch = NULL, *lat = NULL;
    double tpi[SL_RECOMMEND_GMAX + 1], tlo[SL_RECOMMEND_GMAX + 1], thi[SL_RECOMMEND_GMAX + 1];
    double pred[SL_RECOMMEND_GMAX + 1], plo[SL_RECOMMEND_GMAX + 1], phi[SL_RECOMMEND_GMAX + 1];
    double meas[SL_RECOMMEND_GMAX + 1], mlo[SL_RECOMMEND_GMAX + 1], mhi[SL_RECOMMEND_GMAX + 1];
    const char *tmeth[SL_RECOMMEND_GMAX + 1];
    for (size_t g = 0; g <= G; g++) tpi[g] = tlo[g] = thi[g] = meas[g] = mlo[g] = mhi[g] = NAN, tmeth[g] = "unknown";

    rc = join_paths(cfg, &res->path);
    runs = calloc(in.n_runs + 1, sizeof *runs);
    dep = calloc(cfg->n_deploy + 1, sizeof *dep);
    scratch = malloc((B + cfg->n_sims + 1) * sizeof *scratch);
    lat = malloc(cfg->n_sims * sizeof *lat);
    if (!rc && (!runs || !dep || !scratch || !lat)) rc = sl_fail(SL_EFAIL, "out of memory");

    /* Run logs: what was measured at each gamma (the first log that decoded a gamma wins). */
    double alpha_run = NAN, alpha_lo = NAN, alpha_hi = NAN, best_tested = -1;
    for (size_t i = 0; !rc && i < in.n_runs; i++) {
        cost_table_init(&runs[i], G, B);
        rc = cost_from_run_log(&runs[i], in.runs[i], cfg->seed, cfg->ci_level);
        for (size_t k = 0; !rc && k < runs[i].sweep.n; k++) {
            const sl_run_report *rep = &runs[i].sweep.per_gamma[k];
            if (rep->tested > best_tested && isfinite(rep->alpha_hat.value))
                best_tested = rep->tested, alpha_run = rep->alpha_hat.value, alpha_lo = rep->alpha_hat.lo,
                alpha_hi = rep->alpha_hat.hi;
            size_t g = (size_t)rep->gamma;
            if (g < 1 || g > G) {
                add_note(res, "%s decoded gamma %zu, outside the search 1..%zu", in.runs[i], g, G);
                continue;
            }
            if (isfinite(meas[g])) continue;
            meas[g] = rep->speedup.value, mlo[g] = rep->speedup.lo, mhi[g] = rep->speedup.hi;
            if (!in.measure) {
                tpi[g] = rep->kept_per_iteration.value, tlo[g] = rep->kept_per_iteration.lo;
                thi[g] = rep->kept_per_iteration.hi, tmeth[g] = "measured";
            }
        }
    }

    /* Tokens per iteration: the sequential replay of the measure log, else Equation 1 at alpha_hat
     * where no run measured them. */
    if (!rc && in.measure) {
        rc = sl_replay_log(in.measure, G, &rs);
        have_rs = !rc;
        if (!rc && rs.n_rows == 0) rc = sl_fail(SL_EINPUT, "%s holds no positions", in.measure);
        if (!rc && B >= 2 && rs.n_seq >= 2) {
            if (!(td = malloc(B * G * sizeof *td))) rc = sl_fail(SL_EFAIL, "out of memory");
            if (!rc) rc = sl_replay_boot(&rs, B, cfg->seed, td);
        }
        double sa = 0;
        for (size_t i = 0; have_rs && i < rs.n_rows; i++) sa += rs.a[i];
        if (!rc) res->alpha = sa / (double)rs.n_rows;
        for (size_t g = 1; !rc && g <= G; g++) {
            tpi[g] = sl_replay_tokens_per_iteration(&rs, g);
            tmeth[g] = "sequential replay";
            if (td) {
                for (size_t b = 0; b < B; b++) scratch[b] = td[b * G + g - 1];
                percentile_ci(scratch, B, cfg->ci_level, &tlo[g], &thi[g]);
            }
        }
        res->method = SL_RECOMMEND_REPLAY;
    } else if (!rc) {
        if (!isfinite(alpha_run)) rc = sl_fail(SL_EINPUT, "%s holds no tested drafts", in.runs[0]);
        res->alpha = alpha_run;
        for (size_t g = 1; !rc && g <= G; g++) {
            if (isfinite(tpi[g])) continue;
            sl_theory_expected_tokens(alpha_run, (int)g, &tpi[g]);
            if (isfinite(alpha_lo)) sl_theory_expected_tokens(alpha_lo, (int)g, &tlo[g]);
            if (isfinite(alpha_hi)) sl_theory_expected_tokens(alpha_hi, (int)g, &thi[g]);
            tmeth[g] = "Equation 1 at alpha_hat";
        }
        res->method = SL_RECOMMEND_EQ1;
    }

    /* Costs: given c and v(n), else the cost table, else the first run log. */
    if (!rc) {
        if (isfinite(cfg->c)) cost_given(&own, cfg->c, cfg->vc);
        else if (cfg->costs) rc = cost_load(&own, cfg->costs, cfg->seed, cfg->ci_level);
        else if (in.n_runs) {
            ct = &runs[0];
        } else
            rc = sl_fail(SL_EINPUT, "c: %s is a measure log without costs; give --costs RUN.h5|FILE.csv, a run log, or --c",
                         in.measure);
    }
    if (!rc) {
        /* With tokens per iteration measured (no measure log) the draws of the replay are absent;
         * the CI then comes from the cost draws alone at measured gammas, Equation 1's elsewhere. */
        predict(ct, tpi, td, B, G, cfg->ci_level, pred, plo, phi, scratch);
        for (size_t g = 1; g <= G; g++)
            if (!td && !strcmp(tmeth[g], "Equation 1 at alpha_hat") && isfinite(tlo[g]))
                plo[g] = tlo[g] / ct->cost[g], phi[g] = thi[g] / ct->cost[g];
            else if (!td && !strcmp(tmeth[g], "measured"))
                plo[g] = mlo[g], phi[g] = mhi[g];
    }

    /* The pick: the best measured gamma when any was measured, else the best prediction. */
    int any_meas = 0;
    for (size_t g = 1; g <= G; g++) any_meas |= isfinite(meas[g]);
    if (!rc) {
        int g = any_meas ? best_of(meas, G) : best_of(pred, G);
        res->gamma = g;
        res->basis = any_meas ? "measured" : "predicted";
        res->at_cap = g == (int)G;
        res->speedup = g == 0 ? 1 : any_meas ? meas[g] : pred[g];
        res->speedup_lo = g == 0 ? 1 : any_meas ? mlo[g] : plo[g];
        res->speedup_hi = g == 0 ? 1 : any_meas ? mhi[g] : phi[g];
        res->ci_level = cfg->ci_level;
        res->c = g > 0 ? ct->c_at[g] : NAN;
        res->c_source = ct->kind;
        res->n_gamma = G;
        res->prediction_max_abs_error = NAN;
        for (size_t k = 1; k <= G; k++) {
            sl_recommend_gamma *x = &res->per[k - 1];
            x->gamma = (int)k;
            x->tokens_per_iteration = tpi[k], x->tpi_lo = tlo[k], x->tpi_hi = thi[k], x->tpi_method = tmeth[k];
            x->cost = ct->cost[k], x->cost_source = ct->src[k];
            x->cost_lo = x->cost_hi = NAN;
            if (ct->draws) {
                for (size_t b = 0; b < B; b++) scratch[b] = ct->draws[b * (G + 1) + k];
                percentile_ci(scratch, B, cfg->ci_level, &x->cost_lo, &x->cost_hi);
            }
            x->predicted = pred[k], x->pred_lo = plo[k], x->pred_hi = phi[k];
            x->measured = meas[k], x->meas_lo = mlo[k], x->meas_hi = mhi[k];
            x->prediction_error = strcmp(tmeth[k], "measured") && isfinite(meas[k]) ? pred[k] / meas[k] - 1 : NAN;
            if (isfinite(x->prediction_error))
                res->prediction_max_abs_error = isfinite(res->prediction_max_abs_error)
                                                    ? fmax(res->prediction_max_abs_error, fabs(x->prediction_error))
                                                    : fabs(x->prediction_error);
        }
        if (any_meas)
            for (size_t k = 1; k <= G; k++)
                if (!isfinite(meas[k]) && isfinite(plo[k]) && plo[k] > res->speedup)
                    add_note(res, "gamma %zu was not measured and its predicted CI [%.3g, %.3g] lies above the best "
                                  "measured speedup %.3g: measure it",
                             k, plo[k], phi[k], res->speedup);
        if (res->at_cap) add_note(res, "the best gamma is the search cap %zu: a larger --gamma-max might do better", G);
        snprintf(res->inputs, sizeof res->inputs, "tokens per iteration: %s; costs: %s (%s)%s%s%s",
                 in.measure ? "sequential replay of the measure log" : "the run logs (Equation 1 at alpha_hat elsewhere)",
                 ct->label, ct->kind,
                 isfinite(ct->fit_err) && ct->fit_usable ? "; unmeasured gammas from a line a + b gamma" : "",
                 any_meas ? "; measured speedups from the run logs outrank predictions" : "",
                 in.n_runs ? "" : "; no measured speedup");
        if (isfinite(ct->fit_err) && ct->fit_usable)
            add_note(res, "cost per iteration ~ %.4g + %.4g gamma over the measured gammas (max relative error %.2g%%)",
                     ct->fit_a, ct->fit_b, 100 * ct->fit_err);
        else if (isfinite(ct->fit_err))
            add_note(res, "the measured cost per iteration does not rise with gamma (slope %.3g: timings disturbed by "
                          "other load?): gammas not measured get no prediction",
                     ct->fit_b);
        if (any_meas && res->gamma > 0 && isfinite(res->speedup_lo) && res->speedup_hi - res->speedup_lo > 0.5 * res->speedup)
            add_note(res, "the measured speedup at gamma %d is noisy (CI [%.3g, %.3g]): more prompts or a quieter "
                          "machine would sharpen the choice",
                     res->gamma, res->speedup_lo, res->speedup_hi);
        if (in.measure && !rs.deterministic)
            add_note(res, "the replay assumes the exact acceptance rule; a lenient rule accepts more often");
    }

    /* Latency: the spread from simulations of the replay (or of i.i.d. acceptance at alpha_hat),
     * its level from the speedup the pick used, so the mean is answer / speedup. */
    size_t answer = cfg->answer_tokens ? cfg->answer_tokens : in.measure && in.tokens_per_sequence ? in.tokens_per_sequence : 128;
    res->answer_tokens = answer;
    if (!rc) {
        int cand[SL_RECOMMEND_MAX_CAND];
        res->n_cand = candidates(res->gamma, G, cand);
        double *aconst = NULL;
        if (!in.measure && !(aconst = malloc(answer * sizeof *aconst))) rc = sl_fail(SL_EFAIL, "out of memory");
        for (size_t i = 0; aconst && i < answer; i++) aconst[i] = res->alpha;
        gsl_rng *r = rc ? NULL : sl_rng_alloc(cfg->seed, SL_STREAM_ACCEPT, 0);
        if (!rc && !r) rc = sl_fail(SL_EFAIL, "out of memory");
        for (size_t i = 0; !rc && i < res->n_cand; i++) {
            int g = cand[i];
            sl_recommend_latency *L = &res->cand[i];
            L->gamma = g;
            if (g == 0) {
                L->p50 = L->p90 = L->p99 = L->mean = (double)answer;
                continue;
            }
            double sp = any_meas && isfinite(meas[g]) ? meas[g] : pred[g];
            if (in.measure) rc = sl_replay_latency_sims(&rs, (size_t)g, answer, cfg->n_sims, cfg->seed, lat);
            else
                for (size_t j = 0; j < cfg->n_sims; j++) {
                    sl_rng_reseed(r, cfg->seed, SL_STREAM_ACCEPT, ((uint64_t)1 << 41) + j);
                    lat[j] = (double)sl_replay_simulate(aconst, answer, (size_t)g, answer, r);
                }
            if (rc) break;
            double m = 0;
            for (size_t j = 0; j < cfg->n_sims; j++) m += lat[j];
            m /= (double)cfg->n_sims;
            double scale = isfinite(sp) && sp > 0 && m > 0 ? ((double)answer / sp) / m : NAN;
            for (size_t j = 0; j < cfg->n_sims; j++) lat[j] *= scale;
            L->p50 = sl_stats_quantile(lat, cfg->n_sims, 0.5);
            L->p90 = sl_stats_quantile(lat, cfg->n_sims, 0.9);
            L->p99 = sl_stats_quantile(lat, cfg->n_sims, 0.99);
            L->mean = isfinite(scale) ? (double)answer / sp : NAN;
        }
        if (r) gsl_rng_free(r);
        free(aconst);
    }

    /* Other settings: the chosen gamma's speedup there, and the best gamma there. */
    size_t nd = cfg->n_deploy + cfg->n_batch;
    if (!rc && nd) {
        res->deploy = calloc(nd, sizeof *res->deploy);
        if (!res->deploy) rc = sl_fail(SL_EFAIL, "out of memory");
    }
    for (size_t i = 0; !rc && i < cfg->n_deploy; i++) {
        cost_table *t = &dep[i];
        cost_table_init(t, G, B);
        rc = cost_load(t, cfg->deploy[i], cfg->seed, cfg->ci_level);
        if (rc) break;
        double dp[SL_RECOMMEND_GMAX + 1], dl[SL_RECOMMEND_GMAX + 1], dh[SL_RECOMMEND_GMAX + 1];
        predict(t, tpi, td, B, G, cfg->ci_level, dp, dl, dh, scratch);
        sl_recommend_deploy *d = &res->deploy[res->n_deploy++];
        snprintf(d->setting, sizeof d->setting, "%s", t->label);
        int g = res->gamma;
        d->gamma = g;
        d->speedup = g ? dp[g] : 1, d->lo = g ? dl[g] : 1, d->hi = g ? dh[g] : 1;
        d->measured = NAN;
        for (size_t k = 0; t->have_sweep && k < t->sweep.n; k++)
            if (t->sweep.per_gamma[k].gamma == g) d->measured = t->sweep.per_gamma[k].speedup.value;
        d->best_gamma = best_of(dp, G);
        d->best_speedup = d->best_gamma ? dp[d->best_gamma] : 1;
        snprintf(d->note, sizeof d->note, "cost at gamma %d: %s (%s)", g, g ? t->src[g] : "plain decoding", t->kind);
    }
    for (size_t i = 0; !rc && i < cfg->n_batch; i++) {
        sl_recommend_deploy *d = &res->deploy[res->n_deploy++];
        snprintf(d->setting, sizeof d->setting, "batch=%zu", cfg->batch[i]);
        d->gamma = res->gamma;
        d->measured = NAN;
        if (cfg->batch[i] == 1) {
            d->speedup = res->speedup, d->lo = res->speedup_lo, d->hi = res->speedup_hi;
            d->best_gamma = res->gamma, d->best_speedup = res->speedup;
            snprintf(d->note, sizeof d->note, "the setting the costs were measured at (one sequence per call)");
        } else {
            d->speedup = d->lo = d->hi = d->best_speedup = NAN;
            d->best_gamma = -1;
            snprintf(d->note, sizeof d->note,
                     "not measured: batching changes v(n) (a batch of %zu verifies %zu(gamma+1) tokens per call); "
                     "measure the cost per iteration at that batch and give it with --deploy FILE.csv",
                     cfg->batch[i], cfg->batch[i]);
        }
    }

    for (size_t i = 0; runs && i < in.n_runs; i++) cost_table_free(&runs[i]);
    for (size_t i = 0; dep && i < cfg->n_deploy; i++) cost_table_free(&dep[i]);
    cost_table_free(&own);
    free(runs), free(dep), free(td), free(scratch), free(lat);
    if (have_rs) sl_replay_seqs_free(&rs);
    if (rc) sl_recommend_result_free(res);
    return rc;
}

/* ---- the report ---- */

int sl_recommend_report(const sl_recommend_result *res, sl_table ***tables, size_t *n)
{
    static const sl_colspec rec_cols[] = {
        SL_COL_S("file"), SL_COL_D("alpha", "%.6g"), SL_COL_D("c", "%.6g"), SL_COL_S("c_source"), SL_COL_I("gamma"),
        SL_COL_D("expected_speedup", "%.6g"), SL_COL_D("speedup_ci_lo", "%.6g"), SL_COL_D("speedup_ci_hi", "%.6g"),
        SL_COL_D("ci_level", "%.6g"), SL_COL_I("gamma_at_search_cap"), SL_COL_S("basis"), SL_COL_S("method"),
        SL_COL_D("prediction_max_abs_error", "%.4g"), SL_COL_S("inputs")};
    static const sl_colspec per_cols[] = {
        SL_COL_I("gamma"), SL_COL_D("tokens_per_iteration", "%.5g"), SL_COL_D("tpi_ci_lo", "%.5g"),
        SL_COL_D("tpi_ci_hi", "%.5g"), SL_COL_S("tpi_method"), SL_COL_D("cost_per_iteration", "%.5g"),
        SL_COL_D("cost_ci_lo", "%.5g"), SL_COL_D("cost_ci_hi", "%.5g"), SL_COL_S("cost_source"),
        SL_COL_D("predicted_speedup", "%.5g"), SL_COL_D("predicted_ci_lo", "%.5g"), SL_COL_D("predicted_ci_hi", "%.5g"),
        SL_COL_D("measured_speedup", "%.5g"), SL_COL_D("measured_ci_lo", "%.5g"), SL_COL_D("measured_ci_hi", "%.5g"),
        SL_COL_D("prediction_error", "%.4g"), SL_COL_I("recommended")};
    static const sl_colspec lat_cols[] = {
        SL_COL_I("gamma"), SL_COL_I("answer_tokens"), SL_COL_D("p50_target_steps", "%.4g"),
        SL_COL_D("p90_target_steps", "%.4g"), SL_COL_D("p99_target_steps", "%.4g"),
        SL_COL_D("mean_target_steps", "%.4g"), SL_COL_D("p99_over_p50", "%.4g"), SL_COL_I("recommended")};
    static const sl_colspec dep_cols[] = {
        SL_COL_S("setting"), SL_COL_I("gamma"), SL_COL_D("expected_speedup", "%.5g"), SL_COL_D("speedup_ci_lo", "%.5g"),
        SL_COL_D("speedup_ci_hi", "%.5g"), SL_COL_D("measured_speedup", "%.5g"), SL_COL_I("best_gamma_there"),
        SL_COL_D("best_speedup_there", "%.5g"), SL_COL_S("note")};
    static const sl_colspec note_cols[] = {SL_COL_S("note")};
    *tables = NULL;
    *n = 0;
    sl_table **ts = sl_calloc(5, sizeof *ts);
    if (!ts) return SL_EFAIL;
    size_t nt = 0;
    sl_table *t = ts[nt++] = SL_TABLE_NEW("recommendation", rec_cols);
    sl_table_row(t);
    sl_table_sets(t, "file", res->path);
    sl_table_setd(t, "alpha", res->alpha);
    sl_table_setd(t, "c", res->c);
    sl_table_sets(t, "c_source", res->c_source);
    sl_table_seti(t, "gamma", res->gamma);
    sl_table_setd(t, "expected_speedup", res->speedup);
    sl_table_setd(t, "speedup_ci_lo", res->speedup_lo);
    sl_table_setd(t, "speedup_ci_hi", res->speedup_hi);
    sl_table_setd(t, "ci_level", res->ci_level);
    sl_table_seti(t, "gamma_at_search_cap", res->at_cap);
    sl_table_sets(t, "basis", res->basis);
    sl_table_sets(t, "method", sl_recommend_method_text(res->method));
    sl_table_setd(t, "prediction_max_abs_error", res->prediction_max_abs_error);
    sl_table_sets(t, "inputs", res->inputs);

    sl_table *p = ts[nt++] = SL_TABLE_NEW("per_gamma", per_cols);
    for (size_t k = 0; k < res->n_gamma; k++) {
        const sl_recommend_gamma *x = &res->per[k];
        sl_table_row(p);
        sl_table_seti(p, "gamma", x->gamma);
        sl_table_setd(p, "tokens_per_iteration", x->tokens_per_iteration);
        sl_table_setd(p, "tpi_ci_lo", x->tpi_lo);
        sl_table_setd(p, "tpi_ci_hi", x->tpi_hi);
        sl_table_sets(p, "tpi_method", x->tpi_method);
        sl_table_setd(p, "cost_per_iteration", x->cost);
        sl_table_setd(p, "cost_ci_lo", x->cost_lo);
        sl_table_setd(p, "cost_ci_hi", x->cost_hi);
        sl_table_sets(p, "cost_source", x->cost_source);
        sl_table_setd(p, "predicted_speedup", x->predicted);
        sl_table_setd(p, "predicted_ci_lo", x->pred_lo);
        sl_table_setd(p, "predicted_ci_hi", x->pred_hi);
        sl_table_setd(p, "measured_speedup", x->measured);
        sl_table_setd(p, "measured_ci_lo", x->meas_lo);
        sl_table_setd(p, "measured_ci_hi", x->meas_hi);
        sl_table_setd(p, "prediction_error", x->prediction_error);
        sl_table_seti(p, "recommended", x->gamma == res->gamma);
    }

    sl_table *l = ts[nt++] = SL_TABLE_NEW("latency", lat_cols);
    for (size_t i = 0; i < res->n_cand; i++) {
        const sl_recommend_latency *x = &res->cand[i];
        sl_table_row(l);
        sl_table_seti(l, "gamma", x->gamma);
        sl_table_seti(l, "answer_tokens", (int64_t)res->answer_tokens);
        sl_table_setd(l, "p50_target_steps", x->p50);
        sl_table_setd(l, "p90_target_steps", x->p90);
        sl_table_setd(l, "p99_target_steps", x->p99);
        sl_table_setd(l, "mean_target_steps", x->mean);
        sl_table_setd(l, "p99_over_p50", x->p99 / x->p50);
        sl_table_seti(l, "recommended", x->gamma == res->gamma);
    }
    if (res->n_deploy) {
        sl_table *d = ts[nt++] = SL_TABLE_NEW("deployment", dep_cols);
        for (size_t i = 0; i < res->n_deploy; i++) {
            const sl_recommend_deploy *x = &res->deploy[i];
            sl_table_row(d);
            sl_table_sets(d, "setting", x->setting);
            sl_table_seti(d, "gamma", x->gamma);
            sl_table_setd(d, "expected_speedup", x->speedup);
            sl_table_setd(d, "speedup_ci_lo", x->lo);
            sl_table_setd(d, "speedup_ci_hi", x->hi);
            sl_table_setd(d, "measured_speedup", x->measured);
            sl_table_seti(d, "best_gamma_there", x->best_gamma);
            sl_table_setd(d, "best_speedup_there", x->best_speedup);
            sl_table_sets(d, "note", x->note);
        }
    }
    sl_table *o = ts[nt++] = SL_TABLE_NEW("notes", note_cols);
    sl_table_row(o);
    sl_table_sets(o, "note", "latency in plain-decoding token times: mean = answer / expected speedup; spread from "
                             "simulations of the replay");
    for (size_t i = 0; i < res->n_notes; i++) {
        sl_table_row(o);
        sl_table_sets(o, "note", res->notes[i]);
    }
    int rc = SL_OK;
    for (size_t i = 0; i < nt && !rc; i++) rc = sl_table_status(ts[i]);
    if (rc) {
        for (size_t i = 0; i < nt; i++) sl_table_free(ts[i]);
        free(ts);
        return rc;
    }
    *tables = ts;
    *n = nt;
    return SL_OK;
}
