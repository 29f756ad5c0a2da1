/*
 * sl_dist.h: probability vectors over a vocabulary: checks, softmax, standardisation
 * (temperature, top-k, top-p, min-p), distances (beta, D_LK, TV, KL), the residual
 * norm(max(0, p - q)), and O(1) categorical sampling with alias tables.
 *
 * Notation (THEORY.md): p = target, q = draft. Vectors are double, length V.
 */
#ifndef SL_DIST_H
#define SL_DIST_H

#include <stddef.h>
#include <stdint.h>
#include <gsl/gsl_rng.h>

/* Default tolerance on |sum(p) - 1| accepted by sl_dist_check: loose enough for float32 softmax
 * output of a 50k vocabulary (sum error ~ V * 6e-8), tight enough to catch unnormalised input. */
#define SL_DIST_SUM_TOL 1e-6

/* Checks that p (V) is a probability vector: every entry finite and >= 0, sum within tol of 1.
 * name (e.g. "p", "q", "--p") goes into the one-line error; returns SL_EINPUT on failure. */
int sl_dist_check(const double *p, size_t V, double tol, const char *name);

/* e^x for x <= 0 (-inf: 0), within 2 ulp: the exponential sl_dist_softmax uses (vectorised there). */
double sl_dist_exp_nonpos(double x);
/* Numerically stable softmax: subtracts the max; logits may contain -inf (probability 0) but not
 * NaN or +inf (returns SL_EINPUT). */
int sl_dist_softmax(const double *logits, size_t V, double *p);

/* Sampling settings that turn logits into one probability vector ("standardisation").
 * Applied in this order: temperature, softmax, top-k, top-p, min-p, renormalise.
 * temperature == 0 gives a one-hot vector at the argmax (lowest id on ties) and ignores the rest. */
typedef struct {
    double temperature; /* >= 0; 1 = unchanged */
    size_t top_k;       /* 0 = off; else keep the k most probable (ties: lower id first) */
    double top_p;       /* in (0, 1]; 1 = off; keep the smallest prefix (by descending p, ties lower id
                           first) whose mass reaches top_p */
    double min_p;       /* in [0, 1); 0 = off; drop tokens with p < min_p * max p */
} sl_sampling;

#define SL_SAMPLING_DEFAULT ((sl_sampling){1.0, 0, 1.0, 0.0})

int sl_sampling_validate(const sl_sampling *s);

/* Scratch space for standardisation (sorting indices); one per thread, reused. */
typedef struct {
    size_t V;
    uint32_t *idx;  /* (V) */
    double *tmp;    /* (V) */
} sl_dist_work;

sl_dist_work *sl_dist_work_alloc(size_t V);
void sl_dist_work_free(sl_dist_work *w);

/* logits (V) -> p (V) under s. */
int sl_dist_standardise(const double *logits, size_t V, const sl_sampling *s, double *p, sl_dist_work *w);
int sl_dist_standardise_f32(const float *logits, size_t V, const sl_sampling *s, double *p, sl_dist_work *w);
/* The filters that standardisation applies after the softmax, in place, in the documented order:
 * top-k, top-p, min-p, each renormalising, so that top-p sees the mass top-k left (as Hugging
 * Face's logits processors do). For a softmax computed elsewhere (a device). */
void sl_dist_filter(double *p, size_t V, const sl_sampling *s, sl_dist_work *w);
/* Whether s has a filter that sl_dist_filter applies at vocabulary size V. */
int sl_sampling_filters(const sl_sampling *s, size_t V);

/* Fills w->idx[0..V) with token ids sorted by descending p, ties by lower id first. */
void sl_dist_sort_desc(const double *p, size_t V, sl_dist_work *w);
/* out (V) = p truncated to its k most probable tokens (order of sl_dist_sort_desc), renormalised.
 * out may alias p. k = 0 or k >= V copies p. */
void sl_dist_top_k(const double *p, size_t V, size_t k, double *out, sl_dist_work *w);

/* beta = sum_x min(p(x), q(x)). */
double sl_dist_beta(const double *p, const double *q, size_t V);
/* D_LK(p, q) = sum_x |p(x) - M(x)|, M = (p+q)/2; equals 1 - beta for normalised inputs. */
double sl_dist_dlk(const double *p, const double *q, size_t V);
/* Total variation = max_A |p(A) - q(A)| = (1/2) sum |p - q|. */
double sl_dist_tv(const double *p, const double *q, size_t V);
/* KL(p || q) in nats; +inf when some p(x) > 0 has q(x) = 0. */
double sl_dist_kl(const double *p, const double *q, size_t V);
/* The acceptance probability of the other rules (THEORY.md, "Lenience and other acceptance rules"):
 * lenient rule, accept with min(1, p/(l q)): alpha_l = sum_x min(q(x), p(x)/l), which is beta at l = 1;
 * sampler match, accept when an independent draw from p equals the draft: sum_x p(x) q(x);
 * non-iterative rejection (accept with q/p-style thresholds): min over p(x) > 0 of q(x)/p(x). */
double sl_dist_alpha_lenient(const double *p, const double *q, size_t V, double l);
double sl_dist_alpha_match(const double *p, const double *q, size_t V);
double sl_dist_alpha_nonit(const double *p, const double *q, size_t V);
/* Shannon entropy in nats. */
double sl_dist_entropy(const double *p, size_t V);
/* Index of the largest entry, lowest index on ties. */
size_t sl_dist_argmax(const double *p, size_t V);

/* Residual norm(max(0, p - q)) over the full vocabulary into out (V); returns the normaliser
 * sum_x max(0, p(x) - q(x)), which equals 1 - beta. When the normaliser is 0 (p == q, beta = 1)
 * a rejection has probability 0; out is then set to p so that the result is still a valid pmf. */
double sl_dist_residual(const double *p, const double *q, size_t V, double *out);

/* Inverse-CDF draw from p (V) with the uniform u in [0, 1): the smallest x with cdf(x) > u,
 * skipping zero-probability entries even under rounding. O(V). */
size_t sl_dist_sample_u(const double *p, size_t V, double u);

/* Walker/Vose alias table: O(V) build, O(1) draws that use one 53-bit uniform. */
typedef struct {
    size_t V;
    double *prob;    /* (V) acceptance threshold of each column */
    uint32_t *alias; /* (V) alias of each column */
    uint32_t *work;  /* (2V) build scratch */
} sl_alias;

sl_alias *sl_alias_alloc(size_t V);
void sl_alias_free(sl_alias *a);
/* Builds the table for p (V); p must be a checked probability vector. */
void sl_alias_build(sl_alias *a, const double *p);
size_t sl_alias_sample_u(const sl_alias *a, double u);
size_t sl_alias_sample(const sl_alias *a, gsl_rng *r);

#endif
