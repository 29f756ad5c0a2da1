/* fuzz_model.c: safetensors model files (models/sl_st.h sl_st_open) and everything `speclab model
 * info` opens on them (models/sl_model_info.c: sl_model_open for gpt2/llama, sl_ngram_open for
 * ngram/lookup). A file that opens is used a little: one forward step of a transformer, one
 * next-token distribution of an n-gram draft, so that a header that passes validation but lies
 * about its tensors is caught by AddressSanitizer. */
#include <math.h>
#include <stdlib.h>

#include "fuzz_util.h"
#include "sl_common.h"
#include "sl_model.h"
#include "sl_ngram.h"
#include "sl_st.h"

static void use_transformer(const char *path)
{
    sl_model *m = NULL;
    if (sl_model_open(path, &m)) return;
    fuzz_forward_and_close(m);
}

static void use_ngram(const char *path)
{
    sl_ngram *g = NULL;
    if (sl_ngram_open(path, &g)) return;
    double *p = malloc(g->vocab_size * sizeof *p);
    if (p) {
        sl_ngram_dist(g, -1, p);
        sl_ngram_dist(g, 0, p);
        sl_ngram_dist(g, (int32_t)(g->vocab_size - 1), p);
        double s = 0;
        for (size_t i = 0; i < g->vocab_size; i++) s += p[i];
        /* Every row sums to 1 (sl_ngram.h); the tolerance covers double rounding over V terms. */
        if (!(fabs(s - 1) < 1e-6 * (1 + (double)g->vocab_size * 1e-3))) abort();
    }
    free(p);
    sl_ngram_free(g);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *path = fuzz_file(data, size, ".safetensors");
    if (!path) return 0;
    sl_st_file *f = NULL;
    if (sl_st_open(path, &f) == SL_OK) {
        sl_st_meta(f, "arch");
        sl_st_find(f, "tok_emb");
        sl_st_close(f);
    }
    sl_model_info info;
    if (sl_model_info_read(path, &info) == SL_OK) {
        if (info.is_transformer) use_transformer(path);
        else use_ngram(path);
        sl_model_info_free(&info);
    }
    sl_err_clear();
    return 0;
}
