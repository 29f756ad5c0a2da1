/*
 * test_train_gpu.c: the GPU backend's code (sl_train_gpu.c, compiled as its CPU emulation
 * "cuda-emu") against the CPU trainer; the comparison and its tolerances are in
 * train_gpu_compare.h. The real CUDA build runs the same comparison on a GPU machine through
 * build/bench/train_gpu_check (models/README.md records the result).
 */
#include <criterion/criterion.h>

#include "sl_common.h"
#include "train_gpu_compare.h"

static const sl_train_gpu_api *emu(void)
{
    const sl_train_gpu_api *a = NULL;
    char info[256];
    cr_assert_eq(sl_train_gpu_open("cuda-emu", &a, info, sizeof info), SL_OK);
    return a;
}

static void check(int tied, int objective)
{
    gpu_cmp_result r = gpu_compare_case(emu(), tied, objective);
    cr_assert(!r.failed_api, "backend call failed: %s", emu()->error());
    cr_expect(r.logits <= 1e-5, "logits differ by %g", r.logits);
    cr_expect(r.loss <= 1e-5, "loss differs by %g", r.loss);
    cr_expect(r.grads <= 1e-4, "gradients differ by %g", r.grads);
    cr_expect(r.params <= 1e-4, "parameters after 3 AdamW steps differ by %g", r.params);
    cr_expect(fabs(r.grad_norm_gpu - r.grad_norm_cpu) <= 1e-5 * r.grad_norm_cpu, "grad norm %g vs %g", r.grad_norm_gpu,
              r.grad_norm_cpu);
    cr_assert(gpu_compare_ok(&r));
}

Test(train_gpu, ce_tied_matches_cpu) { check(1, SL_OBJ_CE); }
Test(train_gpu, ce_untied_matches_cpu) { check(0, SL_OBJ_CE); }
Test(train_gpu, kl_matches_cpu) { check(1, SL_OBJ_KL); }
Test(train_gpu, tv_matches_cpu) { check(1, SL_OBJ_TV); }

Test(train_gpu, unknown_backend_and_missing_library_are_input_errors)
{
    const sl_train_gpu_api *a = NULL;
    char info[64];
    cr_assert_eq(sl_train_gpu_open("tpu", &a, info, sizeof info), SL_EINPUT);
    setenv("SL_CUDA_LIB", "/nonexistent/libsl_train_cuda.so", 1);
    cr_assert_eq(sl_train_gpu_open("cuda", &a, info, sizeof info), SL_EINPUT);
    unsetenv("SL_CUDA_LIB");
}

Test(train_gpu, batch_larger_than_allocated_is_refused)
{
    const sl_train_gpu_api *a = emu();
    sl_train_config cfg = {50, 1, 2, 16, 32, 16, 1e-5f, 1};
    sl_gpu_model *g = a->create(&cfg, 2, 8, 0);
    cr_assert(g);
    int inp[3 * 8] = {0};
    cr_assert_neq(a->forward(g, inp, 3, 8), 0);
    cr_assert_neq(a->backward(g, inp, 2, 8), 0); /* no gradients */
    a->destroy(g);
}
