/* test_common.c: error recording, random streams and the table writer. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sl_common.h"
#include "sl_table.h"

Test(common, error_is_one_line_and_returns_code)
{
    int rc = sl_fail(SL_EINPUT, "--alpha: %s\nis bad", "nan");
    cr_assert_eq(rc, SL_EINPUT);
    cr_assert_null(strchr(sl_errmsg(), '\n'));
    cr_assert(strstr(sl_errmsg(), "--alpha: nan") != NULL);
}

Test(common, streams_are_reproducible_and_distinct)
{
    gsl_rng *a = sl_rng_alloc(42, SL_STREAM_DRAFT, 7);
    gsl_rng *b = sl_rng_alloc(42, SL_STREAM_DRAFT, 7);
    gsl_rng *c = sl_rng_alloc(42, SL_STREAM_ACCEPT, 7);
    gsl_rng *d = sl_rng_alloc(42, SL_STREAM_DRAFT, 8);
    int same_ab = 1, same_ac = 1, same_ad = 1;
    for (int i = 0; i < 100; i++) {
        double x = sl_rng_uniform53(a), y = sl_rng_uniform53(b), z = sl_rng_uniform53(c),
               w = sl_rng_uniform53(d);
        same_ab &= x == y;
        same_ac &= x == z;
        same_ad &= x == w;
    }
    cr_assert(same_ab);
    cr_assert(!same_ac);
    cr_assert(!same_ad);
    gsl_rng_free(a);
    gsl_rng_free(b);
    gsl_rng_free(c);
    gsl_rng_free(d);
}

/* The inline generator of hot loops is the gsl_rng stream, bit for bit: same seeding from
 * (seed, stream, item), same outputs. */
Test(common, inline_xoshiro_equals_gsl_stream)
{
    const uint64_t seeds[] = {0, 1, 42, UINT64_MAX};
    for (int k = 0; k < 4; k++)
        for (uint64_t item = 0; item < 300; item += 37) {
            gsl_rng *r = sl_rng_alloc(seeds[k], SL_STREAM_ACCEPT, item);
            sl_xoshiro x;
            sl_xoshiro_seed(&x, seeds[k], SL_STREAM_ACCEPT, item);
            for (int i = 0; i < 1000; i++) {
                double a = sl_rng_uniform53(r), b = sl_xoshiro_uniform53(&x);
                cr_assert_eq(a, b, "seed %llu item %llu draw %d", (unsigned long long)seeds[k],
                             (unsigned long long)item, i);
            }
            gsl_rng_free(r);
        }
}

/* The xoshiro stream's uniforms: mean 1/2 and variance 1/12 to within 5 standard errors
 * (n = 1e6: se(mean) = 2.9e-4, se(var) ~ 7.5e-5). */
Test(common, xoshiro_uniform_moments)
{
    gsl_rng *r = sl_rng_alloc(1, SL_STREAM_DATA, 0);
    double s = 0, s2 = 0;
    const int n = 1000000;
    for (int i = 0; i < n; i++) {
        double u = gsl_rng_uniform(r);
        cr_assert(u >= 0 && u < 1);
        s += u;
        s2 += u * u;
    }
    double mean = s / n, var = s2 / n - mean * mean;
    cr_assert(fabs(mean - 0.5) < 5 * 2.9e-4, "mean %g", mean);
    cr_assert(fabs(var - 1.0 / 12) < 5 * 7.5e-5, "var %g", var);
    gsl_rng_free(r);
}

Test(table, csv_and_json_round_trip_values)
{
    static const sl_colspec cols[] = {SL_COL_D("alpha", "%.3f"), SL_COL_I("gamma"), SL_COL_S("note")};
    sl_table *t = SL_TABLE_NEW("demo", cols);
    sl_table_row(t);
    sl_table_setd(t, "alpha", 0.1);
    sl_table_seti(t, "gamma", 3);
    sl_table_sets(t, "note", "a,\"b\"");
    sl_table_row(t);
    sl_table_setd(t, "alpha", NAN);
    cr_assert_eq(sl_table_status(t), SL_OK);
    char *buf = NULL;
    size_t n = 0;
    FILE *f = open_memstream(&buf, &n);
    sl_table_write(t, f, SL_FMT_CSV);
    fclose(f);
    cr_assert_str_eq(buf, "alpha,gamma,note\n0.10000000000000001,3,\"a,\"\"b\"\"\"\n,,\n");
    free(buf);
    f = open_memstream(&buf, &n);
    sl_table_write(t, f, SL_FMT_JSON);
    fclose(f);
    cr_assert_str_eq(buf, "[{\"alpha\": 0.10000000000000001, \"gamma\": 3, \"note\": \"a,\\\"b\\\"\"},\n"
                          " {\"alpha\": null, \"gamma\": null, \"note\": null}]\n");
    free(buf);
    sl_table_free(t);
}
