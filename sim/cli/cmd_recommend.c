/* cmd_recommend.c: `speclab recommend LOG.h5`: parses, calls sl_recommend_run, prints the report. */
#include <stdio.h>
#include <stdlib.h>

#include "cli_deploy.h"
#include "sl_cli.h"
#include "sl_recommend.h"

static const char about[] =
    "For a deployment (a measure or run log plus the draft/target cost ratio c and the verification\n"
    "cost v(n), given here or measured in a run log): the gamma that maximises the expected walltime\n"
    "factor E[N] / (gamma c + v(gamma + 1)) (E[N] replayed from the logged beta sequences; Equation 1\n"
    "at alpha for a run log), the expected speedup with a bootstrap CI over whole sequences, and the\n"
    "latency of an answer (default 128 tokens) in target-step units: P50/P90/P99 and mean by\n"
    "simulation over the logged betas, for the recommended gamma and its neighbours (larger gamma\n"
    "raises the spread). gamma 0 means plain autoregressive decoding.\n"
    "--c is required unless the log is a run log with measured costs.\n";

int sl_cmd_recommend(int argc, char **argv)
{
    sl_recommend_config cfg;
    sl_recommend_config_init(&cfg);
    sl_format fmt = SL_FMT_TABLE;
    sl_cli_deploy dep = {.c = &cfg.c, .gamma_max = &cfg.gamma_max, .n_boot = &cfg.n_boot,
                         .ci_level = &cfg.ci_level, .seed = &cfg.seed};
    sl_cli c;
    sl_cli_init(&c, "recommend", "LOG.h5 [--c C] [--v-linear S | --v-table n:v,...] [options]", about);
    sl_cli_group_deploy(&c, &dep);
    sl_cli_size(&c, "answer", "N", &cfg.answer_tokens, 1, (size_t)1 << 24, "answer length in tokens (default 128)");
    sl_cli_size(&c, "sims", "K", &cfg.n_sims, 1, 100000000, "latency simulations (default 10000)");
    sl_cli_group_format(&c, &fmt);
    int rc = sl_cli_parse(&c, argc, argv, 1);
    if (rc < 0) {
        sl_cli_deploy_free(&dep);
        return 0;
    }
    if (!rc && c.n_pos != 1) rc = sl_fail(SL_EINPUT, "give exactly one log file (see --help)");
    cfg.path = c.n_pos ? c.pos[0] : NULL;
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
    return rc;
}
