/* t(n) of a model at position 64 with two contexts, stream = 0 and 1 (sl_model_ctx.stream),
 * alternated call by call (order flipped each round); checks the logits are the same bits and
 * prints the median of the pair ratios stream / no stream.
 * usage: OMP_NUM_THREADS=T nta MODEL ROUNDS N... */
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "sl_common.h"
#include "sl_model.h"
static int cmpd(const void *a, const void *b) { double x = *(const double *)a, y = *(const double *)b; return x < y ? -1 : x > y; }
int main(int argc, char **argv)
{
    sl_model *m; sl_model_ctx *c[2];
    if (argc < 4 || sl_model_open(argv[1], &m) || sl_model_ctx_alloc(m, 256, &c[0]) || sl_model_ctx_alloc(m, 256, &c[1])) {
        fprintf(stderr, "usage: nta MODEL ROUNDS N...\n"); return 2;
    }
    c[0]->stream = 0, c[1]->stream = 1;
    const int R = atoi(argv[2]); const size_t V = m->cfg.vocab_size;
    float *lg[2] = {malloc(80 * V * 4), malloc(80 * V * 4)}; int32_t tok[80];
    for (int i = 0; i < 80; i++) tok[i] = (i * 7919) % (int)V;
    for (int v = 0; v < 2; v++) { sl_model_forward(c[v], tok, 64, lg[v]); sl_model_truncate(c[v], 64); }
    for (int ai = 3; ai < argc; ai++) {
        const int n = atoi(argv[ai]); static double t[2][20000], pr[20000]; int same = 1;
        for (int r = 0; r < R; r++) {
            for (int k = 0; k < 2; k++) {
                const int v = (r & 1) ? 1 - k : k; const double t0 = sl_now_s();
                sl_model_forward(c[v], tok + 64, n, lg[v]); t[v][r] = sl_now_s() - t0; sl_model_truncate(c[v], 64);
            }
            same &= memcmp(lg[0], lg[1], (size_t)n * V * 4) == 0;
        }
        for (int r = 0; r < R; r++) pr[r] = t[1][r] / t[0][r];
        qsort(pr, R, 8, cmpd); qsort(t[0], R, 8, cmpd); qsort(t[1], R, 8, cmpd);
        printf("%s threads %d n=%d: no stream %.4f ms, stream %.4f ms (medians); stream / no stream, median of %d pair ratios %.3f [q1 %.3f, q3 %.3f]; logits %s\n",
               argv[1], omp_get_max_threads(), n, t[0][R / 2] * 1e3, t[1][R / 2] * 1e3, R, pr[R / 2], pr[R / 4], pr[3 * R / 4], same ? "the same bits" : "DIFFER");
        fflush(stdout);
    }
    return 0;
}
