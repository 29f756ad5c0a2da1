/* cli_family.h: the synthetic-family and acceptance-rule options shared by `speclab mc` and
 * `speclab verify` (same long names and short codes in both option tables). */
#ifndef CLI_FAMILY_H
#define CLI_FAMILY_H

#include "sl_mc.h"
#include "sl_spec.h"

/* If c is one of the shared option codes (f V g s e a z P Q r l K), parses arg into fp / cfg, sets
 * *have_family for --family, stores the parse status in *rc and returns 1; otherwise returns 0. */
int sl_cli_family_option(int c, const char *arg, sl_mc_family_params *fp, sl_spec_config *cfg, int *have_family,
                         int *rc);

#endif
