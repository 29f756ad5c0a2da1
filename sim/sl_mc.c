/*
 * sl_mc.c: synthetic (p, q) families, the Monte Carlo loop over Algorithm 1, and its report.
 */
#include "sl_mc.h"

#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include <gsl/gsl_randist.h>
#ifdef __AVX2__
#include <immintrin.h>
#endif
#include <omp.h>

#include "sl_common.h"
#include "sl_mpi.h"
#include "sl_theory.h"

/* ---- in-memory rows ---- */

sl_mc_rows *sl_mc_rows_alloc(size_t V, size_t n_rows, sl_mc_layout layout)
{
    if (V == 0 || n_rows == 0) {
        sl_fail(SL_EINPUT, "rows: V = %zu, n_rows = %zu, expected both >= 1", V, n_rows);
        return NULL;
    }
    sl_mc_rows *r = sl_calloc(1, sizeof *r);
    if (!r) return NULL;
    r->V = V;
    r->n_rows = n_rows;
    r->layout = layout;
    r->p = sl_calloc(V * n_rows, sizeof *r->p);
    r->q = sl_calloc(V * n_rows, sizeof *r->q);
    if (!r->p || !r->q) {
        sl_mc_rows_free(r);
        return NULL;
    }
    return r;
}

void sl_mc_rows_free(sl_mc_rows *r)
{
    if (!r) return;
    free(r->p);
    free(r->q);
    free(r);
}

static int rows_row(void *self, size_t i, double *p, double *q)
{
    sl_mc_rows *r = self;
    if (i >= r->n_rows) return sl_fail(SL_EINPUT, "rows: row %zu of %zu", i, r->n_rows);
    memcpy(p, r->p + i * r->V, r->V * sizeof *p);
    memcpy(q, r->q + i * r->V, r->V * sizeof *q);
    return SL_OK;
}

sl_mc_source sl_mc_rows_source(sl_mc_rows *r)
{
    return (sl_mc_source){r, r->V, r->n_rows, r->layout, rows_row};
}

/* ---- families ---- */

static const char *family_names[SL_FAMILY_COUNT] = {"identical", "noisy", "dirichlet", "zipf", "disjoint",
                                                     "positional"};

const char *sl_mc_family_name(sl_mc_family f)
{
    return (unsigned)f < SL_FAMILY_COUNT ? family_names[f] : "?";
}

int sl_mc_family_parse(const char *s, sl_mc_family *out)
{
    for (int i = 0; i < SL_FAMILY_COUNT; i++)
        if (!strcmp(s, family_names[i])) {
            *out = (sl_mc_family)i;
            return SL_OK;
        }
    return sl_fail(SL_EINPUT, "family: '%s', expected identical|noisy|dirichlet|zipf|disjoint|positional", s);
}

int sl_mc_family_validate(const sl_mc_family_params *fp)
{
    if ((unsigned)fp->family >= SL_FAMILY_COUNT) return sl_fail(SL_EINPUT, "family: unknown family %d", fp->family);
    if (fp->V < 2 || fp->V > (size_t)INT32_MAX) return sl_fail(SL_EINPUT, "vocab: %zu, expected 2..%d", fp->V, INT32_MAX);
    if (fp->gamma < 1 || fp->gamma > SL_SPEC_GAMMA_MAX)
        return sl_fail(SL_EINPUT, "gamma: %zu, expected 1..%d", fp->gamma, SL_SPEC_GAMMA_MAX);
    if (!(fp->noise >= 0) || !isfinite(fp->noise)) return sl_fail(SL_EINPUT, "noise: %g, expected a finite value >= 0", fp->noise);
    if (!(fp->concentration > 0) || !isfinite(fp->concentration))
        return sl_fail(SL_EINPUT, "concentration: %g, expected a finite value > 0", fp->concentration);
    if (!(fp->zipf_s > 0) || !isfinite(fp->zipf_s)) return sl_fail(SL_EINPUT, "zipf_s: %g, expected a finite value > 0", fp->zipf_s);
    if (!(fp->temp_p > 0) || !isfinite(fp->temp_p)) return sl_fail(SL_EINPUT, "temp_p: %g, expected a finite value > 0", fp->temp_p);
    if (!(fp->temp_q > 0) || !isfinite(fp->temp_q)) return sl_fail(SL_EINPUT, "temp_q: %g, expected a finite value > 0", fp->temp_q);
    return SL_OK;
}

/* p ~ Dirichlet(concentration, ..., concentration); alpha (V) is scratch. */
static void draw_dirichlet(gsl_rng *r, size_t V, double conc, double *alpha, double *p)
{
    for (size_t x = 0; x < V; x++) alpha[x] = conc;
    gsl_ran_dirichlet(r, V, alpha, p);
}

/* q = softmax(log p + noise * z), z ~ N(0, 1) i.i.d.; zero entries of p stay zero. */
static void noisy_copy(gsl_rng *r, size_t V, double noise, const double *p, double *q)
{
    double mx = -INFINITY;
    for (size_t x = 0; x < V; x++) {
        double z = gsl_ran_gaussian_ziggurat(r, 1.0);
        q[x] = p[x] > 0 ? log(p[x]) + noise * z : -INFINITY;
        if (q[x] > mx) mx = q[x];
    }
    double s = 0;
    for (size_t x = 0; x < V; x++) {
        q[x] = exp(q[x] - mx);
        s += q[x];
    }
    for (size_t x = 0; x < V; x++) q[x] /= s;
}

static void zipf(size_t V, double s, double temp, double *p)
{
    double sum = 0;
    for (size_t x = 0; x < V; x++) {
        p[x] = pow((double)x + 1, -s / temp);
        sum += p[x];
    }
    for (size_t x = 0; x < V; x++) p[x] /= sum;
}

int sl_mc_family_rows(const sl_mc_family_params *fp, sl_mc_rows **out)
{
    *out = NULL;
    int rc = sl_mc_family_validate(fp);
    if (rc) return rc;
    size_t V = fp->V;
    int positional = fp->family == SL_FAMILY_POSITIONAL;
    size_t n = positional ? fp->gamma + 1 : 1;
    sl_mc_rows *rows = sl_mc_rows_alloc(V, n, positional ? SL_MC_POSITIONAL : SL_MC_IID);
    double *alpha = sl_malloc(V * sizeof *alpha);
    gsl_rng *r = sl_rng_alloc(fp->seed, SL_STREAM_FAMILY, 0);
    if (!rows || !alpha || !r) {
        rc = SL_EFAIL;
        goto done;
    }
    for (size_t i = 0; i < n; i++) {
        double *p = rows->p + i * V, *q = rows->q + i * V;
        sl_rng_reseed(r, fp->seed, SL_STREAM_FAMILY, i);
        switch (fp->family) {
        case SL_FAMILY_IDENTICAL:
            draw_dirichlet(r, V, fp->concentration, alpha, p);
            memcpy(q, p, V * sizeof *q);
            break;
        case SL_FAMILY_NOISY:
            draw_dirichlet(r, V, fp->concentration, alpha, p);
            noisy_copy(r, V, fp->noise, p, q);
            break;
        case SL_FAMILY_DIRICHLET:
            draw_dirichlet(r, V, fp->concentration, alpha, p);
            draw_dirichlet(r, V, fp->concentration, alpha, q);
            break;
        case SL_FAMILY_ZIPF:
            zipf(V, fp->zipf_s, fp->temp_p, p);
            zipf(V, fp->zipf_s, fp->temp_q, q);
            break;
        case SL_FAMILY_DISJOINT: {
            size_t h = V / 2;
            for (size_t x = 0; x < V; x++) {
                p[x] = x < h ? 1.0 / (double)h : 0.0;
                q[x] = x < h ? 0.0 : 1.0 / (double)(V - h);
            }
            break;
        }
        case SL_FAMILY_POSITIONAL:
            /* Noise grows with the position, so beta_i falls along the draft: the i.i.d. formula
             * is then wrong on purpose. */
            draw_dirichlet(r, V, fp->concentration, alpha, p);
            noisy_copy(r, V, fp->noise * (double)(i + 1), p, q);
            break;
        default:
            break;
        }
    }
    *out = rows;
    rows = NULL;
done:
    sl_mc_rows_free(rows);
    free(alpha);
    if (r) gsl_rng_free(r);
    return rc;
}

/* ---- plan ---- */

/* One alias-table column c of V, in integers. sl_alias_sample_u(a, u) for u = k 2^-53 computes
 * x = fl(u V), column min(floor(x), V-1), and keeps the column if x - column < prob[c]. With
 * y = k V / 2^53 exactly, c = floor(y) and m = k V mod 2^53, the draw is integer arithmetic:
 *   - x rounds y to the nearest double; it can reach c + 1 only when 2^53 - m <= 2^e (half an ulp,
 *     2^e <= c), i.e. within less than V of the column's end: at most one k per column, the last
 *     one (m >= 2^53 - V), whose token is precomputed: last;
 *   - otherwise x is in [c, c+1), x - c is exact and grows with k, so the column is kept exactly
 *     for k < keep_below.
 * mc_col_build finds keep_below and last by evaluating sl_alias_sample_u's own arithmetic, and
 * tests/test_mc.c compares the two draws at every column's edges and thresholds. */
typedef struct {
    uint64_t keep_below;
    uint32_t alias, last;
} mc_col;

/* The counting loop's table for one column c of q's alias table (see count_group): the keep test's
 * probability and the accept thresholds of both tokens the column can give, side by side in one
 * 32-byte entry, so that testing a draft reads one cache line. */
typedef struct {
    double prob;        /* the alias table's prob[c] */
    uint64_t thr_col;   /* T[c] (thr below) */
    uint64_t thr_alias; /* T[alias[c]] */
    uint64_t pad;
} mc_cnt;

/* The counting loop's compact copy of mc_cnt, one 64-bit word per column, so that a draft's test
 * is one gather from a table a quarter the size (V = 50257: 400 KB, in L2, where mc_cnt's 1.6 MB is
 * not): bits 0-31 prob[c]'s bit pattern >> pshift, bits 32-47 and 48-63 T[c] and T[alias[c]]
 * >> tshift (at most 0xffff). For nonnegative doubles and for integers, a < b follows from
 * a >> s < b >> s, and a >= b from a >> s > b >> s; only where the shifted values are equal (a
 * tie: by default about one test in 6 10^4, 2^-16 for the threshold and ~2^-20 for prob) is
 * the decision unknown, and the loop then takes that position's tests from mc_cnt itself.
 * pshift >= 32, tshift >= 37 (T <= 2^53); larger shifts make ties frequent
 * (sl_mc_plan_set_count_bits, for tests). */
#define MC_PSHIFT 32
#define MC_TSHIFT 37

/* The fused loop's tables for one row. */
typedef struct {
    const mc_col *q, *r, *p;
    const uint64_t *thr;
} mc_tab;

struct sl_mc_plan {
    size_t V, gamma;
    size_t n_src;      /* distinct rows */
    size_t n_win;      /* window rows (copies included) */
    sl_mc_layout layout;
    sl_spec_config cfg;
    int use_accel;
    double *p, *q;     /* (n_src, V) distinct rows */
    double *wp, *wq;   /* (n_win, V) window rows: a window starting at s is rows s..s+gamma */
    sl_alias **qa, **pa, **ra; /* (n_src) */
    sl_spec_accel *accel;      /* (n_win) */
    double *row_accept;        /* (n_src) acceptance probability under cfg */
    /* The fused loop's copies of the same tables, laid out for it (exact and lenient rules only):
     * prob and alias of a column side by side, so a draw touches one cache line, and the
     * acceptance threshold of every token precomputed, so a test is a load and a compare. */
    mc_col *fq, *fr, *fp; /* (n_src, V) alias tables of q, the residual and p */
    uint64_t *thr;        /* (n_src, V) sl_spec_verify's threshold t = p/(l q) (1 or 0 where q = 0) as
                             the integer T = ceil(min(t, 1) 2^53): for u = k 2^-53, u < t iff k < T */
    mc_tab *wtab;         /* (n_win) the tables of window row w, like accel; NULL: no fused loop */
    mc_cnt *cnt;          /* (n_src, V), 64-byte aligned: the counting loop's (not for sliding layouts) */
    uint64_t *cnt8;       /* (n_src, V), 64-byte aligned: its compact copy (see MC_PSHIFT) */
    unsigned pshift, tshift;
};

size_t sl_mc_plan_vocab(const sl_mc_plan *plan) { return plan->V; }
size_t sl_mc_plan_gamma(const sl_mc_plan *plan) { return plan->gamma; }
size_t sl_mc_plan_rows(const sl_mc_plan *plan) { return plan->n_src; }
const double *sl_mc_plan_p(const sl_mc_plan *plan, size_t row) { return plan->p + row * plan->V; }
const double *sl_mc_plan_q(const sl_mc_plan *plan, size_t row) { return plan->q + row * plan->V; }
sl_mc_layout sl_mc_plan_layout(const sl_mc_plan *plan) { return plan->layout; }
const sl_spec_config *sl_mc_plan_config(const sl_mc_plan *plan) { return &plan->cfg; }

/* Source row of window position i (0..gamma) for a window starting at s. */
static size_t src_row(const sl_mc_plan *pl, size_t s, size_t i)
{
    switch (pl->layout) {
    case SL_MC_IID: return 0;
    case SL_MC_POSITIONAL: return i;
    default: return (s + i) % pl->n_src;
    }
}

static size_t window_start(const sl_mc_plan *pl, size_t t)
{
    return pl->layout == SL_MC_SLIDING ? t % pl->n_src : 0;
}

void sl_mc_plan_free(sl_mc_plan *pl)
{
    if (!pl) return;
    for (size_t i = 0; pl->qa && i < pl->n_src; i++) {
        sl_alias_free(pl->qa[i]);
        sl_alias_free(pl->pa[i]);
        sl_alias_free(pl->ra[i]);
    }
    free(pl->qa);
    free(pl->pa);
    free(pl->ra);
    free(pl->accel);
    free(pl->p);
    free(pl->q);
    free(pl->wp);
    free(pl->wq);
    free(pl->row_accept);
    free(pl->fq);
    free(pl->fr);
    free(pl->fp);
    free(pl->thr);
    free(pl->wtab);
    free(pl->cnt);
    free(pl->cnt8);
    free(pl);
}

int sl_mc_plan_set_count_bits(sl_mc_plan *pl, unsigned pshift, unsigned tshift)
{
    if (!pl->cnt) return SL_OK;
    if (pshift < MC_PSHIFT || pshift > 63 || tshift < MC_TSHIFT || tshift > 63)
        return sl_fail(SL_EINPUT, "count bits: pshift %u, tshift %u, expected 32-63 and 37-63", pshift, tshift);
    const size_t n = pl->n_src * pl->V;
    if (!pl->cnt8 && !(pl->cnt8 = aligned_alloc(64, (n * sizeof *pl->cnt8 + 63) & ~(size_t)63)))
        return sl_fail(SL_EFAIL, "out of memory allocating the Monte Carlo tables");
    for (size_t j = 0; j < n; j++) {
        uint64_t pb, tc = pl->cnt[j].thr_col >> tshift, ta = pl->cnt[j].thr_alias >> tshift;
        memcpy(&pb, &pl->cnt[j].prob, sizeof pb);
        pl->cnt8[j] = pb >> pshift | (tc < 0xffff ? tc : 0xffff) << 32 | (ta < 0xffff ? ta : 0xffff) << 48;
    }
    pl->pshift = pshift;
    pl->tshift = tshift;
    return SL_OK;
}

/* The keep test of sl_alias_sample_u for u = k 2^-53 in column c: that its column is c and that
 * x - c < prob[c] (the same operations, so the same answer). */
static int alias_keeps(const sl_alias *a, size_t c, uint64_t k)
{
    double x = (double)k * 0x1.0p-53 * (double)a->V;
    size_t col = (size_t)x;
    if (col >= a->V) col = a->V - 1;
    return col == c && x - (double)col < a->prob[col];
}

/* Column c of a as an mc_col (see there). */
static mc_col mc_col_build(const sl_alias *a, size_t c)
{
    const unsigned __int128 two53 = (unsigned __int128)1 << 53, V = a->V;
    /* k in [k0, k1] have floor(k V / 2^53) = c. */
    uint64_t k0 = (uint64_t)((c * two53 + V - 1) / V), k1 = (uint64_t)(((c + 1) * two53 + V - 1) / V) - 1;
    mc_col col = {0, a->alias[c], (uint32_t)sl_alias_sample_u(a, (double)k1 * 0x1.0p-53)};
    /* keep_below: the first k in [k0, k1) that is not kept (k1 if none); keeping is a prefix of
     * the range. Start from the real-number estimate and step to the exact place. */
    long double est = ((long double)c + (long double)a->prob[c]) * 0x1.0p53L / (long double)a->V;
    uint64_t g = est <= (long double)k0 ? k0 : est >= (long double)k1 ? k1 : (uint64_t)ceill(est);
    while (g > k0 && !alias_keeps(a, c, g - 1)) g--;
    while (g < k1 && alias_keeps(a, c, g)) g++;
    col.keep_below = g;
    return col;
}

int sl_mc_plan_alloc(const sl_mc_source *src, size_t gamma, const sl_spec_config *cfg, sl_mc_plan **out)
{
    *out = NULL;
    if (gamma < 1 || gamma > SL_SPEC_GAMMA_MAX) return sl_fail(SL_EINPUT, "gamma: %zu, expected 1..%d", gamma, SL_SPEC_GAMMA_MAX);
    if (src->V < 1 || src->V > (size_t)INT32_MAX || src->n_rows < 1)
        return sl_fail(SL_EINPUT, "source: V = %zu, %zu rows", src->V, src->n_rows);
    if (src->layout == SL_MC_POSITIONAL && src->n_rows < gamma + 1)
        return sl_fail(SL_EINPUT, "gamma: %zu needs %zu positional rows, the source has %zu", gamma, gamma + 1, src->n_rows);
    int rc = sl_spec_config_validate(cfg);
    if (rc) return rc;
    sl_mc_plan *pl = sl_calloc(1, sizeof *pl);
    if (!pl) return SL_EFAIL;
    size_t V = src->V;
    pl->V = V;
    pl->gamma = gamma;
    pl->layout = src->layout;
    pl->cfg = *cfg;
    pl->n_src = src->layout == SL_MC_IID ? 1 : src->layout == SL_MC_POSITIONAL ? gamma + 1 : src->n_rows;
    pl->n_win = src->layout == SL_MC_SLIDING ? pl->n_src + gamma : gamma + 1;
    /* The sampler uses a table only where it draws from exactly that pmf (the wrong variants that
     * draw differently ignore them); the exception is the in-place variant, which edits p and then
     * takes the residual of the edited p, so a precomputed table would hide its bug. lenient-t0
     * works on argmaxes and never samples. */
    pl->use_accel = cfg->rule != SL_BUG_P_INPLACE && cfg->rule != SL_RULE_LENIENT_T0;
    pl->p = sl_malloc(pl->n_src * V * sizeof *pl->p);
    pl->q = sl_malloc(pl->n_src * V * sizeof *pl->q);
    pl->wp = sl_malloc(pl->n_win * V * sizeof *pl->wp);
    pl->wq = sl_malloc(pl->n_win * V * sizeof *pl->wq);
    pl->qa = sl_calloc(pl->n_src, sizeof *pl->qa);
    pl->pa = sl_calloc(pl->n_src, sizeof *pl->pa);
    pl->ra = sl_calloc(pl->n_src, sizeof *pl->ra);
    pl->accel = sl_calloc(pl->n_win, sizeof *pl->accel);
    pl->row_accept = sl_calloc(pl->n_src, sizeof *pl->row_accept);
    double *res = sl_malloc(V * sizeof *res);
    if (!pl->p || !pl->q || !pl->wp || !pl->wq || !pl->qa || !pl->pa || !pl->ra || !pl->accel || !pl->row_accept || !res) {
        rc = SL_EFAIL;
        goto fail;
    }
    for (size_t i = 0; i < pl->n_src; i++) {
        double *p = pl->p + i * V, *q = pl->q + i * V;
        if ((rc = src->row(src->self, i, p, q))) goto fail;
        char name[48];
        snprintf(name, sizeof name, "p (row %zu)", i);
        if ((rc = sl_dist_check(p, V, SL_DIST_SUM_TOL, name))) goto fail;
        snprintf(name, sizeof name, "q (row %zu)", i);
        if ((rc = sl_dist_check(q, V, SL_DIST_SUM_TOL, name))) goto fail;
        pl->row_accept[i] = sl_mc_accept_prob(cfg, p, q, V);
        if (pl->use_accel) {
            pl->qa[i] = sl_alias_alloc(V);
            pl->pa[i] = sl_alias_alloc(V);
            pl->ra[i] = sl_alias_alloc(V);
            if (!pl->qa[i] || !pl->pa[i] || !pl->ra[i]) {
                rc = SL_EFAIL;
                goto fail;
            }
            sl_alias_build(pl->qa[i], q);
            sl_alias_build(pl->pa[i], p);
            sl_dist_residual(p, q, V, res);
            sl_alias_build(pl->ra[i], res);
        }
    }
    if (pl->use_accel && (cfg->rule == SL_RULE_EXACT || cfg->rule == SL_RULE_LENIENT)) {
        size_t n = pl->n_src * V;
        pl->fq = sl_malloc(n * sizeof *pl->fq);
        pl->fr = sl_malloc(n * sizeof *pl->fr);
        pl->fp = sl_malloc(n * sizeof *pl->fp);
        pl->thr = sl_malloc(n * sizeof *pl->thr);
        pl->wtab = sl_malloc(pl->n_win * sizeof *pl->wtab);
        if (!pl->fq || !pl->fr || !pl->fp || !pl->thr || !pl->wtab) {
            rc = SL_EFAIL;
            goto fail;
        }
        const double l = cfg->rule == SL_RULE_LENIENT ? cfg->lenience : 1.0;
        for (size_t i = 0; i < pl->n_src; i++) {
            const double *p = pl->p + i * V, *q = pl->q + i * V;
            for (size_t x = 0; x < V; x++) {
                size_t j = i * V + x;
                pl->fq[j] = mc_col_build(pl->qa[i], x);
                pl->fr[j] = mc_col_build(pl->ra[i], x);
                pl->fp[j] = mc_col_build(pl->pa[i], x);
                /* The very expression of sl_spec_verify, so the same double; scaling by 2^53 is
                 * exact, so the integer test decides exactly as the double one. */
                double t = q[x] > 0 ? p[x] / (l * q[x]) : (p[x] > 0 ? 1.0 : 0.0);
                pl->thr[j] = t >= 1 ? (uint64_t)1 << 53 : (uint64_t)ceil(t * 0x1.0p53);
            }
        }
        if (pl->layout != SL_MC_SLIDING) {
            pl->cnt = aligned_alloc(64, (n * sizeof *pl->cnt + 63) & ~(size_t)63); /* a multiple of the alignment */
            if (!pl->cnt) {
                rc = sl_fail(SL_EFAIL, "out of memory allocating the Monte Carlo tables");
                goto fail;
            }
            for (size_t i = 0; i < pl->n_src; i++)
                for (size_t x = 0; x < V; x++) {
                    const sl_alias *a = pl->qa[i];
                    pl->cnt[i * V + x] = (mc_cnt){a->prob[x], pl->thr[i * V + x], pl->thr[i * V + a->alias[x]], 0};
                }
            if ((rc = sl_mc_plan_set_count_bits(pl, MC_PSHIFT, MC_TSHIFT))) goto fail;
        }
    }
    for (size_t w = 0; w < pl->n_win; w++) {
        /* Window row w holds the source row that a window starting at 0 (IID, positional) or at
         * w - i (sliding) sees at position i; for sliding that is simply row w mod n_src. */
        size_t r = pl->layout == SL_MC_SLIDING ? w % pl->n_src : src_row(pl, 0, w);
        memcpy(pl->wp + w * V, pl->p + r * V, V * sizeof *pl->wp);
        memcpy(pl->wq + w * V, pl->q + r * V, V * sizeof *pl->wq);
        if (pl->use_accel) pl->accel[w] = (sl_spec_accel){pl->qa[r], pl->pa[r], pl->ra[r]};
        if (pl->wtab) pl->wtab[w] = (mc_tab){pl->fq + r * V, pl->fr + r * V, pl->fp + r * V, pl->thr + r * V};
    }
    free(res);
    *out = pl;
    return SL_OK;
fail:
    free(res);
    sl_mc_plan_free(pl);
    return rc;
}

/* ---- the loop ---- */

/* sl_alias_sample_u for u = k 2^-53 (k < 2^53, the top 53 bits of a xoshiro output) on a column
 * table (see mc_col): the same token in integer arithmetic. V11 = V 2^11, so the 128-bit product
 * k V11 holds floor(k V / 2^53) in its high half and (k V mod 2^53) 2^11 in its low half;
 * last_lo = (2^53 - V) 2^11 marks the last k of a column. Selected without branches: which side
 * wins is a coin flip the predictor cannot learn. */
static inline uint32_t mc_draw(const mc_col *c, uint64_t V11, uint64_t last_lo, uint64_t k)
{
    unsigned __int128 pr = (unsigned __int128)k * V11;
    uint64_t col = (uint64_t)(pr >> 64), lo = (uint64_t)pr;
    const mc_col *e = c + col;
    uint32_t alias = e->alias, lastk = e->last;
    uint32_t r = k < e->keep_below ? (uint32_t)col : alias;
    return lo >= last_lo ? lastk : r;
}

/* Iterations ahead that the fused loop prefetches table columns for (measured: 2 to 8 alike). */
#define MC_AHEAD 2
/* Per-thread buffer of the fused loop: a block's uniforms as k (u = k 2^-53), (SL_MC_BLOCK * gamma)
 * rows of 4: [0] draft, [1] accept, [2] resample (only rows < SL_MC_BLOCK used), [3] unused. */
typedef uint64_t mc_row4[4];

/* Four xoshiro256** generators, one per 64-bit lane of 256-bit registers. */
typedef struct {
    __m256i s0, s1, s2, s3;
} mc_xo4;

/* The step of four or eight xoshiro256** generators side by side (vector type V, intrinsic prefix P,
 * its XOR and 64-bit rotation): x is each generator's next 64-bit output (sl_xoshiro_next; the
 * multiplications by 5 and 9 as shifts and adds, exact modulo 2^64), and the states advance.
 * MC_XO_NEXT_BODY returns its top 53 bits (>> 11). */
#define MC_XO_NEXT_BODY(g, V, P, XOR, ROL)                                                                      \
    MC_XO_STEP(g, V, P, XOR, ROL);                                                                              \
    return P##_srli_epi64(x, 11)
#define MC_XO_STEP(g, V, P, XOR, ROL)                                                                           \
    V x = P##_add_epi64(P##_slli_epi64((g)->s1, 2), (g)->s1);                                                 \
    x = ROL(x, 7);                                                                                              \
    x = P##_add_epi64(P##_slli_epi64(x, 3), x);                                                               \
    const V t = P##_slli_epi64((g)->s1, 17);                                                                  \
    (g)->s2 = XOR((g)->s2, (g)->s0);                                                                            \
    (g)->s3 = XOR((g)->s3, (g)->s1);                                                                            \
    (g)->s1 = XOR((g)->s1, (g)->s2);                                                                            \
    (g)->s0 = XOR((g)->s0, (g)->s3);                                                                            \
    (g)->s2 = XOR((g)->s2, t);                                                                                  \
    (g)->s3 = ROL((g)->s3, 45)

#define MC_ROL4(x, k) _mm256_or_si256(_mm256_slli_epi64((x), (k)), _mm256_srli_epi64((x), 64 - (k)))
static inline __attribute__((always_inline)) __m256i mc_xo4_next(mc_xo4 *g)
{
    MC_XO_NEXT_BODY(g, __m256i, _mm256, _mm256_xor_si256, MC_ROL4);
}

/* The whole 64-bit outputs (sl_xoshiro_next itself). */
static inline __attribute__((always_inline)) __m256i mc_xo4_next64(mc_xo4 *g)
{
    MC_XO_STEP(g, __m256i, _mm256, _mm256_xor_si256, MC_ROL4);
    return x;
}

/* Fills out (n) with the top 53 bits of the next n outputs of four xoshiro256** generators side by
 * side: out[j][l] from g[l]. With AVX2 the four advance together in one 256-bit register (the
 * multiplications by 5 and 9 are shifts and adds, exact modulo 2^64 like the scalar ones), which
 * costs about a third of four scalar steps; the values are those of sl_xoshiro_next. */
static void draw4(sl_xoshiro g[4], mc_row4 *out, size_t n)
{
#if defined(__AVX2__)
    mc_xo4 x;
    __m256i *s[4] = {&x.s0, &x.s1, &x.s2, &x.s3};
    for (int w = 0; w < 4; w++)
        *s[w] = _mm256_set_epi64x((long long)g[3].s[w], (long long)g[2].s[w], (long long)g[1].s[w], (long long)g[0].s[w]);
    for (size_t j = 0; j < n; j++) _mm256_storeu_si256((__m256i *)out[j], mc_xo4_next(&x));
    for (int w = 0; w < 4; w++) {
        uint64_t v[4];
        _mm256_storeu_si256((__m256i *)v, *s[w]);
        for (int l = 0; l < 4; l++) g[l].s[w] = v[l];
    }
#else
    sl_xoshiro x0 = g[0], x1 = g[1], x2 = g[2], x3 = g[3];
    for (size_t j = 0; j < n; j++) {
        out[j][0] = sl_xoshiro_next(&x0) >> 11;
        out[j][1] = sl_xoshiro_next(&x1) >> 11;
        out[j][2] = sl_xoshiro_next(&x2) >> 11;
        out[j][3] = sl_xoshiro_next(&x3) >> 11;
    }
    g[0] = x0, g[1] = x1, g[2] = x2, g[3] = x3;
#endif
}

/* Iterations t0..t1-1, all of block t0 / SL_MC_BLOCK (or its first part), for the exact and
 * lenient rules: the fast twin of sl_spec_draft + sl_spec_verify with accelerators, drawing the
 * same uniforms from the same streams for the same purposes (see sl_mc_run): iteration j of the
 * block uses draft uniforms j*gamma + i, accept uniforms j*gamma + i for the positions it tests,
 * and resample uniform j. The generators are inline xoshiro256** with the very states of the
 * gsl_rng streams, so the tokens are bit-identical (tests/test_mc.c).
 * Every iteration's uniforms are known up front, so the block's are drawn first, in tight loops,
 * and then every position of an iteration is drafted and tested without a branch: bit i of mask
 * says whether position i would accept, and the first rejection decides what is emitted (positions
 * after it only cost time). No iteration waits for the previous one, and there is no branch for the
 * predictor to miss on the coin flips. Not inlined into the OpenMP body, so that it gets the
 * registers to itself. */
__attribute__((noinline)) static void fused_block(const sl_mc_plan *pl, const sl_mc_opts *o, size_t t0, size_t t1,
                                                  mc_row4 *bf, uint64_t *hist, int32_t *tokens, uint8_t *n_emitted)
{
    const size_t gamma = pl->gamma, n_src = pl->n_src, n = t1 - t0;
    const int sliding = pl->layout == SL_MC_SLIDING;
    const uint64_t V11 = (uint64_t)pl->V << 11, last_lo = (((uint64_t)1 << 53) - pl->V) << 11;
    const uint64_t blk = t0 / SL_MC_BLOCK;
    const mc_tab *const wtab = pl->wtab;
    sl_xoshiro g[4] = {{{0}}};
    sl_xoshiro_seed(&g[0], o->seed, SL_STREAM_DRAFT, blk);
    sl_xoshiro_seed(&g[1], o->seed, SL_STREAM_ACCEPT, blk);
    sl_xoshiro_seed(&g[2], o->seed, SL_STREAM_RESAMPLE, blk);
    g[3] = g[2]; /* a lane with nothing to do */
    draw4(g, bf, n * gamma);
    const mc_row4 *u = bf;
    size_t s = window_start(pl, t0);
    const int prefetch = pl->V >= 16384; /* three 16-byte tables of 16384 columns: 768 KiB (measured: no gain at 8192) */
    int32_t out[SL_SPEC_GAMMA_MAX + 1];
    for (size_t j = 0; j < n; j++, u += gamma) {
        const mc_tab *tab = wtab + s;
        uint64_t mask = 0;
        if (prefetch && j + MC_AHEAD < n) {
            /* Tables larger than the L2 cache: ask now for the columns that iteration j + MC_AHEAD
             * will draw (its uniforms are known), in this window's tables (the same tables unless
             * the layout slides; a wrong guess costs only the hint). The emitted token's column
             * is prefetched in the tables it most likely comes from: position 1's residual, p. */
            const mc_row4 *ua = u + MC_AHEAD * gamma;
            for (size_t i = 0; i < gamma; i++)
                __builtin_prefetch(tab[i].q + (uint64_t)(((unsigned __int128)ua[i][0] * V11) >> 64));
            uint64_t cr = (uint64_t)(((unsigned __int128)bf[j + MC_AHEAD][2] * V11) >> 64);
            __builtin_prefetch(tab[0].r + cr);
            __builtin_prefetch(tab[gamma].p + cr);
        }
        for (size_t i = 0; i < gamma; i++) {
            uint32_t x = mc_draw(tab[i].q, V11, last_lo, u[i][0]);
            out[i] = (int32_t)x;
            mask |= (uint64_t)(u[i][1] < tab[i].thr[x]) << i;
        }
        size_t n_acc = mask == UINT64_MAX ? 64 : (size_t)__builtin_ctzll(~mask);
        if (n_acc > gamma) n_acc = gamma;
        /* The residual table of the rejected position, or p's at the bonus position, picked by
         * arithmetic: a conditional here compiles to another branch on a coin flip. */
        size_t off = offsetof(mc_tab, r) + (size_t)(n_acc == gamma) * (offsetof(mc_tab, p) - offsetof(mc_tab, r));
        const mc_col *lt = *(const mc_col *const *)((const char *)&tab[n_acc] + off);
        out[n_acc] = (int32_t)mc_draw(lt, V11, last_lo, bf[j][2]);
        size_t k = n_acc + 1;
        hist[k]++;
        if (tokens) {
            int32_t *dst = tokens + j * (gamma + 1);
            for (size_t i = 0; i <= gamma; i++) dst[i] = i < k ? out[i] : -1;
        }
        if (n_emitted) n_emitted[j] = (uint8_t)k;
        if (sliding && ++s == n_src) s = 0;
    }
}

/* ---- the counting loop: the histogram alone, eight blocks at a time (AVX-512) ----
 *
 * When nobody asks for tokens (`speclab mc`, sl_mc_run without token arrays) only the number of
 * tokens each iteration emits matters, and that follows from the drafts and the accept tests
 * alone: the residual or bonus token drawn at the end of an iteration does not change it, so its
 * uniform (stream SL_STREAM_RESAMPLE, a stream of its own) is not drawn. Everything else is the
 * fused loop's (and sl_spec_draft + sl_spec_verify's) arithmetic, for MC_GROUP = 8 consecutive
 * blocks at once, block b0 + l in lane l of 512-bit registers:
 *  - uniforms: two xoshiro256** per lane, the DRAFT and ACCEPT streams of the lane's block,
 *    advanced together; iteration j's position i takes output j gamma + i of each, as in the
 *    fused loop (so every position's uniforms are drawn, tested or not);
 *  - a draft is sl_alias_sample_u itself: x = (k 2^-53) V in double, col = trunc(x) (at most
 *    V - 1), col if x - col < prob[col] else alias[col]; the token itself is not needed, only its
 *    threshold, so one 64-bit word per column (the compact copy of mc_cnt: prob[col], T[col],
 *    T[alias[col]], their leading bits) gives both tests from one gather, and the rare ties
 *    (MC_PSHIFT) take them from mc_cnt;
 *  - the accept test is the fused loop's integer one, k < T[x];
 *  - the accepted prefix of each lane is counted with masks; the tables of positions after every
 *    lane's first rejection are not read (they change nothing).
 * Blocks stay the unit of randomness, so the histogram does not depend on MC_GROUP, the thread
 * count or the rank count; tests/test_mc.c compares it with the reference path's. Only for
 * layouts whose tables do not move with the iteration (i.i.d., positional: the plan builds mc_cnt
 * for them); the sliding layout uses the fused loop, and CPUs without AVX-512 (F and DQ)
 * count_group_avx2 below. */
#define MC_GROUP 8

static int cpu_has_avx512dq(void)
{
    static int has = -1;
    int h = __atomic_load_n(&has, __ATOMIC_RELAXED);
    if (h < 0) {
        __builtin_cpu_init();
        h = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq");
        __atomic_store_n(&has, h, __ATOMIC_RELAXED);
    }
    return h;
}

/* The counting loop's build: SL_MC_COUNT_AUTO until chosen (sl_mc_counting_isa). */
static int count_isa = SL_MC_COUNT_AUTO;

int sl_mc_counting_isa(int isa)
{
    if (isa == SL_MC_COUNT_AUTO || (isa == SL_MC_COUNT_WIDE && !cpu_has_avx512dq()))
        isa = cpu_has_avx512dq() ? SL_MC_COUNT_WIDE : SL_MC_COUNT_AVX2;
    __atomic_store_n(&count_isa, isa, __ATOMIC_RELAXED);
    return isa;
}

static int current_count_isa(void)
{
    const int isa = __atomic_load_n(&count_isa, __ATOMIC_RELAXED);
    return isa == SL_MC_COUNT_AUTO ? sl_mc_counting_isa(SL_MC_COUNT_AUTO) : isa;
}

/* Whether sl_mc_run_blocks may use count_group for these options. */
static int mc_counting(const sl_mc_plan *pl, const sl_mc_opts *o, int fused, int on_block)
{
    return fused && pl->cnt && !on_block && !o->tokens && !o->n_emitted;
}

/* Eight xoshiro256** generators, one per lane. */
typedef struct {
    __m512i s0, s1, s2, s3;
} mc_xo8;

/* The next output of each generator (MC_XO_NEXT_BODY). */
__attribute__((target("avx512f,avx512dq"), always_inline)) static inline __m512i mc_xo8_next(mc_xo8 *g)
{
    MC_XO_NEXT_BODY(g, __m512i, _mm512, _mm512_xor_si512, _mm512_rol_epi64);
}

/* The states of eight generators, word-major (st[w][l]: word w of lane l) for loading into an
 * mc_xo8: lane l has stream (seed, stream, b0 + l) (block b0's for lanes past nb: computed, never
 * counted). Plain C: no vector crosses a function boundary. */
static void mc_xo8_states(uint64_t st[4][8], uint64_t seed, uint64_t stream, size_t b0, size_t nb)
{
    for (size_t l = 0; l < 8; l++) {
        sl_xoshiro x;
        sl_xoshiro_seed(&x, seed, stream, b0 + (l < nb ? l : 0));
        for (int w = 0; w < 4; w++) st[w][l] = x.s[w];
    }
}

/* Blocks b0 .. b0 + nb - 1 (nb <= MC_GROUP) of an N-iteration run: adds each iteration's number of
 * emitted tokens to h8[lane][k] (a partial histogram per lane, summed by the caller). */
__attribute__((target("avx512f,avx512dq"), noinline)) static void count_group(const sl_mc_plan *pl, uint64_t seed,
                                                                             size_t b0, size_t nb, size_t N,
                                                                             uint64_t (*h8)[SL_SPEC_GAMMA_MAX + 2])
{
    const size_t gamma = pl->gamma, V = pl->V;
    uint64_t sd[4][8], sa[4][8];
    mc_xo8_states(sd, seed, SL_STREAM_DRAFT, b0, nb);
    mc_xo8_states(sa, seed, SL_STREAM_ACCEPT, b0, nb);
    mc_xo8 gd = {_mm512_loadu_si512(sd[0]), _mm512_loadu_si512(sd[1]), _mm512_loadu_si512(sd[2]), _mm512_loadu_si512(sd[3])};
    mc_xo8 ga = {_mm512_loadu_si512(sa[0]), _mm512_loadu_si512(sa[1]), _mm512_loadu_si512(sa[2]), _mm512_loadu_si512(sa[3])};
    /* Iterations of each lane's block: SL_MC_BLOCK but in the run's last block. */
    size_t nmax = 0;
    uint64_t nblk[8];
    for (size_t l = 0; l < 8; l++) {
        const size_t t0 = (b0 + l) * SL_MC_BLOCK;
        nblk[l] = l < nb ? (N - t0 < SL_MC_BLOCK ? N - t0 : SL_MC_BLOCK) : 0;
        if (nblk[l] > nmax) nmax = nblk[l];
    }
    const __m512i vn = _mm512_loadu_si512(nblk);
    /* Position i's table (the same for every iteration in these layouts). */
    const mc_cnt *tab[SL_SPEC_GAMMA_MAX];
    const uint64_t *tab8[SL_SPEC_GAMMA_MAX];
    for (size_t i = 0; i < gamma; i++) {
        tab[i] = pl->cnt + src_row(pl, 0, i) * V;
        tab8[i] = pl->cnt8 + src_row(pl, 0, i) * V;
    }
    const __m128i psh = _mm_cvtsi64_si128((long long)pl->pshift), tsh = _mm_cvtsi64_si128((long long)pl->tshift);
    const __m512i lo32 = _mm512_set1_epi64(0xffffffffLL), lo16 = _mm512_set1_epi64(0xffff);
    const __m512d two53 = _mm512_set1_pd(0x1.0p-53), Vd = _mm512_set1_pd((double)V);
    const __m512i vmax = _mm512_set1_epi64((long long)(V - 1)), one = _mm512_set1_epi64(1);
    for (size_t j = 0; j < nmax; j++) {
        const __mmask8 valid = _mm512_cmplt_epu64_mask(_mm512_set1_epi64((long long)j), vn);
        __mmask8 all = valid; /* lanes that accepted every position so far */
        __m512i nacc = _mm512_setzero_si512();
        for (size_t i = 0; i < gamma; i++) {
            const __m512i kd = mc_xo8_next(&gd), ka = mc_xo8_next(&ga);
            if (!all) continue; /* every lane has rejected: only the streams advance */
            const __m512d x = _mm512_mul_pd(_mm512_mul_pd(_mm512_cvtepu64_pd(kd), two53), Vd);
            const __m512i col = _mm512_min_epu64(_mm512_cvttpd_epu64(x), vmax);
            const __m512d frac = _mm512_sub_pd(x, _mm512_cvtepu64_pd(col));
            /* The draft is col where x - col < prob[col], else alias[col], and its threshold
             * likewise: from the compact entry (MC_PSHIFT) where that decides both tests, else
             * from mc_cnt. frac >= +0, so its bit pattern orders like its value. */
            const __m512i w = _mm512_mask_i64gather_epi64(_mm512_setzero_si512(), all, col, tab8[i], 8);
            const __m512i fhi = _mm512_srl_epi64(_mm512_castpd_si512(frac), psh), phi = _mm512_and_si512(w, lo32);
            const __m512i th = _mm512_mask_blend_epi64(_mm512_cmplt_epu64_mask(fhi, phi), _mm512_srli_epi64(w, 48),
                                                       _mm512_and_si512(_mm512_srli_epi64(w, 32), lo16));
            const __m512i khi = _mm512_srl_epi64(ka, tsh);
            if (__builtin_expect(all & (_mm512_cmpeq_epu64_mask(fhi, phi) | _mm512_cmpeq_epu64_mask(khi, th)), 0)) {
                /* Entry col of mc_cnt (4 quadwords each): prob, then the two thresholds. */
                const __m512i e = _mm512_slli_epi64(col, 2);
                const void *base = (const void *)tab[i];
                const __m512d pr = _mm512_mask_i64gather_pd(_mm512_setzero_pd(), all, e, base, 8);
                const __m512i tc = _mm512_mask_i64gather_epi64(_mm512_setzero_si512(), all, _mm512_add_epi64(e, one), base, 8);
                const __m512i ta = _mm512_mask_i64gather_epi64(_mm512_setzero_si512(), all,
                                                               _mm512_add_epi64(e, _mm512_set1_epi64(2)), base, 8);
                const __m512i tf = _mm512_mask_blend_epi64(_mm512_cmp_pd_mask(frac, pr, _CMP_LT_OQ), ta, tc);
                all &= _mm512_cmplt_epu64_mask(ka, tf);
            } else
                all &= _mm512_cmplt_epu64_mask(khi, th);
            nacc = _mm512_mask_add_epi64(nacc, all, nacc, one);
        }
        uint64_t k[8];
        _mm512_storeu_si512(k, nacc);
        for (size_t l = 0; l < 8; l++)
            if (valid >> l & 1) h8[l][k[l] + 1]++;
    }
}

/* ---- the counting loop on AVX2: count_group's arithmetic, four lanes per 256-bit register ----
 * The eight blocks of a group as two halves of four lanes, one after the other. What AVX2 lacks is rebuilt exactly: the 53-bit integer k as a double from its
 * two 32-bit halves (2^84 + hi 2^32 and 2^52 + lo, each exact, their sum k exactly); the
 * truncation of x = (k 2^-53) V, which is below 2^31, through 32-bit integers; unsigned 64-bit
 * comparisons as signed ones (every operand is below 2^63); masks as vectors of all-ones lanes.
 * So each lane makes the decisions of count_group's, and the histogram is the same
 * (tests/test_mc.c runs both builds against the reference path). */
/* x = (k 2^-53) V rounded once, as sl_alias_sample_u computes it, for k = r >> 11 (r the generator's
 * 64-bit output) and cV = V 2^-53: scaling by 2^-53 is exact, so x = fl(k cV). With k = 2 h + b
 * (h = r >> 12 < 2^52, b = bit 11 of r), h is exact as a double by the 2^52 trick (its bits under
 * 2^52's exponent, less 2^52), and one fused multiply-add fl(h (2 cV) + b cV) rounds the exact
 * k cV once: the same double, from 6 operations where converting all 53 bits and two products took 8. */
static inline __attribute__((always_inline)) __m256d mc_draft_x(__m256i r, double cV)
{
    const __m256i hb = _mm256_or_si256(_mm256_srli_epi64(r, 12), _mm256_set1_epi64x(0x4330000000000000LL));
    const __m256d h = _mm256_sub_pd(_mm256_castsi256_pd(hb), _mm256_set1_pd(0x1.0p52));
    const __m256d bc = _mm256_blendv_pd(_mm256_setzero_pd(), _mm256_set1_pd(cV), _mm256_castsi256_pd(_mm256_slli_epi64(r, 52)));
    return _mm256_fmadd_pd(h, _mm256_set1_pd(2 * cV), bc);
}

/* One position of one half, in two parts: mc_count_front4 draws both uniforms, finds every lane's
 * draft column and reads its table word; mc_count_back4 makes the tests and returns the lanes that
 * accept (all-ones lanes), whether or not they are still running. The table is read for every lane
 * (col < V always), and every position is computed even once all four lanes have rejected (the loop
 * checks only every fourth position), so no position waits for the previous one's tests; and the
 * loop takes the next position's front before this one's back, so that the table's reads (L2 at
 * V = 50257) are in flight a position earlier. */
typedef struct {
    __m256d frac; /* x - col */
    __m128i c32;  /* col */
    __m256i w;    /* tab8[col] */
    __m256i ka;   /* the accept uniform's k */
} mc_front4;

static inline __attribute__((always_inline)) mc_front4 mc_count_front4(mc_xo4 *gd, mc_xo4 *ga, const uint64_t *tab8,
                                                                       int V)
{
    mc_front4 f;
    const __m256d x = mc_draft_x(mc_xo4_next64(gd), (double)V * 0x1.0p-53);
    f.ka = mc_xo4_next(ga);
    f.c32 = _mm_min_epi32(_mm256_cvttpd_epi32(x), _mm_set1_epi32(V - 1));
    f.frac = _mm256_sub_pd(x, _mm256_cvtepi32_pd(f.c32));
    /* four loads, not vpgatherqq: faster on Zen 3 (and the same words) */
    f.w = _mm256_set_epi64x((long long)tab8[_mm_extract_epi32(f.c32, 3)], (long long)tab8[_mm_extract_epi32(f.c32, 2)],
                            (long long)tab8[_mm_extract_epi32(f.c32, 1)], (long long)tab8[_mm_cvtsi128_si32(f.c32)]);
    return f;
}

static inline __attribute__((always_inline)) __m256i mc_count_back4(const mc_front4 *f, const mc_cnt *tab, __m128i psh,
                                                                    __m128i tsh)
{
    const __m256i w = f->w, ka = f->ka;
    const __m256i fhi = _mm256_srl_epi64(_mm256_castpd_si256(f->frac), psh);
    const __m256i phi = _mm256_and_si256(w, _mm256_set1_epi64x(0xffffffffLL));
    const __m256i keep = _mm256_cmpgt_epi64(phi, fhi); /* fhi < phi: the column's own token */
    const __m256i th = _mm256_blendv_epi8(_mm256_srli_epi64(w, 48),
                                          _mm256_and_si256(_mm256_srli_epi64(w, 32), _mm256_set1_epi64x(0xffff)), keep);
    const __m256i khi = _mm256_srl_epi64(ka, tsh);
    const __m256i tie = _mm256_or_si256(_mm256_cmpeq_epi64(fhi, phi), _mm256_cmpeq_epi64(khi, th));
    if (__builtin_expect(!_mm256_testz_si256(tie, tie), 0)) {
        const __m256i e = _mm256_slli_epi64(_mm256_cvtepi32_epi64(f->c32), 2);
        const __m256d pr = _mm256_i64gather_pd((const double *)(const void *)tab, e, 8);
        const long long *base = (const long long *)(const void *)tab;
        const __m256i tc = _mm256_i64gather_epi64(base + 1, e, 8);
        const __m256i ta = _mm256_i64gather_epi64(base + 2, e, 8);
        const __m256i lt = _mm256_castpd_si256(_mm256_cmp_pd(f->frac, pr, _CMP_LT_OQ));
        const __m256i tf = _mm256_blendv_epi8(ta, tc, lt);
        return _mm256_cmpgt_epi64(tf, ka);
    }
    return _mm256_cmpgt_epi64(th, khi);
}

int sl_mc_counting_draft_x(const uint64_t r[4], size_t V, double x[4])
{
    _mm256_storeu_pd(x, mc_draft_x(_mm256_loadu_si256((const __m256i *)(const void *)r), (double)V * 0x1.0p-53));
    return 1;
}

static __attribute__((noinline)) void count_group_avx2(const sl_mc_plan *pl, uint64_t seed, size_t b0, size_t nb,
                                                       size_t N, uint64_t (*h8)[SL_SPEC_GAMMA_MAX + 2])
{
    const size_t gamma = pl->gamma, V = pl->V;
    uint64_t sd[4][8], sa[4][8];
    mc_xo8_states(sd, seed, SL_STREAM_DRAFT, b0, nb);
    mc_xo8_states(sa, seed, SL_STREAM_ACCEPT, b0, nb);
    const mc_cnt *tab[SL_SPEC_GAMMA_MAX];
    const uint64_t *tab8[SL_SPEC_GAMMA_MAX];
    for (size_t i = 0; i < gamma; i++) {
        tab[i] = pl->cnt + src_row(pl, 0, i) * V;
        tab8[i] = pl->cnt8 + src_row(pl, 0, i) * V;
    }
    const __m128i psh = _mm_cvtsi64_si128((long long)pl->pshift), tsh = _mm_cvtsi64_si128((long long)pl->tshift);
    /* One half (lanes 4 h .. 4 h + 3) after the other: the two generators of four lanes take 8 of
     * the 16 registers, and the gathers of successive positions overlap, not depending on each
     * other's tests. */
    for (size_t h = 0; h < 2 && 4 * h < nb; h++) {
#define SL_MC_LD(a, w) _mm256_loadu_si256((const __m256i *)(a[w] + 4 * h))
        mc_xo4 gd = {SL_MC_LD(sd, 0), SL_MC_LD(sd, 1), SL_MC_LD(sd, 2), SL_MC_LD(sd, 3)};
        mc_xo4 ga = {SL_MC_LD(sa, 0), SL_MC_LD(sa, 1), SL_MC_LD(sa, 2), SL_MC_LD(sa, 3)};
#undef SL_MC_LD
        size_t nmax = 0;
        uint64_t nblk[4];
        for (size_t l = 0; l < 4; l++) {
            const size_t lane = 4 * h + l, t0 = (b0 + lane) * SL_MC_BLOCK;
            nblk[l] = lane < nb ? (N - t0 < SL_MC_BLOCK ? N - t0 : SL_MC_BLOCK) : 0;
            if (nblk[l] > nmax) nmax = nblk[l];
        }
        const __m256i vn = _mm256_loadu_si256((const __m256i *)nblk);
        /* reach[i]: per lane, minus the number of iterations whose first i drafts were all
         * accepted (reach[0]: valid iterations); the histogram follows from their differences. */
        __m256i reach[SL_SPEC_GAMMA_MAX + 1];
        for (size_t i = 0; i <= gamma; i++) reach[i] = _mm256_setzero_si256();
        /* next: the front of the position after the current one, in stream order (drawn one
         * position ahead; after the last position of the block nothing more is drawn). */
        mc_front4 next = {0};
        if (nmax) next = mc_count_front4(&gd, &ga, tab8[0], (int)V);
        for (size_t j = 0; j < nmax; j++) {
            __m256i all = _mm256_cmpgt_epi64(vn, _mm256_set1_epi64x((long long)j)); /* valid, then accepted so far */
            reach[0] = _mm256_add_epi64(reach[0], all);
            for (size_t i = 0; i < gamma; i++) {
                const mc_front4 cur = next;
                if (i + 1 < gamma) next = mc_count_front4(&gd, &ga, tab8[i + 1], (int)V);
                else if (j + 1 < nmax) next = mc_count_front4(&gd, &ga, tab8[0], (int)V);
                all = _mm256_and_si256(all, mc_count_back4(&cur, tab[i], psh, tsh));
                reach[i + 1] = _mm256_add_epi64(reach[i + 1], all);
                /* Long drafts: every fourth position, stop testing once every lane has rejected
                 * (only the streams advance: next holds position i + 1's uniforms already). */
                if ((i & 3) == 3 && i + 1 < gamma && _mm256_testz_si256(all, all)) {
                    for (size_t u = i + 2; u < gamma; u++) (void)mc_xo4_next(&gd), (void)mc_xo4_next(&ga);
                    if (j + 1 < nmax) next = mc_count_front4(&gd, &ga, tab8[0], (int)V);
                    break;
                }
            }
        }
        uint64_t r[SL_SPEC_GAMMA_MAX + 2][4];
        for (size_t i = 0; i <= gamma; i++) _mm256_storeu_si256((__m256i *)r[i], _mm256_sub_epi64(_mm256_setzero_si256(), reach[i]));
        for (size_t l = 0; l < 4; l++) r[gamma + 1][l] = 0;
        for (size_t l = 0; l < 4; l++)
            for (size_t k = 0; k <= gamma; k++) h8[4 * h + l][k + 1] += r[k][l] - r[k + 1][l];
    }
}

/* Counts a finished block; thread 0 alone calls the callback, so it never runs twice at once. */
static void mc_progress(sl_progress_fn progress, void *ctx, size_t *blocks_done, size_t N)
{
    size_t d;
#pragma omp atomic capture
    d = ++*blocks_done;
    if (omp_get_thread_num() == 0) {
        size_t it = d * SL_MC_BLOCK;
        progress(ctx, it < N ? it : N, N);
    }
}

int sl_mc_run(const sl_mc_plan *pl, const sl_mc_opts *o, sl_mc_result *res)
{
    return sl_mc_run_progress(pl, o, NULL, NULL, res);
}

int sl_mc_run_progress(const sl_mc_plan *pl, const sl_mc_opts *o, sl_progress_fn progress, void *progress_ctx,
                       sl_mc_result *res)
{
    return sl_mc_run_blocks(pl, o, NULL, NULL, progress, progress_ctx, res);
}

int sl_mc_run_blocks(const sl_mc_plan *pl, const sl_mc_opts *o, sl_mc_block_fn on_block, void *block_ctx,
                     sl_progress_fn progress, void *progress_ctx, sl_mc_result *res)
{
    memset(res, 0, sizeof *res);
    if (o->iterations < 1) return sl_fail(SL_EINPUT, "iterations: %zu, expected >= 1", o->iterations);
    if (o->threads < 0) return sl_fail(SL_EINPUT, "threads: %d, expected >= 0", o->threads);
    if (on_block && (o->tokens || o->n_emitted))
        return sl_fail(SL_EINPUT, "Monte Carlo: a block callback and token arrays, expected one of them");
    const size_t V = pl->V, gamma = pl->gamma, N = o->iterations;
    const size_t n_blocks = (N + SL_MC_BLOCK - 1) / SL_MC_BLOCK;
    const int need_pcopy = pl->cfg.rule == SL_BUG_P_INPLACE;
    const int fused = !o->reference && pl->wtab;
    const int counting = mc_counting(pl, o, fused, on_block != NULL);
    const int wide = counting && current_count_isa() == SL_MC_COUNT_WIDE;
    int nt = o->threads > 0 ? o->threads : omp_get_max_threads();
    int status = SL_OK;
    char errbuf[512] = "";
    res->gamma = gamma;
    res->iterations = N;
    double t0 = sl_now_s();
    size_t blocks_done = 0;
    size_t b_lo, b_hi; /* this rank's blocks (MPI build); all of them serially */
    sl_mpi_share(n_blocks, &b_lo, &b_hi);

#pragma omp parallel num_threads(nt)
    {
        sl_rand_rng rr = {0};
        int rc = fused ? SL_OK : sl_rand_rng_init(&rr, o->seed, 0);
        sl_spec_work *w = rc || fused ? NULL : sl_spec_work_alloc(gamma, V);
        mc_row4 *fb = fused && !counting ? malloc(SL_MC_BLOCK * gamma * sizeof *fb) : NULL;
        /* The counting loop's partial histograms, one per lane. */
        uint64_t(*h8)[SL_SPEC_GAMMA_MAX + 2] = counting ? calloc(8, sizeof *h8) : NULL;
        /* With on_block, each block's tokens go to this thread's buffers and are handed over. */
        int32_t *btok = on_block ? malloc(SL_MC_BLOCK * (gamma + 1) * sizeof *btok) : NULL; /* (SL_MC_BLOCK, gamma+1) */
        uint8_t *bnem = on_block ? malloc(SL_MC_BLOCK) : NULL;                             /* (SL_MC_BLOCK) */
        double *pbuf = need_pcopy ? malloc((gamma + 1) * V * sizeof *pbuf) : NULL; /* (gamma+1, V) */
        uint64_t hist[SL_SPEC_GAMMA_MAX + 2] = {0};
        int32_t drafts[SL_SPEC_GAMMA_MAX];
        int ok = !rc && (counting ? h8 != NULL : fused ? fb != NULL : w != NULL) && (!need_pcopy || pbuf) &&
                 (!on_block || (btok && bnem));
        if (!ok && !rc) rc = sl_fail(SL_EFAIL, "out of memory allocating Monte Carlo workspace");
        if (counting) {
            /* Groups of MC_GROUP consecutive blocks of this rank's share (see count_group). */
            const size_t n_groups = (b_hi - b_lo + MC_GROUP - 1) / MC_GROUP;
#pragma omp for schedule(static)
            for (size_t g = 0; g < n_groups; g++) {
                if (!ok) continue;
                const size_t b0 = b_lo + g * MC_GROUP, nb = b_hi - b0 < MC_GROUP ? b_hi - b0 : MC_GROUP;
                if (wide) count_group(pl, o->seed, b0, nb, N, h8);
                else count_group_avx2(pl, o->seed, b0, nb, N, h8);
                for (size_t b = 0; progress && b < nb; b++) mc_progress(progress, progress_ctx, &blocks_done, N);
            }
            for (size_t l = 0; ok && l < 8; l++)
                for (size_t k = 0; k < gamma + 2; k++) hist[k] += h8[l][k];
        } else {
            /* Blocks, not iterations, are the unit of randomness: block b draws from the streams
             * seeded with (seed, stream, b), so which thread runs it changes nothing. */
#pragma omp for schedule(static)
            for (size_t b = b_lo; b < b_hi; b++) {
                if (!ok) continue;
                size_t tb = b * SL_MC_BLOCK, te = tb + SL_MC_BLOCK < N ? tb + SL_MC_BLOCK : N;
                /* Where this block's iteration tb + j writes: row j of tok and nem. */
                int32_t *tok = on_block ? btok : o->tokens ? o->tokens + tb * (gamma + 1) : NULL;
                uint8_t *nem = on_block ? bnem : o->n_emitted ? o->n_emitted + tb : NULL;
                if (fused) {
                    fused_block(pl, o, tb, te, fb, hist, tok, nem);
                } else {
                    sl_rand_rng_reseed(&rr, o->seed, b);
                    for (size_t t = tb; t < te && ok; t++) {
                        size_t s = window_start(pl, t);
                        sl_spec_outcome out;
                        const double *qw = pl->wq + s * V;
                        double *pw = pl->wp + s * V;
                        const sl_spec_accel *acc = pl->use_accel ? pl->accel + s : NULL;
                        for (size_t i = 0; i < gamma; i++)
                            drafts[i] = (int32_t)sl_spec_draft(&pl->cfg, qw + i * V, acc ? acc + i : NULL, V, &rr.base, w);
                        if (need_pcopy) {
                            /* This variant edits p in place: give it a private copy of the shared rows. */
                            memcpy(pbuf, pw, (gamma + 1) * V * sizeof *pbuf);
                            pw = pbuf;
                        }
                        unsigned slots = rr.n_slots;
                        rc = sl_spec_verify(&pl->cfg, gamma, V, qw, pw, drafts, acc, &rr.base, w, &out);
                        if (rc) {
                            ok = 0;
                            break;
                        }
                        /* Every iteration takes gamma uniforms from the accept stream and tests with the
                         * first ones (sl_spec_verify draws each through uniform_new, which counts them in
                         * n_slots); the rest are skipped, so that iteration j's uniforms sit at a fixed
                         * place in the block's stream. */
                        for (size_t u = rr.n_slots - slots; u < gamma; u++) (void)sl_rng_uniform53(rr.accept);
                        size_t k = out.n_emitted;
                        hist[k]++;
                        if (tok) {
                            int32_t *dst = tok + (t - tb) * (gamma + 1);
                            for (size_t i = 0; i <= gamma; i++) dst[i] = i < k ? out.tokens[i] : -1;
                        }
                        if (nem) nem[t - tb] = (uint8_t)k;
                    }
                }
                if (ok && on_block && (rc = on_block(block_ctx, omp_get_thread_num(), b, btok, bnem, te - tb))) ok = 0;
                if (progress) mc_progress(progress, progress_ctx, &blocks_done, N);
            }
        }
#pragma omp critical(sl_mc_reduce)
        {
            /* Integer sums: the order threads arrive in does not change a bit. */
            for (size_t k = 0; k < gamma + 2; k++) res->hist[k] += hist[k];
            if (rc && status == SL_OK) {
                status = rc;
                snprintf(errbuf, sizeof errbuf, "%s", sl_errmsg());
            }
        }
        free(pbuf);
        free(fb);
        free(h8);
        free(btok);
        free(bnem);
        sl_spec_work_free(w);
        if (rr.draft) sl_rand_rng_free(&rr);
    }
    /* MPI build: every rank's counts and tokens on every rank (integers; tokens by iteration). */
    if (status) status = sl_fail(status, "%s", errbuf[0] ? errbuf : "Monte Carlo iteration failed");
    status = sl_mpi_status(status);
    if (!status) {
        sl_mpi_sum_u64(res->hist, gamma + 2);
        if (o->tokens)
            sl_mpi_allgather_share(o->tokens, n_blocks, SL_MC_BLOCK * (gamma + 1) * sizeof *o->tokens,
                                   N * (gamma + 1) * sizeof *o->tokens);
        if (o->n_emitted) sl_mpi_allgather_share(o->n_emitted, n_blocks, SL_MC_BLOCK, N);
    }
    res->elapsed_s = sl_now_s() - t0;
    if (progress && !status) progress(progress_ctx, N, N);
    /* Everything else follows from the histogram of N = n_accepted + 1: position i (0-based) was
     * tested by the iterations with N >= i + 1 and accepted by those with N >= i + 2. */
    uint64_t tail = 0;
    for (size_t k = gamma + 1; k >= 1; k--) {
        tail += res->hist[k];
        if (k - 1 < gamma) res->reached_at[k - 1] = tail;
        if (k >= 2) res->accepted_at[k - 2] = tail;
        res->tokens += (uint64_t)k * res->hist[k];
        res->tokens_sq += (uint64_t)k * k * res->hist[k];
    }
    res->draft_calls = (uint64_t)N * gamma;
    res->target_calls = N;
    return status;
}

int64_t sl_mc_plan_fused_draw(const sl_mc_plan *pl, int which, size_t row, uint64_t k)
{
    if (!pl->wtab || which < 0 || which > 2 || row >= pl->n_src) return -1;
    const mc_col *t = (which == 0 ? pl->fq : which == 1 ? pl->fr : pl->fp) + row * pl->V;
    return mc_draw(t, (uint64_t)pl->V << 11, (((uint64_t)1 << 53) - pl->V) << 11, k);
}

const sl_alias *sl_mc_plan_alias(const sl_mc_plan *pl, int which, size_t row)
{
    if (!pl->wtab || which < 0 || which > 2 || row >= pl->n_src) return NULL;
    return which == 0 ? pl->qa[row] : which == 1 ? pl->ra[row] : pl->pa[row];
}

/* ---- predictions ---- */

double sl_mc_accept_prob(const sl_spec_config *cfg, const double *p, const double *q, size_t V)
{
    double s = 0;
    switch (cfg->rule) {
    case SL_RULE_LENIENT:
        for (size_t x = 0; x < V; x++) s += fmin(q[x], p[x] / cfg->lenience);
        return fmin(1.0, s);
    case SL_RULE_SAMPLER_MATCH:
        for (size_t x = 0; x < V; x++) s += p[x] * q[x];
        return s;
    case SL_RULE_LENIENT_T0: {
        size_t xq = sl_dist_argmax(q, V), xp = sl_dist_argmax(p, V);
        return p[xq] >= cfg->lenience * p[xp] ? 1.0 : 0.0;
    }
    default:
        return sl_dist_beta(p, q, V);
    }
}

/* Thin wrappers over sim/sl_theory.h with this module's indexing (pmf[0] = P(N = 0) = 0). The
 * arguments are valid by construction here (gamma <= 64, acceptance probabilities in [0, 1]). */
void sl_mc_pmf_iid(double alpha, size_t gamma, double *pmf)
{
    pmf[0] = 0;
    sl_theory_pmf(fmin(1.0, fmax(0.0, alpha)), (int)gamma, pmf + 1);
}

void sl_mc_pmf_positional(const double *beta, size_t gamma, double *pmf)
{
    double b[SL_SPEC_GAMMA_MAX];
    for (size_t i = 0; i < gamma; i++) b[i] = fmin(1.0, fmax(0.0, beta[i]));
    pmf[0] = 0;
    sl_theory_beta_pmf(b, (int)gamma, pmf + 1);
}

int sl_mc_predict(const sl_mc_plan *pl, size_t iterations, sl_mc_prediction *pred)
{
    memset(pred, 0, sizeof *pred);
    size_t gamma = pl->gamma;
    size_t n_windows = pl->layout == SL_MC_SLIDING ? pl->n_src : 1;
    double reach[SL_SPEC_GAMMA_MAX] = {0}, acc[SL_SPEC_GAMMA_MAX] = {0}, b[SL_SPEC_GAMMA_MAX],
           pmf[SL_SPEC_GAMMA_MAX + 2], alpha_sum = 0;
    for (size_t s = 0; s < n_windows; s++) {
        /* Iterations t = 0..N-1 start at t mod n_windows. */
        double wgt = (double)(iterations / n_windows) + (s < iterations % n_windows ? 1 : 0);
        if (n_windows == 1) wgt = (double)iterations;
        if (wgt == 0) continue;
        double r = 1, bs = 0;
        for (size_t i = 0; i < gamma; i++) {
            b[i] = pl->row_accept[src_row(pl, s, i)];
            reach[i] += wgt * r;
            acc[i] += wgt * r * b[i];
            r *= b[i];
            bs += b[i];
        }
        alpha_sum += wgt * bs / (double)gamma;
        sl_mc_pmf_positional(b, gamma, pmf);
        for (size_t k = 0; k <= gamma + 1; k++) pred->pmf[k] += wgt * pmf[k];
    }
    double N = (double)iterations, tr = 0, ta = 0;
    for (size_t k = 0; k <= gamma + 1; k++) pred->pmf[k] /= N;
    for (size_t i = 0; i < gamma; i++) {
        pred->beta[i] = reach[i] > 0 ? acc[i] / reach[i] : 0;
        tr += reach[i];
        ta += acc[i];
    }
    pred->acceptance = ta / tr;
    pred->alpha = alpha_sum / N;
    sl_mc_pmf_iid(pred->alpha, gamma, pred->pmf_iid);
    for (size_t k = 1; k <= gamma + 1; k++) {
        pred->expected_tokens += (double)k * pred->pmf[k];
        pred->expected_tokens_iid += (double)k * pred->pmf_iid[k];
    }
    return SL_OK;
}
