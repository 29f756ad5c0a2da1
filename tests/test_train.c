/*
 * test_train.c: the trainer against an independent reference.
 *
 * The reference is a naive double-precision GPT-2 forward written here from FORMAT.md's semantics
 * (per-position loops, separate q/k/v, no shared code with models/sl_train.c). Gradients of every
 * parameter are checked against central finite differences of that double forward, so the
 * reference itself carries no float32 noise; the forward logits are compared too.
 */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sl_common.h"
#include "sl_train.h"

/* ---- the double-precision reference ---- */

typedef struct {
    const sl_train_config *c;
    const double *p[SL_TP_N];
} ref_model;

static void ref_bind(ref_model *r, const sl_train_model *m, const double *params)
{
    r->c = &m->cfg;
    for (int k = 0; k < SL_TP_N; k++)
        r->p[k] = m->param_sizes[k] ? params + (m->params[k] - m->params_mem) : NULL;
}

static void ref_layernorm(double *out, const double *x, const double *w, const double *b, int C, double eps)
{
    double mu = 0, var = 0;
    for (int i = 0; i < C; i++) mu += x[i];
    mu /= C;
    for (int i = 0; i < C; i++) var += (x[i] - mu) * (x[i] - mu);
    var /= C;
    for (int i = 0; i < C; i++) out[i] = (x[i] - mu) / sqrt(var + eps) * w[i] + b[i];
}

/* out (OC) = W (OC, IC) · x + b */
static void ref_linear(double *out, const double *x, const double *W, const double *b, int IC, int OC)
{
    for (int o = 0; o < OC; o++) {
        double s = b ? b[o] : 0;
        for (int i = 0; i < IC; i++) s += W[(size_t)o * IC + i] * x[i];
        out[o] = s;
    }
}

static double ref_gelu(double x) { return 0.5 * x * (1 + tanh(sqrt(2 / M_PI) * (x + 0.044715 * x * x * x))); }

/* Mean loss over B*T positions; logits_out (B, T, V) if not NULL. */
static double ref_loss(const ref_model *r, const int *inp, const int *tgt, const float *tlogits, int obj, int B,
                       int T, double *logits_out)
{
    const sl_train_config *c = r->c;
    int C = c->d_model, L = c->n_layer, NH = c->n_head, F = c->d_ff, V = c->vocab_size, hs = C / NH;
    double *x = calloc((size_t)T * C, sizeof(double)), *h = calloc(C, sizeof(double));
    double *q = calloc((size_t)T * C, sizeof(double)), *k = calloc((size_t)T * C, sizeof(double));
    double *v = calloc((size_t)T * C, sizeof(double)), *y = calloc(C, sizeof(double));
    double *o = calloc(C, sizeof(double)), *u = calloc(F, sizeof(double)), *z = calloc(V, sizeof(double));
    double *a = calloc(T, sizeof(double));
    double total = 0;
    for (int b = 0; b < B; b++) {
        for (int t = 0; t < T; t++)
            for (int i = 0; i < C; i++)
                x[t * C + i] = r->p[SL_TP_WTE][(size_t)inp[b * T + t] * C + i] + r->p[SL_TP_WPE][(size_t)t * C + i];
        for (int l = 0; l < L; l++) {
            const double *Wqkv = r->p[SL_TP_QKVW] + (size_t)l * 3 * C * C, *bqkv = r->p[SL_TP_QKVB] + l * 3 * C;
            for (int t = 0; t < T; t++) {
                ref_layernorm(h, x + t * C, r->p[SL_TP_LN1W] + l * C, r->p[SL_TP_LN1B] + l * C, C, c->norm_eps);
                ref_linear(q + t * C, h, Wqkv, bqkv, C, C);
                ref_linear(k + t * C, h, Wqkv + (size_t)C * C, bqkv + C, C, C);
                ref_linear(v + t * C, h, Wqkv + (size_t)2 * C * C, bqkv + 2 * C, C, C);
            }
            for (int t = 0; t < T; t++) {
                for (int hd = 0; hd < NH; hd++) {
                    double mx = -INFINITY, s = 0;
                    for (int t2 = 0; t2 <= t; t2++) {
                        double d = 0;
                        for (int i = 0; i < hs; i++) d += q[t * C + hd * hs + i] * k[t2 * C + hd * hs + i];
                        a[t2] = d / sqrt((double)hs);
                        if (a[t2] > mx) mx = a[t2];
                    }
                    for (int t2 = 0; t2 <= t; t2++) s += (a[t2] = exp(a[t2] - mx));
                    for (int i = 0; i < hs; i++) {
                        double acc = 0;
                        for (int t2 = 0; t2 <= t; t2++) acc += a[t2] / s * v[t2 * C + hd * hs + i];
                        y[hd * hs + i] = acc;
                    }
                }
                /* q row t is not needed after position t, so it holds the attention output until
                 * every position is done (the residual update must not change the layer's input). */
                ref_linear(q + t * C, y, r->p[SL_TP_ATTPROJW] + (size_t)l * C * C, r->p[SL_TP_ATTPROJB] + l * C, C, C);
            }
            for (int t = 0; t < T; t++)
                for (int i = 0; i < C; i++) x[t * C + i] += q[t * C + i];
            for (int t = 0; t < T; t++) {
                ref_layernorm(h, x + t * C, r->p[SL_TP_LN2W] + l * C, r->p[SL_TP_LN2B] + l * C, C, c->norm_eps);
                ref_linear(u, h, r->p[SL_TP_FCW] + (size_t)l * F * C, r->p[SL_TP_FCB] + (size_t)l * F, C, F);
                for (int i = 0; i < F; i++) u[i] = ref_gelu(u[i]);
                ref_linear(o, u, r->p[SL_TP_FCPROJW] + (size_t)l * C * F, r->p[SL_TP_FCPROJB] + l * C, F, C);
                for (int i = 0; i < C; i++) x[t * C + i] += o[i];
            }
        }
        for (int t = 0; t < T; t++) {
            ref_layernorm(h, x + t * C, r->p[SL_TP_LNFW], r->p[SL_TP_LNFB], C, c->norm_eps);
            ref_linear(z, h, c->tied_embeddings ? r->p[SL_TP_WTE] : r->p[SL_TP_LMHEAD], NULL, C, V);
            if (logits_out) memcpy(logits_out + ((size_t)b * T + t) * V, z, V * sizeof(double));
            double mx = -INFINITY, s = 0;
            for (int i = 0; i < V; i++) mx = fmax(mx, z[i]);
            for (int i = 0; i < V; i++) s += exp(z[i] - mx);
            double lse = mx + log(s);
            if (obj == SL_OBJ_CE) {
                total += lse - z[tgt[b * T + t]];
            } else {
                const float *tz = tlogits + ((size_t)b * T + t) * V;
                double tm = -INFINITY, ts = 0;
                for (int i = 0; i < V; i++) tm = fmax(tm, tz[i]);
                for (int i = 0; i < V; i++) ts += exp(tz[i] - tm);
                double tlse = tm + log(ts), kl = 0, beta = 0;
                for (int i = 0; i < V; i++) {
                    double lp = tz[i] - tlse, lq = z[i] - lse;
                    kl += exp(lp) * (lp - lq);
                    beta += fmin(exp(lp), exp(lq));
                }
                total += obj == SL_OBJ_KL ? kl : 1 - beta;
            }
        }
    }
    free(x), free(h), free(q), free(k), free(v), free(y), free(o), free(u), free(z), free(a);
    return total / (B * T);
}

/* ---- fixtures ---- */

static sl_train_config tiny_config(int tied)
{
    /* C = 20 and F = 36 are not multiples of the kernels' 16-column blocks, to exercise the tails. */
    sl_train_config c = {.vocab_size = 24, .n_layer = 2, .n_head = 2, .d_model = 20, .d_ff = 36,
                         .max_seq_len = 8, .norm_eps = 1e-5f, .tied_embeddings = tied};
    return c;
}

/* Random parameters far from the GPT-2 init, so every gradient is sizeable. */
static void randomize(sl_train_model *m, uint64_t seed)
{
    gsl_rng *r = sl_rng_alloc(seed, SL_STREAM_DATA, 999);
    for (size_t i = 0; i < m->n_params; i++) m->params_mem[i] = (float)(0.6 * (sl_rng_uniform53(r) - 0.5));
    for (int k = 0; k < SL_TP_N; k++) {
        if (k != SL_TP_LN1W && k != SL_TP_LN2W && k != SL_TP_LNFW) continue;
        for (size_t i = 0; i < m->param_sizes[k]; i++) m->params[k][i] += 1.0f;
    }
    gsl_rng_free(r);
}

static const char *tensor_names[SL_TP_N] = {"wte", "wpe", "ln1w", "ln1b", "qkvw", "qkvb", "attprojw", "attprojb",
                                             "ln2w", "ln2b", "fcw", "fcb", "fcprojw", "fcprojb", "lnfw", "lnfb",
                                             "lm_head"};

/* Checks every parameter's gradient of objective obj against central differences of the double
 * reference. */
static void check_gradients(int tied, int obj, double fd_h)
{
    sl_train_config cfg = tiny_config(tied);
    int B = 2, T = 6, V = cfg.vocab_size;
    sl_train_model *m = sl_train_model_alloc(&cfg, B, T, 1);
    cr_assert_not_null(m, "%s", sl_errmsg());
    randomize(m, 11 + tied + 2 * obj);
    int inp[12], tgt[12];
    float tl[12 * 24];
    gsl_rng *r = sl_rng_alloc(5 + (uint64_t)obj, SL_STREAM_DATA, 0);
    for (int i = 0; i < B * T; i++) {
        inp[i] = (int)(sl_rng_uniform53(r) * V);
        tgt[i] = (int)(sl_rng_uniform53(r) * V);
    }
    for (int i = 0; i < B * T * V; i++) tl[i] = (float)(4.0 * (sl_rng_uniform53(r) - 0.5));
    gsl_rng_free(r);

    sl_train_forward(m, inp, B, T);
    sl_train_zero_grad(m);
    double loss = sl_train_loss(m, obj, tgt, tl, B, T, 1.0f);
    sl_train_backward(m, inp, B, T);

    double *pd = malloc(m->n_params * sizeof(double));
    for (size_t i = 0; i < m->n_params; i++) pd[i] = m->params_mem[i];
    ref_model rm;
    ref_bind(&rm, m, pd);
    double *ref_logits = malloc((size_t)B * T * V * sizeof(double));
    double ref = ref_loss(&rm, inp, tgt, tl, obj, B, T, ref_logits);
    /* Forward: float32 vs double over ~100-term sums of O(1) values: 1e-4 absolute is ~30x the error
     * seen; the loss is a mean of O(1) terms. */
    double max_dlogit = 0;
    for (int i = 0; i < B * T * V; i++) max_dlogit = fmax(max_dlogit, fabs(m->acts.logits[i] - ref_logits[i]));
    cr_assert_leq(max_dlogit, 1e-4, "logits differ from the double reference by %g", max_dlogit);
    cr_assert_leq(fabs(loss - ref), 1e-5, "loss %.9g vs reference %.9g", loss, ref);
    if (obj == SL_OBJ_TV) {
        /* The TV subgradient is exact away from p(x) = q(x); the step must not cross a tie. A step
         * of h in one parameter moves q by about h |dq/dw| < 10 h here, so a gap of 100 h is safe. */
        double min_gap = INFINITY;
        for (int n = 0; n < B * T; n++) {
            const double *z = ref_logits + (size_t)n * V;
            const float *tz = tl + (size_t)n * V;
            double zs = 0, ts = 0;
            for (int i = 0; i < V; i++) zs += exp(z[i]), ts += exp(tz[i]);
            for (int i = 0; i < V; i++) min_gap = fmin(min_gap, fabs(exp(z[i]) / zs - exp(tz[i]) / ts));
        }
        cr_assert_gt(min_gap, 1e2 * fd_h, "a p/q tie (gap %g) is too close for the finite difference", min_gap);
    }
    free(ref_logits);

    int checked = 0;
    for (int k = 0; k < SL_TP_N; k++) {
        size_t n = m->param_sizes[k];
        if (!n) continue;
        size_t off = (size_t)(m->params[k] - m->params_mem);
        double *gref = malloc(n * sizeof(double)), gmax = 0;
        for (size_t i = 0; i < n; i++) {
            double w = pd[off + i];
            pd[off + i] = w + fd_h;
            double lp = ref_loss(&rm, inp, tgt, tl, obj, B, T, NULL);
            pd[off + i] = w - fd_h;
            double lm = ref_loss(&rm, inp, tgt, tl, obj, B, T, NULL);
            pd[off + i] = w;
            gref[i] = (lp - lm) / (2 * fd_h);
            gmax = fmax(gmax, fabs(gref[i]));
        }
        /* float32 gradients against an essentially exact reference (double, O(h^2) = 1e-10 truncation):
         * each entry within 1e-3 of the tensor's largest gradient plus 1e-2 relative. Measured errors
         * are ~1e-6 relative; a wrong formula gives O(1) errors. */
        for (size_t i = 0; i < n; i++) {
            double g = m->grads[k][i];
            double tol = 1e-3 * gmax + 1e-2 * fabs(gref[i]);
            cr_assert_leq(fabs(g - gref[i]), tol, "%s %s[%zu]: analytic %.8g vs finite difference %.8g (tol %.3g)",
                          sl_train_objective_name(obj), tensor_names[k], i, g, gref[i], tol);
            checked++;
        }
        /* Every tensor must carry signal, or the check above is vacuous (unused pos_emb rows excepted). */
        cr_assert_gt(gmax, 1e-4, "%s gradient is ~0 (%g)", tensor_names[k], gmax);
        free(gref);
    }
    cr_assert_eq((size_t)checked, m->n_params);
    free(pd);
    sl_train_model_free(m);
}

Test(train, gradients_ce_tied) { check_gradients(1, SL_OBJ_CE, 1e-5); }
Test(train, gradients_ce_untied) { check_gradients(0, SL_OBJ_CE, 1e-5); }
Test(train, gradients_kl) { check_gradients(1, SL_OBJ_KL, 1e-5); }
Test(train, gradients_tv) { check_gradients(1, SL_OBJ_TV, 1e-7); }
