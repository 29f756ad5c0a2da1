/*
 * sl_model_lm.c: a model context as the sampler's sl_lm (sim/sl_spec.h): extend runs the forward
 * pass over the new tokens in blocks of SL_KERN_NMAX and standardises each row of logits into a
 * pmf with sl_dist_standardise_f32 (the rows of a block in parallel); on a device the softmax or
 * argmax is computed there and only the filters run here. truncate cuts the KV cache.
 */
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "sl_common.h"
#include "sl_kern.h"
#include "sl_model.h"

/* Row j of a block into its distribution p: from its logits in c->logits (the CPU), or finished
 * from what the device computed (its argmax at temperature 0, else its softmax in p already,
 * which the filters, if any, then cut). */
static int row_dist(sl_model_lm *l, size_t j, int on_device, double *p, sl_dist_work *w)
{
    const size_t V = l->ctx->m->cfg.vocab_size;
    const sl_sampling *s = &l->sampling;
    if (!on_device) return sl_dist_standardise_f32(l->ctx->logits + j * V, V, s, p, w);
    if (s->temperature == 0) {
        memset(p, 0, V * sizeof *p);
        p[l->argmax[j]] = 1;
    } else {
        sl_dist_filter(p, V, s, w);
    }
    return SL_OK;
}

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
    const int filters = l->sampling.temperature > 0 && sl_sampling_filters(&l->sampling, V);
    /* Blocks of SL_KERN_NMAX tokens, so that the logits buffer holds one block (no allocation). */
    const size_t first = n - n_rows;
    for (size_t i = 0; i < n; i += SL_KERN_NMAX) {
        const size_t nb = n - i < SL_KERN_NMAX ? n - i : SL_KERN_NMAX;
        const size_t r0 = first <= i ? 0 : first - i < nb ? first - i : nb; /* rows of this block wanted */
        const size_t rows = nb - r0;
        double *out = dists + (i + r0 - first) * V;
        /* A model on a device computes the rows' distributions there unless a row is not finite. */
        int on_device = 0, fell_back = 0;
        if (c->gpu && !l->host_dist) {
            rc = sl_model_gpu_forward_dist(c, tokens + i, nb, rows, l->sampling.temperature, out, l->argmax, &fell_back);
            on_device = !fell_back;
        } else {
            rc = sl_model_forward_last(c, tokens + i, nb, rows, c->logits);
        }
        if (rc) return rc;
        /* The rows are independent: several are standardised in parallel, a thread per row up to
         * the OpenMP thread count (no more: waking idle threads costs more than a row; none for
         * the device's rows without filters, a memset at most), each row with a work area of its
         * own (the same bits as one after the other). A failing row is redone on this thread,
         * whose error message the caller reads. */
        for (size_t j = 1; j < rows; j++)
            if (!l->dw_rows[j] && !(l->dw_rows[j] = sl_dist_work_alloc(V))) return sl_fail(SL_EFAIL, "out of memory");
        int rcs[SL_KERN_NMAX] = {0};
        const int nt = on_device && !filters ? 1 : (int)rows < omp_get_max_threads() ? (int)rows : omp_get_max_threads();
#pragma omp parallel for schedule(static, 1) num_threads(nt) if (nt > 1)
        for (size_t j = 0; j < rows; j++) rcs[j] = row_dist(l, j, on_device, out + j * V, j ? l->dw_rows[j] : l->dw);
        for (size_t j = 0; j < rows; j++)
            if (rcs[j]) return row_dist(l, j, on_device, out + j * V, l->dw);
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
    const char *e = getenv("SL_INFER_DIST");
    l->host_dist = e && !strcmp(e, "host");
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
