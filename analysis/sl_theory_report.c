/* sl_theory_report.c: tables and JSON from an sl_theory_grid_result (see sl_theory_report.h). */
#include "sl_theory_report.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "sl_common.h"

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

/* Sets a string cell to a malloc'd string and frees it; NULL (a failed join) is out of memory. */
static int set_owned(sl_table *t, const char *col, char *s)
{
    if (!s) return sl_fail(SL_EFAIL, "out of memory");
    int rc = sl_table_sets(t, col, s);
    free(s);
    return rc;
}

/* The main table's columns in order; beta and ties are absent in JSON, the optimum's without optimal. */
static int theory_table(const sl_theory_grid_result *r, int json, sl_table **out)
{
    int rc = SL_OK;
    sl_colspec cols[20];
    size_t n = 0;
    if (r->beta) {
        if (!json) cols[n++] = (sl_colspec)SL_COL_S("beta");
    } else {
        cols[n++] = (sl_colspec)SL_COL_D("alpha", "%.4g");
    }
    static const sl_colspec common[] = {
        SL_COL_I("gamma"), SL_COL_D("c", "%.4g"), SL_COL_D("c_hat", "%.4g"), SL_COL_D("v_verify", "%.4g"),
        SL_COL_D("expected_tokens", "%.6f"), SL_COL_D("var_tokens", "%.6f"), SL_COL_D("walltime_factor_v1", "%.6f"),
        SL_COL_D("walltime_factor", "%.6f"), SL_COL_D("ops_factor", "%.6f"), SL_COL_I("alpha_gt_c"),
        SL_COL_D("cor39_bound", "%.6f")};
    static const sl_colspec optimum[] = {SL_COL_I("gamma_opt"), SL_COL_D("walltime_factor_opt", "%.6f"),
                                         SL_COL_I("gamma_cap"), SL_COL_I("at_cap"), SL_COL_I("n_ties")};
    memcpy(cols + n, common, sizeof common);
    n += sizeof common / sizeof common[0];
    if (r->optimal) {
        memcpy(cols + n, optimum, sizeof optimum);
        n += sizeof optimum / sizeof optimum[0];
        if (!json) cols[n++] = (sl_colspec)SL_COL_S("ties");
    }
    sl_table *t = *out = sl_table_new("theory", cols, n);
    for (size_t i = 0; !rc && i < r->n_points; i++) {
        const sl_theory_grid_point *p = &r->points[i];
        sl_table_row(t);
        if (!r->beta) sl_table_setd(t, "alpha", p->alpha);
        else if (!json) rc = set_owned(t, "beta", join_doubles(r->beta, (size_t)p->gamma));
        sl_table_seti(t, "gamma", p->gamma);
        sl_table_setd(t, "c", p->c);
        sl_table_setd(t, "c_hat", p->c_hat);
        sl_table_setd(t, "v_verify", p->v_verify);
        sl_table_setd(t, "expected_tokens", p->expected_tokens);
        sl_table_setd(t, "var_tokens", p->var_tokens);
        sl_table_setd(t, "walltime_factor_v1", p->walltime_factor_v1);
        sl_table_setd(t, "walltime_factor", p->walltime_factor);
        sl_table_setd(t, "ops_factor", p->ops_factor);
        sl_table_seti(t, "alpha_gt_c", p->alpha_gt_c);
        sl_table_setd(t, "cor39_bound", p->cor39_bound);
        if (r->optimal) {
            sl_table_seti(t, "gamma_opt", p->opt.gamma_opt);
            sl_table_setd(t, "walltime_factor_opt", p->opt.factor_opt);
            sl_table_seti(t, "gamma_cap", p->opt.gamma_cap);
            sl_table_seti(t, "at_cap", p->opt.at_cap);
            sl_table_seti(t, "n_ties", (int64_t)p->opt.n_ties);
            if (!json && !rc) rc = set_owned(t, "ties", join_ranges(p->opt.ties, p->opt.n_ties));
        }
    }
    return rc ? rc : sl_table_status(t);
}

/* P(N = k) per distinct (alpha, gamma): c does not change it, so a grid over c lists it once. */
static int pmf_table(const sl_theory_grid_result *r, sl_table **out)
{
    int rc = SL_OK;
    static const sl_colspec alpha_cols[] = {SL_COL_D("alpha", "%.4g"), SL_COL_I("gamma"), SL_COL_I("k"),
                                            SL_COL_D("pmf", "%.6g")};
    static const sl_colspec beta_cols[] = {SL_COL_S("beta"), SL_COL_I("gamma"), SL_COL_I("k"), SL_COL_D("pmf", "%.6g")};
    sl_table *t = *out = r->beta ? SL_TABLE_NEW("pmf", beta_cols) : SL_TABLE_NEW("pmf", alpha_cols);
    for (size_t i = 0; !rc && i < r->n_points; i++) {
        const sl_theory_grid_point *p = &r->points[i];
        int seen = 0;
        for (size_t j = 0; j < i && !seen; j++)
            seen = r->points[j].gamma == p->gamma && (r->beta || r->points[j].alpha == p->alpha);
        for (int k = 0; !rc && !seen && k <= p->gamma; k++) {
            sl_table_row(t);
            if (r->beta) rc = set_owned(t, "beta", join_doubles(r->beta, (size_t)p->gamma));
            else sl_table_setd(t, "alpha", p->alpha);
            sl_table_seti(t, "gamma", p->gamma);
            sl_table_seti(t, "k", k + 1);
            sl_table_setd(t, "pmf", p->pmf[k]);
        }
    }
    return rc ? rc : sl_table_status(t);
}

int sl_theory_grid_report(const sl_theory_grid_result *r, sl_format fmt, sl_table ***tables, size_t *n)
{
    int json = fmt == SL_FMT_JSON;
    *tables = NULL;
    *n = 0;
    sl_table **ts = sl_calloc(2, sizeof *ts);
    if (!ts) return SL_EFAIL;
    size_t k = 1;
    int rc = theory_table(r, json, &ts[0]);
    if (!rc && r->pmf && !json) rc = pmf_table(r, &ts[k++]);
    if (rc) {
        for (size_t i = 0; i < k; i++) sl_table_free(ts[i]);
        free(ts);
        return rc;
    }
    *tables = ts;
    *n = k;
    return SL_OK;
}

/* One row object: the table's columns, then the arrays the table cannot hold. */
static int write_json_object(const sl_table *t, size_t row, const sl_theory_grid_result *r, FILE *f)
{
    const sl_theory_grid_point *p = &r->points[row];
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
    if (r->beta) {
        fputs(", \"beta\": [", f);
        for (size_t i = 0; i < r->n_beta; i++) fprintf(f, "%s%.17g", i ? ", " : "", r->beta[i]);
        fputc(']', f);
    }
    if (r->optimal) {
        fputs(", \"ties\": [", f);
        for (size_t i = 0; i < p->opt.n_ties; i++) fprintf(f, "%s%d", i ? ", " : "", p->opt.ties[i]);
        fputc(']', f);
    }
    if (r->pmf) {
        fputs(", \"pmf\": [", f);
        for (int i = 0; i <= p->gamma; i++) fprintf(f, "%s%.17g", i ? ", " : "", p->pmf[i]);
        fputc(']', f);
    }
    fputc('}', f);
    return SL_OK;
}

int sl_theory_grid_write(const sl_theory_grid_result *r, FILE *f, sl_format fmt)
{
    sl_table **ts = NULL;
    size_t n = 0;
    int rc = sl_theory_grid_report(r, fmt, &ts, &n);
    if (rc) return rc;
    if (fmt == SL_FMT_JSON) {
        if (r->n_points > 1) fputc('[', f);
        for (size_t i = 0; !rc && i < r->n_points; i++) {
            if (i) fputs(",\n ", f);
            rc = write_json_object(ts[0], i, r, f);
        }
        if (r->n_points > 1) fputc(']', f);
        fputc('\n', f);
    } else if (n > 1) {
        rc = sl_report_write(ts, n, f, fmt);
    } else {
        rc = sl_table_write(ts[0], f, fmt);
    }
    for (size_t i = 0; i < n; i++) sl_table_free(ts[i]);
    free(ts);
    return rc;
}
