/* test_samples.c: analysis/sl_samples, the reader of external sample files (SAMPLES.md).
 * - speclab's own sampler written out as CSV, HDF5 (through the HDF5 C API, integer codes and
 *   strings) and ids, read back: the same tokens, and sl_verify_samples on them gives exactly the
 *   result of sl_verify_samples on the captured tokens (every field, bit for bit; sl_verify_run's equal those but for pair/triple: test_verify_stream.c), for i.i.d. and positional pairs;
 * - each rule of the CSV format: SL_EINPUT with "FILE:LINE:" and the right line;
 * - robustness: every truncation and 3000 random byte edits of a good CSV, ids and HDF5 file read
 *   as SL_OK (then every value in range) or SL_EINPUT, never a crash or another status.
 * The independent writer (h5py) and an independent sampler (tests/external_sampler.py) are in
 * tests/cli/verify_samples.py. */
#include <criterion/criterion.h>
#include <gsl/gsl_rng.h>
#include <hdf5.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sl_common.h"
#include "sl_mc.h"
#include "sl_samples.h"
#include "sl_verify.h"
#include "verify_plans.h"

static char dir[128];

static void mk_dir(void)
{
    snprintf(dir, sizeof dir, "/tmp/sl_test_samples.%ld", (long)getpid());
    char cmd[2 * sizeof dir + 32];
    snprintf(cmd, sizeof cmd, "rm -rf %s && mkdir -p %s", dir, dir);
    cr_assert_eq(system(cmd), 0);
}

static void rm_dir(void)
{
    char cmd[256];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    cr_assert_eq(system(cmd), 0);
}

static const char *at(const char *name)
{
    static char buf[4][256];
    static int k;
    k = (k + 1) % 4;
    snprintf(buf[k], sizeof buf[k], "%s/%s", dir, name);
    return buf[k];
}

/* Unlinks first: rewriting a file in place makes ext4 flush it (auto_da_alloc), 100x slower. */
static void write_file(const char *path, const char *data, size_t n)
{
    unlink(path);
    FILE *f = fopen(path, "wb");
    cr_assert(f);
    cr_assert_eq(fwrite(data, 1, n, f), n);
    fclose(f);
}

static char *slurp(const char *path, size_t *n)
{
    FILE *f = fopen(path, "rb");
    cr_assert(f);
    fseek(f, 0, SEEK_END);
    *n = (size_t)ftell(f);
    rewind(f);
    char *b = malloc(*n + 1);
    cr_assert(b);
    cr_assert_eq(fread(b, 1, *n, f), *n);
    fclose(f);
    return b;
}

/* What sl_verify_run does before its tests: the sampler's own code with token capture. */
static void capture(const sl_mc_plan *plan, size_t N, uint64_t seed, int32_t **tok, uint8_t **nem)
{
    size_t g = sl_mc_plan_gamma(plan);
    *tok = malloc(N * (g + 1) * sizeof **tok); /* (N, gamma+1) */
    *nem = malloc(N);                          /* (N) */
    cr_assert(*tok && *nem);
    sl_mc_opts mo = {N, seed, 1, *tok, *nem, 1};
    sl_mc_result res;
    cr_assert_eq(sl_mc_run(plan, &mo, &res), SL_OK, "%s", sl_errmsg());
}

static const char *const kinds[3] = {"accepted", "resampled", "bonus"};

static int kind_at(size_t j, size_t k, size_t g)
{
    return j + 1 < k ? 0 : k == g + 1 ? 2 : 1;
}

/* Iteration ids 3 t + 5: gaps are allowed. */
static void write_csv(const char *path, const int32_t *tok, const uint8_t *nem, size_t N, size_t g)
{
    FILE *f = fopen(path, "w");
    cr_assert(f);
    fprintf(f, "iteration,position,token,kind\n");
    for (size_t t = 0; t < N; t++)
        for (size_t j = 0; j < nem[t]; j++)
            fprintf(f, "%zu,%zu,%d,%s\n", 3 * t + 5, j + 1, tok[t * (g + 1) + j], kinds[kind_at(j, nem[t], g)]);
    fclose(f);
}

static void write_ids(const char *path, const int32_t *tok, const uint8_t *nem, size_t N, size_t g)
{
    FILE *f = fopen(path, "w");
    cr_assert(f);
    for (size_t t = 0; t < N; t++)
        for (size_t j = 0; j < nem[t]; j++) fprintf(f, "%d\n", tok[t * (g + 1) + j]);
    fclose(f);
}

static void h5_set(hid_t file, const char *name, hid_t type, const void *data, size_t n)
{
    hsize_t dim = n;
    hid_t sp = H5Screate_simple(1, &dim, NULL);
    hid_t d = H5Dcreate2(file, name, type, sp, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    cr_assert(d >= 0);
    cr_assert(H5Dwrite(d, type, H5S_ALL, H5S_ALL, H5P_DEFAULT, data) >= 0);
    H5Dclose(d);
    H5Sclose(sp);
}

/* kind as int8 codes (strings = 0) or as fixed-length 9-byte strings (strings = 1). */
static void write_h5(const char *path, const int32_t *tok, const uint8_t *nem, size_t N, size_t g, int strings)
{
    size_t rows = 0;
    for (size_t t = 0; t < N; t++) rows += nem[t];
    int64_t *it = malloc(rows * sizeof *it);
    int32_t *pos = malloc(rows * sizeof *pos), *tk = malloc(rows * sizeof *tk);
    int8_t *code = malloc(rows);
    char *str = calloc(rows, 9);
    size_t r = 0;
    for (size_t t = 0; t < N; t++)
        for (size_t j = 0; j < nem[t]; j++, r++) {
            it[r] = (int64_t)(3 * t + 5);
            pos[r] = (int32_t)(j + 1);
            tk[r] = tok[t * (g + 1) + j];
            code[r] = (int8_t)kind_at(j, nem[t], g);
            memcpy(str + 9 * r, kinds[code[r]], strlen(kinds[code[r]]));
        }
    hid_t f = H5Fcreate(path, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    cr_assert(f >= 0);
    h5_set(f, "iteration", H5T_NATIVE_INT64, it, rows);
    h5_set(f, "position", H5T_NATIVE_INT32, pos, rows);
    h5_set(f, "token", H5T_NATIVE_INT32, tk, rows);
    if (strings) {
        hid_t st = H5Tcopy(H5T_C_S1);
        H5Tset_size(st, 9);
        H5Tset_strpad(st, H5T_STR_NULLPAD);
        h5_set(f, "kind", st, str, rows);
        H5Tclose(st);
    } else {
        h5_set(f, "kind", H5T_NATIVE_INT8, code, rows);
    }
    H5Fclose(f);
    free(it), free(pos), free(tk), free(code), free(str);
}

/* Every field of two verify results, doubles bit for bit. */
static void assert_same_result(const sl_verify_result *a, const sl_verify_result *b, const char *what)
{
    cr_assert_eq(a->rule, b->rule, "%s", what);
    cr_assert_eq(a->iterations, b->iterations, "%s", what);
    cr_assert_eq(a->tokens, b->tokens, "%s", what);
    cr_assert_eq(a->n_rows, b->n_rows, "%s", what);
    cr_assert_eq(a->n_tests, b->n_tests, "%s", what);
    cr_assert_eq(a->n_rejected, b->n_rejected, "%s", what);
    cr_assert_eq(a->rejected, b->rejected, "%s", what);
    cr_assert_eq(a->n_tokens, b->n_tokens, "%s", what);
    const double da[] = {a->lenience, a->level, a->tv_delta, a->min_p_holm, a->min_p, a->power_level,
                         a->lenience_excess, a->max_freq_ratio};
    const double db[] = {b->lenience, b->level, b->tv_delta, b->min_p_holm, b->min_p, b->power_level,
                         b->lenience_excess, b->max_freq_ratio};
    for (size_t i = 0; i < sizeof da / sizeof *da; i++) cr_assert(same_double(da[i], db[i]), "%s: summary field %zu", what, i);
    for (size_t i = 0; i < a->n_rows; i++) {
        const sl_verify_test *x = &a->test[i], *y = &b->test[i];
        cr_assert_str_eq(x->name, y->name, "%s", what);
        cr_assert_str_eq(x->null, y->null, "%s", what);
        cr_assert_str_eq(x->method, y->method, "%s", what);
        cr_assert(x->n == y->n && x->n_b == y->n_b && x->categories == y->categories && x->cells == y->cells &&
                      x->reject == y->reject && x->degenerate == y->degenerate,
                  "%s: test %s counts", what, x->name);
        const double ta[] = {x->df, x->pearson, x->p_pearson, x->g, x->p_g, x->p_small, x->p_value, x->p_random,
                             x->p_holm, x->tv, x->tv_lo, x->tv_hi, x->power};
        const double tb[] = {y->df, y->pearson, y->p_pearson, y->g, y->p_g, y->p_small, y->p_value, y->p_random,
                             y->p_holm, y->tv, y->tv_lo, y->tv_hi, y->power};
        for (size_t j = 0; j < sizeof ta / sizeof *ta; j++)
            cr_assert(same_double(ta[j], tb[j]), "%s: test %s field %zu: %.17g vs %.17g", what, x->name, j, ta[j], tb[j]);
    }
    for (size_t x = 0; x < a->n_tokens; x++)
        cr_assert(memcmp(&a->token[x], &b->token[x], sizeof a->token[x]) == 0, "%s: lenience token %zu", what, x);
}

static void check_roundtrip(sl_mc_family fam, size_t V, size_t g, sl_rule rule, size_t N)
{
    sl_mc_plan *plan = family_plan(fam, V, g, rule);
    int32_t *tok;
    uint8_t *nem;
    const uint64_t seed = 7;
    capture(plan, N, seed, &tok, &nem);
    sl_verify_opts o = SL_VERIFY_OPTS_DEFAULT;
    o.iterations = N;
    o.seed = seed;
    o.threads = 1;
    sl_verify_result *ref, *got;
    cr_assert_eq(sl_verify_samples(plan, tok, nem, N, &o, &ref), SL_OK, "%s", sl_errmsg());
    write_csv(at("s.csv"), tok, nem, N, g);
    write_h5(at("codes.h5"), tok, nem, N, g, 0);
    write_h5(at("strings.h5"), tok, nem, N, g, 1);
    const char *files[] = {at("s.csv"), at("codes.h5"), at("strings.h5")};
    const sl_samples_format want[] = {SL_SAMPLES_CSV, SL_SAMPLES_HDF5, SL_SAMPLES_HDF5};
    for (int i = 0; i < 3; i++) {
        sl_samples *s;
        cr_assert_eq(sl_samples_read(files[i], SL_SAMPLES_AUTO, V, g, &s), SL_OK, "%s", sl_errmsg());
        cr_assert_eq(s->format, want[i]);
        cr_assert_eq(s->n, N);
        cr_assert_eq(memcmp(s->nem, nem, N), 0, "%s: emitted counts differ", files[i]);
        for (size_t t = 0; t < N; t++)
            cr_assert_eq(memcmp(s->tok + t * (g + 1), tok + t * (g + 1), nem[t] * sizeof *tok), 0, "%s: iteration %zu",
                         files[i], t);
        cr_assert_eq(sl_verify_samples(plan, s->tok, s->nem, s->n, &o, &got), SL_OK, "%s", sl_errmsg());
        assert_same_result(ref, got, files[i]);
        sl_verify_result_free(got);
        sl_samples_free(s);
    }
    if (fam != SL_FAMILY_POSITIONAL) {
        /* ids: the stream tests only, with the statistics of the run's stream tests. */
        write_ids(at("s.ids"), tok, nem, N, g);
        sl_samples *s;
        cr_assert_eq(sl_samples_read(at("s.ids"), SL_SAMPLES_AUTO, V, g, &s), SL_OK, "%s", sl_errmsg());
        cr_assert_eq(s->format, SL_SAMPLES_IDS);
        cr_assert_null(s->nem);
        cr_assert_eq(s->tokens, ref->tokens);
        cr_assert_eq(sl_verify_samples(plan, s->tok, NULL, s->n, &o, &got), SL_OK, "%s", sl_errmsg());
        cr_assert_eq(got->n_rows, 3);
        for (size_t i = 0; i < 3; i++) {
            const sl_verify_test *x = &got->test[i], *y = &ref->test[ref->n_rows - 3 + i];
            cr_assert_str_eq(x->name, y->name);
            cr_assert(x->n == y->n && same_double(x->pearson, y->pearson) && same_double(x->p_value, y->p_value),
                      "ids: test %s", x->name);
        }
        sl_verify_result_free(got);
        sl_samples_free(s);
    }
    sl_verify_result_free(ref);
    free(tok);
    free(nem);
    sl_mc_plan_free(plan);
}

Test(samples, written_and_read_back_gives_the_builtin_result)
{
    mk_dir();
    check_roundtrip(SL_FAMILY_NOISY, 6, 3, SL_RULE_EXACT, 5000);
    check_roundtrip(SL_FAMILY_NOISY, 5, 2, SL_RULE_SAMPLER_MATCH, 3000);
    check_roundtrip(SL_FAMILY_POSITIONAL, 5, 3, SL_RULE_EXACT, 4000);
    /* A wrong variant is rejected through the file as it is by the run. */
    check_roundtrip(SL_FAMILY_NOISY, 4, 2, SL_BUG_SHARED_UNIFORM, 20000);
    rm_dir();
}

/* One bad file: SL_EINPUT and a message starting "PATH:LINE: " that contains words. */
static void bad(const char *content, sl_samples_format fmt, size_t line, const char *words)
{
    const char *p = at("bad.csv");
    write_file(p, content, strlen(content));
    sl_samples *s = NULL;
    int rc = sl_samples_read(p, fmt, 4, 3, &s);
    char want[300];
    snprintf(want, sizeof want, "%s:%zu: ", p, line);
    cr_assert_eq(rc, SL_EINPUT, "'%s': rc %d", content, rc);
    cr_assert_null(s);
    cr_assert(strncmp(sl_errmsg(), want, strlen(want)) == 0 && strstr(sl_errmsg(), words),
              "'%s': message '%s', wanted '%s' ... '%s'", content, sl_errmsg(), want, words);
    cr_assert_null(strchr(sl_errmsg(), '\n'), "one line");
}

#define H "iteration,position,token,kind\n"

Test(samples, each_rule_gives_a_one_line_error_with_the_line)
{
    mk_dir();
    bad("", SL_SAMPLES_AUTO, 1, "empty file");
    bad("", SL_SAMPLES_CSV, 1, "empty file");
    bad(H, SL_SAMPLES_AUTO, 1, "no samples");
    bad("iteration,position,token\n", SL_SAMPLES_CSV, 1, "expected the header");
    bad(H "0,1,1,rejected\n", SL_SAMPLES_AUTO, 2, "kind 'rejected'");
    bad(H "0,1,1,Accepted\n", SL_SAMPLES_AUTO, 2, "kind 'Accepted'");
    bad(H "0,1,4,resampled\n", SL_SAMPLES_AUTO, 2, "token 4 outside [0, 4)");
    bad(H "0,1,-2,resampled\n", SL_SAMPLES_AUTO, 2, "token -2 outside");
    bad(H "0,2,1,resampled\n", SL_SAMPLES_AUTO, 2, "position 2, expected 1");
    bad(H "0,1,1,accepted\n0,1,1,resampled\n", SL_SAMPLES_AUTO, 3, "position 1, expected 2");
    bad(H "0,1,1,accepted\n0,2,1,accepted\n0,3,1,accepted\n0,4,1,accepted\n", SL_SAMPLES_AUTO, 5, "accepted at position 4 > gamma = 3");
    bad(H "0,1,1,accepted\n0,2,1,accepted\n0,3,1,accepted\n0,4,1,resampled\n", SL_SAMPLES_AUTO, 5, "resampled at position 4");
    bad(H "0,1,1,bonus\n", SL_SAMPLES_AUTO, 2, "bonus at position 1, expected gamma + 1 = 4");
    bad(H "2,1,1,resampled\n1,1,1,resampled\n", SL_SAMPLES_AUTO, 3, "ids must increase");
    bad(H "2,1,1,resampled\n2,1,1,resampled\n", SL_SAMPLES_AUTO, 3, "after its resampled row");
    bad(H "0,1,1,accepted\n1,1,1,resampled\n", SL_SAMPLES_AUTO, 3, "iteration 0 (from line 2) has no resampled or bonus row");
    bad(H "0,1,1,resampled\n7,1,1,accepted", SL_SAMPLES_AUTO, 3, "iteration 7 (from line 3) ends with the file");
    bad(H "0,1,1,resampled,\n", SL_SAMPLES_AUTO, 2, "5 fields, expected 4");
    bad(H "0,1,1\n", SL_SAMPLES_AUTO, 2, "3 fields");
    bad(H "0,1,x1,resampled\n", SL_SAMPLES_AUTO, 2, "token 'x1' is not an integer");
    bad(H "0,,1,resampled\n", SL_SAMPLES_AUTO, 2, "position '' is not an integer");
    bad(H "-3,1,1,resampled\n", SL_SAMPLES_AUTO, 2, "iteration -3 is negative");
    bad(H "1234567890123456789,1,1,resampled\n", SL_SAMPLES_AUTO, 2, "too large");
    bad(H "0,1,1,resampled\n0\x01,1,1,resampled\n", SL_SAMPLES_AUTO, 3, "'0?' is not an integer");
    bad("1\n2\n4\n", SL_SAMPLES_AUTO, 3, "token 4 outside");
    bad("1\n2\n1 2\n", SL_SAMPLES_IDS, 3, "'1 2' is not a token id");
    bad("\n\n", SL_SAMPLES_IDS, 2, "no token ids");
    bad(H "0,1,1,resampled\n", SL_SAMPLES_IDS, 1, "a CSV file starts with the header");
    /* A NUL byte inside a field. */
    const char nul[] = H "0,1,1\0,resampled\n";
    write_file(at("nul.csv"), nul, sizeof nul - 1);
    sl_samples *s = NULL;
    cr_assert_eq(sl_samples_read(at("nul.csv"), SL_SAMPLES_AUTO, 4, 3, &s), SL_EINPUT);
    cr_assert(strstr(sl_errmsg(), "nul.csv:2: token '1?' is not an integer"), "%s", sl_errmsg());
    /* An overlong line. */
    size_t n = 10000;
    char *longl = malloc(n + 1);
    memset(longl, '7', n);
    longl[n] = 0;
    write_file(at("long.ids"), longl, n);
    cr_assert_eq(sl_samples_read(at("long.ids"), SL_SAMPLES_AUTO, 4, 3, &s), SL_EINPUT);
    cr_assert(strstr(sl_errmsg(), "long.ids:1: line longer than"), "%s", sl_errmsg());
    free(longl);
    /* Not a file; not HDF5; missing. */
    cr_assert_eq(sl_samples_read(dir, SL_SAMPLES_AUTO, 4, 3, &s), SL_EINPUT);
    cr_assert_eq(sl_samples_read(at("nul.csv"), SL_SAMPLES_HDF5, 4, 3, &s), SL_EINPUT);
    cr_assert(strstr(sl_errmsg(), "is not an HDF5 file"), "%s", sl_errmsg());
    cr_assert_eq(sl_samples_read(at("missing"), SL_SAMPLES_AUTO, 4, 3, &s), SL_EINPUT);
    rm_dir();
}

Test(samples, tolerated_variants_read_the_same)
{
    mk_dir();
    /* CRLF, no final newline, blank lines, spaces around fields, a byte order mark, gaps in ids;
     * gamma = 3: one rejection at position 2, then a full iteration with its bonus. */
    const char *variants[] = {
        H "0,1,2,accepted\n0,2,3,resampled\n1,1,0,accepted\n1,2,1,accepted\n1,3,2,accepted\n1,4,3,bonus\n",
        "iteration,position,token,kind\r\n0,1,2,accepted\r\n0,2,3,resampled\r\n1,1,0,accepted\r\n1,2,1,accepted\r\n"
        "1,3,2,accepted\r\n1,4,3,bonus",
        "\xEF\xBB\xBF" H "\n0, 1, 2, accepted\n0,2,3,resampled \n\n9,1,0,accepted\n9,2,1,accepted\n9,3,2,accepted\n9,4,3,bonus\n\n",
    };
    const int32_t want_tok[] = {2, 3, -1, -1, 0, 1, 2, 3};
    const uint8_t want_nem[] = {2, 4};
    for (size_t i = 0; i < 3; i++) {
        write_file(at("v.csv"), variants[i], strlen(variants[i]));
        sl_samples *s;
        cr_assert_eq(sl_samples_read(at("v.csv"), SL_SAMPLES_AUTO, 4, 3, &s), SL_OK, "variant %zu: %s", i, sl_errmsg());
        cr_assert_eq(s->format, SL_SAMPLES_CSV);
        cr_assert_eq(s->n, 2);
        cr_assert_eq(s->tokens, 6);
        cr_assert_eq(memcmp(s->tok, want_tok, sizeof want_tok), 0, "variant %zu", i);
        cr_assert_eq(memcmp(s->nem, want_nem, sizeof want_nem), 0, "variant %zu", i);
        sl_samples_free(s);
    }
    rm_dir();
}

/* Reads every truncation and `edits` random edits (1 to 3 bytes set to random values) of a good
 * file; each must be SL_OK with values in range or SL_EINPUT. */
static void fuzz(const char *good, sl_samples_format fmt, size_t V, size_t g, size_t step, size_t edits, uint64_t seed)
{
    size_t n;
    char *b = slurp(good, &n);
    char *m = malloc(n);
    const char *p = at("fuzz");
    size_t ok = 0, bad_input = 0;
    gsl_rng *r = gsl_rng_alloc(gsl_rng_mt19937);
    gsl_rng_set(r, seed);
    for (size_t trial = 0; trial < n / step + 1 + edits; trial++) {
        size_t len = n;
        memcpy(m, b, n);
        if (trial <= n / step) {
            len = trial * step;
        } else {
            int k = 1 + (int)gsl_rng_uniform_int(r, 3);
            for (int j = 0; j < k; j++) m[gsl_rng_uniform_int(r, n)] = (char)gsl_rng_uniform_int(r, 256);
        }
        write_file(p, m, len);
        sl_samples *s = NULL;
        int rc = sl_samples_read(p, fmt, V, g, &s);
        cr_assert(rc == SL_OK || rc == SL_EINPUT, "trial %zu: rc %d (%s)", trial, rc, sl_errmsg());
        if (rc == SL_OK) {
            ok++;
            for (size_t t = 0; t < s->n; t++) {
                size_t k = s->nem ? s->nem[t] : 1;
                cr_assert(k >= 1 && k <= g + 1);
                for (size_t j = 0; j < k; j++) {
                    int32_t x = s->nem ? s->tok[t * (g + 1) + j] : s->tok[t];
                    cr_assert(x >= 0 && (size_t)x < V);
                }
            }
        } else {
            bad_input++;
            cr_assert_null(strchr(sl_errmsg(), '\n'), "one line: %s", sl_errmsg());
        }
        sl_samples_free(s);
    }
    cr_log_info("fuzz %s: %zu read, %zu rejected as bad input", good, ok, bad_input);
    gsl_rng_free(r);
    free(m);
    free(b);
}

Test(samples, truncated_or_corrupted_files_never_crash)
{
    mk_dir();
    sl_mc_plan *plan = family_plan(SL_FAMILY_NOISY, 5, 3, SL_RULE_EXACT);
    int32_t *tok;
    uint8_t *nem;
    const size_t N = 40;
    capture(plan, N, 3, &tok, &nem);
    write_csv(at("good.csv"), tok, nem, N, 3);
    write_ids(at("good.ids"), tok, nem, N, 3);
    write_h5(at("good.h5"), tok, nem, N, 3, 1);
    fuzz(at("good.csv"), SL_SAMPLES_AUTO, 5, 3, 1, 3000, 11);
    fuzz(at("good.csv"), SL_SAMPLES_CSV, 5, 3, 1, 1000, 12);
    fuzz(at("good.ids"), SL_SAMPLES_AUTO, 5, 3, 1, 1000, 13);
    fuzz(at("good.h5"), SL_SAMPLES_AUTO, 5, 3, 97, 300, 14);
    free(tok);
    free(nem);
    sl_mc_plan_free(plan);
    rm_dir();
}
