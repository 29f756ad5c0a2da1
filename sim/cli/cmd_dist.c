/* cmd_dist.c: `speclab dist`: standardise logits, or compare a target p with a draft q. */
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sl_cli.h"
#include "sl_dist.h"
#include "sl_spec.h"

static void usage(void)
{
    printf("usage: speclab dist --p P --q Q [--tol T] [--lenience L] [--format table|csv|json]\n"
           "       speclab dist --logits Z [--temperature T] [--top-k K] [--top-p P] [--min-p M] [--format ...]\n"
           "\n"
           "Compares a target pmf p with a draft pmf q: beta = sum min(p, q) (the acceptance probability of\n"
           "one drafted token), D_LK = 1 - beta, total variation, KL both ways, entropies (nats), the\n"
           "residual norm(max(0, p - q)) that Algorithm 1 resamples from after a rejection, and what the\n"
           "other acceptance rules give: lenient alpha_l = sum min(q, p/l), sampler-match sum p q, and\n"
           "non-iterative rejection min_x q/p. Or standardises logits (temperature, then top-k, top-p,\n"
           "min-p, each renormalising; temperature 0 = one-hot argmax, lowest id on ties).\n"
           "\n"
           "  --p, --q LIST      comma-separated probabilities, or @FILE with whitespace-separated values\n"
           "  --tol T            accepted |sum - 1| (default 1e-6)\n"
           "  --lenience L       l in (0, 1] for alpha_l (default 1)\n"
           "  --logits LIST      comma-separated logits, or @FILE\n"
           "  --format F         table (default), csv or json\n");
}

/* Reads "a,b,c" or "@file" (whitespace-separated) into a malloc'd vector. */
static int read_vector(const char *flag, const char *s, double **out, size_t *n)
{
    if (s[0] != '@') {
        if (strchr(s, ':')) return sl_fail(SL_EINPUT, "%s: '%s': ranges are not allowed here", flag, s);
        return sl_cli_sweep(flag, s, out, n);
    }
    FILE *f = fopen(s + 1, "r");
    if (!f) return sl_fail(SL_EINPUT, "%s: cannot open %s", flag, s + 1);
    size_t cap = 1024, len = 0;
    double *v = sl_malloc(cap * sizeof *v);
    char tok[128];
    int rc = v ? SL_OK : SL_EFAIL;
    while (rc == SL_OK && fscanf(f, "%127s", tok) == 1) {
        if (len == cap) {
            double *nv = realloc(v, 2 * cap * sizeof *v);
            if (!nv) {
                rc = sl_fail(SL_EFAIL, "out of memory");
                break;
            }
            v = nv;
            cap *= 2;
        }
        rc = sl_cli_double(flag, tok, &v[len++]);
    }
    fclose(f);
    if (rc == SL_OK && len == 0) rc = sl_fail(SL_EINPUT, "%s: %s holds no numbers", flag, s + 1);
    if (rc) {
        free(v);
        return rc;
    }
    *out = v;
    *n = len;
    return SL_OK;
}

static int compare(const double *p, const double *q, size_t V, double l, sl_format fmt)
{
    double *res = sl_malloc(V * sizeof *res);
    if (!res) return SL_EFAIL;
    double beta = sl_dist_beta(p, q, V), alpha_l = 0, match = 0, nonit = INFINITY;
    for (size_t x = 0; x < V; x++) {
        alpha_l += fmin(q[x], p[x] / l);
        match += p[x] * q[x];
        if (p[x] > 0) nonit = fmin(nonit, q[x] / p[x]);
    }
    double z = sl_dist_residual(p, q, V, res);
    sl_table *s = sl_table_alloc("summary"), *r = sl_table_alloc("per_token");
    const char *cols[] = {"vocab", "beta", "d_lk", "tv", "kl_p_q", "kl_q_p", "entropy_p", "entropy_q",
                          "rejection_prob", "lenience", "alpha_lenient", "alpha_sampler_match",
                          "alpha_nonit_rejection"};
    for (size_t c = 0; c < sizeof cols / sizeof cols[0]; c++)
        sl_table_add_col(s, cols[c], c == 0 ? SL_COL_INT : SL_COL_DOUBLE, c == 0 ? NULL : "%.6g");
    sl_table_add_row(s);
    double vals[] = {0, beta, sl_dist_dlk(p, q, V), sl_dist_tv(p, q, V), sl_dist_kl(p, q, V), sl_dist_kl(q, p, V),
                     sl_dist_entropy(p, V), sl_dist_entropy(q, V), z, l, alpha_l, match, nonit};
    sl_table_set_int(s, 0, (int64_t)V);
    for (size_t c = 1; c < sizeof vals / sizeof vals[0]; c++) sl_table_set_double(s, c, vals[c]);
    sl_table_add_col(r, "token", SL_COL_INT, NULL);
    sl_table_add_col(r, "p", SL_COL_DOUBLE, "%.6g");
    sl_table_add_col(r, "q", SL_COL_DOUBLE, "%.6g");
    sl_table_add_col(r, "min_pq", SL_COL_DOUBLE, "%.6g");
    sl_table_add_col(r, "residual", SL_COL_DOUBLE, "%.6g");
    for (size_t x = 0; x < V; x++) {
        sl_table_add_row(r);
        sl_table_set_int(r, 0, (int64_t)x);
        sl_table_set_double(r, 1, p[x]);
        sl_table_set_double(r, 2, q[x]);
        sl_table_set_double(r, 3, fmin(p[x], q[x]));
        /* With beta = 1 a rejection never happens and the residual is undefined: shown as null. */
        sl_table_set_double(r, 4, z > 0 ? res[x] : NAN);
    }
    sl_table *ts[] = {s, r};
    int rc = sl_report_write(ts, 2, stdout, fmt);
    sl_table_free(s);
    sl_table_free(r);
    free(res);
    return rc;
}

int sl_cmd_dist(int argc, char **argv)
{
    static const struct option opts[] = {
        {"p", required_argument, 0, 'p'},           {"q", required_argument, 0, 'q'},
        {"tol", required_argument, 0, 't'},         {"lenience", required_argument, 0, 'l'},
        {"logits", required_argument, 0, 'z'},      {"temperature", required_argument, 0, 'T'},
        {"top-k", required_argument, 0, 'k'},       {"top-p", required_argument, 0, 'P'},
        {"min-p", required_argument, 0, 'm'},       {"format", required_argument, 0, 'f'},
        {"help", no_argument, 0, 'h'},              {0, 0, 0, 0},
    };
    const char *ps = NULL, *qs = NULL, *zs = NULL;
    double tol = SL_DIST_SUM_TOL, l = 1;
    sl_sampling samp = SL_SAMPLING_DEFAULT;
    sl_format fmt = SL_FMT_TABLE;
    long k;
    int c, rc = SL_OK;
    optind = 1;
    opterr = 0;
    while (rc == SL_OK && (c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        switch (c) {
        case 'p': ps = optarg; break;
        case 'q': qs = optarg; break;
        case 'z': zs = optarg; break;
        case 't': rc = sl_cli_double_in("--tol", optarg, 0, 0, 1, 0, &tol); break;
        case 'l': rc = sl_cli_double_in("--lenience", optarg, 0, 1, 1, 0, &l); break;
        case 'T': rc = sl_cli_double_in("--temperature", optarg, 0, 0, 1e6, 0, &samp.temperature); break;
        case 'k':
            rc = sl_cli_long_in("--top-k", optarg, 0, 1L << 30, &k);
            samp.top_k = (size_t)k;
            break;
        case 'P': rc = sl_cli_double_in("--top-p", optarg, 0, 1, 1, 0, &samp.top_p); break;
        case 'm': rc = sl_cli_double_in("--min-p", optarg, 0, 0, 1, 1, &samp.min_p); break;
        case 'f': rc = sl_format_parse(optarg, &fmt); break;
        case 'h': usage(); return 0;
        default: return sl_fail(SL_EINPUT, "unknown or incomplete option '%s' (see --help)", argv[optind - 1]);
        }
    }
    if (rc) return rc;
    if (optind < argc) return sl_fail(SL_EINPUT, "unexpected argument '%s'", argv[optind]);
    double *p = NULL, *q = NULL;
    size_t np = 0, nq = 0;
    if (zs) {
        if (ps || qs) return sl_fail(SL_EINPUT, "--logits cannot be combined with --p/--q");
        rc = read_vector("--logits", zs, &p, &np);
        sl_dist_work *w = rc ? NULL : sl_dist_work_alloc(np);
        double *out = rc ? NULL : sl_malloc(np * sizeof *out);
        if (!rc && (!w || !out)) rc = SL_EFAIL;
        if (!rc) rc = sl_dist_standardise(p, np, &samp, out, w);
        if (!rc) {
            sl_table *t = sl_table_alloc("standardised");
            sl_table_add_col(t, "token", SL_COL_INT, NULL);
            sl_table_add_col(t, "logit", SL_COL_DOUBLE, "%.6g");
            sl_table_add_col(t, "p", SL_COL_DOUBLE, "%.6g");
            for (size_t x = 0; x < np; x++) {
                sl_table_add_row(t);
                sl_table_set_int(t, 0, (int64_t)x);
                sl_table_set_double(t, 1, p[x]);
                sl_table_set_double(t, 2, out[x]);
            }
            rc = sl_table_write(t, stdout, fmt);
            sl_table_free(t);
        }
        sl_dist_work_free(w);
        free(out);
        free(p);
        return rc;
    }
    if (!ps || !qs) return sl_fail(SL_EINPUT, "give both --p and --q, or --logits (see --help)");
    rc = read_vector("--p", ps, &p, &np);
    if (!rc) rc = read_vector("--q", qs, &q, &nq);
    if (!rc && np != nq)
        rc = sl_fail(SL_EINPUT, "vocabulary mismatch: --p has %zu entries, --q has %zu", np, nq);
    if (!rc) rc = sl_dist_check(p, np, tol, "--p");
    if (!rc) rc = sl_dist_check(q, nq, tol, "--q");
    if (!rc) rc = compare(p, q, np, l, fmt);
    free(p);
    free(q);
    return rc;
}
