/* fuzz_gguf.c: GGUF files (models/sl_gguf.c sl_gguf_parse, models/sl_import_gguf.c through
 * sl_model_file_open and sl_model_open). An accepted container is used a little: every tensor is
 * dequantised (the parser promised its bytes lie in the buffer) and every string array walked. An
 * accepted model runs one forward step of 2 tokens, is written back as GGUF (sl_export_gguf) and
 * that file must open again with the same tensor count: a header that passes validation but lies
 * is caught by AddressSanitizer, a writer/reader disagreement by abort(). */
#include <stdlib.h>
#include <string.h>

#include "fuzz_util.h"
#include "sl_common.h"
#include "sl_gguf.h"
#include "sl_import.h"
#include "sl_model.h"
#include "sl_st.h"

static void use_container(const uint8_t *data, size_t size)
{
    sl_gguf *g = NULL;
    if (sl_gguf_parse(data, size, "fuzz.gguf", &g)) return;
    for (size_t i = 0; i < g->n_tensors; i++) {
        const sl_gguf_tensor *t = &g->tensors[i];
        if (t->numel > (1u << 22)) continue;
        float *y = malloc((size_t)t->numel * sizeof *y + 1);
        if (!y) continue;
        sl_ggml_dequant(t->type, t->data, y, (size_t)t->numel);
        free(y);
    }
    for (size_t i = 0; i < g->n_kv; i++) {
        const sl_gguf_kv *kv = &g->kv[i];
        if (kv->type != SL_GGUF_ARR) continue;
        if (kv->arr_type == SL_GGUF_STR) {
            const unsigned char *p = kv->data;
            for (uint64_t k = 0; k < kv->n; k++) {
                const char *s;
                size_t len;
                sl_gguf_next_str(&p, &s, &len);
                if ((const uint8_t *)s + len > data + size) abort();
            }
        } else if (kv->arr_type == SL_GGUF_F32 && kv->n) {
            (void)sl_gguf_arr_f32(kv, kv->n - 1);
        } else if (kv->arr_type != SL_GGUF_ARR && kv->n && kv->arr_type != SL_GGUF_F64) {
            (void)sl_gguf_arr_int(kv, kv->n - 1);
        }
    }
    sl_gguf_free(g);
}

static void use_model(const char *path)
{
    sl_st_file *f = NULL;
    if (sl_model_file_open(path, &f, NULL)) return;
    const char *out = fuzz_file_slot(1, (const uint8_t *)"", 0, ".gguf");
    size_t n = f->n_tensors;
    if (out && sl_export_gguf(f, out, NULL) == SL_OK) {
        sl_st_file *back = NULL;
        if (sl_model_file_open(out, &back, NULL) != SL_OK || back->n_tensors != n) abort();
        sl_st_close(back);
    }
    sl_st_close(f);
    sl_model *m = NULL;
    if (sl_model_open(path, &m)) return;
    fuzz_forward_and_close(m);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    use_container(data, size);
    const char *path = fuzz_file(data, size, ".gguf");
    if (path) use_model(path);
    sl_err_clear();
    return 0;
}
