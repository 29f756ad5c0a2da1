/*
 * cmd_mc.c: `speclab mc`: Monte Carlo simulation of Algorithm 1 on a synthetic (p, q) family,
 * reported next to the theory (sim/sl_mc.h).
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli_family.h"
#include "sl_cli.h"
#include "sl_mc_report.h"

static void usage(FILE *f)
{
    fprintf(f,
            "usage: speclab mc --family F [options]\n"
            "Simulates speculative decoding (Algorithm 1) on a synthetic draft/target pair and reports\n"
            "acceptance, tokens per iteration, walltime and operation factors next to the theory.\n\n"
            "  --family F          identical | noisy | dirichlet | zipf | disjoint | positional\n"
            "  --vocab V           vocabulary size (default 256)\n"
            "  --gamma G           drafts per iteration, 1..64 (default 4)\n"
            "  --iterations N      iterations to simulate (default 100000)\n"
            "  --seed S            seed of every random stream (default 1)\n"
            "  --noise E           noisy/positional: std of the logit noise (default 0.5; positional\n"
            "                      uses E * i at draft position i)\n"
            "  --concentration A   Dirichlet parameter per token (default 1)\n"
            "  --zipf-s S --temp-p T --temp-q T   Zipf exponent and temperatures (default 1.1, 1, 1.3)\n"
            "  --c C               draft step time / target step time (default 0)\n"
            "  --c-hat H           draft ops per token / target ops per token (default 0)\n"
            "  --v-const X         verification cost v(n) = X for n >= 2 (default v = 1)\n"
            "  --v-slope B         verification cost v(n) = 1 + B (n - 1)\n"
            "  --rule R            exact | lenient | lenient-t0 | sampler-match | bug-... (default exact)\n"
            "  --lenience L        l in (0, 1] for the lenient rules (default 1)\n"
            "  --bug-k K           k of the top-k wrong variants (default 1)\n"
            "  --confidence C      confidence of the intervals (default 0.95)\n"
            "  --reference         run every iteration through sl_spec_draft/sl_spec_verify instead of the\n"
            "                      fused loop of the exact and lenient rules (same output, slower)\n"
            "  --threads T         OpenMP threads, 0 = all (default 0); output is identical for any T\n"
            "  --format F          table | csv | json (default table)\n");
}

int sl_cmd_mc(int argc, char **argv)
{
    static const struct option opts[] = {
        {"family", required_argument, 0, 'f'},   {"vocab", required_argument, 0, 'V'},
        {"gamma", required_argument, 0, 'g'},    {"iterations", required_argument, 0, 'n'},
        {"seed", required_argument, 0, 's'},     {"noise", required_argument, 0, 'e'},
        {"concentration", required_argument, 0, 'a'}, {"zipf-s", required_argument, 0, 'z'},
        {"temp-p", required_argument, 0, 'P'},   {"temp-q", required_argument, 0, 'Q'},
        {"c", required_argument, 0, 'c'},        {"c-hat", required_argument, 0, 'h'},
        {"v-const", required_argument, 0, 'k'},  {"v-slope", required_argument, 0, 'b'},
        {"rule", required_argument, 0, 'r'},     {"lenience", required_argument, 0, 'l'},
        {"bug-k", required_argument, 0, 'K'},    {"confidence", required_argument, 0, 'C'},
        {"threads", required_argument, 0, 't'},  {"format", required_argument, 0, 'F'},
        {"help", no_argument, 0, 'H'},           {"reference", no_argument, 0, 'R'},
        {0, 0, 0, 0},
    };
    sl_mc_family_params fp = SL_MC_FAMILY_DEFAULT;
    sl_spec_config cfg = SL_SPEC_CONFIG_DEFAULT;
    sl_mc_report_costs costs = {0};
    double v_const = 0, v_slope = 0;
    sl_format fmt = SL_FMT_TABLE;
    long iterations = 100000, threads = 0;
    double confidence = 0.95;
    int have_family = 0, reference = 0, rc = SL_OK;
    optind = 1;
    opterr = 0;
    int c;
    while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        if (sl_cli_family_option(c, optarg, &fp, &cfg, &have_family, &rc)) {
            if (rc) return rc;
            continue;
        }
        switch (c) {
        case 'n': rc = sl_cli_long_in("--iterations", optarg, 1, 1L << 40, &iterations); break;
        case 'c': rc = sl_cli_double_in("--c", optarg, 0, 0, 1e9, 0, &costs.c); break;
        case 'h': rc = sl_cli_double_in("--c-hat", optarg, 0, 0, 1e9, 0, &costs.c_hat); break;
        case 'k': rc = sl_cli_double_in("--v-const", optarg, 0, 1, 1e9, 0, &v_const); break;
        case 'b': rc = sl_cli_double_in("--v-slope", optarg, 0, 0, 1e9, 0, &v_slope); break;
        case 'C': rc = sl_cli_double_in("--confidence", optarg, 0, 1, 1, 1, &confidence); break;
        case 't': rc = sl_cli_long_in("--threads", optarg, 0, 1024, &threads); break;
        case 'F': rc = sl_format_parse(optarg, &fmt); break;
        case 'R': reference = 1; break;
        case 'H': usage(stdout); return 0;
        default:
            return sl_fail(SL_EINPUT, "unknown or incomplete option '%s' (speclab mc --help)", argv[optind - 1]);
        }
        if (rc) return rc;
    }
    if (optind < argc) return sl_fail(SL_EINPUT, "unexpected argument '%s' (speclab mc --help)", argv[optind]);
    if (!have_family) return sl_fail(SL_EINPUT, "--family is required (identical|noisy|dirichlet|zipf|disjoint|positional)");
    if (v_const > 0 && v_slope > 0) return sl_fail(SL_EINPUT, "--v-const and --v-slope: give one of them");
    /* v(n): the constant when given, else the line 1 + slope (n - 1) (slope 0: v = 1, Theorem 3.8). */
    rc = v_const > 0 ? sl_theory_vcost_const(&costs.v, v_const) : sl_theory_vcost_linear(&costs.v, v_slope);
    if (rc) return rc;

    sl_mc_rows *rows = NULL;
    sl_mc_plan *plan = NULL;
    sl_table *tables[5] = {0};
    size_t nt = 0;
    if ((rc = sl_mc_family_rows(&fp, &rows))) goto done;
    sl_mc_source src = sl_mc_rows_source(rows);
    if ((rc = sl_mc_plan_alloc(&src, fp.gamma, &cfg, &plan))) goto done;
    sl_mc_opts o = {(size_t)iterations, fp.seed, (int)threads, NULL, NULL, reference};
    sl_mc_result res;
    if ((rc = sl_mc_run(plan, &o, &res))) goto done;
    if (sl_cli_progress_enabled())
        fprintf(stderr, "mc: %zu iterations in %.3f s\n", res.iterations, res.elapsed_s);
    sl_mc_prediction pred;
    sl_mc_predict(plan, res.iterations, &pred);

    /* The set-up as its own table; no thread count or timing, so output bytes do not depend on them. */
    sl_table *run = sl_table_alloc("run");
    if (!run) { rc = SL_EFAIL; goto done; }
    tables[0] = run;
    sl_table_add_col(run, "family", SL_COL_STRING, NULL);
    sl_table_add_col(run, "rule", SL_COL_STRING, NULL);
    sl_table_add_col(run, "lenience", SL_COL_DOUBLE, "%g");
    sl_table_add_col(run, "vocab", SL_COL_INT, NULL);
    sl_table_add_col(run, "gamma", SL_COL_INT, NULL);
    sl_table_add_col(run, "iterations", SL_COL_INT, NULL);
    sl_table_add_col(run, "seed", SL_COL_INT, NULL);
    sl_table_add_col(run, "alpha", SL_COL_DOUBLE, "%.6f");
    sl_table_add_col(run, "c", SL_COL_DOUBLE, "%g");
    sl_table_add_col(run, "c_hat", SL_COL_DOUBLE, "%g");
    sl_table_add_col(run, "v_gamma_plus_1", SL_COL_DOUBLE, "%g");
    sl_table_add_col(run, "confidence", SL_COL_DOUBLE, "%g");
    sl_table_add_row(run);
    sl_table_set_string(run, 0, sl_mc_family_name(fp.family));
    sl_table_set_string(run, 1, sl_rule_name(cfg.rule));
    sl_table_set_double(run, 2, cfg.lenience);
    sl_table_set_int(run, 3, (int64_t)fp.V);
    sl_table_set_int(run, 4, (int64_t)fp.gamma);
    sl_table_set_int(run, 5, iterations);
    sl_table_set_int(run, 6, (int64_t)fp.seed);
    sl_table_set_double(run, 7, pred.alpha);
    sl_table_set_double(run, 8, costs.c);
    sl_table_set_double(run, 9, costs.c_hat);
    double v_next = 1;
    sl_theory_vcost_eval(&costs.v, (long)fp.gamma + 1, &v_next);
    sl_table_set_double(run, 10, v_next);
    sl_table_set_double(run, 11, confidence);
    if ((rc = sl_mc_report(plan, &res, &pred, &costs, 1 - confidence, tables + 1, &nt))) goto done;
    nt += 1;
    if (sl_report_write(tables, nt, stdout, fmt)) rc = sl_fail(SL_EFAIL, "writing the report to stdout failed");
done:
    for (size_t i = 0; i < 5; i++) sl_table_free(tables[i]);
    sl_mc_plan_free(plan);
    sl_mc_rows_free(rows);
    sl_theory_vcost_free(&costs.v);
    return rc;
}
