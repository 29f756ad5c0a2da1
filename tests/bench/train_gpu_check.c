/*
 * train_gpu_check.c: the GPU backend against the CPU trainer on a machine with a GPU
 * (`build/bench/train_gpu_check cuda`; `cuda-emu` runs the CI comparison here). Prints the worst
 * relative differences per case (tolerances and reasons: tests/train_gpu_compare.h) and exits 1 if
 * any exceeds its bound.
 */
#include "sl_common.h"
#include "../train_gpu_compare.h"

int main(int argc, char **argv)
{
    const char *name = argc > 1 ? argv[1] : "cuda";
    const sl_train_gpu_api *a = NULL;
    char info[256];
    if (sl_train_gpu_open(name, &a, info, sizeof info)) {
        fprintf(stderr, "train_gpu_check: %s\n", sl_errmsg());
        return 2;
    }
    printf("backend %s: %s\n", name, info);
    printf("%-10s %-6s %10s %10s %10s %10s %12s\n", "objective", "tied", "logits", "loss", "grads", "params", "grad_norm");
    int bad = 0;
    for (int obj = 0; obj < 3; obj++)
        for (int tied = 1; tied >= (obj == 0 ? 0 : 1); tied--) {
            gpu_cmp_result r = gpu_compare_case(a, tied, obj);
            int ok = gpu_compare_ok(&r);
            bad |= !ok;
            printf("%-10s %-6s %10.2e %10.2e %10.2e %10.2e %12.2e %s\n", sl_train_objective_name(obj), tied ? "yes" : "no",
                   r.logits, r.loss, r.grads, r.params, fabs(r.grad_norm_gpu - r.grad_norm_cpu) / r.grad_norm_cpu,
                   r.failed_api ? a->error() : ok ? "ok" : "FAIL");
        }
    printf("bounds: logits 1e-5, loss 1e-5, grads 1e-4, params 1e-4, grad_norm 1e-5 -> %s\n", bad ? "FAIL" : "ok");
    return bad;
}
