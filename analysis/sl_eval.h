/*
 * sl_eval.h: teacher-forced loss of any model (transformer, n-gram, lookup; models/sl_lm_open.h)
 * on a token file: nats and bits per token, and bits per byte given the size of the text the
 * tokens encode. `speclab eval` is this call and sl_eval_report.
 *
 * Windows: the file is cut into consecutive windows of C tokens (C: the model's context, 1024
 * for models without one); each window starts from an empty state and scores the token after
 * each of its C tokens, so every token but the first is scored once. With windows = K it instead
 * scores K windows of C tokens at offsets floor(w (n - C - 1) / (K - 1)), w = 0..K-1: the windows
 * `speclab train` uses for val_ce.
 */
#ifndef SL_EVAL_H
#define SL_EVAL_H

#include <math.h>
#include <stddef.h>

#include "sl_table.h"

typedef struct {
    const char *model;      /* model spec (a file or lookup:N[:EPS[:NGRAM_FILE]]) */
    const char *tokens;     /* token file (models/sl_tok.h) */
    const char *text;       /* optional: the text file; its size in bytes gives bits per byte */
    double bytes;           /* optional instead of text: the byte count; NaN = none */
    size_t context;         /* C; 0 = the model's context (1024 without one) */
    size_t windows;         /* K; 0 = consecutive windows over the whole file */
    const char *model_role; /* the model's name in messages; NULL = "model" */
    int progress;           /* window counter on stderr */
} sl_eval_config;

#define SL_EVAL_CONFIG_DEFAULT ((sl_eval_config){NULL, NULL, NULL, NAN, 0, 0, NULL, 0})

typedef struct {
    char *model;            /* the spec (owned copy) */
    const char *kind;       /* transformer | ngram | lookup */
    char *tokens_file;      /* (owned copy) */
    size_t tokens_in_file;  /* n */
    size_t tokens_scored;
    size_t windows;
    size_t context;         /* C as used (at most n - 1) */
    double nats_per_token, bits_per_token;
    double bytes;           /* NaN without text or bytes */
    double bits_per_byte;   /* bits_per_token * n / bytes; NaN without bytes */
} sl_eval_result;

int sl_eval_run(const sl_eval_config *cfg, sl_eval_result **out);
void sl_eval_result_free(sl_eval_result *r);
/* One table "eval" (model, kind, tokens_file, tokens_in_file, tokens_scored, windows, context,
 * nats_per_token, bits_per_token, bytes, bits_per_byte). */
int sl_eval_report(const sl_eval_result *r, sl_table **out);

#endif
