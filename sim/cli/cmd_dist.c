/* cmd_dist.c: `speclab dist`: standardise logits, or compare a target p with a draft q. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sl_cli.h"
#include "sl_dist.h"
#include "sl_dist_pair.h"
#include "sl_dist_report.h"

static const char about[] =
    "Compares a target pmf p with a draft pmf q: beta = sum min(p, q) (the acceptance probability of\n"
    "one drafted token), D_LK = 1 - beta, total variation, KL both ways, entropies (nats), the\n"
    "residual norm(max(0, p - q)) that Algorithm 1 resamples from after a rejection, and what the\n"
    "other acceptance rules give: lenient alpha_l = sum min(q, p/l), sampler-match sum p q, and\n"
    "non-iterative rejection min_x q/p. Or standardises logits (temperature, then top-k, top-p,\n"
    "min-p, each renormalising; temperature 0 = one-hot argmax, lowest id on ties).\n";

static int standardise(const char *zs, const sl_sampling *samp, sl_format fmt)
{
    double *z = NULL;
    size_t n = 0;
    sl_dist_standardised *r = NULL;
    sl_table *t = NULL;
    int rc = sl_cli_vector("--logits", zs, &z, &n);
    if (!rc) rc = sl_dist_standardised_compute(z, n, samp, &r);
    if (!rc) rc = sl_dist_standardised_report(r, &t);
    if (!rc) rc = sl_table_write(t, stdout, fmt);
    sl_table_free(t);
    sl_dist_standardised_free(r);
    free(z);
    return rc;
}

int sl_cmd_dist(int argc, char **argv)
{
    const char *ps = NULL, *qs = NULL, *zs = NULL;
    double tol = SL_DIST_SUM_TOL, l = 1;
    sl_sampling samp = SL_SAMPLING_DEFAULT;
    sl_format fmt = SL_FMT_TABLE;
    sl_cli c;
    sl_cli_init(&c, "dist", "--p P --q Q [--tol T] [--lenience L] [--format table|csv|json]\n"
                "       speclab dist --logits Z [--temperature T] [--top-k K] [--top-p P] [--min-p M] [--format ...]", about);
    sl_cli_string(&c, "p", "LIST", &ps, "target pmf: comma-separated probabilities, or @FILE with whitespace-separated values");
    sl_cli_string(&c, "q", "LIST", &qs, "draft pmf, as --p");
    sl_cli_dbl(&c, "tol", "T", &tol, 0, 1, 0, "accepted |sum - 1| (default 1e-6)");
    sl_cli_dbl(&c, "lenience", "L", &l, 0, 1, SL_OPT_LO_OPEN, "l in (0, 1] for alpha_l (default 1)");
    sl_cli_string(&c, "logits", "LIST", &zs, "comma-separated logits, or @FILE");
    sl_cli_group_sampling(&c, &samp);
    sl_cli_group_format(&c, &fmt);
    int rc = sl_cli_parse(&c, argc, argv, 0);
    if (rc == -1) return 0;
    if (rc) return rc;
    if (zs) {
        if (ps || qs) return sl_fail(SL_EINPUT, "--logits cannot be combined with --p/--q");
        return standardise(zs, &samp, fmt);
    }
    if (!ps || !qs) return sl_fail(SL_EINPUT, "give both --p and --q, or --logits (see --help)");
    double *p = NULL, *q = NULL;
    size_t np = 0, nq = 0, nt = 0;
    sl_dist_pair *r = NULL;
    sl_table *tables[2] = {0};
    rc = sl_cli_vector("--p", ps, &p, &np);
    if (!rc) rc = sl_cli_vector("--q", qs, &q, &nq);
    if (!rc && np != nq)
        rc = sl_fail(SL_EINPUT, "vocabulary mismatch: --p has %zu entries, --q has %zu", np, nq);
    /* Checked here too so that the message names the flag (the library names "p[i]"). */
    if (!rc) rc = sl_dist_check(p, np, tol, "--p");
    if (!rc) rc = sl_dist_check(q, nq, tol, "--q");
    if (!rc) rc = sl_dist_pair_compute(p, q, np, tol, l, &r);
    if (!rc) rc = sl_dist_pair_report(r, tables, &nt);
    if (!rc) rc = sl_report_write(tables, nt, stdout, fmt);
    for (size_t i = 0; i < nt; i++) sl_table_free(tables[i]);
    sl_dist_pair_free(r);
    free(p);
    free(q);
    return rc;
}
