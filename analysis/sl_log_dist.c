/*
 * sl_log_dist.c: reading the full distributions of a measure log. The fast path fetches raw HDF5
 * chunks serially and inflates them with libdeflate on many threads (or, with direct access,
 * reads each chunk with pread and decodes it on many threads, without calling HDF5); the naive twin
 * goes through H5Dread. float16 is widened to float32 by the same conversion on both paths.
 */
#include <fcntl.h>
#include <math.h>
#include <hdf5.h>
#include <immintrin.h>
#include <libdeflate.h>
#include <omp.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "sl_common.h"
#include "sl_half.h"
#include "sl_log_internal.h"

/* ---- direct access ---- */

/* Finds every distribution chunk's address in the file and keeps the file open, so that chunks can
 * be read (pread) and decoded on many threads without calling HDF5 (which is not thread-safe). Any
 * surprise (a user block, an unallocated chunk, an address beyond the end) leaves direct access off;
 * the HDF5 paths still work. Reading, not mapping: a raw float32 chunk read this way took the analyze
 * benchmark's float32 pass 0.109 -> 0.076 s against the mapping with each chunk's pages populated
 * (MADV_POPULATE_READ; faulting them one by one was slower still), and a file cut short while it is
 * open gives an error instead of a SIGBUS. */
void sl_log_locate_chunks(sl_log_reader *r, sl_log_chunk_table *known)
{
    size_t ch = r->dist_chunk, n = ch ? (r->rows[M_DIST] + ch - 1) / ch : 0;
    sl_log_chunk_table t = {0};
    if (known) t = *known, *known = (sl_log_chunk_table){0};
    hid_t fcpl = H5Fget_create_plist(r->file);
    hsize_t ub = 1;
    H5Pget_userblock(fcpl, &ub);
    H5Pclose(fcpl);
    int fd = n == 0 || ub != 0 ? -1 : open(r->path, O_RDONLY);
    struct stat st;
    int ok = fd >= 0 && fstat(fd, &st) == 0;
    if (ok && t.n == n && t.addr && t.size && t.mask) { /* the probe's table: checked, not asked again */
        for (size_t s = 0; ok && s < 2 * n; s++)
            ok = t.addr[s] != HADDR_UNDEF && t.size[s] > 0 && t.addr[s] <= (uint64_t)st.st_size &&
                 t.size[s] <= (uint64_t)st.st_size - t.addr[s];
    } else if (ok) {
        free(t.addr), free(t.size), free(t.mask);
        t = (sl_log_chunk_table){n, malloc(2 * n * sizeof *t.addr), malloc(2 * n * sizeof *t.size),
                                 malloc(2 * n * sizeof *t.mask)};
        ok = t.addr && t.size && t.mask;
        for (size_t k = 0; ok && k < n; k++)
            for (int c = 0; c < 2 && ok; c++) {
                hsize_t off[2] = {k * ch, 0}, size = 0;
                haddr_t addr = 0;
                unsigned mask = 0;
                ok = H5Dget_chunk_info_by_coord(r->cols[M_DIST][c].d, off, &mask, &addr, &size) >= 0 &&
                     addr != HADDR_UNDEF && size > 0 && addr + size <= (uint64_t)st.st_size;
                t.addr[2 * k + (size_t)c] = addr, t.size[2 * k + (size_t)c] = size, t.mask[2 * k + (size_t)c] = mask;
            }
    }
    if (!ok) {
        if (fd >= 0) close(fd);
        free(t.addr), free(t.size), free(t.mask);
        return;
    }
    posix_fadvise(fd, 0, 0, POSIX_FADV_SEQUENTIAL);
    r->caddr = t.addr, r->csize = t.size, r->cmask = t.mask;
    r->fd = fd;
    r->n_chunks = n;
}

int sl_log_dist_direct(const sl_log_reader *r) { return r->fd >= 0; }

/* want bytes of the file at off into dst; -1 when the file ends first. */
static int read_at(const sl_log_reader *r, void *dst, size_t want, uint64_t off)
{
    size_t got = 0;
    while (got < want) {
        ssize_t n = pread(r->fd, (char *)dst + got, want - got, (off_t)(off + got));
        if (n <= 0) return -1;
        got += (size_t)n;
    }
    return 0;
}

/* The most a stored deflated chunk may take: zlib's worst case for incompressible data, with room. */
static size_t max_zchunk(size_t bytes) { return bytes + bytes / 500 + 1024; }

int sl_log_dist_prepare(sl_log_reader *r, int nt)
{
    if (r->fd < 0) return sl_fail(SL_EFAIL, "no direct access to %s", r->path);
    size_t V = r->meta.vocab_size, ch = r->dist_chunk, esz = r->dist_type == SL_LOG_DIST_F16 ? 2 : 4;
    if (r->n_dc < nt) {
        r->dc = realloc(r->dc, (size_t)nt * sizeof *r->dc);
        for (int i = r->n_dc; i < nt; i++) r->dc[i] = libdeflate_alloc_decompressor();
        r->n_dc = nt;
    }
    if (r->nt_scratch < nt) {
        r->zc = realloc(r->zc, (size_t)nt * sizeof *r->zc);
        r->zs = realloc(r->zs, (size_t)nt * sizeof *r->zs);
        r->fs = realloc(r->fs, (size_t)nt * sizeof *r->fs);
        for (int i = r->nt_scratch; i < nt; i++) {
            r->zc[i] = malloc(max_zchunk(ch * V * esz));
            r->zs[i] = malloc(2 * ch * V * esz);
            r->fs[i] = malloc(2 * ch * V * sizeof(float));
        }
        r->nt_scratch = nt;
    }
    for (int i = 0; i < nt; i++)
        if (!r->dc[i] || !r->zc[i] || !r->zs[i] || !r->fs[i]) return sl_fail(SL_EFAIL, "out of memory");
    return SL_OK;
}

int sl_log_dist_chunk_unchecked(sl_log_reader *r, size_t k, int tid, const float **p, const float **q, size_t *rows)
{
    size_t V = r->meta.vocab_size, ch = r->dist_chunk, esz = r->dist_type == SL_LOG_DIST_F16 ? 2 : 4;
    size_t bytes = ch * V * esz, total = r->rows[M_DIST];
    *rows = total - k * ch < ch ? total - k * ch : ch;
    const float **out[2] = {p, q};
    for (int c = 0; c < 2; c++) {
        size_t s = 2 * k + (size_t)c;
        const unsigned char *src;
        int deflated = r->dist_deflate == 1 && !(r->cmask[s] & 1);
        if (deflated) {
            unsigned char *z = r->zs[tid] + (size_t)c * bytes;
            size_t got = 0;
            if (r->csize[s] > max_zchunk(bytes))
                return sl_fail(SL_EINPUT, "%s: /distributions chunk at row %zu takes %llu bytes, more than deflate makes of %zu",
                               r->path, k * ch, (unsigned long long)r->csize[s], bytes);
            if (read_at(r, r->zc[tid], r->csize[s], r->caddr[s]))
                return sl_fail(SL_EINPUT, "%s: cannot read the /distributions chunk at row %zu (file cut short?)", r->path,
                               k * ch);
            if (libdeflate_zlib_decompress(r->dc[tid], r->zc[tid], r->csize[s], z, bytes, &got) != LIBDEFLATE_SUCCESS ||
                got != bytes)
                return sl_fail(SL_EINPUT, "%s: /distributions chunk at row %zu does not inflate (corrupt file?)", r->path, k * ch);
            src = z;
        } else if (r->csize[s] != bytes) {
            return sl_fail(SL_EINPUT, "%s: /distributions chunk at row %zu has %llu bytes, expected %zu", r->path, k * ch,
                           (unsigned long long)r->csize[s], bytes);
        } else { /* raw: float32 straight into the float buffer, float16 into the inflate buffer */
            unsigned char *z = esz == 4 ? (unsigned char *)(r->fs[tid] + (size_t)c * ch * V) : r->zs[tid] + (size_t)c * bytes;
            if (read_at(r, z, *rows * V * esz, r->caddr[s]))
                return sl_fail(SL_EINPUT, "%s: cannot read the /distributions chunk at row %zu (file cut short?)", r->path,
                               k * ch);
            src = z;
        }
        if (esz == 4 && ((uintptr_t)src % sizeof(float)) == 0) {
            *out[c] = (const float *)(const void *)src; /* the read or the inflate buffer */
        } else {
            float *f = r->fs[tid] + (size_t)c * ch * V;
            if (esz == 2) sl_half_f16_to_f32_n((const uint16_t *)(const void *)src, f, *rows * V);
            else memcpy(f, src, *rows * V * sizeof(float));
            *out[c] = f;
        }
    }
    return SL_OK;
}

int sl_log_dist_chunk(sl_log_reader *r, size_t k, int tid, const float **p, const float **q, size_t *rows)
{
    int rc = sl_log_dist_chunk_unchecked(r, k, tid, p, q, rows);
    return rc ? rc : sl_log_check_row_sums(r, k * r->dist_chunk, *rows, *p, *q);
}

/* ---- row sums ---- */

/* The sum of a row of V floats in double: sixteen floats a step into four 4-lane double
 * accumulators, added ((a0 + a1) + (a2 + a3)) and lane by lane ((l0 + l1) + (l2 + l3)), then the
 * tail in order. One accumulator (`omp simd reduction`) made the sum a chain of dependent additions:
 * the check took 15% of the analyze benchmark's float32 pass (perf, 2-vCPU Emerald Rapids VM),
 * as much as beta itself. Only the order differs from a sum in index order, by far less than the
 * tolerance (V 2^-53 against >= 1e-6). */
static double row_sum(const float *p, size_t V)
{
    __m256d a0 = _mm256_setzero_pd(), a1 = a0, a2 = a0, a3 = a0;
    size_t x = 0;
    for (; x + 16 <= V; x += 16) {
        const __m256 u = _mm256_loadu_ps(p + x), w = _mm256_loadu_ps(p + x + 8);
        a0 = _mm256_add_pd(a0, _mm256_cvtps_pd(_mm256_castps256_ps128(u)));
        a1 = _mm256_add_pd(a1, _mm256_cvtps_pd(_mm256_extractf128_ps(u, 1)));
        a2 = _mm256_add_pd(a2, _mm256_cvtps_pd(_mm256_castps256_ps128(w)));
        a3 = _mm256_add_pd(a3, _mm256_cvtps_pd(_mm256_extractf128_ps(w, 1)));
    }
    double l[4];
    _mm256_storeu_pd(l, _mm256_add_pd(_mm256_add_pd(a0, a1), _mm256_add_pd(a2, a3)));
    double s = (l[0] + l[1]) + (l[2] + l[3]);
    for (; x < V; x++) s += p[x];
    return s;
}

/* The first of n rows (V floats each) whose sum, in double, is not 1 within tol; -1 if none. */
static long bad_row_sum(const float *p, size_t n, size_t V, double tol, double *sum_out)
{
    for (size_t i = 0; i < n; i++) {
        const double s = row_sum(p + i * V, V);
        if (!(fabs(s - 1) <= tol)) {
            *sum_out = s;
            return (long)i;
        }
    }
    return -1;
}

int sl_log_dist_row_ok(const sl_log_reader *r, const float *p, const float *q)
{
    const size_t V = r->meta.vocab_size;
    const double tol = sl_log_row_sum_tol(r);
    return fabs(row_sum(p, V) - 1) <= tol && fabs(row_sum(q, V) - 1) <= tol;
}

double sl_log_row_sum_tol(const sl_log_reader *r)
{
    /* A stored row is a pmf rounded value by value: float16 keeps 11 significant bits (relative
     * error <= 2^-11 for normal values, absolute <= 2^-25 for subnormal ones, below 6.1e-5),
     * float32 24 bits (2^-24). Twice those bounds (the writer's own rounding of the standardised pmf
     * and the double sum here) plus 1e-6 never reject a row speclab wrote, and reject sums of 0 or 2. */
    double V = (double)r->meta.vocab_size;
    return r->dist_type == SL_LOG_DIST_F16 ? 2 * (0x1p-11 + V * 0x1p-25) + 1e-6 : 2 * 0x1p-24 + 1e-6;
}

int sl_log_check_row_sums(const sl_log_reader *r, size_t first, size_t n, const float *p, const float *q)
{
    size_t V = r->meta.vocab_size;
    double tol = sl_log_row_sum_tol(r), s = 0;
    for (int c = 0; c < 2; c++) {
        const float *a = c ? q : p;
        long i = bad_row_sum(a, n, V, tol, &s);
        if (i < 0) continue;
        const float *row = a + (size_t)i * V;
        for (size_t x = 0; x < V; x++) /* a value that is no probability says more than the sum */
            if (!(row[x] >= 0 && row[x] <= 1))
                return sl_fail(SL_EINPUT, "%s: /distributions/%s row %zu token %zu is %g; expected a probability", r->path,
                               c ? "q" : "p", first + (size_t)i, x, row[x]);
        return sl_fail(SL_EINPUT, "%s: /distributions/%s row %zu sums to %.9g; expected 1 within %.2g", r->path, c ? "q" : "p",
                       first + (size_t)i, s, tol);
    }
    return SL_OK;
}

/* ---- blocks of rows ---- */

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
            e = h ? H5Dread(d, sl_log_h5_f16_type(), ms, fs, H5P_DEFAULT, h) : -1;
            if (e >= 0) sl_half_f16_to_f32_n(h, dst, n * V);
            free(h);
        } else {
            e = H5Dread(d, H5T_NATIVE_FLOAT, ms, fs, H5P_DEFAULT, dst);
        }
        H5Sclose(ms);
        H5Sclose(fs);
        if (e < 0) return sl_fail(SL_EINPUT, "%s: cannot read /distributions rows %zu..%zu (corrupt?)", r->path, first, first + n);
    }
    return sl_log_check_row_sums(r, first, n, p, q);
}

typedef struct {
    sl_log_reader *r;
    float *p, *q;
    const uint32_t *mask;
    size_t first, n, c0, ch, V, esz, chunk_bytes;
    volatile int bad, bad_sum;
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
        if (j->esz == 2) sl_half_f16_to_f32_n(out, dst, rows * V);
        else if (out != dst) memcpy(dst, out, rows * V * 4);
        double sum;
        if (bad_row_sum(dst, rows, V, sl_log_row_sum_tol(r), &sum) >= 0) j->bad_sum = 1;
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
        inflate_job job = {r, p, q, mask, first, n, c0, ch, V, esz, chunk_bytes, 0, 0};
        sl_log_parallel(2 * nch, nt, inflate_one, &job);
        if (job.bad) rc = sl_fail(SL_EINPUT, "%s: a /distributions chunk does not inflate (corrupt file?)", r->path);
        else if (job.bad_sum) rc = sl_log_check_row_sums(r, first, n, p, q); /* the message, serially */
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
