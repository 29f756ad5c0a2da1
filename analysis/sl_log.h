/*
 * sl_log.h: HDF5 logs of measurements and speculative runs (schema: analysis/LOG_SCHEMA.md).
 *
 * Two kinds share one schema family (root attribute schema_version = 1):
 *   measure: a row per generated token: beta, D_LK, entropies of p and q, max q, p(token),
 *            q(token), optionally the full standardised p and q (float32 or float16);
 *   run:     a row per iteration of Algorithm 1 and a row per drafted token, plus measured c and v(n).
 *
 * Crash safety (LOG_SCHEMA.md, "Writing"): rows are written into shard files OUT.h5.d/shard-NNNNNN.h5,
 * each created as shard-NNNNNN.h5.tmp.PID and renamed into place once complete and fsync'ed; a shard
 * holds a fixed group of consecutive sequences, so a rerun skips the shards that exist. OUT.h5 is
 * assembled from all shards through OUT.h5.tmp.PID + rename. A kill at any moment leaves complete
 * shards, stale temporary files (removed by the next run) and either no OUT.h5 or the previous one.
 *
 * Reading streams rows in blocks (bounded memory whatever the file size); sl_log_validate checks
 * version, datasets, shapes and values and returns SL_EINPUT with a one-line message.
 */
#ifndef SL_LOG_H
#define SL_LOG_H

#include <stddef.h>
#include <stdint.h>

#include "sl_common.h"
#include "sl_dist.h"
#include "sl_mc.h"
#include "sl_spec.h"

#define SL_LOG_SCHEMA_VERSION 1
#define SL_LOG_SCHEMA_NAME "speclab-log"

/* Source revision baked in by the Makefile (git describe); "unknown" outside a git checkout. */
#ifndef SL_SOURCE_REVISION
#define SL_SOURCE_REVISION "unknown"
#endif

typedef enum { SL_LOG_MEASURE = 0, SL_LOG_RUN = 1 } sl_log_kind;
typedef enum { SL_LOG_DIST_NONE = 0, SL_LOG_DIST_F32 = 1, SL_LOG_DIST_F16 = 2 } sl_log_dist;

const char *sl_log_kind_name(sl_log_kind k);
const char *sl_log_dist_name(sl_log_dist d);  /* "none", "float32", "float16" */
int sl_log_dist_parse(const char *s, sl_log_dist *out);

/* Root attributes of a log. The writer fills tool_version, source_revision, created_utc. */
typedef struct {
    sl_log_kind kind;
    char target_name[256], target_sha256[65]; /* sha256 of the model file, hex; "" if none */
    char draft_name[256], draft_sha256[65];
    char source[128];          /* "models" or "synthetic:FAMILY ..." : where p and q came from */
    uint64_t vocab_size;
    sl_sampling sampling;      /* the standardisation applied to both p and q */
    uint64_t seed;             /* global seed; sequence s samples from (seed, stream, s) */
    uint64_t tokens_per_sequence; /* N asked for (a sequence may stop early at eos) */
    int64_t eos;               /* end-of-sequence token, -1 = none */
    sl_log_dist dist;          /* measure: how full distributions are stored */
    uint64_t shard_sequences;  /* sequences per shard */
    /* run logs */
    uint64_t gamma;            /* the one gamma, or the largest of a sweep */
    char gammas[128];          /* a sweep's gammas, "1,2,4" ("" = the one gamma): attribute and fingerprint only when set */
    char rule[32];
    double lenience;
    int64_t threads;           /* worker threads the decode ran with (0 = not recorded); not in the fingerprint */
    /* filled by the writer or read from a file */
    int64_t schema_version;
    char tool_version[32], source_revision[128], created_utc[32];
} sl_log_meta;

void sl_log_meta_init(sl_log_meta *m, sl_log_kind kind);


/* ---- writing ---- */

typedef struct sl_log_writer sl_log_writer;

typedef struct {
    int deflate_level;  /* 0..9 for the per-row columns (default 4) */
    int dist_level;     /* 0..9 for full distributions (default 1: probabilities compress little) */
} sl_log_write_opts;

#define SL_LOG_WRITE_OPTS_DEFAULT ((sl_log_write_opts){4, 1})

/* Opens (or resumes) the log OUT: creates OUT.h5.d/, takes an exclusive lock on it (a second
 * writer is refused), removes stale temporary files, and checks that existing shards were written
 * with the same settings (SL_EINPUT otherwise). An unwritable path is SL_EINPUT. */
int sl_log_writer_open(sl_log_writer **out, const char *path, const sl_log_meta *meta, const sl_log_write_opts *o);
/* Frees the writer; an open shard is abandoned (its temporary file removed). */
void sl_log_writer_close(sl_log_writer *w);

/* Whether shard k (sequences [k*S, (k+1)*S)) exists with n_seq sequences and these prompts.
 * prompts/n_prompt (n_seq entries) are compared with the shard's; a mismatch is SL_EINPUT (the
 * prompt list changed under an existing log). Sets *done to 1 when it can be skipped. */
int sl_log_shard_done(sl_log_writer *w, size_t k, size_t n_seq, const int32_t *const *prompts,
                      const size_t *n_prompt, int *done);
int sl_log_shard_begin(sl_log_writer *w, size_t k);
/* Renames the finished shard into place (after fsync). */
int sl_log_shard_commit(sl_log_writer *w);

/* A sequence inside the open shard. mode (run logs): 0 speculative, 1 autoregressive baseline. */
int sl_log_seq_begin(sl_log_writer *w, int64_t sequence, int64_t prompt_id, const int32_t *prompt, size_t n_prompt);
int sl_log_seq_end(sl_log_writer *w, int mode, double wall_s);
/* Run logs: the tokens the sequence kept (/sequences/n_generated), set before sl_log_seq_end. By
 * default it is the sum of the iterations' emitted tokens; an autoregressive baseline has no
 * iterations, and the last iteration of a speculative one may emit beyond the token budget. */
int sl_log_seq_set_generated(sl_log_writer *w, size_t n);

/* Measure logs: one generated token with the standardised target p and draft q (V) at its prefix.
 * Computes beta, D_LK, entropies, max q, p(token), q(token); stores p and q when meta.dist says so. */
int sl_log_add_position(sl_log_writer *w, const double *p, const double *q, int32_t token);

/* Run logs: one iteration as sl_spec_decode reports it (drafts, betas, timings). */
int sl_log_add_iteration(sl_log_writer *w, const sl_spec_iter_record *rec, const int *accepted_flags);

/* Run logs: measured costs, kept in OUT.h5.d/costs.h5 (atomic) and copied into OUT.h5:
 * c = draft step / target step, and v(n) for n (count) = target call on n tokens / one-token call. */
int sl_log_set_costs(sl_log_writer *w, double c, double draft_step_s, double target_step_s, const long *n,
                     const double *v, const double *call_s, size_t count);

/* Builds OUT.h5 from shards 0..n_shards-1 (all must exist) through a temporary file + rename. */
int sl_log_assemble(sl_log_writer *w, size_t n_shards);

/* ---- measuring a model pair through the sampler's model interface ---- */

typedef struct {
    size_t n;                 /* prompts */
    const int32_t *const *tokens; /* (n) arrays of token ids */
    const size_t *len;        /* (n) their lengths, >= 1 */
    const int64_t *id;        /* (n) prompt ids (NULL: 0..n-1) */
} sl_log_prompts;

/* The target generates n_tokens after each prompt (token ~ p, stream SL_STREAM_TARGET, item =
 * sequence index); at every position p (target) and q (draft), already standardised by the models
 * under meta.sampling, are logged. Sequences are grouped into shards of meta.shard_sequences;
 * completed shards are skipped, so a rerun after a kill continues; OUT is assembled at the end.
 * Vocabulary mismatch between the models: SL_EINPUT. progress (NULL = silent) is called after each sequence with (sequences
 * done, sequences). */
int sl_log_measure(sl_lm *target, sl_lm *draft, const sl_log_prompts *prompts, const sl_log_meta *meta,
                   const sl_log_write_opts *o, const char *path, sl_progress_fn progress, void *progress_ctx);

/* ---- reading ---- */

typedef struct sl_log_reader sl_log_reader;

/* Opens and validates (sl_log_validate). */
int sl_log_open(sl_log_reader **out, const char *path);
void sl_log_close(sl_log_reader *r);
const sl_log_meta *sl_log_meta_of(const sl_log_reader *r);
int sl_log_has_dists(const sl_log_reader *r);

/* Checks schema name and version, kind, every dataset's presence, type class and shape, the
 * sequences table against the row tables, and values (probabilities finite and in [0, 1],
 * tokens in [0, V)); SL_EINPUT with a one-line message naming the file and dataset. The value
 * checks stream through the file. */
int sl_log_validate(const char *path);

/* Counts. */
size_t sl_log_n_rows(const sl_log_reader *r);      /* positions (measure) or iterations (run) */
size_t sl_log_n_drafts(const sl_log_reader *r);    /* run: drafted-token rows */
size_t sl_log_n_sequences(const sl_log_reader *r);

/* Per-sequence table (read whole: one row per sequence). */
typedef struct {
    int64_t sequence, prompt_id;
    int64_t n_prompt_tokens, n_generated, n_rows; /* n_rows: positions or iterations */
    int64_t n_drafts;   /* run */
    int mode;           /* run: 0 speculative, 1 autoregressive */
    double wall_s;      /* run */
} sl_log_seq;
int sl_log_sequences(sl_log_reader *r, sl_log_seq **out /* (n_sequences), free() */);

/* A block of measure rows; arrays hold cap rows. */
typedef struct {
    size_t n, cap, first;  /* rows in this block, capacity, index of the first row */
    int32_t *sequence, *position, *token; /* (cap) */
    double *beta, *d_lk, *entropy_p, *entropy_q, *q_max, *p_token, *q_token; /* (cap) */
} sl_log_pos_block;
int sl_log_pos_block_alloc(sl_log_pos_block *b, size_t cap);
void sl_log_pos_block_free(sl_log_pos_block *b);
/* Reads rows [first, first + min(cap, n_rows - first)); b->n = 0 at the end. */
int sl_log_read_positions(sl_log_reader *r, size_t first, sl_log_pos_block *b);

/* Run logs: blocks of iteration rows and of draft rows. */
typedef struct {
    size_t n, cap, first;
    int32_t *sequence, *iteration, *gamma, *drafted, *accepted, *emitted; /* (cap) */
    double *draft_s, *verify_s, *sample_s;                                /* (cap) */
} sl_log_iter_block;
int sl_log_iter_block_alloc(sl_log_iter_block *b, size_t cap);
void sl_log_iter_block_free(sl_log_iter_block *b);
int sl_log_read_iterations(sl_log_reader *r, size_t first, sl_log_iter_block *b);

typedef struct {
    size_t n, cap, first;
    int32_t *sequence, *iteration, *draft_position, *token; /* (cap) draft_position 1..gamma */
    int8_t *accepted;                                       /* (cap) */
    double *beta;                                           /* (cap) */
} sl_log_draft_block;
int sl_log_draft_block_alloc(sl_log_draft_block *b, size_t cap);
void sl_log_draft_block_free(sl_log_draft_block *b);
int sl_log_read_drafts(sl_log_reader *r, size_t first, sl_log_draft_block *b);

/* Run logs: costs (count 0 when the log has none). n, v, call_s are malloc'd (free()). */
typedef struct {
    double c, draft_step_s, target_step_s;
    size_t count;
    long *n;
    double *v, *call_s;
} sl_log_costs;
int sl_log_read_costs(sl_log_reader *r, sl_log_costs *out);
void sl_log_costs_free(sl_log_costs *c);

/* Full distributions, in blocks of whole HDF5 chunks. sl_log_dist_rows_per_chunk gives the chunk
 * height; sl_log_read_dists reads rows [first, first + n) (first a multiple of the chunk height)
 * into p and q (n, V) as float32. fast = 1 reads raw chunks and inflates them with libdeflate on
 * `threads` threads (0 = OpenMP default); fast = 0 goes through H5Dread (the naive twin). */
size_t sl_log_dist_rows_per_chunk(const sl_log_reader *r);
int sl_log_read_dists(sl_log_reader *r, size_t first, size_t n, float *p, float *q, int fast, int threads);
/* Direct access for parallel readers: when sl_log_dist_direct is true (every chunk located, the file
 * open for pread), sl_log_dist_chunk may be called from many threads at once (tid in [0, nt) after
 * sl_log_dist_prepare(r, nt)): it reads chunk k and points *p and *q at its rows (*rows of them,
 * (rows, V) float32) in thread tid's scratch, after inflating (libdeflate) and/or widening float16.
 * No HDF5 call is made. */
int sl_log_dist_direct(const sl_log_reader *r);
int sl_log_dist_prepare(sl_log_reader *r, int nt);
int sl_log_dist_chunk(sl_log_reader *r, size_t k, int tid, const float **p, const float **q, size_t *rows);
/* The same without the check that each row sums to 1 (sl_log_check_row_sums), for a caller that
 * checks each row itself right before using it, while the row is in L1: sl_log_dist_row_ok(r, p, q)
 * is 1 when rows p and q (V floats each) both sum to 1 within the log's tolerance; if any row is
 * not, sl_log_dist_chunk on the same chunk gives the error. */
int sl_log_dist_chunk_unchecked(sl_log_reader *r, size_t k, int tid, const float **p, const float **q, size_t *rows);
int sl_log_dist_row_ok(const sl_log_reader *r, const float *p, const float *q);

/* One row (random access, e.g. for a Monte Carlo row source), as doubles. Caches one chunk. */
int sl_log_read_row(sl_log_reader *r, size_t row, double *p, double *q);

/* A Monte Carlo row source (sl_mc.h) over rows [first, first + n_rows) of a log's distributions:
 * row i is /distributions row first + i, read through sl_log_read_row and renormalised in double
 * (stored float32/float16 values do not sum to exactly 1). owner holds the state; free it with
 * sl_log_mc_free after the source's last use. The reader must outlive both. */
typedef struct sl_log_mc sl_log_mc;
int sl_log_mc_source(sl_log_reader *r, size_t first, size_t n_rows, sl_mc_layout layout, sl_log_mc **owner,
                     sl_mc_source *out);
void sl_log_mc_free(sl_log_mc *m);

/* Runs fn(ctx, i, tid) for i in [0, n) on nt threads (tid in [0, nt)), items handed out one at a
 * time; the threads block instead of spinning, which matters on a busy machine. Blocks until done. */
void sl_log_parallel(size_t n, int nt, void (*fn)(void *ctx, size_t i, int tid), void *ctx);

#endif
