/* fuzz_hf.c: Hugging Face GPT-2 folders (models/sl_import_hf.c sl_import_hf_gpt2). The input is a
 * folder cut at NUL bytes: byte 0 picks the layout (low 2 bits: 0 tokenizer.json, 1 vocab.json +
 * merges.txt + added_tokens.json (none when that part is empty), 2 no tokenizer, 3 tokenizer.json
 * and the weights file named instead of the folder), then config.json, NUL, the tokenizer file(s)
 * each followed by a NUL, and the rest is model.safetensors (which may hold NULs). An accepted folder is used: the engine builds the model
 * from it and runs one forward step of 2 tokens, and its tokenizer metadata loads and round-trips a
 * string, so that an importer that hands out a tensor shorter than its shape is caught by
 * AddressSanitizer. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fuzz_util.h"
#include "sl_common.h"
#include "sl_import.h"
#include "sl_model.h"
#include "sl_tok.h"

static const char *const FILES[] = {"config.json",       "tokenizer.json",    "vocab.json",
                                     "merges.txt",        "added_tokens.json", "model.safetensors"};
static char dir[512];

static void remove_dir(void)
{
    char p[600];
    for (size_t k = 0; k < sizeof FILES / sizeof *FILES; k++) {
        snprintf(p, sizeof p, "%s/%s", dir, FILES[k]);
        unlink(p);
    }
    rmdir(dir);
}

/* Writes n bytes as dir/name; n == (size_t)-1 removes it instead. */
static int put(const char *name, const uint8_t *data, size_t n)
{
    char p[600];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    unlink(p);
    if (n == (size_t)-1) return 0;
    FILE *f = fopen(p, "wb");
    if (!f) return -1;
    size_t w = n ? fwrite(data, 1, n, f) : 0;
    return fclose(f) != 0 || w != n ? -1 : 0;
}

/* The next part up to a NUL (or the end); advances *p. */
static size_t cut(const uint8_t **p, const uint8_t *end, const uint8_t **part)
{
    *part = *p;
    const uint8_t *z = memchr(*p, 0, (size_t)(end - *p));
    size_t n = z ? (size_t)(z - *p) : (size_t)(end - *p);
    *p = z ? z + 1 : end;
    return n;
}

static void use_model(sl_st_file *st, const char *path)
{
    const char *tj = sl_st_meta(st, "tokenizer");
    if (tj) {
        sl_tok *t = NULL;
        /* The importer stores only tokenizers it loaded: this one must load again. */
        if (sl_tok_from_json(tj, &t) != SL_OK) abort();
        int32_t *ids = NULL;
        size_t n_ids = 0;
        if (sl_tok_encode(t, "hello world", 11, &ids, &n_ids) == SL_OK) {
            char *back = NULL;
            size_t nb = 0;
            if (sl_tok_decode(t, ids, n_ids, &back, &nb) != SL_OK || nb != 11 || memcmp(back, "hello world", 11))
                abort();
            free(back);
        }
        free(ids);
        sl_tok_free(t);
    }
    sl_model *m = NULL;
    if (sl_model_from_st(st, path, &m)) return;
    fuzz_forward_and_close(m);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!dir[0]) {
        const char *t = getenv("TMPDIR");
        if (!t || !*t) t = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
        snprintf(dir, sizeof dir, "%s/slfuzz_hf.%ld", t, (long)getpid());
        if (mkdir(dir, 0700) != 0) return 0;
        atexit(remove_dir);
    }
    if (size < 1) return 0;
    int mode = data[0] & 3;
    const uint8_t *p = data + 1, *end = data + size, *part;
    size_t n = cut(&p, end, &part);
    int bad = put("config.json", part, n);
    if (mode == 0 || mode == 3) {
        n = cut(&p, end, &part);
        bad |= put("tokenizer.json", part, n) | put("vocab.json", NULL, (size_t)-1) | put("merges.txt", NULL, (size_t)-1) |
               put("added_tokens.json", NULL, (size_t)-1);
    } else if (mode == 1) {
        n = cut(&p, end, &part);
        bad |= put("vocab.json", part, n) | put("tokenizer.json", NULL, (size_t)-1);
        n = cut(&p, end, &part);
        bad |= put("merges.txt", part, n);
        n = cut(&p, end, &part);
        bad |= put("added_tokens.json", part, n ? n : (size_t)-1);
    } else {
        bad |= put("tokenizer.json", NULL, (size_t)-1) | put("vocab.json", NULL, (size_t)-1) |
               put("merges.txt", NULL, (size_t)-1) | put("added_tokens.json", NULL, (size_t)-1);
    }
    bad |= put("model.safetensors", p, (size_t)(end - p));
    if (bad) return 0;
    char path[600];
    if (mode == 3) snprintf(path, sizeof path, "%s/model.safetensors", dir);
    else snprintf(path, sizeof path, "%s", dir);
    sl_st_file *st = NULL;
    if (sl_import_hf_gpt2(path, &st) == SL_OK) use_model(st, path);
    sl_err_clear();
    return 0;
}
