/*
 * cmd_verify_two.c: `speclab verify --two-sample A [B]`: do two samplers produce the same
 * distribution of continuations? Homogeneity tests of two token-sequence files
 * (analysis/sl_verify_two.h). cmd_verify.c routes here when --two-sample is followed by a file.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sl_cli.h"
#include "sl_verify_two.h"

static const char about[] =
    "Compares two sets of token sequences, typically K continuations of one prompt from a\n"
    "speculative engine (A) and K from plain autoregressive sampling (B), with nothing known about\n"
    "the models. With one FILE (a `speclab run --tokens-out` file), A is its speculative lines and B\n"
    "its autoregressive lines. Files: `SEQ MODE t1,t2,...` lines (run --tokens-out) or one sequence\n"
    "per line, ids separated by commas or blanks; '#' lines and blank lines are skipped.\n"
    "Tests (chi^2 and G homogeneity with pooling): length, position_j (token j, j = 1..J), block2 and\n"
    "block3 (the first 2 and 3 tokens as one category), and, with permutation p-values since tokens\n"
    "of one sequence are dependent, block2_all, block3_all (every non-overlapping pair, triple) and\n"
    "all (every token). Holm over all tests, TV with a CI, and the power reached against TV = --tv.\n"
    "See analysis/VERIFY_TWO.md for what each test detects and cannot detect.\n"
    "Exit status: 0 consistent (same distribution), 1 rejected (different), 2 bad input.\n";

static int parse_mode(const char *flag, const char *arg, void *dst)
{
    (void)flag;
    return sl_seqs_mode_parse(arg, dst);
}

int sl_cmd_verify_two(int argc, char **argv)
{
    sl_verify_two_opts vo = SL_VERIFY_TWO_OPTS_DEFAULT;
    sl_seqs_mode ma = SL_SEQS_ANY, mb = SL_SEQS_ANY;
    sl_format fmt = SL_FMT_TABLE;
    int two = 0;
    sl_cli c;
    sl_cli_init(&c, "verify", "--two-sample A B [--mode-a M] [--mode-b M] [options]\n"
                "       speclab verify --two-sample FILE [options]", about);
    sl_cli_flag(&c, "two-sample", &two, "compare two sequence files (or the two modes of one run --tokens-out file)");
    sl_cli_custom(&c, "mode-a", "M", &ma, parse_mode, "lines of A to keep: speculative | autoregressive | any (default any)");
    sl_cli_custom(&c, "mode-b", "M", &mb, parse_mode, "lines of B to keep: speculative | autoregressive | any (default any)");
    sl_cli_dbl(&c, "level", "A", &vo.base.level, 0, 1, SL_OPT_LO_OPEN | SL_OPT_HI_OPEN,
               "family-wise level of the verdict (default 0.01)");
    sl_cli_dbl(&c, "tv", "DELTA", &vo.base.tv_delta, 0, 1, SL_OPT_LO_OPEN,
               "deviation for the power statement (default 0.05)");
    sl_cli_size(&c, "positions", "J", &vo.max_positions, 0, 4096, "position tests at most (default 16)");
    sl_cli_size(&c, "min-sequences", "N", &vo.min_sequences, 1, (size_t)1 << 40,
                "sequences each set needs for a per-sequence test (default 10)");
    sl_cli_size(&c, "permutations", "P", &vo.permutations, 1, 100000000,
                "permutations for block2_all, block3_all, all (default 9999)");
    sl_cli_group_seed(&c, &vo.base.seed, NULL);
    sl_cli_group_format(&c, &fmt);
    int rc = sl_cli_parse(&c, argc, argv, 2);
    sl_seqs *a = NULL, *b = NULL;
    sl_verify_two_result *res = NULL;
    sl_table *tables[2] = {0};
    size_t nt = 0;
    if (rc == -1) return SL_OK;
    if (rc) return rc;
    if (c.n_pos == 0) return sl_fail(SL_EINPUT, "--two-sample: expected A B or one FILE (see speclab verify --help)");
    if (c.n_pos == 1) {
        /* One run --tokens-out file: its speculative lines against its autoregressive ones. */
        if (sl_cli_given(&c, "mode-a") || sl_cli_given(&c, "mode-b"))
            return sl_fail(SL_EINPUT, "--mode-a/--mode-b: only with two files (one FILE compares its two modes)");
        ma = SL_SEQS_SPECULATIVE;
        mb = SL_SEQS_AUTOREGRESSIVE;
    }
    const char *pa = c.pos[0], *pb = c.n_pos == 2 ? c.pos[1] : c.pos[0];
    if (!(rc = sl_seqs_read(pa, ma, &a)) && !(rc = sl_seqs_read(pb, mb, &b)) && !(rc = sl_verify_two_run(a, b, &vo, &res)) &&
        !(rc = sl_verify_two_report(res, tables, &nt))) {
        if (sl_report_write(tables, nt, stdout, fmt)) rc = sl_fail(SL_EFAIL, "writing the report to stdout failed");
        else if (res->core->rejected)
            rc = sl_fail(SL_EFAIL, "different: %zu of %zu tests rejected at family-wise level %g (min Holm p = %.3g)",
                         res->core->n_rejected, res->core->n_tests, vo.base.level, res->core->min_p_holm);
    }
    for (size_t i = 0; i < 2; i++) sl_table_free(tables[i]);
    sl_verify_two_result_free(res);
    sl_seqs_free(a);
    sl_seqs_free(b);
    return rc;
}
