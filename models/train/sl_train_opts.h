/*
 * sl_train_opts.h: the settings of a training run (sl_train_run_opts, models/sl_train_io.h) that
 * have defaults, some of them depending on others, kept in one place so that every caller of
 * sl_train_run (speclab train and distill, tests, scripts) gets the same run from the same settings.
 */
#ifndef SL_TRAIN_OPTS_H
#define SL_TRAIN_OPTS_H

#include "sl_train_io.h"

/* Everything zero, then sl_train_hparams_default and 8 validation batches per log row. */
void sl_train_run_opts_default(sl_train_run_opts *o);
/* The defaults that follow from h.steps, for what was left unset: warm-up steps/10 (unless
 * warmup_given), a log row every steps/10 steps (at least 1), a checkpoint at every log row. */
void sl_train_run_opts_derive(sl_train_run_opts *o, int warmup_given);
/* "kl" or "tv" (distillation objectives, enum sl_train_objective); SL_EINPUT naming the objective. */
int sl_train_objective_parse(const char *s, int *objective);

#endif
