/*
 * test_replay.c: the sequential replay (analysis/sl_replay) against independent computations:
 * the backward recursion against brute force over every acceptance pattern, the simulation
 * against the recursion, and the replay of a measure log against real speculative decoding
 * (sl_spec_decode) on the same synthetic models: exactly, sequence by sequence, at temperature 0,
 * and within sampling error at temperature 1.
 */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sl_common.h"
#include "sl_log.h"
#include "sl_replay.h"
#include "sl_spec.h"
#include "sl_synth.h"

/* The replay's process on one fixed acceptance pattern (ok[t] = the draft at t would be accepted
 * if tested): iterations, accepted and tested drafts. */
static void on_pattern(const int *ok, size_t n, size_t g, double *it, double *acc, double *tst)
{
    size_t t = 0;
    *it = *acc = *tst = 0;
    while (t < n) {
        size_t m = g < n - t ? g : n - t, k = 0;
        while (k < m && ok[t + k]) k++;
        *it += 1, *acc += (double)k, *tst += (double)(k < m ? k + 1 : m);
        t += k + 1;
    }
}

/* Each position is tested at most once, so the replay is a function of independent Bernoulli(a_t)
 * flags: the expectation over all 2^n patterns is exact. Tolerance 1e-12: sums of <= 2^11 terms. */
Test(replay, recursion_equals_brute_force)
{
    gsl_rng *r = sl_rng_alloc(3, SL_STREAM_DATA, 0);
    double scratch[3 * 16];
    for (int trial = 0; trial < 40; trial++) {
        size_t n = 1 + (size_t)trial % 11, g = 1 + (size_t)trial % 5;
        double a[11];
        for (size_t t = 0; t < n; t++) {
            double u = sl_rng_uniform53(r);
            a[t] = trial % 4 == 0 ? (u < 0.5 ? 0 : 1) : u < 0.1 ? 0 : u > 0.9 ? 1 : u; /* zeros and ones too */
        }
        double E = 0, A = 0, T = 0;
        for (unsigned mask = 0; mask < (1u << n); mask++) {
            int ok[11];
            double w = 1;
            for (size_t t = 0; t < n; t++) {
                ok[t] = (mask >> t) & 1;
                w *= ok[t] ? a[t] : 1 - a[t];
            }
            if (w == 0) continue;
            double it, acc, tst;
            on_pattern(ok, n, g, &it, &acc, &tst);
            E += w * it, A += w * acc, T += w * tst;
        }
        double e, ac, ts;
        sl_replay_expect(a, n, g, scratch, &e, &ac, &ts);
        cr_assert(fabs(e - E) < 1e-12 && fabs(ac - A) < 1e-12 && fabs(ts - T) < 1e-12,
                  "trial %d n %zu g %zu: %.15g %.15g %.15g vs brute %.15g %.15g %.15g", trial, n, g, e, ac, ts, E, A, T);
    }
    gsl_rng_free(r);
}

/* The simulation of an answer as long as the sequence has the recursion's mean: 200000 runs, the
 * mean within 4 standard errors (a false alarm once in ~16000 runs of the test). */
Test(replay, simulation_mean_equals_recursion)
{
    const size_t n = 40;
    double a[40], scratch[3 * 42];
    for (size_t t = 0; t < n; t++) a[t] = 0.5 + 0.45 * sin(0.7 * (double)t); /* autocorrelated */
    for (size_t g = 1; g <= 6; g += 5) {
        double e, ac, ts;
        sl_replay_expect(a, n, g, scratch, &e, &ac, &ts);
        gsl_rng *r = sl_rng_alloc(9, SL_STREAM_ACCEPT, g);
        const size_t K = 200000;
        double s = 0, s2 = 0;
        for (size_t i = 0; i < K; i++) {
            double x = (double)sl_replay_simulate(a, n, g, n, r);
            s += x, s2 += x * x;
        }
        gsl_rng_free(r);
        double mean = s / (double)K, se = sqrt((s2 / (double)K - mean * mean) / (double)K);
        cr_assert(fabs(mean - e) < 4 * se, "gamma %zu: simulated %.6f vs exact %.6f (se %.2g)", g, mean, e, se);
    }
    /* 0/1 probabilities: no randomness, the simulation equals the recursion exactly. */
    double d[12] = {1, 1, 0, 1, 0, 0, 1, 1, 1, 1, 0, 1};
    for (size_t g = 1; g <= 5; g++) {
        double e, ac, ts;
        sl_replay_expect(d, 12, g, scratch, &e, &ac, &ts);
        gsl_rng *r = sl_rng_alloc(1, SL_STREAM_ACCEPT, 0);
        cr_assert_eq((double)sl_replay_simulate(d, 12, g, 12, r), e);
        gsl_rng_free(r);
    }
}

Test(replay, accept_probability)
{
    cr_assert_eq(sl_replay_accept_prob(0.5, 0.25), 0.5);
    cr_assert_eq(sl_replay_accept_prob(0.25, 0.5), 1);
    cr_assert_eq(sl_replay_accept_prob(0, 0.5), 0);
    cr_assert_eq(sl_replay_accept_prob(1, 0), 0);
}

/* ---- against real decoding on synthetic models ---- */

/* A model whose every distribution is made one-hot at its argmax (temperature 0; ties to the
 * lowest id), as the sampler standardises at T = 0. */
typedef struct {
    sl_lm inner;
} greedy_lm;

static int greedy_extend(void *self, const int32_t *tokens, size_t n, size_t n_rows, double *dists)
{
    greedy_lm *g = self;
    int rc = g->inner.extend(g->inner.self, tokens, n, n_rows, dists);
    for (size_t r = 0; !rc && r < n_rows; r++) {
        double *p = dists + r * g->inner.vocab_size;
        size_t best = 0;
        for (size_t x = 1; x < g->inner.vocab_size; x++)
            if (p[x] > p[best]) best = x;
        for (size_t x = 0; x < g->inner.vocab_size; x++) p[x] = x == best;
    }
    return rc;
}

static int greedy_truncate(void *self, size_t len)
{
    greedy_lm *g = self;
    return g->inner.truncate(g->inner.self, len);
}

typedef struct {
    sl_synth_lm *mt, *md;
    sl_lm lt, ld;
    greedy_lm gt, gd;
} pair;

static void pair_open(pair *p, int greedy, double noise)
{
    sl_synth_params sp = SL_SYNTH_DEFAULT;
    sp.V = 64;
    sp.noise = noise;
    cr_assert_eq(sl_synth_alloc(&sp, 0, &p->mt), SL_OK);
    cr_assert_eq(sl_synth_alloc(&sp, 1, &p->md), SL_OK);
    p->lt = sl_synth_lm_of(p->mt);
    p->ld = sl_synth_lm_of(p->md);
    if (greedy) {
        p->gt.inner = p->lt, p->gd.inner = p->ld;
        p->lt = (sl_lm){&p->gt, sp.V, greedy_extend, greedy_truncate};
        p->ld = (sl_lm){&p->gd, sp.V, greedy_extend, greedy_truncate};
    }
}

static void pair_close(pair *p)
{
    sl_synth_free(p->mt);
    sl_synth_free(p->md);
}

/* A measure log of ns prompts x N tokens at dir/m.h5. */
static void measure(pair *p, const char *path, size_t ns, size_t N, int32_t (*prompts)[2])
{
    const int32_t *pp[512];
    size_t pl[512];
    for (size_t s = 0; s < ns; s++) pp[s] = prompts[s], pl[s] = 2;
    sl_log_prompts pr = {ns, pp, pl, NULL};
    sl_log_meta m;
    sl_log_meta_init(&m, SL_LOG_MEASURE);
    m.tokens_per_sequence = N;
    m.shard_sequences = 64;
    cr_assert_eq(sl_log_measure(&p->lt, &p->ld, &pr, &m, NULL, path, NULL, NULL), SL_OK, "%s", sl_errmsg());
}

/* Iterations of sl_spec_decode (exact rule) for one prompt, stream item `item`. */
static size_t decode_iterations(pair *p, size_t g, const int32_t *prompt, size_t N, uint64_t item)
{
    sl_rand_rng rr;
    cr_assert_eq(sl_rand_rng_init(&rr, 77, item), SL_OK);
    int32_t out[128];
    size_t n_out = 0;
    sl_spec_stats st;
    sl_spec_config cfg = SL_SPEC_CONFIG_DEFAULT;
    cr_assert_eq(p->lt.truncate(p->lt.self, 0), SL_OK);
    cr_assert_eq(p->ld.truncate(p->ld.self, 0), SL_OK);
    cr_assert_eq(sl_spec_decode(&cfg, g, &p->lt, &p->ld, prompt, 2, N, -1, &rr.base, out, &n_out, &st, NULL, NULL),
                 SL_OK, "%s", sl_errmsg());
    cr_assert_eq(n_out, N);
    sl_rand_rng_free(&rr);
    return st.iterations;
}

static void tmpdir(char *dir, size_t n, const char *tag)
{
    char cmd[400];
    snprintf(dir, n, "/tmp/sl_test_replay_%s.%ld", tag, (long)getpid());
    snprintf(cmd, sizeof cmd, "rm -rf %s && mkdir -p %s", dir, dir);
    cr_assert_eq(system(cmd), 0);
}

/* Temperature 0: the logged text is the greedy text a speculative run emits, every a_t is 0 or 1,
 * and the replay's iterations equal the decoder's, sequence by sequence, for every gamma. */
Test(replay, greedy_log_equals_decoding_exactly)
{
    char dir[300], path[400];
    tmpdir(dir, sizeof dir, "t0");
    snprintf(path, sizeof path, "%s/m.h5", dir);
    pair p;
    pair_open(&p, 1, 0.8);
    const size_t ns = 12, N = 48;
    int32_t pr[12][2];
    for (size_t s = 0; s < ns; s++) pr[s][0] = (int32_t)(5 * s % 64), pr[s][1] = (int32_t)(11 * s % 64);
    measure(&p, path, ns, N, pr);
    sl_replay_seqs rs;
    cr_assert_eq(sl_replay_log(path, 6, &rs), SL_OK, "%s", sl_errmsg());
    cr_assert(rs.deterministic);
    cr_assert_eq(rs.n_seq, ns);
    size_t differ = 0;
    for (size_t g = 1; g <= 6; g++)
        for (size_t s = 0; s < ns; s++) {
            size_t it = decode_iterations(&p, g, pr[s], N, s);
            cr_assert_eq((double)it, rs.iters[s * 6 + g - 1], "gamma %zu sequence %zu: decoder %zu, replay %g", g, s, it,
                         rs.iters[s * 6 + g - 1]);
            differ += it != N; /* not trivially one token per iteration */
        }
    cr_assert(differ > 0);
    sl_replay_seqs_free(&rs);
    pair_close(&p);
}

/* Temperature 1: the replay of one measure log of 400 sequences and 400 decodes of the same
 * prompts (other random numbers) estimate the same tokens per iteration; their difference must lie
 * within 4 combined standard errors (delta method for the two ratio estimators). */
Test(replay, sampled_log_agrees_with_decoding)
{
    char dir[300], path[400];
    tmpdir(dir, sizeof dir, "t1");
    snprintf(path, sizeof path, "%s/m.h5", dir);
    pair p;
    pair_open(&p, 0, 0.6);
    const size_t ns = 400, N = 24, g = 3;
    static int32_t pr[400][2];
    for (size_t s = 0; s < ns; s++) pr[s][0] = (int32_t)(s % 8), pr[s][1] = (int32_t)(s / 8 % 8);
    measure(&p, path, ns, N, pr);
    sl_replay_seqs rs;
    cr_assert_eq(sl_replay_log(path, g, &rs), SL_OK, "%s", sl_errmsg());
    cr_assert(!rs.deterministic);
    double rep = sl_replay_tokens_per_iteration(&rs, g);
    /* The ratio N / mean(iterations): se = N sd(it) / mean(it)^2 / sqrt(ns). */
    double mi = 0, mi2 = 0, di = 0, di2 = 0;
    for (size_t s = 0; s < ns; s++) {
        double x = rs.iters[s * g + g - 1], y = (double)decode_iterations(&p, g, pr[s], N, 1000 + s);
        mi += x, mi2 += x * x, di += y, di2 += y * y;
    }
    mi /= (double)ns, di /= (double)ns;
    double se_r = (double)N * sqrt(fmax(mi2 / (double)ns - mi * mi, 0) / (double)ns) / (mi * mi);
    double se_d = (double)N * sqrt(fmax(di2 / (double)ns - di * di, 0) / (double)ns) / (di * di);
    double dec = (double)N / di;
    cr_assert(fabs(rep - dec) < 4 * sqrt(se_r * se_r + se_d * se_d), "replay %.4f vs decoding %.4f (se %.3g, %.3g)", rep,
              dec, se_r, se_d);
    cr_assert(rep > 1.2, "the pair accepts drafts (replay %.3f tokens per iteration)", rep);
    sl_replay_seqs_free(&rs);
    pair_close(&p);
}
