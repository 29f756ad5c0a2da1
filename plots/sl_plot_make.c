/*
 * sl_plot_make.c: a figure from a request (sl_plot_make.h): validates the request for its kind,
 * computes the result the kind reads through the library (sl_theory, sl_analyze_file, sl_mc_run,
 * sl_run_report_file), and hands it to the kind's builder (sl_plot_kinds.c, sl_plot_run.c).
 */
#include "sl_plot_make.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "sl_analyze.h"
#include "sl_common.h"
#include "sl_log.h"
#include "sl_run.h"
#include "sl_verify.h"

typedef enum { SRC_THEORY, SRC_LOG, SRC_MC, SRC_POWER, SRC_RUN, SRC_QQ } kind_source;

typedef int (*theory_fn)(const sl_plot_theory_config *, sl_plot_figure *);
typedef int (*log_fn)(const sl_analyze_result *, const char *const *, size_t, sl_plot_figure *);
typedef int (*run_fn)(const sl_run_report *, const char *const *, size_t, sl_plot_figure *);

static const struct {
    const char *name;
    kind_source src;
    theory_fn theory;
    log_fn log;
    run_fn run;
} kinds[] = {
    {"theory-tokens", SRC_THEORY, sl_plot_theory_tokens, NULL, NULL},
    {"theory-speedup", SRC_THEORY, sl_plot_theory_speedup, NULL, NULL},
    {"theory-optimal-gamma", SRC_THEORY, sl_plot_theory_optimal_gamma, NULL, NULL},
    {"theory-ops", SRC_THEORY, sl_plot_theory_ops, NULL, NULL},
    {"beta-hist", SRC_LOG, NULL, sl_plot_beta_hist, NULL},
    {"lenience", SRC_LOG, NULL, sl_plot_lenience, NULL},
    {"acceptance-position", SRC_LOG, NULL, sl_plot_acceptance_position, NULL},
    {"acceptance-confidence", SRC_LOG, NULL, sl_plot_acceptance_confidence, NULL},
    {"alpha-ci", SRC_LOG, NULL, sl_plot_alpha_ci, NULL},
    {"mc-tokens", SRC_MC, NULL, NULL, NULL},
    {"verify-power", SRC_POWER, NULL, NULL, NULL},
    {"verify-qq", SRC_QQ, NULL, NULL, NULL},
    {"run-speedup", SRC_RUN, NULL, NULL, sl_plot_run_speedup},
    {"run-chen", SRC_RUN, NULL, NULL, sl_plot_run_chen},
};
#define N_KINDS (sizeof kinds / sizeof kinds[0])

void sl_plot_request_init(sl_plot_request *rq)
{
    memset(rq, 0, sizeof *rq);
    rq->c_hat = 0;
    rq->v_linear = NAN;
    rq->points = 201;
    rq->gamma_cap = 20;
    rq->gamma_max = 12;
    rq->ci = 0.95;
    rq->seed = 1;
    rq->family = SL_MC_FAMILY_DEFAULT;
    rq->iterations = 0;
    rq->confidence = 0.95;
    rq->df = 7;
    rq->level = 0.01;
    rq->n_min = 10;
    rq->n_max = 1e7;
    rq->replications = 200;
}

const char *sl_plot_kind_name(size_t i) { return i < N_KINDS ? kinds[i].name : NULL; }

/* ---- one function per source ---- */

static int make_theory(const sl_plot_request *rq, theory_fn build, sl_plot_figure *out)
{
    sl_plot_theory_config cfg;
    sl_plot_theory_config_init(&cfg);
    if (rq->gamma.n) {
        cfg.n_gamma = rq->gamma.n;
        for (size_t i = 0; i < rq->gamma.n; i++) {
            double g = rq->gamma.v[i];
            if (g != floor(g) || g < 1 || g > SL_THEORY_GAMMA_MAX)
                return sl_fail(SL_EINPUT, "gamma: %g is not an integer in [1, %d]", g, SL_THEORY_GAMMA_MAX);
            cfg.gamma[i] = (int)g;
        }
    }
    if (build == sl_plot_theory_speedup) {
        if (rq->c.n > 1)
            return sl_fail(SL_EINPUT, "c: theory-speedup draws one c (got %zu); see theory-optimal-gamma for several", rq->c.n);
        cfg.n_c = 1;
        cfg.c[0] = rq->c.n ? rq->c.v[0] : 0.05;
    } else if (rq->c.n) {
        cfg.n_c = rq->c.n;
        memcpy(cfg.c, rq->c.v, rq->c.n * sizeof rq->c.v[0]);
    }
    cfg.c_hat = rq->c_hat;
    cfg.n_alpha = rq->points;
    cfg.gamma_cap = rq->gamma_cap;
    sl_theory_vcost vc;
    int rc;
    if (!isnan(rq->v_linear)) {
        if ((rc = sl_theory_vcost_linear(&vc, rq->v_linear))) return rc;
        cfg.vc = &vc;
    }
    rc = build(&cfg, out);
    if (cfg.vc) sl_theory_vcost_free(&vc);
    return rc;
}

static int make_logs(const sl_plot_request *rq, log_fn build, int need_dists, const char *const *paths,
                     const char *const *names, size_t n, sl_plot_figure *out)
{
    if (rq->run_path && n != 1) return sl_fail(SL_EINPUT, "run: goes with exactly one measure log");
    sl_analyze_opts o;
    sl_analyze_opts_init(&o);
    o.gamma_max = rq->gamma_max;
    if (rq->boot) o.n_boot = rq->boot;
    o.ci_level = rq->ci;
    o.seed = rq->seed;
    o.run_path = rq->run_path;
    if (rq->lenience.n) {
        for (size_t i = 0; i < rq->lenience.n; i++)
            if (!(rq->lenience.v[i] > 0 && rq->lenience.v[i] <= 1))
                return sl_fail(SL_EINPUT, "lenience: %g is outside (0, 1]", rq->lenience.v[i]);
        o.n_lenience = rq->lenience.n;
        memcpy(o.lenience, rq->lenience.v, rq->lenience.n * sizeof rq->lenience.v[0]);
    }
    /* Only the figures that need the distribution pass pay for it. */
    o.no_dists = !need_dists;
    sl_analyze_result *res = sl_calloc(n, sizeof *res);
    if (!res) return SL_EFAIL;
    size_t done = 0;
    int rc = SL_OK;
    for (; done < n && !rc; done++) rc = sl_analyze_file(paths[done], &o, &res[done]);
    if (rc) done--; /* the failed one holds nothing */
    if (!rc) rc = build(res, names, n, out);
    for (size_t i = 0; i < done; i++) sl_analyze_result_free(&res[i]);
    free(res);
    return rc;
}

/* The exact sampler's plan on the request's family (mc-tokens, verify-qq); kind names the kind
 * in messages, V and gamma are the kind's defaults where the request leaves them unset. */
static int family_plan(const sl_plot_request *rq, const char *kind, size_t V, size_t gamma, sl_mc_rows **rows,
                       sl_mc_plan **plan)
{
    *rows = NULL;
    *plan = NULL;
    if (!rq->family_set)
        return sl_fail(SL_EINPUT, "family: required for %s (identical|noisy|dirichlet|zipf|disjoint|positional)", kind);
    const sl_plot_list *g = &rq->gamma;
    if (g->n > 1 || (g->n && (g->v[0] != floor(g->v[0]) || g->v[0] < 1 || g->v[0] > SL_SPEC_GAMMA_MAX)))
        return sl_fail(SL_EINPUT, "gamma: %s takes one integer in [1, %d]", kind, SL_SPEC_GAMMA_MAX);
    if (rq->iterations < 0) return sl_fail(SL_EINPUT, "iterations: %ld is not positive", rq->iterations);
    sl_mc_family_params fp = rq->family;
    fp.seed = rq->seed;
    if (!rq->vocab_set) fp.V = V;
    fp.gamma = g->n ? (size_t)g->v[0] : gamma;
    sl_spec_config scfg = SL_SPEC_CONFIG_DEFAULT;
    int rc = sl_mc_family_rows(&fp, rows);
    if (!rc) {
        sl_mc_source msrc = sl_mc_rows_source(*rows);
        rc = sl_mc_plan_alloc(&msrc, fp.gamma, &scfg, plan);
    }
    return rc;
}

static int make_mc(const sl_plot_request *rq, sl_plot_figure *out)
{
    sl_mc_rows *rows;
    sl_mc_plan *plan;
    int rc = family_plan(rq, "mc-tokens", rq->family.V, rq->family.gamma, &rows, &plan);
    sl_mc_opts mo = {rq->iterations ? (size_t)rq->iterations : 100000, rq->seed, 0, NULL, NULL, 0};
    sl_mc_result mres;
    sl_mc_prediction pred;
    if (!rc) rc = sl_mc_run(plan, &mo, &mres);
    if (!rc) rc = sl_mc_predict(plan, mres.iterations, &pred);
    if (!rc) rc = sl_plot_mc_tokens(&mres, &pred, 1 - rq->confidence, out);
    sl_mc_plan_free(plan);
    sl_mc_rows_free(rows);
    return rc;
}

static int make_power(const sl_plot_request *rq, sl_plot_figure *out)
{
    sl_plot_power_config pc;
    sl_plot_power_config_init(&pc);
    if (rq->tv.n) {
        pc.n_delta = rq->tv.n;
        memcpy(pc.delta, rq->tv.v, rq->tv.n * sizeof rq->tv.v[0]);
    }
    pc.df = rq->df;
    pc.level = rq->level;
    pc.n_lo = rq->n_min;
    pc.n_hi = rq->n_max;
    return sl_plot_verify_power(&pc, out);
}

static int make_qq(const sl_plot_request *rq, sl_plot_figure *out)
{
    if (rq->replications < 2) return sl_fail(SL_EINPUT, "replications: %zu, expected >= 2", rq->replications);
    sl_mc_rows *rows;
    sl_mc_plan *plan;
    int rc = family_plan(rq, "verify-qq", 8, 3, &rows, &plan); /* speclab verify's V and gamma */
    sl_verify_opts vo = SL_VERIFY_OPTS_DEFAULT;
    vo.iterations = rq->iterations ? (size_t)rq->iterations : 20000;
    vo.seed = rq->seed;
    sl_verify_uniformity_result *u = NULL;
    if (!rc) rc = sl_verify_uniformity(plan, &vo, rq->replications, &u);
    if (!rc) rc = sl_plot_verify_qq(u, out);
    sl_verify_uniformity_free(u);
    sl_mc_plan_free(plan);
    sl_mc_rows_free(rows);
    return rc;
}

/* One report per run log, or per gamma of a sweep log (labelled "NAME gamma=G"). */
static int make_runs(const sl_plot_request *rq, run_fn build, const char *const *paths, const char *const *names,
                     size_t n, sl_plot_figure *out)
{
    sl_run_report_config cfg = SL_RUN_REPORT_CONFIG_DEFAULT;
    if (rq->boot) cfg.boot = (long)rq->boot;
    cfg.ci = rq->ci;
    cfg.seed = rq->seed;
    const size_t cap = n * SL_RUN_MAX_GAMMAS;
    sl_run_report *rep = sl_calloc(cap, sizeof *rep);
    char **lab = sl_calloc(cap, sizeof *lab);
    if (!rep || !lab) {
        free(rep);
        free(lab);
        return SL_EFAIL;
    }
    size_t done = 0;
    int rc = SL_OK;
    for (size_t i = 0; i < n && !rc; i++) {
        int gam[SL_RUN_MAX_GAMMAS];
        size_t ng = 1;
        sl_log_reader *r = NULL;
        rc = sl_log_open(&r, paths[i]);
        if (!rc && sl_log_meta_of(r)->kind == SL_LOG_RUN && sl_log_meta_of(r)->gammas[0]) {
            ng = sl_run_log_gammas(sl_log_meta_of(r), gam);
            if (ng == 0) rc = SL_EINPUT;
        } else ng = 1, gam[0] = 0;
        if (r) sl_log_close(r);
        for (size_t k = 0; k < ng && !rc; k++) {
            cfg.gamma = gam[k];
            size_t len = strlen(names[i]) + 32;
            if (!(lab[done] = sl_malloc(len))) rc = SL_EFAIL;
            else if (ng > 1) snprintf(lab[done], len, "%s gamma=%d", names[i], gam[k]);
            else snprintf(lab[done], len, "%s", names[i]);
            if (!rc) rc = sl_run_report_file(paths[i], &cfg, &rep[done]);
            if (!rc) done++;
        }
    }
    if (!rc) rc = build(rep, (const char *const *)lab, done, out);
    for (size_t i = 0; i < done; i++) sl_run_report_free(&rep[i]);
    for (size_t i = 0; i < cap; i++) free(lab[i]);
    free(rep);
    free(lab);
    return rc;
}

/* ---- the request ---- */

/* "NAME=FILE" or "FILE" -> the path and the label (NAME, else the file's base name), in copy. */
static void split_input(char *copy, const char **name, const char **path)
{
    struct stat st;
    char *eq = strchr(copy, '=');
    if (eq && eq != copy && stat(copy, &st) != 0) {
        *eq = 0;
        *name = copy;
        *path = eq + 1;
        return;
    }
    const char *slash = strrchr(copy, '/');
    *name = slash ? slash + 1 : copy;
    *path = copy;
}

int sl_plot_make(const sl_plot_request *rq, sl_plot_figure *out)
{
    sl_plot_figure_init(out);
    size_t k = 0;
    while (k < N_KINDS && (!rq->kind || strcmp(kinds[k].name, rq->kind))) k++;
    if (k == N_KINDS) {
        char list[512] = "";
        for (size_t i = 0; i < N_KINDS; i++)
            snprintf(list + strlen(list), sizeof list - strlen(list), "%s%s", i ? ", " : "", kinds[i].name);
        return sl_fail(SL_EINPUT, "unknown kind '%s'; the kinds are %s", rq->kind ? rq->kind : "", list);
    }
    const kind_source src = kinds[k].src;
    const size_t n = rq->n_inputs;
    const int takes_logs = src == SRC_LOG || src == SRC_RUN;
    if (takes_logs && n == 0) return sl_fail(SL_EINPUT, "%s: give at least one LOG file", kinds[k].name);
    if (!takes_logs && n > 0) return sl_fail(SL_EINPUT, "%s takes no LOG files; got '%s'", kinds[k].name, rq->inputs[0]);
    if (src == SRC_RUN && rq->run_path) return sl_fail(SL_EINPUT, "run: %s reads run logs themselves", kinds[k].name);

    char **copies = NULL;
    const char **names = NULL, **paths = NULL;
    int rc = SL_OK;
    if (n) {
        copies = sl_calloc(n, sizeof *copies);
        names = sl_calloc(n, sizeof *names);
        paths = sl_calloc(n, sizeof *paths);
        if (!copies || !names || !paths) rc = SL_EFAIL;
        for (size_t i = 0; i < n && !rc; i++) {
            if (!(copies[i] = strdup(rq->inputs[i]))) rc = sl_fail(SL_EFAIL, "out of memory");
            else split_input(copies[i], &names[i], &paths[i]);
        }
    }
    if (!rc) switch (src) {
        case SRC_THEORY: rc = make_theory(rq, kinds[k].theory, out); break;
        case SRC_LOG: rc = make_logs(rq, kinds[k].log, kinds[k].log == sl_plot_lenience, paths, names, n, out); break;
        case SRC_MC: rc = make_mc(rq, out); break;
        case SRC_POWER: rc = make_power(rq, out); break;
        case SRC_QQ: rc = make_qq(rq, out); break;
        case SRC_RUN: rc = make_runs(rq, kinds[k].run, paths, names, n, out); break;
        }
    for (size_t i = 0; copies && i < n; i++) free(copies[i]);
    free(copies);
    free(names);
    free(paths);
    if (rc) return rc;

    if (rq->title) snprintf(out->title, sizeof out->title, "%s", rq->title);
    if (rq->key_set) {
        out->key = rq->key;
        for (size_t p = 0; p < out->n_panels; p++) out->panel[p].key = rq->key;
    }
    return SL_OK;
}
