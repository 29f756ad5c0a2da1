/*
 * sl_train.h: the speclab trainer. A GPT-2 decoder's forward and backward pass over flat (B,T,C)
 * float32 arrays in the style of llm.c's train_gpt2.c, losses for training from data
 * (cross-entropy) and for distillation from a teacher's logits (KL and total variation), AdamW,
 * the learning-rate schedule, the token-file reader, resumable checkpoints and export to the
 * native model format (models/FORMAT.md).
 *
 * Semantics match FORMAT.md's gpt2 exactly: pre-norm blocks x += attn(LN(x)); x += mlp(LN(x)),
 * LayerNorm with norm_eps, GELU in its tanh form, learned positions, a final LayerNorm, logits =
 * h · W_unembed^T with W_unembed = tok_emb (tied) or lm_head, causal attention scaled by
 * 1/sqrt(head_dim). In memory q, k and v of a layer are one (3C, C) matrix (rows q, then k, then v),
 * which is exactly the concatenation of FORMAT.md's attn.q/k/v weights; export splits it.
 *
 * What this is not: a general autodiff, a llama trainer, or a multi-node trainer. No dropout.
 * Compute is float32 with OpenBLAS sgemm for the matmuls and OpenMP elsewhere; every OpenMP loop
 * splits work so that each output element is summed in a fixed order, so results do not depend on
 * the thread count (as far as OpenBLAS sgemm does not, which splits rows and columns, never K).
 */
#ifndef SL_TRAIN_H
#define SL_TRAIN_H

#include <stddef.h>
#include <stdint.h>

#include <gsl/gsl_rng.h>

#include "sl_train_types.h"

/* Parses {"n_layer", "n_head", "d_model", "d_ff", "max_seq_len", "vocab_size"[, "norm_eps",
 * "tied_embeddings", "n_kv_head"]} with json-c and checks it (SL_EINPUT naming the field). */
int sl_train_config_parse(const char *json, sl_train_config *cfg);
int sl_train_config_check(const sl_train_config *cfg);
/* FORMAT.md's `config` metadata JSON; caller frees. */
char *sl_train_config_json(const sl_train_config *cfg);
/* A json-c number that prints as the shortest decimal reading back as x. */
struct json_object;
struct json_object *sl_train_json_double(double x);



/* Activations of one forward pass, kept for the backward pass. L = n_layer, F = d_ff. */
typedef struct {
    float *encoded;   /* (B, T, C) */
    float *ln1;       /* (L, B, T, C) */
    float *ln1_mean;  /* (L, B, T) */
    float *ln1_rstd;  /* (L, B, T) */
    float *qkv;       /* (L, B, T, 3C) */
    float *atty;      /* (L, B, T, C) */
    float *att;       /* (L, B, NH, T, T) softmaxed attention, 0 above the diagonal */
    float *attproj;   /* (L, B, T, C) */
    float *residual2; /* (L, B, T, C) */
    float *ln2;       /* (L, B, T, C) */
    float *ln2_mean;  /* (L, B, T) */
    float *ln2_rstd;  /* (L, B, T) */
    float *fch;       /* (L, B, T, F) */
    float *fch_gelu;  /* (L, B, T, F) */
    float *fcproj;    /* (L, B, T, C) */
    float *residual3; /* (L, B, T, C) */
    float *lnf;       /* (B, T, C) */
    float *lnf_mean;  /* (B, T) */
    float *lnf_rstd;  /* (B, T) */
    float *logits;    /* (B, T, V) */
    float *losses;    /* (B, T) per-position loss of the last sl_train_loss call */
} sl_train_acts;
#define SL_TRAIN_N_ACTS 21

typedef struct {
    sl_train_config cfg;
    size_t param_sizes[SL_TP_N]; /* floats per tensor */
    size_t n_params;
    float *params_mem;         /* (n_params) one allocation for every parameter */
    float *params[SL_TP_N];    /* pointer table into params_mem */
    float *grads_mem;          /* (n_params) or NULL for a forward-only model (a teacher) */
    float *grads[SL_TP_N];
    float *m, *v;              /* (n_params) AdamW moments, or NULL */
    int B, T;                  /* activation buffers hold up to B*T positions */
    float *acts_mem;
    sl_train_acts acts;
    float *grad_acts_mem;      /* gradients of the activations (att, means, rstds unused) */
    sl_train_acts grad_acts;
} sl_train_model;

/* Allocates a model for batches of up to B sequences of up to T tokens; with_grads adds gradient
 * and AdamW buffers. Parameters are zero until sl_train_init or a load. NULL on failure. */
sl_train_model *sl_train_model_alloc(const sl_train_config *cfg, int B, int T, int with_grads);
void sl_train_model_free(sl_train_model *m);
size_t sl_train_n_params(const sl_train_config *cfg);

/* GPT-2 initialisation: matrices ~ N(0, 0.02), the two residual projections ~ N(0, 0.02/sqrt(2L)),
 * LayerNorm gains 1, biases 0. One generator per tensor from (seed, SL_STREAM_DATA,
 * SL_TRAIN_INIT_ITEM + tensor), so the init never shares draws with batch sampling. */
#define SL_TRAIN_INIT_ITEM (UINT64_C(1) << 62)
void sl_train_init(sl_train_model *m, uint64_t seed);

/* Forward pass of B sequences of T tokens (inputs (B, T), ids < V, B <= m->B, T <= m->T and
 * T <= max_seq_len); leaves logits in m->acts.logits (B, T, V). */
void sl_train_forward(sl_train_model *m, const int *inputs, int B, int T);

const char *sl_train_objective_name(int obj);

/* Loss of the logits of the last forward pass, averaged over the B*T positions. targets (B, T) for
 * CE; teacher_logits (B, T, V) for KL and TV (softmaxed at temperature 1). When the model has
 * gradients it also writes d(grad_scale * loss)/d(logits) into m->grad_acts.logits.
 *
 * TV subgradient: with S = {x : q(x) < p(x)}, the loss is 1 - sum_{S} q - sum_{not S} p, so
 * d loss / d z_j = q_j (q(S) - [j in S]); positions where q(x) = p(x) exactly are counted outside
 * S (the one-sided derivative that treats p as the minimum), a measure-zero choice. */
double sl_train_loss(sl_train_model *m, int objective, const int *targets, const float *teacher_logits,
                     int B, int T, float grad_scale);

/* Sets every parameter gradient to zero (start of a step; micro-batches then accumulate). */
void sl_train_zero_grad(sl_train_model *m);
/* Backward pass from m->grad_acts.logits, accumulating into m->grads. Same inputs as the forward. */
void sl_train_backward(sl_train_model *m, const int *inputs, int B, int T);

/* Global L2 norm of the gradients (summed in double, in a fixed order). */
double sl_train_grad_norm(const sl_train_model *m);
void sl_train_scale_grads(sl_train_model *m, float s);

void sl_train_hparams_default(sl_train_hparams *h);

/* Learning rate for step (0-based): lr*(step+1)/warmup for step < warmup, then
 * lr_min + (lr - lr_min)(1 + cos(pi u))/2 with u = (step - warmup)/(steps - warmup) in [0, 1) and
 * lr_min = lr*min_lr_frac. */
double sl_train_lr(const sl_train_hparams *h, uint64_t step);

/* One AdamW update with bias correction (t = 1-based step count):
 *   m = b1 m + (1-b1) g;  v = b2 v + (1-b2) g^2;
 *   w -= lr * ( (m/(1-b1^t)) / (sqrt(v/(1-b2^t)) + eps) + wd * w )   (wd only where it decays). */
void sl_train_adamw(sl_train_model *m, const sl_train_hparams *h, double lr, uint64_t t);

/* ---- token files ----
 * Layout (little-endian): magic "SLTOK\0\0\1" (8 bytes), uint32 vocab_size, uint32 bytes per id
 * (2 or 4), uint64 n_tokens, then n_tokens ids. */
typedef struct {
    char *path;
    uint32_t vocab_size;
    uint64_t n_tokens;
    int32_t *ids; /* (n_tokens) */
} sl_train_tokens;
int sl_train_tokens_read(const char *path, sl_train_tokens **out); /* SL_EINPUT on a bad or empty file */
void sl_train_tokens_free(sl_train_tokens *tf);
/* Writes a token file (tests and tools). */
int sl_train_tokens_write(const char *path, uint32_t vocab_size, int bytes_per_id, const int32_t *ids, uint64_t n);

/* Training batch of optimiser step `step`, micro-batch `micro`: row b is the window starting at
 * a uniform offset drawn from (seed, SL_STREAM_DATA, (step*accum + micro)*B + b), so a batch depends
 * on (seed, step) only and a resumed run sees the same data. inputs/targets (B, T); needs
 * n_tokens >= T + 1. */
void sl_train_tokens_batch(const sl_train_tokens *tf, uint64_t seed, uint64_t step, int micro, int accum, int B, int T,
                      int *inputs, int *targets, gsl_rng *r);
/* Validation batch k of n_batches: evenly spaced windows over the whole file. */
void sl_train_tokens_eval_batch(const sl_train_tokens *tf, int k, int n_batches, int B, int T, int *inputs, int *targets);

#endif
