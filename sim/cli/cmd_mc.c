/*
 * cmd_mc.c: `speclab mc`: Monte Carlo simulation of Algorithm 1 on a synthetic (p, q) family,
 * reported next to the theory (sim/sl_mc.h).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli_family.h"
#include "sl_cli.h"
#include "sl_mc_report.h"

static const char about[] =
    "Simulates speculative decoding (Algorithm 1) on a synthetic draft/target pair and reports\n"
    "acceptance, tokens per iteration, walltime and operation factors next to the theory.\n";

/* The set-up as its own table; no thread count or timing, so output bytes do not depend on them. */
static sl_table *run_table(const sl_mc_family_params *fp, const sl_spec_config *cfg, size_t iterations,
                           const sl_mc_prediction *pred, const sl_mc_report_costs *costs, double confidence)
{
    static const sl_colspec cols[] = {
        SL_COL_S("family"), SL_COL_S("rule"), SL_COL_D("lenience", "%g"), SL_COL_I("vocab"), SL_COL_I("gamma"),
        SL_COL_I("iterations"), SL_COL_I("seed"), SL_COL_D("alpha", "%.6f"), SL_COL_D("c", "%g"),
        SL_COL_D("c_hat", "%g"), SL_COL_D("v_gamma_plus_1", "%g"), SL_COL_D("confidence", "%g")};
    sl_table *run = SL_TABLE_NEW("run", cols);
    sl_table_row(run);
    sl_table_sets(run, "family", sl_mc_family_name(fp->family));
    sl_table_sets(run, "rule", sl_rule_name(cfg->rule));
    sl_table_setd(run, "lenience", cfg->lenience);
    sl_table_seti(run, "vocab", (int64_t)fp->V);
    sl_table_seti(run, "gamma", (int64_t)fp->gamma);
    sl_table_seti(run, "iterations", (int64_t)iterations);
    sl_table_seti(run, "seed", (int64_t)fp->seed);
    sl_table_setd(run, "alpha", pred->alpha);
    sl_table_setd(run, "c", costs->c);
    sl_table_setd(run, "c_hat", costs->c_hat);
    double v_next = 1;
    sl_theory_vcost_eval(&costs->v, (long)fp->gamma + 1, &v_next);
    sl_table_setd(run, "v_gamma_plus_1", v_next);
    sl_table_setd(run, "confidence", confidence);
    if (sl_table_status(run)) {
        sl_table_free(run);
        return NULL;
    }
    return run;
}

int sl_cmd_mc(int argc, char **argv)
{
    sl_mc_family_params fp = SL_MC_FAMILY_DEFAULT;
    sl_spec_config cfg = SL_SPEC_CONFIG_DEFAULT;
    sl_mc_report_costs costs = {0};
    double v_const = 0, v_slope = 0;
    sl_format fmt = SL_FMT_TABLE;
    size_t iterations = 100000;
    int threads = 0, reference = 0;
    double confidence = 0.95;
    sl_cli c;
    sl_cli_init(&c, "mc", "--family F [options]", about);
    sl_cli_family_group(&c, &fp, &cfg, "vocabulary size (default 256)", "drafts per iteration (default 4)");
    c.opt[0].flags |= SL_OPT_REQUIRED; /* --family */
    sl_cli_size(&c, "iterations", "N", &iterations, 1, (size_t)1 << 40, "iterations to simulate (default 100000)");
    sl_cli_dbl(&c, "c", "C", &costs.c, 0, 1e9, 0, "draft step time / target step time (default 0)");
    sl_cli_dbl(&c, "c-hat", "H", &costs.c_hat, 0, 1e9, 0, "draft ops per token / target ops per token (default 0)");
    sl_cli_dbl(&c, "v-const", "X", &v_const, 0, 1e9, SL_OPT_LO_OPEN,
               "verification cost v(n) = X for n >= 2 (default v = 1)");
    sl_cli_dbl(&c, "v-slope", "B", &v_slope, 0, 1e9, 0, "verification cost v(n) = 1 + B (n - 1)");
    sl_cli_dbl(&c, "confidence", "C", &confidence, 0, 1, SL_OPT_LO_OPEN | SL_OPT_HI_OPEN,
               "confidence of the intervals (default 0.95)");
    sl_cli_flag(&c, "reference", &reference,
                "run every iteration through sl_spec_draft/sl_spec_verify instead of the fused loop (same output, slower)");
    sl_cli_int(&c, "threads", "T", &threads, 0, 1024, "OpenMP threads, 0 = all (default 0); output is identical for any T");
    sl_cli_group_format(&c, &fmt);
    int quiet = 0;
    sl_cli_group_quiet(&c, &quiet);
    int rc = sl_cli_parse(&c, argc, argv, 0);
    if (rc == -1) return 0;
    if (rc) return rc;
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
    sl_cli_progress pg;
    sl_cli_progress_init(&pg, "mc", "iterations", quiet);
    sl_mc_opts o = {iterations, fp.seed, threads, NULL, NULL, reference};
    sl_mc_result res;
    rc = sl_mc_run_progress(plan, &o, sl_cli_progress_fn(&pg), &pg, &res);
    sl_cli_progress_end(&pg);
    if (rc) goto done;
    sl_mc_prediction pred;
    sl_mc_predict(plan, res.iterations, &pred);
    if (!(tables[0] = run_table(&fp, &cfg, iterations, &pred, &costs, confidence))) {
        rc = SL_EFAIL;
        goto done;
    }
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
