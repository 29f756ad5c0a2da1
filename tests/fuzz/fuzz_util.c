/* fuzz_util.c: temporary files for the harnesses (fuzz_util.h). */
#include "fuzz_util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char tmp_path[2][512];

static void remove_tmp(void)
{
    for (int k = 0; k < 2; k++)
        if (tmp_path[k][0]) unlink(tmp_path[k]);
}

const char *fuzz_file_slot(int k, const uint8_t *data, size_t n, const char *ext)
{
    static int registered;
    if (tmp_path[k][0]) unlink(tmp_path[k]);
    const char *dir = getenv("TMPDIR");
    if (!dir || !*dir) dir = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
    snprintf(tmp_path[k], sizeof tmp_path[k], "%s/slfuzz.%ld.%d%s", dir, (long)getpid(), k, ext);
    if (!registered) registered = 1, atexit(remove_tmp);
    FILE *f = fopen(tmp_path[k], "wb");
    if (!f) return NULL;
    size_t w = n ? fwrite(data, 1, n, f) : 0;
    if (fclose(f) != 0 || w != n) return NULL;
    return tmp_path[k];
}

const char *fuzz_file(const uint8_t *data, size_t n, const char *ext) { return fuzz_file_slot(0, data, n, ext); }

char *fuzz_cstr(const uint8_t *data, size_t n)
{
    char *s = malloc(n + 1);
    if (!s) abort();
    if (n) memcpy(s, data, n);
    s[n] = 0;
    return s;
}

const char *fuzz_data(const char *name)
{
    static char buf[8][1024];
    static int k;
    const char *dir = getenv("SL_FUZZ_DATA");
    char *b = buf[k++ % 8];
    snprintf(b, sizeof buf[0], "%s/%s", dir && *dir ? dir : "tests/fuzz/data", name);
    return b;
}

void fuzz_forward_and_close(sl_model *m)
{
    sl_model_ctx *c = NULL;
    if (m->cfg.vocab_size <= 4096 && m->cfg.max_seq_len >= 2 && m->cfg.d_model <= 4096 &&
        !sl_model_ctx_alloc(m, 2, &c)) {
        float *logits = malloc(2 * m->cfg.vocab_size * sizeof *logits);
        int32_t tok[2] = {0, (int32_t)(m->cfg.vocab_size - 1)};
        if (logits) sl_model_forward(c, tok, 2, logits);
        free(logits);
        sl_model_ctx_free(c);
    }
    sl_model_close(m);
}
