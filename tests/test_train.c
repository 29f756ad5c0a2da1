/*
 * test_train.c: the trainer against an independent reference.
 *
 * The reference is a naive double-precision GPT-2 forward written here from FORMAT.md's semantics
 * (per-position loops, separate q/k/v, no shared code with models/train/sl_train.c). Gradients of every
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
#include "sl_half.h"
#include "sl_train.h"
#include "sl_train_io.h"

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

/* ---- threads ---- */

#include <omp.h>

/* Each output element is summed in one fixed order whatever the thread count (sl_train.h), so
 * gradients with 1 and 2 threads are bitwise equal. */
Test(train, thread_count_does_not_change_gradients)
{
    /* Sizes past the 128-row matmul blocks: B*T = 160 rows, 3C = 192 and V = 200 weight rows. */
    sl_train_config cfg = {.vocab_size = 200, .n_layer = 2, .n_head = 4, .d_model = 64, .d_ff = 160,
                           .max_seq_len = 32, .norm_eps = 1e-5f, .tied_embeddings = 1};
    int B = 5, T = 32, inp[160], tgt[160];
    for (int i = 0; i < B * T; i++) inp[i] = (i * 7) % 200, tgt[i] = (i * 11 + 3) % 200;
    float *g[2];
    int saved = omp_get_max_threads();
    for (int k = 0; k < 2; k++) {
        omp_set_num_threads(k + 1);
        sl_train_model *m = sl_train_model_alloc(&cfg, B, T, 1);
        sl_train_init(m, 3);
        sl_train_forward(m, inp, B, T);
        sl_train_zero_grad(m);
        sl_train_loss(m, SL_OBJ_CE, tgt, NULL, B, T, 1.0f);
        sl_train_backward(m, inp, B, T);
        g[k] = malloc(m->n_params * sizeof(float));
        memcpy(g[k], m->grads_mem, m->n_params * sizeof(float));
        if (k == 1) cr_assert(memcmp(g[0], g[1], m->n_params * sizeof(float)) == 0, "gradients depend on threads");
        sl_train_model_free(m);
    }
    omp_set_num_threads(saved);
    free(g[0]);
    free(g[1]);
}

/* ---- optimiser and schedule ---- */

/* Two AdamW steps against the update written out by hand in double: the second step checks the
 * moment recursions and the bias corrections with t = 2. float32 arithmetic: 1e-6 relative. */
Test(train, adamw_two_steps_by_hand)
{
    sl_train_config cfg = tiny_config(1);
    sl_train_model *m = sl_train_model_alloc(&cfg, 1, 4, 1);
    sl_train_hparams h;
    sl_train_hparams_default(&h);
    h.weight_decay = 0.1;
    h.beta1 = 0.9;
    h.beta2 = 0.95;
    h.eps = 1e-8;
    size_t n = m->n_params;
    double *w = malloc(n * sizeof(double)), *mm = calloc(n, sizeof(double)), *vv = calloc(n, sizeof(double));
    for (size_t i = 0; i < n; i++) w[i] = m->params_mem[i] = (float)(0.01 * ((double)(i % 37) - 18));
    double lrs[2] = {1e-2, 3e-3};
    for (int t = 1; t <= 2; t++) {
        for (size_t i = 0; i < n; i++) m->grads_mem[i] = (float)(0.05 * sin(0.3 * (double)i + t));
        sl_train_adamw(m, &h, lrs[t - 1], (uint64_t)t);
        for (int k = 0; k < SL_TP_N; k++) {
            size_t off = (size_t)(m->params[k] - m->params_mem);
            double wd = (k == SL_TP_WTE || k == SL_TP_WPE || k == SL_TP_QKVW || k == SL_TP_ATTPROJW || k == SL_TP_FCW ||
                         k == SL_TP_FCPROJW || k == SL_TP_LMHEAD) ? 0.1 : 0.0;
            for (size_t i = off; i < off + m->param_sizes[k]; i++) {
                double g = m->grads_mem[i];
                mm[i] = 0.9 * mm[i] + 0.1 * g;
                vv[i] = 0.95 * vv[i] + 0.05 * g * g;
                double mhat = mm[i] / (1 - pow(0.9, t)), vhat = vv[i] / (1 - pow(0.95, t));
                w[i] -= lrs[t - 1] * (mhat / (sqrt(vhat) + 1e-8) + wd * w[i]);
            }
        }
        for (size_t i = 0; i < n; i++)
            cr_assert_leq(fabs(m->params_mem[i] - w[i]), 1e-6 * (1 + fabs(w[i])), "step %d param %zu: %.9g vs %.9g", t,
                          i, m->params_mem[i], w[i]);
    }
    /* Decay reaches matrices only: a LayerNorm gain with zero gradient would not move. */
    cr_assert(sl_train_tensor_decays(SL_TP_QKVW) && !sl_train_tensor_decays(SL_TP_LN1W) &&
              !sl_train_tensor_decays(SL_TP_QKVB) && !sl_train_tensor_decays(SL_TP_LNFB));
    free(w), free(mm), free(vv);
    sl_train_model_free(m);
}

/* Warm-up is linear to the peak, the cosine halves the distance at its midpoint and ends at the
 * floor (closed forms, exact up to double rounding). */
Test(train, lr_schedule)
{
    sl_train_hparams h;
    sl_train_hparams_default(&h);
    h.lr = 1e-3, h.min_lr_frac = 0.1, h.warmup = 10, h.steps = 110;
    cr_assert_float_eq(sl_train_lr(&h, 0), 1e-4, 1e-15);
    cr_assert_float_eq(sl_train_lr(&h, 9), 1e-3, 1e-15);
    cr_assert_float_eq(sl_train_lr(&h, 10), 1e-3, 1e-15);
    cr_assert_float_eq(sl_train_lr(&h, 60), 0.55e-3, 1e-15);
    cr_assert_float_eq(sl_train_lr(&h, 110), 1e-4, 1e-15);
    for (uint64_t s = 11; s < 110; s++) cr_assert_lt(sl_train_lr(&h, s), sl_train_lr(&h, s - 1));
}

/* ---- half precision ---- */

Test(train, f16_conversion)
{
    /* Known encodings (IEEE 754 binary16), including ties to even and the subnormal edge. */
    cr_assert_eq(sl_half_f32_to_f16_canonical_nan(1.0f), 0x3c00);
    cr_assert_eq(sl_half_f32_to_f16_canonical_nan(-2.0f), 0xc000);
    cr_assert_eq(sl_half_f32_to_f16_canonical_nan(65504.0f), 0x7bff);
    cr_assert_eq(sl_half_f32_to_f16_canonical_nan(65520.0f), 0x7c00); /* rounds up past the largest finite */
    cr_assert_eq(sl_half_f32_to_f16_canonical_nan(ldexpf(1, -24)), 0x0001);
    cr_assert_eq(sl_half_f32_to_f16_canonical_nan(ldexpf(1, -25)), 0x0000);                /* tie to even: 0 */
    cr_assert_eq(sl_half_f32_to_f16_canonical_nan(ldexpf(3, -25)), 0x0002);                /* tie to even: 2 */
    cr_assert_eq(sl_half_f32_to_f16_canonical_nan(1.0f + ldexpf(1, -11)), 0x3c00);         /* tie to even */
    cr_assert_eq(sl_half_f32_to_f16_canonical_nan(1.0f + ldexpf(3, -11)), 0x3c02);         /* tie to even */
    cr_assert_eq(sl_half_f32_to_f16_canonical_nan(ldexpf(1023, -24) + ldexpf(1, -25)), 0x0400); /* carry into normal */
    /* Every finite half survives half -> float -> half. */
    for (uint32_t hb = 0; hb < 65536; hb++) {
        if ((hb & 0x7c00) == 0x7c00) continue;
        cr_assert_eq(sl_half_f32_to_f16_canonical_nan(sl_half_f16_to_f32_keep_nan((uint16_t)hb)), hb, "half 0x%04x", hb);
    }
}

/* ---- files ---- */

static char tmpdir[64];
static void mk_tmpdir(void)
{
    snprintf(tmpdir, sizeof tmpdir, "/tmp/sl_train_test_XXXXXX");
    cr_assert_not_null(mkdtemp(tmpdir));
}
static void rm_tmpdir(void)
{
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
    cr_assert_eq(system(cmd), 0);
}
static char *tmp_path(const char *name)
{
    static char bufs[64][128];
    static int k;
    char *b = bufs[k++ % 64];
    snprintf(b, 128, "%s/%s", tmpdir, name);
    return b;
}

Test(train, tokfile_roundtrip_and_bad_files, .init = mk_tmpdir, .fini = rm_tmpdir)
{
    int32_t ids[100];
    for (int i = 0; i < 100; i++) ids[i] = (i * 37) % 300;
    for (int bpi = 2; bpi <= 4; bpi += 2) {
        cr_assert_eq(sl_train_tokens_write(tmp_path("a.tok"), 300, bpi, ids, 100), 0);
        sl_train_tokens *tf;
        cr_assert_eq(sl_train_tokens_read(tmp_path("a.tok"), &tf), 0, "%s", sl_errmsg());
        cr_assert_eq(tf->vocab_size, 300);
        cr_assert_eq(tf->n_tokens, 100);
        cr_assert(memcmp(tf->ids, ids, sizeof ids) == 0);
        sl_train_tokens_free(tf);
    }
    sl_train_tokens *tf = NULL;
    /* Empty file, no tokens, an id beyond the vocabulary, a truncated body, wrong magic. */
    FILE *f = fopen(tmp_path("empty.tok"), "wb");
    fclose(f);
    cr_assert_eq(sl_train_tokens_read(tmp_path("empty.tok"), &tf), SL_EINPUT);
    cr_assert(strstr(sl_errmsg(), "empty") != NULL, "%s", sl_errmsg());
    cr_assert_eq(sl_train_tokens_write(tmp_path("zero.tok"), 300, 2, ids, 0), 0);
    cr_assert_eq(sl_train_tokens_read(tmp_path("zero.tok"), &tf), SL_EINPUT);
    cr_assert_eq(sl_train_tokens_write(tmp_path("big.tok"), 200, 2, ids, 100), 0);
    cr_assert_eq(sl_train_tokens_read(tmp_path("big.tok"), &tf), SL_EINPUT);
    cr_assert(strstr(sl_errmsg(), ">= vocab_size 200") != NULL, "%s", sl_errmsg());
    cr_assert_eq(truncate(tmp_path("a.tok"), 24 + 4 * 50), 0);
    cr_assert_eq(sl_train_tokens_read(tmp_path("a.tok"), &tf), SL_EINPUT);
    f = fopen(tmp_path("junk.tok"), "wb");
    fputs("this is not a token file at all", f);
    fclose(f);
    cr_assert_eq(sl_train_tokens_read(tmp_path("junk.tok"), &tf), SL_EINPUT);
    cr_assert_null(tf);
}

/* Export then import gives the same parameters: bitwise for f32, the f16 rounding of each for f16. */
Test(train, export_import_roundtrip, .init = mk_tmpdir, .fini = rm_tmpdir)
{
    for (int tied = 0; tied <= 1; tied++) {
        sl_train_config cfg = tiny_config(tied);
        sl_train_model *m = sl_train_model_alloc(&cfg, 1, 8, 0), *r = NULL;
        randomize(m, 77);
        char *tok = NULL;
        cr_assert_eq(sl_train_export(m, tmp_path("m.safetensors"), 0, "{\"seed\":1}", "{\"type\":\"byte-bpe\"}"), 0);
        cr_assert_eq(sl_train_import(tmp_path("m.safetensors"), 1, 8, &r, &tok), 0, "%s", sl_errmsg());
        cr_assert_eq(r->n_params, m->n_params);
        cr_assert(memcmp(r->params_mem, m->params_mem, m->n_params * sizeof(float)) == 0);
        cr_assert_str_eq(tok, "{\"type\":\"byte-bpe\"}");
        free(tok);
        sl_train_model_free(r);
        cr_assert_eq(sl_train_export(m, tmp_path("h.safetensors"), 1, NULL, NULL), 0);
        cr_assert_eq(sl_train_import(tmp_path("h.safetensors"), 1, 8, &r, NULL), 0, "%s", sl_errmsg());
        for (size_t i = 0; i < m->n_params; i++)
            cr_assert_eq(r->params_mem[i], sl_half_f16_to_f32_keep_nan(sl_half_f32_to_f16_canonical_nan(m->params_mem[i])));
        sl_train_model_free(r);
        /* A truncated file is refused with SL_EINPUT. */
        cr_assert_eq(truncate(tmp_path("h.safetensors"), 1000), 0);
        cr_assert_eq(sl_train_import(tmp_path("h.safetensors"), 1, 8, &r, NULL), SL_EINPUT);
        sl_train_model_free(m);
    }
}

/* ---- whole runs ---- */

static void write_repetitive_corpus(const char *train, const char *valid)
{
    /* A fixed 23-token pattern over V = 64, repeated: a model that learns it predicts every token. */
    int32_t pat[23], ids[23 * 200];
    gsl_rng *r = sl_rng_alloc(1, SL_STREAM_DATA, 0);
    for (int i = 0; i < 23; i++) pat[i] = (int32_t)(sl_rng_uniform53(r) * 64);
    gsl_rng_free(r);
    for (int i = 0; i < 23 * 200; i++) ids[i] = pat[i % 23];
    cr_assert_eq(sl_train_tokens_write(train, 64, 2, ids, 23 * 200), 0);
    cr_assert_eq(sl_train_tokens_write(valid, 64, 4, ids + 5, 23 * 20), 0);
}

static sl_train_run_opts tiny_run(void)
{
    static char cfgjson[] = "{\"n_layer\":2,\"n_head\":2,\"d_model\":32,\"d_ff\":64,\"max_seq_len\":16,\"vocab_size\":64}";
    sl_train_run_opts o;
    memset(&o, 0, sizeof o);
    sl_train_hparams_default(&o.h);
    o.train_path = tmp_path("train.tok");
    o.valid_path = tmp_path("valid.tok");
    o.config_json = cfgjson;
    o.out_path = tmp_path("out.safetensors");
    o.h.batch = 8, o.h.seq = 16, o.h.lr = 3e-3, o.h.warmup = 10, o.h.seed = 5;
    o.eval_batches = 2;
    return o;
}

static char *slurp(const char *path, size_t *n)
{
    FILE *f = fopen(path, "rb");
    cr_assert_not_null(f, "%s", path);
    fseek(f, 0, SEEK_END);
    *n = (size_t)ftell(f);
    fseek(f, 0, SEEK_SET);
    char *b = malloc(*n + 1);
    cr_assert_eq(fread(b, 1, *n, f), *n);
    fclose(f);
    b[*n] = 0;
    return b;
}

/* The tensor bytes of a safetensors file (the header holds the wall time, which differs). */
static char *tensor_bytes(const char *path, size_t *n)
{
    size_t total;
    char *b = slurp(path, &total);
    uint64_t hl = 0;
    for (int i = 0; i < 8; i++) hl |= (uint64_t)(unsigned char)b[i] << (8 * i);
    *n = total - 8 - hl;
    char *d = malloc(*n);
    memcpy(d, b + 8 + hl, *n);
    free(b);
    return d;
}

/* Cross-entropy from ln 64 = 4.16 down below 1.0 within 200 steps on the repetitive corpus (it
 * reaches ~0.05; a broken gradient or optimiser stalls near 3). */
Test(train, loss_falls_on_repetitive_corpus, .init = mk_tmpdir, .fini = rm_tmpdir)
{
    write_repetitive_corpus(tmp_path("train.tok"), tmp_path("valid.tok"));
    sl_train_run_opts o = tiny_run();
    o.h.steps = 200;
    o.eval_every = 200;
    o.log_path = tmp_path("log.csv");
    cr_assert_eq(sl_train_run(&o), 0, "%s", sl_errmsg());
    size_t n;
    char *log = slurp(o.log_path, &n);
    const char *row = strchr(log, '\n') + 1;
    unsigned long long step;
    double tokens, lr, train_loss, gn, val_ce;
    cr_assert_eq(sscanf(row, "%llu,%lf,%lf,%lf,%lf,%lf", &step, &tokens, &lr, &train_loss, &gn, &val_ce), 6, "%s", row);
    cr_assert_eq(step, 200);
    cr_assert_lt(val_ce, 1.0, "validation loss %g after 200 steps", val_ce);
    free(log);
    /* The untrained model starts near ln 64 (random init gives nearly uniform predictions). */
    sl_train_config cfg;
    cr_assert_eq(sl_train_config_parse(o.config_json, &cfg), 0);
    sl_train_model *m = sl_train_model_alloc(&cfg, 8, 16, 1);
    sl_train_tokens *tf;
    cr_assert_eq(sl_train_tokens_read(o.train_path, &tf), 0);
    int inp[128], tgt[128];
    gsl_rng *r = sl_rng_alloc(1, SL_STREAM_DATA, 0);
    sl_train_tokens_batch(tf, 5, 0, 0, 1, 8, 16, inp, tgt, r);
    sl_train_init(m, 5);
    sl_train_forward(m, inp, 8, 16);
    double l0 = sl_train_loss(m, SL_OBJ_CE, tgt, NULL, 8, 16, 1.0f);
    cr_assert(l0 > 4.0 && l0 < 4.3, "initial loss %g, expected ~ln 64 = 4.16", l0);
    gsl_rng_free(r);
    sl_train_tokens_free(tf);
    sl_train_model_free(m);
}

/* 2N steps in one go equal N steps, a checkpoint, and N more steps in a fresh run: same weights bit
 * for bit and the same log (wall-clock columns aside). */
static void check_resume(int objective)
{
    write_repetitive_corpus(tmp_path("train.tok"), tmp_path("valid.tok"));
    sl_train_run_opts o = tiny_run();
    o.h.steps = 2 * 12;
    o.eval_every = 5; /* rows at 5, 10, 15, 20, 24: the stop at 12 falls between two rows */
    o.ckpt_every = 100;
    o.h.accum = 2;
    if (objective != SL_OBJ_CE) {
        /* A teacher: the tiny model after a few steps of plain training. */
        sl_train_run_opts t = tiny_run();
        t.h.steps = 30, t.eval_every = 30, t.out_path = tmp_path("teacher.safetensors");
        cr_assert_eq(sl_train_run(&t), 0, "%s", sl_errmsg());
        o.teacher_path = t.out_path;
        o.h.objective = objective;
    }
    o.log_path = tmp_path("a.csv");
    o.out_path = tmp_path("a.safetensors");
    cr_assert_eq(sl_train_run(&o), 0, "%s", sl_errmsg());

    o.log_path = tmp_path("b.csv");
    o.out_path = tmp_path("b.safetensors");
    o.ckpt_dir = tmp_path("ckpt");
    o.stop_at = 12;
    cr_assert_eq(sl_train_run(&o), 0, "%s", sl_errmsg());
    cr_assert_eq(access(o.out_path, F_OK), -1, "a stopped run must not export");
    o.stop_at = 0;
    cr_assert_eq(sl_train_run(&o), 0, "%s", sl_errmsg());

    size_t na, nb;
    char *a = tensor_bytes(tmp_path("a.safetensors"), &na), *b = tensor_bytes(tmp_path("b.safetensors"), &nb);
    cr_assert_eq(na, nb);
    cr_assert(memcmp(a, b, na) == 0, "resumed weights differ from the uninterrupted run");
    free(a), free(b);
    char *la = slurp(tmp_path("a.csv"), &na), *lb = slurp(tmp_path("b.csv"), &nb);
    /* Drop the last two columns (wall_s, tokens_per_s) of each line before comparing. */
    char *logs[2] = {la, lb};
    for (int k = 0; k < 2; k++) {
        char *w = logs[k], *r = logs[k];
        while (*r) {
            char *eol = strchr(r, '\n');
            char *c2 = eol;
            for (int i = 0; i < 2; i++) do c2--; while (*c2 != ',');
            memmove(w, r, (size_t)(c2 - r));
            w += c2 - r;
            *w++ = '\n';
            r = eol + 1;
        }
        *w = 0;
    }
    cr_assert_str_eq(la, lb);
    free(la), free(lb);
}

Test(train, resume_equals_uninterrupted_ce, .init = mk_tmpdir, .fini = rm_tmpdir) { check_resume(SL_OBJ_CE); }
Test(train, resume_equals_uninterrupted_distill_tv, .init = mk_tmpdir, .fini = rm_tmpdir) { check_resume(SL_OBJ_TV); }

/* A corrupt or truncated checkpoint, or one from a run with other settings, is refused (SL_EINPUT)
 * and left in place. */
Test(train, bad_checkpoints_are_refused, .init = mk_tmpdir, .fini = rm_tmpdir)
{
    write_repetitive_corpus(tmp_path("train.tok"), tmp_path("valid.tok"));
    sl_train_run_opts o = tiny_run();
    o.h.steps = 6, o.eval_every = 3, o.ckpt_dir = tmp_path("ckpt"), o.stop_at = 3;
    cr_assert_eq(sl_train_run(&o), 0, "%s", sl_errmsg());
    const char *ck = tmp_path("ckpt/checkpoint.bin");
    size_t n;
    char *good = slurp(ck, &n);

    o.h.lr = 1e-3;
    cr_assert_eq(sl_train_run(&o), SL_EINPUT);
    cr_assert(strstr(sl_errmsg(), "lr") != NULL, "%s", sl_errmsg());
    o.h.lr = 3e-3;

    char *bad = malloc(n);
    memcpy(bad, good, n);
    bad[n / 2] ^= 1;
    FILE *f = fopen(ck, "wb");
    fwrite(bad, 1, n, f);
    fclose(f);
    cr_assert_eq(sl_train_run(&o), SL_EINPUT);
    cr_assert(strstr(sl_errmsg(), "corrupt") != NULL, "%s", sl_errmsg());
    cr_assert_eq(truncate(ck, (off_t)(n - 100)), 0);
    cr_assert_eq(sl_train_run(&o), SL_EINPUT);
    size_t n2;
    char *after = slurp(ck, &n2);
    cr_assert_eq(n2, n - 100, "a refused checkpoint must be left as it was");
    free(good), free(bad), free(after);
}

/* Gradient accumulation: two micro-batches of B rows with grad_scale 1/2 give the gradient of the
 * one batch of 2B rows that holds both (the loss is a mean over positions). float32 sums in a
 * different order: 1e-6 of the largest gradient. */
Test(train, accumulation_equals_one_big_batch)
{
    sl_train_config cfg = tiny_config(1);
    int B = 2, T = 6, inp[24], tgt[24];
    for (int i = 0; i < 2 * B * T; i++) inp[i] = (i * 5 + 1) % 24, tgt[i] = (i * 7 + 2) % 24;
    sl_train_model *big = sl_train_model_alloc(&cfg, 2 * B, T, 1), *acc = sl_train_model_alloc(&cfg, B, T, 1);
    randomize(big, 21);
    memcpy(acc->params_mem, big->params_mem, big->n_params * sizeof(float));
    sl_train_zero_grad(big);
    sl_train_forward(big, inp, 2 * B, T);
    sl_train_loss(big, SL_OBJ_CE, tgt, NULL, 2 * B, T, 1.0f);
    sl_train_backward(big, inp, 2 * B, T);
    sl_train_zero_grad(acc);
    for (int k = 0; k < 2; k++) {
        sl_train_forward(acc, inp + k * B * T, B, T);
        sl_train_loss(acc, SL_OBJ_CE, tgt + k * B * T, NULL, B, T, 0.5f);
        sl_train_backward(acc, inp + k * B * T, B, T);
    }
    double gmax = 0;
    for (size_t i = 0; i < big->n_params; i++) gmax = fmax(gmax, fabs(big->grads_mem[i]));
    for (size_t i = 0; i < big->n_params; i++)
        cr_assert_leq(fabs(big->grads_mem[i] - acc->grads_mem[i]), 1e-6 * gmax, "param %zu: %g vs %g", i,
                      big->grads_mem[i], acc->grads_mem[i]);
    sl_train_model_free(big);
    sl_train_model_free(acc);
}
