/*
 * sl_verify.c: the tests of sl_verify.h over the tokens an sl_mc run emitted.
 */
#include "sl_verify.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <gsl/gsl_cdf.h>

#include "sl_common.h"
#include "sl_stats.h"

#define JOINT_MAX_CELLS 4096
#define MAX_TESTS SL_VERIFY_MAX_TESTS

typedef struct {
    char name[32];
    size_t k;          /* categories */
    uint64_t *counts;  /* (k) speculative sample */
    uint64_t *counts_b;/* (k) plain target sample (two-sample mode) or NULL */
    double *pmf;       /* (k) null pmf (one-sample mode) or NULL */
} vtest;

static vtest *add_test(vtest *tests, size_t *n, const char *name, size_t k, int with_pmf, int with_b)
{
    if (*n >= MAX_TESTS) return NULL;
    vtest *t = &tests[(*n)++];
    snprintf(t->name, sizeof t->name, "%s", name);
    t->k = k;
    t->counts = calloc(k, sizeof *t->counts);
    t->counts_b = with_b ? calloc(k, sizeof *t->counts_b) : NULL;
    t->pmf = with_pmf ? calloc(k, sizeof *t->pmf) : NULL;
    if (!t->counts || (with_b && !t->counts_b) || (with_pmf && !t->pmf)) {
        sl_fail(SL_EFAIL, "out of memory allocating verify counts");
        return NULL;
    }
    return t;
}

static void onehot(double *out, const double *p, size_t V)
{
    memset(out, 0, V * sizeof *out);
    out[sl_dist_argmax(p, V)] = 1;
}

/* The target pmf the rule must reproduce at a position. */
static void target_pmf(const sl_spec_config *cfg, const double *p, size_t V, double *out)
{
    if (cfg->rule == SL_RULE_LENIENT_T0) onehot(out, p, V);
    else memcpy(out, p, V * sizeof *out);
}

/* The pmf of the token emitted at a rejection, as the rule prescribes it. */
static void rejection_pmf(const sl_spec_config *cfg, const double *p, const double *q, size_t V, double *out)
{
    if (cfg->rule == SL_RULE_LENIENT_T0) {
        onehot(out, p, V);
    } else if (cfg->rule == SL_RULE_SAMPLER_MATCH) {
        double z = 0;
        for (size_t x = 0; x < V; x++) z += out[x] = p[x] * (1 - q[x]);
        for (size_t x = 0; x < V; x++) out[x] = z > 0 ? out[x] / z : p[x];
    } else {
        sl_dist_residual(p, q, V, out);
    }
}

/* Product pmf of m copies of p (V): index = x_1 V^{m-1} + ... + x_m. */
static void product_pmf(const double *p, size_t V, int m, double *out)
{
    size_t K = 1;
    for (int j = 0; j < m; j++) K *= V;
    for (size_t idx = 0; idx < K; idx++) {
        double v = 1;
        size_t r = idx;
        for (int j = 0; j < m; j++) {
            v *= p[r % V];
            r /= V;
        }
        out[idx] = v;
    }
}

static int add_col(sl_table *t, const char *name, sl_coltype ty, const char *fmt)
{
    return sl_table_add_col(t, name, ty, fmt);
}

int sl_verify_uniformity(const sl_mc_plan *plan, const sl_verify_opts *o, size_t replications, sl_table **out,
                         double *ks_min_p)
{
    *out = NULL;
    *ks_min_p = 1;
    if (replications < 2) return sl_fail(SL_EINPUT, "--replications: %zu, expected >= 2", replications);
    double *pv = sl_malloc(replications * MAX_TESTS * sizeof *pv); /* (MAX_TESTS, replications) */
    sl_verify_summary *s = sl_malloc(sizeof *s);
    char names[MAX_TESTS][32];
    size_t nrows = 0;
    int rc = SL_OK;
    if (!pv || !s) {
        rc = SL_EFAIL;
        goto done;
    }
    for (size_t r = 0; r < replications; r++) {
        sl_verify_opts ro = *o;
        ro.seed = o->seed + r;
        sl_table *tabs[3];
        size_t nt;
        if ((rc = sl_verify_run(plan, &ro, tabs, &nt, s))) goto done;
        for (size_t i = 0; i < nt; i++) sl_table_free(tabs[i]);
        if (r == 0) {
            nrows = s->n_rows;
            memcpy(names, s->test_name, sizeof names);
        }
        for (size_t i = 0; i < nrows; i++) pv[i * replications + r] = s->p_random[i];
    }
    sl_table *t = sl_table_alloc("uniformity");
    if (!t) {
        rc = SL_EFAIL;
        goto done;
    }
    add_col(t, "test", SL_COL_STRING, NULL);
    add_col(t, "replications", SL_COL_INT, NULL);
    add_col(t, "ks_d", SL_COL_DOUBLE, "%.4f");
    add_col(t, "ks_p", SL_COL_DOUBLE, "%.4g");
    add_col(t, "mean_p", SL_COL_DOUBLE, "%.4f");
    add_col(t, "rejected_fraction", SL_COL_DOUBLE, "%.4f");
    for (size_t i = 0; i < nrows; i++) {
        /* Replications without data for this test (NaN) are left out. */
        double *x = pv + i * replications, mean = 0, rej = 0;
        size_t m = 0;
        for (size_t r = 0; r < replications; r++)
            if (!isnan(x[r])) {
                x[m++] = x[r];
                mean += x[r];
                rej += x[r] <= o->level;
            }
        sl_table_add_row(t);
        sl_table_set_string(t, 0, names[i]);
        sl_table_set_int(t, 1, (int64_t)m);
        if (m < 2) continue;
        double D, p;
        if ((rc = sl_stats_ks_uniform(x, m, &D, &p))) {
            sl_table_free(t);
            goto done;
        }
        sl_table_set_double(t, 2, D);
        sl_table_set_double(t, 3, p);
        sl_table_set_double(t, 4, mean / (double)m);
        sl_table_set_double(t, 5, rej / (double)m);
        *ks_min_p = fmin(*ks_min_p, p);
    }
    *out = t;
done:
    free(pv);
    free(s);
    return rc;
}

int sl_verify_power_table(double delta, double df, double a, double power, sl_table **out)
{
    *out = NULL;
    double lambda, n;
    int rc = sl_stats_lambda_for_power(df, a, power, &lambda);
    if (!rc) rc = sl_stats_n_for_tv(delta, df, a, power, &n);
    if (rc) return rc;
    sl_table *t = sl_table_alloc("power");
    if (!t) return SL_EFAIL;
    add_col(t, "df", SL_COL_INT, NULL);
    add_col(t, "level", SL_COL_DOUBLE, "%g");
    add_col(t, "power", SL_COL_DOUBLE, "%g");
    add_col(t, "tv", SL_COL_DOUBLE, "%g");
    add_col(t, "lambda", SL_COL_DOUBLE, "%.4f");
    add_col(t, "n", SL_COL_INT, NULL);
    sl_table_add_row(t);
    sl_table_set_int(t, 0, (int64_t)df);
    sl_table_set_double(t, 1, a);
    sl_table_set_double(t, 2, power);
    sl_table_set_double(t, 3, delta);
    sl_table_set_double(t, 4, lambda);
    sl_table_set_int(t, 5, (int64_t)n);
    *out = t;
    return SL_OK;
}

int sl_verify_run(const sl_mc_plan *plan, const sl_verify_opts *o, sl_table **tables, size_t *n_tables,
                  sl_verify_summary *sum)
{
    *n_tables = 0;
    memset(sum, 0, sizeof *sum);
    sum->lenience_excess = NAN;
    sum->max_freq_ratio = NAN;
    if (!(o->level > 0 && o->level < 1)) return sl_fail(SL_EINPUT, "--level: %g, expected 0 < level < 1", o->level);
    if (!(o->tv_delta > 0 && o->tv_delta <= 1)) return sl_fail(SL_EINPUT, "--tv: %g, expected 0 < tv <= 1", o->tv_delta);
    const size_t V = sl_mc_plan_vocab(plan), gamma = sl_mc_plan_gamma(plan), N = o->iterations;
    const sl_spec_config *cfg = sl_mc_plan_config(plan);
    const int iid = sl_mc_plan_layout(plan) == SL_MC_IID;
    if (sl_mc_plan_layout(plan) == SL_MC_SLIDING)
        return sl_fail(SL_EINPUT, "verify: a sliding (logged) source has no known joint target pmf");
    if (o->two_sample && !iid) return sl_fail(SL_EINPUT, "--two-sample: needs a family with the same pair at every position");

    int32_t *tok = sl_malloc(N * (gamma + 1) * sizeof *tok); /* (N, gamma+1) */
    uint8_t *nem = sl_malloc(N);                             /* (N) */
    vtest tests[MAX_TESTS];
    size_t nt = 0;
    memset(tests, 0, sizeof tests);
    int rc = SL_OK;
    double *scratch = NULL, *adj = NULL, *prim = NULL;
    gsl_rng *tr = NULL;
    sl_alias *pal = NULL;
    sl_table *tt = NULL, *vt = NULL, *lt = NULL;
    if (!tok || !nem) {
        rc = SL_EFAIL;
        goto done;
    }
    sl_mc_opts mo = {N, o->seed, o->threads, tok, nem, 1}; /* the sampler's own code */
    sl_mc_result res;
    if ((rc = sl_mc_run(plan, &mo, &res))) goto done;

    /* ---- counts ---- */
    size_t idx_first = 0, idx_k = 0, idx_bonus = 0, idx_rej = 0, idx_all = SIZE_MAX, idx_joint[4] = {0, 0, SIZE_MAX, SIZE_MAX};
    size_t Kj[4] = {1, V, V * V, V * V * V};
    if (!o->two_sample) {
        vtest *t;
        char name[32];
        if (!(t = add_test(tests, &nt, "first", V, 1, 0))) { rc = SL_EFAIL; goto done; }
        target_pmf(cfg, sl_mc_plan_p(plan, 0), V, t->pmf);
        idx_first = 0;
        idx_k = nt;
        for (size_t k = 2; k <= gamma; k++) {
            snprintf(name, sizeof name, "token_%zu", k);
            if (!(t = add_test(tests, &nt, name, V, 1, 0))) { rc = SL_EFAIL; goto done; }
            target_pmf(cfg, sl_mc_plan_p(plan, iid ? 0 : k - 1), V, t->pmf);
        }
        idx_bonus = nt;
        if (!(t = add_test(tests, &nt, "bonus", V, 1, 0))) { rc = SL_EFAIL; goto done; }
        target_pmf(cfg, sl_mc_plan_p(plan, iid ? 0 : gamma), V, t->pmf);
        idx_rej = nt;
        for (size_t k = 1; k <= (iid ? 1 : gamma); k++) {
            if (iid) snprintf(name, sizeof name, "after_rejection");
            else snprintf(name, sizeof name, "after_rejection_%zu", k);
            if (!(t = add_test(tests, &nt, name, V, 1, 0))) { rc = SL_EFAIL; goto done; }
            rejection_pmf(cfg, sl_mc_plan_p(plan, iid ? 0 : k - 1), sl_mc_plan_q(plan, iid ? 0 : k - 1), V, t->pmf);
        }
    }
    if (iid) {
        vtest *t;
        idx_all = nt;
        if (!(t = add_test(tests, &nt, "all", V, !o->two_sample, o->two_sample))) { rc = SL_EFAIL; goto done; }
        if (!o->two_sample) target_pmf(cfg, sl_mc_plan_p(plan, 0), V, t->pmf);
        for (int m = 2; m <= 3; m++) {
            if (Kj[m] > JOINT_MAX_CELLS || Kj[m] / V != Kj[m - 1]) continue;
            if (o->two_sample && m == 3) continue;
            idx_joint[m] = nt;
            if (!(t = add_test(tests, &nt, m == 2 ? "pair" : "triple", Kj[m], !o->two_sample, o->two_sample))) {
                rc = SL_EFAIL;
                goto done;
            }
            if (!o->two_sample) {
                double *tp = sl_malloc(V * sizeof *tp);
                if (!tp) { rc = SL_EFAIL; goto done; }
                target_pmf(cfg, sl_mc_plan_p(plan, 0), V, tp);
                product_pmf(tp, V, m, t->pmf);
                free(tp);
            }
        }
    }
    /* Walk the iterations in order (t = 0..N-1): the concatenated stream is the same for any
     * thread count because the run wrote each iteration into its own slot. */
    size_t blk[4] = {0}, blen[4] = {0};
    for (size_t t = 0; t < N; t++) {
        const int32_t *x = tok + t * (gamma + 1);
        size_t k = nem[t];
        for (size_t j = 0; j < k; j++)
            if (x[j] < 0 || (size_t)x[j] >= V) {
                rc = sl_fail(SL_EFAIL, "verify: iteration %zu emitted token %d outside [0, %zu)", t, x[j], V);
                goto done;
            }
        if (!o->two_sample) {
            tests[idx_first].counts[x[0]]++;
            for (size_t j = 2; j <= k && j <= gamma; j++) tests[idx_k + j - 2].counts[x[j - 1]]++;
            if (k == gamma + 1) tests[idx_bonus].counts[x[gamma]]++;
            else tests[idx_rej + (iid ? 0 : k - 1)].counts[x[k - 1]]++;
        }
        if (!iid) continue;
        for (size_t j = 0; j < k; j++) {
            tests[idx_all].counts[x[j]]++;
            for (int m = 2; m <= 3; m++) {
                if (idx_joint[m] == SIZE_MAX) continue;
                blk[m] = blk[m] * V + (size_t)x[j];
                if (++blen[m] == (size_t)m) {
                    tests[idx_joint[m]].counts[blk[m]]++;
                    blk[m] = blen[m] = 0;
                }
            }
        }
    }
    if (o->two_sample) {
        /* As many plain target tokens as the speculative stream emitted, one generator read in
         * order, so the sample does not depend on threads either. */
        tr = sl_rng_alloc(o->seed, SL_STREAM_TARGET, UINT64_MAX);
        pal = sl_alias_alloc(V);
        double *tp = sl_malloc(V * sizeof *tp);
        if (!tr || !pal || !tp) {
            free(tp);
            rc = SL_EFAIL;
            goto done;
        }
        target_pmf(cfg, sl_mc_plan_p(plan, 0), V, tp); /* lenient-t0: the target is argmax p */
        sl_alias_build(pal, tp);
        free(tp);
        memset(blk, 0, sizeof blk);
        memset(blen, 0, sizeof blen);
        for (uint64_t i = 0; i < res.tokens; i++) {
            size_t x = sl_alias_sample(pal, tr);
            tests[idx_all].counts_b[x]++;
            if (idx_joint[2] != SIZE_MAX) {
                blk[2] = blk[2] * V + x;
                if (++blen[2] == 2) {
                    tests[idx_joint[2]].counts_b[blk[2]]++;
                    blk[2] = blen[2] = 0;
                }
            }
        }
    }

    /* ---- tests ---- */
    scratch = sl_malloc(8 * MAX_TESTS * sizeof *scratch);
    adj = sl_malloc(MAX_TESTS * sizeof *adj);
    prim = sl_malloc(MAX_TESTS * sizeof *prim);
    if (!scratch || !adj || !prim) { rc = SL_EFAIL; goto done; }
    double *px = scratch, *pg = px + MAX_TESTS, *pe = pg + MAX_TESTS, *stat_x = pe + MAX_TESTS,
           *stat_g = stat_x + MAX_TESTS, *tv = stat_g + MAX_TESTS, *tvlo = tv + MAX_TESTS, *tvhi = tvlo + MAX_TESTS;
    size_t cells[MAX_TESTS], nobs[MAX_TESTS], live[MAX_TESTS], n_live = 0;
    double prand[MAX_TESTS]; /* randomized primary p-values (continuous under the null) */
    const char *method[MAX_TESTS];
    double dfv[MAX_TESTS];
    for (size_t i = 0; i < nt; i++) {
        vtest *t = &tests[i];
        uint64_t n = 0, nb = 0;
        size_t m_pos = 0;
        for (size_t j = 0; j < t->k; j++) {
            n += t->counts[j];
            if (t->counts_b) nb += t->counts_b[j];
            if (t->pmf && t->pmf[j] > 0) m_pos++;
        }
        nobs[i] = n;
        pe[i] = NAN;
        method[i] = "none";
        prand[i] = NAN;
        if (n == 0 || (t->counts_b && nb == 0)) {
            px[i] = pg[i] = prim[i] = NAN;
            stat_x[i] = stat_g[i] = tv[i] = tvlo[i] = tvhi[i] = NAN;
            cells[i] = 0;
            dfv[i] = 0;
            continue;
        }
        sl_gof gx, gg;
        if (t->counts_b) {
            if ((rc = sl_stats_homogeneity(t->counts, t->counts_b, t->k, SL_GOF_PEARSON, &gx))) goto done;
            if ((rc = sl_stats_homogeneity(t->counts, t->counts_b, t->k, SL_GOF_G, &gg))) goto done;
            double d = 0;
            for (size_t j = 0; j < t->k; j++) d += fabs((double)t->counts[j] / (double)n - (double)t->counts_b[j] / (double)nb);
            tv[i] = 0.5 * d;
            /* Each empirical pmf within its Hoeffding-union radius at level/2. */
            double lk = (double)t->k * log(2.0) + log(2.0 / o->level);
            double eps = sqrt(lk / (2.0 * (double)n)) + sqrt(lk / (2.0 * (double)nb));
            tvlo[i] = fmax(0, tv[i] - eps);
            tvhi[i] = fmin(1, tv[i] + eps);
            method[i] = "homogeneity";
            prim[i] = gx.p_value;
            prand[i] = gx.p_value;
        } else {
            if ((rc = sl_stats_gof(t->counts, t->pmf, t->k, SL_GOF_PEARSON, &gx))) goto done;
            if ((rc = sl_stats_gof(t->counts, t->pmf, t->k, SL_GOF_G, &gg))) goto done;
            if ((rc = sl_stats_tv_ci(t->counts, t->pmf, t->k, o->level, &tv[i], &tvlo[i], &tvhi[i]))) goto done;
            prim[i] = gx.p_value;
            prand[i] = gx.p_value;
            method[i] = "asymptotic";
            if (m_pos >= 2 && !gx.impossible && (n < 5 * m_pos || gx.n_cells < 2)) {
                /* Small counts: the chi^2 approximation is not trusted; exact where affordable. */
                double outcomes = sl_stats_multinomial_outcomes(n, m_pos);
                double p_gt;
                if (outcomes <= 1e6) {
                    if ((rc = sl_stats_exact_multinomial_ext(t->counts, t->pmf, t->k, 1e6, &pe[i], &p_gt))) goto done;
                    method[i] = "exact";
                } else {
                    if ((rc = sl_stats_mc_multinomial_ext(t->counts, t->pmf, t->k, o->mc_sims, o->seed + i, &pe[i], &p_gt)))
                        goto done;
                    method[i] = "monte-carlo";
                }
                prim[i] = pe[i];
                /* The uniformity self-check needs continuous p-values: randomize the ties. */
                gsl_rng *ur = sl_rng_alloc(o->seed, SL_STREAM_BOOT, 1000 + i);
                if (!ur) { rc = SL_EFAIL; goto done; }
                prand[i] = sl_stats_randomized_p(pe[i], p_gt, sl_rng_uniform53(ur));
                gsl_rng_free(ur);
            }
        }
        px[i] = gx.p_value;
        pg[i] = gg.p_value;
        stat_x[i] = gx.stat;
        stat_g[i] = gg.stat;
        cells[i] = gx.n_cells;
        dfv[i] = gx.df;
        /* A null pmf with one possible token (or a table left with one cell) carries no
         * information unless an impossible token was seen: its constant p = 1 would only dilute
         * Holm and break the uniformity self-check, so it is reported but not counted. */
        int degenerate = t->counts_b ? gx.n_cells < 2 : (m_pos < 2 && !gx.impossible);
        if (degenerate) {
            method[i] = "degenerate";
            prim[i] = prand[i] = NAN;
            continue;
        }
        live[n_live++] = i;
    }
    double live_p[MAX_TESTS], live_adj[MAX_TESTS];
    for (size_t j = 0; j < n_live; j++) live_p[j] = prim[live[j]];
    if ((rc = sl_stats_holm(live_p, n_live, live_adj))) goto done;
    for (size_t i = 0; i < nt; i++) adj[i] = NAN;
    sum->min_p_holm = 1;
    sum->min_p = 1;
    for (size_t j = 0; j < n_live; j++) {
        adj[live[j]] = live_adj[j];
        sum->min_p_holm = fmin(sum->min_p_holm, live_adj[j]);
        sum->min_p = fmin(sum->min_p, live_p[j]);
        sum->n_rejected += live_adj[j] <= o->level;
    }
    sum->n_tests = n_live;
    sum->n_rows = nt;
    for (size_t i = 0; i < nt; i++) {
        snprintf(sum->test_name[i], sizeof sum->test_name[i], "%s", tests[i].name);
        sum->p_value[i] = prim[i];
        sum->p_random[i] = prand[i];
    }
    sum->rejected = sum->n_rejected > 0;
    double power_level = o->level / (double)(n_live ? n_live : 1);

    tt = sl_table_alloc("tests");
    if (!tt) { rc = SL_EFAIL; goto done; }
    add_col(tt, "test", SL_COL_STRING, NULL);
    add_col(tt, "n", SL_COL_INT, NULL);
    add_col(tt, "categories", SL_COL_INT, NULL);
    add_col(tt, "cells", SL_COL_INT, NULL);
    add_col(tt, "df", SL_COL_INT, NULL);
    add_col(tt, "pearson", SL_COL_DOUBLE, "%.3f");
    add_col(tt, "p_pearson", SL_COL_DOUBLE, "%.3g");
    add_col(tt, "g", SL_COL_DOUBLE, "%.3f");
    add_col(tt, "p_g", SL_COL_DOUBLE, "%.3g");
    add_col(tt, "p_small", SL_COL_DOUBLE, "%.3g");
    add_col(tt, "method", SL_COL_STRING, NULL);
    add_col(tt, "p_value", SL_COL_DOUBLE, "%.3g");
    add_col(tt, "p_holm", SL_COL_DOUBLE, "%.3g");
    add_col(tt, "reject", SL_COL_INT, NULL);
    add_col(tt, "tv", SL_COL_DOUBLE, "%.4f");
    add_col(tt, "tv_lo", SL_COL_DOUBLE, "%.4f");
    add_col(tt, "tv_hi", SL_COL_DOUBLE, "%.4f");
    add_col(tt, "power", SL_COL_DOUBLE, "%.3f");
    for (size_t i = 0; i < nt; i++) {
        vtest *t = &tests[i];
        sl_table_add_row(tt);
        sl_table_set_string(tt, 0, t->name);
        sl_table_set_int(tt, 1, (int64_t)nobs[i]);
        sl_table_set_int(tt, 2, (int64_t)t->k);
        sl_table_set_int(tt, 3, (int64_t)cells[i]);
        sl_table_set_int(tt, 4, (int64_t)dfv[i]);
        sl_table_set_double(tt, 5, stat_x[i]);
        sl_table_set_double(tt, 6, px[i]);
        sl_table_set_double(tt, 7, stat_g[i]);
        sl_table_set_double(tt, 8, pg[i]);
        sl_table_set_double(tt, 9, pe[i]);
        sl_table_set_string(tt, 10, method[i]);
        sl_table_set_double(tt, 11, prim[i]);
        sl_table_set_double(tt, 12, adj[i]);
        if (!isnan(adj[i])) sl_table_set_int(tt, 13, adj[i] <= o->level);
        sl_table_set_double(tt, 14, tv[i]);
        sl_table_set_double(tt, 15, tvlo[i]);
        sl_table_set_double(tt, 16, tvhi[i]);
        if (dfv[i] >= 1) {
            double neff = (double)nobs[i];
            if (t->counts_b) neff = neff / 2; /* equal sample sizes: n_a n_b / (n_a + n_b) */
            sl_table_set_double(tt, 17, sl_stats_power_at_n(neff, o->tv_delta, dfv[i], power_level));
        }
    }

    /* ---- lenience bound ---- */
    if (iid && !o->two_sample && idx_all != SIZE_MAX) {
        const double *p = sl_mc_plan_p(plan, 0);
        double l = cfg->rule == SL_RULE_LENIENT || cfg->rule == SL_RULE_LENIENT_T0 ? cfg->lenience : 1.0;
        uint64_t n = 0;
        for (size_t x = 0; x < V; x++) n += tests[idx_all].counts[x];
        double excess = -INFINITY, ratio = 0, a_tok = 0.001 / (double)V;
        int table = V <= 64 && cfg->rule == SL_RULE_LENIENT;
        if (table) {
            lt = sl_table_alloc("lenience_bound");
            if (!lt) { rc = SL_EFAIL; goto done; }
            add_col(lt, "token", SL_COL_INT, NULL);
            add_col(lt, "p", SL_COL_DOUBLE, "%.6f");
            add_col(lt, "frequency", SL_COL_DOUBLE, "%.6f");
            add_col(lt, "ci_lo", SL_COL_DOUBLE, "%.6f");
            add_col(lt, "ci_hi", SL_COL_DOUBLE, "%.6f");
            add_col(lt, "bound", SL_COL_DOUBLE, "%.6f");
            add_col(lt, "within", SL_COL_INT, NULL);
        }
        for (size_t x = 0; x < V && n > 0; x++) {
            uint64_t c = tests[idx_all].counts[x];
            double lo, hi, f = (double)c / (double)n, bound = fmin(1.0, p[x] / l);
            sl_stats_wilson(c, n, a_tok, &lo, &hi);
            excess = fmax(excess, lo - bound);
            if (p[x] > 0) ratio = fmax(ratio, f / p[x]);
            else if (c > 0) ratio = INFINITY;
            if (table) {
                sl_table_add_row(lt);
                sl_table_set_int(lt, 0, (int64_t)x);
                sl_table_set_double(lt, 1, p[x]);
                sl_table_set_double(lt, 2, f);
                sl_table_set_double(lt, 3, lo);
                sl_table_set_double(lt, 4, hi);
                sl_table_set_double(lt, 5, bound);
                sl_table_set_int(lt, 6, lo <= bound);
            }
        }
        if (cfg->rule == SL_RULE_LENIENT) sum->lenience_excess = excess;
        sum->max_freq_ratio = ratio;
    }

    vt = sl_table_alloc("verdict");
    if (!vt) { rc = SL_EFAIL; goto done; }
    add_col(vt, "rule", SL_COL_STRING, NULL);
    add_col(vt, "lenience", SL_COL_DOUBLE, "%g");
    add_col(vt, "iterations", SL_COL_INT, NULL);
    add_col(vt, "tokens", SL_COL_INT, NULL);
    add_col(vt, "tests", SL_COL_INT, NULL);
    add_col(vt, "rejected_tests", SL_COL_INT, NULL);
    add_col(vt, "min_p", SL_COL_DOUBLE, "%.3g");
    add_col(vt, "min_p_holm", SL_COL_DOUBLE, "%.3g");
    add_col(vt, "level", SL_COL_DOUBLE, "%g");
    add_col(vt, "tv_delta", SL_COL_DOUBLE, "%g");
    add_col(vt, "power_level", SL_COL_DOUBLE, "%.3g");
    add_col(vt, "max_freq_ratio", SL_COL_DOUBLE, "%.4f");
    add_col(vt, "lenience_excess", SL_COL_DOUBLE, "%.5f");
    add_col(vt, "verdict", SL_COL_STRING, NULL);
    sl_table_add_row(vt);
    sl_table_set_string(vt, 0, sl_rule_name(cfg->rule));
    sl_table_set_double(vt, 1, cfg->lenience);
    sl_table_set_int(vt, 2, (int64_t)N);
    sl_table_set_int(vt, 3, (int64_t)res.tokens);
    sl_table_set_int(vt, 4, (int64_t)sum->n_tests);
    sl_table_set_int(vt, 5, (int64_t)sum->n_rejected);
    sl_table_set_double(vt, 6, sum->min_p);
    sl_table_set_double(vt, 7, sum->min_p_holm);
    sl_table_set_double(vt, 8, o->level);
    sl_table_set_double(vt, 9, o->tv_delta);
    sl_table_set_double(vt, 10, power_level);
    sl_table_set_double(vt, 11, isinf(sum->max_freq_ratio) ? NAN : sum->max_freq_ratio);
    sl_table_set_double(vt, 12, sum->lenience_excess);
    sl_table_set_string(vt, 13, sum->rejected ? "not-lossless" : "consistent-with-lossless");
    tables[(*n_tables)++] = vt;
    tables[(*n_tables)++] = tt;
    if (lt) tables[(*n_tables)++] = lt;
    vt = tt = lt = NULL;
done:
    sl_table_free(tt);
    sl_table_free(vt);
    sl_table_free(lt);
    for (size_t i = 0; i < nt; i++) {
        free(tests[i].counts);
        free(tests[i].counts_b);
        free(tests[i].pmf);
    }
    free(scratch);
    free(adj);
    free(prim);
    free(tok);
    free(nem);
    if (tr) gsl_rng_free(tr);
    sl_alias_free(pal);
    return rc;
}
