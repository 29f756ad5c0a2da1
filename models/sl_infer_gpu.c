/*
 * sl_infer_gpu.c: the inference engine's GPU backend (sl_infer_gpu.h). One source, two builds:
 *   nvcc -x cu (__CUDACC__ defined): kernels on the GPU, one CUDA graph per (tokens, rows) shape,
 *     built as build/libsl_infer_cuda.so (models/infer_gpu.mk), compiled with --fmad=false so that
 *     only the explicit fmaf calls fuse, as in the C build;
 *   cc (no __CUDACC__): "cuda-emu", every kernel a loop on the CPU, the build CI tests.
 * Two kinds of kernel: element kernels (one output element per thread index, no communication:
 * the loop form is an exact emulation), and warp kernels (32 lanes per item that combine partial
 * sums with shuffles: the C build runs the lanes as a loop and the shuffles as the same pairwise
 * tree, so both builds add in the same order). The formulas follow sl_model.c one for one.
 */
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sl_infer_gpu.h"

#ifdef __CUDACC__
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#define SLG_DEV static __device__ __forceinline__
#define SLG_EXPORT extern "C" __attribute__((visibility("default")))
#define SLG_UNROLL _Pragma("unroll")
typedef struct {
    cudaStream_t s;
    int pdl; /* programmatic dependent launch on */
} slg_stream;
#else
#include "sl_half.h"
#define SLG_DEV static inline
#define SLG_EXPORT
#define SLG_UNROLL
typedef void *slg_stream;
#endif

#define SLG_UNPAREN(...) __VA_ARGS__
#define NMAX SL_INFER_GPU_NMAX
#define MV_T 8      /* tokens per pass over a weight row */
#define MV_SEGS 3   /* matrices in one product launch (q, k, v) */
#define WARP 32

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

/* ---- numbers shared by both builds ---- */

SLG_DEV float f16_to_f32(uint16_t h)
{
#ifdef __CUDACC__
    return __half2float(__ushort_as_half(h));
#else
    return sl_half_f16_to_f32(h);
#endif
}

SLG_DEV float bf16_to_f32(uint16_t h)
{
#ifdef __CUDACC__
    return __uint_as_float((uint32_t)h << 16);
#else
    return sl_half_bf16_to_f32(h);
#endif
}

SLG_DEV float load_w(const void *W, int dt, size_t i)
{
    if (dt == 0) return ((const float *)W)[i];
    const uint16_t h = ((const uint16_t *)W)[i];
    return dt == 1 ? f16_to_f32(h) : bf16_to_f32(h);
}

SLG_DEV float sigmoid(float x) { return 1.0f / (1.0f + expf(-x)); }

/* GELU, tanh form, as sl_kern_gelu writes it: x * sigmoid(2 c (x + 0.044715 x^3)). */
SLG_DEV float gelu(float x)
{
    const float x3 = (x * x) * x;
    return x * sigmoid((2.0f * 0.7978845608028654f) * fmaf(0.044715f, x3, x));
}

/* ---- the portability layer: memory, streams, kernels ---- */

#ifdef __CUDACC__

static int cuda_ok(cudaError_t e, const char *what)
{
    return e == cudaSuccess ? 0 : fail("CUDA error in %s: %s", what, cudaGetErrorString(e));
}

/* Programmatic dependent launch (Hopper): each kernel lets the next one start launching at once
 * (PDL_START) and waits for the previous one's completion and memory (PDL_WAIT) before touching
 * data, so the launch gap between the step's ~60 small kernels overlaps the work. The order of
 * every computation is unchanged. SL_INFER_PDL=0 turns it off (plain stream order). */
#define PDL_START() asm volatile("griddepcontrol.launch_dependents;" ::: "memory")
#define PDL_WAIT() asm volatile("griddepcontrol.wait;" ::: "memory")

template <typename... P, typename... A>
static int launch(const char *name, void (*k)(P...), size_t blocks, int threads, slg_stream st, A... args)
{
    cudaLaunchConfig_t cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.gridDim = dim3((unsigned)blocks);
    cfg.blockDim = dim3((unsigned)threads);
    cfg.stream = st.s;
    cudaLaunchAttribute at[1];
    at[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    at[0].val.programmaticStreamSerializationAllowed = 1;
    cfg.attrs = at;
    cfg.numAttrs = st.pdl ? 1 : 0;
    return cuda_ok(cudaLaunchKernelEx(&cfg, k, args...), name);
}

#define SLG_KERNEL(name, PARAMS, ARGS)                                                                   \
    static __device__ void name##_at(size_t i, SLG_UNPAREN PARAMS);                                      \
    static __global__ void name##_g(size_t n, SLG_UNPAREN PARAMS)                                        \
    {                                                                                                    \
        size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;                                        \
        PDL_START();                                                                                     \
        PDL_WAIT();                                                                                      \
        if (i < n) name##_at(i, SLG_UNPAREN ARGS);                                                       \
    }                                                                                                    \
    static int name(slg_stream st, size_t n, SLG_UNPAREN PARAMS)                                         \
    {                                                                                                    \
        return n ? launch(#name, name##_g, (n + 255) / 256, 256, st, n, SLG_UNPAREN ARGS) : 0;          \
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
static void *host_alloc(size_t bytes) /* pinned, for asynchronous copies */
{
    void *p = NULL;
    if (cudaMallocHost(&p, bytes ? bytes : 1) != cudaSuccess) {
        fail("cudaMallocHost of %zu bytes failed", bytes);
        return NULL;
    }
    return p;
}
static void host_free(void *p)
{
    if (p) cudaFreeHost(p);
}
static int to_dev(void *dst, const void *src, size_t bytes)
{
    return cuda_ok(cudaMemcpy(dst, src, bytes, cudaMemcpyHostToDevice), "copy to device");
}
static int to_dev_async(slg_stream st, void *dst, const void *src, size_t bytes)
{
    return cuda_ok(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, st.s), "copy to device");
}
static int to_host_async(slg_stream st, void *dst, const void *src, size_t bytes)
{
    return cuda_ok(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, st.s), "copy to host");
}
static int stream_sync(slg_stream st) { return cuda_ok(cudaStreamSynchronize(st.s), "stream synchronize"); }
/* Programmatic dependent launch needs Hopper or later; SL_INFER_PDL=0 turns it off. */
static int stream_create(slg_stream *st)
{
    int dev = 0, major = 0;
    cudaGetDevice(&dev);
    cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev);
    const char *e = getenv("SL_INFER_PDL");
    st->pdl = major >= 9 && !(e && !strcmp(e, "0"));
    return cuda_ok(cudaStreamCreateWithFlags(&st->s, cudaStreamNonBlocking), "stream");
}
static void stream_free(slg_stream st)
{
    if (st.s) cudaStreamDestroy(st.s);
}

SLG_DEV float warp_sum_f(float v)
{
    for (int off = WARP / 2; off; off >>= 1) v += __shfl_xor_sync(0xffffffffu, v, off);
    return v;
}
SLG_DEV double warp_sum_d(double v)
{
    for (int off = WARP / 2; off; off >>= 1) v += __shfl_xor_sync(0xffffffffu, v, off);
    return v;
}
SLG_DEV float warp_max_f(float v)
{
    for (int off = WARP / 2; off; off >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, off));
    return v;
}

static int backend_init(char *info, size_t n)
{
    int count = 0;
    if (cuda_ok(cudaGetDeviceCount(&count), "cudaGetDeviceCount")) return -1;
    if (count < 1) return fail("no CUDA device");
    if (cuda_ok(cudaSetDevice(0), "cudaSetDevice")) return -1;
    cudaDeviceProp p;
    if (cuda_ok(cudaGetDeviceProperties(&p, 0), "cudaGetDeviceProperties")) return -1;
    int rt = 0;
    cudaRuntimeGetVersion(&rt);
    const char *e = getenv("SL_INFER_PDL");
    snprintf(info, n, "%s, CUDA runtime %d.%d, float32 compute, CUDA graphs %s, programmatic dependent launch %s", p.name,
             rt / 1000, (rt % 1000) / 10, getenv("SL_INFER_GRAPHS") && !strcmp(getenv("SL_INFER_GRAPHS"), "0") ? "off" : "on",
             p.major >= 9 && !(e && !strcmp(e, "0")) ? "on" : "off");
    return 0;
}
#define BACKEND_NAME "cuda"
#define API_FN sl_infer_gpu_cuda_api

#else /* the C build: the emulation */

#define SLG_KERNEL(name, PARAMS, ARGS)                                                                   \
    static void name##_at(size_t i, SLG_UNPAREN PARAMS);                                                 \
    static int name(slg_stream st, size_t n, SLG_UNPAREN PARAMS)                                         \
    {                                                                                                    \
        (void)st;                                                                                        \
        _Pragma("omp parallel for schedule(static) if (n >= 4096)") for (size_t i = 0; i < n; i++)       \
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
static void *host_alloc(size_t bytes) { return dev_alloc(bytes); }
static void host_free(void *p) { free(p); }
static int to_dev(void *dst, const void *src, size_t bytes)
{
    memcpy(dst, src, bytes);
    return 0;
}
static int to_dev_async(slg_stream st, void *dst, const void *src, size_t bytes)
{
    (void)st;
    return to_dev(dst, src, bytes);
}
static int to_host_async(slg_stream st, void *dst, const void *src, size_t bytes)
{
    (void)st;
    memcpy(dst, src, bytes);
    return 0;
}
static int stream_sync(slg_stream st)
{
    (void)st;
    return 0;
}
static int stream_create(slg_stream *st)
{
    *st = NULL;
    return 0;
}
static void stream_free(slg_stream st) { (void)st; }

/* A warp's shuffle tree over its 32 lanes' values: after the step of offset o, lane l holds
 * v[l] + v[l ^ o]; every lane ends with the same bits, lane 0's are returned. */
static float tree_sum_f(float *v)
{
    for (int off = WARP / 2; off; off >>= 1) {
        float t[WARP];
        for (int l = 0; l < WARP; l++) t[l] = v[l] + v[l ^ off];
        memcpy(v, t, sizeof t);
    }
    return v[0];
}
static double tree_sum_d(double *v)
{
    for (int off = WARP / 2; off; off >>= 1) {
        double t[WARP];
        for (int l = 0; l < WARP; l++) t[l] = v[l] + v[l ^ off];
        memcpy(v, t, sizeof t);
    }
    return v[0];
}
static float tree_max_f(const float *v)
{
    float m = v[0];
    for (int l = 1; l < WARP; l++) m = fmaxf(m, v[l]);
    return m;
}

static int backend_init(char *info, size_t n)
{
    snprintf(info, n, "cuda-emu: the CUDA inference backend's kernels as loops on the CPU (for tests)");
    return 0;
}
#define BACKEND_NAME "cuda-emu"
#ifdef SLG_EMU_AS_LIBRARY
#undef SLG_EXPORT
#define SLG_EXPORT __attribute__((visibility("default")))
#define API_FN sl_infer_gpu_cuda_api
#else
#define API_FN sl_infer_gpu_emu_api
#endif
#endif

/* ---- element kernels ---- */

/* x (n, d) = tok_emb[token] (+ pos_emb[pos + t]); step = {pos, tokens...}. */
SLG_KERNEL(k_embed, (float *x, const void *te, int te_dt, const void *pe, int pe_dt, const int *step, int d),
           (x, te, te_dt, pe, pe_dt, step, d))
{
    const int t = (int)(i / (size_t)d), c = (int)(i % (size_t)d);
    float v = load_w(te, te_dt, (size_t)step[1 + t] * d + c);
    if (pe) v = v + load_w(pe, pe_dt, (size_t)(step[0] + t) * d + c);
    x[i] = v;
}

/* Rotates pair j of head h of token t: q rows (n, H, hd), then the new keys in the cache (at
 * rows pos..): units (n, H + KVH, hd/2). */
SLG_KERNEL(k_rope,
           (float *q, float *kc, const float *cs, const float *sn, const int *step, int H, int KVH, int hd, int kvd),
           (q, kc, cs, sn, step, H, KVH, hd, kvd))
{
    const int half = hd / 2, per_t = (H + KVH) * half;
    const int t = (int)(i / (size_t)per_t), r = (int)(i % (size_t)per_t), h = r / half, j = r % half;
    const int pos = step[0] + t;
    float *v = h < H ? q + (size_t)t * H * hd + (size_t)h * hd : kc + (size_t)pos * kvd + (size_t)(h - H) * hd;
    const float c = cs[(size_t)pos * half + j], s = sn[(size_t)pos * half + j];
    const float a = v[2 * j], b = v[2 * j + 1];
    v[2 * j] = a * c - b * s;
    v[2 * j + 1] = a * s + b * c;
}

/* up = silu(gate) * up, as sl_kern_silu_mul. */
SLG_KERNEL(k_silu_mul, (float *up, const float *gate), (up, gate))
{
    const float g = gate[i];
    up[i] = up[i] * (g * sigmoid(g));
}

/* ---- warp kernels ---- */

/* One launch of up to MV_SEGS products sharing the input x (n, K): output row r of the stacked
 * matrices belongs to the segment s with r < rows_end[s]. Each writes y[s] + t ldy[s] + row (or,
 * with at_pos, the cache row pos + t), by mode: 0 store, 1 add (a residual), 2 GELU then store. */
typedef struct {
    const void *w[MV_SEGS];
    const float *bias[MV_SEGS];
    float *y[MV_SEGS];
    int dt[MV_SEGS], ldy[MV_SEGS], rows_end[MV_SEGS], at_pos[MV_SEGS], mode[MV_SEGS];
    int nseg, K, ldx, n, vec;
    const float *x; /* (n, ldx) */
    const int *step;
} mv_args;

/* Lane's partial sums for tokens t0 .. t0 + MV_T - 1 (those < n) of row `row` of W: the 8-element
 * chunks lane, lane + 32, ... in order, each element by fused multiply-add. */
SLG_DEV void mv_lane(const mv_args *a, const void *W, int dt, size_t row, int lane, int t0, float *acc)
{
    SLG_UNROLL
    for (int k = 0; k < MV_T; k++) acc[k] = 0.0f;
    const int K = a->K, nch = (K + 7) / 8;
    for (int c = lane; c < nch; c += WARP) {
        const size_t base = row * (size_t)K + (size_t)c * 8;
#ifdef __CUDACC__
        if (a->vec) { /* K % 8 == 0 and 16-byte aligned rows: one or two vector loads per chunk */
            float w[8]; /* its own array: constant indices only, so it stays in registers */
            if (dt == 0) {
                const float4 u0 = *(const float4 *)((const float *)W + base), u1 = *(const float4 *)((const float *)W + base + 4);
                w[0] = u0.x, w[1] = u0.y, w[2] = u0.z, w[3] = u0.w, w[4] = u1.x, w[5] = u1.y, w[6] = u1.z, w[7] = u1.w;
            } else {
                const uint4 u = *(const uint4 *)((const uint16_t *)W + base);
                const uint32_t p[4] = {u.x, u.y, u.z, u.w};
                SLG_UNROLL
                for (int e = 0; e < 4; e++) {
                    w[2 * e] = dt == 1 ? f16_to_f32((uint16_t)(p[e] & 0xffffu)) : bf16_to_f32((uint16_t)(p[e] & 0xffffu));
                    w[2 * e + 1] = dt == 1 ? f16_to_f32((uint16_t)(p[e] >> 16)) : bf16_to_f32((uint16_t)(p[e] >> 16));
                }
            }
            SLG_UNROLL
            for (int t = 0; t < MV_T; t++) {
                if (t0 + t < a->n) {
                    const float *xt = a->x + (size_t)(t0 + t) * a->ldx + (size_t)c * 8;
                    const float4 x0 = *(const float4 *)xt, x1 = *(const float4 *)(xt + 4);
                    float s = acc[t];
                    s = fmaf(w[0], x0.x, s), s = fmaf(w[1], x0.y, s), s = fmaf(w[2], x0.z, s), s = fmaf(w[3], x0.w, s);
                    s = fmaf(w[4], x1.x, s), s = fmaf(w[5], x1.y, s), s = fmaf(w[6], x1.z, s), s = fmaf(w[7], x1.w, s);
                    acc[t] = s;
                }
            }
            continue;
        }
#endif
        float w[8];
        const int m = K - c * 8 < 8 ? K - c * 8 : 8;
        for (int e = 0; e < m; e++) w[e] = load_w(W, dt, base + e);
        SLG_UNROLL
        for (int t = 0; t < MV_T; t++) {
            if (t0 + t < a->n) {
                const float *xt = a->x + (size_t)(t0 + t) * a->ldx + (size_t)c * 8;
                float s = acc[t];
                for (int e = 0; e < m; e++) s = fmaf(w[e], xt[e], s);
                acc[t] = s;
            }
        }
    }
}

SLG_DEV int mv_seg(const mv_args *a, size_t r, size_t *row)
{
    int s = 0;
    while (s + 1 < a->nseg && r >= (size_t)a->rows_end[s]) s++;
    *row = r - (s ? (size_t)a->rows_end[s - 1] : 0);
    return s;
}

SLG_DEV void mv_store(const mv_args *a, int s, size_t row, int t, float dot)
{
    const float v = a->bias[s] ? dot + a->bias[s][row] : dot;
    float *y = a->y[s] + (size_t)(a->at_pos[s] ? a->step[0] + t : t) * a->ldy[s] + row;
    if (a->mode[s] == 1) *y = *y + v;
    else if (a->mode[s] == 2) *y = gelu(v);
    else *y = v;
}

/* LayerNorm (b != NULL) or RMSNorm of rows of d: y = norm(x) w (+ b); sums in double. */
typedef struct {
    const float *x, *w, *b;
    float *y;
    int d;
    double eps;
} norm_args;

SLG_DEV double norm_lane_sum(const norm_args *a, size_t r, int lane, double mean, int pass)
{
    const float *x = a->x + r * (size_t)a->d;
    double s = 0;
    for (int k = lane; k < a->d; k += WARP) {
        const double v = x[k];
        if (pass == 0) s += a->b ? v : v * v;
        else s += (v - mean) * (v - mean);
    }
    return s;
}

SLG_DEV void norm_lane_apply(const norm_args *a, size_t r, int lane, double mean, double inv)
{
    const float *x = a->x + r * (size_t)a->d;
    float *y = a->y + r * (size_t)a->d;
    for (int k = lane; k < a->d; k += WARP)
        y[k] = a->b ? (float)(((double)x[k] - mean) * inv) * a->w[k] + a->b[k] : (float)(x[k] * inv) * a->w[k];
}

/* Causal attention of token t, head h (item t H + h) against the cache rows 0 .. pos + t. */
typedef struct {
    const float *q; /* (n, H, hd) */
    const float *kc, *vc; /* this layer's (max_len, kvd) */
    float *out;     /* (n, H, hd) */
    float *sc;      /* (NMAX, H, max_len) scratch */
    int H, hd, kvd, group, max_len;
    float scale;
    const int *step;
} att_args;

/* dot(q, k) over hd in order k = 0, 1, ... by fused multiply-adds; the CUDA build loads four at a
 * time (hd % 4 == 0) so that a lane's loads are in flight together, the sum being the same. */
SLG_DEV float att_dot(const float *q, const float *k, int hd)
{
    float dot = 0.0f;
#ifdef __CUDACC__
    if (hd % 4 == 0) {
#pragma unroll 4
        for (int i = 0; i < hd; i += 4) {
            const float4 a = *(const float4 *)(q + i), b = *(const float4 *)(k + i);
            dot = fmaf(a.x, b.x, dot), dot = fmaf(a.y, b.y, dot), dot = fmaf(a.z, b.z, dot), dot = fmaf(a.w, b.w, dot);
        }
        return dot;
    }
#endif
    for (int i = 0; i < hd; i++) dot = fmaf(q[i], k[i], dot);
    return dot;
}

SLG_DEV float att_lane_scores(const att_args *a, int item, int lane)
{
    const int t = item / a->H, h = item % a->H, len = a->step[0] + t + 1;
    const float *qv = a->q + (size_t)item * a->hd;
    const float *K = a->kc + (size_t)(h / a->group) * a->hd;
    float *s = a->sc + (size_t)item * a->max_len;
    float mx = -INFINITY;
    for (int j = lane; j < len; j += WARP) {
        s[j] = att_dot(qv, K + (size_t)j * a->kvd, a->hd) * a->scale;
        mx = fmaxf(mx, s[j]);
    }
    return mx;
}

SLG_DEV float att_lane_exp(const att_args *a, int item, int lane, float mx)
{
    const int len = a->step[0] + item / a->H + 1;
    float *s = a->sc + (size_t)item * a->max_len;
    float sum = 0.0f;
    for (int j = lane; j < len; j += WARP) {
        s[j] = expf(s[j] - mx);
        sum += s[j];
    }
    return sum;
}

/* The output, 32 dims c0 .. c0 + 31 at a time: lane l sums p_j v_j over its positions j = l, l + 32,
 * ... (in order) into part[32], all of its loads independent; the lanes' vectors are then added
 * by the shuffle tree, lane i ending with dim c0 + i. */
SLG_DEV void att_lane_part(const att_args *a, int item, int lane, float inv, int c0, float *part)
{
    const int t = item / a->H, h = item % a->H, len = a->step[0] + t + 1;
    const float *V = a->vc + (size_t)(h / a->group) * a->hd + c0;
    const float *s = a->sc + (size_t)item * a->max_len;
    SLG_UNROLL
    for (int i = 0; i < WARP; i++) part[i] = 0.0f;
    for (int j = lane; j < len; j += WARP) {
        const float p = s[j] * inv;
        const float *vj = V + (size_t)j * a->kvd;
#ifdef __CUDACC__
        if (a->hd % 4 == 0 && c0 + WARP <= a->hd) {
            SLG_UNROLL
            for (int i = 0; i < WARP; i += 4) {
                const float4 v = *(const float4 *)(vj + i);
                part[i] = fmaf(p, v.x, part[i]), part[i + 1] = fmaf(p, v.y, part[i + 1]);
                part[i + 2] = fmaf(p, v.z, part[i + 2]), part[i + 3] = fmaf(p, v.w, part[i + 3]);
            }
            continue;
        }
#endif
        SLG_UNROLL
        for (int i = 0; i < WARP; i++)
            if (c0 + i < a->hd) part[i] = fmaf(p, vj[i], part[i]);
    }
}

#ifdef __CUDACC__

static __global__ void k_matvec_g(mv_args a, size_t rows)
{
    const size_t r = ((size_t)blockIdx.x * blockDim.x + threadIdx.x) / WARP;
    const int lane = threadIdx.x % WARP;
    PDL_START();
    PDL_WAIT();
    if (r >= rows) return;
    size_t row;
    const int s = mv_seg(&a, r, &row);
    for (int t0 = 0; t0 < a.n; t0 += MV_T) {
        float acc[MV_T];
        mv_lane(&a, a.w[s], a.dt[s], row, lane, t0, acc);
        SLG_UNROLL
        for (int k = 0; k < MV_T; k++) acc[k] = warp_sum_f(acc[k]);
        SLG_UNROLL
        for (int k = 0; k < MV_T; k++)
            if (lane == k && t0 + k < a.n) mv_store(&a, s, row, t0 + k, acc[k]);
    }
}
static int k_matvec(slg_stream st, const mv_args *a)
{
    const size_t rows = (size_t)a->rows_end[a->nseg - 1];
    return launch("k_matvec", k_matvec_g, (rows * WARP + 255) / 256, 256, st, *a, rows);
}

static __global__ void k_norm_g(norm_args a, size_t rows)
{
    const size_t r = ((size_t)blockIdx.x * blockDim.x + threadIdx.x) / WARP;
    const int lane = threadIdx.x % WARP;
    PDL_START();
    PDL_WAIT();
    if (r >= rows) return;
    double mean = 0, inv;
    if (a.b) {
        mean = warp_sum_d(norm_lane_sum(&a, r, lane, 0, 0)) / a.d;
        inv = 1.0 / sqrt(warp_sum_d(norm_lane_sum(&a, r, lane, mean, 1)) / a.d + a.eps);
    } else {
        inv = 1.0 / sqrt(warp_sum_d(norm_lane_sum(&a, r, lane, 0, 0)) / a.d + a.eps);
    }
    norm_lane_apply(&a, r, lane, mean, inv);
}
static int k_norm(slg_stream st, size_t rows, const norm_args *a)
{
    return launch("k_norm", k_norm_g, (rows * WARP + 127) / 128, 128, st, *a, rows);
}

static __global__ void k_attention_g(att_args a, int items)
{
    const int item = (int)(((size_t)blockIdx.x * blockDim.x + threadIdx.x) / WARP);
    const int lane = threadIdx.x % WARP;
    PDL_START();
    PDL_WAIT();
    if (item >= items) return;
    const float mx = warp_max_f(att_lane_scores(&a, item, lane));
    const float inv = 1.0f / warp_sum_f(att_lane_exp(&a, item, lane, mx));
    __syncwarp();
    for (int c0 = 0; c0 < a.hd; c0 += WARP) {
        float part[WARP];
        att_lane_part(&a, item, lane, inv, c0, part);
        /* Recursive halving: at offset o a lane keeps the half of its o * 2 values selected by
         * bit o of its index and adds the partner's copy of that half: the pairs of the shuffle
         * tree, so dim i (at lane i) gets the bits tree_sum_f gives it in the C build. */
        SLG_UNROLL
        for (int o = WARP / 2; o >= 1; o >>= 1) {
            const int upper = lane & o;
            SLG_UNROLL
            for (int i = 0; i < o; i++) {
                const float keep = upper ? part[i + o] : part[i], send = upper ? part[i] : part[i + o];
                part[i] = keep + __shfl_xor_sync(0xffffffffu, send, o);
            }
        }
        if (c0 + lane < a.hd) a.out[(size_t)item * a.hd + c0 + lane] = part[0];
    }
}
static int k_attention(slg_stream st, int items, const att_args *a)
{
    return launch("k_attention", k_attention_g, ((size_t)items * WARP + 127) / 128, 128, st, *a, items);
}

#else

static int k_matvec(slg_stream st, const mv_args *a)
{
    (void)st;
    const long rows = a->rows_end[a->nseg - 1];
#pragma omp parallel for schedule(static) if ((long)a->K * rows * a->n >= (1L << 20))
    for (long r = 0; r < rows; r++) {
        size_t row;
        const int s = mv_seg(a, (size_t)r, &row);
        for (int t0 = 0; t0 < a->n; t0 += MV_T) {
            float acc[WARP][MV_T], v[WARP];
            for (int lane = 0; lane < WARP; lane++) mv_lane(a, a->w[s], a->dt[s], row, lane, t0, acc[lane]);
            for (int k = 0; k < MV_T && t0 + k < a->n; k++) {
                for (int lane = 0; lane < WARP; lane++) v[lane] = acc[lane][k];
                mv_store(a, s, row, t0 + k, tree_sum_f(v));
            }
        }
    }
    return 0;
}

static int k_norm(slg_stream st, size_t rows, const norm_args *a)
{
    (void)st;
    for (size_t r = 0; r < rows; r++) {
        double v[WARP], mean = 0, inv;
        if (a->b) {
            for (int l = 0; l < WARP; l++) v[l] = norm_lane_sum(a, r, l, 0, 0);
            mean = tree_sum_d(v) / a->d;
            for (int l = 0; l < WARP; l++) v[l] = norm_lane_sum(a, r, l, mean, 1);
            inv = 1.0 / sqrt(tree_sum_d(v) / a->d + a->eps);
        } else {
            for (int l = 0; l < WARP; l++) v[l] = norm_lane_sum(a, r, l, 0, 0);
            inv = 1.0 / sqrt(tree_sum_d(v) / a->d + a->eps);
        }
        for (int l = 0; l < WARP; l++) norm_lane_apply(a, r, l, mean, inv);
    }
    return 0;
}

static int k_attention(slg_stream st, int items, const att_args *a)
{
    (void)st;
#pragma omp parallel for schedule(static) if (items >= 64)
    for (int item = 0; item < items; item++) {
        float v[WARP];
        for (int l = 0; l < WARP; l++) v[l] = att_lane_scores(a, item, l);
        const float mx = tree_max_f(v);
        for (int l = 0; l < WARP; l++) v[l] = att_lane_exp(a, item, l, mx);
        const float inv = 1.0f / tree_sum_f(v);
        for (int c0 = 0; c0 < a->hd; c0 += WARP) {
            float part[WARP][WARP];
            for (int l = 0; l < WARP; l++) att_lane_part(a, item, l, inv, c0, part[l]);
            for (int i = 0; i < WARP && c0 + i < a->hd; i++) {
                for (int l = 0; l < WARP; l++) v[l] = part[l][i];
                a->out[(size_t)item * a->hd + c0 + i] = tree_sum_f(v);
            }
        }
    }
    return 0;
}

#endif

/* ---- models and contexts ---- */

typedef struct {
    sl_igpu_mat q, k, v, o, up, gate, down;
    float *attn_norm_w, *attn_norm_b, *mlp_norm_w, *mlp_norm_b;
    float *bq, *bk, *bv, *bo, *bup, *bdown;
} dev_layer;

struct sl_igpu_model {
    sl_igpu_weights cfg; /* sizes; the host pointers are not kept */
    sl_igpu_mat tok_emb, pos_emb, lm_head;
    dev_layer *layers;
    float *final_norm_w, *final_norm_b;
    void **allocs; /* every device allocation, freed together */
    size_t n_allocs;
};

struct sl_igpu_ctx {
    sl_igpu_model *g;
    int max_len;
    slg_stream st;
    float *kc, *vc;     /* (n_layer, max_len, kvd) */
    float *x, *xn;      /* (NMAX, d) */
    float *q, *att;     /* (NMAX, n_head * hd) */
    float *ff;          /* (2, NMAX, d_ff) */
    float *sc;          /* (NMAX, n_head, max_len) */
    float *logits;      /* (NMAX, vocab) */
    float *rope_cos, *rope_sin; /* (max_len, hd / 2), llama */
    int *step;          /* device {pos, tokens (NMAX)} */
    int *h_step;        /* pinned host copy */
    float *h_logits;    /* pinned (NMAX, vocab) */
#ifdef __CUDACC__
    cudaGraphExec_t graph[NMAX + 1][NMAX + 1]; /* [n][n_rows] */
    unsigned char seen[NMAX + 1][NMAX + 1];    /* run once directly before being captured */
    int use_graphs;
#endif
};

static void *model_alloc(sl_igpu_model *g, size_t bytes)
{
    void **a = (void **)realloc(g->allocs, (g->n_allocs + 1) * sizeof *a);
    if (!a) {
        fail("out of host memory");
        return NULL;
    }
    g->allocs = a;
    void *p = dev_alloc(bytes);
    if (p) g->allocs[g->n_allocs++] = p;
    return p;
}

static size_t dt_size(int dt) { return dt == 0 ? 4 : 2; }

static int put_mat(sl_igpu_model *g, sl_igpu_mat *dst, sl_igpu_mat src, size_t rows, size_t cols)
{
    dst->dt = src.dt;
    dst->w = NULL;
    if (!src.w) return 0;
    const size_t bytes = rows * cols * dt_size(src.dt);
    void *p = model_alloc(g, bytes);
    if (!p || to_dev(p, src.w, bytes)) return -1;
    dst->w = p;
    return 0;
}

static int put_vec(sl_igpu_model *g, float **dst, const float *src, size_t n)
{
    *dst = NULL;
    if (!src) return 0;
    float *p = (float *)model_alloc(g, n * sizeof(float));
    if (!p || to_dev(p, src, n * sizeof(float))) return -1;
    *dst = p;
    return 0;
}

static void model_free(sl_igpu_model *g)
{
    if (!g) return;
    for (size_t i = 0; i < g->n_allocs; i++) dev_free(g->allocs[i]);
    free(g->allocs);
    free(g->layers);
    free(g);
}

static sl_igpu_model *upload(const sl_igpu_weights *w)
{
    sl_igpu_model *g = (sl_igpu_model *)calloc(1, sizeof *g);
    if (!g || !(g->layers = (dev_layer *)calloc((size_t)w->n_layer, sizeof *g->layers))) {
        free(g);
        fail("out of host memory");
        return NULL;
    }
    g->cfg = *w;
    g->cfg.layers = NULL;
    const size_t d = (size_t)w->d_model, hd = (size_t)w->head_dim, qd = (size_t)w->n_head * hd;
    const size_t kvd = (size_t)w->n_kv_head * hd, ff = (size_t)w->d_ff, V = (size_t)w->vocab;
    int rc = put_mat(g, &g->tok_emb, w->tok_emb, V, d) || put_mat(g, &g->pos_emb, w->pos_emb, (size_t)w->max_seq_len, d);
    if (!rc) {
        if (w->lm_head.w == w->tok_emb.w) g->lm_head = g->tok_emb;
        else rc = put_mat(g, &g->lm_head, w->lm_head, V, d);
    }
    for (int l = 0; !rc && l < w->n_layer; l++) {
        const sl_igpu_layer *s = &w->layers[l];
        dev_layer *L = &g->layers[l];
        rc = put_mat(g, &L->q, s->q, qd, d) || put_mat(g, &L->k, s->k, kvd, d) || put_mat(g, &L->v, s->v, kvd, d) ||
             put_mat(g, &L->o, s->o, d, qd) || put_mat(g, &L->up, s->up, ff, d) || put_mat(g, &L->gate, s->gate, ff, d) ||
             put_mat(g, &L->down, s->down, d, ff) || put_vec(g, &L->attn_norm_w, s->attn_norm_w, d) ||
             put_vec(g, &L->attn_norm_b, s->attn_norm_b, d) || put_vec(g, &L->mlp_norm_w, s->mlp_norm_w, d) ||
             put_vec(g, &L->mlp_norm_b, s->mlp_norm_b, d) || put_vec(g, &L->bq, s->bq, qd) ||
             put_vec(g, &L->bk, s->bk, kvd) || put_vec(g, &L->bv, s->bv, kvd) || put_vec(g, &L->bo, s->bo, d) ||
             put_vec(g, &L->bup, s->bup, ff) || put_vec(g, &L->bdown, s->bdown, d);
    }
    if (!rc) rc = put_vec(g, &g->final_norm_w, w->final_norm_w, d) || put_vec(g, &g->final_norm_b, w->final_norm_b, d);
    if (rc) {
        model_free(g);
        return NULL;
    }
    return g;
}

static void ctx_free(sl_igpu_ctx *c)
{
    if (!c) return;
#ifdef __CUDACC__
    for (int n = 0; n <= NMAX; n++)
        for (int r = 0; r <= NMAX; r++)
            if (c->graph[n][r]) cudaGraphExecDestroy(c->graph[n][r]);
#endif
    dev_free(c->kc);
    dev_free(c->vc);
    dev_free(c->x);
    dev_free(c->xn);
    dev_free(c->q);
    dev_free(c->att);
    dev_free(c->ff);
    dev_free(c->sc);
    dev_free(c->logits);
    dev_free(c->rope_cos);
    dev_free(c->rope_sin);
    dev_free(c->step);
    host_free(c->h_step);
    host_free(c->h_logits);
    stream_free(c->st);
    free(c);
}

static sl_igpu_ctx *ctx_create(sl_igpu_model *g, int max_len)
{
    const sl_igpu_weights *w = &g->cfg;
    if (max_len < 1 || max_len > w->max_seq_len) {
        fail("context length %d is outside [1, %d]", max_len, w->max_seq_len);
        return NULL;
    }
    sl_igpu_ctx *c = (sl_igpu_ctx *)calloc(1, sizeof *c);
    if (!c) {
        fail("out of host memory");
        return NULL;
    }
    c->g = g;
    c->max_len = max_len;
    const size_t d = (size_t)w->d_model, hd = (size_t)w->head_dim, qd = (size_t)w->n_head * hd;
    const size_t kvd = (size_t)w->n_kv_head * hd, L = (size_t)w->n_layer, M = (size_t)max_len;
    int ok = !stream_create(&c->st);
    ok = ok && (c->kc = (float *)dev_alloc(L * M * kvd * sizeof(float))) && (c->vc = (float *)dev_alloc(L * M * kvd * sizeof(float))) &&
         (c->x = (float *)dev_alloc(NMAX * d * sizeof(float))) && (c->xn = (float *)dev_alloc(NMAX * d * sizeof(float))) &&
         (c->q = (float *)dev_alloc(NMAX * qd * sizeof(float))) && (c->att = (float *)dev_alloc(NMAX * qd * sizeof(float))) &&
         (c->ff = (float *)dev_alloc(2 * NMAX * (size_t)w->d_ff * sizeof(float))) &&
         (c->sc = (float *)dev_alloc(NMAX * (size_t)w->n_head * M * sizeof(float))) &&
         (c->logits = (float *)dev_alloc(NMAX * (size_t)w->vocab * sizeof(float))) &&
         (c->step = (int *)dev_alloc((1 + NMAX) * sizeof(int))) && (c->h_step = (int *)host_alloc((1 + NMAX) * sizeof(int))) &&
         (c->h_logits = (float *)host_alloc(NMAX * (size_t)w->vocab * sizeof(float)));
    if (ok && w->arch == 1) {
        /* Angles in double, as sl_model.c: pos * theta^(-2j/hd). */
        const size_t half = hd / 2;
        float *cs = (float *)malloc(M * half * sizeof(float)), *sn = (float *)malloc(M * half * sizeof(float));
        ok = cs && sn;
        for (size_t p = 0; ok && p < M; p++)
            for (size_t j = 0; j < half; j++) {
                const double a = (double)p * pow(w->rope_theta, -2.0 * (double)j / (double)hd);
                cs[p * half + j] = (float)cos(a);
                sn[p * half + j] = (float)sin(a);
            }
        ok = ok && (c->rope_cos = (float *)dev_alloc(M * half * sizeof(float))) &&
             (c->rope_sin = (float *)dev_alloc(M * half * sizeof(float))) && !to_dev(c->rope_cos, cs, M * half * sizeof(float)) &&
             !to_dev(c->rope_sin, sn, M * half * sizeof(float));
        free(cs);
        free(sn);
    }
    if (!ok) {
        ctx_free(c);
        return NULL;
    }
#ifdef __CUDACC__
    const char *e = getenv("SL_INFER_GRAPHS");
    c->use_graphs = !(e && !strcmp(e, "0"));
#endif
    return c;
}

/* Products of one layer input x (n, K) by up to three matrices. */
static mv_args mv_make(const sl_igpu_ctx *c, const float *x, int K, int n)
{
    mv_args a;
    memset(&a, 0, sizeof a);
    a.x = x;
    a.K = K;
    a.ldx = K;
    a.n = n;
    a.step = c->step;
    a.vec = K % 8 == 0;
    return a;
}

static void mv_add(mv_args *a, sl_igpu_mat W, const float *bias, float *y, int ldy, int rows, int at_pos, int mode)
{
    const int s = a->nseg++;
    a->w[s] = W.w;
    a->dt[s] = W.dt;
    a->bias[s] = bias;
    a->y[s] = y;
    a->ldy[s] = ldy;
    a->rows_end[s] = (s ? a->rows_end[s - 1] : 0) + rows;
    a->at_pos[s] = at_pos;
    a->mode[s] = mode;
}

/* Every kernel of one forward call of n tokens, the logits of the last n_rows; reads the position
 * and ids from c->step, so that the same launches serve any position (and one CUDA graph). */
static int enqueue_forward(sl_igpu_ctx *c, int n, int n_rows)
{
    const sl_igpu_model *g = c->g;
    const sl_igpu_weights *w = &g->cfg;
    const int d = w->d_model, hd = w->head_dim, H = w->n_head, KVH = w->n_kv_head, qd = H * hd, kvd = KVH * hd;
    const int ff = w->d_ff, gpt2 = w->arch == 0;
    const size_t M = (size_t)c->max_len;
    slg_stream st = c->st;
    float *f1 = c->ff, *f2 = c->ff + (size_t)NMAX * ff;
    if (k_embed(st, (size_t)n * d, c->x, g->tok_emb.w, g->tok_emb.dt, gpt2 ? g->pos_emb.w : NULL, g->pos_emb.dt, c->step, d))
        return -1;
    for (int l = 0; l < w->n_layer; l++) {
        const dev_layer *L = &g->layers[l];
        float *kc = c->kc + (size_t)l * M * kvd, *vc = c->vc + (size_t)l * M * kvd;
        norm_args na = {c->x, L->attn_norm_w, L->attn_norm_b, c->xn, d, w->norm_eps};
        if (k_norm(st, (size_t)n, &na)) return -1;
        mv_args a = mv_make(c, c->xn, d, n);
        mv_add(&a, L->q, L->bq, c->q, qd, qd, 0, 0);
        mv_add(&a, L->k, L->bk, kc, kvd, kvd, 1, 0);
        mv_add(&a, L->v, L->bv, vc, kvd, kvd, 1, 0);
        if (k_matvec(st, &a)) return -1;
        if (!gpt2 && k_rope(st, (size_t)n * (H + KVH) * (hd / 2), c->q, kc, c->rope_cos, c->rope_sin, c->step, H, KVH, hd, kvd))
            return -1;
        att_args aa = {c->q, kc, vc, c->att, c->sc, H, hd, kvd, H / KVH, c->max_len, 1.0f / sqrtf((float)hd), c->step};
        if (k_attention(st, n * H, &aa)) return -1;
        a = mv_make(c, c->att, qd, n);
        mv_add(&a, L->o, L->bo, c->x, d, d, 0, 1);
        if (k_matvec(st, &a)) return -1;
        na.w = L->mlp_norm_w;
        na.b = L->mlp_norm_b;
        if (k_norm(st, (size_t)n, &na)) return -1;
        a = mv_make(c, c->xn, d, n);
        if (gpt2) {
            mv_add(&a, L->up, L->bup, f1, ff, ff, 0, 2);
            if (k_matvec(st, &a)) return -1;
        } else {
            mv_add(&a, L->up, NULL, f1, ff, ff, 0, 0);
            mv_add(&a, L->gate, NULL, f2, ff, ff, 0, 0);
            if (k_matvec(st, &a) || k_silu_mul(st, (size_t)n * ff, f1, f2)) return -1;
        }
        a = mv_make(c, f1, ff, n);
        mv_add(&a, L->down, L->bdown, c->x, d, d, 0, 1);
        if (k_matvec(st, &a)) return -1;
    }
    if (n_rows > 0) {
        const int r0 = n - n_rows;
        norm_args na = {c->x + (size_t)r0 * d, g->final_norm_w, g->final_norm_b, c->xn, d, w->norm_eps};
        if (k_norm(st, (size_t)n_rows, &na)) return -1;
        mv_args a = mv_make(c, c->xn, d, n_rows);
        mv_add(&a, g->lm_head, NULL, c->logits, w->vocab, w->vocab, 0, 0);
        if (k_matvec(st, &a)) return -1;
    }
    return 0;
}

static int forward(sl_igpu_ctx *c, const int32_t *tokens, int n, int pos, int n_rows, float *logits)
{
    const int V = c->g->cfg.vocab;
    if (n < 1 || n > NMAX || n_rows < 0 || n_rows > n || pos < 0 || pos + n > c->max_len)
        return fail("forward of %d tokens (%d rows) at %d in a context of %d", n, n_rows, pos, c->max_len);
    c->h_step[0] = pos;
    for (int t = 0; t < n; t++) c->h_step[1 + t] = tokens[t];
    if (to_dev_async(c->st, c->step, c->h_step, (size_t)(1 + n) * sizeof(int))) return -1;
#ifdef __CUDACC__
    cudaGraphExec_t *ge = &c->graph[n][n_rows];
    if (c->use_graphs && c->seen[n][n_rows] && !*ge) {
        cudaGraph_t graph;
        if (cuda_ok(cudaStreamBeginCapture(c->st.s, cudaStreamCaptureModeThreadLocal), "begin capture")) return -1;
        int rc = enqueue_forward(c, n, n_rows);
        if (cuda_ok(cudaStreamEndCapture(c->st.s, &graph), "end capture") || rc) return -1;
        rc = cuda_ok(cudaGraphInstantiateWithFlags(ge, graph, 0), "graph instantiate");
        cudaGraphDestroy(graph);
        if (rc) return -1;
    }
    if (*ge) {
        if (cuda_ok(cudaGraphLaunch(*ge, c->st.s), "graph launch")) return -1;
    } else {
        if (enqueue_forward(c, n, n_rows)) return -1;
        c->seen[n][n_rows] = 1;
    }
#else
    if (enqueue_forward(c, n, n_rows)) return -1;
#endif
    if (n_rows && to_host_async(c->st, c->h_logits, c->logits, (size_t)n_rows * V * sizeof(float))) return -1;
    if (stream_sync(c->st)) return -1;
    if (n_rows) memcpy(logits, c->h_logits, (size_t)n_rows * V * sizeof(float));
    return 0;
}

static const sl_infer_gpu_api g_api = {
    SL_INFER_GPU_ABI, BACKEND_NAME, backend_init, upload, model_free, ctx_create, ctx_free, forward, last_error,
};

SLG_EXPORT const sl_infer_gpu_api *API_FN(void) { return &g_api; }
