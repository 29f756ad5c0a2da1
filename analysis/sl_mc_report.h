/*
 * sl_mc_report.h: the report of a Monte Carlo run of Algorithm 1 (sim/sl_mc.h) as result tables,
 * the measurements with confidence intervals beside the theory's predictions (THEORY.md,
 * "Statistics"). Kept out of sim/ so that the core does not depend on the tables and statistics.
 */
#ifndef SL_MC_REPORT_H
#define SL_MC_REPORT_H

#include <stddef.h>

#include "sl_mc.h"
#include "sl_table.h"
#include "sl_theory.h"

/* What a simulated iteration costs, in target-step units (THEORY.md): gamma draft steps at c each
 * and one verification of gamma+1 tokens at v(gamma+1), the one cost model of sl_theory. */
typedef struct {
    double c;          /* draft step time / target step time, >= 0 */
    double c_hat;      /* draft ops per token / target ops per token, >= 0 */
    sl_theory_vcost v; /* v(n); owned by the caller (sl_theory_vcost_free) */
} sl_mc_report_costs;

/* Builds the report tables (summary, per-position acceptance, tokens-per-iteration histogram,
 * goodness of fit); *n_tables (<= 4) of them, owned by the caller (sl_table_free each). a = 1 - confidence.
 * SL_EINPUT when costs->v has no v(gamma+1) (a table without that n). */
int sl_mc_report(const sl_mc_plan *plan, const sl_mc_result *res, const sl_mc_prediction *pred,
                 const sl_mc_report_costs *costs, double a, sl_table **tables, size_t *n_tables);

#endif
