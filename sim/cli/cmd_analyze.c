/* cmd_analyze.c: `speclab analyze FILE.h5`. */
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli_deploy.h"
#include "sl_analyze.h"
#include "sl_cli.h"

static void usage(void)
{
    printf("usage: speclab analyze FILE.h5 [options]\n"
           "\n"
           "Analyses a measure log (speclab measure) or a run log (speclab run), streaming in blocks:\n"
           "alpha = mean beta with a bootstrap CI over whole sequences; beta quantiles and histogram; D_LK;\n"
           "acceptance per draft position, unconditional (vLLM) and conditional (EAGLE), replayed from the\n"
           "logged betas or observed in a run log; acceptance against draft confidence (max q); expected\n"
           "tokens from Equation 1, from the replay and observed; the lenience curve alpha(l), standard and\n"
           "temperature-0 forms, sampler-match and non-iterative rejection (full distributions only);\n"
           "walltime/operation factors, optimal gamma and Corollary 3.9 for the deployment c and for\n"
           "c in {0, 0.01, 0.05, 0.1}; dynamic-gamma policies replayed on the log (oracle bound, llama.cpp\n"
           "p_min, transformers' +2/-1 schedule) against the best fixed gamma (analysis/DYNAMIC_GAMMA.md).\n"
           "\n"
           "  --run RUN.h5      with a measure log: a run log of the same pair, observed acceptance and\n"
           "                    tokens per iteration next to the replay (and its measured c, v(n))\n"
           "  --gamma-max G     gamma range 1..G for windows, factors and policies (default 12)\n"
           "  --boot B          bootstrap resamples (default 1000); --ci L confidence level (default 0.95)\n"
           "  --seed S          seed of the bootstrap and the replay (default 1)\n"
           "  --lenience LIST   lenience grid in (0, 1] (default 0.1:1:0.1)\n"
           "  --c C             deployment c (default: a run log's measured c)\n"
           "  --c-hat H         operations ratio for Theorem 3.11 (default: c)\n"
           "  --v-linear S      v(n) = 1 + S (n - 1); --v-table n:v,...  measured v(n) (default: run log, else 1)\n"
           "  --reps R          replay replications per sequence (default 10)\n"
           "  --p-min LIST      llama.cpp thresholds (default 0.1,0.3,0.5,0.75,0.9; llama.cpp uses 0.75)\n"
           "  --hf-start N      transformers' initial num_assistant_tokens (default 5)\n"
           "  --threads T       threads for the distribution pass (default: all)\n"
           "  --naive           read distributions through H5Dread instead of the raw-chunk path\n"
           "  --validate        only check the log: schema version, datasets, shapes, every value (exit 2 if bad)\n"
           "  --beta-only       only recompute beta from the stored distributions (benchmark)\n"
           "  --no-dists        skip the distribution pass\n"
           "  --format F        table (default), csv or json\n");
}

int sl_cmd_analyze(int argc, char **argv)
{
    static const struct option opts[] = {
        {"gamma-max", required_argument, 0, 'G'}, {"boot", required_argument, 0, 'B'},
        {"ci", required_argument, 0, 'L'},        {"seed", required_argument, 0, 's'},
        {"lenience", required_argument, 0, 'l'},  {"c", required_argument, 0, 'c'},
        {"c-hat", required_argument, 0, 'H'},     {"v-linear", required_argument, 0, 'v'},
        {"v-table", required_argument, 0, 'V'},   {"reps", required_argument, 0, 'R'},
        {"p-min", required_argument, 0, 'p'},     {"hf-start", required_argument, 0, 'h' + 256},
        {"threads", required_argument, 0, 'T'},   {"naive", no_argument, 0, 'n'},
        {"beta-only", no_argument, 0, 'b'},       {"no-dists", no_argument, 0, 'N'},
        {"format", required_argument, 0, 'f'},    {"help", no_argument, 0, 'h'},
        {"run", required_argument, 0, 'r'},       {"validate", no_argument, 0, 'C'},
        {0, 0, 0, 0},
    };
    sl_analyze_opts o;
    sl_analyze_opts_init(&o);
    sl_format fmt = SL_FMT_TABLE;
    sl_theory_vcost vc = {0};
    int have_vc = 0, validate = 0, c, rc = SL_OK;
    long v;
    double *vals = NULL;
    size_t nv;
    optind = 1;
    opterr = 0;
    while (rc == SL_OK && (c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        if (sl_cli_deploy_option(c, optarg, &o, &vc, &have_vc, &rc)) continue;
        switch (c) {
        case 'H': rc = sl_cli_double_in("--c-hat", optarg, 0, 0, 1e6, 0, &o.c_hat); break;
        case 'R': rc = sl_cli_long_in("--reps", optarg, 0, 100000, &v); o.policy_reps = (size_t)v; break;
        case 'h' + 256: rc = sl_cli_long_in("--hf-start", optarg, 1, SL_ANALYZE_GMAX, &v); o.hf_start = (int)v; break;
        case 'T': rc = sl_cli_long_in("--threads", optarg, 0, 1024, &v); o.threads = (int)v; break;
        case 'n': o.fast = 0; break;
        case 'b': o.beta_only = 1; break;
        case 'N': o.no_dists = 1; break;
        case 'f': rc = sl_format_parse(optarg, &fmt); break;
        case 'r': o.run_path = optarg; break;
        case 'C': validate = 1; break;
        case 'l':
        case 'p':
            rc = sl_cli_sweep(c == 'l' ? "--lenience" : "--p-min", optarg, &vals, &nv);
            if (!rc && (nv == 0 || nv > (c == 'l' ? 32u : 16u)))
                rc = sl_fail(SL_EINPUT, "%s: %zu values; expected 1 to %d", c == 'l' ? "--lenience" : "--p-min", nv, c == 'l' ? 32 : 16);
            for (size_t i = 0; !rc && i < nv; i++) {
                if (c == 'l' && !(vals[i] > 0 && vals[i] <= 1)) rc = sl_fail(SL_EINPUT, "--lenience: %g is outside (0, 1]", vals[i]);
                if (c == 'p' && !(vals[i] >= 0 && vals[i] <= 1)) rc = sl_fail(SL_EINPUT, "--p-min: %g is outside [0, 1]", vals[i]);
                if (c == 'l') o.lenience[i] = vals[i];
                else o.pmin[i] = vals[i];
            }
            if (!rc) *(c == 'l' ? &o.n_lenience : &o.n_pmin) = nv;
            free(vals);
            vals = NULL;
            break;
        case 'h': usage(); return 0;
        default: rc = sl_fail(SL_EINPUT, "unknown or incomplete option '%s' (see --help)", argv[optind - 1]);
        }
    }
    if (!rc && optind != argc - 1)
        rc = sl_fail(SL_EINPUT, optind >= argc ? "give one log file (see --help)" : "give exactly one log file; got '%s' too",
                     optind < argc - 1 ? argv[optind + 1] : "");
    if (rc) {
        if (have_vc) sl_theory_vcost_free(&vc);
        return rc;
    }
    if (have_vc) o.vc = &vc;
    if (validate) { /* schema, shapes and every value, streaming; nothing else */
        rc = sl_log_validate(argv[optind]);
        if (!rc) {
            sl_table *t = sl_table_alloc("validate");
            sl_table_add_col(t, "file", SL_COL_STRING, NULL);
            sl_table_add_col(t, "schema_version", SL_COL_INT, NULL);
            sl_table_add_col(t, "valid", SL_COL_INT, NULL);
            sl_table_add_row(t);
            sl_table_set_string(t, 0, argv[optind]);
            sl_table_set_int(t, 1, SL_LOG_SCHEMA_VERSION);
            sl_table_set_int(t, 2, 1);
            rc = sl_table_write(t, stdout, fmt);
            sl_table_free(t);
        }
        if (have_vc) sl_theory_vcost_free(&vc);
        return rc;
    }
    sl_analyze_result res;
    rc = sl_analyze_file(argv[optind], &o, &res);
    if (!rc && o.beta_only) {
        sl_table *t = sl_table_alloc("beta_from_dists");
        sl_table_add_col(t, "rows", SL_COL_INT, NULL);
        sl_table_add_col(t, "vocab_size", SL_COL_INT, NULL);
        sl_table_add_col(t, "dist", SL_COL_STRING, NULL);
        sl_table_add_col(t, "alpha_from_dists", SL_COL_DOUBLE, "%.10f");
        sl_table_add_col(t, "seconds", SL_COL_DOUBLE, "%.4f");
        sl_table_add_row(t);
        sl_table_set_int(t, 0, (int64_t)res.n_positions);
        sl_table_set_int(t, 1, (int64_t)res.meta.vocab_size);
        sl_table_set_string(t, 2, sl_log_dist_name(res.meta.dist));
        sl_table_set_double(t, 3, res.beta_dists);
        sl_table_set_double(t, 4, res.seconds);
        sl_table *ts[] = {t};
        rc = sl_report_write(ts, 1, stdout, fmt);
        sl_table_free(t);
    } else if (!rc) {
        sl_table **ts = NULL;
        size_t n = 0;
        rc = sl_analyze_report(&res, &ts, &n);
        if (!rc) rc = sl_report_write(ts, n, stdout, fmt);
        for (size_t i = 0; i < n; i++) sl_table_free(ts[i]);
        free(ts);
    }
    sl_analyze_result_free(&res);
    if (have_vc) sl_theory_vcost_free(&vc);
    return rc;
}
