#define _GNU_SOURCE
#include <immintrin.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include "sl_model.h"
#include "sl_common.h"
#define PREFILL 64
#include "stream_pass.h" /* tests/bench/: build with -Itests/bench */
static float *mkbuf(size_t bytes, int huge) {
    const size_t H = (size_t)2 << 20; size_t b = (bytes + H - 1) & ~(H - 1);
    float *p = aligned_alloc(H, b);
    if (huge) madvise(p, b, MADV_HUGEPAGE); else madvise(p, b, MADV_NOHUGEPAGE);
    for (size_t i = 0; i < b / 4; i++) p[i] = (float)(i & 7);
    return p;
}
static int cmpd(const void *a, const void *b) { double x = *(const double*)a, y = *(const double*)b; return x < y ? -1 : x > y; }
int main(int argc, char **argv) {
    const char *path = argv[1]; int R = argc > 2 ? atoi(argv[2]) : 15;
    sl_model *m[2]; sl_model_ctx *c[2]; float *logits; int32_t tokens[PREFILL];
    for (int h = 0; h < 2; h++) {
        setenv("SL_HUGE_EXPERIMENT", h ? "1" : "0", 1);
        if (sl_model_open(path, &m[h]) || sl_model_ctx_alloc(m[h], 256, &c[h])) { fprintf(stderr, "%s\n", sl_errmsg()); return 1; }
    }
    const size_t V = m[0]->cfg.vocab_size;
    logits = malloc(PREFILL * V * sizeof(float));
    for (int i = 0; i < PREFILL; i++) tokens[i] = (int32_t)((i * 7919) % (int)V);
    for (int h = 0; h < 2; h++) { sl_model_forward(c[h], tokens, PREFILL, logits); sl_model_truncate(c[h], PREFILL); }
    size_t wb = 0;
    for (size_t i = 0; i < m[0]->st->n_tensors; i++) { const sl_st_tensor *t = &m[0]->st->tensors[i];
        if (t->ndim == 2 && strcmp(t->name, "tok_emb.weight") && strcmp(t->name, "pos_emb.weight")) wb += t->nbytes; }
    if (m[0]->cfg.tied_embeddings) wb += sl_st_find(m[0]->st, "tok_emb.weight")->nbytes;
    float *b4 = mkbuf(wb, 0), *bh = mkbuf(wb, 1);
    size_t nf = wb / 4 & ~(size_t)31; double sink = 0;
    double r44[64], rh4[64], rhh[64], r4h[64], td4[64], tdh[64], ts4[64], tsh[64];
    for (int r = 0; r < R; r++) {
        ts4[r] = stream_pass(b4, nf, &sink);
        double t0 = sl_now_s(); sl_model_forward(c[0], tokens, 1, logits); td4[r] = sl_now_s() - t0; sl_model_truncate(c[0], PREFILL);
        tsh[r] = stream_pass(bh, nf, &sink);
        t0 = sl_now_s(); sl_model_forward(c[1], tokens, 1, logits); tdh[r] = sl_now_s() - t0; sl_model_truncate(c[1], PREFILL);
        r44[r] = ts4[r] / td4[r]; rh4[r] = ts4[r] / tdh[r]; rhh[r] = tsh[r] / tdh[r]; r4h[r] = tsh[r]/td4[r];
    }
    qsort(r44, R, 8, cmpd); qsort(rh4, R, 8, cmpd); qsort(rhh, R, 8, cmpd); qsort(r4h, R, 8, cmpd);
    qsort(td4, R, 8, cmpd); qsort(tdh, R, 8, cmpd); qsort(ts4, R, 8, cmpd); qsort(tsh, R, 8, cmpd);
    printf("threads %d: decode 4K %.2f ms, huge %.2f ms (best); stream 4K %.2f GB/s huge %.2f GB/s (best)\n", omp_get_max_threads(),
           td4[0]*1e3, tdh[0]*1e3, nf*4/ts4[0]/1e9, nf*4/tsh[0]/1e9);
    printf("median ratios: dec4K/str4K %.1f%%  decH/str4K %.1f%%  decH/strH %.1f%%  dec4K/strH %.1f%%\n",
           100*r44[R/2], 100*rh4[R/2], 100*rhh[R/2], 100*r4h[R/2]);
    if (sink == 42) puts("");
    return 0;
}
