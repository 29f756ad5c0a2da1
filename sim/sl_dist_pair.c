/* sl_dist_pair.c: the results of `speclab dist` (sl_dist_pair.h). */
#include "sl_dist_pair.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "sl_common.h"

void sl_dist_pair_free(sl_dist_pair *r)
{
    if (!r) return;
    free(r->p);
    free(r->q);
    free(r->min_pq);
    free(r->residual);
    free(r);
}

int sl_dist_pair_compute(const double *p, const double *q, size_t V, double tol, double lenience,
                         sl_dist_pair **out)
{
    *out = NULL;
    int rc;
    if (!(lenience > 0 && lenience <= 1))
        return sl_fail(SL_EINPUT, "lenience: %g, expected 0 < lenience <= 1", lenience);
    if ((rc = sl_dist_check(p, V, tol, "p")) || (rc = sl_dist_check(q, V, tol, "q"))) return rc;
    sl_dist_pair *r = calloc(1, sizeof *r);
    if (!r) return sl_fail(SL_EFAIL, "out of memory");
    r->p = malloc(V * sizeof *r->p);
    r->q = malloc(V * sizeof *r->q);
    r->min_pq = malloc(V * sizeof *r->min_pq);
    r->residual = malloc(V * sizeof *r->residual);
    if (!r->p || !r->q || !r->min_pq || !r->residual) {
        sl_dist_pair_free(r);
        return sl_fail(SL_EFAIL, "out of memory comparing two pmfs of %zu tokens", V);
    }
    memcpy(r->p, p, V * sizeof *p);
    memcpy(r->q, q, V * sizeof *q);
    r->V = V;
    r->lenience = lenience;
    r->beta = sl_dist_beta(p, q, V);
    r->d_lk = sl_dist_dlk(p, q, V);
    r->tv = sl_dist_tv(p, q, V);
    r->kl_p_q = sl_dist_kl(p, q, V);
    r->kl_q_p = sl_dist_kl(q, p, V);
    r->entropy_p = sl_dist_entropy(p, V);
    r->entropy_q = sl_dist_entropy(q, V);
    for (size_t x = 0; x < V; x++) r->min_pq[x] = fmin(p[x], q[x]);
    r->alpha_lenient = sl_dist_alpha_lenient(p, q, V, lenience);
    r->alpha_sampler_match = sl_dist_alpha_match(p, q, V);
    r->alpha_nonit_rejection = sl_dist_alpha_nonit(p, q, V);
    r->rejection_prob = sl_dist_residual(p, q, V, r->residual);
    /* With beta = 1 a rejection never happens and the residual is undefined. */
    if (!(r->rejection_prob > 0))
        for (size_t x = 0; x < V; x++) r->residual[x] = NAN;
    *out = r;
    return SL_OK;
}

void sl_dist_standardised_free(sl_dist_standardised *r)
{
    if (!r) return;
    free(r->logits);
    free(r->p);
    free(r);
}

int sl_dist_standardised_compute(const double *logits, size_t V, const sl_sampling *s, sl_dist_standardised **out)
{
    *out = NULL;
    sl_dist_standardised *r = calloc(1, sizeof *r);
    sl_dist_work *w = sl_dist_work_alloc(V);
    int rc = SL_OK;
    if (r) {
        r->V = V;
        r->logits = malloc(V * sizeof *r->logits);
        r->p = malloc(V * sizeof *r->p);
    }
    if (!r || !w || !r->logits || !r->p) rc = sl_fail(SL_EFAIL, "out of memory standardising %zu logits", V);
    if (!rc) {
        memcpy(r->logits, logits, V * sizeof *logits);
        rc = sl_dist_standardise(logits, V, s, r->p, w);
    }
    sl_dist_work_free(w);
    if (rc) {
        sl_dist_standardised_free(r);
        return rc;
    }
    *out = r;
    return SL_OK;
}
