/*
 * sl_infer_gpu.h: the inference engine's GPU backend, `--device cuda` on generate, measure, run,
 * verify (with models) and eval.
 *
 * The same decoders as sl_model.c (GPT-2 and Llama, same formulas, float32 compute) with the KV
 * cache on the device, written once in sl_infer_gpu.c and built two ways, as the trainer's backend
 * (models/train/sl_train_gpu.h) is:
 *   - by nvcc into build/libsl_infer_cuda.so (models/infer_gpu.mk), loaded at run time with dlopen,
 *     so that the speclab binary needs no CUDA;
 *   - by the C compiler into libspeclab ("cuda-emu"): every kernel becomes a loop on the CPU (a
 *     warp's 32 lanes a loop over lanes, its shuffles a pairwise tree over them), which is how CI
 *     tests the kernels' arithmetic against sl_model.c (tests/test_infer_gpu.c).
 *
 * A forward call of n tokens (n <= SL_INFER_GPU_NMAX) runs a fixed list of kernels: per layer one
 * norm, one fused q/k/v product writing k and v straight into the cache, (rope), one attention,
 * one output product adding into the residual, one norm, one up product (bias and GELU in its
 * epilogue; Llama: up and gate, then SiLU-product), one down product adding into the residual;
 * then the final norm and the unembedding of the rows asked for. The CUDA build records that list
 * once per (n, rows) as a CUDA graph and replays it; the token ids and the position travel in one
 * small copy, so a step is one graph launch and one copy back: of the logits (forward), or of
 * what a sampler needs of them, made on the device (forward_dist: softmax rows, or argmaxes).
 *
 * Determinism: no atomics; every sum has one fixed order (a product row: lane l of 32 takes the
 * 8-element chunks l, l + 32, ... in order with fused multiply-adds, then a fixed pairwise tree
 * over the lanes). The same inputs give the same bits run to run on one GPU, and a token's
 * logits do not depend on how many tokens share its call. Against sl_model.c results differ in
 * the last bits: other summation orders, float instead of double in the softmax's sum,
 * and the device's expf (in GELU, SiLU and the softmax).
 *
 * The backend is a table of functions: this header is all that sl_model.c and the tests see.
 * Every int-returning entry returns 0 on success; on failure error() holds the message.
 */
#ifndef SL_INFER_GPU_H
#define SL_INFER_GPU_H

#include <stddef.h>
#include <stdint.h>

#define SL_INFER_GPU_ABI 2
#define SL_INFER_GPU_NMAX 16 /* tokens per forward call */

/* A matrix (rows, cols) row-major, dtype 0 f32, 1 f16, 2 bf16 (sl_dtype's values). */
typedef struct {
    const void *w;
    int dt;
} sl_igpu_mat;

typedef struct {
    sl_igpu_mat q, k, v, o, up, gate, down;          /* gate: llama only (else w NULL) */
    const float *attn_norm_w, *attn_norm_b;          /* (d); the biases are gpt2 only, else NULL */
    const float *mlp_norm_w, *mlp_norm_b;            /* (d) */
    const float *bq, *bk, *bv, *bo, *bup, *bdown;    /* gpt2 only */
} sl_igpu_layer;

/* Host pointers to a model's weights, as sl_model holds them (read during upload only). */
typedef struct {
    int arch; /* 0 gpt2 (LayerNorm, GELU, learned positions), 1 llama (RMSNorm, SiLU, rope) */
    int n_layer, n_head, n_kv_head, d_model, d_ff, vocab, max_seq_len, head_dim;
    double norm_eps, rope_theta;
    sl_igpu_mat tok_emb, pos_emb, lm_head;           /* pos_emb gpt2 only */
    const sl_igpu_layer *layers;                     /* (n_layer) */
    const float *final_norm_w, *final_norm_b;
} sl_igpu_weights;

typedef struct sl_igpu_model sl_igpu_model;
typedef struct sl_igpu_ctx sl_igpu_ctx;

typedef struct {
    int abi;          /* SL_INFER_GPU_ABI of the build */
    const char *name; /* "cuda" or "cuda-emu" */
    /* Selects the device (the first GPU) and describes it into info. */
    int (*init)(char *info, size_t n);
    /* Copies the weights to the device, each matrix in its stored dtype. NULL on failure. */
    sl_igpu_model *(*upload)(const sl_igpu_weights *w);
    void (*model_free)(sl_igpu_model *g);
    /* A sequence's state: KV cache for max_len tokens (<= max_seq_len), buffers for NMAX tokens. */
    sl_igpu_ctx *(*ctx_create)(sl_igpu_model *g, int max_len);
    void (*ctx_free)(sl_igpu_ctx *c);
    /* Scores tokens (n in [1, NMAX], ids checked by the caller) at positions pos.. (pos + n <=
     * max_len; cache rows from pos on are overwritten, so truncation is the caller's length alone)
     * and writes the logits of the last n_rows tokens (n_rows in [0, n]) to the host: (n_rows, vocab). */
    int (*forward)(sl_igpu_ctx *c, const int32_t *tokens, int n, int pos, int n_rows, float *logits);
    /* As forward, but what a sampler needs of each of the n_rows rows, computed on the device: at
     * temperature 0 its argmax (the first largest logit) into argmax (n_rows); at temperature T > 0
     * its softmax p_i = exp(z_i / T - max_j z_j / T) / sum, in double as sl_dist_standardise_f32
     * (filters not applied), into p (n_rows, vocab); a few bytes or the rows of p come back
     * instead of the logits. Returns 1 (with the rows' logits written to logits instead) when a
     * row holds a NaN or +inf, or at T > 0 only -inf: the caller applies its own rules to them. */
    int (*forward_dist)(sl_igpu_ctx *c, const int32_t *tokens, int n, int pos, int n_rows, double temperature, double *p,
                        int32_t *argmax, float *logits);
    const char *(*error)(void);
} sl_infer_gpu_api;

/* The C-compiled build of sl_infer_gpu.c (always present in libspeclab). */
const sl_infer_gpu_api *sl_infer_gpu_emu_api(void);

/* Backend by name: "cuda-emu", or "cuda" (dlopen of $SL_INFER_CUDA_LIB, else libsl_infer_cuda.so
 * next to the running executable). SL_EINPUT with a one-line reason when it cannot be had. The
 * first successful open of a name is kept: later calls return it without loading again. */
int sl_infer_gpu_open(const char *name, const sl_infer_gpu_api **api, char *info, size_t n);

#endif
