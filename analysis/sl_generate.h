/*
 * sl_generate.h: generation from one prompt with a real target model (any spec of
 * models/sl_lm_open.h): speculative with a draft sharing its vocabulary, or plain autoregressive
 * sampling from the target alone; one continuation or K of them. The new tokens, their text when
 * the target carries a tokenizer, and the acceptance statistics. `speclab generate` is this call
 * and sl_generate_report. Same seed, same tokens, whatever the thread count.
 *
 * K continuations score the prompt once (sim/sl_lm_prefix.h) and sample i draws from the random
 * streams of item i, (seed, stream, i): sample 0 is the single generation with the same seed, and
 * each sample is the continuation a from-scratch decode of item i gives, whatever K and the
 * number of workers.
 */
#ifndef SL_GENERATE_H
#define SL_GENERATE_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "sl_dist.h"
#include "sl_spec.h"
#include "sl_table.h"

typedef struct {
    const char *target, *draft;     /* model specs; draft NULL in autoregressive mode */
    const char *target_role, *draft_role; /* names in messages; NULL: "target", "draft" */
    const char *prompt;             /* text, encoded with the target's tokenizer; or NULL and: */
    const int32_t *prompt_ids;      /* (n_prompt_ids) token ids */
    size_t n_prompt_ids;
    int autoregressive;             /* 1: plain sampling from the target (no draft, gamma 0) */
    size_t gamma;                   /* speculative: drafts per iteration, 1..SL_SPEC_GAMMA_MAX */
    size_t tokens;                  /* new tokens to generate per continuation */
    size_t samples;                 /* 0: one continuation, reported as `generation`; K >= 1: K
                                       continuations, reported as the `samples` table */
    int eos_set;                    /* 0: the tokenizer's <|endoftext|> when there is one, else none */
    int32_t eos;                    /* with eos_set: stop at this token; -1 = never */
    uint64_t seed;                  /* sample i draws from (seed, stream, i) */
    size_t threads;                 /* workers drawing samples in parallel, each with its own models
                                       and single-threaded; 0 or 1: one worker whose models use
                                       the OpenMP threads. The samples do not depend on it */
    sl_sampling sampling;           /* standardises both models' logits */
    sl_spec_config rule;            /* acceptance rule and lenience (speculative) */
    /* NULL, or a file for the continuations as lines `SAMPLE MODE t1,t2,...` (the format of
     * `speclab run --tokens-out`; MODE speculative|autoregressive). An existing file is replaced
     * only when it is empty or already holds such lines (SL_EINPUT otherwise). */
    const char *tokens_out;
} sl_generate_config;

typedef struct {
    size_t n_out;                   /* new tokens (fewer than asked when eos was emitted) */
    int32_t *tokens;                /* (n_out), inside the result's one token block */
    char *text;                     /* the new tokens decoded; NULL without a tokenizer */
} sl_generate_sample;

typedef struct {
    int autoregressive;
    int listed;                     /* the config asked for samples (report the `samples` table) */
    size_t gamma;                   /* 0 in autoregressive mode */
    size_t n_prompt;                /* prompt tokens */
    size_t n_samples;               /* K (1 for a single generation) */
    sl_generate_sample *samples;    /* (n_samples) */
    /* Sample 0, the single generation: the same pointers as samples[0]. */
    size_t n_out;
    int32_t *tokens;
    char *text;
    /* Summed over the samples. Speculative: the prompt's scoring counts in the draft_s and
     * verify_s of the stats (once, as it is scored once). */
    sl_spec_stats stats;            /* iterations, tokens_emitted, drafted, accepted, times */
    size_t tokens_out;              /* new tokens of all samples */
    double target_s;                /* autoregressive: time in the target, prompt included */
    double alpha_hat;               /* accepted / drafted; NaN without drafts */
    double tokens_per_iteration;    /* tokens_emitted / iterations; NaN without iterations */
    double wall_s;                  /* wall time of the decoding, the prompt's scoring included */
    double tokens_per_s;            /* tokens_out / wall_s */
    int32_t *token_block;           /* (n_samples, tokens + gamma + 1) owned storage of the samples */
} sl_generate_result;

int sl_generate_run(const sl_generate_config *c, sl_generate_result **out);
void sl_generate_result_free(sl_generate_result *r);
/* Two tables. The continuations: `generation` (n_prompt, n_new, token_ids, text) for a single
 * generation, or `samples` (sample, n_new, token_ids, text), one row per sample. The summary:
 * speculative, `acceptance` (gamma, iterations, tokens_emitted, drafted, accepted, alpha_hat,
 * tokens_per_iteration, draft_s, verify_s, sample_s, wall_s, tokens_per_s) over all samples;
 * autoregressive, `decoding` (mode, tokens_emitted, target_s, wall_s, tokens_per_s), with no
 * acceptance columns as nothing is drafted. tables must hold 2. */
int sl_generate_report(const sl_generate_result *r, sl_table **tables, size_t *n_tables);
/* Writes the string s to f with backslash, newline, carriage return and tab escaped as \\ \n \r
 * \t, so that a continuation fits on one line. */
int sl_generate_write_escaped(FILE *f, const char *s);

#endif
