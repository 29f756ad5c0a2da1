/* cli_deploy.c: parsing of the deployment options `speclab analyze` and `speclab recommend` share. */
#include "cli_deploy.h"

#include <stdlib.h>

#include "sl_cli.h"

/* Parses "n:v,n:v,..." into a table cost model. */
static int sl_cli_vtable(const char *s, sl_theory_vcost *vc)
{
    size_t cap = 64, k = 0;
    long n[64];
    double v[64];
    const char *p = s;
    while (*p) {
        char *end;
        long a = strtol(p, &end, 10);
        if (end == p || *end != ':') return sl_fail(SL_EINPUT, "--v-table: '%s' is not n:v[,n:v...]", s);
        p = end + 1;
        double b = strtod(p, &end);
        if (end == p || (*end && *end != ',')) return sl_fail(SL_EINPUT, "--v-table: '%s' is not n:v[,n:v...]", s);
        if (k == cap) return sl_fail(SL_EINPUT, "--v-table: more than %zu entries", cap);
        n[k] = a, v[k] = b, k++;
        p = *end ? end + 1 : end;
    }
    if (k == 0) return sl_fail(SL_EINPUT, "--v-table: empty");
    return sl_theory_vcost_table(vc, n, v, k);
}


int sl_cli_deploy_option(int c, const char *arg, sl_analyze_opts *o, sl_theory_vcost *vc, int *have_vc, int *rc)
{
    long v = 0;
    double d;
    switch (c) {
    case 'c': *rc = sl_cli_double_in("--c", arg, 0, 0, 1e6, 0, &o->c); return 1;
    case 'v':
    case 'V':
        if (*have_vc) sl_theory_vcost_free(vc);
        *have_vc = 0;
        if (c == 'V') *rc = sl_cli_vtable(arg, vc);
        else if (!(*rc = sl_cli_double_in("--v-linear", arg, 0, 0, 1e6, 0, &d))) *rc = sl_theory_vcost_linear(vc, d);
        *have_vc = !*rc;
        return 1;
    case 'G':
        *rc = sl_cli_long_in("--gamma-max", arg, 1, SL_ANALYZE_GMAX, &v);
        if (!*rc) o->gamma_max = (size_t)v;
        return 1;
    case 'B':
        *rc = sl_cli_long_in("--boot", arg, 0, 1000000, &v);
        if (!*rc) o->n_boot = (size_t)v;
        return 1;
    case 'L': *rc = sl_cli_double_in("--ci", arg, 0, 1, 1, 1, &o->ci_level); return 1;
    case 's': *rc = sl_cli_u64("--seed", arg, &o->seed); return 1;
    default: return 0;
    }
}
