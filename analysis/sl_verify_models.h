/*
 * sl_verify_models.h: is a speculative sampler lossless on a real draft/target pair? Draws K
 * speculative continuations of k tokens from one prompt (and, unless told otherwise, K plain
 * autoregressive ones from the target), the prompt scored once per worker (sim/sl_lm_prefix.h),
 * and tests them with the shared test core of sl_verify (analysis/VERIFY_MODELS.md says what each
 * test detects, what it cannot and its power):
 *
 *   first           speculative token 1 ~ p(. | prompt), exact pmf           goodness of fit
 *   ar_first        autoregressive token 1 ~ p(. | prompt) (a control)       goodness of fit
 *   position_j      speculative vs autoregressive token j, j = 1..k          homogeneity
 *   pit_ks          randomised PIT of every speculative token against the
 *                   target's own conditional p(. | prompt, x_<j): i.i.d.
 *                   U(0, 1) under losslessness                               Kolmogorov-Smirnov
 *   pit_chi2        the same values in B equal bins                          goodness of fit (uniform)
 *   ar_pit_ks, ar_pit_chi2   the same on the autoregressive set (a control)
 *   support         speculative tokens with p(x | prefix) = 0: any is a
 *                   certain rejection (p = 0), none gives p = 1              exact
 * Holm over all of them; the verdict at the family-wise level.
 *
 * PIT: the tokens are ranked by decreasing p(. | s), ties by lower id; F(x) is the mass ranked
 * strictly before x; u = F(x) + U p(x | s), U ~ U(0, 1) from a stream the sampler never reads
 * (sl_verify_models_pit). Too much mass on likely tokens pushes u towards 0.
 *
 * Lenient-t0 targets the greedy continuation: every null pmf is the one-hot argmax of p (lowest
 * id on ties, as the sampler), no autoregressive set is drawn (plain sampling from p is not its
 * target), and the position and ar_* tests are left out.
 *
 * Randomness: speculative sample i reads the sampler streams of item 2i, autoregressive sample i
 * those of item 2i + 1, and the PIT uniforms of sample i come from stream SL_VM_STREAM_PIT, items
 * 2i and 2i + 1. Each worker has its own models and wrappers and writes slot i only, so the same
 * seed gives the same bytes for any thread count. With several prompts, sample i continues prompt
 * i mod P.
 */
#ifndef SL_VERIFY_MODELS_H
#define SL_VERIFY_MODELS_H

#include <stddef.h>
#include <stdint.h>

#include "sl_dist.h"
#include "sl_spec.h"
#include "sl_table.h"
#include "sl_verify.h"

/* The stream of the PIT uniforms: not one of the sampler's (sl_common.h streams 1..7). */
#define SL_VM_STREAM_PIT 16

typedef struct {
    const char *target, *draft;     /* model specs (models/sl_lm_open.h) */
    const char *prompt;             /* text, encoded with the target's tokenizer; or NULL and one of: */
    const int32_t *prompt_ids;      /* (n_prompt_ids) token ids */
    size_t n_prompt_ids;
    const char *prompts_file;       /* text prompts, one a line (data/sl_prompts.h): sample i takes i mod P */
    size_t samples;                 /* K continuations per mode */
    size_t tokens;                  /* k tokens per continuation */
    size_t gamma;                   /* drafts per iteration */
    sl_spec_config rule;
    sl_sampling sampling;           /* standardises both models */
    uint64_t seed;
    int threads;                    /* workers, 0 = all cores; each runs its models on one thread */
    int autoregressive;             /* 1: also K plain target continuations (default) */
    double level, tv_delta;         /* family-wise level, deviation for the power statement */
    size_t pit_bins;                /* B of pit_chi2 (default 20) */
    int keep_samples;               /* 1: the result keeps every token */
    sl_progress_fn progress;        /* (samples done, K); NULL = silent */
    void *progress_ctx;
} sl_verify_models_config;

/* Defaults: K 4000, k 4, gamma 3, exact rule, seed 1, all cores, autoregressive on, level 0.01,
 * tv 0.05, B 20 (the CLI's help text says why). Specs and prompt left NULL. */
void sl_verify_models_config_default(sl_verify_models_config *c);

typedef struct {
    sl_verify_result *verify;       /* the tests (rendered by sl_verify_report) */
    size_t samples, tokens, gamma;
    size_t n_prompts;               /* prompts used (1 unless a prompts file) */
    size_t prompt_tokens;           /* tokens of the first prompt */
    int autoregressive;             /* whether the autoregressive set was drawn */
    uint64_t spec_tokens, ar_tokens;/* tokens tested in each set */
    uint64_t drafted, accepted;     /* over every speculative continuation */
    double alpha_hat;               /* accepted / drafted */
    double spec_s, ar_s;            /* wall time of each mode (all workers) */
    double wall_s;                  /* the whole call, opening the models included */
    int threads;                    /* workers used */
    int32_t *spec;                  /* (samples, tokens) when kept, else NULL */
    int32_t *ar;                    /* (samples, tokens) when kept and drawn, else NULL */
} sl_verify_models_result;

int sl_verify_models_run(const sl_verify_models_config *c, sl_verify_models_result **out);

/* The lower level: models already open. make(ctx, worker, &target, &draft) gives each worker its
 * own fresh (empty) pair, built before any sampling; release(ctx, worker) frees it afterwards.
 * prompts (n_prompts) are token-id arrays of lengths n_prompt; the config's model specs, prompt
 * fields and threads are not used (workers is). */
typedef int (*sl_vm_make_fn)(void *ctx, int worker, sl_lm **target, sl_lm **draft);
typedef void (*sl_vm_release_fn)(void *ctx, int worker);

int sl_verify_models_lm(const sl_verify_models_config *c, const int32_t *const *prompts, const size_t *n_prompt,
                        size_t n_prompts, int workers, sl_vm_make_fn make, sl_vm_release_fn release, void *ctx,
                        sl_verify_models_result **out);

void sl_verify_models_result_free(sl_verify_models_result *r);

/* The randomised PIT value of token x under pmf p (V): F(x) + u p(x), F(x) the mass of the tokens
 * with p(y) > p(x), or p(y) = p(x) and y < x; clamped to [0, 1]. One pass, no sort. */
double sl_verify_models_pit(const double *p, size_t V, size_t x, double u);

/* Tables: the three of sl_verify_report (verdict, tests, lenience bound) and a summary
 * (samples, tokens, gamma, threads, spec_tokens, ar_tokens, alpha_hat, spec_s, ar_s, wall_s);
 * tables must hold 4. */
int sl_verify_models_report(const sl_verify_models_result *r, sl_table **tables, size_t *n_tables);

#endif
