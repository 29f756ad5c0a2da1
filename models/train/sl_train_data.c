/*
 * sl_train_data.c: the token-file reader (format in sl_train.h) and deterministic batches.
 * The whole file is read into memory as int32 ids and every id is checked against vocab_size once,
 * so the training loop never sees an out-of-range id.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "sl_common.h"
#include "sl_train.h"

static const unsigned char tok_magic[8] = {'S', 'L', 'T', 'O', 'K', 0, 0, 1};
#define TOK_HEADER_BYTES 24

static uint32_t rd_u32(const unsigned char *p) { return p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24; }
static uint64_t rd_u64(const unsigned char *p) { return rd_u32(p) | (uint64_t)rd_u32(p + 4) << 32; }

int sl_train_tokens_read(const char *path, sl_train_tokens **out)
{
    *out = NULL;
    FILE *f = fopen(path, "rb");
    if (!f) return sl_fail(SL_EINPUT, "cannot read token file %s: %s", path, strerror(errno));
    unsigned char h[TOK_HEADER_BYTES];
    size_t got = fread(h, 1, sizeof h, f);
    if (got == 0) {
        fclose(f);
        return sl_fail(SL_EINPUT, "token file %s is empty", path);
    }
    if (got < sizeof h || memcmp(h, tok_magic, 8) != 0) {
        fclose(f);
        return sl_fail(SL_EINPUT, "%s is not a token file (expected the magic SLTOK\\0\\0\\1 and a 24-byte header)", path);
    }
    uint32_t V = rd_u32(h + 8), bpi = rd_u32(h + 12);
    uint64_t n = rd_u64(h + 16);
    if (bpi != 2 && bpi != 4) {
        fclose(f);
        return sl_fail(SL_EINPUT, "token file %s: bytes per id is %u, expected 2 or 4", path, bpi);
    }
    if (V < 2 || (bpi == 2 && V > 65536)) {
        fclose(f);
        return sl_fail(SL_EINPUT, "token file %s: vocab_size %u does not fit %u-byte ids", path, V, bpi);
    }
    if (n == 0) {
        fclose(f);
        return sl_fail(SL_EINPUT, "token file %s holds no tokens", path);
    }
    if (fseek(f, 0, SEEK_END) != 0) {
        fclose(f);
        return sl_fail(SL_EINPUT, "token file %s: cannot seek", path);
    }
    long size = ftell(f);
    if (size < 0 || (uint64_t)size != TOK_HEADER_BYTES + n * bpi) {
        fclose(f);
        return sl_fail(SL_EINPUT, "token file %s: %ld bytes, but its header says %llu ids of %u bytes (%llu bytes)",
                       path, size, (unsigned long long)n, bpi, (unsigned long long)(TOK_HEADER_BYTES + n * bpi));
    }
    fseek(f, TOK_HEADER_BYTES, SEEK_SET);
    sl_train_tokens *tf = sl_calloc(1, sizeof *tf);
    unsigned char *raw = sl_malloc(n * bpi);
    if (tf) tf->ids = sl_malloc(n * sizeof(int32_t));
    if (tf) tf->path = strdup(path);
    if (!tf || !raw || !tf->ids || !tf->path) {
        fclose(f);
        free(raw);
        sl_train_tokens_free(tf);
        return SL_EFAIL;
    }
    if (fread(raw, bpi, n, f) != n) {
        fclose(f);
        free(raw);
        sl_train_tokens_free(tf);
        return sl_fail(SL_EINPUT, "token file %s: short read", path);
    }
    fclose(f);
    for (uint64_t i = 0; i < n; i++) {
        uint32_t id = bpi == 2 ? (uint32_t)(raw[2 * i] | raw[2 * i + 1] << 8) : rd_u32(raw + 4 * i);
        if (id >= V) {
            free(raw);
            sl_train_tokens_free(tf);
            return sl_fail(SL_EINPUT, "token file %s: id %u at position %llu is >= vocab_size %u", path, id,
                           (unsigned long long)i, V);
        }
        tf->ids[i] = (int32_t)id;
    }
    free(raw);
    tf->vocab_size = V;
    tf->n_tokens = n;
    *out = tf;
    return SL_OK;
}

void sl_train_tokens_free(sl_train_tokens *tf)
{
    if (!tf) return;
    free(tf->ids);
    free(tf->path);
    free(tf);
}

int sl_train_tokens_write(const char *path, uint32_t vocab_size, int bpi, const int32_t *ids, uint64_t n)
{
    sl_atomic_file af;
    int rc = sl_atomic_open(&af, path);
    if (rc) return rc;
    unsigned char h[TOK_HEADER_BYTES];
    memcpy(h, tok_magic, 8);
    for (int i = 0; i < 4; i++) h[8 + i] = (unsigned char)(vocab_size >> (8 * i));
    for (int i = 0; i < 4; i++) h[12 + i] = (unsigned char)((uint32_t)bpi >> (8 * i));
    for (int i = 0; i < 8; i++) h[16 + i] = (unsigned char)(n >> (8 * i));
    fwrite(h, 1, sizeof h, af.f);
    for (uint64_t i = 0; i < n; i++) {
        unsigned char b[4];
        for (int k = 0; k < bpi; k++) b[k] = (unsigned char)((uint32_t)ids[i] >> (8 * k));
        fwrite(b, 1, (size_t)bpi, af.f);
    }
    if (ferror(af.f)) {
        sl_atomic_abort(&af);
        return sl_fail(SL_EFAIL, "writing %s failed", path);
    }
    return sl_atomic_commit(&af);
}

void sl_train_tokens_batch(const sl_train_tokens *tf, uint64_t seed, uint64_t step, int micro, int accum, int B, int T,
                      int *inputs, int *targets, gsl_rng *r)
{
    uint64_t span = tf->n_tokens - (uint64_t)T; /* offsets 0 .. n - T - 1 leave room for the targets */
    for (int b = 0; b < B; b++) {
        uint64_t item = ((step * (uint64_t)accum + (uint64_t)micro) * (uint64_t)B) + (uint64_t)b;
        sl_rng_reseed(r, seed, SL_STREAM_DATA, item);
        uint64_t off = (uint64_t)(sl_rng_uniform53(r) * (double)span);
        if (off >= span) off = span - 1;
        for (int t = 0; t < T; t++) {
            inputs[b * T + t] = tf->ids[off + t];
            targets[b * T + t] = tf->ids[off + t + 1];
        }
    }
}

void sl_train_tokens_eval_batch(const sl_train_tokens *tf, int k, int n_batches, int B, int T, int *inputs, int *targets)
{
    uint64_t last = tf->n_tokens - (uint64_t)T - 1; /* largest valid offset */
    uint64_t n_windows = (uint64_t)n_batches * B;
    for (int b = 0; b < B; b++) {
        uint64_t w = (uint64_t)k * B + b;
        uint64_t off = n_windows > 1 ? (uint64_t)((double)last * (double)w / (double)(n_windows - 1)) : 0;
        for (int t = 0; t < T; t++) {
            inputs[b * T + t] = tf->ids[off + t];
            targets[b * T + t] = tf->ids[off + t + 1];
        }
    }
}
