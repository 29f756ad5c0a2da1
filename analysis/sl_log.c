/*
 * sl_log.c: the HDF5 log (schema version 1, analysis/LOG_SCHEMA.md): sharded crash-safe writer,
 * assembly, streaming reader with a fast chunk path (raw chunks inflated by libdeflate in
 * parallel) and its naive twin (H5Dread), validation.
 */
#include "sl_log.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <hdf5.h>
#include <immintrin.h>
#include <libdeflate.h>
#include <math.h>
#include <nettle/sha2.h>
#include <omp.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "sl_common.h"

/* ---- schema tables ---- */

enum { T_I8, T_I32, T_I64, T_F64, T_DIST };

typedef struct {
    const char *name;
    int type;
} col_def;

typedef struct {
    const char *group;
    const col_def *cols;
    size_t n_cols;
    int optional; /* distributions: present only when meta.dist != none */
} table_def;

static const col_def pos_cols[] = {
    {"sequence", T_I32}, {"position", T_I32},  {"token", T_I32},   {"beta", T_F64},    {"d_lk", T_F64},
    {"entropy_p", T_F64}, {"entropy_q", T_F64}, {"q_max", T_F64}, {"p_token", T_F64}, {"q_token", T_F64},
};
static const col_def dist_cols[] = {{"p", T_DIST}, {"q", T_DIST}};
static const col_def mseq_cols[] = {
    {"sequence", T_I64}, {"prompt_id", T_I64}, {"n_prompt_tokens", T_I64}, {"n_generated", T_I64}, {"n_rows", T_I64},
};
static const col_def rseq_cols[] = {
    {"sequence", T_I64}, {"prompt_id", T_I64}, {"n_prompt_tokens", T_I64}, {"n_generated", T_I64},
    {"n_rows", T_I64},   {"n_drafts", T_I64},  {"mode", T_I8},             {"wall_s", T_F64},
};
static const col_def prompt_cols[] = {{"tokens", T_I32}};
static const col_def iter_cols[] = {
    {"sequence", T_I32}, {"iteration", T_I32}, {"gamma", T_I32},   {"drafted", T_I32},  {"accepted", T_I32},
    {"emitted", T_I32},  {"draft_s", T_F64},   {"verify_s", T_F64}, {"sample_s", T_F64},
};
static const col_def draft_cols[] = {
    {"sequence", T_I32}, {"iteration", T_I32}, {"draft_position", T_I32},
    {"token", T_I32},    {"accepted", T_I8},   {"beta", T_F64},
};
static const col_def cost_cols[] = {{"n", T_I64}, {"v", T_F64}, {"call_s", T_F64}};

#define NC(a) (sizeof a / sizeof a[0])
/* Table indices inside each kind. */
enum { M_POS, M_DIST, M_SEQ, M_PROMPT, M_NT };
enum { R_ITER, R_DRAFT, R_SEQ, R_PROMPT, R_NT };
static const table_def measure_tables[M_NT] = {
    {"positions", pos_cols, NC(pos_cols), 0},
    {"distributions", dist_cols, NC(dist_cols), 1},
    {"sequences", mseq_cols, NC(mseq_cols), 0},
    {"prompts", prompt_cols, NC(prompt_cols), 0},
};
static const table_def run_tables[R_NT] = {
    {"iterations", iter_cols, NC(iter_cols), 0},
    {"drafts", draft_cols, NC(draft_cols), 0},
    {"sequences", rseq_cols, NC(rseq_cols), 0},
    {"prompts", prompt_cols, NC(prompt_cols), 0},
};
static const table_def costs_table = {"costs", cost_cols, NC(cost_cols), 0};

static const table_def *kind_tables(sl_log_kind k, size_t *n)
{
    *n = k == SL_LOG_MEASURE ? M_NT : R_NT;
    return k == SL_LOG_MEASURE ? measure_tables : run_tables;
}

#define ROW_CHUNK 4096 /* rows per chunk of the per-row columns */

/* ---- HDF5 helpers ---- */

static void h5_quiet(void)
{
    static int done;
    if (!done) {
        H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
        done = 1;
    }
}

static hid_t f16_type(void)
{
    static hid_t t = -1;
    if (t < 0) {
        t = H5Tcopy(H5T_IEEE_F32LE);
        H5Tset_fields(t, 15, 10, 5, 0, 10);
        H5Tset_size(t, 2);
        H5Tset_ebias(t, 15);
        H5Tlock(t);
    }
    return t;
}

static hid_t file_type(int type, sl_log_dist d)
{
    switch (type) {
    case T_I8: return H5T_STD_I8LE;
    case T_I32: return H5T_STD_I32LE;
    case T_I64: return H5T_STD_I64LE;
    case T_F64: return H5T_IEEE_F64LE;
    default: return d == SL_LOG_DIST_F16 ? f16_type() : H5T_IEEE_F32LE;
    }
}

static size_t type_size(int type, sl_log_dist d)
{
    switch (type) {
    case T_I8: return 1;
    case T_I32: return 4;
    case T_I64: return 8;
    case T_F64: return 8;
    default: return d == SL_LOG_DIST_F16 ? 2 : 4;
    }
}

static int attr_str(hid_t obj, const char *name, const char *v)
{
    hid_t t = H5Tcopy(H5T_C_S1);
    H5Tset_size(t, strlen(v) + 1);
    H5Tset_strpad(t, H5T_STR_NULLTERM);
    hid_t s = H5Screate(H5S_SCALAR);
    hid_t a = H5Acreate2(obj, name, t, s, H5P_DEFAULT, H5P_DEFAULT);
    herr_t e = a < 0 ? -1 : H5Awrite(a, t, v);
    if (a >= 0) H5Aclose(a);
    H5Sclose(s);
    H5Tclose(t);
    return e < 0 ? sl_fail(SL_EFAIL, "cannot write attribute %s", name) : SL_OK;
}

static int attr_num(hid_t obj, const char *name, hid_t ftype, hid_t mtype, const void *v)
{
    hid_t s = H5Screate(H5S_SCALAR);
    hid_t a = H5Acreate2(obj, name, ftype, s, H5P_DEFAULT, H5P_DEFAULT);
    herr_t e = a < 0 ? -1 : H5Awrite(a, mtype, v);
    if (a >= 0) H5Aclose(a);
    H5Sclose(s);
    return e < 0 ? sl_fail(SL_EFAIL, "cannot write attribute %s", name) : SL_OK;
}
static int attr_i64(hid_t o, const char *n, int64_t v) { return attr_num(o, n, H5T_STD_I64LE, H5T_NATIVE_INT64, &v); }
static int attr_u64(hid_t o, const char *n, uint64_t v) { return attr_num(o, n, H5T_STD_U64LE, H5T_NATIVE_UINT64, &v); }
static int attr_f64(hid_t o, const char *n, double v) { return attr_num(o, n, H5T_IEEE_F64LE, H5T_NATIVE_DOUBLE, &v); }

/* Reads a string attribute into buf (n); returns -1 when missing or not a string. */
static int get_attr_str(hid_t obj, const char *name, char *buf, size_t n)
{
    if (H5Aexists(obj, name) <= 0) return -1;
    hid_t a = H5Aopen(obj, name, H5P_DEFAULT);
    hid_t t = H5Aget_type(a);
    int rc = -1;
    if (H5Tget_class(t) == H5T_STRING && !H5Tis_variable_str(t)) {
        size_t sz = H5Tget_size(t);
        char *tmp = calloc(1, sz + 1);
        hid_t mt = H5Tcopy(H5T_C_S1);
        H5Tset_size(mt, sz);
        if (tmp && H5Aread(a, mt, tmp) >= 0) {
            snprintf(buf, n, "%s", tmp);
            rc = 0;
        }
        H5Tclose(mt);
        free(tmp);
    }
    H5Tclose(t);
    H5Aclose(a);
    return rc;
}

static int get_attr_num(hid_t obj, const char *name, hid_t mtype, void *v)
{
    if (H5Aexists(obj, name) <= 0) return -1;
    hid_t a = H5Aopen(obj, name, H5P_DEFAULT);
    hid_t t = H5Aget_type(a);
    H5T_class_t cl = H5Tget_class(t);
    int rc = (cl == H5T_INTEGER || cl == H5T_FLOAT) && H5Aread(a, mtype, v) >= 0 ? 0 : -1;
    H5Tclose(t);
    H5Aclose(a);
    return rc;
}

/* ---- small helpers ---- */

const char *sl_log_kind_name(sl_log_kind k) { return k == SL_LOG_RUN ? "run" : "measure"; }
const char *sl_log_dist_name(sl_log_dist d)
{
    return d == SL_LOG_DIST_F32 ? "float32" : d == SL_LOG_DIST_F16 ? "float16" : "none";
}
int sl_log_dist_parse(const char *s, sl_log_dist *out)
{
    if (!strcmp(s, "none") || !strcmp(s, "beta")) *out = SL_LOG_DIST_NONE;
    else if (!strcmp(s, "float32") || !strcmp(s, "f32")) *out = SL_LOG_DIST_F32;
    else if (!strcmp(s, "float16") || !strcmp(s, "f16")) *out = SL_LOG_DIST_F16;
    else return sl_fail(SL_EINPUT, "--dist: '%s' is not one of none, float32, float16", s);
    return SL_OK;
}

void sl_log_meta_init(sl_log_meta *m, sl_log_kind kind)
{
    memset(m, 0, sizeof *m);
    m->kind = kind;
    m->sampling = SL_SAMPLING_DEFAULT;
    m->eos = -1;
    m->shard_sequences = 16;
    m->lenience = 1;
    snprintf(m->rule, sizeof m->rule, "exact");
    m->schema_version = SL_LOG_SCHEMA_VERSION;
}

int sl_log_sha256_file(const char *path, char *out)
{
    FILE *f = fopen(path, "rb");
    if (!f) return sl_fail(SL_EINPUT, "cannot open %s: %s", path, strerror(errno));
    struct sha256_ctx ctx;
    sha256_init(&ctx);
    static __thread uint8_t buf[1 << 16];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, f)) > 0) sha256_update(&ctx, n, buf);
    int err = ferror(f);
    fclose(f);
    if (err) return sl_fail(SL_EINPUT, "reading %s failed", path);
    uint8_t d[SHA256_DIGEST_SIZE];
    sha256_digest(&ctx, sizeof d, d);
    for (int i = 0; i < SHA256_DIGEST_SIZE; i++) sprintf(out + 2 * i, "%02x", d[i]);
    return SL_OK;
}

uint16_t sl_log_f32_to_f16(float f) { return _cvtss_sh(f, _MM_FROUND_TO_NEAREST_INT); }
float sl_log_f16_to_f32(uint16_t h) { return _cvtsh_ss(h); }

static void f16_to_f32_n(const uint16_t *in, float *out, size_t n)
{
    size_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(out + i, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(in + i))));
    for (; i < n; i++) out[i] = _cvtsh_ss(in[i]);
}

/* The settings that determine a log's content: shards written under another fingerprint are
 * refused on resume. Tool version, revision and time are left out so a rebuilt binary resumes. */
static void fingerprint(const sl_log_meta *m, char *buf, size_t n)
{
    snprintf(buf, n,
             "schema=%d;kind=%s;target=%s;target_sha256=%s;draft=%s;draft_sha256=%s;source=%s;vocab=%llu;"
             "temperature=%.17g;top_k=%zu;top_p=%.17g;min_p=%.17g;seed=%llu;tokens=%llu;eos=%lld;dist=%s;"
             "shard_sequences=%llu;gamma=%llu;rule=%s;lenience=%.17g",
             SL_LOG_SCHEMA_VERSION, sl_log_kind_name(m->kind), m->target_name, m->target_sha256, m->draft_name,
             m->draft_sha256, m->source, (unsigned long long)m->vocab_size, m->sampling.temperature,
             m->sampling.top_k, m->sampling.top_p, m->sampling.min_p, (unsigned long long)m->seed,
             (unsigned long long)m->tokens_per_sequence, (long long)m->eos, sl_log_dist_name(m->dist),
             (unsigned long long)m->shard_sequences, (unsigned long long)m->gamma, m->rule, m->lenience);
}

static int write_meta(hid_t f, const sl_log_meta *m)
{
    int rc = SL_OK;
    rc |= attr_str(f, "schema", SL_LOG_SCHEMA_NAME);
    rc |= attr_i64(f, "schema_version", SL_LOG_SCHEMA_VERSION);
    rc |= attr_str(f, "kind", sl_log_kind_name(m->kind));
    rc |= attr_str(f, "target_name", m->target_name);
    rc |= attr_str(f, "target_sha256", m->target_sha256);
    rc |= attr_str(f, "draft_name", m->draft_name);
    rc |= attr_str(f, "draft_sha256", m->draft_sha256);
    rc |= attr_str(f, "source", m->source);
    rc |= attr_u64(f, "vocab_size", m->vocab_size);
    rc |= attr_f64(f, "temperature", m->sampling.temperature);
    rc |= attr_u64(f, "top_k", m->sampling.top_k);
    rc |= attr_f64(f, "top_p", m->sampling.top_p);
    rc |= attr_f64(f, "min_p", m->sampling.min_p);
    rc |= attr_u64(f, "seed", m->seed);
    rc |= attr_u64(f, "tokens_per_sequence", m->tokens_per_sequence);
    rc |= attr_i64(f, "eos", m->eos);
    rc |= attr_str(f, "dist", sl_log_dist_name(m->dist));
    rc |= attr_u64(f, "shard_sequences", m->shard_sequences);
    if (m->kind == SL_LOG_RUN) {
        rc |= attr_u64(f, "gamma", m->gamma);
        rc |= attr_str(f, "rule", m->rule);
        rc |= attr_f64(f, "lenience", m->lenience);
    }
    rc |= attr_str(f, "tool_version", SL_VERSION);
    rc |= attr_str(f, "source_revision", SL_SOURCE_REVISION);
    char ts[32];
    time_t now = time(NULL);
    struct tm tm;
    gmtime_r(&now, &tm);
    strftime(ts, sizeof ts, "%Y-%m-%dT%H:%M:%SZ", &tm);
    rc |= attr_str(f, "created_utc", ts);
    return rc ? SL_EFAIL : SL_OK;
}

/* ---- appending tables ---- */

typedef struct {
    hid_t dset;
    size_t width;     /* 1, or V for distributions */
    size_t esize;     /* bytes per element */
    hid_t ftype;
    unsigned char *buf; /* (chunk_rows, width) */
} col_w;

typedef struct {
    const table_def *def;
    hid_t group;
    int dist_level;   /* distributions: deflate level of the direct chunk writes (0 = raw) */
    unsigned char *zbuf; /* distributions: compressed chunk scratch */
    size_t zcap;
    size_t chunk_rows, nbuf;
    hsize_t nrows;
    col_w *cols; /* (def->n_cols) */
} table_w;

static void table_w_close(table_w *t)
{
    if (!t->cols) return;
    for (size_t c = 0; c < t->def->n_cols; c++) {
        if (t->cols[c].dset > 0) H5Dclose(t->cols[c].dset);
        free(t->cols[c].buf);
    }
    free(t->cols);
    free(t->zbuf);
    if (t->group > 0) H5Gclose(t->group);
    memset(t, 0, sizeof *t);
}

static size_t dist_chunk_rows(size_t V, sl_log_dist d)
{
    size_t bytes = V * (d == SL_LOG_DIST_F16 ? 2 : 4);
    size_t r = (1u << 20) / (bytes ? bytes : 1); /* chunks of about 1 MiB */
    return r < 1 ? 1 : r > 1024 ? 1024 : r;
}

static int table_w_create(table_w *t, hid_t file, const table_def *def, size_t V, sl_log_dist d, int level,
                          int dist_level)
{
    memset(t, 0, sizeof *t);
    t->def = def;
    int is_dist = def->cols[0].type == T_DIST;
    t->chunk_rows = is_dist ? dist_chunk_rows(V, d) : ROW_CHUNK;
    t->dist_level = is_dist ? dist_level : 0;
    t->group = H5Gcreate2(file, def->group, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    t->cols = calloc(def->n_cols, sizeof *t->cols);
    if (t->group < 0 || !t->cols) return sl_fail(SL_EFAIL, "cannot create group %s", def->group);
    for (size_t c = 0; c < def->n_cols; c++) {
        col_w *cw = &t->cols[c];
        cw->width = is_dist ? V : 1;
        cw->esize = type_size(def->cols[c].type, d);
        cw->ftype = file_type(def->cols[c].type, d);
        cw->buf = malloc(t->chunk_rows * cw->width * cw->esize);
        int rank = is_dist ? 2 : 1;
        hsize_t dims[2] = {0, V}, maxd[2] = {H5S_UNLIMITED, V}, chunk[2] = {t->chunk_rows, V};
        hid_t sp = H5Screate_simple(rank, dims, maxd);
        hid_t pl = H5Pcreate(H5P_DATASET_CREATE);
        H5Pset_chunk(pl, rank, chunk);
        int lv = is_dist ? dist_level : level;
        if (lv > 0) H5Pset_deflate(pl, (unsigned)lv);
        cw->dset = H5Dcreate2(t->group, def->cols[c].name, cw->ftype, sp, H5P_DEFAULT, pl, H5P_DEFAULT);
        H5Pclose(pl);
        H5Sclose(sp);
        if (cw->dset < 0 || !cw->buf) return sl_fail(SL_EFAIL, "cannot create dataset %s/%s", def->group, def->cols[c].name);
    }
    return SL_OK;
}

/* Distributions go out as whole chunks written directly (H5Dwrite_chunk), deflated by libdeflate
 * when that saves at least 10% and stored raw otherwise, with the deflate filter marked as skipped
 * for that chunk (HDF5's optional-filter mask, which every HDF5 reader, h5py included, honours).
 * float32 probabilities deflate by only ~7%: storing those chunks raw spares every reader an
 * inflate pass that buys almost nothing. The last, partial chunk is padded with zeros, as HDF5
 * stores edge chunks whole. */
static int dist_flush(table_w *t)
{
    size_t V = t->cols[0].width, esz = t->cols[0].esize, bytes = t->chunk_rows * V * esz;
    if (t->nrows % t->chunk_rows) return sl_fail(SL_EFAIL, "distribution rows not chunk-aligned");
    if (t->zcap < bytes + 1024) {
        free(t->zbuf);
        t->zcap = bytes + 1024;
        t->zbuf = malloc(t->zcap);
        if (!t->zbuf) return sl_fail(SL_EFAIL, "out of memory");
    }
    struct libdeflate_compressor *z = t->dist_level > 0 ? libdeflate_alloc_compressor(t->dist_level) : NULL;
    int rc = SL_OK;
    for (size_t c = 0; c < t->def->n_cols && !rc; c++) {
        col_w *cw = &t->cols[c];
        if (t->nbuf < t->chunk_rows) memset(cw->buf + t->nbuf * V * esz, 0, (t->chunk_rows - t->nbuf) * V * esz);
        hsize_t dims[2] = {t->nrows + t->nbuf, V}, off[2] = {t->nrows, 0};
        if (H5Dset_extent(cw->dset, dims) < 0) {
            rc = sl_fail(SL_EFAIL, "cannot extend %s/%s", t->def->group, t->def->cols[c].name);
            break;
        }
        size_t zn = z ? libdeflate_zlib_compress(z, cw->buf, bytes, t->zbuf, t->zcap) : 0;
        int raw = !(zn > 0 && zn <= bytes - bytes / 10);
        /* Mask bit 0 set: the pipeline's filter 0 (deflate; 0 filters when the level is 0) was skipped. */
        uint32_t mask = raw && t->dist_level > 0 ? 1u : 0u;
        if (H5Dwrite_chunk(cw->dset, H5P_DEFAULT, mask, off, raw ? bytes : zn, raw ? (void *)cw->buf : (void *)t->zbuf) < 0)
            rc = sl_fail(SL_EFAIL, "writing %s/%s failed (disk full?)", t->def->group, t->def->cols[c].name);
    }
    if (z) libdeflate_free_compressor(z);
    if (!rc) {
        t->nrows += t->nbuf;
        t->nbuf = 0;
    }
    return rc;
}

static int table_w_flush(table_w *t)
{
    if (t->nbuf == 0) return SL_OK;
    if (t->def->cols[0].type == T_DIST) return dist_flush(t);
    for (size_t c = 0; c < t->def->n_cols; c++) {
        col_w *cw = &t->cols[c];
        int rank = cw->width > 1 || t->def->cols[c].type == T_DIST ? 2 : 1;
        hsize_t dims[2] = {t->nrows + t->nbuf, cw->width};
        hsize_t start[2] = {t->nrows, 0}, count[2] = {t->nbuf, cw->width};
        if (H5Dset_extent(cw->dset, dims) < 0) return sl_fail(SL_EFAIL, "cannot extend %s/%s", t->def->group, t->def->cols[c].name);
        hid_t fs = H5Dget_space(cw->dset);
        H5Sselect_hyperslab(fs, H5S_SELECT_SET, start, NULL, count, NULL);
        hid_t ms = H5Screate_simple(rank, count, NULL);
        herr_t e = H5Dwrite(cw->dset, cw->ftype, ms, fs, H5P_DEFAULT, cw->buf);
        H5Sclose(ms);
        H5Sclose(fs);
        if (e < 0) return sl_fail(SL_EFAIL, "writing %s/%s failed (disk full?)", t->def->group, t->def->cols[c].name);
    }
    t->nrows += t->nbuf;
    t->nbuf = 0;
    return SL_OK;
}

/* Pointer to column c of the row being filled. */
static void *slot(table_w *t, size_t c) { return t->cols[c].buf + t->nbuf * t->cols[c].width * t->cols[c].esize; }
static void set_i(table_w *t, size_t c, int64_t v)
{
    void *s = slot(t, c);
    switch (t->def->cols[c].type) {
    case T_I8: *(int8_t *)s = (int8_t)v; break;
    case T_I32: *(int32_t *)s = (int32_t)v; break;
    default: *(int64_t *)s = v; break;
    }
}
static void set_d(table_w *t, size_t c, double v) { *(double *)slot(t, c) = v; }
static int row_done(table_w *t) { return ++t->nbuf == t->chunk_rows ? table_w_flush(t) : SL_OK; }

/* Appends n rows of src_group (a group with the same columns) to t, chunk-aligned. */
static int table_w_append_from(table_w *t, hid_t src_group, size_t n)
{
    size_t off = 0;
    while (off < n) {
        size_t m = t->chunk_rows - t->nbuf;
        if (m > n - off) m = n - off;
        for (size_t c = 0; c < t->def->n_cols; c++) {
            col_w *cw = &t->cols[c];
            hid_t d = H5Dopen2(src_group, t->def->cols[c].name, H5P_DEFAULT);
            if (d < 0) return sl_fail(SL_EINPUT, "shard lacks %s/%s", t->def->group, t->def->cols[c].name);
            int rank = t->def->cols[c].type == T_DIST ? 2 : 1;
            hsize_t start[2] = {off, 0}, count[2] = {m, cw->width};
            hid_t fs = H5Dget_space(d);
            H5Sselect_hyperslab(fs, H5S_SELECT_SET, start, NULL, count, NULL);
            hid_t ms = H5Screate_simple(rank, count, NULL);
            herr_t e = H5Dread(d, cw->ftype, ms, fs, H5P_DEFAULT, slot(t, c));
            H5Sclose(ms);
            H5Sclose(fs);
            H5Dclose(d);
            if (e < 0) return sl_fail(SL_EINPUT, "cannot read shard dataset %s/%s", t->def->group, t->def->cols[c].name);
        }
        t->nbuf += m;
        off += m;
        if (t->nbuf == t->chunk_rows) {
            int rc = table_w_flush(t);
            if (rc) return rc;
        }
    }
    return SL_OK;
}

/* ---- the writer ---- */

struct sl_log_writer {
    sl_log_meta meta;
    sl_log_write_opts opts;
    char *path, *dir;
    char fp[2048];
    int lock_fd;
    /* open shard */
    hid_t file;
    size_t shard;
    char *shard_tmp, *shard_path;
    size_t n_tables;
    table_w tables[4];
    size_t shard_first, shard_nseq;
    /* open sequence */
    int in_seq;
    int64_t seq, prompt_id;
    size_t n_prompt, n_rows, n_generated, n_drafts;
    int32_t last_iter_seq_pos;
    float *tmpf; /* (V) */
};

static char *str_printf(const char *fmt, const char *a, long b)
{
    size_t n = strlen(a) + 64;
    char *s = malloc(n);
    if (s) snprintf(s, n, fmt, a, b);
    return s;
}

static int fsync_path(const char *path)
{
    int fd = open(path, O_RDONLY);
    if (fd < 0) return -1;
    int r = fsync(fd);
    close(fd);
    return r;
}

int sl_log_writer_open(sl_log_writer **out, const char *path, const sl_log_meta *meta, const sl_log_write_opts *o)
{
    h5_quiet();
    *out = NULL;
    if (meta->vocab_size < 2) return sl_fail(SL_EINPUT, "vocabulary size %llu: expected >= 2", (unsigned long long)meta->vocab_size);
    if (meta->shard_sequences < 1) return sl_fail(SL_EINPUT, "--shard-sequences: expected >= 1");
    sl_log_writer *w = calloc(1, sizeof *w);
    if (!w) return sl_fail(SL_EFAIL, "out of memory");
    w->meta = *meta;
    w->opts = o ? *o : SL_LOG_WRITE_OPTS_DEFAULT;
    w->lock_fd = -1;
    w->file = -1;
    w->path = strdup(path);
    w->dir = str_printf("%s.d", path, 0);
    w->tmpf = malloc(meta->vocab_size * sizeof *w->tmpf);
    fingerprint(meta, w->fp, sizeof w->fp);
    int rc = SL_OK;
    if (!w->path || !w->dir || !w->tmpf) rc = sl_fail(SL_EFAIL, "out of memory");
    if (!rc && mkdir(w->dir, 0777) != 0 && errno != EEXIST)
        rc = sl_fail(SL_EINPUT, "cannot write output %s: cannot create %s: %s", path, w->dir, strerror(errno));
    if (!rc) {
        char *lk = str_printf("%s/lock", w->dir, 0);
        w->lock_fd = lk ? open(lk, O_RDWR | O_CREAT, 0666) : -1;
        if (w->lock_fd < 0) rc = sl_fail(SL_EINPUT, "cannot write output %s: %s", path, strerror(errno));
        else if (flock(w->lock_fd, LOCK_EX | LOCK_NB) != 0)
            rc = sl_fail(SL_EINPUT, "%s is being written by another process (lock %s)", path, lk);
        free(lk);
    }
    if (!rc) { /* the final file's directory must be writable too */
        char *probe = str_printf("%s.probe.%ld", path, (long)getpid());
        int fd = probe ? open(probe, O_WRONLY | O_CREAT | O_TRUNC, 0666) : -1;
        if (fd < 0) rc = sl_fail(SL_EINPUT, "cannot write output %s: %s", path, strerror(errno));
        else {
            close(fd);
            unlink(probe);
        }
        free(probe);
    }
    if (!rc) { /* temporary files of a killed run: never complete, safe to remove (we hold the lock) */
        DIR *d = opendir(w->dir);
        struct dirent *e;
        while (d && (e = readdir(d))) {
            if (strstr(e->d_name, ".tmp.")) {
                char full[4096];
                snprintf(full, sizeof full, "%s/%s", w->dir, e->d_name);
                unlink(full);
            }
        }
        if (d) closedir(d);
        /* ... and a final file's temporary from a run killed while assembling (OUT.h5.tmp.PID). */
        char parent[4096];
        snprintf(parent, sizeof parent, "%s", path);
        char *slash = strrchr(parent, '/');
        const char *base = slash ? slash + 1 : path;
        if (slash) *slash = 0;
        else snprintf(parent, sizeof parent, ".");
        size_t bl = strlen(base);
        d = opendir(slash && !parent[0] ? "/" : parent);
        while (d && (e = readdir(d))) {
            if (!strncmp(e->d_name, base, bl) && !strncmp(e->d_name + bl, ".tmp.", 5)) {
                char full[8300];
                snprintf(full, sizeof full, "%s/%s", slash && !parent[0] ? "" : parent, e->d_name);
                unlink(full);
            }
        }
        if (d) closedir(d);
    }
    if (rc) {
        sl_log_writer_close(w);
        return rc;
    }
    *out = w;
    return SL_OK;
}

static void shard_abandon(sl_log_writer *w)
{
    for (size_t i = 0; i < w->n_tables; i++) table_w_close(&w->tables[i]);
    w->n_tables = 0;
    if (w->file >= 0) H5Fclose(w->file);
    w->file = -1;
    if (w->shard_tmp) unlink(w->shard_tmp);
    free(w->shard_tmp);
    free(w->shard_path);
    w->shard_tmp = w->shard_path = NULL;
}

void sl_log_writer_close(sl_log_writer *w)
{
    if (!w) return;
    shard_abandon(w);
    if (w->lock_fd >= 0) close(w->lock_fd);
    free(w->path);
    free(w->dir);
    free(w->tmpf);
    free(w);
}

static char *shard_name(const sl_log_writer *w, size_t k)
{
    size_t n = strlen(w->dir) + 64;
    char *s = malloc(n);
    if (s) snprintf(s, n, "%s/shard-%06zu.h5", w->dir, k);
    return s;
}

/* Reads a whole 1-D integer dataset as int64. */
static int read_i64_all(hid_t g, const char *name, int64_t **out, size_t *n)
{
    hid_t d = H5Dopen2(g, name, H5P_DEFAULT);
    if (d < 0) return -1;
    hid_t s = H5Dget_space(d);
    hsize_t dims[2] = {0, 0};
    int rank = H5Sget_simple_extent_dims(s, dims, NULL);
    H5Sclose(s);
    if (rank != 1) {
        H5Dclose(d);
        return -1;
    }
    *n = dims[0];
    *out = malloc((dims[0] + 1) * sizeof **out);
    int rc = *out && H5Dread(d, H5T_NATIVE_INT64, H5S_ALL, H5S_ALL, H5P_DEFAULT, *out) >= 0 ? 0 : -1;
    H5Dclose(d);
    return rc;
}

int sl_log_shard_done(sl_log_writer *w, size_t k, size_t n_seq, const int32_t *const *prompts, const size_t *n_prompt,
                      int *done)
{
    *done = 0;
    char *p = shard_name(w, k);
    if (!p) return sl_fail(SL_EFAIL, "out of memory");
    struct stat st;
    if (stat(p, &st) != 0) {
        free(p);
        return SL_OK;
    }
    int rc = SL_OK;
    hid_t f = H5Fopen(p, H5F_ACC_RDONLY, H5P_DEFAULT);
    char fp[2048] = "";
    int64_t nseq = -1;
    int fp_ver = -1;
    if (f < 0) rc = sl_fail(SL_EINPUT, "%s is not a readable HDF5 shard; remove it to recompute", p);
    else if (!get_attr_str(f, "fingerprint", fp, sizeof fp) && sscanf(fp, "schema=%d;", &fp_ver) == 1 &&
             fp_ver != SL_LOG_SCHEMA_VERSION)
        rc = sl_fail(SL_EINPUT, "%s has schema version %d; this speclab writes version %d (use another output)", p, fp_ver,
                     SL_LOG_SCHEMA_VERSION);
    else if (get_attr_str(f, "fingerprint", fp, sizeof fp) || strcmp(fp, w->fp))
        rc = sl_fail(SL_EINPUT, "%s was written with other settings; use another output or remove %s", p, w->dir);
    else if (get_attr_num(f, "n_sequences", H5T_NATIVE_INT64, &nseq) || nseq < 0 || (size_t)nseq > n_seq)
        rc = sl_fail(SL_EINPUT, "%s holds %lld sequences, more than the %zu prompts it should cover (prompt list shrank?)",
                     p, (long long)nseq, n_seq);
    if (!rc) {
        int64_t *np = NULL, *tok = NULL;
        size_t nn = 0, nt = 0;
        hid_t gs = H5Gopen2(f, "sequences", H5P_DEFAULT), gp = H5Gopen2(f, "prompts", H5P_DEFAULT);
        if (gs < 0 || gp < 0 || read_i64_all(gs, "n_prompt_tokens", &np, &nn) || read_i64_all(gp, "tokens", &tok, &nt) ||
            nn != (size_t)nseq)
            rc = sl_fail(SL_EINPUT, "%s is not a complete shard; remove it to recompute", p);
        size_t off = 0;
        for (size_t i = 0; !rc && i < nn; i++) {
            int same = (size_t)np[i] == n_prompt[i] && off + n_prompt[i] <= nt;
            for (size_t j = 0; same && j < n_prompt[i]; j++) same = tok[off + j] == prompts[i][j];
            if (!same)
                rc = sl_fail(SL_EINPUT, "%s: prompt %zu differs from the one logged; the prompt list changed (use another output)",
                             p, k * w->meta.shard_sequences + i);
            off += (size_t)np[i];
        }
        free(np);
        free(tok);
        if (gs >= 0) H5Gclose(gs);
        if (gp >= 0) H5Gclose(gp);
        if (!rc) *done = (size_t)nseq == n_seq;
    }
    if (f >= 0) H5Fclose(f);
    free(p);
    return rc;
}

int sl_log_shard_begin(sl_log_writer *w, size_t k)
{
    shard_abandon(w);
    w->shard = k;
    w->shard_path = shard_name(w, k);
    w->shard_tmp = w->shard_path ? str_printf("%s.tmp.%ld", w->shard_path, (long)getpid()) : NULL;
    if (!w->shard_tmp) return sl_fail(SL_EFAIL, "out of memory");
    w->file = H5Fcreate(w->shard_tmp, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    if (w->file < 0) return sl_fail(SL_EINPUT, "cannot write output %s", w->shard_tmp);
    size_t nt;
    const table_def *defs = kind_tables(w->meta.kind, &nt);
    int rc = SL_OK;
    w->n_tables = 0;
    for (size_t i = 0; i < nt && !rc; i++) {
        if (defs[i].optional && w->meta.dist == SL_LOG_DIST_NONE) {
            memset(&w->tables[w->n_tables++], 0, sizeof(table_w));
            continue;
        }
        rc = table_w_create(&w->tables[w->n_tables++], w->file, &defs[i], w->meta.vocab_size, w->meta.dist,
                            w->opts.deflate_level, w->opts.dist_level);
    }
    w->shard_first = k * w->meta.shard_sequences;
    w->shard_nseq = 0;
    w->in_seq = 0;
    return rc;
}

int sl_log_seq_begin(sl_log_writer *w, int64_t sequence, int64_t prompt_id, const int32_t *prompt, size_t n_prompt)
{
    if (w->file < 0) return sl_fail(SL_EFAIL, "sl_log_seq_begin: no open shard");
    w->in_seq = 1;
    w->seq = sequence;
    w->prompt_id = prompt_id;
    w->n_prompt = n_prompt;
    w->n_rows = w->n_generated = w->n_drafts = 0;
    table_w *t = &w->tables[w->meta.kind == SL_LOG_MEASURE ? M_PROMPT : R_PROMPT];
    for (size_t i = 0; i < n_prompt; i++) {
        set_i(t, 0, prompt[i]);
        int rc = row_done(t);
        if (rc) return rc;
    }
    return SL_OK;
}

int sl_log_seq_end(sl_log_writer *w, int mode, double wall_s)
{
    table_w *t = &w->tables[w->meta.kind == SL_LOG_MEASURE ? M_SEQ : R_SEQ];
    set_i(t, 0, w->seq);
    set_i(t, 1, w->prompt_id);
    set_i(t, 2, (int64_t)w->n_prompt);
    set_i(t, 3, (int64_t)w->n_generated);
    set_i(t, 4, (int64_t)w->n_rows);
    if (w->meta.kind == SL_LOG_RUN) {
        set_i(t, 5, (int64_t)w->n_drafts);
        set_i(t, 6, mode);
        set_d(t, 7, wall_s);
    }
    w->in_seq = 0;
    w->shard_nseq++;
    return row_done(t);
}

int sl_log_seq_set_generated(sl_log_writer *w, size_t n)
{
    if (!w->in_seq) return sl_fail(SL_EFAIL, "sl_log_seq_set_generated: no open sequence");
    w->n_generated = n;
    return SL_OK;
}

int sl_log_add_position(sl_log_writer *w, const double *p, const double *q, int32_t token)
{
    size_t V = w->meta.vocab_size;
    if (token < 0 || (size_t)token >= V) return sl_fail(SL_EINPUT, "token %d outside [0, %zu)", token, V);
    table_w *t = &w->tables[M_POS];
    double beta = sl_dist_beta(p, q, V);
    set_i(t, 0, w->seq);
    set_i(t, 1, (int64_t)w->n_rows);
    set_i(t, 2, token);
    set_d(t, 3, beta);
    set_d(t, 4, sl_dist_dlk(p, q, V));
    set_d(t, 5, sl_dist_entropy(p, V));
    set_d(t, 6, sl_dist_entropy(q, V));
    set_d(t, 7, q[sl_dist_argmax(q, V)]);
    set_d(t, 8, p[token]);
    set_d(t, 9, q[token]);
    int rc = row_done(t);
    if (!rc && w->meta.dist != SL_LOG_DIST_NONE) {
        table_w *d = &w->tables[M_DIST];
        for (int c = 0; c < 2; c++) {
            const double *src = c == 0 ? p : q;
            void *dst = slot(d, (size_t)c);
            if (w->meta.dist == SL_LOG_DIST_F32)
                for (size_t x = 0; x < V; x++) ((float *)dst)[x] = (float)src[x];
            else
                for (size_t x = 0; x < V; x++) ((uint16_t *)dst)[x] = sl_log_f32_to_f16((float)src[x]);
        }
        rc = row_done(d);
    }
    w->n_rows++;
    w->n_generated++;
    return rc;
}

int sl_log_add_iteration(sl_log_writer *w, const sl_spec_iter_record *rec, const int *accepted_flags)
{
    table_w *t = &w->tables[R_ITER];
    set_i(t, 0, w->seq);
    set_i(t, 1, (int64_t)rec->iteration);
    set_i(t, 2, (int64_t)rec->gamma);
    set_i(t, 3, (int64_t)rec->gamma);
    set_i(t, 4, (int64_t)rec->n_accepted);
    set_i(t, 5, (int64_t)rec->n_emitted);
    set_d(t, 6, rec->draft_s);
    set_d(t, 7, rec->verify_s);
    set_d(t, 8, rec->sample_s);
    int rc = row_done(t);
    table_w *d = &w->tables[R_DRAFT];
    for (size_t i = 0; !rc && i < rec->gamma; i++) {
        set_i(d, 0, w->seq);
        set_i(d, 1, (int64_t)rec->iteration);
        set_i(d, 2, (int64_t)i + 1);
        set_i(d, 3, rec->drafts ? rec->drafts[i] : -1);
        set_i(d, 4, accepted_flags ? accepted_flags[i] : i < rec->n_accepted);
        set_d(d, 5, rec->beta ? rec->beta[i] : NAN);
        rc = row_done(d);
        w->n_drafts++;
    }
    w->n_rows++;
    w->n_generated += rec->n_emitted;
    return rc;
}

int sl_log_shard_commit(sl_log_writer *w)
{
    int rc = SL_OK;
    for (size_t i = 0; i < w->n_tables && !rc; i++)
        if (w->tables[i].def) rc = table_w_flush(&w->tables[i]);
    if (!rc) rc = attr_str(w->file, "fingerprint", w->fp);
    if (!rc) rc = attr_i64(w->file, "shard", (int64_t)w->shard);
    if (!rc) rc = attr_i64(w->file, "first_sequence", (int64_t)w->shard_first);
    if (!rc) rc = attr_i64(w->file, "n_sequences", (int64_t)w->shard_nseq);
    for (size_t i = 0; i < w->n_tables; i++) table_w_close(&w->tables[i]);
    w->n_tables = 0;
    if (H5Fclose(w->file) < 0 && !rc) rc = sl_fail(SL_EFAIL, "closing %s failed", w->shard_tmp);
    w->file = -1;
    if (!rc && fsync_path(w->shard_tmp) != 0) rc = sl_fail(SL_EFAIL, "fsync %s failed: %s", w->shard_tmp, strerror(errno));
    if (!rc && rename(w->shard_tmp, w->shard_path) != 0)
        rc = sl_fail(SL_EFAIL, "renaming into %s failed: %s", w->shard_path, strerror(errno));
    if (!rc) fsync_path(w->dir);
    shard_abandon(w);
    return rc;
}

int sl_log_set_costs(sl_log_writer *w, double c, double draft_step_s, double target_step_s, const long *n,
                     const double *v, const double *call_s, size_t count)
{
    char *path = str_printf("%s/costs.h5", w->dir, 0), *tmp = path ? str_printf("%s.tmp.%ld", path, getpid()) : NULL;
    if (!tmp) {
        free(path);
        return sl_fail(SL_EFAIL, "out of memory");
    }
    int rc = SL_OK;
    hid_t f = H5Fcreate(tmp, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    table_w t;
    memset(&t, 0, sizeof t);
    if (f < 0) rc = sl_fail(SL_EINPUT, "cannot write output %s", tmp);
    if (!rc) rc = table_w_create(&t, f, &costs_table, 1, SL_LOG_DIST_NONE, w->opts.deflate_level, 0);
    for (size_t i = 0; !rc && i < count; i++) {
        set_i(&t, 0, n[i]);
        set_d(&t, 1, v[i]);
        set_d(&t, 2, call_s ? call_s[i] : NAN);
        rc = row_done(&t);
    }
    if (!rc) rc = table_w_flush(&t);
    if (!rc) rc = attr_f64(t.group, "c", c);
    if (!rc) rc = attr_f64(t.group, "draft_step_s", draft_step_s);
    if (!rc) rc = attr_f64(t.group, "target_step_s", target_step_s);
    table_w_close(&t);
    if (f >= 0) H5Fclose(f);
    if (!rc && (fsync_path(tmp) != 0 || rename(tmp, path) != 0)) rc = sl_fail(SL_EFAIL, "writing %s failed", path);
    if (rc) unlink(tmp);
    free(tmp);
    free(path);
    return rc;
}

int sl_log_assemble(sl_log_writer *w, size_t n_shards)
{
    char *tmp = str_printf("%s.tmp.%ld", w->path, (long)getpid());
    if (!tmp) return sl_fail(SL_EFAIL, "out of memory");
    int rc = SL_OK;
    hid_t f = H5Fcreate(tmp, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    if (f < 0) rc = sl_fail(SL_EINPUT, "cannot write output %s", tmp);
    size_t nt;
    const table_def *defs = kind_tables(w->meta.kind, &nt);
    table_w tabs[4];
    memset(tabs, 0, sizeof tabs);
    for (size_t i = 0; i < nt && !rc; i++)
        if (!(defs[i].optional && w->meta.dist == SL_LOG_DIST_NONE))
            rc = table_w_create(&tabs[i], f, &defs[i], w->meta.vocab_size, w->meta.dist, w->opts.deflate_level,
                                w->opts.dist_level);
    int64_t nseq_total = 0;
    for (size_t k = 0; k < n_shards && !rc; k++) {
        char *p = shard_name(w, k);
        hid_t sf = p ? H5Fopen(p, H5F_ACC_RDONLY, H5P_DEFAULT) : -1;
        char fp[2048] = "";
        int64_t ns = 0;
        if (sf < 0) rc = sl_fail(SL_EINPUT, "cannot open shard %s", p ? p : "?");
        else if (get_attr_str(sf, "fingerprint", fp, sizeof fp) || strcmp(fp, w->fp) ||
                 get_attr_num(sf, "n_sequences", H5T_NATIVE_INT64, &ns))
            rc = sl_fail(SL_EINPUT, "%s was written with other settings", p);
        nseq_total += ns;
        for (size_t i = 0; i < nt && !rc; i++) {
            if (!tabs[i].def) continue;
            hid_t g = H5Gopen2(sf, defs[i].group, H5P_DEFAULT);
            hid_t d = g >= 0 ? H5Dopen2(g, defs[i].cols[0].name, H5P_DEFAULT) : -1;
            hsize_t dims[2] = {0, 0};
            if (d >= 0) {
                hid_t s = H5Dget_space(d);
                H5Sget_simple_extent_dims(s, dims, NULL);
                H5Sclose(s);
                H5Dclose(d);
            }
            if (g < 0 || d < 0) rc = sl_fail(SL_EINPUT, "%s lacks %s", p, defs[i].group);
            else rc = table_w_append_from(&tabs[i], g, dims[0]);
            if (g >= 0) H5Gclose(g);
        }
        if (sf >= 0) H5Fclose(sf);
        free(p);
    }
    for (size_t i = 0; i < nt && !rc; i++)
        if (tabs[i].def) rc = table_w_flush(&tabs[i]);
    for (size_t i = 0; i < nt; i++) table_w_close(&tabs[i]);
    if (!rc) {
        rc = write_meta(f, &w->meta);
        if (!rc) rc = attr_i64(f, "n_sequences", nseq_total);
        if (!rc) rc = attr_i64(f, "n_shards", (int64_t)n_shards);
    }
    if (!rc && w->meta.kind == SL_LOG_RUN) { /* costs, when measured */
        char *cp = str_printf("%s/costs.h5", w->dir, 0);
        struct stat st;
        if (cp && stat(cp, &st) == 0) {
            hid_t cf = H5Fopen(cp, H5F_ACC_RDONLY, H5P_DEFAULT);
            if (cf < 0 || H5Ocopy(cf, "costs", f, "costs", H5P_DEFAULT, H5P_DEFAULT) < 0)
                rc = sl_fail(SL_EINPUT, "cannot copy costs from %s", cp);
            if (cf >= 0) H5Fclose(cf);
        }
        free(cp);
    }
    if (f >= 0 && H5Fclose(f) < 0 && !rc) rc = sl_fail(SL_EFAIL, "closing %s failed", tmp);
    if (!rc && fsync_path(tmp) != 0) rc = sl_fail(SL_EFAIL, "fsync %s failed", tmp);
    if (!rc && rename(tmp, w->path) != 0) rc = sl_fail(SL_EINPUT, "cannot rename %s into %s: %s", tmp, w->path, strerror(errno));
    if (rc) unlink(tmp);
    free(tmp);
    return rc;
}

/* ---- measuring through sl_lm ---- */

int sl_log_measure(sl_lm *target, sl_lm *draft, const sl_log_prompts *pr, const sl_log_meta *meta_in,
                   const sl_log_write_opts *o, const char *path, int progress)
{
    if (target->vocab_size != draft->vocab_size)
        return sl_fail(SL_EINPUT, "vocabulary mismatch: the target has %zu tokens, the draft %zu", target->vocab_size,
                       draft->vocab_size);
    if (pr->n == 0) return sl_fail(SL_EINPUT, "no prompts");
    for (size_t i = 0; i < pr->n; i++)
        if (pr->len[i] == 0) return sl_fail(SL_EINPUT, "prompt %zu is empty", i);
    sl_log_meta meta = *meta_in;
    meta.kind = SL_LOG_MEASURE;
    meta.vocab_size = target->vocab_size;
    size_t V = meta.vocab_size, S = meta.shard_sequences;
    sl_log_writer *w = NULL;
    int rc = sl_log_writer_open(&w, path, &meta, o);
    if (rc) return rc;
    double *p = malloc(V * sizeof *p), *q = malloc(V * sizeof *q);
    gsl_rng *rng = sl_rng_alloc(meta.seed, SL_STREAM_TARGET, 0);
    if (!p || !q || !rng) rc = sl_fail(SL_EFAIL, "out of memory");
    size_t n_shards = (pr->n + S - 1) / S;
    for (size_t k = 0; k < n_shards && !rc; k++) {
        size_t first = k * S, n = pr->n - first < S ? pr->n - first : S;
        int done = 0;
        rc = sl_log_shard_done(w, k, n, pr->tokens + first, pr->len + first, &done);
        if (rc || done) continue;
        rc = sl_log_shard_begin(w, k);
        for (size_t s = first; s < first + n && !rc; s++) {
            sl_rng_reseed(rng, meta.seed, SL_STREAM_TARGET, s);
            rc = sl_log_seq_begin(w, (int64_t)s, pr->id ? pr->id[s] : (int64_t)s, pr->tokens[s], pr->len[s]);
            if (!rc) rc = target->truncate(target->self, 0);
            if (!rc) rc = draft->truncate(draft->self, 0);
            if (!rc) rc = target->extend(target->self, pr->tokens[s], pr->len[s], 1, p);
            if (!rc) rc = draft->extend(draft->self, pr->tokens[s], pr->len[s], 1, q);
            for (size_t t = 0; t < meta.tokens_per_sequence && !rc; t++) {
                int32_t tok = (int32_t)sl_dist_sample_u(p, V, sl_rng_uniform53(rng));
                rc = sl_log_add_position(w, p, q, tok);
                if (rc || (meta.eos >= 0 && tok == meta.eos) || t + 1 == meta.tokens_per_sequence) break;
                rc = target->extend(target->self, &tok, 1, 1, p);
                if (!rc) rc = draft->extend(draft->self, &tok, 1, 1, q);
            }
            if (!rc) rc = sl_log_seq_end(w, 0, 0);
        }
        if (!rc) rc = sl_log_shard_commit(w);
        if (!rc && progress) fprintf(stderr, "\rmeasure: shard %zu/%zu", k + 1, n_shards);
    }
    if (progress) fprintf(stderr, "\n");
    if (!rc) rc = sl_log_assemble(w, n_shards);
    sl_log_writer_close(w);
    if (rng) gsl_rng_free(rng);
    free(p);
    free(q);
    return rc;
}

/* ---- reading ---- */

typedef struct {
    hid_t d;
    int type;
} col_r;

struct sl_log_reader {
    char *path;
    hid_t file;
    sl_log_meta meta;
    const table_def *defs;
    size_t n_tables;
    col_r cols[4][16];
    size_t rows[4];
    int has_dists;
    sl_log_dist dist_type; /* from the dataset's type */
    size_t dist_chunk;
    int dist_deflate;      /* 1: the only filter is deflate; 0: no filter; -1: other (naive path only) */
    /* fast path scratch */
    size_t raw_cap;
    unsigned char **raw;   /* per chunk slot: compressed bytes */
    size_t *raw_n;
    size_t n_slots;
    uint16_t **h16;        /* per thread: (chunk, V) half scratch */
    int n_h16;
    struct libdeflate_decompressor **dc; /* per thread */
    int n_dc;
    /* direct access: the file mapped read-only and every distribution chunk's place in it */
    const unsigned char *map;
    size_t map_len;
    size_t n_chunks;
    uint64_t *caddr, *csize; /* (n_chunks, 2): p then q */
    uint32_t *cmask;         /* (n_chunks, 2) */
    int nt_scratch;
    unsigned char **zs;      /* per thread: (chunk bytes) inflated chunk */
    float **fs;              /* per thread: (2, chunk rows, V) float copies when needed */
    /* random access cache */
    long cache_chunk;
    float *cache_p, *cache_q; /* (dist_chunk, V) */
};

static int type_ok(hid_t d, int type, sl_log_dist *dist_out)
{
    hid_t t = H5Dget_type(d);
    H5T_class_t cl = H5Tget_class(t);
    size_t sz = H5Tget_size(t);
    H5Tclose(t);
    switch (type) {
    case T_I8:
    case T_I32:
    case T_I64: return cl == H5T_INTEGER;
    case T_F64: return cl == H5T_FLOAT && sz == 8;
    default:
        if (cl != H5T_FLOAT || (sz != 2 && sz != 4)) return 0;
        *dist_out = sz == 2 ? SL_LOG_DIST_F16 : SL_LOG_DIST_F32;
        return 1;
    }
}

void sl_log_close(sl_log_reader *r)
{
    if (!r) return;
    for (size_t i = 0; i < 4; i++)
        for (size_t c = 0; c < 16; c++)
            if (r->cols[i][c].d > 0) H5Dclose(r->cols[i][c].d);
    if (r->file > 0) H5Fclose(r->file);
    for (size_t i = 0; i < r->n_slots; i++) free(r->raw[i]);
    free(r->raw);
    free(r->raw_n);
    for (int i = 0; i < r->n_h16; i++) free(r->h16[i]);
    free(r->h16);
    for (int i = 0; i < r->n_dc; i++) libdeflate_free_decompressor(r->dc[i]);
    free(r->dc);
    if (r->map) munmap((void *)r->map, r->map_len);
    free(r->caddr), free(r->csize), free(r->cmask);
    for (int i = 0; i < r->nt_scratch; i++) free(r->zs[i]), free(r->fs[i]);
    free(r->zs), free(r->fs);
    free(r->cache_p);
    free(r->cache_q);
    free(r->path);
    free(r);
}

static int read_cols_i64(sl_log_reader *r, size_t t, size_t c, size_t first, size_t n, int64_t *out);

/* Finds every distribution chunk's address in the file and maps the file, so that chunks can be
 * decoded on many threads without calling HDF5 (which is not thread-safe). Any surprise (a user
 * block, an unallocated chunk, an address beyond the end) leaves direct access off; the HDF5 paths
 * still work. */
static void map_chunks(sl_log_reader *r)
{
    size_t ch = r->dist_chunk, n = ch ? (r->rows[M_DIST] + ch - 1) / ch : 0;
    hid_t fcpl = H5Fget_create_plist(r->file);
    hsize_t ub = 1;
    H5Pget_userblock(fcpl, &ub);
    H5Pclose(fcpl);
    if (n == 0 || ub != 0) return;
    r->caddr = malloc(2 * n * sizeof *r->caddr);
    r->csize = malloc(2 * n * sizeof *r->csize);
    r->cmask = malloc(2 * n * sizeof *r->cmask);
    int fd = open(r->path, O_RDONLY);
    struct stat st;
    int ok = r->caddr && r->csize && r->cmask && fd >= 0 && fstat(fd, &st) == 0;
    for (size_t k = 0; ok && k < n; k++)
        for (int c = 0; c < 2 && ok; c++) {
            hsize_t off[2] = {k * ch, 0}, size = 0;
            haddr_t addr = 0;
            unsigned mask = 0;
            ok = H5Dget_chunk_info_by_coord(r->cols[M_DIST][c].d, off, &mask, &addr, &size) >= 0 && addr != HADDR_UNDEF &&
                 size > 0 && addr + size <= (uint64_t)st.st_size;
            r->caddr[2 * k + (size_t)c] = addr, r->csize[2 * k + (size_t)c] = size, r->cmask[2 * k + (size_t)c] = mask;
        }
    void *m = ok ? mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_SHARED, fd, 0) : MAP_FAILED;
    if (fd >= 0) close(fd);
    if (m == MAP_FAILED) {
        free(r->caddr), free(r->csize), free(r->cmask);
        r->caddr = r->csize = NULL, r->cmask = NULL;
        return;
    }
    madvise(m, (size_t)st.st_size, MADV_SEQUENTIAL);
    r->map = m;
    r->map_len = (size_t)st.st_size;
    r->n_chunks = n;
}

int sl_log_dist_direct(const sl_log_reader *r) { return r->map != NULL; }

/* Maps a raw chunk's pages in one call (Linux >= 5.14) instead of one fault per 64 KiB: a raw
 * float32 chunk is otherwise read at the speed of page faults, not of memory. Best effort: on
 * older kernels the madvise fails and the pages fault in as usual. */
static void populate(const unsigned char *src, size_t bytes)
{
#ifndef MADV_POPULATE_READ
#define MADV_POPULATE_READ 22
#endif
    uintptr_t pg = (uintptr_t)sysconf(_SC_PAGESIZE), a = (uintptr_t)src & ~(pg - 1), b = (uintptr_t)src + bytes;
    (void)madvise((void *)a, b - a, MADV_POPULATE_READ);
}

int sl_log_dist_prepare(sl_log_reader *r, int nt)
{
    if (!r->map) return sl_fail(SL_EFAIL, "no direct access to %s", r->path);
    size_t V = r->meta.vocab_size, ch = r->dist_chunk, esz = r->dist_type == SL_LOG_DIST_F16 ? 2 : 4;
    if (r->n_dc < nt) {
        r->dc = realloc(r->dc, (size_t)nt * sizeof *r->dc);
        for (int i = r->n_dc; i < nt; i++) r->dc[i] = libdeflate_alloc_decompressor();
        r->n_dc = nt;
    }
    if (r->nt_scratch < nt) {
        r->zs = realloc(r->zs, (size_t)nt * sizeof *r->zs);
        r->fs = realloc(r->fs, (size_t)nt * sizeof *r->fs);
        for (int i = r->nt_scratch; i < nt; i++) {
            r->zs[i] = malloc(2 * ch * V * esz);
            r->fs[i] = malloc(2 * ch * V * sizeof(float));
        }
        r->nt_scratch = nt;
    }
    for (int i = 0; i < nt; i++)
        if (!r->dc[i] || !r->zs[i] || !r->fs[i]) return sl_fail(SL_EFAIL, "out of memory");
    return SL_OK;
}

void sl_log_dist_release(sl_log_reader *r, size_t k0, size_t k1)
{
    if (!r->map) return;
    uintptr_t pg = (uintptr_t)sysconf(_SC_PAGESIZE);
    for (size_t s = 2 * k0; s < 2 * k1 && s < 2 * r->n_chunks; s++) {
        uintptr_t a = (uintptr_t)(r->map + r->caddr[s]), b = a + r->csize[s];
        a &= ~(pg - 1);
        /* File-backed pages: dropping them from this mapping keeps them in the page cache. */
        madvise((void *)a, b - a, MADV_DONTNEED);
    }
}

int sl_log_dist_chunk(sl_log_reader *r, size_t k, int tid, const float **p, const float **q, size_t *rows)
{
    size_t V = r->meta.vocab_size, ch = r->dist_chunk, esz = r->dist_type == SL_LOG_DIST_F16 ? 2 : 4;
    size_t bytes = ch * V * esz, total = r->rows[M_DIST];
    *rows = total - k * ch < ch ? total - k * ch : ch;
    const float **out[2] = {p, q};
    for (int c = 0; c < 2; c++) {
        size_t s = 2 * k + (size_t)c;
        const unsigned char *src = r->map + r->caddr[s];
        int deflated = r->dist_deflate == 1 && !(r->cmask[s] & 1);
        if (deflated) {
            unsigned char *z = r->zs[tid] + (size_t)c * bytes;
            size_t got = 0;
            if (libdeflate_zlib_decompress(r->dc[tid], src, r->csize[s], z, bytes, &got) != LIBDEFLATE_SUCCESS || got != bytes)
                return sl_fail(SL_EINPUT, "%s: /distributions chunk at row %zu does not inflate (corrupt file?)", r->path, k * ch);
            src = z;
        } else if (r->csize[s] != bytes) {
            return sl_fail(SL_EINPUT, "%s: /distributions chunk at row %zu has %llu bytes, expected %zu", r->path, k * ch,
                           (unsigned long long)r->csize[s], bytes);
        } else {
            populate(src, bytes);
        }
        if (esz == 4 && ((uintptr_t)src % sizeof(float)) == 0) {
            *out[c] = (const float *)(const void *)src; /* straight from the page cache or the inflate buffer */
        } else {
            float *f = r->fs[tid] + (size_t)c * ch * V;
            if (esz == 2) f16_to_f32_n((const uint16_t *)(const void *)src, f, *rows * V);
            else memcpy(f, src, *rows * V * sizeof(float));
            *out[c] = f;
        }
    }
    return SL_OK;
}

int sl_log_open(sl_log_reader **out, const char *path)
{
    h5_quiet();
    *out = NULL;
    struct stat st;
    if (stat(path, &st) != 0) return sl_fail(SL_EINPUT, "cannot open %s: %s", path, strerror(errno));
    if (H5Fis_hdf5(path) <= 0) return sl_fail(SL_EINPUT, "%s is not an HDF5 file (corrupt or truncated?)", path);
    sl_log_reader *r = calloc(1, sizeof *r);
    if (!r) return sl_fail(SL_EFAIL, "out of memory");
    r->path = strdup(path);
    r->cache_chunk = -1;
    r->file = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
    int rc = SL_OK;
    char buf[256];
    int64_t ver = -1;
    sl_log_meta *m = &r->meta;
    sl_log_meta_init(m, SL_LOG_MEASURE);
    if (r->file < 0) rc = sl_fail(SL_EINPUT, "cannot open %s as HDF5 (corrupt or truncated?)", path);
    else if (get_attr_str(r->file, "schema", buf, sizeof buf) || strcmp(buf, SL_LOG_SCHEMA_NAME))
        rc = sl_fail(SL_EINPUT, "%s is not a speclab log (root attribute schema != \"%s\")", path, SL_LOG_SCHEMA_NAME);
    else if (get_attr_num(r->file, "schema_version", H5T_NATIVE_INT64, &ver) || ver != SL_LOG_SCHEMA_VERSION)
        rc = sl_fail(SL_EINPUT, "%s has schema version %lld; this speclab reads version %d", path, (long long)ver,
                     SL_LOG_SCHEMA_VERSION);
    else if (get_attr_str(r->file, "kind", buf, sizeof buf) || (strcmp(buf, "measure") && strcmp(buf, "run")))
        rc = sl_fail(SL_EINPUT, "%s: root attribute kind must be measure or run", path);
    if (!rc) {
        m->kind = strcmp(buf, "run") ? SL_LOG_MEASURE : SL_LOG_RUN;
        m->schema_version = ver;
        uint64_t u;
        if (get_attr_num(r->file, "vocab_size", H5T_NATIVE_UINT64, &m->vocab_size) || m->vocab_size < 2)
            rc = sl_fail(SL_EINPUT, "%s: root attribute vocab_size missing or < 2", path);
        get_attr_str(r->file, "target_name", m->target_name, sizeof m->target_name);
        get_attr_str(r->file, "target_sha256", m->target_sha256, sizeof m->target_sha256);
        get_attr_str(r->file, "draft_name", m->draft_name, sizeof m->draft_name);
        get_attr_str(r->file, "draft_sha256", m->draft_sha256, sizeof m->draft_sha256);
        get_attr_str(r->file, "source", m->source, sizeof m->source);
        get_attr_num(r->file, "temperature", H5T_NATIVE_DOUBLE, &m->sampling.temperature);
        if (!get_attr_num(r->file, "top_k", H5T_NATIVE_UINT64, &u)) m->sampling.top_k = u;
        get_attr_num(r->file, "top_p", H5T_NATIVE_DOUBLE, &m->sampling.top_p);
        get_attr_num(r->file, "min_p", H5T_NATIVE_DOUBLE, &m->sampling.min_p);
        get_attr_num(r->file, "seed", H5T_NATIVE_UINT64, &m->seed);
        get_attr_num(r->file, "tokens_per_sequence", H5T_NATIVE_UINT64, &m->tokens_per_sequence);
        get_attr_num(r->file, "eos", H5T_NATIVE_INT64, &m->eos);
        get_attr_num(r->file, "shard_sequences", H5T_NATIVE_UINT64, &m->shard_sequences);
        get_attr_num(r->file, "gamma", H5T_NATIVE_UINT64, &m->gamma);
        get_attr_str(r->file, "rule", m->rule, sizeof m->rule);
        get_attr_num(r->file, "lenience", H5T_NATIVE_DOUBLE, &m->lenience);
        get_attr_str(r->file, "tool_version", m->tool_version, sizeof m->tool_version);
        get_attr_str(r->file, "source_revision", m->source_revision, sizeof m->source_revision);
        get_attr_str(r->file, "created_utc", m->created_utc, sizeof m->created_utc);
        if (!get_attr_str(r->file, "dist", buf, sizeof buf)) sl_log_dist_parse(buf, &m->dist);
        sl_err_clear();
    }
    if (!rc) r->defs = kind_tables(m->kind, &r->n_tables);
    for (size_t i = 0; i < r->n_tables && !rc; i++) {
        const table_def *def = &r->defs[i];
        if (def->optional && H5Lexists(r->file, def->group, H5P_DEFAULT) <= 0) continue;
        hid_t g = H5Gopen2(r->file, def->group, H5P_DEFAULT);
        if (g < 0) {
            rc = sl_fail(SL_EINPUT, "%s: missing group /%s", path, def->group);
            break;
        }
        for (size_t c = 0; c < def->n_cols && !rc; c++) {
            hid_t d = H5Lexists(g, def->cols[c].name, H5P_DEFAULT) > 0 ? H5Dopen2(g, def->cols[c].name, H5P_DEFAULT) : -1;
            r->cols[i][c].d = d;
            r->cols[i][c].type = def->cols[c].type;
            if (d < 0) {
                rc = sl_fail(SL_EINPUT, "%s: missing dataset /%s/%s", path, def->group, def->cols[c].name);
                break;
            }
            hid_t s = H5Dget_space(d);
            hsize_t dims[2] = {0, 0};
            int rank = H5Sget_simple_extent_dims(s, dims, NULL);
            H5Sclose(s);
            int want = def->cols[c].type == T_DIST ? 2 : 1;
            sl_log_dist dt = SL_LOG_DIST_NONE;
            if (rank != want || (want == 2 && dims[1] != m->vocab_size))
                rc = sl_fail(SL_EINPUT, "%s: /%s/%s has the wrong shape (rank %d; expected %s)", path, def->group,
                             def->cols[c].name, rank, want == 2 ? "(rows, vocab_size)" : "(rows)");
            else if (!type_ok(d, def->cols[c].type, &dt))
                rc = sl_fail(SL_EINPUT, "%s: /%s/%s has the wrong element type", path, def->group, def->cols[c].name);
            else if (c > 0 && dims[0] != r->rows[i])
                rc = sl_fail(SL_EINPUT, "%s: /%s/%s has %llu rows, /%s/%s has %zu", path, def->group, def->cols[c].name,
                             (unsigned long long)dims[0], def->group, def->cols[0].name, r->rows[i]);
            r->rows[i] = dims[0];
            if (!rc && def->cols[c].type == T_DIST) {
                if (c > 0 && dt != r->dist_type)
                    rc = sl_fail(SL_EINPUT, "%s: /distributions/p and /distributions/q differ in type", path);
                r->dist_type = dt;
                hid_t pl = H5Dget_create_plist(d);
                hsize_t ch[2] = {0, 0};
                if (H5Pget_layout(pl) != H5D_CHUNKED || H5Pget_chunk(pl, 2, ch) != 2 || ch[1] != m->vocab_size)
                    r->dist_deflate = -1, r->dist_chunk = 64;
                else {
                    r->dist_chunk = ch[0];
                    int nf = H5Pget_nfilters(pl);
                    unsigned flags, cd[8];
                    size_t ncd = 8;
                    r->dist_deflate = nf == 0 ? 0
                                      : nf == 1 && H5Pget_filter2(pl, 0, &flags, &ncd, cd, 0, NULL, NULL) == H5Z_FILTER_DEFLATE
                                          ? 1
                                          : -1;
                }
                H5Pclose(pl);
            }
        }
        H5Gclose(g);
        if (!rc && def->optional) r->has_dists = 1;
    }
    if (!rc && r->has_dists && r->dist_deflate >= 0) map_chunks(r);
    if (!rc && r->has_dists && r->rows[M_DIST] != r->rows[M_POS])
        rc = sl_fail(SL_EINPUT, "%s: /distributions has %zu rows, /positions has %zu", path, r->rows[M_DIST], r->rows[M_POS]);
    if (!rc) { /* the sequences table must account for every row */
        size_t seq_t = m->kind == SL_LOG_MEASURE ? M_SEQ : R_SEQ, ns = r->rows[seq_t];
        int64_t *v = malloc((ns + 1) * sizeof *v);
        int64_t sum_rows = 0, sum_prompt = 0, sum_drafts = 0;
        if (!v) rc = sl_fail(SL_EFAIL, "out of memory");
        if (!rc && !(rc = read_cols_i64(r, seq_t, 4, 0, ns, v)))
            for (size_t i = 0; i < ns; i++) sum_rows += v[i];
        if (!rc && !(rc = read_cols_i64(r, seq_t, 2, 0, ns, v)))
            for (size_t i = 0; i < ns; i++) sum_prompt += v[i];
        if (!rc && m->kind == SL_LOG_RUN && !(rc = read_cols_i64(r, seq_t, 5, 0, ns, v)))
            for (size_t i = 0; i < ns; i++) sum_drafts += v[i];
        free(v);
        size_t row_t = m->kind == SL_LOG_MEASURE ? M_POS : R_ITER;
        if (!rc && (uint64_t)sum_rows != r->rows[row_t])
            rc = sl_fail(SL_EINPUT, "%s: /sequences/n_rows sums to %lld, but /%s has %zu rows", path, (long long)sum_rows,
                         r->defs[row_t].group, r->rows[row_t]);
        if (!rc && (uint64_t)sum_prompt != r->rows[seq_t + 1])
            rc = sl_fail(SL_EINPUT, "%s: /sequences/n_prompt_tokens sums to %lld, but /prompts/tokens has %zu", path,
                         (long long)sum_prompt, r->rows[seq_t + 1]);
        if (!rc && m->kind == SL_LOG_RUN && (uint64_t)sum_drafts != r->rows[R_DRAFT])
            rc = sl_fail(SL_EINPUT, "%s: /sequences/n_drafts sums to %lld, but /drafts has %zu rows", path,
                         (long long)sum_drafts, r->rows[R_DRAFT]);
    }
    if (rc) {
        sl_log_close(r);
        return rc;
    }
    *out = r;
    return SL_OK;
}

const sl_log_meta *sl_log_meta_of(const sl_log_reader *r) { return &r->meta; }
int sl_log_has_dists(const sl_log_reader *r) { return r->has_dists; }
size_t sl_log_n_rows(const sl_log_reader *r) { return r->rows[0]; }
size_t sl_log_n_drafts(const sl_log_reader *r) { return r->meta.kind == SL_LOG_RUN ? r->rows[R_DRAFT] : 0; }
size_t sl_log_n_sequences(const sl_log_reader *r) { return r->rows[2]; }
size_t sl_log_dist_rows_per_chunk(const sl_log_reader *r) { return r->dist_chunk; }

/* Reads rows [first, first+n) of column c of table t converted to mtype. */
static int read_col(sl_log_reader *r, size_t t, size_t c, size_t first, size_t n, hid_t mtype, void *out)
{
    if (n == 0) return SL_OK;
    hid_t d = r->cols[t][c].d;
    hsize_t start[1] = {first}, count[1] = {n};
    hid_t fs = H5Dget_space(d);
    H5Sselect_hyperslab(fs, H5S_SELECT_SET, start, NULL, count, NULL);
    hid_t ms = H5Screate_simple(1, count, NULL);
    herr_t e = H5Dread(d, mtype, ms, fs, H5P_DEFAULT, out);
    H5Sclose(ms);
    H5Sclose(fs);
    if (e < 0)
        return sl_fail(SL_EINPUT, "%s: cannot read /%s/%s rows %zu..%zu (corrupt?)", r->path, r->defs[t].group,
                       r->defs[t].cols[c].name, first, first + n);
    return SL_OK;
}
static int read_cols_i64(sl_log_reader *r, size_t t, size_t c, size_t first, size_t n, int64_t *out)
{
    return read_col(r, t, c, first, n, H5T_NATIVE_INT64, out);
}

int sl_log_sequences(sl_log_reader *r, sl_log_seq **out)
{
    size_t t = r->meta.kind == SL_LOG_MEASURE ? M_SEQ : R_SEQ, n = r->rows[t];
    sl_log_seq *s = calloc(n + 1, sizeof *s);
    int64_t *v = malloc((n + 1) * sizeof *v);
    double *dv = malloc((n + 1) * sizeof *dv);
    int rc = s && v && dv ? SL_OK : sl_fail(SL_EFAIL, "out of memory");
    size_t ncol = r->defs[t].n_cols;
    for (size_t c = 0; c < ncol && !rc; c++) {
        if (r->defs[t].cols[c].type == T_F64) {
            rc = read_col(r, t, c, 0, n, H5T_NATIVE_DOUBLE, dv);
            for (size_t i = 0; i < n && !rc; i++) s[i].wall_s = dv[i];
            continue;
        }
        rc = read_cols_i64(r, t, c, 0, n, v);
        for (size_t i = 0; i < n && !rc; i++) {
            switch (c) {
            case 0: s[i].sequence = v[i]; break;
            case 1: s[i].prompt_id = v[i]; break;
            case 2: s[i].n_prompt_tokens = v[i]; break;
            case 3: s[i].n_generated = v[i]; break;
            case 4: s[i].n_rows = v[i]; break;
            case 5: s[i].n_drafts = v[i]; break;
            case 6: s[i].mode = (int)v[i]; break;
            }
        }
    }
    free(v);
    free(dv);
    if (rc) {
        free(s);
        return rc;
    }
    *out = s;
    return SL_OK;
}

int sl_log_pos_block_alloc(sl_log_pos_block *b, size_t cap)
{
    memset(b, 0, sizeof *b);
    b->cap = cap;
    int32_t **iv[] = {&b->sequence, &b->position, &b->token};
    double **dv[] = {&b->beta, &b->d_lk, &b->entropy_p, &b->entropy_q, &b->q_max, &b->p_token, &b->q_token};
    int ok = 1;
    for (size_t i = 0; i < 3; i++) ok &= (*iv[i] = malloc(cap * sizeof(int32_t))) != NULL;
    for (size_t i = 0; i < 7; i++) ok &= (*dv[i] = malloc(cap * sizeof(double))) != NULL;
    if (!ok) {
        sl_log_pos_block_free(b);
        return sl_fail(SL_EFAIL, "out of memory");
    }
    return SL_OK;
}
void sl_log_pos_block_free(sl_log_pos_block *b)
{
    free(b->sequence), free(b->position), free(b->token), free(b->beta), free(b->d_lk);
    free(b->entropy_p), free(b->entropy_q), free(b->q_max), free(b->p_token), free(b->q_token);
    memset(b, 0, sizeof *b);
}

int sl_log_read_positions(sl_log_reader *r, size_t first, sl_log_pos_block *b)
{
    if (r->meta.kind != SL_LOG_MEASURE) return sl_fail(SL_EINPUT, "%s is a run log, not a measure log", r->path);
    size_t total = r->rows[M_POS];
    b->first = first;
    b->n = first >= total ? 0 : total - first < b->cap ? total - first : b->cap;
    void *dst[] = {b->sequence, b->position, b->token, b->beta, b->d_lk, b->entropy_p, b->entropy_q,
                   b->q_max,    b->p_token,  b->q_token};
    int rc = SL_OK;
    for (size_t c = 0; c < 10 && !rc; c++)
        rc = read_col(r, M_POS, c, first, b->n, c < 3 ? H5T_NATIVE_INT32 : H5T_NATIVE_DOUBLE, dst[c]);
    return rc;
}

int sl_log_iter_block_alloc(sl_log_iter_block *b, size_t cap)
{
    memset(b, 0, sizeof *b);
    b->cap = cap;
    int32_t **iv[] = {&b->sequence, &b->iteration, &b->gamma, &b->drafted, &b->accepted, &b->emitted};
    double **dv[] = {&b->draft_s, &b->verify_s, &b->sample_s};
    int ok = 1;
    for (size_t i = 0; i < 6; i++) ok &= (*iv[i] = malloc(cap * sizeof(int32_t))) != NULL;
    for (size_t i = 0; i < 3; i++) ok &= (*dv[i] = malloc(cap * sizeof(double))) != NULL;
    if (!ok) {
        sl_log_iter_block_free(b);
        return sl_fail(SL_EFAIL, "out of memory");
    }
    return SL_OK;
}
void sl_log_iter_block_free(sl_log_iter_block *b)
{
    free(b->sequence), free(b->iteration), free(b->gamma), free(b->drafted), free(b->accepted), free(b->emitted);
    free(b->draft_s), free(b->verify_s), free(b->sample_s);
    memset(b, 0, sizeof *b);
}
int sl_log_read_iterations(sl_log_reader *r, size_t first, sl_log_iter_block *b)
{
    if (r->meta.kind != SL_LOG_RUN) return sl_fail(SL_EINPUT, "%s is a measure log, not a run log", r->path);
    size_t total = r->rows[R_ITER];
    b->first = first;
    b->n = first >= total ? 0 : total - first < b->cap ? total - first : b->cap;
    void *dst[] = {b->sequence, b->iteration, b->gamma, b->drafted, b->accepted, b->emitted, b->draft_s, b->verify_s, b->sample_s};
    int rc = SL_OK;
    for (size_t c = 0; c < 9 && !rc; c++)
        rc = read_col(r, R_ITER, c, first, b->n, c < 6 ? H5T_NATIVE_INT32 : H5T_NATIVE_DOUBLE, dst[c]);
    return rc;
}

int sl_log_draft_block_alloc(sl_log_draft_block *b, size_t cap)
{
    memset(b, 0, sizeof *b);
    b->cap = cap;
    int32_t **iv[] = {&b->sequence, &b->iteration, &b->draft_position, &b->token};
    int ok = 1;
    for (size_t i = 0; i < 4; i++) ok &= (*iv[i] = malloc(cap * sizeof(int32_t))) != NULL;
    ok &= (b->accepted = malloc(cap)) != NULL;
    ok &= (b->beta = malloc(cap * sizeof(double))) != NULL;
    if (!ok) {
        sl_log_draft_block_free(b);
        return sl_fail(SL_EFAIL, "out of memory");
    }
    return SL_OK;
}
void sl_log_draft_block_free(sl_log_draft_block *b)
{
    free(b->sequence), free(b->iteration), free(b->draft_position), free(b->token), free(b->accepted), free(b->beta);
    memset(b, 0, sizeof *b);
}
int sl_log_read_drafts(sl_log_reader *r, size_t first, sl_log_draft_block *b)
{
    if (r->meta.kind != SL_LOG_RUN) return sl_fail(SL_EINPUT, "%s is a measure log, not a run log", r->path);
    size_t total = r->rows[R_DRAFT];
    b->first = first;
    b->n = first >= total ? 0 : total - first < b->cap ? total - first : b->cap;
    void *dst[] = {b->sequence, b->iteration, b->draft_position, b->token, b->accepted, b->beta};
    hid_t mt[] = {H5T_NATIVE_INT32, H5T_NATIVE_INT32, H5T_NATIVE_INT32, H5T_NATIVE_INT32, H5T_NATIVE_INT8, H5T_NATIVE_DOUBLE};
    int rc = SL_OK;
    for (size_t c = 0; c < 6 && !rc; c++) rc = read_col(r, R_DRAFT, c, first, b->n, mt[c], dst[c]);
    return rc;
}

int sl_log_read_costs(sl_log_reader *r, sl_log_costs *out)
{
    memset(out, 0, sizeof *out);
    out->c = out->draft_step_s = out->target_step_s = NAN;
    if (r->meta.kind != SL_LOG_RUN || H5Lexists(r->file, "costs", H5P_DEFAULT) <= 0) return SL_OK;
    hid_t g = H5Gopen2(r->file, "costs", H5P_DEFAULT);
    int rc = SL_OK;
    if (g < 0 || get_attr_num(g, "c", H5T_NATIVE_DOUBLE, &out->c))
        rc = sl_fail(SL_EINPUT, "%s: /costs lacks attribute c", r->path);
    if (!rc) {
        get_attr_num(g, "draft_step_s", H5T_NATIVE_DOUBLE, &out->draft_step_s);
        get_attr_num(g, "target_step_s", H5T_NATIVE_DOUBLE, &out->target_step_s);
    }
    int64_t *n = NULL;
    size_t cnt = 0;
    if (!rc && read_i64_all(g, "n", &n, &cnt)) rc = sl_fail(SL_EINPUT, "%s: /costs/n missing", r->path);
    if (!rc) {
        out->count = cnt;
        out->n = malloc((cnt + 1) * sizeof *out->n);
        out->v = malloc((cnt + 1) * sizeof *out->v);
        out->call_s = malloc((cnt + 1) * sizeof *out->call_s);
        for (size_t i = 0; i < cnt; i++) out->n[i] = (long)n[i];
        hid_t dv = H5Dopen2(g, "v", H5P_DEFAULT), dc = H5Dopen2(g, "call_s", H5P_DEFAULT);
        if (dv < 0 || dc < 0 || H5Dread(dv, H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT, out->v) < 0 ||
            H5Dread(dc, H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT, out->call_s) < 0)
            rc = sl_fail(SL_EINPUT, "%s: /costs/v or /costs/call_s missing or unreadable", r->path);
        if (dv >= 0) H5Dclose(dv);
        if (dc >= 0) H5Dclose(dc);
        for (size_t i = 0; i < cnt && !rc; i++)
            if (!(out->v[i] > 0) || out->n[i] < 1) rc = sl_fail(SL_EINPUT, "%s: /costs row %zu: n must be >= 1 and v > 0", r->path, i);
    }
    free(n);
    if (g >= 0) H5Gclose(g);
    if (rc) sl_log_costs_free(out);
    return rc;
}
void sl_log_costs_free(sl_log_costs *c)
{
    free(c->n), free(c->v), free(c->call_s);
    c->n = NULL, c->v = c->call_s = NULL;
    c->count = 0;
}

/* ---- distributions ---- */

/* The naive twin: H5Dread of the rows, converted to float32. */
static int read_dists_naive(sl_log_reader *r, size_t first, size_t n, float *p, float *q)
{
    size_t V = r->meta.vocab_size;
    for (int c = 0; c < 2; c++) {
        float *dst = c == 0 ? p : q;
        hid_t d = r->cols[M_DIST][c].d;
        hsize_t start[2] = {first, 0}, count[2] = {n, V};
        hid_t fs = H5Dget_space(d);
        H5Sselect_hyperslab(fs, H5S_SELECT_SET, start, NULL, count, NULL);
        hid_t ms = H5Screate_simple(2, count, NULL);
        herr_t e;
        if (r->dist_type == SL_LOG_DIST_F16) {
            /* Read the halves as they are and widen them here: the same conversion as the fast path. */
            uint16_t *h = malloc(n * V * sizeof *h);
            e = h ? H5Dread(d, f16_type(), ms, fs, H5P_DEFAULT, h) : -1;
            if (e >= 0) f16_to_f32_n(h, dst, n * V);
            free(h);
        } else {
            e = H5Dread(d, H5T_NATIVE_FLOAT, ms, fs, H5P_DEFAULT, dst);
        }
        H5Sclose(ms);
        H5Sclose(fs);
        if (e < 0) return sl_fail(SL_EINPUT, "%s: cannot read /distributions rows %zu..%zu (corrupt?)", r->path, first, first + n);
    }
    return SL_OK;
}

typedef struct {
    sl_log_reader *r;
    float *p, *q;
    const uint32_t *mask;
    size_t first, n, c0, ch, V, esz, chunk_bytes;
    volatile int bad;
} inflate_job;

/* Inflates slot s (chunk s / 2, p or q) into its rows of p or q. */
static void inflate_one(void *ctx, size_t s, int tid)
{
    inflate_job *j = ctx;
    sl_log_reader *r = j->r;
    size_t ch = j->ch, V = j->V, i = s / 2, row0 = (j->c0 + i) * ch - j->first;
    size_t left = j->first + j->n - (j->c0 + i) * ch, rows = left < ch ? left : ch;
    float *dst = (s % 2 ? j->q : j->p) + row0 * V;
    size_t got = j->chunk_bytes;
    int deflated = r->dist_deflate == 1 && !(j->mask[s] & 1), bad = 0;
    void *out = j->esz == 4 && rows == ch ? (void *)dst : j->esz == 2 ? (void *)r->h16[tid] : NULL;
    unsigned char *tmp = NULL;
    if (!out) out = tmp = malloc(j->chunk_bytes); /* the short last chunk of float32 */
    if (!out) bad = 1;
    else if (deflated)
        bad = libdeflate_zlib_decompress(r->dc[tid], r->raw[s], r->raw_n[s], out, j->chunk_bytes, &got) != LIBDEFLATE_SUCCESS ||
              got != j->chunk_bytes;
    else if (r->raw_n[s] != j->chunk_bytes)
        bad = 1;
    else
        memcpy(out, r->raw[s], j->chunk_bytes);
    if (!bad) {
        if (j->esz == 2) f16_to_f32_n(out, dst, rows * V);
        else if (out != dst) memcpy(dst, out, rows * V * 4);
    }
    free(tmp);
    if (bad) j->bad = 1;
}

typedef struct {
    size_t n;
    void (*fn)(void *, size_t, int);
    void *ctx;
    _Atomic size_t next;
} par_job;

typedef struct {
    par_job *job;
    int tid;
} par_arg;

static void *par_worker(void *a)
{
    par_arg *pa = a;
    for (;;) {
        size_t i = atomic_fetch_add(&pa->job->next, 1);
        if (i >= pa->job->n) break;
        pa->job->fn(pa->job->ctx, i, pa->tid);
    }
    return NULL;
}

void sl_log_parallel(size_t n, int nt, void (*fn)(void *ctx, size_t i, int tid), void *ctx)
{
    par_job job = {n, fn, ctx, 0};
    if (nt < 1) nt = 1;
    if ((size_t)nt > n) nt = n ? (int)n : 1;
    pthread_t th[64];
    par_arg args[64];
    int started = 0;
    for (int t = 1; t < nt && t < 64; t++) {
        args[t] = (par_arg){&job, t};
        if (pthread_create(&th[t], NULL, par_worker, &args[t]) != 0) break;
        started = t;
    }
    args[0] = (par_arg){&job, 0};
    par_worker(&args[0]); /* whatever the workers did not take, this thread does */
    for (int t = 1; t <= started; t++) pthread_join(th[t], NULL);
}

int sl_log_read_dists(sl_log_reader *r, size_t first, size_t n, float *p, float *q, int fast, int threads)
{
    if (!r->has_dists) return sl_fail(SL_EINPUT, "%s holds beta-level data only (no /distributions)", r->path);
    size_t total = r->rows[M_DIST], V = r->meta.vocab_size, ch = r->dist_chunk;
    if (first + n > total) return sl_fail(SL_EFAIL, "sl_log_read_dists: rows %zu..%zu beyond %zu", first, first + n, total);
    if (n == 0) return SL_OK;
    if (!fast || r->dist_deflate < 0 || first % ch) return read_dists_naive(r, first, n, p, q);
    size_t c0 = first / ch, c1 = (first + n + ch - 1) / ch, nch = c1 - c0;
    size_t esz = r->dist_type == SL_LOG_DIST_F16 ? 2 : 4, chunk_bytes = ch * V * esz;
    if (r->n_slots < 2 * nch) { /* raw buffers: one per (chunk, p|q) */
        r->raw = realloc(r->raw, 2 * nch * sizeof *r->raw);
        r->raw_n = realloc(r->raw_n, 2 * nch * sizeof *r->raw_n);
        for (size_t i = r->n_slots; i < 2 * nch; i++) r->raw[i] = NULL;
        r->n_slots = 2 * nch;
        r->raw_cap = 0;
    }
    if (r->raw_cap < chunk_bytes + 1024) {
        for (size_t i = 0; i < r->n_slots; i++) {
            free(r->raw[i]);
            r->raw[i] = malloc(chunk_bytes + 1024);
            if (!r->raw[i]) return sl_fail(SL_EFAIL, "out of memory");
        }
        r->raw_cap = chunk_bytes + 1024;
    }
    uint32_t *mask = malloc(2 * nch * sizeof *mask);
    if (!mask) return sl_fail(SL_EFAIL, "out of memory");
    int rc = SL_OK;
    /* HDF5 is not thread-safe: raw chunks are fetched serially, inflated in parallel. */
    for (size_t i = 0; i < nch && !rc; i++)
        for (int c = 0; c < 2 && !rc; c++) {
            hid_t d = r->cols[M_DIST][c].d;
            hsize_t off[2] = {(c0 + i) * ch, 0}, sz = 0;
            size_t slot = 2 * i + (size_t)c;
            if (H5Dget_chunk_storage_size(d, off, &sz) < 0 || sz > r->raw_cap || sz == 0)
                rc = sl_fail(SL_EINPUT, "%s: /distributions chunk at row %llu is missing or corrupt", r->path,
                             (unsigned long long)off[0]);
            else if (H5Dread_chunk(d, H5P_DEFAULT, off, &mask[slot], r->raw[slot]) < 0)
                rc = sl_fail(SL_EINPUT, "%s: cannot read /distributions chunk at row %llu", r->path, (unsigned long long)off[0]);
            r->raw_n[slot] = sz;
        }
    int nt = threads > 0 ? threads : omp_get_max_threads();
    if (!rc && esz == 2 && r->n_h16 < nt) {
        r->h16 = realloc(r->h16, (size_t)nt * sizeof *r->h16);
        for (int i = r->n_h16; i < nt; i++) r->h16[i] = NULL;
        r->n_h16 = nt;
    }
    if (!rc && esz == 2)
        for (int i = 0; i < nt; i++)
            if (!r->h16[i] && !(r->h16[i] = malloc(chunk_bytes))) rc = sl_fail(SL_EFAIL, "out of memory");
    if (!rc && r->n_dc < nt) {
        r->dc = realloc(r->dc, (size_t)nt * sizeof *r->dc);
        for (int i = r->n_dc; i < nt; i++) r->dc[i] = libdeflate_alloc_decompressor();
        r->n_dc = nt;
        for (int i = 0; i < nt; i++)
            if (!r->dc[i]) rc = sl_fail(SL_EFAIL, "out of memory");
    }
    if (!rc) {
        inflate_job job = {r, p, q, mask, first, n, c0, ch, V, esz, chunk_bytes, 0};
        sl_log_parallel(2 * nch, nt, inflate_one, &job);
        if (job.bad) rc = sl_fail(SL_EINPUT, "%s: a /distributions chunk does not inflate (corrupt file?)", r->path);
    }

    free(mask);
    return rc;
}

int sl_log_read_row(sl_log_reader *r, size_t row, double *p, double *q)
{
    if (!r->has_dists) return sl_fail(SL_EINPUT, "%s holds beta-level data only (no /distributions)", r->path);
    size_t V = r->meta.vocab_size, ch = r->dist_chunk, total = r->rows[M_DIST];
    if (row >= total) return sl_fail(SL_EINPUT, "row %zu outside the %zu rows of %s", row, total, r->path);
    long k = (long)(row / ch);
    if (k != r->cache_chunk) {
        if (!r->cache_p) {
            r->cache_p = malloc(ch * V * sizeof(float));
            r->cache_q = malloc(ch * V * sizeof(float));
            if (!r->cache_p || !r->cache_q) return sl_fail(SL_EFAIL, "out of memory");
        }
        size_t first = (size_t)k * ch, n = total - first < ch ? total - first : ch;
        int rc = sl_log_read_dists(r, first, n, r->cache_p, r->cache_q, 1, 1);
        if (rc) return rc;
        r->cache_chunk = k;
    }
    const float *pp = r->cache_p + (row % ch) * V, *qq = r->cache_q + (row % ch) * V;
    for (size_t x = 0; x < V; x++) p[x] = pp[x], q[x] = qq[x];
    return SL_OK;
}

int sl_log_validate(const char *path)
{
    sl_log_reader *r = NULL;
    int rc = sl_log_open(&r, path);
    if (rc) return rc;
    size_t V = r->meta.vocab_size, B = 4096;
    if (r->meta.kind == SL_LOG_MEASURE) {
        sl_log_pos_block b;
        rc = sl_log_pos_block_alloc(&b, B);
        for (size_t first = 0; !rc; first += B) {
            rc = sl_log_read_positions(r, first, &b);
            if (rc || b.n == 0) break;
            for (size_t i = 0; i < b.n && !rc; i++) {
                const double pr[] = {b.beta[i], b.d_lk[i], b.q_max[i], b.p_token[i], b.q_token[i]};
                static const char *nm[] = {"beta", "d_lk", "q_max", "p_token", "q_token"};
                for (int c = 0; c < 5 && !rc; c++)
                    if (!(pr[c] >= 0 && pr[c] <= 1 + 1e-9))
                        rc = sl_fail(SL_EINPUT, "%s: /positions/%s row %zu is %g; expected a probability in [0, 1]", path,
                                     nm[c], first + i, pr[c]);
                if (!rc && (!(b.entropy_p[i] >= 0) || !(b.entropy_q[i] >= 0) || !isfinite(b.entropy_p[i]) ||
                            !isfinite(b.entropy_q[i])))
                    rc = sl_fail(SL_EINPUT, "%s: /positions/entropy_p or entropy_q row %zu is negative or not finite", path,
                                 first + i);
                if (!rc && (b.token[i] < 0 || (size_t)b.token[i] >= V))
                    rc = sl_fail(SL_EINPUT, "%s: /positions/token row %zu is %d; expected [0, %zu)", path, first + i,
                                 b.token[i], V);
            }
        }
        sl_log_pos_block_free(&b);
        size_t ch = r->dist_chunk, total = r->rows[M_DIST];
        float *p = NULL, *q = NULL;
        if (!rc && r->has_dists) {
            p = malloc(ch * V * sizeof *p);
            q = malloc(ch * V * sizeof *q);
            if (!p || !q) rc = sl_fail(SL_EFAIL, "out of memory");
        }
        for (size_t first = 0; !rc && r->has_dists && first < total; first += ch) {
            size_t n = total - first < ch ? total - first : ch;
            rc = sl_log_read_dists(r, first, n, p, q, 1, 0);
            for (size_t i = 0; i < n * V && !rc; i++)
                if (!(p[i] >= 0 && p[i] <= 1) || !(q[i] >= 0 && q[i] <= 1))
                    rc = sl_fail(SL_EINPUT, "%s: /distributions/%s row %zu token %zu is %g; expected a probability", path,
                                 !(p[i] >= 0 && p[i] <= 1) ? "p" : "q", first + i / V, i % V,
                                 !(p[i] >= 0 && p[i] <= 1) ? p[i] : q[i]);
        }
        free(p);
        free(q);
    } else {
        sl_log_draft_block b;
        rc = sl_log_draft_block_alloc(&b, B);
        for (size_t first = 0; !rc; first += B) {
            rc = sl_log_read_drafts(r, first, &b);
            if (rc || b.n == 0) break;
            for (size_t i = 0; i < b.n && !rc; i++)
                if (!isnan(b.beta[i]) && !(b.beta[i] >= 0 && b.beta[i] <= 1 + 1e-9))
                    rc = sl_fail(SL_EINPUT, "%s: /drafts/beta row %zu is %g; expected [0, 1]", path, first + i, b.beta[i]);
        }
        sl_log_draft_block_free(&b);
        sl_log_iter_block ib;
        if (!rc) rc = sl_log_iter_block_alloc(&ib, B);
        for (size_t first = 0; !rc; first += B) {
            rc = sl_log_read_iterations(r, first, &ib);
            if (rc || ib.n == 0) break;
            for (size_t i = 0; i < ib.n && !rc; i++)
                if (ib.accepted[i] < 0 || ib.accepted[i] > ib.gamma[i] || ib.emitted[i] != ib.accepted[i] + 1)
                    rc = sl_fail(SL_EINPUT, "%s: /iterations row %zu: accepted %d, gamma %d, emitted %d are inconsistent",
                                 path, first + i, ib.accepted[i], ib.gamma[i], ib.emitted[i]);
        }
        if (ib.cap) sl_log_iter_block_free(&ib);
        sl_log_costs cs;
        if (!rc && !(rc = sl_log_read_costs(r, &cs))) sl_log_costs_free(&cs);
    }
    sl_log_close(r);
    return rc;
}

/* ---- Monte Carlo row source ---- */

struct sl_log_mc {
    sl_log_reader *r;
    size_t first;
};

static int mc_row(void *self, size_t i, double *p, double *q)
{
    sl_log_mc *m = self;
    int rc = sl_log_read_row(m->r, m->first + i, p, q);
    if (rc) return rc;
    size_t V = m->r->meta.vocab_size;
    double sp = 0, sq = 0;
    for (size_t x = 0; x < V; x++) sp += p[x], sq += q[x];
    if (!(sp > 0) || !(sq > 0))
        return sl_fail(SL_EINPUT, "%s: /distributions row %zu sums to 0", m->r->path, m->first + i);
    for (size_t x = 0; x < V; x++) p[x] /= sp, q[x] /= sq;
    return SL_OK;
}

int sl_log_mc_source(sl_log_reader *r, size_t first, size_t n_rows, sl_mc_layout layout, sl_log_mc **owner,
                     sl_mc_source *out)
{
    *owner = NULL;
    if (!r->has_dists) return sl_fail(SL_EINPUT, "%s holds beta-level data only: a Monte Carlo source needs /distributions", r->path);
    if (n_rows == 0 || first + n_rows > r->rows[M_DIST])
        return sl_fail(SL_EINPUT, "rows %zu..%zu are outside the %zu rows of %s", first, first + n_rows, r->rows[M_DIST], r->path);
    sl_log_mc *m = malloc(sizeof *m);
    if (!m) return sl_fail(SL_EFAIL, "out of memory");
    m->r = r;
    m->first = first;
    *owner = m;
    *out = (sl_mc_source){m, r->meta.vocab_size, n_rows, layout, mc_row};
    return SL_OK;
}

void sl_log_mc_free(sl_log_mc *m) { free(m); }
