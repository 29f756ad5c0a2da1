/*
 * sl_model_lm.c: a model context as the sampler's sl_lm (sim/sl_spec.h): extend runs the forward
 * pass over the new tokens in blocks of SL_KERN_NMAX and standardises each row of logits into a
 * pmf with sl_dist_standardise_f32; truncate cuts the KV cache.
 *
 * sl_dist is implemented on main by another engineer; until it is merged here the symbols are
 * weak, so the engine links without it and extend reports that it is missing.
 */
#include <stdlib.h>

#include "sl_common.h"
#include "sl_kern.h"
#include "sl_model.h"

#pragma weak sl_dist_standardise_f32
#pragma weak sl_dist_work_alloc
#pragma weak sl_dist_work_free

static int lm_extend(void *self, const int32_t *tokens, size_t n, double *dists)
{
    sl_model_lm *l = self;
    sl_model_ctx *c = l->ctx;
    const size_t V = c->m->cfg.vocab_size;
    for (size_t i = 0; i < n; i += SL_KERN_NMAX) {
        size_t nb = n - i < SL_KERN_NMAX ? n - i : SL_KERN_NMAX;
        int rc = sl_model_forward(c, tokens + i, nb, c->logits);
        if (rc) return rc;
        for (size_t j = 0; j < nb; j++) {
            rc = sl_dist_standardise_f32(c->logits + j * V, V, &l->sampling, dists + (i + j) * V, l->dw);
            if (rc) return rc;
        }
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
    if (!sl_dist_standardise_f32 || !sl_dist_work_alloc)
        return sl_fail(SL_EFAIL, "the distributions module (sim/sl_dist.c) is not built into this binary yet");
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
    if (sl_dist_work_free) sl_dist_work_free(l->dw);
    free(l);
}
