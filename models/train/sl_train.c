/*
 * sl_train.c: GPT-2 forward and backward over flat (B,T,C) arrays, losses, AdamW and the schedule.
 * Follows llm.c's train_gpt2.c layer by layer: each layer is a _forward/_backward pair; backward
 * functions accumulate (+=) into gradients, so the activation gradients are zeroed before a pass.
 * Matmuls go through OpenBLAS sgemm; other loops are OpenMP loops in which each output element is
 * written by one iteration and summed in a fixed order (thread-count independent).
 */
#include "sl_train.h"
#include "sl_train_elem.h"

#include <cblas.h>
#include <json-c/json.h>
#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "sl_common.h"

/* ---- configuration ---- */

int sl_train_config_check(const sl_train_config *c)
{
    if (c->vocab_size < 2 || c->vocab_size > (1 << 24))
        return sl_fail(SL_EINPUT, "config: vocab_size %d is outside [2, 16777216]", c->vocab_size);
    if (c->n_layer < 1 || c->n_layer > 256)
        return sl_fail(SL_EINPUT, "config: n_layer %d is outside [1, 256]", c->n_layer);
    if (c->n_head < 1 || c->d_model < 1 || c->d_model % c->n_head != 0)
        return sl_fail(SL_EINPUT, "config: d_model %d is not a positive multiple of n_head %d", c->d_model,
                       c->n_head);
    if (c->d_model > 65536) return sl_fail(SL_EINPUT, "config: d_model %d is above 65536", c->d_model);
    if (c->d_ff < 1 || c->d_ff > 262144) return sl_fail(SL_EINPUT, "config: d_ff %d is outside [1, 262144]", c->d_ff);
    if (c->max_seq_len < 1 || c->max_seq_len > 65536)
        return sl_fail(SL_EINPUT, "config: max_seq_len %d is outside [1, 65536]", c->max_seq_len);
    if (!(c->norm_eps > 0) || !isfinite(c->norm_eps))
        return sl_fail(SL_EINPUT, "config: norm_eps %g must be a positive number", c->norm_eps);
    return SL_OK;
}

static int json_int_field(struct json_object *o, const char *key, int required, int def, int *out)
{
    struct json_object *v;
    if (!json_object_object_get_ex(o, key, &v)) {
        if (required) return sl_fail(SL_EINPUT, "config: missing \"%s\"", key);
        *out = def;
        return SL_OK;
    }
    if (!json_object_is_type(v, json_type_int))
        return sl_fail(SL_EINPUT, "config: \"%s\" is %s, expected an integer", key, json_object_to_json_string(v));
    int64_t x = json_object_get_int64(v);
    if (x < INT32_MIN || x > INT32_MAX) return sl_fail(SL_EINPUT, "config: \"%s\" = %lld is out of range", key, (long long)x);
    *out = (int)x;
    return SL_OK;
}

int sl_train_config_parse(const char *json, sl_train_config *cfg)
{
    memset(cfg, 0, sizeof *cfg);
    enum json_tokener_error jerr;
    struct json_object *o = json_tokener_parse_verbose(json, &jerr);
    if (!o || !json_object_is_type(o, json_type_object)) {
        if (o) json_object_put(o);
        return sl_fail(SL_EINPUT, "config: not a JSON object: '%.60s'", json);
    }
    int rc = SL_OK;
    if (!rc) rc = json_int_field(o, "vocab_size", 1, 0, &cfg->vocab_size);
    if (!rc) rc = json_int_field(o, "n_layer", 1, 0, &cfg->n_layer);
    if (!rc) rc = json_int_field(o, "n_head", 1, 0, &cfg->n_head);
    if (!rc) rc = json_int_field(o, "d_model", 1, 0, &cfg->d_model);
    if (!rc) rc = json_int_field(o, "d_ff", 1, 0, &cfg->d_ff);
    if (!rc) rc = json_int_field(o, "max_seq_len", 1, 0, &cfg->max_seq_len);
    int kv = 0;
    if (!rc) rc = json_int_field(o, "n_kv_head", 0, cfg->n_head, &kv);
    if (!rc && kv != cfg->n_head)
        rc = sl_fail(SL_EINPUT, "config: n_kv_head %d differs from n_head %d (gpt2 has no grouped-query attention)",
                     kv, cfg->n_head);
    cfg->norm_eps = 1e-5f;
    cfg->tied_embeddings = 1;
    struct json_object *v;
    if (!rc && json_object_object_get_ex(o, "norm_eps", &v)) {
        if (!json_object_is_type(v, json_type_double) && !json_object_is_type(v, json_type_int))
            rc = sl_fail(SL_EINPUT, "config: \"norm_eps\" is %s, expected a number", json_object_to_json_string(v));
        else
            cfg->norm_eps = (float)json_object_get_double(v);
    }
    if (!rc && json_object_object_get_ex(o, "tied_embeddings", &v)) {
        if (!json_object_is_type(v, json_type_boolean))
            rc = sl_fail(SL_EINPUT, "config: \"tied_embeddings\" is %s, expected true or false",
                         json_object_to_json_string(v));
        else
            cfg->tied_embeddings = json_object_get_boolean(v);
    }
    json_object_put(o);
    if (!rc) rc = sl_train_config_check(cfg);
    return rc;
}

struct json_object *sl_train_json_double(double x)
{
    /* The shortest decimal that reads back as x, so 1e-3 prints as 1e-3, not 0.0010000000000000000208. */
    char buf[40];
    for (int prec = 1; prec <= 17; prec++) {
        snprintf(buf, sizeof buf, "%.*g", prec, x);
        if (strtod(buf, NULL) == x) break;
    }
    if (!strchr(buf, '.') && !strchr(buf, 'e') && !strchr(buf, 'n') && !strchr(buf, 'i')) strcat(buf, ".0");
    return json_object_new_double_s(x, buf);
}

char *sl_train_config_json(const sl_train_config *c)
{
    struct json_object *o = json_object_new_object();
    json_object_object_add(o, "vocab_size", json_object_new_int(c->vocab_size));
    json_object_object_add(o, "n_layer", json_object_new_int(c->n_layer));
    json_object_object_add(o, "n_head", json_object_new_int(c->n_head));
    json_object_object_add(o, "n_kv_head", json_object_new_int(c->n_head));
    json_object_object_add(o, "d_model", json_object_new_int(c->d_model));
    json_object_object_add(o, "d_ff", json_object_new_int(c->d_ff));
    json_object_object_add(o, "max_seq_len", json_object_new_int(c->max_seq_len));
    /* The float's shortest decimal (1e-5, not 9.99999974737875e-06): readers parse it back to the
     * same float. */
    char eps[32];
    for (int prec = 1; prec <= 9; prec++) {
        snprintf(eps, sizeof eps, "%.*g", prec, (double)c->norm_eps);
        if ((float)strtod(eps, NULL) == c->norm_eps) break;
    }
    json_object_object_add(o, "norm_eps", json_object_new_double_s(strtod(eps, NULL), eps));
    json_object_object_add(o, "tied_embeddings", json_object_new_boolean(c->tied_embeddings));
    char *s = strdup(json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN));
    json_object_put(o);
    return s;
}

/* ---- allocation ---- */


size_t sl_train_n_params(const sl_train_config *cfg)
{
    size_t s[SL_TP_N], n = 0;
    sl_train_param_sizes(cfg, s);
    for (int i = 0; i < SL_TP_N; i++) n += s[i];
    return n;
}


static void act_sizes(const sl_train_config *c, int B, int T, size_t *s)
{
    size_t BT = (size_t)B * T, C = (size_t)c->d_model, L = (size_t)c->n_layer, F = (size_t)c->d_ff;
    size_t NH = (size_t)c->n_head, V = (size_t)c->vocab_size;
    size_t k = 0;
    s[k++] = BT * C;              /* encoded */
    s[k++] = L * BT * C;          /* ln1 */
    s[k++] = L * BT;              /* ln1_mean */
    s[k++] = L * BT;              /* ln1_rstd */
    s[k++] = L * BT * 3 * C;      /* qkv */
    s[k++] = L * BT * C;          /* atty */
    s[k++] = L * B * NH * T * T;  /* att */
    s[k++] = L * BT * C;          /* attproj */
    s[k++] = L * BT * C;          /* residual2 */
    s[k++] = L * BT * C;          /* ln2 */
    s[k++] = L * BT;              /* ln2_mean */
    s[k++] = L * BT;              /* ln2_rstd */
    s[k++] = L * BT * F;          /* fch */
    s[k++] = L * BT * F;          /* fch_gelu */
    s[k++] = L * BT * C;          /* fcproj */
    s[k++] = L * BT * C;          /* residual3 */
    s[k++] = BT * C;              /* lnf */
    s[k++] = BT;                  /* lnf_mean */
    s[k++] = BT;                  /* lnf_rstd */
    s[k++] = BT * V;              /* logits */
    s[k++] = BT;                  /* losses */
}

/* Gradient buffers skip what the backward pass never uses: the LayerNorm statistics and the
 * per-position losses. (The att slot is the attention backward's scratch.) */
static const int grad_act_unused[SL_TRAIN_N_ACTS] = {[2] = 1, [3] = 1, [10] = 1, [11] = 1,
                                                     [17] = 1, [18] = 1, [20] = 1};

static float *acts_alloc(const sl_train_config *c, int B, int T, sl_train_acts *a, int grads)
{
    size_t s[SL_TRAIN_N_ACTS], n = 0;
    act_sizes(c, B, T, s);
    for (int i = 0; i < SL_TRAIN_N_ACTS; i++)
        if (!(grads && grad_act_unused[i])) n += s[i];
    float *mem = sl_calloc(n, sizeof(float));
    if (!mem) return NULL;
    float **ptrs = (float **)a;
    float *p = mem;
    for (int i = 0; i < SL_TRAIN_N_ACTS; i++) {
        if (grads && grad_act_unused[i]) {
            ptrs[i] = NULL;
        } else {
            ptrs[i] = p;
            p += s[i];
        }
    }
    return mem;
}

/* Points views[i] at consecutive slices of mem, sizes[i] floats each (NULL for empty ones). */
static void split_tensors(float *mem, const size_t *sizes, float **views)
{
    for (int i = 0; i < SL_TP_N; i++) {
        views[i] = sizes[i] ? mem : NULL;
        mem += sizes[i];
    }
}

sl_train_model *sl_train_model_alloc(const sl_train_config *cfg, int B, int T, int with_grads)
{
    if (sl_train_config_check(cfg)) return NULL;
    if (B < 1 || T < 1 || T > cfg->max_seq_len) {
        sl_fail(SL_EINPUT, "batch %d x seq %d: seq must be in [1, max_seq_len = %d]", B, T, cfg->max_seq_len);
        return NULL;
    }
    sl_train_model *m = sl_calloc(1, sizeof *m);
    if (!m) return NULL;
    /* OpenBLAS runs single-threaded inside our OpenMP loops (see gemm_rows). */
    openblas_set_num_threads(1);
    m->cfg = *cfg;
    m->B = B;
    m->T = T;
    sl_train_param_sizes(cfg, m->param_sizes);
    m->n_params = sl_train_n_params(cfg);
    m->params_mem = sl_calloc(m->n_params, sizeof(float));
    if (!m->params_mem) goto fail;
    split_tensors(m->params_mem, m->param_sizes, m->params);
    m->acts_mem = acts_alloc(cfg, B, T, &m->acts, 0);
    if (!m->acts_mem) goto fail;
    if (with_grads) {
        m->grads_mem = sl_calloc(m->n_params, sizeof(float));
        m->m = sl_calloc(m->n_params, sizeof(float));
        m->v = sl_calloc(m->n_params, sizeof(float));
        if (!m->grads_mem || !m->m || !m->v) goto fail;
        split_tensors(m->grads_mem, m->param_sizes, m->grads);
        m->grad_acts_mem = acts_alloc(cfg, B, T, &m->grad_acts, 1);
        if (!m->grad_acts_mem) goto fail;
    }
    return m;
fail:
    sl_train_model_free(m);
    return NULL;
}

void sl_train_model_free(sl_train_model *m)
{
    if (!m) return;
    free(m->params_mem);
    free(m->grads_mem);
    free(m->m);
    free(m->v);
    free(m->acts_mem);
    free(m->grad_acts_mem);
    free(m);
}

/* Box-Muller on 53-bit uniforms: a standard normal from two draws (the second value is dropped
 * so that each draw's position in the stream does not depend on parity). */
static double gaussian(gsl_rng *r)
{
    double u1 = 1.0 - sl_rng_uniform53(r), u2 = sl_rng_uniform53(r);
    return sqrt(-2.0 * log(u1)) * cos(2.0 * M_PI * u2);
}

void sl_train_init(sl_train_model *m, uint64_t seed)
{
    const sl_train_config *c = &m->cfg;
    double proj_std = 0.02 / sqrt(2.0 * c->n_layer);
    gsl_rng *r = sl_rng_alloc(seed, SL_STREAM_DATA, SL_TRAIN_INIT_ITEM);
    for (int t = 0; t < SL_TP_N; t++) {
        float *w = m->params[t];
        size_t n = m->param_sizes[t];
        if (!n) continue;
        sl_rng_reseed(r, seed, SL_STREAM_DATA, SL_TRAIN_INIT_ITEM + (uint64_t)t);
        if (t == SL_TP_LN1W || t == SL_TP_LN2W || t == SL_TP_LNFW) {
            for (size_t i = 0; i < n; i++) w[i] = 1.0f;
        } else if (sl_train_tensor_decays(t)) {
            double sd = (t == SL_TP_ATTPROJW || t == SL_TP_FCPROJW) ? proj_std : 0.02;
            for (size_t i = 0; i < n; i++) w[i] = (float)(sd * gaussian(r));
        } else {
            memset(w, 0, n * sizeof(float));
        }
    }
    gsl_rng_free(r);
}

/* ---- layers ---- */

static void encoder_forward(float *out, const int *inp, const float *wte, const float *wpe, int B, int T, int C)
{
#pragma omp parallel for collapse(2) schedule(static)
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++) {
            float *o = out + ((size_t)b * T + t) * C;
            const float *we = wte + (size_t)inp[b * T + t] * C, *pe = wpe + (size_t)t * C;
            for (int i = 0; i < C; i++) o[i] = we[i] + pe[i];
        }
}

/* Several positions may share a token, so rows of dwte are summed column-block-wise by one thread
 * each, over positions in order. */
static void encoder_backward(float *dwte, float *dwpe, const float *dout, const int *inp, int B, int T, int C)
{
#pragma omp parallel for schedule(static)
    for (int c0 = 0; c0 < C; c0 += 16) {
        int c1 = c0 + 16 < C ? c0 + 16 : C;
        for (int b = 0; b < B; b++)
            for (int t = 0; t < T; t++) {
                const float *d = dout + ((size_t)b * T + t) * C;
                float *we = dwte + (size_t)inp[b * T + t] * C, *pe = dwpe + (size_t)t * C;
                for (int i = c0; i < c1; i++) {
                    we[i] += d[i];
                    pe[i] += d[i];
                }
            }
    }
}

static void layernorm_forward(float *out, float *mean, float *rstd, const float *inp, const float *w,
                              const float *bias, int N, int C, float eps)
{
#pragma omp parallel for schedule(static)
    for (int n = 0; n < N; n++) {
        const float *x = inp + (size_t)n * C;
        double s = 0, s2 = 0;
        for (int i = 0; i < C; i++) s += x[i];
        double mu = s / C;
        for (int i = 0; i < C; i++) s2 += (x[i] - mu) * (x[i] - mu);
        float rs = (float)(1.0 / sqrt(s2 / C + eps));
        float muf = (float)mu;
        float *o = out + (size_t)n * C;
        for (int i = 0; i < C; i++) o[i] = (x[i] - muf) * rs * w[i] + bias[i];
        mean[n] = muf;
        rstd[n] = rs;
    }
}

static void layernorm_backward(float *dinp, float *dw, float *db, const float *dout, const float *inp,
                               const float *w, const float *mean, const float *rstd, int N, int C)
{
#pragma omp parallel for schedule(static)
    for (int n = 0; n < N; n++) {
        const float *d = dout + (size_t)n * C, *x = inp + (size_t)n * C;
        float *dx = dinp + (size_t)n * C;
        float mu = mean[n], rs = rstd[n];
        double dnorm_mean = 0, dnorm_norm_mean = 0;
        for (int i = 0; i < C; i++) {
            float norm = (x[i] - mu) * rs;
            float dnorm = w[i] * d[i];
            dnorm_mean += dnorm;
            dnorm_norm_mean += dnorm * norm;
        }
        float a = (float)(dnorm_mean / C), bnm = (float)(dnorm_norm_mean / C);
        for (int i = 0; i < C; i++) {
            float norm = (x[i] - mu) * rs;
            dx[i] += (w[i] * d[i] - a - norm * bnm) * rs;
        }
    }
#pragma omp parallel for schedule(static)
    for (int c0 = 0; c0 < C; c0 += 16) {
        int c1 = c0 + 16 < C ? c0 + 16 : C;
        float sw[16] = {0}, sb[16] = {0};
        for (int n = 0; n < N; n++) {
            const float *d = dout + (size_t)n * C, *x = inp + (size_t)n * C;
            for (int i = c0; i < c1; i++) {
                sw[i - c0] += (x[i] - mean[n]) * rstd[n] * d[i];
                sb[i - c0] += d[i];
            }
        }
        for (int i = c0; i < c1; i++) {
            dw[i] += sw[i - c0];
            db[i] += sb[i - c0];
        }
    }
}

/* C (M, N) = op(A) op(B) + beta C in blocks of GEMM_ROWS rows of C, each block one single-threaded
 * sgemm, the blocks shared among OpenMP threads. The blocks are fixed, not one per thread, because
 * OpenBLAS's result for an element depends on how the rows are cut (its micro-kernels sum in a
 * different order at block edges): fixed blocks make the result independent of the thread count.
 * With OpenBLAS's own threads off, its workers also do not spin against ours on a small machine. */
#define GEMM_ROWS 128
static void gemm_rows(int ta, int tb, int M, int N, int K, float alpha, const float *A, int lda, const float *B,
                      int ldb, float beta, float *C, int ldc)
{
    int nblocks = (M + GEMM_ROWS - 1) / GEMM_ROWS;
    /* Dynamic: on a shared machine a descheduled thread's blocks go to the one that runs. */
#pragma omp parallel for schedule(dynamic, 1)
    for (int blk = 0; blk < nblocks; blk++) {
        int m0 = blk * GEMM_ROWS, m1 = m0 + GEMM_ROWS < M ? m0 + GEMM_ROWS : M;
        cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, m1 - m0, N, K,
                    alpha, ta ? A + m0 : A + (size_t)m0 * lda, lda, B, ldb, beta, C + (size_t)m0 * ldc, ldc);
    }
}

/* out (N, OC) = inp (N, IC) · W^T (W is (OC, IC)) + bias. */
static void matmul_forward(float *out, const float *inp, const float *W, const float *bias, int N, int IC, int OC)
{
    if (bias) {
#pragma omp parallel for schedule(static)
        for (int n = 0; n < N; n++) memcpy(out + (size_t)n * OC, bias, (size_t)OC * sizeof(float));
    }
    gemm_rows(0, 1, N, OC, IC, 1.0f, inp, IC, W, IC, bias ? 1.0f : 0.0f, out, OC);
}

/* dinp (N, IC) += dout · W;  dW (OC, IC) += dout^T · inp;  dbias (OC) += column sums of dout. */
static void matmul_backward(float *dinp, float *dW, float *dbias, const float *dout, const float *inp,
                            const float *W, int N, int IC, int OC)
{
    gemm_rows(0, 0, N, IC, OC, 1.0f, dout, OC, W, IC, 1.0f, dinp, IC);
    gemm_rows(1, 0, OC, IC, N, 1.0f, dout, OC, inp, IC, 1.0f, dW, IC);
    if (dbias) {
#pragma omp parallel for schedule(static)
        for (int o0 = 0; o0 < OC; o0 += 16) {
            int o1 = o0 + 16 < OC ? o0 + 16 : OC;
            float s[16] = {0};
            for (int n = 0; n < N; n++) {
                const float *d = dout + (size_t)n * OC;
                for (int o = o0; o < o1; o++) s[o - o0] += d[o];
            }
            for (int o = o0; o < o1; o++) dbias[o] += s[o - o0];
        }
    }
}

/* inp (B, T, 3C) holds q, k, v; out (B, T, C); att (B, NH, T, T). One (b, h) per iteration with
 * two single-threaded sgemms: S = scale Q K^T over the full T x T (the masked half is wasted work,
 * still far cheaper than scalar loops), a causal softmax per row, then out = S V. */
static void attention_forward(float *out, float *att, const float *inp, int B, int T, int C, int NH)
{
    int C3 = 3 * C, hs = C / NH;
    float scale = 1.0f / sqrtf((float)hs);
#pragma omp parallel for collapse(2) schedule(dynamic, 1)
    for (int b = 0; b < B; b++)
        for (int h = 0; h < NH; h++) {
            const float *q = inp + (size_t)b * T * C3 + h * hs, *k = q + C, *v = q + 2 * C;
            float *S = att + ((size_t)b * NH + h) * T * T;
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, T, T, hs, scale, q, C3, k, C3, 0.0f, S, T);
            for (int t = 0; t < T; t++) sl_softmax_causal_row(S + (size_t)t * T, t, T);
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, T, hs, T, 1.0f, S, T, v, C3, 0.0f,
                        out + (size_t)b * T * C + h * hs, C);
        }
}

/* The same split for the backward: dS = dout V^T, dV += S^T dout, the softmax backward
 * dP_j = S_j (dS_j - sum_k S_k dS_k) (zero above the diagonal because S is), dQ += scale dP K,
 * dK += scale dP^T Q. datt (B, NH, T, T) is scratch for dS, then dP. */
static void attention_backward(float *dinp, float *datt, const float *dout, const float *inp, const float *att,
                               int B, int T, int C, int NH)
{
    int C3 = 3 * C, hs = C / NH;
    float scale = 1.0f / sqrtf((float)hs);
#pragma omp parallel for collapse(2) schedule(dynamic, 1)
    for (int b = 0; b < B; b++)
        for (int h = 0; h < NH; h++) {
            size_t o = (size_t)b * T * C3 + h * hs;
            const float *q = inp + o, *k = q + C, *v = q + 2 * C;
            float *dq = dinp + o, *dk = dq + C, *dv = dq + 2 * C;
            const float *d = dout + (size_t)b * T * C + h * hs;
            const float *S = att + ((size_t)b * NH + h) * T * T;
            float *dS = datt + ((size_t)b * NH + h) * T * T;
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, T, T, hs, 1.0f, d, C, v, C3, 0.0f, dS, T);
            cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, T, hs, T, 1.0f, S, T, d, C, 1.0f, dv, C3);
            for (int t = 0; t < T; t++) sl_softmax_causal_row_bwd(dS + (size_t)t * T, S + (size_t)t * T, t, T);
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, T, hs, T, scale, dS, T, k, C3, 1.0f, dq, C3);
            cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, T, hs, T, scale, dS, T, q, C3, 1.0f, dk, C3);
        }
}

static SL_VECTORISE void gelu_forward(float *out, const float *inp, size_t N)
{
#pragma omp parallel for simd schedule(static)
    for (size_t i = 0; i < N; i++) {
        out[i] = sl_gelu(inp[i]);
    }
}

static SL_VECTORISE void gelu_backward(float *dinp, const float *inp, const float *dout, size_t N)
{
#pragma omp parallel for simd schedule(static)
    for (size_t i = 0; i < N; i++) {
        dinp[i] += sl_gelu_grad(inp[i]) * dout[i];
    }
}

static void residual_forward(float *out, const float *a, const float *b, size_t N)
{
#pragma omp parallel for schedule(static)
    for (size_t i = 0; i < N; i++) out[i] = a[i] + b[i];
}

static void residual_backward(float *da, float *db, const float *dout, size_t N)
{
#pragma omp parallel for schedule(static)
    for (size_t i = 0; i < N; i++) {
        da[i] += dout[i];
        db[i] += dout[i];
    }
}

/* ---- the model ---- */

static const float *unembed(const sl_train_model *m)
{
    return m->cfg.tied_embeddings ? m->params[SL_TP_WTE] : m->params[SL_TP_LMHEAD];
}

void sl_train_forward(sl_train_model *m, const int *inputs, int B, int T)
{
    const sl_train_config *c = &m->cfg;
    int C = c->d_model, L = c->n_layer, NH = c->n_head, F = c->d_ff, V = c->vocab_size;
    size_t BT = (size_t)B * T, BTC = BT * C;
    float **p = m->params;
    sl_train_acts *a = &m->acts;
    encoder_forward(a->encoded, inputs, p[SL_TP_WTE], p[SL_TP_WPE], B, T, C);
    for (int l = 0; l < L; l++) {
        const float *res = l == 0 ? a->encoded : a->residual3 + (l - 1) * BTC;
        float *ln1 = a->ln1 + l * BTC, *qkv = a->qkv + l * BTC * 3, *atty = a->atty + l * BTC;
        float *att = a->att + (size_t)l * B * NH * T * T, *attproj = a->attproj + l * BTC;
        float *res2 = a->residual2 + l * BTC, *ln2 = a->ln2 + l * BTC;
        float *fch = a->fch + l * BT * F, *fchg = a->fch_gelu + l * BT * F;
        float *fcproj = a->fcproj + l * BTC, *res3 = a->residual3 + l * BTC;
        layernorm_forward(ln1, a->ln1_mean + l * BT, a->ln1_rstd + l * BT, res, p[SL_TP_LN1W] + l * C,
                          p[SL_TP_LN1B] + l * C, (int)BT, C, c->norm_eps);
        matmul_forward(qkv, ln1, p[SL_TP_QKVW] + (size_t)l * 3 * C * C, p[SL_TP_QKVB] + l * 3 * C, (int)BT, C, 3 * C);
        attention_forward(atty, att, qkv, B, T, C, NH);
        matmul_forward(attproj, atty, p[SL_TP_ATTPROJW] + (size_t)l * C * C, p[SL_TP_ATTPROJB] + l * C, (int)BT, C, C);
        residual_forward(res2, res, attproj, BTC);
        layernorm_forward(ln2, a->ln2_mean + l * BT, a->ln2_rstd + l * BT, res2, p[SL_TP_LN2W] + l * C,
                          p[SL_TP_LN2B] + l * C, (int)BT, C, c->norm_eps);
        matmul_forward(fch, ln2, p[SL_TP_FCW] + (size_t)l * F * C, p[SL_TP_FCB] + (size_t)l * F, (int)BT, C, F);
        gelu_forward(fchg, fch, BT * F);
        matmul_forward(fcproj, fchg, p[SL_TP_FCPROJW] + (size_t)l * C * F, p[SL_TP_FCPROJB] + l * C, (int)BT, F, C);
        residual_forward(res3, res2, fcproj, BTC);
    }
    layernorm_forward(a->lnf, a->lnf_mean, a->lnf_rstd, a->residual3 + (L - 1) * BTC, p[SL_TP_LNFW], p[SL_TP_LNFB],
                      (int)BT, C, c->norm_eps);
    matmul_forward(a->logits, a->lnf, unembed(m), NULL, (int)BT, C, V);
}

void sl_train_zero_grad(sl_train_model *m)
{
    if (m->grads_mem) memset(m->grads_mem, 0, m->n_params * sizeof(float));
}

static void zero_grad_acts(sl_train_model *m, int B, int T)
{
    /* Everything but the logits' gradient, which the loss wrote, and the attention scratch. */
    size_t s[SL_TRAIN_N_ACTS];
    act_sizes(&m->cfg, B, T, s);
    float **ptrs = (float **)&m->grad_acts;
    for (int i = 0; i < SL_TRAIN_N_ACTS; i++)
        if (ptrs[i] && i != 19 && i != 6) memset(ptrs[i], 0, s[i] * sizeof(float));
}

void sl_train_backward(sl_train_model *m, const int *inputs, int B, int T)
{
    const sl_train_config *c = &m->cfg;
    int C = c->d_model, L = c->n_layer, NH = c->n_head, F = c->d_ff, V = c->vocab_size;
    size_t BT = (size_t)B * T, BTC = BT * C;
    float **p = m->params, **g = m->grads;
    sl_train_acts *a = &m->acts, *d = &m->grad_acts;
    zero_grad_acts(m, B, T);
    float *dunembed = c->tied_embeddings ? g[SL_TP_WTE] : g[SL_TP_LMHEAD];
    matmul_backward(d->lnf, dunembed, NULL, d->logits, a->lnf, unembed(m), (int)BT, C, V);
    layernorm_backward(d->residual3 + (L - 1) * BTC, g[SL_TP_LNFW], g[SL_TP_LNFB], d->lnf,
                       a->residual3 + (L - 1) * BTC, p[SL_TP_LNFW], a->lnf_mean, a->lnf_rstd, (int)BT, C);
    for (int l = L - 1; l >= 0; l--) {
        const float *res = l == 0 ? a->encoded : a->residual3 + (l - 1) * BTC;
        float *dres = l == 0 ? d->encoded : d->residual3 + (l - 1) * BTC;
        size_t o1 = l * BTC, oF = l * BT * F;
        const float *att = a->att + (size_t)l * B * NH * T * T;
        residual_backward(d->residual2 + o1, d->fcproj + o1, d->residual3 + o1, BTC);
        matmul_backward(d->fch_gelu + oF, g[SL_TP_FCPROJW] + (size_t)l * C * F, g[SL_TP_FCPROJB] + l * C,
                        d->fcproj + o1, a->fch_gelu + oF, p[SL_TP_FCPROJW] + (size_t)l * C * F, (int)BT, F, C);
        gelu_backward(d->fch + oF, a->fch + oF, d->fch_gelu + oF, BT * F);
        matmul_backward(d->ln2 + o1, g[SL_TP_FCW] + (size_t)l * F * C, g[SL_TP_FCB] + (size_t)l * F, d->fch + oF,
                        a->ln2 + o1, p[SL_TP_FCW] + (size_t)l * F * C, (int)BT, C, F);
        layernorm_backward(d->residual2 + o1, g[SL_TP_LN2W] + l * C, g[SL_TP_LN2B] + l * C, d->ln2 + o1,
                           a->residual2 + o1, p[SL_TP_LN2W] + l * C, a->ln2_mean + l * BT, a->ln2_rstd + l * BT,
                           (int)BT, C);
        residual_backward(dres, d->attproj + o1, d->residual2 + o1, BTC);
        matmul_backward(d->atty + o1, g[SL_TP_ATTPROJW] + (size_t)l * C * C, g[SL_TP_ATTPROJB] + l * C,
                        d->attproj + o1, a->atty + o1, p[SL_TP_ATTPROJW] + (size_t)l * C * C, (int)BT, C, C);
        attention_backward(d->qkv + 3 * o1, d->att + (size_t)l * B * NH * T * T, d->atty + o1, a->qkv + 3 * o1, att, B, T,
                           C, NH);
        matmul_backward(d->ln1 + o1, g[SL_TP_QKVW] + (size_t)l * 3 * C * C, g[SL_TP_QKVB] + l * 3 * C,
                        d->qkv + 3 * o1, a->ln1 + o1, p[SL_TP_QKVW] + (size_t)l * 3 * C * C, (int)BT, C, 3 * C);
        layernorm_backward(dres, g[SL_TP_LN1W] + l * C, g[SL_TP_LN1B] + l * C, d->ln1 + o1, res,
                           p[SL_TP_LN1W] + l * C, a->ln1_mean + l * BT, a->ln1_rstd + l * BT, (int)BT, C);
    }
    encoder_backward(g[SL_TP_WTE], g[SL_TP_WPE], d->encoded, inputs, B, T, C);
}

/* ---- losses ---- */

const char *sl_train_objective_name(int obj)
{
    switch (obj) {
    case SL_OBJ_CE: return "ce";
    case SL_OBJ_KL: return "kl";
    case SL_OBJ_TV: return "tv";
    default: return "?";
    }
}

/* Softmax of z (V) into out in double-accumulated float; returns log(sum exp(z - max)) + max. */
static double softmax_row(const float *z, float *out, int V)
{
    float mx = z[0];
    for (int i = 1; i < V; i++)
        if (z[i] > mx) mx = z[i];
    double s = 0;
    for (int i = 0; i < V; i++) {
        float e = expf(z[i] - mx);
        out[i] = e;
        s += e;
    }
    float inv = (float)(1.0 / s);
    for (int i = 0; i < V; i++) out[i] *= inv;
    return log(s) + mx;
}

double sl_train_loss(sl_train_model *m, int objective, const int *targets, const float *teacher_logits, int B,
                     int T, float grad_scale)
{
    int V = m->cfg.vocab_size;
    int N = B * T;
    float *dl = m->grads_mem ? m->grad_acts.logits : NULL;
    float gs = grad_scale / (float)N;
#pragma omp parallel
    {
        float *q = malloc((size_t)V * sizeof(float) * 2);
        float *p = q + V;
#pragma omp for schedule(static)
        for (int n = 0; n < N; n++) {
            const float *z = m->acts.logits + (size_t)n * V;
            double lse = softmax_row(z, q, V);
            double loss = 0;
            float *g = dl ? dl + (size_t)n * V : NULL;
            if (objective == SL_OBJ_CE) {
                int y = targets[n];
                loss = lse - z[y];
                if (g) {
                    for (int i = 0; i < V; i++) g[i] = q[i] * gs;
                    g[y] -= gs;
                }
            } else {
                const float *tz = teacher_logits + (size_t)n * V;
                double tlse = softmax_row(tz, p, V);
                if (objective == SL_OBJ_KL) {
                    /* KL = sum p (log p - log q), log p = tz - tlse, log q = z - lse. */
                    for (int i = 0; i < V; i++)
                        if (p[i] > 0) loss += p[i] * ((tz[i] - tlse) - (z[i] - lse));
                    if (g)
                        for (int i = 0; i < V; i++) g[i] = (q[i] - p[i]) * gs;
                } else {
                    double beta = 0, qs = 0;
                    for (int i = 0; i < V; i++) {
                        if (q[i] < p[i]) {
                            beta += q[i];
                            qs += q[i];
                        } else {
                            beta += p[i];
                        }
                    }
                    loss = 1.0 - beta;
                    if (g)
                        for (int i = 0; i < V; i++)
                            g[i] = q[i] * ((float)qs - (q[i] < p[i] ? 1.0f : 0.0f)) * gs;
                }
            }
            m->acts.losses[n] = (float)loss;
        }
        free(q);
    }
    double s = 0;
    for (int n = 0; n < N; n++) s += m->acts.losses[n];
    return s / N;
}

/* ---- optimiser ---- */

double sl_train_grad_norm(const sl_train_model *m)
{
    double s = 0;
    for (size_t i = 0; i < m->n_params; i++) s += (double)m->grads_mem[i] * m->grads_mem[i];
    return sqrt(s);
}

void sl_train_scale_grads(sl_train_model *m, float s)
{
    float *g = m->grads_mem;
#pragma omp parallel for schedule(static)
    for (size_t i = 0; i < m->n_params; i++) g[i] *= s;
}

void sl_train_hparams_default(sl_train_hparams *h)
{
    memset(h, 0, sizeof *h);
    h->steps = 1000;
    h->batch = 8;
    h->seq = 64;
    h->accum = 1;
    h->lr = 1e-3;
    h->min_lr_frac = 0.1;
    h->warmup = 100;
    h->weight_decay = 0.1;
    h->beta1 = 0.9;
    h->beta2 = 0.95;
    h->eps = 1e-8;
    h->clip = 1.0;
    h->seed = 1;
    h->objective = SL_OBJ_CE;
}

double sl_train_lr(const sl_train_hparams *h, uint64_t step)
{
    if (step < h->warmup) return h->lr * (double)(step + 1) / (double)h->warmup;
    double lo = h->lr * h->min_lr_frac;
    if (h->steps <= h->warmup) return h->lr;
    double u = (double)(step - h->warmup) / (double)(h->steps - h->warmup);
    if (u > 1) u = 1;
    return lo + 0.5 * (h->lr - lo) * (1.0 + cos(M_PI * u));
}

void sl_train_adamw(sl_train_model *m, const sl_train_hparams *h, double lr, uint64_t t)
{
    float b1 = (float)h->beta1, b2 = (float)h->beta2, eps = (float)h->eps;
    float c1 = (float)(1.0 - pow(h->beta1, (double)t)), c2 = (float)(1.0 - pow(h->beta2, (double)t));
    float lrf = (float)lr;
    for (int k = 0; k < SL_TP_N; k++) {
        size_t n = m->param_sizes[k];
        if (!n) continue;
        size_t off = (size_t)(m->params[k] - m->params_mem);
        float *w = m->params[k], *g = m->grads[k], *mm = m->m + off, *vv = m->v + off;
        float wd = sl_train_tensor_decays(k) ? (float)h->weight_decay : 0.0f;
#pragma omp parallel for schedule(static)
        for (size_t i = 0; i < n; i++) sl_adamw_elem(&w[i], g[i], &mm[i], &vv[i], b1, b2, eps, c1, c2, lrf, wd);
    }
}
