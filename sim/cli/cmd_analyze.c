/* cmd_analyze.c: `speclab analyze FILE.h5`: parses, calls sl_analyze_file (or sl_log_validate),
 * prints the report. */
#include <stdio.h>
#include <stdlib.h>

#include "cli_deploy.h"
#include "sl_analyze.h"
#include "sl_cli.h"

static const char about[] =
    "Analyses a measure log (speclab measure) or a run log (speclab run), streaming in blocks:\n"
    "alpha = mean beta with a bootstrap CI over whole sequences; beta quantiles and histogram; D_LK;\n"
    "acceptance per draft position, unconditional (vLLM) and conditional (EAGLE), replayed from the\n"
    "logged betas or observed in a run log; acceptance against draft confidence (max q); expected\n"
    "tokens from Equation 1, from the replay and observed; the lenience curve alpha(l), standard and\n"
    "temperature-0 forms, sampler-match and non-iterative rejection (full distributions only);\n"
    "walltime/operation factors, optimal gamma and Corollary 3.9 for the deployment c and for\n"
    "c in {0, 0.01, 0.05, 0.1}; dynamic-gamma policies replayed on the log (oracle bound, llama.cpp\n"
    "p_min, transformers' +2/-1 schedule) against the best fixed gamma (analysis/DYNAMIC_GAMMA.md).\n";

/* --lenience and --p-min: a sweep of at most 32 (16) values in (0, 1] ([0, 1]). */
static int parse_list(const char *flag, const char *arg, void *dst)
{
    sl_analyze_opts *o = dst;
    int len = flag[2] == 'l'; /* "--lenience" */
    size_t cap = len ? 32 : 16, nv;
    double *vals = NULL;
    int rc = sl_cli_sweep(flag, arg, &vals, &nv);
    if (!rc && (nv == 0 || nv > cap)) rc = sl_fail(SL_EINPUT, "%s: %zu values; expected 1 to %zu", flag, nv, cap);
    for (size_t i = 0; !rc && i < nv; i++) {
        if (len && !(vals[i] > 0 && vals[i] <= 1)) rc = sl_fail(SL_EINPUT, "%s: %g is outside (0, 1]", flag, vals[i]);
        if (!len && !(vals[i] >= 0 && vals[i] <= 1)) rc = sl_fail(SL_EINPUT, "%s: %g is outside [0, 1]", flag, vals[i]);
        if (!rc) (len ? o->lenience : o->pmin)[i] = vals[i];
    }
    if (!rc) *(len ? &o->n_lenience : &o->n_pmin) = nv;
    free(vals);
    return rc;
}

/* --validate: schema, shapes and every value, streaming; nothing else. */
static int validate(const char *path, sl_format fmt)
{
    int rc = sl_log_validate(path);
    if (rc) return rc;
    static const sl_colspec cols[] = {SL_COL_S("file"), SL_COL_I("schema_version"), SL_COL_I("valid")};
    sl_table *t = SL_TABLE_NEW("validate", cols);
    sl_table_row(t);
    sl_table_sets(t, "file", path);
    sl_table_seti(t, "schema_version", SL_LOG_SCHEMA_VERSION);
    sl_table_seti(t, "valid", 1);
    rc = sl_table_write(t, stdout, fmt);
    sl_table_free(t);
    return rc;
}

/* --beta-only: the benchmark's one row. */
static int beta_only_report(const sl_analyze_result *res, sl_format fmt)
{
    static const sl_colspec cols[] = {SL_COL_I("rows"), SL_COL_I("vocab_size"), SL_COL_S("dist"),
                                      SL_COL_D("alpha_from_dists", "%.10f"), SL_COL_D("seconds", "%.4f")};
    sl_table *t = SL_TABLE_NEW("beta_from_dists", cols);
    sl_table_row(t);
    sl_table_seti(t, "rows", (int64_t)res->n_positions);
    sl_table_seti(t, "vocab_size", (int64_t)res->meta.vocab_size);
    sl_table_sets(t, "dist", sl_log_dist_name(res->meta.dist));
    sl_table_setd(t, "alpha_from_dists", res->beta_dists);
    sl_table_setd(t, "seconds", res->seconds);
    int rc = sl_report_write(&t, 1, stdout, fmt);
    sl_table_free(t);
    return rc;
}

int sl_cmd_analyze(int argc, char **argv)
{
    sl_analyze_opts o;
    sl_analyze_opts_init(&o);
    sl_format fmt = SL_FMT_TABLE;
    int naive = 0, check_only = 0;
    sl_cli_deploy dep = {.c = &o.c, .gamma_max = &o.gamma_max, .n_boot = &o.n_boot, .ci_level = &o.ci_level,
                         .seed = &o.seed};
    sl_cli c;
    sl_cli_init(&c, "analyze", "FILE.h5 [options]", about);
    sl_cli_string(&c, "run", "RUN.h5", &o.run_path,
                  "with a measure log: a run log of the same pair, observed acceptance and tokens per iteration "
                  "next to the replay (and its measured c, v(n))");
    c.opt[c.n - 1].quantity = "run_log";
    sl_cli_group_deploy(&c, &dep);
    sl_cli_custom(&c, "lenience", "LIST", &o, parse_list, "lenience grid in (0, 1] (default 0.1:1:0.1)");
    sl_cli_dbl(&c, "c-hat", "H", &o.c_hat, 0, 1e6, 0, "operations ratio for Theorem 3.11 (default: c)");
    sl_cli_size(&c, "reps", "R", &o.policy_reps, 0, 100000, "replay replications per sequence (default 10)");
    sl_cli_custom(&c, "p-min", "LIST", &o, parse_list,
                  "llama.cpp thresholds (default 0.1,0.3,0.5,0.75,0.9; llama.cpp uses 0.75)");
    sl_cli_int(&c, "hf-start", "N", &o.hf_start, 1, SL_ANALYZE_GMAX, "transformers' initial num_assistant_tokens (default 5)");
    sl_cli_int(&c, "threads", "T", &o.threads, 0, 1024, "threads for the distribution pass (default: all)");
    sl_cli_flag(&c, "naive", &naive, "read distributions through H5Dread instead of the raw-chunk path");
    sl_cli_flag(&c, "validate", &check_only,
                "only check the log: schema version, datasets, shapes, every value (exit 2 if bad)");
    sl_cli_flag(&c, "beta-only", &o.beta_only, "only recompute beta from the stored distributions (benchmark)");
    sl_cli_flag(&c, "no-dists", &o.no_dists, "skip the distribution pass");
    sl_cli_group_format(&c, &fmt);
    int rc = sl_cli_parse(&c, argc, argv, 1);
    if (rc < 0) {
        sl_cli_deploy_free(&dep);
        return 0;
    }
    if (!rc && c.n_pos != 1) rc = sl_fail(SL_EINPUT, "give one log file (see --help)");
    if (rc) {
        sl_cli_deploy_free(&dep);
        return rc;
    }
    if (naive) o.fast = 0;
    o.vc = sl_cli_deploy_vc(&dep);
    const char *path = c.pos[0];
    if (check_only) {
        rc = validate(path, fmt);
        sl_cli_deploy_free(&dep);
        return rc;
    }
    sl_analyze_result res;
    rc = sl_analyze_file(path, &o, &res);
    if (!rc && o.beta_only) {
        rc = beta_only_report(&res, fmt);
    } else if (!rc) {
        sl_table **ts = NULL;
        size_t n = 0;
        rc = sl_analyze_report(&res, &ts, &n);
        if (!rc) rc = sl_report_write(ts, n, stdout, fmt);
        for (size_t i = 0; i < n; i++) sl_table_free(ts[i]);
        free(ts);
    }
    sl_analyze_result_free(&res);
    sl_cli_deploy_free(&dep);
    return rc;
}
