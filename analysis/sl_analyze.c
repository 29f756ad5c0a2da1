/* sl_analyze.c: streaming analysis of measure and run logs (see sl_analyze.h). */
#include "sl_analyze.h"
#include "sl_replay.h"

#include <math.h>
#include <immintrin.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "sl_common.h"
#include "sl_mpi.h"
#include "sl_stats.h"

void sl_analyze_opts_init(sl_analyze_opts *o)
{
    memset(o, 0, sizeof *o);
    o->gamma_max = 12;
    o->n_boot = 1000;
    o->ci_level = 0.95;
    o->seed = 1;
    o->n_lenience = 10;
    for (size_t i = 0; i < 10; i++) o->lenience[i] = 0.1 * (double)(i + 1);
    o->n_conf_bins = 10;
    o->n_hist_bins = 20;
    o->c = NAN;
    o->c_hat = NAN;
    o->policy_reps = 10;
    static const double pm[] = {0.1, 0.3, 0.5, 0.75, 0.9};
    o->n_pmin = sizeof pm / sizeof pm[0];
    memcpy(o->pmin, pm, sizeof pm);
    o->hf_start = 5;
    o->fast = 1;
}

void sl_analyze_result_free(sl_analyze_result *res)
{
    free(res->pol);
    res->pol = NULL;
}

static void note(sl_analyze_result *res, const char *s)
{
    if (res->n_notes < 8) snprintf(res->notes[res->n_notes++], sizeof res->notes[0], "%s", s);
}

int sl_analyze_boot_ratio(const double *num, const double *den, size_t n, size_t n_boot, double level, uint64_t seed,
                          double *est, double *lo, double *hi)
{
    double sn = 0, sd = 0;
    for (size_t i = 0; i < n; i++) sn += num[i], sd += den[i];
    *est = sd > 0 ? sn / sd : NAN;
    *lo = *hi = NAN;
    if (n < 2 || n_boot < 2 || !(sd > 0)) return SL_OK;
    double *v = malloc(n_boot * sizeof *v);
    gsl_rng *r = sl_rng_alloc(seed, SL_STREAM_BOOT, 0);
    if (!v || !r) {
        free(v);
        if (r) gsl_rng_free(r);
        return sl_fail(SL_EFAIL, "out of memory");
    }
    size_t m = 0;
    for (size_t b = 0; b < n_boot; b++) {
        sl_rng_reseed(r, seed, SL_STREAM_BOOT, b);
        double a = 0, d = 0;
        for (size_t i = 0; i < n; i++) {
            size_t j = gsl_rng_uniform_int(r, n);
            a += num[j], d += den[j];
        }
        if (d > 0) v[m++] = a / d;
    }
    if (m >= 2) sl_stats_percentile_ci(v, m, level, lo, hi);
    free(v);
    gsl_rng_free(r);
    return SL_OK;
}

/* ---- policy replay ---- */

static size_t min_z(size_t a, size_t b) { return a < b ? a : b; }

/* One iteration at t with g drafts (g <= n - 1 - t): returns tokens emitted. */
static size_t step(const uint8_t *accept, size_t t, size_t g, size_t draft_steps, const double *vtab, sl_replay_acc *acc)
{
    size_t k = 0;
    while (k < g && accept[t + k]) k++;
    acc->tokens += (double)(k + 1);
    acc->iterations += 1;
    acc->draft_steps += (double)draft_steps;
    acc->verify_cost += vtab[g];
    return k + 1;
}

void sl_replay_fixed(const uint8_t *accept, size_t n, size_t gamma, const double *vtab, sl_replay_acc *acc)
{
    for (size_t t = 0; t < n;) {
        size_t g = min_z(gamma, n - 1 - t);
        t += step(accept, t, g, g, vtab, acc);
    }
}

void sl_replay_oracle(const uint8_t *accept, size_t n, size_t gamma_max, double c, const double *vtab, double *C,
                      sl_replay_acc *acc)
{
    /* C[t]: least cost to emit positions t..n-1 knowing the pattern. From t, gamma = g <= run of
     * accepts r_t emits g + 1 tokens for g c + v(g + 1); drafting past the first rejection never
     * helps (it emits the same tokens for more cost). */
    C[n] = 0;
    size_t run = 0;
    for (size_t t = n; t-- > 0;) {
        run = accept[t] ? run + 1 : 0;
        size_t gmax = min_z(min_z(run, gamma_max), n - 1 - t);
        double best = INFINITY;
        for (size_t g = 0; g <= gmax; g++) {
            double v = sl_theory_iteration_cost((double)g, c, vtab[g]) + C[t + g + 1];
            if (v < best) best = v;
        }
        C[t] = best;
    }
    /* Walk the optimal choices forward to count iterations and draft steps. */
    for (size_t t = 0; t < n;) {
        size_t r = 0;
        while (t + r < n && accept[t + r] && r < gamma_max) r++;
        size_t gmax = min_z(r, n - 1 - t), gbest = 0;
        double best = INFINITY;
        for (size_t g = 0; g <= gmax; g++) {
            double v = sl_theory_iteration_cost((double)g, c, vtab[g]) + C[t + g + 1];
            if (v < best) best = v, gbest = g;
        }
        t += step(accept, t, gbest, gbest, vtab, acc);
    }
}

void sl_replay_pmin(const uint8_t *accept, const double *q_max, size_t n, size_t gamma_max, double p_min,
                    const double *vtab, sl_replay_acc *acc)
{
    for (size_t t = 0; t < n;) {
        size_t cap = min_z(gamma_max, n - 1 - t), g = 0;
        /* llama.cpp drafts token by token and stops before a token whose draft probability (the
         * top of the draft's distribution) is below p_min; that last draft step is still paid. */
        while (g < cap && q_max[t + g] >= p_min) g++;
        size_t steps = g + (g < cap ? 1 : 0);
        t += step(accept, t, g, steps, vtab, acc);
    }
}

void sl_replay_hf(const uint8_t *accept, size_t n, size_t gamma_max, int start, const double *vtab, sl_replay_acc *acc)
{
    long na = start < 1 ? 1 : start;
    for (size_t t = 0; t < n;) {
        size_t g = min_z(min_z((size_t)na, gamma_max), n - 1 - t);
        size_t emitted = step(accept, t, g, g, vtab, acc);
        /* transformers' "heuristic" schedule: +2 after a fully accepted draft, else -1 (min 1). */
        if (g > 0 && emitted == g + 1) na += 2;
        else na = na > 1 ? na - 1 : 1;
        if ((size_t)na > gamma_max) na = (long)gamma_max;
        t += emitted;
    }
}

double sl_analyze_oracle_iid(double alpha, size_t G, double c, const double *vtab)
{
    /* K = min(run of accepts, G): P(K = k) = alpha^k (1 - alpha) for k < G, P(K = G) = alpha^G. */
    double ek1 = 0, ek = 0, ev = 0, pk = 1;
    for (size_t k = 0; k <= G; k++) {
        double P = k < G ? pk * (1 - alpha) : pk;
        ek1 += P * (double)(k + 1);
        ek += P * (double)k;
        ev += P * vtab[k];
        pk *= alpha;
    }
    return ek1 / sl_theory_iteration_cost(ek, c, ev);
}

double sl_replay_latency(const double *beta, size_t n, size_t gamma, size_t answer, double c, const double *vtab,
                         gsl_rng *r)
{
    double cost = 0;
    size_t t = 0, emitted = 0;
    while (emitted < answer) {
        size_t g = min_z(gamma, answer - emitted - 1), k = 0;
        while (k < g && sl_rng_uniform53(r) < beta[(t + k) % n]) k++;
        cost += sl_theory_iteration_cost((double)g, c, vtab[g]);
        emitted += k + 1;
        t += k + 1;
    }
    return cost;
}

/* ---- distribution kernels ---- */

typedef struct {
    double beta, match, nonit, t0_ratio; /* t0_ratio = p(argmax q) / max p */
    double alpha_l[32];
} row_stats;

/* beta = sum min(p, q) in double, and whether the row holds a value that is not a probability
 * (NaN, negative or > 1): one AVX2 pass over the row, four double accumulators (the pass that
 * decides analyze's speed on a log of full distributions; tests/test_analyze.c checks it against
 * a naive double sum, tests/cli/log_badinput.sh every bad value in the vector loop and the tail). */
static double beta_kernel(const float *p, const float *q, size_t V, int *bad)
{
    const __m256 zero = _mm256_setzero_ps(), one = _mm256_set1_ps(1.0f);
    __m256d s0 = _mm256_setzero_pd(), s1 = s0, s2 = s0, s3 = s0;
    __m256 ok = _mm256_castsi256_ps(_mm256_set1_epi32(-1));
    size_t x = 0;
    for (; x + 16 <= V; x += 16) {
        __m256 a = _mm256_loadu_ps(p + x), b = _mm256_loadu_ps(q + x);
        __m256 c = _mm256_loadu_ps(p + x + 8), d = _mm256_loadu_ps(q + x + 8);
        ok = _mm256_and_ps(ok, _mm256_and_ps(_mm256_cmp_ps(a, zero, _CMP_GE_OQ), _mm256_cmp_ps(a, one, _CMP_LE_OQ)));
        ok = _mm256_and_ps(ok, _mm256_and_ps(_mm256_cmp_ps(b, zero, _CMP_GE_OQ), _mm256_cmp_ps(b, one, _CMP_LE_OQ)));
        ok = _mm256_and_ps(ok, _mm256_and_ps(_mm256_cmp_ps(c, zero, _CMP_GE_OQ), _mm256_cmp_ps(c, one, _CMP_LE_OQ)));
        ok = _mm256_and_ps(ok, _mm256_and_ps(_mm256_cmp_ps(d, zero, _CMP_GE_OQ), _mm256_cmp_ps(d, one, _CMP_LE_OQ)));
        __m256 m = _mm256_min_ps(a, b), n = _mm256_min_ps(c, d);
        s0 = _mm256_add_pd(s0, _mm256_cvtps_pd(_mm256_castps256_ps128(m)));
        s1 = _mm256_add_pd(s1, _mm256_cvtps_pd(_mm256_extractf128_ps(m, 1)));
        s2 = _mm256_add_pd(s2, _mm256_cvtps_pd(_mm256_castps256_ps128(n)));
        s3 = _mm256_add_pd(s3, _mm256_cvtps_pd(_mm256_extractf128_ps(n, 1)));
    }
    double lanes[4], beta;
    _mm256_storeu_pd(lanes, _mm256_add_pd(_mm256_add_pd(s0, s1), _mm256_add_pd(s2, s3)));
    beta = (lanes[0] + lanes[1]) + (lanes[2] + lanes[3]);
    int b = _mm256_movemask_ps(ok) != 0xff;
    for (; x < V; x++) {
        b |= !(p[x] >= 0 && p[x] <= 1) | !(q[x] >= 0 && q[x] <= 1);
        beta += p[x] < q[x] ? p[x] : q[x];
    }
    *bad = b;
    return beta;
}

/* Everything the log's full distributions give for one row (floats in, double sums); *bad as
 * beta_kernel's. */
static void row_kernel(const float *p, const float *q, size_t V, const double *inv_l, size_t nl, row_stats *s,
                       int *bad)
{
    double beta = beta_kernel(p, q, V, bad), match = 0, nonit = INFINITY;
    float pmax = -1, qmax = -1;
    size_t qarg = 0;
#pragma omp simd reduction(+ : match)
    for (size_t x = 0; x < V; x++) match += (double)p[x] * q[x];
    for (size_t x = 0; x < V; x++) {
        if (p[x] > pmax) pmax = p[x];
        if (q[x] > qmax) qmax = q[x], qarg = x;
        if (p[x] > 0) {
            double r = (double)q[x] / p[x];
            if (r < nonit) nonit = r;
        }
    }
    for (size_t j = 0; j < nl; j++) {
        double il = inv_l[j], al = 0;
#pragma omp simd reduction(+ : al)
        for (size_t x = 0; x < V; x++) {
            double a = p[x] * il, b = q[x];
            al += a < b ? a : b;
        }
        s->alpha_l[j] = al;
    }
    s->beta = beta;
    s->match = match;
    s->nonit = nonit;
    s->t0_ratio = pmax > 0 ? p[qarg] / pmax : 0;
}

typedef struct {
    const float *p, *q;
    size_t V;
    const double *inv_l;
    size_t nl;
    int beta_only;
    row_stats *rs;
    int *bad;
    size_t n;
} rows_job;

/* Rows 16i .. 16i+15 of the block. */
static void rows_one(void *ctx, size_t item, int tid)
{
    (void)tid;
    rows_job *j = ctx;
    for (size_t i = item * 16; i < j->n && i < item * 16 + 16; i++) {
        const float *pi = j->p + i * j->V, *qi = j->q + i * j->V;
        if (j->beta_only) j->rs[i].beta = beta_kernel(pi, qi, j->V, &j->bad[i]);
        else row_kernel(pi, qi, j->V, j->inv_l, j->nl, &j->rs[i], &j->bad[i]);
    }
}

typedef struct {
    sl_log_reader *r;
    size_t k0, ch, V, nl;
    const double *inv_l;
    int beta_only;
    row_stats *rs;
    int *bad;
    volatile long err_chunk; /* -1 = none */
} chunk_job;

/* Chunk k0 + item: decode (or map) it and compute every row's statistics. Each row's sums are
 * checked right before its statistics, while its 2 V floats are in L1 (a chunk of 50 rows at
 * V = 4096 is 1.6 MB): the check as a pass of its own over the chunk took as long as beta itself
 * (perf of the analyze benchmark's float32 pass, 2-vCPU Emerald Rapids VM). A row that fails sends
 * the chunk to the error path, which reads it again with the check (sl_log_dist_chunk): the same
 * message as a check of the whole chunk first. */
static void chunk_one(void *ctx, size_t item, int tid)
{
    chunk_job *j = ctx;
    const float *p, *q;
    size_t rows;
    if (sl_log_dist_chunk_unchecked(j->r, j->k0 + item, tid, &p, &q, &rows)) {
        j->err_chunk = (long)(j->k0 + item);
        return;
    }
    int sums_ok = 1;
    for (size_t i = 0; i < rows; i++) {
        size_t at = item * j->ch + i;
        const float *pi = p + i * j->V, *qi = q + i * j->V;
        sums_ok &= sl_log_dist_row_ok(j->r, pi, qi);
        if (j->beta_only) j->rs[at].beta = beta_kernel(pi, qi, j->V, &j->bad[at]);
        else row_kernel(pi, qi, j->V, j->inv_l, j->nl, &j->rs[at], &j->bad[at]);
    }
    if (!sums_ok) j->err_chunk = (long)(j->k0 + item);
}

/* What the pass keeps of one HDF5 chunk of rows: sums over its rows in row order, the largest
 * |beta - logged beta| and its first bad row (-1: none), as doubles (CHUNK_FIXED + 2 nl of them).
 * The chunks' sums are added in chunk order at the end, so the results depend neither on the
 * threads nor on the MPI ranks that share the chunks (analysis/MPI.md). */
enum { CS_BETA, CS_MATCH, CS_NONIT, CS_MAXDIFF, CS_BAD, CHUNK_FIXED };

static void chunk_sums(const row_stats *rs, const int *bad, const double *logged_beta, size_t first, size_t n,
                       const sl_analyze_opts *o, size_t nl, double *cs)
{
    memset(cs, 0, (CHUNK_FIXED + 2 * nl) * sizeof *cs);
    cs[CS_BAD] = -1;
    for (size_t i = 0; i < n; i++) {
        if (bad[i]) {
            cs[CS_BAD] = (double)(first + i);
            return;
        }
        cs[CS_BETA] += rs[i].beta;
        if (o->beta_only) continue;
        cs[CS_MATCH] += rs[i].match;
        cs[CS_NONIT] += rs[i].nonit;
        cs[CS_MAXDIFF] = fmax(cs[CS_MAXDIFF], fabs(rs[i].beta - logged_beta[i]));
        for (size_t j = 0; j < nl; j++) {
            cs[CHUNK_FIXED + j] += rs[i].alpha_l[j];
            cs[CHUNK_FIXED + nl + j] += rs[i].t0_ratio >= o->lenience[j] ? 1 : 0;
        }
    }
}

static int dists_pass(sl_log_reader *r, const sl_analyze_opts *o, sl_analyze_result *res)
{
    size_t V = sl_log_meta_of(r)->vocab_size, total = sl_log_n_rows(r), ch = sl_log_dist_rows_per_chunk(r);
    int nt = o->threads > 0 ? o->threads : omp_get_max_threads();
    int direct = o->fast && sl_log_dist_direct(r);
    size_t nl = o->beta_only ? 0 : o->n_lenience, stride = CHUNK_FIXED + 2 * nl;
    /* The chunks are the items: this rank's share of them (all of them serially). */
    size_t n_chunks = (total + ch - 1) / ch, c_lo, c_hi;
    sl_mpi_share(n_chunks, &c_lo, &c_hi);
    const size_t r_lo = c_lo * ch, r_hi = c_hi * ch < total ? c_hi * ch : total;
    /* Direct access decodes each chunk into its thread's scratch (no block buffers), so blocks can be
     * larger: 16 chunks a thread instead of 4. */
    size_t block = ch * (size_t)((direct ? 16 : 4) * nt);
    float *p = direct ? NULL : malloc(block * V * sizeof *p), *q = direct ? NULL : malloc(block * V * sizeof *q);
    row_stats *rs = malloc(block * sizeof *rs);
    int *bad = malloc(block * sizeof *bad);
    double *cs = calloc(n_chunks ? n_chunks * stride : 1, sizeof *cs); /* (n_chunks, stride) */
    sl_log_pos_block pb = {0};
    int rc = (direct || (p && q)) && rs && bad && cs ? SL_OK : sl_fail(SL_EFAIL, "out of memory");
    if (!rc && !o->beta_only) rc = sl_log_pos_block_alloc(&pb, block);
    double inv_l[32];
    for (size_t j = 0; j < nl; j++) inv_l[j] = 1 / o->lenience[j];
    if (!rc && direct) rc = sl_log_dist_prepare(r, nt);
    for (size_t first = r_lo; first < r_hi && !rc; first += block) {
        size_t n = r_hi - first < block ? r_hi - first : block;
        if (!o->beta_only) rc = sl_log_read_positions(r, first, &pb);
        if (rc) break;
        if (direct) { /* read, decode and compute chunk by chunk on nt threads */
            chunk_job job = {r, first / ch, ch, V, nl, inv_l, o->beta_only, rs, bad, -1};
            sl_log_parallel((n + ch - 1) / ch, nt, chunk_one, &job);
            if (job.err_chunk >= 0) {
                const float *a, *b2;
                size_t nr;
                rc = sl_log_dist_chunk(r, (size_t)job.err_chunk, 0, &a, &b2, &nr); /* the message, on this thread */
                if (!rc) rc = sl_fail(SL_EFAIL, "decoding a distribution chunk failed");
                break;
            }
        } else {
            rc = sl_log_read_dists(r, first, n, p, q, o->fast, nt);
            if (rc) break;
            rows_job job = {p, q, V, inv_l, nl, o->beta_only, rs, bad, n};
            sl_log_parallel((n + 15) / 16, nt, rows_one, &job);
        }
        for (size_t i = 0; i < n; i += ch) {
            size_t k = (first + i) / ch, m = n - i < ch ? n - i : ch;
            chunk_sums(rs + i, bad + i, pb.beta ? pb.beta + i : NULL, first + i, m, o, nl, cs + k * stride);
            if (cs[k * stride + CS_BAD] >= 0) {
                rc = sl_fail(SL_EINPUT, "log: /distributions row %.0f holds a NaN, negative or > 1 probability",
                             cs[k * stride + CS_BAD]);
                break;
            }
        }
    }
    /* MPI build: every rank's chunks, on every rank (the lowest failing rank's error otherwise). */
    rc = sl_mpi_status(rc);
    if (!rc) sl_mpi_allgather_share(cs, n_chunks, stride * sizeof *cs, n_chunks * stride * sizeof *cs);
    if (!rc && total > 0) {
        double sb = 0, sm = 0, sn = 0, maxdiff = 0, sl[32] = {0}, st0[32] = {0};
        for (size_t k = 0; k < n_chunks; k++) { /* in chunk order */
            const double *c = cs + k * stride;
            sb += c[CS_BETA];
            sm += c[CS_MATCH];
            sn += c[CS_NONIT];
            maxdiff = fmax(maxdiff, c[CS_MAXDIFF]);
            for (size_t j = 0; j < nl; j++) {
                sl[j] += c[CHUNK_FIXED + j];
                st0[j] += c[CHUNK_FIXED + nl + j];
            }
        }
        res->have_dists = 1;
        res->beta_dists = sb / (double)total;
        res->match = sm / (double)total;
        res->nonit = sn / (double)total;
        res->beta_dists_maxdiff = maxdiff;
        res->n_len = nl;
        /* At temperature 0 the standardised p and q are one-hot: every lenience curve is flat at
         * beta and measures nothing about lenience; the table says so instead of drawing it. */
        const int t0_log = sl_log_meta_of(r)->sampling.temperature == 0;
        for (size_t j = 0; j < nl; j++) {
            res->lenience[j] = o->lenience[j];
            res->alpha_l[j] = t0_log ? NAN : sl[j] / (double)total;
            res->alpha_t0[j] = t0_log ? NAN : st0[j] / (double)total;
        }
        if (t0_log)
            note(res, "a temperature-0 log: p and q are one-hot, so every lenience curve is flat at beta (not shown); "
                      "measure at T > 0 to see lenience");
    }
    free(p);
    free(q);
    free(rs);
    free(bad);
    free(cs);
    if (pb.cap) sl_log_pos_block_free(&pb);
    return rc;
}

/* ---- cost set-up ---- */

static int setup_costs(const sl_analyze_opts *o, const sl_log_costs *lc, sl_theory_vcost *own, const sl_theory_vcost **vc,
                       double *vtab, size_t *G, sl_analyze_result *res)
{
    *vc = o->vc;
    res->c_deploy = o->c;
    res->c_source = isfinite(o->c) ? "--c" : "none";
    if (!isfinite(o->c) && lc && lc->count > 0) {
        res->c_deploy = lc->c;
        res->c_source = "run log";
    }
    if (!o->vc && lc && lc->count > 0) {
        int rc = sl_theory_vcost_table(own, lc->n, lc->v, lc->count);
        if (rc) return rc;
        *vc = own;
    }
    vtab[0] = 1; /* gamma = 0: one plain target step, the unit of cost */
    for (size_t g = 1; g <= *G; g++) {
        int rc = sl_theory_vcost_eval(*vc, (long)g + 1, &vtab[g]);
        if (rc && g > 1 && (*vc)->kind == SL_VCOST_TABLE) {
            /* A measured table covers the gammas that were run: search only those. */
            char msg[160];
            snprintf(msg, sizeof msg, "the v(n) table ends at n = %zu: gamma is searched up to %zu", g, g - 1);
            note(res, msg);
            sl_err_clear();
            *G = g - 1;
            break;
        }
        if (rc) return rc;
    }
    res->n_cs = 0;
    if (isfinite(res->c_deploy)) res->cs[res->n_cs++] = res->c_deploy;
    static const double grid[] = {0, 0.01, 0.05, 0.1};
    for (size_t i = 0; i < 4; i++) {
        int dup = 0;
        for (size_t j = 0; j < res->n_cs; j++) dup |= res->cs[j] == grid[i];
        if (!dup) res->cs[res->n_cs++] = grid[i];
    }
    return SL_OK;
}

static void quantiles(sl_analyze_result *res, uint64_t total)
{
    static const double qp[9] = {0.01, 0.05, 0.1, 0.25, 0.5, 0.75, 0.9, 0.95, 0.99};
    for (int k = 0; k < 9; k++) {
        res->quantile_p[k] = qp[k];
        res->quantile[k] = NAN;
        if (!total) continue;
        uint64_t need = (uint64_t)ceil(qp[k] * (double)total), cum = 0;
        for (size_t b = 0; b < SL_ANALYZE_QBINS; b++) {
            cum += res->qhist[b];
            if (cum >= need && cum > 0) {
                res->quantile[k] = ((double)b + 0.5) / SL_ANALYZE_QBINS;
                break;
            }
        }
    }
}

static void add_beta(sl_analyze_result *res, const sl_analyze_opts *o, double b)
{
    size_t h = (size_t)(b * (double)o->n_hist_bins), k = (size_t)(b * SL_ANALYZE_QBINS);
    res->hist[h >= o->n_hist_bins ? o->n_hist_bins - 1 : h]++;
    res->qhist[k >= SL_ANALYZE_QBINS ? SL_ANALYZE_QBINS - 1 : k]++;
}

/* ---- measure logs ---- */

typedef struct {
    size_t ns, G, nc, npm;
    double *n, *sumb;  /* (ns) */
    double *W;         /* (ns, G) windows of length gamma = k + 1: max(0, n - gamma + 1) */
    double *S;         /* (ns, G) over those windows, sum of prod_{i<=k} beta_{t+i} (acceptance at position k + 1) */
    double *E;         /* (ns, G) over those windows, sum of sum_{j<=k} prod_{i<=j} beta_{t+i} (E[N] - 1 at gamma k + 1) */
    sl_replay_acc *fixed;  /* (G) */
    sl_replay_acc *oracle; /* (nc) */
    sl_replay_acc *pmin;   /* (npm) */
    sl_replay_acc hf;
} mstate;

static void process_sequence(mstate *m, size_t s, const double *beta, const double *qmax, size_t n, uint8_t *acc_pat,
                             double *C, const sl_analyze_opts *o, const sl_analyze_result *res, const double *vtab,
                             gsl_rng *rng)
{
    size_t G = m->G;
    double sb = 0;
    for (size_t t = 0; t < n; t++) sb += beta[t];
    m->n[s] = (double)n;
    m->sumb[s] = sb;
    /* Every window that fits, for every gamma: R[j] runs over t of prod_{i<=j} beta_{t+i}; once t
     * reaches n - gamma, every window of length gamma (starts 0..n - gamma) is in, so the sums for
     * that gamma are read off. O(n G). */
    double *S = m->S + s * G, *E = m->E + s * G, *W = m->W + s * G, R[SL_ANALYZE_GMAX] = {0};
    for (size_t t = 0; t < n; t++) {
        double prod = 1;
        for (size_t j = 0; j < G && t + j < n; j++) {
            prod *= beta[t + j];
            R[j] += prod;
        }
        size_t gam = n - t; /* the gamma whose last window starts at t */
        if (gam >= 1 && gam <= G) {
            double e = 0;
            for (size_t j = 0; j < gam; j++) e += R[j];
            S[gam - 1] = R[gam - 1];
            E[gam - 1] = e;
            W[gam - 1] = (double)(t + 1);
        }
    }
    /* gamma > n: no window (the arrays start zeroed) */
    if (n == 0) return;
    for (size_t rep = 0; rep < o->policy_reps; rep++) {
        /* Common random numbers: every policy sees the same acceptance pattern. */
        sl_rng_reseed(rng, o->seed, SL_STREAM_ACCEPT, (uint64_t)s * o->policy_reps + rep);
        for (size_t t = 0; t < n; t++) acc_pat[t] = sl_rng_uniform53(rng) < beta[t];
        for (size_t g = 1; g <= G; g++) sl_replay_fixed(acc_pat, n, g, vtab, &m->fixed[g - 1]);
        for (size_t i = 0; i < m->nc; i++) sl_replay_oracle(acc_pat, n, G, res->cs[i], vtab, C, &m->oracle[i]);
        for (size_t i = 0; i < m->npm; i++) sl_replay_pmin(acc_pat, qmax, n, G, o->pmin[i], vtab, &m->pmin[i]);
        sl_replay_hf(acc_pat, n, G, o->hf_start, vtab, &m->hf);
    }
}

static void add_policy(sl_analyze_result *res, const char *name, double param, double c, const sl_replay_acc *a)
{
    sl_analyze_policy *p = &res->pol[res->n_pol++];
    p->policy = name;
    p->param = param;
    p->c = c;
    p->tokens = a->tokens;
    p->iterations = a->iterations;
    p->draft_steps = a->draft_steps;
    p->verify_cost = a->verify_cost;
    p->cost = sl_theory_iteration_cost(a->draft_steps, c, a->verify_cost);
    p->walltime_factor = p->cost > 0 ? a->tokens / p->cost : NAN;
    p->mean_gamma = a->iterations > 0 ? a->draft_steps / a->iterations : NAN;
}

static int analyze_measure(sl_log_reader *r, const sl_analyze_opts *o, sl_analyze_result *res, const double *vtab)
{
    size_t G = o->gamma_max, ns = sl_log_n_sequences(r), total = sl_log_n_rows(r);
    sl_log_seq *seqs = NULL;
    int rc = sl_log_sequences(r, &seqs);
    if (rc) return rc;
    size_t maxlen = 1;
    for (size_t s = 0; s < ns; s++)
        if ((size_t)seqs[s].n_rows > maxlen) maxlen = (size_t)seqs[s].n_rows;
    mstate m;
    memset(&m, 0, sizeof m);
    m.ns = ns, m.G = G, m.nc = res->n_cs, m.npm = o->n_pmin;
    m.n = calloc(ns + 1, sizeof *m.n);
    m.sumb = calloc(ns + 1, sizeof *m.sumb);
    m.W = calloc((ns + 1) * G, sizeof *m.W);
    m.S = calloc((ns + 1) * G, sizeof *m.S);
    m.E = calloc((ns + 1) * G, sizeof *m.E);
    m.fixed = calloc(G, sizeof *m.fixed);
    m.oracle = calloc(m.nc, sizeof *m.oracle);
    m.pmin = calloc(m.npm + 1, sizeof *m.pmin);
    double *beta = calloc(maxlen, sizeof *beta), *qmax = calloc(maxlen, sizeof *qmax), *C = malloc((maxlen + 1) * sizeof *C);
    uint8_t *pat = malloc(maxlen);
    double *acc_p = malloc(maxlen * sizeof *acc_p); /* min(1, q/p) of the logged tokens, one sequence */
    gsl_rng *rng = sl_rng_alloc(o->seed, SL_STREAM_ACCEPT, 0);
    sl_log_pos_block b = {0};
    sl_replay_seqs rs;
    if (!m.n || !m.sumb || !m.W || !m.S || !m.E || !m.fixed || !m.oracle || !m.pmin || !beta || !qmax || !C || !pat || !rng ||
        !acc_p)
        rc = sl_fail(SL_EFAIL, "out of memory");
    int rs_ok = !rc && !sl_replay_seqs_init(&rs, G);
    if (rs_ok) rs.drop_rows = 1; /* only the per-sequence sums: memory stays O(sequences x G) */
    if (!rc && !rs_ok) rc = SL_EFAIL;
    if (!rc) rc = sl_log_pos_block_alloc(&b, 4096);
    const char *path = "log";
    size_t cur = 0, len = 0;
    double sd = 0, sep = 0, seq_ = 0, sqm = 0, dmax = 0;
    uint64_t nrows = 0;
    while (!rc && cur < ns && seqs[cur].n_rows == 0) {
        process_sequence(&m, cur++, beta, qmax, 0, pat, C, o, res, vtab, rng);
        rc = sl_replay_seqs_add(&rs, acc_p, 0);
    }
    for (size_t first = 0; !rc && first < total; first += b.n) {
        rc = sl_log_read_positions(r, first, &b);
        if (rc || b.n == 0) break;
        for (size_t i = 0; i < b.n && !rc; i++) {
            size_t row = first + i;
            double be = b.beta[i], qm = b.q_max[i];
            if (!(be >= 0 && be <= 1 + 1e-9) || !(qm >= 0 && qm <= 1 + 1e-9) || !(b.d_lk[i] >= 0 && b.d_lk[i] <= 1 + 1e-9)) {
                rc = sl_fail(SL_EINPUT, "%s: /positions row %zu: beta %g, d_lk %g, q_max %g; expected probabilities in [0, 1]",
                             path, row, be, b.d_lk[i], qm);
                break;
            }
            if (cur >= ns || b.sequence[i] != seqs[cur].sequence || (size_t)b.position[i] != len) {
                rc = sl_fail(SL_EINPUT, "%s: /positions row %zu (sequence %d, position %d) does not follow /sequences", path,
                             row, b.sequence[i], b.position[i]);
                break;
            }
            if (!(b.p_token[i] > 0 && b.p_token[i] <= 1 + 1e-9) || !(b.q_token[i] >= 0 && b.q_token[i] <= 1 + 1e-9)) {
                rc = sl_fail(SL_EINPUT, "%s: /positions row %zu: p_token %g, q_token %g; expected p in (0, 1], q in [0, 1]",
                             path, row, b.p_token[i], b.q_token[i]);
                break;
            }
            if (be > 1) be = 1;
            add_beta(res, o, be);
            size_t cb = (size_t)(qm * (double)o->n_conf_bins);
            if (cb >= o->n_conf_bins) cb = o->n_conf_bins - 1;
            res->conf_count[cb]++;
            res->conf_beta[cb] += be;
            sd += b.d_lk[i], sep += b.entropy_p[i], seq_ += b.entropy_q[i], sqm += qm;
            double dd = fabs(b.d_lk[i] - (1 - be));
            if (dd > dmax) dmax = dd;
            nrows++;
            beta[len] = be;
            qmax[len] = qm;
            acc_p[len] = sl_replay_accept_prob(b.p_token[i], b.q_token[i]);
            len++;
            while (!rc && cur < ns && len == (size_t)seqs[cur].n_rows) {
                process_sequence(&m, cur, beta, qmax, len, pat, C, o, res, vtab, rng);
                rc = sl_replay_seqs_add(&rs, acc_p, len);
                cur++;
                len = 0;
            }
        }
    }
    if (!rc && nrows != total) rc = sl_fail(SL_EINPUT, "%s: read %llu of %zu rows", path, (unsigned long long)nrows, total);
    if (!rc) {
        res->n_positions = total;
        res->d_lk_mean = total ? sd / (double)total : NAN;
        res->entropy_p_mean = total ? sep / (double)total : NAN;
        res->entropy_q_mean = total ? seq_ / (double)total : NAN;
        res->q_max_mean = total ? sqm / (double)total : NAN;
        res->dlk_identity_max = dmax;
        for (size_t k = 0; k < o->n_conf_bins; k++)
            res->conf_beta[k] = res->conf_count[k] ? res->conf_beta[k] / (double)res->conf_count[k] : NAN;
        quantiles(res, nrows);
        rc = sl_analyze_boot_ratio(m.sumb, m.n, ns, o->n_boot, o->ci_level, o->seed, &res->alpha, &res->alpha_lo,
                                   &res->alpha_hi);
    }
    if (!rc) { /* replay windows: U_k and E[N] over every window that fits each gamma, and their bootstrap */
        double W[SL_ANALYZE_GMAX] = {0}, U[SL_ANALYZE_GMAX] = {0}, Es[SL_ANALYZE_GMAX] = {0};
        for (size_t s = 0; s < ns; s++)
            for (size_t k = 0; k < G; k++) W[k] += m.W[s * G + k], U[k] += m.S[s * G + k], Es[k] += m.E[s * G + k];
        res->n_windows = (size_t)W[0]; /* windows of length 1: every row */
        if (W[0] == 0) note(res, "the log has no positions: replay tables are empty");
        else if (W[G - 1] == 0) note(res, "no sequence is as long as gamma_max: the replay of the longest gammas is empty");
        double c = isfinite(res->c_deploy) ? res->c_deploy : 0;
        for (size_t k = 0; k < G; k++) {
            U[k] = W[k] > 0 ? U[k] / W[k] : NAN;
            res->uncond[k] = U[k];
            res->cond[k] = k == 0 ? U[0] : U[k - 1] > 0 ? U[k] / U[k - 1] : NAN;
            res->en_replay[k] = W[k] > 0 ? 1 + Es[k] / W[k] : NAN;
            res->sp[k] = res->en_replay[k] / sl_theory_iteration_cost((double)(k + 1), c, vtab[k + 1]);
            sl_theory_expected_tokens(res->alpha, (int)k + 1, &res->en_iid[k]);
            res->en_lo[k] = res->en_hi[k] = res->sp_lo[k] = res->sp_hi[k] = NAN;
        }
        if (W[0] > 0 && ns >= 2 && o->n_boot >= 2) {
            double *bv = malloc(o->n_boot * G * sizeof *bv), *col = malloc(o->n_boot * sizeof *col);
            if (!bv || !col) rc = sl_fail(SL_EFAIL, "out of memory");
            for (size_t bb = 0; !rc && bb < o->n_boot; bb++) {
                sl_rng_reseed(rng, o->seed, SL_STREAM_BOOT, bb);
                double w[SL_ANALYZE_GMAX] = {0}, e[SL_ANALYZE_GMAX] = {0};
                for (size_t i = 0; i < ns; i++) {
                    size_t jj = gsl_rng_uniform_int(rng, ns);
                    for (size_t k = 0; k < G; k++) w[k] += m.W[jj * G + k], e[k] += m.E[jj * G + k];
                }
                for (size_t k = 0; k < G; k++) bv[bb * G + k] = w[k] > 0 ? 1 + e[k] / w[k] : NAN;
            }
            for (size_t k = 0; !rc && k < G; k++) {
                size_t cnt = 0;
                for (size_t bb = 0; bb < o->n_boot; bb++)
                    if (isfinite(bv[bb * G + k])) col[cnt++] = bv[bb * G + k];
                if (cnt < 2) continue;
                sl_stats_percentile_ci(col, cnt, o->ci_level, &res->en_lo[k], &res->en_hi[k]);
                double den = sl_theory_iteration_cost((double)(k + 1), c, vtab[k + 1]);
                res->sp_lo[k] = res->en_lo[k] / den;
                res->sp_hi[k] = res->en_hi[k] / den;
            }
            free(bv);
            free(col);
        }
    }
    if (!rc && rs.n_seq == ns && ns > 0) { /* the sequential replay: tokens per iteration with a CI over sequences */
        res->have_seq = 1;
        for (size_t k = 0; k < G; k++) {
            res->en_seq[k] = sl_replay_tokens_per_iteration(&rs, k + 1);
            res->alpha_seq[k] = sl_replay_alpha(&rs, k + 1);
            res->en_seq_lo[k] = res->en_seq_hi[k] = NAN;
        }
        if (ns >= 2 && o->n_boot >= 2) {
            double *bv = malloc(o->n_boot * G * sizeof *bv), *col = malloc(o->n_boot * sizeof *col);
            if (!bv || !col) rc = sl_fail(SL_EFAIL, "out of memory");
            if (!rc) rc = sl_replay_boot(&rs, o->n_boot, o->seed, bv);
            for (size_t k = 0; !rc && k < G; k++) {
                size_t cnt = 0;
                for (size_t bb = 0; bb < o->n_boot; bb++)
                    if (isfinite(bv[bb * G + k])) col[cnt++] = bv[bb * G + k];
                if (cnt >= 2) sl_stats_percentile_ci(col, cnt, o->ci_level, &res->en_seq_lo[k], &res->en_seq_hi[k]);
            }
            free(bv);
            free(col);
        }
    }
    if (!rc && o->policy_reps > 0 && res->n_windows > 0) { /* policies */
        res->pol = calloc(G + m.nc * (3 + m.npm) + 8, sizeof *res->pol);
        if (!res->pol) rc = sl_fail(SL_EFAIL, "out of memory");
        for (size_t ci = 0; !rc && ci < m.nc; ci++) {
            double c = res->cs[ci], best = -1;
            int bg = 0;
            for (size_t g = 1; g <= G; g++) {
                sl_replay_acc *a = &m.fixed[g - 1];
                double f = a->tokens / sl_theory_iteration_cost(a->draft_steps, c, a->verify_cost);
                if (f > best) best = f, bg = (int)g;
            }
            if (bg < 1) continue; /* nothing was replayed */
            res->best_fixed[ci] = best;
            res->best_fixed_gamma[ci] = bg;
            add_policy(res, "fixed_best", bg, c, &m.fixed[bg - 1]);
            add_policy(res, "oracle", NAN, c, &m.oracle[ci]);
            for (size_t i = 0; i < m.npm; i++) add_policy(res, "p_min", o->pmin[i], c, &m.pmin[i]);
            add_policy(res, "hf_schedule", o->hf_start, c, &m.hf);
        }
    }
    free(seqs);
    free(m.n), free(m.sumb), free(m.W), free(m.S), free(m.E), free(m.fixed), free(m.oracle), free(m.pmin);
    free(beta), free(qmax), free(C), free(pat), free(acc_p);
    if (rs_ok) sl_replay_seqs_free(&rs);
    if (rng) gsl_rng_free(rng);
    if (b.cap) sl_log_pos_block_free(&b);
    return rc;
}

/* ---- run logs ---- */

static int analyze_run(sl_log_reader *r, const sl_analyze_opts *o, sl_analyze_result *res)
{
    size_t G = o->gamma_max, ns = sl_log_n_sequences(r);
    sl_log_seq *seqs = NULL;
    int rc = sl_log_sequences(r, &seqs);
    if (rc) return rc;
    double *sb = calloc(ns + 1, sizeof *sb), *nb = calloc(ns + 1, sizeof *nb), *acc = calloc(ns + 1, sizeof *acc),
           *tested = calloc(ns + 1, sizeof *tested);
    double en_sum[SL_ANALYZE_GMAX] = {0};
    sl_log_draft_block db = {0};
    sl_log_iter_block ib = {0};
    if (!sb || !nb || !acc || !tested) rc = sl_fail(SL_EFAIL, "out of memory");
    if (!rc) rc = sl_log_draft_block_alloc(&db, 4096);
    if (!rc) rc = sl_log_iter_block_alloc(&ib, 4096);
    /* sequence index by id (sequences are logged in order; ids are their indices in practice) */
    size_t cur = 0;
    for (size_t first = 0; !rc; first += db.n) {
        rc = sl_log_read_drafts(r, first, &db);
        if (rc || db.n == 0) break;
        for (size_t i = 0; i < db.n; i++) {
            while (cur < ns && seqs[cur].sequence != db.sequence[i]) cur++;
            if (cur >= ns) {
                rc = sl_fail(SL_EINPUT, "log: /drafts row %zu names sequence %d, not in /sequences order", first + i, db.sequence[i]);
                break;
            }
            double be = db.beta[i];
            if (isnan(be)) continue;
            if (!(be >= 0 && be <= 1 + 1e-9)) {
                rc = sl_fail(SL_EINPUT, "log: /drafts/beta row %zu is %g; expected [0, 1]", first + i, be);
                break;
            }
            if (be > 1) be = 1;
            sb[cur] += be;
            nb[cur] += 1;
            add_beta(res, o, be);
        }
    }
    cur = 0;
    double emitted = 0, ds = 0, vs = 0, ss = 0;
    uint64_t iters = 0;
    for (size_t first = 0; !rc; first += ib.n) {
        rc = sl_log_read_iterations(r, first, &ib);
        if (rc || ib.n == 0) break;
        for (size_t i = 0; i < ib.n; i++) {
            while (cur < ns && seqs[cur].sequence != ib.sequence[i]) cur++;
            int g = ib.gamma[i], a = ib.accepted[i];
            if (cur >= ns || a < 0 || g < 0 || a > g || ib.emitted[i] != a + 1) {
                rc = sl_fail(SL_EINPUT, "log: /iterations row %zu is inconsistent (gamma %d, accepted %d, emitted %d)", first + i,
                             g, a, ib.emitted[i]);
                break;
            }
            acc[cur] += a;
            tested[cur] += a < g ? a + 1 : g;
            for (int k = 1; k <= g && k <= (int)G; k++) {
                res->obs_offered[k - 1]++;
                if (a >= k - 1) res->obs_reached[k - 1]++;
                if (a >= k) res->obs_accepted[k - 1]++;
            }
            if (g >= 1 && g <= (int)G) {
                en_sum[g - 1] += ib.emitted[i];
                res->n_observed[g - 1]++;
            }
            emitted += ib.emitted[i];
            ds += ib.draft_s[i], vs += ib.verify_s[i], ss += ib.sample_s[i];
            iters++;
        }
    }
    if (!rc) {
        res->n_iterations = iters;
        res->n_positions = sl_log_n_drafts(r);
        rc = sl_analyze_boot_ratio(sb, nb, ns, o->n_boot, o->ci_level, o->seed, &res->alpha, &res->alpha_lo, &res->alpha_hi);
    }
    if (!rc)
        rc = sl_analyze_boot_ratio(acc, tested, ns, o->n_boot, o->ci_level, o->seed + 1, &res->accept_rate, &res->accept_lo,
                                   &res->accept_hi);
    if (!rc) {
        quantiles(res, (uint64_t)res->n_positions);
        res->mean_emitted = iters ? emitted / (double)iters : NAN;
        res->draft_s = iters ? ds / (double)iters : NAN;
        res->verify_s = iters ? vs / (double)iters : NAN;
        res->sample_s = iters ? ss / (double)iters : NAN;
        double tok[2] = {0, 0}, wall[2] = {0, 0};
        for (size_t s = 0; s < ns; s++) {
            int md = seqs[s].mode == 1;
            tok[md] += (double)seqs[s].n_generated;
            wall[md] += seqs[s].wall_s;
        }
        res->spec_tokens_per_s = wall[0] > 0 ? tok[0] / wall[0] : NAN;
        res->base_tokens_per_s = wall[1] > 0 ? tok[1] / wall[1] : NAN;
        if (sl_log_meta_of(r)->gammas[0]) { /* a sweep: speculative decodes at several gammas */
            char buf[256];
            snprintf(buf, sizeof buf,
                     "a sweep over gamma %.60s: acceptance pools every gamma; the speedup of each gamma is in `speclab "
                     "run`'s sweep table and in `speclab recommend`",
                     sl_log_meta_of(r)->gammas);
            note(res, buf);
            res->spec_tokens_per_s = NAN;
        }
        for (size_t k = 0; k < G; k++) {
            res->obs_uncond[k] = res->obs_offered[k] ? (double)res->obs_accepted[k] / (double)res->obs_offered[k] : NAN;
            res->obs_cond[k] = res->obs_reached[k] ? (double)res->obs_accepted[k] / (double)res->obs_reached[k] : NAN;
            res->en_observed[k] = res->n_observed[k] ? en_sum[k] / (double)res->n_observed[k] : NAN;
            sl_theory_expected_tokens(res->alpha, (int)k + 1, &res->en_iid[k]);
            res->en_replay[k] = res->en_lo[k] = res->en_hi[k] = NAN;
            res->uncond[k] = res->cond[k] = NAN;
        }
    }
    free(seqs), free(sb), free(nb), free(acc), free(tested);
    if (db.cap) sl_log_draft_block_free(&db);
    if (ib.cap) sl_log_iter_block_free(&ib);
    return rc;
}

/* Walltime and operation factors, optimal gamma and Corollary 3.9 for every c, through sl_theory. */
/* The best gamma of factors f (G, index gamma - 1; NaN = not available) as sl_theory's optimum
 * reports it: the smallest gamma within SL_THEORY_TIE_RTOL of the largest factor; 0 (plain
 * decoding, factor 1) when that factor is <= 1; at_cap when gamma G is among the ties. */
static void best_gamma(const double *f, size_t G, int *gamma, double *factor, int *at_cap)
{
    size_t best = 0;
    for (size_t g = 1; g <= G; g++)
        if (isfinite(f[g - 1]) && (!best || f[g - 1] > f[best - 1])) best = g;
    *gamma = 0, *factor = best ? 1 : NAN, *at_cap = 0;
    if (!best) return;
    double floor_tie = f[best - 1] * (1 - SL_THEORY_TIE_RTOL);
    size_t first = best;
    for (size_t g = 1; g <= G; g++)
        if (isfinite(f[g - 1]) && f[g - 1] >= floor_tie) {
            if (g < first) first = g;
            if (g == G) *at_cap = 1;
        }
    if (f[best - 1] > 1) *gamma = (int)first, *factor = f[first - 1];
}

static int compute_factors(const sl_analyze_opts *o, sl_analyze_result *res, const sl_theory_vcost *vc, const double *vtab)
{
    size_t G = o->gamma_max;
    memcpy(res->vtab, vtab, (G + 1) * sizeof *vtab);
    res->have_replay = res->kind == SL_LOG_MEASURE && res->n_windows > 0;
    if (!isfinite(res->alpha)) return SL_OK;
    for (size_t ci = 0; ci < res->n_cs; ci++) {
        double c = res->cs[ci], ch = isfinite(o->c_hat) ? o->c_hat : c;
        res->c_hat[ci] = ch;
        for (size_t g = 1; g <= G; g++) {
            int rc = sl_theory_walltime_factor(res->alpha, (int)g, c, &res->f38[ci][g - 1]);
            if (!rc) rc = sl_theory_walltime_factor_v(res->alpha, (int)g, c, vc, &res->fv[ci][g - 1]);
            if (!rc) rc = sl_theory_ops_factor(res->alpha, (int)g, ch, &res->fops[ci][g - 1]);
            if (rc) return rc;
            /* The window replay's E[N] at gamma g comes from the windows of length g alone. */
            res->frep[ci][g - 1] =
                res->have_replay ? res->en_replay[g - 1] / sl_theory_iteration_cost((double)g, c, vtab[g]) : NAN;
            res->fseq[ci][g - 1] =
                res->have_seq ? res->en_seq[g - 1] / sl_theory_iteration_cost((double)g, c, res->vtab[g]) : NAN;
        }
        int cap_unused;
        best_gamma(res->fseq[ci], G, &res->opt_seq[ci], &res->optf_seq[ci], &cap_unused);
        sl_theory_optimum op;
        int rc = sl_theory_optimal_gamma(res->alpha, c, vc, (int)G, &op);
        if (rc) return rc;
        res->opt_iid[ci] = op.gamma_opt, res->optf_iid[ci] = op.factor_opt, res->opt_iid_cap[ci] = op.at_cap;
        sl_theory_optimum_free(&op);
        res->opt_rep[ci] = 0, res->optf_rep[ci] = NAN, res->opt_rep_cap[ci] = 0;
        if (res->have_replay) best_gamma(res->frep[ci], G, &res->opt_rep[ci], &res->optf_rep[ci], &res->opt_rep_cap[ci]);
        rc = sl_theory_cor39(res->alpha, c, &res->cor_improves[ci], &res->cor_bound[ci]);
        if (rc) return rc;
    }
    return SL_OK;
}

int sl_analyze_file(const char *path, const sl_analyze_opts *o, sl_analyze_result *res)
{
    memset(res, 0, sizeof *res);
    if (o->gamma_max < 1 || o->gamma_max > SL_ANALYZE_GMAX)
        return sl_fail(SL_EINPUT, "gamma_max: %zu is outside [1, %d]", o->gamma_max, SL_ANALYZE_GMAX);
    if (o->n_hist_bins < 1 || o->n_hist_bins > 64 || o->n_conf_bins < 1 || o->n_conf_bins > 64)
        return sl_fail(SL_EINPUT, "histogram bins must be in [1, 64]");
    if (!(o->ci_level > 0 && o->ci_level < 1)) return sl_fail(SL_EINPUT, "ci_level: %g is outside (0, 1)", o->ci_level);
    double t0 = sl_now_s();
    sl_log_reader *r = NULL;
    int rc = sl_log_open(&r, path);
    if (rc) return rc;
    const sl_log_meta *meta = sl_log_meta_of(r);
    res->kind = meta->kind;
    res->meta = *meta;
    res->n_sequences = sl_log_n_sequences(r);
    res->gamma_max = o->gamma_max;
    res->n_boot = o->n_boot;
    res->ci_level = o->ci_level;
    res->n_hist = o->n_hist_bins;
    res->n_conf = o->n_conf_bins;
    res->beta_dists = res->match = res->nonit = res->beta_dists_maxdiff = NAN;
    sl_log_costs lc = {0};
    sl_theory_vcost own = {0};
    const sl_theory_vcost *vc = NULL;
    double vtab[SL_ANALYZE_GMAX + 1];
    sl_log_reader *rr = NULL; /* the run log given beside a measure log */
    if (o->run_path && meta->kind == SL_LOG_MEASURE) {
        rc = sl_log_open(&rr, o->run_path);
        if (!rc && sl_log_meta_of(rr)->kind != SL_LOG_RUN) rc = sl_fail(SL_EINPUT, "run_log: %s is not a run log", o->run_path);
        if (!rc && sl_log_meta_of(rr)->vocab_size != meta->vocab_size)
            rc = sl_fail(SL_EINPUT, "run_log: %s has vocabulary %llu, %s has %llu", o->run_path,
                         (unsigned long long)sl_log_meta_of(rr)->vocab_size, path, (unsigned long long)meta->vocab_size);
        if (!rc) rc = sl_log_read_costs(rr, &lc);
    } else if (o->run_path) {
        rc = sl_fail(SL_EINPUT, "run_log: goes with a measure log; %s is a run log already", path);
    }
    if (!rc && meta->kind == SL_LOG_RUN) rc = sl_log_read_costs(r, &lc);
    sl_analyze_opts oo = *o; /* gamma_max may shrink to a measured v(n) table */
    if (!rc) rc = setup_costs(o, &lc, &own, &vc, vtab, &oo.gamma_max, res);
    res->gamma_max = oo.gamma_max;
    o = &oo;
    if (!rc && o->beta_only) {
        if (!sl_log_has_dists(r)) rc = sl_fail(SL_EINPUT, "beta_only: %s holds beta-level data only; recomputing beta needs /distributions", path);
        else rc = dists_pass(r, o, res);
        res->n_positions = sl_log_n_rows(r);
    } else if (!rc && meta->kind == SL_LOG_MEASURE) {
        rc = analyze_measure(r, o, res, vtab);
        if (!rc && sl_log_has_dists(r) && !o->no_dists) rc = dists_pass(r, o, res);
        else if (!rc && !sl_log_has_dists(r))
            note(res, "the log holds beta-level data only: the lenience curves, sampler-match and non-iterative "
                      "rejection need full distributions (measure --dist float32|float16)");
        if (!rc && rr) { /* observed next to replayed */
            sl_analyze_result *t = calloc(1, sizeof *t);
            if (!t) rc = sl_fail(SL_EFAIL, "out of memory");
            if (!rc) rc = analyze_run(rr, o, t);
            if (rc && strncmp(sl_errmsg(), "log:", 4) == 0) {
                char msg[512];
                snprintf(msg, sizeof msg, "%s%s", o->run_path, sl_errmsg() + 3);
                rc = sl_fail(rc, "%s", msg);
            }
            if (!rc) {
                res->have_run = 1;
                memcpy(res->obs_uncond, t->obs_uncond, sizeof t->obs_uncond);
                memcpy(res->obs_cond, t->obs_cond, sizeof t->obs_cond);
                memcpy(res->obs_reached, t->obs_reached, sizeof t->obs_reached);
                memcpy(res->obs_accepted, t->obs_accepted, sizeof t->obs_accepted);
                memcpy(res->obs_offered, t->obs_offered, sizeof t->obs_offered);
                memcpy(res->en_observed, t->en_observed, sizeof t->en_observed);
                memcpy(res->n_observed, t->n_observed, sizeof t->n_observed);
                res->accept_rate = t->accept_rate, res->accept_lo = t->accept_lo, res->accept_hi = t->accept_hi;
                res->mean_emitted = t->mean_emitted, res->draft_s = t->draft_s, res->verify_s = t->verify_s;
                res->sample_s = t->sample_s, res->n_iterations = t->n_iterations;
                res->spec_tokens_per_s = t->spec_tokens_per_s, res->base_tokens_per_s = t->base_tokens_per_s;
            }
            free(t);
        }
    } else if (!rc) {
        res->have_run = 1;
        rc = analyze_run(r, o, res);
        note(res, "run log: acceptance is observed; lenience and dynamic-gamma replay need a measure log");
    }
    if (rc && strncmp(sl_errmsg(), "log:", 4) == 0) { /* name the file in streaming errors */
        char msg[512];
        snprintf(msg, sizeof msg, "%s%s", path, sl_errmsg() + 3);
        rc = sl_fail(rc, "%s", msg);
    }
    if (!rc && !o->beta_only) rc = compute_factors(o, res, vc, vtab);
    sl_log_costs_free(&lc);
    if (vc == &own) sl_theory_vcost_free(&own);
    sl_log_close(r);
    sl_log_close(rr);
    res->seconds = sl_now_s() - t0;
    return rc;
}

/* ---- report ---- */

/* Appends a new table with the given columns to ts (16 slots, more than the report needs). */
static sl_table *tab(sl_table **ts, size_t *n, const char *title, const sl_colspec *cols, size_t n_cols)
{
    sl_table *t = sl_table_new(title, cols, n_cols);
    ts[(*n)++] = t;
    return t;
}
#define TAB(title, cols) tab(ts, &n, (title), (cols), sizeof(cols) / sizeof((cols)[0]))

int sl_analyze_report(const sl_analyze_result *res, sl_table ***out, size_t *n_out)
{
    sl_table **ts = calloc(16, sizeof *ts);
    size_t n = 0, G = res->gamma_max;
    if (!ts) return sl_fail(SL_EFAIL, "out of memory");
    const sl_log_meta *m = &res->meta;
    int measure = res->kind == SL_LOG_MEASURE;
    static const sl_colspec summary_cols[] = {
        SL_COL_S("kind"), SL_COL_S("target"), SL_COL_S("draft"), SL_COL_I("vocab_size"),
        SL_COL_D("temperature", NULL), SL_COL_I("top_k"), SL_COL_D("top_p", NULL), SL_COL_S("dist"),
        SL_COL_I("sequences"), SL_COL_I("rows"), SL_COL_D("alpha", NULL), SL_COL_D("alpha_ci_lo", NULL),
        SL_COL_D("alpha_ci_hi", NULL), SL_COL_D("ci_level", NULL), SL_COL_I("n_boot"), SL_COL_D("d_lk_mean", NULL),
        SL_COL_D("dlk_identity_max", NULL), SL_COL_D("entropy_p_mean", NULL), SL_COL_D("entropy_q_mean", NULL),
        SL_COL_D("q_max_mean", NULL), SL_COL_D("seconds", NULL)};
    sl_table *t = TAB("summary", summary_cols);
    sl_table_row(t);
    sl_table_sets(t, "kind", sl_log_kind_name(res->kind));
    sl_table_sets(t, "target", m->target_name);
    sl_table_sets(t, "draft", m->draft_name);
    sl_table_seti(t, "vocab_size", (int64_t)m->vocab_size);
    sl_table_setd(t, "temperature", m->sampling.temperature);
    sl_table_seti(t, "top_k", (int64_t)m->sampling.top_k);
    sl_table_setd(t, "top_p", m->sampling.top_p);
    sl_table_sets(t, "dist", sl_log_dist_name(m->dist));
    sl_table_seti(t, "sequences", (int64_t)res->n_sequences);
    sl_table_seti(t, "rows", (int64_t)res->n_positions);
    sl_table_setd(t, "alpha", res->alpha);
    sl_table_setd(t, "alpha_ci_lo", res->alpha_lo);
    sl_table_setd(t, "alpha_ci_hi", res->alpha_hi);
    sl_table_setd(t, "ci_level", res->ci_level);
    sl_table_seti(t, "n_boot", (int64_t)res->n_boot);
    sl_table_setd(t, "d_lk_mean", measure ? res->d_lk_mean : NAN);
    sl_table_setd(t, "dlk_identity_max", measure ? res->dlk_identity_max : NAN);
    sl_table_setd(t, "entropy_p_mean", measure ? res->entropy_p_mean : NAN);
    sl_table_setd(t, "entropy_q_mean", measure ? res->entropy_q_mean : NAN);
    sl_table_setd(t, "q_max_mean", measure ? res->q_max_mean : NAN);
    sl_table_setd(t, "seconds", res->seconds);

    if (res->have_run) {
        static const sl_colspec run_cols[] = {
            SL_COL_I("iterations"), SL_COL_D("acceptance", NULL), SL_COL_D("acceptance_ci_lo", NULL),
            SL_COL_D("acceptance_ci_hi", NULL), SL_COL_D("mean_emitted", NULL), SL_COL_D("draft_s", NULL),
            SL_COL_D("verify_s", NULL), SL_COL_D("sample_s", NULL), SL_COL_D("spec_tokens_per_s", NULL),
            SL_COL_D("base_tokens_per_s", NULL), SL_COL_D("walltime_speedup", NULL), SL_COL_D("c", NULL)};
        t = TAB("run", run_cols);
        sl_table_row(t);
        sl_table_seti(t, "iterations", (int64_t)res->n_iterations);
        sl_table_setd(t, "acceptance", res->accept_rate);
        sl_table_setd(t, "acceptance_ci_lo", res->accept_lo);
        sl_table_setd(t, "acceptance_ci_hi", res->accept_hi);
        sl_table_setd(t, "mean_emitted", res->mean_emitted);
        sl_table_setd(t, "draft_s", res->draft_s);
        sl_table_setd(t, "verify_s", res->verify_s);
        sl_table_setd(t, "sample_s", res->sample_s);
        sl_table_setd(t, "spec_tokens_per_s", res->spec_tokens_per_s);
        sl_table_setd(t, "base_tokens_per_s", res->base_tokens_per_s);
        sl_table_setd(t, "walltime_speedup", res->spec_tokens_per_s / res->base_tokens_per_s);
        sl_table_setd(t, "c", res->c_deploy);
    }

    static const sl_colspec quantile_cols[] = {SL_COL_D("quantile", NULL), SL_COL_D("beta", NULL)};
    t = TAB("beta_quantiles", quantile_cols);
    for (int k = 0; k < 9; k++) {
        sl_table_row(t);
        sl_table_setd(t, "quantile", res->quantile_p[k]);
        sl_table_setd(t, "beta", res->quantile[k]);
    }
    static const sl_colspec hist_cols[] = {SL_COL_D("beta_lo", NULL), SL_COL_D("beta_hi", NULL), SL_COL_I("count"),
                                           SL_COL_D("fraction", NULL)};
    t = TAB("beta_histogram", hist_cols);
    uint64_t tot = 0;
    for (size_t k = 0; k < res->n_hist; k++) tot += res->hist[k];
    for (size_t k = 0; k < res->n_hist; k++) {
        sl_table_row(t);
        sl_table_setd(t, "beta_lo", (double)k / (double)res->n_hist);
        sl_table_setd(t, "beta_hi", (double)(k + 1) / (double)res->n_hist);
        sl_table_seti(t, "count", (int64_t)res->hist[k]);
        sl_table_setd(t, "fraction", tot ? (double)res->hist[k] / (double)tot : NAN);
    }

    static const sl_colspec pos_cols[] = {SL_COL_I("position"), SL_COL_D("unconditional_replay", NULL),
                                          SL_COL_D("conditional_replay", NULL), SL_COL_D("unconditional_observed", NULL),
                                          SL_COL_D("conditional_observed", NULL)};
    t = TAB("acceptance_by_position", pos_cols);
    for (size_t k = 0; k < G; k++) {
        sl_table_row(t);
        sl_table_seti(t, "position", (int64_t)k + 1);
        sl_table_setd(t, "unconditional_replay", res->uncond[k]);
        sl_table_setd(t, "conditional_replay", res->cond[k]);
        sl_table_setd(t, "unconditional_observed", res->have_run ? res->obs_uncond[k] : NAN);
        sl_table_setd(t, "conditional_observed", res->have_run ? res->obs_cond[k] : NAN);
    }

    if (measure) {
        static const sl_colspec conf_cols[] = {SL_COL_D("q_max_lo", NULL), SL_COL_D("q_max_hi", NULL), SL_COL_I("count"),
                                               SL_COL_D("mean_beta", NULL)};
        t = TAB("acceptance_by_confidence", conf_cols);
        for (size_t k = 0; k < res->n_conf; k++) {
            sl_table_row(t);
            sl_table_setd(t, "q_max_lo", (double)k / (double)res->n_conf);
            sl_table_setd(t, "q_max_hi", (double)(k + 1) / (double)res->n_conf);
            sl_table_seti(t, "count", (int64_t)res->conf_count[k]);
            sl_table_setd(t, "mean_beta", res->conf_beta[k]);
        }
    }

    static const sl_colspec en_cols[] = {SL_COL_I("gamma"), SL_COL_D("iid", NULL), SL_COL_D("replay", NULL),
                                         SL_COL_D("replay_ci_lo", NULL), SL_COL_D("replay_ci_hi", NULL),
                                         SL_COL_D("observed", NULL), SL_COL_I("observed_iterations"),
                                         SL_COL_D("sequential", NULL), SL_COL_D("sequential_ci_lo", NULL),
                                         SL_COL_D("sequential_ci_hi", NULL), SL_COL_D("sequential_alpha", NULL)};
    t = TAB("expected_tokens", en_cols);
    for (size_t k = 0; k < G; k++) {
        sl_table_row(t);
        sl_table_seti(t, "gamma", (int64_t)k + 1);
        sl_table_setd(t, "iid", res->en_iid[k]);
        sl_table_setd(t, "replay", res->en_replay[k]);
        sl_table_setd(t, "replay_ci_lo", res->en_lo[k]);
        sl_table_setd(t, "replay_ci_hi", res->en_hi[k]);
        sl_table_setd(t, "observed", res->have_run ? res->en_observed[k] : NAN);
        sl_table_seti(t, "observed_iterations", (int64_t)res->n_observed[k]);
        sl_table_setd(t, "sequential", res->have_seq ? res->en_seq[k] : NAN);
        sl_table_setd(t, "sequential_ci_lo", res->have_seq ? res->en_seq_lo[k] : NAN);
        sl_table_setd(t, "sequential_ci_hi", res->have_seq ? res->en_seq_hi[k] : NAN);
        sl_table_setd(t, "sequential_alpha", res->have_seq ? res->alpha_seq[k] : NAN);
    }

    if (res->have_dists) {
        static const sl_colspec len_cols[] = {SL_COL_D("lenience", NULL), SL_COL_D("alpha_standard", NULL),
                                              SL_COL_D("alpha_temperature0", NULL)};
        t = TAB("lenience", len_cols);
        for (size_t k = 0; k < res->n_len; k++) {
            sl_table_row(t);
            sl_table_setd(t, "lenience", res->lenience[k]);
            sl_table_setd(t, "alpha_standard", res->alpha_l[k]);
            sl_table_setd(t, "alpha_temperature0", res->alpha_t0[k]);
        }
        static const sl_colspec rule_cols[] = {SL_COL_D("beta_logged", NULL), SL_COL_D("beta_from_dists", NULL),
                                               SL_COL_D("beta_dists_max_abs_diff", NULL),
                                               SL_COL_D("sampler_match", NULL), SL_COL_D("nonit_rejection", NULL)};
        t = TAB("other_rules", rule_cols);
        sl_table_row(t);
        sl_table_setd(t, "beta_logged", res->alpha);
        sl_table_setd(t, "beta_from_dists", res->beta_dists);
        sl_table_setd(t, "beta_dists_max_abs_diff", res->beta_dists_maxdiff);
        sl_table_setd(t, "sampler_match", res->match);
        sl_table_setd(t, "nonit_rejection", res->nonit);
    }

    static const sl_colspec factor_cols[] = {SL_COL_D("c", NULL), SL_COL_D("c_hat", NULL), SL_COL_I("gamma"),
                                             SL_COL_D("v", NULL), SL_COL_D("walltime_thm38", NULL),
                                             SL_COL_D("walltime_v", NULL), SL_COL_D("walltime_replay", NULL),
                                             SL_COL_D("ops_factor", NULL), SL_COL_D("walltime_sequential", NULL)};
    t = TAB("factors", factor_cols);
    for (size_t ci = 0; ci < res->n_cs; ci++)
        for (size_t k = 0; k < G; k++) {
            sl_table_row(t);
            sl_table_setd(t, "c", res->cs[ci]);
            sl_table_setd(t, "c_hat", res->c_hat[ci]);
            sl_table_seti(t, "gamma", (int64_t)k + 1);
            sl_table_setd(t, "v", res->vtab[k + 1]);
            sl_table_setd(t, "walltime_thm38", res->f38[ci][k]);
            sl_table_setd(t, "walltime_v", res->fv[ci][k]);
            sl_table_setd(t, "walltime_replay", res->frep[ci][k]);
            sl_table_setd(t, "ops_factor", res->fops[ci][k]);
            sl_table_setd(t, "walltime_sequential", res->fseq[ci][k]);
        }
    static const sl_colspec opt_cols[] = {
        SL_COL_D("c", NULL), SL_COL_I("gamma_iid"), SL_COL_D("factor_iid", NULL), SL_COL_I("at_cap_iid"),
        SL_COL_I("gamma_replay"), SL_COL_D("factor_replay", NULL), SL_COL_I("at_cap_replay"),
        SL_COL_I("cor39_alpha_gt_c"), SL_COL_D("cor39_bound", NULL), SL_COL_I("gamma_sequential"),
        SL_COL_D("factor_sequential", NULL)};
    t = TAB("optimal_gamma", opt_cols);
    for (size_t ci = 0; ci < res->n_cs; ci++) {
        sl_table_row(t);
        sl_table_setd(t, "c", res->cs[ci]);
        sl_table_seti(t, "gamma_iid", res->opt_iid[ci]);
        sl_table_setd(t, "factor_iid", res->optf_iid[ci]);
        sl_table_seti(t, "at_cap_iid", res->opt_iid_cap[ci]);
        if (res->have_replay) {
            sl_table_seti(t, "gamma_replay", res->opt_rep[ci]);
            sl_table_setd(t, "factor_replay", res->optf_rep[ci]);
            sl_table_seti(t, "at_cap_replay", res->opt_rep_cap[ci]);
        }
        sl_table_seti(t, "cor39_alpha_gt_c", res->cor_improves[ci]);
        sl_table_setd(t, "cor39_bound", res->cor_bound[ci]);
        if (res->have_seq) {
            sl_table_seti(t, "gamma_sequential", res->opt_seq[ci]);
            sl_table_setd(t, "factor_sequential", res->optf_seq[ci]);
        }
    }

    if (res->n_pol) {
        static const sl_colspec pol_cols[] = {SL_COL_D("c", NULL), SL_COL_S("policy"), SL_COL_D("param", NULL),
                                              SL_COL_D("walltime_factor", NULL), SL_COL_D("vs_best_fixed", NULL),
                                              SL_COL_D("mean_draft_steps", NULL), SL_COL_I("iterations"),
                                              SL_COL_I("tokens")};
        t = TAB("dynamic_gamma", pol_cols);
        for (size_t i = 0; i < res->n_pol; i++) {
            const sl_analyze_policy *p = &res->pol[i];
            size_t ci = 0;
            while (ci < res->n_cs && res->cs[ci] != p->c) ci++;
            sl_table_row(t);
            sl_table_setd(t, "c", p->c);
            sl_table_sets(t, "policy", p->policy);
            sl_table_setd(t, "param", p->param);
            sl_table_setd(t, "walltime_factor", p->walltime_factor);
            sl_table_setd(t, "vs_best_fixed", ci < res->n_cs ? p->walltime_factor / res->best_fixed[ci] : NAN);
            sl_table_setd(t, "mean_draft_steps", p->mean_gamma);
            sl_table_seti(t, "iterations", (int64_t)p->iterations);
            sl_table_seti(t, "tokens", (int64_t)p->tokens);
        }
    }

    static const sl_colspec note_cols[] = {SL_COL_S("note")};
    t = TAB("notes", note_cols);
    const char *fixed_notes[] = {
        "alpha CI: percentile bootstrap resampling whole sequences",
        "unconditional = P(draft i accepted) per iteration (vLLM's per-position rate); conditional = P(draft i "
        "accepted | drafts 1..i-1 accepted) (EAGLE's)",
        "replay: the logged beta sequences, a window of gamma consecutive positions per iteration (kept for "
        "comparison); observed: a run log",
        "sequential: the exact replay along the logged text (a tested draft accepted with probability "
        "min(1, q(x)/p(x)), each iteration starting where the previous one ended; THEORY.md): what recommend uses",
    };
    for (size_t i = 0; i < 4; i++) {
        sl_table_row(t);
        sl_table_sets(t, "note", fixed_notes[i]);
    }
    for (size_t i = 0; i < res->n_notes; i++) {
        sl_table_row(t);
        sl_table_sets(t, "note", res->notes[i]);
    }
    /* One check covers every call above: the first failure of any table is its sticky status. */
    int rc = SL_OK;
    for (size_t i = 0; i < n && !rc; i++) rc = sl_table_status(ts[i]);
    if (rc) {
        for (size_t i = 0; i < n; i++) sl_table_free(ts[i]);
        free(ts);
        return rc;
    }
    *out = ts;
    *n_out = n;
    return SL_OK;
}
#undef TAB

/* ---- latency spread (recommend) ---- */

int sl_analyze_latency(const char *path, double alpha, const size_t *gammas, size_t n_g, size_t answer, size_t n_sims,
                       uint64_t seed, double c, const double *vtab, double *q)
{
    sl_log_reader *r = NULL;
    int rc = sl_log_open(&r, path);
    if (rc) return rc;
    size_t ns = sl_log_n_sequences(r);
    sl_log_seq *seqs = NULL;
    rc = sl_log_sequences(r, &seqs);
    int iid = sl_log_meta_of(r)->kind == SL_LOG_RUN;
    size_t maxlen = 1, used = 0;
    for (size_t s = 0; !rc && s < ns; s++) {
        if ((size_t)seqs[s].n_rows > maxlen) maxlen = (size_t)seqs[s].n_rows;
        used += seqs[s].n_rows > 0;
    }
    if (iid) used = 1;
    size_t per = used ? (n_sims + used - 1) / used : 0;
    double *lat = malloc((per * used + 1) * n_g * sizeof *lat), *beta = malloc(maxlen * sizeof *beta);
    gsl_rng *rng = sl_rng_alloc(seed, SL_STREAM_ACCEPT, 0);
    sl_log_pos_block b = {0};
    if (!rc && (!lat || !beta || !rng)) rc = sl_fail(SL_EFAIL, "out of memory");
    if (!rc && used == 0) rc = sl_fail(SL_EINPUT, "%s holds no rows", path);
    size_t m = 0; /* simulations stored per gamma */
    if (!rc && iid) {
        beta[0] = alpha;
        for (size_t j = 0; j < per; j++, m++)
            for (size_t gi = 0; gi < n_g; gi++) {
                sl_rng_reseed(rng, seed, SL_STREAM_ACCEPT, (1ULL << 40) + j * n_g + gi);
                lat[gi * per * used + m] = sl_replay_latency(beta, 1, gammas[gi], answer, c, vtab, rng);
            }
    } else if (!rc) {
        rc = sl_log_pos_block_alloc(&b, 4096);
        size_t cur = 0, len = 0;
        while (cur < ns && seqs[cur].n_rows == 0) cur++;
        for (size_t first = 0; !rc && cur < ns; first += b.n) {
            rc = sl_log_read_positions(r, first, &b);
            if (rc || b.n == 0) break;
            for (size_t i = 0; i < b.n && cur < ns; i++) {
                double be = b.beta[i];
                beta[len++] = be >= 0 && be <= 1 ? be : be > 1 ? 1 : 0; /* analyze rejects bad values; clamp here */
                if (len < (size_t)seqs[cur].n_rows) continue;
                for (size_t j = 0; j < per; j++, m++)
                    for (size_t gi = 0; gi < n_g; gi++) {
                        sl_rng_reseed(rng, seed, SL_STREAM_ACCEPT, (1ULL << 40) + ((uint64_t)cur * per + j) * n_g + gi);
                        lat[gi * per * used + m] = sl_replay_latency(beta, len, gammas[gi], answer, c, vtab, rng);
                    }
                len = 0;
                cur++;
                while (cur < ns && seqs[cur].n_rows == 0) cur++;
            }
        }
    }
    for (size_t gi = 0; !rc && gi < n_g; gi++) {
        double *v = lat + gi * per * used, mean = 0;
        q[gi * 4 + 0] = sl_stats_quantile(v, m, 0.5); /* sorts v */
        q[gi * 4 + 1] = sl_stats_quantile_sorted(v, m, 0.9);
        q[gi * 4 + 2] = sl_stats_quantile_sorted(v, m, 0.99);
        for (size_t j = 0; j < m; j++) mean += v[j]; /* in sorted order, as always */
        q[gi * 4 + 3] = mean / (double)m;
    }
    free(lat);
    free(beta);
    free(seqs);
    if (rng) gsl_rng_free(rng);
    if (b.cap) sl_log_pos_block_free(&b);
    sl_log_close(r);
    return rc;
}
