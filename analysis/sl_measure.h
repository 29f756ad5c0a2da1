/*
 * sl_measure.h: `speclab measure` as one call. Sets up a source (a target/draft model pair with
 * text or token-id prompts, or a synthetic pair of sim/sl_synth.h with random or token-id prompts),
 * fills the log metadata (names, content hashes, source description) and runs sl_log_measure,
 * which writes OUT (schema: analysis/LOG_SCHEMA.md); the result is read back from the file.
 */
#ifndef SL_MEASURE_H
#define SL_MEASURE_H

#include <stddef.h>
#include <stdint.h>

#include "sl_log.h"
#include "sl_synth.h"
#include "sl_table.h"

typedef struct {
    const char *out;          /* OUT.h5 */
    /* The model pair, when target != NULL (any spec of models/sl_lm_open.h). */
    const char *target, *draft;
    const char *prompts;      /* text prompts, one per line (data/prompts/); or NULL and prompt_ids */
    const char *tokenizer;    /* NULL: the target's embedded tokenizer (text prompts only) */
    const char *target_role, *draft_role; /* names in messages; NULL: "target", "draft" */
    /* Otherwise the synthetic pair: synth.family, V, noise, draft_temperature, context (its seed
     * and sampling are the ones below). */
    sl_synth_params synth;
    size_t draft_vocab;       /* give the synthetic draft another vocabulary; 0 = the same */
    const char *prompt_ids;   /* token-id prompts, one per line of whitespace-separated ids (models:
                                 instead of prompts; synthetic: NULL gives random prompts) */
    size_t sequences;         /* random prompts (default 8) */
    size_t prompt_len;        /* tokens per random prompt (default 4) */
    /* Both sources. */
    size_t tokens;            /* tokens generated per prompt, >= 1 */
    int64_t eos;              /* -1 = none */
    sl_sampling sampling;     /* standardisation of both models */
    uint64_t seed;            /* global seed (default 1) */
    sl_log_dist dist;         /* float32 (default), float16, none */
    uint64_t shard_sequences; /* sequences per shard (default 16) */
    sl_log_write_opts write;  /* compression levels */
    int force;                /* replace an existing out that is not a speclab measure log (else SL_EINPUT) */
    sl_progress_fn progress;  /* after each sequence: (sequences done, sequences); NULL = silent */
    void *progress_ctx;
} sl_measure_config;

/* The defaults above (synthetic noisy pair, no output path, tokens 0 = not set). */
void sl_measure_config_init(sl_measure_config *c);

typedef struct {
    char *out;                /* the file written (owned copy) */
    size_t sequences;         /* in the assembled file (written now or by an earlier run) */
    size_t positions;         /* rows */
    size_t vocab_size;
    sl_log_dist dist;
    double seconds;           /* wall time of this call */
} sl_measure_result;

int sl_measure_run(const sl_measure_config *c, sl_measure_result **out);
void sl_measure_result_free(sl_measure_result *r);
/* One table "measure" (file, sequences, positions, vocab_size, dist). */
int sl_measure_report(const sl_measure_result *r, sl_table **out);

#endif
