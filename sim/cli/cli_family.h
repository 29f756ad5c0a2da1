/* cli_family.h: the synthetic-family and acceptance-rule options shared by `speclab mc` and
 * `speclab verify` (same names, ranges and help in both). */
#ifndef CLI_FAMILY_H
#define CLI_FAMILY_H

#include "sl_cli.h"
#include "sl_mc.h"
#include "sl_spec.h"

/* Registers --family --vocab --gamma --seed --noise --concentration --zipf-s --temp-p --temp-q
 * (into fp), the rule group --rule --lenience and --bug-k (into cfg). vocab_help and gamma_help
 * carry the command's own defaults. */
void sl_cli_family_group(sl_cli *c, sl_mc_family_params *fp, sl_spec_config *cfg, const char *vocab_help,
                         const char *gamma_help);

#endif
