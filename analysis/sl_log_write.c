/*
 * sl_log_write.c: the log writer (analysis/LOG_SCHEMA.md, "Writing"): rows buffered per column and
 * appended a chunk at a time, crash-safe shards (temporary file, fsync, rename), the lock that
 * keeps a second writer out, the run log's costs, and the assembly of OUT.h5 from the shards.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <hdf5.h>
#include <libdeflate.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "sl_common.h"
#include "sl_half.h"
#include "sl_log_internal.h"
#include "sl_mpi.h"

#define ROW_CHUNK 4096 /* rows per chunk of the per-row columns */

/* ---- HDF5 types and attributes ---- */

static hid_t file_type(int type, sl_log_dist d)
{
    switch (type) {
    case T_I8: return H5T_STD_I8LE;
    case T_I32: return H5T_STD_I32LE;
    case T_I64: return H5T_STD_I64LE;
    case T_F64: return H5T_IEEE_F64LE;
    default: return d == SL_LOG_DIST_F16 ? sl_log_h5_f16_type() : H5T_IEEE_F32LE;
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
    /* A sweep's gamma list joins the fingerprint only when set, so single-gamma logs keep theirs. */
    if (m->gammas[0]) {
        size_t len = strlen(buf);
        if (len < n) snprintf(buf + len, n - len, ";gammas=%s", m->gammas);
    }
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
        if (m->gammas[0]) rc |= attr_str(f, "gammas", m->gammas);
        rc |= attr_str(f, "rule", m->rule);
        rc |= attr_f64(f, "lenience", m->lenience);
        if (m->threads > 0) rc |= attr_i64(f, "threads", m->threads);
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

/* Every file is written in the HDF5 1.10 format (superblock 2, version-2 object headers,
 * extensible-array chunk indexes), whose metadata all carry checksums: a damaged byte in a layout,
 * dataspace or filter message is then reported by libhdf5 as an error instead of being parsed
 * (libhdf5 1.10.8 divides by zero or reads past a buffer on some damaged 1.8-format headers).
 * Both bounds are pinned so that a newer libhdf5 still writes what every reader of 1.10 (h5py
 * included) reads. */
static hid_t create_file(const char *path)
{
    hid_t fapl = H5Pcreate(H5P_FILE_ACCESS);
    if (fapl < 0) return -1;
    hid_t f = H5Pset_libver_bounds(fapl, H5F_LIBVER_V110, H5F_LIBVER_V110) < 0
                  ? -1
                  : H5Fcreate(path, H5F_ACC_TRUNC, H5P_DEFAULT, fapl);
    H5Pclose(fapl);
    return f;
}

/* Rows per distribution chunk: about 1 MiB of rows, and where it costs at most half of that, a
 * divisor of shard_rows (the rows of a full shard, 0 if unknown), so that every full shard is
 * whole chunks and the assembly copies them as stored (dist_copy_chunk). */
static size_t dist_chunk_rows(size_t V, sl_log_dist d, size_t shard_rows)
{
    size_t bytes = V * (d == SL_LOG_DIST_F16 ? 2 : 4);
    size_t r = (1u << 20) / (bytes ? bytes : 1); /* chunks of about 1 MiB */
    r = r < 1 ? 1 : r > 1024 ? 1024 : r;
    for (size_t k = r; shard_rows > 0 && k >= (r + 1) / 2; k--)
        if (shard_rows % k == 0) return k;
    return r;
}

/* The rows of a full shard of a measure log (a sequence has a row per new token unless it meets
 * eos); 0 when unknown or absurd. */
static size_t shard_rows(const sl_log_meta *m)
{
    if (m->kind != SL_LOG_MEASURE || m->tokens_per_sequence == 0 || m->shard_sequences == 0 ||
        m->tokens_per_sequence > ((uint64_t)1 << 30) / m->shard_sequences)
        return 0;
    return (size_t)(m->tokens_per_sequence * m->shard_sequences);
}

static int table_w_create(table_w *t, hid_t file, const table_def *def, size_t V, sl_log_dist d, int level,
                          int dist_level, size_t shard_rows)
{
    memset(t, 0, sizeof *t);
    t->def = def;
    int is_dist = def->cols[0].type == T_DIST;
    t->chunk_rows = is_dist ? dist_chunk_rows(V, d, shard_rows) : ROW_CHUNK;
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
        /* Per-row columns carry a Fletcher-32 checksum per chunk, checked by every H5Dread (a damaged
         * chunk is an error, not garbage handed to the inflater). Distribution chunks do not: they
         * are written (H5Dwrite_chunk) and read (H5Dread_chunk, or with pread for direct access)
         * around the filter pipeline, so the checksum would have to be computed and verified here, a
         * pass over every byte that the direct float32 read exists to avoid; instead the reader
         * checks each chunk's size, that it inflates to exactly that size, and every value and row
         * sum (LOG_SCHEMA.md, Reading). */
        if (!is_dist) H5Pset_fletcher32(pl);
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
/* Whether the shard's distribution datasets d (t's columns) are chunked as t's (same rows per
 * chunk and width) and carry the same number of filters (0, or deflate), so that their stored
 * chunks, with their filter masks, mean the same in t's datasets. */
static int dist_chunks_match(const table_w *t, const hid_t *d)
{
    if (t->def->cols[0].type != T_DIST) return 0;
    for (size_t c = 0; c < t->def->n_cols; c++) {
        hid_t ps = H5Dget_create_plist(d[c]), pt = H5Dget_create_plist(t->cols[c].dset);
        hsize_t cs[2] = {0, 0}, ct[2] = {0, 0};
        int ok = ps >= 0 && pt >= 0 && H5Pget_chunk(ps, 2, cs) == 2 && H5Pget_chunk(pt, 2, ct) == 2 && cs[0] == ct[0] &&
                 cs[1] == ct[1] && H5Pget_nfilters(ps) == H5Pget_nfilters(pt);
        if (ps >= 0) H5Pclose(ps);
        if (pt >= 0) H5Pclose(pt);
        if (!ok) return 0;
    }
    return 1;
}

/* Copies the shard's chunk starting at row off (whole, in the shard) of every column of d to the
 * end of t (whose buffer is empty), as stored: no inflate, no deflate. The bytes are the ones
 * dist_flush wrote into the shard, so the reader's checks of each chunk apply as before. */
static int dist_copy_chunk(table_w *t, const hid_t *d, size_t off)
{
    for (size_t c = 0; c < t->def->n_cols; c++) {
        col_w *cw = &t->cols[c];
        hsize_t src[2] = {off, 0}, dst[2] = {t->nrows, 0}, dims[2] = {t->nrows + t->chunk_rows, cw->width}, nb = 0;
        uint32_t mask = 0;
        if (H5Dget_chunk_storage_size(d[c], src, &nb) < 0 || nb == 0 ||
            nb > t->chunk_rows * cw->width * cw->esize + 1024)
            return sl_fail(SL_EINPUT, "shard chunk at row %zu of %s/%s has no valid size", off, t->def->group,
                           t->def->cols[c].name);
        if (t->zcap < nb) {
            free(t->zbuf);
            t->zcap = t->chunk_rows * cw->width * cw->esize + 1024;
            if (!(t->zbuf = malloc(t->zcap))) return sl_fail(SL_EFAIL, "out of memory");
        }
        if (H5Dread_chunk(d[c], H5P_DEFAULT, src, &mask, t->zbuf) < 0)
            return sl_fail(SL_EINPUT, "cannot read shard chunk at row %zu of %s/%s", off, t->def->group,
                           t->def->cols[c].name);
        if (H5Dset_extent(cw->dset, dims) < 0 || H5Dwrite_chunk(cw->dset, H5P_DEFAULT, mask, dst, nb, t->zbuf) < 0)
            return sl_fail(SL_EFAIL, "writing %s/%s failed (disk full?)", t->def->group, t->def->cols[c].name);
    }
    t->nrows += t->chunk_rows;
    return SL_OK;
}

/* Appends the n rows of a shard's table (src_group) to t. Each source dataset is opened once, with
 * a chunk cache that holds its largest chunk, so that reading it in the pieces that fill t's
 * chunks decodes (and checksums) every source chunk once, however the chunk boundaries fall. */
static int table_w_append_from(table_w *t, hid_t src_group, size_t n)
{
    size_t nc = t->def->n_cols;
    hid_t *d = malloc(nc * sizeof *d);
    int rc = d ? SL_OK : sl_fail(SL_EFAIL, "out of memory");
    for (size_t c = 0; c < nc && d; c++) d[c] = -1;
    for (size_t c = 0; c < nc && !rc; c++) {
        col_w *cw = &t->cols[c];
        hid_t ap = H5Pcreate(H5P_DATASET_ACCESS);
        /* a chunk of up to chunk_rows rows of width elements of up to 8 bytes, twice over */
        size_t bytes = 2 * (t->chunk_rows + 1) * cw->width * 8;
        if (ap >= 0) H5Pset_chunk_cache(ap, 521, bytes, 1.0);
        d[c] = H5Dopen2(src_group, t->def->cols[c].name, ap >= 0 ? ap : H5P_DEFAULT);
        if (ap >= 0) H5Pclose(ap);
        if (d[c] < 0) rc = sl_fail(SL_EINPUT, "shard lacks %s/%s", t->def->group, t->def->cols[c].name);
    }
    const int raw_ok = !rc && dist_chunks_match(t, d);
    size_t off = 0;
    while (off < n && !rc) {
        if (raw_ok && t->nbuf == 0 && off % t->chunk_rows == 0 && n - off >= t->chunk_rows) {
            rc = dist_copy_chunk(t, d, off);
            off += t->chunk_rows;
            continue;
        }
        size_t m = t->chunk_rows - t->nbuf;
        if (m > n - off) m = n - off;
        for (size_t c = 0; c < nc && !rc; c++) {
            col_w *cw = &t->cols[c];
            int rank = t->def->cols[c].type == T_DIST ? 2 : 1;
            hsize_t start[2] = {off, 0}, count[2] = {m, cw->width};
            hid_t fs = H5Dget_space(d[c]);
            H5Sselect_hyperslab(fs, H5S_SELECT_SET, start, NULL, count, NULL);
            hid_t ms = H5Screate_simple(rank, count, NULL);
            herr_t e = H5Dread(d[c], cw->ftype, ms, fs, H5P_DEFAULT, slot(t, c));
            H5Sclose(ms);
            H5Sclose(fs);
            if (e < 0) rc = sl_fail(SL_EINPUT, "cannot read shard dataset %s/%s", t->def->group, t->def->cols[c].name);
        }
        if (rc) break;
        t->nbuf += m;
        off += m;
        if (t->nbuf == t->chunk_rows) rc = table_w_flush(t);
    }
    for (size_t c = 0; d && c < nc; c++)
        if (d[c] >= 0) H5Dclose(d[c]);
    free(d);
    return rc;
}

/* ---- the writer ---- */

struct sl_log_writer {
    sl_log_meta meta;
    sl_log_write_opts opts;
    char *path, *dir;
    char fp[2048];
    int lock_fd;
    int mpi_pending; /* MPI build: opened on every rank, the ranks' final status not agreed yet */
    int mpi_rc;      /* ... and the status of this rank's failed shard check, else SL_EFAIL */
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
    sl_log_h5_quiet();
    *out = NULL;
    if (meta->vocab_size < 2) return sl_fail(SL_EINPUT, "vocabulary size %llu: expected >= 2", (unsigned long long)meta->vocab_size);
    if (meta->shard_sequences < 1) return sl_fail(SL_EINPUT, "shard_sequences: expected >= 1");
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
    /* MPI build (sl_mpi.h): rank 0 holds the lock and removes the temporaries for the whole job. */
    const int lead = sl_mpi_rank() == 0;
    if (!rc && lead) {
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
    if (!rc && lead) { /* temporary files of a killed run: never complete, safe to remove (we hold the lock) */
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
    /* MPI build: no rank writes a shard before rank 0 has cleaned up, and one failure fails all. */
    rc = sl_mpi_status(rc);
    if (rc) {
        sl_log_writer_close(w);
        return rc;
    }
    w->mpi_pending = sl_mpi_size() > 1;
    *out = w;
    return SL_OK;
}

static int log_assemble(sl_log_writer *w, size_t n_shards);

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
    /* MPI build: this rank stopped before sl_log_assemble, so it failed: tell the others, which
     * wait there, and keep every shard written (a later run resumes from them). */
    if (w->mpi_pending) (void)sl_mpi_status(w->mpi_rc ? w->mpi_rc : SL_EFAIL);
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


int sl_log_shard_done(sl_log_writer *w, size_t k, size_t n_seq, const int32_t *const *prompts, const size_t *n_prompt,
                      int *done)
{
    *done = 0;
    /* MPI build: rank r writes shards k with k % N = r; to it the others are someone else's work. */
    if (k % (size_t)sl_mpi_size() != (size_t)sl_mpi_rank()) {
        *done = 1;
        return SL_OK;
    }
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
    else if (!sl_log_h5_get_attr_str(f, "fingerprint", fp, sizeof fp) && sscanf(fp, "schema=%d;", &fp_ver) == 1 &&
             fp_ver != SL_LOG_SCHEMA_VERSION)
        rc = sl_fail(SL_EINPUT, "%s has schema version %d; this speclab writes version %d (use another output)", p, fp_ver,
                     SL_LOG_SCHEMA_VERSION);
    else if (sl_log_h5_get_attr_str(f, "fingerprint", fp, sizeof fp) || strcmp(fp, w->fp))
        rc = sl_fail(SL_EINPUT, "%s was written with other settings; use another output or remove %s", p, w->dir);
    else if (sl_log_h5_get_attr_num(f, "n_sequences", H5T_NATIVE_INT64, &nseq) || nseq < 0 || (size_t)nseq > n_seq)
        rc = sl_fail(SL_EINPUT, "%s holds %lld sequences, more than the %zu prompts it should cover (prompt list shrank?)",
                     p, (long long)nseq, n_seq);
    if (!rc) {
        int64_t *np = NULL, *tok = NULL;
        size_t nn = 0, nt = 0;
        hid_t gs = H5Gopen2(f, "sequences", H5P_DEFAULT), gp = H5Gopen2(f, "prompts", H5P_DEFAULT);
        if (gs < 0 || gp < 0 || sl_log_h5_read_i64_all(gs, "n_prompt_tokens", &np, &nn) || sl_log_h5_read_i64_all(gp, "tokens", &tok, &nt) ||
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
    w->mpi_rc = rc;
    return rc;
}

int sl_log_shard_begin(sl_log_writer *w, size_t k)
{
    shard_abandon(w);
    w->shard = k;
    w->shard_path = shard_name(w, k);
    w->shard_tmp = w->shard_path ? str_printf("%s.tmp.%ld", w->shard_path, (long)getpid()) : NULL;
    if (!w->shard_tmp) return sl_fail(SL_EFAIL, "out of memory");
    w->file = create_file(w->shard_tmp);
    if (w->file < 0) return sl_fail(SL_EINPUT, "cannot write output %s", w->shard_tmp);
    size_t nt;
    const table_def *defs = sl_log_kind_tables(w->meta.kind, &nt);
    int rc = SL_OK;
    w->n_tables = 0;
    for (size_t i = 0; i < nt && !rc; i++) {
        if (defs[i].optional && w->meta.dist == SL_LOG_DIST_NONE) {
            memset(&w->tables[w->n_tables++], 0, sizeof(table_w));
            continue;
        }
        rc = table_w_create(&w->tables[w->n_tables++], w->file, &defs[i], w->meta.vocab_size, w->meta.dist,
                            w->opts.deflate_level, w->opts.dist_level, shard_rows(&w->meta));
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
                for (size_t x = 0; x < V; x++) ((uint16_t *)dst)[x] = sl_half_f32_to_f16((float)src[x]);
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
    hid_t f = create_file(tmp);
    table_w t;
    memset(&t, 0, sizeof t);
    if (f < 0) rc = sl_fail(SL_EINPUT, "cannot write output %s", tmp);
    if (!rc) rc = table_w_create(&t, f, &sl_log_costs_table, 1, SL_LOG_DIST_NONE, w->opts.deflate_level, 0, 0);
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
    /* MPI build: every rank's shards are written (else every rank fails, no OUT.h5 is made); rank
     * 0 assembles them alone, and every rank returns its status. */
    if (w->mpi_pending) {
        w->mpi_pending = 0;
        int rc = sl_mpi_status(SL_OK);
        if (rc) return rc;
        if (sl_mpi_rank() != 0) return sl_mpi_status(SL_OK);
        return sl_mpi_status(log_assemble(w, n_shards));
    }
    return log_assemble(w, n_shards);
}

static int log_assemble(sl_log_writer *w, size_t n_shards)
{
    char *tmp = str_printf("%s.tmp.%ld", w->path, (long)getpid());
    if (!tmp) return sl_fail(SL_EFAIL, "out of memory");
    int rc = SL_OK;
    hid_t f = create_file(tmp);
    if (f < 0) rc = sl_fail(SL_EINPUT, "cannot write output %s", tmp);
    size_t nt;
    const table_def *defs = sl_log_kind_tables(w->meta.kind, &nt);
    table_w tabs[4];
    memset(tabs, 0, sizeof tabs);
    for (size_t i = 0; i < nt && !rc; i++)
        if (!(defs[i].optional && w->meta.dist == SL_LOG_DIST_NONE))
            rc = table_w_create(&tabs[i], f, &defs[i], w->meta.vocab_size, w->meta.dist, w->opts.deflate_level,
                                w->opts.dist_level, shard_rows(&w->meta));
    int64_t nseq_total = 0;
    for (size_t k = 0; k < n_shards && !rc; k++) {
        char *p = shard_name(w, k);
        hid_t sf = p ? H5Fopen(p, H5F_ACC_RDONLY, H5P_DEFAULT) : -1;
        char fp[2048] = "";
        int64_t ns = 0;
        if (sf < 0) rc = sl_fail(SL_EINPUT, "cannot open shard %s", p ? p : "?");
        else if (sl_log_h5_get_attr_str(sf, "fingerprint", fp, sizeof fp) || strcmp(fp, w->fp) ||
                 sl_log_h5_get_attr_num(sf, "n_sequences", H5T_NATIVE_INT64, &ns))
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
