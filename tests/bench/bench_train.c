/*
 * bench_train.c: training throughput of the GPT-2 trainer (tokens per second) for the budget of the
 * shipped family, side by side with the machine's sgemm rate measured in the same run, so the
 * printed ratio (model FLOP rate / sgemm FLOP rate) says how much of the matmul speed a whole step
 * keeps. Usage: bench_train [n_layer d_model d_ff n_head seq batch vocab steps]
 * (default 6 256 1024 8 128 16 4096 5).
 */
#include <cblas.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>

#include "sl_common.h"
#include "sl_train.h"

static double step_flops(const sl_train_config *c, int B, int T)
{
    /* 2 FLOPs per multiply-add; the backward pass costs twice the forward. */
    double BT = (double)B * T, C = c->d_model, F = c->d_ff, L = c->n_layer, V = c->vocab_size;
    double mm = BT * L * (3 * C * C + C * C + 2 * C * F) + BT * C * V;
    double att = (double)B * L * 2.0 * T * T * C; /* QK^T and SV over full T x T (what runs) */
    return 3 * 2 * (mm + att);
}

int main(int argc, char **argv)
{
    int a[8] = {6, 256, 1024, 8, 128, 16, 4096, 5};
    for (int i = 1; i < argc && i <= 8; i++) a[i - 1] = atoi(argv[i]);
    sl_train_config cfg = {.n_layer = a[0], .d_model = a[1], .d_ff = a[2], .n_head = a[3], .max_seq_len = a[4],
                           .vocab_size = a[6], .norm_eps = 1e-5f, .tied_embeddings = 1};
    int T = a[4], B = a[5], steps = a[7];
    sl_train_model *m = sl_train_model_alloc(&cfg, B, T, 1);
    if (!m) {
        fprintf(stderr, "bench_train: %s\n", sl_errmsg());
        return 1;
    }
    sl_train_init(m, 1);
    sl_train_hparams h;
    sl_train_hparams_default(&h);
    int *inp = malloc(sizeof(int) * B * T), *tgt = malloc(sizeof(int) * B * T);
    for (int i = 0; i < B * T; i++) inp[i] = (i * 7919) % cfg.vocab_size, tgt[i] = (i * 104729 + 1) % cfg.vocab_size;
    double t_fwd = 0, t_bwd = 0, t_opt = 0;
    for (int s = -1; s < steps; s++) { /* step -1 warms up (page faults, OpenBLAS buffers) */
        double t0 = sl_now_s();
        sl_train_zero_grad(m);
        sl_train_forward(m, inp, B, T);
        sl_train_loss(m, SL_OBJ_CE, tgt, NULL, B, T, 1.0f);
        double t1 = sl_now_s();
        sl_train_backward(m, inp, B, T);
        double t2 = sl_now_s();
        sl_train_scale_grads(m, (float)(1.0 / (1.0 + sl_train_grad_norm(m))));
        sl_train_adamw(m, &h, 1e-4, (uint64_t)s + 2);
        double t3 = sl_now_s();
        if (s >= 0) t_fwd += t1 - t0, t_bwd += t2 - t1, t_opt += t3 - t2;
    }
    double total = t_fwd + t_bwd + t_opt;
    double tps = (double)B * T * steps / total;
    double gflops = step_flops(&cfg, B, T) * steps / total / 1e9;

    /* The reference: one large sgemm (the shape of the MLP up-projection), all cores. */
    int M = B * T, N = cfg.d_ff, K = cfg.d_model, reps = 10;
    float *X = calloc((size_t)M * K, 4), *W = calloc((size_t)N * K, 4), *Y = calloc((size_t)M * N, 4);
    for (size_t i = 0; i < (size_t)M * K; i++) X[i] = (float)(i % 13) * 0.01f;
    for (size_t i = 0; i < (size_t)N * K; i++) W[i] = (float)(i % 7) * 0.01f;
    openblas_set_num_threads(omp_get_max_threads());
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, M, N, K, 1, X, K, W, K, 0, Y, N);
    double s0 = sl_now_s();
    for (int r = 0; r < reps; r++) cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, M, N, K, 1, X, K, W, K, 0, Y, N);
    double sgemm_gflops = 2.0 * M * N * K * reps / (sl_now_s() - s0) / 1e9;

    printf("model: n_layer=%d d_model=%d d_ff=%d n_head=%d vocab=%d, %zu parameters; batch %d x seq %d; %d threads\n",
           cfg.n_layer, cfg.d_model, cfg.d_ff, cfg.n_head, cfg.vocab_size, m->n_params, B, T, omp_get_max_threads());
    printf("step: %.1f ms (forward+loss %.1f, backward %.1f, clip+AdamW %.1f)\n", 1e3 * total / steps,
           1e3 * t_fwd / steps, 1e3 * t_bwd / steps, 1e3 * t_opt / steps);
    printf("training throughput: %.0f tokens/s, %.1f GFLOP/s\n", tps, gflops);
    printf("sgemm %dx%dx%d: %.1f GFLOP/s; ratio model/sgemm = %.2f\n", M, N, K, sgemm_gflops, gflops / sgemm_gflops);
    free(X), free(W), free(Y), free(inp), free(tgt);
    sl_train_model_free(m);
    return 0;
}
