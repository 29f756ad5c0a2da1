/*
 * sl_tok_files.c: the tokenizer over whole files, one call per job of `speclab tokenize`: train on
 * corpus files, encode a file (or JSON lines) to ids or a token file, decode ids or a token file to
 * bytes. Input from a path or stdin; output files are written atomically. Nothing here prints.
 */
#include <errno.h>
#include <json-c/json.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sl_common.h"
#include "sl_tok.h"

/* The whole of path (stdin when NULL) with a NUL after the last byte. */
static int read_all(const char *path, char **buf, size_t *len)
{
    FILE *f = path ? fopen(path, "rb") : stdin;
    if (!f) return sl_fail(SL_EINPUT, "cannot read %s: %s", path, strerror(errno));
    size_t cap = 1 << 16, n = 0;
    char *b = malloc(cap);
    while (b) {
        n += fread(b + n, 1, cap - n - 1, f);
        if (n + 1 < cap) break;
        char *b2 = realloc(b, cap * 2);
        if (!b2) {
            free(b);
            b = NULL;
            break;
        }
        b = b2;
        cap *= 2;
    }
    int err = ferror(f);
    if (path) fclose(f);
    if (!b) return sl_fail(SL_EFAIL, "out of memory reading %s", path ? path : "stdin");
    if (err) {
        free(b);
        return sl_fail(SL_EINPUT, "error reading %s", path ? path : "stdin");
    }
    b[n] = 0;
    *buf = b;
    *len = n;
    return SL_OK;
}

static int write_file(const char *path, const char *bytes, size_t n)
{
    sl_atomic_file af;
    int rc = sl_atomic_open(&af, path);
    if (rc) return rc;
    if (fwrite(bytes, 1, n, af.f) != n) {
        int e = errno;
        sl_atomic_abort(&af);
        return sl_fail(SL_EFAIL, "%s: write failed: %s", path, strerror(e));
    }
    return sl_atomic_commit(&af);
}

int sl_tok_open(const char *path, const char *gpt2_dir, sl_tok **out)
{
    *out = NULL;
    if (!path == !gpt2_dir)
        return sl_fail(SL_EINPUT, "tokenizer: give a tokenizer file or a GPT-2 directory (exactly one)");
    if (path) return sl_tok_load_file(path, out);
    size_t n = strlen(gpt2_dir) + 32;
    char *a = malloc(n), *b = malloc(n);
    int rc = a && b ? SL_OK : sl_fail(SL_EFAIL, "out of memory");
    if (!rc) {
        snprintf(a, n, "%s/encoder.json", gpt2_dir);
        snprintf(b, n, "%s/vocab.bpe", gpt2_dir);
        rc = sl_tok_load_gpt2(a, b, out);
    }
    free(a);
    free(b);
    return rc;
}

int sl_tok_save(const sl_tok *t, const char *path)
{
    char *json = sl_tok_to_json(t);
    if (!json) return SL_EFAIL;
    int rc = write_file(path, json, strlen(json));
    free(json);
    return rc;
}

int sl_tok_train_files(const sl_tok_train_files_cfg *cfg, sl_tok_train_files_result *res)
{
    memset(res, 0, sizeof *res);
    const size_t n = cfg->n_corpus;
    if (!n) return sl_fail(SL_EINPUT, "corpus: no corpus file given");
    char **texts = calloc(n, sizeof *texts);
    size_t *lens = calloc(n, sizeof *lens);
    int rc = texts && lens ? SL_OK : sl_fail(SL_EFAIL, "out of memory");
    for (size_t i = 0; !rc && i < n; i++) {
        const char *path = cfg->corpus[i];
        rc = read_all(path, &texts[i], &lens[i]);
        if (!rc && lens[i] == 0) rc = sl_fail(SL_EINPUT, "corpus: %s: the file is empty", path);
        size_t v = rc ? 0 : sl_utf8_valid_prefix((const unsigned char *)texts[i], lens[i]);
        if (!rc && v != lens[i]) rc = sl_fail(SL_EINPUT, "corpus: %s: not valid UTF-8 at byte %zu", path, v);
        if (!rc) res->corpus_bytes += lens[i];
    }
    if (!rc) {
        sl_tok_train_opts o = {.min_count = cfg->min_count, .verbose = cfg->verbose};
        double t0 = sl_now_s();
        rc = sl_tok_train((const char *const *)texts, lens, n, cfg->vocab_size, &o, &res->tok);
        res->train_s = sl_now_s() - t0;
    }
    for (size_t i = 0; texts && i < n; i++) free(texts[i]);
    free(texts);
    free(lens);
    if (rc) sl_tok_train_files_result_free(res);
    return rc;
}

void sl_tok_train_files_result_free(sl_tok_train_files_result *res)
{
    sl_tok_free(res->tok);
    memset(res, 0, sizeof *res);
}

/* Appends ids (n) to res->ids, growing it to *cap. */
static int append_ids(sl_tok_encode_result *res, size_t *cap, const int32_t *ids, size_t n)
{
    if (res->n_ids + n > *cap) {
        size_t c = *cap ? *cap : 256;
        while (c < res->n_ids + n) c *= 2;
        int32_t *p = realloc(res->ids, c * sizeof *p);
        if (!p) return sl_fail(SL_EFAIL, "out of memory");
        res->ids = p;
        *cap = c;
    }
    if (n) memcpy(res->ids + res->n_ids, ids, n * sizeof *ids);
    res->n_ids += n;
    return SL_OK;
}

/* Every line of text is a JSON string; its ids go to res, one line_end per line. */
static int encode_jsonl(const sl_tok *t, char *text, const char *name, sl_tok_encode_result *res)
{
    size_t n_lines = 1, cap = 0;
    for (const char *p = text; *p; p++) n_lines += *p == '\n';
    res->line_end = malloc(n_lines * sizeof *res->line_end);
    int rc = res->line_end ? SL_OK : sl_fail(SL_EFAIL, "out of memory");
    size_t lineno = 0;
    for (char *line = text; line && *line && !rc;) {
        char *nl = strchr(line, '\n');
        if (nl) *nl = 0;
        lineno++;
        json_object *o = json_tokener_parse(line);
        if (!o || !json_object_is_type(o, json_type_string)) {
            rc = sl_fail(SL_EINPUT, "%s:%zu: expected a JSON string", name, lineno);
        } else {
            int32_t *ids = NULL;
            size_t n_ids = 0;
            rc = sl_tok_encode(t, json_object_get_string(o), (size_t)json_object_get_string_len(o), &ids, &n_ids);
            if (!rc) rc = append_ids(res, &cap, ids, n_ids);
            if (!rc) res->line_end[res->n_lines++] = res->n_ids;
            free(ids);
        }
        if (o) json_object_put(o);
        line = nl ? nl + 1 : NULL;
    }
    return rc;
}

int sl_tok_encode_file(const sl_tok_encode_cfg *cfg, sl_tok_encode_result *res)
{
    memset(res, 0, sizeof *res);
    sl_tok *t = NULL;
    char *text = NULL;
    int rc = sl_tok_open(cfg->tokenizer, cfg->gpt2_dir, &t);
    if (!rc) rc = read_all(cfg->in_path, &text, &res->n_bytes);
    if (!rc) res->vocab_size = sl_tok_vocab_size(t);
    if (!rc && cfg->jsonl) {
        rc = cfg->out_path ? sl_fail(SL_EINPUT, "out: JSON lines are encoded to ids, not to a token file")
                           : encode_jsonl(t, text, cfg->in_path ? cfg->in_path : "stdin", res);
    } else if (!rc) {
        rc = sl_tok_encode(t, text, res->n_bytes, &res->ids, &res->n_ids);
        if (!rc && cfg->out_path) rc = sl_tokfile_write(cfg->out_path, res->ids, res->n_ids, res->vocab_size);
    }
    free(text);
    sl_tok_free(t);
    return rc;
}

void sl_tok_encode_result_free(sl_tok_encode_result *res)
{
    free(res->ids);
    free(res->line_end);
    memset(res, 0, sizeof *res);
}

/* Whitespace- or comma-separated ids in text (n bytes). */
static int parse_ids(const char *name, char *text, size_t n, int32_t **ids, size_t *n_ids)
{
    *ids = malloc((n / 2 + 1) * sizeof **ids);
    *n_ids = 0;
    if (!*ids) return sl_fail(SL_EFAIL, "out of memory");
    for (char *p = text;;) {
        while (*p == ' ' || *p == '\n' || *p == '\t' || *p == '\r' || *p == ',') p++;
        if (!*p) return SL_OK;
        char *end;
        errno = 0;
        long v = strtol(p, &end, 10);
        if (end == p || errno || v < INT32_MIN || v > INT32_MAX)
            return sl_fail(SL_EINPUT, "%s: '%.20s' is not a token id", name, p);
        (*ids)[(*n_ids)++] = (int32_t)v;
        p = end;
    }
}

int sl_tok_decode_file(const sl_tok_decode_cfg *cfg, sl_tok_decode_result *res)
{
    memset(res, 0, sizeof *res);
    const char *in = cfg->in_path;
    sl_tok *t = NULL;
    char *text = NULL;
    size_t n = 0, n_ids = 0, vs = 0;
    int32_t *ids = NULL;
    int rc = sl_tok_open(cfg->tokenizer, cfg->gpt2_dir, &t);
    if (!rc) rc = read_all(in, &text, &n);
    if (!rc && n >= 8 && !memcmp(text, "SLTOK", 5)) {
        /* A token file: read it again through the checking reader. */
        if (!in) {
            rc = sl_fail(SL_EINPUT, "in: give a token file by its path, not on stdin");
        } else {
            rc = sl_tokfile_read(in, &ids, &n_ids, &vs);
            if (!rc && vs != sl_tok_vocab_size(t))
                rc = sl_fail(SL_EINPUT, "%s: vocab size %zu, the tokenizer has %zu", in, vs, sl_tok_vocab_size(t));
        }
    } else if (!rc) {
        rc = parse_ids(in ? in : "stdin", text, n, &ids, &n_ids);
    }
    if (!rc) rc = sl_tok_decode(t, ids, n_ids, &res->bytes, &res->n_bytes);
    if (!rc && cfg->out_path) rc = write_file(cfg->out_path, res->bytes, res->n_bytes);
    free(ids);
    free(text);
    sl_tok_free(t);
    if (rc) sl_tok_decode_result_free(res);
    return rc;
}

void sl_tok_decode_result_free(sl_tok_decode_result *res)
{
    free(res->bytes);
    memset(res, 0, sizeof *res);
}
