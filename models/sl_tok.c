/*
 * sl_tok.c: byte-level BPE tokenizer (GPT-2 style), and the handle both kinds share: every public
 * function of sl_tok.h hands an sp-bpe tokenizer to models/sl_tok_sp.c. Sections: byte-to-unicode
 * mapping and UTF-8, hash maps, construction and validation, JSON and GPT-2 file loading,
 * pre-tokenisation, merging (reference and heap-based), encode/decode, training.
 *
 * What it refuses to be: a general Unicode normaliser or a tokenizer for other pre-tokenisation
 * schemes. It does exactly what GPT-2's encoder does on valid UTF-8, and stays lossless on
 * anything else.
 */
#define PCRE2_CODE_UNIT_WIDTH 8
#include "sl_tok.h"

#include <errno.h>
#include <json-c/json.h>
#include <pcre2.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sl_common.h"

/* GPT-2's pre-tokenisation pattern, as in its encoder.py. */
static const char GPT2_PATTERN[] =
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+";
static const char EOT[] = "<|endoftext|>";

/* ---------------------------------------------------------------------------------------------
 * Byte-to-unicode mapping and UTF-8
 * ------------------------------------------------------------------------------------------- */

/* GPT-2 writes each byte as one printable code point: bytes that are printable Latin-1 stand
 * for themselves, the other 68 map to U+0100.. in byte order. */
static int byte_to_cp[256];
static int cp_to_byte[324]; /* -1 where no byte maps to the code point */

static void byte_map_fill(void)
{
    int n = 0;
    for (int cp = 0; cp < 324; cp++) cp_to_byte[cp] = -1;
    for (int b = 0; b < 256; b++) {
        int printable = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255);
        byte_to_cp[b] = printable ? b : 256 + n++;
        cp_to_byte[byte_to_cp[b]] = b;
    }
}

static void byte_map_init(void)
{
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, byte_map_fill);
}

size_t sl_utf8_char_len(const unsigned char *s, size_t n)
{
    unsigned c = s[0];
    if (c < 0x80) return 1;
    if (c < 0xC2) return 0; /* continuation byte or overlong 2-byte lead */
    if (c < 0xE0) return n >= 2 && (s[1] & 0xC0) == 0x80 ? 2 : 0;
    if (c < 0xF0) {
        if (n < 3 || (s[1] & 0xC0) != 0x80 || (s[2] & 0xC0) != 0x80) return 0;
        if (c == 0xE0 && s[1] < 0xA0) return 0; /* overlong */
        if (c == 0xED && s[1] >= 0xA0) return 0; /* surrogates */
        return 3;
    }
    if (c < 0xF5) {
        if (n < 4 || (s[1] & 0xC0) != 0x80 || (s[2] & 0xC0) != 0x80 || (s[3] & 0xC0) != 0x80) return 0;
        if (c == 0xF0 && s[1] < 0x90) return 0; /* overlong */
        if (c == 0xF4 && s[1] >= 0x90) return 0; /* above U+10FFFF */
        return 4;
    }
    return 0;
}

size_t sl_utf8_valid_prefix(const unsigned char *s, size_t n)
{
    size_t i = 0;
    while (i < n) {
        size_t k = sl_utf8_char_len(s + i, n - i);
        if (!k) break;
        i += k;
    }
    return i;
}

static uint32_t utf8_decode(const unsigned char *s, size_t k)
{
    if (k == 1) return s[0];
    if (k == 2) return ((s[0] & 0x1Fu) << 6) | (s[1] & 0x3Fu);
    if (k == 3) return ((s[0] & 0x0Fu) << 12) | ((s[1] & 0x3Fu) << 6) | (s[2] & 0x3Fu);
    return ((s[0] & 0x07u) << 18) | ((s[1] & 0x3Fu) << 12) | ((s[2] & 0x3Fu) << 6) | (s[3] & 0x3Fu);
}

static size_t utf8_encode(uint32_t cp, char *out)
{
    if (cp < 0x80) { out[0] = (char)cp; return 1; }
    if (cp < 0x800) {
        out[0] = (char)(0xC0 | (cp >> 6));
        out[1] = (char)(0x80 | (cp & 0x3F));
        return 2;
    }
    out[0] = (char)(0xE0 | (cp >> 12));
    out[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
    out[2] = (char)(0x80 | (cp & 0x3F));
    return 3;
}

/* Converts GPT-2's unicode form of a token to its bytes; out must hold strlen(s) bytes.
 * Returns the byte count, or -1 if s holds a code point outside the mapping. */
static long unicode_to_bytes(const char *s, size_t n, unsigned char *out)
{
    size_t i = 0, k = 0;
    while (i < n) {
        size_t cl = sl_utf8_char_len((const unsigned char *)s + i, n - i);
        if (!cl) return -1;
        uint32_t cp = utf8_decode((const unsigned char *)s + i, cl);
        if (cp >= 324 || cp_to_byte[cp] < 0) return -1;
        out[k++] = (unsigned char)cp_to_byte[cp];
        i += cl;
    }
    return (long)k;
}

/* Appends the unicode form of n bytes to out (which must hold 2 * n bytes); returns its length. */
static size_t bytes_to_unicode(const unsigned char *b, size_t n, char *out)
{
    size_t k = 0;
    for (size_t i = 0; i < n; i++) k += utf8_encode((uint32_t)byte_to_cp[b[i]], out + k);
    return k;
}

/* ---------------------------------------------------------------------------------------------
 * Hash maps (open addressing, linear probing, power-of-two capacity)
 * ------------------------------------------------------------------------------------------- */

static inline uint64_t mix64(uint64_t x)
{
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdULL;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ULL;
    return x ^ (x >> 33);
}

static uint64_t hash_bytes(const unsigned char *s, size_t n)
{
    uint64_t h = 0xcbf29ce484222325ULL ^ n;
    for (size_t i = 0; i < n; i++) h = (h ^ s[i]) * 0x100000001b3ULL;
    return mix64(h);
}

static size_t pow2_at_least(size_t n)
{
    size_t c = 16;
    while (c < n) c <<= 1;
    return c;
}

/* uint64 key -> int32 value; key UINT64_MAX marks an empty slot. */
typedef struct {
    uint64_t *keys; // (cap)
    int32_t *vals;  // (cap)
    size_t cap, n;
} u64map;

static int u64map_init(u64map *m, size_t expect)
{
    m->cap = pow2_at_least(expect * 2 + 1);
    m->n = 0;
    m->keys = sl_malloc(m->cap * sizeof *m->keys);
    m->vals = sl_malloc(m->cap * sizeof *m->vals);
    if (!m->keys || !m->vals) return SL_EFAIL;
    memset(m->keys, 0xff, m->cap * sizeof *m->keys);
    return SL_OK;
}

static void u64map_free(u64map *m)
{
    free(m->keys);
    free(m->vals);
    memset(m, 0, sizeof *m);
}

static inline int32_t u64map_get(const u64map *m, uint64_t key)
{
    size_t mask = m->cap - 1, i = mix64(key) & mask;
    while (m->keys[i] != UINT64_MAX) {
        if (m->keys[i] == key) return m->vals[i];
        i = (i + 1) & mask;
    }
    return -1;
}

static int u64map_grow(u64map *m);

/* Returns the slot's value pointer, inserting val if the key is new. */
static int u64map_put(u64map *m, uint64_t key, int32_t val, int32_t **slot)
{
    if ((m->n + 1) * 2 > m->cap && u64map_grow(m)) return SL_EFAIL;
    size_t mask = m->cap - 1, i = mix64(key) & mask;
    while (m->keys[i] != UINT64_MAX) {
        if (m->keys[i] == key) {
            if (slot) *slot = &m->vals[i];
            return SL_OK;
        }
        i = (i + 1) & mask;
    }
    m->keys[i] = key;
    m->vals[i] = val;
    m->n++;
    if (slot) *slot = &m->vals[i];
    return SL_OK;
}

static int u64map_grow(u64map *m)
{
    u64map old = *m;
    if (u64map_init(m, old.cap)) {
        u64map_free(m);
        *m = old;
        return SL_EFAIL;
    }
    for (size_t i = 0; i < old.cap; i++)
        if (old.keys[i] != UINT64_MAX) u64map_put(m, old.keys[i], old.vals[i], NULL);
    u64map_free(&old);
    return SL_OK;
}

static inline uint64_t pair_key(int32_t a, int32_t b) { return ((uint64_t)(uint32_t)a << 32) | (uint32_t)b; }

/* ---------------------------------------------------------------------------------------------
 * The tokenizer
 * ------------------------------------------------------------------------------------------- */

struct sl_tok {
    size_t n_vocab;
    unsigned char *bytes; // (off[n_vocab]) every token's bytes, concatenated
    uint32_t *off;        // (n_vocab + 1) token id's bytes are bytes[off[id] .. off[id+1])
    uint8_t *is_special;  // (n_vocab)
    int32_t byte_id[256]; // id of the single-byte token for each byte
    size_t n_merges;
    int32_t *merge_left, *merge_right, *merge_result; // (n_merges) in rank order
    u64map pair_rank;                                 // (left, right) -> rank
    size_t n_special;
    int32_t *special; // (n_special) ids, longest text first so that matching prefers it
    pcre2_code *re;
    sl_tok_sp *sp; // non-NULL for an sp-bpe tokenizer: then only n_vocab above is set
};

size_t sl_tok_vocab_size(const sl_tok *t) { return t->n_vocab; }
size_t sl_tok_n_merges(const sl_tok *t) { return t->n_merges; }
const char *sl_tok_kind(const sl_tok *t) { return t->sp ? "sp-bpe" : "byte-bpe"; }
int32_t sl_tok_bos(const sl_tok *t) { return t->sp ? sl_tok_sp_bos(t->sp) : -1; }
int32_t sl_tok_eos(const sl_tok *t) { return t->sp ? sl_tok_sp_eos(t->sp) : sl_tok_special_id(t, EOT); }

int sl_tok_same_vocab(const sl_tok *a, const sl_tok *b, int32_t *first_diff)
{
    size_t na = sl_tok_vocab_size(a), nb = sl_tok_vocab_size(b), n = na < nb ? na : nb;
    for (size_t id = 0; id < n; id++) {
        size_t la, lb;
        const char *sa = sl_tok_token_bytes(a, (int32_t)id, &la), *sb = sl_tok_token_bytes(b, (int32_t)id, &lb);
        if (la != lb || memcmp(sa, sb, la)) {
            if (first_diff) *first_diff = (int32_t)id;
            return 0;
        }
    }
    if (na != nb) {
        if (first_diff) *first_diff = (int32_t)n;
        return 0;
    }
    return 1;
}

const char *sl_tok_token_bytes(const sl_tok *t, int32_t id, size_t *len)
{
    if (t->sp) return sl_tok_sp_token_bytes(t->sp, id, len);
    if (id < 0 || (size_t)id >= t->n_vocab) return NULL;
    *len = t->off[id + 1] - t->off[id];
    return (const char *)t->bytes + t->off[id];
}

int32_t sl_tok_special_id(const sl_tok *t, const char *text)
{
    if (t->sp) return sl_tok_sp_special_id(t->sp, text);
    size_t n = strlen(text);
    for (size_t i = 0; i < t->n_special; i++) {
        int32_t id = t->special[i];
        if (t->off[id + 1] - t->off[id] == n && !memcmp(t->bytes + t->off[id], text, n)) return id;
    }
    return -1;
}

void sl_tok_free(sl_tok *t)
{
    if (!t) return;
    free(t->bytes);
    free(t->off);
    free(t->is_special);
    free(t->merge_left);
    free(t->merge_right);
    free(t->merge_result);
    u64map_free(&t->pair_rank);
    free(t->special);
    if (t->re) pcre2_code_free(t->re);
    sl_tok_sp_free(t->sp);
    free(t);
}

static int compile_pattern(pcre2_code **out)
{
    int err;
    PCRE2_SIZE erroff;
    pcre2_code *re = pcre2_compile((PCRE2_SPTR)GPT2_PATTERN, PCRE2_ZERO_TERMINATED, PCRE2_UTF | PCRE2_UCP,
                                   &err, &erroff, NULL);
    if (!re) {
        PCRE2_UCHAR msg[256];
        pcre2_get_error_message(err, msg, sizeof msg);
        return sl_fail(SL_EFAIL, "pre-tokenisation regex does not compile: %s", (char *)msg);
    }
    /* JIT is an optimisation only: without it (e.g. a PCRE2 built without JIT) matching still works. */
    pcre2_jit_compile(re, PCRE2_JIT_COMPLETE);
    *out = re;
    return SL_OK;
}

static const char *tok_name(const sl_tok *t, int32_t id, char *buf, size_t cap)
{
    size_t n = t->off[id + 1] - t->off[id];
    if (n > 40) n = 40;
    size_t k = bytes_to_unicode(t->bytes + t->off[id], n, buf);
    if (k >= cap) k = cap - 1;
    buf[k] = 0;
    return buf;
}

/* Completes a tokenizer whose vocabulary (bytes, off, is_special, special) and merges are filled:
 * finds the byte tokens, indexes the merges, checks that they are well formed, compiles the regex.
 * Well formed means what BPE training produces, and what makes the heap-based merge equal GPT-2's
 * pass-by-pass one: each merge's result is the concatenation of its parts, no two merges produce
 * the same token, and each part is a single byte or the result of an earlier merge. */
static int tok_finish(sl_tok *t, const char *what)
{
    char b1[96], b2[96];
    for (int b = 0; b < 256; b++) t->byte_id[b] = -1;
    u64map tokmap = {0};
    if (u64map_init(&tokmap, t->n_vocab)) return SL_EFAIL;
    int rc = SL_OK;
    /* Token bytes -> id, through a hash of the bytes with collision check by comparison. */
    int32_t *chain = sl_malloc(t->n_vocab * sizeof *chain); // (n_vocab) next id with the same hash
    if (!chain) { u64map_free(&tokmap); return SL_EFAIL; }
    for (size_t id = 0; id < t->n_vocab && !rc; id++) {
        chain[id] = -1;
        if (t->is_special[id]) continue;
        size_t n = t->off[id + 1] - t->off[id];
        const unsigned char *s = t->bytes + t->off[id];
        if (n == 0) { rc = sl_fail(SL_EINPUT, "%s: vocab entry %zu is empty", what, id); break; }
        if (n == 1) t->byte_id[s[0]] = (int32_t)id;
        uint64_t h = hash_bytes(s, n) & ~(1ULL << 63);
        int32_t *slot;
        if (u64map_put(&tokmap, h, (int32_t)id, &slot)) { rc = SL_EFAIL; break; }
        for (int32_t j = *slot; j != (int32_t)id && j >= 0; j = chain[j]) {
            if (t->off[j + 1] - t->off[j] == n && !memcmp(t->bytes + t->off[j], s, n)) {
                rc = sl_fail(SL_EINPUT, "%s: vocab entries %d and %zu are the same token '%s'", what, j, id,
                             tok_name(t, j, b1, sizeof b1));
                break;
            }
        }
        if (!rc && *slot != (int32_t)id) {
            chain[id] = *slot;
            *slot = (int32_t)id;
        }
    }
    for (int b = 0; b < 256 && !rc; b++)
        if (t->byte_id[b] < 0) rc = sl_fail(SL_EINPUT, "%s: vocab has no token for byte 0x%02x", what, b);

    /* made[id] = rank of the merge producing id, -1 for bytes, -2 for not produced (yet). */
    int32_t *made = rc ? NULL : sl_malloc(t->n_vocab * sizeof *made);
    if (!rc && !made) rc = SL_EFAIL;
    if (!rc) {
        for (size_t id = 0; id < t->n_vocab; id++) made[id] = -2;
        for (int b = 0; b < 256; b++) made[t->byte_id[b]] = -1;
        if (u64map_init(&t->pair_rank, t->n_merges)) rc = SL_EFAIL;
    }
    unsigned char *cat = NULL;
    for (size_t r = 0; r < t->n_merges && !rc; r++) {
        int32_t a = t->merge_left[r], b = t->merge_right[r];
        if (made[a] == -2 || made[b] == -2) {
            rc = sl_fail(SL_EINPUT, "%s: merge %zu '%s %s': '%s' is neither a byte nor made by an earlier merge",
                         what, r, tok_name(t, a, b1, sizeof b1), tok_name(t, b, b2, sizeof b2),
                         made[a] == -2 ? b1 : b2);
            break;
        }
        size_t na = t->off[a + 1] - t->off[a], nb = t->off[b + 1] - t->off[b];
        unsigned char *c2 = realloc(cat, na + nb);
        if (!c2) { rc = sl_fail(SL_EFAIL, "out of memory"); break; }
        cat = c2;
        memcpy(cat, t->bytes + t->off[a], na);
        memcpy(cat + na, t->bytes + t->off[b], nb);
        int32_t z = -1;
        for (int32_t j = u64map_get(&tokmap, hash_bytes(cat, na + nb) & ~(1ULL << 63)); j >= 0; j = chain[j])
            if (t->off[j + 1] - t->off[j] == na + nb && !memcmp(t->bytes + t->off[j], cat, na + nb)) z = j;
        if (z < 0) {
            rc = sl_fail(SL_EINPUT, "%s: merge %zu '%s %s': the merged token is not in the vocab", what, r,
                         tok_name(t, a, b1, sizeof b1), tok_name(t, b, b2, sizeof b2));
            break;
        }
        if (made[z] != -2) {
            rc = sl_fail(SL_EINPUT, "%s: merge %zu '%s %s' makes a token that merge %d already made", what, r,
                         tok_name(t, a, b1, sizeof b1), tok_name(t, b, b2, sizeof b2), made[z]);
            break;
        }
        made[z] = (int32_t)r;
        t->merge_result[r] = z;
        if (u64map_put(&t->pair_rank, pair_key(a, b), (int32_t)r, NULL)) rc = SL_EFAIL;
    }
    free(cat);
    free(made);
    free(chain);
    u64map_free(&tokmap);
    if (!rc) rc = compile_pattern(&t->re);
    return rc;
}

/* Allocates the arrays of a tokenizer with n_vocab tokens of total_bytes bytes and n_merges. */
static sl_tok *tok_alloc(size_t n_vocab, size_t total_bytes, size_t n_merges)
{
    sl_tok *t = sl_calloc(1, sizeof *t);
    if (!t) return NULL;
    t->n_vocab = n_vocab;
    t->n_merges = n_merges;
    t->bytes = sl_malloc(total_bytes);
    t->off = sl_calloc(n_vocab + 1, sizeof *t->off);
    t->is_special = sl_calloc(n_vocab, 1);
    t->merge_left = sl_malloc(n_merges * sizeof(int32_t));
    t->merge_right = sl_malloc(n_merges * sizeof(int32_t));
    t->merge_result = sl_malloc(n_merges * sizeof(int32_t));
    if (!t->bytes || !t->off || !t->is_special || !t->merge_left || !t->merge_right || !t->merge_result) {
        sl_tok_free(t);
        return NULL;
    }
    return t;
}

/* Sorts the special ids longest text first (then by id) so that the longest match wins. */
static void sort_specials(sl_tok *t)
{
    for (size_t i = 1; i < t->n_special; i++) {
        int32_t x = t->special[i];
        size_t lx = t->off[x + 1] - t->off[x];
        size_t j = i;
        while (j > 0) {
            int32_t y = t->special[j - 1];
            size_t ly = t->off[y + 1] - t->off[y];
            if (ly > lx || (ly == lx && y < x)) break;
            t->special[j] = y;
            j--;
        }
        t->special[j] = x;
    }
}

/* ---------------------------------------------------------------------------------------------
 * JSON and GPT-2 files
 * ------------------------------------------------------------------------------------------- */

static int parse_json(const char *text, size_t len, const char *what, json_object **out)
{
    json_tokener *tk = json_tokener_new();
    if (!tk) return sl_fail(SL_EFAIL, "out of memory");
    json_object *o = json_tokener_parse_ex(tk, text, (int)len);
    enum json_tokener_error e = json_tokener_get_error(tk);
    size_t used = json_tokener_get_parse_end(tk);
    json_tokener_free(tk);
    if (!o || e != json_tokener_success) {
        if (o) json_object_put(o);
        return sl_fail(SL_EINPUT, "%s: malformed JSON (%s) near byte %zu", what,
                       e == json_tokener_continue ? "unexpected end" : json_tokener_error_desc(e), used);
    }
    for (size_t i = used; i < len; i++)
        if (!strchr(" \t\r\n", text[i])) {
            json_object_put(o);
            return sl_fail(SL_EINPUT, "%s: malformed JSON (trailing data at byte %zu)", what, i);
        }
    *out = o;
    return SL_OK;
}

int sl_tok_from_json(const char *json_text, sl_tok **out)
{
    const char *what = "tokenizer JSON";
    *out = NULL;
    if (!json_text) return sl_fail(SL_EINPUT, "%s: no text", what);
    byte_map_init();
    json_object *root;
    int rc = parse_json(json_text, strlen(json_text), what, &root);
    if (rc) return rc;
    json_object *type, *vocab, *merges, *special = NULL;
    sl_tok *t = NULL;
    if (!json_object_is_type(root, json_type_object)) {
        rc = sl_fail(SL_EINPUT, "%s: top level is not an object", what);
        goto done;
    }
    const char *kind = json_object_object_get_ex(root, "type", &type) && json_object_is_type(type, json_type_string)
                           ? json_object_get_string(type) : "";
    if (!strcmp(kind, "sp-bpe")) {
        sl_tok_sp *sp = NULL;
        rc = sl_tok_sp_from_json(root, what, &sp);
        if (!rc && !(t = sl_calloc(1, sizeof *t))) rc = SL_EFAIL;
        if (rc) {
            sl_tok_sp_free(sp);
            goto done;
        }
        t->sp = sp;
        t->n_vocab = sl_tok_sp_size(sp);
        goto done;
    }
    if (strcmp(kind, "byte-bpe")) {
        rc = sl_fail(SL_EINPUT, "%s: \"type\" must be \"byte-bpe\" or \"sp-bpe\"", what);
        goto done;
    }
    if (!json_object_object_get_ex(root, "vocab", &vocab) || !json_object_is_type(vocab, json_type_array)) {
        rc = sl_fail(SL_EINPUT, "%s: \"vocab\" must be an array of strings", what);
        goto done;
    }
    if (!json_object_object_get_ex(root, "merges", &merges) || !json_object_is_type(merges, json_type_array)) {
        rc = sl_fail(SL_EINPUT, "%s: \"merges\" must be an array of \"left right\" strings", what);
        goto done;
    }
    if (json_object_object_get_ex(root, "special", &special) && !json_object_is_type(special, json_type_object)) {
        rc = sl_fail(SL_EINPUT, "%s: \"special\" must be an object mapping text to id", what);
        goto done;
    }
    size_t nv = json_object_array_length(vocab), nm = json_object_array_length(merges);
    if (nv > INT32_MAX / 2) {
        rc = sl_fail(SL_EINPUT, "%s: vocab of %zu entries is too large", what, nv);
        goto done;
    }
    size_t total = 0;
    for (size_t i = 0; i < nv; i++) {
        json_object *e = json_object_array_get_idx(vocab, i);
        if (!json_object_is_type(e, json_type_string)) {
            rc = sl_fail(SL_EINPUT, "%s: vocab entry %zu is not a string", what, i);
            goto done;
        }
        total += (size_t)json_object_get_string_len(e);
    }
    t = tok_alloc(nv, total + 1, nm);
    if (!t) { rc = SL_EFAIL; goto done; }
    /* Specials first: their vocab entries are their own text, not the byte-to-unicode form. */
    if (special) {
        size_t ns = (size_t)json_object_object_length(special);
        t->special = sl_malloc((ns ? ns : 1) * sizeof *t->special);
        if (!t->special) { rc = SL_EFAIL; goto done; }
        json_object_object_foreach(special, key, val)
        {
            if (!json_object_is_type(val, json_type_int) || json_object_get_int64(val) < 0 ||
                (size_t)json_object_get_int64(val) >= nv) {
                rc = sl_fail(SL_EINPUT, "%s: special \"%s\" has id %s, expected an integer in [0, %zu)", what,
                             key, json_object_to_json_string(val), nv);
                goto done;
            }
            int32_t id = (int32_t)json_object_get_int64(val);
            const char *ve = json_object_get_string(json_object_array_get_idx(vocab, (size_t)id));
            if (strcmp(ve, key) || !key[0]) {
                rc = sl_fail(SL_EINPUT, "%s: special \"%s\" has id %d but vocab[%d] is \"%s\"", what, key, id, id, ve);
                goto done;
            }
            if (t->is_special[id]) {
                rc = sl_fail(SL_EINPUT, "%s: special id %d given twice", what, id);
                goto done;
            }
            t->is_special[id] = 1;
            t->special[t->n_special++] = id;
        }
    }
    size_t pos = 0;
    for (size_t i = 0; i < nv; i++) {
        json_object *e = json_object_array_get_idx(vocab, i);
        const char *s = json_object_get_string(e);
        size_t n = (size_t)json_object_get_string_len(e);
        t->off[i] = (uint32_t)pos;
        if (t->is_special[i]) {
            memcpy(t->bytes + pos, s, n);
            pos += n;
            continue;
        }
        long k = unicode_to_bytes(s, n, t->bytes + pos);
        if (k < 0) {
            rc = sl_fail(SL_EINPUT, "%s: vocab entry %zu \"%.40s\" has a character outside GPT-2's byte-to-unicode mapping",
                         what, i, s);
            goto done;
        }
        pos += (size_t)k;
    }
    t->off[nv] = (uint32_t)pos;
    /* Merge strings -> ids via the unicode form of each token. */
    {
        u64map m = {0};
        if (u64map_init(&m, nv)) { rc = SL_EFAIL; goto done; }
        int32_t *chain = sl_malloc(nv * sizeof *chain);
        if (!chain) { u64map_free(&m); rc = SL_EFAIL; goto done; }
        for (size_t i = 0; i < nv; i++) {
            chain[i] = -1;
            if (t->is_special[i]) continue;
            json_object *e = json_object_array_get_idx(vocab, i);
            uint64_t h = hash_bytes((const unsigned char *)json_object_get_string(e),
                                    (size_t)json_object_get_string_len(e)) & ~(1ULL << 63);
            int32_t *slot;
            if (u64map_put(&m, h, (int32_t)i, &slot)) { rc = SL_EFAIL; break; }
            if (*slot != (int32_t)i) { chain[i] = *slot; *slot = (int32_t)i; }
        }
        for (size_t r = 0; r < nm && !rc; r++) {
            json_object *e = json_object_array_get_idx(merges, r);
            const char *s = json_object_is_type(e, json_type_string) ? json_object_get_string(e) : NULL;
            const char *sp = s ? strchr(s, ' ') : NULL;
            if (!sp || sp == s || !sp[1] || strchr(sp + 1, ' ')) {
                rc = sl_fail(SL_EINPUT, "%s: merge %zu is %s, expected \"left right\" (two tokens, one space)", what,
                             r, json_object_to_json_string(e));
                break;
            }
            int32_t ids[2];
            const char *parts[2] = {s, sp + 1};
            size_t lens[2] = {(size_t)(sp - s), strlen(sp + 1)};
            for (int k = 0; k < 2 && !rc; k++) {
                ids[k] = -1;
                for (int32_t j = u64map_get(&m, hash_bytes((const unsigned char *)parts[k], lens[k]) & ~(1ULL << 63));
                     j >= 0; j = chain[j]) {
                    json_object *v = json_object_array_get_idx(vocab, (size_t)j);
                    if ((size_t)json_object_get_string_len(v) == lens[k] &&
                        !memcmp(json_object_get_string(v), parts[k], lens[k]))
                        ids[k] = j;
                }
                if (ids[k] < 0)
                    rc = sl_fail(SL_EINPUT, "%s: merge %zu \"%s\" refers to unknown token \"%.*s\"", what, r, s,
                                 (int)lens[k], parts[k]);
            }
            if (!rc) {
                t->merge_left[r] = ids[0];
                t->merge_right[r] = ids[1];
            }
        }
        free(chain);
        u64map_free(&m);
        if (rc) goto done;
    }
    sort_specials(t);
    rc = tok_finish(t, what);
done:
    json_object_put(root);
    if (rc) {
        sl_tok_free(t);
        return rc;
    }
    *out = t;
    return SL_OK;
}

char *sl_tok_to_json(const sl_tok *t)
{
    if (t->sp) return sl_tok_sp_to_json(t->sp);
    byte_map_init();
    json_object *root = json_object_new_object();
    json_object *vocab = json_object_new_array_ext((int)t->n_vocab);
    json_object *merges = json_object_new_array_ext((int)t->n_merges);
    json_object *special = json_object_new_object();
    size_t maxlen = 0;
    for (size_t i = 0; i < t->n_vocab; i++)
        if (t->off[i + 1] - t->off[i] > maxlen) maxlen = t->off[i + 1] - t->off[i];
    char *buf = malloc(4 * maxlen + 8);
    if (!root || !vocab || !merges || !special || !buf) {
        json_object_put(root);
        json_object_put(vocab);
        json_object_put(merges);
        json_object_put(special);
        free(buf);
        sl_fail(SL_EFAIL, "out of memory writing tokenizer JSON");
        return NULL;
    }
    json_object_object_add(root, "type", json_object_new_string("byte-bpe"));
    for (size_t i = 0; i < t->n_vocab; i++) {
        size_t n = t->off[i + 1] - t->off[i];
        if (t->is_special[i]) {
            json_object_array_add(vocab, json_object_new_string_len((const char *)t->bytes + t->off[i], (int)n));
            continue;
        }
        size_t k = bytes_to_unicode(t->bytes + t->off[i], n, buf);
        json_object_array_add(vocab, json_object_new_string_len(buf, (int)k));
    }
    char *mb = malloc(4 * (2 * maxlen) + 8);
    for (size_t r = 0; r < t->n_merges && mb; r++) {
        int32_t a = t->merge_left[r], b = t->merge_right[r];
        size_t k = bytes_to_unicode(t->bytes + t->off[a], t->off[a + 1] - t->off[a], mb);
        mb[k++] = ' ';
        k += bytes_to_unicode(t->bytes + t->off[b], t->off[b + 1] - t->off[b], mb + k);
        json_object_array_add(merges, json_object_new_string_len(mb, (int)k));
    }
    /* Specials in id order so that the output does not depend on the matching order. */
    for (size_t i = 0; i < t->n_vocab; i++)
        if (t->is_special[i]) {
            size_t n = t->off[i + 1] - t->off[i];
            memcpy(buf, t->bytes + t->off[i], n);
            buf[n] = 0;
            json_object_object_add(special, buf, json_object_new_int64((int64_t)i));
        }
    json_object_object_add(root, "vocab", vocab);
    json_object_object_add(root, "merges", merges);
    json_object_object_add(root, "special", special);
    char *out = NULL;
    if (mb) {
        const char *s = json_object_to_json_string_ext(root, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE);
        out = s ? strdup(s) : NULL;
    }
    if (!out) sl_fail(SL_EFAIL, "out of memory writing tokenizer JSON");
    free(mb);
    free(buf);
    json_object_put(root);
    return out;
}

static int read_file(const char *path, char **text, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f) return sl_fail(SL_EINPUT, "cannot read %s: %s", path, strerror(errno));
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap);
    while (buf) {
        size_t k = fread(buf + n, 1, cap - n - 1, f);
        n += k;
        if (n + 1 < cap) break;
        char *b2 = realloc(buf, cap * 2);
        if (!b2) { free(buf); buf = NULL; break; }
        buf = b2;
        cap *= 2;
    }
    int err = ferror(f);
    fclose(f);
    if (!buf) return sl_fail(SL_EFAIL, "out of memory reading %s", path);
    if (err) {
        free(buf);
        return sl_fail(SL_EINPUT, "error reading %s", path);
    }
    buf[n] = 0;
    *text = buf;
    *len = n;
    return SL_OK;
}

int sl_tok_load_gpt2(const char *encoder_json, const char *vocab_bpe, sl_tok **out)
{
    *out = NULL;
    char *etext = NULL, *mtext = NULL;
    int rc = read_file(encoder_json, &etext, &(size_t){0});
    size_t mlen = 0;
    if (!rc) rc = read_file(vocab_bpe, &mtext, &mlen);
    json_object *enc = NULL, *doc = NULL;
    if (!rc) rc = parse_json(etext, strlen(etext), encoder_json, &enc);
    if (!rc && !json_object_is_type(enc, json_type_object))
        rc = sl_fail(SL_EINPUT, "%s: expected an object mapping token to id", encoder_json);
    size_t nv = rc ? 0 : (size_t)json_object_object_length(enc);
    const char **keys = rc ? NULL : sl_calloc(nv ? nv : 1, sizeof *keys); // (nv) token text by id
    if (!rc && !keys) rc = SL_EFAIL;
    if (!rc) {
        json_object_object_foreach(enc, key, val)
        {
            int64_t id = json_object_is_type(val, json_type_int) ? json_object_get_int64(val) : -1;
            if (id < 0 || (size_t)id >= nv || keys[id]) {
                rc = sl_fail(SL_EINPUT, "%s: token \"%.40s\" has id %s, expected distinct ids 0..%zu", encoder_json,
                             key, json_object_to_json_string(val), nv - 1);
                break;
            }
            keys[id] = key;
        }
    }
    /* Re-express as our JSON form and load that, so that there is one validating loader. */
    if (!rc) {
        doc = json_object_new_object();
        json_object *vocab = json_object_new_array_ext((int)nv), *merges = json_object_new_array();
        json_object *special = json_object_new_object();
        json_object_object_add(doc, "type", json_object_new_string("byte-bpe"));
        json_object_object_add(doc, "vocab", vocab);
        json_object_object_add(doc, "merges", merges);
        json_object_object_add(doc, "special", special);
        for (size_t i = 0; i < nv; i++) {
            json_object_array_add(vocab, json_object_new_string(keys[i]));
            if (!strcmp(keys[i], EOT)) json_object_object_add(special, EOT, json_object_new_int64((int64_t)i));
        }
        char *line = mtext;
        size_t lineno = 0;
        while (line && *line) {
            char *nl = strchr(line, '\n');
            if (nl) *nl = 0;
            size_t ll = strlen(line);
            if (ll && line[ll - 1] == '\r') line[--ll] = 0;
            lineno++;
            if (!(lineno == 1 && !strncmp(line, "#version", 8)) && ll)
                json_object_array_add(merges, json_object_new_string(line));
            line = nl ? nl + 1 : NULL;
        }
        const char *s = json_object_to_json_string_ext(doc, JSON_C_TO_STRING_PLAIN);
        rc = sl_tok_from_json(s, out);
        if (rc) {
            char msg[1024];
            snprintf(msg, sizeof msg, "%s", sl_errmsg());
            rc = sl_fail(rc, "%s + %s: %s", encoder_json, vocab_bpe, msg);
        }
    }
    if (doc) json_object_put(doc);
    if (enc) json_object_put(enc);
    free(keys);
    free(etext);
    free(mtext);
    return rc;
}

/* ---------------------------------------------------------------------------------------------
 * Merging one piece
 * ------------------------------------------------------------------------------------------- */

static inline int32_t rank_of(const sl_tok *t, int32_t a, int32_t b)
{
    return u64map_get(&t->pair_rank, pair_key(a, b));
}

/* GPT-2's algorithm: find the lowest-rank adjacent pair, merge every occurrence of it left to
 * right, repeat. O(n^2) per piece, which is fastest for the short pieces that dominate text. */
static size_t merge_naive(const sl_tok *t, int32_t *s, size_t n)
{
    while (n > 1) {
        int32_t best = INT32_MAX;
        for (size_t i = 0; i + 1 < n; i++) {
            int32_t r = rank_of(t, s[i], s[i + 1]);
            if (r >= 0 && r < best) best = r;
        }
        if (best == INT32_MAX) break;
        int32_t L = t->merge_left[best], R = t->merge_right[best], Z = t->merge_result[best];
        size_t j = 0;
        for (size_t i = 0; i < n;) {
            if (i + 1 < n && s[i] == L && s[i + 1] == R) {
                s[j++] = Z;
                i += 2;
            } else {
                s[j++] = s[i++];
            }
        }
        n = j;
    }
    return n;
}

/* Heap entries order by (rank, position): the same order in which GPT-2's passes merge. */
static inline int heap_less(const int32_t *h, size_t i, size_t j)
{
    return h[2 * i] < h[2 * j] || (h[2 * i] == h[2 * j] && h[2 * i + 1] < h[2 * j + 1]);
}

static inline void heap_swap(int32_t *h, size_t i, size_t j)
{
    int32_t a = h[2 * i], b = h[2 * i + 1];
    h[2 * i] = h[2 * j];
    h[2 * i + 1] = h[2 * j + 1];
    h[2 * j] = a;
    h[2 * j + 1] = b;
}

static void heap_push(int32_t *h, size_t *n, int32_t rank, int32_t pos)
{
    size_t i = (*n)++;
    h[2 * i] = rank;
    h[2 * i + 1] = pos;
    while (i > 0 && heap_less(h, i, (i - 1) / 2)) {
        heap_swap(h, i, (i - 1) / 2);
        i = (i - 1) / 2;
    }
}

static void heap_pop(int32_t *h, size_t *n)
{
    size_t m = --(*n);
    h[0] = h[2 * m];
    h[1] = h[2 * m + 1];
    size_t i = 0;
    for (;;) {
        size_t l = 2 * i + 1, r = l + 1, s = i;
        if (l < m && heap_less(h, l, s)) s = l;
        if (r < m && heap_less(h, r, s)) s = r;
        if (s == i) break;
        heap_swap(h, i, s);
        i = s;
    }
}

/* The same result as merge_naive in O(n log n): a doubly linked list of symbols and a heap of
 * candidate pairs. An entry is stale when its pair is no longer there; a position's symbol only
 * ever grows, so checking both symbols against the merge's parts detects that. For well-formed
 * merges (tok_finish checks) a merge never creates a pair of lower or equal rank, so popping by
 * (rank, position) reproduces GPT-2's left-to-right passes exactly. */
static size_t merge_heap(const sl_tok *t, int32_t *s, size_t n, int32_t *work)
{
    if (n < 2) return n;
    int32_t *prev = work;     // (n)
    int32_t *next = work + n; // (n)
    int32_t *heap = work + 2 * n; // (3n, 2): at most n-1 initial pairs + 2 per merge
    size_t hn = 0;
    for (size_t i = 0; i < n; i++) {
        prev[i] = (int32_t)i - 1;
        next[i] = (int32_t)i + 1;
    }
    for (size_t i = 0; i + 1 < n; i++) {
        int32_t r = rank_of(t, s[i], s[i + 1]);
        if (r >= 0) heap_push(heap, &hn, r, (int32_t)i);
    }
    while (hn) {
        int32_t r = heap[0], i = heap[1];
        heap_pop(heap, &hn);
        int32_t j = next[i];
        if (s[i] < 0 || j >= (int32_t)n || s[i] != t->merge_left[r] || s[j] != t->merge_right[r]) continue;
        s[i] = t->merge_result[r];
        s[j] = -1;
        next[i] = next[j];
        if (next[j] < (int32_t)n) prev[next[j]] = i;
        if (prev[i] >= 0) {
            int32_t r2 = rank_of(t, s[prev[i]], s[i]);
            if (r2 >= 0) heap_push(heap, &hn, r2, prev[i]);
        }
        if (next[i] < (int32_t)n) {
            int32_t r2 = rank_of(t, s[i], s[next[i]]);
            if (r2 >= 0) heap_push(heap, &hn, r2, i);
        }
    }
    size_t k = 0;
    for (int32_t i = 0; i < (int32_t)n; i = next[i]) s[k++] = s[i];
    return k;
}

/* Pieces up to this many bytes use the quadratic algorithm (cheaper for short pieces). */
enum { NAIVE_MAX = 12 }; /* crossover measured by tests/bench/bench_tok.c */

size_t sl_tok_merge_piece(const sl_tok *t, int32_t *syms, size_t n, int naive, int32_t *work)
{
    if (t->sp) return n;
    return naive ? merge_naive(t, syms, n) : merge_heap(t, syms, n, work);
}

/* ---------------------------------------------------------------------------------------------
 * Pre-tokenisation
 * ------------------------------------------------------------------------------------------- */

/* Called for each piece; special >= 0 for a special token (then s/n are its text). */
typedef int (*piece_fn)(void *ctx, const unsigned char *s, size_t n, int32_t special);

typedef struct {
    const pcre2_code *re;
    pcre2_match_data *md;
    int jit;
} pretok;

/* Runs the regex over valid UTF-8 text; every byte ends up in exactly one piece. */
static int pretok_valid(pretok *p, const unsigned char *s, size_t n, piece_fn fn, void *ctx)
{
    size_t off = 0;
    while (off < n) {
        int m = p->jit ? pcre2_jit_match(p->re, s, n, off, PCRE2_NO_UTF_CHECK, p->md, NULL)
                       : pcre2_match(p->re, s, n, off, PCRE2_NO_UTF_CHECK, p->md, NULL);
        if (m < 0 && m != PCRE2_ERROR_NOMATCH) {
            PCRE2_UCHAR msg[256];
            pcre2_get_error_message(m, msg, sizeof msg);
            return sl_fail(SL_EFAIL, "pre-tokenisation regex failed: %s", (char *)msg);
        }
        PCRE2_SIZE *ov = pcre2_get_ovector_pointer(p->md);
        size_t a = m < 0 ? n : ov[0], b = m < 0 ? n : ov[1];
        /* The pattern's alternatives cover every character, so gaps cannot occur; if they did,
         * the gap still becomes a piece, so no byte is ever lost. */
        if (a > off) {
            int rc = fn(ctx, s + off, a - off, -1);
            if (rc) return rc;
        }
        if (b <= a) {
            if (a >= n) break;
            b = a + 1;
            while (b < n && (s[b] & 0xC0) == 0x80) b++;
        }
        int rc = fn(ctx, s + a, b - a, -1);
        if (rc) return rc;
        off = b;
    }
    return SL_OK;
}

/* Cuts text into special tokens, runs of invalid UTF-8 (each run one piece) and regex pieces. */
static int pretok_run(pretok *p, const sl_tok *t, const unsigned char *s, size_t n, piece_fn fn, void *ctx)
{
    /* Next occurrence of each special at or after pos (SIZE_MAX: none left), cached so that a
     * special that is absent is not searched for again at every segment. */
    enum { MAX_CACHED = 64 };
    size_t next_hit[MAX_CACHED];
    size_t ns = t ? t->n_special : 0;
    const size_t UNKNOWN = SIZE_MAX - 1;
    for (size_t k = 0; k < ns && k < MAX_CACHED; k++) next_hit[k] = UNKNOWN;
    size_t pos = 0;
    while (pos < n) {
        /* Earliest special occurrence; at the same position the longest wins (sorted first). */
        size_t seg_end = n, sp_len = 0;
        int32_t sp_id = -1;
        for (size_t k = 0; k < ns; k++) {
            int32_t id = t->special[k];
            size_t ln = t->off[id + 1] - t->off[id], at;
            if (k < MAX_CACHED && next_hit[k] < UNKNOWN && next_hit[k] >= pos) {
                at = next_hit[k];
            } else if (k < MAX_CACHED && next_hit[k] == SIZE_MAX) {
                continue;
            } else {
                const unsigned char *hit = memmem(s + pos, n - pos, t->bytes + t->off[id], ln);
                at = hit ? (size_t)(hit - s) : SIZE_MAX;
                if (k < MAX_CACHED) next_hit[k] = at;
            }
            if (at < seg_end) {
                seg_end = at;
                sp_id = id;
                sp_len = ln;
            }
        }
        size_t i = pos;
        while (i < seg_end) {
            size_t v = sl_utf8_valid_prefix(s + i, seg_end - i);
            if (v) {
                int rc = pretok_valid(p, s + i, v, fn, ctx);
                if (rc) return rc;
                i += v;
            }
            size_t j = i;
            while (j < seg_end && !sl_utf8_char_len(s + j, seg_end - j)) j++;
            if (j > i) {
                int rc = fn(ctx, s + i, j - i, -1);
                if (rc) return rc;
                i = j;
            }
        }
        if (sp_id >= 0) {
            int rc = fn(ctx, s + seg_end, sp_len, sp_id);
            if (rc) return rc;
            pos = seg_end + sp_len;
        } else {
            pos = n;
        }
    }
    return SL_OK;
}

static int pretok_init(pretok *p, const pcre2_code *re)
{
    p->re = re;
    p->md = pcre2_match_data_create_from_pattern(re, NULL);
    if (!p->md) return sl_fail(SL_EFAIL, "out of memory");
    size_t jit_size = 0;
    p->jit = pcre2_pattern_info(re, PCRE2_INFO_JITSIZE, &jit_size) == 0 && jit_size > 0;
    return SL_OK;
}

/* ---------------------------------------------------------------------------------------------
 * Encode and decode
 * ------------------------------------------------------------------------------------------- */

typedef struct {
    const sl_tok *t;
    int32_t *ids; // (cap) output
    size_t n, cap;
    int32_t *syms; // (sym_cap) one piece's symbols
    int32_t *work; // (8 * sym_cap) heap merge workspace
    size_t sym_cap;
    int naive; // 1: GPT-2's pass-by-pass merge for every piece (sl_tok_encode_ref)
} enc_ctx;

static int enc_piece(void *vctx, const unsigned char *s, size_t n, int32_t special)
{
    enc_ctx *c = vctx;
    size_t need = special >= 0 ? 1 : n;
    if (special < 0 && n > c->sym_cap) {
        size_t cap = n * 2;
        int32_t *a = realloc(c->syms, cap * sizeof *a), *w = a ? realloc(c->work, 8 * cap * sizeof *w) : NULL;
        if (a) c->syms = a;
        if (w) c->work = w;
        if (!a || !w) return sl_fail(SL_EFAIL, "out of memory encoding");
        c->sym_cap = cap;
    }
    if (c->n + need > c->cap) {
        size_t cap = (c->n + need) * 2;
        int32_t *a = realloc(c->ids, cap * sizeof *a);
        if (!a) return sl_fail(SL_EFAIL, "out of memory encoding");
        c->ids = a;
        c->cap = cap;
    }
    if (special >= 0) {
        c->ids[c->n++] = special;
        return SL_OK;
    }
    for (size_t i = 0; i < n; i++) c->syms[i] = c->t->byte_id[s[i]];
    size_t k = c->naive || n <= NAIVE_MAX ? merge_naive(c->t, c->syms, n) : merge_heap(c->t, c->syms, n, c->work);
    memcpy(c->ids + c->n, c->syms, k * sizeof *c->syms);
    c->n += k;
    return SL_OK;
}

static int encode(const sl_tok *t, const char *bytes, size_t n, int naive, int32_t **ids, size_t *n_ids)
{
    *ids = NULL;
    *n_ids = 0;
    if (t->sp) return sl_tok_sp_encode(t->sp, bytes, n, naive, ids, n_ids);
    enc_ctx c = {.t = t, .naive = naive};
    c.cap = n / 3 + 16;
    c.sym_cap = 256;
    c.ids = malloc(c.cap * sizeof *c.ids);
    c.syms = malloc(c.sym_cap * sizeof *c.syms);
    c.work = malloc(8 * c.sym_cap * sizeof *c.work);
    pretok p = {0};
    int rc = (!c.ids || !c.syms || !c.work) ? sl_fail(SL_EFAIL, "out of memory encoding") : SL_OK;
    if (!rc) rc = pretok_init(&p, t->re);
    if (!rc) rc = pretok_run(&p, t, (const unsigned char *)bytes, n, enc_piece, &c);
    if (p.md) pcre2_match_data_free(p.md);
    free(c.syms);
    free(c.work);
    if (rc) {
        free(c.ids);
        return rc;
    }
    *ids = c.ids;
    *n_ids = c.n;
    return SL_OK;
}

int sl_tok_encode(const sl_tok *t, const char *bytes, size_t n, int32_t **ids, size_t *n_ids)
{
    return encode(t, bytes, n, 0, ids, n_ids);
}

int sl_tok_encode_ref(const sl_tok *t, const char *bytes, size_t n, int32_t **ids, size_t *n_ids)
{
    return encode(t, bytes, n, 1, ids, n_ids);
}

int sl_tok_decode(const sl_tok *t, const int32_t *ids, size_t n, char **bytes, size_t *n_bytes)
{
    *bytes = NULL;
    *n_bytes = 0;
    if (t->sp) return sl_tok_sp_decode(t->sp, ids, n, bytes, n_bytes);
    size_t total = 0;
    for (size_t i = 0; i < n; i++) {
        if (ids[i] < 0 || (size_t)ids[i] >= t->n_vocab)
            return sl_fail(SL_EINPUT, "token id %d at position %zu is outside [0, %zu)", ids[i], i, t->n_vocab);
        total += t->off[ids[i] + 1] - t->off[ids[i]];
    }
    char *out = sl_malloc(total + 1);
    if (!out) return SL_EFAIL;
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        size_t ln = t->off[ids[i] + 1] - t->off[ids[i]];
        memcpy(out + k, t->bytes + t->off[ids[i]], ln);
        k += ln;
    }
    out[k] = 0;
    *bytes = out;
    *n_bytes = k;
    return SL_OK;
}

typedef struct {
    const unsigned char *base;
    size_t *ends; // (cap)
    size_t n, cap;
} split_ctx;

static int split_piece(void *vctx, const unsigned char *s, size_t n, int32_t special)
{
    (void)special;
    split_ctx *c = vctx;
    if (c->n == c->cap) {
        size_t cap = c->cap ? c->cap * 2 : 64;
        size_t *e = realloc(c->ends, cap * sizeof *e);
        if (!e) return sl_fail(SL_EFAIL, "out of memory splitting");
        c->ends = e;
        c->cap = cap;
    }
    c->ends[c->n++] = (size_t)(s - c->base) + n;
    return SL_OK;
}

static void eot_only(sl_tok *eot, uint32_t *off, int32_t *id)
{
    memset(eot, 0, sizeof *eot);
    off[0] = 0;
    off[1] = (uint32_t)strlen(EOT);
    *id = 0;
    eot->n_vocab = 1;
    eot->bytes = (unsigned char *)EOT;
    eot->off = off;
    eot->n_special = 1;
    eot->special = id;
}

int sl_tok_split(const sl_tok *t, const char *bytes, size_t n, size_t **ends, size_t *n_pieces)
{
    *ends = NULL;
    *n_pieces = 0;
    sl_tok eot;
    uint32_t eot_off[2];
    int32_t eot_id;
    pcre2_code *own = NULL;
    if (t && t->sp) {
        if (!n) return SL_OK;
        if (!(*ends = sl_malloc(sizeof **ends))) return SL_EFAIL;
        (*ends)[0] = n;
        *n_pieces = 1;
        return SL_OK;
    }
    if (!t) {
        eot_only(&eot, eot_off, &eot_id);
        int rc = compile_pattern(&own);
        if (rc) return rc;
        eot.re = own;
        t = &eot;
    }
    split_ctx c = {.base = (const unsigned char *)bytes};
    pretok p = {0};
    int rc = pretok_init(&p, t->re);
    if (!rc) rc = pretok_run(&p, t, (const unsigned char *)bytes, n, split_piece, &c);
    if (p.md) pcre2_match_data_free(p.md);
    if (own) pcre2_code_free(own);
    if (rc) {
        free(c.ends);
        return rc;
    }
    *ends = c.ends;
    *n_pieces = c.n;
    return SL_OK;
}

/* ---------------------------------------------------------------------------------------------
 * Training
 * ------------------------------------------------------------------------------------------- */

/* Unique pre-tokenised words with their counts; each word's symbols are merged in place. */
typedef struct {
    unsigned char *arena; // word bytes, concatenated
    size_t arena_n, arena_cap;
    uint32_t *w_off, *w_len; // (n_words) bytes of each word in the arena
    uint64_t *w_count;       // (n_words)
    size_t n_words, w_cap;
    u64map index; // hash of bytes -> first word id with that hash
    int32_t *chain; // (w_cap) next word with the same hash
} word_table;

static int words_add(void *vctx, const unsigned char *s, size_t n, int32_t special)
{
    word_table *w = vctx;
    if (special >= 0) return SL_OK;
    uint64_t h = hash_bytes(s, n) & ~(1ULL << 63);
    int32_t first = u64map_get(&w->index, h);
    for (int32_t j = first; j >= 0; j = w->chain[j])
        if (w->w_len[j] == n && !memcmp(w->arena + w->w_off[j], s, n)) {
            w->w_count[j]++;
            return SL_OK;
        }
    if (w->n_words == w->w_cap) {
        size_t cap = w->w_cap ? w->w_cap * 2 : 4096;
        uint32_t *o = realloc(w->w_off, cap * sizeof *o);
        if (o) w->w_off = o;
        uint32_t *l = realloc(w->w_len, cap * sizeof *l);
        if (l) w->w_len = l;
        uint64_t *c = realloc(w->w_count, cap * sizeof *c);
        if (c) w->w_count = c;
        int32_t *ch = realloc(w->chain, cap * sizeof *ch);
        if (ch) w->chain = ch;
        if (!o || !l || !c || !ch) return sl_fail(SL_EFAIL, "out of memory counting words");
        w->w_cap = cap;
    }
    if (w->arena_n + n > w->arena_cap) {
        size_t cap = (w->arena_n + n) * 2;
        unsigned char *a = realloc(w->arena, cap);
        if (!a) return sl_fail(SL_EFAIL, "out of memory counting words");
        w->arena = a;
        w->arena_cap = cap;
    }
    if (w->arena_n + n > UINT32_MAX || w->n_words >= INT32_MAX)
        return sl_fail(SL_EINPUT, "training corpus has more than 4 GB of distinct words");
    size_t id = w->n_words++;
    memcpy(w->arena + w->arena_n, s, n);
    w->w_off[id] = (uint32_t)w->arena_n;
    w->w_len[id] = (uint32_t)n;
    w->w_count[id] = 1;
    w->arena_n += n;
    int32_t *slot;
    if (u64map_put(&w->index, h, (int32_t)id, &slot)) return SL_EFAIL;
    w->chain[id] = *slot == (int32_t)id ? -1 : *slot;
    *slot = (int32_t)id;
    return SL_OK;
}

/* Candidate pairs and where they occur. */
typedef struct {
    int32_t left, right;
    int64_t count;        // occurrences weighted by word count
    int64_t count_before; // count at the start of the current merge step
    int32_t stamp;        // merge step that last touched the pair
    int32_t *words;       // (n_words) words where the pair may occur (may hold stale entries)
    uint32_t n_words, cap_words;
} pair_stat;

typedef struct {
    pair_stat *p; // (n)
    size_t n, cap;
    u64map index; // (left, right) -> pair index
    int32_t *touched; // (n_touched) pairs whose count changed in this step
    size_t n_touched, cap_touched;
    /* Max-heap of (count, left, right); entries go stale when counts change (see train_merge). */
    struct heap_e { int64_t count; int32_t left, right; } *heap;
    size_t heap_n, heap_cap;
} pair_table;

static inline int pe_better(const struct heap_e *a, const struct heap_e *b)
{
    if (a->count != b->count) return a->count > b->count;
    if (a->left != b->left) return a->left < b->left;
    return a->right < b->right;
}

static int pq_push(pair_table *pt, int64_t count, int32_t left, int32_t right)
{
    if (pt->heap_n == pt->heap_cap) {
        size_t cap = pt->heap_cap ? pt->heap_cap * 2 : 1024;
        struct heap_e *h = realloc(pt->heap, cap * sizeof *h);
        if (!h) return sl_fail(SL_EFAIL, "out of memory training");
        pt->heap = h;
        pt->heap_cap = cap;
    }
    size_t i = pt->heap_n++;
    pt->heap[i] = (struct heap_e){count, left, right};
    while (i > 0 && pe_better(&pt->heap[i], &pt->heap[(i - 1) / 2])) {
        struct heap_e tmp = pt->heap[i];
        pt->heap[i] = pt->heap[(i - 1) / 2];
        pt->heap[(i - 1) / 2] = tmp;
        i = (i - 1) / 2;
    }
    return SL_OK;
}

static struct heap_e pq_pop(pair_table *pt)
{
    struct heap_e top = pt->heap[0];
    size_t m = --pt->heap_n;
    pt->heap[0] = pt->heap[m];
    size_t i = 0;
    for (;;) {
        size_t l = 2 * i + 1, r = l + 1, s = i;
        if (l < m && pe_better(&pt->heap[l], &pt->heap[s])) s = l;
        if (r < m && pe_better(&pt->heap[r], &pt->heap[s])) s = r;
        if (s == i) break;
        struct heap_e tmp = pt->heap[i];
        pt->heap[i] = pt->heap[s];
        pt->heap[s] = tmp;
        i = s;
    }
    return top;
}

/* Adds delta occurrences of (a, b); records word w (>= 0) as a place where the pair occurs. */
static int pair_add(pair_table *pt, int32_t a, int32_t b, int64_t delta, int32_t step, int32_t w)
{
    int32_t *slot;
    if (u64map_put(&pt->index, pair_key(a, b), (int32_t)pt->n, &slot)) return SL_EFAIL;
    if (*slot == (int32_t)pt->n) {
        if (pt->n == pt->cap) {
            size_t cap = pt->cap ? pt->cap * 2 : 4096;
            pair_stat *p = realloc(pt->p, cap * sizeof *p);
            if (!p) return sl_fail(SL_EFAIL, "out of memory training");
            pt->p = p;
            pt->cap = cap;
        }
        pt->p[pt->n++] = (pair_stat){.left = a, .right = b, .stamp = -1};
    }
    pair_stat *ps = &pt->p[*slot];
    if (ps->stamp != step) {
        ps->stamp = step;
        ps->count_before = ps->count;
        if (pt->n_touched == pt->cap_touched) {
            size_t cap = pt->cap_touched ? pt->cap_touched * 2 : 1024;
            int32_t *tc = realloc(pt->touched, cap * sizeof *tc);
            if (!tc) return sl_fail(SL_EFAIL, "out of memory training");
            pt->touched = tc;
            pt->cap_touched = cap;
        }
        pt->touched[pt->n_touched++] = *slot;
    }
    ps->count += delta;
    if (w >= 0 && (ps->n_words == 0 || ps->words[ps->n_words - 1] != w)) {
        if (ps->n_words == ps->cap_words) {
            uint32_t cap = ps->cap_words ? ps->cap_words * 2 : 4;
            int32_t *ws = realloc(ps->words, cap * sizeof *ws);
            if (!ws) return sl_fail(SL_EFAIL, "out of memory training");
            ps->words = ws;
            ps->cap_words = cap;
        }
        ps->words[ps->n_words++] = w;
    }
    return SL_OK;
}

int sl_tok_train(const char *const *texts, const size_t *lens, size_t n_texts, size_t vocab_size,
                 const sl_tok_train_opts *opts, sl_tok **out)
{
    *out = NULL;
    byte_map_init();
    if (vocab_size < 257 || vocab_size > (1u << 24))
        return sl_fail(SL_EINPUT, "vocab size %zu is outside [257, %u] (256 bytes + merges + <|endoftext|>)",
                       vocab_size, 1u << 24);
    uint64_t min_count = opts && opts->min_count ? opts->min_count : 2;
    int verbose = opts ? opts->verbose : 0;
    for (size_t i = 0; i < n_texts; i++) {
        size_t v = sl_utf8_valid_prefix((const unsigned char *)texts[i], lens[i]);
        if (v != lens[i]) return sl_fail(SL_EINPUT, "training text %zu is not valid UTF-8 at byte %zu", i, v);
    }
    int rc = SL_OK;
    word_table wt = {0};
    pair_table pt = {0};
    pcre2_code *re = NULL;
    pretok p = {0};
    int32_t *syms = NULL, *sym_off = NULL, *sym_len = NULL, *wstamp = NULL;
    int32_t *m_left = NULL, *m_right = NULL;
    sl_tok *t = NULL;
    size_t n_merges_max = vocab_size - 257, n_merges = 0;

    /* A stand-in tokenizer holding only <|endoftext|>, so pretok_run splits documents there. */
    sl_tok eot;
    uint32_t eot_off[2];
    int32_t eot_id;
    eot_only(&eot, eot_off, &eot_id);

    if ((rc = compile_pattern(&re)) || (rc = pretok_init(&p, re)) || (rc = u64map_init(&wt.index, 1 << 16)))
        goto done;
    for (size_t i = 0; i < n_texts && !rc; i++)
        rc = pretok_run(&p, &eot, (const unsigned char *)texts[i], lens[i], words_add, &wt);
    if (rc) goto done;
    if (verbose) fprintf(stderr, "tokenize train: %zu distinct words\n", wt.n_words);

    /* Symbols of every word, initially its bytes (byte b has id b). */
    syms = sl_malloc((wt.arena_n + 1) * sizeof *syms);
    sym_off = sl_malloc((wt.n_words + 1) * sizeof *sym_off);
    sym_len = sl_malloc((wt.n_words + 1) * sizeof *sym_len);
    wstamp = sl_malloc((wt.n_words + 1) * sizeof *wstamp);
    m_left = sl_malloc((n_merges_max + 1) * sizeof *m_left);
    m_right = sl_malloc((n_merges_max + 1) * sizeof *m_right);
    if (!syms || !sym_off || !sym_len || !wstamp || !m_left || !m_right) { rc = SL_EFAIL; goto done; }
    for (size_t w = 0; w < wt.n_words; w++) {
        sym_off[w] = (int32_t)wt.w_off[w];
        sym_len[w] = (int32_t)wt.w_len[w];
        wstamp[w] = -1;
        for (size_t k = 0; k < wt.w_len[w]; k++) syms[wt.w_off[w] + k] = wt.arena[wt.w_off[w] + k];
    }
    if ((rc = u64map_init(&pt.index, 1 << 16))) goto done;
    for (size_t w = 0; w < wt.n_words && !rc; w++) {
        int32_t *s = syms + sym_off[w];
        for (int32_t k = 0; k + 1 < sym_len[w] && !rc; k++)
            rc = pair_add(&pt, s[k], s[k + 1], (int64_t)wt.w_count[w], 0, (int32_t)w);
    }
    for (size_t i = 0; i < pt.n && !rc; i++) rc = pq_push(&pt, pt.p[i].count, pt.p[i].left, pt.p[i].right);
    pt.n_touched = 0;
    if (rc) goto done;

    /* Merge loop. Heap invariant: every pair with count > 0 has an entry whose count is >= its
     * current count (entries are pushed whenever a count rises). A popped entry whose count
     * differs from the pair's is stale: if it is above, the pair is pushed again with its
     * current count; if below, a newer entry exists. So the first fresh entry popped is the true
     * maximum under the (count desc, left asc, right asc) order. */
    while (n_merges < n_merges_max && pt.heap_n && !rc) {
        struct heap_e e = pq_pop(&pt);
        int32_t pid = u64map_get(&pt.index, pair_key(e.left, e.right));
        pair_stat *ps = &pt.p[pid];
        if (e.count != ps->count) {
            if (e.count > ps->count && ps->count > 0) rc = pq_push(&pt, ps->count, e.left, e.right);
            continue;
        }
        if ((uint64_t)e.count < min_count) break;
        int32_t step = (int32_t)n_merges + 1, z = 256 + (int32_t)n_merges;
        m_left[n_merges] = e.left;
        m_right[n_merges] = e.right;
        n_merges++;
        int32_t *wl = ps->words;
        uint32_t nwl = ps->n_words;
        ps->words = NULL;
        ps->n_words = ps->cap_words = 0;
        for (uint32_t q = 0; q < nwl && !rc; q++) {
            int32_t w = wl[q];
            if (wstamp[w] == step) continue;
            wstamp[w] = step;
            int32_t *s = syms + sym_off[w], n = sym_len[w];
            int found = 0;
            for (int32_t k = 0; k + 1 < n && !found; k++) found = s[k] == e.left && s[k + 1] == e.right;
            if (!found) continue;
            int64_t c = (int64_t)wt.w_count[w];
            for (int32_t k = 0; k + 1 < n && !rc; k++) rc = pair_add(&pt, s[k], s[k + 1], -c, step, -1);
            int32_t j = 0;
            for (int32_t k = 0; k < n;) {
                if (k + 1 < n && s[k] == e.left && s[k + 1] == e.right) {
                    s[j++] = z;
                    k += 2;
                } else {
                    s[j++] = s[k++];
                }
            }
            sym_len[w] = n = j;
            /* Only pairs holding the new token are new to this word's place lists. */
            for (int32_t k = 0; k + 1 < n && !rc; k++)
                rc = pair_add(&pt, s[k], s[k + 1], c, step, (s[k] == z || s[k + 1] == z) ? w : -1);
        }
        free(wl);
        for (size_t k = 0; k < pt.n_touched && !rc; k++) {
            pair_stat *q = &pt.p[pt.touched[k]];
            if (q->count > q->count_before) rc = pq_push(&pt, q->count, q->left, q->right);
        }
        pt.n_touched = 0;
        if (verbose && n_merges % 512 == 0)
            fprintf(stderr, "tokenize train: %zu merges, last count %lld\n", n_merges, (long long)e.count);
    }
    if (rc) goto done;

    /* Build the tokenizer: bytes, merge results in order, then <|endoftext|>. */
    {
        size_t nv = 256 + n_merges + 1;
        uint32_t *tl = sl_malloc(nv * sizeof *tl);
        if (!tl) { rc = SL_EFAIL; goto done; }
        size_t total = 256 + strlen(EOT);
        for (size_t i = 0; i < 256; i++) tl[i] = 1;
        for (size_t r = 0; r < n_merges; r++) {
            tl[256 + r] = tl[m_left[r]] + tl[m_right[r]];
            total += tl[256 + r];
        }
        t = tok_alloc(nv, total, n_merges);
        if (!t) { free(tl); rc = SL_EFAIL; goto done; }
        size_t pos = 0;
        for (size_t i = 0; i < 256; i++) {
            t->off[i] = (uint32_t)pos;
            t->bytes[pos++] = (unsigned char)i;
        }
        for (size_t r = 0; r < n_merges; r++) {
            int32_t a = m_left[r], b = m_right[r];
            t->off[256 + r] = (uint32_t)pos;
            memcpy(t->bytes + pos, t->bytes + t->off[a], tl[a]);
            memcpy(t->bytes + pos + tl[a], t->bytes + t->off[b], tl[b]);
            pos += tl[a] + tl[b];
            t->merge_left[r] = a;
            t->merge_right[r] = b;
        }
        free(tl);
        t->off[nv - 1] = (uint32_t)pos;
        memcpy(t->bytes + pos, EOT, strlen(EOT));
        pos += strlen(EOT);
        t->off[nv] = (uint32_t)pos;
        t->is_special[nv - 1] = 1;
        t->special = sl_malloc(sizeof *t->special);
        if (!t->special) { rc = SL_EFAIL; goto done; }
        t->special[0] = (int32_t)(nv - 1);
        t->n_special = 1;
        rc = tok_finish(t, "trained tokenizer");
    }
    if (verbose) fprintf(stderr, "tokenize train: done, %zu merges, vocab %zu\n", n_merges, n_merges + 257);

done:
    if (p.md) pcre2_match_data_free(p.md);
    if (re) pcre2_code_free(re);
    free(wt.arena);
    free(wt.w_off);
    free(wt.w_len);
    free(wt.w_count);
    free(wt.chain);
    u64map_free(&wt.index);
    for (size_t i = 0; i < pt.n; i++) free(pt.p[i].words);
    free(pt.p);
    free(pt.touched);
    free(pt.heap);
    u64map_free(&pt.index);
    free(syms);
    free(sym_off);
    free(sym_len);
    free(wstamp);
    free(m_left);
    free(m_right);
    if (rc) {
        sl_tok_free(t);
        return rc;
    }
    *out = t;
    return SL_OK;
}
