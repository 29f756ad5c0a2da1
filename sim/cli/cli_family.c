/* cli_family.c: the options `speclab mc` and `speclab verify` share, declared once. */
#include "cli_family.h"

static int parse_family(const char *flag, const char *arg, void *dst)
{
    (void)flag;
    return sl_mc_family_parse(arg, dst);
}

void sl_cli_family_group(sl_cli *c, sl_mc_family_params *fp, sl_spec_config *cfg, const char *vocab_help,
                         const char *gamma_help)
{
    sl_cli_custom(c, "family", "F", &fp->family, parse_family,
                  "identical | noisy | dirichlet | zipf | disjoint | positional");
    sl_cli_size(c, "vocab", "V", &fp->V, 2, (size_t)1 << 30, vocab_help);
    sl_cli_size(c, "gamma", "G", &fp->gamma, 1, SL_SPEC_GAMMA_MAX, gamma_help);
    sl_cli_group_seed(c, &fp->seed, NULL);
    sl_cli_dbl(c, "noise", "E", &fp->noise, 0, 1e6, 0,
               "noisy/positional: std of the logit noise (default 0.5; positional uses E * i at draft position i)");
    sl_cli_dbl(c, "concentration", "A", &fp->concentration, 0, 1e12, SL_OPT_LO_OPEN,
               "Dirichlet parameter per token (default 1)");
    sl_cli_dbl(c, "zipf-s", "S", &fp->zipf_s, 0, 1e6, SL_OPT_LO_OPEN, "Zipf exponent (default 1.1)");
    sl_cli_dbl(c, "temp-p", "T", &fp->temp_p, 0, 1e6, SL_OPT_LO_OPEN, "Zipf target temperature (default 1)");
    sl_cli_dbl(c, "temp-q", "T", &fp->temp_q, 0, 1e6, SL_OPT_LO_OPEN, "Zipf draft temperature (default 1.3)");
    sl_cli_group_rule(c, cfg);
    sl_cli_size(c, "bug-k", "K", &cfg->bug_k, 1, (size_t)1 << 30, "k of the top-k wrong variants (default 1)");
}
