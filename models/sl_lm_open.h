/*
 * sl_lm_open.h: one way to open any model of the family as the sampler's sl_lm.
 *
 * A spec is one of
 *   FILE.safetensors          arch gpt2 or llama (the engine, models/sl_model.h), or arch ngram
 *                             (unigram/bigram counts, models/sl_ngram.h), or arch lookup (a
 *                             prompt-lookup draft with its unigram fallback, `speclab model lookup`);
 *   lookup:N[:EPS[:FALLBACK]] the prompt-lookup draft with n-gram length N (>= 1), mass 1 - EPS
 *                             on the copied token (EPS default 0.1) and the rest spread by
 *                             FALLBACK: "uniform" (default) or an n-gram file, whose unigram P1
 *                             is used. Its vocabulary is the fallback file's, else opts.vocab_size.
 * Anything else is SL_EINPUT ("unknown model spec").
 *
 * Opening is two steps so that a caller can check lengths against the model's context first:
 * sl_lm_open loads the model; sl_lm_start allocates the state for max_len tokens and fills h->lm.
 * The one vocabulary check of the project lives here: opts.vocab_size > 0 requires the model to
 * have exactly that vocabulary size, and opts.vocab_tokenizer the same bytes for every id as its own
 * tokenizer (when it has one): SL_EINPUT naming both models and the first differing id otherwise.
 */
#ifndef SL_LM_OPEN_H
#define SL_LM_OPEN_H

#include <stddef.h>
#include <stdint.h>

#include "sl_dist.h"
#include "sl_spec.h"

typedef enum { SL_LM_TRANSFORMER = 0, SL_LM_NGRAM = 1, SL_LM_LOOKUP = 2 } sl_lm_kind;

typedef struct {
    sl_sampling sampling;   /* standardisation of every distribution the model returns */
    size_t vocab_size;      /* 0: any; else the vocabulary the model must have */
    const char *role;       /* for messages, e.g. "--draft"; NULL = "model" */
    const char *vocab_from; /* for messages: where vocab_size came from, e.g. the target's path */
    const char *vocab_tokenizer; /* the target's tokenizer JSON, or NULL: when both models carry a
                                    tokenizer, every id must map to the same bytes in both */
} sl_lm_open_opts;

typedef struct sl_lm_handle sl_lm_handle;
struct sl_lm_handle {
    sl_lm lm;                   /* valid after sl_lm_start */
    sl_lm_kind kind;
    const char *spec;           /* as given (borrowed) */
    const char *file;           /* the model file, or NULL for a spec without one (lookup:N) */
    size_t vocab_size;
    size_t context;             /* longest sequence the model takes; SIZE_MAX = no limit */
    const char *tokenizer_json; /* the embedded tokenizer or NULL */
    size_t max_len;             /* after sl_lm_start */
    void *priv;
};

const char *sl_lm_kind_name(sl_lm_kind k); /* "transformer", "ngram", "lookup" */

int sl_lm_open(const char *spec, const sl_lm_open_opts *opts, sl_lm_handle **out);
/* Allocates the state for sequences of up to max_len tokens (SL_EINPUT when above h->context). */
int sl_lm_start(sl_lm_handle *h, size_t max_len);
void sl_lm_close(sl_lm_handle *h);

#endif
