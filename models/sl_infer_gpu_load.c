/*
 * sl_infer_gpu_load.c: finding the inference GPU backend by name (sl_infer_gpu.h) and placing
 * sl_model's models and contexts on it (the device section of sl_model.h). "cuda" is a shared
 * library built by nvcc (models/infer_gpu.mk) and loaded with dlopen, so the speclab binary
 * runs and builds where there is no CUDA; "cuda-emu" is the same code compiled into libspeclab.
 */
#include <dlfcn.h>
#include <limits.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sl_common.h"
#include "sl_infer_gpu.h"
#include "sl_kern.h"
#include "sl_model.h"

_Static_assert(SL_INFER_GPU_NMAX == SL_KERN_NMAX, "the device takes the CPU engine's blocks whole");

static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static const sl_infer_gpu_api *g_cuda;  /* opened and initialised once */
static const char *g_default = "cpu";   /* sl_model_set_default_device */

static const sl_infer_gpu_api *load_cuda(void)
{
    char path[PATH_MAX + 32];
    const char *env = getenv("SL_INFER_CUDA_LIB");
    if (env && env[0]) {
        snprintf(path, sizeof path, "%s", env);
    } else {
        ssize_t n = readlink("/proc/self/exe", path, PATH_MAX);
        if (n <= 0) {
            sl_fail(SL_EINPUT, "device: cuda: cannot find the running executable to look for libsl_infer_cuda.so beside it");
            return NULL;
        }
        path[n] = 0;
        char *slash = strrchr(path, '/');
        snprintf(slash ? slash + 1 : path, sizeof path - (size_t)(slash ? slash + 1 - path : 0), "libsl_infer_cuda.so");
    }
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        sl_fail(SL_EINPUT, "device: cuda: cannot load %s (build it with `make cuda` where nvcc exists, or set "
                "SL_INFER_CUDA_LIB): %s", path, dlerror());
        return NULL;
    }
    const sl_infer_gpu_api *(*fn)(void) = (const sl_infer_gpu_api *(*)(void))dlsym(h, "sl_infer_gpu_cuda_api");
    if (!fn) {
        sl_fail(SL_EINPUT, "device: cuda: %s has no sl_infer_gpu_cuda_api", path);
        return NULL;
    }
    return fn();
}

int sl_infer_gpu_open(const char *name, const sl_infer_gpu_api **api, char *info, size_t n)
{
    const sl_infer_gpu_api *a = NULL;
    int cuda = !strcmp(name, "cuda");
    if (!strcmp(name, "cuda-emu")) a = sl_infer_gpu_emu_api();
    else if (cuda) a = g_cuda ? g_cuda : load_cuda();
    else return sl_fail(SL_EINPUT, "device: '%s' is not cpu, cuda or cuda-emu", name);
    if (!a) return SL_EINPUT;
    if (a->abi != SL_INFER_GPU_ABI)
        return sl_fail(SL_EINPUT, "device: %s: the library's interface version is %d, this program's %d (rebuild both)",
                       name, a->abi, SL_INFER_GPU_ABI);
    if (a->init(info, n)) return sl_fail(SL_EINPUT, "device: %s: %s", name, a->error());
    if (cuda) g_cuda = a;
    *api = a;
    return SL_OK;
}

int sl_model_set_default_device(const char *device)
{
    if (strcmp(device, "cpu")) {
        const sl_infer_gpu_api *a;
        char info[256];
        int rc = sl_infer_gpu_open(device, &a, info, sizeof info);
        if (rc) return rc;
    }
    g_default = !strcmp(device, "cuda") ? "cuda" : !strcmp(device, "cuda-emu") ? "cuda-emu" : "cpu";
    return SL_OK;
}

const char *sl_model_default_device(void) { return g_default; }

static sl_igpu_mat mat(sl_model_w w) { return (sl_igpu_mat){w.w, (int)w.dt}; }

int sl_model_set_device(sl_model *m, const char *device)
{
    if (m->gpu) return sl_fail(SL_EFAIL, "model already placed on %s", ((const sl_infer_gpu_api *)m->gpu_api)->name);
    if (!strcmp(device, "cpu")) return SL_OK;
    const sl_infer_gpu_api *a;
    char info[256];
    pthread_mutex_lock(&g_lock);
    int rc = sl_infer_gpu_open(device, &a, info, sizeof info);
    pthread_mutex_unlock(&g_lock);
    if (rc) return rc;
    const sl_model_config *g = &m->cfg;
    if (m->head_dim > 128 || (m->arch == SL_ARCH_LLAMA && m->head_dim % 2) || g->vocab_size > INT32_MAX)
        return sl_fail(SL_EINPUT, "device %s: head_dim %zu is not supported (at most 128, even for llama)", device,
                       m->head_dim);
    sl_igpu_layer *L = sl_calloc(g->n_layer, sizeof *L);
    if (!L) return SL_EFAIL;
    for (size_t l = 0; l < g->n_layer; l++) {
        const sl_model_layer *s = &m->layers[l];
        L[l] = (sl_igpu_layer){mat(s->q), mat(s->k), mat(s->v), mat(s->o), mat(s->up), mat(s->gate), mat(s->down),
                               s->attn_norm_w, s->attn_norm_b, s->mlp_norm_w, s->mlp_norm_b, s->bq, s->bk, s->bv, s->bo,
                               s->bup, s->bdown};
    }
    sl_igpu_weights w = {(int)m->arch, (int)g->n_layer, (int)g->n_head, (int)g->n_kv_head, (int)g->d_model,
                         (int)g->d_ff, (int)g->vocab_size, (int)g->max_seq_len, (int)m->head_dim, g->norm_eps,
                         g->rope_theta, mat(m->tok_emb), mat(m->pos_emb), mat(m->lm_head), L, m->final_norm_w,
                         m->final_norm_b};
    sl_igpu_model *gm = a->upload(&w);
    free(L);
    if (!gm) return sl_fail(SL_EFAIL, "device %s: uploading the weights: %s", device, a->error());
    m->gpu = gm;
    m->gpu_api = a;
    return SL_OK;
}

const char *sl_model_device(const sl_model *m)
{
    return m->gpu ? ((const sl_infer_gpu_api *)m->gpu_api)->name : "cpu";
}

void sl_model_gpu_release(sl_model *m)
{
    if (m->gpu) ((const sl_infer_gpu_api *)m->gpu_api)->model_free(m->gpu);
    m->gpu = NULL;
}

int sl_model_gpu_ctx_create(sl_model_ctx *c)
{
    sl_model *m = (sl_model *)c->m; /* the device copy is the model's cache of itself */
    int rc;
    if (!m->gpu && strcmp(g_default, "cpu") && (rc = sl_model_set_device(m, g_default))) return rc;
    if (!m->gpu) return SL_OK;
    const sl_infer_gpu_api *a = m->gpu_api;
    c->gpu = a->ctx_create(m->gpu, (int)c->max_len);
    if (!c->gpu) return sl_fail(SL_EFAIL, "device %s: context of %zu tokens: %s", a->name, c->max_len, a->error());
    return SL_OK;
}

void sl_model_gpu_ctx_free(sl_model_ctx *c)
{
    if (c->gpu) ((const sl_infer_gpu_api *)c->m->gpu_api)->ctx_free(c->gpu);
    c->gpu = NULL;
}

int sl_model_gpu_forward_dist(sl_model_ctx *c, const int32_t *tokens, size_t n, size_t n_rows, double temperature,
                              double *p, int32_t *argmax, int *fell_back)
{
    const sl_infer_gpu_api *a = c->m->gpu_api;
    int rc = a->forward_dist(c->gpu, tokens, (int)n, (int)c->len, (int)n_rows, temperature, p, argmax, c->logits);
    if (rc < 0) return sl_fail(SL_EFAIL, "device %s: forward: %s", a->name, a->error());
    *fell_back = rc == 1;
    c->len += n;
    return SL_OK;
}

int sl_model_gpu_forward(sl_model_ctx *c, const int32_t *tokens, size_t n, size_t n_rows, float *logits)
{
    const sl_infer_gpu_api *a = c->m->gpu_api;
    if (a->forward(c->gpu, tokens, (int)n, (int)c->len, (int)n_rows, logits))
        return sl_fail(SL_EFAIL, "device %s: forward: %s", a->name, a->error());
    c->len += n;
    return SL_OK;
}
