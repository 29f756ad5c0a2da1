/*
 * test_verify_models.c: verify on a model pair (analysis/sl_verify_models.h), with the hash models
 * of spec_models.h, whose pmfs are exact and cheap.
 *   - The PIT against a naive twin that sorts the vocabulary (sl_dist_sort_desc) and sums in rank
 *     order: the one-pass function sums the same terms in id order, so the two differ only by
 *     rounding, at most V * DBL_EPSILON (each of <= V additions of terms in [0, 1] rounds by at
 *     most DBL_EPSILON / 2 relative to a partial sum <= 1, in either order).
 *   - Every continuation equals the sampler run directly on fresh unwrapped models with the
 *     documented streams (speculative i: item 2i; autoregressive i: item 2i + 1): bit for bit.
 *   - Same seed, any worker count: identical tokens and p-values.
 *   - Exact rule: consistent for several seeds, and the PIT p-values uniform over 200
 *     replications (KS p > 0.001).
 *   - Every bug-* rule rejected with enough samples; lenient-t0 at l = 1 passes, l = 0.5 does not.
 */
#include <criterion/criterion.h>
#include <float.h>
#include <math.h>
#include <string.h>

#include "sl_stats.h"
#include "sl_verify_models.h"
#include "spec_models.h"

#define NV 8
#define MAXW 4

/* Each worker's own pair of hash models. */
typedef struct {
    hash_model t[MAXW], d[MAXW];
    sl_lm tl[MAXW], dl[MAXW];
    double mix;
} pair_ctx;

static hash_model target_model(void) { return (hash_model){.V = NV, .seed = 11, .zero_frac = 0.15}; }
static hash_model draft_model(double mix)
{
    return (hash_model){.V = NV, .seed = 12, .target_seed = 11, .mix = mix, .zero_frac = 0.1};
}

static int make_pair(void *ctx, int w, sl_lm **target, sl_lm **draft)
{
    pair_ctx *c = ctx;
    c->t[w] = target_model();
    c->d[w] = draft_model(c->mix);
    c->tl[w] = hm_lm(&c->t[w]);
    c->dl[w] = hm_lm(&c->d[w]);
    *target = &c->tl[w];
    *draft = &c->dl[w];
    return SL_OK;
}

static void release_pair(void *ctx, int w)
{
    (void)ctx;
    (void)w;
}

static const int32_t PROMPT[3] = {1, 4, 2};

static sl_verify_models_result *run(sl_rule rule, double lenience, size_t K, uint64_t seed, int workers, int keep)
{
    sl_verify_models_config c;
    sl_verify_models_config_default(&c);
    c.rule.rule = rule;
    c.rule.lenience = lenience;
    c.samples = K;
    c.seed = seed;
    c.keep_samples = keep;
    pair_ctx pc = {.mix = 0.5};
    const int32_t *pr[1] = {PROMPT};
    size_t np[1] = {3};
    sl_verify_models_result *r = NULL;
    int rc = sl_verify_models_lm(&c, pr, np, 1, workers, make_pair, release_pair, &pc, &r);
    cr_assert_eq(rc, SL_OK, "%s", sl_errmsg());
    return r;
}

static const sl_verify_test *find(const sl_verify_models_result *r, const char *name)
{
    for (size_t i = 0; i < r->verify->n_rows; i++)
        if (!strcmp(r->verify->test[i].name, name)) return &r->verify->test[i];
    cr_assert_fail("no test %s", name);
    return NULL;
}

/* The naive twin: rank by sl_dist_sort_desc, sum the mass ranked before x in rank order. */
static double pit_naive(const double *p, size_t V, size_t x, double u, sl_dist_work *w)
{
    sl_dist_sort_desc(p, V, w);
    double F = 0;
    for (size_t r = 0; r < V && w->idx[r] != x; r++) F += p[w->idx[r]];
    double v = F + u * p[x];
    return v < 0 ? 0 : v > 1 ? 1 : v;
}

Test(verify_models, pit_matches_sort_based_twin)
{
    enum { VMAX = 64 };
    double p[VMAX];
    sl_dist_work *w = sl_dist_work_alloc(VMAX);
    gsl_rng *g = sl_rng_alloc(3, SL_STREAM_DATA, 0);
    for (int rep = 0; rep < 300; rep++) {
        size_t V = 1 + (size_t)(sl_rng_uniform53(g) * VMAX);
        double sum = 0;
        for (size_t x = 0; x < V; x++) {
            double z = sl_rng_uniform53(g);
            /* Ties and zeros on purpose: a few repeated values, some zero. */
            p[x] = z < 0.2 ? 0 : z < 0.4 ? 0.25 : z;
            sum += p[x];
        }
        if (sum == 0) p[0] = sum = 1;
        for (size_t x = 0; x < V; x++) p[x] /= sum;
        for (size_t x = 0; x < V; x++) {
            double u = sl_rng_uniform53(g);
            double a = sl_verify_models_pit(p, V, x, u), b = pit_naive(p, V, x, u, w);
            cr_assert(fabs(a - b) <= (double)V * DBL_EPSILON, "V %zu x %zu: %.17g vs %.17g", V, x, a, b);
        }
    }
    /* Ties by id: p = (0.5, 0.25, 0.25): token 1 ranks before token 2. */
    const double t[3] = {0.5, 0.25, 0.25};
    cr_assert_eq(sl_verify_models_pit(t, 3, 1, 0), 0.5);
    cr_assert_eq(sl_verify_models_pit(t, 3, 2, 0), 0.75);
    cr_assert_eq(sl_verify_models_pit(t, 3, 0, 1), 0.5);
    gsl_rng_free(g);
    sl_dist_work_free(w);
}

Test(verify_models, samples_are_the_samplers_own)
{
    const size_t K = 60, k = 4;
    for (int rule = 0; rule < SL_RULE_COUNT; rule++) {
        sl_verify_models_result *r = run((sl_rule)rule, rule == SL_RULE_LENIENT ? 0.5 : 1.0, K, 9, 2, 1);
        sl_spec_config cfg = SL_SPEC_CONFIG_DEFAULT;
        cfg.rule = (sl_rule)rule;
        if (rule == SL_RULE_LENIENT) cfg.lenience = 0.5;
        cr_assert_eq(r->ar != NULL, rule != SL_RULE_LENIENT_T0);
        for (size_t i = 0; i < K; i++) {
            hash_model t = target_model(), d = draft_model(0.5);
            sl_lm tl = hm_lm(&t), dl = hm_lm(&d);
            int32_t out[8];
            size_t n;
            sl_spec_stats st;
            sl_rand_rng rr;
            cr_assert_eq(sl_rand_rng_init(&rr, 9, 2 * i), SL_OK);
            cr_assert_eq(sl_spec_decode(&cfg, 3, &tl, &dl, PROMPT, 3, k, -1, &rr.base, out, &n, &st, NULL, NULL), SL_OK);
            cr_assert_eq(n, k);
            cr_assert(memcmp(out, r->spec + i * k, k * sizeof *out) == 0, "%s: speculative sample %zu differs",
                      sl_rule_name((sl_rule)rule), i);
            if (r->ar) {
                hash_model t2 = target_model();
                sl_lm t2l = hm_lm(&t2);
                double ts;
                sl_rand_rng_reseed(&rr, 9, 2 * i + 1);
                cr_assert_eq(sl_spec_autoregressive(&t2l, PROMPT, 3, k, -1, &rr.base, out, &n, &ts), SL_OK);
                cr_assert(memcmp(out, r->ar + i * k, k * sizeof *out) == 0, "autoregressive sample %zu differs", i);
            }
            sl_rand_rng_free(&rr);
        }
        sl_verify_models_result_free(r);
    }
}

Test(verify_models, same_bytes_for_any_worker_count)
{
    const size_t K = 500;
    sl_verify_models_result *a = run(SL_RULE_EXACT, 1, K, 4, 1, 1), *b = run(SL_RULE_EXACT, 1, K, 4, 2, 1),
                            *c = run(SL_RULE_EXACT, 1, K, 4, 3, 1);
    cr_assert_eq(b->threads, 2);
    for (const sl_verify_models_result *o = b; o; o = o == b ? c : NULL) {
        cr_assert(memcmp(a->spec, o->spec, K * 4 * sizeof *a->spec) == 0);
        cr_assert(memcmp(a->ar, o->ar, K * 4 * sizeof *a->ar) == 0);
        cr_assert_eq(a->verify->n_rows, o->verify->n_rows);
        for (size_t i = 0; i < a->verify->n_rows; i++) {
            const sl_verify_test *x = &a->verify->test[i], *y = &o->verify->test[i];
            cr_assert(memcmp(&x->p_value, &y->p_value, sizeof x->p_value) == 0, "%s", x->name);
            cr_assert(memcmp(&x->pearson, &y->pearson, sizeof x->pearson) == 0, "%s", x->name);
        }
        cr_assert_eq(a->accepted, o->accepted);
    }
    sl_verify_models_result_free(a);
    sl_verify_models_result_free(b);
    sl_verify_models_result_free(c);
}

Test(verify_models, exact_rule_consistent_and_tests_present)
{
    for (uint64_t seed = 1; seed <= 5; seed++) {
        sl_verify_models_result *r = run(SL_RULE_EXACT, 1, 3000, seed, 2, 0);
        cr_assert(!r->verify->rejected, "seed %lu: exact rule rejected (min Holm p %g)", (unsigned long)seed,
                  r->verify->min_p_holm);
        /* first, ar_first, position_1..4, pit_ks, pit_chi2, ar_pit_ks, ar_pit_chi2, support */
        cr_assert_eq(r->verify->n_rows, 11);
        cr_assert_eq(find(r, "pit_ks")->n, 12000);
        cr_assert_eq(find(r, "position_4")->n_b, 3000);
        cr_assert_eq(find(r, "support")->p_value, 1.0);
        cr_assert(r->alpha_hat > 0.2 && r->alpha_hat < 1, "alpha_hat %g", r->alpha_hat);
        sl_verify_models_result_free(r);
    }
}

Test(verify_models, pit_p_values_uniform_over_replications, .timeout = 120)
{
    enum { R = 200 };
    static const char *names[] = {"pit_ks", "ar_pit_ks", "pit_chi2", "first", "position_2"};
    double p[5][R];
    for (size_t rep = 0; rep < R; rep++) {
        sl_verify_models_result *r = run(SL_RULE_EXACT, 1, 300, 1000 + rep, 2, 0);
        for (size_t t = 0; t < 5; t++) p[t][rep] = find(r, names[t])->p_value;
        sl_verify_models_result_free(r);
    }
    for (size_t t = 0; t < 5; t++) {
        double D, ks_p;
        cr_assert_eq(sl_stats_ks_uniform(p[t], R, &D, &ks_p), SL_OK);
        cr_assert(ks_p > 0.001, "%s: p-values not uniform over %d replications (KS D %.3f, p %.2g)", names[t], R, D,
                  ks_p);
    }
}

Test(verify_models, every_bug_rule_rejected, .timeout = 300)
{
    for (int rule = 0; rule < SL_RULE_COUNT; rule++) {
        if (!sl_rule_is_bug((sl_rule)rule)) continue;
        /* bf16-rounded draft logits perturb q by < 1%, and a shared accept draw only correlates
         * the positions of an iteration: those take more samples. */
        size_t K = rule == SL_BUG_LOWPREC_DRAFT ? 400000 : rule == SL_BUG_SHARED_UNIFORM ? 30000 : 5000;
        sl_verify_models_result *r = run((sl_rule)rule, 1, K, 2, 2, 0);
        cr_assert(r->verify->rejected, "%s not rejected at K = %zu (min Holm p %g)", sl_rule_name((sl_rule)rule), K,
                  r->verify->min_p_holm);
        sl_verify_models_result_free(r);
    }
}

Test(verify_models, lenient_t0)
{
    sl_verify_models_result *r = run(SL_RULE_LENIENT_T0, 1, 500, 3, 2, 0);
    cr_assert(!r->verify->rejected);
    cr_assert_eq(r->autoregressive, 0);
    cr_assert_eq(r->ar_tokens, 0);
    sl_verify_models_result_free(r);
    r = run(SL_RULE_LENIENT_T0, 0.5, 500, 3, 2, 0);
    cr_assert(r->verify->rejected);
    cr_assert_eq(find(r, "support")->p_value, 0.0);
    sl_verify_models_result_free(r);
}

Test(verify_models, bad_input)
{
    sl_verify_models_config c;
    sl_verify_models_config_default(&c);
    pair_ctx pc = {.mix = 0.5};
    const int32_t bad[2] = {1, 99};
    const int32_t *pr[1] = {bad};
    size_t np[1] = {2};
    sl_verify_models_result *r = NULL;
    cr_assert_eq(sl_verify_models_lm(&c, pr, np, 1, 2, make_pair, release_pair, &pc, &r), SL_EINPUT);
    cr_assert(strstr(sl_errmsg(), "99") != NULL, "%s", sl_errmsg());
    c.gamma = 0;
    pr[0] = PROMPT;
    cr_assert_eq(sl_verify_models_lm(&c, pr, np, 1, 2, make_pair, release_pair, &pc, &r), SL_EINPUT);
    cr_assert_null(r);
}
