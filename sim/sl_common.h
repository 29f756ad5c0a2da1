/*
 * sl_common.h: errors, random streams and small helpers shared by every speclab module.
 *
 * Errors: library functions return an int status (SL_OK, SL_EFAIL, SL_EINPUT) and record a
 * one-line message with sl_fail(); only main() prints it and exits. The status values are the
 * CLI exit codes: 1 = failure, 2 = bad usage or bad input.
 *
 * Randomness: every random choice draws from a generator derived from (global seed, stream,
 * item index), never from a thread or rank id, so results do not depend on how work is split.
 */
#ifndef SL_COMMON_H
#define SL_COMMON_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <gsl/gsl_rng.h>

#define SL_VERSION "0.1.0"

enum {
    SL_OK = 0,
    SL_EFAIL = 1,  /* internal failure: out of memory, I/O error mid-write, numerical breakdown */
    SL_EINPUT = 2, /* bad input or usage: a value, file, shape or path the caller must fix */
};

/* Records "message" (printf-style) with the source location and returns code. */
int sl_error_at(int code, const char *file, int line, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
#define sl_fail(code, ...) sl_error_at((code), __FILE__, __LINE__, __VA_ARGS__)

const char *sl_errmsg(void);   /* last recorded message ("" if none); thread-local */
const char *sl_errwhere(void); /* "file:line" of the last recorded error */
void sl_err_clear(void);

/* Allocation that records SL_EFAIL on failure; returns NULL then. */
void *sl_malloc(size_t bytes);
void *sl_calloc(size_t n, size_t size);
/* 64-byte aligned (a cache line: a 512-bit load from it never spans two lines); free() frees it. */
void *sl_malloc_aligned(size_t bytes);
/* Reads a whole file into a NUL-terminated buffer (*out, free()); *len (may be NULL) gets its size.
 * SL_EINPUT with "what: cannot open PATH: reason" or "what: cannot read PATH" on failure. */
int sl_read_file(const char *path, const char *what, char **out, size_t *len);
/* All n bytes of buf to fd, or all n bytes from fd into buf, retrying short transfers and EINTR
 * (pipes to and from a forked child): 0, or -1 at an error or an early end of the input. */
int sl_fd_write_all(int fd, const void *buf, size_t n);
int sl_fd_read_all(int fd, void *buf, size_t n);

/* ---- random streams ---- */

/* Stream ids: separate generators for the separate kinds of random choice. */
enum sl_stream {
    SL_STREAM_DRAFT = 1,    /* draft token sampling x_i ~ q_i */
    SL_STREAM_ACCEPT = 2,   /* accept draws r_i ~ U(0,1) */
    SL_STREAM_RESAMPLE = 3, /* residual and bonus sampling */
    SL_STREAM_TARGET = 4,   /* plain target sampling (baselines, sampler-match) */
    SL_STREAM_FAMILY = 5,   /* synthetic (p, q) families */
    SL_STREAM_BOOT = 6,     /* bootstrap resampling */
    SL_STREAM_DATA = 7,     /* data shuffling, initialisation, prompts */
};

/* A 64-bit seed mixed from (seed, stream, item) with splitmix64; distinct inputs give
 * statistically independent seeds. */
uint64_t sl_seed_derive(uint64_t seed, uint64_t stream, uint64_t item);

/* xoshiro256** as a GSL generator type: full 64-bit seeds, cheap to reseed per item. */
extern const gsl_rng_type *sl_rng_xoshiro;

/* Allocates a generator seeded with sl_seed_derive(seed, stream, item). */
gsl_rng *sl_rng_alloc(uint64_t seed, uint64_t stream, uint64_t item);
void sl_rng_reseed(gsl_rng *r, uint64_t seed, uint64_t stream, uint64_t item);
/* Uniform double in [0, 1) with 53 random bits. */
double sl_rng_uniform53(gsl_rng *r);

/* The same xoshiro256** as a plain struct with inline steps, for hot loops where a call through
 * gsl_rng's function pointer per draw would dominate. sl_xoshiro_seed(x, seed, stream, item)
 * gives exactly the state of sl_rng_alloc(seed, stream, item), and sl_xoshiro_uniform53 returns the
 * same values as sl_rng_uniform53 on it, so a fast loop and its gsl_rng twin draw the same bits
 * (tests/test_common.c checks it). Everything else keeps using gsl_rng. */
typedef struct {
    uint64_t s[4];
} sl_xoshiro;

void sl_xoshiro_seed(sl_xoshiro *x, uint64_t seed, uint64_t stream, uint64_t item);

static inline uint64_t sl_xoshiro_next(sl_xoshiro *x)
{
    uint64_t *s = x->s;
    uint64_t r = s[1] * 5;
    r = ((r << 7) | (r >> 57)) * 9;
    uint64_t t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = (s[3] << 45) | (s[3] >> 19);
    return r;
}

static inline double sl_xoshiro_uniform53(sl_xoshiro *x)
{
    return (double)(sl_xoshiro_next(x) >> 11) * 0x1.0p-53;
}

/* ---- small numerics ---- */
int sl_isfinite(double x);

/* Monotonic wall clock in seconds. */
double sl_now_s(void);

/* Progress of a long library call: done of total items (sequences, prompts, iterations, steps)
 * are finished. The library calls it between items, from one thread at a time, and never prints;
 * the CLI decides what to show (sl_cli_progress). A NULL callback means silent. */
typedef void (*sl_progress_fn)(void *ctx, size_t done, size_t total);

/* Writes to a temporary file beside path and renames it into place on close, so a crash or
 * kill never leaves a half-written file and never destroys the earlier version. */
typedef struct {
    FILE *f;
    char *path;     /* final path */
    char *tmp_path; /* path.tmp.PID */
} sl_atomic_file;
int sl_atomic_open(sl_atomic_file *af, const char *path);
int sl_atomic_commit(sl_atomic_file *af); /* fflush + fsync + rename; closes */
void sl_atomic_abort(sl_atomic_file *af); /* closes and removes the temporary file */

/* May a command write its output at path? Yes when nothing is there or force is set (--force);
 * otherwise SL_EINPUT: "FLAG: PATH exists[ and WHY]; give --force to replace it". A command that
 * resumes its own output decides first whether the file is its own (then it does not call this). */
int sl_out_check(const char *flag, const char *path, int force, const char *why);

/* sha256 of a file's bytes as 64 hex digits (out has room for 65); SL_EINPUT when unreadable. */
int sl_sha256_file(const char *path, char *out);

/* The file name of a path: what follows its last '/' (the whole path when it has none). */
const char *sl_path_base(const char *path);

#endif
