/*
 * test_infer_gpu.c: the inference GPU backend's code (models/sl_infer_gpu.c, compiled as its CPU
 * emulation "cuda-emu") against the CPU engine (sl_model.c) and against the PyTorch reference
 * logits of tests/ref/: a prompt, then blocks of n = 1..6 tokens with truncation as speculative
 * decoding does it, on gpt2 and llama in f32 and f16, and on odd shapes (sizes not multiples of
 * 8, untied unembedding, one kv head, bf16). Also: a token's logits do not depend on the block it
 * is scored in (the same bits), and unknown or missing devices are input errors.
 */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sl_common.h"
#include "sl_infer_gpu.h"
#include "sl_model.h"
#include "sl_st.h"

static const char *FIXTURES[] = {"gpt2_f32", "gpt2_f16", "llama_f32", "llama_f16"};

static const char *fixture(const char *name, const char *suffix)
{
    static char buf[4][256];
    static int k = 0;
    char *p = buf[k++ % 4];
    snprintf(p, 256, "tests/ref/%s%s.safetensors", name, suffix);
    return p;
}

/* Writes a model of random weights (sl_model_init_write) from a JSON config to a per-process path
 * named by tag (in buf, 256 bytes). */
static const char *random_model(char *buf, const char *tag, sl_arch arch, const char *cfg_json, uint64_t seed, sl_dtype dt,
                                double init_std)
{
    sl_model_config cfg;
    cr_assert_eq(sl_model_config_parse(cfg_json, arch, "test", &cfg), SL_OK, "%s", sl_errmsg());
    snprintf(buf, 256, "/tmp/sl_test_infer_gpu_%s_%ld.safetensors", tag, (long)getpid());
    cr_assert_eq(sl_model_init_write(buf, arch, &cfg, seed, dt, init_std, NULL), SL_OK);
    return buf;
}

/* max |a - b| / max(1, max |b|) over n values: the logits are O(1..10), so this is the error
 * relative to the row's scale. */
static double rel_diff(const float *a, const float *b, size_t n)
{
    double m = 0, s = 1;
    for (size_t i = 0; i < n; i++) {
        m = fmax(m, fabs((double)a[i] - b[i]));
        s = fmax(s, fabs((double)b[i]));
    }
    return m / s;
}

/* The bound against the CPU engine. Both compute in float32 with the same formulas; they differ in
 * the order of every sum (the CPU's 8-lane vectors vs 32 lanes of 8-element chunks and a pairwise
 * tree), in float instead of double for the softmax denominator, and in expf (glibc vs the
 * CPU engine's Cephes vector exp, ~2 ulp). Each product row sums d_model..d_ff = 64..128 terms:
 * a relative error of a few 1e-7 per layer, ~1e-6 after two layers and the unembedding; 2e-5
 * (f32) leaves a margin of 10x. f16 models store the same weights rounded (exactly the same
 * values on both sides), so the bound is the same. A wrong index or formula is off by O(1). */
#define BOUND 2e-5

typedef struct {
    sl_model *cpu, *gpu;
    sl_model_ctx *cc, *gc;
    size_t V;
    float *a, *b;
    double worst;
} pair;

static void pair_open(pair *p, const char *path)
{
    memset(p, 0, sizeof *p);
    cr_assert_eq(sl_model_open(path, &p->cpu), SL_OK, "%s", sl_errmsg());
    cr_assert_eq(sl_model_open(path, &p->gpu), SL_OK, "%s", sl_errmsg());
    cr_assert_eq(sl_model_set_device(p->gpu, "cuda-emu"), SL_OK, "%s", sl_errmsg());
    cr_assert_str_eq(sl_model_device(p->gpu), "cuda-emu");
    const size_t L = p->cpu->cfg.max_seq_len;
    cr_assert_eq(sl_model_ctx_alloc(p->cpu, L, &p->cc), SL_OK);
    cr_assert_eq(sl_model_ctx_alloc(p->gpu, L, &p->gc), SL_OK);
    cr_assert(p->gc->gpu);
    p->V = p->cpu->cfg.vocab_size;
    p->a = malloc(SL_INFER_GPU_NMAX * 2 * p->V * sizeof(float));
    p->b = malloc(SL_INFER_GPU_NMAX * 2 * p->V * sizeof(float));
}

static void pair_close(pair *p)
{
    free(p->a), free(p->b);
    sl_model_ctx_free(p->cc), sl_model_ctx_free(p->gc);
    sl_model_close(p->cpu), sl_model_close(p->gpu);
}

/* Both contexts take the same n tokens; the logits of the last n_rows must agree within BOUND. */
static void pair_step(pair *p, const int32_t *tok, size_t n, size_t n_rows, const char *what)
{
    cr_assert_eq(sl_model_forward_last(p->cc, tok, n, n_rows, p->a), SL_OK, "%s", sl_errmsg());
    cr_assert_eq(sl_model_forward_last(p->gc, tok, n, n_rows, p->b), SL_OK, "%s", sl_errmsg());
    cr_assert_eq(p->cc->len, p->gc->len);
    for (size_t r = 0; r < n_rows; r++) {
        double d = rel_diff(p->b + r * p->V, p->a + r * p->V, p->V);
        p->worst = fmax(p->worst, d);
        cr_assert_leq(d, BOUND, "%s: n=%zu row %zu at len %zu: relative difference %g", what, n, r, p->cc->len, d);
    }
}

/* A prompt of 7 tokens (one call), then blocks of n = 1..6 of which k = n / 2 are kept (truncate
 * as a rejection does), twice over, then rows-only calls (the sampler's path). */
static double check_against_cpu(const char *path)
{
    pair p;
    pair_open(&p, path);
    const size_t V = p.V;
    int32_t tok[32];
    uint64_t s = 12345;
    for (size_t i = 0; i < 32; i++) {
        s = s * 6364136223846793005ULL + 1442695040888963407ULL;
        tok[i] = (int32_t)((s >> 33) % V);
    }
    pair_step(&p, tok, 7, 7, path);
    for (int round = 0; round < 2; round++)
        for (size_t n = 1; n <= 6; n++) {
            pair_step(&p, tok + n + round, n, n, path);
            size_t keep = p.cc->len - n + n / 2;
            cr_assert_eq(sl_model_truncate(p.cc, keep), SL_OK);
            cr_assert_eq(sl_model_truncate(p.gc, keep), SL_OK);
        }
    cr_assert_eq(sl_model_truncate(p.cc, 20), SL_OK); /* 25 now; the calls below add 9 */
    cr_assert_eq(sl_model_truncate(p.gc, 20), SL_OK);
    pair_step(&p, tok + 3, 5, 2, path);
    pair_step(&p, tok + 9, 3, 0, path);
    pair_step(&p, tok + 1, 1, 1, path);
    double worst = p.worst;
    pair_close(&p);
    return worst;
}

Test(infer_gpu, emu_matches_cpu_engine_on_fixtures)
{
    for (size_t f = 0; f < 4; f++) {
        double w = check_against_cpu(fixture(FIXTURES[f], ""));
        cr_log_info("%s: worst relative difference %g", FIXTURES[f], w);
    }
}

/* Shapes the fixtures do not have: head_dim 12 and d_ff 52 (no 8-element chunk is full), an
 * untied unembedding, one kv head for three query heads, bf16 weights. */
Test(infer_gpu, emu_matches_cpu_engine_on_odd_shapes)
{
    const struct {
        sl_arch arch;
        const char *cfg;
        sl_dtype dt;
    } cases[] = {
        {SL_ARCH_GPT2,
         "{\"vocab_size\":101,\"n_layer\":2,\"n_head\":3,\"d_model\":36,\"d_ff\":52,\"max_seq_len\":30,"
         "\"tied_embeddings\":false}",
         SL_DT_F16},
        {SL_ARCH_LLAMA,
         "{\"vocab_size\":101,\"n_layer\":2,\"n_head\":3,\"n_kv_head\":1,\"d_model\":36,\"d_ff\":52,"
         "\"max_seq_len\":30,\"rope_theta\":500,\"tied_embeddings\":true}",
         SL_DT_BF16},
    };
    for (size_t k = 0; k < 2; k++) {
        char path[256];
        random_model(path, k ? "odd1" : "odd0", cases[k].arch, cases[k].cfg, 31 + k, cases[k].dt, 0.25);
        double w = check_against_cpu(path);
        cr_log_info("odd shape %zu: worst relative difference %g", k, w);
        unlink(path);
    }
}

/* The same comparison test_engine makes for the CPU engine, against the PyTorch reference: the
 * 24 reference tokens in one call (blocks of 16 + 8). 1e-4 absolute, test_engine's bound. */
Test(infer_gpu, emu_matches_pytorch_reference)
{
    for (size_t f = 0; f < 4; f++) {
        sl_st_file *rf;
        cr_assert_eq(sl_st_open(fixture(FIXTURES[f], ".ref"), &rf), SL_OK);
        const sl_st_tensor *t = sl_st_find(rf, "logits");
        cr_assert(t && t->ndim == 2 && t->dtype == SL_DT_F32);
        const size_t n = (size_t)t->shape[0], V = (size_t)t->shape[1];
        int32_t tokens[64];
        size_t k = 0;
        for (const char *s = sl_st_meta(rf, "tokens"); s && *s && k < n;) {
            char *e;
            tokens[k++] = (int32_t)strtol(s, &e, 10);
            s = *e ? e + 1 : e;
        }
        cr_assert_eq(k, n);
        sl_model *m;
        sl_model_ctx *c;
        cr_assert_eq(sl_model_open(fixture(FIXTURES[f], ""), &m), SL_OK);
        cr_assert_eq(sl_model_set_device(m, "cuda-emu"), SL_OK);
        cr_assert_eq(sl_model_ctx_alloc(m, m->cfg.max_seq_len, &c), SL_OK);
        float *logits = malloc(n * V * sizeof(float));
        cr_assert_eq(sl_model_forward(c, tokens, n, logits), SL_OK, "%s", sl_errmsg());
        double d = 0;
        for (size_t i = 0; i < n * V; i++) d = fmax(d, fabs((double)logits[i] - ((const float *)t->data)[i]));
        cr_assert_leq(d, 1e-4, "%s: max |logit - torch| = %g", FIXTURES[f], d);
        free(logits);
        sl_model_ctx_free(c);
        sl_model_close(m);
        sl_st_close(rf);
    }
}

/* Every product row and attention item is computed by one warp in one order whatever n: a token
 * scored inside a block of 6 gets the same bits as scored alone. */
Test(infer_gpu, block_scoring_equals_one_by_one_bitwise)
{
    sl_model *m;
    sl_model_ctx *a, *b;
    cr_assert_eq(sl_model_open(fixture("llama_f16", ""), &m), SL_OK);
    cr_assert_eq(sl_model_set_device(m, "cuda-emu"), SL_OK);
    cr_assert_eq(sl_model_ctx_alloc(m, 32, &a), SL_OK);
    cr_assert_eq(sl_model_ctx_alloc(m, 32, &b), SL_OK);
    const size_t V = m->cfg.vocab_size;
    const int32_t tok[10] = {3, 17, 200, 5, 99, 0, 255, 42, 8, 130};
    float *x = malloc(10 * V * sizeof(float)), *y = malloc(10 * V * sizeof(float));
    cr_assert_eq(sl_model_forward(a, tok, 4, x), SL_OK);
    cr_assert_eq(sl_model_forward(a, tok + 4, 6, x + 4 * V), SL_OK);
    for (size_t i = 0; i < 10; i++) cr_assert_eq(sl_model_forward(b, tok + i, 1, y + i * V), SL_OK);
    cr_assert(memcmp(x, y, 10 * V * sizeof(float)) == 0);
    free(x), free(y);
    sl_model_ctx_free(a), sl_model_ctx_free(b);
    sl_model_close(m);
}

/* The sampler's distributions computed on the device (forward_dist, through the sl_lm adapter)
 * against the host's standardisation of the same model's logits. The emulation computes every
 * e_i = exp(z_i / T - m) with the same operations as sl_dist_standardise_f32; only the order of
 * the softmax's sum differs (segments of 256 and a pairwise tree against one running sum), which
 * moves the sum, and with it every p_i, by at most V 2^-53 relatively (4.5e-13 at V = 4096,
 * whatever the order): bound 1e-12. At temperature 0 the argmax must be the same token. The
 * filters (top-k, top-p, min-p) run on the host after the device's softmax, as after the host's. */
static double g_dist_worst;
static void check_dists(const char *path, sl_sampling samp)
{
    sl_model *dev;
    sl_model_ctx *ac, *bc;
    cr_assert_eq(sl_model_open(path, &dev), SL_OK);
    cr_assert_eq(sl_model_set_device(dev, "cuda-emu"), SL_OK);
    const size_t V = dev->cfg.vocab_size, L = dev->cfg.max_seq_len < 40 ? dev->cfg.max_seq_len : 40;
    cr_assert_eq(sl_model_ctx_alloc(dev, L, &ac), SL_OK);
    cr_assert_eq(sl_model_ctx_alloc(dev, L, &bc), SL_OK);
    sl_model_lm *b;
    cr_assert_eq(sl_model_lm_alloc(bc, &samp, &b), SL_OK);
    sl_dist_work *w = sl_dist_work_alloc(V);
    float *z = malloc(20 * V * sizeof *z);
    double *p = malloc(20 * V * sizeof *p), *q = malloc(20 * V * sizeof *q);
    int32_t tok[20];
    for (size_t i = 0; i < 20; i++) tok[i] = (int32_t)((i * 37 + 11) % V);
    /* A prompt of 20 with its last 17 rows (two blocks), then blocks of 1..5 with truncation. */
    for (int call = 0; call < 6; call++) {
        const size_t n = call ? (size_t)call : 20, rows = call ? n : 17;
        /* The reference: the same device's logits, standardised on the host. */
        cr_assert_eq(sl_model_forward_last(ac, tok + call, n, rows, z), SL_OK, "%s", sl_errmsg());
        for (size_t r = 0; r < rows; r++) cr_assert_eq(sl_dist_standardise_f32(z + r * V, V, &samp, p + r * V, w), SL_OK);
        cr_assert_eq(b->lm.extend(b, tok + call, n, rows, q), SL_OK, "%s", sl_errmsg());
        for (size_t r = 0; r < rows; r++) {
            const double *pr = p + r * V, *qr = q + r * V;
            if (samp.temperature == 0) {
                cr_assert(memcmp(pr, qr, V * sizeof *pr) == 0, "%s: argmax row %zu of call %d", path, r, call);
                continue;
            }
            double worst = 0, sum = 0;
            for (size_t i = 0; i < V; i++) {
                worst = fmax(worst, fabs(qr[i] - pr[i]) / fmax(pr[i], 1e-300));
                sum += qr[i];
                cr_assert((pr[i] == 0) == (qr[i] == 0), "%s: row %zu token %zu: filtered on one side only", path, r, i);
            }
            cr_assert_leq(worst, 1e-12, "%s T=%g: row %zu of call %d: relative difference %g", path, samp.temperature, r, call, worst);
            g_dist_worst = fmax(g_dist_worst, worst);
            cr_assert_float_eq(sum, 1.0, 1e-12);
        }
        if (call) { /* keep half, as a rejection does */
            const size_t keep = ac->len - n + n / 2;
            cr_assert_eq(sl_model_truncate(ac, keep), SL_OK);
            cr_assert_eq(b->lm.truncate(b, keep), SL_OK);
        }
    }
    free(z), free(p), free(q);
    sl_dist_work_free(w);
    sl_model_lm_free(b);
    sl_model_ctx_free(ac), sl_model_ctx_free(bc);
    sl_model_close(dev);
}

Test(infer_gpu, emu_distributions_match_host_standardisation)
{
    const sl_sampling cases[] = {
        {1.0, 0, 1.0, 0.0}, {0.7, 0, 1.0, 0.0}, {1.5, 0, 1.0, 0.0}, {0.0, 0, 1.0, 0.0}, {1.0, 20, 0.9, 0.02},
    };
    for (size_t f = 0; f < 4; f++)
        for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) check_dists(fixture(FIXTURES[f], ""), cases[k]);
    /* The fixtures' 256 tokens are one segment: a vocabulary of 1000 is four, the last one short. */
    char path[256];
    random_model(path, "v1000", SL_ARCH_GPT2,
                 "{\"vocab_size\":1000,\"n_layer\":1,\"n_head\":2,\"d_model\":16,\"d_ff\":32,\"max_seq_len\":40,"
                 "\"tied_embeddings\":true}",
                 9, SL_DT_F32, 1.0);
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) check_dists(path, cases[k]);
    unlink(path);
    cr_log_info("distributions: worst relative difference %g", g_dist_worst);
}

/* A NaN in the unembedding makes one logit of every row NaN: the device sends the logits back and
 * the host's rules give the host's error, word for word, at any temperature. */
Test(infer_gpu, emu_distributions_of_nan_logits_fail_as_on_the_host)
{
    char path[256];
    random_model(path, "nan", SL_ARCH_GPT2,
                 "{\"vocab_size\":300,\"n_layer\":1,\"n_head\":2,\"d_model\":16,\"d_ff\":32,\"max_seq_len\":16,"
                 "\"tied_embeddings\":false}",
                 5, SL_DT_F32, 0.25);
    sl_st_file *f;
    cr_assert_eq(sl_st_open(path, &f), SL_OK);
    const sl_st_tensor *t = sl_st_find(f, "lm_head.weight");
    cr_assert(t);
    const long off = (long)((const char *)t->data - (const char *)f->map) + 257L * 16 * (long)sizeof(float);
    sl_st_close(f);
    FILE *fp = fopen(path, "r+b");
    const float nan = NAN;
    cr_assert(fp && fseek(fp, off, SEEK_SET) == 0 && fwrite(&nan, sizeof nan, 1, fp) == 1);
    fclose(fp);
    const double temps[] = {1.0, 0.0};
    for (size_t k = 0; k < 2; k++) {
        const sl_sampling samp = {temps[k], 0, 1.0, 0.0};
        char msg[2][512];
        for (int d = 0; d < 2; d++) {
            sl_model *m;
            sl_model_ctx *c;
            sl_model_lm *l;
            cr_assert_eq(sl_model_open(path, &m), SL_OK);
            if (d) cr_assert_eq(sl_model_set_device(m, "cuda-emu"), SL_OK);
            cr_assert_eq(sl_model_ctx_alloc(m, 16, &c), SL_OK);
            cr_assert_eq(sl_model_lm_alloc(c, &samp, &l), SL_OK);
            double *p = malloc(3 * 300 * sizeof *p);
            const int32_t tok[3] = {1, 2, 3};
            cr_assert_eq(l->lm.extend(l, tok, 3, 3, p), SL_EINPUT);
            snprintf(msg[d], sizeof msg[d], "%s", sl_errmsg());
            free(p);
            sl_model_lm_free(l);
            sl_model_ctx_free(c);
            sl_model_close(m);
        }
        cr_assert_str_eq(msg[1], msg[0]);
        cr_assert(strstr(msg[0], "logit[257]"), "%s", msg[0]);
    }
    unlink(path);
}

Test(infer_gpu, unknown_or_missing_device_is_an_input_error)
{
    sl_model *m;
    cr_assert_eq(sl_model_open(fixture("gpt2_f32", ""), &m), SL_OK);
    cr_assert_eq(sl_model_set_device(m, "tpu"), SL_EINPUT);
    cr_assert_eq(sl_model_set_default_device("tpu"), SL_EINPUT);
    setenv("SL_INFER_CUDA_LIB", "/nonexistent/libsl_infer_cuda.so", 1);
    cr_assert_eq(sl_model_set_device(m, "cuda"), SL_EINPUT);
    cr_assert_eq(sl_model_set_default_device("cuda"), SL_EINPUT);
    unsetenv("SL_INFER_CUDA_LIB");
    cr_assert_str_eq(sl_model_device(m), "cpu");
    cr_assert_str_eq(sl_model_default_device(), "cpu");
    /* The default device places a model when its first context is made. */
    cr_assert_eq(sl_model_set_default_device("cuda-emu"), SL_OK);
    sl_model_ctx *c;
    cr_assert_eq(sl_model_ctx_alloc(m, 8, &c), SL_OK);
    cr_assert_str_eq(sl_model_device(m), "cuda-emu");
    int32_t tok[9] = {1, 2, 3, 4, 5, 6, 7, 8, 9};
    float *l = malloc(9 * m->cfg.vocab_size * sizeof(float));
    cr_assert_eq(sl_model_forward(c, tok, 9, l), SL_EINPUT); /* past the context */
    tok[0] = 256;
    cr_assert_eq(sl_model_forward(c, tok, 1, l), SL_EINPUT); /* id outside the vocabulary */
    cr_assert_eq(c->len, 0);
    free(l);
    sl_model_ctx_free(c);
    sl_model_close(m);
    cr_assert_eq(sl_model_set_default_device("cpu"), SL_OK);
}
