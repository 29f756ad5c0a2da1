/*
 * sl_lm_open.c: opens a transformer file, an n-gram file or a lookup spec as an sl_lm.
 * The file kind is read from the safetensors metadata `arch` (models/FORMAT.md).
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "sl_common.h"
#include "sl_import.h"
#include "sl_lm_open.h"
#include "sl_model.h"
#include "sl_ngram.h"
#include "sl_st.h"
#include "sl_tok.h"

typedef struct {
    sl_lm_handle h;
    sl_sampling sampling;
    sl_model *model;
    sl_model_ctx *ctx;
    sl_model_lm *mlm;
    sl_ngram *ng;         /* the n-gram model, or the lookup's fallback */
    sl_ngram_lm *nlm;
    sl_lookup_lm *llm;
    size_t lookup_n;
    double lookup_eps;
    char *fallback_path;
} handle_priv;

const char *sl_lm_kind_name(sl_lm_kind k)
{
    switch (k) {
    case SL_LM_TRANSFORMER: return "transformer";
    case SL_LM_NGRAM: return "ngram";
    case SL_LM_LOOKUP: return "lookup";
    }
    return "?";
}

void sl_lm_close(sl_lm_handle *h)
{
    if (!h) return;
    handle_priv *p = (handle_priv *)h;
    sl_model_lm_free(p->mlm);
    sl_model_ctx_free(p->ctx);
    sl_model_close(p->model);
    sl_ngram_lm_free(p->nlm);
    sl_lookup_lm_free(p->llm);
    sl_ngram_free(p->ng);
    free(p->fallback_path);
    free(p);
}

/* "lookup:N[:EPS[:FALLBACK]]" */
static int parse_lookup(const char *spec, handle_priv *p)
{
    const char *s = spec + strlen("lookup:");
    char *end;
    errno = 0;
    long n = strtol(s, &end, 10);
    if (end == s || errno || n < 1 || n > 64 || (*end && *end != ':'))
        return sl_fail(SL_EINPUT, "model spec '%s': lookup:N needs an n-gram length N in 1..64", spec);
    p->lookup_n = (size_t)n;
    p->lookup_eps = 0.1;
    if (*end == ':') {
        s = end + 1;
        double e = strtod(s, &end);
        if (end == s || (*end && *end != ':') || !(e > 0 && e <= 1))
            return sl_fail(SL_EINPUT, "model spec '%s': lookup epsilon must be a number in (0, 1]", spec);
        p->lookup_eps = e;
        if (*end == ':' && strcmp(end + 1, "uniform")) {
            size_t len = strlen(end + 1);
            if (!len) return sl_fail(SL_EINPUT, "model spec '%s': empty fallback after the last ':'", spec);
            p->fallback_path = malloc(len + 1);
            if (!p->fallback_path) return sl_fail(SL_EFAIL, "out of memory");
            memcpy(p->fallback_path, end + 1, len + 1);
        }
    }
    return SL_OK;
}

/* A token's bytes for a message: printable ASCII as is, anything else as \xHH, cut to fit. */
static void quote_bytes(char *buf, size_t cap, const char *b, size_t n)
{
    if (!b) {
        snprintf(buf, cap, "none");
        return;
    }
    size_t k = 0;
    buf[k++] = '"';
    for (size_t i = 0; i < n && k + 6 < cap; i++) {
        unsigned char c = (unsigned char)b[i];
        if (c >= 0x20 && c < 0x7f && c != '"' && c != '\\') buf[k++] = (char)c;
        else k += (size_t)snprintf(buf + k, cap - k, "\\x%02x", c);
    }
    buf[k++] = '"';
    buf[k] = 0;
}

/* Draft and target must agree on what every id means: same bytes for each id of their tokenizers. */
static int same_vocab(const sl_lm_open_opts *opts, const char *role, const char *spec, const char *tokenizer_json)
{
    if (!strcmp(opts->vocab_tokenizer, tokenizer_json)) return SL_OK;
    sl_tok *t = NULL, *d = NULL;
    int rc = sl_tok_from_json(opts->vocab_tokenizer, &t);
    if (!rc) rc = sl_tok_from_json(tokenizer_json, &d);
    int32_t id = -1;
    if (!rc && !sl_tok_same_vocab(d, t, &id)) {
        size_t ld = 0, lt = 0;
        const char *bd = sl_tok_token_bytes(d, id, &ld), *bt = sl_tok_token_bytes(t, id, &lt);
        char qd[64], qt[64];
        quote_bytes(qd, sizeof qd, bd, ld);
        quote_bytes(qt, sizeof qt, bt, lt);
        rc = sl_fail(SL_EINPUT, "vocabulary mismatch: %s %s and %s differ first at id %d (%s vs %s): they must share a "
                     "tokenizer", role, spec, opts->vocab_from ? opts->vocab_from : "the target", (int)id, qd, qt);
    }
    sl_tok_free(t);
    sl_tok_free(d);
    return rc;
}

int sl_lm_open(const char *spec, const sl_lm_open_opts *opts, sl_lm_handle **out)
{
    *out = NULL;
    const char *role = opts->role ? opts->role : "model";
    handle_priv *p = sl_calloc(1, sizeof *p);
    if (!p) return SL_EFAIL;
    sl_lm_handle *h = &p->h;
    h->spec = spec;
    h->context = SIZE_MAX;
    p->sampling = opts->sampling;
    int rc = sl_sampling_validate(&opts->sampling);
    struct stat sb;
    if (rc) goto fail;
    if (!strncmp(spec, "lookup:", 7)) {
        h->kind = SL_LM_LOOKUP;
        if ((rc = parse_lookup(spec, p))) goto fail;
        if (p->fallback_path) {
            if ((rc = sl_ngram_open(p->fallback_path, &p->ng))) goto fail;
            h->vocab_size = p->ng->vocab_size;
            h->tokenizer_json = p->ng->tokenizer_json;
            h->file = p->fallback_path;
        } else if (opts->vocab_size) {
            h->vocab_size = opts->vocab_size;
        } else {
            rc = sl_fail(SL_EINPUT, "%s %s: a lookup draft without a fallback file needs a vocabulary (from the target, "
                         "or lookup:N:EPS:NGRAM_FILE)", role, spec);
            goto fail;
        }
    } else if (stat(spec, &sb) == 0) {
        /* Read the arch first: the engine's reader would call an n-gram file a bad transformer.
         * Only native files hold n-gram drafts; every other format is a transformer. */
        sl_model_format fmt;
        if ((rc = sl_model_detect(spec, &fmt))) goto fail;
        int is_ngram = 0;
        if (fmt == SL_FMT_SPECLAB) {
            sl_st_file *f = NULL;
            if ((rc = sl_st_open(spec, &f))) goto fail;
            const char *arch = sl_st_meta(f, "arch");
            is_ngram = arch && (!strcmp(arch, "ngram") || !strcmp(arch, "lookup"));
            sl_st_close(f);
        }
        h->file = spec;
        if (is_ngram) {
            if ((rc = sl_ngram_open(spec, &p->ng))) goto fail;
            h->kind = p->ng->lookup_n ? SL_LM_LOOKUP : SL_LM_NGRAM;
            p->lookup_n = p->ng->lookup_n;
            p->lookup_eps = p->ng->lookup_eps;
            h->vocab_size = p->ng->vocab_size;
            h->tokenizer_json = p->ng->tokenizer_json;
        } else {
            h->kind = SL_LM_TRANSFORMER;
            if ((rc = sl_model_open(spec, &p->model))) goto fail;
            h->vocab_size = p->model->cfg.vocab_size;
            h->context = p->model->cfg.max_seq_len;
            h->tokenizer_json = p->model->tokenizer_json;
        }
    } else {
        rc = sl_fail(SL_EINPUT, "%s '%s': unknown model spec (expected a model file or lookup:N[:EPS[:NGRAM_FILE]]): %s",
                     role, spec, strerror(errno));
        goto fail;
    }
    if (opts->vocab_size && h->vocab_size != opts->vocab_size) {
        rc = sl_fail(SL_EINPUT, "vocabulary mismatch: %s %s has %zu tokens, %s has %zu: they must share a vocabulary",
                     role, spec, h->vocab_size, opts->vocab_from ? opts->vocab_from : "the target", opts->vocab_size);
        goto fail;
    }
    if (opts->vocab_tokenizer && h->tokenizer_json && (rc = same_vocab(opts, role, spec, h->tokenizer_json))) goto fail;
    *out = h;
    return SL_OK;
fail:
    sl_lm_close(h);
    return rc;
}

int sl_lm_start(sl_lm_handle *h, size_t max_len)
{
    handle_priv *p = (handle_priv *)h;
    if (h->max_len) return sl_fail(SL_EFAIL, "sl_lm_start called twice on %s", h->spec);
    if (max_len == 0) return sl_fail(SL_EINPUT, "%s: a context of 0 tokens", h->spec);
    if (max_len > h->context)
        return sl_fail(SL_EINPUT, "%s: %zu tokens exceed the context of %zu", h->spec, max_len, h->context);
    int rc = SL_OK;
    switch (h->kind) {
    case SL_LM_TRANSFORMER:
        if (!(rc = sl_model_ctx_alloc(p->model, max_len, &p->ctx)) && !(rc = sl_model_lm_alloc(p->ctx, &p->sampling, &p->mlm)))
            h->lm = p->mlm->lm;
        break;
    case SL_LM_NGRAM:
        if (!(rc = sl_ngram_lm_alloc(p->ng, &p->sampling, max_len, &p->nlm))) h->lm = p->nlm->lm;
        break;
    case SL_LM_LOOKUP:
        if (!(rc = sl_lookup_lm_alloc(h->vocab_size, p->lookup_n, p->lookup_eps, p->ng ? p->ng->p_uni : NULL, &p->sampling,
                                      max_len, &p->llm)))
            h->lm = p->llm->lm;
        break;
    }
    if (!rc) h->max_len = max_len;
    return rc;
}
