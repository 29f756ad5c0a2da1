/*
 * sl_lm_prefix.h: a model that starts every sequence from a prefix scored once.
 *
 * Drawing K continuations of one prompt should not score the prompt K times. The wrapper scores
 * the prefix once (the inner model's state keeps it, the pmf after it is kept too) and then
 * presents an sl_lm that looks empty to the sampler: when the sampler feeds the prefix, nothing
 * is recomputed; tokens after it go to the inner model; sl_lm_prefix_reset returns to the prefix
 * for the next continuation. Rows the sampler asks for inside the prefix other than the one after
 * its last token are not available (SL_EINPUT), and the sampler never asks for them.
 *
 * It also records, for every position after the prefix, the last pmf it returned there: after a
 * continuation, row j is p(. | prefix, x_1..x_j), the distribution the j+1-th new token was
 * drawn from (or checked against). A speculative sampler computes these rows anyway to verify its
 * drafts; sl_verify_models uses them to test every emitted token against its own conditional.
 */
#ifndef SL_LM_PREFIX_H
#define SL_LM_PREFIX_H

#include <stddef.h>
#include <stdint.h>

#include "sl_spec.h"

typedef struct {
    sl_lm lm;           /* what the sampler calls (self = this wrapper) */
    sl_lm *inner;       /* holds the prefix after init */
    int32_t *prefix;    /* (n_prefix) copy */
    size_t n_prefix;
    size_t len;         /* the sequence length the sampler sees */
    double *rows;       /* (max_rows + 1, V): row 0 = pmf after the prefix, row j after j new tokens */
    size_t max_rows;    /* new positions recorded */
    size_t inner_calls; /* extend calls passed to the inner model */
} sl_lm_prefix;

/* Scores prefix (n_prefix >= 1) with inner, which must be empty, and records up to max_rows new
 * positions. The wrapper starts empty (len 0). */
int sl_lm_prefix_init(sl_lm_prefix *w, sl_lm *inner, const int32_t *prefix, size_t n_prefix, size_t max_rows);
/* Back to an empty sequence for the next continuation (the inner model back to the prefix). */
int sl_lm_prefix_reset(sl_lm_prefix *w);
/* The pmf of the (j+1)-th new token, j in [0, max_rows]: row 0 is p(. | prefix). */
const double *sl_lm_prefix_row(const sl_lm_prefix *w, size_t j);
void sl_lm_prefix_free(sl_lm_prefix *w);

#endif
