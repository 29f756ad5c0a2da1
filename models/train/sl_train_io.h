/*
 * sl_train_io.h: the trainer's files. Export to and import from the native format (FORMAT.md),
 * resumable checkpoints, and the whole training run behind `speclab train` and `speclab distill`.
 *
 * Checkpoint layout (version 1, little-endian), DIR/checkpoint.bin, always written through a
 * temporary file and a rename so that a kill at any moment leaves the previous checkpoint intact:
 *   magic "SLCKPT\0\1" (8 bytes), uint32 version = 1, uint32 0,
 *   uint64 n_params, uint64 step (optimiser steps done), uint64 tokens_seen,
 *   float64 wall_s (training time so far), float64 loss_sum, uint64 loss_n (train loss since the
 *   last log row),
 *   uint64 len + bytes: the run identity (JSON: config, hyperparameters, seed, data and teacher
 *   hashes); a resume with a different identity is refused,
 *   uint64 len + bytes: the log so far (CSV text),
 *   float32 params[n_params], float32 adam_m[n_params], float32 adam_v[n_params],
 *   uint64 FNV-1a 64 of every byte before it.
 * The random state is (seed, step): batches are a function of them (sl_train_tokens_batch), so the
 * checkpoint needs nothing more to continue the exact same run.
 */
#ifndef SL_TRAIN_IO_H
#define SL_TRAIN_IO_H

#include <signal.h>
#include <stdint.h>
#include <stdio.h>

#include "sl_common.h"
#include "sl_train.h"

/* Writes m as a FORMAT.md gpt2 safetensors file (f16 != 0: F16 tensors) atomically. training_json
 * and tokenizer_json (may be NULL) become the `training` and `tokenizer` metadata. */
int sl_train_export(const sl_train_model *m, const char *path, int f16, const char *training_json,
                    const char *tokenizer_json);
/* Reads a gpt2 model into a forward-only training-layout model for batches up to (B, T);
 * *tokenizer_json (if asked) receives a copy of the tokenizer metadata or NULL. SL_EINPUT on a
 * truncated or corrupt file or shapes that disagree with its config. */
int sl_train_import(const char *path, int B, int T, sl_train_model **out, char **tokenizer_json);

typedef struct {
    uint64_t step, tokens_seen, loss_n;
    double wall_s, loss_sum;
    char *identity; /* JSON */
    char *log;      /* CSV so far */
} sl_train_ckpt_state;

int sl_train_ckpt_save(const char *path, const sl_train_model *m, const sl_train_ckpt_state *st);
/* Loads into m (same n_params). SL_EINPUT if the file is corrupt, truncated or was written by a run
 * with another identity (the message names the first differing field). st->identity is the
 * expected identity on input; st->log is replaced by a malloc'd copy of the stored log. */
int sl_train_ckpt_load(const char *path, sl_train_model *m, sl_train_ckpt_state *st);

typedef struct {
    const char *train_path;
    const char *valid_path;
    const char *config_json;
    const char *ckpt_dir;       /* NULL: no checkpoints */
    const char *out_path;
    int force;                  /* replace an existing out_path or log_path that no checkpoint of this run
                                   vouches for (else SL_EINPUT before any training) */
    const char *teacher_path;   /* distillation; NULL for training from data */
    const char *log_path;       /* CSV log, rewritten atomically at each row; NULL: stdout only */
    const char *tokenizer_path; /* file holding FORMAT.md's tokenizer JSON, or NULL */
    const char *init_path;      /* start from these weights (gpt2 model file) instead of a random init */
    sl_train_hparams h;
    int f16;
    uint64_t eval_every;   /* log a row every this many steps (and at the end) */
    int eval_batches;      /* validation batches of (batch, seq) per row */
    uint64_t ckpt_every;   /* checkpoint every this many steps (and at the end and on a stop) */
    uint64_t stop_at;      /* stop after this step with a checkpoint, without export (0: never) */
    volatile sig_atomic_t *interrupted; /* set by a signal handler: checkpoint and stop */
    FILE *out;             /* log rows go here too (stdout), or NULL */
    sl_progress_fn progress; /* after each optimiser step: (steps done, steps); NULL = silent */
    void *progress_ctx;
    const char *backend;   /* NULL or "cpu": sl_train.c; "cuda", "cuda-emu": sl_train_gpu.h */
} sl_train_run_opts;

/* The whole run: read data, resume from DIR/checkpoint.bin if present, train, log, checkpoint,
 * export. Returns SL_OK, SL_EINPUT (bad input, detected before any training) or SL_EFAIL. */
int sl_train_run(const sl_train_run_opts *o);

#endif
