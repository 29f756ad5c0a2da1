/*
 * sl_model_info.c: the library side of `speclab model info` (the facts of a model file, whatever
 * its kind) and `speclab model init` (a random-weight model from a config). Nothing here prints.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sl_common.h"
#include "sl_import.h"
#include "sl_model.h"
#include "sl_ngram.h"
#include "sl_tok.h"

/* A copy of s (NULL stays NULL); *rc becomes SL_EFAIL when the copy fails. */
static char *dup_or_fail(const char *s, int *rc)
{
    if (!s || *rc) return NULL;
    char *d = strdup(s);
    if (!d) *rc = sl_fail(SL_EFAIL, "out of memory");
    return d;
}

/* Metadata that info reports in its own fields, not as meta.KEY lines. */
static int meta_is_reported(const char *k)
{
    static const char *const keys[] = {"format",    "format_version", "arch",         "config",
                                       "training",  "tokenizer",      "source_format", "source_dtypes"};
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++)
        if (!strcmp(k, keys[i])) return 1;
    return 0;
}

static int info_ngram(const char *path, sl_model_info *info)
{
    sl_ngram *m = NULL;
    int rc = sl_ngram_open(path, &m);
    if (rc) return rc;
    info->arch = m->lookup_n ? "lookup" : "ngram";
    info->vocab_size = m->vocab_size;
    info->order = m->order;
    info->smoothing = sl_ngram_smoothing_name(m->smoothing);
    info->add_k = m->add_k;
    info->discount = m->order == 2 ? m->discount : NAN;
    info->n_tokens = m->n_tokens;
    info->distinct_bigrams = m->nnz;
    info->lookup_n = m->lookup_n;
    info->lookup_eps = m->lookup_n ? m->lookup_eps : NAN;
    info->has_tokenizer = m->tokenizer_json != NULL;
    info->training = dup_or_fail(m->training_json, &rc);
    sl_ngram_free(m);
    return rc;
}

/* The dtype of each group of matrices ("F16", or "mixed" when a group holds several). */
static void group_dtypes(const sl_model *m, sl_model_info *info)
{
    int seen[SL_MODEL_N_GROUPS] = {0};
    sl_dtype dt[SL_MODEL_N_GROUPS] = {0};
    int mixed[SL_MODEL_N_GROUPS] = {0};
#define SEE(G, W)                                                   \
    do {                                                            \
        if (!(W).w) break;                                          \
        if (seen[G] && dt[G] != (W).dt) mixed[G] = 1;               \
        seen[G] = 1, dt[G] = (W).dt;                                \
    } while (0)
    SEE(0, m->tok_emb);
    if (m->arch == SL_ARCH_GPT2) SEE(0, m->pos_emb);
    for (size_t i = 0; i < m->cfg.n_layer; i++) {
        const sl_model_layer *L = &m->layers[i];
        SEE(1, L->q);
        SEE(1, L->k);
        SEE(1, L->v);
        SEE(1, L->o);
        SEE(2, L->up);
        SEE(2, L->down);
        if (m->arch == SL_ARCH_LLAMA) SEE(2, L->gate);
    }
    SEE(3, m->lm_head);
#undef SEE
    for (int g = 0; g < SL_MODEL_N_GROUPS; g++)
        info->group_dtype[g] = !seen[g] ? "-" : mixed[g] ? "mixed" : sl_dtype_name(dt[g]);
}

/* Tokenizer kind and special ids, read from the tokenizer (validated by loading it). */
static int tokenizer_facts(const char *json, const char *path, sl_model_info *info)
{
    sl_tok *t;
    if (sl_tok_from_json(json, &t)) {
        char why[512];
        snprintf(why, sizeof why, "%s", sl_errmsg());
        return sl_fail(SL_EINPUT, "%s: its tokenizer: %s", path, why);
    }
    info->tokenizer_kind = sl_tok_kind(t); /* a string literal: outlives t */
    info->tokenizer_vocab = sl_tok_vocab_size(t);
    info->bos_id = sl_tok_bos(t);
    info->eos_id = sl_tok_eos(t);
    sl_tok_free(t);
    return SL_OK;
}

static int info_transformer(const char *path, sl_model_info *info)
{
    sl_model *m;
    int rc = sl_model_open(path, &m);
    if (rc) return rc;
    info->is_transformer = 1;
    info->arch = sl_arch_name(m->arch);
    info->cfg = m->cfg;
    info->vocab_size = m->cfg.vocab_size;
    info->n_params = m->n_params;
    memcpy(info->bytes_by_dtype, m->bytes_by_dtype, sizeof info->bytes_by_dtype);
    info->has_tokenizer = m->tokenizer_json != NULL;
    info->tokenizer_bytes = m->tokenizer_json ? strlen(m->tokenizer_json) : 0;
    info->training = dup_or_fail(sl_st_meta(m->st, "training"), &rc);
    info->source_dtypes = dup_or_fail(sl_st_meta(m->st, "source_dtypes"), &rc);
    group_dtypes(m, info);
    if (!rc && m->tokenizer_json) rc = tokenizer_facts(m->tokenizer_json, path, info);
    const sl_st_file *st = m->st;
    info->meta_keys = st->n_meta ? calloc(st->n_meta, sizeof(char *)) : NULL;
    info->meta_vals = st->n_meta ? calloc(st->n_meta, sizeof(char *)) : NULL;
    if (!rc && st->n_meta && (!info->meta_keys || !info->meta_vals)) rc = sl_fail(SL_EFAIL, "out of memory");
    for (size_t i = 0; !rc && i < st->n_meta; i++) {
        if (meta_is_reported(st->meta_keys[i])) continue;
        char *k = dup_or_fail(st->meta_keys[i], &rc), *v = dup_or_fail(st->meta_vals[i], &rc);
        if (rc) {
            free(k);
            free(v);
            break;
        }
        info->meta_keys[info->n_meta] = k;
        info->meta_vals[info->n_meta++] = v;
    }
    sl_model_close(m);
    return rc;
}

int sl_model_info_read(const char *path, sl_model_info *info)
{
    memset(info, 0, sizeof *info);
    info->discount = info->lookup_eps = NAN;
    sl_model_format fmt;
    int rc = sl_model_detect(path, &fmt);
    if (rc) return rc;
    info->format = sl_model_format_name(fmt);
    /* n-gram and lookup drafts share the native container but not the reader. */
    int ng = 0;
    if (fmt == SL_FMT_SPECLAB) {
        sl_st_file *f = NULL;
        if ((rc = sl_st_open(path, &f))) return rc;
        const char *arch = sl_st_meta(f, "arch");
        ng = arch && (!strcmp(arch, "ngram") || !strcmp(arch, "lookup"));
        sl_st_close(f);
    }
    info->path = dup_or_fail(path, &rc);
    if (!rc) rc = ng ? info_ngram(path, info) : info_transformer(path, info);
    if (!rc) rc = sl_model_sha256(path, info->sha256);
    if (rc) sl_model_info_free(info);
    return rc;
}

void sl_model_info_free(sl_model_info *info)
{
    for (size_t i = 0; i < info->n_meta; i++) {
        free(info->meta_keys[i]);
        free(info->meta_vals[i]);
    }
    free(info->meta_keys);
    free(info->meta_vals);
    free(info->training);
    free(info->source_dtypes);
    free(info->path);
    memset(info, 0, sizeof *info);
}

const char *const sl_model_group_names[SL_MODEL_N_GROUPS] = {"embeddings", "attention", "mlp", "unembedding"};

int sl_model_init_file(const sl_model_init_cfg *c)
{
    sl_model_config cfg;
    int rc = sl_model_config_parse(c->config_json, c->arch, "config", &cfg);
    if (rc) return rc;
    char *tok = NULL;
    if (c->tokenizer_path && (rc = sl_read_file(c->tokenizer_path, "tokenizer_json", &tok, NULL))) return rc;
    if (tok) {
        sl_tok *t;
        if ((rc = sl_tok_from_json(tok, &t))) {
            char why[256]; /* copied: sl_fail formats into the buffer sl_errmsg points to */
            snprintf(why, sizeof why, "%s", sl_errmsg());
            free(tok);
            return sl_fail(SL_EINPUT, "tokenizer_json: %s: %s", c->tokenizer_path, why);
        }
        size_t tv = sl_tok_vocab_size(t);
        sl_tok_free(t);
        if (tv > cfg.vocab_size) {
            free(tok);
            return sl_fail(SL_EINPUT, "tokenizer_json: %s has %zu tokens, more than vocab_size %zu", c->tokenizer_path,
                           tv, cfg.vocab_size);
        }
    }
    rc = sl_model_init_write(c->out_path, c->arch, &cfg, c->seed, c->dtype, c->init_std, tok);
    free(tok);
    return rc;
}

int sl_model_next_probs(const char *path, const int32_t *ids, size_t n, sl_model_probs *out)
{
    memset(out, 0, sizeof *out);
    if (n == 0) return sl_fail(SL_EINPUT, "no token ids given");
    sl_model *m = NULL;
    sl_model_ctx *ctx = NULL;
    float *logits = NULL;
    double *row = NULL;
    int rc = sl_model_open(path, &m);
    if (!rc) rc = sl_model_check_tokens(m, ids, n);
    if (!rc && n > m->cfg.max_seq_len)
        rc = sl_fail(SL_EINPUT, "%zu tokens exceed the context of %zu", n, m->cfg.max_seq_len);
    if (rc) goto done;
    const size_t V = m->cfg.vocab_size;
    if ((rc = sl_model_ctx_alloc(m, n, &ctx))) goto done;
    logits = sl_malloc(n * V * sizeof *logits);
    row = sl_malloc(V * sizeof *row);
    out->probs = sl_malloc(n * V * sizeof *out->probs);
    if (!logits || !row || !out->probs) {
        rc = SL_EFAIL;
        goto done;
    }
    if ((rc = sl_model_forward(ctx, ids, n, logits))) goto done;
    for (size_t j = 0; j < n && !rc; j++) {
        for (size_t v = 0; v < V; v++) row[v] = logits[j * V + v];
        rc = sl_dist_softmax(row, V, out->probs + j * V);
    }
    out->n = n;
    out->vocab_size = V;
done:
    free(logits);
    free(row);
    sl_model_ctx_free(ctx);
    sl_model_close(m);
    if (rc) sl_model_probs_free(out);
    return rc;
}

void sl_model_probs_free(sl_model_probs *p)
{
    free(p->probs);
    memset(p, 0, sizeof *p);
}
