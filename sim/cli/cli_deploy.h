/* cli_deploy.h: the deployment options `speclab analyze` and `speclab recommend` share, as one
 * option-registry group: --c, --v-linear, --v-table, --gamma-max, --boot, --ci, --seed. */
#ifndef CLI_DEPLOY_H
#define CLI_DEPLOY_H

#include <stdint.h>

#include "sl_cli.h"
#include "sl_theory.h"

/* Where the group's options land. The cost model is owned here (a repeated --v-linear or --v-table
 * replaces the earlier one); sl_cli_deploy_free releases it. */
typedef struct {
    double *c;           /* deployment c (draft step / target step) */
    size_t *gamma_max;   /* search gamma in 1..gamma_max */
    size_t *n_boot;      /* bootstrap resamples */
    double *ci_level;    /* confidence level of the CIs */
    uint64_t *seed;
    sl_theory_vcost vc;  /* the verification cost model, when have_vc */
    int have_vc;
} sl_cli_deploy;

/* Registers the group on c, writing into the fields d points at (their current values are the
 * defaults). */
void sl_cli_group_deploy(sl_cli *c, sl_cli_deploy *d);
/* The parsed cost model, or NULL when none was given (the log's, else v == 1). */
const sl_theory_vcost *sl_cli_deploy_vc(const sl_cli_deploy *d);
void sl_cli_deploy_free(sl_cli_deploy *d);

#endif
