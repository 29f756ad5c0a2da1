/* cmd_recommend.c: `speclab recommend LOG.h5 [LOG.h5 ...]`: parses, calls sl_recommend_run, prints the report. */
#include <stdio.h>
#include <stdlib.h>

#include "cli_deploy.h"
#include "sl_cli.h"
#include "sl_recommend.h"

static const char about[] =
    "The gamma to deploy, from what you measured. Give a measure log (its text with p and q), run\n"
    "logs (`run --gamma 1:4` measures speedup and costs at every gamma in one run), or both:\n"
    "  tokens per iteration: the exact sequential replay of the measure log (a tested draft is\n"
    "    accepted with probability min(1, q(x)/p(x)) of the logged token; iterations start where the\n"
    "    previous one ended), else the run logs' measured ones (Equation 1 at alpha_hat elsewhere);\n"
    "  cost of an iteration (plain-decoding token times): --costs FILE (a run log, or a CSV with\n"
    "    columns gamma,cost_per_iteration or gamma,c,v[,overhead]), else the first run log given,\n"
    "    each measured at its own gamma (other gammas: a least-squares line a + b gamma, its error\n"
    "    reported), or --c/--v-* (gamma c + v(gamma + 1));\n"
    "  predicted speedup = tokens per iteration / cost, CI from bootstraps of both.\n"
    "A speedup measured by a run log outranks a prediction: the pick is then the best measured\n"
    "gamma, and every gamma with both shows the prediction's error. The latency of an answer\n"
    "(default: the measure log's tokens per sequence, else 128) has mean answer / speedup and the\n"
    "replay's spread. --deploy gives the chosen gamma's speedup under other cost tables (e.g. a run\n"
    "at another thread count); --batch sizes without a measured table are reported as not measured.\n"
    "gamma 0 means plain autoregressive decoding. Give the logs before --deploy (it takes every\n"
    "file that follows it).\n";

typedef struct {
    size_t *v; /* (n) */
    size_t n;
} batch_list;

/* --batch 1,8,32: batch sizes >= 1. */
static int parse_batch(const char *flag, const char *arg, void *dst)
{
    batch_list *b = dst;
    int32_t *ids = NULL;
    size_t n = 0;
    int rc = sl_cli_ids(flag, arg, &ids, &n);
    if (!rc) {
        free(b->v);
        b->n = 0;
        b->v = malloc((n ? n : 1) * sizeof *b->v);
        if (!b->v) rc = sl_fail(SL_EFAIL, "out of memory");
        for (size_t i = 0; !rc && i < n; i++) {
            if (ids[i] < 1) rc = sl_fail(SL_EINPUT, "%s: batch size %d is not >= 1", flag, ids[i]);
            b->v[i] = (size_t)ids[i];
        }
        if (!rc) b->n = n;
    }
    free(ids);
    return rc;
}

int sl_cmd_recommend(int argc, char **argv)
{
    sl_recommend_config cfg;
    sl_recommend_config_init(&cfg);
    sl_format fmt = SL_FMT_TABLE;
    sl_cli_list deploy = {0};
    batch_list batch = {NULL, 0};
    sl_cli_deploy dep = {.c = &cfg.c, .gamma_max = &cfg.gamma_max, .n_boot = &cfg.n_boot,
                         .ci_level = &cfg.ci_level, .seed = &cfg.seed};
    sl_cli c;
    sl_cli_init(&c, "recommend",
                "LOG.h5 [LOG.h5 ...] [--costs RUN.h5|FILE.csv] [--c C [--v-linear S | --v-table n:v,...]] "
                "[--deploy FILE ...] [--batch B,...] [options]",
                about);
    sl_cli_string(&c, "costs", "FILE", &cfg.costs, "cost table: a run log or a CSV (default: the first run log given)");
    sl_cli_list_opt(&c, "deploy", "FILE", &deploy, "cost tables of other settings (repeatable; more files may follow)");
    sl_cli_custom(&c, "batch", "B,...", &batch, parse_batch, "batch sizes to report on (not measured unless a table is given)");
    sl_cli_group_deploy(&c, &dep);
    sl_cli_size(&c, "answer", "N", &cfg.answer_tokens, 1, (size_t)1 << 24,
                "answer length in tokens (default: the measure log's tokens per sequence, else 128)");
    sl_cli_size(&c, "sims", "K", &cfg.n_sims, 1, 100000000, "latency simulations (default 10000)");
    sl_cli_group_format(&c, &fmt);
    int rc = sl_cli_parse(&c, argc, argv, SL_RECOMMEND_MAX_LOGS);
    if (rc < 0) {
        sl_cli_deploy_free(&dep);
        sl_cli_list_free(&deploy);
        free(batch.v);
        return 0;
    }
    if (!rc && c.n_pos < 1) rc = sl_fail(SL_EINPUT, "give at least one log file (see --help)");
    cfg.paths = (const char *const *)c.pos;
    cfg.n_paths = c.n_pos;
    cfg.deploy = deploy.v;
    cfg.n_deploy = deploy.n;
    cfg.batch = batch.v;
    cfg.n_batch = batch.n;
    cfg.vc = sl_cli_deploy_vc(&dep);
    sl_recommend_result res;
    if (!rc) rc = sl_recommend_run(&cfg, &res);
    if (!rc) {
        sl_table **ts = NULL;
        size_t n = 0;
        rc = sl_recommend_report(&res, &ts, &n);
        if (!rc) rc = sl_report_write(ts, n, stdout, fmt);
        for (size_t i = 0; i < n; i++) sl_table_free(ts[i]);
        free(ts);
        sl_recommend_result_free(&res);
    }
    sl_cli_deploy_free(&dep);
    sl_cli_list_free(&deploy);
    free(batch.v);
    return rc;
}
