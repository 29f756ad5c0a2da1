/* fuzz_llama2c.c: llama2.c checkpoints and their tokenizer.bin (models/sl_import_llama2c.c).
 * Byte 0 picks what the rest is:
 *   even: a checkpoint, opened as every command opens a model (sl_model_file_open: detection by
 *         content, then the importer), and through sl_import_llama2c directly;
 *   odd:  a tokenizer.bin, beside a fixed valid version 1 checkpoint of vocabulary 4 + (byte0 >> 1) % 16.
 * An accepted model is used a little: one forward call of 2 tokens; its tokenizer JSON must hold one
 * valid UTF-8 piece per token with a known type; and a small one is written back as llama2.c
 * (sl_export_llama2c) and read again: the weights must come back bit for bit (versions 0 and 1)
 * or within a Q8_0 step of them (version 2). */
#include <json.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fuzz_util.h"
#include "sl_common.h"
#include "sl_import.h"
#include "sl_kern.h"
#include "sl_model.h"
#include "sl_tok.h"

/* PATH.bin -> PATH.tokenizer.bin (the importer's STEM.tokenizer.bin). */
static void tokenizer_path(const char *ckpt, char *out, size_t cap)
{
    size_t n = strlen(ckpt);
    snprintf(out, cap, "%.*s.tokenizer.bin", (int)(n > 4 ? n - 4 : n), ckpt);
}

static void put_i32(unsigned char *p, int32_t v)
{
    memcpy(p, &v, 4);
}

/* A valid version 1 checkpoint: dim 4, hidden 4, 1 layer, 2 heads, 1 kv head, vocab V, seq 4, shared. */
static size_t tiny_checkpoint(unsigned char *b, int32_t V)
{
    memset(b, 0, 256);
    put_i32(b, 0x616b3432), put_i32(b + 4, 1);
    const int32_t c[7] = {4, 4, 1, 2, 1, V, 4};
    for (int i = 0; i < 7; i++) put_i32(b + 8 + 4 * i, c[i]);
    b[36] = 1;
    size_t n_floats = 12 + (size_t)V * 4 + 16 + 8 + 8 + 16 + 16 + 16 + 16;
    for (size_t i = 0; i < n_floats; i++) {
        float w = i < 12 ? 1.0f : 0.1f * (float)((int)(i % 7) - 3);
        memcpy(b + 256 + 4 * i, &w, 4);
    }
    return 256 + 4 * n_floats;
}

static void check_tokenizer(const char *json, size_t V)
{
    json_object *root = json_tokener_parse(json), *pieces, *types;
    if (!root || !json_object_object_get_ex(root, "pieces", &pieces) ||
        !json_object_object_get_ex(root, "types", &types) || json_object_array_length(pieces) != V ||
        json_object_array_length(types) != V)
        abort();
    for (size_t i = 0; i < V; i++) {
        json_object *p = json_object_array_get_idx(pieces, i);
        const char *s = json_object_get_string(p);
        size_t n = (size_t)json_object_get_string_len(p);
        int t = json_object_get_int(json_object_array_get_idx(types, i));
        if (n == 0 || sl_utf8_valid_prefix((const unsigned char *)s, n) != n || memchr(s, 0, n)) abort();
        if (t != 1 && t != 2 && t != 3 && t != 6) abort();
    }
    json_object_put(root);
}

static void use_model(const char *path)
{
    sl_model *m = NULL;
    if (sl_model_open(path, &m)) return;
    size_t V = m->cfg.vocab_size;
    if (m->tokenizer_json) check_tokenizer(m->tokenizer_json, V);
    fuzz_forward_and_close(m);
}

/* Writes f back as llama2.c (its own version) and reads it again: the same tensors, bit for bit for
 * float32 (versions 0 and 1); for Q8_0 (version 2) within half a quantisation step, max|w| / 254 of
 * the tensor (a bound for each of its groups). Version 2 refuses weights that are not finite. */
static void roundtrip(const sl_st_file *f, int version)
{
    const char *out = fuzz_file_slot(1, (const uint8_t *)"", 0, ".out.bin");
    if (!out) return;
    char tout[600];
    tokenizer_path(out, tout, sizeof tout);
    sl_export_opts o = {.version = version, .force = 1};
    if (sl_export_llama2c(f, out, &o) != SL_OK) {
        if (version == 2 && strstr(sl_errmsg(), "not finite")) return;
        abort(); /* whatever the importer accepts, the writer writes */
    }
    sl_st_file *g = NULL;
    if (sl_import_llama2c(out, &g) != SL_OK || g->n_tensors != f->n_tensors) abort();
    for (size_t i = 0; i < f->n_tensors; i++) {
        const sl_st_tensor *a = &f->tensors[i], *b = sl_st_find(g, a->name);
        if (!b || b->numel != a->numel || b->dtype != SL_DT_F32) abort();
        if (version < 2 || a->ndim == 1) {
            if (memcmp(a->data, b->data, a->nbytes)) abort();
            continue;
        }
        float m = 0;
        for (size_t k = 0; k < a->numel; k++) {
            float x;
            memcpy(&x, (const char *)a->data + 4 * k, 4);
            m = fmaxf(m, fabsf(x));
        }
        for (size_t k = 0; k < a->numel; k++) {
            float x, y;
            memcpy(&x, (const char *)a->data + 4 * k, 4);
            memcpy(&y, (const char *)b->data + 4 * k, 4);
            if (!(fabsf(x - y) <= m / 254 * 1.001f + 1e-37f)) abort();
        }
    }
    sl_st_close(g);
    unlink(tout);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1) return 0;
    const char *path;
    char tpath[600] = "";
    if (data[0] % 2 == 0) {
        path = fuzz_file(data + 1, size - 1, ".bin");
        if (!path) return 0;
    } else {
        int32_t V = 4 + (data[0] >> 1) % 16;
        unsigned char ck[256 + 4 * 200];
        size_t n = tiny_checkpoint(ck, V);
        path = fuzz_file(ck, n, ".bin");
        if (!path) return 0;
        tokenizer_path(path, tpath, sizeof tpath);
        FILE *t = fopen(tpath, "wb");
        if (!t) return 0;
        fwrite(data + 1, 1, size - 1, t);
        fclose(t);
    }
    sl_st_file *f = NULL;
    if (sl_model_file_open(path, &f, NULL) == SL_OK) {
        sl_st_close(f);
        use_model(path);
    }
    f = NULL;
    if (sl_import_llama2c(path, &f) == SL_OK) {
        size_t total = 0;
        for (size_t i = 0; i < f->n_tensors; i++) total += f->tensors[i].numel;
        unsigned char head[8];
        FILE *h = fopen(path, "rb");
        int version = 0;
        if (h && fread(head, 1, 8, h) == 8 && head[0] == 0x32 && head[1] == 0x34 && head[2] == 0x6b && head[3] == 0x61)
            version = head[4];
        if (h) fclose(h);
        if (total <= (1u << 16)) roundtrip(f, version);
        sl_st_close(f);
    }
    if (tpath[0]) unlink(tpath);
    sl_err_clear();
    return 0;
}
