/* test_drafts.c: n-gram and prompt-lookup drafts (models/sl_ngram.h) and sl_lm_open.
 * Smoothing is checked against values worked out by hand on a toy corpus (exact fractions, compared
 * to 1e-15: a handful of double operations), every context's distribution sums to 1 (1e-12),
 * files round-trip bit for bit, lookup proposals on constructed sequences, truncate equals a fresh
 * state. Counts and eval against numpy are in tests/cli/drafts_ref.py. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sl_common.h"
#include "sl_lm_open.h"
#include "sl_ngram.h"

static sl_ngram *toy(int order, sl_ngram_smoothing sm)
{
    /* Two files: bigrams do not cross from the first into the second. */
    static const int32_t a[] = {0, 1, 0, 1, 2}, b[] = {1, 1};
    const int32_t *seqs[2] = {a, b};
    size_t lens[2] = {5, 2};
    sl_ngram_opts o = {order, sm, 1.0, 0.0};
    sl_ngram *m = NULL;
    cr_assert_eq(sl_ngram_train(seqs, lens, 2, 4, &o, &m), SL_OK, "%s", sl_errmsg());
    return m;
}

#define NEAR(x, y) cr_assert(fabs((x) - (y)) < 1e-15, "%.17g != %.17g", (double)(x), (double)(y))

Test(drafts, unigram_addk_by_hand)
{
    sl_ngram *m = toy(1, SL_NGRAM_ADDK);
    /* counts 2, 4, 1, 0 of N = 7; (c + 1) / (7 + 4) */
    double p[4];
    sl_ngram_dist(m, 2, p);
    NEAR(p[0], 3.0 / 11);
    NEAR(p[1], 5.0 / 11);
    NEAR(p[2], 2.0 / 11);
    NEAR(p[3], 1.0 / 11);
    sl_ngram_free(m);
}

Test(drafts, bigram_absdisc_by_hand)
{
    sl_ngram *m = toy(2, SL_NGRAM_ABSDISC);
    /* bigrams: (0,1) x2, (1,0), (1,2), (1,1): n1 = 3, n2 = 1, D = 3 / (3 + 2) = 0.6 */
    NEAR(m->discount, 0.6);
    cr_assert_eq(m->nnz, 4);
    double p[4];
    const double P1[4] = {3.0 / 11, 5.0 / 11, 2.0 / 11, 1.0 / 11};
    sl_ngram_dist(m, 0, p); /* c(0.) = 2, one type: lambda = 0.6 * 1 / 2 */
    NEAR(p[0], 0.3 * P1[0]);
    NEAR(p[1], 1.4 / 2 + 0.3 * P1[1]);
    NEAR(p[3], 0.3 * P1[3]);
    sl_ngram_dist(m, 1, p); /* c(1.) = 3, three types: lambda = 0.6 */
    NEAR(p[0], 0.4 / 3 + 0.6 * P1[0]);
    NEAR(p[1], 0.4 / 3 + 0.6 * P1[1]);
    NEAR(p[2], 0.4 / 3 + 0.6 * P1[2]);
    NEAR(p[3], 0.6 * P1[3]);
    sl_ngram_dist(m, 2, p); /* 2 ends the first file: never a context, so P1 */
    for (int w = 0; w < 4; w++) NEAR(p[w], P1[w]);
    sl_ngram_free(m);
}

Test(drafts, bigram_kneser_ney_by_hand)
{
    sl_ngram *m = toy(2, SL_NGRAM_KN);
    /* continuation counts N1+(.w) = 1, 2, 1, 0 over 4 bigram types: Plow = (N1+ + 1) / (4 + 4) */
    const double Pl[4] = {2.0 / 8, 3.0 / 8, 2.0 / 8, 1.0 / 8};
    double p[4];
    sl_ngram_dist(m, 0, p);
    NEAR(p[1], 0.7 + 0.3 * Pl[1]);
    NEAR(p[2], 0.3 * Pl[2]);
    sl_ngram_dist(m, 1, p);
    NEAR(p[0], 0.4 / 3 + 0.6 * Pl[0]);
    NEAR(p[3], 0.6 * Pl[3]);
    sl_ngram_dist(m, 3, p);
    for (int w = 0; w < 4; w++) NEAR(p[w], Pl[w]);
    sl_ngram_dist(m, -1, p); /* no previous token */
    for (int w = 0; w < 4; w++) NEAR(p[w], Pl[w]);
    sl_ngram_free(m);
}

/* A skewed random corpus: most bigram types seen once, some contexts never. */
static void corpus(int32_t *ids, size_t n, size_t V, uint64_t seed)
{
    uint64_t x = seed;
    for (size_t i = 0; i < n; i++) {
        x = x * 6364136223846793005ULL + 1442695040888963407ULL;
        double u = (double)(x >> 11) / 9007199254740992.0;
        ids[i] = (int32_t)((double)(V - 7) * u * u * u); /* ids >= V - 7 never occur */
    }
}

Test(drafts, every_context_sums_to_one_and_files_round_trip)
{
    enum { V = 97, N = 5000 };
    static int32_t ids[N];
    corpus(ids, N, V, 3);
    const int32_t *seqs[1] = {ids};
    size_t lens[1] = {N};
    char path[] = "/tmp/sl_test_ngram_XXXXXX";
    int fd = mkstemp(path);
    cr_assert(fd >= 0);
    close(fd);
    for (int order = 1; order <= 2; order++)
        for (int sm = 0; sm < 3; sm++) {
            if ((order == 1) != (sm == SL_NGRAM_ADDK)) continue;
            sl_ngram_opts o = {order, (sl_ngram_smoothing)sm, 0.5, 0.0};
            sl_ngram *m = NULL, *r = NULL;
            cr_assert_eq(sl_ngram_train(seqs, lens, 1, V, &o, &m), SL_OK, "%s", sl_errmsg());
            cr_assert_eq(sl_ngram_write(m, path), SL_OK, "%s", sl_errmsg());
            cr_assert_eq(sl_ngram_open(path, &r), SL_OK, "%s", sl_errmsg());
            cr_assert_eq(r->discount, m->discount); /* %.17g in the config: exact */
            double p[V], q[V];
            for (int v = -1; v < V; v++) {
                sl_ngram_dist(m, v, p);
                sl_ngram_dist(r, v, q);
                double s = 0;
                for (int w = 0; w < V; w++) {
                    cr_assert(p[w] > 0, "order %d %s: p(%d | %d) = 0", order, sl_ngram_smoothing_name(m->smoothing), w, v);
                    s += p[w];
                }
                /* V terms in (0, 1]: rounding stays near V * 2^-53 ~ 1e-14. */
                cr_assert(fabs(s - 1) < 1e-12, "order %d %s context %d: sum %.17g", order,
                          sl_ngram_smoothing_name(m->smoothing), v, s);
                cr_assert(memcmp(p, q, sizeof p) == 0, "the file gives other probabilities (context %d)", v);
            }
            sl_ngram_free(m);
            sl_ngram_free(r);
        }
    unlink(path);
}

Test(drafts, lookup_proposals_on_constructed_sequences)
{
    size_t ml;
    const int32_t a[] = {5, 6, 7, 8, 5, 6, 7};
    cr_assert_eq(sl_lookup_propose(a, 7, 3, &ml), 8);
    cr_assert_eq(ml, 3);
    /* [2, 3] occurs twice before the end: the most recent one (followed by 4) wins. */
    const int32_t b[] = {1, 2, 3, 9, 2, 3, 4, 2, 3};
    cr_assert_eq(sl_lookup_propose(b, 9, 2, &ml), 4);
    cr_assert_eq(ml, 2);
    /* The longest suffix wins over a more recent shorter one: [1, 2] -> 9 rather than [2] -> 8. */
    const int32_t c[] = {1, 2, 9, 3, 2, 8, 1, 2};
    cr_assert_eq(sl_lookup_propose(c, 8, 2, &ml), 9);
    cr_assert_eq(ml, 2);
    cr_assert_eq(sl_lookup_propose(c, 8, 1, &ml), 8); /* N = 1: only the last token */
    cr_assert_eq(ml, 1);
    const int32_t d[] = {7, 1, 7};
    cr_assert_eq(sl_lookup_propose(d, 3, 3, &ml), 1);
    cr_assert_eq(ml, 1);
    const int32_t e[] = {1, 2, 3, 4};
    cr_assert_eq(sl_lookup_propose(e, 4, 3, &ml), -1);
    cr_assert_eq(ml, 0);
    cr_assert_eq(sl_lookup_propose(e, 1, 3, &ml), -1);
    cr_assert_eq(sl_lookup_propose(e, 0, 3, &ml), -1);
    /* The suffix itself is not an earlier occurrence: [4, 4] has [4] at 0 followed by 4. */
    const int32_t f[] = {4, 4};
    cr_assert_eq(sl_lookup_propose(f, 2, 3, &ml), 4);
}

Test(drafts, lookup_q_sums_to_one_and_truncate_equals_fresh)
{
    enum { V = 11 };
    double fb[V];
    for (int w = 0; w < V; w++) fb[w] = (double)(w + 1) / 66.0; /* sum 1 */
    sl_sampling s = SL_SAMPLING_DEFAULT;
    for (int use_fb = 0; use_fb < 2; use_fb++) {
        sl_lookup_lm *l = NULL, *g = NULL;
        cr_assert_eq(sl_lookup_lm_alloc(V, 3, 0.2, use_fb ? fb : NULL, &s, 32, &l), SL_OK);
        cr_assert_eq(sl_lookup_lm_alloc(V, 3, 0.2, use_fb ? fb : NULL, &s, 32, &g), SL_OK);
        const int32_t seq[] = {5, 6, 7, 8, 5, 6, 7, 2, 9, 9};
        double d[10 * V], e[10 * V];
        cr_assert_eq(l->lm.extend(l, seq, 10, 10, d), SL_OK);
        for (int i = 0; i < 10; i++) {
            double sum = 0;
            for (int w = 0; w < V; w++) sum += d[i * V + w];
            cr_assert(fabs(sum - 1) < 1e-12, "row %d sums to %.17g", i, sum);
        }
        /* after 5 6 7 (second time): 8 gets 0.8 + 0.2 f(8) */
        double f8 = use_fb ? fb[8] : 1.0 / V;
        cr_assert(fabs(d[6 * V + 8] - (0.8 + 0.2 * f8)) < 1e-15);
        /* after the first token nothing can match: q = f */
        cr_assert(fabs(d[0 * V + 3] - (use_fb ? fb[3] : 1.0 / V)) < 1e-15);
        /* Truncate to 4 and take another path; it must equal a fresh state fed the same tokens. */
        const int32_t alt[] = {5, 6, 7, 8, 1, 5, 6};
        cr_assert_eq(l->lm.truncate(l, 4), SL_OK);
        cr_assert_eq(l->lm.extend(l, alt + 4, 3, 3, d), SL_OK);
        cr_assert_eq(g->lm.extend(g, alt, 7, 3, e), SL_OK);
        cr_assert(memcmp(d, e, 3 * V * sizeof *d) == 0);
        cr_assert_eq(l->lm.truncate(l, 99), SL_EINPUT);
        sl_lookup_lm_free(l);
        sl_lookup_lm_free(g);
    }
}

Test(drafts, ngram_lm_truncate_and_sampling)
{
    sl_ngram *m = toy(2, SL_NGRAM_KN);
    sl_sampling s = SL_SAMPLING_DEFAULT;
    sl_ngram_lm *l = NULL;
    cr_assert_eq(sl_ngram_lm_alloc(m, &s, 8, &l), SL_OK);
    const int32_t seq[] = {0, 1, 2, 3};
    double d[4 * 4], p[4];
    cr_assert_eq(l->lm.extend(l, seq, 4, 2, d), SL_OK); /* rows after 2 and after 3 */
    sl_ngram_dist(m, 2, p);
    cr_assert(memcmp(d, p, sizeof p) == 0);
    cr_assert_eq(l->lm.truncate(l, 1), SL_OK);
    cr_assert_eq(l->lm.extend(l, seq + 1, 1, 1, d), SL_OK);
    sl_ngram_dist(m, 1, p);
    cr_assert(memcmp(d, p, sizeof p) == 0);
    cr_assert_eq(l->lm.extend(l, seq, 7, 1, d), SL_EINPUT); /* 2 + 7 > 8 */
    const int32_t bad[] = {4};
    cr_assert_eq(l->lm.extend(l, bad, 1, 1, d), SL_EINPUT);
    sl_ngram_lm_free(l);
    /* temperature 0: one-hot at the argmax (after 0 that is token 1) */
    s.temperature = 0;
    cr_assert_eq(sl_ngram_lm_alloc(m, &s, 8, &l), SL_OK);
    cr_assert_eq(l->lm.extend(l, seq, 1, 1, d), SL_OK);
    cr_assert(d[1] == 1.0 && d[0] == 0.0 && d[2] == 0.0 && d[3] == 0.0);
    sl_ngram_lm_free(l);
    sl_ngram_free(m);
}

/* Greedy (T = 0) lookup rows: the one-hot at the first maximum of log(raw), what the general path
 * (logarithms, then sl_dist_standardise at T = 0) gives, which the greedy path reaches without the
 * logarithms; with ties (a uniform fallback: every token tied before any match) and without. */
Test(drafts, lookup_greedy_rows_equal_general_path)
{
    enum { V = 13 };
    double fb[V];
    for (int w = 0; w < V; w++) fb[w] = w == 7 || w == 9 ? 2 : 1; /* 7 and 9 tie for the maximum */
    double sum = 0;
    for (int w = 0; w < V; w++) sum += fb[w];
    for (int w = 0; w < V; w++) fb[w] /= sum;
    sl_sampling s = SL_SAMPLING_DEFAULT, s0 = SL_SAMPLING_DEFAULT;
    s0.temperature = 0;
    sl_dist_work *dw = sl_dist_work_alloc(V);
    for (int use_fb = 0; use_fb < 2; use_fb++) {
        sl_lookup_lm *raw = NULL, *greedy = NULL;
        cr_assert_eq(sl_lookup_lm_alloc(V, 3, 0.2, use_fb ? fb : NULL, &s, 32, &raw), SL_OK);
        cr_assert_eq(sl_lookup_lm_alloc(V, 3, 0.2, use_fb ? fb : NULL, &s0, 32, &greedy), SL_OK);
        const int32_t seq[] = {5, 6, 7, 8, 5, 6, 7, 2, 9, 9, 12, 5, 6};
        enum { N = sizeof seq / sizeof *seq };
        double d[N * V], g[N * V], e[V];
        cr_assert_eq(raw->lm.extend(raw, seq, N, N, d), SL_OK);
        cr_assert_eq(greedy->lm.extend(greedy, seq, N, N, g), SL_OK);
        for (int i = 0; i < N; i++) {
            for (int w = 0; w < V; w++) e[w] = log(d[i * V + w]);
            cr_assert_eq(sl_dist_standardise(e, V, &s0, e, dw), SL_OK);
            cr_assert(memcmp(e, g + i * V, sizeof e) == 0, "row %d (fallback %d)", i, use_fb);
        }
        sl_lookup_lm_free(raw);
        sl_lookup_lm_free(greedy);
    }
    sl_dist_work_free(dw);
}

Test(drafts, lm_open_specs)
{
    sl_lm_open_opts o = {SL_SAMPLING_DEFAULT, 0, "--draft", NULL, NULL};
    sl_lm_handle *h = NULL;
    cr_assert_eq(sl_lm_open("no-such-model", &o, &h), SL_EINPUT);
    cr_assert_null(h);
    cr_assert_eq(sl_lm_open("lookup:3", &o, &h), SL_EINPUT); /* no vocabulary to take */
    cr_assert_eq(sl_lm_open("lookup:x", &o, &h), SL_EINPUT);
    cr_assert_eq(sl_lm_open("lookup:2:0", &o, &h), SL_EINPUT);
    o.vocab_size = 10;
    cr_assert_eq(sl_lm_open("lookup:2:0.5", &o, &h), SL_OK, "%s", sl_errmsg());
    cr_assert_eq(h->kind, SL_LM_LOOKUP);
    cr_assert_eq(h->vocab_size, 10);
    cr_assert_null(h->file);
    cr_assert_eq(h->context, SIZE_MAX);
    cr_assert_eq(sl_lm_start(h, 16), SL_OK);
    const int32_t seq[] = {1, 2, 1};
    double d[10];
    cr_assert_eq(h->lm.extend(h->lm.self, seq, 3, 1, d), SL_OK);
    cr_assert(fabs(d[2] - (0.5 + 0.05)) < 1e-15); /* after ...1, the earlier 1 was followed by 2 */
    sl_lm_close(h);

    /* An n-gram file: vocabulary check against an expected size. */
    sl_ngram *m = toy(2, SL_NGRAM_KN);
    char path[] = "/tmp/sl_test_lmopen_XXXXXX";
    int fd = mkstemp(path);
    close(fd);
    cr_assert_eq(sl_ngram_write(m, path), SL_OK);
    o.vocab_size = 5;
    cr_assert_eq(sl_lm_open(path, &o, &h), SL_EINPUT);
    cr_assert(strstr(sl_errmsg(), "vocabulary mismatch"), "%s", sl_errmsg());
    o.vocab_size = 4;
    cr_assert_eq(sl_lm_open(path, &o, &h), SL_OK, "%s", sl_errmsg());
    cr_assert_eq(h->kind, SL_LM_NGRAM);
    sl_lm_close(h);
    unlink(path);
    sl_ngram_free(m);
}
