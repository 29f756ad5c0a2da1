/*
 * sl_st.c: safetensors reader (mmap + validation) and atomic writer. See sl_st.h.
 */
#include "sl_st.h"

#include <errno.h>
#include <fcntl.h>
#include <json.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "sl_common.h"

/* A header larger than this is refused before it is parsed: real headers of models with
 * thousands of tensors are a few hundred KB, and the cap keeps a corrupt length from asking
 * json-c for gigabytes. */
#define SL_ST_MAX_HEADER (100u << 20)

const char *sl_dtype_name(sl_dtype dt)
{
    switch (dt) {
    case SL_DT_F32: return "F32";
    case SL_DT_F16: return "F16";
    case SL_DT_BF16: return "BF16";
    case SL_DT_I32: return "I32";
    case SL_DT_U8: return "U8";
    case SL_DT_BOOL: return "BOOL";
    }
    return "?";
}

int sl_dtype_parse(const char *s, sl_dtype *out)
{
    if (!strcmp(s, "F32") || !strcmp(s, "f32")) *out = SL_DT_F32;
    else if (!strcmp(s, "F16") || !strcmp(s, "f16")) *out = SL_DT_F16;
    else if (!strcmp(s, "BF16") || !strcmp(s, "bf16")) *out = SL_DT_BF16;
    else return sl_fail(SL_EINPUT, "unknown dtype '%s' (expected F32, F16 or BF16)", s);
    return SL_OK;
}

size_t sl_dtype_size(sl_dtype dt)
{
    return dt == SL_DT_F32 || dt == SL_DT_I32 ? 4 : dt == SL_DT_U8 || dt == SL_DT_BOOL ? 1 : 2;
}

static char *dupstr(const char *s)
{
    size_t n = strlen(s);
    char *d = sl_malloc(n + 1);
    if (d) memcpy(d, s, n + 1);
    return d;
}

void sl_st_close(sl_st_file *f)
{
    if (!f) return;
    if (f->map && f->map != MAP_FAILED) munmap(f->map, f->map_bytes);
    for (size_t i = 0; i < f->n_tensors; i++) free(f->tensors[i].name);
    free(f->tensors);
    for (size_t i = 0; i < f->n_meta; i++) {
        free(f->meta_keys[i]);
        free(f->meta_vals[i]);
    }
    free(f->meta_keys);
    free(f->meta_vals);
    for (size_t i = 0; i < f->n_owned; i++) free(f->owned[i]);
    free(f->owned);
    free(f->path);
    free(f);
}

static int cmp_by_offset(const void *a, const void *b)
{
    const sl_st_tensor *x = *(const sl_st_tensor *const *)a, *y = *(const sl_st_tensor *const *)b;
    const char *px = x->data, *py = y->data;
    return px < py ? -1 : px > py;
}

/* Parses one tensor entry; data_base is the start of the data buffer of data_bytes bytes. */
static int parse_tensor(const char *path, const char *name, json_object *v, const char *data_base,
                        size_t data_bytes, sl_st_tensor *t)
{
    json_object *jd, *js, *jo;
    if (!json_object_is_type(v, json_type_object) || !json_object_object_get_ex(v, "dtype", &jd) ||
        !json_object_object_get_ex(v, "shape", &js) || !json_object_object_get_ex(v, "data_offsets", &jo))
        return sl_fail(SL_EINPUT, "%s: tensor '%s': header entry needs dtype, shape and data_offsets", path, name);
    if (!json_object_is_type(jd, json_type_string))
        return sl_fail(SL_EINPUT, "%s: tensor '%s': dtype is not a string", path, name);
    const char *ds = json_object_get_string(jd);
    if (!strcmp(ds, "F32")) t->dtype = SL_DT_F32;
    else if (!strcmp(ds, "F16")) t->dtype = SL_DT_F16;
    else if (!strcmp(ds, "BF16")) t->dtype = SL_DT_BF16;
    else if (!strcmp(ds, "I32")) t->dtype = SL_DT_I32;
    else if (!strcmp(ds, "U8")) t->dtype = SL_DT_U8;
    else if (!strcmp(ds, "BOOL")) t->dtype = SL_DT_BOOL;
    else return sl_fail(SL_EINPUT, "%s: tensor '%s': unknown dtype '%s' (expected F32, F16, BF16, I32, U8 or BOOL)", path, name, ds);
    if (!json_object_is_type(js, json_type_array) || json_object_array_length(js) > SL_ST_MAX_DIMS)
        return sl_fail(SL_EINPUT, "%s: tensor '%s': shape must be an array of at most %d sizes", path, name,
                       SL_ST_MAX_DIMS);
    t->ndim = (int)json_object_array_length(js);
    size_t numel = 1;
    for (int d = 0; d < t->ndim; d++) {
        json_object *e = json_object_array_get_idx(js, (size_t)d);
        if (!json_object_is_type(e, json_type_int) || json_object_get_int64(e) < 0)
            return sl_fail(SL_EINPUT, "%s: tensor '%s': shape[%d] is not a non-negative integer", path, name, d);
        t->shape[d] = json_object_get_int64(e);
        if (t->shape[d] > 0 && numel > (SIZE_MAX >> 2) / (size_t)t->shape[d])
            return sl_fail(SL_EINPUT, "%s: tensor '%s': shape overflows", path, name);
        numel *= (size_t)t->shape[d];
    }
    t->numel = numel;
    if (!json_object_is_type(jo, json_type_array) || json_object_array_length(jo) != 2)
        return sl_fail(SL_EINPUT, "%s: tensor '%s': data_offsets must be [begin, end]", path, name);
    json_object *jb = json_object_array_get_idx(jo, 0), *je = json_object_array_get_idx(jo, 1);
    if (!json_object_is_type(jb, json_type_int) || !json_object_is_type(je, json_type_int))
        return sl_fail(SL_EINPUT, "%s: tensor '%s': data_offsets are not integers", path, name);
    int64_t b = json_object_get_int64(jb), e = json_object_get_int64(je);
    if (b < 0 || e < b || (uint64_t)e > data_bytes)
        return sl_fail(SL_EINPUT, "%s: tensor '%s': data_offsets [%lld, %lld] outside the data buffer of %zu bytes",
                       path, name, (long long)b, (long long)e, data_bytes);
    t->nbytes = (size_t)(e - b);
    if (t->nbytes != numel * sl_dtype_size(t->dtype))
        return sl_fail(SL_EINPUT, "%s: tensor '%s': %zu bytes of data for %zu %s elements (expected %zu)", path,
                       name, t->nbytes, numel, ds, numel * sl_dtype_size(t->dtype));
    t->data = data_base + b;
    return SL_OK;
}

static int parse_header(sl_st_file *f, const char *json_text, size_t json_len, const char *data_base,
                        size_t data_bytes)
{
    const char *path = f->path;
    json_tokener *tok = json_tokener_new();
    if (!tok) return sl_fail(SL_EFAIL, "out of memory");
    json_object *root = json_tokener_parse_ex(tok, json_text, (int)json_len);
    enum json_tokener_error jerr = json_tokener_get_error(tok);
    size_t consumed = json_tokener_get_parse_end(tok);
    json_tokener_free(tok);
    if (!root || jerr != json_tokener_success) {
        json_object_put(root);
        return sl_fail(SL_EINPUT, "%s: corrupt safetensors header: %s", path,
                       root ? "trailing data" : json_tokener_error_desc(jerr));
    }
    for (size_t i = consumed; i < json_len; i++)
        if (json_text[i] != ' ' && json_text[i] != '\n' && json_text[i] != '\t' && json_text[i] != '\r' &&
            json_text[i] != '\0') {
            json_object_put(root);
            return sl_fail(SL_EINPUT, "%s: corrupt safetensors header: data after the JSON object", path);
        }
    if (!json_object_is_type(root, json_type_object)) {
        json_object_put(root);
        return sl_fail(SL_EINPUT, "%s: corrupt safetensors header: not a JSON object", path);
    }
    int rc = SL_OK;
    size_t n_keys = (size_t)json_object_object_length(root);
    f->tensors = sl_calloc(n_keys ? n_keys : 1, sizeof *f->tensors);
    if (!f->tensors) rc = SL_EFAIL;
    json_object_object_foreach(root, key, val)
    {
        if (rc != SL_OK) break;
        if (!strcmp(key, "__metadata__")) {
            if (!json_object_is_type(val, json_type_object)) {
                rc = sl_fail(SL_EINPUT, "%s: __metadata__ is not an object", path);
                break;
            }
            size_t nm = (size_t)json_object_object_length(val);
            f->meta_keys = sl_calloc(nm ? nm : 1, sizeof(char *));
            f->meta_vals = sl_calloc(nm ? nm : 1, sizeof(char *));
            if (!f->meta_keys || !f->meta_vals) {
                rc = SL_EFAIL;
                break;
            }
            json_object_object_foreach(val, mk, mv)
            {
                if (!json_object_is_type(mv, json_type_string)) {
                    rc = sl_fail(SL_EINPUT, "%s: metadata '%s' is not a string", path, mk);
                    break;
                }
                f->meta_keys[f->n_meta] = dupstr(mk);
                f->meta_vals[f->n_meta] = dupstr(json_object_get_string(mv));
                f->n_meta++;
                if (!f->meta_keys[f->n_meta - 1] || !f->meta_vals[f->n_meta - 1]) {
                    rc = SL_EFAIL;
                    break;
                }
            }
            continue;
        }
        sl_st_tensor *t = &f->tensors[f->n_tensors];
        t->name = dupstr(key);
        if (!t->name) {
            rc = SL_EFAIL;
            break;
        }
        f->n_tensors++;
        rc = parse_tensor(path, key, val, data_base, data_bytes, t);
    }
    json_object_put(root);
    if (rc != SL_OK) return rc;

    /* Overlap check: sort pointers by start and compare neighbours. */
    if (f->n_tensors > 1) {
        const sl_st_tensor **order = sl_malloc(f->n_tensors * sizeof *order);
        if (!order) return SL_EFAIL;
        for (size_t i = 0; i < f->n_tensors; i++) order[i] = &f->tensors[i];
        qsort(order, f->n_tensors, sizeof *order, cmp_by_offset);
        for (size_t i = 1; i < f->n_tensors && rc == SL_OK; i++) {
            const char *prev_end = (const char *)order[i - 1]->data + order[i - 1]->nbytes;
            if ((const char *)order[i]->data < prev_end && order[i]->nbytes > 0)
                rc = sl_fail(SL_EINPUT, "%s: tensor '%s': data overlaps tensor '%s'", path, order[i]->name,
                             order[i - 1]->name);
        }
        free(order);
    }
    return rc;
}

int sl_st_open(const char *path, sl_st_file **out)
{
    *out = NULL;
    sl_st_file *f = sl_calloc(1, sizeof *f);
    if (!f) return SL_EFAIL;
    f->path = dupstr(path);
    if (!f->path) {
        free(f);
        return SL_EFAIL;
    }
    int rc = SL_OK;
    int fd = open(path, O_RDONLY);
    if (fd < 0) {
        rc = sl_fail(SL_EINPUT, "%s: cannot open: %s", path, strerror(errno));
        goto fail;
    }
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        rc = sl_fail(SL_EINPUT, "%s: not a regular file", path);
        goto fail;
    }
    size_t size = (size_t)st.st_size;
    if (size < 8) {
        close(fd);
        rc = sl_fail(SL_EINPUT, "%s: truncated safetensors file (%zu bytes, need at least 8)", path, size);
        goto fail;
    }
    f->map = mmap(NULL, size, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd);
    if (f->map == MAP_FAILED) {
        f->map = NULL;
        rc = sl_fail(SL_EINPUT, "%s: cannot map: %s", path, strerror(errno));
        goto fail;
    }
    f->map_bytes = size;
    const unsigned char *p = f->map;
    uint64_t hlen = 0;
    for (int i = 7; i >= 0; i--) hlen = (hlen << 8) | p[i];
    if (hlen > size - 8) {
        rc = sl_fail(SL_EINPUT, "%s: truncated or corrupt: header length %llu runs past the end of the file (%zu bytes)",
                     path, (unsigned long long)hlen, size);
        goto fail;
    }
    if (hlen < 2 || hlen > SL_ST_MAX_HEADER) {
        rc = sl_fail(SL_EINPUT, "%s: corrupt safetensors header length %llu", path, (unsigned long long)hlen);
        goto fail;
    }
    rc = parse_header(f, (const char *)p + 8, (size_t)hlen, (const char *)p + 8 + hlen, size - 8 - (size_t)hlen);
    if (rc != SL_OK) goto fail;
    *out = f;
    return SL_OK;
fail:
    sl_st_close(f);
    return rc;
}

const sl_st_tensor *sl_st_find(const sl_st_file *f, const char *name)
{
    for (size_t i = 0; i < f->n_tensors; i++)
        if (!strcmp(f->tensors[i].name, name)) return &f->tensors[i];
    return NULL;
}

const char *sl_st_meta(const sl_st_file *f, const char *key)
{
    for (size_t i = 0; i < f->n_meta; i++)
        if (!strcmp(f->meta_keys[i], key)) return f->meta_vals[i];
    return NULL;
}

int sl_st_write(const char *path, const sl_st_wtensor *tensors, size_t n_tensors, const char *const *meta_keys,
                const char *const *meta_vals, size_t n_meta)
{
    json_object *root = json_object_new_object();
    if (!root) return sl_fail(SL_EFAIL, "out of memory");
    if (n_meta > 0) {
        json_object *m = json_object_new_object();
        for (size_t i = 0; i < n_meta; i++)
            json_object_object_add(m, meta_keys[i], json_object_new_string(meta_vals[i]));
        json_object_object_add(root, "__metadata__", m);
    }
    size_t off = 0;
    for (size_t i = 0; i < n_tensors; i++) {
        const sl_st_wtensor *t = &tensors[i];
        size_t numel = 1;
        json_object *e = json_object_new_object(), *shape = json_object_new_array(), *offs = json_object_new_array();
        for (int d = 0; d < t->ndim; d++) {
            json_object_array_add(shape, json_object_new_int64(t->shape[d]));
            numel *= (size_t)t->shape[d];
        }
        size_t nb = numel * sl_dtype_size(t->dtype);
        json_object_array_add(offs, json_object_new_int64((int64_t)off));
        json_object_array_add(offs, json_object_new_int64((int64_t)(off + nb)));
        json_object_object_add(e, "dtype", json_object_new_string(sl_dtype_name(t->dtype)));
        json_object_object_add(e, "shape", shape);
        json_object_object_add(e, "data_offsets", offs);
        json_object_object_add(root, t->name, e);
        off += nb;
    }
    const char *js = json_object_to_json_string_ext(root, JSON_C_TO_STRING_PLAIN);
    size_t jlen = strlen(js);
    size_t hlen = (8 + jlen + 63) / 64 * 64 - 8; /* data starts at a 64-byte boundary */
    sl_atomic_file af;
    int rc = sl_atomic_open(&af, path);
    if (rc != SL_OK) {
        json_object_put(root);
        return rc;
    }
    unsigned char lenb[8];
    for (int i = 0; i < 8; i++) lenb[i] = (unsigned char)((uint64_t)hlen >> (8 * i));
    int ok = fwrite(lenb, 1, 8, af.f) == 8 && fwrite(js, 1, jlen, af.f) == jlen;
    for (size_t i = jlen; i < hlen && ok; i++) ok = fputc(' ', af.f) != EOF;
    json_object_put(root);
    for (size_t i = 0; i < n_tensors && ok; i++) {
        const sl_st_wtensor *t = &tensors[i];
        size_t numel = 1;
        for (int d = 0; d < t->ndim; d++) numel *= (size_t)t->shape[d];
        size_t nb = numel * sl_dtype_size(t->dtype);
        ok = nb == 0 || fwrite(t->data, 1, nb, af.f) == nb;
    }
    if (!ok) {
        int e = errno;
        sl_atomic_abort(&af);
        return sl_fail(SL_EFAIL, "writing %s failed: %s", path, strerror(e));
    }
    return sl_atomic_commit(&af);
}

/* ---- in-memory files ---- */

int sl_st_mem_new(const char *path, sl_st_file **out)
{
    *out = NULL;
    sl_st_file *f = sl_calloc(1, sizeof *f);
    if (!f) return SL_EFAIL;
    if (!(f->path = dupstr(path))) {
        free(f);
        return SL_EFAIL;
    }
    *out = f;
    return SL_OK;
}

void sl_st_mem_keep_map(sl_st_file *f, void *map, size_t bytes)
{
    f->map = map;
    f->map_bytes = bytes;
}

/* Grows *arr (elements of size sz) to hold need, doubling. */
static int grow(void **arr, size_t *cap, size_t need, size_t sz)
{
    if (need <= *cap) return SL_OK;
    size_t nc = *cap ? *cap * 2 : 16;
    while (nc < need) nc *= 2;
    void *p = realloc(*arr, nc * sz);
    if (!p) return sl_fail(SL_EFAIL, "out of memory");
    *arr = p;
    *cap = nc;
    return SL_OK;
}

int sl_st_mem_own(sl_st_file *f, void *buf)
{
    if (grow((void **)&f->owned, &f->cap_owned, f->n_owned + 1, sizeof *f->owned)) {
        free(buf);
        return SL_EFAIL;
    }
    f->owned[f->n_owned++] = buf;
    return SL_OK;
}

int sl_st_mem_add(sl_st_file *f, const char *name, sl_dtype dt, int ndim, const int64_t *shape, const void *data)
{
    if (ndim < 0 || ndim > SL_ST_MAX_DIMS)
        return sl_fail(SL_EINPUT, "%s: tensor '%s' has %d dimensions (at most %d)", f->path, name, ndim, SL_ST_MAX_DIMS);
    if (sl_st_find(f, name)) return sl_fail(SL_EINPUT, "%s: tensor '%s' appears twice", f->path, name);
    size_t numel = 1;
    for (int d = 0; d < ndim; d++) {
        if (shape[d] < 0) return sl_fail(SL_EINPUT, "%s: tensor '%s' has a negative size", f->path, name);
        if (shape[d] && numel > SIZE_MAX / 8 / (size_t)shape[d])
            return sl_fail(SL_EINPUT, "%s: tensor '%s': its size overflows", f->path, name);
        numel *= (size_t)shape[d];
    }
    if (grow((void **)&f->tensors, &f->cap_tensors, f->n_tensors + 1, sizeof *f->tensors)) return SL_EFAIL;
    sl_st_tensor *t = &f->tensors[f->n_tensors];
    memset(t, 0, sizeof *t);
    if (!(t->name = dupstr(name))) return SL_EFAIL;
    t->dtype = dt;
    t->ndim = ndim;
    for (int d = 0; d < ndim; d++) t->shape[d] = shape[d];
    t->numel = numel;
    t->nbytes = numel * sl_dtype_size(dt);
    t->data = data;
    f->n_tensors++;
    return SL_OK;
}

int sl_st_mem_meta(sl_st_file *f, const char *key, const char *val)
{
    char *v = dupstr(val);
    if (!v) return SL_EFAIL;
    for (size_t i = 0; i < f->n_meta; i++)
        if (!strcmp(f->meta_keys[i], key)) {
            free(f->meta_vals[i]);
            f->meta_vals[i] = v;
            return SL_OK;
        }
    /* Metadata holds a handful of keys: the arrays grow by one. */
    char *k = dupstr(key);
    char **ks = k ? realloc(f->meta_keys, (f->n_meta + 1) * sizeof *ks) : NULL;
    if (ks) f->meta_keys = ks;
    char **vs = ks ? realloc(f->meta_vals, (f->n_meta + 1) * sizeof *vs) : NULL;
    if (vs) f->meta_vals = vs;
    if (!vs) {
        free(k);
        free(v);
        return sl_fail(SL_EFAIL, "out of memory");
    }
    f->meta_keys[f->n_meta] = k;
    f->meta_vals[f->n_meta] = v;
    f->n_meta++;
    return SL_OK;
}

int sl_st_write_file(const sl_st_file *f, const char *path)
{
    sl_st_wtensor *w = sl_calloc(f->n_tensors ? f->n_tensors : 1, sizeof *w);
    if (!w) return SL_EFAIL;
    for (size_t i = 0; i < f->n_tensors; i++) {
        const sl_st_tensor *t = &f->tensors[i];
        w[i].name = t->name;
        w[i].dtype = t->dtype;
        w[i].ndim = t->ndim;
        for (int d = 0; d < t->ndim; d++) w[i].shape[d] = t->shape[d];
        w[i].data = t->data;
    }
    int rc = sl_st_write(path, w, f->n_tensors, (const char *const *)f->meta_keys, (const char *const *)f->meta_vals,
                         f->n_meta);
    free(w);
    return rc;
}
