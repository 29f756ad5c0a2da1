/*
 * sl_train_export.c: the trainer's side of the native format (models/FORMAT.md): write a trained
 * gpt2 model as safetensors (f32 or f16) and read one back into training layout (for a teacher).
 *
 * The writer is the trainer's own (its header, padded to 8 bytes, is built with json-c); the reader
 * maps the file with the engine's safetensors reader (models/sl_st.h) and checks that it is a gpt2
 * model whose tensors match its config.
 */
#include <json-c/json.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sl_common.h"
#include "sl_half.h"
#include "sl_st.h"
#include "sl_train.h"
#include "sl_train_io.h"

/* ---- the tensor list of FORMAT.md ---- */

typedef struct {
    char name[64];
    int tensor;  /* enum sl_train_tensor */
    size_t off;  /* float offset within that tensor */
    int ndim;
    size_t shape[2];
} tensor_ref;

/* Fills refs (if not NULL) and returns the count. */
static int tensor_list(const sl_train_config *c, tensor_ref *refs)
{
    size_t C = (size_t)c->d_model, F = (size_t)c->d_ff, V = (size_t)c->vocab_size;
    int n = 0;
#define ADD(nm, t, o, d, s0, s1)                                                                   \
    do {                                                                                            \
        if (refs) {                                                                                 \
            tensor_ref *r = &refs[n];                                                               \
            snprintf(r->name, sizeof r->name, "%s", nm);                                           \
            r->tensor = (t), r->off = (o), r->ndim = (d), r->shape[0] = (s0), r->shape[1] = (s1);  \
        }                                                                                           \
        n++;                                                                                        \
    } while (0)
    char nm[64];
    ADD("tok_emb.weight", SL_TP_WTE, 0, 2, V, C);
    ADD("pos_emb.weight", SL_TP_WPE, 0, 2, (size_t)c->max_seq_len, C);
    for (size_t l = 0; l < (size_t)c->n_layer; l++) {
#define LAYER(suffix, t, o, d, s0, s1)                                  \
    do {                                                                \
        snprintf(nm, sizeof nm, "layers.%zu.%s", l, suffix);            \
        ADD(nm, t, o, d, s0, s1);                                       \
    } while (0)
        LAYER("attn_norm.weight", SL_TP_LN1W, l * C, 1, C, 0);
        LAYER("attn_norm.bias", SL_TP_LN1B, l * C, 1, C, 0);
        LAYER("attn.q.weight", SL_TP_QKVW, l * 3 * C * C, 2, C, C);
        LAYER("attn.q.bias", SL_TP_QKVB, l * 3 * C, 1, C, 0);
        LAYER("attn.k.weight", SL_TP_QKVW, l * 3 * C * C + C * C, 2, C, C);
        LAYER("attn.k.bias", SL_TP_QKVB, l * 3 * C + C, 1, C, 0);
        LAYER("attn.v.weight", SL_TP_QKVW, l * 3 * C * C + 2 * C * C, 2, C, C);
        LAYER("attn.v.bias", SL_TP_QKVB, l * 3 * C + 2 * C, 1, C, 0);
        LAYER("attn.o.weight", SL_TP_ATTPROJW, l * C * C, 2, C, C);
        LAYER("attn.o.bias", SL_TP_ATTPROJB, l * C, 1, C, 0);
        LAYER("mlp_norm.weight", SL_TP_LN2W, l * C, 1, C, 0);
        LAYER("mlp_norm.bias", SL_TP_LN2B, l * C, 1, C, 0);
        LAYER("mlp.up.weight", SL_TP_FCW, l * F * C, 2, F, C);
        LAYER("mlp.up.bias", SL_TP_FCB, l * F, 1, F, 0);
        LAYER("mlp.down.weight", SL_TP_FCPROJW, l * C * F, 2, C, F);
        LAYER("mlp.down.bias", SL_TP_FCPROJB, l * C, 1, C, 0);
#undef LAYER
    }
    ADD("final_norm.weight", SL_TP_LNFW, 0, 1, C, 0);
    ADD("final_norm.bias", SL_TP_LNFB, 0, 1, C, 0);
    if (!c->tied_embeddings) ADD("lm_head.weight", SL_TP_LMHEAD, 0, 2, V, C);
#undef ADD
    return n;
}

static size_t ref_count(const tensor_ref *r) { return r->ndim == 1 ? r->shape[0] : r->shape[0] * r->shape[1]; }

/* ---- writer ---- */

int sl_train_export(const sl_train_model *m, const char *path, int f16, const char *training_json,
                    const char *tokenizer_json)
{
    int nt = tensor_list(&m->cfg, NULL);
    tensor_ref *refs = sl_calloc((size_t)nt, sizeof *refs);
    if (!refs) return SL_EFAIL;
    tensor_list(&m->cfg, refs);
    size_t esize = f16 ? 2 : 4;

    struct json_object *hdr = json_object_new_object(), *meta = json_object_new_object();
    char *cfg = sl_train_config_json(&m->cfg);
    json_object_object_add(meta, "format", json_object_new_string("speclab-model"));
    json_object_object_add(meta, "format_version", json_object_new_string("1"));
    json_object_object_add(meta, "arch", json_object_new_string("gpt2"));
    json_object_object_add(meta, "config", json_object_new_string(cfg));
    if (tokenizer_json) json_object_object_add(meta, "tokenizer", json_object_new_string(tokenizer_json));
    if (training_json) json_object_object_add(meta, "training", json_object_new_string(training_json));
    free(cfg);
    json_object_object_add(hdr, "__metadata__", meta);
    size_t off = 0;
    for (int i = 0; i < nt; i++) {
        struct json_object *t = json_object_new_object(), *shape = json_object_new_array(),
                           *offs = json_object_new_array();
        json_object_object_add(t, "dtype", json_object_new_string(f16 ? "F16" : "F32"));
        for (int d = 0; d < refs[i].ndim; d++) json_object_array_add(shape, json_object_new_int64((int64_t)refs[i].shape[d]));
        size_t bytes = ref_count(&refs[i]) * esize;
        json_object_array_add(offs, json_object_new_int64((int64_t)off));
        json_object_array_add(offs, json_object_new_int64((int64_t)(off + bytes)));
        off += bytes;
        json_object_object_add(t, "shape", shape);
        json_object_object_add(t, "data_offsets", offs);
        json_object_object_add(hdr, refs[i].name, t);
    }
    const char *js = json_object_to_json_string_ext(hdr, JSON_C_TO_STRING_PLAIN);
    size_t jlen = strlen(js), padded = (jlen + 7) / 8 * 8; /* spaces pad the header to 8 bytes */

    sl_atomic_file af;
    int rc = sl_atomic_open(&af, path);
    if (rc) {
        json_object_put(hdr);
        free(refs);
        return rc;
    }
    unsigned char len8[8];
    for (int i = 0; i < 8; i++) len8[i] = (unsigned char)((uint64_t)padded >> (8 * i));
    fwrite(len8, 1, 8, af.f);
    fwrite(js, 1, jlen, af.f);
    for (size_t i = jlen; i < padded; i++) fputc(' ', af.f);
    json_object_put(hdr);
    for (int i = 0; i < nt; i++) {
        const float *src = m->params[refs[i].tensor] + refs[i].off;
        size_t n = ref_count(&refs[i]);
        if (f16) {
            for (size_t k = 0; k < n; k++) {
                uint16_t h = sl_half_f32_to_f16_canonical_nan(src[k]);
                unsigned char b[2] = {(unsigned char)(h & 0xff), (unsigned char)(h >> 8)};
                fwrite(b, 1, 2, af.f);
            }
        } else {
            fwrite(src, sizeof(float), n, af.f); /* x86-64 is little-endian, as safetensors requires */
        }
    }
    free(refs);
    if (ferror(af.f)) {
        sl_atomic_abort(&af);
        return sl_fail(SL_EFAIL, "writing %s failed", path);
    }
    return sl_atomic_commit(&af);
}

/* ---- reader ---- */

/* The shape as json-c prints an array ("[ 4, 8 ]"), as this message always read. */
static void shape_string(const sl_st_tensor *t, char *buf, size_t n)
{
    size_t k = (size_t)snprintf(buf, n, "[");
    for (int d = 0; d < t->ndim && k < n; d++)
        k += (size_t)snprintf(buf + k, n - k, "%s %lld", d ? "," : "", (long long)t->shape[d]);
    if (k < n) snprintf(buf + k, n - k, " ]");
}

int sl_train_import(const char *path, int B, int T, sl_train_model **out, char **tokenizer_json)
{
    *out = NULL;
    if (tokenizer_json) *tokenizer_json = NULL;
    /* The engine's reader checks the file's structure (header, dtypes, offsets); what it refuses is
     * reported as a model the trainer cannot read. */
    sl_st_file *f = NULL;
    int rc = sl_st_open(path, &f);
    if (rc == SL_EINPUT) {
        char why[768];
        snprintf(why, sizeof why, "%s", sl_errmsg());
        return sl_fail(SL_EINPUT, "cannot read model %s", why);
    }
    if (rc) return rc;
    sl_train_config cfg;
    sl_train_model *m = NULL;
    tensor_ref *refs = NULL;
    const char *fmt = sl_st_meta(f, "format"), *arch = sl_st_meta(f, "arch");
    if (!fmt || strcmp(fmt, "speclab-model") != 0)
        rc = sl_fail(SL_EINPUT, "model %s: metadata format is '%s', expected 'speclab-model'", path, fmt ? fmt : "(none)");
    else if (!arch || strcmp(arch, "gpt2") != 0)
        rc = sl_fail(SL_EINPUT, "model %s: arch is '%s'; the trainer handles gpt2 only", path, arch ? arch : "(none)");
    if (!rc) {
        const char *cj = sl_st_meta(f, "config");
        if (!cj) rc = sl_fail(SL_EINPUT, "model %s: metadata has no config", path);
        else if ((rc = sl_train_config_parse(cj, &cfg)) != 0) {
            char why[256];
            snprintf(why, sizeof why, "%s", sl_errmsg());
            rc = sl_fail(SL_EINPUT, "model %s: %s", path, why);
        }
    }
    if (!rc && T > cfg.max_seq_len)
        rc = sl_fail(SL_EINPUT, "model %s: max_seq_len %d is below the sequence length %d", path, cfg.max_seq_len, T);
    if (!rc && !(m = sl_train_model_alloc(&cfg, B, T, 0))) rc = SL_EFAIL;
    int nt = rc ? 0 : tensor_list(&cfg, NULL);
    if (!rc && !(refs = sl_calloc((size_t)nt, sizeof *refs))) rc = SL_EFAIL;
    if (!rc) tensor_list(&cfg, refs);
    for (int i = 0; !rc && i < nt; i++) {
        const char *nm = refs[i].name;
        const sl_st_tensor *t = sl_st_find(f, nm);
        if (!t) {
            rc = sl_fail(SL_EINPUT, "model %s: tensor %s is missing", path, nm);
            break;
        }
        if (t->dtype != SL_DT_F32 && t->dtype != SL_DT_F16 && t->dtype != SL_DT_BF16) {
            rc = sl_fail(SL_EINPUT, "model %s: tensor %s has dtype '%s', expected F32, F16 or BF16", path, nm,
                         sl_dtype_name(t->dtype));
            break;
        }
        int ok = t->ndim == refs[i].ndim;
        for (int d = 0; ok && d < refs[i].ndim; d++) ok = t->shape[d] == (int64_t)refs[i].shape[d];
        if (!ok) {
            char shape[160];
            shape_string(t, shape, sizeof shape);
            rc = sl_fail(SL_EINPUT, "model %s: tensor %s has shape %s, but the config implies (%zu%s%zu)", path, nm,
                         shape, refs[i].shape[0], refs[i].ndim == 2 ? ", " : "", refs[i].ndim == 2 ? refs[i].shape[1] : (size_t)0);
            break;
        }
        /* sl_st_open checked that the data holds numel elements of the dtype inside the file. */
        float *dst = m->params[refs[i].tensor] + refs[i].off;
        const unsigned char *src = t->data;
        size_t n = ref_count(&refs[i]);
        if (t->dtype == SL_DT_F32) {
            memcpy(dst, src, n * sizeof(float)); /* little-endian, as on x86-64 */
        } else {
            for (size_t k = 0; k < n; k++) {
                uint16_t h = (uint16_t)(src[2 * k] | src[2 * k + 1] << 8);
                dst[k] = t->dtype == SL_DT_BF16 ? sl_half_bf16_to_f32(h) : sl_half_f16_to_f32_keep_nan(h);
            }
        }
    }
    if (!rc && tokenizer_json) {
        const char *tok = sl_st_meta(f, "tokenizer");
        if (tok) *tokenizer_json = strdup(tok);
    }
    sl_st_close(f);
    free(refs);
    if (rc) {
        sl_train_model_free(m);
        return rc;
    }
    *out = m;
    return SL_OK;
}
