/*
 * sl_dist_report.h: the tables of `speclab dist`, rendered from the results of sim/sl_dist_pair.h.
 */
#ifndef SL_DIST_REPORT_H
#define SL_DIST_REPORT_H

#include "sl_dist_pair.h"
#include "sl_table.h"

/* Two tables: summary (vocab, beta, d_lk, tv, kl_p_q, kl_q_p, entropy_p, entropy_q,
 * rejection_prob, lenience, alpha_lenient, alpha_sampler_match, alpha_nonit_rejection) and
 * per_token (token, p, q, min_pq, residual). tables must hold 2; owned by the caller. */
int sl_dist_pair_report(const sl_dist_pair *r, sl_table **tables, size_t *n_tables);

/* One table: standardised (token, logit, p). */
int sl_dist_standardised_report(const sl_dist_standardised *r, sl_table **out);

#endif
