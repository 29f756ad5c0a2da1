/*
 * sl_model.c: loading, validating and running GPT-2 and Llama decoders (FORMAT.md). See sl_model.h.
 *
 * Sections: config, tensor table, open/close, context, blocks (norms, attention, MLP), forward,
 * random initialisation.
 */
#include "sl_model.h"

#include <gsl/gsl_randist.h>
#include <json.h>
#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/mman.h>
#include <unistd.h>

#include "sl_common.h"
#include "sl_import.h"
#include "sl_kern.h"

/* ---- config ---- */

const char *sl_arch_name(sl_arch a)
{
    return a == SL_ARCH_GPT2 ? "gpt2" : "llama";
}

int sl_arch_parse(const char *s, sl_arch *out)
{
    if (!strcmp(s, "gpt2")) *out = SL_ARCH_GPT2;
    else if (!strcmp(s, "llama")) *out = SL_ARCH_LLAMA;
    else return sl_fail(SL_EINPUT, "arch '%s' is not gpt2 or llama", s);
    return SL_OK;
}

static int get_size(json_object *o, const char *what, const char *key, int required, size_t dflt, size_t *out)
{
    json_object *v;
    if (!json_object_object_get_ex(o, key, &v)) {
        if (required) return sl_fail(SL_EINPUT, "%s: config lacks \"%s\"", what, key);
        *out = dflt;
        return SL_OK;
    }
    if (!json_object_is_type(v, json_type_int) || json_object_get_int64(v) < 1 ||
        json_object_get_int64(v) > (int64_t)1 << 31)
        return sl_fail(SL_EINPUT, "%s: config \"%s\" must be an integer in [1, 2^31]", what, key);
    *out = (size_t)json_object_get_int64(v);
    return SL_OK;
}

static int get_double(json_object *o, const char *what, const char *key, double dflt, double *out)
{
    json_object *v;
    *out = dflt;
    if (!json_object_object_get_ex(o, key, &v)) return SL_OK;
    if (!json_object_is_type(v, json_type_double) && !json_object_is_type(v, json_type_int))
        return sl_fail(SL_EINPUT, "%s: config \"%s\" is not a number", what, key);
    *out = json_object_get_double(v);
    if (!(*out > 0) || !isfinite(*out)) return sl_fail(SL_EINPUT, "%s: config \"%s\" must be positive", what, key);
    return SL_OK;
}

int sl_model_config_parse(const char *json_text, sl_arch arch, const char *what, sl_model_config *c)
{
    memset(c, 0, sizeof *c);
    json_object *o = json_tokener_parse(json_text);
    if (!o || !json_object_is_type(o, json_type_object)) {
        json_object_put(o);
        return sl_fail(SL_EINPUT, "%s: config is not a JSON object", what);
    }
    int rc = SL_OK;
    if (!rc) rc = get_size(o, what, "vocab_size", 1, 0, &c->vocab_size);
    if (!rc) rc = get_size(o, what, "n_layer", 1, 0, &c->n_layer);
    if (!rc) rc = get_size(o, what, "n_head", 1, 0, &c->n_head);
    if (!rc) rc = get_size(o, what, "n_kv_head", 0, c->n_head, &c->n_kv_head);
    if (!rc) rc = get_size(o, what, "d_model", 1, 0, &c->d_model);
    if (!rc) rc = get_size(o, what, "d_ff", 1, 0, &c->d_ff);
    if (!rc) rc = get_size(o, what, "max_seq_len", 1, 0, &c->max_seq_len);
    if (!rc) rc = get_double(o, what, "norm_eps", 1e-5, &c->norm_eps);
    if (!rc) rc = get_double(o, what, "rope_theta", 10000.0, &c->rope_theta);
    c->tied_embeddings = 1;
    json_object *v;
    if (!rc && json_object_object_get_ex(o, "tied_embeddings", &v)) {
        if (!json_object_is_type(v, json_type_boolean))
            rc = sl_fail(SL_EINPUT, "%s: config \"tied_embeddings\" is not true or false", what);
        else c->tied_embeddings = json_object_get_boolean(v);
    }
    json_object_put(o);
    if (rc) return rc;
    if (c->d_model % c->n_head)
        return sl_fail(SL_EINPUT, "%s: d_model %zu is not a multiple of n_head %zu", what, c->d_model, c->n_head);
    if (c->n_head % c->n_kv_head)
        return sl_fail(SL_EINPUT, "%s: n_head %zu is not a multiple of n_kv_head %zu", what, c->n_head, c->n_kv_head);
    if (arch == SL_ARCH_GPT2 && c->n_kv_head != c->n_head)
        return sl_fail(SL_EINPUT, "%s: gpt2 needs n_kv_head == n_head (%zu != %zu)", what, c->n_kv_head, c->n_head);
    if (arch == SL_ARCH_LLAMA && (c->d_model / c->n_head) % 2)
        return sl_fail(SL_EINPUT, "%s: llama needs an even head_dim (d_model/n_head = %zu)", what,
                       c->d_model / c->n_head);
    return SL_OK;
}

char *sl_model_config_json(const sl_model_config *c, sl_arch arch)
{
    json_object *o = json_object_new_object();
    json_object_object_add(o, "vocab_size", json_object_new_int64((int64_t)c->vocab_size));
    json_object_object_add(o, "n_layer", json_object_new_int64((int64_t)c->n_layer));
    json_object_object_add(o, "n_head", json_object_new_int64((int64_t)c->n_head));
    json_object_object_add(o, "n_kv_head", json_object_new_int64((int64_t)c->n_kv_head));
    json_object_object_add(o, "d_model", json_object_new_int64((int64_t)c->d_model));
    json_object_object_add(o, "d_ff", json_object_new_int64((int64_t)c->d_ff));
    json_object_object_add(o, "max_seq_len", json_object_new_int64((int64_t)c->max_seq_len));
    json_object_object_add(o, "norm_eps", json_object_new_double(c->norm_eps));
    if (arch == SL_ARCH_LLAMA) json_object_object_add(o, "rope_theta", json_object_new_double(c->rope_theta));
    json_object_object_add(o, "tied_embeddings", json_object_new_boolean(c->tied_embeddings));
    const char *s = json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN);
    char *r = sl_malloc(strlen(s) + 1);
    if (r) strcpy(r, s);
    json_object_put(o);
    return r;
}

/* ---- the tensor table: names and shapes the config implies ---- */

typedef enum { K_MATRIX, K_NORM, K_BIAS } tkind;

typedef struct {
    char name[64];
    int ndim;
    int64_t shape[2];
    tkind kind;
    sl_model_w *wslot;  /* matrices: where the in-place reference goes */
    float **vslot;      /* vectors: where the converted float32 copy goes */
} tspec;

/* Fills specs (when not NULL) and returns how many tensors the model has. m may be NULL (count
 * or init only: slots are then NULL). */
static size_t tensor_table(sl_arch arch, const sl_model_config *c, sl_model *m, tspec *specs)
{
    size_t n = 0;
    const int64_t d = (int64_t)c->d_model, hd = (int64_t)(c->d_model / c->n_head);
    const int64_t qd = (int64_t)c->n_head * hd, kvd = (int64_t)c->n_kv_head * hd, ff = (int64_t)c->d_ff;
    const int gpt2 = arch == SL_ARCH_GPT2;
#define ADD(KIND, W, V, ND, S0, S1, ...)                                                  \
    do {                                                                                  \
        if (specs) {                                                                      \
            tspec *s = &specs[n];                                                         \
            snprintf(s->name, sizeof s->name, __VA_ARGS__);                               \
            s->kind = KIND;                                                               \
            s->ndim = ND;                                                                 \
            s->shape[0] = S0;                                                             \
            s->shape[1] = S1;                                                             \
            s->wslot = m ? (W) : NULL;                                                    \
            s->vslot = m ? (V) : NULL;                                                    \
        }                                                                                 \
        n++;                                                                              \
    } while (0)
    ADD(K_MATRIX, &m->tok_emb, NULL, 2, (int64_t)c->vocab_size, d, "tok_emb.weight");
    if (gpt2) ADD(K_MATRIX, &m->pos_emb, NULL, 2, (int64_t)c->max_seq_len, d, "pos_emb.weight");
    for (size_t i = 0; i < c->n_layer; i++) {
        sl_model_layer *L = m ? &m->layers[i] : NULL;
        ADD(K_NORM, NULL, &L->attn_norm_w, 1, d, 0, "layers.%zu.attn_norm.weight", i);
        if (gpt2) ADD(K_BIAS, NULL, &L->attn_norm_b, 1, d, 0, "layers.%zu.attn_norm.bias", i);
        ADD(K_MATRIX, &L->q, NULL, 2, qd, d, "layers.%zu.attn.q.weight", i);
        ADD(K_MATRIX, &L->k, NULL, 2, kvd, d, "layers.%zu.attn.k.weight", i);
        ADD(K_MATRIX, &L->v, NULL, 2, kvd, d, "layers.%zu.attn.v.weight", i);
        ADD(K_MATRIX, &L->o, NULL, 2, d, qd, "layers.%zu.attn.o.weight", i);
        if (gpt2) {
            ADD(K_BIAS, NULL, &L->bq, 1, qd, 0, "layers.%zu.attn.q.bias", i);
            ADD(K_BIAS, NULL, &L->bk, 1, kvd, 0, "layers.%zu.attn.k.bias", i);
            ADD(K_BIAS, NULL, &L->bv, 1, kvd, 0, "layers.%zu.attn.v.bias", i);
            ADD(K_BIAS, NULL, &L->bo, 1, d, 0, "layers.%zu.attn.o.bias", i);
        }
        ADD(K_NORM, NULL, &L->mlp_norm_w, 1, d, 0, "layers.%zu.mlp_norm.weight", i);
        if (gpt2) ADD(K_BIAS, NULL, &L->mlp_norm_b, 1, d, 0, "layers.%zu.mlp_norm.bias", i);
        ADD(K_MATRIX, &L->up, NULL, 2, ff, d, "layers.%zu.mlp.up.weight", i);
        if (!gpt2) ADD(K_MATRIX, &L->gate, NULL, 2, ff, d, "layers.%zu.mlp.gate.weight", i);
        ADD(K_MATRIX, &L->down, NULL, 2, d, ff, "layers.%zu.mlp.down.weight", i);
        if (gpt2) {
            ADD(K_BIAS, NULL, &L->bup, 1, ff, 0, "layers.%zu.mlp.up.bias", i);
            ADD(K_BIAS, NULL, &L->bdown, 1, d, 0, "layers.%zu.mlp.down.bias", i);
        }
    }
    ADD(K_NORM, NULL, &m->final_norm_w, 1, d, 0, "final_norm.weight");
    if (gpt2) ADD(K_BIAS, NULL, &m->final_norm_b, 1, d, 0, "final_norm.bias");
    if (!c->tied_embeddings) ADD(K_MATRIX, &m->lm_head, NULL, 2, (int64_t)c->vocab_size, d, "lm_head.weight");
#undef ADD
    return n;
}

/* ---- open / close ---- */

void sl_model_close(sl_model *m)
{
    if (!m) return;
    sl_model_gpu_release(m);
    free(m->packed);
    sl_st_close(m->st);
    free(m->layers);
    free(m->vectors);
    free(m);
}

static void shape_str(char *buf, size_t cap, int ndim, const int64_t *shape)
{
    size_t k = (size_t)snprintf(buf, cap, "[");
    for (int i = 0; i < ndim && k < cap; i++)
        k += (size_t)snprintf(buf + k, cap - k, "%s%lld", i ? ", " : "", (long long)shape[i]);
    if (k < cap) snprintf(buf + k, cap - k, "]");
}

static int pack_mode = -1; /* sl_model_set_packing */

int sl_model_set_packing(int on)
{
    if (on < 0) {
        const char *e = getenv("SL_PACK");
        on = !(e && !strcmp(e, "0"));
    }
    __atomic_store_n(&pack_mode, on ? 1 : 0, __ATOMIC_RELAXED);
    return on ? 1 : 0;
}

static int packing(void)
{
    const int p = __atomic_load_n(&pack_mode, __ATOMIC_RELAXED);
    return p < 0 ? sl_model_set_packing(-1) : p;
}

/* Gives the pages of [p, p + bytes) back to the file when they lie in its mapping (read-only and
 * private: a later read, by the GPU upload say, maps them in again from the file). */
static void release_mapped(const sl_st_file *st, const void *p, size_t bytes)
{
    const uintptr_t a = (uintptr_t)p, m0 = (uintptr_t)st->map, page = (uintptr_t)sysconf(_SC_PAGESIZE);
    if (!st->map || a < m0 || a + bytes > m0 + st->map_bytes) return;
    const uintptr_t lo = (a + page - 1) & ~(page - 1), hi = (a + bytes) & ~(page - 1);
    if (hi > lo) madvise((void *)lo, hi - lo, MADV_DONTNEED);
}

/* Whether tensor t (of spec s) is packed: the matrices the engine multiplies by (all but pos_emb)
 * whose rows are a multiple of 32 elements, of any dtype. Ad hoc, the GPT-2-124M shape in f32,
 * packed / row-major t(n), best of 5 alternated (2-core Zen 5 VM): n = 1, 5, 8: 0.92, 0.88, 0.71
 * on one thread, 0.97, 0.92, 0.83 on two. */
static int packs(const sl_model *m, const tspec *s, const sl_st_tensor *t)
{
    return s->kind == K_MATRIX && s->wslot != &m->pos_emb && sl_kern_packable((size_t)t->shape[0], (size_t)t->shape[1]);
}

static size_t packed_bytes(const sl_st_tensor *t)
{
    return sl_kern_packed_bytes(t->dtype, (size_t)t->shape[0], (size_t)t->shape[1]);
}

/* The packed weights' buffer (bytes >= 4 MiB): 2 MiB-aligned and asked for in transparent huge
 * pages (madvise; where the kernel's setting is `never`, or the pages are not to be had, it is an
 * ordinary buffer), so that a pass over the weights misses the TLB once per 2 MiB instead of once
 * per 4 KiB. Measured ad hoc on the 2-core Zen 3 VM (THP `madvise`), a model opened twice in one
 * process, one copy in 4 KiB pages and one in 2 MiB, calls alternated one by one, medians of the
 * pairs' ratios (2 MiB / 4 KiB) over 10-30 pairs, either copy opened first: the shipped target
 * t(1) 0.94-0.99, t(5) 0.90-1.00 (one and two threads); GPT-2-124M f16 t(1) 0.93 / 0.98, t(5)
 * 0.96 / 0.97 (one / two threads); the 110M Llama in f32 t(1) 0.92-0.99. (Session 39's comparison
 * of separate processes could not see it through the spread between processes.) Opening was no
 * slower (GPT-2-124M f32 with one token, five alternated runs: 0.76-1.21 s against 0.78-1.33 s);
 * where memory is fragmented the kernel may compact it first. SL_PACK_HUGE=0 keeps 4 KiB pages. */
static void *alloc_packed(size_t bytes)
{
    const size_t H = (size_t)2 << 20;
    const char *e = getenv("SL_PACK_HUGE");
    if (bytes < 2 * H || (e && !strcmp(e, "0"))) return sl_malloc_aligned(bytes);
    const size_t rounded = (bytes + H - 1) & ~(H - 1);
    void *p = aligned_alloc(H, rounded);
    if (!p) return sl_malloc_aligned(bytes);
#ifdef MADV_HUGEPAGE
    (void)madvise(p, rounded, MADV_HUGEPAGE);
#endif
    return p;
}

/* The matrices packs() picks, in the kernel's packed layout, in one allocation (m->packed), each
 * 64-byte aligned. */
static int pack_matrices(sl_model *m, const tspec *specs, size_t n_specs)
{
    size_t total = 0;
    for (size_t i = 0; i < n_specs; i++) {
        const sl_st_tensor *t = sl_st_find(m->st, specs[i].name);
        if (packs(m, &specs[i], t))
            total += (packed_bytes(t) + 63) & ~(size_t)63;
    }
    if (!total) return SL_OK;
    unsigned char *buf = alloc_packed(total);
    if (!buf) return SL_EFAIL;
    m->packed = buf;
    for (size_t i = 0; i < n_specs; i++) {
        const sl_st_tensor *t = sl_st_find(m->st, specs[i].name);
        if (!packs(m, &specs[i], t)) continue;
        sl_kern_pack(buf, t->data, t->dtype, (size_t)t->shape[0], (size_t)t->shape[1]);
        release_mapped(m->st, t->data, t->nbytes);
        specs[i].wslot->pk = buf;
        buf += (packed_bytes(t) + 63) & ~(size_t)63;
    }
    return SL_OK;
}

int sl_model_open(const char *path, sl_model **out)
{
    *out = NULL;
    sl_st_file *st = NULL;
    sl_model_format fmt;
    int rc = sl_model_file_open(path, &st, &fmt);
    if (rc) return rc;
    if ((rc = sl_model_from_st(st, path, out))) return rc;
    (*out)->format = fmt;
    return SL_OK;
}

int sl_model_from_st(sl_st_file *st, const char *path, sl_model **out)
{
    *out = NULL;
    sl_model *m = sl_calloc(1, sizeof *m);
    if (!m) {
        sl_st_close(st);
        return SL_EFAIL;
    }
    m->st = st;
    tspec *specs = NULL;
    int rc = SL_OK;
    const char *fmt = sl_st_meta(m->st, "format"), *ver = sl_st_meta(m->st, "format_version");
    const char *arch = sl_st_meta(m->st, "arch"), *cfg = sl_st_meta(m->st, "config");
    if (!fmt || strcmp(fmt, "speclab-model") || !ver || !arch || !cfg) {
        rc = sl_fail(SL_EINPUT, "%s: not a speclab model (metadata needs format=speclab-model, format_version, arch, config)",
                     path);
        goto fail;
    }
    if (strcmp(ver, "1")) {
        rc = sl_fail(SL_EINPUT, "%s: format_version '%s' is not supported (expected 1)", path, ver);
        goto fail;
    }
    if (sl_arch_parse(arch, &m->arch)) {
        rc = sl_fail(SL_EINPUT, "%s: arch '%s' is not gpt2 or llama", path, arch);
        goto fail;
    }
    if ((rc = sl_model_config_parse(cfg, m->arch, path, &m->cfg))) goto fail;
    const sl_model_config *c = &m->cfg;
    m->head_dim = c->d_model / c->n_head;
    m->kv_dim = c->n_kv_head * m->head_dim;
    m->tokenizer_json = sl_st_meta(m->st, "tokenizer");
    /* The config's counts size everything below; bound them by what the file holds before
     * allocating anything proportional to them (a 15 KB file claiming 2^22 layers once cost 7 GB and
     * 35 s). One layer of slack leaves a missing tensor to the message that names it. */
    sl_model_config c0 = *c, c1 = *c;
    c0.n_layer = 0, c1.n_layer = 1;
    size_t fixed = tensor_table(m->arch, &c0, NULL, NULL), per_layer = tensor_table(m->arch, &c1, NULL, NULL) - fixed;
    if (c->n_layer > m->st->n_tensors / per_layer + 1) {
        rc = sl_fail(SL_EINPUT, "%s: config n_layer = %zu needs at least %zu tensors per layer for %s; the file holds %zu in all",
                     path, c->n_layer, per_layer, arch, m->st->n_tensors);
        goto fail;
    }
    m->layers = sl_calloc(c->n_layer, sizeof *m->layers);
    if (!m->layers) {
        rc = SL_EFAIL;
        goto fail;
    }
    size_t n_specs = tensor_table(m->arch, c, m, NULL);
    specs = sl_malloc(n_specs * sizeof *specs);
    if (!specs) {
        rc = SL_EFAIL;
        goto fail;
    }
    tensor_table(m->arch, c, m, specs);
    size_t n_vec_floats = 0;
    for (size_t i = 0; i < n_specs; i++) {
        const tspec *s = &specs[i];
        const sl_st_tensor *t = sl_st_find(m->st, s->name);
        if (!t) {
            rc = sl_fail(SL_EINPUT, "%s: tensor '%s' is missing", path, s->name);
            goto fail;
        }
        int same = t->ndim == s->ndim;
        for (int k = 0; same && k < s->ndim; k++) same = t->shape[k] == s->shape[k];
        if (!same) {
            char got[96], want[96];
            shape_str(got, sizeof got, t->ndim, t->shape);
            shape_str(want, sizeof want, s->ndim, s->shape);
            rc = sl_fail(SL_EINPUT, "%s: tensor '%s' has shape %s, the config implies %s", path, s->name, got, want);
            goto fail;
        }
        if (t->dtype != SL_DT_F32 && t->dtype != SL_DT_F16 && t->dtype != SL_DT_BF16) {
            rc = sl_fail(SL_EINPUT, "%s: tensor '%s' has dtype %s; weights must be F32, F16 or BF16", path, s->name,
                         sl_dtype_name(t->dtype));
            goto fail;
        }
        if (s->kind != K_MATRIX) n_vec_floats += t->numel;
    }
    if (m->st->n_tensors != n_specs) {
        for (size_t i = 0; i < m->st->n_tensors; i++) {
            int known = 0;
            for (size_t j = 0; j < n_specs && !known; j++) known = !strcmp(m->st->tensors[i].name, specs[j].name);
            if (!known) {
                rc = sl_fail(SL_EINPUT, "%s: unexpected tensor '%s' for a %s model with this config", path,
                             m->st->tensors[i].name, arch);
                goto fail;
            }
        }
    }
    m->vectors = sl_malloc((n_vec_floats ? n_vec_floats : 1) * sizeof(float));
    if (!m->vectors) {
        rc = SL_EFAIL;
        goto fail;
    }
    float *vp = m->vectors;
    for (size_t i = 0; i < n_specs; i++) {
        const sl_st_tensor *t = sl_st_find(m->st, specs[i].name);
        if (specs[i].kind == K_MATRIX) {
            specs[i].wslot->w = t->data;
            specs[i].wslot->dt = t->dtype;
        } else {
            sl_kern_to_f32(vp, t->data, t->dtype, t->numel);
            *specs[i].vslot = vp;
            vp += t->numel;
        }
    }
    if (packing() && (rc = pack_matrices(m, specs, n_specs))) goto fail;
    if (c->tied_embeddings) m->lm_head = m->tok_emb;
    for (size_t i = 0; i < m->st->n_tensors; i++) {
        m->n_params += m->st->tensors[i].numel;
        m->bytes_by_dtype[m->st->tensors[i].dtype] += m->st->tensors[i].nbytes;
    }
    free(specs);
    *out = m;
    return SL_OK;
fail:
    free(specs);
    sl_model_close(m);
    return rc;
}

/* ---- context ---- */

void sl_model_ctx_free(sl_model_ctx *c)
{
    if (!c) return;
    sl_model_gpu_ctx_free(c);
    free(c->k_cache);
    free(c->v_cache);
    free(c->rope_cos);
    free(c->rope_sin);
    free(c->kn);
    free(c->vn);
    free(c->x);
    free(c->xn);
    free(c->q);
    free(c->att);
    free(c->proj);
    free(c->ff);
    free(c->scores);
    free(c->logits);
    free(c);
}

/* Whether a model whose matrices take matrix_bytes runs each forward block in one team (see
 * forward_block). A team costs a barrier per kernel or loop (~10 per layer); each is a fraction of
 * a microsecond while the threads spin, as they do under libgomp's default and OMP_WAIT_POLICY
 * active, but a futex wake-up under OMP_WAIT_POLICY passive. Below ~16 MiB a token's kernels are
 * too small to open regions of their own (sl_kern's 2^20 multiply-adds), so without a team such a
 * model runs on one thread. Measured on the 2-core Zen 5 VM (the shipped drafts' four steps after
 * each verification by the target, team and no team alternated, two threads;
 * tests/bench/results/draft_team_zen5/): the team took 0.58-0.65x the time of one thread for the
 * 0.47-8.5 MB drafts in one phase of the VM, 0.81-0.83x in a later one, spinning or by default,
 * and 5-19x under passive; make bench's figure (engine.family_draft.team_over_one_thread.t2,
 * the distilled draft) 0.97x [IQR 0.83, 1.10] in a noisy phase. Tiny models (a step of a
 * few microseconds: the tests' fixtures) keep one thread, where a barrier is not worth its risk: on
 * a busy machine it can wait a scheduler slice for a preempted thread. */
static int team_pays(size_t matrix_bytes)
{
    if (matrix_bytes >= ((size_t)16 << 20)) return 1;
    const char *w = getenv("OMP_WAIT_POLICY");
    if (w && strcasecmp(w, "passive") == 0) return 0;
    return matrix_bytes >= ((size_t)256 << 10);
}

int sl_model_ctx_alloc(const sl_model *m, size_t max_len, sl_model_ctx **out)
{
    *out = NULL;
    const sl_model_config *g = &m->cfg;
    if (max_len < 1 || max_len > g->max_seq_len)
        return sl_fail(SL_EINPUT, "context length %zu is outside [1, max_seq_len = %zu]", max_len, g->max_seq_len);
    sl_model_ctx *c = sl_calloc(1, sizeof *c);
    if (!c) return SL_EFAIL;
    const size_t B = SL_KERN_NMAX, d = g->d_model, qd = g->n_head * m->head_dim;
    c->m = m;
    c->max_len = max_len;
    size_t matrix_bytes = 0;
    for (size_t i = 0; i < m->st->n_tensors; i++)
        if (m->st->tensors[i].ndim == 2) matrix_bytes += m->st->tensors[i].nbytes;
    c->team = team_pays(matrix_bytes);
    int rc = sl_model_gpu_ctx_create(c);
    if (rc) {
        sl_model_ctx_free(c);
        return rc;
    }
    /* On a device the cache lives there; the host keeps the logits buffer of the sl_lm adapter. */
    const size_t cache = c->gpu ? 1 : g->n_layer * max_len * m->kv_dim;
    c->k_cache = sl_calloc(cache, sizeof(float));
    c->v_cache = sl_calloc(cache, sizeof(float));
    c->kn = sl_malloc_aligned(B * m->kv_dim * sizeof(float));
    c->vn = sl_malloc_aligned(B * m->kv_dim * sizeof(float));
    c->x = sl_malloc_aligned(B * d * sizeof(float));
    c->xn = sl_malloc_aligned(B * d * sizeof(float));
    c->q = sl_malloc_aligned(B * qd * sizeof(float));
    c->att = sl_malloc_aligned(B * qd * sizeof(float));
    c->proj = sl_malloc_aligned(B * d * sizeof(float));
    c->ff = sl_malloc_aligned(2 * B * g->d_ff * sizeof(float));
    c->scores = sl_malloc(B * g->n_head * max_len * sizeof(float));
    c->logits = sl_malloc_aligned(B * g->vocab_size * sizeof(float));
    int ok = c->k_cache && c->v_cache && c->kn && c->vn && c->x && c->xn && c->q && c->att && c->proj && c->ff &&
             c->scores && c->logits;
    if (ok && m->arch == SL_ARCH_LLAMA) {
        const size_t half = m->head_dim / 2;
        c->rope_cos = sl_malloc(max_len * half * sizeof(float));
        c->rope_sin = sl_malloc(max_len * half * sizeof(float));
        ok = c->rope_cos && c->rope_sin;
        /* Angles in double: pos * theta^(-2j/hd) loses digits in float32 at long positions. */
        for (size_t p = 0; ok && p < max_len; p++)
            for (size_t j = 0; j < half; j++) {
                double a = (double)p * pow(g->rope_theta, -2.0 * (double)j / (double)m->head_dim);
                c->rope_cos[p * half + j] = (float)cos(a);
                c->rope_sin[p * half + j] = (float)sin(a);
            }
    }
    if (!ok) {
        sl_model_ctx_free(c);
        return SL_EFAIL;
    }
    *out = c;
    return SL_OK;
}

int sl_model_truncate(sl_model_ctx *c, size_t len)
{
    if (len > c->len)
        return sl_fail(SL_EINPUT, "cannot truncate a sequence of %zu tokens to %zu", c->len, len);
    c->len = len; /* cache rows past len are overwritten before they are read again */
    return SL_OK;
}

/* ---- blocks ---- */

/* Rows normed side by side, at most. */
#define SL_NORM_ROWS 8

/* R <= SL_NORM_ROWS rows of x (R, d) -> y (R, d): LayerNorm (b != NULL) or RMSNorm (b == NULL), statistics
 * in double, each a sum over i in order. The R rows' sums run side by side: each is a chain of
 * dependent double additions (~4 cycles each), so one row at a time left the adder mostly idle.
 * Each row gets the same operations whatever R is: the same bits. */
static inline __attribute__((always_inline)) void norm_rows(float *y, const float *x, const float *w, const float *b,
                                                            size_t d, double eps, size_t R)
{
    double s[SL_NORM_ROWS] = {0}, mean[SL_NORM_ROWS] = {0}, inv[SL_NORM_ROWS];
    if (b) {
        for (size_t i = 0; i < d; i++) {
#pragma GCC unroll 8
            for (size_t t = 0; t < R; t++) mean[t] += x[t * d + i];
        }
        for (size_t t = 0; t < R; t++) mean[t] /= (double)d;
        for (size_t i = 0; i < d; i++) {
#pragma GCC unroll 8
            for (size_t t = 0; t < R; t++) s[t] += ((double)x[t * d + i] - mean[t]) * ((double)x[t * d + i] - mean[t]);
        }
        for (size_t t = 0; t < R; t++) inv[t] = 1.0 / sqrt(s[t] / (double)d + eps);
        for (size_t t = 0; t < R; t++)
#pragma omp simd
            for (size_t i = 0; i < d; i++)
                y[t * d + i] = (float)(((double)x[t * d + i] - mean[t]) * inv[t]) * w[i] + b[i];
    } else {
        for (size_t i = 0; i < d; i++) {
#pragma GCC unroll 8
            for (size_t t = 0; t < R; t++) s[t] += (double)x[t * d + i] * x[t * d + i];
        }
        for (size_t t = 0; t < R; t++) inv[t] = 1.0 / sqrt(s[t] / (double)d + eps);
        for (size_t t = 0; t < R; t++)
#pragma omp simd
            for (size_t i = 0; i < d; i++) y[t * d + i] = (float)(x[t * d + i] * inv[t]) * w[i];
    }
}

/* x (n, d) -> y (n, d), norm_rows over groups of up to SL_NORM_ROWS rows, the groups work-shared
 * among the team of the enclosing parallel region (an orphaned omp for, which ends in a barrier;
 * alone outside one). Ad hoc, the shipped target's t(5): the norms took 3% of it on one thread,
 * and on two the second thread waited while one thread normed every row; with groups of at most
 * four, one thread normed five rows as two chains of additions one after the other. */
static void norm(float *y, const float *x, const float *w, const float *b, size_t n, size_t d, double eps)
{
    const size_t team = (size_t)omp_get_num_threads(), per_thread = (n + team - 1) / team;
    const size_t per = per_thread < SL_NORM_ROWS ? per_thread : SL_NORM_ROWS;
    const long groups = (long)((n + per - 1) / per);
#pragma omp for schedule(static)
    for (long gi = 0; gi < groups; gi++) {
        const size_t t0 = (size_t)gi * per, R = n - t0 < per ? n - t0 : per;
        float *yt = y + t0 * d;
        const float *xt = x + t0 * d;
        switch (R) {
        case 1: norm_rows(yt, xt, w, b, d, eps, 1); break;
        case 2: norm_rows(yt, xt, w, b, d, eps, 2); break;
        case 3: norm_rows(yt, xt, w, b, d, eps, 3); break;
        case 4: norm_rows(yt, xt, w, b, d, eps, 4); break;
        case 5: norm_rows(yt, xt, w, b, d, eps, 5); break;
        case 6: norm_rows(yt, xt, w, b, d, eps, 6); break;
        case 7: norm_rows(yt, xt, w, b, d, eps, 7); break;
        default: norm_rows(yt, xt, w, b, d, eps, 8); break;
        }
    }
}

/* x (n, d) rows: x[t] = e[token] (+ p[pos + t]). */
static void embed(sl_model_ctx *c, const int32_t *tokens, size_t n, size_t pos)
{
    const sl_model *m = c->m;
    const size_t d = m->cfg.d_model;
    const sl_model_w *e = &m->tok_emb;
    for (size_t t = 0; t < n; t++)
        sl_kern_row_to_f32(c->x + t * d, e->pk ? e->pk : e->w, e->pk != NULL, e->dt, m->cfg.vocab_size, d,
                           (size_t)tokens[t]);
    if (m->arch == SL_ARCH_GPT2) {
        const size_t ps = sl_dtype_size(m->pos_emb.dt);
        for (size_t t = 0; t < n; t++) {
            sl_kern_to_f32(c->proj, (const char *)m->pos_emb.w + (pos + t) * d * ps, m->pos_emb.dt, d);
            for (size_t i = 0; i < d; i++) c->x[t * d + i] += c->proj[i];
        }
    }
}

/* Rotates adjacent pairs (2j, 2j+1) of each head of v (n_heads * hd) at position pos. */
static void rope(const sl_model_ctx *c, float *v, size_t n_heads, size_t pos)
{
    const size_t hd = c->m->head_dim, half = hd / 2;
    const float *cs = c->rope_cos + pos * half, *sn = c->rope_sin + pos * half;
    for (size_t h = 0; h < n_heads; h++) {
        float *vh = v + h * hd;
        for (size_t j = 0; j < half; j++) {
            const float a = vh[2 * j], b = vh[2 * j + 1];
            vh[2 * j] = a * cs[j] - b * sn[j];
            vh[2 * j + 1] = a * sn[j] + b * cs[j];
        }
    }
}

/* Keys per tile of the attention below: a tile's keys and values (64 keys x head_dim floats) stay
 * in L1 while every token of the job uses them. */
#define SL_ATT_TILE 64
/* Tokens per attention job. */
#define SL_ATT_TOKENS 8

/* Softmax of the scores of T tokens (rows s[i], token i with common + i keys): the maximum,
 * s[i][j] = expf(s[i][j] - max) (to the bit), the sum in double, in order j, and the weights
 * s[i][j] / sum. The maxima and sums are chains of dependent operations; over the keys every token
 * has (j < common), the T chains run side by side, each in its own order, so each row gets the
 * operations it would alone. T is a literal in each use (see softmax_rows). */
static inline __attribute__((always_inline)) void softmax_group(float *const *s, size_t common, size_t T)
{
    float mx[SL_ATT_TOKENS];
    double sum[SL_ATT_TOKENS];
    for (size_t i = 0; i < T; i++) mx[i] = -INFINITY, sum[i] = 0;
    for (size_t j = 0; j < common; j++) {
#pragma GCC unroll 8
        for (size_t i = 0; i < T; i++)
            if (s[i][j] > mx[i]) mx[i] = s[i][j];
    }
    for (size_t i = 0; i < T; i++) {
        float *st = s[i], m = mx[i];
        const size_t len = common + i;
        for (size_t j = common; j < len; j++)
            if (st[j] > m) m = st[j];
        sl_kern_exp_shifted(st, len, m);
    }
    for (size_t j = 0; j < common; j++) {
#pragma GCC unroll 8
        for (size_t i = 0; i < T; i++) sum[i] += s[i][j];
    }
    for (size_t i = 0; i < T; i++) {
        float *st = s[i];
        const size_t len = common + i;
        double z = sum[i];
        for (size_t j = common; j < len; j++) z += st[j];
        const float inv = (float)(1.0 / z);
        for (size_t j = 0; j < len; j++) st[j] *= inv;
    }
}

static void softmax_rows(float *const *s, size_t common, size_t T)
{
    switch (T) {
    case 1: softmax_group(s, common, 1); break;
    case 2: softmax_group(s, common, 2); break;
    case 3: softmax_group(s, common, 3); break;
    case 4: softmax_group(s, common, 4); break;
    case 5: softmax_group(s, common, 5); break;
    case 6: softmax_group(s, common, 6); break;
    case 7: softmax_group(s, common, 7); break;
    default: softmax_group(s, common, 8); break;
    }
}

/* One job of the attention below: head h for tokens t0 .. t1 - 1 (job = g * n_head + h, token group
 * g of SL_ATT_TOKENS). Scores and outputs go tile by tile over the keys, every token of the group
 * using a tile while it is in L1; each (token, head) still gets its scores, softmax and weighted
 * sum with the same operations in the same order (the key loops are sl_kern_dot and sl_kern_axpy
 * key by key, bit for bit), so neither the tiling nor the grouping changes a bit. */
static void attention_job(sl_model_ctx *c, const float *K, const float *V, long job, size_t n, size_t pos, float scale)
{
    const sl_model *m = c->m;
    const size_t H = m->cfg.n_head, hd = m->head_dim, group = H / m->cfg.n_kv_head;
    const size_t qd = H * hd;
    const size_t h = (size_t)job % H, kvh = h / group, t0 = (size_t)job / H * SL_ATT_TOKENS;
    const size_t t1 = t0 + SL_ATT_TOKENS < n ? t0 + SL_ATT_TOKENS : n;
    const float *Kh = K + kvh * c->max_len * hd, *Vh = V + kvh * c->max_len * hd; /* (max_len, hd) */
    float *s[SL_ATT_TOKENS];
    for (size_t t = t0; t < t1; t++) s[t - t0] = c->scores + (t * H + h) * c->max_len;
    const size_t len_max = pos + t1; /* keys of the group's last token */
    for (size_t j0 = 0; j0 < len_max; j0 += SL_ATT_TILE)
        for (size_t t = t0; t < t1; t++) {
            const size_t len = pos + t + 1, j1 = j0 + SL_ATT_TILE < len ? j0 + SL_ATT_TILE : len;
            if (j0 < j1) sl_kern_dots(s[t - t0] + j0, c->q + t * qd + h * hd, Kh + j0 * hd, hd, j1 - j0, hd, scale);
        }
    softmax_rows(s, pos + t0 + 1, t1 - t0); /* the group's first token has pos + t0 + 1 keys */
    for (size_t j0 = 0; j0 < len_max; j0 += SL_ATT_TILE)
        for (size_t t = t0; t < t1; t++) {
            const size_t len = pos + t + 1, j1 = j0 + SL_ATT_TILE < len ? j0 + SL_ATT_TILE : len;
            if (j0 < j1)
                sl_kern_axpy_rows(c->att + t * qd + h * hd, s[t - t0] + j0, Vh + j0 * hd, hd, j1 - j0, hd, j0 > 0);
        }
}

/* The block's new keys and values (c->kn, c->vn: (n, kv_dim)) into the cache of layer l at
 * positions pos.., one kv head per iteration (work-shared among the team; an orphaned omp for).
 * The cache keeps each head's positions contiguous, so that the attention reads one stream of
 * head_dim floats per position: with the positions of all heads interleaved (rows of kv_dim), each
 * head read 256 bytes every 2 KiB of the shipped target's cache. */
static void cache_store(sl_model_ctx *c, size_t l, size_t n, size_t pos)
{
    const sl_model *m = c->m;
    const size_t Hkv = m->cfg.n_kv_head, hd = m->head_dim, kvd = m->kv_dim;
#pragma omp for schedule(static)
    for (long h = 0; h < (long)Hkv; h++) {
        const size_t at = ((l * Hkv + (size_t)h) * c->max_len + pos) * hd;
        for (size_t t = 0; t < n; t++) {
            memcpy(c->k_cache + at + t * hd, c->kn + t * kvd + (size_t)h * hd, hd * sizeof(float));
            memcpy(c->v_cache + at + t * hd, c->vn + t * kvd + (size_t)h * hd, hd * sizeof(float));
        }
    }
}

/* Causal attention of n new tokens at positions pos.. against the cache of layer l (which already
 * holds their keys and values). Jobs are (head, group of tokens), each computed by one thread in a
 * fixed order. */
static void attention(sl_model_ctx *c, size_t l, size_t n, size_t pos)
{
    const sl_model *m = c->m;
    const size_t H = m->cfg.n_head, hd = m->head_dim, kvd = m->kv_dim;
    const float scale = 1.0f / sqrtf((float)hd);
    const float *K = c->k_cache + l * c->max_len * kvd, *V = c->v_cache + l * c->max_len * kvd; /* kvd = heads x hd */
    const long jobs = (long)(((n + SL_ATT_TOKENS - 1) / SL_ATT_TOKENS) * H);
    if (omp_in_parallel()) {
#pragma omp for schedule(static)
        for (long job = 0; job < jobs; job++) attention_job(c, K, V, job, n, pos, scale);
    } else {
#pragma omp parallel for schedule(static) if ((long)(n * H) * (long)(pos + n) * (long)hd > (1L << 18))
        for (long job = 0; job < jobs; job++) attention_job(c, K, V, job, n, pos, scale);
    }
}


/* Elementwise activations over the rows of f1 (n, d_ff): GELU (gpt2) or silu(f2) * f1 (llama),
 * in chunks of 512 elements of one row (the chunks start at multiples of 8, so an element goes
 * through the same vector lane whatever n is). Threaded: even vectorised, the activations of a
 * 16-token block are a visible share of its time. */
#define SL_ACT_CHUNK 512
static void activation_unit(float *f1, const float *f2, size_t ff, long u, int gpt2)
{
    const size_t per_row = (ff + SL_ACT_CHUNK - 1) / SL_ACT_CHUNK;
    const size_t t = (size_t)u / per_row, j0 = ((size_t)u % per_row) * SL_ACT_CHUNK;
    const size_t len = ff - j0 < SL_ACT_CHUNK ? ff - j0 : SL_ACT_CHUNK;
    if (gpt2) sl_kern_gelu(f1 + t * ff + j0, len);
    else sl_kern_silu_mul(f1 + t * ff + j0, f2 + t * ff + j0, len);
}

static void activation(float *f1, const float *f2, size_t n, size_t ff, int gpt2)
{
    const long units = (long)(n * ((ff + SL_ACT_CHUNK - 1) / SL_ACT_CHUNK));
    if (omp_in_parallel()) {
#pragma omp for schedule(static)
        for (long u = 0; u < units; u++) activation_unit(f1, f2, ff, u, gpt2);
    } else {
#pragma omp parallel for schedule(static) if (n * ff >= (1u << 16))
        for (long u = 0; u < units; u++) activation_unit(f1, f2, ff, u, gpt2);
    }
}

sl_kern_mm sl_model_mm(float *y, const sl_model_w *W, const float *bias, size_t out, int add)
{
    return (sl_kern_mm){y, W->pk ? W->pk : W->w, W->dt, bias, out, add, W->pk != NULL, NULL};
}

/* sl_model_mm sharing its units with stealing among the context's team when it runs one (see
 * sl_kern_team). */
static sl_kern_mm ctx_mm(sl_model_ctx *c, float *y, const sl_model_w *W, const float *bias, size_t out, int add)
{
    sl_kern_mm k = sl_model_mm(y, W, bias, out, add);
    k.team = c->team ? &c->steal : NULL;
    return k;
}

/* The layers of one block (see forward_block), run by every thread of the team when there is one
 * (the kernels and loops work-share, orphaned; the short serial steps run in `omp single`), or
 * by the caller alone outside any region. */
static void block_layers(sl_model_ctx *c, const int32_t *tokens, size_t n, size_t r0, float *logits)
{
    const sl_model *m = c->m;
    const sl_model_config *g = &m->cfg;
    const size_t d = g->d_model, qd = g->n_head * m->head_dim, kvd = m->kv_dim, ff = g->d_ff;
    const size_t pos = c->len;
    const int gpt2 = m->arch == SL_ARCH_GPT2;
    float *f1 = c->ff, *f2 = c->ff + n * ff;
#pragma omp single
    {
        if (c->team) sl_kern_team_reset(&c->steal, omp_get_num_threads());
        embed(c, tokens, n, pos);
    }
    for (size_t l = 0; l < g->n_layer; l++) {
        const sl_model_layer *L = &m->layers[l];
        float *kn = c->kn, *vn = c->vn;
        norm(c->xn, c->x, L->attn_norm_w, L->attn_norm_b, n, d, g->norm_eps);
        const sl_kern_mm qkv[3] = {ctx_mm(c, c->q, &L->q, L->bq, qd, 0), ctx_mm(c, kn, &L->k, L->bk, kvd, 0),
                                   ctx_mm(c, vn, &L->v, L->bv, kvd, 0)};
        sl_kern_matmul_multi(qkv, 3, c->xn, n, d);
        if (!gpt2) {
#pragma omp single
            for (size_t t = 0; t < n; t++) {
                rope(c, c->q + t * qd, g->n_head, pos + t);
                rope(c, kn + t * kvd, g->n_kv_head, pos + t);
            }
        }
        cache_store(c, l, n, pos);
        attention(c, l, n, pos);
        const sl_kern_mm o_res = ctx_mm(c, c->x, &L->o, L->bo, d, 1); /* x += attention projection */
        sl_kern_matmul_multi(&o_res, 1, c->att, n, qd);
        norm(c->xn, c->x, L->mlp_norm_w, L->mlp_norm_b, n, d, g->norm_eps);
        const sl_kern_mm gu[2] = {ctx_mm(c, f1, &L->up, L->bup, ff, 0), ctx_mm(c, f2, &L->gate, NULL, ff, 0)};
        sl_kern_matmul_multi(gu, gpt2 ? 1 : 2, c->xn, n, d);
        activation(f1, f2, n, ff, gpt2);
        const sl_kern_mm down_res = ctx_mm(c, c->x, &L->down, L->bdown, d, 1); /* x += MLP output */
        sl_kern_matmul_multi(&down_res, 1, f1, n, ff);
    }
    if (r0 < n) {
        norm(c->xn, c->x + r0 * d, m->final_norm_w, m->final_norm_b, n - r0, d, g->norm_eps);
        const sl_kern_mm head = ctx_mm(c, logits, &m->lm_head, NULL, g->vocab_size, 0);
        sl_kern_matmul_multi(&head, 1, c->xn, n - r0, d);
    }
}

/* One block of n <= SL_KERN_NMAX tokens at positions pos..; logits (n - r0, vocab) of rows r0..n-1
 * (the unembedding, the largest matrix, is skipped for rows nobody asked for).
 *
 * With c->team the whole block runs in one OpenMP team, so a token costs barriers instead of ~75
 * fork/joins. Without it the block runs outside any region and each large kernel call opens its
 * own. (Not inside a region of one thread, `omp parallel if (0)`, unless a caller's team is
 * running: a kernel's region nested in it is a nested team, whose threads libgomp creates and
 * joins at every call; on the 2-core Zen 5 VM a draft of 8.6 MB with one such call per step took
 * 3-4 ms per step at two threads instead of 0.15 ms on one, and GPT-2-774M on the accelerator
 * machine's 16 cores 743 ms per token instead of 21; tests/bench/results/draft_team_zen5/.) The
 * results are the same bits either way. */
static void forward_block(sl_model_ctx *c, const int32_t *tokens, size_t n, size_t r0, float *logits)
{
    if (c->team) {
#pragma omp parallel
        block_layers(c, tokens, n, r0, logits);
    } else if (omp_in_parallel()) {
        /* On a thread of the caller's team (verify's workers, each with a context of its own): a
         * region of one thread of our own, for the orphaned constructs to bind to, not the
         * caller's team. */
#pragma omp parallel num_threads(1)
        block_layers(c, tokens, n, r0, logits);
    } else {
        block_layers(c, tokens, n, r0, logits);
    }
    c->len += n;
}

int sl_model_check_tokens(const sl_model *m, const int32_t *tokens, size_t n)
{
    const size_t V = m->cfg.vocab_size;
    for (size_t i = 0; i < n; i++)
        if (tokens[i] < 0 || (size_t)tokens[i] >= V)
            return sl_fail(SL_EINPUT, "token id %ld at position %zu is outside [0, %zu)", (long)tokens[i], i, V);
    return SL_OK;
}

int sl_model_forward(sl_model_ctx *c, const int32_t *tokens, size_t n, float *logits)
{
    return sl_model_forward_last(c, tokens, n, n, logits);
}

int sl_model_forward_last(sl_model_ctx *c, const int32_t *tokens, size_t n, size_t n_rows, float *logits)
{
    const size_t V = c->m->cfg.vocab_size;
    if (n_rows > n) return sl_fail(SL_EINPUT, "asked for logits of %zu rows of %zu tokens", n_rows, n);
    if (c->len + n > c->max_len)
        return sl_fail(SL_EINPUT, "sequence of %zu tokens (%zu cached + %zu new) exceeds the context of %zu tokens",
                       c->len + n, c->len, n, c->max_len);
    int rc = sl_model_check_tokens(c->m, tokens, n);
    if (rc) return rc;
    const size_t first = n - n_rows; /* first token whose logits are wanted */
    for (size_t i = 0; i < n; i += SL_KERN_NMAX) {
        const size_t nb = n - i < SL_KERN_NMAX ? n - i : SL_KERN_NMAX;
        const size_t r0 = first <= i ? 0 : first - i < nb ? first - i : nb;
        if (c->gpu) {
            if ((rc = sl_model_gpu_forward(c, tokens + i, nb, nb - r0, r0 < nb ? logits + (i + r0 - first) * V : logits)))
                return rc;
            continue;
        }
        forward_block(c, tokens + i, nb, r0, r0 < nb ? logits + (i + r0 - first) * V : logits);
    }
    return SL_OK;
}

/* ---- random initialisation ---- */

int sl_model_init_write(const char *path, sl_arch arch, const sl_model_config *cfg, uint64_t seed, sl_dtype dt,
                        double init_std, const char *tokenizer_json)
{
    size_t n = tensor_table(arch, cfg, NULL, NULL);
    tspec *specs = sl_malloc(n * sizeof *specs);
    sl_st_wtensor *wt = sl_calloc(n, sizeof *wt);
    void **bufs = sl_calloc(n, sizeof *bufs);
    char *cfg_json = sl_model_config_json(cfg, arch);
    gsl_rng *r = sl_rng_alloc(seed, SL_STREAM_DATA, 0);
    float *tmp = NULL;
    int rc = SL_OK;
    if (!specs || !wt || !bufs || !cfg_json || !r) {
        rc = SL_EFAIL;
        goto done;
    }
    tensor_table(arch, cfg, NULL, specs);
    size_t max_numel = 0;
    for (size_t i = 0; i < n; i++) {
        size_t numel = (size_t)specs[i].shape[0] * (specs[i].ndim == 2 ? (size_t)specs[i].shape[1] : 1);
        if (numel > max_numel) max_numel = numel;
    }
    tmp = sl_malloc(max_numel * sizeof(float));
    if (!tmp) {
        rc = SL_EFAIL;
        goto done;
    }
    for (size_t i = 0; i < n; i++) {
        const tspec *s = &specs[i];
        size_t numel = (size_t)s->shape[0] * (s->ndim == 2 ? (size_t)s->shape[1] : 1);
        /* Vectors stay float32 whatever dt: they are tiny and converted at load anyway. */
        sl_dtype tdt = s->kind == K_MATRIX ? dt : SL_DT_F32;
        bufs[i] = sl_malloc(numel * sl_dtype_size(tdt));
        if (!bufs[i]) {
            rc = SL_EFAIL;
            goto done;
        }
        sl_rng_reseed(r, seed, SL_STREAM_DATA, i);
        for (size_t k = 0; k < numel; k++) {
            double z = gsl_ran_gaussian_ziggurat(r, 1.0);
            tmp[k] = (float)(s->kind == K_NORM ? 1.0 + 0.1 * z : init_std * z);
        }
        sl_kern_from_f32(bufs[i], tmp, tdt, numel);
        wt[i].name = s->name;
        wt[i].dtype = tdt;
        wt[i].ndim = s->ndim;
        wt[i].shape[0] = s->shape[0];
        wt[i].shape[1] = s->shape[1];
        wt[i].data = bufs[i];
    }
    char training[160];
    snprintf(training, sizeof training, "{\"init\": \"random normal\", \"seed\": %llu, \"init_std\": %g}",
             (unsigned long long)seed, init_std);
    const char *keys[] = {"format", "format_version", "arch", "config", "training", "tokenizer"};
    const char *vals[] = {"speclab-model", "1", sl_arch_name(arch), cfg_json, training, tokenizer_json};
    rc = sl_st_write(path, wt, n, keys, vals, tokenizer_json ? 6 : 5);
done:
    if (bufs)
        for (size_t i = 0; i < n; i++) free(bufs[i]);
    free(bufs);
    free(wt);
    free(specs);
    free(cfg_json);
    free(tmp);
    if (r) gsl_rng_free(r);
    return rc;
}
