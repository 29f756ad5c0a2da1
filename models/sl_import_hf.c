/*
 * sl_import_hf.c: Hugging Face GPT-2 folders (transformers' GPT2LMHeadModel / GPT2Model saved with
 * save_pretrained) opened as native-layout files. See sl_import.h.
 *
 * The folder holds:
 *   config.json        GPT2Config: model_type "gpt2", vocab_size, n_positions (or the older n_ctx),
 *                      n_embd, n_layer, n_head, n_inner (null: 4 * n_embd), layer_norm_epsilon,
 *                      activation_function ("gelu_new" or "gelu_pytorch_tanh": the tanh GELU of
 *                      FORMAT.md), tie_word_embeddings (default true)
 *   model.safetensors  the weights, with or without the "transformer." prefix (GPT2LMHeadModel
 *                      writes it, GPT2Model does not). pytorch_model.bin and sharded checkpoints
 *                      (model.safetensors.index.json) are refused with a message saying what to do.
 *   tokenizer.json     (HF tokenizers: model BPE, pre_tokenizer ByteLevel), or vocab.json +
 *                      merges.txt (GPT-2's encoder.json + vocab.bpe under their HF names). When
 *                      both exist tokenizer.json wins, as in transformers' AutoTokenizer (the fast
 *                      tokenizer); tests/cli/hf_gpt2_import.py checks both give the same tokenizer.
 *                      Beside vocab.json, added_tokens.json (tokens added by add_tokens or
 *                      add_special_tokens) is read too; special_tokens_map.json and
 *                      tokenizer_config.json are not (they name roles, not new tokens).
 *                      Every added token of tokenizer.json is matched in the text before BPE, as
 *                      the tokenizers library does, so all become `special` entries.
 *
 * Weights: transformers' GPT-2 uses Conv1D, whose weight is (in, out) = the transpose of the native
 * (out, in). Each Conv1D matrix is transposed into a buffer the returned file owns, in its own
 * dtype (an F16 file gives F16 matrices: transposing copies values, it never rounds), and c_attn's
 * out axis is cut into q | k | v. Embeddings, norms and biases are used in place from the mapping.
 * The attention-mask buffers h.N.attn.bias and h.N.attn.masked_bias that older exports store are
 * skipped; any other tensor not in the list is an error naming it.
 *
 * lm_head.weight: with tie_word_embeddings (the default) GPT2LMHeadModel ties it to wte and
 * save_pretrained leaves it out. When a tied file stores it anyway it must hold the same values as
 * wte: transformers would silently use wte instead, so a differing head means the file and its
 * config disagree, and we refuse rather than pick one. Untied, it is required and becomes the
 * native lm_head.weight.
 */
#include <errno.h>
#include <json.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "sl_common.h"
#include "sl_import.h"
#include "sl_kern.h"
#include "sl_model.h"
#include "sl_tok.h"

/* config.json is a few hundred bytes; anything past this is not a config. */
#define HF_MAX_CONFIG_BYTES (1u << 20)

/* ---- files ---- */

static int is_file(const char *path)
{
    struct stat sb;
    return stat(path, &sb) == 0 && S_ISREG(sb.st_mode);
}

/* dir + "/" + name, malloc'd. */
static char *join(const char *dir, const char *name)
{
    size_t n = strlen(dir) + strlen(name) + 2;
    char *p = sl_malloc(n);
    if (p) snprintf(p, n, "%s/%s", dir, name);
    return p;
}

/* The whole of path with a NUL after it; refuses files larger than cap bytes and files holding a
 * NUL byte (no JSON text does). */
static int read_text(const char *path, size_t cap, char **text, size_t *len)
{
    *text = NULL;
    FILE *f = fopen(path, "rb");
    if (!f) return sl_fail(SL_EINPUT, "%s: cannot open: %s", path, strerror(errno));
    struct stat sb;
    if (fstat(fileno(f), &sb) != 0 || !S_ISREG(sb.st_mode)) {
        fclose(f);
        return sl_fail(SL_EINPUT, "%s: not a regular file", path);
    }
    if ((uint64_t)sb.st_size > cap) {
        fclose(f);
        return sl_fail(SL_EINPUT, "%s: %lld bytes is too large (at most %zu)", path, (long long)sb.st_size, cap);
    }
    size_t n = (size_t)sb.st_size;
    char *buf = sl_malloc(n + 1);
    if (!buf) {
        fclose(f);
        return SL_EFAIL;
    }
    size_t got = fread(buf, 1, n, f);
    fclose(f);
    if (got != n) {
        free(buf);
        return sl_fail(SL_EINPUT, "%s: read %zu of %zu bytes", path, got, n);
    }
    buf[n] = 0;
    if (strlen(buf) != n) {
        free(buf);
        return sl_fail(SL_EINPUT, "%s: contains a NUL byte (not JSON text)", path);
    }
    *text = buf;
    if (len) *len = n;
    return SL_OK;
}

/* Parses path as one JSON object (trailing whitespace allowed). */
static int read_json(const char *path, size_t cap, json_object **out)
{
    *out = NULL;
    char *text;
    size_t n = 0;
    int rc = read_text(path, cap, &text, &n);
    if (rc) return rc;
    if (n > INT_MAX) {
        free(text);
        return sl_fail(SL_EINPUT, "%s: too large for the JSON parser", path);
    }
    json_tokener *tk = json_tokener_new();
    if (!tk) {
        free(text);
        return sl_fail(SL_EFAIL, "out of memory");
    }
    json_object *o = json_tokener_parse_ex(tk, text, (int)n);
    enum json_tokener_error e = json_tokener_get_error(tk);
    size_t used = json_tokener_get_parse_end(tk);
    json_tokener_free(tk);
    if (!o || e != json_tokener_success) {
        json_object_put(o);
        free(text);
        return sl_fail(SL_EINPUT, "%s: malformed JSON (%s) near byte %zu", path,
                       e == json_tokener_continue ? "unexpected end" : json_tokener_error_desc(e), used);
    }
    for (size_t i = used; i < n; i++)
        if (!strchr(" \t\r\n", text[i])) {
            json_object_put(o);
            free(text);
            return sl_fail(SL_EINPUT, "%s: malformed JSON (data after the object at byte %zu)", path, i);
        }
    free(text);
    if (!json_object_is_type(o, json_type_object)) {
        json_object_put(o);
        return sl_fail(SL_EINPUT, "%s: not a JSON object", path);
    }
    *out = o;
    return SL_OK;
}

/* ---- config.json ---- */

typedef struct {
    size_t vocab_size, n_positions, n_embd, n_layer, n_head, n_inner;
    double eps;
    int tied;
} hf_config;

/* key as an integer in [1, 2^31]; absent: *out = dflt when allowed (dflt > 0), else an error. A JSON
 * null counts as absent (transformers writes n_inner: null). */
static int cfg_size(const char *path, json_object *o, const char *key, size_t dflt, size_t *out)
{
    json_object *v;
    if (!json_object_object_get_ex(o, key, &v) || json_object_is_type(v, json_type_null)) {
        if (!dflt) return sl_fail(SL_EINPUT, "%s: \"%s\" is missing", path, key);
        *out = dflt;
        return SL_OK;
    }
    if (!json_object_is_type(v, json_type_int) || json_object_get_int64(v) < 1 ||
        json_object_get_int64(v) > (int64_t)1 << 31)
        return sl_fail(SL_EINPUT, "%s: \"%s\" is %s, expected an integer in [1, 2^31]", path, key,
                       json_object_to_json_string(v));
    *out = (size_t)json_object_get_int64(v);
    return SL_OK;
}

/* A boolean flag; absent or null: dflt. */
static int cfg_bool(const char *path, json_object *o, const char *key, int dflt, int *out)
{
    json_object *v;
    *out = dflt;
    if (!json_object_object_get_ex(o, key, &v) || json_object_is_type(v, json_type_null)) return SL_OK;
    if (!json_object_is_type(v, json_type_boolean))
        return sl_fail(SL_EINPUT, "%s: \"%s\" is %s, expected true or false", path, key, json_object_to_json_string(v));
    *out = json_object_get_boolean(v);
    return SL_OK;
}

/* A string; absent or null: dflt. */
static int cfg_str(const char *path, json_object *o, const char *key, const char *dflt, const char **out)
{
    json_object *v;
    *out = dflt;
    if (!json_object_object_get_ex(o, key, &v) || json_object_is_type(v, json_type_null)) return SL_OK;
    if (!json_object_is_type(v, json_type_string))
        return sl_fail(SL_EINPUT, "%s: \"%s\" is %s, expected a string", path, key, json_object_to_json_string(v));
    *out = json_object_get_string(v);
    return SL_OK;
}

static int parse_config(const char *path, hf_config *c)
{
    memset(c, 0, sizeof *c);
    json_object *o;
    int rc = read_json(path, HF_MAX_CONFIG_BYTES, &o);
    if (rc) return rc;
    const char *mt, *act;
    int flag;
    json_object *v;
    if ((rc = cfg_str(path, o, "model_type", NULL, &mt))) goto done;
    if (!mt) {
        rc = sl_fail(SL_EINPUT, "%s: \"model_type\" is missing (expected \"gpt2\")", path);
        goto done;
    }
    if (strcmp(mt, "gpt2")) {
        rc = sl_fail(SL_EINPUT, "%s: model_type \"%.60s\" is not supported: this importer reads GPT-2 only "
                     "(\"gpt2\"; convert other architectures to GGUF)", path, mt);
        goto done;
    }
    if ((rc = cfg_size(path, o, "vocab_size", 0, &c->vocab_size))) goto done;
    /* n_ctx is the older name of n_positions (transformers < 4.x wrote both). */
    if (json_object_object_get_ex(o, "n_positions", &v) && !json_object_is_type(v, json_type_null))
        rc = cfg_size(path, o, "n_positions", 0, &c->n_positions);
    else
        rc = cfg_size(path, o, "n_ctx", 0, &c->n_positions);
    if (rc) goto done;
    if ((rc = cfg_size(path, o, "n_embd", 0, &c->n_embd))) goto done;
    if ((rc = cfg_size(path, o, "n_layer", 0, &c->n_layer))) goto done;
    if ((rc = cfg_size(path, o, "n_head", 0, &c->n_head))) goto done;
    if (c->n_embd % c->n_head) {
        rc = sl_fail(SL_EINPUT, "%s: n_embd %zu is not a multiple of n_head %zu", path, c->n_embd, c->n_head);
        goto done;
    }
    if (c->n_embd > ((size_t)1 << 31) / 4) {
        rc = sl_fail(SL_EINPUT, "%s: n_embd %zu is too large", path, c->n_embd);
        goto done;
    }
    if ((rc = cfg_size(path, o, "n_inner", 4 * c->n_embd, &c->n_inner))) goto done;
    c->eps = 1e-5;
    if (json_object_object_get_ex(o, "layer_norm_epsilon", &v) && !json_object_is_type(v, json_type_null)) {
        if (!json_object_is_type(v, json_type_double) && !json_object_is_type(v, json_type_int)) {
            rc = sl_fail(SL_EINPUT, "%s: \"layer_norm_epsilon\" is not a number", path);
            goto done;
        }
        c->eps = json_object_get_double(v);
        if (!(c->eps > 0) || !isfinite(c->eps)) {
            rc = sl_fail(SL_EINPUT, "%s: \"layer_norm_epsilon\" must be positive", path);
            goto done;
        }
    }
    /* GPT2Config's default activation is gelu_new; gelu_pytorch_tanh is the same formula. */
    if ((rc = cfg_str(path, o, "activation_function", "gelu_new", &act))) goto done;
    if (strcmp(act, "gelu_new") && strcmp(act, "gelu_pytorch_tanh")) {
        rc = sl_fail(SL_EINPUT, "%s: activation_function \"%.40s\" is not supported (speclab's gpt2 uses the tanh GELU: "
                     "\"gelu_new\" or \"gelu_pytorch_tanh\")", path, act);
        goto done;
    }
    if ((rc = cfg_bool(path, o, "tie_word_embeddings", 1, &c->tied))) goto done;
    /* Variants of GPT-2's attention that FORMAT.md's gpt2 does not compute. */
    if ((rc = cfg_bool(path, o, "scale_attn_weights", 1, &flag))) goto done;
    if (!flag) {
        rc = sl_fail(SL_EINPUT, "%s: scale_attn_weights false is not supported (speclab scales by 1/sqrt(head_dim))", path);
        goto done;
    }
    if ((rc = cfg_bool(path, o, "scale_attn_by_inverse_layer_idx", 0, &flag))) goto done;
    if (flag) {
        rc = sl_fail(SL_EINPUT, "%s: scale_attn_by_inverse_layer_idx true is not supported", path);
        goto done;
    }
    if ((rc = cfg_bool(path, o, "add_cross_attention", 0, &flag))) goto done;
    if (flag) {
        rc = sl_fail(SL_EINPUT, "%s: add_cross_attention true (an encoder-decoder GPT-2) is not supported", path);
        goto done;
    }
    const char *ids[2] = {"bos_token_id", "eos_token_id"};
    for (int k = 0; k < 2; k++)
        if (json_object_object_get_ex(o, ids[k], &v) && !json_object_is_type(v, json_type_null) &&
            (!json_object_is_type(v, json_type_int) || json_object_get_int64(v) < 0 ||
             (uint64_t)json_object_get_int64(v) >= c->vocab_size)) {
            rc = sl_fail(SL_EINPUT, "%s: \"%s\" is %s, expected an id in [0, vocab_size = %zu)", path, ids[k],
                         json_object_to_json_string(v), c->vocab_size);
            goto done;
        }
done:
    json_object_put(o);
    return rc;
}

/* ---- tensors ---- */

/* Per layer, in the order of the names below. */
enum {
    T_LN1_W, T_LN1_B, T_QKV_W, T_QKV_B, T_O_W, T_O_B, T_LN2_W, T_LN2_B, T_UP_W, T_UP_B, T_DOWN_W, T_DOWN_B,
    T_PER_LAYER
};
static const char *const LAYER_NAMES[T_PER_LAYER] = {
    "ln_1.weight", "ln_1.bias", "attn.c_attn.weight", "attn.c_attn.bias", "attn.c_proj.weight", "attn.c_proj.bias",
    "ln_2.weight", "ln_2.bias", "mlp.c_fc.weight",    "mlp.c_fc.bias",    "mlp.c_proj.weight",  "mlp.c_proj.bias",
};
enum { G_WTE, G_WPE, G_LNF_W, G_LNF_B, G_LM_HEAD, G_N };
static const char *const GLOBAL_NAMES[G_N] = {"wte.weight", "wpe.weight", "ln_f.weight", "ln_f.bias", "lm_head.weight"};

typedef struct {
    const sl_st_tensor *g[G_N];
    const sl_st_tensor **l; /* (n_layer, T_PER_LAYER) */
    size_t n_skipped;       /* attention-mask buffers */
} hf_tensors;

/* Parses "h.N.REST" with N a decimal layer index written without leading zeros. */
static int parse_layer_name(const char *s, size_t *layer, const char **rest)
{
    if (strncmp(s, "h.", 2)) return 0;
    s += 2;
    if (*s < '0' || *s > '9' || (*s == '0' && s[1] != '.')) return 0;
    size_t n = 0;
    while (*s >= '0' && *s <= '9') {
        if (n > ((size_t)1 << 40)) return 0;
        n = n * 10 + (size_t)(*s++ - '0');
    }
    if (*s != '.') return 0;
    *layer = n;
    *rest = s + 1;
    return 1;
}

/* Sorts every tensor of src into its slot; the mask buffers are counted and skipped. */
static int sort_tensors(const sl_st_file *src, const hf_config *c, hf_tensors *T)
{
    const char *path = src->path;
    for (size_t i = 0; i < src->n_tensors; i++) {
        const sl_st_tensor *t = &src->tensors[i];
        const char *name = t->name;
        const sl_st_tensor **slot = NULL;
        if (!strcmp(name, "lm_head.weight")) slot = &T->g[G_LM_HEAD];
        else {
            if (!strncmp(name, "transformer.", 12)) name += 12;
            size_t layer;
            const char *rest;
            for (int k = 0; k < G_LM_HEAD && !slot; k++)
                if (!strcmp(name, GLOBAL_NAMES[k])) slot = &T->g[k];
            if (!slot && parse_layer_name(name, &layer, &rest)) {
                if (!strcmp(rest, "attn.bias") || !strcmp(rest, "attn.masked_bias")) {
                    T->n_skipped++;
                    continue;
                }
                for (int k = 0; k < T_PER_LAYER && !slot && layer < c->n_layer; k++)
                    if (!strcmp(rest, LAYER_NAMES[k])) slot = &T->l[layer * T_PER_LAYER + k];
            }
        }
        if (!slot)
            return sl_fail(SL_EINPUT, "%s: unexpected tensor '%s' for a GPT-2 with n_layer = %zu", path, t->name,
                           c->n_layer);
        if (*slot)
            return sl_fail(SL_EINPUT, "%s: tensor '%s' appears twice (as '%s' and '%s')", path, name, (*slot)->name,
                           t->name);
        *slot = t;
    }
    return SL_OK;
}

/* Checks that t exists with shape (s0) (s1 = 0) or (s0, s1) and a float dtype. */
static int check_tensor(const char *path, const sl_st_tensor *t, const char *name, int64_t s0, int64_t s1)
{
    if (!t) return sl_fail(SL_EINPUT, "%s: tensor '%s' is missing", path, name);
    int nd = s1 ? 2 : 1;
    if (t->ndim != nd || t->shape[0] != s0 || (nd == 2 && t->shape[1] != s1)) {
        char got[96];
        size_t k = (size_t)snprintf(got, sizeof got, "[");
        for (int d = 0; d < t->ndim && k < sizeof got; d++)
            k += (size_t)snprintf(got + k, sizeof got - k, "%s%lld", d ? ", " : "", (long long)t->shape[d]);
        if (k < sizeof got) snprintf(got + k, sizeof got - k, "]");
        if (nd == 2)
            return sl_fail(SL_EINPUT, "%s: tensor '%s' has shape %s, config.json implies [%lld, %lld]", path, t->name,
                           got, (long long)s0, (long long)s1);
        return sl_fail(SL_EINPUT, "%s: tensor '%s' has shape %s, config.json implies [%lld]", path, t->name, got,
                       (long long)s0);
    }
    if (t->dtype != SL_DT_F32 && t->dtype != SL_DT_F16 && t->dtype != SL_DT_BF16)
        return sl_fail(SL_EINPUT, "%s: tensor '%s' has dtype %s; weights must be F32, F16 or BF16", path, t->name,
                       sl_dtype_name(t->dtype));
    return SL_OK;
}

/* Columns [col0, col0 + n_out) of src (n_in, n_cols), elements of es bytes, transposed into a new
 * buffer (n_out, n_in) owned by dst and added to it as tensor name. Copies bytes: exact. */
static int add_transposed(sl_st_file *dst, const char *name, const sl_st_tensor *src, size_t col0, size_t n_out)
{
    const size_t n_in = (size_t)src->shape[0], n_cols = (size_t)src->shape[1], es = sl_dtype_size(src->dtype);
    /* n_out * n_in <= the source's element count, which the file's size bounds. */
    unsigned char *buf = sl_malloc(n_out * n_in * es + 1);
    if (!buf) return SL_EFAIL;
    const unsigned char *s = src->data;
    /* Blocks of 32 input rows keep both sides' cache lines in use. */
    for (size_t i0 = 0; i0 < n_in; i0 += 32) {
        size_t i1 = i0 + 32 < n_in ? i0 + 32 : n_in;
        for (size_t o = 0; o < n_out; o++)
            for (size_t i = i0; i < i1; i++) memcpy(buf + (o * n_in + i) * es, s + (i * n_cols + col0 + o) * es, es);
    }
    int rc = sl_st_mem_own(dst, buf);
    if (rc) return rc;
    int64_t shape[2] = {(int64_t)n_out, (int64_t)n_in};
    return sl_st_mem_add(dst, name, src->dtype, 2, shape, buf);
}

/* Elements [off, off + n) of the vector src, in place. */
static int add_slice(sl_st_file *dst, const char *name, const sl_st_tensor *src, size_t off, size_t n)
{
    int64_t shape[1] = {(int64_t)n};
    return sl_st_mem_add(dst, name, src->dtype, 1, shape, (const unsigned char *)src->data + off * sl_dtype_size(src->dtype));
}

/* Whether two (rows, cols) matrices hold the same values (each in its own dtype). */
static int same_values(const sl_st_tensor *a, const sl_st_tensor *b, int *same)
{
    size_t rows = (size_t)a->shape[0], cols = (size_t)a->shape[1];
    float *ra = sl_malloc(2 * cols * sizeof(float) + 1);
    if (!ra) return SL_EFAIL;
    float *rb = ra + cols;
    *same = 1;
    for (size_t r = 0; r < rows && *same; r++) {
        sl_kern_to_f32(ra, (const unsigned char *)a->data + r * cols * sl_dtype_size(a->dtype), a->dtype, cols);
        sl_kern_to_f32(rb, (const unsigned char *)b->data + r * cols * sl_dtype_size(b->dtype), b->dtype, cols);
        *same = !memcmp(ra, rb, cols * sizeof(float));
    }
    free(ra);
    return SL_OK;
}

/* Builds the native tensors of dst from the sorted source tensors. */
static int build_tensors(sl_st_file *dst, const char *wpath, const hf_config *c, const hf_tensors *T)
{
    const int64_t d = (int64_t)c->n_embd, ff = (int64_t)c->n_inner, V = (int64_t)c->vocab_size;
    const size_t D = c->n_embd;
    char name[96], hfname[96];
    int rc;
    if ((rc = check_tensor(wpath, T->g[G_WTE], "wte.weight", V, d))) return rc;
    if ((rc = check_tensor(wpath, T->g[G_WPE], "wpe.weight", (int64_t)c->n_positions, d))) return rc;
    for (size_t i = 0; i < c->n_layer; i++) {
        const sl_st_tensor *const *L = &T->l[i * T_PER_LAYER];
        const int64_t shapes[T_PER_LAYER][2] = {{d, 0},  {d, 0},      {d, 3 * d}, {3 * d, 0}, {d, d},  {d, 0},
                                                {d, 0},  {d, 0},      {d, ff},    {ff, 0},    {ff, d}, {d, 0}};
        for (int k = 0; k < T_PER_LAYER; k++) {
            snprintf(hfname, sizeof hfname, "h.%zu.%s", i, LAYER_NAMES[k]);
            if ((rc = check_tensor(wpath, L[k], hfname, shapes[k][0], shapes[k][1]))) return rc;
        }
    }
    if ((rc = check_tensor(wpath, T->g[G_LNF_W], "ln_f.weight", d, 0))) return rc;
    if ((rc = check_tensor(wpath, T->g[G_LNF_B], "ln_f.bias", d, 0))) return rc;
    if (!c->tied || T->g[G_LM_HEAD])
        if ((rc = check_tensor(wpath, T->g[G_LM_HEAD], "lm_head.weight", V, d))) return rc;
    if (c->tied && T->g[G_LM_HEAD]) {
        int same;
        if ((rc = same_values(T->g[G_LM_HEAD], T->g[G_WTE], &same))) return rc;
        if (!same)
            return sl_fail(SL_EINPUT, "%s: lm_head.weight differs from wte.weight but config.json ties them "
                           "(tie_word_embeddings true); set it to false if the head is meant to be separate", wpath);
    }

    /* FORMAT.md's order. */
    const sl_st_tensor *t;
    t = T->g[G_WTE];
    if ((rc = sl_st_mem_add(dst, "tok_emb.weight", t->dtype, 2, t->shape, t->data))) return rc;
    t = T->g[G_WPE];
    if ((rc = sl_st_mem_add(dst, "pos_emb.weight", t->dtype, 2, t->shape, t->data))) return rc;
    for (size_t i = 0; i < c->n_layer && !rc; i++) {
        const sl_st_tensor *const *L = &T->l[i * T_PER_LAYER];
#define NAME(...) (snprintf(name, sizeof name, __VA_ARGS__), name)
        rc = sl_st_mem_add(dst, NAME("layers.%zu.attn_norm.weight", i), L[T_LN1_W]->dtype, 1, L[T_LN1_W]->shape,
                           L[T_LN1_W]->data);
        if (!rc) rc = sl_st_mem_add(dst, NAME("layers.%zu.attn_norm.bias", i), L[T_LN1_B]->dtype, 1,
                                    L[T_LN1_B]->shape, L[T_LN1_B]->data);
        /* c_attn's out axis is q | k | v, each d wide. */
        if (!rc) rc = add_transposed(dst, NAME("layers.%zu.attn.q.weight", i), L[T_QKV_W], 0, D);
        if (!rc) rc = add_transposed(dst, NAME("layers.%zu.attn.k.weight", i), L[T_QKV_W], D, D);
        if (!rc) rc = add_transposed(dst, NAME("layers.%zu.attn.v.weight", i), L[T_QKV_W], 2 * D, D);
        if (!rc) rc = add_transposed(dst, NAME("layers.%zu.attn.o.weight", i), L[T_O_W], 0, D);
        if (!rc) rc = add_slice(dst, NAME("layers.%zu.attn.q.bias", i), L[T_QKV_B], 0, D);
        if (!rc) rc = add_slice(dst, NAME("layers.%zu.attn.k.bias", i), L[T_QKV_B], D, D);
        if (!rc) rc = add_slice(dst, NAME("layers.%zu.attn.v.bias", i), L[T_QKV_B], 2 * D, D);
        if (!rc) rc = add_slice(dst, NAME("layers.%zu.attn.o.bias", i), L[T_O_B], 0, D);
        if (!rc) rc = sl_st_mem_add(dst, NAME("layers.%zu.mlp_norm.weight", i), L[T_LN2_W]->dtype, 1,
                                    L[T_LN2_W]->shape, L[T_LN2_W]->data);
        if (!rc) rc = sl_st_mem_add(dst, NAME("layers.%zu.mlp_norm.bias", i), L[T_LN2_B]->dtype, 1,
                                    L[T_LN2_B]->shape, L[T_LN2_B]->data);
        if (!rc) rc = add_transposed(dst, NAME("layers.%zu.mlp.up.weight", i), L[T_UP_W], 0, c->n_inner);
        if (!rc) rc = add_transposed(dst, NAME("layers.%zu.mlp.down.weight", i), L[T_DOWN_W], 0, D);
        if (!rc) rc = add_slice(dst, NAME("layers.%zu.mlp.up.bias", i), L[T_UP_B], 0, c->n_inner);
        if (!rc) rc = add_slice(dst, NAME("layers.%zu.mlp.down.bias", i), L[T_DOWN_B], 0, D);
#undef NAME
    }
    if (rc) return rc;
    t = T->g[G_LNF_W];
    if ((rc = sl_st_mem_add(dst, "final_norm.weight", t->dtype, 1, t->shape, t->data))) return rc;
    t = T->g[G_LNF_B];
    if ((rc = sl_st_mem_add(dst, "final_norm.bias", t->dtype, 1, t->shape, t->data))) return rc;
    if (!c->tied) {
        t = T->g[G_LM_HEAD];
        if ((rc = sl_st_mem_add(dst, "lm_head.weight", t->dtype, 2, t->shape, t->data))) return rc;
    }
    return SL_OK;
}

/* ---- tokenizer.json (HF tokenizers) ---- */

/* obj[key] when present and not null, else NULL. */
static json_object *get(json_object *obj, const char *key)
{
    json_object *v;
    if (!json_object_is_type(obj, json_type_object) || !json_object_object_get_ex(obj, key, &v) ||
        json_object_is_type(v, json_type_null))
        return NULL;
    return v;
}

/* obj["type"] as a string, or "". */
static const char *type_of(json_object *obj)
{
    json_object *t = get(obj, "type");
    return t && json_object_is_type(t, json_type_string) ? json_object_get_string(t) : "";
}

static int is_true(json_object *obj, const char *key)
{
    json_object *v = get(obj, key);
    return v && json_object_is_type(v, json_type_boolean) && json_object_get_boolean(v);
}

/* Refuses what makes the tokenizers library encode differently from GPT-2's byte-level BPE. */
static int check_tok_pipeline(const char *path, json_object *root, json_object *model)
{
    json_object *v;
    if (strcmp(type_of(model), "BPE"))
        return sl_fail(SL_EINPUT, "%s: model.type \"%.40s\" is not supported (expected \"BPE\")", path, type_of(model));
    if ((v = get(root, "normalizer")))
        return sl_fail(SL_EINPUT, "%s: normalizer \"%.40s\" is not supported (GPT-2's byte-level BPE has none)", path,
                       type_of(v));
    v = get(root, "pre_tokenizer");
    if (!v || strcmp(type_of(v), "ByteLevel"))
        return sl_fail(SL_EINPUT, "%s: pre_tokenizer \"%.40s\" is not supported (expected \"ByteLevel\")", path,
                       v ? type_of(v) : "none");
    if (is_true(v, "add_prefix_space"))
        return sl_fail(SL_EINPUT, "%s: pre_tokenizer add_prefix_space true is not supported", path);
    json_object *ur = get(v, "use_regex");
    if (ur && (!json_object_is_type(ur, json_type_boolean) || !json_object_get_boolean(ur)))
        return sl_fail(SL_EINPUT, "%s: pre_tokenizer use_regex false is not supported (speclab splits with GPT-2's regex)",
                       path);
    if ((v = get(root, "post_processor")) && strcmp(type_of(v), "ByteLevel"))
        return sl_fail(SL_EINPUT, "%s: post_processor \"%.40s\" is not supported (GPT-2 adds no tokens: ByteLevel or "
                       "none)", path, type_of(v));
    if ((v = get(root, "decoder")) && strcmp(type_of(v), "ByteLevel"))
        return sl_fail(SL_EINPUT, "%s: decoder \"%.40s\" is not supported (expected \"ByteLevel\")", path, type_of(v));
    if ((v = get(model, "dropout")) && json_object_get_double(v) != 0)
        return sl_fail(SL_EINPUT, "%s: model.dropout is set; BPE dropout is not supported", path);
    const char *affix[2] = {"continuing_subword_prefix", "end_of_word_suffix"};
    for (int k = 0; k < 2; k++)
        if ((v = get(model, affix[k])) &&
            (!json_object_is_type(v, json_type_string) || json_object_get_string_len(v) > 0))
            return sl_fail(SL_EINPUT, "%s: model.%s is not supported (GPT-2 has none)", path, affix[k]);
    if (is_true(model, "byte_fallback"))
        return sl_fail(SL_EINPUT, "%s: model.byte_fallback true is not supported", path);
    if (is_true(model, "ignore_merges"))
        return sl_fail(SL_EINPUT, "%s: model.ignore_merges true is not supported", path);
    return SL_OK;
}

/* tokenizer.json -> the byte-bpe JSON of sl_tok.h, loaded (which validates it). */
static int load_tokenizer_json(const char *path, sl_tok **out)
{
    *out = NULL;
    json_object *root;
    int rc = read_json(path, (size_t)INT_MAX, &root);
    if (rc) return rc;
    const char **names = NULL; // (n_total) token text by id
    unsigned char *special = NULL; // (n_total)
    json_object *doc = NULL;
    json_object *model = get(root, "model"), *vocab = get(model, "vocab"), *merges = get(model, "merges");
    json_object *added = get(root, "added_tokens");
    if (!model || !json_object_is_type(model, json_type_object)) {
        rc = sl_fail(SL_EINPUT, "%s: \"model\" is missing or not an object", path);
        goto done;
    }
    if ((rc = check_tok_pipeline(path, root, model))) goto done;
    if (!vocab || !json_object_is_type(vocab, json_type_object)) {
        rc = sl_fail(SL_EINPUT, "%s: model.vocab must be an object mapping token to id", path);
        goto done;
    }
    if (!merges || !json_object_is_type(merges, json_type_array)) {
        rc = sl_fail(SL_EINPUT, "%s: model.merges must be an array", path);
        goto done;
    }
    if (added && !json_object_is_type(added, json_type_array)) {
        rc = sl_fail(SL_EINPUT, "%s: added_tokens must be an array", path);
        goto done;
    }
    /* Ids are 0 .. n_total-1 over the vocab and the added tokens together, each used once (an added
     * token may repeat a vocab entry with the same text). */
    size_t nv = (size_t)json_object_object_length(vocab), na = added ? json_object_array_length(added) : 0;
    size_t n_total = nv + na;
    names = sl_calloc(n_total ? n_total : 1, sizeof *names);
    special = sl_calloc(n_total ? n_total : 1, 1);
    if (!names || !special) {
        rc = SL_EFAIL;
        goto done;
    }
    size_t max_id = 0;
    json_object_object_foreach(vocab, key, val)
    {
        int64_t id = json_object_is_type(val, json_type_int) ? json_object_get_int64(val) : -1;
        if (id < 0 || (uint64_t)id >= n_total || names[id]) {
            rc = sl_fail(SL_EINPUT, "%s: model.vocab token \"%.40s\" has id %s, expected distinct ids in [0, %zu)", path,
                         key, json_object_to_json_string(val), n_total);
            goto done;
        }
        names[id] = key;
        if ((size_t)id + 1 > max_id) max_id = (size_t)id + 1;
    }
    for (size_t i = 0; i < na; i++) {
        json_object *a = json_object_array_get_idx(added, i), *jid = get(a, "id"), *jc = get(a, "content");
        if (!jid || !json_object_is_type(jid, json_type_int) || !jc || !json_object_is_type(jc, json_type_string) ||
            !json_object_get_string_len(jc)) {
            rc = sl_fail(SL_EINPUT, "%s: added_tokens[%zu] needs an integer \"id\" and a non-empty \"content\"", path, i);
            goto done;
        }
        int64_t id = json_object_get_int64(jid);
        const char *content = json_object_get_string(jc);
        if (id < 0 || (uint64_t)id >= n_total) {
            rc = sl_fail(SL_EINPUT, "%s: added token \"%.40s\" has id %lld, outside [0, %zu)", path, content,
                         (long long)id, n_total);
            goto done;
        }
        if (is_true(a, "lstrip") || is_true(a, "rstrip") || is_true(a, "single_word")) {
            rc = sl_fail(SL_EINPUT, "%s: added token \"%.40s\": lstrip, rstrip and single_word are not supported", path,
                         content);
            goto done;
        }
        if (sl_utf8_valid_prefix((const unsigned char *)content, strlen(content)) != strlen(content)) {
            rc = sl_fail(SL_EINPUT, "%s: added token %lld is not valid UTF-8", path, (long long)id);
            goto done;
        }
        if (special[id] || (names[id] && strcmp(names[id], content))) {
            rc = sl_fail(SL_EINPUT, "%s: added token \"%.40s\" has id %lld, already taken by \"%.40s\"", path, content,
                         (long long)id, names[id]);
            goto done;
        }
        names[id] = content;
        special[id] = 1;
        if ((size_t)id + 1 > max_id) max_id = (size_t)id + 1;
    }
    for (size_t id = 0; id < max_id; id++)
        if (!names[id]) {
            rc = sl_fail(SL_EINPUT, "%s: no token has id %zu (ids must run from 0 without gaps)", path, id);
            goto done;
        }
    doc = json_object_new_object();
    json_object *jv = json_object_new_array_ext((int)max_id), *jm = json_object_new_array_ext((int)json_object_array_length(merges));
    json_object *js = json_object_new_object();
    if (!doc || !jv || !jm || !js) {
        json_object_put(jv), json_object_put(jm), json_object_put(js);
        rc = sl_fail(SL_EFAIL, "out of memory");
        goto done;
    }
    json_object_object_add(doc, "type", json_object_new_string("byte-bpe"));
    json_object_object_add(doc, "vocab", jv);
    json_object_object_add(doc, "merges", jm);
    json_object_object_add(doc, "special", js);
    for (size_t id = 0; id < max_id; id++) {
        json_object_array_add(jv, json_object_new_string(names[id]));
        if (special[id]) json_object_object_add(js, names[id], json_object_new_int64((int64_t)id));
    }
    /* Merges: "a b" strings (tokenizers < 0.20) or [a, b] pairs (later). */
    for (size_t r = 0; r < json_object_array_length(merges); r++) {
        json_object *e = json_object_array_get_idx(merges, r);
        if (json_object_is_type(e, json_type_string)) {
            json_object_array_add(jm, json_object_get(e));
            continue;
        }
        json_object *a = json_object_is_type(e, json_type_array) && json_object_array_length(e) == 2
                             ? json_object_array_get_idx(e, 0) : NULL;
        json_object *b = a ? json_object_array_get_idx(e, 1) : NULL;
        if (!a || !json_object_is_type(a, json_type_string) || !json_object_is_type(b, json_type_string) ||
            strchr(json_object_get_string(a), ' ') || strchr(json_object_get_string(b), ' ')) {
            rc = sl_fail(SL_EINPUT, "%s: model.merges[%zu] is %.60s, expected \"a b\" or [\"a\", \"b\"]", path, r,
                         json_object_to_json_string(e));
            goto done;
        }
        size_t la = (size_t)json_object_get_string_len(a), lb = (size_t)json_object_get_string_len(b);
        char *s = sl_malloc(la + lb + 2);
        if (!s) {
            rc = SL_EFAIL;
            goto done;
        }
        memcpy(s, json_object_get_string(a), la);
        s[la] = ' ';
        memcpy(s + la + 1, json_object_get_string(b), lb);
        s[la + 1 + lb] = 0;
        json_object_array_add(jm, json_object_new_string_len(s, (int)(la + lb + 1)));
        free(s);
    }
    rc = sl_tok_from_json(json_object_to_json_string_ext(doc, JSON_C_TO_STRING_PLAIN), out);
    if (rc) {
        char msg[1024];
        snprintf(msg, sizeof msg, "%s", sl_errmsg());
        rc = sl_fail(rc, "%s: %s", path, msg);
    }
done:
    json_object_put(doc);
    json_object_put(root);
    free(names);
    free(special);
    return rc;
}

/* vocab.json + merges.txt, and the tokens of added_tokens.json (what add_tokens and
 * add_special_tokens save beside them: text -> id, ids following the vocabulary's) when the folder
 * has one. Added tokens are matched in the text before BPE, as transformers does, so they become
 * `special` entries. */
static int load_vocab_merges(const char *dir, const char *vj, const char *mt, sl_tok **out)
{
    *out = NULL;
    sl_tok *base = NULL;
    int rc = sl_tok_load_gpt2(vj, mt, &base);
    if (rc) return rc;
    char *ap = join(dir, "added_tokens.json");
    if (!ap || !is_file(ap)) {
        free(ap);
        *out = base;
        return ap ? SL_OK : SL_EFAIL;
    }
    json_object *added = NULL, *doc = NULL;
    const char **names = NULL; // (na) added token text by id - nv
    char *text = sl_tok_to_json(base);
    size_t nv = sl_tok_vocab_size(base), na = 0;
    sl_tok_free(base);
    rc = text ? read_json(ap, HF_MAX_CONFIG_BYTES, &added) : SL_EFAIL;
    if (!rc && !(doc = json_tokener_parse(text))) rc = sl_fail(SL_EFAIL, "out of memory");
    if (!rc) {
        na = (size_t)json_object_object_length(added);
        names = sl_calloc(na ? na : 1, sizeof *names);
        if (!names) rc = SL_EFAIL;
    }
    json_object *jv = NULL, *js = NULL;
    if (!rc) {
        json_object_object_get_ex(doc, "vocab", &jv);
        json_object_object_get_ex(doc, "special", &js);
    }
    if (!rc) {
        json_object_object_foreach(added, key, val)
        {
            int64_t id = json_object_is_type(val, json_type_int) ? json_object_get_int64(val) : -1;
            /* An id inside the vocabulary may only repeat its own token. */
            if (id >= 0 && (uint64_t)id < nv && !strcmp(json_object_get_string(json_object_array_get_idx(jv, (size_t)id)), key)) {
                json_object_object_add(js, key, json_object_new_int64(id));
                continue;
            }
            if (id < (int64_t)nv || (uint64_t)id - nv >= na || names[id - (int64_t)nv] || !key[0] ||
                sl_utf8_valid_prefix((const unsigned char *)key, strlen(key)) != strlen(key)) {
                rc = sl_fail(SL_EINPUT, "%s: token \"%.40s\" has id %s, expected distinct ids from %zu on (after "
                             "vocab.json's) without gaps, valid UTF-8", ap, key, json_object_to_json_string(val), nv);
                break;
            }
            names[id - (int64_t)nv] = key;
        }
    }
    size_t n_new = 0;
    while (!rc && n_new < na && names[n_new]) n_new++;
    for (size_t k = n_new; !rc && k < na; k++)
        if (names[k]) rc = sl_fail(SL_EINPUT, "%s: no token has id %zu (ids must follow vocab.json's without gaps)", ap, nv + n_new);
    for (size_t k = 0; !rc && k < n_new; k++) {
        json_object_array_add(jv, json_object_new_string(names[k]));
        json_object_object_add(js, names[k], json_object_new_int64((int64_t)(nv + k)));
    }
    if (!rc) {
        rc = sl_tok_from_json(json_object_to_json_string_ext(doc, JSON_C_TO_STRING_PLAIN), out);
        if (rc) {
            char msg[1024];
            snprintf(msg, sizeof msg, "%s", sl_errmsg());
            rc = sl_fail(rc, "%s: %s", ap, msg);
        }
    }
    json_object_put(doc);
    json_object_put(added);
    free(names);
    free(text);
    free(ap);
    return rc;
}

/* The folder's tokenizer as byte-bpe JSON (*json NULL when the folder has none); *source says
 * which files it came from. */
static int load_tokenizer(const char *dir, size_t vocab_size, char **json, const char **source)
{
    *json = NULL;
    *source = "none in the folder";
    char *tj = join(dir, "tokenizer.json"), *vj = join(dir, "vocab.json"), *mt = join(dir, "merges.txt");
    int rc = tj && vj && mt ? SL_OK : SL_EFAIL;
    sl_tok *tok = NULL;
    const char *named = NULL;
    if (!rc && is_file(tj)) {
        named = tj;
        *source = "tokenizer.json";
        rc = load_tokenizer_json(tj, &tok);
    } else if (!rc && (is_file(vj) || is_file(mt))) {
        named = vj;
        *source = "vocab.json + merges.txt";
        if (!is_file(vj) || !is_file(mt))
            rc = sl_fail(SL_EINPUT, "%s: %s without %s: a GPT-2 tokenizer needs both (or a tokenizer.json)", dir,
                         is_file(vj) ? "vocab.json" : "merges.txt", is_file(vj) ? "merges.txt" : "vocab.json");
        else rc = load_vocab_merges(dir, vj, mt, &tok);
    }
    if (!rc && tok && sl_tok_vocab_size(tok) > vocab_size)
        rc = sl_fail(SL_EINPUT, "%s: the tokenizer has %zu tokens but config.json's vocab_size is %zu (a model may "
                     "have more rows than its tokenizer has tokens, never fewer)", named, sl_tok_vocab_size(tok),
                     vocab_size);
    if (!rc && tok && !(*json = sl_tok_to_json(tok))) rc = SL_EFAIL;
    sl_tok_free(tok);
    free(tj);
    free(vj);
    free(mt);
    return rc;
}

/* ---- the importer ---- */

int sl_import_hf_gpt2(const char *path, sl_st_file **out)
{
    *out = NULL;
    struct stat sb;
    if (stat(path, &sb) != 0) return sl_fail(SL_EINPUT, "%s: cannot open: %s", path, strerror(errno));
    char *dir = NULL, *weights = NULL, *cfg_path = NULL, *tok_json = NULL;
    sl_st_file *src = NULL, *dst = NULL;
    hf_tensors T = {0};
    json_object *dtypes = NULL;
    int rc = SL_OK;
    /* The folder, and the weights file in it. */
    if (S_ISDIR(sb.st_mode)) {
        size_t n = strlen(path);
        while (n > 1 && path[n - 1] == '/') n--;
        dir = sl_malloc(n + 1);
        if (dir) memcpy(dir, path, n), dir[n] = 0;
        weights = dir ? join(dir, "model.safetensors") : NULL;
    } else {
        const char *slash = strrchr(path, '/');
        size_t n = slash ? (size_t)(slash - path) : 1;
        if (slash == path) n = 1;
        dir = sl_malloc(n + 1);
        if (dir) memcpy(dir, slash ? path : ".", n), dir[n] = 0;
        size_t pn = strlen(path) + 1;
        weights = sl_malloc(pn);
        if (weights) memcpy(weights, path, pn);
    }
    if (!dir || !weights || !(cfg_path = join(dir, "config.json"))) {
        rc = SL_EFAIL;
        goto done;
    }
    if (!is_file(weights)) {
        char *idx = join(dir, "model.safetensors.index.json"), *bin = join(dir, "pytorch_model.bin");
        if (!idx || !bin) rc = SL_EFAIL;
        else if (is_file(idx))
            rc = sl_fail(SL_EINPUT, "%s: a sharded checkpoint (model.safetensors.index.json) is not supported: save it as "
                         "one file (save_pretrained(..., max_shard_size=\"100GB\"))", dir);
        else if (is_file(bin))
            rc = sl_fail(SL_EINPUT, "%s: only pytorch_model.bin (a PyTorch pickle); speclab reads safetensors weights: "
                         "convert it with the transformers library (save_pretrained(..., safe_serialization=True))", dir);
        else
            rc = sl_fail(SL_EINPUT, "%s: not a Hugging Face GPT-2 folder: no model.safetensors", dir);
        free(idx);
        free(bin);
        goto done;
    }
    if (!is_file(cfg_path)) {
        if (!S_ISDIR(sb.st_mode)) /* a safetensors file given alone: it may be a damaged speclab model */
            rc = sl_fail(SL_EINPUT, "%s: not a speclab model (no format=speclab-model metadata), and no config.json "
                         "beside it for a Hugging Face GPT-2 model", path);
        else rc = sl_fail(SL_EINPUT, "%s: not a Hugging Face GPT-2 folder: no config.json beside the weights", dir);
        goto done;
    }
    hf_config c;
    if ((rc = parse_config(cfg_path, &c))) goto done;
    if ((rc = sl_st_open(weights, &src))) goto done;
    /* Every layer has 12 tensors: bound n_layer by the file before allocating per layer. */
    if (c.n_layer > src->n_tensors / T_PER_LAYER + 1) {
        rc = sl_fail(SL_EINPUT, "%s: config.json n_layer = %zu needs %d tensors per layer; %s holds %zu in all", cfg_path,
                     c.n_layer, T_PER_LAYER, weights, src->n_tensors);
        goto done;
    }
    T.l = sl_calloc(c.n_layer * T_PER_LAYER, sizeof *T.l);
    if (!T.l) {
        rc = SL_EFAIL;
        goto done;
    }
    if ((rc = sort_tensors(src, &c, &T))) goto done;
    if ((rc = sl_st_mem_new(path, &dst))) goto done;
    if ((rc = build_tensors(dst, weights, &c, &T))) goto done;
    const char *tok_source;
    if ((rc = load_tokenizer(dir, c.vocab_size, &tok_json, &tok_source))) goto done;

    /* Metadata (FORMAT.md, sl_import.h). */
    sl_model_config mc = {.vocab_size = c.vocab_size, .n_layer = c.n_layer, .n_head = c.n_head,
                          .n_kv_head = c.n_head, .d_model = c.n_embd, .d_ff = c.n_inner,
                          .max_seq_len = c.n_positions, .norm_eps = c.eps, .rope_theta = 10000.0,
                          .tied_embeddings = c.tied};
    char *cfg_json = sl_model_config_json(&mc, SL_ARCH_GPT2);
    dtypes = json_object_new_object();
    if (!cfg_json || !dtypes) {
        free(cfg_json);
        rc = sl_fail(SL_EFAIL, "out of memory");
        goto done;
    }
    for (size_t i = 0; i < src->n_tensors; i++) {
        const char *dn = sl_dtype_name(src->tensors[i].dtype);
        json_object *v;
        int64_t k = json_object_object_get_ex(dtypes, dn, &v) ? json_object_get_int64(v) : 0;
        json_object_object_add(dtypes, dn, json_object_new_int64(k + 1));
    }
    char notes[256];
    snprintf(notes, sizeof notes, "tokenizer: %s; %zu attention-mask buffers skipped", tok_source, T.n_skipped);
    rc = sl_st_mem_meta(dst, "format", "speclab-model");
    if (!rc) rc = sl_st_mem_meta(dst, "format_version", "1");
    if (!rc) rc = sl_st_mem_meta(dst, "arch", "gpt2");
    if (!rc) rc = sl_st_mem_meta(dst, "config", cfg_json);
    if (!rc && tok_json) rc = sl_st_mem_meta(dst, "tokenizer", tok_json);
    if (!rc) rc = sl_st_mem_meta(dst, "source_format", "hf-gpt2");
    if (!rc) rc = sl_st_mem_meta(dst, "source_dtypes", json_object_to_json_string_ext(dtypes, JSON_C_TO_STRING_PLAIN));
    if (!rc) rc = sl_st_mem_meta(dst, "source_notes", notes);
    free(cfg_json);
    if (rc) goto done;
    /* The in-place tensors point into src's mapping: dst keeps it. */
    sl_st_mem_keep_map(dst, src->map, src->map_bytes);
    src->map = NULL;
    *out = dst;
    dst = NULL;
done:
    json_object_put(dtypes);
    sl_st_close(src);
    sl_st_close(dst);
    free(T.l);
    free(tok_json);
    free(cfg_path);
    free(weights);
    free(dir);
    return rc;
}
