#define _GNU_SOURCE
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "sl_model.h"
#include "sl_common.h"
extern double sl_kern_wait_s[512];
int main(int argc, char **argv) {
    sl_model *m; sl_model_ctx *c; int R = argc > 2 ? atoi(argv[2]) : 30, n = argc > 3 ? atoi(argv[3]) : 1;
    if (sl_model_open(argv[1], &m) || sl_model_ctx_alloc(m, 256, &c)) { fprintf(stderr, "%s\n", sl_errmsg()); return 1; }
    const size_t V = m->cfg.vocab_size; float *logits = malloc(64 * V * sizeof(float)); int32_t tok[64];
    for (int i = 0; i < 64; i++) tok[i] = (i * 7919) % (int)V;
    sl_model_forward(c, tok, 64, logits); sl_model_truncate(c, 64);
    for (int i = 0; i < 3; i++) { sl_model_forward(c, tok, n, logits); sl_model_truncate(c, 64); }
    memset(sl_kern_wait_s, 0, sizeof sl_kern_wait_s);
    double t0 = sl_now_s();
    for (int r = 0; r < R; r++) { sl_model_forward(c, tok, n, logits); sl_model_truncate(c, 64); }
    double dt = (sl_now_s() - t0) / R;
    printf("threads %d n %d: %.3f ms/call; matmul barrier wait per call:", omp_get_max_threads(), n, dt * 1e3);
    for (int t = 0; t < omp_get_max_threads(); t++) printf(" thread %d %.3f ms (%.1f%%)", t, sl_kern_wait_s[t*8] / R * 1e3, 100 * sl_kern_wait_s[t*8] / R / dt);
    printf("\n");
    return 0;
}
