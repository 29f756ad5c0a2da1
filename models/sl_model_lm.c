/*
 * sl_model_lm.c: a model context as the sampler's sl_lm (sim/sl_spec.h): extend runs the forward
 * pass over the new tokens in blocks of SL_KERN_NMAX and standardises each row of logits into a
 * pmf with sl_dist_standardise_f32 (the rows of a block in parallel); truncate cuts the KV cache.
 */
#include <omp.h>
#include <stdlib.h>

#include "sl_common.h"
#include "sl_kern.h"
#include "sl_model.h"

static int lm_extend(void *self, const int32_t *tokens, size_t n, size_t n_rows, double *dists)
{
    sl_model_lm *l = self;
    sl_model_ctx *c = l->ctx;
    const size_t V = c->m->cfg.vocab_size;
    if (n_rows > n) return sl_fail(SL_EINPUT, "extend: %zu rows asked of %zu tokens", n_rows, n);
    if (c->len + n > c->max_len)
        return sl_fail(SL_EINPUT, "sequence of %zu tokens exceeds the context of %zu tokens", c->len + n, c->max_len);
    int rc = sl_model_check_tokens(c->m, tokens, n);
    if (rc) return rc;
    /* Blocks of SL_KERN_NMAX tokens, so that the logits buffer holds one block (no allocation). */
    const size_t first = n - n_rows;
    for (size_t i = 0; i < n; i += SL_KERN_NMAX) {
        const size_t nb = n - i < SL_KERN_NMAX ? n - i : SL_KERN_NMAX;
        const size_t r0 = first <= i ? 0 : first - i < nb ? first - i : nb; /* rows of this block wanted */
        rc = sl_model_forward_last(c, tokens + i, nb, nb - r0, c->logits);
        if (rc) return rc;
        /* The rows are independent: several are standardised in parallel, a thread per row up to
         * the OpenMP thread count (no more: waking idle threads costs more than a row), each row
         * with a work area of its own (the same bits as one after the other). A failing row is
         * redone on this thread, whose error message the caller reads. */
        const size_t rows = nb - r0;
        for (size_t j = 1; j < rows; j++)
            if (!l->dw_rows[j] && !(l->dw_rows[j] = sl_dist_work_alloc(V))) return sl_fail(SL_EFAIL, "out of memory");
        int rcs[SL_KERN_NMAX] = {0};
        const int nt = (int)rows < omp_get_max_threads() ? (int)rows : omp_get_max_threads();
#pragma omp parallel for schedule(static, 1) num_threads(nt) if (nt > 1)
        for (size_t j = 0; j < rows; j++)
            rcs[j] = sl_dist_standardise_f32(c->logits + j * V, V, &l->sampling, dists + (i + r0 + j - first) * V,
                                             j ? l->dw_rows[j] : l->dw);
        for (size_t j = 0; j < rows; j++)
            if (rcs[j]) return sl_dist_standardise_f32(c->logits + j * V, V, &l->sampling, dists + (i + r0 + j - first) * V, l->dw);
    }
    return SL_OK;
}

static int lm_truncate(void *self, size_t len)
{
    sl_model_lm *l = self;
    return sl_model_truncate(l->ctx, len);
}

int sl_model_lm_alloc(sl_model_ctx *ctx, const sl_sampling *sampling, sl_model_lm **out)
{
    *out = NULL;
    int rc = sl_sampling_validate(sampling);
    if (rc) return rc;
    sl_model_lm *l = sl_calloc(1, sizeof *l);
    if (!l) return SL_EFAIL;
    l->ctx = ctx;
    l->sampling = *sampling;
    l->dw = sl_dist_work_alloc(ctx->m->cfg.vocab_size);
    if (!l->dw) {
        free(l);
        return sl_fail(SL_EFAIL, "out of memory");
    }
    l->lm.self = l;
    l->lm.vocab_size = ctx->m->cfg.vocab_size;
    l->lm.extend = lm_extend;
    l->lm.truncate = lm_truncate;
    *out = l;
    return SL_OK;
}

void sl_model_lm_free(sl_model_lm *l)
{
    if (!l) return;
    sl_dist_work_free(l->dw);
    for (size_t j = 0; j < SL_KERN_NMAX; j++) sl_dist_work_free(l->dw_rows[j]);
    free(l);
}
