/*
 * sl_import_gguf.c: GGUF (llama.cpp's format, versions 2 and 3) to the native layout and back.
 * The container and the dequantisers are sl_gguf.c; this file maps llama.cpp's tensor names and
 * keys for the architectures `llama` and `gpt2` onto models/FORMAT.md, and the embedded tokenizer
 * onto the tokenizer JSON of models/sl_tok.h.
 *
 * Shapes: GGUF lists dimensions fastest first, so a weight with ne = [in, out] is stored as the
 * row-major (out, in) matrix of the native layout, byte for byte: no transposition anywhere.
 *
 * RoPE: llama.cpp's llama_model_rope_type() (src/llama-model.cpp) puts LLM_ARCH_LLAMA in the
 * LLAMA_ROPE_TYPE_NORM group ("a normal RoPE, operating on pairs of consecutive head values":
 * (x[2j], x[2j+1]), angle pos * theta^(-2j/n_rot)), and its Hugging Face converters undo HF's
 * half-split permutation of q_proj/k_proj rows (convert_hf_to_gguf.py LlamaModel.permute; the older
 * convert-llama-hf-to-gguf.py: "reverse HF permute back to original pth layout"). GGUF llama q/k rows
 * are therefore in Meta's original layout, which is the native one (FORMAT.md: adjacent pairs, as
 * in llama2.c): the importer uses them as they are and the writer stores native rows as they are.
 * tests/importers/gguf_write.py does the same; the llama.cpp peer test checks it numerically.
 *
 * gpt2: llama.cpp fuses q, k, v into blk.N.attn_qkv (ne = [d, 3d], rows q | k | v, and a bias of
 * 3d); the importer splits it into the native q, k, v (views into one buffer), the writer
 * concatenates them back.
 *
 * Config: sizes from the arch's keys, vocab_size from token_embd's shape, tied embeddings when
 * output.weight is absent. The epsilon (and rope.freq_base) are float32 keys: they are read back as
 * the shortest decimal that gives the same float32 (sl_gguf_f32_to_double), so a speclab model's
 * norm_eps 1e-5 survives the round trip exactly (the engine adds the double eps in its norms).
 *
 * Types: F32, F16 and BF16 tensors are used in place from the mapping; Q8_0, Q4_0, Q4_K and Q6_K
 * are dequantised at load into float32 buffers the file owns. The writer stores F32, F16, BF16 or
 * Q8_0 matrices; norm weights and biases always F32 (llama.cpp requires it).
 */
#include <errno.h>
#include <fcntl.h>
#include <json-c/json.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "sl_common.h"
#include "sl_gguf.h"
#include "sl_half.h"
#include "sl_import.h"
#include "sl_model.h"
#include "sl_tok.h"

/* ---- import: tensors ---- */

typedef struct {
    const char *path;
    sl_gguf *g;
    sl_st_file *f;
    char *used;        /* (g->n_tensors): consumed by the mapping */
    const void **conv; /* (g->n_tensors): a tensor's float32 copy when it had to be dequantised */
} importer;

/* The GGUF tensor's data as a native dtype: in place for F32/F16/BF16, else dequantised once. */
static int tensor_data(importer *im, const sl_gguf_tensor *t, sl_dtype *dt, const void **data)
{
    size_t i = (size_t)(t - im->g->tensors);
    im->used[i] = 1;
    switch (t->type) {
    case SL_GGML_F32: *dt = SL_DT_F32; *data = t->data; return SL_OK;
    case SL_GGML_F16: *dt = SL_DT_F16; *data = t->data; return SL_OK;
    case SL_GGML_BF16: *dt = SL_DT_BF16; *data = t->data; return SL_OK;
    default: break;
    }
    *dt = SL_DT_F32;
    if (!im->conv[i]) {
        /* numel <= nbytes * 32 / 18 (Q4_0, the densest type): bounded by the file's size. */
        float *buf = sl_malloc((size_t)t->numel * sizeof(float));
        if (!buf) return SL_EFAIL;
        sl_ggml_dequant(t->type, t->data, buf, (size_t)t->numel);
        if (sl_st_mem_own(im->f, buf)) return SL_EFAIL;
        im->conv[i] = buf;
    }
    *data = im->conv[i];
    return SL_OK;
}

/* Maps GGUF tensor gname (1-D when vector, else 2-D) to the native name; optional ones may be
 * absent (*found = 0). */
static int map_tensor(importer *im, const char *gname, const char *nname, int vector, int optional, int *found)
{
    const sl_gguf_tensor *t = sl_gguf_find_tensor(im->g, gname);
    if (found) *found = t != NULL;
    if (!t) return optional ? SL_OK : sl_fail(SL_EINPUT, "%s: GGUF tensor '%s' is missing", im->path, gname);
    int want = vector ? 1 : 2;
    if (t->n_dims != want)
        return sl_fail(SL_EINPUT, "%s: GGUF tensor '%s' has %d dimensions (expected %d)", im->path, gname, t->n_dims,
                       want);
    if (t->ne[0] > INT64_MAX || t->ne[1] > INT64_MAX) return sl_fail(SL_EINPUT, "%s: tensor '%s' too large", im->path, gname);
    sl_dtype dt;
    const void *data;
    int rc = tensor_data(im, t, &dt, &data);
    if (rc) return rc;
    int64_t shape[2] = {vector ? (int64_t)t->ne[0] : (int64_t)t->ne[1], (int64_t)t->ne[0]};
    return sl_st_mem_add(im->f, nname, dt, want, shape, data);
}

/* gpt2's fused q|k|v (weight ne = [d, 3d], bias ne = [3d]) into the native q, k, v. */
static int map_qkv(importer *im, int layer, size_t d)
{
    char gname[64], nname[64];
    static const char *const part[3] = {"q", "k", "v"};
    for (int b = 0; b < 2; b++) {
        snprintf(gname, sizeof gname, "blk.%d.attn_qkv.%s", layer, b ? "bias" : "weight");
        const sl_gguf_tensor *t = sl_gguf_find_tensor(im->g, gname);
        if (!t) return sl_fail(SL_EINPUT, "%s: GGUF tensor '%s' is missing", im->path, gname);
        int ok = b ? (t->n_dims == 1 && t->ne[0] == 3 * (uint64_t)d)
                   : (t->n_dims == 2 && t->ne[0] == d && t->ne[1] == 3 * (uint64_t)d);
        if (!ok)
            return sl_fail(SL_EINPUT, "%s: GGUF tensor '%s' has ne = [%llu, %llu] (expected %s%zu, %zu%s)", im->path,
                           gname, (unsigned long long)t->ne[0], (unsigned long long)t->ne[1], b ? "" : "[",
                           b ? 3 * d : d, b ? 0 : 3 * d, b ? " elements" : "]");
        sl_dtype dt;
        const void *data;
        int rc = tensor_data(im, t, &dt, &data);
        if (rc) return rc;
        size_t part_bytes = (b ? d : d * d) * sl_dtype_size(dt);
        for (int p = 0; p < 3; p++) {
            snprintf(nname, sizeof nname, "layers.%d.attn.%s.%s", layer, part[p], b ? "bias" : "weight");
            int64_t shape[2] = {(int64_t)d, (int64_t)d};
            if ((rc = sl_st_mem_add(im->f, nname, dt, b ? 1 : 2, shape, (const char *)data + p * part_bytes))) return rc;
        }
    }
    return SL_OK;
}

static int map_tensors(importer *im, sl_arch arch, const sl_model_config *c, int *tied)
{
    const int gpt2 = arch == SL_ARCH_GPT2;
    int rc = map_tensor(im, "token_embd.weight", "tok_emb.weight", 0, 0, NULL);
    if (!rc && gpt2) rc = map_tensor(im, "position_embd.weight", "pos_emb.weight", 0, 0, NULL);
    char g[64], n[64];
#define MAP(GN, NN, VEC)                                                                                           \
    do {                                                                                                           \
        snprintf(g, sizeof g, "blk.%zu.%s", l, GN);                                                                \
        snprintf(n, sizeof n, "layers.%zu.%s", l, NN);                                                             \
        if (!rc) rc = map_tensor(im, g, n, VEC, 0, NULL);                                                          \
    } while (0)
    for (size_t l = 0; l < c->n_layer && !rc; l++) {
        MAP("attn_norm.weight", "attn_norm.weight", 1);
        MAP("ffn_norm.weight", "mlp_norm.weight", 1);
        MAP("attn_output.weight", "attn.o.weight", 0);
        MAP("ffn_up.weight", "mlp.up.weight", 0);
        MAP("ffn_down.weight", "mlp.down.weight", 0);
        if (gpt2) {
            MAP("attn_norm.bias", "attn_norm.bias", 1);
            MAP("ffn_norm.bias", "mlp_norm.bias", 1);
            MAP("attn_output.bias", "attn.o.bias", 1);
            MAP("ffn_up.bias", "mlp.up.bias", 1);
            MAP("ffn_down.bias", "mlp.down.bias", 1);
            if (!rc) rc = map_qkv(im, (int)l, c->d_model);
        } else {
            MAP("attn_q.weight", "attn.q.weight", 0);
            MAP("attn_k.weight", "attn.k.weight", 0);
            MAP("attn_v.weight", "attn.v.weight", 0);
            MAP("ffn_gate.weight", "mlp.gate.weight", 0);
        }
    }
#undef MAP
    if (!rc) rc = map_tensor(im, "output_norm.weight", "final_norm.weight", 1, 0, NULL);
    if (!rc && gpt2) rc = map_tensor(im, "output_norm.bias", "final_norm.bias", 1, 0, NULL);
    int found = 0;
    if (!rc) rc = map_tensor(im, "output.weight", "lm_head.weight", 0, 1, &found);
    *tied = !found;
    for (size_t i = 0; i < im->g->n_tensors && !rc; i++)
        if (!im->used[i])
            rc = sl_fail(SL_EINPUT, "%s: GGUF tensor '%s' is not part of the %s layout speclab reads", im->path,
                         im->g->tensors[i].name, sl_arch_name(arch));
    return rc;
}

/* ---- import: config ---- */

static int read_config(const sl_gguf *g, const char *path, sl_arch arch, sl_model_config *c)
{
    const char *a = sl_arch_name(arch);
    char k[96];
    uint64_t v;
    const uint64_t MAXSZ = (uint64_t)1 << 31;
    memset(c, 0, sizeof *c);
#define SIZE_KEY(SUFFIX, FIELD)                                                                                    \
    do {                                                                                                           \
        snprintf(k, sizeof k, "%s.%s", a, SUFFIX);                                                                 \
        int rc_ = sl_gguf_get_uint(g, k, MAXSZ, &v);                                                               \
        if (rc_) return rc_;                                                                                       \
        if (!v) return sl_fail(SL_EINPUT, "%s: key '%s' is 0", path, k);                                          \
        c->FIELD = (size_t)v;                                                                                      \
    } while (0)
    SIZE_KEY("context_length", max_seq_len);
    SIZE_KEY("embedding_length", d_model);
    SIZE_KEY("block_count", n_layer);
    SIZE_KEY("feed_forward_length", d_ff);
    SIZE_KEY("attention.head_count", n_head);
#undef SIZE_KEY
    c->n_kv_head = c->n_head;
    c->rope_theta = 10000.0;
    int rc;
    if (arch == SL_ARCH_LLAMA) {
        snprintf(k, sizeof k, "%s.attention.head_count_kv", a);
        v = c->n_head;
        if ((rc = sl_gguf_get_uint_opt(g, k, MAXSZ, &v))) return rc;
        if (!v) return sl_fail(SL_EINPUT, "%s: key '%s' is 0", path, k);
        c->n_kv_head = (size_t)v;
        snprintf(k, sizeof k, "%s.attention.layer_norm_rms_epsilon", a);
        if ((rc = sl_gguf_get_float(g, k, &c->norm_eps))) return rc;
        snprintf(k, sizeof k, "%s.rope.freq_base", a);
        if ((rc = sl_gguf_get_float_opt(g, k, &c->rope_theta))) return rc;
        snprintf(k, sizeof k, "%s.rope.dimension_count", a);
        if (sl_gguf_find_kv(g, k)) {
            if ((rc = sl_gguf_get_uint(g, k, MAXSZ, &v))) return rc;
            if (c->d_model % c->n_head || v != c->d_model / c->n_head)
                return sl_fail(SL_EINPUT, "%s: key '%s' is %llu, but speclab rotates whole heads (head_dim %zu)", path, k,
                               (unsigned long long)v, c->n_head ? c->d_model / c->n_head : 0);
        }
        /* RoPE scaling changes the angles: refused unless it says "none" or a factor of 1. */
        const char *st;
        size_t stl;
        double factor = 1.0;
        if (sl_gguf_find_kv(g, "llama.rope.scaling.type") &&
            (sl_gguf_get_str(g, "llama.rope.scaling.type", &st, &stl) || !(stl == 4 && !memcmp(st, "none", 4))))
            return sl_fail(SL_EINPUT, "%s: RoPE scaling (llama.rope.scaling.type) is not supported", path);
        if ((rc = sl_gguf_get_float_opt(g, "llama.rope.scaling.factor", &factor))) return rc;
        if (factor != 1.0 && factor != 0.0)
            return sl_fail(SL_EINPUT, "%s: RoPE scaling (llama.rope.scaling.factor %g) is not supported", path, factor);
    } else {
        snprintf(k, sizeof k, "%s.attention.layer_norm_epsilon", a);
        if ((rc = sl_gguf_get_float(g, k, &c->norm_eps))) return rc;
    }
    if (!(c->norm_eps > 0)) return sl_fail(SL_EINPUT, "%s: the norm epsilon %g is not positive", path, c->norm_eps);
    const sl_gguf_tensor *emb = sl_gguf_find_tensor(g, "token_embd.weight");
    if (!emb) return sl_fail(SL_EINPUT, "%s: GGUF tensor 'token_embd.weight' is missing", path);
    if (emb->n_dims != 2 || emb->ne[1] == 0 || emb->ne[1] > MAXSZ)
        return sl_fail(SL_EINPUT, "%s: GGUF tensor 'token_embd.weight' is not a (vocab, d_model) matrix", path);
    c->vocab_size = (size_t)emb->ne[1];
    return SL_OK;
}

/* ---- import: tokenizer ---- */

static int utf8_ok(const char *path, const char *what, const char *s, size_t n, uint64_t i)
{
    if (sl_utf8_valid_prefix((const unsigned char *)s, n) != n)
        return sl_fail(SL_EINPUT, "%s: %s %llu is not valid UTF-8", path, what, (unsigned long long)i);
    return SL_OK;
}

/* A string array of n elements (when n != 0) into a JSON array, each valid UTF-8. */
static int str_array(const sl_gguf *g, const char *key, uint64_t n, json_object *into, uint64_t *count)
{
    const sl_gguf_kv *kv;
    int rc = sl_gguf_get_arr(g, key, SL_GGUF_STR, &kv);
    if (rc) return rc;
    if (n && kv->n != n)
        return sl_fail(SL_EINPUT, "%s: key '%s' has %llu entries (the model's vocabulary has %llu)", g->path, key,
                       (unsigned long long)kv->n, (unsigned long long)n);
    const unsigned char *p = kv->data;
    for (uint64_t i = 0; i < kv->n; i++) {
        const char *s;
        size_t len;
        sl_gguf_next_str(&p, &s, &len);
        if (len > INT32_MAX) return sl_fail(SL_EINPUT, "%s: %s %llu is too long", g->path, key, (unsigned long long)i);
        if ((rc = utf8_ok(g->path, key, s, len, i))) return rc;
        if (json_object_array_add(into, json_object_new_string_len(s, (int)len))) return SL_EFAIL;
    }
    if (count) *count = kv->n;
    return SL_OK;
}

/* An optional numeric array of n elements: NULL when absent. */
static int opt_array(const sl_gguf *g, const char *key, uint32_t type, uint64_t n, const sl_gguf_kv **out)
{
    *out = NULL;
    if (!sl_gguf_find_kv(g, key)) return SL_OK;
    int rc = sl_gguf_get_arr(g, key, type, out);
    if (rc) return rc;
    if ((*out)->n != n)
        return sl_fail(SL_EINPUT, "%s: key '%s' has %llu entries (tokenizer.ggml.tokens has %llu)", g->path, key,
                       (unsigned long long)(*out)->n, (unsigned long long)n);
    return SL_OK;
}

static int token_id(const sl_gguf *g, const char *key, uint64_t n, int64_t dflt, int64_t *out)
{
    *out = dflt < (int64_t)n ? dflt : -1;
    if (!sl_gguf_find_kv(g, key)) return SL_OK;
    uint64_t v;
    int rc = sl_gguf_get_uint(g, key, n - 1, &v);
    if (!rc) *out = (int64_t)v;
    return rc;
}

/* The tokenizer JSON (sl_tok.h) of the embedded tokenizer, or NULL (and a note) when there is none
 * speclab reads. */
static int read_tokenizer(const sl_gguf *g, size_t vocab, char **json, char *note, size_t note_cap)
{
    *json = NULL;
    const char *model;
    size_t mlen;
    if (!sl_gguf_find_kv(g, "tokenizer.ggml.model")) return SL_OK;
    int rc = sl_gguf_get_str(g, "tokenizer.ggml.model", &model, &mlen);
    if (rc) return rc;
    int gpt2 = mlen == 4 && !memcmp(model, "gpt2", 4), llama = mlen == 5 && !memcmp(model, "llama", 5);
    if (!gpt2 && !llama) {
        snprintf(note, note_cap, "tokenizer: GGUF tokenizer model '%.*s' is not supported (gpt2, llama); none imported",
                 (int)(mlen < 40 ? mlen : 40), model);
        for (char *p = note; *p; p++)
            if ((unsigned char)*p < 32 || (unsigned char)*p >= 127) *p = '?';
        return SL_OK;
    }
    json_object *o = json_object_new_object(), *tokens = json_object_new_array();
    uint64_t n = 0;
    if (!o || !tokens) {
        json_object_put(o);
        json_object_put(tokens);
        return SL_EFAIL;
    }
    json_object_object_add(o, "type", json_object_new_string(gpt2 ? "byte-bpe" : "sp-bpe"));
    json_object_object_add(o, gpt2 ? "vocab" : "pieces", tokens);
    rc = str_array(g, "tokenizer.ggml.tokens", vocab, tokens, &n);
    const sl_gguf_kv *types = NULL, *scores = NULL;
    if (!rc) rc = opt_array(g, "tokenizer.ggml.token_type", SL_GGUF_I32, n, &types);
    if (!rc && gpt2) {
        json_object *merges = json_object_new_array(), *special = json_object_new_object();
        json_object_object_add(o, "merges", merges);
        json_object_object_add(o, "special", special);
        rc = str_array(g, "tokenizer.ggml.merges", 0, merges, NULL);
        /* Control tokens (type 3) are the special ones; without types, <|endoftext|> is. */
        const unsigned char *p = sl_gguf_find_kv(g, "tokenizer.ggml.tokens")->data;
        for (uint64_t i = 0; i < n && !rc; i++) {
            const char *s;
            size_t len;
            sl_gguf_next_str(&p, &s, &len);
            int sp = types ? sl_gguf_arr_int(types, i) == 3 : (len == 13 && !memcmp(s, "<|endoftext|>", 13));
            if (sp) {
                char *key = sl_malloc(len + 1);
                if (!key) rc = SL_EFAIL;
                else {
                    memcpy(key, s, len);
                    key[len] = 0;
                    json_object_object_add(special, key, json_object_new_int64((int64_t)i));
                    free(key);
                }
            }
        }
        const char *pre;
        size_t plen;
        if (!rc && sl_gguf_find_kv(g, "tokenizer.ggml.pre") && !sl_gguf_get_str(g, "tokenizer.ggml.pre", &pre, &plen) &&
            !(plen == 5 && !memcmp(pre, "gpt-2", 5)) && !(plen == 7 && !memcmp(pre, "default", 7)))
            snprintf(note, note_cap, "tokenizer: GGUF pre-tokenizer '%.*s' differs from GPT-2's, which speclab uses",
                     (int)(plen < 40 ? plen : 40), pre);
        if (!rc) sl_err_clear(); /* a tokenizer.ggml.pre that is not a string only loses the note */
    } else if (!rc) {
        if (!rc) rc = opt_array(g, "tokenizer.ggml.scores", SL_GGUF_F32, n, &scores);
        json_object *sc = json_object_new_array(), *ty = json_object_new_array();
        json_object_object_add(o, "scores", sc);
        json_object_object_add(o, "types", ty);
        for (uint64_t i = 0; i < n && !rc; i++) {
            json_object_array_add(sc, json_object_new_double(scores ? sl_gguf_f32_to_double(sl_gguf_arr_f32(scores, i)) : 0.0));
            int64_t t = types ? sl_gguf_arr_int(types, i) : 1;
            if (t < 0 || t > 6)
                rc = sl_fail(SL_EINPUT, "%s: tokenizer.ggml.token_type %llu is %lld (expected 0..6)", g->path,
                             (unsigned long long)i, (long long)t);
            json_object_array_add(ty, json_object_new_int64(t));
        }
        /* Absent ids take llama.cpp's SentencePiece defaults (bos 1, eos 2, unk 0). */
        int64_t bos, eos, unk;
        int add_bos = 1, add_eos = 0, prefix = 1;
        if (!rc) rc = token_id(g, "tokenizer.ggml.bos_token_id", n, 1, &bos);
        if (!rc) rc = token_id(g, "tokenizer.ggml.eos_token_id", n, 2, &eos);
        if (!rc) rc = token_id(g, "tokenizer.ggml.unknown_token_id", n, 0, &unk);
        if (!rc) rc = sl_gguf_get_bool_opt(g, "tokenizer.ggml.add_bos_token", &add_bos);
        if (!rc) rc = sl_gguf_get_bool_opt(g, "tokenizer.ggml.add_eos_token", &add_eos);
        if (!rc) rc = sl_gguf_get_bool_opt(g, "tokenizer.ggml.add_space_prefix", &prefix);
        if (!rc) {
            json_object_object_add(o, "bos", json_object_new_int64(bos));
            json_object_object_add(o, "eos", json_object_new_int64(eos));
            json_object_object_add(o, "unk", json_object_new_int64(unk));
            json_object_object_add(o, "add_bos", json_object_new_boolean(add_bos));
            json_object_object_add(o, "add_eos", json_object_new_boolean(add_eos));
            json_object_object_add(o, "add_dummy_prefix", json_object_new_boolean(prefix));
            json_object_object_add(o, "byte_fallback", json_object_new_boolean(1));
        }
    }
    if (!rc) {
        const char *s = json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN);
        *json = sl_malloc(strlen(s) + 1);
        if (*json) strcpy(*json, s);
        else rc = SL_EFAIL;
    }
    json_object_put(o);
    return rc;
}

/* ---- import ---- */

static int build(importer *im)
{
    const sl_gguf *g = im->g;
    const char *arch_s;
    size_t alen;
    int rc = sl_gguf_get_str(g, "general.architecture", &arch_s, &alen);
    if (rc) return rc;
    sl_arch arch;
    if (alen == 5 && !memcmp(arch_s, "llama", 5)) arch = SL_ARCH_LLAMA;
    else if (alen == 4 && !memcmp(arch_s, "gpt2", 4)) arch = SL_ARCH_GPT2;
    else {
        char a[41];
        size_t n = alen < 40 ? alen : 40;
        for (size_t i = 0; i < n; i++) a[i] = (arch_s[i] >= 32 && arch_s[i] < 127) ? arch_s[i] : '?';
        a[n] = 0;
        return sl_fail(SL_EINPUT, "%s: GGUF architecture '%s' is not supported (gpt2, llama)", im->path, a);
    }
    sl_model_config c;
    if ((rc = read_config(g, im->path, arch, &c))) return rc;
    int tied;
    if ((rc = map_tensors(im, arch, &c, &tied))) return rc;
    c.tied_embeddings = tied;
    char *cfg = sl_model_config_json(&c, arch);
    if (!cfg) return SL_EFAIL;
    sl_model_config check;
    rc = sl_model_config_parse(cfg, arch, im->path, &check);
    if (!rc) rc = sl_st_mem_meta(im->f, "format", "speclab-model");
    if (!rc) rc = sl_st_mem_meta(im->f, "format_version", "1");
    if (!rc) rc = sl_st_mem_meta(im->f, "arch", sl_arch_name(arch));
    if (!rc) rc = sl_st_mem_meta(im->f, "config", cfg);
    free(cfg);
    if (rc) return rc;

    char note[160] = "";
    char *tok = NULL;
    if ((rc = read_tokenizer(g, c.vocab_size, &tok, note, sizeof note))) return rc;
    if (tok) rc = sl_st_mem_meta(im->f, "tokenizer", tok);
    free(tok);
    if (!rc && note[0]) rc = sl_st_mem_meta(im->f, "source_notes", note);
    if (!rc) rc = sl_st_mem_meta(im->f, "source_format", "gguf");

    /* source_dtypes: GGUF type name -> tensors stored in it, in the order of sl_gguf.c's table. */
    static const uint32_t order[] = {SL_GGML_F32, SL_GGML_F16, SL_GGML_BF16, SL_GGML_Q8_0, SL_GGML_Q4_0,
                                     SL_GGML_Q4_K, SL_GGML_Q6_K};
    char dts[256] = "{";
    for (size_t k = 0; k < sizeof order / sizeof order[0]; k++) {
        size_t cnt = 0;
        for (size_t i = 0; i < g->n_tensors; i++) cnt += g->tensors[i].type == order[k];
        if (cnt)
            snprintf(dts + strlen(dts), sizeof dts - strlen(dts), "%s\"%s\": %zu", strlen(dts) > 1 ? ", " : "",
                     sl_ggml_type_name(order[k]), cnt);
    }
    strcat(dts, "}");
    if (!rc) rc = sl_st_mem_meta(im->f, "source_dtypes", dts);
    return rc;
}

int sl_import_gguf(const char *path, sl_st_file **out)
{
    *out = NULL;
    int fd = open(path, O_RDONLY);
    if (fd < 0) return sl_fail(SL_EINPUT, "%s: cannot open: %s", path, strerror(errno));
    struct stat sb;
    if (fstat(fd, &sb) != 0 || sb.st_size <= 0) {
        close(fd);
        return sl_fail(SL_EINPUT, "%s: empty or unreadable file", path);
    }
    size_t size = (size_t)sb.st_size;
    void *map = mmap(NULL, size, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd);
    if (map == MAP_FAILED) return sl_fail(SL_EINPUT, "%s: cannot map: %s", path, strerror(errno));
    sl_st_file *f = NULL;
    int rc = sl_st_mem_new(path, &f);
    if (rc) {
        munmap(map, size);
        return rc;
    }
    sl_st_mem_keep_map(f, map, size);
    importer im = {f->path, NULL, f, NULL, NULL};
    if ((rc = sl_gguf_parse(map, size, f->path, &im.g))) goto done;
    im.used = sl_calloc(im.g->n_tensors + 1, 1);
    im.conv = sl_calloc(im.g->n_tensors + 1, sizeof *im.conv);
    if (!im.used || !im.conv) rc = SL_EFAIL;
    if (!rc) rc = build(&im);
done:
    free(im.used);
    free(im.conv);
    sl_gguf_free(im.g);
    if (rc) {
        sl_st_close(f);
        return rc;
    }
    *out = f;
    return SL_OK;
}

/* ---- export ---- */

/* A growable byte buffer for the header (key/values and tensor infos). */
typedef struct {
    unsigned char *p;
    size_t n, cap;
    int err;
} bytes;

static void put(bytes *b, const void *src, size_t n)
{
    if (b->err) return;
    if (b->n + n > b->cap) {
        size_t nc = b->cap ? b->cap : 4096;
        while (nc < b->n + n) nc *= 2;
        unsigned char *q = realloc(b->p, nc);
        if (!q) {
            b->err = 1;
            return;
        }
        b->p = q;
        b->cap = nc;
    }
    memcpy(b->p + b->n, src, n);
    b->n += n;
}

static void put_u32(bytes *b, uint32_t v)
{
    unsigned char x[4] = {(unsigned char)v, (unsigned char)(v >> 8), (unsigned char)(v >> 16), (unsigned char)(v >> 24)};
    put(b, x, 4);
}

static void put_u64(bytes *b, uint64_t v)
{
    put_u32(b, (uint32_t)v);
    put_u32(b, (uint32_t)(v >> 32));
}

static void put_str(bytes *b, const char *s, size_t n)
{
    put_u64(b, n);
    put(b, s, n);
}

static void put_f32(bytes *b, float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    put_u32(b, u);
}

static void kv_key(bytes *b, size_t *n_kv, const char *key, uint32_t type)
{
    put_str(b, key, strlen(key));
    put_u32(b, type);
    (*n_kv)++;
}

static void kv_u32(bytes *b, size_t *n, const char *key, uint32_t v) { kv_key(b, n, key, SL_GGUF_U32), put_u32(b, v); }
static void kv_f32(bytes *b, size_t *n, const char *key, float v) { kv_key(b, n, key, SL_GGUF_F32), put_f32(b, v); }
static void kv_str(bytes *b, size_t *n, const char *key, const char *v) { kv_key(b, n, key, SL_GGUF_STR), put_str(b, v, strlen(v)); }
static void kv_bool(bytes *b, size_t *n, const char *key, int v)
{
    unsigned char x = v ? 1 : 0;
    kv_key(b, n, key, SL_GGUF_BOOL);
    put(b, &x, 1);
}

static void kv_arr_head(bytes *b, size_t *n, const char *key, uint32_t et, size_t count)
{
    kv_key(b, n, key, SL_GGUF_ARR);
    put_u32(b, et);
    put_u64(b, count);
}

/* A JSON array of strings as a GGUF string array. */
static int kv_str_array(bytes *b, size_t *n, const char *key, json_object *arr, const char *path)
{
    if (!arr || !json_object_is_type(arr, json_type_array))
        return sl_fail(SL_EINPUT, "%s: the tokenizer has no '%s' array", path, key);
    size_t len = json_object_array_length(arr);
    kv_arr_head(b, n, key, SL_GGUF_STR, len);
    for (size_t i = 0; i < len; i++) {
        json_object *s = json_object_array_get_idx(arr, i);
        if (!json_object_is_type(s, json_type_string))
            return sl_fail(SL_EINPUT, "%s: tokenizer entry %zu of '%s' is not a string", path, i, key);
        put_str(b, json_object_get_string(s), (size_t)json_object_get_string_len(s));
    }
    return SL_OK;
}

static int json_int(json_object *o, const char *k, int64_t dflt, int64_t *out)
{
    json_object *v;
    *out = dflt;
    if (!json_object_object_get_ex(o, k, &v)) return SL_OK;
    if (!json_object_is_type(v, json_type_int)) return SL_EINPUT;
    *out = json_object_get_int64(v);
    return SL_OK;
}

static int get_jbool(json_object *o, const char *k, int dflt)
{
    json_object *v;
    if (!json_object_object_get_ex(o, k, &v)) return dflt;
    return json_object_get_boolean(v);
}

/* tokenizer.ggml.* keys from the native tokenizer JSON (sl_tok.h's two forms). */
static int write_tokenizer(bytes *b, size_t *n, const char *json, const char *path)
{
    json_object *o = json_tokener_parse(json);
    if (!o || !json_object_is_type(o, json_type_object)) {
        json_object_put(o);
        return sl_fail(SL_EINPUT, "%s: the tokenizer metadata is not a JSON object", path);
    }
    json_object *type = NULL, *v;
    json_object_object_get_ex(o, "type", &type);
    const char *ts = type ? json_object_get_string(type) : "";
    int rc = SL_OK;
    if (!strcmp(ts, "byte-bpe")) {
        json_object *vocab = NULL, *merges = NULL, *special = NULL;
        json_object_object_get_ex(o, "vocab", &vocab);
        json_object_object_get_ex(o, "merges", &merges);
        json_object_object_get_ex(o, "special", &special);
        kv_str(b, n, "tokenizer.ggml.model", "gpt2");
        kv_str(b, n, "tokenizer.ggml.pre", "gpt-2");
        rc = kv_str_array(b, n, "tokenizer.ggml.tokens", vocab, path);
        size_t nv = rc ? 0 : json_object_array_length(vocab);
        int64_t eot = -1;
        if (!rc) {
            char *is_special = sl_calloc(nv + 1, 1);
            if (!is_special) rc = SL_EFAIL;
            if (!rc && special && json_object_is_type(special, json_type_object)) {
                json_object_object_foreach(special, key, val) {
                    int64_t id = json_object_get_int64(val);
                    if (id >= 0 && (size_t)id < nv) is_special[id] = 1;
                    if (!strcmp(key, "<|endoftext|>")) eot = id;
                }
            }
            if (!rc) {
                kv_arr_head(b, n, "tokenizer.ggml.token_type", SL_GGUF_I32, nv);
                for (size_t i = 0; i < nv; i++) put_u32(b, is_special[i] ? 3u : 1u);
            }
            free(is_special);
        }
        if (!rc) rc = kv_str_array(b, n, "tokenizer.ggml.merges", merges, path);
        if (!rc && eot >= 0 && (size_t)eot < nv) {
            kv_u32(b, n, "tokenizer.ggml.bos_token_id", (uint32_t)eot);
            kv_u32(b, n, "tokenizer.ggml.eos_token_id", (uint32_t)eot);
        }
    } else if (!strcmp(ts, "sp-bpe")) {
        json_object *pieces = NULL, *scores = NULL, *types = NULL;
        json_object_object_get_ex(o, "pieces", &pieces);
        json_object_object_get_ex(o, "scores", &scores);
        json_object_object_get_ex(o, "types", &types);
        if (!get_jbool(o, "byte_fallback", 1))
            rc = sl_fail(SL_EINPUT, "%s: GGUF's llama tokenizer always falls back to bytes; this tokenizer does not", path);
        kv_str(b, n, "tokenizer.ggml.model", "llama");
        if (!rc) rc = kv_str_array(b, n, "tokenizer.ggml.tokens", pieces, path);
        size_t np = rc ? 0 : json_object_array_length(pieces);
        if (!rc && (!scores || !types || !json_object_is_type(scores, json_type_array) ||
                    !json_object_is_type(types, json_type_array) || json_object_array_length(scores) != np ||
                    json_object_array_length(types) != np))
            rc = sl_fail(SL_EINPUT, "%s: the tokenizer's scores and types do not match its %zu pieces", path, np);
        if (!rc) {
            kv_arr_head(b, n, "tokenizer.ggml.scores", SL_GGUF_F32, np);
            for (size_t i = 0; i < np; i++) put_f32(b, (float)json_object_get_double(json_object_array_get_idx(scores, i)));
            kv_arr_head(b, n, "tokenizer.ggml.token_type", SL_GGUF_I32, np);
            for (size_t i = 0; i < np; i++) put_u32(b, (uint32_t)json_object_get_int(json_object_array_get_idx(types, i)));
            static const char *const ids[3][2] = {{"bos", "tokenizer.ggml.bos_token_id"},
                                                  {"eos", "tokenizer.ggml.eos_token_id"},
                                                  {"unk", "tokenizer.ggml.unknown_token_id"}};
            for (int k = 0; k < 3 && !rc; k++) {
                int64_t id;
                if (json_int(o, ids[k][0], -1, &id))
                    rc = sl_fail(SL_EINPUT, "%s: tokenizer '%s' is not an integer", path, ids[k][0]);
                else if (id >= 0 && (size_t)id < np) kv_u32(b, n, ids[k][1], (uint32_t)id);
            }
            kv_bool(b, n, "tokenizer.ggml.add_bos_token", get_jbool(o, "add_bos", 1));
            kv_bool(b, n, "tokenizer.ggml.add_eos_token", get_jbool(o, "add_eos", 0));
            kv_bool(b, n, "tokenizer.ggml.add_space_prefix", get_jbool(o, "add_dummy_prefix", 1));
        }
    } else
        rc = sl_fail(SL_EINPUT, "%s: tokenizer type '%s' has no GGUF form", path, ts);
    (void)v;
    json_object_put(o);
    return rc;
}

/* One GGUF tensor to write: up to three native sources stacked by rows (gpt2's q|k|v). */
typedef struct {
    char name[64];
    uint32_t type;
    int n_dims;
    uint64_t ne[2];
    const sl_st_tensor *src[3];
    int n_src;
    uint64_t offset;
    size_t nbytes;
} out_tensor;

static size_t type_bytes(uint32_t type, uint64_t numel)
{
    return (size_t)(numel / sl_ggml_block_elems(type) * sl_ggml_block_bytes(type));
}

/* Writes one source's elements as type: raw when the dtype already is it, else through float32. */
static int write_source(FILE *fp, const sl_st_tensor *s, uint32_t type, float *tmp, unsigned char *conv)
{
    const uint32_t same = s->dtype == SL_DT_F32 ? SL_GGML_F32 : s->dtype == SL_DT_F16 ? SL_GGML_F16 : SL_GGML_BF16;
    if (type == same) return fwrite(s->data, 1, s->nbytes, fp) == s->nbytes ? SL_OK : SL_EFAIL;
    const unsigned char *d = s->data;
    for (size_t i = 0; i < s->numel; i++) {
        uint16_t h;
        float x;
        switch (s->dtype) {
        case SL_DT_F32: memcpy(&x, d + 4 * i, 4); break;
        case SL_DT_F16: memcpy(&h, d + 2 * i, 2), x = sl_half_f16_to_f32(h); break;
        default: memcpy(&h, d + 2 * i, 2), x = sl_half_bf16_to_f32(h); break;
        }
        tmp[i] = x;
    }
    size_t nb = 0;
    switch (type) {
    case SL_GGML_F32: memcpy(conv, tmp, nb = s->numel * 4); break;
    case SL_GGML_F16:
        for (size_t i = 0; i < s->numel; i++) {
            uint16_t h = sl_half_f32_to_f16(tmp[i]);
            memcpy(conv + 2 * i, &h, 2);
        }
        nb = s->numel * 2;
        break;
    case SL_GGML_BF16:
        for (size_t i = 0; i < s->numel; i++) {
            uint16_t h = sl_half_f32_to_bf16(tmp[i]);
            memcpy(conv + 2 * i, &h, 2);
        }
        nb = s->numel * 2;
        break;
    default:
        sl_ggml_quant_q8_0(tmp, conv, s->numel);
        nb = type_bytes(SL_GGML_Q8_0, s->numel);
        break;
    }
    return fwrite(conv, 1, nb, fp) == nb ? SL_OK : SL_EFAIL;
}

/* The output tensor list (native names -> GGUF names), types chosen. */
static int plan_tensors(const sl_st_file *nat, sl_arch arch, const sl_model_config *c, int want, const char *path,
                        out_tensor *ot, size_t *n_out)
{
    size_t n = 0;
    const int gpt2 = arch == SL_ARCH_GPT2;
#define ADD1(GN, NN)                                                                                               \
    do {                                                                                                           \
        out_tensor *t_ = &ot[n++];                                                                                 \
        memset(t_, 0, sizeof *t_);                                                                                 \
        snprintf(t_->name, sizeof t_->name, "%s", GN);                                                             \
        t_->src[0] = sl_st_find(nat, NN);                                                                          \
        t_->n_src = 1;                                                                                             \
        if (!t_->src[0]) return sl_fail(SL_EINPUT, "%s: tensor '%s' is missing", nat->path, NN);                  \
    } while (0)
    char g[64], s[64];
    ADD1("token_embd.weight", "tok_emb.weight");
    if (gpt2) ADD1("position_embd.weight", "pos_emb.weight");
    for (size_t l = 0; l < c->n_layer; l++) {
#define L(GN, NN)                                                                                                  \
    do {                                                                                                           \
        snprintf(g, sizeof g, "blk.%zu.%s", l, GN);                                                                \
        snprintf(s, sizeof s, "layers.%zu.%s", l, NN);                                                             \
        ADD1(g, s);                                                                                                \
    } while (0)
        L("attn_norm.weight", "attn_norm.weight");
        if (gpt2) L("attn_norm.bias", "attn_norm.bias");
        if (gpt2) {
            for (int b = 0; b < 2; b++) {
                out_tensor *t = &ot[n++];
                memset(t, 0, sizeof *t);
                snprintf(t->name, sizeof t->name, "blk.%zu.attn_qkv.%s", l, b ? "bias" : "weight");
                static const char *const part[3] = {"q", "k", "v"};
                for (int p = 0; p < 3; p++) {
                    snprintf(s, sizeof s, "layers.%zu.attn.%s.%s", l, part[p], b ? "bias" : "weight");
                    if (!(t->src[p] = sl_st_find(nat, s)))
                        return sl_fail(SL_EINPUT, "%s: tensor '%s' is missing", nat->path, s);
                }
                t->n_src = 3;
            }
        } else {
            L("attn_q.weight", "attn.q.weight");
            L("attn_k.weight", "attn.k.weight");
            L("attn_v.weight", "attn.v.weight");
        }
        L("attn_output.weight", "attn.o.weight");
        if (gpt2) L("attn_output.bias", "attn.o.bias");
        L("ffn_norm.weight", "mlp_norm.weight");
        if (gpt2) L("ffn_norm.bias", "mlp_norm.bias");
        if (!gpt2) L("ffn_gate.weight", "mlp.gate.weight");
        L("ffn_up.weight", "mlp.up.weight");
        if (gpt2) L("ffn_up.bias", "mlp.up.bias");
        L("ffn_down.weight", "mlp.down.weight");
        if (gpt2) L("ffn_down.bias", "mlp.down.bias");
#undef L
    }
    ADD1("output_norm.weight", "final_norm.weight");
    if (gpt2) ADD1("output_norm.bias", "final_norm.bias");
    if (!c->tied_embeddings) ADD1("output.weight", "lm_head.weight");
#undef ADD1
    /* Shapes and types: vectors F32; matrices the wanted type (-1: keep the sources' common dtype,
     * F32 when they differ); Q8_0 rows that are not whole blocks fall back to F16 (as
     * tests/importers/gguf_write.py does). */
    uint64_t off = 0;
    for (size_t i = 0; i < n; i++) {
        out_tensor *t = &ot[i];
        const sl_st_tensor *s0 = t->src[0];
        t->n_dims = s0->ndim;
        if (s0->ndim < 1 || s0->ndim > 2) return sl_fail(SL_EINPUT, "%s: tensor '%s' is not 1-D or 2-D", path, s0->name);
        uint64_t rows = 0;
        int same = 1;
        for (int p = 0; p < t->n_src; p++) {
            const sl_st_tensor *sp = t->src[p];
            if (sp->ndim != s0->ndim || (s0->ndim == 2 && sp->shape[1] != s0->shape[1]) || sp->dtype == SL_DT_I32)
                return sl_fail(SL_EINPUT, "%s: tensor '%s' does not fit its GGUF tensor '%s'", path, sp->name, t->name);
            rows += (uint64_t)sp->shape[0];
            same &= sp->dtype == s0->dtype;
        }
        if (s0->ndim == 1) {
            t->ne[0] = rows;
            t->ne[1] = 1;
            t->type = SL_GGML_F32;
        } else {
            t->ne[0] = (uint64_t)s0->shape[1];
            t->ne[1] = rows;
            if (want >= 0) t->type = (uint32_t)want;
            else if (!same) t->type = SL_GGML_F32;
            else t->type = s0->dtype == SL_DT_F32 ? SL_GGML_F32 : s0->dtype == SL_DT_F16 ? SL_GGML_F16 : SL_GGML_BF16;
            if (t->type == SL_GGML_Q8_0 && t->ne[0] % 32) t->type = SL_GGML_F16;
        }
        t->offset = off;
        t->nbytes = type_bytes(t->type, t->ne[0] * t->ne[1]);
        off += (t->nbytes + 31) / 32 * 32;
    }
    *n_out = n;
    return SL_OK;
}

int sl_export_gguf(const sl_st_file *nat, const char *path, const sl_export_opts *o)
{
    sl_export_opts dflt = {0};
    if (!o) o = &dflt;
    int version = o->version ? o->version : 3;
    if (version != 2 && version != 3) return sl_fail(SL_EINPUT, "%s: GGUF version %d (write 2 or 3)", path, version);
    int want = -1;
    if (o->dtype) {
        if (!strcmp(o->dtype, "f32")) want = SL_GGML_F32;
        else if (!strcmp(o->dtype, "f16")) want = SL_GGML_F16;
        else if (!strcmp(o->dtype, "bf16")) want = SL_GGML_BF16;
        else if (!strcmp(o->dtype, "q8_0")) want = SL_GGML_Q8_0;
        else return sl_fail(SL_EINPUT, "%s: GGUF dtype '%s' (write f32, f16, bf16 or q8_0)", path, o->dtype);
    }
    const char *arch_s = sl_st_meta(nat, "arch"), *cfg_s = sl_st_meta(nat, "config");
    sl_arch arch;
    if (!arch_s || !cfg_s || sl_arch_parse(arch_s, &arch))
        return sl_fail(SL_EINPUT, "%s: only gpt2 and llama models can be written as GGUF", nat->path);
    sl_model_config c;
    int rc = sl_model_config_parse(cfg_s, arch, nat->path, &c);
    if (rc) return rc;
    if (c.n_layer > 100000) return sl_fail(SL_EINPUT, "%s: %zu layers", nat->path, c.n_layer);
    /* GGUF keeps both as float32: a value that float32 turns into 0 or infinity cannot be written. */
    if (!((float)c.norm_eps > 0 && sl_isfinite((float)c.norm_eps)) ||
        !((float)c.rope_theta > 0 && sl_isfinite((float)c.rope_theta)))
        return sl_fail(SL_EINPUT, "%s: norm_eps %g or rope_theta %g does not survive GGUF's float32", nat->path,
                       c.norm_eps, c.rope_theta);
    const char *a = sl_arch_name(arch);

    out_tensor *ot = sl_calloc(c.n_layer * 13 + 8, sizeof *ot);
    bytes b = {0};
    float *tmp = NULL;
    unsigned char *conv = NULL;
    sl_atomic_file af = {0};
    int opened = 0;
    if (!ot) return SL_EFAIL;
    size_t n_t = 0;
    if ((rc = plan_tensors(nat, arch, &c, want, path, ot, &n_t))) goto done;

    /* Header: magic, version, counts (the key count is patched in once known), key/values. */
    size_t n_kv = 0;
    put(&b, "GGUF", 4);
    put_u32(&b, (uint32_t)version);
    put_u64(&b, n_t);
    put_u64(&b, 0);
    char k[96], name[256];
    kv_str(&b, &n_kv, "general.architecture", a);
    kv_u32(&b, &n_kv, "general.alignment", 32);
    snprintf(name, sizeof name, "%s", sl_path_base(path));
    char *dot = strrchr(name, '.');
    if (dot && dot != name) *dot = 0;
#define KU(SUFFIX, V) (snprintf(k, sizeof k, "%s.%s", a, SUFFIX), kv_u32(&b, &n_kv, k, (uint32_t)(V)))
#define KF(SUFFIX, V) (snprintf(k, sizeof k, "%s.%s", a, SUFFIX), kv_f32(&b, &n_kv, k, (float)(V)))
    kv_str(&b, &n_kv, "general.name", name);
    KU("context_length", c.max_seq_len);
    KU("embedding_length", c.d_model);
    KU("block_count", c.n_layer);
    KU("feed_forward_length", c.d_ff);
    KU("attention.head_count", c.n_head);
    if (arch == SL_ARCH_LLAMA) {
        KU("attention.head_count_kv", c.n_kv_head);
        KF("attention.layer_norm_rms_epsilon", c.norm_eps);
        KF("rope.freq_base", c.rope_theta);
        KU("rope.dimension_count", c.d_model / c.n_head);
    } else
        KF("attention.layer_norm_epsilon", c.norm_eps);
#undef KU
#undef KF
    const char *tok = sl_st_meta(nat, "tokenizer");
    if (tok && (rc = write_tokenizer(&b, &n_kv, tok, nat->path))) goto done;
    for (size_t i = 0; i < n_t; i++) {
        out_tensor *t = &ot[i];
        put_str(&b, t->name, strlen(t->name));
        put_u32(&b, (uint32_t)t->n_dims);
        put_u64(&b, t->ne[0]);
        if (t->n_dims == 2) put_u64(&b, t->ne[1]);
        put_u32(&b, t->type);
        put_u64(&b, t->offset);
    }
    static const unsigned char zeros[32] = {0};
    put(&b, zeros, (32 - b.n % 32) % 32);
    if (b.err) {
        rc = sl_fail(SL_EFAIL, "out of memory");
        goto done;
    }
    for (int i = 0; i < 8; i++) b.p[16 + i] = (unsigned char)((uint64_t)n_kv >> (8 * i));

    size_t max_numel = 0;
    for (size_t i = 0; i < n_t; i++)
        for (int p = 0; p < ot[i].n_src; p++)
            if (ot[i].src[p]->numel > max_numel) max_numel = ot[i].src[p]->numel;
    tmp = sl_malloc(max_numel * sizeof(float) + 1);
    conv = sl_malloc(max_numel * sizeof(float) + 1);
    if (!tmp || !conv) {
        rc = SL_EFAIL;
        goto done;
    }
    if ((rc = sl_atomic_open(&af, path))) goto done;
    opened = 1;
    if (fwrite(b.p, 1, b.n, af.f) != b.n) rc = SL_EFAIL;
    uint64_t pos = 0;
    for (size_t i = 0; i < n_t && !rc; i++) {
        for (int p = 0; p < ot[i].n_src && !rc; p++) rc = write_source(af.f, ot[i].src[p], ot[i].type, tmp, conv);
        pos += ot[i].nbytes;
        size_t pad = (size_t)((32 - pos % 32) % 32);
        if (!rc && pad && fwrite(zeros, 1, pad, af.f) != pad) rc = SL_EFAIL;
        pos += pad;
    }
    if (rc) {
        rc = sl_fail(SL_EFAIL, "writing %s failed: %s", path, strerror(errno));
        goto done;
    }
    rc = sl_atomic_commit(&af);
    opened = 0;
done:
    if (opened) sl_atomic_abort(&af);
    free(b.p);
    free(tmp);
    free(conv);
    free(ot);
    return rc;
}
