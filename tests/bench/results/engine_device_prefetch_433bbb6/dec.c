#include <immintrin.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "sl_common.h"
#include "sl_kern.h"
#include "sl_model.h"
#define CTX 256
#define PREFILL 64
static int cmpd(const void *a, const void *b) { double x = *(const double *)a, y = *(const double *)b; return x < y ? -1 : x > y; }
#include "stream_pass.h" /* tests/bench/: build with -Itests/bench */
int main(int argc, char **argv)
{
    sl_model *m; sl_model_ctx *c;
    if (sl_model_open(argv[1], &m) || sl_model_ctx_alloc(m, CTX, &c)) { fprintf(stderr, "%s\n", sl_errmsg()); return 1; }
    int N = argc > 2 ? atoi(argv[2]) : 15;
    size_t wb = 0;
    for (int i = 0; i < 3; i++) wb += m->bytes_by_dtype[i];
    const size_t V = m->cfg.vocab_size;
    float *logits = malloc(PREFILL * V * sizeof(float));
    int32_t tokens[PREFILL];
    for (int i = 0; i < PREFILL; i++) tokens[i] = (int32_t)((i * 7919) % (int)V);
    sl_model_forward(c, tokens, PREFILL, logits);
    sl_model_truncate(c, PREFILL);
    size_t nf = wb / 4 & ~(size_t)31;
    float *buf = aligned_alloc(64, nf * 4 + 64);
    for (size_t i = 0; i < nf; i++) buf[i] = (float)(i & 7);
    double td[64], ts[64], r[64], tc[64], sink = 0;
    for (int k = 0; k < N; k++) {
        ts[k] = stream_pass(buf, nf, &sink);
        double t0 = sl_now_s();
        sl_model_forward(c, tokens, 1, logits);
        td[k] = sl_now_s() - t0;
        sl_model_truncate(c, PREFILL);
        r[k] = ts[k] / td[k] * (double)wb / (double)(nf * 4);
        t0 = sl_now_s();
        sl_model_forward(c, tokens, 1, logits);
        tc[k] = sl_now_s() - t0;
        sl_model_truncate(c, PREFILL);
    }
    qsort(r, N, 8, cmpd); qsort(td, N, 8, cmpd); qsort(ts, N, 8, cmpd); qsort(tc, N, 8, cmpd);
    printf("%s: decode after stream best %.3f med %.3f ms; decode after decode best %.3f med %.3f; stream %.1f GB/s; median ratio %.1f%%; steady/stream-best %.1f%%\n",
           argv[1], td[0]*1e3, td[N/2]*1e3, tc[0]*1e3, tc[N/2]*1e3, nf*4/ts[0]/1e9, 100*r[N/2], 100*(wb/tc[N/2])/(nf*4/ts[N/2]));
    if (sink == 42) puts("");
    return 0;
}
