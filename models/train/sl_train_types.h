/*
 * sl_train_types.h: the trainer's plain types (architecture, parameter layout, objectives,
 * hyperparameters) with no library dependency, shared by the CPU trainer (sl_train.c) and the
 * GPU backend (sl_train_gpu.c, also built by nvcc where no GSL or OpenBLAS headers exist).
 */
#ifndef SL_TRAIN_TYPES_H
#define SL_TRAIN_TYPES_H

#include <stddef.h>
#include <stdint.h>

typedef struct {
    int vocab_size;
    int n_layer;
    int n_head;
    int d_model;
    int d_ff;
    int max_seq_len;
    float norm_eps;      /* LayerNorm epsilon; default 1e-5 */
    int tied_embeddings; /* 1: logits use tok_emb; 0: a separate lm_head; default 1 */
} sl_train_config;

/* Parameter tensors, in memory order. Per-layer tensors are stacked over layers: (L, ...). */
enum sl_train_tensor {
    SL_TP_WTE,      /* (V, C)      tok_emb.weight */
    SL_TP_WPE,      /* (maxT, C)   pos_emb.weight */
    SL_TP_LN1W,     /* (L, C)      layers.i.attn_norm.weight */
    SL_TP_LN1B,     /* (L, C) */
    SL_TP_QKVW,     /* (L, 3C, C)  layers.i.attn.{q,k,v}.weight, concatenated by rows */
    SL_TP_QKVB,     /* (L, 3C) */
    SL_TP_ATTPROJW, /* (L, C, C)   layers.i.attn.o.weight */
    SL_TP_ATTPROJB, /* (L, C) */
    SL_TP_LN2W,     /* (L, C)      layers.i.mlp_norm.weight */
    SL_TP_LN2B,     /* (L, C) */
    SL_TP_FCW,      /* (L, F, C)   layers.i.mlp.up.weight */
    SL_TP_FCB,      /* (L, F) */
    SL_TP_FCPROJW,  /* (L, C, F)   layers.i.mlp.down.weight */
    SL_TP_FCPROJB,  /* (L, C) */
    SL_TP_LNFW,     /* (C)         final_norm.weight */
    SL_TP_LNFB,     /* (C) */
    SL_TP_LMHEAD,   /* (V, C)      lm_head.weight; size 0 when embeddings are tied */
    SL_TP_N
};

/* Floats per parameter tensor of cfg, in memory order (the one layout of params, grads and the
 * AdamW moments in both backends and in checkpoints). */
static inline void sl_train_param_sizes(const sl_train_config *c, size_t *s)
{
    size_t V = (size_t)c->vocab_size, C = (size_t)c->d_model, L = (size_t)c->n_layer, F = (size_t)c->d_ff;
    s[SL_TP_WTE] = V * C;
    s[SL_TP_WPE] = (size_t)c->max_seq_len * C;
    s[SL_TP_LN1W] = L * C;
    s[SL_TP_LN1B] = L * C;
    s[SL_TP_QKVW] = L * 3 * C * C;
    s[SL_TP_QKVB] = L * 3 * C;
    s[SL_TP_ATTPROJW] = L * C * C;
    s[SL_TP_ATTPROJB] = L * C;
    s[SL_TP_LN2W] = L * C;
    s[SL_TP_LN2B] = L * C;
    s[SL_TP_FCW] = L * F * C;
    s[SL_TP_FCB] = L * F;
    s[SL_TP_FCPROJW] = L * C * F;
    s[SL_TP_FCPROJB] = L * C;
    s[SL_TP_LNFW] = C;
    s[SL_TP_LNFB] = C;
    s[SL_TP_LMHEAD] = c->tied_embeddings ? 0 : V * C;
}

/* AdamW decays exactly the matrices (embeddings, q/k/v/o, up/down, lm_head), never LayerNorm
 * weights or biases, as GPT-2/nanoGPT do: decaying a gain towards 0 or a bias towards 0 is not a
 * useful prior, while shrinking matrices limits their norm. */
static inline int sl_train_tensor_decays(int t)
{
    return t == SL_TP_WTE || t == SL_TP_WPE || t == SL_TP_QKVW || t == SL_TP_ATTPROJW || t == SL_TP_FCW ||
           t == SL_TP_FCPROJW || t == SL_TP_LMHEAD;
}

enum sl_train_objective {
    SL_OBJ_CE = 0, /* cross-entropy against the next token */
    SL_OBJ_KL = 1, /* KL(p_teacher || q_student) */
    SL_OBJ_TV = 2, /* total variation 1 - sum_x min(p(x), q(x)) = 1 - beta */
};

typedef struct {
    uint64_t steps;      /* total optimiser steps (0: evaluate and export the starting weights) */
    int batch;           /* sequences per micro-batch */
    int seq;             /* tokens per sequence */
    int accum;           /* micro-batches per step (gradient accumulation) */
    double lr;           /* peak learning rate */
    double min_lr_frac;  /* the cosine decays to lr * min_lr_frac */
    uint64_t warmup;     /* linear warm-up steps */
    double weight_decay; /* decoupled, on matrices only */
    double beta1, beta2, eps;
    double clip;         /* global gradient-norm clip; 0 = off */
    uint64_t seed;
    int objective;       /* enum sl_train_objective */
} sl_train_hparams;

#endif
