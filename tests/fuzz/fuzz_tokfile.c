/* fuzz_tokfile.c: speclab token files (models/TOKFILE.md, sl_tokfile_read) and the text ids that
 * `speclab tokenize decode` also reads (sl_tok_decode_file: a token file is told apart by its
 * magic, anything else is whitespace/comma-separated ids), decoded with a small fixed tokenizer
 * (tests/fuzz/data/tok.json, vocabulary 263). */
#include <stdlib.h>

#include "fuzz_util.h"
#include "sl_common.h"
#include "sl_tok.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *path = fuzz_file(data, size, ".tok");
    if (!path) return 0;
    int32_t *ids = NULL;
    size_t n = 0, vs = 0;
    if (sl_tokfile_read(path, &ids, &n, &vs) == SL_OK) {
        for (size_t i = 0; i < n; i++)
            if (ids[i] < 0 || (size_t)ids[i] >= vs) abort(); /* the reader promises ids < vocab_size */
    }
    free(ids);
    sl_err_clear();
    sl_tok_decode_cfg cfg = {.tokenizer = fuzz_data("tok.json"), .in_path = path};
    sl_tok_decode_result res;
    if (sl_tok_decode_file(&cfg, &res) == SL_OK) sl_tok_decode_result_free(&res);
    sl_err_clear();
    return 0;
}
