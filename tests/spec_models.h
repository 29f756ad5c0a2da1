/*
 * spec_models.h: tiny synthetic language models for exact tests of the sampler.
 *
 * A "hash model" gives every prefix its own pmf over a small vocabulary, generated from a hash of
 * (seed, prefix): a Dirichlet(1) draw with some entries zeroed, so supports differ between target
 * and draft. A draft can be a mixture of the target's pmf and its own, to make beta interesting.
 * With context_free set the pmf depends only on the prefix length (i.i.d.-per-position families).
 */
#ifndef SPEC_MODELS_H
#define SPEC_MODELS_H

#include <math.h>
#include <stdint.h>
#include <string.h>

#include "sl_common.h"
#include "sl_spec.h"

#define HM_MAX_LEN 64

typedef struct {
    size_t V;
    uint64_t seed;          /* this model's own pmfs */
    uint64_t target_seed;   /* the target's seed, mixed in when mix > 0 */
    double mix;             /* pmf = mix * target_pmf + (1 - mix) * own_pmf */
    double zero_frac;       /* chance that an entry of a generated pmf is zeroed */
    int context_free;
    int32_t state[HM_MAX_LEN];
    size_t len;
    size_t calls;
} hash_model;

static inline uint64_t hm_mix64(uint64_t z)
{
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

/* The generated pmf for a prefix under one seed. */
static inline void hm_raw_pmf(uint64_t seed, const int32_t *prefix, size_t len, int context_free, size_t V,
                              double zero_frac, double *out)
{
    uint64_t h = hm_mix64(seed + 0x9e3779b97f4a7c15ULL * (len + 1));
    if (!context_free)
        for (size_t i = 0; i < len; i++) h = hm_mix64(h ^ ((uint64_t)prefix[i] + 0x632be59bd9b4e019ULL * (i + 1)));
    double sum = 0;
    for (size_t x = 0; x < V; x++) {
        h = hm_mix64(h + 0x9e3779b97f4a7c15ULL);
        double u = ((h >> 11) + 0.5) * 0x1.0p-53;
        h = hm_mix64(h + 0x9e3779b97f4a7c15ULL);
        double z = ((h >> 11) + 0.5) * 0x1.0p-53;
        out[x] = z < zero_frac ? 0 : -log(u);
        sum += out[x];
    }
    if (sum == 0) {
        out[h % V] = 1;
        sum = 1;
    }
    for (size_t x = 0; x < V; x++) out[x] /= sum;
}

static inline void hm_pmf(const hash_model *m, const int32_t *prefix, size_t len, double *out)
{
    hm_raw_pmf(m->seed, prefix, len, m->context_free, m->V, m->zero_frac, out);
    if (m->mix > 0) {
        double t[16];
        hm_raw_pmf(m->target_seed, prefix, len, m->context_free, m->V, m->zero_frac, t);
        for (size_t x = 0; x < m->V; x++) out[x] = m->mix * t[x] + (1 - m->mix) * out[x];
    }
}

static inline int hm_extend(void *self, const int32_t *tokens, size_t n, size_t n_rows, double *dists)
{
    hash_model *m = self;
    if (m->len + n > HM_MAX_LEN) return sl_fail(SL_EINPUT, "hash model: sequence too long");
    m->calls++;
    for (size_t j = 0; j < n; j++) {
        m->state[m->len++] = tokens[j];
        if (j >= n - n_rows) hm_pmf(m, m->state, m->len, dists + (j - (n - n_rows)) * m->V);
    }
    return SL_OK;
}

static inline int hm_truncate(void *self, size_t len)
{
    hash_model *m = self;
    if (len > m->len) return sl_fail(SL_EINPUT, "hash model: truncate beyond length");
    m->len = len;
    return SL_OK;
}

static inline sl_lm hm_lm(hash_model *m)
{
    sl_lm lm = {m, m->V, hm_extend, hm_truncate};
    return lm;
}

#endif
