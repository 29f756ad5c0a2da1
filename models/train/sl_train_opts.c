/* sl_train_opts.c: defaults of a training run's settings (models/sl_train_opts.h). */
#include "sl_train_opts.h"

#include <string.h>

#include "sl_common.h"

void sl_train_run_opts_default(sl_train_run_opts *o)
{
    memset(o, 0, sizeof *o);
    sl_train_hparams_default(&o->h);
    o->eval_batches = 8;
}

void sl_train_run_opts_derive(sl_train_run_opts *o, int warmup_given)
{
    if (!warmup_given) o->h.warmup = o->h.steps / 10;
    if (!o->eval_every) o->eval_every = o->h.steps / 10 ? o->h.steps / 10 : 1;
    if (!o->ckpt_every) o->ckpt_every = o->eval_every;
}

int sl_train_objective_parse(const char *s, int *objective)
{
    if (!strcmp(s, "kl")) *objective = SL_OBJ_KL;
    else if (!strcmp(s, "tv")) *objective = SL_OBJ_TV;
    else return sl_fail(SL_EINPUT, "objective: '%s' is not kl or tv", s);
    return SL_OK;
}
