/*
 * sl_train_ckpt.c: resumable checkpoints (layout in sl_train_io.h). A checksum over the whole file
 * catches truncation and corruption; the run identity catches a resume with other settings, which
 * would silently mix two runs.
 */
#include <errno.h>
#include <json-c/json.h>
#include <stdlib.h>
#include <string.h>

#include "sl_common.h"
#include "sl_train_io.h"

static const unsigned char ckpt_magic[8] = {'S', 'L', 'C', 'K', 'P', 'T', 0, 1};

typedef struct {
    FILE *f;
    uint64_t h; /* FNV-1a 64 of the bytes so far */
} hfile;

static void fnv(uint64_t *h, const void *p, size_t n)
{
    const unsigned char *b = p;
    uint64_t x = *h;
    for (size_t i = 0; i < n; i++) {
        x ^= b[i];
        x *= UINT64_C(0x100000001b3);
    }
    *h = x;
}

static void hw(hfile *w, const void *p, size_t n)
{
    fnv(&w->h, p, n);
    fwrite(p, 1, n, w->f);
}

static void hw_u64(hfile *w, uint64_t x)
{
    unsigned char b[8];
    for (int i = 0; i < 8; i++) b[i] = (unsigned char)(x >> (8 * i));
    hw(w, b, 8);
}

static void hw_f64(hfile *w, double d)
{
    uint64_t x;
    memcpy(&x, &d, 8);
    hw_u64(w, x);
}

int sl_train_ckpt_save(const char *path, const sl_train_model *m, const sl_train_ckpt_state *st)
{
    sl_atomic_file af;
    int rc = sl_atomic_open(&af, path);
    if (rc) return rc;
    hfile w = {af.f, UINT64_C(0xcbf29ce484222325)};
    hw(&w, ckpt_magic, 8);
    unsigned char ver[8] = {1, 0, 0, 0, 0, 0, 0, 0};
    hw(&w, ver, 8);
    hw_u64(&w, m->n_params);
    hw_u64(&w, st->step);
    hw_u64(&w, st->tokens_seen);
    hw_f64(&w, st->wall_s);
    hw_f64(&w, st->loss_sum);
    hw_u64(&w, st->loss_n);
    const char *id = st->identity ? st->identity : "", *log = st->log ? st->log : "";
    hw_u64(&w, strlen(id));
    hw(&w, id, strlen(id));
    hw_u64(&w, strlen(log));
    hw(&w, log, strlen(log));
    hw(&w, m->params_mem, m->n_params * sizeof(float));
    hw(&w, m->m, m->n_params * sizeof(float));
    hw(&w, m->v, m->n_params * sizeof(float));
    uint64_t sum = w.h;
    hw_u64(&w, sum);
    if (ferror(af.f)) {
        sl_atomic_abort(&af);
        return sl_fail(SL_EFAIL, "writing checkpoint %s failed", path);
    }
    return sl_atomic_commit(&af);
}

typedef struct {
    const unsigned char *p;
    size_t n, at;
    int short_read;
} reader;

static const unsigned char *take(reader *r, size_t n)
{
    if (r->short_read || n > r->n - r->at) {
        r->short_read = 1;
        return NULL;
    }
    const unsigned char *p = r->p + r->at;
    r->at += n;
    return p;
}

static uint64_t take_u64(reader *r)
{
    const unsigned char *p = take(r, 8);
    uint64_t x = 0;
    if (p)
        for (int i = 0; i < 8; i++) x |= (uint64_t)p[i] << (8 * i);
    return x;
}

static double take_f64(reader *r)
{
    uint64_t x = take_u64(r);
    double d;
    memcpy(&d, &x, 8);
    return d;
}

/* Names the first field of `want` whose value differs in `have`. */
static int identity_check(const char *path, const char *have, const char *want)
{
    if (!strcmp(have, want)) return SL_OK;
    struct json_object *h = json_tokener_parse(have), *w = json_tokener_parse(want);
    char field[128] = "?", hv[160] = "?", wv[160] = "?";
    if (h && w) {
        json_object_object_foreach(w, key, val)
        {
            struct json_object *o;
            const char *a = json_object_to_json_string(val);
            const char *b = json_object_object_get_ex(h, key, &o) ? json_object_to_json_string(o) : "(absent)";
            if (strcmp(a, b) != 0) {
                snprintf(field, sizeof field, "%s", key);
                snprintf(hv, sizeof hv, "%s", b);
                snprintf(wv, sizeof wv, "%s", a);
                break;
            }
        }
    }
    if (h) json_object_put(h);
    if (w) json_object_put(w);
    return sl_fail(SL_EINPUT,
                   "checkpoint %s belongs to another run (%s was %.60s, now %.60s): rerun with the same settings, "
                   "or use a fresh checkpoint directory",
                   path, field, hv, wv);
}

int sl_train_ckpt_load(const char *path, sl_train_model *m, sl_train_ckpt_state *st)
{
    FILE *f = fopen(path, "rb");
    if (!f) return sl_fail(SL_EINPUT, "cannot read checkpoint %s: %s", path, strerror(errno));
    fseek(f, 0, SEEK_END);
    long size = ftell(f);
    fseek(f, 0, SEEK_SET);
    if (size < 0) {
        fclose(f);
        return sl_fail(SL_EINPUT, "cannot read checkpoint %s", path);
    }
    unsigned char *buf = sl_malloc((size_t)size + 1);
    if (!buf) {
        fclose(f);
        return SL_EFAIL;
    }
    size_t got = fread(buf, 1, (size_t)size, f);
    fclose(f);
    int rc = SL_OK;
    reader r = {buf, got, 0, 0};
    const unsigned char *magic = take(&r, 8);
    if (!magic || memcmp(magic, ckpt_magic, 8) != 0) {
        free(buf);
        return sl_fail(SL_EINPUT, "checkpoint %s is corrupt (bad magic); delete it to start over", path);
    }
    uint64_t sum = UINT64_C(0xcbf29ce484222325), stored = 0;
    if (got >= 24) {
        fnv(&sum, buf, got - 8);
        r.at = got - 8;
        stored = take_u64(&r);
    }
    if (got < 24 || sum != stored) {
        free(buf);
        return sl_fail(SL_EINPUT, "checkpoint %s is corrupt or truncated (checksum mismatch); delete it to start over",
                       path);
    }
    r.at = 8;
    const unsigned char *ver = take(&r, 8);
    if (ver[0] != 1) {
        unsigned version = ver[0];
        free(buf);
        return sl_fail(SL_EINPUT, "checkpoint %s has version %u, expected 1", path, version);
    }
    uint64_t np = take_u64(&r);
    uint64_t step = take_u64(&r), tokens = take_u64(&r);
    double wall = take_f64(&r), lsum = take_f64(&r);
    uint64_t ln = take_u64(&r);
    uint64_t idlen = take_u64(&r);
    const unsigned char *id = take(&r, idlen);
    uint64_t loglen = take_u64(&r);
    const unsigned char *log = take(&r, loglen);
    if (r.short_read) {
        free(buf);
        return sl_fail(SL_EINPUT, "checkpoint %s is truncated", path);
    }
    char *ids = strndup((const char *)id, idlen);
    rc = identity_check(path, ids, st->identity ? st->identity : "");
    free(ids);
    if (!rc && np != m->n_params)
        rc = sl_fail(SL_EINPUT, "checkpoint %s holds %llu parameters, the model has %zu", path, (unsigned long long)np,
                     m->n_params);
    const unsigned char *pw = NULL, *pm = NULL, *pv = NULL;
    if (!rc) {
        pw = take(&r, np * 4), pm = take(&r, np * 4), pv = take(&r, np * 4);
        if (r.short_read || r.at != got - 8) rc = sl_fail(SL_EINPUT, "checkpoint %s has the wrong size", path);
    }
    if (!rc) {
        memcpy(m->params_mem, pw, np * 4);
        memcpy(m->m, pm, np * 4);
        memcpy(m->v, pv, np * 4);
        st->step = step;
        st->tokens_seen = tokens;
        st->wall_s = wall;
        st->loss_sum = lsum;
        st->loss_n = ln;
        free(st->log);
        st->log = strndup((const char *)log, loglen);
    }
    free(buf);
    return rc;
}
