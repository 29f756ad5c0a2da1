/*
 * sl_verify_two.c: two sets of token sequences, read and tested for homogeneity (sl_verify_two.h).
 * The tests go through the shared verify core (sl_verify_internal.h); this file builds their
 * categories and counts, and runs the permutation p-values of the tests with several dependent
 * observations per sequence.
 */
#include "sl_verify_two.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <gsl/gsl_rng.h>

#include "sl_common.h"
#include "sl_stats.h"
#include "sl_verify_internal.h"

/* ---- the sequence set ---- */

int sl_seqs_mode_parse(const char *s, sl_seqs_mode *out)
{
    static const char *names[] = {"any", "speculative", "autoregressive"};
    for (int i = 0; i < 3; i++)
        if (!strcmp(s, names[i])) {
            *out = (sl_seqs_mode)i;
            return SL_OK;
        }
    return sl_fail(SL_EINPUT, "mode: '%s', expected speculative, autoregressive or any", s);
}

const char *sl_seqs_mode_name(sl_seqs_mode m)
{
    return m == SL_SEQS_SPECULATIVE ? "speculative" : m == SL_SEQS_AUTOREGRESSIVE ? "autoregressive" : "any";
}

void sl_seqs_free(sl_seqs *s)
{
    if (!s) return;
    free(s->off);
    free(s->tok);
    free(s);
}

/* A set under construction: arrays grown by doubling. */
typedef struct {
    sl_seqs *s;
    size_t cap_seq, cap_tok;
    size_t end; /* tokens pushed so far: the open sequence is tok[off[n] .. end) */
} builder;

static int push_tok(builder *b, int32_t x)
{
    sl_seqs *s = b->s;
    size_t n = b->end;
    if (n == b->cap_tok) {
        size_t cap = b->cap_tok ? 2 * b->cap_tok : 1024;
        int32_t *t = realloc(s->tok, cap * sizeof *t);
        if (!t) return sl_fail(SL_EFAIL, "out of memory reading token sequences");
        s->tok = t;
        b->cap_tok = cap;
    }
    s->tok[n] = x;
    b->end++;
    return SL_OK;
}

/* Closes the open sequence (off[n + 1] = end). */
static int end_seq(builder *b)
{
    sl_seqs *s = b->s;
    if (s->n + 2 > b->cap_seq) {
        size_t cap = 2 * b->cap_seq;
        size_t *o = realloc(s->off, cap * sizeof *o);
        if (!o) return sl_fail(SL_EFAIL, "out of memory reading token sequences");
        s->off = o;
        b->cap_seq = cap;
    }
    s->off[s->n + 1] = b->end;
    s->n++;
    return SL_OK;
}

static int builder_init(builder *b)
{
    b->s = calloc(1, sizeof *b->s);
    b->cap_seq = 64;
    b->cap_tok = 0;
    b->end = 0;
    if (b->s) b->s->off = calloc(b->cap_seq, sizeof *b->s->off);
    if (!b->s || !b->s->off) {
        sl_seqs_free(b->s);
        b->s = NULL;
        return sl_fail(SL_EFAIL, "out of memory reading token sequences");
    }
    return SL_OK;
}

/* Parses one id at *p (digits), advancing *p. */
static int parse_id(const char **p, const char *path, size_t line, int32_t *out)
{
    const char *c = *p;
    if (*c == '-' && isdigit((unsigned char)c[1])) {
        int nd = 0;
        while (nd < 20 && isdigit((unsigned char)c[1 + nd])) nd++;
        return sl_fail(SL_EINPUT, "two-sample: %s line %zu: token id -%.*s is negative, expected 0..%d", path, line,
                       nd, c + 1, SL_SEQS_MAX_ID);
    }
    if (!isdigit((unsigned char)*c))
        return sl_fail(SL_EINPUT, "two-sample: %s line %zu: expected a token id, found '%c'", path, line,
                       isprint((unsigned char)*c) ? *c : '?');
    uint64_t v = 0;
    const char *start = c;
    for (; isdigit((unsigned char)*c); c++) {
        v = v * 10 + (uint64_t)(*c - '0');
        if (v > SL_SEQS_MAX_ID) {
            int nd = 0;
            while (nd < 20 && isdigit((unsigned char)start[nd])) nd++;
            return sl_fail(SL_EINPUT, "two-sample: %s line %zu: token id %.*s%s is too large, expected 0..%d", path,
                           line, nd, start, isdigit((unsigned char)start[nd]) ? "..." : "", SL_SEQS_MAX_ID);
        }
    }
    *out = (int32_t)v;
    *p = c;
    return SL_OK;
}

static int is_blank(char c) { return c == ' ' || c == '\t'; }

/* "SEQ MODE t1,t2,...": *keep says whether the line's mode is the asked one; ids go to b. */
static int parse_tokens_out(const char *p, const char *path, size_t line, sl_seqs_mode m, builder *b, int *keep)
{
    const char *c = p;
    if (!isdigit((unsigned char)*c))
        return sl_fail(SL_EINPUT, "two-sample: %s line %zu: expected 'SEQ MODE t1,t2,...' with SEQ an integer >= 0",
                       path, line);
    while (isdigit((unsigned char)*c)) c++;
    if (!is_blank(*c))
        return sl_fail(SL_EINPUT, "two-sample: %s line %zu: expected 'SEQ MODE t1,t2,...' (a blank after SEQ)", path,
                       line);
    while (is_blank(*c)) c++;
    const char *w = c;
    while (isalpha((unsigned char)*c)) c++;
    size_t wl = (size_t)(c - w);
    sl_seqs_mode lm;
    if (wl == 11 && !strncmp(w, "speculative", wl)) lm = SL_SEQS_SPECULATIVE;
    else if (wl == 14 && !strncmp(w, "autoregressive", wl)) lm = SL_SEQS_AUTOREGRESSIVE;
    else
        return sl_fail(SL_EINPUT, "two-sample: %s line %zu: mode '%.*s', expected speculative or autoregressive", path,
                       line, (int)(wl < 32 ? wl : 32), w);
    if (*c && !is_blank(*c))
        return sl_fail(SL_EINPUT, "two-sample: %s line %zu: expected a blank after the mode", path, line);
    *keep = m == SL_SEQS_ANY || m == lm;
    while (is_blank(*c)) c++;
    int rc;
    while (*c) {
        int32_t x;
        if ((rc = parse_id(&c, path, line, &x))) return rc;
        if (*keep && (rc = push_tok(b, x))) return rc;
        if (*c == ',' && c[1]) c++;
        else if (*c == ',') return sl_fail(SL_EINPUT, "two-sample: %s line %zu: a comma ends the line", path, line);
        else if (is_blank(*c)) {
            while (is_blank(*c)) c++;
            if (*c) return sl_fail(SL_EINPUT, "two-sample: %s line %zu: ids must be joined by commas", path, line);
        } else if (*c)
            return sl_fail(SL_EINPUT, "two-sample: %s line %zu: unexpected '%c' after a token id", path, line,
                           isprint((unsigned char)*c) ? *c : '?');
    }
    return SL_OK;
}

/* "t1,t2 t3, t4": ids separated by blanks and at most one comma. */
static int parse_plain(const char *p, const char *path, size_t line, builder *b)
{
    const char *c = p;
    int rc;
    while (*c) {
        int32_t x;
        if ((rc = parse_id(&c, path, line, &x)) || (rc = push_tok(b, x))) return rc;
        const char *sep = c;
        while (is_blank(*c)) c++;
        if (*c == ',') {
            c++;
            while (is_blank(*c)) c++;
            if (!*c) return sl_fail(SL_EINPUT, "two-sample: %s line %zu: a comma ends the line", path, line);
        } else if (*c && c == sep) {
            return sl_fail(SL_EINPUT, "two-sample: %s line %zu: unexpected '%c' after a token id", path, line,
                           isprint((unsigned char)*c) ? *c : '?');
        }
    }
    return SL_OK;
}

int sl_seqs_read(const char *path, sl_seqs_mode m, sl_seqs **out)
{
    *out = NULL;
    FILE *f = fopen(path, "rb");
    if (!f) return sl_fail(SL_EINPUT, "two-sample: cannot open %s: %s", path, strerror(errno));
    builder b;
    int rc = builder_init(&b);
    char *line = NULL;
    size_t cap = 0, lineno = 0, seen = 0;
    ssize_t len;
    int fmt = -1; /* 0 plain, 1 tokens-out */
    while (!rc && (len = getline(&line, &cap, f)) != -1) {
        lineno++;
        if (memchr(line, '\0', (size_t)len)) {
            rc = sl_fail(SL_EINPUT, "two-sample: %s line %zu: a NUL byte (not a text file?)", path, lineno);
            break;
        }
        while (len > 0 && (line[len - 1] == '\n' || line[len - 1] == '\r')) line[--len] = '\0';
        const char *p = line;
        while (is_blank(*p)) p++;
        if (!*p || *p == '#') continue;
        if (fmt < 0) {
            const char *c = p;
            while (*c && !is_blank(*c)) c++;
            while (is_blank(*c)) c++;
            fmt = isalpha((unsigned char)*c) ? 1 : 0;
            if (!fmt && m != SL_SEQS_ANY) {
                rc = sl_fail(SL_EINPUT, "two-sample: %s line %zu: a plain token file has no modes, so '%s' lines cannot "
                             "be picked (expected 'SEQ MODE t1,t2,...' lines, or mode any)",
                             path, lineno, sl_seqs_mode_name(m));
                break;
            }
        }
        seen++;
        int keep = 1;
        rc = fmt ? parse_tokens_out(p, path, lineno, m, &b, &keep) : parse_plain(p, path, lineno, &b);
        if (!rc && keep) rc = end_seq(&b);
    }
    if (!rc && ferror(f)) rc = sl_fail(SL_EINPUT, "two-sample: cannot read %s: %s", path, strerror(errno));
    free(line);
    fclose(f);
    if (!rc && b.s->n == 0)
        rc = seen == 0 ? sl_fail(SL_EINPUT, "two-sample: %s has no token sequences", path)
                       : sl_fail(SL_EINPUT, "two-sample: %s has no %s sequences (of %zu lines)", path,
                                 sl_seqs_mode_name(m), seen);
    if (!rc && b.s->off[b.s->n] == 0)
        rc = sl_fail(SL_EINPUT, "two-sample: %s: its %zu sequences are all empty", path, b.s->n);
    if (rc) {
        sl_seqs_free(b.s);
        return rc;
    }
    *out = b.s;
    return SL_OK;
}

int sl_seqs_from_stream(const int32_t *tok, size_t n, sl_seqs **out)
{
    *out = NULL;
    if (n == 0) return sl_fail(SL_EINPUT, "two-sample: an empty token stream");
    for (size_t i = 0; i < n; i++)
        if (tok[i] < 0 || tok[i] > SL_SEQS_MAX_ID)
            return sl_fail(SL_EINPUT, "two-sample: stream token %zu is %d, expected 0..%d", i, tok[i], SL_SEQS_MAX_ID);
    sl_seqs *s = calloc(1, sizeof *s);
    if (s) {
        s->off = calloc(2, sizeof *s->off);
        s->tok = sl_malloc(n * sizeof *s->tok);
    }
    if (!s || !s->off || !s->tok) {
        sl_seqs_free(s);
        return sl_fail(SL_EFAIL, "out of memory copying a token stream");
    }
    memcpy(s->tok, tok, n * sizeof *tok);
    s->n = 1;
    s->off[1] = n;
    *out = s;
    return SL_OK;
}

/* ---- observations: one 64-bit key per observation, grouped by sequence ---- */

typedef enum { OBS_LENGTH, OBS_POSITION, OBS_FIRST, OBS_BLOCKS } obs_kind;

/* The observations of one set: key[koff[i] .. koff[i + 1]) come from sequence i. */
typedef struct {
    uint64_t *key;  /* (koff[n]) */
    size_t *koff;   /* (n + 1) */
    size_t n;
} obs;

static void obs_free(obs *o)
{
    free(o->key);
    free(o->koff);
    *o = (obs){0};
}

static uint64_t pack(const int32_t *x, int m)
{
    uint64_t k = 0;
    for (int i = 0; i < m; i++) k = (k << 21) | (uint64_t)x[i];
    return k;
}

/* kind OBS_LENGTH: the length; OBS_POSITION: token j (1-based, arg = j); OBS_FIRST: the first arg
 * tokens as a block; OBS_BLOCKS: every non-overlapping block of arg tokens. */
static int obs_make(const sl_seqs *s, obs_kind kind, size_t arg, obs *o)
{
    *o = (obs){0};
    size_t cap = kind == OBS_BLOCKS ? s->off[s->n] / arg + 1 : s->n + 1;
    o->key = sl_malloc(cap * sizeof *o->key);
    o->koff = sl_malloc((s->n + 1) * sizeof *o->koff);
    if (!o->key || !o->koff) {
        obs_free(o);
        return SL_EFAIL;
    }
    o->n = s->n;
    size_t k = 0;
    for (size_t i = 0; i < s->n; i++) {
        const int32_t *x = s->tok + s->off[i];
        size_t L = s->off[i + 1] - s->off[i];
        o->koff[i] = k;
        if (kind == OBS_LENGTH) o->key[k++] = L;
        else if (kind == OBS_POSITION && L >= arg) o->key[k++] = (uint64_t)x[arg - 1];
        else if (kind == OBS_FIRST && L >= arg) o->key[k++] = pack(x, (int)arg);
        else if (kind == OBS_BLOCKS)
            for (size_t t = 0; t + arg <= L; t += arg) o->key[k++] = pack(x + t, (int)arg);
    }
    o->koff[s->n] = k;
    return SL_OK;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* The distinct keys of a and b, ascending, into *cats (k). */
static int categories(const obs *a, const obs *b, uint64_t **cats, size_t *k)
{
    size_t na = a->koff[a->n], nb = b->koff[b->n];
    uint64_t *c = sl_malloc((na + nb + 1) * sizeof *c);
    if (!c) return SL_EFAIL;
    memcpy(c, a->key, na * sizeof *c);
    memcpy(c + na, b->key, nb * sizeof *c);
    qsort(c, na + nb, sizeof *c, cmp_u64);
    size_t m = 0;
    for (size_t i = 0; i < na + nb; i++)
        if (m == 0 || c[i] != c[m - 1]) c[m++] = c[i];
    *cats = c;
    *k = m;
    return SL_OK;
}

static size_t cat_of(const uint64_t *cats, size_t k, uint64_t key)
{
    size_t lo = 0, hi = k; /* cats[lo .. hi) holds key */
    while (hi - lo > 1) {
        size_t mid = lo + (hi - lo) / 2;
        if (cats[mid] <= key) lo = mid;
        else hi = mid;
    }
    return lo;
}

/* ---- the permutation p-value of a test with several observations per sequence ---- */

/* cat: the category of every observation of a then b, grouped by sequence (soff, (na + nb + 1)).
 * Draws `perms` random choices of na of the na + nb sequences as set a (stream SL_STREAM_BOOT of
 * seed, item) and counts the pooled Pearson statistics >= and > the observed one (relative tie
 * tolerance 1e-9, as the exact multinomial test). */
static int permutation_p(const uint32_t *cat, const size_t *soff, size_t na, size_t nb, size_t k, size_t perms,
                         double stat_obs, uint64_t seed, uint64_t item, double *p_ge, double *p_gt)
{
    size_t n = na + nb;
    uint64_t *tot = calloc(k, sizeof *tot), *ca = calloc(k, sizeof *ca), *cb = calloc(k, sizeof *cb);
    size_t *lab = sl_malloc(n * sizeof *lab);
    gsl_rng *r = sl_rng_alloc(seed, SL_STREAM_BOOT, item);
    int rc = tot && ca && cb && lab && r ? SL_OK : sl_fail(SL_EFAIL, "out of memory for a permutation test");
    size_t ge = 0, gt = 0;
    const double tol = 1e-9 * fabs(stat_obs);
    if (!rc)
        for (size_t i = 0; i < soff[n]; i++) tot[cat[i]]++;
    for (size_t b = 0; b < perms && !rc; b++) {
        for (size_t i = 0; i < n; i++) lab[i] = i;
        /* The first na entries of a partial Fisher-Yates shuffle: a uniform na-subset. */
        for (size_t i = 0; i < na; i++) {
            size_t j = i + (size_t)gsl_rng_uniform_int(r, (unsigned long)(n - i));
            size_t t = lab[i];
            lab[i] = lab[j];
            lab[j] = t;
        }
        memset(ca, 0, k * sizeof *ca);
        for (size_t i = 0; i < na; i++)
            for (size_t q = soff[lab[i]]; q < soff[lab[i] + 1]; q++) ca[cat[q]]++;
        for (size_t j = 0; j < k; j++) cb[j] = tot[j] - ca[j];
        sl_gof g;
        if ((rc = sl_stats_homogeneity(ca, cb, k, SL_GOF_PEARSON, &g))) break;
        ge += g.stat >= stat_obs - tol;
        gt += g.stat > stat_obs + tol;
    }
    *p_ge = (1.0 + (double)ge) / (1.0 + (double)perms);
    *p_gt = (double)gt / (1.0 + (double)perms);
    free(tot);
    free(ca);
    free(cb);
    free(lab);
    if (r) gsl_rng_free(r);
    return rc;
}

/* What the core does not fill for a permutation test: patched into its row after sl_verify_finish. */
typedef struct {
    size_t row;
    size_t k, n_b, cells;
    double df, p_pearson, g, p_g, tv, tv_lo, tv_hi, p_random;
} perm_row;

/* The Hoeffding-union TV CI of the core (sl_verify_finish) with effective sample sizes. */
static void tv_ci(double tv, size_t k, double na, double nb, double level, double *lo, double *hi)
{
    double lk = (double)k * log(2.0) + log(2.0 / level);
    double eps = sqrt(lk / (2.0 * na)) + sqrt(lk / (2.0 * nb));
    *lo = fmax(0, tv - eps);
    *hi = fmin(1, tv + eps);
}

/* (sum L)^2 / sum L^2 over the sequences' observation counts L: the n of McDiarmid's bound on a
 * frequency that averages whole sequences. */
static double n_eff(const obs *o)
{
    double s = 0, s2 = 0;
    for (size_t i = 0; i < o->n; i++) {
        double L = (double)(o->koff[i + 1] - o->koff[i]);
        s += L;
        s2 += L * L;
    }
    return s2 > 0 ? s * s / s2 : 0;
}

/* Adds one test from the observations of a and b; returns *added = 0 when a set has fewer than
 * `need` observations. With perm (a row list), a set of several sequences, and more than one
 * pooled cell, the test is a permutation test. */
static int add_test(sl_vtests *v, const char *name, const obs *a, const obs *b, size_t need,
                    const sl_verify_two_opts *o, perm_row *perm, size_t *n_perm, int *added)
{
    *added = 0;
    size_t na = a->koff[a->n], nb = b->koff[b->n];
    if (na < need || nb < need || na == 0 || nb == 0) return SL_OK;
    uint64_t *cats = NULL;
    uint32_t *cat = NULL;
    size_t *soff = NULL, k;
    int rc = categories(a, b, &cats, &k);
    if (rc) return rc;
    sl_vtest *t = sl_vtests_add(v, name, "other-sample", k, 0, 1);
    if (!t) {
        free(cats);
        return SL_EFAIL;
    }
    for (size_t i = 0; i < na; i++) t->counts[cat_of(cats, k, a->key[i])]++;
    for (size_t i = 0; i < nb; i++) t->counts_b[cat_of(cats, k, b->key[i])]++;
    *added = 1;
    if (!perm || a->n < 2 || b->n < 2) goto done;
    sl_gof gx, gg;
    if ((rc = sl_stats_homogeneity(t->counts, t->counts_b, k, SL_GOF_PEARSON, &gx)) ||
        (rc = sl_stats_homogeneity(t->counts, t->counts_b, k, SL_GOF_G, &gg)))
        goto done;
    if (gx.n_cells < 2) goto done; /* the core reports it as degenerate */
    perm_row *pr = &perm[*n_perm];
    *pr = (perm_row){.row = v->n - 1, .k = k, .n_b = nb, .cells = gx.n_cells, .df = gx.df, .p_pearson = gx.p_value,
                     .g = gg.stat, .p_g = gg.p_value};
    double d = 0;
    for (size_t j = 0; j < k; j++) d += fabs((double)t->counts[j] / (double)na - (double)t->counts_b[j] / (double)nb);
    pr->tv = 0.5 * d;
    tv_ci(pr->tv, k, n_eff(a), n_eff(b), o->base.level, &pr->tv_lo, &pr->tv_hi);
    /* The observations' categories, a's sequences then b's. */
    cat = sl_malloc((na + nb + 1) * sizeof *cat);
    soff = sl_malloc((a->n + b->n + 1) * sizeof *soff);
    if (!cat || !soff) {
        rc = SL_EFAIL;
        goto done;
    }
    for (size_t i = 0; i < na; i++) cat[i] = (uint32_t)cat_of(cats, k, a->key[i]);
    for (size_t i = 0; i < nb; i++) cat[na + i] = (uint32_t)cat_of(cats, k, b->key[i]);
    for (size_t i = 0; i <= a->n; i++) soff[i] = a->koff[i];
    for (size_t i = 1; i <= b->n; i++) soff[a->n + i] = na + b->koff[i];
    double p_ge, p_gt;
    if ((rc = permutation_p(cat, soff, a->n, b->n, k, o->permutations, gx.stat, o->base.seed, 5000 + pr->row, &p_ge,
                            &p_gt)))
        goto done;
    /* Replace the count test by a fixed one carrying the permutation p-value (same row). */
    sl_vtest *ft = &v->t[v->n - 1];
    free(ft->counts);
    free(ft->counts_b);
    ft->counts = ft->counts_b = NULL;
    ft->k = 0;
    ft->fixed_method = "permutation";
    ft->fixed_n = na;
    ft->fixed_stat = gx.stat;
    ft->fixed_p = p_ge;
    gsl_rng *ur = sl_rng_alloc(o->base.seed, SL_STREAM_BOOT, 6000 + pr->row);
    if (!ur) {
        rc = SL_EFAIL;
        goto done;
    }
    pr->p_random = sl_stats_randomized_p(p_ge, p_gt, sl_rng_uniform53(ur));
    gsl_rng_free(ur);
    (*n_perm)++;
done:
    free(cats);
    free(cat);
    free(soff);
    return rc;
}

static size_t max_per_seq(const obs *o)
{
    size_t m = 0;
    for (size_t i = 0; i < o->n; i++)
        if (o->koff[i + 1] - o->koff[i] > m) m = o->koff[i + 1] - o->koff[i];
    return m;
}

void sl_verify_two_result_free(sl_verify_two_result *r)
{
    if (!r) return;
    sl_verify_result_free(r->core);
    free(r);
}

#define N_MULTI 3 /* block2_all, block3_all, all */

int sl_verify_two_run(const sl_seqs *a, const sl_seqs *b, const sl_verify_two_opts *o, sl_verify_two_result **out)
{
    *out = NULL;
    if (!(o->base.level > 0 && o->base.level < 1))
        return sl_fail(SL_EINPUT, "level: %g, expected 0 < level < 1", o->base.level);
    if (!(o->base.tv_delta > 0 && o->base.tv_delta <= 1))
        return sl_fail(SL_EINPUT, "tv: %g, expected 0 < tv <= 1", o->base.tv_delta);
    if (o->permutations < 1) return sl_fail(SL_EINPUT, "permutations: %zu, expected >= 1", o->permutations);
    if (o->min_sequences < 1) return sl_fail(SL_EINPUT, "min_sequences: 0, expected >= 1");
    if (a->n == 0 || b->n == 0) return sl_fail(SL_EINPUT, "two-sample: an empty set of sequences");
    sl_verify_two_result *res = calloc(1, sizeof *res);
    sl_vtests v = {0};
    obs oa = {0}, ob = {0};
    perm_row perm[N_MULTI];
    size_t n_perm = 0;
    int rc = SL_OK, added;
    char name[32];
    if (!res || !(res->core = sl_verify_result_new())) {
        rc = sl_fail(SL_EFAIL, "out of memory allocating the two-sample result");
        goto done;
    }
    res->seqs_a = a->n;
    res->seqs_b = b->n;
    res->tokens_a = a->off[a->n];
    res->tokens_b = b->off[b->n];
    /* Per-sequence tests: one observation per sequence. */
    if ((rc = obs_make(a, OBS_LENGTH, 0, &oa)) || (rc = obs_make(b, OBS_LENGTH, 0, &ob))) goto done;
    if ((rc = add_test(&v, "length", &oa, &ob, o->min_sequences, o, NULL, NULL, &added))) goto done;
    for (size_t j = 1; j <= o->max_positions; j++) {
        obs_free(&oa);
        obs_free(&ob);
        if ((rc = obs_make(a, OBS_POSITION, j, &oa)) || (rc = obs_make(b, OBS_POSITION, j, &ob))) goto done;
        snprintf(name, sizeof name, "position_%zu", j);
        if ((rc = add_test(&v, name, &oa, &ob, o->min_sequences, o, NULL, NULL, &added))) goto done;
        if (!added) break; /* fewer sequences reach j + 1 */
        res->positions = j;
    }
    for (size_t m = 2; m <= 3; m++) {
        obs_free(&oa);
        obs_free(&ob);
        if ((rc = obs_make(a, OBS_FIRST, m, &oa)) || (rc = obs_make(b, OBS_FIRST, m, &ob))) goto done;
        snprintf(name, sizeof name, "block%zu", m);
        if ((rc = add_test(&v, name, &oa, &ob, o->min_sequences, o, NULL, NULL, &added))) goto done;
    }
    /* Every-token tests: several observations per sequence. */
    for (size_t m = 2; m <= 4; m++) {
        size_t len = m == 4 ? 1 : m; /* all last */
        obs_free(&oa);
        obs_free(&ob);
        if ((rc = obs_make(a, OBS_BLOCKS, len, &oa)) || (rc = obs_make(b, OBS_BLOCKS, len, &ob))) goto done;
        /* With at most one block per sequence the test repeats block2, block3 or position_1. */
        if (max_per_seq(&oa) < 2 && max_per_seq(&ob) < 2) continue;
        if (len == 1) snprintf(name, sizeof name, "all");
        else snprintf(name, sizeof name, "block%zu_all", len);
        if ((rc = add_test(&v, name, &oa, &ob, 1, o, perm, &n_perm, &added))) goto done;
    }
    if ((rc = sl_verify_finish(&v, &o->base, res->core))) goto done;
    sl_verify_result *c = res->core;
    c->level = o->base.level;
    c->tv_delta = o->base.tv_delta;
    c->tokens = res->tokens_a;
    for (size_t i = 0; i < n_perm; i++) {
        sl_verify_test *r = &c->test[perm[i].row];
        r->categories = perm[i].k;
        r->n_b = perm[i].n_b;
        r->cells = perm[i].cells;
        r->df = perm[i].df;
        r->p_pearson = perm[i].p_pearson;
        r->g = perm[i].g;
        r->p_g = perm[i].p_g;
        r->tv = perm[i].tv;
        r->tv_lo = perm[i].tv_lo;
        r->tv_hi = perm[i].tv_hi;
        r->p_random = perm[i].p_random;
        res->permutations = o->permutations;
    }
    *out = res;
    res = NULL;
done:
    obs_free(&oa);
    obs_free(&ob);
    sl_vtests_free(&v);
    sl_verify_two_result_free(res);
    return rc;
}

/* ---- report ---- */

int sl_verify_two_report(const sl_verify_two_result *r, sl_table **tables, size_t *n_tables)
{
    *n_tables = 0;
    static const sl_colspec vcols[] = {
        SL_COL_I("sequences_a"), SL_COL_I("sequences_b"), SL_COL_I("tokens_a"), SL_COL_I("tokens_b"),
        SL_COL_I("positions"), SL_COL_I("permutations"), SL_COL_I("tests"), SL_COL_I("rejected_tests"),
        SL_COL_D("min_p", "%.3g"), SL_COL_D("min_p_holm", "%.3g"), SL_COL_D("level", "%g"),
        SL_COL_D("tv_delta", "%g"), SL_COL_D("power_level", "%.3g"), SL_COL_S("verdict")};
    static const sl_colspec tcols[] = {
        SL_COL_S("test"), SL_COL_I("n_a"), SL_COL_I("n_b"), SL_COL_I("categories"), SL_COL_I("cells"),
        SL_COL_I("df"), SL_COL_D("pearson", "%.3f"), SL_COL_D("p_pearson", "%.3g"), SL_COL_D("g", "%.3f"),
        SL_COL_D("p_g", "%.3g"), SL_COL_S("method"), SL_COL_D("p_value", "%.3g"), SL_COL_D("p_holm", "%.3g"),
        SL_COL_I("reject"), SL_COL_D("tv", "%.4f"), SL_COL_D("tv_lo", "%.4f"), SL_COL_D("tv_hi", "%.4f"),
        SL_COL_D("power", "%.3f")};
    const sl_verify_result *c = r->core;
    sl_table *vt = SL_TABLE_NEW("verdict", vcols), *tt = SL_TABLE_NEW("tests", tcols);
    sl_table_row(vt);
    sl_table_seti(vt, "sequences_a", (int64_t)r->seqs_a);
    sl_table_seti(vt, "sequences_b", (int64_t)r->seqs_b);
    sl_table_seti(vt, "tokens_a", (int64_t)r->tokens_a);
    sl_table_seti(vt, "tokens_b", (int64_t)r->tokens_b);
    sl_table_seti(vt, "positions", (int64_t)r->positions);
    sl_table_seti(vt, "permutations", (int64_t)r->permutations);
    sl_table_seti(vt, "tests", (int64_t)c->n_tests);
    sl_table_seti(vt, "rejected_tests", (int64_t)c->n_rejected);
    sl_table_setd(vt, "min_p", c->min_p);
    sl_table_setd(vt, "min_p_holm", c->min_p_holm);
    sl_table_setd(vt, "level", c->level);
    sl_table_setd(vt, "tv_delta", c->tv_delta);
    sl_table_setd(vt, "power_level", c->power_level);
    sl_table_sets(vt, "verdict", c->rejected ? "different" : "consistent");
    for (size_t i = 0; i < c->n_rows; i++) {
        const sl_verify_test *e = &c->test[i];
        sl_table_row(tt);
        sl_table_sets(tt, "test", e->name);
        sl_table_seti(tt, "n_a", (int64_t)e->n);
        sl_table_seti(tt, "n_b", (int64_t)e->n_b);
        sl_table_seti(tt, "categories", (int64_t)e->categories);
        sl_table_seti(tt, "cells", (int64_t)e->cells);
        sl_table_seti(tt, "df", (int64_t)e->df);
        sl_table_setd(tt, "pearson", e->pearson);
        sl_table_setd(tt, "p_pearson", e->p_pearson);
        sl_table_setd(tt, "g", e->g);
        sl_table_setd(tt, "p_g", e->p_g);
        sl_table_sets(tt, "method", e->method);
        sl_table_setd(tt, "p_value", e->p_value);
        sl_table_setd(tt, "p_holm", e->p_holm);
        if (e->reject >= 0) sl_table_seti(tt, "reject", e->reject);
        sl_table_setd(tt, "tv", e->tv);
        sl_table_setd(tt, "tv_lo", e->tv_lo);
        sl_table_setd(tt, "tv_hi", e->tv_hi);
        sl_table_setd(tt, "power", e->power);
    }
    tables[0] = vt;
    tables[1] = tt;
    int rc = SL_OK;
    for (size_t i = 0; i < 2 && !rc; i++) rc = tables[i] ? sl_table_status(tables[i]) : SL_EFAIL;
    if (rc) {
        sl_table_free(vt);
        sl_table_free(tt);
        tables[0] = tables[1] = NULL;
        return rc;
    }
    *n_tables = 2;
    return SL_OK;
}
