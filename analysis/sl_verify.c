/*
 * sl_verify.c: the tests of sl_verify.h over the tokens an sl_mc run emitted.
 */
#include "sl_verify.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <gsl/gsl_cdf.h>
#include <omp.h>

#include "sl_common.h"
#include "sl_mpi.h"
#include "sl_stats.h"
#include "sl_verify_internal.h"

#define JOINT_MAX_CELLS 4096
#define MAX_TESTS SL_VERIFY_MAX_TESTS

sl_vtest *sl_vtests_add(sl_vtests *v, const char *name, const char *null, size_t k, int with_pmf, int with_b)
{
    if (v->n == v->cap) {
        size_t cap = v->cap ? 2 * v->cap : 16;
        sl_vtest *t = realloc(v->t, cap * sizeof *t);
        if (!t) {
            sl_fail(SL_EFAIL, "out of memory allocating verify tests");
            return NULL;
        }
        v->t = t;
        v->cap = cap;
    }
    sl_vtest *t = &v->t[v->n++];
    memset(t, 0, sizeof *t);
    snprintf(t->name, sizeof t->name, "%s", name);
    snprintf(t->null, sizeof t->null, "%s", null);
    t->k = k;
    t->counts = calloc(k ? k : 1, sizeof *t->counts);
    t->counts_b = with_b ? calloc(k ? k : 1, sizeof *t->counts_b) : NULL;
    t->pmf = with_pmf ? calloc(k ? k : 1, sizeof *t->pmf) : NULL;
    if (!t->counts || (with_b && !t->counts_b) || (with_pmf && !t->pmf)) {
        sl_fail(SL_EFAIL, "out of memory allocating verify counts");
        return NULL;
    }
    return t;
}

int sl_vtests_add_fixed(sl_vtests *v, const char *name, const char *null, const char *method, size_t n,
                        double stat, double p)
{
    sl_vtest *t = sl_vtests_add(v, name, null, 0, 0, 0);
    if (!t) return SL_EFAIL;
    t->fixed_method = method;
    t->fixed_n = n;
    t->fixed_stat = stat;
    t->fixed_p = p;
    return SL_OK;
}

void sl_vtests_free(sl_vtests *v)
{
    for (size_t i = 0; i < v->n; i++) {
        free(v->t[i].counts);
        free(v->t[i].counts_b);
        free(v->t[i].pmf);
    }
    free(v->t);
    *v = (sl_vtests){0};
}

static void onehot(double *out, const double *p, size_t V)
{
    memset(out, 0, V * sizeof *out);
    out[sl_dist_argmax(p, V)] = 1;
}

/* The target pmf the rule must reproduce at a position. */
void sl_verify_null_target(const sl_spec_config *cfg, const double *p, size_t V, double *out)
{
    if (cfg->rule == SL_RULE_LENIENT_T0) onehot(out, p, V);
    else memcpy(out, p, V * sizeof *out);
}

/* The pmf of the token emitted at a rejection, as the rule prescribes it. */
void sl_verify_null_rejection(const sl_spec_config *cfg, const double *p, const double *q, size_t V, double *out)
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

void sl_verify_result_free(sl_verify_result *r)
{
    if (!r) return;
    free(r->token);
    free(r->test);
    free(r);
}

void sl_verify_uniformity_free(sl_verify_uniformity_result *r)
{
    if (!r) return;
    free(r->p_values);
    free(r);
}

int sl_verify_uniformity(const sl_mc_plan *plan, const sl_verify_opts *o, size_t replications,
                         sl_verify_uniformity_result **out)
{
    *out = NULL;
    if (replications < 2) return sl_fail(SL_EINPUT, "replications: %zu, expected >= 2", replications);
    double *pv = sl_malloc(replications * MAX_TESTS * sizeof *pv); /* (MAX_TESTS, replications) */
    sl_verify_uniformity_result *u = calloc(1, sizeof *u);
    int rc = SL_OK;
    if (!pv || !u) {
        rc = sl_fail(SL_EFAIL, "out of memory allocating the uniformity check");
        goto done;
    }
    u->replications = replications;
    u->level = o->level;
    u->ks_min_p = 1;
    for (size_t r = 0; r < replications; r++) {
        sl_verify_opts ro = *o;
        ro.seed = o->seed + r;
        ro.progress = NULL; /* counted in replications below */
        sl_verify_result *s;
        if ((rc = sl_verify_run(plan, &ro, &s))) goto done;
        if (r == 0) {
            if (s->n_rows > MAX_TESTS) {
                rc = sl_fail(SL_EFAIL, "uniformity: %zu tests, at most %d", s->n_rows, MAX_TESTS);
                sl_verify_result_free(s);
                goto done;
            }
            u->n_rows = s->n_rows;
            for (size_t i = 0; i < s->n_rows; i++) memcpy(u->row[i].test, s->test[i].name, sizeof u->row[i].test);
        }
        for (size_t i = 0; i < u->n_rows; i++) pv[i * replications + r] = s->test[i].p_random;
        sl_verify_result_free(s);
        if (o->progress) o->progress(o->progress_ctx, r + 1, replications);
    }
    for (size_t i = 0; i < u->n_rows; i++) {
        /* Replications without data for this test (NaN) are left out. */
        sl_verify_ks *k = &u->row[i];
        double *x = pv + i * replications, mean = 0, rej = 0;
        size_t m = 0;
        for (size_t r = 0; r < replications; r++)
            if (!isnan(x[r])) {
                x[m++] = x[r];
                mean += x[r];
                rej += x[r] <= o->level;
            }
        k->replications = m;
        k->p = x;
        k->ks_d = k->ks_p = k->mean_p = k->rejected_fraction = NAN;
        if (m < 2) continue;
        if ((rc = sl_stats_ks_uniform(x, m, &k->ks_d, &k->ks_p))) goto done;
        k->mean_p = mean / (double)m;
        k->rejected_fraction = rej / (double)m;
        u->ks_min_p = fmin(u->ks_min_p, k->ks_p);
    }
    u->p_values = pv; /* the rows' p point into it */
    pv = NULL;
    *out = u;
    u = NULL;
done:
    free(pv);
    free(u);
    return rc;
}

int sl_verify_uniformity_report(const sl_verify_uniformity_result *r, sl_table **out)
{
    static const sl_colspec cols[] = {SL_COL_S("test"), SL_COL_I("replications"), SL_COL_D("ks_d", "%.4f"),
                                      SL_COL_D("ks_p", "%.4g"), SL_COL_D("mean_p", "%.4f"),
                                      SL_COL_D("rejected_fraction", "%.4f")};
    sl_table *t = SL_TABLE_NEW("uniformity", cols);
    for (size_t i = 0; i < r->n_rows; i++) {
        const sl_verify_ks *k = &r->row[i];
        sl_table_row(t);
        sl_table_sets(t, "test", k->test);
        sl_table_seti(t, "replications", (int64_t)k->replications);
        sl_table_setd(t, "ks_d", k->ks_d);
        sl_table_setd(t, "ks_p", k->ks_p);
        sl_table_setd(t, "mean_p", k->mean_p);
        sl_table_setd(t, "rejected_fraction", k->rejected_fraction);
    }
    int rc = sl_table_status(t);
    if (rc) {
        sl_table_free(t);
        t = NULL;
    }
    *out = t;
    return rc;
}

int sl_verify_power(double tv, double df, double level, double power, sl_verify_power_result *out)
{
    *out = (sl_verify_power_result){df, level, power, tv, NAN, NAN};
    int rc = sl_stats_lambda_for_power(df, level, power, &out->lambda);
    if (!rc) rc = sl_stats_n_for_tv(tv, df, level, power, &out->n);
    return rc;
}

int sl_verify_power_report(const sl_verify_power_result *r, sl_table **out)
{
    static const sl_colspec cols[] = {SL_COL_I("df"), SL_COL_D("level", "%g"), SL_COL_D("power", "%g"),
                                      SL_COL_D("tv", "%g"), SL_COL_D("lambda", "%.4f"), SL_COL_I("n")};
    sl_table *t = SL_TABLE_NEW("power", cols);
    sl_table_row(t);
    sl_table_seti(t, "df", (int64_t)r->df);
    sl_table_setd(t, "level", r->level);
    sl_table_setd(t, "power", r->power);
    sl_table_setd(t, "tv", r->tv);
    sl_table_setd(t, "lambda", r->lambda);
    sl_table_seti(t, "n", (int64_t)r->n);
    int rc = sl_table_status(t);
    if (rc) {
        sl_table_free(t);
        t = NULL;
    }
    *out = t;
    return rc;
}

/* The name of the null pmf of a rejection test under the rule. */
const char *sl_verify_null_rejection_name(const sl_spec_config *cfg)
{
    if (cfg->rule == SL_RULE_LENIENT_T0) return "argmax-p";
    if (cfg->rule == SL_RULE_SAMPLER_MATCH) return "sampler-match";
    return "residual";
}

sl_verify_result *sl_verify_result_new(void)
{
    sl_verify_result *r = calloc(1, sizeof *r);
    if (!r) {
        sl_fail(SL_EFAIL, "out of memory allocating the verify result");
        return NULL;
    }
    r->lenience = 1;
    r->lenience_excess = NAN;
    r->max_freq_ratio = NAN;
    return r;
}

static int check_opts(const sl_verify_opts *o)
{
    if (!(o->level > 0 && o->level < 1)) return sl_fail(SL_EINPUT, "level: %g, expected 0 < level < 1", o->level);
    if (!(o->tv_delta > 0 && o->tv_delta <= 1)) return sl_fail(SL_EINPUT, "tv: %g, expected 0 < tv <= 1", o->tv_delta);
    return SL_OK;
}

/* The stream tests (all, pair, triple) of an i.i.d. pair, as goodness of fit or, in two-sample
 * mode, homogeneity against plain target draws added later. idx_joint[m] = SIZE_MAX when absent. */
static int add_stream_tests(sl_vtests *v, const sl_mc_plan *plan, const sl_verify_opts *o, size_t *idx_all,
                            size_t idx_joint[4])
{
    const size_t V = sl_mc_plan_vocab(plan);
    const sl_spec_config *cfg = sl_mc_plan_config(plan);
    size_t Kj[4] = {1, V, V * V, V * V * V};
    sl_vtest *t;
    *idx_all = v->n;
    if (!(t = sl_vtests_add(v, "all", o->two_sample ? "plain-target" : "target", V, !o->two_sample, o->two_sample)))
        return SL_EFAIL;
    if (!o->two_sample) sl_verify_null_target(cfg, sl_mc_plan_p(plan, 0), V, t->pmf);
    for (int m = 2; m <= 3; m++) {
        if (Kj[m] > JOINT_MAX_CELLS || Kj[m] / V != Kj[m - 1]) continue;
        if (o->two_sample && m == 3) continue;
        idx_joint[m] = v->n;
        const char *null = o->two_sample ? "plain-target" : m == 2 ? "target^2" : "target^3";
        if (!(t = sl_vtests_add(v, m == 2 ? "pair" : "triple", null, Kj[m], !o->two_sample, o->two_sample)))
            return SL_EFAIL;
        if (!o->two_sample) {
            double *tp = sl_malloc(V * sizeof *tp);
            if (!tp) return SL_EFAIL;
            sl_verify_null_target(cfg, sl_mc_plan_p(plan, 0), V, tp);
            product_pmf(tp, V, m, t->pmf);
            free(tp);
        }
    }
    return SL_OK;
}

/* Counts a token into the stream tests' tables: all (V; NULL: not counted here), and the
 * non-overlapping m-blocks of the stream, joint[m] (V^m) or NULL when absent; blk/blen hold the
 * m-block being filled. */
static void count_stream(uint64_t *all, uint64_t *const joint[4], size_t V, size_t x, size_t blk[4], size_t blen[4])
{
    if (all) all[x]++;
    for (int m = 2; m <= 3; m++) {
        if (!joint[m]) continue;
        blk[m] = blk[m] * V + x;
        if (++blen[m] == (size_t)m) {
            joint[m][blk[m]]++;
            blk[m] = blen[m] = 0;
        }
    }
}

/* The lenient rules' bound freq(x) <= p(x)/l from the "all" counts (sl_verify.h). */
static int lenience_bound(const sl_mc_plan *plan, const uint64_t *all, sl_verify_result *sum)
{
    const size_t V = sl_mc_plan_vocab(plan);
    const sl_spec_config *cfg = sl_mc_plan_config(plan);
    const double *p = sl_mc_plan_p(plan, 0);
    double l = cfg->rule == SL_RULE_LENIENT || cfg->rule == SL_RULE_LENIENT_T0 ? cfg->lenience : 1.0;
    uint64_t n = 0;
    for (size_t x = 0; x < V; x++) n += all[x];
    double excess = -INFINITY, ratio = 0, a_tok = 0.001 / (double)V;
    if (V <= 64 && cfg->rule == SL_RULE_LENIENT && n > 0) {
        sum->token = calloc(V, sizeof *sum->token);
        if (!sum->token) return sl_fail(SL_EFAIL, "out of memory allocating the lenience bound");
        sum->n_tokens = V;
    }
    for (size_t x = 0; x < V && n > 0; x++) {
        uint64_t c = all[x];
        double lo, hi, f = (double)c / (double)n, bound = fmin(1.0, p[x] / l);
        sl_stats_wilson(c, n, a_tok, &lo, &hi);
        excess = fmax(excess, lo - bound);
        if (p[x] > 0) ratio = fmax(ratio, f / p[x]);
        else if (c > 0) ratio = INFINITY;
        if (sum->token) sum->token[x] = (sl_verify_token){p[x], f, lo, hi, bound, lo <= bound};
    }
    if (cfg->rule == SL_RULE_LENIENT) sum->lenience_excess = excess;
    sum->max_freq_ratio = ratio;
    return SL_OK;
}

/* Where each test sits in the list (SIZE_MAX: absent). */
typedef struct {
    size_t first, k, bonus, rej; /* first; token_2 .. token_gamma from k; bonus; after_rejection[_1] from rej */
    size_t all, joint[4];        /* stream tests; joint[2] pair, joint[3] triple */
} vidx;

/* The tests of sl_verify.h for plan, in their report order: the positional tests when structured
 * and not two-sample, the stream tests when i.i.d. */
static int add_tests(sl_vtests *v, const sl_mc_plan *plan, const sl_verify_opts *o, int structured, vidx *ix)
{
    const size_t V = sl_mc_plan_vocab(plan), gamma = sl_mc_plan_gamma(plan);
    const sl_spec_config *cfg = sl_mc_plan_config(plan);
    const int iid = sl_mc_plan_layout(plan) == SL_MC_IID;
    *ix = (vidx){SIZE_MAX, SIZE_MAX, SIZE_MAX, SIZE_MAX, SIZE_MAX, {SIZE_MAX, SIZE_MAX, SIZE_MAX, SIZE_MAX}};
    if (!o->two_sample && structured) {
        sl_vtest *t;
        char name[32];
        ix->first = v->n;
        if (!(t = sl_vtests_add(v, "first", "target", V, 1, 0))) return SL_EFAIL;
        sl_verify_null_target(cfg, sl_mc_plan_p(plan, 0), V, t->pmf);
        ix->k = v->n;
        for (size_t k = 2; k <= gamma; k++) {
            snprintf(name, sizeof name, "token_%zu", k);
            if (!(t = sl_vtests_add(v, name, "target", V, 1, 0))) return SL_EFAIL;
            sl_verify_null_target(cfg, sl_mc_plan_p(plan, iid ? 0 : k - 1), V, t->pmf);
        }
        ix->bonus = v->n;
        if (!(t = sl_vtests_add(v, "bonus", "target", V, 1, 0))) return SL_EFAIL;
        sl_verify_null_target(cfg, sl_mc_plan_p(plan, iid ? 0 : gamma), V, t->pmf);
        ix->rej = v->n;
        for (size_t k = 1; k <= (iid ? 1 : gamma); k++) {
            if (iid) snprintf(name, sizeof name, "after_rejection");
            else snprintf(name, sizeof name, "after_rejection_%zu", k);
            if (!(t = sl_vtests_add(v, name, sl_verify_null_rejection_name(cfg), V, 1, 0))) return SL_EFAIL;
            sl_verify_null_rejection(cfg, sl_mc_plan_p(plan, iid ? 0 : k - 1), sl_mc_plan_q(plan, iid ? 0 : k - 1), V,
                                     t->pmf);
        }
    }
    return iid ? add_stream_tests(v, plan, o, &ix->all, ix->joint) : SL_OK;
}

/* An iteration's k tokens x (or one token of a plain stream): k in 1..gamma+1, every token in [0, V). */
static int check_iteration(const int32_t *x, size_t k, int structured, size_t gamma, size_t V, size_t t)
{
    if (structured && (k < 1 || k > gamma + 1))
        return sl_fail(SL_EINPUT, "verify: iteration %zu emitted %zu tokens, expected 1 to %zu", t, k, gamma + 1);
    for (size_t j = 0; j < k; j++)
        if (x[j] < 0 || (size_t)x[j] >= V)
            return sl_fail(SL_EINPUT, "verify: %s %zu emitted token %d outside [0, %zu)",
                           structured ? "iteration" : "token", t, x[j], V);
    return SL_OK;
}

/* Counts an iteration's k tokens x into the positional tests: cnt[i] is test i's table. */
static void count_positions(const vidx *ix, uint64_t *const *cnt, int iid, size_t gamma, const int32_t *x, size_t k)
{
    cnt[ix->first][x[0]]++;
    for (size_t j = 2; j <= k && j <= gamma; j++) cnt[ix->k + j - 2][x[j - 1]]++;
    if (k == gamma + 1) cnt[ix->bonus][x[gamma]]++;
    else cnt[ix->rej + (iid ? 0 : k - 1)][x[k - 1]]++;
}

/* The alias table of the plain target (argmax p for lenient-t0); NULL and sl_fail on failure. */
static sl_alias *target_alias(const sl_mc_plan *plan)
{
    const size_t V = sl_mc_plan_vocab(plan);
    sl_alias *pal = sl_alias_alloc(V);
    double *tp = sl_malloc(V * sizeof *tp);
    if (!pal || !tp) {
        free(tp);
        sl_alias_free(pal);
        return NULL;
    }
    sl_verify_null_target(sl_mc_plan_config(plan), sl_mc_plan_p(plan, 0), V, tp);
    sl_alias_build(pal, tp);
    free(tp);
    return pal;
}

int sl_verify_samples(const sl_mc_plan *plan, const int32_t *tok, const uint8_t *nem, size_t n,
                      const sl_verify_opts *o, sl_verify_result **out)
{
    *out = NULL;
    int rc = check_opts(o);
    if (rc) return rc;
    const size_t V = sl_mc_plan_vocab(plan), gamma = sl_mc_plan_gamma(plan);
    const sl_spec_config *cfg = sl_mc_plan_config(plan);
    const int iid = sl_mc_plan_layout(plan) == SL_MC_IID, structured = nem != NULL;
    if (sl_mc_plan_layout(plan) == SL_MC_SLIDING)
        return sl_fail(SL_EINPUT, "verify: a sliding (logged) source has no known joint target pmf");
    if (o->two_sample && !iid) return sl_fail(SL_EINPUT, "two_sample: needs a family with the same pair at every position");
    if (!structured && !iid)
        return sl_fail(SL_EINPUT, "verify: a plain token stream can only be tested against one pair (no positional layout)");
    sl_verify_result *sum = sl_verify_result_new();
    sl_vtests v = {0};
    gsl_rng *tr = NULL;
    sl_alias *pal = NULL;
    if (!sum) return SL_EFAIL;
    sum->rule = cfg->rule;
    sum->lenience = cfg->lenience;
    sum->iterations = structured ? n : 0;
    sum->level = o->level;
    sum->tv_delta = o->tv_delta;
    /* ---- tests ---- */
    vidx ix;
    if ((rc = add_tests(&v, plan, o, structured, &ix))) goto done;
    /* ---- counts: iterations in order, so the concatenated stream does not depend on threads ---- */
    size_t blk[4] = {0}, blen[4] = {0};
    uint64_t tokens = 0, *joint[4] = {NULL, NULL, NULL, NULL}, *joint_b[4] = {NULL, NULL, NULL, NULL};
    uint64_t *cnt[MAX_TESTS];
    for (size_t i = 0; i < v.n && i < MAX_TESTS; i++) cnt[i] = v.t[i].counts;
    for (int m = 2; m <= 3; m++)
        if (ix.joint[m] != SIZE_MAX) {
            joint[m] = v.t[ix.joint[m]].counts;
            joint_b[m] = v.t[ix.joint[m]].counts_b;
        }
    for (size_t t = 0; t < n; t++) {
        const int32_t *x = structured ? tok + t * (gamma + 1) : tok + t;
        size_t k = structured ? nem[t] : 1;
        if ((rc = check_iteration(x, k, structured, gamma, V, t))) goto done;
        tokens += k;
        if (!o->two_sample && structured) count_positions(&ix, cnt, iid, gamma, x, k);
        if (iid)
            for (size_t j = 0; j < k; j++) count_stream(v.t[ix.all].counts, joint, V, (size_t)x[j], blk, blen);
    }
    sum->tokens = tokens;
    if (o->two_sample) {
        /* As many plain target tokens as the sample holds, one generator read in order. */
        tr = sl_rng_alloc(o->seed, SL_STREAM_TARGET, UINT64_MAX);
        pal = target_alias(plan);
        if (!tr || !pal) {
            rc = SL_EFAIL;
            goto done;
        }
        memset(blk, 0, sizeof blk);
        memset(blen, 0, sizeof blen);
        for (uint64_t i = 0; i < tokens; i++)
            count_stream(v.t[ix.all].counts_b, joint_b, V, sl_alias_sample(pal, tr), blk, blen);
    }
    if ((rc = sl_verify_finish(&v, o, sum))) goto done;
    if (iid && !o->two_sample && (rc = lenience_bound(plan, v.t[ix.all].counts, sum))) goto done;
    *out = sum;
    sum = NULL;
done:
    sl_verify_result_free(sum);
    sl_vtests_free(&v);
    if (tr) gsl_rng_free(tr);
    sl_alias_free(pal);
    return rc;
}

/* sl_verify_run's counting: every test's counts in one flat table per thread, filled block by
 * block as the sampler emits (sl_mc_run_blocks), summed over threads and MPI ranks at the end. */
typedef struct {
    const sl_mc_plan *plan;
    const sl_verify_opts *o;
    vidx ix;
    size_t n_tests;
    size_t off[MAX_TESTS], off_b[MAX_TESTS]; /* test i's counts (counts_b) at tab + off[i] (off_b[i]) */
    size_t n_cells;          /* per thread */
    uint64_t *tab;           /* (threads, n_cells) counts; [n_cells - 1] the tokens emitted */
    int threads;
    const sl_alias *pal;     /* two-sample: the plain target */
} vstream;

/* One block of iterations into the calling thread's table. The stream tests read the block's
 * tokens in order and start their m-blocks afresh at the block's first token: a restart point
 * fixed in advance (every SL_MC_BLOCK iterations), which keeps the m-blocks independent draws of
 * p x p (x p) under the null and makes the counts a sum over blocks. */
static int count_block(void *ctx, int thread, size_t block, const int32_t *tok, const uint8_t *nem, size_t n)
{
    vstream *c = ctx;
    const size_t V = sl_mc_plan_vocab(c->plan), gamma = sl_mc_plan_gamma(c->plan);
    const int iid = sl_mc_plan_layout(c->plan) == SL_MC_IID;
    if (thread < 0 || thread >= c->threads) return sl_fail(SL_EFAIL, "verify: thread %d of %d", thread, c->threads);
    uint64_t *tab = c->tab + (size_t)thread * c->n_cells;
    uint64_t *cnt[MAX_TESTS], *joint[4] = {NULL, NULL, NULL, NULL}, *joint_b[4] = {NULL, NULL, NULL, NULL};
    for (size_t i = 0; i < c->n_tests; i++) cnt[i] = tab + c->off[i];
    for (int m = 2; m <= 3; m++)
        if (c->ix.joint[m] != SIZE_MAX) {
            joint[m] = tab + c->off[c->ix.joint[m]];
            joint_b[m] = tab + c->off_b[c->ix.joint[m]];
        }
    /* With the positional tests, "all" is their sum (added up at the end): every emitted token is
     * the first, a token_k or the bonus exactly once. Half the increments, in tables that miss the
     * cache at a large vocabulary. */
    uint64_t *all = c->o->two_sample && iid ? cnt[c->ix.all] : NULL;
    size_t blk[4] = {0}, blen[4] = {0};
    uint64_t tokens = 0;
    for (size_t j = 0; j < n; j++) {
        const int32_t *x = tok + j * (gamma + 1);
        size_t k = nem[j];
        int rc = check_iteration(x, k, 1, gamma, V, block * SL_MC_BLOCK + j);
        if (rc) return rc;
        tokens += k;
        if (!c->o->two_sample) count_positions(&c->ix, cnt, iid, gamma, x, k);
        if (iid)
            for (size_t i = 0; i < k; i++) count_stream(all, joint, V, (size_t)x[i], blk, blen);
    }
    tab[c->n_cells - 1] += tokens;
    if (c->o->two_sample) {
        /* As many plain target tokens as the block emitted, from the block's own stream: item b
         * of a seed derived from (seed, SL_STREAM_TARGET, all ones), not (seed, SL_STREAM_TARGET,
         * b) itself, which the sampler-match rule draws its target tokens from in block b. */
        sl_xoshiro g;
        sl_xoshiro_seed(&g, sl_seed_derive(c->o->seed, SL_STREAM_TARGET, UINT64_MAX), SL_STREAM_TARGET, block);
        uint64_t *all_b = tab + c->off_b[c->ix.all];
        memset(blk, 0, sizeof blk);
        memset(blen, 0, sizeof blen);
        for (uint64_t i = 0; i < tokens; i++)
            count_stream(all_b, joint_b, V, sl_alias_sample_u(c->pal, sl_xoshiro_uniform53(&g)), blk, blen);
    }
    return SL_OK;
}

int sl_verify_run(const sl_mc_plan *plan, const sl_verify_opts *o, sl_verify_result **out)
{
    *out = NULL;
    int rc = check_opts(o);
    if (rc) return rc;
    const size_t N = o->iterations;
    const sl_spec_config *cfg = sl_mc_plan_config(plan);
    const int iid = sl_mc_plan_layout(plan) == SL_MC_IID;
    if (sl_mc_plan_layout(plan) == SL_MC_SLIDING)
        return sl_fail(SL_EINPUT, "verify: a sliding (logged) source has no known joint target pmf");
    if (o->two_sample && !iid)
        return sl_fail(SL_EINPUT, "two_sample: needs a family with the same pair at every position");
    if (o->threads < 0) return sl_fail(SL_EINPUT, "threads: %d, expected >= 0", o->threads);
    sl_verify_result *sum = sl_verify_result_new();
    sl_vtests v = {0};
    vstream c = {.plan = plan, .o = o, .threads = o->threads > 0 ? o->threads : omp_get_max_threads()};
    sl_alias *pal = NULL;
    if (!sum) return SL_EFAIL;
    sum->rule = cfg->rule;
    sum->lenience = cfg->lenience;
    sum->iterations = N;
    sum->level = o->level;
    sum->tv_delta = o->tv_delta;
    if ((rc = add_tests(&v, plan, o, 1, &c.ix))) goto done;
    c.n_tests = v.n;
    for (size_t i = 0; i < v.n; i++) {
        c.off[i] = c.n_cells;
        c.n_cells += v.t[i].k;
        c.off_b[i] = c.n_cells;
        if (v.t[i].counts_b) c.n_cells += v.t[i].k;
    }
    c.n_cells++; /* the tokens emitted */
    if (o->two_sample && !(c.pal = pal = target_alias(plan))) {
        rc = SL_EFAIL;
        goto done;
    }
    c.tab = calloc((size_t)c.threads * c.n_cells, sizeof *c.tab);
    if (!c.tab) {
        rc = sl_fail(SL_EFAIL, "out of memory allocating the verify counts (%d threads x %zu)", c.threads, c.n_cells);
        goto done;
    }
    sl_mc_opts mo = {N, o->seed, c.threads, NULL, NULL, 1}; /* the sampler's own code */
    sl_mc_result res;
    if ((rc = sl_mc_run_blocks(plan, &mo, count_block, &c, o->progress, o->progress_ctx, &res))) goto done;
    /* Integer sums over threads, then over MPI ranks: exact in any order. */
    for (int th = 1; th < c.threads; th++)
        for (size_t j = 0; j < c.n_cells; j++) c.tab[j] += c.tab[(size_t)th * c.n_cells + j];
    sl_mpi_sum_u64(c.tab, c.n_cells);
    if (iid && !o->two_sample) {
        /* all = first + token_2 + ... + token_gamma + bonus (count_block). */
        const size_t V = sl_mc_plan_vocab(plan);
        uint64_t *all = c.tab + c.off[c.ix.all];
        for (size_t i = c.ix.first; i <= c.ix.bonus; i++)
            for (size_t x = 0; x < V; x++) all[x] += c.tab[c.off[i] + x];
    }
    for (size_t i = 0; i < v.n; i++) {
        memcpy(v.t[i].counts, c.tab + c.off[i], v.t[i].k * sizeof *c.tab);
        if (v.t[i].counts_b) memcpy(v.t[i].counts_b, c.tab + c.off_b[i], v.t[i].k * sizeof *c.tab);
    }
    sum->tokens = c.tab[c.n_cells - 1];
    if ((rc = sl_verify_finish(&v, o, sum))) goto done;
    if (iid && !o->two_sample && (rc = lenience_bound(plan, v.t[c.ix.all].counts, sum))) goto done;
    *out = sum;
    sum = NULL;
done:
    sl_verify_result_free(sum);
    sl_vtests_free(&v);
    sl_alias_free(pal);
    free(c.tab);
    return rc;
}

/* The Monte Carlo p-value of test i (sl_stats_mc_multinomial_count, stream item i): its blocks of
 * draws shared by the MPI ranks (every rank computes the same tests), on o->threads threads each,
 * and the exceedances summed. Collective in the MPI build. */
static int mc_pvalue(const sl_vtest *t, const sl_verify_opts *o, size_t i, double *p_ge, double *p_gt)
{
    size_t n_blocks = (o->mc_sims + SL_STATS_MC_BLOCK - 1) / SL_STATS_MC_BLOCK, lo, hi;
    sl_mpi_share(n_blocks, &lo, &hi);
    uint64_t c[2] = {0, 0}; /* exceedances: >=, > */
    int rc = sl_stats_mc_multinomial_count(t->counts, t->pmf, t->k, o->mc_sims, o->seed, i, lo, hi, o->threads, &c[0],
                                           &c[1]);
    if ((rc = sl_mpi_status(rc))) return rc;
    sl_mpi_sum_u64(c, 2);
    *p_ge = (1.0 + (double)c[0]) / (1.0 + (double)o->mc_sims);
    *p_gt = (double)c[1] / (1.0 + (double)o->mc_sims);
    return SL_OK;
}

int sl_verify_finish(const sl_vtests *v, const sl_verify_opts *o, sl_verify_result *sum)
{
    const size_t nt = v->n;
    int rc = SL_OK;
    size_t *live = sl_malloc((nt ? nt : 1) * sizeof *live), n_live = 0;
    double *live_p = sl_malloc((nt ? nt : 1) * sizeof *live_p), *live_adj = sl_malloc((nt ? nt : 1) * sizeof *live_adj);
    free(sum->test);
    sum->test = calloc(nt ? nt : 1, sizeof *sum->test);
    sum->n_rows = 0;
    if (!live || !live_p || !live_adj || !sum->test) {
        rc = sl_fail(SL_EFAIL, "out of memory computing the verify tests");
        goto done;
    }
    for (size_t i = 0; i < nt; i++) {
        const sl_vtest *t = &v->t[i];
        sl_verify_test *r = &sum->test[i];
        memcpy(r->name, t->name, sizeof r->name);
        memcpy(r->null, t->null, sizeof r->null);
        r->categories = t->k;
        r->p_small = NAN;
        r->method = "none";
        r->p_random = NAN;
        r->p_holm = NAN;
        r->reject = -1;
        r->power = NAN;
        r->tv_90 = NAN;
        r->p_pearson = r->p_g = r->p_value = NAN;
        r->pearson = r->g = r->tv = r->tv_lo = r->tv_hi = NAN;
        if (t->fixed_method) {
            r->n = t->fixed_n;
            r->method = t->fixed_method;
            r->pearson = t->fixed_stat; /* the test's own statistic (KS D, say) */
            r->p_value = r->p_random = t->fixed_p;
            if (t->fixed_n > 0 && !isnan(t->fixed_p)) live[n_live++] = i;
            continue;
        }
        uint64_t n = 0, nb = 0;
        size_t m_pos = 0;
        for (size_t j = 0; j < t->k; j++) {
            n += t->counts[j];
            if (t->counts_b) nb += t->counts_b[j];
            if (t->pmf && t->pmf[j] > 0) m_pos++;
        }
        r->n = n;
        if (n == 0 || (t->counts_b && nb == 0)) continue;
        sl_gof gx, gg;
        if (t->counts_b) {
            if ((rc = sl_stats_homogeneity(t->counts, t->counts_b, t->k, SL_GOF_PEARSON, &gx))) goto done;
            if ((rc = sl_stats_homogeneity(t->counts, t->counts_b, t->k, SL_GOF_G, &gg))) goto done;
            double d = 0;
            for (size_t j = 0; j < t->k; j++) d += fabs((double)t->counts[j] / (double)n - (double)t->counts_b[j] / (double)nb);
            r->tv = 0.5 * d;
            /* Each empirical pmf within its Hoeffding-union radius at level/2. */
            double lk = (double)t->k * log(2.0) + log(2.0 / o->level);
            double eps = sqrt(lk / (2.0 * (double)n)) + sqrt(lk / (2.0 * (double)nb));
            r->tv_lo = fmax(0, r->tv - eps);
            r->tv_hi = fmin(1, r->tv + eps);
            r->method = "homogeneity";
            r->p_value = gx.p_value;
            r->p_random = gx.p_value;
            r->n_b = nb;
        } else {
            if ((rc = sl_stats_gof(t->counts, t->pmf, t->k, SL_GOF_PEARSON, &gx))) goto done;
            if ((rc = sl_stats_gof(t->counts, t->pmf, t->k, SL_GOF_G, &gg))) goto done;
            if ((rc = sl_stats_tv_ci(t->counts, t->pmf, t->k, o->level, &r->tv, &r->tv_lo, &r->tv_hi))) goto done;
            r->p_value = gx.p_value;
            r->p_random = gx.p_value;
            r->method = "asymptotic";
            if (m_pos >= 2 && !gx.impossible && (n < 5 * m_pos || gx.n_cells < 2)) {
                /* Small counts: the chi^2 approximation is not trusted; exact where affordable. */
                double outcomes = sl_stats_multinomial_outcomes(n, m_pos);
                double p_gt;
                if (outcomes <= 1e6) {
                    if ((rc = sl_stats_exact_multinomial_ext(t->counts, t->pmf, t->k, 1e6, &r->p_small, &p_gt)))
                        goto done;
                    r->method = "exact";
                } else {
                    if ((rc = mc_pvalue(t, o, i, &r->p_small, &p_gt))) goto done;
                    r->method = "monte-carlo";
                }
                r->p_value = r->p_small;
                /* The uniformity self-check needs continuous p-values: randomize the ties. */
                gsl_rng *ur = sl_rng_alloc(o->seed, SL_STREAM_BOOT, 1000 + i);
                if (!ur) { rc = SL_EFAIL; goto done; }
                r->p_random = sl_stats_randomized_p(r->p_small, p_gt, sl_rng_uniform53(ur));
                gsl_rng_free(ur);
            }
        }
        r->p_pearson = gx.p_value;
        r->p_g = gg.p_value;
        r->pearson = gx.stat;
        r->g = gg.stat;
        r->cells = gx.n_cells;
        r->df = gx.df;
        /* A null pmf with one possible token (or a table left with one cell) carries no
         * information unless an impossible token was seen: its constant p = 1 would only dilute
         * Holm and break the uniformity self-check, so it is reported but not counted. */
        r->degenerate = t->counts_b ? gx.n_cells < 2 : (m_pos < 2 && !gx.impossible);
        if (r->degenerate) {
            r->method = "degenerate";
            r->p_value = r->p_random = NAN;
            continue;
        }
        live[n_live++] = i;
    }
    sum->n_rows = nt;
    for (size_t j = 0; j < n_live; j++) live_p[j] = sum->test[live[j]].p_value;
    if ((rc = sl_stats_holm(live_p, n_live, live_adj))) goto done;
    sum->min_p_holm = 1;
    sum->min_p = 1;
    sum->n_rejected = 0;
    for (size_t j = 0; j < n_live; j++) {
        sl_verify_test *r = &sum->test[live[j]];
        r->p_holm = live_adj[j];
        r->reject = live_adj[j] <= o->level;
        sum->min_p_holm = fmin(sum->min_p_holm, live_adj[j]);
        sum->min_p = fmin(sum->min_p, live_p[j]);
        sum->n_rejected += live_adj[j] <= o->level;
    }
    sum->n_tests = n_live;
    sum->rejected = sum->n_rejected > 0;
    sum->power_level = o->level / (double)(n_live ? n_live : 1);
    for (size_t i = 0; i < nt; i++) {
        sl_verify_test *r = &sum->test[i];
        if (r->df < 1 || v->t[i].fixed_method) continue;
        double neff = (double)r->n;
        if (v->t[i].counts_b) /* homogeneity: n_a n_b / (n_a + n_b) */
            neff = (double)r->n * (double)r->n_b / (double)(r->n + r->n_b);
        r->power = sl_stats_power_at_n(neff, o->tv_delta, r->df, sum->power_level);
        /* The TV this test detects with power 0.9 against any alternative: lambda = 4 n tv^2. */
        double lambda;
        if (!sl_stats_lambda_for_power(r->df, sum->power_level, 0.9, &lambda)) r->tv_90 = fmin(1, sqrt(lambda / (4 * neff)));
    }
done:
    free(live);
    free(live_p);
    free(live_adj);
    return rc;
}

/* Fails the first table that failed, frees them all and clears the list. */
static int report_status(sl_table **t, size_t n)
{
    int rc = SL_OK;
    for (size_t i = 0; i < n && !rc; i++) rc = t[i] ? sl_table_status(t[i]) : SL_EFAIL;
    if (rc)
        for (size_t i = 0; i < n; i++) {
            sl_table_free(t[i]);
            t[i] = NULL;
        }
    return rc;
}

int sl_verify_report(const sl_verify_result *r, sl_table **tables, size_t *n_tables)
{
    *n_tables = 0;
    static const sl_colspec vcols[] = {
        SL_COL_S("rule"), SL_COL_D("lenience", "%g"), SL_COL_I("iterations"), SL_COL_I("tokens"), SL_COL_I("tests"),
        SL_COL_I("rejected_tests"), SL_COL_D("min_p", "%.3g"), SL_COL_D("min_p_holm", "%.3g"),
        SL_COL_D("level", "%g"), SL_COL_D("tv_delta", "%g"), SL_COL_D("power_level", "%.3g"),
        SL_COL_D("max_freq_ratio", "%.4f"), SL_COL_D("lenience_excess", "%.5f"), SL_COL_S("verdict")};
    static const sl_colspec tcols[] = {
        SL_COL_S("test"), SL_COL_I("n"), SL_COL_I("categories"), SL_COL_I("cells"), SL_COL_I("df"),
        SL_COL_D("pearson", "%.3f"), SL_COL_D("p_pearson", "%.3g"), SL_COL_D("g", "%.3f"), SL_COL_D("p_g", "%.3g"),
        SL_COL_D("p_small", "%.3g"), SL_COL_S("method"), SL_COL_D("p_value", "%.3g"), SL_COL_D("p_holm", "%.3g"),
        SL_COL_I("reject"), SL_COL_D("tv", "%.4f"), SL_COL_D("tv_lo", "%.4f"), SL_COL_D("tv_hi", "%.4f"),
        SL_COL_D("power", "%.3f"), SL_COL_D("tv_90", "%.4f")};
    static const sl_colspec lcols[] = {SL_COL_I("token"), SL_COL_D("p", "%.6f"), SL_COL_D("frequency", "%.6f"),
                                       SL_COL_D("ci_lo", "%.6f"), SL_COL_D("ci_hi", "%.6f"),
                                       SL_COL_D("bound", "%.6f"), SL_COL_I("within")};
    sl_table *vt = SL_TABLE_NEW("verdict", vcols), *tt = SL_TABLE_NEW("tests", tcols);
    sl_table_row(vt);
    sl_table_sets(vt, "rule", sl_rule_name(r->rule));
    sl_table_setd(vt, "lenience", r->lenience);
    sl_table_seti(vt, "iterations", (int64_t)r->iterations);
    sl_table_seti(vt, "tokens", (int64_t)r->tokens);
    sl_table_seti(vt, "tests", (int64_t)r->n_tests);
    sl_table_seti(vt, "rejected_tests", (int64_t)r->n_rejected);
    sl_table_setd(vt, "min_p", r->min_p);
    sl_table_setd(vt, "min_p_holm", r->min_p_holm);
    sl_table_setd(vt, "level", r->level);
    sl_table_setd(vt, "tv_delta", r->tv_delta);
    sl_table_setd(vt, "power_level", r->power_level);
    sl_table_setd(vt, "max_freq_ratio", isinf(r->max_freq_ratio) ? NAN : r->max_freq_ratio);
    sl_table_setd(vt, "lenience_excess", r->lenience_excess);
    sl_table_sets(vt, "verdict", r->rejected ? "not-lossless" : "consistent-with-lossless");
    for (size_t i = 0; i < r->n_rows; i++) {
        const sl_verify_test *e = &r->test[i];
        sl_table_row(tt);
        sl_table_sets(tt, "test", e->name);
        sl_table_seti(tt, "n", (int64_t)e->n);
        sl_table_seti(tt, "categories", (int64_t)e->categories);
        sl_table_seti(tt, "cells", (int64_t)e->cells);
        sl_table_seti(tt, "df", (int64_t)e->df);
        sl_table_setd(tt, "pearson", e->pearson);
        sl_table_setd(tt, "p_pearson", e->p_pearson);
        sl_table_setd(tt, "g", e->g);
        sl_table_setd(tt, "p_g", e->p_g);
        sl_table_setd(tt, "p_small", e->p_small);
        sl_table_sets(tt, "method", e->method);
        sl_table_setd(tt, "p_value", e->p_value);
        sl_table_setd(tt, "p_holm", e->p_holm);
        if (e->reject >= 0) sl_table_seti(tt, "reject", e->reject);
        sl_table_setd(tt, "tv", e->tv);
        sl_table_setd(tt, "tv_lo", e->tv_lo);
        sl_table_setd(tt, "tv_hi", e->tv_hi);
        sl_table_setd(tt, "power", e->power);
        sl_table_setd(tt, "tv_90", e->tv_90);
    }
    tables[(*n_tables)++] = vt;
    tables[(*n_tables)++] = tt;
    if (r->n_tokens) {
        sl_table *lt = SL_TABLE_NEW("lenience_bound", lcols);
        for (size_t x = 0; x < r->n_tokens; x++) {
            const sl_verify_token *k = &r->token[x];
            sl_table_row(lt);
            sl_table_seti(lt, "token", (int64_t)x);
            sl_table_setd(lt, "p", k->p);
            sl_table_setd(lt, "frequency", k->frequency);
            sl_table_setd(lt, "ci_lo", k->ci_lo);
            sl_table_setd(lt, "ci_hi", k->ci_hi);
            sl_table_setd(lt, "bound", k->bound);
            sl_table_seti(lt, "within", k->within);
        }
        tables[(*n_tables)++] = lt;
    }
    int rc = report_status(tables, *n_tables);
    if (rc) *n_tables = 0;
    return rc;
}
