/*
 * sl_enum.h: an sl_rand that enumerates every path of random choices instead of drawing one.
 *
 * The sampler code is run once per path: each categorical draw and each comparison of a uniform
 * with a threshold becomes a branch point, replayed in later runs and advanced depth-first. The
 * product of the branch probabilities along a path is that path's exact probability, so summing
 * outcomes over paths gives the exact output distribution of the very code that samples. Uniforms
 * are tracked as intervals [lo, hi), so reusing one uniform (a bug) is enumerated exactly too.
 * Practical for small vocabularies (V <= 5) and few iterations.
 */
#ifndef SL_ENUM_H
#define SL_ENUM_H

#include <stddef.h>

#include "sl_spec.h"

/* run(ctx, rand): performs one sampling run drawing only through rand; returns a status.
 * record(ctx, prob): called after each successful run with the probability of its path.
 * Stops with SL_EFAIL if more than max_paths paths exist. *n_paths receives the count. */
int sl_enum_paths(int (*run)(void *ctx, sl_rand *rand), void (*record)(void *ctx, double prob), void *ctx,
                  size_t max_paths, size_t *n_paths);

#endif
