/*
 * sl_ngram.c: unigram/bigram count models (training, file, distributions) and the prompt-lookup
 * draft; both as the sampler's sl_lm. Formulas in sl_ngram.h.
 */
#include <json-c/json.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "sl_common.h"
#include "sl_ngram.h"
#include "sl_st.h"

const char *sl_ngram_smoothing_name(sl_ngram_smoothing s)
{
    switch (s) {
    case SL_NGRAM_ADDK: return "addk";
    case SL_NGRAM_ABSDISC: return "absdisc";
    case SL_NGRAM_KN: return "kn";
    }
    return "?";
}

int sl_ngram_smoothing_parse(const char *s, sl_ngram_smoothing *out)
{
    if (!strcmp(s, "addk")) *out = SL_NGRAM_ADDK;
    else if (!strcmp(s, "absdisc")) *out = SL_NGRAM_ABSDISC;
    else if (!strcmp(s, "kn")) *out = SL_NGRAM_KN;
    else return sl_fail(SL_EINPUT, "smoothing: '%s' is not addk, absdisc or kn", s);
    return SL_OK;
}

void sl_ngram_free(sl_ngram *m)
{
    if (!m) return;
    free(m->uni);
    free(m->row_ptr);
    free(m->col);
    free(m->cnt);
    free(m->p_uni);
    free(m->p_low);
    free(m->lambda);
    free(m->ctx_count);
    free(m->tokenizer_json);
    free(m->training_json);
    free(m);
}

/* P1, and for a bigram c(v.), lambda(v) and Plow, from the counts. */
static int derive(sl_ngram *m)
{
    const size_t V = m->vocab_size;
    m->p_uni = sl_malloc(V * sizeof *m->p_uni);
    if (!m->p_uni) return SL_EFAIL;
    const double k = m->add_k, den = (double)m->n_tokens + k * (double)V;
    for (size_t w = 0; w < V; w++) m->p_uni[w] = ((double)m->uni[w] + k) / den;
    if (m->order < 2) return SL_OK;
    m->p_low = sl_malloc(V * sizeof *m->p_low);
    m->lambda = sl_malloc(V * sizeof *m->lambda);
    m->ctx_count = sl_calloc(V, sizeof *m->ctx_count);
    if (!m->p_low || !m->lambda || !m->ctx_count) return SL_EFAIL;
    if (m->smoothing == SL_NGRAM_KN) {
        /* Continuation counts N1+(.w): the number of distinct left contexts of w. */
        uint64_t *cont = sl_calloc(V, sizeof *cont);
        if (!cont) return SL_EFAIL;
        for (size_t e = 0; e < m->nnz; e++) cont[m->col[e]]++;
        const double dk = (double)m->nnz + k * (double)V;
        for (size_t w = 0; w < V; w++) m->p_low[w] = ((double)cont[w] + k) / dk;
        free(cont);
    } else {
        memcpy(m->p_low, m->p_uni, V * sizeof *m->p_low);
    }
    for (size_t v = 0; v < V; v++) {
        uint64_t c = 0;
        for (int32_t e = m->row_ptr[v]; e < m->row_ptr[v + 1]; e++) c += (uint64_t)m->cnt[e];
        m->ctx_count[v] = c;
        const double types = (double)(m->row_ptr[v + 1] - m->row_ptr[v]);
        m->lambda[v] = c ? m->discount * types / (double)c : 1.0;
    }
    return SL_OK;
}

void sl_ngram_dist(const sl_ngram *m, int32_t prev, double *out)
{
    const size_t V = m->vocab_size;
    if (m->order < 2) {
        memcpy(out, m->p_uni, V * sizeof *out);
        return;
    }
    if (prev < 0 || m->ctx_count[prev] == 0) {
        memcpy(out, m->p_low, V * sizeof *out);
        return;
    }
    const double lam = m->lambda[prev], inv = 1.0 / (double)m->ctx_count[prev];
    for (size_t w = 0; w < V; w++) out[w] = lam * m->p_low[w];
    for (int32_t e = m->row_ptr[prev]; e < m->row_ptr[prev + 1]; e++)
        out[m->col[e]] += ((double)m->cnt[e] - m->discount) * inv; /* c >= 1 >= D: never negative */
}

/* ---- training ---- */

static int cmp_i32(const void *x, const void *y)
{
    int32_t a = *(const int32_t *)x, b = *(const int32_t *)y;
    return (a > b) - (a < b);
}

int sl_ngram_train(const int32_t *const *seqs, const size_t *lens, size_t n_seqs, size_t V, const sl_ngram_opts *o,
                   sl_ngram **out)
{
    *out = NULL;
    if (V < 2 || V > (size_t)INT32_MAX) return sl_fail(SL_EINPUT, "vocabulary size %zu: expected 2..2^31-1", V);
    if (o->order != 1 && o->order != 2) return sl_fail(SL_EINPUT, "order: %d is not 1 or 2", o->order);
    if (o->order == 1 && o->smoothing != SL_NGRAM_ADDK)
        return sl_fail(SL_EINPUT, "smoothing: a unigram uses addk, not %s", sl_ngram_smoothing_name(o->smoothing));
    if (o->order == 2 && o->smoothing == SL_NGRAM_ADDK)
        return sl_fail(SL_EINPUT, "smoothing: a bigram uses absdisc or kn, not addk");
    if (o->add_k < 0 || !isfinite(o->add_k)) return sl_fail(SL_EINPUT, "add_k: %g is not > 0", o->add_k);
    if (o->discount < 0 || o->discount > 1 || isnan(o->discount))
        return sl_fail(SL_EINPUT, "discount: %g is outside (0, 1]", o->discount);
    sl_ngram *m = sl_calloc(1, sizeof *m);
    if (!m) return SL_EFAIL;
    m->vocab_size = V;
    m->order = o->order;
    m->smoothing = o->smoothing;
    m->add_k = o->add_k > 0 ? o->add_k : 1.0;
    uint64_t *uni = sl_calloc(V, sizeof *uni);
    int rc = uni ? SL_OK : SL_EFAIL;
    for (size_t s = 0; !rc && s < n_seqs; s++)
        for (size_t i = 0; !rc && i < lens[s]; i++) {
            if (seqs[s][i] < 0 || (size_t)seqs[s][i] >= V)
                rc = sl_fail(SL_EINPUT, "token %d at position %zu of input %zu is outside the vocabulary of %zu", seqs[s][i],
                             i, s, V);
            else uni[seqs[s][i]]++;
        }
    for (size_t s = 0; !rc && s < n_seqs; s++) m->n_tokens += lens[s];
    if (!rc && m->n_tokens == 0) rc = sl_fail(SL_EINPUT, "the training files hold no tokens");
    m->uni = rc ? NULL : sl_malloc(V * sizeof *m->uni);
    if (!rc && !m->uni) rc = SL_EFAIL;
    for (size_t w = 0; !rc && w < V; w++) {
        if (uni[w] > INT32_MAX) rc = sl_fail(SL_EINPUT, "token %zu occurs %llu times: counts are stored as I32", w, (unsigned long long)uni[w]);
        else m->uni[w] = (int32_t)uni[w];
    }
    free(uni);
    if (!rc && o->order == 2) {
        /* Bucket the bigrams by left token (counting sort), then sort each row's right tokens and
         * run-length encode them: O(n log row) with no V x V table. */
        uint64_t *start = sl_calloc(V + 1, sizeof *start);
        uint64_t n_big = 0;
        rc = start ? SL_OK : SL_EFAIL;
        for (size_t s = 0; !rc && s < n_seqs; s++)
            for (size_t i = 1; i < lens[s]; i++) start[seqs[s][i - 1] + 1]++, n_big++;
        for (size_t v = 0; !rc && v < V; v++) start[v + 1] += start[v];
        int32_t *right = rc ? NULL : sl_malloc((n_big ? n_big : 1) * sizeof *right);
        uint64_t *fill = rc ? NULL : sl_malloc(V * sizeof *fill);
        if (!rc && (!right || !fill)) rc = SL_EFAIL;
        if (!rc) {
            memcpy(fill, start, V * sizeof *fill);
            for (size_t s = 0; s < n_seqs; s++)
                for (size_t i = 1; i < lens[s]; i++) right[fill[seqs[s][i - 1]]++] = seqs[s][i];
        }
        /* Count types per row with a stamp array (no sort needed): pass 1 sizes, pass 2 fills. */
        int32_t *seen = rc ? NULL : sl_malloc(V * sizeof *seen);
        uint64_t *tally = rc ? NULL : sl_calloc(V, sizeof *tally);
        m->row_ptr = rc ? NULL : sl_malloc((V + 1) * sizeof *m->row_ptr);
        if (!rc && (!seen || !tally || !m->row_ptr)) rc = SL_EFAIL;
        size_t nnz = 0;
        if (!rc) {
            for (size_t w = 0; w < V; w++) seen[w] = -1;
            for (size_t v = 0; v < V && !rc; v++) {
                m->row_ptr[v] = (int32_t)nnz;
                for (uint64_t e = start[v]; e < start[v + 1]; e++)
                    if (seen[right[e]] != (int32_t)v) seen[right[e]] = (int32_t)v, nnz++;
                if (nnz > INT32_MAX) rc = sl_fail(SL_EINPUT, "%zu distinct bigrams: the table is indexed by I32", nnz);
            }
            if (!rc) m->row_ptr[V] = (int32_t)nnz;
        }
        m->nnz = nnz;
        m->col = rc ? NULL : sl_malloc((nnz ? nnz : 1) * sizeof *m->col);
        m->cnt = rc ? NULL : sl_malloc((nnz ? nnz : 1) * sizeof *m->cnt);
        if (!rc && (!m->col || !m->cnt)) rc = SL_EFAIL;
        for (size_t v = 0; !rc && v < V; v++) {
            /* The row's distinct right tokens in first-seen order, tallied, then sorted ascending. */
            size_t k = (size_t)m->row_ptr[v];
            for (uint64_t e = start[v]; e < start[v + 1]; e++) {
                if (tally[right[e]] == 0) m->col[k++] = right[e];
                tally[right[e]]++;
            }
            size_t a = (size_t)m->row_ptr[v], b = k;
            qsort(m->col + a, b - a, sizeof *m->col, cmp_i32);
            for (size_t e = a; e < b && !rc; e++) {
                if (tally[m->col[e]] > INT32_MAX) rc = sl_fail(SL_EINPUT, "a bigram count exceeds I32");
                m->cnt[e] = (int32_t)tally[m->col[e]];
                tally[m->col[e]] = 0;
            }
        }
        if (!rc) {
            if (o->discount > 0) m->discount = o->discount;
            else {
                uint64_t n1 = 0, n2 = 0;
                for (size_t e = 0; e < nnz; e++) n1 += m->cnt[e] == 1, n2 += m->cnt[e] == 2;
                m->discount = n1 + 2 * n2 ? (double)n1 / (double)(n1 + 2 * n2) : 0.5;
                if (m->discount <= 0) m->discount = 0.5; /* no singletons: a neutral default */
            }
        }
        free(start);
        free(right);
        free(fill);
        free(seen);
        free(tally);
    }
    if (!rc) rc = derive(m);
    if (rc) {
        sl_ngram_free(m);
        return rc;
    }
    *out = m;
    return SL_OK;
}

/* ---- file ---- */

int sl_ngram_write(const sl_ngram *m, const char *path)
{
    json_object *c = json_object_new_object();
    json_object_object_add(c, "vocab_size", json_object_new_int64((int64_t)m->vocab_size));
    json_object_object_add(c, "order", json_object_new_int(m->order));
    json_object_object_add(c, "smoothing", json_object_new_string(sl_ngram_smoothing_name(m->smoothing)));
    json_object_object_add(c, "add_k", json_object_new_double(m->add_k));
    if (m->order == 2) json_object_object_add(c, "discount", json_object_new_double(m->discount));
    json_object_object_add(c, "n_tokens", json_object_new_int64((int64_t)m->n_tokens));
    if (m->lookup_n) {
        json_object_object_add(c, "n", json_object_new_int64((int64_t)m->lookup_n));
        json_object_object_add(c, "epsilon", json_object_new_double(m->lookup_eps));
    }
    /* %.17g keeps every double exact through the text. */
    json_c_set_serialization_double_format("%.17g", JSON_C_OPTION_THREAD);
    const char *cfg = json_object_to_json_string_ext(c, JSON_C_TO_STRING_PLAIN);
    const char *keys[5] = {"format", "format_version", "arch", "config", NULL};
    const char *vals[5] = {"speclab-model", "1", m->lookup_n ? "lookup" : "ngram", cfg, NULL};
    size_t n_meta = 4;
    const char *keys2[6], *vals2[6];
    memcpy(keys2, keys, sizeof keys);
    memcpy(vals2, vals, sizeof vals);
    if (m->tokenizer_json) keys2[n_meta] = "tokenizer", vals2[n_meta++] = m->tokenizer_json;
    if (m->training_json) keys2[n_meta] = "training", vals2[n_meta++] = m->training_json;
    sl_st_wtensor t[4];
    size_t nt = 0;
    t[nt++] = (sl_st_wtensor){"unigram.count", SL_DT_I32, 1, {(int64_t)m->vocab_size}, m->uni};
    if (m->order == 2) {
        t[nt++] = (sl_st_wtensor){"bigram.row_ptr", SL_DT_I32, 1, {(int64_t)m->vocab_size + 1}, m->row_ptr};
        t[nt++] = (sl_st_wtensor){"bigram.col", SL_DT_I32, 1, {(int64_t)m->nnz}, m->col};
        t[nt++] = (sl_st_wtensor){"bigram.count", SL_DT_I32, 1, {(int64_t)m->nnz}, m->cnt};
    }
    int rc = sl_st_write(path, t, nt, keys2, vals2, n_meta);
    json_c_set_serialization_double_format(NULL, JSON_C_OPTION_THREAD);
    json_object_put(c);
    return rc;
}

/* An I32 vector tensor of n entries, copied out of the (unaligned) mapping. */
static int get_i32(const sl_st_file *f, const char *name, size_t n, int32_t **out)
{
    const sl_st_tensor *t = sl_st_find(f, name);
    if (!t) return sl_fail(SL_EINPUT, "%s: n-gram model lacks tensor '%s'", f->path, name);
    if (t->dtype != SL_DT_I32 || t->ndim != 1 || (size_t)t->shape[0] != n)
        return sl_fail(SL_EINPUT, "%s: tensor '%s' must be I32 of shape (%zu), found %s with %zu elements", f->path, name,
                       n, sl_dtype_name(t->dtype), t->numel);
    *out = sl_malloc((n ? n : 1) * sizeof **out);
    if (!*out) return SL_EFAIL;
    if (n) memcpy(*out, t->data, n * sizeof **out);
    return SL_OK;
}

static int cfg_num(json_object *c, const char *key, const char *path, int need_int, double *out)
{
    json_object *v;
    if (!json_object_object_get_ex(c, key, &v) ||
        !(json_object_is_type(v, json_type_int) || (!need_int && json_object_is_type(v, json_type_double))))
        return sl_fail(SL_EINPUT, "%s: n-gram config lacks a numeric '%s'", path, key);
    *out = json_object_is_type(v, json_type_int) ? (double)json_object_get_int64(v) : json_object_get_double(v);
    return SL_OK;
}

static char *dup_or_null(const char *s)
{
    if (!s) return NULL;
    size_t n = strlen(s) + 1;
    char *d = malloc(n);
    if (d) memcpy(d, s, n);
    return d;
}

int sl_ngram_open(const char *path, sl_ngram **out)
{
    *out = NULL;
    sl_st_file *f = NULL;
    int rc = sl_st_open(path, &f);
    if (rc) return rc;
    const char *arch = sl_st_meta(f, "arch"), *cfg = sl_st_meta(f, "config");
    sl_ngram *m = sl_calloc(1, sizeof *m);
    json_object *c = NULL;
    if (!m) rc = SL_EFAIL;
    else if (!arch || (strcmp(arch, "ngram") && strcmp(arch, "lookup")))
        rc = sl_fail(SL_EINPUT, "%s: arch is '%s', not ngram or lookup", path, arch ? arch : "(none)");
    else if (!cfg || !(c = json_tokener_parse(cfg)) || !json_object_is_type(c, json_type_object))
        rc = sl_fail(SL_EINPUT, "%s: metadata 'config' is missing or not a JSON object", path);
    double V = 0, order = 0, k = 0, D = 0, N = 0;
    if (!rc) rc = cfg_num(c, "vocab_size", path, 1, &V);
    if (!rc) rc = cfg_num(c, "order", path, 1, &order);
    if (!rc) rc = cfg_num(c, "add_k", path, 0, &k);
    if (!rc) rc = cfg_num(c, "n_tokens", path, 1, &N);
    if (!rc && order == 2) rc = cfg_num(c, "discount", path, 0, &D);
    const int is_lookup = !rc && !strcmp(arch, "lookup");
    double ln = 0, le = 0;
    if (is_lookup) rc = cfg_num(c, "n", path, 1, &ln);
    if (!rc && is_lookup) rc = cfg_num(c, "epsilon", path, 0, &le);
    if (!rc && is_lookup && (order != 1 || ln < 1 || ln > 64 || !(le > 0 && le <= 1)))
        rc = sl_fail(SL_EINPUT, "%s: a lookup file needs order 1, n in 1..64 and epsilon in (0, 1]", path);
    if (!rc) {
        m->lookup_n = (size_t)ln;
        m->lookup_eps = le;
    }
    json_object *js;
    if (!rc && (!json_object_object_get_ex(c, "smoothing", &js) || !json_object_is_type(js, json_type_string) ||
                sl_ngram_smoothing_parse(json_object_get_string(js), &m->smoothing)))
        rc = sl_fail(SL_EINPUT, "%s: n-gram config 'smoothing' must be addk, absdisc or kn", path);
    if (!rc && (V < 2 || V > INT32_MAX)) rc = sl_fail(SL_EINPUT, "%s: vocab_size %g: expected 2..2^31-1", path, V);
    if (!rc && order != 1 && order != 2) rc = sl_fail(SL_EINPUT, "%s: order %g: expected 1 or 2", path, order);
    if (!rc && (order == 1) != (m->smoothing == SL_NGRAM_ADDK))
        rc = sl_fail(SL_EINPUT, "%s: smoothing %s does not fit order %g", path, sl_ngram_smoothing_name(m->smoothing), order);
    if (!rc && !(k > 0 && isfinite(k))) rc = sl_fail(SL_EINPUT, "%s: add_k %g: expected > 0", path, k);
    if (!rc && order == 2 && !(D > 0 && D <= 1)) rc = sl_fail(SL_EINPUT, "%s: discount %g: expected (0, 1]", path, D);
    /* A count the uint64 cast can hold (json ints reach here as doubles; 2^63 is exact in double). */
    if (!rc && !(N >= 1 && N < 0x1p63)) rc = sl_fail(SL_EINPUT, "%s: n_tokens %g: expected 1..2^63-1", path, N);
    if (!rc) {
        m->vocab_size = (size_t)V;
        m->order = (int)order;
        m->add_k = k;
        m->discount = D;
        m->n_tokens = (uint64_t)N;
        rc = get_i32(f, "unigram.count", m->vocab_size, &m->uni);
    }
    uint64_t sum = 0;
    for (size_t w = 0; !rc && w < m->vocab_size; w++) {
        if (m->uni[w] < 0) rc = sl_fail(SL_EINPUT, "%s: unigram.count[%zu] = %d is negative", path, w, m->uni[w]);
        sum += (uint64_t)m->uni[w];
    }
    if (!rc && sum != m->n_tokens)
        rc = sl_fail(SL_EINPUT, "%s: unigram counts sum to %llu, config n_tokens is %llu", path, (unsigned long long)sum,
                     (unsigned long long)m->n_tokens);
    if (!rc && m->order == 2) {
        const sl_st_tensor *tc = sl_st_find(f, "bigram.col");
        size_t nnz = tc ? tc->numel : 0;
        m->nnz = nnz;
        rc = get_i32(f, "bigram.row_ptr", m->vocab_size + 1, &m->row_ptr);
        if (!rc) rc = get_i32(f, "bigram.col", nnz, &m->col);
        if (!rc) rc = get_i32(f, "bigram.count", nnz, &m->cnt);
        if (!rc && (m->row_ptr[0] != 0 || (size_t)m->row_ptr[m->vocab_size] != nnz))
            rc = sl_fail(SL_EINPUT, "%s: bigram.row_ptr must run from 0 to %zu", path, nnz);
        /* All row pointers first, so that no row below reads outside col and count. */
        for (size_t v = 0; !rc && v < m->vocab_size; v++)
            if (m->row_ptr[v + 1] < m->row_ptr[v] || (size_t)m->row_ptr[v + 1] > nnz)
                rc = sl_fail(SL_EINPUT, "%s: bigram.row_ptr[%zu] = %d: expected non-decreasing values in [0, %zu]", path,
                             v + 1, m->row_ptr[v + 1], nnz);
        for (size_t v = 0; !rc && v < m->vocab_size; v++) {
            uint64_t rs = 0;
            for (int32_t e = m->row_ptr[v]; !rc && e < m->row_ptr[v + 1]; e++) {
                if (m->col[e] < 0 || (size_t)m->col[e] >= m->vocab_size || (e > m->row_ptr[v] && m->col[e] <= m->col[e - 1]))
                    rc = sl_fail(SL_EINPUT, "%s: bigram.col[%d] = %d: columns must be ascending ids < %zu within a row", path,
                                 e, m->col[e], m->vocab_size);
                else if (m->cnt[e] < 1) rc = sl_fail(SL_EINPUT, "%s: bigram.count[%d] = %d: expected >= 1", path, e, m->cnt[e]);
                rs += (uint64_t)m->cnt[e];
            }
            /* A token is a left context at most as often as it occurs. */
            if (!rc && rs > (uint64_t)m->uni[v])
                rc = sl_fail(SL_EINPUT, "%s: token %zu is a bigram context %llu times but occurs %d times", path, v,
                             (unsigned long long)rs, m->uni[v]);
        }
    }
    if (!rc && f->n_tensors != (m->order == 2 ? 4u : 1u))
        rc = sl_fail(SL_EINPUT, "%s: unexpected tensors for an order-%d n-gram model", path, m->order);
    if (!rc) {
        m->tokenizer_json = dup_or_null(sl_st_meta(f, "tokenizer"));
        m->training_json = dup_or_null(sl_st_meta(f, "training"));
        rc = derive(m);
    }
    if (c) json_object_put(c);
    sl_st_close(f);
    if (rc) {
        sl_ngram_free(m);
        return rc;
    }
    *out = m;
    return SL_OK;
}

/* ---- sl_lm adapters ---- */

static int is_default_sampling(const sl_sampling *s)
{
    return s->temperature == 1.0 && s->top_k == 0 && s->top_p >= 1.0 && s->min_p == 0.0;
}

/* raw (V) -> dst under s. The default sampling copies (softmax(log p) would only add rounding). */
static int standardise(const double *raw, size_t V, const sl_sampling *s, double *dst, sl_dist_work *dw)
{
    if (is_default_sampling(s)) {
        memcpy(dst, raw, V * sizeof *dst);
        return SL_OK;
    }
    if (s->temperature == 0) {
        /* Greedy: the one-hot at the first maximum of log(raw), found without taking V logarithms
         * (the largest cost of a draft step otherwise): log is non-decreasing, so that maximum is
         * log(max raw), and the first index reaching it is among those whose raw value is within
         * a relative 1e-12 of the maximum (log of doubles that close can round to one value);
         * only those get their logarithm taken. NaN or negative raw values take the general path,
         * which reports them. */
        double m4[4] = {-INFINITY, -INFINITY, -INFINITY, -INFINITY}, mx = -INFINITY;
        int b4[4] = {0}, bad = 0;
        size_t w = 0;
        /* The maximum in four lanes (a maximum is exact in any order), NaN and negatives noted. */
        for (; w + 4 <= V; w += 4)
            for (int k = 0; k < 4; k++) {
                b4[k] |= !(raw[w + k] >= 0);
                m4[k] = raw[w + k] > m4[k] ? raw[w + k] : m4[k];
            }
        for (; w < V; w++) {
            bad |= !(raw[w] >= 0);
            mx = raw[w] > mx ? raw[w] : mx;
        }
        for (int k = 0; k < 4; k++) mx = m4[k] > mx ? m4[k] : mx, bad |= b4[k];
        if (!bad) {
            const double lm = log(mx), near = mx * (1 - 1e-12);
            size_t best = 0;
            while (best + 4 <= V && raw[best] < near && raw[best + 1] < near && raw[best + 2] < near && raw[best + 3] < near)
                best += 4;
            while (!(raw[best] >= near && log(raw[best]) == lm)) best++;
            memset(dst, 0, V * sizeof *dst);
            dst[best] = 1;
            return sl_sampling_validate(s);
        }
    }
    for (size_t w = 0; w < V; w++) dst[w] = log(raw[w]);
    return sl_dist_standardise(dst, V, s, dst, dw);
}

/* The raw next-token distribution after the history h[0..len) (the n-gram and lookup drafts). */
typedef void (*raw_dist_fn)(const void *ctx, const int32_t *h, size_t len, double *out);

/* The sl_lm extend shared by the history-keeping drafts: checks every id and the room, appends
 * the tokens to hist, and standardises the raw distribution after each of the last n_rows. */
static int history_extend(int32_t *hist, size_t *len, size_t max_len, size_t V, const sl_sampling *s, double *raw,
                          sl_dist_work *dw, raw_dist_fn dist, const void *ctx, const int32_t *tokens, size_t n,
                          size_t n_rows, double *dists)
{
    if (n_rows > n) return sl_fail(SL_EINPUT, "extend: %zu rows asked of %zu tokens", n_rows, n);
    if (*len + n > max_len)
        return sl_fail(SL_EINPUT, "sequence of %zu tokens exceeds the context of %zu tokens", *len + n, max_len);
    for (size_t i = 0; i < n; i++)
        if (tokens[i] < 0 || (size_t)tokens[i] >= V)
            return sl_fail(SL_EINPUT, "token id %d is outside the vocabulary [0, %zu)", tokens[i], V);
    for (size_t i = 0; i < n; i++) {
        hist[(*len)++] = tokens[i];
        if (i + n_rows < n) continue;
        dist(ctx, hist, *len, raw);
        int rc = standardise(raw, V, s, dists + (i + n_rows - n) * V, dw);
        if (rc) return rc;
    }
    return SL_OK;
}

static int history_truncate(size_t *len, size_t to)
{
    if (to > *len) return sl_fail(SL_EINPUT, "truncate to %zu tokens of a state of %zu", to, *len);
    *len = to;
    return SL_OK;
}

static void ngram_raw(const void *m, const int32_t *h, size_t len, double *out) { sl_ngram_dist(m, h[len - 1], out); }

static int ngram_extend(void *self, const int32_t *tokens, size_t n, size_t n_rows, double *dists)
{
    sl_ngram_lm *l = self;
    return history_extend(l->hist, &l->len, l->max_len, l->m->vocab_size, &l->sampling, l->raw, l->dw, ngram_raw, l->m,
                          tokens, n, n_rows, dists);
}

static int ngram_truncate(void *self, size_t len) { return history_truncate(&((sl_ngram_lm *)self)->len, len); }

int sl_ngram_lm_alloc(const sl_ngram *m, const sl_sampling *s, size_t max_len, sl_ngram_lm **out)
{
    *out = NULL;
    int rc = sl_sampling_validate(s);
    if (rc) return rc;
    sl_ngram_lm *l = sl_calloc(1, sizeof *l);
    if (!l) return SL_EFAIL;
    l->m = m;
    l->sampling = *s;
    l->max_len = max_len;
    l->hist = sl_malloc((max_len ? max_len : 1) * sizeof *l->hist);
    l->raw = sl_malloc(m->vocab_size * sizeof *l->raw);
    l->dw = sl_dist_work_alloc(m->vocab_size);
    if (!l->hist || !l->raw || !l->dw) {
        sl_ngram_lm_free(l);
        return sl_fail(SL_EFAIL, "out of memory");
    }
    l->lm = (sl_lm){l, m->vocab_size, ngram_extend, ngram_truncate};
    *out = l;
    return SL_OK;
}

void sl_ngram_lm_free(sl_ngram_lm *l)
{
    if (!l) return;
    free(l->hist);
    free(l->raw);
    sl_dist_work_free(l->dw);
    free(l);
}

/* ---- prompt lookup ---- */

int32_t sl_lookup_propose(const int32_t *h, size_t n, size_t n_max, size_t *match_len)
{
    *match_len = 0;
    /* An occurrence needs a follower inside the history, so a suffix is at most n - 1 long. */
    const size_t longest = n == 0 ? 0 : n_max < n - 1 ? n_max : n - 1;
    for (size_t m = longest; m >= 1; m--) {
        const int32_t *suf = h + n - m;
        /* Occurrences h[j..j+m) with a follower h[j+m] inside the history, most recent first:
         * j + m <= n - 1. */
        for (size_t j = n - m; j-- > 0;) {
            if (h[j + m - 1] == suf[m - 1] && memcmp(h + j, suf, m * sizeof *h) == 0) {
                *match_len = m;
                return h[j + m];
            }
        }
    }
    return -1;
}

void sl_lookup_dist(const sl_lookup_lm *l, const int32_t *h, size_t n, double *out)
{
    const size_t V = l->vocab_size;
    size_t ml;
    const int32_t x = sl_lookup_propose(h, n, l->n_max, &ml);
    /* One pass: the fallback (or uniform), times eps where a continuation was found. */
    const double eps = x < 0 ? 1.0 : l->eps, u = 1.0 / (double)V;
    if (l->fallback)
        for (size_t w = 0; w < V; w++) out[w] = l->fallback[w] * eps;
    else
        for (size_t w = 0; w < V; w++) out[w] = u * eps;
    if (x >= 0) out[x] += 1.0 - l->eps;
}

static void lookup_raw(const void *l, const int32_t *h, size_t len, double *out) { sl_lookup_dist(l, h, len, out); }

static int lookup_extend(void *self, const int32_t *tokens, size_t n, size_t n_rows, double *dists)
{
    sl_lookup_lm *l = self;
    return history_extend(l->hist, &l->len, l->max_len, l->vocab_size, &l->sampling, l->raw, l->dw, lookup_raw, l, tokens,
                          n, n_rows, dists);
}

static int lookup_truncate(void *self, size_t len) { return history_truncate(&((sl_lookup_lm *)self)->len, len); }

int sl_lookup_lm_alloc(size_t V, size_t n_max, double eps, const double *fallback, const sl_sampling *s,
                       size_t max_len, sl_lookup_lm **out)
{
    *out = NULL;
    if (V < 2) return sl_fail(SL_EINPUT, "lookup: vocabulary size %zu: expected >= 2", V);
    if (n_max < 1) return sl_fail(SL_EINPUT, "lookup: n-gram length %zu: expected >= 1", n_max);
    if (!(eps > 0 && eps <= 1)) return sl_fail(SL_EINPUT, "lookup: epsilon %g is outside (0, 1]", eps);
    int rc = sl_sampling_validate(s);
    if (rc) return rc;
    sl_lookup_lm *l = sl_calloc(1, sizeof *l);
    if (!l) return SL_EFAIL;
    l->vocab_size = V;
    l->n_max = n_max;
    l->eps = eps;
    l->fallback = fallback;
    l->sampling = *s;
    l->max_len = max_len;
    l->hist = sl_malloc((max_len ? max_len : 1) * sizeof *l->hist);
    l->raw = sl_malloc(V * sizeof *l->raw);
    l->dw = sl_dist_work_alloc(V);
    if (!l->hist || !l->raw || !l->dw) {
        sl_lookup_lm_free(l);
        return sl_fail(SL_EFAIL, "out of memory");
    }
    l->lm = (sl_lm){l, V, lookup_extend, lookup_truncate};
    *out = l;
    return SL_OK;
}

void sl_lookup_lm_free(sl_lookup_lm *l)
{
    if (!l) return;
    free(l->hist);
    free(l->raw);
    sl_dist_work_free(l->dw);
    free(l);
}
