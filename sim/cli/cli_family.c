/* cli_family.c: parsing of the options `speclab mc` and `speclab verify` share. */
#include "cli_family.h"

#include "sl_cli.h"

int sl_cli_family_option(int c, const char *arg, sl_mc_family_params *fp, sl_spec_config *cfg, int *have_family,
                         int *rc)
{
    long lv = 0;
    switch (c) {
    case 'f': *rc = sl_mc_family_parse(arg, &fp->family); *have_family = 1; return 1;
    case 'V': *rc = sl_cli_long_in("--vocab", arg, 2, 1L << 30, &lv); if (!*rc) fp->V = (size_t)lv; return 1;
    case 'g': *rc = sl_cli_long_in("--gamma", arg, 1, SL_SPEC_GAMMA_MAX, &lv); if (!*rc) fp->gamma = (size_t)lv; return 1;
    case 's': *rc = sl_cli_u64("--seed", arg, &fp->seed); return 1;
    case 'e': *rc = sl_cli_double_in("--noise", arg, 0, 0, 1e6, 0, &fp->noise); return 1;
    case 'a': *rc = sl_cli_double_in("--concentration", arg, 0, 1, 1e12, 0, &fp->concentration); return 1;
    case 'z': *rc = sl_cli_double_in("--zipf-s", arg, 0, 1, 1e6, 0, &fp->zipf_s); return 1;
    case 'P': *rc = sl_cli_double_in("--temp-p", arg, 0, 1, 1e6, 0, &fp->temp_p); return 1;
    case 'Q': *rc = sl_cli_double_in("--temp-q", arg, 0, 1, 1e6, 0, &fp->temp_q); return 1;
    case 'r': *rc = sl_rule_parse(arg, &cfg->rule); return 1;
    case 'l': *rc = sl_cli_double_in("--lenience", arg, 0, 1, 1, 0, &cfg->lenience); return 1;
    case 'K': *rc = sl_cli_long_in("--bug-k", arg, 1, 1L << 30, &lv); if (!*rc) cfg->bug_k = (size_t)lv; return 1;
    default: return 0;
    }
}
