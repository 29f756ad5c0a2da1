/*
 * infer_gpu_check.c: the inference GPU backend (models/sl_infer_gpu.h) on a real device, against
 * the CPU engine, and its speed. For each model file:
 *   - logits: a prompt of 16 tokens, then blocks of n = 1..6 with truncation as speculative
 *     decoding does (k = n/2 of each block kept), up to the model's context; the worst
 *     max |gpu - cpu| / max(1, max |cpu|) over every row, against the bound 1e-4 (the emulation's
 *     test uses 2e-5 with glibc's expf; the device's expf and the lanes' order add ~1e-6);
 *   - determinism: the same sequence on a second context gives the same bits;
 *   - speed: ms per token of autoregressive decoding (one token per call, 128 tokens after a prompt
 *     of 16), and t(n) = one call of n tokens at context 128, n = 1..16, median of 30: one launch
 *     per phase with CUDA graphs and programmatic dependent launch (the default), the persistent
 *     step kernel (SL_INFER_FUSED=1), graphs alone (SL_INFER_PDL=0), neither (SL_INFER_GRAPHS=0),
 *     and the default with every product row on its own warp (SL_INFER_MV_PAIR_FROM=1000);
 *   - the persistent kernel, and products a row per warp, against the default: bit for bit;
 *   - the sampler's distributions computed on the device against the host's of the same logits
 *     (check_dists), and the sampler's decode and t(n) with them on the device and on the host.
 * usage: infer_gpu_check [--device cuda|cuda-emu] [MODEL...] (default: the tests/ref fixtures).
 * Without the CUDA library it says so and exits 0 (make bench on machines without a GPU).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sl_common.h"
#include "sl_infer_gpu.h"
#include "sl_model.h"

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median(double *v, size_t n)
{
    qsort(v, n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* The check's token sequence: a fixed LCG over the vocabulary. */
static void tokens(int32_t *t, size_t n, size_t V, uint64_t seed)
{
    for (size_t i = 0; i < n; i++) {
        seed = seed * 6364136223846793005ULL + 1442695040888963407ULL;
        t[i] = (int32_t)((seed >> 33) % V);
    }
}

/* Runs the prompt + blocks sequence on ctx, writing every row's logits to out (rows counted in
 * *rows). Returns SL_OK or the failing call's code. */
static int sequence(sl_model_ctx *c, const int32_t *tok, size_t L, float *out, size_t *rows)
{
    const size_t V = c->m->cfg.vocab_size;
    size_t used = 0, k = 0;
    int rc = sl_model_forward(c, tok, 16, out);
    if (rc) return rc;
    used = 16;
    k = 16;
    for (size_t n = 1; c->len + 6 <= L; n = n % 6 + 1) {
        if ((rc = sl_model_forward(c, tok + k % 200, n, out + used * V))) return rc;
        used += n;
        k += n;
        if ((rc = sl_model_truncate(c, c->len - n + n / 2))) return rc;
    }
    *rows = used;
    return SL_OK;
}

/* The sampler's distributions computed on the device (the sl_lm adapter's default there) against
 * the host's standardisation of the same device's logits: a prompt of 16 with every row, then
 * blocks of 1..6 with truncation, at T = 1, 0.7, top-p 0.9 and T = 0. They differ by the
 * device's exp against glibc's (<= 1 ulp each) and the order of the softmax's sum (<= V 2^-53
 * relatively): bound 1e-12 on max |p_dev - p_host| / p_host; the argmax the same token. */
static int check_dists(sl_model *mg, const int32_t *tok)
{
    const size_t V = mg->cfg.vocab_size, L = mg->cfg.max_seq_len < 120 ? mg->cfg.max_seq_len : 120;
    const sl_sampling cases[] = {{1.0, 0, 1.0, 0.0}, {0.7, 0, 1.0, 0.0}, {1.0, 0, 0.9, 0.0}, {0.0, 0, 1.0, 0.0}};
    float *z = malloc(16 * V * sizeof *z);
    double *p = malloc(16 * V * sizeof *p), *q = malloc(16 * V * sizeof *q), worst = 0;
    sl_dist_work *w = sl_dist_work_alloc(V);
    size_t rows_checked = 0, argmax_diff = 0;
    int ok = 1;
    for (size_t k = 0; k < 4 && ok; k++) {
        sl_model_ctx *ca = NULL, *cb = NULL;
        sl_model_lm *lb = NULL;
        ok = !sl_model_ctx_alloc(mg, L, &ca) && !sl_model_ctx_alloc(mg, L, &cb) && !sl_model_lm_alloc(cb, &cases[k], &lb);
        for (size_t n = 16, at = 0; ok && ca->len + 6 <= L; n = n % 6 + 1) {
            ok = !sl_model_forward_last(ca, tok + at % 200, n, n, z) && !lb->lm.extend(lb, tok + at % 200, n, n, q);
            for (size_t r = 0; ok && r < n; r++) {
                ok = !sl_dist_standardise_f32(z + r * V, V, &cases[k], p + r * V, w);
                for (size_t i = 0; ok && i < V; i++) {
                    const double a = p[r * V + i], b = q[r * V + i];
                    if (cases[k].temperature == 0) argmax_diff += a != b;
                    else worst = fmax(worst, a == b ? 0 : fabs(b - a) / fmax(a, 1e-300));
                }
                rows_checked++;
            }
            at += n;
            ok = ok && !sl_model_truncate(ca, ca->len - n + n / 2) && !lb->lm.truncate(lb, ca->len);
            if (n == 16) n = 0;
        }
        sl_model_lm_free(lb);
        sl_model_ctx_free(ca), sl_model_ctx_free(cb);
    }
    const int pass = ok && worst <= 1e-12 && !argmax_diff;
    printf("  distributions on the device against the host's of the same logits: %zu rows, worst relative difference "
           "%.3g (bound 1e-12), argmax rows differing %zu -> %s\n",
           rows_checked, worst, argmax_diff, !ok ? sl_errmsg() : pass ? "ok" : "FAIL");
    free(z), free(p), free(q);
    sl_dist_work_free(w);
    return pass;
}

/* The sampler's view of speed at temperature 1: ms/token of autoregressive decoding through the
 * sl_lm adapter (a row's distribution per token) and its t(n) (n rows, a verification call), with
 * the distributions on the device and, in the same run, on the host (SL_INFER_DIST=host). */
static void time_dists(sl_model *mg, const int32_t *tok)
{
    const size_t V = mg->cfg.vocab_size, L = mg->cfg.max_seq_len;
    const size_t ctx_len = L < 160 ? L / 2 : 128, dec = L - 16 < 128 ? L - 16 : 128;
    double *q = malloc(SL_INFER_GPU_NMAX * V * sizeof *q);
    const sl_sampling s = {1.0, 0, 1.0, 0.0};
    for (int round = 0; round < 2; round++)
        for (int host = 0; host < 2; host++) {
            sl_model_ctx *c = NULL;
            sl_model_lm *l = NULL;
            if (host) setenv("SL_INFER_DIST", "host", 1);
            int rc = sl_model_ctx_alloc(mg, L, &c) || sl_model_lm_alloc(c, &s, &l);
            unsetenv("SL_INFER_DIST");
            if (rc) break;
            double reps[30], t_n[SL_INFER_GPU_NMAX + 1];
            for (int r = 0; r < 5; r++) {
                l->lm.truncate(l, 0);
                l->lm.extend(l, tok, 16, 1, q);
                double t0 = sl_now_s();
                for (size_t i = 0; i < dec; i++) l->lm.extend(l, tok + 16 + i, 1, 1, q);
                reps[r] = (sl_now_s() - t0) / (double)dec;
            }
            const double ms_tok = 1e3 * median(reps, 5);
            l->lm.truncate(l, 0);
            l->lm.extend(l, tok, ctx_len, 1, q);
            for (size_t n = 1; n <= 8 && ctx_len + n <= L; n++) {
                for (int r = 0; r < 33; r++) {
                    double t0 = sl_now_s();
                    l->lm.extend(l, tok + 100, n, n, q);
                    double dt = sl_now_s() - t0;
                    l->lm.truncate(l, ctx_len);
                    if (r >= 3) reps[r - 3] = dt;
                }
                t_n[n] = median(reps, 30);
            }
            printf("  T=1 dists on the %-6s: decode %.4f ms/token; t(n) with n rows at context %zu in ms:", host ? "host" : "device",
                   ms_tok, ctx_len);
            for (size_t n = 1; n <= 8 && ctx_len + n <= L; n++) printf(" %zu:%.4f", n, 1e3 * t_n[n]);
            printf("\n");
            sl_model_lm_free(l);
            sl_model_ctx_free(c);
        }
    free(q);
}

static int check_model(const char *path, const char *device)
{
    sl_model *mc = NULL, *mg = NULL;
    sl_model_ctx *cc = NULL, *g1 = NULL, *g2 = NULL;
    int rc = sl_model_open(path, &mc);
    if (!rc) rc = sl_model_open(path, &mg);
    if (!rc) rc = sl_model_set_device(mg, device);
    if (rc) {
        fprintf(stderr, "%s: %s\n", path, sl_errmsg());
        sl_model_close(mc), sl_model_close(mg);
        return 1;
    }
    const size_t V = mc->cfg.vocab_size, L = mc->cfg.max_seq_len;
    const size_t cap = 16 + 4 * L; /* rows the sequence can produce */
    float *a = malloc(cap * V * sizeof(float)), *b = malloc(cap * V * sizeof(float)), *b2 = malloc(cap * V * sizeof(float));
    int32_t tok[256];
    tokens(tok, 256, V, 7);
    size_t ra = 0, rb = 0, rb2 = 0;
    int ok = 1;
    rc = sl_model_ctx_alloc(mc, L, &cc) || sl_model_ctx_alloc(mg, L, &g1) || sl_model_ctx_alloc(mg, L, &g2);
    if (!rc) rc = sequence(cc, tok, L, a, &ra) || sequence(g1, tok, L, b, &rb) || sequence(g2, tok, L, b2, &rb2);
    if (rc || ra != rb || rb != rb2) {
        fprintf(stderr, "%s: %s\n", path, rc ? sl_errmsg() : "row counts differ");
        ok = 0;
        goto done;
    }
    double worst = 0;
    for (size_t r = 0; r < ra; r++) {
        double m = 0, s = 1;
        for (size_t i = 0; i < V; i++) {
            m = fmax(m, fabs((double)b[r * V + i] - a[r * V + i]));
            s = fmax(s, fabs((double)a[r * V + i]));
        }
        worst = fmax(worst, m / s);
    }
    const int same = memcmp(b, b2, ra * V * sizeof(float)) == 0;
    ok = worst <= 1e-4 && same;
    printf("%s on %s: %zu rows, worst relative difference to the CPU engine %.3g (bound 1e-4), rerun %s -> %s\n",
           path, device, ra, worst, same ? "bit-identical" : "DIFFERS", ok ? "ok" : "FAIL");
    /* One launch per phase (the default) against the persistent kernel: the same bits. */
    if (strcmp(device, "cuda-emu")) {
        sl_model_ctx *cp = NULL;
        size_t rp = 0;
        setenv("SL_INFER_FUSED", "1", 1);
        int rp_rc = sl_model_ctx_alloc(mg, L, &cp);
        unsetenv("SL_INFER_FUSED");
        if (!rp_rc) rp_rc = sequence(cp, tok, L, b2, &rp);
        const int same_p = !rp_rc && rp == ra && memcmp(b, b2, ra * V * sizeof(float)) == 0;
        printf("  the persistent kernel against one launch per phase: %s\n", rp_rc ? sl_errmsg() : same_p ? "bit-identical" : "DIFFERS");
        ok = ok && same_p;
        sl_model_ctx_free(cp);
        /* Products with every row on its own warp against rows in pairs (the default from 2 tokens). */
        cp = NULL;
        setenv("SL_INFER_MV_PAIR_FROM", "1000", 1);
        rp_rc = sl_model_ctx_alloc(mg, L, &cp);
        unsetenv("SL_INFER_MV_PAIR_FROM");
        if (!rp_rc) rp_rc = sequence(cp, tok, L, b2, &rp);
        const int same_r = !rp_rc && rp == ra && memcmp(b, b2, ra * V * sizeof(float)) == 0;
        printf("  products a row per warp against rows in pairs: %s\n", rp_rc ? sl_errmsg() : same_r ? "bit-identical" : "DIFFERS");
        ok = ok && same_r;
        sl_model_ctx_free(cp);
    }
    ok = check_dists(mg, tok) && ok;
    /* Small models: the device against its emulation (the same sums in the same order; they can
     * differ through expf, the device's and glibc's, in GELU, SiLU and the softmax). */
    if (strcmp(device, "cuda-emu") && mc->n_params <= 2000000) {
        sl_model *me = NULL;
        sl_model_ctx *ce = NULL;
        size_t re = 0;
        if (!sl_model_open(path, &me) && !sl_model_set_device(me, "cuda-emu") && !sl_model_ctx_alloc(me, L, &ce) &&
            !sequence(ce, tok, L, b2, &re) && re == ra) {
            double we = 0;
            size_t bits = 0;
            for (size_t i = 0; i < ra * V; i++) {
                we = fmax(we, fabs((double)b[i] - b2[i]));
                bits += memcmp(&b[i], &b2[i], sizeof(float)) == 0;
            }
            printf("  against cuda-emu: max |difference| %.3g, %.4f of the logits bit-identical\n", we,
                   (double)bits / (double)(ra * V));
        }
        sl_model_ctx_free(ce);
        sl_model_close(me);
    }

    /* Speed: one launch per phase with graphs and PDL (the contexts above), the persistent kernel,
     * graphs alone, and neither (fresh contexts). */
    static const char *const mode_name[5] = {"graphs+pdl", "persistent", "graphs", "plain", "no pairs"};
    for (int mode = 0; mode < 5; mode++) {
        sl_model_ctx *c = g1;
        if (mode) {
            if (mode == 1) setenv("SL_INFER_FUSED", "1", 1);
            if (mode >= 2) setenv("SL_INFER_PDL", "0", 1);
            if (mode == 3) setenv("SL_INFER_GRAPHS", "0", 1);
            if (mode == 4) unsetenv("SL_INFER_PDL"), setenv("SL_INFER_MV_PAIR_FROM", "1000", 1);
            rc = sl_model_ctx_alloc(mg, L, &c);
            unsetenv("SL_INFER_MV_PAIR_FROM");
            unsetenv("SL_INFER_FUSED");
            unsetenv("SL_INFER_GRAPHS");
            unsetenv("SL_INFER_PDL");
            if (rc) break;
        }
        const size_t ctx_len = L < 160 ? L / 2 : 128, dec = L - 16 < 128 ? L - 16 : 128;
        double reps[30], t_n[SL_INFER_GPU_NMAX + 1];
        for (int r = 0; r < 5; r++) { /* decode: 16-token prompt, then dec tokens one by one */
            sl_model_truncate(c, 0);
            sl_model_forward(c, tok, 16, b);
            double t0 = sl_now_s();
            for (size_t i = 0; i < dec; i++) sl_model_forward(c, tok + 16 + i, 1, b);
            reps[r] = (sl_now_s() - t0) / (double)dec;
        }
        const double ms_tok = 1e3 * median(reps, 5);
        sl_model_truncate(c, 0);
        sl_model_forward(c, tok, ctx_len, b);
        for (size_t n = 1; n <= SL_INFER_GPU_NMAX && ctx_len + n <= L; n++) {
            for (int r = 0; r < 33; r++) {
                double t0 = sl_now_s();
                sl_model_forward(c, tok + 100, n, b);
                double dt = sl_now_s() - t0;
                sl_model_truncate(c, ctx_len);
                if (r >= 3) reps[r - 3] = dt;
            }
            t_n[n] = median(reps, 30);
        }
        printf("  %-11s: decode %.4f ms/token; t(n) at context %zu in ms:", mode_name[mode], ms_tok, ctx_len);
        for (size_t n = 1; n <= SL_INFER_GPU_NMAX && ctx_len + n <= L; n++) printf(" %zu:%.4f", n, 1e3 * t_n[n]);
        printf("\n");
        if (mode) sl_model_ctx_free(c);
    }
    time_dists(mg, tok);
    fflush(stdout);
done:
    free(a), free(b), free(b2);
    sl_model_ctx_free(cc), sl_model_ctx_free(g1), sl_model_ctx_free(g2);
    sl_model_close(mc), sl_model_close(mg);
    return ok ? 0 : 1;
}

int main(int argc, char **argv)
{
    const char *device = "cuda";
    int k = 1;
    if (argc > 2 && !strcmp(argv[1], "--device")) device = argv[2], k = 3;
    /* From build/bench/, the library is one folder up (the loader looks beside the executable). */
    char exe[4096];
    ssize_t len = readlink("/proc/self/exe", exe, sizeof exe - 32);
    if (!getenv("SL_INFER_CUDA_LIB") && len > 0) {
        exe[len] = 0;
        char *slash = strrchr(exe, '/');
        if (slash) {
            strcpy(slash, "/../libsl_infer_cuda.so");
            if (access(exe, R_OK) == 0) setenv("SL_INFER_CUDA_LIB", exe, 1);
        }
    }
    const sl_infer_gpu_api *api;
    char info[256];
    if (sl_infer_gpu_open(device, &api, info, sizeof info)) {
        printf("skipped: %s\n", sl_errmsg());
        return 0;
    }
    printf("device %s: %s\n", device, info);
    static const char *fixtures[] = {"tests/ref/gpt2_f32.safetensors", "tests/ref/gpt2_f16.safetensors",
                                     "tests/ref/llama_f32.safetensors", "tests/ref/llama_f16.safetensors"};
    int status = 0;
    if (k >= argc)
        for (size_t i = 0; i < 4; i++) status |= check_model(fixtures[i], device);
    for (; k < argc; k++) status |= check_model(argv[k], device);
    return status;
}
