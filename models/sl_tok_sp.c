/*
 * sl_tok_sp.c: SentencePiece-style BPE (llama's tokenizer): the "sp-bpe" kind of sl_tok.h, whose
 * header comment gives the JSON form and the encoding and decoding rules. Sections: the piece
 * table and its text index, loading and saving JSON, symbols and the two merge algorithms
 * (heap over a linked list, and llama2.c's quadratic loop), encode/decode.
 *
 * What it refuses to be: SentencePiece's unigram model, its normaliser (NFKC, whitespace
 * folding) or its atomic matching of user-defined pieces. It does what llama.cpp's SPM tokenizer
 * and llama2.c's run.c do for llama's vocabulary, and never fails on input bytes.
 */
#include <json-c/json.h>
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sl_common.h"
#include "sl_tok.h"

/* SentencePiece's / GGUF's token types. */
enum { SP_NORMAL = 1, SP_UNKNOWN = 2, SP_CONTROL = 3, SP_USER = 4, SP_UNUSED = 5, SP_BYTE = 6 };

static const char SPACE_MARK[] = "\xe2\x96\x81"; /* U+2581, SentencePiece's stand-in for ' ' */

struct sl_tok_sp {
    size_t n;              // number of pieces
    char *text;            // (text_off[n]) every piece's text, concatenated
    uint32_t *text_off;    // (n + 1) piece id's text is text[text_off[id] .. text_off[id+1])
    unsigned char *bytes;  // (bytes_off[n]) every piece's bytes as decoded text
    uint32_t *bytes_off;   // (n + 1)
    float *score;          // (n)
    uint8_t *type;         // (n)
    int32_t bos, eos, unk; // ids or -1
    int add_bos, add_eos, add_dummy_prefix, byte_fallback;
    int32_t byte_piece[256]; // id of "<0xXX>" for each byte, -1 if none
    size_t max_len;          // longest text of a mergeable piece (type 1 or 4), bytes
    int32_t *slot;           // (cap) open-addressing index of all pieces by text; -1 empty
    size_t cap;              // power of two >= 2 n
};

/* ---------------------------------------------------------------------------------------------
 * Piece table and its text index
 * ------------------------------------------------------------------------------------------- */

static uint64_t hash_text(const char *s, size_t n)
{
    uint64_t h = 0xcbf29ce484222325ULL ^ n;
    for (size_t i = 0; i < n; i++) h = (h ^ (unsigned char)s[i]) * 0x100000001b3ULL;
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdULL;
    return h ^ (h >> 33);
}

static inline size_t piece_len(const sl_tok_sp *s, int32_t id) { return s->text_off[id + 1] - s->text_off[id]; }
static inline const char *piece_text(const sl_tok_sp *s, int32_t id) { return s->text + s->text_off[id]; }
static inline int mergeable(uint8_t type) { return type == SP_NORMAL || type == SP_USER; }

/* Id of the piece whose text is s[0..n), any type, or -1. */
static int32_t find_text(const sl_tok_sp *s, const char *txt, size_t n)
{
    size_t mask = s->cap - 1;
    for (size_t i = hash_text(txt, n) & mask; s->slot[i] >= 0; i = (i + 1) & mask) {
        int32_t id = s->slot[i];
        if (piece_len(s, id) == n && !memcmp(piece_text(s, id), txt, n)) return id;
    }
    return -1;
}

/* Id of the mergeable piece (type 1 or 4) whose text is s[0..n), or -1: what encoding looks up. */
static inline int32_t find_mergeable(const sl_tok_sp *s, const char *txt, size_t n)
{
    if (n > s->max_len) return -1;
    int32_t id = find_text(s, txt, n);
    return id >= 0 && mergeable(s->type[id]) ? id : -1;
}

void sl_tok_sp_free(sl_tok_sp *s)
{
    if (!s) return;
    free(s->text);
    free(s->text_off);
    free(s->bytes);
    free(s->bytes_off);
    free(s->score);
    free(s->type);
    free(s->slot);
    free(s);
}

size_t sl_tok_sp_size(const sl_tok_sp *s) { return s->n; }
int32_t sl_tok_sp_bos(const sl_tok_sp *s) { return s->bos; }
int32_t sl_tok_sp_eos(const sl_tok_sp *s) { return s->eos; }

const char *sl_tok_sp_token_bytes(const sl_tok_sp *s, int32_t id, size_t *len)
{
    if (id < 0 || (size_t)id >= s->n) return NULL;
    *len = s->bytes_off[id + 1] - s->bytes_off[id];
    return (const char *)s->bytes + s->bytes_off[id];
}

int32_t sl_tok_sp_special_id(const sl_tok_sp *s, const char *text)
{
    int32_t id = find_text(s, text, strlen(text));
    if (id < 0) return -1;
    uint8_t ty = s->type[id];
    return ty == SP_UNKNOWN || ty == SP_CONTROL || ty == SP_USER ? id : -1;
}

/* The byte of a byte piece's text "<0xXX>" (upper-case hex), or -1. */
static int byte_of_text(const char *t, size_t n)
{
    if (n != 6 || memcmp(t, "<0x", 3) || t[5] != '>') return -1;
    int v = 0;
    for (int k = 3; k < 5; k++) {
        char c = t[k];
        int d = c >= '0' && c <= '9' ? c - '0' : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
        if (d < 0) return -1;
        v = v * 16 + d;
    }
    return v;
}

/* Writes piece id's decoded bytes at out (at most its text length); returns their count. */
static size_t decoded_bytes(const sl_tok_sp *s, int32_t id, unsigned char *out)
{
    const char *t = piece_text(s, id);
    size_t n = piece_len(s, id);
    uint8_t ty = s->type[id];
    if (ty == SP_BYTE) {
        out[0] = (unsigned char)byte_of_text(t, n);
        return 1;
    }
    if (ty == SP_CONTROL || ty == SP_UNKNOWN) {
        memcpy(out, t, n);
        return n;
    }
    size_t k = 0;
    for (size_t i = 0; i < n;) {
        if (i + 3 <= n && !memcmp(t + i, SPACE_MARK, 3)) {
            out[k++] = ' ';
            i += 3;
        } else {
            out[k++] = (unsigned char)t[i++];
        }
    }
    return k;
}

/* ---------------------------------------------------------------------------------------------
 * JSON
 * ------------------------------------------------------------------------------------------- */

/* The array under key, of exactly n entries when n != SIZE_MAX. */
static int get_array(json_object *root, const char *what, const char *key, size_t n, json_object **out)
{
    if (!json_object_object_get_ex(root, key, out) || !json_object_is_type(*out, json_type_array))
        return sl_fail(SL_EINPUT, "%s: \"%s\" must be an array", what, key);
    size_t len = json_object_array_length(*out);
    if (n != SIZE_MAX && len != n)
        return sl_fail(SL_EINPUT, "%s: \"%s\" has %zu entries but \"pieces\" has %zu", what, key, len, n);
    return SL_OK;
}

static int get_bool(json_object *root, const char *what, const char *key, int *out)
{
    json_object *v;
    if (!json_object_object_get_ex(root, key, &v) || !json_object_is_type(v, json_type_boolean))
        return sl_fail(SL_EINPUT, "%s: \"%s\" must be true or false", what, key);
    *out = json_object_get_boolean(v);
    return SL_OK;
}

static int get_id(json_object *root, const char *what, const char *key, size_t n, int32_t *out)
{
    json_object *v = NULL;
    int64_t id = 0;
    if (!json_object_object_get_ex(root, key, &v) || !json_object_is_type(v, json_type_int) ||
        (id = json_object_get_int64(v)) < -1 || id >= (int64_t)n)
        return sl_fail(SL_EINPUT, "%s: \"%s\" must be an integer id in [-1, %zu), not %s", what, key, n,
                       v ? json_object_to_json_string(v) : "missing");
    *out = (int32_t)id;
    return SL_OK;
}

int sl_tok_sp_from_json(struct json_object *root, const char *what, sl_tok_sp **out)
{
    *out = NULL;
    json_object *pieces, *scores, *types;
    int rc = get_array(root, what, "pieces", SIZE_MAX, &pieces);
    size_t n = rc ? 0 : json_object_array_length(pieces);
    if (!rc && (n == 0 || n > INT32_MAX / 2))
        rc = sl_fail(SL_EINPUT, "%s: \"pieces\" has %zu entries, expected 1 to %d", what, n, INT32_MAX / 2);
    if (!rc) rc = get_array(root, what, "scores", n, &scores);
    if (!rc) rc = get_array(root, what, "types", n, &types);
    if (rc) return rc;
    sl_tok_sp *s = sl_calloc(1, sizeof *s);
    if (!s) return SL_EFAIL;
    /* Sizes first, so that every allocation is bounded by what the JSON holds. */
    size_t total = 0;
    for (size_t i = 0; i < n && !rc; i++) {
        json_object *e = json_object_array_get_idx(pieces, i);
        if (!json_object_is_type(e, json_type_string)) {
            rc = sl_fail(SL_EINPUT, "%s: pieces[%zu] is not a string", what, i);
            break;
        }
        total += (size_t)json_object_get_string_len(e);
        if (total >= UINT32_MAX) rc = sl_fail(SL_EINPUT, "%s: pieces hold more than 4 GB of text", what);
    }
    if (rc) goto fail;
    s->n = n;
    s->cap = 16;
    while (s->cap < 2 * n) s->cap <<= 1;
    s->text = sl_malloc(total + 1);
    s->text_off = sl_malloc((n + 1) * sizeof *s->text_off);
    s->bytes = sl_malloc(total + 1);
    s->bytes_off = sl_malloc((n + 1) * sizeof *s->bytes_off);
    s->score = sl_malloc(n * sizeof *s->score);
    s->type = sl_malloc(n);
    s->slot = sl_malloc(s->cap * sizeof *s->slot);
    if (!s->text || !s->text_off || !s->bytes || !s->bytes_off || !s->score || !s->type || !s->slot) {
        rc = SL_EFAIL;
        goto fail;
    }
    memset(s->slot, 0xff, s->cap * sizeof *s->slot);
    for (int b = 0; b < 256; b++) s->byte_piece[b] = -1;
    size_t pos = 0;
    for (size_t i = 0; i < n; i++) {
        json_object *e = json_object_array_get_idx(pieces, i);
        const char *t = json_object_get_string(e);
        size_t len = (size_t)json_object_get_string_len(e);
        s->text_off[i] = (uint32_t)pos;
        if (!len) {
            rc = sl_fail(SL_EINPUT, "%s: pieces[%zu] is empty", what, i);
            goto fail;
        }
        size_t v = sl_utf8_valid_prefix((const unsigned char *)t, len);
        if (v != len) {
            rc = sl_fail(SL_EINPUT, "%s: pieces[%zu] is not valid UTF-8 (byte %zu)", what, i, v);
            goto fail;
        }
        memcpy(s->text + pos, t, len);
        pos += len;

        json_object *sc = json_object_array_get_idx(scores, i), *ty = json_object_array_get_idx(types, i);
        double d = json_object_is_type(sc, json_type_double) || json_object_is_type(sc, json_type_int)
                       ? json_object_get_double(sc) : NAN;
        if (!isfinite(d) || fabs(d) > FLT_MAX) {
            rc = sl_fail(SL_EINPUT, "%s: scores[%zu] is %s, expected a finite number (as a float)", what, i,
                         json_object_to_json_string(sc));
            goto fail;
        }
        s->score[i] = (float)d;
        int64_t tv = json_object_is_type(ty, json_type_int) ? json_object_get_int64(ty) : 0;
        if (tv < SP_NORMAL || tv > SP_BYTE) {
            rc = sl_fail(SL_EINPUT, "%s: types[%zu] is %s, expected an integer 1 to 6", what, i,
                         json_object_to_json_string(ty));
            goto fail;
        }
        s->type[i] = (uint8_t)tv;
    }
    s->text_off[n] = (uint32_t)pos;
    /* Index by text (rejecting duplicates), byte pieces, decoded bytes. */
    size_t bpos = 0;
    for (size_t i = 0; i < n; i++) {
        int32_t id = (int32_t)i;
        const char *t = piece_text(s, id);
        size_t len = piece_len(s, id), mask = s->cap - 1, h = hash_text(t, len) & mask;
        for (; s->slot[h] >= 0; h = (h + 1) & mask) {
            int32_t j = s->slot[h];
            if (piece_len(s, j) == len && !memcmp(piece_text(s, j), t, len)) {
                rc = sl_fail(SL_EINPUT, "%s: pieces[%d] and pieces[%zu] are the same text \"%.40s\"", what, j, i,
                             json_object_get_string(json_object_array_get_idx(pieces, i)));
                goto fail;
            }
        }
        s->slot[h] = id;
        if (s->type[i] == SP_BYTE) {
            int b = byte_of_text(t, len);
            if (b < 0) {
                rc = sl_fail(SL_EINPUT, "%s: pieces[%zu] \"%.40s\" has type 6 (byte) but is not \"<0xXX>\"", what, i,
                             json_object_get_string(json_object_array_get_idx(pieces, i)));
                goto fail;
            }
            s->byte_piece[b] = id;
        }
        if (mergeable(s->type[i]) && len > s->max_len) s->max_len = len;
        s->bytes_off[i] = (uint32_t)bpos;
        bpos += decoded_bytes(s, id, s->bytes + bpos);
    }
    s->bytes_off[n] = (uint32_t)bpos;
    if ((rc = get_id(root, what, "bos", n, &s->bos)) || (rc = get_id(root, what, "eos", n, &s->eos)) ||
        (rc = get_id(root, what, "unk", n, &s->unk)) || (rc = get_bool(root, what, "add_bos", &s->add_bos)) ||
        (rc = get_bool(root, what, "add_eos", &s->add_eos)) ||
        (rc = get_bool(root, what, "add_dummy_prefix", &s->add_dummy_prefix)) ||
        (rc = get_bool(root, what, "byte_fallback", &s->byte_fallback)))
        goto fail;
    /* Decoding skips BOS and EOS, so they must be pieces that no text produces. */
    if ((s->bos >= 0 && s->type[s->bos] != SP_CONTROL) || (s->eos >= 0 && s->type[s->eos] != SP_CONTROL)) {
        int32_t id = s->bos >= 0 && s->type[s->bos] != SP_CONTROL ? s->bos : s->eos;
        rc = sl_fail(SL_EINPUT, "%s: \"%s\" is piece %d of type %d, expected a control piece (type 3)", what,
                     id == s->bos ? "bos" : "eos", id, s->type[id]);
        goto fail;
    }
    if (s->unk >= 0 && s->type[s->unk] != SP_UNKNOWN) {
        rc = sl_fail(SL_EINPUT, "%s: \"unk\" is piece %d of type %d, expected an unknown piece (type 2)", what, s->unk,
                     s->type[s->unk]);
        goto fail;
    }
    if (s->add_bos && s->bos < 0) {
        rc = sl_fail(SL_EINPUT, "%s: \"add_bos\" is true but \"bos\" is -1", what);
        goto fail;
    }
    if (s->add_eos && s->eos < 0) {
        rc = sl_fail(SL_EINPUT, "%s: \"add_eos\" is true but \"eos\" is -1", what);
        goto fail;
    }
    if (s->byte_fallback) {
        for (int b = 0; b < 256; b++)
            if (s->byte_piece[b] < 0) {
                rc = sl_fail(SL_EINPUT, "%s: \"byte_fallback\" is true but there is no byte piece <0x%02X>", what, b);
                goto fail;
            }
    } else if (s->unk < 0) {
        rc = sl_fail(SL_EINPUT, "%s: \"byte_fallback\" is false and \"unk\" is -1: some text could not be encoded",
                     what);
        goto fail;
    }
    *out = s;
    return SL_OK;
fail:
    sl_tok_sp_free(s);
    return rc;
}

char *sl_tok_sp_to_json(const sl_tok_sp *s)
{
    json_object *root = json_object_new_object();
    json_object *pieces = json_object_new_array_ext((int)s->n);
    json_object *scores = json_object_new_array_ext((int)s->n);
    json_object *types = json_object_new_array_ext((int)s->n);
    char *out = NULL;
    if (root && pieces && scores && types) {
        for (size_t i = 0; i < s->n; i++) {
            json_object_array_add(pieces, json_object_new_string_len(piece_text(s, (int32_t)i), (int)piece_len(s, (int32_t)i)));
            /* A float widens to a double exactly and json-c prints doubles with 17 significant
             * digits, so the float read back is the same one. */
            json_object_array_add(scores, json_object_new_double((double)s->score[i]));
            json_object_array_add(types, json_object_new_int(s->type[i]));
        }
        json_object_object_add(root, "type", json_object_new_string("sp-bpe"));
        json_object_object_add(root, "pieces", pieces);
        json_object_object_add(root, "scores", scores);
        json_object_object_add(root, "types", types);
        pieces = scores = types = NULL;
        json_object_object_add(root, "bos", json_object_new_int(s->bos));
        json_object_object_add(root, "eos", json_object_new_int(s->eos));
        json_object_object_add(root, "unk", json_object_new_int(s->unk));
        json_object_object_add(root, "add_bos", json_object_new_boolean(s->add_bos));
        json_object_object_add(root, "add_eos", json_object_new_boolean(s->add_eos));
        json_object_object_add(root, "add_dummy_prefix", json_object_new_boolean(s->add_dummy_prefix));
        json_object_object_add(root, "byte_fallback", json_object_new_boolean(s->byte_fallback));
        const char *txt = json_object_to_json_string_ext(root, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE);
        out = txt ? strdup(txt) : NULL;
    }
    if (!out) sl_fail(SL_EFAIL, "out of memory writing tokenizer JSON");
    json_object_put(pieces);
    json_object_put(scores);
    json_object_put(types);
    json_object_put(root);
    return out;
}

/* ---------------------------------------------------------------------------------------------
 * Symbols and merging
 * ------------------------------------------------------------------------------------------- */

/* One symbol of the text being encoded. A mergeable symbol's piece text is exactly
 * norm[start .. start + len), so the text of two adjacent symbols together is a span of norm
 * and a merge needs no string building. */
typedef struct {
    uint32_t start, len; // span of the normalised text, bytes
    int32_t id;          // piece id
    int32_t prev, next;  // linked list (heap version); -1 at the ends
    uint8_t merge;       // 1: found by text (may merge); 0: byte or unk symbol
} sp_sym;

/* A candidate merge of adjacent symbols left, right into piece id. */
typedef struct {
    float score;
    int32_t left, right, id;
    uint32_t len; // bytes of the merged text; a popped entry whose symbols changed is stale
} sp_pair;

/* Higher score first, then the leftmost pair (symbol indices grow left to right). */
static inline int pair_before(const sp_pair *a, const sp_pair *b)
{
    return a->score > b->score || (a->score == b->score && a->left < b->left);
}

static void pq_push(sp_pair *h, size_t *n, sp_pair p)
{
    size_t i = (*n)++;
    while (i > 0 && pair_before(&p, &h[(i - 1) / 2])) {
        h[i] = h[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    h[i] = p;
}

static sp_pair pq_pop(sp_pair *h, size_t *n)
{
    sp_pair top = h[0], last = h[--(*n)];
    size_t i = 0, m = *n;
    for (;;) {
        size_t l = 2 * i + 1, r = l + 1, b = i;
        const sp_pair *best = &last;
        if (l < m && pair_before(&h[l], best)) { b = l; best = &h[l]; }
        if (r < m && pair_before(&h[r], best)) b = r;
        if (b == i) break;
        h[i] = h[b];
        i = b;
    }
    if (m) h[i] = last;
    return top;
}

static void try_pair(const sl_tok_sp *s, const char *norm, const sp_sym *sym, int32_t l, int32_t r, sp_pair *h,
                     size_t *hn)
{
    if (l < 0 || r < 0 || !sym[l].merge || !sym[r].merge) return;
    uint32_t len = sym[l].len + sym[r].len;
    int32_t id = find_mergeable(s, norm + sym[l].start, len);
    if (id >= 0) pq_push(h, hn, (sp_pair){s->score[id], l, r, id, len});
}

/* llama.cpp's SPM merge: a heap of candidate pairs over a doubly linked list of symbols. The heap
 * holds every adjacent mergeable pair (plus stale entries, skipped when popped), so each pop is
 * the pair the quadratic loop would pick. O(n log n). h holds 3 n entries: n - 1 initial pairs and
 * at most 2 per merge. Returns the number of symbols left, compacted to the front of sym. */
static size_t merge_heap(const sl_tok_sp *s, const char *norm, sp_sym *sym, size_t n, sp_pair *h)
{
    size_t hn = 0;
    for (size_t i = 0; i < n; i++) {
        sym[i].prev = (int32_t)i - 1;
        sym[i].next = i + 1 < n ? (int32_t)i + 1 : -1;
    }
    for (size_t i = 0; i + 1 < n; i++) try_pair(s, norm, sym, (int32_t)i, (int32_t)i + 1, h, &hn);
    while (hn) {
        sp_pair p = pq_pop(h, &hn);
        sp_sym *L = &sym[p.left], *R = &sym[p.right];
        if (!L->len || !R->len || L->next != p.right || L->len + R->len != p.len) continue;
        L->len = p.len;
        L->id = p.id;
        R->len = 0;
        L->next = R->next;
        if (R->next >= 0) sym[R->next].prev = p.left;
        try_pair(s, norm, sym, L->prev, p.left, h, &hn);
        try_pair(s, norm, sym, p.left, L->next, h, &hn);
    }
    size_t k = 0;
    for (int32_t i = n ? 0 : -1; i >= 0; i = sym[i].next) sym[k++] = sym[i];
    return k;
}

/* llama2.c's run.c: scan every adjacent pair, merge the best (the first one on equal scores),
 * close the gap, repeat. O(n^2); the reference the heap version is tested against. */
static size_t merge_naive(const sl_tok_sp *s, const char *norm, sp_sym *sym, size_t n)
{
    for (;;) {
        int32_t best_id = -1;
        size_t best = 0;
        for (size_t i = 0; i + 1 < n; i++) {
            if (!sym[i].merge || !sym[i + 1].merge) continue;
            int32_t id = find_mergeable(s, norm + sym[i].start, sym[i].len + sym[i + 1].len);
            if (id >= 0 && (best_id < 0 || s->score[id] > s->score[best_id])) {
                best_id = id;
                best = i;
            }
        }
        if (best_id < 0) return n;
        sym[best].len += sym[best + 1].len;
        sym[best].id = best_id;
        memmove(sym + best + 1, sym + best + 2, (n - best - 2) * sizeof *sym);
        n--;
    }
}

/* ---------------------------------------------------------------------------------------------
 * Encode and decode
 * ------------------------------------------------------------------------------------------- */

/* The next character of the text as encoding sees it: the dummy prefix first (when pending),
 * ' ' as '▁'. Sets *txt, *len (its normalised text; for a byte that is not valid UTF-8, that one
 * byte) and *valid; returns the input bytes it takes. */
static size_t next_char(const char *bytes, size_t n, size_t i, int prefix, const char **txt, size_t *len, int *valid)
{
    *valid = 1;
    if (prefix || bytes[i] == ' ') {
        *txt = SPACE_MARK;
        *len = 3;
        return prefix ? 0 : 1;
    }
    size_t k = sl_utf8_char_len((const unsigned char *)bytes + i, n - i);
    *txt = bytes + i;
    *len = k ? k : 1;
    *valid = k > 0;
    return *len;
}

/* A symbol for a character that is not a piece: its bytes' pieces with byte fallback (and always
 * for a byte that is not valid UTF-8, unk when there is no byte piece), else one unk. Writes the
 * ids to out (room for 4); returns their count. */
static size_t fallback_ids(const sl_tok_sp *s, const char *txt, size_t len, int valid, int32_t *out)
{
    if (valid && !s->byte_fallback) {
        out[0] = s->unk;
        return 1;
    }
    for (size_t j = 0; j < len; j++) {
        int32_t b = s->byte_piece[(unsigned char)txt[j]];
        out[j] = b >= 0 ? b : s->unk;
    }
    return len;
}

/* Grows *buf to hold need elements of size sz (doubling); SL_EFAIL when out of memory. */
static int grow(void **buf, size_t *cap, size_t need, size_t sz)
{
    if (need <= *cap) return SL_OK;
    size_t c = *cap ? *cap : 64;
    while (c < need) c *= 2;
    void *b = c <= SIZE_MAX / sz ? realloc(*buf, c * sz) : NULL;
    if (!b) return sl_fail(SL_EFAIL, "out of memory encoding");
    *buf = b;
    *cap = c;
    return SL_OK;
}

/* The reference: run.c's loop over the symbols of the whole text at once. */
static int encode_naive(const sl_tok_sp *s, const char *bytes, size_t n, int32_t *out, size_t *k)
{
    /* The dummy prefix and each space are 3 bytes of normalised text, any other input byte one;
     * a symbol takes at least one of them. */
    char *norm = sl_malloc(3 * (n + 1));                // (m) normalised text
    sp_sym *sym = sl_malloc(3 * (n + 1) * sizeof *sym); // (n_sym)
    if (!norm || !sym) {
        free(norm);
        free(sym);
        return SL_EFAIL;
    }
    size_t m = 0, n_sym = 0;
    for (size_t i = 0, pre = n && s->add_dummy_prefix; i < n || pre; pre = 0) {
        const char *txt;
        size_t len;
        int valid;
        i += next_char(bytes, n, i, (int)pre, &txt, &len, &valid);
        int32_t id = valid ? find_mergeable(s, txt, len) : -1, fb[4];
        if (id >= 0) {
            sym[n_sym++] = (sp_sym){.start = (uint32_t)m, .len = (uint32_t)len, .id = id, .merge = 1};
        } else {
            size_t nf = fallback_ids(s, txt, len, valid, fb);
            for (size_t j = 0; j < nf; j++) sym[n_sym++] = (sp_sym){.start = (uint32_t)m, .len = 1, .id = fb[j]};
        }
        memcpy(norm + m, txt, len);
        m += len;
    }
    n_sym = merge_naive(s, norm, sym, n_sym);
    for (size_t i = 0; i < n_sym; i++) out[(*k)++] = sym[i].id;
    free(norm);
    free(sym);
    return SL_OK;
}

/* The heap version, one run of mergeable characters at a time: byte and unk symbols never merge,
 * so a character without a piece (for llama, every newline) is a wall that no merge crosses, and
 * the runs between walls merge independently, exactly as in the whole text (within a run, each
 * merge the whole-text loop makes is the best one of that run). Memory: the longest run. */
static int encode_heap(const sl_tok_sp *s, const char *bytes, size_t n, int32_t *out, size_t *k)
{
    char *norm = NULL;   // (m) the run's normalised text
    sp_sym *sym = NULL;  // (n_sym) the run's symbols
    sp_pair *heap = NULL; // (3 n_sym) see merge_heap
    size_t cap_norm = 0, cap_sym = 0, cap_heap = 0;
    int rc = SL_OK;
    for (size_t i = 0, pre = n && s->add_dummy_prefix; (i < n || pre) && !rc;) {
        size_t m = 0, n_sym = 0, nf = 0;
        int32_t fb[4];
        while (i < n || pre) {
            const char *txt;
            size_t len;
            int valid;
            size_t used = next_char(bytes, n, i, (int)pre, &txt, &len, &valid);
            int32_t id = valid ? find_mergeable(s, txt, len) : -1;
            i += used;
            pre = 0;
            if (id < 0) {
                nf = fallback_ids(s, txt, len, valid, fb);
                break;
            }
            if ((rc = grow((void **)&norm, &cap_norm, m + len, 1)) ||
                (rc = grow((void **)&sym, &cap_sym, n_sym + 1, sizeof *sym)))
                break;
            sym[n_sym++] = (sp_sym){.start = (uint32_t)m, .len = (uint32_t)len, .id = id, .merge = 1};
            memcpy(norm + m, txt, len);
            m += len;
        }
        if (!rc) rc = grow((void **)&heap, &cap_heap, 3 * n_sym, sizeof *heap);
        if (rc) break;
        n_sym = merge_heap(s, norm, sym, n_sym, heap);
        for (size_t j = 0; j < n_sym; j++) out[(*k)++] = sym[j].id;
        for (size_t j = 0; j < nf; j++) out[(*k)++] = fb[j];
    }
    free(norm);
    free(sym);
    free(heap);
    return rc;
}

int sl_tok_sp_encode(const sl_tok_sp *s, const char *bytes, size_t n, int naive, int32_t **ids, size_t *n_ids)
{
    *ids = NULL;
    *n_ids = 0;
    if (n > (INT32_MAX - 3) / 3) return sl_fail(SL_EINPUT, "text to encode: %zu bytes, more than %d", n, (INT32_MAX - 3) / 3);
    /* At most one id per normalised byte (3 per space and for the dummy prefix: the bytes of '▁'
     * when it is not a piece), BOS and EOS. */
    int32_t *out = sl_malloc((3 * (n + 1) + 2) * sizeof *out);
    if (!out) return SL_EFAIL;
    size_t k = 0;
    if (s->add_bos) out[k++] = s->bos;
    int rc = naive ? encode_naive(s, bytes, n, out, &k) : encode_heap(s, bytes, n, out, &k);
    if (rc) {
        free(out);
        return rc;
    }
    if (s->add_eos) out[k++] = s->eos;
    *ids = out;
    *n_ids = k;
    return SL_OK;
}

int sl_tok_sp_decode(const sl_tok_sp *s, const int32_t *ids, size_t n, char **bytes, size_t *n_bytes)
{
    *bytes = NULL;
    *n_bytes = 0;
    size_t total = 0;
    for (size_t i = 0; i < n; i++) {
        if (ids[i] < 0 || (size_t)ids[i] >= s->n)
            return sl_fail(SL_EINPUT, "token id %d at position %zu is outside [0, %zu)", ids[i], i, s->n);
        total += s->bytes_off[ids[i] + 1] - s->bytes_off[ids[i]];
    }
    char *out = sl_malloc(total + 1);
    if (!out) return SL_EFAIL;
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        int32_t id = ids[i];
        if (id == s->bos || id == s->eos || s->type[id] == SP_CONTROL) continue;
        size_t len = s->bytes_off[id + 1] - s->bytes_off[id];
        memcpy(out + k, s->bytes + s->bytes_off[id], len);
        k += len;
    }
    /* The space the dummy prefix added (llama.cpp and llama-tokenizer-js drop it the same way). */
    if (s->add_dummy_prefix && k && out[0] == ' ') memmove(out, out + 1, --k);
    out[k] = 0;
    *bytes = out;
    *n_bytes = k;
    return SL_OK;
}
