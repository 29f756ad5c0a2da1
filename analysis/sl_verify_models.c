/*
 * sl_verify_models.c: verify a sampler on a real draft/target pair (sl_verify_models.h).
 *
 * Work plan: per prompt, every worker wraps its own target and draft (the prompt scored once per
 * worker), then the speculative samples of that prompt are shared out (sample i in slot i), then
 * the autoregressive ones. Each worker's engine runs on one thread: the samples are independent,
 * so spreading them over workers beats splitting each small forward pass into a team. The tests
 * are built afterwards, in sample order, from the slots.
 */
#include "sl_verify_models.h"

#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "sl_common.h"
#include "sl_lm_open.h"
#include "sl_lm_prefix.h"
#include "sl_mpi.h"
#include "sl_prompts.h"
#include "sl_stats.h"
#include "sl_tok.h"
#include "sl_verify_internal.h"

void sl_verify_models_config_default(sl_verify_models_config *c)
{
    memset(c, 0, sizeof *c);
    c->samples = 4000;
    c->tokens = 4;
    c->gamma = 3;
    c->rule = SL_SPEC_CONFIG_DEFAULT;
    c->sampling = SL_SAMPLING_DEFAULT;
    c->seed = 1;
    c->autoregressive = 1;
    c->level = 0.01;
    c->tv_delta = 0.05;
    c->pit_bins = 20;
}

void sl_verify_models_result_free(sl_verify_models_result *r)
{
    if (!r) return;
    sl_verify_result_free(r->verify);
    free(r->spec);
    free(r->ar);
    free(r);
}

double sl_verify_models_pit(const double *p, size_t V, size_t x, double u)
{
    const double px = p[x];
    double before = 0;
    /* Ranked before x: larger p, or equal p and a lower id. */
    for (size_t y = 0; y < x; y++) before += p[y] >= px ? p[y] : 0;
    for (size_t y = x + 1; y < V; y++) before += p[y] > px ? p[y] : 0;
    double v = before + u * px;
    return v < 0 ? 0 : v > 1 ? 1 : v;
}

/* ---- the sampling pass ---- */

/* MPI build: a (n) array of esize-byte slots (4 or 8 bytes), each filled by exactly one rank and
 * zero on the others, made whole on every rank: the slots' bit patterns summed as integers
 * (x + 0 = x: exact, for doubles too). Nothing to do on one rank. */
static int merge_slots(void *a, size_t n, size_t esize)
{
    if (sl_mpi_size() == 1 || n == 0) return SL_OK;
    uint64_t *w = sl_malloc(n * sizeof *w);
    if (!w) return SL_EFAIL;
    for (size_t i = 0; i < n; i++) {
        uint32_t u32;
        if (esize == 4) memcpy(&u32, (char *)a + 4 * i, 4), w[i] = u32;
        else memcpy(&w[i], (char *)a + 8 * i, 8);
    }
    sl_mpi_sum_u64(w, n);
    for (size_t i = 0; i < n; i++) {
        uint32_t u32 = (uint32_t)w[i];
        if (esize == 4) memcpy((char *)a + 4 * i, &u32, 4);
        else memcpy((char *)a + 8 * i, &w[i], 8);
    }
    free(w);
    return SL_OK;
}

typedef struct {
    const sl_verify_models_config *c;
    const int32_t *const *prompts;
    const size_t *n_prompt;
    size_t P, K, k, V;
    int ar;                 /* draw the autoregressive set */
    int t0;                 /* lenient-t0: the null is the one-hot argmax */
    sl_lm **tl, **dl;       /* (workers) each worker's models */
    int32_t *spec, *art;    /* (K, k) tokens */
    double *spec_u, *ar_u;  /* (K, k) PIT values */
    uint32_t *spec_zero;    /* (K) speculative tokens of null probability 0 */
    uint64_t *drafted, *accepted; /* (K) */
    double *row0;           /* (P, V) p(. | prompt p) */
    double *ar_draw;        /* (K, k) the uniform each autoregressive token is drawn with */
    double *ar_pitu;        /* (K, k) the PIT uniforms of the autoregressive tokens */
    size_t *ar_idx;         /* (K) sample indices of the current prompt, grouped by their first token */
    size_t *grp_start;      /* (K + 1) groups of ar_idx with the same first token: [start, end) ... */
    size_t *grp_order;      /* (K) ... handed out largest first */
    size_t n_grp, n_idx;
    size_t done;            /* samples finished (progress) */
    int failed;             /* some worker failed: the others stop taking work */
    double spec_s, ar_s;
} vm_job;

/* The null pmf's PIT value and whether x is impossible under it. */
static double null_pit(const vm_job *j, const double *row, size_t x, double u, int *zero)
{
    if (j->t0) {
        size_t best = sl_dist_argmax(row, j->V);
        *zero = x != best;
        return x == best ? u : 1.0;
    }
    *zero = row[x] <= 0;
    return sl_verify_models_pit(row, j->V, x, u);
}

static void progress_tick(vm_job *j, size_t n)
{
    size_t d;
#pragma omp atomic capture
    d = j->done += n;
    if (j->c->progress) {
#pragma omp critical(vm_progress)
        j->c->progress(j->c->progress_ctx, d, j->K * (j->ar ? 2 : 1));
    }
}

static int one_spec(vm_job *j, size_t i, const int32_t *prompt, size_t np, sl_lm_prefix *tw, sl_lm_prefix *dw,
                    sl_rand_rng *rr, gsl_rng *ur)
{
    const size_t k = j->k;
    int32_t *out = j->spec + i * k;
    size_t n_out = 0;
    sl_spec_stats st;
    sl_rand_rng_reseed(rr, j->c->seed, 2 * (uint64_t)i);
    sl_rng_reseed(ur, j->c->seed, SL_VM_STREAM_PIT, 2 * (uint64_t)i);
    int rc = sl_lm_prefix_reset(tw);
    if (!rc) rc = sl_lm_prefix_reset(dw);
    if (!rc)
        rc = sl_spec_decode(&j->c->rule, j->c->gamma, &tw->lm, &dw->lm, prompt, np, k, -1, &rr->base, out, &n_out, &st,
                            NULL, NULL);
    if (rc) return rc;
    if (n_out != k) return sl_fail(SL_EFAIL, "verify: sample %zu has %zu tokens, expected %zu", i, n_out, k);
    uint32_t zeros = 0;
    for (size_t t = 0; t < k; t++) {
        int zero;
        j->spec_u[i * k + t] = null_pit(j, sl_lm_prefix_row(tw, t), (size_t)out[t], sl_rng_uniform53(ur), &zero);
        zeros += (uint32_t)zero;
    }
    j->spec_zero[i] = zeros;
    j->drafted[i] = st.drafted;
    j->accepted[i] = st.accepted;
    return SL_OK;
}

/* ---- the autoregressive set: one forward pass per distinct prefix ----
 * Plain sampling draws token j of sample i as sl_dist_sample_u(p(. | prompt, x_<j), u_ij), u_ij the
 * j-th uniform of the target stream of item 2i + 1 (sl_spec_autoregressive through sl_rand_rng).
 * Samples that share a prefix share its row, so the samples are walked depth first over the tree
 * of their prefixes: the row of each distinct prefix is computed once, by the same single-token
 * extend the plain sampler makes, hence the same bits and the same tokens (the unit test compares
 * every sample with sl_spec_autoregressive). */

/* The uniforms of sample i: k draws of its target stream and k of its PIT stream. */
static void ar_uniforms(vm_job *j, size_t i, gsl_rng *g)
{
    sl_rng_reseed(g, j->c->seed, SL_STREAM_TARGET, 2 * (uint64_t)i + 1);
    for (size_t t = 0; t < j->k; t++) j->ar_draw[i * j->k + t] = sl_rng_uniform53(g);
    sl_rng_reseed(g, j->c->seed, SL_VM_STREAM_PIT, 2 * (uint64_t)i + 1);
    for (size_t t = 0; t < j->k; t++) j->ar_pitu[i * j->k + t] = sl_rng_uniform53(g);
}

/* Token d of sample i from row, and its PIT value. */
static void ar_draw_one(vm_job *j, size_t i, size_t d, const double *row)
{
    size_t x = sl_dist_sample_u(row, j->V, j->ar_draw[i * j->k + d]);
    int zero;
    j->art[i * j->k + d] = (int32_t)x;
    j->ar_u[i * j->k + d] = null_pit(j, row, x, j->ar_pitu[i * j->k + d], &zero);
}

typedef struct {
    const int32_t *tok;
    size_t k, d;
} tok_order;

/* By token at depth d, then by sample index: a fixed order whatever the worker. */
static int cmp_by_token(const void *a, const void *b, void *ctx)
{
    const tok_order *o = ctx;
    size_t ia = *(const size_t *)a, ib = *(const size_t *)b;
    int32_t ta = o->tok[ia * o->k + o->d], tb = o->tok[ib * o->k + o->d];
    return ta != tb ? (ta < tb ? -1 : 1) : (ia > ib) - (ia < ib);
}

/* idx (n) share the prefix of length d + 1 whose last token is x; T holds prompt + the first d of
 * it. Extends x, draws token d + 1 of each sample and recurses per distinct token. rows (k, V). */
static int ar_subtree(vm_job *j, sl_lm *T, size_t n_prompt, size_t d, int32_t x, size_t *idx, size_t n, double *rows)
{
    double *row = rows + (d + 1) * j->V;
    int rc = T->truncate(T->self, n_prompt + d);
    if (!rc) rc = T->extend(T->self, &x, 1, 1, row);
    if (rc) return rc;
    for (size_t m = 0; m < n; m++) ar_draw_one(j, idx[m], d + 1, row);
    if (d + 2 >= j->k) return SL_OK;
    tok_order o = {j->art, j->k, d + 1};
    qsort_r(idx, n, sizeof *idx, cmp_by_token, &o);
    for (size_t a = 0, b; a < n && !rc; a = b) {
        int32_t y = j->art[idx[a] * j->k + d + 1];
        for (b = a + 1; b < n && j->art[idx[b] * j->k + d + 1] == y; b++) {}
        rc = ar_subtree(j, T, n_prompt, d + 1, y, idx + a, b - a, rows);
    }
    return rc;
}

/* Largest group first (ties: lower start), so that the big subtrees start early. */
static int cmp_group_size(const void *a, const void *b, void *ctx)
{
    const size_t *st = ctx, ga = *(const size_t *)a, gb = *(const size_t *)b;
    size_t na = st[ga + 1] - st[ga], nb = st[gb + 1] - st[gb];
    return na != nb ? (na > nb ? -1 : 1) : (ga > gb) - (ga < gb);
}

/* One worker's share of the whole pass; returns its status. Every worker reaches every barrier
 * (the `omp for` loops), failed or not. */
static int worker(vm_job *j, int tid)
{
    omp_set_num_threads(1); /* this worker's engine: one thread */
    const size_t rows = j->k + j->c->gamma + 1;
    sl_rand_rng rr;
    gsl_rng *ur = NULL;
    int rc = sl_rand_rng_init(&rr, j->c->seed, 0), rr_ok = rc == SL_OK;
    if (!rc && !(ur = sl_rng_alloc(j->c->seed, SL_VM_STREAM_PIT, 0))) rc = SL_EFAIL;
    double *rows_buf = j->ar ? sl_malloc(j->k * j->V * sizeof *rows_buf) : NULL; /* (k, V) */
    if (j->ar && !rows_buf) rc = SL_EFAIL;
    for (size_t p = 0; p < j->P; p++) {
        sl_lm_prefix tw, dw;
        int wrapped = 0;
        sl_lm *T = j->tl[tid], *D = j->dl[tid];
        if (!rc) rc = T->truncate(T->self, 0);
        if (!rc) rc = D->truncate(D->self, 0);
        if (!rc && !(rc = sl_lm_prefix_init(&tw, T, j->prompts[p], j->n_prompt[p], rows))) {
            if ((rc = sl_lm_prefix_init(&dw, D, j->prompts[p], j->n_prompt[p], rows))) sl_lm_prefix_free(&tw);
            else wrapped = 1;
        }
        if (wrapped && tid == 0) memcpy(j->row0 + p * j->V, sl_lm_prefix_row(&tw, 0), j->V * sizeof *j->row0);
        if (rc) {
#pragma omp atomic write
            j->failed = 1;
        }
        /* Samples i = p, p + P, ... continue prompt p; in the MPI build this rank takes its share of
         * them (m in [m_lo, m_hi)), and sl_verify_models_lm merges the ranks' slots. */
        const long n_all = (long)((j->K - p + j->P - 1) / j->P);
        size_t s_lo, s_hi;
        sl_mpi_share((size_t)n_all, &s_lo, &s_hi);
        const long m_lo = (long)s_lo, n_p = (long)(s_hi - s_lo);
#pragma omp barrier
        double t0 = sl_now_s();
#pragma omp for schedule(dynamic, 1)
        for (long m = 0; m < n_p; m++) {
            int f;
#pragma omp atomic read
            f = j->failed;
            if (f || rc) continue;
            rc = one_spec(j, p + (size_t)(m_lo + m) * j->P, j->prompts[p], j->n_prompt[p], &tw, &dw, &rr, ur);
            if (rc) {
#pragma omp atomic write
                j->failed = 1;
            }
            progress_tick(j, 1);
        }
        double t1 = sl_now_s();
        if (j->ar) {
            /* Every sample's uniforms and first token (row 0 is the wrapper's), then the first
             * tokens' subtrees shared out, largest first. */
#pragma omp for schedule(static)
            for (long m = 0; m < n_p; m++) {
                size_t i = p + (size_t)(m_lo + m) * j->P;
                if (ur) ar_uniforms(j, i, ur);
                if (wrapped) ar_draw_one(j, i, 0, sl_lm_prefix_row(&tw, 0));
            }
#pragma omp single
            {
                j->n_idx = (size_t)n_p;
                for (size_t m = 0; m < j->n_idx; m++) j->ar_idx[m] = p + ((size_t)m_lo + m) * j->P;
                tok_order o = {j->art, j->k, 0};
                qsort_r(j->ar_idx, j->n_idx, sizeof *j->ar_idx, cmp_by_token, &o);
                j->n_grp = 0;
                for (size_t a = 0; a < j->n_idx; a++)
                    if (a == 0 || j->art[j->ar_idx[a] * j->k] != j->art[j->ar_idx[a - 1] * j->k])
                        j->grp_start[j->n_grp++] = a;
                j->grp_start[j->n_grp] = j->n_idx;
                for (size_t g = 0; g < j->n_grp; g++) j->grp_order[g] = g;
                qsort_r(j->grp_order, j->n_grp, sizeof *j->grp_order, cmp_group_size, j->grp_start);
            }
#pragma omp for schedule(dynamic, 1)
            for (long gi = 0; gi < (long)j->n_grp; gi++) {
                int f;
#pragma omp atomic read
                f = j->failed;
                if (f || rc) continue;
                const size_t g = j->grp_order[gi], a = j->grp_start[g], n = j->grp_start[g + 1] - a;
                if (j->k > 1)
                    rc = ar_subtree(j, T, j->n_prompt[p], 0, j->art[j->ar_idx[a] * j->k], j->ar_idx + a, n, rows_buf);
                if (rc) {
#pragma omp atomic write
                    j->failed = 1;
                }
                progress_tick(j, n);
            }
        }
        if (tid == 0) {
            j->spec_s += t1 - t0;
            j->ar_s += sl_now_s() - t1;
        }
        if (wrapped) {
            sl_lm_prefix_free(&tw);
            sl_lm_prefix_free(&dw);
        }
    }
    if (rr_ok) sl_rand_rng_free(&rr);
    if (ur) gsl_rng_free(ur);
    free(rows_buf);
    return rc;
}

/* ---- the tests ---- */

/* counts (B) of u in B equal bins. */
static void bin_counts(const double *u, size_t n, size_t B, uint64_t *counts)
{
    for (size_t i = 0; i < n; i++) {
        size_t b = (size_t)(u[i] * (double)B);
        counts[b < B ? b : B - 1]++;
    }
}

static int add_pit_tests(sl_vtests *v, const char *prefix, const double *u, size_t n, size_t B)
{
    char name[32];
    double D, p;
    int rc = sl_stats_ks_uniform(u, n, &D, &p);
    snprintf(name, sizeof name, "%spit_ks", prefix);
    if (!rc) rc = sl_vtests_add_fixed(v, name, "uniform", "ks", n, D, p);
    if (rc) return rc;
    snprintf(name, sizeof name, "%spit_chi2", prefix);
    sl_vtest *t = sl_vtests_add(v, name, "uniform", B, 1, 0);
    if (!t) return SL_EFAIL;
    for (size_t b = 0; b < B; b++) t->pmf[b] = 1.0 / (double)B;
    bin_counts(u, n, B, t->counts);
    return SL_OK;
}

/* The pmf of token 1 over the samples: the mean of the prompts' rows weighted by how many samples
 * continued each (one prompt: the row itself). Lenient-t0: one-hot argmax rows. */
static void first_pmf(const vm_job *j, double *pmf)
{
    memset(pmf, 0, j->V * sizeof *pmf);
    for (size_t p = 0; p < j->P; p++) {
        const double w = (double)((j->K - p + j->P - 1) / j->P) / (double)j->K;
        const double *row = j->row0 + p * j->V;
        if (j->t0) pmf[sl_dist_argmax(row, j->V)] += w;
        else
            for (size_t x = 0; x < j->V; x++) pmf[x] += w * row[x];
    }
}

static int build_tests(vm_job *j, sl_verify_result *vr)
{
    const size_t K = j->K, k = j->k, V = j->V;
    sl_vtests v = {0};
    sl_vtest *t;
    int rc = SL_OK;
    if (!(t = sl_vtests_add(&v, "first", j->t0 ? "argmax-p" : "target", V, 1, 0))) { rc = SL_EFAIL; goto done; }
    first_pmf(j, t->pmf);
    for (size_t i = 0; i < K; i++) t->counts[j->spec[i * k]]++;
    if (j->ar) {
        if (!(t = sl_vtests_add(&v, "ar_first", "target", V, 1, 0))) { rc = SL_EFAIL; goto done; }
        first_pmf(j, t->pmf);
        for (size_t i = 0; i < K; i++) t->counts[j->art[i * k]]++;
        for (size_t pos = 0; pos < k; pos++) {
            char name[32];
            snprintf(name, sizeof name, "position_%zu", pos + 1);
            if (!(t = sl_vtests_add(&v, name, "plain-target", V, 0, 1))) { rc = SL_EFAIL; goto done; }
            for (size_t i = 0; i < K; i++) {
                t->counts[j->spec[i * k + pos]]++;
                t->counts_b[j->art[i * k + pos]]++;
            }
        }
    }
    if ((rc = add_pit_tests(&v, "", j->spec_u, K * k, j->c->pit_bins))) goto done;
    if (j->ar && (rc = add_pit_tests(&v, "ar_", j->ar_u, K * k, j->c->pit_bins))) goto done;
    uint64_t zeros = 0;
    for (size_t i = 0; i < K; i++) zeros += j->spec_zero[i];
    /* Exact: under the null no token of probability 0 is ever emitted. */
    if ((rc = sl_vtests_add_fixed(&v, "support", j->t0 ? "argmax-p" : "target", "exact", K * k, (double)zeros,
                                  zeros ? 0.0 : 1.0)))
        goto done;
    sl_verify_opts o = SL_VERIFY_OPTS_DEFAULT;
    o.iterations = K;
    o.seed = j->c->seed;
    o.level = j->c->level;
    o.tv_delta = j->c->tv_delta;
    rc = sl_verify_finish(&v, &o, vr);
done:
    sl_vtests_free(&v);
    return rc;
}

static int check_config(const sl_verify_models_config *c)
{
    int rc = sl_spec_config_validate(&c->rule);
    if (rc) return rc;
    if (c->samples < 2) return sl_fail(SL_EINPUT, "samples: %zu, expected at least 2", c->samples);
    if (c->tokens < 1) return sl_fail(SL_EINPUT, "tokens: %zu, expected at least 1", c->tokens);
    if (c->gamma < 1 || c->gamma > SL_SPEC_GAMMA_MAX)
        return sl_fail(SL_EINPUT, "gamma: %zu is outside [1, %d]", c->gamma, SL_SPEC_GAMMA_MAX);
    if (c->pit_bins < 2 || c->pit_bins > 100000)
        return sl_fail(SL_EINPUT, "pit_bins: %zu is outside [2, 100000]", c->pit_bins);
    if (!(c->level > 0 && c->level < 1)) return sl_fail(SL_EINPUT, "level: %g is outside (0, 1)", c->level);
    if (!(c->tv_delta > 0 && c->tv_delta <= 1)) return sl_fail(SL_EINPUT, "tv_delta: %g is outside (0, 1]", c->tv_delta);
    if (c->threads < 0) return sl_fail(SL_EINPUT, "threads: %d, expected >= 0", c->threads);
    return SL_OK;
}

int sl_verify_models_lm(const sl_verify_models_config *c, const int32_t *const *prompts, const size_t *n_prompt,
                        size_t n_prompts, int workers, sl_vm_make_fn make, sl_vm_release_fn release, void *ctx,
                        sl_verify_models_result **out)
{
    *out = NULL;
    int rc = check_config(c);
    if (rc) return rc;
    if (n_prompts < 1) return sl_fail(SL_EINPUT, "prompts: none given");
    if (n_prompts > c->samples)
        return sl_fail(SL_EINPUT, "samples: %zu is fewer than the %zu prompts (each prompt needs a sample)", c->samples,
                       n_prompts);
    for (size_t p = 0; p < n_prompts; p++)
        if (n_prompt[p] < 1) return sl_fail(SL_EINPUT, "prompt %zu: encodes to no tokens", p + 1);
    if (workers < 1) workers = 1;
    if ((size_t)workers > c->samples) workers = (int)c->samples;
    const size_t K = c->samples, k = c->tokens;
    vm_job j = {.c = c, .prompts = prompts, .n_prompt = n_prompt, .P = n_prompts, .K = K, .k = k};
    j.t0 = c->rule.rule == SL_RULE_LENIENT_T0;
    j.ar = c->autoregressive && !j.t0;
    sl_verify_models_result *r = calloc(1, sizeof *r);
    int made = 0;
    j.tl = calloc((size_t)workers, sizeof *j.tl);
    j.dl = calloc((size_t)workers, sizeof *j.dl);
    if (!r || !j.tl || !j.dl) {
        rc = sl_fail(SL_EFAIL, "out of memory");
        goto done;
    }
    double t_start = sl_now_s();
    for (; made < workers; made++)
        if ((rc = make(ctx, made, &j.tl[made], &j.dl[made]))) goto done;
    j.V = j.tl[0]->vocab_size;
    if (j.dl[0]->vocab_size != j.V) {
        rc = sl_fail(SL_EINPUT, "vocabulary mismatch: target has %zu tokens, draft has %zu", j.V, j.dl[0]->vocab_size);
        goto done;
    }
    for (size_t p = 0; p < n_prompts; p++)
        for (size_t i = 0; i < n_prompt[p]; i++)
            if (prompts[p][i] < 0 || (size_t)prompts[p][i] >= j.V) {
                rc = sl_fail(SL_EINPUT, "prompt %zu: token id %d is outside [0, %zu)", p + 1, prompts[p][i], j.V);
                goto done;
            }
    j.spec = sl_calloc(K * k, sizeof *j.spec);
    j.art = sl_calloc(K * k, sizeof *j.art);
    j.spec_u = sl_calloc(K * k, sizeof *j.spec_u);
    j.ar_u = sl_calloc(K * k, sizeof *j.ar_u);
    j.spec_zero = sl_calloc(K, sizeof *j.spec_zero);
    j.drafted = sl_calloc(K, sizeof *j.drafted);
    j.accepted = sl_calloc(K, sizeof *j.accepted);
    j.row0 = sl_malloc(n_prompts * j.V * sizeof *j.row0);
    j.ar_draw = sl_malloc(K * k * sizeof *j.ar_draw);
    j.ar_pitu = sl_malloc(K * k * sizeof *j.ar_pitu);
    j.ar_idx = sl_malloc(K * sizeof *j.ar_idx);
    j.grp_start = sl_malloc((K + 1) * sizeof *j.grp_start);
    j.grp_order = sl_malloc(K * sizeof *j.grp_order);
    r->verify = sl_verify_result_new();
    if (!j.spec || !j.art || !j.spec_u || !j.ar_u || !j.spec_zero || !j.drafted || !j.accepted || !j.row0 ||
        !j.ar_draw || !j.ar_pitu || !j.ar_idx || !j.grp_start || !j.grp_order ||
        !r->verify) {
        rc = SL_EFAIL;
        goto done;
    }
    /* sl_fail's message is per thread: a worker's is copied out to be raised again here. */
    int *wrc = calloc((size_t)workers, sizeof *wrc);
    char(*wmsg)[512] = calloc((size_t)workers, sizeof *wmsg);
    if (!wrc || !wmsg) {
        free(wrc);
        free(wmsg);
        rc = SL_EFAIL;
        goto done;
    }
#pragma omp parallel num_threads(workers)
    {
        const int w = omp_get_thread_num();
        wrc[w] = worker(&j, w);
        if (wrc[w]) snprintf(wmsg[w], sizeof wmsg[w], "%s", sl_errmsg());
    }
    for (int w = 0; w < workers && !rc; w++)
        if (wrc[w]) rc = sl_fail(wrc[w], "%s", wmsg[w]);
    free(wrc);
    free(wmsg);
    /* MPI build: every rank filled the slots of its samples (the others are zero); the slots of
     * all ranks, on every rank, before the tests (which then run alike everywhere). */
    if ((rc = sl_mpi_status(rc))) goto done;
    if ((rc = merge_slots(j.spec, K * k, sizeof *j.spec)) || (rc = merge_slots(j.art, K * k, sizeof *j.art)) ||
        (rc = merge_slots(j.spec_u, K * k, sizeof *j.spec_u)) || (rc = merge_slots(j.ar_u, K * k, sizeof *j.ar_u)) ||
        (rc = merge_slots(j.spec_zero, K, sizeof *j.spec_zero)) ||
        (rc = merge_slots(j.drafted, K, sizeof *j.drafted)) || (rc = merge_slots(j.accepted, K, sizeof *j.accepted)))
        goto done;

    sl_verify_result *vr = r->verify;
    vr->rule = c->rule.rule;
    vr->lenience = c->rule.lenience;
    vr->iterations = K;
    vr->tokens = K * k;
    vr->level = c->level;
    vr->tv_delta = c->tv_delta;
    if ((rc = build_tests(&j, vr))) goto done;
    r->samples = K;
    r->tokens = k;
    r->gamma = c->gamma;
    r->n_prompts = n_prompts;
    r->prompt_tokens = n_prompt[0];
    r->autoregressive = j.ar;
    r->spec_tokens = K * k;
    r->ar_tokens = j.ar ? K * k : 0;
    for (size_t i = 0; i < K; i++) {
        r->drafted += j.drafted[i];
        r->accepted += j.accepted[i];
    }
    r->alpha_hat = r->drafted ? (double)r->accepted / (double)r->drafted : NAN;
    r->spec_s = j.spec_s;
    r->ar_s = j.ar ? j.ar_s : NAN;
    r->threads = workers;
    r->wall_s = sl_now_s() - t_start;
    if (c->keep_samples) {
        r->spec = j.spec;
        j.spec = NULL;
        if (j.ar) {
            r->ar = j.art;
            j.art = NULL;
        }
    }
    *out = r;
    r = NULL;
done:
    for (int w = 0; w < made; w++) release(ctx, w);
    free(j.tl);
    free(j.dl);
    free(j.spec);
    free(j.art);
    free(j.spec_u);
    free(j.ar_u);
    free(j.spec_zero);
    free(j.drafted);
    free(j.accepted);
    free(j.row0);
    free(j.ar_draw);
    free(j.ar_pitu);
    free(j.ar_idx);
    free(j.grp_start);
    free(j.grp_order);
    sl_verify_models_result_free(r);
    return rc;
}

/* ---- from model specs ---- */

typedef struct {
    const sl_verify_models_config *c;
    sl_lm_handle **ht, **hd; /* (workers) */
    size_t max_len;
} spec_models;

static int make_from_specs(void *ctx, int w, sl_lm **target, sl_lm **draft)
{
    spec_models *s = ctx;
    sl_lm_open_opts ot = {s->c->sampling, 0, "target", NULL, NULL};
    int rc = sl_lm_open(s->c->target, &ot, &s->ht[w]);
    if (rc) return rc;
    sl_lm_open_opts od = {s->c->sampling, s->ht[w]->vocab_size, "draft", s->c->target, s->ht[w]->tokenizer_json};
    if ((rc = sl_lm_open(s->c->draft, &od, &s->hd[w]))) return rc;
    const size_t limit = s->ht[w]->context < s->hd[w]->context ? s->ht[w]->context : s->hd[w]->context;
    if (s->max_len > limit)
        return sl_fail(SL_EINPUT, "tokens: the longest prompt + tokens + gamma + 1 = %zu tokens exceed the context of %zu",
                       s->max_len, limit);
    if ((rc = sl_lm_start(s->ht[w], s->max_len)) || (rc = sl_lm_start(s->hd[w], s->max_len))) return rc;
    *target = &s->ht[w]->lm;
    *draft = &s->hd[w]->lm;
    return SL_OK;
}

static void release_specs(void *ctx, int w)
{
    spec_models *s = ctx;
    sl_lm_close(s->ht[w]);
    sl_lm_close(s->hd[w]);
    s->ht[w] = s->hd[w] = NULL;
}

int sl_verify_models_run(const sl_verify_models_config *c, sl_verify_models_result **out)
{
    *out = NULL;
    int rc = check_config(c);
    if (rc) return rc;
    if (!c->target || !c->draft) return sl_fail(SL_EINPUT, "target and draft: both models are needed");
    int n_given = (c->prompt != NULL) + (c->prompt_ids != NULL) + (c->prompts_file != NULL);
    if (n_given != 1) return sl_fail(SL_EINPUT, "prompt: give the text, the token ids or a prompts file, one of them");
    double t0 = sl_now_s();
    sl_lm_handle *h0 = NULL;
    sl_tok *tok = NULL;
    sl_prompts *pr = NULL;
    int32_t **ids = NULL;
    size_t *len = NULL, P = 0;
    int workers = c->threads > 0 ? c->threads : omp_get_max_threads();
    spec_models s = {c, NULL, NULL, 0};
    /* The tokenizer comes from the target; open it once to read it. */
    sl_lm_open_opts ot = {c->sampling, 0, "target", NULL, NULL};
    if ((rc = sl_lm_open(c->target, &ot, &h0))) goto done;
    if (!c->prompt_ids) {
        if (!h0->tokenizer_json) {
            rc = sl_fail(SL_EINPUT, "prompt: the target %s carries no tokenizer; give the prompt as token ids", c->target);
            goto done;
        }
        if ((rc = sl_tok_from_json(h0->tokenizer_json, &tok))) goto done;
    }
    if (c->prompts_file && (rc = sl_prompts_read(c->prompts_file, &pr))) goto done;
    P = pr ? pr->n : 1;
    ids = calloc(P, sizeof *ids);
    len = calloc(P, sizeof *len);
    if (!ids || !len) {
        rc = sl_fail(SL_EFAIL, "out of memory");
        goto done;
    }
    if (c->prompt_ids) {
        if (!(ids[0] = sl_malloc((c->n_prompt_ids ? c->n_prompt_ids : 1) * sizeof **ids))) {
            rc = SL_EFAIL;
            goto done;
        }
        memcpy(ids[0], c->prompt_ids, c->n_prompt_ids * sizeof **ids);
        len[0] = c->n_prompt_ids;
    } else {
        for (size_t p = 0; p < P && !rc; p++) {
            const char *text = pr ? pr->text[p] : c->prompt;
            rc = sl_tok_encode(tok, text, pr ? pr->len[p] : strlen(text), &ids[p], &len[p]);
            if (!rc && len[p] == 0)
                rc = pr ? sl_fail(SL_EINPUT, "prompts: %s: prompt %zu encodes to no tokens", c->prompts_file, p + 1)
                        : sl_fail(SL_EINPUT, "prompt: encodes to no tokens");
        }
        if (rc) goto done;
    }
    if (len[0] == 0) {
        rc = sl_fail(SL_EINPUT, "prompt_ids: no token ids");
        goto done;
    }
    for (size_t p = 0; p < P; p++)
        if (len[p] + c->tokens + c->gamma + 1 > s.max_len) s.max_len = len[p] + c->tokens + c->gamma + 1;
    sl_lm_close(h0);
    h0 = NULL;
    if ((size_t)workers > c->samples) workers = (int)c->samples;
    if (workers < 1) workers = 1;
    s.ht = calloc((size_t)workers, sizeof *s.ht);
    s.hd = calloc((size_t)workers, sizeof *s.hd);
    if (!s.ht || !s.hd) {
        rc = sl_fail(SL_EFAIL, "out of memory");
        goto done;
    }
    rc = sl_verify_models_lm(c, (const int32_t *const *)ids, len, P, workers, make_from_specs, release_specs, &s, out);
    if (!rc) (*out)->wall_s = sl_now_s() - t0;
done:
    if (s.ht)
        for (int w = 0; w < workers; w++) {
            sl_lm_close(s.ht[w]);
            sl_lm_close(s.hd[w]);
        }
    free(s.ht);
    free(s.hd);
    if (ids)
        for (size_t p = 0; p < P; p++) free(ids[p]);
    free(ids);
    free(len);
    sl_prompts_free(pr);
    if (tok) sl_tok_free(tok);
    sl_lm_close(h0);
    return rc;
}

/* ---- report ---- */

int sl_verify_models_report(const sl_verify_models_result *r, sl_table **tables, size_t *n_tables)
{
    *n_tables = 0;
    size_t nv = 0;
    int rc = sl_verify_report(r->verify, tables, &nv);
    if (rc) return rc;
    static const sl_colspec scols[] = {
        SL_COL_I("samples"), SL_COL_I("tokens"), SL_COL_I("gamma"), SL_COL_I("prompts"), SL_COL_I("prompt_tokens"),
        SL_COL_I("threads"), SL_COL_I("spec_tokens"), SL_COL_I("ar_tokens"), SL_COL_D("alpha_hat", "%.4f"),
        SL_COL_D("spec_s", "%.3f"), SL_COL_D("ar_s", "%.3f"), SL_COL_D("wall_s", "%.3f")};
    sl_table *t = SL_TABLE_NEW("sampling", scols);
    sl_table_row(t);
    sl_table_seti(t, "samples", (int64_t)r->samples);
    sl_table_seti(t, "tokens", (int64_t)r->tokens);
    sl_table_seti(t, "gamma", (int64_t)r->gamma);
    sl_table_seti(t, "prompts", (int64_t)r->n_prompts);
    sl_table_seti(t, "prompt_tokens", (int64_t)r->prompt_tokens);
    sl_table_seti(t, "threads", (int64_t)r->threads);
    sl_table_seti(t, "spec_tokens", (int64_t)r->spec_tokens);
    sl_table_seti(t, "ar_tokens", (int64_t)r->ar_tokens);
    sl_table_setd(t, "alpha_hat", r->alpha_hat);
    sl_table_setd(t, "spec_s", r->spec_s);
    sl_table_setd(t, "ar_s", r->ar_s);
    sl_table_setd(t, "wall_s", r->wall_s);
    if ((rc = sl_table_status(t))) {
        sl_table_free(t);
        for (size_t i = 0; i < nv; i++) sl_table_free(tables[i]);
        return rc;
    }
    tables[nv] = t;
    *n_tables = nv + 1;
    return SL_OK;
}
