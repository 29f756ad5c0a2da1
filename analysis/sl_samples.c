/*
 * sl_samples.c: the reader of external sample files (sl_samples.h, SAMPLES.md): format
 * detection, a CSV and an ids line parser, an HDF5 reader, and one iteration checker that both
 * structured formats feed row by row. It never trusts the file: every field is parsed by hand
 * with explicit lengths (NUL bytes, overlong lines and huge numbers are errors, not crashes).
 */
#include "sl_samples.h"

#include <errno.h>
#include <signal.h>
#include <hdf5.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "sl_common.h"
#include "sl_spec.h"

#define LINE_MAX_BYTES 4096 /* a longer line is an error: no row of these formats needs it */
#define H5_BLOCK 4096       /* rows read from each HDF5 dataset at a time */
#define KIND_MAX_BYTES 64   /* longest fixed-length kind string accepted */

static const char header[] = "iteration,position,token,kind";
static const char *const kind_names[3] = {"accepted", "resampled", "bonus"};
static const unsigned char h5_signature[8] = {0x89, 'H', 'D', 'F', '\r', '\n', 0x1a, '\n'};

int sl_samples_format_parse(const char *s, sl_samples_format *out)
{
    static const char *const names[] = {"auto", "csv", "hdf5", "ids"};
    for (int i = 0; i < 4; i++)
        if (!strcmp(s, names[i])) {
            *out = (sl_samples_format)i;
            return SL_OK;
        }
    return sl_fail(SL_EINPUT, "samples-format: '%s', expected csv, hdf5, ids or auto", s);
}

const char *sl_samples_format_name(sl_samples_format f)
{
    switch (f) {
    case SL_SAMPLES_CSV: return "csv";
    case SL_SAMPLES_HDF5: return "hdf5";
    case SL_SAMPLES_IDS: return "ids";
    default: return "auto";
    }
}

void sl_samples_free(sl_samples *s)
{
    if (!s) return;
    free(s->tok);
    free(s->nem);
    free(s);
}

/* ---- the iteration checker: one row at a time, in file order ---- */

typedef struct {
    sl_samples *s;
    const char *path;
    int rows;            /* 1: locations are HDF5 rows (0-based); 0: lines (1-based) */
    size_t where;        /* the current line or row */
    size_t cap;          /* iterations (or ids) that tok and nem hold */
    int open;            /* an iteration has rows but no terminal row yet */
    int have_last;       /* an iteration has ended */
    int64_t cur, last;   /* the open iteration's id; the last ended one's */
    int last_kind;       /* the terminal kind of the last ended iteration */
    size_t k;            /* rows of the open iteration */
    size_t open_where;   /* where the open iteration began */
} feeder;

/* Records "FILE:LINE: msg" or "FILE: row R: msg" as SL_EINPUT. */
static int ferr(const feeder *f, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int ferr(const feeder *f, const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (f->rows) return sl_fail(SL_EINPUT, "%s: row %zu: %s", f->path, f->where, msg);
    return sl_fail(SL_EINPUT, "%s:%zu: %s", f->path, f->where, msg);
}

/* Room for one more iteration (gamma + 1 slots) or id. Doubling keeps the copies linear. */
static int grow(feeder *f)
{
    sl_samples *s = f->s;
    if (s->n < f->cap) return SL_OK;
    size_t cap = f->cap ? 2 * f->cap : 1024, w = s->nem ? s->gamma + 1 : 1;
    if (cap > SIZE_MAX / (w * sizeof *s->tok)) return sl_fail(SL_EFAIL, "%s: too many samples", f->path);
    int32_t *t = realloc(s->tok, cap * w * sizeof *t);
    if (!t) return sl_fail(SL_EFAIL, "out of memory reading %s", f->path);
    s->tok = t;
    if (s->nem) {
        uint8_t *m = realloc(s->nem, cap);
        if (!m) return sl_fail(SL_EFAIL, "out of memory reading %s", f->path);
        s->nem = m;
    }
    f->cap = cap;
    return SL_OK;
}

static int feed(feeder *f, int64_t it, int64_t pos, int64_t tok, int kind)
{
    sl_samples *s = f->s;
    const size_t g = s->gamma;
    int rc;
    if (it < 0) return ferr(f, "iteration %lld is negative, expected an id >= 0", (long long)it);
    if (!f->open) {
        if (f->have_last && it == f->last)
            return ferr(f, "iteration %lld has a row after its %s row: an iteration ends at its resampled or bonus row",
                        (long long)it, kind_names[f->last_kind]);
        if (f->have_last && it < f->last)
            return ferr(f, "iteration %lld after iteration %lld: ids must increase (each iteration one contiguous block)",
                        (long long)it, (long long)f->last);
        if ((rc = grow(f))) return rc;
        f->open = 1;
        f->cur = it;
        f->k = 0;
        f->open_where = f->where;
        for (size_t j = 0; j <= g; j++) s->tok[s->n * (g + 1) + j] = -1;
    } else if (it != f->cur) {
        return ferr(f, "iteration %lld (from %s %zu) has no resampled or bonus row before iteration %lld begins",
                    (long long)f->cur, f->rows ? "row" : "line", f->open_where, (long long)it);
    }
    if (pos != (int64_t)f->k + 1)
        return ferr(f, "iteration %lld: position %lld, expected %zu (positions are 1-based and consecutive)",
                    (long long)it, (long long)pos, f->k + 1);
    if (tok < 0 || tok >= (int64_t)s->V)
        return ferr(f, "token %lld outside [0, %zu) (V is the length of --p, or --vocab)", (long long)tok, s->V);
    if (kind != SL_SAMPLES_BONUS && pos > (int64_t)g)
        return ferr(f, "iteration %lld: %s at position %lld > gamma = %zu (position gamma + 1 can only be the bonus; "
                    "is --gamma right?)", (long long)it, kind_names[kind], (long long)pos, g);
    if (kind == SL_SAMPLES_BONUS && pos != (int64_t)g + 1)
        return ferr(f, "iteration %lld: bonus at position %lld, expected gamma + 1 = %zu (after gamma accepted rows; "
                    "is --gamma right?)", (long long)it, (long long)pos, g + 1);
    s->tok[s->n * (g + 1) + f->k++] = (int32_t)tok;
    if (kind != SL_SAMPLES_ACCEPTED) {
        s->nem[s->n++] = (uint8_t)f->k;
        s->tokens += f->k;
        f->open = 0;
        f->have_last = 1;
        f->last = it;
        f->last_kind = kind;
    }
    return SL_OK;
}

static int feed_end(feeder *f)
{
    if (f->open)
        return ferr(f, "iteration %lld (from %s %zu) ends with the file, without a resampled or bonus row (cut off?)",
                    (long long)f->cur, f->rows ? "row" : "line", f->open_where);
    if (f->s->n == 0) return ferr(f, "no samples (%s)", f->rows ? "the datasets have no rows" : "only the header");
    return SL_OK;
}

/* ---- text: lines and fields ---- */

typedef struct {
    FILE *fp;
    char buf[LINE_MAX_BYTES + 2];
    size_t len;  /* bytes in buf (NUL bytes included; buf is also NUL-terminated) */
    size_t line; /* 1-based number of the line in buf */
} line_reader;

/* Reads the next line without its "\n" or "\r\n". Returns 1 with a line, 0 at the end, or an
 * error status negated (-SL_EINPUT), its message recorded. */
static int next_line(line_reader *lr, feeder *f)
{
    int c;
    lr->len = 0;
    lr->line++;
    f->where = lr->line;
    while ((c = getc_unlocked(lr->fp)) != EOF && c != '\n') {
        if (lr->len == LINE_MAX_BYTES) return -ferr(f, "line longer than %d bytes", LINE_MAX_BYTES);
        lr->buf[lr->len++] = (char)c;
    }
    if (ferror(lr->fp)) return -sl_fail(SL_EINPUT, "%s: cannot read: %s", f->path, strerror(errno));
    if (c == EOF && lr->len == 0) {
        lr->line--;
        f->where = lr->line ? lr->line : 1; /* errors at the end name the last line */
        return 0;
    }
    if (lr->len > 0 && lr->buf[lr->len - 1] == '\r') lr->len--;
    /* A UTF-8 byte order mark (spreadsheets write one) is not part of the first line. */
    if (lr->line == 1 && lr->len >= 3 && !memcmp(lr->buf, "\xEF\xBB\xBF", 3)) {
        memmove(lr->buf, lr->buf + 3, lr->len - 3);
        lr->len -= 3;
    }
    lr->buf[lr->len] = 0;
    return 1;
}

/* The text shown in an error: at most 40 bytes, anything unprintable as '?'. */
static const char *shown(const char *s, size_t n, char out[48])
{
    size_t m = n < 40 ? n : 40, j = 0;
    for (size_t i = 0; i < m; i++) out[j++] = s[i] >= 0x20 && s[i] < 0x7f ? s[i] : '?';
    if (n > m) out[j++] = '.', out[j++] = '.', out[j++] = '.';
    out[j] = 0;
    return out;
}

static int is_blank(char c) { return c == ' ' || c == '\t'; }

/* Parses [s, s + n) (spaces around allowed) as a decimal integer of at most 18 digits.
 * Returns 0 on success, 1 when it is not an integer, 2 when it has too many digits. */
static int parse_int(const char *s, size_t n, int64_t *out)
{
    while (n > 0 && is_blank(*s)) s++, n--;
    while (n > 0 && is_blank(s[n - 1])) n--;
    int neg = 0;
    if (n > 0 && (*s == '-' || *s == '+')) neg = *s == '-', s++, n--;
    if (n == 0) return 1;
    int64_t v = 0;
    for (size_t i = 0; i < n; i++) {
        if (s[i] < '0' || s[i] > '9') return 1;
        if (i >= 18) return 2;
        v = 10 * v + (s[i] - '0');
    }
    *out = neg ? -v : v;
    return 0;
}

static int line_blank(const line_reader *lr)
{
    for (size_t i = 0; i < lr->len; i++)
        if (!is_blank(lr->buf[i])) return 0;
    return 1;
}

static int is_header(const line_reader *lr)
{
    return lr->len == sizeof header - 1 && !memcmp(lr->buf, header, lr->len);
}

static int int_field(feeder *f, const char *name, const char *s, size_t n, int64_t *out)
{
    char b[48];
    int e = parse_int(s, n, out);
    if (e == 1) return ferr(f, "%s '%s' is not an integer", name, shown(s, n, b));
    if (e == 2) return ferr(f, "%s '%s' is too large (more than 18 digits)", name, shown(s, n, b));
    return SL_OK;
}

static int read_csv(line_reader *lr, feeder *f)
{
    int r = next_line(lr, f);
    char b[48];
    if (r < 0) return -r;
    if (r == 0) return ferr(f, "empty file, expected the header %s", header);
    if (!is_header(lr)) return ferr(f, "expected the header '%s', got '%s'", header, shown(lr->buf, lr->len, b));
    while ((r = next_line(lr, f)) == 1) {
        if (line_blank(lr)) continue;
        const char *fld[4];
        size_t len[4], nf = 0, start = 0;
        for (size_t i = 0; i <= lr->len; i++) {
            if (i < lr->len && lr->buf[i] != ',') continue;
            if (nf < 4) fld[nf] = lr->buf + start, len[nf] = i - start;
            nf++;
            start = i + 1;
        }
        if (nf != 4)
            return ferr(f, "%zu fields, expected 4 (%s): '%s'", nf, header, shown(lr->buf, lr->len, b));
        int64_t it, pos, tok;
        int rc;
        if ((rc = int_field(f, "iteration", fld[0], len[0], &it)) || (rc = int_field(f, "position", fld[1], len[1], &pos)) ||
            (rc = int_field(f, "token", fld[2], len[2], &tok)))
            return rc;
        const char *k = fld[3];
        size_t kn = len[3];
        while (kn > 0 && is_blank(*k)) k++, kn--;
        while (kn > 0 && is_blank(k[kn - 1])) kn--;
        int kind = -1;
        for (int j = 0; j < 3; j++)
            if (kn == strlen(kind_names[j]) && !memcmp(k, kind_names[j], kn)) kind = j;
        if (kind < 0) return ferr(f, "kind '%s', expected accepted, resampled or bonus", shown(fld[3], len[3], b));
        if ((rc = feed(f, it, pos, tok, kind))) return rc;
    }
    if (r < 0) return -r;
    return feed_end(f);
}

static int read_ids(line_reader *lr, feeder *f)
{
    sl_samples *s = f->s;
    int r, rc;
    char b[48];
    while ((r = next_line(lr, f)) == 1) {
        if (line_blank(lr)) continue;
        int64_t x;
        int e = parse_int(lr->buf, lr->len, &x);
        if (e == 1 && lr->line == 1 && memchr(lr->buf, ',', lr->len))
            return ferr(f, "'%s' is not a token id (ids: one integer per line; a CSV file starts with the header %s)",
                        shown(lr->buf, lr->len, b), header);
        if (e == 1) return ferr(f, "'%s' is not a token id (ids: one integer per line)", shown(lr->buf, lr->len, b));
        if (e == 2) return ferr(f, "token '%s' is too large (more than 18 digits)", shown(lr->buf, lr->len, b));
        if (x < 0 || x >= (int64_t)s->V)
            return ferr(f, "token %lld outside [0, %zu) (V is the length of --p, or --vocab)", (long long)x, s->V);
        if ((rc = grow(f))) return rc;
        s->tok[s->n++] = (int32_t)x;
    }
    if (r < 0) return -r;
    s->tokens = s->n;
    if (s->n == 0) return ferr(f, "%s", lr->line == 0 ? "empty file (no samples)" : "no token ids (only blank lines)");
    return SL_OK;
}

/* ---- HDF5 ---- */

static const char *const h5_names[4] = {"iteration", "position", "token", "kind"};

typedef struct {
    hid_t file, d[4], ftype[4], mtype_kind;
    int kind_string;   /* kind holds strings (else integer codes) */
    int kind_vlen;     /* ... variable-length ones */
    size_t kind_size;  /* bytes of a fixed-length kind string */
} h5_state;

static void h5_close(h5_state *h)
{
    for (int i = 0; i < 4; i++) {
        if (h->ftype[i] > 0) H5Tclose(h->ftype[i]);
        if (h->d[i] > 0) H5Dclose(h->d[i]);
    }
    if (h->mtype_kind > 0) H5Tclose(h->mtype_kind);
    if (h->file > 0) H5Fclose(h->file);
}

/* The four datasets: present, 1-D, of one length (*rows), of the types SAMPLES.md allows. */
static int h5_open_sets(h5_state *h, const char *path, hsize_t *rows)
{
    static const char *const cls[] = {"integer", "float", "time", "string", "bitfield", "opaque",
                                      "compound", "reference", "enum", "vlen", "array"};
    for (int i = 0; i < 4; i++) {
        if (H5Lexists(h->file, h5_names[i], H5P_DEFAULT) <= 0 || (h->d[i] = H5Dopen2(h->file, h5_names[i], H5P_DEFAULT)) < 0)
            return sl_fail(SL_EINPUT, "%s: no dataset '%s' at the root (expected iteration, position, token, kind)", path,
                           h5_names[i]);
        hid_t sp = H5Dget_space(h->d[i]);
        int nd = sp < 0 ? -1 : H5Sget_simple_extent_ndims(sp);
        hsize_t dim = 0;
        if (nd == 1) H5Sget_simple_extent_dims(sp, &dim, NULL);
        if (sp >= 0) H5Sclose(sp);
        if (nd != 1) return sl_fail(SL_EINPUT, "%s: dataset '%s' has %d dimensions, expected 1", path, h5_names[i], nd);
        if (i == 0) *rows = dim;
        else if (dim != *rows)
            return sl_fail(SL_EINPUT, "%s: dataset '%s' has %llu rows but 'iteration' has %llu: the lengths must match",
                           path, h5_names[i], (unsigned long long)dim, (unsigned long long)*rows);
        if ((h->ftype[i] = H5Dget_type(h->d[i])) < 0)
            return sl_fail(SL_EINPUT, "%s: cannot read the type of dataset '%s'", path, h5_names[i]);
        H5T_class_t c = H5Tget_class(h->ftype[i]);
        const char *cn = c >= 0 && c < (int)(sizeof cls / sizeof *cls) ? cls[c] : "unknown";
        if (i < 3 && c != H5T_INTEGER)
            return sl_fail(SL_EINPUT, "%s: dataset '%s' holds %s values, expected integers", path, h5_names[i], cn);
        if (i == 3 && c != H5T_INTEGER && c != H5T_STRING)
            return sl_fail(SL_EINPUT, "%s: dataset 'kind' holds %s values, expected integer codes (0 accepted, "
                           "1 resampled, 2 bonus) or strings", path, cn);
    }
    if (H5Tget_class(h->ftype[3]) == H5T_STRING) {
        h->kind_string = 1;
        h->kind_vlen = H5Tis_variable_str(h->ftype[3]) > 0;
        h->kind_size = H5Tget_size(h->ftype[3]);
        if (!h->kind_vlen && (h->kind_size == 0 || h->kind_size > KIND_MAX_BYTES))
            return sl_fail(SL_EINPUT, "%s: dataset 'kind' holds strings of %zu bytes, expected at most %d", path,
                           h->kind_size, KIND_MAX_BYTES);
        /* The memory type is the file's own (same character set): no conversion to fail. */
        if ((h->mtype_kind = H5Tcopy(h->ftype[3])) < 0) return sl_fail(SL_EFAIL, "%s: HDF5 type copy failed", path);
    }
    return SL_OK;
}

/* The kind code of a string read from the file (n bytes, padding trimmed); -1 when unknown. */
static int kind_of(const char *s, size_t n)
{
    while (n > 0 && (s[n - 1] == 0 || s[n - 1] == ' ')) n--;
    for (int j = 0; j < 3; j++)
        if (n == strlen(kind_names[j]) && !memcmp(s, kind_names[j], n)) return j;
    return -1;
}

static int read_hdf5(const char *path, feeder *f)
{
    h5_state h = {0};
    hsize_t rows = 0;
    int64_t *v[3] = {0};
    int64_t *kcode = NULL;
    char **kvlen = NULL, *kfix = NULL;
    hid_t mem = -1;
    int rc = SL_OK;
    f->rows = 1;
    /* As the log reader: HDF5 must not print its error stack; errors go through sl_fail. */
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
    if (H5Fis_hdf5(path) <= 0) return sl_fail(SL_EINPUT, "%s is not an HDF5 file (corrupt or truncated?)", path);
    if ((h.file = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT)) < 0)
        return sl_fail(SL_EINPUT, "cannot open %s as HDF5 (corrupt or truncated?)", path);
    if (H5Aexists(h.file, "samples_version") > 0) {
        /* Optional; a later layout would change the number and this reader would refuse it. */
        hid_t a = H5Aopen(h.file, "samples_version", H5P_DEFAULT);
        hid_t at = a < 0 ? -1 : H5Aget_type(a);
        int64_t ver = -1;
        if (a < 0 || at < 0 || H5Tget_class(at) != H5T_INTEGER || H5Aread(a, H5T_NATIVE_INT64, &ver) < 0)
            ver = -1;
        if (at >= 0) H5Tclose(at);
        if (a >= 0) H5Aclose(a);
        if (ver != SL_SAMPLES_VERSION) {
            rc = sl_fail(SL_EINPUT, "%s: root attribute samples_version is %lld, this speclab reads version %d (or none)",
                         path, (long long)ver, SL_SAMPLES_VERSION);
            goto done;
        }
    }
    if ((rc = h5_open_sets(&h, path, &rows))) goto done;
    for (int i = 0; i < 3; i++)
        if (!(v[i] = sl_malloc(H5_BLOCK * sizeof *v[i]))) { rc = SL_EFAIL; goto done; }
    if (!h.kind_string) kcode = sl_malloc(H5_BLOCK * sizeof *kcode);
    else if (h.kind_vlen) kvlen = calloc(H5_BLOCK, sizeof *kvlen);
    else kfix = sl_malloc(H5_BLOCK * h.kind_size);
    if (!kcode && !kvlen && !kfix) { rc = sl_fail(SL_EFAIL, "out of memory reading %s", path); goto done; }
    for (hsize_t r0 = 0; r0 < rows && !rc; r0 += H5_BLOCK) {
        hsize_t cnt = rows - r0 < H5_BLOCK ? rows - r0 : H5_BLOCK;
        if ((mem = H5Screate_simple(1, &cnt, NULL)) < 0) { rc = sl_fail(SL_EFAIL, "%s: HDF5 dataspace failed", path); goto done; }
        for (int i = 0; i < 4 && !rc; i++) {
            hid_t fs = H5Dget_space(h.d[i]);
            herr_t e = fs < 0 ? -1 : H5Sselect_hyperslab(fs, H5S_SELECT_SET, &r0, NULL, &cnt, NULL);
            if (e >= 0) {
                if (i < 3) e = H5Dread(h.d[i], H5T_NATIVE_INT64, mem, fs, H5P_DEFAULT, v[i]);
                else if (!h.kind_string) e = H5Dread(h.d[i], H5T_NATIVE_INT64, mem, fs, H5P_DEFAULT, kcode);
                else e = H5Dread(h.d[i], h.mtype_kind, mem, fs, H5P_DEFAULT, kvlen ? (void *)kvlen : (void *)kfix);
            }
            if (fs >= 0) H5Sclose(fs);
            if (e < 0) {
                f->where = (size_t)r0;
                rc = ferr(f, "cannot read dataset '%s' from here on (corrupt or truncated file?)", h5_names[i]);
            }
        }
        for (hsize_t j = 0; j < cnt && !rc; j++) {
            f->where = (size_t)(r0 + j);
            int kind;
            if (kcode) {
                if (kcode[j] < 0 || kcode[j] > 2) {
                    rc = ferr(f, "kind code %lld, expected 0 accepted, 1 resampled or 2 bonus", (long long)kcode[j]);
                    break;
                }
                kind = (int)kcode[j];
            } else {
                const char *s = kvlen ? kvlen[j] : kfix + j * h.kind_size;
                size_t n = kvlen ? (s ? strlen(s) : 0) : h.kind_size;
                char b[48];
                if ((kind = kind_of(s ? s : "", n)) < 0) {
                    rc = ferr(f, "kind '%s', expected accepted, resampled or bonus", shown(s ? s : "", n, b));
                    break;
                }
            }
            rc = feed(f, v[0][j], v[1][j], v[2][j], kind);
        }
        if (kvlen) {
#if H5_VERSION_GE(1, 12, 0)
            H5Treclaim(h.mtype_kind, mem, H5P_DEFAULT, kvlen);
#else
            H5Dvlen_reclaim(h.mtype_kind, mem, H5P_DEFAULT, kvlen);
#endif
            memset(kvlen, 0, H5_BLOCK * sizeof *kvlen);
        }
        H5Sclose(mem);
        mem = -1;
    }
    if (!rc) {
        f->where = (size_t)rows;
        if (f->open) f->where = (size_t)rows - 1;
        rc = feed_end(f);
    }
done:
    if (mem >= 0) H5Sclose(mem);
    for (int i = 0; i < 3; i++) free(v[i]);
    free(kcode);
    free(kvlen);
    free(kfix);
    h5_close(&h);
    return rc;
}

/* ---- containment: libhdf5 in a child process ----
 * libhdf5 1.10 can crash inside H5Dread on a damaged file (fuzzing found a SIGSEGV on a contiguous
 * dataset without storage). The whole HDF5 read therefore runs in a forked child, which builds the
 * samples as above and sends them (or its error message) to the parent through a pipe; a child
 * killed by a signal becomes a one-line SL_EINPUT. Cost: one fork and one copy of the samples
 * through the pipe (~1 GB/s; 0.04 s for a million iterations at gamma 4). */

typedef struct {
    int64_t rc;
    uint64_t n, tokens, msg_len;
} h5_reply;

static void h5_child(const char *path, feeder *f, int fd)
{
    /* A fault inside libhdf5 ends this child with its signal, which the parent reports; the
     * handlers a sanitizer or fuzzer runtime installed would report it as the parent's crash. */
    signal(SIGSEGV, SIG_DFL);
    signal(SIGBUS, SIG_DFL);
    signal(SIGFPE, SIG_DFL);
    signal(SIGILL, SIG_DFL);
    int rc = read_hdf5(path, f);
    const sl_samples *s = f->s;
    const char *msg = rc ? sl_errmsg() : "";
    h5_reply rep = {rc, rc ? 0 : s->n, rc ? 0 : s->tokens, strlen(msg)};
    int bad = sl_fd_write_all(fd, &rep, sizeof rep) || sl_fd_write_all(fd, msg, rep.msg_len);
    if (!rc && !bad)
        bad = sl_fd_write_all(fd, s->tok, s->n * (s->gamma + 1) * sizeof *s->tok) || sl_fd_write_all(fd, s->nem, s->n);
    _exit(bad ? 4 : 0);
}

static int read_hdf5_contained(const char *path, feeder *f)
{
    int fds[2];
    if (pipe(fds)) return read_hdf5(path, f); /* no containment possible: read directly */
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0) {
        close(fds[0]);
        close(fds[1]);
        return read_hdf5(path, f);
    }
    if (pid == 0) {
        close(fds[0]);
        h5_child(path, f, fds[1]);
    }
    close(fds[1]);
    sl_samples *s = f->s;
    h5_reply rep;
    int rc = SL_OK, got = sl_fd_read_all(fds[0], &rep, sizeof rep) == 0;
    if (got && rep.rc) {
        char msg[1024];
        size_t m = rep.msg_len < sizeof msg - 1 ? (size_t)rep.msg_len : sizeof msg - 1;
        if (sl_fd_read_all(fds[0], msg, m)) m = 0;
        msg[m] = 0;
        rc = sl_fail(rep.rc == SL_EINPUT ? SL_EINPUT : SL_EFAIL, "%s", msg);
    } else if (got) {
        const size_t w = s->gamma + 1;
        free(s->tok);
        free(s->nem);
        s->tok = NULL;
        s->nem = NULL;
        if (rep.n > SIZE_MAX / (w * sizeof *s->tok) || !(s->tok = malloc(rep.n * w * sizeof *s->tok + 1)) ||
            !(s->nem = malloc(rep.n + 1)))
            rc = sl_fail(SL_EFAIL, "out of memory reading %s", path);
        else if (sl_fd_read_all(fds[0], s->tok, rep.n * w * sizeof *s->tok) || sl_fd_read_all(fds[0], s->nem, rep.n))
            got = 0;
        s->n = rep.n;
        s->tokens = rep.tokens;
    }
    close(fds[0]); /* a child still writing gets EPIPE and exits */
    int st = 0;
    while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {
    }
    if (WIFSIGNALED(st))
        return sl_fail(SL_EINPUT, "%s: libhdf5 crashed (%s) reading the sample file: it is damaged", path,
                       strsignal(WTERMSIG(st)));
    if (!rc && !got) /* e.g. a sanitizer build, whose child reports the crash and exits 1 */
        return sl_fail(SL_EINPUT, "%s: libhdf5 failed (exit status %d) reading the sample file: it is damaged", path,
                       WIFEXITED(st) ? WEXITSTATUS(st) : -1);
    return rc;
}

/* ---- entry ---- */

int sl_samples_read(const char *path, sl_samples_format format, size_t V, size_t gamma, sl_samples **out)
{
    *out = NULL;
    if (V < 2 || V > INT32_MAX) return sl_fail(SL_EINPUT, "vocab: %zu, expected 2 <= V <= %d", V, INT32_MAX);
    if (gamma < 1 || gamma > SL_SPEC_GAMMA_MAX)
        return sl_fail(SL_EINPUT, "gamma: %zu is outside [1, %d]", gamma, SL_SPEC_GAMMA_MAX);
    FILE *fp = fopen(path, "rb");
    if (!fp) return sl_fail(SL_EINPUT, "cannot open %s: %s", path, strerror(errno));
    if (format == SL_SAMPLES_AUTO && fseek(fp, 0, SEEK_SET) != 0) {
        fclose(fp);
        return sl_fail(SL_EINPUT, "%s: detecting the format needs a regular file; give --samples-format csv or ids", path);
    }
    if (format == SL_SAMPLES_AUTO) {
        unsigned char sig[8];
        size_t got = fread(sig, 1, sizeof sig, fp);
        if (ferror(fp)) {
            int e = errno;
            fclose(fp);
            return sl_fail(SL_EINPUT, "%s: cannot read: %s", path, strerror(e));
        }
        if (got == sizeof sig && !memcmp(sig, h5_signature, sizeof sig)) {
            format = SL_SAMPLES_HDF5;
        } else {
            line_reader probe = {fp, {0}, 0, 0};
            feeder pf = {.path = path};
            rewind(fp);
            int r = next_line(&probe, &pf);
            format = r == 1 && is_header(&probe) ? SL_SAMPLES_CSV : SL_SAMPLES_IDS;
            sl_err_clear();
        }
        rewind(fp);
    }
    sl_samples *s = calloc(1, sizeof *s);
    line_reader *lr = malloc(sizeof *lr);
    int rc = SL_OK;
    if (!s || !lr) {
        rc = sl_fail(SL_EFAIL, "out of memory reading %s", path);
        goto done;
    }
    s->format = format;
    s->V = V;
    s->gamma = gamma;
    if (format != SL_SAMPLES_IDS && !(s->nem = malloc(1))) { /* marks the structured layout; grown in grow() */
        rc = sl_fail(SL_EFAIL, "out of memory reading %s", path);
        goto done;
    }
    feeder f = {.s = s, .path = path};
    *lr = (line_reader){.fp = fp};
    if (format == SL_SAMPLES_HDF5) {
        fclose(fp);
        fp = NULL;
        rc = read_hdf5_contained(path, &f);
    } else {
        rc = format == SL_SAMPLES_CSV ? read_csv(lr, &f) : read_ids(lr, &f);
    }
done:
    if (fp) fclose(fp);
    free(lr);
    if (rc) {
        sl_samples_free(s);
        return rc;
    }
    *out = s;
    return SL_OK;
}
