/*
 * sl_verify_internal.h: the test core shared by every verify mode (synthetic sampler, external
 * samples, two sample files, real models): a growable list of count tests, and the one function
 * that turns them into result rows (statistics, small-count p-values, Holm, TV CI, power).
 * Not installed with the public headers; used by analysis/sl_verify*.c only.
 */
#ifndef SL_VERIFY_INTERNAL_H
#define SL_VERIFY_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "sl_verify.h"

/* One test before it is computed. A goodness-of-fit test has pmf; a homogeneity test has
 * counts_b. A test computed elsewhere (a KS test of PIT values, say) sets fixed_method and its
 * statistic, p-value and n; the finisher copies them, counts them in Holm, and gives no power. */
typedef struct {
    char name[32];
    char null[32];
    size_t k;          /* categories */
    uint64_t *counts;  /* (k) the sample under test */
    uint64_t *counts_b;/* (k) the other sample (homogeneity) or NULL */
    double *pmf;       /* (k) null pmf (goodness of fit) or NULL */
    const char *fixed_method; /* NULL, or e.g. "ks" */
    double fixed_stat, fixed_p;
    size_t fixed_n;
} sl_vtest;

typedef struct {
    sl_vtest *t; /* (n) */
    size_t n, cap;
} sl_vtests;

/* Appends a zeroed test with k categories (counts always; pmf and counts_b as asked); NULL and
 * sl_fail on allocation failure. The pointer is valid until the next add. */
sl_vtest *sl_vtests_add(sl_vtests *v, const char *name, const char *null, size_t k, int with_pmf, int with_b);
/* Appends a test computed elsewhere (no counts). */
int sl_vtests_add_fixed(sl_vtests *v, const char *name, const char *null, const char *method, size_t n,
                        double stat, double p);
void sl_vtests_free(sl_vtests *v);

/* An empty result (NaN lenience fields) for the finisher to fill; NULL on allocation failure. */
sl_verify_result *sl_verify_result_new(void);
/* Computes every row of r->test from the tests in order, Holm over the counted ones, the verdict
 * at o->level and each row's power against o->tv_delta at Holm's first threshold. o->seed seeds
 * the Monte Carlo p-values and the tie randomisation (test i uses item i). */
int sl_verify_finish(const sl_vtests *v, const sl_verify_opts *o, sl_verify_result *r);

/* The null pmfs of the rule (V): the target a position must reproduce (argmax p for lenient-t0,
 * else p), the token emitted at a rejection (the residual norm(max(0, p - q)); p (1 - q)
 * normalised for sampler-match; argmax p for lenient-t0), and that null's name in reports. */
void sl_verify_null_target(const sl_spec_config *cfg, const double *p, size_t V, double *out);
void sl_verify_null_rejection(const sl_spec_config *cfg, const double *p, const double *q, size_t V, double *out);
const char *sl_verify_null_rejection_name(const sl_spec_config *cfg);

#endif
