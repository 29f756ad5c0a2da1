/*
 * sl_verify_exact.c: exact deviation of one iteration and the iterations verify needs to see it
 * (sl_verify_exact.h).
 */
#include "sl_verify_exact.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "sl_common.h"
#include "sl_enum.h"
#include "sl_stats.h"
#include "sl_verify_internal.h"

/* One iteration of the rule's sampler on the plan, and what its paths emitted, by probability. */
typedef struct {
    const sl_spec_config *cfg;
    size_t V, gamma;
    int iid;
    const double *q;       /* (gamma, V) draft pmf of each position */
    const double *p;       /* (gamma + 1, V) target pmf of each position */
    double *p_work;        /* (gamma + 1, V) copy the sampler may modify (bug-p-inplace) */
    sl_spec_work *w;
    sl_spec_outcome oc;
    /* accumulated over paths: */
    double *first;         /* (V) */
    double *tok;           /* (gamma + 1, V) row k: k-th token when N >= k (k = 2..gamma) */
    double mass_tok[SL_SPEC_GAMMA_MAX + 1];
    double *bonus;         /* (V) */
    double mass_bonus;
    double *rej;           /* (gamma, V) row k - 1: emitted at a rejection at position k (iid: row 0) */
    double mass_rej[SL_SPEC_GAMMA_MAX];
    double *all;           /* (V) expected count of each token per iteration */
    double tokens;         /* expected tokens per iteration */
} enum_ctx;

static int run_iteration(void *ctx, sl_rand *rand)
{
    enum_ctx *c = ctx;
    int32_t drafts[SL_SPEC_GAMMA_MAX];
    for (size_t i = 0; i < c->gamma; i++)
        drafts[i] = (int32_t)sl_spec_draft(c->cfg, c->q + i * c->V, NULL, c->V, rand, c->w);
    memcpy(c->p_work, c->p, (c->gamma + 1) * c->V * sizeof *c->p);
    return sl_spec_verify(c->cfg, c->gamma, c->V, c->q, c->p_work, drafts, NULL, rand, c->w, &c->oc);
}

/* Mirrors the counting of sl_verify_samples, weighted by the path's probability. */
static void record_iteration(void *ctx, double prob)
{
    enum_ctx *c = ctx;
    const int32_t *x = c->oc.tokens;
    size_t k = c->oc.n_emitted, V = c->V;
    c->first[x[0]] += prob;
    for (size_t j = 2; j <= k && j <= c->gamma; j++) {
        c->tok[j * V + (size_t)x[j - 1]] += prob;
        c->mass_tok[j] += prob;
    }
    if (k == c->gamma + 1) {
        c->bonus[x[c->gamma]] += prob;
        c->mass_bonus += prob;
    } else {
        size_t r = c->iid ? 0 : k - 1;
        c->rej[r * V + (size_t)x[k - 1]] += prob;
        c->mass_rej[r] += prob;
    }
    for (size_t j = 0; j < k; j++) c->all[x[j]] += prob;
    c->tokens += prob * (double)k;
}

static size_t positive(const double *pmf, size_t V)
{
    size_t m = 0;
    for (size_t x = 0; x < V; x++) m += pmf[x] > 0;
    return m;
}

/* The tests sl_verify_samples builds for the plan in one-sample mode, by their null pmfs (V each,
 * in verify's order) into nulls (up to 2 gamma + 4 rows) and names; returns how many. */
static size_t planned_tests(const sl_mc_plan *plan, double *nulls, char (*names)[32])
{
    const size_t V = sl_mc_plan_vocab(plan), gamma = sl_mc_plan_gamma(plan);
    const sl_spec_config *cfg = sl_mc_plan_config(plan);
    const int iid = sl_mc_plan_layout(plan) == SL_MC_IID;
    size_t n = 0;
    snprintf(names[n], 32, "first");
    sl_verify_null_target(cfg, sl_mc_plan_p(plan, 0), V, nulls + n++ * V);
    for (size_t k = 2; k <= gamma; k++) {
        snprintf(names[n], 32, "token_%zu", k);
        sl_verify_null_target(cfg, sl_mc_plan_p(plan, iid ? 0 : k - 1), V, nulls + n++ * V);
    }
    snprintf(names[n], 32, "bonus");
    sl_verify_null_target(cfg, sl_mc_plan_p(plan, iid ? 0 : gamma), V, nulls + n++ * V);
    for (size_t k = 1; k <= (iid ? 1 : gamma); k++) {
        if (iid) snprintf(names[n], 32, "after_rejection");
        else snprintf(names[n], 32, "after_rejection_%zu", k);
        sl_verify_null_rejection(cfg, sl_mc_plan_p(plan, iid ? 0 : k - 1), sl_mc_plan_q(plan, iid ? 0 : k - 1), V,
                                 nulls + n++ * V);
    }
    if (iid) {
        snprintf(names[n], 32, "all");
        sl_verify_null_target(cfg, sl_mc_plan_p(plan, 0), V, nulls + n++ * V);
    }
    return n;
}

/* Holm's m: the planned tests with a non-degenerate null, plus the pair and triple tests (same
 * null support as `all`) when V^m fits verify's joint table. */
static size_t counted_tests(const sl_mc_plan *plan, const double *nulls, size_t n)
{
    const size_t V = sl_mc_plan_vocab(plan);
    size_t m = 0;
    for (size_t i = 0; i < n; i++) m += positive(nulls + i * V, V) >= 2;
    if (sl_mc_plan_layout(plan) == SL_MC_IID && positive(nulls + (n - 1) * V, V) >= 2) {
        m += V * V <= 4096;
        m += V * V * V <= 4096;
    }
    return m;
}

int sl_verify_iterations_for_tv(const sl_mc_plan *plan, double tv, double level, double power, size_t *m,
                                double *iterations)
{
    const size_t V = sl_mc_plan_vocab(plan), gamma = sl_mc_plan_gamma(plan);
    if (!(tv > 0 && tv <= 1)) return sl_fail(SL_EINPUT, "tv: %g, expected 0 < tv <= 1", tv);
    double *nulls = sl_malloc((2 * gamma + 4) * V * sizeof *nulls);
    char(*names)[32] = sl_malloc((2 * gamma + 4) * sizeof *names);
    int rc = nulls && names ? SL_OK : SL_EFAIL;
    if (!rc) {
        size_t n = planned_tests(plan, nulls, names);
        *m = counted_tests(plan, nulls, n);
        double df = (double)positive(nulls, V) - 1;
        if (df < 1) rc = sl_fail(SL_EINPUT, "tv: the first-token null has a single possible token; no power to plan");
        else rc = sl_stats_n_for_tv(tv, df, level / (double)(*m ? *m : 1), power, iterations);
    }
    free(nulls);
    free(names);
    return rc;
}

/* Observations for the power at level a against this very alternative obs (vs null, V): the
 * chi^2 test's noncentrality is n w^2 with Cohen's w^2 = sum over the null's support of
 * (obs - null)^2 / null, so n = lambda(df, a, power) / w^2. Mass outside the null's support is
 * impossible under it (p = 0 at the first such token): n = log(1 - power) / log(1 - mass) suffices
 * too. The fewer of the two; inf when obs is the null up to rounding. */
static double needed(const double *obs, const double *null, size_t V, double tv, double df, double a, double power)
{
    if (!(tv > SL_VERIFY_EXACT_TV_ZERO)) return INFINITY;
    double w2 = 0, outside = 0, n = INFINITY, lambda;
    for (size_t x = 0; x < V; x++) {
        if (null[x] > 0) w2 += (obs[x] - null[x]) * (obs[x] - null[x]) / null[x];
        else outside += obs[x];
    }
    if (outside > SL_VERIFY_EXACT_TV_ZERO) n = outside >= 1 ? 1 : ceil(log1p(-power) / log1p(-outside));
    if (df >= 1 && w2 > 0 && !sl_stats_lambda_for_power(df, a, power, &lambda)) n = fmin(n, ceil(lambda / w2));
    return n;
}

int sl_verify_exact(const sl_mc_plan *plan, double level, double power, size_t max_paths,
                    sl_verify_exact_result *out)
{
    memset(out, 0, sizeof *out);
    if (!(level > 0 && level < 1)) return sl_fail(SL_EINPUT, "level: %g, expected 0 < level < 1", level);
    if (!(power > 0 && power < 1)) return sl_fail(SL_EINPUT, "power: %g, expected 0 < power < 1", power);
    if (sl_mc_plan_layout(plan) == SL_MC_SLIDING)
        return sl_fail(SL_EINPUT, "exact: a sliding (logged) source has no known joint target pmf");
    const size_t V = sl_mc_plan_vocab(plan), gamma = sl_mc_plan_gamma(plan);
    const sl_spec_config *cfg = sl_mc_plan_config(plan);
    enum_ctx c = {.cfg = cfg, .V = V, .gamma = gamma, .iid = sl_mc_plan_layout(plan) == SL_MC_IID};
    double *buf = calloc((2 * gamma + 1) * V + (gamma + 1) * V + 3 * V + (gamma + 1) * V + gamma * V, sizeof *buf);
    double *nulls = sl_malloc((2 * gamma + 4) * V * sizeof *nulls);
    char(*names)[32] = sl_malloc((2 * gamma + 4) * sizeof *names);
    c.w = sl_spec_work_alloc(gamma, V);
    int rc = buf && nulls && names && c.w ? SL_OK : sl_fail(SL_EFAIL, "out of memory allocating the enumeration");
    if (rc) goto done;
    double *q = buf, *p = q + gamma * V;
    c.q = q;
    c.p = p;
    c.p_work = p + (gamma + 1) * V;
    c.first = c.p_work + (gamma + 1) * V;
    c.bonus = c.first + V;
    c.all = c.bonus + V;
    c.tok = c.all + V;
    c.rej = c.tok + (gamma + 1) * V;
    for (size_t i = 0; i <= gamma; i++) {
        size_t row = c.iid ? 0 : i;
        if (i < gamma) memcpy(q + i * V, sl_mc_plan_q(plan, row), V * sizeof *q);
        memcpy(p + i * V, sl_mc_plan_p(plan, row), V * sizeof *p);
    }
    if ((rc = sl_enum_paths(run_iteration, record_iteration, &c, max_paths, &out->paths))) {
        if (rc == SL_EFAIL)
            rc = sl_fail(SL_EINPUT, "exact: one iteration has more than %zu paths (V = %zu, gamma = %zu); use a "
                         "smaller vocabulary or gamma", max_paths, V, gamma);
        goto done;
    }
    size_t n = planned_tests(plan, nulls, names);
    out->rule = cfg->rule;
    out->lenience = cfg->lenience;
    out->vocab = V;
    out->gamma = gamma;
    out->level = level;
    out->power = power;
    out->m = counted_tests(plan, nulls, n);
    out->iterations_needed = INFINITY;
    out->first_to_detect = "none";
    const double a = level / (double)(out->m ? out->m : 1);
    for (size_t i = 0; i < n; i++) {
        /* What test i observes, as verify lays the tests out (planned_tests' order). */
        const double *obs;
        double per;
        const char *nm = names[i];
        if (!strcmp(nm, "first")) obs = c.first, per = 1;
        else if (!strncmp(nm, "token_", 6)) {
            size_t k = (size_t)atoi(nm + 6);
            obs = c.tok + k * V, per = c.mass_tok[k];
        } else if (!strcmp(nm, "bonus")) obs = c.bonus, per = c.mass_bonus;
        else if (!strncmp(nm, "after_rejection", 15)) {
            size_t r = c.iid ? 0 : (size_t)atoi(nm + 16) - 1;
            obs = c.rej + r * V, per = c.mass_rej[r];
        } else obs = c.all, per = c.tokens;
        sl_verify_exact_row *row = &out->row[out->n_rows++];
        snprintf(row->name, sizeof row->name, "%s", nm);
        row->per_iteration = per;
        row->df = (double)positive(nulls + i * V, V) - 1;
        row->tv = row->n_needed = row->iterations_needed = NAN;
        if (!(per > 0)) continue; /* the test never gets an observation */
        double tv = 0, *cond = c.p_work; /* scratch: the conditional law the test observes */
        for (size_t x = 0; x < V; x++) {
            cond[x] = obs[x] / per;
            tv += fabs(cond[x] - nulls[i * V + x]);
        }
        row->tv = 0.5 * tv;
        row->n_needed = needed(cond, nulls + i * V, V, row->tv, row->df, a, power);
        row->n_tv_bound = NAN;
        if (row->tv > SL_VERIFY_EXACT_TV_ZERO && row->df >= 1) sl_stats_n_for_tv(row->tv, row->df, a, power, &row->n_tv_bound);
        row->iterations_needed = row->n_needed / per;
        out->max_tv = fmax(out->max_tv, row->tv);
        if (row->iterations_needed < out->iterations_needed) {
            out->iterations_needed = row->iterations_needed;
            out->first_to_detect = out->row[out->n_rows - 1].name;
        }
    }
done:
    free(buf);
    free(nulls);
    free(names);
    sl_spec_work_free(c.w);
    return rc;
}

int sl_verify_exact_report(const sl_verify_exact_result *r, sl_table **tables, size_t *n_tables)
{
    static const sl_colspec ecols[] = {
        SL_COL_S("rule"), SL_COL_D("lenience", "%g"), SL_COL_I("vocab"), SL_COL_I("gamma"), SL_COL_I("paths"),
        SL_COL_I("tests"), SL_COL_D("level", "%g"), SL_COL_D("power", "%g"), SL_COL_D("max_tv", "%.3g"),
        SL_COL_D("iterations_needed", "%.4g"), SL_COL_S("first_to_detect")};
    static const sl_colspec rcols[] = {SL_COL_S("test"), SL_COL_D("per_iteration", "%.4f"), SL_COL_D("tv", "%.3g"),
                                       SL_COL_I("df"), SL_COL_D("n_needed", "%.4g"), SL_COL_D("n_tv_bound", "%.4g"),
                                       SL_COL_D("iterations_needed", "%.4g")};
    *n_tables = 0;
    sl_table *e = SL_TABLE_NEW("exact", ecols), *t = SL_TABLE_NEW("rows", rcols);
    sl_table_row(e);
    sl_table_sets(e, "rule", sl_rule_name(r->rule));
    sl_table_setd(e, "lenience", r->lenience);
    sl_table_seti(e, "vocab", (int64_t)r->vocab);
    sl_table_seti(e, "gamma", (int64_t)r->gamma);
    sl_table_seti(e, "paths", (int64_t)r->paths);
    sl_table_seti(e, "tests", (int64_t)r->m);
    sl_table_setd(e, "level", r->level);
    sl_table_setd(e, "power", r->power);
    sl_table_setd(e, "max_tv", r->max_tv);
    sl_table_setd(e, "iterations_needed", isinf(r->iterations_needed) ? NAN : r->iterations_needed);
    sl_table_sets(e, "first_to_detect", r->first_to_detect);
    for (size_t i = 0; i < r->n_rows; i++) {
        const sl_verify_exact_row *w = &r->row[i];
        sl_table_row(t);
        sl_table_sets(t, "test", w->name);
        sl_table_setd(t, "per_iteration", w->per_iteration);
        sl_table_setd(t, "tv", w->tv);
        sl_table_seti(t, "df", (int64_t)w->df);
        sl_table_setd(t, "n_needed", isinf(w->n_needed) ? NAN : w->n_needed);
        sl_table_setd(t, "n_tv_bound", w->n_tv_bound);
        sl_table_setd(t, "iterations_needed", isinf(w->iterations_needed) ? NAN : w->iterations_needed);
    }
    int rc = sl_table_status(e);
    if (!rc) rc = sl_table_status(t);
    if (rc) {
        sl_table_free(e);
        sl_table_free(t);
        return rc;
    }
    tables[(*n_tables)++] = e;
    tables[(*n_tables)++] = t;
    return SL_OK;
}
