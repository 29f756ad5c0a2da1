/* test_cli_table.c: the named-column table interface (sticky errors, readers) and the option
 * registry (ranges, required options, positional arguments, the flag a quantity maps to). */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>

#include "sl_cli.h"
#include "sl_table.h"

Test(table, named_columns_set_and_read)
{
    static const sl_colspec cols[] = {SL_COL_D("alpha", "%.3f"), SL_COL_I("gamma"), SL_COL_S("method")};
    sl_table *t = SL_TABLE_NEW("t", cols);
    cr_assert_not_null(t);
    sl_table_row(t);
    sl_table_setd(t, "alpha", 0.25);
    sl_table_seti(t, "gamma", 4);
    sl_table_setf(t, "method", "replay %d", 2);
    sl_table_row(t);
    sl_table_setd(t, "alpha", NAN);
    cr_assert_eq(sl_table_status(t), SL_OK);
    double a, g;
    cr_assert_eq(sl_table_getd(t, 0, "alpha", &a), SL_OK);
    cr_assert_eq(sl_table_getd(t, 0, "gamma", &g), SL_OK);
    cr_assert(a == 0.25 && g == 4.0);
    cr_assert_str_eq(sl_table_gets(t, 0, "method"), "replay 2");
    cr_assert_eq(sl_table_getd(t, 1, "alpha", &a), SL_OK);
    cr_assert(isnan(a), "a null cell reads as NaN");
    cr_assert_null(sl_table_gets(t, 1, "method"));
    cr_assert_eq(sl_table_getd(t, 2, "alpha", &a), SL_EINPUT, "row out of range");
    cr_assert_eq(sl_table_getd(t, 0, "method", &a), SL_EINPUT, "a string column is not numeric");
    sl_table_free(t);
}

Test(table, first_failure_is_sticky_and_blocks_output)
{
    static const sl_colspec cols[] = {SL_COL_D("alpha", NULL), SL_COL_I("gamma")};
    sl_table *t = SL_TABLE_NEW("t", cols);
    cr_assert_eq(sl_table_setd(t, "alpha", 1), SL_EFAIL, "a set before any row fails");
    cr_assert_eq(sl_table_status(t), SL_EFAIL);
    sl_table_free(t);

    t = SL_TABLE_NEW("t", cols);
    sl_table_row(t);
    cr_assert_eq(sl_table_setd(t, "alhpa", 1), SL_EFAIL, "a misspelt column fails");
    cr_assert(strstr(sl_errmsg(), "alhpa") != NULL, "%s", sl_errmsg());
    cr_assert_eq(sl_table_seti(t, "gamma", 3), SL_EFAIL, "later calls are no-ops returning the status");
    FILE *f = tmpfile();
    cr_assert_eq(sl_table_write(t, f, SL_FMT_CSV), SL_EFAIL);
    cr_assert_eq(ftell(f), 0, "nothing written for a failed table");
    sl_table *arr[1] = {t};
    cr_assert_eq(sl_report_write(arr, 1, f, SL_FMT_JSON), SL_EFAIL);
    cr_assert_eq(ftell(f), 0);
    fclose(f);
    sl_table_free(t);

    t = SL_TABLE_NEW("t", cols);
    sl_table_row(t);
    cr_assert_eq(sl_table_seti(t, "alpha", 1), SL_EFAIL, "a cell of another type fails");
    sl_table_free(t);
    cr_assert_eq(sl_table_status(NULL), SL_EFAIL);
    cr_assert_eq(sl_table_setd(NULL, "alpha", 1), SL_EFAIL);
}

Test(table, report_find)
{
    static const sl_colspec cols[] = {SL_COL_I("n")};
    sl_table *a = SL_TABLE_NEW("a", cols), *b = SL_TABLE_NEW("b", cols);
    sl_table *r[2] = {a, b};
    cr_assert_eq(sl_report_find(r, 2, "b"), b);
    cr_assert_null(sl_report_find(r, 2, "c"));
    sl_table_free(a);
    sl_table_free(b);
}

typedef struct {
    long tokens;
    double ci;
    int quiet;
    const char *out;
    uint64_t seed;
    int threads;
    sl_sampling s;
    sl_spec_config cfg;
    sl_format fmt;
} toy_opts;

static int toy_parse(toy_opts *o, sl_cli *c, int argc, char **argv, size_t max_pos)
{
    *o = (toy_opts){.tokens = 7, .ci = 0.95, .seed = 1, .s = SL_SAMPLING_DEFAULT, .cfg = SL_SPEC_CONFIG_DEFAULT};
    sl_cli_init(c, "toy", "[options] FILE", "A toy command.\n");
    sl_cli_long(c, "tokens", "N", &o->tokens, 1, 100, "tokens");
    sl_cli_dbl(c, "ci", "L", &o->ci, 0, 1, SL_OPT_LO_OPEN | SL_OPT_HI_OPEN, "level");
    sl_cli_flag(c, "quiet", &o->quiet, "no progress");
    sl_cli_string(c, "out", "FILE", &o->out, "output");
    c->opt[c->n - 1].flags |= SL_OPT_REQUIRED;
    sl_cli_group_seed(c, &o->seed, &o->threads);
    sl_cli_group_sampling(c, &o->s);
    sl_cli_group_rule(c, &o->cfg);
    sl_cli_group_format(c, &o->fmt);
    return sl_cli_parse(c, argc, argv, max_pos);
}

Test(cli, registry_parses_groups_ranges_and_positionals)
{
    toy_opts o;
    sl_cli c;
    char *ok[] = {"toy", "a.h5", "--tokens", "12", "--out", "x", "--temperature", "0.5", "--rule", "lenient",
                  "--lenience", "0.9", "--format", "json", "--seed", "9", "--threads", "2", "--quiet", "b.h5", NULL};
    cr_assert_eq(toy_parse(&o, &c, 20, ok, 2), SL_OK, "%s", sl_errmsg());
    cr_assert(o.tokens == 12 && o.s.temperature == 0.5 && o.cfg.rule == SL_RULE_LENIENT && o.cfg.lenience == 0.9);
    cr_assert(o.fmt == SL_FMT_JSON && o.seed == 9 && o.threads == 2 && o.quiet == 1);
    cr_assert(c.n_pos == 2 && !strcmp(c.pos[0], "a.h5") && !strcmp(c.pos[1], "b.h5"));
    cr_assert(sl_cli_given(&c, "tokens") && !sl_cli_given(&c, "ci"));
    char flag[64];
    cr_assert_str_eq(sl_cli_flag_for("top_p", flag, sizeof flag), "--top-p");
    cr_assert_null(sl_cli_flag_for("nothing", flag, sizeof flag));

    char *range[] = {"toy", "--out", "x", "--tokens", "101", NULL};
    cr_assert_eq(toy_parse(&o, &c, 5, range, 1), SL_EINPUT);
    cr_assert(strstr(sl_errmsg(), "--tokens") != NULL, "%s", sl_errmsg());
    char *open_end[] = {"toy", "--out", "x", "--ci", "1", NULL};
    cr_assert_eq(toy_parse(&o, &c, 5, open_end, 1), SL_EINPUT);
    char *missing[] = {"toy", "--tokens", "3", NULL};
    cr_assert_eq(toy_parse(&o, &c, 3, missing, 1), SL_EINPUT);
    cr_assert(strstr(sl_errmsg(), "--out is required") != NULL, "%s", sl_errmsg());
    char *unknown[] = {"toy", "--out", "x", "--bogus", NULL};
    cr_assert_eq(toy_parse(&o, &c, 4, unknown, 1), SL_EINPUT);
    cr_assert(strstr(sl_errmsg(), "unknown option '--bogus'") != NULL, "%s", sl_errmsg());
    char *novalue[] = {"toy", "--out", NULL};
    cr_assert_eq(toy_parse(&o, &c, 2, novalue, 1), SL_EINPUT);
    cr_assert(strstr(sl_errmsg(), "needs a value") != NULL, "%s", sl_errmsg());
    char *extra[] = {"toy", "--out", "x", "a", "b", NULL};
    cr_assert_eq(toy_parse(&o, &c, 5, extra, 1), SL_EINPUT);
    cr_assert(strstr(sl_errmsg(), "unexpected argument 'b'") != NULL, "%s", sl_errmsg());
    char *badrule[] = {"toy", "--out", "x", "--rule", "nope", NULL};
    cr_assert_eq(toy_parse(&o, &c, 5, badrule, 1), SL_EINPUT);
}

/* A list option is repeatable, and plain arguments right after its value join it; elsewhere they
 * are positional arguments. */
Test(cli, list_option_collects_values_and_following_arguments)
{
    sl_cli c;
    sl_cli_list files = {0};
    const char *out = NULL;
    sl_cli_init(&c, "toy", "--corpus FILE [FILE ...]", "");
    sl_cli_list_opt(&c, "corpus", "FILE", &files, "corpus files");
    sl_cli_string(&c, "out", "FILE", &out, "output");
    char *argv[] = {"toy", "lead.txt", "--corpus", "a", "b", "--out", "o", "p", "--corpus=c", "d", NULL};
    cr_assert_eq(sl_cli_parse(&c, 10, argv, 2), SL_OK, "%s", sl_errmsg());
    cr_assert_eq(files.n, 4);
    cr_assert(!strcmp(files.v[0], "a") && !strcmp(files.v[1], "b") && !strcmp(files.v[2], "c") && !strcmp(files.v[3], "d"));
    cr_assert(c.n_pos == 2 && !strcmp(c.pos[0], "lead.txt") && !strcmp(c.pos[1], "p"));
    cr_assert_str_eq(out, "o");
    sl_cli_list_free(&files);
    cr_assert_null(files.v);
}
