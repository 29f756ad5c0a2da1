/* bench_tok.c: tokenizer speed. Prints training time for a 4096 vocabulary, encode and decode
 * throughput, and the heap-based merge against GPT-2's quadratic loop on long pieces, side by
 * side in one run. Uses data/corpus/{prose,code}.train.txt when present (bash data/fetch.sh),
 * else a synthetic 8 MB text. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sl_common.h"
#include "sl_tok.h"

static char *slurp(const char *path, size_t *n)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long len = ftell(f);
    rewind(f);
    char *b = malloc((size_t)len + 1);
    if (!b || fread(b, 1, (size_t)len, f) != (size_t)len) {
        free(b);
        fclose(f);
        return NULL;
    }
    fclose(f);
    *n = (size_t)len;
    return b;
}

int main(void)
{
    char *texts[2];
    size_t lens[2];
    texts[0] = slurp("data/corpus/prose.train.txt", &lens[0]);
    texts[1] = slurp("data/corpus/code.train.txt", &lens[1]);
    const char *what = "data/corpus/{prose,code}.train.txt";
    if (!texts[0] || !texts[1]) {
        free(texts[0]);
        free(texts[1]);
        what = "synthetic text (run bash data/fetch.sh for the real corpus)";
        gsl_rng *r = sl_rng_alloc(1, SL_STREAM_DATA, 0);
        static const char *w[] = {"the ", "of ", "and ", "int ", "x = ", "return ", "(void);\n", "speculative ",
                                  "decoding ", "draft ", "target ", "\n\n", "  ", "0x1f, ", "über "};
        for (int k = 0; k < 2; k++) {
            lens[k] = 4 << 20;
            texts[k] = malloc(lens[k] + 16);
            size_t n = 0;
            while (n < lens[k]) {
                const char *s = w[gsl_rng_uniform_int(r, sizeof w / sizeof w[0])];
                size_t l = strlen(s);
                if (n + l > lens[k]) break;
                memcpy(texts[k] + n, s, l);
                n += l;
            }
            lens[k] = n;
        }
        gsl_rng_free(r);
    }
    size_t total = lens[0] + lens[1];
    printf("corpus: %s, %.1f MB\n", what, total / 1e6);
    sl_tok *t;
    double t0 = sl_now_s();
    if (sl_tok_train((const char *const *)texts, lens, 2, 4096, NULL, &t)) {
        fprintf(stderr, "bench_tok: %s\n", sl_errmsg());
        return 1;
    }
    double train_s = sl_now_s() - t0;
    printf("train 4096 vocab: %.2f s (%.1f MB/s)\n", train_s, total / 1e6 / train_s);
    int32_t *ids;
    size_t n_ids;
    t0 = sl_now_s();
    sl_tok_encode(t, texts[1], lens[1], &ids, &n_ids);
    double enc_s = sl_now_s() - t0;
    char *back;
    size_t nb;
    t0 = sl_now_s();
    sl_tok_decode(t, ids, n_ids, &back, &nb);
    double dec_s = sl_now_s() - t0;
    printf("encode: %.1f MB/s (%.2f M tokens/s); decode: %.0f MB/s; round trip %s\n", lens[1] / 1e6 / enc_s,
           n_ids / 1e6 / enc_s, nb / 1e6 / dec_s, nb == lens[1] && !memcmp(back, texts[1], nb) ? "exact" : "BROKEN");
    free(ids);
    free(back);

    /* Long pieces: the letters of the prose text with everything else removed form one long
     * \p{L}+ piece with many distinct merges, where GPT-2's loop (one pass per merge) is
     * quadratic. Pieces this long are rare in text (the encoder switches to the heap above 12
     * bytes); adversarial or binary input makes them. */
    enum { N = 32000 };
    int32_t *a = malloc(N * sizeof *a), *work = malloc(8 * N * sizeof *work);
    char *letters = malloc(N);
    size_t nl = 0;
    for (size_t i = 0; i < lens[0] && nl < N; i++)
        if ((texts[0][i] | 0x20) >= 'a' && (texts[0][i] | 0x20) <= 'z') letters[nl++] = texts[0][i];
    for (size_t len = 4; len <= nl; len *= (len < 64 ? 2 : 4)) {
        double s[2];
        for (int naive = 1; naive >= 0; naive--) {
            int reps = len < 64 ? 20000 : len < 4000 ? 200 : 3;
            t0 = sl_now_s();
            for (int k = 0; k < reps; k++) {
                for (size_t i = 0; i < len; i++) a[i] = (unsigned char)letters[i];
                sl_tok_merge_piece(t, a, len, naive, work);
            }
            s[naive] = (sl_now_s() - t0) / reps;
        }
        printf("piece of %5zu bytes: naive %9.2f us, heap %8.2f us, ratio naive/heap %.1f\n", len, s[1] * 1e6,
               s[0] * 1e6, s[1] / s[0]);
    }
    free(a);
    free(work);
    free(letters);
    sl_tok_free(t);
    free(texts[0]);
    free(texts[1]);
    return 0;
}
