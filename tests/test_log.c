/*
 * test_log.c: the HDF5 log: schema round trip (float32, float16, beta-level only), the raw-chunk
 * fast reader against its H5Dread twin, shard resume semantics, run logs written from
 * sl_spec_decode's iteration callback and analysed back.
 */
#include <criterion/criterion.h>
#include <gsl/gsl_randist.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "sl_analyze.h"
#include "sl_common.h"
#include "sl_half.h"
#include "sl_log.h"
#include "sl_log_internal.h"
#include "sl_synth.h"

static char tmpdir[256];

static void mk_tmp(void)
{
    snprintf(tmpdir, sizeof tmpdir, "/tmp/sl_test_log.%ld", (long)getpid());
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf %s && mkdir -p %s", tmpdir, tmpdir);
    cr_assert_eq(system(cmd), 0);
}
static void rm_tmp(void)
{
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf %s", tmpdir);
    cr_assert_eq(system(cmd), 0);
}

/* A deterministic pmf for row i: unnormalised weights, normalised. */
static void row_pmf(size_t i, int which, size_t V, double *p)
{
    double s = 0;
    for (size_t x = 0; x < V; x++) {
        p[x] = (x * 7 + i * 13 + (size_t)which * 5) % 11 == 0 ? 0 : 1.0 + (double)((x * 31 + i * 17 + (size_t)which) % 97);
        s += p[x];
    }
    for (size_t x = 0; x < V; x++) p[x] /= s;
}

/* Writes a measure log of n_seq sequences of len[s] rows directly through the writer API. */
static void write_log(const char *path, sl_log_dist dist, size_t V, size_t n_seq, const size_t *len, size_t shard)
{
    sl_log_meta m;
    sl_log_meta_init(&m, SL_LOG_MEASURE);
    m.vocab_size = V;
    m.dist = dist;
    m.shard_sequences = shard;
    m.seed = 42;
    m.tokens_per_sequence = 100;
    snprintf(m.target_name, sizeof m.target_name, "t");
    snprintf(m.draft_name, sizeof m.draft_name, "d");
    sl_log_writer *w;
    cr_assert_eq(sl_log_writer_open(&w, path, &m, NULL), SL_OK, "%s", sl_errmsg());
    double *p = malloc(V * sizeof *p), *q = malloc(V * sizeof *q);
    size_t row = 0, n_shards = (n_seq + shard - 1) / shard;
    for (size_t k = 0; k < n_shards; k++) {
        cr_assert_eq(sl_log_shard_begin(w, k), SL_OK);
        for (size_t s = k * shard; s < n_seq && s < (k + 1) * shard; s++) {
            int32_t prompt[3] = {(int32_t)s, 1, 2};
            cr_assert_eq(sl_log_seq_begin(w, (int64_t)s, (int64_t)(100 + s), prompt, 1 + s % 3), SL_OK);
            for (size_t t = 0; t < len[s]; t++, row++) {
                row_pmf(row, 0, V, p);
                row_pmf(row, 1, V, q);
                cr_assert_eq(sl_log_add_position(w, p, q, (int32_t)(row % V)), SL_OK);
            }
            cr_assert_eq(sl_log_seq_end(w, 0, 0), SL_OK);
        }
        cr_assert_eq(sl_log_shard_commit(w), SL_OK, "%s", sl_errmsg());
    }
    cr_assert_eq(sl_log_assemble(w, n_shards), SL_OK, "%s", sl_errmsg());
    sl_log_writer_close(w);
    free(p);
    free(q);
}

static void roundtrip(sl_log_dist dist)
{
    mk_tmp();
    char path[512];
    snprintf(path, sizeof path, "%s/rt.h5", tmpdir);
    size_t V = 300, len[5] = {70, 0, 33, 129, 1}, n_seq = 5, total = 233;
    write_log(path, dist, V, n_seq, len, 2);
    cr_assert_eq(sl_log_validate(path), SL_OK, "%s", sl_errmsg());
    sl_log_reader *r;
    cr_assert_eq(sl_log_open(&r, path), SL_OK, "%s", sl_errmsg());
    cr_assert_eq(sl_log_n_rows(r), total);
    cr_assert_eq(sl_log_n_sequences(r), n_seq);
    const sl_log_meta *m = sl_log_meta_of(r);
    cr_assert_eq(m->vocab_size, V);
    cr_assert_eq(m->seed, 42);
    cr_assert_eq(m->dist, dist);
    cr_assert_str_eq(m->target_name, "t");
    cr_assert_str_eq(m->tool_version, SL_VERSION);
    cr_assert_eq(sl_log_has_dists(r), dist != SL_LOG_DIST_NONE);
    sl_log_seq *seqs;
    cr_assert_eq(sl_log_sequences(r, &seqs), SL_OK);
    for (size_t s = 0; s < n_seq; s++) {
        cr_assert_eq(seqs[s].sequence, (int64_t)s);
        cr_assert_eq(seqs[s].prompt_id, (int64_t)(100 + s));
        cr_assert_eq(seqs[s].n_rows, (int64_t)len[s]);
        cr_assert_eq(seqs[s].n_prompt_tokens, (int64_t)(1 + s % 3));
    }
    free(seqs);
    /* Per-row columns equal what the writer computed from the same doubles: exact. */
    sl_log_pos_block b;
    cr_assert_eq(sl_log_pos_block_alloc(&b, 50), SL_OK);
    double *p = malloc(V * sizeof *p), *q = malloc(V * sizeof *q), *p2 = malloc(V * sizeof *p2), *q2 = malloc(V * sizeof *q2);
    size_t row = 0;
    for (size_t first = 0;; first += b.n) {
        cr_assert_eq(sl_log_read_positions(r, first, &b), SL_OK);
        if (b.n == 0) break;
        for (size_t i = 0; i < b.n; i++, row++) {
            row_pmf(row, 0, V, p);
            row_pmf(row, 1, V, q);
            cr_assert_eq(b.beta[i], sl_dist_beta(p, q, V));
            cr_assert_eq(b.d_lk[i], sl_dist_dlk(p, q, V));
            cr_assert_eq(b.entropy_q[i], sl_dist_entropy(q, V));
            cr_assert_eq(b.token[i], (int32_t)(row % V));
            cr_assert_eq(b.p_token[i], p[row % V]);
            cr_assert_eq(b.q_max[i], q[sl_dist_argmax(q, V)]);
            if (dist != SL_LOG_DIST_NONE) {
                cr_assert_eq(sl_log_read_row(r, row, p2, q2), SL_OK, "%s", sl_errmsg());
                for (size_t x = 0; x < V; x++) {
                    /* float32: the value rounded once to float; float16: half precision, relative
                     * error <= 2^-11 for normal halves, absolute <= 2^-25 in the subnormal range. */
                    double tp = dist == SL_LOG_DIST_F32 ? (double)(float)p[x] : p[x];
                    double tol = dist == SL_LOG_DIST_F32 ? 0 : fabs(p[x]) * 0x1p-11 + 0x1p-25;
                    cr_assert(fabs(p2[x] - tp) <= tol, "row %zu x %zu: %g vs %g", row, x, p2[x], p[x]);
                    double tq = dist == SL_LOG_DIST_F32 ? (double)(float)q[x] : q[x];
                    tol = dist == SL_LOG_DIST_F32 ? 0 : fabs(q[x]) * 0x1p-11 + 0x1p-25;
                    cr_assert(fabs(q2[x] - tq) <= tol);
                }
            }
        }
    }
    cr_assert_eq(row, total);
    sl_log_pos_block_free(&b);
    free(p), free(q), free(p2), free(q2);
    sl_log_close(r);
    rm_tmp();
}

Test(log, roundtrip_float32) { roundtrip(SL_LOG_DIST_F32); }
Test(log, roundtrip_float16) { roundtrip(SL_LOG_DIST_F16); }
Test(log, roundtrip_beta_only) { roundtrip(SL_LOG_DIST_NONE); }

/* The fast path (raw chunks, libdeflate, threads) against H5Dread: identical floats. */
Test(log, fast_reader_equals_naive)
{
    mk_tmp();
    for (int d = 1; d <= 2; d++) {
        char path[512];
        snprintf(path, sizeof path, "%s/fast%d.h5", tmpdir, d);
        size_t V = 1000, len[3] = {300, 211, 500};
        write_log(path, (sl_log_dist)d, V, 3, len, 1);
        sl_log_reader *r;
        cr_assert_eq(sl_log_open(&r, path), SL_OK);
        size_t ch = sl_log_dist_rows_per_chunk(r), total = sl_log_n_rows(r), block = 3 * ch;
        float *p1 = malloc(block * V * 4), *q1 = malloc(block * V * 4), *p2 = malloc(block * V * 4), *q2 = malloc(block * V * 4);
        for (size_t first = 0; first < total; first += block) {
            size_t n = total - first < block ? total - first : block;
            cr_assert_eq(sl_log_read_dists(r, first, n, p1, q1, 1, 2), SL_OK, "%s", sl_errmsg());
            cr_assert_eq(sl_log_read_dists(r, first, n, p2, q2, 0, 1), SL_OK, "%s", sl_errmsg());
            cr_assert_eq(memcmp(p1, p2, n * V * 4), 0, "p differs at rows %zu..", first);
            cr_assert_eq(memcmp(q1, q2, n * V * 4), 0, "q differs at rows %zu..", first);
        }
        free(p1), free(q1), free(p2), free(q2);
        sl_log_close(r);
    }
    rm_tmp();
}

/* The two logs the direct-access tests read: V = 1000, three sequences of 300, 211 and 500
 * positions, float32 at path[0] and float16 at path[1] (STEM32.h5 and STEM16.h5 in tmpdir). */
static void write_two_logs(char path[][512], const char *stem)
{
    size_t len[3] = {300, 211, 500};
    snprintf(path[0], 512, "%s/%s32.h5", tmpdir, stem);
    snprintf(path[1], 512, "%s/%s16.h5", tmpdir, stem);
    write_log(path[0], SL_LOG_DIST_F32, 1000, 3, len, 1);
    write_log(path[1], SL_LOG_DIST_F16, 1000, 3, len, 1);
}

/* Direct chunk access (pread, no HDF5 calls) against H5Dread, on logs whose chunks are
 * deflated (patterned pmfs) and raw (random synthetic pmfs: float32 deflates by < 10%). */
Test(log, direct_chunks_equal_naive)
{
    mk_tmp();
    char path[4][512];
    write_two_logs(path, "d");
    sl_synth_params sp = SL_SYNTH_DEFAULT;
    sp.V = 1000;
    sl_synth_lm *mt, *md;
    cr_assert_eq(sl_synth_alloc(&sp, 0, &mt), SL_OK);
    cr_assert_eq(sl_synth_alloc(&sp, 1, &md), SL_OK);
    sl_lm lt = sl_synth_lm_of(mt), ld = sl_synth_lm_of(md);
    int32_t pr0[1] = {1}, pr1[1] = {2};
    const int32_t *pp[2] = {pr0, pr1};
    size_t pl[2] = {1, 1};
    sl_log_prompts pr = {2, pp, pl, NULL};
    for (int d = 0; d < 2; d++) {
        snprintf(path[2 + d], 512, "%s/s%d.h5", tmpdir, d);
        sl_log_meta m;
        sl_log_meta_init(&m, SL_LOG_MEASURE);
        m.dist = d ? SL_LOG_DIST_F16 : SL_LOG_DIST_F32;
        m.tokens_per_sequence = 150;
        cr_assert_eq(sl_log_measure(&lt, &ld, &pr, &m, NULL, path[2 + d], NULL, NULL), SL_OK, "%s", sl_errmsg());
    }
    sl_synth_free(mt);
    sl_synth_free(md);
    for (int f = 0; f < 4; f++) {
        sl_log_reader *r;
        cr_assert_eq(sl_log_open(&r, path[f]), SL_OK);
        cr_assert(sl_log_dist_direct(r), "%s: direct access unavailable", path[f]);
        cr_assert_eq(sl_log_dist_prepare(r, 2), SL_OK);
        size_t V = 1000, ch = sl_log_dist_rows_per_chunk(r), total = sl_log_n_rows(r);
        float *p2 = malloc(ch * V * 4), *q2 = malloc(ch * V * 4);
        for (size_t k = 0; k * ch < total; k++) {
            const float *p1, *q1;
            size_t rows;
            cr_assert_eq(sl_log_dist_chunk(r, k, (int)(k % 2), &p1, &q1, &rows), SL_OK, "%s", sl_errmsg());
            cr_assert_eq(rows, total - k * ch < ch ? total - k * ch : ch);
            cr_assert_eq(sl_log_read_dists(r, k * ch, rows, p2, q2, 0, 1), SL_OK);
            cr_assert_eq(memcmp(p1, p2, rows * V * 4), 0, "%s chunk %zu: p differs", path[f], k);
            cr_assert_eq(memcmp(q1, q2, rows * V * 4), 0, "%s chunk %zu: q differs", path[f], k);
        }
        free(p2), free(q2);
        sl_log_close(r);
    }
    rm_tmp();
}

/* sl_log_open takes the distribution chunks' table from its probe child (sl_log_read.c) instead of
 * asking libhdf5 again: the table it took equals the one sl_log_locate_chunks finds in the file; and
 * a table that does not fit the file (another chunk count, an address past the end) is not taken:
 * the chunks are located anew, or direct access stays off. */
Test(log, probe_chunk_table_equals_libhdf5s)
{
    mk_tmp();
    char path[2][512];
    write_two_logs(path, "t");
    for (int f = 0; f < 2; f++) {
        sl_log_reader *r;
        cr_assert_eq(sl_log_open(&r, path[f]), SL_OK);
        cr_assert(sl_log_dist_direct(r) && r->n_chunks > 1);
        const size_t n = r->n_chunks;
        uint64_t *a = r->caddr, *z = r->csize;
        uint32_t *m = r->cmask;
        close(r->fd);
        r->fd = -1, r->caddr = r->csize = NULL, r->cmask = NULL, r->n_chunks = 0;
        sl_log_locate_chunks(r, NULL); /* libhdf5's answer */
        cr_assert(sl_log_dist_direct(r));
        cr_assert_eq(r->n_chunks, n);
        cr_assert(!memcmp(r->caddr, a, 2 * n * 8) && !memcmp(r->csize, z, 2 * n * 8) && !memcmp(r->cmask, m, 2 * n * 4),
                  "%s: the probe's chunk table differs from libhdf5's", path[f]);
        const uint64_t a0 = a[0];
        for (int bad = 0; bad < 2; bad++) {
            close(r->fd), free(r->caddr), free(r->csize), free(r->cmask);
            r->fd = -1, r->caddr = r->csize = NULL, r->cmask = NULL, r->n_chunks = 0;
            sl_log_chunk_table t = {bad ? n : n - 1, malloc(2 * n * 8), malloc(2 * n * 8), malloc(2 * n * 4)};
            memcpy(t.addr, a, 2 * n * 8), memcpy(t.size, z, 2 * n * 8), memcpy(t.mask, m, 2 * n * 4);
            if (bad) t.addr[1] = (uint64_t)1 << 50; /* past the end of the file */
            sl_log_locate_chunks(r, &t);
            cr_assert(t.addr == NULL && t.n == 0, "the table is consumed");
            if (bad) {
                cr_assert(!sl_log_dist_direct(r), "an address past the end of the file is not taken");
            } else {
                cr_assert(sl_log_dist_direct(r) && r->n_chunks == n && r->caddr[0] == a0,
                          "a table of another chunk count is located anew");
            }
        }
        free(a), free(z), free(m);
        sl_log_close(r);
    }
    rm_tmp();
}

/* A log cut short while it is open (another process truncating it to a third): direct access reads
 * chunks with pread, so a chunk past the new end is a one-line error naming the file, not a SIGBUS,
 * and closing works. float32 (raw chunks) and float16 (deflated). */
Test(log, direct_chunk_of_a_file_cut_short_is_an_error)
{
    mk_tmp();
    size_t len[3] = {300, 211, 500};
    for (int d = 0; d < 2; d++) {
        char path[512];
        snprintf(path, sizeof path, "%s/cut%d.h5", tmpdir, d);
        write_log(path, d ? SL_LOG_DIST_F16 : SL_LOG_DIST_F32, 1000, 3, len, 1);
        sl_log_reader *r;
        cr_assert_eq(sl_log_open(&r, path), SL_OK, "%s", sl_errmsg());
        cr_assert(sl_log_dist_direct(r));
        cr_assert_eq(sl_log_dist_prepare(r, 1), SL_OK);
        const size_t ch = sl_log_dist_rows_per_chunk(r), last = (sl_log_n_rows(r) - 1) / ch;
        struct stat st;
        cr_assert_eq(stat(path, &st), 0);
        cr_assert_eq(truncate(path, st.st_size / 3), 0);
        const float *p, *q;
        size_t rows;
        cr_assert_eq(sl_log_dist_chunk(r, last, 0, &p, &q, &rows), SL_EINPUT, "%s: the last chunk read", path);
        cr_assert(strstr(sl_errmsg(), "cut short") && strstr(sl_errmsg(), path), "%s", sl_errmsg());
        sl_log_close(r);
    }
    rm_tmp();
}

/* Resume: a shard that exists is skipped, a shard with fewer sequences than now asked for is
 * redone, a changed prompt or changed settings are refused. */
Test(log, shard_resume_rules)
{
    mk_tmp();
    char path[512];
    snprintf(path, sizeof path, "%s/res.h5", tmpdir);
    size_t len[3] = {5, 5, 5};
    write_log(path, SL_LOG_DIST_NONE, 50, 3, len, 2);
    sl_log_meta m;
    sl_log_meta_init(&m, SL_LOG_MEASURE);
    m.vocab_size = 50;
    m.dist = SL_LOG_DIST_NONE;
    m.shard_sequences = 2;
    m.seed = 42;
    m.tokens_per_sequence = 100;
    snprintf(m.target_name, sizeof m.target_name, "t");
    snprintf(m.draft_name, sizeof m.draft_name, "d");
    sl_log_writer *w;
    cr_assert_eq(sl_log_writer_open(&w, path, &m, NULL), SL_OK);
    int32_t a[3] = {0, 1, 2}, b2[3] = {1, 1, 2}, c3[3] = {2, 1, 2}, d4[3] = {3, 1, 2};
    const int32_t *pr[2] = {a, b2};
    size_t pl[2] = {1, 2};
    int done = -1;
    cr_assert_eq(sl_log_shard_done(w, 0, 2, pr, pl, &done), SL_OK, "%s", sl_errmsg());
    cr_assert_eq(done, 1);
    const int32_t *pr1[2] = {c3, d4};
    size_t pl1[2] = {3, 1};
    cr_assert_eq(sl_log_shard_done(w, 1, 2, pr1, pl1, &done), SL_OK);
    cr_assert_eq(done, 0, "shard 1 holds 1 sequence; 2 are asked for now");
    int32_t other[1] = {9};
    const int32_t *bad[2] = {other, b2};
    cr_assert_eq(sl_log_shard_done(w, 0, 2, bad, pl, &done), SL_EINPUT);
    sl_log_writer_close(w);
    m.seed = 43;
    cr_assert_eq(sl_log_writer_open(&w, path, &m, NULL), SL_OK);
    cr_assert_eq(sl_log_shard_done(w, 0, 2, pr, pl, &done), SL_EINPUT);
    cr_assert(strstr(sl_errmsg(), "other settings"), "%s", sl_errmsg());
    /* A second writer on the same output is refused while the first holds the lock. */
    sl_log_writer *w2;
    cr_assert_eq(sl_log_writer_open(&w2, path, &m, NULL), SL_EINPUT);
    sl_log_writer_close(w);
    rm_tmp();
}

/* ---- run logs from the real sampler ---- */

typedef struct {
    sl_log_writer *w;
} run_ctx;

static int on_iter(void *ctx, const sl_spec_iter_record *rec)
{
    run_ctx *c = ctx;
    return sl_log_add_iteration(c->w, rec, NULL);
}

Test(log, run_log_from_spec_decode)
{
    mk_tmp();
    char path[512];
    snprintf(path, sizeof path, "%s/run.h5", tmpdir);
    sl_synth_params sp = SL_SYNTH_DEFAULT;
    sp.V = 64;
    sp.noise = 0.7;
    sl_synth_lm *mt, *md;
    cr_assert_eq(sl_synth_alloc(&sp, 0, &mt), SL_OK);
    cr_assert_eq(sl_synth_alloc(&sp, 1, &md), SL_OK);
    sl_lm lt = sl_synth_lm_of(mt), ld = sl_synth_lm_of(md);
    sl_log_meta m;
    sl_log_meta_init(&m, SL_LOG_RUN);
    m.vocab_size = 64;
    m.gamma = 4;
    m.shard_sequences = 3;
    sl_log_writer *w;
    cr_assert_eq(sl_log_writer_open(&w, path, &m, NULL), SL_OK);
    run_ctx ctx = {w};
    sl_spec_config cfg = SL_SPEC_CONFIG_DEFAULT;
    sl_rand_rng rr;
    cr_assert_eq(sl_rand_rng_init(&rr, 7, 0), SL_OK);
    size_t n_seq = 6, reached[4] = {0}, accepted[4] = {0}, iters = 0, acc_total = 0;
    for (size_t k = 0; k < 2; k++) {
        cr_assert_eq(sl_log_shard_begin(w, k), SL_OK);
        for (size_t s = k * 3; s < (k + 1) * 3; s++) {
            int32_t prompt[2] = {(int32_t)s, 3}, out[200];
            size_t n_out;
            sl_spec_stats st;
            sl_rand_rng_reseed(&rr, 7, s);
            cr_assert_eq(lt.truncate(lt.self, 0), SL_OK);
            cr_assert_eq(ld.truncate(ld.self, 0), SL_OK);
            cr_assert_eq(sl_log_seq_begin(w, (int64_t)s, (int64_t)s, prompt, 2), SL_OK);
            cr_assert_eq(sl_spec_decode(&cfg, 4, &lt, &ld, prompt, 2, 200, -1, &rr.base, out, &n_out, &st, on_iter, &ctx),
                         SL_OK, "%s", sl_errmsg());
            cr_assert_eq(sl_log_seq_end(w, 0, 1.0), SL_OK);
            for (size_t i = 0; i < 4; i++) reached[i] += st.reached_at[i], accepted[i] += st.accepted_at[i];
            iters += st.iterations;
            acc_total += st.accepted;
        }
        cr_assert_eq(sl_log_shard_commit(w), SL_OK);
    }
    long n[4] = {2, 3, 4, 5};
    double v[4] = {1.1, 1.15, 1.2, 1.3}, cs[4] = {0.011, 0.0115, 0.012, 0.013};
    cr_assert_eq(sl_log_set_costs(w, 0.05, 0.0005, 0.01, n, v, cs, 4), SL_OK);
    cr_assert_eq(sl_log_assemble(w, 2), SL_OK, "%s", sl_errmsg());
    sl_log_writer_close(w);
    cr_assert_eq(sl_log_validate(path), SL_OK, "%s", sl_errmsg());
    sl_analyze_opts o;
    sl_analyze_opts_init(&o);
    o.gamma_max = 4;
    sl_analyze_result res;
    cr_assert_eq(sl_analyze_file(path, &o, &res), SL_OK, "%s", sl_errmsg());
    cr_assert_eq(res.n_iterations, iters);
    cr_assert_eq(res.n_sequences, n_seq);
    /* Observed per-position counts equal the sampler's own statistics: exact integers. */
    for (size_t i = 0; i < 4; i++) {
        cr_assert_eq(res.obs_reached[i], reached[i], "position %zu", i + 1);
        cr_assert_eq(res.obs_accepted[i], accepted[i], "position %zu", i + 1);
    }
    cr_assert_eq(res.c_deploy, 0.05);
    cr_assert_str_eq(res.c_source, "run log");
    cr_assert_eq(res.vtab[4], 1.3, "v(5) from the log's table");
    double total_tested = 0;
    for (size_t i = 0; i < 4; i++) total_tested += (double)reached[i];
    /* Tolerance 1e-12: the same integer counts divided in another order. */
    cr_assert(fabs(res.accept_rate - (double)acc_total / total_tested) < 1e-12);
    sl_analyze_result_free(&res);

    /* A measure log of the same pair analysed with the run log beside it: the observed columns
     * and the measured costs come from the run log. */
    char mpath[512];
    snprintf(mpath, sizeof mpath, "%s/measure.h5", tmpdir);
    int32_t p0[2] = {0, 3}, p1[2] = {1, 3};
    const int32_t *pp[2] = {p0, p1};
    size_t pl[2] = {2, 2};
    sl_log_prompts pr = {2, pp, pl, NULL};
    sl_log_meta mm;
    sl_log_meta_init(&mm, SL_LOG_MEASURE);
    mm.tokens_per_sequence = 60;
    mm.dist = SL_LOG_DIST_NONE;
    cr_assert_eq(sl_log_measure(&lt, &ld, &pr, &mm, NULL, mpath, NULL, NULL), SL_OK, "%s", sl_errmsg());
    o.run_path = path;
    cr_assert_eq(sl_analyze_file(mpath, &o, &res), SL_OK, "%s", sl_errmsg());
    cr_assert(res.have_run);
    cr_assert_eq(res.kind, SL_LOG_MEASURE);
    for (size_t i = 0; i < 4; i++) cr_assert_eq(res.obs_accepted[i], accepted[i]);
    cr_assert_eq(res.c_deploy, 0.05);
    cr_assert(res.have_replay);
    sl_analyze_result_free(&res);
    o.run_path = mpath; /* a measure log is not a run log */
    cr_assert_eq(sl_analyze_file(mpath, &o, &res), SL_EINPUT);
    sl_analyze_result_free(&res);
    sl_rand_rng_free(&rr);
    sl_synth_free(mt);
    sl_synth_free(md);
    rm_tmp();
}

/* sha256 of model files (nettle) against the FIPS 180-2 test vectors. */
Test(log, sha256_file)
{
    mk_tmp();
    char path[512], hex[65];
    snprintf(path, sizeof path, "%s/abc", tmpdir);
    FILE *f = fopen(path, "wb");
    fputs("abc", f);
    fclose(f);
    cr_assert_eq(sl_sha256_file(path, hex), SL_OK);
    cr_assert_str_eq(hex, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    f = fopen(path, "wb");
    for (int i = 0; i < 1000000; i++) fputc('a', f); /* longer than the 64 KiB read buffer */
    fclose(f);
    cr_assert_eq(sl_sha256_file(path, hex), SL_OK);
    cr_assert_str_eq(hex, "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
    snprintf(path, sizeof path, "%s/none", tmpdir);
    cr_assert_eq(sl_sha256_file(path, hex), SL_EINPUT);
    rm_tmp();
}

/* The log as a Monte Carlo row source: rows renormalised, the plan's predicted per-position
 * acceptance equals beta of those rows, and a simulation runs on it. */
Test(log, mc_row_source)
{
    mk_tmp();
    char path[512];
    snprintf(path, sizeof path, "%s/mc.h5", tmpdir);
    size_t len[2] = {10, 10}, V = 200, gamma = 3;
    write_log(path, SL_LOG_DIST_F16, V, 2, len, 2);
    sl_log_reader *r;
    cr_assert_eq(sl_log_open(&r, path), SL_OK);
    sl_log_mc *owner;
    sl_mc_source src;
    cr_assert_eq(sl_log_mc_source(r, 5, gamma + 1, SL_MC_POSITIONAL, &owner, &src), SL_OK, "%s", sl_errmsg());
    double *p = malloc(V * sizeof *p), *q = malloc(V * sizeof *q), beta[4];
    for (size_t i = 0; i <= gamma; i++) {
        cr_assert_eq(src.row(src.self, i, p, q), SL_OK);
        cr_assert_eq(sl_dist_check(p, V, 1e-12, "p"), SL_OK, "%s", sl_errmsg());
        cr_assert_eq(sl_dist_check(q, V, 1e-12, "q"), SL_OK);
        beta[i] = sl_dist_beta(p, q, V);
    }
    sl_spec_config cfg = SL_SPEC_CONFIG_DEFAULT;
    sl_mc_plan *plan;
    cr_assert_eq(sl_mc_plan_alloc(&src, gamma, &cfg, &plan), SL_OK, "%s", sl_errmsg());
    sl_mc_prediction pred;
    cr_assert_eq(sl_mc_predict(plan, 1000, &pred), SL_OK);
    /* Tolerance 1e-12: the same sums of mins over the same renormalised doubles. */
    for (size_t i = 0; i < gamma; i++) cr_assert(fabs(pred.beta[i] - beta[i]) < 1e-12, "position %zu", i + 1);
    sl_mc_opts mo = {2000, 7, 1, NULL, NULL, 0};
    sl_mc_result mr;
    cr_assert_eq(sl_mc_run(plan, &mo, &mr), SL_OK, "%s", sl_errmsg());
    cr_assert_eq(mr.iterations, 2000);
    sl_mc_plan_free(plan);
    sl_log_mc_free(owner);
    cr_assert_eq(sl_log_mc_source(r, 19, 5, SL_MC_POSITIONAL, &owner, &src), SL_EINPUT);
    free(p), free(q);
    sl_log_close(r);
    rm_tmp();
}

/* Issue 17, defect 3: the readers refuse a distribution row that does not sum to 1 within
 * sl_log_row_sum_tol. That bound must never reject a row speclab writes: a pmf computed in double
 * and rounded to float16 (or float32) value by value. Checked here against the rounding itself, on
 * the hardest rows for it: the largest vocabulary of the shipped tokenizers (50257) with mass spread
 * evenly (every value subnormal in float16), with one token holding half, and a Dirichlet(0.05)
 * row; and rows that sum to 0, 2 or 1 - 10 * tol are refused. */
Test(log, row_sum_tolerance_covers_rounding_and_refuses_bad_rows)
{
    const size_t V = 50257;
    double *pd = malloc(V * sizeof *pd);
    float *p = malloc(V * sizeof *p), *q = malloc(V * sizeof *q);
    cr_assert(pd && p && q);
    gsl_rng *rng = sl_rng_alloc(17, 0, 0);
    for (int dt = 0; dt < 2; dt++) {
        sl_log_reader r;
        memset(&r, 0, sizeof r);
        r.path = "x.h5";
        r.meta.vocab_size = V;
        r.dist_type = dt ? SL_LOG_DIST_F16 : SL_LOG_DIST_F32;
        double tol = sl_log_row_sum_tol(&r);
        for (int kind = 0; kind < 3; kind++) {
            double s = 0;
            for (size_t x = 0; x < V; x++) {
                pd[x] = kind == 0 ? 1.0 : kind == 1 ? (x == 7 ? (double)(V - 1) : 1.0) : gsl_ran_gamma(rng, 0.05, 1);
                s += pd[x];
            }
            double stored = 0;
            for (size_t x = 0; x < V; x++) {
                float f = (float)(pd[x] / s);
                p[x] = dt ? sl_half_f16_to_f32(sl_half_f32_to_f16(f)) : f;
                q[x] = p[x];
                stored += p[x];
            }
            cr_assert_eq(sl_log_check_row_sums(&r, 0, 1, p, q), SL_OK, "type %d kind %d: %s", dt, kind, sl_errmsg());
            cr_assert(fabs(stored - 1) <= tol / 2, "type %d kind %d: |sum - 1| = %g, half the tolerance %g", dt, kind,
                      fabs(stored - 1), tol / 2);
        }
        const double bad[] = {0, 2, 1 - 10 * tol};
        for (int b = 0; b < 3; b++) {
            for (size_t x = 0; x < V; x++) q[x] = (float)(bad[b] / (double)V);
            cr_assert_eq(sl_log_check_row_sums(&r, 5, 1, p, q), SL_EINPUT, "type %d sum %g", dt, bad[b]);
            cr_assert(strstr(sl_errmsg(), "/distributions/q row 5 sums to"), "%s", sl_errmsg());
        }
    }
    gsl_rng_free(rng);
    free(pd), free(p), free(q);
}
