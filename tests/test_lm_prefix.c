/*
 * test_lm_prefix.c: the shared-prefix model (sim/sl_lm_prefix.h) changes nothing the sampler
 * does. Against the same hash models decoded from scratch with the same seed (the reference: the
 * unwrapped sampler), every continuation is identical, token for token, for every rule and gamma;
 * the recorded rows equal the model's own pmf of each committed prefix exactly (the same double
 * computation, so tolerance 0); and the prefix is scored once.
 */
#include <criterion/criterion.h>
#include <string.h>

#include "sl_lm_prefix.h"
#include "sl_spec.h"
#include "spec_models.h"

#define NV 6
#define NEW 7

static void one_rule(sl_rule rule, size_t gamma)
{
    const int32_t prompt[3] = {1, 4, 2};
    hash_model tw = {.V = NV, .seed = 11, .zero_frac = 0.2};
    hash_model dw = {.V = NV, .seed = 12, .target_seed = 11, .mix = 0.5, .zero_frac = 0.1};
    sl_lm ti = hm_lm(&tw), di = hm_lm(&dw);
    sl_lm_prefix tp, dp;
    cr_assert_eq(sl_lm_prefix_init(&tp, &ti, prompt, 3, NEW + SL_SPEC_GAMMA_MAX), SL_OK, "%s", sl_errmsg());
    cr_assert_eq(sl_lm_prefix_init(&dp, &di, prompt, 3, NEW + SL_SPEC_GAMMA_MAX), SL_OK, "%s", sl_errmsg());
    sl_spec_config cfg = SL_SPEC_CONFIG_DEFAULT;
    cfg.rule = rule;
    if (rule == SL_RULE_LENIENT) cfg.lenience = 0.5;
    size_t target_calls = tw.calls;
    for (uint64_t item = 0; item < 40; item++) {
        int32_t a[NEW], b[NEW];
        size_t na, nb;
        sl_spec_stats st;
        sl_rand_rng r;
        /* Reference: fresh models, the whole prompt scored. */
        hash_model tr = {.V = NV, .seed = 11, .zero_frac = 0.2};
        hash_model dr = {.V = NV, .seed = 12, .target_seed = 11, .mix = 0.5, .zero_frac = 0.1};
        sl_lm t0 = hm_lm(&tr), d0 = hm_lm(&dr);
        cr_assert_eq(sl_rand_rng_init(&r, 5, item), SL_OK);
        cr_assert_eq(sl_spec_decode(&cfg, gamma, &t0, &d0, prompt, 3, NEW, -1, &r.base, a, &na, &st, NULL, NULL), SL_OK);
        sl_rand_rng_reseed(&r, 5, item);
        cr_assert_eq(sl_lm_prefix_reset(&tp), SL_OK);
        cr_assert_eq(sl_lm_prefix_reset(&dp), SL_OK);
        cr_assert_eq(sl_spec_decode(&cfg, gamma, &tp.lm, &dp.lm, prompt, 3, NEW, -1, &r.base, b, &nb, &st, NULL, NULL),
                     SL_OK, "%s", sl_errmsg());
        sl_rand_rng_free(&r);
        cr_assert_eq(na, nb);
        cr_assert(memcmp(a, b, na * sizeof *a) == 0, "%s gamma %zu item %lu: continuations differ", sl_rule_name(rule),
                  gamma, (unsigned long)item);
        /* Row j is the target's pmf after prompt + b[0..j). */
        int32_t seq[3 + NEW];
        memcpy(seq, prompt, sizeof prompt);
        memcpy(seq + 3, b, nb * sizeof *b);
        for (size_t j = 0; j < nb; j++) {
            double want[NV];
            hm_pmf(&tw, seq, 3 + j, want);
            cr_assert(memcmp(want, sl_lm_prefix_row(&tp, j), sizeof want) == 0, "row %zu differs", j);
        }
    }
    /* The prefix was scored once: no inner call ever fed 3 + something tokens from length 0. */
    cr_assert_eq(tw.calls - target_calls, tp.inner_calls);
    sl_lm_prefix_free(&tp);
    sl_lm_prefix_free(&dp);
}

Test(lm_prefix, same_continuations_every_rule)
{
    for (int rule = 0; rule < SL_RULE_COUNT; rule++)
        for (size_t gamma = 1; gamma <= 4; gamma += 3) one_rule((sl_rule)rule, gamma);
}

Test(lm_prefix, autoregressive_and_refusals)
{
    const int32_t prompt[2] = {3, 0};
    hash_model tw = {.V = NV, .seed = 21};
    sl_lm ti = hm_lm(&tw);
    sl_lm_prefix tp;
    cr_assert_eq(sl_lm_prefix_init(&tp, &ti, prompt, 2, NEW), SL_OK);
    int32_t out[NEW], ref[NEW];
    size_t n, nr;
    double ts;
    sl_rand_rng r;
    cr_assert_eq(sl_rand_rng_init(&r, 3, 0), SL_OK);
    cr_assert_eq(sl_spec_autoregressive(&tp.lm, prompt, 2, NEW, -1, &r.base, out, &n, &ts), SL_OK);
    hash_model tr = {.V = NV, .seed = 21};
    sl_lm t0 = hm_lm(&tr);
    sl_rand_rng_reseed(&r, 3, 0);
    cr_assert_eq(sl_spec_autoregressive(&t0, prompt, 2, NEW, -1, &r.base, ref, &nr, &ts), SL_OK);
    sl_rand_rng_free(&r);
    cr_assert_eq(n, nr);
    cr_assert(memcmp(out, ref, n * sizeof *out) == 0);
    /* A sequence that leaves the prefix, and a row inside it, are refused. */
    double d[2 * NV];
    int32_t other[2] = {3, 1};
    cr_assert_eq(sl_lm_prefix_reset(&tp), SL_OK);
    cr_assert_eq(tp.lm.extend(&tp, other, 2, 1, d), SL_EINPUT);
    cr_assert_eq(tp.lm.extend(&tp, prompt, 2, 2, d), SL_EINPUT);
    sl_lm_prefix_free(&tp);
}
