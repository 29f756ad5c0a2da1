/*
 * sl_spec.c: Algorithm 1 (draft, verify, accept or resample, bonus), the acceptance rules, the
 * deliberately wrong variants, and the decode loop over sl_lm models.
 *
 * The wrong variants live next to the right code on purpose: each is one branch that a reviewer
 * can compare with the exact rule, and the tests prove that every one of them changes the output
 * distribution while the exact rules do not.
 */
#include "sl_spec.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "sl_common.h"

/* Candidate-list length of the "paired residual" bug: engines that keep top-k candidate lists use
 * a few dozen; 16 keeps the bug visible at small vocabularies too (pairing by rank is wrong for any
 * length). */
#define PAIRED_LIST_LEN 16

static const char *const rule_names[SL_RULE_COUNT] = {
    [SL_RULE_EXACT] = "exact",
    [SL_RULE_LENIENT] = "lenient",
    [SL_RULE_LENIENT_T0] = "lenient-t0",
    [SL_RULE_SAMPLER_MATCH] = "sampler-match",
    [SL_BUG_DRAFT_ARGMAX] = "bug-draft-argmax",
    [SL_BUG_DRAFT_TOPK] = "bug-draft-topk",
    [SL_BUG_RESIDUAL_PAIRED] = "bug-residual-paired",
    [SL_BUG_RESAMPLE_FROM_P] = "bug-resample-from-p",
    [SL_BUG_LOWPREC_DRAFT] = "bug-lowprec-draft",
    [SL_BUG_P_INPLACE] = "bug-p-inplace",
    [SL_BUG_SHARED_UNIFORM] = "bug-shared-uniform",
};

const char *sl_rule_name(sl_rule rule) { return rule < SL_RULE_COUNT ? rule_names[rule] : "?"; }

int sl_rule_parse(const char *s, sl_rule *out)
{
    for (int r = 0; r < SL_RULE_COUNT; r++)
        if (strcmp(s, rule_names[r]) == 0) {
            *out = (sl_rule)r;
            return SL_OK;
        }
    return sl_fail(SL_EINPUT, "rule: '%s' is not a known rule (exact, lenient, lenient-t0, sampler-match, bug-...)", s);
}

int sl_rule_is_bug(sl_rule rule) { return rule >= SL_BUG_DRAFT_ARGMAX && rule < SL_RULE_COUNT; }

int sl_rule_is_exact(sl_rule rule, double lenience)
{
    return rule == SL_RULE_EXACT || rule == SL_RULE_SAMPLER_MATCH ||
           ((rule == SL_RULE_LENIENT || rule == SL_RULE_LENIENT_T0) && lenience == 1.0);
}

int sl_spec_config_validate(const sl_spec_config *cfg)
{
    if (cfg->rule >= SL_RULE_COUNT) return sl_fail(SL_EINPUT, "rule: unknown rule %d", (int)cfg->rule);
    if (!(cfg->lenience > 0 && cfg->lenience <= 1))
        return sl_fail(SL_EINPUT, "lenience: %g is outside (0, 1]", cfg->lenience);
    if (cfg->bug_k < 1) return sl_fail(SL_EINPUT, "bug_k: %zu must be >= 1", cfg->bug_k);
    return SL_OK;
}

/* ---- the normal randomness source ---- */

static gsl_rng *stream_rng(sl_rand_rng *r, int stream)
{
    switch (stream) {
    case SL_STREAM_DRAFT: return r->draft;
    case SL_STREAM_ACCEPT: return r->accept;
    case SL_STREAM_TARGET: return r->target;
    default: return r->resample;
    }
}

static size_t rng_categorical(sl_rand *self, int stream, const double *pmf, const sl_alias *alias, size_t V)
{
    sl_rand_rng *r = (sl_rand_rng *)self;
    double u = sl_rng_uniform53(stream_rng(r, stream));
    return alias ? sl_alias_sample_u(alias, u) : sl_dist_sample_u(pmf, V, u);
}

static unsigned rng_uniform_new(sl_rand *self, int stream)
{
    sl_rand_rng *r = (sl_rand_rng *)self;
    unsigned h = r->n_slots++;
    r->slots[h % 64] = sl_rng_uniform53(stream_rng(r, stream));
    return h;
}

static int rng_uniform_below(sl_rand *self, unsigned h, double threshold)
{
    sl_rand_rng *r = (sl_rand_rng *)self;
    return r->slots[h % 64] < threshold;
}

int sl_rand_rng_init(sl_rand_rng *r, uint64_t seed, uint64_t item)
{
    memset(r, 0, sizeof *r);
    r->base.categorical = rng_categorical;
    r->base.uniform_new = rng_uniform_new;
    r->base.uniform_below = rng_uniform_below;
    r->draft = sl_rng_alloc(seed, SL_STREAM_DRAFT, item);
    r->accept = sl_rng_alloc(seed, SL_STREAM_ACCEPT, item);
    r->resample = sl_rng_alloc(seed, SL_STREAM_RESAMPLE, item);
    r->target = sl_rng_alloc(seed, SL_STREAM_TARGET, item);
    if (!r->draft || !r->accept || !r->resample || !r->target) {
        sl_rand_rng_free(r);
        return SL_EFAIL;
    }
    return SL_OK;
}

void sl_rand_rng_reseed(sl_rand_rng *r, uint64_t seed, uint64_t item)
{
    sl_rng_reseed(r->draft, seed, SL_STREAM_DRAFT, item);
    sl_rng_reseed(r->accept, seed, SL_STREAM_ACCEPT, item);
    sl_rng_reseed(r->resample, seed, SL_STREAM_RESAMPLE, item);
    sl_rng_reseed(r->target, seed, SL_STREAM_TARGET, item);
    r->n_slots = 0;
}

void sl_rand_rng_free(sl_rand_rng *r)
{
    if (r->draft) gsl_rng_free(r->draft);
    if (r->accept) gsl_rng_free(r->accept);
    if (r->resample) gsl_rng_free(r->resample);
    if (r->target) gsl_rng_free(r->target);
    r->draft = r->accept = r->resample = r->target = NULL;
}

/* ---- one iteration ---- */

sl_spec_work *sl_spec_work_alloc(size_t gamma_max, size_t V)
{
    sl_spec_work *w = sl_calloc(1, sizeof *w);
    if (!w) return NULL;
    w->gamma_max = gamma_max;
    w->V = V;
    w->residual = sl_malloc(V * sizeof *w->residual);
    w->tmp = sl_malloc(V * sizeof *w->tmp);
    w->tmp2 = sl_malloc(V * sizeof *w->tmp2);
    w->dw = sl_dist_work_alloc(V);
    if (!w->residual || !w->tmp || !w->tmp2 || !w->dw) {
        sl_spec_work_free(w);
        return NULL;
    }
    return w;
}

void sl_spec_work_free(sl_spec_work *w)
{
    if (!w) return;
    free(w->residual);
    free(w->tmp);
    free(w->tmp2);
    sl_dist_work_free(w->dw);
    free(w);
}

/* Rounds to bfloat16 (8 significant bits, round to nearest even), as a low-precision draft
 * pipeline would store its logits. */
static double round_bf16(double x)
{
    float f = (float)x;
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    u += 0x7fff + ((u >> 16) & 1);
    u &= 0xffff0000u;
    memcpy(&f, &u, sizeof f);
    return f;
}

size_t sl_spec_draft(const sl_spec_config *cfg, const double *q, const sl_spec_accel *accel, size_t V,
                     sl_rand *rand, sl_spec_work *w)
{
    switch (cfg->rule) {
    case SL_RULE_LENIENT_T0:
    case SL_BUG_DRAFT_ARGMAX: return sl_dist_argmax(q, V);
    case SL_BUG_DRAFT_TOPK:
        sl_dist_top_k(q, V, cfg->bug_k, w->tmp, w->dw);
        return rand->categorical(rand, SL_STREAM_DRAFT, w->tmp, NULL, V);
    case SL_BUG_LOWPREC_DRAFT: {
        /* Logits log q rounded to bf16, softmaxed again: the draft is drawn from this q' while
         * the ratio below still uses q. */
        double mx = -INFINITY;
        for (size_t x = 0; x < V; x++) {
            w->tmp[x] = q[x] > 0 ? round_bf16(log(q[x])) : -INFINITY;
            if (w->tmp[x] > mx) mx = w->tmp[x];
        }
        double sum = 0;
        for (size_t x = 0; x < V; x++) {
            w->tmp[x] = q[x] > 0 ? exp(w->tmp[x] - mx) : 0;
            sum += w->tmp[x];
        }
        for (size_t x = 0; x < V; x++) w->tmp[x] /= sum;
        return rand->categorical(rand, SL_STREAM_DRAFT, w->tmp, NULL, V);
    }
    default: return rand->categorical(rand, SL_STREAM_DRAFT, q, accel ? accel->q_alias : NULL, V);
    }
}

/* The token emitted after the draft at a position was rejected. */
static size_t resample_after_rejection(const sl_spec_config *cfg, size_t V, const double *q, double *p,
                                       const sl_spec_accel *acc, sl_rand *rand, sl_spec_work *w)
{
    switch (cfg->rule) {
    case SL_BUG_RESAMPLE_FROM_P:
        return rand->categorical(rand, SL_STREAM_RESAMPLE, p, acc ? acc->p_alias : NULL, V);
    case SL_BUG_RESIDUAL_PAIRED: {
        /* max(0, p_(j) - q_(j)) over rank j of two separately sorted candidate lists, then the
         * p-list's token at the drawn rank: pairs probabilities of different tokens. */
        size_t len = V < PAIRED_LIST_LEN ? V : PAIRED_LIST_LEN;
        sl_dist_sort_desc(p, V, w->dw);
        uint32_t *pidx = (uint32_t *)w->tmp2; /* tmp2 holds V doubles: room for V ids */
        memcpy(pidx, w->dw->idx, len * sizeof *pidx);
        sl_dist_sort_desc(q, V, w->dw);
        double z = 0;
        for (size_t j = 0; j < len; j++) {
            double d = p[pidx[j]] - q[w->dw->idx[j]];
            w->tmp[j] = d > 0 ? d : 0;
            z += w->tmp[j];
        }
        if (z <= 0) return pidx[0];
        for (size_t j = 0; j < len; j++) w->tmp[j] /= z;
        return pidx[rand->categorical(rand, SL_STREAM_RESAMPLE, w->tmp, NULL, len)];
    }
    case SL_BUG_P_INPLACE:
        /* A sampling filter applied to the shared target buffer before the residual is taken. */
        sl_dist_top_k(p, V, cfg->bug_k, p, w->dw);
        sl_dist_residual(p, q, V, w->residual);
        return rand->categorical(rand, SL_STREAM_RESAMPLE, w->residual, NULL, V);
    default:
        if (acc && acc->residual_alias)
            return rand->categorical(rand, SL_STREAM_RESAMPLE, NULL, acc->residual_alias, V);
        sl_dist_residual(p, q, V, w->residual);
        return rand->categorical(rand, SL_STREAM_RESAMPLE, w->residual, NULL, V);
    }
}

int sl_spec_verify(const sl_spec_config *cfg, size_t gamma, size_t V, const double *q, double *p,
                   const int32_t *drafts, const sl_spec_accel *accel, sl_rand *rand, sl_spec_work *w,
                   sl_spec_outcome *out)
{
    if (gamma < 1 || gamma > SL_SPEC_GAMMA_MAX)
        return sl_fail(SL_EINPUT, "gamma = %zu is outside [1, %d]", gamma, SL_SPEC_GAMMA_MAX);
    out->n_accepted = 0;
    out->bonus = 0;
    const double l = cfg->lenience;
    /* The shared-uniform bug draws one r for the whole iteration. */
    unsigned shared = cfg->rule == SL_BUG_SHARED_UNIFORM ? rand->uniform_new(rand, SL_STREAM_ACCEPT) : 0;
    for (size_t i = 0; i < gamma; i++) {
        const double *qi = q + i * V;
        double *pi = p + i * V;
        const sl_spec_accel *acc = accel ? &accel[i] : NULL;
        int32_t x = drafts[i];
        if (x < 0 || (size_t)x >= V) return sl_fail(SL_EINPUT, "draft token %d is outside [0, %zu)", x, V);
        int accept;
        size_t emit = 0;
        if (cfg->rule == SL_RULE_SAMPLER_MATCH) {
            emit = rand->categorical(rand, SL_STREAM_TARGET, pi, acc ? acc->p_alias : NULL, V);
            accept = emit == (size_t)x;
        } else if (cfg->rule == SL_RULE_LENIENT_T0) {
            /* The rule tests the pre-argmax target pmf; a rejection emits the target's argmax. */
            size_t best = sl_dist_argmax(pi, V);
            accept = pi[x] >= l * pi[best];
            emit = best;
        } else {
            /* r < min(1, p/(l q)); a threshold >= 1 always accepts. q(x) = 0 only happens for
             * tokens a wrong variant drew outside q's support: accept then iff p(x) > 0. */
            double thr = qi[x] > 0 ? pi[x] / ((cfg->rule == SL_RULE_LENIENT ? l : 1.0) * qi[x])
                                   : (pi[x] > 0 ? 1.0 : 0.0);
            unsigned h = cfg->rule == SL_BUG_SHARED_UNIFORM ? shared : rand->uniform_new(rand, SL_STREAM_ACCEPT);
            accept = rand->uniform_below(rand, h, thr);
            if (!accept) emit = resample_after_rejection(cfg, V, qi, pi, acc, rand, w);
        }
        if (!accept) {
            out->tokens[i] = (int32_t)emit;
            out->n_emitted = i + 1;
            return SL_OK;
        }
        out->tokens[i] = x;
        out->n_accepted++;
    }
    const double *pb = p + gamma * V;
    size_t t = cfg->rule == SL_RULE_LENIENT_T0
                   ? sl_dist_argmax(pb, V)
                   : rand->categorical(rand, SL_STREAM_RESAMPLE, pb, accel ? accel[gamma].p_alias : NULL, V);
    out->tokens[gamma] = (int32_t)t;
    out->n_emitted = gamma + 1;
    out->bonus = 1;
    return SL_OK;
}

/* ---- decoding with models ---- */

typedef struct {
    double *q;      /* (gamma, V) draft pmfs of this iteration */
    double *p;      /* (gamma + 1, V) target pmfs of this iteration */
    int32_t *seq;   /* (n_prompt + max_new + gamma + 1) committed tokens, then scratch */
    int32_t *feed;  /* (n_prompt + gamma + 1) tokens handed to a model in one call */
    double beta[SL_SPEC_GAMMA_MAX];
} decode_bufs;

static void decode_bufs_free(decode_bufs *b)
{
    free(b->q);
    free(b->p);
    free(b->seq);
    free(b->feed);
}

static int decode_bufs_alloc(decode_bufs *b, size_t gamma, size_t V, size_t n_prompt, size_t max_new)
{
    memset(b, 0, sizeof *b);
    b->q = sl_malloc(gamma * V * sizeof *b->q);
    b->p = sl_malloc((gamma + 1) * V * sizeof *b->p);
    b->seq = sl_malloc((n_prompt + max_new + gamma + 1) * sizeof *b->seq);
    b->feed = sl_malloc((n_prompt + gamma + 1) * sizeof *b->feed);
    if (!b->q || !b->p || !b->seq || !b->feed) {
        decode_bufs_free(b);
        return SL_EFAIL;
    }
    return SL_OK;
}

int sl_spec_decode(const sl_spec_config *cfg, size_t gamma, sl_lm *target, sl_lm *draft,
                   const int32_t *prompt, size_t n_prompt, size_t max_new, int32_t eos, sl_rand *rand,
                   int32_t *out, size_t *n_out, sl_spec_stats *stats, sl_spec_on_iter on_iter, void *ctx)
{
    *n_out = 0;
    memset(stats, 0, sizeof *stats);
    int rc = sl_spec_config_validate(cfg);
    if (rc) return rc;
    if (gamma < 1 || gamma > SL_SPEC_GAMMA_MAX)
        return sl_fail(SL_EINPUT, "gamma: %zu is outside [1, %d]", gamma, SL_SPEC_GAMMA_MAX);
    if (n_prompt < 1) return sl_fail(SL_EINPUT, "the prompt is empty: at least one token is needed");
    if (target->vocab_size != draft->vocab_size)
        return sl_fail(SL_EINPUT, "vocabulary mismatch: target has %zu tokens, draft has %zu",
                       target->vocab_size, draft->vocab_size);
    const size_t V = target->vocab_size;
    decode_bufs b;
    if (decode_bufs_alloc(&b, gamma, V, n_prompt, max_new)) return SL_EFAIL;
    sl_spec_work *w = sl_spec_work_alloc(gamma, V);
    if (!w) {
        decode_bufs_free(&b);
        return SL_EFAIL;
    }
    memcpy(b.seq, prompt, n_prompt * sizeof *prompt);
    size_t L = n_prompt;        /* committed length */
    size_t tgt_fed = 0, dft_fed = 0; /* tokens each model's state holds */
    int32_t drafts[SL_SPEC_GAMMA_MAX];
    sl_spec_outcome oc;
    int stop = 0;
    while (!stop && L - n_prompt < max_new) {
        double draft_s = 0, verify_s = 0, sample_s = 0;
        /* Draft: feed what the draft has not seen of the committed sequence (one token, or two after
         * an iteration that accepted every draft), then one token per further draft position. */
        for (size_t i = 0; i < gamma; i++) {
            double ta = sl_now_s();
            if (i == 0) rc = draft->extend(draft->self, b.seq + dft_fed, L - dft_fed, 1, b.q);
            else rc = draft->extend(draft->self, &drafts[i - 1], 1, 1, b.q + i * V);
            dft_fed = i == 0 ? L : dft_fed + 1;
            stats->draft_calls++;
            double ts = sl_now_s();
            draft_s += ts - ta;
            if (rc) break;
            drafts[i] = (int32_t)sl_spec_draft(cfg, b.q + i * V, NULL, V, rand, w);
            sample_s += sl_now_s() - ts;
        }
        if (rc) break;
        /* Verify: one target call scores the pending committed tokens and all gamma drafts. */
        size_t n_feed = L - tgt_fed;
        memcpy(b.feed, b.seq + tgt_fed, n_feed * sizeof *b.feed);
        memcpy(b.feed + n_feed, drafts, gamma * sizeof *drafts);
        double tv = sl_now_s();
        rc = target->extend(target->self, b.feed, n_feed + gamma, gamma + 1, b.p);
        verify_s = sl_now_s() - tv;
        stats->target_calls++;
        if (rc) break;
        tgt_fed = L + gamma;
        for (size_t i = 0; i < gamma; i++) b.beta[i] = sl_dist_beta(b.p + i * V, b.q + i * V, V);
        double ts = sl_now_s();
        rc = sl_spec_verify(cfg, gamma, V, b.q, b.p, drafts, NULL, rand, w, &oc);
        sample_s += sl_now_s() - ts;
        if (rc) break;
        /* Commit, stopping at eos or at max_new. */
        size_t keep = oc.n_emitted;
        for (size_t j = 0; j < oc.n_emitted; j++)
            if (eos >= 0 && oc.tokens[j] == eos) {
                keep = j + 1;
                stop = 1;
                break;
            }
        if (L - n_prompt + keep > max_new) keep = max_new - (L - n_prompt);
        memcpy(b.seq + L, oc.tokens, keep * sizeof *oc.tokens);
        /* Both states stay valid up to the accepted drafts; the emitted last token is pending. */
        size_t valid = L + oc.n_accepted;
        L += keep;
        if (tgt_fed > valid) {
            rc = target->truncate(target->self, valid);
            tgt_fed = valid;
        }
        if (!rc && dft_fed > valid) {
            rc = draft->truncate(draft->self, valid);
            dft_fed = valid;
        }
        stats->iterations++;
        stats->tokens_emitted += keep;
        stats->drafted += gamma;
        stats->accepted += oc.n_accepted;
        for (size_t i = 0; i < gamma; i++) {
            if (i <= oc.n_accepted) stats->reached_at[i]++;
            if (i < oc.n_accepted) stats->accepted_at[i]++;
        }
        stats->draft_s += draft_s;
        stats->verify_s += verify_s;
        stats->sample_s += sample_s;
        if (!rc && on_iter) {
            sl_spec_iter_record rec = {stats->iterations - 1, gamma, oc.n_accepted, oc.n_emitted, drafts,
                                       oc.tokens, b.beta, draft_s, verify_s, sample_s};
            rc = on_iter(ctx, &rec);
        }
        if (rc) break;
    }
    if (rc == SL_OK) {
        *n_out = L - n_prompt;
        memcpy(out, b.seq + n_prompt, *n_out * sizeof *out);
    }
    decode_bufs_free(&b);
    sl_spec_work_free(w);
    return rc;
}

int sl_spec_autoregressive(sl_lm *target, const int32_t *prompt, size_t n_prompt, size_t max_new,
                           int32_t eos, sl_rand *rand, int32_t *out, size_t *n_out, double *target_s)
{
    *n_out = 0;
    *target_s = 0;
    if (n_prompt < 1) return sl_fail(SL_EINPUT, "the prompt is empty: at least one token is needed");
    const size_t V = target->vocab_size;
    double *p = sl_malloc(V * sizeof *p);
    if (!p) return SL_EFAIL;
    int rc = SL_OK;
    const int32_t *feed = prompt;
    size_t n_feed = n_prompt;
    while (*n_out < max_new) {
        double t0 = sl_now_s();
        rc = target->extend(target->self, feed, n_feed, 1, p);
        *target_s += sl_now_s() - t0;
        if (rc) break;
        int32_t t = (int32_t)rand->categorical(rand, SL_STREAM_TARGET, p, NULL, V);
        out[(*n_out)++] = t;
        if (eos >= 0 && t == eos) break;
        feed = &out[*n_out - 1];
        n_feed = 1;
    }
    free(p);
    return rc;
}
