/*
 * cmd_theory.c: `speclab theory`, the closed forms of THEORY.md over a grid of (α, γ, c, ĉ):
 * parses the options, calls sl_theory_grid_run (sim/sl_theory_grid.h), writes the result with
 * sl_theory_grid_write (analysis/sl_theory_report.h).
 *
 * Every value is checked before anything is printed, so bad input gives one message and exit 2
 * with empty stdout. One combination with --format json is one JSON object; a sweep is an array.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sl_cli.h"
#include "sl_theory_grid.h"
#include "sl_theory_report.h"

static const char synopsis[] = "--alpha A --gamma G [--c C] [--c-hat H] [options]\n"
                                "       speclab theory --alpha A --optimal [--gamma-cap N] [--c C] [options]\n"
                                "       speclab theory --beta b1,...,bG [--c C] [options]";

static const char about[] =
    "Closed forms for speculative decoding (notation of THEORY.md): tokens per iteration N (mean,\n"
    "variance, pmf), the walltime factor (Theorem 3.8, and its generalisation with a verification\n"
    "cost v(n)), the operation factor (Theorem 3.11), Corollary 3.9 and the optimal gamma.\n"
    "\n"
    "--alpha, --gamma, --c and --c-hat each take a value, a list 'a,b,c' or a range\n"
    "'start:stop:step' (for gamma 'start:stop' steps by 1); one row per combination.\n"
    "Without --v-const, --v-table or --v-linear the cost model is v = 1, Theorem 3.8's assumption.\n"
    "\n"
    "Columns:\n"
    "  expected_tokens     E[N] = (1 - alpha^(gamma+1))/(1 - alpha); gamma+1 at alpha = 1\n"
    "  var_tokens          Var N\n"
    "  v_verify            v(gamma+1) of the cost model (1 without one)\n"
    "  walltime_factor_v1  Theorem 3.8: E[N]/(gamma*c + 1); Chen et al.'s per-loop speedup with\n"
    "                      t_draft/t_target = c is the same number\n"
    "  walltime_factor     E[N]/(gamma*c + v(gamma+1))\n"
    "  ops_factor          Theorem 3.11: (gamma*c_hat + gamma + 1)/E[N]\n"
    "  alpha_gt_c          Corollary 3.9: 1 if alpha > c (some gamma then improves walltime)\n"
    "  cor39_bound         (1 + alpha)/(1 + c), the walltime factor at gamma = 1 with v = 1\n"
    "With --optimal, gamma is the best gamma >= 1 (the smallest of the ties below) and the\n"
    "columns above are evaluated there; and\n"
    "  gamma_opt           that gamma, or 0 when no gamma beats plain decoding (factor <= 1)\n"
    "  walltime_factor_opt the walltime factor at gamma_opt (1 when gamma_opt = 0)\n"
    "  gamma_cap, at_cap   the largest gamma searched; 1 if the cap is among the ties (a larger\n"
    "                      cap might do better)\n"
    "  n_ties, ties        every gamma within 1e-12 (relative) of the best factor (table and CSV\n"
    "                      write ranges such as '3 5-7'; JSON a full array)\n"
    "\n"
    "One combination with --format json prints one JSON object; a sweep prints an array.\n"
    "Examples:\n"
    "  speclab theory --alpha 0.8 --gamma 4 --c 0.05 --format json\n"
    "  speclab theory --alpha 0.5:0.95:0.05 --optimal --c 0,0.01,0.05\n";

/* A swept option: the values of its last occurrence. */
typedef struct {
    double *v; /* (n) */
    size_t n;
} sweep;

static int parse_sweep(const char *flag, const char *arg, void *dst)
{
    sweep *s = dst;
    free(s->v);
    s->v = NULL;
    s->n = 0;
    return sl_cli_sweep(flag, arg, &s->v, &s->n);
}

/* The verification cost model and the flag that gave it (one model at most). */
typedef struct {
    const char *flag;
    sl_theory_vcost vc;
} vmodel;

/* "1:1,2:1.02,3:1.05" -> a table cost model. */
static int parse_vtable(const char *flag, const char *s, sl_theory_vcost *vc)
{
    size_t len = strlen(s), cap = 1;
    for (const char *p = s; *p; p++) cap += *p == ',';
    char *buf = sl_malloc(len + 1);
    long *n = sl_malloc(cap * sizeof *n);
    double *v = sl_malloc(cap * sizeof *v);
    int rc = buf && n && v ? SL_OK : SL_EFAIL;
    size_t count = 0;
    if (!rc) memcpy(buf, s, len + 1);
    for (char *tok = buf, *sep; !rc && tok; tok = sep) {
        sep = strchr(tok, ',');
        if (sep) *sep++ = 0;
        char *colon = strchr(tok, ':');
        if (!colon) {
            rc = sl_fail(SL_EINPUT, "%s: entry '%s' is not n:v (e.g. 2:1.02)", flag, tok);
            break;
        }
        *colon = 0;
        rc = sl_cli_long_in(flag, tok, 1, SL_THEORY_GAMMA_MAX + 1L, &n[count]);
        if (!rc) rc = sl_cli_double_in(flag, colon + 1, 0, 1, INFINITY, 1, &v[count]);
        if (!rc && n[count] == 1 && fabs(v[count] - 1) > 1e-9)
            rc = sl_fail(SL_EINPUT, "%s: v(1) = %s but v(1) = 1 by definition", flag, colon + 1);
        for (size_t j = 0; !rc && j < count; j++)
            if (n[j] == n[count]) rc = sl_fail(SL_EINPUT, "%s: n = %ld appears twice", flag, n[count]);
        count++;
    }
    if (!rc) rc = sl_theory_vcost_table(vc, n, v, count);
    free(buf);
    free(n);
    free(v);
    return rc;
}

/* --v-const, --v-linear, --v-table. */
static int parse_vmodel(const char *flag, const char *arg, void *dst)
{
    static const char *const names[] = {"--v-const", "--v-linear", "--v-table"};
    vmodel *m = dst;
    double x;
    int kind = !strcmp(flag, names[0]) ? 0 : !strcmp(flag, names[1]) ? 1 : 2, rc;
    if (m->flag) return sl_fail(SL_EINPUT, "%s: conflicts with %s (give one verification cost model)", flag, m->flag);
    m->flag = names[kind]; /* flag itself lives in the parser's buffer */
    if (kind == 0) {
        rc = sl_cli_double_in(flag, arg, 0, 1, INFINITY, 1, &x);
        if (!rc) rc = sl_theory_vcost_const(&m->vc, x);
    } else if (kind == 1) {
        rc = sl_cli_double(flag, arg, &x);
        if (!rc) rc = sl_theory_vcost_linear(&m->vc, x);
    } else {
        rc = parse_vtable(flag, arg, &m->vc);
    }
    return rc;
}

int sl_cmd_theory(int argc, char **argv)
{
    sweep alpha = {0}, gamma = {0}, c = {0}, c_hat = {0}, beta = {0};
    vmodel vm = {0};
    sl_theory_grid_config cfg = {0};
    sl_format fmt = SL_FMT_TABLE;
    sl_cli cli;
    sl_cli_init(&cli, "theory", synopsis, about);
    sl_cli_custom(&cli, "alpha", "A", &alpha, parse_sweep, "expected acceptance rate alpha, in [0, 1]");
    sl_cli_custom(&cli, "gamma", "G", &gamma, parse_sweep, "draft tokens per iteration, integer in [1, 1000000]");
    sl_cli_custom(&cli, "c", "C", &c, parse_sweep, "time of a draft step / time of a target step, >= 0 (default 0)");
    sl_cli_custom(&cli, "c-hat", "H", &c_hat, parse_sweep, "draft / target arithmetic operations per token, >= 0 (default 0)");
    sl_cli_custom(&cli, "v-const", "X", &vm, parse_vmodel, "verification cost v(n) = X for every n, X > 0");
    sl_cli_custom(&cli, "v-table", "N:V,...", &vm, parse_vmodel,
                  "measured v(n), e.g. 1:1,2:1.02,3:1.05; every gamma+1 used must be listed; v(1) = 1");
    sl_cli_custom(&cli, "v-linear", "S", &vm, parse_vmodel, "v(n) = 1 + S*(n-1)");
    sl_cli_custom(&cli, "beta", "b1,...,bG", &beta, parse_sweep,
                  "position-dependent acceptance beta_1..beta_G instead of --alpha and --gamma (gamma = G; "
                  "Corollary 3.9 columns use beta_1)");
    sl_cli_flag(&cli, "optimal", &cfg.optimal,
                "search gamma = 1..cap for the largest walltime factor (not with --gamma; with --beta the search "
                "stops at G; with --v-table at the last listed n)");
    sl_cli_int(&cli, "gamma-cap", "N", &cfg.gamma_cap, 1, SL_THEORY_GAMMA_MAX, "cap of the --optimal search (default 64)");
    sl_cli_flag(&cli, "pmf", &cfg.pmf, "also print P(N = k) for k = 1..gamma+1");
    sl_cli_group_format(&cli, &fmt);
    int rc = sl_cli_parse(&cli, argc, argv, 0);
    if (rc == 0) {
        cfg.alpha = alpha.v, cfg.n_alpha = alpha.n;
        cfg.gamma = gamma.v, cfg.n_gamma = gamma.n;
        cfg.c = c.v, cfg.n_c = c.n;
        cfg.c_hat = c_hat.v, cfg.n_c_hat = c_hat.n;
        cfg.beta = beta.v, cfg.n_beta = beta.n;
        cfg.vc = vm.flag ? &vm.vc : NULL;
        sl_theory_grid_result res;
        rc = sl_theory_grid_run(&cfg, &res);
        if (!rc) {
            rc = sl_theory_grid_write(&res, stdout, fmt);
            if (!rc && (fflush(stdout) || ferror(stdout))) rc = sl_fail(SL_EFAIL, "writing to stdout failed");
            sl_theory_grid_result_free(&res);
        }
    }
    free(alpha.v), free(gamma.v), free(c.v), free(c_hat.v), free(beta.v);
    sl_theory_vcost_free(&vm.vc);
    return rc < 0 ? 0 : rc;
}
