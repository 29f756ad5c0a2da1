/*
 * sl_train_gpu.h: the trainer's GPU backend, `speclab train|distill --backend cuda`.
 *
 * The same model, losses and optimiser as sl_train.c (same parameter layout, same activations,
 * same update rule), written once in sl_train_gpu.c as kernels of one thread per output element
 * and cuBLAS matrix products. That one source is built two ways:
 *   - by nvcc into build/libsl_train_cuda.so (`make cuda`, where CUDA exists), loaded at run time
 *     with dlopen, so the speclab binary itself needs no CUDA;
 *   - by the C compiler into libspeclab ("cuda-emu"): each kernel becomes an OpenMP loop over its
 *     thread index and cuBLAS becomes OpenBLAS. This is how CI, which has no GPU, tests the
 *     kernels' arithmetic against sl_train.c (tests/test_train_gpu.c), and the run loop's use of
 *     the backend (tests/cli/train_backend.sh). It is slow and meant for nothing else.
 *
 * Determinism: no atomics anywhere; every sum has one fixed order (column sums in fixed row
 * chunks, embedding gradients per distinct token over its positions in order), and cuBLAS gives
 * the same bits run to run on one GPU model and library version. So a run on one GPU is a pure
 * function of its inputs, and a run resumed from a checkpoint equals one never stopped. Against
 * the CPU backend results differ in the last bits (other summation orders in the matrix products,
 * fused multiply-adds), as between two CPU models.
 *
 * The backend is a table of functions: this header is all that the run loop and the tests see.
 * Every int-returning entry returns 0 on success; on failure error() holds the message.
 */
#ifndef SL_TRAIN_GPU_H
#define SL_TRAIN_GPU_H

#include "sl_train_types.h"

#define SL_TRAIN_GPU_ABI 1

typedef struct sl_gpu_model sl_gpu_model;

typedef struct {
    int abi;          /* SL_TRAIN_GPU_ABI of the build */
    const char *name; /* "cuda" or "cuda-emu" */
    /* Selects the device (the first GPU) and writes its description (e.g. "NVIDIA H100 80GB HBM3,
     * CUDA 13.0, cuBLAS 130000") into info. */
    int (*init)(char *info, size_t n);
    /* A model for batches of up to (B, T); with_grads adds gradients, AdamW moments and the
     * activations' gradients. NULL on failure (out of device memory). */
    sl_gpu_model *(*create)(const sl_train_config *cfg, int B, int T, int with_grads);
    void (*destroy)(sl_gpu_model *g);
    /* Copies n_params floats each of parameters and (when non-NULL, and the model has them) the
     * AdamW moments in, or out. The layout is sl_train_model's params_mem / m / v. */
    int (*set_state)(sl_gpu_model *g, const float *params, const float *adam_m, const float *adam_v);
    int (*get_state)(sl_gpu_model *g, float *params, float *adam_m, float *adam_v);
    int (*get_grads)(sl_gpu_model *g, float *grads); /* n_params floats */
    int (*get_logits)(sl_gpu_model *g, float *logits, int B, int T); /* (B, T, V) of the last forward */
    /* As sl_train_forward / sl_train_loss / sl_train_backward; inputs and targets are host arrays
     * (B, T). loss returns NaN on a device error. teacher: a model whose last forward was on the
     * same inputs (KL and TV), else NULL. */
    int (*forward)(sl_gpu_model *g, const int *inputs, int B, int T);
    double (*loss)(sl_gpu_model *g, int objective, const int *targets, sl_gpu_model *teacher, int B, int T,
                   float grad_scale);
    int (*zero_grad)(sl_gpu_model *g);
    int (*backward)(sl_gpu_model *g, const int *inputs, int B, int T);
    double (*grad_norm)(sl_gpu_model *g); /* NaN on a device error */
    int (*scale_grads)(sl_gpu_model *g, float s);
    int (*adamw)(sl_gpu_model *g, const sl_train_hparams *h, double lr, uint64_t t);
    const char *(*error)(void);
} sl_train_gpu_api;

/* The C-compiled build of sl_train_gpu.c (always present in libspeclab). */
const sl_train_gpu_api *sl_train_gpu_emu_api(void);

/* Backend by name: "cuda-emu", or "cuda" (dlopen of $SL_CUDA_LIB, else libsl_train_cuda.so next
 * to the running executable). SL_EINPUT with a one-line reason when it cannot be had. */
int sl_train_gpu_open(const char *name, const sl_train_gpu_api **api, char *info, size_t n);

#endif
