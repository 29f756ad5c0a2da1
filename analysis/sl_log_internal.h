/*
 * sl_log_internal.h: what the files of the HDF5 log module share and nobody else may use: the
 * schema tables of LOG_SCHEMA.md, the HDF5 attribute helpers and the reader's state.
 *
 * The module's files, one job each: sl_log_schema.c (tables, names, metadata defaults, HDF5
 * helpers), sl_log_write.c (shards, assembly), sl_log_read.c (open, validate, row blocks, costs,
 * Monte Carlo source), sl_log_dist.c (distributions: the raw-chunk fast path and its naive twin),
 * sl_log_measure.c (the measure loop). Model file digests: sl_sha256_file (sim/sl_sha256.c).
 */
#ifndef SL_LOG_INTERNAL_H
#define SL_LOG_INTERNAL_H

#include <hdf5.h>
#include <stddef.h>
#include <stdint.h>

#include "sl_log.h"

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

/* Table indices inside each kind. */
enum { M_POS, M_DIST, M_SEQ, M_PROMPT, M_NT };
enum { R_ITER, R_DRAFT, R_SEQ, R_PROMPT, R_NT };

/* The tables of a kind (*n of them, indexed by M_* or R_*), and the run log's /costs. */
const table_def *sl_log_kind_tables(sl_log_kind k, size_t *n);
extern const table_def sl_log_costs_table;

/* ---- HDF5 helpers ---- */

/* Turns off HDF5's printing of error stacks: the library reports errors through sl_fail. */
void sl_log_h5_quiet(void);
/* The file type of float16 distributions (IEEE binary16, little-endian). */
hid_t sl_log_h5_f16_type(void);
/* Reads a string attribute into buf (n); returns -1 when missing or not a string. */
int sl_log_h5_get_attr_str(hid_t obj, const char *name, char *buf, size_t n);
/* Reads a numeric attribute converted to mtype; returns -1 when missing or not a number. */
int sl_log_h5_get_attr_num(hid_t obj, const char *name, hid_t mtype, void *v);
/* Reads a whole 1-D integer dataset as int64 (*out malloc'd, free()); -1 on failure. */
int sl_log_h5_read_i64_all(hid_t g, const char *name, int64_t **out, size_t *n);

/* ---- the reader's state ---- */

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
    /* direct access: the file open for pread and every distribution chunk's place in it */
    int fd;                  /* -1: no direct access */
    size_t n_chunks;
    uint64_t *caddr, *csize; /* (n_chunks, 2): p then q */
    uint32_t *cmask;         /* (n_chunks, 2) */
    int nt_scratch;
    unsigned char **zc;      /* per thread: one compressed chunk as read */
    unsigned char **zs;      /* per thread: (chunk bytes) inflated chunk */
    float **fs;              /* per thread: (2, chunk rows, V) float copies when needed */
    /* random access cache */
    long cache_chunk;
    float *cache_p, *cache_q; /* (dist_chunk, V) */
};

/* A table of distribution chunks as sl_log_locate_chunks finds it: n chunks, each array (n, 2), p
 * then q. */
typedef struct {
    size_t n;
    uint64_t *addr, *size;
    uint32_t *mask;
} sl_log_chunk_table;

/* Called by sl_log_open, defined in sl_log_dist.c: locates every distribution chunk and keeps the file
 * open for pread, or leaves direct access off. known (or NULL): the table that sl_log_open's probe
 * child found in the same file; if it has the expected number of chunks and every entry lies inside
 * the file, it is taken (its arrays then belong to r) instead of asking libhdf5 again; otherwise it
 * is freed and the chunks are located anew. */
void sl_log_locate_chunks(sl_log_reader *r, sl_log_chunk_table *known);

/* Every stored pmf row must sum to 1 within sl_log_row_sum_tol (float16 and float32 rounding
 * bounds, sl_log_read.c says how): sl_log_check_row_sums fails naming the first row that does not.
 * p and q are (n, vocab_size), rows first .. first + n - 1. */
double sl_log_row_sum_tol(const sl_log_reader *r);
int sl_log_check_row_sums(const sl_log_reader *r, size_t first, size_t n, const float *p, const float *q);

#endif
