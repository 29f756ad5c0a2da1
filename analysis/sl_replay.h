/*
 * sl_replay.h: the exact sequential replay of a measure log (THEORY.md, "Replaying a log").
 *
 * A measure log holds the text the target sampled, x_1..x_n, with p(x_t) and q(x_t) at every
 * position. A lossless speculative run emits text with the same law, and given that the token
 * emitted at a tested position is x, its draft was accepted with probability
 *     a_t = P(accept | x) = min(p(x), q(x)) / p(x) = min(1, q(x_t) / p(x_t)),
 * independently across positions given the text. So a speculative run at fixed gamma, replayed
 * along the logged text, starts an iteration at t, tests positions t, t+1, ... each with its own
 * a_t, stops at the first rejection (or after gamma acceptances) and emits one more token; the
 * next iteration starts where this one ended. At temperature 0 every a_t is 0 or 1 and the replay
 * is deterministic: it gives the iterations a greedy run needs on the same prompt.
 *
 * The expected number of iterations along one sequence is computed exactly by a backward
 * recursion over positions (O(n gamma), no random numbers); simulations (seeded) give the
 * distribution of the iterations an answer needs (latency). Rows of many sequences accumulate in
 * sl_replay_seqs, whose tokens per iteration carry a bootstrap CI over sequences.
 *
 * Only the exact acceptance rule (Leviathan et al.) is replayed: a lenient rule accepts with
 * another probability.
 */
#ifndef SL_REPLAY_H
#define SL_REPLAY_H

#include <stddef.h>
#include <stdint.h>

#include <gsl/gsl_rng.h>

/* a = min(1, q / p) for a logged token with target probability p and draft probability q; 0 when
 * p <= 0 (a token the target could not have sampled: never in a valid log). */
double sl_replay_accept_prob(double p_token, double q_token);

/* Expected iterations, accepted drafts and tested drafts (up to and including the first
 * rejection) of a fixed-gamma run along one sequence of n positions with acceptance probabilities
 * a (n). Exact: E[t] = 1 + sum_k P(K_t = k) E[t + k + 1], E[t >= n] = 0. scratch (3 (n + 2)). */
void sl_replay_expect(const double *a, size_t n, size_t gamma, double *scratch, double *iterations, double *accepted,
                      double *tested);

/* One simulated run: the iterations needed to emit `answer` tokens along the sequence (positions
 * wrap around to 0 when the answer is longer than n >= 1). Draws one uniform from r per tested
 * position whose a is strictly between 0 and 1. */
size_t sl_replay_simulate(const double *a, size_t n, size_t gamma, size_t answer, gsl_rng *r);

/* The replay of many sequences, gamma = 1..G. */
typedef struct {
    size_t G, n_seq, cap;
    size_t n_rows, rows_cap;
    double *a;         /* (n_rows) acceptance probabilities, sequences one after another */
    size_t *start;     /* (n_seq + 1) first row of each sequence; start[n_seq] = n_rows */
    double *iters;     /* (n_seq, G) expected iterations */
    double *accepted;  /* (n_seq, G) expected accepted drafts */
    double *tested;    /* (n_seq, G) expected tested drafts */
    double *scratch;   /* (3 (longest + 2)) */
    size_t scratch_len;
    int deterministic; /* every a is 0 or 1 (a temperature-0 log) */
    int drop_rows;     /* set after init: keep only per-sequence sums (memory O(sequences x G), as analyze
                          promises); a is then not kept and the latency simulations are refused */
} sl_replay_seqs;

int sl_replay_seqs_init(sl_replay_seqs *s, size_t G);
void sl_replay_seqs_free(sl_replay_seqs *s);
/* Appends one sequence (n >= 0 rows of acceptance probabilities in [0, 1]). */
int sl_replay_seqs_add(sl_replay_seqs *s, const double *a, size_t n);

/* Reads a measure log (every sequence, a_t from /positions/p_token and q_token) into s with
 * gamma = 1..G. SL_EINPUT for a run log or a row whose p_token or q_token is outside [0, 1] or
 * whose p_token is 0. */
int sl_replay_log(const char *path, size_t G, sl_replay_seqs *s);

/* Tokens per iteration at gamma g (1..G): sum of tokens / sum of expected iterations over the
 * sequences; acceptance (accepted / tested drafts) likewise. */
double sl_replay_tokens_per_iteration(const sl_replay_seqs *s, size_t g);
double sl_replay_alpha(const sl_replay_seqs *s, size_t g);

/* Bootstrap over whole sequences: out (n_boot, G) receives each resample's tokens per iteration
 * for every gamma (NaN when a resample has no iterations); resample b draws its n_seq indices from
 * (seed, SL_STREAM_BOOT, b), as sl_analyze_boot_ratio does. */
int sl_replay_boot(const sl_replay_seqs *s, size_t n_boot, uint64_t seed, double *out);

/* Latency of an answer of `answer` tokens at gamma g: n_sims simulations spread evenly over the
 * sequences (simulation j of sequence k from (seed, SL_STREAM_ACCEPT, 2^41 + k * per_seq + j)),
 * each started at the sequence's first position; iters (n_sims) receives the iteration counts. */
int sl_replay_latency_sims(const sl_replay_seqs *s, size_t g, size_t answer, size_t n_sims, uint64_t seed,
                           double *iters);

#endif
