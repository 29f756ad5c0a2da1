/* fuzz_tok_sp.c: sp-bpe tokenizer JSON and encode/decode (models/sl_tok.h, models/sl_tok_sp.c).
 * Input: tokenizer JSON up to the first NUL byte, then the text to encode (at most 2048 bytes used;
 * without a NUL, a fixed text). An accepted sp-bpe tokenizer must: encode the text with the heap
 * version and llama2.c's loop (sl_tok_encode_ref) to the same ids, all in range; decode them;
 * give decode(encode(s)) == s when byte_fallback is on, '▁' is a piece (type 1 or 4) and s holds
 * no literal '▁' (sl_tok.h); and reload from its own sl_tok_to_json into the same JSON and ids. */
#include <json-c/json.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_util.h"
#include "sl_common.h"
#include "sl_tok.h"

static const char SPACE_MARK[] = "\xe2\x96\x81";

/* Whether the saved JSON promises lossless round trips (see the header comment). */
static int lossless(const char *json)
{
    json_object *r = json_tokener_parse(json), *bf, *pieces, *types;
    int ok = 0;
    if (r && json_object_object_get_ex(r, "byte_fallback", &bf) && json_object_get_boolean(bf) &&
        json_object_object_get_ex(r, "pieces", &pieces) && json_object_object_get_ex(r, "types", &types)) {
        size_t n = json_object_array_length(pieces);
        for (size_t i = 0; i < n && !ok; i++) {
            int ty = json_object_get_int(json_object_array_get_idx(types, i));
            ok = !strcmp(json_object_get_string(json_object_array_get_idx(pieces, i)), SPACE_MARK) && (ty == 1 || ty == 4);
        }
    }
    json_object_put(r);
    return ok;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const char fixed[] = " hello  w\xc3\xb6rld\t\xe6\x97\xa5\xf0\x9f\x98\x80 \xff\xc3 <s> 12";
    const uint8_t *nul = memchr(data, 0, size);
    char *json = fuzz_cstr(data, nul ? (size_t)(nul - data) : size);
    const char *text = nul ? (const char *)nul + 1 : fixed;
    size_t n = nul ? size - (size_t)(nul - data) - 1 : sizeof fixed - 1;
    if (n > 2048) n = 2048;
    sl_tok *t = NULL;
    if (sl_tok_from_json(json, &t) == SL_OK && !strcmp(sl_tok_kind(t), "sp-bpe")) {
        int32_t *a = NULL, *b = NULL;
        size_t na = 0, nb = 0;
        if (sl_tok_encode(t, text, n, &a, &na) != SL_OK || sl_tok_encode_ref(t, text, n, &b, &nb) != SL_OK) abort();
        if (na != nb || memcmp(a, b, na * sizeof *a)) abort();
        for (size_t i = 0; i < na; i++)
            if (a[i] < 0 || (size_t)a[i] >= sl_tok_vocab_size(t)) abort();
        char *back = NULL;
        size_t n_back = 0;
        if (sl_tok_decode(t, a, na, &back, &n_back) != SL_OK) abort();
        char *saved = sl_tok_to_json(t);
        if (!saved) abort();
        if (lossless(saved) && !memmem(text, n, SPACE_MARK, 3) && (n_back != n || memcmp(back, text, n))) abort();
        sl_tok *t2 = NULL;
        if (sl_tok_from_json(saved, &t2) != SL_OK) abort();
        char *again = sl_tok_to_json(t2);
        if (!again || strcmp(again, saved)) abort();
        int32_t *c = NULL;
        size_t nc = 0;
        if (sl_tok_encode(t2, text, n, &c, &nc) != SL_OK || nc != na || memcmp(a, c, na * sizeof *a)) abort();
        int32_t diff;
        if (!sl_tok_same_vocab(t, t2, &diff)) abort();
        free(c);
        free(again);
        sl_tok_free(t2);
        free(saved);
        free(back);
        free(a);
        free(b);
    }
    sl_tok_free(t);
    free(json);
    sl_err_clear();
    return 0;
}
