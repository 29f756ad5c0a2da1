/*
 * sl_dist_pair.h: what `speclab dist` computes, as results: the comparison of one target pmf p
 * with one draft pmf q (beta, D_LK, TV, KL both ways, entropies, the residual Algorithm 1
 * resamples from, and what the other acceptance rules accept), and the standardisation of one
 * logit vector. Rendering to tables lives in analysis/sl_dist_report.h.
 *
 * Notation (THEORY.md): p = target, q = draft, l = lenience, V = vocabulary size.
 */
#ifndef SL_DIST_PAIR_H
#define SL_DIST_PAIR_H

#include <stddef.h>

#include "sl_dist.h"

typedef struct {
    size_t V;
    double lenience;       /* l in (0, 1] */
    double beta;           /* sum min(p, q): acceptance probability of one drafted token */
    double d_lk;           /* 1 - beta */
    double tv;
    double kl_p_q, kl_q_p; /* nats; +inf where the second has no mass under the first */
    double entropy_p, entropy_q; /* nats */
    double rejection_prob; /* Z = sum max(0, p - q), the probability of a rejection */
    double alpha_lenient;  /* sum min(q, p / l) */
    double alpha_sampler_match;   /* sum p q */
    double alpha_nonit_rejection; /* min over p(x) > 0 of q(x) / p(x) */
    double *p, *q;         /* (V) copies of the input */
    double *min_pq;        /* (V) */
    double *residual;      /* (V) norm(max(0, p - q)); NaN everywhere when Z = 0 (no rejection) */
} sl_dist_pair;

/* Compares p and q (both checked against tol like sl_dist_check, named "p" and "q"). */
int sl_dist_pair_compute(const double *p, const double *q, size_t V, double tol, double lenience,
                         sl_dist_pair **out);
void sl_dist_pair_free(sl_dist_pair *r);

typedef struct {
    size_t V;
    double *logits;        /* (V) the input */
    double *p;             /* (V) standardised: temperature, softmax, top-k, top-p, min-p */
} sl_dist_standardised;

int sl_dist_standardised_compute(const double *logits, size_t V, const sl_sampling *s, sl_dist_standardised **out);
void sl_dist_standardised_free(sl_dist_standardised *r);

#endif
