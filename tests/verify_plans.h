/*
 * verify_plans.h: what the Monte Carlo and verify tests share (test_mc.c, test_samples.c,
 * test_verify_stream.c): a Monte Carlo plan of a built-in synthetic family, and bitwise equality
 * of doubles (NaN equal to NaN).
 */
#ifndef VERIFY_PLANS_H
#define VERIFY_PLANS_H

#include <criterion/criterion.h>
#include <math.h>
#include <string.h>

#include "sl_common.h"
#include "sl_mc.h"

/* The family's plan at vocabulary V and gamma under rule (default lenience), with the family's
 * noise parameter (family_plan: the default noise). */
static inline sl_mc_plan *family_plan_noise(sl_mc_family fam, size_t V, size_t gamma, double noise, sl_rule rule)
{
    sl_mc_family_params fp = SL_MC_FAMILY_DEFAULT;
    fp.family = fam;
    fp.V = V;
    fp.gamma = gamma;
    fp.noise = noise;
    sl_mc_rows *rows;
    cr_assert_eq(sl_mc_family_rows(&fp, &rows), SL_OK, "%s", sl_errmsg());
    sl_mc_source src = sl_mc_rows_source(rows);
    sl_spec_config cfg = SL_SPEC_CONFIG_DEFAULT;
    cfg.rule = rule;
    sl_mc_plan *plan;
    cr_assert_eq(sl_mc_plan_alloc(&src, gamma, &cfg, &plan), SL_OK, "%s", sl_errmsg());
    sl_mc_rows_free(rows);
    return plan;
}

static inline sl_mc_plan *family_plan(sl_mc_family fam, size_t V, size_t gamma, sl_rule rule)
{
    return family_plan_noise(fam, V, gamma, SL_MC_FAMILY_DEFAULT.noise, rule);
}

static inline int same_double(double a, double b)
{
    return (isnan(a) && isnan(b)) || memcmp(&a, &b, sizeof a) == 0;
}

#endif
