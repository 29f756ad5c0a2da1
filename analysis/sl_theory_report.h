/* sl_theory_report.h: `speclab theory`'s output from an sl_theory_grid_result: the "theory" table
 * (one row per grid point) and the "pmf" table, or for JSON one object per point with the arrays
 * (beta, ties, pmf) that a table cell cannot hold. */
#ifndef SL_THEORY_REPORT_H
#define SL_THEORY_REPORT_H

#include <stdio.h>

#include "sl_table.h"
#include "sl_theory_grid.h"

/* The tables for fmt: "theory", and "pmf" when the grid has pmfs and fmt is not JSON (in JSON the
 * beta and ties columns are left out: sl_theory_grid_write adds them as arrays). The caller frees
 * each table and the array. */
int sl_theory_grid_report(const sl_theory_grid_result *r, sl_format fmt, sl_table ***tables, size_t *n);

/* Writes the grid: text or CSV tables; JSON one object for a single point, else an array of them. */
int sl_theory_grid_write(const sl_theory_grid_result *r, FILE *f, sl_format fmt);

#endif
