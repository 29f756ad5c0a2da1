/* test_tok_sp.c: the sp-bpe tokenizer (models/sl_tok_sp.c, rules in sl_tok.h): hand-computed
 * encodings on a tiny vocabulary (score ties, byte fallback, unk, dummy prefix, BOS/EOS), the heap
 * encoder against llama2.c's quadratic loop (sl_tok_encode_ref) on random vocabularies and
 * strings, lossless round trips, JSON round trips, malformed JSON, sl_tok_same_vocab.
 * Comparison with llama's own tokenizer (npm llama-tokenizer-js) is in tests/cli/tokenize_llama.py.
 * Tokenization is discrete, so every comparison here is exact. */
#include <criterion/criterion.h>
#include <json-c/json.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sl_common.h"
#include "sl_tok.h"

#define SP "\xe2\x96\x81" /* '▁' */

/* ---- building vocabularies ---- */

typedef struct {
    const char *text;
    float score;
    int type;
} piece;

typedef struct {
    int add_bos, add_eos, add_dummy_prefix, byte_fallback, with_bytes;
    int unk; /* id, or -1 */
} vopts;

static const vopts DEFAULTS = {1, 0, 1, 1, 1, 0};

/* Ids: 0 <unk>, 1 <s>, 2 </s>, then (with_bytes) the 256 byte pieces, then extra[]. */
enum { BYTE0 = 3, BASE = 3 + 256 };

static char *vocab_json(const piece *extra, size_t n_extra, vopts o)
{
    json_object *root = json_object_new_object(), *p = json_object_new_array(), *s = json_object_new_array(),
                *t = json_object_new_array();
    const char *ctl[3] = {"<unk>", "<s>", "</s>"};
    for (int i = 0; i < 3; i++) {
        json_object_array_add(p, json_object_new_string(ctl[i]));
        json_object_array_add(s, json_object_new_double(0));
        json_object_array_add(t, json_object_new_int(i ? 3 : 2));
    }
    for (int b = 0; o.with_bytes && b < 256; b++) {
        char buf[8];
        snprintf(buf, sizeof buf, "<0x%02X>", b);
        json_object_array_add(p, json_object_new_string(buf));
        json_object_array_add(s, json_object_new_double(0));
        json_object_array_add(t, json_object_new_int(6));
    }
    for (size_t i = 0; i < n_extra; i++) {
        json_object_array_add(p, json_object_new_string(extra[i].text));
        json_object_array_add(s, json_object_new_double(extra[i].score));
        json_object_array_add(t, json_object_new_int(extra[i].type ? extra[i].type : 1));
    }
    json_object_object_add(root, "type", json_object_new_string("sp-bpe"));
    json_object_object_add(root, "pieces", p);
    json_object_object_add(root, "scores", s);
    json_object_object_add(root, "types", t);
    json_object_object_add(root, "bos", json_object_new_int(1));
    json_object_object_add(root, "eos", json_object_new_int(2));
    json_object_object_add(root, "unk", json_object_new_int(o.unk));
    json_object_object_add(root, "add_bos", json_object_new_boolean(o.add_bos));
    json_object_object_add(root, "add_eos", json_object_new_boolean(o.add_eos));
    json_object_object_add(root, "add_dummy_prefix", json_object_new_boolean(o.add_dummy_prefix));
    json_object_object_add(root, "byte_fallback", json_object_new_boolean(o.byte_fallback));
    char *out = strdup(json_object_to_json_string_ext(root, JSON_C_TO_STRING_PLAIN));
    json_object_put(root);
    return out;
}

static sl_tok *vocab(const piece *extra, size_t n_extra, vopts o)
{
    char *j = vocab_json(extra, n_extra, o);
    sl_tok *t = NULL;
    cr_assert_eq(sl_tok_from_json(j, &t), SL_OK, "%s", sl_errmsg());
    free(j);
    return t;
}

/* The hand-made vocabulary; ids BASE + index. "ab" and "bc" tie at -1. */
static const piece TINY[] = {
    {SP, 0, 0},         /* B+0 */
    {"a", 0, 0},        /* B+1 */
    {"b", 0, 0},        /* B+2 */
    {"c", 0, 0},        /* B+3 */
    {"ab", -1, 0},      /* B+4 */
    {"bc", -1, 0},      /* B+5 */
    {SP "a", -2, 0},    /* B+6 */
    {SP "b", -0.5f, 0}, /* B+7 */
    {"\xc3\xa9", 0, 0}, /* B+8 'é' */
    {SP SP, -3, 0},     /* B+9 */
    {"<x>", 0, 4},      /* B+10 user-defined */
    {"zz", 5, 5},       /* B+11 unused: never produced */
    {"z", 0, 0},        /* B+12 */
};
#define NT (sizeof TINY / sizeof TINY[0])

static void expect_ids(const sl_tok *t, const char *s, size_t n, const int32_t *want, size_t n_want)
{
    for (int ref = 0; ref < 2; ref++) {
        int32_t *ids;
        size_t n_ids;
        int rc = ref ? sl_tok_encode_ref(t, s, n, &ids, &n_ids) : sl_tok_encode(t, s, n, &ids, &n_ids);
        cr_assert_eq(rc, SL_OK, "%s", sl_errmsg());
        char got[512] = "", exp[512] = "";
        for (size_t i = 0; i < n_ids; i++) snprintf(got + strlen(got), sizeof got - strlen(got), " %d", ids[i]);
        for (size_t i = 0; i < n_want; i++) snprintf(exp + strlen(exp), sizeof exp - strlen(exp), " %d", want[i]);
        cr_assert_str_eq(got, exp, "encode%s(\"%.*s\"): got%s, expected%s", ref ? "_ref" : "", (int)n, s, got, exp);
        free(ids);
    }
}
#define EXPECT(t, s, ...)                                                                                  \
    do {                                                                                                    \
        const int32_t w_[] = {__VA_ARGS__};                                                                 \
        expect_ids(t, s, sizeof(s) - 1, w_, sizeof w_ / sizeof w_[0]);                                      \
    } while (0)

static void expect_decode(const sl_tok *t, const int32_t *ids, size_t n, const char *want)
{
    char *out;
    size_t n_out;
    cr_assert_eq(sl_tok_decode(t, ids, n, &out, &n_out), SL_OK, "%s", sl_errmsg());
    cr_assert_eq(n_out, strlen(want), "decode: got \"%s\", expected \"%s\"", out, want);
    cr_assert_eq(memcmp(out, want, n_out), 0, "decode: got \"%s\", expected \"%s\"", out, want);
    free(out);
}

/* ---- hand-computed encodings ---- */

Test(tok_sp, hand_computed_encodings)
{
    enum { B = BASE, X = BYTE0 };
    sl_tok *t = vocab(TINY, NT, DEFAULTS);
    cr_assert_str_eq(sl_tok_kind(t), "sp-bpe");
    cr_assert_eq(sl_tok_vocab_size(t), BASE + NT);
    cr_assert_eq(sl_tok_n_merges(t), 0);
    /* "▁abc": ▁a -2, ab -1 (at 1), bc -1 (at 2): the tie goes to the leftmost, ab; then ▁ab, abc
     * are not pieces. (Taking bc first would give ▁a + bc.) */
    EXPECT(t, "abc", 1, B + 0, B + 4, B + 3);
    /* ▁b (-0.5) beats bc (-1). */
    EXPECT(t, "bc", 1, B + 7, B + 3);
    EXPECT(t, "ba", 1, B + 7, B + 1);
    /* "▁▁a": ▁a (-2) beats ▁▁ (-3). */
    EXPECT(t, " a", 1, B + 0, B + 6);
    /* "▁▁▁": ▁▁ at 0 and at 1 tie: leftmost, then ▁▁ + ▁ is not a piece. */
    EXPECT(t, "  ", 1, B + 9, B + 0);
    /* Byte fallback: 'x' and 'ü' (C3 BC) are not pieces; 'é' is. */
    EXPECT(t, "x", 1, B + 0, X + 'x');
    EXPECT(t, "\xc3\xbc", 1, B + 0, X + 0xC3, X + 0xBC);
    EXPECT(t, "\xc3\xa9", 1, B + 0, B + 8);
    /* A byte symbol in the middle: merging goes on around it. */
    EXPECT(t, "xab", 1, B + 0, X + 'x', B + 4);
    /* Invalid UTF-8: each byte its byte piece; a truncated 'é' too. */
    EXPECT(t, "a\xff", 1, B + 6, X + 0xFF);
    EXPECT(t, "\xc3", 1, B + 0, X + 0xC3);
    EXPECT(t, "\xc3z", 1, B + 0, X + 0xC3, B + 12);
    /* The empty string: BOS only, no dummy prefix. */
    EXPECT(t, "", 1);
    /* A user-defined piece is looked up like a normal one but not matched as a whole ('<', 'x',
     * '>' are not pieces); an unused piece is never produced. */
    EXPECT(t, "zz", 1, B + 0, B + 12, B + 12);
    /* NUL is an ordinary byte. */
    {
        const int32_t w[] = {1, B + 0, X + 0, B + 1};
        expect_ids(t, "\0a", 2, w, 4);
    }
    /* Special texts are not recognised in the input. */
    EXPECT(t, "<s>", 1, B + 0, X + '<', X + 's', X + '>');
    sl_tok_free(t);

    vopts o = DEFAULTS;
    o.add_dummy_prefix = 0;
    t = vocab(TINY, NT, o);
    EXPECT(t, "abc", 1, B + 4, B + 3);
    EXPECT(t, " a", 1, B + 6);
    EXPECT(t, "a", 1, B + 1);
    sl_tok_free(t);

    o = DEFAULTS;
    o.add_bos = 0;
    o.add_eos = 1;
    t = vocab(TINY, NT, o);
    EXPECT(t, "a", B + 6, 2);
    EXPECT(t, "", 2);
    sl_tok_free(t);

    o = DEFAULTS;
    o.add_bos = 0;
    t = vocab(TINY, NT, o);
    {
        int32_t *ids;
        size_t n_ids = 99;
        cr_assert_eq(sl_tok_encode(t, "", 0, &ids, &n_ids), SL_OK);
        cr_assert_eq(n_ids, 0);
        free(ids);
    }
    sl_tok_free(t);
}

Test(tok_sp, unk_without_byte_fallback)
{
    enum { B = BASE, X = BYTE0 };
    /* Byte pieces present but byte_fallback off: a missing character is one unk; a byte that is
     * not valid UTF-8 still takes its byte piece. */
    vopts o = DEFAULTS;
    o.byte_fallback = 0;
    sl_tok *t = vocab(TINY, NT, o);
    EXPECT(t, "xa", 1, B + 0, 0, B + 1);
    EXPECT(t, "\xc3\xbc\xc3\xbc", 1, B + 0, 0, 0);
    EXPECT(t, "a\xff", 1, B + 6, X + 0xFF);
    sl_tok_free(t);
    /* No byte pieces at all: ids shift down by 256; invalid bytes become unk too. */
    o.with_bytes = 0;
    t = vocab(TINY, NT, o);
    enum { C = 3 };
    EXPECT(t, "xa", 1, C + 0, 0, C + 1);
    EXPECT(t, "a\xff\xfe", 1, C + 6, 0, 0);
    EXPECT(t, "abc", 1, C + 0, C + 4, C + 3);
    int32_t ids[] = {1, C + 6, 0, C + 3, 2};
    expect_decode(t, ids, 5, "a<unk>c");
    sl_tok_free(t);
}

Test(tok_sp, decode_and_token_bytes)
{
    enum { B = BASE, X = BYTE0 };
    sl_tok *t = vocab(TINY, NT, DEFAULTS);
    size_t len;
    const char *b = sl_tok_token_bytes(t, B + 0, &len);
    cr_assert(len == 1 && b[0] == ' ');
    b = sl_tok_token_bytes(t, B + 6, &len);
    cr_assert(len == 2 && !memcmp(b, " a", 2));
    b = sl_tok_token_bytes(t, X + 0x41, &len);
    cr_assert(len == 1 && b[0] == 'A');
    b = sl_tok_token_bytes(t, X + 0, &len);
    cr_assert(len == 1 && b[0] == 0);
    b = sl_tok_token_bytes(t, 1, &len);
    cr_assert(len == 3 && !memcmp(b, "<s>", 3));
    b = sl_tok_token_bytes(t, 0, &len);
    cr_assert(len == 5 && !memcmp(b, "<unk>", 5));
    cr_assert_null(sl_tok_token_bytes(t, -1, &len));
    cr_assert_null(sl_tok_token_bytes(t, (int32_t)(BASE + NT), &len));
    cr_assert_eq(sl_tok_special_id(t, "<s>"), 1);
    cr_assert_eq(sl_tok_special_id(t, "</s>"), 2);
    cr_assert_eq(sl_tok_special_id(t, "<unk>"), 0);
    cr_assert_eq(sl_tok_special_id(t, "<x>"), B + 10);
    cr_assert_eq(sl_tok_special_id(t, "a"), -1);
    cr_assert_eq(sl_tok_special_id(t, "<|endoftext|>"), -1);
    cr_assert_eq(sl_tok_bos(t), 1);
    cr_assert_eq(sl_tok_eos(t), 2);

    /* BOS, EOS and control pieces are skipped; the dummy prefix's space is dropped once. */
    int32_t a[] = {1, B + 0, B + 4, B + 3, 2};
    expect_decode(t, a, 5, "abc");
    int32_t b2[] = {B + 0, B + 0, B + 6, 1, 2};
    expect_decode(t, b2, 5, "  a");
    int32_t c[] = {B + 1, X + 0xC3, X + 0xBC};
    expect_decode(t, c, 3, "a\xc3\xbc");
    expect_decode(t, c, 0, "");
    int32_t bad[] = {B + 1, (int32_t)(BASE + NT)};
    char *out;
    size_t n_out;
    cr_assert_eq(sl_tok_decode(t, bad, 2, &out, &n_out), SL_EINPUT);
    cr_assert(strstr(sl_errmsg(), "outside"), "%s", sl_errmsg());

    /* One pre-tokenisation piece; merge_piece is a no-op. */
    size_t *ends, n_p;
    cr_assert_eq(sl_tok_split(t, "ab c", 4, &ends, &n_p), SL_OK);
    cr_assert(n_p == 1 && ends[0] == 4);
    free(ends);
    sl_tok_free(t);

    vopts o = DEFAULTS;
    o.add_dummy_prefix = 0;
    t = vocab(TINY, NT, o);
    expect_decode(t, b2, 5, "   a");
    sl_tok_free(t);
}

/* ---- heap vs quadratic loop, round trips ---- */

static uint64_t rng_next(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

/* A random vocabulary over the characters a, b, c, d, ▁, é: all of them, plus n_multi random
 * strings of 2..6 characters with scores from a small set (many ties). */
static sl_tok *random_vocab(uint64_t *rs, size_t n_multi, vopts o)
{
    static const char *chars[] = {"a", "b", "c", "d", SP, "\xc3\xa9"};
    static char texts[400][32];
    piece p[406];
    size_t n = 0;
    for (int i = 0; i < 6; i++) p[n++] = (piece){chars[i], 0, 1};
    while (n < 6 + n_multi) {
        char *s = texts[n - 6];
        s[0] = 0;
        int len = 2 + (int)(rng_next(rs) % 5);
        for (int k = 0; k < len; k++) strcat(s, chars[rng_next(rs) % 6]);
        int dup = 0;
        for (size_t j = 0; j < n; j++) dup |= !strcmp(p[j].text, s);
        if (dup) continue;
        p[n++] = (piece){s, -(float)(rng_next(rs) % 8), 1};
    }
    return vocab(p, n, o);
}

static size_t random_text(uint64_t *rs, char *buf, size_t max_chars)
{
    static const char *alpha[] = {"a", "b", "c", "d", " ", " ", "\xc3\xa9", "x", "\t", "\xe6\x97\xa5", "\xf0\x9f\x98\x80", "\xff"};
    size_t n = 0, len = rng_next(rs) % (max_chars + 1);
    for (size_t k = 0; k < len; k++) {
        const char *c = alpha[rng_next(rs) % 12];
        memcpy(buf + n, c, strlen(c));
        n += strlen(c);
    }
    return n;
}

Test(tok_sp, heap_equals_quadratic_loop_and_roundtrips)
{
    uint64_t rs = 0x9e3779b97f4a7c15ULL;
    char buf[4 * 200 + 1];
    size_t cases = 0;
    for (int v = 0; v < 8; v++) {
        vopts o = DEFAULTS;
        o.add_dummy_prefix = v % 2;
        sl_tok *t = random_vocab(&rs, v < 4 ? 60 : 300, o);
        for (int k = 0; k < 60; k++, cases++) {
            size_t n = random_text(&rs, buf, k < 50 ? 40 : 200);
            int32_t *a, *b;
            size_t na, nb;
            cr_assert_eq(sl_tok_encode(t, buf, n, &a, &na), SL_OK);
            cr_assert_eq(sl_tok_encode_ref(t, buf, n, &b, &nb), SL_OK);
            cr_assert(na == nb && !memcmp(a, b, na * sizeof *a), "vocab %d case %d: heap and loop differ", v, k);
            /* With byte fallback every string comes back (the alphabet has no literal '▁'). */
            char *back;
            size_t nback;
            cr_assert_eq(sl_tok_decode(t, a, na, &back, &nback), SL_OK);
            cr_assert(nback == n && !memcmp(back, buf, n), "vocab %d case %d: decode(encode(s)) != s", v, k);
            free(back);
            free(a);
            free(b);
        }
        sl_tok_free(t);
    }
    cr_assert_eq(cases, 480);
}

Test(tok_sp, all_scores_equal_and_long_input)
{
    /* Every pair ties: the leftmost rule alone decides, over long runs. */
    piece p[] = {{"a", 0, 1}, {SP, 0, 1}, {"aa", 0, 1}, {"aaa", 0, 1}, {"aaaa", 0, 1}, {SP "a", 0, 1}, {SP SP, 0, 1}};
    sl_tok *t = vocab(p, 7, DEFAULTS);
    size_t n = 3000;
    char *s = malloc(n);
    uint64_t rs = 42;
    for (size_t i = 0; i < n; i++) s[i] = rng_next(&rs) % 5 ? 'a' : ' ';
    int32_t *a, *b;
    size_t na, nb;
    cr_assert_eq(sl_tok_encode(t, s, n, &a, &na), SL_OK);
    cr_assert_eq(sl_tok_encode_ref(t, s, n, &b, &nb), SL_OK);
    cr_assert(na == nb && !memcmp(a, b, na * sizeof *a), "heap and loop differ on 3000 bytes");
    free(a);
    free(b);
    /* "▁aaaaa" with all ties: ▁a (leftmost), then aa, aaa, aaaa growing from the left. */
    EXPECT(t, "aaaaa", 1, BASE + 5, BASE + 4);
    free(s);
    /* 1 MB through the heap version only (the loop would take minutes): it must finish and round trip. */
    n = 1 << 20;
    s = malloc(n);
    for (size_t i = 0; i < n; i++) s[i] = rng_next(&rs) % 5 ? 'a' : ' ';
    cr_assert_eq(sl_tok_encode(t, s, n, &a, &na), SL_OK);
    char *back;
    size_t nback;
    cr_assert_eq(sl_tok_decode(t, a, na, &back, &nback), SL_OK);
    cr_assert(nback == n && !memcmp(back, s, n));
    free(back);
    free(a);
    free(s);
    sl_tok_free(t);
}

/* ---- JSON ---- */

Test(tok_sp, json_roundtrip)
{
    piece p[] = {{"a", 0.1f, 1}, {"b", -1e-30f, 1}, {"ab", 3.4e38f, 1}, {SP, -7.25f, 4}, {"q", 0, 5}};
    vopts o = {0, 1, 0, 1, 1, -1};
    char *j = vocab_json(p, 5, o);
    sl_tok *t;
    cr_assert_eq(sl_tok_from_json(j, &t), SL_OK, "%s", sl_errmsg());
    char *j1 = sl_tok_to_json(t);
    cr_assert_not_null(j1);
    sl_tok *t2;
    cr_assert_eq(sl_tok_from_json(j1, &t2), SL_OK, "%s", sl_errmsg());
    char *j2 = sl_tok_to_json(t2);
    cr_assert_str_eq(j1, j2, "to_json(from_json(to_json(t))) differs from to_json(t)");
    int32_t f;
    cr_assert_eq(sl_tok_same_vocab(t, t2, &f), 1);
    cr_assert_eq(sl_tok_bos(t2), 1);
    cr_assert_eq(sl_tok_eos(t2), 2);
    /* The flags survive: no BOS, EOS added, no dummy prefix. */
    const int32_t w[] = {BASE + 2, BASE + 3, 2};
    expect_ids(t2, "ab ", 3, w, 3);
    /* Scores survive exactly (0.1f is not 0.1; 3.4e38 is near FLT_MAX). */
    json_object *r = json_tokener_parse(j1), *sc;
    cr_assert(json_object_object_get_ex(r, "scores", &sc));
    cr_assert_eq((float)json_object_get_double(json_object_array_get_idx(sc, BASE + 0)), 0.1f);
    cr_assert_eq((float)json_object_get_double(json_object_array_get_idx(sc, BASE + 2)), 3.4e38f);
    json_object_put(r);
    free(j);
    free(j1);
    free(j2);
    sl_tok_free(t);
    sl_tok_free(t2);
}

static void expect_bad(const char *json, const char *fragment)
{
    sl_tok *t = (sl_tok *)1;
    int rc = sl_tok_from_json(json, &t);
    cr_assert_eq(rc, SL_EINPUT, "accepted or wrong code (%d) for %.300s", rc, json);
    cr_assert_null(t);
    cr_assert(strstr(sl_errmsg(), fragment), "message \"%s\" lacks \"%s\"", sl_errmsg(), fragment);
    cr_assert_null(strchr(sl_errmsg(), '\n'), "message is more than one line: %s", sl_errmsg());
}

/* A valid small document with one substitution: key's value replaced by val (NULL: key removed). */
static char *with(const char *key, const char *val)
{
    const char *keys[] = {"type", "pieces", "scores", "types", "bos", "eos", "unk", "add_bos", "add_eos",
                          "add_dummy_prefix", "byte_fallback"};
    const char *vals[] = {"\"sp-bpe\"", "[\"<unk>\",\"<s>\",\"</s>\",\"a\",\"b\",\"ab\"]", "[0,0,0,0,0,-1.5]",
                          "[2,3,3,1,1,1]", "1", "2", "0", "true", "false", "true", "false"};
    char *out = malloc(4096);
    strcpy(out, "{");
    for (int i = 0; i < 11; i++) {
        const char *v = strcmp(keys[i], key) ? vals[i] : val;
        if (!v) continue;
        snprintf(out + strlen(out), 4096 - strlen(out), "%s\"%s\":%s", strlen(out) > 1 ? "," : "", keys[i], v);
    }
    strcat(out, "}");
    return out;
}

#define BAD(key, val, frag)             \
    do {                                \
        char *j_ = with(key, val);      \
        expect_bad(j_, frag);           \
        free(j_);                       \
    } while (0)

Test(tok_sp, malformed_json_is_einput)
{
    char *ok = with("", NULL);
    sl_tok *t;
    cr_assert_eq(sl_tok_from_json(ok, &t), SL_OK, "the helper's valid case: %s", sl_errmsg());
    sl_tok_free(t);
    free(ok);

    BAD("type", "\"sp\"", "sp-bpe");
    BAD("pieces", NULL, "\"pieces\" must be an array");
    BAD("pieces", "{}", "\"pieces\" must be an array");
    BAD("pieces", "[]", "\"pieces\" has 0 entries");
    BAD("pieces", "[\"<unk>\",\"<s>\",\"</s>\",\"a\",\"b\",7]", "pieces[5] is not a string");
    BAD("pieces", "[\"<unk>\",\"<s>\",\"</s>\",\"a\",\"b\",\"\"]", "pieces[5] is empty");
    BAD("pieces", "[\"<unk>\",\"<s>\",\"</s>\",\"a\",\"b\",\"\xff\"]", "pieces[5] is not valid UTF-8");
    BAD("pieces", "[\"<unk>\",\"<s>\",\"</s>\",\"a\",\"b\",\"\xed\xa0\x80\"]", "not valid UTF-8");
    BAD("pieces", "[\"<unk>\",\"<s>\",\"</s>\",\"a\",\"b\",\"a\"]", "pieces[3] and pieces[5] are the same");
    BAD("pieces", "[\"<unk>\",\"<s>\",\"</s>\",\"a\",\"b\"]", "\"scores\" has 6 entries but \"pieces\" has 5");
    BAD("scores", "[0,0,0,0,0]", "\"scores\" has 5 entries");
    BAD("scores", NULL, "\"scores\" must be an array");
    BAD("scores", "[0,0,0,0,0,\"x\"]", "scores[5]");
    BAD("scores", "[0,0,0,0,0,1e39]", "scores[5]");
    BAD("scores", "[0,0,0,0,0,-1e39]", "scores[5]");
    BAD("scores", "[0,0,0,0,0,NaN]", "scores[5]");
    BAD("scores", "[0,0,0,0,0,null]", "scores[5]");
    BAD("types", "[2,3,3,1,1]", "\"types\" has 5 entries");
    BAD("types", "[2,3,3,1,1,0]", "types[5]");
    BAD("types", "[2,3,3,1,1,7]", "types[5]");
    BAD("types", "[2,3,3,1,1,\"1\"]", "types[5]");
    BAD("types", "[2,3,3,1,1,6]", "pieces[5] \"ab\" has type 6 (byte) but is not \"<0xXX>\"");
    BAD("bos", "6", "\"bos\" must be an integer id in [-1, 6)");
    BAD("bos", "-2", "\"bos\"");
    BAD("bos", "\"1\"", "\"bos\"");
    BAD("bos", NULL, "\"bos\"");
    BAD("eos", "1.5", "\"eos\"");
    BAD("unk", "99", "\"unk\"");
    BAD("add_bos", "1", "\"add_bos\" must be true or false");
    BAD("add_eos", NULL, "\"add_eos\"");
    BAD("add_dummy_prefix", "\"yes\"", "\"add_dummy_prefix\"");
    BAD("byte_fallback", "null", "\"byte_fallback\"");
    BAD("bos", "-1", "\"add_bos\" is true but \"bos\" is -1");
    BAD("bos", "3", "\"bos\" is piece 3 of type 1, expected a control piece");
    BAD("eos", "0", "\"eos\" is piece 0 of type 2, expected a control piece");
    BAD("unk", "1", "\"unk\" is piece 1 of type 3, expected an unknown piece");
    BAD("byte_fallback", "true", "no byte piece <0x00>");
    BAD("unk", "-1", "\"unk\" is -1");
    {
        /* add_eos with eos -1. */
        char j[4096];
        char *a = with("add_eos", "true");
        char *p = strstr(a, "\"eos\":2");
        *p = 0;
        snprintf(j, sizeof j, "%s\"eos\":-1%s", a, p + 7);
        expect_bad(j, "\"add_eos\" is true but \"eos\" is -1");
        free(a);
    }
    /* Byte pieces: lower-case hex is not a byte piece. */
    {
        piece p[] = {{"<0xff>", 0, 6}};
        vopts o = DEFAULTS;
        o.with_bytes = 0;
        o.byte_fallback = 0;
        char *j = vocab_json(p, 1, o);
        expect_bad(j, "is not \"<0xXX>\"");
        free(j);
    }
    expect_bad("{\"type\":\"sp-bpe\"", "malformed JSON");
}

/* ---- sl_tok_same_vocab ---- */

Test(tok_sp, same_vocab)
{
    sl_tok *a = vocab(TINY, NT, DEFAULTS);
    vopts o = DEFAULTS;
    o.add_bos = 0; /* flags and scores do not matter, only each id's bytes */
    piece p2[NT];
    memcpy(p2, TINY, sizeof p2);
    for (size_t i = 0; i < NT; i++) p2[i].score = -(float)i;
    sl_tok *b = vocab(p2, NT, o);
    int32_t f = -7;
    cr_assert_eq(sl_tok_same_vocab(a, b, &f), 1);
    cr_assert_eq(f, -7, "first_diff is left alone when equal");
    sl_tok_free(b);
    /* One piece changed. */
    p2[4].text = "ba";
    b = vocab(p2, NT, o);
    cr_assert_eq(sl_tok_same_vocab(a, b, &f), 0);
    cr_assert_eq(f, BASE + 4);
    sl_tok_free(b);
    /* A prefix of the vocabulary: differ only in size. */
    b = vocab(TINY, NT - 2, o);
    cr_assert_eq(sl_tok_same_vocab(a, b, &f), 0);
    cr_assert_eq(f, BASE + NT - 2);
    cr_assert_eq(sl_tok_same_vocab(b, a, NULL), 0);
    sl_tok_free(b);
    /* '▁' vs a literal space piece: the same bytes (" "), so the same vocabulary. */
    memcpy(p2, TINY, sizeof p2);
    p2[0].text = " ";
    b = vocab(p2, NT, o);
    cr_assert_eq(sl_tok_same_vocab(a, b, &f), 1);
    sl_tok_free(b);
    sl_tok_free(a);

    /* Across kinds: a trained byte-bpe tokenizer of 257 tokens (bytes 0..255 then
     * <|endoftext|>) and an sp-bpe one of the 256 byte pieces then a control "<|endoftext|>". */
    const char *texts[] = {"hello"};
    size_t lens[] = {5};
    sl_tok *bb;
    cr_assert_eq(sl_tok_train(texts, lens, 1, 257, NULL, &bb), SL_OK, "%s", sl_errmsg());
    cr_assert_str_eq(sl_tok_kind(bb), "byte-bpe");
    cr_assert_eq(sl_tok_bos(bb), -1);
    cr_assert_eq(sl_tok_eos(bb), 256);
    json_object *root = json_object_new_object(), *pp = json_object_new_array(), *ss = json_object_new_array(),
                *tt = json_object_new_array();
    for (int i = 0; i < 257; i++) {
        char buf[16];
        snprintf(buf, sizeof buf, i < 256 ? "<0x%02X>" : "<|endoftext|>", i);
        json_object_array_add(pp, json_object_new_string(buf));
        json_object_array_add(ss, json_object_new_double(0));
        json_object_array_add(tt, json_object_new_int(i < 256 ? 6 : 3));
    }
    json_object_object_add(root, "type", json_object_new_string("sp-bpe"));
    json_object_object_add(root, "pieces", pp);
    json_object_object_add(root, "scores", ss);
    json_object_object_add(root, "types", tt);
    json_object_object_add(root, "bos", json_object_new_int(-1));
    json_object_object_add(root, "eos", json_object_new_int(256));
    json_object_object_add(root, "unk", json_object_new_int(-1));
    json_object_object_add(root, "add_bos", json_object_new_boolean(0));
    json_object_object_add(root, "add_eos", json_object_new_boolean(0));
    json_object_object_add(root, "add_dummy_prefix", json_object_new_boolean(0));
    json_object_object_add(root, "byte_fallback", json_object_new_boolean(1));
    sl_tok *sp;
    cr_assert_eq(sl_tok_from_json(json_object_to_json_string(root), &sp), SL_OK, "%s", sl_errmsg());
    json_object_put(root);
    cr_assert_eq(sl_tok_same_vocab(bb, sp, &f), 1, "differs at %d", f);
    cr_assert_eq(sl_tok_same_vocab(sp, bb, NULL), 1);
    /* This sp-bpe tokenizer has no character pieces: every byte is its own token, as in a
     * byte-bpe tokenizer without merges. */
    int32_t *ids;
    size_t n_ids;
    cr_assert_eq(sl_tok_encode(sp, "hi\xff", 3, &ids, &n_ids), SL_OK);
    cr_assert(n_ids == 3 && ids[0] == 'h' && ids[1] == 'i' && ids[2] == 0xff);
    free(ids);
    /* Without a '▁' piece a space falls back to the three bytes of '▁' (the most ids per input
     * byte), and decodes to them. */
    const int32_t w[] = {0xe2, 0x96, 0x81, 'a', 0xe2, 0x96, 0x81, 0xe2, 0x96, 0x81};
    expect_ids(sp, " a  ", 4, w, 10);
    expect_decode(sp, w, 10, SP "a" SP SP);
    sl_tok_free(sp);
    sl_tok_free(bb);
}

/* sl_tok_encode_ref also covers byte-bpe: GPT-2's pass-by-pass merges for every piece must give
 * what sl_tok_encode gives (heap merges for pieces over 12 bytes). */
Test(tok_sp, byte_bpe_encode_ref_equals_encode)
{
    FILE *f = fopen("models/tokenizer.json", "rb");
    cr_assert_not_null(f, "models/tokenizer.json (tests run from the repository root)");
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    rewind(f);
    char *j = malloc((size_t)n + 1);
    cr_assert_eq(fread(j, 1, (size_t)n, f), (size_t)n);
    j[n] = 0;
    fclose(f);
    sl_tok *t;
    cr_assert_eq(sl_tok_from_json(j, &t), SL_OK, "%s", sl_errmsg());
    free(j);
    cr_assert_str_eq(sl_tok_kind(t), "byte-bpe");
    uint64_t rs = 7;
    char buf[4 * 200 + 64];
    for (int k = 0; k < 100; k++) {
        size_t len = random_text(&rs, buf, 200);
        if (k % 10 == 0) {
            memset(buf + len, 'a' + k % 26, 40); /* a long piece: the heap path */
            len += 40;
        }
        int32_t *a, *b;
        size_t na, nb;
        cr_assert_eq(sl_tok_encode(t, buf, len, &a, &na), SL_OK);
        cr_assert_eq(sl_tok_encode_ref(t, buf, len, &b, &nb), SL_OK);
        cr_assert(na == nb && !memcmp(a, b, na * sizeof *a), "case %d: encode and encode_ref differ", k);
        free(a);
        free(b);
    }
    sl_tok_free(t);
}
