/* sl_replay.c: the exact sequential replay of a measure log (sl_replay.h). */
#include "sl_replay.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "sl_common.h"
#include "sl_log.h"

double sl_replay_accept_prob(double p_token, double q_token)
{
    if (!(p_token > 0)) return 0;
    return q_token >= p_token ? 1 : q_token / p_token;
}

/* Backward over t: an iteration at t tests m = min(gamma, n - t) positions; K = k < m leading
 * acceptances then a rejection (probability prod_{i<k} a_{t+i} (1 - a_{t+k})) moves to t + k + 1
 * having tested k + 1 drafts; K = m (all accepted) moves to t + m + 1 (the bonus token, or past the
 * end) having tested m. E (iterations), A (accepted), T (tested) from t on; zero at and after n. */
void sl_replay_expect(const double *a, size_t n, size_t gamma, double *scratch, double *iterations, double *accepted,
                      double *tested)
{
    double *E = scratch, *A = scratch + (n + 2), *T = scratch + 2 * (n + 2);
    E[n] = E[n + 1] = A[n] = A[n + 1] = T[n] = T[n + 1] = 0;
    for (size_t t = n; t-- > 0;) {
        size_t m = gamma < n - t ? gamma : n - t;
        double reach = 1, e = 1, acc = 0, tst = 0; /* reach = P(the first k drafts accepted) */
        for (size_t k = 0; k < m && reach > 0; k++) {
            double stop = reach * (1 - a[t + k]);
            if (stop > 0) {
                e += stop * E[t + k + 1];
                acc += stop * ((double)k + A[t + k + 1]);
                tst += stop * ((double)k + 1 + T[t + k + 1]);
            }
            reach *= a[t + k];
        }
        if (reach > 0) {
            size_t nx = t + m + 1 > n + 1 ? n + 1 : t + m + 1;
            e += reach * E[nx];
            acc += reach * ((double)m + A[nx]);
            tst += reach * ((double)m + T[nx]);
        }
        E[t] = e, A[t] = acc, T[t] = tst;
    }
    *iterations = n ? E[0] : 0;
    *accepted = n ? A[0] : 0;
    *tested = n ? T[0] : 0;
}

size_t sl_replay_simulate(const double *a, size_t n, size_t gamma, size_t answer, gsl_rng *r)
{
    size_t t = 0, produced = 0, iters = 0;
    while (produced < answer) {
        size_t m = gamma < answer - produced ? gamma : answer - produced, k = 0;
        while (k < m) {
            double p = a[(t + k) % n];
            if (p < 1 && (p <= 0 || !(sl_rng_uniform53(r) < p))) break;
            k++;
        }
        iters++;
        produced += k + 1;
        t += k + 1;
    }
    return iters;
}

int sl_replay_seqs_init(sl_replay_seqs *s, size_t G)
{
    memset(s, 0, sizeof *s);
    if (G < 1) return sl_fail(SL_EINPUT, "gamma_max: %zu is not >= 1", G);
    s->G = G;
    s->deterministic = 1;
    s->start = malloc(sizeof *s->start);
    if (!s->start) return sl_fail(SL_EFAIL, "out of memory");
    s->start[0] = 0;
    return SL_OK;
}

void sl_replay_seqs_free(sl_replay_seqs *s)
{
    free(s->a), free(s->start), free(s->iters), free(s->accepted), free(s->tested), free(s->scratch);
    memset(s, 0, sizeof *s);
}

static int grow(void **p, size_t count, size_t size)
{
    void *q = realloc(*p, count * size);
    if (!q) return sl_fail(SL_EFAIL, "out of memory");
    *p = q;
    return SL_OK;
}

int sl_replay_seqs_add(sl_replay_seqs *s, const double *a, size_t n)
{
    const size_t G = s->G;
    if (s->n_seq == s->cap) {
        size_t cap = s->cap ? 2 * s->cap : 64;
        if (grow((void **)&s->start, cap + 1, sizeof *s->start) || grow((void **)&s->iters, cap * G, sizeof(double)) ||
            grow((void **)&s->accepted, cap * G, sizeof(double)) || grow((void **)&s->tested, cap * G, sizeof(double)))
            return SL_EFAIL;
        s->cap = cap;
    }
    if (!s->drop_rows && s->n_rows + n > s->rows_cap) {
        size_t cap = s->rows_cap ? s->rows_cap : 4096;
        while (cap < s->n_rows + n) cap *= 2;
        if (grow((void **)&s->a, cap, sizeof *s->a)) return SL_EFAIL;
        s->rows_cap = cap;
    }
    if (3 * (n + 2) > s->scratch_len) {
        if (grow((void **)&s->scratch, 3 * (n + 2), sizeof *s->scratch)) return SL_EFAIL;
        s->scratch_len = 3 * (n + 2);
    }
    for (size_t t = 0; t < n; t++) {
        if (!(a[t] >= 0 && a[t] <= 1))
            return sl_fail(SL_EINPUT, "replay: acceptance probability %g at position %zu is outside [0, 1]", a[t], t);
        s->deterministic &= a[t] == 0 || a[t] == 1;
    }
    if (!s->drop_rows) memcpy(s->a + s->n_rows, a, n * sizeof *a);
    size_t k = s->n_seq;
    for (size_t g = 1; g <= G; g++)
        sl_replay_expect(a, n, g, s->scratch, &s->iters[k * G + g - 1], &s->accepted[k * G + g - 1],
                         &s->tested[k * G + g - 1]);
    s->n_rows += n;
    s->n_seq++;
    s->start[s->n_seq] = s->n_rows;
    return SL_OK;
}

int sl_replay_log(const char *path, size_t G, sl_replay_seqs *s)
{
    sl_log_reader *r = NULL;
    int rc = sl_replay_seqs_init(s, G);
    if (!rc) rc = sl_log_open(&r, path);
    if (!rc && sl_log_meta_of(r)->kind != SL_LOG_MEASURE)
        rc = sl_fail(SL_EINPUT, "%s is a run log; the sequential replay needs a measure log (its text with p and q)", path);
    sl_log_seq *seqs = NULL;
    if (!rc) rc = sl_log_sequences(r, &seqs);
    const size_t ns = rc ? 0 : sl_log_n_sequences(r), total = rc ? 0 : sl_log_n_rows(r);
    size_t longest = 1;
    for (size_t k = 0; k < ns; k++)
        if (seqs[k].n_rows > 0 && (size_t)seqs[k].n_rows > longest) longest = (size_t)seqs[k].n_rows;
    double *a = rc ? NULL : malloc(longest * sizeof *a);
    sl_log_pos_block b = {0};
    if (!rc && !a) rc = sl_fail(SL_EFAIL, "out of memory");
    if (!rc) rc = sl_log_pos_block_alloc(&b, 4096);
    size_t cur = 0, len = 0;
    while (!rc && cur < ns && seqs[cur].n_rows == 0) rc = sl_replay_seqs_add(s, a, 0), cur++;
    for (size_t first = 0; !rc && first < total; first += b.n) {
        rc = sl_log_read_positions(r, first, &b);
        if (rc || b.n == 0) break;
        for (size_t i = 0; i < b.n && !rc; i++) {
            double p = b.p_token[i], q = b.q_token[i];
            if (!(p > 0 && p <= 1 + 1e-9) || !(q >= 0 && q <= 1 + 1e-9))
                rc = sl_fail(SL_EINPUT, "%s: /positions row %zu: p_token %g, q_token %g; expected p in (0, 1], q in [0, 1]",
                             path, first + i, p, q);
            else if (cur >= ns || len >= longest)
                rc = sl_fail(SL_EINPUT, "%s: /positions row %zu does not follow /sequences", path, first + i);
            if (rc) break;
            a[len++] = sl_replay_accept_prob(p, q);
            while (!rc && cur < ns && len == (size_t)seqs[cur].n_rows) {
                rc = sl_replay_seqs_add(s, a, len);
                cur++;
                len = 0;
            }
        }
    }
    if (!rc && s->n_seq != ns) rc = sl_fail(SL_EINPUT, "%s: /positions holds %zu of %zu sequences", path, s->n_seq, ns);
    if (b.cap) sl_log_pos_block_free(&b);
    free(a);
    free(seqs);
    if (r) sl_log_close(r);
    if (rc) sl_replay_seqs_free(s);
    return rc;
}

double sl_replay_tokens_per_iteration(const sl_replay_seqs *s, size_t g)
{
    double tok = 0, it = 0;
    for (size_t k = 0; k < s->n_seq; k++) {
        tok += (double)(s->start[k + 1] - s->start[k]);
        it += s->iters[k * s->G + g - 1];
    }
    return it > 0 ? tok / it : NAN;
}

double sl_replay_alpha(const sl_replay_seqs *s, size_t g)
{
    double acc = 0, tst = 0;
    for (size_t k = 0; k < s->n_seq; k++) {
        acc += s->accepted[k * s->G + g - 1];
        tst += s->tested[k * s->G + g - 1];
    }
    return tst > 0 ? acc / tst : NAN;
}

int sl_replay_boot(const sl_replay_seqs *s, size_t n_boot, uint64_t seed, double *out)
{
    const size_t G = s->G, ns = s->n_seq;
    double *it = malloc(G * sizeof *it);
    gsl_rng *r = sl_rng_alloc(seed, SL_STREAM_BOOT, 0);
    if (!it || !r) {
        free(it);
        if (r) gsl_rng_free(r);
        return sl_fail(SL_EFAIL, "out of memory");
    }
    for (size_t b = 0; b < n_boot; b++) {
        sl_rng_reseed(r, seed, SL_STREAM_BOOT, b);
        double tok = 0;
        memset(it, 0, G * sizeof *it);
        for (size_t i = 0; i < ns; i++) {
            size_t j = gsl_rng_uniform_int(r, ns);
            tok += (double)(s->start[j + 1] - s->start[j]);
            for (size_t g = 0; g < G; g++) it[g] += s->iters[j * G + g];
        }
        for (size_t g = 0; g < G; g++) out[b * G + g] = it[g] > 0 ? tok / it[g] : NAN;
    }
    free(it);
    gsl_rng_free(r);
    return SL_OK;
}

int sl_replay_latency_sims(const sl_replay_seqs *s, size_t g, size_t answer, size_t n_sims, uint64_t seed,
                           double *iters)
{
    if (s->drop_rows) return sl_fail(SL_EFAIL, "replay: the rows were not kept (drop_rows)");
    size_t nonempty = 0;
    for (size_t k = 0; k < s->n_seq; k++) nonempty += s->start[k + 1] > s->start[k];
    if (nonempty == 0) return sl_fail(SL_EINPUT, "replay: the log holds no positions");
    gsl_rng *r = sl_rng_alloc(seed, SL_STREAM_ACCEPT, 0);
    if (!r) return sl_fail(SL_EFAIL, "out of memory");
    const size_t per = (n_sims + nonempty - 1) / nonempty;
    size_t j = 0, kk = 0;
    for (size_t k = 0; k < s->n_seq && j < n_sims; k++) {
        size_t n = s->start[k + 1] - s->start[k];
        if (n == 0) continue;
        for (size_t i = 0; i < per && j < n_sims; i++, j++) {
            sl_rng_reseed(r, seed, SL_STREAM_ACCEPT, ((uint64_t)1 << 41) + kk * per + i);
            iters[j] = (double)sl_replay_simulate(s->a + s->start[k], n, g, answer, r);
        }
        kk++;
    }
    gsl_rng_free(r);
    return SL_OK;
}
