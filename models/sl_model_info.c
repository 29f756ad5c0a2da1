/*
 * sl_model_info.c: the library side of `speclab model info` (the facts of a model file, whatever
 * its kind) and `speclab model init` (a random-weight model from a config). Nothing here prints.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sl_common.h"
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
    static const char *const keys[] = {"format", "format_version", "arch", "config", "training", "tokenizer"};
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
    /* n-gram and lookup drafts share the container but not the reader. */
    sl_st_file *f = NULL;
    int rc = sl_st_open(path, &f);
    if (rc) return rc;
    const char *arch = sl_st_meta(f, "arch");
    int ng = arch && (!strcmp(arch, "ngram") || !strcmp(arch, "lookup"));
    sl_st_close(f);
    info->path = dup_or_fail(path, &rc);
    if (!rc) rc = ng ? info_ngram(path, info) : info_transformer(path, info);
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
    free(info->path);
    memset(info, 0, sizeof *info);
}

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
