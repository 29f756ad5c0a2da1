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
    sl_table_add_row(t);
    sl_table_set_string(t, 0, q);
    sl_table_set_double(t, 1, m);
    sl_table_set_double(t, 2, lo);
    sl_table_set_double(t, 3, hi);
    sl_table_set_double(t, 4, th);
    sl_table_set_double(t, 5, th_iid);
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
    sl_table *sum = sl_table_alloc("summary"), *pos = sl_table_alloc("acceptance_by_position"),
             *hist = sl_table_alloc("tokens_per_iteration"), *fit = sl_table_alloc("goodness_of_fit");
    if (!sum || !pos || !hist || !fit) {
        sl_table_free(sum);
        sl_table_free(pos);
        sl_table_free(hist);
        sl_table_free(fit);
        return SL_EFAIL;
    }
    const char *cols[] = {"measured", "ci_lo", "ci_hi", "theory", "theory_iid"};
    sl_table_add_col(sum, "quantity", SL_COL_STRING, NULL);
    for (int c = 0; c < 5; c++) sl_table_add_col(sum, cols[c], SL_COL_DOUBLE, "%.6f");

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

    sl_table_add_col(pos, "position", SL_COL_INT, NULL);
    sl_table_add_col(pos, "reached", SL_COL_INT, NULL);
    sl_table_add_col(pos, "accepted", SL_COL_INT, NULL);
    sl_table_add_col(pos, "acceptance", SL_COL_DOUBLE, "%.6f");
    sl_table_add_col(pos, "ci_lo", SL_COL_DOUBLE, "%.6f");
    sl_table_add_col(pos, "ci_hi", SL_COL_DOUBLE, "%.6f");
    sl_table_add_col(pos, "theory", SL_COL_DOUBLE, "%.6f");
    for (size_t i = 0; i < gamma; i++) {
        sl_table_add_row(pos);
        sl_table_set_int(pos, 0, (int64_t)i + 1);
        sl_table_set_int(pos, 1, (int64_t)res->reached_at[i]);
        sl_table_set_int(pos, 2, (int64_t)res->accepted_at[i]);
        if (res->reached_at[i] > 0) {
            sl_stats_wilson(res->accepted_at[i], res->reached_at[i], a, &lo, &hi);
            sl_table_set_double(pos, 3, (double)res->accepted_at[i] / (double)res->reached_at[i]);
            sl_table_set_double(pos, 4, lo);
            sl_table_set_double(pos, 5, hi);
        }
        sl_table_set_double(pos, 6, pred->beta[i]);
    }

    sl_table_add_col(hist, "tokens", SL_COL_INT, NULL);
    sl_table_add_col(hist, "count", SL_COL_INT, NULL);
    sl_table_add_col(hist, "frequency", SL_COL_DOUBLE, "%.6f");
    sl_table_add_col(hist, "pmf", SL_COL_DOUBLE, "%.6f");
    sl_table_add_col(hist, "pmf_iid", SL_COL_DOUBLE, "%.6f");
    uint64_t counts[SL_SPEC_GAMMA_MAX + 1];
    for (size_t k = 1; k <= gamma + 1; k++) {
        counts[k - 1] = res->hist[k];
        sl_table_add_row(hist);
        sl_table_set_int(hist, 0, (int64_t)k);
        sl_table_set_int(hist, 1, (int64_t)res->hist[k]);
        sl_table_set_double(hist, 2, (double)res->hist[k] / N);
        sl_table_set_double(hist, 3, pred->pmf[k]);
        sl_table_set_double(hist, 4, pred->pmf_iid[k]);
    }

    sl_table_add_col(fit, "test", SL_COL_STRING, NULL);
    sl_table_add_col(fit, "against", SL_COL_STRING, NULL);
    sl_table_add_col(fit, "statistic", SL_COL_DOUBLE, "%.4f");
    sl_table_add_col(fit, "df", SL_COL_INT, NULL);
    sl_table_add_col(fit, "p_value", SL_COL_DOUBLE, "%.4g");
    const double *against[2] = {pred->pmf + 1, pred->pmf_iid + 1};
    const char *names[2] = {"pmf", "pmf_iid"};
    for (int w = 0; w < 2; w++)
        for (int kind = 0; kind < 2; kind++) {
            sl_gof g;
            int rc = sl_stats_gof(counts, against[w], gamma + 1, (sl_gof_kind)kind, &g);
            if (rc) continue;
            sl_table_add_row(fit);
            sl_table_set_string(fit, 0, kind == SL_GOF_PEARSON ? "pearson" : "g");
            sl_table_set_string(fit, 1, names[w]);
            sl_table_set_double(fit, 2, g.stat);
            sl_table_set_int(fit, 3, (int64_t)g.df);
            sl_table_set_double(fit, 4, g.p_value);
        }
    tables[0] = sum;
    tables[1] = pos;
    tables[2] = hist;
    tables[3] = fit;
    *n_tables = 4;
    return SL_OK;
}
