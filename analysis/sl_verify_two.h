/*
 * sl_verify_two.h: do two samplers produce the same distribution of continuations? Tests two sets
 * of token sequences (typically K continuations of one prompt from a speculative engine and K from
 * plain autoregressive sampling) for homogeneity, with nothing known about either model
 * (analysis/VERIFY_TWO.md says what each test detects and cannot detect).
 *
 * Inputs (sl_seqs_read), one sequence per line, '#' comment lines and blank lines skipped:
 *   tokens-out  "SEQ MODE t1,t2,..."  as `speclab run --tokens-out` writes it: SEQ an integer >= 0,
 *               MODE speculative | autoregressive, then the ids joined by commas (none: empty);
 *   plain       "t1,t2,..." or "t1 t2 ..." (commas and/or blanks between ids).
 * The format is decided by the first data line (tokens-out when its second field starts with a
 * letter); every later line must follow it. Ids are integers in [0, SL_SEQS_MAX_ID].
 *
 * Tests, in this order (rows present only when both sets have the data; see sl_verify_two_run):
 *   length       the sequence length (degenerate, hence not counted, when every length is equal)
 *   position_j   j = 1..J: the token at position j, among the sequences of length >= j
 *   block2       the first 2 tokens of each sequence, as one category (sequences of length >= 2)
 *   block3       the first 3 tokens, likewise
 *   block2_all   every non-overlapping pair (x1 x2)(x3 x4)... of every sequence
 *   block3_all   every non-overlapping triple, likewise
 *                (block2_all, block3_all, all only when some sequence gives two blocks or more:
 *                otherwise they would repeat block2, block3, position_1)
 *   all          every token of every position
 * Categories are the distinct values seen in either set, in ascending (lexicographic) order; no
 * table of V^2 or V^3 cells is ever built. One observation per sequence (length, position_j,
 * block2, block3): Pearson chi^2 and G homogeneity with sl_stats_homogeneity's pooling (cells
 * whose smaller expected count is < 5 are merged, smallest first, into one cell of expected count
 * >= 5). Several observations per sequence (block2_all, block3_all, all) are dependent within a
 * sequence, so the chi^2 reference does not hold; their p-value is a permutation one: the pooled
 * Pearson statistic against `permutations` random reassignments of whole sequences to the two sets
 * (exact in level when the sequences of both sets are exchangeable, i.e. under the null). When
 * either set is a single sequence (a stream) there is nothing to permute and they use the chi^2
 * reference, which then assumes the stream's tokens are independent.
 * Holm over every counted test; TV of each test with a Hoeffding-union CI (for the permutation
 * tests with the effective number of sequences (sum L)^2 / sum L^2 in place of the token count);
 * the power guaranteed against TV >= tv_delta at Holm's first threshold with n_eff = n_a n_b /
 * (n_a + n_b) (none for the permutation tests).
 */
#ifndef SL_VERIFY_TWO_H
#define SL_VERIFY_TWO_H

#include <stddef.h>
#include <stdint.h>

#include "sl_table.h"
#include "sl_verify.h"

#define SL_SEQS_MAX_ID 2097151 /* 2^21 - 1: three ids pack into one 64-bit block key */

typedef enum { SL_SEQS_ANY = 0, SL_SEQS_SPECULATIVE = 1, SL_SEQS_AUTOREGRESSIVE = 2 } sl_seqs_mode;

/* A set of token sequences: sequence i is tok[off[i] .. off[i + 1]). */
typedef struct {
    size_t n;      /* sequences */
    size_t *off;   /* (n + 1) */
    int32_t *tok;  /* (off[n]) */
} sl_seqs;

/* "speculative" | "autoregressive" | "any"; SL_EINPUT otherwise. */
int sl_seqs_mode_parse(const char *s, sl_seqs_mode *out);
const char *sl_seqs_mode_name(sl_seqs_mode m);
/* Reads the sequences of path (format above), keeping the lines of mode m (a plain file has no
 * mode: m must be SL_SEQS_ANY or it is refused). SL_EINPUT, naming the file and line, for a
 * malformed line, an id outside [0, SL_SEQS_MAX_ID], or no sequence of the asked mode. */
int sl_seqs_read(const char *path, sl_seqs_mode m, sl_seqs **out);
/* One long sequence of n tokens (a copy): the hook for a token stream read elsewhere (CSV or
 * HDF5 samples, analysis/sl_samples.h). TODO(lead): `speclab verify --two-sample` reads such a
 * file as sl_seqs_from_stream(tok, n, &s) and passes s on; only block2_all, block3_all and all then
 * apply, with the chi^2 reference (independent tokens assumed). */
int sl_seqs_from_stream(const int32_t *tok, size_t n, sl_seqs **out);
void sl_seqs_free(sl_seqs *s);

typedef struct {
    sl_verify_opts base;    /* level, tv_delta and seed (permutations) are used */
    size_t max_positions;   /* J at most (default 16) */
    size_t min_sequences;   /* a per-sequence test needs this many sequences in each set (default 10) */
    size_t permutations;    /* for block2_all, block3_all, all (default 9999) */
} sl_verify_two_opts;

#define SL_VERIFY_TWO_OPTS_DEFAULT ((sl_verify_two_opts){SL_VERIFY_OPTS_DEFAULT, 16, 10, 9999})

typedef struct {
    sl_verify_result *core; /* tests, Holm, verdict; rule and lenience do not apply */
    size_t seqs_a, seqs_b;
    uint64_t tokens_a, tokens_b;
    size_t positions;       /* J: position tests built */
    size_t permutations;    /* used by the permutation tests (0 when none ran) */
} sl_verify_two_result;

/* The tests above, a against b, into *out (free with sl_verify_two_result_free). J is the largest
 * j <= max_positions such that both sets have >= min_sequences sequences of length >= j; block2
 * and block3 likewise need min_sequences sequences of length >= 2 (3) in each set. */
int sl_verify_two_run(const sl_seqs *a, const sl_seqs *b, const sl_verify_two_opts *o, sl_verify_two_result **out);
void sl_verify_two_result_free(sl_verify_two_result *r);
/* Tables verdict and tests, owned by the caller; tables must hold 2. */
int sl_verify_two_report(const sl_verify_two_result *r, sl_table **tables, size_t *n_tables);

#endif
