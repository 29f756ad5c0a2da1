/* fuzz_tok.c: tokenizer JSON (models/sl_tok.h sl_tok_from_json). A tokenizer that loads must encode
 * and decode; a byte-level BPE one must give decode(encode(s)) == s for any bytes s (sl_tok.h; the
 * sp-bpe kind promises less and has its own harness, fuzz_tok_sp.c); from_json(to_json(t)) loads. */
#include <stdlib.h>
#include <string.h>

#include "fuzz_util.h"
#include "sl_common.h"
#include "sl_tok.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *json = fuzz_cstr(data, size);
    sl_tok *t = NULL;
    if (sl_tok_from_json(json, &t) == SL_OK) {
        static const char text[] = "hello world <|endoftext|> \xff\xfe caf\xc3\xa9 12 ab";
        int32_t *ids = NULL;
        size_t n_ids = 0;
        if (sl_tok_encode(t, text, sizeof text - 1, &ids, &n_ids) == SL_OK) {
            char *back = NULL;
            size_t n_back = 0;
            if (sl_tok_decode(t, ids, n_ids, &back, &n_back) != SL_OK) abort();
            if (!strcmp(sl_tok_kind(t), "byte-bpe") && (n_back != sizeof text - 1 || memcmp(back, text, n_back))) abort();
            free(back);
        }
        free(ids);
        char *again = sl_tok_to_json(t);
        sl_tok *t2 = NULL;
        if (again && sl_tok_from_json(again, &t2) == SL_OK) sl_tok_free(t2);
        free(again);
        sl_tok_free(t);
    }
    free(json);
    sl_err_clear();
    return 0;
}
