/* cli_deploy.h: the deployment options `speclab analyze` and `speclab recommend` share
 * (--c, --v-linear, --v-table, --gamma-max, --boot, --ci, --seed; same short codes in both tables). */
#ifndef CLI_DEPLOY_H
#define CLI_DEPLOY_H

#include "sl_analyze.h"
#include "sl_theory.h"

/* If c is one of the shared codes (c v V G B L s), parses arg into o or vc (a repeated cost model
 * replaces the earlier one), stores the status in *rc and returns 1; otherwise returns 0. */
int sl_cli_deploy_option(int c, const char *arg, sl_analyze_opts *o, sl_theory_vcost *vc, int *have_vc, int *rc);

#endif
