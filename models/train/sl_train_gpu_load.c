/*
 * sl_train_gpu_load.c: finding a GPU backend by name (sl_train_gpu.h). "cuda" is a shared library
 * built by nvcc (`make cuda`) and loaded with dlopen, so that the speclab binary runs and is built
 * on machines without CUDA; "cuda-emu" is the same code compiled into libspeclab.
 */
#include <dlfcn.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sl_common.h"
#include "sl_train_gpu.h"

static const sl_train_gpu_api *load_cuda(void)
{
    char path[PATH_MAX + 32];
    const char *env = getenv("SL_CUDA_LIB");
    if (env && env[0]) {
        snprintf(path, sizeof path, "%s", env);
    } else {
        ssize_t n = readlink("/proc/self/exe", path, PATH_MAX);
        if (n <= 0) {
            sl_fail(SL_EINPUT, "backend: cuda: cannot find the running executable to look for libsl_train_cuda.so beside it");
            return NULL;
        }
        path[n] = 0;
        char *slash = strrchr(path, '/');
        snprintf(slash ? slash + 1 : path, sizeof path - (size_t)(slash ? slash + 1 - path : 0), "libsl_train_cuda.so");
    }
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        sl_fail(SL_EINPUT, "backend: cuda: cannot load %s (build it with `make cuda` where nvcc exists, or set SL_CUDA_LIB): %s",
                path, dlerror());
        return NULL;
    }
    const sl_train_gpu_api *(*fn)(void) = (const sl_train_gpu_api *(*)(void))dlsym(h, "sl_train_gpu_cuda_api");
    if (!fn) {
        sl_fail(SL_EINPUT, "backend: cuda: %s has no sl_train_gpu_cuda_api", path);
        return NULL;
    }
    return fn();
}

int sl_train_gpu_open(const char *name, const sl_train_gpu_api **api, char *info, size_t n)
{
    const sl_train_gpu_api *a = NULL;
    if (strcmp(name, "cuda-emu") == 0) a = sl_train_gpu_emu_api();
    else if (strcmp(name, "cuda") == 0) a = load_cuda();
    else return sl_fail(SL_EINPUT, "backend: '%s' is not cpu, cuda or cuda-emu", name);
    if (!a) return SL_EINPUT;
    if (a->abi != SL_TRAIN_GPU_ABI)
        return sl_fail(SL_EINPUT, "backend: %s: the library's interface version is %d, this program's %d (rebuild both)",
                       name, a->abi, SL_TRAIN_GPU_ABI);
    if (a->init(info, n)) return sl_fail(SL_EINPUT, "backend: %s: %s", name, a->error());
    *api = a;
    return SL_OK;
}
