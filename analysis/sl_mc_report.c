/*
 * sl_mc_report.c: the report tables of a Monte Carlo run (sim/sl_mc.h) next to the theory's
 * predictions: summary with confidence intervals, acceptance by draft position, the histogram of
 * tokens per iteration, and goodness of fit against both predicted pmfs.
 */
#include "sl_mc_report.h"

#include <math.h>
#include <stdint.h>

#include "sl_common.h"
#include "sl_stats.h"
#include "sl_theory.h"

static void summary_row(sl_table *t, const char *q, double m, double lo, double hi, double th, double th_iid)
{
    sl_table_row(t);
    sl_table_sets(t, "quantity", q);
    sl_table_setd(t, "measured", m);
    sl_table_setd(t, "ci_lo", lo);
    sl_table_setd(t, "ci_hi", hi);
    sl_table_setd(t, "theory", th);
    sl_table_setd(t, "theory_iid", th_iid);
}

int sl_mc_report(const sl_mc_plan *pl, const sl_mc_result *res, const sl_mc_prediction *pred,
                 const sl_mc_report_costs *costs, double a, sl_table **tables, size_t *n_tables)
{
    *n_tables = 0;
    size_t gamma = sl_mc_plan_gamma(pl);
    double v_next;
    int vrc = sl_theory_vcost_eval(&costs->v, (long)gamma + 1, &v_next);
    if (vrc) return vrc;
    double N = (double)res->iterations;
    uint64_t tot_reached = 0, tot_acc = 0;
    for (size_t i = 0; i < gamma; i++) {
        tot_reached += res->reached_at[i];
        tot_acc += res->accepted_at[i];
    }
    static const sl_colspec sum_cols[] = {SL_COL_S("quantity"), SL_COL_D("measured", "%.6f"), SL_COL_D("ci_lo", "%.6f"),
                                          SL_COL_D("ci_hi", "%.6f"), SL_COL_D("theory", "%.6f"),
                                          SL_COL_D("theory_iid", "%.6f")};
    static const sl_colspec pos_cols[] = {SL_COL_I("position"), SL_COL_I("reached"), SL_COL_I("accepted"),
                                          SL_COL_D("acceptance", "%.6f"), SL_COL_D("ci_lo", "%.6f"),
                                          SL_COL_D("ci_hi", "%.6f"), SL_COL_D("theory", "%.6f")};
    static const sl_colspec hist_cols[] = {SL_COL_I("tokens"), SL_COL_I("count"), SL_COL_D("frequency", "%.6f"),
                                           SL_COL_D("pmf", "%.6f"), SL_COL_D("pmf_iid", "%.6f")};
    static const sl_colspec fit_cols[] = {SL_COL_S("test"), SL_COL_S("against"), SL_COL_D("statistic", "%.4f"),
                                          SL_COL_I("df"), SL_COL_D("p_value", "%.4g")};
    sl_table *sum = SL_TABLE_NEW("summary", sum_cols), *pos = SL_TABLE_NEW("acceptance_by_position", pos_cols),
             *hist = SL_TABLE_NEW("tokens_per_iteration", hist_cols), *fit = SL_TABLE_NEW("goodness_of_fit", fit_cols);

    double lo, hi;
    if (tot_reached > 0) sl_stats_wilson(tot_acc, tot_reached, a, &lo, &hi);
    else lo = hi = NAN;
    summary_row(sum, "acceptance", tot_reached ? (double)tot_acc / (double)tot_reached : NAN, lo, hi,
                pred->acceptance, pred->alpha);
    double mean = (double)res->tokens / N;
    double var = res->iterations > 1 ? ((double)res->tokens_sq - N * mean * mean) / (N - 1) : 0;
    double mlo, mhi;
    sl_stats_mean_ci(mean, sqrt(fmax(var, 0)), res->iterations, a, &mlo, &mhi);
    summary_row(sum, "tokens_per_iteration", mean, mlo, mhi, pred->expected_tokens, pred->expected_tokens_iid);
    /* Simulated time in target-step units: gamma draft steps at c each plus one verification of
     * gamma+1 tokens at v(gamma+1), against one target step per token for plain decoding. */
    double denom = (double)gamma * costs->c + v_next;
    double wf_iid = NAN, ops_iid = NAN;
    sl_theory_walltime_factor_v(fmin(1.0, fmax(0.0, pred->alpha)), (int)gamma, costs->c, &costs->v, &wf_iid);
    sl_theory_ops_factor(fmin(1.0, fmax(0.0, pred->alpha)), (int)gamma, costs->c_hat, &ops_iid);
    summary_row(sum, "walltime_factor", mean / denom, mlo / denom, mhi / denom, pred->expected_tokens / denom, wf_iid);
    /* Operations per emitted token relative to plain decoding: (gamma c_hat + gamma + 1) / E[N]. */
    double ops = (double)gamma * costs->c_hat + (double)gamma + 1;
    summary_row(sum, "ops_factor", ops / mean, ops / mhi, mlo > 0 ? ops / mlo : NAN, ops / pred->expected_tokens, ops_iid);
    summary_row(sum, "iterations", N, NAN, NAN, NAN, NAN);
    summary_row(sum, "draft_calls", (double)res->draft_calls, NAN, NAN, N * (double)gamma, NAN);
    summary_row(sum, "target_calls", (double)res->target_calls, NAN, NAN, N, NAN);
    summary_row(sum, "tokens", (double)res->tokens, NAN, NAN, N * pred->expected_tokens, N * pred->expected_tokens_iid);

    for (size_t i = 0; i < gamma; i++) {
        sl_table_row(pos);
        sl_table_seti(pos, "position", (int64_t)i + 1);
        sl_table_seti(pos, "reached", (int64_t)res->reached_at[i]);
        sl_table_seti(pos, "accepted", (int64_t)res->accepted_at[i]);
        if (res->reached_at[i] > 0) {
            sl_stats_wilson(res->accepted_at[i], res->reached_at[i], a, &lo, &hi);
            sl_table_setd(pos, "acceptance", (double)res->accepted_at[i] / (double)res->reached_at[i]);
            sl_table_setd(pos, "ci_lo", lo);
            sl_table_setd(pos, "ci_hi", hi);
        }
        sl_table_setd(pos, "theory", pred->beta[i]);
    }

    uint64_t counts[SL_SPEC_GAMMA_MAX + 1];
    for (size_t k = 1; k <= gamma + 1; k++) {
        counts[k - 1] = res->hist[k];
        sl_table_row(hist);
        sl_table_seti(hist, "tokens", (int64_t)k);
        sl_table_seti(hist, "count", (int64_t)res->hist[k]);
        sl_table_setd(hist, "frequency", (double)res->hist[k] / N);
        sl_table_setd(hist, "pmf", pred->pmf[k]);
        sl_table_setd(hist, "pmf_iid", pred->pmf_iid[k]);
    }

    const double *against[2] = {pred->pmf + 1, pred->pmf_iid + 1};
    const char *names[2] = {"pmf", "pmf_iid"};
    for (int w = 0; w < 2; w++)
        for (int kind = 0; kind < 2; kind++) {
            sl_gof g;
            int rc = sl_stats_gof(counts, against[w], gamma + 1, (sl_gof_kind)kind, &g);
            if (rc) continue;
            sl_table_row(fit);
            sl_table_sets(fit, "test", kind == SL_GOF_PEARSON ? "pearson" : "g");
            sl_table_sets(fit, "against", names[w]);
            sl_table_setd(fit, "statistic", g.stat);
            sl_table_seti(fit, "df", (int64_t)g.df);
            sl_table_setd(fit, "p_value", g.p_value);
        }
    /* One status per table covers every call on it above (sl_table.h: errors are sticky). */
    sl_table *built[4] = {sum, pos, hist, fit};
    int rc = SL_OK;
    for (size_t i = 0; i < 4 && !rc; i++) rc = sl_table_status(built[i]);
    for (size_t i = 0; i < 4; i++) {
        if (rc) sl_table_free(built[i]);
        else tables[i] = built[i];
    }
    if (!rc) *n_tables = 4;
    return rc;
}
