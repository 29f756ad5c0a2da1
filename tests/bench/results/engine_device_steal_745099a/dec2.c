/* t(1) and t(5) of a model at position 64, alternated rep by rep (each n timed on the second of two calls in a row): medians and bests. */
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include "sl_common.h"
#include "sl_model.h"
static int cmpd(const void *a, const void *b) { double x = *(const double *)a, y = *(const double *)b; return x < y ? -1 : x > y; }
int main(int argc, char **argv)
{
    sl_model *m; sl_model_ctx *c;
    if (sl_model_open(argv[1], &m) || sl_model_ctx_alloc(m, 256, &c)) { fprintf(stderr, "%s\n", sl_errmsg()); return 1; }
    const int reps = atoi(argv[2]);
    const size_t V = m->cfg.vocab_size;
    float *lg = malloc(64 * V * sizeof(float));
    int32_t tok[64];
    for (int i = 0; i < 64; i++) tok[i] = (i * 7919) % (int)V;
    sl_model_forward(c, tok, 64, lg); sl_model_truncate(c, 64);
    double *t[2] = {malloc(reps * sizeof(double)), malloc(reps * sizeof(double))};
    for (int r = 0; r < reps; r++) for (int k = 0; k < 2; k++) {
        const size_t n = k ? 5 : 1;
        for (int j = 0; j < 2; j++) { double t0 = omp_get_wtime(); sl_model_forward(c, tok, n, lg); sl_model_truncate(c, 64); t[k][r] = omp_get_wtime() - t0; }
    }
    for (int k = 0; k < 2; k++) qsort(t[k], reps, sizeof(double), cmpd);
    printf("%s: t(1) median %.3f best %.3f ms; t(5) median %.3f best %.3f ms; t(5)/t(1) of medians %.3f\n", argv[1], t[0][reps / 2] * 1e3, t[0][0] * 1e3, t[1][reps / 2] * 1e3, t[1][0] * 1e3, t[1][reps / 2] / t[0][reps / 2]);
    return 0;
}
