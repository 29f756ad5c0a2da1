/*
 * sl_spec.h: the speculative sampler (THEORY.md, Algorithm 1), its acceptance rules, the
 * deliberately wrong variants kept as negative controls, and a decode loop over an abstract
 * model interface that real models plug into.
 *
 * Randomness goes through sl_rand, never straight to a generator: the normal source draws from
 * separate GSL streams (draft, accept, resample, target); the enumerating source in sl_enum.h
 * branches on every choice instead, which gives the exact output distribution of this very code.
 */
#ifndef SL_SPEC_H
#define SL_SPEC_H

#include <stddef.h>
#include <stdint.h>
#include <gsl/gsl_rng.h>

#include "sl_dist.h"

/* ---- acceptance rules ---- */
typedef enum {
    SL_RULE_EXACT = 0,     /* modified rejection sampling: accept if r < min(1, p/q), else norm(max(0,p-q)) */
    SL_RULE_LENIENT,       /* standard-sampling lenience: accept if r < min(1, p/(l q)) */
    SL_RULE_LENIENT_T0,    /* temperature-0 lenience: p, q are pre-argmax pmfs; draft = argmax q;
                              accept if p(x) >= l * max p; else emit argmax p */
    SL_RULE_SAMPLER_MATCH, /* draw t ~ p; accept the draft only if it equals t; emit t */
    /* Deliberately wrong variants (THEORY.md "Known ways to get it wrong"): negative controls. */
    SL_BUG_DRAFT_ARGMAX,       /* draft token = argmax q while the ratio uses q */
    SL_BUG_DRAFT_TOPK,         /* draft token from top-k of q while the ratio uses the full q */
    SL_BUG_RESIDUAL_PAIRED,    /* residual over the top-k lists of p and q paired index by index */
    SL_BUG_RESAMPLE_FROM_P,    /* after a rejection, sample from p instead of the residual */
    SL_BUG_LOWPREC_DRAFT,      /* draft drawn from bf16-rounded logits; ratio uses the full q */
    SL_BUG_P_INPLACE,          /* p truncated to its top-k in place before the residual is taken */
    SL_BUG_SHARED_UNIFORM,     /* one accept draw r reused for every position of an iteration */
    SL_RULE_COUNT
} sl_rule;

/* Name used on the command line and in logs ("exact", "lenient", "bug-draft-argmax", ...). */
const char *sl_rule_name(sl_rule rule);
int sl_rule_parse(const char *s, sl_rule *out);
int sl_rule_is_bug(sl_rule rule);
/* Whether the rule is meant to reproduce p exactly (exact, sampler-match, lenient at l = 1). */
int sl_rule_is_exact(sl_rule rule, double lenience);

typedef struct {
    sl_rule rule;
    double lenience; /* l in (0, 1]; used by the lenient rules; 1 = exact */
    size_t bug_k;    /* k of the top-k bug variants (default 1) */
} sl_spec_config;

#define SL_SPEC_CONFIG_DEFAULT ((sl_spec_config){SL_RULE_EXACT, 1.0, 1})

int sl_spec_config_validate(const sl_spec_config *cfg);

/* ---- randomness ---- */
typedef struct sl_rand sl_rand;
struct sl_rand {
    /* x ~ pmf (V). alias, when not NULL, was built from exactly pmf and may be used for O(1) draws.
     * stream: SL_STREAM_DRAFT, SL_STREAM_RESAMPLE or SL_STREAM_TARGET. */
    size_t (*categorical)(sl_rand *self, int stream, const double *pmf, const sl_alias *alias, size_t V);
    /* Starts a new r ~ U(0,1) on stream and returns a handle to it. */
    unsigned (*uniform_new)(sl_rand *self, int stream);
    /* Whether uniform `handle` is below threshold (threshold >= 1 is always true). */
    int (*uniform_below)(sl_rand *self, unsigned handle, double threshold);
};

/* The normal source: one generator per stream, seeded from (seed, stream, item). */
typedef struct {
    sl_rand base;
    gsl_rng *draft, *accept, *resample, *target;
    double slots[64]; /* live uniforms of the current iteration, indexed by handle mod 64 */
    unsigned n_slots;
} sl_rand_rng;

/* Allocates the four generators. item selects the substream (e.g. a sequence or replication index). */
int sl_rand_rng_init(sl_rand_rng *r, uint64_t seed, uint64_t item);
/* Reseeds all streams for another item without allocating. */
void sl_rand_rng_reseed(sl_rand_rng *r, uint64_t seed, uint64_t item);
void sl_rand_rng_free(sl_rand_rng *r);

/* ---- one iteration over given distributions ---- */

/* Scratch for one iteration; allocate once per thread for the largest gamma and V. */
typedef struct {
    size_t gamma_max, V;
    double *residual; /* (V) */
    double *tmp;      /* (V) */
    double *tmp2;     /* (V) */
    sl_dist_work *dw;
} sl_spec_work;

sl_spec_work *sl_spec_work_alloc(size_t gamma_max, size_t V);
void sl_spec_work_free(sl_spec_work *w);

/* Optional accelerators for a position whose p and q are reused many times (synthetic Monte
 * Carlo): alias tables built from q, from p and from the residual norm(max(0, p - q)). Each may be
 * NULL; the sampler then falls back to O(V) work. */
typedef struct {
    const sl_alias *q_alias;
    const sl_alias *p_alias;
    const sl_alias *residual_alias;
} sl_spec_accel;

/* Step 1: draws the draft token from q (V) as the rule prescribes (the bug variants draw
 * differently). accel may be NULL. */
size_t sl_spec_draft(const sl_spec_config *cfg, const double *q, const sl_spec_accel *accel, size_t V,
                     sl_rand *rand, sl_spec_work *w);

/* What one iteration emitted. The emitted tokens are drafts[0..n_accepted) followed by one token
 * that is a residual draw (n_accepted < gamma) or the bonus token (n_accepted == gamma). */
typedef struct {
    size_t n_accepted; /* 0..gamma */
    size_t n_emitted;  /* n_accepted + 1 */
    int32_t tokens[65];/* (n_emitted) */
    int bonus;         /* 1 when the last token came from p_{gamma+1} */
} sl_spec_outcome;

#define SL_SPEC_GAMMA_MAX 64

/* Steps 3-5: decides acceptance of drafts (gamma) given q (gamma, V) and p (gamma+1, V), and
 * emits. p is not modified (except by SL_BUG_P_INPLACE, whose whole point that is).
 * accel (gamma+1 entries) may be NULL. */
int sl_spec_verify(const sl_spec_config *cfg, size_t gamma, size_t V, const double *q, double *p,
                   const int32_t *drafts, const sl_spec_accel *accel, sl_rand *rand, sl_spec_work *w,
                   sl_spec_outcome *out);

/* ---- decoding with models ---- */

/* A language model as the sampler sees it. The model keeps a state (a token sequence);
 * extend appends tokens and writes standardised next-token pmfs for the last rows asked for. */
typedef struct {
    void *self;
    size_t vocab_size;
    /* Appends tokens (n) to the state and writes the pmfs of the next token after each of the
     * last n_rows of them (1 <= n_rows <= n): dists (n_rows, vocab_size), row j is the pmf after
     * tokens[n - n_rows + j]. Asking only for the rows needed keeps a long prompt cheap. */
    int (*extend)(void *self, const int32_t *tokens, size_t n, size_t n_rows, double *dists);
    /* Keeps the first len tokens of the state and forgets the rest. */
    int (*truncate)(void *self, size_t len);
} sl_lm;

/* One iteration as seen by a logger. */
typedef struct {
    size_t iteration;
    size_t gamma;
    size_t n_accepted, n_emitted;
    const int32_t *drafts;  /* (gamma) */
    const int32_t *tokens;  /* (n_emitted) */
    const double *beta;     /* (gamma) beta_i = sum min(p_i, q_i) at each drafted position */
    double draft_s, verify_s, sample_s;
} sl_spec_iter_record;

typedef int (*sl_spec_on_iter)(void *ctx, const sl_spec_iter_record *rec);

typedef struct {
    size_t iterations;
    size_t draft_calls, target_calls;
    size_t tokens_emitted;
    size_t drafted, accepted;
    size_t accepted_at[SL_SPEC_GAMMA_MAX]; /* iterations whose draft at position i was accepted */
    size_t reached_at[SL_SPEC_GAMMA_MAX];  /* iterations that tested position i */
    double draft_s, verify_s, sample_s;
} sl_spec_stats;

/* Decodes max_new tokens after prompt (n_prompt >= 1) with gamma drafts per iteration.
 * The models must start empty (state length 0). out (max_new) receives the new tokens and *n_out
 * their number: max_new, or fewer when eos (>= 0; eos < 0 disables it) was emitted, eos included.
 * Tokens an iteration emits beyond max_new are dropped (every prefix of the stream is exact, so
 * the first max_new tokens are too). on_iter may be NULL; a non-zero return from it stops decoding
 * with that status. */
int sl_spec_decode(const sl_spec_config *cfg, size_t gamma, sl_lm *target, sl_lm *draft,
                   const int32_t *prompt, size_t n_prompt, size_t max_new, int32_t eos, sl_rand *rand,
                   int32_t *out, size_t *n_out, sl_spec_stats *stats, sl_spec_on_iter on_iter, void *ctx);

/* Plain autoregressive sampling from target (stream SL_STREAM_TARGET), the baseline. */
int sl_spec_autoregressive(sl_lm *target, const int32_t *prompt, size_t n_prompt, size_t max_new,
                           int32_t eos, sl_rand *rand, int32_t *out, size_t *n_out, double *target_s);

#endif
