#define _GNU_SOURCE
#include <immintrin.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "sl_model.h"
#include "sl_kern.h"
#include "sl_common.h"
#define PREFILL 64
static double stream_pass(const float *a, size_t n, double *sink)
{
    double t0 = sl_now_s(), total = 0;
#pragma omp parallel reduction(+ : total)
    {
        __m256 s0 = _mm256_setzero_ps(), s1 = s0, s2 = s0, s3 = s0;
#pragma omp for schedule(static)
        for (size_t i = 0; i < n; i += 32) {
            s0 = _mm256_add_ps(s0, _mm256_load_ps(a + i)); s1 = _mm256_add_ps(s1, _mm256_load_ps(a + i + 8));
            s2 = _mm256_add_ps(s2, _mm256_load_ps(a + i + 16)); s3 = _mm256_add_ps(s3, _mm256_load_ps(a + i + 24));
        }
        __m256 s = _mm256_add_ps(_mm256_add_ps(s0, s1), _mm256_add_ps(s2, s3));
        float f[8]; _mm256_storeu_ps(f, s); for (int k = 0; k < 8; k++) total += f[k];
    }
    *sink += total; return sl_now_s() - t0;
}
static int cmpd(const void *a, const void *b) { double x = *(const double*)a, y = *(const double*)b; return x < y ? -1 : x > y; }
int main(int argc, char **argv) {
    const char *path = argv[1]; int R = argc > 2 ? atoi(argv[2]) : 15; size_t n = argc > 3 ? atoi(argv[3]) : 1;
    sl_model *m; sl_model_ctx *c;
    if (sl_model_open(path, &m) || sl_model_ctx_alloc(m, 256, &c)) { fprintf(stderr, "%s\n", sl_errmsg()); return 1; }
    const size_t V = m->cfg.vocab_size; float *logits = malloc(PREFILL * V * sizeof(float)); int32_t tokens[PREFILL];
    for (int i = 0; i < PREFILL; i++) tokens[i] = (int32_t)((i * 7919) % (int)V);
    sl_model_forward(c, tokens, PREFILL, logits); sl_model_truncate(c, PREFILL);
    size_t wb = 0;
    for (size_t i = 0; i < m->st->n_tensors; i++) { const sl_st_tensor *t = &m->st->tensors[i];
        if (t->ndim == 2 && strcmp(t->name, "tok_emb.weight") && strcmp(t->name, "pos_emb.weight")) wb += t->nbytes; }
    if (m->cfg.tied_embeddings) wb += sl_st_find(m->st, "tok_emb.weight")->nbytes;
    float *buf = aligned_alloc(64, (wb + 127) & ~(size_t)63);
    for (size_t i = 0; i < wb / 4; i++) buf[i] = (float)(i & 7);
    size_t nf = wb / 4 & ~(size_t)31; double sink = 0;
    double td[2][100], ratio[2][100];
    for (int i = 0; i < 4; i++) { sl_model_forward(c, tokens, n, logits); sl_model_truncate(c, PREFILL); }
    for (int r = 0; r < R; r++)
        for (int k = 0; k < 2; k++) {
            int mode = (r % 2) ? 1 - k : k;
            sl_kern_set_wait_prefetch(mode);
            double ts = stream_pass(buf, nf, &sink);
            double t0 = sl_now_s(); sl_model_forward(c, tokens, n, logits); td[mode][r] = sl_now_s() - t0; sl_model_truncate(c, PREFILL);
            ratio[mode][r] = ((double)wb / td[mode][r]) / ((double)nf * 4 / ts);
        }
    for (int k = 0; k < 2; k++) { qsort(td[k], R, 8, cmpd); qsort(ratio[k], R, 8, cmpd); }
    printf("%s n=%zu threads %d: omp barrier: best %.3f ms, median ratio %.1f%% | wait-prefetch: best %.3f ms, median ratio %.1f%%\n",
           path, n, omp_get_max_threads(), td[0][0] * 1e3, 100 * ratio[0][R / 2], td[1][0] * 1e3, 100 * ratio[1][R / 2]);
    if (sink == 42) puts("");
    return 0;
}
