/* sl_synth.c: synthetic context-dependent language models (see sl_synth.h). */
#include "sl_synth.h"

#include <gsl/gsl_randist.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "sl_common.h"

static const char *names[SL_SYNTH_COUNT] = {"noisy", "tempered", "identical", "uniform"};

const char *sl_synth_family_name(sl_synth_family f) { return f < SL_SYNTH_COUNT ? names[f] : "?"; }

int sl_synth_family_parse(const char *s, sl_synth_family *out)
{
    for (int i = 0; i < SL_SYNTH_COUNT; i++)
        if (!strcmp(s, names[i])) {
            *out = (sl_synth_family)i;
            return SL_OK;
        }
    return sl_fail(SL_EINPUT, "synthetic: '%s' is not one of noisy, tempered, identical, uniform", s);
}

struct sl_synth_lm {
    sl_synth_params sp;
    int role;
    int32_t *state;   /* (context) */
    size_t len;
    double *logits;   /* (V) */
    gsl_rng *rng;
    sl_dist_work *dw;
};

int sl_synth_alloc(const sl_synth_params *sp, int role, sl_synth_lm **out)
{
    *out = NULL;
    if (sp->V < 2) return sl_fail(SL_EINPUT, "vocab: %zu; expected >= 2", sp->V);
    if (!(sp->noise >= 0) || !isfinite(sp->noise)) return sl_fail(SL_EINPUT, "noise: %g; expected a finite value >= 0", sp->noise);
    if (!(sp->draft_temperature > 0) || !isfinite(sp->draft_temperature))
        return sl_fail(SL_EINPUT, "draft_temperature: %g; expected > 0", sp->draft_temperature);
    if (sp->context < 1) return sl_fail(SL_EINPUT, "context: expected >= 1");
    int rc = sl_sampling_validate(&sp->sampling);
    if (rc) return rc;
    sl_synth_lm *m = calloc(1, sizeof *m);
    if (!m) return sl_fail(SL_EFAIL, "out of memory");
    m->sp = *sp;
    m->role = role;
    m->state = malloc(sp->context * sizeof *m->state);
    m->logits = malloc(sp->V * sizeof *m->logits);
    m->rng = sl_rng_alloc(sp->seed, SL_STREAM_FAMILY, 0);
    m->dw = sl_dist_work_alloc(sp->V);
    if (!m->state || !m->logits || !m->rng || !m->dw) {
        sl_synth_free(m);
        return sl_fail(SL_EFAIL, "out of memory");
    }
    *out = m;
    return SL_OK;
}

void sl_synth_free(sl_synth_lm *m)
{
    if (!m) return;
    free(m->state);
    free(m->logits);
    if (m->rng) gsl_rng_free(m->rng);
    sl_dist_work_free(m->dw);
    free(m);
}

/* The pmf after the first len tokens of the state. */
static int next_pmf(sl_synth_lm *m, size_t len, double *out)
{
    size_t V = m->sp.V;
    uint64_t a = len >= 1 ? (uint64_t)m->state[len - 1] : 0xffffffffu, b = len >= 2 ? (uint64_t)m->state[len - 2] : 0xffffffffu;
    uint64_t ctx = a * 0x100000001b3ULL ^ (b + 0x9e3779b97f4a7c15ULL) * 0xbf58476d1ce4e5b9ULL;
    sl_rng_reseed(m->rng, m->sp.seed, SL_STREAM_FAMILY, ctx);
    double spread = 0.5 + 3.5 * sl_rng_uniform53(m->rng);
    for (size_t x = 0; x < V; x++) m->logits[x] = spread * gsl_ran_gaussian_ziggurat(m->rng, 1.0);
    if (m->role == 1) {
        switch (m->sp.family) {
        case SL_SYNTH_NOISY:
            sl_rng_reseed(m->rng, m->sp.seed, SL_STREAM_FAMILY, ctx ^ 0x5851f42d4c957f2dULL);
            for (size_t x = 0; x < V; x++) m->logits[x] += m->sp.noise * gsl_ran_gaussian_ziggurat(m->rng, 1.0);
            break;
        case SL_SYNTH_TEMPERED:
            for (size_t x = 0; x < V; x++) m->logits[x] /= m->sp.draft_temperature;
            break;
        case SL_SYNTH_UNIFORM:
            for (size_t x = 0; x < V; x++) m->logits[x] = 0;
            break;
        default: break;
        }
    }
    return sl_dist_standardise(m->logits, V, &m->sp.sampling, out, m->dw);
}

static int synth_extend(void *self, const int32_t *tokens, size_t n, size_t n_rows, double *dists)
{
    sl_synth_lm *m = self;
    if (n_rows < 1 || n_rows > n) return sl_fail(SL_EINPUT, "synthetic model: n_rows %zu outside [1, %zu]", n_rows, n);
    if (m->len + n > m->sp.context)
        return sl_fail(SL_EINPUT, "%zu tokens are longer than the context of %zu tokens", m->len + n, m->sp.context);
    for (size_t j = 0; j < n; j++)
        if (tokens[j] < 0 || (size_t)tokens[j] >= m->sp.V)
            return sl_fail(SL_EINPUT, "token %d outside the vocabulary [0, %zu)", tokens[j], m->sp.V);
    memcpy(m->state + m->len, tokens, n * sizeof *tokens);
    m->len += n;
    for (size_t r = 0; r < n_rows; r++) {
        int rc = next_pmf(m, m->len - n_rows + r + 1, dists + r * m->sp.V);
        if (rc) return rc;
    }
    return SL_OK;
}

static int synth_truncate(void *self, size_t len)
{
    sl_synth_lm *m = self;
    if (len > m->len) return sl_fail(SL_EINPUT, "synthetic model: truncate to %zu > length %zu", len, m->len);
    m->len = len;
    return SL_OK;
}

sl_lm sl_synth_lm_of(sl_synth_lm *m)
{
    sl_lm lm = {m, m->sp.V, synth_extend, synth_truncate};
    return lm;
}
