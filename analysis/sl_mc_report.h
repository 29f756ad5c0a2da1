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

/* Builds the report tables (summary, per-position acceptance, tokens-per-iteration histogram,
 * goodness of fit); *n_tables (<= 4) of them, owned by the caller (sl_table_free each). a = 1 - confidence. */
int sl_mc_report(const sl_mc_plan *plan, const sl_mc_result *res, const sl_mc_prediction *pred,
                 const sl_mc_costs *costs, double a, sl_table **tables, size_t *n_tables);

#endif
