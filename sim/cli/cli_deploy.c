/* cli_deploy.c: the deployment options `speclab analyze` and `speclab recommend` share. */
#include "cli_deploy.h"

#include <stdlib.h>

#include "sl_analyze.h"

/* Parses "n:v,n:v,..." into a table cost model. */
static int parse_vtable(const char *flag, const char *s, sl_theory_vcost *vc)
{
    size_t cap = 64, k = 0;
    long n[64];
    double v[64];
    const char *p = s;
    while (*p) {
        char *end;
        long a = strtol(p, &end, 10);
        if (end == p || *end != ':') return sl_fail(SL_EINPUT, "%s: '%s' is not n:v[,n:v...]", flag, s);
        p = end + 1;
        double b = strtod(p, &end);
        if (end == p || (*end && *end != ',')) return sl_fail(SL_EINPUT, "%s: '%s' is not n:v[,n:v...]", flag, s);
        if (k == cap) return sl_fail(SL_EINPUT, "%s: more than %zu entries", flag, cap);
        n[k] = a, v[k] = b, k++;
        p = *end ? end + 1 : end;
    }
    if (k == 0) return sl_fail(SL_EINPUT, "%s: empty", flag);
    return sl_theory_vcost_table(vc, n, v, k);
}

/* --v-table and --v-linear: either replaces the cost model given before it. */
static int parse_vcost(const char *flag, const char *arg, void *dst)
{
    sl_cli_deploy *d = dst;
    double slope;
    if (d->have_vc) sl_theory_vcost_free(&d->vc);
    d->have_vc = 0;
    int rc = flag[4] == 't' /* "--v-table" */ ? parse_vtable(flag, arg, &d->vc)
                                              : sl_cli_double_in(flag, arg, 0, 0, 1e6, 0, &slope);
    if (!rc && flag[4] != 't') rc = sl_theory_vcost_linear(&d->vc, slope);
    d->have_vc = !rc;
    return rc;
}

void sl_cli_group_deploy(sl_cli *c, sl_cli_deploy *d)
{
    sl_cli_dbl(c, "c", "C", d->c, 0, 1e6, 0, "deployment c = draft step / target step (default: a run log's measured c)");
    sl_cli_custom(c, "v-linear", "S", d, parse_vcost, "v(n) = 1 + S (n - 1) (default: a run log's v(n), else 1)");
    sl_cli_custom(c, "v-table", "n:v,...", d, parse_vcost, "measured verification costs v(n)");
    sl_cli_size(c, "gamma-max", "G", d->gamma_max, 1, SL_ANALYZE_GMAX, "gamma range 1..G (default 12)");
    sl_cli_size(c, "boot", "B", d->n_boot, 0, 1000000, "bootstrap resamples over whole sequences (default 1000)");
    sl_cli_dbl(c, "ci", "L", d->ci_level, 0, 1, SL_OPT_LO_OPEN | SL_OPT_HI_OPEN, "confidence level (default 0.95)");
    c->opt[c->n - 1].quantity = "ci_level";
    sl_cli_add(c, (sl_opt){.name = "seed", .metavar = "S", .kind = SL_OPT_U64, .dst = d->seed,
                           .help = "seed of the bootstrap and the simulations (default 1)"});
}

const sl_theory_vcost *sl_cli_deploy_vc(const sl_cli_deploy *d) { return d->have_vc ? &d->vc : NULL; }

void sl_cli_deploy_free(sl_cli_deploy *d)
{
    if (d->have_vc) sl_theory_vcost_free(&d->vc);
    d->have_vc = 0;
}
