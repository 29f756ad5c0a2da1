/* sl_gguf.c: the GGUF container reader and ggml's dequantisers. See sl_gguf.h. */
#include "sl_gguf.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sl_common.h"
#include "sl_half.h"

/* ---- types ---- */

typedef struct {
    uint32_t type;
    const char *name;
    size_t elems, bytes; /* per block */
} type_info;

static const type_info TYPES[] = {
    {SL_GGML_F32, "F32", 1, 4},      {SL_GGML_F16, "F16", 1, 2},       {SL_GGML_Q4_0, "Q4_0", 32, 18},
    {SL_GGML_Q8_0, "Q8_0", 32, 34},  {SL_GGML_Q4_K, "Q4_K", 256, 144}, {SL_GGML_Q6_K, "Q6_K", 256, 210},
    {SL_GGML_BF16, "BF16", 1, 2},
};

/* Names of ggml's other types, for messages only (ggml.h's enum ggml_type). */
static const char *const OTHER_NAMES[] = {
    [3] = "Q4_1",     [6] = "Q5_0",     [7] = "Q5_1",    [9] = "Q8_1",   [10] = "Q2_K",  [11] = "Q3_K",
    [13] = "Q5_K",    [15] = "Q8_K",    [16] = "IQ2_XXS", [17] = "IQ2_XS", [18] = "IQ3_XXS", [19] = "IQ1_S",
    [20] = "IQ4_NL",  [21] = "IQ3_S",   [22] = "IQ2_S",  [23] = "IQ4_XS", [24] = "I8",    [25] = "I16",
    [26] = "I32",     [27] = "I64",     [28] = "F64",    [29] = "IQ1_M",
};

static const type_info *find_type(uint32_t t)
{
    for (size_t i = 0; i < sizeof TYPES / sizeof TYPES[0]; i++)
        if (TYPES[i].type == t) return &TYPES[i];
    return NULL;
}

const char *sl_ggml_type_name(uint32_t type)
{
    const type_info *ti = find_type(type);
    if (ti) return ti->name;
    if (type < sizeof OTHER_NAMES / sizeof OTHER_NAMES[0] && OTHER_NAMES[type]) return OTHER_NAMES[type];
    return "?";
}

size_t sl_ggml_block_elems(uint32_t type)
{
    const type_info *ti = find_type(type);
    return ti ? ti->elems : 0;
}

size_t sl_ggml_block_bytes(uint32_t type)
{
    const type_info *ti = find_type(type);
    return ti ? ti->bytes : 0;
}

/* ---- little-endian reads ---- */

static uint16_t rd16(const unsigned char *p) { return (uint16_t)(p[0] | p[1] << 8); }
static uint32_t rd32(const unsigned char *p) { return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24; }
static uint64_t rd64(const unsigned char *p) { return (uint64_t)rd32(p) | (uint64_t)rd32(p + 4) << 32; }

/* Bytes of a fixed-size value type; 0 for strings, arrays and unknown types. */
static size_t scalar_size(uint32_t t)
{
    switch (t) {
    case SL_GGUF_U8: case SL_GGUF_I8: case SL_GGUF_BOOL: return 1;
    case SL_GGUF_U16: case SL_GGUF_I16: return 2;
    case SL_GGUF_U32: case SL_GGUF_I32: case SL_GGUF_F32: return 4;
    case SL_GGUF_U64: case SL_GGUF_I64: case SL_GGUF_F64: return 8;
    default: return 0;
    }
}

/* ---- parsing ---- */

typedef struct {
    const char *path;
    const unsigned char *buf;
    size_t size, pos;
} cursor;

static int need(cursor *c, size_t n, const char *what)
{
    if (n > c->size - c->pos)
        return sl_fail(SL_EINPUT, "%s: truncated GGUF file: %s runs past the end (at byte %zu of %zu)", c->path, what,
                       c->pos, c->size);
    return SL_OK;
}

static int get_u32(cursor *c, uint32_t *v, const char *what)
{
    if (need(c, 4, what)) return SL_EINPUT;
    *v = rd32(c->buf + c->pos);
    c->pos += 4;
    return SL_OK;
}

static int get_u64(cursor *c, uint64_t *v, const char *what)
{
    if (need(c, 8, what)) return SL_EINPUT;
    *v = rd64(c->buf + c->pos);
    c->pos += 8;
    return SL_OK;
}

/* A GGUF string: its bytes stay in the buffer. */
static int get_str(cursor *c, const unsigned char **s, uint64_t *len, const char *what)
{
    if (get_u64(c, len, what)) return SL_EINPUT;
    if (*len > c->size - c->pos)
        return sl_fail(SL_EINPUT, "%s: %s: a string of %llu bytes runs past the end of the file", c->path, what,
                       (unsigned long long)*len);
    *s = c->buf + c->pos;
    c->pos += (size_t)*len;
    return SL_OK;
}

/* Skips one value of type t, checking that it lies in the buffer; arrays nest at most 8 deep. */
static int skip_value(cursor *c, uint32_t t, int depth, const char *key)
{
    size_t sz = scalar_size(t);
    if (sz) return need(c, sz, key) ? SL_EINPUT : (c->pos += sz, SL_OK);
    if (t == SL_GGUF_STR) {
        const unsigned char *s;
        uint64_t len;
        return get_str(c, &s, &len, key);
    }
    if (t != SL_GGUF_ARR) return sl_fail(SL_EINPUT, "%s: key '%s': unknown value type %u", c->path, key, t);
    if (depth >= 8) return sl_fail(SL_EINPUT, "%s: key '%s': arrays nested more than 8 deep", c->path, key);
    uint32_t et;
    uint64_t n;
    if (get_u32(c, &et, key) || get_u64(c, &n, key)) return SL_EINPUT;
    size_t esz = scalar_size(et);
    if (esz) {
        if (n > (c->size - c->pos) / esz)
            return sl_fail(SL_EINPUT, "%s: key '%s': an array of %llu elements runs past the end of the file", c->path,
                           key, (unsigned long long)n);
        c->pos += (size_t)n * esz;
        return SL_OK;
    }
    if (et != SL_GGUF_STR && et != SL_GGUF_ARR)
        return sl_fail(SL_EINPUT, "%s: key '%s': unknown array element type %u", c->path, key, et);
    /* Strings and arrays take at least 8 bytes each: a count the bytes left cannot hold is refused
     * before the loop runs. */
    if (n > (c->size - c->pos) / 8)
        return sl_fail(SL_EINPUT, "%s: key '%s': an array of %llu elements runs past the end of the file", c->path, key,
                       (unsigned long long)n);
    for (uint64_t i = 0; i < n; i++)
        if (skip_value(c, et, depth + 1, key)) return SL_EINPUT;
    return SL_OK;
}

static char *copy_name(const unsigned char *s, uint64_t len)
{
    char *r = sl_malloc((size_t)len + 1);
    if (!r) return NULL;
    memcpy(r, s, (size_t)len);
    r[len] = 0;
    return r;
}

static int cmp_str_ptr(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static int cmp_by_offset(const void *a, const void *b)
{
    const sl_gguf_tensor *x = *(const sl_gguf_tensor *const *)a, *y = *(const sl_gguf_tensor *const *)b;
    return x->offset < y->offset ? -1 : x->offset > y->offset;
}

/* Reports the first name that appears twice among n names (sorted copies of the pointers). */
static int check_unique(const char *path, char **names, size_t n, const char *what)
{
    if (n < 2) return SL_OK;
    char **s = sl_malloc(n * sizeof *s);
    if (!s) return SL_EFAIL;
    memcpy(s, names, n * sizeof *s);
    qsort(s, n, sizeof *s, cmp_str_ptr);
    int rc = SL_OK;
    for (size_t i = 1; i < n && !rc; i++)
        if (!strcmp(s[i - 1], s[i])) rc = sl_fail(SL_EINPUT, "%s: %s '%s' appears twice", path, what, s[i]);
    free(s);
    return rc;
}

void sl_gguf_free(sl_gguf *g)
{
    if (!g) return;
    for (size_t i = 0; i < g->n_kv; i++) free(g->kv[i].key);
    for (size_t i = 0; i < g->n_tensors; i++) free(g->tensors[i].name);
    free(g->kv);
    free(g->tensors);
    free(g);
}

static int parse_kvs(cursor *c, sl_gguf *g, uint64_t n_kv)
{
    for (uint64_t i = 0; i < n_kv; i++) {
        const unsigned char *ks;
        uint64_t klen;
        if (get_str(c, &ks, &klen, "a key's name")) return SL_EINPUT;
        if (klen == 0 || klen > 65535 || memchr(ks, 0, (size_t)klen))
            return sl_fail(SL_EINPUT, "%s: key %llu: a name of %llu bytes (expected 1..65535 without NUL bytes)", c->path,
                           (unsigned long long)i, (unsigned long long)klen);
        sl_gguf_kv *kv = &g->kv[g->n_kv];
        if (!(kv->key = copy_name(ks, klen))) return SL_EFAIL;
        g->n_kv++;
        if (get_u32(c, &kv->type, kv->key)) return SL_EINPUT;
        size_t start = c->pos;
        if (kv->type == SL_GGUF_STR) {
            const unsigned char *s;
            if (get_str(c, &s, &kv->n, kv->key)) return SL_EINPUT;
            kv->data = s;
            continue;
        }
        if (kv->type == SL_GGUF_ARR) {
            if (need(c, 12, kv->key)) return SL_EINPUT;
            kv->arr_type = rd32(c->buf + c->pos);
            kv->n = rd64(c->buf + c->pos + 4);
            kv->data = c->buf + c->pos + 12;
        } else {
            kv->n = 1;
            kv->data = c->buf + start;
        }
        if (skip_value(c, kv->type, 0, kv->key)) return SL_EINPUT;
    }
    return SL_OK;
}

static int parse_tensor_info(cursor *c, sl_gguf *g, uint64_t i)
{
    const unsigned char *ns;
    uint64_t nlen;
    if (get_str(c, &ns, &nlen, "a tensor's name")) return SL_EINPUT;
    if (nlen == 0 || nlen > SL_GGUF_MAX_NAME || memchr(ns, 0, (size_t)nlen))
        return sl_fail(SL_EINPUT, "%s: tensor %llu: a name of %llu bytes (expected 1..%d without NUL bytes)", c->path,
                       (unsigned long long)i, (unsigned long long)nlen, SL_GGUF_MAX_NAME);
    sl_gguf_tensor *t = &g->tensors[g->n_tensors];
    if (!(t->name = copy_name(ns, nlen))) return SL_EFAIL;
    g->n_tensors++;
    uint32_t nd;
    if (get_u32(c, &nd, t->name)) return SL_EINPUT;
    if (nd < 1 || nd > SL_GGUF_MAX_DIMS)
        return sl_fail(SL_EINPUT, "%s: tensor '%s' has %u dimensions (expected 1 to %d)", c->path, t->name, nd,
                       SL_GGUF_MAX_DIMS);
    t->n_dims = (int)nd;
    t->numel = 1;
    for (int d = 0; d < SL_GGUF_MAX_DIMS; d++) t->ne[d] = 1;
    for (uint32_t d = 0; d < nd; d++) {
        if (get_u64(c, &t->ne[d], t->name)) return SL_EINPUT;
        if (t->ne[d] > INT64_MAX || (t->ne[d] && t->numel > INT64_MAX / t->ne[d]))
            return sl_fail(SL_EINPUT, "%s: tensor '%s': its element count overflows", c->path, t->name);
        t->numel *= t->ne[d];
    }
    if (get_u32(c, &t->type, t->name) || get_u64(c, &t->offset, t->name)) return SL_EINPUT;
    const type_info *ti = find_type(t->type);
    if (!ti)
        return sl_fail(SL_EINPUT, "%s: tensor '%s' has ggml type %u (%s), which speclab does not read (F32, F16, BF16, "
                       "Q8_0, Q4_0, Q4_K, Q6_K)", c->path, t->name, t->type, sl_ggml_type_name(t->type));
    if (t->ne[0] % ti->elems)
        return sl_fail(SL_EINPUT, "%s: tensor '%s': its rows of %llu elements are not a whole number of %s blocks "
                       "(%zu elements)", c->path, t->name, (unsigned long long)t->ne[0], ti->name, ti->elems);
    uint64_t blocks = t->numel / ti->elems;
    if (blocks > (uint64_t)SIZE_MAX / ti->bytes || blocks * ti->bytes > c->size)
        return sl_fail(SL_EINPUT, "%s: tensor '%s' claims more bytes than the file holds", c->path, t->name);
    t->nbytes = (size_t)(blocks * ti->bytes);
    return SL_OK;
}

int sl_gguf_parse(const void *buf, size_t size, const char *path, sl_gguf **out)
{
    *out = NULL;
    cursor c = {path, buf, size, 0};
    if (size < 4 || memcmp(buf, "GGUF", 4)) return sl_fail(SL_EINPUT, "%s: not a GGUF file (no \"GGUF\" magic)", path);
    c.pos = 4;
    uint32_t version;
    uint64_t n_tensors, n_kv;
    if (get_u32(&c, &version, "the version")) return SL_EINPUT;
    if (version == 0x02000000u || version == 0x03000000u)
        return sl_fail(SL_EINPUT, "%s: a big-endian GGUF file (speclab reads little-endian ones)", path);
    if (version != 2 && version != 3)
        return sl_fail(SL_EINPUT, "%s: GGUF version %u (speclab reads versions 2 and 3%s)", path, version,
                       version == 1 ? "; version 1 is obsolete: convert it with llama.cpp" : "");
    if (get_u64(&c, &n_tensors, "the tensor count") || get_u64(&c, &n_kv, "the key/value count")) return SL_EINPUT;
    /* A key/value takes at least 13 bytes (8 length, 4 type, 1 value), a tensor info at least 32
     * (8 length, 4 n_dims, 8 ne[0], 4 type, 8 offset): counts the file cannot hold are refused
     * before allocating anything. */
    size_t left = size - c.pos;
    if (n_kv > left / 13 || n_tensors > left / 32 || n_kv * 13 + n_tensors * 32 > left)
        return sl_fail(SL_EINPUT, "%s: GGUF header claims %llu tensors and %llu keys, more than its %zu bytes can hold",
                       path, (unsigned long long)n_tensors, (unsigned long long)n_kv, size);
    sl_gguf *g = sl_calloc(1, sizeof *g);
    if (!g) return SL_EFAIL;
    g->path = path;
    g->buf = buf;
    g->size = size;
    g->version = version;
    g->kv = sl_calloc(n_kv ? (size_t)n_kv : 1, sizeof *g->kv);
    g->tensors = sl_calloc(n_tensors ? (size_t)n_tensors : 1, sizeof *g->tensors);
    sl_gguf_tensor **by_off = NULL;
    char **names = NULL;
    int rc = SL_OK;
    if (!g->kv || !g->tensors) {
        rc = SL_EFAIL;
        goto fail;
    }
    if ((rc = parse_kvs(&c, g, n_kv))) goto fail;
    names = sl_malloc((g->n_kv > n_tensors ? g->n_kv : (size_t)n_tensors) * sizeof *names + 1);
    if (!names) {
        rc = SL_EFAIL;
        goto fail;
    }
    for (size_t i = 0; i < g->n_kv; i++) names[i] = g->kv[i].key;
    if ((rc = check_unique(path, names, g->n_kv, "key"))) goto fail;

    g->alignment = 32;
    const sl_gguf_kv *al = sl_gguf_find_kv(g, "general.alignment");
    if (al) {
        uint64_t a;
        if ((rc = sl_gguf_get_uint(g, "general.alignment", UINT32_MAX, &a))) goto fail;
        if (a == 0 || (a & (a - 1))) {
            rc = sl_fail(SL_EINPUT, "%s: key 'general.alignment' is %llu (expected a power of two)", path,
                         (unsigned long long)a);
            goto fail;
        }
        g->alignment = a;
    }
    for (uint64_t i = 0; i < n_tensors; i++)
        if ((rc = parse_tensor_info(&c, g, i))) goto fail;
    for (size_t i = 0; i < g->n_tensors; i++) names[i] = g->tensors[i].name;
    if ((rc = check_unique(path, names, g->n_tensors, "tensor"))) goto fail;

    /* The data section starts at the next multiple of the alignment; every tensor lies inside it at
     * an aligned offset, and no two overlap. */
    size_t pad = (size_t)((g->alignment - c.pos % g->alignment) % g->alignment);
    if (g->n_tensors && pad > size - c.pos) {
        rc = sl_fail(SL_EINPUT, "%s: truncated GGUF file: the data section is missing", path);
        goto fail;
    }
    g->data_start = g->n_tensors ? c.pos + pad : c.pos;
    size_t data_bytes = size - g->data_start;
    for (size_t i = 0; i < g->n_tensors; i++) {
        sl_gguf_tensor *t = &g->tensors[i];
        if (t->offset % g->alignment) {
            rc = sl_fail(SL_EINPUT, "%s: tensor '%s': offset %llu is not a multiple of the alignment %llu", path, t->name,
                         (unsigned long long)t->offset, (unsigned long long)g->alignment);
            goto fail;
        }
        if (t->offset > data_bytes || t->nbytes > data_bytes - t->offset) {
            rc = sl_fail(SL_EINPUT, "%s: tensor '%s': bytes %llu..%llu of the data section lie outside the file "
                         "(truncated?)", path, t->name, (unsigned long long)t->offset,
                         (unsigned long long)t->offset + t->nbytes);
            goto fail;
        }
        t->data = g->buf + g->data_start + t->offset;
    }
    by_off = sl_malloc((g->n_tensors ? g->n_tensors : 1) * sizeof *by_off);
    if (!by_off) {
        rc = SL_EFAIL;
        goto fail;
    }
    for (size_t i = 0; i < g->n_tensors; i++) by_off[i] = &g->tensors[i];
    qsort(by_off, g->n_tensors, sizeof *by_off, cmp_by_offset);
    for (size_t i = 1; i < g->n_tensors; i++)
        if (by_off[i - 1]->offset + by_off[i - 1]->nbytes > by_off[i]->offset) {
            rc = sl_fail(SL_EINPUT, "%s: tensors '%s' and '%s' overlap", path, by_off[i - 1]->name, by_off[i]->name);
            goto fail;
        }
    free(by_off);
    free(names);
    *out = g;
    return SL_OK;
fail:
    free(by_off);
    free(names);
    sl_gguf_free(g);
    return rc;
}

/* ---- lookups ---- */

const sl_gguf_kv *sl_gguf_find_kv(const sl_gguf *g, const char *key)
{
    for (size_t i = 0; i < g->n_kv; i++)
        if (!strcmp(g->kv[i].key, key)) return &g->kv[i];
    return NULL;
}

const sl_gguf_tensor *sl_gguf_find_tensor(const sl_gguf *g, const char *name)
{
    for (size_t i = 0; i < g->n_tensors; i++)
        if (!strcmp(g->tensors[i].name, name)) return &g->tensors[i];
    return NULL;
}

static int is_int_type(uint32_t t)
{
    return t == SL_GGUF_U8 || t == SL_GGUF_I8 || t == SL_GGUF_U16 || t == SL_GGUF_I16 || t == SL_GGUF_U32 ||
           t == SL_GGUF_I32 || t == SL_GGUF_U64 || t == SL_GGUF_I64;
}

/* An integer of type t at p, as int64 (u64 above INT64_MAX gives -1: callers want small sizes). */
static int64_t int_at(uint32_t t, const unsigned char *p)
{
    switch (t) {
    case SL_GGUF_U8: return p[0];
    case SL_GGUF_I8: return (int8_t)p[0];
    case SL_GGUF_U16: return rd16(p);
    case SL_GGUF_I16: return (int16_t)rd16(p);
    case SL_GGUF_U32: return rd32(p);
    case SL_GGUF_I32: return (int32_t)rd32(p);
    case SL_GGUF_U64: return rd64(p) > INT64_MAX ? -1 : (int64_t)rd64(p);
    case SL_GGUF_I64: return (int64_t)rd64(p);
    default: return 0;
    }
}

static float f32_at(const unsigned char *p)
{
    uint32_t u = rd32(p);
    float f;
    memcpy(&f, &u, 4);
    return f;
}

static const char *type_word(uint32_t t)
{
    static const char *const W[] = {"u8", "i8", "u16", "i16", "u32", "i32", "f32", "bool", "string", "array", "u64",
                                    "i64", "f64"};
    return t < 13 ? W[t] : "?";
}

int sl_gguf_get_uint_opt(const sl_gguf *g, const char *key, uint64_t max, uint64_t *out)
{
    const sl_gguf_kv *kv = sl_gguf_find_kv(g, key);
    if (!kv) return SL_OK;
    if (!is_int_type(kv->type))
        return sl_fail(SL_EINPUT, "%s: key '%s' is a %s (expected an integer)", g->path, key, type_word(kv->type));
    int64_t v = int_at(kv->type, kv->data);
    if (v < 0 || (uint64_t)v > max)
        return sl_fail(SL_EINPUT, "%s: key '%s' is %lld (expected 0..%llu)", g->path, key, (long long)v,
                       (unsigned long long)max);
    *out = (uint64_t)v;
    return SL_OK;
}

int sl_gguf_get_uint(const sl_gguf *g, const char *key, uint64_t max, uint64_t *out)
{
    if (!sl_gguf_find_kv(g, key)) return sl_fail(SL_EINPUT, "%s: GGUF key '%s' is missing", g->path, key);
    return sl_gguf_get_uint_opt(g, key, max, out);
}

double sl_gguf_f32_to_double(float f)
{
    char s[32];
    for (int p = 1; p <= 9; p++) {
        snprintf(s, sizeof s, "%.*g", p, (double)f);
        if (strtof(s, NULL) == f) return strtod(s, NULL);
    }
    return (double)f;
}

int sl_gguf_get_float_opt(const sl_gguf *g, const char *key, double *out)
{
    const sl_gguf_kv *kv = sl_gguf_find_kv(g, key);
    if (!kv) return SL_OK;
    double v;
    if (kv->type == SL_GGUF_F32) v = sl_gguf_f32_to_double(f32_at(kv->data));
    else if (kv->type == SL_GGUF_F64) {
        uint64_t u = rd64(kv->data);
        memcpy(&v, &u, 8);
    } else
        return sl_fail(SL_EINPUT, "%s: key '%s' is a %s (expected a float)", g->path, key, type_word(kv->type));
    if (!sl_isfinite(v)) return sl_fail(SL_EINPUT, "%s: key '%s' is not a finite number", g->path, key);
    *out = v;
    return SL_OK;
}

int sl_gguf_get_float(const sl_gguf *g, const char *key, double *out)
{
    if (!sl_gguf_find_kv(g, key)) return sl_fail(SL_EINPUT, "%s: GGUF key '%s' is missing", g->path, key);
    return sl_gguf_get_float_opt(g, key, out);
}

int sl_gguf_get_bool_opt(const sl_gguf *g, const char *key, int *out)
{
    const sl_gguf_kv *kv = sl_gguf_find_kv(g, key);
    if (!kv) return SL_OK;
    if (kv->type != SL_GGUF_BOOL)
        return sl_fail(SL_EINPUT, "%s: key '%s' is a %s (expected a bool)", g->path, key, type_word(kv->type));
    *out = kv->data[0] != 0;
    return SL_OK;
}

int sl_gguf_get_str(const sl_gguf *g, const char *key, const char **s, size_t *len)
{
    const sl_gguf_kv *kv = sl_gguf_find_kv(g, key);
    if (!kv) return sl_fail(SL_EINPUT, "%s: GGUF key '%s' is missing", g->path, key);
    if (kv->type != SL_GGUF_STR)
        return sl_fail(SL_EINPUT, "%s: key '%s' is a %s (expected a string)", g->path, key, type_word(kv->type));
    *s = (const char *)kv->data;
    *len = (size_t)kv->n;
    return SL_OK;
}

int sl_gguf_get_arr(const sl_gguf *g, const char *key, uint32_t elem_type, const sl_gguf_kv **out)
{
    const sl_gguf_kv *kv = sl_gguf_find_kv(g, key);
    if (!kv) return sl_fail(SL_EINPUT, "%s: GGUF key '%s' is missing", g->path, key);
    int ok = kv->type == SL_GGUF_ARR &&
             (kv->arr_type == elem_type || (elem_type == SL_GGUF_I32 && is_int_type(kv->arr_type)));
    if (!ok)
        return sl_fail(SL_EINPUT, "%s: key '%s' is not an array of %s", g->path, key,
                       elem_type == SL_GGUF_I32 ? "integers" : type_word(elem_type));
    *out = kv;
    return SL_OK;
}

int64_t sl_gguf_arr_int(const sl_gguf_kv *kv, uint64_t i)
{
    return int_at(kv->arr_type, kv->data + i * scalar_size(kv->arr_type));
}

float sl_gguf_arr_f32(const sl_gguf_kv *kv, uint64_t i)
{
    return f32_at(kv->data + i * 4);
}

void sl_gguf_next_str(const unsigned char **p, const char **s, size_t *len)
{
    *len = (size_t)rd64(*p);
    *s = (const char *)*p + 8;
    *p += 8 + *len;
}

/* ---- dequantisers (ggml-quants.c dequantize_row_*) ---- */

static float f16_at(const unsigned char *p) { return sl_half_f16_to_f32(rd16(p)); }

/* block_q8_0: f16 d, int8 qs[32]; y = d * q. */
static void deq_q8_0(const unsigned char *b, float *y, size_t nb)
{
    for (size_t i = 0; i < nb; i++, b += 34, y += 32) {
        const float d = f16_at(b);
        for (int j = 0; j < 32; j++) y[j] = d * (float)(int8_t)b[2 + j];
    }
}

/* block_q4_0: f16 d, u8 qs[16]; element j is the low nibble of qs[j], element j + 16 the high one,
 * each (q - 8) * d. */
static void deq_q4_0(const unsigned char *b, float *y, size_t nb)
{
    for (size_t i = 0; i < nb; i++, b += 18, y += 32) {
        const float d = f16_at(b);
        for (int j = 0; j < 16; j++) {
            y[j] = (float)((b[2 + j] & 0x0F) - 8) * d;
            y[j + 16] = (float)((b[2 + j] >> 4) - 8) * d;
        }
    }
}

/* Q4_K's eight 6-bit scales and mins packed in 12 bytes (ggml's get_scale_min_k4). */
static void scale_min_k4(int j, const unsigned char *q, uint8_t *d, uint8_t *m)
{
    if (j < 4) {
        *d = q[j] & 63;
        *m = q[j + 4] & 63;
    } else {
        *d = (uint8_t)((q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4));
        *m = (uint8_t)((q[j + 4] >> 4) | ((q[j] >> 6) << 4));
    }
}

/* block_q4_K (256 elements): f16 d, f16 dmin, u8 scales[12], u8 qs[128]. Each 64 elements: 32 low
 * nibbles with scale/min 2j, then 32 high nibbles with 2j+1; y = (d * sc) * q - (dmin * m). */
static void deq_q4_k(const unsigned char *b, float *y, size_t nb)
{
    for (size_t i = 0; i < nb; i++, b += 144) {
        const float d = f16_at(b), min = f16_at(b + 2);
        const unsigned char *scales = b + 4, *q = b + 16;
        for (int j = 0, is = 0; j < 256; j += 64, is += 2, q += 32) {
            uint8_t sc, m;
            scale_min_k4(is, scales, &sc, &m);
            const float d1 = d * (float)sc, m1 = min * (float)m;
            scale_min_k4(is + 1, scales, &sc, &m);
            const float d2 = d * (float)sc, m2 = min * (float)m;
            for (int l = 0; l < 32; l++) *y++ = d1 * (float)(q[l] & 0xF) - m1;
            for (int l = 0; l < 32; l++) *y++ = d2 * (float)(q[l] >> 4) - m2;
        }
    }
}

/* block_q6_K (256 elements): u8 ql[128] (low 4 bits), u8 qh[64] (high 2 bits), int8 scales[16],
 * f16 d; y = (d * sc) * (q - 32). */
static void deq_q6_k(const unsigned char *b, float *y, size_t nb)
{
    for (size_t i = 0; i < nb; i++, b += 210) {
        const float d = f16_at(b + 208);
        const unsigned char *ql = b, *qh = b + 128;
        const int8_t *sc = (const int8_t *)(b + 192);
        for (int n = 0; n < 256; n += 128, y += 128, ql += 64, qh += 32, sc += 8)
            for (int l = 0; l < 32; l++) {
                const int is = l / 16;
                const int q1 = ((ql[l] & 0xF) | (((qh[l] >> 0) & 3) << 4)) - 32;
                const int q2 = ((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32;
                const int q3 = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
                const int q4 = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
                y[l + 0] = d * (float)sc[is + 0] * (float)q1;
                y[l + 32] = d * (float)sc[is + 2] * (float)q2;
                y[l + 64] = d * (float)sc[is + 4] * (float)q3;
                y[l + 96] = d * (float)sc[is + 6] * (float)q4;
            }
    }
}

void sl_ggml_dequant(uint32_t type, const void *src, float *dst, size_t n)
{
    const unsigned char *b = src;
    switch (type) {
    case SL_GGML_F32: memcpy(dst, src, n * 4); break;
    case SL_GGML_F16:
        for (size_t i = 0; i < n; i++) dst[i] = f16_at(b + 2 * i);
        break;
    case SL_GGML_BF16:
        for (size_t i = 0; i < n; i++) dst[i] = sl_half_bf16_to_f32(rd16(b + 2 * i));
        break;
    case SL_GGML_Q8_0: deq_q8_0(b, dst, n / 32); break;
    case SL_GGML_Q4_0: deq_q4_0(b, dst, n / 32); break;
    case SL_GGML_Q4_K: deq_q4_k(b, dst, n / 256); break;
    case SL_GGML_Q6_K: deq_q6_k(b, dst, n / 256); break;
    default: break;
    }
}

void sl_ggml_quant_q8_0(const float *src, void *dst, size_t n)
{
    unsigned char *b = dst;
    for (size_t i = 0; i < n / 32; i++, src += 32, b += 34) {
        float amax = 0;
        for (int j = 0; j < 32; j++) amax = fmaxf(amax, fabsf(src[j]));
        const float d = amax / 127.0f, id = d != 0.0f ? 1.0f / d : 0.0f;
        const uint16_t h = sl_half_f32_to_f16(d);
        b[0] = (unsigned char)(h & 0xFF);
        b[1] = (unsigned char)(h >> 8);
        for (int j = 0; j < 32; j++) b[2 + j] = (unsigned char)(int8_t)roundf(src[j] * id);
    }
}
