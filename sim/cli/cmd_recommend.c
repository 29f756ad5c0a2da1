/* cmd_recommend.c: `speclab recommend LOG.h5`: the gamma to deploy, its speedup with a CI, and the
 * latency spread of an answer. */
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
    printf("usage: speclab recommend LOG.h5 [--c C] [--v-linear S | --v-table n:v,...] [options]\n"
           "\n"
           "For a deployment (a measure or run log plus the draft/target cost ratio c and the verification\n"
           "cost v(n), given here or measured in a run log): the gamma that maximises the expected walltime\n"
           "factor E[N] / (gamma c + v(gamma + 1)) (E[N] replayed from the logged beta sequences; Equation 1\n"
           "at alpha for a run log), the expected speedup with a bootstrap CI over whole sequences, and the\n"
           "latency of an answer (default 128 tokens) in target-step units: P50/P90/P99 and mean by\n"
           "simulation over the logged betas, for the recommended gamma and its neighbours (larger gamma\n"
           "raises the spread). gamma 0 means plain autoregressive decoding.\n"
           "\n"
           "  --c C            draft step / target step (default: the run log's measured c; required otherwise)\n"
           "  --v-linear S     v(n) = 1 + S (n - 1); --v-table n:v,...  measured points (default: run log, else 1)\n"
           "  --gamma-max G    search gamma in 1..G (default 12)\n"
           "  --answer N       answer length in tokens (default 128)\n"
           "  --sims K         latency simulations (default 10000)\n"
           "  --boot B         bootstrap resamples (default 1000); --ci L level (default 0.95)\n"
           "  --seed S         seed (default 1)\n"
           "  --format F       table (default), csv or json\n");
}

int sl_cmd_recommend(int argc, char **argv)
{
    static const struct option opts[] = {
        {"c", required_argument, 0, 'c'},       {"v-linear", required_argument, 0, 'v'},
        {"v-table", required_argument, 0, 'V'}, {"gamma-max", required_argument, 0, 'G'},
        {"answer", required_argument, 0, 'A'},  {"sims", required_argument, 0, 'K'},
        {"boot", required_argument, 0, 'B'},    {"ci", required_argument, 0, 'L'},
        {"seed", required_argument, 0, 's'},    {"format", required_argument, 0, 'f'},
        {"help", no_argument, 0, 'h'},          {0, 0, 0, 0},
    };
    sl_analyze_opts o;
    sl_analyze_opts_init(&o);
    o.no_dists = 1;
    o.policy_reps = 0;
    sl_format fmt = SL_FMT_TABLE;
    sl_theory_vcost vc = {0};
    int have_vc = 0, c, rc = SL_OK;
    long answer = 128, sims = 10000;
    optind = 1;
    opterr = 0;
    while (rc == SL_OK && (c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        if (sl_cli_deploy_option(c, optarg, &o, &vc, &have_vc, &rc)) continue;
        switch (c) {
        case 'A': rc = sl_cli_long_in("--answer", optarg, 1, 1L << 24, &answer); break;
        case 'K': rc = sl_cli_long_in("--sims", optarg, 1, 100000000, &sims); break;
        case 'f': rc = sl_format_parse(optarg, &fmt); break;
        case 'h': usage(); return 0;
        default: rc = sl_fail(SL_EINPUT, "unknown or incomplete option '%s' (see --help)", argv[optind - 1]);
        }
    }
    if (!rc && optind != argc - 1) rc = sl_fail(SL_EINPUT, "give exactly one log file (see --help)");
    if (rc) {
        if (have_vc) sl_theory_vcost_free(&vc);
        return rc;
    }
    if (have_vc) o.vc = &vc;
    const char *path = argv[optind];
    sl_analyze_result res;
    rc = sl_analyze_file(path, &o, &res);
    if (!rc && !isfinite(res.c_deploy))
        rc = sl_fail(SL_EINPUT, "%s has no measured costs: give --c (draft step / target step)", path);
    if (!rc && !isfinite(res.alpha)) rc = sl_fail(SL_EINPUT, "%s holds no beta values", path);
    if (rc) {
        sl_analyze_result_free(&res);
        if (have_vc) sl_theory_vcost_free(&vc);
        return rc;
    }
    /* cs[0] is the deployment c. Replay (measure logs) when windows exist, else Equation 1 at alpha. */
    int replay = res.have_replay;
    int g = replay ? res.opt_rep[0] : res.opt_iid[0];
    int at_cap = replay ? res.opt_rep_cap[0] : res.opt_iid_cap[0];
    double f = replay ? res.optf_rep[0] : res.optf_iid[0], lo = NAN, hi = NAN;
    double cdep = res.c_deploy;
    if (g > 0 && replay) {
        lo = res.sp_lo[g - 1], hi = res.sp_hi[g - 1];
    } else if (g > 0) { /* the factor is increasing in alpha: map the alpha CI through it */
        sl_theory_walltime_factor_v(res.alpha_lo, g, cdep, o.vc, &lo);
        sl_theory_walltime_factor_v(res.alpha_hi, g, cdep, o.vc, &hi);
        if (!have_vc) { /* run-log v table */
            double en_lo, en_hi;
            sl_theory_expected_tokens(res.alpha_lo, g, &en_lo);
            sl_theory_expected_tokens(res.alpha_hi, g, &en_hi);
            lo = en_lo / (g * cdep + res.vtab[g]);
            hi = en_hi / (g * cdep + res.vtab[g]);
        }
    } else {
        lo = hi = 1;
    }
    sl_table *t = sl_table_alloc("recommendation");
    sl_table_add_col(t, "file", SL_COL_STRING, NULL);
    sl_table_add_col(t, "alpha", SL_COL_DOUBLE, "%.6g");
    sl_table_add_col(t, "c", SL_COL_DOUBLE, "%.6g");
    sl_table_add_col(t, "c_source", SL_COL_STRING, NULL);
    sl_table_add_col(t, "gamma", SL_COL_INT, NULL);
    sl_table_add_col(t, "expected_speedup", SL_COL_DOUBLE, "%.6g");
    sl_table_add_col(t, "speedup_ci_lo", SL_COL_DOUBLE, "%.6g");
    sl_table_add_col(t, "speedup_ci_hi", SL_COL_DOUBLE, "%.6g");
    sl_table_add_col(t, "ci_level", SL_COL_DOUBLE, "%.6g");
    sl_table_add_col(t, "gamma_at_search_cap", SL_COL_INT, NULL);
    sl_table_add_col(t, "method", SL_COL_STRING, NULL);
    sl_table_add_row(t);
    sl_table_set_string(t, 0, path);
    sl_table_set_double(t, 1, res.alpha);
    sl_table_set_double(t, 2, cdep);
    sl_table_set_string(t, 3, res.c_source);
    sl_table_set_int(t, 4, g);
    sl_table_set_double(t, 5, f);
    sl_table_set_double(t, 6, lo);
    sl_table_set_double(t, 7, hi);
    sl_table_set_double(t, 8, o.ci_level);
    sl_table_set_int(t, 9, at_cap);
    sl_table_set_string(t, 10, replay ? "replay of logged beta sequences; CI: bootstrap over sequences"
                                      : "Equation 1 at alpha; CI: alpha's bootstrap CI mapped through the factor");

    /* Latency for gamma 0 (plain), 1, g-1, g, g+1, g+2 (distinct, within 0..G). */
    size_t cand[8], nc = 0;
    long want[] = {0, 1, g - 1, g, g + 1, g + 2};
    for (size_t i = 0; i < 6; i++) {
        if (want[i] < 0 || want[i] > (long)o.gamma_max) continue;
        int dup = 0;
        for (size_t j = 0; j < nc; j++) dup |= cand[j] == (size_t)want[i];
        if (!dup) cand[nc++] = (size_t)want[i];
    }
    for (size_t i = 1; i < nc; i++) /* ascending */
        for (size_t j = i; j > 0 && cand[j - 1] > cand[j]; j--) {
            size_t tmp = cand[j];
            cand[j] = cand[j - 1];
            cand[j - 1] = tmp;
        }
    double q[32];
    rc = sl_analyze_latency(path, res.alpha, cand, nc, (size_t)answer, (size_t)sims, o.seed, cdep, res.vtab, q);
    sl_table *l = sl_table_alloc("latency");
    sl_table_add_col(l, "gamma", SL_COL_INT, NULL);
    sl_table_add_col(l, "answer_tokens", SL_COL_INT, NULL);
    sl_table_add_col(l, "p50_target_steps", SL_COL_DOUBLE, "%.4g");
    sl_table_add_col(l, "p90_target_steps", SL_COL_DOUBLE, "%.4g");
    sl_table_add_col(l, "p99_target_steps", SL_COL_DOUBLE, "%.4g");
    sl_table_add_col(l, "mean_target_steps", SL_COL_DOUBLE, "%.4g");
    sl_table_add_col(l, "p99_over_p50", SL_COL_DOUBLE, "%.4g");
    sl_table_add_col(l, "recommended", SL_COL_INT, NULL);
    for (size_t i = 0; !rc && i < nc; i++) {
        sl_table_add_row(l);
        sl_table_set_int(l, 0, (int64_t)cand[i]);
        sl_table_set_int(l, 1, answer);
        for (int k = 0; k < 4; k++) sl_table_set_double(l, 2 + (size_t)k, q[i * 4 + (size_t)k]);
        sl_table_set_double(l, 6, q[i * 4 + 2] / q[i * 4]);
        sl_table_set_int(l, 7, (long)cand[i] == g);
    }
    if (!rc) {
        sl_table *ts[] = {t, l};
        rc = sl_report_write(ts, 2, stdout, fmt);
    }
    sl_table_free(t);
    sl_table_free(l);
    sl_analyze_result_free(&res);
    if (have_vc) sl_theory_vcost_free(&vc);
    return rc;
}
