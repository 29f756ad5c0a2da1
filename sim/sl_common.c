/* sl_common.c: error recording, xoshiro256** streams, atomic output files. */
#include "sl_common.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/stat.h>
#include <unistd.h>

static _Thread_local char err_msg[1024];
static _Thread_local char err_where[256];

int sl_error_at(int code, const char *file, int line, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err_msg, sizeof err_msg, fmt, ap);
    va_end(ap);
    /* Keep the message on one line whatever was formatted into it. */
    for (char *c = err_msg; *c; c++)
        if (*c == '\n' || *c == '\r') *c = ' ';
    snprintf(err_where, sizeof err_where, "%s:%d", file, line);
    return code;
}

const char *sl_errmsg(void) { return err_msg; }
const char *sl_errwhere(void) { return err_where; }
void sl_err_clear(void) { err_msg[0] = 0; err_where[0] = 0; }

void *sl_malloc(size_t bytes)
{
    void *p = malloc(bytes ? bytes : 1);
    if (!p) sl_fail(SL_EFAIL, "out of memory allocating %zu bytes", bytes);
    return p;
}

void *sl_malloc_aligned(size_t bytes)
{
    const size_t rounded = (bytes + 63) & ~(size_t)63;
    void *p = aligned_alloc(64, rounded ? rounded : 64);
    if (!p) sl_fail(SL_EFAIL, "out of memory allocating %zu bytes", bytes);
    return p;
}

void *sl_calloc(size_t n, size_t size)
{
    void *p = calloc(n ? n : 1, size ? size : 1);
    if (!p) sl_fail(SL_EFAIL, "out of memory allocating %zu x %zu bytes", n, size);
    return p;
}

/* ---- random streams ---- */

static uint64_t splitmix64(uint64_t *x)
{
    uint64_t z = (*x += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

uint64_t sl_seed_derive(uint64_t seed, uint64_t stream, uint64_t item)
{
    uint64_t s = seed;
    uint64_t h = splitmix64(&s);
    s = h ^ (stream * 0xd1342543de82ef95ULL);
    h = splitmix64(&s);
    s = h ^ (item * 0xa0761d6478bd642fULL);
    return splitmix64(&s);
}

/* The gsl_rng type's state is sl_xoshiro; its steps are the inline ones of sl_common.h. */
typedef sl_xoshiro xoshiro_state;

static inline uint64_t xoshiro_next(xoshiro_state *st) { return sl_xoshiro_next(st); }

static void xoshiro_set(void *vstate, unsigned long seed)
{
    xoshiro_state *st = vstate;
    uint64_t x = (uint64_t)seed;
    for (int i = 0; i < 4; i++) st->s[i] = splitmix64(&x);
}

/* GSL's get() returns values in [min, max]; we expose the top 32 bits. */
static unsigned long xoshiro_get(void *vstate) { return (unsigned long)(xoshiro_next(vstate) >> 32); }

static double xoshiro_get_double(void *vstate) { return sl_xoshiro_uniform53(vstate); }

static const gsl_rng_type xoshiro_type = {
    "xoshiro256**", 0xffffffffUL, 0, sizeof(xoshiro_state), xoshiro_set, xoshiro_get,
    xoshiro_get_double,
};
const gsl_rng_type *sl_rng_xoshiro = &xoshiro_type;

gsl_rng *sl_rng_alloc(uint64_t seed, uint64_t stream, uint64_t item)
{
    gsl_rng *r = gsl_rng_alloc(sl_rng_xoshiro);
    if (!r) {
        sl_fail(SL_EFAIL, "out of memory allocating a random generator");
        return NULL;
    }
    gsl_rng_set(r, (unsigned long)sl_seed_derive(seed, stream, item));
    return r;
}

void sl_xoshiro_seed(sl_xoshiro *x, uint64_t seed, uint64_t stream, uint64_t item)
{
    xoshiro_set(x, (unsigned long)sl_seed_derive(seed, stream, item));
}

void sl_rng_reseed(gsl_rng *r, uint64_t seed, uint64_t stream, uint64_t item)
{
    gsl_rng_set(r, (unsigned long)sl_seed_derive(seed, stream, item));
}

double sl_rng_uniform53(gsl_rng *r)
{
    if (r->type == sl_rng_xoshiro) return xoshiro_get_double(r->state);
    return gsl_rng_uniform(r);
}

int sl_isfinite(double x) { return isfinite(x); }

double sl_now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* ---- atomic output files ---- */

int sl_atomic_open(sl_atomic_file *af, const char *path)
{
    memset(af, 0, sizeof *af);
    size_t n = strlen(path);
    af->path = sl_malloc(n + 1);
    af->tmp_path = sl_malloc(n + 32);
    if (!af->path || !af->tmp_path) {
        free(af->path);
        free(af->tmp_path);
        return SL_EFAIL;
    }
    memcpy(af->path, path, n + 1);
    snprintf(af->tmp_path, n + 32, "%s.tmp.%ld", path, (long)getpid());
    af->f = fopen(af->tmp_path, "wb");
    if (!af->f) {
        int e = errno;
        free(af->path);
        free(af->tmp_path);
        af->path = af->tmp_path = NULL;
        return sl_fail(SL_EINPUT, "cannot write output %s: %s", path, strerror(e));
    }
    return SL_OK;
}

int sl_atomic_commit(sl_atomic_file *af)
{
    int rc = SL_OK;
    if (fflush(af->f) != 0 || fsync(fileno(af->f)) != 0)
        rc = sl_fail(SL_EFAIL, "writing %s failed: %s", af->path, strerror(errno));
    if (fclose(af->f) != 0 && rc == SL_OK)
        rc = sl_fail(SL_EFAIL, "closing %s failed: %s", af->path, strerror(errno));
    af->f = NULL;
    if (rc == SL_OK && rename(af->tmp_path, af->path) != 0)
        rc = sl_fail(SL_EFAIL, "renaming into %s failed: %s", af->path, strerror(errno));
    if (rc != SL_OK) remove(af->tmp_path);
    free(af->path);
    free(af->tmp_path);
    af->path = af->tmp_path = NULL;
    return rc;
}

void sl_atomic_abort(sl_atomic_file *af)
{
    if (af->f) fclose(af->f);
    if (af->tmp_path) remove(af->tmp_path);
    free(af->path);
    free(af->tmp_path);
    memset(af, 0, sizeof *af);
}

int sl_fd_write_all(int fd, const void *buf, size_t n)
{
    const char *p = buf;
    while (n) {
        ssize_t w = write(fd, p, n);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) return -1;
        p += w, n -= (size_t)w;
    }
    return 0;
}

int sl_fd_read_all(int fd, void *buf, size_t n)
{
    char *p = buf;
    while (n) {
        ssize_t r = read(fd, p, n);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) return -1;
        p += r, n -= (size_t)r;
    }
    return 0;
}

int sl_read_file(const char *path, const char *what, char **out, size_t *len)
{
    *out = NULL;
    FILE *f = fopen(path, "rb");
    if (!f) return sl_fail(SL_EINPUT, "%s: cannot open %s: %s", what, path, strerror(errno));
    long n = fseek(f, 0, SEEK_END) == 0 ? ftell(f) : -1;
    char *buf = n >= 0 && fseek(f, 0, SEEK_SET) == 0 ? sl_malloc((size_t)n + 1) : NULL;
    if (!buf || fread(buf, 1, (size_t)n, f) != (size_t)n) {
        fclose(f);
        free(buf);
        return sl_fail(SL_EINPUT, "%s: cannot read %s", what, path);
    }
    fclose(f);
    buf[n] = 0;
    *out = buf;
    if (len) *len = (size_t)n;
    return SL_OK;
}

int sl_out_check(const char *flag, const char *path, int force, const char *why)
{
    struct stat st;
    if (force || !path || lstat(path, &st) != 0) return SL_OK;
    return sl_fail(SL_EINPUT, "%s: %s exists%s%s; give --force to replace it", flag, path, why ? " and " : "", why ? why : "");
}

const char *sl_path_base(const char *path)
{
    const char *slash = strrchr(path, '/');
    return slash ? slash + 1 : path;
}
