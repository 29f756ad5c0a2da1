/*
 * cmd_verify.c: `speclab verify`: statistical test that a speculative sampler preserves the
 * target distribution (analysis/sl_verify.h), and `--power` sample-size planning.
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli_family.h"
#include "sl_cli.h"
#include "sl_mc.h"
#include "sl_stats.h"
#include "sl_verify.h"

static void usage(FILE *f)
{
    fprintf(f,
            "usage: speclab verify [--family F | --p LIST --q LIST] [options]\n"
            "       speclab verify --power --tv DELTA [--level A] [--df K | --vocab V]\n"
            "Runs the speculative sampler on a context-free synthetic pair and tests the emitted tokens\n"
            "against the known target pmf: per output position (first token, k-th token, bonus token,\n"
            "the token after a rejection), every token, and 2- and 3-token blocks; Pearson chi^2 and G\n"
            "with pooling, exact or Monte Carlo multinomial p-values for small counts, Holm over all\n"
            "tests, TV with a CI, and the power reached against TV = --tv.\n"
            "Exit status: 0 consistent with lossless, 1 rejected (not lossless), 2 bad input.\n\n"
            "  --family F          identical | noisy | dirichlet | zipf | disjoint | positional (default noisy)\n"
            "  --p LIST --q LIST   an explicit pair, comma-separated probabilities (same length)\n"
            "  --vocab V           family vocabulary size (default 8)\n"
            "  --gamma G           drafts per iteration, 1..64 (default 3)\n"
            "  --iterations N      iterations (default 200000: see README for what it detects)\n"
            "  --seed S            seed (default 1)\n"
            "  --noise E --concentration A --zipf-s S --temp-p T --temp-q T   family parameters (as mc)\n"
            "  --rule R            exact | lenient | lenient-t0 | sampler-match | bug-draft-argmax |\n"
            "                      bug-draft-topk | bug-residual-paired | bug-resample-from-p |\n"
            "                      bug-lowprec-draft | bug-p-inplace | bug-shared-uniform (default exact)\n"
            "  --lenience L        l in (0, 1] (default 1)\n"
            "  --bug-k K           k of the top-k wrong variants (default 1)\n"
            "  --level A           family-wise level of the verdict (default 0.01)\n"
            "  --tv DELTA          deviation for the power statement (default 0.05)\n"
            "  --two-sample        compare with plain target samples instead of the known pmf\n"
            "  --power             only print the n needed for power 0.9 against --tv at --level\n"
            "  --df K              degrees of freedom for --power (default vocab - 1)\n"
            "  --replications R    self-check: R independent runs (seeds S..S+R-1); KS test of each test's\n"
            "                      p-values against U(0,1)\n"
            "  --mc-sims M         Monte Carlo multinomial draws for small counts (default 20000)\n"
            "  --threads T         OpenMP threads, 0 = all; output is identical for any T\n"
            "  --format F          table | csv | json (default table)\n");
}

/* Parses "a,b,c" into a malloc'd vector. */
static int parse_list(const char *flag, const char *s, double **out, size_t *n)
{
    size_t cap = 1;
    for (const char *c = s; *c; c++) cap += *c == ',';
    double *v = sl_malloc(cap * sizeof *v);
    char *buf = sl_malloc(strlen(s) + 1);
    if (!v || !buf) {
        free(v);
        free(buf);
        return SL_EFAIL;
    }
    strcpy(buf, s);
    size_t k = 0;
    char *save = NULL;
    for (char *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        int rc = sl_cli_double(flag, tok, &v[k]);
        if (rc) {
            free(v);
            free(buf);
            return rc;
        }
        k++;
    }
    free(buf);
    if (k < 2) {
        free(v);
        return sl_fail(SL_EINPUT, "%s: '%s' has %zu entries, expected at least 2", flag, s, k);
    }
    *out = v;
    *n = k;
    return SL_OK;
}

int sl_cmd_verify(int argc, char **argv)
{
    static const struct option opts[] = {
        {"family", required_argument, 0, 'f'},   {"vocab", required_argument, 0, 'V'},
        {"gamma", required_argument, 0, 'g'},    {"iterations", required_argument, 0, 'n'},
        {"seed", required_argument, 0, 's'},     {"noise", required_argument, 0, 'e'},
        {"concentration", required_argument, 0, 'a'}, {"zipf-s", required_argument, 0, 'z'},
        {"temp-p", required_argument, 0, 'P'},   {"temp-q", required_argument, 0, 'Q'},
        {"rule", required_argument, 0, 'r'},     {"lenience", required_argument, 0, 'l'},
        {"bug-k", required_argument, 0, 'K'},    {"level", required_argument, 0, 'A'},
        {"tv", required_argument, 0, 'T'},       {"two-sample", no_argument, 0, '2'},
        {"power", no_argument, 0, 'W'},          {"df", required_argument, 0, 'd'},
        {"mc-sims", required_argument, 0, 'm'},  {"threads", required_argument, 0, 't'},
        {"format", required_argument, 0, 'F'},   {"p", required_argument, 0, 'p'},
        {"q", required_argument, 0, 'q'},        {"help", no_argument, 0, 'H'},
        {"replications", required_argument, 0, 'R'},
        {0, 0, 0, 0},
    };
    sl_mc_family_params fp = SL_MC_FAMILY_DEFAULT;
    fp.V = 8;
    fp.gamma = 3;
    sl_spec_config cfg = SL_SPEC_CONFIG_DEFAULT;
    sl_verify_opts vo = SL_VERIFY_OPTS_DEFAULT;
    sl_format fmt = SL_FMT_TABLE;
    long iterations = (long)vo.iterations, threads = 0, df = 0, sims = (long)vo.mc_sims, reps = 0;
    int power_only = 0, have_family = 0, rc = SL_OK;
    double *pv = NULL, *qv = NULL;
    size_t np = 0, nq = 0;
    optind = 1;
    opterr = 0;
    int c;
    while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        if (sl_cli_family_option(c, optarg, &fp, &cfg, &have_family, &rc)) {
            if (rc) goto out;
            continue;
        }
        switch (c) {
        case 'n': rc = sl_cli_long_in("--iterations", optarg, 1, 1L << 34, &iterations); break;
        case 'A': rc = sl_cli_double_in("--level", optarg, 0, 1, 1, 1, &vo.level); break;
        case 'T': rc = sl_cli_double_in("--tv", optarg, 0, 1, 1, 0, &vo.tv_delta); break;
        case '2': vo.two_sample = 1; break;
        case 'W': power_only = 1; break;
        case 'd': rc = sl_cli_long_in("--df", optarg, 1, 1L << 30, &df); break;
        case 'm': rc = sl_cli_long_in("--mc-sims", optarg, 100, 100000000, &sims); break;
        case 't': rc = sl_cli_long_in("--threads", optarg, 0, 1024, &threads); break;
        case 'F': rc = sl_format_parse(optarg, &fmt); break;
        case 'p': free(pv); pv = NULL; rc = parse_list("--p", optarg, &pv, &np); break;
        case 'q': free(qv); qv = NULL; rc = parse_list("--q", optarg, &qv, &nq); break;
        case 'R': rc = sl_cli_long_in("--replications", optarg, 2, 1000000, &reps); break;
        case 'H': usage(stdout); free(pv); free(qv); return 0;
        default:
            rc = sl_fail(SL_EINPUT, "unknown or incomplete option '%s' (speclab verify --help)", argv[optind - 1]);
        }
        if (rc) goto out;
    }
    if (optind < argc) {
        rc = sl_fail(SL_EINPUT, "unexpected argument '%s' (speclab verify --help)", argv[optind]);
        goto out;
    }
    vo.iterations = (size_t)iterations;
    vo.seed = fp.seed;
    vo.threads = (int)threads;
    vo.mc_sims = (size_t)sims;
    if (power_only) {
        sl_table *t = NULL;
        double d = df > 0 ? (double)df : (double)((pv ? np : fp.V) - 1);
        if ((rc = sl_verify_power_table(vo.tv_delta, d, vo.level, 0.9, &t))) goto out;
        if (sl_table_write(t, stdout, fmt)) rc = sl_fail(SL_EFAIL, "writing to stdout failed");
        sl_table_free(t);
        goto out;
    }
    if ((pv != NULL) != (qv != NULL)) {
        rc = sl_fail(SL_EINPUT, "--p and --q: give both or neither");
        goto out;
    }
    if (pv && have_family) {
        rc = sl_fail(SL_EINPUT, "--family and --p/--q: give one of them");
        goto out;
    }
    if (pv && np != nq) {
        rc = sl_fail(SL_EINPUT, "--p has %zu entries but --q has %zu: the vocabularies must match", np, nq);
        goto out;
    }

    sl_mc_rows *rows = NULL;
    sl_mc_plan *plan = NULL;
    sl_table *tables[4] = {0};
    size_t nt = 0;
    if (pv) {
        if ((rc = sl_dist_check(pv, np, SL_DIST_SUM_TOL, "--p")) || (rc = sl_dist_check(qv, nq, SL_DIST_SUM_TOL, "--q")))
            goto out;
        rows = sl_mc_rows_alloc(np, 1, SL_MC_IID);
        if (!rows) { rc = SL_EFAIL; goto out; }
        memcpy(rows->p, pv, np * sizeof *pv);
        memcpy(rows->q, qv, nq * sizeof *qv);
    } else if ((rc = sl_mc_family_rows(&fp, &rows))) {
        goto out;
    }
    sl_mc_source src = sl_mc_rows_source(rows);
    sl_verify_summary sum;
    if (reps > 0) {
        /* Self-check: are the p-values uniform under this sampler? */
        double ks_min;
        if (!(rc = sl_mc_plan_alloc(&src, fp.gamma, &cfg, &plan)) &&
            !(rc = sl_verify_uniformity(plan, &vo, (size_t)reps, &tables[0], &ks_min))) {
            if (sl_table_write(tables[0], stdout, fmt)) rc = sl_fail(SL_EFAIL, "writing the report to stdout failed");
            sl_table_free(tables[0]);
        }
        sl_mc_plan_free(plan);
        sl_mc_rows_free(rows);
        goto out;
    }
    if (!(rc = sl_mc_plan_alloc(&src, fp.gamma, &cfg, &plan)) && !(rc = sl_verify_run(plan, &vo, tables, &nt, &sum))) {
        if (sl_report_write(tables, nt, stdout, fmt)) rc = sl_fail(SL_EFAIL, "writing the report to stdout failed");
        else if (sum.rejected)
            rc = sl_fail(SL_EFAIL, "not lossless: %zu of %zu tests rejected at family-wise level %g (min Holm p = %.3g)",
                         sum.n_rejected, sum.n_tests, vo.level, sum.min_p_holm);
    }
    for (size_t i = 0; i < nt; i++) sl_table_free(tables[i]);
    sl_mc_plan_free(plan);
    sl_mc_rows_free(rows);
out:
    free(pv);
    free(qv);
    return rc;
}
