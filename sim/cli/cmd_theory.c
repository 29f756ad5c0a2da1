/*
 * cmd_theory.c: `speclab theory`, the closed forms of THEORY.md over a grid of (α, γ, c, ĉ).
 *
 * Every value is checked before anything is printed, so bad input gives one message and exit 2
 * with empty stdout. One combination with --format json is one JSON object; a sweep is an array.
 */
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sl_cli.h"
#include "sl_theory.h"

/* A grid larger than this is almost certainly a typo in a range. */
#define MAX_ROWS 1000000

static const char usage_text[] =
    "usage: speclab theory --alpha A --gamma G [--c C] [--c-hat H] [options]\n"
    "       speclab theory --alpha A --optimal [--gamma-cap N] [--c C] [options]\n"
    "       speclab theory --beta b1,...,bG [--c C] [options]\n"
    "\n"
    "Closed forms for speculative decoding (notation of THEORY.md): tokens per iteration N (mean,\n"
    "variance, pmf), the walltime factor (Theorem 3.8, and its generalisation with a verification\n"
    "cost v(n)), the operation factor (Theorem 3.11), Corollary 3.9 and the optimal gamma.\n"
    "\n"
    "--alpha, --gamma, --c and --c-hat each take a value, a list 'a,b,c' or a range\n"
    "'start:stop:step' (for gamma 'start:stop' steps by 1); one row per combination.\n"
    "\n"
    "  --alpha A           expected acceptance rate alpha, in [0, 1]\n"
    "  --gamma G           draft tokens per iteration, integer in [1, 1000000]\n"
    "  --c C               time of a draft step / time of a target step, >= 0 (default 0)\n"
    "  --c-hat H           draft / target arithmetic operations per token, >= 0 (default 0)\n"
    "  --v-const X         verification cost v(n) = X for every n, X > 0\n"
    "  --v-table N:V,...   measured v(n), e.g. 1:1,2:1.02,3:1.05; every gamma+1 used must be\n"
    "                      listed; v(1) = 1 by definition\n"
    "  --v-linear S        v(n) = 1 + S*(n-1)\n"
    "                      (default cost model: v = 1, Theorem 3.8's assumption)\n"
    "  --beta b1,...,bG    position-dependent acceptance beta_1..beta_G instead of --alpha and\n"
    "                      --gamma (gamma = G; Corollary 3.9 columns use beta_1)\n"
    "  --optimal           search gamma = 1..cap for the largest walltime factor (not with --gamma;\n"
    "                      with --beta the search stops at G; with --v-table at the last listed n)\n"
    "  --gamma-cap N       cap of the --optimal search (default 64)\n"
    "  --pmf               also print P(N = k) for k = 1..gamma+1\n"
    "  --format F          table (default), csv or json\n"
    "  -h, --help          this text\n"
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

typedef struct {
    double *alpha;  /* (n_alpha) */
    size_t n_alpha;
    double *gamma;  /* (n_gamma) integral values */
    size_t n_gamma;
    double *c;      /* (n_c) */
    size_t n_c;
    double *c_hat;  /* (n_c_hat) */
    size_t n_c_hat;
    double *beta;   /* (n_beta) β_1..β_G, or NULL */
    size_t n_beta;
    const char *vflag; /* the flag that set vc, or NULL for v ≡ 1 */
    sl_theory_vcost vc;
    int optimal;
    long gamma_cap;
    int have_cap;
    int pmf;
    sl_format fmt;
} opts;

static void opts_free(opts *o)
{
    free(o->alpha);
    free(o->gamma);
    free(o->c);
    free(o->c_hat);
    free(o->beta);
    sl_theory_vcost_free(&o->vc);
}

/* Replaces *vals with the sweep parsed from s (a repeated flag: the last one wins). */
static int parse_sweep(const char *flag, const char *s, double **vals, size_t *n)
{
    free(*vals);
    *vals = NULL;
    *n = 0;
    return sl_cli_sweep(flag, s, vals, n);
}

/* "1:1,2:1.02,3:1.05" -> a table cost model. */
static int parse_vtable(const char *s, sl_theory_vcost *vc)
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
            rc = sl_fail(SL_EINPUT, "--v-table: entry '%s' is not n:v (e.g. 2:1.02)", tok);
            break;
        }
        *colon = 0;
        rc = sl_cli_long_in("--v-table", tok, 1, SL_THEORY_GAMMA_MAX + 1L, &n[count]);
        if (!rc) rc = sl_cli_double_in("--v-table", colon + 1, 0, 1, INFINITY, 1, &v[count]);
        if (!rc && n[count] == 1 && fabs(v[count] - 1) > 1e-9)
            rc = sl_fail(SL_EINPUT, "--v-table: v(1) = %s but v(1) = 1 by definition", colon + 1);
        for (size_t j = 0; !rc && j < count; j++)
            if (n[j] == n[count]) rc = sl_fail(SL_EINPUT, "--v-table: n = %ld appears twice", n[count]);
        count++;
    }
    if (!rc) rc = sl_theory_vcost_table(vc, n, v, count);
    free(buf);
    free(n);
    free(v);
    return rc;
}

static int set_vflag(opts *o, const char *flag)
{
    if (o->vflag)
        return sl_fail(SL_EINPUT, "%s: conflicts with %s (give one verification cost model)", flag, o->vflag);
    o->vflag = flag;
    return SL_OK;
}

/* Checks every swept value and every combination of flags; names the flag in each message. */
static int validate(opts *o)
{
    int rc;
    if (o->beta) {
        if (o->alpha) return sl_fail(SL_EINPUT, "--alpha: conflicts with --beta (which gives the acceptance)");
        if (o->gamma) return sl_fail(SL_EINPUT, "--gamma: conflicts with --beta (gamma is the number of betas)");
        if (o->n_beta > SL_THEORY_GAMMA_MAX)
            return sl_fail(SL_EINPUT, "--beta: %zu values, more than %d", o->n_beta, SL_THEORY_GAMMA_MAX);
        for (size_t i = 0; i < o->n_beta; i++)
            if ((rc = sl_theory_check_alpha("--beta", o->beta[i]))) return rc;
    } else {
        if (!o->alpha) return sl_fail(SL_EINPUT, "--alpha: required (or give --beta)");
        for (size_t i = 0; i < o->n_alpha; i++)
            if ((rc = sl_theory_check_alpha("--alpha", o->alpha[i]))) return rc;
    }
    if (o->optimal && o->gamma)
        return sl_fail(SL_EINPUT, "--gamma: conflicts with --optimal (which searches gamma = 1..--gamma-cap)");
    if (o->have_cap && !o->optimal) return sl_fail(SL_EINPUT, "--gamma-cap: only used with --optimal");
    if (!o->beta && !o->optimal && !o->gamma) return sl_fail(SL_EINPUT, "--gamma: required (or give --optimal)");
    for (size_t i = 0; i < o->n_gamma; i++) {
        double g = o->gamma[i];
        if (g != floor(g)) return sl_fail(SL_EINPUT, "--gamma: %g is not an integer", g);
        if (g < 1 || g > SL_THEORY_GAMMA_MAX)
            return sl_fail(SL_EINPUT, "--gamma: %g is outside [1, %d]", g, SL_THEORY_GAMMA_MAX);
    }
    for (size_t i = 0; i < o->n_c; i++)
        if ((rc = sl_theory_check_cost("--c", o->c[i]))) return rc;
    for (size_t i = 0; i < o->n_c_hat; i++)
        if ((rc = sl_theory_check_cost("--c-hat", o->c_hat[i]))) return rc;

    /* The γ values the cost model will be asked about: the swept ones, β's count, or 1..cap. */
    long g_lo, g_hi;
    if (o->optimal) {
        g_lo = 1;
        g_hi = o->beta && (long)o->n_beta < o->gamma_cap ? (long)o->n_beta : o->gamma_cap;
    } else if (o->beta) {
        g_lo = g_hi = (long)o->n_beta;
    } else {
        g_lo = g_hi = (long)o->gamma[0];
        for (size_t i = 0; i < o->n_gamma; i++) {
            if (o->gamma[i] < g_lo) g_lo = (long)o->gamma[i];
            if (o->gamma[i] > g_hi) g_hi = (long)o->gamma[i];
        }
    }
    if (o->vflag && o->vc.kind == SL_VCOST_TABLE) {
        double v;
        if (o->optimal && sl_theory_vcost_eval(&o->vc, 2, &v))
            return sl_fail(SL_EINPUT, "--v-table: no entry for n = 2 (--optimal starts at gamma = 1)");
        for (size_t i = 0; !o->optimal && i < (o->beta ? 1 : o->n_gamma); i++) {
            long n = (o->beta ? (long)o->n_beta : (long)o->gamma[i]) + 1;
            if (sl_theory_vcost_eval(&o->vc, n, &v))
                return sl_fail(SL_EINPUT, "--v-table: no entry for n = %ld (gamma = %ld verifies gamma+1 tokens)",
                               n, n - 1);
        }
        sl_err_clear();
    }
    if (o->vflag && o->vc.kind == SL_VCOST_LINEAR) {
        /* v is linear in n, so it is positive on [g_lo+1, g_hi+1] iff it is at both ends. */
        long ends[2] = {g_lo + 1, g_hi + 1};
        for (int e = 0; e < 2; e++) {
            double v = 1 + o->vc.slope * (double)(ends[e] - 1);
            if (!(v > 0))
                return sl_fail(SL_EINPUT, "--v-linear: slope %g gives v(%ld) = %g, not > 0", o->vc.slope,
                               ends[e], v);
        }
    }
    double rows = (double)(o->beta ? 1 : o->n_alpha) * (double)(o->n_gamma ? o->n_gamma : 1) *
                  (double)o->n_c * (double)o->n_c_hat;
    if (rows > MAX_ROWS) return sl_fail(SL_EINPUT, "the sweep has %.0f combinations, more than %d", rows, MAX_ROWS);
    if (o->pmf && rows * (double)(g_hi + 1) > 10.0 * MAX_ROWS)
        return sl_fail(SL_EINPUT, "--pmf: %.0f combinations with gamma up to %ld give too many pmf values", rows, g_hi);
    return SL_OK;
}

static int parse(int argc, char **argv, opts *o, int *help)
{
    enum { O_ALPHA = 256, O_GAMMA, O_C, O_CHAT, O_VCONST, O_VTABLE, O_VLINEAR, O_OPTIMAL, O_CAP, O_BETA,
           O_PMF, O_FORMAT };
    static const struct option longopts[] = {
        {"alpha", required_argument, 0, O_ALPHA},     {"gamma", required_argument, 0, O_GAMMA},
        {"c", required_argument, 0, O_C},             {"c-hat", required_argument, 0, O_CHAT},
        {"v-const", required_argument, 0, O_VCONST},  {"v-table", required_argument, 0, O_VTABLE},
        {"v-linear", required_argument, 0, O_VLINEAR}, {"optimal", no_argument, 0, O_OPTIMAL},
        {"gamma-cap", required_argument, 0, O_CAP},   {"beta", required_argument, 0, O_BETA},
        {"pmf", no_argument, 0, O_PMF},               {"format", required_argument, 0, O_FORMAT},
        {"help", no_argument, 0, 'h'},                {0, 0, 0, 0},
    };
    int rc = SL_OK, ch;
    double x;
    opterr = 0;
    optind = 0; /* GNU getopt: full reinitialisation, so the parser is reusable */
    while (!rc && (ch = getopt_long(argc, argv, ":h", longopts, NULL)) != -1) {
        switch (ch) {
        case O_ALPHA: rc = parse_sweep("--alpha", optarg, &o->alpha, &o->n_alpha); break;
        case O_GAMMA: rc = parse_sweep("--gamma", optarg, &o->gamma, &o->n_gamma); break;
        case O_C: rc = parse_sweep("--c", optarg, &o->c, &o->n_c); break;
        case O_CHAT: rc = parse_sweep("--c-hat", optarg, &o->c_hat, &o->n_c_hat); break;
        case O_BETA: rc = parse_sweep("--beta", optarg, &o->beta, &o->n_beta); break;
        case O_VCONST:
            rc = set_vflag(o, "--v-const");
            if (!rc) rc = sl_cli_double_in("--v-const", optarg, 0, 1, INFINITY, 1, &x);
            if (!rc) rc = sl_theory_vcost_const(&o->vc, x);
            break;
        case O_VLINEAR:
            rc = set_vflag(o, "--v-linear");
            if (!rc) rc = sl_cli_double("--v-linear", optarg, &x);
            if (!rc) rc = sl_theory_vcost_linear(&o->vc, x);
            break;
        case O_VTABLE:
            rc = set_vflag(o, "--v-table");
            if (!rc) rc = parse_vtable(optarg, &o->vc);
            break;
        case O_OPTIMAL: o->optimal = 1; break;
        case O_CAP:
            rc = sl_cli_long_in("--gamma-cap", optarg, 1, SL_THEORY_GAMMA_MAX, &o->gamma_cap);
            o->have_cap = 1;
            break;
        case O_PMF: o->pmf = 1; break;
        case O_FORMAT: rc = sl_format_parse(optarg, &o->fmt); break;
        case 'h': *help = 1; return SL_OK;
        case ':': rc = sl_fail(SL_EINPUT, "%s: needs a value", argv[optind - 1]); break;
        default:
            /* optopt names an unknown short option (argv may hold it grouped, as in -xy); for an
             * unknown long option it is 0 and the word itself is argv[optind - 1]. */
            if (optopt > 0 && optopt < 256) rc = sl_fail(SL_EINPUT, "unknown option '-%c' (speclab theory --help)", optopt);
            else rc = sl_fail(SL_EINPUT, "unknown option '%s' (speclab theory --help)", argv[optind - 1]);
            break;
        }
    }
    if (!rc && optind < argc) rc = sl_fail(SL_EINPUT, "unexpected argument '%s'", argv[optind]);
    return rc;
}

/* Column indices of the main table; -1 when a column is absent in this output. */
typedef struct {
    long alpha, beta, gamma, c, c_hat, v_verify, en, var, wf1, wf, ops, gt_c, bound, g_opt, wf_opt, cap, at_cap,
        n_ties, ties;
} cols;

static int build_columns(sl_table *t, const opts *o, cols *k)
{
    int json = o->fmt == SL_FMT_JSON;
    long n = 0;
    *k = (cols){-1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1};
    int rc = SL_OK;
#define ADD(field, name, type, fmt)                                       \
    do {                                                                  \
        if (!rc) rc = sl_table_add_col(t, name, type, fmt);               \
        k->field = n++;                                                   \
    } while (0)
    if (o->beta) {
        if (!json) ADD(beta, "beta", SL_COL_STRING, NULL); /* JSON gets a real array instead */
    } else {
        ADD(alpha, "alpha", SL_COL_DOUBLE, "%.4g");
    }
    ADD(gamma, "gamma", SL_COL_INT, NULL);
    ADD(c, "c", SL_COL_DOUBLE, "%.4g");
    ADD(c_hat, "c_hat", SL_COL_DOUBLE, "%.4g");
    ADD(v_verify, "v_verify", SL_COL_DOUBLE, "%.4g");
    ADD(en, "expected_tokens", SL_COL_DOUBLE, "%.6f");
    ADD(var, "var_tokens", SL_COL_DOUBLE, "%.6f");
    ADD(wf1, "walltime_factor_v1", SL_COL_DOUBLE, "%.6f");
    ADD(wf, "walltime_factor", SL_COL_DOUBLE, "%.6f");
    ADD(ops, "ops_factor", SL_COL_DOUBLE, "%.6f");
    ADD(gt_c, "alpha_gt_c", SL_COL_INT, NULL);
    ADD(bound, "cor39_bound", SL_COL_DOUBLE, "%.6f");
    if (o->optimal) {
        ADD(g_opt, "gamma_opt", SL_COL_INT, NULL);
        ADD(wf_opt, "walltime_factor_opt", SL_COL_DOUBLE, "%.6f");
        ADD(cap, "gamma_cap", SL_COL_INT, NULL);
        ADD(at_cap, "at_cap", SL_COL_INT, NULL);
        ADD(n_ties, "n_ties", SL_COL_INT, NULL);
        if (!json) ADD(ties, "ties", SL_COL_STRING, NULL);
    }
#undef ADD
    return rc;
}

/* The pmf of one row, kept for JSON output and the pmf table. */
typedef struct {
    double alpha; /* NaN in β mode */
    int gamma;
    double *pmf;  /* (gamma+1) */
} pmf_rec;

/* "a,b,c", each number in the fewest digits (15 to 17) that read back as the same double, so
 * that 0.9 prints as 0.9; malloc'd. */
static char *join_doubles(const double *x, size_t n)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    if (!f) return NULL;
    for (size_t i = 0; i < n; i++) {
        char num[32];
        for (int digits = 15; digits <= 17; digits++) {
            snprintf(num, sizeof num, "%.*g", digits, x[i]);
            if (strtod(num, NULL) == x[i]) break;
        }
        fprintf(f, "%s%s", i ? "," : "", num);
    }
    fclose(f);
    return buf;
}

/* Ascending integers as ranges, "3 5-7 9"; malloc'd. */
static char *join_ranges(const int *x, size_t n)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    if (!f) return NULL;
    for (size_t i = 0, j; i < n; i = j) {
        for (j = i + 1; j < n && x[j] == x[j - 1] + 1;) j++;
        if (j - i > 1) fprintf(f, "%s%d-%d", i ? " " : "", x[i], x[j - 1]);
        else fprintf(f, "%s%d", i ? " " : "", x[i]);
    }
    fclose(f);
    return buf;
}

/* One row object: the table's columns, then the arrays the table cannot hold. */
static int write_json_object(const sl_table *t, size_t row, const opts *o, const sl_theory_optimum *opt,
                             const pmf_rec *pr, FILE *f)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *m = open_memstream(&buf, &len);
    if (!m) return sl_fail(SL_EFAIL, "out of memory");
    int rc = sl_table_write_json_row(t, row, m);
    fclose(m);
    if (rc) {
        free(buf);
        return rc;
    }
    buf[len - 1] = 0; /* drop the closing brace; the extra keys go before it */
    fputs(buf, f);
    free(buf);
    if (o->beta) {
        fputs(", \"beta\": [", f);
        for (size_t i = 0; i < o->n_beta; i++) fprintf(f, "%s%.17g", i ? ", " : "", o->beta[i]);
        fputc(']', f);
    }
    if (opt) {
        fputs(", \"ties\": [", f);
        for (size_t i = 0; i < opt->n_ties; i++) fprintf(f, "%s%d", i ? ", " : "", opt->ties[i]);
        fputc(']', f);
    }
    if (pr) {
        fputs(", \"pmf\": [", f);
        for (int i = 0; i <= pr->gamma; i++) fprintf(f, "%s%.17g", i ? ", " : "", pr->pmf[i]);
        fputc(']', f);
    }
    fputc('}', f);
    return SL_OK;
}

/* Fills the current (last) row for one combination. g is γ (the best γ in --optimal mode). */
static int fill_row(sl_table *t, const cols *k, const opts *o, double alpha, int g, double c, double c_hat,
                    const sl_theory_optimum *opt)
{
    double en, var, wf1, wf, ops, v, bound;
    int improves, rc;
    const double *b = o->beta;
    const sl_theory_vcost *vc = o->vflag ? &o->vc : NULL;
    if (b) {
        rc = sl_theory_beta_expected_tokens(b, g, &en);
        if (!rc) rc = sl_theory_beta_var_tokens(b, g, &var);
        if (!rc) rc = sl_theory_beta_walltime_factor_v(b, g, c, NULL, &wf1);
        if (!rc) rc = sl_theory_beta_walltime_factor_v(b, g, c, vc, &wf);
        if (!rc) rc = sl_theory_beta_ops_factor(b, g, c_hat, &ops);
        if (!rc) rc = sl_theory_cor39(b[0], c, &improves, &bound);
    } else {
        rc = sl_theory_expected_tokens(alpha, g, &en);
        if (!rc) rc = sl_theory_var_tokens(alpha, g, &var);
        if (!rc) rc = sl_theory_walltime_factor(alpha, g, c, &wf1);
        if (!rc) rc = sl_theory_walltime_factor_v(alpha, g, c, vc, &wf);
        if (!rc) rc = sl_theory_ops_factor(alpha, g, c_hat, &ops);
        if (!rc) rc = sl_theory_cor39(alpha, c, &improves, &bound);
    }
    if (!rc) rc = sl_theory_vcost_eval(vc, (long)g + 1, &v);
    if (rc) return rc;
    if (k->alpha >= 0) sl_table_set_double(t, k->alpha, alpha);
    if (k->beta >= 0) {
        char *s = join_doubles(b, (size_t)g);
        if (!s) return sl_fail(SL_EFAIL, "out of memory");
        rc = sl_table_set_string(t, k->beta, s);
        free(s);
        if (rc) return rc;
    }
    sl_table_set_int(t, k->gamma, g);
    sl_table_set_double(t, k->c, c);
    sl_table_set_double(t, k->c_hat, c_hat);
    sl_table_set_double(t, k->v_verify, v);
    sl_table_set_double(t, k->en, en);
    sl_table_set_double(t, k->var, var);
    sl_table_set_double(t, k->wf1, wf1);
    sl_table_set_double(t, k->wf, wf);
    sl_table_set_double(t, k->ops, ops);
    sl_table_set_int(t, k->gt_c, improves);
    sl_table_set_double(t, k->bound, bound);
    if (opt) {
        sl_table_set_int(t, k->g_opt, opt->gamma_opt);
        sl_table_set_double(t, k->wf_opt, opt->factor_opt);
        sl_table_set_int(t, k->cap, opt->gamma_cap);
        sl_table_set_int(t, k->at_cap, opt->at_cap);
        sl_table_set_int(t, k->n_ties, (int64_t)opt->n_ties);
        if (k->ties >= 0) {
            char *s = join_ranges(opt->ties, opt->n_ties);
            if (!s) return sl_fail(SL_EFAIL, "out of memory");
            rc = sl_table_set_string(t, k->ties, s);
            free(s);
        }
    }
    return rc;
}

static int run(opts *o)
{
    sl_table *t = sl_table_alloc("theory");
    sl_table *tp = o->pmf ? sl_table_alloc("pmf") : NULL;
    if (!t || (o->pmf && !tp)) {
        sl_table_free(t);
        sl_table_free(tp);
        return sl_fail(SL_EFAIL, "out of memory");
    }
    cols k;
    int rc = build_columns(t, o, &k);
    if (!rc && tp) {
        if (o->beta) rc = sl_table_add_col(tp, "beta", SL_COL_STRING, NULL);
        else rc = sl_table_add_col(tp, "alpha", SL_COL_DOUBLE, "%.4g");
        if (!rc) rc = sl_table_add_col(tp, "gamma", SL_COL_INT, NULL);
        if (!rc) rc = sl_table_add_col(tp, "k", SL_COL_INT, NULL);
        if (!rc) rc = sl_table_add_col(tp, "pmf", SL_COL_DOUBLE, "%.6g");
    }

    size_t n_a = o->beta ? 1 : o->n_alpha, n_g = o->optimal || o->beta ? 1 : o->n_gamma;
    size_t n_rows = n_a * n_g * o->n_c * o->n_c_hat;
    int json = o->fmt == SL_FMT_JSON;
    /* JSON rows need their ties and pmf at print time; keep them per row. */
    sl_theory_optimum *opts_row = o->optimal ? sl_calloc(n_rows, sizeof *opts_row) : NULL;
    pmf_rec *pmfs = o->pmf ? sl_calloc(n_rows, sizeof *pmfs) : NULL;
    if ((o->optimal && !opts_row) || (o->pmf && !pmfs)) rc = SL_EFAIL;

    const sl_theory_vcost *vc = o->vflag ? &o->vc : NULL;
    size_t r = 0;
    for (size_t ia = 0; !rc && ia < n_a; ia++)
        for (size_t ig = 0; !rc && ig < n_g; ig++)
            for (size_t ic = 0; !rc && ic < o->n_c; ic++)
                for (size_t ih = 0; !rc && ih < o->n_c_hat; ih++, r++) {
                    double alpha = o->beta ? NAN : o->alpha[ia], c = o->c[ic], c_hat = o->c_hat[ih];
                    int g = o->beta ? (int)o->n_beta : o->optimal ? 0 : (int)o->gamma[ig];
                    sl_theory_optimum *opt = o->optimal ? &opts_row[r] : NULL;
                    if (opt) {
                        rc = o->beta ? sl_theory_beta_optimal_gamma(o->beta, (int)o->n_beta, c, vc,
                                                                    (int)o->gamma_cap, opt)
                                     : sl_theory_optimal_gamma(alpha, c, vc, (int)o->gamma_cap, opt);
                        g = opt->gamma_best;
                    }
                    if (!rc) rc = sl_table_add_row(t);
                    if (!rc) rc = fill_row(t, &k, o, alpha, g, c, c_hat, opt);
                    if (!rc && pmfs) {
                        pmf_rec *pr = &pmfs[r];
                        pr->alpha = alpha;
                        pr->gamma = g;
                        pr->pmf = sl_malloc(((size_t)g + 1) * sizeof *pr->pmf);
                        if (!pr->pmf) rc = SL_EFAIL;
                        else rc = o->beta ? sl_theory_beta_pmf(o->beta, g, pr->pmf)
                                          : sl_theory_pmf(alpha, g, pr->pmf);
                        /* The pmf table lists each (alpha, gamma) once; c does not change it. */
                        int seen = 0;
                        for (size_t j = 0; j < r && !seen; j++)
                            seen = pmfs[j].gamma == g && (o->beta || pmfs[j].alpha == alpha);
                        for (int i = 0; !rc && !seen && !json && i <= g; i++) {
                            if ((rc = sl_table_add_row(tp))) break;
                            if (o->beta) {
                                char *s = join_doubles(o->beta, (size_t)g);
                                rc = s ? sl_table_set_string(tp, 0, s) : sl_fail(SL_EFAIL, "out of memory");
                                free(s);
                            } else {
                                sl_table_set_double(tp, 0, alpha);
                            }
                            sl_table_set_int(tp, 1, g);
                            sl_table_set_int(tp, 2, i + 1);
                            sl_table_set_double(tp, 3, pr->pmf[i]);
                        }
                    }
                }

    if (!rc) {
        if (json) {
            if (n_rows > 1) fputc('[', stdout);
            for (size_t i = 0; !rc && i < n_rows; i++) {
                if (i) fputs(",\n ", stdout);
                rc = write_json_object(t, i, o, opts_row ? &opts_row[i] : NULL, pmfs ? &pmfs[i] : NULL, stdout);
            }
            if (n_rows > 1) fputc(']', stdout);
            fputc('\n', stdout);
        } else if (tp) {
            sl_table *both[2] = {t, tp};
            rc = sl_report_write(both, 2, stdout, o->fmt);
        } else {
            rc = sl_table_write(t, stdout, o->fmt);
        }
        if (!rc && (fflush(stdout) || ferror(stdout))) rc = sl_fail(SL_EFAIL, "writing to stdout failed");
    }
    for (size_t i = 0; opts_row && i < n_rows; i++) sl_theory_optimum_free(&opts_row[i]);
    for (size_t i = 0; pmfs && i < n_rows; i++) free(pmfs[i].pmf);
    free(opts_row);
    free(pmfs);
    sl_table_free(t);
    sl_table_free(tp);
    return rc;
}

int sl_cmd_theory(int argc, char **argv)
{
    opts o = {.gamma_cap = SL_THEORY_GAMMA_CAP_DEFAULT, .fmt = SL_FMT_TABLE};
    int help = 0;
    int rc = parse(argc, argv, &o, &help);
    if (!rc && help) {
        fputs(usage_text, stdout);
        opts_free(&o);
        return 0;
    }
    /* c and ĉ default to 0: free drafting, the most favourable case (stated in --help). */
    if (!rc && !o.c) rc = parse_sweep("--c", "0", &o.c, &o.n_c);
    if (!rc && !o.c_hat) rc = parse_sweep("--c-hat", "0", &o.c_hat, &o.n_c_hat);
    if (!rc) rc = validate(&o);
    if (!rc) rc = run(&o);
    opts_free(&o);
    return rc;
}
