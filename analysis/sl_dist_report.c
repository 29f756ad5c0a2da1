/* sl_dist_report.c: tables of sl_dist_report.h. */
#include "sl_dist_report.h"

#include "sl_common.h"

int sl_dist_pair_report(const sl_dist_pair *r, sl_table **tables, size_t *n_tables)
{
    *n_tables = 0;
    static const sl_colspec scols[] = {
        SL_COL_I("vocab"), SL_COL_D("beta", "%.6g"), SL_COL_D("d_lk", "%.6g"), SL_COL_D("tv", "%.6g"),
        SL_COL_D("kl_p_q", "%.6g"), SL_COL_D("kl_q_p", "%.6g"), SL_COL_D("entropy_p", "%.6g"),
        SL_COL_D("entropy_q", "%.6g"), SL_COL_D("rejection_prob", "%.6g"), SL_COL_D("lenience", "%.6g"),
        SL_COL_D("alpha_lenient", "%.6g"), SL_COL_D("alpha_sampler_match", "%.6g"),
        SL_COL_D("alpha_nonit_rejection", "%.6g")};
    static const sl_colspec tcols[] = {SL_COL_I("token"), SL_COL_D("p", "%.6g"), SL_COL_D("q", "%.6g"),
                                       SL_COL_D("min_pq", "%.6g"), SL_COL_D("residual", "%.6g")};
    sl_table *s = SL_TABLE_NEW("summary", scols), *t = SL_TABLE_NEW("per_token", tcols);
    sl_table_row(s);
    sl_table_seti(s, "vocab", (int64_t)r->V);
    sl_table_setd(s, "beta", r->beta);
    sl_table_setd(s, "d_lk", r->d_lk);
    sl_table_setd(s, "tv", r->tv);
    sl_table_setd(s, "kl_p_q", r->kl_p_q);
    sl_table_setd(s, "kl_q_p", r->kl_q_p);
    sl_table_setd(s, "entropy_p", r->entropy_p);
    sl_table_setd(s, "entropy_q", r->entropy_q);
    sl_table_setd(s, "rejection_prob", r->rejection_prob);
    sl_table_setd(s, "lenience", r->lenience);
    sl_table_setd(s, "alpha_lenient", r->alpha_lenient);
    sl_table_setd(s, "alpha_sampler_match", r->alpha_sampler_match);
    sl_table_setd(s, "alpha_nonit_rejection", r->alpha_nonit_rejection);
    for (size_t x = 0; x < r->V; x++) {
        sl_table_row(t);
        sl_table_seti(t, "token", (int64_t)x);
        sl_table_setd(t, "p", r->p[x]);
        sl_table_setd(t, "q", r->q[x]);
        sl_table_setd(t, "min_pq", r->min_pq[x]);
        sl_table_setd(t, "residual", r->residual[x]);
    }
    int rc = sl_table_status(s);
    if (!rc) rc = sl_table_status(t);
    if (rc) {
        sl_table_free(s);
        sl_table_free(t);
        return rc;
    }
    tables[0] = s;
    tables[1] = t;
    *n_tables = 2;
    return SL_OK;
}

int sl_dist_standardised_report(const sl_dist_standardised *r, sl_table **out)
{
    static const sl_colspec cols[] = {SL_COL_I("token"), SL_COL_D("logit", "%.6g"), SL_COL_D("p", "%.6g")};
    sl_table *t = SL_TABLE_NEW("standardised", cols);
    for (size_t x = 0; x < r->V; x++) {
        sl_table_row(t);
        sl_table_seti(t, "token", (int64_t)x);
        sl_table_setd(t, "logit", r->logits[x]);
        sl_table_setd(t, "p", r->p[x]);
    }
    int rc = sl_table_status(t);
    if (rc) {
        sl_table_free(t);
        t = NULL;
    }
    *out = t;
    return rc;
}
