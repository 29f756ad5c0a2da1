/*
 * sl_model.h: GPT-2 and Llama decoders over the native format (models/FORMAT.md), a KV-cache
 * context that scores n new tokens in one call, and the adapter to the sampler's sl_lm interface.
 *
 * Weights: matrices (attention, MLP, embeddings, unembedding) are used in place from the
 * read-only mapping in their stored dtype; f16/bf16 rows are converted to float32 in registers by
 * the kernel (sl_kern.h), so an f16 model reads half the bytes per token. Norm weights and biases
 * (vectors of d_model or d_ff) are converted to float32 once at load. Compute is float32.
 *
 * What this refuses: files whose metadata is not speclab-model version 1, configs that do not
 * describe a valid model, tensors missing, unexpected, or shaped differently from the config,
 * token ids outside [0, vocab_size), and more tokens than the context holds. All are SL_EINPUT
 * with a one-line message naming the file (and tensor, or value).
 */
#ifndef SL_MODEL_H
#define SL_MODEL_H

#include <stddef.h>
#include <stdint.h>

#include "sl_dist.h"
#include "sl_kern.h"
#include "sl_spec.h"
#include "sl_st.h"

typedef enum { SL_ARCH_GPT2 = 0, SL_ARCH_LLAMA = 1 } sl_arch;

const char *sl_arch_name(sl_arch a);
int sl_arch_parse(const char *s, sl_arch *out);

typedef struct {
    size_t vocab_size, n_layer, n_head, n_kv_head, d_model, d_ff, max_seq_len;
    double norm_eps;
    double rope_theta; /* llama only */
    int tied_embeddings;
} sl_model_config;

/* Parses and validates the config JSON of FORMAT.md for arch. what names the source in messages
 * (a file path or "--config"). Missing keys: n_kv_head defaults to n_head, norm_eps to 1e-5,
 * rope_theta to 10000, tied_embeddings to true; the sizes are required. */
int sl_model_config_parse(const char *json_text, sl_arch arch, const char *what, sl_model_config *out);
/* The config as JSON text (malloc'd), keys in FORMAT.md's order. */
char *sl_model_config_json(const sl_model_config *c, sl_arch arch);

/* A weight matrix used in place: rows of in elements of dtype dt. */
typedef struct {
    const void *w;     /* row-major, in the file's mapping */
    sl_dtype dt;
    const void *pk;    /* the same matrix in the kernel's packed layout (sl_kern_pack), or NULL: the CPU
                          engine's matmuls read pk when set, everything else reads w */
} sl_model_w;

typedef struct {
    sl_model_w q, k, v, o;       /* (n_head*hd, d), (kv_dim, d), (kv_dim, d), (d, n_head*hd) */
    sl_model_w up, gate, down;   /* (d_ff, d), (d_ff, d) llama, (d, d_ff) */
    float *attn_norm_w, *attn_norm_b; /* (d); bias gpt2 only, else NULL */
    float *mlp_norm_w, *mlp_norm_b;   /* (d) */
    float *bq, *bk, *bv, *bo;    /* gpt2 only: (n_head*hd), (kv_dim), (kv_dim), (d) */
    float *bup, *bdown;          /* gpt2 only: (d_ff), (d) */
} sl_model_layer;

typedef struct {
    sl_st_file *st;
    sl_arch arch;
    sl_model_config cfg;
    size_t head_dim, kv_dim;
    sl_model_w tok_emb;      /* (vocab, d) */
    sl_model_w pos_emb;      /* (max_seq_len, d), gpt2 */
    sl_model_w lm_head;      /* (vocab, d): tok_emb when tied */
    sl_model_layer *layers;  /* (n_layer) */
    float *final_norm_w, *final_norm_b; /* (d); bias gpt2 only */
    float *vectors;          /* one allocation holding every converted norm weight and bias */
    const char *tokenizer_json; /* metadata "tokenizer" or NULL; owned by st */
    size_t n_params;
    size_t bytes_by_dtype[3]; /* indexed by sl_dtype */
    int format;              /* sl_model_format (models/sl_import.h) of the file it came from */
    void *packed;            /* one allocation holding every matrix's pk, or NULL */
    void *gpu;               /* the weights on a device (models/sl_infer_gpu.h), or NULL: run on the CPU */
    const void *gpu_api;     /* the backend holding them (const sl_infer_gpu_api *) */
} sl_model;

/* Whether models opened from now on keep their matrices in the kernel's packed layout
 * (sl_kern_pack in models/sl_kern.h: groups of 32 rows, column-major by lane; rows a multiple of
 * 32 elements): 1 yes, 0 no (row-major, used in place from the mapping), -1 the default: yes,
 * in both builds of the matmul, unless the environment sets SL_PACK=0 (the AVX2 build read packed
 * weights in two sweeps of 16 rows, t(1) 1.06-1.28x row-major, until each 32-element slot's rows
 * were taken in turn while the slot sits in L1: see colpass in models/sl_kern_mm.h). The logits
 * are the same bits either way
 * (tests/test_engine.c); the packed copy replaces the mapping's pages in memory (they are released
 * as each matrix is packed), so the resident size stays about the weights'. Returns the setting
 * now in effect (0 or 1). Call it before opening, not concurrently with an open. */
int sl_model_set_packing(int on);

/* One matrix of a kernel call (sl_kern_matmul_multi): y (n, out) = x W^T + bias (+ y when add),
 * reading W's packed copy when the model has one. */
sl_kern_mm sl_model_mm(float *y, const sl_model_w *W, const float *bias, size_t out, int add);

/* Opens a model file of any format (models/sl_import.h: speclab, hf-gpt2, llama2c, gguf). */
int sl_model_open(const char *path, sl_model **out);
/* Builds the model from a native-layout file (taking it over: closed on failure too); path names
 * it in messages. */
int sl_model_from_st(sl_st_file *st, const char *path, sl_model **out);
void sl_model_close(sl_model *m);

/* The state of one sequence: KV cache for up to max_len tokens, and activation buffers for
 * SL_KERN_NMAX tokens (longer calls are processed in blocks of that many). */
typedef struct {
    const sl_model *m;
    size_t max_len;  /* tokens the cache holds */
    size_t len;      /* tokens in the cache now */
    int team;        /* 1: one OpenMP team per forward block; 0: a region per (large) kernel call.
                        Default: 1 when the matrices take >= 16 MiB, or >= 256 KiB unless
                        OMP_WAIT_POLICY is passive (sl_model.c's team_pays). Same results either
                        way. */
    float *k_cache;  /* (n_layer, n_kv_head, max_len, head_dim): each head's positions contiguous */
    float *v_cache;  /* (n_layer, n_kv_head, max_len, head_dim) */
    float *kn, *vn;  /* (B, kv_dim) the block's new keys and values, before they go to the cache */
    float *rope_cos, *rope_sin; /* (max_len, head_dim/2), llama */
    float *x;        /* (B, d) residual stream */
    float *xn;       /* (B, d) normalised */
    float *q;        /* (B, n_head*hd) */
    float *att;      /* (B, n_head*hd) attention output */
    float *proj;     /* (B, d) scratch for position embeddings */
    float *ff;       /* (2, B, d_ff) */
    float *scores;   /* (B, n_head, max_len) */
    float *logits;   /* (B, vocab) used by the sl_lm adapter */
    void *gpu;       /* the device context (KV cache on the device) when m->gpu, else NULL */
    sl_kern_team steal; /* the team's shares of the matmuls (team = 1), reset at each forward block */
} sl_model_ctx;

/* max_len in [1, cfg.max_seq_len]. */
int sl_model_ctx_alloc(const sl_model *m, size_t max_len, sl_model_ctx **out);
void sl_model_ctx_free(sl_model_ctx *c);

/* Appends tokens (n) to the sequence and writes logits (n, vocab): row j scores the token after
 * tokens[j]. Checks every id and the length before touching the cache (SL_EINPUT). */
int sl_model_forward(sl_model_ctx *c, const int32_t *tokens, size_t n, float *logits);
/* As sl_model_forward, but writes only the logits of the last n_rows tokens: logits (n_rows, vocab)
 * (1 <= n_rows <= n; 0 is allowed and writes nothing). A long prompt then costs no unembedding. */
int sl_model_forward_last(sl_model_ctx *c, const int32_t *tokens, size_t n, size_t n_rows, float *logits);
/* SL_EINPUT naming the first id outside [0, vocab_size). */
int sl_model_check_tokens(const sl_model *m, const int32_t *tokens, size_t n);
/* Keeps the first len tokens (len <= current length). */
int sl_model_truncate(sl_model_ctx *c, size_t len);

/* ---- devices (models/sl_infer_gpu.h; implemented in sl_infer_gpu_load.c) ----
 * A model runs on the CPU unless placed on a device: "cuda" (build/libsl_infer_cuda.so, loaded
 * beside the binary) or "cuda-emu" (the same kernels compiled for the CPU, for tests). A placed
 * model's contexts keep their KV cache on the device and sl_model_forward* run there; everything
 * above (the sl_lm adapter, the sampler, run, verify, eval) is unchanged. */
/* Places m (uploading its weights now); "cpu" leaves it where it is. SL_EINPUT when the backend
 * cannot be had. Not concurrently with other calls on m. */
int sl_model_set_device(sl_model *m, const char *device);
/* The device of models not placed explicitly, applied when their first context is allocated
 * (the CLI's --device): checks that the backend loads. Default "cpu". */
int sl_model_set_default_device(const char *device);
const char *sl_model_default_device(void);
const char *sl_model_device(const sl_model *m); /* "cpu", "cuda" or "cuda-emu" */
/* sl_model.c's hooks. */
void sl_model_gpu_release(sl_model *m);
int sl_model_gpu_ctx_create(sl_model_ctx *c); /* places c->m by the default device first if need be */
void sl_model_gpu_ctx_free(sl_model_ctx *c);
/* n <= SL_INFER_GPU_NMAX (= SL_KERN_NMAX) tokens at c->len; logits of the last n_rows. */
int sl_model_gpu_forward(sl_model_ctx *c, const int32_t *tokens, size_t n, size_t n_rows, float *logits);
/* The same call, and what a sampler needs of the rows computed on the device (sl_infer_gpu.h's
 * forward_dist): argmax (n_rows) at temperature 0, else p (n_rows, vocab) the softmax at the
 * temperature before filters. *fell_back = 1 when a row's logits were not all finite: then they
 * are in c->logits (n_rows, vocab) instead, for sl_dist_standardise_f32's rules. */
int sl_model_gpu_forward_dist(sl_model_ctx *c, const int32_t *tokens, size_t n, size_t n_rows, double temperature,
                              double *p, int32_t *argmax, int *fell_back);

/* Writes a model with random weights: matrices and embeddings N(0, init_std^2), norm weights
 * 1 + N(0, 0.1^2), biases N(0, init_std^2); tensor i draws from stream (seed, SL_STREAM_DATA, i).
 * tokenizer_json may be NULL. Atomic write. */
int sl_model_init_write(const char *path, sl_arch arch, const sl_model_config *cfg, uint64_t seed, sl_dtype dt,
                        double init_std, const char *tokenizer_json);

/* ---- the sampler's model interface ---- */

typedef struct {
    sl_model_ctx *ctx;   /* borrowed */
    sl_sampling sampling;
    sl_dist_work *dw;
    sl_dist_work *dw_rows[SL_KERN_NMAX]; /* one per row standardised in parallel (from the second) */
    int32_t argmax[SL_KERN_NMAX];        /* a block's argmaxes from a device (temperature 0) */
    int host_dist;       /* a device model's rows standardised on the host anyway (SL_INFER_DIST=host) */
    sl_lm lm;            /* lm.self points to this struct */
} sl_model_lm;

/* Wraps ctx: extend = forward + sl_dist_standardise_f32 under sampling; truncate = truncate. On a
 * device the softmax (or argmax) is computed there and only the filters run on the host, unless
 * the environment has SL_INFER_DIST=host when the adapter is made (for measuring the difference). */
int sl_model_lm_alloc(sl_model_ctx *ctx, const sl_sampling *sampling, sl_model_lm **out);
void sl_model_lm_free(sl_model_lm *l);

/* ---- `speclab model info` and `speclab model init` as library calls (models/sl_model_info.c) ---- */

/* Matrix groups that `model info` reports a dtype for. */
#define SL_MODEL_N_GROUPS 4
extern const char *const sl_model_group_names[SL_MODEL_N_GROUPS]; /* "embeddings", "attention", "mlp", "unembedding" */

/* The facts about one model file: a transformer (arch gpt2 or llama) or a non-transformer draft
 * (arch ngram or lookup, models/sl_ngram.h); each group of fields is set for its kind only. */
typedef struct {
    char *path;
    const char *arch;         /* "gpt2", "llama", "ngram" or "lookup" */
    int is_transformer;       /* 1: gpt2 or llama */
    size_t vocab_size;
    int has_tokenizer;        /* the file carries tokenizer metadata */
    char *training;           /* the `training` metadata (JSON), or NULL */
    /* transformers */
    sl_model_config cfg;      /* rope_theta only means something for llama */
    size_t n_params;
    size_t bytes_by_dtype[3]; /* indexed by sl_dtype: f32, f16, bf16 */
    size_t tokenizer_bytes;   /* length of the tokenizer JSON (0 when absent) */
    const char *tokenizer_kind; /* "byte-bpe", "sp-bpe"; NULL when absent */
    size_t tokenizer_vocab;   /* tokens the tokenizer knows (the model may pad beyond them) */
    int32_t bos_id, eos_id;   /* special ids, -1 when the tokenizer has none */
    const char *format;       /* the file's format (models/sl_import.h): speclab, hf-gpt2, llama2c, gguf */
    char *source_dtypes;      /* importers: the source's tensor types (JSON), NULL for native files */
    const char *group_dtype[SL_MODEL_N_GROUPS]; /* embeddings, attention, mlp, unembedding: "F16", "mixed", "-" */
    char sha256[65];          /* of the weights file (an HF folder's model.safetensors) */
    size_t n_meta;            /* other metadata, in file order: every key but format, */
    char **meta_keys;         /* (n_meta)  format_version, arch, config, training, tokenizer */
    char **meta_vals;         /* (n_meta) */
    /* n-gram and lookup drafts */
    int order;                /* 1 or 2 */
    const char *smoothing;    /* "addk", "absdisc" or "kn" */
    double add_k;
    double discount;          /* order 2; NaN otherwise */
    uint64_t n_tokens;        /* tokens counted */
    size_t distinct_bigrams;  /* 0 for order 1 */
    size_t lookup_n;          /* lookup drafts; 0 otherwise */
    double lookup_eps;        /* lookup drafts; NaN otherwise */
} sl_model_info;

/* Opens and validates path (through sl_model_open or sl_ngram_open) and gathers its facts. */
int sl_model_info_read(const char *path, sl_model_info *info);
void sl_model_info_free(sl_model_info *info);

typedef struct {
    sl_arch arch;
    const char *config_json;    /* FORMAT.md's config (sl_model_config_parse) */
    uint64_t seed;
    sl_dtype dtype;
    double init_std;            /* > 0 */
    const char *tokenizer_path; /* a tokenizer JSON file embedded as the tokenizer metadata; it must
                                   parse and fit the vocabulary (a model may pad it, not cut it). NULL: none */
    const char *out_path;
} sl_model_init_cfg;

/* Writes a random-weight model (sl_model_init_write) as cfg says. */
int sl_model_init_file(const sl_model_init_cfg *cfg);

/* `speclab model probs`: the next-token distribution after each prefix ids[0..j] (softmax of the
 * float32 logits, computed in double), for a model file of any format. */
typedef struct {
    size_t n, vocab_size;
    double *probs; /* (n, vocab_size): row j follows ids[0..j] */
} sl_model_probs;
int sl_model_next_probs(const char *path, const int32_t *ids, size_t n, sl_model_probs *out);
void sl_model_probs_free(sl_model_probs *p);

#endif
