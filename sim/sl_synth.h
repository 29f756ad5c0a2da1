/*
 * sl_synth.h: synthetic context-dependent language models behind the sampler's sl_lm interface, so
 * that measurement, logging and analysis run end to end before (and beside) the real engine.
 *
 * A target's next-token logits depend on the last two tokens: logits(x) = s * g(x) with g ~ N(0, 1)
 * drawn from stream (seed, SL_STREAM_FAMILY, hash(prev2, prev1)) and a spread s in [0.5, 4] drawn
 * from the same stream, so some contexts are peaked and others flat (draft confidence varies and
 * predicts acceptance). The draft of a family is derived from the same logits:
 *   noisy:     logits + noise * z, z ~ N(0, 1) from a second stream of the same context;
 *   tempered:  logits / draft_temperature;
 *   identical: the target's logits (alpha = 1);
 *   uniform:   all-equal logits (a draft that knows nothing).
 * Both models then standardise with the same sampling settings (sl_dist_standardise).
 */
#ifndef SL_SYNTH_H
#define SL_SYNTH_H

#include <stddef.h>
#include <stdint.h>

#include "sl_dist.h"
#include "sl_spec.h"

typedef enum { SL_SYNTH_NOISY = 0, SL_SYNTH_TEMPERED, SL_SYNTH_IDENTICAL, SL_SYNTH_UNIFORM, SL_SYNTH_COUNT } sl_synth_family;

const char *sl_synth_family_name(sl_synth_family f);
int sl_synth_family_parse(const char *s, sl_synth_family *out);

typedef struct {
    sl_synth_family family;
    size_t V;                 /* vocabulary, >= 2 */
    uint64_t seed;
    double noise;             /* noisy: logit noise standard deviation, >= 0 */
    double draft_temperature; /* tempered: > 0 */
    size_t context;           /* tokens the model holds; more is SL_EINPUT ("longer than the context") */
    sl_sampling sampling;
} sl_synth_params;

#define SL_SYNTH_DEFAULT ((sl_synth_params){SL_SYNTH_NOISY, 256, 1, 1.0, 1.5, 4096, {1.0, 0, 1.0, 0.0}})

typedef struct sl_synth_lm sl_synth_lm;

/* role 0 = target, 1 = draft. */
int sl_synth_alloc(const sl_synth_params *sp, int role, sl_synth_lm **out);
void sl_synth_free(sl_synth_lm *m);
/* The sl_lm view (self points to m, which must outlive it). */
sl_lm sl_synth_lm_of(sl_synth_lm *m);

#endif
