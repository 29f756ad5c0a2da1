/*
 * sl_log_read.c: the log reader: opening with every structural check of LOG_SCHEMA.md, the
 * per-sequence table, row blocks of positions, iterations and drafts, the run log's costs,
 * sl_log_validate (which streams every value), and the Monte Carlo row source over a log.
 * Distributions are read by sl_log_dist.c.
 */
#include <errno.h>
#include <hdf5.h>
#include <libdeflate.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "sl_common.h"
#include "sl_log_internal.h"

/* ---- opening ---- */

static int type_ok(hid_t d, int type, sl_log_dist *dist_out)
{
    hid_t t = H5Dget_type(d);
    H5T_class_t cl = H5Tget_class(t);
    size_t sz = H5Tget_size(t);
    H5Tclose(t);
    /* The sizes too: libhdf5 1.10.8 copies past its buffer when a damaged header gives an integer
     * column an element size its dataspace does not account for. */
    switch (type) {
    case T_I8: return cl == H5T_INTEGER && sz == 1;
    case T_I32: return cl == H5T_INTEGER && sz == 4;
    case T_I64: return cl == H5T_INTEGER && sz == 8;
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
    if (r->fd >= 0) close(r->fd);
    free(r->caddr), free(r->csize), free(r->cmask);
    for (int i = 0; i < r->nt_scratch; i++) free(r->zc[i]), free(r->zs[i]), free(r->fs[i]);
    free(r->zc), free(r->zs), free(r->fs);
    free(r->cache_p);
    free(r->cache_q);
    free(r->path);
    free(r);
}

static int read_cols_i64(sl_log_reader *r, size_t t, size_t c, size_t first, size_t n, int64_t *out);

/* The /sequences table is small and everything downstream sizes buffers and walks rows by it, so
 * sl_log_open checks it whole: ids strictly increasing in [0, 2^31), counts >= 0, run modes 0 or 1,
 * and sums that account for every row, prompt token and draft, added without overflow (each sum is
 * compared with a row count as it grows, so it never exceeds one). */
static int check_sequences(sl_log_reader *r)
{
    const sl_log_meta *m = &r->meta;
    const char *path = r->path;
    size_t seq_t = m->kind == SL_LOG_MEASURE ? M_SEQ : R_SEQ, ns = r->rows[seq_t], nc = r->defs[seq_t].n_cols;
    size_t row_t = m->kind == SL_LOG_MEASURE ? M_POS : R_ITER;
    int64_t *v = malloc((ns + 1) * nc * sizeof *v);
    if (!v) return sl_fail(SL_EFAIL, "out of memory");
    int rc = SL_OK;
    for (size_t c = 0; c < nc && !rc; c++)
        if (r->defs[seq_t].cols[c].type != T_F64) rc = read_cols_i64(r, seq_t, c, 0, ns, v + c * (ns + 1));
    /* column c of sequence i is v[c * (ns + 1) + i]; columns: sequence, prompt_id, n_prompt_tokens, n_generated,
     * n_rows, (run) n_drafts, mode */
#define SEQ(c, i) v[(size_t)(c) * (ns + 1) + (i)]
    const size_t limit[3] = {r->rows[row_t], r->rows[seq_t + 1], m->kind == SL_LOG_RUN ? r->rows[R_DRAFT] : 0};
    static const char *what[3] = {"n_rows", "n_prompt_tokens", "n_drafts"};
    static const int col[3] = {4, 2, 5};
    uint64_t sum[3] = {0, 0, 0};
    for (size_t i = 0; i < ns && !rc; i++) {
        int64_t id = SEQ(0, i);
        if (id < 0 || id > INT32_MAX || (i > 0 && id <= SEQ(0, i - 1)))
            rc = sl_fail(SL_EINPUT, "%s: /sequences/sequence row %zu is %lld; expected ids increasing in [0, 2^31)", path, i,
                         (long long)id);
        for (int c = 1; c <= 4 && !rc; c++)
            if (SEQ(c, i) < 0)
                rc = sl_fail(SL_EINPUT, "%s: /sequences/%s row %zu is %lld; expected >= 0", path, r->defs[seq_t].cols[c].name, i,
                             (long long)SEQ(c, i));
        if (!rc && m->kind == SL_LOG_MEASURE && SEQ(4, i) != SEQ(3, i))
            rc = sl_fail(SL_EINPUT, "%s: /sequences row %zu: n_rows %lld differs from n_generated %lld (equal in measure logs)",
                         path, i, (long long)SEQ(4, i), (long long)SEQ(3, i));
        if (!rc && m->kind == SL_LOG_RUN) {
            int64_t mode = SEQ(6, i);
            if (SEQ(5, i) < 0)
                rc = sl_fail(SL_EINPUT, "%s: /sequences/n_drafts row %zu is %lld; expected >= 0", path, i, (long long)SEQ(5, i));
            else if (mode != 0 && mode != 1)
                rc = sl_fail(SL_EINPUT, "%s: /sequences/mode row %zu is %lld; expected 0 (speculative) or 1 (autoregressive)",
                             path, i, (long long)mode);
            else if (mode == 1 && (SEQ(4, i) != 0 || SEQ(5, i) != 0))
                rc = sl_fail(SL_EINPUT, "%s: /sequences row %zu is autoregressive (mode 1) but has %lld iterations and %lld drafts",
                             path, i, (long long)SEQ(4, i), (long long)SEQ(5, i));
        }
        for (int k = 0; k < (m->kind == SL_LOG_RUN ? 3 : 2) && !rc; k++) {
            sum[k] += (uint64_t)SEQ(col[k], i); /* both < 2^63: no wrap */
            if (sum[k] > limit[k])
                rc = sl_fail(SL_EINPUT, "%s: /sequences/%s sums to more than the %zu rows it counts (row %zu adds %lld)", path,
                             what[k], limit[k], i, (long long)SEQ(col[k], i));
        }
    }
#undef SEQ
    free(v);
    for (int k = 0; k < (m->kind == SL_LOG_RUN ? 3 : 2) && !rc; k++)
        if (sum[k] != limit[k])
            rc = sl_fail(SL_EINPUT, "%s: /sequences/%s sums to %llu, but /%s has %zu rows", path, what[k],
                         (unsigned long long)sum[k], k == 0 ? r->defs[row_t].group : k == 1 ? "prompts/tokens" : "drafts",
                         limit[k]);
    return rc;
}

static int open_checked(sl_log_reader **out, const char *path, sl_log_chunk_table *known)
{
    *out = NULL;
    struct stat st;
    if (stat(path, &st) != 0) return sl_fail(SL_EINPUT, "cannot open %s: %s", path, strerror(errno));
    if (H5Fis_hdf5(path) <= 0) return sl_fail(SL_EINPUT, "%s is not an HDF5 file (corrupt or truncated?)", path);
    sl_log_reader *r = calloc(1, sizeof *r);
    if (!r) return sl_fail(SL_EFAIL, "out of memory");
    r->path = strdup(path);
    r->cache_chunk = -1;
    r->fd = -1;
    r->file = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
    int rc = SL_OK;
    char buf[256];
    int64_t ver = -1;
    sl_log_meta *m = &r->meta;
    sl_log_meta_init(m, SL_LOG_MEASURE);
    if (r->file < 0) rc = sl_fail(SL_EINPUT, "cannot open %s as HDF5 (corrupt or truncated?)", path);
    else if (sl_log_h5_get_attr_str(r->file, "schema", buf, sizeof buf) || strcmp(buf, SL_LOG_SCHEMA_NAME))
        rc = sl_fail(SL_EINPUT, "%s is not a speclab log (root attribute schema != \"%s\")", path, SL_LOG_SCHEMA_NAME);
    else if (sl_log_h5_get_attr_num(r->file, "schema_version", H5T_NATIVE_INT64, &ver) || ver != SL_LOG_SCHEMA_VERSION)
        rc = sl_fail(SL_EINPUT, "%s has schema version %lld; this speclab reads version %d", path, (long long)ver,
                     SL_LOG_SCHEMA_VERSION);
    else if (sl_log_h5_get_attr_str(r->file, "kind", buf, sizeof buf) || (strcmp(buf, "measure") && strcmp(buf, "run")))
        rc = sl_fail(SL_EINPUT, "%s: root attribute kind must be measure or run", path);
    if (!rc) {
        m->kind = strcmp(buf, "run") ? SL_LOG_MEASURE : SL_LOG_RUN;
        m->schema_version = ver;
        uint64_t u;
        sl_log_h5_get_attr_str(r->file, "target_name", m->target_name, sizeof m->target_name);
        sl_log_h5_get_attr_str(r->file, "target_sha256", m->target_sha256, sizeof m->target_sha256);
        sl_log_h5_get_attr_str(r->file, "draft_name", m->draft_name, sizeof m->draft_name);
        sl_log_h5_get_attr_str(r->file, "draft_sha256", m->draft_sha256, sizeof m->draft_sha256);
        sl_log_h5_get_attr_str(r->file, "source", m->source, sizeof m->source);
        sl_log_h5_get_attr_num(r->file, "temperature", H5T_NATIVE_DOUBLE, &m->sampling.temperature);
        if (!sl_log_h5_get_attr_num(r->file, "top_k", H5T_NATIVE_UINT64, &u)) m->sampling.top_k = u;
        sl_log_h5_get_attr_num(r->file, "top_p", H5T_NATIVE_DOUBLE, &m->sampling.top_p);
        sl_log_h5_get_attr_num(r->file, "min_p", H5T_NATIVE_DOUBLE, &m->sampling.min_p);
        sl_log_h5_get_attr_num(r->file, "seed", H5T_NATIVE_UINT64, &m->seed);
        sl_log_h5_get_attr_num(r->file, "tokens_per_sequence", H5T_NATIVE_UINT64, &m->tokens_per_sequence);
        sl_log_h5_get_attr_num(r->file, "eos", H5T_NATIVE_INT64, &m->eos);
        sl_log_h5_get_attr_num(r->file, "shard_sequences", H5T_NATIVE_UINT64, &m->shard_sequences);
        sl_log_h5_get_attr_num(r->file, "gamma", H5T_NATIVE_UINT64, &m->gamma);
        sl_log_h5_get_attr_str(r->file, "gammas", m->gammas, sizeof m->gammas);
        sl_log_h5_get_attr_num(r->file, "threads", H5T_NATIVE_INT64, &m->threads);
        sl_log_h5_get_attr_str(r->file, "rule", m->rule, sizeof m->rule);
        sl_log_h5_get_attr_num(r->file, "lenience", H5T_NATIVE_DOUBLE, &m->lenience);
        sl_log_h5_get_attr_str(r->file, "tool_version", m->tool_version, sizeof m->tool_version);
        sl_log_h5_get_attr_str(r->file, "source_revision", m->source_revision, sizeof m->source_revision);
        sl_log_h5_get_attr_str(r->file, "created_utc", m->created_utc, sizeof m->created_utc);
        if (!sl_log_h5_get_attr_str(r->file, "dist", buf, sizeof buf)) sl_log_dist_parse(buf, &m->dist);
        sl_err_clear(); /* the optional attributes above may fail quietly; vocab_size may not */
        if (sl_log_h5_get_attr_num(r->file, "vocab_size", H5T_NATIVE_UINT64, &m->vocab_size) || m->vocab_size < 2 ||
            m->vocab_size > ((uint64_t)1 << 31))
            rc = sl_fail(SL_EINPUT, "%s: root attribute vocab_size missing or outside [2, 2^31]", path);
    }
    if (!rc) r->defs = sl_log_kind_tables(m->kind, &r->n_tables);
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
                else if (ch[0] == 0 || ch[0] > ((size_t)64 << 20) / (m->vocab_size * (dt == SL_LOG_DIST_F16 ? 2 : 4)))
                    /* chunks over 64 MiB (a damaged layout, or a foreign writer): the naive path */
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
    if (!rc && r->has_dists && r->dist_deflate >= 0) sl_log_locate_chunks(r, known);
    if (!rc && r->has_dists && r->rows[M_DIST] != r->rows[M_POS])
        rc = sl_fail(SL_EINPUT, "%s: /distributions has %zu rows, /positions has %zu", path, r->rows[M_DIST], r->rows[M_POS]);
    if (!rc) rc = check_sequences(r);
    if (rc) {
        sl_log_close(r);
        return rc;
    }
    *out = r;
    return SL_OK;
}

/* The child's chunk table, read from the pipe: n, then the three arrays. 0 if it came whole. */
static int read_table(int fd, sl_log_chunk_table *t)
{
    uint64_t n = 0;
    if (sl_fd_read_all(fd, &n, sizeof n) || n == 0 || n > ((uint64_t)1 << 40) / 20) return -1;
    t->addr = malloc(2 * n * sizeof *t->addr), t->size = malloc(2 * n * sizeof *t->size);
    t->mask = malloc(2 * n * sizeof *t->mask);
    if (!t->addr || !t->size || !t->mask || sl_fd_read_all(fd, t->addr, 2 * n * sizeof *t->addr) ||
        sl_fd_read_all(fd, t->size, 2 * n * sizeof *t->size) || sl_fd_read_all(fd, t->mask, 2 * n * sizeof *t->mask))
        return -1;
    t->n = (size_t)n;
    return 0;
}

/* libhdf5 1.10.8 itself crashes on some damaged metadata (a chunk dimension of 0 divides by zero
 * inside H5Dopen2) before any check of ours can run. Logs written since schema 1's checksummed
 * storage (LOG_SCHEMA.md) carry metadata checksums that catch such damage, but older logs and
 * foreign files do not; so the structural open runs first in a forked child, and a child killed by
 * a signal becomes a one-line error (exit 2) instead of a crash of the caller. The child does what
 * open_checked does (metadata, /sequences, and the distribution chunks' addresses), and sends the
 * chunk table back through a pipe, so that the open below takes it instead of asking libhdf5 for
 * every chunk again: for the analyze benchmark's float32 log (400 chunks) that second lookup took
 * 16-25 ms of sl_log_open's 41-46 ms (2-vCPU Emerald Rapids VM), of a command that takes ~0.14 s.
 * A child that fails without a signal is ignored, as the open below fails the same way with its
 * message; a table that does not come whole is dropped (the open then locates the chunks itself). */
static int probe_in_child(const char *path, sl_log_chunk_table *known)
{
    fflush(NULL);
    int pfd[2];
    const int piped = pipe(pfd) == 0;
    pid_t pid = fork();
    if (pid < 0) { /* no probe possible: open directly, as before */
        if (piped) close(pfd[0]), close(pfd[1]);
        return SL_OK;
    }
    if (pid == 0) {
        if (piped) close(pfd[0]);
        sl_log_reader *r = NULL;
        int rc = open_checked(&r, path, NULL);
        if (!rc && piped && r->fd >= 0) {
            const uint64_t n = r->n_chunks;
            if (!sl_fd_write_all(pfd[1], &n, sizeof n) && !sl_fd_write_all(pfd[1], r->caddr, 2 * n * sizeof *r->caddr) &&
                !sl_fd_write_all(pfd[1], r->csize, 2 * n * sizeof *r->csize))
                sl_fd_write_all(pfd[1], r->cmask, 2 * n * sizeof *r->cmask);
        }
        sl_log_close(r);
        _exit(rc ? 3 : 0);
    }
    int got = -1;
    if (piped) {
        close(pfd[1]);
        got = read_table(pfd[0], known);
        close(pfd[0]);
    }
    int st = 0;
    while (waitpid(pid, &st, 0) < 0)
        if (errno != EINTR) {
            st = -1;
            break;
        }
    if (got || st != 0) { /* no whole table from a child that opened the file: none */
        free(known->addr), free(known->size), free(known->mask);
        *known = (sl_log_chunk_table){0};
    }
    if (st != -1 && WIFSIGNALED(st))
        return sl_fail(SL_EINPUT, "%s: libhdf5 crashed (%s) reading the file's metadata: it is damaged", path,
                       strsignal(WTERMSIG(st)));
    return SL_OK;
}

int sl_log_open(sl_log_reader **out, const char *path)
{
    sl_log_h5_quiet();
    *out = NULL;
    sl_log_chunk_table known = {0};
    int rc = probe_in_child(path, &known);
    if (!rc) rc = open_checked(out, path, &known);
    free(known.addr), free(known.size), free(known.mask); /* NULL when the open took them */
    return rc;
}

const sl_log_meta *sl_log_meta_of(const sl_log_reader *r) { return &r->meta; }
int sl_log_has_dists(const sl_log_reader *r) { return r->has_dists; }
size_t sl_log_n_rows(const sl_log_reader *r) { return r->rows[0]; }
size_t sl_log_n_drafts(const sl_log_reader *r) { return r->meta.kind == SL_LOG_RUN ? r->rows[R_DRAFT] : 0; }
size_t sl_log_n_sequences(const sl_log_reader *r) { return r->rows[2]; }
size_t sl_log_dist_rows_per_chunk(const sl_log_reader *r) { return r->dist_chunk; }

/* ---- tables ---- */

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
    /* Every reader of iterations relies on these; checking them here costs nothing next to the read. */
    for (size_t i = 0; i < b->n && !rc; i++)
        if (b->gamma[i] < 0 || b->drafted[i] < 0 || b->drafted[i] > b->gamma[i] || b->accepted[i] < 0 ||
            b->accepted[i] > b->drafted[i] || b->emitted[i] != b->accepted[i] + 1)
            rc = sl_fail(SL_EINPUT,
                         "%s: /iterations row %zu: gamma %d, drafted %d, accepted %d, emitted %d; expected "
                         "0 <= accepted <= drafted <= gamma and emitted = accepted + 1",
                         r->path, first + i, b->gamma[i], b->drafted[i], b->accepted[i], b->emitted[i]);
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
    if (g < 0 || sl_log_h5_get_attr_num(g, "c", H5T_NATIVE_DOUBLE, &out->c))
        rc = sl_fail(SL_EINPUT, "%s: /costs lacks attribute c", r->path);
    if (!rc) {
        sl_log_h5_get_attr_num(g, "draft_step_s", H5T_NATIVE_DOUBLE, &out->draft_step_s);
        sl_log_h5_get_attr_num(g, "target_step_s", H5T_NATIVE_DOUBLE, &out->target_step_s);
    }
    int64_t *n = NULL;
    size_t cnt = 0;
    if (!rc && sl_log_h5_read_i64_all(g, "n", &n, &cnt)) rc = sl_fail(SL_EINPUT, "%s: /costs/n missing", r->path);
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

/* ---- validation ---- */

/* Walks rows that /sequences groups by a count column: for row i, the sequence it must belong to
 * and its index inside that sequence. */
typedef struct {
    const sl_log_seq *s;
    size_t ns, cur, k; /* current sequence, index of the next row inside it */
    int col;           /* 4: n_rows, 5: n_drafts */
} seq_walk;

static size_t walk_count(const seq_walk *w, size_t i) { return (size_t)(w->col == 4 ? w->s[i].n_rows : w->s[i].n_drafts); }
/* Advances to the next row; returns its sequence index in /sequences (ns when the rows overrun). */
static size_t walk_next(seq_walk *w, size_t *k)
{
    while (w->cur < w->ns && w->k >= walk_count(w, w->cur)) w->cur++, w->k = 0;
    *k = w->k++;
    return w->cur;
}

static int validate_measure(sl_log_reader *r, const sl_log_seq *seqs)
{
    const char *path = r->path;
    size_t V = r->meta.vocab_size, B = 4096, ns = r->rows[M_SEQ];
    seq_walk w = {seqs, ns, 0, 0, 4};
    sl_log_pos_block b;
    int rc = sl_log_pos_block_alloc(&b, B);
    for (size_t first = 0; !rc; first += B) {
        rc = sl_log_read_positions(r, first, &b);
        if (rc || b.n == 0) break;
        for (size_t i = 0; i < b.n && !rc; i++) {
            const double pr[] = {b.beta[i], b.d_lk[i], b.q_max[i], b.p_token[i], b.q_token[i]};
            static const char *nm[] = {"beta", "d_lk", "q_max", "p_token", "q_token"};
            for (int c = 0; c < 5 && !rc; c++)
                if (!(pr[c] >= 0 && pr[c] <= 1 + 1e-9))
                    rc = sl_fail(SL_EINPUT, "%s: /positions/%s row %zu is %g; expected a probability in [0, 1]", path, nm[c],
                                 first + i, pr[c]);
            if (!rc && (!(b.entropy_p[i] >= 0) || !(b.entropy_q[i] >= 0) || !isfinite(b.entropy_p[i]) ||
                        !isfinite(b.entropy_q[i])))
                rc = sl_fail(SL_EINPUT, "%s: /positions/entropy_p or entropy_q row %zu is negative or not finite", path, first + i);
            if (!rc && (b.token[i] < 0 || (size_t)b.token[i] >= V))
                rc = sl_fail(SL_EINPUT, "%s: /positions/token row %zu is %d; expected [0, %zu)", path, first + i, b.token[i], V);
            size_t k, s = rc ? 0 : walk_next(&w, &k);
            if (!rc && (s >= ns || b.sequence[i] != seqs[s].sequence || b.position[i] < 0 || (size_t)b.position[i] != k))
                rc = sl_fail(SL_EINPUT, "%s: /positions row %zu is (sequence %d, position %d); /sequences expects (%lld, %zu)", path,
                             first + i, b.sequence[i], b.position[i], s < ns ? (long long)seqs[s].sequence : -1LL, k);
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
        rc = sl_log_read_dists(r, first, n, p, q, 1, 0); /* checks that every row sums to 1 */
        for (size_t i = 0; i < n * V && !rc; i++)
            if (!(p[i] >= 0 && p[i] <= 1) || !(q[i] >= 0 && q[i] <= 1))
                rc = sl_fail(SL_EINPUT, "%s: /distributions/%s row %zu token %zu is %g; expected a probability", path,
                             !(p[i] >= 0 && p[i] <= 1) ? "p" : "q", first + i / V, i % V,
                             !(p[i] >= 0 && p[i] <= 1) ? p[i] : q[i]);
    }
    free(p);
    free(q);
    return rc;
}

static int validate_run(sl_log_reader *r, const sl_log_seq *seqs)
{
    const char *path = r->path;
    size_t V = r->meta.vocab_size, B = 4096, ns = r->rows[R_SEQ];
    sl_log_draft_block b = {0};
    sl_log_iter_block ib = {0};
    int rc = sl_log_draft_block_alloc(&b, B);
    seq_walk w = {seqs, ns, 0, 0, 5};
    for (size_t first = 0; !rc; first += B) {
        rc = sl_log_read_drafts(r, first, &b);
        if (rc || b.n == 0) break;
        for (size_t i = 0; i < b.n && !rc; i++) {
            size_t k, s = walk_next(&w, &k), row = first + i;
            if (!isnan(b.beta[i]) && !(b.beta[i] >= 0 && b.beta[i] <= 1 + 1e-9))
                rc = sl_fail(SL_EINPUT, "%s: /drafts/beta row %zu is %g; expected [0, 1]", path, row, b.beta[i]);
            else if (s >= ns || b.sequence[i] != seqs[s].sequence)
                rc = sl_fail(SL_EINPUT, "%s: /drafts row %zu names sequence %d; /sequences/n_drafts expects %lld", path, row,
                             b.sequence[i], s < ns ? (long long)seqs[s].sequence : -1LL);
            else if (b.iteration[i] < 0 || b.iteration[i] >= seqs[s].n_rows)
                rc = sl_fail(SL_EINPUT, "%s: /drafts/iteration row %zu is %d; expected [0, %lld)", path, row, b.iteration[i],
                             (long long)seqs[s].n_rows);
            else if (b.draft_position[i] < 1)
                rc = sl_fail(SL_EINPUT, "%s: /drafts/draft_position row %zu is %d; expected >= 1", path, row, b.draft_position[i]);
            else if (b.token[i] < 0 || (size_t)b.token[i] >= V)
                rc = sl_fail(SL_EINPUT, "%s: /drafts/token row %zu is %d; expected [0, %zu)", path, row, b.token[i], V);
            else if (b.accepted[i] != 0 && b.accepted[i] != 1)
                rc = sl_fail(SL_EINPUT, "%s: /drafts/accepted row %zu is %d; expected 0 or 1", path, row, b.accepted[i]);
        }
    }
    uint64_t drafted = 0;
    w = (seq_walk){seqs, ns, 0, 0, 4};
    if (!rc) rc = sl_log_iter_block_alloc(&ib, B);
    for (size_t first = 0; !rc; first += B) {
        rc = sl_log_read_iterations(r, first, &ib); /* checks gamma, drafted, accepted, emitted */
        if (rc || ib.n == 0) break;
        for (size_t i = 0; i < ib.n && !rc; i++) {
            size_t k, s = walk_next(&w, &k), row = first + i;
            drafted += (uint64_t)ib.drafted[i];
            if (s >= ns || ib.sequence[i] != seqs[s].sequence || ib.iteration[i] < 0 || (size_t)ib.iteration[i] != k)
                rc = sl_fail(SL_EINPUT, "%s: /iterations row %zu is (sequence %d, iteration %d); /sequences expects (%lld, %zu)",
                             path, row, ib.sequence[i], ib.iteration[i], s < ns ? (long long)seqs[s].sequence : -1LL, k);
            else if (!(ib.draft_s[i] >= 0) || !(ib.verify_s[i] >= 0) || !(ib.sample_s[i] >= 0) || !isfinite(ib.draft_s[i]) ||
                     !isfinite(ib.verify_s[i]) || !isfinite(ib.sample_s[i]))
                rc = sl_fail(SL_EINPUT, "%s: /iterations row %zu: a time (draft_s, verify_s, sample_s) is negative or not finite",
                             path, row);
        }
    }
    if (!rc && drafted != r->rows[R_DRAFT])
        rc = sl_fail(SL_EINPUT, "%s: /iterations/drafted sums to %llu, but /drafts has %zu rows", path, (unsigned long long)drafted,
                     r->rows[R_DRAFT]);
    for (size_t s = 0; s < ns && !rc; s++)
        if (!(seqs[s].wall_s >= 0) || !isfinite(seqs[s].wall_s))
            rc = sl_fail(SL_EINPUT, "%s: /sequences/wall_s row %zu is %g; expected a finite time >= 0", path, s, seqs[s].wall_s);
    sl_log_draft_block_free(&b);
    sl_log_iter_block_free(&ib);
    sl_log_costs cs;
    if (!rc && !(rc = sl_log_read_costs(r, &cs))) sl_log_costs_free(&cs);
    return rc;
}

int sl_log_validate(const char *path)
{
    sl_log_reader *r = NULL;
    int rc = sl_log_open(&r, path); /* checks /sequences whole */
    if (rc) return rc;
    sl_log_seq *seqs = NULL;
    rc = sl_log_sequences(r, &seqs);
    if (!rc) rc = r->meta.kind == SL_LOG_MEASURE ? validate_measure(r, seqs) : validate_run(r, seqs);
    free(seqs);
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
