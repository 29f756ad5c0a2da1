/*
 * sl_generate.h: speculative generation of one prompt with a real target and draft model (any
 * spec of models/sl_lm_open.h, sharing a vocabulary): the new tokens, their text when the target
 * carries a tokenizer, and the acceptance statistics. `speclab generate` is this call and
 * sl_generate_report. Same seed, same tokens, whatever the thread count.
 */
#ifndef SL_GENERATE_H
#define SL_GENERATE_H

#include <stddef.h>
#include <stdint.h>

#include "sl_dist.h"
#include "sl_spec.h"
#include "sl_table.h"

typedef struct {
    const char *target, *draft;     /* model specs */
    const char *target_role, *draft_role; /* names in messages; NULL: "target", "draft" */
    const char *prompt;             /* text, encoded with the target's tokenizer; or NULL and: */
    const int32_t *prompt_ids;      /* (n_prompt_ids) token ids */
    size_t n_prompt_ids;
    size_t gamma;                   /* drafts per iteration, 1..SL_SPEC_GAMMA_MAX */
    size_t tokens;                  /* new tokens to generate */
    int eos_set;                    /* 0: the tokenizer's <|endoftext|> when there is one, else none */
    int32_t eos;                    /* with eos_set: stop at this token; -1 = never */
    uint64_t seed;
    sl_sampling sampling;           /* standardises both models' logits */
    sl_spec_config rule;            /* acceptance rule and lenience */
} sl_generate_config;

typedef struct {
    size_t gamma;
    size_t n_prompt;                /* prompt tokens */
    size_t n_out;                   /* new tokens (fewer than asked when eos was emitted) */
    int32_t *tokens;                /* (n_out) */
    char *text;                     /* the new tokens decoded; NULL without a tokenizer */
    sl_spec_stats stats;            /* iterations, tokens_emitted, drafted, accepted, times */
    double alpha_hat;               /* accepted / drafted; NaN without drafts */
    double tokens_per_iteration;    /* tokens_emitted / iterations; NaN without iterations */
    double wall_s;                  /* wall time of the decoding */
    double tokens_per_s;            /* n_out / wall_s */
} sl_generate_result;

int sl_generate_run(const sl_generate_config *c, sl_generate_result **out);
void sl_generate_result_free(sl_generate_result *r);
/* Two tables: generation (n_prompt, n_new, token_ids, text) and acceptance (gamma, iterations,
 * tokens_emitted, drafted, accepted, alpha_hat, tokens_per_iteration, draft_s, verify_s,
 * sample_s, wall_s, tokens_per_s); tables must hold 2. */
int sl_generate_report(const sl_generate_result *r, sl_table **tables, size_t *n_tables);

#endif
