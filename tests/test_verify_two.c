/* test_verify_two.c: analysis/sl_verify_two: the sequence reader (both formats, every malformed
 * class with its line number, truncated and byte-flipped files), the sparse categories against
 * naive dense count tables, the permutation p-value against exact enumeration of every split,
 * the position cap, the stream hook, and same inputs -> same bytes. Calibration under the null,
 * scipy and real `speclab run` files: tests/cli/verify_two.py. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <gsl/gsl_rng.h>

#include "sl_common.h"
#include "sl_stats.h"
#include "sl_verify_two.h"

static char tmpdir[256];

static void setup(void)
{
    snprintf(tmpdir, sizeof tmpdir, "/tmp/sl_test_verify_two.%ld", (long)getpid());
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf %s && mkdir -p %s", tmpdir, tmpdir);
    cr_assert_eq(system(cmd), 0);
}

static void teardown(void)
{
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf %s", tmpdir);
    cr_assert_eq(system(cmd), 0);
}

TestSuite(verify_two, .init = setup, .fini = teardown);

/* Writes n bytes to tmpdir/name; returns the path (static buffer). */
static const char *put(const char *name, const char *bytes, size_t n)
{
    static char path[512];
    snprintf(path, sizeof path, "%s/%s", tmpdir, name);
    FILE *f = fopen(path, "wb");
    cr_assert(f);
    cr_assert_eq(fwrite(bytes, 1, n, f), n);
    fclose(f);
    return path;
}

static const char *puts_(const char *name, const char *text) { return put(name, text, strlen(text)); }

static void expect_seq(const sl_seqs *s, size_t i, const int32_t *x, size_t n)
{
    cr_assert_eq(s->off[i + 1] - s->off[i], n, "sequence %zu has %zu tokens, expected %zu", i, s->off[i + 1] - s->off[i], n);
    for (size_t j = 0; j < n; j++) cr_assert_eq(s->tok[s->off[i] + j], x[j], "sequence %zu token %zu", i, j);
}

Test(verify_two, reads_both_formats_and_filters_modes)
{
    const char *p = puts_("t.txt", "# run --tokens-out\n0 speculative 5,6,7\n1 autoregressive 8,9\n\n"
                                   "2 speculative\n3 speculative 2097151\r\n");
    sl_seqs *s;
    cr_assert_eq(sl_seqs_read(p, SL_SEQS_SPECULATIVE, &s), SL_OK, "%s", sl_errmsg());
    cr_assert_eq(s->n, 3);
    expect_seq(s, 0, (int32_t[]){5, 6, 7}, 3);
    expect_seq(s, 1, NULL, 0); /* an empty speculative sequence is kept */
    expect_seq(s, 2, (int32_t[]){SL_SEQS_MAX_ID}, 1);
    sl_seqs_free(s);
    cr_assert_eq(sl_seqs_read(p, SL_SEQS_AUTOREGRESSIVE, &s), SL_OK);
    cr_assert_eq(s->n, 1);
    expect_seq(s, 0, (int32_t[]){8, 9}, 2);
    sl_seqs_free(s);
    cr_assert_eq(sl_seqs_read(p, SL_SEQS_ANY, &s), SL_OK);
    cr_assert_eq(s->n, 4);
    sl_seqs_free(s);
    p = puts_("p.txt", "1,2,3\n  4 5\t6  \n7, 8 ,9\n#x\n10\n");
    cr_assert_eq(sl_seqs_read(p, SL_SEQS_ANY, &s), SL_OK, "%s", sl_errmsg());
    cr_assert_eq(s->n, 4);
    expect_seq(s, 0, (int32_t[]){1, 2, 3}, 3);
    expect_seq(s, 1, (int32_t[]){4, 5, 6}, 3);
    expect_seq(s, 2, (int32_t[]){7, 8, 9}, 3);
    expect_seq(s, 3, (int32_t[]){10}, 1);
    sl_seqs_free(s);
}

/* Every malformed class: SL_EINPUT, a message naming the file and (where there is one) the line. */
Test(verify_two, bad_input_names_file_and_line)
{
    static const struct {
        const char *text;
        sl_seqs_mode mode;
        const char *want; /* substring of the message */
    } cases[] = {
        {"1,2\n3,x\n", SL_SEQS_ANY, "line 2: expected a token id, found 'x'"},
        {"1,2\n3x\n", SL_SEQS_ANY, "line 2: unexpected 'x' after a token id"},
        {"1,2\n-3,4\n", SL_SEQS_ANY, "line 2: token id -3 is negative"},
        {"1,2\n\n5,99999999999999999999\n", SL_SEQS_ANY, "line 3: token id 99999999999999999999 is too large"},
        {"1,2\n5,2097152\n", SL_SEQS_ANY, "line 2: token id 2097152 is too large"},
        {"1,2,\n", SL_SEQS_ANY, "line 1: a comma ends the line"},
        {"1,,2\n", SL_SEQS_ANY, "line 1: expected a token id"},
        {"0 speculative 1,2\n1 bogus 3\n", SL_SEQS_ANY, "line 2: mode 'bogus'"},
        {"0 speculative 1,2\n1,2\n", SL_SEQS_ANY, "line 2: expected 'SEQ MODE"},
        {"0 speculative 1 2\n", SL_SEQS_ANY, "line 1: ids must be joined by commas"},
        {"0 speculative 1,2\n", SL_SEQS_AUTOREGRESSIVE, "has no autoregressive sequences"},
        {"1,2\n", SL_SEQS_SPECULATIVE, "line 1: a plain token file has no modes"},
        {"", SL_SEQS_ANY, "has no token sequences"},
        {"# only a comment\n\n", SL_SEQS_ANY, "has no token sequences"},
        {"0 speculative\n", SL_SEQS_ANY, "are all empty"},
        {"1,2\n3\0,4\n", SL_SEQS_ANY, "line 2: a NUL byte"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        size_t n = strlen(cases[i].text);
        if (strstr(cases[i].want, "NUL")) n = 10;
        const char *p = put("bad.txt", cases[i].text, n);
        sl_seqs *s = NULL;
        int rc = sl_seqs_read(p, cases[i].mode, &s);
        cr_assert_eq(rc, SL_EINPUT, "case %zu: rc %d", i, rc);
        cr_assert_null(s);
        cr_assert(strstr(sl_errmsg(), cases[i].want), "case %zu: '%s' lacks '%s'", i, sl_errmsg(), cases[i].want);
        cr_assert(strstr(sl_errmsg(), p), "case %zu: '%s' does not name the file", i, sl_errmsg());
        cr_assert_null(strchr(sl_errmsg(), '\n'), "case %zu: more than one line", i);
    }
    sl_seqs *s = NULL;
    cr_assert_eq(sl_seqs_read("/nonexistent/dir/f.txt", SL_SEQS_ANY, &s), SL_EINPUT);
}

/* No crash on any truncation or byte flip of a valid file: the reader answers OK or SL_EINPUT,
 * and what it accepts runs through the tests (against itself) to OK or SL_EINPUT. */
Test(verify_two, truncated_and_flipped_files_never_crash)
{
    const char *good = "0 speculative 10,11,12,13\n0 autoregressive 10,14,12\n1 speculative 7,7\n"
                       "1 autoregressive 2097151,0,3\n2 speculative 1\n";
    const size_t n = strlen(good);
    static const char flips[] = {'\0', '-', 'x', ',', ' ', '\n', '9', '\xff', '#'};
    sl_verify_two_opts o = SL_VERIFY_TWO_OPTS_DEFAULT;
    o.permutations = 19;
    o.min_sequences = 1;
    char *buf = malloc(n);
    size_t accepted = 0, refused = 0;
    for (size_t t = 0; t <= n + n * sizeof flips; t++) {
        size_t len = n;
        memcpy(buf, good, n);
        if (t <= n) len = t; /* truncation */
        else buf[(t - n - 1) / sizeof flips] = flips[(t - n - 1) % sizeof flips];
        const char *p = put("f.txt", buf, len);
        for (int m = 0; m < 3; m++) {
            sl_seqs *s = NULL;
            int rc = sl_seqs_read(p, (sl_seqs_mode)m, &s);
            cr_assert(rc == SL_OK || rc == SL_EINPUT, "t %zu mode %d: rc %d", t, m, rc);
            if (rc) {
                refused++;
                continue;
            }
            accepted++;
            cr_assert_gt(s->n, 0);
            sl_verify_two_result *r = NULL;
            rc = sl_verify_two_run(s, s, &o, &r);
            cr_assert(rc == SL_OK || rc == SL_EINPUT, "t %zu: run rc %d", t, rc);
            if (!rc) cr_assert_eq(r->core->rejected, 0, "a set against itself is never different");
            sl_verify_two_result_free(r);
            sl_seqs_free(s);
        }
    }
    cr_assert_gt(accepted, 0);
    cr_assert_gt(refused, 0);
    free(buf);
}

/* Random sequences (gsl_rng, seed 7) of ids < V with lengths 1..Lmax. */
static sl_seqs *random_seqs(gsl_rng *r, size_t n, size_t V, size_t Lmax)
{
    sl_seqs *s = calloc(1, sizeof *s);
    s->n = n;
    s->off = calloc(n + 1, sizeof *s->off);
    s->tok = malloc(n * Lmax * sizeof *s->tok);
    for (size_t i = 0; i < n; i++) {
        size_t L = 1 + gsl_rng_uniform_int(r, Lmax);
        /* Skewed ids so that both rare (pooled) and frequent categories occur. */
        for (size_t j = 0; j < L; j++) {
            double u = gsl_rng_uniform(r);
            s->tok[s->off[i] + j] = (int32_t)((double)V * u * u * u);
        }
        s->off[i + 1] = s->off[i] + L;
    }
    return s;
}

static const sl_verify_test *row(const sl_verify_two_result *r, const char *name)
{
    for (size_t i = 0; i < r->core->n_rows; i++)
        if (!strcmp(r->core->test[i].name, name)) return &r->core->test[i];
    return NULL;
}

/* Naive twin of the sparse categories: dense count tables of every cell (V = 16, so V^3 = 4096),
 * the same sl_stats_homogeneity on them. Dense index x1 V^2 + x2 V + x3 and the packed block key
 * order blocks the same way and empty columns are dropped, so the pooled cells, the sums and
 * therefore the statistics must be bit-identical (asserted to 1e-12 relative). */
Test(verify_two, sparse_categories_match_dense_tables)
{
    const size_t V = 16, L = 7;
    gsl_rng *r = gsl_rng_alloc(gsl_rng_mt19937);
    gsl_rng_set(r, 7);
    sl_seqs *a = random_seqs(r, 400, V, L), *b = random_seqs(r, 300, V, L);
    gsl_rng_free(r);
    sl_verify_two_opts o = SL_VERIFY_TWO_OPTS_DEFAULT;
    o.permutations = 99;
    sl_verify_two_result *res;
    cr_assert_eq(sl_verify_two_run(a, b, &o, &res), SL_OK, "%s", sl_errmsg());
    uint64_t *ca = calloc(V * V * V, sizeof *ca), *cb = calloc(V * V * V, sizeof *cb);
    const char *names[] = {"length", "position_1", "position_4", "position_7", "block2", "block3", "all"};
    for (size_t t = 0; t < sizeof names / sizeof *names; t++) {
        memset(ca, 0, V * V * V * sizeof *ca);
        memset(cb, 0, V * V * V * sizeof *cb);
        for (int side = 0; side < 2; side++) {
            const sl_seqs *s = side ? b : a;
            uint64_t *c = side ? cb : ca;
            for (size_t i = 0; i < s->n; i++) {
                const int32_t *x = s->tok + s->off[i];
                size_t n = s->off[i + 1] - s->off[i];
                if (t == 0) c[n]++;
                else if (t <= 3 && n >= (size_t)(t == 1 ? 1 : t == 2 ? 4 : 7)) c[x[t == 1 ? 0 : t == 2 ? 3 : 6]]++;
                else if (t == 4 && n >= 2) c[x[0] * V + x[1]]++;
                else if (t == 5 && n >= 3) c[(x[0] * V + x[1]) * V + x[2]]++;
                else if (t == 6)
                    for (size_t j = 0; j < n; j++) c[x[j]]++;
            }
        }
        sl_gof gx, gg;
        cr_assert_eq(sl_stats_homogeneity(ca, cb, V * V * V, SL_GOF_PEARSON, &gx), SL_OK);
        cr_assert_eq(sl_stats_homogeneity(ca, cb, V * V * V, SL_GOF_G, &gg), SL_OK);
        const sl_verify_test *e = row(res, names[t]);
        cr_assert(e, "no row %s", names[t]);
        cr_assert_eq(e->cells, gx.n_cells, "%s cells", names[t]);
        cr_assert_eq(e->df, gx.df, "%s df", names[t]);
        cr_assert(fabs(e->pearson - gx.stat) <= 1e-12 * gx.stat, "%s: pearson %.17g vs dense %.17g", names[t], e->pearson, gx.stat);
        cr_assert(fabs(e->g - gg.stat) <= 1e-12 * gg.stat, "%s: G %.17g vs dense %.17g", names[t], e->g, gg.stat);
        if (t < 6) cr_assert(fabs(e->p_value - gx.p_value) <= 1e-12, "%s p", names[t]);
        /* TV of the two empirical pmfs, naively. */
        double na = 0, nb = 0, d = 0;
        for (size_t j = 0; j < V * V * V; j++) na += (double)ca[j], nb += (double)cb[j];
        for (size_t j = 0; j < V * V * V; j++) d += fabs((double)ca[j] / na - (double)cb[j] / nb);
        cr_assert(fabs(e->tv - 0.5 * d) <= 1e-12, "%s tv", names[t]);
        cr_assert_eq(e->n, (size_t)na);
        cr_assert_eq(e->n_b, (size_t)nb);
    }
    cr_assert_str_eq(row(res, "all")->method, "permutation");
    cr_assert_str_eq(row(res, "position_1")->method, "homogeneity");
    cr_assert_eq(res->positions, 7);
    free(ca);
    free(cb);
    sl_verify_two_result_free(res);
    sl_seqs_free(a);
    sl_seqs_free(b);
}

/* The permutation p-value of "all" against exact enumeration of all C(8, 4) = 70 ways to split
 * the 8 sequences into sets of 4 (each split equally likely under the permutation null). The
 * Monte Carlo p with B = 20000 has sd <= sqrt(p (1 - p) / B) <= 0.0036; asserted within
 * 4.5 sd + 1/B (a false failure has probability < 1e-5; fixed seed, so deterministic). */
Test(verify_two, permutation_p_matches_exact_enumeration)
{
    /* Drawn once with numpy (seed 5): a from (.45, .3, .25), b from (.3, .3, .4); every expected
     * count >= 5, so no pooling, and the exact p-value is 4/70 (checked in python as well). */
    static const int32_t ta[] = {2, 2, 1, 0, 0, 0, 0, 0, 0, 2, 1, 0, 0, 2, 2, 2, 0, 1, 1, 0,
                                 1, 0, 2, 0, 1, 2, 0, 2, 2, 0, 1, 0, 1, 0, 0, 0, 2, 0, 0, 1};
    static const size_t oa[] = {0, 9, 19, 30, 40};
    static const int32_t tb[] = {1, 2, 0, 1, 2, 1, 1, 0, 0, 2, 0, 2, 1, 2, 1, 2, 1, 0, 2, 2, 2,
                                 1, 0, 2, 0, 2, 2, 1, 2, 0, 1, 2, 1, 2, 2, 2, 2, 2, 2, 0, 2};
    static const size_t ob[] = {0, 10, 19, 31, 41};
    sl_seqs a = {4, (size_t *)oa, (int32_t *)ta}, b = {4, (size_t *)ob, (int32_t *)tb};
    sl_verify_two_opts o = SL_VERIFY_TWO_OPTS_DEFAULT;
    o.permutations = 20000;
    o.min_sequences = 1;
    sl_verify_two_result *res;
    cr_assert_eq(sl_verify_two_run(&a, &b, &o, &res), SL_OK, "%s", sl_errmsg());
    const sl_verify_test *e = row(res, "all");
    cr_assert(e);
    cr_assert_str_eq(e->method, "permutation");
    /* Exact: every 4-subset of the 8 sequences as set a. */
    const sl_seqs *all[2] = {&a, &b};
    uint64_t ca[3], cb[3], tot[3] = {0};
    for (int s = 0; s < 2; s++)
        for (size_t i = 0; i < all[s]->off[4]; i++) tot[all[s]->tok[i]]++;
    size_t ge = 0, splits = 0;
    for (unsigned mask = 0; mask < 256; mask++) {
        if (__builtin_popcount(mask) != 4) continue;
        memset(ca, 0, sizeof ca);
        for (size_t q = 0; q < 8; q++) {
            if (!(mask >> q & 1)) continue;
            const sl_seqs *s = all[q / 4];
            for (size_t i = s->off[q % 4]; i < s->off[q % 4 + 1]; i++) ca[s->tok[i]]++;
        }
        for (int j = 0; j < 3; j++) cb[j] = tot[j] - ca[j];
        sl_gof g;
        cr_assert_eq(sl_stats_homogeneity(ca, cb, 3, SL_GOF_PEARSON, &g), SL_OK);
        ge += g.stat >= e->pearson * (1 - 1e-9);
        splits++;
    }
    cr_assert_eq(splits, 70);
    double p_exact = (double)ge / 70.0, sd = sqrt(p_exact * (1 - p_exact) / 20000.0);
    cr_assert_eq(ge, 4, "exact enumeration: %zu splits at least as extreme, python found 4", ge);
    cr_assert(fabs(e->p_value - p_exact) <= 4.5 * sd + 1.0 / 20000, "permutation p %g vs exact %g", e->p_value, p_exact);
    sl_verify_two_result_free(res);
}

static char *render(const sl_verify_two_result *r)
{
    sl_table *t[2];
    size_t n;
    cr_assert_eq(sl_verify_two_report(r, t, &n), SL_OK);
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    cr_assert_eq(sl_report_write(t, n, f, SL_FMT_JSON), 0);
    fclose(f);
    for (size_t i = 0; i < n; i++) sl_table_free(t[i]);
    return buf;
}

/* A clear difference is rejected, a set against itself is not; the position cap; same inputs,
 * same bytes; a different seed changes only the permutation p-values. */
Test(verify_two, verdict_cap_and_reproducibility)
{
    gsl_rng *r = gsl_rng_alloc(gsl_rng_mt19937);
    gsl_rng_set(r, 11);
    sl_seqs *a = random_seqs(r, 500, 8, 9), *b = random_seqs(r, 500, 8, 9);
    gsl_rng_free(r);
    for (size_t i = 0; i < b->n; i++) /* b: every first token shifted */
        b->tok[b->off[i]] = (b->tok[b->off[i]] + 1) % 8;
    sl_verify_two_opts o = SL_VERIFY_TWO_OPTS_DEFAULT;
    o.permutations = 999;
    o.max_positions = 4;
    sl_verify_two_result *x, *y, *z;
    cr_assert_eq(sl_verify_two_run(a, b, &o, &x), SL_OK);
    cr_assert(x->core->rejected);
    cr_assert_eq(row(x, "position_1")->reject, 1);
    cr_assert_eq(x->positions, 4);
    cr_assert_null(row(x, "position_5"));
    cr_assert_eq(sl_verify_two_run(a, b, &o, &y), SL_OK);
    char *sx = render(x), *sy = render(y);
    cr_assert_str_eq(sx, sy);
    free(sy);
    sl_verify_two_result_free(y);
    o.base.seed = 2;
    cr_assert_eq(sl_verify_two_run(a, b, &o, &y), SL_OK);
    for (size_t i = 0; i < x->core->n_rows; i++) {
        const sl_verify_test *e = &x->core->test[i], *f = &y->core->test[i];
        cr_assert_str_eq(e->name, f->name);
        if (strcmp(e->method, "permutation")) cr_assert_eq(e->p_value, f->p_value, "%s", e->name);
    }
    sl_verify_two_result_free(y);
    cr_assert_eq(sl_verify_two_run(a, a, &o, &z), SL_OK);
    cr_assert_eq(z->core->rejected, 0);
    /* J stops where either set has fewer than min_sequences sequences of length >= j (lengths
     * are uniform on 1..9, so about 55 of 500 reach 9). */
    o.max_positions = 16;
    o.min_sequences = 80;
    sl_verify_two_result_free(z);
    cr_assert_eq(sl_verify_two_run(a, b, &o, &z), SL_OK);
    size_t J = 0;
    for (size_t j = 1; j <= 9; j++) {
        size_t ka = 0, kb = 0;
        for (size_t i = 0; i < a->n; i++) ka += a->off[i + 1] - a->off[i] >= j;
        for (size_t i = 0; i < b->n; i++) kb += b->off[i + 1] - b->off[i] >= j;
        if (ka < 80 || kb < 80) break;
        J = j;
    }
    cr_assert_eq(z->positions, J);
    cr_assert_lt(J, 9, "the cap should bind in this example");
    free(sx);
    sl_verify_two_result_free(x);
    sl_verify_two_result_free(z);
    sl_seqs_free(a);
    sl_seqs_free(b);
}

/* The stream hook: one long sequence per side has only block2_all, block3_all and all, on the
 * chi^2 reference (nothing to permute). */
Test(verify_two, stream_hook_has_only_every_token_tests)
{
    int32_t x[3000], y[3000];
    gsl_rng *r = gsl_rng_alloc(gsl_rng_mt19937);
    gsl_rng_set(r, 3);
    for (size_t i = 0; i < 3000; i++) {
        x[i] = (int32_t)gsl_rng_uniform_int(r, 5);
        y[i] = (int32_t)gsl_rng_uniform_int(r, 5);
    }
    gsl_rng_free(r);
    sl_seqs *a, *b;
    cr_assert_eq(sl_seqs_from_stream(x, 3000, &a), SL_OK);
    cr_assert_eq(sl_seqs_from_stream(y, 3000, &b), SL_OK);
    sl_verify_two_opts o = SL_VERIFY_TWO_OPTS_DEFAULT;
    sl_verify_two_result *res;
    cr_assert_eq(sl_verify_two_run(a, b, &o, &res), SL_OK, "%s", sl_errmsg());
    cr_assert_eq(res->core->n_rows, 3);
    const char *names[] = {"block2_all", "block3_all", "all"};
    for (int i = 0; i < 3; i++) {
        cr_assert_str_eq(res->core->test[i].name, names[i]);
        cr_assert_str_eq(res->core->test[i].method, "homogeneity");
    }
    cr_assert_eq(row(res, "all")->n, 3000);
    cr_assert_eq(row(res, "block3_all")->n, 1000);
    sl_verify_two_result_free(res);
    sl_seqs_free(a);
    sl_seqs_free(b);
    int32_t bad = -1;
    cr_assert_eq(sl_seqs_from_stream(&bad, 1, &a), SL_EINPUT);
}
