/*
 * test_spec.c: exact enumeration of Algorithm 1 through the real sampler code.
 *
 * Every draft, accept and resample choice of sl_spec_decode is enumerated (sl_enum), giving the
 * exact distribution of the first L emitted tokens; it must equal the target's own distribution,
 * prod_j p(x_j | prefix), computed directly from the target model. Tolerance 1e-12: both sides are
 * sums of at most a few hundred thousand products of doubles, whose rounding error is ~1e-15.
 */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "sl_enum.h"
#include "sl_spec.h"
#include "spec_models.h"

#define MAX_SEQS 4096

typedef struct {
    sl_spec_config cfg;
    size_t gamma, V, L;
    hash_model target, draft;
    int32_t prompt[2];
    int32_t out[16];
    size_t n_out;
    double *dist;     /* (V^L) probability of each emitted sequence */
    double accept1;   /* probability that the first draft of the first iteration is accepted */
    size_t n_accepted_first; /* n_accepted of the first iteration on the current path */
} decode_case;

static int first_iter(void *ctx, const sl_spec_iter_record *rec)
{
    decode_case *c = ctx;
    if (rec->iteration == 0) c->n_accepted_first = rec->n_accepted;
    return SL_OK;
}

static int run_decode(void *ctx, sl_rand *rand)
{
    decode_case *c = ctx;
    c->target.len = 0;
    c->draft.len = 0;
    sl_lm t = hm_lm(&c->target), d = hm_lm(&c->draft);
    sl_spec_stats st;
    return sl_spec_decode(&c->cfg, c->gamma, &t, &d, c->prompt, 2, c->L, -1, rand, c->out, &c->n_out, &st,
                          first_iter, c);
}

static size_t seq_index(const int32_t *x, size_t L, size_t V)
{
    size_t idx = 0;
    for (size_t j = 0; j < L; j++) idx = idx * V + (size_t)x[j];
    return idx;
}

static void record_decode(void *ctx, double prob)
{
    decode_case *c = ctx;
    cr_assert_eq(c->n_out, c->L, "decode emitted %zu tokens, wanted %zu", c->n_out, c->L);
    c->dist[seq_index(c->out, c->L, c->V)] += prob;
    if (c->n_accepted_first >= 1) c->accept1 += prob;
}

/* The target's distribution of the next L tokens after the prompt, by direct multiplication. */
static void target_dist(const decode_case *c, double *dist)
{
    size_t n = 1;
    for (size_t j = 0; j < c->L; j++) n *= c->V;
    int32_t seq[HM_MAX_LEN];
    double pmf[16];
    for (size_t idx = 0; idx < n; idx++) {
        size_t r = idx;
        for (size_t j = c->L; j-- > 0;) {
            seq[2 + j] = (int32_t)(r % c->V);
            r /= c->V;
        }
        seq[0] = c->prompt[0];
        seq[1] = c->prompt[1];
        double prob = 1;
        for (size_t j = 0; j < c->L; j++) {
            hm_pmf(&c->target, seq, 2 + j, pmf);
            prob *= pmf[seq[2 + j]];
        }
        dist[idx] = prob;
    }
}

static double zero_frac_p = 0.25, zero_frac_q = 0.3;

static void setup_case(decode_case *c, sl_rule rule, double l, size_t V, size_t gamma, size_t L, uint64_t seed,
                       int context_free)
{
    memset(c, 0, sizeof *c);
    c->cfg = SL_SPEC_CONFIG_DEFAULT;
    c->cfg.rule = rule;
    c->cfg.lenience = l;
    c->gamma = gamma;
    c->V = V;
    c->L = L;
    c->target = (hash_model){.V = V, .seed = seed, .zero_frac = zero_frac_p, .context_free = context_free};
    c->draft = (hash_model){.V = V, .seed = seed + 1000, .target_seed = seed, .mix = 0.5, .zero_frac = zero_frac_q,
                            .context_free = context_free};
    c->prompt[0] = 0;
    c->prompt[1] = (int32_t)(V - 1);
}

/* Enumerates a case; returns max |P_spec - P_target| and leaves the spec distribution in c->dist. */
static double enumerate_case(decode_case *c, double *target, size_t *n_paths)
{
    size_t n = 1;
    for (size_t j = 0; j < c->L; j++) n *= c->V;
    c->dist = calloc(n, sizeof *c->dist);
    cr_assert_not_null(c->dist);
    int rc = sl_enum_paths(run_decode, record_decode, c, 2000000, n_paths);
    cr_assert_eq(rc, SL_OK, "enumeration failed: %s", sl_errmsg());
    target_dist(c, target);
    double total = 0, dev = 0;
    for (size_t i = 0; i < n; i++) {
        total += c->dist[i];
        double d = fabs(c->dist[i] - target[i]);
        if (d > dev) dev = d;
    }
    cr_assert(fabs(total - 1) < 1e-12, "path probabilities sum to %.17g", total);
    return dev;
}

/* L tokens per case: enough for a second iteration after an early rejection, small enough that the
 * V^gamma draft branches times the accept/resample branches stay below ~1e6 paths. */
static size_t tokens_for(size_t V, size_t gamma) { return V <= 3 ? gamma + 1 : (gamma <= 2 ? 3 : 2); }

static void check_exact_rule(sl_rule rule, double l)
{
    size_t most = 0;
    for (size_t V = 2; V <= 5; V++)
        for (size_t gamma = 1; gamma <= 3; gamma++)
            for (int cf = 0; cf <= 1; cf++) {
                decode_case c;
                size_t L = tokens_for(V, gamma);
                /* Sampler-match also branches on a target draw at every position. */
                if (rule == SL_RULE_SAMPLER_MATCH && V * gamma >= 9) L = V * gamma >= 15 ? 1 : 2;
                setup_case(&c, rule, l, V, gamma, L, 17 + 31 * V + gamma, cf);
                double target[MAX_SEQS];
                size_t paths;
                double dev = enumerate_case(&c, target, &paths);
                if (paths > most) most = paths;
                if (getenv("SPEC_DEBUG")) fprintf(stderr, "%s V=%zu g=%zu L=%zu cf=%d paths=%zu\n", sl_rule_name(rule), V, gamma, L, cf, paths);
                cr_assert(dev <= 1e-12, "%s V=%zu gamma=%zu cf=%d: max deviation %.3g over %zu paths",
                          sl_rule_name(rule), V, gamma, cf, dev, paths);
                free(c.dist);
            }
    cr_log_info("%s: up to %zu paths per case", sl_rule_name(rule), most);
}

Test(spec_enum, exact_rule_reproduces_target, .timeout = 120) { check_exact_rule(SL_RULE_EXACT, 1.0); }
Test(spec_enum, sampler_match_reproduces_target, .timeout = 120) { check_exact_rule(SL_RULE_SAMPLER_MATCH, 1.0); }
Test(spec_enum, lenient_at_l1_reproduces_target, .timeout = 120) { check_exact_rule(SL_RULE_LENIENT, 1.0); }

/* The first draft is accepted with probability beta_1 = sum min(p_1, q_1) (Lemma 3.3), and for
 * lenience with alpha_l = sum min(q, p/l) (Appendix A.5). */
Test(spec_enum, first_acceptance_equals_beta)
{
    const double ls[] = {1.0, 0.7, 0.3};
    for (size_t li = 0; li < 3; li++)
        for (size_t V = 2; V <= 5; V++) {
            decode_case c;
            setup_case(&c, li == 0 ? SL_RULE_EXACT : SL_RULE_LENIENT, ls[li], V, 1, 1, 5 + V, 0);
            double target[MAX_SEQS];
            size_t paths;
            enumerate_case(&c, target, &paths);
            double p[16], q[16];
            hm_pmf(&c.target, c.prompt, 2, p);
            hm_pmf(&c.draft, c.prompt, 2, q);
            /* The enumeration is the independent computation; the library's closed form must match. */
            double alpha_l = sl_dist_alpha_lenient(p, q, V, ls[li]);
            cr_assert(fabs(c.accept1 - alpha_l) < 1e-12, "l=%g V=%zu: accept %.17g vs %.17g", ls[li], V, c.accept1,
                      alpha_l);
            if (li == 0) cr_assert(fabs(alpha_l - sl_dist_beta(p, q, V)) < 1e-15);
            free(c.dist);
        }
}

/* Sampler match accepts the first draft with probability sum p q (sl_dist_alpha_match), by
 * enumeration of every path. */
Test(spec_enum, first_acceptance_sampler_match)
{
    for (size_t V = 2; V <= 5; V++) {
        decode_case c;
        setup_case(&c, SL_RULE_SAMPLER_MATCH, 1.0, V, 1, 1, 9 + V, 0);
        double target[MAX_SEQS];
        size_t paths;
        enumerate_case(&c, target, &paths);
        double p[16], q[16];
        hm_pmf(&c.target, c.prompt, 2, p);
        hm_pmf(&c.draft, c.prompt, 2, q);
        double want = sl_dist_alpha_match(p, q, V);
        cr_assert(fabs(c.accept1 - want) < 1e-12, "V=%zu: accept %.17g vs sum p q %.17g", V, c.accept1, want);
        free(c.dist);
    }
}

/* Lenience l < 1 changes the output, but never emits a token with conditional probability above
 * p(x | prefix) / l (Appendix A.5). Checked for the first token and for the second given the first. */
Test(spec_enum, lenience_respects_p_over_l_bound)
{
    const double ls[] = {0.9, 0.5, 0.2};
    for (size_t li = 0; li < 3; li++)
        for (size_t V = 2; V <= 4; V++)
            for (size_t gamma = 1; gamma <= 3; gamma++) {
                decode_case c;
                setup_case(&c, SL_RULE_LENIENT, ls[li], V, gamma, 2, 101 + V * 7 + gamma, 0);
                double target[MAX_SEQS];
                size_t paths;
                double dev = enumerate_case(&c, target, &paths);
                (void)dev;
                for (size_t x1 = 0; x1 < V; x1++) {
                    double m1 = 0, t1 = 0;
                    for (size_t x2 = 0; x2 < V; x2++) {
                        m1 += c.dist[x1 * V + x2];
                        t1 += target[x1 * V + x2];
                    }
                    cr_assert(m1 <= t1 / ls[li] + 1e-12, "first token %zu: %.6g > p/l = %.6g", x1, m1, t1 / ls[li]);
                    for (size_t x2 = 0; x2 < V && m1 > 1e-300; x2++) {
                        double cond = c.dist[x1 * V + x2] / m1, tcond = target[x1 * V + x2] / t1;
                        cr_assert(cond <= tcond / ls[li] + 1e-10, "second token: %.6g > %.6g", cond, tcond / ls[li]);
                    }
                }
                free(c.dist);
            }
}

Test(spec_enum, lenience_below_one_is_detectably_inexact)
{
    size_t failed = 0, total = 0;
    for (size_t V = 3; V <= 5; V++)
        for (size_t gamma = 1; gamma <= 2; gamma++) {
            decode_case c;
            setup_case(&c, SL_RULE_LENIENT, 0.5, V, gamma, 2, 3 + V + gamma, 0);
            double target[MAX_SEQS];
            size_t paths;
            failed += enumerate_case(&c, target, &paths) > 1e-6;
            total++;
            free(c.dist);
        }
    cr_assert_eq(failed, total, "lenience 0.5 matched the target in %zu of %zu cases", total - failed, total);
}

/* Temperature-0 lenience: no randomness at all (one path); at l = 1 the output is the target's
 * greedy continuation; at l < 1 every emitted token has p(x) >= l * max p. */
Test(spec_enum, lenient_t0_rule)
{
    const double ls[] = {1.0, 0.6, 0.1};
    for (size_t li = 0; li < 3; li++)
        for (size_t V = 2; V <= 5; V++)
            for (size_t gamma = 1; gamma <= 3; gamma++) {
                decode_case c;
                setup_case(&c, SL_RULE_LENIENT_T0, ls[li], V, gamma, 4, 77 + V + gamma, 0);
                double target[1024];
                size_t paths;
                double dev = 0;
                size_t n = V * V * V * V;
                c.dist = calloc(n, sizeof *c.dist);
                cr_assert_eq(sl_enum_paths(run_decode, record_decode, &c, 10, &paths), SL_OK);
                cr_assert_eq(paths, 1, "temperature-0 decoding took %zu paths", paths);
                (void)target;
                (void)dev;
                int32_t seq[HM_MAX_LEN] = {c.prompt[0], c.prompt[1]};
                double p[16];
                for (size_t j = 0; j < c.L; j++) {
                    hm_pmf(&c.target, seq, 2 + j, p);
                    size_t best = sl_dist_argmax(p, V);
                    if (ls[li] == 1.0) cr_assert_eq((size_t)c.out[j], best, "l=1: token %zu is not greedy", j);
                    cr_assert(p[c.out[j]] >= ls[li] * p[best], "token %zu: p = %g < l * max p = %g", j, p[c.out[j]],
                              ls[li] * p[best]);
                    seq[2 + j] = c.out[j];
                }
                free(c.dist);
            }
}

/* Every deliberately wrong variant must change the output distribution, by far more than rounding
 * (threshold 1e-9 against ~1e-15 of rounding; the bf16 draft bug moves probabilities by only ~1e-4,
 * the others by 1e-2 to 0.5). The shared uniform needs gamma >= 2 to matter. */
Test(spec_enum, every_wrong_variant_fails, .timeout = 120)
{
    /* Full supports and V >= 3: with zeros, a draft with one possible token makes argmax and sampling
     * agree; at V = 2 only one token can have p > q, so the paired and in-place residual bugs can
     * pick the right token by accident. */
    zero_frac_p = zero_frac_q = 0;
    for (int r = SL_BUG_DRAFT_ARGMAX; r < SL_RULE_COUNT; r++) {
        size_t failed = 0, total = 0;
        double worst = 0;
        for (size_t V = 3; V <= 5; V++)
            for (size_t gamma = 1; gamma <= 3; gamma++) {
                if (r == SL_BUG_SHARED_UNIFORM && gamma == 1) continue;
                decode_case c;
                setup_case(&c, (sl_rule)r, 1.0, V, gamma, 2, 9 + 13 * V + gamma, 0);
                double target[MAX_SEQS];
                size_t paths;
                double dev = enumerate_case(&c, target, &paths);
                failed += dev > 1e-9;
                total++;
                if (getenv("SPEC_DEBUG")) fprintf(stderr, "%s V=%zu g=%zu dev=%.3g paths=%zu\n", sl_rule_name((sl_rule)r), V, gamma, dev, paths);
                if (dev > worst) worst = dev;
                free(c.dist);
            }
        cr_assert(failed == total, "%s failed only %zu of %zu cases (worst deviation %.3g)",
                  sl_rule_name((sl_rule)r), failed, total, worst);
        cr_log_info("%s: fails %zu/%zu cases, worst deviation %.3g", sl_rule_name((sl_rule)r), failed, total,
                    worst);
    }
}

/* Context-free families: P(N = k+1) = (prod_{i<=k} beta_i)(1 - beta_{k+1}), P(N = gamma+1) = prod beta
 * (THEORY.md, position-dependent closed form), checked on the first iteration with the exact rule. */
typedef struct {
    decode_case c;
    double pn[8];
} iter_case;

static int iter_cb(void *ctx, const sl_spec_iter_record *rec)
{
    iter_case *ic = ctx;
    if (rec->iteration == 0) ic->c.n_accepted_first = rec->n_accepted;
    return SL_OK;
}

static int run_one_iter(void *ctx, sl_rand *rand)
{
    iter_case *ic = ctx;
    decode_case *c = &ic->c;
    c->target.len = c->draft.len = 0;
    sl_lm t = hm_lm(&c->target), d = hm_lm(&c->draft);
    sl_spec_stats st;
    /* max_new = 1 stops after the first iteration, whatever it emits. */
    return sl_spec_decode(&c->cfg, c->gamma, &t, &d, c->prompt, 2, 1, -1, rand, c->out, &c->n_out, &st, iter_cb, ic);
}

static void record_iter(void *ctx, double prob)
{
    iter_case *ic = ctx;
    ic->pn[ic->c.n_accepted_first + 1] += prob;
}

Test(spec_enum, tokens_per_iteration_pmf_position_dependent)
{
    for (size_t V = 2; V <= 5; V++)
        for (size_t gamma = 1; gamma <= 3; gamma++) {
            iter_case ic;
            memset(&ic, 0, sizeof ic);
            setup_case(&ic.c, SL_RULE_EXACT, 1.0, V, gamma, 1, 400 + V * 3 + gamma, 1);
            size_t paths;
            cr_assert_eq(sl_enum_paths(run_one_iter, record_iter, &ic, 2000000, &paths), SL_OK);
            double beta[4], p[16], q[16];
            int32_t seq[8] = {ic.c.prompt[0], ic.c.prompt[1], 0, 0, 0, 0};
            for (size_t i = 0; i < gamma; i++) {
                hm_pmf(&ic.c.target, seq, 2 + i, p);
                hm_pmf(&ic.c.draft, seq, 2 + i, q);
                beta[i] = sl_dist_beta(p, q, V);
            }
            double prod = 1;
            for (size_t k = 0; k <= gamma; k++) {
                double want = k < gamma ? prod * (1 - beta[k]) : prod;
                cr_assert(fabs(ic.pn[k + 1] - want) < 1e-12, "V=%zu gamma=%zu P(N=%zu) = %.17g, closed form %.17g", V,
                          gamma, k + 1, ic.pn[k + 1], want);
                if (k < gamma) prod *= beta[k];
            }
        }
}

/* Same seed, same output; different seeds, different output (with the normal random source). */
Test(spec_decode, reproducible_with_seed)
{
    decode_case c;
    setup_case(&c, SL_RULE_EXACT, 1.0, 5, 3, 40, 1, 0);
    int32_t a[40], b[40];
    for (int rep = 0; rep < 2; rep++) {
        sl_rand_rng r;
        cr_assert_eq(sl_rand_rng_init(&r, 1234, 0), SL_OK);
        c.target.len = c.draft.len = 0;
        sl_lm t = hm_lm(&c.target), d = hm_lm(&c.draft);
        sl_spec_stats st;
        size_t n;
        cr_assert_eq(sl_spec_decode(&c.cfg, 3, &t, &d, c.prompt, 2, 40, -1, &r.base, rep ? b : a, &n, &st, NULL, NULL),
                     SL_OK);
        cr_assert_eq(n, 40);
        cr_assert_eq(st.tokens_emitted, 40);
        cr_assert_eq(st.target_calls, st.iterations);
        cr_assert_eq(st.draft_calls, 3 * st.iterations);
        sl_rand_rng_free(&r);
    }
    cr_assert_arr_eq(a, b, sizeof a);
}

Test(spec_decode, bad_input_is_rejected)
{
    decode_case c;
    setup_case(&c, SL_RULE_EXACT, 1.0, 4, 2, 4, 1, 0);
    sl_rand_rng r;
    sl_rand_rng_init(&r, 1, 0);
    sl_lm t = hm_lm(&c.target), d = hm_lm(&c.draft);
    sl_spec_stats st;
    size_t n;
    int32_t out[8];
    cr_assert_eq(sl_spec_decode(&c.cfg, 0, &t, &d, c.prompt, 2, 4, -1, &r.base, out, &n, &st, NULL, NULL), SL_EINPUT);
    cr_assert_eq(sl_spec_decode(&c.cfg, 2, &t, &d, c.prompt, 0, 4, -1, &r.base, out, &n, &st, NULL, NULL), SL_EINPUT);
    d.vocab_size = 5;
    cr_assert_eq(sl_spec_decode(&c.cfg, 2, &t, &d, c.prompt, 2, 4, -1, &r.base, out, &n, &st, NULL, NULL), SL_EINPUT);
    cr_assert(strstr(sl_errmsg(), "vocabulary mismatch") != NULL);
    d.vocab_size = 4;
    c.cfg.lenience = 0;
    cr_assert_eq(sl_spec_decode(&c.cfg, 2, &t, &d, c.prompt, 2, 4, -1, &r.base, out, &n, &st, NULL, NULL), SL_EINPUT);
    c.cfg.lenience = 1.5;
    cr_assert_eq(sl_spec_decode(&c.cfg, 2, &t, &d, c.prompt, 2, 4, -1, &r.base, out, &n, &st, NULL, NULL), SL_EINPUT);
    sl_rand_rng_free(&r);
}

Test(spec, rule_names_round_trip)
{
    for (int r = 0; r < SL_RULE_COUNT; r++) {
        sl_rule back;
        cr_assert_eq(sl_rule_parse(sl_rule_name((sl_rule)r), &back), SL_OK);
        cr_assert_eq((int)back, r);
    }
    sl_rule x;
    cr_assert_eq(sl_rule_parse("nonsense", &x), SL_EINPUT);
}
