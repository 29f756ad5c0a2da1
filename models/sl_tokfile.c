/* sl_tokfile.c: token files (models/TOKFILE.md) and loading a tokenizer from JSON or a model. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "sl_common.h"
#include "sl_import.h"
#include "sl_tok.h"

static const unsigned char TOK_MAGIC[8] = {'S', 'L', 'T', 'O', 'K', 0, 0, 1};
enum { TOK_HEADER_BYTES = 24 };

static void put_u32(unsigned char *p, uint32_t v)
{
    for (int i = 0; i < 4; i++) p[i] = (unsigned char)(v >> (8 * i));
}
static void put_u64(unsigned char *p, uint64_t v)
{
    for (int i = 0; i < 8; i++) p[i] = (unsigned char)(v >> (8 * i));
}
static uint32_t get_u32(const unsigned char *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}
static uint64_t get_u64(const unsigned char *p) { return get_u32(p) | (uint64_t)get_u32(p + 4) << 32; }

int sl_tokfile_write(const char *path, const int32_t *ids, size_t n, size_t vocab_size)
{
    if (vocab_size == 0 || vocab_size > INT32_MAX)
        return sl_fail(SL_EINPUT, "%s: vocab size %zu is outside [1, %d]", path, vocab_size, INT32_MAX);
    for (size_t i = 0; i < n; i++)
        if (ids[i] < 0 || (size_t)ids[i] >= vocab_size)
            return sl_fail(SL_EINPUT, "%s: token id %d at position %zu is outside [0, %zu)", path, ids[i], i,
                           vocab_size);
    uint32_t bpi = vocab_size <= 65536 ? 2 : 4;
    unsigned char hdr[TOK_HEADER_BYTES];
    memcpy(hdr, TOK_MAGIC, 8);
    put_u32(hdr + 8, (uint32_t)vocab_size);
    put_u32(hdr + 12, bpi);
    put_u64(hdr + 16, (uint64_t)n);
    sl_atomic_file af;
    int rc = sl_atomic_open(&af, path);
    if (rc) return rc;
    int ok = fwrite(hdr, 1, sizeof hdr, af.f) == sizeof hdr;
    unsigned char buf[1 << 14];
    size_t k = 0;
    for (size_t i = 0; i < n && ok; i++) {
        uint32_t v = (uint32_t)ids[i];
        for (uint32_t b = 0; b < bpi; b++) buf[k++] = (unsigned char)(v >> (8 * b));
        if (k + 4 > sizeof buf) {
            ok = fwrite(buf, 1, k, af.f) == k;
            k = 0;
        }
    }
    if (ok && k) ok = fwrite(buf, 1, k, af.f) == k;
    if (!ok) {
        int e = errno;
        sl_atomic_abort(&af);
        return sl_fail(SL_EFAIL, "%s: write failed: %s", path, strerror(e));
    }
    return sl_atomic_commit(&af);
}

int sl_tokfile_read(const char *path, int32_t **ids, size_t *n, size_t *vocab_size)
{
    *ids = NULL;
    *n = 0;
    FILE *f = fopen(path, "rb");
    if (!f) return sl_fail(SL_EINPUT, "cannot read %s: %s", path, strerror(errno));
    unsigned char hdr[TOK_HEADER_BYTES];
    int rc = SL_OK;
    if (fread(hdr, 1, sizeof hdr, f) != sizeof hdr || memcmp(hdr, TOK_MAGIC, 5) || hdr[5] || hdr[6])
        rc = sl_fail(SL_EINPUT, "%s: not a token file (expected magic SLTOK\\0\\0\\1)", path);
    else if (hdr[7] != 1)
        rc = sl_fail(SL_EINPUT, "%s: token file version %d, this build reads version 1", path, hdr[7]);
    uint32_t vs = rc ? 0 : get_u32(hdr + 8), bpi = rc ? 0 : get_u32(hdr + 12);
    uint64_t cnt = rc ? 0 : get_u64(hdr + 16);
    if (!rc && (vs == 0 || vs > INT32_MAX))
        rc = sl_fail(SL_EINPUT, "%s: vocab size %u is outside [1, %d]", path, vs, INT32_MAX);
    if (!rc && bpi != 2 && bpi != 4) rc = sl_fail(SL_EINPUT, "%s: %u bytes per id, expected 2 or 4", path, bpi);
    if (!rc && bpi == 2 && vs > 65536) rc = sl_fail(SL_EINPUT, "%s: vocab size %u does not fit 2-byte ids", path, vs);
    if (!rc) {
        if (fseeko(f, 0, SEEK_END)) rc = sl_fail(SL_EINPUT, "%s: cannot seek: %s", path, strerror(errno));
        off_t size = ftello(f);
        if (!rc && (cnt > (uint64_t)INT64_MAX / 4 || (uint64_t)size != TOK_HEADER_BYTES + cnt * bpi))
            rc = sl_fail(SL_EINPUT, "%s: file is %lld bytes, the header says %llu tokens of %u bytes (%llu bytes)",
                         path, (long long)size, (unsigned long long)cnt, bpi,
                         (unsigned long long)(TOK_HEADER_BYTES + cnt * bpi));
        if (!rc && fseeko(f, TOK_HEADER_BYTES, SEEK_SET)) rc = sl_fail(SL_EINPUT, "%s: cannot seek", path);
    }
    int32_t *out = rc ? NULL : sl_malloc((size_t)cnt * sizeof *out);
    if (!rc && !out) rc = SL_EFAIL;
    unsigned char buf[1 << 14];
    size_t i = 0;
    while (!rc && i < cnt) {
        size_t want = (size_t)(cnt - i) * bpi;
        if (want > sizeof buf) want = sizeof buf;
        if (fread(buf, 1, want, f) != want) {
            rc = sl_fail(SL_EINPUT, "%s: truncated at token %zu", path, i);
            break;
        }
        for (size_t k = 0; k < want; k += bpi, i++) {
            uint32_t v = bpi == 2 ? (uint32_t)buf[k] | (uint32_t)buf[k + 1] << 8 : get_u32(buf + k);
            if (v >= vs) {
                rc = sl_fail(SL_EINPUT, "%s: token %zu has id %u, outside [0, %u)", path, i, v, vs);
                break;
            }
            out[i] = (int32_t)v;
        }
    }
    fclose(f);
    if (rc) {
        free(out);
        return rc;
    }
    *ids = out;
    *n = (size_t)cnt;
    *vocab_size = vs;
    return SL_OK;
}

/* The tokenizer a model file carries (any format, models/sl_import.h). */
static int tok_from_model(const char *path, sl_tok **out)
{
    sl_st_file *f = NULL;
    int rc = sl_model_file_open(path, &f, NULL);
    if (rc) return rc;
    const char *tj = sl_st_meta(f, "tokenizer");
    if (!tj) rc = sl_fail(SL_EINPUT, "%s: the model carries no tokenizer", path);
    else if ((rc = sl_tok_from_json(tj, out)) == SL_EINPUT) {
        char msg[1024];
        snprintf(msg, sizeof msg, "%s", sl_errmsg());
        sl_fail(rc, "%s: %s", path, msg);
    }
    sl_st_close(f);
    return rc;
}

int sl_tok_load_file(const char *path, sl_tok **out)
{
    *out = NULL;
    struct stat sb;
    if (stat(path, &sb) == 0 && S_ISDIR(sb.st_mode)) return tok_from_model(path, out);
    FILE *f = fopen(path, "rb");
    if (!f) return sl_fail(SL_EINPUT, "cannot read tokenizer %s: %s", path, strerror(errno));
    int rc = SL_OK;
    char *text = NULL;
    if (fseeko(f, 0, SEEK_END)) {
        fclose(f);
        return sl_fail(SL_EINPUT, "%s: cannot seek: %s", path, strerror(errno));
    }
    off_t size = ftello(f);
    rewind(f);
    /* A model file first (safetensors: 8-byte little-endian header length n, then a JSON header
     * starting with '{'; or any format sl_model_detect knows). Testing for JSON first would misread
     * a model whose header length has 0x7B, '{', as its low byte; a JSON file's first 8 bytes read
     * as a length far exceed its size. */
    unsigned char len8[9];
    size_t got = fread(len8, 1, 9, f);
    uint64_t hl = got == 9 ? get_u64(len8) : 0;
    int is_st = got == 9 && hl >= 2 && hl <= (uint64_t)size - 8 && hl <= (1ULL << 31) && len8[8] == '{';
    size_t i = 0;
    while (i < got && strchr(" \t\r\n", len8[i])) i++;
    if (is_st || i == got || len8[i] != '{') {
        fclose(f);
        sl_model_format fmt;
        if (!is_st && sl_model_detect(path, &fmt))
            return sl_fail(SL_EINPUT, "%s: neither tokenizer JSON nor a model file", path);
        return tok_from_model(path, out);
    }
    text = sl_malloc((size_t)size + 1);
    if (!text) rc = SL_EFAIL;
    rewind(f);
    if (!rc && fread(text, 1, (size_t)size, f) != (size_t)size) rc = sl_fail(SL_EINPUT, "%s: read failed", path);
    fclose(f);
    if (!rc) {
        text[size] = 0;
        if (strlen(text) != (size_t)size) rc = sl_fail(SL_EINPUT, "%s: tokenizer JSON contains a NUL byte", path);
    }
    if (!rc) rc = sl_tok_from_json(text, out);
    free(text);
    if (rc == SL_EINPUT && strncmp(sl_errmsg(), path, strlen(path))) {
        char msg[1024];
        snprintf(msg, sizeof msg, "%s", sl_errmsg());
        sl_fail(rc, "%s: %s", path, msg);
    }
    return rc;
}
