/*
 * test_gguf.c: the GGUF container and importer/writer (models/sl_gguf.c, models/sl_import_gguf.c).
 *
 * - Dequantisers against the numpy reference of tests/importers/gguf_write.py (written from
 *   ggml's block layouts, not from our C): random valid blocks of every type, results compared
 *   with memcmp. Exact: both compute the same float32 products in the same order (d * q,
 *   (d * sc) * q, d1 * q - m1) with no fused multiply-add (the build's -std=c11 keeps GCC from
 *   contracting).
 * - Round trip: sl_export_gguf of the four fixtures and the family target, read back with
 *   sl_model_file_open: every native tensor has the source's values (matrices the same dtype and
 *   bytes), and the model's logits on a fixed sequence are bit-identical (memcmp).
 * - The parser on every prefix of a small GGUF and on single-byte damage of its header: SL_EINPUT
 *   or a valid parse, never a crash or an out-of-bounds read (run under the sanitizer pass).
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sl_common.h"
#include "sl_gguf.h"
#include "sl_half.h"
#include "sl_import.h"
#include "sl_model.h"
#include "sl_st.h"

static void tmpdir(char *dir /* >= 32 bytes */)
{
    strcpy(dir, "/tmp/sl_test_gguf_XXXXXX");
    cr_assert_not_null(mkdtemp(dir));
}

static void rmdir_all(const char *dir)
{
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    cr_assert_eq(system(cmd), 0);
}

static unsigned char *slurp(const char *path, size_t *n)
{
    char *buf = NULL;
    cr_assert_eq(sl_read_file(path, "test file", &buf, n), SL_OK, "cannot read %s", path);
    return (unsigned char *)buf;
}

Test(gguf, dequantisers_match_numpy)
{
    char dir[32], cmd[256], path[128];
    tmpdir(dir);
    snprintf(cmd, sizeof cmd, "/usr/bin/python3 tests/importers/gguf_write.py --blocks %s --seed 7", dir);
    cr_assert_eq(system(cmd), 0, "the numpy reference failed: %s", cmd);
    snprintf(path, sizeof path, "%s/blocks.gguf", dir);
    size_t n;
    unsigned char *buf = slurp(path, &n);
    sl_gguf *g = NULL;
    cr_assert_eq(sl_gguf_parse(buf, n, path, &g), SL_OK);
    static const char *const names[] = {"F32", "F16", "BF16", "Q8_0", "Q4_0", "Q4_K", "Q6_K"};
    for (int i = 0; i < 7; i++) {
        const sl_gguf_tensor *t = sl_gguf_find_tensor(g, names[i]);
        cr_assert_not_null(t, "%s", names[i]);
        cr_assert_str_eq(sl_ggml_type_name(t->type), names[i]);
        float *got = sl_malloc(t->numel * sizeof(float));
        sl_ggml_dequant(t->type, t->data, got, t->numel);
        snprintf(path, sizeof path, "%s/%s.f32", dir, names[i]);
        size_t rn;
        unsigned char *ref = slurp(path, &rn);
        cr_assert_eq(rn, t->numel * sizeof(float), "%s", names[i]);
        size_t bad = 0;
        for (size_t k = 0; k < t->numel; k++) bad += memcmp(got + k, ref + 4 * k, 4) != 0;
        cr_assert_eq(bad, 0, "%s: %zu of %zu values differ from numpy", names[i], bad, (size_t)t->numel);
        free(got);
        free(ref);
    }
    sl_gguf_free(g);
    free(buf);
    rmdir_all(dir);
}

/* Q8_0 quantisation of values where ggml's rule is easy to state by hand: a block of k/127 * 3
 * has d = 3/127 (as f16) and q = k. */
Test(gguf, q8_0_quantiser_closed_form)
{
    float x[32], y[32];
    unsigned char b[34];
    for (int k = 0; k < 32; k++) x[k] = (float)(k * 4 - 64) / 127.0f * 3.0f * (k == 31 ? 127.0f / 60.0f : 1.0f);
    /* x[31] = 3.0 exactly: the block's maximum, so d = 3/127 and every other q = 4k - 64. */
    x[31] = 3.0f;
    sl_ggml_quant_q8_0(x, b, 32);
    for (int k = 0; k < 31; k++) cr_assert_eq((int8_t)b[2 + k], k * 4 - 64, "q[%d] = %d", k, (int8_t)b[2 + k]);
    cr_assert_eq((int8_t)b[33], 127);
    uint16_t h = (uint16_t)(b[0] | b[1] << 8);
    cr_assert_eq(h, sl_half_f32_to_f16(3.0f / 127.0f));
    sl_ggml_dequant(SL_GGML_Q8_0, b, y, 32);
    for (int k = 0; k < 32; k++) cr_assert_eq(y[k], sl_half_f16_to_f32(h) * (float)(int8_t)b[2 + k]);
}

static void logits_of(sl_model *m, float *out /* (8, vocab) */)
{
    sl_model_ctx *c = NULL;
    cr_assert_eq(sl_model_ctx_alloc(m, 8, &c), SL_OK);
    int32_t tok[8] = {1, 7, 3, 200, 0, 42, 9, 255};
    for (int i = 0; i < 8; i++) tok[i] %= (int32_t)m->cfg.vocab_size;
    cr_assert_eq(sl_model_forward(c, tok, 8, out), SL_OK);
    sl_model_ctx_free(c);
}

static void round_trip(const char *src, int version)
{
    char dir[32], out[96];
    tmpdir(dir);
    snprintf(out, sizeof out, "%s/m.gguf", dir);
    sl_st_file *nat = NULL, *back = NULL;
    cr_assert_eq(sl_st_open(src, &nat), SL_OK, "%s", sl_errmsg());
    sl_export_opts o = {.version = version};
    cr_assert_eq(sl_export_gguf(nat, out, &o), SL_OK, "%s", sl_errmsg());
    sl_model_format fmt;
    cr_assert_eq(sl_model_file_open(out, &back, &fmt), SL_OK, "%s", sl_errmsg());
    cr_assert_eq(fmt, SL_FMT_GGUF);
    cr_assert_eq(back->n_tensors, nat->n_tensors);
    for (size_t i = 0; i < nat->n_tensors; i++) {
        const sl_st_tensor *a = &nat->tensors[i], *b = sl_st_find(back, a->name);
        cr_assert_not_null(b, "%s: %s missing", src, a->name);
        cr_assert_eq(a->ndim, b->ndim);
        for (int d = 0; d < a->ndim; d++) cr_assert_eq(a->shape[d], b->shape[d], "%s: %s shape", src, a->name);
        if (a->ndim == 2) {
            cr_assert_eq(a->dtype, b->dtype, "%s: %s dtype", src, a->name);
            cr_assert(!memcmp(a->data, b->data, a->nbytes), "%s: %s bytes differ", src, a->name);
        } else { /* vectors are written F32: the same values */
            cr_assert_eq(b->dtype, SL_DT_F32);
            for (size_t k = 0; k < a->numel; k++) {
                float x, y;
                uint16_t h;
                if (a->dtype == SL_DT_F32) memcpy(&x, (const char *)a->data + 4 * k, 4);
                else {
                    memcpy(&h, (const char *)a->data + 2 * k, 2);
                    x = a->dtype == SL_DT_F16 ? sl_half_f16_to_f32(h) : sl_half_bf16_to_f32(h);
                }
                memcpy(&y, (const char *)b->data + 4 * k, 4);
                cr_assert(!memcmp(&x, &y, 4), "%s: %s[%zu]", src, a->name, k);
            }
        }
    }
    sl_st_close(nat);
    sl_st_close(back);
    sl_model *m1 = NULL, *m2 = NULL;
    cr_assert_eq(sl_model_open(src, &m1), SL_OK);
    cr_assert_eq(sl_model_open(out, &m2), SL_OK, "%s", sl_errmsg());
    cr_assert_eq(m1->cfg.norm_eps, m2->cfg.norm_eps, "norm_eps %.17g vs %.17g", m1->cfg.norm_eps, m2->cfg.norm_eps);
    size_t nl = 8 * m1->cfg.vocab_size;
    float *l1 = sl_malloc(nl * sizeof(float)), *l2 = sl_malloc(nl * sizeof(float));
    logits_of(m1, l1);
    logits_of(m2, l2);
    cr_assert(!memcmp(l1, l2, nl * sizeof(float)), "%s: logits differ after the GGUF round trip", src);
    free(l1);
    free(l2);
    sl_model_close(m1);
    sl_model_close(m2);
    rmdir_all(dir);
}

Test(gguf, round_trip_fixtures_bit_identical)
{
    static const char *const fx[] = {"gpt2_f32", "gpt2_f16", "llama_f32", "llama_f16"};
    char p[96];
    for (int i = 0; i < 4; i++) {
        snprintf(p, sizeof p, "tests/ref/%s.safetensors", fx[i]);
        round_trip(p, 3);
        round_trip(p, 2);
    }
}

Test(gguf, round_trip_family_target_bit_identical, .timeout = 60)
{
    round_trip("models/family/target.safetensors", 3);
}

/* Every prefix of a real GGUF (the header byte by byte, then the data in steps) and every single
 * byte of its header set to 0xff: the parser and the importer either accept or say SL_EINPUT. */
Test(gguf, damaged_buffers_never_crash)
{
    char dir[32], out[96];
    tmpdir(dir);
    snprintf(out, sizeof out, "%s/m.gguf", dir);
    sl_st_file *nat = NULL;
    cr_assert_eq(sl_st_open("tests/ref/llama_f16.safetensors", &nat), SL_OK);
    sl_export_opts o = {.dtype = "q8_0"};
    cr_assert_eq(sl_export_gguf(nat, out, &o), SL_OK, "%s", sl_errmsg());
    sl_st_close(nat);
    size_t n;
    unsigned char *buf = slurp(out, &n);
    sl_gguf *g = NULL;
    cr_assert_eq(sl_gguf_parse(buf, n, out, &g), SL_OK);
    size_t hdr = g->data_start;
    sl_gguf_free(g);
    for (size_t k = 0; k < n; k += k < hdr ? 1 : 997) {
        unsigned char *cut = sl_malloc(k + 1);
        memcpy(cut, buf, k);
        int rc = sl_gguf_parse(cut, k, out, &g);
        cr_assert_eq(rc, SL_EINPUT, "prefix of %zu bytes: rc %d", k, rc);
        free(cut);
    }
    unsigned char *dam = sl_malloc(n);
    for (size_t k = 0; k < hdr; k++) {
        memcpy(dam, buf, n);
        dam[k] = 0xff;
        int rc = sl_gguf_parse(dam, n, out, &g);
        cr_assert(rc == SL_OK || rc == SL_EINPUT);
        sl_gguf_free(g);
        g = NULL;
    }
    free(dam);
    free(buf);
    sl_err_clear();
    rmdir_all(dir);
}
