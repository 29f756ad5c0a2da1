/*
 * sl_train_gpu.c: the trainer's GPU backend (sl_train_gpu.h). One source, two builds:
 *   nvcc -x cu (CUDA, __CUDACC__ defined): kernels on the GPU, matrix products through cuBLAS in
 *     float32 (CUBLAS_DEFAULT_MATH: no TF32), built as build/libsl_train_cuda.so by `make cuda`;
 *   cc (no __CUDACC__): every kernel an OpenMP loop over its thread index, products through
 *     OpenBLAS: "cuda-emu", the build CI tests.
 * Each kernel computes one output element per thread index with no shared memory and no
 * synchronisation between threads, which is what makes the loop form an exact emulation.
 * The operations mirror sl_train.c one for one (see there for the mathematics); where a sum runs
 * over many rows it is cut into fixed chunks of ROWS_PER_CHUNK rows whose partial sums are added
 * in order, so the result never depends on scheduling.
 */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sl_train_elem.h"
#include "sl_train_gpu.h"

#ifdef __CUDACC__
#include <cublas_v2.h>
#include <cuda_runtime.h>
#define SLG_DEV __device__
#define SLG_EXPORT extern "C" __attribute__((visibility("default")))
#else
#include <cblas.h>
#define SLG_DEV
#define SLG_EXPORT
#endif

#define SLG_UNPAREN(...) __VA_ARGS__

static char g_err[512];

static int fail(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(g_err, sizeof g_err, fmt, ap);
    va_end(ap);
    return -1;
}

static const char *last_error(void) { return g_err; }

/* ---- the portability layer: kernels, memory, matrix products ---- */

#ifdef __CUDACC__
static cublasHandle_t g_blas;

static int cuda_ok(cudaError_t e, const char *what)
{
    return e == cudaSuccess ? 0 : fail("CUDA error in %s: %s", what, cudaGetErrorString(e));
}

static int launch_check(const char *name) { return cuda_ok(cudaGetLastError(), name); }

/* SLG_KERNEL(name, (params), (args)) { body using i }: name(n, args) runs body for i in [0, n). */
#define SLG_KERNEL(name, PARAMS, ARGS)                                                                   \
    static __device__ void name##_at(size_t i, SLG_UNPAREN PARAMS);                                      \
    static __global__ void name##_g(size_t n, SLG_UNPAREN PARAMS)                                        \
    {                                                                                                    \
        size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;                                        \
        if (i < n) name##_at(i, SLG_UNPAREN ARGS);                                                       \
    }                                                                                                    \
    static int name(size_t n, SLG_UNPAREN PARAMS)                                                        \
    {                                                                                                    \
        if (n) name##_g<<<(unsigned)((n + 255) / 256), 256>>>(n, SLG_UNPAREN ARGS);                      \
        return launch_check(#name);                                                                      \
    }                                                                                                    \
    static __device__ void name##_at(size_t i, SLG_UNPAREN PARAMS)

static void *dev_alloc(size_t bytes)
{
    void *p = NULL;
    if (cudaMalloc(&p, bytes ? bytes : 1) != cudaSuccess) {
        fail("cudaMalloc of %zu bytes failed (out of device memory?)", bytes);
        return NULL;
    }
    cudaMemset(p, 0, bytes ? bytes : 1);
    return p;
}
static void dev_free(void *p)
{
    if (p) cudaFree(p);
}
static int to_dev(void *dst, const void *src, size_t bytes)
{
    return cuda_ok(cudaMemcpy(dst, src, bytes, cudaMemcpyHostToDevice), "copy to device");
}
static int to_host(void *dst, const void *src, size_t bytes)
{
    return cuda_ok(cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToHost), "copy to host");
}
static int dev_zero(void *p, size_t bytes) { return cuda_ok(cudaMemset(p, 0, bytes), "memset"); }

static int blas_ok(cublasStatus_t s, const char *what)
{
    return s == CUBLAS_STATUS_SUCCESS ? 0 : fail("cuBLAS error %d in %s", (int)s, what);
}

/* Row-major C (M, N) = alpha op(A) op(B) + beta C, count times with strides sA, sB, sC. cuBLAS is
 * column-major: the row-major product is the column-major C^T = op(B)^T op(A)^T. */
static int gemm_batched(int ta, int tb, int M, int N, int K, float alpha, const float *A, int lda, long long sA,
                        const float *B, int ldb, long long sB, float beta, float *C, int ldc, long long sC, int count)
{
    cublasOperation_t oa = ta ? CUBLAS_OP_T : CUBLAS_OP_N, ob = tb ? CUBLAS_OP_T : CUBLAS_OP_N;
    if (count == 1)
        return blas_ok(cublasSgemm(g_blas, ob, oa, N, M, K, &alpha, B, ldb, A, lda, &beta, C, ldc), "sgemm");
    return blas_ok(cublasSgemmStridedBatched(g_blas, ob, oa, N, M, K, &alpha, B, ldb, sB, A, lda, sA, &beta, C, ldc,
                                             sC, count),
                   "sgemm (strided batched)");
}

static int backend_init(char *info, size_t n)
{
    int count = 0;
    if (cuda_ok(cudaGetDeviceCount(&count), "cudaGetDeviceCount")) return -1;
    if (count < 1) return fail("no CUDA device");
    if (cuda_ok(cudaSetDevice(0), "cudaSetDevice")) return -1;
    if (!g_blas) {
        if (blas_ok(cublasCreate(&g_blas), "cublasCreate")) return -1;
        if (blas_ok(cublasSetMathMode(g_blas, CUBLAS_DEFAULT_MATH), "cublasSetMathMode")) return -1;
    }
    cudaDeviceProp p;
    if (cuda_ok(cudaGetDeviceProperties(&p, 0), "cudaGetDeviceProperties")) return -1;
    int rt = 0, bv = 0;
    cudaRuntimeGetVersion(&rt);
    cublasGetVersion(g_blas, &bv);
    snprintf(info, n, "%s, CUDA runtime %d.%d, cuBLAS %d, float32 (no TF32)", p.name, rt / 1000, (rt % 1000) / 10, bv);
    return 0;
}
#define BACKEND_NAME "cuda"
#define API_FN sl_train_gpu_cuda_api

#else /* the C build: the emulation */

#define SLG_KERNEL(name, PARAMS, ARGS)                                                                   \
    static void name##_at(size_t i, SLG_UNPAREN PARAMS);                                                 \
    static int name(size_t n, SLG_UNPAREN PARAMS)                                                        \
    {                                                                                                    \
        _Pragma("omp parallel for schedule(static)") for (size_t i = 0; i < n; i++)                      \
            name##_at(i, SLG_UNPAREN ARGS);                                                              \
        return 0;                                                                                        \
    }                                                                                                    \
    static void name##_at(size_t i, SLG_UNPAREN PARAMS)

static void *dev_alloc(size_t bytes)
{
    void *p = calloc(1, bytes ? bytes : 1);
    if (!p) fail("out of memory (%zu bytes)", bytes);
    return p;
}
static void dev_free(void *p) { free(p); }
static int to_dev(void *dst, const void *src, size_t bytes)
{
    memcpy(dst, src, bytes);
    return 0;
}
static int to_host(void *dst, const void *src, size_t bytes)
{
    memcpy(dst, src, bytes);
    return 0;
}
static int dev_zero(void *p, size_t bytes)
{
    memset(p, 0, bytes);
    return 0;
}

static int gemm_batched(int ta, int tb, int M, int N, int K, float alpha, const float *A, int lda, long long sA,
                        const float *B, int ldb, long long sB, float beta, float *C, int ldc, long long sC, int count)
{
    for (int k = 0; k < count; k++)
        cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, M, N, K, alpha,
                    A + k * sA, lda, B + k * sB, ldb, beta, C + k * sC, ldc);
    return 0;
}

static int backend_init(char *info, size_t n)
{
    snprintf(info, n, "cuda-emu: the CUDA backend's kernels as OpenMP loops on the CPU (for tests)");
    return 0;
}
#define BACKEND_NAME "cuda-emu"
#ifdef SLG_EMU_AS_LIBRARY
/* Test hook: the emulation built as a shared library under the CUDA build's entry point, so that
 * the dlopen path of `--backend cuda` runs end to end without a GPU (tests/cli/train_backend.sh). */
#undef SLG_EXPORT
#define SLG_EXPORT __attribute__((visibility("default")))
#define API_FN sl_train_gpu_cuda_api
#else
#define API_FN sl_train_gpu_emu_api
#endif
#endif

static int gemm(int ta, int tb, int M, int N, int K, float alpha, const float *A, int lda, const float *B, int ldb,
                float beta, float *C, int ldc)
{
    return gemm_batched(ta, tb, M, N, K, alpha, A, lda, 0, B, ldb, 0, beta, C, ldc, 0, 1);
}

/* ---- kernels (one output element per index i) ---- */

#define ROWS_PER_CHUNK 64

SLG_KERNEL(k_encoder_fwd, (float *out, const int *inp, const float *wte, const float *wpe, int T, int C),
           (out, inp, wte, wpe, T, C))
{
    size_t p = i / (size_t)C;
    int c = (int)(i % (size_t)C), t = (int)(p % (size_t)T);
    out[i] = wte[(size_t)inp[p] * C + c] + wpe[(size_t)t * C + c];
}

/* dwte row tok[u], column c: the positions holding token tok[u] (pos[start[u] .. start[u+1]),
 * ascending), added one at a time as sl_train.c does. */
SLG_KERNEL(k_encoder_bwd_wte, (float *dwte, const float *dout, const int *tok, const int *start, const int *pos, int C),
           (dwte, dout, tok, start, pos, C))
{
    size_t u = i / (size_t)C;
    int c = (int)(i % (size_t)C);
    float *w = dwte + (size_t)tok[u] * C + c;
    float acc = *w;
    for (int k = start[u]; k < start[u + 1]; k++) acc += dout[(size_t)pos[k] * C + c];
    *w = acc;
}

SLG_KERNEL(k_encoder_bwd_wpe, (float *dwpe, const float *dout, int B, int T, int C), (dwpe, dout, B, T, C))
{
    size_t t = i / (size_t)C;
    int c = (int)(i % (size_t)C);
    float acc = dwpe[i];
    for (int b = 0; b < B; b++) acc += dout[((size_t)b * T + t) * C + c];
    dwpe[i] = acc;
}

/* LayerNorm, row-parallel: rows of C cut into chunks of LCHUNK (defined with the losses below),
 * per-chunk double sums (one thread per (row, chunk)) combined per row in chunk order, then the
 * elementwise part. sl_train.c forms the same sums in one pass per row: the statistics differ only
 * in the order of their double additions. Scratch: pa, pb (N * P doubles), rd (N doubles), rf
 * (2N floats). */
#define LN_CHUNK 64

/* Chunk sums: pass 0 of x; pass 1 of (x - mu)^2 with mu = rd[row]. */
SLG_KERNEL(k_ln_part, (double *pa, const float *x, const double *rd, int pass, int C, int P), (pa, x, rd, pass, C, P))
{
    size_t r = i / (size_t)P;
    int c0 = (int)(i % (size_t)P) * LN_CHUNK, c1 = c0 + LN_CHUNK < C ? c0 + LN_CHUNK : C;
    const float *xr = x + r * C;
    double s = 0;
    if (pass == 0)
        for (int k = c0; k < c1; k++) s += xr[k];
    else
        for (int k = c0; k < c1; k++) s += (xr[k] - rd[r]) * (xr[k] - rd[r]);
    pa[i] = s;
}

/* Row sums: pass 0 gives mu = sum / C into rd; pass 1 the statistics sl_train.c keeps. */
SLG_KERNEL(k_ln_row, (float *mean, float *rstd, double *rd, const double *pa, int pass, int C, int P, float eps),
           (mean, rstd, rd, pa, pass, C, P, eps))
{
    double s = 0;
    for (int c = 0; c < P; c++) s += pa[i * P + c];
    if (pass == 0) {
        rd[i] = s / C;
    } else {
        rstd[i] = (float)(1.0 / sqrt(s / C + eps));
        mean[i] = (float)rd[i];
    }
}

SLG_KERNEL(k_ln_apply,
           (float *out, const float *inp, const float *w, const float *bias, const float *mean, const float *rstd, int C),
           (out, inp, w, bias, mean, rstd, C))
{
    size_t r = i / (size_t)C;
    int k = (int)(i % (size_t)C);
    out[i] = (inp[i] - mean[r]) * rstd[r] * w[k] + bias[k];
}

/* Backward chunk sums of dnorm = w d and of dnorm * norm, norm = (x - mean) rstd. */
SLG_KERNEL(k_lnb_part,
           (double *pa, double *pb, const float *dout, const float *inp, const float *w, const float *mean,
            const float *rstd, int C, int P),
           (pa, pb, dout, inp, w, mean, rstd, C, P))
{
    size_t r = i / (size_t)P, o = r * C;
    int c0 = (int)(i % (size_t)P) * LN_CHUNK, c1 = c0 + LN_CHUNK < C ? c0 + LN_CHUNK : C;
    double a = 0, b = 0;
    for (int k = c0; k < c1; k++) {
        float norm = (inp[o + k] - mean[r]) * rstd[r];
        float dnorm = w[k] * dout[o + k];
        a += dnorm;
        b += dnorm * norm;
    }
    pa[i] = a;
    pb[i] = b;
}

/* Row means of those sums into rf[2i], rf[2i + 1]. */
SLG_KERNEL(k_lnb_row, (float *rf, const double *pa, const double *pb, int C, int P), (rf, pa, pb, C, P))
{
    double a = 0, b = 0;
    for (int c = 0; c < P; c++) {
        a += pa[i * P + c];
        b += pb[i * P + c];
    }
    rf[2 * i] = (float)(a / C);
    rf[2 * i + 1] = (float)(b / C);
}

SLG_KERNEL(k_lnb_apply,
           (float *dinp, const float *dout, const float *inp, const float *w, const float *mean, const float *rstd,
            const float *rf, int C),
           (dinp, dout, inp, w, mean, rstd, rf, C))
{
    size_t r = i / (size_t)C;
    int k = (int)(i % (size_t)C);
    float norm = (inp[i] - mean[r]) * rstd[r];
    dinp[i] += (w[k] * dout[i] - rf[2 * r] - norm * rf[2 * r + 1]) * rstd[r];
}

/* Column sums of (N, cols) in chunks of ROWS_PER_CHUNK rows: part[chunk * cols + c]. With x != NULL
 * the summand is the LayerNorm gain's gradient (x - mean) * rstd * d, else d. */
SLG_KERNEL(k_colsum_part,
           (float *part, const float *d, const float *x, const float *mean, const float *rstd, int N, int cols),
           (part, d, x, mean, rstd, N, cols))
{
    size_t chunk = i / (size_t)cols;
    int c = (int)(i % (size_t)cols);
    size_t r0 = chunk * ROWS_PER_CHUNK, r1 = r0 + ROWS_PER_CHUNK < (size_t)N ? r0 + ROWS_PER_CHUNK : (size_t)N;
    float s = 0;
    if (x)
        for (size_t r = r0; r < r1; r++) s += (x[r * cols + c] - mean[r]) * rstd[r] * d[r * cols + c];
    else
        for (size_t r = r0; r < r1; r++) s += d[r * cols + c];
    part[i] = s;
}

SLG_KERNEL(k_colsum_add, (float *out, const float *part, int nchunks, int cols), (out, part, nchunks, cols))
{
    float s = 0;
    for (int k = 0; k < nchunks; k++) s += part[(size_t)k * cols + i];
    out[i] += s;
}

SLG_KERNEL(k_bias_fill, (float *out, const float *bias, int OC), (out, bias, OC)) { out[i] = bias[i % (size_t)OC]; }

/* Row i of the (B*NH*T, T) scores: causal softmax in place, zero above the diagonal. */
SLG_KERNEL(k_softmax_causal, (float *att, int T), (att, T)) { sl_softmax_causal_row(att + i * T, (int)(i % (size_t)T), T); }

SLG_KERNEL(k_softmax_causal_bwd, (float *dS, const float *S, int T), (dS, S, T))
{
    sl_softmax_causal_row_bwd(dS + i * T, S + i * T, (int)(i % (size_t)T), T);
}

SLG_KERNEL(k_gelu_fwd, (float *out, const float *inp), (out, inp)) { out[i] = sl_gelu(inp[i]); }

SLG_KERNEL(k_gelu_bwd, (float *dinp, const float *inp, const float *dout), (dinp, inp, dout))
{
    dinp[i] += sl_gelu_grad(inp[i]) * dout[i];
}

SLG_KERNEL(k_add, (float *out, const float *a, const float *b), (out, a, b)) { out[i] = a[i] + b[i]; }

SLG_KERNEL(k_add2, (float *da, float *db, const float *dout), (da, db, dout))
{
    da[i] += dout[i];
    db[i] += dout[i];
}

/* The losses, row-parallel: a row of V logits is cut into chunks of LCHUNK; per-chunk partial
 * results (one thread per (row, chunk)) are combined per row in chunk order (one thread per row),
 * and the softmax and gradients are elementwise (one thread per logit). sl_train.c does each row in
 * one pass: the maximum is the same float, the exponentials the same expf; only the double sum of
 * exponentials is formed in another order (here sum_c exp(m_c - M) sum_{k in c} exp(z_k - m_c)). */
#define LCHUNK 64

/* Chunk i = (row, c): its maximum and the double sum of expf(z - that maximum). */
SLG_KERNEL(k_lse_part, (float *pm, double *ps, const float *z, int V, int P), (pm, ps, z, V, P))
{
    size_t r = i / (size_t)P;
    int c0 = (int)(i % (size_t)P) * LCHUNK, c1 = c0 + LCHUNK < V ? c0 + LCHUNK : V;
    const float *zr = z + r * V;
    float m = zr[c0];
    for (int k = c0 + 1; k < c1; k++)
        if (zr[k] > m) m = zr[k];
    double sum = 0;
    for (int k = c0; k < c1; k++) sum += expf(zr[k] - m);
    pm[i] = m;
    ps[i] = sum;
}

/* Row i: its maximum M (float), the sum S of exp(z - M) and lse = log S + M. */
SLG_KERNEL(k_lse_row, (float *M, double *S, double *lse, const float *pm, const double *ps, int P),
           (M, S, lse, pm, ps, P))
{
    const float *m = pm + i * P;
    const double *s = ps + i * P;
    float mx = m[0];
    for (int c = 1; c < P; c++)
        if (m[c] > mx) mx = m[c];
    double sum = 0;
    for (int c = 0; c < P; c++) sum += s[c] * exp((double)m[c] - (double)mx);
    M[i] = mx;
    S[i] = sum;
    lse[i] = log(sum) + mx;
}

SLG_KERNEL(k_softmax, (float *q, const float *z, const float *M, const double *S, int V), (q, z, M, S, V))
{
    size_t r = i / (size_t)V;
    q[i] = expf(z[i] - M[r]) * (float)(1.0 / S[r]);
}

/* Chunk sums of the distillation objectives: KL: a = sum p (log p - log q) over p > 0;
 * TV: a = sum min(q, p) (q where q < p, else p), b = sum of q where q < p. */
SLG_KERNEL(k_obj_part,
           (double *pa, double *pb, const float *q, const float *p, const float *z, const float *tz, const double *lse,
            const double *tlse, int objective, int V, int P),
           (pa, pb, q, p, z, tz, lse, tlse, objective, V, P))
{
    size_t r = i / (size_t)P, o = r * V;
    int c0 = (int)(i % (size_t)P) * LCHUNK, c1 = c0 + LCHUNK < V ? c0 + LCHUNK : V;
    double a = 0, b = 0;
    if (objective == SL_OBJ_KL) {
        for (int k = c0; k < c1; k++)
            if (p[o + k] > 0) a += p[o + k] * ((tz[o + k] - tlse[r]) - (z[o + k] - lse[r]));
    } else {
        for (int k = c0; k < c1; k++) {
            if (q[o + k] < p[o + k]) {
                a += q[o + k];
                b += q[o + k];
            } else {
                a += p[o + k];
            }
        }
    }
    pa[i] = a;
    pb[i] = b;
}

/* Row i's loss (and, for TV, qs = q(S) for the gradient). */
SLG_KERNEL(k_obj_row,
           (float *losses, double *qs, const double *pa, const double *pb, const float *z, const double *lse,
            const int *targets, int objective, int V, int P),
           (losses, qs, pa, pb, z, lse, targets, objective, V, P))
{
    if (objective == SL_OBJ_CE) {
        losses[i] = (float)(lse[i] - z[i * V + targets[i]]);
        return;
    }
    double a = 0, b = 0;
    for (int c = 0; c < P; c++) {
        a += pa[i * P + c];
        b += pb[i * P + c];
    }
    losses[i] = (float)(objective == SL_OBJ_KL ? a : 1.0 - a);
    qs[i] = b;
}

/* d(grad_scale * mean loss) / d logits, elementwise (gs = grad_scale / N). */
SLG_KERNEL(k_obj_grad,
           (float *g, const float *q, const float *p, const double *qs, const int *targets, int objective, int V, float gs),
           (g, q, p, qs, targets, objective, V, gs))
{
    size_t r = i / (size_t)V;
    int k = (int)(i % (size_t)V);
    if (objective == SL_OBJ_CE) g[i] = q[i] * gs - (k == targets[r] ? gs : 0.0f);
    else if (objective == SL_OBJ_KL) g[i] = (q[i] - p[i]) * gs;
    else g[i] = q[i] * ((float)qs[r] - (q[i] < p[i] ? 1.0f : 0.0f)) * gs;
}

#define NORM_CHUNK 4096
SLG_KERNEL(k_sumsq_part, (double *part, const float *x, size_t len), (part, x, len))
{
    size_t a = i * NORM_CHUNK, b = a + NORM_CHUNK < len ? a + NORM_CHUNK : len;
    double s = 0;
    for (size_t k = a; k < b; k++) s += (double)x[k] * x[k];
    part[i] = s;
}

SLG_KERNEL(k_scale, (float *x, float s), (x, s)) { x[i] *= s; }

SLG_KERNEL(k_adamw,
           (float *w, const float *g, float *mm, float *vv, float b1, float b2, float eps, float c1, float c2, float lr,
            float wd),
           (w, g, mm, vv, b1, b2, eps, c1, c2, lr, wd))
{
    sl_adamw_elem(&w[i], g[i], &mm[i], &vv[i], b1, b2, eps, c1, c2, lr, wd);
}

/* ---- the model ---- */

/* Activations: the layout of sl_train_acts (sl_train.h), same order. */
enum {
    A_ENC, A_LN1, A_LN1M, A_LN1R, A_QKV, A_ATTY, A_ATT, A_ATTPROJ, A_RES2, A_LN2, A_LN2M, A_LN2R, A_FCH, A_FCHG,
    A_FCPROJ, A_RES3, A_LNF, A_LNFM, A_LNFR, A_LOGITS, A_LOSSES, A_N
};

struct sl_gpu_model {
    sl_train_config cfg;
    int B, T, with_grads;
    size_t psize[SL_TP_N], poff[SL_TP_N], n_params; /* floats per tensor, offsets in params_mem order */
    size_t asize[A_N];
    float *params, *grads, *m, *v;
    float *acts[A_N], *dacts[A_N];
    float *q, *p;        /* (B*T, V) softmaxes of the model and of a teacher */
    float *pm, *M;       /* (B*T, P) chunk maxima, (B*T) row maxima */
    double *ps, *S, *lse, *pa, *pb, *qs; /* chunk sums (B*T, P) and row results (B*T) */
    float *part;         /* column-sum partials */
    double *norm_part;   /* grad-norm partials */
    int *d_inputs, *d_targets, *d_tok, *d_start, *d_pos;
    int *h_count, *h_tok, *h_start, *h_pos; /* host side of the embedding-gradient index */
    float *h_losses;
    double *h_norm;
    int curB, curT; /* the shape of the last forward */
};

static void act_sizes(const sl_train_config *c, int B, int T, size_t *s)
{
    size_t BT = (size_t)B * T, C = (size_t)c->d_model, L = (size_t)c->n_layer, F = (size_t)c->d_ff;
    size_t NH = (size_t)c->n_head, V = (size_t)c->vocab_size;
    s[A_ENC] = BT * C;
    s[A_LN1] = L * BT * C;
    s[A_LN1M] = s[A_LN1R] = L * BT;
    s[A_QKV] = L * BT * 3 * C;
    s[A_ATTY] = L * BT * C;
    s[A_ATT] = L * B * NH * T * T;
    s[A_ATTPROJ] = s[A_RES2] = s[A_LN2] = L * BT * C;
    s[A_LN2M] = s[A_LN2R] = L * BT;
    s[A_FCH] = s[A_FCHG] = L * BT * F;
    s[A_FCPROJ] = s[A_RES3] = L * BT * C;
    s[A_LNF] = BT * C;
    s[A_LNFM] = s[A_LNFR] = BT;
    s[A_LOGITS] = BT * V;
    s[A_LOSSES] = BT;
}

static size_t n_chunks(size_t N) { return (N + ROWS_PER_CHUNK - 1) / ROWS_PER_CHUNK; }

static void destroy(sl_gpu_model *g)
{
    if (!g) return;
    dev_free(g->params);
    dev_free(g->grads);
    dev_free(g->m);
    dev_free(g->v);
    for (int k = 0; k < A_N; k++) {
        dev_free(g->acts[k]);
        dev_free(g->dacts[k]);
    }
    dev_free(g->q);
    dev_free(g->p);
    dev_free(g->pm);
    dev_free(g->M);
    dev_free(g->ps);
    dev_free(g->S);
    dev_free(g->lse);
    dev_free(g->pa);
    dev_free(g->pb);
    dev_free(g->qs);
    dev_free(g->part);
    dev_free(g->norm_part);
    dev_free(g->d_inputs);
    dev_free(g->d_targets);
    dev_free(g->d_tok);
    dev_free(g->d_start);
    dev_free(g->d_pos);
    free(g->h_count);
    free(g->h_tok);
    free(g->h_start);
    free(g->h_pos);
    free(g->h_losses);
    free(g->h_norm);
    free(g);
}

static sl_gpu_model *create(const sl_train_config *cfg, int B, int T, int with_grads)
{
    if (B < 1 || T < 1 || T > cfg->max_seq_len || cfg->d_model % cfg->n_head) {
        fail("bad model shape for the GPU backend");
        return NULL;
    }
    sl_gpu_model *g = (sl_gpu_model *)calloc(1, sizeof *g);
    if (!g) return NULL;
    g->cfg = *cfg;
    g->B = B;
    g->T = T;
    g->with_grads = with_grads;
    sl_train_param_sizes(cfg, g->psize);
    for (int k = 0; k < SL_TP_N; k++) {
        g->poff[k] = g->n_params;
        g->n_params += g->psize[k];
    }
    act_sizes(cfg, B, T, g->asize);
    size_t BT = (size_t)B * T, V = (size_t)cfg->vocab_size, C = (size_t)cfg->d_model, F = (size_t)cfg->d_ff;
    size_t cols = 3 * C > F ? 3 * C : F, nb = (g->n_params + NORM_CHUNK - 1) / NORM_CHUNK;
    int ok = (g->params = (float *)dev_alloc(g->n_params * sizeof(float))) != NULL;
    for (int k = 0; ok && k < A_N; k++) ok = (g->acts[k] = (float *)dev_alloc(g->asize[k] * sizeof(float))) != NULL;
    ok = ok && (g->q = (float *)dev_alloc(BT * V * sizeof(float)));
    ok = ok && (g->p = (float *)dev_alloc(BT * V * sizeof(float)));
    size_t NP = BT * (((V > C ? V : C) + LCHUNK - 1) / LCHUNK);
    ok = ok && (g->pm = (float *)dev_alloc(NP * sizeof(float))) && (g->M = (float *)dev_alloc(2 * BT * sizeof(float)));
    ok = ok && (g->ps = (double *)dev_alloc(NP * sizeof(double))) && (g->pa = (double *)dev_alloc(NP * sizeof(double))) &&
         (g->pb = (double *)dev_alloc(NP * sizeof(double)));
    ok = ok && (g->S = (double *)dev_alloc(2 * BT * sizeof(double))) && (g->lse = (double *)dev_alloc(2 * BT * sizeof(double))) &&
         (g->qs = (double *)dev_alloc(BT * sizeof(double)));
    ok = ok && (g->d_inputs = (int *)dev_alloc(BT * sizeof(int)));
    ok = ok && (g->d_targets = (int *)dev_alloc(BT * sizeof(int)));
    ok = ok && (g->h_losses = (float *)calloc(BT, sizeof(float)));
    if (ok && with_grads) {
        ok = (g->grads = (float *)dev_alloc(g->n_params * sizeof(float))) && (g->m = (float *)dev_alloc(g->n_params * sizeof(float))) &&
             (g->v = (float *)dev_alloc(g->n_params * sizeof(float)));
        /* Gradients of every activation but the LayerNorm statistics and the losses. */
        for (int k = 0; ok && k < A_N; k++) {
            if (k == A_LN1M || k == A_LN1R || k == A_LN2M || k == A_LN2R || k == A_LNFM || k == A_LNFR || k == A_LOSSES) continue;
            ok = (g->dacts[k] = (float *)dev_alloc(g->asize[k] * sizeof(float))) != NULL;
        }
        ok = ok && (g->part = (float *)dev_alloc(n_chunks(BT) * cols * sizeof(float)));
        ok = ok && (g->norm_part = (double *)dev_alloc(nb * sizeof(double)));
        ok = ok && (g->d_tok = (int *)dev_alloc(BT * sizeof(int))) && (g->d_start = (int *)dev_alloc((BT + 1) * sizeof(int))) &&
             (g->d_pos = (int *)dev_alloc(BT * sizeof(int)));
        ok = ok && (g->h_count = (int *)calloc(V + 1, sizeof(int))) && (g->h_tok = (int *)calloc(BT, sizeof(int))) &&
             (g->h_start = (int *)calloc(BT + 1, sizeof(int))) && (g->h_pos = (int *)calloc(BT, sizeof(int))) &&
             (g->h_norm = (double *)calloc(nb, sizeof(double)));
    }
    if (!ok) {
        if (!g_err[0]) fail("out of memory");
        destroy(g);
        return NULL;
    }
    return g;
}

static int set_state(sl_gpu_model *g, const float *params, const float *mm, const float *vv)
{
    size_t b = g->n_params * sizeof(float);
    if (to_dev(g->params, params, b)) return -1;
    if (mm && g->m && to_dev(g->m, mm, b)) return -1;
    if (vv && g->v && to_dev(g->v, vv, b)) return -1;
    return 0;
}

static int get_state(sl_gpu_model *g, float *params, float *mm, float *vv)
{
    size_t b = g->n_params * sizeof(float);
    if (params && to_host(params, g->params, b)) return -1;
    if (mm && g->m && to_host(mm, g->m, b)) return -1;
    if (vv && g->v && to_host(vv, g->v, b)) return -1;
    return 0;
}

static int get_grads(sl_gpu_model *g, float *grads)
{
    if (!g->grads) return fail("model has no gradients");
    return to_host(grads, g->grads, g->n_params * sizeof(float));
}

static int get_logits(sl_gpu_model *g, float *logits, int B, int T)
{
    return to_host(logits, g->acts[A_LOGITS], (size_t)B * T * g->cfg.vocab_size * sizeof(float));
}

static float *param(sl_gpu_model *g, float *base, int t) { return g->psize[t] ? base + g->poff[t] : NULL; }

static int check_shape(sl_gpu_model *g, int B, int T)
{
    if (B < 1 || T < 1 || B > g->B || T > g->T) return fail("batch %d x %d exceeds the model's %d x %d", B, T, g->B, g->T);
    return 0;
}

/* out (N, OC) = inp (N, IC) W^T + bias */
static int matmul_forward(float *out, const float *inp, const float *W, const float *bias, int N, int IC, int OC)
{
    if (bias && k_bias_fill((size_t)N * OC, out, bias, OC)) return -1;
    return gemm(0, 1, N, OC, IC, 1.0f, inp, IC, W, IC, bias ? 1.0f : 0.0f, out, OC);
}

static int colsum(sl_gpu_model *g, float *out, const float *d, const float *x, const float *mean, const float *rstd,
                  int N, int cols)
{
    size_t nc = n_chunks((size_t)N);
    if (k_colsum_part(nc * cols, g->part, d, x, mean, rstd, N, cols)) return -1;
    return k_colsum_add((size_t)cols, out, g->part, (int)nc, cols);
}

static int matmul_backward(sl_gpu_model *g, float *dinp, float *dW, float *dbias, const float *dout, const float *inp,
                           const float *W, int N, int IC, int OC)
{
    if (gemm(0, 0, N, IC, OC, 1.0f, dout, OC, W, IC, 1.0f, dinp, IC)) return -1;
    if (gemm(1, 0, OC, IC, N, 1.0f, dout, OC, inp, IC, 1.0f, dW, IC)) return -1;
    return dbias ? colsum(g, dbias, dout, NULL, NULL, NULL, N, OC) : 0;
}

static int layernorm_forward(sl_gpu_model *g, float *out, float *mean, float *rstd, const float *inp, const float *w,
                             const float *bias, int N, int C, float eps)
{
    int P = (C + LN_CHUNK - 1) / LN_CHUNK;
    size_t NP = (size_t)N * P;
    if (k_ln_part(NP, g->pa, inp, g->S, 0, C, P) || k_ln_row((size_t)N, mean, rstd, g->S, g->pa, 0, C, P, eps) ||
        k_ln_part(NP, g->pa, inp, g->S, 1, C, P) || k_ln_row((size_t)N, mean, rstd, g->S, g->pa, 1, C, P, eps))
        return -1;
    return k_ln_apply((size_t)N * C, out, inp, w, bias, mean, rstd, C);
}

static int layernorm_backward(sl_gpu_model *g, float *dinp, float *dw, float *db, const float *dout, const float *inp,
                              const float *w, const float *mean, const float *rstd, int N, int C)
{
    int P = (C + LN_CHUNK - 1) / LN_CHUNK;
    if (k_lnb_part((size_t)N * P, g->pa, g->pb, dout, inp, w, mean, rstd, C, P) ||
        k_lnb_row((size_t)N, g->M, g->pa, g->pb, C, P) || k_lnb_apply((size_t)N * C, dinp, dout, inp, w, mean, rstd, g->M, C))
        return -1;
    if (colsum(g, dw, dout, inp, mean, rstd, N, C)) return -1;
    return colsum(g, db, dout, NULL, NULL, NULL, N, C);
}

static int attention_forward(float *out, float *att, const float *inp, int B, int T, int C, int NH)
{
    int C3 = 3 * C, hs = C / NH;
    float scale = 1.0f / sqrtf((float)hs);
    for (int b = 0; b < B; b++) {
        const float *q = inp + (size_t)b * T * C3, *k = q + C;
        float *S = att + (size_t)b * NH * T * T;
        if (gemm_batched(0, 1, T, T, hs, scale, q, C3, hs, k, C3, hs, 0.0f, S, T, (long long)T * T, NH)) return -1;
    }
    if (k_softmax_causal((size_t)B * NH * T, att, T)) return -1;
    for (int b = 0; b < B; b++) {
        const float *v = inp + (size_t)b * T * C3 + 2 * C;
        const float *S = att + (size_t)b * NH * T * T;
        if (gemm_batched(0, 0, T, hs, T, 1.0f, S, T, (long long)T * T, v, C3, hs, 0.0f, out + (size_t)b * T * C, C, hs,
                         NH))
            return -1;
    }
    return 0;
}

static int attention_backward(float *dinp, float *datt, const float *dout, const float *inp, const float *att, int B,
                              int T, int C, int NH)
{
    int C3 = 3 * C, hs = C / NH;
    float scale = 1.0f / sqrtf((float)hs);
    long long TT = (long long)T * T;
    for (int b = 0; b < B; b++) {
        size_t o = (size_t)b * T * C3;
        const float *v = inp + o + 2 * C, *d = dout + (size_t)b * T * C, *S = att + (size_t)b * NH * TT;
        float *dv = dinp + o + 2 * C, *dS = datt + (size_t)b * NH * TT;
        if (gemm_batched(0, 1, T, T, hs, 1.0f, d, C, hs, v, C3, hs, 0.0f, dS, T, TT, NH)) return -1;
        if (gemm_batched(1, 0, T, hs, T, 1.0f, S, T, TT, d, C, hs, 1.0f, dv, C3, hs, NH)) return -1;
    }
    if (k_softmax_causal_bwd((size_t)B * NH * T, datt, att, T)) return -1;
    for (int b = 0; b < B; b++) {
        size_t o = (size_t)b * T * C3;
        const float *q = inp + o, *k = q + C, *dS = datt + (size_t)b * NH * TT;
        float *dq = dinp + o, *dk = dq + C;
        if (gemm_batched(0, 0, T, hs, T, scale, dS, T, TT, k, C3, hs, 1.0f, dq, C3, hs, NH)) return -1;
        if (gemm_batched(1, 0, T, hs, T, scale, dS, T, TT, q, C3, hs, 1.0f, dk, C3, hs, NH)) return -1;
    }
    return 0;
}

static const float *unembed(sl_gpu_model *g)
{
    return param(g, g->params, g->cfg.tied_embeddings ? SL_TP_WTE : SL_TP_LMHEAD);
}

#define TRY(x)                                                                                                   \
    do {                                                                                                         \
        if (x) return -1;                                                                                        \
    } while (0)

static int forward(sl_gpu_model *g, const int *inputs, int B, int T)
{
    TRY(check_shape(g, B, T));
    const sl_train_config *c = &g->cfg;
    int C = c->d_model, L = c->n_layer, NH = c->n_head, F = c->d_ff, V = c->vocab_size;
    size_t BT = (size_t)B * T, BTC = BT * C;
    float **a = g->acts, *P = g->params;
    TRY(to_dev(g->d_inputs, inputs, BT * sizeof(int)));
    g->curB = B;
    g->curT = T;
    TRY(k_encoder_fwd(BTC, a[A_ENC], g->d_inputs, param(g, P, SL_TP_WTE), param(g, P, SL_TP_WPE), T, C));
    for (int l = 0; l < L; l++) {
        const float *res = l == 0 ? a[A_ENC] : a[A_RES3] + (l - 1) * BTC;
        float *ln1 = a[A_LN1] + l * BTC, *qkv = a[A_QKV] + l * BTC * 3, *atty = a[A_ATTY] + l * BTC;
        float *att = a[A_ATT] + (size_t)l * B * NH * T * T, *attproj = a[A_ATTPROJ] + l * BTC;
        float *res2 = a[A_RES2] + l * BTC, *ln2 = a[A_LN2] + l * BTC;
        float *fch = a[A_FCH] + l * BT * F, *fchg = a[A_FCHG] + l * BT * F;
        float *fcproj = a[A_FCPROJ] + l * BTC, *res3 = a[A_RES3] + l * BTC;
        TRY(layernorm_forward(g, ln1, a[A_LN1M] + l * BT, a[A_LN1R] + l * BT, res, param(g, P, SL_TP_LN1W) + l * C,
                            param(g, P, SL_TP_LN1B) + l * C, (int)BT, C, c->norm_eps));
        TRY(matmul_forward(qkv, ln1, param(g, P, SL_TP_QKVW) + (size_t)l * 3 * C * C, param(g, P, SL_TP_QKVB) + l * 3 * C,
                           (int)BT, C, 3 * C));
        TRY(attention_forward(atty, att, qkv, B, T, C, NH));
        TRY(matmul_forward(attproj, atty, param(g, P, SL_TP_ATTPROJW) + (size_t)l * C * C,
                           param(g, P, SL_TP_ATTPROJB) + l * C, (int)BT, C, C));
        TRY(k_add(BTC, res2, res, attproj));
        TRY(layernorm_forward(g, ln2, a[A_LN2M] + l * BT, a[A_LN2R] + l * BT, res2, param(g, P, SL_TP_LN2W) + l * C,
                            param(g, P, SL_TP_LN2B) + l * C, (int)BT, C, c->norm_eps));
        TRY(matmul_forward(fch, ln2, param(g, P, SL_TP_FCW) + (size_t)l * F * C, param(g, P, SL_TP_FCB) + (size_t)l * F,
                           (int)BT, C, F));
        TRY(k_gelu_fwd(BT * F, fchg, fch));
        TRY(matmul_forward(fcproj, fchg, param(g, P, SL_TP_FCPROJW) + (size_t)l * C * F,
                           param(g, P, SL_TP_FCPROJB) + l * C, (int)BT, F, C));
        TRY(k_add(BTC, res3, res2, fcproj));
    }
    TRY(layernorm_forward(g, a[A_LNF], a[A_LNFM], a[A_LNFR], a[A_RES3] + (L - 1) * BTC, param(g, P, SL_TP_LNFW),
                        param(g, P, SL_TP_LNFB), (int)BT, C, c->norm_eps));
    return matmul_forward(a[A_LOGITS], a[A_LNF], unembed(g), NULL, (int)BT, C, V);
}

static double loss(sl_gpu_model *g, int objective, const int *targets, sl_gpu_model *teacher, int B, int T,
                   float grad_scale)
{
    size_t N = (size_t)B * T;
    int V = g->cfg.vocab_size;
    if (check_shape(g, B, T)) return NAN;
    if (objective != SL_OBJ_CE && (!teacher || teacher->cfg.vocab_size != V || teacher->curB != B || teacher->curT != T)) {
        fail("objective %d needs a teacher forward of the same batch", objective);
        return NAN;
    }
    if (objective == SL_OBJ_CE && to_dev(g->d_targets, targets, N * sizeof(int))) return NAN;
    float *dl = g->with_grads ? g->dacts[A_LOGITS] : NULL;
    int P = (V + LCHUNK - 1) / LCHUNK;
    size_t NP = N * P;
    /* Row statistics of the model's logits, then (distillation) of the teacher's into the second
     * halves of M, S and lse; the softmaxes into q and p. */
    const float *z = g->acts[A_LOGITS], *tz = teacher ? teacher->acts[A_LOGITS] : NULL;
    if (k_lse_part(NP, g->pm, g->ps, z, V, P) || k_lse_row(N, g->M, g->S, g->lse, g->pm, g->ps, P)) return NAN;
    if (tz && (k_lse_part(NP, g->pm, g->ps, tz, V, P) || k_lse_row(N, g->M + N, g->S + N, g->lse + N, g->pm, g->ps, P) ||
               k_softmax(N * V, g->p, tz, g->M + N, g->S + N, V)))
        return NAN;
    if ((objective != SL_OBJ_CE || dl) && k_softmax(N * V, g->q, z, g->M, g->S, V)) return NAN;
    if (objective != SL_OBJ_CE &&
        k_obj_part(NP, g->pa, g->pb, g->q, g->p, z, tz, g->lse, g->lse + N, objective, V, P))
        return NAN;
    if (k_obj_row(N, g->acts[A_LOSSES], g->qs, g->pa, g->pb, z, g->lse, g->d_targets, objective, V, P)) return NAN;
    if (dl && k_obj_grad(N * V, dl, g->q, g->p, g->qs, g->d_targets, objective, V, grad_scale / (float)N)) return NAN;
    if (to_host(g->h_losses, g->acts[A_LOSSES], N * sizeof(float))) return NAN;
    double s = 0;
    for (size_t n = 0; n < N; n++) s += g->h_losses[n];
    return s / (double)N;
}

static int zero_grad(sl_gpu_model *g) { return g->grads ? dev_zero(g->grads, g->n_params * sizeof(float)) : 0; }

/* The embedding-gradient index of inputs: distinct tokens, and for each its positions ascending
 * (a stable counting sort), uploaded; returns the number of distinct tokens. */
static int token_index(sl_gpu_model *g, const int *inputs, size_t N, int *n_distinct)
{
    int V = g->cfg.vocab_size;
    memset(g->h_count, 0, (V + 1) * sizeof(int));
    for (size_t n = 0; n < N; n++) g->h_count[inputs[n] + 1]++;
    int U = 0;
    for (int v = 0; v < V; v++) {
        if (g->h_count[v + 1]) {
            g->h_tok[U] = v;
            g->h_start[U] = g->h_count[v];
            U++;
        }
        g->h_count[v + 1] += g->h_count[v];
    }
    g->h_start[U] = (int)N;
    for (size_t n = 0; n < N; n++) g->h_pos[g->h_count[inputs[n]]++] = (int)n;
    TRY(to_dev(g->d_tok, g->h_tok, U * sizeof(int)));
    TRY(to_dev(g->d_start, g->h_start, (U + 1) * sizeof(int)));
    TRY(to_dev(g->d_pos, g->h_pos, N * sizeof(int)));
    *n_distinct = U;
    return 0;
}

static int backward(sl_gpu_model *g, const int *inputs, int B, int T)
{
    if (!g->with_grads) return fail("backward on a model without gradients");
    TRY(check_shape(g, B, T));
    const sl_train_config *c = &g->cfg;
    int C = c->d_model, L = c->n_layer, NH = c->n_head, F = c->d_ff, V = c->vocab_size;
    size_t BT = (size_t)B * T, BTC = BT * C;
    float **a = g->acts, **d = g->dacts, *P = g->params, *G = g->grads;
    for (int k = 0; k < A_N; k++)
        if (d[k] && k != A_LOGITS && k != A_ATT) TRY(dev_zero(d[k], g->asize[k] * sizeof(float)));
    float *dunembed = param(g, G, c->tied_embeddings ? SL_TP_WTE : SL_TP_LMHEAD);
    TRY(matmul_backward(g, d[A_LNF], dunembed, NULL, d[A_LOGITS], a[A_LNF], unembed(g), (int)BT, C, V));
    TRY(layernorm_backward(g, d[A_RES3] + (L - 1) * BTC, param(g, G, SL_TP_LNFW), param(g, G, SL_TP_LNFB), d[A_LNF],
                           a[A_RES3] + (L - 1) * BTC, param(g, P, SL_TP_LNFW), a[A_LNFM], a[A_LNFR], (int)BT, C));
    for (int l = L - 1; l >= 0; l--) {
        const float *res = l == 0 ? a[A_ENC] : a[A_RES3] + (l - 1) * BTC;
        float *dres = l == 0 ? d[A_ENC] : d[A_RES3] + (l - 1) * BTC;
        size_t o1 = l * BTC, oF = l * BT * F, oA = (size_t)l * B * NH * T * T;
        TRY(k_add2(BTC, d[A_RES2] + o1, d[A_FCPROJ] + o1, d[A_RES3] + o1));
        TRY(matmul_backward(g, d[A_FCHG] + oF, param(g, G, SL_TP_FCPROJW) + (size_t)l * C * F,
                            param(g, G, SL_TP_FCPROJB) + l * C, d[A_FCPROJ] + o1, a[A_FCHG] + oF,
                            param(g, P, SL_TP_FCPROJW) + (size_t)l * C * F, (int)BT, F, C));
        TRY(k_gelu_bwd(BT * F, d[A_FCH] + oF, a[A_FCH] + oF, d[A_FCHG] + oF));
        TRY(matmul_backward(g, d[A_LN2] + o1, param(g, G, SL_TP_FCW) + (size_t)l * F * C, param(g, G, SL_TP_FCB) + (size_t)l * F,
                            d[A_FCH] + oF, a[A_LN2] + o1, param(g, P, SL_TP_FCW) + (size_t)l * F * C, (int)BT, C, F));
        TRY(layernorm_backward(g, d[A_RES2] + o1, param(g, G, SL_TP_LN2W) + l * C, param(g, G, SL_TP_LN2B) + l * C,
                               d[A_LN2] + o1, a[A_RES2] + o1, param(g, P, SL_TP_LN2W) + l * C, a[A_LN2M] + l * BT,
                               a[A_LN2R] + l * BT, (int)BT, C));
        TRY(k_add2(BTC, dres, d[A_ATTPROJ] + o1, d[A_RES2] + o1));
        TRY(matmul_backward(g, d[A_ATTY] + o1, param(g, G, SL_TP_ATTPROJW) + (size_t)l * C * C,
                            param(g, G, SL_TP_ATTPROJB) + l * C, d[A_ATTPROJ] + o1, a[A_ATTY] + o1,
                            param(g, P, SL_TP_ATTPROJW) + (size_t)l * C * C, (int)BT, C, C));
        TRY(attention_backward(d[A_QKV] + 3 * o1, d[A_ATT] + oA, d[A_ATTY] + o1, a[A_QKV] + 3 * o1, a[A_ATT] + oA, B, T,
                               C, NH));
        TRY(matmul_backward(g, d[A_LN1] + o1, param(g, G, SL_TP_QKVW) + (size_t)l * 3 * C * C,
                            param(g, G, SL_TP_QKVB) + l * 3 * C, d[A_QKV] + 3 * o1, a[A_LN1] + o1,
                            param(g, P, SL_TP_QKVW) + (size_t)l * 3 * C * C, (int)BT, C, 3 * C));
        TRY(layernorm_backward(g, dres, param(g, G, SL_TP_LN1W) + l * C, param(g, G, SL_TP_LN1B) + l * C, d[A_LN1] + o1,
                               res, param(g, P, SL_TP_LN1W) + l * C, a[A_LN1M] + l * BT, a[A_LN1R] + l * BT, (int)BT, C));
    }
    int U;
    TRY(token_index(g, inputs, BT, &U));
    TRY(k_encoder_bwd_wte((size_t)U * C, param(g, G, SL_TP_WTE), d[A_ENC], g->d_tok, g->d_start, g->d_pos, C));
    return k_encoder_bwd_wpe((size_t)T * C, param(g, G, SL_TP_WPE), d[A_ENC], B, T, C);
}

static double grad_norm(sl_gpu_model *g)
{
    size_t nb = (g->n_params + NORM_CHUNK - 1) / NORM_CHUNK;
    if (!g->grads) return NAN;
    if (k_sumsq_part(nb, g->norm_part, g->grads, g->n_params) || to_host(g->h_norm, g->norm_part, nb * sizeof(double)))
        return NAN;
    double s = 0;
    for (size_t k = 0; k < nb; k++) s += g->h_norm[k];
    return sqrt(s);
}

static int scale_grads(sl_gpu_model *g, float s) { return g->grads ? k_scale(g->n_params, g->grads, s) : -1; }

static int adamw(sl_gpu_model *g, const sl_train_hparams *h, double lr, uint64_t t)
{
    if (!g->grads) return fail("adamw on a model without gradients");
    float b1 = (float)h->beta1, b2 = (float)h->beta2, eps = (float)h->eps;
    float c1 = (float)(1.0 - pow(h->beta1, (double)t)), c2 = (float)(1.0 - pow(h->beta2, (double)t));
    for (int k = 0; k < SL_TP_N; k++) {
        size_t n = g->psize[k], o = g->poff[k];
        float wd = sl_train_tensor_decays(k) ? (float)h->weight_decay : 0.0f;
        if (n && k_adamw(n, g->params + o, g->grads + o, g->m + o, g->v + o, b1, b2, eps, c1, c2, (float)lr, wd))
            return -1;
    }
    return 0;
}

static const sl_train_gpu_api g_api = {
    SL_TRAIN_GPU_ABI, BACKEND_NAME, backend_init, create, destroy, set_state, get_state, get_grads, get_logits, forward,
    loss, zero_grad, backward, grad_norm, scale_grads, adamw, last_error,
};

SLG_EXPORT const sl_train_gpu_api *API_FN(void) { return &g_api; }
