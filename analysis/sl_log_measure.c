/*
 * sl_log_measure.c: the measure loop: the target generates after each prompt while target and
 * draft distributions are logged at every position, shard by shard, so that a killed run resumes.
 */
#include <gsl/gsl_rng.h>
#include <stdio.h>
#include <stdlib.h>

#include "sl_common.h"
#include "sl_log.h"

/* ---- measuring through sl_lm ---- */

int sl_log_measure(sl_lm *target, sl_lm *draft, const sl_log_prompts *pr, const sl_log_meta *meta_in,
                   const sl_log_write_opts *o, const char *path, sl_progress_fn progress, void *progress_ctx)
{
    if (target->vocab_size != draft->vocab_size)
        return sl_fail(SL_EINPUT, "vocabulary mismatch: the target has %zu tokens, the draft %zu", target->vocab_size,
                       draft->vocab_size);
    if (pr->n == 0) return sl_fail(SL_EINPUT, "no prompts");
    for (size_t i = 0; i < pr->n; i++)
        if (pr->len[i] == 0) return sl_fail(SL_EINPUT, "prompt %zu is empty", i);
    sl_log_meta meta = *meta_in;
    meta.kind = SL_LOG_MEASURE;
    meta.vocab_size = target->vocab_size;
    size_t V = meta.vocab_size, S = meta.shard_sequences;
    sl_log_writer *w = NULL;
    int rc = sl_log_writer_open(&w, path, &meta, o);
    if (rc) return rc;
    double *p = malloc(V * sizeof *p), *q = malloc(V * sizeof *q);
    gsl_rng *rng = sl_rng_alloc(meta.seed, SL_STREAM_TARGET, 0);
    if (!p || !q || !rng) rc = sl_fail(SL_EFAIL, "out of memory");
    size_t n_shards = (pr->n + S - 1) / S;
    for (size_t k = 0; k < n_shards && !rc; k++) {
        size_t first = k * S, n = pr->n - first < S ? pr->n - first : S;
        int done = 0;
        rc = sl_log_shard_done(w, k, n, pr->tokens + first, pr->len + first, &done);
        if (!rc && done && progress) progress(progress_ctx, first + n, pr->n);
        if (rc || done) continue;
        rc = sl_log_shard_begin(w, k);
        for (size_t s = first; s < first + n && !rc; s++) {
            sl_rng_reseed(rng, meta.seed, SL_STREAM_TARGET, s);
            rc = sl_log_seq_begin(w, (int64_t)s, pr->id ? pr->id[s] : (int64_t)s, pr->tokens[s], pr->len[s]);
            if (!rc) rc = target->truncate(target->self, 0);
            if (!rc) rc = draft->truncate(draft->self, 0);
            if (!rc) rc = target->extend(target->self, pr->tokens[s], pr->len[s], 1, p);
            if (!rc) rc = draft->extend(draft->self, pr->tokens[s], pr->len[s], 1, q);
            for (size_t t = 0; t < meta.tokens_per_sequence && !rc; t++) {
                int32_t tok = (int32_t)sl_dist_sample_u(p, V, sl_rng_uniform53(rng));
                rc = sl_log_add_position(w, p, q, tok);
                if (rc || (meta.eos >= 0 && tok == meta.eos) || t + 1 == meta.tokens_per_sequence) break;
                rc = target->extend(target->self, &tok, 1, 1, p);
                if (!rc) rc = draft->extend(draft->self, &tok, 1, 1, q);
            }
            if (!rc) rc = sl_log_seq_end(w, 0, 0);
            if (!rc && progress) progress(progress_ctx, s + 1, pr->n);
        }
        if (!rc) rc = sl_log_shard_commit(w);
    }
    if (!rc) rc = sl_log_assemble(w, n_shards);
    sl_log_writer_close(w);
    if (rng) gsl_rng_free(rng);
    free(p);
    free(q);
    return rc;
}
