/*
 * sl_ngram.h: unigram and bigram drafts from corpus counts, and the prompt-lookup draft.
 *
 * Both give a full next-token distribution over the whole vocabulary with no zero entry, so the
 * exact acceptance rule applies (q > 0 wherever p > 0). Smoothing (models/README.md, "Drafts that
 * are not transformers"):
 *   unigram, add-k:  P1(w) = (c(w) + k) / (N + k V)
 *   bigram, interpolated absolute discounting (absdisc) or interpolated Kneser-Ney (kn):
 *     P2(w | v) = max(c(v,w) - D, 0) / c(v.) + D N1+(v.) / c(v.) * Plow(w)     if c(v.) > 0
 *               = Plow(w)                                                       if c(v.) = 0
 *     absdisc: Plow = P1;  kn: Plow(w) = (N1+(.w) + k) / (N1+(..) + k V) (continuation counts)
 *   with c(v.) = sum_w c(v,w), N1+(v.) = #{w : c(v,w) > 0}, N1+(.w) = #{v : c(v,w) > 0},
 *   N1+(..) = number of distinct bigrams, D in (0, 1] (default n1 / (n1 + 2 n2), Ney et al. 1994,
 *   from the numbers of bigram types seen once and twice). Since every c(v,w) >= 1 >= D, the
 *   discounted mass of a row is exactly D N1+(v.) / c(v.), so each row sums to 1.
 * Bigrams do not cross the end of one training file into the next.
 *
 * File (models/FORMAT.md, "n-gram models"): safetensors with arch "ngram"; counts as I32 tensors,
 * the bigram table in compressed sparse rows. The loader recomputes nothing it could get wrong
 * silently: it validates every index, count and sum (SL_EINPUT naming the file otherwise).
 *
 * Prompt lookup (as HF transformers' prompt lookup decoding and llama.cpp's lookup): with the
 * context h[0..t), for n = N down to 1, find the most recent j < t - n with h[j..j+n) equal to the
 * last n tokens; the proposal is x = h[j+n]. q = (1 - eps) delta_x + eps f, where f is the fallback
 * (uniform 1/V, or an n-gram file's unigram P1); with no match q = f.
 */
#ifndef SL_NGRAM_H
#define SL_NGRAM_H

#include <stddef.h>
#include <stdint.h>

#include "sl_dist.h"
#include "sl_spec.h"

typedef enum { SL_NGRAM_ADDK = 0, SL_NGRAM_ABSDISC = 1, SL_NGRAM_KN = 2 } sl_ngram_smoothing;

const char *sl_ngram_smoothing_name(sl_ngram_smoothing s); /* "addk", "absdisc", "kn" */
int sl_ngram_smoothing_parse(const char *s, sl_ngram_smoothing *out);

typedef struct {
    size_t vocab_size;
    int order;                       /* 1 or 2 */
    sl_ngram_smoothing smoothing;    /* order 1: addk; order 2: absdisc or kn */
    double add_k;                    /* > 0 */
    double discount;                 /* D in (0, 1], order 2 */
    uint64_t n_tokens;               /* N: tokens counted for the unigram */
    int32_t *uni;                    /* (V) c(w) */
    size_t nnz;                      /* distinct bigrams */
    int32_t *row_ptr;                /* (V + 1) CSR offsets by left token v; order 2 */
    int32_t *col;                    /* (nnz) right token w, ascending within a row */
    int32_t *cnt;                    /* (nnz) c(v, w) >= 1 */
    /* derived at load */
    double *p_uni;                   /* (V) P1 */
    double *p_low;                   /* (V) Plow (order 2) */
    double *lambda;                  /* (V) D N1+(v.) / c(v.), or 1 when c(v.) = 0 (order 2) */
    uint64_t *ctx_count;             /* (V) c(v.) (order 2) */
    char *tokenizer_json;            /* or NULL */
    char *training_json;             /* or NULL */
    /* A prompt-lookup file (arch "lookup") is an order-1 model, the fallback, plus these; 0 in an
     * n-gram file. */
    size_t lookup_n;
    double lookup_eps;
} sl_ngram;

typedef struct {
    int order;
    sl_ngram_smoothing smoothing;
    double add_k;     /* default 1 when 0 */
    double discount;  /* 0: estimate n1 / (n1 + 2 n2) */
} sl_ngram_opts;

/* Counts seqs (n_seqs sequences of ids < V) and fills the derived tables. */
int sl_ngram_train(const int32_t *const *seqs, const size_t *lens, size_t n_seqs, size_t V, const sl_ngram_opts *o,
                   sl_ngram **out);
/* Atomic write (models/FORMAT.md). tokenizer_json, training_json may be NULL. */
int sl_ngram_write(const sl_ngram *m, const char *path);
/* Reads and validates a file whose arch is "ngram", or "lookup" (then lookup_n, lookup_eps are set). */
int sl_ngram_open(const char *path, sl_ngram **out);
void sl_ngram_free(sl_ngram *m);

/* The next-token distribution after prev (ignored for order 1; prev < 0 means no previous token:
 * then Plow for a bigram). out (V). */
void sl_ngram_dist(const sl_ngram *m, int32_t prev, double *out);

/* ---- as the sampler's sl_lm ---- */

/* State: the last token (truncate needs the history, kept for up to max_len tokens). The raw
 * distribution is standardised under sampling (as log-probabilities; a default sampling copies it). */
typedef struct {
    const sl_ngram *m;       /* borrowed */
    sl_sampling sampling;
    size_t max_len, len;
    int32_t *hist;           /* (max_len) */
    double *raw;             /* (V) */
    sl_dist_work *dw;
    sl_lm lm;
} sl_ngram_lm;

int sl_ngram_lm_alloc(const sl_ngram *m, const sl_sampling *s, size_t max_len, sl_ngram_lm **out);
void sl_ngram_lm_free(sl_ngram_lm *l);

/* ---- prompt lookup ---- */

typedef struct {
    size_t vocab_size;
    size_t n_max;            /* N >= 1 */
    double eps;              /* in (0, 1] */
    const double *fallback;  /* (V) borrowed, or NULL for uniform */
    sl_sampling sampling;
    size_t max_len, len;
    int32_t *hist;           /* (max_len) */
    double *raw;             /* (V) */
    sl_dist_work *dw;
    sl_lm lm;
} sl_lookup_lm;

int sl_lookup_lm_alloc(size_t V, size_t n_max, double eps, const double *fallback, const sl_sampling *s,
                       size_t max_len, sl_lookup_lm **out);
void sl_lookup_lm_free(sl_lookup_lm *l);
/* The proposal after h (n tokens): the token that followed the most recent earlier occurrence of the
 * longest suffix of length <= n_max that occurred before, or -1; *match_len gets that length (0). */
int32_t sl_lookup_propose(const int32_t *h, size_t n, size_t n_max, size_t *match_len);
/* q after h (n) into out (V). */
void sl_lookup_dist(const sl_lookup_lm *l, const int32_t *h, size_t n, double *out);

/* ---- drafts built from files: `speclab model ngram` and `speclab model lookup` as library calls
 * (models/sl_ngram_build.c) ---- */

/* The smoothing an order gets unless told: addk for order 1, kn for order 2. */
sl_ngram_smoothing sl_ngram_smoothing_default(int order);

typedef struct {
    const char *const *train; /* (n_train) token files (models/TOKFILE.md), none empty */
    size_t n_train;
    const char *tokenizer;    /* the token files' tokenizer (JSON or a model carrying one), embedded in
                                 the output; NULL: no tokenizer, vocab_size says the vocabulary */
    size_t vocab_size;        /* without a tokenizer; >= 2 */
    sl_ngram_opts opts;       /* order, smoothing, add_k, discount as sl_ngram_train */
    const char *out_path;     /* written atomically, with `training` metadata naming the files */
} sl_ngram_build_cfg;
/* Reads and checks the token files (their vocabulary must be the tokenizer's, or vocab_size),
 * counts them, writes out_path, and returns the model written in *out (sl_ngram_free). */
int sl_ngram_build(const sl_ngram_build_cfg *cfg, sl_ngram **out);

typedef struct {
    size_t n;             /* longest suffix matched, in [1, 64] */
    double eps;           /* in (0, 1] */
    const char *fallback; /* an n-gram or lookup file: its unigram counts and tokenizer are kept */
    const char *out_path; /* a file of arch lookup, written atomically */
} sl_lookup_build_cfg;
/* Writes the prompt-lookup draft lookup:N:EPS:FALLBACK as one file. */
int sl_lookup_build(const sl_lookup_build_cfg *cfg);

#endif
