/*
 * sl_ngram_build.c: n-gram and prompt-lookup drafts built from files, the library side of
 * `speclab model ngram` and `speclab model lookup` (models/sl_ngram.h). Nothing here prints.
 */
#include <json-c/json.h>
#include <stdlib.h>
#include <string.h>

#include "sl_common.h"
#include "sl_ngram.h"
#include "sl_tok.h"

sl_ngram_smoothing sl_ngram_smoothing_default(int order) { return order == 1 ? SL_NGRAM_ADDK : SL_NGRAM_KN; }

/* The `training` metadata: which files, how many tokens and bigrams, which tool. */
static int training_json(const sl_ngram_build_cfg *cfg, const sl_ngram *m, char **out)
{
    json_object *j = json_object_new_object(), *fa = json_object_new_array();
    for (size_t i = 0; j && fa && i < cfg->n_train; i++) json_object_array_add(fa, json_object_new_string(cfg->train[i]));
    json_object_object_add(j, "train_files", fa);
    json_object_object_add(j, "n_tokens", json_object_new_int64((int64_t)m->n_tokens));
    json_object_object_add(j, "distinct_bigrams", json_object_new_int64((int64_t)m->nnz));
    json_object_object_add(j, "tool", json_object_new_string("speclab model ngram"));
    *out = j ? strdup(json_object_to_json_string_ext(j, JSON_C_TO_STRING_PLAIN)) : NULL;
    json_object_put(j);
    return *out ? SL_OK : sl_fail(SL_EFAIL, "out of memory");
}

int sl_ngram_build(const sl_ngram_build_cfg *cfg, sl_ngram **out)
{
    *out = NULL;
    const size_t n = cfg->n_train;
    sl_tok *tok = NULL;
    char *tok_json = NULL;
    int32_t **ids = calloc(n ? n : 1, sizeof *ids);
    size_t *lens = calloc(n ? n : 1, sizeof *lens);
    sl_ngram *m = NULL;
    int rc = ids && lens ? SL_OK : sl_fail(SL_EFAIL, "out of memory");
    if (!rc && !n) rc = sl_fail(SL_EINPUT, "train: no token file given");
    if (!rc && cfg->tokenizer) rc = sl_tok_load_file(cfg->tokenizer, &tok);
    if (!rc && tok && !(tok_json = sl_tok_to_json(tok))) rc = SL_EFAIL;
    const size_t V = tok ? sl_tok_vocab_size(tok) : cfg->vocab_size;
    for (size_t i = 0; !rc && i < n; i++) {
        size_t fv;
        rc = sl_tokfile_read(cfg->train[i], &ids[i], &lens[i], &fv);
        if (!rc && fv != V)
            rc = tok ? sl_fail(SL_EINPUT, "vocabulary mismatch: train file %s has vocab_size %zu, the tokenizer %s has %zu tokens",
                               cfg->train[i], fv, cfg->tokenizer, V)
                     : sl_fail(SL_EINPUT, "vocabulary mismatch: train file %s has vocab_size %zu, vocab is %zu",
                               cfg->train[i], fv, V);
        if (!rc && lens[i] == 0) rc = sl_fail(SL_EINPUT, "train: %s holds no tokens", cfg->train[i]);
    }
    if (!rc) rc = sl_ngram_train((const int32_t *const *)ids, lens, n, V, &cfg->opts, &m);
    if (!rc) rc = training_json(cfg, m, &m->training_json);
    if (!rc) {
        m->tokenizer_json = tok_json;
        tok_json = NULL;
        rc = sl_ngram_write(m, cfg->out_path);
    }
    for (size_t i = 0; ids && i < n; i++) free(ids[i]);
    free(ids);
    free(lens);
    free(tok_json);
    sl_tok_free(tok);
    if (rc) sl_ngram_free(m);
    else *out = m;
    return rc;
}

int sl_lookup_build(const sl_lookup_build_cfg *cfg)
{
    if (cfg->n < 1 || cfg->n > 64) return sl_fail(SL_EINPUT, "n: %zu is outside [1, 64]", cfg->n);
    if (!(cfg->eps > 0 && cfg->eps <= 1)) return sl_fail(SL_EINPUT, "epsilon: %g is outside (0, 1]", cfg->eps);
    sl_ngram *m = NULL;
    int rc = sl_ngram_open(cfg->fallback, &m);
    if (rc) return rc;
    /* Keep the unigram only: the fallback is P1. */
    free(m->row_ptr), free(m->col), free(m->cnt);
    m->row_ptr = m->col = m->cnt = NULL;
    m->nnz = 0;
    m->order = 1;
    m->smoothing = SL_NGRAM_ADDK;
    m->lookup_n = cfg->n;
    m->lookup_eps = cfg->eps;
    rc = sl_ngram_write(m, cfg->out_path);
    sl_ngram_free(m);
    return rc;
}
