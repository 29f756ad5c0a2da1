/* fuzz_tok_gpt2.c: GPT-2's own tokenizer files (models/sl_tok.h sl_tok_load_gpt2): encoder.json
 * (token -> id) and vocab.bpe (merges). The input is both, cut at its first NUL byte. */
#include <stdlib.h>
#include <string.h>

#include "fuzz_util.h"
#include "sl_common.h"
#include "sl_tok.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const uint8_t *cut = memchr(data, 0, size);
    size_t n1 = cut ? (size_t)(cut - data) : size;
    const char *enc = fuzz_file_slot(0, data, n1, ".json");
    const char *bpe = fuzz_file_slot(1, cut ? cut + 1 : data + size, cut ? size - n1 - 1 : 0, ".bpe");
    if (!enc || !bpe) return 0;
    sl_tok *t = NULL;
    if (sl_tok_load_gpt2(enc, bpe, &t) == SL_OK) {
        int32_t *ids = NULL;
        size_t n_ids = 0;
        if (sl_tok_encode(t, "hello world", 11, &ids, &n_ids) == SL_OK) {
            char *back = NULL;
            size_t nb = 0;
            if (sl_tok_decode(t, ids, n_ids, &back, &nb) == SL_OK) free(back);
        }
        free(ids);
        sl_tok_free(t);
    }
    sl_err_clear();
    return 0;
}
