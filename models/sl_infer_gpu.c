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
#include <cooperative_groups.h>
#include <cuda_runtime.h>
#define SLG_DEV static __device__ __forceinline__
#define SLG_HD static __host__ __device__ __forceinline__ /* also called by the host */
#define SLG_EXPORT extern "C" __attribute__((visibility("default")))
#define SLG_UNROLL _Pragma("unroll")
typedef struct {
    cudaStream_t s;
    int pdl; /* programmatic dependent launch on */
} slg_stream;
#else
#include "sl_half.h"
#define SLG_DEV static inline
#define SLG_HD static inline
#define SLG_EXPORT
#define SLG_UNROLL
typedef void *slg_stream;
#endif

#define NMAX SL_INFER_GPU_NMAX
#define MV_T 8      /* tokens per pass over a weight row */
#define MV_SEGS 3   /* matrices in one product launch (q, k, v) */
#define MV_PAIR_FROM 2 /* tokens from which a product's rows go two to a warp (CUDA build) */
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
    const char *fu = getenv("SL_INFER_FUSED");
    if (fu && !strcmp(fu, "1"))
        snprintf(info, n, "%s, CUDA runtime %d.%d, float32 compute, one persistent kernel per step", p.name, rt / 1000, (rt % 1000) / 10);
    else
        snprintf(info, n, "%s, CUDA runtime %d.%d, float32 compute, a launch per phase, CUDA graphs %s, programmatic dependent launch %s",
                 p.name, rt / 1000, (rt % 1000) / 10, getenv("SL_INFER_GRAPHS") && !strcmp(getenv("SL_INFER_GRAPHS"), "0") ? "off" : "on",
                 p.major >= 9 && !(e && !strcmp(e, "0")) ? "on" : "off");
    return 0;
}
#define BACKEND_NAME "cuda"
#define API_FN sl_infer_gpu_cuda_api

#else /* the C build: the emulation */


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

/* ---- the step as a list of phases ----
 *
 * A forward call is a fixed list of phases, each a set of independent items: elements (one thread
 * each) or rows and attention items (one warp each, 32 lanes whose partial sums meet in a fixed
 * shuffle tree). Phase p + 1 reads what phase p wrote, nothing else orders them. The list is
 * built once per (tokens, rows) shape and run two ways by the CUDA build: one launch per phase,
 * recorded as a CUDA graph, each launch overlapping the previous one's end (programmatic
 * dependent launch; the default), or one persistent kernel that walks the whole list with a
 * grid-wide barrier between phases (SL_INFER_FUSED=1: measured slower on an H200, 0.35 against
 * 0.31 ms per step of the shipped target's shape, models/GPU_INFERENCE.md). An item's arithmetic
 * does not depend on which thread, warp or launch runs it, so both give the same bits; the C build
 * runs the phases as loops in the same order. */

enum { PH_EMBED, PH_NORM, PH_MATVEC, PH_ROPE, PH_ATT_SCORES, PH_ATT, PH_SILU, PH_DIST_MAX, PH_DIST_EXP, PH_MATVEC_PAIR };

/* What a call leaves on the device for the host: its rows' logits (forward), or what the sampler
 * needs of each row (forward_dist): its argmax (temperature 0) or its softmax at the temperature. */
enum { OUT_LOGITS, OUT_ARGMAX, OUT_SOFTMAX, OUT_KINDS };

/* x (n, d) = tok_emb[token] (+ pos_emb[pos + t]); step = {pos, tokens...}. */
typedef struct {
    float *x;
    const void *te, *pe;
    int te_dt, pe_dt, d;
    const int *step;
} embed_args;

/* Pair j of head h of token t: q rows (n, H, hd), then the new keys in the cache (at rows pos..):
 * units (n, H + KVH, hd/2). */
typedef struct {
    float *q, *kc;
    const float *cs, *sn;
    const int *step;
    int H, KVH, hd, kvd;
} rope_args;

typedef struct {
    float *up;
    const float *gate;
} silu_args;

/* One phase of up to MV_SEGS products sharing the input x (n, K): output row r of the stacked
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

/* LayerNorm (b != NULL) or RMSNorm of rows of d: y = norm(x) w (+ b); sums in double. */
typedef struct {
    const float *x, *w, *b;
    float *y;
    int d;
    double eps;
} norm_args;

/* Causal attention of token t, head h (item t H + h) against the cache rows 0 .. pos + t: the
 * scores phase (an element per item and position), then the output phase (a warp per item and
 * 32 output dims). */
typedef struct {
    const float *q; /* (n, H, hd) */
    const float *kc, *vc; /* this layer's (max_len, kvd) */
    float *out;     /* (n, H, hd) */
    float *sc;      /* (NMAX, H, max_len) scores */
    int H, hd, kvd, group, max_len;
    float scale;
    const int *step;
} att_args;

/* The rows' distributions, over segments of DSEG logits (a warp each, lane l taking elements
 * l, l + 32, ... of its segment in order): the max phase writes each segment's first largest logit
 * and whether it saw a NaN or +inf; the exp phase (temperature T > 0) takes the row's max m over
 * its segments and writes e_i = exp(z_i / T - m / T) in double and the segment's sum of them. */
#define DSEG (WARP * 8)
typedef struct {
    float mx;   /* the segment's largest logit */
    int arg;    /* its first index in the row */
    int bad;    /* a NaN or +inf among the segment's logits */
    int unused;
    double sum; /* sum of e_i over the segment (exp phase) */
} seg_rec;

typedef struct {
    const float *z; /* (rows, V) logits */
    seg_rec *seg;   /* (rows, nseg) */
    double *e;      /* (rows, V) */
    const int *step;
    int V, nseg;
} dist_args;

typedef struct {
    int kind;
    size_t n; /* items: elements, rows, attention items, row segments */
    union {
        embed_args e;
        rope_args r;
        silu_args s;
        mv_args mv;
        norm_args nm;
        att_args at;
        dist_args ds;
    } u;
} slg_phase;

/* ---- element items ---- */

SLG_DEV void embed_at(size_t i, const embed_args *a)
{
    const int t = (int)(i / (size_t)a->d), c = (int)(i % (size_t)a->d);
    float v = load_w(a->te, a->te_dt, (size_t)a->step[1 + t] * a->d + c);
    if (a->pe) v = v + load_w(a->pe, a->pe_dt, (size_t)(a->step[0] + t) * a->d + c);
    a->x[i] = v;
}

SLG_DEV void rope_at(size_t i, const rope_args *a)
{
    const int half = a->hd / 2, per_t = (a->H + a->KVH) * half;
    const int t = (int)(i / (size_t)per_t), r = (int)(i % (size_t)per_t), h = r / half, j = r % half;
    const int pos = a->step[0] + t;
    float *v = h < a->H ? a->q + (size_t)t * a->H * a->hd + (size_t)h * a->hd
                        : a->kc + (size_t)pos * a->kvd + (size_t)(h - a->H) * a->hd;
    const float c = a->cs[(size_t)pos * half + j], s = a->sn[(size_t)pos * half + j];
    const float x0 = v[2 * j], x1 = v[2 * j + 1];
    v[2 * j] = x0 * c - x1 * s;
    v[2 * j + 1] = x0 * s + x1 * c;
}

/* up = silu(gate) * up, as sl_kern_silu_mul. */
SLG_DEV void silu_at(size_t i, const silu_args *a)
{
    const float g = a->gate[i];
    a->up[i] = a->up[i] * (g * sigmoid(g));
}

/* dot(q, k) over hd in order k = 0, 1, ... by fused multiply-adds; the CUDA build loads four at a
 * time (hd % 4 == 0) so that a lane's loads are in flight together, the sum being the same. */
SLG_DEV float att_dot(const float *q, const float *k, int hd)
{
    float dot = 0.0f;
#ifdef __CUDACC__
    if (hd % 4 == 0) {
#pragma unroll 8
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

/* Score of position j for item (t, h): element item * max_len + j, nothing past pos + t. */
SLG_DEV void att_score_at(size_t i, const att_args *a)
{
    const int item = (int)(i / (size_t)a->max_len), j = (int)(i % (size_t)a->max_len);
    const int t = item / a->H, h = item % a->H;
    if (j > a->step[0] + t) return;
    const float *K = a->kc + (size_t)(h / a->group) * a->hd + (size_t)j * a->kvd;
    a->sc[i] = att_dot(a->q + (size_t)item * a->hd, K, a->hd) * a->scale;
}

/* ---- warp items: a lane's share ---- */

/* One output row of a product phase, resolved once: its segment's matrix and destination, and the
 * shared input, as scalars (so that nothing is read again through the phase after each store). */
typedef struct {
    const void *W;
    const float *bias, *x;
    float *y;
    size_t row;
    int dt, ldy, mode, K, ldx, n, vec, y_row0; /* y_row0: the cache row of token 0 (at_pos), else 0 */
} mv_item;

SLG_DEV mv_item mv_pick(const mv_args *a, size_t r)
{
    int s = 0;
    while (s + 1 < a->nseg && r >= (size_t)a->rows_end[s]) s++;
    mv_item m;
    m.row = r - (s ? (size_t)a->rows_end[s - 1] : 0);
    m.W = a->w[s], m.dt = a->dt[s], m.bias = a->bias[s], m.y = a->y[s], m.ldy = a->ldy[s], m.mode = a->mode[s];
    m.y_row0 = a->at_pos[s] ? a->step[0] : 0;
    m.x = a->x, m.K = a->K, m.ldx = a->ldx, m.n = a->n, m.vec = a->vec;
    return m;
}

#ifdef __CUDACC__
/* The vector path of mv_lane (K % 8 == 0, 16-byte aligned rows) for weights of one dtype class:
 * F32 (two 16-byte loads a chunk) or 16-bit (one). 64 bytes of each row in flight per lane before
 * any is used (4 chunks of f32, 8 of f16/bf16): the same registers for both. */
template <int F32>
SLG_DEV void mv_lane_vec(const mv_item *m, int lane, int t0, float *acc)
{
    constexpr int U = F32 ? 4 : 8;
    const int K = m->K, nch = K / 8, n = m->n, ldx = m->ldx, dt = m->dt;
    const float *x = m->x;
    const size_t row0 = m->row * (size_t)K;
    for (int c0 = lane; c0 < nch; c0 += U * WARP) {
        uint4 r[U * (F32 ? 2 : 1)];
        SLG_UNROLL
        for (int u = 0; u < U; u++) {
            const int c = c0 + u * WARP;
            if (F32) {
                r[2 * u] = r[2 * u + 1] = make_uint4(0, 0, 0, 0);
                if (c < nch) {
                    r[2 * u] = *(const uint4 *)((const float *)m->W + row0 + (size_t)c * 8);
                    r[2 * u + 1] = *(const uint4 *)((const float *)m->W + row0 + (size_t)c * 8 + 4);
                }
            } else {
                r[u] = make_uint4(0, 0, 0, 0);
                if (c < nch) r[u] = *(const uint4 *)((const uint16_t *)m->W + row0 + (size_t)c * 8);
            }
        }
        SLG_UNROLL
        for (int u = 0; u < U; u++) {
            const int c = c0 + u * WARP;
            if (c >= nch) break;
            float w[8]; /* its own array: constant indices only, so it stays in registers */
            if (F32) {
                const uint4 a = r[2 * u], b = r[2 * u + 1];
                w[0] = __uint_as_float(a.x), w[1] = __uint_as_float(a.y), w[2] = __uint_as_float(a.z), w[3] = __uint_as_float(a.w);
                w[4] = __uint_as_float(b.x), w[5] = __uint_as_float(b.y), w[6] = __uint_as_float(b.z), w[7] = __uint_as_float(b.w);
            } else {
                const uint32_t p[4] = {r[u].x, r[u].y, r[u].z, r[u].w};
                SLG_UNROLL
                for (int e = 0; e < 4; e++) {
                    w[2 * e] = dt == 1 ? f16_to_f32((uint16_t)(p[e] & 0xffffu)) : bf16_to_f32((uint16_t)(p[e] & 0xffffu));
                    w[2 * e + 1] = dt == 1 ? f16_to_f32((uint16_t)(p[e] >> 16)) : bf16_to_f32((uint16_t)(p[e] >> 16));
                }
            }
            SLG_UNROLL
            for (int t = 0; t < MV_T; t++) {
                if (t0 + t < n) {
                    const float *xt = x + (size_t)(t0 + t) * ldx + (size_t)c * 8;
                    const float4 x0 = *(const float4 *)xt, x1 = *(const float4 *)(xt + 4);
                    float s = acc[t];
                    s = fmaf(w[0], x0.x, s), s = fmaf(w[1], x0.y, s), s = fmaf(w[2], x0.z, s), s = fmaf(w[3], x0.w, s);
                    s = fmaf(w[4], x1.x, s), s = fmaf(w[5], x1.y, s), s = fmaf(w[6], x1.z, s), s = fmaf(w[7], x1.w, s);
                    acc[t] = s;
                }
            }
        }
    }
}
/* mv_lane_vec for two rows of 16-bit weights at once: each input chunk is read once for both (at
 * n tokens a warp reads n K floats of input against K weights per row, so that from a few tokens
 * on the input's loads, not the weights', grow the phase). Each row's sums are mv_lane_vec's: the
 * same chunks in the same order, the same fused multiply-adds. Two chunks a row in flight (the
 * pair's registers: f32 rows, at twice the bytes, spilled and keep a row a warp). */
SLG_DEV void mv_lane_vec2(const mv_item *m0, const mv_item *m1, int lane, int t0, float *acc0, float *acc1)
{
    constexpr int U = 2;
    const int K = m0->K, nch = K / 8, n = m0->n, ldx = m0->ldx, dt0 = m0->dt, dt1 = m1->dt;
    const float *x = m0->x;
    const size_t row0 = m0->row * (size_t)K, row1 = m1->row * (size_t)K;
    for (int c0 = lane; c0 < nch; c0 += U * WARP) {
        uint4 r0[U], r1[U];
        SLG_UNROLL
        for (int u = 0; u < U; u++) {
            const int c = c0 + u * WARP;
            r0[u] = r1[u] = make_uint4(0, 0, 0, 0);
            if (c < nch) {
                r0[u] = *(const uint4 *)((const uint16_t *)m0->W + row0 + (size_t)c * 8);
                r1[u] = *(const uint4 *)((const uint16_t *)m1->W + row1 + (size_t)c * 8);
            }
        }
        SLG_UNROLL
        for (int u = 0; u < U; u++) {
            const int c = c0 + u * WARP;
            if (c >= nch) break;
            float w0[8], w1[8];
            const uint32_t p0[4] = {r0[u].x, r0[u].y, r0[u].z, r0[u].w}, p1[4] = {r1[u].x, r1[u].y, r1[u].z, r1[u].w};
            SLG_UNROLL
            for (int e = 0; e < 4; e++) {
                w0[2 * e] = dt0 == 1 ? f16_to_f32((uint16_t)(p0[e] & 0xffffu)) : bf16_to_f32((uint16_t)(p0[e] & 0xffffu));
                w0[2 * e + 1] = dt0 == 1 ? f16_to_f32((uint16_t)(p0[e] >> 16)) : bf16_to_f32((uint16_t)(p0[e] >> 16));
                w1[2 * e] = dt1 == 1 ? f16_to_f32((uint16_t)(p1[e] & 0xffffu)) : bf16_to_f32((uint16_t)(p1[e] & 0xffffu));
                w1[2 * e + 1] = dt1 == 1 ? f16_to_f32((uint16_t)(p1[e] >> 16)) : bf16_to_f32((uint16_t)(p1[e] >> 16));
            }
            SLG_UNROLL
            for (int t = 0; t < MV_T; t++) {
                if (t0 + t < n) {
                    const float *xt = x + (size_t)(t0 + t) * ldx + (size_t)c * 8;
                    const float4 x0 = *(const float4 *)xt, x1 = *(const float4 *)(xt + 4);
                    float s = acc0[t], q = acc1[t];
                    s = fmaf(w0[0], x0.x, s), s = fmaf(w0[1], x0.y, s), s = fmaf(w0[2], x0.z, s), s = fmaf(w0[3], x0.w, s);
                    s = fmaf(w0[4], x1.x, s), s = fmaf(w0[5], x1.y, s), s = fmaf(w0[6], x1.z, s), s = fmaf(w0[7], x1.w, s);
                    q = fmaf(w1[0], x0.x, q), q = fmaf(w1[1], x0.y, q), q = fmaf(w1[2], x0.z, q), q = fmaf(w1[3], x0.w, q);
                    q = fmaf(w1[4], x1.x, q), q = fmaf(w1[5], x1.y, q), q = fmaf(w1[6], x1.z, q), q = fmaf(w1[7], x1.w, q);
                    acc0[t] = s, acc1[t] = q;
                }
            }
        }
    }
}
#endif

/* Lane's partial sums for tokens t0 .. t0 + MV_T - 1 (those < n) of the item's row: the 8-element
 * chunks lane, lane + 32, ... in order, each element by fused multiply-add (the CUDA build's
 * vector path reads several chunks before using any; the sums are the same). */
SLG_DEV void mv_lane(const mv_item *m, int lane, int t0, float *acc)
{
    SLG_UNROLL
    for (int k = 0; k < MV_T; k++) acc[k] = 0.0f;
#ifdef __CUDACC__
    if (m->vec) {
        if (m->dt == 0) mv_lane_vec<1>(m, lane, t0, acc);
        else mv_lane_vec<0>(m, lane, t0, acc);
        return;
    }
#endif
    const int K = m->K, nch = (K + 7) / 8, n = m->n, ldx = m->ldx, dt = m->dt;
    const float *x = m->x;
    const void *W = m->W;
    const size_t row = m->row;
    for (int c = lane; c < nch; c += WARP) {
        const size_t base = row * (size_t)K + (size_t)c * 8;
        float w[8];
        const int mm = K - c * 8 < 8 ? K - c * 8 : 8;
        for (int e = 0; e < mm; e++) w[e] = load_w(W, dt, base + e);
        SLG_UNROLL
        for (int t = 0; t < MV_T; t++) {
            if (t0 + t < n) {
                const float *xt = x + (size_t)(t0 + t) * ldx + (size_t)c * 8;
                float s = acc[t];
                for (int e = 0; e < mm; e++) s = fmaf(w[e], xt[e], s);
                acc[t] = s;
            }
        }
    }
}

SLG_DEV void mv_store(const mv_item *m, int t, float dot)
{
    const float v = m->bias ? dot + m->bias[m->row] : dot;
    float *y = m->y + (size_t)(m->y_row0 + t) * m->ldy + m->row;
    if (m->mode == 1) *y = *y + v;
    else if (m->mode == 2) *y = gelu(v);
    else *y = v;
}

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

/* Attention output item it = item * nc + chunk (nc = ceil(hd / 32)): the softmax's max and sum
 * over the item's scores (each warp of the item computes the same ones), then the 32 dims
 * c0 = 32 chunk ..: lane l sums p_j v_j over its positions j = l, l + 32, ... in order into
 * part[32], the lanes' vectors then added by the shuffle tree, lane i ending with dim c0 + i. */
SLG_DEV int att_len(const att_args *a, int item) { return a->step[0] + item / a->H + 1; }

/* The CUDA build reads ATT_B of a lane's positions before using any (the loads in flight together);
 * each value is used in the same order as the plain loop's. */
#ifdef __CUDACC__
#define ATT_B 8
#else
#define ATT_B 1
#endif
SLG_DEV float att_lane_max(const att_args *a, int item, int lane)
{
    const float *s = a->sc + (size_t)item * a->max_len;
    const int len = att_len(a, item);
    float mx = -INFINITY;
    for (int j0 = lane; j0 < len; j0 += ATT_B * WARP) {
        float v[ATT_B];
        SLG_UNROLL
        for (int u = 0; u < ATT_B; u++) v[u] = j0 + u * WARP < len ? s[j0 + u * WARP] : 0.0f;
        SLG_UNROLL
        for (int u = 0; u < ATT_B; u++)
            if (j0 + u * WARP < len) mx = fmaxf(mx, v[u]);
    }
    return mx;
}

SLG_DEV float att_lane_exp(const att_args *a, int item, int lane, float mx)
{
    const float *s = a->sc + (size_t)item * a->max_len;
    const int len = att_len(a, item);
    float sum = 0.0f;
    for (int j0 = lane; j0 < len; j0 += ATT_B * WARP) {
        float v[ATT_B];
        SLG_UNROLL
        for (int u = 0; u < ATT_B; u++) v[u] = j0 + u * WARP < len ? s[j0 + u * WARP] : 0.0f;
        SLG_UNROLL
        for (int u = 0; u < ATT_B; u++)
            if (j0 + u * WARP < len) sum += expf(v[u] - mx);
    }
    return sum;
}

SLG_DEV void att_lane_part(const att_args *a, int item, int lane, float mx, float inv, int c0, float *part)
{
    const int h = item % a->H, len = att_len(a, item);
    const float *V = a->vc + (size_t)(h / a->group) * a->hd + c0;
    const float *s = a->sc + (size_t)item * a->max_len;
    SLG_UNROLL
    for (int i = 0; i < WARP; i++) part[i] = 0.0f;
#ifdef __CUDACC__
    if (a->hd % 4 == 0 && c0 + WARP <= a->hd) { /* two positions' values read before either is used */
        for (int j0 = lane; j0 < len; j0 += 2 * WARP) {
            float4 vv[2][WARP / 4];
            float sp[2];
            SLG_UNROLL
            for (int u = 0; u < 2; u++) {
                const int j = j0 + u * WARP < len ? j0 + u * WARP : j0;
                sp[u] = s[j];
                SLG_UNROLL
                for (int i = 0; i < WARP / 4; i++) vv[u][i] = *(const float4 *)(V + (size_t)j * a->kvd + 4 * i);
            }
            SLG_UNROLL
            for (int u = 0; u < 2; u++) {
                if (j0 + u * WARP >= len) break;
                const float p = expf(sp[u] - mx) * inv;
                SLG_UNROLL
                for (int i = 0; i < WARP / 4; i++) {
                    part[4 * i] = fmaf(p, vv[u][i].x, part[4 * i]), part[4 * i + 1] = fmaf(p, vv[u][i].y, part[4 * i + 1]);
                    part[4 * i + 2] = fmaf(p, vv[u][i].z, part[4 * i + 2]), part[4 * i + 3] = fmaf(p, vv[u][i].w, part[4 * i + 3]);
                }
            }
        }
        return;
    }
#endif
    for (int j = lane; j < len; j += WARP) {
        const float p = expf(s[j] - mx) * inv;
        const float *vj = V + (size_t)j * a->kvd;
        SLG_UNROLL
        for (int i = 0; i < WARP; i++)
            if (c0 + i < a->hd) part[i] = fmaf(p, vj[i], part[i]);
    }
}

SLG_HD int att_chunks(const att_args *a) { return (a->hd + WARP - 1) / WARP; }

/* The step's temperature: a double at ints STEP_T, STEP_T + 1 of the step buffer. */
#define STEP_T (2 + NMAX)
#define STEP_INTS (STEP_T + 2)
SLG_DEV double step_temperature(const int *step)
{
#ifdef __CUDACC__
    return __hiloint2double(step[STEP_T + 1], step[STEP_T]);
#else
    double t;
    memcpy(&t, step + STEP_T, sizeof t);
    return t;
#endif
}

/* (m2, k2) beats (m, k): a larger logit, or an equal one at a smaller index. A total order on
 * the non-NaN logits, so any tree of it gives the row's first largest logit, as a scan does. */
SLG_HD int dist_beats(float m2, int k2, float m, int k) { return m2 > m || (m2 == m && k2 < k); }

/* Lane l's first largest logit of segment s of row r, its index, and whether it saw a NaN or +inf. */
SLG_DEV void dist_lane_max(const dist_args *a, size_t r, int s, int lane, float *mx, int *arg, int *bad)
{
    const float *z = a->z + r * (size_t)a->V;
    float m = -INFINITY;
    int k = -1, b = 0;
    for (int j = 0; j < DSEG / WARP; j++) {
        const int i = s * DSEG + j * WARP + lane;
        if (i >= a->V) break;
        const float v = z[i];
        b |= isnan(v) || v == INFINITY;
        if (k < 0 || v > m) m = v, k = i;
    }
    *mx = m, *arg = k < 0 ? a->V : k, *bad = b; /* a lane past the row's end loses every comparison */
}

/* Lane l's e_i = exp(z_i / T - m) of segment s of row r, in double as sl_dist_standardise_f32
 * (z_i / T, then minus the row's largest of them, m = max z / T: division rounds monotonically),
 * stored; returns their sum in order. */
SLG_DEV double dist_lane_exp(const dist_args *a, size_t r, int s, int lane, double m, double T)
{
    const float *z = a->z + r * (size_t)a->V;
    double *e = a->e + r * (size_t)a->V, sum = 0;
    for (int j = 0; j < DSEG / WARP; j++) {
        const int i = s * DSEG + j * WARP + lane;
        if (i >= a->V) break;
        const double v = exp((double)z[i] / T - m);
        e[i] = v;
        sum += v;
    }
    return sum;
}

#ifdef __CUDACC__

/* ---- warp items on the device ---- */

SLG_DEV void mv_row(const mv_args *a, size_t r, int lane)
{
    const mv_item m = mv_pick(a, r);
    for (int t0 = 0; t0 < m.n; t0 += MV_T) {
        float acc[MV_T];
        mv_lane(&m, lane, t0, acc);
        SLG_UNROLL
        for (int k = 0; k < MV_T; k++)
            if (t0 + k < m.n) acc[k] = warp_sum_f(acc[k]); /* the same for every lane: no divergence */
        SLG_UNROLL
        for (int k = 0; k < MV_T; k++)
            if (lane == k && t0 + k < m.n) mv_store(&m, t0 + k, acc[k]);
    }
}

/* Rows r and r + 1 by one warp (a PH_MATVEC_PAIR phase), each with the bits mv_row gives it: 16-bit
 * weights on the vector path read their input chunks once for both, others go row by row. */
SLG_DEV void mv_row_pair(const mv_args *a, size_t r, int lane)
{
    const int n = a->n;
    {
        const mv_item m0 = mv_pick(a, r), m1 = mv_pick(a, r + 1);
        if (!m0.vec || m0.dt == 0 || m1.dt == 0) {
            mv_row(a, r, lane);
            mv_row(a, r + 1, lane);
            return;
        }
    }
    for (int t0 = 0; t0 < n; t0 += MV_T) {
        float acc0[MV_T], acc1[MV_T];
        SLG_UNROLL
        for (int k = 0; k < MV_T; k++) acc0[k] = acc1[k] = 0.0f;
        {
            const mv_item m0 = mv_pick(a, r), m1 = mv_pick(a, r + 1);
            mv_lane_vec2(&m0, &m1, lane, t0, acc0, acc1);
        }
        SLG_UNROLL
        for (int k = 0; k < MV_T; k++)
            if (t0 + k < n) acc0[k] = warp_sum_f(acc0[k]), acc1[k] = warp_sum_f(acc1[k]);
        /* Lane k stores token k of the first row, lane MV_T + k of the second. */
        const int k = lane % MV_T, second = lane >= MV_T;
        float v = 0.0f;
        SLG_UNROLL
        for (int j = 0; j < MV_T; j++)
            if (j == k) v = second ? acc1[j] : acc0[j];
        if (lane < 2 * MV_T && t0 + k < n) {
            const mv_item m = mv_pick(a, r + (size_t)second);
            mv_store(&m, t0 + k, v);
        }
    }
}

/* Rows of d <= NORM_R * 32 are read into registers once, every load in flight together; the sums
 * run over the same elements in the same order as norm_lane_sum. */
#define NORM_R 32
SLG_DEV void norm_row(const norm_args *a, size_t r, int lane)
{
    double mean = 0, inv;
    if (a->d > NORM_R * WARP) {
        if (a->b) {
            mean = warp_sum_d(norm_lane_sum(a, r, lane, 0, 0)) / a->d;
            inv = 1.0 / sqrt(warp_sum_d(norm_lane_sum(a, r, lane, mean, 1)) / a->d + a->eps);
        } else {
            inv = 1.0 / sqrt(warp_sum_d(norm_lane_sum(a, r, lane, 0, 0)) / a->d + a->eps);
        }
        norm_lane_apply(a, r, lane, mean, inv);
        return;
    }
    const int d = a->d;
    const float *x = a->x + r * (size_t)d, *nw = a->w, *nb = a->b;
    float *y = a->y + r * (size_t)d;
    const double eps = a->eps;
    float v[NORM_R];
    SLG_UNROLL
    for (int i = 0; i < NORM_R; i++) v[i] = lane + i * WARP < d ? x[lane + i * WARP] : 0.0f;
    double s = 0;
    SLG_UNROLL
    for (int i = 0; i < NORM_R; i++)
        if (lane + i * WARP < d) s += nb ? (double)v[i] : (double)v[i] * (double)v[i];
    if (nb) {
        mean = warp_sum_d(s) / d;
        s = 0;
        SLG_UNROLL
        for (int i = 0; i < NORM_R; i++)
            if (lane + i * WARP < d) s += ((double)v[i] - mean) * ((double)v[i] - mean);
    }
    inv = 1.0 / sqrt(warp_sum_d(s) / d + eps);
    float o[NORM_R]; /* every result computed (its weights read) before the first store */
    SLG_UNROLL
    for (int i = 0; i < NORM_R; i++) {
        const int k = lane + i * WARP < d ? lane + i * WARP : lane;
        o[i] = nb ? (float)(((double)v[i] - mean) * inv) * nw[k] + nb[k] : (float)(v[i] * inv) * nw[k];
    }
    SLG_UNROLL
    for (int i = 0; i < NORM_R; i++)
        if (lane + i * WARP < d) y[lane + i * WARP] = o[i];
}

/* One step of the recursive halving below, at offset o (a constant at each call, so that part[]
 * stays in registers). */
SLG_DEV void att_halve(float *part, int lane, int o)
{
    const int upper = lane & o;
    SLG_UNROLL
    for (int i = 0; i < o; i++) {
        const float keep = upper ? part[i + o] : part[i], send = upper ? part[i] : part[i + o];
        part[i] = keep + __shfl_xor_sync(0xffffffffu, send, o);
    }
}

SLG_DEV void att_item(const att_args *a, size_t it, int lane)
{
    const int nc = att_chunks(a), item = (int)(it / (size_t)nc), c0 = (int)(it % (size_t)nc) * WARP;
    const float mx = warp_max_f(att_lane_max(a, item, lane));
    const float inv = 1.0f / warp_sum_f(att_lane_exp(a, item, lane, mx));
    float part[WARP];
    att_lane_part(a, item, lane, mx, inv, c0, part);
    /* Recursive halving: at offset o a lane keeps the half of its o * 2 values selected by bit o
     * of its index and adds the partner's copy of that half: the pairs of the shuffle tree, so dim
     * i (at lane i) gets the bits tree_sum_f gives it in the C build. */
    att_halve(part, lane, 16);
    att_halve(part, lane, 8);
    att_halve(part, lane, 4);
    att_halve(part, lane, 2);
    att_halve(part, lane, 1);
    if (c0 + lane < a->hd) a->out[(size_t)item * a->hd + c0 + lane] = part[0];
}

/* Segment it = r nseg + s of the rows: its first largest logit, by a shuffle tree of dist_beats. */
SLG_DEV void dist_max_item(const dist_args *a, size_t it, int lane)
{
    float m;
    int k, b;
    dist_lane_max(a, it / (size_t)a->nseg, (int)(it % (size_t)a->nseg), lane, &m, &k, &b);
    for (int off = WARP / 2; off; off >>= 1) {
        const float m2 = __shfl_xor_sync(0xffffffffu, m, off);
        const int k2 = __shfl_xor_sync(0xffffffffu, k, off);
        b |= __shfl_xor_sync(0xffffffffu, b, off);
        if (dist_beats(m2, k2, m, k)) m = m2, k = k2;
    }
    if (lane == 0) a->seg[it].mx = m, a->seg[it].arg = k, a->seg[it].bad = b;
}

/* Segment it's exponentials and their sum (the shuffle tree); every warp of the row takes the
 * row's max over the segments' maxima itself. */
SLG_DEV void dist_exp_item(const dist_args *a, size_t it, int lane)
{
    const size_t r = it / (size_t)a->nseg;
    float M = -INFINITY;
    for (int s = lane; s < a->nseg; s += WARP) M = fmaxf(M, a->seg[r * a->nseg + s].mx);
    M = warp_max_f(M);
    const double T = step_temperature(a->step);
    const double sum = warp_sum_d(dist_lane_exp(a, r, (int)(it % (size_t)a->nseg), lane, (double)M / T, T));
    if (lane == 0) a->seg[it].sum = sum;
}

SLG_HD int phase_per_warp(int kind)
{
    return kind == PH_NORM || kind == PH_MATVEC || kind == PH_MATVEC_PAIR || kind == PH_ATT || kind == PH_DIST_MAX ||
           kind == PH_DIST_EXP;
}

/* This thread's share of phase f (in shared memory; kind = f->kind, a constant where the caller
 * knows it): thread tid of nthr (warp tid / 32 of nthr / 32
 * for warp items). */
SLG_DEV void phase_part(const slg_phase *f, int kind, size_t tid, size_t nthr)
{
    const int lane = (int)(tid % WARP);
    const size_t w = tid / WARP, nw = nthr / WARP, n = f->n;
    switch (kind) {
    case PH_EMBED:
        for (size_t i = tid; i < n; i += nthr) embed_at(i, &f->u.e);
        break;
    case PH_ROPE:
        for (size_t i = tid; i < n; i += nthr) rope_at(i, &f->u.r);
        break;
    case PH_SILU:
        for (size_t i = tid; i < n; i += nthr) silu_at(i, &f->u.s);
        break;
    case PH_ATT_SCORES:
        for (size_t i = tid; i < n; i += nthr) att_score_at(i, &f->u.at);
        break;
    case PH_NORM:
        for (size_t i = w; i < n; i += nw) norm_row(&f->u.nm, i, lane);
        break;
    case PH_MATVEC:
        for (size_t i = w; i < n; i += nw) mv_row(&f->u.mv, i, lane);
        break;
    case PH_MATVEC_PAIR: /* rows 2w, 2w + 1 */
        for (size_t i = 2 * w; i < n; i += 2 * nw) {
            if (i + 1 < n) mv_row_pair(&f->u.mv, i, lane);
            else mv_row(&f->u.mv, i, lane);
        }
        break;
    case PH_ATT:
        for (size_t i = w; i < n; i += nw) att_item(&f->u.at, i, lane);
        break;
    case PH_DIST_MAX:
        for (size_t i = w; i < n; i += nw) dist_max_item(&f->u.ds, i, lane);
        break;
    case PH_DIST_EXP:
        for (size_t i = w; i < n; i += nw) dist_exp_item(&f->u.ds, i, lane);
        break;
    }
}

/* Copies phase src to shared memory (every thread of the block, then a block barrier). */
SLG_DEV void phase_to_shared(slg_phase *dst, const slg_phase *src)
{
    if (threadIdx.x < sizeof(slg_phase) / sizeof(uint32_t)) ((uint32_t *)dst)[threadIdx.x] = ((const uint32_t *)src)[threadIdx.x];
    __syncthreads();
}

#define PH_THREADS 256

/* One phase per launch (its arguments by value), enough threads for one item each. One kernel per
 * kind of phase (KIND a constant: the other cases vanish), so that each gets only the registers
 * its own kind needs and as many blocks fit on a multiprocessor as that allows. */
template <int KIND>
static __global__ void __launch_bounds__(PH_THREADS, KIND == PH_MATVEC ? 2 : 1) k_phase_g(slg_phase arg)
{
    __shared__ slg_phase f;
    PDL_START();
    phase_to_shared(&f, &arg);
    PDL_WAIT();
    phase_part(&f, KIND, (size_t)blockIdx.x * blockDim.x + threadIdx.x, (size_t)gridDim.x * blockDim.x);
}

/* The whole list in one cooperative launch: every block walks the phases, a grid-wide barrier
 * after each (it also makes the phase's writes visible to every block). The phase is first copied
 * to shared memory, where its arguments are read from. */
static __global__ void __launch_bounds__(PH_THREADS) k_fused_g(const slg_phase *ph, int nph)
{
    __shared__ slg_phase f;
    cooperative_groups::grid_group grid = cooperative_groups::this_grid();
    const size_t tid = (size_t)blockIdx.x * blockDim.x + threadIdx.x, nthr = (size_t)gridDim.x * blockDim.x;
    for (int p = 0; p < nph; p++) {
        phase_to_shared(&f, ph + p);
        phase_part(&f, f.kind, tid, nthr);
        grid.sync();
    }
}

static int phase_launch(slg_stream st, const slg_phase *f)
{
    const size_t items = f->kind == PH_MATVEC_PAIR ? (f->n + 1) / 2 : f->n; /* warps or threads */
    const size_t threads = phase_per_warp(f->kind) ? items * WARP : items, blocks = (threads + PH_THREADS - 1) / PH_THREADS;
    if (!threads) return 0;
    switch (f->kind) {
    case PH_EMBED: return launch("embed phase", k_phase_g<PH_EMBED>, blocks, PH_THREADS, st, *f);
    case PH_NORM: return launch("norm phase", k_phase_g<PH_NORM>, blocks, PH_THREADS, st, *f);
    case PH_MATVEC: return launch("product phase", k_phase_g<PH_MATVEC>, blocks, PH_THREADS, st, *f);
    case PH_MATVEC_PAIR: return launch("paired product phase", k_phase_g<PH_MATVEC_PAIR>, blocks, PH_THREADS, st, *f);
    case PH_ROPE: return launch("rope phase", k_phase_g<PH_ROPE>, blocks, PH_THREADS, st, *f);
    case PH_ATT_SCORES: return launch("scores phase", k_phase_g<PH_ATT_SCORES>, blocks, PH_THREADS, st, *f);
    case PH_ATT: return launch("attention phase", k_phase_g<PH_ATT>, blocks, PH_THREADS, st, *f);
    case PH_DIST_MAX: return launch("row max phase", k_phase_g<PH_DIST_MAX>, blocks, PH_THREADS, st, *f);
    case PH_DIST_EXP: return launch("row exp phase", k_phase_g<PH_DIST_EXP>, blocks, PH_THREADS, st, *f);
    default: return launch("silu phase", k_phase_g<PH_SILU>, blocks, PH_THREADS, st, *f);
    }
}

#else

/* ---- the C build: each phase a loop over its items, a warp's lanes a loop ---- */

static void mv_rows(const mv_args *a)
{
    const long rows = a->rows_end[a->nseg - 1];
#pragma omp parallel for schedule(static) if ((long)a->K * rows * a->n >= (1L << 20))
    for (long r = 0; r < rows; r++) {
        const mv_item m = mv_pick(a, (size_t)r);
        for (int t0 = 0; t0 < a->n; t0 += MV_T) {
            float acc[WARP][MV_T], v[WARP];
            for (int lane = 0; lane < WARP; lane++) mv_lane(&m, lane, t0, acc[lane]);
            for (int k = 0; k < MV_T && t0 + k < a->n; k++) {
                for (int lane = 0; lane < WARP; lane++) v[lane] = acc[lane][k];
                mv_store(&m, t0 + k, tree_sum_f(v));
            }
        }
    }
}

static void norm_rows(const norm_args *a, size_t rows)
{
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
}

static void att_items(const att_args *a, size_t n)
{
    const int nc = att_chunks(a);
#pragma omp parallel for schedule(static) if (n >= 64)
    for (long it = 0; it < (long)n; it++) {
        const int item = (int)(it / nc), c0 = (int)(it % nc) * WARP;
        float v[WARP], part[WARP][WARP];
        for (int l = 0; l < WARP; l++) v[l] = att_lane_max(a, item, l);
        const float mx = tree_max_f(v);
        for (int l = 0; l < WARP; l++) v[l] = att_lane_exp(a, item, l, mx);
        const float inv = 1.0f / tree_sum_f(v);
        for (int l = 0; l < WARP; l++) att_lane_part(a, item, l, mx, inv, c0, part[l]);
        for (int i = 0; i < WARP && c0 + i < a->hd; i++) {
            for (int l = 0; l < WARP; l++) v[l] = part[l][i];
            a->out[(size_t)item * a->hd + c0 + i] = tree_sum_f(v);
        }
    }
}

static void dist_max_items(const dist_args *a, size_t n)
{
    for (size_t it = 0; it < n; it++) {
        float m, m2;
        int k, b, k2, b2;
        dist_lane_max(a, it / (size_t)a->nseg, (int)(it % (size_t)a->nseg), 0, &m, &k, &b);
        for (int l = 1; l < WARP; l++) {
            dist_lane_max(a, it / (size_t)a->nseg, (int)(it % (size_t)a->nseg), l, &m2, &k2, &b2);
            b |= b2;
            if (dist_beats(m2, k2, m, k)) m = m2, k = k2;
        }
        a->seg[it].mx = m, a->seg[it].arg = k, a->seg[it].bad = b;
    }
}

static void dist_exp_items(const dist_args *a, size_t n)
{
    const double T = step_temperature(a->step);
#pragma omp parallel for schedule(static) if (n >= 64)
    for (long it = 0; it < (long)n; it++) {
        const size_t r = (size_t)it / (size_t)a->nseg;
        float M = -INFINITY;
        for (int s = 0; s < a->nseg; s++) M = fmaxf(M, a->seg[r * a->nseg + s].mx);
        double v[WARP];
        for (int l = 0; l < WARP; l++) v[l] = dist_lane_exp(a, r, (int)((size_t)it % (size_t)a->nseg), l, (double)M / T, T);
        a->seg[it].sum = tree_sum_d(v);
    }
}

#define ELEMENTS(fn, args)                                                                               \
    _Pragma("omp parallel for schedule(static) if (f->n >= 4096)") for (long i = 0; i < (long)f->n; i++) \
        fn((size_t)i, args)

static void phase_run(const slg_phase *f)
{
    switch (f->kind) {
    case PH_EMBED: ELEMENTS(embed_at, &f->u.e); break;
    case PH_ROPE: ELEMENTS(rope_at, &f->u.r); break;
    case PH_SILU: ELEMENTS(silu_at, &f->u.s); break;
    case PH_ATT_SCORES: ELEMENTS(att_score_at, &f->u.at); break;
    case PH_NORM: norm_rows(&f->u.nm, f->n); break;
    case PH_MATVEC:
    case PH_MATVEC_PAIR: mv_rows(&f->u.mv); break;
    case PH_ATT: att_items(&f->u.at, f->n); break;
    case PH_DIST_MAX: dist_max_items(&f->u.ds, f->n); break;
    case PH_DIST_EXP: dist_exp_items(&f->u.ds, f->n); break;
    }
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
    seg_rec *seg;       /* (NMAX, nseg) the rows' segments (forward_dist); e (NMAX, vocab) follows */
    double *e;
    int nseg;
    float *rope_cos, *rope_sin; /* (max_len, hd / 2), llama */
    int *step;          /* device {pos, tokens (NMAX), unused, temperature (a double, ints STEP_T..)} */
    int *h_step;        /* pinned host copy */
    float *h_logits;    /* pinned (NMAX, vocab) */
    int mv_pair_from;   /* products of this many tokens or more take rows in pairs (CUDA build) */
    seg_rec *h_seg;     /* pinned copy of seg and e, contiguous as on the device */
    double *h_e;
    slg_phase *ph;      /* host: the phase list being built (max_phases) */
    int max_phases;
#ifdef __CUDACC__
    slg_phase *dph[OUT_KINDS][NMAX + 1][NMAX + 1];        /* device copies of the lists, by [out][n][n_rows] (persistent kernel) */
    int nph[OUT_KINDS][NMAX + 1][NMAX + 1];
    cudaGraphExec_t graph[OUT_KINDS][NMAX + 1][NMAX + 1]; /* per-phase launches, recorded */
    unsigned char seen[OUT_KINDS][NMAX + 1][NMAX + 1];    /* run once directly before being captured */
    int use_graphs, fused, fused_blocks;
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
    for (int o = 0; o < OUT_KINDS; o++)
        for (int n = 0; n <= NMAX; n++)
            for (int r = 0; r <= NMAX; r++) {
                if (c->graph[o][n][r]) cudaGraphExecDestroy(c->graph[o][n][r]);
                dev_free(c->dph[o][n][r]);
            }
#endif
    free(c->ph);
    dev_free(c->kc);
    dev_free(c->vc);
    dev_free(c->x);
    dev_free(c->xn);
    dev_free(c->q);
    dev_free(c->att);
    dev_free(c->ff);
    dev_free(c->sc);
    dev_free(c->logits);
    dev_free(c->seg);
    dev_free(c->rope_cos);
    dev_free(c->rope_sin);
    dev_free(c->step);
    host_free(c->h_step);
    host_free(c->h_logits);
    host_free(c->h_seg);
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
         (c->step = (int *)dev_alloc(STEP_INTS * sizeof(int))) && (c->h_step = (int *)host_alloc(STEP_INTS * sizeof(int))) &&
         (c->h_logits = (float *)host_alloc(NMAX * (size_t)w->vocab * sizeof(float)));
    c->nseg = (w->vocab + DSEG - 1) / DSEG;
    const size_t seg_bytes = NMAX * (size_t)c->nseg * sizeof(seg_rec), dist_bytes = seg_bytes + NMAX * (size_t)w->vocab * sizeof(double);
    ok = ok && (c->seg = (seg_rec *)dev_alloc(dist_bytes)) && (c->h_seg = (seg_rec *)host_alloc(dist_bytes));
    if (ok) c->e = (double *)((char *)c->seg + seg_bytes), c->h_e = (double *)((char *)c->h_seg + seg_bytes);
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
    /* Products of MV_PAIR_FROM tokens or more take their rows two to a warp (SL_INFER_MV_PAIR_FROM
     * sets it; a large value turns pairs off): the same bits either way. */
    const char *pf = getenv("SL_INFER_MV_PAIR_FROM");
    c->mv_pair_from = pf && atoi(pf) > 0 ? atoi(pf) : MV_PAIR_FROM;
    c->max_phases = 5 + 10 * w->n_layer;
    if (!(c->ph = (slg_phase *)calloc((size_t)c->max_phases, sizeof *c->ph))) {
        fail("out of host memory");
        ctx_free(c);
        return NULL;
    }
#ifdef __CUDACC__
    const char *e = getenv("SL_INFER_GRAPHS"), *fu = getenv("SL_INFER_FUSED"), *fb = getenv("SL_INFER_FUSED_BLOCKS");
    c->use_graphs = !(e && !strcmp(e, "0"));
    c->fused = fu && !strcmp(fu, "1");
    if (c->fused) { /* every block resident at once, as the grid-wide barrier needs */
        int dev = 0, sms = 0, per_sm = 0;
        cudaGetDevice(&dev);
        cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev);
        if (cuda_ok(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, k_fused_g, PH_THREADS, 0), "occupancy")) {
            ctx_free(c);
            return NULL;
        }
        c->fused_blocks = sms * per_sm;
        if (fb && atoi(fb) > 0 && atoi(fb) < c->fused_blocks) c->fused_blocks = atoi(fb);
    }
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

static slg_phase *phase_add(sl_igpu_ctx *c, int *nph, int kind, size_t n)
{
    slg_phase *f = &c->ph[(*nph)++];
    memset(f, 0, sizeof *f);
    f->kind = kind;
    f->n = n;
    return f;
}

/* A product phase: rows in pairs from mv_pair_from tokens on when every matrix is 16-bit (f32
 * rows go one by one in a pair's warp, at half the warps: slower, run 15). */
static void phase_mv(sl_igpu_ctx *c, int *nph, const mv_args *a)
{
    int pairs = a->vec && a->n >= c->mv_pair_from;
    for (int s = 0; s < a->nseg; s++) pairs = pairs && a->dt[s] != 0;
    phase_add(c, nph, pairs ? PH_MATVEC_PAIR : PH_MATVEC, (size_t)a->rows_end[a->nseg - 1])->u.mv = *a;
}

/* The phases of one forward call of n tokens, the logits of the last n_rows (and what out asks of
 * them), into c->ph; they read the position, ids and temperature from c->step, so that the same
 * list serves any position. Returns the count. */
static int build_phases(sl_igpu_ctx *c, int n, int n_rows, int out)
{
    const sl_igpu_model *g = c->g;
    const sl_igpu_weights *w = &g->cfg;
    const int d = w->d_model, hd = w->head_dim, H = w->n_head, KVH = w->n_kv_head, qd = H * hd, kvd = KVH * hd;
    const int ff = w->d_ff, gpt2 = w->arch == 0;
    const size_t M = (size_t)c->max_len;
    float *f1 = c->ff, *f2 = c->ff + (size_t)NMAX * ff;
    int np = 0;
    embed_args ea = {c->x, g->tok_emb.w, gpt2 ? g->pos_emb.w : NULL, g->tok_emb.dt, g->pos_emb.dt, d, c->step};
    phase_add(c, &np, PH_EMBED, (size_t)n * d)->u.e = ea;
    for (int l = 0; l < w->n_layer; l++) {
        const dev_layer *L = &g->layers[l];
        float *kc = c->kc + (size_t)l * M * kvd, *vc = c->vc + (size_t)l * M * kvd;
        norm_args na = {c->x, L->attn_norm_w, L->attn_norm_b, c->xn, d, w->norm_eps};
        phase_add(c, &np, PH_NORM, (size_t)n)->u.nm = na;
        mv_args a = mv_make(c, c->xn, d, n);
        mv_add(&a, L->q, L->bq, c->q, qd, qd, 0, 0);
        mv_add(&a, L->k, L->bk, kc, kvd, kvd, 1, 0);
        mv_add(&a, L->v, L->bv, vc, kvd, kvd, 1, 0);
        phase_mv(c, &np, &a);
        if (!gpt2) {
            rope_args ra = {c->q, kc, c->rope_cos, c->rope_sin, c->step, H, KVH, hd, kvd};
            phase_add(c, &np, PH_ROPE, (size_t)n * (H + KVH) * (hd / 2))->u.r = ra;
        }
        att_args aa = {c->q, kc, vc, c->att, c->sc, H, hd, kvd, H / KVH, c->max_len, 1.0f / sqrtf((float)hd), c->step};
        phase_add(c, &np, PH_ATT_SCORES, (size_t)n * H * M)->u.at = aa;
        phase_add(c, &np, PH_ATT, (size_t)n * H * att_chunks(&aa))->u.at = aa;
        a = mv_make(c, c->att, qd, n);
        mv_add(&a, L->o, L->bo, c->x, d, d, 0, 1);
        phase_mv(c, &np, &a);
        na.w = L->mlp_norm_w;
        na.b = L->mlp_norm_b;
        phase_add(c, &np, PH_NORM, (size_t)n)->u.nm = na;
        a = mv_make(c, c->xn, d, n);
        if (gpt2) {
            mv_add(&a, L->up, L->bup, f1, ff, ff, 0, 2);
            phase_mv(c, &np, &a);
        } else {
            mv_add(&a, L->up, NULL, f1, ff, ff, 0, 0);
            mv_add(&a, L->gate, NULL, f2, ff, ff, 0, 0);
            phase_mv(c, &np, &a);
            silu_args sa = {f1, f2};
            phase_add(c, &np, PH_SILU, (size_t)n * ff)->u.s = sa;
        }
        a = mv_make(c, f1, ff, n);
        mv_add(&a, L->down, L->bdown, c->x, d, d, 0, 1);
        phase_mv(c, &np, &a);
    }
    if (n_rows > 0) {
        const int r0 = n - n_rows;
        norm_args na = {c->x + (size_t)r0 * d, g->final_norm_w, g->final_norm_b, c->xn, d, w->norm_eps};
        phase_add(c, &np, PH_NORM, (size_t)n_rows)->u.nm = na;
        mv_args a = mv_make(c, c->xn, d, n_rows);
        mv_add(&a, g->lm_head, NULL, c->logits, w->vocab, w->vocab, 0, 0);
        phase_mv(c, &np, &a);
        const dist_args da = {c->logits, c->seg, c->e, c->step, w->vocab, c->nseg};
        if (out != OUT_LOGITS) phase_add(c, &np, PH_DIST_MAX, (size_t)n_rows * c->nseg)->u.ds = da;
        if (out == OUT_SOFTMAX) phase_add(c, &np, PH_DIST_EXP, (size_t)n_rows * c->nseg)->u.ds = da;
    }
    return np;
}

#ifdef __CUDACC__
/* The device's copy of the (out, n, n_rows) list, made on first use. */
static int device_phases(sl_igpu_ctx *c, int n, int n_rows, int out)
{
    if (c->dph[out][n][n_rows]) return 0;
    const int np = build_phases(c, n, n_rows, out);
    slg_phase *d = (slg_phase *)dev_alloc((size_t)np * sizeof *d);
    if (!d || to_dev(d, c->ph, (size_t)np * sizeof *d)) {
        dev_free(d);
        return -1;
    }
    c->dph[out][n][n_rows] = d;
    c->nph[out][n][n_rows] = np;
    return 0;
}

/* The list as one launch per phase, each phase's arguments passed by value. */
static int enqueue_phases(sl_igpu_ctx *c, int n, int n_rows, int out)
{
    const int np = build_phases(c, n, n_rows, out);
    for (int p = 0; p < np; p++)
        if (phase_launch(c->st, &c->ph[p])) return -1;
    return 0;
}

static int run_step(sl_igpu_ctx *c, int n, int n_rows, int out)
{
    if (c->fused) {
        if (device_phases(c, n, n_rows, out)) return -1;
        const slg_phase *ph = c->dph[out][n][n_rows];
        int np = c->nph[out][n][n_rows];
        void *args[] = {(void *)&ph, (void *)&np};
        return cuda_ok(cudaLaunchCooperativeKernel((const void *)k_fused_g, dim3((unsigned)c->fused_blocks), dim3(PH_THREADS), args, 0, c->st.s),
                       "persistent step kernel");
    }
    cudaGraphExec_t *ge = &c->graph[out][n][n_rows];
    if (c->use_graphs && c->seen[out][n][n_rows] && !*ge) {
        cudaGraph_t graph;
        if (cuda_ok(cudaStreamBeginCapture(c->st.s, cudaStreamCaptureModeThreadLocal), "begin capture")) return -1;
        int rc = enqueue_phases(c, n, n_rows, out);
        if (cuda_ok(cudaStreamEndCapture(c->st.s, &graph), "end capture") || rc) return -1;
        rc = cuda_ok(cudaGraphInstantiateWithFlags(ge, graph, 0), "graph instantiate");
        cudaGraphDestroy(graph);
        if (rc) return -1;
    }
    if (*ge) return cuda_ok(cudaGraphLaunch(*ge, c->st.s), "graph launch");
    if (enqueue_phases(c, n, n_rows, out)) return -1;
    c->seen[out][n][n_rows] = 1;
    return 0;
}
#else
static int run_step(sl_igpu_ctx *c, int n, int n_rows, int out)
{
    const int np = build_phases(c, n, n_rows, out);
    for (int p = 0; p < np; p++) phase_run(&c->ph[p]);
    return 0;
}
#endif

/* Checks the call, copies the step (position, ids, temperature) and enqueues its phases. */
static int start_step(sl_igpu_ctx *c, const int32_t *tokens, int n, int pos, int n_rows, int out, double temperature)
{
    if (n < 1 || n > NMAX || n_rows < 0 || n_rows > n || pos < 0 || pos + n > c->max_len)
        return fail("forward of %d tokens (%d rows) at %d in a context of %d", n, n_rows, pos, c->max_len);
    c->h_step[0] = pos;
    for (int t = 0; t < n; t++) c->h_step[1 + t] = tokens[t];
    memcpy(c->h_step + STEP_T, &temperature, sizeof temperature);
    if (to_dev_async(c->st, c->step, c->h_step, STEP_INTS * sizeof(int))) return -1;
    return run_step(c, n, n_rows, out);
}

/* The last call's n_rows rows of logits, to the host. */
static int logits_to_host(sl_igpu_ctx *c, int n_rows, float *logits)
{
    const size_t bytes = (size_t)n_rows * c->g->cfg.vocab * sizeof(float);
    if (n_rows && to_host_async(c->st, c->h_logits, c->logits, bytes)) return -1;
    if (stream_sync(c->st)) return -1;
    if (n_rows) memcpy(logits, c->h_logits, bytes);
    return 0;
}

static int forward(sl_igpu_ctx *c, const int32_t *tokens, int n, int pos, int n_rows, float *logits)
{
    if (start_step(c, tokens, n, pos, n_rows, OUT_LOGITS, 0)) return -1;
    return logits_to_host(c, n_rows, logits);
}

/* The segments' records of each row, then (temperature > 0) the exponentials, come back in one
 * copy; the host adds the segments' sums in order and scales. A row whose logits are not all
 * finite or -inf, or (temperature > 0) are all -inf, sends every row's logits back instead
 * (returns 1), for the caller's own rules (an error, or an argmax at +inf). */
static int forward_dist(sl_igpu_ctx *c, const int32_t *tokens, int n, int pos, int n_rows, double temperature, double *p,
                        int32_t *argmax, float *logits)
{
    const int soft = temperature > 0, V = c->g->cfg.vocab, ns = c->nseg;
    if (!(temperature >= 0)) return fail("temperature %g is not >= 0", temperature);
    if (start_step(c, tokens, n, pos, n_rows, soft ? OUT_SOFTMAX : OUT_ARGMAX, temperature)) return -1;
    if (!n_rows) return stream_sync(c->st);
    const size_t bytes = soft ? (size_t)((char *)(c->e + (size_t)n_rows * V) - (char *)c->seg) : (size_t)n_rows * ns * sizeof(seg_rec);
    if (to_host_async(c->st, c->h_seg, c->seg, bytes) || stream_sync(c->st)) return -1;
    for (int r = 0; r < n_rows; r++) {
        const seg_rec *sg = c->h_seg + (size_t)r * ns;
        float m = sg[0].mx;
        int k = sg[0].arg, bad = sg[0].bad;
        for (int s = 1; s < ns; s++) {
            bad |= sg[s].bad;
            if (dist_beats(sg[s].mx, sg[s].arg, m, k)) m = sg[s].mx, k = sg[s].arg;
        }
        if (bad || (soft && m == -INFINITY)) return logits_to_host(c, n_rows, logits) ? -1 : 1;
        if (!soft) {
            argmax[r] = k;
            continue;
        }
        double sum = 0;
        for (int s = 0; s < ns; s++) sum += sg[s].sum;
        const double inv = 1.0 / sum, *e = c->h_e + (size_t)r * V;
        double *pr = p + (size_t)r * V;
        for (int i = 0; i < V; i++) pr[i] = e[i] * inv;
    }
    return 0;
}

static const sl_infer_gpu_api g_api = {
    SL_INFER_GPU_ABI, BACKEND_NAME, backend_init, upload, model_free, ctx_create, ctx_free, forward, forward_dist, last_error,
};

SLG_EXPORT const sl_infer_gpu_api *API_FN(void) { return &g_api; }
