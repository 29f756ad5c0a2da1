/* sl_recommend.c: the gamma to deploy, its speedup with a CI, and the latency spread (sl_recommend.h). */
#include "sl_recommend.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "sl_analyze.h"
#include "sl_common.h"

void sl_recommend_config_init(sl_recommend_config *cfg)
{
    memset(cfg, 0, sizeof *cfg);
    cfg->c = NAN;
    cfg->gamma_max = 12;
    cfg->answer_tokens = 128;
    cfg->n_sims = 10000;
    cfg->n_boot = 1000;
    cfg->ci_level = 0.95;
    cfg->seed = 1;
}

void sl_recommend_result_free(sl_recommend_result *res)
{
    free(res->path);
    res->path = NULL;
}

const char *sl_recommend_method_text(sl_recommend_method m)
{
    return m == SL_RECOMMEND_REPLAY ? "replay of logged beta sequences; CI: bootstrap over sequences"
                                    : "Equation 1 at alpha; CI: alpha's bootstrap CI mapped through the factor";
}

/* The expected speedup's CI at gamma g >= 1 by Equation 1: the factor is increasing in alpha, so
 * alpha's CI maps through it. a->vtab holds the v(n) actually used (the config's or the run log's).
 * Without a CI for alpha (fewer than two sequences or resamples) the bounds stay NaN. */
static void eq1_ci(const sl_analyze_result *a, int g, double c, double *lo, double *hi)
{
    double en, cost = sl_theory_iteration_cost((double)g, c, a->vtab[g]);
    *lo = *hi = NAN;
    if (isfinite(a->alpha_lo) && !sl_theory_expected_tokens(a->alpha_lo, g, &en)) *lo = en / cost;
    if (isfinite(a->alpha_hi) && !sl_theory_expected_tokens(a->alpha_hi, g, &en)) *hi = en / cost;
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

int sl_recommend_run(const sl_recommend_config *cfg, sl_recommend_result *res)
{
    memset(res, 0, sizeof *res);
    if (!cfg->path) return sl_fail(SL_EINPUT, "path: no log file given");
    if (cfg->answer_tokens < 1) return sl_fail(SL_EINPUT, "answer: %zu tokens; expected at least 1", cfg->answer_tokens);
    if (cfg->n_sims < 1) return sl_fail(SL_EINPUT, "sims: %zu; expected at least 1", cfg->n_sims);
    sl_analyze_opts o;
    sl_analyze_opts_init(&o);
    o.no_dists = 1;
    o.policy_reps = 0;
    o.c = cfg->c;
    o.vc = cfg->vc;
    o.gamma_max = cfg->gamma_max;
    o.n_boot = cfg->n_boot;
    o.ci_level = cfg->ci_level;
    o.seed = cfg->seed;
    sl_analyze_result a;
    int rc = sl_analyze_file(cfg->path, &o, &a);
    if (!rc && !isfinite(a.c_deploy))
        rc = sl_fail(SL_EINPUT, "c: %s has no measured costs; give the deployment c (draft step / target step)", cfg->path);
    if (!rc && !isfinite(a.alpha)) rc = sl_fail(SL_EINPUT, "%s holds no beta values", cfg->path);
    if (!rc) {
        res->path = sl_malloc(strlen(cfg->path) + 1);
        if (!res->path) rc = SL_EFAIL;
        else strcpy(res->path, cfg->path);
    }
    if (rc) {
        sl_analyze_result_free(&a);
        return rc;
    }
    /* cs[0] is the deployment c. Replay (measure logs) when windows exist, else Equation 1 at alpha. */
    int replay = a.have_replay, g = replay ? a.opt_rep[0] : a.opt_iid[0];
    res->alpha = a.alpha;
    res->c = a.c_deploy;
    res->c_source = a.c_source;
    res->gamma = g;
    res->at_cap = replay ? a.opt_rep_cap[0] : a.opt_iid_cap[0];
    res->speedup = replay ? a.optf_rep[0] : a.optf_iid[0];
    res->ci_level = o.ci_level;
    res->method = replay ? SL_RECOMMEND_REPLAY : SL_RECOMMEND_EQ1;
    res->answer_tokens = cfg->answer_tokens;
    if (g > 0 && replay) res->speedup_lo = a.sp_lo[g - 1], res->speedup_hi = a.sp_hi[g - 1];
    else if (g > 0) eq1_ci(&a, g, res->c, &res->speedup_lo, &res->speedup_hi);
    else res->speedup_lo = res->speedup_hi = 1;

    /* The latency spread, for the search range the analysis used (a measured v table may shorten it). */
    int cand[SL_RECOMMEND_MAX_CAND];
    size_t gam[SL_RECOMMEND_MAX_CAND];
    double q[SL_RECOMMEND_MAX_CAND * 4];
    res->n_cand = candidates(g, o.gamma_max, cand);
    for (size_t i = 0; i < res->n_cand; i++) gam[i] = (size_t)cand[i];
    if (!rc)
        rc = sl_analyze_latency(cfg->path, a.alpha, gam, res->n_cand, cfg->answer_tokens, cfg->n_sims, cfg->seed, res->c,
                                a.vtab, q);
    for (size_t i = 0; !rc && i < res->n_cand; i++)
        res->cand[i] = (sl_recommend_latency){cand[i], q[i * 4], q[i * 4 + 1], q[i * 4 + 2], q[i * 4 + 3]};
    sl_analyze_result_free(&a);
    if (rc) sl_recommend_result_free(res);
    return rc;
}

int sl_recommend_report(const sl_recommend_result *res, sl_table ***tables, size_t *n)
{
    static const sl_colspec rec_cols[] = {
        SL_COL_S("file"), SL_COL_D("alpha", "%.6g"), SL_COL_D("c", "%.6g"), SL_COL_S("c_source"), SL_COL_I("gamma"),
        SL_COL_D("expected_speedup", "%.6g"), SL_COL_D("speedup_ci_lo", "%.6g"), SL_COL_D("speedup_ci_hi", "%.6g"),
        SL_COL_D("ci_level", "%.6g"), SL_COL_I("gamma_at_search_cap"), SL_COL_S("method")};
    static const sl_colspec lat_cols[] = {
        SL_COL_I("gamma"), SL_COL_I("answer_tokens"), SL_COL_D("p50_target_steps", "%.4g"),
        SL_COL_D("p90_target_steps", "%.4g"), SL_COL_D("p99_target_steps", "%.4g"),
        SL_COL_D("mean_target_steps", "%.4g"), SL_COL_D("p99_over_p50", "%.4g"), SL_COL_I("recommended")};
    *tables = NULL;
    *n = 0;
    sl_table **ts = sl_calloc(2, sizeof *ts);
    if (!ts) return SL_EFAIL;
    sl_table *t = ts[0] = SL_TABLE_NEW("recommendation", rec_cols);
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
    sl_table_sets(t, "method", sl_recommend_method_text(res->method));
    sl_table *l = ts[1] = SL_TABLE_NEW("latency", lat_cols);
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
    int rc = sl_table_status(t);
    if (!rc) rc = sl_table_status(l);
    if (rc) {
        sl_table_free(t);
        sl_table_free(l);
        free(ts);
        return rc;
    }
    *tables = ts;
    *n = 2;
    return SL_OK;
}
